/*
 * The chain key as the checker hashes it: hash((chain_key, cls, read)) through _rules.h's
 * tuple hash, or from kept hashes (hash3_lanes), and the core's own int for look-ups (probe_of).
 * A unit because each shortcut is checked against CPython's own hash at import (check_lanes,
 * check_probe, called by PyInit__speedups) and used only where that check passed.  Relies on
 * _rules.h and _tuplehash.h (through _lt_state.h).
 *
 * Part of the `.lt` core (_speedups.c), which includes it with the other _lt_*.h in one translation
 * unit: its static functions stay where the compiler can inline them, as when they were one file.
 */
#ifndef LOCKCHECK_LT_CHAINKEY_H
#define LOCKCHECK_LT_CHAINKEY_H

#include "_lt_state.h"

/* hash((chain_key, cls, read)) as the checker computes it (_rules.h): `tuple_hash3` where
 * `tuple_hash_ok` says it agrees with PyObject_Hash here (checked once at import), else the
 * tuple is made. */
static int tuple_hash_ok = 0;

static inline Py_hash_t hash3(PyObject *a, PyObject *b, PyObject *c) {
    return rules_hash3(tuple_hash_ok, a, b, c);
}

/* hash(v) of an int v that fits a Py_hash_t, as CPython's long_hash computes it: |v| modulo the
 * hash modulus (2**61 - 1 on 64-bit builds), the sign kept, -1 taken to -2. */
static inline Py_hash_t int_hash(Py_hash_t v) {
    uint64_t m = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    Py_hash_t h = (Py_hash_t)(m % (uint64_t)_PyHASH_MODULUS);
    if (v < 0)
        h = -h;
    return h == -1 ? -2 : h;
}

/* hash((a, b, c)) from the items' hashes (tuple_hash3's sum, the lanes given): with the chain key's
 * int hashed by int_hash and the class's hash kept in the class table, a push reads neither the
 * str nor an int.  `lanes_ok`: checked against hash3 at import. */
static int lanes_ok = 0;

static inline Py_hash_t hash3_lanes(Py_hash_t a, Py_hash_t b, Py_hash_t c) {
    return tuple_hash3_lanes(a, b, c);
}

/* Whether hash3_lanes(int_hash(k), hash(s), r) is hash3(k, s, r) here, on samples: 1, 0, -1. */
static int check_lanes(void) {
    static const long long keys[] = {-1, -2, 0, 1, 2, 123456789, -987654321, 2305843009213693951LL,
                                     2305843009213693952LL, -2305843009213693951LL, -2305843009213693953LL,
                                     9223372036854775807LL, -9223372036854775807LL - 1, 1546275796};
    static const char *names[] = {"&rq->lock", "", "(wq_completion)events#3"};
    if (!tuple_hash_ok || sizeof(Py_hash_t) != 8)
        return 0;
    int ok = 1;
    for (size_t i = 0; ok == 1 && i < sizeof keys / sizeof keys[0]; i++) {
        for (size_t j = 0; ok == 1 && j < sizeof names / sizeof names[0]; j++) {
            for (long r = 0; ok == 1 && r < 3; r++) {
                PyObject *a = PyLong_FromLongLong(keys[i]), *b = PyUnicode_FromString(names[j]),
                         *c = PyLong_FromLong(r);
                if (a == NULL || b == NULL || c == NULL) {
                    ok = -1;
                } else {
                    Py_hash_t want = hash3(a, b, c), sh = PyObject_Hash(b);
                    ok = want == -1 || sh == -1 ? -1
                         : PyObject_Hash(a) == int_hash((Py_hash_t)keys[i]) &&
                               hash3_lanes(int_hash((Py_hash_t)keys[i]), sh, r) == want;
                }
                Py_XDECREF(a);
                Py_XDECREF(b);
                Py_XDECREF(c);
            }
        }
    }
    return ok;
}

/* An int of the value `v` to hash or look up (a new reference): on CPython 3.11 (30-bit digits) one
 * int object of the core's, its digits rewritten in place -- hash3 and the chain cache's
 * membership test keep no reference to it, and a push held as a C hash needs no int made and
 * freed (`probe_ok`: checked against PyLong_FromSsize_t at import); elsewhere a new int. */
static PyObject *probe_int;
static int probe_ok = 0;

static PyObject *probe_of(Py_hash_t v) {
#if PY_VERSION_HEX < 0x030C0000 && PYLONG_BITS_IN_DIGIT == 30
    if (probe_ok && Py_REFCNT(probe_int) == 1) {
        PyLongObject *o = (PyLongObject *)probe_int;
        uint64_t m = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
        Py_ssize_t digits = 0;
        while (m) {
            o->ob_digit[digits++] = (digit)(m & PyLong_MASK);
            m >>= PyLong_SHIFT;
        }
        Py_SET_SIZE(o, v < 0 ? -digits : digits);
        Py_INCREF(probe_int);
        return probe_int;
    }
#endif
    return PyLong_FromSsize_t(v);
}

/* Whether probe_of agrees with PyLong_FromSsize_t (value, hash) on samples: 1, 0, -1 error. */
static int check_probe(void) {
    static const long long samples[] = {0, 1, -1, -2, 255, 256, 257, -5, -6, 1073741823, 1073741824,
                                        -1073741824, 4611686018427387904LL, -4611686018427387904LL,
                                        9223372036854775807LL, -9223372036854775807LL - 1, 1546275796,
                                        -3074457345618258602LL};
    probe_int = PyLong_FromUnsignedLongLong(0xFFFFFFFFFFFFFFFFULL); /* room for 64 bits */
    if (probe_int == NULL)
        return -1;
    probe_ok = 1;
    int ok = 1;
    for (size_t i = 0; ok == 1 && i < sizeof samples / sizeof samples[0]; i++) {
        PyObject *mine = probe_of((Py_hash_t)samples[i]);
        PyObject *theirs = PyLong_FromSsize_t((Py_ssize_t)samples[i]);
        if (mine == NULL || theirs == NULL) {
            ok = -1;
        } else {
            int same = PyObject_RichCompareBool(mine, theirs, Py_EQ);
            ok = same < 0 ? -1 : same && PyObject_Hash(mine) == PyObject_Hash(theirs) &&
                                 PyLong_AsSsize_t(mine) == (Py_ssize_t)samples[i];
        }
        Py_XDECREF(mine);
        Py_XDECREF(theirs);
    }
    probe_ok = ok == 1;
    return ok;
}

#endif
