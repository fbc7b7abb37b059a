/*
 * One line applied: its task's view found (find_view, _lt_views.h), the plain release
 * of the top recognised by its text, the text after the task read, and the line handed to the
 * acquire, release, contention or irq path, or passed on.  A unit: the dispatch, the one caller
 * of every other path.  Relies on all the other _lt_*.h.
 *
 * Part of the `.lt` core (_speedups.c), which includes it with the other _lt_*.h in one translation
 * unit: its static functions stay where the compiler can inline them, as when they were one file.
 */
#ifndef LOCKCHECK_LT_LINE_H
#define LOCKCHECK_LT_LINE_H

#include "_lt_state.h"
#include "_lt_slots.h"
#include "_lt_stack.h"
#include "_lt_tail.h"
#include "_lt_overlay.h"
#include "_lt_acquire.h"
#include "_lt_irq.h"
#include "_lt_release.h"
#include "_lt_contention.h"
#include "_lt_views.h"

/* The first ` ts=` in the `n` bytes at `p`, or NULL.  Where SSE2 is, 16 places a step are asked
 * whether a blank and a `t` start there (the step's two loads end inside the span: the last step
 * the one ending at its end, overlapping the step before, whose places held no ` ts=`), and only
 * those are read further: where a find_byte call per blank and a compare were (~60 instructions
 * a `.lt` line, most of whose blanks start no stamp). */
static inline const char *find_stamp(const char *p, Py_ssize_t n) {
    Py_ssize_t i = 0;
#ifdef __SSE2__
    if (n >= 17) {
        const __m128i blank = _mm_set1_epi8(' '), t = _mm_set1_epi8('t');
        const Py_ssize_t last = n - 17;
        for (;;) {
            if (i > last)
                i = last;
            unsigned hits = (unsigned)_mm_movemask_epi8(
                _mm_and_si128(_mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(p + i)), blank),
                              _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(p + i + 1)), t)));
            for (; hits; hits &= hits - 1) {
                Py_ssize_t at = i + __builtin_ctz(hits);
                if (n - at >= 4 && p[at + 2] == 's' && p[at + 3] == '=')
                    return p + at;
            }
            if (i == last)
                return NULL;
            i += 16;
        }
    }
#endif
    for (; i + 4 <= n; i++)
        if (p[i] == ' ' && memcmp(p + i, " ts=", 4) == 0)
            return p + i;
    return NULL;
}

/* Apply one line if it is one the filter takes: 1 applied, 0 passed on, -1 error.
 * `data`/`n`: the ASCII line without its line ending; `line`: that line as a str when there is
 * one (of `n` characters, or with its line ending), NULL when it comes from a block of bytes.
 * `task_len` < 0: the line is split here (its task, the text after it up to its first ` ts=`);
 * else it is split already: its task the `task_len` bytes at `data` (> 0, a blank after them,
 * none in them), the text after it read up to its first ` ts=`, `rest_len` bytes (all of it:
 * none) -- the split the JSON Lines translator wrote the line with (_lt_hints.h), which must be
 * this one's (tests/test_jsonl_hints.py holds them together).  One function for both: apart,
 * the text path paid a call and the compiler's other inlining (~30-50 instructions a `.lt` line). */
static int apply_split(LineFilter *self, PyObject *line, const char *data, Py_ssize_t n, Py_ssize_t task_len,
                       Py_ssize_t rest_len) {
    if (task_len < 0) {
        const char *space = find_byte(data, n, ' ');
        if (space == NULL || space == data)
            return 0;
        task_len = space - data;
        const char *tail = space + 1;
        Py_ssize_t tail_len = n - (tail - data);
        /* time stamps make lines unique: the rest is what is read */
        const char *stamp = find_stamp(tail, tail_len);
        rest_len = stamp != NULL ? stamp - tail : tail_len;
    }
    PyObject *view = find_view(self, data, task_len); /* borrowed */
    if (view == NULL)
        return PyErr_Occurred() ? -1 : 0;
    if (view == Py_None)
        return 1; /* another part's task (lockcheck.jobs): its line is not this checker's */
    PyObject *task = PyTuple_GET_ITEM(view, V_TASK);
    PyObject *held = PyTuple_GET_ITEM(view, V_HELD);
    const char *tail = data + task_len + 1;
    Py_ssize_t tail_len = n - task_len - 1;
    const char *stamp = rest_len < tail_len ? tail + rest_len + 4 : NULL;
    Py_ssize_t depth = PyList_GET_SIZE(held);
    PyObject *top = depth ? PyList_GET_ITEM(held, depth - 1) : NULL;
    long cpu = -1;
    Overlay *ov = overlay_find(self, held, task, 0);
    /* an overlay with no entries may still hold a chain key and cpu its pops left: they become
     * the task's (overlay_flush) only on a path that reads or sets the task's own -- the plain
     * release of the list's top below, a line not an acquisition, an acquisition not pushed onto
     * the overlay (apply_acquire); an acquisition pushed there reads them where they are (was
     * a flush -- an int made, two slots set, the key read back -- on most lines of a task
     * whose pushes were all popped: ~60 instructions a line) */
    if (ov != NULL && ov->n) {
        /* the plain release of the overlay's top entry, recognised by its text; anything else of
         * this task sees the held list (below) */
        if (overlay_releases(ov, tail, rest_len)) {
            if (stamp != NULL) {
                int ok = read_stamp(stamp, tail_len - rest_len - 4, 0, 1, &cpu);
                if (ok <= 0)
                    return ok;
            }
            overlay_pop(ov, cpu);
            self->events++;
            return 1;
        }
        top = NULL; /* (not the list's: the overlay's) */
    } else if (top != NULL && PyTuple_CheckExact(top) && str_is(PyTuple_GET_ITEM(top, E_RELEASE), tail, rest_len)) {
        PyObject *references = PyTuple_GET_ITEM(top, E_REFERENCES);
        if (references == small_ints[0] || (PyLong_Check(references) && as_long(references) == 0)) {
            /* the plain release of the innermost lock, recognised by its text */
            if (stamp != NULL) {
                int ok = read_stamp(stamp, tail_len - rest_len - 4, 0, 1, &cpu);
                if (ok <= 0)
                    return ok;
            }
            if ((overlay_dirty(ov) && overlay_flush(self, ov) < 0) || pop_entry(task, held, top) < 0 ||
                set_cpu(task, cpu) < 0)
                return -1;
            self->events++;
            return 1;
        }
    }
    Tail t; /* (read_tail sets what is read of it; on the tails path only kind and seen are) */
    t.kind = 0;
    t.seen = 0;
    t.slot = NULL;
    PyObject *info = NULL;
    int read = read_tail(self, tail, rest_len, &t);
    if (read < 0)
        return -1;
    if (t.kind != 0) {
        /* a lock op (read_tail knew its word, if not the rest: a class new to the graph, a nest
         * lock...), which the Python side applies to this task alone if it is passed on */
        self->pass_local = 1;
        self->pass_held = held;
    }
    if (read == 0) {
        /* a shape not read here: what the Python loop's _scan_tail read of it, if it did */
        info = rest_info(self, tail, rest_len); /* borrowed */
        if (info == NULL)
            return PyErr_Occurred() ? -1 : 0;
        t.kind = (int)as_long(PyTuple_GET_ITEM(info, I_KIND));
        t.seen = as_long(PyTuple_GET_ITEM(info, I_SEEN));
    }
    if (stamp != NULL) {
        int ok = read_stamp(stamp, tail_len - rest_len - 4, t.seen, 1, &cpu); /* every fast op takes cpu= */
        if (ok <= 0)
            return ok;
    } else if (info != NULL) {
        PyObject *given = PyTuple_GET_ITEM(info, I_CPU);
        if (given != Py_None)
            cpu = as_long(given);
    }
    /* a lock or irq op of this task from here on: if it is passed on, the Python loop and the
     * checker apply it to this task alone (lockdep's ops that look at other tasks -- lost events,
     * runs, directives -- are no line read here) */
    self->pass_local = 1;
    self->pass_held = held;
    if (t.kind == K_RELEASE && ov != NULL && ov->n) {
        /* release_innermost of the overlay's top entry, its options given (`at=`, a stamp): the
         * entry's release text is `release ` and the line's lock field */
        const OvEntry *e = &ov->entries[ov->n - 1];
        const char *top_field = ov->text + e->field_off;
        int same;
        if (info == NULL) {
            same = t.field_len == e->field_len && bytes_eq(t.field, top_field, e->field_len);
        } else {
            PyObject *release = PyTuple_GET_ITEM(info, I_RELEASE);
            same = PyUnicode_Check(release) && PyUnicode_IS_COMPACT_ASCII(release) &&
                   PyUnicode_GET_LENGTH(release) == 8 + e->field_len &&
                   memcmp(PyUnicode_1BYTE_DATA(release), "release ", 8) == 0 &&
                   memcmp(PyUnicode_1BYTE_DATA(release) + 8, top_field, (size_t)e->field_len) == 0;
        }
        if (same) {
            overlay_pop(ov, cpu);
            self->events++;
            return 1;
        }
    }
    if (t.kind == K_RELEASE && info == NULL && ov != NULL && ov->n && self->quick) {
        /* a release below the overlay's top, of one of its entries (release_below, there) */
        int r = overlay_release_below(self, view, ov, cpu, &t);
        if (r != 0)
            return r;
    }
    if (t.kind == K_STATS && info == NULL && ov != NULL && ov->n) {
        /* contended/acquired of a task with pushes in the overlay: applied there when it would be
         * on the held list (apply_contention), else on the held list as the tuple path has it */
        int r = overlay_contention(self, ov, cpu, &t);
        if (r != 0)
            return r;
    }
    if (t.kind != K_ACQUIRE && overlay_dirty(ov)) {
        /* not the overlay's: on the held list as the tuple path has it */
        if (overlay_flush(self, ov) < 0)
            return -1;
        depth = PyList_GET_SIZE(held);
        top = depth ? PyList_GET_ITEM(held, depth - 1) : NULL;
    }
    if (t.kind == K_STATS)
        return apply_contention(self, view, task, held, cpu, info, &t);
    if (t.kind == K_RELEASE)
        return apply_release(self, view, task, held, top, cpu, info, &t);
    if (t.kind == K_EXIT) {
        /* Checker._op_exit of a task holding nothing: nothing to report */
        if (top != NULL)
            return 0;
        if (set_cpu(task, cpu) < 0)
            return -1;
        self->events++;
        return 1;
    }
    if (t.kind == K_IRQ)
        return apply_irq(self, line, data, n, view, held, cpu, PyTuple_GET_ITEM(info, I_OP));
    if (t.kind != K_ACQUIRE)
        return 0;
    Acquire a; /* (each path below sets the rest) */
    a.release = a.lock = a.instance = NULL;
    a.slot = NULL;
    a.info = info;
    a.owned[0] = a.owned[1] = a.owned[2] = NULL;
    if (info != NULL) {
        a.release = PyTuple_GET_ITEM(info, I_RELEASE);
        a.cls = PyTuple_GET_ITEM(info, I_CLS);
        a.lock = PyTuple_GET_ITEM(info, I_LOCK);
        a.instance = PyTuple_GET_ITEM(info, I_INSTANCE);
        a.read = PyTuple_GET_ITEM(info, I_READ);
        a.trylock = PyTuple_GET_ITEM(info, I_TRYLOCK) == Py_True;
        a.subclass = PyTuple_GET_ITEM(info, I_SUBCLASS);
        a.nest = PyTuple_GET_ITEM(info, I_NEST);
        a.node = PyTuple_GET_ITEM(info, I_NODE);
    } else {
        a.cls = t.cls;
        a.read = small_ints[t.read];
        a.trylock = t.trylock;
        a.subclass = small_ints[0];
        a.nest = Py_None;
        a.node = t.node;
        a.slot = t.slot;
    }
    int r = apply_acquire(self, line, data, n, view, held, top, cpu, &a, &t, ov);
    acquire_clear(&a);
    return r;
}

/* apply_split of a line it splits itself (a `.lt` line's text). */
static inline int apply_line(LineFilter *self, PyObject *line, const char *data, Py_ssize_t n) {
    return apply_split(self, line, data, n, -1, 0);
}

#endif
