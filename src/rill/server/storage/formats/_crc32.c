/*
 * _crc32.c, a unit of the ``_stamp`` module (_stamp.c defines the module): zlib's CRC-32
 * (IEEE, reflected), the checksum of every stored Iggy record. Carry-less multiply folding
 * where the CPU has it (512-bit lanes with AVX-512 VPCLMULQDQ, 128-bit with PCLMULQDQ),
 * slicing-by-8 otherwise.
 *
 * Owns: ``stamp_crc32`` (for the other units), the module's ``crc32`` and ``set_pclmul``
 * (tests switch the folding off to check every path on the same inputs), and the CPU check
 * ``crc32_setup`` runs at module init.
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

uint32_t stamp_crc32(uint32_t crc, const uint8_t *buf, size_t len)
{
    return crc32_ieee(crc, buf, len);
}

PyObject *crc32_function(PyObject *module, PyObject *args)
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

const char *crc32_method(void)
{
    return have_vpclmul ? "vpclmulqdq folding (AVX-512)"
           : have_pclmul ? "pclmulqdq folding"
                         : "slicing-by-8";
}

PyObject *crc32_set_pclmul(PyObject *module, PyObject *args)
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

void crc32_setup(void)
{
    crc_init_tables();
    detect_cpu();
}
