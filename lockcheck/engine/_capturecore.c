/*
 * lockcheck.engine._capturecore: the compiled filter in front of the capture fast path's Python
 * loop (lockcheck/engine/fast_capture.py, `_ftrace_misses`), as _speedups.c's LineFilter is in
 * front of fast_lt's.
 *
 * `CaptureFilter(lines, caches, reader, stats, checker, annotated, make, rules, tick)` is an
 * iterator over the ftrace lines that applies, itself, the common lines the Python loop would
 * apply -- an acquisition onto a cached chain (the annotator's `decide` + `_push_hit` + the
 * annotator's `acquire` + the reader's bookkeeping), the release of the innermost lock
 * (`_pop_innermost` + the annotator's release + the reader's), `lock_contended`/`lock_acquired`,
 * and the lines the reader skips -- and yields `(lineno, line)` for every other line, which the
 * Python loop then handles exactly as without this filter.  Whatever it is not sure of (a piece
 * of the line not in the caches, no view of the task, an irq-context change, an annotator that
 * would doubt, a cache miss, a new usage bit, an entry that is no HeldLock) it passes on, having
 * changed nothing.  It shares the Python loop's dictionaries (the line pieces' caches, read with
 * `_ftscan`'s own split (_ftsplit.h), `views`) and the stages' own state, and only looks things up in them
 * or does to them what the Python loop does.
 *
 * What only Python code changes between two lines the filter passes on (the reader's
 * `probe_known`/`contention`, the annotator's `capture`/`trusted`, the checker's depth limit and
 * event counts) is read each time the filter resumes; the checker's event counts it keeps
 * meanwhile are written back before it yields a line (a `recent.last` stamp reads them).
 *
 * lockdep's rules come from `rules` as tables (_rules.h, the `.lt` core's too): none is decided
 * here.  tests/test_capturepath.py holds the runs with and without this filter to identical
 * findings, graph, statistics, annotator state and held stacks.
 *
 * The filter is written in parts, by job: its state (_capturecore_state.h), what it reads again
 * when it resumes (_capturecore_resume.h), the annotator's part of an acquisition
 * (_capturecore_annotate.h), the lock lines it applies (_capturecore_take.h; a release below the top:
 * _capturecore_below.h), irq-context changes (_capturecore_irq.h), the chain keys found in the chain
 * cache (_capturecore_known.h), the recent locks' moves not made yet (_capturecore_recent.h), the
 * acquisition whose objects are not made yet
 * (_capturecore_pending.h), one line (_capturecore_line.h), reading the lines (_capturecore_read.h); its own memo tables are
 * _capcache.h.  This file: the iterator and the module.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <float.h>
#include "_rules.h"
#include "_cshared.h"
#include "_ftsplit.h"
#include "_capcache.h"
#include "_capturecore_known.h"
#include "_capturecore_recent.h"

#include "_capturecore_state.h"
#include "_capturecore_resume.h"
#include "_capturecore_annotate.h"
#include "_capturecore_below.h"
#include "_capturecore_take.h"
#include "_capturecore_pending.h"
#include "_capturecore_irq.h"
#include "_capturecore_line.h"
#include "_capturecore_read.h"

static PyObject *CaptureFilter_next(CaptureFilter *self) {
    if (resume(self) < 0)
        return NULL;
    for (;;) {
        const char *text = NULL;
        Py_ssize_t n = 0;
        PyObject *line = NULL;
        int got = next_line(self, &text, &n, &line);
        if (got <= 0) {
            suspend(self);
            return NULL;
        }
        self->lineno++;
        int r = 0;
        if (text != NULL && (self->tick < 0 || (self->lineno & self->tick)))
            r = take_line(self, text, n);
        if (r == 1) {
            self->taken++;
            Py_XDECREF(line);
            continue;
        }
        if (r == 0 && line == NULL && (line = ascii_str(text, n)) == NULL)
            r = -1;
        if (r < 0) {
            Py_XDECREF(line);
            suspend(self);
            return NULL;
        }
        if (suspend(self) < 0) {
            Py_DECREF(line);
            return NULL;
        }
        PyObject *number = PyLong_FromLongLong(self->lineno);
        if (number == NULL) {
            Py_DECREF(line);
            return NULL;
        }
        PyObject *pair = PyTuple_Pack(2, number, line);
        Py_DECREF(number);
        Py_DECREF(line);
        return pair;
    }
}

/* How many lines the filter has read (source.Lines.give_bytes counts a block's lines from it). */
static PyObject *CaptureFilter_lines_read(CaptureFilter *self, PyObject *Py_UNUSED(ignored)) {
    return PyLong_FromLongLong(self->lineno);
}

static PyObject *CaptureFilter_counts(CaptureFilter *self, PyObject *Py_UNUSED(ignored)) {
    return Py_BuildValue("{sLsLsLsLsLsLsLsLsLsL}", "context_events", self->context_events, "lines", self->lineno,
                         "events", self->events, "hardirq_lines", self->hardirq_lines, "softirq_lines", self->softirq_lines,
                         "names_resolved", self->resolved, "acquisitions", self->acquisitions,
                         "contention", self->contention_lines, "taken", self->taken, "elided", self->elided);
}

static PyMethodDef CaptureFilter_methods[] = {
    {"lines_read", (PyCFunction)CaptureFilter_lines_read, METH_NOARGS, "how many lines the filter has read"},
    {"counts", (PyCFunction)CaptureFilter_counts, METH_NOARGS,
     "the reader's counts of the lines applied here (and `lines`: every line read, `taken`: applied, "
     "`elided`: acquisitions released by the next lock line, made no Python objects)"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject CaptureFilterType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "lockcheck.engine._capturecore.CaptureFilter",
    .tp_basicsize = sizeof(CaptureFilter),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "CaptureFilter(lines, caches, reader, stats, checker, annotated, make, rules, tick, irq[, reject]): "
              "(lineno, line) of the lines the capture fast path's Python loop must handle",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)CaptureFilter_init,
    .tp_dealloc = (destructor)CaptureFilter_dealloc,
    .tp_traverse = (traverseproc)CaptureFilter_traverse,
    .tp_clear = (inquiry)CaptureFilter_clear,
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = (iternextfunc)CaptureFilter_next,
    .tp_methods = CaptureFilter_methods,
};

static struct PyModuleDef capturecore_module = {PyModuleDef_HEAD_INIT, "_capturecore", NULL, -1, NULL};

PyMODINIT_FUNC PyInit__capturecore(void) {
#define INTERN(var, text) if ((var = PyUnicode_InternFromString(text)) == NULL) return NULL
    INTERN(s_probe_known, "probe_known");
    INTERN(s_preempt_rt, "preempt_rt");
    INTERN(s_stopped, "stopped");
    INTERN(s_stamp_key, "stamp");
    INTERN(s_contention, "contention");
    INTERN(s_capture, "capture");
    INTERN(s_trusted, "trusted");
    INTERN(s_untrusted_from, "untrusted_from");
    INTERN(s_fast_depth, "fast_depth");
    INTERN(s_events, "events");
    INTERN(s_chain_hits, "chain_hits");
    INTERN(s_add, "add");
    INTERN(s_last, "last");
    INTERN(s_usage, "usage");
    INTERN(s_irq_context, "irq_context");
    INTERN(s_state, "state");
    INTERN(s_none, "none");
    INTERN(s_rule, "rule");
    INTERN(s_state_changed, "state_changed");
    INTERN(s_subclasses, "subclasses");
    INTERN(s_subclass_explaining, "subclass_explaining");
    INTERN(s_subclass, "subclass");
    INTERN(s_check0, "check0");
    INTERN(s_rule_prefix, "rule ");
    INTERN(s_empty, "");
    INTERN(s_generation, "generation");
#undef INTERN
    small_ints[0] = PyLong_FromLong(0);
    small_ints[1] = PyLong_FromLong(1);
    if (PyType_Ready(&CaptureFilterType) < 0 || PyType_Ready(&LaterType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&capturecore_module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&CaptureFilterType);
    if (PyModule_AddObject(m, "CaptureFilter", (PyObject *)&CaptureFilterType) < 0) {
        Py_DECREF(&CaptureFilterType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
