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
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include "_rules.h"
#include "_cshared.h"
#include "_ftsplit.h"
#include "_capcache.h"

/* the body tuple (fast_capture: kind, op, instance, name, trylock, read, event) and its kinds */
enum { B_KIND, B_OP, B_INSTANCE, B_NAME, B_TRYLOCK, B_READ, B_EVENT };
enum { K_SKIP = 0, K_SKIP_CONTENTION = 1, K_LOCK = 2 };
/* a head (task, display, cpu, cpu text) and a flags entry (flags, state, code) */
enum { H_TASK, H_DISPLAY, H_CPU, H_CPU_TEXT };
enum { F_FLAGS, F_STATE, F_CODE };

/* slots read at their offsets */
enum { V_TASK, V_HELD, V_IRQ_CONTEXT, V_HARDIRQS_OFF, V_USAGE_NEED, V_RECENT, V_A_HELD, V_N };
static const char *view_names[V_N] = {"task", "held", "irq_context", "hardirqs_off", "usage_need", "recent",
                                      "a_held"};
enum { HL_CLS, HL_LOCK, HL_INSTANCE, HL_SUBCLASS, HL_READ, HL_TRYLOCK, HL_CHECK, HL_NEST, HL_IRQ_CONTEXT,
       HL_HARDIRQS_OFF, HL_REFERENCES, HL_PREV_CHAIN_KEY, HL_EVENT, HL_SOURCE, HL_N };
static const char *held_names_[HL_N] = {"cls", "lock", "instance", "subclass", "read", "trylock", "check", "nest",
                                        "irq_context", "hardirqs_off", "references", "prev_chain_key", "_event",
                                        "_source"};
enum { T_NAME, T_CHAIN_KEY, T_CPU, T_PINS, T_HARDIRQS_ENABLED, T_SOFTIRQS_ENABLED, T_HARDIRQ_DEPTH, T_SOFTIRQ_DEPTH,
       T_USAGE_NEED, T_IRQ_EVENTS, T_IRQ_KNOWN, T_HARDIRQ_THREADED, T_HELD, T_ACQUIRED_EVER, T_N };
static const char *task_names[T_N] = {"name", "chain_key", "cpu", "pins", "hardirqs_enabled", "softirqs_enabled",
                                      "hardirq_depth", "softirq_depth", "usage_need", "irq_events", "irq_known",
                                      "hardirq_threaded", "held", "acquired_ever"};
/* the irq-state ops (events.py), in this order in `irq` */
enum { OP_IRQS_OFF, OP_IRQS_ON, OP_SOFTIRQS_OFF, OP_SOFTIRQS_ON, OP_HARDIRQ_ENTER, OP_SOFTIRQ_ENTER, OP_HARDIRQ_EXIT,
       OP_SOFTIRQ_EXIT, OP_N };

enum { R_LOCKS, R_LIMIT, R_LAST, R_N };
enum { S_STATE, S_NONE, S_RULE };
static const char *recent_names[R_N] = {"_locks", "_limit", "last"};

#define SLOT(o, off) (*(PyObject **)((char *)(o) + (off)))

static PyObject *s_preempt_rt, *s_stopped, *s_stamp_key, *s_probe_known, *s_contention, *s_capture, *s_trusted, *s_untrusted_from, *s_fast_depth,
    *s_events, *s_chain_hits, *s_add, *s_last, *s_usage, *s_irq_context, *s_state, *s_none, *s_rule, *s_check0,
    *s_rule_prefix, *s_empty;
static PyObject *small_ints[2];

typedef struct {
    PyObject_HEAD
    PyObject *lines;        /* the iterator of lines */
    PyObject *heads, *flag_cache, *bodies, *views;
    PyObject *shapes, *lock_events;  /* ftrace_scan._SHAPES and ftrace.LOCK_EVENTS, or NULL */
    PyObject *shape_body;   /* the body made from a shape for the current line (owned), or NULL */
    /* the reader */
    PyObject *reader, *read_policy, *held_names, *contexts, *comms, *pending, *by_map, *skipped;
    /* the checker */
    PyObject *checker, *cstats, *nodes, *chain_cache, *initial, *tasks;
    Py_ssize_t view_limit;  /* fast_capture._VIEW_LIMIT */
    /* the annotator (`_Annotated`), or all NULL */
    PyObject *annotator, *held_of, *actx, *acpu, *sources, *tries, *changes, *only_unchecked, *ruled_of,
        *suffixes, *index;
    int until_report;
    /* the deferred event: make(read_back_fn, args...) -> the HeldLock's _source; the file */
    PyObject *partial, *event_fn, *file;
    PyObject *acquire_op, *release_op, *write_mode;
    PyTypeObject *view_type, *held_type, *task_type, *recent_type;
    Py_ssize_t view_off[V_N], held_off[HL_N], task_off[T_N], recent_off[R_N];
    PyObject *move_to_end;  /* OrderedDict.move_to_end */
    /* irq-context changes: ftrace_context.context_transition, fast_stages.context_hit, the _Annotated or None */
    PyObject *transition, *context_hit, *annotated;
    /* irq-state changes applied here (fast_held.irq_change): the ops (rules.IRQ_TRANSITION_OPS), Evidence,
     * rules.USAGE_NEEDS, rules.USED_ONLY, annotations.context_after, READ_MASK; `transitions`: what
     * context_transition gave for (old, new) */
    PyObject *irq_ops[OP_N], *evidence, *usage_needs, *used_only, *context_after, *transitions, *irq;
    long read_shift;
    /* rules.task_irq_context and its answers by (hardirq depth, softirq depth) below 8 (make_view) */
    PyObject *irq_context_fn, *irq_context_of[64];
    int preempt_rt, stopped;
    /* the rule tables */
    unsigned long validates_checked, validates_unchecked, separate;
    unsigned long irq_rule[RULES_IRQ_N]; /* rules.irq_transition_table(): irq_here's transitions */
    int usage_index[12];    /* [check*6 + read*2 + trylock]: the index into the view's needs, or -1 */
    long usage_const[12];   /* the mask when the index is -1 */
    int hash_ok;
    long tick;
    PyObject *chunk;        /* bytes: a block of lines being split (source.Lines.give_bytes), or NULL */
    Py_ssize_t pos;         /* where its next line starts */
    PyObject *held_chunk;   /* the block whose last line is the current line */
    CapCache cache;         /* line pieces by their bytes, key pairs, tasks (_capcache.h) */
    TaskSlot *cur;          /* the slot of the task of the line being taken (take_line), or NULL */
    /* the annotator's counts (`tries[file]`, `sources`) not added yet */
    long long tries_delta[2], sources_delta[3];
    int sources_order[3], sources_seen;  /* the order the three sources came in since (a Counter keeps it) */
    PyObject *unchecked;    /* dict: class -> [origin, count] of `changes[("check0", class, "rule " + origin)]` to add */
    /* pure functions' answers kept: `read_policy` (when it is ftrace_context.read_mode) by class, and
     * annotations.context_after by ctx * 8 + op */
    PyObject *read_memo, *ctx_memo;
    int read_pure;
    /* read on resume */
    int probe_known, contention, a_capture, a_trusted;
    PyObject *untrusted_from;
    Py_ssize_t fast_depth;
    long long ev_now, hits_now;
    /* counts for the reader's statistics (fast_capture adds them) */
    long long context_events, lineno, events, hardirq_lines, softirq_lines, resolved, acquisitions, contention_lines, taken;
} CaptureFilter;

/* a slot's value (borrowed), or NULL with AttributeError when unset */
static inline PyObject *slot_get(PyObject *o, Py_ssize_t off, const char *name) {
    PyObject *v = SLOT(o, off);
    if (v == NULL)
        PyErr_Format(PyExc_AttributeError, "%s", name);
    return v;
}

static inline void slot_set(PyObject *o, Py_ssize_t off, PyObject *value) {
    Py_INCREF(value);
    Py_XSETREF(SLOT(o, off), value);
}

static int CaptureFilter_clear(CaptureFilter *self) {
    Py_CLEAR(self->lines); Py_CLEAR(self->heads); Py_CLEAR(self->flag_cache);
    Py_CLEAR(self->bodies); Py_CLEAR(self->views); Py_CLEAR(self->shapes); Py_CLEAR(self->lock_events);
    Py_CLEAR(self->shape_body); Py_CLEAR(self->reader); Py_CLEAR(self->read_policy);
    Py_CLEAR(self->held_names); Py_CLEAR(self->contexts); Py_CLEAR(self->comms); Py_CLEAR(self->pending);
    Py_CLEAR(self->by_map); Py_CLEAR(self->skipped); Py_CLEAR(self->checker); Py_CLEAR(self->cstats);
    Py_CLEAR(self->nodes); Py_CLEAR(self->chain_cache); Py_CLEAR(self->initial); Py_CLEAR(self->annotator);
    Py_CLEAR(self->held_of); Py_CLEAR(self->actx); Py_CLEAR(self->acpu); Py_CLEAR(self->sources);
    Py_CLEAR(self->tries); Py_CLEAR(self->changes); Py_CLEAR(self->only_unchecked); Py_CLEAR(self->ruled_of);
    Py_CLEAR(self->suffixes); Py_CLEAR(self->index); Py_CLEAR(self->partial); Py_CLEAR(self->event_fn);
    Py_CLEAR(self->file); Py_CLEAR(self->acquire_op); Py_CLEAR(self->release_op); Py_CLEAR(self->write_mode);
    Py_CLEAR(self->view_type); Py_CLEAR(self->held_type); Py_CLEAR(self->task_type);
    capcache_clear(&self->cache);
    Py_CLEAR(self->untrusted_from); Py_CLEAR(self->recent_type); Py_CLEAR(self->move_to_end);
    for (int i = 0; i < OP_N; i++)
        Py_CLEAR(self->irq_ops[i]);
    Py_CLEAR(self->evidence); Py_CLEAR(self->usage_needs); Py_CLEAR(self->used_only); Py_CLEAR(self->context_after);
    Py_CLEAR(self->transitions); Py_CLEAR(self->irq); Py_CLEAR(self->unchecked); Py_CLEAR(self->read_memo);
    Py_CLEAR(self->ctx_memo); Py_CLEAR(self->chunk); Py_CLEAR(self->held_chunk);
    Py_CLEAR(self->tasks); Py_CLEAR(self->transition); Py_CLEAR(self->context_hit); Py_CLEAR(self->annotated);
    Py_CLEAR(self->irq_context_fn);
    for (int i = 0; i < 64; i++)
        Py_CLEAR(self->irq_context_of[i]);
    return 0;
}

static void CaptureFilter_dealloc(CaptureFilter *self) {
    PyObject_GC_UnTrack(self);
    CaptureFilter_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int CaptureFilter_traverse(CaptureFilter *self, visitproc visit, void *arg) {
    /* every object the filter holds (a cycle through any of them is then the collector's to break) */
    Py_VISIT(self->lines); Py_VISIT(self->heads); Py_VISIT(self->flag_cache); Py_VISIT(self->bodies);
    Py_VISIT(self->shapes); Py_VISIT(self->lock_events); Py_VISIT(self->shape_body);
    Py_VISIT(self->views); Py_VISIT(self->reader); Py_VISIT(self->read_policy); Py_VISIT(self->held_names);
    Py_VISIT(self->contexts); Py_VISIT(self->comms); Py_VISIT(self->pending); Py_VISIT(self->by_map);
    Py_VISIT(self->skipped); Py_VISIT(self->checker); Py_VISIT(self->cstats); Py_VISIT(self->nodes);
    Py_VISIT(self->chain_cache); Py_VISIT(self->initial); Py_VISIT(self->annotator); Py_VISIT(self->held_of);
    Py_VISIT(self->actx); Py_VISIT(self->acpu); Py_VISIT(self->sources); Py_VISIT(self->tries);
    Py_VISIT(self->changes); Py_VISIT(self->only_unchecked); Py_VISIT(self->ruled_of);
    Py_VISIT(self->suffixes); Py_VISIT(self->index); Py_VISIT(self->partial); Py_VISIT(self->event_fn);
    Py_VISIT(self->file); Py_VISIT(self->acquire_op); Py_VISIT(self->release_op); Py_VISIT(self->write_mode);
    Py_VISIT(self->view_type); Py_VISIT(self->held_type); Py_VISIT(self->task_type);
    Py_VISIT(self->untrusted_from); Py_VISIT(self->recent_type); Py_VISIT(self->move_to_end);
    Py_VISIT(self->evidence); Py_VISIT(self->usage_needs); Py_VISIT(self->used_only);
    Py_VISIT(self->context_after); Py_VISIT(self->transitions); Py_VISIT(self->irq);
    Py_VISIT(self->unchecked); Py_VISIT(self->read_memo); Py_VISIT(self->ctx_memo); Py_VISIT(self->chunk);
    Py_VISIT(self->held_chunk); Py_VISIT(self->tasks); Py_VISIT(self->transition);
    Py_VISIT(self->context_hit); Py_VISIT(self->annotated); Py_VISIT(self->irq_context_fn);
    for (int i = 0; i < 64; i++)
        Py_VISIT(self->irq_context_of[i]);
    for (int i = 0; i < OP_N; i++)
        Py_VISIT(self->irq_ops[i]);
    return capcache_traverse(&self->cache, visit, arg);
}

/* attribute `name` of `obj` as a new reference stored in *out */
static int get_attr(PyObject *obj, const char *name, PyObject **out) {
    PyObject *v = PyObject_GetAttrString(obj, name);
    if (v == NULL)
        return -1;
    Py_XSETREF(*out, v);
    return 0;
}

static int CaptureFilter_init(CaptureFilter *self, PyObject *args, PyObject *kwds) {
    PyObject *lines, *caches, *reader, *stats, *checker, *annotated, *make, *rule_tables, *irq_args;
    long tick;
    if (!PyArg_ParseTuple(args, "OO!OOOOO!O!lO!", &lines, &PyTuple_Type, &caches, &reader, &stats, &checker,
                          &annotated, &PyTuple_Type, &make, &PyTuple_Type, &rule_tables, &tick, &PyTuple_Type, &irq_args))
        return -1;
    /* caches: (heads, flag_cache, bodies, views[, shapes, lock_events]) */
    PyObject *shapes = NULL, *lock_events = NULL;
    if (!PyArg_ParseTuple(caches, "O!O!O!O!|O!O!", &PyDict_Type, &self->heads, &PyDict_Type, &self->flag_cache,
                          &PyDict_Type, &self->bodies, &PyDict_Type, &self->views, &PyDict_Type, &shapes,
                          &PyDict_Type, &lock_events))
        return -1;
    Py_INCREF(self->heads); Py_INCREF(self->flag_cache); Py_INCREF(self->bodies); Py_INCREF(self->views);
    if (shapes != NULL && lock_events != NULL) {
        self->shapes = Py_NewRef(shapes);
        self->lock_events = Py_NewRef(lock_events);
    }
    /* make: (partial, _event, file, ACQUIRE, RELEASE, WRITE, _View, HeldLock, TaskState, RecentLocks,
     * context_transition, context_hit, _VIEW_LIMIT) */
    PyObject *view_type, *held_type, *task_type, *recent_type;
    if (!PyArg_ParseTuple(make, "OOOOOOO!O!O!O!OOn", &self->partial, &self->event_fn, &self->file, &self->acquire_op,
                          &self->release_op, &self->write_mode, &PyType_Type, &view_type, &PyType_Type, &held_type,
                          &PyType_Type, &task_type, &PyType_Type, &recent_type, &self->transition, &self->context_hit,
                          &self->view_limit))
        return -1;
    Py_INCREF(recent_type);
    self->recent_type = (PyTypeObject *)recent_type;
    Py_INCREF(self->transition);
    Py_INCREF(self->context_hit);
    Py_INCREF(annotated);
    self->annotated = annotated;
    if (slot_offsets(self->recent_type, recent_names, self->recent_off, R_N) < 0)
        return -1;
    self->move_to_end = PyObject_GetAttrString((PyObject *)&PyODict_Type, "move_to_end");
    if (self->move_to_end == NULL)
        return -1;
    Py_INCREF(self->partial); Py_INCREF(self->event_fn); Py_INCREF(self->file); Py_INCREF(self->acquire_op);
    Py_INCREF(self->release_op); Py_INCREF(self->write_mode);
    Py_INCREF(view_type); Py_INCREF(held_type); Py_INCREF(task_type);
    self->view_type = (PyTypeObject *)view_type;
    self->held_type = (PyTypeObject *)held_type;
    self->task_type = (PyTypeObject *)task_type;
    if (slot_offsets(self->view_type, view_names, self->view_off, V_N) < 0 ||
        slot_offsets(self->held_type, held_names_, self->held_off, HL_N) < 0 ||
        slot_offsets(self->task_type, task_names, self->task_off, T_N) < 0)
        return -1;
    /* irq: (ops, Evidence, USAGE_NEEDS, USED_ONLY, context_after, read shift, read policy pure) */
    PyObject *irq_ops;
    if (!PyArg_ParseTuple(irq_args, "O!OO!O!Olp", &PyTuple_Type, &irq_ops, &self->evidence, &PyDict_Type,
                          &self->usage_needs, &PyList_Type, &self->used_only, &self->context_after,
                          &self->read_shift, &self->read_pure))
        return -1;
    if (PyTuple_GET_SIZE(irq_ops) != OP_N) {
        PyErr_SetString(PyExc_ValueError, "8 irq ops");
        return -1;
    }
    for (int i = 0; i < OP_N; i++) {
        self->irq_ops[i] = PyTuple_GET_ITEM(irq_ops, i);
        Py_INCREF(self->irq_ops[i]);
    }
    Py_INCREF(self->evidence); Py_INCREF(self->usage_needs); Py_INCREF(self->used_only); Py_INCREF(self->context_after);
    self->transitions = PyDict_New();
    self->unchecked = PyDict_New();
    self->read_memo = PyDict_New();
    self->ctx_memo = PyDict_New();
    if (self->unchecked == NULL || self->read_memo == NULL || self->ctx_memo == NULL)
        return -1;
    if (self->transitions == NULL || get_attr(checker, "irq", &self->irq) < 0)
        return -1;
    /* rules: (validates checked, validates unchecked, separate, usage: 12 x (index, mask), irq transitions) */
    PyObject *usage, *irq_rule;
    if (!PyArg_ParseTuple(rule_tables, "kkkO!O", &self->validates_checked, &self->validates_unchecked,
                          &self->separate, &PyTuple_Type, &usage, &irq_rule) ||
        rules_irq_parse(irq_rule, self->irq_rule) < 0)
        return -1;
    if (PyTuple_GET_SIZE(usage) != 12) {
        PyErr_SetString(PyExc_ValueError, "12 usage entries");
        return -1;
    }
    for (int i = 0; i < 12; i++) {
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(usage, i), "il", &self->usage_index[i], &self->usage_const[i]))
            return -1;
    }
    self->hash_ok = rules_check_tuple_hash();
    if (self->hash_ok < 0)
        return -1;
    self->tick = tick;
    if (capcache_init(&self->cache) < 0)
        return -1;
    self->lines = PyObject_GetIter(lines);
    if (self->lines == NULL)
        return -1;
    Py_INCREF(reader);
    self->reader = reader;
    if (get_attr(reader, "read_policy", &self->read_policy) < 0 || get_attr(reader, "held", &self->held_names) < 0 ||
        get_attr(reader, "context", &self->contexts) < 0 || get_attr(reader, "comms", &self->comms) < 0 ||
        get_attr(reader, "pending", &self->pending) < 0 || get_attr(reader, "by_map", &self->by_map) < 0 ||
        get_attr(stats, "skipped", &self->skipped) < 0)
        return -1;
    if (!PyDict_Check(self->held_names) || !PyDict_Check(self->contexts) || !PyDict_Check(self->comms) ||
        !PyDict_Check(self->pending) || !PyDict_Check(self->skipped)) {
        PyErr_SetString(PyExc_TypeError, "the reader's state is no dicts");
        return -1;
    }
    Py_INCREF(checker);
    self->checker = checker;
    if (get_attr(checker, "stats", &self->cstats) < 0 || get_attr(checker, "_nodes", &self->nodes) < 0 ||
        get_attr(checker, "chain_cache", &self->chain_cache) < 0 || get_attr(checker, "tasks", &self->tasks) < 0)
        return -1;
    if (!PyDict_Check(self->tasks)) {
        PyErr_SetString(PyExc_TypeError, "the checker's tasks are no dict");
        return -1;
    }
    if (!PyDict_Check(self->nodes) || !PyAnySet_Check(self->chain_cache)) {
        PyErr_SetString(PyExc_TypeError, "the checker's state is no dict and set");
        return -1;
    }
    self->initial = PyLong_FromLong(-1);
    PyObject *rules_mod = PyImport_ImportModule("lockcheck.lockdep.rules");
    if (rules_mod == NULL)
        return -1;
    int r = get_attr(rules_mod, "INITIAL_CHAIN_KEY", &self->initial);
    if (r == 0)
        r = get_attr(rules_mod, "task_irq_context", &self->irq_context_fn);
    Py_DECREF(rules_mod);
    if (r < 0)
        return -1;
    if (annotated != Py_None) {
        PyObject *until_report = NULL;
        if (get_attr(annotated, "annotator", &self->annotator) < 0 || get_attr(annotated, "held_of", &self->held_of) < 0 ||
            get_attr(annotated, "ctx", &self->actx) < 0 || get_attr(annotated, "cpu", &self->acpu) < 0 ||
            get_attr(annotated, "sources", &self->sources) < 0 || get_attr(annotated, "tries", &self->tries) < 0 ||
            get_attr(annotated, "changes", &self->changes) < 0 ||
            get_attr(annotated, "only_unchecked", &self->only_unchecked) < 0 ||
            get_attr(annotated, "ruled_of", &self->ruled_of) < 0 || get_attr(annotated, "suffixes", &self->suffixes) < 0 ||
            get_attr(annotated, "index", &self->index) < 0 || get_attr(annotated, "until_report", &until_report) < 0)
            return -1;
        self->until_report = PyObject_IsTrue(until_report);
        Py_DECREF(until_report);
        if (!PyDict_Check(self->held_of) || !PyDict_Check(self->actx) || !PyDict_Check(self->acpu) ||
            !PyDict_Check(self->sources) || !PyDict_Check(self->tries) || !PyDict_Check(self->changes) ||
            !PyDict_Check(self->only_unchecked) || !PyDict_Check(self->ruled_of) ||
            (self->suffixes != Py_None && !PyAnySet_Check(self->suffixes))) {
            PyErr_SetString(PyExc_TypeError, "the annotator's state is no dicts");
            return -1;
        }
    }
    return 0;
}

/* ---- an acquisition's event, read back only if asked ------------------------------------------
 *
 * `Later(fn, *args)()` is `fn(*args)`: what `functools.partial(_event, ...)` is to the Python loop's
 * HeldLock, the HeldLock's `_source` (`HeldLock.event` calls it once, then drops it), made here
 * for every acquisition the filter pushes.  Its fields are str, int, float, bool, None and the
 * function: nothing that can lead back to it, so it is left out of the collector's sight. */

#define LATER_N 12

typedef struct {
    PyObject_HEAD
    PyObject *items[LATER_N]; /* fn, then its arguments */
} Later;

static void Later_dealloc(Later *self) {
    for (int i = 0; i < LATER_N; i++)
        Py_XDECREF(self->items[i]);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *Later_call(Later *self, PyObject *args, PyObject *kwds) {
    if ((args != NULL && PyTuple_GET_SIZE(args)) || (kwds != NULL && PyDict_GET_SIZE(kwds))) {
        PyErr_SetString(PyExc_TypeError, "Later() takes no arguments");
        return NULL;
    }
    return PyObject_Vectorcall(self->items[0], self->items + 1, LATER_N - 1, NULL);
}

static PyTypeObject LaterType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "lockcheck.engine._capturecore.Later",
    .tp_basicsize = sizeof(Later),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "an acquisition's event, made when called (fn(*args))",
    .tp_dealloc = (destructor)Later_dealloc,
    .tp_call = (ternaryfunc)Later_call,
};

static PyObject *later(PyObject **items) {
    Later *self = PyObject_New(Later, &LaterType);
    if (self == NULL)
        return NULL;
    for (int i = 0; i < LATER_N; i++) {
        Py_INCREF(items[i]);
        self->items[i] = items[i];
    }
    return (PyObject *)self;
}

/* ---- what Python changes between two lines passed on ------------------------------------- */

static int attr_true(PyObject *obj, PyObject *name, int *out) {
    PyObject *v = PyObject_GetAttr(obj, name);
    if (v == NULL)
        return -1;
    *out = PyObject_IsTrue(v);
    Py_DECREF(v);
    return *out < 0 ? -1 : 0;
}

static int attr_longlong(PyObject *obj, PyObject *name, long long *out) {
    PyObject *v = PyObject_GetAttr(obj, name);
    if (v == NULL)
        return -1;
    *out = PyLong_AsLongLong(v);
    Py_DECREF(v);
    return (*out == -1 && PyErr_Occurred()) ? -1 : 0;
}

static int resume(CaptureFilter *self) {
    long long depth;
    capcache_forget(&self->cache); /* (the Python loop ran: what the task slots remember may be out of date) */
    if (attr_true(self->reader, s_probe_known, &self->probe_known) < 0 ||
        attr_true(self->reader, s_contention, &self->contention) < 0 ||
        attr_longlong(self->checker, s_fast_depth, &depth) < 0 ||
        attr_longlong(self->cstats, s_events, &self->ev_now) < 0 ||
        attr_longlong(self->cstats, s_chain_hits, &self->hits_now) < 0)
        return -1;
    self->fast_depth = (Py_ssize_t)depth;
    if (attr_true(self->irq, s_preempt_rt, &self->preempt_rt) < 0 || attr_true(self->checker, s_stopped, &self->stopped) < 0)
        return -1;
    if (self->annotator != NULL) {
        if (attr_true(self->annotator, s_capture, &self->a_capture) < 0 ||
            attr_true(self->annotator, s_trusted, &self->a_trusted) < 0)
            return -1;
        PyObject *untrusted = PyObject_GetAttr(self->annotator, s_untrusted_from);
        if (untrusted == NULL)
            return -1;
        Py_XSETREF(self->untrusted_from, untrusted);
    }
    return 0;
}

static int set_longlong(PyObject *obj, PyObject *name, long long value) {
    PyObject *v = PyLong_FromLongLong(value);
    if (v == NULL)
        return -1;
    int r = PyObject_SetAttr(obj, name, v);
    Py_DECREF(v);
    return r;
}

static int count_add(PyObject *d, PyObject *key, long long n);
static int list_add(PyObject *list, Py_ssize_t i, long delta);
static int flush_annotator(CaptureFilter *self);

/* the checker's and the annotator's counts kept here, written back (keeping an error that is set) */
static int suspend(CaptureFilter *self) {
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    int r = set_longlong(self->cstats, s_events, self->ev_now);
    if (r == 0)
        r = set_longlong(self->cstats, s_chain_hits, self->hits_now);
    if (r == 0)
        r = flush_annotator(self);
    if (type != NULL) {
        if (r < 0)
            PyErr_Clear();
        PyErr_Restore(type, value, tb);
        return -1;
    }
    return r;
}

/* ---- helpers ----------------------------------------------------------------------------- */

/* d[key] += n, as Python does it (a Counter's missing key is 0) */
static int count_add(PyObject *d, PyObject *key, long long n) {
    PyObject *old = PyDict_GetItemWithError(d, key);
    if (old == NULL) {
        if (PyErr_Occurred())
            return -1;
        old = PyObject_GetItem(d, key);
        if (old == NULL)
            return -1;
    } else {
        Py_INCREF(old);
    }
    PyObject *delta = PyLong_FromLongLong(n);
    PyObject *sum = delta ? PyNumber_Add(old, delta) : NULL;
    Py_DECREF(old);
    Py_XDECREF(delta);
    if (sum == NULL)
        return -1;
    int r = PyObject_SetItem(d, key, sum);
    Py_DECREF(sum);
    return r;
}

/* The annotator's counts of the acquisitions applied since the last time, added to its own:
 * `tries[file]` (acquisitions, trylocks) and `sources` (by what decided them). */
static int flush_annotator(CaptureFilter *self) {
    if (self->tries_delta[0]) {
        PyObject *counts = PyDict_GetItemWithError(self->tries, self->file);
        if (counts == NULL) {
            if (PyErr_Occurred())
                return -1;
            counts = Py_BuildValue("[ii]", 0, 0);
            if (counts == NULL || PyDict_SetItem(self->tries, self->file, counts) < 0) {
                Py_XDECREF(counts);
                return -1;
            }
            Py_DECREF(counts);
        }
        if (!PyList_CheckExact(counts) || PyList_GET_SIZE(counts) < 2) {
            PyErr_SetString(PyExc_TypeError, "tries: no list");
            return -1;
        }
        if (list_add(counts, 0, (long)self->tries_delta[0]) < 0 || list_add(counts, 1, (long)self->tries_delta[1]) < 0)
            return -1;
        self->tries_delta[0] = self->tries_delta[1] = 0;
    }
    if (PyDict_GET_SIZE(self->unchecked)) {
        Py_ssize_t pos = 0;
        PyObject *name, *counted;
        while (PyDict_Next(self->unchecked, &pos, &name, &counted)) {
            PyObject *why = PyUnicode_Concat(s_rule_prefix, PyList_GET_ITEM(counted, 0));
            PyObject *key = why ? PyTuple_Pack(3, s_check0, name, why) : NULL;
            Py_XDECREF(why);
            long long n = PyLong_AsLongLong(PyList_GET_ITEM(counted, 1));
            int r = key == NULL || (n == -1 && PyErr_Occurred()) ? -1 : count_add(self->changes, key, n);
            Py_XDECREF(key);
            if (r < 0)
                return -1;
        }
        PyDict_Clear(self->unchecked);
    }
    PyObject *keys[3] = {s_state, s_none, s_rule};
    for (int j = 0; j < self->sources_seen; j++) {
        int i = self->sources_order[j];
        if (count_add(self->sources, keys[i], self->sources_delta[i]) < 0)
            return -1;
        self->sources_delta[i] = 0;
    }
    self->sources_seen = 0;
    return 0;
}

/* list[i] += delta for a list of ints */
static int list_add(PyObject *list, Py_ssize_t i, long delta) {
    PyObject *old = PyList_GET_ITEM(list, i);
    long v = PyLong_AsLong(old);
    if (v == -1 && PyErr_Occurred())
        return -1;
    PyObject *nv = PyLong_FromLong(v + delta);
    if (nv == NULL)
        return -1;
    PyList_SET_ITEM(list, i, nv);
    Py_DECREF(old);
    return 0;
}

/* `del list[-1]` of a list that is not empty (its allocation kept: it grows again soon) */
static inline void list_drop_last(PyObject *list) {
    Py_ssize_t n = PyList_GET_SIZE(list);
    PyObject *last = PyList_GET_ITEM(list, n - 1);
    Py_SET_SIZE(list, n - 1);
    Py_DECREF(last);
}

static inline int is_empty_str(PyObject *s) {
    return PyUnicode_Check(s) && PyUnicode_GET_LENGTH(s) == 0;
}

static inline int eq(PyObject *a, PyObject *b) {
    if (a == b)
        return 1;
    if (PyUnicode_CheckExact(a) && PyUnicode_CheckExact(b))
        return same_str(a, b); /* (str == str, without the rich comparison's dispatch) */
    return PyObject_RichCompareBool(a, b, Py_EQ);
}

/* a small int's value (contexts, modes, states), or -2 when it is none */
static inline long small_long(PyObject *o) {
    if (!PyLong_CheckExact(o))
        return -2;
    int overflow;
    long v = PyLong_AsLongAndOverflow(o, &overflow);
    if (overflow || (v == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return -2;
    }
    return v;
}

/* ---- the annotator's `decide` (fast_stages._Annotated.decide) --------------------------------- */

typedef struct {
    int check;
    PyObject *origin;  /* borrowed, or NULL */
    int use_state;
    PyObject *ctx;     /* borrowed */
} Verdict;

/* 1 decided (*v set), 0 the Python loop's, -1 error */
static int decide(CaptureFilter *self, PyObject *view, PyObject *task, PyObject *name, PyObject *mode, int trylock,
                  Verdict *v) {
    if (!self->a_capture)
        return 0;
    int trusted = self->a_trusted;
    if (trusted && self->until_report)
        return 0;
    ClassSlot *cs = capcache_class(&self->cache, name);
    if (cs == NULL && PyErr_Occurred())
        return -1;
    PyObject *ruled = capcache_get(cs, CS_RULED, self->ruled_of, name);
    if (ruled == NULL)
        return PyErr_Occurred() ? -1 : 0;
    int check = 1;
    v->origin = NULL;
    int is_ruled = PyObject_IsTrue(ruled);
    if (is_ruled < 0)
        return -1;
    if (is_ruled) {
        PyObject *origin = capcache_get(cs, CS_ORIGIN, self->only_unchecked, name);
        if (origin == NULL)
            return PyErr_Occurred() ? -1 : 0; /* not known yet: Python works it out */
        if (!PyUnicode_Check(origin) || PyUnicode_GET_LENGTH(origin) == 0)
            return 0;
        v->origin = origin;
        check = 0;
    }
    PyObject *a_held = SLOT(view, self->view_off[V_A_HELD]);
    if (a_held == NULL)
        return 0;
    if (a_held != Py_None && !PyList_CheckExact(a_held))
        return 0;
    PyObject *ctx;
    TaskSlot *ts = self->cur;
    if (ts != NULL && ts->actx_known) {
        ctx = ts->actx;
    } else {
        ctx = PyDict_GetItemWithError(self->actx, task);
        if (ctx == NULL && PyErr_Occurred())
            return -1;
        if (ts != NULL) {
            ts->actx = Py_XNewRef(ctx);
            ts->actx_known = 1;
        }
    }
    if (ctx == NULL)
        ctx = small_ints[0];
    int use_state = self->index != Py_None && trusted;
    Py_ssize_t n = a_held == Py_None ? 0 : PyList_GET_SIZE(a_held);
    if (n && (check || !use_state)) {
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *entry = PyList_GET_ITEM(a_held, i);
            if (!PyList_CheckExact(entry) || PyList_GET_SIZE(entry) < 5)
                return 0;
            int same = eq(PyList_GET_ITEM(entry, 0), name);
            if (same != 0)
                return same < 0 ? -1 : 0;
        }
    }
    if (use_state) {
        if (check && !trylock) {
            Py_ssize_t i = n;
            while (i) {
                int same = eq(PyList_GET_ITEM(PyList_GET_ITEM(a_held, i - 1), 3), ctx);
                if (same < 0)
                    return -1;
                if (!same)
                    break;
                i--;
            }
            if (self->suffixes == Py_None)
                return 0;
            if (!PyAnySet_Check(self->suffixes))
                return 0;
            int known = capcache_suffix_known(&self->cache, self->suffixes, a_held, i, n, name);
            if (known <= 0)
                return known;
        }
    } else {
        if (self->index != Py_None) {
            int untrusted = PySequence_Contains(self->untrusted_from, self->file);
            if (untrusted <= 0)
                return untrusted;
        }
        int read = PyObject_IsTrue(mode);
        if (read != 0)
            return read < 0 ? -1 : 0; /* a read mode: Python's (the annotator's doubts) */
    }
    v->check = check;
    v->use_state = use_state;
    v->ctx = ctx;
    return 1;
}

/* the annotator's `_acquire` for a verdict of `decide` (fast_stages._Annotated.acquire) */
static int annotate_acquire(CaptureFilter *self, PyObject *view, PyObject *task, PyObject *name, PyObject *instance,
                            PyObject *mode, int trylock, PyObject *cpu, const Verdict *v) {
    if (cpu != Py_None) {
        TaskSlot *ts = self->cur;
        if (ts == NULL || ts->cpu != cpu) { /* (cpu[task] = cpu: nothing to do when it is that already) */
            if (PyDict_SetItem(self->acpu, task, cpu) < 0)
                return -1;
            if (ts != NULL)
                Py_XSETREF(ts->cpu, Py_NewRef(cpu));
        }
    }
    /* (the annotator's counts of acquisitions by file and by source: kept here, added at `suspend`) */
    self->tries_delta[0]++;
    if (trylock)
        self->tries_delta[1]++;
    int source = S_RULE;
    if (v->origin != NULL) {
        PyObject *counted = PyDict_GetItemWithError(self->unchecked, name);
        if (counted == NULL) {
            if (PyErr_Occurred())
                return -1;
            counted = Py_BuildValue("[Oi]", v->origin, 1);
            int r = counted == NULL ? -1 : PyDict_SetItem(self->unchecked, name, counted);
            Py_XDECREF(counted);
            if (r < 0)
                return -1;
        } else if (list_add(counted, 1, 1) < 0) {
            return -1;
        }
    } else {
        source = v->use_state ? S_STATE : S_NONE;
    }
    if (self->sources_delta[source]++ == 0)
        self->sources_order[self->sources_seen++] = source;
    PyObject *a_held = SLOT(view, self->view_off[V_A_HELD]);
    if (a_held == Py_None) {
        a_held = PyList_New(0);
        if (a_held == NULL)
            return -1;
        slot_set(view, self->view_off[V_A_HELD], a_held);
        int r = PyDict_SetItem(self->held_of, task, a_held);
        Py_DECREF(a_held);
        if (r < 0)
            return -1;
    }
    PyObject *entry = PyList_New(5);
    if (entry == NULL)
        return -1;
    PyObject *items[5] = {name, name, instance, v->ctx, mode};
    for (int i = 0; i < 5; i++) {
        Py_INCREF(items[i]);
        PyList_SET_ITEM(entry, i, items[i]);
    }
    int r = PyList_Append(a_held, entry);
    Py_DECREF(entry);
    return r;
}

/* ---- one line ---------------------------------------------------------------------------- */

/* The usage an acquisition marks (rules.acquire_usage with hardirqs_off False: the view's needs
 * are its task's for its hardirqs-off state), or -1: not one the tables know. */
static long acquire_usage(CaptureFilter *self, PyObject *needs, long read, int trylock, int check) {
    if (read < 0 || read > 2)
        return -1;
    int i = (check ? 6 : 0) + (int)read * 2 + (trylock ? 1 : 0);
    int index = self->usage_index[i];
    if (index < 0)
        return self->usage_const[i];
    if (!PyList_CheckExact(needs) || index >= PyList_GET_SIZE(needs))
        return -1;
    long need = small_long(PyList_GET_ITEM(needs, index));
    return need < 0 ? -1 : need;
}

/* the task's (the view's) irq context on top of its held stack: the top entry's, or -2 */
static long top_context(CaptureFilter *self, PyObject *top) {
    if (Py_TYPE(top) == self->held_type) {
        PyObject *ctx = SLOT(top, self->held_off[HL_IRQ_CONTEXT]);
        return ctx == NULL ? -2 : small_long(ctx);
    }
    return -2;
}

static PyObject *new_held(CaptureFilter *self, PyObject **fields) {
    PyObject *hlock = self->held_type->tp_alloc(self->held_type, 0);
    if (hlock == NULL)
        return NULL;
    for (int i = 0; i < HL_N; i++) {
        Py_INCREF(fields[i]);
        SLOT(hlock, self->held_off[i]) = fields[i];
    }
    return hlock;
}

/* `recent.add(pair)` (tasks.RecentLocks.add): a lock seen again moves to the end; a new one is
 * added when that keeps within the limit, else (the oldest to forget) the method itself is asked */
static int remember(CaptureFilter *self, PyObject *recent, PyObject *pair) {
    if (Py_TYPE(recent) == self->recent_type) {
        PyObject *locks = SLOT(recent, self->recent_off[R_LOCKS]), *limit = SLOT(recent, self->recent_off[R_LIMIT]);
        if (locks != NULL && limit != NULL && Py_TYPE(locks) == &PyODict_Type) {
            int seen = PyDict_Contains(locks, pair);
            if (seen < 0)
                return -1;
            if (seen) {
                PyObject *args[2] = {locks, pair};
                PyObject *done = PyObject_Vectorcall(self->move_to_end, args, 2, NULL);
                Py_XDECREF(done);
                return done == NULL ? -1 : 0;
            }
            long most = small_long(limit);
            if (most >= 0 && PyDict_GET_SIZE(locks) < most)
                return PyObject_SetItem(locks, pair, Py_None);
        }
    }
    PyObject *done = PyObject_CallMethodOneArg(recent, s_add, pair);
    Py_XDECREF(done);
    return done == NULL ? -1 : 0;
}

/* `read_policy(name, in_irq)` (a new reference): asked once per class and irq flag when the policy is
 * ftrace_context.read_mode (a function of the two), else every time */
static PyObject *read_mode(CaptureFilter *self, PyObject *name, int in_irq) {
    PyObject *known = NULL;
    if (self->read_pure) {
        known = PyDict_GetItemWithError(self->read_memo, name);
        if (known == NULL) {
            if (PyErr_Occurred())
                return NULL;
            known = Py_BuildValue("[OO]", Py_None, Py_None);
            int r = known == NULL ? -1 : PyDict_SetItem(self->read_memo, name, known);
            Py_XDECREF(known);
            if (r < 0)
                return NULL;
        }
        PyObject *mode = PyList_GET_ITEM(known, in_irq);
        if (mode != Py_None) {
            Py_INCREF(mode);
            return mode;
        }
    }
    PyObject *mode = PyObject_CallFunctionObjArgs(self->read_policy, name, in_irq ? Py_True : Py_False, NULL);
    if (mode != NULL && known != NULL) {
        Py_INCREF(mode);
        PyObject *old = PyList_GET_ITEM(known, in_irq);
        PyList_SET_ITEM(known, in_irq, mode);
        Py_DECREF(old);
    }
    return mode;
}

/* an acquisition (the Python loop's ACQUIRE branch): 1 applied, 0 passed on, -1 error */
static int take_acquire(CaptureFilter *self, PyObject *view, PyObject *ctask, PyObject *head, PyObject *fl,
                        PyObject *body, PyObject *timestamp) {
    PyObject *task = PyTuple_GET_ITEM(head, H_TASK);
    PyObject *name = PyTuple_GET_ITEM(body, B_NAME);
    PyObject *instance = PyTuple_GET_ITEM(body, B_INSTANCE);
    PyObject *cpu = PyTuple_GET_ITEM(head, H_CPU);
    if (!PyUnicode_Check(name) || PyUnicode_GET_LENGTH(name) == 0 || self->probe_known)
        return 0;
    if (PyDict_GET_SIZE(self->pending)) {
        PyObject *waiting = PyDict_GetItemWithError(self->pending, PyTuple_GET_ITEM(head, H_CPU_TEXT));
        if (waiting != NULL || PyErr_Occurred())
            return waiting == NULL ? -1 : 0;  /* (pending's lists: present is there, the Python loop's) */
    }
    int trylock = PyObject_IsTrue(PyTuple_GET_ITEM(body, B_TRYLOCK));
    int read = PyObject_IsTrue(PyTuple_GET_ITEM(body, B_READ));
    if (trylock < 0 || read < 0)
        return -1;
    long code = small_long(PyTuple_GET_ITEM(fl, F_CODE));
    if (code < 0)
        return 0;
    PyObject *mode;
    if (read) {
        mode = read_mode(self, name, code >= 4);
        if (mode == NULL)
            return -1;
    } else {
        mode = self->write_mode;
        Py_INCREF(mode);
    }
    int r = 0;
    PyObject *chain_key = NULL, *read_back = NULL, *hlock = NULL, *lineno = NULL, *key = NULL;
    Verdict verdict = {1, NULL, 0, NULL};
    int annotated = self->annotator != NULL;
    if (annotated) {
        r = decide(self, view, task, name, mode, trylock, &verdict);
        if (r <= 0)
            goto done;
        r = 0;
    }
    int check = verdict.check;
    /* _push_hit: everything asked before anything changes */
    ClassSlot *cs = capcache_class(&self->cache, name);
    if (cs == NULL && PyErr_Occurred()) {
        r = -1;
        goto done;
    }
    PyObject *node = capcache_get(cs, CS_NODE, self->nodes, name);
    if (node == NULL || !PyDict_Check(node)) {
        r = PyErr_Occurred() ? -1 : 0;
        goto done;
    }
    PyObject *held = SLOT(view, self->view_off[V_HELD]);
    if (held == NULL || !PyList_CheckExact(held))
        goto done;
    Py_ssize_t depth = PyList_GET_SIZE(held);
    if (depth >= self->fast_depth)
        goto done;
    long mode_value = small_long(mode);
    long need = acquire_usage(self, SLOT(view, self->view_off[V_USAGE_NEED]), mode_value, trylock, check);
    if (need < 0)
        goto done;
    PyObject *usage = capcache_get(cs, CS_USAGE, node, s_usage);
    if (usage == NULL) {
        r = PyErr_Occurred() ? -1 : 0;
        goto done;
    }
    long have = small_long(usage);
    if (have < 0 || (need & ~have))
        goto done;
    PyObject *prev_key = SLOT(ctask, self->task_off[T_CHAIN_KEY]);
    PyObject *irq_context = SLOT(view, self->view_off[V_IRQ_CONTEXT]);
    PyObject *hardirqs_off = SLOT(view, self->view_off[V_HARDIRQS_OFF]);
    PyObject *recent = SLOT(view, self->view_off[V_RECENT]);
    if (prev_key == NULL || irq_context == NULL || hardirqs_off == NULL || recent == NULL)
        goto done;
    PyObject *start = prev_key;
    if (depth) {
        long top = top_context(self, PyList_GET_ITEM(held, depth - 1));
        long ctx = small_long(irq_context);
        if (top < 0 || top > 3 || ctx < 0 || ctx > 3)
            goto done;
        if (rules_separate(self->separate, top, ctx))
            start = self->initial;
    }
    Py_hash_t hash = rules_hash3(self->hash_ok, start, name, mode);
    if (hash == -1) {
        r = -1;
        goto done;
    }
    chain_key = PyLong_FromSsize_t(hash);
    if (chain_key == NULL) {
        r = -1;
        goto done;
    }
    int validated = rules_validates(check ? self->validates_checked : self->validates_unchecked, trylock);
    if (validated) {
        int cached = PySet_Contains(self->chain_cache, chain_key);
        if (cached <= 0) {
            r = cached;
            goto done;
        }
    }
    /* -- from here on, applied ------------------------------------------------------------- */
    r = -1;
    self->ev_now++;
    if (recent != Py_None) {
        PyObject *pair = capcache_pair(&self->cache, name, instance);
        int added = pair ? remember(self, recent, pair) : -1;
        Py_XDECREF(pair);
        if (added < 0)
            goto done;
        PyObject *last = PyLong_FromLongLong(self->ev_now);
        if (last == NULL)
            goto done;
        int failed = 0;
        if (Py_TYPE(recent) == self->recent_type)
            Py_XSETREF(SLOT(recent, self->recent_off[R_LAST]), last); /* (RecentLocks.last, a slot) */
        else {
            failed = PyObject_SetAttr(recent, s_last, last) < 0;
            Py_DECREF(last);
        }
        if (failed)
            goto done;
    }
    lineno = PyLong_FromLongLong(self->lineno);
    if (lineno == NULL)
        goto done;
    {
        PyObject *parts[12] = {self->event_fn, task, name, instance, mode, trylock ? Py_True : Py_False,
                               check ? Py_True : Py_False, timestamp, cpu, self->file, lineno,
                               PyTuple_GET_ITEM(head, H_DISPLAY)};
        read_back = later(parts);
    }
    if (read_back == NULL)
        goto done;
    {
        PyObject *fields[HL_N] = {name, name, instance, small_ints[0], mode, trylock ? Py_True : Py_False,
                                  check ? Py_True : Py_False, Py_None, irq_context, hardirqs_off, small_ints[0],
                                  prev_key, Py_None, read_back};
        hlock = new_held(self, fields);
    }
    if (hlock == NULL || PyList_Append(held, hlock) < 0)
        goto done;
    slot_set(ctask, self->task_off[T_CHAIN_KEY], chain_key);
    if (validated)
        self->hits_now++;
    if (annotated && annotate_acquire(self, view, task, name, instance, mode, trylock, cpu, &verdict) < 0)
        goto done;
    /* the reader */
    key = capcache_pair(&self->cache, task, instance);
    if (key == NULL)
        goto done;
    PyObject *entry = PyDict_GetItemWithError(self->held_names, key);
    if (entry == NULL) {
        if (PyErr_Occurred())
            goto done;
        entry = PyList_New(2);
        if (entry == NULL)
            goto done;
        PyList_SET_ITEM(entry, 0, Py_NewRef(name));
        PyList_SET_ITEM(entry, 1, Py_NewRef(small_ints[1]));
        int failed = PyDict_SetItem(self->held_names, key, entry) < 0;
        Py_DECREF(entry);
        if (failed)
            goto done;
    } else {
        if (!PyList_CheckExact(entry) || PyList_GET_SIZE(entry) < 2) {
            PyErr_SetString(PyExc_TypeError, "a held name entry is no list");
            goto done;
        }
        Py_INCREF(name);
        PyObject *old = PyList_GET_ITEM(entry, 0);
        PyList_SET_ITEM(entry, 0, name);
        Py_DECREF(old);
        if (list_add(entry, 1, 1) < 0)
            goto done;
    }
    self->acquisitions++;
    r = 1;
done:
    Py_XDECREF(mode);
    Py_XDECREF(chain_key);
    Py_XDECREF(read_back);
    Py_XDECREF(hlock);
    Py_XDECREF(lineno);
    Py_XDECREF(key);
    return r;
}

/* a release (the Python loop's RELEASE branch, `_pop_innermost`): 1 applied, 0 passed on, -1 error */
static int take_release(CaptureFilter *self, PyObject *view, PyObject *ctask, PyObject *head, PyObject *body) {
    PyObject *task = PyTuple_GET_ITEM(head, H_TASK);
    PyObject *name = PyTuple_GET_ITEM(body, B_NAME);
    PyObject *instance = PyTuple_GET_ITEM(body, B_INSTANCE);
    PyObject *key = capcache_pair(&self->cache, task, instance);
    if (key == NULL)
        return -1;
    int r = 0;
    PyObject *entry = PyDict_GetItemWithError(self->held_names, key);
    if (entry == NULL || !PyList_CheckExact(entry) || PyList_GET_SIZE(entry) < 2) {
        r = PyErr_Occurred() ? -1 : 0;
        goto done;
    }
    int named = 0;
    if (is_empty_str(name)) {
        name = PyList_GET_ITEM(entry, 0);
        named = 1;
    }
    PyObject *held = SLOT(view, self->view_off[V_HELD]);
    if (held == NULL || !PyList_CheckExact(held) || PyList_GET_SIZE(held) == 0)
        goto done;
    PyObject *pins = SLOT(ctask, self->task_off[T_PINS]);
    if (pins == NULL)
        goto done;
    int pinned = PyObject_IsTrue(pins);
    if (pinned != 0) {
        r = pinned < 0 ? -1 : 0;
        goto done;
    }
    Py_ssize_t depth = PyList_GET_SIZE(held);
    PyObject *top = PyList_GET_ITEM(held, depth - 1);
    if (Py_TYPE(top) != self->held_type)
        goto done;
    PyObject *t_instance = SLOT(top, self->held_off[HL_INSTANCE]), *t_lock = SLOT(top, self->held_off[HL_LOCK]),
             *t_refs = SLOT(top, self->held_off[HL_REFERENCES]),
             *t_prev = SLOT(top, self->held_off[HL_PREV_CHAIN_KEY]);
    if (t_instance == NULL || t_lock == NULL || t_refs == NULL || t_prev == NULL)
        goto done;
    int same = eq(t_instance, instance);
    if (same > 0)
        same = eq(t_lock, name);
    if (same <= 0) {
        r = same;
        goto done;
    }
    int refs = PyObject_IsTrue(t_refs);
    if (refs != 0) {
        r = refs < 0 ? -1 : 0;
        goto done;
    }
    PyObject *a_held = NULL;
    if (self->annotator != NULL) {
        a_held = SLOT(view, self->view_off[V_A_HELD]);
        if (a_held == NULL || !PyList_CheckExact(a_held) || PyList_GET_SIZE(a_held) == 0)
            goto done;
        PyObject *a_top = PyList_GET_ITEM(a_held, PyList_GET_SIZE(a_held) - 1);
        if (!PyList_CheckExact(a_top) || PyList_GET_SIZE(a_top) < 5)
            goto done;
        same = eq(PyList_GET_ITEM(a_top, 1), name);
        if (same > 0)
            same = eq(PyList_GET_ITEM(a_top, 2), instance);
        if (same <= 0) {
            r = same;
            goto done;
        }
        if (PyList_GET_SIZE(a_top) > 5) {
            int marked = PyObject_IsTrue(PyList_GET_ITEM(a_top, 5));
            if (marked != 0) {
                r = marked < 0 ? -1 : 0;
                goto done;
            }
        }
    }
    long count = small_long(PyList_GET_ITEM(entry, 1));
    if (count < 0 || (count <= 1 && PyList_GET_SIZE(entry) > 2))
        goto done; /* a lock known by its map too (by_map): the Python loop's */
    /* -- applied -------------------------------------------------------------------------- */
    r = -1;
    self->ev_now++;
    slot_set(ctask, self->task_off[T_CHAIN_KEY], t_prev);
    list_drop_last(held);
    if (a_held != NULL)
        list_drop_last(a_held);
    if (named)
        self->resolved++;
    if (count > 1) {
        if (list_add(entry, 1, -1) < 0)
            goto done;
    } else if (PyDict_DelItem(self->held_names, key) < 0) {
        goto done;
    }
    r = 1;
done:
    Py_DECREF(key);
    return r;
}

/* `lock_contended` / `lock_acquired`: the checker only counts them */
static int take_other(CaptureFilter *self, PyObject *head, PyObject *body) {
    PyObject *name = PyTuple_GET_ITEM(body, B_NAME);
    if (is_empty_str(name)) {
        PyObject *key = capcache_pair(&self->cache, PyTuple_GET_ITEM(head, H_TASK), PyTuple_GET_ITEM(body, B_INSTANCE));
        if (key == NULL)
            return -1;
        PyObject *entry = PyDict_GetItemWithError(self->held_names, key);
        Py_DECREF(key);
        if (entry == NULL)
            return PyErr_Occurred() ? -1 : 0;
        self->resolved++;
    }
    self->ev_now++;
    return 1;
}

/* `_View(ctask, a_held)` (args: the two; a new reference), its fields set here as
 * fast_stages._View.__init__ sets them -- irq_context from `rules.task_irq_context`, asked once per
 * pair of depths -- or by the class itself when the task's fields are not the plain ones. */
static PyObject *make_view(CaptureFilter *self, PyObject **args) {
    PyObject *ctask = args[0];
    if (Py_TYPE(ctask) == self->task_type) {
        PyObject *held = SLOT(ctask, self->task_off[T_HELD]), *he = SLOT(ctask, self->task_off[T_HARDIRQS_ENABLED]),
                 *need = SLOT(ctask, self->task_off[T_USAGE_NEED]), *recent = SLOT(ctask, self->task_off[T_ACQUIRED_EVER]);
        PyObject *hd_obj = SLOT(ctask, self->task_off[T_HARDIRQ_DEPTH]), *sd_obj = SLOT(ctask, self->task_off[T_SOFTIRQ_DEPTH]);
        long hd = hd_obj != NULL ? small_long(hd_obj) : -2, sd = sd_obj != NULL ? small_long(sd_obj) : -2;
        if (held != NULL && recent != NULL && need != NULL && PyList_CheckExact(need) && (he == Py_True || he == Py_False) &&
            hd >= 0 && hd < 8 && sd >= 0 && sd < 8) {
            PyObject **ictx = &self->irq_context_of[hd * 8 + sd];
            if (*ictx == NULL) {
                PyObject *depths[2] = {hd_obj, sd_obj};
                if ((*ictx = PyObject_Vectorcall(self->irq_context_fn, depths, 2, NULL)) == NULL)
                    return NULL;
            }
            PyObject *hoff = (he == Py_False || hd > 0) ? Py_True : Py_False;
            PyObject *usage = hoff == Py_True ? PyList_GetSlice(need, 4, PY_SSIZE_T_MAX) : PyList_GetSlice(need, 0, 4);
            if (usage == NULL)
                return NULL;
            PyObject *view = self->view_type->tp_alloc(self->view_type, 0);
            if (view == NULL) {
                Py_DECREF(usage);
                return NULL;
            }
            PyObject *fields[V_N] = {ctask, held, *ictx, hoff, usage, recent, args[1]};
            for (int i = 0; i < V_N; i++)
                SLOT(view, self->view_off[i]) = Py_NewRef(fields[i]);
            Py_DECREF(usage);
            return view;
        }
    }
    return PyObject_Vectorcall((PyObject *)self->view_type, args, 2, NULL);
}

/* fast_held._marked: whether every checked held lock's class has `bits` (shifted to _READ for a
 * reader): 1, 0 (or a held entry it does not know: 0 too), -1 error */
static int held_marked(CaptureFilter *self, PyObject *held, long bits) {
    long read_bits = bits << self->read_shift;
    Py_ssize_t n = PyList_GET_SIZE(held);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *entry = PyList_GET_ITEM(held, i);
        if (Py_TYPE(entry) != self->held_type)
            return 0;
        PyObject *check = SLOT(entry, self->held_off[HL_CHECK]), *cls = SLOT(entry, self->held_off[HL_CLS]),
                 *read = SLOT(entry, self->held_off[HL_READ]);
        if (check == NULL || cls == NULL || read == NULL)
            return 0;
        int checked = PyObject_IsTrue(check);
        if (checked <= 0) {
            if (checked < 0)
                return -1;
            continue;
        }
        int reader = PyObject_IsTrue(read);
        if (reader < 0)
            return -1;
        ClassSlot *cs = capcache_class(&self->cache, cls);
        if (cs == NULL && PyErr_Occurred())
            return -1;
        PyObject *node = capcache_get(cs, CS_NODE, self->nodes, cls);
        if (node == NULL || !PyDict_Check(node))
            return PyErr_Occurred() ? -1 : 0;
        PyObject *usage = capcache_get(cs, CS_USAGE, node, s_usage);
        if (usage == NULL)
            return PyErr_Occurred() ? -1 : 0;
        long have = small_long(usage), want = reader ? read_bits : bits;
        if (have < 0 || (have & want) != want)
            return 0;
    }
    return 1;
}

static inline int truth_slot(PyObject *o, Py_ssize_t off, int *out) {
    PyObject *v = SLOT(o, off);
    if (v == NULL)
        return -1;
    *out = PyObject_IsTrue(v);
    return *out < 0 ? -1 : 0;
}

/* fast_stages.context_hit done here for the common case: each op of `ops` applied as fast_held.irq_change
 * would (none marking a usage bit or noting anything), the task's stamps, the checker's events, the
 * annotator's nesting, and the task's new view (a new reference in *out): 1; 0: not here (nothing changed:
 * the Python function decides), -1 error. */
static int irq_here(CaptureFilter *self, PyObject *view, PyObject *ctask, PyObject *task, PyObject *ops,
                    PyObject *display, PyObject *cpu, PyObject *lineno, PyObject *ts, PyObject **out) {
    if (!PyTuple_CheckExact(ops) || PyTuple_GET_SIZE(ops) > 8 || Py_TYPE(ctask) != self->task_type ||
        self->preempt_rt || self->stopped)
        return 0;
    int threaded, pinned, he, se, known;
    if (truth_slot(ctask, self->task_off[T_HARDIRQ_THREADED], &threaded) < 0 ||
        truth_slot(ctask, self->task_off[T_PINS], &pinned) < 0 ||
        truth_slot(ctask, self->task_off[T_HARDIRQS_ENABLED], &he) < 0 ||
        truth_slot(ctask, self->task_off[T_SOFTIRQS_ENABLED], &se) < 0 ||
        truth_slot(ctask, self->task_off[T_IRQ_KNOWN], &known) < 0)
        return PyErr_Occurred() ? -1 : 0;
    if (threaded || pinned)
        return 0;
    PyObject *hd_obj = SLOT(ctask, self->task_off[T_HARDIRQ_DEPTH]), *sd_obj = SLOT(ctask, self->task_off[T_SOFTIRQ_DEPTH]);
    PyObject *irq_events = SLOT(ctask, self->task_off[T_IRQ_EVENTS]);
    PyObject *held = SLOT(view, self->view_off[V_HELD]);
    if (hd_obj == NULL || sd_obj == NULL || irq_events == NULL || !PyDict_CheckExact(irq_events) || held == NULL ||
        !PyList_CheckExact(held))
        return 0;
    long hd = small_long(hd_obj), sd = small_long(sd_obj);
    if (hd < 0 || sd < 0)
        return 0;
    /* the ops tried on the task's irq state, nothing changed yet */
    int stamped[8], n = (int)PyTuple_GET_SIZE(ops), refresh = 0;
    Py_ssize_t depth = PyList_GET_SIZE(held);
    for (int i = 0; i < n; i++) {
        PyObject *op = PyTuple_GET_ITEM(ops, i);
        int k = 0;
        while (k < OP_N && self->irq_ops[k] != op)
            k++;
        if (k == OP_N)
            return 0; /* (an op not one of the eight, or not the same str: the Python function's) */
        unsigned long t = rules_irq(self->irq_rule, k, hd, sd, he, se); /* rules.irq_transition */
        if (t & RULES_IRQT_CHECKER)
            return 0; /* a note or the kernel's warning */
        long marks = (long)(t >> RULES_IRQT_MARKS_SHIFT);
        if (marks && depth) {
            int marked = held_marked(self, held, marks);
            if (marked <= 0)
                return marked;
        }
        RULES_IRQ_STEP(t, hd, sd, he, se);
        stamped[i] = (t & RULES_IRQT_RECORD) != 0;
        refresh |= (t & RULES_IRQT_REFRESH) != 0;
    }
    PyObject *need = NULL;
    if (refresh) { /* tasks.usage_needs */
        if (!known) {
            need = self->used_only;
        } else {
            PyObject *key = Py_BuildValue("(OOO)", hd ? Py_True : Py_False, sd ? Py_True : Py_False,
                                          se ? Py_True : Py_False);
            if (key == NULL)
                return -1;
            need = PyDict_GetItemWithError(self->usage_needs, key);
            Py_DECREF(key);
            if (need == NULL)
                return PyErr_Occurred() ? -1 : 0;
        }
    }
    /* the annotator's nesting after the ops (annotations.context_after) */
    PyObject *ctx = NULL;
    if (self->annotator != NULL) {
        ctx = PyDict_GetItemWithError(self->actx, task);
        if (ctx == NULL && PyErr_Occurred())
            return -1;
        ctx = ctx == NULL ? small_ints[0] : ctx;
        Py_INCREF(ctx);
        for (int i = 0; i < n; i++) {
            PyObject *op = PyTuple_GET_ITEM(ops, i);
            int k = 0;
            while (self->irq_ops[k] != op) /* (irq_here took only the eight ops) */
                k++;
            long before = small_long(ctx);
            PyObject *key = before >= 0 && before < (1L << 24) ? PyLong_FromLong(before * 8 + k) : NULL;
            PyObject *next = key == NULL ? NULL : PyDict_GetItemWithError(self->ctx_memo, key);
            if (next != NULL) {
                Py_INCREF(next);
            } else if (!PyErr_Occurred()) { /* annotations.context_after: a function of the two */
                PyObject *args[2] = {ctx, op};
                next = PyObject_Vectorcall(self->context_after, args, 2, NULL);
                if (next != NULL && key != NULL && PyDict_SetItem(self->ctx_memo, key, next) < 0)
                    Py_CLEAR(next);
            }
            Py_XDECREF(key);
            Py_DECREF(ctx);
            if (next == NULL)
                return -1;
            ctx = next;
        }
    }
    /* -- applied -------------------------------------------------------------------------- */
    int r = -1;
    PyObject *hd_new = PyLong_FromLong(hd), *sd_new = PyLong_FromLong(sd);
    if (hd_new == NULL || sd_new == NULL)
        goto out;
    if (display != Py_None)
        slot_set(ctask, self->task_off[T_NAME], display); /* (Checker.feed's, before the transition's stamp) */
    PyObject *name = SLOT(ctask, self->task_off[T_NAME]);
    slot_set(ctask, self->task_off[T_HARDIRQS_ENABLED], he ? Py_True : Py_False);
    slot_set(ctask, self->task_off[T_SOFTIRQS_ENABLED], se ? Py_True : Py_False);
    slot_set(ctask, self->task_off[T_HARDIRQ_DEPTH], hd_new);
    slot_set(ctask, self->task_off[T_SOFTIRQ_DEPTH], sd_new);
    if (need != NULL)
        slot_set(ctask, self->task_off[T_USAGE_NEED], need);
    for (int i = 0; i < n; i++) { /* fast_held._defer_irq_event, its evidence (Evidence, file, lineno, name, at, ts) */
        if (!stamped[i])
            continue;
        PyObject *old = PyDict_GetItemWithError(irq_events, s_stamp_key);
        if (old == NULL && PyErr_Occurred())
            goto out;
        PyObject *stamp = PyNumber_Add(old == NULL ? small_ints[0] : old, small_ints[1]);
        if (stamp == NULL)
            goto out;
        PyObject *record = PyTuple_Pack(7, stamp, self->evidence, self->file, lineno, name, Py_None, ts);
        int failed = record == NULL || PyDict_SetItem(irq_events, s_stamp_key, stamp) < 0 ||
                     PyDict_SetItem(irq_events, PyTuple_GET_ITEM(ops, i), record) < 0;
        Py_DECREF(stamp);
        Py_XDECREF(record);
        if (failed)
            goto out;
    }
    self->ev_now += n;
    if (cpu != Py_None)
        slot_set(ctask, self->task_off[T_CPU], cpu);
    PyObject *a_held = SLOT(view, self->view_off[V_A_HELD]);
    if (self->annotator != NULL) {
        if (PyDict_SetItem(self->actx, task, ctx) < 0)
            goto out;
        a_held = PyDict_GetItemWithError(self->held_of, task);
        if (a_held == NULL) {
            if (PyErr_Occurred())
                goto out;
            a_held = Py_None;
        }
    }
    if (a_held == NULL)
        a_held = Py_None;
    PyObject *args[2] = {ctask, a_held};
    *out = make_view(self, args);
    if (*out != NULL)
        r = 1;
out:
    Py_XDECREF(ctx);
    Py_XDECREF(hd_new);
    Py_XDECREF(sd_new);
    return r;
}

/* The Python loop's irq-context change (`context_transition` + `context_hit`, both asked) of a
 * line whose flags column changed: the task's new view (borrowed, in the views), or NULL: passed
 * on, nothing changed (an error set, or not).  Once applied, the change stands whether or not the
 * line's lock event is applied here too (as in the Python loop: its context is the task's now). */
static PyObject *change_context(CaptureFilter *self, PyObject *view, PyObject *head, PyObject *fl, PyObject *body,
                                PyObject *timestamp, PyObject *old) {
    PyObject *task = PyTuple_GET_ITEM(head, H_TASK);
    if (PyTuple_GET_ITEM(body, B_OP) == self->acquire_op) {
        PyObject *name = PyTuple_GET_ITEM(body, B_NAME);
        if (!PyUnicode_Check(name) || PyUnicode_GET_LENGTH(name) == 0 || self->probe_known)
            return NULL;
        if (PyDict_GET_SIZE(self->pending)) {
            PyObject *waiting = PyDict_GetItemWithError(self->pending, PyTuple_GET_ITEM(head, H_CPU_TEXT));
            if (waiting != NULL || PyErr_Occurred())
                return NULL;
        }
    }
    PyObject *state = PyTuple_GET_ITEM(fl, F_STATE);
    PyObject *before = old == NULL ? small_ints[0] : old;
    PyObject *pair = PyTuple_Pack(2, before, state);
    if (pair == NULL)
        return NULL;
    PyObject *ops = PyDict_GetItemWithError(self->transitions, pair); /* (context_transition is a function of the two) */
    if (ops == NULL) {
        PyObject *args2[2] = {before, state};
        ops = PyErr_Occurred() ? NULL : PyObject_Vectorcall(self->transition, args2, 2, NULL);
        if (ops != NULL && PyDict_SetItem(self->transitions, pair, ops) < 0)
            Py_CLEAR(ops);
    } else {
        Py_INCREF(ops);
    }
    Py_DECREF(pair);
    if (ops == NULL)
        return NULL;
    PyObject *result = NULL;
    PyObject *lineno = PyLong_FromLongLong(self->lineno);
    PyObject *ts = lineno ? PyFloat_FromString(timestamp) : NULL;
    if (ts == NULL)
        goto out;
    PyObject *here = NULL;
    int done = irq_here(self, view, SLOT(view, self->view_off[V_TASK]), task, ops, PyTuple_GET_ITEM(head, H_DISPLAY),
                        PyTuple_GET_ITEM(head, H_CPU), lineno, ts, &here);
    if (done < 0)
        goto out;
    if (done) {
        Py_ssize_t k = PyTuple_GET_SIZE(ops);
        if (PyDict_SetItem(self->views, task, here) < 0 || PyDict_SetItem(self->contexts, task, state) < 0) {
            Py_DECREF(here);
            goto out;
        }
        self->context_events += k;
        result = here;
        Py_DECREF(here); /* the views hold it */
        goto out;
    }
    PyObject *args[10] = {self->checker, view, self->annotated, task, ops, PyTuple_GET_ITEM(head, H_DISPLAY),
                          PyTuple_GET_ITEM(head, H_CPU), self->file, lineno, ts};
    /* (it counts the checker's events: the counts kept here go back first, and are read again) */
    if (suspend(self) < 0)
        goto out;
    PyObject *changed = PyObject_Vectorcall(self->context_hit, args, 10, NULL);
    capcache_forget(&self->cache); /* (Python code: what the task slots remember may be out of date) */
    if (attr_longlong(self->cstats, s_events, &self->ev_now) < 0 ||
        attr_longlong(self->cstats, s_chain_hits, &self->hits_now) < 0) {
        Py_XDECREF(changed);
        goto out;
    }
    if (changed == NULL || changed == Py_None) {
        Py_XDECREF(changed);
        goto out;
    }
    Py_ssize_t n = PyObject_Length(ops);
    if (n < 0 || PyDict_SetItem(self->views, task, changed) < 0 || PyDict_SetItem(self->contexts, task, state) < 0) {
        Py_DECREF(changed);
        goto out;
    }
    self->context_events += n;
    result = changed;
    Py_DECREF(changed); /* the views hold it */
out:
    Py_DECREF(ops);
    Py_XDECREF(lineno);
    Py_XDECREF(ts);
    return result;
}

/* A line's pieces from the caches, as `_ftscan.split` finds them (the same split, _ftsplit.h):
 * the head, flags and body (borrowed) and where its time stamp is; 0: not all there (or an error
 * set), the Python loop's. */
typedef struct {
    PyObject *head, *fl, *body;
    const char *ts;
    Py_ssize_t ts_len;
} Split;

/* The body of a lock event whose text was never seen but whose shape was (`ftrace_scan._lock_body`:
 * the text with its address cut out, and the address read as the full reading reads one): a new
 * body tuple as the Python loop makes it, kept in `shape_body` for the line; NULL: no such shape
 * (or an error set). */
static PyObject *body_from_shape(CaptureFilter *self, const char *p, Py_ssize_t m) {
    Py_ssize_t start = -1;
    for (Py_ssize_t i = 0; i + 1 < m; i++)
        if (p[i] == ':' && p[i + 1] == ' ') {
            start = i + 2;
            break;
        }
    if (start < 0)
        return NULL;
    while (start < m && p[start] == ' ')
        start++;
    const char *blank = memchr(p + start, ' ', (size_t)(m - start));
    if (blank == NULL)
        return NULL;
    Py_ssize_t end = blank - p;
    PyObject *key = PyUnicode_New(start + 1 + (m - end), 127);
    if (key == NULL)
        return NULL;
    char *k = (char *)PyUnicode_1BYTE_DATA(key);
    memcpy(k, p, (size_t)start);
    k[start] = '\0';
    memcpy(k + start + 1, p + end, (size_t)(m - end));
    PyObject *shape = PyDict_GetItemWithError(self->shapes, key); /* borrowed */
    Py_DECREF(key);
    if (shape == NULL || !PyTuple_CheckExact(shape) || PyTuple_GET_SIZE(shape) != 4)
        return NULL;
    const char *address = p + start;
    Py_ssize_t alen = end - start;
    int prefixed = alen >= 2 && address[0] == '0' && address[1] == 'x';
    Py_ssize_t bare = prefixed ? 2 : 0;
    if (alen == bare)
        return NULL;
    for (Py_ssize_t i = bare; i < alen; i++) {
        char c = address[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')))
            return NULL;
    }
    PyObject *event = PyTuple_GET_ITEM(shape, 0);
    PyObject *op = PyDict_GetItemWithError(self->lock_events, event); /* borrowed */
    if (op == NULL)
        return NULL;
    PyObject *instance = PyUnicode_New(alen + (prefixed ? 0 : 2), 127);
    if (instance == NULL)
        return NULL;
    char *d = (char *)PyUnicode_1BYTE_DATA(instance);
    if (!prefixed) {
        d[0] = '0';
        d[1] = 'x';
        d += 2;
    }
    memcpy(d, address, (size_t)alen);
    PyObject *kind = PyLong_FromLong(K_LOCK);
    PyObject *body = kind ? PyTuple_Pack(7, kind, op, instance, PyTuple_GET_ITEM(shape, 3), PyTuple_GET_ITEM(shape, 1),
                                         PyTuple_GET_ITEM(shape, 2), event) : NULL;
    Py_XDECREF(kind);
    Py_DECREF(instance);
    if (body == NULL)
        return NULL;
    Py_XSETREF(self->shape_body, body);
    return body;
}

static int split_line(CaptureFilter *self, const char *text, Py_ssize_t n, Split *out) {
    Pieces at;
    if (!split_pieces(text, n, &at) || !stamp_ok(text, at.ts_start, at.colon))
        return 0;
    out->head = capcache_piece(&self->cache, PC_HEAD, self->heads, text, at.end);
    if (out->head == NULL)
        return 0;
    Py_ssize_t flags_end = at.blank >= at.from ? at.blank : at.from;
    out->fl = capcache_piece(&self->cache, PC_FLAGS, self->flag_cache, text + at.from, flags_end - at.from);
    if (out->fl == NULL)
        return 0;
    out->body = capcache_piece(&self->cache, PC_BODY, self->bodies, text + at.colon + 2, at.n - at.colon - 2);
    if (out->body == NULL && self->shapes != NULL && !PyErr_Occurred()) {
        out->body = body_from_shape(self, text + at.colon + 2, at.n - at.colon - 2);
        if (out->body != NULL) /* (a function of the text: the same body for it next time) */
            capcache_piece_found(&self->cache, PC_BODY, text + at.colon + 2, at.n - at.colon - 2, out->body);
    }
    if (out->body == NULL)
        return 0;
    out->ts = text + at.ts_start;
    out->ts_len = at.colon - at.ts_start;
    return 1;
}

/* The Python loop's view of a task it has none of yet (`_View(ctask, held_of.get(task))`, the views
 * cleared when there are _VIEW_LIMIT of them): borrowed, in the views; NULL: the checker knows no
 * such task (or an error set).  A view is what the task's state is now: made here or by the Python
 * loop for the same line, it is the same. */
static PyObject *new_view(CaptureFilter *self, PyObject *task) {
    PyObject *ctask = PyDict_GetItemWithError(self->tasks, task);
    if (ctask == NULL)
        return NULL;
    PyObject *a_held = Py_None;
    if (self->held_of != NULL) {
        a_held = PyDict_GetItemWithError(self->held_of, task);
        if (a_held == NULL) {
            if (PyErr_Occurred())
                return NULL;
            a_held = Py_None;
        }
    }
    PyObject *args[2] = {ctask, a_held};
    PyObject *view = make_view(self, args);
    if (view == NULL)
        return NULL;
    if (PyDict_GET_SIZE(self->views) >= self->view_limit) {
        PyDict_Clear(self->views);
        capcache_forget(&self->cache);
    }
    int r = PyDict_SetItem(self->views, task, view);
    Py_DECREF(view);
    return r < 0 ? NULL : view;
}

/* One line (`n` ASCII bytes at `text`, without its line ending): 1 applied, 0 passed on (nothing
 * changed), -1 error. */
static int take_line(CaptureFilter *self, const char *text, Py_ssize_t n) {
    if (n == 0 || text[0] == '#')
        return 0;
    Split sp;
    if (!split_line(self, text, n, &sp))
        return PyErr_Occurred() ? -1 : 0;
    int r = 0;
    PyObject *head = sp.head, *fl = sp.fl, *body = sp.body, *timestamp = NULL;
    /* (held for the line: the caches are the Python loop's to change) */
    Py_INCREF(head);
    Py_INCREF(fl);
    Py_INCREF(body);
    if (!PyTuple_CheckExact(body) || PyTuple_GET_SIZE(body) != 7 || !PyTuple_CheckExact(head) ||
        PyTuple_GET_SIZE(head) != 4 || !PyTuple_CheckExact(fl) || PyTuple_GET_SIZE(fl) != 3)
        goto done;
    long kind = small_long(PyTuple_GET_ITEM(body, B_KIND));
    if (kind != K_LOCK) {
        if (kind == K_SKIP_CONTENTION) {
            if (self->contention)
                goto done;
            self->contention_lines++;
        } else if (kind != K_SKIP) {
            goto done;
        }
        r = count_add(self->skipped, PyTuple_GET_ITEM(body, B_EVENT), 1) < 0 ? -1 : 1;
        goto done;
    }
    PyObject *task = PyTuple_GET_ITEM(head, H_TASK);
    if (task == Py_None || sp.ts_len > 40)
        goto done;
    long state = small_long(PyTuple_GET_ITEM(fl, F_STATE));
    if (state < 0)
        goto done;
    self->cur = NULL;
    TaskSlot *ts = capcache_task(&self->cache, task);
    if (ts == NULL) {
        r = -1;
        goto done;
    }
    PyObject *view = ts->view;
    if (view == NULL) {
        view = PyDict_GetItemWithError(self->views, task);
        if (view == NULL) {
            if (PyErr_Occurred() || (view = new_view(self, task)) == NULL) {
                r = PyErr_Occurred() ? -1 : 0;
                goto done;
            }
            if ((ts = capcache_task(&self->cache, task)) == NULL) { /* (new_view may have forgotten every slot) */
                r = -1;
                goto done;
            }
        }
        ts->view = Py_NewRef(view);
    }
    if (Py_TYPE(view) != self->view_type)
        goto done;
    if (PyTuple_GET_ITEM(fl, F_FLAGS) != Py_None) {
        if (!ts->context_known) {
            PyObject *known = PyDict_GetItemWithError(self->contexts, task);
            if (known == NULL && PyErr_Occurred()) {
                r = -1;
                goto done;
            }
            ts->context = Py_XNewRef(known);
            ts->context_known = 1;
        }
        PyObject *old = ts->context;
        if (state != (old == NULL ? 0 : small_long(old))) {
            /* an irq-context change: the reader's irq-context events first, then the lock's */
            if ((timestamp = ascii_str(sp.ts, sp.ts_len)) == NULL) {
                r = -1;
                goto done;
            }
            Py_XINCREF(old);
            PyObject *changed = change_context(self, view, head, fl, body, timestamp, old);
            Py_XDECREF(old);
            if (changed == NULL) {
                r = PyErr_Occurred() ? -1 : 0;
                goto done;
            }
            view = changed; /* (borrowed: the views hold it) */
            if ((ts = capcache_task(&self->cache, task)) == NULL) {
                r = -1;
                goto done;
            }
            Py_XSETREF(ts->view, Py_NewRef(view));
            Py_XSETREF(ts->context, Py_NewRef(PyTuple_GET_ITEM(fl, F_STATE)));
            ts->context_known = 1;
            Py_CLEAR(ts->actx); /* (irq_here sets the annotator's ctx[task]) */
            ts->actx_known = 0;
            if (Py_TYPE(view) != self->view_type)
                goto done;
        }
    }
    self->cur = ts;
    PyObject *ctask = SLOT(view, self->view_off[V_TASK]);
    if (ctask == NULL || Py_TYPE(ctask) != self->task_type)
        goto done;
    PyObject *op = PyTuple_GET_ITEM(body, B_OP);
    Py_INCREF(view);
    Py_INCREF(ctask);
    if (op == self->acquire_op) {
        if (timestamp == NULL && (timestamp = ascii_str(sp.ts, sp.ts_len)) == NULL)
            r = -1;
        else
            r = take_acquire(self, view, ctask, head, fl, body, timestamp);
    }
    else if (op == self->release_op)
        r = take_release(self, view, ctask, head, body);
    else
        r = take_other(self, head, body);
    if (r == 1) {
        /* what every lock line does: the reader's counts and names, the task's name and CPU */
        self->events++;
        long code = small_long(PyTuple_GET_ITEM(fl, F_CODE));
        if (code > 0 && code & 1)
            self->hardirq_lines++;
        else if (code > 0 && code & 2)
            self->softirq_lines++;
        PyObject *display = PyTuple_GET_ITEM(head, H_DISPLAY);
        PyObject *cpu = PyTuple_GET_ITEM(head, H_CPU);
        if (ts->display != display && PyDict_SetItem(self->comms, task, display) < 0) /* (none when it is that already) */
            r = -1;
        else {
            if (ts->display != display)
                Py_XSETREF(ts->display, Py_NewRef(display));
            slot_set(ctask, self->task_off[T_NAME], display);
            if (cpu != Py_None)
                slot_set(ctask, self->task_off[T_CPU], cpu);
        }
    }
    Py_DECREF(ctask);
    Py_DECREF(view);
    self->cur = NULL;
done:
    Py_DECREF(head);
    Py_DECREF(fl);
    Py_DECREF(body);
    Py_XDECREF(timestamp);
    return r;
}

/* The next line: its text (ASCII, `*n` bytes; `*line` the str when it came as one, else NULL), 1; 0 at
 * the end, -1 error.  A block of bytes (source.Lines.give_bytes: whole ASCII lines joined by `\n`,
 * each with the `\r` of a `\r\n` still on it) is split here, a line at a time; any other line comes
 * as a str, whose text is read here only if it is ASCII (else `*text` is NULL). */
static int next_line(CaptureFilter *self, const char **text, Py_ssize_t *n, PyObject **line) {
    *line = NULL;
    while (self->chunk == NULL) {
        PyObject *item = PyIter_Next(self->lines);
        if (item == NULL)
            return PyErr_Occurred() ? -1 : 0;
        if (PyBytes_CheckExact(item)) {
            self->chunk = item;
            self->pos = 0;
            break;
        }
        *line = item;
        *text = PyUnicode_Check(item) && PyUnicode_IS_ASCII(item) ? (const char *)PyUnicode_DATA(item) : NULL;
        *n = *text != NULL ? PyUnicode_GET_LENGTH(item) : 0;
        return 1;
    }
    const char *data = PyBytes_AS_STRING(self->chunk);
    Py_ssize_t size = PyBytes_GET_SIZE(self->chunk), start = self->pos;
    const char *end = memchr(data + start, '\n', (size_t)(size - start));
    Py_ssize_t stop = end != NULL ? end - data : size;
    *text = data + start;
    *n = stop - start;
    if (*n && (*text)[*n - 1] == '\r')
        (*n)--; /* (a `\r\n` ending, as the decoded lines drop it) */
    if (end != NULL) {
        self->pos = stop + 1;
    } else {
        /* the block's last line: its text stays valid while `held` keeps the block */
        Py_XSETREF(self->held_chunk, self->chunk);
        self->chunk = NULL;
    }
    return 1;
}

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
    return Py_BuildValue("{sLsLsLsLsLsLsLsLsL}", "context_events", self->context_events, "lines", self->lineno, "events", self->events,
                         "hardirq_lines", self->hardirq_lines, "softirq_lines", self->softirq_lines,
                         "names_resolved", self->resolved, "acquisitions", self->acquisitions,
                         "contention", self->contention_lines, "taken", self->taken);
}

static PyMethodDef CaptureFilter_methods[] = {
    {"lines_read", (PyCFunction)CaptureFilter_lines_read, METH_NOARGS, "how many lines the filter has read"},
    {"counts", (PyCFunction)CaptureFilter_counts, METH_NOARGS,
     "the reader's counts of the lines applied here (and `lines`: every line read, `taken`: applied)"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject CaptureFilterType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "lockcheck.engine._capturecore.CaptureFilter",
    .tp_basicsize = sizeof(CaptureFilter),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "CaptureFilter(lines, caches, reader, stats, checker, annotated, make, rules, tick): "
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
    INTERN(s_check0, "check0");
    INTERN(s_rule_prefix, "rule ");
    INTERN(s_empty, "");
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
