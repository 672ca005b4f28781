/*
 * _record_checks.c, a unit of the ``_stamp`` module (_stamp.c defines the module): the C
 * twins of the record checks of every read and recovery (rill.server.storage.formats.iggy_v1_checks,
 * the reference: the same verdicts, the same texts).
 *
 * Owns: ``verify`` (stored records against their index entries), ``scan`` (records walked from
 * a position, building index entries) and ``find_record`` (the first record of an offset
 * range at or after a position), as ``checks_*`` for the module's table. The GIL is released
 * while a loop runs over GIL_RELEASE_MIN_BYTES or more; the buffer is pinned meanwhile.
 */

#include "_stamp.h"

/* What a record check found wrong; worded by ``fault_text`` exactly as the reference words it. */
enum {
    FAULT_NONE = 0,
    FAULT_INCOMPLETE,          /* found: bytes left */
    FAULT_OFFSET,              /* found: the offset field */
    FAULT_STATE,               /* found: the state */
    FAULT_HEADERS_OVERRUN,     /* found: headers_length */
    FAULT_PAYLOAD_LENGTH,      /* found: payload_length */
    FAULT_CHECKSUM,            /* found: crc32 of the payload, other: the stored checksum */
    FAULT_HEADER_MAP,          /* header: the problem */
    FAULT_TIMESTAMP_BACKWARDS, /* found: its timestamp, other: the previous record's */
    FAULT_TIMESTAMP_AHEAD,     /* found: its timestamp, other: the next record's */
    FAULT_INDEX_RELATIVE,      /* found: the entry's relative offset, other: the expected one */
    FAULT_INDEX_POSITION,      /* found: the entry's position, other: where the next begins */
    FAULT_INDEX_TIMESTAMP,     /* found: the record's timestamp, other: the entry's */
    FAULT_RECORD_END,          /* found: where its lengths end, other: where the index ends it */
    FAULT_POSITION_OVERFLOW,   /* the record starts past the u32 positions of an index */
    FAULT_NO_MEMORY,
};

static const int FAULT_KINDS[] = {
    [FAULT_NONE] = KIND_GOOD,
    [FAULT_INCOMPLETE] = KIND_STRUCTURE,
    [FAULT_OFFSET] = KIND_STRUCTURE,
    [FAULT_STATE] = KIND_STRUCTURE,
    [FAULT_HEADERS_OVERRUN] = KIND_STRUCTURE,
    [FAULT_PAYLOAD_LENGTH] = KIND_STRUCTURE,
    [FAULT_CHECKSUM] = KIND_CONTENT,
    [FAULT_HEADER_MAP] = KIND_CONTENT,
    [FAULT_TIMESTAMP_BACKWARDS] = KIND_TIMESTAMP,
    [FAULT_TIMESTAMP_AHEAD] = KIND_TIMESTAMP,
    [FAULT_INDEX_RELATIVE] = KIND_STRUCTURE,
    [FAULT_INDEX_POSITION] = KIND_STRUCTURE,
    [FAULT_INDEX_TIMESTAMP] = KIND_STRUCTURE,
    [FAULT_RECORD_END] = KIND_STRUCTURE,
    [FAULT_POSITION_OVERFLOW] = KIND_STRUCTURE,
    [FAULT_NO_MEMORY] = KIND_GOOD,
};

typedef struct {
    int fault;
    uint64_t position; /* of the record in the log */
    uint64_t offset;   /* the offset expected there */
    uint64_t found, other;
    header_problem header;
} record_fault;

static inline int known_state(uint8_t state)
{
    return state == 1 || state == 10 || state == 20 || state == 30;
}

/* Check the record at ``data[at]`` (``base + at`` in the log) as offset ``offset``, within
 * ``limit`` bytes of ``data``: layout, then (``index_timestamp``) the index's timestamp, then
 * checksum and header map (``checksums``). Sets ``*stop`` to where its lengths end once those
 * fit. Returns the fault, details in ``f``. */
static int check_record(const uint8_t *data, uint64_t limit, uint64_t at, uint64_t offset,
                        uint64_t base, const uint64_t *index_timestamp, int checksums,
                        key_list *keys, record_fault *f, uint64_t *stop)
{
    f->position = base + at;
    f->offset = offset;
    if (limit - at < RECORD_OVERHEAD) {
        f->found = limit - at;
        return f->fault = FAULT_INCOMPLETE;
    }
    const uint8_t *record = data + at;
    uint64_t found_offset = load_le64(record);
    if (found_offset != offset) {
        f->found = found_offset;
        return f->fault = FAULT_OFFSET;
    }
    if (!known_state(record[RECORD_STATE_AT])) {
        f->found = record[RECORD_STATE_AT];
        return f->fault = FAULT_STATE;
    }
    uint64_t timestamp = load_le64(record + RECORD_TIMESTAMP_AT);
    if (index_timestamp != NULL && timestamp != *index_timestamp) {
        f->found = timestamp;
        f->other = *index_timestamp;
        return f->fault = FAULT_INDEX_TIMESTAMP;
    }
    uint32_t headers_length = load_le32(record + RECORD_REST_AT);
    uint64_t payload_length_at = at + RECORD_HEADERS_AT + headers_length;
    if (payload_length_at + 4 > limit) {
        f->found = headers_length;
        return f->fault = FAULT_HEADERS_OVERRUN;
    }
    uint32_t payload_length = load_le32(data + payload_length_at);
    uint64_t end = payload_length_at + 4 + payload_length;
    if (payload_length == 0 || end > limit) {
        f->found = payload_length;
        return f->fault = FAULT_PAYLOAD_LENGTH;
    }
    *stop = end;
    if (!checksums) return f->fault = FAULT_NONE;
    uint32_t actual = stamp_crc32(0, data + payload_length_at + 4, payload_length);
    uint32_t stored = load_le32(record + RECORD_CHECKSUM_AT);
    if (actual != stored) {
        f->found = actual;
        f->other = stored;
        return f->fault = FAULT_CHECKSUM;
    }
    if (headers_length) {
        uint64_t values = 0;
        int status = check_header_map(record + RECORD_HEADERS_AT, headers_length, keys, &values,
                                      UINT64_MAX, &f->header);
        if (status == HEADER_NO_MEMORY) return f->fault = FAULT_NO_MEMORY;
        if (status != HEADER_OK) return f->fault = FAULT_HEADER_MAP;
    }
    return f->fault = FAULT_NONE;
}

/* The reference's words for a fault (GIL held), or NULL with an error. */
static PyObject *fault_text(const record_fault *f)
{
    unsigned long long at = f->position, offset = f->offset, found = f->found, other = f->other;
    switch (f->fault) {
    case FAULT_INCOMPLETE:
        return PyUnicode_FromFormat("incomplete record at byte %llu: %llu bytes left", at, found);
    case FAULT_OFFSET:
        return PyUnicode_FromFormat("record at byte %llu has offset %llu, expected %llu", at,
                                    found, offset);
    case FAULT_STATE:
        return PyUnicode_FromFormat("record at byte %llu (offset %llu) has unknown state %llu",
                                    at, offset, found);
    case FAULT_HEADERS_OVERRUN:
        return PyUnicode_FromFormat(
            "record at byte %llu (offset %llu): headers length %llu overruns the data", at,
            offset, found);
    case FAULT_PAYLOAD_LENGTH:
        return PyUnicode_FromFormat("record at byte %llu (offset %llu): payload length %llu",
                                    at, offset, found);
    case FAULT_CHECKSUM:
        return PyUnicode_FromFormat(
            "record at byte %llu (offset %llu): checksum %llu where %llu is stored", at, offset,
            found, other);
    case FAULT_HEADER_MAP: {
        PyObject *detail = header_problem_text(&f->header);
        if (detail == NULL) return NULL;
        PyObject *text = PyUnicode_FromFormat("record at byte %llu (offset %llu): header map: %U",
                                              at, offset, detail);
        Py_DECREF(detail);
        return text;
    }
    case FAULT_TIMESTAMP_BACKWARDS:
        return PyUnicode_FromFormat(
            "record at byte %llu (offset %llu) has timestamp %llu, before %llu", at, offset,
            found, other);
    case FAULT_TIMESTAMP_AHEAD:
        return PyUnicode_FromFormat(
            "record at byte %llu (offset %llu) has timestamp %llu, after the next record's %llu",
            at, offset, found, other);
    case FAULT_INDEX_RELATIVE:
        return PyUnicode_FromFormat(
            "index entry of offset %llu has relative offset %llu, expected %llu", offset, found,
            other);
    case FAULT_INDEX_POSITION:
        return PyUnicode_FromFormat(
            "index entry of offset %llu puts the record at bytes %llu..%llu, outside the data",
            offset, found, other);
    case FAULT_INDEX_TIMESTAMP:
        return PyUnicode_FromFormat(
            "record at byte %llu (offset %llu) has timestamp %llu, the index says %llu", at,
            offset, found, other);
    case FAULT_RECORD_END:
        return PyUnicode_FromFormat(
            "record at byte %llu (offset %llu) ends at byte %llu, the index says %llu", at,
            offset, found, other);
    case FAULT_POSITION_OVERFLOW:
        return PyUnicode_FromFormat(
            "record at byte %llu (offset %llu) starts past the u32 positions of an index", at,
            offset);
    default:
        PyErr_SetString(PyExc_SystemError, "_stamp: no fault to word");
        return NULL;
    }
}

/* ``(count, kind, reason)`` for a stopped check: ``count`` records were good, the next one has
 * ``f``; ``(count, 0, None)`` when all were. */
static PyObject *check_result(Py_ssize_t count, const record_fault *f)
{
    if (f->fault == FAULT_NONE) return Py_BuildValue("(niO)", count, KIND_GOOD, Py_None);
    PyObject *reason = fault_text(f);
    if (reason == NULL) return NULL;
    PyObject *result = Py_BuildValue("(niN)", count, FAULT_KINDS[f->fault], reason);
    return result;
}

typedef struct {
    const uint8_t *data;    /* the records */
    uint64_t length;
    const uint8_t *entries; /* their index entries */
    uint64_t count;
    uint64_t first_offset, relative_first, base_position;
    uint64_t good;          /* out: records that verified */
    record_fault fault;
} verify_job;

/* Check ``count`` records against their index entries: each entry has the expected relative
 * offset and puts its record inside the data, right after the previous one (the first at
 * ``base_position``, the last ending at the end of the data); each record carries the expected
 * offset, a known state and the entry's timestamp, its lengths end where the next begins, and
 * its checksum and header map are right. Stops at the first that is not so. */
static void verify_records(verify_job *job)
{
    key_list keys = {NULL, 0, 0};
    record_fault *f = &job->fault;
    memset(f, 0, sizeof *f);
    uint64_t base = job->base_position, end_position = base + job->length;
    uint64_t i;
    for (i = 0; i < job->count; i++) {
        const uint8_t *entry = job->entries + INDEX_ENTRY_SIZE * i;
        uint64_t offset = job->first_offset + i;
        uint64_t relative = load_le32(entry), position = load_le32(entry + 4);
        uint64_t timestamp = load_le64(entry + 8);
        uint64_t next = i + 1 < job->count ? load_le32(entry + INDEX_ENTRY_SIZE + 4)
                                           : end_position;
        f->offset = offset;
        f->position = position;
        if (relative != job->relative_first + i) {
            f->found = relative;
            f->other = job->relative_first + i;
            f->fault = FAULT_INDEX_RELATIVE;
            break;
        }
        if ((i == 0 && position != base) || position < base || next < position ||
            next > end_position) {
            f->found = position;
            f->other = next;
            f->fault = FAULT_INDEX_POSITION;
            break;
        }
        uint64_t stop = 0;
        if (check_record(job->data, next - base, position - base, offset, base, &timestamp, 1,
                         &keys, f, &stop) != FAULT_NONE)
            break;
        if (stop != next - base) {
            f->found = base + stop;
            f->other = next;
            f->fault = FAULT_RECORD_END;
            break;
        }
    }
    job->good = i;
    PyMem_RawFree(keys.keys);
}

/* verify(records, entries, first_offset, relative_first, base_position) -> (count, kind, reason) */
PyObject *checks_verify(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "verify(records, entries, first_offset, "
                                         "relative_first, base_position) takes 5 arguments");
        return NULL;
    }
    verify_job job;
    memset(&job, 0, sizeof job);
    unsigned long long values[3];
    if (uint64_arguments(args + 2, 3, values) < 0) return NULL;
    job.first_offset = values[0];
    job.relative_first = values[1];
    job.base_position = values[2];
    Py_buffer records, entries;
    if (PyObject_GetBuffer(args[0], &records, PyBUF_SIMPLE) < 0) return NULL;
    if (PyObject_GetBuffer(args[1], &entries, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&records);
        return NULL;
    }
    job.data = records.buf;
    job.length = (uint64_t)records.len;
    job.entries = entries.buf;
    job.count = (uint64_t)entries.len / INDEX_ENTRY_SIZE;
    if (records.len >= GIL_RELEASE_MIN_BYTES) {
        Py_BEGIN_ALLOW_THREADS
        verify_records(&job);
        Py_END_ALLOW_THREADS
    } else {
        verify_records(&job);
    }
    PyObject *result = job.fault.fault == FAULT_NO_MEMORY
                           ? PyErr_NoMemory()
                           : check_result((Py_ssize_t)job.good, &job.fault);
    PyBuffer_Release(&entries);
    PyBuffer_Release(&records);
    return result;
}

typedef struct {
    const uint8_t *data;
    uint64_t length, start, offset, segment_start, previous_timestamp, max_count;
    uint64_t position_base; /* added to each entry's position (the data's place in a segment) */
    int checksums;
    /* out */
    uint8_t *entries; /* PyMem_Raw; count entries */
    uint64_t count, capacity, position, first_timestamp;
    record_fault fault;
} scan_job;

/* Whether the record after the one at ``at`` carries ``offset`` and a timestamp of at least
 * ``timestamp`` (then the one at ``at`` is the record out of order, not the one before it). */
static int in_order_after(const uint8_t *data, uint64_t length, uint64_t at, uint64_t offset,
                          uint64_t timestamp)
{
    if (length - at < RECORD_OVERHEAD) return 0;
    uint64_t payload_length_at = at + RECORD_HEADERS_AT + load_le32(data + at + RECORD_REST_AT);
    if (payload_length_at + 4 > length) return 0;
    uint64_t end = payload_length_at + 4 + load_le32(data + payload_length_at);
    if (end > length || length - end < RECORD_TIMESTAMP_AT + 8) return 0;
    return load_le64(data + end) == offset &&
           load_le64(data + end + RECORD_TIMESTAMP_AT) >= timestamp;
}

/* Walk records from ``start`` with dense offsets from ``offset`` (at most ``max_count``),
 * building their index entries, until the data ends or a record does not check (layout,
 * checksum, header map) or has a timestamp out of order: before the previous one, or after
 * the next one while that one is not before the previous and the one after it is not after
 * this one either. */
static void scan_records(scan_job *job)
{
    key_list keys = {NULL, 0, 0};
    record_fault *f = &job->fault;
    memset(f, 0, sizeof *f);
    const uint8_t *data = job->data;
    uint64_t position = job->start, offset = job->offset, previous = job->previous_timestamp;
    while (position < job->length && job->count < job->max_count) {
        uint64_t stop = 0;
        if (position + job->position_base > MAX_POSITION) {
            f->position = position;
            f->offset = offset;
            f->fault = FAULT_POSITION_OVERFLOW;
            break;
        }
        if (check_record(data, job->length, position, offset, 0, NULL, job->checksums, &keys, f,
                         &stop) != FAULT_NONE)
            break;
        uint64_t timestamp = load_le64(data + position + RECORD_TIMESTAMP_AT);
        if (timestamp < previous) {
            f->found = timestamp;
            f->other = previous;
            f->fault = FAULT_TIMESTAMP_BACKWARDS;
            break;
        }
        if (job->length - stop >= RECORD_TIMESTAMP_AT + 8 && load_le64(data + stop) == offset + 1) {
            uint64_t next = load_le64(data + stop + RECORD_TIMESTAMP_AT);
            if (next < timestamp && next >= previous &&
                !in_order_after(data, job->length, stop, offset + 2, timestamp)) {
                f->found = timestamp;
                f->other = next;
                f->fault = FAULT_TIMESTAMP_AHEAD;
                break;
            }
        }
        if (job->count == job->capacity) {
            uint64_t capacity = job->capacity ? 2 * job->capacity : 256;
            uint8_t *grown = PyMem_RawRealloc(job->entries, capacity * INDEX_ENTRY_SIZE);
            if (grown == NULL) {
                f->fault = FAULT_NO_MEMORY;
                break;
            }
            job->entries = grown;
            job->capacity = capacity;
        }
        uint8_t *entry = job->entries + INDEX_ENTRY_SIZE * job->count;
        store_le32(entry, (uint32_t)(offset - job->segment_start));
        store_le32(entry + 4, (uint32_t)(position + job->position_base));
        store_le64(entry + 8, timestamp);
        if (job->count == 0) job->first_timestamp = timestamp;
        job->count++;
        previous = timestamp;
        offset++;
        position = stop;
    }
    job->position = position;
    PyMem_RawFree(keys.keys);
}

/* scan(view, start_position, expected_offset, segment_start, previous_timestamp, max_count,
 *      verify_checksums, position_base) -> (count, end_position, index_entries,
 *                                           first_timestamp, last_timestamp, kind, reason) */
PyObject *checks_scan(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 8) {
        PyErr_SetString(PyExc_TypeError, "scan(view, start_position, expected_offset, "
                                         "segment_start, previous_timestamp, max_count, "
                                         "verify_checksums, position_base) takes 8 arguments");
        return NULL;
    }
    scan_job job;
    memset(&job, 0, sizeof job);
    unsigned long long values[5], base;
    if (uint64_arguments(args + 1, 5, values) < 0) return NULL;
    if (uint64_arguments(args + 7, 1, &base) < 0) return NULL;
    job.position_base = base;
    job.start = values[0];
    job.offset = values[1];
    job.segment_start = values[2];
    job.previous_timestamp = values[3];
    job.max_count = values[4];
    job.checksums = PyObject_IsTrue(args[6]);
    if (job.checksums < 0) return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) return NULL;
    job.data = view.buf;
    job.length = (uint64_t)view.len;
    if (job.start < job.length && job.length - job.start >= GIL_RELEASE_MIN_BYTES) {
        Py_BEGIN_ALLOW_THREADS
        scan_records(&job);
        Py_END_ALLOW_THREADS
    } else {
        scan_records(&job);
    }
    PyObject *result = NULL, *entries = NULL, *reason = Py_None;
    if (job.fault.fault == FAULT_NO_MEMORY) {
        PyErr_NoMemory();
        goto done;
    }
    entries = PyByteArray_FromStringAndSize((const char *)job.entries,
                                            (Py_ssize_t)(job.count * INDEX_ENTRY_SIZE));
    if (entries == NULL) goto done;
    if (job.fault.fault != FAULT_NONE) {
        reason = fault_text(&job.fault);
        if (reason == NULL) goto done;
    } else {
        Py_INCREF(reason);
    }
    if (job.count) {
        uint64_t last = load_le64(job.entries + INDEX_ENTRY_SIZE * (job.count - 1) + 8);
        result = Py_BuildValue("(KKOKKiO)", (unsigned long long)job.count,
                               (unsigned long long)job.position, entries,
                               (unsigned long long)job.first_timestamp, (unsigned long long)last,
                               FAULT_KINDS[job.fault.fault], reason);
    } else {
        result = Py_BuildValue("(KKOOOiO)", 0ULL, (unsigned long long)job.position, entries,
                               Py_None, Py_None, FAULT_KINDS[job.fault.fault], reason);
    }
    Py_DECREF(reason);
done:
    Py_XDECREF(entries);
    PyMem_RawFree(job.entries);
    PyBuffer_Release(&view);
    return result;
}

typedef struct {
    const uint8_t *data;
    uint64_t length, start, first_offset, last_offset;
    int found;
    uint64_t position, offset;
    int no_memory;
} find_job;

/* The first byte at or after ``start`` where a record of an offset in [first, last] begins
 * and checks (layout, checksum, header map): where records can be found again after bytes
 * that cannot be read as records. */
static void find_record_in(find_job *job)
{
    key_list keys = {NULL, 0, 0};
    record_fault f;
    const uint8_t *data = job->data;
    for (uint64_t p = job->start; p + RECORD_OVERHEAD <= job->length; p++) {
        uint64_t value = load_le64(data + p);
        if (value < job->first_offset || value > job->last_offset) continue;
        uint64_t stop = 0;
        int fault = check_record(data, job->length, p, value, 0, NULL, 1, &keys, &f, &stop);
        if (fault == FAULT_NO_MEMORY) {
            job->no_memory = 1;
            break;
        }
        if (fault == FAULT_NONE) {
            job->found = 1;
            job->position = p;
            job->offset = value;
            break;
        }
    }
    PyMem_RawFree(keys.keys);
}

/* find_record(view, start, first_offset, last_offset) -> (position, offset) or None */
PyObject *checks_find_record(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError,
                        "find_record(view, start, first_offset, last_offset) takes 4 arguments");
        return NULL;
    }
    find_job job;
    memset(&job, 0, sizeof job);
    unsigned long long values[3];
    if (uint64_arguments(args + 1, 3, values) < 0) return NULL;
    job.start = values[0];
    job.first_offset = values[1];
    job.last_offset = values[2];
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) return NULL;
    job.data = view.buf;
    job.length = (uint64_t)view.len;
    if (job.length > job.start && job.length - job.start >= GIL_RELEASE_MIN_BYTES) {
        Py_BEGIN_ALLOW_THREADS
        find_record_in(&job);
        Py_END_ALLOW_THREADS
    } else {
        find_record_in(&job);
    }
    PyBuffer_Release(&view);
    if (job.no_memory) return PyErr_NoMemory();
    if (!job.found) Py_RETURN_NONE;
    return Py_BuildValue("(KK)", (unsigned long long)job.position,
                         (unsigned long long)job.offset);
}
