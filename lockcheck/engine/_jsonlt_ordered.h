/*
 * lockcheck.engine._jsonlt's quickest reading of a clean line: the common lock event written in the `.lt`
 * format's own order, `{"task": T, "op": "acquire"|"release", "lock": L[, "instance": I][, "mode": M]
 * [, "at": S][, "ts": N][, "cpu": N]}` (as json.dumps writes it), its `.lt` line written while it is read.
 *
 * Why (issue 23): fast_line reads any order of members into values, and write_event checks and writes them
 * again: ~770 instructions a line, the most of JSON Lines' cost over `.lt`.  In this order each member
 * starts where the one before ended, so its `", "KEY": "` is compared where it must be (16 bytes, one
 * compare), a known word (the op, the mode) is compared as a word with its closing quote, and each value
 * is copied to the `.lt` line as soon as its closing quote is found.  Any other line -- another op or
 * member, a null, another order or spacing, a name with a blank, `@` or `=` -- is fast_line's: this
 * writes nothing then (the bytes written past the buffer's length are not kept), so what it takes is a
 * part of what fast_line and write_event take, written as they write it (tests/test_jsonl_translate.py
 * and test_jsonl_hints.py hold them together).
 *
 * Included by _jsonlt.c alone, after _jsonlt_fast.h (the masks, next_quote, count_special).
 */

#ifndef LOCKCHECK_JSONLT_ORDERED_H
#define LOCKCHECK_JSONLT_ORDERED_H

/* The literal between two members, from the closing quote of a string (`", "KEY": "`) or from the end of a
 * number (`, "KEY": `), and the bits of the bytes compared (up to 16). */
typedef struct {
    char text[16];
    unsigned want;
    int n;
} OrderedLit;

enum { OL_TASK, OL_OP, OL_LOCK, OL_INSTANCE, OL_MODE, OL_AT, OL_TS, OL_CPU, OL_COUNT };
static OrderedLit ordered_lits[OL_COUNT];

static void ordered_lit(int i, const char *text) {
    OrderedLit *l = &ordered_lits[i];
    memset(l->text, 0, sizeof(l->text));
    l->n = (int)strlen(text);
    memcpy(l->text, text, (size_t)l->n);
    l->want = (1u << l->n) - 1;
}

static void ordered_init(void) {
    ordered_lit(OL_TASK, "{\"task\": \"");
    ordered_lit(OL_OP, "\", \"op\": \"");
    ordered_lit(OL_LOCK, "\", \"lock\": \"");
    ordered_lit(OL_INSTANCE, "\", \"instance\": \"");
    ordered_lit(OL_MODE, "\", \"mode\": \"");
    ordered_lit(OL_AT, "\", \"at\": \"");
    ordered_lit(OL_TS, "\", \"ts\": "); /* (after a string: ts is the first number) */
    ordered_lit(OL_CPU, ", \"cpu\": ");  /* (after the last string's quote or ts) */
}

/* Whether literal `i` is at `p` (16 bytes readable there). */
static ALWAYS_INLINE int ordered_at(const char *p, int i) {
#ifdef __SSE2__
    unsigned same = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(
        _mm_loadu_si128((const __m128i *)p), _mm_loadu_si128((const __m128i *)ordered_lits[i].text)));
    return (same & ordered_lits[i].want) == ordered_lits[i].want;
#else
    return memcmp(p, ordered_lits[i].text, (size_t)ordered_lits[i].n) == 0;
#endif
}

/* Whether the bytes at `p` start with `word` (a literal of fewer than 8 characters, its quote included),
 * 8 bytes readable there. */
#define WORD_AT(p, word)                                                                             \
    __extension__({                                                                                 \
        uint64_t x_, y_ = 0;                                                                        \
        memcpy(&x_, (p), 8);                                                                        \
        memcpy(&y_, word, sizeof(word) - 1);                                                        \
        (x_ & (sizeof(word) - 1 >= 8 ? ~0ULL : ((1ULL << (8 * (sizeof(word) - 1))) - 1))) == y_; \
    })

/* A JSON number at `p` as write_event takes it (unsigned, no exponent; `fraction` 0: an integer), its end
 * (bounded by `e`), or NULL. */
static ALWAYS_INLINE const char *ordered_number(const char *p, const char *e, int fraction) {
    const char *q = p;
    while (q < e && *q >= '0' && *q <= '9')
        q++;
    if (q == p || (*p == '0' && q - p > 1))
        return NULL;
    if (fraction && q < e && *q == '.') {
        const char *f = ++q;
        while (q < e && *q >= '0' && *q <= '9')
            q++;
        if (q == f)
            return NULL;
    }
    return q;
}

/* The `.lt` line of the clean line [s, e) of the block at `base` (`size` bytes, masks `m`) when it is the
 * common lock event in the `.lt` order (above): 1 written (and its split kept for note_line), 0 not such a
 * line (nothing written: fast_line's), -1 error. */
static int ordered_line(Translator *self, const char *base, Py_ssize_t size, const MaskWord *m, Py_ssize_t s,
                        Py_ssize_t e) {
    const char *p = base;
    /* every literal compared may read 16 bytes; a line that ends near the block's end is fast_line's */
    if (e + 16 > size || !ordered_at(p + s, OL_TASK))
        return 0;
    if (buf_reserve(self, e - s + 64) < 0)
        return -1;
    const char *const limit = base + size;
    char *w = self->buf + self->len, *const line = w, *ts_at = NULL;
    int members = 2; /* (task and op) */
    /* the task: a bare token, not a comment */
    Py_ssize_t at = s + 10, vc = next_quote(m, at);
    if (vc >= e || vc == at || p[at] == '#' || !ordered_at(p + vc, OL_OP))
        return 0;
    Py_ssize_t task_len = vc - at;
    w = copy_to(w, p + at, task_len, limit);
    at = vc + 10;
    /* the op, with its closing quote and the lock's literal after it */
    int acquire;
    if (WORD_AT(p + at, "acquire\""))
        acquire = 1;
    else if (WORD_AT(p + at, "release\""))
        acquire = 0;
    else
        return 0;
    if (!ordered_at(p + at + 7, OL_LOCK))
        return 0;
    memcpy(w, acquire ? " acquire " : " release ", 9);
    w += 9;
    /* the lock: a bare name */
    at += 7 + 12;
    vc = next_quote(m, at);
    if (vc >= e || vc == at || p[at] == '#')
        return 0;
    w = copy_to(w, p + at, vc - at, limit);
    members++;
    if (ordered_at(p + vc, OL_INSTANCE)) {
        at = vc + 16;
        vc = next_quote(m, at);
        if (vc >= e || vc == at)
            return 0;
        *w++ = '@';
        w = copy_to(w, p + at, vc - at, limit);
        members++;
    }
    if (ordered_at(p + vc, OL_MODE)) {
        at = vc + 12;
        if (WORD_AT(p + at, "write\"")) {
            vc = at + 5;
        } else if (acquire && WORD_AT(p + at, "read\"")) {
            memcpy(w, " read", 5);
            w += 5;
            vc = at + 4;
        } else if (acquire && WORD_AT(p + at, "rread\"")) {
            memcpy(w, " rread", 6);
            w += 6;
            vc = at + 5;
        } else {
            return 0;
        }
        members++;
    }
    if (ordered_at(p + vc, OL_AT)) {
        at = vc + 10;
        vc = next_quote(m, at);
        if (vc >= e || vc == at || p[at] == '#')
            return 0;
        memcpy(w, " at=", 4);
        w = copy_to(w + 4, p + at, vc - at, limit);
        members++;
    }
    /* vc: the last string's closing quote; then the end, or the numbers */
    Py_ssize_t end = vc + 1;
    if (ordered_at(p + vc, OL_TS)) {
        at = vc + 9;
        const char *num = ordered_number(p + at, p + e, 1);
        if (num == NULL || num - (p + at) > 40)
            return 0;
        ts_at = w;
        memcpy(w, " ts=", 4);
        w = copy_to(w + 4, p + at, num - (p + at), limit);
        end = num - p;
        members++;
    }
    if (ordered_at(p + end, OL_CPU)) {
        at = end + 9;
        const char *num = ordered_number(p + at, p + e, 0);
        if (num == NULL || num - (p + at) > 9)
            return 0;
        memcpy(w, " cpu=", 5);
        w = copy_to(w + 5, p + at, num - (p + at), limit);
        end = num - p;
        members++;
    }
    if (end + 1 != e || p[end] != '}')
        return 0;
    /* no blank, `@` or `=` in a name: the line's special bytes are the blanks of its `": "` and `", "` */
    if (count_special(m, s, e) != 2 * members - 1)
        return 0;
    Py_ssize_t tail_len = (w - line) - task_len - 1;
    self->hint_task = (int32_t)task_len;
    self->hint_rest = (int32_t)(ts_at != NULL ? (ts_at - line) - task_len - 1 : tail_len);
    *w++ = '\n';
    self->len = w - self->buf;
    self->ordered++;
    return 1;
}

#undef WORD_AT

#endif
