/*
 * The per-record loops of the v2 record format, compiled: the broker's walk that checks a
 * batch's records against its header before an append (validate.py), the consumer's decode
 * into Record objects (codec.py), and the producer's encode of a record (append_record for
 * builder.py, append_record_at for the producer's accumulator, client/producer/accumulator.py);
 * and the GF(2) multiplication that carries a batch's CRC over a change at its start (header.py).
 * Each does what the pure-Python loop beside it does, to the same accept/refuse decision and
 * the same bytes; tests/protocol/test_speedups.py holds them to each other on hypothesis-made
 * and mutated batches. Python falls back to its own loops when this module is
 * not built (no compiler) or TRIBUTARY_NO_SPEEDUPS is set.
 *
 * Every read is bounded: by the record's end once its length is known, by the chunk's end
 * before. Nothing here allocates per record except the decoded Record and its fields, and the
 * timestamp append_record_at returns.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

/* Set by configure(): the exception both loops raise for a record that does not decode. */
static PyObject *corrupt_error = NULL;
/* The member descriptors of Record's five slots, set by configure(). */
static PyObject *set_offset = NULL, *set_timestamp = NULL, *set_key = NULL, *set_value = NULL, *set_headers = NULL;
static PyObject *empty_tuple = NULL;

enum { VARINT_OK = 0, VARINT_SHORT = 1, VARINT_LONG = 2 };

/* The zig-zag varint at *pos, read no further than limit. VARINT_SHORT when it runs off the
 * limit, VARINT_LONG when it takes more than 10 bytes or its value more than 64 bits (the
 * Python reader refuses the same). */
static inline int read_varint(const uint8_t *d, Py_ssize_t limit, Py_ssize_t *pos, int64_t *out)
{
    Py_ssize_t p = *pos;
    uint64_t value = 0;
    unsigned shift = 0;
    for (;;) {
        if (p >= limit)
            return VARINT_SHORT;
        uint8_t byte = d[p++];
        if (shift == 63 && byte > 1)
            return VARINT_LONG; /* the tenth byte may carry only bit 63 */
        value |= (uint64_t)(byte & 0x7F) << shift;
        if (byte < 0x80)
            break;
        shift += 7;
        if (shift > 63)
            return VARINT_LONG;
    }
    *pos = p;
    *out = (int64_t)(value >> 1) ^ -(int64_t)(value & 1);
    return VARINT_OK;
}

static PyObject *corrupt(const char *format, ...)
{
    va_list args;
    va_start(args, format);
    PyObject *message = PyUnicode_FromFormatV(format, args);
    va_end(args);
    if (message != NULL) {
        /* (ValueError until configure() names the error: header.py uses carry_crc unconfigured.) */
        PyErr_SetObject(corrupt_error != NULL ? corrupt_error : PyExc_ValueError, message);
        Py_DECREF(message);
    }
    return NULL;
}

static int varint_error(int status, long long index, const char *what)
{
    if (status == VARINT_LONG)
        corrupt("record %lld has a %s varint longer than 10 bytes or beyond 64 bits", index, what);
    else
        corrupt("record %lld runs past the batch", index);
    return -1;
}

/* Checks record `index`'s headers in d[*pos:end]; -1 with the error set if they do not. */
static int check_headers(const uint8_t *d, Py_ssize_t end, Py_ssize_t *pos, long long index)
{
    int64_t count, size;
    int status = read_varint(d, end, pos, &count);
    if (status)
        return varint_error(status, index, "header count");
    /* Each header takes two bytes at least: a hostile count fails here, not after a long loop. */
    if (count < 0 || count > (end - *pos) / 2) {
        corrupt("record %lld declares %lld headers", index, (long long)count);
        return -1;
    }
    for (int64_t i = 0; i < count; i++) {
        if ((status = read_varint(d, end, pos, &size)))
            return varint_error(status, index, "header key length");
        if (size < 0 || size > end - *pos) {
            corrupt("record %lld has a header key of length %lld", index, (long long)size);
            return -1;
        }
        PyObject *key = PyUnicode_DecodeUTF8((const char *)d + *pos, (Py_ssize_t)size, "strict");
        if (key == NULL) {
            PyErr_Clear();
            corrupt("record %lld has a header key that is not UTF-8", index);
            return -1;
        }
        Py_DECREF(key);
        *pos += (Py_ssize_t)size;
        if ((status = read_varint(d, end, pos, &size)))
            return varint_error(status, index, "header value length");
        if (size < -1) {
            corrupt("record %lld has a header value of length %lld", index, (long long)size);
            return -1;
        }
        if (size > end - *pos) {
            corrupt("record %lld runs past the batch", index);
            return -1;
        }
        if (size > 0)
            *pos += (Py_ssize_t)size;
    }
    return 0;
}

/* walk(data, pos, end, index, count, latest) -> (pos, index, keyless)
 *
 * Checks every complete record in data[pos:end], records index, index + 1, ... of a batch of
 * `count` whose timestamp deltas may not exceed `latest`; returns where the first incomplete
 * record starts (end when none is), the index after the last complete one and how many of
 * the complete ones have a null key. */
static PyObject *walk(PyObject *self, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t pos, end;
    long long index, count, latest;
    if (!PyArg_ParseTuple(args, "y*nnLLL:walk", &view, &pos, &end, &index, &count, &latest))
        return NULL;
    const uint8_t *d = view.buf;
    long long keyless = 0;
    PyObject *result = NULL;
    if (pos < 0 || end > view.len || pos > end) {
        PyErr_SetString(PyExc_ValueError, "walk: bounds outside the buffer");
        goto done;
    }
    while (pos < end) {
        Py_ssize_t body = pos;
        int64_t length, value;
        int status = read_varint(d, end, &body, &length);
        if (status == VARINT_SHORT)
            break; /* the length itself is cut off: wait for more */
        if (status) {
            varint_error(status, index, "length");
            goto done;
        }
        if (length <= 0) {
            corrupt("record %lld has length %lld", index, (long long)length);
            goto done;
        }
        if (length > end - body)
            break; /* the record is cut off: wait for more */
        Py_ssize_t record_end = body + (Py_ssize_t)length;
        if (index >= count) {
            corrupt("the batch holds more records than the %lld its header declares", count);
            goto done;
        }
        Py_ssize_t p = body + 1; /* attributes: none are defined for records */
        int64_t timestamp_delta, offset_delta;
        if ((status = read_varint(d, record_end, &p, &timestamp_delta))) {
            varint_error(status, index, "timestamp delta");
            goto done;
        }
        if ((status = read_varint(d, record_end, &p, &offset_delta))) {
            varint_error(status, index, "offset delta");
            goto done;
        }
        if (offset_delta != index) {
            corrupt("record %lld has offset delta %lld", index, (long long)offset_delta);
            goto done;
        }
        if (timestamp_delta > latest) {
            corrupt("record %lld has a timestamp after the batch's maxTimestamp", index);
            goto done;
        }
        for (int field = 0; field < 2; field++) {
            if ((status = read_varint(d, record_end, &p, &value))) {
                varint_error(status, index, field ? "value length" : "key length");
                goto done;
            }
            if (value < -1) {
                corrupt("record %lld has a %s of length %lld", index, field ? "value" : "key", (long long)value);
                goto done;
            }
            if (value == -1 && field == 0)
                keyless++;
            if (value > record_end - p) {
                corrupt("record %lld runs past the batch", index);
                goto done;
            }
            if (value > 0)
                p += (Py_ssize_t)value;
        }
        if (p < record_end && d[p] == 0)
            p++;
        else if (check_headers(d, record_end, &p, index) < 0)
            goto done;
        if (p != record_end) {
            corrupt("record %lld is %lld bytes long but its fields take %lld", index, (long long)length,
                    (long long)(p - body));
            goto done;
        }
        index++;
        pos = record_end;
    }
    result = Py_BuildValue("nLL", pos, index, keyless);
done:
    PyBuffer_Release(&view);
    return result;
}

/* a + b as a Python int: in C when it fits 64 bits, else as Python adds them (hostile deltas). */
static PyObject *long_sum(long long a, long long b)
{
    long long sum;
    if (!__builtin_add_overflow(a, b, &sum))
        return PyLong_FromLongLong(sum);
    PyObject *left = PyLong_FromLongLong(a), *right = PyLong_FromLongLong(b), *out = NULL;
    if (left != NULL && right != NULL)
        out = PyNumber_Add(left, right);
    Py_XDECREF(left);
    Py_XDECREF(right);
    return out;
}

static int set_slot(PyObject *descriptor, PyObject *record, PyObject *value)
{
    /* A member descriptor's __set__: what the Python decoder calls, without the call. */
    int status = Py_TYPE(descriptor)->tp_descr_set(descriptor, record, value);
    Py_DECREF(value);
    return status;
}

/* The bytes d[pos:pos+size], None for size -1; NULL with the error set otherwise. */
static PyObject *nullable_bytes(const uint8_t *d, Py_ssize_t limit, Py_ssize_t *pos, int64_t size,
                                const char *what)
{
    if (size == -1)
        Py_RETURN_NONE;
    if (size < 0)
        return corrupt("record %s has length %lld", what, (long long)size);
    if (size > limit - *pos)
        return corrupt("record batch ends inside a record");
    PyObject *out = PyBytes_FromStringAndSize((const char *)d + *pos, (Py_ssize_t)size);
    *pos += (Py_ssize_t)size;
    return out;
}

/* The decoder's error for a varint that did not read. */
static PyObject *bad_varint(int status)
{
    if (status == VARINT_LONG)
        return corrupt("record holds a varint longer than 10 bytes or beyond 64 bits");
    return corrupt("record batch ends inside a record");
}

static PyObject *decode_headers(const uint8_t *d, Py_ssize_t end, Py_ssize_t *pos)
{
    int64_t count, size;
    int status = read_varint(d, end, pos, &count);
    if (status)
        return bad_varint(status);
    if (count < 0 || count > (end - *pos) / 2)
        return corrupt("record declares %lld headers", (long long)count);
    PyObject *headers = PyTuple_New((Py_ssize_t)count);
    if (headers == NULL)
        return NULL;
    for (int64_t i = 0; i < count; i++) {
        if ((status = read_varint(d, end, pos, &size))) {
            bad_varint(status);
            goto fail;
        }
        if (size < 0) {
            corrupt("record header key has length %lld", (long long)size);
            goto fail;
        }
        if (size > end - *pos)
            goto short_read;
        PyObject *name = PyUnicode_DecodeUTF8((const char *)d + *pos, (Py_ssize_t)size, "strict");
        if (name == NULL) {
            PyErr_Clear();
            corrupt("record header key is not UTF-8");
            goto fail;
        }
        *pos += (Py_ssize_t)size;
        PyObject *value = NULL;
        if ((status = read_varint(d, end, pos, &size)))
            bad_varint(status);
        else
            value = nullable_bytes(d, end, pos, size, "header value");
        if (value == NULL) {
            Py_DECREF(name);
            goto fail;
        }
        PyObject *pair = PyTuple_Pack(2, name, value);
        Py_DECREF(name);
        Py_DECREF(value);
        if (pair == NULL)
            goto fail;
        PyTuple_SET_ITEM(headers, (Py_ssize_t)i, pair);
    }
    return headers;
short_read:
    corrupt("record batch ends inside a record");
fail:
    Py_DECREF(headers);
    return NULL;
}

/* decode_into(out, data, pos, end, count, base_offset, base_timestamp, append_time, record_type)
 *
 * Appends the `count` records in data[pos:end] to `out` as instances of `record_type` (Record
 * or a subclass without fields of its own); on an error, `out` holds those before the bad one.
 * `append_time` is None or the timestamp every record takes (log-append-time batches). */
static PyObject *decode_into(PyObject *self, PyObject *args)
{
    PyObject *out, *append_time, *record_type;
    Py_buffer view;
    Py_ssize_t pos, end;
    long long count, base_offset, base_timestamp;
    if (!PyArg_ParseTuple(args, "O!y*nnLLLOO!:decode_into", &PyList_Type, &out, &view, &pos, &end, &count,
                          &base_offset, &base_timestamp, &append_time, &PyType_Type, &record_type))
        return NULL;
    const uint8_t *d = view.buf;
    PyTypeObject *type = (PyTypeObject *)record_type;
    PyObject *result = NULL;
    if (corrupt_error == NULL || set_offset == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "decode_into: configure() was not called");
        goto done;
    }
    if (pos < 0 || end > view.len || pos > end) {
        PyErr_SetString(PyExc_ValueError, "decode_into: bounds outside the buffer");
        goto done;
    }
    for (long long i = 0; i < count; i++) {
        int64_t length, timestamp_delta, offset_delta, size;
        int status = read_varint(d, end, &pos, &length);
        if (status) {
            bad_varint(status);
            goto done;
        }
        if (length <= 0 || length > end - pos) {
            corrupt("record of %lld bytes does not fit its batch", (long long)length);
            goto done;
        }
        Py_ssize_t record_end = pos + (Py_ssize_t)length;
        pos += 1; /* record attributes: none are defined */
        if ((status = read_varint(d, record_end, &pos, &timestamp_delta)) ||
            (status = read_varint(d, record_end, &pos, &offset_delta)) ||
            (status = read_varint(d, record_end, &pos, &size))) {
            bad_varint(status);
            goto done;
        }
        PyObject *key = nullable_bytes(d, record_end, &pos, size, "key");
        if (key == NULL)
            goto done;
        PyObject *value = NULL;
        if ((status = read_varint(d, record_end, &pos, &size))) {
            bad_varint(status);
        } else {
            value = nullable_bytes(d, record_end, &pos, size, "value");
        }
        if (value == NULL) {
            Py_DECREF(key);
            goto done;
        }
        PyObject *headers;
        if (pos < record_end && d[pos] == 0) {
            headers = Py_NewRef(empty_tuple);
            pos++;
        } else if ((headers = decode_headers(d, record_end, &pos)) == NULL) {
            Py_DECREF(key);
            Py_DECREF(value);
            goto done;
        }
        if (pos != record_end) {
            Py_DECREF(key);
            Py_DECREF(value);
            Py_DECREF(headers);
            corrupt("record declares %lld bytes but its fields take %lld", (long long)length,
                    (long long)(pos - record_end + length));
            goto done;
        }
        PyObject *record = type->tp_alloc(type, 0);
        PyObject *timestamp = append_time == Py_None ? long_sum(base_timestamp, timestamp_delta)
                                                     : Py_NewRef(append_time);
        PyObject *offset = long_sum(base_offset, offset_delta);
        if (record == NULL || timestamp == NULL || offset == NULL) {
            Py_XDECREF(record);
            Py_XDECREF(timestamp);
            Py_XDECREF(offset);
            Py_DECREF(key);
            Py_DECREF(value);
            Py_DECREF(headers);
            goto done;
        }
        status = set_slot(set_offset, record, offset);
        status |= set_slot(set_timestamp, record, timestamp);
        status |= set_slot(set_key, record, key);
        status |= set_slot(set_value, record, value);
        status |= set_slot(set_headers, record, headers);
        if (status < 0 || PyList_Append(out, record) < 0) {
            Py_DECREF(record);
            goto done;
        }
        Py_DECREF(record);
    }
    if (pos != end) {
        corrupt("%lld bytes follow the last of the batch's %lld records", (long long)(end - pos), count);
        goto done;
    }
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&view);
    return result;
}

/* The zig-zag varint of v: its size, and its bytes at out. */
static inline Py_ssize_t varint_size(int64_t v)
{
    uint64_t z = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
    Py_ssize_t size = 1;
    while (z >= 0x80) {
        z >>= 7;
        size++;
    }
    return size;
}

static inline uint8_t *put_varint(uint8_t *out, int64_t v)
{
    uint64_t z = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
    while (z >= 0x80) {
        *out++ = (uint8_t)(z | 0x80);
        z >>= 7;
    }
    *out++ = (uint8_t)z;
    return out;
}

/* A key or value: its bytes, or none for None (length -1). 0 on success. */
static int take_payload(PyObject *payload, Py_buffer *view)
{
    if (payload == Py_None) {
        view->obj = NULL;
        view->len = -1;
        return 0;
    }
    return PyObject_GetBuffer(payload, view, PyBUF_SIMPLE);
}

/* One record (no headers) appended to `records`: 0, or -1 with an exception set and `records`
 * as it was. Shared by append_record and append_record_at. */
static int write_record(PyObject *records, PyObject *key, PyObject *value, long long timestamp_delta,
                        long long offset_delta)
{
    Py_buffer k, v;
    if (take_payload(key, &k) < 0)
        return -1;
    if (take_payload(value, &v) < 0) {
        if (k.obj != NULL)
            PyBuffer_Release(&k);
        return -1;
    }
    Py_ssize_t body = 1 + varint_size(timestamp_delta) + varint_size(offset_delta) + 1; /* + the header count */
    body += k.len < 0 ? 1 : varint_size(k.len) + k.len;
    body += v.len < 0 ? 1 : varint_size(v.len) + v.len;
    Py_ssize_t old = PyByteArray_GET_SIZE(records);
    int status = PyByteArray_Resize(records, old + varint_size(body) + body);
    if (status == 0) {
        uint8_t *out = (uint8_t *)PyByteArray_AS_STRING(records) + old;
        out = put_varint(out, body);
        *out++ = 0; /* attributes */
        out = put_varint(out, timestamp_delta);
        out = put_varint(out, offset_delta);
        out = put_varint(out, k.len);
        if (k.len > 0) {
            memcpy(out, k.buf, (size_t)k.len);
            out += k.len;
        }
        out = put_varint(out, v.len);
        if (v.len > 0) {
            memcpy(out, v.buf, (size_t)v.len);
            out += v.len;
        }
        *out = 0; /* no headers */
    }
    if (k.obj != NULL)
        PyBuffer_Release(&k);
    if (v.obj != NULL)
        PyBuffer_Release(&v);
    return status;
}

/* append_record(records, key, value, timestamp_delta, offset_delta)
 *
 * Encodes a record without headers at the end of the bytearray `records` (builder.py): length,
 * attributes, the two deltas, key and value with their lengths (-1 for None), no headers. Keys
 * and values are any contiguous buffer; anything else raises TypeError, and `records` is
 * left as it was. */
static PyObject *append_record(PyObject *self, PyObject *args)
{
    PyObject *records, *key, *value;
    long long timestamp_delta, offset_delta;
    if (!PyArg_ParseTuple(args, "O!OOLL:append_record", &PyByteArray_Type, &records, &key, &value, &timestamp_delta,
                          &offset_delta))
        return NULL;
    if (write_record(records, key, value, timestamp_delta, offset_delta) < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* append_record_at(records, key, value, timestamp, base_timestamp, offset_delta) -> timestamp
 *
 * What a producer appends per record (client/producer/accumulator.py), in one call: the record
 * as append_record writes it, its timestamp delta taken here, from base_timestamp (0 for the
 * first record of a batch, offset_delta 0). `timestamp` is ms since the epoch, or None for now
 * (CLOCK_REALTIME, as time.time_ns() // 1_000_000); returns the timestamp used. Arguments by
 * position (METH_FASTCALL: no tuple per call). TypeError as append_record; OverflowError for a
 * timestamp or delta beyond 64 bits; either way `records` is left as it was. */
static PyObject *append_record_at(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 6) {
        PyErr_Format(PyExc_TypeError, "append_record_at expected 6 arguments, got %zd", nargs);
        return NULL;
    }
    PyObject *records = args[0], *key = args[1], *value = args[2];
    if (!PyByteArray_Check(records)) {
        PyErr_Format(PyExc_TypeError, "append_record_at: records must be a bytearray, not %.100s",
                     Py_TYPE(records)->tp_name);
        return NULL;
    }
    long long timestamp;
    if (args[3] == Py_None) {
        struct timespec now;
        if (clock_gettime(CLOCK_REALTIME, &now) != 0) {
            PyErr_SetFromErrno(PyExc_OSError);
            return NULL;
        }
        timestamp = (long long)now.tv_sec * 1000 + now.tv_nsec / 1000000;
    } else {
        timestamp = PyLong_AsLongLong(args[3]);
        if (timestamp == -1 && PyErr_Occurred())
            return NULL;
    }
    long long base = PyLong_AsLongLong(args[4]);
    if (base == -1 && PyErr_Occurred())
        return NULL;
    long long offset_delta = PyLong_AsLongLong(args[5]);
    if (offset_delta == -1 && PyErr_Occurred())
        return NULL;
    long long timestamp_delta = 0;
    if (offset_delta != 0 && __builtin_sub_overflow(timestamp, base, &timestamp_delta)) {
        PyErr_SetString(PyExc_OverflowError, "append_record_at: the timestamp delta does not fit in 64 bits");
        return NULL;
    }
    Py_ssize_t old = PyByteArray_GET_SIZE(records);
    if (write_record(records, key, value, timestamp_delta, offset_delta) < 0)
        return NULL;
    PyObject *result = args[3] == Py_None ? PyLong_FromLongLong(timestamp) : Py_NewRef(args[3]);
    if (result == NULL)
        PyByteArray_Resize(records, old); /* shrinking does not fail */
    return result;
}

/* --- A CRC-32C carried over a change at a batch's start ------------------------------------------
 * The mirror stamps its producer fields into every batch it copies and a broker stamps
 * LogAppendTime: both change a few bytes at the start of what the CRC covers. CRC-32C is linear
 * over GF(2): the CRC after the change is the CRC before it plus the CRC register of the change's
 * difference alone, carried through the n bytes that follow it as through n zero bytes, which
 * multiplies it by x^(8n) modulo the Castagnoli polynomial. That takes well under a microsecond
 * whatever n is, where a CRC computed again reads the whole batch; and a batch that arrived
 * damaged keeps a CRC that says so (header.carry_crc; its Python fallback gets the same CRC).
 *
 * Polynomials are held bit-reflected, as the CRC register is: bit 31 is x^0, bit 0 is x^31. */
#define CASTAGNOLI_REFLECTED 0x82F63B78u

/* a * b modulo the polynomial: b times each power of x present in a, summed. */
static uint32_t gf2_multiply(uint32_t a, uint32_t b)
{
    uint32_t product = 0;
    for (uint32_t bit = 0x80000000u; bit != 0 && a != 0; bit >>= 1) {
        if (a & bit) {
            product ^= b;
            a ^= bit;
        }
        b = (b & 1) ? (b >> 1) ^ CASTAGNOLI_REFLECTED : b >> 1; /* b * x */
    }
    return product;
}

/* x^(8 * 2^k) modulo the polynomial for each k: a run of zero bytes of any length is a product
 * of these, one per bit of the length; and the CRC register's step per byte. Filled when the
 * module is imported. */
static uint32_t zero_run_powers[64];
static uint32_t byte_step[256];

static void fill_crc_tables(void)
{
    uint32_t power = 0x80000000u >> 8; /* x^8: one zero byte */
    for (int k = 0; k < 64; k++) {
        zero_run_powers[k] = power;
        power = gf2_multiply(power, power);
    }
    for (uint32_t byte = 0; byte < 256; byte++) {
        uint32_t reg = byte;
        for (int bit = 0; bit < 8; bit++)
            reg = (reg & 1) ? (reg >> 1) ^ CASTAGNOLI_REFLECTED : reg >> 1;
        byte_step[byte] = reg;
    }
}

static uint32_t shift_through_zeros(uint32_t value, uint64_t nbytes)
{
    for (int k = 0; nbytes != 0; k++, nbytes >>= 1)
        if (nbytes & 1)
            value = gf2_multiply(value, zero_run_powers[k]);
    return value;
}

static inline uint32_t read_be32(const uint8_t *d)
{
    return ((uint32_t)d[0] << 24) | ((uint32_t)d[1] << 16) | ((uint32_t)d[2] << 8) | d[3];
}

/* The batch layout header.py derives from its struct: batchLength, crc, attributes. */
enum { LENGTH_AT = 8, LOG_OVERHEAD = 12, CRC_AT = 17, CRC_START = 21 };

/* carry_crc(buf, pos, start): the first len(start) bytes the CRC of the batch at pos covers
 * replaced by start, the stored CRC carried over the change and returned (header.carry_crc). */
static PyObject *carry_crc(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "carry_crc takes exactly 3 arguments (buf, pos, start)");
        return NULL;
    }
    Py_ssize_t pos = PyLong_AsSsize_t(args[1]);
    if (pos == -1 && PyErr_Occurred())
        return NULL;
    Py_buffer buf, start;
    if (PyObject_GetBuffer(args[0], &buf, PyBUF_WRITABLE) < 0)
        return NULL;
    if (PyObject_GetBuffer(args[2], &start, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&buf);
        return NULL;
    }
    PyObject *result = NULL;
    uint8_t *d = buf.buf;
    const uint8_t *s = start.buf;
    Py_ssize_t at = pos + CRC_START, size = start.len;
    if (pos < 0 || at > buf.len || buf.len - at < size) {
        corrupt("record batch at offset %zd is truncated: its header is not all there", pos);
        goto done;
    }
    int32_t length = (int32_t)read_be32(d + pos + LENGTH_AT);
    Py_ssize_t end = pos + LOG_OVERHEAD + (Py_ssize_t)length;
    if (length < 0 || end > buf.len || end < at + size) {
        corrupt("record batch at offset %zd is truncated or too short to patch", pos);
        goto done;
    }
    /* The CRC register of the difference alone (no initial value, no final xor). */
    uint32_t reg = 0;
    for (Py_ssize_t i = 0; i < size; i++) {
        reg = byte_step[(reg ^ d[at + i] ^ s[i]) & 0xFF] ^ (reg >> 8);
        d[at + i] = s[i];
    }
    uint32_t crc = read_be32(d + pos + CRC_AT) ^ shift_through_zeros(reg, (uint64_t)(end - at - size));
    d[pos + CRC_AT] = (uint8_t)(crc >> 24);
    d[pos + CRC_AT + 1] = (uint8_t)(crc >> 16);
    d[pos + CRC_AT + 2] = (uint8_t)(crc >> 8);
    d[pos + CRC_AT + 3] = (uint8_t)crc;
    result = PyLong_FromUnsignedLong(crc);
done:
    PyBuffer_Release(&start);
    PyBuffer_Release(&buf);
    return result;
}

/* configure(CorruptRecordError, Record): what the loops raise and build. */
static PyObject *configure(PyObject *self, PyObject *args)
{
    PyObject *error, *record_class;
    if (!PyArg_ParseTuple(args, "O!O!:configure", &PyType_Type, &error, &PyType_Type, &record_class))
        return NULL;
    if (!PyType_IsSubtype((PyTypeObject *)error, (PyTypeObject *)PyExc_Exception)) {
        PyErr_SetString(PyExc_TypeError, "configure: the error must be an exception class");
        return NULL;
    }
    /* The descriptors are looked up on Record's own dict, as the Python decoder does. */
    PyObject *dict = PyObject_GetAttrString(record_class, "__dict__");
    if (dict == NULL)
        return NULL;
    int status = 0;
    const char *names[] = {"offset", "timestamp", "key", "value", "headers"};
    PyObject **slots[] = {&set_offset, &set_timestamp, &set_key, &set_value, &set_headers};
    for (int i = 0; i < 5 && status == 0; i++) {
        PyObject *descriptor = PyMapping_GetItemString(dict, names[i]);
        if (descriptor == NULL || Py_TYPE(descriptor)->tp_descr_set == NULL) {
            Py_XDECREF(descriptor);
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_TypeError, "configure: %s is not a slot of the record class", names[i]);
            status = -1;
            break;
        }
        Py_XSETREF(*slots[i], descriptor);
    }
    Py_DECREF(dict);
    if (status < 0)
        return NULL;
    Py_XSETREF(corrupt_error, Py_NewRef(error));
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"walk", walk, METH_VARARGS, "Checks the complete records of a chunk of a batch (validate.py)."},
    {"decode_into", decode_into, METH_VARARGS, "Decodes a batch's records into a list (codec.py)."},
    {"append_record", append_record, METH_VARARGS, "Encodes a record without headers (builder.py)."},
    {"append_record_at", (PyCFunction)(void (*)(void))append_record_at, METH_FASTCALL,
     "Encodes a record without headers, its timestamp now or given (the producer's accumulator)."},
    {"carry_crc", (PyCFunction)(void (*)(void))carry_crc, METH_FASTCALL,
     "A batch's start patched, its CRC carried over the change (header.carry_crc)."},
    {"configure", configure, METH_VARARGS, "Sets the error raised and the record class built."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_speedups", "Compiled per-record loops of the v2 record format.", -1, methods,
};

PyMODINIT_FUNC PyInit__speedups(void)
{
    fill_crc_tables();
    empty_tuple = PyTuple_New(0);
    if (empty_tuple == NULL)
        return NULL;
    return PyModule_Create(&module);
}
