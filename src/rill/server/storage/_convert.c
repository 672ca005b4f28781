/*
 * _convert: the C twins of rill.server.storage.record_conversion's per-record loops, one unit of
 * the ``_stamp`` module (its other unit, _stamp.c, registers ``kafka_to_iggy`` and
 * ``iggy_to_kafka``; what they share is in _stamp.h).
 */

#include "_stamp.h"

/*
 * The per-record loops of rill.server.storage.record_conversion (``_kafka_records_python`` and
 * the record walk of ``iggy_to_kafka_python`` are the reference): Kafka RecordBatch v2 records
 * -> stored Iggy records, and stored Iggy records -> a RecordBatch v2 records block. Python's
 * integers are unbounded and a Kafka varint the reference reads may carry 70 bits, so every
 * value read from a records block is held in a 128-bit integer: each sum and comparison comes
 * out as the reference's. Built only where the compiler has 128-bit integers (GCC and Clang on
 * 64-bit targets); elsewhere the module lacks the two functions and the reference runs.
 * Lengths are read once and kept; the output is copied with those kept lengths only, so a
 * buffer mutated while the GIL is released can give garbage, never an out-of-bounds access.
 */
#if RILL_HAVE_CONVERSION
typedef __int128 wide_t;
typedef unsigned __int128 uwide_t;

#define MAX_HEADER_PART 255
#define KEY_HEADER "rill.key"
#define KEY_HEADER_LENGTH 8
#define RAW_KIND 1

typedef struct {
    uint8_t *data; /* PyMem_Raw */
    size_t length, capacity;
} byte_buffer;

/* Room for ``more`` bytes past the end; -1 when memory runs out. */
static int buffer_reserve(byte_buffer *buffer, size_t more)
{
    if (buffer->capacity - buffer->length >= more) return 0;
    size_t capacity = buffer->capacity ? buffer->capacity : 4096;
    while (capacity - buffer->length < more) {
        if (capacity > ((size_t)-1) / 2) return -1;
        capacity *= 2;
    }
    uint8_t *grown = PyMem_RawRealloc(buffer->data, capacity);
    if (grown == NULL) return -1;
    buffer->data = grown;
    buffer->capacity = capacity;
    return 0;
}

/* What stopped a conversion, worded by ``conversion_fault_text`` as the reference words it. */
enum {
    CONVERT_OK = 0,
    CONVERT_PAST_END,        /* IndexError "index out of range": a varint read past the block */
    CONVERT_INDEX_TOO_BIG,   /* IndexError: read at a position past Py_ssize_t (a huge length) */
    CONVERT_VARINT_TOO_LONG, /* "varint longer than 10 bytes" */
    CONVERT_NEGATIVE_LENGTH, /* "a record of negative length" */
    CONVERT_NULL_HEADER_KEY, /* "a header with a null key" */
    CONVERT_OVERRUN,         /* "record at offset {offset} overruns its length" */
    CONVERT_TIMESTAMP,       /* "record at offset {offset} has a timestamp past 64 bits" */
    CONVERT_READ_OVERRUN,    /* "the record at offset {offset} overruns the read" */
    CONVERT_HEADER_MAP,      /* "the record at offset {offset} has a malformed header map" */
    CONVERT_NO_MEMORY,
    CONVERT_UNSUPPORTED,     /* past u32 positions or lengths: the reference raises its error */
};

static PyObject *conversion_fault_text(int fault, uint64_t offset)
{
    unsigned long long value = (unsigned long long)offset;
    switch (fault) {
    case CONVERT_PAST_END: return PyUnicode_FromString("index out of range");
    case CONVERT_INDEX_TOO_BIG:
        return PyUnicode_FromString("cannot fit 'int' into an index-sized integer");
    case CONVERT_VARINT_TOO_LONG: return PyUnicode_FromString("varint longer than 10 bytes");
    case CONVERT_NEGATIVE_LENGTH: return PyUnicode_FromString("a record of negative length");
    case CONVERT_NULL_HEADER_KEY: return PyUnicode_FromString("a header with a null key");
    case CONVERT_OVERRUN:
        return PyUnicode_FromFormat("record at offset %llu overruns its length", value);
    case CONVERT_TIMESTAMP:
        return PyUnicode_FromFormat("record at offset %llu has a timestamp past 64 bits", value);
    case CONVERT_READ_OVERRUN:
        return PyUnicode_FromFormat("the record at offset %llu overruns the read", value);
    case CONVERT_HEADER_MAP:
        return PyUnicode_FromFormat("the record at offset %llu has a malformed header map",
                                    value);
    default:
        PyErr_SetString(PyExc_SystemError, "_stamp: no conversion fault to word");
        return NULL;
    }
}

/* rill.protocol.kafka.record_batch.read_varint: the zig-zag varint at ``*at``, which moves
 * past it. The reference's IndexError (a byte past the data; CPython words it otherwise when
 * the position does not even fit a Py_ssize_t) and its ValueError (an eleventh byte) are
 * CONVERT_PAST_END, CONVERT_INDEX_TOO_BIG and CONVERT_VARINT_TOO_LONG; its up to 70 bits fit
 * a wide_t. */
static inline int read_kafka_varint(const uint8_t *data, wide_t length, wide_t *at,
                                    wide_t *value)
{
    wide_t position = *at;
    if (position >= length)
        return position > (wide_t)PY_SSIZE_T_MAX ? CONVERT_INDEX_TOO_BIG : CONVERT_PAST_END;
    uint8_t byte = data[(size_t)position];
    if (byte < 0x80) {
        *value = (wide_t)(byte >> 1) ^ -(wide_t)(byte & 1);
        *at = position + 1;
        return CONVERT_OK;
    }
    uwide_t result = byte & 0x7F;
    int shift = 7;
    for (;;) {
        position++;
        if (position >= length) return CONVERT_PAST_END;
        byte = data[(size_t)position];
        result |= (uwide_t)(byte & 0x7F) << shift;
        if (byte < 0x80) {
            *value = (wide_t)(result >> 1) ^ -(wide_t)(result & 1);
            *at = position + 1;
            return CONVERT_OK;
        }
        shift += 7;
        if (shift > 63) return CONVERT_VARINT_TOO_LONG;
    }
}

/* rill.protocol.kafka.record_batch.put_varint, for any value the reference may give it:
 * ``(value << 1) ^ (value >> 63)`` on unbounded integers (for |value| < 2**64 a non-negative
 * number of at most 66 bits, so the same in 128), then 7 bits a byte. */
static inline size_t kafka_varint_size(wide_t value)
{
    uwide_t encoded = ((uwide_t)value << 1) ^ (uwide_t)(value >> 63);
    size_t size = 1;
    while (encoded >= 0x80) {
        encoded >>= 7;
        size++;
    }
    return size;
}

static inline uint8_t *put_kafka_varint(uint8_t *out, wide_t value)
{
    uwide_t encoded = ((uwide_t)value << 1) ^ (uwide_t)(value >> 63);
    while (encoded >= 0x80) {
        *out++ = (uint8_t)((encoded & 0x7F) | 0x80);
        encoded >>= 7;
    }
    *out++ = (uint8_t)encoded;
    return out;
}

/* -------------------------------------------- Kafka records -> stored Iggy records */

/* A Kafka header an Iggy header map can hold, by its place in the records block. */
typedef struct {
    size_t name_at, value_at;
    uint32_t name_length, value_length;
} kept_header;

/* The kept headers of one record, in the order their keys first appeared (the reference's
 * dict): a linear search while few, an open-addressing table of indexes once there are many. */
typedef struct {
    kept_header *items;
    size_t count, capacity;
    uint32_t *slots; /* index + 1, 0 empty; slot_count a power of two, 0 while searching */
    size_t slot_count, slot_capacity;
} header_set;

#define HEADER_SET_LINEAR 16

static uint32_t name_hash(const uint8_t *name, uint32_t length)
{
    uint32_t hash = 2166136261u; /* FNV-1a */
    for (uint32_t i = 0; i < length; i++)
        hash = (hash ^ name[i]) * 16777619u;
    return hash;
}

static void header_set_clear(header_set *set)
{
    if (set->slot_count) memset(set->slots, 0, set->slot_count * sizeof *set->slots);
    set->slot_count = 0;
    set->count = 0;
}

static void header_set_free(header_set *set)
{
    PyMem_RawFree(set->items);
    PyMem_RawFree(set->slots);
}

/* Index the kept headers in a table of ``slot_count`` slots; -1 when memory runs out. */
static int header_set_index(header_set *set, const uint8_t *data, size_t slot_count)
{
    if (slot_count > set->slot_capacity) {
        uint32_t *grown = PyMem_RawRealloc(set->slots, slot_count * sizeof *grown);
        if (grown == NULL) return -1;
        set->slots = grown;
        set->slot_capacity = slot_count;
    }
    memset(set->slots, 0, slot_count * sizeof *set->slots);
    set->slot_count = slot_count;
    for (size_t i = 0; i < set->count; i++) {
        const kept_header *item = &set->items[i];
        size_t slot = name_hash(data + item->name_at, item->name_length) & (slot_count - 1);
        while (set->slots[slot]) slot = (slot + 1) & (slot_count - 1);
        set->slots[slot] = (uint32_t)(i + 1);
    }
    return 0;
}

/* ``headers[name] = value``: a later duplicate replaces the value, in the first one's place. */
static int header_set_put(header_set *set, const uint8_t *data, size_t name_at,
                          uint32_t name_length, size_t value_at, uint32_t value_length)
{
    const uint8_t *name = data + name_at;
    size_t slot = 0;
    if (set->slot_count == 0) {
        for (size_t i = 0; i < set->count; i++) {
            kept_header *item = &set->items[i];
            if (item->name_length == name_length &&
                memcmp(data + item->name_at, name, name_length) == 0) {
                item->value_at = value_at;
                item->value_length = value_length;
                return 0;
            }
        }
    } else {
        slot = name_hash(name, name_length) & (set->slot_count - 1);
        while (set->slots[slot]) {
            kept_header *item = &set->items[set->slots[slot] - 1];
            if (item->name_length == name_length &&
                memcmp(data + item->name_at, name, name_length) == 0) {
                item->value_at = value_at;
                item->value_length = value_length;
                return 0;
            }
            slot = (slot + 1) & (set->slot_count - 1);
        }
    }
    if (set->count == set->capacity) {
        size_t capacity = set->capacity ? 2 * set->capacity : 16;
        kept_header *grown = PyMem_RawRealloc(set->items, capacity * sizeof *grown);
        if (grown == NULL) return -1;
        set->items = grown;
        set->capacity = capacity;
    }
    if (set->count >= 0xFFFFFFFEu) return -1;
    kept_header *item = &set->items[set->count++];
    item->name_at = name_at;
    item->value_at = value_at;
    item->name_length = name_length;
    item->value_length = value_length;
    if (set->slot_count) {
        if (2 * set->count > set->slot_count)
            return header_set_index(set, data, 2 * set->slot_count);
        set->slots[slot] = (uint32_t)set->count;
    } else if (set->count > HEADER_SET_LINEAR) {
        return header_set_index(set, data, 4 * HEADER_SET_LINEAR);
    }
    return 0;
}

typedef struct {
    const uint8_t *data;
    wide_t length;
    int64_t base_offset, base_timestamp, max_timestamp, first_offset, end_offset;
    int32_t count;
    int log_append_time;
    uint64_t base_position;
    /* out */
    byte_buffer records, positions, timestamps; /* positions u32, timestamps u64: native */
    int64_t first;
    int found, fault;
    uint64_t fault_offset;
    header_set headers;
} kafka_job;

/* Append one stored Iggy record: offset, state, timestamp, zero id, crc32(payload), the
 * ``rill.key`` header (``key_length`` 0: none), the kept headers, the payload. */
static int put_iggy_record(kafka_job *job, uint64_t offset, uint64_t timestamp, size_t key_at,
                           uint32_t key_length, size_t payload_at, uint64_t payload_length)
{
    const uint8_t *data = job->data;
    header_set *headers = &job->headers;
    uint64_t entries_length = key_length ? 4 + KEY_HEADER_LENGTH + 1 + 4 + key_length : 0;
    for (size_t i = 0; i < headers->count; i++)
        entries_length += 4 + headers->items[i].name_length + 1 + 4 +
                          headers->items[i].value_length;
    uint64_t position = job->base_position + job->records.length;
    if (position > MAX_POSITION || entries_length > 0xFFFFFFFFu || payload_length > 0xFFFFFFFFu)
        return CONVERT_UNSUPPORTED;
    size_t size = RECORD_OVERHEAD + (size_t)entries_length + (size_t)payload_length;
    if (buffer_reserve(&job->records, size) || buffer_reserve(&job->positions, 4) ||
        buffer_reserve(&job->timestamps, 8))
        return CONVERT_NO_MEMORY;
    uint32_t position32 = (uint32_t)position;
    memcpy(job->positions.data + job->positions.length, &position32, 4);
    job->positions.length += 4;
    memcpy(job->timestamps.data + job->timestamps.length, &timestamp, 8);
    job->timestamps.length += 8;
    uint8_t *record = job->records.data + job->records.length;
    store_le64(record, offset);
    record[8] = STATE_AVAILABLE;
    store_le64(record + 9, timestamp);
    memset(record + RECORD_ID_AT, 0, 16);
    store_le32(record + RECORD_REST_AT, (uint32_t)entries_length);
    uint8_t *out = record + RECORD_HEADERS_AT;
    if (key_length) {
        store_le32(out, KEY_HEADER_LENGTH);
        memcpy(out + 4, KEY_HEADER, KEY_HEADER_LENGTH);
        out[4 + KEY_HEADER_LENGTH] = RAW_KIND;
        store_le32(out + 5 + KEY_HEADER_LENGTH, key_length);
        memcpy(out + 9 + KEY_HEADER_LENGTH, data + key_at, key_length);
        out += 9 + KEY_HEADER_LENGTH + key_length;
    }
    for (size_t i = 0; i < headers->count; i++) {
        const kept_header *item = &headers->items[i];
        store_le32(out, item->name_length);
        memcpy(out + 4, data + item->name_at, item->name_length);
        out += 4 + item->name_length;
        *out++ = RAW_KIND;
        store_le32(out, item->value_length);
        memcpy(out + 4, data + item->value_at, item->value_length);
        out += 4 + item->value_length;
    }
    store_le32(out, (uint32_t)payload_length);
    if (payload_length) memcpy(out + 4, data + payload_at, (size_t)payload_length);
    /* over the copy: a record's checksum matches the record even if the input changed */
    store_le32(record + RECORD_CHECKSUM_AT, stamp_crc32(0, out + 4, (size_t)payload_length));
    job->records.length += size;
    return CONVERT_OK;
}

#define READ_VARINT(target)                                                                \
    if ((fault = read_kafka_varint(data, length, &position, &(target))) != CONVERT_OK)     \
        goto done;

/* The records of one (decompressed) records block, as ``_kafka_records_python`` walks them:
 * ``count`` records, those of offsets [first_offset, end_offset) converted. */
static void convert_kafka_records(kafka_job *job)
{
    const uint8_t *data = job->data;
    const wide_t length = job->length;
    int fault = CONVERT_OK;
    uint64_t fault_offset = 0;
    wide_t position = 0;
    for (int32_t n = 0; n < job->count; n++) {
        wide_t record_length, timestamp_delta, offset_delta, key_length, value_length,
            header_count;
        READ_VARINT(record_length)
        wide_t ends_at = position + record_length;
        position += 1; /* the attributes */
        READ_VARINT(timestamp_delta)
        READ_VARINT(offset_delta)
        wide_t offset = (wide_t)job->base_offset + offset_delta;
        if (offset < job->first_offset) {
            if (record_length < 0) {
                fault = CONVERT_NEGATIVE_LENGTH;
                goto done;
            }
            position = ends_at;
            continue;
        }
        if (offset >= job->end_offset) break;
        /* from here first_offset <= offset < end_offset: it fits 64 bits */
        READ_VARINT(key_length)
        wide_t key_at = position;
        if (key_length >= 0) position += key_length;
        READ_VARINT(value_length)
        wide_t payload_at = position, payload_length = 0;
        if (value_length > 0) {
            payload_length = value_length;
            position += value_length;
        }
        READ_VARINT(header_count)
        header_set_clear(&job->headers);
        for (wide_t h = 0; h < header_count; h++) {
            wide_t name_length, header_value_length;
            READ_VARINT(name_length)
            if (name_length < 0) {
                fault = CONVERT_NULL_HEADER_KEY;
                goto done;
            }
            wide_t name_at = position;
            position += name_length;
            /* the name lies inside the block once its value's length is read after it */
            READ_VARINT(header_value_length)
            if (header_value_length <= 0) continue; /* null or empty: no Iggy header holds it */
            wide_t value_at = position;
            position += header_value_length;
            if (header_value_length <= MAX_HEADER_PART && name_length > 0 &&
                name_length <= MAX_HEADER_PART &&
                !(name_length == KEY_HEADER_LENGTH &&
                  memcmp(data + (size_t)name_at, KEY_HEADER, KEY_HEADER_LENGTH) == 0) &&
                stamp_valid_utf8(data + (size_t)name_at, (size_t)name_length)) {
                /* value_at <= length: a varint was read just before it */
                if (header_set_put(&job->headers, data, (size_t)name_at, (uint32_t)name_length,
                                   (size_t)value_at, (uint32_t)header_value_length)) {
                    fault = CONVERT_NO_MEMORY;
                    goto done;
                }
            }
        }
        if (position > ends_at || ends_at > length) {
            fault = CONVERT_OVERRUN;
            fault_offset = (uint64_t)offset;
            goto done;
        }
        /* everything read lies inside [0, ends_at]: the kept positions can be copied */
        position = ends_at;
        wide_t timestamp_ms = job->log_append_time ? (wide_t)job->max_timestamp
                                                   : (wide_t)job->base_timestamp + timestamp_delta;
        wide_t timestamp = timestamp_ms > 0 ? timestamp_ms * 1000 : 0;
        if (timestamp > (wide_t)UINT64_MAX) {
            fault = CONVERT_TIMESTAMP;
            fault_offset = (uint64_t)offset;
            goto done;
        }
        uint32_t kept_key = key_length > 0 && key_length <= MAX_HEADER_PART
                                ? (uint32_t)key_length : 0;
        fault = put_iggy_record(job, (uint64_t)offset, (uint64_t)timestamp, (size_t)key_at,
                                kept_key, (size_t)payload_at, (uint64_t)payload_length);
        if (fault != CONVERT_OK) goto done;
        if (!job->found) {
            job->found = 1;
            job->first = (int64_t)offset;
        }
    }
done:
    job->fault = fault;
    job->fault_offset = fault_offset;
}

#undef READ_VARINT

static int int64_arguments(PyObject *const *args, int count, int64_t *values)
{
    for (int i = 0; i < count; i++) {
        long long value = PyLong_AsLongLong(args[i]);
        if (value == -1 && PyErr_Occurred()) return -1;
        values[i] = (int64_t)value;
    }
    return 0;
}

/* kafka_to_iggy(block, base_offset, count, base_timestamp, max_timestamp, log_append_time,
 *               first_offset, end_offset, base_position)
 *     -> (records: bytes, positions: bytes, timestamps: bytes, first_offset: int | None)
 *     -> str        the block does not parse: the reference's ValueError / IndexError text
 *     -> int        STATUS_UNSUPPORTED: past u32 positions or lengths (use the reference) */
PyObject *convert_kafka_to_iggy(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 9) {
        PyErr_SetString(PyExc_TypeError, "kafka_to_iggy(block, base_offset, count, "
                                         "base_timestamp, max_timestamp, log_append_time, "
                                         "first_offset, end_offset, base_position) takes 9 "
                                         "arguments");
        return NULL;
    }
    int64_t values[8];
    if (int64_arguments(args + 1, 8, values) < 0) return NULL;
    kafka_job job;
    memset(&job, 0, sizeof job);
    if (values[1] < INT32_MIN || values[1] > INT32_MAX || values[7] < 0) {
        PyErr_SetString(PyExc_ValueError, "kafka_to_iggy: count or base_position out of range");
        return NULL;
    }
    job.base_offset = values[0];
    job.count = (int32_t)values[1];
    job.base_timestamp = values[2];
    job.max_timestamp = values[3];
    job.log_append_time = values[4] != 0;
    job.first_offset = values[5];
    job.end_offset = values[6];
    job.base_position = (uint64_t)values[7];
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) return NULL;
    job.data = view.buf;
    job.length = (wide_t)view.len;
    if (view.len >= GIL_RELEASE_MIN_BYTES) {
        Py_BEGIN_ALLOW_THREADS
        convert_kafka_records(&job);
        Py_END_ALLOW_THREADS
    } else {
        convert_kafka_records(&job);
    }
    PyObject *result = NULL;
    if (job.fault == CONVERT_NO_MEMORY) {
        PyErr_NoMemory();
    } else if (job.fault == CONVERT_UNSUPPORTED) {
        result = PyLong_FromLong(STATUS_UNSUPPORTED);
    } else if (job.fault != CONVERT_OK) {
        result = conversion_fault_text(job.fault, job.fault_offset);
    } else {
        PyObject *first = Py_None;
        if (job.found)
            first = PyLong_FromLongLong(job.first);
        else
            Py_INCREF(first);
        if (first != NULL)
            /* y# of a NULL pointer is None: no record converted is empty bytes */
            result = Py_BuildValue("(y#y#y#N)",
                                   job.found ? (const char *)job.records.data : "",
                                   (Py_ssize_t)job.records.length,
                                   job.found ? (const char *)job.positions.data : "",
                                   (Py_ssize_t)job.positions.length,
                                   job.found ? (const char *)job.timestamps.data : "",
                                   (Py_ssize_t)job.timestamps.length, first);
    }
    PyBuffer_Release(&view);
    PyMem_RawFree(job.records.data);
    PyMem_RawFree(job.positions.data);
    PyMem_RawFree(job.timestamps.data);
    header_set_free(&job.headers);
    return result;
}

/* -------------------------------------------- stored Iggy records -> a Kafka records block */

typedef struct {
    uint64_t offset;
    int64_t timestamp_ms;
    size_t headers_at, payload_at;
    uint32_t headers_length, payload_length;
} iggy_row;

/* A header of an Iggy record as a Kafka header: where its key and value lie. */
typedef struct {
    size_t name_at, value_at;
    uint32_t name_length, value_length;
} iggy_header;

typedef struct {
    const uint8_t *data;
    uint64_t length, first_offset, end_offset;
    /* out */
    byte_buffer records;
    iggy_row *rows; /* PyMem_Raw */
    size_t row_count, row_capacity;
    iggy_header *headers; /* one record's, reused */
    size_t header_capacity;
    int64_t max_timestamp;
    int fault;
    uint64_t fault_offset;
} iggy_job;

static int iggy_job_grow_headers(iggy_job *job, size_t wanted)
{
    if (wanted <= job->header_capacity) return 0;
    size_t capacity = job->header_capacity ? 2 * job->header_capacity : 16;
    while (capacity < wanted) capacity *= 2;
    iggy_header *grown = PyMem_RawRealloc(job->headers, capacity * sizeof *grown);
    if (grown == NULL) return -1;
    job->headers = grown;
    job->header_capacity = capacity;
    return 0;
}

/* One record (``put_record``): the ``rill.key`` header (its first one) is the key, the other
 * headers are Kafka headers with their stored bytes, the payload is the value. */
static int put_kafka_record(iggy_job *job, const iggy_row *row, uint64_t base_offset,
                            int64_t base_timestamp)
{
    const uint8_t *data = job->data;
    size_t position = row->headers_at, end = row->headers_at + row->headers_length;
    size_t count = 0, key_at = 0;
    int64_t key_length = -1; /* none: a null key */
    uint64_t headers_size = 0;
    while (position < end) {
        if (end - position < 4) return CONVERT_HEADER_MAP;
        size_t name_length = load_le32(data + position);
        size_t name_at = position + 4;
        if (end - name_at < name_length + 1 + 4) return CONVERT_HEADER_MAP;
        size_t value_length_at = name_at + name_length + 1; /* the kind byte is not carried */
        size_t value_length = load_le32(data + value_length_at);
        size_t value_at = value_length_at + 4;
        if (end - value_at < value_length) return CONVERT_HEADER_MAP;
        position = value_at + value_length;
        if (key_length < 0 && name_length == KEY_HEADER_LENGTH &&
            memcmp(data + name_at, KEY_HEADER, KEY_HEADER_LENGTH) == 0) {
            key_at = value_at;
            key_length = (int64_t)value_length;
            continue;
        }
        if (iggy_job_grow_headers(job, count + 1)) return CONVERT_NO_MEMORY;
        iggy_header *header = &job->headers[count++];
        header->name_at = name_at;
        header->name_length = (uint32_t)name_length;
        header->value_at = value_at;
        header->value_length = (uint32_t)value_length;
        headers_size += kafka_varint_size((wide_t)name_length) + name_length +
                        kafka_varint_size((wide_t)value_length) + value_length;
    }
    wide_t offset_delta = (wide_t)row->offset - (wide_t)base_offset;
    wide_t timestamp_delta = (wide_t)row->timestamp_ms - (wide_t)base_timestamp;
    uint64_t key_size =
        key_length < 0 ? 1 : kafka_varint_size((wide_t)key_length) + (uint64_t)key_length;
    uint64_t body = 1 + kafka_varint_size(timestamp_delta) + kafka_varint_size(offset_delta) +
                    key_size +
                    kafka_varint_size((wide_t)row->payload_length) + row->payload_length +
                    kafka_varint_size((wide_t)count) + headers_size;
    size_t size = kafka_varint_size((wide_t)body) + (size_t)body;
    if (buffer_reserve(&job->records, size)) return CONVERT_NO_MEMORY;
    uint8_t *out = job->records.data + job->records.length;
    out = put_kafka_varint(out, (wide_t)body);
    *out++ = 0; /* attributes */
    out = put_kafka_varint(out, timestamp_delta);
    out = put_kafka_varint(out, offset_delta);
    if (key_length < 0) {
        *out++ = 1; /* zig-zag -1: a null key */
    } else {
        out = put_kafka_varint(out, (wide_t)key_length);
        memcpy(out, data + key_at, (size_t)key_length);
        out += key_length;
    }
    out = put_kafka_varint(out, (wide_t)row->payload_length);
    memcpy(out, data + row->payload_at, row->payload_length);
    out += row->payload_length;
    out = put_kafka_varint(out, (wide_t)count);
    for (size_t i = 0; i < count; i++) {
        const iggy_header *header = &job->headers[i];
        out = put_kafka_varint(out, (wide_t)header->name_length);
        memcpy(out, data + header->name_at, header->name_length);
        out += header->name_length;
        out = put_kafka_varint(out, (wide_t)header->value_length);
        memcpy(out, data + header->value_at, header->value_length);
        out += header->value_length;
    }
    job->records.length += size;
    return CONVERT_OK;
}

/* As ``iggy_to_kafka_python``: walk the whole read first (a record overrunning it is refused
 * even after the range), keep the rows of [first_offset, end_offset), then build their
 * records. */
static void convert_iggy_records(iggy_job *job)
{
    const uint8_t *data = job->data;
    uint64_t at = 0, total = job->length;
    int fault = CONVERT_OK;
    while (total - at >= RECORD_OVERHEAD) { /* at <= total: a record ends inside the read */
        uint64_t offset = load_le64(data + at);
        uint64_t headers_at = at + RECORD_HEADERS_AT;
        uint64_t headers_length = load_le32(data + at + RECORD_REST_AT);
        if (total - headers_at < headers_length + 4) {
            fault = CONVERT_READ_OVERRUN;
            job->fault_offset = offset;
            goto done;
        }
        uint64_t payload_at = headers_at + headers_length + 4;
        uint64_t payload_length = load_le32(data + payload_at - 4);
        if (total - payload_at < payload_length) {
            fault = CONVERT_READ_OVERRUN;
            job->fault_offset = offset;
            goto done;
        }
        if (offset >= job->end_offset) break;
        if (offset >= job->first_offset) {
            if (job->row_count == job->row_capacity) {
                size_t capacity = job->row_capacity ? 2 * job->row_capacity : 64;
                iggy_row *grown = PyMem_RawRealloc(job->rows, capacity * sizeof *grown);
                if (grown == NULL) {
                    fault = CONVERT_NO_MEMORY;
                    goto done;
                }
                job->rows = grown;
                job->row_capacity = capacity;
            }
            iggy_row *row = &job->rows[job->row_count++];
            row->offset = offset;
            row->timestamp_ms = (int64_t)(load_le64(data + at + RECORD_TIMESTAMP_AT) / 1000);
            row->headers_at = (size_t)headers_at;
            row->headers_length = (uint32_t)headers_length;
            row->payload_at = (size_t)payload_at;
            row->payload_length = (uint32_t)payload_length;
        }
        at = payload_at + payload_length;
    }
    if (job->row_count == 0) goto done;
    uint64_t base_offset = job->rows[0].offset;
    int64_t base_timestamp = job->rows[0].timestamp_ms, max_timestamp = base_timestamp;
    for (size_t i = 0; i < job->row_count; i++) {
        const iggy_row *row = &job->rows[i];
        if (row->timestamp_ms > max_timestamp) max_timestamp = row->timestamp_ms;
        fault = put_kafka_record(job, row, base_offset, base_timestamp);
        if (fault != CONVERT_OK) {
            job->fault_offset = row->offset;
            goto done;
        }
    }
    job->max_timestamp = max_timestamp;
done:
    job->fault = fault;
}

/* iggy_to_kafka(records, first_offset, end_offset)
 *     -> (records_block: bytes, count, base_offset, last_offset, base_timestamp_ms,
 *         max_timestamp_ms)   the RecordBatch v2 records of the offsets kept (put_record's)
 *     -> None                 no record of the range
 *     -> str                  malformed: the reference's CannotReadMessage reason, less its
 *                             "Cannot read message: " */
PyObject *convert_iggy_to_kafka(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError,
                        "iggy_to_kafka(records, first_offset, end_offset) takes 3 arguments");
        return NULL;
    }
    iggy_job job;
    memset(&job, 0, sizeof job);
    unsigned long long values[2];
    if (uint64_arguments(args + 1, 2, values) < 0) return NULL;
    job.first_offset = values[0];
    job.end_offset = values[1];
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) return NULL;
    job.data = view.buf;
    job.length = (uint64_t)view.len;
    if (view.len >= GIL_RELEASE_MIN_BYTES) {
        Py_BEGIN_ALLOW_THREADS
        convert_iggy_records(&job);
        Py_END_ALLOW_THREADS
    } else {
        convert_iggy_records(&job);
    }
    PyObject *result = NULL;
    if (job.fault == CONVERT_NO_MEMORY) {
        PyErr_NoMemory();
    } else if (job.fault != CONVERT_OK) {
        result = conversion_fault_text(job.fault, job.fault_offset);
    } else if (job.row_count == 0) {
        Py_INCREF(Py_None);
        result = Py_None;
    } else {
        result = Py_BuildValue("(y#nKKLL)", (const char *)job.records.data,
                               (Py_ssize_t)job.records.length, (Py_ssize_t)job.row_count,
                               (unsigned long long)job.rows[0].offset,
                               (unsigned long long)job.rows[job.row_count - 1].offset,
                               (long long)job.rows[0].timestamp_ms,
                               (long long)job.max_timestamp);
    }
    PyBuffer_Release(&view);
    PyMem_RawFree(job.records.data);
    PyMem_RawFree(job.rows);
    PyMem_RawFree(job.headers);
    return result;
}
#endif /* RILL_HAVE_CONVERSION */
