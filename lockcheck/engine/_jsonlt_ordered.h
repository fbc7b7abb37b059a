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

/* The literal before a member, from the end of the value before it (`, "KEY": `, with the opening quote of
 * a string value), the bits of the bytes compared (up to 16), and the blanks in it (count_special's). */
typedef struct {
    char text[16];
    unsigned want;
    int n, blanks;
} OrderedLit;

enum { OL_TASK, OL_OP, OL_LOCK, OL_INSTANCE, OL_MODE, OL_TRY, OL_SUBCLASS, OL_NEST, OL_NEST_LOCK, OL_NEST_INSTANCE,
       OL_NOCHECK, OL_AT, OL_TS, OL_CPU, OL_COUNT };
static OrderedLit ordered_lits[OL_COUNT];

static void ordered_lit(int i, const char *text) {
    OrderedLit *l = &ordered_lits[i];
    memset(l->text, 0, sizeof(l->text));
    l->n = (int)strlen(text);
    memcpy(l->text, text, (size_t)l->n);
    l->want = (1u << l->n) - 1;
    l->blanks = 0;
    for (int j = 0; j < l->n; j++)
        l->blanks += text[j] == ' ';
}

static void ordered_init(void) {
    ordered_lit(OL_TASK, "{\"task\": \"");
    ordered_lit(OL_OP, ", \"op\": \"");
    ordered_lit(OL_LOCK, ", \"lock\": \"");
    ordered_lit(OL_INSTANCE, ", \"instance\": \"");
    ordered_lit(OL_MODE, ", \"mode\": \"");
    ordered_lit(OL_TRY, ", \"try\": ");
    ordered_lit(OL_SUBCLASS, ", \"subclass\": ");
    ordered_lit(OL_NEST, ", \"nest\": {");
    ordered_lit(OL_NEST_LOCK, "\"lock\": \"");
    ordered_lit(OL_NEST_INSTANCE, ", \"instance\": "); /* (a string or null) */
    ordered_lit(OL_NOCHECK, ", \"nocheck\": ");
    ordered_lit(OL_AT, ", \"at\": \"");
    ordered_lit(OL_TS, ", \"ts\": ");
    ordered_lit(OL_CPU, ", \"cpu\": ");
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

/* Whether the bytes at `p` start with `word` (a literal of at most 8 characters), 8 bytes readable there. */
#define WORD_AT(p, word)                                                                             \
    __extension__({                                                                                 \
        uint64_t x_, y_ = 0;                                                                        \
        memcpy(&x_, (p), 8);                                                                        \
        memcpy(&y_, word, sizeof(word) - 1);                                                        \
        (x_ & (sizeof(word) - 1 >= 8 ? ~0ULL : ((1ULL << (8 * (sizeof(word) - 1))) - 1))) == y_; \
    })

/* `n` bytes from `p` to `w`: 32 at once (most names and tokens are shorter), then 16 a step (both have room:
 * every read stays within the line and the 32 bytes after it, which ordered_line asks for; the buffer has
 * room for 31 more).  (A loop from the first 16 bytes mispredicted its exit about once a line: cachegrind's
 * --branch-sim.) */
static ALWAYS_INLINE char *ordered_copy(char *w, const char *p, Py_ssize_t n) {
#ifdef __SSE2__
    _mm_storeu_si128((__m128i *)w, _mm_loadu_si128((const __m128i *)p));
    _mm_storeu_si128((__m128i *)(w + 16), _mm_loadu_si128((const __m128i *)(p + 16)));
    for (Py_ssize_t i = 32; __builtin_expect(i < n, 0); i += 16)
        _mm_storeu_si128((__m128i *)(w + i), _mm_loadu_si128((const __m128i *)(p + i)));
    return w + n;
#else
    memcpy(w, p, (size_t)n);
    return w + n;
#endif
}

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

/* The `.lt` line of the clean line [s, e) of the block at `base` (`size` bytes, masks `m`) when it is an
 * event in the `.lt` order (above): 1 written (and its split kept for note_line), 0 not such a line
 * (nothing written: fast_line's), -1 error. */
static int ordered_line(Translator *self, const char *base, Py_ssize_t size, const MaskWord *m, Py_ssize_t s,
                        Py_ssize_t e) {
    const char *p = base;
    /* every literal compared may read 16 bytes, and every copy 32; a line near the block's end is fast_line's */
    if (e + 32 > size || !ordered_at(p + s, OL_TASK))
        return 0;
    if (buf_reserve(self, e - s + 64) < 0)
        return -1;
    char *w = self->buf + self->len, *const line = w, *ts_at = NULL;
    int blanks = 1; /* (the blanks of the literals matched: those outside the strings) */
#define LIT(i) (ordered_at(p + end, (i)) ? (at = end + ordered_lits[i].n, blanks += ordered_lits[i].blanks, 1) : 0)
    /* (a member's literal after `, "`, when its key's first letter, `c`, is there: most members are not given) */
#define KEY_LIT(i, c) (p[end + 3] == (c) && LIT(i))
    /* the task: a bare token, not a comment */
    Py_ssize_t at = s + 10, vc = next_quote(m, at), end = vc + 1, task_len = vc - at;
    if (vc >= e || vc == at || p[at] == '#')
        return 0;
    w = ordered_copy(w, p + at, task_len);
    *w++ = ' ';
    if (!KEY_LIT(OL_OP, 'o'))
        return 0;
    /* the op: acquire and release by their words (with their closing quotes), one picked without a branch
     * (which of the two a line has is not predictable: ~0.5 mispredictions a line), else looked up */
    int flags;
    int is_acquire = WORD_AT(p + at, "acquire\""), is_release = WORD_AT(p + at, "release\"");
    if (__builtin_expect(is_acquire | is_release, 1)) {
        flags = ops[1].flags ^ ((ops[0].flags ^ ops[1].flags) & -is_acquire);
        vc = at + 7;
    } else {
        vc = next_quote(m, at);
        Value op = {J_STR, p + at, vc - at, 0, 0};
        int i = vc < e ? op_index(&op) : -1;
        if (i < 0)
            return 0;
        flags = ops[i].flags;
    }
    int acquire = flags & OP_ACQUIRE;
    w = ordered_copy(w, p + at, vc - at);
    end = vc + 1;
    if (flags & OP_LOCK) {
        /* the lock (a bare name) and its instance (a token) */
        if (!KEY_LIT(OL_LOCK, 'l'))
            return 0;
        vc = next_quote(m, at);
        if (vc >= e || vc == at || p[at] == '#')
            return 0;
        *w++ = ' ';
        w = ordered_copy(w, p + at, vc - at);
        end = vc + 1;
        if (KEY_LIT(OL_INSTANCE, 'i')) {
            vc = next_quote(m, at);
            if (vc >= e || vc == at)
                return 0;
            *w++ = '@';
            w = ordered_copy(w, p + at, vc - at);
            end = vc + 1;
        }
    }
    /* acquire's options; on another op only their defaults (the reader's error otherwise: not here) */
    if (KEY_LIT(OL_MODE, 'm')) {
        if (WORD_AT(p + at, "write\"")) {
            end = at + 6;
        } else if (acquire && WORD_AT(p + at, "read\"")) {
            memcpy(w, " read", 5);
            w += 5;
            end = at + 5;
        } else if (acquire && WORD_AT(p + at, "rread\"")) {
            memcpy(w, " rread", 6);
            w += 6;
            end = at + 6;
        } else {
            return 0;
        }
    }
    if (KEY_LIT(OL_TRY, 't')) {
        if (WORD_AT(p + at, "false")) {
            end = at + 5;
        } else if (acquire && WORD_AT(p + at, "true")) {
            memcpy(w, " try", 4);
            w += 4;
            end = at + 4;
        } else {
            return 0;
        }
    }
    if (KEY_LIT(OL_SUBCLASS, 's')) {
        /* one digit (the literal or the end after it: not two) */
        char digit = p[at];
        if (!subclass_digit_ok(digit, acquire))
            return 0;
        if (digit != '0') {
            memcpy(w, " subclass=", 10);
            w[10] = digit;
            w += 11;
        }
        end = at + 1;
    }
    if (KEY_LIT(OL_NEST, 'n')) {
        /* {"lock": CLASS[, "instance": INSTANCE or null]}: `nest=CLASS[@INSTANCE]` */
        end = at;
        if (!acquire || !LIT(OL_NEST_LOCK))
            return 0;
        vc = next_quote(m, at);
        if (vc >= e || vc == at || p[at] == '#')
            return 0;
        memcpy(w, " nest=", 6);
        w = ordered_copy(w + 6, p + at, vc - at);
        end = vc + 1;
        if (LIT(OL_NEST_INSTANCE)) {
            if (WORD_AT(p + at, "null")) {
                end = at + 4;
            } else {
                vc = p[at] == '"' ? next_quote(m, at + 1) : e;
                if (vc >= e || vc == at + 1)
                    return 0;
                *w++ = '@';
                w = ordered_copy(w, p + at + 1, vc - at - 1);
                end = vc + 1;
            }
        }
        if (p[end] != '}')
            return 0;
        end++;
    }
    if (KEY_LIT(OL_NOCHECK, 'n')) {
        if (WORD_AT(p + at, "false")) {
            end = at + 5;
        } else if (acquire && WORD_AT(p + at, "true")) {
            memcpy(w, " nocheck", 8);
            w += 8;
            end = at + 4;
        } else {
            return 0;
        }
    }
    if (KEY_LIT(OL_AT, 'a')) {
        vc = next_quote(m, at);
        if (!(flags & OP_SITE) || vc >= e || vc == at || p[at] == '#')
            return 0;
        memcpy(w, " at=", 4);
        w = ordered_copy(w + 4, p + at, vc - at);
        end = vc + 1;
    }
    if (KEY_LIT(OL_TS, 't')) {
        const char *num = ordered_number(p + at, p + e, 1);
        if (num == NULL || !ts_chars_ok(num - (p + at)))
            return 0;
        ts_at = w;
        memcpy(w, " ts=", 4);
        w = ordered_copy(w + 4, p + at, num - (p + at));
        end = num - p;
    }
    if (KEY_LIT(OL_CPU, 'c')) {
        const char *num = ordered_number(p + at, p + e, 0);
        if (num == NULL || !cpu_digits_ok(num - (p + at)))
            return 0;
        memcpy(w, " cpu=", 5);
        w = ordered_copy(w + 5, p + at, num - (p + at));
        end = num - p;
    }
#undef LIT
#undef KEY_LIT
    if (end + 1 != e || p[end] != '}')
        return 0;
    /* no blank, `@` or `=` in a name: the line's special bytes are the blanks of the literals */
    if (count_special(m, s, e) != blanks)
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
