/*
 * A part of lockcheck/engine/_capturecore.c, which includes its parts in order (each uses what the
 * parts before it define).  This one: the release of a lock below the top of the task's held stack
 * (`release_below`), when every lock above it is taken again onto a cached chain marking no usage bit
 * -- the rule the `.lt` core follows (_lt_release.h, fast_held.release_out_of_order), here on the
 * checker's HeldLocks: what `LockRelease.lock_release` and `reacquire_held_locks` do then (either of
 * its ways: the quick one keeps the entry, `lock_acquire` makes an equal one) with the annotator's
 * `_release` and the reader's bookkeeping.  Anything else (a merged or nest entry, a pinned task, a
 * lock in another irq context, a new chain, a new usage bit, lazy releases, wait-context classes) is
 * the Python loop's, nothing changed.
 */
#ifndef LOCKCHECK_CAPTURECORE_BELOW_H
#define LOCKCHECK_CAPTURECORE_BELOW_H

static long acquire_usage(CaptureFilter *self, PyObject *needs, long read, int trylock, int check);

/* the checker's attribute `name` is truthy: 1, 0, -1 error */
static int checker_flag(CaptureFilter *self, const char *name) {
    PyObject *v = PyObject_GetAttrString(self->checker, name);
    if (v == NULL)
        return -1;
    int r = PyObject_IsTrue(v);
    Py_DECREF(v);
    return r;
}

/* The most locks above a released one re-keyed here (more: the Python loop's). */
#define BELOW_MOVED 32

/* `name`@`instance` released below the top of `held` (the top is not it; the task is not pinned;
 * `entry` the reader's held[key] entry, `named`: the name came from it): 1 applied, 0 the Python
 * loop's (nothing changed), -1 error. */
static int release_below(CaptureFilter *self, PyObject *view, PyObject *ctask, PyObject *held, PyObject *name,
                         PyObject *instance, PyObject *entry, PyObject *key, int named) {
    Py_ssize_t n = PyList_GET_SIZE(held);
    long ctx = small_long(SLOT(view, self->view_off[V_IRQ_CONTEXT]));
    PyObject *off = SLOT(view, self->view_off[V_HARDIRQS_OFF]), *needs = SLOT(view, self->view_off[V_USAGE_NEED]);
    if (ctx < 0 || ctx > 3 || off == NULL || needs == NULL)
        return 0;
    /* find_held_lock: top-down, not crossing into another irq context; every entry on the way plain */
    Py_ssize_t index = n - 1;
    for (;; index--) {
        PyObject *h = PyList_GET_ITEM(held, index);
        if (Py_TYPE(h) != self->held_type)
            return 0;
        PyObject *refs = SLOT(h, self->held_off[HL_REFERENCES]), *nest = SLOT(h, self->held_off[HL_NEST]);
        if (refs == NULL || nest != Py_None || SLOT(h, self->held_off[HL_LOCK]) == NULL ||
            SLOT(h, self->held_off[HL_INSTANCE]) == NULL)
            return 0;
        int merged = truth(refs);
        if (merged != 0)
            return merged < 0 ? -1 : 0;
        int same = eq(SLOT(h, self->held_off[HL_LOCK]), name);
        if (same > 0)
            same = eq(SLOT(h, self->held_off[HL_INSTANCE]), instance);
        if (same < 0)
            return -1;
        if (same)
            break;
        if (index == 0 || n - index > BELOW_MOVED)
            return 0; /* (not held: the checker reports it) */
        PyObject *below = PyList_GET_ITEM(held, index - 1);
        if (Py_TYPE(below) != self->held_type)
            return 0;
        PyObject *here = SLOT(h, self->held_off[HL_IRQ_CONTEXT]), *there = SLOT(below, self->held_off[HL_IRQ_CONTEXT]);
        if (here == NULL || there == NULL || small_long(here) < 0 || small_long(here) != small_long(there))
            return 0;
    }
    if (index == n - 1)
        return 0;
    int lazy = checker_flag(self, "lazy_release"), waits = lazy ? lazy : checker_flag(self, "wait_locks");
    if (lazy != 0 || waits != 0)
        return lazy < 0 || waits < 0 ? -1 : 0;
    /* the annotator's `_release`: its entry, found from the top (no nest-merged entry on the way) */
    PyObject *a_held = NULL;
    Py_ssize_t a_index = -1;
    if (self->annotator != NULL) {
        a_held = SLOT(view, self->view_off[V_A_HELD]);
        if (a_held == NULL || !PyList_CheckExact(a_held))
            return 0;
        for (Py_ssize_t i = PyList_GET_SIZE(a_held) - 1; i >= 0 && a_index < 0; i--) {
            PyObject *a = PyList_GET_ITEM(a_held, i);
            if (!PyList_CheckExact(a) || PyList_GET_SIZE(a) != 5)
                return 0;
            int same = eq(PyList_GET_ITEM(a, 1), name);
            if (same > 0)
                same = eq(PyList_GET_ITEM(a, 2), instance);
            if (same < 0)
                return -1;
            if (same)
                a_index = i;
        }
        if (a_index < 0)
            return 0;
    }
    long count = small_long(PyList_GET_ITEM(entry, 1));
    if (count < 0 || (count <= 1 && PyList_GET_SIZE(entry) > 2))
        return 0; /* a lock known by its map too (by_map): the Python loop's */
    /* reacquire_held_locks: each lock above onto a cached chain, no usage bit, in this irq context */
    long below_ctx = -1; /* no lock below: the chain goes on from the key */
    if (index > 0) {
        PyObject *below = PyList_GET_ITEM(held, index - 1);
        PyObject *irq = Py_TYPE(below) == self->held_type ? SLOT(below, self->held_off[HL_IRQ_CONTEXT]) : NULL;
        if (irq == NULL || (below_ctx = small_long(irq)) < 0)
            return 0;
    }
    PyObject *found = PyList_GET_ITEM(held, index);
    PyObject *keys[BELOW_MOVED + 1];
    keys[0] = SLOT(found, self->held_off[HL_PREV_CHAIN_KEY]);
    if (keys[0] == NULL)
        return 0;
    Py_INCREF(keys[0]);
    Py_ssize_t above = n - 1 - index, made = 1;
    long long hits = 0;
    int r = 1;
    for (Py_ssize_t i = 0; r > 0 && i < above; i++) {
        PyObject *h = PyList_GET_ITEM(held, index + 1 + i);
        PyObject *cls = SLOT(h, self->held_off[HL_CLS]), *read = SLOT(h, self->held_off[HL_READ]);
        PyObject *t = SLOT(h, self->held_off[HL_TRYLOCK]), *c = SLOT(h, self->held_off[HL_CHECK]),
                 *irq = SLOT(h, self->held_off[HL_IRQ_CONTEXT]);
        if (t == NULL || c == NULL || irq == NULL) {
            r = 0;
            break;
        }
        int trylock = truth(t), check = truth(c);
        if (trylock < 0 || check < 0) {
            r = -1;
            break;
        }
        r = 0;
        if (cls == NULL || read == NULL || SLOT(h, self->held_off[HL_HARDIRQS_OFF]) != off ||
            small_long(irq) != ctx)
            break; /* (in another irq context or irq state then: lock_acquire's own reading) */
        ClassSlot *cs = capcache_class(&self->cache, cls);
        PyObject *node = cs != NULL ? capcache_get(cs, CS_NODE, self->nodes, cls) : NULL;
        PyObject *usage = node != NULL && PyDict_Check(node) ? capcache_get(cs, CS_USAGE, node, s_usage) : NULL;
        long need = acquire_usage(self, needs, small_long(read), trylock, check), have = usage ? small_long(usage) : -1;
        if (PyErr_Occurred()) {
            r = -1;
            break;
        }
        if (need < 0 || have < 0 || (need & ~have))
            break; /* (a new usage bit: mark_usage) */
        int head = below_ctx >= 0 && rules_separate(self->separate, below_ctx, ctx);
        Py_hash_t hash = rules_hash3(self->hash_ok, head ? self->initial : keys[i], cls, read);
        PyObject *next = hash == -1 ? NULL : known_int(&self->known, hash);
        if (next == NULL) {
            r = -1;
            break;
        }
        keys[made++] = next;
        if (rules_validates(check ? self->validates_checked : self->validates_unchecked, trylock)) {
            int cached = known_cached(&self->known, self->chain_cache, hash, next);
            if (cached <= 0) {
                r = cached; /* a new chain: validate_chain */
                break;
            }
            hits++;
        }
        below_ctx = ctx;
        r = 1;
    }
    if (r > 0) {
        /* -- applied: the released entry out, the ones above re-keyed (as the quick way keeps them) -- */
        r = -1;
        self->ev_now++;
        for (Py_ssize_t i = 0; i < above; i++)
            slot_set(PyList_GET_ITEM(held, index + 1 + i), self->held_off[HL_PREV_CHAIN_KEY], keys[i]);
        slot_set(ctask, self->task_off[T_CHAIN_KEY], keys[above]);
        self->hits_now += hits;
        if (PySequence_DelItem(held, index) == 0 && (a_held == NULL || PySequence_DelItem(a_held, a_index) == 0)) {
            if (named)
                self->resolved++;
            r = count > 1 ? list_add(entry, 1, -1) : PyDict_DelItem(self->held_names, key);
            r = r < 0 ? -1 : 1;
        }
    }
    for (Py_ssize_t i = 0; i < made; i++)
        Py_DECREF(keys[i]);
    return r;
}

#endif
