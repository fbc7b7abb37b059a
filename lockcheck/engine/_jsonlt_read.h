/*
 * lockcheck.engine._jsonlt's reading of one flat JSON object: its members' values (strings, numbers,
 * literals, a `nest` object), any line's, by the general reader (a block's clean lines are read by
 * _jsonlt_fast.h first; a line it does not take comes here).
 *
 * Why apart: _jsonlt.c is split by job (no module over 600 lines); included by it alone.
 */

#ifndef LOCKCHECK_JSONLT_READ_H
#define LOCKCHECK_JSONLT_READ_H

/* -- reading one flat JSON object ------------------------------------------------------------- */

/* whether strings may hold UTF-8 (a str line being translated); set around translate() */
static int utf8_strings = 0;

/* set around translate() of a clean line (_jsonlt_scan.h): up to where its bytes may be read */
static const char *clean_limit = NULL;

static ALWAYS_INLINE const char *read_string(const char *p, const char *end, Value *v) {
    if (clean_limit != NULL) {
        const char *after = clean_string_end(p, end, clean_limit);
        if (after != NULL) {
            v->kind = J_STR;
            v->p = p + 1;
            v->n = after - p - 2;
            v->plain = 0;
        }
        return after;
    }
    return read_string_utf8(p, end, v, utf8_strings);
}

/* A number as RFC 8259 writes it: its end, or NULL. */
static const char *read_number(const char *p, const char *end, Value *v) {
    const char *start = p;
    if (p < end && *p == '-')
        p++;
    if (p >= end || *p < '0' || *p > '9')
        return NULL;
    if (*p == '0')
        p++;
    else
        while (p < end && *p >= '0' && *p <= '9')
            p++;
    v->integer = 1;
    if (p < end && *p == '.') {
        p++;
        if (p >= end || *p < '0' || *p > '9')
            return NULL;
        while (p < end && *p >= '0' && *p <= '9')
            p++;
        v->integer = 0;
    }
    if (p < end && (*p == 'e' || *p == 'E'))
        return NULL; /* (an exponent: left to the reader, which knows when it overflows) */
    v->kind = J_NUM;
    v->p = start;
    v->n = p - start;
    return p;
}

static const char *read_literal(const char *p, const char *end, const char *word, int kind, Value *v) {
    size_t n = strlen(word);
    if ((size_t)(end - p) < n || memcmp(p, word, n) != 0)
        return NULL;
    v->kind = kind;
    return p + n;
}

/* `nest` as an object, `{"lock": CLASS, "instance": INSTANCE}`: each key at most once, a string or
 * null each (`nest[0]`, `nest[1]`, J_NULL when not given): its end, or NULL. */
static const char *read_nest(const char *p, const char *end, Value *v, Value *nest) {
    nest[0].kind = nest[1].kind = J_NULL;
    int seen = 0;
    p = skip_ws(p + 1, end);
    if (p < end && *p == '}')
        return NULL; /* (no lock: the reader's error) */
    for (;;) {
        Value key;
        if (p >= end || *p != '"' || (p = read_string(p, end, &key)) == NULL)
            return NULL;
        int k = key.n == 4 && memcmp(key.p, "lock", 4) == 0 ? 0 : key.n == 8 && memcmp(key.p, "instance", 8) == 0 ? 1 : -1;
        if (k < 0 || seen & (1 << k))
            return NULL;
        seen |= 1 << k;
        p = skip_ws(p, end);
        if (p >= end || *p != ':')
            return NULL;
        p = skip_ws(p + 1, end);
        if (p < end && *p == '"')
            p = read_string(p, end, &nest[k]);
        else if (p < end && *p == 'n')
            p = read_literal(p, end, "null", J_NULL, &nest[k]);
        else
            return NULL;
        if (p == NULL)
            return NULL;
        p = skip_ws(p, end);
        if (p < end && *p == ',') {
            p = skip_ws(p + 1, end);
            continue;
        }
        if (p < end && *p == '}')
            break;
        return NULL;
    }
    v->kind = J_OBJ;
    return p + 1;
}


/* The values of a flat object (`values[key]`, `seen` bits, `have` those of the keys not null; `nest`
 * the parts of a `nest` object); 0: not a line read here. */
static int read_object(const char *p, const char *end, Value *values, unsigned *seen, unsigned *have, Value *nest) {
    *seen = *have = 0;
    if (p >= end || *p != '{')
        return 0;
    p = skip_ws(p + 1, end);
    if (p < end && *p == '}') {
        p++;
    } else {
        for (;;) {
            if (p >= end || *p != '"')
                return 0;
            const char *after;
            int k = clean_limit != NULL && p + 10 <= clean_limit ? clean_key(p + 1, end, &after) : K_COUNT;
            if (k != K_COUNT) {
                p = after;
            } else {
                Value key;
                p = read_string(p, end, &key);
                if (p == NULL)
                    return 0;
                k = key_index(key.p, key.n);
            }
            if (k == K_COUNT || *seen & (1u << k))
                return 0; /* an unknown key (maybe the reader's error), a repeated one */
            /* (the usual `": "` and `", "` taken without a call: skip_ws for anything else) */
            if (p >= end || *p != ':') {
                p = skip_ws(p, end);
                if (p >= end || *p != ':')
                    return 0;
            }
            if (p + 2 < end && p[1] == ' ' && p[2] != ' ' && p[2] != '\t')
                p += 2;
            else
                p = skip_ws(p + 1, end);
            if (p >= end)
                return 0;
            Value *v = &values[k];
            switch (*p) {
            case '"': p = read_string(p, end, v); break;
            case 't': p = read_literal(p, end, "true", J_TRUE, v); break;
            case 'f': p = read_literal(p, end, "false", J_FALSE, v); break;
            case 'n': p = read_literal(p, end, "null", J_NULL, v); break;
            case '{': p = k == K_NEST ? read_nest(p, end, v, nest) : NULL; break;
            default: p = read_number(p, end, v); break;
            }
            if (p == NULL)
                return 0;
            *seen |= 1u << k;
            if (v->kind != J_NULL)
                *have |= 1u << k;
            if (p < end && *p == ',' && p + 2 < end && p[1] == ' ' && p[2] == '"') {
                p += 2;
                continue;
            }
            p = skip_ws(p, end);
            if (p < end && *p == ',') {
                p = skip_ws(p + 1, end);
                continue;
            }
            if (p < end && *p == '}') {
                p++;
                break;
            }
            return 0;
        }
    }
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\r'))
        p++;
    return p == end;
}

#endif
