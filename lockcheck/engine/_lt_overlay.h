/*
 * The held overlay: the core's own pushes kept in C (OvEntry: the line's bytes, class, context,
 * mode, the chain key before) until the Python side may look, then flushed onto the task's held
 * list as the very tuples the tuple path makes.  A unit: its entries and text buffers, and the
 * one way they become Python objects (overlay_tuple / overlay_flush).  Relies on _lt_state.h,
 * _lt_slots.h (the task's chain key and cpu) and _lt_tail.h (a Tail, field_strs).
 *
 * Part of the `.lt` core (_speedups.c), which includes it with the other _lt_*.h in one translation
 * unit: its static functions stay where the compiler can inline them, as when they were one file.
 */
#ifndef LOCKCHECK_LT_OVERLAY_H
#define LOCKCHECK_LT_OVERLAY_H

#include "_lt_state.h"
#include "_lt_slots.h"
#include "_lt_tail.h"

/* The core's own pushes, kept in C until Python may look.
 *
 * An acquisition the core reads itself (read_tail: no nest lock, no acquired_ever) is pushed
 * here, not onto the task's held list as a tuple: the line's bytes, its class (the class
 * table's str), its irq context and mode, the chain key before it; the plain release of such an
 * entry pops it here.  A push and its release between two lines the core passes on never make
 * a tuple, a str or a lineno.  Every other line of such a task, and every line the core hands
 * to the Python side (the Python loop, the checker, a report may look at any task), first
 * turns the overlay into what the tuple path would have made (overlay_flush: the same tuples
 * appended in order, the task's chain key and cpu set), so the Python side only ever sees the
 * layout it made itself. */
typedef struct OvEntry {
    PyObject *cls;          /* borrowed: the class table's str (the table outlives the run), or info's */
    PyObject *info;         /* the tails' info of an acquisition read by _scan_tail (a subclass, a nest
                             * lock: its strs the entry's), a strong reference; NULL: read here */
    Py_hash_t prev_key;     /* the task's chain key before the push (a hash: it fits) */
    PyObject *hardirqs_off; /* borrowed: Py_True or Py_False (the view's) */
    long irq_context;       /* 0..3 */
    int read, trylock;
    Py_ssize_t line_off, line_len;   /* the line (without its ending) in the overlay's text */
    Py_ssize_t field_off, field_len, lock_len;  /* CLASS[@INSTANCE] in it, CLASS's length */
    int has_instance;
    long long lineno;
} OvEntry;

struct Overlay {
    PyObject *held;         /* the task's held list (a strong reference): the key; NULL: a free slot */
    PyObject *task;         /* its TaskState (a strong reference) */
    Py_hash_t chain_key;    /* the task's chain key now, when not yet set on it (`keyed`) */
    int keyed;
    long cpu;               /* the task's cpu now, when not yet set on it, or -1 */
    Py_ssize_t n, cap;
    OvEntry *entries;
    char *text;
    Py_ssize_t text_len, text_cap;
};

/* The overlay of the task whose held list is `held`, or NULL: none in use (`create`: then one is
 * made, for `task`; NULL with an error set when that fails). */
static Overlay *overlay_find(LineFilter *self, PyObject *held, PyObject *task, int create);

/* A held entry's tuple from its E_SIZE items (a new reference, or NULL): the items whose bit is set in
 * `moved` give their reference to it (released here if it cannot be made), the others are borrowed.
 * Of str, int, bool, None and the (str, str) nest lock: a tuple that can be in no cycle, so the
 * collector need not walk the many of them a trace pushes. */
static PyObject *entry_tuple(PyObject *items[E_SIZE], unsigned moved) {
    PyObject *entry = PyTuple_New(E_SIZE);
    for (Py_ssize_t i = 0; i < E_SIZE; i++) {
        if (!(moved >> i & 1u))
            Py_INCREF(items[i]);
        if (entry != NULL)
            PyTuple_SET_ITEM(entry, i, items[i]);
        else
            Py_DECREF(items[i]);
    }
    if (entry != NULL)
        PyObject_GC_UnTrack(entry);
    return entry;
}

#define MOVED(i) (1u << (i))

/* An entry's tuple, as apply_acquire's tuple path makes it (a new reference), or NULL.  Its strs,
 * subclass and nest lock come from its info (read by _scan_tail) when it has one, else from its
 * field's text (subclass 0: the lock is the class itself, the same str, as in _scan_tail). */
static PyObject *overlay_tuple(LineFilter *self, Overlay *ov, OvEntry *e) {
    PyObject *info = e->info, *release = NULL, *instance = NULL;
    if (info == NULL) {
        Tail t = {0};
        t.field = ov->text + e->field_off;
        t.field_len = e->field_len;
        t.lock_len = e->lock_len;
        t.has_instance = e->has_instance;
        if (field_strs(self, &t, &release, &instance) < 0)
            return NULL;
    }
    PyObject *text = ascii_str(ov->text + e->line_off, e->line_len);
    PyObject *lineno = text ? PyLong_FromLongLong(e->lineno) : NULL;
    PyObject *prev_key = lineno ? PyLong_FromSsize_t(e->prev_key) : NULL;
    if (prev_key == NULL) {
        Py_XDECREF(release);
        Py_XDECREF(instance);
        Py_XDECREF(text);
        Py_XDECREF(lineno);
        return NULL;
    }
    PyObject *items[E_SIZE] = {
        release, e->cls, e->cls, instance, prev_key, small_ints[e->irq_context], small_ints[e->read],
        e->trylock ? Py_True : Py_False, e->hardirqs_off, Py_None, small_ints[0], small_ints[0], text, lineno,
    };
    unsigned moved = MOVED(E_PREV_KEY) | MOVED(E_LINE) | MOVED(E_LINENO);
    if (info != NULL) {
        items[E_RELEASE] = PyTuple_GET_ITEM(info, I_RELEASE);
        items[E_CLS] = PyTuple_GET_ITEM(info, I_CLS);
        items[E_LOCK] = PyTuple_GET_ITEM(info, I_LOCK);
        items[E_INSTANCE] = PyTuple_GET_ITEM(info, I_INSTANCE);
        items[E_READ] = PyTuple_GET_ITEM(info, I_READ);
        items[E_NEST] = PyTuple_GET_ITEM(info, I_NEST);
        items[E_SUBCLASS] = PyTuple_GET_ITEM(info, I_SUBCLASS);
    } else {
        moved |= MOVED(E_RELEASE) | MOVED(E_INSTANCE); /* (field_strs made them) */
    }
    return entry_tuple(items, moved); /* as apply_acquire's */
}

/* Empty `ov` of its entries (their infos released), applying nothing. */
static void overlay_clear_entries(Overlay *ov) {
    for (Py_ssize_t i = 0; i < ov->n; i++)
        Py_CLEAR(ov->entries[i].info);
    ov->n = ov->text_len = 0;
}

/* Turn `ov` into what the tuple path would have left: its entries appended to the held list as
 * tuples, in order, the task's chain key and cpu set.  0, or -1 with an error. */
static int overlay_flush(LineFilter *self, Overlay *ov) {
    Py_ssize_t i = 0;
    int r = 0;
    for (; i < ov->n && r == 0; i++) {
        OvEntry *e = &ov->entries[i];
        PyObject *entry = overlay_tuple(self, ov, e);
        r = entry == NULL ? -1 : PyList_Append(ov->held, entry);
        Py_XDECREF(entry);
    }
    overlay_clear_entries(ov);
    if (ov->keyed) {
        if (r == 0) {
            PyObject *key = PyLong_FromSsize_t(ov->chain_key);
            r = key == NULL ? -1 : set_chain_key(ov->task, key);
            Py_XDECREF(key);
        }
        ov->keyed = 0;
    }
    if (ov->cpu >= 0) {
        if (r == 0)
            r = set_cpu(ov->task, ov->cpu);
        ov->cpu = -1;
    }
    return r;
}

/* Flush every overlay in use and free their slots: before any line goes to the Python side.
 * 0, or -1 with an error (every overlay is freed all the same). */
static int overlays_flush(LineFilter *self) {
    int r = 0;
    for (Py_ssize_t i = 0; i < self->ov_count; i++) {
        Overlay *ov = &self->overlays[self->ov_used[i]];
        if (r == 0)
            r = overlay_flush(self, ov);
        else {
            overlay_clear_entries(ov);
            ov->keyed = 0;
            ov->cpu = -1;
        }
        Py_CLEAR(ov->held);
        Py_CLEAR(ov->task);
    }
    self->ov_count = 0;
    return r;
}

/* Free every overlay, its buffers too, applying nothing (dealloc, a new run). */
static void overlays_drop(LineFilter *self) {
    if (self->overlays == NULL)
        return;
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    for (Py_ssize_t i = 0; i < self->ov_count; i++) {
        Overlay *ov = &self->overlays[self->ov_used[i]];
        overlay_clear_entries(ov);
        ov->keyed = 0;
        Py_CLEAR(ov->held);
        Py_CLEAR(ov->task);
    }
    self->ov_count = 0;
    for (Py_ssize_t i = 0; i < OV_SLOTS; i++) {
        PyMem_Free(self->overlays[i].entries);
        PyMem_Free(self->overlays[i].text);
        self->overlays[i].entries = NULL;
        self->overlays[i].text = NULL;
        self->overlays[i].cap = self->overlays[i].text_cap = 0;
    }
    PyErr_Restore(type, value, tb);
}

static inline Py_ssize_t overlay_slot(PyObject *held) {
    return (Py_ssize_t)((((uintptr_t)held >> 4) * 0x9E3779B97F4A7C15ULL) >> 58) & (OV_SLOTS - 1);
}

static Overlay *overlay_find(LineFilter *self, PyObject *held, PyObject *task, int create) {
    if (self->ov_count == 0 && !create)
        return NULL;
    Py_ssize_t j = overlay_slot(held);
    for (;; j = (j + 1) & (OV_SLOTS - 1)) {
        Overlay *ov = &self->overlays[j];
        if (ov->held == held)
            return ov;
        if (ov->held == NULL)
            break;
    }
    if (!create)
        return NULL;
    if (self->ov_count * 2 >= OV_SLOTS) {
        if (overlays_flush(self) < 0)
            return NULL;
        j = overlay_slot(held);
    }
    Overlay *ov = &self->overlays[j];
    while (ov->held != NULL) {
        j = (j + 1) & (OV_SLOTS - 1);
        ov = &self->overlays[j];
    }
    Py_INCREF(held);
    Py_INCREF(task);
    ov->held = held;
    ov->task = task;
    ov->keyed = 0;
    ov->cpu = -1;
    ov->n = ov->text_len = 0;
    self->ov_used[self->ov_count++] = j;
    return ov;
}

/* Whether `ov` holds anything the task does not show yet. */
static inline int overlay_dirty(const Overlay *ov) {
    return ov != NULL && (ov->n || ov->keyed || ov->cpu >= 0);
}

/* Push an acquisition read here (`t`, the line's `n` bytes at `data`) onto `ov`: 0, -1 error. */
static int overlay_push(Overlay *ov, const char *data, Py_ssize_t n, const Tail *t, PyObject *cls, PyObject *info,
                        long irq_context, int read, int trylock, PyObject *hardirqs_off, Py_hash_t prev_key,
                        Py_hash_t chain_key, long long lineno) {
    if (ov->n == ov->cap) {
        Py_ssize_t cap = ov->cap ? ov->cap * 2 : 8;
        OvEntry *entries = PyMem_Realloc(ov->entries, (size_t)cap * sizeof(OvEntry));
        if (entries == NULL)
            goto nomem;
        ov->entries = entries;
        ov->cap = cap;
    }
    if (ov->text_len + n > ov->text_cap) {
        Py_ssize_t cap = ov->text_cap ? ov->text_cap : 512;
        while (cap < ov->text_len + n)
            cap *= 2;
        char *text = PyMem_Realloc(ov->text, (size_t)cap);
        if (text == NULL)
            goto nomem;
        ov->text = text;
        ov->text_cap = cap;
    }
    OvEntry *e = &ov->entries[ov->n++];
    memcpy(ov->text + ov->text_len, data, (size_t)n);
    e->cls = cls;
    Py_XINCREF(info);
    e->info = info;
    e->prev_key = prev_key;
    e->hardirqs_off = hardirqs_off;
    e->irq_context = irq_context;
    e->read = read;
    e->trylock = trylock;
    e->line_off = ov->text_len;
    e->line_len = n;
    e->field_off = ov->text_len + (t->field - data);
    e->field_len = t->field_len;
    e->lock_len = t->lock_len;
    e->has_instance = t->has_instance;
    e->lineno = lineno;
    ov->text_len += n;
    ov->chain_key = chain_key;
    ov->keyed = 1;
    return 0;
nomem:
    PyErr_NoMemory();
    return -1;
}

/* Whether the `rest_len` bytes at `rest` are the plain release of the top entry of `ov` (`n` > 0),
 * `release CLASS[@INSTANCE]`: the text of its tuple's RELEASE. */
static inline int overlay_releases(const Overlay *ov, const char *rest, Py_ssize_t rest_len) {
    const OvEntry *e = &ov->entries[ov->n - 1];
    return rest_len == 8 + e->field_len && memcmp(rest, "release ", 8) == 0 &&
           bytes_eq(rest + 8, ov->text + e->field_off, e->field_len);
}

/* Pop the top entry of `ov` (its plain release), the task's cpu now `cpu` when given. */
static void overlay_pop(Overlay *ov, long cpu) {
    OvEntry *e = &ov->entries[ov->n - 1];
    Py_CLEAR(e->info);
    ov->chain_key = e->prev_key;
    ov->keyed = 1;
    ov->text_len = e->line_off;
    ov->n--;
    if (cpu >= 0)
        ov->cpu = cpu;
}

#endif
