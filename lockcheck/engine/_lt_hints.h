/*
 * The split of each line of a block of `.lt` text, as the JSON Lines translator (lockcheck.engine._jsonlt)
 * wrote it: what the `.lt` core (_speedups.LineFilter) would find again in the text -- the line's end, its
 * task, where its ` ts=` is -- handed to it beside the block (issue 23: the text round trip's splitting
 * was ~120 instructions of each JSON line's extra cost over `.lt`).
 *
 * Shared by both modules, which include it: the layout of the hints `bytes` of a `(block, hints)` item.
 */
#ifndef LOCKCHECK_LT_HINTS_H
#define LOCKCHECK_LT_HINTS_H

#include <stdint.h>

/* One line's split: `len` its bytes (up to its `\n` or the block's end); `task_len` > 0: the line is
 * `TASK TAIL` with a task of that many bytes (no blank in it, not starting a comment), no `"`, tab or
 * `\r` in the line, and its first ` ts=` after `rest_len` bytes of TAIL (all of TAIL: none) -- what
 * apply_line's own split finds; `task_len` 0: none given, the core reads the line's text itself. */
typedef struct {
    int32_t len;
    int32_t task_len;
    int32_t rest_len;
} LineHint;

#endif
