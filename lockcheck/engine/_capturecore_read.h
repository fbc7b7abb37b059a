/*
 * A part of lockcheck/engine/_capturecore.c, which includes its parts in order (each uses what the
 * parts before it define).  This one: reading the lines (`next_line`): str lines, blocks of bytes
 * source.Lines vouched for, and `(bytes, start, stop)` items it did not look at, checked here
 * (`plain_bytes`).
 *
 * Why (issue 23): a block source.Lines hands as `bytes` was copied once (joined to the line the
 * block before ended in) and scanned twice (ASCII, then NUL) in Python's own loops, ~200
 * instructions an ftrace line (callgrind); a `(bytes, start, stop)` item (source.Checking) is read
 * where it is, and its one check here is a 16-byte step where SSE2 is.
 */
#ifndef LOCKCHECK_CAPTURECORE_READ_H
#define LOCKCHECK_CAPTURECORE_READ_H

#include <stdint.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

/* Whether the `n` bytes at `p` are all ASCII and none is NUL (what source._plain_block asks of a block,
 * its length apart: source._unchecked hands no item of MAX_LINE bytes or more). */
static int plain_bytes(const char *p, Py_ssize_t n) {
    Py_ssize_t i = 0;
#ifdef __SSE2__
    __m128i high = _mm_setzero_si128(), nul = _mm_setzero_si128();
    const __m128i zero = _mm_setzero_si128();
    for (; i + 64 <= n; i += 64) {
        __m128i a = _mm_loadu_si128((const __m128i *)(p + i)), b = _mm_loadu_si128((const __m128i *)(p + i + 16)),
                c = _mm_loadu_si128((const __m128i *)(p + i + 32)), d = _mm_loadu_si128((const __m128i *)(p + i + 48));
        high = _mm_or_si128(high, _mm_or_si128(_mm_or_si128(a, b), _mm_or_si128(c, d)));
        /* (a NUL is where the unsigned minimum of the bytes is 0) */
        nul = _mm_or_si128(nul, _mm_cmpeq_epi8(_mm_min_epu8(_mm_min_epu8(a, b), _mm_min_epu8(c, d)), zero));
    }
    if (_mm_movemask_epi8(_mm_or_si128(high, nul)) != 0)
        return 0;
#endif
    unsigned char any_high = 0, any_nul = 0;
    for (; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        any_high |= c;
        any_nul |= c == 0;
    }
    return !(any_high & 0x80) && !any_nul;
}

/* A `(bytes, start, stop)` item taken as the block being split (1), or given back to source.Lines
 * (`reject(item)`: not all ASCII, or a NUL in it) before any of its lines is read (0: its lines come
 * decoded next); -1 error. */
static int take_raw(CaptureFilter *self, PyObject *item) {
    Py_ssize_t start, stop;
    if (PyTuple_GET_SIZE(item) != 3 || !PyBytes_CheckExact(PyTuple_GET_ITEM(item, 0)) ||
        (start = PyLong_AsSsize_t(PyTuple_GET_ITEM(item, 1))) < 0 ||
        (stop = PyLong_AsSsize_t(PyTuple_GET_ITEM(item, 2))) < start ||
        stop > PyBytes_GET_SIZE(PyTuple_GET_ITEM(item, 0)) || self->reject == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "a raw item is (bytes, start, stop) within the bytes, with a reject");
        return -1;
    }
    PyObject *data = PyTuple_GET_ITEM(item, 0);
    if (!plain_bytes(PyBytes_AS_STRING(data) + start, stop - start)) {
        PyObject *done = PyObject_CallOneArg(self->reject, item);
        if (done == NULL)
            return -1;
        Py_DECREF(done);
        return 0;
    }
    Py_XSETREF(self->chunk, Py_NewRef(data));
    self->pos = start;
    self->chunk_end = stop;
    return 1;
}

/* The next line: its text (ASCII, `*n` bytes; `*line` the str when it came as one, else NULL), 1; 0 at
 * the end, -1 error.  A block of bytes (source.Lines.give_bytes: whole ASCII lines joined by `\n`,
 * each with the `\r` of a `\r\n` still on it; or a checked `(bytes, start, stop)` item's span) is split
 * here, a line at a time; any other line comes as a str, whose text is read here only if it is ASCII
 * (else `*text` is NULL). */
static int next_line(CaptureFilter *self, const char **text, Py_ssize_t *n, PyObject **line) {
    *line = NULL;
    while (self->chunk == NULL) {
        PyObject *item = PyIter_Next(self->lines);
        if (item == NULL)
            return PyErr_Occurred() ? -1 : 0;
        if (PyBytes_CheckExact(item)) {
            self->chunk = item;
            self->pos = 0;
            self->chunk_end = PyBytes_GET_SIZE(item);
            break;
        }
        if (PyTuple_CheckExact(item)) {
            int taken = take_raw(self, item);
            Py_DECREF(item);
            if (taken < 0)
                return -1;
            continue;
        }
        *line = item;
        *text = PyUnicode_Check(item) && PyUnicode_IS_ASCII(item) ? (const char *)PyUnicode_DATA(item) : NULL;
        *n = *text != NULL ? PyUnicode_GET_LENGTH(item) : 0;
        return 1;
    }
    const char *data = PyBytes_AS_STRING(self->chunk);
    Py_ssize_t size = self->chunk_end, start = self->pos;
    const char *end = memchr(data + start, '\n', (size_t)(size - start));
    Py_ssize_t stop = end != NULL ? end - data : size;
    *text = data + start;
    *n = stop - start;
    if (*n && (*text)[*n - 1] == '\r')
        (*n)--; /* (a `\r\n` ending, as the decoded lines drop it) */
    if (end != NULL) {
        self->pos = stop + 1;
    } else {
        /* the block's last line: its text stays valid while `held` keeps the block */
        Py_XSETREF(self->held_chunk, self->chunk);
        self->chunk = NULL;
    }
    return 1;
}

#endif
