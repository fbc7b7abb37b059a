/*
 * The hit path itself: an acquisition onto a chain the checker has cached, and the release of
 * the innermost entry, done to the checker's own objects (part of _tracked.c's one translation
 * unit, included after _tracked_cache.h).
 *
 * Why a unit: this is the one place the compiled plugin changes lockdep state, and it changes it
 * only where Python's `Recorder.acquired`/`released` would change exactly the same (same
 * `Event` and `HeldLock` classes and fields, the chain key as the checker hashes it, the usage
 * test and the rules read from `rules.compiled_tables()`); everything else returns 0 and the
 * Python path records it.
 */

/* -- the hit path ------------------------------------------------------------------------ */

/* HeldLock and Event objects nobody else sees any more (a popped entry only its stack held),
 * kept for the next push with their fields cleared and out of the collector's sight: a push
 * and a pop then allocate nothing */
#define FREE_MAX 64
static PyObject *free_ev[FREE_MAX], *free_hl[FREE_MAX];
static int n_free_ev, n_free_hl;

static PyObject *
new_obj(PyTypeObject *tp, PyObject **list, int *n)
{
    if (*n > 0) {
        PyObject *o = list[--*n];
        PyObject_GC_Track(o);
        return o;
    }
    return tp->tp_alloc(tp, 0);
}

/* clear the slots of `o` (their values are str, int, bool, None, tuples, an Event and the
 * checker's held Evidence, which holds only str, int and float: releasing
 * them runs no Python code) and keep it; `o`'s reference is taken */
static void
recycle(PyObject *o, const Py_ssize_t *off, int nslots, PyObject **list, int *n)
{
    PyObject *vals[32]; /* at least the most slots of Event and HeldLock */
    for (int i = 0; i < nslots; i++) {
        vals[i] = SLOT(o, off[i]);
        SLOT(o, off[i]) = NULL;
    }
    PyObject_GC_UnTrack(o);
    list[(*n)++] = o;
    for (int i = 0; i < nslots; i++)
        Py_XDECREF(vals[i]);
}

static void
recycle_held(PyObject *top)
{
    if (Py_REFCNT(top) != 1 || Py_TYPE(top) != held_type || n_free_hl >= FREE_MAX) {
        Py_DECREF(top);
        return;
    }
    PyObject *ev = SLOT(top, hl_off[HL_EVENT]);
    if (ev != NULL && Py_REFCNT(ev) == 1 && Py_TYPE(ev) == event_type && n_free_ev < FREE_MAX) {
        SLOT(top, hl_off[HL_EVENT]) = NULL;
        recycle(ev, ev_off, EV_N, free_ev, &n_free_ev);
    }
    recycle(top, hl_off, HL_N, free_hl, &n_free_hl);
}

/* `CLASS/N` (events.class_name), made once per class and subclass (a new reference) */
static PyObject *subnames;

static PyObject *
subclass_name(PyObject *cls, int subclass)
{
    if (subnames == NULL && (subnames = PyDict_New()) == NULL)
        return NULL;
    PyObject *names = PyDict_GetItemWithError(subnames, cls);
    if (names == NULL) {
        if (PyErr_Occurred())
            return NULL;
        names = PyList_New(8);
        if (names == NULL)
            return NULL;
        for (int i = 0; i < 8; i++)
            PyList_SET_ITEM(names, i, Py_NewRef(Py_None));
        int r = PyDict_SetItem(subnames, cls, names);
        Py_DECREF(names);
        if (r < 0)
            return NULL;
    }
    PyObject *name = PyList_GET_ITEM(names, subclass & 7);
    if (name == Py_None) {
        name = PyUnicode_FromFormat("%U/%d", cls, subclass);
        if (name == NULL)
            return NULL;
        PyList_SetItem(names, subclass & 7, name);  /* steals it */
    }
    return Py_NewRef(name);
}

typedef struct {
    PyObject_HEAD
    PyObject *real, *cls, *inst, *holder, *depth;
    double since;  /* when the holder took it (`_since`, time.monotonic()'s clock): a hang report's "held for" */
    PyObject *weakreflist;
} BaseObject;

/* Record the acquire of `self` (as `subclass`) by (task, comm), called from `frame`, if it is a
 * chain-cache hit with nothing new: 1 recorded, 0 not (nothing changed), -1 error. */
static int record_acquire_ci(PyObject *cls, PyObject *inst, int read, PyObject *rec, PyObject *task,
                             PyObject *comm, PyFrameObject *frame, int subclass, int trylock);

static int
record_acquire(BaseObject *self, PyObject *rec, PyObject *task, PyObject *comm, PyFrameObject *frame,
               int subclass, int trylock)
{
    return record_acquire_ci(self->cls, self->inst, 0, rec, task, comm, frame, subclass, trylock);
}

/* record_acquire of lock class `cls`, instance `inst`, in mode `read` (events.WRITE 0, READ 1,
 * RREAD 2): what the asyncio locks, which are no `BaseObject`, call */
static int
record_acquire_ci(PyObject *cls, PyObject *inst, int read, PyObject *rec, PyObject *task, PyObject *comm,
                  PyFrameObject *frame, int subclass, int trylock)
{
    PyObject *site = site_of(rec, frame);
    if (site == NULL)
        return PyErr_Occurred() ? -1 : 0;
    Py_INCREF(site);
    if (cls == NULL || inst == NULL || !PyUnicode_CheckExact(cls)) {
        Py_DECREF(site);
        return 0;
    }
    PyObject *clsname = subclass ? subclass_name(cls, subclass) : Py_NewRef(cls);
    PyObject *sub = PyLong_FromLong(subclass);
    PyObject *me = NULL;
    /* the objects the push keeps; made first: an allocation may collect garbage, which runs
     * finalizers -- Python code, which may take locks -- and nothing must run after the checks */
    PyObject *ev = new_obj(event_type, free_ev, &n_free_ev);
    PyObject *hl = new_obj(held_type, free_hl, &n_free_hl);
    PyObject *key = NULL;
    int result = -1;
    if (clsname == NULL || sub == NULL || ev == NULL || hl == NULL)
        goto done;
    if (PyUnicode_READY(clsname) < 0 || PyObject_Hash(clsname) == -1)
        goto done;
    result = 0;

    /* -- the checks: Recorder.acquired / feed / Checker.feed / lock_acquire would do nothing else */
    if (kget(tracked_globals, s_rec) != rec)
        goto done;  /* stopped meanwhile (a finalizer ran) */
    PyObject *v = kget(rec_dict, s_trace);
    if (v != Py_None)
        goto done;  /* a trace is written: the Python path writes it under the feed lock */
    PyObject *check = kget(rec_dict, s_check);
    if (check != Py_True)
        goto done;
    if (PyObject_Length(pending) != 0)
        goto done;
    if (PyDict_GET_SIZE(orphans))
        goto done;
    PyObject *busy = kget(rec_dict, s_busy);
    if (busy != NULL && PySet_Check(busy) && PySet_GET_SIZE(busy)) {
        me = PyLong_FromUnsignedLong(PyThread_get_thread_ident());
        if (me == NULL) {
            result = -1;
            goto done;
        }
    }
    /* another thread between entering the recorder and taking its lock is fine, but this one
     * would queue its event: left to Python (rare) */
    if (busy == NULL || !PySet_Check(busy) || (PySet_GET_SIZE(busy) && PySet_Contains(busy, me) != 0))
        goto done;
    PyObject *feed_lock = kget(rec_dict, s_feed_lock);
    if (feed_lock == NULL)
        goto done;
    int in_use = feed_lock_busy(feed_lock);
    if (in_use < 0) {
        result = -1;
        goto done;
    }
    if (in_use)
        goto done;  /* someone is inside the checker: wait for it the Python way */
    if (kget(checker_dict, s_stopped) != Py_False)
        goto done;
    PyObject *ts = kget(tasks, task);
    if (ts == NULL || Py_TYPE(ts) != task_type)
        goto done;
    PyObject *held = SLOT(ts, ts_off[TS_HELD]);
    PyObject *chain_key = SLOT(ts, ts_off[TS_CHAIN_KEY]);
    PyObject *hdepth = SLOT(ts, ts_off[TS_HARDIRQ_DEPTH]), *sdepth = SLOT(ts, ts_off[TS_SOFTIRQ_DEPTH]);
    PyObject *henabled = SLOT(ts, ts_off[TS_HARDIRQS_ENABLED]), *need = SLOT(ts, ts_off[TS_USAGE_NEED]);
    PyObject *ever = SLOT(ts, ts_off[TS_ACQUIRED_EVER]);
    if (held == NULL || !PyList_CheckExact(held) || chain_key == NULL || !PyLong_CheckExact(chain_key)
        || hdepth == NULL || !PyLong_CheckExact(hdepth) || sdepth == NULL || !PyLong_CheckExact(sdepth)
        || henabled == NULL || !PyBool_Check(henabled) || need == NULL || !PyList_CheckExact(need)
        || PyList_GET_SIZE(need) < 8 || ever != Py_None)
        goto done;
    if (SLOT(ts, ts_off[TS_STALE]) != Py_None)
        goto done;  /* chain keys left stale by an out-of-order release (lazy_release): Python settles them */
    Py_ssize_t depth = PyList_GET_SIZE(held);
    /* the checker's own limit (Checker.max_depth: the plugin's --lockcheck-max-depth), else the kernel's;
     * the acquisition that reaches it is Python's to report */
    PyObject *limit = kget(checker_dict, s_max_depth);
    Py_ssize_t most = limit != NULL && PyLong_CheckExact(limit) ? PyLong_AsSsize_t(limit) : max_depth;
    if (most == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        goto done;
    }
    if (depth + 1 >= most)
        goto done;
    PyObject *node = kget(nodes, clsname);
    if (node == NULL || !PyDict_CheckExact(node))  /* a class of the graph (_node and _succ agree) */
        goto done;
    PyObject *usage = kget(node, s_usage);
    int in_hardirq = nonzero(hdepth), in_softirq = nonzero(sdepth);
    int hardirqs_off = rules_hardirqs_off(henabled == Py_True, in_hardirq);
    PyObject *needed = PyList_GET_ITEM(need, rules_usage_index(read, trylock, hardirqs_off));
    if (usage == NULL || !PyLong_CheckExact(usage) || !PyLong_CheckExact(needed))
        goto done;
    long u = PyLong_AsLong(usage), n = PyLong_AsLong(needed);
    if ((u == -1 || n == -1) && PyErr_Occurred()) {
        PyErr_Clear();
        goto done;
    }
    if (n & ~u)
        goto done;  /* a new usage bit: mark_usage (and its checks) */
    long irq_context = (long)((rule_contexts >> (2 * ((in_hardirq ? 2 : 0) + (in_softirq ? 1 : 0)))) & 3);
    PyObject *base = chain_key;
    if (depth) {
        PyObject *top = PyList_GET_ITEM(held, depth - 1);
        if (Py_TYPE(top) != held_type)
            goto done;
        PyObject *top_irq = SLOT(top, hl_off[HL_IRQ]);
        if (top_irq == NULL || !PyLong_CheckExact(top_irq))
            goto done;
        long top_context = PyLong_AsLong(top_irq);
        if (top_context < 0 || top_context > 3)
            goto done;
        if ((rule_separate >> (4 * top_context + irq_context)) & 1)
            base = initial_key;
    }
    PyObject *mode = read == 0 ? small_zero : read == 1 ? small_one : small_two;
    Py_hash_t h = hash3(base, clsname, mode);
    if (h == -1) {
        PyErr_Clear();
        goto done;
    }
    key = PyLong_FromSsize_t(h);
    if (key == NULL) {
        result = -1;
        goto done;
    }
    /* a chain not validated (a trylock: validate_chain returns at once) is pushed, not counted */
    int validates = (int)((rule_validates >> (trylock ? 1 : 0)) & 1);
    int cached = validates ? PySet_Contains(chain_cache, key) : 1;
    if (cached != 1) {
        if (cached < 0)
            PyErr_Clear();
        goto done;  /* a chain not seen before: validate_chain */
    }
    PyObject *irq = PyLong_FromLong(irq_context);
    if (irq == NULL) {
        result = -1;
        goto done;
    }
    if (PyErr_Occurred())  /* a lookup above failed: not for us */
    {
        Py_DECREF(irq);
        PyErr_Clear();
        goto done;
    }

    /* -- the changes: nothing below runs Python code */
    PyObject *file = PyTuple_GET_ITEM(site, 0), *line = PyTuple_GET_ITEM(site, 1),
             *at = PyTuple_GET_ITEM(site, 2);
    PyObject *try_ = trylock ? Py_True : Py_False;
    PyObject *evf[] = {task, op_acquire, cls, inst, mode, try_, sub, Py_None, check, at,
                           Py_None, Py_None, file, line, comm, Py_False, Py_None};
    _Static_assert(sizeof evf / sizeof *evf == EV_N, "a value for every Event slot the core fills");
    for (int i = 0; i < EV_N; i++)
        SLOT(ev, ev_off[i]) = Py_NewRef(evf[i]);
    PyObject *hlf[] = {clsname, cls, inst, sub, mode, try_, Py_True, Py_None, irq,
                           hardirqs_off ? Py_True : Py_False, small_zero, chain_key, ev, Py_None,
                           Py_None /* held_evidence: made by the checker's first dependency under it */};
    _Static_assert(sizeof hlf / sizeof *hlf == HL_N, "a value for every HeldLock slot the core fills");
    for (int i = 0; i < HL_N; i++)
        SLOT(hl, hl_off[i]) = Py_NewRef(hlf[i]);
    Py_DECREF(irq);
    if (PyList_Append(held, hl) < 0) {
        result = -1;
        goto done;
    }
    PyObject *old_key = SLOT(ts, ts_off[TS_CHAIN_KEY]);
    SLOT(ts, ts_off[TS_CHAIN_KEY]) = Py_NewRef(key);
    PyObject *old_name = SLOT(ts, ts_off[TS_NAME]);
    SLOT(ts, ts_off[TS_NAME]) = Py_NewRef(comm);
    pend_events++;
    if (validates)
        pend_hits++;
    result = 1;
    Py_DECREF(old_key);
    Py_XDECREF(old_name);
done:
    if (result == 0 && PyErr_Occurred())
        PyErr_Clear();
    Py_DECREF(site);
    Py_XDECREF(clsname);
    Py_XDECREF(sub);
    Py_XDECREF(me);
    Py_XDECREF(ev);
    Py_XDECREF(hl);
    Py_XDECREF(key);
    return result;
}

/* Recorder.released(holder, cls, inst) when it is the innermost entry's plain release:
 * 1 done, 0 not for the hit path (nothing changed), -1 error. */
static int record_release_ci(PyObject *cls, PyObject *inst, PyObject *rec, PyObject *holder);

static int
record_release(BaseObject *self, PyObject *rec, PyObject *holder)
{
    int r = record_release_ci(self->cls, self->inst, rec, holder);
    if (r == 1)
        Py_XSETREF(self->holder, Py_NewRef(Py_None));  /* a str: releasing it runs no Python code */
    return r;
}

/* record_release of lock class `cls`, instance `inst` (the asyncio locks' too) */
static int
record_release_ci(PyObject *cls, PyObject *inst, PyObject *rec, PyObject *holder)
{
    PyObject *v = kget(rec_dict, s_trace);
    if (v != Py_None || PyObject_Length(pending) != 0)
        goto miss;
    PyObject *busy = kget(rec_dict, s_busy);
    if (busy == NULL || !PySet_Check(busy))
        goto miss;
    if (PySet_GET_SIZE(busy)) {
        PyObject *me = PyLong_FromUnsignedLong(PyThread_get_thread_ident());
        if (me == NULL)
            return -1;
        int in = PySet_Contains(busy, me);
        Py_DECREF(me);
        if (in != 0)
            goto miss;
    }
    PyObject *feed_lock = kget(rec_dict, s_feed_lock);
    if (feed_lock == NULL)
        goto miss;
    int in_use = feed_lock_busy(feed_lock);
    if (in_use < 0)
        return -1;
    if (in_use)
        goto miss;
    if (kget(checker_dict, s_stopped) != Py_False)
        goto miss;
    PyObject *ts = kget(tasks, holder);
    if (ts == NULL || Py_TYPE(ts) != task_type)
        goto miss;
    PyObject *held = SLOT(ts, ts_off[TS_HELD]);
    if (held == NULL || !PyList_CheckExact(held) || PyList_GET_SIZE(held) == 0)
        goto miss;
    if (SLOT(ts, ts_off[TS_STALE]) != Py_None)
        goto miss;  /* the innermost's prev_chain_key may be stale (lazy_release) */
    PyObject *top = PyList_GET_ITEM(held, PyList_GET_SIZE(held) - 1);
    if (Py_TYPE(top) != held_type)
        goto miss;
    PyObject *tinst = SLOT(top, hl_off[HL_INSTANCE]), *tlock = SLOT(top, hl_off[HL_LOCK]);
    PyObject *refs = SLOT(top, hl_off[HL_REFERENCES]), *prev = SLOT(top, hl_off[HL_PREV_KEY]);
    if (tinst == NULL || tlock == NULL || refs == NULL || prev == NULL || inst == NULL || cls == NULL)
        goto miss;
    if (str_eq(tinst, inst) != 1 || str_eq(tlock, cls) != 1)
        goto miss;
    if (!PyLong_CheckExact(refs) || nonzero(refs))
        goto miss;
    if (PyErr_Occurred())
        goto miss;
    /* the changes (Checker.release_innermost); the popped entry is released last */
    Py_SET_SIZE(held, PyList_GET_SIZE(held) - 1);  /* list.pop(): the list's reference is ours now */
    PyObject *old_key = SLOT(ts, ts_off[TS_CHAIN_KEY]);
    SLOT(ts, ts_off[TS_CHAIN_KEY]) = Py_NewRef(prev);
    pend_events++;
    int r = 0;
    Py_XDECREF(old_key);
    recycle_held(top);
    return r < 0 ? -1 : 1;
miss:
    if (PyErr_Occurred())
        PyErr_Clear();
    return 0;
}
