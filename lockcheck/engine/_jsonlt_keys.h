/*
 * lockcheck.engine._jsonlt's keys: the members of a JSON line it translates, and how a member's name is
 * matched to one of them.
 *
 * Why apart: a clean line's key (_jsonlt_scan.h: printable ASCII, no backslash, so its first quote after
 * the opening one closes it) is matched by one compare of the eight bytes after its opening quote,
 * without looking for its end first (issue 23: the dozen strings of a line were most of its translation).
 */

#ifndef LOCKCHECK_JSONLT_KEYS_H
#define LOCKCHECK_JSONLT_KEYS_H

#include <Python.h>
#include <stdint.h>
#include <string.h>

enum { K_TASK, K_OP, K_LOCK, K_INSTANCE, K_MODE, K_TRY, K_SUBCLASS, K_NEST, K_NOCHECK, K_CHECK, K_AT, K_TS,
       K_CPU, K_COUNT };
static const char *const key_names[K_COUNT] = {"task", "op", "lock", "instance", "mode", "try", "subclass", "nest",
                                             "nocheck", "check", "at", "ts", "cpu"};
/* their lengths (a key is looked for on every member of every line) */
static const unsigned char key_lens[K_COUNT] = {4, 2, 4, 8, 4, 3, 8, 4, 7, 5, 2, 2, 3};

#include "_grammar_limits.h" /* the grammar limits both ways of writing a line ask (cpu_digits_ok...) */

/* The key a member's name is (K_COUNT: none of them), by its length and first letter. */
static inline int key_index(const char *p, Py_ssize_t n) {
#define KEY_IS(word) (memcmp(p, word, sizeof(word) - 1) == 0) /* (a fixed size: compiled inline) */
    switch (n) {
    case 2: return KEY_IS("op") ? K_OP : KEY_IS("at") ? K_AT : KEY_IS("ts") ? K_TS : K_COUNT;
    case 3: return KEY_IS("try") ? K_TRY : KEY_IS("cpu") ? K_CPU : K_COUNT;
    case 4: return KEY_IS("task") ? K_TASK : KEY_IS("lock") ? K_LOCK : KEY_IS("mode") ? K_MODE
                 : KEY_IS("nest") ? K_NEST : K_COUNT;
    case 5: return KEY_IS("check") ? K_CHECK : K_COUNT;
    case 7: return KEY_IS("nocheck") ? K_NOCHECK : K_COUNT;
    case 8: return KEY_IS("instance") ? K_INSTANCE : KEY_IS("subclass") ? K_SUBCLASS : K_COUNT;
    default: return K_COUNT;
    }
#undef KEY_IS
}

/* The eight bytes at `s` (a literal of at least 8 bytes with its NUL) as a little-endian word. */
static inline uint64_t word8(const char *s) {
    uint64_t x;
    memcpy(&x, s, 8);
    return x;
}

/* The key of a clean line whose name starts at `q` (after its opening quote) and whose closing quote is
 * before `end`, by the eight bytes at `q` (`q + 9 <= limit`, up to where bytes may be read): its index and
 * in *after the byte after its closing quote, or K_COUNT (then read it as any string). */
static inline int clean_key(const char *q, const char *end, const char **after) {
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
    (void)q, (void)end, (void)after;
    return K_COUNT;
#else
    uint64_t w;
    memcpy(&w, q, 8);
    int k, n;
    k = n = 0;
#define KEY(word, kk) ((w & ((1ULL << (8 * (sizeof(word) - 1))) - 1)) == word8(word "\0\0\0\0\0\0\0") \
        ? (k = (kk), n = (int)sizeof(word) - 1, 1) : 0)
    switch (q[0]) {
    case 't': if (!(KEY("task\"", K_TASK) || KEY("ts\"", K_TS) || KEY("try\"", K_TRY))) return K_COUNT; break;
    case 'o': if (!KEY("op\"", K_OP)) return K_COUNT; break;
    case 'l': if (!KEY("lock\"", K_LOCK)) return K_COUNT; break;
    case 'm': if (!KEY("mode\"", K_MODE)) return K_COUNT; break;
    case 'a': if (!KEY("at\"", K_AT)) return K_COUNT; break;
    case 'c': if (!(KEY("cpu\"", K_CPU) || KEY("check\"", K_CHECK))) return K_COUNT; break;
    case 'n': if (!(KEY("nest\"", K_NEST) || (w == word8("nocheck\"") ? (k = K_NOCHECK, n = 8, 1) : 0))) return K_COUNT; break;
    case 'i':
        if (w != word8("instance") || q[8] != '"')
            return K_COUNT;
        k = K_INSTANCE, n = 9;
        break;
    case 's':
        if (w != word8("subclass") || q[8] != '"')
            return K_COUNT;
        k = K_SUBCLASS, n = 9;
        break;
    default: return K_COUNT;
    }
#undef KEY
    if (q + n > end)
        return K_COUNT; /* (its closing quote is the line's last byte at most) */
    *after = q + n;
    return k;
#endif
}

#endif
