/*
 * hash((a, b, c)) as CPython hashes a tuple of three (tupleobject.c's xxHash-based tuplehash,
 * Python 3.8 on), without making the tuple.  Shared by the two compiled cores: the trace fast
 * path (_speedups.c) and the tracked locks (_tracked.c) compute lockdep's chain key exactly as
 * the pure-Python checker does, `hash((prev_key, cls, read))`.  Each core checks it against the
 * interpreter (at import, or by a test) before it relies on it.
 */
#ifndef LOCKCHECK_TUPLEHASH_H
#define LOCKCHECK_TUPLEHASH_H

#include <Python.h>

#if SIZEOF_PY_UHASH_T > 4
#define LC_XXPRIME_1 ((Py_uhash_t)11400714785074694791ULL)
#define LC_XXPRIME_2 ((Py_uhash_t)14029467366897019727ULL)
#define LC_XXPRIME_5 ((Py_uhash_t)2870177450012600261ULL)
#define LC_XXROTATE(x) ((x << 31) | (x >> 33))
#else
#define LC_XXPRIME_1 ((Py_uhash_t)2654435761UL)
#define LC_XXPRIME_2 ((Py_uhash_t)2246822519UL)
#define LC_XXPRIME_5 ((Py_uhash_t)374761393UL)
#define LC_XXROTATE(x) ((x << 13) | (x >> 19))
#endif

/* The same from the three items' hashes (none -1): a core that keeps them hashes no object. */
static inline Py_hash_t
tuple_hash3_lanes(Py_hash_t a, Py_hash_t b, Py_hash_t c)
{
    Py_hash_t lanes[3] = {a, b, c};
    Py_uhash_t acc = LC_XXPRIME_5;
    for (int i = 0; i < 3; i++) {
        acc += (Py_uhash_t)lanes[i] * LC_XXPRIME_2;
        acc = LC_XXROTATE(acc);
        acc *= LC_XXPRIME_1;
    }
    acc += 3 ^ (LC_XXPRIME_5 ^ 3527539UL);
    if (acc == (Py_uhash_t)-1)
        return 1546275796;
    return (Py_hash_t)acc;
}

/* -1 with an exception set when an item cannot be hashed, as PyObject_Hash. */
static inline Py_hash_t
tuple_hash3(PyObject *a, PyObject *b, PyObject *c)
{
    Py_hash_t ha = PyObject_Hash(a), hb, hc;
    if (ha == -1 || (hb = PyObject_Hash(b)) == -1 || (hc = PyObject_Hash(c)) == -1)
        return -1;
    return tuple_hash3_lanes(ha, hb, hc);
}

#endif
