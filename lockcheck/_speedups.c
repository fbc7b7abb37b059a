/*
 * lockcheck._speedups: the compiled part of the `.lt` fast path (lockcheck/hotpath.py).
 *
 * `LineFilter(lines, views, tails, chain_cache, initial_key, depth_limit, tick)` is an iterator
 * over `lines` that applies, itself, the lines hotpath.lt_events would apply on its fast path
 * in the common shapes -- a plain release of the innermost lock, an acquisition whose chain is
 * cached, a contended/acquired line -- and yields `(lineno, line)` for every other line, which
 * the Python loop then handles exactly as it handles every line without this filter.  The
 * filter never decides anything the Python code would decide differently: whatever it is not
 * sure of (a task or a text it has not seen, a non-ASCII line, a nest lock, a HeldLock on top,
 * a cache miss) it passes on.  It shares the Python loop's dictionaries: `views` (task key ->
 * the view tuple built by the Python side) and `tails` (text after the task -> what
 * hotpath._scan_tail read), so it only ever looks things up.
 *
 * The layouts of a view, an info and a stack entry are hotpath.py's; tests/test_hotpath.py
 * holds the filtered and the pure-Python runs to identical results.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <string.h>

/* hotpath.py: a stack entry */
enum { E_RELEASE, E_CLS, E_LOCK, E_INSTANCE, E_PREV_KEY, E_IRQ_CONTEXT, E_READ, E_TRYLOCK, E_HARDIRQS_OFF,
       E_NEST, E_SUBCLASS, E_REFERENCES, E_LINE, E_LINENO, E_SIZE };
/* hotpath.py: a view (TaskState, held, irq_context, hardirqs_off, usage needs, acquired_ever) */
enum { V_TASK, V_HELD, V_IRQ_CONTEXT, V_HARDIRQS_OFF, V_NEEDS, V_ACQUIRED_EVER };
/* hotpath.py: an info (kind, seen, cpu, release, ...) and the acquisition's further fields */
enum { I_KIND, I_SEEN, I_CPU, I_RELEASE, I_CLS, I_LOCK, I_INSTANCE, I_READ, I_TRYLOCK, I_SUBCLASS, I_NEST,
       I_NODE };
/* hotpath.py: info kinds and option bits */
enum { K_ACQUIRE = 1, K_RELEASE = 2, K_STATS = 3 };
enum { B_AT = 1, B_TS = 2, B_CPU = 4 };

static PyObject *s_chain_key, *s_cpu, *s_usage, *s_add, *s_lock, *s_instance, *s_references, *s_prev_chain_key,
    *s_cls, *s_irq_context;

typedef struct {
    PyObject_HEAD
    PyObject *lines;       /* the iterator of lines */
    PyObject *views;       /* dict */
    PyObject *tails;       /* dict */
    PyObject *cache;       /* set: the checker's chain cache */
    PyObject *initial;     /* INITIAL_CHAIN_KEY */
    Py_ssize_t depth_limit;
    long tick;             /* a mask: pass every line whose number has none of its bits; -1: never */
    long long lineno;
    long long events;
    long long hits;
    int passthrough;       /* apply nothing any more (`--first` stopped the checker) */
} LineFilter;

static void LineFilter_dealloc(LineFilter *self) {
    PyObject_GC_UnTrack(self);
    Py_XDECREF(self->lines);
    Py_XDECREF(self->views);
    Py_XDECREF(self->tails);
    Py_XDECREF(self->cache);
    Py_XDECREF(self->initial);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int LineFilter_traverse(LineFilter *self, visitproc visit, void *arg) {
    Py_VISIT(self->lines);
    Py_VISIT(self->views);
    Py_VISIT(self->tails);
    Py_VISIT(self->cache);
    Py_VISIT(self->initial);
    return 0;
}

static int LineFilter_init(LineFilter *self, PyObject *args, PyObject *kwds) {
    PyObject *lines, *views, *tails, *cache, *initial;
    Py_ssize_t depth_limit;
    long tick;
    if (!PyArg_ParseTuple(args, "OO!O!O!Onl", &lines, &PyDict_Type, &views, &PyDict_Type, &tails, &PySet_Type,
                          &cache, &initial, &depth_limit, &tick))
        return -1;
    PyObject *it = PyObject_GetIter(lines);
    if (it == NULL)
        return -1;
    Py_XSETREF(self->lines, it);
    Py_INCREF(views);
    Py_XSETREF(self->views, views);
    Py_INCREF(tails);
    Py_XSETREF(self->tails, tails);
    Py_INCREF(cache);
    Py_XSETREF(self->cache, cache);
    Py_INCREF(initial);
    Py_XSETREF(self->initial, initial);
    self->depth_limit = depth_limit;
    self->tick = tick;
    self->lineno = 0;
    self->events = self->hits = 0;
    self->passthrough = 0;
    return 0;
}

/* Whether the ASCII str `s` is exactly the `n` bytes at `p`. */
static inline int str_is(PyObject *s, const char *p, Py_ssize_t n) {
    return PyUnicode_Check(s) && PyUnicode_IS_COMPACT_ASCII(s) && PyUnicode_GET_LENGTH(s) == n &&
           memcmp(PyUnicode_1BYTE_DATA(s), p, (size_t)n) == 0;
}

/* lt._seconds: a finite number of seconds float() reads, without `_`, at most 64 characters. */
static int valid_seconds(const char *p, Py_ssize_t n) {
    if (n > 64 || memchr(p, '_', (size_t)n) != NULL)
        return 0;
    PyObject *text = PyUnicode_FromStringAndSize(p, n);
    if (text == NULL)
        return -1;
    PyObject *value = PyFloat_FromString(text);
    Py_DECREF(text);
    if (value == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_ValueError))
            return -1;
        PyErr_Clear();
        return 0;
    }
    double seconds = PyFloat_AS_DOUBLE(value);
    Py_DECREF(value);
    return isfinite(seconds) ? 1 : 0;
}

/* hotpath._stamp: the text after ` ts=`, `T` or `T cpu=N`, on a line whose rest read `seen`.
 * 1 and *cpu (-1: none given) when fast, 0 when not, -1 on error. */
static int read_stamp(const char *p, Py_ssize_t n, long seen, int takes_cpu, long *cpu) {
    if (seen & (B_TS | B_CPU))
        return 0;
    const char *blank = memchr(p, ' ', (size_t)n);
    Py_ssize_t ts_len = blank ? blank - p : n;
    int ok = valid_seconds(p, ts_len);
    if (ok <= 0)
        return ok;
    *cpu = -1;
    if (blank == NULL)
        return 1;
    const char *word = blank + 1;
    Py_ssize_t rest = n - ts_len - 1;
    if (!takes_cpu || rest < 5 || memcmp(word, "cpu=", 4) != 0 || rest - 4 > 9)
        return 0;
    long value = 0;
    for (Py_ssize_t i = 4; i < rest; i++) {
        if (word[i] < '0' || word[i] > '9')
            return 0;
        value = value * 10 + (word[i] - '0');
    }
    *cpu = value;
    return 1;
}

static int set_cpu(PyObject *task, long cpu) {
    if (cpu < 0)
        return 0;
    PyObject *value = PyLong_FromLong(cpu);
    if (value == NULL)
        return -1;
    int r = PyObject_SetAttr(task, s_cpu, value);
    Py_DECREF(value);
    return r;
}

/* Pop the top entry of `held` (a tuple) and restore the task's chain key. */
static int pop_entry(PyObject *task, PyObject *held, PyObject *top) {
    if (PyObject_SetAttr(task, s_chain_key, PyTuple_GET_ITEM(top, E_PREV_KEY)) < 0)
        return -1;
    return PyList_SetSlice(held, PyList_GET_SIZE(held) - 1, PyList_GET_SIZE(held), NULL);
}

/* `top` with REFERENCES replaced by `references`, in place of the top entry. */
static int replace_references(PyObject *held, PyObject *top, long references) {
    PyObject *entry = PyTuple_New(E_SIZE);
    if (entry == NULL)
        return -1;
    for (Py_ssize_t i = 0; i < E_SIZE; i++) {
        PyObject *item = i == E_REFERENCES ? PyLong_FromLong(references) : PyTuple_GET_ITEM(top, i);
        if (item == NULL) {
            Py_DECREF(entry);
            return -1;
        }
        if (i != E_REFERENCES)
            Py_INCREF(item);
        PyTuple_SET_ITEM(entry, i, item);
    }
    return PyList_SetItem(held, PyList_GET_SIZE(held) - 1, entry);
}

/* A capture's task remembers the locks it took (TaskState.acquired_ever). */
static int remember(PyObject *view, PyObject *info) {
    PyObject *acquired_ever = PyTuple_GET_ITEM(view, V_ACQUIRED_EVER);
    if (acquired_ever == Py_None)
        return 0;
    PyObject *pair = PyTuple_Pack(2, PyTuple_GET_ITEM(info, I_LOCK), PyTuple_GET_ITEM(info, I_INSTANCE));
    PyObject *done = pair ? PyObject_CallMethodObjArgs(acquired_ever, s_add, pair, NULL) : NULL;
    Py_XDECREF(pair);
    if (done == NULL)
        return -1;
    Py_DECREF(done);
    return 0;
}

/* The truth of an int attribute (`references`): 1, 0, or -1 on error. */
static int attr_true(PyObject *obj, PyObject *name) {
    PyObject *value = PyObject_GetAttr(obj, name);
    if (value == NULL)
        return -1;
    int r = PyObject_IsTrue(value);
    Py_DECREF(value);
    return r;
}

/* Checker.feed's innermost release of a HeldLock `top` of `lock`/`instance`: 1 popped, 0 not it. */
static int held_lock_released(PyObject *task, PyObject *held, PyObject *top, PyObject *lock, PyObject *instance) {
    PyObject *value = PyObject_GetAttr(top, s_lock);
    if (value == NULL)
        return -1;
    int same = PyObject_RichCompareBool(value, lock, Py_EQ);
    Py_DECREF(value);
    if (same <= 0)
        return same;
    value = PyObject_GetAttr(top, s_instance);
    if (value == NULL)
        return -1;
    same = PyObject_RichCompareBool(value, instance, Py_EQ);
    Py_DECREF(value);
    if (same <= 0)
        return same;
    int referenced = attr_true(top, s_references);
    if (referenced != 0)
        return referenced < 0 ? -1 : 0;
    value = PyObject_GetAttr(top, s_prev_chain_key);
    if (value == NULL)
        return -1;
    int r = PyObject_SetAttr(task, s_chain_key, value);
    Py_DECREF(value);
    if (r < 0)
        return -1;
    return PyList_SetSlice(held, PyList_GET_SIZE(held) - 1, PyList_GET_SIZE(held), NULL) < 0 ? -1 : 1;
}

/* One more reference on the top entry (a nest_lock merge): `(references or 1) + 1`. */
static int merge_reference(PyObject *held, PyObject *top) {
    if (PyTuple_CheckExact(top)) {
        long references = PyLong_AsLong(PyTuple_GET_ITEM(top, E_REFERENCES));
        Py_INCREF(top);
        int r = replace_references(held, top, (references ? references : 1) + 1);
        Py_DECREF(top);
        return r;
    }
    PyObject *value = PyObject_GetAttr(top, s_references);
    if (value == NULL)
        return -1;
    long references = PyLong_AsLong(value);
    Py_DECREF(value);
    value = PyLong_FromLong((references ? references : 1) + 1);
    if (value == NULL)
        return -1;
    int r = PyObject_SetAttr(top, s_references, value);
    Py_DECREF(value);
    return r;
}

/* Checker.lock_is_held over tuple entries: 1 held, 0 not (or a HeldLock to ask), -1 error. */
static int holds_lock(PyObject *held, PyObject *lock, PyObject *instance) {
    Py_ssize_t n = PyList_GET_SIZE(held);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *entry = PyList_GET_ITEM(held, i);
        if (!PyTuple_CheckExact(entry))
            return 0;
        int same = PyObject_RichCompareBool(PyTuple_GET_ITEM(entry, E_LOCK), lock, Py_EQ);
        if (same < 0)
            return -1;
        if (!same)
            continue;
        same = PyObject_RichCompareBool(PyTuple_GET_ITEM(entry, E_INSTANCE), instance, Py_EQ);
        if (same < 0)
            return -1;
        if (same || (PyLong_AsLong(PyTuple_GET_ITEM(entry, E_REFERENCES)) &&
                     PyLong_AsLong(PyTuple_GET_ITEM(entry, E_SUBCLASS)) == 0))
            return 1;
    }
    return 0;
}

/* Apply one line if it is one the filter takes: 1 applied, 0 passed on, -1 error.
 * `data`/`n`: the ASCII line without its line ending. */
static int apply_line(LineFilter *self, PyObject *line, const char *data, Py_ssize_t n);

/* The line as the Python loop keeps it: without its line ending (a new str only if it had one). */
static int apply_stripped(LineFilter *self, PyObject *line, const char *data, Py_ssize_t n) {
    if (n == PyUnicode_GET_LENGTH(line))
        return apply_line(self, line, data, n);
    PyObject *stripped = PyUnicode_FromStringAndSize(data, n);
    if (stripped == NULL)
        return -1;
    int r = apply_line(self, stripped, data, n);
    Py_DECREF(stripped);
    return r;
}

static int apply_line(LineFilter *self, PyObject *line, const char *data, Py_ssize_t n) {
    const char *space = memchr(data, ' ', (size_t)n);
    if (space == NULL || space == data)
        return 0;
    PyObject *task_key = PyUnicode_FromStringAndSize(data, space - data);
    if (task_key == NULL)
        return -1;
    PyObject *view = PyDict_GetItemWithError(self->views, task_key); /* borrowed */
    Py_DECREF(task_key);
    if (view == NULL)
        return PyErr_Occurred() ? -1 : 0;
    if (view == Py_None)
        return 1; /* another part's task (lockcheck.jobs): its line is not this checker's */
    PyObject *task = PyTuple_GET_ITEM(view, V_TASK);
    PyObject *held = PyTuple_GET_ITEM(view, V_HELD);
    const char *tail = space + 1;
    Py_ssize_t tail_len = n - (tail - data);
    /* time stamps make lines unique: the rest is what is looked up */
    Py_ssize_t rest_len = tail_len;
    const char *stamp = NULL;
    for (Py_ssize_t i = 0; i + 4 <= tail_len; i++) {
        if (tail[i] == ' ' && memcmp(tail + i, " ts=", 4) == 0) {
            rest_len = i;
            stamp = tail + i + 4;
            break;
        }
    }
    Py_ssize_t depth = PyList_GET_SIZE(held);
    PyObject *top = depth ? PyList_GET_ITEM(held, depth - 1) : NULL;
    long cpu = -1;
    if (top != NULL && PyTuple_CheckExact(top) && str_is(PyTuple_GET_ITEM(top, E_RELEASE), tail, rest_len)) {
        PyObject *references = PyTuple_GET_ITEM(top, E_REFERENCES);
        if (PyLong_Check(references) && PyLong_AsLong(references) == 0) {
            /* the plain release of the innermost lock, recognised by its text */
            if (stamp != NULL) {
                int ok = read_stamp(stamp, tail_len - rest_len - 4, 0, 1, &cpu);
                if (ok <= 0)
                    return ok;
            }
            if (pop_entry(task, held, top) < 0 || set_cpu(task, cpu) < 0)
                return -1;
            self->events++;
            return 1;
        }
    }
    PyObject *rest = PyUnicode_FromStringAndSize(tail, rest_len);
    if (rest == NULL)
        return -1;
    PyObject *info = PyDict_GetItemWithError(self->tails, rest); /* borrowed */
    Py_DECREF(rest);
    if (info == NULL)
        return PyErr_Occurred() ? -1 : 0;
    long kind = PyLong_AsLong(PyTuple_GET_ITEM(info, I_KIND));
    long seen = PyLong_AsLong(PyTuple_GET_ITEM(info, I_SEEN));
    if (stamp != NULL) {
        int ok = read_stamp(stamp, tail_len - rest_len - 4, seen, 1, &cpu); /* every fast op takes cpu= */
        if (ok <= 0)
            return ok;
    } else {
        PyObject *given = PyTuple_GET_ITEM(info, I_CPU);
        if (given != Py_None)
            cpu = PyLong_AsLong(given);
    }
    if (kind == K_STATS) {
        if (set_cpu(task, cpu) < 0)
            return -1;
        self->events++;
        return 1;
    }
    if (kind == K_RELEASE) {
        if (top == NULL)
            return 0;
        if (!PyTuple_CheckExact(top)) {
            /* a HeldLock the full checker left on top: its innermost release, as Checker.feed's */
            int r = held_lock_released(task, held, top, PyTuple_GET_ITEM(info, 4), PyTuple_GET_ITEM(info, 5));
            if (r <= 0)
                return r;
            if (set_cpu(task, cpu) < 0)
                return -1;
            self->events++;
            return 1;
        }
        long references = PyLong_AsLong(PyTuple_GET_ITEM(top, E_REFERENCES));
        if (references == 0) {
            int same = PyUnicode_Compare(PyTuple_GET_ITEM(top, E_RELEASE), PyTuple_GET_ITEM(info, I_RELEASE));
            if (same != 0)
                return PyErr_Occurred() ? -1 : 0;
            if (pop_entry(task, held, top) < 0)
                return -1;
        } else {
            /* a release's info is (kind, seen, cpu, release, lock, instance) */
            int lock = PyObject_RichCompareBool(PyTuple_GET_ITEM(top, E_LOCK), PyTuple_GET_ITEM(info, 4), Py_EQ);
            if (lock <= 0)
                return lock;
            int instance = PyObject_RichCompareBool(PyTuple_GET_ITEM(top, E_INSTANCE), PyTuple_GET_ITEM(info, 5), Py_EQ);
            if (instance < 0)
                return -1;
            if (!instance && PyLong_AsLong(PyTuple_GET_ITEM(top, E_SUBCLASS)) != 0)
                return 0;
            Py_INCREF(top);
            int r = references > 1 ? replace_references(held, top, references - 1) : pop_entry(task, held, top);
            Py_DECREF(top);
            if (r < 0)
                return -1;
        }
        if (set_cpu(task, cpu) < 0)
            return -1;
        self->events++;
        return 1;
    }
    /* an acquisition: Checker.feed + lock_acquire, for a chain-cache hit */
    if (depth >= self->depth_limit)
        return 0;
    PyObject *cls = PyTuple_GET_ITEM(info, I_CLS);
    PyObject *nest = PyTuple_GET_ITEM(info, I_NEST);
    PyObject *irq_context = PyTuple_GET_ITEM(view, V_IRQ_CONTEXT);
    int head = 0;
    if (top != NULL) {
        long top_context;
        int same_class;
        if (PyTuple_CheckExact(top)) {
            top_context = PyLong_AsLong(PyTuple_GET_ITEM(top, E_IRQ_CONTEXT));
            same_class = nest != Py_None ? PyObject_RichCompareBool(PyTuple_GET_ITEM(top, E_CLS), cls, Py_EQ) : 0;
        } else {
            PyObject *value = PyObject_GetAttr(top, s_irq_context);
            if (value == NULL)
                return -1;
            top_context = PyLong_AsLong(value);
            Py_DECREF(value);
            same_class = 0;
            if (nest != Py_None) {
                value = PyObject_GetAttr(top, s_cls);
                if (value == NULL)
                    return -1;
                same_class = PyObject_RichCompareBool(value, cls, Py_EQ);
                Py_DECREF(value);
            }
        }
        if (same_class < 0)
            return -1;
        if (same_class) {
            /* nest_lock merge: one more reference on the top entry */
            if (merge_reference(held, top) < 0 || set_cpu(task, cpu) < 0 || remember(view, info) < 0)
                return -1;
            self->events++;
            return 1;
        }
        head = top_context != PyLong_AsLong(irq_context);
    }
    if (nest != Py_None) {
        int holds = holds_lock(held, PyTuple_GET_ITEM(nest, 0), PyTuple_GET_ITEM(nest, 1));
        if (holds <= 0)
            return holds; /* not held (a report), or a HeldLock to ask: the Python side */
    }
    PyObject *read = PyTuple_GET_ITEM(info, I_READ);
    int trylock = PyTuple_GET_ITEM(info, I_TRYLOCK) == Py_True;
    long read_mode = PyLong_AsLong(read);
    PyObject *needs = PyTuple_GET_ITEM(view, V_NEEDS);
    long need = PyLong_AsLong(PyList_GET_ITEM(needs, (read_mode ? 1 : 0) | (trylock ? 2 : 0)));
    PyObject *usage = PyDict_GetItemWithError(PyTuple_GET_ITEM(info, I_NODE), s_usage);
    if (usage == NULL)
        return PyErr_Occurred() ? -1 : 0;
    if (need & ~PyLong_AsLong(usage))
        return 0; /* a new usage bit: mark_usage, in the full checker */
    PyObject *prev_key = PyObject_GetAttr(task, s_chain_key);
    if (prev_key == NULL)
        return -1;
    PyObject *key_parts = PyTuple_Pack(3, head ? self->initial : prev_key, cls, read);
    if (key_parts == NULL) {
        Py_DECREF(prev_key);
        return -1;
    }
    Py_hash_t hash = PyObject_Hash(key_parts);
    Py_DECREF(key_parts);
    if (hash == -1) {
        Py_DECREF(prev_key);
        return -1;
    }
    PyObject *chain_key = PyLong_FromSsize_t(hash);
    if (chain_key == NULL) {
        Py_DECREF(prev_key);
        return -1;
    }
    if (!trylock) {
        int cached = PySet_Contains(self->cache, chain_key);
        if (cached <= 0) {
            Py_DECREF(prev_key);
            Py_DECREF(chain_key);
            return cached; /* a miss: validate_chain, in the full checker */
        }
    }
    PyObject *lineno = PyLong_FromLongLong(self->lineno);
    PyObject *entry = lineno ? PyTuple_New(E_SIZE) : NULL;
    if (entry == NULL) {
        Py_XDECREF(lineno);
        Py_DECREF(prev_key);
        Py_DECREF(chain_key);
        return -1;
    }
    PyObject *items[E_SIZE] = {
        PyTuple_GET_ITEM(info, I_RELEASE), cls, PyTuple_GET_ITEM(info, I_LOCK), PyTuple_GET_ITEM(info, I_INSTANCE),
        prev_key, irq_context, read, trylock ? Py_True : Py_False, PyTuple_GET_ITEM(view, V_HARDIRQS_OFF),
        nest, PyTuple_GET_ITEM(info, I_SUBCLASS), NULL, line, lineno,
    };
    static PyObject *zero = NULL;
    if (zero == NULL)
        zero = PyLong_FromLong(0);
    items[E_REFERENCES] = zero;
    for (Py_ssize_t i = 0; i < E_SIZE; i++) {
        if (i != E_PREV_KEY && i != E_LINENO)
            Py_INCREF(items[i]);
        PyTuple_SET_ITEM(entry, i, items[i]); /* prev_key and lineno: their references move */
    }
    int r = PyList_Append(held, entry);
    Py_DECREF(entry);
    if (r == 0)
        r = PyObject_SetAttr(task, s_chain_key, chain_key);
    Py_DECREF(chain_key);
    if (r < 0 || set_cpu(task, cpu) < 0 || remember(view, info) < 0)
        return -1;
    if (!trylock)
        self->hits++;
    self->events++;
    return 1;
}

static PyObject *LineFilter_next(LineFilter *self) {
    for (;;) {
        PyObject *line = PyIter_Next(self->lines);
        if (line == NULL)
            return NULL; /* the end, or an error already set */
        self->lineno++;
        if (!self->passthrough && PyUnicode_Check(line) && PyUnicode_IS_COMPACT_ASCII(line) &&
            (self->tick < 0 || (self->lineno & self->tick) != 0)) {
            const char *data = (const char *)PyUnicode_1BYTE_DATA(line);
            Py_ssize_t n = PyUnicode_GET_LENGTH(line);
            while (n && (data[n - 1] == '\n' || data[n - 1] == '\r'))
                n--;
            if (n == 0) {
                Py_DECREF(line);
                continue; /* a blank line */
            }
            if (data[0] != '#' && memchr(data, '"', (size_t)n) == NULL && memchr(data, '\t', (size_t)n) == NULL) {
                int applied = apply_stripped(self, line, data, n);
                if (applied < 0) {
                    Py_DECREF(line);
                    return NULL;
                }
                if (applied) {
                    Py_DECREF(line);
                    continue;
                }
            }
        }
        PyObject *lineno = PyLong_FromLongLong(self->lineno);
        if (lineno == NULL) {
            Py_DECREF(line);
            return NULL;
        }
        PyObject *pair = PyTuple_Pack(2, lineno, line);
        Py_DECREF(lineno);
        Py_DECREF(line);
        return pair;
    }
}

static PyObject *LineFilter_take(LineFilter *self, PyObject *Py_UNUSED(ignored)) {
    PyObject *counts = Py_BuildValue("(LL)", self->events, self->hits);
    self->events = self->hits = 0;
    return counts;
}

static PyObject *LineFilter_stop(LineFilter *self, PyObject *Py_UNUSED(ignored)) {
    self->passthrough = 1;
    Py_RETURN_NONE;
}

static PyMethodDef LineFilter_methods[] = {
    {"take", (PyCFunction)LineFilter_take, METH_NOARGS,
     "(events, chain-cache hits) applied since the last call, and reset."},
    {"stop", (PyCFunction)LineFilter_stop, METH_NOARGS, "From now on pass every line on."},
    {NULL}};

static PyTypeObject LineFilterType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "lockcheck._speedups.LineFilter",
    .tp_basicsize = sizeof(LineFilter),
    .tp_dealloc = (destructor)LineFilter_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "The `.lt` lines the fast path applies in C; yields (lineno, line) for the others.",
    .tp_traverse = (traverseproc)LineFilter_traverse,
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = (iternextfunc)LineFilter_next,
    .tp_methods = LineFilter_methods,
    .tp_init = (initproc)LineFilter_init,
    .tp_new = PyType_GenericNew,
};

static struct PyModuleDef speedups_module = {
    PyModuleDef_HEAD_INIT, "lockcheck._speedups",
    "The compiled core of lockcheck's fast path (optional: lockcheck.hotpath runs without it).", -1, NULL};

PyMODINIT_FUNC PyInit__speedups(void) {
    s_chain_key = PyUnicode_InternFromString("chain_key");
    s_cpu = PyUnicode_InternFromString("cpu");
    s_usage = PyUnicode_InternFromString("usage");
    s_add = PyUnicode_InternFromString("add");
    s_lock = PyUnicode_InternFromString("lock");
    s_instance = PyUnicode_InternFromString("instance");
    s_references = PyUnicode_InternFromString("references");
    s_prev_chain_key = PyUnicode_InternFromString("prev_chain_key");
    s_cls = PyUnicode_InternFromString("cls");
    s_irq_context = PyUnicode_InternFromString("irq_context");
    if (!s_chain_key || !s_cpu || !s_usage || !s_add || !s_lock || !s_instance || !s_references ||
        !s_prev_chain_key || !s_cls || !s_irq_context)
        return NULL;
    if (PyType_Ready(&LineFilterType) < 0)
        return NULL;
    PyObject *module = PyModule_Create(&speedups_module);
    if (module == NULL)
        return NULL;
    Py_INCREF(&LineFilterType);
    if (PyModule_AddObject(module, "LineFilter", (PyObject *)&LineFilterType) < 0) {
        Py_DECREF(&LineFilterType);
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
