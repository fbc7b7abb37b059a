/*
 * asyncio locks' hit path (part of _tracked.c's one translation unit, included after the
 * tracked types).
 *
 * Why a unit: asyncio locks are no tracked `BaseObject` and their task is the running asyncio
 * task, not the thread, so finding the task and its name is its own job; the recording itself
 * is the same hit path (record_acquire_ci, record_release_ci).
 */

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
