/*
 * The `.lt` core's state and the layouts it shares with the Python side: the LineFilter object
 * (its caches, class table, held overlays, tabled rules), the indices of hotpath.py's tuples (a
 * view, an info, a stack entry) and the interned attribute names.  A unit because every other
 * _lt_*.h reads these and none of them owns them: written once here, they are the one place a
 * change of hotpath.py's layouts lands in C.  Relies on _rules.h (the tabled rules), _cshared.h
 * and _bytescan.h (which the other parts use through this header).
 *
 * Part of the `.lt` core (_speedups.c), which includes it with the other _lt_*.h in one translation
 * unit: its static functions stay where the compiler can inline them, as when they were one file.
 */
#ifndef LOCKCHECK_LT_STATE_H
#define LOCKCHECK_LT_STATE_H

#include "_lt_hints.h"

#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <string.h>
#include "_rules.h"
#include "_cshared.h"
#include "_bytescan.h"
#include "_knownkeys.h"

/* PyLong_AsLong for the small ints the core reads on every line (irq contexts, modes, usage masks,
 * references): an int of one digit read as it is (CPython 3.11's layout) instead of the general
 * conversion, ~4% of a run's time; anything else, and later versions, go through PyLong_AsLong. */
static inline long as_long(PyObject *o) {
    long v;
    if (PyLong_CheckExact(o) && one_digit_long(o, &v))
        return v;
    return PyLong_AsLong(o);
}

/* hotpath.py: a stack entry */
enum { E_RELEASE, E_CLS, E_LOCK, E_INSTANCE, E_PREV_KEY, E_IRQ_CONTEXT, E_READ, E_TRYLOCK, E_HARDIRQS_OFF,
       E_NEST, E_SUBCLASS, E_REFERENCES, E_LINE, E_LINENO, E_SIZE };
/* hotpath.py: a view (TaskState, held, irq_context, hardirqs_off, usage needs, acquired_ever) */
enum { V_TASK, V_HELD, V_IRQ_CONTEXT, V_HARDIRQS_OFF, V_NEEDS, V_ACQUIRED_EVER };
/* hotpath.py: an info (kind, seen, cpu, release, ...) and the acquisition's further fields */
enum { I_KIND, I_SEEN, I_CPU, I_RELEASE, I_CLS, I_LOCK, I_INSTANCE, I_READ, I_TRYLOCK, I_SUBCLASS, I_NEST,
       I_NODE };
/* hotpath.py: info kinds and option bits */
enum { K_ACQUIRE = 1, K_RELEASE = 2, K_STATS = 3, K_IRQ = 4, K_EXIT = 5 };
/* hotpath.py: an irq-state op's info (kind, seen, cpu, op) */
enum { I_OP = 3 };
enum { B_AT = 1, B_TS = 2, B_CPU = 4 };

static PyObject *s_chain_key, *s_cpu, *s_usage, *s_add, *s_lock, *s_instance, *s_references, *s_prev_chain_key,
    *s_cls, *s_irq_context, *s_hardirqs_enabled, *s_softirqs_enabled, *s_hardirq_depth, *s_softirq_depth,
    *s_irq_events, *s_stamp, *s_name, *s_usage_need, *s_key, *s_check, *s_read, *s_contention_checked,
    *s_generation;

/* The bytes of a class's name kept in its class-table entry (the rest, if any, read from its str). */
#define CLASS_INLINE 64

/* An entry of the class table (read_tail): 128 bytes, aligned to them, so that a look-up reads
 * the name, the node and the usage kept from one pair of cache lines, not from the str too. */
typedef struct ClassSlot {
    uint64_t hash;          /* hash_bytes of the name */
    Py_ssize_t len;         /* the name's length */
    PyObject *cls;
    PyObject *node;
    Py_hash_t cls_hash;     /* hash(cls): a chain key's lane (hash3_lanes), without reading the str */
    uint64_t usage_version; /* the node dict's version when `usage` was read from it (0: never) */
    long usage;             /* node["usage"] as of that version (node_usage) */
    uint64_t usage_read;    /* 1: `usage` was read from the node once (a subset of its usage now) */
    char name[CLASS_INLINE]; /* the name's first bytes */
} ClassSlot;

/* What find_view found for a task key: its view (borrowed: the views dict holds it while the
 * dict is unchanged but by the core itself) and the filter's epoch then (0: nothing kept). */
typedef struct TaskSeen {
    uint64_t epoch;
    PyObject *view;
    long long used;  /* the line number that last found it (of the two ways, the other one is replaced) */
} TaskSeen;

/* A slot of the rest cache (rest_info): a text after the task not read here, as a str, and the info
 * the Python loop's _scan_tail read of it (strong references; the info NULL: not looked up yet). */
typedef struct RestSlot {
    PyObject *key;
    PyObject *info;
} RestSlot;

/* A slot of the field cache (field_strs): an acquisition's release text and instance. */
typedef struct FieldSlot {
    PyObject *release;     /* `release CLASS[@INSTANCE]` */
    PyObject *instance;    /* INSTANCE, or None */
} FieldSlot;

/* The held overlay of one task (laid out in _lt_overlay.h): the filter keeps OV_SLOTS of them. */
typedef struct Overlay Overlay;

/* overlays at once (a power of two): half of them in use flushes them all (a trace of more
 * tasks than that at once pays a flush every so many new ones) */
#define OV_SLOTS 1024

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
    PyObject *chunk;       /* bytes: a block of whole lines being split (source.Lines.give_bytes), or NULL */
    Py_ssize_t pos;        /* where its next line starts */
    PyObject *hints;       /* bytes: the split of each of its lines (LineHint, _lt_hints.h), or NULL */
    Py_ssize_t hint_pos;   /* the next line's */
    PyObject **task_keys;  /* TASK_SLOTS str: recent task keys, by a hash of their bytes */
    TaskSeen *task_seen;   /* TASK_SLOTS: the view each of those keys found, and when (find_view) */
    uint64_t epoch;        /* find_view's answers of this epoch stand (a new one: the views changed) */
    uint64_t views_known;  /* the views dict's version as the core last saw or made it */
    TaskSeen *current;     /* the current line's task's slot (NULL: none) */
    struct RestSlot *rest_slots; /* REST_SLOTS: recent texts after the task (up to ` ts=`) and their infos */
    FieldSlot *fields;     /* FIELD_SLOTS: recent lock fields' release text and instance (field_strs) */
    PyObject *classes;     /* dict: the graph's nodes (class -> attributes), or NULL */
    struct ClassSlot *class_table; /* the entries, in the order they came (class_count of class_cap) */
    void *class_raw;       /* the allocation class_table is aligned in */
    Py_ssize_t class_cap;
    uint64_t *class_index; /* class_size slots: 0 free, else the hash's upper half | entry index + 1 */
    Py_ssize_t class_size; /* a power of two, or 0 */
    Py_ssize_t class_count;
    /* irq-state ops (apply_irq), given `irq` = (file, reader, usage_needs, read shift, quick): NULL when
     * not given (then the Python loop applies them) */
    PyObject *file;        /* the trace's name, for the deferred evidence */
    PyObject *reader;      /* fast_held.irq_evidence: reads a deferred irq event's evidence back */
    PyObject *usage_needs; /* tasks.usage_needs */
    PyObject *checker;     /* the Checker: `contended`/`acquired` read its contention_checked; NULL: the
                            * Python side's lines */
    long read_shift;
    int quick;             /* releases below the top applied here (Checker.quick_reacquire) */
    Py_hash_t initial_lane; /* hash(initial): its lane in hash3_lanes (-1: not an int; hash3 then) */
    /* lockdep's boolean rules as `rules` has them at the start of the run, tabled over their
     * whole domain by fast_lt._rule_tables: this core decides none of them itself */
    unsigned long validates; /* bit T: rules.validates_chain(trylock=T, check=True) */
    unsigned long separate;  /* bit 4*TOP+CTX: rules.separate_irq_context(TOP, CTX), contexts 0..3 */
    unsigned long merges;    /* bit 2*NEST+SAME: rules.nest_lock_merges (depth > 0), by nest given, same class */
    unsigned long irq_rule[RULES_IRQ_N]; /* rules.irq_transition_table(): apply_irq's transitions */
    Overlay *overlays;       /* OV_SLOTS, by held list (the held overlay, above) */
    Py_ssize_t ov_count;     /* how many are in use */
    Py_ssize_t ov_used[OV_SLOTS]; /* their indices */
    int overlay;             /* pushes kept in C (default; `use_overlay(False)`: every push a tuple) */
    /* the line being passed on is a lock or irq op of one task (read_tail's or _scan_tail's kinds),
     * which the Python side applies to that task alone: only its overlay is flushed (numbered) */
    int pass_local;
    PyObject *pass_held;     /* borrowed: that task's held list, while its line is handled */
    /* the chain keys found in `cache` so far, a copy of them (lockcheck/lockdep/chain_cache.py): a
     * hit is one probe of this table instead of an int hashed and compared in the set */
    KnownKeys known;         /* the chain cache's keys known here (_knownkeys.h) */
    long long known_gen;     /* cache.generation the copy is of; -1: a set without one, no copy */
} LineFilter;

/* The tabled rules (see LineFilter), read as the capture core reads them (_rules.h). An irq context
 * outside 0..3 is no context lockdep has: the caller passes such a line on. */
static inline int rule_validates(const LineFilter *self, int trylock) {
    return rules_validates(self->validates, trylock);
}

static inline int rule_separate(const LineFilter *self, long top, long ctx) {
    return rules_separate(self->separate, top, ctx);
}

static inline int rule_merges(const LineFilter *self, int nest, int same) {
    return rules_merges(self->merges, nest, same);
}

/* Direct-mapped caches of str keys: a line's task and rest are looked up in the Python dicts
 * by a str already made (its hash kept in it) instead of a new str per line. */
#define TASK_SLOTS 1024
#define REST_SLOTS 16384
#define FIELD_SLOTS 16384

/* The version of a dict: any change to it (an item set, replaced, deleted, the dict cleared) gives
 * it a new one.  CPython's `ma_version_tag` (PEP 509) up to 3.11; later versions deprecate it,
 * and there every look-up is made (0: no version). */
static inline uint64_t dict_version(PyObject *dict) {
#if PY_VERSION_HEX < 0x030C0000
    return ((PyDictObject *)dict)->ma_version_tag;
#else
    (void)dict;
    return 0;
#endif
}

static PyObject *small_ints[4];

#endif
