/*
 * The real threading lock under a tracked one, tried and released without a method call (part
 * of _tracked.c's one translation unit, included after _tracked_hit.h).
 *
 * Why a unit: `lock.acquire(False)` parses keywords and costs more than the rest of a tracked
 * try, so the real `_thread` lock is tried in place -- but only once `verify_raw` has checked the
 * layouts below against the real types' behaviour; otherwise the method is called.
 */

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
