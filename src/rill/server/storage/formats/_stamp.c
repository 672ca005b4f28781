/*
 * _stamp: the C twins of the per-record loops of rill's storage: the write hot loop
 * (rill.server.storage.formats.iggy_v1.stamp_batch_python), the record checks of every read and
 * recovery (rill.server.storage.formats.iggy_v1_checks) and the record conversion between formats
 * (rill.server.storage.formats.conversion). Nine units make the module; _stamp.h is what they
 * share:
 *   _stamp.c          this one: ``stamp`` (validate a SEND message region and build its stored
 *                     records and index entries), the module's table and init;
 *   _record_checks.c  ``verify`` / ``scan`` / ``find_record`` (check stored records: layout,
 *                     checksum, header map, against their index entries or walking them);
 *   _header_map.c     the header-map check and strict UTF-8 the others share;
 *   _crc32.c          ``crc32`` (zlib's CRC-32, carry-less multiply folding where the CPU has
 *                     it) and ``set_pclmul``;
 *   _convert.c        ``kafka_to_iggy`` and ``iggy_to_kafka`` (only where the compiler has
 *                     128-bit integers);
 *   _kafka_batches.c  ``walk_kafka_records`` (the records of a produced Kafka batch, as
 *                     kafka_v2.walk_records_python reads them);
 *   _staged.c         ``restamp``, ``uniform_size``, ``index_entries`` and
 *                     ``check_staged_layout`` (the per-record loops of staged appends);
 *   _index.c          ``search_entries`` (the binary search over a segment index's entries)
 *                     and ``batch_span`` (the batches one read takes within a byte budget).
 * Layouts and rules are the ones of ``iggy_v1.py``, ``iggy_v1_checks.py`` and
 * ``conversion.py``; those modules are the reference, this one must give the same
 * bytes, accept exactly the same regions and records, and word every rejection with the same
 * text.
 *
 * stamp(region, base_offset, timestamp_us, base_position, segment_start, uuid7_block)
 *     -> (records: bytes, index_entries: bytearray, count: int)   the batch is valid
 *     -> str                                   it is malformed: the reference's DecodeError text
 *     -> int status                            a batch limit, or arguments it does not handle
 *
 * A rejection costs no more than an acceptance: the first pass stops at the first fault, the
 * batch limits are checked as soon as a running total passes them, and the message is worded
 * here (only arguments no client can send, STATUS_UNSUPPORTED, send the caller to the
 * reference).
 *
 * Invariants:
 *   * The GIL is released while the loops run (for data of GIL_RELEASE_MIN_BYTES or more):
 *     the input buffer is pinned (a buffer export: a bytearray cannot be resized under it) and
 *     every length is read once, in the first pass, and bounds-checked there; the second pass
 *     copies with those lengths only, so even a buffer mutated concurrently (a caller bug) can
 *     give garbage but never an out-of-bounds access. Checksums are computed over the copied
 *     bytes, so a record's checksum always matches the record. Texts and Python objects are
 *     made after the GIL is taken back.
 *   * Nothing is allocated for the output before the whole region is validated.
 *   * Ids of all-zero are replaced by UUIDv7s from the ``uuid7_block(count, unix_ms)`` callable
 *     (the reference's generator, or this module's twin of it), called once per batch with the
 *     exact count, GIL held.
 *
 * uuid7_block(count, unix_ms) -> bytes
 *     the twin of rill.protocol.iggy.stored.uuid7_block: ``count`` UUIDv7s back to back, the
 *     low 48 bits of ``unix_ms`` big-endian, version 7 and the RFC variant set, and 74 random
 *     bits from the kernel's CSPRNG (getrandom, what os.urandom reads) -- drawn once per block
 *     and counted up by one per id (RFC 9562 section 6.2's monotonic random: the ids of one
 *     batch are distinct and sort in its order), where the reference draws them for every id.
 *     The random bytes come from a pool refilled 4 KiB at a time: on this project's machines a
 *     getrandom call costs microseconds and 18 us per KiB, more than the ids of a small batch
 *     should (the reference: 10 us for 10 ids, 130-170 us for 1,000).
 */

#include "_stamp.h"

#include <errno.h>
#include <pthread.h>
#include <sys/random.h>

/* ------------------------------------------------------------------ stamping: two passes */

typedef struct {
    uint64_t start;          /* first byte of the SEND message in the region */
    uint64_t stop;           /* one past its last byte */
    uint32_t payload_length; /* the payload is the last payload_length bytes */
    uint32_t zero_id;        /* 1 when the id is all zero bytes */
} message_t;

/* Why a region is malformed, to word it as the reference does (``malformed_text``). */
enum {
    MALFORMED_TRUNCATED = 1, /* "message {n}: truncated at byte {position} of {end}" */
    MALFORMED_HEADERS_OVERRUN,  /* "message {n}: headers overrun the region" */
    MALFORMED_PAYLOAD_LENGTH,   /* "message {n}: invalid payload_length {payload_length}" */
    MALFORMED_HEADER_MAP,       /* "message {n}: {header problem}" */
};

typedef struct {
    int kind;
    uint64_t message;  /* its number in the batch */
    uint64_t position; /* MALFORMED_TRUNCATED: where it starts */
    uint32_t payload_length;
    header_problem header;
} malformed_t;

typedef struct {
    /* inputs */
    const uint8_t *data;
    uint64_t end;
    uint64_t base_offset;
    uint64_t timestamp_us;
    uint64_t base_position;
    uint64_t segment_start;
    /* found by the first pass */
    message_t *messages;
    size_t count;
    size_t capacity;
    size_t zero_ids;
    uint64_t records_size;
    malformed_t malformed;
    /* filled by the second pass */
    uint8_t *records;
    uint8_t *index_entries;
    const uint8_t *uuids;
} batch_t;

static const uint8_t ZERO_ID[16] = {0};

/* Pass one: walk and validate the region, exactly as the reference loop does (same checks in
 * the same order, the batch limits as soon as a running total passes them), and note where
 * each message is. Returns 0 or a STATUS_* (``b->malformed`` says why for STATUS_MALFORMED),
 * or -1 when out of memory. */
static int scan_region(batch_t *b)
{
    const uint8_t *data = b->data;
    const uint64_t end = b->end;
    uint64_t position = 0, payload_total = 0, headers_total = 0;
    key_list keys = {NULL, 0, 0};
    malformed_t *why = &b->malformed;
    int status = 0;
    while (position < end) {
        why->message = b->count;
        if (end - position < SEND_PREFIX_SIZE) {
            why->kind = MALFORMED_TRUNCATED;
            why->position = position;
            status = STATUS_MALFORMED;
            break;
        }
        uint32_t headers_length = load_le32(data + position + 16);
        uint64_t payload_position = position + 24 + headers_length;
        if (headers_length) {
            if (payload_position - 4 > end) {
                why->kind = MALFORMED_HEADERS_OVERRUN;
                status = STATUS_MALFORMED;
                break;
            }
            int found = check_header_map(data + position + SEND_PREFIX_SIZE, headers_length,
                                         &keys, &headers_total, MAX_HEADERS_BYTES, &why->header);
            if (found == HEADER_NO_MEMORY) { status = -1; break; }
            if (found == HEADER_LIMIT) { status = STATUS_HEADERS_TOO_BIG; break; }
            if (found != HEADER_OK) {
                why->kind = MALFORMED_HEADER_MAP;
                status = STATUS_MALFORMED;
                break;
            }
        }
        if (payload_position > end) {
            why->kind = MALFORMED_TRUNCATED;
            why->position = position;
            status = STATUS_MALFORMED;
            break;
        }
        uint32_t payload_length = load_le32(data + payload_position - 4);
        uint64_t stop = payload_position + payload_length;
        if (payload_length == 0 || stop > end) {
            why->kind = MALFORMED_PAYLOAD_LENGTH;
            why->payload_length = payload_length;
            status = STATUS_MALFORMED;
            break;
        }
        payload_total += payload_length;
        if (payload_total > MAX_PAYLOAD_BYTES) { status = STATUS_PAYLOAD_TOO_BIG; break; }
        /* this message's offset past u64: the reference fails here (struct.error) */
        if (b->count && b->base_offset > UINT64_MAX - b->count) {
            status = STATUS_UNSUPPORTED;
            break;
        }
        if (b->count == b->capacity) {
            size_t capacity = b->capacity ? 2 * b->capacity : 256;
            message_t *grown = PyMem_RawRealloc(b->messages, capacity * sizeof *grown);
            if (grown == NULL) { status = -1; break; }
            b->messages = grown;
            b->capacity = capacity;
        }
        message_t *m = &b->messages[b->count++];
        m->start = position;
        m->stop = stop;
        m->payload_length = payload_length;
        m->zero_id = memcmp(data + position, ZERO_ID, 16) == 0;
        b->zero_ids += m->zero_id;
        position = stop;
    }
    PyMem_RawFree(keys.keys);
    if (status) return status;
    if (b->count == 0) return STATUS_NO_MESSAGES;
    b->records_size = end + (uint64_t)RECORD_GROWTH * b->count;
    if (b->base_position > MAX_POSITION + 1 ||
        b->records_size > MAX_POSITION + 1 - b->base_position)
        return STATUS_POSITION_OVERFLOW;
    /* relative offsets past u32: the reference's index columns raise OverflowError */
    if (b->base_offset < b->segment_start ||
        b->base_offset - b->segment_start + (b->count - 1) > 0xFFFFFFFFULL)
        return STATUS_UNSUPPORTED;
    return 0;
}

/* The reference's DecodeError detail for a malformed region (GIL held), or NULL with an error. */
static PyObject *malformed_text(const batch_t *b)
{
    const malformed_t *why = &b->malformed;
    unsigned long long message = why->message;
    switch (why->kind) {
    case MALFORMED_TRUNCATED:
        return PyUnicode_FromFormat("message %llu: truncated at byte %llu of %llu", message,
                                    (unsigned long long)why->position,
                                    (unsigned long long)b->end);
    case MALFORMED_HEADERS_OVERRUN:
        return PyUnicode_FromFormat("message %llu: headers overrun the region", message);
    case MALFORMED_PAYLOAD_LENGTH:
        return PyUnicode_FromFormat("message %llu: invalid payload_length %lu", message,
                                    (unsigned long)why->payload_length);
    default: {
        PyObject *detail = header_problem_text(&why->header);
        if (detail == NULL) return NULL;
        PyObject *text = PyUnicode_FromFormat("message %llu: %U", message, detail);
        Py_DECREF(detail);
        return text;
    }
    }
}

/* Pass two: stored records and index entries, from the lengths pass one checked. */
static void build_records(batch_t *b)
{
    const uint8_t *data = b->data;
    const uint8_t *uuid = b->uuids;
    uint8_t *out = b->records;
    uint8_t *entry = b->index_entries;
    uint32_t relative = (uint32_t)(b->base_offset - b->segment_start);
    uint64_t offset = b->base_offset;
    for (size_t i = 0; i < b->count; i++) {
        const message_t *m = &b->messages[i];
        size_t rest = (size_t)(m->stop - m->start) - 16;
        store_le64(out, offset);
        out[8] = STATE_AVAILABLE;
        store_le64(out + 9, b->timestamp_us);
        if (m->zero_id) {
            memcpy(out + RECORD_ID_AT, uuid, 16);
            uuid += 16;
        } else {
            memcpy(out + RECORD_ID_AT, data + m->start, 16);
        }
        memcpy(out + RECORD_REST_AT, data + m->start + 16, rest);
        uint8_t *payload = out + RECORD_REST_AT + rest - m->payload_length;
        store_le32(out + RECORD_CHECKSUM_AT, stamp_crc32(0, payload, m->payload_length));
        store_le32(entry, relative);
        store_le32(entry + 4, (uint32_t)(b->base_position + (uint64_t)(out - b->records)));
        store_le64(entry + 8, b->timestamp_us);
        out += RECORD_REST_AT + rest;
        entry += INDEX_ENTRY_SIZE;
        relative++;
        offset++;
    }
}

/* An argument as u64; on failure (negative, too big, not an int) clears the error and
 * returns -1, so that the reference runs and fails as it does. */
static int as_u64(PyObject *value, uint64_t *out)
{
    if (!PyLong_Check(value)) return -1;
    unsigned long long v = PyLong_AsUnsignedLongLong(value);
    if (v == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        return -1;
    }
    *out = (uint64_t)v;
    return 0;
}

static PyObject *stamp(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError,
                        "stamp(region, base_offset, timestamp_us, base_position, "
                        "segment_start, uuid7_block) takes 6 arguments");
        return NULL;
    }
    batch_t b;
    memset(&b, 0, sizeof b);
    if (as_u64(args[1], &b.base_offset) || as_u64(args[2], &b.timestamp_us) ||
        as_u64(args[3], &b.base_position) || as_u64(args[4], &b.segment_start))
        return PyLong_FromLong(STATUS_UNSUPPORTED);
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) { /* pins the buffer */
        PyErr_Clear();
        return PyLong_FromLong(STATUS_UNSUPPORTED);
    }
    b.data = view.buf;
    b.end = (uint64_t)view.len;
    int release = view.len >= GIL_RELEASE_MIN_BYTES;
    PyObject *records = NULL, *index_entries = NULL, *uuids = NULL, *result = NULL;
    int status;

    if (release) {
        Py_BEGIN_ALLOW_THREADS
        status = scan_region(&b);
        Py_END_ALLOW_THREADS
    } else {
        status = scan_region(&b);
    }
    if (status == -1) {
        PyErr_NoMemory();
        goto done;
    }
    if (status == STATUS_MALFORMED) { /* the reference's message, worded here */
        result = malformed_text(&b);
        goto done;
    }
    if (status) {
        result = PyLong_FromLong(status);
        goto done;
    }
    if (b.zero_ids) {
        uuids = PyObject_CallFunction(args[5], "nK", (Py_ssize_t)b.zero_ids,
                                      (unsigned long long)(b.timestamp_us / 1000));
        if (uuids == NULL) goto done;
        if (!PyBytes_Check(uuids) || PyBytes_GET_SIZE(uuids) != (Py_ssize_t)(16 * b.zero_ids)) {
            PyErr_SetString(PyExc_ValueError, "uuid7_block returned the wrong number of bytes");
            goto done;
        }
        b.uuids = (const uint8_t *)PyBytes_AS_STRING(uuids);
    }
    records = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)b.records_size);
    index_entries = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)(INDEX_ENTRY_SIZE * b.count));
    if (records == NULL || index_entries == NULL) goto done;
    b.records = (uint8_t *)PyBytes_AS_STRING(records);
    b.index_entries = (uint8_t *)PyByteArray_AS_STRING(index_entries);
    if (release) {
        Py_BEGIN_ALLOW_THREADS
        build_records(&b);
        Py_END_ALLOW_THREADS
    } else {
        build_records(&b);
    }
    result = Py_BuildValue("(OOn)", records, index_entries, (Py_ssize_t)b.count);

done:
    Py_XDECREF(records);
    Py_XDECREF(index_entries);
    Py_XDECREF(uuids);
    PyMem_RawFree(b.messages);
    PyBuffer_Release(&view);
    return result;
}

/* ------------------------------------------------------------------ UUIDv7 ids */

/* Random bytes for the ids, drawn from the kernel's CSPRNG (getrandom, what os.urandom reads)
 * POOL_SIZE at a time: a getrandom call costs a system call and, on some machines, tens of
 * microseconds per KiB, which an id per message must not pay. A child process after fork
 * starts with an empty pool (pthread_atfork), so parent and child never share ids. The GIL
 * is held while the pool is used. */
#define POOL_SIZE 4096
static uint8_t random_pool[POOL_SIZE];
static size_t pool_used = POOL_SIZE;

static void forget_pool(void)
{
    pool_used = POOL_SIZE;
}

static int random_bytes(uint8_t *out, size_t count)
{
    if (pool_used + count > POOL_SIZE) {
        size_t filled = 0;
        while (filled < POOL_SIZE) {
            ssize_t got = getrandom(random_pool + filled, POOL_SIZE - filled, 0);
            if (got < 0) {
                if (errno == EINTR) {
                    if (PyErr_CheckSignals() < 0) return -1;
                    continue;
                }
                PyErr_SetFromErrno(PyExc_OSError);
                return -1;
            }
            filled += (size_t)got;
        }
        pool_used = 0;
    }
    memcpy(out, random_pool + pool_used, count);
    memset(random_pool + pool_used, 0, count); /* a byte handed out is not kept */
    pool_used += count;
    return 0;
}

static PyObject *uuid7_block(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "uuid7_block(count, unix_ms) takes 2 arguments");
        return NULL;
    }
    Py_ssize_t count = PyLong_AsSsize_t(args[0]);
    if (count == -1 && PyErr_Occurred()) return NULL;
    if (count < 0) {
        PyErr_SetString(PyExc_ValueError, "negative count");
        return NULL;
    }
    /* the low 48 bits, as the reference's ``unix_ms & 0xFFFF_FFFF_FFFF`` (of a negative too) */
    unsigned long long unix_ms = PyLong_AsUnsignedLongLongMask(args[1]);
    if (unix_ms == (unsigned long long)-1 && PyErr_Occurred()) return NULL;
    if (count > PY_SSIZE_T_MAX / 16) return PyErr_NoMemory();
    PyObject *block = PyBytes_FromStringAndSize(NULL, 16 * count);
    if (block == NULL) return NULL;
    if (count == 0) return block;
    /* 74 random bits for the block: rand_a (12 bits) as drawn, rand_b (62 bits) drawn below
     * 2^61 and counted up by one per id (RFC 9562 6.2, "monotonic random"): the ids of one
     * batch are distinct and sort in the batch's order, and a batch of fewer than 2^61 ids
     * never carries into the variant bits */
    uint8_t drawn[10];
    if (random_bytes(drawn, sizeof drawn) < 0) {
        Py_DECREF(block);
        return NULL;
    }
    uint16_t rand_a = (uint16_t)(((drawn[0] & 0x0F) << 8) | drawn[1]);
    uint64_t rand_b = 0;
    for (int b = 2; b < 10; b++)
        rand_b = (rand_b << 8) | drawn[b];
    rand_b &= (UINT64_C(1) << 61) - 1;
    uint8_t *out = (uint8_t *)PyBytes_AS_STRING(block);
    for (Py_ssize_t i = 0; i < count; i++, rand_b++) {
        uint8_t *id = out + 16 * i;
        for (int b = 0; b < 6; b++)
            id[b] = (uint8_t)(unix_ms >> (8 * (5 - b)));
        id[6] = (uint8_t)(0x70 | (rand_a >> 8));
        id[7] = (uint8_t)rand_a;
        uint64_t low = rand_b | (UINT64_C(1) << 63); /* the RFC variant: bits 10 */
        for (int b = 0; b < 8; b++)
            id[8 + b] = (uint8_t)(low >> (8 * (7 - b)));
    }
    return block;
}

static PyMethodDef stamp_methods[] = {
    {"uuid7_block", (PyCFunction)(void (*)(void))uuid7_block, METH_FASTCALL,
     "uuid7_block(count, unix_ms) -> bytes: ``count`` UUIDv7s back to back (the twin of\n"
     "rill.protocol.iggy.stored.uuid7_block)."},
    {"stamp", (PyCFunction)(void (*)(void))stamp, METH_FASTCALL,
     "stamp(region, base_offset, timestamp_us, base_position, segment_start, uuid7_block)\n"
     "-> (records, index_entries, count) or an int status (see the module source)."},
    {"verify", (PyCFunction)(void (*)(void))checks_verify, METH_FASTCALL,
     "verify(records, entries, first_offset, relative_first, base_position)\n"
     "-> (count, kind, reason): records checked against their index entries."},
    {"scan", (PyCFunction)(void (*)(void))checks_scan, METH_FASTCALL,
     "scan(view, start_position, expected_offset, segment_start, previous_timestamp,\n"
     "max_count, verify_checksums, position_base) -> (count, end_position, index_entries,\n"
     "first_timestamp, last_timestamp, kind, reason): records walked from a position."},
    {"find_record", (PyCFunction)(void (*)(void))checks_find_record, METH_FASTCALL,
     "find_record(view, start, first_offset, last_offset) -> (position, offset) or None."},
#if RILL_HAVE_CONVERSION
    {"kafka_to_iggy", (PyCFunction)(void (*)(void))convert_kafka_to_iggy, METH_FASTCALL,
     "kafka_to_iggy(block, base_offset, count, base_timestamp, max_timestamp,\n"
     "log_append_time, first_offset, end_offset, base_position) -> (records, positions,\n"
     "timestamps, first_offset), a str (malformed) or an int status: one records block's\n"
     "Kafka records as stored Iggy records."},
    {"iggy_to_kafka", (PyCFunction)(void (*)(void))convert_iggy_to_kafka, METH_FASTCALL,
     "iggy_to_kafka(records, first_offset, end_offset) -> (records_block, count,\n"
     "base_offset, last_offset, base_timestamp_ms, max_timestamp_ms), None (no record) or a\n"
     "str (malformed): stored Iggy records as a RecordBatch v2 records block."},
    {"stamp_converted", (PyCFunction)(void (*)(void))convert_stamp_converted, METH_FASTCALL,
     "stamp_converted(records, starts, times, first_offset, now_us, last_us, relative, base)\n"
     "-> (index_entries, first_timestamp, last_timestamp), an int (the record with an empty\n"
     "payload) or a str (malformed): converted records given their offsets and timestamps."},
#endif
    {"restamp", (PyCFunction)(void (*)(void))staged_restamp, METH_FASTCALL,
     "restamp(records, positions, first_offset, timestamp) -> None: offsets, state and\n"
     "timestamp written into staged records at commit (see _staged.c)."},
    {"uniform_size", (PyCFunction)(void (*)(void))staged_uniform_size, METH_FASTCALL,
     "uniform_size(positions, total) -> int: the records' one size, or 0 (see _staged.c)."},
    {"index_entries", (PyCFunction)(void (*)(void))staged_index_entries, METH_FASTCALL,
     "index_entries(relative_start, position_start, position_step, count, timestamp)\n"
     "-> bytearray: the index entries of evenly spaced records (see _staged.c)."},
    {"check_staged_layout", (PyCFunction)(void (*)(void))staged_check_layout, METH_FASTCALL,
     "check_staged_layout(records, positions) -> int: the size of staged records of one\n"
     "size without headers (their offsets set to 0, 1, ...), or 0 (see _staged.c)."},
    {"search_entries", (PyCFunction)(void (*)(void))index_search_entries, METH_FASTCALL,
     "search_entries(index, lo, hi, entry_size, field, value, right) -> int: bisect_right\n"
     "(or bisect_left) over index entries by their field at byte 0, 4 or 8 (see _index.c)."},
    {"batch_span", (PyCFunction)(void (*)(void))index_batch_span, METH_FASTCALL,
     "batch_span(index, count, entry_size, first, end, max_bytes, size_bytes, next_relative)\n"
     "-> (batch_first, batch_end, first_position, end_position) or None: the whole batches\n"
     "one read takes within a byte budget (see _index.c)."},
    {"walk_kafka_records", (PyCFunction)(void (*)(void))walk_kafka_records, METH_FASTCALL,
     "walk_kafka_records(block, count) -> int (the largest timestampDelta) or a str (why the\n"
     "block is not ``count`` well-formed records): a produced Kafka records block."},
    {"crc32", crc32_function, METH_VARARGS, "crc32(data, value=0): zlib's CRC-32."},
    {"set_pclmul", crc32_set_pclmul, METH_VARARGS,
     "set_pclmul(fold=True, wide=True) -> str: use carry-less multiply folding (512-bit lanes\n"
     "if ``wide``) where the CPU has it; returns the CRC-32 method now in use."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef stamp_module = {
    PyModuleDef_HEAD_INIT, "_stamp",
    "C twins of rill.server.storage.formats.iggy_v1.stamp_batch_python, of the record checks of\n"
    "rill.server.storage.formats.iggy_v1_checks and of the record conversion loops of\n"
    "rill.server.storage.formats.conversion (see the module source).", -1,
    stamp_methods,
};

PyMODINIT_FUNC PyInit__stamp(void)
{
    crc32_setup();
    pthread_atfork(NULL, NULL, forget_pool);
    PyObject *module = PyModule_Create(&stamp_module);
    if (module == NULL) return NULL;
    if (PyModule_AddIntConstant(module, "STATUS_MALFORMED", STATUS_MALFORMED) ||
        PyModule_AddIntConstant(module, "STATUS_NO_MESSAGES", STATUS_NO_MESSAGES) ||
        PyModule_AddIntConstant(module, "STATUS_HEADERS_TOO_BIG", STATUS_HEADERS_TOO_BIG) ||
        PyModule_AddIntConstant(module, "STATUS_PAYLOAD_TOO_BIG", STATUS_PAYLOAD_TOO_BIG) ||
        PyModule_AddIntConstant(module, "STATUS_POSITION_OVERFLOW", STATUS_POSITION_OVERFLOW) ||
        PyModule_AddIntConstant(module, "STATUS_UNSUPPORTED", STATUS_UNSUPPORTED) ||
        PyModule_AddIntConstant(module, "MAX_PAYLOAD_BYTES", (long)MAX_PAYLOAD_BYTES) ||
        PyModule_AddIntConstant(module, "MAX_HEADERS_BYTES", (long)MAX_HEADERS_BYTES) ||
        PyModule_AddIntConstant(module, "RECORD_GROWTH", RECORD_GROWTH) ||
        PyModule_AddIntConstant(module, "SEND_PREFIX_SIZE", SEND_PREFIX_SIZE) ||
        PyModule_AddIntConstant(module, "RECORD_OVERHEAD", RECORD_OVERHEAD) ||
        PyModule_AddIntConstant(module, "RECORD_HEADERS_AT", RECORD_HEADERS_AT) ||
        PyModule_AddIntConstant(module, "KIND_CONTENT", KIND_CONTENT) ||
        PyModule_AddIntConstant(module, "KIND_STRUCTURE", KIND_STRUCTURE) ||
        PyModule_AddIntConstant(module, "KIND_TIMESTAMP", KIND_TIMESTAMP) ||
        PyModule_AddIntConstant(module, "GIL_RELEASE_MIN_BYTES", GIL_RELEASE_MIN_BYTES) ||
        PyModule_AddObject(module, "MAX_POSITION",
                           PyLong_FromUnsignedLongLong(MAX_POSITION)) ||
        PyModule_AddStringConstant(module, "CRC32_METHOD", crc32_method())) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
