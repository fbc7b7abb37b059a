/*
 * The capture filter's own memo tables (lockcheck/engine/_capturecore.c), kept in C so that a
 * common line costs no Python dict probe it can do without:
 *
 *   - line pieces: a piece's bytes -> what the Python loop's cache (`heads`, `flag_cache`, `bodies`)
 *     holds for them.  Those values are a function of the piece's text alone (fast_capture reads
 *     each piece apart from the line), so a value once found stays right for those bytes even when
 *     the Python loop clears its dict: the filter then takes the line the Python loop would have
 *     read the same way (its caches filled again, with an equal value, and nothing else).
 *   - pairs: one tuple `(a, b)` per pair of strs seen lately, so that the reader's `held` keys
 *     `(task, instance)` and a task's recent `(lock, instance)` are the same object from the
 *     acquisition to its release: a dict probe with the key it stored meets it by identity
 *     instead of comparing two new tuples item by item.  Equal strs give the same tuple (a tuple
 *     of other strs equal to them, which no dict or set tells apart).
 *
 * Both are bounded direct-mapped tables: a slot taken by another key is overwritten.
 */
#ifndef LOCKCHECK_CAPCACHE_H
#define LOCKCHECK_CAPCACHE_H

#include <Python.h>
#include "_cshared.h"

/* slots per piece table (a power of two) and the tables: heads, flags, bodies */
#define PIECE_SLOTS 16384
enum { PC_HEAD, PC_FLAGS, PC_BODY, PC_N };
/* slots of the pair table (a power of two) */
#define PAIR_SLOTS 8192

typedef struct {
    PyObject *key;   /* str of the piece's bytes, or NULL */
    PyObject *value; /* what the dict held for it, or NULL: not found yet */
} PieceSlot;

typedef struct {
    PieceSlot *pieces;  /* PC_N * PIECE_SLOTS */
    PyObject **pairs;   /* PAIR_SLOTS tuples, or NULL */
} CapCache;

static int capcache_init(CapCache *c) {
    if (c->pieces == NULL && (c->pieces = PyMem_Calloc(PC_N * PIECE_SLOTS, sizeof(PieceSlot))) == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    if (c->pairs == NULL && (c->pairs = PyMem_Calloc(PAIR_SLOTS, sizeof(PyObject *))) == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

static void capcache_clear(CapCache *c) {
    if (c->pieces != NULL) {
        for (Py_ssize_t i = 0; i < PC_N * PIECE_SLOTS; i++) {
            Py_CLEAR(c->pieces[i].key);
            Py_CLEAR(c->pieces[i].value);
        }
        PyMem_Free(c->pieces);
        c->pieces = NULL;
    }
    if (c->pairs != NULL) {
        for (Py_ssize_t i = 0; i < PAIR_SLOTS; i++)
            Py_CLEAR(c->pairs[i]);
        PyMem_Free(c->pairs);
        c->pairs = NULL;
    }
}

static int capcache_traverse(CapCache *c, visitproc visit, void *arg) {
    if (c->pieces != NULL)
        for (Py_ssize_t i = 0; i < PC_N * PIECE_SLOTS; i++) {
            Py_VISIT(c->pieces[i].key);
            Py_VISIT(c->pieces[i].value);
        }
    if (c->pairs != NULL)
        for (Py_ssize_t i = 0; i < PAIR_SLOTS; i++)
            Py_VISIT(c->pairs[i]);
    return 0;
}

/* The value of the piece at `p` (`n` ASCII bytes) in `dict` (borrowed: the table or the dict holds
 * it), remembered for those bytes once found; NULL: not in the dict (or an error set). */
static PyObject *capcache_piece(CapCache *c, int table, PyObject *dict, const char *p, Py_ssize_t n) {
    PieceSlot *slot = &c->pieces[(Py_ssize_t)table * PIECE_SLOTS + (Py_ssize_t)(hash_bytes(p, n) & (PIECE_SLOTS - 1))];
    PyObject *key = slot->key;
    if (key != NULL && PyUnicode_GET_LENGTH(key) == n && memcmp(PyUnicode_DATA(key), p, (size_t)n) == 0) {
        if (slot->value != NULL)
            return slot->value;
    } else {
        key = ascii_str(p, n);
        if (key == NULL)
            return NULL;
        Py_XSETREF(slot->key, key);
        Py_CLEAR(slot->value);
    }
    PyObject *value = PyDict_GetItemWithError(dict, key);
    if (value != NULL) {
        Py_INCREF(value);
        slot->value = value;
    }
    return value;
}

static inline int same_str(PyObject *a, PyObject *b) {
    if (a == b)
        return 1;
    Py_ssize_t n = PyUnicode_GET_LENGTH(a);
    return n == PyUnicode_GET_LENGTH(b) && PyUnicode_KIND(a) == PyUnicode_KIND(b) &&
           memcmp(PyUnicode_DATA(a), PyUnicode_DATA(b), (size_t)(n * PyUnicode_KIND(a))) == 0;
}

/* The tuple `(a, b)` (a new reference): the one made lately for equal strs, else a new one kept. */
static PyObject *capcache_pair(CapCache *c, PyObject *a, PyObject *b) {
    if (!PyUnicode_CheckExact(a) || !PyUnicode_CheckExact(b))
        return PyTuple_Pack(2, a, b);
    Py_hash_t ha = PyObject_Hash(a), hb = PyObject_Hash(b);
    if (ha == -1 || hb == -1)
        return NULL;
    PyObject **slot = &c->pairs[((size_t)ha * 1000003u ^ (size_t)hb) & (PAIR_SLOTS - 1)];
    PyObject *pair = *slot;
    if (pair != NULL && same_str(PyTuple_GET_ITEM(pair, 0), a) && same_str(PyTuple_GET_ITEM(pair, 1), b))
        return Py_NewRef(pair);
    pair = PyTuple_Pack(2, a, b);
    if (pair == NULL)
        return NULL;
    Py_XSETREF(*slot, Py_NewRef(pair));
    return pair;
}

#endif
