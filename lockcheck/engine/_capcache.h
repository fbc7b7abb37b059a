/*
 * The capture filter's own memo tables (lockcheck/engine/_capturecore.c), kept in C so that a
 * common line costs no Python dict probe it can do without:
 *
 *   - line pieces: a piece's bytes -> what the Python loop's cache (`heads`, `flag_cache`, `bodies`)
 *     holds for them (or, for a body, what the filter made of it from its shape as the loop would).  Those values are a function of the piece's text alone (fast_capture reads
 *     each piece apart from the line), so a value once found stays right for those bytes even when
 *     the Python loop clears its dict: the filter then takes the line the Python loop would have
 *     read the same way (its caches filled again, with an equal value, and nothing else).
 *   - pairs: one tuple `(a, b)` per pair of strs seen lately, so that the reader's `held` keys
 *     `(task, instance)` and a task's recent `(lock, instance)` are the same object from the
 *     acquisition to its release: a dict probe with the key it stored meets it by identity
 *     instead of comparing two new tuples item by item.  Equal strs give the same tuple (a tuple
 *     of other strs equal to them, which no dict or set tells apart).
 *   - tasks: what the filter read or wrote last of a task in the dicts it shares with the Python
 *     loop (`views[task]`, the reader's `context[task]` and `comms[task]`, the annotator's
 *     `cpu[task]`), valid until Python code runs that may change them: the filter forgets them all
 *     (`capcache_forget`) whenever it resumes after handing the Python loop a line, and when it
 *     calls Python code that may change a task's state (fast_stages.context_hit) or clears the views.
 *     The annotator's `ctx[task]` likewise.
 *   - classes: what the filter read of a lock class in the checker's and the annotator's dicts
 *     (`_nodes[name]`, its `usage`, the annotator's `_ruled[name]` and `only_unchecked[name]`),
 *     which only Python code changes: forgotten with the tasks.
 *   - chain suffixes: whether the annotator's `suffixes` (the kernel's chains' suffixes, a set built
 *     once when the state is read) holds a tuple of classes, by the very objects of the tuple (the
 *     memo keeps the tuple, so no other object can come to stand at its items' addresses); asked
 *     again when the set's size changed.
 *
 * All are bounded direct-mapped tables: a slot taken by another key is overwritten.
 */
#ifndef LOCKCHECK_CAPCACHE_H
#define LOCKCHECK_CAPCACHE_H

#include <Python.h>
#include "_cshared.h"

/* slots per piece table (a power of two) and the tables: heads, flags, bodies */
#define PIECE_BITS 14
#define PIECE_SLOTS (1 << PIECE_BITS)
enum { PC_HEAD, PC_FLAGS, PC_BODY, PC_N };
/* slots of the pair table and of the task table (powers of two) */
#define PAIR_SLOTS 8192
#define TASK_SLOTS 1024
#define CLASS_SLOTS 1024
#define SUFFIX_SLOTS 4096

typedef struct {
    PyObject *suffix;     /* the tuple asked about, or NULL */
    Py_ssize_t set_size;  /* the set's size then */
    int known;            /* its answer (a question of `capcache_suffix_known`), or */
    PyObject *answer;     /* what `ask` answered (`capcache_suffix_ask`), or NULL: a `known` slot */
} SuffixSlot;

/* what a class slot remembers: dict.get(...) results, each once its bit in `known` is set */
enum { CS_NODE, CS_USAGE, CS_RULED, CS_ORIGIN, CS_N };

typedef struct {
    unsigned long gen;
    PyObject *name;
    PyObject *got[CS_N]; /* (NULL: absent) */
    unsigned known;
} ClassSlot;

typedef struct {
    unsigned long gen;   /* valid while the cache's `gen` is this */
    PyObject *task;      /* the task (str) */
    PyObject *view;      /* views[task], or NULL: not read yet */
    PyObject *context;   /* the reader's context.get(task) (NULL: absent) once `context_known` */
    int context_known;
    PyObject *display;   /* what comms[task] is (the filter set it), or NULL: not known */
    PyObject *cpu;       /* what the annotator's cpu[task] is (the filter set it), or NULL: not known */
    PyObject *actx;      /* the annotator's ctx.get(task) (NULL: absent) once `actx_known` */
    int actx_known;
    PyObject *recent;    /* the task's recent locks (RecentLocks) the filter last added `recent_pair` to, */
    PyObject *recent_pair; /* which is then their newest: added again, nothing changes; or NULL */
} TaskSlot;

/* A line's head and flags pieces together (the bytes from the line's start to the flags' end, and where
 * the split put the two in them): what the head and flags slots gave for them, or head NULL: empty.  (One
 * hash and one compare a line, not two of each.) */
#define HF_SLOTS 4096
#define HF_MAX 80
typedef struct {
    PyObject *head, *fl;
    Py_ssize_t n, end, from;
    char bytes[HF_MAX];
} HFSlot;

typedef struct {
    PyObject *key;   /* str of the piece's bytes, or NULL */
    PyObject *value; /* what the dict held for it, or NULL: not found yet */
} PieceSlot;

typedef struct {
    PieceSlot *pieces;  /* PC_N * PIECE_SLOTS */
    HFSlot *hf;         /* HF_SLOTS */
    PyObject **pairs;   /* PAIR_SLOTS tuples, or NULL */
    Py_hash_t *pair_hashes; /* and their hashes (a tuple keeps none: ~80 instructions each dict probe) */
    TaskSlot *tasks;    /* TASK_SLOTS */
    ClassSlot *classes; /* CLASS_SLOTS */
    SuffixSlot *suffixes; /* SUFFIX_SLOTS */
    unsigned long gen;  /* the task slots' generation (0: none valid) */
} CapCache;

static int capcache_init(CapCache *c) {
    if (c->pieces == NULL && (c->pieces = PyMem_Calloc(PC_N * PIECE_SLOTS, sizeof(PieceSlot))) == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    if (c->hf == NULL && (c->hf = PyMem_Calloc(HF_SLOTS, sizeof(HFSlot))) == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    if (c->pairs == NULL && (c->pairs = PyMem_Calloc(PAIR_SLOTS, sizeof(PyObject *))) == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    if (c->pair_hashes == NULL && (c->pair_hashes = PyMem_Calloc(PAIR_SLOTS, sizeof(Py_hash_t))) == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    if (c->tasks == NULL && (c->tasks = PyMem_Calloc(TASK_SLOTS, sizeof(TaskSlot))) == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    if (c->classes == NULL && (c->classes = PyMem_Calloc(CLASS_SLOTS, sizeof(ClassSlot))) == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    if (c->suffixes == NULL && (c->suffixes = PyMem_Calloc(SUFFIX_SLOTS, sizeof(SuffixSlot))) == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    c->gen = 1;
    return 0;
}

static void capcache_clear(CapCache *c) {
    if (c->pieces != NULL) {
        for (Py_ssize_t i = 0; i < PC_N * PIECE_SLOTS; i++) {
            Py_CLEAR(c->pieces[i].key);
            Py_CLEAR(c->pieces[i].value);
        }
        PyMem_Free(c->pieces);
        c->pieces = NULL;
    }
    if (c->hf != NULL) {
        for (Py_ssize_t i = 0; i < HF_SLOTS; i++) {
            Py_CLEAR(c->hf[i].head);
            Py_CLEAR(c->hf[i].fl);
        }
        PyMem_Free(c->hf);
        c->hf = NULL;
    }
    if (c->pairs != NULL) {
        for (Py_ssize_t i = 0; i < PAIR_SLOTS; i++)
            Py_CLEAR(c->pairs[i]);
        PyMem_Free(c->pairs);
        c->pairs = NULL;
    }
    PyMem_Free(c->pair_hashes);
    c->pair_hashes = NULL;
    if (c->tasks != NULL) {
        for (Py_ssize_t i = 0; i < TASK_SLOTS; i++) {
            TaskSlot *t = &c->tasks[i];
            Py_CLEAR(t->task); Py_CLEAR(t->view); Py_CLEAR(t->context); Py_CLEAR(t->display); Py_CLEAR(t->cpu);
            Py_CLEAR(t->actx);
            Py_CLEAR(t->recent);
            Py_CLEAR(t->recent_pair);
        }
        PyMem_Free(c->tasks);
        c->tasks = NULL;
    }
    if (c->classes != NULL) {
        for (Py_ssize_t i = 0; i < CLASS_SLOTS; i++) {
            Py_CLEAR(c->classes[i].name);
            for (int j = 0; j < CS_N; j++)
                Py_CLEAR(c->classes[i].got[j]);
        }
        PyMem_Free(c->classes);
        c->classes = NULL;
    }
    if (c->suffixes != NULL) {
        for (Py_ssize_t i = 0; i < SUFFIX_SLOTS; i++) {
            Py_CLEAR(c->suffixes[i].suffix);
            Py_CLEAR(c->suffixes[i].answer);
        }
        PyMem_Free(c->suffixes);
        c->suffixes = NULL;
    }
}

static int capcache_traverse(CapCache *c, visitproc visit, void *arg) {
    if (c->pieces != NULL)
        for (Py_ssize_t i = 0; i < PC_N * PIECE_SLOTS; i++) {
            Py_VISIT(c->pieces[i].key);
            Py_VISIT(c->pieces[i].value);
        }
    if (c->hf != NULL)
        for (Py_ssize_t i = 0; i < HF_SLOTS; i++) {
            Py_VISIT(c->hf[i].head);
            Py_VISIT(c->hf[i].fl);
        }
    if (c->pairs != NULL)
        for (Py_ssize_t i = 0; i < PAIR_SLOTS; i++)
            Py_VISIT(c->pairs[i]);
    if (c->tasks != NULL)
        for (Py_ssize_t i = 0; i < TASK_SLOTS; i++) {
            TaskSlot *t = &c->tasks[i];
            Py_VISIT(t->task); Py_VISIT(t->view); Py_VISIT(t->context); Py_VISIT(t->display); Py_VISIT(t->cpu);
            Py_VISIT(t->actx);
            Py_VISIT(t->recent);
            Py_VISIT(t->recent_pair);
        }
    if (c->classes != NULL)
        for (Py_ssize_t i = 0; i < CLASS_SLOTS; i++) {
            Py_VISIT(c->classes[i].name);
            for (int j = 0; j < CS_N; j++)
                Py_VISIT(c->classes[i].got[j]);
        }
    if (c->suffixes != NULL)
        for (Py_ssize_t i = 0; i < SUFFIX_SLOTS; i++) {
            Py_VISIT(c->suffixes[i].suffix);
            Py_VISIT(c->suffixes[i].answer);
        }
    return 0;
}

/* A piece's slot (its index in the table): a multiply per word of its bytes (the last word ending where
 * the piece ends, overlapping the one before; a piece shorter than a word read as two overlapping
 * halves), the slot taken from the product's top bits, which every bit of every word reaches.  (The
 * word loop with a shift per word, and a short piece a byte at a time, cost ~145 instructions a line,
 * three pieces, callgrind.)  It reads none of the bytes outside the piece. */
static inline Py_ssize_t piece_index(const char *p, Py_ssize_t n) {
    const uint64_t k = 0x9E3779B97F4A7C15ULL;
    uint64_t h = (uint64_t)n * k, word;
    if (n >= 8) {
        Py_ssize_t i = 0;
        for (; i + 8 <= n; i += 8) {
            memcpy(&word, p + i, 8);
            h = (h ^ word) * k;
        }
        if (i < n) {
            memcpy(&word, p + n - 8, 8);
            h = (h ^ word) * k;
        }
    } else if (n >= 4) {
        uint32_t lo, hi;
        memcpy(&lo, p, 4);
        memcpy(&hi, p + n - 4, 4);
        h = (h ^ ((uint64_t)hi << 32 | lo)) * k;
    } else {
        for (Py_ssize_t i = 0; i < n; i++)
            h = (h ^ (unsigned char)p[i]) * k;
    }
    return (Py_ssize_t)(h >> (64 - PIECE_BITS));
}

static PyObject *capcache_piece_miss(PieceSlot *slot, PyObject *dict, const char *p, Py_ssize_t n);

/* The value of the piece at `p` (`n` ASCII bytes) in `dict` (borrowed: the table or the dict holds
 * it), remembered for those bytes once found; NULL: not in the dict (or an error set).  Inline: the
 * hit is the common case (three a line), its call's set-up cost ~20 instructions each. */
static inline PyObject *capcache_piece(CapCache *c, int table, PyObject *dict, const char *p, Py_ssize_t n) {
    PieceSlot *slot = &c->pieces[(Py_ssize_t)table * PIECE_SLOTS + piece_index(p, n)];
    PyObject *key = slot->key;
    if (key != NULL && slot->value != NULL && PyUnicode_GET_LENGTH(key) == n &&
        memcmp(PyUnicode_1BYTE_DATA(key), p, (size_t)n) == 0) /* (libc's, 32 bytes a step: an inline 8-byte step cost twice as much) */
        return slot->value;
    return capcache_piece_miss(slot, dict, p, n);
}

/* capcache_piece's slot not holding the piece's value: its key made (unless it is the piece's already),
 * looked up in `dict` */
static PyObject *capcache_piece_miss(PieceSlot *slot, PyObject *dict, const char *p, Py_ssize_t n) {
    PyObject *key = slot->key;
    if (key == NULL || PyUnicode_GET_LENGTH(key) != n || memcmp(PyUnicode_DATA(key), p, (size_t)n) != 0) {
        key = ascii_str(p, n);
        if (key == NULL)
            return NULL;
        Py_XSETREF(slot->key, key);
        Py_CLEAR(slot->value);
    }
    PyObject *value = PyDict_GetItemWithError(dict, key);
    if (value != NULL) {
        Py_INCREF(value);
        Py_XSETREF(slot->value, value);
    }
    return value;
}

/* Remember `value` for the piece at `p` (`n` bytes) that `capcache_piece` was just asked for and did
 * not find (a value the caller made for those bytes as the Python loop would). */
static void capcache_piece_found(CapCache *c, int table, const char *p, Py_ssize_t n, PyObject *value) {
    PieceSlot *slot = &c->pieces[(Py_ssize_t)table * PIECE_SLOTS + piece_index(p, n)];
    PyObject *key = slot->key;
    if (key != NULL && PyUnicode_GET_LENGTH(key) == n && memcmp(PyUnicode_DATA(key), p, (size_t)n) == 0)
        Py_XSETREF(slot->value, Py_NewRef(value));
}

static inline int same_str(PyObject *a, PyObject *b) {
    if (a == b)
        return 1;
    Py_ssize_t n = PyUnicode_GET_LENGTH(a);
    return n == PyUnicode_GET_LENGTH(b) && PyUnicode_KIND(a) == PyUnicode_KIND(b) &&
           memcmp(PyUnicode_DATA(a), PyUnicode_DATA(b), (size_t)(n * PyUnicode_KIND(a))) == 0;
}

/* An exact str's hash: the one it keeps once made, read in place (PyObject_Hash's call and dispatch
 * cost ~24 instructions, and the filter hashes ~4 strs a line: ~70 instructions a line, callgrind). */
static inline Py_hash_t str_hash(PyObject *s) {
    Py_hash_t h = ((PyASCIIObject *)s)->hash;
    return h != -1 ? h : PyObject_Hash(s);
}

/* The tuple `(a, b)` (a new reference) and its hash (`*hash`, when asked): the one made lately for equal
 * strs, else a new one kept. */
static PyObject *capcache_pair_hashed(CapCache *c, PyObject *a, PyObject *b, Py_hash_t *hash) {
    if (!PyUnicode_CheckExact(a) || !PyUnicode_CheckExact(b)) {
        PyObject *pair = PyTuple_Pack(2, a, b);
        if (pair != NULL && hash != NULL && (*hash = PyObject_Hash(pair)) == -1)
            Py_CLEAR(pair);
        return pair;
    }
    Py_hash_t ha = str_hash(a), hb = str_hash(b);
    if (ha == -1 || hb == -1)
        return NULL;
    size_t i = ((size_t)ha * 1000003u ^ (size_t)hb) & (PAIR_SLOTS - 1);
    PyObject **slot = &c->pairs[i];
    PyObject *pair = *slot;
    if (pair != NULL && same_str(PyTuple_GET_ITEM(pair, 0), a) && same_str(PyTuple_GET_ITEM(pair, 1), b)) {
        if (hash != NULL)
            *hash = c->pair_hashes[i];
        return Py_NewRef(pair);
    }
    pair = PyTuple_Pack(2, a, b);
    if (pair == NULL)
        return NULL;
    Py_hash_t h = PyObject_Hash(pair);
    if (h == -1) {
        Py_DECREF(pair);
        return NULL;
    }
    Py_XSETREF(*slot, Py_NewRef(pair));
    c->pair_hashes[i] = h;
    if (hash != NULL)
        *hash = h;
    return pair;
}

static inline PyObject *capcache_pair(CapCache *c, PyObject *a, PyObject *b) {
    return capcache_pair_hashed(c, a, b, NULL);
}

/* `dict`'s value for `key` whose hash is `hash` (borrowed; NULL: absent, or an error set), as
 * PyDict_GetItemWithError, without hashing the key again where the interpreter lets a caller say it */
static inline PyObject *dict_get_hashed(PyObject *dict, PyObject *key, Py_hash_t hash) {
#if PY_VERSION_HEX < 0x030D0000
    return _PyDict_GetItem_KnownHash(dict, key, hash);
#else
    (void)hash;
    return PyDict_GetItemWithError(dict, key);
#endif
}

/* Every task slot out of date (Python code may have changed what they remember). */
static inline void capcache_forget(CapCache *c) {
    c->gen++;
}

/* The slot of `task` (a str): what it remembers of the task, or a slot emptied for it; NULL: an error. */
static TaskSlot *capcache_task(CapCache *c, PyObject *task) {
    if (!PyUnicode_CheckExact(task)) {
        PyErr_SetString(PyExc_TypeError, "a task is no str");
        return NULL;
    }
    Py_hash_t h = str_hash(task);
    if (h == -1)
        return NULL;
    TaskSlot *t = &c->tasks[(size_t)h & (TASK_SLOTS - 1)];
    if (t->gen == c->gen && t->task != NULL && same_str(t->task, task))
        return t;
    t->gen = c->gen;
    Py_XSETREF(t->task, Py_NewRef(task));
    Py_CLEAR(t->view);
    Py_CLEAR(t->context);
    t->context_known = 0;
    Py_CLEAR(t->display);
    Py_CLEAR(t->cpu);
    Py_CLEAR(t->actx);
    t->actx_known = 0;
    Py_CLEAR(t->recent);
    Py_CLEAR(t->recent_pair);
    return t;
}

/* The slot of the class `name` (NULL: no str, none to keep, or an error set). */
static ClassSlot *capcache_class(CapCache *c, PyObject *name) {
    if (!PyUnicode_CheckExact(name))
        return NULL;
    Py_hash_t h = str_hash(name);
    if (h == -1)
        return NULL;
    ClassSlot *cs = &c->classes[(size_t)h & (CLASS_SLOTS - 1)];
    if (cs->gen == c->gen && cs->name != NULL && same_str(cs->name, name))
        return cs;
    cs->gen = c->gen;
    Py_XSETREF(cs->name, Py_NewRef(name));
    for (int j = 0; j < CS_N; j++)
        Py_CLEAR(cs->got[j]);
    cs->known = 0;
    return cs;
}

/* `dict.get(key)` (borrowed; NULL: absent, or an error set), remembered as the slot's `what`
 * (`cs` NULL: not remembered). */
static PyObject *capcache_get(ClassSlot *cs, int what, PyObject *dict, PyObject *key) {
    if (cs != NULL && (cs->known >> what) & 1u)
        return cs->got[what];
    PyObject *v = PyDict_GetItemWithError(dict, key);
    if (v == NULL && PyErr_Occurred())
        return NULL;
    if (cs != NULL) {
        Py_XSETREF(cs->got[what], Py_XNewRef(v));
        cs->known |= 1u << what;
    }
    return v;
}

/* The slot of the question about `classes[i:n]` followed by `last` (`asking`: a `capcache_suffix_ask`
 * question, kept apart from `capcache_suffix_known`'s), and whether it holds that question's answer for
 * a set of `set`'s size. */
static SuffixSlot *suffix_slot(CapCache *c, PyObject *set, PyObject **classes, Py_ssize_t i, Py_ssize_t n,
                               PyObject *last, int asking, int *hit) {
    uint64_t h = (1469598103934665603ULL ^ (uint64_t)(n - i)) + (uint64_t)asking;
    for (Py_ssize_t j = i; j < n; j++)
        h = (h ^ (uint64_t)(uintptr_t)classes[j]) * 1099511628211ULL;
    h = (h ^ (uint64_t)(uintptr_t)last) * 1099511628211ULL;
    SuffixSlot *slot = &c->suffixes[(h ^ (h >> 29)) & (SUFFIX_SLOTS - 1)];
    PyObject *seen = slot->suffix;
    *hit = 0;
    if (seen != NULL && (slot->answer != NULL) == asking && PyTuple_GET_SIZE(seen) == n - i + 1 &&
        slot->set_size == PySet_GET_SIZE(set) && PyTuple_GET_ITEM(seen, n - i) == last) {
        Py_ssize_t j = i;
        while (j < n && PyTuple_GET_ITEM(seen, j - i) == classes[j])
            j++;
        *hit = j == n;
    }
    return slot;
}

/* the tuple of `classes[i:n]`, and `last` if not NULL: a new reference, NULL on error */
static PyObject *suffix_tuple(PyObject **classes, Py_ssize_t i, Py_ssize_t n, PyObject *last) {
    PyObject *suffix = PyTuple_New(n - i + (last != NULL));
    if (suffix == NULL)
        return NULL;
    for (Py_ssize_t j = i; j < n; j++)
        PyTuple_SET_ITEM(suffix, j - i, Py_NewRef(classes[j]));
    if (last != NULL)
        PyTuple_SET_ITEM(suffix, n - i, Py_NewRef(last));
    return suffix;
}

/* Whether `classes[i:n]` followed by `last` is in `set` (the kernel's chain suffixes): 1, 0, -1 error;
 * the answer kept per stack and set size. */
static int capcache_suffix_known(CapCache *c, PyObject *set, PyObject **classes, Py_ssize_t i, Py_ssize_t n,
                                 PyObject *last) {
    int hit;
    SuffixSlot *slot = suffix_slot(c, set, classes, i, n, last, 0, &hit);
    if (hit)
        return slot->known;
    PyObject *suffix = suffix_tuple(classes, i, n, last);
    if (suffix == NULL)
        return -1;
    int known = PySet_Contains(set, suffix);
    if (known < 0) {
        Py_DECREF(suffix);
        return -1;
    }
    Py_XSETREF(slot->suffix, suffix);
    Py_CLEAR(slot->answer);
    slot->set_size = PySet_GET_SIZE(set);
    slot->known = known;
    return known;
}

/* `asker.method(stack, last)` for `classes[i:n]` as `stack`: what Python decides about a stack under
 * `set` (the kernel's chain suffixes), asked once per stack, class and set size and kept.  Borrowed (the
 * slot holds it), NULL on error. */
static PyObject *capcache_suffix_ask(CapCache *c, PyObject *set, PyObject **classes, Py_ssize_t i, Py_ssize_t n,
                                     PyObject *last, PyObject *asker, PyObject *method) {
    int hit;
    SuffixSlot *slot = suffix_slot(c, set, classes, i, n, last, 1, &hit);
    if (hit)
        return slot->answer;
    PyObject *stack = suffix_tuple(classes, i, n, NULL);
    PyObject *answer = stack == NULL ? NULL : PyObject_CallMethodObjArgs(asker, method, stack, last, NULL);
    Py_XDECREF(stack);
    PyObject *suffix = answer == NULL ? NULL : suffix_tuple(classes, i, n, last);
    if (suffix == NULL) {
        Py_XDECREF(answer);
        return NULL;
    }
    Py_XSETREF(slot->suffix, suffix);
    Py_XSETREF(slot->answer, answer);
    slot->set_size = PySet_GET_SIZE(set);
    return answer;
}

#endif
