/*
 * lockcheck.engine._speedups: the compiled part of the `.lt` fast path (lockcheck/engine/fast_lt.py).
 *
 * `LineFilter(lines, views, tails, chain_cache, initial_key, depth_limit, tick[, classes[, irq[, checker]]])`
 * is an iterator over `lines` that applies, itself, the lines hotpath.lt_events would apply on its
 * fast path in the common shapes -- a plain release of the innermost lock, an acquisition whose
 * chain is cached, (given `irq`) an irq-state change that marks no usage bit, an exit holding
 * nothing and a release below the top whose re-acquired chains are all cached, and (given the
 * checker) a contended/acquired of a lock the task holds -- and yields `(lineno, line)` for every
 * other line, which
 * the Python loop then handles exactly as it handles every line without this filter.  The
 * filter never decides anything the Python code would decide differently: whatever it is not
 * sure of (a task it has no view of, a text it cannot read, a non-ASCII line, a nest lock, a
 * HeldLock on top, a cache miss) it passes on.  It shares the Python loop's dictionaries:
 * `views` (task key -> the view tuple built by the Python side) and `tails` (text after the
 * task -> what hotpath._scan_tail read), so it only ever looks things up in them.
 *
 * Its input: str lines, or blocks of whole ASCII lines as `bytes` (source.Lines.give_bytes),
 * which it splits itself: a str is made only for a line it passes on or pushes; or `(block,
 * hints)` pairs, the JSON Lines translator's, each line's split given (_lt_hints.h, apply_split).  The text after
 * the task is read here (read_tail) for the common shapes -- `acquire`, `release`, `contended`,
 * `acquired` of `CLASS[@INSTANCE]` with `at=`, a mode and `try` -- as _scan_tail reads them,
 * the class looked up in `classes` (the graph's nodes) through a table of its own; any other
 * shape is looked up in `tails`, as before.
 *
 * The layouts of a view, an info and a stack entry are hotpath.py's; tests/test_hotpath.py and
 * tests/test_blocks.py hold the filtered and the pure-Python runs to identical results.  The
 * acquisitions it reads itself it keeps in C (the held overlay, OvEntry) and writes into the
 * task's held list as those stack entries before any line goes to the Python side
 * (tests/test_speedups_overlay.py).
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

/* The core by job, each header a unit (its comment says what it holds and relies on), included
 * here in one translation unit so that their static inline functions stay inlined; this file
 * keeps the type, its life cycle, the iterator that splits blocks into lines, and the module. */
#include "_lt_state.h"      /* LineFilter, hotpath.py's tuple layouts, the interned names */
#include "_lt_slots.h"      /* a task's chain key and cpu at their __slots__ */
#include "_lt_stack.h"      /* the held list's tuple entries: pop, references, lock_is_held */
#include "_lt_chainkey.h"   /* the chain key's hash (hash3, hash3_lanes, probe_of) */
#include "_lt_known.h"      /* the chain cache's keys known here (cache_has) */
#include "_lt_classes.h"    /* the class table, a node's usage */
#include "_grammar_limits.h" /* the `.lt` reader's limits on a stamp, read from Python (grammar_init) */
#include "_lt_tail.h"       /* the text after the task read (read_tail, read_stamp, rest_info) */
#include "_lt_overlay.h"    /* the held overlay: pushes kept in C, flushed as tuples */
#include "_lt_acquire.h"    /* an acquisition applied */
#include "_lt_irq.h"        /* an irq-state op applied */
#include "_lt_release.h"    /* a release applied: innermost, below the top */
#include "_lt_contention.h" /* contended/acquired applied */
#include "_lt_views.h"      /* the task views: find_view, set_view, drop_view */
#include "_lt_line.h"       /* one line dispatched (apply_line) */

static void clear_fields(FieldSlot *fields) {
    if (fields == NULL)
        return;
    for (Py_ssize_t i = 0; i < FIELD_SLOTS; i++) {
        Py_CLEAR(fields[i].release);
        Py_CLEAR(fields[i].instance);
    }
}

/* The rest cache's infos dropped (and its keys, given `keys`). */
static void clear_rest(RestSlot *slots, int keys) {
    if (slots == NULL)
        return;
    for (Py_ssize_t i = 0; i < REST_SLOTS; i++) {
        Py_CLEAR(slots[i].info);
        if (keys)
            Py_CLEAR(slots[i].key);
    }
}

static void clear_keys(PyObject **keys, Py_ssize_t n) {
    if (keys == NULL)
        return;
    for (Py_ssize_t i = 0; i < n; i++)
        Py_CLEAR(keys[i]);
}

static void LineFilter_dealloc(LineFilter *self) {
    PyObject_GC_UnTrack(self);
    overlays_drop(self);
    knownkeys_free(&self->known);
    PyMem_Free(self->overlays);
    Py_XDECREF(self->chunk);
    Py_XDECREF(self->hints);
    clear_keys(self->task_keys, TASK_SLOTS);
    clear_rest(self->rest_slots, 1);
    PyMem_Free(self->task_keys);
    PyMem_Free(self->task_seen);
    PyMem_Free(self->rest_slots);
    clear_fields(self->fields);
    PyMem_Free(self->fields);
    clear_classes(self);
    Py_XDECREF(self->classes);
    Py_XDECREF(self->lines);
    Py_XDECREF(self->views);
    Py_XDECREF(self->tails);
    Py_XDECREF(self->cache);
    Py_XDECREF(self->initial);
    Py_XDECREF(self->file);
    Py_XDECREF(self->reader);
    Py_XDECREF(self->usage_needs);
    Py_XDECREF(self->checker);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int LineFilter_traverse(LineFilter *self, visitproc visit, void *arg) {
    Py_VISIT(self->lines);
    Py_VISIT(self->views);
    Py_VISIT(self->tails);
    Py_VISIT(self->cache);
    Py_VISIT(self->initial);
    Py_VISIT(self->classes);
    Py_VISIT(self->file);
    Py_VISIT(self->reader);
    Py_VISIT(self->usage_needs);
    Py_VISIT(self->checker);
    for (Py_ssize_t i = 0; i < self->class_count; i++)
        Py_VISIT(self->class_table[i].node);
    if (self->rest_slots != NULL)
        for (Py_ssize_t i = 0; i < REST_SLOTS; i++)
            Py_VISIT(self->rest_slots[i].info);
    for (Py_ssize_t i = 0; i < self->ov_count; i++) {
        Py_VISIT(self->overlays[self->ov_used[i]].held);
        Py_VISIT(self->overlays[self->ov_used[i]].task);
    }
    return 0;
}

static int LineFilter_init(LineFilter *self, PyObject *args, PyObject *kwds) {
    PyObject *lines, *views, *tails, *cache, *initial, *classes = NULL, *file = NULL, *reader = NULL,
        *usage_needs = NULL, *checker = NULL;
    Py_ssize_t depth_limit;
    PyObject *irq_rule;
    long tick, read_shift = 0;
    unsigned long validates, separate, merges;
    int quick = 0;
    /* positional only: a keyword (a name misspelt, a layout changed) would be dropped unread */
    if (kwds != NULL && PyDict_GET_SIZE(kwds) != 0) {
        PyErr_SetString(PyExc_TypeError, "LineFilter() takes no keyword arguments");
        return -1;
    }
    if (!PyArg_ParseTuple(args, "OO!O!O!Onl(kkkO)|O!(OOOlp)O", &lines, &PyDict_Type, &views, &PyDict_Type,
                          &tails, &PySet_Type, &cache, &initial, &depth_limit, &tick, &validates, &separate,
                          &merges, &irq_rule, &PyDict_Type, &classes, &file, &reader, &usage_needs, &read_shift,
                          &quick, &checker))
        return -1;
    if (rules_irq_parse(irq_rule, self->irq_rule) < 0)
        return -1;
    self->validates = validates;
    self->separate = separate;
    self->merges = merges;
    self->quick = quick;
    Py_XINCREF(file);
    Py_XSETREF(self->file, file);
    Py_XINCREF(reader);
    Py_XSETREF(self->reader, reader);
    Py_XINCREF(usage_needs);
    Py_XSETREF(self->usage_needs, usage_needs);
    Py_XINCREF(checker);
    Py_XSETREF(self->checker, checker);
    self->read_shift = read_shift;
    overlays_drop(self); /* first: its entries borrow the class table's strs, freed next */
    clear_classes(self);
    Py_XINCREF(classes);
    Py_XSETREF(self->classes, classes);
    if (classes != NULL && classes_grow(self) < 0)
        return -1;
    PyObject *it = PyObject_GetIter(lines);
    if (it == NULL)
        return -1;
    Py_XSETREF(self->lines, it);
    Py_INCREF(views);
    Py_XSETREF(self->views, views);
    Py_INCREF(tails);
    Py_XSETREF(self->tails, tails);
    Py_INCREF(cache);
    Py_XSETREF(self->cache, cache);
    if (known_start(self) < 0)
        return -1;
    Py_INCREF(initial);
    Py_XSETREF(self->initial, initial);
    self->initial_lane = -1;
    if (PyLong_CheckExact(initial)) {
        Py_hash_t lane = PyObject_Hash(initial);
        if (lane == -1)
            return -1;
        self->initial_lane = lane;
    }
    self->depth_limit = depth_limit;
    self->tick = tick;
    self->lineno = 0;
    self->events = self->hits = 0;
    self->passthrough = 0;
    Py_CLEAR(self->chunk);
    Py_CLEAR(self->hints);
    self->pos = 0;
    if (self->task_keys == NULL)
        self->task_keys = PyMem_Calloc(TASK_SLOTS, sizeof(PyObject *));
    if (self->rest_slots == NULL)
        self->rest_slots = PyMem_Calloc(REST_SLOTS, sizeof(RestSlot));
    else
        clear_rest(self->rest_slots, 0); /* (the infos of another run's tails) */
    if (self->fields == NULL)
        self->fields = PyMem_Calloc(FIELD_SLOTS, sizeof(FieldSlot));
    if (self->task_seen == NULL)
        self->task_seen = PyMem_Calloc(TASK_SLOTS, sizeof(TaskSeen));
    else
        memset(self->task_seen, 0, TASK_SLOTS * sizeof(TaskSeen));
    self->epoch = 1;
    self->views_known = 0;
    self->current = NULL;
    if (self->overlays == NULL)
        self->overlays = PyMem_Calloc(OV_SLOTS, sizeof(Overlay));
    self->overlay = 1;
    self->pass_local = 0;
    self->pass_held = NULL;
    if (self->task_keys == NULL || self->rest_slots == NULL || self->fields == NULL || self->task_seen == NULL ||
        self->overlays == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

/* The filter's answer for a line it passes on: (lineno, line), the held overlays flushed first
 * (the Python side may look at any task). */
static PyObject *numbered(LineFilter *self, PyObject *line) {
    if (self->ov_count) {
        int r;
        if (self->pass_local) {
            /* a lock or irq op of one task: its overlay (the others stay until a line needs them) */
            Overlay *ov = overlay_find(self, self->pass_held, NULL, 0);
            r = overlay_dirty(ov) ? overlay_flush(self, ov) : 0;
        } else {
            r = overlays_flush(self);
        }
        if (r < 0) {
            Py_DECREF(line);
            return NULL;
        }
    }
    self->pass_local = 0;
    PyObject *lineno = PyLong_FromLongLong(self->lineno);
    if (lineno == NULL) {
        Py_DECREF(line);
        return NULL;
    }
    PyObject *pair = PyTuple_Pack(2, lineno, line);
    Py_DECREF(lineno);
    Py_DECREF(line);
    return pair;
}

/* Whether a line (ASCII, without its line ending) holds only blanks, tabs and carriage returns:
 * a blank line, skipped here (the grammar skips it too, at a thousand times the cost). */
static inline int blank_line(const char *data, Py_ssize_t n) {
    while (n && (data[n - 1] == ' ' || data[n - 1] == '\t' || data[n - 1] == '\r'))
        n--;
    return n == 0;
}

/* Whether a line (ASCII, without its line ending, `n` > 0) may be one the filter applies. */
static inline int may_apply(const char *data, Py_ssize_t n) {
    return data[0] != '#' && memchr(data, '"', (size_t)n) == NULL && memchr(data, '\t', (size_t)n) == NULL;
}

/* The next line of the current block of bytes: applied (0), passed on (1, *out set), or -1 on
 * error.  A line of a block decodes to its bytes without the `\r` of a `\r\n` ending (what
 * source.Lines would have yielded for it). */
/* The length of the line at `p` (up to its `\n`, or all `avail` bytes) and, in *quoted, whether
 * it holds a `"` or a tab (may_apply's verdict on what it reads): one pass over the line where
 * three memchr calls were, 16 bytes a step where SSE2 is. */
static inline Py_ssize_t line_scan(const char *p, Py_ssize_t avail, int *quoted) {
    int found = 0;
    Py_ssize_t i = 0;
#ifdef __SSE2__
    const __m128i newline = _mm_set1_epi8('\n'), quote = _mm_set1_epi8('"'), tab = _mm_set1_epi8('\t');
    for (; i + 16 <= avail; i += 16) {
        __m128i bytes = _mm_loadu_si128((const __m128i *)(p + i));
        unsigned ends = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(bytes, newline));
        unsigned odd = (unsigned)_mm_movemask_epi8(
            _mm_or_si128(_mm_cmpeq_epi8(bytes, quote), _mm_cmpeq_epi8(bytes, tab)));
        if (ends) {
            /* the bytes before the first newline */
            *quoted = found || (odd & ((ends & (0u - ends)) - 1)) != 0;
            return i + __builtin_ctz(ends);
        }
        found |= odd != 0;
    }
#endif
    for (; i < avail && p[i] != '\n'; i++)
        found |= p[i] == '"' || p[i] == '\t';
    *quoted = found;
    return i;
}

static int next_in_chunk(LineFilter *self, PyObject **out) {
    /* the block stays referenced here until its line is done: its last line clears self->chunk,
     * and the block's producer (a translator: lockcheck.engine._jsonlt) may hold it no longer */
    PyObject *chunk = self->chunk;
    Py_INCREF(chunk);
    const char *base = PyBytes_AS_STRING(chunk);
    Py_ssize_t size = PyBytes_GET_SIZE(chunk);
    const char *data = base + self->pos;
    int quoted;
    Py_ssize_t len, task_len = 0, rest_len = 0;
    if (self->hints != NULL) {
        /* the line as the translator wrote it: its end, task and ` ts=` where it says (checked to be
         * a line of the block; that apply_line would split its bytes there is the translator's word) */
        if (++self->hint_pos * (Py_ssize_t)sizeof(LineHint) > PyBytes_GET_SIZE(self->hints))
            len = -1;
        else {
            const LineHint *hint = (const LineHint *)PyBytes_AS_STRING(self->hints) + self->hint_pos - 1;
            len = hint->len;
            task_len = hint->task_len;
            rest_len = hint->rest_len;
        }
        if (len < 0 || len > size - self->pos || (len < size - self->pos && data[len] != '\n') ||
            task_len < 0 || (task_len > 0 && (task_len >= len || rest_len < 0 || rest_len > len - task_len - 1))) {
            Py_DECREF(chunk);
            PyErr_SetString(PyExc_SystemError, "LineFilter: a block's hints do not match its lines");
            return -1;
        }
        quoted = task_len > 0 ? 0 : memchr(data, '"', (size_t)len) != NULL || memchr(data, '\t', (size_t)len) != NULL;
    } else {
        len = line_scan(data, size - self->pos, &quoted);
    }
    if (len < size - self->pos) {
        self->pos += len + 1;
    } else {
        Py_CLEAR(self->chunk); /* its last line */
        Py_CLEAR(self->hints);
    }
    self->lineno++;
    self->pass_local = 0;
    if (len && data[len - 1] == '\r')
        len--;
    Py_ssize_t n = len;
    if (!self->passthrough && (self->tick < 0 || (self->lineno & self->tick) != 0)) {
        if (task_len > 0) {
            int applied = apply_split(self, NULL, data, n, task_len, rest_len);
            if (applied != 0) {
                Py_DECREF(chunk);
                return applied < 0 ? -1 : 0;
            }
        } else if (blank_line(data, n)) {
            Py_DECREF(chunk);
            return 0; /* a blank line */
        } else if (data[0] != '#' && !quoted) { /* may_apply */
            int applied = apply_line(self, NULL, data, n);
            if (applied != 0) {
                Py_DECREF(chunk);
                return applied < 0 ? -1 : 0;
            }
        }
    }
    *out = ascii_str(data, len);
    Py_DECREF(chunk);
    return *out == NULL ? -1 : 1;
}

static PyObject *LineFilter_next(LineFilter *self) {
    /* back from the Python side, which may have emptied the chain cache */
    if (self->known_gen >= 0 && known_sync(self) < 0)
        return NULL;
    for (;;) {
        if (self->chunk != NULL) {
            PyObject *line = NULL;
            int r = next_in_chunk(self, &line);
            if (r < 0)
                return NULL;
            if (r > 0)
                return numbered(self, line);
            continue;
        }
        PyObject *line = PyIter_Next(self->lines);
        if (line == NULL) {
            /* the end (the overlays flushed: the run's state is the Python side's), or an error */
            if (!PyErr_Occurred() && self->ov_count)
                overlays_flush(self);
            return NULL;
        }
        if (PyBytes_CheckExact(line)) {
            /* a block of whole lines (source.Lines.give_bytes): split here */
            self->chunk = line;
            self->pos = 0;
            continue;
        }
        if (PyTuple_CheckExact(line) && PyTuple_GET_SIZE(line) == 2 && PyBytes_CheckExact(PyTuple_GET_ITEM(line, 0)) &&
            PyBytes_CheckExact(PyTuple_GET_ITEM(line, 1))) {
            /* a block and the split of its lines (the JSON Lines translator's, _lt_hints.h) */
            self->chunk = Py_NewRef(PyTuple_GET_ITEM(line, 0));
            self->hints = Py_NewRef(PyTuple_GET_ITEM(line, 1));
            self->pos = self->hint_pos = 0;
            Py_DECREF(line);
            continue;
        }
        self->lineno++;
        self->pass_local = 0;
        if (!self->passthrough && PyUnicode_Check(line) && PyUnicode_IS_COMPACT_ASCII(line) &&
            (self->tick < 0 || (self->lineno & self->tick) != 0)) {
            const char *data = (const char *)PyUnicode_1BYTE_DATA(line);
            Py_ssize_t n = PyUnicode_GET_LENGTH(line);
            while (n && (data[n - 1] == '\n' || data[n - 1] == '\r'))
                n--;
            if (blank_line(data, n)) {
                Py_DECREF(line);
                continue; /* a blank line */
            }
            if (may_apply(data, n)) {
                int applied = apply_line(self, line, data, n);
                if (applied < 0) {
                    Py_DECREF(line);
                    return NULL;
                }
                if (applied) {
                    Py_DECREF(line);
                    continue;
                }
            }
        }
        return numbered(self, line);
    }
}

static PyObject *LineFilter_take(LineFilter *self, PyObject *Py_UNUSED(ignored)) {
    if (self->ov_count && overlays_flush(self) < 0)
        return NULL;
    PyObject *counts = Py_BuildValue("(LL)", self->events, self->hits);
    self->events = self->hits = 0;
    return counts;
}

/* The counts alone, the overlays left as they are: before an event of a line passed on, whose
 * checker looks at the overlays numbered() flushed for it (its task's, or all of them). */
static PyObject *LineFilter_counts(LineFilter *self, PyObject *Py_UNUSED(ignored)) {
    PyObject *counts = Py_BuildValue("(LL)", self->events, self->hits);
    self->events = self->hits = 0;
    return counts;
}

static PyObject *LineFilter_lines_read(LineFilter *self, PyObject *Py_UNUSED(ignored)) {
    return PyLong_FromLongLong(self->lineno);
}

static PyObject *LineFilter_use_overlay(LineFilter *self, PyObject *flag) {
    int on = PyObject_IsTrue(flag);
    if (on < 0 || (self->ov_count && overlays_flush(self) < 0))
        return NULL;
    self->overlay = on;
    Py_RETURN_NONE;
}

static PyObject *LineFilter_stop(LineFilter *self, PyObject *Py_UNUSED(ignored)) {
    if (self->ov_count && overlays_flush(self) < 0)
        return NULL;
    self->passthrough = 1;
    Py_RETURN_NONE;
}

/* The graph forgot classes (lockdep_unregister_key): a class's node is a new dict when it comes
 * back, so the table's nodes (and their usage kept here) are dropped and looked up again. */
static PyObject *LineFilter_forget_classes(LineFilter *self, PyObject *Py_UNUSED(ignored)) {
    if (self->ov_count && overlays_flush(self) < 0) /* (their entries borrow the table's strs) */
        return NULL;
    if (self->class_size) {
        clear_classes(self);
        if (classes_grow(self) < 0)
            return NULL;
    }
    clear_rest(self->rest_slots, 0); /* (their infos name the classes' nodes) */
    Py_RETURN_NONE;
}

static PyMethodDef LineFilter_methods[] = {
    {"forget_classes", (PyCFunction)LineFilter_forget_classes, METH_NOARGS,
     "Drop the classes looked up so far (the graph removed some: their nodes are new when they return)."},
    {"take", (PyCFunction)LineFilter_take, METH_NOARGS,
     "(events, chain-cache hits) applied since the last call, and reset; every held overlay flushed."},
    {"counts", (PyCFunction)LineFilter_counts, METH_NOARGS,
     "(events, chain-cache hits) applied since the last call, and reset; the held overlays left as they are."},
    {"stop", (PyCFunction)LineFilter_stop, METH_NOARGS, "From now on pass every line on."},
    {"use_overlay", (PyCFunction)LineFilter_use_overlay, METH_O,
     "Whether pushes are kept in C until a line goes to the Python side (default True; False: each a tuple)."},
    {"set_view", (PyCFunction)(void (*)(void))LineFilter_set_view, METH_FASTCALL,
     "views[key] = view, told to the core (the other tasks' views it found stand)."},
    {"drop_view", (PyCFunction)LineFilter_drop_view, METH_O, "views.pop(key, None), told to the core."},
    {"lines_read", (PyCFunction)LineFilter_lines_read, METH_NOARGS,
     "The lines taken so far (every line of a block of bytes split so far): a line number."},
    {NULL}};

static PyTypeObject LineFilterType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "lockcheck.engine._speedups.LineFilter",
    .tp_basicsize = sizeof(LineFilter),
    .tp_dealloc = (destructor)LineFilter_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "The `.lt` lines the fast path applies in C; yields (lineno, line) for the others.",
    .tp_traverse = (traverseproc)LineFilter_traverse,
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = (iternextfunc)LineFilter_next,
    .tp_methods = LineFilter_methods,
    .tp_init = (initproc)LineFilter_init,
    .tp_new = PyType_GenericNew,
};

static struct PyModuleDef speedups_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "lockcheck.engine._speedups",
    .m_doc = "The compiled core of lockcheck's fast path (optional: lockcheck.engine.fast_lt runs without it).",
    .m_size = -1,
};

PyMODINIT_FUNC PyInit__speedups(void) {
    s_chain_key = PyUnicode_InternFromString("chain_key");
    s_cpu = PyUnicode_InternFromString("cpu");
    s_usage = PyUnicode_InternFromString("usage");
    s_add = PyUnicode_InternFromString("add");
    s_lock = PyUnicode_InternFromString("lock");
    s_instance = PyUnicode_InternFromString("instance");
    s_references = PyUnicode_InternFromString("references");
    s_prev_chain_key = PyUnicode_InternFromString("prev_chain_key");
    s_cls = PyUnicode_InternFromString("cls");
    s_irq_context = PyUnicode_InternFromString("irq_context");
    s_hardirqs_enabled = PyUnicode_InternFromString("hardirqs_enabled");
    s_softirqs_enabled = PyUnicode_InternFromString("softirqs_enabled");
    s_hardirq_depth = PyUnicode_InternFromString("hardirq_depth");
    s_softirq_depth = PyUnicode_InternFromString("softirq_depth");
    s_irq_events = PyUnicode_InternFromString("irq_events");
    s_stamp = PyUnicode_InternFromString("stamp");
    s_name = PyUnicode_InternFromString("name");
    s_usage_need = PyUnicode_InternFromString("usage_need");
    s_key = PyUnicode_InternFromString("key");
    s_check = PyUnicode_InternFromString("check");
    s_read = PyUnicode_InternFromString("read");
    s_contention_checked = PyUnicode_InternFromString("contention_checked");
    s_generation = PyUnicode_InternFromString("generation");
    if (!s_chain_key || !s_cpu || !s_usage || !s_add || !s_lock || !s_instance || !s_references ||
        !s_prev_chain_key || !s_cls || !s_irq_context || !s_hardirqs_enabled || !s_softirqs_enabled ||
        !s_hardirq_depth || !s_softirq_depth || !s_irq_events || !s_stamp || !s_name || !s_usage_need || !s_key ||
        !s_check || !s_read || !s_contention_checked || !s_generation)
        return NULL;
    for (int i = 0; i < 4; i++)
        if ((small_ints[i] = PyLong_FromLong(i)) == NULL)
            return NULL;
    if (grammar_init() < 0)
        return NULL;
    int hash_ok = rules_check_tuple_hash();
    if (hash_ok < 0)
        return NULL;
    tuple_hash_ok = hash_ok;
    if (check_probe() < 0)
        return NULL;
    int lanes = check_lanes();
    if (lanes < 0)
        return NULL;
    lanes_ok = lanes;
    if (PyType_Ready(&LineFilterType) < 0)
        return NULL;
    PyObject *module = PyModule_Create(&speedups_module);
    if (module == NULL)
        return NULL;
    /* whether chain keys are hashed and looked up through the core's own int (probe_of) */
    /* whether a push onto the held overlay hashes its chain key from kept hashes (hash3_lanes) */
    if (PyModule_AddIntConstant(module, "HASH_LANES", lanes_ok) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    if (PyModule_AddIntConstant(module, "PROBE_INTS", probe_ok) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    Py_INCREF(&LineFilterType);
    if (PyModule_AddObject(module, "LineFilter", (PyObject *)&LineFilterType) < 0) {
        Py_DECREF(&LineFilterType);
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
