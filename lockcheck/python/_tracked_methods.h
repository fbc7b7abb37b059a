/*
 * The methods of a tracked Lock and RLock: acquire, release, `with`, the non-blocking try
 * (part of _tracked.c's one translation unit, included after _tracked_rawlock.h).
 *
 * Why a unit: these are what a test's `with lock:` calls; each records through the hit path
 * (_tracked_hit.h) or hands the call, unchanged, to the pure build's Python method, so the
 * plugin's semantics stay in Python (lockcheck/python/tracked.py).
 */

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
