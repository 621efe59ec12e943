/* The replay scanner's inner loop in C: one pass over a block of whole log lines.
 *
 * The regex reading (scan/regex.py) spends most of its time finding line ends and reading SGLang's
 * `[date time RANKS] ` prefix one regex step per byte; here memchr finds the line ends and each
 * line is classified by comparing a few bytes. The meaning is the regex scanner's (scan/regex.py:
 * _ROW, RegexRange._bulk), line by line:
 *
 * A line may start with other loggers' wrappers (Ray's `(Name pid=N) `, logline._WRAPPER); they are
 * skipped, and the line read as if they were not there (as parse_line reads it).
 *
 *   decode row   prefix, then `Decode batch[ [N]][.,] #running-req: ` and a body of at most
 *                MAX_BODY bytes. Counted when its body holds `, gen throughput (token/s): ` once
 *                (a body without `gen throughput` is skipped: RunSplitter does not count it); its
 *                `, accept len: ` (and, when asked, `, accept rate: `) values are cut as texts.
 *   boring       prefix, then an access line, a request dump, a Prefill line, a KV-cache
 *                retraction or `Cache flushed successfully!`; or, with no prefix, an access line.
 *   odd          anything else. An odd line holding one of the needles (logline.KEY_NEEDLES),
 *                or a decode row whose keys are spelled or repeated otherwise, stops the scan:
 *                the caller reads that line (and a run of such lines after it, stop_run_end)
 *                through LogReader, then calls again after them.
 *
 * scan(buf, pos, end, needles, want_rates) reads the lines between the newlines at `pos` and
 * `end - 1` and returns (stop_a, stop_b, n, lens, tps, pairs, first, last, seen):
 *   stop_a, stop_b  the newlines around the lines that stopped the scan (both end - 1: none
 *                   did): the line, and those after it up to the last of a run of such lines;
 *   n               decode rows counted before it; lens, tps: their value texts (bytes);
 *   pairs           (accept len, accept rate) texts of the counted rows holding both, when
 *                   want_rates (else empty);
 *   first, last     the newline before the first and the last counted row (-1: none);
 *   seen            whether any decode row was seen (the log is recognised as SGLang's).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define MAX_LINE 16384 /* logline.MAX_LINE (the module's MAX_LINE; a test holds them equal) */
#define MAX_BODY (MAX_LINE - 200)

typedef struct {
    const char *p;
    Py_ssize_t n;
} span;

static int starts(const char *p, const char *e, const char *lit, Py_ssize_t n) {
    return e - p >= n && memcmp(p, lit, (size_t)n) == 0;
}

#define STARTS(p, e, lit) starts((p), (e), (lit), (Py_ssize_t)(sizeof(lit) - 1))

static int is_digit(char c) { return c >= '0' && c <= '9'; }

/* Past SGLang's prefix (`\[.{19}[^\]\n]{0,41}+\] `), or NULL when the line has none. */
static const char *after_prefix(const char *s, const char *e) {
    if (e - s < 20 || *s != '[')
        return NULL;
    const char *q = s + 20, *lim = s + 61;
    while (q < e && q < lim && *q != ']')
        q++;
    if (q + 1 < e && q[0] == ']' && q[1] == ' ')
        return q + 2;
    return NULL;
}

static int digits_at(const char *p, int n) {
    for (int i = 0; i < n; i++)
        if (!is_digit(p[i]))
            return 0;
    return 1;
}

static int is_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r') || (c >= '\x1c' && c <= '\x1f'); }

/* Past one wrapper another logger put in front of SGLang's line (logline._WRAPPER): Ray's
 * `(Name pid=N, ...) ` or `[2025-12-09T10:00:00Z] name >> `; NULL when there is none. */
static const char *after_wrapper(const char *s, const char *e) {
    if (s < e && *s == '(') {
        int pid = 0;
        const char *q = s + 1;
        for (; q < e && *q != '(' && *q != ')'; q++)
            pid |= e - q >= 5 && memcmp(q, "pid=", 4) == 0 && is_digit(q[4]);
        return pid && e - q >= 2 && q[0] == ')' && q[1] == ' ' ? q + 2 : NULL;
    }
    if (e - s < 12 || *s != '[' || !digits_at(s + 1, 4) || s[5] != '-' || !digits_at(s + 6, 2) || s[8] != '-' ||
        !digits_at(s + 9, 2) || s[11] != 'T')
        return NULL;
    const char *q = memchr(s + 12, ']', (size_t)(e - s - 12));
    if (q == NULL || e - q < 2 || q[1] != ' ')
        return NULL;
    const char *name = q + 2, *t = name;
    while (t < e && !is_space(*t))
        t++;
    return t > name && STARTS(t, e, " >> ") ? t + 4 : NULL;
}

static const char *after_wrappers(const char *s, const char *e) {
    for (const char *w; (w = after_wrapper(s, e)) != NULL;)
        s = w;
    return s;
}

/* `<head>[ [\d{1,12}]][.,]` at p: past the separator, or NULL. */
static const char *after_head(const char *p, const char *e, const char *head, Py_ssize_t n) {
    if (!starts(p, e, head, n))
        return NULL;
    p += n;
    if (e - p >= 2 && p[0] == ' ' && p[1] == '[') {
        const char *d = p + 2;
        while (d < e && d - (p + 2) < 12 && is_digit(*d))
            d++;
        if (d == p + 2 || d >= e || *d != ']')
            return NULL;
        p = d + 1;
    }
    if (p < e && (*p == '.' || *p == ','))
        return p + 1;
    return NULL;
}

static const char *skip_digits(const char *p, const char *e, int dots) {
    while (p < e && (is_digit(*p) || (dots && *p == '.')))
        p++;
    return p;
}

static int only_cr(const char *p, const char *e) {
    while (p < e && *p == '\r')
        p++;
    return p == e;
}

static int is_access(const char *m, const char *e) {
    return e - m > 10 && memcmp(m, "INFO:     ", 10) == 0 && (is_digit(m[10]) || m[10] == ':' || m[10] == '[');
}

/* `KV cache pool is full. Retract requests. #retracted_reqs: N, [#aborted_retracted_reqs: N, ]
 * #new_token_ratio: X -> Y` and nothing after but `\r`s. */
static int is_retract(const char *m, const char *e) {
    static const char head[] = "KV cache pool is full. Retract requests. #retracted_reqs: ";
    if (!STARTS(m, e, head))
        return 0;
    const char *p = m + sizeof(head) - 1, *d = skip_digits(p, e, 0);
    if (d == p || !STARTS(d, e, ", "))
        return 0;
    p = d + 2;
    if (STARTS(p, e, "#aborted_retracted_reqs: ")) {
        const char *q = p + 25, *d2 = skip_digits(q, e, 0);
        if (d2 > q && STARTS(d2, e, ", "))
            p = d2 + 2;
    }
    if (!STARTS(p, e, "#new_token_ratio: "))
        return 0;
    p += 18;
    d = skip_digits(p, e, 1);
    if (d == p || !STARTS(d, e, " -> "))
        return 0;
    p = d + 4;
    d = skip_digits(p, e, 1);
    return d > p && only_cr(d, e);
}

static int is_boring_message(const char *m, const char *e) {
    if (is_access(m, e) || STARTS(m, e, "Receive: ") || STARTS(m, e, "Finish: "))
        return 1;
    if (after_head(m, e, "Prefill batch", 13))
        return 1;
    if (STARTS(m, e, "Cache flushed successfully!"))
        return only_cr(m + 27, e);
    return is_retract(m, e);
}

/* Where the three keys a decode body is cut by occur, and how often: one pass, a byte compare
 * per byte (cheaper than a memmem per key on a line this short). */
typedef struct {
    const char *len, *rate, *tps;
    int nlen, nrate, ntps;
} body_keys;

static void find_keys(const char *p, const char *e, body_keys *k) {
    memset(k, 0, sizeof *k);
    for (const char *q = p; e - q >= 10; q++) {
        if (*q == 'a') {
            if (memcmp(q, "accept len", 10) == 0) {
                k->nlen++;
                k->len = q;
            } else if (e - q >= 11 && memcmp(q, "accept rate", 11) == 0) {
                k->nrate++;
                k->rate = q;
            }
        } else if (*q == 'g' && e - q >= 14 && memcmp(q, "gen throughput", 14) == 0) {
            k->ntps++;
            k->tps = q;
        }
    }
}

/* Whether a value may end at q (a `,` or the line end): `, ` follows, or nothing but `[, \t\r]`
 * to the line end (the `(?=, |[, \t\r]*\n)` of scan/regex.py's _END). */
static int ends_value(const char *q, const char *e) {
    if (e - q >= 2 && q[0] == ',' && q[1] == ' ')
        return 1;
    for (; q < e; q++)
        if (*q != ',' && *q != ' ' && *q != '\t' && *q != '\r')
            return 0;
    return 1;
}

/* A value as `split(", ")` ends it after rstrip: the bytes up to the next `,`, when it may end
 * there; otherwise no number (empty), as scan/regex.py's _VALUE reads it. */
static span value_at(const char *p, const char *e) {
    const char *q = memchr(p, ',', (size_t)(e - p));
    if (q == NULL)
        q = e;
    return ends_value(q, e) ? (span){p, q - p} : (span){p, 0};
}

/* tok/s: `\d{1,12}\.\d` when one more digit ends the value (replay bins it at 0.1 tok/s), else
 * the plain value (scan/regex.py's _TPS_VALUE). */
static span tps_at(const char *p, const char *e) {
    const char *d = skip_digits(p, e, 0);
    Py_ssize_t k = d - p;
    if (k >= 1 && k <= 12 && e - d >= 3 && d[0] == '.' && is_digit(d[1]) && is_digit(d[2]) && ends_value(d + 3, e))
        return (span){p, k + 2};
    return value_at(p, e);
}

/* The value after `, <key>: `, for a key found `count` times at `hit`: 0 (absent), 1 (value
 * set) or -1 (spelled or repeated otherwise: the line is read exactly). */
static int keyed(const char *body, const char *e, int count, const char *hit, Py_ssize_t n, span *out) {
    if (count == 0)
        return 0;
    if (count > 1 || hit - body < 2 || hit[-2] != ',' || hit[-1] != ' ' || !STARTS(hit + n, e, ": "))
        return -1;
    *out = value_at(hit + n + 2, e);
    return 1;
}

static int append_bytes(PyObject *list, span v) {
    PyObject *b = PyBytes_FromStringAndSize(v.p, v.n);
    if (b == NULL)
        return -1;
    int r = PyList_Append(list, b);
    Py_DECREF(b);
    return r;
}

/* The needles, indexed by their first two bytes: a bit per byte pair that starts one (8 KiB, in
 * L1) and, for those pairs, which needles start so. Built again only when the tuple changes: a
 * tqdm line of 2.5 KB is read once, not once per needle. */
#define MAX_NEEDLES 64
static PyObject *needles_cached; /* strong reference: its identity is the cache key */
static uint8_t pair_bits[65536 / 8];
static uint64_t pair_needles[65536];

static unsigned pair_of(const char *p) { return (unsigned)(uint8_t)p[0] << 8 | (uint8_t)p[1]; }

static int index_needles(PyObject *needles) {
    if (needles == needles_cached)
        return 0;
    Py_ssize_t k = PyTuple_GET_SIZE(needles);
    if (k > MAX_NEEDLES) {
        PyErr_SetString(PyExc_ValueError, "at most 64 needles");
        return -1;
    }
    for (Py_ssize_t i = 0; i < k; i++) {
        PyObject *nd = PyTuple_GET_ITEM(needles, i);
        if (!PyBytes_Check(nd) || PyBytes_GET_SIZE(nd) < 2) {
            PyErr_SetString(PyExc_ValueError, "needles must be bytes of two bytes or more");
            return -1;
        }
    }
    memset(pair_bits, 0, sizeof pair_bits);
    memset(pair_needles, 0, sizeof pair_needles);
    for (Py_ssize_t i = 0; i < k; i++) {
        unsigned pr = pair_of(PyBytes_AS_STRING(PyTuple_GET_ITEM(needles, i)));
        pair_bits[pr >> 3] |= (uint8_t)(1u << (pr & 7));
        pair_needles[pr] |= (uint64_t)1 << i;
    }
    Py_INCREF(needles);
    Py_XSETREF(needles_cached, needles);
    return 0;
}

static int holds_needle(const char *s, const char *e) {
    for (const char *p = s; e - p >= 2; p++) {
        unsigned pr = pair_of(p);
        if (!(pair_bits[pr >> 3] & (1u << (pr & 7))))
            continue;
        for (uint64_t m = pair_needles[pr]; m; m &= m - 1) {
            PyObject *nd = PyTuple_GET_ITEM(needles_cached, __builtin_ctzll(m));
            Py_ssize_t n = PyBytes_GET_SIZE(nd);
            if (n <= e - p && memcmp(p, PyBytes_AS_STRING(nd), (size_t)n) == 0)
                return 1;
        }
    }
    return 0;
}

typedef enum { ROW_ERROR = -1, ROW_SKIP, ROW_COUNTED, ROW_STOP } row_kind;

/* One decode body: counted (values appended; with tps NULL only classified), skipped (no
 * tok/s), or read exactly. */
static row_kind decode_row(const char *body, const char *e, int want_rates, PyObject *lens, PyObject *tps,
                           PyObject *pairs) {
    span len = {0}, rate = {0}, tp;
    body_keys k;
    find_keys(body, e, &k);
    if (k.ntps == 0)
        return ROW_SKIP;
    if (k.ntps > 1 || k.tps - body < 2 || k.tps[-2] != ',' || k.tps[-1] != ' ' || !STARTS(k.tps + 14, e, " (token/s): "))
        return ROW_STOP;
    tp = tps_at(k.tps + 26, e);
    int kl = keyed(body, e, k.nlen, k.len, 10, &len);
    if (kl < 0)
        return ROW_STOP;
    int kr = 0;
    if (want_rates && kl > 0) {
        kr = keyed(body, e, k.nrate, k.rate, 11, &rate);
        if (kr < 0)
            return ROW_STOP;
    }
    if (tps == NULL)
        return ROW_COUNTED;
    if (append_bytes(tps, tp) < 0 || (kl > 0 && append_bytes(lens, len) < 0))
        return ROW_ERROR;
    if (kr > 0) { /* texts that are no number are dropped by the sink, as parse_line drops them */
        PyObject *pair = Py_BuildValue("(y#y#)", len.p, len.n, rate.p, rate.n);
        if (pair == NULL || PyList_Append(pairs, pair) < 0) {
            Py_XDECREF(pair);
            return ROW_ERROR;
        }
        Py_DECREF(pair);
    }
    return ROW_COUNTED;
}

/* One line: skipped, counted (a decode row, values appended unless tps is NULL), to be read
 * exactly (ROW_STOP), or an error. `*decode` says whether it was a decode row. */
static row_kind classify(const char *s, const char *e, int want_rates, PyObject *lens, PyObject *tps,
                         PyObject *pairs, int *decode) {
    const char *w = after_wrappers(s, e), *m = after_prefix(w, e);
    *decode = 0;
    if (w > s && holds_needle(s, w)) /* a wrapper that reads as an event itself */
        return ROW_STOP;
    int odd;
    if (m != NULL) {
        const char *body = after_head(m, e, "Decode batch", 12);
        if (body != NULL && STARTS(body, e, " #running-req: ") && e - (body + 15) <= MAX_BODY && e - s <= MAX_LINE) {
            *decode = 1;
            return decode_row(body + 15, e, want_rates, lens, tps, pairs);
        }
        odd = !is_boring_message(m, e);
    } else {
        odd = !is_access(s, e);
    }
    return odd && holds_needle(s, e) ? ROW_STOP : ROW_SKIP;
}

/* The end of the line starting at s (the block's last newline when none comes before it). */
static const char *line_end(const char *s, const char *stop) {
    const char *e = memchr(s, '\n', (size_t)(stop - s + 1));
    return e != NULL ? e : stop;
}

/* Past a line to be read exactly, the lines that follow it go the same way while lines to be read
 * so come at most STOP_GAP lines apart: a log of warnings or tracebacks goes to LogReader in runs,
 * not a call per line. (Any run of whole lines read exactly gives the same events.) */
#define STOP_GAP 2

static const char *stop_run_end(const char *e, const char *stop, int want_rates) {
    int gap = 0, decode;
    for (const char *q = e; q < stop && gap <= STOP_GAP;) {
        const char *e2 = line_end(q + 1, stop);
        if (classify(q + 1, e2, want_rates, NULL, NULL, NULL, &decode) == ROW_STOP) {
            e = e2;
            gap = 0;
        } else {
            gap++;
        }
        q = e2;
    }
    return e;
}

static PyObject *scan(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t pos, end;
    PyObject *needles;
    int want_rates;
    if (!PyArg_ParseTuple(args, "y*nnO!p", &view, &pos, &end, &PyTuple_Type, &needles, &want_rates))
        return NULL;
    PyObject *lens = PyList_New(0), *tps = PyList_New(0), *pairs = PyList_New(0), *out = NULL;
    if (index_needles(needles) < 0)
        goto done;
    if (lens == NULL || tps == NULL || pairs == NULL)
        goto done;
    if (pos < 0 || end > view.len || pos >= end) {
        PyErr_SetString(PyExc_ValueError, "pos and end must lie in the buffer, pos < end");
        goto done;
    }
    const char *buf = view.buf;
    Py_ssize_t stop_a = end - 1, stop_b = end - 1, first = -1, last = -1, n = 0;
    int seen = 0, decode;
    const char *nl = buf + pos, *stop = buf + end - 1;
    while (nl < stop) {
        const char *e = line_end(nl + 1, stop);
        row_kind k = classify(nl + 1, e, want_rates, lens, tps, pairs, &decode);
        seen |= decode;
        if (k == ROW_ERROR)
            goto done;
        if (k == ROW_STOP) {
            stop_a = nl - buf;
            stop_b = stop_run_end(e, stop, want_rates) - buf;
            break;
        }
        if (k == ROW_COUNTED) {
            if (first < 0)
                first = nl - buf;
            last = nl - buf;
            n++;
        }
        nl = e;
    }
    out = Py_BuildValue("(nnnOOOnni)", stop_a, stop_b, n, lens, tps, pairs, first, last, seen);
done:
    PyBuffer_Release(&view);
    Py_XDECREF(lens);
    Py_XDECREF(tps);
    Py_XDECREF(pairs);
    return out;
}

static PyMethodDef methods[] = {
    {"scan", scan, METH_VARARGS, "scan(buf, pos, end, needles, want_rates) -> (stop_a, stop_b, n, lens, tps, pairs, first, last, seen)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_linescan",
    .m_doc = "The replay scanner's inner loop (see eagle3_tui.sglang.scan).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__linescan(void) {
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && PyModule_AddIntConstant(m, "MAX_LINE", MAX_LINE) < 0)
        Py_CLEAR(m);
    return m;
}
