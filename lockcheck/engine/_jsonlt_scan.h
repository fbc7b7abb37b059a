/*
 * lockcheck.engine._jsonlt's reading of a line's strings: a clean line's (printable ASCII without a
 * backslash: every string in it is its bytes between two quotes; _jsonlt_fast.h's masks tell which lines
 * are) by looking for their closing quote alone, any other line's a character at a time.
 *
 * Why (issue 23): the translation of a JSON line cost ~280 ns, most of it reading its dozen short
 * strings a byte (or a word) at a time, each byte tested for an escape, a control character or UTF-8;
 * with the line known clean, a string of it is read with one compare per 16 bytes.  (Most clean lines
 * never come here: _jsonlt_fast.h reads them from the block's masks.)
 * Any other line's strings are read by read_string_utf8 (here too: the reading of a line's pieces).
 */

#ifndef LOCKCHECK_JSONLT_SCAN_H
#define LOCKCHECK_JSONLT_SCAN_H

#include <Python.h>
#include <stdint.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif
#ifndef ALWAYS_INLINE
#define ALWAYS_INLINE inline /* (_jsonlt.c's word: a function the hot loop must not call) */
#endif

/* -- a value and a string of any line (the general reading) ------------------------------------ */

enum { J_STR, J_NUM, J_TRUE, J_FALSE, J_NULL, J_OBJ };

typedef struct {
    int kind;
    const char *p; /* a string's characters (without quotes), a number's text */
    Py_ssize_t n;
    int integer;   /* a number without fraction or exponent */
    int plain;     /* a string known to hold no ` `, `@` or `=` (0: not known; _jsonlt_fast.h's) */
} Value;


static inline const char *skip_ws(const char *p, const char *end) {
    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    return p;
}

/* Whether a code point may stand in a name written to `.lt` from a str line: none that Python calls
 * white space or a line boundary (`str.split()`, `strip()`, `splitlines()` would cut the name there), no
 * C1 control, format character or byte order mark; the rest goes to the reader (`slow`). */
static inline int plain_code_point(unsigned long c) {
    return c >= 0xa1 && c != 0x1680 && !(c >= 0x2000 && c <= 0x206f) && c != 0x3000 && c != 0xfeff &&
           !(c >= 0xfff0 && c <= 0xffff) && !(c >= 0xd800 && c <= 0xdfff);
}

/* Bytes of a 64-bit word (exact "any byte" tests: a false hit only above a true one). */
#define ONES 0x0101010101010101ULL
static inline uint64_t has_zero(uint64_t x) { return (x - ONES) & ~x & ONES * 0x80; }
static inline uint64_t has_less(uint64_t x, unsigned n) { return (x - ONES * n) & ~x & ONES * 0x80; }

/* A string without escapes, of printable ASCII (and, with `utf8`, plain_code_point characters of valid
 * UTF-8, as a str line's UTF-8 is): its end (after the closing quote), or NULL. */
static const char *read_string_utf8(const char *p, const char *end, Value *v, int utf8) {
    const char *start = ++p;
    while (p < end && *p != '"') {
        /* eight bytes at a time while none of them ends the run of printable ASCII (a string's
         * usual content): the byte loop below takes over at the first one that may */
#if defined(__GNUC__) && defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        while (end - p >= 8) {
            uint64_t x;
            memcpy(&x, p, 8);
            uint64_t stop = (x & ONES * 0x80) | has_zero(x ^ ONES * '"') | has_zero(x ^ ONES * '\\')
                    | has_zero(x ^ ONES * 0x7f) | has_less(x, 0x20);
            if (stop) {
                /* the lowest byte flagged is a true one (a little-endian word's first) */
                p += __builtin_ctzll(stop) >> 3;
                break;
            }
            p += 8;
        }
#endif
        if (p >= end || *p == '"')
            break;
        unsigned char c = (unsigned char)*p;
        if (c >= 0x80) {
            if (!utf8)
                return NULL;
            int more = c >= 0xf0 ? 3 : c >= 0xe0 ? 2 : c >= 0xc0 ? 1 : -1;
            if (more < 0 || end - p <= more)
                return NULL;
            unsigned long cp = c & (0x3f >> more);
            for (int i = 1; i <= more; i++) {
                unsigned char cc = (unsigned char)p[i];
                if ((cc & 0xc0) != 0x80)
                    return NULL;
                cp = (cp << 6) | (cc & 0x3f);
            }
            if (!plain_code_point(cp))
                return NULL;
            p += more + 1;
            continue;
        }
        if (c < 0x20 || c > 0x7e || c == '\\')
            return NULL;
        p++;
    }
    if (p >= end)
        return NULL;
    v->kind = J_STR;
    v->p = start;
    v->n = p - start;
    v->plain = 0;
    return p + 1;
}

/* -- a clean line ---------------------------------------------------------------------------------- */

/* The end (after its closing quote) of the string whose opening quote is at `p`, in a clean line ending
 * at `end`, or NULL (no closing quote before `end`).  `limit` (>= end): up to where bytes may be read. */
static inline const char *clean_string_end(const char *p, const char *end, const char *limit) {
    const char *q = p + 1;
#ifdef __SSE2__
    const __m128i quote = _mm_set1_epi8('"');
    for (; q + 16 <= limit; q += 16) {
        unsigned hit = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)q), quote));
        if (hit) {
            q += __builtin_ctz(hit);
            return q < end ? q + 1 : NULL;
        }
        if (q + 16 >= end)
            return NULL;
    }
#endif
    while (q < end && *q != '"')
        q++;
    return q < end ? q + 1 : NULL;
}

/* Whether any of the `n` bytes at `p` (in a clean line) is `a`, `b` or `c`; `limit`: as above. */
static inline int clean_has_any3(const char *p, Py_ssize_t n, const char *limit, char a, char b, char c) {
    Py_ssize_t i = 0;
#ifdef __SSE2__
    const __m128i va = _mm_set1_epi8(a), vb = _mm_set1_epi8(b), vc = _mm_set1_epi8(c);
    for (; i < n && p + i + 16 <= limit; i += 16) {
        __m128i bytes = _mm_loadu_si128((const __m128i *)(p + i));
        unsigned hit = (unsigned)_mm_movemask_epi8(_mm_or_si128(
            _mm_cmpeq_epi8(bytes, va), _mm_or_si128(_mm_cmpeq_epi8(bytes, vb), _mm_cmpeq_epi8(bytes, vc))));
        if (n - i < 16)
            hit &= (1u << (n - i)) - 1; /* (the bytes after the string) */
        if (hit)
            return 1;
    }
#endif
    for (; i < n; i++)
        if (p[i] == a || p[i] == b || p[i] == c)
            return 1;
    return 0;
}

/* `n` bytes copied from `p` to `w`, which has room for 15 more: the end of the copy.  `limit` (not NULL in a
 * clean line): up to where bytes may be read, 16 a step; else a word at a time, and never a call. */
static ALWAYS_INLINE char *copy_to(char *w, const char *p, Py_ssize_t n, const char *limit) {
#ifdef __SSE2__
    if (limit != NULL && p + ((n + 15) & ~(Py_ssize_t)15) <= limit) {
        for (Py_ssize_t i = 0; i < n; i += 16)
            _mm_storeu_si128((__m128i *)(w + i), _mm_loadu_si128((const __m128i *)(p + i)));
        return w + n;
    }
#endif
    (void)limit;
    for (; n >= 8; n -= 8, p += 8, w += 8)
        memcpy(w, p, 8);
    for (; n > 0; n--)
        *w++ = *p++;
    return w;
}

#endif
