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

static PyObject *
scan(PyObject *self, PyObject *line)
{
    if (!PyUnicode_Check(line) || fallback == NULL || PyUnicode_READY(line) < 0 || !PyUnicode_IS_ASCII(line))
        return fallback != NULL ? slow(line) : PyErr_Format(PyExc_RuntimeError, "_ftscan.setup() not called");
    /* ASCII only: one byte a character, so byte offsets are `str` offsets (other lines: scan_pure) */
    const char *text = (const char *)PyUnicode_DATA(line);
    Py_ssize_t n = PyUnicode_GET_LENGTH(line);

    /* end = line.find("] ") */
    Py_ssize_t end = -1;
    for (const char *p = text; (p = memchr(p, ']', text + n - p)) != NULL; p++) {
        if (p + 1 < text + n && p[1] == ' ') {
            end = p - text;
            break;
        }
    }
    if (end < 0)
        return slow(line);
    PyObject *head = cached(heads, line, 0, end);
    if (head == NULL)
        return PyErr_Occurred() ? NULL : slow(line);

    /* stamp, ": ", rest = line[end + 2:].partition(": ") */
    Py_ssize_t stamp = end + 2, colon = -1;
    for (Py_ssize_t i = stamp; i + 1 < n; i++) {
        if (text[i] == ':' && text[i + 1] == ' ') {
            colon = i;
            break;
        }
    }
    if (colon < 0)
        return slow(line);
    /* flags, " ", timestamp = stamp.lstrip(" ").rpartition(" ") */
    Py_ssize_t from = stamp;
    while (from < colon && text[from] == ' ')
        from++;
    Py_ssize_t blank = colon - 1;
    while (blank >= from && text[blank] != ' ')
        blank--;
    Py_ssize_t ts_start = from;
    PyObject *flags = Py_None;  /* no blank after the leading ones: no flags column */
    if (blank >= from) {  /* the flags text runs to the last blank (text[from] is none: it is not empty) */
        ts_start = blank + 1;
        flags = cached(flag_cols, line, from, blank);
        if (flags == NULL || flags == Py_None)  /* not seen, or not a flags column: scan_pure's verdict */
            return PyErr_Occurred() ? NULL : slow(line);
    }
    /* the time stamp: ASCII digits with at most one point, neither first nor last */
    Py_ssize_t points = 0;
    if (ts_start >= colon || text[ts_start] == '.' || text[colon - 1] == '.')
        return slow(line);
    for (Py_ssize_t i = ts_start; i < colon; i++) {
        char c = text[i];
        if (c == '.') {
            if (++points > 1)
                return slow(line);
        }
        else if (c < '0' || c > '9')
            return slow(line);
    }
    PyObject *body = cached(bodies, line, colon + 2, n);
    if (body == NULL)
        return PyErr_Occurred() ? NULL : slow(line);
    PyObject *timestamp = PyUnicode_Substring(line, ts_start, colon);
    if (timestamp == NULL)
        return NULL;
    PyObject *record = PyTuple_Pack(4, head, flags, timestamp, body);
    Py_DECREF(timestamp);
    return record;
}

static PyMethodDef methods[] = {
    {"setup", setup, METH_VARARGS, "setup(heads, flags, bodies, scan_pure): the caches to answer from, the reader of the rest"},
    {"scan", scan, METH_O, "scan(line): scan_pure(line), answered from its caches when every piece is there"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_ftscan", NULL, -1, methods};

PyMODINIT_FUNC
PyInit__ftscan(void)
{
    return PyModule_Create(&module);
}
