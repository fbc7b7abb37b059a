/*
 * A part of lockcheck/engine/_capturecore.c, which includes its parts in order (each uses what the
 * parts before it define).  This one: the annotator's part of an acquisition -- what it would decide
 * (`decide`, fast_stages._Annotated.decide, and the subclass the kernel's state gives a class held
 * twice, `resolve_subclass`: StateIndex.subclass_explaining's answer, as the annotator's `_resolve` asks
 * it), and its bookkeeping (`annotate_acquire`).
 */
#ifndef LOCKCHECK_CAPTURECORE_ANNOTATE_H
#define LOCKCHECK_CAPTURECORE_ANNOTATE_H

/* ---- the annotator's `decide` (fast_stages._Annotated.decide) --------------------------------- */

typedef struct {
    int check;
    PyObject *origin;  /* borrowed, or NULL */
    int use_state;
    PyObject *ctx;     /* borrowed */
    int subclass;      /* the annotator's subclass for a class held twice (resolve_subclass), or 0; then */
    PyObject *cls;     /* "CLASS/N" (the HeldLock's class, the annotator's key) and */
    PyObject *change;  /* the annotator's `changes` key ("subclass", CLASS, "N"), borrowed from subs_memo */
} Verdict;

/* ((N, "CLASS/N", ("subclass", CLASS, "N")), ...) for the subclasses N > 0 the kernel's state lists for
 * CLASS (`index.subclasses`, ascending), kept in subs_memo: borrowed, NULL on error */
static PyObject *subclasses_of(CaptureFilter *self, PyObject *name) {
    PyObject *known = PyDict_GetItemWithError(self->subs_memo, name);
    if (known != NULL || PyErr_Occurred())
        return known;
    PyObject *table = PyObject_GetAttr(self->index, s_subclasses);
    if (table == NULL)
        return NULL;
    PyObject *subs = PyDict_Check(table) ? PyDict_GetItemWithError(table, name) : NULL; /* (else: none known) */
    PyObject *seq = subs == NULL ? PyTuple_New(0) : PySequence_Fast(subs, "subclasses");
    Py_DECREF(table);
    if (seq == NULL || PyErr_Occurred()) {
        Py_XDECREF(seq);
        return NULL;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject *made = PyTuple_New(n);
    for (Py_ssize_t i = 0; made != NULL && i < n; i++) {
        PyObject *sub = PySequence_Fast_GET_ITEM(seq, i);
        PyObject *text = PyObject_Str(sub);
        PyObject *cls = text ? PyUnicode_FromFormat("%U/%U", name, text) : NULL;
        if (cls != NULL)
            PyUnicode_InternInPlace(&cls); /* (as the checker's class names: rules.hlock_class, interned) */
        PyObject *change = cls ? PyTuple_Pack(3, s_subclass, name, text) : NULL;
        PyObject *triple = change ? PyTuple_Pack(3, sub, cls, change) : NULL;
        Py_XDECREF(text);
        Py_XDECREF(cls);
        Py_XDECREF(change);
        if (triple == NULL)
            Py_CLEAR(made);
        else
            PyTuple_SET_ITEM(made, i, triple);
    }
    Py_DECREF(seq);
    if (made == NULL || PyDict_SetItem(self->subs_memo, name, made) < 0) {
        Py_XDECREF(made);
        return NULL;
    }
    Py_DECREF(made); /* (the memo holds it) */
    return made;
}

/* The annotator's `_resolve` of a checked, not trylock acquisition of a class the task holds already
 * (held entries `i`..`n` of its irq context): the subclass the kernel's state explains it by, as
 * `StateIndex.subclass_explaining` reads it (asked once per stack and class, `capcache_suffix_ask`), set
 * in `v` (1); 0 none does (the annotator's other readings: nest_lock, revise...: the Python loop's),
 * -1 error. */
static int resolve_subclass(CaptureFilter *self, PyObject **classes, Py_ssize_t i, Py_ssize_t n, PyObject *name,
                            Verdict *v) {
    PyObject *sub = capcache_suffix_ask(&self->cache, self->suffixes, classes, i, n, name, self->index,
                                        s_subclass_explaining);
    if (sub == NULL)
        return -1;
    if (sub == Py_None)
        return 0;
    PyObject *subs = subclasses_of(self, name);
    if (subs == NULL)
        return -1;
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(subs); k++) {
        PyObject *triple = PyTuple_GET_ITEM(subs, k);
        int same = PyObject_RichCompareBool(PyTuple_GET_ITEM(triple, 0), sub, Py_EQ);
        if (same < 0)
            return -1;
        if (same) {
            v->subclass = (int)small_long(sub);
            v->cls = PyTuple_GET_ITEM(triple, 1);
            v->change = PyTuple_GET_ITEM(triple, 2);
            return 1;
        }
    }
    return 0; /* (a subclass the state does not list: the Python loop's) */
}

/* the deepest annotator's held stack `decide` reads (a deeper one: the Python loop's) */
#define DECIDE_DEPTH 64

/* 1 decided (*v set), 0 the Python loop's, -1 error */
static int decide(CaptureFilter *self, PyObject *view, PyObject *task, PyObject *name, PyObject *mode, int trylock,
                  Verdict *v) {
    if (!self->a_capture)
        return 0;
    int trusted = self->a_trusted;
    if (trusted && self->until_report)
        return 0;
    ClassSlot *cs = capcache_class(&self->cache, name);
    if (cs == NULL && PyErr_Occurred())
        return -1;
    PyObject *ruled = capcache_get(cs, CS_RULED, self->ruled_of, name);
    if (ruled == NULL)
        return PyErr_Occurred() ? -1 : 0;
    int check = 1;
    v->origin = NULL;
    int is_ruled = truth(ruled);
    if (is_ruled < 0)
        return -1;
    if (is_ruled) {
        PyObject *origin = capcache_get(cs, CS_ORIGIN, self->only_unchecked, name);
        if (origin == NULL)
            return PyErr_Occurred() ? -1 : 0; /* not known yet: Python works it out */
        if (!PyUnicode_Check(origin) || PyUnicode_GET_LENGTH(origin) == 0)
            return 0;
        v->origin = origin;
        check = 0;
    }
    PyObject *a_held = SLOT(view, self->view_off[V_A_HELD]);
    if (a_held == NULL)
        return 0;
    if (a_held != Py_None && !PyList_CheckExact(a_held))
        return 0;
    PyObject *ctx;
    TaskSlot *ts = self->cur;
    if (ts != NULL && ts->actx_known) {
        ctx = ts->actx;
    } else {
        ctx = PyDict_GetItemWithError(self->actx, task);
        if (ctx == NULL && PyErr_Occurred())
            return -1;
        if (ts != NULL) {
            ts->actx = Py_XNewRef(ctx);
            ts->actx_known = 1;
        }
    }
    if (ctx == NULL)
        ctx = small_ints[0];
    int use_state = self->index != Py_None && trusted;
    /* the annotator's held stack: its entries' classes and contexts, then the pending acquisitions' (all of
     * this view: take_acquire's pend_depth flushed any other's), whose entries are not made yet */
    Py_ssize_t n_listed = a_held == Py_None ? 0 : PyList_GET_SIZE(a_held), n = n_listed + self->npend;
    PyObject *cls_at[DECIDE_DEPTH], *ctx_at[DECIDE_DEPTH];
    if (n > DECIDE_DEPTH)
        return 0;
    /* (lockdep's validate_chain guard, from rules: the annotator resolves only what it validates) */
    int validated = rules_validates(check ? self->validates_checked : self->validates_unchecked, trylock);
    int twice = 0; /* the class is held already (a validated acquisition under the state) */
    if (n && (!use_state || validated)) { /* (a trylock under the state: as fast_stages.decide) */
        for (Py_ssize_t i = 0; i < n; i++) {
            if (i < n_listed) {
                PyObject *entry = PyList_GET_ITEM(a_held, i);
                if (!PyList_CheckExact(entry) || PyList_GET_SIZE(entry) < 5)
                    return 0;
                cls_at[i] = PyList_GET_ITEM(entry, 0);
                ctx_at[i] = PyList_GET_ITEM(entry, 3);
            } else {
                cls_at[i] = self->pend[i - n_listed].o[P_CLS];
                ctx_at[i] = self->pend[i - n_listed].o[P_CTX];
            }
        }
        for (Py_ssize_t i = 0; i < n; i++) {
            int same = eq(cls_at[i], name);
            if (same != 0) {
                if (same < 0 || !use_state)
                    return same < 0 ? -1 : 0;
                /* (a recursive read: the annotator's _resolve may see no class held twice) */
                if (small_long(mode) != 0 && small_long(mode) != 1)
                    return 0;
                twice = 1;
                break;
            }
        }
    }
    if (use_state) {
        if (validated) {
            Py_ssize_t i = n;
            while (i) {
                int same = eq(ctx_at[i - 1], ctx);
                if (same < 0)
                    return -1;
                if (!same)
                    break;
                i--;
            }
            if (self->suffixes == Py_None)
                return 0;
            if (!PyAnySet_Check(self->suffixes))
                return 0;
            if (twice) {
                int resolved = resolve_subclass(self, cls_at, i, n, name, v);
                if (resolved <= 0)
                    return resolved;
                goto decided;
            }
            int known = capcache_suffix_known(&self->cache, self->suffixes, cls_at, i, n, name);
            if (known <= 0)
                return known;
        }
    } else {
        if (self->index != Py_None) {
            int untrusted = PySequence_Contains(self->untrusted_from, self->file);
            if (untrusted <= 0)
                return untrusted;
        }
        int read = truth(mode);
        if (read != 0)
            return read < 0 ? -1 : 0; /* a read mode: Python's (the annotator's doubts) */
    }
    v->subclass = 0;
    v->cls = v->change = NULL;
decided:
    v->check = check;
    v->use_state = use_state;
    v->ctx = ctx;
    return 1;
}

/* the annotator's `_acquire` for a verdict of `decide` (fast_stages._Annotated.acquire), all but its held
 * entry, `[name, name, instance, ctx, mode]` appended to `*a_held_out` (borrowed) by `pend_flush` */
static int annotate_acquire(CaptureFilter *self, PyObject *view, PyObject *task, PyObject *name,
                            int trylock, PyObject *cpu, const Verdict *v, PyObject **a_held_out) {
    if (cpu != Py_None) {
        TaskSlot *ts = self->cur;
        if (ts == NULL || ts->cpu != cpu) { /* (cpu[task] = cpu: nothing to do when it is that already) */
            if (PyDict_SetItem(self->acpu, task, cpu) < 0)
                return -1;
            if (ts != NULL)
                Py_XSETREF(ts->cpu, Py_NewRef(cpu));
        }
    }
    /* (the annotator's counts of acquisitions by file and by source: kept here, added at `suspend`) */
    self->tries_delta[0]++;
    if (trylock)
        self->tries_delta[1]++;
    int source = S_RULE;
    if (v->origin != NULL) {
        PyObject *counted = PyDict_GetItemWithError(self->unchecked, name);
        if (counted == NULL) {
            if (PyErr_Occurred())
                return -1;
            counted = Py_BuildValue("[Oi]", v->origin, 1);
            int r = counted == NULL ? -1 : PyDict_SetItem(self->unchecked, name, counted);
            Py_XDECREF(counted);
            if (r < 0)
                return -1;
        } else if (list_add(counted, 1, 1) < 0) {
            return -1;
        }
    } else {
        source = v->use_state ? S_STATE : S_NONE;
    }
    if (v->subclass) {
        /* the annotator's changes[("subclass", CLASS, "N")] and sources[STATE_CHANGED], then its source's;
         * a key new to `changes` after the deferred ones (flush_annotator): the Counter's order kept */
        int had = PyDict_Contains(self->changes, v->change);
        if (had < 0 || (!had && flush_annotator(self) < 0) || count_add(self->changes, v->change, 1) < 0)
            return -1;
        if (self->sources_delta[S_CHANGED]++ == 0)
            self->sources_order[self->sources_seen++] = S_CHANGED;
    }
    if (self->sources_delta[source]++ == 0)
        self->sources_order[self->sources_seen++] = source;
    PyObject *a_held = SLOT(view, self->view_off[V_A_HELD]);
    if (a_held == Py_None) {
        a_held = PyList_New(0);
        if (a_held == NULL)
            return -1;
        slot_set(view, self->view_off[V_A_HELD], a_held);
        int r = PyDict_SetItem(self->held_of, task, a_held);
        Py_DECREF(a_held);
        if (r < 0)
            return -1;
    }
    *a_held_out = a_held;
    return 0;
}

#endif
