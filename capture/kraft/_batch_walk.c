/* The KRaft metadata log's clean record batches, read in C (B7: the batch walk was half of the
 * parse time in Python; the goal is 200,000 records/s on a slow 2-core VM).
 *
 * walk(data, start, limit, Batch, Record) -> (batches, position)
 *
 * Reads the batches of `data` from byte `start`, as record_batches.parse_batch does, and stops
 * at the first one it does not take or after `limit`: a batch cut short, an impossible length,
 * another magic, a CRC that does not match, compression, any record field out of the ordinary.
 * It gives back the batches it read (as `Batch` and `Record` tuples, the NamedTuples of
 * record_batches.py) and the byte where it stopped; Python reads on from there in its own
 * way, which also names the damage. So every batch given out here is one Python would give
 * out, equal field for field: tests/unit/test_kraft_batch_walk.py checks that on fuzzed bytes.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define LOG_OVERHEAD 12
#define HEADER_SIZE 61
#define CRC_START 21

static uint32_t crc_table[8][256];

static void crc_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t crc = i;
        for (int k = 0; k < 8; k++)
            crc = (crc & 1) ? (crc >> 1) ^ 0x82F63B78u : crc >> 1; /* CRC32C, reflected */
        crc_table[0][i] = crc;
    }
    for (int t = 1; t < 8; t++)
        for (int i = 0; i < 256; i++)
            crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xFF];
}

static uint32_t crc32c(const unsigned char *p, Py_ssize_t n)
{
    uint32_t crc = 0xFFFFFFFFu;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    while (n >= 8) { /* slicing by 8: eight table lookups a word */
        uint64_t word;
        memcpy(&word, p, 8);
        uint32_t lo = crc ^ (uint32_t)word, hi = (uint32_t)(word >> 32);
        crc = crc_table[7][lo & 0xFF] ^ crc_table[6][(lo >> 8) & 0xFF]
            ^ crc_table[5][(lo >> 16) & 0xFF] ^ crc_table[4][lo >> 24]
            ^ crc_table[3][hi & 0xFF] ^ crc_table[2][(hi >> 8) & 0xFF]
            ^ crc_table[1][(hi >> 16) & 0xFF] ^ crc_table[0][hi >> 24];
        p += 8;
        n -= 8;
    }
#endif
    while (n-- > 0)
        crc = crc_table[0][(crc ^ *p++) & 0xFF] ^ (crc >> 8);
    return crc ^ 0xFFFFFFFFu;
}

static int64_t be64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = (v << 8) | p[i];
    return (int64_t)v;
}

static int32_t be32(const unsigned char *p)
{
    return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3]);
}

/* A zig-zag varint of at most 9 bytes inside [*p, end): 0 when it is not one (Python's way
 * then reads the batch, and says what is wrong with it). */
static int varint(const unsigned char **p, const unsigned char *end, int64_t *out)
{
    uint64_t raw = 0;
    for (int shift = 0; shift < 63; shift += 7) {
        if (*p >= end)
            return 0;
        unsigned char byte = *(*p)++;
        raw |= (uint64_t)(byte & 0x7F) << shift;
        if (byte < 0x80) {
            *out = (int64_t)(raw >> 1) ^ -(int64_t)(raw & 1);
            return 1;
        }
    }
    return 0;
}

/* The `count` records in [p, stop) as a tuple of `record_type`; NULL without an exception set
 * when they are not plainly readable, NULL with one on a Python error. */
static PyObject *records(PyTypeObject *record_type, const unsigned char *p,
                         const unsigned char *stop, int32_t count, int64_t base_offset,
                         int64_t base_ts)
{
    PyObject *out = PyTuple_New(count);
    if (out == NULL)
        return NULL;
    for (int32_t i = 0; i < count; i++) {
        int64_t length, ts_delta, offset_delta, key_len, value_len, offset, ts;
        if (!varint(&p, stop, &length) || length <= 0 || length > stop - p)
            goto unplain;
        const unsigned char *end = p + length;
        p++; /* attributes (unused) */
        if (!varint(&p, end, &ts_delta) || !varint(&p, end, &offset_delta)
            || !varint(&p, end, &key_len) || key_len < -1 || key_len > end - p)
            goto unplain;
        const unsigned char *key = p;
        if (key_len > 0)
            p += key_len;
        if (!varint(&p, end, &value_len) || value_len < -1 || value_len > end - p)
            goto unplain;
        if (__builtin_add_overflow(base_offset, offset_delta, &offset)
            || __builtin_add_overflow(base_ts, ts_delta, &ts))
            goto unplain;
        PyObject *record = record_type->tp_alloc(record_type, 4);
        if (record == NULL)
            goto error;
        PyTuple_SET_ITEM(out, i, record);
        PyObject *item;
        if ((item = PyLong_FromLongLong(offset)) == NULL)
            goto error;
        PyTuple_SET_ITEM(record, 0, item);
        if ((item = PyLong_FromLongLong(ts)) == NULL)
            goto error;
        PyTuple_SET_ITEM(record, 1, item);
        if (key_len < 0) {
            item = Py_NewRef(Py_None);
        } else if ((item = PyBytes_FromStringAndSize((const char *)key, key_len)) == NULL) {
            goto error;
        }
        PyTuple_SET_ITEM(record, 2, item);
        if (value_len < 0) {
            item = Py_NewRef(Py_None);
        } else if ((item = PyBytes_FromStringAndSize((const char *)p, value_len)) == NULL) {
            goto error;
        }
        PyTuple_SET_ITEM(record, 3, item);
        p = end; /* headers: the metadata log writes none we need */
    }
    if (p != stop)
        goto unplain;
    return out;
unplain:
    Py_DECREF(out);
    return NULL;
error:
    Py_DECREF(out);
    if (!PyErr_Occurred())
        PyErr_NoMemory();
    return NULL;
}

static PyObject *batch(PyTypeObject *batch_type, PyTypeObject *record_type,
                       const unsigned char *data, Py_ssize_t position, Py_ssize_t size)
{
    const unsigned char *b = data + position;
    int64_t base_offset = be64(b), base_ts = be64(b + 27), max_ts = be64(b + 35), last_offset;
    int32_t epoch = be32(b + 12), last_delta = be32(b + 23), count = be32(b + 57);
    uint32_t crc = (uint32_t)be32(b + 17);
    int attributes = (b[21] << 8) | b[22];
    if (b[16] != 2 || (attributes & 0x07) != 0 || count < 0 || count > size - HEADER_SIZE
        || crc32c(b + CRC_START, size - CRC_START) != crc
        || __builtin_add_overflow(base_offset, (int64_t)last_delta, &last_offset))
        return NULL;
    PyObject *recs = records(record_type, b + HEADER_SIZE, b + size, count, base_offset, base_ts);
    if (recs == NULL)
        return NULL;
    PyObject *out = batch_type->tp_alloc(batch_type, 9);
    if (out == NULL) {
        Py_DECREF(recs);
        return NULL;
    }
    PyObject *items[8] = {
        PyLong_FromSsize_t(position), PyLong_FromSsize_t(size), PyLong_FromLongLong(base_offset),
        PyLong_FromLongLong(last_offset), PyLong_FromLong(epoch), PyLong_FromUnsignedLong(crc),
        PyLong_FromLongLong(max_ts), PyBool_FromLong(attributes & 0x20),
    };
    int failed = 0;
    for (int i = 0; i < 8; i++) {
        if (items[i] == NULL)
            failed = 1;
        PyTuple_SET_ITEM(out, i, items[i]);
    }
    PyTuple_SET_ITEM(out, 8, recs);
    if (failed) {
        Py_DECREF(out);
        return NULL;
    }
    return out;
}

static PyObject *walk(PyObject *module, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t position, limit;
    PyTypeObject *batch_type, *record_type;
    if (!PyArg_ParseTuple(args, "y*nnO!O!", &view, &position, &limit, &PyType_Type, &batch_type,
                          &PyType_Type, &record_type))
        return NULL;
    if (!PyType_IsSubtype(batch_type, &PyTuple_Type) || !PyType_IsSubtype(record_type, &PyTuple_Type)) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_TypeError, "Batch and Record must be tuples");
        return NULL;
    }
    PyObject *out = PyList_New(0);
    if (out == NULL) {
        PyBuffer_Release(&view);
        return NULL;
    }
    const unsigned char *data = view.buf;
    Py_ssize_t total = view.len;
    if (position < 0)
        position = total; /* nothing: Python's way says what */
    while (PyList_GET_SIZE(out) < limit && total - position >= HEADER_SIZE) {
        int32_t length = be32(data + position + 8);
        if (length < HEADER_SIZE - LOG_OVERHEAD || length > total - position - LOG_OVERHEAD)
            break;
        PyObject *read = batch(batch_type, record_type, data, position, LOG_OVERHEAD + length);
        if (read == NULL) {
            if (PyErr_Occurred()) {
                Py_DECREF(out);
                PyBuffer_Release(&view);
                return NULL;
            }
            break;
        }
        int appended = PyList_Append(out, read);
        Py_DECREF(read);
        if (appended < 0) {
            Py_DECREF(out);
            PyBuffer_Release(&view);
            return NULL;
        }
        position += LOG_OVERHEAD + length;
    }
    PyBuffer_Release(&view);
    return Py_BuildValue("(Nn)", out, position);
}

static PyMethodDef methods[] = {
    {"walk", walk, METH_VARARGS,
     "walk(data, start, limit, Batch, Record) -> (batches, position): the clean batches from "
     "`start`, up to `limit`, and the byte where the walk stopped."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_batch_walk", NULL, -1, methods};

PyMODINIT_FUNC PyInit__batch_walk(void)
{
    crc_init();
    return PyModule_Create(&module);
}
