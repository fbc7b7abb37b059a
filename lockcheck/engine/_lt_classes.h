/*
 * The class table: CLASS bytes -> (str, graph node, the node's usage as last read), for the
 * classes the graph has, so that an acquisition read here finds its class without a str made or
 * a dict looked up; and node_usage, which reads a node's usage mask through it.  A unit: the
 * core's one view of the graph's nodes.  Relies on _lt_state.h (ClassSlot, dict_version).
 *
 * Part of the `.lt` core (_speedups.c), which includes it with the other _lt_*.h in one translation
 * unit: its static functions stay where the compiler can inline them, as when they were one file.
 */
#ifndef LOCKCHECK_LT_CLASSES_H
#define LOCKCHECK_LT_CLASSES_H

#include "_lt_state.h"

static void clear_classes(LineFilter *self) {
    for (Py_ssize_t i = 0; i < self->class_count; i++) {
        Py_XDECREF(self->class_table[i].cls);
        Py_XDECREF(self->class_table[i].node);
    }
    PyMem_Free(self->class_raw);
    PyMem_Free(self->class_index);
    self->class_table = NULL;
    self->class_raw = NULL;
    self->class_index = NULL;
    self->class_size = self->class_count = self->class_cap = 0;
}

/* The class table: CLASS bytes -> (str, graph node), for classes the graph has (a node is never
 * removed from it, so an entry stays true).  Open addressing, linear probing. */
/* (ClassSlot: in _lt_state.h, the LineFilter's layout) */

#define CLASS_TAG (~(uint64_t)0xFFFFFFFF)

/* The index twice as large (its first: 1024 slots), the entries placed again. */
static int classes_grow(LineFilter *self) {
    Py_ssize_t size = self->class_size ? self->class_size * 2 : 1024;
    uint64_t *index = PyMem_Calloc((size_t)size, sizeof(uint64_t));
    if (index == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < self->class_count; i++) {
        uint64_t h = self->class_table[i].hash;
        Py_ssize_t j = (Py_ssize_t)(h & (uint64_t)(size - 1));
        while (index[j] != 0)
            j = (j + 1) & (size - 1);
        index[j] = (h & CLASS_TAG) | (uint64_t)(i + 1);
    }
    PyMem_Free(self->class_index);
    self->class_index = index;
    self->class_size = size;
    return 0;
}

/* Room for one more entry (twice the room, the entries moved: no ClassSlot pointer outlives a line). */
static int class_entries_grow(LineFilter *self) {
    if (self->class_count < self->class_cap)
        return 0;
    Py_ssize_t cap = self->class_cap ? self->class_cap * 2 : 256;
    if (cap >= (Py_ssize_t)0xFFFFFFFF) {
        PyErr_NoMemory();
        return -1;
    }
    char *raw = PyMem_Malloc((size_t)cap * sizeof(ClassSlot) + 127);
    if (raw == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    ClassSlot *table = (ClassSlot *)(((uintptr_t)raw + 127) & ~(uintptr_t)127);
    if (self->class_count)
        memcpy(table, self->class_table, (size_t)self->class_count * sizeof(ClassSlot));
    PyMem_Free(self->class_raw);
    self->class_raw = raw;
    self->class_table = table;
    self->class_cap = cap;
    return 0;
}

/* Whether `slot` is the class named by the `n` bytes at `p`. */
static inline int class_is(const ClassSlot *slot, uint64_t h, const char *p, Py_ssize_t n) {
    if (slot->hash != h || slot->len != n)
        return 0;
    if (n <= CLASS_INLINE)
        return bytes_eq(slot->name, p, n);
    return bytes_eq(slot->name, p, CLASS_INLINE) &&
           memcmp(PyUnicode_1BYTE_DATA(slot->cls) + CLASS_INLINE, p + CLASS_INLINE, (size_t)(n - CLASS_INLINE)) == 0;
}

/* The class named by `n` bytes at `p`, if the graph has it: 1 (*slot set), 0 not, -1 error. */
static int find_class(LineFilter *self, const char *p, Py_ssize_t n, ClassSlot **found) {
    uint64_t h = hash_bytes(p, n);
    Py_ssize_t mask = self->class_size - 1;
    Py_ssize_t j = (Py_ssize_t)(h & (uint64_t)mask);
    for (;; j = (j + 1) & mask) {
        uint64_t x = self->class_index[j];
        if (x == 0)
            break;
        if ((x & CLASS_TAG) == (h & CLASS_TAG)) {
            ClassSlot *slot = &self->class_table[(x & 0xFFFFFFFF) - 1];
            if (class_is(slot, h, p, n)) {
                *found = slot;
                return 1;
            }
        }
    }
    PyObject *cls = ascii_str(p, n);
    if (cls == NULL)
        return -1;
    PyObject *node = PyDict_GetItemWithError(self->classes, cls); /* borrowed */
    if (node == NULL || !PyDict_CheckExact(node)) {
        Py_DECREF(cls);
        return PyErr_Occurred() ? -1 : 0; /* not (yet) in the graph: the full checker's */
    }
    Py_hash_t cls_hash = PyObject_Hash(cls);
    if (cls_hash == -1 || ((self->class_count + 1) * 2 > self->class_size && classes_grow(self) < 0) ||
        class_entries_grow(self) < 0) {
        Py_DECREF(cls);
        return -1;
    }
    mask = self->class_size - 1;
    j = (Py_ssize_t)(h & (uint64_t)mask);
    while (self->class_index[j] != 0)
        j = (j + 1) & mask;
    ClassSlot *slot = &self->class_table[self->class_count];
    memset(slot, 0, sizeof *slot);
    Py_INCREF(node);
    slot->hash = h;
    slot->len = n;
    slot->cls_hash = cls_hash;
    slot->cls = cls;
    slot->node = node;
    memcpy(slot->name, p, (size_t)(n < CLASS_INLINE ? n : CLASS_INLINE));
    self->class_count++;
    self->class_index[j] = (h & CLASS_TAG) | (uint64_t)self->class_count;
    *found = slot;
    return 1;
}

/* node["usage"] of a class's graph node: 1 and *out, 0 none (the full checker's), -1 error.  The
 * class table keeps the value it read with the node dict's version then: while the dict is
 * unchanged (any item set, even to an equal value, gives it a new version) that value is the
 * answer, without the look-up's misses on the dict's keys and the int (a dict version of 0: no
 * version on this interpreter, every read a look-up). */
static int node_usage(PyObject *node, ClassSlot *slot, long *out) {
    uint64_t version = dict_version(node);
    if (slot != NULL && version != 0 && slot->usage_version == version) {
        *out = slot->usage;
        return 1;
    }
    PyObject *usage = PyDict_GetItemWithError(node, s_usage);
    if (usage == NULL)
        return PyErr_Occurred() ? -1 : 0;
    long value = as_long(usage);
    if (value == -1 && PyErr_Occurred())
        return -1;
    if (slot != NULL) {
        slot->usage_version = version;
        slot->usage = value;
        slot->usage_read = 1;
    }
    *out = value;
    return 1;
}

/* Whether a class's usage has every bit of `need` (node_usage's answer, ANDed): 1, 0 not (or no
 * usage: the full checker's), -1 error.  The graph only ever adds bits to a node's usage
 * (LockGraph.set_usage ORs them in; a class removed is a new node when it comes back, and the
 * table is dropped then: forget_classes), so a mask the table read once is a subset of the
 * node's now: when it has them all, so has the node, and the node dict is not read at all.  In a
 * run of 3,000 classes that read (of the dict's version) was a cache miss on most
 * acquisitions, ~5% of a 10M-event run's time. */
static inline int usage_covers(PyObject *node, ClassSlot *slot, long need) {
    if (slot != NULL && slot->usage_read && (need & ~slot->usage) == 0)
        return 1;
    long usage;
    int known = node_usage(node, slot, &usage);
    return known <= 0 ? known : (need & ~usage) == 0;
}

#endif
