/*
 * A part of lockcheck/engine/_capturecore.c, which includes its parts in order (each uses what the
 * parts before it define).  This one: the pending acquisition (`Pending`, in _capturecore_state.h).
 *
 * Most acquisitions are released by the next lock line of the capture (3 of 4 in the benchmark
 * captures: `lock_acquire`, maybe `lock_acquired`, `lock_release`), and for those the Python objects
 * an acquisition makes -- the HeldLock pushed on the task's held list, its deferred event, the
 * annotator's held entry, the reader's `held[(task, instance)]` entry -- are made only to be freed
 * again (about 2,000 instructions a pair).  So `take_acquire` applies every other effect at once
 * (chain key, counts, recent locks, the annotator's counts and cpu) and leaves those objects
 * pending, as the `.lt` core's held overlay (_lt_overlay.h) leaves its pushes in C:
 *
 * - `pend_release`: a lock line releases the innermost pending one (same task and view, same lock, the
 *   task not pinned, no reader entry made for it earlier): the release is applied to the pending
 *   acquisition and neither is ever made;
 * - an acquisition of the same task's view on top of pending ones (a nested one: about 1 in 5 in the
 *   benchmark captures, each of which made the one under it before) is pending too, on top of them:
 *   take_acquire and the annotator's `decide` read the task's held stack as its held lists and then
 *   the pending acquisitions (`pend_depth`, the top pending entry's irq context, _capturecore_annotate.h's stack); one of
 *   another lock instance only (the reader's entries are by instance), at most PEND_MAX;
 * - `pend_flush` makes them all, in order, exactly as `take_acquire` would have, before anything else
 *   could look: any other line the filter applies that reads or changes a task's held state (an
 *   acquisition of another task or view, an irq-context change, a new view, a release that is not the
 *   innermost pending one, a contention line that looks a name up in the reader's entries), and before
 *   any line is handed to Python (`suspend`).  Between an acquisition and its flush only lines that
 *   touch no held state run (lines the reader skips, `lock_acquired`/`lock_contended` of a named lock,
 *   the task's own nested acquisitions and their releases, which see the pending ones as held), so the
 *   objects are made into the same state.
 */
#ifndef LOCKCHECK_CAPTURECORE_PENDING_H
#define LOCKCHECK_CAPTURECORE_PENDING_H

/* the innermost pending acquisition dropped */
static void pend_pop(CaptureFilter *self) {
    Pending *p = &self->pend[--self->npend];
    /* (by name, not a loop: ~45 instructions a pop less, callgrind; all but the time stamp are never NULL
     * while active (take_acquire's) -- each set NULL before its reference goes, as Py_CLEAR does) */
    _Static_assert(P_OWNED == 13, "every owned pending slot dropped below");
    PyObject **o = p->o, *drop[P_OWNED];
    memcpy(drop, o, sizeof drop);
    memset(o, 0, sizeof drop);
    Py_DECREF(drop[P_HEAD]);
    Py_DECREF(drop[P_BODY]);
    Py_DECREF(drop[P_MODE]);
    Py_XDECREF(drop[P_TIMESTAMP]);
    Py_DECREF(drop[P_HELD]);
    Py_DECREF(drop[P_A_HELD]);
    Py_DECREF(drop[P_CTX]);
    Py_DECREF(drop[P_KEY]);
    Py_DECREF(drop[P_IRQ_CONTEXT]);
    Py_DECREF(drop[P_HARDIRQS_OFF]);
    Py_DECREF(drop[P_PREV_KEY]);
    Py_DECREF(drop[P_VIEW]);
    Py_DECREF(drop[P_CLS]);
}

/* a pending acquisition's objects made (take_acquire's own, in its order): 0, -1 error */
static int pend_make(CaptureFilter *self, Pending *p) {
    PyObject **o = p->o;
    int r = -1;
    PyObject *read_back = NULL, *hlock = NULL, *entry = NULL, *subclass = NULL;
    PyObject *lineno = PyLong_FromLongLong(p->lineno);
    if (lineno == NULL)
        goto done;
    if (o[P_TIMESTAMP] == NULL && (o[P_TIMESTAMP] = ascii_str(p->ts, p->ts_len)) == NULL)
        goto done;
    PyObject *trylock = p->trylock ? Py_True : Py_False, *check = p->check ? Py_True : Py_False;
    if (p->subclass && (subclass = PyLong_FromLong(p->subclass)) == NULL)
        goto done;
    PyObject *sub = subclass != NULL ? subclass : small_ints[0];
    {
        PyObject *parts[LATER_N] = {self->event_fn, o[P_TASK], o[P_NAME], o[P_INSTANCE], o[P_MODE], trylock, check,
                                    o[P_TIMESTAMP], o[P_CPU], self->file, lineno, o[P_DISPLAY], sub};
        read_back = later(parts);
    }
    if (read_back == NULL)
        goto done;
    {
        PyObject *fields[] = {o[P_CLS], o[P_NAME], o[P_INSTANCE], sub, o[P_MODE], trylock, check,
                              Py_None, o[P_IRQ_CONTEXT], o[P_HARDIRQS_OFF], small_ints[0], o[P_PREV_KEY],
                              Py_None, read_back, Py_None /* held_evidence: the checker's, made when asked */};
        _Static_assert(sizeof fields / sizeof *fields == HL_N, "a value for every HeldLock slot the filter fills");
        hlock = new_held(self, fields);
    }
    if (hlock == NULL || PyList_Append(o[P_HELD], hlock) < 0)
        goto done;
    if (o[P_A_HELD] != Py_None) {
        PyObject *items[5] = {o[P_CLS], o[P_NAME], o[P_INSTANCE], o[P_CTX], o[P_MODE]}; /* (its key: the class) */
        if ((entry = PyList_New(5)) == NULL)
            goto done;
        for (int i = 0; i < 5; i++)
            PyList_SET_ITEM(entry, i, Py_NewRef(items[i]));
        if (PyList_Append(o[P_A_HELD], entry) < 0)
            goto done;
        Py_CLEAR(entry);
    }
    if (p->names) {
        if ((entry = PyList_New(2)) == NULL)
            goto done;
        PyList_SET_ITEM(entry, 0, Py_NewRef(o[P_NAME]));
        PyList_SET_ITEM(entry, 1, Py_NewRef(small_ints[1]));
        if (PyDict_SetItem(self->held_names, o[P_KEY], entry) < 0)
            goto done;
    }
    r = 0;
done:
    Py_XDECREF(lineno);
    Py_XDECREF(read_back);
    Py_XDECREF(hlock);
    Py_XDECREF(entry);
    Py_XDECREF(subclass);
    return r;
}

/* every pending acquisition's objects made, the outermost first: 0, -1 error (all dropped either way) */
static int pend_flush(CaptureFilter *self) {
    int r = 0;
    for (int k = 0; k < self->npend; k++)
        if (r == 0 && pend_make(self, &self->pend[k]) < 0)
            r = -1;
    while (self->npend)
        pend_pop(self);
    return r;
}

/* How many acquisitions of `view` are pending (0: none, or another view's, flushed first: -1 error).
 * An acquisition of another lock instance of the same view goes on top of them (PEND_MAX at most). */
static int pend_depth(CaptureFilter *self, PyObject *view, PyObject *instance) {
    if (!self->npend)
        return 0;
    int keep = self->npend < PEND_MAX && view == self->pend[0].o[P_VIEW];
    for (int k = 0; keep && k < self->npend; k++) {
        int same = eq(instance, self->pend[k].o[P_INSTANCE]);
        if (same < 0)
            return -1;
        keep = !same;
    }
    if (!keep)
        return pend_flush(self);
    return self->npend;
}

/* A release line (take_release's) while acquisitions are pending: 1 it released the innermost one
 * (what take_release would have done to it, applied), 0 not that one (all flushed: the plain
 * take_release goes on), -1 error. */
static int pend_release(CaptureFilter *self, PyObject *view, PyObject *ctask, PyObject *head, PyObject *body) {
    Pending *p = &self->pend[self->npend - 1];
    PyObject *name = PyTuple_GET_ITEM(body, B_NAME);
    int named = is_empty_str(name);
    int same = p->names && view == p->o[P_VIEW];
    if (same)
        same = eq(PyTuple_GET_ITEM(head, H_TASK), p->o[P_TASK]);
    if (same > 0)
        same = eq(PyTuple_GET_ITEM(body, B_INSTANCE), p->o[P_INSTANCE]);
    if (same > 0 && !named)
        same = eq(name, p->o[P_NAME]);
    if (same > 0) {
        PyObject *pins = SLOT(ctask, self->task_off[T_PINS]);
        int pinned = pins == NULL ? -2 : truth(pins);
        same = pinned == -2 ? 0 : pinned < 0 ? -1 : !pinned;
    }
    if (same < 0)
        return -1;
    if (!same)
        return pend_flush(self);
    /* take_release on the HeldLock it would have made: the chain key back, the entries gone */
    self->ev_now++;
    slot_set(ctask, self->task_off[T_CHAIN_KEY], p->o[P_PREV_KEY]);
    if (named)
        self->resolved++;
    self->elided++;
    pend_pop(self);
    return 1;
}

#endif
