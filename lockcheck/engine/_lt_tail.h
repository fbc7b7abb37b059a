/*
 * The text after the task, read here for its common shapes (hotpath._scan_tail's `acquire`,
 * `release`, `contended`, `acquired` of CLASS[@INSTANCE] with `at=`, a mode, `try`), the stamp
 * after ` ts=`, and the tails dict's info of any other shape (rest_info).  A unit: everything that
 * parses a line's bytes after its task, and the strs made of them (field_strs).  Relies on
 * _lt_state.h and _lt_classes.h (an acquisition's class).
 *
 * Part of the `.lt` core (_speedups.c), which includes it with the other _lt_*.h in one translation
 * unit: its static functions stay where the compiler can inline them, as when they were one file.
 */
#ifndef LOCKCHECK_LT_TAIL_H
#define LOCKCHECK_LT_TAIL_H

#include <float.h>
#include <math.h>
#include "_lt_state.h"
#include "_lt_classes.h"

/* The info the Python loop's _scan_tail read of the `n` bytes at `p` (borrowed: kept in the rest
 * cache until its slot's next text), or NULL: none in `tails` (or an error, set).  A text's info,
 * once found, is kept with its str: an info is the same whenever the text is read again (the
 * Python loop drops its dict at a size only to bound it) until classes are forgotten
 * (forget_classes drops the kept infos too); the dict is looked up only for a text new here. */
static PyObject *rest_info(LineFilter *self, const char *p, Py_ssize_t n) {
    RestSlot *slot = &self->rest_slots[hash_bytes(p, n) & (REST_SLOTS - 1)];
    PyObject *key = slot->key;
    if (key != NULL && PyUnicode_GET_LENGTH(key) == n && bytes_eq((const char *)PyUnicode_1BYTE_DATA(key), p, n)) {
        if (slot->info != NULL)
            return slot->info;
    } else {
        key = ascii_str(p, n);
        if (key == NULL)
            return NULL;
        Py_XSETREF(slot->key, key);
        Py_CLEAR(slot->info);
    }
    PyObject *info = PyDict_GetItemWithError(self->tails, key); /* borrowed */
    if (info != NULL) {
        Py_INCREF(info);
        slot->info = info;
    }
    return info;
}

/* Whether the ASCII str `s` is exactly the `n` bytes at `p`. */
static inline int str_is(PyObject *s, const char *p, Py_ssize_t n) {
    return PyUnicode_Check(s) && PyUnicode_IS_COMPACT_ASCII(s) && PyUnicode_GET_LENGTH(s) == n &&
           bytes_eq((const char *)PyUnicode_1BYTE_DATA(s), p, n);
}

/* lt._seconds: a finite number of seconds float() reads, without `_`, at most lt.MAX_SECONDS_CHARS
 * characters (ts_chars_ok). */
static int valid_seconds(const char *p, Py_ssize_t n) {
    if (!ts_chars_ok(n))
        return 0;
    /* the usual shape, DIGITS[.DIGITS], of at most DBL_MAX_10_EXP characters is a finite float: no
     * str, no float made for it (nor a `_` looked for: it has none); anything else (and a limit read
     * from Python that allows longer numbers, which may be inf) is float()'s to judge */
    Py_ssize_t i = 0, digits = 0;
    while (i < n && p[i] >= '0' && p[i] <= '9')
        i++;
    digits = i;
    if (i < n && p[i] == '.') {
        i++;
        while (i < n && p[i] >= '0' && p[i] <= '9')
            i++;
    }
    if (i == n && digits > 0 && n <= DBL_MAX_10_EXP)
        return 1;
    if (find_byte(p, n, '_') != NULL)
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
    const char *blank = find_byte(p, n, ' ');
    Py_ssize_t ts_len = blank ? blank - p : n;
    int ok = valid_seconds(p, ts_len);
    if (ok <= 0)
        return ok;
    *cpu = -1;
    if (blank == NULL)
        return 1;
    const char *word = blank + 1;
    Py_ssize_t rest = n - ts_len - 1;
    if (!takes_cpu || rest < 5 || memcmp(word, "cpu=", 4) != 0 || !cpu_digits_ok(rest - 4))
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

/* A line's lock op as _scan_tail reads it, for the shapes read here: `acquire`, `release`,
 * `contended`, `acquired`, a `CLASS[@INSTANCE]` field, then only `at=`, a mode and `try` (as
 * each op takes them).  An acquisition's class is one the graph has (`cls`, `node` borrowed
 * from the class table).  The str fields are made only when needed. */
typedef struct {
    int kind;
    long seen;              /* the bits of the options given */
    const char *field;      /* CLASS[@INSTANCE] */
    Py_ssize_t field_len;
    Py_ssize_t lock_len;    /* CLASS */
    int has_instance;
    long read;
    int trylock;
    PyObject *cls;          /* borrowed: the class (the lock itself: subclass 0) */
    PyObject *node;         /* borrowed: its graph node's attribute dict */
    ClassSlot *slot;        /* the class table's slot of both */
} Tail;

enum { B_MODE = 8, B_TRY = 16 };

static inline int word_is(const char *p, Py_ssize_t n, const char *word) {
    size_t len = strlen(word);
    return (size_t)n == len && memcmp(p, word, len) == 0;
}

/* Read the `n` bytes of text after the task (up to ` ts=`): 1 read, 0 not a shape read here
 * (hotpath._scan_tail decides), -1 error. */
static int read_tail(LineFilter *self, const char *p, Py_ssize_t n, Tail *t) {
    const char *end = p + n;
    const char *space = find_byte(p, n, ' ');
    if (space == NULL)
        return 0;
    Py_ssize_t op_len = space - p;
    long takes;
    if (word_is(p, op_len, "acquire")) {
        t->kind = K_ACQUIRE;
        takes = B_AT | B_MODE | B_TRY;
    } else if (word_is(p, op_len, "release")) {
        t->kind = K_RELEASE;
        takes = B_AT;
    } else if (word_is(p, op_len, "contended") || word_is(p, op_len, "acquired")) {
        /* applied only where the checker would find the lock held (apply_contention) */
        t->kind = K_STATS;
        takes = op_len == 9 ? B_AT : 0;
    } else {
        return 0;
    }
    const char *field = space + 1;
    const char *field_end = find_byte(field, end - field, ' ');
    if (field_end == NULL)
        field_end = end;
    /* lt scan's _lock_field: CLASS, or CLASS@INSTANCE with both given, no `=` in CLASS */
    const char *at_sign = find_byte(field, field_end - field, '@');
    const char *lock_end = at_sign ? at_sign : field_end;
    if (lock_end == field || find_byte(field, lock_end - field, '=') != NULL ||
        (at_sign && at_sign + 1 == field_end))
        return 0;
    t->field = field;
    t->field_len = field_end - field;
    t->lock_len = lock_end - field;
    t->has_instance = at_sign != NULL;
    t->seen = 0;
    t->read = 0;
    t->trylock = 0;
    t->cls = t->node = NULL;
    t->slot = NULL;
    const char *word = field_end;
    while (word < end) {
        word++; /* the blank before it */
        const char *word_end = find_byte(word, end - word, ' ');
        if (word_end == NULL)
            word_end = end;
        Py_ssize_t len = word_end - word;
        long bit;
        if (len > 3 && memcmp(word, "at=", 3) == 0) {
            bit = B_AT;
        } else if (word_is(word, len, "try")) {
            bit = B_TRY;
            t->trylock = 1;
        } else if (word_is(word, len, "write")) {
            bit = B_MODE;
            t->read = 0;
        } else if (word_is(word, len, "read")) {
            bit = B_MODE;
            t->read = 1;
        } else if (word_is(word, len, "rread")) {
            bit = B_MODE;
            t->read = 2;
        } else {
            return 0; /* cpu=, subclass=, nest=, an empty word...: _scan_tail's */
        }
        if ((t->seen & bit) || !(takes & bit))
            return 0;
        t->seen |= bit;
        word = word_end;
    }
    if (t->kind == K_ACQUIRE) {
        if (self->classes == NULL)
            return 0;
        ClassSlot *slot;
        int found = find_class(self, field, t->lock_len, &slot);
        if (found <= 0)
            return found;
        t->cls = slot->cls;
        t->node = slot->node;
        t->slot = slot;
    }
    return 1;
}

/* A str of `n` bytes at `p`, or None when `n` is -1 (no instance). */
static PyObject *str_or_none(const char *p, Py_ssize_t n) {
    if (n < 0)
        Py_RETURN_NONE;
    return ascii_str(p, n);
}

/* The lock and instance of a Tail as str (instance None when none is given): 0, or -1 on error. */
static int tail_lock(const Tail *t, PyObject **lock, PyObject **instance) {
    *lock = ascii_str(t->field, t->lock_len);
    *instance = *lock ? str_or_none(t->field + t->lock_len + 1,
                                    t->has_instance ? t->field_len - t->lock_len - 1 : -1) : NULL;
    if (*instance == NULL) {
        Py_CLEAR(*lock);
        return -1;
    }
    return 0;
}

/* A release's lock and instance as new references: from its info -- the Python loop's reading of
 * the release, (kind, seen, cpu, release, lock, instance) -- when there is one, else from the Tail
 * (tail_lock).  0, or -1 on error. */
static int released_lock(PyObject *info, const Tail *t, PyObject **lock, PyObject **instance) {
    if (info == NULL)
        return tail_lock(t, lock, instance);
    *lock = Py_NewRef(PyTuple_GET_ITEM(info, 4));
    *instance = Py_NewRef(PyTuple_GET_ITEM(info, 5));
    return 0;
}

/* The release text (`release CLASS[@INSTANCE]`: the plain release that pops the entry) and the
 * instance (None: none given) of a Tail's lock field, as new references: the strs of the field's
 * last acquisition when it is the same text (a direct-mapped cache, as rest_info's), else made (and
 * kept).  Per pushed entry these were two new strs, made and freed again at its release.  0, or
 * -1 on error. */
static int field_strs(LineFilter *self, const Tail *t, PyObject **release, PyObject **instance) {
    FieldSlot *slot = &self->fields[hash_bytes(t->field, t->field_len) & (FIELD_SLOTS - 1)];
    PyObject *text = slot->release;
    if (text == NULL || PyUnicode_GET_LENGTH(text) != 8 + t->field_len ||
        !bytes_eq((const char *)PyUnicode_1BYTE_DATA(text) + 8, t->field, t->field_len)) {
        text = PyUnicode_New(8 + t->field_len, 127);
        if (text == NULL)
            return -1;
        memcpy(PyUnicode_1BYTE_DATA(text), "release ", 8);
        memcpy(PyUnicode_1BYTE_DATA(text) + 8, t->field, (size_t)t->field_len);
        PyObject *given = str_or_none(t->field + t->lock_len + 1,
                                      t->has_instance ? t->field_len - t->lock_len - 1 : -1);
        if (given == NULL) {
            Py_DECREF(text);
            return -1;
        }
        Py_XSETREF(slot->release, text);
        Py_XSETREF(slot->instance, given);
    }
    Py_INCREF(slot->release);
    Py_INCREF(slot->instance);
    *release = slot->release;
    *instance = slot->instance;
    return 0;
}

#endif
