/*
 * _stamp: the C twins of the per-record loops of rill's storage: the write hot loop
 * (rill.server.storage.records.stamp_batch_python), the record checks of every read and
 * recovery (rill.server.storage.record_checks: verify, scan and find_record) and the record
 * conversion between formats (rill.server.storage.record_conversion).
 *
 * Owns: ``stamp`` (validate a SEND message region and build its stored records and index
 * entries), ``verify`` / ``scan`` / ``find_record`` (check stored records: layout, checksum,
 * header map, against their index entries or walking them), ``kafka_to_iggy`` (the records of
 * one RecordBatch v2 records block -> stored Iggy records) and ``iggy_to_kafka`` (stored Iggy
 * records -> a RecordBatch v2 records block; both only where the compiler has 128-bit
 * integers), and ``crc32`` (the IEEE / zlib CRC-32: carry-less multiply folding where the CPU
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

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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

/* Limits, mirrored from records.py (which checks at import that they agree). */
#define MAX_PAYLOAD_BYTES 10000000ULL
#define MAX_HEADERS_BYTES 100000ULL
#define MAX_POSITION 0xFFFFFFFFULL
#define SEND_PREFIX_SIZE 20    /* id + headers_length */
#define RECORD_GROWTH 21       /* stored record size minus SEND message size */
#define RECORD_ID_AT 17        /* offset u64, state u8, timestamp u64, then the id */
#define RECORD_CHECKSUM_AT 33
#define RECORD_REST_AT 37      /* headers_length, headers, payload_length, payload: as sent */
#define INDEX_ENTRY_SIZE 16
#define STATE_AVAILABLE 1
#define GIL_RELEASE_MIN_BYTES 16384 /* below this, releasing costs more than it frees */

enum {
    STATUS_MALFORMED = 1,        /* DecodeError: ``stamp`` returns its message (a str) */
    STATUS_NO_MESSAGES = 2,      /* InvalidMessagesCount */
    STATUS_HEADERS_TOO_BIG = 3,  /* TooBigHeadersPayload */
    STATUS_PAYLOAD_TOO_BIG = 4,  /* TooBigMessagePayload */
    STATUS_POSITION_OVERFLOW = 5,/* ValueError: the batch does not fit u32 positions */
    STATUS_UNSUPPORTED = 6,      /* arguments outside what this twin handles: use the reference */
};

/* ------------------------------------------------------------------ little-endian access */

static inline uint32_t load_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
           ((uint32_t)p[3] << 24);
}

static inline void store_le32(uint8_t *p, uint32_t v)
{
#if PY_LITTLE_ENDIAN
    memcpy(p, &v, 4);
#else
    p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
#endif
}

static inline void store_le64(uint8_t *p, uint64_t v)
{
#if PY_LITTLE_ENDIAN
    memcpy(p, &v, 8);
#else
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
#endif
}

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

#define RECORD_OVERHEAD 45  /* fixed part (41) plus payload_length */
#define RECORD_STATE_AT 8
#define RECORD_TIMESTAMP_AT 9
#define RECORD_HEADERS_AT 41

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

static inline uint64_t load_le64(const uint8_t *p)
{
    return (uint64_t)load_le32(p) | ((uint64_t)load_le32(p + 4) << 32);
}

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
    for (int i = 0; i < 3; i++) {
        values[i] = PyLong_AsUnsignedLongLong(args[2 + i]);
        if (values[i] == (unsigned long long)-1 && PyErr_Occurred()) return NULL;
    }
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
    for (int i = 0; i < 5; i++) {
        values[i] = PyLong_AsUnsignedLongLong(args[1 + i]);
        if (values[i] == (unsigned long long)-1 && PyErr_Occurred()) return NULL;
    }
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
    for (int i = 0; i < 3; i++) {
        values[i] = PyLong_AsUnsignedLongLong(args[1 + i]);
        if (values[i] == (unsigned long long)-1 && PyErr_Occurred()) return NULL;
    }
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

/* ------------------------------------------------------------------ record conversion */
/*
 * The per-record loops of rill.server.storage.record_conversion (``_kafka_records_python`` and
 * the record walk of ``iggy_to_kafka_python`` are the reference): Kafka RecordBatch v2 records
 * -> stored Iggy records, and stored Iggy records -> a RecordBatch v2 records block. Python's
 * integers are unbounded and a Kafka varint the reference reads may carry 70 bits, so every
 * value read from a records block is held in a 128-bit integer: each sum and comparison comes
 * out as the reference's. Built only where the compiler has 128-bit integers (GCC and Clang on
 * 64-bit targets); elsewhere the module lacks the two functions and the reference runs.
 * Lengths are read once and kept; the output is copied with those kept lengths only, so a
 * buffer mutated while the GIL is released can give garbage, never an out-of-bounds access.
 */
#if defined(__SIZEOF_INT128__)
#define RILL_HAVE_CONVERSION 1
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

/* Room for ``more`` bytes past the end; -1 when memory runs out. */
static int buffer_reserve(byte_buffer *buffer, size_t more)
{
    if (buffer->capacity - buffer->length >= more) return 0;
    size_t capacity = buffer->capacity ? buffer->capacity : 4096;
    while (capacity - buffer->length < more) {
        if (capacity > ((size_t)-1) / 2) return -1;
        capacity *= 2;
    }
    uint8_t *grown = PyMem_RawRealloc(buffer->data, capacity);
    if (grown == NULL) return -1;
    buffer->data = grown;
    buffer->capacity = capacity;
    return 0;
}

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

static PyObject *conversion_fault_text(int fault, uint64_t offset)
{
    unsigned long long value = (unsigned long long)offset;
    switch (fault) {
    case CONVERT_PAST_END: return PyUnicode_FromString("index out of range");
    case CONVERT_INDEX_TOO_BIG:
        return PyUnicode_FromString("cannot fit 'int' into an index-sized integer");
    case CONVERT_VARINT_TOO_LONG: return PyUnicode_FromString("varint longer than 10 bytes");
    case CONVERT_NEGATIVE_LENGTH: return PyUnicode_FromString("a record of negative length");
    case CONVERT_NULL_HEADER_KEY: return PyUnicode_FromString("a header with a null key");
    case CONVERT_OVERRUN:
        return PyUnicode_FromFormat("record at offset %llu overruns its length", value);
    case CONVERT_TIMESTAMP:
        return PyUnicode_FromFormat("record at offset %llu has a timestamp past 64 bits", value);
    case CONVERT_READ_OVERRUN:
        return PyUnicode_FromFormat("the record at offset %llu overruns the read", value);
    case CONVERT_HEADER_MAP:
        return PyUnicode_FromFormat("the record at offset %llu has a malformed header map",
                                    value);
    default:
        PyErr_SetString(PyExc_SystemError, "_stamp: no conversion fault to word");
        return NULL;
    }
}

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

/* -------------------------------------------- Kafka records -> stored Iggy records */

/* A Kafka header an Iggy header map can hold, by its place in the records block. */
typedef struct {
    size_t name_at, value_at;
    uint32_t name_length, value_length;
} kept_header;

/* The kept headers of one record, in the order their keys first appeared (the reference's
 * dict): a linear search while few, an open-addressing table of indexes once there are many. */
typedef struct {
    kept_header *items;
    size_t count, capacity;
    uint32_t *slots; /* index + 1, 0 empty; slot_count a power of two, 0 while searching */
    size_t slot_count, slot_capacity;
} header_set;

#define HEADER_SET_LINEAR 16

static uint32_t name_hash(const uint8_t *name, uint32_t length)
{
    uint32_t hash = 2166136261u; /* FNV-1a */
    for (uint32_t i = 0; i < length; i++)
        hash = (hash ^ name[i]) * 16777619u;
    return hash;
}

static void header_set_clear(header_set *set)
{
    if (set->slot_count) memset(set->slots, 0, set->slot_count * sizeof *set->slots);
    set->slot_count = 0;
    set->count = 0;
}

static void header_set_free(header_set *set)
{
    PyMem_RawFree(set->items);
    PyMem_RawFree(set->slots);
}

/* Index the kept headers in a table of ``slot_count`` slots; -1 when memory runs out. */
static int header_set_index(header_set *set, const uint8_t *data, size_t slot_count)
{
    if (slot_count > set->slot_capacity) {
        uint32_t *grown = PyMem_RawRealloc(set->slots, slot_count * sizeof *grown);
        if (grown == NULL) return -1;
        set->slots = grown;
        set->slot_capacity = slot_count;
    }
    memset(set->slots, 0, slot_count * sizeof *set->slots);
    set->slot_count = slot_count;
    for (size_t i = 0; i < set->count; i++) {
        const kept_header *item = &set->items[i];
        size_t slot = name_hash(data + item->name_at, item->name_length) & (slot_count - 1);
        while (set->slots[slot]) slot = (slot + 1) & (slot_count - 1);
        set->slots[slot] = (uint32_t)(i + 1);
    }
    return 0;
}

/* ``headers[name] = value``: a later duplicate replaces the value, in the first one's place. */
static int header_set_put(header_set *set, const uint8_t *data, size_t name_at,
                          uint32_t name_length, size_t value_at, uint32_t value_length)
{
    const uint8_t *name = data + name_at;
    size_t slot = 0;
    if (set->slot_count == 0) {
        for (size_t i = 0; i < set->count; i++) {
            kept_header *item = &set->items[i];
            if (item->name_length == name_length &&
                memcmp(data + item->name_at, name, name_length) == 0) {
                item->value_at = value_at;
                item->value_length = value_length;
                return 0;
            }
        }
    } else {
        slot = name_hash(name, name_length) & (set->slot_count - 1);
        while (set->slots[slot]) {
            kept_header *item = &set->items[set->slots[slot] - 1];
            if (item->name_length == name_length &&
                memcmp(data + item->name_at, name, name_length) == 0) {
                item->value_at = value_at;
                item->value_length = value_length;
                return 0;
            }
            slot = (slot + 1) & (set->slot_count - 1);
        }
    }
    if (set->count == set->capacity) {
        size_t capacity = set->capacity ? 2 * set->capacity : 16;
        kept_header *grown = PyMem_RawRealloc(set->items, capacity * sizeof *grown);
        if (grown == NULL) return -1;
        set->items = grown;
        set->capacity = capacity;
    }
    if (set->count >= 0xFFFFFFFEu) return -1;
    kept_header *item = &set->items[set->count++];
    item->name_at = name_at;
    item->value_at = value_at;
    item->name_length = name_length;
    item->value_length = value_length;
    if (set->slot_count) {
        if (2 * set->count > set->slot_count)
            return header_set_index(set, data, 2 * set->slot_count);
        set->slots[slot] = (uint32_t)set->count;
    } else if (set->count > HEADER_SET_LINEAR) {
        return header_set_index(set, data, 4 * HEADER_SET_LINEAR);
    }
    return 0;
}

typedef struct {
    const uint8_t *data;
    wide_t length;
    int64_t base_offset, base_timestamp, max_timestamp, first_offset, end_offset;
    int32_t count;
    int log_append_time;
    uint64_t base_position;
    /* out */
    byte_buffer records, positions, timestamps; /* positions u32, timestamps u64: native */
    int64_t first;
    int found, fault;
    uint64_t fault_offset;
    header_set headers;
} kafka_job;

/* Append one stored Iggy record: offset, state, timestamp, zero id, crc32(payload), the
 * ``rill.key`` header (``key_length`` 0: none), the kept headers, the payload. */
static int put_iggy_record(kafka_job *job, uint64_t offset, uint64_t timestamp, size_t key_at,
                           uint32_t key_length, size_t payload_at, uint64_t payload_length)
{
    const uint8_t *data = job->data;
    header_set *headers = &job->headers;
    uint64_t entries_length = key_length ? 4 + KEY_HEADER_LENGTH + 1 + 4 + key_length : 0;
    for (size_t i = 0; i < headers->count; i++)
        entries_length += 4 + headers->items[i].name_length + 1 + 4 +
                          headers->items[i].value_length;
    uint64_t position = job->base_position + job->records.length;
    if (position > MAX_POSITION || entries_length > 0xFFFFFFFFu || payload_length > 0xFFFFFFFFu)
        return CONVERT_UNSUPPORTED;
    size_t size = RECORD_OVERHEAD + (size_t)entries_length + (size_t)payload_length;
    if (buffer_reserve(&job->records, size) || buffer_reserve(&job->positions, 4) ||
        buffer_reserve(&job->timestamps, 8))
        return CONVERT_NO_MEMORY;
    uint32_t position32 = (uint32_t)position;
    memcpy(job->positions.data + job->positions.length, &position32, 4);
    job->positions.length += 4;
    memcpy(job->timestamps.data + job->timestamps.length, &timestamp, 8);
    job->timestamps.length += 8;
    uint8_t *record = job->records.data + job->records.length;
    store_le64(record, offset);
    record[8] = STATE_AVAILABLE;
    store_le64(record + 9, timestamp);
    memset(record + RECORD_ID_AT, 0, 16);
    store_le32(record + RECORD_REST_AT, (uint32_t)entries_length);
    uint8_t *out = record + RECORD_HEADERS_AT;
    if (key_length) {
        store_le32(out, KEY_HEADER_LENGTH);
        memcpy(out + 4, KEY_HEADER, KEY_HEADER_LENGTH);
        out[4 + KEY_HEADER_LENGTH] = RAW_KIND;
        store_le32(out + 5 + KEY_HEADER_LENGTH, key_length);
        memcpy(out + 9 + KEY_HEADER_LENGTH, data + key_at, key_length);
        out += 9 + KEY_HEADER_LENGTH + key_length;
    }
    for (size_t i = 0; i < headers->count; i++) {
        const kept_header *item = &headers->items[i];
        store_le32(out, item->name_length);
        memcpy(out + 4, data + item->name_at, item->name_length);
        out += 4 + item->name_length;
        *out++ = RAW_KIND;
        store_le32(out, item->value_length);
        memcpy(out + 4, data + item->value_at, item->value_length);
        out += 4 + item->value_length;
    }
    store_le32(out, (uint32_t)payload_length);
    if (payload_length) memcpy(out + 4, data + payload_at, (size_t)payload_length);
    /* over the copy: a record's checksum matches the record even if the input changed */
    store_le32(record + RECORD_CHECKSUM_AT, crc32_ieee(0, out + 4, (size_t)payload_length));
    job->records.length += size;
    return CONVERT_OK;
}

#define READ_VARINT(target)                                                                \
    if ((fault = read_kafka_varint(data, length, &position, &(target))) != CONVERT_OK)     \
        goto done;

/* The records of one (decompressed) records block, as ``_kafka_records_python`` walks them:
 * ``count`` records, those of offsets [first_offset, end_offset) converted. */
static void convert_kafka_records(kafka_job *job)
{
    const uint8_t *data = job->data;
    const wide_t length = job->length;
    int fault = CONVERT_OK;
    uint64_t fault_offset = 0;
    wide_t position = 0;
    for (int32_t n = 0; n < job->count; n++) {
        wide_t record_length, timestamp_delta, offset_delta, key_length, value_length,
            header_count;
        READ_VARINT(record_length)
        wide_t ends_at = position + record_length;
        position += 1; /* the attributes */
        READ_VARINT(timestamp_delta)
        READ_VARINT(offset_delta)
        wide_t offset = (wide_t)job->base_offset + offset_delta;
        if (offset < job->first_offset) {
            if (record_length < 0) {
                fault = CONVERT_NEGATIVE_LENGTH;
                goto done;
            }
            position = ends_at;
            continue;
        }
        if (offset >= job->end_offset) break;
        /* from here first_offset <= offset < end_offset: it fits 64 bits */
        READ_VARINT(key_length)
        wide_t key_at = position;
        if (key_length >= 0) position += key_length;
        READ_VARINT(value_length)
        wide_t payload_at = position, payload_length = 0;
        if (value_length > 0) {
            payload_length = value_length;
            position += value_length;
        }
        READ_VARINT(header_count)
        header_set_clear(&job->headers);
        for (wide_t h = 0; h < header_count; h++) {
            wide_t name_length, header_value_length;
            READ_VARINT(name_length)
            if (name_length < 0) {
                fault = CONVERT_NULL_HEADER_KEY;
                goto done;
            }
            wide_t name_at = position;
            position += name_length;
            /* the name lies inside the block once its value's length is read after it */
            READ_VARINT(header_value_length)
            if (header_value_length <= 0) continue; /* null or empty: no Iggy header holds it */
            wide_t value_at = position;
            position += header_value_length;
            if (header_value_length <= MAX_HEADER_PART && name_length > 0 &&
                name_length <= MAX_HEADER_PART &&
                !(name_length == KEY_HEADER_LENGTH &&
                  memcmp(data + (size_t)name_at, KEY_HEADER, KEY_HEADER_LENGTH) == 0) &&
                valid_utf8(data + (size_t)name_at, (size_t)name_length)) {
                /* value_at <= length: a varint was read just before it */
                if (header_set_put(&job->headers, data, (size_t)name_at, (uint32_t)name_length,
                                   (size_t)value_at, (uint32_t)header_value_length)) {
                    fault = CONVERT_NO_MEMORY;
                    goto done;
                }
            }
        }
        if (position > ends_at || ends_at > length) {
            fault = CONVERT_OVERRUN;
            fault_offset = (uint64_t)offset;
            goto done;
        }
        /* everything read lies inside [0, ends_at]: the kept positions can be copied */
        position = ends_at;
        wide_t timestamp_ms = job->log_append_time ? (wide_t)job->max_timestamp
                                                   : (wide_t)job->base_timestamp + timestamp_delta;
        wide_t timestamp = timestamp_ms > 0 ? timestamp_ms * 1000 : 0;
        if (timestamp > (wide_t)UINT64_MAX) {
            fault = CONVERT_TIMESTAMP;
            fault_offset = (uint64_t)offset;
            goto done;
        }
        uint32_t kept_key = key_length > 0 && key_length <= MAX_HEADER_PART
                                ? (uint32_t)key_length : 0;
        fault = put_iggy_record(job, (uint64_t)offset, (uint64_t)timestamp, (size_t)key_at,
                                kept_key, (size_t)payload_at, (uint64_t)payload_length);
        if (fault != CONVERT_OK) goto done;
        if (!job->found) {
            job->found = 1;
            job->first = (int64_t)offset;
        }
    }
done:
    job->fault = fault;
    job->fault_offset = fault_offset;
}

#undef READ_VARINT

static int int64_arguments(PyObject *const *args, int count, int64_t *values)
{
    for (int i = 0; i < count; i++) {
        long long value = PyLong_AsLongLong(args[i]);
        if (value == -1 && PyErr_Occurred()) return -1;
        values[i] = (int64_t)value;
    }
    return 0;
}

/* kafka_to_iggy(block, base_offset, count, base_timestamp, max_timestamp, log_append_time,
 *               first_offset, end_offset, base_position)
 *     -> (records: bytes, positions: bytes, timestamps: bytes, first_offset: int | None)
 *     -> str        the block does not parse: the reference's ValueError / IndexError text
 *     -> int        STATUS_UNSUPPORTED: past u32 positions or lengths (use the reference) */
static PyObject *kafka_to_iggy(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 9) {
        PyErr_SetString(PyExc_TypeError, "kafka_to_iggy(block, base_offset, count, "
                                         "base_timestamp, max_timestamp, log_append_time, "
                                         "first_offset, end_offset, base_position) takes 9 "
                                         "arguments");
        return NULL;
    }
    int64_t values[8];
    if (int64_arguments(args + 1, 8, values) < 0) return NULL;
    kafka_job job;
    memset(&job, 0, sizeof job);
    if (values[1] < INT32_MIN || values[1] > INT32_MAX || values[7] < 0) {
        PyErr_SetString(PyExc_ValueError, "kafka_to_iggy: count or base_position out of range");
        return NULL;
    }
    job.base_offset = values[0];
    job.count = (int32_t)values[1];
    job.base_timestamp = values[2];
    job.max_timestamp = values[3];
    job.log_append_time = values[4] != 0;
    job.first_offset = values[5];
    job.end_offset = values[6];
    job.base_position = (uint64_t)values[7];
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) return NULL;
    job.data = view.buf;
    job.length = (wide_t)view.len;
    if (view.len >= GIL_RELEASE_MIN_BYTES) {
        Py_BEGIN_ALLOW_THREADS
        convert_kafka_records(&job);
        Py_END_ALLOW_THREADS
    } else {
        convert_kafka_records(&job);
    }
    PyObject *result = NULL;
    if (job.fault == CONVERT_NO_MEMORY) {
        PyErr_NoMemory();
    } else if (job.fault == CONVERT_UNSUPPORTED) {
        result = PyLong_FromLong(STATUS_UNSUPPORTED);
    } else if (job.fault != CONVERT_OK) {
        result = conversion_fault_text(job.fault, job.fault_offset);
    } else {
        PyObject *first = Py_None;
        if (job.found)
            first = PyLong_FromLongLong(job.first);
        else
            Py_INCREF(first);
        if (first != NULL)
            /* y# of a NULL pointer is None: no record converted is empty bytes */
            result = Py_BuildValue("(y#y#y#N)",
                                   job.found ? (const char *)job.records.data : "",
                                   (Py_ssize_t)job.records.length,
                                   job.found ? (const char *)job.positions.data : "",
                                   (Py_ssize_t)job.positions.length,
                                   job.found ? (const char *)job.timestamps.data : "",
                                   (Py_ssize_t)job.timestamps.length, first);
    }
    PyBuffer_Release(&view);
    PyMem_RawFree(job.records.data);
    PyMem_RawFree(job.positions.data);
    PyMem_RawFree(job.timestamps.data);
    header_set_free(&job.headers);
    return result;
}

/* -------------------------------------------- stored Iggy records -> a Kafka records block */

typedef struct {
    uint64_t offset;
    int64_t timestamp_ms;
    size_t headers_at, payload_at;
    uint32_t headers_length, payload_length;
} iggy_row;

/* A header of an Iggy record as a Kafka header: where its key and value lie. */
typedef struct {
    size_t name_at, value_at;
    uint32_t name_length, value_length;
} iggy_header;

typedef struct {
    const uint8_t *data;
    uint64_t length, first_offset, end_offset;
    /* out */
    byte_buffer records;
    iggy_row *rows; /* PyMem_Raw */
    size_t row_count, row_capacity;
    iggy_header *headers; /* one record's, reused */
    size_t header_capacity;
    int64_t max_timestamp;
    int fault;
    uint64_t fault_offset;
} iggy_job;

static int iggy_job_grow_headers(iggy_job *job, size_t wanted)
{
    if (wanted <= job->header_capacity) return 0;
    size_t capacity = job->header_capacity ? 2 * job->header_capacity : 16;
    while (capacity < wanted) capacity *= 2;
    iggy_header *grown = PyMem_RawRealloc(job->headers, capacity * sizeof *grown);
    if (grown == NULL) return -1;
    job->headers = grown;
    job->header_capacity = capacity;
    return 0;
}

/* One record (``put_record``): the ``rill.key`` header (its first one) is the key, the other
 * headers are Kafka headers with their stored bytes, the payload is the value. */
static int put_kafka_record(iggy_job *job, const iggy_row *row, uint64_t base_offset,
                            int64_t base_timestamp)
{
    const uint8_t *data = job->data;
    size_t position = row->headers_at, end = row->headers_at + row->headers_length;
    size_t count = 0, key_at = 0;
    int64_t key_length = -1; /* none: a null key */
    uint64_t headers_size = 0;
    while (position < end) {
        if (end - position < 4) return CONVERT_HEADER_MAP;
        size_t name_length = load_le32(data + position);
        size_t name_at = position + 4;
        if (end - name_at < name_length + 1 + 4) return CONVERT_HEADER_MAP;
        size_t value_length_at = name_at + name_length + 1; /* the kind byte is not carried */
        size_t value_length = load_le32(data + value_length_at);
        size_t value_at = value_length_at + 4;
        if (end - value_at < value_length) return CONVERT_HEADER_MAP;
        position = value_at + value_length;
        if (key_length < 0 && name_length == KEY_HEADER_LENGTH &&
            memcmp(data + name_at, KEY_HEADER, KEY_HEADER_LENGTH) == 0) {
            key_at = value_at;
            key_length = (int64_t)value_length;
            continue;
        }
        if (iggy_job_grow_headers(job, count + 1)) return CONVERT_NO_MEMORY;
        iggy_header *header = &job->headers[count++];
        header->name_at = name_at;
        header->name_length = (uint32_t)name_length;
        header->value_at = value_at;
        header->value_length = (uint32_t)value_length;
        headers_size += kafka_varint_size((wide_t)name_length) + name_length +
                        kafka_varint_size((wide_t)value_length) + value_length;
    }
    wide_t offset_delta = (wide_t)row->offset - (wide_t)base_offset;
    wide_t timestamp_delta = (wide_t)row->timestamp_ms - (wide_t)base_timestamp;
    uint64_t key_size =
        key_length < 0 ? 1 : kafka_varint_size((wide_t)key_length) + (uint64_t)key_length;
    uint64_t body = 1 + kafka_varint_size(timestamp_delta) + kafka_varint_size(offset_delta) +
                    key_size +
                    kafka_varint_size((wide_t)row->payload_length) + row->payload_length +
                    kafka_varint_size((wide_t)count) + headers_size;
    size_t size = kafka_varint_size((wide_t)body) + (size_t)body;
    if (buffer_reserve(&job->records, size)) return CONVERT_NO_MEMORY;
    uint8_t *out = job->records.data + job->records.length;
    out = put_kafka_varint(out, (wide_t)body);
    *out++ = 0; /* attributes */
    out = put_kafka_varint(out, timestamp_delta);
    out = put_kafka_varint(out, offset_delta);
    if (key_length < 0) {
        *out++ = 1; /* zig-zag -1: a null key */
    } else {
        out = put_kafka_varint(out, (wide_t)key_length);
        memcpy(out, data + key_at, (size_t)key_length);
        out += key_length;
    }
    out = put_kafka_varint(out, (wide_t)row->payload_length);
    memcpy(out, data + row->payload_at, row->payload_length);
    out += row->payload_length;
    out = put_kafka_varint(out, (wide_t)count);
    for (size_t i = 0; i < count; i++) {
        const iggy_header *header = &job->headers[i];
        out = put_kafka_varint(out, (wide_t)header->name_length);
        memcpy(out, data + header->name_at, header->name_length);
        out += header->name_length;
        out = put_kafka_varint(out, (wide_t)header->value_length);
        memcpy(out, data + header->value_at, header->value_length);
        out += header->value_length;
    }
    job->records.length += size;
    return CONVERT_OK;
}

/* As ``iggy_to_kafka_python``: walk the whole read first (a record overrunning it is refused
 * even after the range), keep the rows of [first_offset, end_offset), then build their
 * records. */
static void convert_iggy_records(iggy_job *job)
{
    const uint8_t *data = job->data;
    uint64_t at = 0, total = job->length;
    int fault = CONVERT_OK;
    while (total - at >= RECORD_OVERHEAD) { /* at <= total: a record ends inside the read */
        uint64_t offset = load_le64(data + at);
        uint64_t headers_at = at + RECORD_HEADERS_AT;
        uint64_t headers_length = load_le32(data + at + RECORD_REST_AT);
        if (total - headers_at < headers_length + 4) {
            fault = CONVERT_READ_OVERRUN;
            job->fault_offset = offset;
            goto done;
        }
        uint64_t payload_at = headers_at + headers_length + 4;
        uint64_t payload_length = load_le32(data + payload_at - 4);
        if (total - payload_at < payload_length) {
            fault = CONVERT_READ_OVERRUN;
            job->fault_offset = offset;
            goto done;
        }
        if (offset >= job->end_offset) break;
        if (offset >= job->first_offset) {
            if (job->row_count == job->row_capacity) {
                size_t capacity = job->row_capacity ? 2 * job->row_capacity : 64;
                iggy_row *grown = PyMem_RawRealloc(job->rows, capacity * sizeof *grown);
                if (grown == NULL) {
                    fault = CONVERT_NO_MEMORY;
                    goto done;
                }
                job->rows = grown;
                job->row_capacity = capacity;
            }
            iggy_row *row = &job->rows[job->row_count++];
            row->offset = offset;
            row->timestamp_ms = (int64_t)(load_le64(data + at + RECORD_TIMESTAMP_AT) / 1000);
            row->headers_at = (size_t)headers_at;
            row->headers_length = (uint32_t)headers_length;
            row->payload_at = (size_t)payload_at;
            row->payload_length = (uint32_t)payload_length;
        }
        at = payload_at + payload_length;
    }
    if (job->row_count == 0) goto done;
    uint64_t base_offset = job->rows[0].offset;
    int64_t base_timestamp = job->rows[0].timestamp_ms, max_timestamp = base_timestamp;
    for (size_t i = 0; i < job->row_count; i++) {
        const iggy_row *row = &job->rows[i];
        if (row->timestamp_ms > max_timestamp) max_timestamp = row->timestamp_ms;
        fault = put_kafka_record(job, row, base_offset, base_timestamp);
        if (fault != CONVERT_OK) {
            job->fault_offset = row->offset;
            goto done;
        }
    }
    job->max_timestamp = max_timestamp;
done:
    job->fault = fault;
}

/* iggy_to_kafka(records, first_offset, end_offset)
 *     -> (records_block: bytes, count, base_offset, last_offset, base_timestamp_ms,
 *         max_timestamp_ms)   the RecordBatch v2 records of the offsets kept (put_record's)
 *     -> None                 no record of the range
 *     -> str                  malformed: the reference's CannotReadMessage reason, less its
 *                             "Cannot read message: " */
static PyObject *iggy_to_kafka(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError,
                        "iggy_to_kafka(records, first_offset, end_offset) takes 3 arguments");
        return NULL;
    }
    iggy_job job;
    memset(&job, 0, sizeof job);
    unsigned long long values[2];
    for (int i = 0; i < 2; i++) {
        values[i] = PyLong_AsUnsignedLongLong(args[1 + i]);
        if (values[i] == (unsigned long long)-1 && PyErr_Occurred()) return NULL;
    }
    job.first_offset = values[0];
    job.end_offset = values[1];
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) return NULL;
    job.data = view.buf;
    job.length = (uint64_t)view.len;
    if (view.len >= GIL_RELEASE_MIN_BYTES) {
        Py_BEGIN_ALLOW_THREADS
        convert_iggy_records(&job);
        Py_END_ALLOW_THREADS
    } else {
        convert_iggy_records(&job);
    }
    PyObject *result = NULL;
    if (job.fault == CONVERT_NO_MEMORY) {
        PyErr_NoMemory();
    } else if (job.fault != CONVERT_OK) {
        result = conversion_fault_text(job.fault, job.fault_offset);
    } else if (job.row_count == 0) {
        Py_INCREF(Py_None);
        result = Py_None;
    } else {
        result = Py_BuildValue("(y#nKKLL)", (const char *)job.records.data,
                               (Py_ssize_t)job.records.length, (Py_ssize_t)job.row_count,
                               (unsigned long long)job.rows[0].offset,
                               (unsigned long long)job.rows[job.row_count - 1].offset,
                               (long long)job.rows[0].timestamp_ms,
                               (long long)job.max_timestamp);
    }
    PyBuffer_Release(&view);
    PyMem_RawFree(job.records.data);
    PyMem_RawFree(job.rows);
    PyMem_RawFree(job.headers);
    return result;
}
#else
#define RILL_HAVE_CONVERSION 0
#endif /* __SIZEOF_INT128__ */

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
    {"kafka_to_iggy", (PyCFunction)(void (*)(void))kafka_to_iggy, METH_FASTCALL,
     "kafka_to_iggy(block, base_offset, count, base_timestamp, max_timestamp,\n"
     "log_append_time, first_offset, end_offset, base_position) -> (records, positions,\n"
     "timestamps, first_offset), a str (malformed) or an int status: one records block's\n"
     "Kafka records as stored Iggy records."},
    {"iggy_to_kafka", (PyCFunction)(void (*)(void))iggy_to_kafka, METH_FASTCALL,
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
