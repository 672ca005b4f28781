/*
 * _stamp: the C twin of rill.server.storage.records.stamp_batch_python (the write hot loop).
 *
 * Owns: ``stamp`` (validate a SEND message region and build its stored records and index
 * entries) and ``crc32`` (the IEEE / zlib CRC-32: carry-less multiply folding where the CPU
 * has it, 512-bit lanes with AVX-512 VPCLMULQDQ, 128-bit with PCLMULQDQ; slicing-by-8
 * otherwise). Layouts and rules are the ones of ``records.py``; that module is
 * the reference, this one must give the same bytes and accept exactly the same regions.
 *
 * stamp(region, base_offset, timestamp_us, base_position, segment_start, uuid7_block)
 *     -> (records: bytes, index_entries: bytearray, count: int)   the batch is valid
 *     -> int status                                                it is not (STATUS_*)
 *
 * The caller turns a status into the exception the reference raises (for MALFORMED and
 * UNSUPPORTED it runs the reference itself, which raises the DecodeError with its exact
 * message: rejected batches are rare, so their error text is not worth a second copy here).
 *
 * Invariants:
 *   * The GIL is released while the loops run (for regions of GIL_RELEASE_MIN_BYTES or more):
 *     the input buffer is pinned (a buffer export: a bytearray cannot be resized under it) and
 *     every length is read once, in the first pass, and bounds-checked there; the second pass
 *     copies with those lengths only, so even a buffer mutated concurrently (a caller bug) can
 *     give garbage but never an out-of-bounds access. Checksums are computed over the copied
 *     bytes, so a record's checksum always matches the record.
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
    STATUS_MALFORMED = 1,        /* DecodeError: the reference raises it with its message */
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

typedef struct {
    const uint8_t *data;
    uint32_t length;
} header_key;

typedef struct {
    header_key *keys;
    size_t count;
    size_t capacity;
} key_list;

static int compare_keys(const void *a, const void *b)
{
    const header_key *x = a, *y = b;
    if (x->length != y->length) return x->length < y->length ? -1 : 1;
    return memcmp(x->data, y->data, x->length);
}

static int has_duplicate_key(key_list *list)
{
    size_t n = list->count;
    header_key *keys = list->keys;
    if (n <= 16) {
        for (size_t i = 0; i < n; i++)
            for (size_t j = i + 1; j < n; j++)
                if (keys[i].length == keys[j].length &&
                    memcmp(keys[i].data, keys[j].data, keys[i].length) == 0)
                    return 1;
        return 0;
    }
    qsort(keys, n, sizeof *keys, compare_keys);
    for (size_t i = 1; i < n; i++)
        if (compare_keys(&keys[i - 1], &keys[i]) == 0) return 1;
    return 0;
}

/* rill.protocol.headers.header_values_size: validate a map's entries (key 1..255 bytes of
 * UTF-8, kind 1..15, value 1..255 bytes, unique keys, nothing left over) and add up the value
 * lengths. Returns 0, -1 for a malformed map, -2 when out of memory. */
static int header_values_size(const uint8_t *p, size_t n, key_list *list, uint64_t *total)
{
    size_t pos = 0;
    uint64_t values = 0;
    list->count = 0;
    while (pos < n) {
        if (n - pos < 4) return -1;
        uint32_t key_length = load_le32(p + pos);
        pos += 4;
        if (key_length < 1 || key_length > 255 || n - pos < key_length) return -1;
        const uint8_t *key = p + pos;
        if (!valid_utf8(key, key_length)) return -1;
        pos += key_length;
        if (n - pos < 5) return -1;
        uint8_t kind = p[pos];
        if (kind < 1 || kind > 15) return -1;
        uint32_t value_length = load_le32(p + pos + 1);
        pos += 5;
        if (value_length < 1 || value_length > 255 || n - pos < value_length) return -1;
        pos += value_length;
        values += value_length;
        if (list->count == list->capacity) {
            size_t capacity = list->capacity ? 2 * list->capacity : 16;
            header_key *grown = PyMem_RawRealloc(list->keys, capacity * sizeof *grown);
            if (grown == NULL) return -2;
            list->keys = grown;
            list->capacity = capacity;
        }
        list->keys[list->count].data = key;
        list->keys[list->count].length = key_length;
        list->count++;
    }
    if (has_duplicate_key(list)) return -1;
    *total = values;
    return 0;
}

/* ------------------------------------------------------------------ the two passes */

typedef struct {
    uint64_t start;          /* first byte of the SEND message in the region */
    uint64_t stop;           /* one past its last byte */
    uint32_t payload_length; /* the payload is the last payload_length bytes */
    uint32_t zero_id;        /* 1 when the id is all zero bytes */
} message_t;

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
    /* filled by the second pass */
    uint8_t *records;
    uint8_t *index_entries;
    const uint8_t *uuids;
} batch_t;

static const uint8_t ZERO_ID[16] = {0};

/* Pass one: walk and validate the region, exactly as the reference loop does, and note where
 * each message is. Returns 0 or a STATUS_*, or -1 when out of memory. */
static int scan_region(batch_t *b)
{
    const uint8_t *data = b->data;
    const uint64_t end = b->end;
    uint64_t position = 0, payload_total = 0, headers_total = 0;
    key_list keys = {NULL, 0, 0};
    int status = 0;
    while (position < end) {
        if (end - position < SEND_PREFIX_SIZE) { status = STATUS_MALFORMED; break; }
        uint32_t headers_length = load_le32(data + position + 16);
        uint64_t payload_position = position + 24 + headers_length;
        if (headers_length) {
            if (payload_position - 4 > end) { status = STATUS_MALFORMED; break; }
            uint64_t values = 0;
            int found = header_values_size(data + position + SEND_PREFIX_SIZE, headers_length,
                                           &keys, &values);
            if (found == -2) { status = -1; break; }
            if (found < 0) { status = STATUS_MALFORMED; break; }
            headers_total += values;
        }
        if (payload_position > end) { status = STATUS_MALFORMED; break; }
        uint32_t payload_length = load_le32(data + payload_position - 4);
        uint64_t stop = payload_position + payload_length;
        if (payload_length == 0 || stop > end) { status = STATUS_MALFORMED; break; }
        payload_total += payload_length;
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
    /* offsets past u64: the reference fails mid-loop (struct.error), before any limit */
    if (b->count && b->base_offset > UINT64_MAX - (b->count - 1)) return STATUS_UNSUPPORTED;
    /* the batch limits, in the reference's order, once the whole region parsed */
    if (b->count == 0) return STATUS_NO_MESSAGES;
    if (headers_total > MAX_HEADERS_BYTES) return STATUS_HEADERS_TOO_BIG;
    if (payload_total > MAX_PAYLOAD_BYTES) return STATUS_PAYLOAD_TOO_BIG;
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
    {"crc32", crc32_function, METH_VARARGS, "crc32(data, value=0): zlib's CRC-32."},
    {"set_pclmul", set_pclmul, METH_VARARGS,
     "set_pclmul(fold=True, wide=True) -> str: use carry-less multiply folding (512-bit lanes\n"
     "if ``wide``) where the CPU has it; returns the CRC-32 method now in use."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef stamp_module = {
    PyModuleDef_HEAD_INIT, "_stamp",
    "C twin of rill.server.storage.records.stamp_batch_python (see the module source).", -1,
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
        PyModule_AddIntConstant(module, "GIL_RELEASE_MIN_BYTES", GIL_RELEASE_MIN_BYTES) ||
        PyModule_AddObject(module, "MAX_POSITION",
                           PyLong_FromUnsignedLongLong(MAX_POSITION)) ||
        PyModule_AddStringConstant(module, "CRC32_METHOD", crc32_method())) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
