/*
 * _varint.h: TANK's 32-bit varint (tank-wire-reference §1: LEB128, at most 5 bytes, a 5th byte
 * of at most 0x0f), read the way rill.protocol.tank.primitives.decode_varint reads it. Shared by
 * the TANK C units (_bundles.c, _requests.c), which word its faults each their own way.
 */

#ifndef RILL_TANK_VARINT_H
#define RILL_TANK_VARINT_H

#include <Python.h>
#include <stdint.h>

#define VARINT_OK 0
#define VARINT_TRUNCATED 1
#define VARINT_TOO_LONG 2 /* longer than 32 bits */

/* the varint at data[*offset] (bytes before ``end``): VARINT_OK and *offset past it, or why not */
static inline int read_varint(const uint8_t *data, Py_ssize_t end, Py_ssize_t *offset,
                              uint64_t *value) {
    uint64_t result = 0;
    Py_ssize_t at = *offset;
    for (int index = 0; index < 5; index++) {
        if (at + index >= end) return VARINT_TRUNCATED;
        uint8_t byte = data[at + index];
        if (index == 4) {
            if (byte > 0x0f) return VARINT_TOO_LONG;
            *value = result | ((uint64_t)byte << 28);
            *offset = at + 5;
            return VARINT_OK;
        }
        result |= (uint64_t)(byte & 0x7f) << (7 * index);
        if (byte < 0x80) {
            *value = result;
            *offset = at + index + 1;
            return VARINT_OK;
        }
    }
    return VARINT_TRUNCATED; /* unreachable */
}

#endif
