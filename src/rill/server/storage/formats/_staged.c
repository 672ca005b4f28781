/*
 * _staged.c, a unit of the ``_stamp`` module (_stamp.c defines the module): the C twins of the
 * per-record loops of staged appends (rill extension 1010-1011) and of the index entries of a
 * batch, whose Python references are in ``iggy_v1.py`` (``restamp_records_python``,
 * ``uniform_record_size_python``, ``check_staged_layout_python``) and ``index_entry.py``
 * (``build_index_entries_python``). Same results, same verdicts; each reference is tested
 * equal to its twin on valid and mutated input.
 *
 * Owns:
 *   restamp(records, positions, first_offset, timestamp) -> None
 *       writes offset ``first_offset + i``, state 1 (available) and ``timestamp`` into the
 *       head of record i (at ``positions[i]``, native-order u32 as ``array("I")`` holds them)
 *       of the writable ``records``; ValueError (nothing written) when a position leaves no
 *       room for the 17-byte head.
 *   uniform_size(positions, total) -> int
 *       the size of every record when ``positions`` are 0, size, 2 size, ... and ``total`` is
 *       count x size (count > 0, size > 0); else 0.
 *   index_entries(relative_start, position_start, position_step, count, timestamp)
 *       -> bytearray of ``count`` 16-byte index entries (relative offsets from
 *       ``relative_start`` by 1, positions from ``position_start`` by ``position_step``, one
 *       timestamp); OverflowError when an offset or a position passes u32.
 *   check_staged_layout(records, positions) -> int
 *       for the records a writer staged: the record size when they are all of one size with no
 *       headers and the payload length that size implies (the layout ``check_staged_records``
 *       checks column-wise), after writing offsets 0, 1, ... into their offset fields (the
 *       placeholders the storage's record scan then checks); else 0, and nothing written.
 *
 * The GIL is released while a loop runs over GIL_RELEASE_MIN_BYTES or more; the buffers are
 * pinned meanwhile (a buffer export: a bytearray cannot be resized under it).
 */

#include "_stamp.h"

#define RECORD_HEAD_SIZE 17 /* offset u64, state u8, timestamp u64 */

static inline uint32_t load_native32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* ------------------------------------------------------------------ restamp */

PyObject *staged_restamp(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "restamp takes 4 arguments");
        return NULL;
    }
    unsigned long long numbers[2];
    if (uint64_arguments(args + 2, 2, numbers) < 0) return NULL;
    Py_buffer records, positions;
    if (PyObject_GetBuffer(args[0], &records, PyBUF_WRITABLE) < 0) return NULL;
    if (PyObject_GetBuffer(args[1], &positions, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&records);
        return NULL;
    }
    PyObject *result = NULL;
    if (positions.len % 4) {
        PyErr_SetString(PyExc_ValueError, "positions are not a whole number of u32");
        goto done;
    }
    uint8_t *data = records.buf;
    const uint8_t *starts = positions.buf;
    const size_t count = (size_t)positions.len / 4;
    const uint64_t length = (uint64_t)records.len;
    for (size_t i = 0; i < count; i++) {  /* first every bound, so that a fault writes nothing */
        if ((uint64_t)load_native32(starts + 4 * i) + RECORD_HEAD_SIZE > length) {
            PyErr_SetString(PyExc_ValueError, "a record position leaves no room for its head");
            goto done;
        }
    }
    const uint64_t first = numbers[0], timestamp = numbers[1];
    Py_BEGIN_ALLOW_THREADS
    for (size_t i = 0; i < count; i++) {
        uint8_t *head = data + load_native32(starts + 4 * i);
        store_le64(head, first + i);
        head[RECORD_STATE_AT] = STATE_AVAILABLE;
        store_le64(head + RECORD_TIMESTAMP_AT, timestamp);
    }
    Py_END_ALLOW_THREADS
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&positions);
    PyBuffer_Release(&records);
    return result;
}

/* ------------------------------------------------------------------ uniform_size */

/* The size of every record when ``starts`` (count native u32) are 0, size, 2 size, ... and
 * ``total`` = count x size, else 0. */
static uint64_t uniform(const uint8_t *starts, size_t count, uint64_t total)
{
    if (!count || total % count || total / count == 0) return 0;
    const uint64_t size = total / count;
    for (size_t i = 0; i < count; i++) {
        if ((uint64_t)load_native32(starts + 4 * i) != i * size) return 0;
    }
    return size;
}

PyObject *staged_uniform_size(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "uniform_size takes 2 arguments");
        return NULL;
    }
    unsigned long long total = PyLong_AsUnsignedLongLong(args[1]);
    if (total == (unsigned long long)-1 && PyErr_Occurred()) return NULL;
    Py_buffer positions;
    if (PyObject_GetBuffer(args[0], &positions, PyBUF_SIMPLE) < 0) return NULL;
    uint64_t size = 0;
    if (positions.len % 4 == 0) {
        size = uniform(positions.buf, (size_t)positions.len / 4, total);
    }
    PyBuffer_Release(&positions);
    return PyLong_FromUnsignedLongLong(size);
}

/* ------------------------------------------------------------------ index_entries */

PyObject *staged_index_entries(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "index_entries takes 5 arguments");
        return NULL;
    }
    unsigned long long numbers[5];
    if (uint64_arguments(args, 5, numbers) < 0) return NULL;
    const uint64_t relative = numbers[0], position = numbers[1], step = numbers[2];
    const uint64_t count = numbers[3], timestamp = numbers[4];
    if (count > (uint64_t)PY_SSIZE_T_MAX / INDEX_ENTRY_SIZE) {
        PyErr_SetString(PyExc_OverflowError, "too many index entries");
        return NULL;
    }
    if (count) {
        const uint64_t last = count - 1;
        if (relative > MAX_POSITION || last > MAX_POSITION - relative ||
            position > MAX_POSITION || (step && last > (MAX_POSITION - position) / step)) {
            PyErr_SetString(PyExc_OverflowError,
                            "an index entry's relative offset or position passes u32");
            return NULL;
        }
    }
    PyObject *entries = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)(count * INDEX_ENTRY_SIZE));
    if (entries == NULL) return NULL;
    uint8_t *out = (uint8_t *)PyByteArray_AS_STRING(entries);
    Py_BEGIN_ALLOW_THREADS
    for (uint64_t i = 0; i < count; i++, out += INDEX_ENTRY_SIZE) {
        store_le32(out, (uint32_t)(relative + i));
        store_le32(out + 4, (uint32_t)(position + i * step));
        store_le64(out + 8, timestamp);
    }
    Py_END_ALLOW_THREADS
    return entries;
}

/* ------------------------------------------------------------------ check_staged_layout */

PyObject *staged_check_layout(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "check_staged_layout takes 2 arguments");
        return NULL;
    }
    Py_buffer records, positions;
    if (PyObject_GetBuffer(args[0], &records, PyBUF_WRITABLE) < 0) return NULL;
    if (PyObject_GetBuffer(args[1], &positions, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&records);
        return NULL;
    }
    uint64_t size = 0;
    const size_t count = (size_t)positions.len / 4;
    const uint64_t total = (uint64_t)records.len;
    if (positions.len % 4 == 0 && count < (1u << 24) && total <= MAX_PAYLOAD_BYTES) {
        uint8_t *data = records.buf;
        const uint8_t *starts = positions.buf;
        Py_BEGIN_ALLOW_THREADS
        size = uniform(starts, count, total);
        if (size <= RECORD_OVERHEAD) size = 0;
        const uint32_t payload = (uint32_t)(size - RECORD_OVERHEAD);
        for (size_t i = 0; size && i < count; i++) {
            const uint8_t *record = data + i * size;
            if (load_le32(record + RECORD_HEADERS_AT - 4) != 0 ||
                load_le32(record + RECORD_HEADERS_AT) != payload) size = 0;
        }
        for (size_t i = 0; size && i < count; i++) {
            store_le64(data + i * size, (uint64_t)i);
        }
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&positions);
    PyBuffer_Release(&records);
    return PyLong_FromUnsignedLongLong(size);
}
