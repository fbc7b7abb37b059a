/*
 * A part of lockcheck/engine/_capturecore.c, which includes its parts in order.  This one: the chain
 * keys the filter has found in the checker's chain cache, and the chain keys' ints.
 *
 * Why (issue 23): every acquisition the filter applies made its chain key as a new int (~130
 * instructions: a 64-bit key is a three-digit int) and looked it up in the chain cache, a set of
 * such ints (~310: the int hashed, the set probed, the int it holds compared), ~140 instructions a
 * line of the benchmark capture.  As the `.lt` core does (_lt_known.h), the filter keeps a copy of
 * the keys it found in the set, a table of the 64-bit keys, which stays true while the set only
 * grows; the set is a `lockdep.chain_cache.ChainCache`, whose `generation` changes whenever a key
 * may have left it, read again whenever Python code ran (`known_sync`: at `resume` and after an
 * irq-context change's Python call); a set without a generation is asked every time.  And the ints
 * are kept, by their value, in a direct-mapped table: the same key is the same (immutable) int.
 */
#ifndef LOCKCHECK_CAPTURECORE_KNOWN_H
#define LOCKCHECK_CAPTURECORE_KNOWN_H

#include <Python.h>
#include <stdint.h>

#define KNOWN_INT_SLOTS 4096 /* (a power of two) */

typedef struct {
    uint64_t *keys;      /* open addressing, 0: empty (the key 0 is `zero`) */
    Py_ssize_t size, count;
    int zero;
    long long gen;       /* the cache's generation the copy is of; -1: no copy kept (no generation) */
    PyObject **ints;     /* KNOWN_INT_SLOTS ints (or NULL) */
    uint64_t *int_keys;  /* their values */
} KnownChains;

static PyObject *s_generation;

/* the cache's generation (*out), 1: it has none, -1 error */
static int known_generation(PyObject *cache, long long *out) {
    PyObject *value = PyObject_GetAttr(cache, s_generation);
    if (value == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError))
            return -1;
        PyErr_Clear();
        return 1;
    }
    *out = PyLong_AsLongLong(value);
    Py_DECREF(value);
    return *out == -1 && PyErr_Occurred() ? -1 : 0;
}

static void known_forget(KnownChains *k) {
    if (k->keys != NULL)
        memset(k->keys, 0, (size_t)k->size * sizeof(uint64_t));
    k->count = 0;
    k->zero = 0;
}

/* Python code ran: the copy forgotten if the cache may have lost a key since (0, -1 error) */
static int known_sync(KnownChains *k, PyObject *cache) {
    long long generation = 0;
    int r = known_generation(cache, &generation);
    if (r < 0)
        return -1;
    if (r || generation != k->gen) {
        known_forget(k);
        k->gen = r ? -1 : generation;
    }
    return 0;
}

static int known_start(KnownChains *k, PyObject *cache) {
    if (k->ints == NULL) {
        k->ints = PyMem_Calloc(KNOWN_INT_SLOTS, sizeof(PyObject *));
        k->int_keys = PyMem_Calloc(KNOWN_INT_SLOTS, sizeof(uint64_t));
        if (k->ints == NULL || k->int_keys == NULL) {
            PyErr_NoMemory();
            return -1;
        }
    }
    k->gen = -2; /* (none yet: the first sync takes the cache's) */
    return known_sync(k, cache);
}

static void known_clear(KnownChains *k) {
    if (k->ints != NULL)
        for (Py_ssize_t i = 0; i < KNOWN_INT_SLOTS; i++)
            Py_CLEAR(k->ints[i]);
    PyMem_Free(k->ints);
    PyMem_Free(k->int_keys);
    PyMem_Free(k->keys);
    k->ints = NULL;
    k->int_keys = NULL;
    k->keys = NULL;
    k->size = k->count = 0;
}

static inline Py_ssize_t known_slot(uint64_t key, Py_ssize_t size) {
    return (Py_ssize_t)((key * 0x9E3779B97F4A7C15ULL) >> 20) & (size - 1);
}

/* the chain key `hash` as an int (a new reference; the one kept for that value when there is one) */
static inline PyObject *known_int(KnownChains *k, Py_hash_t hash) {
    Py_ssize_t i = known_slot((uint64_t)hash, KNOWN_INT_SLOTS);
    PyObject *v = k->ints[i];
    if (v != NULL && k->int_keys[i] == (uint64_t)hash)
        return Py_NewRef(v);
    v = PyLong_FromSsize_t(hash);
    if (v != NULL) {
        Py_XSETREF(k->ints[i], Py_NewRef(v));
        k->int_keys[i] = (uint64_t)hash;
    }
    return v;
}

static inline int known_has(const KnownChains *k, uint64_t key) {
    if (key == 0)
        return k->zero;
    if (k->count == 0)
        return 0;
    Py_ssize_t mask = k->size - 1;
    for (Py_ssize_t j = known_slot(key, k->size);; j = (j + 1) & mask) {
        uint64_t got = k->keys[j];
        if (got == key)
            return 1;
        if (got == 0)
            return 0;
    }
}

/* remember a key found in the cache (a copy that cannot grow is not kept: no error) */
static void known_add(KnownChains *k, uint64_t key) {
    if (key == 0) {
        k->zero = 1;
        return;
    }
    if ((k->count + 1) * 2 > k->size) {
        Py_ssize_t size = k->size ? k->size * 2 : 4096;
        uint64_t *table = PyMem_Calloc((size_t)size, sizeof(uint64_t));
        if (table == NULL)
            return;
        for (Py_ssize_t i = 0; i < k->size; i++) {
            uint64_t old = k->keys[i];
            if (old == 0)
                continue;
            Py_ssize_t j = known_slot(old, size);
            while (table[j] != 0)
                j = (j + 1) & (size - 1);
            table[j] = old;
        }
        PyMem_Free(k->keys);
        k->keys = table;
        k->size = size;
    }
    Py_ssize_t mask = k->size - 1;
    Py_ssize_t j = known_slot(key, k->size);
    for (; k->keys[j] != 0; j = (j + 1) & mask)
        if (k->keys[j] == key)
            return;
    k->keys[j] = key;
    k->count++;
}

/* whether the chain key `hash` (`key`: it as an int) is in the chain cache: 1, 0, -1 error */
static inline int known_cached(KnownChains *k, PyObject *cache, Py_hash_t hash, PyObject *key) {
    if (k->gen >= 0 && known_has(k, (uint64_t)hash))
        return 1;
    int cached = PySet_Contains(cache, key);
    if (cached > 0 && k->gen >= 0)
        known_add(k, (uint64_t)hash);
    return cached;
}

#endif
