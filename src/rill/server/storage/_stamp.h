/*
 * _stamp.h: what the two units of the ``_stamp`` module share -- _stamp.c (the write hot loop,
 * the record checks, CRC-32; it defines the module) and _convert.c (record conversion): the
 * stored layout and limits mirrored from records.py, little-endian access, and each unit's
 * entry points for the other.
 */

#ifndef RILL_STAMP_H
#define RILL_STAMP_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Limits, mirrored from records.py (which checks at import that they agree). */
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

/* _stamp.c: zlib's crc32 (``crc`` a previous result, 0 to start) and Python's strict UTF-8. */
uint32_t stamp_crc32(uint32_t crc, const uint8_t *buf, size_t len);
int stamp_valid_utf8(const uint8_t *s, size_t n);

/* _convert.c: built where the compiler has 128-bit integers (see there); elsewhere the module
 * lacks the two functions and record_conversion runs its Python reference. */
#if defined(__SIZEOF_INT128__)
#define RILL_HAVE_CONVERSION 1
PyObject *convert_kafka_to_iggy(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *convert_iggy_to_kafka(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
#else
#define RILL_HAVE_CONVERSION 0
#endif

#endif /* RILL_STAMP_H */
