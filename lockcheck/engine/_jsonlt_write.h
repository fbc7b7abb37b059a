/*
 * lockcheck.engine._jsonlt's writing of one event: whether the values read from a JSON line are an event
 * the `.lt` format carries as the JSON Lines reader reads it, and its `.lt` line as lt_write.format_event
 * writes it.
 *
 * Why apart: _jsonlt.c is split by job (no module over 600 lines); included by it alone, after the
 * Translator type and its output buffer.
 */

#ifndef LOCKCHECK_JSONLT_WRITE_H
#define LOCKCHECK_JSONLT_WRITE_H

/* -- what the `.lt` format writes bare ------------------------------------------------------- */

/* A class name or site written bare (events.quote_token leaves it as it is); `at_ok`: `@` allowed. */
static ALWAYS_INLINE int bare_name(const Value *v) {
    if (v->kind != J_STR || v->n == 0 || v->p[0] == '#')
        return 0;
    if (v->plain)
        return 1;
    if (clean_limit != NULL)
        return !clean_has_any3(v->p, v->n, clean_limit, ' ', '@', '=');
    for (Py_ssize_t i = 0; i < v->n; i++) {
        char c = v->p[i];
        if (c == ' ' || c == '@' || c == '=')
            return 0; /* (quotes, tabs and backslashes never reach here) */
    }
    return 1;
}

/* A task or an instance: a non-empty token without blanks (a task not starting a comment). */
static ALWAYS_INLINE int bare_token(const Value *v, int task) {
    if (v->kind != J_STR || v->n == 0 || (task && v->p[0] == '#'))
        return 0;
    if (v->plain)
        return 1;
    if (clean_limit != NULL)
        return !clean_has_any3(v->p, v->n, clean_limit, ' ', ' ', ' ');
    return memchr(v->p, ' ', (size_t)v->n) == NULL;
}

/* whether key `k` was given a value other than null (`have`, read_object's) */
#define given(have, values, k) (((have) >> (k)) & 1u)

static inline int str_is(const Value *v, const char *word) {
    return v->kind == J_STR && (Py_ssize_t)strlen(word) == v->n && memcmp(v->p, word, v->n) == 0;
}

/* whether a string is `word`, a literal (compared inline) */
#define STR_IS(v, word) ((v)->kind == J_STR && (v)->n == sizeof(word) - 1 && memcmp((v)->p, word, sizeof(word) - 1) == 0)

/* The ops translated here: lock ops (with a lock), irq-state ops and exit (without). */
enum { OP_LOCK = 1, OP_SITE = 2, OP_ACQUIRE = 4 };
static const struct {
    const char *name;
    int flags;
} ops[] = {{"acquire", OP_LOCK | OP_SITE | OP_ACQUIRE}, {"release", OP_LOCK | OP_SITE}, {"contended", OP_LOCK | OP_SITE},
           {"acquired", OP_LOCK}, {"hardirq-enter", 0}, {"hardirq-exit", 0}, {"softirq-enter", 0},
           {"softirq-exit", 0}, {"irqs-on", OP_SITE}, {"irqs-off", OP_SITE}, {"softirqs-on", OP_SITE},
           {"softirqs-off", OP_SITE}, {"exit", 0}, {NULL, 0}};

/* An op's index in `ops` (-1: none translated here): acquire and release, most lines' ops, first. */
static inline int op_index(const Value *v) {
    if (STR_IS(v, "acquire"))
        return 0;
    if (STR_IS(v, "release"))
        return 1;
    for (int i = 2; ops[i].name != NULL; i++)
        if (str_is(v, ops[i].name))
            return i;
    return -1;
}



static int put(Translator *self, const char *p, Py_ssize_t n) {
    if (buf_reserve(self, n) < 0)
        return -1;
    memcpy(self->buf + self->len, p, (size_t)n);
    self->len += n;
    return 0;
}


/* The `.lt` line of the event whose members are `values` (`seen`, `have`, `nest_parts`: read_object's;
 * `n`: the length of its JSON line, a bound of its `.lt` line's), appended to the buffer with its `\n`:
 * 1 written, 0 not a line translated here (nothing written), -1 error.  Accepts only what the JSON Lines
 * reader accepts, as the event lt_write.format_event writes: tests/test_jsonl_translate.py holds the two
 * together. */
static int write_event(Translator *self, Value *values, unsigned seen, unsigned have, Value *nest_parts,
                       Py_ssize_t n) {
    if (!given(have, values, K_TASK) || !bare_token(&values[K_TASK], 1) || !given(have, values, K_OP))
        return 0;
    int op_i = op_index(&values[K_OP]);
    if (op_i < 0)
        return 0;
    int flags = ops[op_i].flags;
    int acquire = flags & OP_ACQUIRE;
    /* the lock and instance: a lock op's, no other op's */
    if (flags & OP_LOCK) {
        if (!given(have, values, K_LOCK) || !bare_name(&values[K_LOCK]))
            return 0;
        if (given(have, values, K_INSTANCE) && !bare_token(&values[K_INSTANCE], 0))
            return 0;
    } else if (given(have, values, K_LOCK) || given(have, values, K_INSTANCE)) {
        return 0;
    }
    /* acquire's options; on another op only their defaults (the reader's error otherwise) */
    const char *mode = NULL;
    if (given(have, values, K_MODE)) {
        const Value *v = &values[K_MODE];
        if (STR_IS(v, "read") || STR_IS(v, "rread")) {
            if (!acquire)
                return 0;
            mode = STR_IS(v, "read") ? "r" : "rr";
        } else if (!STR_IS(v, "write")) {
            return 0;
        }
    }
    int trylock = 0;
    if (given(have, values, K_TRY)) {
        if (values[K_TRY].kind == J_TRUE && acquire)
            trylock = 1;
        else if (values[K_TRY].kind != J_FALSE)
            return 0;
    }
    char subclass = '0';
    if (given(have, values, K_SUBCLASS)) {
        const Value *v = &values[K_SUBCLASS];
        if (v->kind != J_NUM || v->n != 1 || !subclass_digit_ok(v->p[0], acquire))
            return 0;
        subclass = v->p[0];
    }
    const Value *nest = NULL, *nest_instance = NULL;
    if (given(have, values, K_NEST)) {
        nest = &values[K_NEST];
        if (!acquire)
            return 0;
        if (nest->kind == J_OBJ) {
            /* {"lock": CLASS, "instance": INSTANCE or null}: `nest=CLASS[@INSTANCE]` */
            nest = &nest_parts[0];
            if (!bare_name(nest))
                return 0;
            if (nest_parts[1].kind != J_NULL) {
                nest_instance = &nest_parts[1];
                if (!bare_token(nest_instance, 0))
                    return 0;
            }
        } else {
            if (nest->kind != J_STR || nest->n == 0 || nest->p[0] == '#')
                return 0;
            /* CLASS or CLASS@INSTANCE: one `@` at most (the reader splits at the last, `.lt` at the first) */
            const char *at_sign = memchr(nest->p, '@', (size_t)nest->n);
            Py_ssize_t class_len = at_sign ? at_sign - nest->p : nest->n;
            if (class_len == 0 || (at_sign && (class_len == nest->n - 1 ||
                                                memchr(at_sign + 1, '@', (size_t)(nest->n - class_len - 1)))))
                return 0;
            for (Py_ssize_t i = 0; i < nest->n; i++)
                if (nest->p[i] == ' ' || (i < class_len && nest->p[i] == '='))
                    return 0;
        }
    }
    int nocheck = 0;
    if (given(have, values, K_NOCHECK) && given(have, values, K_CHECK))
        return 0;
    if (given(have, values, K_NOCHECK) || given(have, values, K_CHECK)) {
        int k = given(have, values, K_NOCHECK) ? K_NOCHECK : K_CHECK;
        int kind = values[k].kind;
        if (kind != J_TRUE && kind != J_FALSE)
            return 0;
        nocheck = (k == K_NOCHECK) == (kind == J_TRUE);
        if (nocheck && !acquire)
            return 0;
    }
    if ((seen & (1u << K_NOCHECK)) && (seen & (1u << K_CHECK)))
        return 0; /* (one of them null: the reader's own words on it) */
    if (given(have, values, K_AT) && (!(flags & OP_SITE) || !bare_name(&values[K_AT])))
        return 0;
    if (given(have, values, K_TS)) {
        const Value *v = &values[K_TS];
        if (v->kind != J_NUM || v->p[0] == '-' || !ts_chars_ok(v->n))
            return 0; /* (-0 is 0.0 to the reader, -0.0 to `.lt`: negative time stamps go the slow way) */
    }
    if (given(have, values, K_CPU)) {
        const Value *v = &values[K_CPU];
        if (v->kind != J_NUM || !v->integer || v->p[0] == '-' || !cpu_digits_ok(v->n))
            return 0;
    }
    /* -- the line, in lt_write.format_event's order ---------------------------------------- */
    /* (room for all of it at once: its values are parts of the line, each literal is at most 16 bytes,
     * and a copy writes at most 15 bytes past its end) */
    if (buf_reserve(self, n + 16 * 16) < 0)
        return -1;
    char *w = self->buf + self->len;
    char *const line = w, *ts_at = NULL;
#define W(p, n) (w = copy_to(w, (p), (n), clean_limit))
#define WS(s) (memcpy(w, (s), sizeof(s) - 1), w += sizeof(s) - 1)
    W(values[K_TASK].p, values[K_TASK].n);
    WS(" ");
    W(values[K_OP].p, values[K_OP].n);
    if (flags & OP_LOCK) {
        WS(" ");
        W(values[K_LOCK].p, values[K_LOCK].n);
        if (given(have, values, K_INSTANCE)) {
            WS("@");
            W(values[K_INSTANCE].p, values[K_INSTANCE].n);
        }
    }
    if (mode != NULL) {
        if (mode[1])
            WS(" rread");
        else
            WS(" read");
    }
    if (trylock)
        WS(" try");
    if (subclass != '0') {
        WS(" subclass=");
        *w++ = subclass;
    }
    if (nest != NULL) {
        WS(" nest=");
        W(nest->p, nest->n);
        if (nest_instance != NULL) {
            WS("@");
            W(nest_instance->p, nest_instance->n);
        }
    }
    if (nocheck)
        WS(" nocheck");
    if (given(have, values, K_AT)) {
        WS(" at=");
        W(values[K_AT].p, values[K_AT].n);
    }
    if (given(have, values, K_TS)) {
        ts_at = w;
        WS(" ts=");
        W(values[K_TS].p, values[K_TS].n);
    }
    if (given(have, values, K_CPU)) {
        WS(" cpu=");
        W(values[K_CPU].p, values[K_CPU].n);
    }
    /* the split the `.lt` core would find (_lt_hints.h; translate_block hands it on for a clean line) */
    Py_ssize_t task_len = values[K_TASK].n, tail_len = (w - line) - task_len - 1;
    self->hint_task = (int32_t)task_len;
    self->hint_rest = (int32_t)(ts_at != NULL ? (ts_at - line) - task_len - 1 : tail_len);
    WS("\n");
#undef W
#undef WS
    self->len = w - self->buf;
    return 1;
}

/* The `.lt` line of one JSON line (read by the general reader): as write_event. */
static int translate(Translator *self, const char *data, Py_ssize_t n) {
    Value values[K_COUNT], nest_parts[2];
    unsigned seen, have;
    if (!read_object(data, data + n, values, &seen, &have, nest_parts))
        return 0;
    return write_event(self, values, seen, have, nest_parts, n);
}

#endif
