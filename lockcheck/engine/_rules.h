/*
 * lockdep's boolean rules and chain key as the compiled cores apply them: read from the tables
 * `lockcheck.lockdep.rules.compiled_tables()` makes at the start of a run (none is decided here),
 * and the chain key hashed as the pure-Python checker hashes it (`_tuplehash.h`).  Shared by the
 * `.lt` core (_speedups.c) and the capture core (_capturecore.c), so each rule is written once in
 * C too.
 */
#ifndef LOCKCHECK_RULES_H
#define LOCKCHECK_RULES_H

#include <Python.h>
#include "_tuplehash.h"

/* bit T of `validates`: rules.validates_chain(trylock=T, check=True) */
static inline int rules_validates(unsigned long validates, int trylock) {
    return (int)((validates >> (trylock ? 1 : 0)) & 1);
}

/* bit 4*TOP+CTX of `separate`: rules.separate_irq_context(TOP, CTX), contexts 0..3 (the caller
 * passes any other context on) */
static inline int rules_separate(unsigned long separate, long top, long ctx) {
    return (int)((separate >> ((top & 3) * 4 + (ctx & 3))) & 1);
}

/* bit 2*NEST+SAME of `merges`: rules.nest_lock_merges on a non-empty stack */
static inline int rules_merges(unsigned long merges, int nest, int same) {
    return (int)((merges >> ((nest ? 2 : 0) + (same ? 1 : 0))) & 1);
}

/* hash((chain_key, cls, read)) as the checker computes it (rules.iterate_chain_key): `tuple_hash3`
 * where `*ok` says it agrees with PyObject_Hash here (rules_check_tuple_hash), else the tuple is
 * made. */
static inline Py_hash_t rules_hash3(int ok, PyObject *a, PyObject *b, PyObject *c) {
    if (!ok) {
        PyObject *parts = PyTuple_Pack(3, a, b, c);
        if (parts == NULL)
            return -1;
        Py_hash_t hash = PyObject_Hash(parts);
        Py_DECREF(parts);
        return hash;
    }
    return tuple_hash3(a, b, c);
}

/* Whether tuple_hash3 agrees with the interpreter's tuple hash on samples: 1 yes, 0 no, -1 error. */
static int rules_check_tuple_hash(void) {
    static const long keys[] = {-1, 0, 1, 123456789, -987654321};
    static const char *names[] = {"&rq->lock", "", "(wq_completion)events#3"};
    int ok = 1;
    for (size_t i = 0; ok == 1 && i < sizeof keys / sizeof keys[0]; i++) {
        for (size_t j = 0; ok == 1 && j < sizeof names / sizeof names[0]; j++) {
            for (long r = 0; ok == 1 && r < 3; r++) {
                PyObject *a = PyLong_FromLong(keys[i]), *b = PyUnicode_FromString(names[j]),
                         *c = PyLong_FromLong(r);
                PyObject *t = (a && b && c) ? PyTuple_Pack(3, a, b, c) : NULL;
                if (t == NULL) {
                    ok = -1;
                } else {
                    ok = tuple_hash3(a, b, c) == PyObject_Hash(t);
                }
                Py_XDECREF(a);
                Py_XDECREF(b);
                Py_XDECREF(c);
                Py_XDECREF(t);
            }
        }
    }
    return ok;
}

#endif
