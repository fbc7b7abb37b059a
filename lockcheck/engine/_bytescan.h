/*
 * memchr and memcmp for the short spans of one trace line (the `.lt` core's words, fields and keys:
 * 3 to 80 bytes): inline, where the library's calls -- ten or so memchr and five memcmp a line --
 * were ~13% of a 10M-event run, mostly their call and set-up for so few bytes.
 */
#ifndef LOCKCHECK_BYTESCAN_H
#define LOCKCHECK_BYTESCAN_H

#include <Python.h>
#include <stdint.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

/* The first `c` in the `n` bytes at `p`, or NULL (memchr).  16 bytes a step where SSE2 is: a load
 * may read past the span but never into the next page (so never where memory may be unmapped);
 * what it reads there is masked off. */
static inline const char *find_byte(const char *p, Py_ssize_t n, char c) {
    const char *end = p + n;
#ifdef __SSE2__
    const __m128i want = _mm_set1_epi8(c);
    while (p < end) {
        if (((uintptr_t)p & 4095) > 4096 - 16) {
            if (*p == c)
                return p;
            p++;
            continue;
        }
        unsigned hits = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)p), want));
        if (hits) {
            const char *found = p + __builtin_ctz(hits);
            return found < end ? found : NULL;
        }
        p += 16;
    }
    return NULL;
#else
    return n > 0 ? memchr(p, c, (size_t)n) : NULL;
#endif
}

/* Whether the `n` bytes at `a` and at `b` are the same (memcmp(a, b, n) == 0): 8 bytes a step, the
 * last step overlapping the one before. */
static inline int bytes_eq(const char *a, const char *b, Py_ssize_t n) {
    uint64_t x, y;
    if (n >= 8) {
        Py_ssize_t i = 0;
        for (; i + 8 <= n; i += 8) {
            memcpy(&x, a + i, 8);
            memcpy(&y, b + i, 8);
            if (x != y)
                return 0;
        }
        if (i == n)
            return 1;
        memcpy(&x, a + n - 8, 8);
        memcpy(&y, b + n - 8, 8);
        return x == y;
    }
    if (n >= 4) {
        uint32_t u, v;
        memcpy(&u, a, 4);
        memcpy(&v, b, 4);
        if (u != v)
            return 0;
        memcpy(&u, a + n - 4, 4);
        memcpy(&v, b + n - 4, 4);
        return u == v;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        if (a[i] != b[i])
            return 0;
    return 1;
}

#endif
