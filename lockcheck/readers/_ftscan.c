/* The ftrace reader's line scanner for lines whose pieces it has seen (lockcheck.readers.ftrace_scan).
 *
 * A capture line is `HEAD] STAMP: TEXT`: the head (`comm-pid [cpu`), the
 * flags column and the text after the time repeat endlessly, the time stamp
 * is new on every line.  `scan_pure` (Python) reads each piece once and
 * caches what it read, per piece, in three dicts.  This function splits a
 * line the way `scan_pure` does and answers from those same dicts when all
 * its pieces are there; anything else -- a piece not seen yet, a line of
 * another shape, a time stamp `scan_pure` would refuse -- is handed to
 * `scan_pure` itself, which reads it (filling the caches) or refuses it.
 * Nothing here decides what a piece means, so nothing here can drift from
 * the grammar: the only reading of its own is the time stamp's test, the
 * same digits-and-one-point test `scan_pure` makes on every line.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include "_ftsplit.h"

static PyObject *heads;     /* head text -> (comm, pid, cpu) */
static PyObject *flag_cols; /* flags text -> checked flags, or None: not a flags column */
static PyObject *bodies;    /* text after the time -> body tuple */
static PyObject *fallback;  /* scan_pure */

static PyObject *
setup(PyObject *self, PyObject *args)
{
    PyObject *h, *f, *b, *fb;
    if (!PyArg_ParseTuple(args, "O!O!O!O", &PyDict_Type, &h, &PyDict_Type, &f, &PyDict_Type, &b, &fb))
        return NULL;
    Py_INCREF(h); Py_INCREF(f); Py_INCREF(b); Py_INCREF(fb);
    Py_XSETREF(heads, h);
    Py_XSETREF(flag_cols, f);
    Py_XSETREF(bodies, b);
    Py_XSETREF(fallback, fb);
    Py_RETURN_NONE;
}

/* the cached value of line[start:end] in DICT (borrowed), NULL when absent or on error */
static PyObject *
cached(PyObject *dict, PyObject *line, Py_ssize_t start, Py_ssize_t end)
{
    PyObject *key = PyUnicode_Substring(line, start, end);
    if (key == NULL)
        return NULL;
    PyObject *value = PyDict_GetItemWithError(dict, key);
    Py_DECREF(key);
    return value;
}

static PyObject *
slow(PyObject *line)
{
    return PyObject_CallOneArg(fallback, line);
}

/* (head, flags, the line's time stamp, body): a new reference */
static PyObject *
record_of(PyObject *line, const Pieces *at, PyObject *head, PyObject *flags, PyObject *body)
{
    PyObject *timestamp = PyUnicode_Substring(line, at->ts_start, at->colon);
    if (timestamp == NULL)
        return NULL;
    PyObject *record = PyTuple_Pack(4, head, flags, timestamp, body);
    Py_DECREF(timestamp);
    return record;
}

static PyObject *
scan(PyObject *self, PyObject *line)
{
    if (fallback == NULL)
        return PyErr_Format(PyExc_RuntimeError, "_ftscan.setup() not called");
    /* ASCII only: one byte a character, so byte offsets are `str` offsets (other lines: scan_pure) */
    if (!PyUnicode_Check(line) || PyUnicode_READY(line) < 0 || !PyUnicode_IS_ASCII(line))
        return slow(line);
    const char *text = (const char *)PyUnicode_DATA(line);
    Pieces at;
    if (!split_pieces(text, PyUnicode_GET_LENGTH(line), &at))
        return slow(line);
    PyObject *head = cached(heads, line, 0, at.end);
    if (head == NULL)
        return PyErr_Occurred() ? NULL : slow(line);
    PyObject *flags = Py_None;  /* no blank after the leading ones: no flags column */
    if (at.blank >= at.from) {  /* the flags text runs to the last blank (text[from] is none: it is not empty) */
        flags = cached(flag_cols, line, at.from, at.blank);
        if (flags == NULL || flags == Py_None)  /* not seen, or not a flags column: scan_pure's verdict */
            return PyErr_Occurred() ? NULL : slow(line);
    }
    if (!stamp_ok(text, at.ts_start, at.colon))
        return slow(line);
    PyObject *body = cached(bodies, line, at.colon + 2, at.n);
    if (body == NULL)
        return PyErr_Occurred() ? NULL : slow(line);
    return record_of(line, &at, head, flags, body);
}

/* split(line, heads, flags, bodies): the capture fast path's own caches (`fast_capture._ftrace_misses`)
 * looked up with the line's head, flags and text (the flags text "" when there is none), and its time
 * stamp -- (head, flags, time stamp, body) -- when all three are there and the stamp is one `scan_pure`
 * takes; None: the caller splits and reads the line itself. */
static PyObject *
split(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4 || !PyUnicode_Check(args[0]) || !PyDict_Check(args[1]) || !PyDict_Check(args[2])
            || !PyDict_Check(args[3])) {
        PyErr_SetString(PyExc_TypeError, "split(line, heads, flags, bodies)");
        return NULL;
    }
    PyObject *line = args[0];
    if (PyUnicode_READY(line) < 0)
        return NULL;
    if (!PyUnicode_IS_ASCII(line))
        Py_RETURN_NONE;
    const char *text = (const char *)PyUnicode_DATA(line);
    Pieces at;
    if (!split_pieces(text, PyUnicode_GET_LENGTH(line), &at) || !stamp_ok(text, at.ts_start, at.colon))
        Py_RETURN_NONE;
    PyObject *head = cached(args[1], line, 0, at.end);
    if (head == NULL)
        goto missing;
    PyObject *flags = cached(args[2], line, at.from, at.blank >= at.from ? at.blank : at.from);
    if (flags == NULL)
        goto missing;
    PyObject *body = cached(args[3], line, at.colon + 2, at.n);
    if (body == NULL)
        goto missing;
    return record_of(line, &at, head, flags, body);
missing:
    if (PyErr_Occurred())
        return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"setup", setup, METH_VARARGS, "setup(heads, flags, bodies, scan_pure): the caches to answer from, the reader of the rest"},
    {"scan", scan, METH_O, "scan(line): scan_pure(line), answered from its caches when every piece is there"},
    {"split", (PyCFunction)(void (*)(void))split, METH_FASTCALL,
     "split(line, heads, flags, bodies): (head, flags, time stamp, body) from the caller's caches, or None"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_ftscan", NULL, -1, methods};

PyMODINIT_FUNC
PyInit__ftscan(void)
{
    return PyModule_Create(&module);
}
