/*
 * _stamp.h: what the units of the ``_stamp`` module share (_stamp.c defines the module and
 * lists them): the stored layout and limits mirrored from iggy_v1.py, little-endian access,
 * the header-map types, and each unit's entry points for the others.
 */

#ifndef RILL_STAMP_H
#define RILL_STAMP_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Limits, mirrored from iggy_v1.py (which checks at import that they agree). */
#define MAX_PAYLOAD_BYTES 10000000ULL
#define MAX_HEADERS_BYTES 100000ULL
#define MAX_POSITION 0xFFFFFFFFULL
#define SEND_PREFIX_SIZE 20    /* id + headers_length */
#define RECORD_GROWTH 21       /* stored record size minus SEND message size */
#define RECORD_ID_AT 17        /* offset u64, state u8, timestamp u64, then the id */
#define RECORD_CHECKSUM_AT 33
#define RECORD_REST_AT 37      /* headers_length, headers, payload_length, payload: as sent */
#define INDEX_ENTRY_SIZE 16
#define STATE_AVAILABLE 1
#define GIL_RELEASE_MIN_BYTES 16384 /* below this, releasing costs more than it frees */

enum {
    STATUS_MALFORMED = 1,        /* DecodeError: ``stamp`` returns its message (a str) */
    STATUS_NO_MESSAGES = 2,      /* InvalidMessagesCount */
    STATUS_HEADERS_TOO_BIG = 3,  /* TooBigHeadersPayload */
    STATUS_PAYLOAD_TOO_BIG = 4,  /* TooBigMessagePayload */
    STATUS_POSITION_OVERFLOW = 5,/* ValueError: the batch does not fit u32 positions */
    STATUS_UNSUPPORTED = 6,      /* arguments outside what this twin handles: use the reference */
};

/* ------------------------------------------------------------------ little-endian access */

static inline uint32_t load_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
           ((uint32_t)p[3] << 24);
}

static inline void store_le32(uint8_t *p, uint32_t v)
{
#if PY_LITTLE_ENDIAN
    memcpy(p, &v, 4);
#else
    p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
#endif
}

static inline void store_le64(uint8_t *p, uint64_t v)
{
#if PY_LITTLE_ENDIAN
    memcpy(p, &v, 8);
#else
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
#endif
}

static inline uint64_t load_le64(const uint8_t *p)
{
    return (uint64_t)load_le32(p) | ((uint64_t)load_le32(p + 4) << 32);
}

/* ``count`` Python ints from ``args`` as u64 (-1 with the exception set when one is not). */
static inline int uint64_arguments(PyObject *const *args, int count, unsigned long long *values)
{
    for (int i = 0; i < count; i++) {
        values[i] = PyLong_AsUnsignedLongLong(args[i]);
        if (values[i] == (unsigned long long)-1 && PyErr_Occurred()) return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------ stored records */

#define RECORD_OVERHEAD 45  /* fixed part (41) plus payload_length */
#define RECORD_STATE_AT 8
#define RECORD_TIMESTAMP_AT 9
#define RECORD_HEADERS_AT 41

/* ------------------------------------------------------------------ header maps (_header_map.c) */

/* One key of a header map: where it is, and its place in the map (for the first repeat). */
typedef struct {
    const uint8_t *data;
    uint32_t length;
    size_t index;
} header_key;

typedef struct {
    header_key *keys;
    size_t count;
    size_t capacity;
} key_list;

/* What ``check_header_map`` found wrong: enough to word it as the reference does. */
enum {
    HEADER_OK = 0,
    HEADER_NEEDED,       /* "needed {needed} bytes at {at}, have {have}" */
    HEADER_KEY_LENGTH,   /* "header key length {value}" */
    HEADER_UTF8,         /* "invalid UTF-8: {reason}" (the key is at ``key``) */
    HEADER_KIND,         /* "header kind {value}" */
    HEADER_VALUE_LENGTH, /* "header value length {value}" */
    HEADER_DUPLICATE,    /* "duplicate header key {key!r}" */
    HEADER_LIMIT,        /* the running total of value bytes passed the limit */
    HEADER_NO_MEMORY,
};

typedef struct {
    int status;
    uint64_t needed, at, have; /* HEADER_NEEDED */
    uint64_t value;            /* the length or kind at fault */
    const uint8_t *key;        /* HEADER_UTF8, HEADER_DUPLICATE */
    uint32_t key_length;
} header_problem;

int check_header_map(const uint8_t *p, size_t n, key_list *list, uint64_t *total,
                     uint64_t limit, header_problem *problem);
PyObject *header_problem_text(const header_problem *problem);

/* ------------------------------------------------------------------ record checks (_record_checks.c) */

/* How bad a record check found a record (``kind``, the reference's FAULT_KINDS). */
enum {
    KIND_GOOD = 0,
    KIND_CONTENT = 1,   /* sound structure, where it should be; checksum or header map wrong */
    KIND_STRUCTURE = 2, /* the record is not where, or not what, the index or layout says */
    KIND_TIMESTAMP = 3, /* a valid record whose timestamp is out of order (scans only) */
};

PyObject *checks_verify(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *checks_scan(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *checks_find_record(PyObject *module, PyObject *const *args, Py_ssize_t nargs);

/* ------------------------------------------------------------------ CRC-32 (_crc32.c) */

/* zlib's crc32 (``crc`` a previous result, 0 to start); the module's ``crc32`` and
 * ``set_pclmul``; the CPU check of module init, and the method it chose. */
uint32_t stamp_crc32(uint32_t crc, const uint8_t *buf, size_t len);
PyObject *crc32_function(PyObject *module, PyObject *args);
PyObject *crc32_set_pclmul(PyObject *module, PyObject *args);
void crc32_setup(void);
const char *crc32_method(void);

/* The per-record loops of staged appends and a batch's index entries (_staged.c). */
PyObject *staged_restamp(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *staged_uniform_size(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *staged_index_entries(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *staged_check_layout(PyObject *module, PyObject *const *args, Py_ssize_t nargs);

/* The binary search over a segment index's entries (_index.c). */
PyObject *index_search_entries(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *index_batch_span(PyObject *module, PyObject *const *args, Py_ssize_t nargs);

/* The per-record walk of a produced Kafka records block (_kafka_batches.c). */
PyObject *walk_kafka_records(PyObject *module, PyObject *const *args, Py_ssize_t nargs);

/* Python's strict UTF-8 (_header_map.c). */
int stamp_valid_utf8(const uint8_t *s, size_t n);

/* _convert.c: built where the compiler has 128-bit integers (see there); elsewhere the module
 * lacks the two functions and conversion runs its Python reference. */
#if defined(__SIZEOF_INT128__)
#define RILL_HAVE_CONVERSION 1
PyObject *convert_kafka_to_iggy(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *convert_iggy_to_kafka(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *convert_stamp_converted(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
#else
#define RILL_HAVE_CONVERSION 0
#endif

#endif /* RILL_STAMP_H */
