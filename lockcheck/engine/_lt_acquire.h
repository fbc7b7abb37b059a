/*
 * An acquisition applied: Checker.feed + lock_acquire for a chain-cache hit or a nest_lock merge,
 * onto the held overlay (overlay_acquire) or as a tuple on the held list (apply_acquire); any
 * miss, new usage bit or unread shape goes to the full checker.  A unit: the acquire path and
 * the fields it gathers (Acquire).  Relies on _lt_stack.h, _lt_chainkey.h, _lt_known.h,
 * _lt_classes.h, _lt_tail.h and _lt_overlay.h.
 *
 * Part of the `.lt` core (_speedups.c), which includes it with the other _lt_*.h in one translation
 * unit: its static functions stay where the compiler can inline them, as when they were one file.
 */
#ifndef LOCKCHECK_LT_ACQUIRE_H
#define LOCKCHECK_LT_ACQUIRE_H

#include "_lt_state.h"
#include "_lt_slots.h"
#include "_lt_stack.h"
#include "_lt_chainkey.h"
#include "_lt_known.h"
#include "_lt_classes.h"
#include "_lt_tail.h"
#include "_lt_overlay.h"

/* An acquisition's fields, from a Tail read here or a hotpath info tuple: borrowed, or (the
 * `owned` ones) made for this line. */
typedef struct {
    PyObject *release, *cls, *lock, *instance, *read, *nest, *subclass, *node;
    ClassSlot *slot;        /* the class table's slot of `node` (read here), or NULL (an info tuple's) */
    PyObject *info;         /* borrowed: the info tuple the fields are from, or NULL (read here) */
    int trylock;
    PyObject *owned[3];
} Acquire;

static void acquire_clear(Acquire *a) {
    for (int i = 0; i < 3; i++)
        Py_CLEAR(a->owned[i]);
}

/* A capture's task remembers the locks it took (TaskState.acquired_ever). */
static int remember(PyObject *view, PyObject *lock, PyObject *instance) {
    PyObject *acquired_ever = PyTuple_GET_ITEM(view, V_ACQUIRED_EVER);
    if (acquired_ever == Py_None)
        return 0;
    PyObject *pair = PyTuple_Pack(2, lock, instance);
    PyObject *done = pair ? PyObject_CallMethodObjArgs(acquired_ever, s_add, pair, NULL) : NULL;
    Py_XDECREF(pair);
    if (done == NULL)
        return -1;
    Py_DECREF(done);
    return 0;
}

/* apply_acquire's end for an acquisition pushed onto the held overlay: the chain key computed
 * and looked up as hashes (probe_of), the push kept in C.  1 applied, 0 the full checker's, -1
 * error. */
static int overlay_acquire(LineFilter *self, const char *data, Py_ssize_t n, PyObject *view, PyObject *held,
                           long cpu, Acquire *a, const Tail *t, Overlay *ov, int head, long context,
                           long read_mode) {
    PyObject *task = PyTuple_GET_ITEM(view, V_TASK);
    Py_hash_t prev;
    if (ov != NULL && ov->keyed) {
        prev = ov->chain_key;
    } else {
        PyObject *key = get_chain_key(task);
        if (key == NULL)
            return -1;
        prev = PyLong_AsSsize_t(key);
        Py_DECREF(key);
        if (prev == -1 && PyErr_Occurred())
            return -1;
    }
    Py_hash_t hash;
    if (lanes_ok && a->slot != NULL && self->initial_lane != -1) {
        hash = hash3_lanes(head ? self->initial_lane : int_hash(prev), a->slot->cls_hash, read_mode);
    } else {
        PyObject *lane = head ? (Py_INCREF(self->initial), self->initial) : probe_of(prev);
        if (lane == NULL)
            return -1;
        hash = hash3(lane, a->cls, a->read);
        Py_DECREF(lane);
        if (hash == -1)
            return -1;
    }
    if (rule_validates(self, a->trylock)) {
        int cached = cache_has(self, hash, NULL);
        if (cached <= 0)
            return cached; /* a miss: validate_chain, in the full checker */
    }
    ov = overlay_find(self, held, task, 1); /* (finding room may have flushed them all) */
    if (ov == NULL || overlay_push(ov, data, n, t, a->cls, a->info, context, (int)read_mode, a->trylock,
                                   PyTuple_GET_ITEM(view, V_HARDIRQS_OFF), prev, hash, self->lineno) < 0)
        return -1;
    if (cpu >= 0)
        ov->cpu = cpu;
    if (rule_validates(self, a->trylock))
        self->hits++;
    self->events++;
    return 1;
}

/* The lock field of an acquisition _scan_tail read (its `info`) in its line (`TASK acquire FIELD ...`,
 * the field the info's release text names): 1 and *t set, 0 not found as expected (the tuple path). */
static int info_field(const char *data, Py_ssize_t n, PyObject *info, Tail *t) {
    PyObject *release = PyTuple_GET_ITEM(info, I_RELEASE), *lock = PyTuple_GET_ITEM(info, I_LOCK);
    PyObject *instance = PyTuple_GET_ITEM(info, I_INSTANCE);
    if (!PyUnicode_Check(release) || !PyUnicode_IS_COMPACT_ASCII(release) || !PyUnicode_Check(lock) ||
        !PyUnicode_IS_COMPACT_ASCII(lock) || PyUnicode_GET_LENGTH(release) <= 8)
        return 0;
    const char *space = find_byte(data, n, ' ');
    if (space == NULL || data + n - (space + 1) < 8 || !bytes_eq(space + 1, "acquire ", 8))
        return 0;
    const char *field = space + 9, *end = data + n;
    Py_ssize_t len = PyUnicode_GET_LENGTH(release) - 8, lock_len = PyUnicode_GET_LENGTH(lock);
    int has_instance = instance != Py_None;
    if (end - field < len || (end - field > len && field[len] != ' ') ||
        !bytes_eq(field, (const char *)PyUnicode_1BYTE_DATA(release) + 8, len) || lock_len > len ||
        !bytes_eq(field, (const char *)PyUnicode_1BYTE_DATA(lock), lock_len) ||
        (has_instance ? lock_len >= len || field[lock_len] != '@' : lock_len != len))
        return 0;
    t->field = field;
    t->field_len = len;
    t->lock_len = lock_len;
    t->has_instance = has_instance;
    return 1;
}

/* Checker.lock_is_held over the overlay's entries (they hold no references: the lock and instance
 * given): 1 held, 0 not found there (or a lock not ASCII: asked of the held list alone). */
static int overlay_holds(const Overlay *ov, PyObject *lock, PyObject *instance) {
    int has_instance = instance != Py_None;
    if (!PyUnicode_Check(lock) || !PyUnicode_IS_COMPACT_ASCII(lock) ||
        (has_instance && (!PyUnicode_Check(instance) || !PyUnicode_IS_COMPACT_ASCII(instance))))
        return 0;
    Py_ssize_t lock_len = PyUnicode_GET_LENGTH(lock), instance_len = has_instance ? PyUnicode_GET_LENGTH(instance) : 0;
    for (Py_ssize_t i = 0; i < ov->n; i++) {
        const OvEntry *e = &ov->entries[i];
        const char *field = ov->text + e->field_off;
        if (e->lock_len == lock_len && e->has_instance == has_instance &&
            bytes_eq(field, (const char *)PyUnicode_1BYTE_DATA(lock), lock_len) &&
            (!has_instance || (e->field_len - lock_len - 1 == instance_len &&
                               bytes_eq(field + lock_len + 1, (const char *)PyUnicode_1BYTE_DATA(instance), instance_len))))
            return 1;
    }
    return 0;
}

/* Checker.feed + lock_acquire for a chain-cache hit (or a nest_lock merge): 1 applied, 0 the
 * full checker's, -1 error.  Makes the fields of `a` it still lacks from the Tail `t`. */
static int apply_acquire(LineFilter *self, PyObject *line, const char *data, Py_ssize_t n, PyObject *view,
                         PyObject *held, PyObject *top, long cpu, Acquire *a, const Tail *t, Overlay *ov) {
    PyObject *task = PyTuple_GET_ITEM(view, V_TASK);
    PyObject *cls = a->cls;
    PyObject *nest = a->nest;
    PyObject *irq_context = PyTuple_GET_ITEM(view, V_IRQ_CONTEXT);
    PyObject *hardirqs_off = PyTuple_GET_ITEM(view, V_HARDIRQS_OFF);
    long context = as_long(irq_context);
    int nest_given = nest != Py_None;
    /* pushed onto the held overlay: an acquisition read here, or read by _scan_tail (a subclass, a
     * nest lock: its info kept with the entry), of a task that keeps no acquired_ever, in one of
     * lockdep's irq contexts */
    int overlaid = self->overlay && PyTuple_GET_ITEM(view, V_ACQUIRED_EVER) == Py_None && context >= 0 &&
                   context <= 3 && (hardirqs_off == Py_True || hardirqs_off == Py_False);
    Tail info_tail; /* an info's lock field in the line (where the overlay keeps it) */
    const Tail *field = t;
    if (overlaid && a->release != NULL) {
        overlaid = a->info != NULL && info_field(data, n, a->info, &info_tail);
        field = &info_tail;
    }
    if (overlaid && ov != NULL && ov->n) {
        /* a merge onto the overlay's top entry (nest_lock_merges): the tuple path's, on the held list */
        int same = 0;
        if (rule_merges(self, nest_given, 0) != rule_merges(self, nest_given, 1)) {
            same = PyObject_RichCompareBool(ov->entries[ov->n - 1].cls, cls, Py_EQ);
            if (same < 0)
                return -1;
        }
        if (rule_merges(self, nest_given, same))
            overlaid = 0;
    }
    if (overlay_dirty(ov) && !overlaid) {
        /* the tuple path, or a merge onto the top entry: on the held list as the tuple path has it */
        if (overlay_flush(self, ov) < 0)
            return -1;
        Py_ssize_t size = PyList_GET_SIZE(held);
        top = size ? PyList_GET_ITEM(held, size - 1) : NULL;
    }
    Py_ssize_t above = ov != NULL ? ov->n : 0;
    Py_ssize_t depth = PyList_GET_SIZE(held) + above;
    if (depth >= self->depth_limit)
        return 0;
    int head = 0;
    if (above) {
        /* the overlay's top entry (no merge onto it: asked above) */
        head = rule_separate(self, ov->entries[above - 1].irq_context, context);
    } else if (top != NULL) {
        long top_context;
        /* the class compared only where the merge rule depends on it */
        int ask_class = rule_merges(self, nest_given, 0) != rule_merges(self, nest_given, 1);
        int same_class = 0;
        if (PyTuple_CheckExact(top)) {
            top_context = as_long(PyTuple_GET_ITEM(top, E_IRQ_CONTEXT));
            if (ask_class)
                same_class = PyObject_RichCompareBool(PyTuple_GET_ITEM(top, E_CLS), cls, Py_EQ);
        } else {
            PyObject *value = PyObject_GetAttr(top, s_irq_context);
            if (value == NULL)
                return -1;
            top_context = as_long(value);
            Py_DECREF(value);
            if (ask_class) {
                value = PyObject_GetAttr(top, s_cls);
                if (value == NULL)
                    return -1;
                same_class = PyObject_RichCompareBool(value, cls, Py_EQ);
                Py_DECREF(value);
            }
        }
        if (same_class < 0)
            return -1;
        if (top_context < 0 || top_context > 3)
            return 0;
        if (rule_merges(self, nest_given, same_class)) {
            /* nest_lock merge: one more reference on the top entry (the task's chain key and cpu
             * its own first: an empty overlay's, apply_split) */
            if ((overlay_dirty(ov) && overlay_flush(self, ov) < 0) || merge_reference(held, top) < 0 ||
                set_cpu(task, cpu) < 0 || remember(view, a->lock, a->instance) < 0)
                return -1;
            self->events++;
            return 1;
        }
        head = rule_separate(self, top_context, as_long(irq_context));
    }
    if (nest != Py_None) {
        int holds = above ? overlay_holds(ov, PyTuple_GET_ITEM(nest, 0), PyTuple_GET_ITEM(nest, 1)) : 0;
        if (!holds)
            holds = holds_lock(held, PyTuple_GET_ITEM(nest, 0), PyTuple_GET_ITEM(nest, 1));
        if (holds <= 0)
            return holds; /* not held (a report), or a HeldLock to ask: the Python side */
    }
    long read_mode = as_long(a->read);
    PyObject *needs = PyTuple_GET_ITEM(view, V_NEEDS);
    long need = as_long(PyList_GET_ITEM(needs, (read_mode ? 1 : 0) | (a->trylock ? 2 : 0)));
    int covered = usage_covers(a->node, a->slot, need);
    if (covered <= 0)
        return covered; /* a new usage bit: mark_usage, in the full checker */
    if (overlaid)
        return overlay_acquire(self, data, n, view, held, cpu, a, field, ov, head, context, read_mode);
    PyObject *prev_key = get_chain_key(task);
    if (prev_key == NULL)
        return -1;
    Py_hash_t hash = hash3(head ? self->initial : prev_key, cls, a->read);
    PyObject *chain_key = hash == -1 ? NULL : PyLong_FromSsize_t(hash);
    if (chain_key == NULL) {
        Py_DECREF(prev_key);
        return -1;
    }
    if (rule_validates(self, a->trylock)) {
        int cached = cache_has(self, hash, chain_key);
        if (cached <= 0) {
            Py_DECREF(prev_key);
            Py_DECREF(chain_key);
            return cached; /* a miss: validate_chain, in the full checker */
        }
    }
    if (a->release == NULL) {
        /* read here: the release text is the start of the tail, `release` for `acquire` */
        if (field_strs(self, t, &a->owned[0], &a->owned[1]) < 0) {
            Py_DECREF(prev_key);
            Py_DECREF(chain_key);
            return -1;
        }
        a->release = a->owned[0];
        a->instance = a->owned[1];
        /* subclass 0: the class is the lock itself (the same str, as in _scan_tail) */
        a->lock = a->cls;
    }
    /* the line as the Python loop keeps it: without its line ending */
    PyObject *text;
    if (line != NULL && PyUnicode_GET_LENGTH(line) == n) {
        Py_INCREF(line);
        text = line;
    } else {
        text = ascii_str(data, n);
    }
    PyObject *lineno = text ? PyLong_FromLongLong(self->lineno) : NULL;
    if (lineno == NULL) {
        Py_XDECREF(text);
        Py_DECREF(prev_key);
        Py_DECREF(chain_key);
        return -1;
    }
    PyObject *items[E_SIZE] = {
        a->release, cls, a->lock, a->instance, prev_key, irq_context, a->read, a->trylock ? Py_True : Py_False,
        PyTuple_GET_ITEM(view, V_HARDIRQS_OFF), nest, a->subclass, small_ints[0], text, lineno,
    };
    PyObject *entry = entry_tuple(items, MOVED(E_PREV_KEY) | MOVED(E_LINE) | MOVED(E_LINENO));
    if (entry == NULL) {
        Py_DECREF(chain_key);
        return -1;
    }
    int r = PyList_Append(held, entry);
    Py_DECREF(entry);
    if (r == 0)
        r = set_chain_key(task, chain_key);
    Py_DECREF(chain_key);
    if (r < 0 || set_cpu(task, cpu) < 0 || remember(view, a->lock, a->instance) < 0)
        return -1;
    if (rule_validates(self, a->trylock))
        self->hits++;
    self->events++;
    return 1;
}

#endif
