/*
 * _convert.h: what the two record conversion units of the ``_stamp`` module share --
 * _convert.c (Kafka records -> stored Iggy records, and the helpers below) and
 * _iggy_to_kafka.c (stored Iggy records -> a Kafka records block).
 *
 * The per-record loops of rill.server.storage.formats.conversion (``_kafka_records_python`` and
 * the record walk of ``iggy_to_kafka_python`` are the reference): Kafka RecordBatch v2 records
 * -> stored Iggy records, and stored Iggy records -> a RecordBatch v2 records block. Python's
 * integers are unbounded and a Kafka varint the reference reads may carry 70 bits, so every
 * value read from a records block is held in a 128-bit integer: each sum and comparison comes
 * out as the reference's. Built only where the compiler has 128-bit integers (GCC and Clang on
 * 64-bit targets); elsewhere the module lacks the two functions and the reference runs.
 * Lengths are read once and kept; the output is copied with those kept lengths only, so a
 * buffer mutated while the GIL is released can give garbage, never an out-of-bounds access.
 */

#ifndef RILL_CONVERT_H
#define RILL_CONVERT_H

#include "_stamp.h"

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

/* Room for ``more`` bytes past the end; -1 when memory runs out (_convert.c). */
int buffer_reserve(byte_buffer *buffer, size_t more);

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

/* The reference's text for ``fault`` at ``offset`` (GIL held; _convert.c). */
PyObject *conversion_fault_text(int fault, uint64_t offset);

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
#endif /* RILL_HAVE_CONVERSION */
#endif /* RILL_CONVERT_H */
