/*
 * The held list as the tuple path keeps it: the innermost entry popped, its references changed, a
 * HeldLock (the full checker's) released or merged onto, and Checker.lock_is_held over tuple
 * entries.  A unit: the operations on hotpath.py's stack entries (E_*) that the acquire, release
 * and irq paths share.  Relies on _lt_state.h (the layouts) and _lt_slots.h (the chain key).
 *
 * Part of the `.lt` core (_speedups.c), which includes it with the other _lt_*.h in one translation
 * unit: its static functions stay where the compiler can inline them, as when they were one file.
 */
#ifndef LOCKCHECK_LT_STACK_H
#define LOCKCHECK_LT_STACK_H

#include "_lt_state.h"
#include "_lt_slots.h"

/* Pop the top entry of `held` (a tuple) and restore the task's chain key. */
static int pop_entry(PyObject *task, PyObject *held, PyObject *top) {
    if (set_chain_key(task, PyTuple_GET_ITEM(top, E_PREV_KEY)) < 0)
        return -1;
    /* list.pop() without its shrinking: the list keeps its room for the next push */
    Py_ssize_t size = PyList_GET_SIZE(held);
    PyObject *last = PyList_GET_ITEM(held, size - 1);
    Py_SET_SIZE(held, size - 1);
    Py_DECREF(last);
    return 0;
}

/* `top` with REFERENCES replaced by `references`, in place of the top entry. */
static int replace_references(PyObject *held, PyObject *top, long references) {
    PyObject *entry = PyTuple_New(E_SIZE);
    if (entry == NULL)
        return -1;
    for (Py_ssize_t i = 0; i < E_SIZE; i++) {
        PyObject *item = i == E_REFERENCES ? PyLong_FromLong(references) : PyTuple_GET_ITEM(top, i);
        if (item == NULL) {
            Py_DECREF(entry);
            return -1;
        }
        if (i != E_REFERENCES)
            Py_INCREF(item);
        PyTuple_SET_ITEM(entry, i, item);
    }
    return PyList_SetItem(held, PyList_GET_SIZE(held) - 1, entry);
}

/* The truth of an int attribute (`references`): 1, 0, or -1 on error. */
static int attr_true(PyObject *obj, PyObject *name) {
    PyObject *value = PyObject_GetAttr(obj, name);
    if (value == NULL)
        return -1;
    int r = PyObject_IsTrue(value);
    Py_DECREF(value);
    return r;
}

/* Checker.feed's innermost release of a HeldLock `top` of `lock`/`instance`: 1 popped, 0 not it. */
static int held_lock_released(PyObject *task, PyObject *held, PyObject *top, PyObject *lock, PyObject *instance) {
    PyObject *value = PyObject_GetAttr(top, s_lock);
    if (value == NULL)
        return -1;
    int same = PyObject_RichCompareBool(value, lock, Py_EQ);
    Py_DECREF(value);
    if (same <= 0)
        return same;
    value = PyObject_GetAttr(top, s_instance);
    if (value == NULL)
        return -1;
    same = PyObject_RichCompareBool(value, instance, Py_EQ);
    Py_DECREF(value);
    if (same <= 0)
        return same;
    int referenced = attr_true(top, s_references);
    if (referenced != 0)
        return referenced < 0 ? -1 : 0;
    value = PyObject_GetAttr(top, s_prev_chain_key);
    if (value == NULL)
        return -1;
    int r = PyObject_SetAttr(task, s_chain_key, value);
    Py_DECREF(value);
    if (r < 0)
        return -1;
    return PyList_SetSlice(held, PyList_GET_SIZE(held) - 1, PyList_GET_SIZE(held), NULL) < 0 ? -1 : 1;
}

/* One more reference on the top entry (a nest_lock merge): `(references or 1) + 1`. */
static int merge_reference(PyObject *held, PyObject *top) {
    if (PyTuple_CheckExact(top)) {
        long references = as_long(PyTuple_GET_ITEM(top, E_REFERENCES));
        Py_INCREF(top);
        int r = replace_references(held, top, (references ? references : 1) + 1);
        Py_DECREF(top);
        return r;
    }
    PyObject *value = PyObject_GetAttr(top, s_references);
    if (value == NULL)
        return -1;
    long references = as_long(value);
    Py_DECREF(value);
    value = PyLong_FromLong((references ? references : 1) + 1);
    if (value == NULL)
        return -1;
    int r = PyObject_SetAttr(top, s_references, value);
    Py_DECREF(value);
    return r;
}

/* Checker.lock_is_held over tuple entries: 1 held, 0 not (or a HeldLock to ask), -1 error. */
static int holds_lock(PyObject *held, PyObject *lock, PyObject *instance) {
    Py_ssize_t n = PyList_GET_SIZE(held);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *entry = PyList_GET_ITEM(held, i);
        if (!PyTuple_CheckExact(entry))
            return 0;
        int same = PyObject_RichCompareBool(PyTuple_GET_ITEM(entry, E_LOCK), lock, Py_EQ);
        if (same < 0)
            return -1;
        if (!same)
            continue;
        same = PyObject_RichCompareBool(PyTuple_GET_ITEM(entry, E_INSTANCE), instance, Py_EQ);
        if (same < 0)
            return -1;
        if (same || (as_long(PyTuple_GET_ITEM(entry, E_REFERENCES)) &&
                     as_long(PyTuple_GET_ITEM(entry, E_SUBCLASS)) == 0))
            return 1;
    }
    return 0;
}

#endif
