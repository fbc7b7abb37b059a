/*
 * A part of lockcheck/engine/_capturecore.c, which includes its parts in order.  This one: the moves
 * of a task's recent locks (`tasks.RecentLocks`) the filter has not made yet.
 *
 * Why (issue 23): every acquisition moves its `(lock, instance)` to the end of the task's recent
 * locks, an OrderedDict (`move_to_end`, ~460 instructions a call: the method call, the pair hashed,
 * looked up, relinked), and sets their `last` to a new int: ~180 instructions a line of the
 * benchmark capture.  Only the order the moves leave matters, and only when Python code looks:
 * moves of locks already there leave those locks at the end in the order of their last moves.  So
 * a ring per RecentLocks keeps the pairs moved lately, oldest first (a pair moved again goes to
 * the ring's end), and `last`; the moves are made, in that order, when the ring is full (its
 * oldest), before a new lock is added (all), and before the Python code that may look at them runs
 * (`rings_flush`, at `suspend`): the OrderedDict then is what the moves one by one would have made it.
 * Some Python runs mid-line before that (`read_policy`, `RecentLocks.add`, the view and event
 * constructors): none of it looks at a recent-locks order or `last`, and a new one must not.  A pair not
 * in the ring is first looked up (a dict probe), so a pair the OrderedDict lacks is added as before.
 */
#ifndef LOCKCHECK_CAPTURECORE_RECENT_H
#define LOCKCHECK_CAPTURECORE_RECENT_H

#include <Python.h>
#include <stdint.h>

#define RING_SLOTS 64 /* rings (a power of two), direct-mapped by their RecentLocks */
#define RING_N 8      /* pairs a ring defers at most */

typedef struct {
    PyObject *recent;         /* the RecentLocks (owned), or NULL: a free ring */
    PyObject *moved[RING_N];  /* its pairs to move to the end, oldest first (owned) */
    int n;
    int listed;               /* in `dirty` */
    long long last;           /* its `last` to set, or -1 */
} RecentRing;

typedef struct {
    RecentRing rings[RING_SLOTS];
    int dirty[RING_SLOTS];    /* the rings taken since the last `rings_flush` */
    int n_dirty;
    PyObject *move_to_end;    /* OrderedDict.move_to_end (borrowed: the filter's) */
    Py_ssize_t locks_off, last_off;  /* RecentLocks' `_locks` and `last` slots */
} RecentRings;

#define RSLOT(o, off) (*(PyObject **)((char *)(o) + (off)))

static int ring_move(RecentRings *rs, PyObject *locks, PyObject *pair) {
    PyObject *args[2] = {locks, pair};
    PyObject *done = PyObject_Vectorcall(rs->move_to_end, args, 2, NULL);
    Py_XDECREF(done);
    return done == NULL ? -1 : 0;
}

/* the ring's moves made (and its `last` set when `all`): 0, -1 error (the ring emptied either way) */
static int ring_flush(RecentRings *rs, RecentRing *ring, int all) {
    int r = 0;
    PyObject *locks = ring->recent != NULL ? RSLOT(ring->recent, rs->locks_off) : NULL;
    for (int i = 0; i < ring->n; i++) {
        if (r == 0 && (locks == NULL || ring_move(rs, locks, ring->moved[i]) < 0))
            r = -1;
        Py_CLEAR(ring->moved[i]);
    }
    ring->n = 0;
    if (!all)
        return r;
    if (ring->last >= 0 && ring->recent != NULL && r == 0) {
        PyObject *last = PyLong_FromLongLong(ring->last);
        if (last == NULL)
            r = -1;
        else
            Py_XSETREF(RSLOT(ring->recent, rs->last_off), last);
    }
    ring->last = -1;
    Py_CLEAR(ring->recent);
    return r;
}

static inline RecentRing *ring_slot(RecentRings *rs, PyObject *recent) {
    return &rs->rings[(size_t)(((uintptr_t)recent * 0x9E3779B97F4A7C15ULL) >> 40) & (RING_SLOTS - 1)];
}

/* the ring of `recent`, or NULL: none now */
static inline RecentRing *ring_find(RecentRings *rs, PyObject *recent) {
    RecentRing *ring = ring_slot(rs, recent);
    return ring->recent == recent ? ring : NULL;
}

/* the ring of `recent`, taken for it (another's made first) ; NULL: an error */
static RecentRing *ring_take(RecentRings *rs, PyObject *recent) {
    RecentRing *ring = ring_slot(rs, recent);
    if (ring->recent == recent)
        return ring;
    if (ring->recent != NULL && ring_flush(rs, ring, 1) < 0)
        return NULL;
    ring->recent = Py_NewRef(recent);
    ring->last = -1;
    if (!ring->listed) {
        ring->listed = 1;
        rs->dirty[rs->n_dirty++] = (int)(ring - rs->rings);
    }
    return ring;
}

/* `locks.move_to_end(pair)` (or, if it lacks the pair, 0 with nothing done), deferred: 1 done, 0 not
 * there, -1 error */
static int ring_moved(RecentRings *rs, RecentRing *ring, PyObject *locks, PyObject *pair, Py_hash_t hash) {
    int n = ring->n;
    for (int i = 0; i < n; i++)
        if (ring->moved[i] == pair) {
            memmove(&ring->moved[i], &ring->moved[i + 1], (size_t)(n - 1 - i) * sizeof(PyObject *));
            ring->moved[n - 1] = pair;
            return 1;
        }
    int there = _PyDict_Contains_KnownHash(locks, pair, hash); /* (the pair's hash known: not made again) */
    if (there <= 0)
        return there;
    if (n == RING_N) { /* (the oldest now: the others' last moves came after it) */
        int r = ring_move(rs, locks, ring->moved[0]);
        Py_DECREF(ring->moved[0]);
        memmove(&ring->moved[0], &ring->moved[1], (size_t)(n - 1) * sizeof(PyObject *));
        ring->n = --n;
        if (r < 0)
            return -1;
    }
    ring->moved[n] = Py_NewRef(pair);
    ring->n = n + 1;
    return 1;
}

/* every ring's moves made and `last` set (before Python code runs): 0, -1 error */
static int rings_flush(RecentRings *rs) {
    int r = 0;
    for (int i = 0; i < rs->n_dirty; i++) {
        RecentRing *ring = &rs->rings[rs->dirty[i]];
        ring->listed = 0;
        if (ring->recent != NULL && ring_flush(rs, ring, 1) < 0)
            r = -1;
    }
    rs->n_dirty = 0;
    return r;
}

static void rings_clear(RecentRings *rs) {
    for (int i = 0; i < RING_SLOTS; i++) {
        RecentRing *ring = &rs->rings[i];
        for (int j = 0; j < ring->n; j++)
            Py_CLEAR(ring->moved[j]);
        ring->n = 0;
        ring->listed = 0;
        Py_CLEAR(ring->recent);
    }
    rs->n_dirty = 0;
}

static int rings_traverse(RecentRings *rs, visitproc visit, void *arg) {
    for (int i = 0; i < RING_SLOTS; i++) {
        RecentRing *ring = &rs->rings[i];
        Py_VISIT(ring->recent);
        for (int j = 0; j < ring->n; j++)
            Py_VISIT(ring->moved[j]);
    }
    return 0;
}

#endif
