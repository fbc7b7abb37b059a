/*
 * The known chain keys (LineFilter.known): a copy of the keys found in the checker's chain cache,
 * so that a hit is one probe of a table of hashes instead of an int hashed and looked up in the
 * set; dropped whenever the cache's generation says it may have lost a key.  A unit: the one
 * answer to "is this chain cached" (cache_has).  Relies on _lt_state.h and _lt_chainkey.h
 * (probe_of, for a look-up in the set itself).
 *
 * Part of the `.lt` core (_speedups.c), which includes it with the other _lt_*.h in one translation
 * unit: its static functions stay where the compiler can inline them, as when they were one file.
 */
#ifndef LOCKCHECK_LT_KNOWN_H
#define LOCKCHECK_LT_KNOWN_H

#include "_lt_state.h"
#include "_lt_chainkey.h"

/* cache.generation (0 and *out), 1: the cache has none (a plain set), -1 on error. */
static int cache_generation(LineFilter *self, long long *out) {
    PyObject *value = PyObject_GetAttr(self->cache, s_generation);
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

static void known_forget(LineFilter *self) {
    if (self->known != NULL)
        memset(self->known, 0, (size_t)self->known_size * sizeof(uint64_t));
    self->known_count = 0;
    self->known_zero = 0;
}

/* A new run: an empty copy, of the cache's generation now (none kept for a set without one). */
static int known_start(LineFilter *self) {
    known_forget(self);
    long long generation = 0;
    int r = cache_generation(self, &generation);
    if (r < 0)
        return -1;
    self->known_gen = r ? -1 : generation;
    return 0;
}

/* Back from the Python side: the copy forgotten if the cache may have lost a key since. */
static int known_sync(LineFilter *self) {
    if (self->known_gen < 0)
        return 0;
    long long generation = 0;
    int r = cache_generation(self, &generation);
    if (r < 0)
        return -1;
    if (r || generation != self->known_gen) {
        known_forget(self);
        self->known_gen = r ? -1 : generation;
    }
    return 0;
}

static inline Py_ssize_t known_slot(uint64_t key, Py_ssize_t size) {
    return (Py_ssize_t)((key * 0x9E3779B97F4A7C15ULL) >> 20) & (size - 1);
}

static inline int known_has(const LineFilter *self, Py_hash_t hash) {
    uint64_t key = (uint64_t)hash;
    if (key == 0)
        return self->known_zero;
    if (self->known_count == 0)
        return 0;
    Py_ssize_t mask = self->known_size - 1;
    for (Py_ssize_t j = known_slot(key, self->known_size);; j = (j + 1) & mask) {
        uint64_t k = self->known[j];
        if (k == key)
            return 1;
        if (k == 0)
            return 0;
    }
}

/* Remember a key found in the cache (a copy that cannot grow is simply not kept: no error). */
static void known_add(LineFilter *self, Py_hash_t hash) {
    uint64_t key = (uint64_t)hash;
    if (key == 0) {
        self->known_zero = 1;
        return;
    }
    if ((self->known_count + 1) * 2 > self->known_size) {
        Py_ssize_t size = self->known_size ? self->known_size * 2 : 4096;
        uint64_t *table = PyMem_Calloc((size_t)size, sizeof(uint64_t));
        if (table == NULL)
            return;
        for (Py_ssize_t i = 0; i < self->known_size; i++) {
            uint64_t k = self->known[i];
            if (k == 0)
                continue;
            Py_ssize_t j = known_slot(k, size);
            while (table[j] != 0)
                j = (j + 1) & (size - 1);
            table[j] = k;
        }
        PyMem_Free(self->known);
        self->known = table;
        self->known_size = size;
    }
    Py_ssize_t mask = self->known_size - 1;
    Py_ssize_t j = known_slot(key, self->known_size);
    for (; self->known[j] != 0; j = (j + 1) & mask)
        if (self->known[j] == key)
            return;
    self->known[j] = key;
    self->known_count++;
}

/* Whether the chain key `hash` is in the chain cache (`key`: it as an int, or NULL: made here if
 * needed): 1, 0, -1 on error. */
static int cache_has(LineFilter *self, Py_hash_t hash, PyObject *key) {
    if (self->known_gen >= 0 && known_has(self, hash))
        return 1;
    if (key != NULL)
        Py_INCREF(key);
    else if ((key = probe_of(hash)) == NULL)
        return -1;
    int cached = PySet_Contains(self->cache, key);
    Py_DECREF(key);
    if (cached > 0 && self->known_gen >= 0)
        known_add(self, hash);
    return cached;
}

#endif
