/*
 * A part of the compiled cores (_jsonlt.c through _jsonlt_keys.h, _speedups.c): the grammar limits of
 * lockcheck's readers, read from Python at import.
 */
#ifndef LOCKCHECK_GRAMMAR_LIMITS_H
#define LOCKCHECK_GRAMMAR_LIMITS_H

/* The readers' grammar limits the compiled cores apply, each read from the Python grammar when a core's
 * module is imported (grammar_init), so each is written once, in Python: the JSON Lines translator's two
 * ways of writing a line (ordered_line, write_event) and the `.lt` core's reading of a stamp
 * (_lt_tail.h) ask the checks below:
 *  - the highest subclass digit a translated line may carry, '0' + lockcheck.events.MAX_SUBCLASS (a
 *    value a single digit can't say leaves the larger subclasses to the general reader, which knows the
 *    limit itself);
 *  - the most digits of a `cpu`, lockcheck.events.MAX_CPU_DIGITS (the JSON Lines and `.lt` readers');
 *  - the most characters of a `ts`, lockcheck.readers.lt.MAX_SECONDS_CHARS: the `ts=` text written is
 *    the JSON number's, which the `.lt` reader must take.
 * A line past a limit is the general reader's: its own error, or its event as format_event writes it. */
static char subclass_top = '0';
static Py_ssize_t cpu_digits_max = 0, ts_chars_max = 0;

/* Whether DIGIT may be a line's `subclass` (a release, and any other op but an acquisition, takes only 0). */
static inline int subclass_digit_ok(char digit, int acquire) {
    return digit >= '0' && digit <= subclass_top && (acquire || digit == '0');
}

/* Whether a `cpu` of N digits, a `ts` of N characters, may be translated. */
static inline int cpu_digits_ok(Py_ssize_t n) {
    return n <= cpu_digits_max;
}
static inline int ts_chars_ok(Py_ssize_t n) {
    return n <= ts_chars_max;
}

/* The int MODULE.NAME (-1 with an exception set; a negative value is refused). */
static long grammar_number(const char *module, const char *name) {
    PyObject *m = PyImport_ImportModule(module);
    if (m == NULL)
        return -1;
    PyObject *value = PyObject_GetAttrString(m, name);
    Py_DECREF(m);
    if (value == NULL)
        return -1;
    long n = PyLong_AsLong(value);
    Py_DECREF(value);
    if (n < 0 && !PyErr_Occurred())
        PyErr_Format(PyExc_ValueError, "lockcheck: %s.%s is negative", module, name);
    return n;
}

/* The limits above from the Python grammar (0 on success, -1 with an exception set). */
static int grammar_init(void) {
    long subclass = grammar_number("lockcheck.events", "MAX_SUBCLASS");
    if (subclass < 0)
        return -1;
    subclass_top = (char)('0' + (subclass > 9 ? 9 : subclass));
    long cpu = grammar_number("lockcheck.events", "MAX_CPU_DIGITS");
    if (cpu < 0)
        return -1;
    cpu_digits_max = (Py_ssize_t)cpu;
    long ts = grammar_number("lockcheck.readers.lt", "MAX_SECONDS_CHARS");
    if (ts < 0)
        return -1;
    ts_chars_max = (Py_ssize_t)ts;
    return 0;
}

#endif
