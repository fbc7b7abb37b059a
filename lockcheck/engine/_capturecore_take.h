/*
 * A part of lockcheck/engine/_capturecore.c, which includes its parts in order (each uses what the
 * parts before it define).  This one: the lock lines the filter applies: an acquisition onto a cached chain (`take_acquire`), the release of the
 * innermost lock (`take_release`), the contention tracepoints (`take_other`).
 */
#ifndef LOCKCHECK_CAPTURECORE_TAKE_H
#define LOCKCHECK_CAPTURECORE_TAKE_H

/* ---- one line ---------------------------------------------------------------------------- */

/* The usage an acquisition marks (rules.acquire_usage with hardirqs_off False: the view's needs
 * are its task's for its hardirqs-off state), or -1: not one the tables know. */
static long acquire_usage(CaptureFilter *self, PyObject *needs, long read, int trylock, int check) {
    if (read < 0 || read > 2)
        return -1;
    int i = (check ? 6 : 0) + (int)read * 2 + (trylock ? 1 : 0);
    int index = self->usage_index[i];
    if (index < 0)
        return self->usage_const[i];
    if (!PyList_CheckExact(needs) || index >= PyList_GET_SIZE(needs))
        return -1;
    long need = small_long(PyList_GET_ITEM(needs, index));
    return need < 0 ? -1 : need;
}

/* the task's (the view's) irq context on top of its held stack: the top entry's, or -2 */
static long top_context(CaptureFilter *self, PyObject *top) {
    if (Py_TYPE(top) == self->held_type) {
        PyObject *ctx = SLOT(top, self->held_off[HL_IRQ_CONTEXT]);
        return ctx == NULL ? -2 : small_long(ctx);
    }
    return -2;
}

static PyObject *new_held(CaptureFilter *self, PyObject **fields) {
    PyObject *hlock = self->held_type->tp_alloc(self->held_type, 0);
    if (hlock == NULL)
        return NULL;
    for (int i = 0; i < HL_N; i++) {
        Py_INCREF(fields[i]);
        SLOT(hlock, self->held_off[i]) = fields[i];
    }
    return hlock;
}

/* `recent.add(pair)` (tasks.RecentLocks.add): a lock seen again moves to the end; a new one is
 * added when that keeps within the limit, else (the oldest to forget) the method itself is asked */
static int remember(CaptureFilter *self, PyObject *recent, PyObject *pair, Py_hash_t pair_hash) {
    if (Py_TYPE(recent) == self->recent_type) {
        PyObject *locks = SLOT(recent, self->recent_off[R_LOCKS]), *limit = SLOT(recent, self->recent_off[R_LIMIT]);
        if (locks != NULL && limit != NULL && Py_TYPE(locks) == &PyODict_Type) {
            /* (most locks a task takes it took lately: the move deferred, _capturecore_recent.h) */
            RecentRing *ring = ring_take(&self->rings, recent);
            if (ring == NULL)
                return -1;
            int moved = ring_moved(&self->rings, ring, locks, pair, pair_hash);
            if (moved != 0)
                return moved < 0 ? -1 : 0;
            if (ring_flush(&self->rings, ring, 0) < 0) /* (a new lock: added after the moves before it) */
                return -1;
            long most = small_long(limit);
            if (most >= 0 && PyDict_GET_SIZE(locks) < most)
                return PyObject_SetItem(locks, pair, Py_None);
        }
    }
    PyObject *done = PyObject_CallMethodOneArg(recent, s_add, pair);
    Py_XDECREF(done);
    return done == NULL ? -1 : 0;
}

/* `read_policy(name, in_irq)` (a new reference): asked once per class and irq flag when the policy is
 * ftrace_context.read_mode (a function of the two), else every time */
static PyObject *read_mode(CaptureFilter *self, PyObject *name, int in_irq) {
    PyObject *known = NULL;
    if (self->read_pure) {
        known = PyDict_GetItemWithError(self->read_memo, name);
        if (known == NULL) {
            if (PyErr_Occurred())
                return NULL;
            known = Py_BuildValue("[OO]", Py_None, Py_None);
            int r = known == NULL ? -1 : PyDict_SetItem(self->read_memo, name, known);
            Py_XDECREF(known);
            if (r < 0)
                return NULL;
        }
        PyObject *mode = PyList_GET_ITEM(known, in_irq);
        if (mode != Py_None) {
            Py_INCREF(mode);
            return mode;
        }
    }
    PyObject *mode = PyObject_CallFunctionObjArgs(self->read_policy, name, in_irq ? Py_True : Py_False, NULL);
    if (mode != NULL && known != NULL) {
        Py_INCREF(mode);
        PyObject *old = PyList_GET_ITEM(known, in_irq);
        PyList_SET_ITEM(known, in_irq, mode);
        Py_DECREF(old);
    }
    return mode;
}

static int pend_depth(CaptureFilter *self, PyObject *view, PyObject *instance);

/* an acquisition (the Python loop's ACQUIRE branch): 1 applied, 0 passed on, -1 error.  `timestamp`: the
 * line's time stamp as a str, or NULL: not made yet (its `ts_len` bytes at `ts`, at most 40) */
static int take_acquire(CaptureFilter *self, PyObject *view, PyObject *ctask, PyObject *head, PyObject *fl,
                        PyObject *body, PyObject *timestamp, const char *ts, Py_ssize_t ts_len) {
    PyObject *task = PyTuple_GET_ITEM(head, H_TASK);
    PyObject *name = PyTuple_GET_ITEM(body, B_NAME);
    PyObject *instance = PyTuple_GET_ITEM(body, B_INSTANCE);
    PyObject *cpu = PyTuple_GET_ITEM(head, H_CPU);
    if (!PyUnicode_Check(name) || PyUnicode_GET_LENGTH(name) == 0 || self->probe_known)
        return 0;
    if (PyDict_GET_SIZE(self->pending)) {
        PyObject *waiting = PyDict_GetItemWithError(self->pending, PyTuple_GET_ITEM(head, H_CPU_TEXT));
        if (waiting != NULL || PyErr_Occurred())
            return waiting == NULL ? -1 : 0;  /* (pending's lists: present is there, the Python loop's) */
    }
    int trylock = truth(PyTuple_GET_ITEM(body, B_TRYLOCK));
    int read = truth(PyTuple_GET_ITEM(body, B_READ));
    if (trylock < 0 || read < 0)
        return -1;
    long code = small_long(PyTuple_GET_ITEM(fl, F_CODE));
    if (code < 0)
        return 0;
    PyObject *mode;
    if (read) {
        mode = read_mode(self, name, code >= 4);
        if (mode == NULL)
            return -1;
    } else {
        mode = self->write_mode;
        Py_INCREF(mode);
    }
    int r = 0;
    PyObject *chain_key = NULL, *key = NULL;
    Verdict verdict = {1, NULL, 0, NULL, 0, NULL, NULL};
    /* the task's acquisitions pending on top of its held list (_capturecore_pending.h), or none */
    int pending = pend_depth(self, view, instance);
    if (pending < 0) {
        r = -1;
        goto done;
    }
    int annotated = self->annotator != NULL;
    if (annotated) {
        r = decide(self, view, task, name, mode, trylock, &verdict);
        if (r <= 0)
            goto done;
        r = 0;
    }
    int check = verdict.check;
    PyObject *cls = verdict.cls != NULL ? verdict.cls : name; /* (the class: "CLASS/N" for a subclass) */
    /* _push_hit: everything asked before anything changes */
    ClassSlot *cs = capcache_class(&self->cache, cls);
    if (cs == NULL && PyErr_Occurred()) {
        r = -1;
        goto done;
    }
    PyObject *node = capcache_get(cs, CS_NODE, self->nodes, cls);
    if (node == NULL || !PyDict_Check(node)) {
        r = PyErr_Occurred() ? -1 : 0;
        goto done;
    }
    PyObject *held = SLOT(view, self->view_off[V_HELD]);
    if (held == NULL || !PyList_CheckExact(held))
        goto done;
    Py_ssize_t depth = PyList_GET_SIZE(held) + pending;
    if (depth >= self->fast_depth)
        goto done;
    long mode_value = small_long(mode);
    long need = acquire_usage(self, SLOT(view, self->view_off[V_USAGE_NEED]), mode_value, trylock, check);
    if (need < 0)
        goto done;
    PyObject *usage = capcache_get(cs, CS_USAGE, node, s_usage);
    if (usage == NULL) {
        r = PyErr_Occurred() ? -1 : 0;
        goto done;
    }
    long have = small_long(usage);
    if (have < 0 || (need & ~have))
        goto done;
    PyObject *prev_key = SLOT(ctask, self->task_off[T_CHAIN_KEY]);
    PyObject *irq_context = SLOT(view, self->view_off[V_IRQ_CONTEXT]);
    PyObject *hardirqs_off = SLOT(view, self->view_off[V_HARDIRQS_OFF]);
    PyObject *recent = SLOT(view, self->view_off[V_RECENT]);
    if (prev_key == NULL || irq_context == NULL || hardirqs_off == NULL || recent == NULL)
        goto done;
    PyObject *start = prev_key;
    if (depth) {
        long top = pending ? small_long(self->pend[pending - 1].o[P_IRQ_CONTEXT])
                           : top_context(self, PyList_GET_ITEM(held, depth - 1));
        long ctx = small_long(irq_context);
        if (top < 0 || top > 3 || ctx < 0 || ctx > 3)
            goto done;
        if (rules_separate(self->separate, top, ctx))
            start = self->initial;
    }
    Py_hash_t hash = rules_hash3(self->hash_ok, start, cls, mode);
    if (hash == -1) {
        r = -1;
        goto done;
    }
    chain_key = known_int(&self->known, hash);
    if (chain_key == NULL) {
        r = -1;
        goto done;
    }
    int validated = rules_validates(check ? self->validates_checked : self->validates_unchecked, trylock);
    if (validated) {
        int cached = known_cached(&self->known, self->chain_cache, hash, chain_key);
        if (cached <= 0) {
            r = cached;
            goto done;
        }
    }
    /* -- from here on, applied ------------------------------------------------------------- */
    r = -1;
    self->ev_now++;
    if (recent != Py_None) {
        Py_hash_t pair_hash;
        PyObject *pair = capcache_pair_hashed(&self->cache, name, instance, &pair_hash);
        if (pair == NULL)
            goto done;
        TaskSlot *ts = self->cur;
        /* (the pair the filter added last to these recent locks is their newest while no Python code ran
         * (the slot is forgotten then): added again, it stays so) */
        if (ts == NULL || ts->recent != recent || ts->recent_pair != pair) {
            int added = remember(self, recent, pair, pair_hash);
            if (added < 0) {
                Py_DECREF(pair);
                goto done;
            }
            if (ts != NULL) {
                Py_XSETREF(ts->recent, Py_NewRef(recent));
                Py_XSETREF(ts->recent_pair, Py_NewRef(pair));
            }
        }
        Py_DECREF(pair);
        RecentRing *ring = Py_TYPE(recent) == self->recent_type ? ring_find(&self->rings, recent) : NULL;
        if (ring != NULL) {
            ring->last = self->ev_now; /* (set when its moves are made) */
        } else {
            PyObject *last = PyLong_FromLongLong(self->ev_now);
            if (last == NULL)
                goto done;
            int failed = 0;
            if (Py_TYPE(recent) == self->recent_type)
                Py_XSETREF(SLOT(recent, self->recent_off[R_LAST]), last); /* (RecentLocks.last, a slot) */
            else {
                failed = PyObject_SetAttr(recent, s_last, last) < 0;
                Py_DECREF(last);
            }
            if (failed)
                goto done;
        }
    }
    /* (the HeldLock, its event and the annotator's entry: pending, made by pend_flush) */
    Py_INCREF(prev_key); /* (held by the pending acquisition: the slot is set below) */
    PyObject *pend_prev = prev_key;
    slot_set(ctask, self->task_off[T_CHAIN_KEY], chain_key);
    if (validated)
        self->hits_now++;
    PyObject *a_held = Py_None;
    if (annotated && annotate_acquire(self, view, task, name, trylock, cpu, &verdict, &a_held) < 0) {
        Py_DECREF(pend_prev);
        goto done;
    }
    /* the reader */
    Py_hash_t key_hash;
    key = capcache_pair_hashed(&self->cache, task, instance, &key_hash);
    if (key == NULL) {
        Py_DECREF(pend_prev);
        goto done;
    }
    PyObject *entry = dict_get_hashed(self->held_names, key, key_hash);
    int names = entry == NULL;
    if (entry == NULL) {
        if (PyErr_Occurred()) {
            Py_DECREF(pend_prev);
            goto done;
        }
    } else {
        if (!PyList_CheckExact(entry) || PyList_GET_SIZE(entry) < 2) {
            PyErr_SetString(PyExc_TypeError, "a held name entry is no list");
            Py_DECREF(pend_prev);
            goto done;
        }
        Py_INCREF(name);
        PyObject *old = PyList_GET_ITEM(entry, 0);
        PyList_SET_ITEM(entry, 0, name);
        Py_DECREF(old);
        if (list_add(entry, 1, 1) < 0) {
            Py_DECREF(pend_prev);
            goto done;
        }
    }
    {
        Pending *p = &self->pend[self->npend++]; /* (pend_depth left room for it) */
        /* (each slot written by name, no array and loop: ~85 instructions a push less, callgrind) */
        _Static_assert(P_N == 18 && P_OWNED == 13, "a value written below for every pending slot");
        PyObject **o = p->o;
        o[P_HEAD] = Py_NewRef(head);
        o[P_BODY] = Py_NewRef(body);
        o[P_MODE] = Py_NewRef(mode);
        o[P_TIMESTAMP] = Py_XNewRef(timestamp); /* (NULL: made by pend_make from `ts`) */
        o[P_HELD] = Py_NewRef(held);
        o[P_A_HELD] = Py_NewRef(a_held);
        o[P_CTX] = Py_NewRef(verdict.ctx != NULL ? verdict.ctx : Py_None);
        o[P_KEY] = Py_NewRef(key);
        o[P_IRQ_CONTEXT] = Py_NewRef(irq_context);
        o[P_HARDIRQS_OFF] = Py_NewRef(hardirqs_off);
        o[P_PREV_KEY] = pend_prev; /* (its reference taken above) */
        o[P_VIEW] = Py_NewRef(view);
        o[P_CLS] = Py_NewRef(cls);
        /* borrowed: head's and body's items, the entry owning both (P_OWNED) */
        o[P_TASK] = task;
        o[P_NAME] = name;
        o[P_INSTANCE] = instance;
        o[P_CPU] = cpu;
        o[P_DISPLAY] = PyTuple_GET_ITEM(head, H_DISPLAY);
        if (timestamp == NULL) {
            memcpy(p->ts, ts, (size_t)ts_len);
            p->ts_len = ts_len;
        }
        p->names = names;
        p->trylock = trylock;
        p->check = check;
        p->subclass = verdict.subclass;
        p->lineno = self->lineno;
    }
    self->acquisitions++;
    r = 1;
done:
    Py_XDECREF(mode);
    Py_XDECREF(chain_key);
    Py_XDECREF(key);
    return r;
}

/* a release (the Python loop's RELEASE branch, `_pop_innermost`): 1 applied, 0 passed on, -1 error */
static int pend_release(CaptureFilter *self, PyObject *view, PyObject *ctask, PyObject *head, PyObject *body);
static int pend_flush(CaptureFilter *self);

static int take_release(CaptureFilter *self, PyObject *view, PyObject *ctask, PyObject *head, PyObject *body) {
    if (self->npend) {
        int done = pend_release(self, view, ctask, head, body);
        if (done != 0)
            return done;
    }
    PyObject *task = PyTuple_GET_ITEM(head, H_TASK);
    PyObject *name = PyTuple_GET_ITEM(body, B_NAME);
    PyObject *instance = PyTuple_GET_ITEM(body, B_INSTANCE);
    Py_hash_t key_hash;
    PyObject *key = capcache_pair_hashed(&self->cache, task, instance, &key_hash);
    if (key == NULL)
        return -1;
    int r = 0;
    PyObject *entry = dict_get_hashed(self->held_names, key, key_hash);
    if (entry == NULL || !PyList_CheckExact(entry) || PyList_GET_SIZE(entry) < 2) {
        r = PyErr_Occurred() ? -1 : 0;
        goto done;
    }
    int named = 0;
    if (is_empty_str(name)) {
        name = PyList_GET_ITEM(entry, 0);
        named = 1;
    }
    PyObject *held = SLOT(view, self->view_off[V_HELD]);
    if (held == NULL || !PyList_CheckExact(held) || PyList_GET_SIZE(held) == 0)
        goto done;
    PyObject *pins = SLOT(ctask, self->task_off[T_PINS]);
    if (pins == NULL)
        goto done;
    int pinned = truth(pins);
    if (pinned != 0) {
        r = pinned < 0 ? -1 : 0;
        goto done;
    }
    Py_ssize_t depth = PyList_GET_SIZE(held);
    PyObject *top = PyList_GET_ITEM(held, depth - 1);
    if (Py_TYPE(top) != self->held_type)
        goto done;
    PyObject *t_instance = SLOT(top, self->held_off[HL_INSTANCE]), *t_lock = SLOT(top, self->held_off[HL_LOCK]),
             *t_refs = SLOT(top, self->held_off[HL_REFERENCES]),
             *t_prev = SLOT(top, self->held_off[HL_PREV_CHAIN_KEY]);
    if (t_instance == NULL || t_lock == NULL || t_refs == NULL || t_prev == NULL)
        goto done;
    int same = eq(t_instance, instance);
    if (same > 0)
        same = eq(t_lock, name);
    if (same <= 0) { /* (not the top: maybe one below it, _capturecore_below.h) */
        r = same < 0 ? -1 : release_below(self, view, ctask, held, name, instance, entry, key, named);
        goto done;
    }
    int refs = truth(t_refs);
    if (refs != 0) {
        r = refs < 0 ? -1 : 0;
        goto done;
    }
    PyObject *a_held = NULL;
    if (self->annotator != NULL) {
        a_held = SLOT(view, self->view_off[V_A_HELD]);
        if (a_held == NULL || !PyList_CheckExact(a_held) || PyList_GET_SIZE(a_held) == 0)
            goto done;
        PyObject *a_top = PyList_GET_ITEM(a_held, PyList_GET_SIZE(a_held) - 1);
        if (!PyList_CheckExact(a_top) || PyList_GET_SIZE(a_top) < 5)
            goto done;
        same = eq(PyList_GET_ITEM(a_top, 1), name);
        if (same > 0)
            same = eq(PyList_GET_ITEM(a_top, 2), instance);
        if (same <= 0) {
            r = same;
            goto done;
        }
        if (PyList_GET_SIZE(a_top) > 5) {
            int marked = truth(PyList_GET_ITEM(a_top, 5));
            if (marked != 0) {
                r = marked < 0 ? -1 : 0;
                goto done;
            }
        }
    }
    long count = small_long(PyList_GET_ITEM(entry, 1));
    if (count < 0 || (count <= 1 && PyList_GET_SIZE(entry) > 2))
        goto done; /* a lock known by its map too (by_map): the Python loop's */
    /* -- applied -------------------------------------------------------------------------- */
    r = -1;
    self->ev_now++;
    slot_set(ctask, self->task_off[T_CHAIN_KEY], t_prev);
    list_drop_last(held);
    if (a_held != NULL)
        list_drop_last(a_held);
    if (named)
        self->resolved++;
    if (count > 1) {
        if (list_add(entry, 1, -1) < 0)
            goto done;
    } else if (PyDict_DelItem(self->held_names, key) < 0) {
        goto done;
    }
    r = 1;
done:
    Py_DECREF(key);
    return r;
}

/* `lock_contended` / `lock_acquired`: the checker only counts them */
static int take_other(CaptureFilter *self, PyObject *head, PyObject *body) {
    PyObject *name = PyTuple_GET_ITEM(body, B_NAME);
    if (is_empty_str(name)) {
        if (pend_flush(self) < 0) /* (the name from the reader's entries: the pending one's made first) */
            return -1;
        PyObject *key = capcache_pair(&self->cache, PyTuple_GET_ITEM(head, H_TASK), PyTuple_GET_ITEM(body, B_INSTANCE));
        if (key == NULL)
            return -1;
        PyObject *entry = PyDict_GetItemWithError(self->held_names, key);
        Py_DECREF(key);
        if (entry == NULL)
            return PyErr_Occurred() ? -1 : 0;
        self->resolved++;
    }
    self->ev_now++;
    return 1;
}

#endif
