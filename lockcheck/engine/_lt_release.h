/*
 * Releases applied: of the innermost lock (release_innermost), and (Checker.quick_reacquire) of
 * one below the top whose re-acquired locks all land on cached chains and mark no usage bit
 * (fast_held.release_out_of_order), on the held list or among the overlay's entries.  A unit:
 * every release path, and find_held, which the contention path shares.  Relies on _lt_stack.h,
 * _lt_chainkey.h, _lt_known.h, _lt_classes.h, _lt_tail.h, _lt_overlay.h and _lt_irq.h (long_attr).
 *
 * Part of the `.lt` core (_speedups.c), which includes it with the other _lt_*.h in one translation
 * unit: its static functions stay where the compiler can inline them, as when they were one file.
 */
#ifndef LOCKCHECK_LT_RELEASE_H
#define LOCKCHECK_LT_RELEASE_H

#include "_lt_state.h"
#include "_lt_slots.h"
#include "_lt_stack.h"
#include "_lt_chainkey.h"
#include "_lt_known.h"
#include "_lt_classes.h"
#include "_lt_tail.h"
#include "_lt_overlay.h"
#include "_lt_irq.h"

/* Checker.feed's release of the innermost lock (lock_release's, merged): 1 applied, 0 not. */
static int release_innermost(LineFilter *self, PyObject *task, PyObject *held, PyObject *top, long cpu,
                             PyObject *info, const Tail *t) {
    if (top == NULL)
        return 0;
    PyObject *lock = NULL, *instance = NULL;
    int r;
    long references = PyTuple_CheckExact(top) ? as_long(PyTuple_GET_ITEM(top, E_REFERENCES)) : -1;
    if (references == 0) {
        PyObject *release = PyTuple_GET_ITEM(top, E_RELEASE);
        if (info != NULL) {
            int same = PyUnicode_Compare(release, PyTuple_GET_ITEM(info, I_RELEASE));
            if (same != 0)
                return PyErr_Occurred() ? -1 : 0;
        } else if (!str_is(release, t->field - 8, 8 + t->field_len)) {
            return 0; /* the tail starts `release CLASS@INSTANCE`: the text of the plain release */
        }
        r = pop_entry(task, held, top);
    } else {
        if (released_lock(info, t, &lock, &instance) < 0)
            return -1;
        if (references < 0) {
            /* a HeldLock the full checker left on top: its innermost release, as Checker.feed's */
            r = held_lock_released(task, held, top, lock, instance);
        } else {
            r = PyObject_RichCompareBool(PyTuple_GET_ITEM(top, E_LOCK), lock, Py_EQ);
            if (r > 0) {
                r = PyObject_RichCompareBool(PyTuple_GET_ITEM(top, E_INSTANCE), instance, Py_EQ);
                if (r == 0 && as_long(PyTuple_GET_ITEM(top, E_SUBCLASS)) == 0)
                    r = 1;
                if (r > 0) {
                    Py_INCREF(top);
                    r = references > 1 ? replace_references(held, top, references - 1) : pop_entry(task, held, top);
                    Py_DECREF(top);
                    r = r < 0 ? -1 : 1;
                }
            }
        }
        Py_DECREF(lock);
        Py_DECREF(instance);
        if (r <= 0)
            return r;
    }
    if (r < 0 || set_cpu(task, cpu) < 0)
        return -1;
    self->events++;
    return 1;
}

/* fast_held._find_held over tuple entries: the index of the held lock, -1 not found (or a HeldLock
 * on the way: the Python side's), -2 on error. */
static Py_ssize_t find_held(PyObject *held, PyObject *lock, PyObject *instance) {
    for (Py_ssize_t i = PyList_GET_SIZE(held) - 1; i >= 0; i--) {
        PyObject *entry = PyList_GET_ITEM(held, i);
        if (!PyTuple_CheckExact(entry))
            return -1;
        int same = PyObject_RichCompareBool(PyTuple_GET_ITEM(entry, E_LOCK), lock, Py_EQ);
        if (same > 0) {
            same = PyObject_RichCompareBool(PyTuple_GET_ITEM(entry, E_INSTANCE), instance, Py_EQ);
            if (same == 0 && PyObject_IsTrue(PyTuple_GET_ITEM(entry, E_REFERENCES)) &&
                as_long(PyTuple_GET_ITEM(entry, E_SUBCLASS)) == 0)
                same = 1;
        }
        if (same < 0)
            return -2;
        if (same)
            return i;
        if (i > 0) {
            /* not crossing into another irq context */
            PyObject *below = PyList_GET_ITEM(held, i - 1);
            PyObject *context;
            if (PyTuple_CheckExact(below)) {
                context = PyTuple_GET_ITEM(below, E_IRQ_CONTEXT);
                Py_INCREF(context);
            } else {
                context = PyObject_GetAttr(below, s_irq_context);
                if (context == NULL)
                    return -2;
            }
            same = PyObject_RichCompareBool(context, PyTuple_GET_ITEM(entry, E_IRQ_CONTEXT), Py_EQ);
            Py_DECREF(context);
            if (same <= 0)
                return same < 0 ? -2 : -1;
        }
    }
    return -1;
}

/* fast_held.release_out_of_order: the release of `lock`/`instance` below the top, when every lock
 * above re-acquires onto a cached chain marking no usage bit: 1 applied, 0 nothing changed, -1. */
/* Whether a lock re-acquired above a released one marks no new usage bit on its class (`need`: the
 * task's usage_need list; `read`, `trylock`, `off`: the entry's mode, trylock, hardirqs off): 1, 0
 * (a new bit: mark_usage, the tuple path's; or the class is gone), -1 on error. */
static int reacquire_marks_nothing(LineFilter *self, PyObject *need, PyObject *cls, long read, int trylock,
                                   int off) {
    long wanted = as_long(PyList_GET_ITEM(need, rules_usage_index(read, trylock, off)));
    PyObject *node = PyDict_GetItemWithError(self->classes, cls);
    long usage;
    int known = node != NULL && PyDict_Check(node) ? node_usage(node, NULL, &usage) : (PyErr_Occurred() ? -1 : 0);
    if (known <= 0)
        return known;
    return (wanted & ~usage) == 0;
}

static int release_below(LineFilter *self, PyObject *view, PyObject *task, PyObject *held, PyObject *lock,
                         PyObject *instance, long cpu) {
    if (self->classes == NULL)
        return 0;
    Py_ssize_t index = find_held(held, lock, instance);
    if (index < 0)
        return index == -2 ? -1 : 0;
    PyObject *found = PyList_GET_ITEM(held, index);
    if (PyObject_IsTrue(PyTuple_GET_ITEM(found, E_REFERENCES)))
        return 0;
    long irq_context = as_long(PyTuple_GET_ITEM(view, V_IRQ_CONTEXT));
    long below_context = -1; /* no lock below: the chain goes on from the key */
    if (index > 0) {
        PyObject *below = PyList_GET_ITEM(held, index - 1);
        if (PyTuple_CheckExact(below)) {
            below_context = as_long(PyTuple_GET_ITEM(below, E_IRQ_CONTEXT));
        } else if (long_attr(below, s_irq_context, &below_context) < 0) {
            return -1;
        }
    }
    PyObject *need = task_attr(task, TS_USAGE_NEED);
    if (need == NULL)
        return -1;
    Py_ssize_t size = PyList_GET_SIZE(held);
    PyObject *moved = PyList_New(0);
    PyObject *chain_key = PyTuple_GET_ITEM(found, E_PREV_KEY);
    Py_INCREF(chain_key);
    long hits = 0;
    int r = moved == NULL || !PyList_Check(need) || PyList_GET_SIZE(need) != 8 ? -1 : 1;
    for (Py_ssize_t i = index + 1; r > 0 && i < size; i++) {
        PyObject *again = PyList_GET_ITEM(held, i);
        if (PyTuple_GET_ITEM(again, E_NEST) != Py_None) {
            r = 0;
            break;
        }
        PyObject *cls = PyTuple_GET_ITEM(again, E_CLS), *read = PyTuple_GET_ITEM(again, E_READ);
        int trylock = PyTuple_GET_ITEM(again, E_TRYLOCK) == Py_True;
        long read_mode = as_long(read);
        int off = PyObject_IsTrue(PyTuple_GET_ITEM(again, E_HARDIRQS_OFF));
        int quiet = reacquire_marks_nothing(self, need, cls, read_mode, trylock, off);
        if (quiet <= 0) {
            r = quiet;
            break;
        }
        Py_hash_t hash = hash3(below_context >= 0 && rule_separate(self, below_context, irq_context) ? self->initial : chain_key, cls,
                               read);
        PyObject *next_key = hash == -1 ? NULL : PyLong_FromSsize_t(hash);
        if (next_key == NULL) {
            r = -1;
            break;
        }
        if (rule_validates(self, trylock)) {
            int cached = cache_has(self, hash, next_key);
            if (cached <= 0) {
                Py_DECREF(next_key);
                r = cached; /* a new chain: validate_chain */
                break;
            }
            hits++;
        }
        PyObject *entry = PyTuple_New(E_SIZE);
        if (entry == NULL) {
            Py_DECREF(next_key);
            r = -1;
            break;
        }
        for (Py_ssize_t k = 0; k < E_SIZE; k++) {
            PyObject *item = k == E_PREV_KEY ? chain_key
                             : k == E_IRQ_CONTEXT ? small_ints[irq_context & 3] : PyTuple_GET_ITEM(again, k);
            Py_INCREF(item);
            PyTuple_SET_ITEM(entry, k, item);
        }
        PyObject_GC_UnTrack(entry);
        int appended = PyList_Append(moved, entry);
        Py_DECREF(entry);
        Py_SETREF(chain_key, next_key);
        below_context = irq_context;
        if (appended < 0)
            r = -1;
    }
    Py_DECREF(need);
    if (r > 0) {
        /* everything checked: the stack from the released lock up becomes the moved entries */
        if (PyList_SetSlice(held, index, size, moved) < 0 || set_chain_key(task, chain_key) < 0 ||
            set_cpu(task, cpu) < 0) {
            r = -1;
        } else {
            self->hits += hits;
            self->events++;
        }
    }
    Py_XDECREF(moved);
    Py_DECREF(chain_key);
    return r;
}

/* The most entries above a released one overlay_release_below re-keys (more: the tuple path's). */
#define OV_MOVED 64

/* release_below for a lock among the overlay's entries below its top (`n` > 0, the top not it):
 * every entry above it re-acquired onto a cached chain marking no usage bit, in the overlay -- the
 * released entry's text taken out, the entries above re-keyed.  1 applied, 0 not decided here
 * (not an overlay entry, a chain not cached, a new usage bit...: the caller flushes and the tuple
 * path decides), -1 on error. */
static int overlay_release_below(LineFilter *self, PyObject *view, Overlay *ov, long cpu, const Tail *t) {
    if (self->classes == NULL)
        return 0;
    /* find_held over the overlay: the same CLASS[@INSTANCE] text (its entries hold no references) */
    Py_ssize_t k = ov->n - 2;
    for (;; k--) {
        if (k < 0)
            return 0;
        const OvEntry *e = &ov->entries[k];
        /* find_held_lock: an entry is looked at only below one of its own irq context (the overlay's
         * entries share one today -- an irq op flushes it -- but the rule is kept) */
        if (e->irq_context != ov->entries[k + 1].irq_context)
            return 0;
        if (e->field_len == t->field_len && bytes_eq(ov->text + e->field_off, t->field, t->field_len))
            break;
    }
    Py_ssize_t above = ov->n - 1 - k;
    if (above > OV_MOVED)
        return 0;
    long irq_context = as_long(PyTuple_GET_ITEM(view, V_IRQ_CONTEXT));
    if (irq_context < 0 || irq_context > 3)
        return 0;
    long below_context = -1; /* no lock below: the chain goes on from the key */
    if (k > 0) {
        below_context = ov->entries[k - 1].irq_context;
    } else {
        PyObject *held = ov->held;
        if (PyList_GET_SIZE(held)) {
            PyObject *below = PyList_GET_ITEM(held, PyList_GET_SIZE(held) - 1);
            if (!PyTuple_CheckExact(below))
                return 0; /* a HeldLock: the tuple path's */
            below_context = as_long(PyTuple_GET_ITEM(below, E_IRQ_CONTEXT));
        }
    }
    PyObject *need = task_attr(ov->task, TS_USAGE_NEED);
    if (need == NULL)
        return -1;
    Py_hash_t keys[OV_MOVED + 1];
    long hits = 0;
    int r = PyList_Check(need) && PyList_GET_SIZE(need) == 8 ? 1 : -1;
    keys[0] = ov->entries[k].prev_key;
    for (Py_ssize_t i = 0; r > 0 && i < above; i++) {
        const OvEntry *e = &ov->entries[k + 1 + i];
        if (e->info != NULL && PyTuple_GET_ITEM(e->info, I_NEST) != Py_None) {
            r = 0; /* a nest lock: lock_acquire would look for it (the tuple path's) */
            break;
        }
        int quiet = reacquire_marks_nothing(self, need, e->cls, e->read, e->trylock, e->hardirqs_off == Py_True);
        if (quiet <= 0) {
            r = quiet;
            break;
        }
        int head = below_context >= 0 && rule_separate(self, below_context, irq_context);
        PyObject *lane = head ? (Py_INCREF(self->initial), self->initial) : probe_of(keys[i]);
        Py_hash_t hash = lane == NULL ? -1 : hash3(lane, e->cls, small_ints[e->read]);
        Py_XDECREF(lane);
        if (hash == -1) {
            r = -1;
            break;
        }
        if (rule_validates(self, e->trylock)) {
            int cached = cache_has(self, hash, NULL);
            if (cached <= 0) {
                r = cached; /* a new chain: validate_chain */
                break;
            }
            hits++;
        }
        keys[i + 1] = hash;
        below_context = irq_context;
    }
    Py_DECREF(need);
    if (r <= 0)
        return r;
    /* everything checked: the released entry's line out of the text, the entries above moved down */
    OvEntry *gone = &ov->entries[k];
    PyObject *gone_info = gone->info; /* (its slot is overwritten below) */
    Py_ssize_t cut = gone->line_len, from = gone->line_off + cut;
    memmove(ov->text + gone->line_off, ov->text + from, (size_t)(ov->text_len - from));
    ov->text_len -= cut;
    for (Py_ssize_t i = 0; i < above; i++) {
        OvEntry *e = &ov->entries[k + i];
        *e = ov->entries[k + 1 + i];
        e->line_off -= cut;
        e->field_off -= cut;
        e->prev_key = keys[i];
        e->irq_context = irq_context;
    }
    ov->n--;
    Py_XDECREF(gone_info);
    ov->chain_key = keys[above];
    ov->keyed = 1;
    if (cpu >= 0)
        ov->cpu = cpu;
    self->hits += hits;
    self->events++;
    return 1;
}

/* A release: of the innermost lock, or (Checker.quick_reacquire) of one below it. */
static int apply_release(LineFilter *self, PyObject *view, PyObject *task, PyObject *held, PyObject *top, long cpu,
                         PyObject *info, const Tail *t) {
    int r = release_innermost(self, task, held, top, cpu, info, t);
    if (r != 0 || !self->quick || top == NULL)
        return r;
    PyObject *lock, *instance;
    if (released_lock(info, t, &lock, &instance) < 0)
        return -1;
    r = release_below(self, view, task, held, lock, instance, cpu);
    Py_DECREF(lock);
    Py_DECREF(instance);
    return r;
}

#endif
