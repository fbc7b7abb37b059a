/*
 * A part of lockcheck/engine/_capturecore.c, which includes its parts in order (each uses what the
 * parts before it define).  This one: an irq-context change (a flags column unlike the task's last
 * line's): a task's view made here (`make_view`), the change applied as fast_held.irq_change would
 * (`irq_here`) or by fast_stages.context_hit (`change_context`).
 */
#ifndef LOCKCHECK_CAPTURECORE_IRQ_H
#define LOCKCHECK_CAPTURECORE_IRQ_H

/* `_View(ctask, a_held)` (args: the two; a new reference), its fields set here as
 * fast_stages._View.__init__ sets them -- irq_context from `rules.task_irq_context`, asked once per
 * pair of depths -- or by the class itself when the task's fields are not the plain ones. */
static PyObject *make_view(CaptureFilter *self, PyObject **args) {
    PyObject *ctask = args[0];
    if (Py_TYPE(ctask) == self->task_type) {
        PyObject *held = SLOT(ctask, self->task_off[T_HELD]), *he = SLOT(ctask, self->task_off[T_HARDIRQS_ENABLED]),
                 *need = SLOT(ctask, self->task_off[T_USAGE_NEED]), *recent = SLOT(ctask, self->task_off[T_ACQUIRED_EVER]);
        PyObject *hd_obj = SLOT(ctask, self->task_off[T_HARDIRQ_DEPTH]), *sd_obj = SLOT(ctask, self->task_off[T_SOFTIRQ_DEPTH]);
        long hd = hd_obj != NULL ? small_long(hd_obj) : -2, sd = sd_obj != NULL ? small_long(sd_obj) : -2;
        if (held != NULL && recent != NULL && need != NULL && PyList_CheckExact(need) && (he == Py_True || he == Py_False) &&
            hd >= 0 && hd < 8 && sd >= 0 && sd < 8) {
            PyObject **ictx = &self->irq_context_of[hd * 8 + sd];
            if (*ictx == NULL) {
                PyObject *depths[2] = {hd_obj, sd_obj};
                if ((*ictx = PyObject_Vectorcall(self->irq_context_fn, depths, 2, NULL)) == NULL)
                    return NULL;
            }
            PyObject *hoff = rules_hardirqs_off(he == Py_True, hd) ? Py_True : Py_False;
            PyObject *usage = hoff == Py_True ? PyList_GetSlice(need, RULES_HARDIRQS_OFF_NEEDS, PY_SSIZE_T_MAX)
                                              : PyList_GetSlice(need, 0, RULES_HARDIRQS_OFF_NEEDS);
            if (usage == NULL)
                return NULL;
            PyObject *view = self->view_type->tp_alloc(self->view_type, 0);
            if (view == NULL) {
                Py_DECREF(usage);
                return NULL;
            }
            PyObject *fields[V_N] = {ctask, held, *ictx, hoff, usage, recent, args[1]};
            for (int i = 0; i < V_N; i++)
                SLOT(view, self->view_off[i]) = Py_NewRef(fields[i]);
            Py_DECREF(usage);
            return view;
        }
    }
    return PyObject_Vectorcall((PyObject *)self->view_type, args, 2, NULL);
}

/* fast_held._marked: whether every checked held lock's class has `bits` (shifted to _READ for a
 * reader): 1, 0 (or a held entry it does not know: 0 too), -1 error */
static int held_marked(CaptureFilter *self, PyObject *held, long bits) {
    long read_bits = bits << self->read_shift;
    Py_ssize_t n = PyList_GET_SIZE(held);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *entry = PyList_GET_ITEM(held, i);
        if (Py_TYPE(entry) != self->held_type)
            return 0;
        PyObject *check = SLOT(entry, self->held_off[HL_CHECK]), *cls = SLOT(entry, self->held_off[HL_CLS]),
                 *read = SLOT(entry, self->held_off[HL_READ]);
        if (check == NULL || cls == NULL || read == NULL)
            return 0;
        int checked = PyObject_IsTrue(check);
        if (checked <= 0) {
            if (checked < 0)
                return -1;
            continue;
        }
        int reader = PyObject_IsTrue(read);
        if (reader < 0)
            return -1;
        ClassSlot *cs = capcache_class(&self->cache, cls);
        if (cs == NULL && PyErr_Occurred())
            return -1;
        PyObject *node = capcache_get(cs, CS_NODE, self->nodes, cls);
        if (node == NULL || !PyDict_Check(node))
            return PyErr_Occurred() ? -1 : 0;
        PyObject *usage = capcache_get(cs, CS_USAGE, node, s_usage);
        if (usage == NULL)
            return PyErr_Occurred() ? -1 : 0;
        long have = small_long(usage), want = reader ? read_bits : bits;
        if (have < 0 || (have & want) != want)
            return 0;
    }
    return 1;
}

static inline int truth_slot(PyObject *o, Py_ssize_t off, int *out) {
    PyObject *v = SLOT(o, off);
    if (v == NULL)
        return -1;
    *out = PyObject_IsTrue(v);
    return *out < 0 ? -1 : 0;
}

/* fast_stages.context_hit done here for the common case: each op of `ops` applied as fast_held.irq_change
 * would (none marking a usage bit or noting anything), the task's stamps, the checker's events, the
 * annotator's nesting, and the task's new view (a new reference in *out): 1; 0: not here (nothing changed:
 * the Python function decides), -1 error. */
static int irq_here(CaptureFilter *self, TaskSlot *slot, PyObject *view, PyObject *ctask, PyObject *task,
                    PyObject *ops, PyObject *display, PyObject *cpu, PyObject *lineno, PyObject *ts, PyObject **out) {
    if (!PyTuple_CheckExact(ops) || PyTuple_GET_SIZE(ops) > 8 || Py_TYPE(ctask) != self->task_type ||
        self->preempt_rt || self->stopped)
        return 0;
    int threaded, pinned, he, se, known;
    if (truth_slot(ctask, self->task_off[T_HARDIRQ_THREADED], &threaded) < 0 ||
        truth_slot(ctask, self->task_off[T_PINS], &pinned) < 0 ||
        truth_slot(ctask, self->task_off[T_HARDIRQS_ENABLED], &he) < 0 ||
        truth_slot(ctask, self->task_off[T_SOFTIRQS_ENABLED], &se) < 0 ||
        truth_slot(ctask, self->task_off[T_IRQ_KNOWN], &known) < 0)
        return PyErr_Occurred() ? -1 : 0;
    if (threaded || pinned)
        return 0;
    PyObject *hd_obj = SLOT(ctask, self->task_off[T_HARDIRQ_DEPTH]), *sd_obj = SLOT(ctask, self->task_off[T_SOFTIRQ_DEPTH]);
    PyObject *irq_events = SLOT(ctask, self->task_off[T_IRQ_EVENTS]);
    PyObject *held = SLOT(view, self->view_off[V_HELD]);
    if (hd_obj == NULL || sd_obj == NULL || irq_events == NULL || !PyDict_CheckExact(irq_events) || held == NULL ||
        !PyList_CheckExact(held))
        return 0;
    long hd = small_long(hd_obj), sd = small_long(sd_obj);
    if (hd < 0 || sd < 0)
        return 0;
    /* the ops tried on the task's irq state, nothing changed yet */
    int stamped[8], n = (int)PyTuple_GET_SIZE(ops), refresh = 0;
    Py_ssize_t depth = PyList_GET_SIZE(held);
    for (int i = 0; i < n; i++) {
        PyObject *op = PyTuple_GET_ITEM(ops, i);
        int k = 0;
        while (k < OP_N && self->irq_ops[k] != op)
            k++;
        if (k == OP_N)
            return 0; /* (an op not one of the eight, or not the same str: the Python function's) */
        unsigned long t = rules_irq(self->irq_rule, k, hd, sd, he, se); /* rules.irq_transition */
        if (t & RULES_IRQT_CHECKER)
            return 0; /* a note or the kernel's warning */
        long marks = (long)(t >> RULES_IRQT_MARKS_SHIFT);
        if (marks && depth) {
            int marked = held_marked(self, held, marks);
            if (marked <= 0)
                return marked;
        }
        RULES_IRQ_STEP(t, hd, sd, he, se);
        stamped[i] = (t & RULES_IRQT_RECORD) != 0;
        refresh |= (t & RULES_IRQT_REFRESH) != 0;
    }
    PyObject *need = NULL;
    if (refresh) { /* tasks.usage_needs */
        if (!known) {
            need = self->used_only;
        } else if ((need = self->need_of[(hd ? 4 : 0) + (sd ? 2 : 0) + (se ? 1 : 0)]) == NULL) {
            PyObject *key = Py_BuildValue("(OOO)", hd ? Py_True : Py_False, sd ? Py_True : Py_False,
                                          se ? Py_True : Py_False);
            if (key == NULL)
                return -1;
            need = PyDict_GetItemWithError(self->usage_needs, key); /* (a constant table: kept) */
            Py_DECREF(key);
            if (need == NULL)
                return PyErr_Occurred() ? -1 : 0;
            self->need_of[(hd ? 4 : 0) + (sd ? 2 : 0) + (se ? 1 : 0)] = Py_NewRef(need);
        }
    }
    /* the annotator's nesting after the ops (annotations.context_after) */
    PyObject *ctx = NULL, *ctx_was = NULL; /* (ctx_was: ctx.get(task), borrowed; NULL: absent) */
    if (self->annotator != NULL) {
        /* (the task's slot knows it: no lookup; the slot checked to be still the task's, as pend_flush ran since) */
        if (slot != NULL && slot->actx_known && slot->gen == self->cache.gen && slot->task != NULL &&
            same_str(slot->task, task)) {
            ctx_was = slot->actx;
        } else if ((ctx_was = PyDict_GetItemWithError(self->actx, task)) == NULL && PyErr_Occurred()) {
            return -1;
        }
        ctx = ctx_was == NULL ? small_ints[0] : ctx_was;
        Py_INCREF(ctx);
        for (int i = 0; i < n; i++) {
            PyObject *op = PyTuple_GET_ITEM(ops, i);
            int k = 0;
            while (self->irq_ops[k] != op) /* (irq_here took only the eight ops) */
                k++;
            long before = small_long(ctx);
            PyObject **kept = before >= 0 && before < MEMO_CTX ? &self->ctx_after_of[before * 8 + k] : NULL;
            if (kept != NULL && *kept != NULL) {
                Py_DECREF(ctx);
                ctx = Py_NewRef(*kept);
                continue;
            }
            PyObject *key = before >= 0 && before < (1L << 24) ? PyLong_FromLong(before * 8 + k) : NULL;
            PyObject *next = key == NULL ? NULL : PyDict_GetItemWithError(self->ctx_memo, key);
            if (next != NULL) {
                Py_INCREF(next);
            } else if (!PyErr_Occurred()) { /* annotations.context_after: a function of the two */
                PyObject *args[2] = {ctx, op};
                next = PyObject_Vectorcall(self->context_after, args, 2, NULL);
                if (next != NULL && key != NULL && PyDict_SetItem(self->ctx_memo, key, next) < 0)
                    Py_CLEAR(next);
            }
            Py_XDECREF(key);
            Py_DECREF(ctx);
            if (next == NULL)
                return -1;
            if (kept != NULL)
                *kept = Py_NewRef(next);
            ctx = next;
        }
    }
    /* -- applied -------------------------------------------------------------------------- */
    int r = -1;
    PyObject *hd_new = PyLong_FromLong(hd), *sd_new = PyLong_FromLong(sd);
    if (hd_new == NULL || sd_new == NULL)
        goto out;
    if (display != Py_None)
        slot_set(ctask, self->task_off[T_NAME], display); /* (Checker.feed's, before the transition's stamp) */
    PyObject *name = SLOT(ctask, self->task_off[T_NAME]);
    slot_set(ctask, self->task_off[T_HARDIRQS_ENABLED], he ? Py_True : Py_False);
    slot_set(ctask, self->task_off[T_SOFTIRQS_ENABLED], se ? Py_True : Py_False);
    slot_set(ctask, self->task_off[T_HARDIRQ_DEPTH], hd_new);
    slot_set(ctask, self->task_off[T_SOFTIRQ_DEPTH], sd_new);
    if (need != NULL)
        slot_set(ctask, self->task_off[T_USAGE_NEED], need);
    for (int i = 0; i < n; i++) { /* fast_held._defer_irq_event, its evidence (Evidence, file, lineno, name, at, ts) */
        if (!stamped[i])
            continue;
        PyObject *old = PyDict_GetItemWithError(irq_events, s_stamp_key);
        if (old == NULL && PyErr_Occurred())
            goto out;
        PyObject *stamp = PyNumber_Add(old == NULL ? small_ints[0] : old, small_ints[1]);
        if (stamp == NULL)
            goto out;
        PyObject *record = PyTuple_Pack(7, stamp, self->evidence, self->file, lineno, name, Py_None, ts);
        int failed = record == NULL || PyDict_SetItem(irq_events, s_stamp_key, stamp) < 0 ||
                     PyDict_SetItem(irq_events, PyTuple_GET_ITEM(ops, i), record) < 0;
        Py_DECREF(stamp);
        Py_XDECREF(record);
        if (failed)
            goto out;
    }
    self->ev_now += n;
    if (cpu != Py_None)
        slot_set(ctask, self->task_off[T_CPU], cpu);
    PyObject *a_held = SLOT(view, self->view_off[V_A_HELD]);
    if (self->annotator != NULL) {
        /* (the same object there already: nothing to write; the task's slot is told it, by change_context's caller) */
        if (ctx != ctx_was && PyDict_SetItem(self->actx, task, ctx) < 0)
            goto out;
        Py_XSETREF(self->irq_actx, Py_NewRef(ctx));
        a_held = PyDict_GetItemWithError(self->held_of, task);
        if (a_held == NULL) {
            if (PyErr_Occurred())
                goto out;
            a_held = Py_None;
        }
    }
    if (a_held == NULL)
        a_held = Py_None;
    PyObject *args[2] = {ctask, a_held};
    *out = make_view(self, args);
    if (*out != NULL)
        r = 1;
out:
    Py_XDECREF(ctx);
    Py_XDECREF(hd_new);
    Py_XDECREF(sd_new);
    return r;
}

/* `float(timestamp)` of a time stamp take_line split (ASCII digits, at most one point, neither first
 * nor last: stamp_ok's): where its digits make an integer below 10^15 and it has at most 22 after the
 * point, that integer divided by a power of ten -- both exact doubles, so the one IEEE division is the
 * correctly rounded value float() reads (Clinger's fast path); else float() itself.  (PyFloat_FromString
 * cost ~550 instructions an irq-context change, callgrind.) */
static PyObject *stamp_float(PyObject *timestamp) {
    static const double tens[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                    1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
    if (PyUnicode_IS_COMPACT_ASCII(timestamp)) {
        const char *p = (const char *)PyUnicode_1BYTE_DATA(timestamp);
        Py_ssize_t n = PyUnicode_GET_LENGTH(timestamp), after = -1;
        unsigned long long m = 0;
        int digits = 0, ok = n > 0;
        for (Py_ssize_t i = 0; ok && i < n; i++) {
            char c = p[i];
            if (c == '.' && after < 0) {
                after = 0;
            } else if (c >= '0' && c <= '9') {
                if (m || c != '0')
                    digits++;
                m = m * 10 + (unsigned long long)(c - '0');
                if (after >= 0)
                    after++;
                ok = digits <= 15;
            } else {
                ok = 0;
            }
        }
#if FLT_EVAL_METHOD == 0 /* (double arithmetic in doubles: an x87 build may round twice; float() there) */
        if (ok && after <= 22)
            return PyFloat_FromDouble((double)m / tens[after < 0 ? 0 : after]);
#else
        (void)tens;
#endif
    }
    return PyFloat_FromString(timestamp);
}

/* The Python loop's irq-context change (`context_transition` + `context_hit`, both asked) of a
 * line whose flags column changed: the task's new view (borrowed, in the views), or NULL: passed
 * on, nothing changed (an error set, or not).  Once applied, the change stands whether or not the
 * line's lock event is applied here too (as in the Python loop: its context is the task's now). */
static PyObject *change_context(CaptureFilter *self, TaskSlot *slot, PyObject *view, PyObject *head, PyObject *fl,
                                PyObject *body, PyObject *timestamp, PyObject *old) {
    PyObject *task = PyTuple_GET_ITEM(head, H_TASK);
    if (PyTuple_GET_ITEM(body, B_OP) == self->acquire_op) {
        PyObject *name = PyTuple_GET_ITEM(body, B_NAME);
        if (!PyUnicode_Check(name) || PyUnicode_GET_LENGTH(name) == 0 || self->probe_known)
            return NULL;
        if (PyDict_GET_SIZE(self->pending)) {
            PyObject *waiting = PyDict_GetItemWithError(self->pending, PyTuple_GET_ITEM(head, H_CPU_TEXT));
            if (waiting != NULL || PyErr_Occurred())
                return NULL;
        }
    }
    PyObject *state = PyTuple_GET_ITEM(fl, F_STATE);
    PyObject *before = old == NULL ? small_ints[0] : old;
    long b = small_long(before), s = small_long(state);
    PyObject **kept = b >= 0 && b < MEMO_STATES && s >= 0 && s < MEMO_STATES ? &self->transition_of[b * MEMO_STATES + s]
                                                                             : NULL;
    PyObject *ops;
    if (kept != NULL && *kept != NULL) {
        ops = Py_NewRef(*kept);
    } else {
        PyObject *pair = PyTuple_Pack(2, before, state);
        if (pair == NULL)
            return NULL;
        ops = PyDict_GetItemWithError(self->transitions, pair); /* (context_transition is a function of the two) */
        if (ops == NULL) {
            PyObject *args2[2] = {before, state};
            ops = PyErr_Occurred() ? NULL : PyObject_Vectorcall(self->transition, args2, 2, NULL);
            if (ops != NULL && PyDict_SetItem(self->transitions, pair, ops) < 0)
                Py_CLEAR(ops);
        } else {
            Py_INCREF(ops);
        }
        Py_DECREF(pair);
        if (ops == NULL)
            return NULL;
        if (kept != NULL)
            *kept = Py_NewRef(ops);
    }
    PyObject *result = NULL;
    PyObject *lineno = PyLong_FromLongLong(self->lineno);
    PyObject *ts = lineno ? stamp_float(timestamp) : NULL;
    if (ts == NULL)
        goto out;
    PyObject *here = NULL;
    int done = irq_here(self, slot, view, SLOT(view, self->view_off[V_TASK]), task, ops, PyTuple_GET_ITEM(head, H_DISPLAY),
                        PyTuple_GET_ITEM(head, H_CPU), lineno, ts, &here);
    if (done < 0)
        goto out;
    if (done) {
        Py_ssize_t k = PyTuple_GET_SIZE(ops);
        if (PyDict_SetItem(self->views, task, here) < 0 || PyDict_SetItem(self->contexts, task, state) < 0) {
            Py_DECREF(here);
            goto out;
        }
        self->context_events += k;
        result = here;
        Py_DECREF(here); /* the views hold it */
        goto out;
    }
    PyObject *args[10] = {self->checker, view, self->annotated, task, ops, PyTuple_GET_ITEM(head, H_DISPLAY),
                          PyTuple_GET_ITEM(head, H_CPU), self->file, lineno, ts};
    /* (it counts the checker's events: the counts kept here go back first, and are read again) */
    if (suspend(self) < 0)
        goto out;
    PyObject *changed = PyObject_Vectorcall(self->context_hit, args, 10, NULL);
    capcache_forget(&self->cache); /* (Python code: what the task slots remember may be out of date) */
    if (changed == NULL) /* (its error kept: nothing below may run with it set) */
        goto out;
    if (known_sync(&self->known, self->chain_cache) < 0) {
        Py_XDECREF(changed);
        goto out;
    }
    if (attr_longlong(self->cstats, s_events, &self->ev_now) < 0 ||
        attr_longlong(self->cstats, s_chain_hits, &self->hits_now) < 0) {
        Py_XDECREF(changed);
        goto out;
    }
    if (changed == NULL || changed == Py_None) {
        Py_XDECREF(changed);
        goto out;
    }
    Py_ssize_t n = PyObject_Length(ops);
    if (n < 0 || PyDict_SetItem(self->views, task, changed) < 0 || PyDict_SetItem(self->contexts, task, state) < 0) {
        Py_DECREF(changed);
        goto out;
    }
    self->context_events += n;
    result = changed;
    Py_DECREF(changed); /* the views hold it */
out:
    Py_DECREF(ops);
    Py_XDECREF(lineno);
    Py_XDECREF(ts);
    return result;
}

#endif
