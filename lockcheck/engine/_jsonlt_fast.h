/*
 * lockcheck.engine._jsonlt's fast reading of a block's lines: the block's bytes classified once, then
 * each clean line read from where its quotes are.
 *
 * Why (issue 23): a JSON line's translation cost ~1,250 instructions, most of them passes over the same
 * bytes -- one to find the line's end, one per string for its closing quote, one per name for a blank,
 * `@` or `=` in it, each a 16-byte step with its own set-up, exit test and tail.  Here a block is read
 * once, 32 (AVX2) or 16 bytes a step, into three bit masks per 64 bytes (quotes; bytes that are not
 * printable ASCII or are a backslash: a line's end among them; blanks, `@` and `=`), and a line whose
 * members are written the usual way (`{"key": value, "key": value}`, strings, unsigned numbers,
 * literals) is read by finding its next quote bit and testing a name's span against the third mask.
 * Whatever else a line holds (other spacing, a nested object, a negative number, an odd byte) is the
 * general reader's (_jsonlt_read.h): fast_line gives it up and writes nothing, so the two never differ.
 */

#ifndef LOCKCHECK_JSONLT_FAST_H
#define LOCKCHECK_JSONLT_FAST_H

#include <Python.h>
#include <stdint.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif
#if defined(__SSE2__) && defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define JSONLT_AVX2 1
#include <immintrin.h>
#endif

/* The bytes 64w .. 64w+63 of a block: bit i for byte 64w+i. */
typedef struct MaskWord_ {
    uint64_t quote;   /* `"` */
    uint64_t odd;     /* a byte a clean line has none of: a control (`\n` too), DEL, not ASCII, `\` */
    uint64_t special; /* ` `, `@`, `=`: what a name written bare has none of */
} MaskWord;

/* whether the AVX2 build may run (set once at import: jsonlt_fast_init) */
static int have_avx2 = 0;

#ifdef __SSE2__
/* The three masks of 16 bytes.  (`c + 1 < 0x21`, signed: a control, DEL (0x80) or a byte of 0x80 or more
 * (negative, 0xff wrapping to 0): the odd bytes in one compare.) */
static inline void mask16(const char *p, unsigned *quote, unsigned *odd, unsigned *special) {
    __m128i b = _mm_loadu_si128((const __m128i *)p);
    *quote = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(b, _mm_set1_epi8('"')));
    *odd = (unsigned)_mm_movemask_epi8(
        _mm_or_si128(_mm_cmplt_epi8(_mm_add_epi8(b, _mm_set1_epi8(1)), _mm_set1_epi8(0x21)),
                     _mm_cmpeq_epi8(b, _mm_set1_epi8('\\'))));
    *special = (unsigned)_mm_movemask_epi8(_mm_or_si128(
        _mm_cmpeq_epi8(b, _mm_set1_epi8(' ')),
        _mm_or_si128(_mm_cmpeq_epi8(b, _mm_set1_epi8('@')), _mm_cmpeq_epi8(b, _mm_set1_epi8('=')))));
}
#endif

/* The masks of `words` whole 64-byte words at `p`, 16 bytes a step (a byte at a time without SSE2); nonzero
 * when one of their bytes is NUL or not ASCII (a block source.Lines did not check: Translator.reject). */
static int build_words(const char *p, Py_ssize_t words, MaskWord *m) {
#ifdef __SSE2__
    __m128i any_high = _mm_setzero_si128(), any_nul = _mm_setzero_si128();
#else
    unsigned char any_high = 0, any_nul = 0;
#endif
    for (Py_ssize_t w = 0; w < words; w++, p += 64) {
        uint64_t quote = 0, odd = 0, special = 0;
#ifdef __SSE2__
        for (int j = 0; j < 4; j++) {
            unsigned q, o, s;
            __m128i b = _mm_loadu_si128((const __m128i *)(p + 16 * j));
            any_high = _mm_or_si128(any_high, b);
            any_nul = _mm_or_si128(any_nul, _mm_cmpeq_epi8(b, _mm_setzero_si128()));
            mask16(p + 16 * j, &q, &o, &s);
            quote |= (uint64_t)q << (16 * j);
            odd |= (uint64_t)o << (16 * j);
            special |= (uint64_t)s << (16 * j);
        }
#else
        for (int i = 0; i < 64; i++) {
            unsigned char c = (unsigned char)p[i];
            any_high |= c;
            any_nul |= c == 0;
            quote |= (uint64_t)(c == '"') << i;
            odd |= (uint64_t)(c < 0x20 || c >= 0x7f || c == '\\') << i;
            special |= (uint64_t)(c == ' ' || c == '@' || c == '=') << i;
        }
#endif
        m[w].quote = quote;
        m[w].odd = odd;
        m[w].special = special;
    }
#ifdef __SSE2__
    return _mm_movemask_epi8(_mm_or_si128(any_high, any_nul)) != 0;
#else
    return (any_high & 0x80) || any_nul;
#endif
}

#ifdef JSONLT_AVX2
/* build_words, 32 bytes a step (have_avx2). */
__attribute__((target("avx2"))) static int build_words_avx2(const char *p, Py_ssize_t words, MaskWord *m) {
    const __m256i quote_c = _mm256_set1_epi8('"'), one = _mm256_set1_epi8(1), bound = _mm256_set1_epi8(0x21),
                  backslash = _mm256_set1_epi8('\\'), space = _mm256_set1_epi8(' '), at = _mm256_set1_epi8('@'),
                  eq = _mm256_set1_epi8('='), zero = _mm256_setzero_si256();
    __m256i any_high = zero, any_nul = zero;
    for (Py_ssize_t w = 0; w < words; w++, p += 64) {
        uint64_t q[2], o[2], s[2];
        for (int j = 0; j < 2; j++) {
            __m256i b = _mm256_loadu_si256((const __m256i *)(p + 32 * j));
            any_high = _mm256_or_si256(any_high, b);
            any_nul = _mm256_or_si256(any_nul, _mm256_cmpeq_epi8(b, zero));
            q[j] = (uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(b, quote_c));
            o[j] = (uint32_t)_mm256_movemask_epi8(_mm256_or_si256(
                _mm256_cmpgt_epi8(bound, _mm256_add_epi8(b, one)), _mm256_cmpeq_epi8(b, backslash)));
            s[j] = (uint32_t)_mm256_movemask_epi8(_mm256_or_si256(
                _mm256_cmpeq_epi8(b, space), _mm256_or_si256(_mm256_cmpeq_epi8(b, at), _mm256_cmpeq_epi8(b, eq))));
        }
        m[w].quote = q[0] | q[1] << 32;
        m[w].odd = o[0] | o[1] << 32;
        m[w].special = s[0] | s[1] << 32;
    }
    return _mm256_movemask_epi8(_mm256_or_si256(any_high, any_nul)) != 0;
}
#endif

/* The words after a block's own that its masks have (NEXT_BIT reads two words, count_special four): odd and
 * quotes, as the bytes after the block's end. */
#define MASK_PAD 3

/* How far a block's masks are built (masks_upto). */
typedef struct {
    Py_ssize_t built; /* whole words built (the block's own: size / 64 + 1 when `done`) */
    int done;         /* all of them, and the padding after them */
    int unplain;      /* a NUL byte or one that is not ASCII among the bytes classified */
} MaskBuild;

/* The masks of a block of `size` bytes at `p` into `m` (size / 64 + 1 + MASK_PAD words), built up to word
 * `upto` at least (all of them when `upto` reaches the block's last word).  The bytes from `size` on are
 * odd and quotes: a search for a line's end or a string's closing quote stops at the block's end at last;
 * the MASK_PAD words after the words built so far are odd and quotes too (a search stops there: the
 * caller builds more and looks again).  b->unplain: what source.Lines checks for a block it vouches for
 * (a block it did not check goes back to it then, Translator.reject).
 *
 * Why a part at a time (issue 23): the masks of a whole 64 KiB block built before its first line was read
 * left the block's start out of the 32 KiB L1 cache by then -- each line's bytes read again from L2, their
 * loads the translator's hottest instructions (perf annotate).  Built MASK_CHUNK words ahead of the lines
 * read, a line's bytes are still in L1 when it is read. */
#define MASK_CHUNK 64 /* (words: 4 KiB) */
static void masks_upto(const char *p, Py_ssize_t size, MaskWord *m, MaskBuild *b, Py_ssize_t upto) {
    Py_ssize_t full = size / 64, rest = size - full * 64, to = upto < full ? upto : full;
    if (b->done)
        return;
    if (to > b->built) {
#ifdef JSONLT_AVX2
        if (have_avx2)
            b->unplain |= build_words_avx2(p + b->built * 64, to - b->built, m + b->built);
        else
#endif
            b->unplain |= build_words(p + b->built * 64, to - b->built, m + b->built);
        b->built = to;
    }
    Py_ssize_t pad = to;
    if (to == full) {
        char tail[64];
        memset(tail, ' ', sizeof(tail)); /* (a blank: neither NUL nor high; its bits are cut below) */
        memcpy(tail, p + full * 64, (size_t)rest);
        b->unplain |= build_words(tail, 1, m + full);
        uint64_t beyond = rest ? ~0ULL << rest : ~0ULL;
        m[full].quote |= beyond;
        m[full].odd |= beyond;
        m[full].special &= ~beyond;
        b->built = full + 1;
        b->done = 1;
        pad = full + 1;
    }
    for (Py_ssize_t i = pad; i < pad + MASK_PAD + (b->done ? 0 : 1); i++) {
        m[i].quote = m[i].odd = ~0ULL;
        m[i].special = 0;
    }
}

/* The first bit of `field` set at or after `pos` (there is one: masks_upto's end).  The bit is most
 * often in the word of `pos` or the next one (a string, a short line): those two are read at once and one
 * picked without a branch (a loop a word at a time mispredicted its exit, ~1 a line: cachegrind's
 * --branch-sim); the words after them one at a time.  (masks_upto's padding: two words are readable.) */
#define NEXT_BIT(m, field, pos)                                                                   \
    __extension__({                                                                               \
        Py_ssize_t w_ = (pos) >> 6;                                                               \
        uint64_t x0_ = (m)[w_].field & (~0ULL << ((pos) & 63)), x1_ = (m)[w_ + 1].field;          \
        Py_ssize_t r_;                                                                            \
        if (__builtin_expect((x0_ | x1_) != 0, 1)) {                                              \
            uint64_t z_ = x0_ == 0;                                                               \
            r_ = ((w_ + (Py_ssize_t)z_) << 6) + __builtin_ctzll(z_ ? x1_ : x0_);                  \
        } else {                                                                                  \
            w_ += 2;                                                                              \
            while ((x0_ = (m)[w_].field) == 0)                                                    \
                w_++;                                                                             \
            r_ = (w_ << 6) + __builtin_ctzll(x0_);                                                \
        }                                                                                         \
        r_;                                                                                       \
    })

static ALWAYS_INLINE Py_ssize_t next_odd(const MaskWord *m, Py_ssize_t pos) { return NEXT_BIT(m, odd, pos); }

/* The first quote at or after `pos` (there is one: masks_upto's end). */
static ALWAYS_INLINE Py_ssize_t next_quote(const MaskWord *m, Py_ssize_t pos) { return NEXT_BIT(m, quote, pos); }

/* Each key as a member starts, `"KEY": ` (16 bytes with zeros after it, `n` of them its own). */
static struct {
    char text[16];
    Py_ssize_t n;
} key_lits[K_COUNT];

static void init_key_lits(void) {
    for (int k = 0; k < K_COUNT; k++) {
        memset(key_lits[k].text, 0, 16);
        key_lits[k].n = (Py_ssize_t)key_lens[k] + 4;
        key_lits[k].text[0] = '"';
        memcpy(key_lits[k].text + 1, key_names[k], key_lens[k]);
        memcpy(key_lits[k].text + 1 + key_lens[k], "\": ", 3);
    }
}

/* Whether key `k`'s `"KEY": ` is at `p` (16 bytes readable there). */
static inline int key_literal_at(const char *p, int k) {
#ifdef __SSE2__
    unsigned want = (1u << key_lits[k].n) - 1;
    unsigned same = (unsigned)_mm_movemask_epi8(
        _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)p), _mm_loadu_si128((const __m128i *)key_lits[k].text)));
    return (same & want) == want;
#else
    return memcmp(p, key_lits[k].text, (size_t)key_lits[k].n) == 0;
#endif
}

/* The bits set in a word (without a popcount instruction: x86-64's baseline has none). */
static inline int bit_count(uint64_t x) {
    x = x - ((x >> 1) & 0x5555555555555555ULL);
    x = (x & 0x3333333333333333ULL) + ((x >> 2) & 0x3333333333333333ULL);
    x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0fULL;
    return (int)((x * 0x0101010101010101ULL) >> 56);
}

/* The special bytes (blanks, `@`, `=`) in [a, b), a < b, their bits counted by `COUNT`. */
#define COUNT_SPECIAL(COUNT)                                                                        \
    Py_ssize_t wa = a >> 6, span = ((b - 1) >> 6) - wa;                                             \
    uint64_t first = ~0ULL << (a & 63), last = ~0ULL >> (63 - ((b - 1) & 63));                      \
    if (__builtin_expect(span <= 3, 1)) {                                                           \
        /* (four words read, each cut to the span: no loop whose exit mispredicts; padding readable) */ \
        int n = 0;                                                                                  \
        for (Py_ssize_t i = 0; i < 4; i++) {                                                        \
            uint64_t keep = (i == 0 ? first : ~0ULL) & (-(uint64_t)(i < span) | (-(uint64_t)(i == span) & last)); \
            n += COUNT(m[wa + i].special & keep);                                                   \
        }                                                                                           \
        return n;                                                                                   \
    }                                                                                               \
    int n = COUNT(m[wa].special & first) + COUNT(m[wa + span].special & last);                      \
    for (Py_ssize_t w = wa + 1; w < wa + span; w++)                                                 \
        n += COUNT(m[w].special);                                                                   \
    return n;

static int count_special_swar(const MaskWord *m, Py_ssize_t a, Py_ssize_t b) { COUNT_SPECIAL(bit_count) }

#ifdef JSONLT_AVX2
/* (with the popcnt instruction: a tenth of the instructions, where the CPU has it) */
__attribute__((target("popcnt"))) static int count_special_popcnt(const MaskWord *m, Py_ssize_t a, Py_ssize_t b) {
    COUNT_SPECIAL(__builtin_popcountll)
}
static int (*count_special)(const MaskWord *, Py_ssize_t, Py_ssize_t) = count_special_swar;
#else
#define count_special count_special_swar
#endif
#undef COUNT_SPECIAL

/* The CPU's instructions this header may use, and the keys' literals: once, at import.  (The environment
 * variable LOCKCHECK_JSONLT_PLAIN_CPU=1 keeps to SSE2, to compare the two ways.) */
static void jsonlt_fast_init(void) {
    init_key_lits();
#ifdef JSONLT_AVX2
    __builtin_cpu_init();
    int plain_cpu = getenv("LOCKCHECK_JSONLT_PLAIN_CPU") != NULL;
    have_avx2 = !plain_cpu && __builtin_cpu_supports("avx2");
    if (!plain_cpu && __builtin_cpu_supports("popcnt"))
        count_special = count_special_popcnt;
#endif
}

/* "avx2", "popcnt", "avx2+popcnt" or "sse2": what jsonlt_fast_init chose (the module's CPU_WAY). */
static const char *jsonlt_cpu_way(void) {
#ifdef JSONLT_AVX2
    int popcnt = count_special == count_special_popcnt;
    if (have_avx2)
        return popcnt ? "avx2+popcnt" : "avx2";
    if (popcnt)
        return "popcnt";
#endif
    return "sse2";
}

/* The `.lt` line of the clean line [s, e) of the block at `base` (`size` bytes, masks `m`), written as
 * write_event writes it: 1 written, 0 not a line read here (nothing written: the general reader's),
 * -1 error. */
static int fast_line(Translator *self, const char *base, Py_ssize_t size, const MaskWord *m, Py_ssize_t s,
                     Py_ssize_t e) {
    const char *p = base;
    if (e - s < 2 || p[s] != '{' || p[s + 1] != '"')
        return 0;
    Value values[K_COUNT], nest_parts[2];
    unsigned seen = 0, have = 0;
    int members = 0;
    int prev = K_COUNT; /* the member before (K_COUNT: none yet) */
    Py_ssize_t q = s + 1; /* the key's opening quote */
    for (;;) {
        /* the key: the one that followed `prev` last time, if its `"KEY": ` is here; else read */
        int k = self->next_key[prev];
        Py_ssize_t at;
        if (k != K_COUNT && q + 16 <= size && key_literal_at(p + q, k)) {
            at = q + key_lits[k].n;
        } else {
            Py_ssize_t kc = next_quote(m, q + 1);
            if (kc + 3 >= e || p[kc + 1] != ':' || p[kc + 2] != ' ')
                return 0;
            k = key_index(p + q + 1, kc - q - 1);
            if (k == K_COUNT)
                return 0;
            self->next_key[prev] = (unsigned char)k;
            at = kc + 3;
        }
        if (at >= e || (seen >> k) & 1u)
            return 0;
        prev = k;
        Value *v = &values[k];
        Py_ssize_t after;
        char c = p[at];
        if (c == '"') {
            Py_ssize_t vc = next_quote(m, at + 1);
            if (vc >= e)
                return 0;
            v->kind = J_STR;
            v->p = p + at + 1;
            v->n = vc - at - 1;
            after = vc + 1;
        } else {
            const char *end;
            if (c >= '0' && c <= '9')
                end = read_number(p + at, p + e, v);
            else if (c == 't')
                end = read_literal(p + at, p + e, "true", J_TRUE, v);
            else if (c == 'f')
                end = read_literal(p + at, p + e, "false", J_FALSE, v);
            else if (c == 'n')
                end = read_literal(p + at, p + e, "null", J_NULL, v);
            else
                return 0;
            if (end == NULL)
                return 0;
            after = end - p;
        }
        seen |= 1u << k;
        members++;
        if (v->kind != J_NULL)
            have |= 1u << k;
        if (after + 2 < e && p[after] == ',' && p[after + 1] == ' ' && p[after + 2] == '"') {
            q = after + 2;
            continue;
        }
        if (after + 1 == e && p[after] == '}')
            break;
        return 0;
    }
    /* Whether a name holds a blank, `@` or `=`: the line's special bytes outside its strings are the blanks
     * of its `": "` and `", "`, 2 * members - 1 of them, so any more are in a string. */
    int plain = count_special(m, s, e) == 2 * members - 1;
    values[K_TASK].plain = values[K_LOCK].plain = values[K_INSTANCE].plain = values[K_AT].plain = plain;
    clean_limit = base + size;
    int r = write_event(self, values, seen, have, nest_parts, e - s);
    clean_limit = NULL;
    return r;
}

#endif
