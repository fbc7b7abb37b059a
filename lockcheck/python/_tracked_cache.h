/*
 * The recorder the tracked locks' hit path works for, and what it keeps of it (part of
 * _tracked.c's one translation unit, included there once, in this order).
 *
 * Why a unit: every hit starts by asking which recorder is active, who the calling thread is
 * and where the acquire is; the answers are cached here against the recorder (`cur_rec`, the
 * parts `tracked._c_refresh` gives) and dropped together (`forget_rec`) when it changes.  Also
 * the few helpers those caches need: the dict-version cache (`kget`), the statistics the hit
 * path counts before the checker sees them (`flush_stats`), the "taken at" clock.
 */

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
       HL_HARDIRQS_OFF, HL_REFERENCES, HL_PREV_KEY, HL_EVENT, HL_SOURCE, HL_HELD_EVIDENCE, HL_N };
static const char *hl_names[HL_N] = {"cls", "lock", "instance", "subclass", "read", "trylock", "check", "nest",
                                     "irq_context", "hardirqs_off", "references", "prev_chain_key", "_event",
                                     "_source", "held_evidence"};
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
