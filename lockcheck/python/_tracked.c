/*
 * lockcheck.python._trackedcore: the compiled hit path of the pytest plugin's tracked locks.
 *
 * A tracked Lock/RLock (lockcheck/python/tracked.py) turns each acquire and release
 * into a `Recorder.acquired`/`released` call, and the recorder feeds the
 * checker.  Almost every acquisition of a running test suite is a chain the
 * checker has validated before: nothing is found, the task's held stack gets
 * one entry and a new chain key, two counters move.  That case is done here,
 * in one C call with no Python frame: who the thread is, where the acquire is
 * (the site, cached per code object and line), the `Event` and `HeldLock` the
 * Python path would build (same classes, same fields), the usage-bit test,
 * the chain key (Python's own tuple hash, computed without the tuple), the
 * chain-cache lookup, the push; the release of the innermost entry; the real
 * lock's non-blocking try (the wait-for detector's first step).
 *
 * Everything else -- a new chain, a new usage bit, a new task, a contended
 * lock, a re-acquire by the holder, a queued event, a trace being written, a
 * thread already inside the recorder, timeouts and trylocks -- is handed,
 * before anything was changed, to the Python methods the pure build uses
 * (`_py_enter`, `_py_acquire`, `_py_release`...), which stay the one place the
 * plugin's semantics live.  tests/test_trackedcore.py holds both builds to
 * identical findings, graph and statistics.
 *
 * Atomicity: the hit path runs under the GIL and calls no Python code between
 * its checks and its changes (all allocations that could start a garbage
 * collection come first; only str, int and float objects are released), so
 * it is one step for every other thread, as the Python path is one step under
 * the recorder's feed lock -- and it is taken only when that lock is free.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include "_tuplehash.h"
#include "_cshared.h"
#include <frameobject.h>
#include <structmember.h>
#include <time.h>

/* -- what setup() gives: classes, slot offsets, names ---------------------------------- */

static PyObject *tracked_globals;   /* lockcheck.python.tracked's module dict: `_rec` is read there */
static PyObject *refresh_func;      /* tracked._c_refresh(rec): the recorder's parts, or None */
static PyObject *site_func;         /* tracked._c_site(rec, frame): a site tuple, or None (skip) */
static PyTypeObject *event_type, *held_type, *task_type;
static PyObject *op_acquire;        /* events.ACQUIRE */
static PyObject *initial_key;       /* tasks.INITIAL_CHAIN_KEY */
static Py_ssize_t max_depth;        /* checker.MAX_LOCK_DEPTH */
static int ready;

enum { EV_TASK, EV_OP, EV_LOCK, EV_INSTANCE, EV_MODE, EV_TRYLOCK, EV_SUBCLASS, EV_NEST, EV_CHECK, EV_AT,
       EV_TS, EV_CPU, EV_FILE, EV_LINE, EV_COMM, EV_EXACT, EV_PROPS, EV_N };
static const char *ev_names[EV_N] = {"task", "op", "lock", "instance", "mode", "trylock", "subclass", "nest",
                                     "check", "at", "ts", "cpu", "file", "line", "comm", "exact", "props"};
static Py_ssize_t ev_off[EV_N];

enum { HL_CLS, HL_LOCK, HL_INSTANCE, HL_SUBCLASS, HL_READ, HL_TRYLOCK, HL_CHECK, HL_NEST, HL_IRQ,
       HL_HARDIRQS_OFF, HL_REFERENCES, HL_PREV_KEY, HL_EVENT, HL_SOURCE, HL_N };
static const char *hl_names[HL_N] = {"cls", "lock", "instance", "subclass", "read", "trylock", "check", "nest",
                                     "irq_context", "hardirqs_off", "references", "prev_chain_key", "_event",
                                     "_source"};
static Py_ssize_t hl_off[HL_N];

enum { TS_NAME, TS_HELD, TS_CHAIN_KEY, TS_HARDIRQ_DEPTH, TS_SOFTIRQ_DEPTH, TS_HARDIRQS_ENABLED,
       TS_ACQUIRED_EVER, TS_USAGE_NEED, TS_STALE, TS_N };
static const char *ts_names[TS_N] = {"name", "held", "chain_key", "hardirq_depth", "softirq_depth",
                                     "hardirqs_enabled", "acquired_ever", "usage_need", "stale"};
static Py_ssize_t ts_off[TS_N];

#define SLOT(obj, off) (*(PyObject **)((char *)(obj) + (off)))

/* dict[key] (borrowed; NULL: missing or an error), remembered while the dict is unchanged: a
 * dict's version tag changes with every change of it, and no two dicts share one, so an entry
 * found under the same (dict, version, key object) is the value still there (the key is held,
 * so its address is not reused meanwhile) */
#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030D0000
#define DICT_VERSION(d) (((PyDictObject *)(d))->ma_version_tag)
#endif
#define KSLOTS 512
typedef struct { PyObject *dict; uint64_t ver; PyObject *key; PyObject *value; } KEntry;
static KEntry kcache[KSLOTS];

static PyObject *
kget(PyObject *dict, PyObject *key)
{
#ifdef DICT_VERSION
    size_t h = (((size_t)dict >> 4) ^ (((size_t)key >> 4) * 31)) & (KSLOTS - 1);
    KEntry *e = &kcache[h];
    if (e->dict == dict && e->key == key && e->ver == DICT_VERSION(dict))
        return e->value;
    PyObject *v = PyDict_GetItemWithError(dict, key);
    if (v != NULL) {
        PyObject *old = e->key;
        e->dict = dict;
        e->ver = DICT_VERSION(dict);
        e->key = Py_NewRef(key);
        e->value = v;
        Py_XDECREF(old);  /* a str: releasing it runs no Python code */
    }
    return v;
#else
    return PyDict_GetItemWithError(dict, key);
#endif
}


/* interned names */
static PyObject *s_max_depth, *s_rec, *s_trace, *s_check, *s_gen, *s_feed_lock, *s_busy, *s_stopped, *s_usage, *s_events,
    *s_chain_hits, *s_info, *s_locked, *s_acquire, *s_release, *s_is_owned, *s_thread_task, *s_py_enter,
    *s_py_acquire, *s_py_release, *s_contended, *s_tried, *s_released, *s_self_released, *s_bad_releases,
    *s_nested_enter, *s_nested_exit;
static PyObject *small_zero, *small_one, *small_two;

/* Whether an int (a depth, a count) is not 0.  Not Py_SIZE: since 3.12 an int's ob_size is no
 * longer its signed digit count (a tracked RLock's release went unrecorded there).  An int's
 * truth test cannot fail; anything else that would fail counts as not 0 (the slow path). */
static inline int
nonzero(PyObject *v)
{
    return PyObject_IsTrue(v) != 0;
}

/* -- the recorder the caches are for ------------------------------------------------------ */

static PyObject *cur_rec;           /* the recorder the fields below belong to (strong) */
static int cur_ok;                  /* 0: that recorder is not for the hit path (a subclass...) */
static long long pend_events, pend_hits;
static int flush_stats(void);
static PyObject *rec_dict, *checker_dict, *tasks, *chain_cache, *classes, *nodes, *stats_dict, *local,
    *pending, *orphans;
/* lockdep's boolean rules as `rules.compiled_tables()` gives them for this recorder: this core
 * decides none of them itself (validates_chain, separate_irq_context, task_irq_context) */
static unsigned long rule_validates, rule_separate, rule_contexts; /* (no nest_lock here: Python's) */

/* sites: (code object, instruction) -> the recorder's site tuple, or None for a frame the site
 * skips (an instruction has one line: no line-table walk per acquire) */
#define SITE_SLOTS 4096
typedef struct { PyObject *code; int line; PyObject *site; } SiteEntry;
static SiteEntry sites[SITE_SLOTS];

static void
forget_sites(void)
{
    for (int i = 0; i < SITE_SLOTS; i++) {
        Py_CLEAR(sites[i].code);
        Py_CLEAR(sites[i].site);
    }
}

/* this thread's (gen, task, comm) of Recorder.thread_task, as last read (a strong reference, per
 * OS thread); valid while `epoch` is unchanged and the gen is the recorder's */
static unsigned long epoch = 1;
static _Thread_local PyObject *tl_info;
static _Thread_local unsigned long tl_epoch;
/* the feed lock's bound `locked` */
static PyObject *feed_lock_seen, *feed_locked;

static void forget_async(void);

static void
forget_rec(void)
{
    forget_async();
    if (flush_stats() < 0)
        PyErr_WriteUnraisable(NULL);
    pend_events = pend_hits = 0;
    epoch++;
    Py_CLEAR(feed_lock_seen);
    Py_CLEAR(feed_locked);
    Py_CLEAR(cur_rec);
    Py_CLEAR(rec_dict);
    Py_CLEAR(checker_dict);
    Py_CLEAR(tasks);
    Py_CLEAR(chain_cache);
    Py_CLEAR(classes);
    Py_CLEAR(nodes);
    Py_CLEAR(stats_dict);
    Py_CLEAR(local);
    Py_CLEAR(pending);
    Py_CLEAR(orphans);
    cur_ok = 0;
    forget_sites();
}

/* The active recorder (borrowed), with the caches made for it; NULL: none (or an error set). */
static PyObject *
active_rec(int *ok)
{
    PyObject *rec = kget(tracked_globals, s_rec);
    if (rec == NULL || rec == Py_None) {
        if (cur_rec != NULL && !PyErr_Occurred())
            forget_rec();
        *ok = 0;
        return NULL;
    }
    if (rec != cur_rec) {
        forget_rec();
        Py_INCREF(rec);
        PyObject *parts = PyObject_CallOneArg(refresh_func, rec);
        if (parts == NULL) {
            Py_DECREF(rec);
            return NULL;
        }
        cur_rec = rec;
        unsigned long unused;
        if (PyTuple_Check(parts) && PyTuple_GET_SIZE(parts) == 11
            && PyArg_ParseTuple(PyTuple_GET_ITEM(parts, 10), "kkkk", &rule_validates, &rule_separate, &unused,
                                &rule_contexts)) {
            PyObject **p = &PyTuple_GET_ITEM(parts, 0);
            rec_dict = Py_NewRef(p[0]);
            checker_dict = Py_NewRef(p[1]);
            tasks = Py_NewRef(p[2]);
            chain_cache = Py_NewRef(p[3]);
            classes = Py_NewRef(p[4]);
            nodes = Py_NewRef(p[5]);
            stats_dict = Py_NewRef(p[6]);
            local = Py_NewRef(p[7]);
            pending = Py_NewRef(p[8]);
            orphans = Py_NewRef(p[9]);
            cur_ok = PyDict_Check(rec_dict) && PyDict_Check(checker_dict) && PyDict_CheckExact(tasks)
                     && PySet_Check(chain_cache) && PyDict_CheckExact(classes) && PyDict_CheckExact(nodes)
                     && PyDict_Check(stats_dict) && PyDict_CheckExact(orphans);
        } else if (PyErr_Occurred()) {
            PyErr_Clear(); /* rule tables not as expected: not for the hit path */
        }
        Py_DECREF(parts);
    }
    *ok = cur_ok;
    return rec;
}

/* -- small helpers ----------------------------------------------------------------------- */

/* Python's hash((a, b, c)) for a tuple of three, without making the tuple (_tuplehash.h). */
static Py_hash_t
hash3(PyObject *a, PyObject *b, PyObject *c)
{
    return tuple_hash3(a, b, c);
}

/* When a lock was taken, as time.monotonic() counts (CLOCK_MONOTONIC).  Read only by a hang
 * report ("held for 2.31s"), so the coarse clock where there is one: the last tick's time, a few
 * ms behind at most and never ahead (a duration read against time.monotonic() is never short),
 * without the cost of reading the fine clock on every acquire (6% of a tracked `with lock:`). */
static double
taken_at(void)
{
    struct timespec ts;
#ifdef CLOCK_MONOTONIC_COARSE
    if (clock_gettime(CLOCK_MONOTONIC_COARSE, &ts) == 0)
        return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
#endif
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* feed_lock.locked(): 1, 0, or -1 (error) */
static int
feed_lock_busy(PyObject *feed_lock)
{
    if (feed_lock != feed_lock_seen) {
        PyObject *bound = PyObject_GetAttr(feed_lock, s_locked);
        if (bound == NULL)
            return -1;
        Py_XSETREF(feed_locked, bound);
        Py_XSETREF(feed_lock_seen, Py_NewRef(feed_lock));
    }
    PyObject *r = PyObject_CallNoArgs(feed_locked);
    if (r == NULL)
        return -1;
    Py_DECREF(r);
    return r != Py_False;
}

static int
str_eq(PyObject *a, PyObject *b)
{
    if (a == b)
        return 1;
    if (PyUnicode_CheckExact(a) && PyUnicode_CheckExact(b))
        return PyUnicode_Compare(a, b) == 0;
    return -1;  /* not two plain strings: not for the hit path */
}

/* dict[key] += n for an int counter (stats); 0 on success */
static int
bump(PyObject *dict, PyObject *key, long long n)
{
    PyObject *v = PyDict_GetItemWithError(dict, key);
    if (v == NULL || !PyLong_CheckExact(v)) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_RuntimeError, "lockcheck: checker stats lost their %R counter", key);
        return -1;
    }
    long long old = PyLong_AsLongLong(v);
    if (old == -1 && PyErr_Occurred())
        return -1;
    PyObject *w = PyLong_FromLongLong(old + n);
    if (w == NULL)
        return -1;
    int r = PyDict_SetItem(dict, key, w);
    Py_DECREF(w);
    return r;
}

/* The checker's `stats.events` and `stats.chain_hits` counted by the hit path and not yet added
 * to it: added whenever they are read or written (tracked._CoreStats) and when the recorder
 * changes -- a dict update per event would cost more than the rest of a hit. */
static int
flush_stats(void)
{
    long long e = pend_events, h = pend_hits;
    if ((e || h) && stats_dict != NULL) {
        pend_events = pend_hits = 0;
        if ((e && bump(stats_dict, s_events, e) < 0) || (h && bump(stats_dict, s_chain_hits, h) < 0))
            return -1;
    }
    return 0;
}

/* (task, comm) of the calling thread, as Recorder.thread_task gives them (new references). */
static int
thread_task(PyObject *rec, PyObject **task, PyObject **comm)
{
    PyObject *info = tl_info;
    if (info != NULL && tl_epoch == epoch) {
        PyObject *gen = kget(rec_dict, s_gen);
        if (gen != NULL && (gen == PyTuple_GET_ITEM(info, 0)
                            || (PyLong_CheckExact(gen) && PyLong_CheckExact(PyTuple_GET_ITEM(info, 0))
                                && PyObject_RichCompareBool(gen, PyTuple_GET_ITEM(info, 0), Py_EQ) == 1))) {
            *task = Py_NewRef(PyTuple_GET_ITEM(info, 1));
            *comm = Py_NewRef(PyTuple_GET_ITEM(info, 2));
            return 0;
        }
        if (PyErr_Occurred())
            return -1;
    }
    int again = 0;
read:
    info = PyObject_GetAttr(local, s_info);
    if (info != NULL) {
        if (PyTuple_CheckExact(info) && PyTuple_GET_SIZE(info) == 3) {
            PyObject *gen = kget(rec_dict, s_gen);
            if (gen != NULL && PyLong_CheckExact(gen) && PyLong_CheckExact(PyTuple_GET_ITEM(info, 0))) {
                int same = PyObject_RichCompareBool(gen, PyTuple_GET_ITEM(info, 0), Py_EQ);
                if (same == 1) {
                    *task = Py_NewRef(PyTuple_GET_ITEM(info, 1));
                    *comm = Py_NewRef(PyTuple_GET_ITEM(info, 2));
                    Py_XSETREF(tl_info, info);
                    tl_epoch = epoch;
                    return 0;
                }
            }
            if (PyErr_Occurred()) {
                Py_DECREF(info);
                return -1;
            }
        }
        Py_DECREF(info);
    }
    else if (PyErr_ExceptionMatches(PyExc_AttributeError))
        PyErr_Clear();
    else
        return -1;
    PyObject *pair = PyObject_CallMethodNoArgs(rec, s_thread_task);
    if (pair == NULL)
        return -1;
    if (!again) {  /* the info it made is read back, and kept for the next time */
        again = 1;
        Py_DECREF(pair);
        goto read;
    }
    if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2) {
        Py_DECREF(pair);
        PyErr_SetString(PyExc_TypeError, "thread_task() must return (task, comm)");
        return -1;
    }
    *task = Py_NewRef(PyTuple_GET_ITEM(pair, 0));
    *comm = Py_NewRef(PyTuple_GET_ITEM(pair, 1));
    Py_DECREF(pair);
    return 0;
}

/* The site tuple (file, line, at) of the acquire called from `frame` -- `user_frame` then
 * `Recorder.site` -- borrowed from the cache; NULL with no error: not for the hit path. */
static PyObject *
site_of(PyObject *rec, PyFrameObject *frame)
{
    PyFrameObject *f = frame;
    Py_INCREF(f);
    for (int i = 0; i < 8; i++) {
        PyCodeObject *code = PyFrame_GetCode(f);
#if PY_VERSION_HEX >= 0x030B0000
        int line = PyFrame_GetLasti(f);
#else
        int line = f->f_lasti;
#endif
        size_t h = (((size_t)code >> 4) ^ ((size_t)line * 2654435761u)) & (SITE_SLOTS - 1);
        SiteEntry *e = &sites[h];
        if (e->code != (PyObject *)code || e->line != line) {
            PyObject *site = PyObject_CallFunctionObjArgs(site_func, rec, (PyObject *)f, NULL);
            if (site == NULL) {
                Py_DECREF(code);
                Py_DECREF(f);
                return NULL;
            }
            if (site != Py_None && !(PyTuple_CheckExact(site) && PyTuple_GET_SIZE(site) == 3)) {
                Py_DECREF(site);
                Py_DECREF(code);
                Py_DECREF(f);
                return NULL;  /* ask Python */
            }
            Py_XSETREF(e->code, (PyObject *)code);  /* the reference taken by PyFrame_GetCode */
            code = NULL;
            e->line = line;
            Py_XSETREF(e->site, site);
        }
        else
            Py_DECREF(code);
        if (e->site != Py_None) {
            Py_DECREF(f);
            return e->site;
        }
        PyFrameObject *back = PyFrame_GetBack(f);
        Py_DECREF(f);
        if (back == NULL)
            return NULL;  /* the outermost frame is skipped code: Python's user_frame decides */
        f = back;
    }
    Py_DECREF(f);
    return NULL;
}

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

/* clear the slots of `o` (their values are str, int, bool, None, tuples and an Event: releasing
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
    int hardirqs_off = henabled != Py_True || in_hardirq;
    PyObject *needed = PyList_GET_ITEM(need, (hardirqs_off ? 4 : 0) | (trylock ? 2 : 0) | (read ? 1 : 0));
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
    PyObject *evf[EV_N] = {task, op_acquire, cls, inst, mode, try_, sub, Py_None, check, at,
                           Py_None, Py_None, file, line, comm, Py_False, Py_None};
    for (int i = 0; i < EV_N; i++)
        SLOT(ev, ev_off[i]) = Py_NewRef(evf[i]);
    PyObject *hlf[HL_N] = {clsname, cls, inst, sub, mode, try_, Py_True, Py_None, irq,
                           hardirqs_off ? Py_True : Py_False, small_zero, chain_key, ev, Py_None};
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

/* -- the tracked types' methods ---------------------------------------------------------- */

/* The non-blocking try of a real lock without the call: `lock.acquire(False)` parses its
 * arguments as keywords, which costs more than the rest of a try.  The layouts below are
 * _threadmodule.c's (3.11, 3.12); `verify_raw` checks them against the real types' behaviour
 * at setup, and anything else is called as a method. */
typedef struct {
    PyObject_HEAD
    PyThread_type_lock lock_lock;
    PyObject *in_weakreflist;
    char locked;
} RawLock;

typedef struct {
    PyObject_HEAD
    PyThread_type_lock rlock_lock;
    unsigned long rlock_owner;
    unsigned long rlock_count;
    PyObject *in_weakreflist;
} RawRLock;

static PyTypeObject *raw_lock_type, *raw_rlock_type;  /* verified: tried in place */

static PyObject *real_call(PyObject *real, PyObject *name, PyObject *arg);

/* real.acquire(False): 1 taken, 0 not, -1 error */
static int
try_real(PyObject *real)
{
    if (Py_TYPE(real) == raw_lock_type) {
        RawLock *l = (RawLock *)real;
        if (PyThread_acquire_lock_timed(l->lock_lock, 0, 0) != PY_LOCK_ACQUIRED)
            return 0;
        l->locked = 1;
        return 1;
    }
    if (Py_TYPE(real) == raw_rlock_type) {
        RawRLock *r = (RawRLock *)real;
        unsigned long tid = PyThread_get_thread_ident();
        if (r->rlock_count > 0 && r->rlock_owner == tid) {
            if (r->rlock_count + 1 > r->rlock_count) {
                r->rlock_count++;
                return 1;
            }
        }
        else if (PyThread_acquire_lock_timed(r->rlock_lock, 0, 0) != PY_LOCK_ACQUIRED)
            return 0;
        else {
            r->rlock_owner = tid;
            r->rlock_count = 1;
            return 1;
        }
    }
    PyObject *ok = real_call(real, s_acquire, Py_False);
    if (ok == NULL)
        return -1;
    int taken = PyObject_IsTrue(ok);
    Py_DECREF(ok);
    return taken;
}

/* real._is_owned() of an RLock: 1, 0, -1 */
static int
rlock_owned(PyObject *real)
{
    if (Py_TYPE(real) == raw_rlock_type) {
        RawRLock *r = (RawRLock *)real;
        return r->rlock_count > 0 && r->rlock_owner == PyThread_get_thread_ident();
    }
    PyObject *res = real_call(real, s_is_owned, NULL);
    if (res == NULL)
        return -1;
    int b = PyObject_IsTrue(res);
    Py_DECREF(res);
    return b;
}

static PyObject *
call0(PyObject *obj, const char *name)
{
    return PyObject_CallMethod(obj, name, NULL);
}

/* Whether the real types behave as the layouts say; 0 yes, -1 no (an error may be set). */
static int
verify_raw(PyObject *lock, PyObject *rlock)
{
    PyObject *r;
    if (Py_TYPE(lock)->tp_basicsize != sizeof(RawLock) || Py_TYPE(rlock)->tp_basicsize != sizeof(RawRLock))
        return -1;
    RawLock *l = (RawLock *)lock;
    if (l->locked != 0 || l->lock_lock == NULL)
        return -1;
    if ((r = call0(lock, "acquire")) == NULL)
        return -1;
    Py_DECREF(r);
    int held = l->locked == 1 && PyThread_acquire_lock_timed(l->lock_lock, 0, 0) == PY_LOCK_FAILURE;
    if ((r = call0(lock, "release")) == NULL)
        return -1;
    Py_DECREF(r);
    if (!held || l->locked != 0 || PyThread_acquire_lock_timed(l->lock_lock, 0, 0) != PY_LOCK_ACQUIRED)
        return -1;
    l->locked = 1;
    if ((r = call0(lock, "locked")) == NULL)
        return -1;
    int seen = r == Py_True;
    Py_DECREF(r);
    if ((r = call0(lock, "release")) == NULL)
        return -1;
    Py_DECREF(r);
    if (!seen || l->locked != 0)
        return -1;

    RawRLock *rl = (RawRLock *)rlock;
    unsigned long tid = PyThread_get_thread_ident();
    if (rl->rlock_count != 0 || rl->rlock_lock == NULL)
        return -1;
    if ((r = call0(rlock, "acquire")) == NULL)
        return -1;
    Py_DECREF(r);
    if ((r = call0(rlock, "acquire")) == NULL)
        return -1;
    Py_DECREF(r);
    int counted = rl->rlock_count == 2 && rl->rlock_owner == tid;
    for (int i = 0; i < 2; i++) {
        if ((r = call0(rlock, "release")) == NULL)
            return -1;
        Py_DECREF(r);
    }
    if (!counted || rl->rlock_count != 0
        || PyThread_acquire_lock_timed(rl->rlock_lock, 0, 0) != PY_LOCK_ACQUIRED)
        return -1;
    rl->rlock_owner = tid;
    rl->rlock_count = 1;
    if ((r = call0(rlock, "_is_owned")) == NULL)
        return -1;
    seen = r == Py_True;
    Py_DECREF(r);
    if ((r = call0(rlock, "release")) == NULL)
        return -1;
    Py_DECREF(r);
    return seen && rl->rlock_count == 0 ? 0 : -1;
}

/* the real locks' methods, looked up once per (built-in) type */
#define REAL_TYPES 4
static PyTypeObject *real_types[REAL_TYPES];
static PyObject *real_methods[REAL_TYPES][3];

static PyObject *
real_call(PyObject *real, PyObject *name, PyObject *arg)
{
    PyTypeObject *tp = Py_TYPE(real);
    int which = name == s_acquire ? 0 : name == s_release ? 1 : name == s_is_owned ? 2 : -1;
    if (which >= 0 && (tp->tp_flags & Py_TPFLAGS_IMMUTABLETYPE)) {
        int k;
        for (k = 0; k < REAL_TYPES && real_types[k] != NULL && real_types[k] != tp; k++)
            ;
        if (k < REAL_TYPES && real_types[k] == NULL) {
            PyObject *names[3] = {s_acquire, s_release, s_is_owned};
            for (int i = 0; i < 3; i++) {
                PyObject *d = PyObject_GetAttr((PyObject *)tp, names[i]);
                if (d == NULL)
                    PyErr_Clear();
                else if (!Py_IS_TYPE(d, &PyMethodDescr_Type))
                    Py_CLEAR(d);
                real_methods[k][i] = d;
            }
            real_types[k] = (PyTypeObject *)Py_NewRef(tp);
        }
        if (k < REAL_TYPES && real_methods[k][which] != NULL) {
            PyObject *args[2] = {real, arg};
            return PyObject_Vectorcall(real_methods[k][which], args, arg == NULL ? 1 : 2, NULL);
        }
    }
    if (arg == NULL)
        return PyObject_CallMethodNoArgs(real, name);
    return PyObject_CallMethodOneArg(real, name, arg);
}

/* The non-blocking try after the acquire was recorded: taken (1), contended -- the wait is the
 * Python path's, `_lc_contended` (0 on success), or an error (-1). */
static int
take_real(BaseObject *self, PyObject *task, PyObject *comm, PyObject *rec)
{
    int taken = try_real(self->real);
    if (taken < 0)
        goto failed;
    if (!taken) {
        PyObject *args[4] = {(PyObject *)self, rec, task, comm};
        PyObject *r = PyObject_VectorcallMethod(s_contended, args, 4 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
        if (r == NULL)
            return -1;  /* its own except clause withdrew the acquire */
        Py_DECREF(r);
        return 0;
    }
    return 1;
failed: {
        /* as the Python path: the acquire is withdrawn, the error goes on */
        PyObject *exc_type, *exc, *tb;
        PyErr_Fetch(&exc_type, &exc, &tb);
        PyObject *args[4] = {rec, task, self->cls, self->inst};
        PyObject *r = PyObject_VectorcallMethod(s_released, args, 4 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
        Py_XDECREF(r);
        if (r == NULL) {
            Py_XDECREF(exc_type);
            Py_XDECREF(exc);
            Py_XDECREF(tb);
        }
        else
            PyErr_Restore(exc_type, exc, tb);
        return -1;
    }
}

static PyObject *
call_py(PyObject *self, PyObject *name)
{
    return PyObject_CallMethodNoArgs(self, name);
}

/* The holder and the time it took the lock, once the real lock is taken. */
static int
took(BaseObject *self, PyObject *task, int rlock)
{
    Py_XSETREF(self->holder, Py_NewRef(task));
    self->since = taken_at();
    if (rlock)
        Py_XSETREF(self->depth, Py_NewRef(small_one));
    return 0;
}

/* `with lock:` / lock.acquire() of a tracked Lock, taken as `subclass`; anything but the hit
 * path is `slow_obj.slow()` (the Python method of the pure build, called from here so that its
 * sys._getframe(1) is the caller's frame, as it is when Python calls it) */
static PyObject *
lock_enter_sub(BaseObject *self, int subclass, PyObject *slow_obj, PyObject *slow)
{
    int ok;
    if (self->real == NULL || self->holder == NULL)
        goto slow_path;
    PyObject *rec = active_rec(&ok);
    if (rec == NULL) {
        if (PyErr_Occurred())
            return NULL;
        return real_call(self->real, s_acquire, NULL);
    }
    if (!ok)
        goto slow_path;
    PyFrameObject *frame = PyEval_GetFrame();
    if (frame == NULL)
        goto slow_path;
    PyObject *task, *comm;
    if (thread_task(rec, &task, &comm) < 0)
        return NULL;
    int same = self->holder == Py_None ? 0 : str_eq(self->holder, task);
    if (same != 0) {  /* a re-acquire by the holder (or an odd holder): the Python path */
        Py_DECREF(task);
        Py_DECREF(comm);
        goto slow_path;
    }
    int r = record_acquire(self, rec, task, comm, frame, subclass, 0);
    if (r <= 0) {
        Py_DECREF(task);
        Py_DECREF(comm);
        if (r < 0)
            return NULL;
        goto slow_path;
    }
    r = take_real(self, task, comm, rec);
    if (r == 1)
        r = took(self, task, 0);
    Py_DECREF(task);
    Py_DECREF(comm);
    if (r < 0)
        return NULL;
    Py_RETURN_TRUE;
slow_path:
    return call_py(slow_obj, slow);
}

static PyObject *
lock_enter(BaseObject *self, PyObject *unused)
{
    return lock_enter_sub(self, 0, (PyObject *)self, s_py_enter);
}

static int
plain_acquire_args(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    /* acquire() or acquire(True): the blocking, untimed acquire */
    if (kwnames != NULL && PyTuple_GET_SIZE(kwnames))
        return 0;
    return nargs == 0 || (nargs == 1 && args[0] == Py_True);
}

static PyObject *
slow_acquire(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    PyObject *stack[8];
    if (nargs + nkw > 7) {
        PyErr_SetString(PyExc_TypeError, "acquire() takes at most 2 arguments");
        return NULL;
    }
    stack[1] = self;
    for (Py_ssize_t i = 0; i < nargs + nkw; i++)
        stack[i + 2] = args[i];
    return PyObject_VectorcallMethod(s_py_acquire, stack + 1, (nargs + 1) | PY_VECTORCALL_ARGUMENTS_OFFSET,
                                     kwnames);
}

/* lock.acquire(False) of a tracked Lock: the try first; recorded (as a trylock) once it succeeded */
static PyObject *
lock_try(BaseObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    int ok;
    if (self->real == NULL || self->holder == NULL)
        return slow_acquire((PyObject *)self, args, nargs, kwnames);
    PyObject *rec = active_rec(&ok);
    if (rec == NULL && PyErr_Occurred())
        return NULL;
    PyFrameObject *frame = PyEval_GetFrame();
    if (rec == NULL || !ok || frame == NULL)
        return slow_acquire((PyObject *)self, args, nargs, kwnames);
    PyObject *task, *comm;
    if (thread_task(rec, &task, &comm) < 0)
        return NULL;
    int taken = try_real(self->real);
    int r = taken;
    if (taken == 1) {
        r = took(self, task, 0);
        if (r == 0) {
            r = record_acquire(self, rec, task, comm, frame, 0, 1);
            if (r == 0) {  /* not a hit: the rest of the Python path (`_lc_tried`) */
                PyObject *argv[4] = {(PyObject *)self, rec, task, comm};
                PyObject *done = PyObject_VectorcallMethod(s_tried, argv, 4 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
                r = done == NULL ? -1 : 1;
                Py_XDECREF(done);
            }
        }
    }
    Py_DECREF(task);
    Py_DECREF(comm);
    if (r < 0)
        return NULL;
    return Py_NewRef(taken ? Py_True : Py_False);
}

static PyObject *
lock_acquire(BaseObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    if (nargs == 1 && args[0] == Py_False && (kwnames == NULL || PyTuple_GET_SIZE(kwnames) == 0))
        return lock_try(self, args, nargs, kwnames);
    if (!plain_acquire_args(args, nargs, kwnames))
        return slow_acquire((PyObject *)self, args, nargs, kwnames);
    return lock_enter_sub(self, 0, (PyObject *)self, s_py_acquire);
}

static PyObject *
lock_release(BaseObject *self, PyObject *unused)
{
    int ok;
    PyObject *rec = active_rec(&ok);
    if (rec == NULL && PyErr_Occurred())
        return NULL;
    if (rec == NULL || !ok || self->holder == NULL || self->holder == Py_None || self->real == NULL)
        return call_py((PyObject *)self, s_py_release);
    PyObject *holder = Py_NewRef(self->holder);
    int r = record_release(self, rec, holder);
    Py_DECREF(holder);
    if (r < 0)
        return NULL;
    if (r == 0)
        return call_py((PyObject *)self, s_py_release);
    PyObject *res = real_call(self->real, s_release, NULL);
    if (res == NULL && PyErr_ExceptionMatches(PyExc_RuntimeError)) {
        PyObject *t, *e, *tb;
        PyErr_Fetch(&t, &e, &tb);
        PyObject *n = PyObject_GetAttr(rec, s_bad_releases), *m = NULL;
        if (n != NULL)
            m = PyNumber_Add(n, small_one);
        if (m != NULL && PyObject_SetAttr(rec, s_bad_releases, m) == 0)
            PyErr_Restore(t, e, tb);
        else {
            Py_XDECREF(t);
            Py_XDECREF(e);
            Py_XDECREF(tb);
        }
        Py_XDECREF(n);
        Py_XDECREF(m);
        return NULL;
    }
    if (res == NULL)
        return NULL;
    Py_DECREF(res);
    Py_RETURN_NONE;
}

static PyObject *
lock_exit(BaseObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    return lock_release(self, NULL);
}

/* -- RLock ------------------------------------------------------------------------------- */

static int
owned(BaseObject *self)
{
    return rlock_owned(self->real);
}

static PyObject *
rlock_enter_sub(BaseObject *self, int subclass, PyObject *slow_obj, PyObject *slow)
{
    int ok;
    if (self->real == NULL || self->depth == NULL || !PyLong_CheckExact(self->depth))
        return call_py(slow_obj, slow);
    PyObject *rec = active_rec(&ok);
    if (rec == NULL && PyErr_Occurred())
        return NULL;
    int is_owned = rec == NULL ? 1 : owned(self);
    if (is_owned < 0)
        return NULL;
    if (is_owned) {  /* re-entry, or no recorder: the real lock, and the depth */
        PyObject *res;
        if (rec != NULL && Py_TYPE(self->real) == raw_rlock_type) {  /* re-entry: it cannot block */
            int t = try_real(self->real);
            if (t < 0)
                return NULL;
            res = Py_NewRef(t ? Py_True : Py_False);
        }
        else
            res = real_call(self->real, s_acquire, NULL);
        if (res == NULL)
            return NULL;
        if (PyObject_IsTrue(res) && nonzero(self->depth)) {
            PyObject *d = PyNumber_Add(self->depth, small_one);
            if (d == NULL) {
                Py_DECREF(res);
                return NULL;
            }
            Py_SETREF(self->depth, d);
        }
        return res;
    }
    if (!ok)
        return call_py(slow_obj, slow);
    PyFrameObject *frame = PyEval_GetFrame();
    if (frame == NULL)
        return call_py(slow_obj, slow);
    PyObject *task, *comm;
    if (thread_task(rec, &task, &comm) < 0)
        return NULL;
    int r = record_acquire(self, rec, task, comm, frame, subclass, 0);
    if (r <= 0) {
        Py_DECREF(task);
        Py_DECREF(comm);
        if (r < 0)
            return NULL;
        return call_py(slow_obj, slow);
    }
    r = take_real(self, task, comm, rec);
    if (r == 1)
        r = took(self, task, 1);
    Py_DECREF(task);
    Py_DECREF(comm);
    if (r < 0)
        return NULL;
    Py_RETURN_TRUE;
}

static PyObject *
rlock_enter(BaseObject *self, PyObject *unused)
{
    return rlock_enter_sub(self, 0, (PyObject *)self, s_py_enter);
}

static PyObject *
rlock_acquire(BaseObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    if (!plain_acquire_args(args, nargs, kwnames))
        return slow_acquire((PyObject *)self, args, nargs, kwnames);
    return rlock_enter_sub(self, 0, (PyObject *)self, s_py_acquire);
}

static PyObject *
rlock_release(BaseObject *self, PyObject *unused)
{
    if (self->real == NULL || self->depth == NULL || !PyLong_CheckExact(self->depth))
        return call_py((PyObject *)self, s_py_release);
    int is_owned = owned(self);
    if (is_owned < 0)
        return NULL;
    if (!is_owned)
        return call_py((PyObject *)self, s_py_release);  /* raises, and is counted */
    if (nonzero(self->depth)) {
        PyObject *d = PyNumber_Subtract(self->depth, small_one);
        if (d == NULL)
            return NULL;
        Py_SETREF(self->depth, d);
        if (!nonzero(d)) {  /* the last release: the event */
            int ok, r = 0;
            PyObject *rec = active_rec(&ok);
            if (rec == NULL && PyErr_Occurred())
                return NULL;
            if (rec != NULL && ok && self->holder != NULL && self->holder != Py_None) {
                PyObject *holder = Py_NewRef(self->holder);
                r = record_release(self, rec, holder);
                Py_DECREF(holder);
                if (r < 0)
                    return NULL;
            }
            if (r == 0) {
                PyObject *res = call_py((PyObject *)self, s_self_released);
                if (res == NULL)
                    return NULL;
                Py_DECREF(res);
            }
        }
    }
    return real_call(self->real, s_release, NULL);
}

static PyObject *
rlock_exit(BaseObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *r = rlock_release(self, NULL);
    if (r == NULL)
        return NULL;
    Py_DECREF(r);
    Py_RETURN_NONE;
}

static PyObject *
rlock_is_owned(BaseObject *self, PyObject *unused)
{
    if (self->real == NULL) {
        PyErr_SetString(PyExc_AttributeError, "_real");
        return NULL;
    }
    return real_call(self->real, s_is_owned, NULL);
}

/* -- the base type ----------------------------------------------------------------------- */

static int
base_traverse(BaseObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->real);
    Py_VISIT(self->cls);
    Py_VISIT(self->inst);
    Py_VISIT(self->holder);
    Py_VISIT(self->depth);
    return 0;
}

static int
base_clear(BaseObject *self)
{
    Py_CLEAR(self->real);
    Py_CLEAR(self->cls);
    Py_CLEAR(self->inst);
    Py_CLEAR(self->holder);
    Py_CLEAR(self->depth);
    return 0;
}

static void
base_dealloc(BaseObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    if (self->weakreflist != NULL)
        PyObject_ClearWeakRefs((PyObject *)self);
    base_clear(self);
    tp->tp_free((PyObject *)self);
}

static PyMemberDef base_members[] = {
    {"_real", T_OBJECT_EX, offsetof(BaseObject, real), 0, NULL},
    {"_cls", T_OBJECT_EX, offsetof(BaseObject, cls), 0, NULL},
    {"_inst", T_OBJECT_EX, offsetof(BaseObject, inst), 0, NULL},
    {"_holder", T_OBJECT_EX, offsetof(BaseObject, holder), 0, NULL},
    {"_since", T_DOUBLE, offsetof(BaseObject, since), 0, NULL},
    {"_depth", T_OBJECT_EX, offsetof(BaseObject, depth), 0, NULL},
    {NULL},
};

#define ACQUIRE_DOC "acquire($self, /, blocking=True, timeout=-1)\n--\n\n"
/* named as the real locks' methods; the tracked types take them from here (lockcheck.python.tracked) */
static PyMethodDef lock_methods[] = {
    {"__enter__", (PyCFunction)lock_enter, METH_NOARGS, "__enter__($self, /)\n--\n\nLock the lock."},
    {"__exit__", (PyCFunction)(void (*)(void))lock_exit, METH_FASTCALL,
     "__exit__($self, /, *exc)\n--\n\nRelease the lock."},
    {"acquire", (PyCFunction)(void (*)(void))lock_acquire, METH_FASTCALL | METH_KEYWORDS,
     ACQUIRE_DOC "Lock the lock (recorded by the active lockcheck recorder)."},
    {"acquire_lock", (PyCFunction)(void (*)(void))lock_acquire, METH_FASTCALL | METH_KEYWORDS,
     "acquire_lock($self, /, blocking=True, timeout=-1)\n--\n\nAn obsolete synonym of acquire()."},
    {"release", (PyCFunction)lock_release, METH_NOARGS, "release($self, /)\n--\n\nRelease the lock."},
    {"release_lock", (PyCFunction)lock_release, METH_NOARGS,
     "release_lock($self, /)\n--\n\nAn obsolete synonym of release()."},
    {NULL},
};

static PyMethodDef rlock_methods[] = {
    {"__enter__", (PyCFunction)rlock_enter, METH_NOARGS, "__enter__($self, /)\n--\n\nLock the lock."},
    {"__exit__", (PyCFunction)(void (*)(void))rlock_exit, METH_FASTCALL,
     "__exit__($self, /, *exc)\n--\n\nRelease the lock."},
    {"acquire", (PyCFunction)(void (*)(void))rlock_acquire, METH_FASTCALL | METH_KEYWORDS,
     ACQUIRE_DOC "Lock the lock (recorded by the active lockcheck recorder)."},
    {"release", (PyCFunction)rlock_release, METH_NOARGS, "release($self, /)\n--\n\nRelease the lock."},
    {"_is_owned", (PyCFunction)rlock_is_owned, METH_NOARGS, "_is_owned($self, /)\n--\n\n"},
    {NULL},
};

static PyTypeObject BaseType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "lockcheck.python._trackedcore.Base",
    .tp_basicsize = sizeof(BaseObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "The fields of a tracked lock, and its compiled hit path (see lockcheck.python.tracked).",
    .tp_traverse = (traverseproc)base_traverse,
    .tp_clear = (inquiry)base_clear,
    .tp_dealloc = (destructor)base_dealloc,
    .tp_weaklistoffset = offsetof(BaseObject, weakreflist),
    .tp_members = base_members,
    .tp_new = PyType_GenericNew,
};

/* the methods of a tracked Lock and of a tracked RLock: bases of TrackedLock and TrackedRLock
 * (no fields of their own), so that their methods bind to those and carry the real names */
static PyTypeObject LockBaseType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "lockcheck.python._trackedcore.LockBase",
    .tp_basicsize = sizeof(BaseObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "The compiled hit path of a tracked Lock.",
    .tp_traverse = (traverseproc)base_traverse,
    .tp_clear = (inquiry)base_clear,
    .tp_methods = lock_methods,
};

static PyTypeObject RLockBaseType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "lockcheck.python._trackedcore.RLockBase",
    .tp_basicsize = sizeof(BaseObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "The compiled hit path of a tracked RLock.",
    .tp_traverse = (traverseproc)base_traverse,
    .tp_clear = (inquiry)base_clear,
    .tp_methods = rlock_methods,
};

/* -- lockcheck.nested(lock, n): one acquisition as a subclass ------------------------------ */

typedef struct {
    PyObject_HEAD
    PyObject *lock, *subclass;
} NestedObject;

static int
nested_traverse(NestedObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->lock);
    Py_VISIT(self->subclass);
    return 0;
}

static int
nested_clear(NestedObject *self)
{
    Py_CLEAR(self->lock);
    Py_CLEAR(self->subclass);
    return 0;
}

static void
nested_dealloc(NestedObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    nested_clear(self);
    tp->tp_free((PyObject *)self);
}

static int
nested_init(NestedObject *self, PyObject *args, PyObject *kwds)
{
    PyObject *lock, *subclass;
    static char *kwlist[] = {"lock", "subclass", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO", kwlist, &lock, &subclass))
        return -1;
    Py_XSETREF(self->lock, Py_NewRef(lock));
    Py_XSETREF(self->subclass, Py_NewRef(subclass));
    return 0;
}

static PyTypeObject *lock_type, *rlock_type;  /* tracked.TrackedLock, TrackedRLock (setup) */

static PyObject *
nested_enter(NestedObject *self, PyObject *unused)
{
    PyObject *lock = self->lock;
    if (lock != NULL && self->subclass != NULL && PyLong_CheckExact(self->subclass)) {
        long sub = PyLong_AsLong(self->subclass);
        if (sub >= 0 && sub <= 7) {
            if (Py_TYPE(lock) == lock_type)
                return lock_enter_sub((BaseObject *)lock, (int)sub, (PyObject *)self, s_nested_enter);
            if (Py_TYPE(lock) == rlock_type)
                return rlock_enter_sub((BaseObject *)lock, (int)sub, (PyObject *)self, s_nested_enter);
        }
        else if (PyErr_Occurred())
            return NULL;
    }
    return PyObject_CallMethodNoArgs((PyObject *)self, s_nested_enter);
}

static PyObject *
nested_exit(NestedObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *lock = self->lock;
    if (lock != NULL && (Py_TYPE(lock) == lock_type || Py_TYPE(lock) == rlock_type)) {
        PyObject *r = Py_TYPE(lock) == lock_type ? lock_release((BaseObject *)lock, NULL)
                                                 : rlock_release((BaseObject *)lock, NULL);
        if (r == NULL)
            return NULL;
        Py_DECREF(r);
        Py_RETURN_NONE;
    }
    return PyObject_CallMethodObjArgs((PyObject *)self, s_nested_exit, Py_None, Py_None, Py_None, NULL);
}

static PyMemberDef nested_members[] = {
    {"lock", T_OBJECT_EX, offsetof(NestedObject, lock), 0, NULL},
    {"subclass", T_OBJECT_EX, offsetof(NestedObject, subclass), 0, NULL},
    {NULL},
};

static PyMethodDef nested_methods[] = {
    {"__enter__", (PyCFunction)nested_enter, METH_NOARGS, "__enter__($self, /)\n--\n\n"},
    {"__exit__", (PyCFunction)(void (*)(void))nested_exit, METH_FASTCALL, "__exit__($self, /, *exc)\n--\n\n"},
    {NULL},
};

static PyTypeObject NestedType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "lockcheck.python._trackedcore.Nested",
    .tp_basicsize = sizeof(NestedObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "The fields of lockcheck.nested(lock, n), and its compiled enter and exit.",
    .tp_traverse = (traverseproc)nested_traverse,
    .tp_clear = (inquiry)nested_clear,
    .tp_dealloc = (destructor)nested_dealloc,
    .tp_members = nested_members,
    .tp_methods = nested_methods,
    .tp_init = (initproc)nested_init,
    .tp_new = PyType_GenericNew,
};

/* -- module ------------------------------------------------------------------------------ */

/* -- asyncio locks (lockcheck/python/async_lock.py, async_semaphores.py) ------------------------
 *
 * They are no BaseObject: their Python acquire takes the asyncio lock itself when it is free (no
 * await between the test and the take: one step of the event loop) and asks `async_acquired`
 * to record it; None back is "not a hit", and the Python path (`Recorder.async_task`,
 * `Recorder.acquired`) records it instead.  The task key is the one `Recorder.async_task` gave
 * the running asyncio task (its `_atasks`); a task not seen yet is Python's to name. */

static PyObject *current_task_func;          /* asyncio.current_task (setup_async) */
static PyObject *running_loop_func;          /* or, where that is Python (3.11): _asyncio._get_running_loop */
static PyObject *current_tasks;              /* and the dict loop -> task it reads */
static PyObject *s_atasks, *s_data, *s_context;
static PyObject *atasks_seen, *atasks_data;  /* rec._atasks and its .data dict */
static PyObject *comm_task, *comm_ctx, *comm_val;  /* the last comm made: task key, context -> comm */

/* the last task looked up: a weak reference to it (ours) and its key; the key stays its key while
 * the recorder is the same (`_atasks` drops an entry only when its task is gone) */
static PyObject *last_atask_ref, *last_akey;

static void
forget_async(void)
{
    Py_CLEAR(last_atask_ref);
    Py_CLEAR(last_akey);
    Py_CLEAR(atasks_seen);
    Py_CLEAR(atasks_data);
    Py_CLEAR(comm_task);
    Py_CLEAR(comm_ctx);
    Py_CLEAR(comm_val);
}

/* (task key, comm) of the running asyncio task as Recorder.async_task gives them (new references):
 * 0 found, 1 not for the hit path (no running task, a task not named yet...), -1 error */
static int
async_task(PyObject *rec, PyObject **task, PyObject **comm)
{
    if (current_task_func == NULL)
        return 1;
    PyObject *atasks = kget(rec_dict, s_atasks);
    if (atasks == NULL)
        return PyErr_Occurred() ? -1 : 1;
    if (atasks != atasks_seen) {
        PyObject *data = PyObject_GetAttr(atasks, s_data);
        if (data == NULL)
            return -1;
        if (!PyDict_CheckExact(data)) {
            Py_DECREF(data);
            return 1;
        }
        Py_XSETREF(atasks_data, data);
        Py_XSETREF(atasks_seen, Py_NewRef(atasks));
    }
    PyObject *context = kget(rec_dict, s_context);
    if (context == NULL)
        return PyErr_Occurred() ? -1 : 1;
    if (context != Py_None && !PyUnicode_CheckExact(context))
        return 1;
    PyObject *atask;
    if (current_tasks != NULL) {  /* asyncio.tasks.current_task, without its frame */
        PyObject *loop = PyObject_CallNoArgs(running_loop_func);
        if (loop == NULL)
            return -1;
        atask = loop == Py_None ? NULL : PyDict_GetItemWithError(current_tasks, loop);
        Py_DECREF(loop);
        if (atask == NULL)
            return PyErr_Occurred() ? -1 : 1;
        Py_INCREF(atask);
    }
    else
        atask = PyObject_CallNoArgs(current_task_func);
    if (atask == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_RuntimeError))  /* no running loop: the thread's key (Python) */
            return -1;
        PyErr_Clear();
        return 1;
    }
    if (atask == Py_None) {
        Py_DECREF(atask);
        return 1;
    }
    PyObject *key;
    if (last_atask_ref != NULL && PyWeakref_GET_OBJECT(last_atask_ref) == atask) {
        key = Py_NewRef(last_akey);
        Py_DECREF(atask);
    }
    else {
        PyObject *wr = PyWeakref_NewRef(atask, NULL);  /* looked up as WeakKeyDictionary.get does */
        Py_DECREF(atask);
        if (wr == NULL) {
            PyErr_Clear();
            return 1;
        }
        key = PyDict_GetItemWithError(atasks_data, wr);
        Py_XINCREF(key);
        if (key == NULL) {
            Py_DECREF(wr);
            return PyErr_Occurred() ? -1 : 1;
        }
        if (!PyUnicode_CheckExact(key)) {
            Py_DECREF(wr);
            Py_DECREF(key);
            return 1;
        }
        Py_XSETREF(last_atask_ref, wr);  /* a weakref without callback: releasing it runs no Python code */
        Py_XSETREF(last_akey, Py_NewRef(key));
    }
    PyObject *c;
    if (context == Py_None || PyUnicode_GET_LENGTH(context) == 0)
        c = Py_NewRef(key);
    else if (key == comm_task && context == comm_ctx)
        c = Py_NewRef(comm_val);
    else {
        c = PyUnicode_FromFormat("%U [%U]", key, context);  /* Recorder._comm */
        if (c == NULL) {
            Py_DECREF(key);
            return -1;
        }
        Py_XSETREF(comm_task, Py_NewRef(key));
        Py_XSETREF(comm_ctx, Py_NewRef(context));
        Py_XSETREF(comm_val, Py_NewRef(c));
    }
    *task = key;
    *comm = c;
    return 0;
}

PyDoc_STRVAR(async_acquired_doc,
"async_acquired(cls, inst, read) -> task key or None\n\n"
"Record the acquire of an asyncio lock (class, instance, mode) by the running asyncio task, called\n"
"from the caller's caller, if it is a hit of the chain cache: its holder's task key; None: not\n"
"recorded (nothing changed), the Python path records it.");

static PyObject *
async_acquired(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3 || !PyLong_CheckExact(args[2])) {
        PyErr_SetString(PyExc_TypeError, "async_acquired(cls, inst, read)");
        return NULL;
    }
    long read = PyLong_AsLong(args[2]);
    if (read < 0 || read > 2)
        Py_RETURN_NONE;
    int ok;
    PyObject *rec = active_rec(&ok);
    if (rec == NULL) {
        if (PyErr_Occurred())
            return NULL;
        Py_RETURN_NONE;
    }
    if (!ok || !PyUnicode_CheckExact(args[0]) || !PyUnicode_CheckExact(args[1]))
        Py_RETURN_NONE;
    PyFrameObject *frame = PyEval_GetFrame();  /* the tracked lock's acquire (borrowed) */
    if (frame == NULL)
        Py_RETURN_NONE;
    PyFrameObject *caller = PyFrame_GetBack(frame);  /* its caller, as sys._getframe(1) there */
    if (caller == NULL)
        Py_RETURN_NONE;
    PyObject *task, *comm;
    int r = async_task(rec, &task, &comm);
    if (r != 0) {
        Py_DECREF(caller);
        if (r < 0)
            return NULL;
        Py_RETURN_NONE;
    }
    r = record_acquire_ci(args[0], args[1], (int)read, rec, task, comm, caller, 0, 0);
    Py_DECREF(caller);
    Py_DECREF(comm);
    if (r <= 0) {
        Py_DECREF(task);
        if (r < 0)
            return NULL;
        Py_RETURN_NONE;
    }
    return task;
}

PyDoc_STRVAR(async_released_doc,
"async_released(cls, inst, holder) -> bool\n\n"
"Recorder.released(holder, cls, inst) of an asyncio lock when it is the innermost entry's plain\n"
"release: True done; False not (nothing changed), the Python path records it.");

static PyObject *
async_released(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "async_released(cls, inst, holder)");
        return NULL;
    }
    int ok;
    PyObject *rec = active_rec(&ok);
    if (rec == NULL) {
        if (PyErr_Occurred())
            return NULL;
        Py_RETURN_FALSE;
    }
    if (!ok || !PyUnicode_CheckExact(args[2]))
        Py_RETURN_FALSE;
    int r = record_release_ci(args[0], args[1], rec, args[2]);
    if (r < 0)
        return NULL;
    return PyBool_FromLong(r);
}

static PyObject *
async_task_key(PyObject *module, PyObject *unused)
{
    int ok;
    PyObject *rec = active_rec(&ok);
    if (rec == NULL) {
        if (PyErr_Occurred())
            return NULL;
        Py_RETURN_NONE;
    }
    PyObject *task, *comm;
    int r = ok ? async_task(rec, &task, &comm) : 1;
    if (r < 0)
        return NULL;
    if (r == 1)
        Py_RETURN_NONE;
    Py_DECREF(comm);
    return task;
}

static PyObject *
setup_async(PyObject *module, PyObject *args)
{
    PyObject *func, *loop_func, *tasks_dict;
    if (!PyArg_ParseTuple(args, "OOO", &func, &loop_func, &tasks_dict))
        return NULL;
    Py_XSETREF(current_task_func, Py_NewRef(func));
    if (loop_func != Py_None && PyDict_CheckExact(tasks_dict)) {
        Py_XSETREF(running_loop_func, Py_NewRef(loop_func));
        Py_XSETREF(current_tasks, Py_NewRef(tasks_dict));
    }
    else {
        Py_CLEAR(running_loop_func);
        Py_CLEAR(current_tasks);
    }
    forget_async();
    Py_RETURN_NONE;
}

PyDoc_STRVAR(setup_doc,
"setup(tracked_globals, refresh, site, Event, HeldLock, TaskState, ACQUIRE, INITIAL_CHAIN_KEY, MAX_LOCK_DEPTH,\n"
"      TrackedLock, TrackedRLock)\n\n"
"Called once by lockcheck.python.tracked: what the hit path reads and builds.");

static PyObject *
setup(PyObject *module, PyObject *args)
{
    PyObject *g, *refresh, *site, *ev, *hl, *ts, *acq, *initial, *lt, *rlt;
    Py_ssize_t depth;
    if (!PyArg_ParseTuple(args, "O!OOO!O!O!UO!nO!O!", &PyDict_Type, &g, &refresh, &site, &PyType_Type, &ev,
                          &PyType_Type, &hl, &PyType_Type, &ts, &acq, &PyLong_Type, &initial, &depth,
                          &PyType_Type, &lt, &PyType_Type, &rlt))
        return NULL;
    if (slot_offsets((PyTypeObject *)ev, ev_names, ev_off, EV_N) < 0
        || slot_offsets((PyTypeObject *)hl, hl_names, hl_off, HL_N) < 0
        || slot_offsets((PyTypeObject *)ts, ts_names, ts_off, TS_N) < 0)
        return NULL;
    forget_rec();
    for (; n_free_ev > 0; n_free_ev--) {  /* kept objects of the classes given before */
        PyObject_GC_Track(free_ev[n_free_ev - 1]);
        Py_DECREF(free_ev[n_free_ev - 1]);
    }
    for (; n_free_hl > 0; n_free_hl--) {
        PyObject_GC_Track(free_hl[n_free_hl - 1]);
        Py_DECREF(free_hl[n_free_hl - 1]);
    }
    Py_XSETREF(tracked_globals, Py_NewRef(g));
    Py_XSETREF(refresh_func, Py_NewRef(refresh));
    Py_XSETREF(site_func, Py_NewRef(site));
    Py_XSETREF(event_type, (PyTypeObject *)Py_NewRef(ev));
    Py_XSETREF(held_type, (PyTypeObject *)Py_NewRef(hl));
    Py_XSETREF(task_type, (PyTypeObject *)Py_NewRef(ts));
    Py_XSETREF(op_acquire, Py_NewRef(acq));
    Py_XSETREF(initial_key, Py_NewRef(initial));
    Py_XSETREF(lock_type, (PyTypeObject *)Py_NewRef(lt));
    Py_XSETREF(rlock_type, (PyTypeObject *)Py_NewRef(rlt));
    max_depth = depth;
    raw_lock_type = raw_rlock_type = NULL;
#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030D0000
    {
        PyObject *thread = PyImport_ImportModule("_thread");
        PyObject *lock = thread ? PyObject_CallMethod(thread, "allocate_lock", NULL) : NULL;
        PyObject *rlock = thread ? PyObject_CallMethod(thread, "RLock", NULL) : NULL;
        if (lock != NULL && rlock != NULL && verify_raw(lock, rlock) == 0) {
            raw_lock_type = Py_TYPE(lock);
            raw_rlock_type = Py_TYPE(rlock);
        }
        PyErr_Clear();
        Py_XDECREF(lock);
        Py_XDECREF(rlock);
        Py_XDECREF(thread);
    }
#endif
    ready = 1;
    Py_RETURN_NONE;
}

static PyObject *
forget(PyObject *module, PyObject *unused)
{
    forget_rec();
    Py_RETURN_NONE;
}

static PyObject *
tries_in_place(PyObject *module, PyObject *unused)
{
    return Py_BuildValue("(OO)", raw_lock_type != NULL ? Py_True : Py_False,
                         raw_rlock_type != NULL ? Py_True : Py_False);
}

static PyObject *
flush(PyObject *module, PyObject *unused)
{
    if (flush_stats() < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *
chain_key(PyObject *module, PyObject *args)
{
    PyObject *a, *b, *c;
    if (!PyArg_ParseTuple(args, "OOO", &a, &b, &c))
        return NULL;
    Py_hash_t h = hash3(a, b, c);
    if (h == -1)
        return NULL;
    return PyLong_FromSsize_t(h);
}

static PyMethodDef module_methods[] = {
    {"setup", setup, METH_VARARGS, setup_doc},
    {"async_acquired", (PyCFunction)(void (*)(void))async_acquired, METH_FASTCALL, async_acquired_doc},
    {"async_released", (PyCFunction)(void (*)(void))async_released, METH_FASTCALL, async_released_doc},
    {"async_task_key", async_task_key, METH_NOARGS,
     "The running asyncio task's key (Recorder.async_task's), or None: not named yet, or no task."},
    {"setup_async", setup_async, METH_VARARGS,
     "setup_async(current_task, get_running_loop, current_tasks): how async_acquired finds the running task\n"
     "(the last two None where current_task is compiled; given, current_tasks[get_running_loop()])."},
    {"forget", forget, METH_NOARGS, "Drop what was cached for the last recorder (it stopped)."},
    {"flush", flush, METH_NOARGS, "Add the statistics counted by the hit path to the checker's."},
    {"tries_in_place", tries_in_place, METH_NOARGS,
     "(Lock, RLock): whether a real lock's non-blocking try is made in place (its layout verified)."},
    {"chain_key", chain_key, METH_VARARGS,
     "chain_key(prev, cls, read): hash((prev, cls, read)) as the hit path computes it (tested equal)."},
    {NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "lockcheck.python._trackedcore",
    "The compiled hit path of lockcheck's tracked locks (see lockcheck/python/_tracked.c).", -1, module_methods,
};

#define INTERN(var, text) if ((var = PyUnicode_InternFromString(text)) == NULL) return NULL

PyMODINIT_FUNC
PyInit__trackedcore(void)
{
    LockBaseType.tp_base = &BaseType;
    RLockBaseType.tp_base = &BaseType;
    if (PyType_Ready(&BaseType) < 0 || PyType_Ready(&LockBaseType) < 0 || PyType_Ready(&RLockBaseType) < 0
        || PyType_Ready(&NestedType) < 0)
        return NULL;
    INTERN(s_rec, "_rec");
    INTERN(s_trace, "trace");
    INTERN(s_check, "check");
    INTERN(s_gen, "_gen");
    INTERN(s_feed_lock, "_feed_lock");
    INTERN(s_busy, "_busy");
    INTERN(s_stopped, "stopped");
    INTERN(s_max_depth, "max_depth");
    INTERN(s_usage, "usage");
    INTERN(s_events, "events");
    INTERN(s_chain_hits, "chain_hits");
    INTERN(s_info, "info");
    INTERN(s_locked, "locked");
    INTERN(s_acquire, "acquire");
    INTERN(s_release, "release");
    INTERN(s_is_owned, "_is_owned");
    INTERN(s_thread_task, "thread_task");
    INTERN(s_py_enter, "_py_enter");
    INTERN(s_py_acquire, "_py_acquire");
    INTERN(s_py_release, "_py_release");
    INTERN(s_contended, "_lc_contended");
    INTERN(s_tried, "_lc_tried");
    INTERN(s_released, "released");
    INTERN(s_self_released, "_released");
    INTERN(s_bad_releases, "bad_releases");
    INTERN(s_nested_enter, "_py_enter");
    INTERN(s_nested_exit, "_py_exit");
    INTERN(s_atasks, "_atasks");
    INTERN(s_data, "data");
    INTERN(s_context, "context");
    small_zero = PyLong_FromLong(0);
    small_one = PyLong_FromLong(1);
    small_two = PyLong_FromLong(2);
    PyObject *m = PyModule_Create(&module_def);
    if (m == NULL)
        return NULL;
    Py_INCREF(&BaseType);
    Py_INCREF(&NestedType);
    Py_INCREF(&LockBaseType);
    Py_INCREF(&RLockBaseType);
    if (PyModule_AddObject(m, "Base", (PyObject *)&BaseType) < 0
        || PyModule_AddObject(m, "LockBase", (PyObject *)&LockBaseType) < 0
        || PyModule_AddObject(m, "RLockBase", (PyObject *)&RLockBaseType) < 0
        || PyModule_AddObject(m, "Nested", (PyObject *)&NestedType) < 0)
        return NULL;
    return m;
}
