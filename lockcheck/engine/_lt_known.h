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
#include "_knownkeys.h"

static void known_forget(LineFilter *self) {
    knownkeys_forget(&self->known);
}

/* A new run: an empty copy, of the cache's generation now (none kept for a set without one). */
static int known_start(LineFilter *self) {
    known_forget(self);
    long long generation = 0;
    int r = chain_cache_generation(self->cache, s_generation, &generation);
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
    int r = chain_cache_generation(self->cache, s_generation, &generation);
    if (r < 0)
        return -1;
    if (r || generation != self->known_gen) {
        known_forget(self);
        self->known_gen = r ? -1 : generation;
    }
    return 0;
}

static inline int known_has(const LineFilter *self, Py_hash_t hash) {
    return knownkeys_has(&self->known, (uint64_t)hash);
}

static void known_add(LineFilter *self, Py_hash_t hash) {
    knownkeys_add(&self->known, (uint64_t)hash);
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
