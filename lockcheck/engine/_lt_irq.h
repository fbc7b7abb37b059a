/*
 * irq-state ops (fast_held.irq_change): an op applied here when its transition (rules.
 * irq_transition, tabled) marks no usage bit and notes nothing; its evidence deferred, the task's
 * view rebuilt.  A unit: the only path that changes a task's irq state or view.  Relies on
 * _lt_state.h (the tabled irq rules), _lt_slots.h (set_cpu) and _lt_classes.h (node_usage).
 *
 * Part of the `.lt` core (_speedups.c), which includes it with the other _lt_*.h in one translation
 * unit: its static functions stay where the compiler can inline them, as when they were one file.
 */
#ifndef LOCKCHECK_LT_IRQ_H
#define LOCKCHECK_LT_IRQ_H

#include "_lt_state.h"
#include "_lt_slots.h"
#include "_lt_stack.h"
#include "_lt_classes.h"

/* An int (or bool) attribute: 0 and *out, or -1 on error. */
static int long_attr(PyObject *obj, PyObject *name, long *out) {
    PyObject *value = PyObject_GetAttr(obj, name);
    if (value == NULL)
        return -1;
    *out = as_long(value);
    Py_DECREF(value);
    return *out == -1 && PyErr_Occurred() ? -1 : 0;
}

/* long_attr of a task's slot `which` (slot_more). */
static int task_long(PyObject *obj, int which, long *out) {
    PyObject *value = task_attr(obj, which);
    if (value == NULL)
        return -1;
    *out = as_long(value);
    Py_DECREF(value);
    return *out == -1 && PyErr_Occurred() ? -1 : 0;
}

static int set_long_attr(PyObject *obj, int which, long value) {
    PyObject *item = PyLong_FromLong(value);
    if (item == NULL)
        return -1;
    int r = set_task_attr(obj, which, item);
    Py_DECREF(item);
    return r;
}

/* hotpath._marked: whether every checked held lock's class has `bits` (shifted to _READ for a
 * reader): 1, 0 (or a class not found: the Python side's), -1 on error. */
static int held_marked(LineFilter *self, PyObject *held, long bits) {
    if (self->classes == NULL)
        return 0;
    long read_bits = bits << self->read_shift;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(held); i++) {
        PyObject *entry = PyList_GET_ITEM(held, i);
        PyObject *cls;
        int read;
        if (PyTuple_CheckExact(entry)) {
            cls = PyTuple_GET_ITEM(entry, E_CLS);
            Py_INCREF(cls);
            read = PyObject_IsTrue(PyTuple_GET_ITEM(entry, E_READ));
        } else {
            int check = attr_true(entry, s_check);
            if (check <= 0) {
                if (check < 0)
                    return -1;
                continue; /* nocheck: mark_held_locks skips it */
            }
            cls = PyObject_GetAttr(entry, s_cls);
            if (cls == NULL)
                return -1;
            read = attr_true(entry, s_read);
        }
        PyObject *node = read < 0 ? NULL : PyDict_GetItemWithError(self->classes, cls); /* borrowed */
        Py_DECREF(cls);
        if (node == NULL || !PyDict_Check(node))
            return PyErr_Occurred() ? -1 : 0;
        long have;
        int known = node_usage(node, NULL, &have);
        if (known <= 0)
            return known;
        long want = read ? read_bits : bits;
        if ((have & want) != want)
            return 0;
    }
    return 1;
}

/* fast_held._defer_irq_event: stamp the transition, its evidence deferred as
 * (stamp, reader, line, file, lineno, task name) (tasks.irq_event reads it back). */
static int defer_irq_event(LineFilter *self, PyObject *task, PyObject *op, PyObject *line, const char *data,
                           Py_ssize_t n) {
    PyObject *events = task_attr(task, TS_IRQ_EVENTS);
    if (events == NULL)
        return -1;
    long stamp = 0;
    PyObject *old = PyDict_GetItemWithError(events, s_stamp); /* borrowed */
    if (old != NULL)
        stamp = as_long(old);
    int r = -1;
    PyObject *value = NULL, *text = NULL, *lineno = NULL, *name = NULL, *record = NULL;
    if (PyErr_Occurred())
        goto done;
    value = PyLong_FromLong(stamp + 1);
    if (value == NULL)
        goto done;
    /* the line as the Python loop keeps it: without its line ending */
    if (line != NULL && PyUnicode_GET_LENGTH(line) == n) {
        Py_INCREF(line);
        text = line;
    } else {
        text = ascii_str(data, n);
    }
    lineno = text ? PyLong_FromLongLong(self->lineno) : NULL;
    name = lineno ? task_attr(task, TS_NAME) : NULL;
    record = name ? PyTuple_Pack(6, value, self->reader, text, self->file, lineno, name) : NULL;
    if (record != NULL && PyDict_SetItem(events, s_stamp, value) == 0 && PyDict_SetItem(events, op, record) == 0)
        r = 0;
done:
    Py_XDECREF(record);
    Py_XDECREF(name);
    Py_XDECREF(lineno);
    Py_XDECREF(text);
    Py_XDECREF(value);
    Py_DECREF(events);
    return r;
}

/* hotpath._view of the task of `view` after its irq state changed, in its place in the views. */
static int rebuild_view(LineFilter *self, PyObject *view, long hardirq_depth, long softirq_depth,
                        long hardirqs_enabled) {
    PyObject *task = PyTuple_GET_ITEM(view, V_TASK);
    int off = rules_hardirqs_off(hardirqs_enabled != 0, hardirq_depth);
    PyObject *need = task_attr(task, TS_USAGE_NEED);
    if (need == NULL)
        return -1;
    PyObject *needs = PySequence_GetSlice(need, off ? RULES_HARDIRQS_OFF_NEEDS : 0,
                                          off ? PY_SSIZE_T_MAX : RULES_HARDIRQS_OFF_NEEDS);
    Py_DECREF(need);
    PyObject *key = needs ? task_attr(task, TS_KEY) : NULL;
    PyObject *fresh = key ? PyTuple_Pack(6, task, PyTuple_GET_ITEM(view, V_HELD),
                                         small_ints[(hardirq_depth ? 2 : 0) | (softirq_depth ? 1 : 0)],
                                         off ? Py_True : Py_False, needs, PyTuple_GET_ITEM(view, V_ACQUIRED_EVER))
                          : NULL;
    uint64_t before = dict_version(self->views);
    int r = fresh ? PyDict_SetItem(self->views, key, fresh) : -1; /* `view` may be freed from here on */
    if (r == 0 && before != 0 && before == self->views_known && self->current != NULL &&
        self->current->view == view) {
        /* the one change since find_view last looked: this task's view, kept in its slot */
        self->views_known = dict_version(self->views);
        self->current->view = fresh;
    }
    Py_XDECREF(fresh);
    Py_XDECREF(key);
    Py_XDECREF(needs);
    return r;
}

/* fast_held.irq_change: an irq-state op applied when it marks no usage bit and notes nothing
 * (1), else nothing changed (0: the Python side's), -1 on error. */
static int apply_irq(LineFilter *self, PyObject *line, const char *data, Py_ssize_t n, PyObject *view,
                     PyObject *held, long cpu, PyObject *op) {
    if (self->reader == NULL || !PyUnicode_Check(op))
        return 0;
    PyObject *task = PyTuple_GET_ITEM(view, V_TASK);
    long hd, sd, he, se;
    if (task_long(task, TS_HARDIRQ_DEPTH, &hd) < 0 || task_long(task, TS_SOFTIRQ_DEPTH, &sd) < 0 ||
        task_long(task, TS_HARDIRQS_ENABLED, &he) < 0 || task_long(task, TS_SOFTIRQS_ENABLED, &se) < 0)
        return -1;
    long hd0 = hd, sd0 = sd, he0 = he, se0 = se;
    int k = rules_irq_op(op);
    if (k < 0)
        return 0;
    unsigned long t = rules_irq(self->irq_rule, k, hd, sd, he, se); /* rules.irq_transition */
    if (t & RULES_IRQT_CHECKER)
        return 0; /* a note or the kernel's warning */
    long marks = (long)(t >> RULES_IRQT_MARKS_SHIFT);
    if (marks && PyList_GET_SIZE(held)) {
        int marked = held_marked(self, held, marks);
        if (marked <= 0)
            return marked;
    }
    RULES_IRQ_STEP(t, hd, sd, he, se);
    int record = (t & RULES_IRQT_RECORD) != 0, needs = (t & RULES_IRQT_REFRESH) != 0;
    if ((hd != hd0 && set_long_attr(task, TS_HARDIRQ_DEPTH, hd) < 0) ||
        (sd != sd0 && set_long_attr(task, TS_SOFTIRQ_DEPTH, sd) < 0) ||
        (he != he0 && set_task_attr(task, TS_HARDIRQS_ENABLED, he ? Py_True : Py_False) < 0) ||
        (se != se0 && set_task_attr(task, TS_SOFTIRQS_ENABLED, se ? Py_True : Py_False) < 0))
        return -1;
    if (record && defer_irq_event(self, task, op, line, data, n) < 0)
        return -1;
    if (needs) {
        PyObject *need = PyObject_CallOneArg(self->usage_needs, task);
        if (need == NULL)
            return -1;
        int r = set_task_attr(task, TS_USAGE_NEED, need);
        Py_DECREF(need);
        if (r < 0)
            return -1;
    }
    if (set_cpu(task, cpu) < 0 || rebuild_view(self, view, hd, sd, he) < 0)
        return -1;
    self->events++;
    return 1;
}

#endif
