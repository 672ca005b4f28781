/*
 * _requests: the C twin of the broker's decode of TANK's two hot requests, Produce (0x01),
 * ProduceWithSeqnum (0x05) and Consume (0x02) (tank-wire-reference §5.2, §6.2): the reference is
 * rill.protocol.tank.messages._decode_produce / _decode_consume, walking a ``Reader``.
 *
 * Owns: reading those payloads field by field into the request objects, with no Python call
 * per field. The objects are the reference's frozen dataclasses, given once by ``set_classes``
 * and filled the way their generated ``__init__`` fills them (``object.__setattr__`` of each
 * field); a bundle is a memoryview of the payload, as ``Reader.view`` gives.
 *
 * set_classes(ProduceRequest, ProduceTopic, ProducePartition,
 *             ConsumeRequest, ConsumeTopic, ConsumePartition) -> None
 * decode_produce(with_seqnum, payload) -> ProduceRequest, or (kind, text) when malformed
 * decode_consume(payload) -> ConsumeRequest, or (kind, text) when malformed
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
    uint64_t v = 0;
    for (int index = 0; index < 5; index++) {
        if (c->at + index >= c->end)
            return fail(c, ERR_TRUNCATED,
                        PyUnicode_FromString("varint runs past the end of the input"));
        uint8_t byte = c->data[c->at + index];
        if (index == 4) {
            if (byte > 0x0F)
                return fail(c, ERR_VARINT, PyUnicode_FromString(
                    "varint longer than 32 bits (5th byte above 0x0f)"));
            *value = v | ((uint64_t)byte << 28);
            c->at += 5;
            return 0;
        }
        v |= (uint64_t)(byte & 0x7F) << (7 * index);
        if (byte < 0x80) {
            *value = v;
            c->at += index + 1;
            return 0;
        }
    }
    return -1; /* unreachable */
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

static int ready(void)
{
    if (classes[0] == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "_requests.set_classes was not called");
        return -1;
    }
    return 0;
}

/* the result for a malformed payload: (kind, text) */
static PyObject *malformed(cursor *c)
{
    if (c->text == NULL) return NULL;
    PyObject *result = Py_BuildValue("(iN)", c->kind, c->text);
    c->text = NULL;
    return result;
}

static PyObject *left_over(cursor *c)
{
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
        PyObject *name = str8(&c);
        if (name == NULL) goto bad;
        uint64_t partition_count;
        if (u8(&c, &partition_count) < 0) {
            Py_DECREF(name);
            goto bad;
        }
        PyObject *partitions = PyTuple_New((Py_ssize_t)partition_count);
        if (partitions == NULL) {
            Py_DECREF(name);
            goto done;
        }
        PyObject *fields[2] = {name, partitions};
        PyObject *topic = make(PRODUCE_TOPIC, fields, 2);
        if (topic == NULL) goto done;
        PyTuple_SET_ITEM(topics, (Py_ssize_t)t, topic);  /* (partitions filled in below) */
        for (uint64_t p = 0; p < partition_count; p++) {
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
    if (c.at != c.end) {
        result = left_over(&c);
        goto done;
    }
    {
        PyObject *values[7] = {number(request_id), Py_NewRef(topics), PyBool_FromLong(with_seqnum),
                               number(client_version), Py_NewRef(client_id), number(acks),
                               number(timeout)};
        result = make(PRODUCE_REQUEST, values, 7);
    }
    goto done;
bad:
    result = malformed(&c);
done:
    Py_XDECREF(c.text);
    Py_XDECREF(client_id);
    Py_XDECREF(topics);
    Py_XDECREF(memory);  /* (the bundles' slices keep the payload's buffer themselves) */
    PyBuffer_Release(&view);
    return result;
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
        PyObject *name = str8(&c);
        if (name == NULL) goto bad;
        uint64_t partition_count;
        if (u8(&c, &partition_count) < 0) {
            Py_DECREF(name);
            goto bad;
        }
        PyObject *partitions = PyTuple_New((Py_ssize_t)partition_count);
        if (partitions == NULL) {
            Py_DECREF(name);
            goto done;
        }
        PyObject *fields[2] = {name, partitions};
        PyObject *topic = make(CONSUME_TOPIC, fields, 2);
        if (topic == NULL) goto done;
        PyTuple_SET_ITEM(topics, (Py_ssize_t)t, topic);
        for (uint64_t p = 0; p < partition_count; p++) {
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
    if (c.at != c.end) {
        result = left_over(&c);
        goto done;
    }
    {
        PyObject *values[7] = {number(request_id), Py_NewRef(topics), number(max_wait),
                               number(min_bytes), number(client_version),
                               Py_NewRef(client_id), number(op_flags)};
        result = make(CONSUME_REQUEST, values, 7);
    }
    goto done;
bad:
    result = malformed(&c);
done:
    Py_XDECREF(c.text);
    Py_XDECREF(client_id);
    Py_XDECREF(topics);
    PyBuffer_Release(&view);
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
    if (PyModule_AddIntConstant(module, "ERR_TRUNCATED", ERR_TRUNCATED) < 0 ||
        PyModule_AddIntConstant(module, "ERR_VARINT", ERR_VARINT) < 0 ||
        PyModule_AddIntConstant(module, "ERR_LENGTH", ERR_LENGTH) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
