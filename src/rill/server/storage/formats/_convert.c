/*
 * _convert: the C twins of rill.server.storage.formats.conversion's per-record loops, two units
 * of the ``_stamp`` module (_stamp.c registers ``kafka_to_iggy`` and ``iggy_to_kafka``):
 * this one holds Kafka RecordBatch v2 records -> stored Iggy records and the helpers both
 * directions use; _iggy_to_kafka.c the other direction; _convert.h what they share (and why
 * every value read is held in 128 bits).
 */

#include "_convert.h"

#if RILL_HAVE_CONVERSION
/* Room for ``more`` bytes past the end; -1 when memory runs out. */
int buffer_reserve(byte_buffer *buffer, size_t more)
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

PyObject *conversion_fault_text(int fault, uint64_t offset)
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

/* stamp_converted(records, starts, times, first_offset, now_us, last_us, relative, base): the
 * twin of conversion.stamp_converted_python. ``records`` (writable): stored Iggy records
 * as kafka_to_iggy made them; ``starts``: count + 1 native u32 (where each starts, then the
 * end); ``times``: count native u64 (µs, 0 = none). Writes offset first_offset + i and the
 * timestamp (its own, now_us when 0, never below the one before, from last_us) into each
 * record, and returns (index_entries, first_timestamp, last_timestamp); an int i when record i
 * has an empty payload (nothing is returned for the others: the caller discards the copy); a
 * str when the positions do not describe the records or do not fit u32 index entries. */
PyObject *convert_stamp_converted(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 8) {
        PyErr_SetString(PyExc_TypeError, "stamp_converted(records, starts, times, first_offset, "
                                         "now_us, last_us, relative, base) takes 8 arguments");
        return NULL;
    }
    unsigned long long values[5];
    if (uint64_arguments(args + 3, 5, values) < 0) return NULL;
    uint64_t first_offset = values[0], now_us = values[1], previous = values[2];
    uint64_t relative = values[3], base = values[4];
    Py_buffer records, starts, times;
    if (PyObject_GetBuffer(args[0], &records, PyBUF_WRITABLE) < 0) return NULL;
    if (PyObject_GetBuffer(args[1], &starts, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&records);
        return NULL;
    }
    if (PyObject_GetBuffer(args[2], &times, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&records);
        PyBuffer_Release(&starts);
        return NULL;
    }
    PyObject *result = NULL;
    size_t count = (size_t)times.len / 8;
    uint8_t *data = records.buf;
    size_t length = (size_t)records.len;
    const uint32_t *start_at = starts.buf;  /* native order, as array("I") holds them */
    const uint64_t *time_at = times.buf;
    uint8_t *entries = NULL;
    if ((size_t)starts.len != (count + 1) * 4 || (size_t)times.len % 8 || count == 0) {
        result = PyUnicode_FromString("the positions and timestamps do not match the records");
        goto done;
    }
    if (relative + count - 1 > UINT32_MAX || base + length > (uint64_t)UINT32_MAX + 1) {
        result = PyUnicode_FromString("the records do not fit u32 index entries");
        goto done;
    }
    entries = PyMem_RawMalloc(count * 16);
    if (entries == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    uint64_t first_timestamp = 0;
    for (size_t i = 0; i < count; i++) {
        size_t at = start_at[i], end = start_at[i + 1];
        if (at > end || end > length || end - at < RECORD_OVERHEAD ||
                (i == 0 && at != 0) || (i == count - 1 && end != length)) {
            result = PyUnicode_FromFormat("record %zu: its positions are out of range", i);
            goto done;
        }
        uint64_t headers_length = load_le32(data + at + RECORD_HEADERS_AT - 4);
        if (headers_length > end - at - RECORD_OVERHEAD) {
            result = PyUnicode_FromFormat("record %zu: its positions are out of range", i);
            goto done;
        }
        if (load_le32(data + at + RECORD_HEADERS_AT + headers_length) == 0) {
            result = PyLong_FromSize_t(i);
            goto done;
        }
        uint64_t timestamp = time_at[i] ? time_at[i] : now_us;
        if (timestamp < previous) timestamp = previous;
        previous = timestamp;
        if (i == 0) first_timestamp = timestamp;
        store_le64(data + at, first_offset + i);
        store_le64(data + at + RECORD_TIMESTAMP_AT, timestamp);
        store_le32(entries + 16 * i, (uint32_t)(relative + i));
        store_le32(entries + 16 * i + 4, (uint32_t)(base + at));
        store_le64(entries + 16 * i + 8, timestamp);
    }
    result = Py_BuildValue("(y#KK)", (const char *)entries, (Py_ssize_t)(count * 16),
                           (unsigned long long)first_timestamp, (unsigned long long)previous);
done:
    PyMem_RawFree(entries);
    PyBuffer_Release(&records);
    PyBuffer_Release(&starts);
    PyBuffer_Release(&times);
    return result;
}

#endif /* RILL_HAVE_CONVERSION */
