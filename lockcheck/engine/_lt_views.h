/*
 * The task views the core reads (find_view) and the Python side's changes to them told to the
 * core (set_view, drop_view).  A unit: the one place that knows when a view found earlier still
 * stands.  Relies on _lt_state.h (TaskSeen, dict_version) and _cshared.h / _bytescan.h.
 *
 * Part of the `.lt` core (_speedups.c), which includes it with the other _lt_*.h in one translation
 * unit: its static functions stay where the compiler can inline them, as when they were one file.
 */
#ifndef LOCKCHECK_LT_VIEWS_H
#define LOCKCHECK_LT_VIEWS_H

#include "_lt_state.h"

/* The hash of a task key's `n` bytes at `p` that picks its slots: its first and last 8 bytes as two
 * (overlapping) words, its length, mixed -- hash_bytes' byte loop over a name's last bytes was
 * most of find_view's ~30 instructions a line.  Two keys alike there only share a pair of slots:
 * a key found is compared whole. */
static inline uint64_t task_hash(const char *p, Py_ssize_t n) {
    if (n < 8)
        return hash_bytes(p, n);
    uint64_t first, last;
    memcpy(&first, p, 8);
    memcpy(&last, p + n - 8, 8);
    uint64_t h = (first ^ (uint64_t)n) * 0x9E3779B97F4A7C15ULL ^ last;
    h *= 0xC2B2AE3D27D4EB4FULL;
    return h ^ (h >> 32);
}

/* The slot keeping the task key of the `n` bytes at `p` (`h`: their task_hash), or -1: none.  Each
 * key has two ways, its hash's slot and the one beside it, of TASK_SLOTS (the ~50 tasks of a trace in
 * 256 slots one way a slot: ~4 pairs of them shared one, and each of their lines looked the view up
 * again, a str made for its key: ~30,000 look-ups a million lines of the benchmark trace; in 512
 * pairs three keys of 50 share one about once in 15 traces). */
static inline Py_ssize_t task_slot(LineFilter *self, uint64_t h, const char *p, Py_ssize_t n) {
    Py_ssize_t index = (Py_ssize_t)(h & (TASK_SLOTS - 1));
    for (int way = 0; way < 2; way++, index ^= 1) {
        PyObject *key = self->task_keys[index];
        if (key != NULL && PyUnicode_GET_LENGTH(key) == n && bytes_eq((const char *)PyUnicode_1BYTE_DATA(key), p, n))
            return index;
    }
    return -1;
}

/* The view of the task named by the `n` bytes at `p` (borrowed), or NULL: none (an error set if
 * there was one).  The views change when a line goes to the Python side, or when an irq op here
 * rebuilds one (rebuild_view, which keeps its slot up to date): while the dict's version is the
 * one the core last saw or made, the view a task's key found in this epoch is the answer, without
 * a str key or a dict look-up; a version the Python side made starts a new epoch, unless it made
 * it through set_view / drop_view (below), which keep the one task's slot up to date instead. */
static PyObject *find_view(LineFilter *self, const char *p, Py_ssize_t n) {
    uint64_t h = task_hash(p, n);
    uint64_t version = dict_version(self->views);
    if (version == 0 || version != self->views_known) {
        self->views_known = version;
        self->epoch++;
    }
    self->current = NULL;
    Py_ssize_t index = task_slot(self, h, p, n);
    TaskSeen *seen;
    if (index >= 0) {
        seen = &self->task_seen[index];
        seen->used = self->lineno;
        if (seen->epoch == self->epoch) {
            self->current = seen;
            return seen->view;
        }
    } else {
        /* the way of the pair the key goes to: an empty one, else the one less recently used */
        index = (Py_ssize_t)(h & (TASK_SLOTS - 1));
        if (self->task_keys[index] != NULL &&
            (self->task_keys[index ^ 1] == NULL || self->task_seen[index ^ 1].used < self->task_seen[index].used))
            index ^= 1;
        PyObject *key = ascii_str(p, n);
        if (key == NULL)
            return NULL;
        Py_XSETREF(self->task_keys[index], key);
        seen = &self->task_seen[index];
        seen->used = self->lineno;
    }
    PyObject *view = PyDict_GetItemWithError(self->views, self->task_keys[index]); /* borrowed */
    if (view == NULL && PyErr_Occurred())
        return NULL;
    seen->epoch = self->epoch;
    seen->view = view;
    self->current = seen;
    return view;
}

/* After the Python side set (`view`) or deleted (NULL) the view of `key` through the methods
 * below, with the dict unchanged since find_view or the core last saw it (`synced`): the change is
 * the only one, so the dict's new version is known and only `key`'s slot changes -- where one
 * event the Python side applied used to start a new epoch, and each of the ~50 tasks of a trace
 * looked its view up in the dict again (a trace's Python events every ~1,000 lines: ~45,000
 * look-ups a million lines).  A key the core cannot have kept (not an exact ASCII str) leaves
 * the version unknown: a new epoch, as for any other change. */
static void view_changed(LineFilter *self, int synced, PyObject *key, PyObject *view) {
    self->current = NULL; /* (rebuild_view's shortcut: only within the line find_view found) */
    if (!synced || !PyUnicode_CheckExact(key) || !PyUnicode_IS_COMPACT_ASCII(key))
        return;
    self->views_known = dict_version(self->views);
    const char *p = (const char *)PyUnicode_1BYTE_DATA(key);
    Py_ssize_t n = PyUnicode_GET_LENGTH(key);
    Py_ssize_t index = task_slot(self, task_hash(p, n), p, n);
    if (index < 0)
        return; /* (not kept: `key` is looked up when its line comes) */
    TaskSeen *seen = &self->task_seen[index];
    if (view != NULL) {
        seen->view = view; /* borrowed: the dict holds it */
        seen->epoch = self->epoch;
    } else {
        seen->epoch = 0; /* looked up again: absent now */
    }
}

/* Whether the dict is as the core last saw or made it (a change now is the only one since). */
static inline int views_synced(LineFilter *self) {
    uint64_t before = self->views != NULL ? dict_version(self->views) : 0;
    return before != 0 && before == self->views_known;
}

/* `set_view(key, view)`: views[key] = view, told to the core. */
static PyObject *LineFilter_set_view(LineFilter *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || self->views == NULL) {
        PyErr_SetString(PyExc_TypeError, "set_view(key, view) of a started filter");
        return NULL;
    }
    int synced = views_synced(self);
    if (PyDict_SetItem(self->views, args[0], args[1]) < 0)
        return NULL;
    view_changed(self, synced, args[0], args[1]);
    Py_RETURN_NONE;
}

/* `drop_view(key)`: views.pop(key, None), told to the core. */
static PyObject *LineFilter_drop_view(LineFilter *self, PyObject *key) {
    if (self->views == NULL) {
        PyErr_SetString(PyExc_TypeError, "drop_view(key) of a started filter");
        return NULL;
    }
    int synced = views_synced(self);
    PyObject *gone = PyDict_GetItemWithError(self->views, key); /* borrowed */
    if (gone == NULL)
        return PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
    if (PyDict_DelItem(self->views, key) < 0)
        return NULL;
    view_changed(self, synced, key, NULL);
    Py_RETURN_NONE;
}

#endif
