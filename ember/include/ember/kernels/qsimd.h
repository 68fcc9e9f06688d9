/*
 * ember kernels: the integer vector abstraction of the int8 kernels (qconv.h, qdense.h):
 * u8 x s8 products summed four at a time into int32 lanes, exactly (no saturation), and the
 * requantizing epilogue. Selected by the compiler's ISA macros:
 *
 *   __AVX512VNNI__ && __AVX512BW__   16 lanes, vpdpbusd (4 u8 x s8 products per lane, one
 *                                     instruction); EMBER_Q_VNNI
 *   __AVX2__                          8 lanes, vpmaddwd on the bytes widened to int16 pairs
 *                                     (u8 x s8 < 2^15: exact); EMBER_Q_PAIRS
 *   __SSE2__                          4 lanes, the same on 128-bit vectors; EMBER_Q_PAIRS
 *   otherwise (or EMBER_KERNELS_PORTABLE)   4 lanes of portable C99
 *
 * EMBER_QDOT2 adds the two int16 x int16 products of each lane's word pair (vpdpwssd with
 * VNNI, vpmaddwd otherwise; ember_qdot2 in C): the depthwise paths' taps (qconv_dw.h).
 * AVX2's vpmaddubsw is not used: its int16 sums of two u8 x s8 products saturate
 * (255 * 127 * 2 > 32767), so results would differ from onnxruntime's VNNI ones.
 * The SIMD paths use GCC/Clang vector extensions and builtins, not <immintrin.h> (which costs
 * about a second of compile time per unit).
 */
#ifndef EMBER_KERNELS_QSIMD_H_
#define EMBER_KERNELS_QSIMD_H_

#include <stdint.h>
#include <string.h>

#if !defined(EMBER_KERNELS_PORTABLE) && defined(__GNUC__) && defined(__AVX512VNNI__) && \
    defined(__AVX512BW__)
#define EMBER_QL 16
#define EMBER_Q_VNNI 1
#define EMBER_Q_SIMD_NAME "avx512vnni"
#elif !defined(EMBER_KERNELS_PORTABLE) && defined(__GNUC__) && defined(__AVX2__)
#define EMBER_QL 8
#define EMBER_Q_PAIRS 1
#define EMBER_Q_SIMD_NAME "avx2"
#elif !defined(EMBER_KERNELS_PORTABLE) && defined(__GNUC__) && defined(__SSE2__)
#define EMBER_QL 4
#define EMBER_Q_PAIRS 1
#define EMBER_Q_SIMD_NAME "sse2"
#else
#define EMBER_QL 4
#define EMBER_Q_SIMD_NAME "portable"
#endif

#if defined(EMBER_Q_VNNI) || defined(EMBER_Q_PAIRS)
#define EMBER_Q_VECTOR_EXT 1
typedef int32_t ember_qvi __attribute__((vector_size(4 * EMBER_QL)));
typedef float ember_qvf __attribute__((vector_size(4 * EMBER_QL)));
typedef int16_t ember_qvh __attribute__((vector_size(4 * EMBER_QL)));
typedef int32_t ember_qvi_u __attribute__((vector_size(4 * EMBER_QL), aligned(1), may_alias));
typedef int8_t ember_qvb __attribute__((vector_size(EMBER_QL)));
typedef uint8_t ember_qvub __attribute__((vector_size(EMBER_QL)));
static inline ember_qvi ember_qload(const void* p) { return *(const ember_qvi_u*)p; }
static inline ember_qvi ember_qset1(int32_t v) {
  ember_qvi z = {0};
  return z + v;
}
#if defined(EMBER_Q_VNNI)
/* acc + sum of the four u8 (a) x s8 (b) byte products of each lane */
#if defined(__clang__)
#define EMBER_QDOT4(acc, a, b) ((ember_qvi)__builtin_ia32_vpdpbusd512((acc), (a), (b)))
#else
#define EMBER_QDOT4(acc, a, b) ((ember_qvi)__builtin_ia32_vpdpbusd_v16si((acc), (a), (b)))
#endif
/* acc + the two int16 x int16 pair products of each lane (vpdpwssd: no saturation) */
#if defined(__clang__)
#define EMBER_QDOT2(acc, a, b) ((ember_qvi)__builtin_ia32_vpdpwssd512((acc), (a), (b)))
#else
#define EMBER_QDOT2(acc, a, b) ((ember_qvi)__builtin_ia32_vpdpwssd_v16si((acc), (a), (b)))
#endif
#else
/* acc + the two int16 x int16 pair products of each lane (vpmaddwd) */
#if EMBER_QL == 8
#define EMBER_QMADD(a, b) \
  ((ember_qvi)__builtin_ia32_pmaddwd256((ember_qvh)(a), (ember_qvh)(b)))
#else
#define EMBER_QMADD(a, b) \
  ((ember_qvi)__builtin_ia32_pmaddwd128((ember_qvh)(a), (ember_qvh)(b)))
#endif
#define EMBER_QDOT2(acc, a, b) ((acc) + EMBER_QMADD((a), (b)))
#endif
/* Shuffles of 16-byte vectors (two of them: indexes 0-15 the first, 16-31 the second) and of
 * 8 x u16 vectors, for byte interleaves and transposes; GCC's __builtin_shuffle takes the
 * indexes as a vector, Clang's __builtin_shufflevector as arguments. */
typedef uint8_t ember_qb16 __attribute__((vector_size(16)));
typedef uint16_t ember_qh8 __attribute__((vector_size(16)));
typedef uint32_t ember_qw4 __attribute__((vector_size(16)));
#if defined(__clang__)
#define EMBER_QSHUF16(a, b, ...) __builtin_shufflevector((a), (b), __VA_ARGS__)
#define EMBER_QSHUF8H(a, b, ...) __builtin_shufflevector((a), (b), __VA_ARGS__)
#else
#define EMBER_QSHUF16(a, b, ...) __builtin_shuffle((a), (b), (ember_qb16){__VA_ARGS__})
#define EMBER_QSHUF8H(a, b, ...) __builtin_shuffle((a), (b), (ember_qh8){__VA_ARGS__})
#endif
#if defined(EMBER_Q_VNNI)
/* The even lanes of a, then of b (vpermt2d). */
#if defined(__clang__)
#define EMBER_QEVENS(a, b) \
  __builtin_shufflevector((a), (b), 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30)
#else
#define EMBER_QEVENS(a, b)                                                                \
  __builtin_shuffle((a), (b),                                                             \
                    (ember_qvi){0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30})
#endif
/* The int32 lanes of v under mask m stored to p (vmovdqu32 with a mask). */
#define EMBER_QSTORE32_MASK(p, v, m) \
  __builtin_ia32_storedqusi512_mask((int*)(p), (v), (m))
#endif
#endif /* vector extensions */

/* The int16 pairs of four s8 weights (b0, b1, b2, b3): (b0, b2) and (b1, b3), each an int32
 * word holding two int16 (low half first); the u8 activations are split alike. */
static inline uint32_t ember_qpair(int32_t lo, int32_t hi) {
  return (uint32_t)(uint16_t)(int16_t)lo | ((uint32_t)(uint16_t)(int16_t)hi << 16);
}

/* The sum of the two int16 x int16 products of words a and b (low halves, high halves): one
 * lane of EMBER_QDOT2, in C. */
static inline int32_t ember_qdot2(uint32_t a, uint32_t b) {
  return (int32_t)(int16_t)(uint16_t)a * (int16_t)(uint16_t)b +
         (int32_t)(int16_t)(uint16_t)(a >> 16) * (int16_t)(uint16_t)(b >> 16);
}

/* round half to even of float v already clamped into [lo - zp, hi - zp] (|v| < 2^22), plus
 * zp: ONNX's requantization of one value (onnxruntime: nearbyint then add, then clamp). */
static inline int32_t ember_qround(float v) {
  const float magic = 12582912.0f; /* 1.5 * 2^23 */
  return (int32_t)((v + magic) - magic); /* not folded: IEEE, no -ffast-math */
}

/* The requantized value of float v (a scaled accumulator, a sum of scaled values):
 * saturate(round(v) + zp) into [lo, hi]. */
static inline int32_t ember_qsaturate(float v, int32_t zp, int32_t lo, int32_t hi) {
  const float flo = (float)(lo - zp), fhi = (float)(hi - zp);
  v = v < flo ? flo : v;
  v = v > fhi ? fhi : v;
  v = v == v ? v : 0.0f; /* NaN (a NaN scale): onnxruntime's cvtps gives 0x80000000 */
  return ember_qround(v) + zp;
}

/* The requantized value of accumulator acc: saturate(round(acc * scale) + zp) into [lo, hi]. */
static inline int32_t ember_qrequant(int32_t acc, float scale, int32_t zp, int32_t lo,
                                     int32_t hi) {
  return ember_qsaturate((float)acc * scale, zp, lo, hi);
}

#if defined(EMBER_Q_VECTOR_EXT)
/* lanes of a where mask m is set, else of b (C has no ?: on vectors) */
static inline ember_qvf ember_qselect(ember_qvi m, ember_qvf a, ember_qvf b) {
  return (ember_qvf)((m & (ember_qvi)a) | (~m & (ember_qvi)b));
}

typedef uint8_t ember_qvub_u __attribute__((vector_size(EMBER_QL), aligned(1), may_alias));
typedef char ember_qc16 __attribute__((vector_size(16)));

/* float -> int32 lanes rounded under the current rounding mode (nearest, ties to even: the
 * default), one instruction (vcvtps2dq); |v| < 2^31. */
#if defined(EMBER_Q_VNNI)
#define EMBER_QCVT_RN(v) \
  ((ember_qvi)__builtin_ia32_cvtps2dq512_mask((v), (ember_qvi){0}, (short)-1, 4))
#elif EMBER_QL == 8
#define EMBER_QCVT_RN(v) ((ember_qvi)__builtin_ia32_cvtps2dq256((v)))
#else
#define EMBER_QCVT_RN(v) ((ember_qvi)__builtin_ia32_cvtps2dq((v)))
#endif

/* Lanewise max(a, b) and min(a, b) as maxps/minps compute them: b where either is NaN, so
 * EMBER_QMAX(lo, v) and EMBER_QMIN(hi, v) keep a NaN v (one instruction each, where a select
 * through a compare mask took three). */
#if defined(EMBER_Q_VNNI) && defined(__clang__)
#define EMBER_QMAX(a, b) ((ember_qvf)__builtin_ia32_maxps512((a), (b), 4))
#define EMBER_QMIN(a, b) ((ember_qvf)__builtin_ia32_minps512((a), (b), 4))
#elif defined(EMBER_Q_VNNI)
#define EMBER_QMAX(a, b) \
  ((ember_qvf)__builtin_ia32_maxps512_mask((a), (b), (ember_qvf){0}, (short)-1, 4))
#define EMBER_QMIN(a, b) \
  ((ember_qvf)__builtin_ia32_minps512_mask((a), (b), (ember_qvf){0}, (short)-1, 4))
#elif EMBER_QL == 8
#define EMBER_QMAX(a, b) ((ember_qvf)__builtin_ia32_maxps256((a), (b)))
#define EMBER_QMIN(a, b) ((ember_qvf)__builtin_ia32_minps256((a), (b)))
#else
#define EMBER_QMAX(a, b) ((ember_qvf)__builtin_ia32_maxps((a), (b)))
#define EMBER_QMIN(a, b) ((ember_qvf)__builtin_ia32_minps((a), (b)))
#endif

/* Lanes v clamped into [rq->lo, rq->hi] (an ember_qrq, below), rounded half to even to int32
 * (|v| <= 255 then, and a huge value saturates; a NaN lane passes the clamps and converts to
 * 0x80000000). */
#define EMBER_QCLAMP_RN(v, rq) EMBER_QCVT_RN(EMBER_QMIN((rq)->hi, EMBER_QMAX((rq)->lo, (v))))

/* The low byte of each lane of q (truncation). Without AVX-512's vpmovdb, GCC converts
 * lane by lane (an extract, a zero extension, a shift and an or per byte: a fifth of a 1x1
 * conv's time over 16 channels at AVX2); here the lanes' low bytes go through the saturating
 * packs (exact on 0..255) to the low bytes of each 128-bit half, then one vpermd. */
static inline __attribute__((always_inline)) ember_qvub ember_qlow_bytes(ember_qvi q) {
#if defined(EMBER_Q_PAIRS)
  typedef short ember_qvh_s __attribute__((vector_size(4 * EMBER_QL)));
  const ember_qvi low = q & 0xFF;
  ember_qvub out;
#if EMBER_QL == 8
  const ember_qvh_s h = (ember_qvh_s)__builtin_ia32_packssdw256(low, low);
  ember_qvi w = (ember_qvi)__builtin_ia32_packuswb256(h, h); /* bytes 0-3, then 4-7 at lane 4 */
#if defined(__clang__)
  w = __builtin_shufflevector(w, w, 0, 4, 0, 0, 0, 0, 0, 0);
#else
  w = __builtin_shuffle(w, (ember_qvi){0, 4, 0, 0, 0, 0, 0, 0});
#endif
#else
  const ember_qvh_s h = (ember_qvh_s)__builtin_ia32_packssdw128(low, low);
  const ember_qvi w = (ember_qvi)__builtin_ia32_packuswb128(h, h);
#endif
  memcpy(&out, &w, sizeof(out));
  return out;
#else
  return __builtin_convertvector(q, ember_qvub);
#endif
}

/* The requantizing epilogue's per-call constants as vectors: y's bounds minus its zero point
 * and the zero point. Built once per call and held in locals: read through the args struct,
 * they were reloaded for every vector (a byte store to y may alias the struct), which cost
 * as much as the products of a 1x1 conv over 16 channels. */
typedef struct {
  ember_qvf lo, hi;
  ember_qvi zp;
} ember_qrq;

static inline ember_qrq ember_qrq_make(int32_t zp, int32_t lo, int32_t hi) {
  const ember_qvf z = {0};
  ember_qrq rq;
  rq.lo = z + (float)(lo - zp);
  rq.hi = z + (float)(hi - zp);
  rq.zp = ember_qset1(zp);
  return rq;
}

/* The requantized lanes of acc (scale: the lanes' multipliers) as bytes, u8 or s8 by the
 * bounds: saturate(round_half_even(acc * scale) + zp), clamped in float first (|v| <= 255
 * then, and a huge product saturates). A NaN lane (NaN scale) passes the clamps, converts to
 * 0x80000000 and stores the low byte of that plus zp: zp, as ember_qrequant gives. */
static inline __attribute__((always_inline)) ember_qvub ember_qrq_bytes(ember_qvi acc,
                                                                       ember_qvf scale,
                                                                       const ember_qrq* rq) {
  const ember_qvf v = __builtin_convertvector(acc, ember_qvf) * scale;
  return ember_qlow_bytes(EMBER_QCLAMP_RN(v, rq) + rq->zp);
}

#if defined(EMBER_Q_VNNI) && defined(__AVX512VBMI__)
/* Byte permutes of 64-byte vectors (AVX-512 VBMI): vpermb (idx's low 6 bits pick a byte of
 * v), vpermt2b (bit 6 picks v1 over v0); masked byte loads (masked-off bytes from src, never
 * read: no fault) and stores; bytes of b where mask m is set, else of a (vpblendmb). */
#define EMBER_Q_VBMI 1
typedef char ember_qc64 __attribute__((vector_size(64)));
typedef char ember_qc64_u __attribute__((vector_size(64), aligned(1), may_alias));
typedef long long ember_qvl __attribute__((vector_size(64)));
#if defined(__clang__)
#define EMBER_QPERMB(v, idx) ((ember_qc64)__builtin_ia32_permvarqi512((v), (idx)))
#define EMBER_QPERM2B(v0, idx, v1) ((ember_qc64)__builtin_ia32_vpermi2varqi512((v0), (idx), (v1)))
#define EMBER_QLOADB_MASK(p, src, m) \
  ((ember_qc64)__builtin_ia32_loaddquqi512_mask((const ember_qc64*)(p), (src), (m)))
#define EMBER_QBLENDB(m, a, b) ((ember_qc64)__builtin_ia32_selectb_512((m), (b), (a)))
#define EMBER_QHALVES(a, b) __builtin_shufflevector((a), (b), 0, 1, 2, 3, 8, 9, 10, 11)
#define EMBER_QSTOREB_MASK(p, v, m) __builtin_ia32_storedquqi512_mask((ember_qc64*)(p), (v), (m))
#else
#define EMBER_QPERMB(v, idx) \
  ((ember_qc64)__builtin_ia32_permvarqi512_mask((v), (idx), (v), (unsigned long long)-1))
#define EMBER_QPERM2B(v0, idx, v1) \
  ((ember_qc64)__builtin_ia32_vpermt2varqi512_mask((idx), (v0), (v1), (unsigned long long)-1))
#define EMBER_QLOADB_MASK(p, src, m) \
  ((ember_qc64)__builtin_ia32_loaddquqi512_mask((const char*)(p), (src), (m)))
#define EMBER_QBLENDB(m, a, b) ((ember_qc64)__builtin_ia32_blendmb_512_mask((a), (b), (m)))
#define EMBER_QHALVES(a, b) __builtin_shuffle((a), (b), (ember_qvl){0, 1, 2, 3, 8, 9, 10, 11})
#define EMBER_QSTOREB_MASK(p, v, m) __builtin_ia32_storedquqi512_mask((char*)(p), (v), (m))
#endif

/* The requantized lanes of n vectors acc (1 to 4; ember_qrq_bytes) as bytes, in order, in
 * the first 16 n bytes: the lanes' low bytes gathered by byte permutes, two vectors each (a
 * vpmovdb per vector, two uops, and its store took a fifth of a 1x1 conv's time over 16
 * input channels). */
static inline __attribute__((always_inline)) ember_qc64 ember_qrq_pack4(
    const ember_qvi* acc, const ember_qvf* scale, const ember_qrq* rq, const int n) {
  const ember_qc64 low = {0,  4,  8,  12, 16, 20, 24, 28, 32, 36, 40, 44, 48, 52, 56, 60,
                          64, 68, 72, 76, 80, 84, 88, 92, 96, 100, 104, 108, 112, 116, 120, 124};
  ember_qvi q[4] = {{0}, {0}, {0}, {0}};
  int v;
  for (v = 0; v < n; ++v) {
    const ember_qvf f = __builtin_convertvector(acc[v], ember_qvf) * scale[v];
    q[v] = EMBER_QCLAMP_RN(f, rq) + rq->zp;
  }
  if (n <= 2) return EMBER_QPERM2B((ember_qc64)q[0], low, (ember_qc64)q[1]);
  /* both pairs' first 32 bytes (vinserti64x4) */
  return (ember_qc64)EMBER_QHALVES((ember_qvl)EMBER_QPERM2B((ember_qc64)q[0], low,
                                                            (ember_qc64)q[1]),
                                   (ember_qvl)EMBER_QPERM2B((ember_qc64)q[2], low,
                                                            (ember_qc64)q[3]));
}

/* The first n bytes of b stored to y (n <= 64; one masked store). */
static inline __attribute__((always_inline)) void ember_qstore64_part(uint8_t* y, ember_qc64 b,
                                                                      int64_t n) {
  EMBER_QSTOREB_MASK(y, b, n >= 64 ? ~0ull : (1ull << n) - 1);
}
#endif

/* The first n < EMBER_QL bytes of q stored to y: one masked store with AVX-512 (a byte loop
 * there, inlined into unrolled tiles, drew GCC 12's false -Wstringop-overread). */
static inline __attribute__((always_inline)) void ember_qstore_part(uint8_t* y, ember_qvub q,
                                                                   int64_t n) {
#if defined(EMBER_Q_VNNI) && defined(__clang__)
  __builtin_ia32_storedquqi128_mask((ember_qc16*)y, (ember_qc16)q,
                                    (unsigned short)((1u << n) - 1u));
#elif defined(EMBER_Q_VNNI)
  __builtin_ia32_storedquqi128_mask((char*)y, (ember_qc16)q, (unsigned short)((1u << n) - 1u));
#else
  int64_t i;
  for (i = 0; i < n; ++i) y[i] = q[i];
#endif
}

/* The requantized lanes of acc, as bytes (u8 or s8 by [lo, hi]) stored to y (n <= EMBER_QL
 * of them). */
static inline void ember_qstore(uint8_t* y, ember_qvi acc, float scale, int32_t zp, int32_t lo,
                                int32_t hi, int64_t n) {
  ember_qvf z = {0};
  ember_qvf v = __builtin_convertvector(acc, ember_qvf) * (z + scale);
  ember_qvf flo = z + (float)(lo - zp), fhi = z + (float)(hi - zp);
  ember_qvi q;
  v = ember_qselect(v < flo, flo, v);
  v = ember_qselect(v > fhi, fhi, v);
  v = ember_qselect(v == v, v, z); /* NaN -> 0 */
  /* rounded to nearest even by adding and subtracting 1.5 * 2^23 (|v| <= 255 here), then an
   * exact convert: EMBER_QCVT_RN in this epilogue made a 3x3/2 128->128 conv 6% slower
   * (the 1x1 convs it was for alike either way) */
  v = (v + 12582912.0f) - 12582912.0f;
  q = __builtin_convertvector(v, ember_qvi) + zp;
  {
    ember_qvub b = ember_qlow_bytes(q);
    if (n == EMBER_QL) {
      *(ember_qvub_u*)y = b; /* one vector store, not through a copy */
    } else {
      memcpy(y, &b, (size_t)n);
    }
  }
}
#endif

/* The float epilogue alone (no int8 products): lanes v, a sum of scaled values (qadd.h's
 * elementwise add), clamped, rounded half to even, plus the zero point, stored as bytes. Its
 * lanes follow the float ISA, not the dot-product one that keys EMBER_QL: 16 wherever
 * AVX-512F is (x86-64-v4 without VNNI too, where EMBER_QL's 8 took twice the time), qsimd's
 * own elsewhere on x86, and 4 lanes of GCC/Clang generic vectors on other targets (aarch64's
 * NEON, ...), which x86's builtins do not reach. Every path gives ember_qsaturate's low
 * byte, bit for bit: a NaN lane converts to 0x80000000 (x86) or 0 (generic), either way zp's
 * byte. EMBER_QF_L, the types ember_qfvf/qfvi/qfvub, the bounds ember_qfrq (ember_qfrq_make)
 * and ember_qf_store. */
#if defined(EMBER_QF_GENERIC) && defined(__GNUC__) /* tests: the generic path on any target */
#define EMBER_QF_L 4
#elif defined(EMBER_Q_VNNI) || (defined(EMBER_Q_VECTOR_EXT) && !defined(__AVX512F__))
#define EMBER_QF_L EMBER_QL
#define EMBER_QF_SHARED 1 /* qsimd's lanes and epilogue */
typedef ember_qvf ember_qfvf;
typedef ember_qvi ember_qfvi;
typedef ember_qvub ember_qfvub;
typedef ember_qrq ember_qfrq;
#define ember_qfrq_make ember_qrq_make
#elif defined(EMBER_Q_VECTOR_EXT)
#define EMBER_QF_L 16 /* AVX-512F without VNNI */
#define EMBER_QF_AVX512 1
#elif !defined(EMBER_KERNELS_PORTABLE) && defined(__GNUC__) && !defined(__i386__)
#define EMBER_QF_L 4
#endif

#if defined(EMBER_QF_L) && !defined(EMBER_QF_SHARED)
typedef float ember_qfvf __attribute__((vector_size(4 * EMBER_QF_L)));
typedef int32_t ember_qfvi __attribute__((vector_size(4 * EMBER_QF_L)));
typedef uint8_t ember_qfvub __attribute__((vector_size(EMBER_QF_L)));
typedef struct {
  ember_qfvf lo, hi;
  ember_qfvi zp;
} ember_qfrq;

/* ember_qrq_make's bounds on these lanes */
static inline ember_qfrq ember_qfrq_make(int32_t zp, int32_t lo, int32_t hi) {
  const ember_qfvf z = {0};
  const ember_qfvi zi = {0};
  const ember_qfrq rq = {z + (float)(lo - zp), z + (float)(hi - zp), zi + zp};
  return rq;
}

#if defined(EMBER_QF_AVX512)
/* maxps, minps (a NaN v kept) and vcvtps2dq on zmm, as EMBER_QCLAMP_RN with VNNI */
#if defined(__clang__)
#define EMBER_QF_CLAMP_RN(v, rq)                                                         \
  ((ember_qfvi)__builtin_ia32_cvtps2dq512_mask(                                          \
      __builtin_ia32_minps512((rq)->hi, __builtin_ia32_maxps512((rq)->lo, (v), 4), 4),   \
      (ember_qfvi){0}, (short)-1, 4))
#else
#define EMBER_QF_CLAMP_RN(v, rq)                                                         \
  ((ember_qfvi)__builtin_ia32_cvtps2dq512_mask(                                          \
      __builtin_ia32_minps512_mask(                                                      \
          (rq)->hi,                                                                      \
          __builtin_ia32_maxps512_mask((rq)->lo, (v), (ember_qfvf){0}, (short)-1, 4),    \
          (ember_qfvf){0}, (short)-1, 4),                                                \
      (ember_qfvi){0}, (short)-1, 4))
#endif
#endif
#endif

#if defined(EMBER_QF_L)
/* The lanes *v requantized (see above) and stored as EMBER_QF_L bytes to y. Operands by
 * pointer: a vector argument's ABI varies with the target's flags. */
static inline __attribute__((always_inline)) void ember_qf_store(uint8_t* y, const ember_qfvf* v,
                                                                 const ember_qfrq* rq) {
#if defined(EMBER_QF_SHARED)
  const ember_qfvub b = ember_qlow_bytes(EMBER_QCLAMP_RN(*v, rq) + rq->zp);
#elif defined(EMBER_QF_AVX512)
  const ember_qfvub b = __builtin_convertvector(EMBER_QF_CLAMP_RN(*v, rq) + rq->zp, ember_qfvub);
#else
  /* Generic vectors: compares and selects (a NaN lane fails both compares: kept, then +0),
   * the round by adding and subtracting 1.5 * 2^23 (|v| < 2^22 after the clamps: ties to
   * even under the default rounding, as vcvtps2dq and numpy's rint), an exact conversion. */
  const ember_qfvi m_lo = *v < rq->lo;
  ember_qfvf c = (ember_qfvf)((m_lo & (ember_qfvi)rq->lo) | (~m_lo & (ember_qfvi)*v));
  const ember_qfvi m_hi = c > rq->hi;
  ember_qfvub b;
  c = (ember_qfvf)((m_hi & (ember_qfvi)rq->hi) | (~m_hi & (ember_qfvi)c));
  c = (ember_qfvf)((c == c) & (ember_qfvi)c);
  c = (c + 12582912.0f) - 12582912.0f; /* not folded: IEEE, no -ffast-math */
  b = __builtin_convertvector(__builtin_convertvector(c, ember_qfvi) + rq->zp, ember_qfvub);
#endif
  memcpy(y, &b, sizeof b);
}
#endif

#endif /* EMBER_KERNELS_QSIMD_H_ */
