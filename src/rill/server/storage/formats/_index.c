/*
 * _index.c, a unit of the ``_stamp`` module (_stamp.c defines the module): the C twin of
 * ``index_entry.search_entries_python``, the binary search over a segment index's entries that
 * every read of a batch-index segment makes (which batch holds an offset, how many batches fit
 * in a byte budget, the first batch at a timestamp).
 *
 * Owns:
 *   search_entries(index, lo, hi, entry_size, field, value, right) -> int
 *       ``bisect.bisect_right`` (``right`` true) or ``bisect_left`` over entries lo..hi-1 of
 *       ``index`` (any buffer: bytearray, bytes, mmap), keyed by the little-endian field of
 *       each entry at byte ``field``: 0 the relative offset (u32), 4 the position (u32), 8 the
 *       timestamp (u64). The same probes in the same order as ``bisect``'s, so both twins give
 *       the same answer on any bytes, ordered or not. A negative ``value`` is below every field,
 *       one past u64 above every one. ValueError when entry ``hi - 1``'s field lies past the
 *       buffer, or an argument is out of range.
 */

#include "_stamp.h"

PyObject *index_search_entries(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "search_entries takes 7 arguments");
        return NULL;
    }
    Py_ssize_t lo = PyLong_AsSsize_t(args[1]);
    if (lo == -1 && PyErr_Occurred()) return NULL;
    Py_ssize_t hi = PyLong_AsSsize_t(args[2]);
    if (hi == -1 && PyErr_Occurred()) return NULL;
    Py_ssize_t entry_size = PyLong_AsSsize_t(args[3]);
    if (entry_size == -1 && PyErr_Occurred()) return NULL;
    long field = PyLong_AsLong(args[4]);
    if (field == -1 && PyErr_Occurred()) return NULL;
    int right = PyObject_IsTrue(args[6]);
    if (right < 0) return NULL;
    if (lo < 0 || hi < lo || entry_size < 16 || (field != 0 && field != 4 && field != 8)) {
        PyErr_SetString(PyExc_ValueError, "search_entries: an argument is out of range");
        return NULL;
    }
    if (!PyLong_Check(args[5])) {
        PyErr_SetString(PyExc_TypeError, "search_entries: the value must be an int");
        return NULL;
    }
    /* the value against u32/u64 fields: below all (negative), above all (past u64), or one */
    int sign = _PyLong_Sign(args[5]);
    uint64_t value = 0;
    int above_all = 0;
    if (sign > 0) {
        value = PyLong_AsUnsignedLongLong(args[5]);
        if (value == (uint64_t)-1 && PyErr_Occurred()) {
            if (!PyErr_ExceptionMatches(PyExc_OverflowError)) return NULL;
            PyErr_Clear();
            above_all = 1;
        }
    }
    if (lo == hi) return PyLong_FromSsize_t(lo);

    Py_buffer index;
    if (PyObject_GetBuffer(args[0], &index, PyBUF_SIMPLE) < 0) return NULL;
    const Py_ssize_t width = field == 8 ? 8 : 4;
    if (hi > (PY_SSIZE_T_MAX - field - width) / entry_size
            || (hi - 1) * entry_size + field + width > index.len) {
        PyBuffer_Release(&index);
        PyErr_SetString(PyExc_ValueError, "search_entries: the entries pass the index's end");
        return NULL;
    }
    if (sign < 0 || above_all) {  /* every field is >= 0 > value, or each one <= value */
        PyBuffer_Release(&index);
        return PyLong_FromSsize_t(sign < 0 ? lo : hi);
    }
    const uint8_t *base = (const uint8_t *)index.buf + field;
    while (lo < hi) {
        const Py_ssize_t mid = lo + (hi - lo) / 2;
        const uint8_t *at = base + mid * entry_size;
        const uint64_t key = width == 8 ? load_le64(at) : (uint64_t)load_le32(at);
        if (right ? value < key : !(key < value)) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    PyBuffer_Release(&index);
    return PyLong_FromSsize_t(lo);
}

/* bisect_right of ``value`` over the u32 field at byte ``field`` of entries lo..hi-1 */
static Py_ssize_t bisect_u32(const uint8_t *index, Py_ssize_t lo, Py_ssize_t hi,
                             Py_ssize_t entry_size, Py_ssize_t field, uint64_t value)
{
    while (lo < hi) {
        const Py_ssize_t mid = lo + (hi - lo) / 2;
        if (value < (uint64_t)load_le32(index + mid * entry_size + field)) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    return lo;
}

static int span_argument(PyObject *value, long long *out)
{
    *out = PyLong_AsLongLong(value);
    return *out == -1 && PyErr_Occurred() ? -1 : 0;
}

/*
 *   batch_span(index, count, entry_size, first, end, max_bytes, size_bytes, next_relative)
 *       -> (batch_first, batch_end, first_position, end_position) | None
 *       the whole batches a read of relative offsets [first, end) takes within max_bytes (at
 *       least one): the twin of ``index_entry.batch_span_python`` (see there), with the same
 *       probes, answers and exceptions on any bytes.
 */
PyObject *index_batch_span(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 8) {
        PyErr_SetString(PyExc_TypeError, "batch_span takes 8 arguments");
        return NULL;
    }
    long long count, entry_size, first, end, max_bytes, size_bytes, next_relative;
    if (span_argument(args[1], &count) || span_argument(args[2], &entry_size)
            || span_argument(args[3], &first) || span_argument(args[4], &end)
            || span_argument(args[5], &max_bytes) || span_argument(args[6], &size_bytes)
            || span_argument(args[7], &next_relative))
        return NULL;
    if (count < 0 || entry_size < 16 || first < 0 || first >= end || end > next_relative
            || max_bytes < 1 || size_bytes < 0) {
        PyErr_SetString(PyExc_ValueError, "batch_span: an argument is out of range");
        return NULL;
    }
    Py_buffer buffer;
    if (PyObject_GetBuffer(args[0], &buffer, PyBUF_SIMPLE) < 0) return NULL;
    if (count > buffer.len / entry_size) {
        PyBuffer_Release(&buffer);
        PyErr_SetString(PyExc_ValueError, "batch_span: the entries pass the index's end");
        return NULL;
    }
    const uint8_t *index = (const uint8_t *)buffer.buf;
    PyObject *result = Py_None;
    /* a value past u32 is above every entry: bisect_right gives the end */
    Py_ssize_t first_entry = bisect_u32(index, 0, (Py_ssize_t)count, (Py_ssize_t)entry_size, 0,
                                        (uint64_t)first) - 1;
    if (first_entry < 0) goto done;
    Py_ssize_t end_entry = bisect_u32(index, 0, (Py_ssize_t)count, (Py_ssize_t)entry_size, 0,
                                      (uint64_t)(end - 1));
    if (end_entry <= first_entry) goto done;
#define POSITION_AT(n) ((n) >= count ? (uint64_t)size_bytes \
                        : (uint64_t)load_le32(index + (n) * entry_size + 4))
#define RELATIVE_AT(n) ((n) >= count ? (uint64_t)next_relative \
                        : (uint64_t)load_le32(index + (n) * entry_size))
    const uint64_t first_position = POSITION_AT(first_entry);
    const uint64_t limit = first_position + (uint64_t)max_bytes;
    if (POSITION_AT(end_entry) > limit) {
        Py_ssize_t fitting = bisect_u32(index, first_entry + 1, end_entry,
                                        (Py_ssize_t)entry_size, 4, limit) - (first_entry + 1);
        end_entry = first_entry + (fitting > 1 ? fitting : 1);
    }
    const uint64_t end_position = POSITION_AT(end_entry);
    if (!(first_position < end_position && end_position <= (uint64_t)size_bytes)) goto done;
    result = Py_BuildValue("(KKKK)", (unsigned long long)RELATIVE_AT(first_entry),
                           (unsigned long long)RELATIVE_AT(end_entry),
                           (unsigned long long)first_position, (unsigned long long)end_position);
#undef POSITION_AT
#undef RELATIVE_AT
    PyBuffer_Release(&buffer);
    return result;
done:
    PyBuffer_Release(&buffer);
    Py_RETURN_NONE;
}
