/*
 * lockcheck.engine._jsonlt: JSON Lines translated, line for line, into `.lt` lines (issue 23).
 *
 * Why: one engine for every reader.  The `.lt` fast path (fast_lt.py and its compiled filter,
 * _speedups.LineFilter) is the fastest way lockcheck checks events; a JSON Lines file whose lines
 * are turned into the `.lt` lines of the same events goes through that very engine, so JSON Lines
 * need no fast path of their own to keep equal to the plain pipeline.
 *
 * `Translator(lines, slow)` is an iterator over the `.lt` text of `lines` (what source.Lines
 * yields: str lines, or blocks of whole ASCII lines as `bytes` once `give_bytes` was asked for).
 * It yields blocks of `.lt` lines as `bytes` (LineFilter splits them itself) and single str lines,
 * and keeps line numbers 1:1: the n-th line out is the n-th JSON line's translation (a blank or
 * comment line, or a line it cannot translate, an empty line), so evidence and errors name the JSON
 * file's own lines.  Here it translates only the common flat objects it is sure of: ASCII, no
 * escape, each key once, the keys task, op, lock, instance, mode, try, subclass, nest, nocheck,
 * check, at, ts, cpu with values of the right type, names the `.lt` format writes bare.  Every
 * other line goes to `slow(line, lineno)` (fast_jsonl._slow_line: the JSON Lines reader's own code
 * and lt_write.format_event), which returns its `.lt` text, raises the reader's error for a bad
 * line, or returns None for an event `.lt` cannot carry (a `comm`): the translation stops there
 * (`stopped_at()`, `rest()`), and the caller reads the rest of the file the old way.  An error is
 * raised only after the lines before it were yielded (the lines before a bad line take effect).
 *
 * `Translator(lines, slow, reject, hints)`, as fast_jsonl makes it: `lines` may also yield
 * `(bytes, start, stop)` items (source.Lines.give_bytes given a source.Checking): whole lines not
 * checked by the source, read where they are; one with a NUL or a byte that is not ASCII goes back
 * (`reject(item)`) before any of its lines is read, and comes again decoded.  `hints`: it yields
 * `(block, hints)` pairs, each line's split as the `.lt` core would find it (_lt_hints.h), so the
 * core applies the line without splitting it again.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* a function the hot loop must not call (GCC and clang; MSVC's own word; else left to the compiler) */
#if defined(__GNUC__)
#define ALWAYS_INLINE inline __attribute__((always_inline))
#elif defined(_MSC_VER)
#define ALWAYS_INLINE __forceinline
#else
#define ALWAYS_INLINE inline
#endif

#include "_lt_hints.h"
#include "_jsonlt_keys.h"
#include "_jsonlt_scan.h"

typedef struct {
    PyObject_HEAD
    PyObject *lines;      /* the source iterator */
    PyObject *slow;       /* callable(line: str, lineno: int) -> str | None */
    PyObject *reject;     /* callable(item) for a block source.Lines did not check that is not plain, or NULL */
    long long lineno;     /* lines translated so far */
    PyObject *out;        /* list: items ready to yield */
    Py_ssize_t out_pos;
    PyObject *exc_type, *exc_value, *exc_tb; /* an error to raise once `out` is empty */
    long long stopped_at; /* the line `.lt` cannot carry (0: none) */
    PyObject *rest;       /* list of str: that line and the rest of its block */
    PyObject *block;      /* the bytes being written (NULL once yielded; kept from one source item to the
                           * next while it holds less than FLUSH_MIN), `buf` its data */
    char *buf;
    Py_ssize_t len, cap;
    Py_ssize_t hint;      /* the room the largest block so far needed (where the next one starts) */
    struct MaskWord_ *masks; /* a block's masks (_jsonlt_fast.h), kept for the next block */
    Py_ssize_t masks_cap;    /* (in words) */
    unsigned char next_key[K_COUNT + 1]; /* the key that followed each key last (K_COUNT: the first) */
    int give_hints;       /* yield (block, hints) pairs: each line's split for the `.lt` core (_lt_hints.h) */
    PyObject *hints;      /* the hints of the lines in `block` (NULL when `block` is), `hbuf` its data */
    LineHint *hbuf;
    Py_ssize_t hlen, hcap; /* (in hints) */
    int32_t hint_task, hint_rest; /* the split of the line write_event wrote last */
    long long ordered;    /* the lines ordered_line wrote (_jsonlt_ordered.h; Translator.ordered_lines) */
} Translator;

/* -- the output buffer ---------------------------------------------------------------------- */

/* The least a block is yielded with when more lines may follow (translate_block; then Translator_next) */
#define FLUSH_MIN ((Py_ssize_t)1 << 12)

/* The most a block starts with: one huge line must not make every later block allocate (and shrink)
 * as much. */
#define HINT_MAX ((Py_ssize_t)1 << 22)

/* Room for `more` bytes.  The lines are written into the `bytes` object that will be yielded (cut to
 * its length then): a copy of every block the less (issue 23). */
static int buf_reserve(Translator *self, Py_ssize_t more) {
    if (self->len + more <= self->cap)
        return 0;
    Py_ssize_t cap = self->cap ? self->cap * 2 : self->hint;
    while (cap < self->len + more)
        cap *= 2;
    if (self->block == NULL)
        self->block = PyBytes_FromStringAndSize(NULL, cap);
    else
        _PyBytes_Resize(&self->block, cap); /* (NULL on failure) */
    if (self->block == NULL) {
        self->buf = NULL;
        self->len = self->cap = 0;
        return -1;
    }
    self->buf = PyBytes_AS_STRING(self->block);
    self->cap = cap;
    if (cap > self->hint && cap <= HINT_MAX)
        self->hint = cap;
    return 0;
}

/* Room for twice as many hints (note_line's slow way: once a block, about). */
static __attribute__((noinline)) int grow_hints(Translator *self) {
    Py_ssize_t cap = self->hcap ? self->hcap * 2 : 1024;
    if (self->hints == NULL)
        self->hints = PyBytes_FromStringAndSize(NULL, cap * (Py_ssize_t)sizeof(LineHint));
    else
        _PyBytes_Resize(&self->hints, cap * (Py_ssize_t)sizeof(LineHint));
    if (self->hints == NULL) {
        self->hbuf = NULL;
        self->hlen = self->hcap = 0;
        return -1;
    }
    self->hbuf = (LineHint *)PyBytes_AS_STRING(self->hints);
    self->hcap = cap;
    return 0;
}

/* The line just written (the buffer was `before` bytes long): its hint (_lt_hints.h), the split
 * write_event found when `split` (a clean line: no quote, tab or `\r` in it), else none (0).  Inline:
 * a call a line cost more than the hint itself (~35 instructions a line, callgrind). */
static ALWAYS_INLINE int note_line(Translator *self, Py_ssize_t before, int split) {
    if (!self->give_hints || self->len <= before)
        return 0; /* (nothing written in the block: a line of its own, a str) */
    if (self->hlen == self->hcap && grow_hints(self) < 0)
        return -1;
    LineHint *h = &self->hbuf[self->hlen++];
    h->len = (int32_t)(self->len - before - 1);
    h->task_len = split ? self->hint_task : 0;
    h->rest_len = split ? self->hint_rest : 0;
    return 0;
}

/* The lines written so far as one `bytes` block (joined by `\n`, the last without it), with their hints
 * as a `(block, hints)` pair when they are given. */
static int flush(Translator *self) {
    if (self->len == 0)
        return 0;
    PyObject *block = self->block;
    Py_ssize_t len = self->len - 1; /* (its last `\n` off) */
    self->block = NULL;
    self->buf = NULL;
    self->len = self->cap = 0;
    if (_PyBytes_Resize(&block, len) < 0)
        return -1;
    if (self->give_hints) {
        PyObject *hints = self->hints;
        Py_ssize_t n = self->hlen;
        self->hints = NULL;
        self->hbuf = NULL;
        self->hlen = self->hcap = 0;
        if (hints == NULL || _PyBytes_Resize(&hints, n * (Py_ssize_t)sizeof(LineHint)) < 0) {
            Py_DECREF(block);
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_SystemError, "_jsonlt: a block without its hints");
            return -1;
        }
        PyObject *pair = PyTuple_Pack(2, block, hints);
        Py_DECREF(block);
        Py_DECREF(hints);
        if (pair == NULL)
            return -1;
        block = pair;
    }
    int r = PyList_Append(self->out, block);
    Py_DECREF(block);
    return r;
}

#include "_jsonlt_read.h"
#include "_jsonlt_write.h"
#include "_jsonlt_fast.h"
#include "_jsonlt_ordered.h"
#include "_jsonlt_rest.h"
/* -- the slow way ------------------------------------------------------------------------------ */

/* `slow(line, lineno)` for a line not translated here: 1 its text written (or queued), 0 the
 * translation stops at it (`.lt` cannot carry it), -1 error (the reader's, kept for later by the
 * caller).  `line` is a new str reference (stolen). */
static int slow_line(Translator *self, PyObject *line) {
    PyObject *result = PyObject_CallFunction(self->slow, "NL", line, self->lineno);
    if (result == NULL)
        return -1;
    if (result == Py_None) {
        Py_DECREF(result);
        return 0;
    }
    if (!PyUnicode_Check(result)) {
        Py_DECREF(result);
        PyErr_SetString(PyExc_TypeError, "slow() must return a str or None");
        return -1;
    }
    if (PyUnicode_IS_COMPACT_ASCII(result)) {
        int r = put(self, (const char *)PyUnicode_1BYTE_DATA(result), PyUnicode_GET_LENGTH(result));
        Py_DECREF(result);
        if (r < 0 || put(self, "\n", 1) < 0)
            return -1;
        return 1;
    }
    /* a line of its own, as a str (LineFilter passes non-ASCII lines to the Python loop) */
    int r = flush(self);
    if (r == 0)
        r = PyList_Append(self->out, result);
    Py_DECREF(result);
    return r < 0 ? -1 : 1;
}

/* Keep the current error to raise once the lines before it are out. */
static void keep_error(Translator *self) { PyErr_Fetch(&self->exc_type, &self->exc_value, &self->exc_tb); }

/* Translate one line (`data`, `n`: ASCII, without its ending), or hand it to `slow`: 1 go on,
 * 0 stopped (`.lt` cannot carry it), -1 error kept or raised.  `limit`: not NULL when the line is
 * clean (its block's masks, _jsonlt_fast.h), up to where its bytes may be read. */
static int one_line(Translator *self, const char *data, Py_ssize_t n, PyObject *str_line, const char *limit) {
    self->lineno++;
    if (data != NULL) {
        clean_limit = limit;
        int r = translate(self, data, n);
        clean_limit = NULL;
        if (r != 0)
            return r;
    }
    PyObject *line = str_line;
    if (line == NULL) {
        line = PyUnicode_FromStringAndSize(data, n);
        if (line == NULL)
            return -1;
    } else {
        Py_INCREF(line);
    }
    int r = slow_line(self, line);
    if (r == 0)
        self->stopped_at = self->lineno;
    return r;
}

/* A block of whole lines joined by `\n` (each perhaps with the `\r` of a `\r\n`), `size` bytes at `base`:
 * its bytes classified once, a chunk ahead of its lines (_jsonlt_fast.h: masks_upto), each clean line read
 * from its masks by ordered_line or fast_line, and what they do not take by the general reader (one_line).
 * `unchecked`: source.Lines did not look at its bytes (a `(bytes, start, stop)` item): one that is not all
 * ASCII or holds a NUL is given back whole (2: Translator.reject; what its lines wrote dropped, before any
 * of them reached Python), for source.Lines to decode and name its errors as it does for every reader. */
static int translate_block(Translator *self, const char *base, Py_ssize_t size, int unchecked) {
    Py_ssize_t words = size / 64 + 1 + MASK_PAD;
    if (words > self->masks_cap) {
        PyMem_Free(self->masks);
        self->masks = PyMem_Malloc((size_t)words * sizeof(MaskWord));
        self->masks_cap = self->masks ? words : 0;
        if (self->masks == NULL) {
            PyErr_NoMemory();
            return -1;
        }
    }
    MaskWord *m = (MaskWord *)self->masks;
    MaskBuild b = {0, 0, 0};
    /* (what was written before this block: kept when the block goes back, what it wrote dropped) */
    Py_ssize_t len0 = self->len, hlen0 = self->hlen;
    long long lineno0 = self->lineno, ordered0 = self->ordered;
    Py_ssize_t pos = 0;
    for (;;) {
        const char *data = base + pos;
        /* the masks a chunk ahead of the line (a line ending within a word of where they end: all of them) */
        if (!b.done && (pos >> 6) + 16 > b.built)
            masks_upto(base, size, m, &b, (pos >> 6) + MASK_CHUNK);
        /* the line's end: its first odd byte when that is a `\n` (or the block's end), else looked for */
        Py_ssize_t stop = next_odd(m, pos);
        if (!b.done && (stop >> 6) + 1 >= b.built) {
            masks_upto(base, size, m, &b, size / 64);
            stop = next_odd(m, pos);
        }
        if (b.unplain && unchecked) {
            self->len = len0, self->hlen = hlen0, self->lineno = lineno0, self->ordered = ordered0;
            return 2;
        }
        Py_ssize_t odd = stop - pos, len = odd;
        if (stop < size && base[stop] != '\n') {
            const char *nl = memchr(base + stop, '\n', (size_t)(size - stop));
            len = nl != NULL ? nl - data : size - pos;
        }
        const char *newline = len < size - pos ? data + len : NULL;
        Py_ssize_t n = len && data[len - 1] == '\r' ? len - 1 : len;
        Py_ssize_t before = self->len;
        int r = 0;
        if (odd >= n) {
            r = ordered_line(self, base, size, m, pos, pos + n);
            if (r == 0)
                r = fast_line(self, base, size, m, pos, pos + n);
        }
        if (r > 0) {
            self->lineno++;
            r = note_line(self, before, 1) < 0 ? -1 : 1;
        } else if (r == 0) {
            if (!b.done) { /* (Python may be called: first the block's bytes all checked) */
                masks_upto(base, size, m, &b, size / 64);
                if (b.unplain && unchecked) {
                    self->len = len0, self->hlen = hlen0, self->lineno = lineno0, self->ordered = ordered0;
                    return 2;
                }
            }
            r = one_line(self, data, n, NULL, odd >= n ? base + size : NULL);
            if (r > 0 && note_line(self, before, 0) < 0)
                r = -1;
        }
        if (r < 0) {
            if (PyErr_Occurred())
                keep_error(self);
            return flush(self);
        }
        if (r == 0) { /* the rest of the block, from that line, as str lines for the old way */
            self->rest = rest_lines(data, size - pos);
            return self->rest == NULL ? -1 : flush(self);
        }
        if (newline == NULL)
            break;
        pos += len + 1;
    }
    /* a few lines (the line begun in the block before: an item of its own) wait for the next item's: */
    /* one block a source block for the `.lt` core, not two (~3 us an item: 40k items at 10M) */
    return self->len >= FLUSH_MIN ? flush(self) : 0;
}

/* A `(bytes, start, stop)` item (source.Lines.give_bytes with a `source.Checking` consumer): the whole
 * lines of bytes[start:stop], read where they are (no copy of the block), their bytes not checked by the
 * source -- a block with a NUL or a byte that is not ASCII goes back to it (`reject(item)`), which gives
 * its lines decoded next, or raises the error of its first bad line as every reader does. */
static int translate_raw(Translator *self, PyObject *item) {
    Py_ssize_t start, stop;
    if (PyTuple_GET_SIZE(item) != 3 || !PyBytes_CheckExact(PyTuple_GET_ITEM(item, 0)) ||
        (start = PyLong_AsSsize_t(PyTuple_GET_ITEM(item, 1))) < 0 ||
        (stop = PyLong_AsSsize_t(PyTuple_GET_ITEM(item, 2))) < start ||
        stop > PyBytes_GET_SIZE(PyTuple_GET_ITEM(item, 0))) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "a raw item is (bytes, start, stop) within the bytes");
        return -1;
    }
    int r = translate_block(self, PyBytes_AS_STRING(PyTuple_GET_ITEM(item, 0)) + start, stop - start, 1);
    if (r != 2)
        return r;
    PyObject *done = PyObject_CallOneArg(self->reject, item);
    if (done == NULL)
        return -1;
    Py_DECREF(done);
    return 0;
}

/* One str line (a block that is not all ASCII comes decoded, a line at a time): ASCII translated as in a
 * block; other text translated from its UTF-8 into a str line of its own (LineFilter hands non-ASCII lines
 * to the Python loop, as it does in a `.lt` file). */
static int translate_str(Translator *self, PyObject *line) {
    int r;
    if (PyUnicode_IS_COMPACT_ASCII(line)) {
        const char *data = (const char *)PyUnicode_1BYTE_DATA(line);
        Py_ssize_t n = PyUnicode_GET_LENGTH(line);
        while (n && (data[n - 1] == '\n' || data[n - 1] == '\r'))
            n--;
        Py_ssize_t before = self->len;
        r = one_line(self, data, n, line, NULL);
        if (r > 0 && note_line(self, before, 0) < 0)
            r = -1;
    } else {
        if (flush(self) < 0) /* (the buffer holds this line alone below) */
            return -1;
        Py_ssize_t n;
        const char *data = PyUnicode_AsUTF8AndSize(line, &n);
        if (data == NULL) {
            PyErr_Clear(); /* (a lone surrogate: the reader's to name) */
            r = one_line(self, NULL, 0, line, NULL);
        } else {
            while (n && (data[n - 1] == '\n' || data[n - 1] == '\r'))
                n--;
            utf8_strings = 1;
            int done = translate(self, data, n);
            utf8_strings = 0;
            if (done < 0)
                return -1;
            if (done > 0) {
                self->lineno++;
                PyObject *text = PyUnicode_DecodeUTF8(self->buf, self->len - 1, NULL); /* (its `\n` off) */
                self->len = 0;
                if (text == NULL)
                    return -1;
                r = PyList_Append(self->out, text);
                Py_DECREF(text);
                return r;
            }
            r = one_line(self, NULL, 0, line, NULL);
        }
    }
    if (r < 0) {
        if (PyErr_Occurred())
            keep_error(self);
        return flush(self);
    }
    if (r == 0) {
        self->rest = PyList_New(1);
        if (self->rest == NULL)
            return -1;
        Py_INCREF(line);
        PyList_SET_ITEM(self->rest, 0, line);
    }
    return flush(self);
}

/* -- the type ---------------------------------------------------------------------------------- */

static int Translator_init(Translator *self, PyObject *args, PyObject *kwds) {
    PyObject *lines, *slow, *reject = Py_None;
    int hints = 0;
    static char *kwlist[] = {"lines", "slow", "reject", "hints", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO|Op", kwlist, &lines, &slow, &reject, &hints))
        return -1;
    self->give_hints = hints;
    PyObject *it = PyObject_GetIter(lines);
    if (it == NULL)
        return -1;
    Py_XSETREF(self->lines, it);
    Py_INCREF(slow);
    Py_XSETREF(self->slow, slow);
    if (reject == Py_None)
        reject = NULL;
    Py_XINCREF(reject);
    Py_XSETREF(self->reject, reject);
    Py_XSETREF(self->out, PyList_New(0));
    if (self->out == NULL)
        return -1;
    self->out_pos = 0;
    self->hint = 1 << 16;
    memset(self->next_key, K_COUNT, sizeof(self->next_key));
    self->lineno = 0;
    self->stopped_at = 0;
    return 0;
}

static void Translator_dealloc(Translator *self) {
    PyObject_GC_UnTrack(self);
    Py_CLEAR(self->lines);
    Py_CLEAR(self->slow);
    Py_CLEAR(self->reject);
    Py_CLEAR(self->out);
    Py_CLEAR(self->exc_type);
    Py_CLEAR(self->exc_value);
    Py_CLEAR(self->exc_tb);
    Py_CLEAR(self->rest);
    Py_CLEAR(self->block);
    Py_CLEAR(self->hints);
    PyMem_Free(self->masks);
    self->masks = NULL;
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int Translator_traverse(Translator *self, visitproc visit, void *arg) {
    Py_VISIT(self->lines);
    Py_VISIT(self->slow);
    Py_VISIT(self->reject);
    Py_VISIT(self->out);
    Py_VISIT(self->exc_type);
    Py_VISIT(self->exc_value);
    Py_VISIT(self->exc_tb);
    Py_VISIT(self->rest);
    return 0;
}

static PyObject *Translator_next(Translator *self) {
    for (;;) {
        if (self->out_pos < PyList_GET_SIZE(self->out)) {
            PyObject *item = PyList_GET_ITEM(self->out, self->out_pos);
            Py_INCREF(item);
            if (++self->out_pos == PyList_GET_SIZE(self->out)) {
                if (PyList_SetSlice(self->out, 0, PyList_GET_SIZE(self->out), NULL) < 0) {
                    Py_DECREF(item);
                    return NULL;
                }
                self->out_pos = 0;
            }
            return item;
        }
        if (self->exc_type != NULL) {
            PyErr_Restore(self->exc_type, self->exc_value, self->exc_tb);
            self->exc_type = self->exc_value = self->exc_tb = NULL;
            return NULL;
        }
        if (self->stopped_at)
            return NULL;
        PyObject *item = PyIter_Next(self->lines);
        if (item == NULL) {
            if (self->len == 0) /* (else the lines still in the buffer first, then the error or end) */
                return NULL;
            if (PyErr_Occurred())
                keep_error(self);
            if (flush(self) < 0)
                return NULL;
            continue;
        }
        int r;
        if (PyBytes_CheckExact(item))
            r = translate_block(self, PyBytes_AS_STRING(item), PyBytes_GET_SIZE(item), 0);
        else if (PyTuple_CheckExact(item) && self->reject != NULL)
            r = translate_raw(self, item);
        else if (PyUnicode_Check(item))
            r = translate_str(self, item);
        else {
            PyErr_SetString(PyExc_TypeError, "lines must be str or bytes (or (bytes, start, stop) with reject)");
            r = -1;
        }
        Py_DECREF(item);
        if (r < 0)
            return NULL;
    }
}

static PyObject *Translator_lines_read(Translator *self, PyObject *Py_UNUSED(ignored)) {
    return PyLong_FromLongLong(self->lineno);
}

static PyObject *Translator_ordered_lines(Translator *self, PyObject *Py_UNUSED(ignored)) {
    return PyLong_FromLongLong(self->ordered);
}

static PyObject *Translator_stopped_at(Translator *self, PyObject *Py_UNUSED(ignored)) {
    return PyLong_FromLongLong(self->stopped_at);
}

static PyObject *Translator_rest(Translator *self, PyObject *Py_UNUSED(ignored)) {
    if (self->rest == NULL)
        return PyList_New(0);
    PyObject *rest = self->rest;
    self->rest = NULL;
    return rest;
}

static PyMethodDef Translator_methods[] = {
    {"lines_read", (PyCFunction)Translator_lines_read, METH_NOARGS,
     "The JSON lines translated (or handed to `slow`) so far: a line number."},
    {"ordered_lines", (PyCFunction)Translator_ordered_lines, METH_NOARGS,
     "The lines read the quickest way, as the common lock event in the `.lt` order (_jsonlt_ordered.h)."},
    {"stopped_at", (PyCFunction)Translator_stopped_at, METH_NOARGS,
     "The number of the line `.lt` cannot carry, where the translation stopped (0: none)."},
    {"rest", (PyCFunction)Translator_rest, METH_NOARGS,
     "That line and the rest of its block, as str lines (once; the source iterator holds the rest)."},
    {NULL}};

static PyTypeObject TranslatorType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "lockcheck.engine._jsonlt.Translator",
    .tp_basicsize = sizeof(Translator),
    .tp_dealloc = (destructor)Translator_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "JSON Lines as the `.lt` lines of the same events, line for line (blocks of bytes, str lines).",
    .tp_traverse = (traverseproc)Translator_traverse,
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = (iternextfunc)Translator_next,
    .tp_methods = Translator_methods,
    .tp_init = (initproc)Translator_init,
    .tp_new = PyType_GenericNew,
};

static struct PyModuleDef jsonlt_module = {
    PyModuleDef_HEAD_INIT, "lockcheck.engine._jsonlt",
    "JSON Lines translated to `.lt` lines in C (optional: lockcheck.engine.fast_jsonl runs without it).", -1, NULL};

PyMODINIT_FUNC PyInit__jsonlt(void) {
    for (int k = 0; k < K_COUNT; k++)
        if (strlen(key_names[k]) != key_lens[k]) {
            PyErr_SetString(PyExc_SystemError, "_jsonlt: key_lens does not match key_names");
            return NULL;
        }
    if (grammar_init() < 0)
        return NULL;
    jsonlt_fast_init();
    ordered_init();
    if (PyType_Ready(&TranslatorType) < 0)
        return NULL;
    PyObject *module = PyModule_Create(&jsonlt_module);
    if (module == NULL)
        return NULL;
    Py_INCREF(&TranslatorType);
    if (PyModule_AddObject(module, "Translator", (PyObject *)&TranslatorType) < 0) {
        Py_DECREF(&TranslatorType);
        Py_DECREF(module);
        return NULL;
    }
    /* which instructions the masks are built and counted with here (a test holds the two ways equal) */
    if (PyModule_AddStringConstant(module, "CPU_WAY", jsonlt_cpu_way()) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
