/*
 * _requests: the C twin of the broker's decode of TANK's two hot requests, Produce (0x01),
 * ProduceWithSeqnum (0x05) and Consume (0x02) (tank-wire-reference §5.2, §6.2): the reference is
 * rill.protocol.tank.messages._decode_produce / _decode_consume, walking a ``Reader``.
 *
 * Owns: reading those payloads field by field into the request objects, with no Python call
 * per field, and writing a Consume answer's header (the hot reply). The objects are the reference's frozen dataclasses, given once by ``set_classes``
 * and filled the way their generated ``__init__`` fills them (``object.__setattr__`` of each
 * field); a bundle is a memoryview of the payload, as ``Reader.view`` gives.
 *
 * set_classes(ProduceRequest, ProduceTopic, ProducePartition,
 *             ConsumeRequest, ConsumeTopic, ConsumePartition) -> None
 * decode_produce(with_seqnum, payload) -> ProduceRequest, or (kind, text) when malformed
 * decode_consume(payload) -> ConsumeRequest, or (kind, text) when malformed
 * encode_consume(response) -> [head, *chunks]: a ConsumeResponse's frame, ``head`` its frame
 *     header, header length and header in one bytes, the chunks passed through (not copied);
 *     None for what it leaves to the reference (``messages._consume_header``): an endpoint
 *     (OTHER_LEADER), an unknown flag, a value or count out of its field's range, a name that
 *     is not a str -- the reference encodes those or raises its error
 *
 * Error kinds are rill.protocol.tank.bundles' (1 Truncated, 2 BadVarint, 4 LengthMismatch) and
 * the texts the reference's, byte for byte (tests/protocol/tank/test_request_twins.py).
 * Invariants: every read is bounds-checked against the payload's length before it is made;
 * counts are u8, so a request holds at most 255 x 255 entries and a lying count fails at the
 * first field past the end; names are decoded as UTF-8 with surrogateescape, as ``str8``.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_varint.h"

#define ERR_TRUNCATED 1
#define ERR_VARINT 2
#define ERR_LENGTH 4

static PyObject *classes[6]; /* ProduceRequest, ProduceTopic, ProducePartition, Consume... */
enum { PRODUCE_REQUEST, PRODUCE_TOPIC, PRODUCE_PARTITION, CONSUME_REQUEST, CONSUME_TOPIC,
       CONSUME_PARTITION };

/* field names, in each class's order */
static const char *const FIELDS[6][8] = {
    {"request_id", "topics", "with_seqnum", "client_version", "client_id", "required_acks",
     "ack_timeout", NULL},
    {"name", "partitions", NULL},
    {"partition", "bundle", "first_seq", NULL},
    {"request_id", "topics", "max_wait_ms", "min_bytes", "client_version", "client_id",
     "op_flags", NULL},
    {"name", "partitions", NULL},
    {"partition", "seq", "fetch_size", NULL},
};
static PyObject *field_names[6][8];

typedef struct {
    const uint8_t *data;
    Py_ssize_t at, end;
    int kind;        /* 0, or the error kind once a read failed */
    PyObject *text;  /* its text (NULL: the text could not be made; an exception is set) */
} cursor;

static int fail(cursor *c, int kind, PyObject *text)
{
    c->kind = kind;
    c->text = text;
    return -1;
}

static int take(cursor *c, Py_ssize_t size, Py_ssize_t *start)
{
    if (size > c->end - c->at)
        return fail(c, ERR_TRUNCATED, PyUnicode_FromFormat("%zd bytes wanted at %zd, %zd left",
                                                           size, c->at, c->end - c->at));
    *start = c->at;
    c->at += size;
    return 0;
}

static int u8(cursor *c, uint64_t *value)
{
    Py_ssize_t at;
    if (take(c, 1, &at) < 0) return -1;
    *value = c->data[at];
    return 0;
}

static int little(cursor *c, Py_ssize_t size, uint64_t *value)
{
    Py_ssize_t at;
    if (take(c, size, &at) < 0) return -1;
    uint64_t v = 0;
    for (Py_ssize_t i = size - 1; i >= 0; i--)
        v = (v << 8) | c->data[at + i];
    *value = v;
    return 0;
}

static int varint(cursor *c, uint64_t *value)
{
    switch (read_varint(c->data, c->end, &c->at, value)) {
    case VARINT_OK:
        return 0;
    case VARINT_TOO_LONG:
        return fail(c, ERR_VARINT, PyUnicode_FromString(
            "varint longer than 32 bits (5th byte above 0x0f)"));
    default:
        return fail(c, ERR_TRUNCATED,
                    PyUnicode_FromString("varint runs past the end of the input"));
    }
}

/* a str8, decoded as the reference does; NULL with c->kind set (malformed) or an exception */
static PyObject *str8(cursor *c)
{
    uint64_t size;
    Py_ssize_t at;
    if (u8(c, &size) < 0 || take(c, (Py_ssize_t)size, &at) < 0) return NULL;
    return PyUnicode_DecodeUTF8((const char *)c->data + at, (Py_ssize_t)size, "surrogateescape");
}

static PyObject *number(uint64_t value)
{
    return PyLong_FromUnsignedLongLong(value);
}

/* an instance of classes[which] with its fields set (references to ``values`` stolen; NULL
 * values mean a failure before: everything is released and NULL returned) */
static PyObject *make(int which, PyObject **values, int count)
{
    PyObject *made = NULL;
    for (int i = 0; i < count; i++)
        if (values[i] == NULL) goto done;
    PyTypeObject *type = (PyTypeObject *)classes[which];
    made = type->tp_alloc(type, 0);
    if (made == NULL) goto done;
    for (int i = 0; i < count; i++) {
        if (PyObject_GenericSetAttr(made, field_names[which][i], values[i]) < 0) {
            Py_CLEAR(made);
            goto done;
        }
    }
done:
    for (int i = 0; i < count; i++)
        Py_XDECREF(values[i]);
    return made;
}

/* a topic entry's name and partition count: classes[which] holding the name and a tuple of
 * that many partitions, left for the caller to fill (*partitions; the topic holds it); NULL
 * when malformed (c->kind set) or on an exception */
static PyObject *topic_head(cursor *c, int which, PyObject **partitions)
{
    PyObject *name = str8(c);
    if (name == NULL) return NULL;
    uint64_t count;
    if (u8(c, &count) < 0 || (*partitions = PyTuple_New((Py_ssize_t)count)) == NULL) {
        Py_DECREF(name);
        return NULL;
    }
    PyObject *fields[2] = {name, *partitions};
    return make(which, fields, 2);
}

static int ready(void)
{
    if (classes[0] == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "_requests.set_classes was not called");
        return -1;
    }
    return 0;
}

/* what a decoder returns once it stops: ``result``, after releasing the cursor's text, the
 * ``count`` references the decoder held (``owned``, NULLs allowed) and the payload's buffer */
static PyObject *decoded(cursor *c, PyObject *result, PyObject *const *owned, int count,
                         Py_buffer *view)
{
    Py_XDECREF(c->text);
    for (int i = 0; i < count; i++)
        Py_XDECREF(owned[i]);
    PyBuffer_Release(view);
    return result;
}

/* the result for a malformed payload: (kind, text) */
static PyObject *malformed(cursor *c)
{
    if (c->text == NULL) return NULL;
    PyObject *result = Py_BuildValue("(iN)", c->kind, c->text);
    c->text = NULL;
    return result;
}

/* the request once its last field is read: classes[which] of its seven ``values`` (stolen),
 * or the reference's fault when bytes follow that field */
static PyObject *finish(cursor *c, int which, PyObject **values)
{
    if (c->at == c->end) return make(which, values, 7);
    for (int i = 0; i < 7; i++)
        Py_XDECREF(values[i]);
    fail(c, ERR_LENGTH, PyUnicode_FromFormat("%zd bytes left over after the last field",
                                             c->end - c->at));
    return malformed(c);
}

static PyObject *decode_produce(PyObject *self, PyObject *args)
{
    Py_buffer view;
    PyObject *payload;
    int with_seqnum;
    if (!PyArg_ParseTuple(args, "pO", &with_seqnum, &payload) || ready() < 0) return NULL;
    if (PyObject_GetBuffer(payload, &view, PyBUF_SIMPLE) < 0) return NULL;
    cursor c = {view.buf, 0, view.len, 0, NULL};
    PyObject *memory = NULL, *topics = NULL, *client_id = NULL, *result = NULL;
    uint64_t client_version, request_id, acks, timeout, topic_count;
    if (little(&c, 2, &client_version) < 0 || little(&c, 4, &request_id) < 0) goto bad;
    if ((client_id = str8(&c)) == NULL) goto bad;
    if (u8(&c, &acks) < 0 || little(&c, 4, &timeout) < 0 || u8(&c, &topic_count) < 0) goto bad;
    memory = PyMemoryView_FromObject(payload);
    topics = PyTuple_New((Py_ssize_t)topic_count);
    if (memory == NULL || topics == NULL) goto done;
    for (uint64_t t = 0; t < topic_count; t++) {
        PyObject *partitions;
        PyObject *topic = topic_head(&c, PRODUCE_TOPIC, &partitions);
        if (topic == NULL) goto bad;
        PyTuple_SET_ITEM(topics, (Py_ssize_t)t, topic);  /* (its partitions filled in below) */
        Py_ssize_t partition_count = PyTuple_GET_SIZE(partitions);
        for (Py_ssize_t p = 0; p < partition_count; p++) {
            uint64_t id, size, first_seq = 0;
            Py_ssize_t start;
            if (little(&c, 2, &id) < 0 || varint(&c, &size) < 0) goto bad;
            if (with_seqnum && little(&c, 8, &first_seq) < 0) goto bad;
            if ((Py_ssize_t)size > c.end - c.at) {
                fail(&c, ERR_LENGTH, PyUnicode_FromFormat(
                    "bundle_len %llu runs past the payload", (unsigned long long)size));
                goto bad;
            }
            take(&c, (Py_ssize_t)size, &start);
            PyObject *values[3] = {
                number(id), PySequence_GetSlice(memory, start, start + (Py_ssize_t)size),
                with_seqnum ? number(first_seq) : Py_NewRef(Py_None)};
            PyObject *entry = make(PRODUCE_PARTITION, values, 3);
            if (entry == NULL) goto done;
            PyTuple_SET_ITEM(partitions, (Py_ssize_t)p, entry);
        }
    }
    {
        PyObject *values[7] = {number(request_id), Py_NewRef(topics), PyBool_FromLong(with_seqnum),
                               number(client_version), Py_NewRef(client_id), number(acks),
                               number(timeout)};
        result = finish(&c, PRODUCE_REQUEST, values);
    }
    goto done;
bad:
    result = malformed(&c);
done:  /* (the bundles' slices keep the payload's buffer themselves) */
    return decoded(&c, result, (PyObject *[]){client_id, topics, memory}, 3, &view);
}

static PyObject *decode_consume(PyObject *self, PyObject *args)
{
    Py_buffer view;
    if (!PyArg_ParseTuple(args, "y*", &view)) return NULL;
    if (ready() < 0) {
        PyBuffer_Release(&view);
        return NULL;
    }
    cursor c = {view.buf, 0, view.len, 0, NULL};
    PyObject *topics = NULL, *client_id = NULL, *result = NULL;
    uint64_t client_version, request_id, max_wait, min_bytes, op_flags = 0, topic_count;
    if (little(&c, 2, &client_version) < 0 || little(&c, 4, &request_id) < 0) goto bad;
    if ((client_id = str8(&c)) == NULL) goto bad;
    if (little(&c, 8, &max_wait) < 0 || little(&c, 4, &min_bytes) < 0) goto bad;
    if (client_version >= 3 && u8(&c, &op_flags) < 0) goto bad;
    if (u8(&c, &topic_count) < 0) goto bad;
    topics = PyTuple_New((Py_ssize_t)topic_count);
    if (topics == NULL) goto done;
    for (uint64_t t = 0; t < topic_count; t++) {
        PyObject *partitions;
        PyObject *topic = topic_head(&c, CONSUME_TOPIC, &partitions);
        if (topic == NULL) goto bad;
        PyTuple_SET_ITEM(topics, (Py_ssize_t)t, topic);  /* (its partitions filled in below) */
        Py_ssize_t partition_count = PyTuple_GET_SIZE(partitions);
        for (Py_ssize_t p = 0; p < partition_count; p++) {
            uint64_t id, seq, fetch_size;
            if (little(&c, 2, &id) < 0 || little(&c, 8, &seq) < 0 ||
                little(&c, 4, &fetch_size) < 0)
                goto bad;
            PyObject *values[3] = {number(id), number(seq), number(fetch_size)};
            PyObject *entry = make(CONSUME_PARTITION, values, 3);
            if (entry == NULL) goto done;
            PyTuple_SET_ITEM(partitions, (Py_ssize_t)p, entry);
        }
    }
    {
        PyObject *values[7] = {number(request_id), Py_NewRef(topics), number(max_wait),
                               number(min_bytes), number(client_version),
                               Py_NewRef(client_id), number(op_flags)};
        result = finish(&c, CONSUME_REQUEST, values);
    }
    goto done;
bad:
    result = malformed(&c);
done:
    return decoded(&c, result, (PyObject *[]){client_id, topics}, 2, &view);
}

/* ------------------------------------------------------------------ Consume's answer */

enum { FLAG_OK = 0x00, FLAG_BOUNDARY = 0x01, FLAG_SYSTEM = 0xFB, FLAG_OTHER_LEADER = 0xFC,
       FLAG_NO_LEADER = 0xFD, FLAG_SPARSE_FIRST = 0xFE, FLAG_UNKNOWN_PARTITION = 0xFF };
#define MSG_CONSUME 0x02

static PyObject *attribute_names[10];
enum { A_REQUEST_ID, A_TOPICS, A_NAME, A_PARTITIONS, A_UNKNOWN_COUNT, A_PARTITION, A_FLAG,
       A_BASE, A_HWM, A_CHUNK };
static const char *const ATTRIBUTES[10] = {"request_id", "topics", "name", "partitions",
    "unknown_count", "partition", "flag", "base", "hwm", "chunk"};
static PyObject *first_available_name;

/* the unsigned value of ``object``'s attribute, or -1 (not an int, or above ``max``; any
 * exception is cleared: the reference decides what to say) */
static int unsigned_attribute(PyObject *object, PyObject *name, uint64_t max, uint64_t *value)
{
    PyObject *found = PyObject_GetAttr(object, name);
    if (found == NULL) {
        PyErr_Clear();
        return -1;
    }
    int ok = PyLong_Check(found);
    unsigned long long v = ok ? PyLong_AsUnsignedLongLong(found) : 0;
    Py_DECREF(found);
    if (!ok || (v == (unsigned long long)-1 && PyErr_Occurred())) {
        PyErr_Clear();
        return -1;
    }
    if (v > max) return -1;
    *value = v;
    return 0;
}

static void put_le(uint8_t **out, uint64_t value, int size)
{
    for (int i = 0; i < size; i++)
        (*out)[i] = (uint8_t)(value >> (8 * i));
    *out += size;
}

typedef struct {
    PyObject *name;  /* the encoded name (bytes) */
    PyObject *parts; /* the partitions tuple, or NULL: unknown topic */
    uint64_t unknown_count;
} topic_entry;

static PyObject *encode_consume(PyObject *self, PyObject *response)
{
    PyObject *result = NULL, *topics = NULL, *chunks = NULL;
    topic_entry *entries = NULL;
    Py_ssize_t topic_count = 0;
    uint64_t request_id;
    if (unsigned_attribute(response, attribute_names[A_REQUEST_ID], 0xFFFFFFFFu, &request_id) < 0)
        Py_RETURN_NONE;
    topics = PyObject_GetAttr(response, attribute_names[A_TOPICS]);
    if (topics == NULL || !PyTuple_Check(topics) || PyTuple_GET_SIZE(topics) > 255) goto fallback;
    topic_count = PyTuple_GET_SIZE(topics);
    entries = PyMem_Calloc((size_t)topic_count + 1, sizeof(topic_entry));
    chunks = PyList_New(1);
    if (entries == NULL || chunks == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    /* first pass: check what the fast path handles, size the header, collect the chunks */
    Py_ssize_t size = 4 + 1;
    for (Py_ssize_t t = 0; t < topic_count; t++) {
        PyObject *topic = PyTuple_GET_ITEM(topics, t);
        topic_entry *entry = &entries[t];
        PyObject *name = PyObject_GetAttr(topic, attribute_names[A_NAME]);
        if (name == NULL || !PyUnicode_Check(name)) {
            Py_XDECREF(name);
            goto fallback;
        }
        entry->name = PyUnicode_AsEncodedString(name, "utf-8", "surrogateescape");
        Py_DECREF(name);
        if (entry->name == NULL || PyBytes_GET_SIZE(entry->name) > 255) goto fallback;
        size += 1 + PyBytes_GET_SIZE(entry->name);
        PyObject *unknown = PyObject_GetAttr(topic, attribute_names[A_UNKNOWN_COUNT]);
        if (unknown == NULL) goto fallback;
        int is_unknown = unknown != Py_None;
        Py_DECREF(unknown);
        if (is_unknown) {
            if (unsigned_attribute(topic, attribute_names[A_UNKNOWN_COUNT], 255,
                                   &entry->unknown_count) < 0)
                goto fallback;
            size += 1 + 2;
            continue;
        }
        entry->parts = PyObject_GetAttr(topic, attribute_names[A_PARTITIONS]);
        if (entry->parts == NULL || !PyTuple_Check(entry->parts) ||
            PyTuple_GET_SIZE(entry->parts) > 255)
            goto fallback;
        size += 1;
        for (Py_ssize_t p = 0; p < PyTuple_GET_SIZE(entry->parts); p++) {
            PyObject *part = PyTuple_GET_ITEM(entry->parts, p);
            uint64_t flag, number;
            if (unsigned_attribute(part, attribute_names[A_FLAG], 255, &flag) < 0 ||
                unsigned_attribute(part, attribute_names[A_PARTITION], 0xFFFF, &number) < 0)
                goto fallback;
            size += 3;
            if (flag == FLAG_SYSTEM || flag == FLAG_NO_LEADER || flag == FLAG_UNKNOWN_PARTITION)
                continue;
            if (flag != FLAG_OK && flag != FLAG_SPARSE_FIRST && flag != FLAG_BOUNDARY)
                goto fallback; /* an endpoint, or a flag no client knows */
            size += (flag == FLAG_SPARSE_FIRST ? 8 : 16) + 4 + (flag == FLAG_BOUNDARY ? 8 : 0);
            PyObject *chunk = PyObject_GetAttr(part, attribute_names[A_CHUNK]);
            if (chunk == NULL) goto fallback;
            Py_ssize_t length = PyObject_Length(chunk);
            if (length < 0 || (uint64_t)length > 0xFFFFFFFFu) {
                Py_DECREF(chunk);
                goto fallback;
            }
            if (length > 0 && PyList_Append(chunks, chunk) < 0) {
                Py_DECREF(chunk);
                goto done;
            }
            Py_DECREF(chunk);
        }
    }
    /* second pass: write frame header, header length, header */
    Py_ssize_t total = size;
    for (Py_ssize_t c = 1; c < PyList_GET_SIZE(chunks); c++)
        total += PyObject_Length(PyList_GET_ITEM(chunks, c));
    if ((uint64_t)total + 4 > 0xFFFFFFFFu) goto fallback;
    PyObject *head = PyBytes_FromStringAndSize(NULL, 5 + 4 + size);
    if (head == NULL) goto done;
    uint8_t *out = (uint8_t *)PyBytes_AS_STRING(head);
    put_le(&out, MSG_CONSUME, 1);
    put_le(&out, (uint64_t)total + 4, 4);
    put_le(&out, (uint64_t)size, 4);
    put_le(&out, request_id, 4);
    put_le(&out, (uint64_t)topic_count, 1);
    for (Py_ssize_t t = 0; t < topic_count; t++) {
        topic_entry *entry = &entries[t];
        Py_ssize_t length = PyBytes_GET_SIZE(entry->name);
        put_le(&out, (uint64_t)length, 1);
        memcpy(out, PyBytes_AS_STRING(entry->name), (size_t)length);
        out += length;
        if (entry->parts == NULL) {
            put_le(&out, entry->unknown_count, 1);
            put_le(&out, 0xFFFF, 2);
            continue;
        }
        put_le(&out, (uint64_t)PyTuple_GET_SIZE(entry->parts), 1);
        for (Py_ssize_t p = 0; p < PyTuple_GET_SIZE(entry->parts); p++) {
            PyObject *part = PyTuple_GET_ITEM(entry->parts, p);
            uint64_t flag = 0, number = 0, base = 0, hwm = 0, first = 0;
            unsigned_attribute(part, attribute_names[A_FLAG], 255, &flag);
            unsigned_attribute(part, attribute_names[A_PARTITION], 0xFFFF, &number);
            put_le(&out, number, 2);
            put_le(&out, flag, 1);
            if (flag == FLAG_SYSTEM || flag == FLAG_NO_LEADER || flag == FLAG_UNKNOWN_PARTITION)
                continue;
            if ((flag != FLAG_SPARSE_FIRST &&
                 unsigned_attribute(part, attribute_names[A_BASE], UINT64_MAX, &base) < 0) ||
                unsigned_attribute(part, attribute_names[A_HWM], UINT64_MAX, &hwm) < 0 ||
                (flag == FLAG_BOUNDARY &&
                 unsigned_attribute(part, first_available_name, UINT64_MAX, &first) < 0)) {
                Py_DECREF(head);
                goto fallback;
            }
            PyObject *chunk = PyObject_GetAttr(part, attribute_names[A_CHUNK]);
            Py_ssize_t length = chunk == NULL ? -1 : PyObject_Length(chunk);
            Py_XDECREF(chunk);
            if (length < 0) {
                Py_DECREF(head);
                goto fallback;
            }
            if (flag != FLAG_SPARSE_FIRST) put_le(&out, base, 8);
            put_le(&out, hwm, 8);
            put_le(&out, (uint64_t)length, 4);
            if (flag == FLAG_BOUNDARY) put_le(&out, first, 8);
        }
    }
    PyList_SET_ITEM(chunks, 0, head);
    result = chunks;
    chunks = NULL;
    goto done;
fallback:
    PyErr_Clear();
    result = Py_NewRef(Py_None);
done:
    if (entries != NULL) {
        for (Py_ssize_t t = 0; t < topic_count; t++) {
            Py_XDECREF(entries[t].name);
            Py_XDECREF(entries[t].parts);
        }
        PyMem_Free(entries);
    }
    Py_XDECREF(chunks);  /* (not handed out: its slot 0 may still be NULL) */
    Py_XDECREF(topics);
    return result;
}

static PyObject *set_classes(PyObject *self, PyObject *args)
{
    PyObject *given[6];
    if (!PyArg_ParseTuple(args, "OOOOOO", &given[0], &given[1], &given[2], &given[3],
                          &given[4], &given[5]))
        return NULL;
    for (int i = 0; i < 6; i++) {
        if (!PyType_Check(given[i])) {
            PyErr_SetString(PyExc_TypeError, "set_classes takes the six request classes");
            return NULL;
        }
    }
    for (int i = 0; i < 6; i++) {
        Py_XSETREF(classes[i], Py_NewRef(given[i]));
        for (int f = 0; FIELDS[i][f] != NULL; f++) {
            if (field_names[i][f] == NULL) {
                field_names[i][f] = PyUnicode_InternFromString(FIELDS[i][f]);
                if (field_names[i][f] == NULL) return NULL;
            }
        }
    }
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"set_classes", set_classes, METH_VARARGS,
     "set_classes(ProduceRequest, ProduceTopic, ProducePartition, ConsumeRequest, "
     "ConsumeTopic, ConsumePartition) -> None: the classes the decoders make"},
    {"decode_produce", decode_produce, METH_VARARGS,
     "decode_produce(with_seqnum, payload) -> ProduceRequest, or (error kind, text)"},
    {"decode_consume", decode_consume, METH_VARARGS,
     "decode_consume(payload) -> ConsumeRequest, or (error kind, text)"},
    {"encode_consume", encode_consume, METH_O,
     "encode_consume(response) -> [frame head, *chunks], or None (left to the reference)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_requests",
    "C twin of the TANK broker's Produce and Consume request decode", -1, methods,
};

PyMODINIT_FUNC PyInit__requests(void)
{
    PyObject *module = PyModule_Create(&module_def);
    if (!module) return NULL;
    for (int i = 0; i < 10; i++) {
        attribute_names[i] = PyUnicode_InternFromString(ATTRIBUTES[i]);
        if (attribute_names[i] == NULL) {
            Py_DECREF(module);
            return NULL;
        }
    }
    first_available_name = PyUnicode_InternFromString("first_available");
    if (first_available_name == NULL) {
        Py_DECREF(module);
        return NULL;
    }
    if (PyModule_AddIntConstant(module, "ERR_TRUNCATED", ERR_TRUNCATED) < 0 ||
        PyModule_AddIntConstant(module, "ERR_VARINT", ERR_VARINT) < 0 ||
        PyModule_AddIntConstant(module, "ERR_LENGTH", ERR_LENGTH) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
