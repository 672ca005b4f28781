/*
 * _header_map.c, a unit of the ``_stamp`` module (_stamp.c defines the module): the checks of
 * an Iggy header map, shared by the write loop (_stamp.c) and the record checks
 * (_record_checks.c), and Python's strict UTF-8 (also _convert.c's).
 *
 * Owns: ``stamp_valid_utf8``, ``check_header_map`` (walk a map as
 * rill.protocol.iggy.headers.decode_header_map does) and ``header_problem_text`` (word what it
 * found as the reference does). Their types are in _stamp.h.
 */

#include "_stamp.h"

/* Strict UTF-8 as Python's decoder takes it: no overlongs, surrogates or code points past
 * U+10FFFF (RFC 3629, table 3-7 of the Unicode standard). */
int stamp_valid_utf8(const uint8_t *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t need;
        uint8_t low = 0x80, high = 0xBF; /* allowed range of the second byte */
        if (c >= 0xC2 && c <= 0xDF) {
            need = 1;
        } else if (c >= 0xE0 && c <= 0xEF) {
            need = 2;
            if (c == 0xE0) low = 0xA0;
            else if (c == 0xED) high = 0x9F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            need = 3;
            if (c == 0xF0) low = 0x90;
            else if (c == 0xF4) high = 0x8F;
        } else {
            return 0;
        }
        if (n - i - 1 < need) return 0;
        if (s[i + 1] < low || s[i + 1] > high) return 0;
        for (size_t k = 2; k <= need; k++)
            if ((s[i + k] & 0xC0) != 0x80) return 0;
        i += need + 1;
    }
    return 1;
}

static int compare_keys(const void *a, const void *b)
{
    const header_key *x = a, *y = b;
    if (x->length != y->length) return x->length < y->length ? -1 : 1;
    int order = memcmp(x->data, y->data, x->length);
    if (order) return order;
    return x->index < y->index ? -1 : x->index > y->index;
}

static int same_key(const header_key *x, const header_key *y)
{
    return x->length == y->length && memcmp(x->data, y->data, x->length) == 0;
}

/* The first key (in map order) equal to an earlier one, or NULL: the one the reference, which
 * checks each key against those before it, stops at. Sorts the list (large maps). */
static const header_key *first_repeated_key(key_list *list)
{
    size_t n = list->count;
    header_key *keys = list->keys;
    if (n <= 16) {
        for (size_t i = 1; i < n; i++)
            for (size_t j = 0; j < i; j++)
                if (same_key(&keys[i], &keys[j])) return &keys[i];
        return NULL;
    }
    qsort(keys, n, sizeof *keys, compare_keys);
    const header_key *first = NULL;
    for (size_t i = 1; i < n; i++) /* in a run of equal keys, the second is the first repeat */
        if (same_key(&keys[i - 1], &keys[i]) && (i < 2 || !same_key(&keys[i - 2], &keys[i])) &&
            (first == NULL || keys[i].index < first->index))
            first = &keys[i];
    return first;
}

/* Walk a header map exactly as rill.protocol.iggy.headers.decode_header_map does (key 1..255 bytes
 * of UTF-8, kind 1..15, value 1..255 bytes, unique keys, nothing left over), adding each value
 * length to ``*total`` and stopping as soon as it passes ``limit``. Returns the status, with
 * the details in ``problem``; ``*total`` is updated only when the map is valid. */
int check_header_map(const uint8_t *p, size_t n, key_list *list, uint64_t *total,
                            uint64_t limit, header_problem *problem)
{
    size_t pos = 0;
    uint64_t values = *total;
    int status = HEADER_OK;
    memset(problem, 0, sizeof *problem);
    list->count = 0;
#define NEED(size)                                                                         \
    if (n - pos < (size)) {                                                                \
        problem->needed = (size);                                                          \
        problem->at = pos;                                                                 \
        problem->have = n - pos;                                                           \
        status = HEADER_NEEDED;                                                            \
        break;                                                                             \
    }
    while (pos < n) {
        NEED(4)
        uint32_t key_length = load_le32(p + pos);
        pos += 4;
        if (key_length < 1 || key_length > 255) {
            problem->value = key_length;
            status = HEADER_KEY_LENGTH;
            break;
        }
        NEED(key_length)
        const uint8_t *key = p + pos;
        if (!stamp_valid_utf8(key, key_length)) {
            problem->key = key;
            problem->key_length = key_length;
            status = HEADER_UTF8;
            break;
        }
        pos += key_length;
        NEED(1)
        uint8_t kind = p[pos];
        pos += 1;
        if (kind < 1 || kind > 15) {
            problem->value = kind;
            status = HEADER_KIND;
            break;
        }
        NEED(4)
        uint32_t value_length = load_le32(p + pos);
        pos += 4;
        if (value_length < 1 || value_length > 255) {
            problem->value = value_length;
            status = HEADER_VALUE_LENGTH;
            break;
        }
        if (list->count == list->capacity) { /* the reference's repeat check comes here */
            size_t capacity = list->capacity ? 2 * list->capacity : 16;
            header_key *grown = PyMem_RawRealloc(list->keys, capacity * sizeof *grown);
            if (grown == NULL) return problem->status = HEADER_NO_MEMORY;
            list->keys = grown;
            list->capacity = capacity;
        }
        list->keys[list->count].data = key;
        list->keys[list->count].length = key_length;
        list->keys[list->count].index = list->count;
        list->count++;
        NEED(value_length)
        pos += value_length;
        values += value_length;
        if (values > limit) {
            status = HEADER_LIMIT;
            break;
        }
    }
#undef NEED
    const header_key *repeated = first_repeated_key(list);
    if (repeated != NULL) { /* it came before whatever stopped the walk */
        status = HEADER_DUPLICATE;
        problem->key = repeated->data;
        problem->key_length = repeated->length;
    }
    if (status == HEADER_OK) *total = values;
    return problem->status = status;
}

/* The reference's DecodeError detail for a malformed map (GIL held), or NULL with an error. */
PyObject *header_problem_text(const header_problem *problem)
{
    PyObject *key, *text;
    switch (problem->status) {
    case HEADER_NEEDED:
        return PyUnicode_FromFormat("needed %llu bytes at %llu, have %llu",
                                    (unsigned long long)problem->needed,
                                    (unsigned long long)problem->at,
                                    (unsigned long long)problem->have);
    case HEADER_KEY_LENGTH:
        return PyUnicode_FromFormat("header key length %llu", (unsigned long long)problem->value);
    case HEADER_KIND:
        return PyUnicode_FromFormat("header kind %llu", (unsigned long long)problem->value);
    case HEADER_VALUE_LENGTH:
        return PyUnicode_FromFormat("header value length %llu",
                                    (unsigned long long)problem->value);
    case HEADER_DUPLICATE:
        key = PyUnicode_DecodeUTF8((const char *)problem->key, problem->key_length, "strict");
        if (key == NULL) return NULL;
        text = PyUnicode_FromFormat("duplicate header key %R", key);
        Py_DECREF(key);
        return text;
    case HEADER_UTF8: {
        /* Python's own decoder words the reason (at most 255 bytes, once per rejection) */
        key = PyUnicode_DecodeUTF8((const char *)problem->key, problem->key_length, "strict");
        if (key != NULL) {
            Py_DECREF(key);
            PyErr_SetString(PyExc_SystemError, "_stamp: UTF-8 check disagrees with Python's");
            return NULL;
        }
        if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) return NULL;
        PyObject *type, *value, *traceback;
        PyErr_Fetch(&type, &value, &traceback);
        PyErr_NormalizeException(&type, &value, &traceback);
        PyObject *reason = value ? PyUnicodeDecodeError_GetReason(value) : NULL;
        text = reason ? PyUnicode_FromFormat("invalid UTF-8: %U", reason) : NULL;
        Py_XDECREF(reason);
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(traceback);
        return text;
    }
    default:
        PyErr_SetString(PyExc_SystemError, "_stamp: no header problem to word");
        return NULL;
    }
}
