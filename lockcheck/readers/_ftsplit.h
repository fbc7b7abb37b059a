/* How the ftrace reader's scanner splits a capture line into its pieces (head, flags, time stamp,
 * text) and tests its time stamp: `scan_pure`'s split, written once in C for the two compiled
 * readers of it -- `_ftscan.c` (lockcheck.readers.ftrace_scan) and the capture fast path's filter
 * (lockcheck/engine/_capturecore.c). */
#ifndef LOCKCHECK_FTSPLIT_H
#define LOCKCHECK_FTSPLIT_H

#include <Python.h>
#include <string.h>

/* Where the pieces of an ASCII line are, split as `scan_pure` splits it:
 *   head text   [0, end)            (line.find("] "))
 *   flags text  [from, blank)       (stamp.lstrip(" ").rpartition(" ")[0]; empty when blank < from)
 *   time stamp  [ts_start, colon)
 *   text        [colon + 2, n)      (after the first ": " that follows the head)
 * 0 when the line has no such pieces. */
typedef struct {
    Py_ssize_t end, from, blank, ts_start, colon, n;
} Pieces;

/* the head, the colon and the flags' start of split_pieces (`blank` and `ts_start` not set) */
static inline int
split_pieces_head(const char *text, Py_ssize_t n, Pieces *at)
{
    at->n = n;
    at->end = -1;
    for (const char *p = text; (p = memchr(p, ']', text + n - p)) != NULL; p++) {
        if (p + 1 < text + n && p[1] == ' ') {
            at->end = p - text;
            break;
        }
    }
    if (at->end < 0)
        return 0;
    at->colon = -1;
    for (const char *p = text + at->end + 2; p + 1 < text + n && (p = memchr(p, ':', text + n - 1 - p)) != NULL; p++) {
        if (p[1] == ' ') {
            at->colon = p - text;
            break;
        }
    }
    if (at->colon < 0)
        return 0;
    at->from = at->end + 2;
    while (at->from < at->colon && text[at->from] == ' ')
        at->from++;
    return 1;
}

static inline int
split_pieces(const char *text, Py_ssize_t n, Pieces *at)
{
    if (!split_pieces_head(text, n, at))
        return 0;
    at->blank = at->colon - 1;
    while (at->blank >= at->from && text[at->blank] != ' ')
        at->blank--;
    at->ts_start = at->blank >= at->from ? at->blank + 1 : at->from;
    return 1;
}

/* split_pieces, then stamp_ok of the time stamp, in one: the last blank before the colon looked for
 * and the stamp's bytes tested in the same pass back from the colon (a byte that is neither a digit
 * nor a point nor a blank fails the stamp, wherever the blank is).  1: split, a stamp scan takes. */
static inline int
split_stamped(const char *text, Py_ssize_t n, Pieces *at)
{
    if (!split_pieces_head(text, n, at))
        return 0;
    Py_ssize_t i = at->colon - 1, points = 0;
    for (; i >= at->from; i--) {
        char c = text[i];
        if (c == ' ')
            break;
        if (c == '.')
            points++;
        else if (c < '0' || c > '9')
            return 0;
    }
    at->blank = i;
    at->ts_start = i + 1;
    return at->ts_start < at->colon && points <= 1 && text[at->ts_start] != '.' && text[at->colon - 1] != '.';
}

/* `scan_pure`'s time stamp test: ASCII digits with at most one point, neither first nor last */
static inline int
stamp_ok(const char *text, Py_ssize_t start, Py_ssize_t end)
{
    Py_ssize_t points = 0;
    if (start >= end || text[start] == '.' || text[end - 1] == '.')
        return 0;
    for (Py_ssize_t i = start; i < end; i++) {
        char c = text[i];
        if (c == '.') {
            if (++points > 1)
                return 0;
        }
        else if (c < '0' || c > '9')
            return 0;
    }
    return 1;
}

#endif
