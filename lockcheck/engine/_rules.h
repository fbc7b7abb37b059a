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

/* rules.hardirqs_off: an acquisition's hardirqs are off (disabled, or in a hardirq handler), and
 * RULES_HARDIRQS_OFF_NEEDS, where a task's usage_need has the masks of such acquisitions
 * (rules.HARDIRQS_OFF_NEEDS), and rules_usage_index below.  Not a table: the cores run only while rules.usage_rules_as_compiled()
 * says the Python rules are these (fast_lt.compiled_cores_allowed, tracked's core set-up). */
#define RULES_HARDIRQS_OFF_NEEDS 4
static inline int rules_hardirqs_off(int hardirqs_enabled, long hardirq_depth) {
    return !hardirqs_enabled || hardirq_depth > 0;
}

/* rules.usage_index: where a task's usage_need keeps the mask of an acquisition of this kind */
static inline int rules_usage_index(long read, int trylock, int hardirqs_off) {
    return (hardirqs_off ? 4 : 0) | (trylock ? 2 : 0) | (read ? 1 : 0);
}

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

/* rules.irq_transition_table(): an irq-state op's transition, entry 16*OP + 8*IN_HARDIRQ + 4*IN_SOFTIRQ +
 * 2*HARDIRQS_ENABLED + SOFTIRQS_ENABLED, OP by rules.IRQ_TRANSITION_OPS (rules_irq_op); the entry's bits
 * are rules.IRQT_*: the state after, the depth steps, recorded, usage needs refreshed, the checker's (a
 * note), and the usage bits mark_held_locks sets from bit RULES_IRQT_MARKS_SHIFT up. */
#define RULES_IRQ_N 128
enum {
    RULES_IRQT_HE = 1, RULES_IRQT_SE = 2, RULES_IRQT_HARD_IN = 4, RULES_IRQT_HARD_OUT = 8, RULES_IRQT_SOFT_IN = 16,
    RULES_IRQT_SOFT_OUT = 32, RULES_IRQT_RECORD = 64, RULES_IRQT_REFRESH = 128, RULES_IRQT_CHECKER = 256,
    RULES_IRQT_MARKS_SHIFT = 16
};

/* The index of the irq-state op `op` (a str) in rules.IRQ_TRANSITION_OPS, or -1: none. */
static inline int rules_irq_op(PyObject *op) {
    static const char *const names[8] = {"irqs-off", "irqs-on", "softirqs-off", "softirqs-on", "hardirq-enter",
                                         "softirq-enter", "hardirq-exit", "softirq-exit"};
    for (int k = 0; k < 8; k++)
        if (PyUnicode_CompareWithASCIIString(op, names[k]) == 0)
            return k;
    return -1;
}

static inline unsigned long rules_irq(const unsigned long *table, int op, long hd, long sd, long he, long se) {
    return table[(op & 7) * 16 + (hd ? 8 : 0) + (sd ? 4 : 0) + (he ? 2 : 0) + (se ? 1 : 0)];
}

/* The state an entry `t` of the table leaves (its depth steps and on/off bits), applied to the
 * cores' own variables (a macro: one core keeps the bits as int, the other as long). */
#define RULES_IRQ_STEP(t, hd, sd, he, se)                                                              \
    do {                                                                                               \
        (hd) += ((t) & RULES_IRQT_HARD_IN) ? 1 : ((t) & RULES_IRQT_HARD_OUT) ? -1 : 0;                 \
        (sd) += ((t) & RULES_IRQT_SOFT_IN) ? 1 : ((t) & RULES_IRQT_SOFT_OUT) ? -1 : 0;                 \
        (he) = ((t) & RULES_IRQT_HE) != 0;                                                             \
        (se) = ((t) & RULES_IRQT_SE) != 0;                                                             \
    } while (0)

/* The table from its tuple of RULES_IRQ_N ints: 0, or -1 with an error set. */
static inline int rules_irq_parse(PyObject *tuple, unsigned long *out) {
    if (!PyTuple_Check(tuple) || PyTuple_GET_SIZE(tuple) != RULES_IRQ_N) {
        PyErr_SetString(PyExc_ValueError, "the irq transition table has 128 entries");
        return -1;
    }
    for (Py_ssize_t i = 0; i < RULES_IRQ_N; i++) {
        out[i] = PyLong_AsUnsignedLong(PyTuple_GET_ITEM(tuple, i));
        if (out[i] == (unsigned long)-1 && PyErr_Occurred())
            return -1;
    }
    return 0;
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
static inline int rules_check_tuple_hash(void) {
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
