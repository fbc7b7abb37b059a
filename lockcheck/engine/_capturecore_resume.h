/*
 * A part of lockcheck/engine/_capturecore.c, which includes its parts in order (each uses what the
 * parts before it define).  This one: what Python may change between two lines the filter passes on
 * (read at `resume`, the counts kept here written back at `suspend`), an acquisition's deferred
 * event (`Later`), and small helpers.
 */
#ifndef LOCKCHECK_CAPTURECORE_RESUME_H
#define LOCKCHECK_CAPTURECORE_RESUME_H

/* ---- an acquisition's event, read back only if asked ------------------------------------------
 *
 * `Later(fn, *args)()` is `fn(*args)`: what `functools.partial(_event, ...)` is to the Python loop's
 * HeldLock, the HeldLock's `_source` (`HeldLock.event` calls it once, then drops it), made here
 * for every acquisition the filter pushes.  Its fields are str, int, float, bool, None and the
 * function: nothing that can lead back to it, so it is left out of the collector's sight. */

#define LATER_N 13

typedef struct {
    PyObject_HEAD
    PyObject *items[LATER_N]; /* fn, then its arguments */
} Later;

static void Later_dealloc(Later *self) {
    for (int i = 0; i < LATER_N; i++)
        Py_XDECREF(self->items[i]);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *Later_call(Later *self, PyObject *args, PyObject *kwds) {
    if ((args != NULL && PyTuple_GET_SIZE(args)) || (kwds != NULL && PyDict_GET_SIZE(kwds))) {
        PyErr_SetString(PyExc_TypeError, "Later() takes no arguments");
        return NULL;
    }
    return PyObject_Vectorcall(self->items[0], self->items + 1, LATER_N - 1, NULL);
}

static PyTypeObject LaterType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "lockcheck.engine._capturecore.Later",
    .tp_basicsize = sizeof(Later),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "an acquisition's event, made when called (fn(*args))",
    .tp_dealloc = (destructor)Later_dealloc,
    .tp_call = (ternaryfunc)Later_call,
};

static PyObject *later(PyObject **items) {
    Later *self = PyObject_New(Later, &LaterType);
    if (self == NULL)
        return NULL;
    for (int i = 0; i < LATER_N; i++) {
        Py_INCREF(items[i]);
        self->items[i] = items[i];
    }
    return (PyObject *)self;
}

/* ---- what Python changes between two lines passed on ------------------------------------- */

static int attr_true(PyObject *obj, PyObject *name, int *out) {
    PyObject *v = PyObject_GetAttr(obj, name);
    if (v == NULL)
        return -1;
    *out = PyObject_IsTrue(v);
    Py_DECREF(v);
    return *out < 0 ? -1 : 0;
}

static int attr_longlong(PyObject *obj, PyObject *name, long long *out) {
    PyObject *v = PyObject_GetAttr(obj, name);
    if (v == NULL)
        return -1;
    *out = PyLong_AsLongLong(v);
    Py_DECREF(v);
    return (*out == -1 && PyErr_Occurred()) ? -1 : 0;
}

static int resume(CaptureFilter *self) {
    long long depth;
    capcache_forget(&self->cache); /* (the Python loop ran: what the task slots remember may be out of date) */
    if (known_sync(&self->known, self->chain_cache) < 0)
        return -1;
    if (attr_true(self->reader, s_probe_known, &self->probe_known) < 0 ||
        attr_true(self->reader, s_contention, &self->contention) < 0 ||
        attr_longlong(self->checker, s_fast_depth, &depth) < 0 ||
        attr_longlong(self->cstats, s_events, &self->ev_now) < 0 ||
        attr_longlong(self->cstats, s_chain_hits, &self->hits_now) < 0)
        return -1;
    self->fast_depth = (Py_ssize_t)depth;
    if (attr_true(self->irq, s_preempt_rt, &self->preempt_rt) < 0 || attr_true(self->checker, s_stopped, &self->stopped) < 0)
        return -1;
    if (self->annotator != NULL) {
        if (attr_true(self->annotator, s_capture, &self->a_capture) < 0 ||
            attr_true(self->annotator, s_trusted, &self->a_trusted) < 0)
            return -1;
        PyObject *untrusted = PyObject_GetAttr(self->annotator, s_untrusted_from);
        if (untrusted == NULL)
            return -1;
        Py_XSETREF(self->untrusted_from, untrusted);
    }
    return 0;
}

static int set_longlong(PyObject *obj, PyObject *name, long long value) {
    PyObject *v = PyLong_FromLongLong(value);
    if (v == NULL)
        return -1;
    int r = PyObject_SetAttr(obj, name, v);
    Py_DECREF(v);
    return r;
}

static int count_add(PyObject *d, PyObject *key, long long n);
static int list_add(PyObject *list, Py_ssize_t i, long delta);
static int flush_annotator(CaptureFilter *self);

/* the checker's and the annotator's counts kept here, written back (keeping an error that is set) */
static int pend_flush(CaptureFilter *self);

static int suspend(CaptureFilter *self) {
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    int r = pend_flush(self); /* (before Python code runs: it may look at the task's held stack) */
    if (r == 0 && rings_flush(&self->rings) < 0) /* (and at the tasks' recent locks; not with an error set) */
        r = -1;
    if (r == 0)
        r = set_longlong(self->cstats, s_events, self->ev_now);
    if (r == 0)
        r = set_longlong(self->cstats, s_chain_hits, self->hits_now);
    if (r == 0)
        r = flush_annotator(self);
    if (type != NULL) {
        if (r < 0)
            PyErr_Clear();
        PyErr_Restore(type, value, tb);
        return -1;
    }
    return r;
}

/* ---- helpers ----------------------------------------------------------------------------- */

/* d[key] += n, as Python does it (a Counter's missing key is 0) */
static int count_add(PyObject *d, PyObject *key, long long n) {
    PyObject *old = PyDict_GetItemWithError(d, key);
    if (old == NULL) {
        if (PyErr_Occurred())
            return -1;
        old = PyObject_GetItem(d, key);
        if (old == NULL)
            return -1;
    } else {
        Py_INCREF(old);
    }
    PyObject *delta = PyLong_FromLongLong(n);
    PyObject *sum = delta ? PyNumber_Add(old, delta) : NULL;
    Py_DECREF(old);
    Py_XDECREF(delta);
    if (sum == NULL)
        return -1;
    int r = PyObject_SetItem(d, key, sum);
    Py_DECREF(sum);
    return r;
}

/* The annotator's counts of the acquisitions applied since the last time, added to its own:
 * `tries[file]` (acquisitions, trylocks) and `sources` (by what decided them). */
static int flush_annotator(CaptureFilter *self) {
    if (self->tries_delta[0]) {
        PyObject *counts = PyDict_GetItemWithError(self->tries, self->file);
        if (counts == NULL) {
            if (PyErr_Occurred())
                return -1;
            counts = Py_BuildValue("[ii]", 0, 0);
            if (counts == NULL || PyDict_SetItem(self->tries, self->file, counts) < 0) {
                Py_XDECREF(counts);
                return -1;
            }
            Py_DECREF(counts);
        }
        if (!PyList_CheckExact(counts) || PyList_GET_SIZE(counts) < 2) {
            PyErr_SetString(PyExc_TypeError, "tries: no list");
            return -1;
        }
        if (list_add(counts, 0, (long)self->tries_delta[0]) < 0 || list_add(counts, 1, (long)self->tries_delta[1]) < 0)
            return -1;
        self->tries_delta[0] = self->tries_delta[1] = 0;
    }
    if (PyDict_GET_SIZE(self->unchecked)) {
        Py_ssize_t pos = 0;
        PyObject *name, *counted;
        while (PyDict_Next(self->unchecked, &pos, &name, &counted)) {
            PyObject *why = PyUnicode_Concat(s_rule_prefix, PyList_GET_ITEM(counted, 0));
            PyObject *key = why ? PyTuple_Pack(3, s_check0, name, why) : NULL;
            Py_XDECREF(why);
            long long n = PyLong_AsLongLong(PyList_GET_ITEM(counted, 1));
            int r = key == NULL || (n == -1 && PyErr_Occurred()) ? -1 : count_add(self->changes, key, n);
            Py_XDECREF(key);
            if (r < 0)
                return -1;
        }
        PyDict_Clear(self->unchecked);
    }
    PyObject *keys[S_N] = {s_state, s_none, s_rule, s_state_changed};
    for (int j = 0; j < self->sources_seen; j++) {
        int i = self->sources_order[j];
        if (count_add(self->sources, keys[i], self->sources_delta[i]) < 0)
            return -1;
        self->sources_delta[i] = 0;
    }
    self->sources_seen = 0;
    return 0;
}

/* list[i] += delta for a list of ints */
static int list_add(PyObject *list, Py_ssize_t i, long delta) {
    PyObject *old = PyList_GET_ITEM(list, i);
    long v = PyLong_AsLong(old);
    if (v == -1 && PyErr_Occurred())
        return -1;
    PyObject *nv = PyLong_FromLong(v + delta);
    if (nv == NULL)
        return -1;
    PyList_SET_ITEM(list, i, nv);
    Py_DECREF(old);
    return 0;
}

/* `del list[-1]` of a list that is not empty (its allocation kept: it grows again soon) */
static inline void list_drop_last(PyObject *list) {
    Py_ssize_t n = PyList_GET_SIZE(list);
    PyObject *last = PyList_GET_ITEM(list, n - 1);
    Py_SET_SIZE(list, n - 1);
    Py_DECREF(last);
}

static inline int is_empty_str(PyObject *s) {
    return PyUnicode_Check(s) && PyUnicode_GET_LENGTH(s) == 0;
}

static inline int eq(PyObject *a, PyObject *b) {
    if (a == b)
        return 1;
    if (PyUnicode_CheckExact(a) && PyUnicode_CheckExact(b))
        return same_str(a, b); /* (str == str, without the rich comparison's dispatch) */
    return PyObject_RichCompareBool(a, b, Py_EQ);
}

/* PyObject_IsTrue with its commonest answers (a bool, None, a small int) inline: asked ~5 times an
 * acquisition (trylock, read, rules, pins, references) */
static inline __attribute__((always_inline)) int truth(PyObject *o) {
    if (o == Py_True)
        return 1;
    if (o == Py_False || o == Py_None)
        return 0;
    long v;
    if (PyLong_CheckExact(o) && one_digit_long(o, &v))
        return v != 0;
    return PyObject_IsTrue(o);
}

/* small_long's general way (an int of more than one digit) */
static __attribute__((noinline)) long small_long_slow(PyObject *o) {
    int overflow;
    long v = PyLong_AsLongAndOverflow(o, &overflow);
    if (overflow || (v == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return -2;
    }
    return v;
}

/* a small int's value (contexts, modes, states), or -2 when it is none; inline, the general way apart
 * (as one function the compiler called it, ~16 instructions a call, four calls a line: callgrind) */
static inline __attribute__((always_inline)) long small_long(PyObject *o) {
    if (!PyLong_CheckExact(o))
        return -2;
    long v;
    if (one_digit_long(o, &v))
        return v;
    return small_long_slow(o);
}

#endif
