/*
 * _iggy_to_kafka: stored Iggy records -> a Kafka RecordBatch v2 records block, the C twin of
 * the record walk of rill.server.storage.formats.conversion.iggy_to_kafka_python; a unit of the
 * ``_stamp`` module (see _convert.c and _convert.h).
 */

#include "_convert.h"

#if RILL_HAVE_CONVERSION
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
