/*
 * A task's chain key and cpu read and written at their `__slots__` offsets (TaskState), the
 * generic attribute access for any other object.  A unit: the one place the core reaches into a
 * Python object's layout; everything else goes through get_chain_key / set_chain_key / set_cpu.
 * Relies on _lt_state.h (the interned names).
 *
 * Part of the `.lt` core (_speedups.c), which includes it with the other _lt_*.h in one translation
 * unit: its static functions stay where the compiler can inline them, as when they were one file.
 */
#ifndef LOCKCHECK_LT_SLOTS_H
#define LOCKCHECK_LT_SLOTS_H

#include "_lt_state.h"

/* TaskState keeps its fields in __slots__: PyObject_GetAttr/SetAttr find the member descriptor
 * through the type (a type-cache lookup, a descriptor call) on each of the two or three reads and
 * writes of `chain_key` and `cpu` a line makes, ~15% of the core's instructions.  Here the slots'
 * offsets are read once from the type's member descriptors, and a task of that very type with
 * the generic attribute access is read and written there (what PyMember_GetOne/SetOne do for
 * a T_OBJECT_EX slot); any other object, an unset slot, goes the generic way. */
static PyTypeObject *slot_type;      /* the type the offsets are for (a strong reference), or NULL */
static Py_ssize_t slot_chain_key, slot_cpu;

/* The further TaskState slots the irq path reads and writes (apply_irq: ~8 generic attribute
 * reads and 2-4 writes an op, a fifth of its instructions): their offsets, 0 for one not found
 * as a writable object slot of the type (then the generic access). */
enum { TS_HARDIRQ_DEPTH, TS_SOFTIRQ_DEPTH, TS_HARDIRQS_ENABLED, TS_SOFTIRQS_ENABLED, TS_IRQ_EVENTS, TS_NAME,
       TS_USAGE_NEED, TS_KEY, TS_COUNT };
static Py_ssize_t slot_more[TS_COUNT];
static PyObject **const slot_more_names[TS_COUNT] = {
    &s_hardirq_depth, &s_softirq_depth, &s_hardirqs_enabled, &s_softirqs_enabled, &s_irq_events, &s_name,
    &s_usage_need, &s_key,
};

/* The offset of a writable object slot `name` of `type`, or 0 (no such slot). */
static Py_ssize_t member_offset(PyTypeObject *type, PyObject *name) {
    PyObject *descr = PyObject_GetAttr((PyObject *)type, name);
    if (descr == NULL) {
        PyErr_Clear();
        return 0;
    }
    Py_ssize_t offset = 0;
    if (Py_IS_TYPE(descr, &PyMemberDescr_Type)) {
        PyMemberDef *member = ((PyMemberDescrObject *)descr)->d_member;
        if (member->type == T_OBJECT_EX && !(member->flags & READONLY) && member->offset > 0)
            offset = member->offset;
    }
    Py_DECREF(descr);
    return offset;
}

/* Whether `task`'s slots are reached at their offsets (resolving them for a new type). */
static int task_slots(PyObject *task) {
    PyTypeObject *type = Py_TYPE(task);
    if (type == slot_type)
        return slot_chain_key != 0;
    Py_INCREF(type);
    Py_XSETREF(slot_type, type);
    slot_chain_key = slot_cpu = 0;
    memset(slot_more, 0, sizeof slot_more);
    if (type->tp_getattro == PyObject_GenericGetAttr && type->tp_setattro == PyObject_GenericSetAttr) {
        slot_chain_key = member_offset(type, s_chain_key);
        slot_cpu = member_offset(type, s_cpu);
        if (slot_cpu == 0)
            slot_chain_key = 0;
        for (int i = 0; i < TS_COUNT; i++)
            slot_more[i] = member_offset(type, *slot_more_names[i]);
    }
    return slot_chain_key != 0;
}

/* task.<slot `which` of slot_more> (a new reference), or NULL with an error. */
static PyObject *task_attr(PyObject *task, int which) {
    task_slots(task);
    if (slot_more[which]) {
        PyObject *value = *(PyObject **)((char *)task + slot_more[which]);
        if (value != NULL)
            return Py_NewRef(value);
    }
    return PyObject_GetAttr(task, *slot_more_names[which]);
}

/* task.<slot `which` of slot_more> = value: 0, or -1 with an error. */
static int set_task_attr(PyObject *task, int which, PyObject *value) {
    task_slots(task);
    if (slot_more[which]) {
        PyObject **slot = (PyObject **)((char *)task + slot_more[which]);
        Py_INCREF(value);
        Py_XSETREF(*slot, value);
        return 0;
    }
    return PyObject_SetAttr(task, *slot_more_names[which], value);
}

/* task.chain_key (a new reference), or NULL with an error. */
static PyObject *get_chain_key(PyObject *task) {
    if (task_slots(task)) {
        PyObject *value = *(PyObject **)((char *)task + slot_chain_key);
        if (value != NULL) {
            Py_INCREF(value);
            return value;
        }
    }
    return PyObject_GetAttr(task, s_chain_key);
}

/* task.<the slot at `offset`, or `name`> = value: 0, or -1 with an error. */
static int set_slot(PyObject *task, Py_ssize_t *offset, PyObject *name, PyObject *value) {
    if (task_slots(task)) {
        PyObject **slot = (PyObject **)((char *)task + *offset);
        Py_INCREF(value);
        Py_XSETREF(*slot, value);
        return 0;
    }
    return PyObject_SetAttr(task, name, value);
}

static inline int set_chain_key(PyObject *task, PyObject *value) {
    return set_slot(task, &slot_chain_key, s_chain_key, value);
}

static int set_cpu(PyObject *task, long cpu) {
    if (cpu < 0)
        return 0;
    PyObject *value = PyLong_FromLong(cpu);
    if (value == NULL)
        return -1;
    int r = set_slot(task, &slot_cpu, s_cpu, value);
    Py_DECREF(value);
    return r;
}

#endif
