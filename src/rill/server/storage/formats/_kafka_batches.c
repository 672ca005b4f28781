/*
 * _kafka_batches: the C twin of rill.server.storage.formats.kafka_v2.walk_records_python, one unit
 * of the ``_stamp`` module (_stamp.c registers ``walk_kafka_records``): the per-record walk of a
 * produced Kafka RecordBatch v2's (uncompressed, or inflated) records block, which a Kafka
 * broker reads record by record before it appends a client's batch (its LogValidator). Same
 * answers, same texts as the reference; tests/server/storage/formats/test_kafka_v2_checks.py holds
 * them to it.
 *
 * walk_kafka_records(block, count)
 *     -> int   the largest timestampDelta of the block's ``count`` records (it holds them
 *              exactly: lengths, fields, offsetDeltas 0..count-1, nothing after the last)
 *     -> str   why it does not: "record {i}: ..." or "{n} bytes after the last of {count}
 *              records"
 *
 * Varints are zig-zag, at most 10 bytes and 64 bits (a longer or wider one is refused); the
 * GIL is released for large blocks (the buffer is pinned by its export, nothing Python is
 * touched until it is taken back).
 */

#include "_stamp.h"

enum {
    WALK_OK = 0,
    WALK_TRUNCATED,      /* "record {i}: overruns its length {length}" (or the block) */
    WALK_WIDE_VARINT,    /* "record {i}: a varint longer than 64 bits" */
    WALK_NEGATIVE_LENGTH,/* "record {i}: negative length {value}" */
    WALK_LENGTH_OVERRUN, /* "record {i}: length {value} overruns the block" */
    WALK_OFFSET_DELTA,   /* "record {i}: offsetDelta {value}, not {i} (offsets 0..count-1)" */
    WALK_KEY_LENGTH,     /* "record {i}: key length {value}" */
    WALK_VALUE_LENGTH,   /* "record {i}: value length {value}" */
    WALK_HEADER_COUNT,   /* "record {i}: header count {value}" */
    WALK_HEADER_KEY,     /* "record {i}: header key length {value}" */
    WALK_HEADER_VALUE,   /* "record {i}: header value length {value}" */
    WALK_SHORT_RECORD,   /* "record {i}: {value} bytes left inside its length {length}" */
    WALK_TRAILING,       /* "{value} bytes after the last of {count} records" */
};

typedef struct {
    int fault;
    long long record;
    long long value;
    long long length;
} walk_fault;

/* The zig-zag varint at ``*at`` (before ``end``); WALK_OK or why not. */
static inline int read_zigzag(const uint8_t *data, Py_ssize_t *at, Py_ssize_t end,
                              int64_t *value)
{
    uint64_t result = 0;
    for (int shift = 0;; shift += 7) {
        if (*at >= end) return WALK_TRUNCATED;
        uint8_t byte = data[(*at)++];
        if (shift == 63 && (byte & 0x7E)) return WALK_WIDE_VARINT;
        result |= (uint64_t)(byte & 0x7F) << shift;
        if (byte < 0x80) break;
        if (shift == 63) return WALK_WIDE_VARINT;
    }
    *value = (int64_t)(result >> 1) ^ -(int64_t)(result & 1);
    return WALK_OK;
}

/* A key or value (length -1: null) at ``*at``: skipped; WALK_OK or ``fault``. */
static inline int skip_blob(const uint8_t *data, Py_ssize_t *at, Py_ssize_t end, int fault,
                            int64_t minimum, int64_t *length)
{
    int status = read_zigzag(data, at, end, length);
    if (status) return status;
    if (*length < minimum) return fault;
    if (*length > 0) {
        if (*length > end - *at) return WALK_TRUNCATED;
        *at += (Py_ssize_t)*length;
    }
    return WALK_OK;
}

static int walk(const uint8_t *data, Py_ssize_t size, long long count, int64_t *max_delta,
                walk_fault *f)
{
    Py_ssize_t at = 0;
    int64_t largest = INT64_MIN;
    for (long long i = 0; i < count; i++) {
        int64_t length, value;
        f->record = i;
        int status = read_zigzag(data, &at, size, &length);
        if (status) { f->length = -1; f->fault = status; return -1; }
        f->length = length;
        if (length < 0) { f->value = length; f->fault = WALK_NEGATIVE_LENGTH; return -1; }
        if (length > size - at) { f->value = length; f->fault = WALK_LENGTH_OVERRUN; return -1; }
        Py_ssize_t end = at + (Py_ssize_t)length;
        if (at >= end) { f->fault = WALK_TRUNCATED; return -1; }
        at++; /* attributes */
        if ((status = read_zigzag(data, &at, end, &value))) { f->fault = status; return -1; }
        if (value > largest) largest = value;
        if ((status = read_zigzag(data, &at, end, &value))) { f->fault = status; return -1; }
        if (value != i) { f->value = value; f->fault = WALK_OFFSET_DELTA; return -1; }
        if ((status = skip_blob(data, &at, end, WALK_KEY_LENGTH, -1, &value)) ||
            (status = skip_blob(data, &at, end, WALK_VALUE_LENGTH, -1, &value))) {
            f->value = value; f->fault = status; return -1;
        }
        int64_t headers;
        if ((status = read_zigzag(data, &at, end, &headers))) { f->fault = status; return -1; }
        if (headers < 0) { f->value = headers; f->fault = WALK_HEADER_COUNT; return -1; }
        for (int64_t h = 0; h < headers; h++) {
            if ((status = skip_blob(data, &at, end, WALK_HEADER_KEY, 0, &value)) ||
                (status = skip_blob(data, &at, end, WALK_HEADER_VALUE, -1, &value))) {
                f->value = value; f->fault = status; return -1;
            }
        }
        if (at != end) { f->value = end - at; f->fault = WALK_SHORT_RECORD; return -1; }
    }
    if (at != size) {
        f->value = size - at; f->record = count; f->fault = WALK_TRAILING; return -1;
    }
    *max_delta = largest;
    return 0;
}

static PyObject *walk_fault_text(const walk_fault *f)
{
    long long i = f->record, value = f->value, length = f->length;
    switch (f->fault) {
    case WALK_TRUNCATED:
        if (length < 0) return PyUnicode_FromFormat("record %lld: overruns the block", i);
        return PyUnicode_FromFormat("record %lld: overruns its length %lld", i, length);
    case WALK_WIDE_VARINT:
        return PyUnicode_FromFormat("record %lld: a varint longer than 64 bits", i);
    case WALK_NEGATIVE_LENGTH:
        return PyUnicode_FromFormat("record %lld: negative length %lld", i, value);
    case WALK_LENGTH_OVERRUN:
        return PyUnicode_FromFormat("record %lld: length %lld overruns the block", i, value);
    case WALK_OFFSET_DELTA:
        return PyUnicode_FromFormat("record %lld: offsetDelta %lld, not %lld (offsets "
                                    "0..count-1)", i, value, i);
    case WALK_KEY_LENGTH:
        return PyUnicode_FromFormat("record %lld: key length %lld", i, value);
    case WALK_VALUE_LENGTH:
        return PyUnicode_FromFormat("record %lld: value length %lld", i, value);
    case WALK_HEADER_COUNT:
        return PyUnicode_FromFormat("record %lld: header count %lld", i, value);
    case WALK_HEADER_KEY:
        return PyUnicode_FromFormat("record %lld: header key length %lld", i, value);
    case WALK_HEADER_VALUE:
        return PyUnicode_FromFormat("record %lld: header value length %lld", i, value);
    case WALK_SHORT_RECORD:
        return PyUnicode_FromFormat("record %lld: %lld bytes left inside its length %lld", i,
                                    value, length);
    case WALK_TRAILING:
        return PyUnicode_FromFormat("%lld bytes after the last of %lld records", value, i);
    default:
        PyErr_SetString(PyExc_SystemError, "_stamp: no walk fault to word");
        return NULL;
    }
}

PyObject *walk_kafka_records(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "walk_kafka_records(block, count)");
        return NULL;
    }
    long long count = PyLong_AsLongLong(args[1]);
    if (count == -1 && PyErr_Occurred()) return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) return NULL;
    walk_fault fault = {0, 0, 0, 0};
    int64_t largest = 0;
    int failed;
    if (view.len >= GIL_RELEASE_MIN_BYTES) {
        Py_BEGIN_ALLOW_THREADS
        failed = walk(view.buf, view.len, count, &largest, &fault);
        Py_END_ALLOW_THREADS
    } else {
        failed = walk(view.buf, view.len, count, &largest, &fault);
    }
    PyBuffer_Release(&view);
    if (failed) return walk_fault_text(&fault);
    return PyLong_FromLongLong(largest);
}
