/*
 * A part of lockcheck/engine/_capturecore.c, which includes its parts in order (each uses what the
 * parts before it define).  This one: the filter's state: the shapes of the tuples and slotted
 * objects it reads, the CaptureFilter struct, and its set-up (`CaptureFilter_init`: the shared
 * dicts, the rule tables) and tear-down.
 */
#ifndef LOCKCHECK_CAPTURECORE_STATE_H
#define LOCKCHECK_CAPTURECORE_STATE_H

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
       HL_HARDIRQS_OFF, HL_REFERENCES, HL_PREV_CHAIN_KEY, HL_EVENT, HL_SOURCE, HL_HELD_EVIDENCE, HL_N };
static const char *held_names_[HL_N] = {"cls", "lock", "instance", "subclass", "read", "trylock", "check", "nest",
                                        "irq_context", "hardirqs_off", "references", "prev_chain_key", "_event",
                                        "_source", "held_evidence"};
enum { T_NAME, T_CHAIN_KEY, T_CPU, T_PINS, T_HARDIRQS_ENABLED, T_SOFTIRQS_ENABLED, T_HARDIRQ_DEPTH, T_SOFTIRQ_DEPTH,
       T_USAGE_NEED, T_IRQ_EVENTS, T_IRQ_KNOWN, T_HARDIRQ_THREADED, T_HELD, T_ACQUIRED_EVER, T_N };
static const char *task_names[T_N] = {"name", "chain_key", "cpu", "pins", "hardirqs_enabled", "softirqs_enabled",
                                      "hardirq_depth", "softirq_depth", "usage_need", "irq_events", "irq_known",
                                      "hardirq_threaded", "held", "acquired_ever"};
/* the irq-state ops (events.py), in this order in `irq` */
enum { OP_IRQS_OFF, OP_IRQS_ON, OP_SOFTIRQS_OFF, OP_SOFTIRQS_ON, OP_HARDIRQ_ENTER, OP_SOFTIRQ_ENTER, OP_HARDIRQ_EXIT,
       OP_SOFTIRQ_EXIT, OP_N };

enum { R_LOCKS, R_LIMIT, R_LAST, R_N };
enum { S_STATE, S_NONE, S_RULE, S_CHANGED, S_N };  /* (S_CHANGED: annotation_trust.STATE_CHANGED) */
static const char *recent_names[R_N] = {"_locks", "_limit", "last"};

#define SLOT(o, off) (*(PyObject **)((char *)(o) + (off)))

static PyObject *s_preempt_rt, *s_stopped, *s_stamp_key, *s_probe_known, *s_contention, *s_capture, *s_trusted, *s_untrusted_from, *s_fast_depth,
    *s_events, *s_chain_hits, *s_add, *s_last, *s_usage, *s_irq_context, *s_state, *s_none, *s_rule, *s_state_changed, *s_subclasses, *s_subclass_explaining, *s_subclass, *s_check0,
    *s_rule_prefix, *s_empty;
static PyObject *small_ints[2];

/* An acquisition the filter applied whose Python objects -- the HeldLock on the task's held list, its
 * deferred event, the annotator's held entry, the reader's `held[(task, instance)]` -- are not made
 * yet: made (`pend_flush`) before anything could look at them, or never, when a lock line releases
 * it while it is the task's innermost (_capturecore_pending.h).  Every other effect of the acquisition
 * is applied at once.  Up to PEND_MAX of them, all of one task's view (nested acquisitions), the
 * innermost last. */
#define PEND_MAX 8
/* o[0 .. P_OWNED): owned references; o[P_OWNED .. P_N): borrowed from the line's head and body tuples
 * (o[P_HEAD], o[P_BODY]), which the entry owns: a tuple's items are its own while it lives, so they
 * outlive the entry (one reference pair an entry instead of six) */
enum { P_HEAD, P_BODY, P_MODE, P_TIMESTAMP, P_HELD, P_A_HELD, P_CTX, P_KEY, P_IRQ_CONTEXT, P_HARDIRQS_OFF, P_PREV_KEY,
       P_VIEW, P_CLS, P_OWNED, P_TASK = P_OWNED, P_NAME, P_INSTANCE, P_CPU, P_DISPLAY, P_N };
typedef struct {
    int names;          /* `held[key] = [name, 1]` is still to do (there was no entry) */
    int trylock, check;
    int subclass;       /* the annotator's (_capturecore_annotate.h); P_CLS its class (the name when 0) */
    long long lineno;
    PyObject *o[P_N];   /* owned (below P_OWNED) while active; a_held None: the annotator does not run; timestamp NULL: */
    char ts[48];        /* made of these bytes (`ts_len`, at most 40: take_line's) when needed */
    Py_ssize_t ts_len;
} Pending;

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
    /* `transitions` and `ctx_memo`'s answers for small arguments, kept in C (a tuple or an int made, hashed
     * and looked up cost ~250 instructions an irq-context change): context_transition(before, state) for
     * both below MEMO_STATES, annotations.context_after(ctx, op) for ctx below MEMO_CTX (by ctx * 8 + op) */
#define MEMO_STATES 16
#define MEMO_CTX 64
    PyObject *transition_of[MEMO_STATES * MEMO_STATES], *ctx_after_of[MEMO_CTX * 8];
    /* usage_needs[(hardirq, softirq, softirqs enabled)] by h * 4 + s * 2 + e (a tuple built and looked up
     * cost ~950 instructions a refresh, callgrind) */
    PyObject *need_of[8];
    /* the annotator's ctx[task] irq_here just set (a new reference, for the task's slot), or NULL */
    PyObject *irq_actx;
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
    Py_ssize_t chunk_end;   /* and where its last one ends (a `(bytes, start, stop)` item's stop) */
    PyObject *reject;       /* source.Checking.reject: a `(bytes, start, stop)` item given back, or NULL */
    PyObject *held_chunk;   /* the block whose last line is the current line */
    CapCache cache;         /* line pieces by their bytes, key pairs, tasks (_capcache.h) */
    KnownChains known;      /* chain keys found in the chain cache, and their ints (_capturecore_known.h) */
    RecentRings rings;      /* the recent locks' moves not made yet (_capturecore_recent.h) */
    TaskSlot *cur;          /* the slot of the task of the line being taken (take_line), or NULL */
    /* the annotator's counts (`tries[file]`, `sources`) not added yet */
    long long tries_delta[2], sources_delta[S_N];
    int sources_order[S_N], sources_seen;  /* the order the three sources came in since (a Counter keeps it) */
    PyObject *unchecked;    /* dict: class -> [origin, count] of `changes[("check0", class, "rule " + origin)]` to add */
    /* pure functions' answers kept: `read_policy` (when it is ftrace_context.read_mode) by class, and
     * annotations.context_after by ctx * 8 + op */
    PyObject *read_memo, *ctx_memo;
    /* class -> ((subclass, "CLASS/N", changes key), ...) of the kernel state's subclasses (_capturecore_annotate.h) */
    PyObject *subs_memo;
    int read_pure;
    /* read on resume */
    int probe_known, contention, a_capture, a_trusted;
    PyObject *untrusted_from;
    Py_ssize_t fast_depth;
    long long ev_now, hits_now;
    /* the latest acquisitions' Python objects not made yet (_capturecore_pending.h): pend[0..npend) */
    Pending pend[PEND_MAX];
    int npend;
    /* counts for the reader's statistics (fast_capture adds them) */
    long long context_events, lineno, events, hardirq_lines, softirq_lines, resolved, acquisitions, contention_lines, taken,
        elided;  /* (acquisition/release pairs whose objects were never made: _capturecore_pending.h) */
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
    known_clear(&self->known);
    rings_clear(&self->rings);
    for (int k = 0; k < PEND_MAX; k++)
        for (int i = 0; i < P_OWNED; i++)
            Py_CLEAR(self->pend[k].o[i]);
    self->npend = 0;
    Py_CLEAR(self->untrusted_from); Py_CLEAR(self->recent_type); Py_CLEAR(self->move_to_end);
    for (int i = 0; i < OP_N; i++)
        Py_CLEAR(self->irq_ops[i]);
    Py_CLEAR(self->evidence); Py_CLEAR(self->usage_needs); Py_CLEAR(self->used_only); Py_CLEAR(self->context_after);
    Py_CLEAR(self->transitions); Py_CLEAR(self->irq); Py_CLEAR(self->unchecked); Py_CLEAR(self->subs_memo); Py_CLEAR(self->read_memo);
    Py_CLEAR(self->ctx_memo); Py_CLEAR(self->chunk); Py_CLEAR(self->held_chunk); Py_CLEAR(self->reject);
    Py_CLEAR(self->tasks); Py_CLEAR(self->transition); Py_CLEAR(self->context_hit); Py_CLEAR(self->annotated);
    Py_CLEAR(self->irq_context_fn);
    for (int i = 0; i < 64; i++)
        Py_CLEAR(self->irq_context_of[i]);
    for (int i = 0; i < MEMO_STATES * MEMO_STATES; i++)
        Py_CLEAR(self->transition_of[i]);
    for (int i = 0; i < MEMO_CTX * 8; i++)
        Py_CLEAR(self->ctx_after_of[i]);
    for (int i = 0; i < 8; i++)
        Py_CLEAR(self->need_of[i]);
    Py_CLEAR(self->irq_actx);
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
    Py_VISIT(self->unchecked); Py_VISIT(self->subs_memo); Py_VISIT(self->read_memo); Py_VISIT(self->ctx_memo); Py_VISIT(self->chunk);
    Py_VISIT(self->held_chunk); Py_VISIT(self->reject); Py_VISIT(self->tasks); Py_VISIT(self->transition);
    Py_VISIT(self->context_hit); Py_VISIT(self->annotated); Py_VISIT(self->irq_context_fn);
    for (int i = 0; i < 64; i++)
        Py_VISIT(self->irq_context_of[i]);
    for (int i = 0; i < MEMO_STATES * MEMO_STATES; i++)
        Py_VISIT(self->transition_of[i]);
    for (int i = 0; i < MEMO_CTX * 8; i++)
        Py_VISIT(self->ctx_after_of[i]);
    for (int i = 0; i < 8; i++)
        Py_VISIT(self->need_of[i]);
    Py_VISIT(self->irq_actx);
    for (int i = 0; i < OP_N; i++)
        Py_VISIT(self->irq_ops[i]);
    for (int k = 0; k < PEND_MAX; k++)
        for (int i = 0; i < P_OWNED; i++)
            Py_VISIT(self->pend[k].o[i]);
    int r = rings_traverse(&self->rings, visit, arg);
    return r ? r : capcache_traverse(&self->cache, visit, arg);
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
    PyObject *lines, *caches, *reader, *stats, *checker, *annotated, *make, *rule_tables, *irq_args, *reject = Py_None;
    long tick;
    if (!PyArg_ParseTuple(args, "OO!OOOOO!O!lO!|O", &lines, &PyTuple_Type, &caches, &reader, &stats, &checker,
                          &annotated, &PyTuple_Type, &make, &PyTuple_Type, &rule_tables, &tick, &PyTuple_Type, &irq_args,
                          &reject))
        return -1;
    /* reject: source.Checking.reject, for `(bytes, start, stop)` items (_capturecore_read.h), or None */
    Py_XSETREF(self->reject, reject == Py_None ? NULL : Py_NewRef(reject));
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
    self->rings.move_to_end = self->move_to_end;
    self->rings.locks_off = self->recent_off[R_LOCKS];
    self->rings.last_off = self->recent_off[R_LAST];
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
    self->subs_memo = PyDict_New();
    self->read_memo = PyDict_New();
    self->ctx_memo = PyDict_New();
    if (self->unchecked == NULL || self->subs_memo == NULL || self->read_memo == NULL || self->ctx_memo == NULL)
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
    if (known_start(&self->known, self->chain_cache) < 0)
        return -1;
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

#endif
