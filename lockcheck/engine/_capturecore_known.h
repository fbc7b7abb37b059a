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

#include "_knownkeys.h"

#define KNOWN_INT_SLOTS 4096 /* (a power of two) */

typedef struct {
    KnownKeys set;       /* the keys found (_knownkeys.h) */
    long long gen;       /* the cache's generation the copy is of; -1: no copy kept (no generation) */
    PyObject **ints;     /* KNOWN_INT_SLOTS ints (or NULL) */
    uint64_t *int_keys;  /* their values */
} KnownChains;

static PyObject *s_generation;

/* Python code ran: the copy forgotten if the cache may have lost a key since (0, -1 error) */
static int known_sync(KnownChains *k, PyObject *cache) {
    long long generation = 0;
    int r = chain_cache_generation(cache, s_generation, &generation);
    if (r < 0)
        return -1;
    if (r || generation != k->gen) {
        knownkeys_forget(&k->set);
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
    k->ints = NULL;
    k->int_keys = NULL;
    knownkeys_free(&k->set);
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

/* whether the chain key `hash` (`key`: it as an int) is in the chain cache: 1, 0, -1 error */
static inline int known_cached(KnownChains *k, PyObject *cache, Py_hash_t hash, PyObject *key) {
    if (k->gen >= 0 && knownkeys_has(&k->set, (uint64_t)hash))
        return 1;
    int cached = PySet_Contains(cache, key);
    if (cached > 0 && k->gen >= 0)
        knownkeys_add(&k->set, (uint64_t)hash);
    return cached;
}

#endif
