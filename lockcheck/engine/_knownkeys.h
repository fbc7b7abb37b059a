/*
 * The chain keys a compiled core has found in the checker's chain cache, shared by the `.lt` core
 * (_lt_known.h) and the capture filter (_capturecore_known.h): a table of the 64-bit keys, so that
 * a hit is one probe instead of an int made, hashed and looked up in the set.  It stays true while
 * the set only grows: the set is a `lockdep.chain_cache.ChainCache`, whose `generation` changes
 * whenever a key may have left it (`chain_cache_generation`); each core reads it again whenever
 * Python code ran and forgets its copy when it moved.
 *
 * Why one header: the table and its reading of the generation were written in both cores, and a
 * fix to one (a probe, a growth) must be a fix to both.
 */
#ifndef LOCKCHECK_KNOWNKEYS_H
#define LOCKCHECK_KNOWNKEYS_H

#include <Python.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    uint64_t *keys;   /* open addressing, 0: an empty slot (the key 0 is `zero`) */
    Py_ssize_t size, count;
    int zero;
} KnownKeys;

/* cache.`name` (the generation: 0 and *out), 1: the cache has none (a plain set), -1 on error */
static int chain_cache_generation(PyObject *cache, PyObject *name, long long *out) {
    PyObject *value = PyObject_GetAttr(cache, name);
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

static inline Py_ssize_t known_slot(uint64_t key, Py_ssize_t size) {
    return (Py_ssize_t)((key * 0x9E3779B97F4A7C15ULL) >> 20) & (size - 1);
}

static inline int knownkeys_has(const KnownKeys *k, uint64_t key) {
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

/* remember a key found in the cache (a copy that cannot grow is simply not kept: no error) */
static void knownkeys_add(KnownKeys *k, uint64_t key) {
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

/* the copy forgotten (the table kept for the keys to come) */
static void knownkeys_forget(KnownKeys *k) {
    if (k->keys != NULL)
        memset(k->keys, 0, (size_t)k->size * sizeof(uint64_t));
    k->count = 0;
    k->zero = 0;
}

static void knownkeys_free(KnownKeys *k) {
    PyMem_Free(k->keys);
    k->keys = NULL;
    k->size = k->count = 0;
    k->zero = 0;
}

#endif
