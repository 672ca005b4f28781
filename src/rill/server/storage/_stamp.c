/*
 * _stamp: the C twins of the per-record loops of rill's storage: the write hot loop
 * (rill.server.storage.records.stamp_batch_python), the record checks of every read and
 * recovery (rill.server.storage.record_checks: verify, scan and find_record) and the record
 * conversion between formats (rill.server.storage.record_conversion). Two units make the
 * module: this one, which defines it, and _convert.c (the conversion loops); _stamp.h is what
 * they share.
 *
 * Owns: ``stamp`` (validate a SEND message region and build its stored records and index
 * entries), ``verify`` / ``scan`` / ``find_record`` (check stored records: layout, checksum,
 * header map, against their index entries or walking them), the module's table, which also
 * names _convert.c's ``kafka_to_iggy`` (the records of one RecordBatch v2 records block ->
 * stored Iggy records) and ``iggy_to_kafka`` (stored Iggy records -> a RecordBatch v2 records
 * block; both only where the compiler has 128-bit integers), and ``crc32`` (the IEEE / zlib CRC-32: carry-less multiply folding where the CPU
 * has it, 512-bit lanes with AVX-512 VPCLMULQDQ, 128-bit with PCLMULQDQ; slicing-by-8
 * otherwise). Layouts and rules are the ones of ``records.py``, ``record_checks.py`` and
 * ``record_conversion.py``; those modules are the reference, this one must give the same
 * bytes, accept exactly the same regions and records, and word every rejection with the same
 * text.
 *
 * stamp(region, base_offset, timestamp_us, base_position, segment_start, uuid7_block)
 *     -> (records: bytes, index_entries: bytearray, count: int)   the batch is valid
 *     -> str                                   it is malformed: the reference's DecodeError text
 *     -> int status                            a batch limit, or arguments it does not handle
 *
 * A rejection costs no more than an acceptance: the first pass stops at the first fault, the
 * batch limits are checked as soon as a running total passes them, and the message is worded
 * here (only arguments no client can send, STATUS_UNSUPPORTED, send the caller to the
 * reference).
 *
 * Invariants:
 *   * The GIL is released while the loops run (for data of GIL_RELEASE_MIN_BYTES or more):
 *     the input buffer is pinned (a buffer export: a bytearray cannot be resized under it) and
 *     every length is read once, in the first pass, and bounds-checked there; the second pass
 *     copies with those lengths only, so even a buffer mutated concurrently (a caller bug) can
 *     give garbage but never an out-of-bounds access. Checksums are computed over the copied
 *     bytes, so a record's checksum always matches the record. Texts and Python objects are
 *     made after the GIL is taken back.
 *   * Nothing is allocated for the output before the whole region is validated.
 *   * Ids of all-zero are replaced by UUIDv7s from the ``uuid7_block(count, unix_ms)`` callable
 *     (the reference's generator), called once per batch with the exact count, GIL held.
 */

#include "_stamp.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(RILL_PORTABLE_CRC)
#define RILL_HAVE_PCLMUL 1
#include <immintrin.h>
#else
#define RILL_HAVE_PCLMUL 0
#endif
/* compilers that know the AVX-512 VPCLMULQDQ intrinsics (GCC 8, Clang 6 and later) */
#if RILL_HAVE_PCLMUL && ((defined(__clang__) && __clang_major__ >= 6) ||                     \
                         (!defined(__clang__) && __GNUC__ >= 8))
#define RILL_HAVE_VPCLMUL 1
#else
#define RILL_HAVE_VPCLMUL 0
#endif

/* ------------------------------------------------------------------ CRC-32 (IEEE, reflected) */

static uint32_t crc_table[8][256]; /* slicing-by-8 tables, filled at module init */
static int have_pclmul = 0;  /* 128-bit carry-less multiply (SSE4.1 + PCLMULQDQ) */
static int have_vpclmul = 0; /* 512-bit carry-less multiply (AVX-512F + VPCLMULQDQ) */

static void crc_init_tables(void)
{
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[0][n] = c;
    }
    for (uint32_t n = 0; n < 256; n++)
        for (int k = 1; k < 8; k++)
            crc_table[k][n] = (crc_table[k - 1][n] >> 8) ^ crc_table[0][crc_table[k - 1][n] & 0xFF];
}

/* ``state`` is the inverted running CRC (zlib's internal form). */
static uint32_t crc_slicing_by_8(uint32_t state, const uint8_t *buf, size_t len)
{
    while (len >= 8) {
        uint32_t one = load_le32(buf) ^ state;
        uint32_t two = load_le32(buf + 4);
        state = crc_table[7][one & 0xFF] ^ crc_table[6][(one >> 8) & 0xFF] ^
                crc_table[5][(one >> 16) & 0xFF] ^ crc_table[4][one >> 24] ^
                crc_table[3][two & 0xFF] ^ crc_table[2][(two >> 8) & 0xFF] ^
                crc_table[1][(two >> 16) & 0xFF] ^ crc_table[0][two >> 24];
        buf += 8;
        len -= 8;
    }
    while (len--)
        state = (state >> 8) ^ crc_table[0][(state ^ *buf++) & 0xFF];
    return state;
}

#if RILL_HAVE_PCLMUL
/*
 * Carry-less multiply folding (Intel, "Fast CRC Computation for Generic Polynomials Using
 * PCLMULQDQ Instruction", 2009) with the bit-reflected constants of the IEEE polynomial, the
 * scheme zlib-ng and Chromium's zlib use. The constant pair that folds a 128-bit lane forward
 * by D bits is (x^(D+32) mod P, x^(D-32) mod P), bit-reflected and shifted left by one: D = 512
 * for four lanes, 128 for one, 2048 for the four 512-bit lanes of the AVX-512 loop.
 * ``state`` is the inverted running CRC, and so is the result.
 */
#define FOLD_512_LOW 0x0154442bd4LL
#define FOLD_512_HIGH 0x01c6e41596LL
#define FOLD_2048_LOW 0x011542778aLL
#define FOLD_2048_HIGH 0x01322d1430LL

/* Four lanes x1..x4 (16 consecutive bytes each, x1 first) hold the folded state; fold the
 * rest of ``buf`` (a multiple of 16 bytes) into them and reduce to 32 bits. */
__attribute__((target("pclmul,sse4.1"))) static uint32_t
crc_fold_finish(__m128i x1, __m128i x2, __m128i x3, __m128i x4, const uint8_t *buf, size_t len)
{
    const __m128i k1k2 = _mm_set_epi64x(FOLD_512_HIGH, FOLD_512_LOW);
    const __m128i k3k4 = _mm_set_epi64x(0x00ccaa009eLL, 0x01751997d0LL);
    const __m128i k5k0 = _mm_set_epi64x(0, 0x0163cd6124LL);
    const __m128i poly = _mm_set_epi64x(0x01f7011641LL, 0x01db710641LL);
    const __m128i mask32 = _mm_setr_epi32(~0, 0, ~0, 0);
    __m128i x0, x5, x6, x7, x8, y5, y6, y7, y8;

    x0 = k1k2;
    while (len >= 64) { /* four lanes folded in parallel, 64 bytes a turn */
        x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
        x6 = _mm_clmulepi64_si128(x2, x0, 0x00);
        x7 = _mm_clmulepi64_si128(x3, x0, 0x00);
        x8 = _mm_clmulepi64_si128(x4, x0, 0x00);
        x1 = _mm_clmulepi64_si128(x1, x0, 0x11);
        x2 = _mm_clmulepi64_si128(x2, x0, 0x11);
        x3 = _mm_clmulepi64_si128(x3, x0, 0x11);
        x4 = _mm_clmulepi64_si128(x4, x0, 0x11);
        y5 = _mm_loadu_si128((const __m128i *)(buf + 0x00));
        y6 = _mm_loadu_si128((const __m128i *)(buf + 0x10));
        y7 = _mm_loadu_si128((const __m128i *)(buf + 0x20));
        y8 = _mm_loadu_si128((const __m128i *)(buf + 0x30));
        x1 = _mm_xor_si128(_mm_xor_si128(x1, x5), y5);
        x2 = _mm_xor_si128(_mm_xor_si128(x2, x6), y6);
        x3 = _mm_xor_si128(_mm_xor_si128(x3, x7), y7);
        x4 = _mm_xor_si128(_mm_xor_si128(x4, x8), y8);
        buf += 64;
        len -= 64;
    }

    /* fold the four lanes into one */
    x0 = k3k4;
    x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
    x1 = _mm_clmulepi64_si128(x1, x0, 0x11);
    x1 = _mm_xor_si128(_mm_xor_si128(x1, x2), x5);
    x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
    x1 = _mm_clmulepi64_si128(x1, x0, 0x11);
    x1 = _mm_xor_si128(_mm_xor_si128(x1, x3), x5);
    x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
    x1 = _mm_clmulepi64_si128(x1, x0, 0x11);
    x1 = _mm_xor_si128(_mm_xor_si128(x1, x4), x5);

    while (len >= 16) { /* then 16 bytes a turn */
        x2 = _mm_loadu_si128((const __m128i *)buf);
        x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
        x1 = _mm_clmulepi64_si128(x1, x0, 0x11);
        x1 = _mm_xor_si128(_mm_xor_si128(x1, x2), x5);
        buf += 16;
        len -= 16;
    }

    /* 128 bits to 64 */
    x2 = _mm_clmulepi64_si128(x1, x0, 0x10);
    x1 = _mm_srli_si128(x1, 8);
    x1 = _mm_xor_si128(x1, x2);
    x0 = k5k0;
    x2 = _mm_srli_si128(x1, 4);
    x1 = _mm_and_si128(x1, mask32);
    x1 = _mm_clmulepi64_si128(x1, x0, 0x00);
    x1 = _mm_xor_si128(x1, x2);

    /* Barrett reduction to 32 bits */
    x0 = poly;
    x2 = _mm_and_si128(x1, mask32);
    x2 = _mm_clmulepi64_si128(x2, x0, 0x10);
    x2 = _mm_and_si128(x2, mask32);
    x2 = _mm_clmulepi64_si128(x2, x0, 0x00);
    x1 = _mm_xor_si128(x1, x2);
    return (uint32_t)_mm_extract_epi32(x1, 1);
}

/* 128-bit lanes: ``len`` >= 64 and a multiple of 16. */
__attribute__((target("pclmul,sse4.1"))) static uint32_t
crc_fold_pclmul(uint32_t state, const uint8_t *buf, size_t len)
{
    __m128i x1 = _mm_loadu_si128((const __m128i *)(buf + 0x00));
    __m128i x2 = _mm_loadu_si128((const __m128i *)(buf + 0x10));
    __m128i x3 = _mm_loadu_si128((const __m128i *)(buf + 0x20));
    __m128i x4 = _mm_loadu_si128((const __m128i *)(buf + 0x30));
    x1 = _mm_xor_si128(x1, _mm_cvtsi32_si128((int)state));
    return crc_fold_finish(x1, x2, x3, x4, buf + 64, len - 64);
}

#if RILL_HAVE_VPCLMUL
/* 512-bit lanes (VPCLMULQDQ), 256 bytes a turn: ``len`` >= 256 and a multiple of 16. The four
 * accumulators are folded into one, whose four 128-bit lanes go on as x1..x4 above. */
__attribute__((target("avx512f,vpclmulqdq,pclmul,sse4.1"))) static uint32_t
crc_fold_vpclmul(uint32_t state, const uint8_t *buf, size_t len)
{
    const __m512i fold2048 = _mm512_set_epi64(FOLD_2048_HIGH, FOLD_2048_LOW, FOLD_2048_HIGH,
                                              FOLD_2048_LOW, FOLD_2048_HIGH, FOLD_2048_LOW,
                                              FOLD_2048_HIGH, FOLD_2048_LOW);
    const __m512i fold512 = _mm512_set_epi64(FOLD_512_HIGH, FOLD_512_LOW, FOLD_512_HIGH,
                                             FOLD_512_LOW, FOLD_512_HIGH, FOLD_512_LOW,
                                             FOLD_512_HIGH, FOLD_512_LOW);
    __m512i z0 = _mm512_loadu_si512((const void *)(buf + 0x00));
    __m512i z1 = _mm512_loadu_si512((const void *)(buf + 0x40));
    __m512i z2 = _mm512_loadu_si512((const void *)(buf + 0x80));
    __m512i z3 = _mm512_loadu_si512((const void *)(buf + 0xC0));
    z0 = _mm512_xor_si512(z0, _mm512_zextsi128_si512(_mm_cvtsi32_si128((int)state)));
    buf += 256;
    len -= 256;
#define FOLD_INTO(acc, k, data)                                                            \
    _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(acc, k, 0x00),                      \
                              _mm512_clmulepi64_epi128(acc, k, 0x11), data, 0x96)
    while (len >= 256) {
        z0 = FOLD_INTO(z0, fold2048, _mm512_loadu_si512((const void *)(buf + 0x00)));
        z1 = FOLD_INTO(z1, fold2048, _mm512_loadu_si512((const void *)(buf + 0x40)));
        z2 = FOLD_INTO(z2, fold2048, _mm512_loadu_si512((const void *)(buf + 0x80)));
        z3 = FOLD_INTO(z3, fold2048, _mm512_loadu_si512((const void *)(buf + 0xC0)));
        buf += 256;
        len -= 256;
    }
    z1 = FOLD_INTO(z0, fold512, z1);
    z2 = FOLD_INTO(z1, fold512, z2);
    z3 = FOLD_INTO(z2, fold512, z3);
#undef FOLD_INTO
    return crc_fold_finish(_mm512_extracti32x4_epi32(z3, 0), _mm512_extracti32x4_epi32(z3, 1),
                           _mm512_extracti32x4_epi32(z3, 2), _mm512_extracti32x4_epi32(z3, 3),
                           buf, len);
}
#endif /* RILL_HAVE_VPCLMUL */
#endif /* RILL_HAVE_PCLMUL */

/* zlib's crc32(crc, buf, len): ``crc`` is a previous result (0 to start). */
static uint32_t crc32_ieee(uint32_t crc, const uint8_t *buf, size_t len)
{
    uint32_t state = ~crc;
#if RILL_HAVE_PCLMUL
    if (have_pclmul && len >= 64) {
        size_t folded = len & ~(size_t)15;
#if RILL_HAVE_VPCLMUL
        if (have_vpclmul && folded >= 256)
            state = crc_fold_vpclmul(state, buf, folded);
        else
#endif
            state = crc_fold_pclmul(state, buf, folded);
        buf += folded;
        len -= folded;
    }
#endif
    return ~crc_slicing_by_8(state, buf, len);
}

/* ------------------------------------------------------------------ header maps */

/* Strict UTF-8 as Python's decoder takes it: no overlongs, surrogates or code points past
 * U+10FFFF (RFC 3629, table 3-7 of the Unicode standard). */
static int valid_utf8(const uint8_t *s, size_t n)
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

/* For the other unit of this module (_convert.c, ``_stamp.h``). */
uint32_t stamp_crc32(uint32_t crc, const uint8_t *buf, size_t len)
{
    return crc32_ieee(crc, buf, len);
}

int stamp_valid_utf8(const uint8_t *s, size_t n)
{
    return valid_utf8(s, n);
}

/* One key of a header map: where it is, and its place in the map (for the first repeat). */
typedef struct {
    const uint8_t *data;
    uint32_t length;
    size_t index;
} header_key;

typedef struct {
    header_key *keys;
    size_t count;
    size_t capacity;
} key_list;

/* What ``check_header_map`` found wrong: enough to word it as the reference does. */
enum {
    HEADER_OK = 0,
    HEADER_NEEDED,       /* "needed {needed} bytes at {at}, have {have}" */
    HEADER_KEY_LENGTH,   /* "header key length {value}" */
    HEADER_UTF8,         /* "invalid UTF-8: {reason}" (the key is at ``key``) */
    HEADER_KIND,         /* "header kind {value}" */
    HEADER_VALUE_LENGTH, /* "header value length {value}" */
    HEADER_DUPLICATE,    /* "duplicate header key {key!r}" */
    HEADER_LIMIT,        /* the running total of value bytes passed the limit */
    HEADER_NO_MEMORY,
};

typedef struct {
    int status;
    uint64_t needed, at, have; /* HEADER_NEEDED */
    uint64_t value;            /* the length or kind at fault */
    const uint8_t *key;        /* HEADER_UTF8, HEADER_DUPLICATE */
    uint32_t key_length;
} header_problem;

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

/* Walk a header map exactly as rill.protocol.headers.decode_header_map does (key 1..255 bytes
 * of UTF-8, kind 1..15, value 1..255 bytes, unique keys, nothing left over), adding each value
 * length to ``*total`` and stopping as soon as it passes ``limit``. Returns the status, with
 * the details in ``problem``; ``*total`` is updated only when the map is valid. */
static int check_header_map(const uint8_t *p, size_t n, key_list *list, uint64_t *total,
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
        if (!valid_utf8(key, key_length)) {
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
static PyObject *header_problem_text(const header_problem *problem)
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

/* ------------------------------------------------------------------ stamping: two passes */

typedef struct {
    uint64_t start;          /* first byte of the SEND message in the region */
    uint64_t stop;           /* one past its last byte */
    uint32_t payload_length; /* the payload is the last payload_length bytes */
    uint32_t zero_id;        /* 1 when the id is all zero bytes */
} message_t;

/* Why a region is malformed, to word it as the reference does (``malformed_text``). */
enum {
    MALFORMED_TRUNCATED = 1, /* "message {n}: truncated at byte {position} of {end}" */
    MALFORMED_HEADERS_OVERRUN,  /* "message {n}: headers overrun the region" */
    MALFORMED_PAYLOAD_LENGTH,   /* "message {n}: invalid payload_length {payload_length}" */
    MALFORMED_HEADER_MAP,       /* "message {n}: {header problem}" */
};

typedef struct {
    int kind;
    uint64_t message;  /* its number in the batch */
    uint64_t position; /* MALFORMED_TRUNCATED: where it starts */
    uint32_t payload_length;
    header_problem header;
} malformed_t;

typedef struct {
    /* inputs */
    const uint8_t *data;
    uint64_t end;
    uint64_t base_offset;
    uint64_t timestamp_us;
    uint64_t base_position;
    uint64_t segment_start;
    /* found by the first pass */
    message_t *messages;
    size_t count;
    size_t capacity;
    size_t zero_ids;
    uint64_t records_size;
    malformed_t malformed;
    /* filled by the second pass */
    uint8_t *records;
    uint8_t *index_entries;
    const uint8_t *uuids;
} batch_t;

static const uint8_t ZERO_ID[16] = {0};

/* Pass one: walk and validate the region, exactly as the reference loop does (same checks in
 * the same order, the batch limits as soon as a running total passes them), and note where
 * each message is. Returns 0 or a STATUS_* (``b->malformed`` says why for STATUS_MALFORMED),
 * or -1 when out of memory. */
static int scan_region(batch_t *b)
{
    const uint8_t *data = b->data;
    const uint64_t end = b->end;
    uint64_t position = 0, payload_total = 0, headers_total = 0;
    key_list keys = {NULL, 0, 0};
    malformed_t *why = &b->malformed;
    int status = 0;
    while (position < end) {
        why->message = b->count;
        if (end - position < SEND_PREFIX_SIZE) {
            why->kind = MALFORMED_TRUNCATED;
            why->position = position;
            status = STATUS_MALFORMED;
            break;
        }
        uint32_t headers_length = load_le32(data + position + 16);
        uint64_t payload_position = position + 24 + headers_length;
        if (headers_length) {
            if (payload_position - 4 > end) {
                why->kind = MALFORMED_HEADERS_OVERRUN;
                status = STATUS_MALFORMED;
                break;
            }
            int found = check_header_map(data + position + SEND_PREFIX_SIZE, headers_length,
                                         &keys, &headers_total, MAX_HEADERS_BYTES, &why->header);
            if (found == HEADER_NO_MEMORY) { status = -1; break; }
            if (found == HEADER_LIMIT) { status = STATUS_HEADERS_TOO_BIG; break; }
            if (found != HEADER_OK) {
                why->kind = MALFORMED_HEADER_MAP;
                status = STATUS_MALFORMED;
                break;
            }
        }
        if (payload_position > end) {
            why->kind = MALFORMED_TRUNCATED;
            why->position = position;
            status = STATUS_MALFORMED;
            break;
        }
        uint32_t payload_length = load_le32(data + payload_position - 4);
        uint64_t stop = payload_position + payload_length;
        if (payload_length == 0 || stop > end) {
            why->kind = MALFORMED_PAYLOAD_LENGTH;
            why->payload_length = payload_length;
            status = STATUS_MALFORMED;
            break;
        }
        payload_total += payload_length;
        if (payload_total > MAX_PAYLOAD_BYTES) { status = STATUS_PAYLOAD_TOO_BIG; break; }
        /* this message's offset past u64: the reference fails here (struct.error) */
        if (b->count && b->base_offset > UINT64_MAX - b->count) {
            status = STATUS_UNSUPPORTED;
            break;
        }
        if (b->count == b->capacity) {
            size_t capacity = b->capacity ? 2 * b->capacity : 256;
            message_t *grown = PyMem_RawRealloc(b->messages, capacity * sizeof *grown);
            if (grown == NULL) { status = -1; break; }
            b->messages = grown;
            b->capacity = capacity;
        }
        message_t *m = &b->messages[b->count++];
        m->start = position;
        m->stop = stop;
        m->payload_length = payload_length;
        m->zero_id = memcmp(data + position, ZERO_ID, 16) == 0;
        b->zero_ids += m->zero_id;
        position = stop;
    }
    PyMem_RawFree(keys.keys);
    if (status) return status;
    if (b->count == 0) return STATUS_NO_MESSAGES;
    b->records_size = end + (uint64_t)RECORD_GROWTH * b->count;
    if (b->base_position > MAX_POSITION + 1 ||
        b->records_size > MAX_POSITION + 1 - b->base_position)
        return STATUS_POSITION_OVERFLOW;
    /* relative offsets past u32: the reference's index columns raise OverflowError */
    if (b->base_offset < b->segment_start ||
        b->base_offset - b->segment_start + (b->count - 1) > 0xFFFFFFFFULL)
        return STATUS_UNSUPPORTED;
    return 0;
}

/* The reference's DecodeError detail for a malformed region (GIL held), or NULL with an error. */
static PyObject *malformed_text(const batch_t *b)
{
    const malformed_t *why = &b->malformed;
    unsigned long long message = why->message;
    switch (why->kind) {
    case MALFORMED_TRUNCATED:
        return PyUnicode_FromFormat("message %llu: truncated at byte %llu of %llu", message,
                                    (unsigned long long)why->position,
                                    (unsigned long long)b->end);
    case MALFORMED_HEADERS_OVERRUN:
        return PyUnicode_FromFormat("message %llu: headers overrun the region", message);
    case MALFORMED_PAYLOAD_LENGTH:
        return PyUnicode_FromFormat("message %llu: invalid payload_length %lu", message,
                                    (unsigned long)why->payload_length);
    default: {
        PyObject *detail = header_problem_text(&why->header);
        if (detail == NULL) return NULL;
        PyObject *text = PyUnicode_FromFormat("message %llu: %U", message, detail);
        Py_DECREF(detail);
        return text;
    }
    }
}

/* Pass two: stored records and index entries, from the lengths pass one checked. */
static void build_records(batch_t *b)
{
    const uint8_t *data = b->data;
    const uint8_t *uuid = b->uuids;
    uint8_t *out = b->records;
    uint8_t *entry = b->index_entries;
    uint32_t relative = (uint32_t)(b->base_offset - b->segment_start);
    uint64_t offset = b->base_offset;
    for (size_t i = 0; i < b->count; i++) {
        const message_t *m = &b->messages[i];
        size_t rest = (size_t)(m->stop - m->start) - 16;
        store_le64(out, offset);
        out[8] = STATE_AVAILABLE;
        store_le64(out + 9, b->timestamp_us);
        if (m->zero_id) {
            memcpy(out + RECORD_ID_AT, uuid, 16);
            uuid += 16;
        } else {
            memcpy(out + RECORD_ID_AT, data + m->start, 16);
        }
        memcpy(out + RECORD_REST_AT, data + m->start + 16, rest);
        uint8_t *payload = out + RECORD_REST_AT + rest - m->payload_length;
        store_le32(out + RECORD_CHECKSUM_AT, crc32_ieee(0, payload, m->payload_length));
        store_le32(entry, relative);
        store_le32(entry + 4, (uint32_t)(b->base_position + (uint64_t)(out - b->records)));
        store_le64(entry + 8, b->timestamp_us);
        out += RECORD_REST_AT + rest;
        entry += INDEX_ENTRY_SIZE;
        relative++;
        offset++;
    }
}

/* An argument as u64; on failure (negative, too big, not an int) clears the error and
 * returns -1, so that the reference runs and fails as it does. */
static int as_u64(PyObject *value, uint64_t *out)
{
    if (!PyLong_Check(value)) return -1;
    unsigned long long v = PyLong_AsUnsignedLongLong(value);
    if (v == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        return -1;
    }
    *out = (uint64_t)v;
    return 0;
}

static PyObject *stamp(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError,
                        "stamp(region, base_offset, timestamp_us, base_position, "
                        "segment_start, uuid7_block) takes 6 arguments");
        return NULL;
    }
    batch_t b;
    memset(&b, 0, sizeof b);
    if (as_u64(args[1], &b.base_offset) || as_u64(args[2], &b.timestamp_us) ||
        as_u64(args[3], &b.base_position) || as_u64(args[4], &b.segment_start))
        return PyLong_FromLong(STATUS_UNSUPPORTED);
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) { /* pins the buffer */
        PyErr_Clear();
        return PyLong_FromLong(STATUS_UNSUPPORTED);
    }
    b.data = view.buf;
    b.end = (uint64_t)view.len;
    int release = view.len >= GIL_RELEASE_MIN_BYTES;
    PyObject *records = NULL, *index_entries = NULL, *uuids = NULL, *result = NULL;
    int status;

    if (release) {
        Py_BEGIN_ALLOW_THREADS
        status = scan_region(&b);
        Py_END_ALLOW_THREADS
    } else {
        status = scan_region(&b);
    }
    if (status == -1) {
        PyErr_NoMemory();
        goto done;
    }
    if (status == STATUS_MALFORMED) { /* the reference's message, worded here */
        result = malformed_text(&b);
        goto done;
    }
    if (status) {
        result = PyLong_FromLong(status);
        goto done;
    }
    if (b.zero_ids) {
        uuids = PyObject_CallFunction(args[5], "nK", (Py_ssize_t)b.zero_ids,
                                      (unsigned long long)(b.timestamp_us / 1000));
        if (uuids == NULL) goto done;
        if (!PyBytes_Check(uuids) || PyBytes_GET_SIZE(uuids) != (Py_ssize_t)(16 * b.zero_ids)) {
            PyErr_SetString(PyExc_ValueError, "uuid7_block returned the wrong number of bytes");
            goto done;
        }
        b.uuids = (const uint8_t *)PyBytes_AS_STRING(uuids);
    }
    records = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)b.records_size);
    index_entries = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)(INDEX_ENTRY_SIZE * b.count));
    if (records == NULL || index_entries == NULL) goto done;
    b.records = (uint8_t *)PyBytes_AS_STRING(records);
    b.index_entries = (uint8_t *)PyByteArray_AS_STRING(index_entries);
    if (release) {
        Py_BEGIN_ALLOW_THREADS
        build_records(&b);
        Py_END_ALLOW_THREADS
    } else {
        build_records(&b);
    }
    result = Py_BuildValue("(OOn)", records, index_entries, (Py_ssize_t)b.count);

done:
    Py_XDECREF(records);
    Py_XDECREF(index_entries);
    Py_XDECREF(uuids);
    PyMem_RawFree(b.messages);
    PyBuffer_Release(&view);
    return result;
}

/* ------------------------------------------------------------------ stored records */


/* How bad a record check found a record (``kind``, the reference's FAULT_KINDS). */
enum {
    KIND_GOOD = 0,
    KIND_CONTENT = 1,   /* sound structure, where it should be; checksum or header map wrong */
    KIND_STRUCTURE = 2, /* the record is not where, or not what, the index or layout says */
    KIND_TIMESTAMP = 3, /* a valid record whose timestamp is out of order (scans only) */
};

/* What a record check found wrong; worded by ``fault_text`` exactly as the reference words it. */
enum {
    FAULT_NONE = 0,
    FAULT_INCOMPLETE,          /* found: bytes left */
    FAULT_OFFSET,              /* found: the offset field */
    FAULT_STATE,               /* found: the state */
    FAULT_HEADERS_OVERRUN,     /* found: headers_length */
    FAULT_PAYLOAD_LENGTH,      /* found: payload_length */
    FAULT_CHECKSUM,            /* found: crc32 of the payload, other: the stored checksum */
    FAULT_HEADER_MAP,          /* header: the problem */
    FAULT_TIMESTAMP_BACKWARDS, /* found: its timestamp, other: the previous record's */
    FAULT_TIMESTAMP_AHEAD,     /* found: its timestamp, other: the next record's */
    FAULT_INDEX_RELATIVE,      /* found: the entry's relative offset, other: the expected one */
    FAULT_INDEX_POSITION,      /* found: the entry's position, other: where the next begins */
    FAULT_INDEX_TIMESTAMP,     /* found: the record's timestamp, other: the entry's */
    FAULT_RECORD_END,          /* found: where its lengths end, other: where the index ends it */
    FAULT_POSITION_OVERFLOW,   /* the record starts past the u32 positions of an index */
    FAULT_NO_MEMORY,
};

static const int FAULT_KINDS[] = {
    [FAULT_NONE] = KIND_GOOD,
    [FAULT_INCOMPLETE] = KIND_STRUCTURE,
    [FAULT_OFFSET] = KIND_STRUCTURE,
    [FAULT_STATE] = KIND_STRUCTURE,
    [FAULT_HEADERS_OVERRUN] = KIND_STRUCTURE,
    [FAULT_PAYLOAD_LENGTH] = KIND_STRUCTURE,
    [FAULT_CHECKSUM] = KIND_CONTENT,
    [FAULT_HEADER_MAP] = KIND_CONTENT,
    [FAULT_TIMESTAMP_BACKWARDS] = KIND_TIMESTAMP,
    [FAULT_TIMESTAMP_AHEAD] = KIND_TIMESTAMP,
    [FAULT_INDEX_RELATIVE] = KIND_STRUCTURE,
    [FAULT_INDEX_POSITION] = KIND_STRUCTURE,
    [FAULT_INDEX_TIMESTAMP] = KIND_STRUCTURE,
    [FAULT_RECORD_END] = KIND_STRUCTURE,
    [FAULT_POSITION_OVERFLOW] = KIND_STRUCTURE,
    [FAULT_NO_MEMORY] = KIND_GOOD,
};

typedef struct {
    int fault;
    uint64_t position; /* of the record in the log */
    uint64_t offset;   /* the offset expected there */
    uint64_t found, other;
    header_problem header;
} record_fault;

static inline int known_state(uint8_t state)
{
    return state == 1 || state == 10 || state == 20 || state == 30;
}

/* Check the record at ``data[at]`` (``base + at`` in the log) as offset ``offset``, within
 * ``limit`` bytes of ``data``: layout, then (``index_timestamp``) the index's timestamp, then
 * checksum and header map (``checksums``). Sets ``*stop`` to where its lengths end once those
 * fit. Returns the fault, details in ``f``. */
static int check_record(const uint8_t *data, uint64_t limit, uint64_t at, uint64_t offset,
                        uint64_t base, const uint64_t *index_timestamp, int checksums,
                        key_list *keys, record_fault *f, uint64_t *stop)
{
    f->position = base + at;
    f->offset = offset;
    if (limit - at < RECORD_OVERHEAD) {
        f->found = limit - at;
        return f->fault = FAULT_INCOMPLETE;
    }
    const uint8_t *record = data + at;
    uint64_t found_offset = load_le64(record);
    if (found_offset != offset) {
        f->found = found_offset;
        return f->fault = FAULT_OFFSET;
    }
    if (!known_state(record[RECORD_STATE_AT])) {
        f->found = record[RECORD_STATE_AT];
        return f->fault = FAULT_STATE;
    }
    uint64_t timestamp = load_le64(record + RECORD_TIMESTAMP_AT);
    if (index_timestamp != NULL && timestamp != *index_timestamp) {
        f->found = timestamp;
        f->other = *index_timestamp;
        return f->fault = FAULT_INDEX_TIMESTAMP;
    }
    uint32_t headers_length = load_le32(record + RECORD_REST_AT);
    uint64_t payload_length_at = at + RECORD_HEADERS_AT + headers_length;
    if (payload_length_at + 4 > limit) {
        f->found = headers_length;
        return f->fault = FAULT_HEADERS_OVERRUN;
    }
    uint32_t payload_length = load_le32(data + payload_length_at);
    uint64_t end = payload_length_at + 4 + payload_length;
    if (payload_length == 0 || end > limit) {
        f->found = payload_length;
        return f->fault = FAULT_PAYLOAD_LENGTH;
    }
    *stop = end;
    if (!checksums) return f->fault = FAULT_NONE;
    uint32_t actual = crc32_ieee(0, data + payload_length_at + 4, payload_length);
    uint32_t stored = load_le32(record + RECORD_CHECKSUM_AT);
    if (actual != stored) {
        f->found = actual;
        f->other = stored;
        return f->fault = FAULT_CHECKSUM;
    }
    if (headers_length) {
        uint64_t values = 0;
        int status = check_header_map(record + RECORD_HEADERS_AT, headers_length, keys, &values,
                                      UINT64_MAX, &f->header);
        if (status == HEADER_NO_MEMORY) return f->fault = FAULT_NO_MEMORY;
        if (status != HEADER_OK) return f->fault = FAULT_HEADER_MAP;
    }
    return f->fault = FAULT_NONE;
}

/* The reference's words for a fault (GIL held), or NULL with an error. */
static PyObject *fault_text(const record_fault *f)
{
    unsigned long long at = f->position, offset = f->offset, found = f->found, other = f->other;
    switch (f->fault) {
    case FAULT_INCOMPLETE:
        return PyUnicode_FromFormat("incomplete record at byte %llu: %llu bytes left", at, found);
    case FAULT_OFFSET:
        return PyUnicode_FromFormat("record at byte %llu has offset %llu, expected %llu", at,
                                    found, offset);
    case FAULT_STATE:
        return PyUnicode_FromFormat("record at byte %llu (offset %llu) has unknown state %llu",
                                    at, offset, found);
    case FAULT_HEADERS_OVERRUN:
        return PyUnicode_FromFormat(
            "record at byte %llu (offset %llu): headers length %llu overruns the data", at,
            offset, found);
    case FAULT_PAYLOAD_LENGTH:
        return PyUnicode_FromFormat("record at byte %llu (offset %llu): payload length %llu",
                                    at, offset, found);
    case FAULT_CHECKSUM:
        return PyUnicode_FromFormat(
            "record at byte %llu (offset %llu): checksum %llu where %llu is stored", at, offset,
            found, other);
    case FAULT_HEADER_MAP: {
        PyObject *detail = header_problem_text(&f->header);
        if (detail == NULL) return NULL;
        PyObject *text = PyUnicode_FromFormat("record at byte %llu (offset %llu): header map: %U",
                                              at, offset, detail);
        Py_DECREF(detail);
        return text;
    }
    case FAULT_TIMESTAMP_BACKWARDS:
        return PyUnicode_FromFormat(
            "record at byte %llu (offset %llu) has timestamp %llu, before %llu", at, offset,
            found, other);
    case FAULT_TIMESTAMP_AHEAD:
        return PyUnicode_FromFormat(
            "record at byte %llu (offset %llu) has timestamp %llu, after the next record's %llu",
            at, offset, found, other);
    case FAULT_INDEX_RELATIVE:
        return PyUnicode_FromFormat(
            "index entry of offset %llu has relative offset %llu, expected %llu", offset, found,
            other);
    case FAULT_INDEX_POSITION:
        return PyUnicode_FromFormat(
            "index entry of offset %llu puts the record at bytes %llu..%llu, outside the data",
            offset, found, other);
    case FAULT_INDEX_TIMESTAMP:
        return PyUnicode_FromFormat(
            "record at byte %llu (offset %llu) has timestamp %llu, the index says %llu", at,
            offset, found, other);
    case FAULT_RECORD_END:
        return PyUnicode_FromFormat(
            "record at byte %llu (offset %llu) ends at byte %llu, the index says %llu", at,
            offset, found, other);
    case FAULT_POSITION_OVERFLOW:
        return PyUnicode_FromFormat(
            "record at byte %llu (offset %llu) starts past the u32 positions of an index", at,
            offset);
    default:
        PyErr_SetString(PyExc_SystemError, "_stamp: no fault to word");
        return NULL;
    }
}

/* ``(count, kind, reason)`` for a stopped check: ``count`` records were good, the next one has
 * ``f``; ``(count, 0, None)`` when all were. */
static PyObject *check_result(Py_ssize_t count, const record_fault *f)
{
    if (f->fault == FAULT_NONE) return Py_BuildValue("(niO)", count, KIND_GOOD, Py_None);
    PyObject *reason = fault_text(f);
    if (reason == NULL) return NULL;
    PyObject *result = Py_BuildValue("(niN)", count, FAULT_KINDS[f->fault], reason);
    return result;
}

typedef struct {
    const uint8_t *data;    /* the records */
    uint64_t length;
    const uint8_t *entries; /* their index entries */
    uint64_t count;
    uint64_t first_offset, relative_first, base_position;
    uint64_t good;          /* out: records that verified */
    record_fault fault;
} verify_job;

/* Check ``count`` records against their index entries: each entry has the expected relative
 * offset and puts its record inside the data, right after the previous one (the first at
 * ``base_position``, the last ending at the end of the data); each record carries the expected
 * offset, a known state and the entry's timestamp, its lengths end where the next begins, and
 * its checksum and header map are right. Stops at the first that is not so. */
static void verify_records(verify_job *job)
{
    key_list keys = {NULL, 0, 0};
    record_fault *f = &job->fault;
    memset(f, 0, sizeof *f);
    uint64_t base = job->base_position, end_position = base + job->length;
    uint64_t i;
    for (i = 0; i < job->count; i++) {
        const uint8_t *entry = job->entries + INDEX_ENTRY_SIZE * i;
        uint64_t offset = job->first_offset + i;
        uint64_t relative = load_le32(entry), position = load_le32(entry + 4);
        uint64_t timestamp = load_le64(entry + 8);
        uint64_t next = i + 1 < job->count ? load_le32(entry + INDEX_ENTRY_SIZE + 4)
                                           : end_position;
        f->offset = offset;
        f->position = position;
        if (relative != job->relative_first + i) {
            f->found = relative;
            f->other = job->relative_first + i;
            f->fault = FAULT_INDEX_RELATIVE;
            break;
        }
        if ((i == 0 && position != base) || position < base || next < position ||
            next > end_position) {
            f->found = position;
            f->other = next;
            f->fault = FAULT_INDEX_POSITION;
            break;
        }
        uint64_t stop = 0;
        if (check_record(job->data, next - base, position - base, offset, base, &timestamp, 1,
                         &keys, f, &stop) != FAULT_NONE)
            break;
        if (stop != next - base) {
            f->found = base + stop;
            f->other = next;
            f->fault = FAULT_RECORD_END;
            break;
        }
    }
    job->good = i;
    PyMem_RawFree(keys.keys);
}

/* verify(records, entries, first_offset, relative_first, base_position) -> (count, kind, reason) */
static PyObject *verify(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "verify(records, entries, first_offset, "
                                         "relative_first, base_position) takes 5 arguments");
        return NULL;
    }
    verify_job job;
    memset(&job, 0, sizeof job);
    unsigned long long values[3];
    if (uint64_arguments(args + 2, 3, values) < 0) return NULL;
    job.first_offset = values[0];
    job.relative_first = values[1];
    job.base_position = values[2];
    Py_buffer records, entries;
    if (PyObject_GetBuffer(args[0], &records, PyBUF_SIMPLE) < 0) return NULL;
    if (PyObject_GetBuffer(args[1], &entries, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&records);
        return NULL;
    }
    job.data = records.buf;
    job.length = (uint64_t)records.len;
    job.entries = entries.buf;
    job.count = (uint64_t)entries.len / INDEX_ENTRY_SIZE;
    if (records.len >= GIL_RELEASE_MIN_BYTES) {
        Py_BEGIN_ALLOW_THREADS
        verify_records(&job);
        Py_END_ALLOW_THREADS
    } else {
        verify_records(&job);
    }
    PyObject *result = job.fault.fault == FAULT_NO_MEMORY
                           ? PyErr_NoMemory()
                           : check_result((Py_ssize_t)job.good, &job.fault);
    PyBuffer_Release(&entries);
    PyBuffer_Release(&records);
    return result;
}

typedef struct {
    const uint8_t *data;
    uint64_t length, start, offset, segment_start, previous_timestamp, max_count;
    int checksums;
    /* out */
    uint8_t *entries; /* PyMem_Raw; count entries */
    uint64_t count, capacity, position, first_timestamp;
    record_fault fault;
} scan_job;

/* Whether the record after the one at ``at`` carries ``offset`` and a timestamp of at least
 * ``timestamp`` (then the one at ``at`` is the record out of order, not the one before it). */
static int in_order_after(const uint8_t *data, uint64_t length, uint64_t at, uint64_t offset,
                          uint64_t timestamp)
{
    if (length - at < RECORD_OVERHEAD) return 0;
    uint64_t payload_length_at = at + RECORD_HEADERS_AT + load_le32(data + at + RECORD_REST_AT);
    if (payload_length_at + 4 > length) return 0;
    uint64_t end = payload_length_at + 4 + load_le32(data + payload_length_at);
    if (end > length || length - end < RECORD_TIMESTAMP_AT + 8) return 0;
    return load_le64(data + end) == offset &&
           load_le64(data + end + RECORD_TIMESTAMP_AT) >= timestamp;
}

/* Walk records from ``start`` with dense offsets from ``offset`` (at most ``max_count``),
 * building their index entries, until the data ends or a record does not check (layout,
 * checksum, header map) or has a timestamp out of order: before the previous one, or after
 * the next one while that one is not before the previous and the one after it is not after
 * this one either. */
static void scan_records(scan_job *job)
{
    key_list keys = {NULL, 0, 0};
    record_fault *f = &job->fault;
    memset(f, 0, sizeof *f);
    const uint8_t *data = job->data;
    uint64_t position = job->start, offset = job->offset, previous = job->previous_timestamp;
    while (position < job->length && job->count < job->max_count) {
        uint64_t stop = 0;
        if (position > MAX_POSITION) {
            f->position = position;
            f->offset = offset;
            f->fault = FAULT_POSITION_OVERFLOW;
            break;
        }
        if (check_record(data, job->length, position, offset, 0, NULL, job->checksums, &keys, f,
                         &stop) != FAULT_NONE)
            break;
        uint64_t timestamp = load_le64(data + position + RECORD_TIMESTAMP_AT);
        if (timestamp < previous) {
            f->found = timestamp;
            f->other = previous;
            f->fault = FAULT_TIMESTAMP_BACKWARDS;
            break;
        }
        if (job->length - stop >= RECORD_TIMESTAMP_AT + 8 && load_le64(data + stop) == offset + 1) {
            uint64_t next = load_le64(data + stop + RECORD_TIMESTAMP_AT);
            if (next < timestamp && next >= previous &&
                !in_order_after(data, job->length, stop, offset + 2, timestamp)) {
                f->found = timestamp;
                f->other = next;
                f->fault = FAULT_TIMESTAMP_AHEAD;
                break;
            }
        }
        if (job->count == job->capacity) {
            uint64_t capacity = job->capacity ? 2 * job->capacity : 256;
            uint8_t *grown = PyMem_RawRealloc(job->entries, capacity * INDEX_ENTRY_SIZE);
            if (grown == NULL) {
                f->fault = FAULT_NO_MEMORY;
                break;
            }
            job->entries = grown;
            job->capacity = capacity;
        }
        uint8_t *entry = job->entries + INDEX_ENTRY_SIZE * job->count;
        store_le32(entry, (uint32_t)(offset - job->segment_start));
        store_le32(entry + 4, (uint32_t)position);
        store_le64(entry + 8, timestamp);
        if (job->count == 0) job->first_timestamp = timestamp;
        job->count++;
        previous = timestamp;
        offset++;
        position = stop;
    }
    job->position = position;
    PyMem_RawFree(keys.keys);
}

/* scan(view, start_position, expected_offset, segment_start, previous_timestamp, max_count,
 *      verify_checksums) -> (count, end_position, index_entries, first_timestamp,
 *                            last_timestamp, kind, reason) */
static PyObject *scan(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "scan(view, start_position, expected_offset, "
                                         "segment_start, previous_timestamp, max_count, "
                                         "verify_checksums) takes 7 arguments");
        return NULL;
    }
    scan_job job;
    memset(&job, 0, sizeof job);
    unsigned long long values[5];
    if (uint64_arguments(args + 1, 5, values) < 0) return NULL;
    job.start = values[0];
    job.offset = values[1];
    job.segment_start = values[2];
    job.previous_timestamp = values[3];
    job.max_count = values[4];
    job.checksums = PyObject_IsTrue(args[6]);
    if (job.checksums < 0) return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) return NULL;
    job.data = view.buf;
    job.length = (uint64_t)view.len;
    if (job.start < job.length && job.length - job.start >= GIL_RELEASE_MIN_BYTES) {
        Py_BEGIN_ALLOW_THREADS
        scan_records(&job);
        Py_END_ALLOW_THREADS
    } else {
        scan_records(&job);
    }
    PyObject *result = NULL, *entries = NULL, *reason = Py_None;
    if (job.fault.fault == FAULT_NO_MEMORY) {
        PyErr_NoMemory();
        goto done;
    }
    entries = PyByteArray_FromStringAndSize((const char *)job.entries,
                                            (Py_ssize_t)(job.count * INDEX_ENTRY_SIZE));
    if (entries == NULL) goto done;
    if (job.fault.fault != FAULT_NONE) {
        reason = fault_text(&job.fault);
        if (reason == NULL) goto done;
    } else {
        Py_INCREF(reason);
    }
    if (job.count) {
        uint64_t last = load_le64(job.entries + INDEX_ENTRY_SIZE * (job.count - 1) + 8);
        result = Py_BuildValue("(KKOKKiO)", (unsigned long long)job.count,
                               (unsigned long long)job.position, entries,
                               (unsigned long long)job.first_timestamp, (unsigned long long)last,
                               FAULT_KINDS[job.fault.fault], reason);
    } else {
        result = Py_BuildValue("(KKOOOiO)", 0ULL, (unsigned long long)job.position, entries,
                               Py_None, Py_None, FAULT_KINDS[job.fault.fault], reason);
    }
    Py_DECREF(reason);
done:
    Py_XDECREF(entries);
    PyMem_RawFree(job.entries);
    PyBuffer_Release(&view);
    return result;
}

typedef struct {
    const uint8_t *data;
    uint64_t length, start, first_offset, last_offset;
    int found;
    uint64_t position, offset;
    int no_memory;
} find_job;

/* The first byte at or after ``start`` where a record of an offset in [first, last] begins
 * and checks (layout, checksum, header map): where records can be found again after bytes
 * that cannot be read as records. */
static void find_record_in(find_job *job)
{
    key_list keys = {NULL, 0, 0};
    record_fault f;
    const uint8_t *data = job->data;
    for (uint64_t p = job->start; p + RECORD_OVERHEAD <= job->length; p++) {
        uint64_t value = load_le64(data + p);
        if (value < job->first_offset || value > job->last_offset) continue;
        uint64_t stop = 0;
        int fault = check_record(data, job->length, p, value, 0, NULL, 1, &keys, &f, &stop);
        if (fault == FAULT_NO_MEMORY) {
            job->no_memory = 1;
            break;
        }
        if (fault == FAULT_NONE) {
            job->found = 1;
            job->position = p;
            job->offset = value;
            break;
        }
    }
    PyMem_RawFree(keys.keys);
}

/* find_record(view, start, first_offset, last_offset) -> (position, offset) or None */
static PyObject *find_record(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError,
                        "find_record(view, start, first_offset, last_offset) takes 4 arguments");
        return NULL;
    }
    find_job job;
    memset(&job, 0, sizeof job);
    unsigned long long values[3];
    if (uint64_arguments(args + 1, 3, values) < 0) return NULL;
    job.start = values[0];
    job.first_offset = values[1];
    job.last_offset = values[2];
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) return NULL;
    job.data = view.buf;
    job.length = (uint64_t)view.len;
    if (job.length > job.start && job.length - job.start >= GIL_RELEASE_MIN_BYTES) {
        Py_BEGIN_ALLOW_THREADS
        find_record_in(&job);
        Py_END_ALLOW_THREADS
    } else {
        find_record_in(&job);
    }
    PyBuffer_Release(&view);
    if (job.no_memory) return PyErr_NoMemory();
    if (!job.found) Py_RETURN_NONE;
    return Py_BuildValue("(KK)", (unsigned long long)job.position,
                         (unsigned long long)job.offset);
}


static PyObject *crc32_function(PyObject *module, PyObject *args)
{
    Py_buffer view;
    unsigned int value = 0;
    if (!PyArg_ParseTuple(args, "y*|I:crc32", &view, &value)) return NULL;
    uint32_t crc;
    if (view.len >= GIL_RELEASE_MIN_BYTES) {
        Py_BEGIN_ALLOW_THREADS
        crc = crc32_ieee(value, view.buf, (size_t)view.len);
        Py_END_ALLOW_THREADS
    } else {
        crc = crc32_ieee(value, view.buf, (size_t)view.len);
    }
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLong(crc);
}

static void detect_cpu(void)
{
#if RILL_HAVE_PCLMUL
    __builtin_cpu_init();
    have_pclmul = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
#if RILL_HAVE_VPCLMUL
    have_vpclmul = have_pclmul && __builtin_cpu_supports("avx512f") &&
                   __builtin_cpu_supports("vpclmulqdq");
#endif
#endif
}

static const char *crc32_method(void)
{
    return have_vpclmul ? "vpclmulqdq folding (AVX-512)"
           : have_pclmul ? "pclmulqdq folding"
                         : "slicing-by-8";
}

static PyObject *set_pclmul(PyObject *module, PyObject *args)
{
    /* tests switch the 512-bit or all folding off to check every path on the same inputs */
    int wanted = 1, wide = 1;
    if (!PyArg_ParseTuple(args, "|pp:set_pclmul", &wanted, &wide)) return NULL;
    detect_cpu();
    if (!wanted)
        have_pclmul = 0;
    if (!wanted || !wide)
        have_vpclmul = 0;
    return PyUnicode_FromString(crc32_method());
}

static PyMethodDef stamp_methods[] = {
    {"stamp", (PyCFunction)(void (*)(void))stamp, METH_FASTCALL,
     "stamp(region, base_offset, timestamp_us, base_position, segment_start, uuid7_block)\n"
     "-> (records, index_entries, count) or an int status (see the module source)."},
    {"verify", (PyCFunction)(void (*)(void))verify, METH_FASTCALL,
     "verify(records, entries, first_offset, relative_first, base_position)\n"
     "-> (count, kind, reason): records checked against their index entries."},
    {"scan", (PyCFunction)(void (*)(void))scan, METH_FASTCALL,
     "scan(view, start_position, expected_offset, segment_start, previous_timestamp,\n"
     "max_count, verify_checksums) -> (count, end_position, index_entries, first_timestamp,\n"
     "last_timestamp, kind, reason): records walked from a position."},
    {"find_record", (PyCFunction)(void (*)(void))find_record, METH_FASTCALL,
     "find_record(view, start, first_offset, last_offset) -> (position, offset) or None."},
#if RILL_HAVE_CONVERSION
    {"kafka_to_iggy", (PyCFunction)(void (*)(void))convert_kafka_to_iggy, METH_FASTCALL,
     "kafka_to_iggy(block, base_offset, count, base_timestamp, max_timestamp,\n"
     "log_append_time, first_offset, end_offset, base_position) -> (records, positions,\n"
     "timestamps, first_offset), a str (malformed) or an int status: one records block's\n"
     "Kafka records as stored Iggy records."},
    {"iggy_to_kafka", (PyCFunction)(void (*)(void))convert_iggy_to_kafka, METH_FASTCALL,
     "iggy_to_kafka(records, first_offset, end_offset) -> (records_block, count,\n"
     "base_offset, last_offset, base_timestamp_ms, max_timestamp_ms), None (no record) or a\n"
     "str (malformed): stored Iggy records as a RecordBatch v2 records block."},
#endif
    {"crc32", crc32_function, METH_VARARGS, "crc32(data, value=0): zlib's CRC-32."},
    {"set_pclmul", set_pclmul, METH_VARARGS,
     "set_pclmul(fold=True, wide=True) -> str: use carry-less multiply folding (512-bit lanes\n"
     "if ``wide``) where the CPU has it; returns the CRC-32 method now in use."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef stamp_module = {
    PyModuleDef_HEAD_INIT, "_stamp",
    "C twins of rill.server.storage.records.stamp_batch_python, of the record checks of\n"
    "rill.server.storage.record_checks and of the record conversion loops of\n"
    "rill.server.storage.record_conversion (see the module source).", -1,
    stamp_methods,
};

PyMODINIT_FUNC PyInit__stamp(void)
{
    crc_init_tables();
    detect_cpu();
    PyObject *module = PyModule_Create(&stamp_module);
    if (module == NULL) return NULL;
    if (PyModule_AddIntConstant(module, "STATUS_MALFORMED", STATUS_MALFORMED) ||
        PyModule_AddIntConstant(module, "STATUS_NO_MESSAGES", STATUS_NO_MESSAGES) ||
        PyModule_AddIntConstant(module, "STATUS_HEADERS_TOO_BIG", STATUS_HEADERS_TOO_BIG) ||
        PyModule_AddIntConstant(module, "STATUS_PAYLOAD_TOO_BIG", STATUS_PAYLOAD_TOO_BIG) ||
        PyModule_AddIntConstant(module, "STATUS_POSITION_OVERFLOW", STATUS_POSITION_OVERFLOW) ||
        PyModule_AddIntConstant(module, "STATUS_UNSUPPORTED", STATUS_UNSUPPORTED) ||
        PyModule_AddIntConstant(module, "MAX_PAYLOAD_BYTES", (long)MAX_PAYLOAD_BYTES) ||
        PyModule_AddIntConstant(module, "MAX_HEADERS_BYTES", (long)MAX_HEADERS_BYTES) ||
        PyModule_AddIntConstant(module, "RECORD_GROWTH", RECORD_GROWTH) ||
        PyModule_AddIntConstant(module, "SEND_PREFIX_SIZE", SEND_PREFIX_SIZE) ||
        PyModule_AddIntConstant(module, "RECORD_OVERHEAD", RECORD_OVERHEAD) ||
        PyModule_AddIntConstant(module, "RECORD_HEADERS_AT", RECORD_HEADERS_AT) ||
        PyModule_AddIntConstant(module, "KIND_CONTENT", KIND_CONTENT) ||
        PyModule_AddIntConstant(module, "KIND_STRUCTURE", KIND_STRUCTURE) ||
        PyModule_AddIntConstant(module, "KIND_TIMESTAMP", KIND_TIMESTAMP) ||
        PyModule_AddIntConstant(module, "GIL_RELEASE_MIN_BYTES", GIL_RELEASE_MIN_BYTES) ||
        PyModule_AddObject(module, "MAX_POSITION",
                           PyLong_FromUnsignedLongLong(MAX_POSITION)) ||
        PyModule_AddStringConstant(module, "CRC32_METHOD", crc32_method())) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
