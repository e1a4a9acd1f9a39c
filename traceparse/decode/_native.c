/* The decoder's two loops over every event, in C: the compiled half of
 * traceparse.decode.native (the numpy path in lines.py and fields.py is the
 * fallback, and gives the same arrays).
 *
 * scan_lines: split each XLine into its events, pick the ones to decode (by
 *     metadata id, or because a stat carries a marker id) and sum the
 *     duration of the timed ones per id.
 * read_events: the offset, duration and stats of the picked events, each
 *     stat into its cell of a table (a row per stat read, a column per event).
 *
 * Only the buffer protocol is used (no NumPy C API), so one build serves every
 * NumPy. Every read is bounds-checked against its message's end; malformed
 * wire format raises ValueError, which the Python side turns into WireError.
 * The loops run without the GIL.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

enum { VARINT = 0, FIXED64 = 1, LEN = 2, FIXED32 = 5 };

typedef struct {
    uint64_t number;
    int wire;
    uint64_t value;      /* varint or fixed-width bits */
    Py_ssize_t start;    /* payload of a length-delimited field */
    Py_ssize_t end;      /* end of the payload (of the field, for other kinds) */
} Field;

/* A growable int64 column, filled without the GIL. */
typedef struct {
    int64_t *data;
    Py_ssize_t size;
    Py_ssize_t capacity;
} Column;

static inline int column_append(Column *c, int64_t value) {
    if (c->size == c->capacity) {
        Py_ssize_t capacity = c->capacity ? 2 * c->capacity : 4096;
        int64_t *grown = PyMem_RawRealloc(c->data, (size_t)capacity * sizeof(int64_t));
        if (!grown) return -1;
        c->data = grown;
        c->capacity = capacity;
    }
    c->data[c->size++] = value;
    return 0;
}

/* The column as bytes (for numpy.frombuffer), its buffer let go. */
static PyObject *column_bytes(Column *c) {
    PyObject *out = PyBytes_FromStringAndSize((const char *)c->data, c->size * (Py_ssize_t)sizeof(int64_t));
    PyMem_RawFree(c->data);
    c->data = NULL;
    return out;
}

/* Reading stops at the first problem; its message is kept here (static text). */
typedef struct {
    const uint8_t *data;
    const char *error;
    int out_of_memory;
} Reader;

static inline int read_varint(Reader *rd, Py_ssize_t *pos, Py_ssize_t end, uint64_t *out) {
    const uint8_t *d = rd->data;
    uint64_t value = 0;
    Py_ssize_t p = *pos;
    if (p < end && d[p] < 0x80) { /* one byte: tags, ids, short lengths */
        *out = d[p];
        *pos = p + 1;
        return 0;
    }
    for (int i = 0; i < 10; i++) {
        if (p >= end) break;
        uint8_t byte = d[p++];
        value |= (uint64_t)(byte & 0x7F) << (7 * i); /* a 10th byte's bits past 64 drop */
        if (byte < 0x80) {
            *pos = p;
            *out = value;
            return 0;
        }
    }
    rd->error = "truncated or overlong varint";
    return -1;
}

static inline uint64_t little_endian(const uint8_t *p, int width) {
    uint64_t value = 0;
    for (int i = width - 1; i >= 0; i--) value = (value << 8) | p[i];
    return value;
}

/* The field at *pos (which moves past it), as protobuf's rules allow. */
static inline int read_field(Reader *rd, Py_ssize_t *pos, Py_ssize_t end, Field *f) {
    uint64_t tag;
    if (read_varint(rd, pos, end, &tag)) return -1;
    f->number = tag >> 3;
    f->wire = (int)(tag & 7);
    if (f->number == 0) {
        rd->error = "field number 0";
        return -1;
    }
    Py_ssize_t p = *pos;
    switch (f->wire) {
    case VARINT:
        if (read_varint(rd, &p, end, &f->value)) return -1;
        break;
    case FIXED64:
    case FIXED32: {
        int width = f->wire == FIXED64 ? 8 : 4;
        if (end - p < width) {
            rd->error = "fixed-width field runs past the end of its message";
            return -1;
        }
        f->value = little_endian(rd->data + p, width);
        p += width;
        break;
    }
    case LEN: {
        uint64_t size;
        if (read_varint(rd, &p, end, &size)) return -1;
        if (size > (uint64_t)(end - p)) {
            rd->error = "length-delimited field runs past the end of its message";
            return -1;
        }
        f->value = 0;
        f->start = p;
        p += (Py_ssize_t)size;
        break;
    }
    default:
        rd->error = "unsupported wire type";
        return -1;
    }
    f->end = p;
    *pos = p;
    return 0;
}

/* Sorted, unique ids, and where each is among them. Ids below DIRECT (the
 * usual case: metadata ids count up from 1) are looked up in a table, one load
 * instead of a binary search; larger ones are searched. */
enum { DIRECT = 1 << 16 };

typedef struct {
    const uint64_t *ids;
    Py_ssize_t n;
    int32_t *direct; /* DIRECT entries: the position of that id, or -1 */
} IdSet;

static int idset_init(IdSet *set, const uint64_t *ids, Py_ssize_t n) {
    set->ids = ids;
    set->n = n;
    set->direct = NULL;
    if (!n || ids[0] >= DIRECT) return 0;
    set->direct = PyMem_RawMalloc(DIRECT * sizeof(int32_t));
    if (!set->direct) return -1;
    memset(set->direct, 0xff, DIRECT * sizeof(int32_t));
    for (Py_ssize_t k = 0; k < n && ids[k] < DIRECT; k++) set->direct[ids[k]] = (int32_t)k;
    return 0;
}

static void idset_free(IdSet *set) {
    PyMem_RawFree(set->direct);
    set->direct = NULL;
}

/* Position of value among the ids, or -1. */
static inline Py_ssize_t find(const IdSet *set, uint64_t value) {
    if (value < DIRECT) return set->direct ? set->direct[value] : -1;
    Py_ssize_t lo = 0, hi = set->n;
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (set->ids[mid] < value) lo = mid + 1;
        else hi = mid;
    }
    return lo < set->n && set->ids[lo] == value ? lo : -1;
}

/* Whether a stat names one of the markers and holds an integer (uint64_value
 * or int64_value). A stat that does not read cleanly may: its event is then
 * decoded, and decoding tells. */
static int stat_marks(Reader *rd, Py_ssize_t pos, Py_ssize_t end, const IdSet *markers) {
    uint64_t id = 0;
    int integer = 0;
    Field f;
    while (pos < end) {
        if (read_field(rd, &pos, end, &f)) {
            rd->error = NULL;
            return 1;
        }
        if (f.wire != VARINT) continue;
        if (f.number == 1) id = f.value;
        else if (f.number == 3 || f.number == 4) integer = 1;
    }
    return integer && find(markers, id) >= 0;
}

typedef struct {
    Reader rd;
    const int64_t *bounds; /* (start, end) of each line */
    Py_ssize_t lines;
    IdSet picked, timed, markers;
    int64_t *counts, *totals, *stamps;
    Column out[5];         /* per picked event: start, end, metadata id, line, index in line */
} Scan;

static int scan_event(Scan *s, Py_ssize_t start, Py_ssize_t end, int64_t line, int64_t index) {
    Reader *rd = &s->rd;
    uint64_t metadata_id = 0, duration = 0;
    /* An event picked by its id needs no marker: its stats are read only while
     * the id read so far is not a picked one (serializers write it first). */
    int marked = 0, picked = find(&s->picked, 0) >= 0, unread = 0;
    Py_ssize_t pos = start;
    Field f;
    while (pos < end) {
        if (read_field(rd, &pos, end, &f)) return -1;
        if (f.number == 1 && f.wire == VARINT) {
            metadata_id = f.value;
            picked = find(&s->picked, metadata_id) >= 0;
        } else if (f.number == 3 && f.wire == VARINT) {
            duration = f.value;
        } else if (f.number == 4 && f.wire == LEN && s->markers.n && !marked) {
            if (picked) unread = 1;
            else marked = stat_marks(rd, f.start, f.end, &s->markers);
        }
    }
    if (!picked && unread) { /* a later id took the pick back: read the stats skipped */
        for (pos = start; pos < end && !marked;) {
            if (read_field(rd, &pos, end, &f)) return -1;
            if (f.number == 4 && f.wire == LEN) marked = stat_marks(rd, f.start, f.end, &s->markers);
        }
    }
    if (marked || picked) {
        int64_t record[5] = {start, end, (int64_t)metadata_id, line, index};
        for (int i = 0; i < 5; i++) {
            if (column_append(&s->out[i], record[i])) {
                rd->out_of_memory = 1;
                return -1;
            }
        }
        return 0;
    }
    Py_ssize_t k = find(&s->timed, metadata_id);
    if (k >= 0) {
        s->counts[k] += 1;
        s->totals[k] = (int64_t)((uint64_t)s->totals[k] + duration); /* wraps as NumPy does */
    }
    return 0;
}

static int scan(Scan *s, Py_ssize_t size) {
    Reader *rd = &s->rd;
    for (Py_ssize_t line = 0; line < s->lines; line++) {
        Py_ssize_t pos = (Py_ssize_t)s->bounds[2 * line];
        Py_ssize_t end = (Py_ssize_t)s->bounds[2 * line + 1];
        if (pos < 0 || end < pos || end > size) {
            rd->error = "line bounds outside the buffer";
            return -1;
        }
        int64_t events = 0, stamp = 0;
        Field f;
        while (pos < end) {
            if (read_field(rd, &pos, end, &f)) return -1;
            if (f.number == 4 && f.wire == LEN) {
                if (scan_event(s, f.start, f.end, line, events++)) return -1;
            } else if (f.number == 3 && f.wire == VARINT) {
                stamp = (int64_t)f.value;
            }
        }
        s->stamps[line] = stamp;
    }
    return 0;
}

/* Buffers of the arguments, released together. */
typedef struct {
    Py_buffer views[12];
    int count;
} Views;

static int get_view(Views *v, PyObject *obj, int writable, Py_ssize_t item, const char *name) {
    Py_buffer *view = &v->views[v->count];
    if (PyObject_GetBuffer(obj, view, writable ? PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS : PyBUF_C_CONTIGUOUS))
        return -1;
    v->count++;
    if (view->len % item) {
        PyErr_Format(PyExc_TypeError, "%s: length is not a multiple of %zd bytes", name, item);
        return -1;
    }
    return 0;
}

static void release(Views *v) {
    for (int i = 0; i < v->count; i++) PyBuffer_Release(&v->views[i]);
}

static PyObject *fail(Reader *rd) {
    if (rd->out_of_memory) return PyErr_NoMemory();
    PyErr_SetString(PyExc_ValueError, rd->error ? rd->error : "malformed wire format");
    return NULL;
}

PyDoc_STRVAR(scan_lines_doc,
"scan_lines(data, bounds, picked, timed, markers, counts, totals, stamps)\n"
"    -> (starts, ends, ids, lines, indexes)\n\n"
"Every event of the lines data[bounds[i,0]:bounds[i,1]] (int64 pairs). Events\n"
"whose metadata id is in picked, or with an integer stat whose id is in markers,\n"
"are returned as five int64 columns in bytes (their start and end, metadata id,\n"
"line, index in the line);\n"
"the others whose id is timed[k] add 1 to counts[k] and their duration_ps to\n"
"totals[k]. stamps[i] is line i's timestamp_ns (0 when absent). The id arrays\n"
"are sorted uint64; counts, totals and stamps are writable int64.");

static PyObject *scan_lines(PyObject *self, PyObject *args) {
    PyObject *objs[8];
    if (!PyArg_UnpackTuple(args, "scan_lines", 8, 8, &objs[0], &objs[1], &objs[2], &objs[3],
                           &objs[4], &objs[5], &objs[6], &objs[7]))
        return NULL;
    Views v = {.count = 0};
    static const char *names[] = {"data", "bounds", "picked", "timed", "markers", "counts", "totals", "stamps"};
    for (int i = 0; i < 8; i++) {
        if (get_view(&v, objs[i], i >= 5, i == 0 ? 1 : (i == 1 ? 16 : 8), names[i])) {
            release(&v);
            return NULL;
        }
    }
    Py_buffer *b = v.views;
    Scan s = {
        .rd = {.data = b[0].buf},
        .bounds = b[1].buf,
        .lines = b[1].len / 16,
        .counts = b[5].buf,
        .totals = b[6].buf,
        .stamps = b[7].buf,
    };
    if (b[5].len != b[3].len || b[6].len != b[3].len || b[7].len / 8 != s.lines) {
        release(&v);
        PyErr_SetString(PyExc_TypeError, "counts and totals need one slot per timed id, stamps one per line");
        return NULL;
    }
    int status = -1;
    if (idset_init(&s.picked, b[2].buf, b[2].len / 8) || idset_init(&s.timed, b[3].buf, b[3].len / 8)
        || idset_init(&s.markers, b[4].buf, b[4].len / 8)) {
        s.rd.out_of_memory = 1;
    } else {
        Py_BEGIN_ALLOW_THREADS
        status = scan(&s, b[0].len);
        Py_END_ALLOW_THREADS
    }
    release(&v);
    idset_free(&s.picked);
    idset_free(&s.timed);
    idset_free(&s.markers);
    PyObject *out = status ? NULL : PyTuple_New(5);
    for (int i = 0; i < 5; i++) {
        PyObject *column = out ? column_bytes(&s.out[i]) : NULL;
        PyMem_RawFree(s.out[i].data);
        if (out && !column) Py_CLEAR(out);
        if (out) PyTuple_SET_ITEM(out, i, column);
    }
    return status ? fail(&s.rd) : out;
}

/* Where the stats of the events land: a row per stat the decoder reads, a
 * column per event (cell = row * events + event). */
typedef struct {
    IdSet ids;             /* stat metadata ids the decoder reads, sorted */
    const int64_t *rows;   /* the row of each */
    Py_ssize_t events;
    int8_t *kinds;         /* XStat field number of the value; 0: no stat with a value */
    uint64_t *values;      /* varint or fixed64 bits */
    int64_t *starts;       /* payload of str/bytes values */
    int64_t *lengths;
} Tables;

/* One stat into its cell, if the decoder reads it and it has a value. Within a
 * stat the last id and the last value field win (protobuf's merge rule); across
 * the stats of an event, the last one with a value. */
static int read_stat(Reader *rd, Py_ssize_t pos, Py_ssize_t end, Tables *t, Py_ssize_t event) {
    Field f, value = {0};
    uint64_t id = 0;
    int kind = 0;
    while (pos < end) {
        if (read_field(rd, &pos, end, &f)) return -1;
        int value_wire;
        switch (f.number) {
        case 1:
            if (f.wire == VARINT) id = f.value;
            continue;
        case 2: value_wire = FIXED64; break;                /* double_value */
        case 3: case 4: case 7: value_wire = VARINT; break; /* uint64, int64, ref */
        case 5: case 6: value_wire = LEN; break;            /* str, bytes */
        default: continue;
        }
        if (f.wire != value_wire) continue;
        kind = (int)f.number;
        value = f;
    }
    Py_ssize_t k = kind ? find(&t->ids, id) : -1;
    if (k < 0) return 0;
    Py_ssize_t cell = (Py_ssize_t)t->rows[k] * t->events + event;
    t->kinds[cell] = (int8_t)kind;
    t->values[cell] = value.wire == LEN ? 0 : value.value;
    t->starts[cell] = value.wire == LEN ? value.start : 0;
    t->lengths[cell] = value.wire == LEN ? value.end - value.start : 0;
    return 0;
}

static int read_all(Reader *rd, Py_ssize_t size, const int64_t *starts, const int64_t *ends,
                    uint64_t *offsets, uint64_t *durations, Tables *t) {
    for (Py_ssize_t i = 0; i < t->events; i++) {
        Py_ssize_t pos = (Py_ssize_t)starts[i], end = (Py_ssize_t)ends[i];
        if (pos < 0 || end < pos || end > size) {
            rd->error = "event bounds outside the buffer";
            return -1;
        }
        uint64_t offset = 0, duration = 0;
        Field f;
        while (pos < end) {
            if (read_field(rd, &pos, end, &f)) return -1;
            if (f.wire == VARINT && f.number == 2) offset = f.value;
            else if (f.wire == VARINT && f.number == 3) duration = f.value;
            else if (f.wire == LEN && f.number == 4 && read_stat(rd, f.start, f.end, t, i)) return -1;
        }
        offsets[i] = offset;
        durations[i] = duration;
    }
    return 0;
}

PyDoc_STRVAR(read_events_doc,
"read_events(data, starts, ends, ids, rows, offsets, durations, kinds, values,\n"
"            payload_starts, payload_lengths)\n\n"
"The XEvents data[starts[i]:ends[i]] (int64 bounds): offset_ps and duration_ps\n"
"go into offsets[i] and durations[i] (uint64, 0 when absent). A stat whose id\n"
"is ids[k] (sorted uint64) and that has a value goes into cell rows[k] * events\n"
"+ i of the tables: kinds (int8: the XStat field number of its value), values\n"
"(uint64 bits), payload_starts and payload_lengths (int64, str/bytes values).\n"
"The outputs are written where there is something to write, and left alone\n"
"elsewhere: pass them zeroed.");

static PyObject *read_events(PyObject *self, PyObject *args) {
    enum { N = 11 };
    PyObject *objs[N];
    if (!PyArg_UnpackTuple(args, "read_events", N, N, &objs[0], &objs[1], &objs[2], &objs[3],
                           &objs[4], &objs[5], &objs[6], &objs[7], &objs[8], &objs[9], &objs[10]))
        return NULL;
    Views v = {.count = 0};
    static const char *names[N] = {"data", "starts", "ends", "ids", "rows", "offsets", "durations",
                                   "kinds", "values", "payload_starts", "payload_lengths"};
    for (int i = 0; i < N; i++) {
        if (get_view(&v, objs[i], i >= 5, i == 0 || i == 7 ? 1 : 8, names[i])) {
            release(&v);
            return NULL;
        }
    }
    Py_buffer *b = v.views;
    Py_ssize_t n = b[1].len / 8, ids = b[3].len / 8;
    Tables t = {
        .rows = b[4].buf,
        .events = n,
        .kinds = b[7].buf,
        .values = b[8].buf,
        .starts = b[9].buf,
        .lengths = b[10].buf,
    };
    Py_ssize_t cells = b[7].len;
    int bad = b[2].len != b[1].len || b[5].len != b[1].len || b[6].len != b[1].len;
    bad |= b[4].len != b[3].len || b[8].len != cells * 8 || b[9].len != cells * 8 || b[10].len != cells * 8;
    for (Py_ssize_t k = 0; k < ids && !bad; k++)
        bad = t.rows[k] < 0 || (n && t.rows[k] >= cells / n);
    if (bad || (n && cells % n)) {
        release(&v);
        PyErr_SetString(PyExc_TypeError, "read_events: the arrays' sizes do not agree");
        return NULL;
    }
    Reader rd = {.data = b[0].buf};
    int status = -1;
    if (idset_init(&t.ids, b[3].buf, ids)) {
        rd.out_of_memory = 1;
    } else {
        Py_BEGIN_ALLOW_THREADS
        status = read_all(&rd, b[0].len, b[1].buf, b[2].buf, b[5].buf, b[6].buf, &t);
        Py_END_ALLOW_THREADS
    }
    idset_free(&t.ids);
    release(&v);
    if (status) return fail(&rd);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"scan_lines", scan_lines, METH_VARARGS, scan_lines_doc},
    {"read_events", read_events, METH_VARARGS, read_events_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_native",
    "Compiled loops of traceparse's decoder (see traceparse.decode.native).", -1, methods,
};

PyMODINIT_FUNC PyInit__native(void) { return PyModule_Create(&module); }
