/*
 * _bundles: the C twins of the per-message loops of TANK bundles
 * (rill.protocol.tank.bundles.decode_set_python / encode_set_python, the reference).
 *
 * Owns: walking a TANK message set (tank-wire-reference §4.2, §4.4) into columns, and building
 * one from columns. Headers, Snappy and chunk framing stay in bundles.py (once per bundle).
 *
 * decode_set(data, count, sparse, first_seq, last_seq)
 *     -> (keys, values, timestamps, seqs)          four lists of ``count`` items
 *     -> (kind, text)                              malformed: the reference's error kind and text
 * encode_set(keys | None, values, timestamps, seqs | None)
 *     -> bytes                                     the message set
 *     -> str                                       the columns are invalid: the reference's text
 * encode_records(keys | None, values, timestamps, base_timestamp)
 *     -> bytes                                     a RecordBatch v2 records section (no headers,
 *                                                  offset deltas 0..n-1, attributes 0)
 *     -> str                                       the columns are invalid
 * decode_records(records, count, base_timestamp, append_time)
 *     -> (keys, values, timestamps, offset_deltas) the records of an (inflated) batch; keys
 *                                                  longer than 255 bytes become None, null values
 *                                                  b"", negative timestamps 0
 *     -> (kind, text)                              malformed
 * records_to_set(records, count, base_timestamp, append_time, framed=False)
 *     -> (message_set, first_delta, last_delta)    the same records as a non-sparse TANK
 *                                                  message set (encode_set of decode_records'
 *                                                  columns), no Python object per record;
 *                                                  framed: as one whole uncompressed bundle in
 *                                                  its chunk frame, varint(len) ++ header ++
 *                                                  set, written in place (no copy after)
 *     -> (kind, text)                              malformed
 * stored_chunk(data)
 *     -> (chunk, first_seq)                        stored RecordBatch v2 bytes (whole batches;
 *                                                  a partial one at the end is left) as a
 *                                                  Consume chunk: each uncompressed batch one
 *                                                  non-sparse bundle in its chunk frame, back to
 *                                                  back (records_to_set, framed), control and
 *                                                  empty batches left out; first_seq the first
 *                                                  bundle's (its first offset + 1), (b"", 0)
 *                                                  when there is none
 *     -> None                                      a batch is compressed, malformed, has holes
 *                                                  or does not continue the one before: the
 *                                                  reference (record_batches.stored_chunk_python)
 *                                                  takes such data its own way
 * set_to_records(data, count, head_room=0)
 *     -> (records, base_timestamp, max_timestamp)  a non-sparse message set as a RecordBatch v2
 *                                                  records section (encode_records of
 *                                                  decode_set's columns, base = the first
 *                                                  message's time), no Python object per message:
 *                                                  the Produce hot path; with head_room > 0 a
 *                                                  bytearray whose first head_room bytes (zero)
 *                                                  are left for the batch header, written there
 *                                                  by the caller (no copy of the records after)
 *     -> (kind, text)                              malformed (decode_set's kind and text)
 *     -> str                                       valid, but no batch can hold it
 *
 * Invariants: every length is bounds-checked before it is used; nothing is read past ``data``;
 * ``count`` is checked against the input size before any list is allocated (a message takes at
 * least 2 bytes), so a lying count costs nothing; encode computes the exact size in a first
 * pass, allocates once and writes in a second, checking every write against the allocation
 * (a buffer whose size changed between the passes is a RuntimeError, never an overrun).
 * Results, error kinds and texts are the reference's, byte for byte
 * (tests/protocol/tank/test_bundle_twins.py).
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_varint.h"

#define ERR_TRUNCATED 1
#define ERR_VARINT 2
#define ERR_BUNDLE 3
#define ERR_LENGTH 4

#define MSG_HAVE_KEY 0x01
#define MSG_USE_LAST_TS 0x02
#define MSG_PREV_PLUS_ONE 0x04
#define MSG_KNOWN_FLAGS 0x07
#define MAX_SEQ 0xFFFFFFFFFFFFFFFEULL
#define MAX_U32 0xFFFFFFFFULL

static PyObject *fault(int kind, const char *format, ...) {
    char text[160];
    va_list args;
    va_start(args, format);
    vsnprintf(text, sizeof text, format, args);
    va_end(args);
    return Py_BuildValue("(is)", kind, text);
}

static inline uint64_t load_u64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

static inline void store_u64(uint8_t *p, uint64_t v) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    memcpy(p, &v, 8);
}

/* "O&" converter: a Python int in 0..2^64-1, else OverflowError/TypeError (never wraps) */
static int to_u64(PyObject *object, void *address) {
    unsigned long long value = PyLong_AsUnsignedLongLong(object);
    if (value == (unsigned long long)-1 && PyErr_Occurred()) return 0;
    *(unsigned long long *)address = value;
    return 1;
}

/* One message of a message set, as parsed: where its key and value are (no copy). */
typedef struct {
    uint64_t ts;
    Py_ssize_t key_at, key_size; /* key_size -1: none */
    Py_ssize_t value_at, value_size;
} SetMessage;

/* The message after its flags byte (and, in a sparse set, its sequence delta): its timestamp
 * (the last one when MSG_USE_LAST_TS), key and value; *offset moves past it. -1 with *out set
 * (decode_set's kind and text) when it is malformed. */
static int parse_message_body(const uint8_t *data, Py_ssize_t end, Py_ssize_t *offset,
                              Py_ssize_t index, uint8_t flags, uint64_t *timestamp,
                              SetMessage *msg, PyObject **out) {
    Py_ssize_t at = *offset;
    if (!(flags & MSG_USE_LAST_TS)) {
        if (end - at < 8) goto truncated;
        *timestamp = load_u64(data + at);
        at += 8;
    }
    msg->ts = *timestamp;
    msg->key_size = -1;
    if (flags & MSG_HAVE_KEY) {
        if (at >= end) goto truncated;
        Py_ssize_t size = data[at++];
        if (end - at < size) goto truncated;
        msg->key_at = at;
        msg->key_size = size;
        at += size;
    }
    uint64_t size;
    int bad = read_varint(data, end, &at, &size);
    if (bad == 1) goto truncated;
    if (bad == 2) {
        *out = fault(ERR_VARINT, "message %zd: varint longer than 32 bits", index);
        return -1;
    }
    if ((uint64_t)(end - at) < size) goto truncated;
    msg->value_at = at;
    msg->value_size = (Py_ssize_t)size;
    *offset = at + (Py_ssize_t)size;
    return 0;
truncated:
    *out = fault(ERR_TRUNCATED, "message %zd: the message set ends inside it", index);
    return -1;
}

/* A message's flags byte: -1 with *out set when it is missing or holds unknown flags. */
static int parse_flags(const uint8_t *data, Py_ssize_t end, Py_ssize_t *offset, Py_ssize_t index,
                       uint8_t *flags, PyObject **out) {
    if (*offset >= end) {
        *out = fault(ERR_TRUNCATED, "message %zd: the message set ends inside it", index);
        return -1;
    }
    *flags = data[(*offset)++];
    if (*flags & ~MSG_KNOWN_FLAGS) {
        *out = fault(ERR_BUNDLE, "message %zd: unknown flags 0x%02x", index, *flags);
        return -1;
    }
    return 0;
}

/* A message of a non-sparse set, flags included. */
static int parse_message(const uint8_t *data, Py_ssize_t end, Py_ssize_t *offset, Py_ssize_t index,
                         uint64_t *timestamp, SetMessage *msg, PyObject **out) {
    uint8_t flags;
    if (parse_flags(data, end, offset, index, &flags, out) < 0) return -1;
    return parse_message_body(data, end, offset, index, flags, timestamp, msg, out);
}

static PyObject *decode_set(PyObject *module, PyObject *args) {
    Py_buffer buffer;
    unsigned long long count_arg, first_seq, last_seq;
    int sparse;
    if (!PyArg_ParseTuple(args, "y*O&pO&O&", &buffer, to_u64, &count_arg, &sparse, to_u64,
                          &first_seq, to_u64, &last_seq))
        return NULL;
    const uint8_t *data = buffer.buf;
    Py_ssize_t end = buffer.len;
    PyObject *keys = NULL, *values = NULL, *timestamps = NULL, *seqs = NULL, *result = NULL;
    if (count_arg > (unsigned long long)(end / 2)) {
        result = fault(ERR_TRUNCATED, "%llu messages cannot fit in %zd bytes", count_arg, end);
        goto done;
    }
    Py_ssize_t count = (Py_ssize_t)count_arg;
    if (!(keys = PyList_New(count)) || !(values = PyList_New(count)) ||
        !(timestamps = PyList_New(count)) || !(seqs = PyList_New(count)))
        goto done;
    Py_ssize_t offset = 0;
    uint64_t timestamp = 0;
    uint64_t previous = sparse ? first_seq - 1 : 0;
    uint64_t seq = 0;
    PyObject *last_ts_object = NULL; /* borrowed from the timestamps list */
    for (Py_ssize_t index = 0; index < count; index++) {
        uint8_t flags;
        if (parse_flags(data, end, &offset, index, &flags, &result) < 0) goto done;
        if (sparse) {
            if (flags & MSG_PREV_PLUS_ONE) {
                seq = previous + 1;
            } else if (index == 0) {
                seq = first_seq;
            } else if (index == count - 1) {
                seq = last_seq;
            } else {
                uint64_t delta;
                int bad = read_varint(data, end, &offset, &delta);
                if (bad == 1) goto truncated;
                if (bad == 2) {
                    result = fault(ERR_VARINT, "message %zd: varint longer than 32 bits", index);
                    goto done;
                }
                seq = previous + delta + 1;
                if (seq < previous) seq = UINT64_MAX;
            }
            if (index && seq <= previous) {
                result = fault(ERR_BUNDLE, "message %zd: sequence numbers do not increase", index);
                goto done;
            }
            if (seq > MAX_SEQ) {
                result = fault(ERR_BUNDLE, "message %zd: sequence number above 2^64-2", index);
                goto done;
            }
            previous = seq;
        } else {
            seq = first_seq + (uint64_t)index;
        }
        SetMessage msg;
        if (parse_message_body(data, end, &offset, index, flags, &timestamp, &msg, &result) < 0)
            goto done;
        PyObject *ts_object;
        if (!(flags & MSG_USE_LAST_TS) || last_ts_object == NULL) {
            if (!(ts_object = PyLong_FromUnsignedLongLong(msg.ts))) goto done;
            last_ts_object = ts_object;
        } else {
            ts_object = last_ts_object;
            Py_INCREF(ts_object);
        }
        PyList_SET_ITEM(timestamps, index, ts_object);
        PyObject *key;
        if (msg.key_size >= 0) {
            if (!(key = PyBytes_FromStringAndSize((const char *)data + msg.key_at, msg.key_size)))
                goto done;
        } else {
            key = Py_None;
            Py_INCREF(key);
        }
        PyList_SET_ITEM(keys, index, key);
        PyObject *value = PyBytes_FromStringAndSize((const char *)data + msg.value_at,
                                                    msg.value_size);
        if (!value) goto done;
        PyList_SET_ITEM(values, index, value);
        PyObject *seq_object = PyLong_FromUnsignedLongLong(seq);
        if (!seq_object) goto done;
        PyList_SET_ITEM(seqs, index, seq_object);
        continue;
    truncated:
        result = fault(ERR_TRUNCATED, "message %zd: the message set ends inside it", index);
        goto done;
    }
    if (sparse && count && seq != last_seq) {
        result = fault(ERR_BUNDLE, "the last sequence number disagrees with the header");
        goto done;
    }
    if (offset != end) {
        result = fault(ERR_LENGTH, "%zd bytes left after the last message", end - offset);
        goto done;
    }
    result = PyTuple_Pack(4, keys, values, timestamps, seqs);
done:
    /* lists are created with NULL items; Py_DECREF of a partly filled list is safe */
    Py_XDECREF(keys);
    Py_XDECREF(values);
    Py_XDECREF(timestamps);
    Py_XDECREF(seqs);
    PyBuffer_Release(&buffer);
    return result;
}

static inline Py_ssize_t varint_size(uint64_t value) {
    Py_ssize_t size = 1;
    while (value >= 0x80) {
        value >>= 7;
        size++;
    }
    return size;
}

static inline uint8_t *write_varint(uint8_t *out, uint64_t value) {
    while (value >= 0x80) {
        *out++ = (uint8_t)((value & 0x7f) | 0x80);
        value >>= 7;
    }
    *out++ = (uint8_t)value;
    return out;
}

/* a bytes-like item: pointer and size (bytes fast path; anything with the buffer protocol) */
typedef struct {
    const char *data;
    Py_ssize_t size;
    int has_buffer;
    Py_buffer view;
} Item;

static int item_get(PyObject *object, Item *item) {
    item->has_buffer = 0;
    if (PyBytes_CheckExact(object)) {
        item->data = PyBytes_AS_STRING(object);
        item->size = PyBytes_GET_SIZE(object);
        return 0;
    }
    if (PyObject_GetBuffer(object, &item->view, PyBUF_CONTIG_RO) < 0) return -1;
    item->has_buffer = 1;
    item->data = item->view.buf;
    item->size = item->view.len;
    return 0;
}

static void item_release(Item *item) {
    if (item->has_buffer) PyBuffer_Release(&item->view);
    item->has_buffer = 0;
}

/* a column item as uint64, or -1 with an exception / 1 when out of range */
static int as_u64(PyObject *object, uint64_t *value) {
    if (!PyLong_Check(object)) {
        PyErr_Format(PyExc_TypeError, "an int is needed, not %.100s", Py_TYPE(object)->tp_name);
        return -1;
    }
    int overflow = 0;
    long long small = PyLong_AsLongLongAndOverflow(object, &overflow);
    if (small == -1 && PyErr_Occurred()) return -1;
    if (!overflow) {
        if (small < 0) return 1;
        *value = (uint64_t)small;
        return 0;
    }
    if (overflow < 0) return 1;
    unsigned long long big = PyLong_AsUnsignedLongLong(object);
    if (big == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        return 1;
    }
    *value = big;
    return 0;
}

static PyObject *encode_set(PyObject *module, PyObject *args) {
    PyObject *keys_arg, *values_arg, *timestamps_arg, *seqs_arg;
    if (!PyArg_ParseTuple(args, "OOOO", &keys_arg, &values_arg, &timestamps_arg, &seqs_arg))
        return NULL;
    PyObject *keys = NULL, *values = NULL, *timestamps = NULL, *seqs = NULL, *result = NULL;
    uint64_t *ts = NULL, *sq = NULL;
    Item item;
    item.has_buffer = 0;
    if (!(values = PySequence_Fast(values_arg, "values must be a sequence"))) goto done;
    if (!(timestamps = PySequence_Fast(timestamps_arg, "timestamps must be a sequence"))) goto done;
    if (keys_arg != Py_None && !(keys = PySequence_Fast(keys_arg, "keys must be a sequence")))
        goto done;
    if (seqs_arg != Py_None && !(seqs = PySequence_Fast(seqs_arg, "seqs must be a sequence")))
        goto done;
    Py_ssize_t count = PySequence_Fast_GET_SIZE(values);
    if (!count) {
        result = PyUnicode_FromString("a bundle needs at least one message");
        goto done;
    }
    if (PySequence_Fast_GET_SIZE(timestamps) != count ||
        (keys && PySequence_Fast_GET_SIZE(keys) != count) ||
        (seqs && PySequence_Fast_GET_SIZE(seqs) != count)) {
        result = PyUnicode_FromString("the columns differ in length");
        goto done;
    }
    if (!(ts = PyMem_Malloc(sizeof(uint64_t) * (size_t)count))) {
        PyErr_NoMemory();
        goto done;
    }
    if (seqs && !(sq = PyMem_Malloc(sizeof(uint64_t) * (size_t)count))) {
        PyErr_NoMemory();
        goto done;
    }
    PyObject **value_items = PySequence_Fast_ITEMS(values);
    PyObject **ts_items = PySequence_Fast_ITEMS(timestamps);
    PyObject **key_items = keys ? PySequence_Fast_ITEMS(keys) : NULL;
    PyObject **seq_items = seqs ? PySequence_Fast_ITEMS(seqs) : NULL;
    /* pass 1: validate in the reference's order and size the output */
    Py_ssize_t total = 0;
    uint64_t last_ts = 0, previous = 0;
    int have_last_ts = 0;
    for (Py_ssize_t index = 0; index < count; index++) {
        int range = as_u64(ts_items[index], &ts[index]);
        if (range < 0) goto done;
        if (range) {
            result = PyUnicode_FromFormat("message %zd: timestamp outside 0..2^64-1", index);
            goto done;
        }
        Py_ssize_t size = 1;
        PyObject *key = key_items ? key_items[index] : Py_None;
        if (key != Py_None) {
            if (item_get(key, &item) < 0) goto done;
            Py_ssize_t key_size = item.size;
            item_release(&item);
            if (key_size > 255) {
                result = PyUnicode_FromFormat("message %zd: key longer than 255 bytes", index);
                goto done;
            }
            size += 1 + key_size;
        }
        int same_ts = index && have_last_ts && ts[index] == last_ts;
        if (sq) {
            uint64_t seq;
            range = as_u64(seq_items[index], &seq);
            if (range < 0) goto done;
            if (index == 0) {
                if (range || seq < 1 || seq > MAX_SEQ) {
                    result = PyUnicode_FromFormat(
                        "message %zd: sequence number outside 1..2^64-2", index);
                    goto done;
                }
            } else {
                if (range || seq <= previous || seq > MAX_SEQ) {
                    result = PyUnicode_FromFormat(
                        "message %zd: sequence numbers do not increase", index);
                    goto done;
                }
                if (index != count - 1 && seq != previous + 1) {
                    if (seq - previous - 1 > MAX_U32) {
                        result = PyUnicode_FromFormat(
                            "message %zd: sequence gap wider than 2^32-1", index);
                        goto done;
                    }
                    size += varint_size(seq - previous - 1);
                }
            }
            sq[index] = seq;
            previous = seq;
        }
        if (item_get(value_items[index], &item) < 0) goto done;
        Py_ssize_t value_size = item.size;
        item_release(&item);
        if ((uint64_t)value_size > MAX_U32) {
            result = PyUnicode_FromFormat("message %zd: content longer than 2^32-1 bytes", index);
            goto done;
        }
        if (!same_ts) {
            size += 8;
            last_ts = ts[index];
            have_last_ts = 1;
        }
        size += varint_size((uint64_t)value_size) + value_size;
        total += size;
    }
    /* pass 2: write */
    if (!(result = PyBytes_FromStringAndSize(NULL, total))) goto done;
    uint8_t *out = (uint8_t *)PyBytes_AS_STRING(result);
    uint8_t *const limit = out + total;
    have_last_ts = 0;
    for (Py_ssize_t index = 0; index < count; index++) {
        PyObject *key = key_items ? key_items[index] : Py_None;
        uint8_t flags = 0;
        if (key != Py_None) flags |= MSG_HAVE_KEY;
        if (index && have_last_ts && ts[index] == last_ts) flags |= MSG_USE_LAST_TS;
        int delta = 0;
        if (sq && index && index != count - 1) {
            if (sq[index] == sq[index - 1] + 1)
                flags |= MSG_PREV_PLUS_ONE;
            else
                delta = 1;
        }
        Py_ssize_t head = 1 + (delta ? varint_size(sq[index] - sq[index - 1] - 1) : 0) +
                          ((flags & MSG_USE_LAST_TS) ? 0 : 8);
        if (limit - out < head) goto changed;
        *out++ = flags;
        if (delta) out = write_varint(out, sq[index] - sq[index - 1] - 1);
        if (!(flags & MSG_USE_LAST_TS)) {
            store_u64(out, ts[index]);
            out += 8;
            last_ts = ts[index];
            have_last_ts = 1;
        }
        if (key != Py_None) {
            if (item_get(key, &item) < 0) goto fail;
            if (item.size > 255 || limit - out < 1 + item.size) goto changed;
            *out++ = (uint8_t)item.size;
            memcpy(out, item.data, (size_t)item.size);
            out += item.size;
            item_release(&item);
        }
        if (item_get(value_items[index], &item) < 0) goto fail;
        if ((uint64_t)item.size > MAX_U32 ||
            limit - out < varint_size((uint64_t)item.size) + item.size)
            goto changed;
        out = write_varint(out, (uint64_t)item.size);
        memcpy(out, item.data, (size_t)item.size);
        out += item.size;
        item_release(&item);
    }
    if (out != limit) goto changed;
    goto done;
changed: /* sizes differ from pass 1 (an object whose buffer changed): never write past */
    item_release(&item);
    PyErr_SetString(PyExc_RuntimeError, "encode_set: a column changed while it was encoded");
fail:
    Py_CLEAR(result);
done:
    item_release(&item);
    PyMem_Free(ts);
    PyMem_Free(sq);
    Py_XDECREF(keys);
    Py_XDECREF(values);
    Py_XDECREF(timestamps);
    Py_XDECREF(seqs);
    return result;
}

/* --- RecordBatch v2 records <-> bundle columns (rill.protocol.tank.record_batches) ---------- */

static inline uint64_t zigzag(int64_t value) {
    return ((uint64_t)value << 1) ^ (uint64_t)(value >> 63);
}

/* a zig-zag varlong (<= 10 bytes): 0 ok; 1 truncated; 2 too long */
static int read_zigzag(const uint8_t *data, Py_ssize_t end, Py_ssize_t *offset, int64_t *value) {
    uint64_t result = 0;
    Py_ssize_t at = *offset;
    for (int index = 0; index < 10; index++) {
        if (at + index >= end) return 1;
        uint8_t byte = data[at + index];
        result |= (uint64_t)(byte & 0x7f) << (7 * index);
        if (byte < 0x80) {
            *value = (int64_t)(result >> 1) ^ -(int64_t)(result & 1);
            *offset = at + index + 1;
            return 0;
        }
    }
    return 2;
}

#define INT64_MAX_U ((uint64_t)INT64_MAX)

static PyObject *encode_records(PyObject *module, PyObject *args) {
    PyObject *keys_arg, *values_arg, *timestamps_arg;
    long long base;
    if (!PyArg_ParseTuple(args, "OOOL", &keys_arg, &values_arg, &timestamps_arg, &base))
        return NULL;
    PyObject *keys = NULL, *values = NULL, *timestamps = NULL, *result = NULL;
    int64_t *ts = NULL;
    Item item;
    item.has_buffer = 0;
    if (!(values = PySequence_Fast(values_arg, "values must be a sequence"))) goto done;
    if (!(timestamps = PySequence_Fast(timestamps_arg, "timestamps must be a sequence")))
        goto done;
    if (keys_arg != Py_None && !(keys = PySequence_Fast(keys_arg, "keys must be a sequence")))
        goto done;
    Py_ssize_t count = PySequence_Fast_GET_SIZE(values);
    if (!count) {
        result = PyUnicode_FromString("a batch needs at least one record");
        goto done;
    }
    if (PySequence_Fast_GET_SIZE(timestamps) != count ||
        (keys && PySequence_Fast_GET_SIZE(keys) != count)) {
        result = PyUnicode_FromString("the columns differ in length");
        goto done;
    }
    PyObject **value_items = PySequence_Fast_ITEMS(values);
    PyObject **ts_items = PySequence_Fast_ITEMS(timestamps);
    PyObject **key_items = keys ? PySequence_Fast_ITEMS(keys) : NULL;
    if (!(ts = PyMem_Malloc(sizeof(int64_t) * (size_t)count))) {
        PyErr_NoMemory();
        goto done;
    }
    /* pass 1: validate, size */
    Py_ssize_t total = 0;
    for (Py_ssize_t index = 0; index < count; index++) {
        uint64_t t;
        int bad = as_u64(ts_items[index], &t);
        if (bad < 0) goto done;
        if (bad || t > INT64_MAX_U) {
            result = PyUnicode_FromFormat("record %zd: timestamp outside 0..2^63-1", index);
            goto done;
        }
        ts[index] = (int64_t)t;
        Py_ssize_t body = 1 + varint_size(zigzag(ts[index] - (int64_t)base)) +
                          varint_size(zigzag(index)) + 1 /* headers count 0 */;
        PyObject *key = key_items ? key_items[index] : Py_None;
        if (key == Py_None) {
            body += 1; /* -1 */
        } else {
            if (item_get(key, &item) < 0) goto done;
            body += varint_size(zigzag(item.size)) + item.size;
            item_release(&item);
        }
        if (item_get(value_items[index], &item) < 0) goto done;
        if ((uint64_t)item.size > (uint64_t)INT32_MAX) {
            item_release(&item);
            result = PyUnicode_FromFormat("record %zd: value longer than 2^31-1 bytes", index);
            goto done;
        }
        body += varint_size(zigzag(item.size)) + item.size;
        item_release(&item);
        total += varint_size(zigzag(body)) + body;
    }
    if (!(result = PyBytes_FromStringAndSize(NULL, total))) goto done;
    uint8_t *out = (uint8_t *)PyBytes_AS_STRING(result);
    uint8_t *limit = out + total;
    /* pass 2: write, every write checked against the allocation */
    for (Py_ssize_t index = 0; index < count; index++) {
        PyObject *key = key_items ? key_items[index] : Py_None;
        Item key_item, value_item;
        key_item.has_buffer = 0;
        value_item.has_buffer = 0;
        if (key != Py_None && item_get(key, &key_item) < 0) goto fail;
        if (item_get(value_items[index], &value_item) < 0) {
            item_release(&key_item);
            goto fail;
        }
        uint64_t ts_delta = zigzag(ts[index] - (int64_t)base);
        Py_ssize_t body = 1 + varint_size(ts_delta) + varint_size(zigzag(index)) + 1 +
                          (key == Py_None ? 1 : varint_size(zigzag(key_item.size)) + key_item.size) +
                          varint_size(zigzag(value_item.size)) + value_item.size;
        if (limit - out < varint_size(zigzag(body)) + body) {
            item_release(&key_item);
            item_release(&value_item);
            goto changed;
        }
        out = write_varint(out, zigzag(body));
        *out++ = 0; /* attributes */
        out = write_varint(out, ts_delta);
        out = write_varint(out, zigzag(index));
        if (key == Py_None) {
            *out++ = 1; /* zigzag(-1) */
        } else {
            out = write_varint(out, zigzag(key_item.size));
            memcpy(out, key_item.data, (size_t)key_item.size);
            out += key_item.size;
        }
        out = write_varint(out, zigzag(value_item.size));
        memcpy(out, value_item.data, (size_t)value_item.size);
        out += value_item.size;
        *out++ = 0; /* no headers */
        item_release(&key_item);
        item_release(&value_item);
    }
    if (out != limit) goto changed;
    goto done;
changed:
    PyErr_SetString(PyExc_RuntimeError, "encode_records: a column changed while it was encoded");
fail:
    Py_CLEAR(result);
done:
    item_release(&item);
    PyMem_Free(ts);
    Py_XDECREF(keys);
    Py_XDECREF(values);
    Py_XDECREF(timestamps);
    return result;
}

#define TRUNC(index) \
    do { \
        Py_CLEAR(out); \
        out = fault(ERR_TRUNCATED, "record %zd: the records end inside it", (Py_ssize_t)(index)); \
        goto done; \
    } while (0)

static PyObject *decode_records(PyObject *module, PyObject *args) {
    Py_buffer buffer;
    Py_ssize_t count;
    long long base, append_time;
    if (!PyArg_ParseTuple(args, "y*nLL", &buffer, &count, &base, &append_time)) return NULL;
    const uint8_t *data = buffer.buf;
    Py_ssize_t end = buffer.len;
    PyObject *keys = NULL, *values = NULL, *timestamps = NULL, *deltas = NULL, *out = NULL;
    if (count < 0 || count > end / 7) {
        out = fault(ERR_TRUNCATED, "%zd records cannot fit in %zd bytes", count, end);
        goto done;
    }
    if (!(keys = PyList_New(count)) || !(values = PyList_New(count)) ||
        !(timestamps = PyList_New(count)) || !(deltas = PyList_New(count)))
        goto done;
    Py_ssize_t offset = 0;
    for (Py_ssize_t index = 0; index < count; index++) {
        int64_t length, ts_delta, offset_delta, key_size, value_size, headers;
        int status;
        if ((status = read_zigzag(data, end, &offset, &length))) TRUNC(index);
        if (length < 1 || length > end - offset) TRUNC(index);
        Py_ssize_t record_end = offset + (Py_ssize_t)length;
        offset += 1; /* attributes */
        if (read_zigzag(data, record_end, &offset, &ts_delta) ||
            read_zigzag(data, record_end, &offset, &offset_delta) ||
            read_zigzag(data, record_end, &offset, &key_size))
            TRUNC(index);
        PyObject *key;
        if (key_size < 0) {
            key = Py_NewRef(Py_None);
        } else {
            if (key_size > record_end - offset) TRUNC(index);
            key = key_size > 255 ? Py_NewRef(Py_None) /* TANK keys are str8: dropped */
                                 : PyBytes_FromStringAndSize((const char *)data + offset,
                                                             (Py_ssize_t)key_size);
            if (!key) goto fail;
            offset += (Py_ssize_t)key_size;
        }
        PyList_SET_ITEM(keys, index, key);
        if (read_zigzag(data, record_end, &offset, &value_size)) TRUNC(index);
        PyObject *value;
        if (value_size < 0) {
            value = PyBytes_FromStringAndSize(NULL, 0);
        } else {
            if (value_size > record_end - offset) TRUNC(index);
            value = PyBytes_FromStringAndSize((const char *)data + offset, (Py_ssize_t)value_size);
            offset += (Py_ssize_t)value_size;
        }
        if (!value) goto fail;
        PyList_SET_ITEM(values, index, value);
        if (read_zigzag(data, record_end, &offset, &headers) || headers < 0) TRUNC(index);
        for (int64_t header = 0; header < headers; header++) {
            int64_t size;
            for (int part = 0; part < 2; part++) {
                if (read_zigzag(data, record_end, &offset, &size)) TRUNC(index);
                if (size > 0) {
                    if (size > record_end - offset) TRUNC(index);
                    offset += (Py_ssize_t)size;
                }
            }
        }
        if (offset != record_end) {
            Py_CLEAR(out);
            out = fault(ERR_LENGTH, "record %zd: its length disagrees with its fields", index);
            goto done;
        }
        int64_t ts = append_time >= 0 ? (int64_t)append_time : (int64_t)base + ts_delta;
        PyObject *number = PyLong_FromLongLong(ts < 0 ? 0 : ts);
        if (!number) goto fail;
        PyList_SET_ITEM(timestamps, index, number);
        if (!(number = PyLong_FromLongLong(offset_delta))) goto fail;
        PyList_SET_ITEM(deltas, index, number);
    }
    if (offset != end) {
        out = fault(ERR_LENGTH, "%zd bytes left after the last record", end - offset);
        goto done;
    }
    out = PyTuple_Pack(4, keys, values, timestamps, deltas);
    goto done;
fail:
    Py_CLEAR(out);
done:
    PyBuffer_Release(&buffer);
    Py_XDECREF(keys);
    Py_XDECREF(values);
    Py_XDECREF(timestamps);
    Py_XDECREF(deltas);
    return out;
}

/* records_to_set: a records section straight into a non-sparse TANK message set, no Python
 * object per record. Two passes over the records (size, then write); the second reads the
 * first RECALLED records from what the first kept of them instead of parsing them again. */
typedef struct {
    int64_t ts;
    Py_ssize_t key_at, key_size; /* key_size < 0: none (null, or longer than 255) */
    Py_ssize_t value_at, value_size;
    int64_t offset_delta;
} Parsed;

/* one record at *offset; 0 ok, else a fault was built into *out */
static int parse_record(const uint8_t *data, Py_ssize_t end, Py_ssize_t *offset, Py_ssize_t index,
                        int64_t base, int64_t append_time, Parsed *rec, PyObject **out) {
    int64_t length, ts_delta, key_size, value_size, headers;
    if (read_zigzag(data, end, offset, &length) || length < 1 || length > end - *offset) goto trunc;
    Py_ssize_t record_end = *offset + (Py_ssize_t)length;
    *offset += 1;
    if (read_zigzag(data, record_end, offset, &ts_delta) ||
        read_zigzag(data, record_end, offset, &rec->offset_delta) ||
        read_zigzag(data, record_end, offset, &key_size))
        goto trunc;
    rec->key_size = -1;
    if (key_size >= 0) {
        if (key_size > record_end - *offset) goto trunc;
        if (key_size <= 255) {
            rec->key_at = *offset;
            rec->key_size = (Py_ssize_t)key_size;
        }
        *offset += (Py_ssize_t)key_size;
    }
    if (read_zigzag(data, record_end, offset, &value_size)) goto trunc;
    rec->value_at = *offset;
    rec->value_size = 0;
    if (value_size >= 0) {
        if (value_size > record_end - *offset) goto trunc;
        rec->value_size = (Py_ssize_t)value_size;
        *offset += (Py_ssize_t)value_size;
    }
    if (read_zigzag(data, record_end, offset, &headers) || headers < 0) goto trunc;
    for (int64_t header = 0; header < headers; header++) {
        for (int part = 0; part < 2; part++) {
            int64_t size;
            if (read_zigzag(data, record_end, offset, &size)) goto trunc;
            if (size > 0) {
                if (size > record_end - *offset) goto trunc;
                *offset += (Py_ssize_t)size;
            }
        }
    }
    if (*offset != record_end) {
        *out = fault(ERR_LENGTH, "record %zd: its length disagrees with its fields", index);
        return -1;
    }
    int64_t ts = append_time >= 0 ? append_time : base + ts_delta;
    rec->ts = ts < 0 ? 0 : ts;
    return 0;
trunc:
    *out = fault(ERR_TRUNCATED, "record %zd: the records end inside it", index);
    return -1;
}

/* What pass 1 of records_to_set keeps of each of the first RECALLED records, so that pass 2
 * writes them without parsing them again (a record past these is parsed again). Module-wide:
 * records_to_set holds the GIL throughout. */
#define RECALLED 4096
typedef struct {
    uint32_t key_at, value_at, value_size;
    int32_t key_size; /* < 0: none */
    int64_t ts;
} Recalled;
static Recalled recalled[RECALLED];
static int recalled_busy; /* a call is using it (one re-entered through the allocator does not) */

/* The records section data[0..end) of ``count`` records as a non-sparse message set (framed:
 * as one whole uncompressed bundle in its chunk frame): a new bytes object, with the first and
 * last offset deltas; NULL with *fault set (a new (kind, text) tuple) when the records are
 * malformed, NULL with a Python exception otherwise. */
static PyObject *set_of_records(const uint8_t *data, Py_ssize_t end, Py_ssize_t count,
                                int64_t base, int64_t append_time, int framed,
                                int64_t *first_delta_out, int64_t *last_delta_out,
                                PyObject **fault_out) {
    PyObject *out = NULL, *set = NULL;
    int owns_recalled = 0;
    if (count < 1 || count > end / 7) {
        out = fault(ERR_TRUNCATED, "%zd records cannot fit in %zd bytes", count, end);
        goto done;
    }
    /* pass 1: validate and size */
    Py_ssize_t offset = 0, size = 0, recalled_end = 0;
    int64_t last_ts = 0, first_delta = 0, last_delta = 0;
    Parsed rec;
    Py_ssize_t kept = end <= (Py_ssize_t)UINT32_MAX && !recalled_busy
                          ? (count < RECALLED ? count : RECALLED) : 0;
    if (kept) owns_recalled = recalled_busy = 1;
    for (Py_ssize_t index = 0; index < count; index++) {
        if (parse_record(data, end, &offset, index, base, append_time, &rec, &out) < 0) goto done;
        if (index < kept) {
            Recalled *keep = &recalled[index];
            keep->key_at = (uint32_t)(rec.key_size >= 0 ? rec.key_at : 0);
            keep->key_size = (int32_t)rec.key_size;
            keep->value_at = (uint32_t)rec.value_at;
            keep->value_size = (uint32_t)rec.value_size;
            keep->ts = rec.ts;
            recalled_end = offset;
        }
        if (index == 0) first_delta = rec.offset_delta;
        last_delta = rec.offset_delta;
        size += 1 + ((index && rec.ts == last_ts) ? 0 : 8) +
                (rec.key_size >= 0 ? 1 + rec.key_size : 0) +
                varint_size((uint64_t)rec.value_size) + rec.value_size;
        last_ts = rec.ts;
    }
    if (offset != end) {
        out = fault(ERR_LENGTH, "%zd bytes left after the last record", end - offset);
        goto done;
    }
    /* framed: varint(bundle length) and the bundle header (codec 0, the count) go first */
    Py_ssize_t header = framed ? (count < 16 ? 1 : 1 + varint_size((uint64_t)count)) : 0;
    Py_ssize_t prefix = framed ? varint_size((uint64_t)(header + size)) + header : 0;
    if (!(set = PyBytes_FromStringAndSize(NULL, prefix + size))) goto done;
    uint8_t *put = (uint8_t *)PyBytes_AS_STRING(set);
    uint8_t *limit = put + prefix + size;
    if (framed) {
        put = write_varint(put, (uint64_t)(header + size));
        if (count < 16) {
            *put++ = (uint8_t)(count << 2);
        } else {
            *put++ = 0;
            put = write_varint(put, (uint64_t)count);
        }
    }
    offset = 0;
    for (Py_ssize_t index = 0; index < count; index++) {
        int64_t previous = last_ts;
        if (index < kept) {
            const Recalled *keep = &recalled[index];
            rec.key_at = keep->key_at;
            rec.key_size = keep->key_size;
            rec.value_at = keep->value_at;
            rec.value_size = keep->value_size;
            rec.ts = keep->ts;
        } else {
            if (index == kept && kept) offset = recalled_end;
            if (parse_record(data, end, &offset, index, base, append_time, &rec, &out) < 0)
                goto done;
        }
        int same = index && rec.ts == previous;
        Py_ssize_t need = 1 + (same ? 0 : 8) + (rec.key_size >= 0 ? 1 + rec.key_size : 0) +
                          varint_size((uint64_t)rec.value_size) + rec.value_size;
        if (limit - put < need) {
            PyErr_SetString(PyExc_RuntimeError, "records_to_set: sizes changed between passes");
            goto done;
        }
        *put++ = (uint8_t)((rec.key_size >= 0 ? MSG_HAVE_KEY : 0) | (same ? MSG_USE_LAST_TS : 0));
        if (!same) {
            store_u64(put, (uint64_t)rec.ts);
            put += 8;
        }
        if (rec.key_size >= 0) {
            *put++ = (uint8_t)rec.key_size;
            memcpy(put, data + rec.key_at, (size_t)rec.key_size);
            put += rec.key_size;
        }
        put = write_varint(put, (uint64_t)rec.value_size);
        memcpy(put, data + rec.value_at, (size_t)rec.value_size);
        put += rec.value_size;
        last_ts = rec.ts;
    }
    if (put != limit) {
        PyErr_SetString(PyExc_RuntimeError, "records_to_set: sizes changed between passes");
        goto done;
    }
    *first_delta_out = first_delta;
    *last_delta_out = last_delta;
    if (owns_recalled) recalled_busy = 0;
    return set;
done:
    if (owns_recalled) recalled_busy = 0;
    Py_XDECREF(set);
    *fault_out = out; /* NULL: a Python exception is set */
    return NULL;
}

static PyObject *records_to_set(PyObject *module, PyObject *args) {
    Py_buffer buffer;
    Py_ssize_t count;
    long long base, append_time;
    int framed = 0;
    if (!PyArg_ParseTuple(args, "y*nLL|p", &buffer, &count, &base, &append_time, &framed))
        return NULL;
    int64_t first_delta = 0, last_delta = 0;
    PyObject *failed = NULL, *out = NULL;
    PyObject *set = set_of_records(buffer.buf, buffer.len, count, base, append_time, framed,
                                   &first_delta, &last_delta, &failed);
    if (set) {
        out = Py_BuildValue("(OLL)", set, (long long)first_delta, (long long)last_delta);
        Py_DECREF(set);
    } else {
        out = failed;
    }
    PyBuffer_Release(&buffer);
    return out;
}

static inline uint64_t load_be64(const uint8_t *p) {
    uint64_t value = 0;
    for (int i = 0; i < 8; i++) value = (value << 8) | p[i];
    return value;
}

static inline uint32_t load_be32(const uint8_t *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

#define BATCH_HEADER 61 /* RecordBatch v2: base offset .. record count */
#define BATCH_CONTROL 0x20
#define BATCH_LOG_APPEND_TIME 0x08
#define BATCH_CODEC 0x07

/* stored_chunk(data) -> (chunk, first_seq) | None: see the module's comment */
static PyObject *stored_chunk(PyObject *module, PyObject *args) {
    Py_buffer buffer;
    if (!PyArg_ParseTuple(args, "y*", &buffer)) return NULL;
    const uint8_t *data = buffer.buf;
    const Py_ssize_t size = buffer.len;
    PyObject *bundles = NULL, *out = NULL;
    Py_ssize_t at = 0;
    int64_t base = 0, next_seq = 0;
    int have_next = 0;
    if (!(bundles = PyList_New(0))) goto done;
    while (size - at >= BATCH_HEADER) {
        const uint8_t *head = data + at;
        const int64_t base_offset = (int64_t)load_be64(head);
        const int32_t length = (int32_t)load_be32(head + 8);
        if (length < BATCH_HEADER - 12 || length > size - at - 12) break; /* no whole batch */
        const uint16_t attributes = (uint16_t)((head[21] << 8) | head[22]);
        const int64_t base_ts = (int64_t)load_be64(head + 27);
        const int64_t max_ts = (int64_t)load_be64(head + 35);
        const int32_t count = (int32_t)load_be32(head + 57);
        at += 12 + (Py_ssize_t)length;
        if ((attributes & BATCH_CONTROL) || count < 1) continue;
        if (attributes & BATCH_CODEC) goto plain_path; /* compressed: the Python path */
        int64_t first_delta = 0, last_delta = 0;
        PyObject *failed = NULL;
        PyObject *framed = set_of_records(head + BATCH_HEADER,
                                          12 + (Py_ssize_t)length - BATCH_HEADER, count, base_ts,
                                          (attributes & BATCH_LOG_APPEND_TIME) ? max_ts : -1, 1,
                                          &first_delta, &last_delta, &failed);
        if (!framed) {
            if (!failed) goto done; /* a Python exception */
            Py_DECREF(failed);
            goto plain_path; /* malformed: the Python path says how */
        }
        const int64_t first = base_offset + first_delta + 1;
        if (last_delta - first_delta != (int64_t)count - 1 || (have_next && first != next_seq)) {
            Py_DECREF(framed);
            goto plain_path; /* holes, or a jump: explicit numbers */
        }
        int appended = PyList_Append(bundles, framed);
        Py_DECREF(framed);
        if (appended < 0) goto done;
        if (!have_next) base = first;
        have_next = 1;
        next_seq = base_offset + last_delta + 2;
    }
    {
        const Py_ssize_t made = PyList_GET_SIZE(bundles);
        PyObject *chunk;
        if (made == 1) {
            chunk = PyList_GET_ITEM(bundles, 0);
            Py_INCREF(chunk);
        } else {
            PyObject *empty = PyBytes_FromStringAndSize(NULL, 0);
            if (!empty) goto done;
            chunk = _PyBytes_Join(empty, bundles);
            Py_DECREF(empty);
            if (!chunk) goto done;
        }
        out = Py_BuildValue("(NL)", chunk, (long long)(made ? base : 0));
    }
    goto done;
plain_path:
    Py_INCREF(Py_None);
    out = Py_None;
done:
    Py_XDECREF(bundles);
    PyBuffer_Release(&buffer);
    return out;
}

/* One message of a non-sparse set (decode_set's walk, no objects): 0 ok, else *out is the fault */
static inline Py_ssize_t record_body(const SetMessage *msg, uint64_t base, Py_ssize_t index) {
    return 1 + varint_size(zigzag((int64_t)(msg->ts - base))) + varint_size(zigzag(index)) +
           (msg->key_size < 0 ? 1 : varint_size(zigzag(msg->key_size)) + msg->key_size) +
           varint_size(zigzag(msg->value_size)) + msg->value_size + 1;
}

static PyObject *set_to_records(PyObject *module, PyObject *args) {
    Py_buffer buffer;
    unsigned long long count_arg;
    Py_ssize_t head_room = 0;
    if (!PyArg_ParseTuple(args, "y*O&|n", &buffer, to_u64, &count_arg, &head_room)) return NULL;
    if (head_room < 0 || head_room > 4096) {
        PyBuffer_Release(&buffer);
        PyErr_SetString(PyExc_ValueError, "set_to_records: head_room must be 0..4096");
        return NULL;
    }
    const uint8_t *data = buffer.buf;
    Py_ssize_t end = buffer.len;
    PyObject *out = NULL, *records = NULL;
    if (count_arg > (unsigned long long)(end / 2)) {
        out = fault(ERR_TRUNCATED, "%llu messages cannot fit in %zd bytes", count_arg, end);
        goto done;
    }
    Py_ssize_t count = (Py_ssize_t)count_arg;
    /* pass 1: walk and validate (decode_set's rules and texts), times, the first long value */
    Py_ssize_t offset = 0, too_long = -1;
    uint64_t timestamp = 0, base = 0, highest = 0;
    SetMessage msg;
    for (Py_ssize_t index = 0; index < count; index++) {
        if (parse_message(data, end, &offset, index, &timestamp, &msg, &out) < 0) goto done;
        if (index == 0) base = msg.ts;
        if (msg.ts > highest) highest = msg.ts;
        if (too_long < 0 && (uint64_t)msg.value_size > (uint64_t)INT32_MAX) too_long = index;
    }
    if (offset != end) {
        out = fault(ERR_LENGTH, "%zd bytes left after the last message", end - offset);
        goto done;
    }
    if (!count) {
        out = PyUnicode_FromString("a batch needs at least one record");
        goto done;
    }
    if (highest > INT64_MAX_U) {
        out = PyUnicode_FromFormat("timestamp %llu above 2^63-1", (unsigned long long)highest);
        goto done;
    }
    if (too_long >= 0) {
        out = PyUnicode_FromFormat("record %zd: value longer than 2^31-1 bytes", too_long);
        goto done;
    }
    /* pass 2: size; pass 3: write, every write checked against the allocation */
    Py_ssize_t total = 0;
    offset = 0;
    timestamp = 0;
    for (Py_ssize_t index = 0; index < count; index++) {
        if (parse_message(data, end, &offset, index, &timestamp, &msg, &out) < 0) goto done;
        Py_ssize_t body = record_body(&msg, base, index);
        total += varint_size(zigzag(body)) + body;
    }
    uint8_t *put;
    if (head_room) {
        if (total > PY_SSIZE_T_MAX - head_room) goto changed;
        if (!(records = PyByteArray_FromStringAndSize(NULL, head_room + total))) goto done;
        put = (uint8_t *)PyByteArray_AS_STRING(records);
        memset(put, 0, (size_t)head_room);
        put += head_room;
    } else {
        if (!(records = PyBytes_FromStringAndSize(NULL, total))) goto done;
        put = (uint8_t *)PyBytes_AS_STRING(records);
    }
    uint8_t *limit = put + total;
    offset = 0;
    timestamp = 0;
    for (Py_ssize_t index = 0; index < count; index++) {
        if (parse_message(data, end, &offset, index, &timestamp, &msg, &out) < 0) goto done;
        Py_ssize_t body = record_body(&msg, base, index);
        if (limit - put < varint_size(zigzag(body)) + body) goto changed;
        put = write_varint(put, zigzag(body));
        *put++ = 0; /* attributes */
        put = write_varint(put, zigzag((int64_t)(msg.ts - base)));
        put = write_varint(put, zigzag(index));
        if (msg.key_size < 0) {
            *put++ = 1; /* zigzag(-1) */
        } else {
            put = write_varint(put, zigzag(msg.key_size));
            memcpy(put, data + msg.key_at, (size_t)msg.key_size);
            put += msg.key_size;
        }
        put = write_varint(put, zigzag(msg.value_size));
        memcpy(put, data + msg.value_at, (size_t)msg.value_size);
        put += msg.value_size;
        *put++ = 0; /* no headers */
    }
    if (put != limit) goto changed;
    out = Py_BuildValue("(OKK)", records, (unsigned long long)base, (unsigned long long)highest);
    goto done;
changed:
    PyErr_SetString(PyExc_RuntimeError, "set_to_records: the message set changed while it was read");
done:
    Py_XDECREF(records);
    PyBuffer_Release(&buffer);
    return out;
}

static PyMethodDef methods[] = {
    {"decode_set", decode_set, METH_VARARGS,
     "decode_set(data, count, sparse, first_seq, last_seq) -> (keys, values, timestamps, seqs) "
     "or (error kind, text)"},
    {"encode_set", encode_set, METH_VARARGS,
     "encode_set(keys, values, timestamps, seqs) -> bytes, or str naming the fault"},
    {"encode_records", encode_records, METH_VARARGS,
     "encode_records(keys, values, timestamps, base_timestamp) -> RecordBatch v2 records, or "
     "str naming the fault"},
    {"records_to_set", records_to_set, METH_VARARGS,
     "records_to_set(records, count, base_timestamp, append_time, framed=False) -> (message set "
     "or framed bundle, first offset delta, last offset delta) or (error kind, text)"},
    {"stored_chunk", stored_chunk, METH_VARARGS,
     "stored_chunk(data) -> (chunk, first seq) or None: stored uncompressed RecordBatch v2 "
     "batches as one non-sparse bundle each, back to back (None: the Python path answers)"},
    {"set_to_records", set_to_records, METH_VARARGS,
     "set_to_records(message_set, count, head_room=0) -> (records, base_timestamp, max_timestamp), "
     "(error kind, text) when malformed, or str when no batch can hold it"},
    {"decode_records", decode_records, METH_VARARGS,
     "decode_records(records, count, base_timestamp, append_time) -> (keys, values, timestamps, "
     "offset_deltas) or (error kind, text)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_bundles",
    "C twins of rill.protocol.tank.bundles' per-message loops", -1, methods,
};

PyMODINIT_FUNC PyInit__bundles(void) {
    PyObject *module = PyModule_Create(&module_def);
    if (!module) return NULL;
    if (PyModule_AddIntConstant(module, "ERR_TRUNCATED", ERR_TRUNCATED) < 0 ||
        PyModule_AddIntConstant(module, "ERR_VARINT", ERR_VARINT) < 0 ||
        PyModule_AddIntConstant(module, "ERR_BUNDLE", ERR_BUNDLE) < 0 ||
        PyModule_AddIntConstant(module, "ERR_LENGTH", ERR_LENGTH) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
