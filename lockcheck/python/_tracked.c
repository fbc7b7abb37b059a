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
 *
 * One translation unit in six files, each a job (so `static inline` stays inlined across them):
 * _tracked_cache.h (the active recorder and what is cached of it), _tracked_hit.h (the hit path's
 * acquire and release), _tracked_rawlock.h (the real lock tried in place), _tracked_methods.h (the
 * tracked Lock's and RLock's methods), _tracked_async.h (asyncio locks); here the types and the
 * module.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include "_tuplehash.h"
#include "_cshared.h"
#include "_rules.h"
#include <frameobject.h>
#include <structmember.h>
#include <time.h>

#include "_tracked_cache.h"

#include "_tracked_hit.h"

#include "_tracked_rawlock.h"

#include "_tracked_methods.h"

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
#include "_tracked_async.h"

/* -- module ------------------------------------------------------------------------------ */

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
