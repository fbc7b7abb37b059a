/*
 * What lockcheck's compiled modules share that is no lockdep rule (those are in _rules.h): a hash
 * of bytes for the cores' own tables, a str made of ASCII bytes, and the offsets of a slotted
 * Python class's fields (the C reads and writes `__slots__` of HeldLock, TaskState... directly).
 * Written once here; each module that includes it gets its own static copy.
 */
#ifndef LOCKCHECK_CSHARED_H
#define LOCKCHECK_CSHARED_H

#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <string.h>

/* An exact int of at most one digit read as it is -- CPython before 3.12 keeps the signed digit
 * count in ob_size -- without the general conversion (the cores read small ints on every line):
 * 1 with *out set, or 0 for any other (read it the general way).  The caller checked
 * PyLong_CheckExact. */
static inline int one_digit_long(PyObject *o, long *out) {
#if PY_VERSION_HEX < 0x030C0000
    Py_ssize_t size = Py_SIZE(o);
    if (size >= -1 && size <= 1) {
        *out = size == 0 ? 0 : (long)size * (long)((PyLongObject *)o)->ob_digit[0];
        return 1;
    }
#else
    (void)o;
    (void)out;
#endif
    return 0;
}

/* A 64-bit hash of `n` bytes (FNV-style, 8 bytes a step): the keys of a core's own tables. */
static inline uint64_t hash_bytes(const char *p, Py_ssize_t n) {
    uint64_t h = 1469598103934665603ULL ^ (uint64_t)n;
    Py_ssize_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t word;
        memcpy(&word, p + i, 8);
        h = (h ^ word) * 1099511628211ULL;
        h ^= h >> 29;
    }
    for (; i < n; i++)
        h = (h ^ (unsigned char)p[i]) * 1099511628211ULL;
    return h ^ (h >> 32);
}

/* A str of the `n` ASCII bytes at `p`, made without the UTF-8 decoder (the caller knows they are
 * ASCII: a str line checked for it, or a block of bytes source.Lines.give_bytes vouches for). */
static inline PyObject *ascii_str(const char *p, Py_ssize_t n) {
    PyObject *s = PyUnicode_New(n, 127);
    if (s != NULL)
        memcpy(PyUnicode_1BYTE_DATA(s), p, (size_t)n);
    return s;
}

/* The offsets of the `n` slots `names` of `type` (TypeError: one is not a `__slots__` field). */
static inline int slot_offsets(PyTypeObject *type, const char **names, Py_ssize_t *off, int n) {
    for (int i = 0; i < n; i++) {
        PyObject *d = PyObject_GetAttrString((PyObject *)type, names[i]);
        if (d == NULL)
            return -1;
        if (!Py_IS_TYPE(d, &PyMemberDescr_Type) || ((PyMemberDescrObject *)d)->d_member->type != T_OBJECT_EX) {
            Py_DECREF(d);
            PyErr_Format(PyExc_TypeError, "%s.%s is not a slot", type->tp_name, names[i]);
            return -1;
        }
        off[i] = ((PyMemberDescrObject *)d)->d_member->offset;
        Py_DECREF(d);
    }
    return 0;
}

#endif
