/*
 * A part of lockcheck/engine/_capturecore.c, which includes its parts in order (each uses what the
 * parts before it define).  This one: one line: its pieces from the caches (`split_line`, a body
 * from its shape), the task's view, and which of the take_* functions applies it (`take_line`).
 */
#ifndef LOCKCHECK_CAPTURECORE_LINE_H
#define LOCKCHECK_CAPTURECORE_LINE_H

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
    if (!split_stamped(text, n, &at))
        return 0;
    Py_ssize_t flags_end = at.blank >= at.from ? at.blank : at.from;
    HFSlot *hs = NULL;
    if (flags_end <= HF_MAX && at.end <= at.from) { /* (head and flags together: the slot of both) */
        hs = &self->cache.hf[piece_index(text, flags_end) & (HF_SLOTS - 1)];
        if (hs->head != NULL && hs->n == flags_end && hs->end == at.end && hs->from == at.from &&
            memcmp(hs->bytes, text, (size_t)flags_end) == 0) {
            out->head = hs->head;
            out->fl = hs->fl;
            goto body;
        }
    }
    out->head = capcache_piece(&self->cache, PC_HEAD, self->heads, text, at.end);
    if (out->head == NULL)
        return 0;
    out->fl = capcache_piece(&self->cache, PC_FLAGS, self->flag_cache, text + at.from, flags_end - at.from);
    if (out->fl == NULL)
        return 0;
    if (hs != NULL) { /* (what the two slots gave, for these bytes split here) */
        Py_XSETREF(hs->head, Py_NewRef(out->head));
        Py_XSETREF(hs->fl, Py_NewRef(out->fl));
        hs->n = flags_end;
        hs->end = at.end;
        hs->from = at.from;
        memcpy(hs->bytes, text, (size_t)flags_end);
    }
body:
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
    if (self->npend && PyTuple_GET_ITEM(body, B_OP) == self->acquire_op) {
        /* (an acquisition reads the held stack: another task's pending ones made first; the task's own
         * stay, take_acquire reads them as held) */
        int same = eq(task, self->pend[0].o[P_TASK]);
        if (same < 0 || (!same && pend_flush(self) < 0)) {
            r = -1;
            goto done;
        }
    }
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
            if (PyErr_Occurred() || pend_flush(self) < 0 || (view = new_view(self, task)) == NULL) {
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
            if (pend_flush(self) < 0) {
                r = -1;
                goto done;
            }
            Py_XINCREF(old);
            PyObject *changed = change_context(self, ts, view, head, fl, body, timestamp, old);
            PyObject *actx_now = self->irq_actx; /* (what irq_here set the annotator's ctx[task] to, or NULL) */
            self->irq_actx = NULL;
            Py_XDECREF(old);
            if (changed == NULL) {
                Py_XDECREF(actx_now);
                r = PyErr_Occurred() ? -1 : 0;
                goto done;
            }
            view = changed; /* (borrowed: the views hold it) */
            if ((ts = capcache_task(&self->cache, task)) == NULL) {
                Py_XDECREF(actx_now);
                r = -1;
                goto done;
            }
            Py_XSETREF(ts->view, Py_NewRef(view));
            Py_XSETREF(ts->context, Py_NewRef(PyTuple_GET_ITEM(fl, F_STATE)));
            ts->context_known = 1;
            Py_XSETREF(ts->actx, actx_now); /* (irq_here's, or NULL: not known -- Python's context_hit set it) */
            ts->actx_known = actx_now != NULL;
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
    if (op == self->acquire_op)
        r = take_acquire(self, view, ctask, head, fl, body, timestamp, sp.ts, sp.ts_len);
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

#endif
