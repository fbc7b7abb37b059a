/*
 * lockcheck.engine._jsonlt's giving up on a block: the rest of it, from a line `.lt` cannot carry, as the str
 * lines the old way reads (fast_jsonl._old_way).
 *
 * Why apart: _jsonlt.c is split by job (no module over 600 lines); included by it alone.
 */

#ifndef LOCKCHECK_JSONLT_REST_H
#define LOCKCHECK_JSONLT_REST_H

#include <Python.h>

/* The `n` ASCII bytes at `data` (whole lines joined by `\n`) as a list of str lines, split at `\n` only, as
 * source.Lines does, each `\r` ending dropped (a new reference, or NULL with an exception set). */
static PyObject *rest_lines(const char *data, Py_ssize_t n) {
    PyObject *nl = PyUnicode_FromString("\n");
    PyObject *text = PyUnicode_DecodeASCII(data, n, NULL);
    if (nl == NULL || text == NULL) {
        Py_XDECREF(nl);
        Py_XDECREF(text);
        return NULL;
    }
    PyObject *rest = PyUnicode_Split(text, nl, -1);
    Py_DECREF(nl);
    Py_DECREF(text);
    if (rest == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(rest); i++) {
        PyObject *item = PyList_GET_ITEM(rest, i);
        Py_ssize_t m = PyUnicode_GET_LENGTH(item);
        if (m && PyUnicode_READ_CHAR(item, m - 1) == '\r') {
            PyObject *cut = PyUnicode_Substring(item, 0, m - 1);
            if (cut == NULL) {
                Py_DECREF(rest);
                return NULL;
            }
            PyList_SET_ITEM(rest, i, cut);
            Py_DECREF(item);
        }
    }
    return rest;
}

#endif
