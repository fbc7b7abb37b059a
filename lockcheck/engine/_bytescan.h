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

/* The first `c` in the `n` bytes at `p`, or NULL (memchr).  It reads none of the bytes after them:
 * a span may end where the buffer does (a block's last line), and a load past it is a read out of
 * bounds that valgrind and ASan report even where the page goes on.  Where SSE2 is, a span of 16
 * bytes or more is read 16 a step, its last step the 16 bytes ending at `p + n` (overlapping the
 * step before, whose bytes held no `c`); a shorter one 8 bytes a step (two overlapping words) or a
 * byte at a time. */
static inline const char *find_byte(const char *p, Py_ssize_t n, char c) {
#ifdef __SSE2__
    if (n >= 16) {
        const __m128i want = _mm_set1_epi8(c);
        const char *last = p + n - 16;
        for (; p < last; p += 16) {
            unsigned hits = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)p), want));
            if (hits)
                return p + __builtin_ctz(hits);
        }
        unsigned hits = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)last), want));
        return hits ? last + __builtin_ctz(hits) : NULL;
    }
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    if (n >= 8) {
        /* a zero byte of word ^ (c in every byte) is a `c`: the lowest flagged byte is the first (a
         * flag above a real one may be false, never one below it) */
        const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
        const uint64_t pattern = ones * (unsigned char)c;
        uint64_t word;
        memcpy(&word, p, 8);
        word ^= pattern;
        uint64_t flags = (word - ones) & ~word & highs;
        if (flags)
            return p + (__builtin_ctzll(flags) >> 3);
        memcpy(&word, p + n - 8, 8);
        word ^= pattern;
        flags = (word - ones) & ~word & highs;
        return flags ? p + n - 8 + (__builtin_ctzll(flags) >> 3) : NULL;
    }
#endif
    for (const char *end = p + n; p < end; p++)
        if (*p == c)
            return p;
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
