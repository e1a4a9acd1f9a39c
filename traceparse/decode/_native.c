/* The decoder's two loops over every event, in C: the compiled half of
 * traceparse.decode.native (the numpy path in lines.py and fields.py is the
 * fallback, and gives the same arrays).
 *
 * scan_lines: split each XLine into its events, pick the ones to decode (by
 *     metadata id, or because a stat carries a marker id) and sum the
 *     duration of the timed ones per id.
 * read_events: the offset, duration and stats of the picked events, each
 *     stat into its cell of a table (a row per stat read, a column per event).
 * read_stats: every stat of a few events (the run records scan_lines finds).
 * pair_events: each allocation's free, in one pass over the events in time
 *     order (tables/build.py; the numpy path sorts by address instead).
 *
 * Only the buffer protocol is used (no NumPy C API), so one build serves every
 * NumPy. Every read is bounds-checked against its message's end; malformed
 * wire format raises ValueError, which the Python side turns into WireError.
 * The loops run without the GIL.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
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

/* A finished column handed to Python without a copy: an object that owns the
 * memory and lends it through the buffer protocol (read-only, for
 * numpy.frombuffer). Copying into bytes took as much fresh memory again, and
 * on 10M events about a tenth of the whole load. */
typedef struct {
    PyObject_HEAD
    int64_t *data;
    Py_ssize_t size;
} OwnedColumn;

static int owned_getbuffer(PyObject *self, Py_buffer *view, int flags) {
    OwnedColumn *c = (OwnedColumn *)self;
    return PyBuffer_FillInfo(view, self, c->data, c->size * (Py_ssize_t)sizeof(int64_t), 1, flags);
}

static void owned_dealloc(PyObject *self) {
    PyMem_RawFree(((OwnedColumn *)self)->data);
    Py_TYPE(self)->tp_free(self);
}

static PyBufferProcs owned_buffer = {owned_getbuffer, NULL};

static PyTypeObject OwnedColumnType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "traceparse.decode._native.Column",
    .tp_doc = "A column of int64 values the loops made; read it with numpy.frombuffer.",
    .tp_basicsize = sizeof(OwnedColumn),
    .tp_dealloc = owned_dealloc,
    .tp_as_buffer = &owned_buffer,
    .tp_flags = Py_TPFLAGS_DEFAULT,
};

/* The column as an OwnedColumn, its memory taken from it (trimmed to size). */
static PyObject *column_take(Column *c) {
    OwnedColumn *out = PyObject_New(OwnedColumn, &OwnedColumnType);
    if (!out) return NULL;
    size_t bytes = (size_t)(c->size ? c->size : 1) * sizeof(int64_t);
    int64_t *trimmed = PyMem_RawRealloc(c->data, bytes);
    out->data = trimmed ? trimmed : c->data;
    if (!out->data) {
        Py_DECREF(out);
        return PyErr_NoMemory();
    }
    out->size = c->size;
    c->data = NULL;
    return (PyObject *)out;
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

/* An XStat, protobuf's way: the last metadata id and the last value field win.
 * kind is the value's field number (0: none); bits and the payload span are
 * the value's (a str/bytes value has bits 0, any other value an empty span). */
typedef struct {
    uint64_t id;
    int kind;
    uint64_t bits;
    Py_ssize_t start, length;
} Stat;

static int parse_stat(Reader *rd, Py_ssize_t pos, Py_ssize_t end, Stat *stat) {
    Field f;
    memset(stat, 0, sizeof *stat);
    while (pos < end) {
        if (read_field(rd, &pos, end, &f)) return -1;
        int value_wire;
        switch (f.number) {
        case 1:
            if (f.wire == VARINT) stat->id = f.value;
            continue;
        case 2: value_wire = FIXED64; break;                /* double_value */
        case 3: case 4: case 7: value_wire = VARINT; break; /* uint64, int64, ref */
        case 5: case 6: value_wire = LEN; break;            /* str, bytes */
        default: continue;
        }
        if (f.wire != value_wire) continue;
        stat->kind = (int)f.number;
        stat->bits = f.wire == LEN ? 0 : f.value;
        stat->start = f.wire == LEN ? f.start : 0;
        stat->length = f.wire == LEN ? f.end - f.start : 0;
    }
    return 0;
}

/* A stat's metadata id, and whether it holds an integer (uint64_value or
 * int64_value); 0 when the stat does not read cleanly. */
static int stat_id(Reader *rd, Py_ssize_t pos, Py_ssize_t end, uint64_t *id, int *integer) {
    Field f;
    *id = 0;
    *integer = 0;
    while (pos < end) {
        if (read_field(rd, &pos, end, &f)) {
            rd->error = NULL;
            return 0;
        }
        if (f.wire != VARINT) continue;
        if (f.number == 1) *id = f.value;
        else if (f.number == 3 || f.number == 4) *integer = 1;
    }
    return 1;
}

typedef struct {
    Reader rd;
    const int64_t *bounds; /* (start, end) of each line */
    Py_ssize_t lines;
    IdSet picked, timed, markers;
    IdSet run_named, run_stats; /* what makes an event a run record */
    int64_t *counts, *totals, *stamps;
    Column out[5];         /* per picked event: start, end, metadata id, line, index in line */
    Column runs[4];        /* per run record: start, end, metadata id, line */
} Scan;

static int append(Reader *rd, Column *columns, const int64_t *values, int count) {
    for (int i = 0; i < count; i++) {
        if (column_append(&columns[i], values[i])) {
            rd->out_of_memory = 1;
            return -1;
        }
    }
    return 0;
}

/* What one stat says, where still asked: an integer stat of a marker id marks
 * its event, a stat of a run id keeps it as a run record. A stat that does not
 * read cleanly says neither (the numpy path cannot see into it either). */
static void read_mark(Scan *s, const Field *stat, int want_mark, int want_run, int *marked,
                      int *kept) {
    uint64_t id;
    int integer;
    if (!stat_id(&s->rd, stat->start, stat->end, &id, &integer)) return;
    if (want_mark && integer && find(&s->markers, id) >= 0) *marked = 1;
    if (want_run && find(&s->run_stats, id) >= 0) *kept = 1;
}

static int scan_event(Scan *s, Py_ssize_t start, Py_ssize_t end, int64_t line, int64_t index) {
    Reader *rd = &s->rd;
    uint64_t metadata_id = 0, duration = 0;
    int picked = find(&s->picked, 0) >= 0, named = find(&s->run_named, 0) >= 0;
    int marked = 0, kept = 0, skipped = 0;
    Py_ssize_t pos = start;
    Field f;
    /* Stats are read only for what they may still decide: a marker of an event
     * its id does not pick, a run record its id does not name. Serializers write
     * the id first; a stat skipped under an id that a later one replaces is read
     * again below. */
    while (pos < end) {
        if (read_field(rd, &pos, end, &f)) return -1;
        if (f.number == 1 && f.wire == VARINT) {
            metadata_id = f.value;
            picked = find(&s->picked, metadata_id) >= 0;
            named = find(&s->run_named, metadata_id) >= 0;
        } else if (f.number == 3 && f.wire == VARINT) {
            duration = f.value;
        } else if (f.number == 4 && f.wire == LEN) {
            int want_mark = s->markers.n && !picked && !marked;
            int want_run = s->run_stats.n && !named && !kept;
            if (want_mark || want_run) read_mark(s, &f, want_mark, want_run, &marked, &kept);
            skipped |= (s->markers.n && !marked && picked) || (s->run_stats.n && !kept && named);
        }
    }
    if (skipped && ((s->markers.n && !picked && !marked) || (s->run_stats.n && !named && !kept))) {
        for (pos = start; pos < end;) {
            if (read_field(rd, &pos, end, &f)) return -1;
            if (f.number == 4 && f.wire == LEN)
                read_mark(s, &f, s->markers.n && !picked, s->run_stats.n && !named, &marked, &kept);
        }
    }
    if (named || kept) {
        int64_t record[4] = {start, end, (int64_t)metadata_id, line};
        if (append(rd, s->runs, record, 4)) return -1;
    }
    if (picked || marked) {
        int64_t record[5] = {start, end, (int64_t)metadata_id, line, index};
        return append(rd, s->out, record, 5);
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

/* The n arguments of a call as buffers: argument i has items of items[i] bytes
 * and is written to from argument first_writable on. */
static int unpack(PyObject *args, const char *function, int n, const char *const *names,
                  const Py_ssize_t *items, int first_writable, Views *v) {
    if (PyTuple_GET_SIZE(args) != n) {
        PyErr_Format(PyExc_TypeError, "%s takes %d arguments", function, n);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        if (get_view(v, PyTuple_GET_ITEM(args, i), i >= first_writable, items[i], names[i])) {
            release(v);
            return -1;
        }
    }
    return 0;
}

static PyObject *fail(Reader *rd) {
    if (rd->out_of_memory) return PyErr_NoMemory();
    PyErr_SetString(PyExc_ValueError, rd->error ? rd->error : "malformed wire format");
    return NULL;
}

/* The columns as a tuple of OwnedColumn (for numpy.frombuffer), or their
 * buffers let go; NULL (with the exception set) if status says the loop failed. */
static PyObject *columns_tuple(Column **columns, int count, int status, Reader *rd) {
    PyObject *out = status ? NULL : PyTuple_New(count);
    for (int i = 0; i < count; i++) {
        PyObject *column = out ? column_take(columns[i]) : NULL;
        PyMem_RawFree(columns[i]->data);
        columns[i]->data = NULL;
        if (out && !column) Py_CLEAR(out);
        if (out) PyTuple_SET_ITEM(out, i, column);
    }
    return status ? fail(rd) : out;
}

PyDoc_STRVAR(scan_lines_doc,
"scan_lines(data, bounds, picked, timed, markers, run_named, run_stats,\n"
"           counts, totals, stamps) -> 9 columns\n\n"
"Every event of the lines data[bounds[i,0]:bounds[i,1]] (int64 pairs). Events\n"
"whose metadata id is in picked, or with an integer stat whose id is in markers,\n"
"come back as the first five int64 columns (buffers): their start and end,\n"
"metadata id, line and index in the line; the others whose id is timed[k] add 1\n"
"to counts[k] and their duration_ps to totals[k]. Events whose id is in\n"
"run_named, or with a stat whose id is in run_stats, come back as the last\n"
"four: start, end, metadata id, line. stamps[i] is line i's timestamp_ns (0 when\n"
"absent). The id arrays are sorted, unique uint64; counts, totals and stamps\n"
"are writable int64.");

static PyObject *scan_lines(PyObject *self, PyObject *args) {
    static const char *const names[] = {"data", "bounds", "picked", "timed", "markers",
                                        "run_named", "run_stats", "counts", "totals", "stamps"};
    static const Py_ssize_t items[] = {1, 16, 8, 8, 8, 8, 8, 8, 8, 8};
    Views v = {.count = 0};
    if (unpack(args, "scan_lines", 10, names, items, 7, &v)) return NULL;
    Py_buffer *b = v.views;
    Scan s = {
        .rd = {.data = b[0].buf},
        .bounds = b[1].buf,
        .lines = b[1].len / 16,
        .counts = b[7].buf,
        .totals = b[8].buf,
        .stamps = b[9].buf,
    };
    if (b[7].len != b[3].len || b[8].len != b[3].len || b[9].len / 8 != s.lines) {
        release(&v);
        PyErr_SetString(PyExc_TypeError, "counts and totals need one slot per timed id, stamps one per line");
        return NULL;
    }
    IdSet *sets[] = {&s.picked, &s.timed, &s.markers, &s.run_named, &s.run_stats};
    int status = -1, ready = 1;
    for (int i = 0; i < 5; i++) ready = ready && !idset_init(sets[i], b[2 + i].buf, b[2 + i].len / 8);
    if (!ready) {
        s.rd.out_of_memory = 1;
    } else {
        Py_BEGIN_ALLOW_THREADS
        status = scan(&s, b[0].len);
        Py_END_ALLOW_THREADS
    }
    release(&v);
    for (int i = 0; i < 5; i++) idset_free(sets[i]);
    Column *columns[9] = {&s.out[0], &s.out[1], &s.out[2], &s.out[3], &s.out[4],
                          &s.runs[0], &s.runs[1], &s.runs[2], &s.runs[3]};
    return columns_tuple(columns, 9, status, &s.rd);
}

/* Where the parsed stats of the events go (read_events' tables, read_stats'
 * columns): 0, or -1 with the reader's error set. */
typedef int (*StatSink)(Reader *rd, const Stat *stat, Py_ssize_t event, void *sink);

/* The XEvents data[starts[i]:ends[i]]: offset_ps and duration_ps into
 * offsets[i] and durations[i] (0 when absent), each stat, parsed, to take. */
static int read_each(Reader *rd, Py_ssize_t size, const int64_t *starts, const int64_t *ends,
                     Py_ssize_t n, uint64_t *offsets, uint64_t *durations, StatSink take, void *sink) {
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t pos = (Py_ssize_t)starts[i], end = (Py_ssize_t)ends[i];
        if (pos < 0 || end < pos || end > size) {
            rd->error = "event bounds outside the buffer";
            return -1;
        }
        uint64_t offset = 0, duration = 0;
        Field f;
        Stat stat;
        while (pos < end) {
            if (read_field(rd, &pos, end, &f)) return -1;
            if (f.wire == VARINT && f.number == 2) offset = f.value;
            else if (f.wire == VARINT && f.number == 5) offset = 0; /* oneof: clears offset_ps */
            else if (f.wire == VARINT && f.number == 3) duration = f.value;
            else if (f.wire == LEN && f.number == 4) {
                if (parse_stat(rd, f.start, f.end, &stat) || take(rd, &stat, i, sink)) return -1;
            }
        }
        offsets[i] = offset;
        durations[i] = duration;
    }
    return 0;
}

/* Whether ends (argument 2), offsets and durations (arguments first_out and the
 * one after) have a slot for each of the events starts (argument 1) names. */
static int events_agree(const Py_buffer *b, int first_out) {
    return b[2].len == b[1].len && b[first_out].len == b[1].len && b[first_out + 1].len == b[1].len;
}

/* Each stat of the few events that need all of theirs (run records), whatever
 * its id: event, metadata id, kind, value bits, payload start, payload length. */
static int to_columns(Reader *rd, const Stat *stat, Py_ssize_t event, void *sink) {
    int64_t record[6] = {event, (int64_t)stat->id, stat->kind, (int64_t)stat->bits,
                         stat->start, stat->length};
    return append(rd, (Column *)sink, record, 6);
}

PyDoc_STRVAR(read_stats_doc,
"read_stats(data, starts, ends, offsets, durations) -> 6 columns\n\n"
"The XEvents data[starts[i]:ends[i]] (int64 bounds): offset_ps and duration_ps\n"
"go into offsets[i] and durations[i] (writable uint64, 0 when absent); every\n"
"stat, in wire order, comes back as int64 columns (buffers): its event, metadata\n"
"id, value kind (the XStat field number of its value, 0 for none), value bits,\n"
"payload start and length (str/bytes values).");

static PyObject *read_stats(PyObject *self, PyObject *args) {
    static const char *const names[] = {"data", "starts", "ends", "offsets", "durations"};
    static const Py_ssize_t items[] = {1, 8, 8, 8, 8};
    Views v = {.count = 0};
    if (unpack(args, "read_stats", 5, names, items, 3, &v)) return NULL;
    Py_buffer *b = v.views;
    if (!events_agree(b, 3)) {
        release(&v);
        PyErr_SetString(PyExc_TypeError, "read_stats: the arrays' sizes do not agree");
        return NULL;
    }
    Reader rd = {.data = b[0].buf};
    Column out[6] = {{0}};
    int status;
    Py_BEGIN_ALLOW_THREADS
    status = read_each(&rd, b[0].len, b[1].buf, b[2].buf, b[1].len / 8, b[3].buf, b[4].buf,
                       to_columns, out);
    Py_END_ALLOW_THREADS
    release(&v);
    Column *columns[6] = {&out[0], &out[1], &out[2], &out[3], &out[4], &out[5]};
    return columns_tuple(columns, 6, status, &rd);
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
static int to_table(Reader *rd, const Stat *stat, Py_ssize_t event, void *sink) {
    Tables *t = sink;
    Py_ssize_t k = stat->kind ? find(&t->ids, stat->id) : -1;
    if (k < 0) return 0;
    Py_ssize_t cell = (Py_ssize_t)t->rows[k] * t->events + event;
    t->kinds[cell] = (int8_t)stat->kind;
    t->values[cell] = stat->bits;
    t->starts[cell] = stat->start;
    t->lengths[cell] = stat->length;
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
    static const char *const names[] = {"data", "starts", "ends", "ids", "rows", "offsets",
                                        "durations", "kinds", "values", "payload_starts",
                                        "payload_lengths"};
    static const Py_ssize_t items[] = {1, 8, 8, 8, 8, 8, 8, 1, 8, 8, 8};
    Views v = {.count = 0};
    if (unpack(args, "read_events", 11, names, items, 5, &v)) return NULL;
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
    int bad = !events_agree(b, 5) || b[4].len != b[3].len;
    bad |= b[8].len != cells * 8 || b[9].len != cells * 8 || b[10].len != cells * 8;
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
        status = read_each(&rd, b[0].len, b[1].buf, b[2].buf, n, b[5].buf, b[6].buf, to_table, &t);
        Py_END_ALLOW_THREADS
    }
    idset_free(&t.ids);
    release(&v);
    if (status) return fail(&rd);
    Py_RETURN_NONE;
}

/* pair_events' table: per (allocator, address) seen, the allocation waiting
 * for its free (-1: none). Open addressing; it holds the addresses, not the
 * events, so it stays small and in cache whatever the capture's length. */
typedef struct {
    int64_t address;
    int32_t owner;
    int32_t used;
    int64_t pending;
} Slot;

typedef struct {
    Slot *slots;
    size_t mask;
    size_t used;
} Table;

/* A key drawn once per process (module init): slots cannot be chosen from the
 * input. Unkeyed, the hash was a bijection of the address, so a capture could
 * put every address in one slot and make the probing quadratic (issue 37). */
static uint64_t hash_key[2] = {0x243f6a8885a308d3ULL, 0x13198a2e03707344ULL};

static inline uint64_t mix64(uint64_t x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

static inline size_t slot_hash(int32_t owner, int64_t address) {
    uint64_t x = ((uint64_t)address ^ hash_key[0]) + 0x9e3779b97f4a7c15ULL * ((uint64_t)(uint32_t)owner + 1);
    return (size_t)mix64(mix64(x) ^ hash_key[1]);
}

/* The slot of (owner, address): its own, or the empty one where it would go. */
static Slot *slot_of(const Table *t, int32_t owner, int64_t address) {
    for (size_t i = slot_hash(owner, address) & t->mask;; i = (i + 1) & t->mask) {
        Slot *s = &t->slots[i];
        if (!s->used || (s->owner == owner && s->address == address)) return s;
    }
}

static int table_grow(Table *t) {
    size_t capacity = t->slots ? 2 * (t->mask + 1) : 4096;
    Table grown = {PyMem_RawCalloc(capacity, sizeof(Slot)), capacity - 1, t->used};
    if (!grown.slots) return -1;
    for (size_t i = 0; t->slots && i <= t->mask; i++)
        if (t->slots[i].used) *slot_of(&grown, t->slots[i].owner, t->slots[i].address) = t->slots[i];
    PyMem_RawFree(t->slots);
    *t = grown;
    return 0;
}

PyDoc_STRVAR(pair_events_doc,
"pair_events(owner, address, known, is_allocation, allocations, frees, orphans)\n"
"    -> number of orphans\n\n"
"Events in time order: owner (int32, the allocator), address (int64, an id that\n"
"counts only where known, uint8, is 1), is_allocation (uint8). An allocation\n"
"pairs with the next event of its owner and address if that is a free. Writes\n"
"each allocation's event index to allocations and its free's (or -1) to frees\n"
"(one slot per allocation), and the frees that pair with nothing to orphans.");

static PyObject *pair_events(PyObject *self, PyObject *args) {
    static const char *const names[] = {"owner",       "address", "known", "is_allocation",
                                        "allocations", "frees",   "orphans"};
    static const Py_ssize_t items[] = {4, 8, 1, 1, 8, 8, 8};
    Views v = {.count = 0};
    if (unpack(args, "pair_events", 7, names, items, 4, &v)) return NULL;
    Py_buffer *b = v.views;
    Py_ssize_t n = b[0].len / 4, slots = b[4].len / 8, spare = b[6].len / 8;
    if (b[1].len / 8 != n || b[2].len != n || b[3].len != n || b[5].len / 8 != slots) {
        release(&v);
        PyErr_SetString(PyExc_TypeError, "one owner, address, known and is_allocation per "
                                         "event; one frees slot per allocations slot");
        return NULL;
    }
    const int32_t *owner = b[0].buf;
    const int64_t *address = b[1].buf;
    const uint8_t *known = b[2].buf, *is_alloc = b[3].buf;
    int64_t *allocs = b[4].buf, *frees = b[5].buf, *orphans = b[6].buf;
    Table table = {NULL, 0, 0};
    Py_ssize_t a = 0, o = 0;
    const char *error = NULL;
    int out_of_memory = 0;
    Py_BEGIN_ALLOW_THREADS
    out_of_memory = table_grow(&table) != 0;
    for (Py_ssize_t e = 0; e < n && !error && !out_of_memory; e++) {
        Slot *s = known[e] ? slot_of(&table, owner[e], address[e]) : NULL;
        if (is_alloc[e]) {
            if (a == slots) {
                error = "more allocations than slots";
                break;
            }
            allocs[a] = e;
            frees[a] = -1;
            if (s && !s->used) {  /* a new address: the table grows before it fills */
                if (2 * (table.used + 1) > table.mask + 1) {
                    if (table_grow(&table)) {
                        out_of_memory = 1;
                        break;
                    }
                    s = slot_of(&table, owner[e], address[e]);
                }
                *s = (Slot){address[e], owner[e], 1, -1};
                table.used++;
            }
            if (s) s->pending = a;
            a++;
        } else if (s && s->used && s->pending >= 0) {
            frees[s->pending] = e;
            s->pending = -1;
        } else if (o == spare) {
            error = "more orphans than slots";
        } else {
            orphans[o++] = e;
        }
    }
    Py_END_ALLOW_THREADS
    PyMem_RawFree(table.slots);
    release(&v);
    if (out_of_memory) return PyErr_NoMemory();
    if (!error && a != slots) error = "fewer allocations than slots";
    if (error) {
        PyErr_SetString(PyExc_ValueError, error);
        return NULL;
    }
    return PyLong_FromSsize_t(o);
}

/* ---- The BFC allocator replay (traceparse/analysis/predict_bfc.py simulate) ----
 *
 * The allocator model of traceparse/analysis/bfc.py, event by event, with the
 * same rules: requests rounded up to 256 bytes; the free chunk taken is the
 * smallest that fits, the lowest address among equals; it is split when at
 * least twice the request or when handing it out whole would waste 128 MiB;
 * a freed chunk merges with its free neighbours in its region; when nothing
 * fits a region is added (doubled until the request fits, and doubled after
 * one that was not enlarged), each below the last with a gap. Python's model
 * is the reference (tests/test_predict_bfc_native.py holds the two equal).
 *
 * Chunks are nodes in one array (indices stay valid when it grows), linked to
 * their neighbours in the region; the free ones are also in a treap ordered by
 * (size, address), so the best fit is one walk down it. Addresses are only
 * compared, so they start at 2**62 (Python's at 2**95); sizes or regions
 * beyond what int64 holds with room to spare stop the replay with
 * OverflowError, and the caller replays in Python instead. */

enum { REPLAY_ALLOC = 0, REPLAY_FREE = 1, REPLAY_PREFREE = 2 };
enum { REPLAY_OK = 0, REPLAY_NO_MEMORY = 1, REPLAY_OUT_OF_RANGE = 2 };
#define BFC_GRANULE 256
#define BFC_MAX_WASTE ((int64_t)128 << 20)
#define BFC_LARGEST ((int64_t)1 << 60)  /* a request or region beyond: OverflowError */
#define BFC_TOP ((int64_t)1 << 62)      /* the first region ends here */
#define BFC_BOTTOM (-((int64_t)1 << 61))

typedef struct {
    int64_t size, address;
    int64_t prev, next;   /* neighbours in the region (-1: none); next also links spare nodes */
    int64_t left, right;  /* children in the free treap (free chunks only) */
    uint64_t priority;
    int used;
} Chunk;

typedef struct {
    Chunk *c;
    int64_t count, capacity, spare;
    int64_t root;  /* the free treap, or -1 */
    int64_t in_use, region, next_base;
    uint64_t seed;
    Column regions;
    int status;
} Bfc;

static inline int chunk_before(const Chunk *a, const Chunk *b) {
    return a->size < b->size || (a->size == b->size && a->address < b->address);
}

/* Joins two treaps, every key of a below every key of b. */
static int64_t treap_join(Chunk *c, int64_t a, int64_t b) {
    if (a < 0) return b;
    if (b < 0) return a;
    if (c[a].priority > c[b].priority) {
        c[a].right = treap_join(c, c[a].right, b);
        return a;
    }
    c[b].left = treap_join(c, a, c[b].left);
    return b;
}

/* Splits treap t into keys below chunk k's (*low) and above (*high). */
static void treap_split(Chunk *c, int64_t t, const Chunk *k, int64_t *low, int64_t *high) {
    while (t >= 0) {
        if (chunk_before(&c[t], k)) {
            *low = t;
            low = &c[t].right;
            t = c[t].right;
        } else {
            *high = t;
            high = &c[t].left;
            t = c[t].left;
        }
    }
    *low = *high = -1;
}

static void treap_insert(Bfc *b, int64_t n) {
    Chunk *c = b->c;
    int64_t *link = &b->root;
    while (*link >= 0 && c[*link].priority > c[n].priority)
        link = chunk_before(&c[n], &c[*link]) ? &c[*link].left : &c[*link].right;
    treap_split(c, *link, &c[n], &c[n].left, &c[n].right);
    *link = n;
}

static void treap_erase(Bfc *b, int64_t n) {
    Chunk *c = b->c;
    int64_t *link = &b->root;
    while (*link != n) link = chunk_before(&c[n], &c[*link]) ? &c[*link].left : &c[*link].right;
    *link = treap_join(c, c[n].left, c[n].right);
}

/* The smallest free chunk of at least need bytes, the lowest address among equals. */
static int64_t treap_fit(const Bfc *b, int64_t need) {
    int64_t best = -1;
    for (int64_t t = b->root; t >= 0;) {
        if (b->c[t].size >= need) {
            best = t;
            t = b->c[t].left;
        } else {
            t = b->c[t].right;
        }
    }
    return best;
}

static int64_t chunk_new(Bfc *b, int64_t size, int64_t address) {
    int64_t n;
    if (b->spare >= 0) {
        n = b->spare;
        b->spare = b->c[n].next;
    } else {
        if (b->count == b->capacity) {
            int64_t capacity = b->capacity ? 2 * b->capacity : 1024;
            Chunk *grown = PyMem_RawRealloc(b->c, (size_t)capacity * sizeof(Chunk));
            if (!grown) {
                b->status = REPLAY_NO_MEMORY;
                return -1;
            }
            b->c = grown;
            b->capacity = capacity;
        }
        n = b->count++;
    }
    b->seed ^= b->seed << 13;  /* xorshift64: the treap's priorities */
    b->seed ^= b->seed >> 7;
    b->seed ^= b->seed << 17;
    b->c[n] = (Chunk){size, address, -1, -1, -1, -1, b->seed, 0};
    return n;
}

static inline void chunk_drop(Bfc *b, int64_t n) {
    b->c[n].next = b->spare;
    b->spare = n;
}

static int64_t bfc_rounded(Bfc *b, int64_t requested) {
    if (requested <= BFC_GRANULE) return BFC_GRANULE;
    if (requested > BFC_LARGEST) {
        b->status = REPLAY_OUT_OF_RANGE;
        return -1;
    }
    return (requested + BFC_GRANULE - 1) / BFC_GRANULE * BFC_GRANULE;
}

/* A free region of size bytes below the last one, a granule apart. */
static void bfc_region(Bfc *b, int64_t size) {
    if (size > BFC_LARGEST || b->next_base - BFC_BOTTOM < size + BFC_GRANULE) {
        b->status = REPLAY_OUT_OF_RANGE;
        return;
    }
    int64_t address = b->next_base - size;
    b->next_base = address - BFC_GRANULE;
    if (column_append(&b->regions, size)) {
        b->status = REPLAY_NO_MEMORY;
        return;
    }
    int64_t n = chunk_new(b, size, address);
    if (n >= 0) treap_insert(b, n);
}

static void bfc_extend(Bfc *b, int64_t need) {
    int grew = 0;
    while (need > b->region) {
        if (b->region > BFC_LARGEST || b->region <= 0) {
            b->status = REPLAY_OUT_OF_RANGE;
            return;
        }
        b->region *= 2;
        grew = 1;
    }
    int64_t size = b->region;
    if (!grew) {
        if (b->region > BFC_LARGEST) {
            b->status = REPLAY_OUT_OF_RANGE;
            return;
        }
        b->region *= 2;
    }
    bfc_region(b, size);
}

/* The chunk handed out for a request (-1 and a status on failure). */
static int64_t bfc_allocate(Bfc *b, int64_t requested) {
    int64_t need = bfc_rounded(b, requested);
    if (b->status) return -1;
    int64_t n = treap_fit(b, need);
    if (n < 0) {
        bfc_extend(b, need);
        if (b->status) return -1;
        n = treap_fit(b, need);
    }
    treap_erase(b, n);
    int64_t size = b->c[n].size;
    if (size >= 2 * need || size - need >= BFC_MAX_WASTE) {
        int64_t m = chunk_new(b, size - need, b->c[n].address + need);
        if (m < 0) return -1;
        Chunk *c = b->c;  /* chunk_new may have moved the array */
        c[m].prev = n;
        c[m].next = c[n].next;
        if (c[n].next >= 0) c[c[n].next].prev = m;
        c[n].next = m;
        c[n].size = need;
        treap_insert(b, m);
    }
    b->c[n].used = 1;
    b->in_use += b->c[n].size;
    return n;
}

static void bfc_free(Bfc *b, int64_t n) {
    Chunk *c = b->c;
    c[n].used = 0;
    b->in_use -= c[n].size;
    int64_t after = c[n].next;
    if (after >= 0 && !c[after].used) {
        treap_erase(b, after);
        c[n].size += c[after].size;
        c[n].next = c[after].next;
        if (c[n].next >= 0) c[c[n].next].prev = n;
        chunk_drop(b, after);
    }
    int64_t before = c[n].prev;
    if (before >= 0 && !c[before].used) {
        treap_erase(b, before);
        c[before].size += c[n].size;
        c[before].next = c[n].next;
        if (c[before].next >= 0) c[c[before].next].prev = before;
        chunk_drop(b, n);
        n = before;
    }
    treap_insert(b, n);
}

PyDoc_STRVAR(bfc_replay_doc,
"bfc_replay(params, held, pre, ghosts, kinds, refs, places, warm, requests, counter, chunks)\n"
"    -> regions (a Column of int64)\n\n"
"predict_bfc.simulate in one pass. params (int64): first region, the counter\n"
"before the capture less the chunks it frees unseen, 1 to warm up. held, pre,\n"
"ghosts (int64): chunks held and kept, held and freed in the capture, free\n"
"regions added. Per item: kinds (uint8: 0 allocation, 1 its end, 2 a free of\n"
"pre[ref]), refs and places (int32: the allocation row or pre index, the\n"
"event it happens at); warm (int64): items of the warm-up. requests (int64,\n"
"per allocation row, 0 or less: not sent). Writes counter (float64, the in-use\n"
"bytes after each event, carried forward) and chunks (int64, per allocation\n"
"row). OverflowError where the sizes leave int64's range (replay in Python).");

static PyObject *bfc_replay(PyObject *self, PyObject *args) {
    static const char *const names[] = {"params", "held",     "pre",   "ghosts",
                                        "kinds",  "refs",     "places", "warm",
                                        "requests", "counter", "chunks"};
    /* refs and places are int32: two per event of a capture of millions (the caller
       replays in Python past int32's range). */
    static const Py_ssize_t items[] = {8, 8, 8, 8, 1, 4, 4, 8, 8, 8, 8};
    Views v = {.count = 0};
    if (unpack(args, "bfc_replay", 11, names, items, 9, &v)) return NULL;
    Py_buffer *a = v.views;
    Py_ssize_t n_held = a[1].len / 8, n_pre = a[2].len / 8, n_ghosts = a[3].len / 8;
    Py_ssize_t n_items = a[4].len, n_warm = a[7].len / 8, n_rows = a[8].len / 8;
    Py_ssize_t n_events = a[9].len / 8;
    if (a[0].len != 3 * 8 || a[5].len / 4 != n_items || a[6].len / 4 != n_items ||
        a[10].len / 8 != n_rows) {
        release(&v);
        PyErr_SetString(PyExc_TypeError, "bfc_replay: three params; one ref and place per "
                                         "item; one chunks slot per request");
        return NULL;
    }
    const int64_t *params = a[0].buf, *held = a[1].buf, *pre = a[2].buf, *ghosts = a[3].buf;
    const uint8_t *kinds = a[4].buf;
    const int32_t *refs = a[5].buf, *places = a[6].buf;
    const int64_t *warm = a[7].buf, *requests = a[8].buf;
    double *counter = a[9].buf;
    int64_t *chunks = a[10].buf;
    Bfc b = {.c = NULL, .spare = -1, .root = -1, .region = params[0], .next_base = BFC_TOP,
             .seed = 0x9E3779B97F4A7C15ull, .regions = {NULL, 0, 0}};
    int64_t *handle = NULL, *pre_handle = NULL, *order = NULL;
    const char *error = NULL;
    Py_BEGIN_ALLOW_THREADS
    handle = PyMem_RawMalloc((size_t)(n_rows ? n_rows : 1) * sizeof(int64_t));
    pre_handle = PyMem_RawMalloc((size_t)(n_pre ? n_pre : 1) * sizeof(int64_t));
    order = PyMem_RawMalloc((size_t)(n_warm ? n_warm : 1) * sizeof(int64_t));
    if (!handle || !pre_handle || !order) b.status = REPLAY_NO_MEMORY;
    for (Py_ssize_t i = 0; i < n_rows && !b.status; i++) {
        handle[i] = -1;
        chunks[i] = 0;
    }
    for (Py_ssize_t i = 0; i < n_events && !b.status; i++) counter[i] = NAN;
    /* The history before the capture, as simulate rebuilds it. */
    for (Py_ssize_t i = 0; i < n_held && !b.status; i++) bfc_allocate(&b, held[i]);
    int64_t rest = b.status ? 0 : params[1] - b.in_use;
    rest = rest > 0 ? rest / BFC_GRANULE * BFC_GRANULE : 0;
    for (int bit = 62; bit >= 0 && !b.status; bit--)
        if (rest >> bit & 1) bfc_allocate(&b, (int64_t)1 << bit);
    for (Py_ssize_t i = 0; i < n_pre && !b.status; i++) pre_handle[i] = bfc_allocate(&b, pre[i]);
    for (Py_ssize_t i = 0; i < n_ghosts && !b.status; i++) {
        int64_t size = bfc_rounded(&b, ghosts[i]);
        if (!b.status) bfc_region(&b, size);
    }
    Py_ssize_t live = 0;
    for (Py_ssize_t w = 0; params[2] && w < n_warm && !b.status && !error; w++) {
        int64_t i = warm[w];
        if (i < 0 || i >= n_items) {
            error = "a warm-up item out of range";
            break;
        }
        int64_t ref = refs[i];
        if (ref < 0 || ref >= n_rows) {
            if (kinds[i] == REPLAY_ALLOC) error = "an allocation row out of range";
            continue;  /* Python: a ref not in its live set frees nothing */
        }
        if (kinds[i] == REPLAY_ALLOC) {
            if (requests[ref] > 0) {
                handle[ref] = bfc_allocate(&b, requests[ref]);
                order[live++] = ref;
            }
        } else if (handle[ref] >= 0) {
            bfc_free(&b, handle[ref]);
            handle[ref] = -1;
        }
    }
    for (Py_ssize_t k = 0; k < live && !b.status; k++) {
        if (handle[order[k]] >= 0) bfc_free(&b, handle[order[k]]);
        handle[order[k]] = -1;
    }
    /* The captured events. */
    for (Py_ssize_t i = 0; i < n_items && !b.status && !error; i++) {
        int64_t ref = refs[i], place = places[i];
        if (place < 0 || place >= n_events) {
            error = "an item's event out of range";
        } else if (kinds[i] == REPLAY_PREFREE) {
            if (ref < 0 || ref >= n_pre || pre_handle[ref] < 0 || !b.c[pre_handle[ref]].used)
                error = "a chunk from before the capture freed twice or out of range";
            else {
                bfc_free(&b, pre_handle[ref]);
                pre_handle[ref] = -1;
            }
        } else if (ref < 0 || ref >= n_rows) {
            error = "an allocation row out of range";
        } else if (kinds[i] == REPLAY_ALLOC) {
            if (requests[ref] > 0) {
                handle[ref] = bfc_allocate(&b, requests[ref]);
                if (!b.status) chunks[ref] = b.c[handle[ref]].size;
            }
        } else if (handle[ref] >= 0) {
            bfc_free(&b, handle[ref]);
            handle[ref] = -1;
        }
        if (!error && !b.status) counter[place] = (double)b.in_use;
    }
    /* Carried forward, 0 before the first item (simulate's ffill). */
    double last = 0.0;
    for (Py_ssize_t i = 0; i < n_events; i++) {
        if (isnan(counter[i]))
            counter[i] = last;
        else
            last = counter[i];
    }
    Py_END_ALLOW_THREADS
    PyMem_RawFree(handle);
    PyMem_RawFree(pre_handle);
    PyMem_RawFree(order);
    PyMem_RawFree(b.c);
    release(&v);
    if (b.status == REPLAY_NO_MEMORY) error = "out of memory";
    if (b.status || error) {
        PyMem_RawFree(b.regions.data);
        if (b.status == REPLAY_NO_MEMORY) return PyErr_NoMemory();
        PyErr_SetString(b.status ? PyExc_OverflowError : PyExc_ValueError,
                        b.status ? "bfc_replay: sizes beyond int64's range" : error);
        return NULL;
    }
    PyObject *regions = column_take(&b.regions);
    PyMem_RawFree(b.regions.data);
    return regions;
}

static PyMethodDef methods[] = {
    {"scan_lines", scan_lines, METH_VARARGS, scan_lines_doc},
    {"pair_events", pair_events, METH_VARARGS, pair_events_doc},
    {"read_events", read_events, METH_VARARGS, read_events_doc},
    {"read_stats", read_stats, METH_VARARGS, read_stats_doc},
    {"bfc_replay", bfc_replay, METH_VARARGS, bfc_replay_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_native",
    "Compiled loops of traceparse's decoder (see traceparse.decode.native).", -1, methods,
};

/* hash_key from os.urandom. */
static int draw_hash_key(void) {
    PyObject *os = PyImport_ImportModule("os");
    PyObject *drawn = os ? PyObject_CallMethod(os, "urandom", "i", (int)sizeof hash_key) : NULL;
    Py_XDECREF(os);
    if (!drawn) return -1;
    int ok = PyBytes_Check(drawn) && PyBytes_GET_SIZE(drawn) == (Py_ssize_t)sizeof hash_key;
    if (ok) memcpy(hash_key, PyBytes_AS_STRING(drawn), sizeof hash_key);
    Py_DECREF(drawn);
    if (!ok) PyErr_SetString(PyExc_RuntimeError, "os.urandom gave no key");
    return ok ? 0 : -1;
}

PyMODINIT_FUNC PyInit__native(void) {
    if (PyType_Ready(&OwnedColumnType) < 0 || draw_hash_key() < 0) return NULL;
    return PyModule_Create(&module);
}
