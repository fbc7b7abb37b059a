/*
 * `contended` / `acquired` of a lock the task holds (MoreOps.lock_contended): nothing but the
 * task's cpu, on the held list or on the overlay's entries.  A unit: the statistics ops, which
 * change no stack.  Relies on _lt_release.h (find_held) and _lt_overlay.h.
 *
 * Part of the `.lt` core (_speedups.c), which includes it with the other _lt_*.h in one translation
 * unit: its static functions stay where the compiler can inline them, as when they were one file.
 */
#ifndef LOCKCHECK_LT_CONTENTION_H
#define LOCKCHECK_LT_CONTENTION_H

#include "_lt_state.h"
#include "_lt_slots.h"
#include "_lt_stack.h"
#include "_lt_tail.h"
#include "_lt_overlay.h"
#include "_lt_release.h"

/* `contended` / `acquired` (MoreOps.lock_contended): nothing but the task's cpu when the checker
 * counts them only, or when it would find the lock held (find_held: the lock's `acquire` came
 * first); 1 applied, 0 the full checker's (an empty stack, a lock not held: its reports; a
 * capture's task, which asks its acquired_ever), -1 on error.  Applied here, these lines keep the
 * task's stack as the core's tuples: passed on, they would make HeldLocks of it (materialize). */
static int apply_contention(LineFilter *self, PyObject *view, PyObject *task, PyObject *held, long cpu,
                            PyObject *info, const Tail *t) {
    if (self->checker == NULL || info != NULL)
        return 0;
    int checked = attr_true(self->checker, s_contention_checked);
    if (checked < 0)
        return -1;
    if (checked) {
        if (PyTuple_GET_ITEM(view, V_ACQUIRED_EVER) != Py_None || PyList_GET_SIZE(held) == 0)
            return 0;
        PyObject *lock, *instance;
        if (tail_lock(t, &lock, &instance) < 0)
            return -1;
        Py_ssize_t index = find_held(held, lock, instance);
        Py_DECREF(lock);
        Py_DECREF(instance);
        if (index < 0)
            return index == -2 ? -1 : 0;
    }
    if (set_cpu(task, cpu) < 0)
        return -1;
    self->events++;
    return 1;
}

/* apply_contention for a task whose top entries are in the overlay `ov` (`n` > 0): 1 applied there
 * (the checker counts contention only, or find_held would find the lock among the overlay's
 * entries: the same CLASS[@INSTANCE] text -- the entries hold no references -- without crossing
 * into another irq context), 0 not decided here (the caller flushes and asks apply_contention),
 * -1 on error. */
static int overlay_contention(LineFilter *self, Overlay *ov, long cpu, const Tail *t) {
    if (self->checker == NULL)
        return 0;
    int checked = attr_true(self->checker, s_contention_checked);
    if (checked < 0)
        return -1;
    if (checked) {
        Py_ssize_t k = ov->n - 1;
        for (;; k--) {
            const OvEntry *e = &ov->entries[k];
            if (e->field_len == t->field_len && bytes_eq(ov->text + e->field_off, t->field, t->field_len))
                break;
            /* (the overlay's entries share one irq context -- an irq op flushes it -- but find_held's
             * rule is kept: an entry below in another context is not looked at) */
            if (k == 0 || ov->entries[k - 1].irq_context != e->irq_context)
                return 0; /* (the held list's below, or not held: the tuple path's answer) */
        }
    }
    if (cpu >= 0)
        ov->cpu = cpu;
    self->events++;
    return 1;
}

#endif
