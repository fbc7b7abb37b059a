/*
 * lockcheck.engine._jsonlt's scanning of a block's lines: where a line ends, whether it is "clean"
 * (printable ASCII without a backslash: every string in it is its bytes between two quotes), and a
 * clean line's strings read by looking for their closing quote alone.
 *
 * Why (issue 23): the translation of a JSON line cost ~280 ns, most of it reading its dozen short
 * strings a byte (or a word) at a time, each byte tested for an escape, a control character or UTF-8;
 * with the line scanned once, 16 bytes a step, for the one thing that ends its line and the few that
 * would make a string unusual, a string of a clean line is read with one compare per 16 bytes.
 */

#ifndef LOCKCHECK_JSONLT_SCAN_H
#define LOCKCHECK_JSONLT_SCAN_H

#include <Python.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

/* The length of the line at `p` (up to its `\n`, or all `avail` bytes), and in *odd the offset of
 * its first byte that is not printable ASCII or is a backslash (`len` when none): the line is clean
 * up to there.  One pass where a memchr for the line's end was. */
static inline Py_ssize_t json_line_scan(const char *p, Py_ssize_t avail, Py_ssize_t *odd) {
    Py_ssize_t i = 0;
#ifdef __SSE2__
    const __m128i newline = _mm_set1_epi8('\n'), space = _mm_set1_epi8(' '), del = _mm_set1_epi8(0x7f),
                  backslash = _mm_set1_epi8('\\');
    __m128i seen = _mm_setzero_si128(); /* the odd bytes of the steps before the last, OR-ed */
    for (; i + 16 <= avail; i += 16) {
        __m128i bytes = _mm_loadu_si128((const __m128i *)(p + i));
        /* (signed: a byte of 0x80 or more is below ' ' too; the newline itself is one) */
        __m128i bad = _mm_or_si128(_mm_cmplt_epi8(bytes, space),
                                   _mm_or_si128(_mm_cmpeq_epi8(bytes, del), _mm_cmpeq_epi8(bytes, backslash)));
        unsigned ends = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(bytes, newline));
        if (ends) {
            Py_ssize_t len = i + __builtin_ctz(ends);
            unsigned before = (unsigned)_mm_movemask_epi8(bad) & ((ends & (0u - ends)) - 1);
            if (_mm_movemask_epi8(seen) == 0 && before == 0) {
                *odd = len;
                return len;
            }
            /* (an odd byte: where, counted again a byte at a time: lines seldom have one) */
            Py_ssize_t k = 0;
            while (k < len && !((unsigned char)p[k] < 0x20 || (unsigned char)p[k] >= 0x7f || p[k] == '\\'))
                k++;
            *odd = k;
            return len;
        }
        seen = _mm_or_si128(seen, bad);
    }
    if (_mm_movemask_epi8(seen) != 0)
        i = 0; /* (the line's end not found 16 bytes a step: the whole line a byte at a time) */
#endif
    Py_ssize_t first = -1;
    for (; i < avail && p[i] != '\n'; i++) {
        unsigned char c = (unsigned char)p[i];
        if (first < 0 && (c < 0x20 || c >= 0x7f || c == '\\'))
            first = i;
    }
    *odd = first < 0 ? i : first;
    return i;
}

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
static inline char *copy_to(char *w, const char *p, Py_ssize_t n, const char *limit) {
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
