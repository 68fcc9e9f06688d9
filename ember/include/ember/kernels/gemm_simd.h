/*
 * ember kernels: a small float vector abstraction shared by the GEMM, softmax and layer-norm
 * kernels, selected by the compiler's ISA macros:
 *
 *   __AVX512F__            16 lanes (AVX-512F)
 *   __AVX2__ && __FMA__     8 lanes (AVX2 + FMA)
 *   __SSE2__, __ARM_NEON    4 lanes (multiply + add on SSE2)
 *   otherwise               4 lanes, portable C99 (a struct of 4 floats; compilers vectorise
 *                           it where they can); also when EMBER_KERNELS_PORTABLE is defined
 *
 * The SIMD paths use GCC/Clang vector extensions (__attribute__((vector_size))), not
 * <immintrin.h>, so including this header stays cheap to compile; the compiler's -march
 * flags decide the instructions.
 *
 * EMBER_VL is the lane count. Every function is static inline so a translation unit that
 * uses only some of them compiles warning-free with -std=c99 -Wall -Wextra.
 * ember_vexp is a Cephes-style exp (relative error ~2e-7 over the float range, inputs
 * clamped to [-88.37, 88.37]); ember_verf and ember_vtanh are vmath.h's ember_erff and
 * ember_tanhf (<= 2 ulp, branch-free) on vectors.
 */
#ifndef EMBER_KERNELS_GEMM_SIMD_H_
#define EMBER_KERNELS_GEMM_SIMD_H_

#include <math.h>
#include <stdint.h>
#include <string.h>

/* 1.5 * 2^23: x + EMBER_ROUND_MAGIC rounds x (|x| < 2^22) to an integer n, held in the low
 * mantissa bits of the sum; (x + magic) - magic is n as a float. */
#define EMBER_ROUND_MAGIC 12582912.0f

#if !defined(EMBER_KERNELS_PORTABLE) && defined(__GNUC__) && \
    (defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__)) || \
     defined(__SSE2__) || defined(__ARM_NEON))
/* GCC/Clang vector extensions: plain C arithmetic on vector types, compiled to the ISA of the
 * -march flags (a * b + c becomes an FMA under -ffp-contract=fast). No <immintrin.h>: that
 * header alone costs about a second of compile time per translation unit. */
#if defined(__AVX512F__)
#define EMBER_VL 16
#define EMBER_SIMD_NAME "avx512"
#elif defined(__AVX2__) && defined(__FMA__)
#define EMBER_VL 8
#define EMBER_SIMD_NAME "avx2"
#elif defined(__SSE2__)
#define EMBER_VL 4
#define EMBER_SIMD_NAME "sse2"
#else
#define EMBER_VL 4
#define EMBER_SIMD_NAME "neon"
#endif
#define EMBER_SIMD_VECTOR_EXT 1
typedef float ember_vf __attribute__((vector_size(4 * EMBER_VL)));
typedef int32_t ember_vi __attribute__((vector_size(4 * EMBER_VL)));
/* unaligned access to a vector in memory */
typedef float ember_vf_u __attribute__((vector_size(4 * EMBER_VL), aligned(4), may_alias));
static inline ember_vf ember_vload(const float* p) { return *(const ember_vf_u*)p; }
static inline void ember_vstore(float* p, ember_vf v) { *(ember_vf_u*)p = v; }
static inline ember_vf ember_vset1(float x) {
  ember_vf z = {0};
  return -z + x; /* -0 + x is x for every x, -0 included (+0 + -0 would be +0) */
}
static inline ember_vf ember_vadd(ember_vf a, ember_vf b) { return a + b; }
static inline ember_vf ember_vsub(ember_vf a, ember_vf b) { return a - b; }
static inline ember_vf ember_vmul(ember_vf a, ember_vf b) { return a * b; }
static inline ember_vf ember_vdiv(ember_vf a, ember_vf b) { return a / b; }
/* lanes of a where mask m is set, else of b */
static inline ember_vf ember_vselect(ember_vi m, ember_vf a, ember_vf b) {
  return (ember_vf)((m & (ember_vi)a) | (~m & (ember_vi)b));
}
/* Lane-wise (a > b ? a : b) and (a < b ? a : b). x86's max/min instructions compute exactly
 * these (a NaN in either lane gives b), reached through the compiler's builtins (no
 * <immintrin.h>); GCC compiles the mask form to a compare and a blend, two instructions on
 * the exp/erf/tanh polynomials' clamps instead of one. NEON's max/min return NaN for a NaN
 * in either lane, so NEON (and a compiler without the builtins) keeps the masks. */
#if defined(__AVX512F__) && defined(__clang__)
#define EMBER_VMAX_BUILTIN(a, b) __builtin_ia32_maxps512(a, b, 4)
#define EMBER_VMIN_BUILTIN(a, b) __builtin_ia32_minps512(a, b, 4)
#elif defined(__AVX512F__)
/* the masked form with every lane kept; 4: the current rounding mode */
#define EMBER_VMAX_BUILTIN(a, b) __builtin_ia32_maxps512_mask(a, b, a, (unsigned short)-1, 4)
#define EMBER_VMIN_BUILTIN(a, b) __builtin_ia32_minps512_mask(a, b, a, (unsigned short)-1, 4)
#elif defined(__AVX__) && EMBER_VL == 8
#define EMBER_VMAX_BUILTIN(a, b) __builtin_ia32_maxps256(a, b)
#define EMBER_VMIN_BUILTIN(a, b) __builtin_ia32_minps256(a, b)
#elif defined(__SSE__) && EMBER_VL == 4
#define EMBER_VMAX_BUILTIN(a, b) __builtin_ia32_maxps(a, b)
#define EMBER_VMIN_BUILTIN(a, b) __builtin_ia32_minps(a, b)
#endif
#if defined(EMBER_VMAX_BUILTIN)
static inline ember_vf ember_vmax(ember_vf a, ember_vf b) { return EMBER_VMAX_BUILTIN(a, b); }
static inline ember_vf ember_vmin(ember_vf a, ember_vf b) { return EMBER_VMIN_BUILTIN(a, b); }
#undef EMBER_VMAX_BUILTIN
#undef EMBER_VMIN_BUILTIN
#else
static inline ember_vf ember_vmax(ember_vf a, ember_vf b) { return ember_vselect(a > b, a, b); }
static inline ember_vf ember_vmin(ember_vf a, ember_vf b) { return ember_vselect(a < b, a, b); }
#endif
/* a * b + c */
static inline ember_vf ember_vfma(ember_vf a, ember_vf b, ember_vf c) { return a * b + c; }
/* 2^n where v = n + EMBER_ROUND_MAGIC, -127 <= n <= 127 (n sits in the low mantissa bits of
 * v); n = -127 gives +0 (a zero exponent field) */
static inline ember_vf ember_vpow2_rounded(ember_vf v) {
  return (ember_vf)(((ember_vi)v - (ember_vi)ember_vset1(EMBER_ROUND_MAGIC) + 127) << 23);
}
/* lanes of v where x >= c, else 0 (also where x is NaN) */
static inline ember_vf ember_vkeep_ge(ember_vf v, ember_vf x, float c) {
  return (ember_vf)((ember_vi)v & (x >= ember_vset1(c)));
}
/* lanes of t where a >= c, else of f (also where a is NaN) */
static inline ember_vf ember_vselect_ge(ember_vf a, float c, ember_vf t, ember_vf f) {
  return ember_vselect(a >= ember_vset1(c), t, f);
}
static inline ember_vf ember_vcopysign(ember_vf mag, ember_vf sign) {
  ember_vi m = (ember_vi)ember_vset1(-0.0f);
  return (ember_vf)((~m & (ember_vi)mag) | (m & (ember_vi)sign));
}

#else /* portable C99 */
#define EMBER_VL 4
#define EMBER_SIMD_NAME "portable"
typedef struct { float v[4]; } ember_vf;
#define EMBER_VMAP2(name, expr)                                              \
  static inline ember_vf name(ember_vf a, ember_vf b) {                     \
    ember_vf r; int i;                                                      \
    for (i = 0; i < 4; ++i) { float x = a.v[i], y = b.v[i]; r.v[i] = (expr); } \
    return r;                                                               \
  }
static inline ember_vf ember_vload(const float* p) {
  ember_vf r; memcpy(r.v, p, sizeof r.v); return r;
}
static inline void ember_vstore(float* p, ember_vf v) { memcpy(p, v.v, sizeof v.v); }
static inline ember_vf ember_vset1(float x) {
  ember_vf r; r.v[0] = r.v[1] = r.v[2] = r.v[3] = x; return r;
}
EMBER_VMAP2(ember_vadd, x + y)
EMBER_VMAP2(ember_vsub, x - y)
EMBER_VMAP2(ember_vmul, x * y)
EMBER_VMAP2(ember_vdiv, x / y)
EMBER_VMAP2(ember_vmax, x > y ? x : y)
EMBER_VMAP2(ember_vmin, x < y ? x : y)
EMBER_VMAP2(ember_vcopysign, copysignf(x, y))
#undef EMBER_VMAP2
static inline ember_vf ember_vfma(ember_vf a, ember_vf b, ember_vf c) {
  ember_vf r; int i;
  for (i = 0; i < 4; ++i) r.v[i] = a.v[i] * b.v[i] + c.v[i];
  return r;
}
static inline ember_vf ember_vpow2_rounded(ember_vf v) {
  ember_vf r; int i;
  for (i = 0; i < 4; ++i) {
    int32_t bits, magic;
    float m = EMBER_ROUND_MAGIC;
    memcpy(&bits, &v.v[i], sizeof bits);
    memcpy(&magic, &m, sizeof magic);
    /* n = -127: +0, as the vector form's zero exponent field (ember_vexp0 relies on it) */
    r.v[i] = bits - magic <= -127 ? 0.0f : ldexpf(1.0f, (int)(bits - magic));
  }
  return r;
}
static inline ember_vf ember_vkeep_ge(ember_vf v, ember_vf x, float c) {
  ember_vf r; int i;
  for (i = 0; i < 4; ++i) r.v[i] = x.v[i] >= c ? v.v[i] : 0.0f;
  return r;
}
static inline ember_vf ember_vselect_ge(ember_vf a, float c, ember_vf t, ember_vf f) {
  ember_vf r; int i;
  for (i = 0; i < 4; ++i) r.v[i] = a.v[i] >= c ? t.v[i] : f.v[i];
  return r;
}
#endif /* vector extensions / portable */

static inline ember_vf ember_vzero(void) { return ember_vset1(0.0f); }

/* The first r (< EMBER_VL) floats at p as a vector, the other lanes `fill`; and the first r
 * lanes of v stored at p. Row tails go through these, so no scalar tail loop is compiled. */
static inline ember_vf ember_vload_part(const float* p, int64_t r, float fill) {
  float t[EMBER_VL];
  int i;
  for (i = 0; i < EMBER_VL; ++i) t[i] = fill;
  memcpy(t, p, (size_t)r * sizeof(float));
  return ember_vload(t);
}
static inline void ember_vstore_part(float* p, int64_t r, ember_vf v) {
  float t[EMBER_VL];
  ember_vstore(t, v);
  memcpy(p, t, (size_t)r * sizeof(float));
}

/* Rarely taken scalar paths: out of line and optimised for size (no vectoriser work). */
#if defined(__GNUC__)
#define EMBER_COLD static __attribute__((noinline, cold, unused))
#else
#define EMBER_COLD static
#endif

/* Horizontal sum and max (once per row, not in inner loops): with vector extensions a
 * butterfly of lane swaps (log2(EMBER_VL) shuffles, no round trip through memory, whose
 * store-to-load forwarding of a vector into scalars stalls); else through memory. */
#if defined(EMBER_SIMD_VECTOR_EXT) && (defined(__clang__) || __GNUC__ >= 12)
#if EMBER_VL == 16
#define EMBER_VSWAP_HALF(v) \
  __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7)
#define EMBER_VSWAP_4(v) \
  __builtin_shufflevector(v, v, 4, 5, 6, 7, 0, 1, 2, 3, 12, 13, 14, 15, 8, 9, 10, 11)
#define EMBER_VSWAP_2(v) \
  __builtin_shufflevector(v, v, 2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13)
#define EMBER_VSWAP_1(v) \
  __builtin_shufflevector(v, v, 1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14)
#define EMBER_VREDUCE(op, v) \
  (v = op(v, EMBER_VSWAP_HALF(v)), v = op(v, EMBER_VSWAP_4(v)), v = op(v, EMBER_VSWAP_2(v)), \
   v = op(v, EMBER_VSWAP_1(v)), v[0])
#elif EMBER_VL == 8
#define EMBER_VREDUCE(op, v)                                                            \
  (v = op(v, __builtin_shufflevector(v, v, 4, 5, 6, 7, 0, 1, 2, 3)),                   \
   v = op(v, __builtin_shufflevector(v, v, 2, 3, 0, 1, 6, 7, 4, 5)),                   \
   v = op(v, __builtin_shufflevector(v, v, 1, 0, 3, 2, 5, 4, 7, 6)), v[0])
#else
#define EMBER_VREDUCE(op, v)                                                            \
  (v = op(v, __builtin_shufflevector(v, v, 2, 3, 0, 1)),                               \
   v = op(v, __builtin_shufflevector(v, v, 1, 0, 3, 2)), v[0])
#endif
static inline float ember_vhsum(ember_vf v) { return EMBER_VREDUCE(ember_vadd, v); }
static inline float ember_vhmax(ember_vf v) { return EMBER_VREDUCE(ember_vmax, v); }
#undef EMBER_VREDUCE

/* r[0 .. EMBER_VL) transposed in registers (lane j of r[i] <-> lane i of r[j]): at each
 * level b (EMBER_VL / 2 .. 1), rows i and i + b (bit b of i clear) swap their off-diagonal
 * blocks of b lanes, two two-source shuffles per pair (EMBER_VL * log2(EMBER_VL) in all; a
 * scalar copy costs a load and a store per element). The GEMM's transposed-B panel copy. */
#define EMBER_HAVE_VTRANSPOSE 1
#define EMBER_VT_PAIR(a, c, b)                                                           \
  do {                                                                                   \
    ember_vf lo_ = __builtin_shufflevector(a, c, EMBER_VT_LO_##b);                       \
    c = __builtin_shufflevector(a, c, EMBER_VT_HI_##b);                                  \
    a = lo_;                                                                             \
  } while (0)
#if EMBER_VL == 16
#define EMBER_VT_LO_8 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23
#define EMBER_VT_HI_8 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31
#define EMBER_VT_LO_4 0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27
#define EMBER_VT_HI_4 4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31
#define EMBER_VT_LO_2 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29
#define EMBER_VT_HI_2 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31
#define EMBER_VT_LO_1 0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30
#define EMBER_VT_HI_1 1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31
#elif EMBER_VL == 8
#define EMBER_VT_LO_4 0, 1, 2, 3, 8, 9, 10, 11
#define EMBER_VT_HI_4 4, 5, 6, 7, 12, 13, 14, 15
#define EMBER_VT_LO_2 0, 1, 8, 9, 4, 5, 12, 13
#define EMBER_VT_HI_2 2, 3, 10, 11, 6, 7, 14, 15
#define EMBER_VT_LO_1 0, 8, 2, 10, 4, 12, 6, 14
#define EMBER_VT_HI_1 1, 9, 3, 11, 5, 13, 7, 15
#else
#define EMBER_VT_LO_2 0, 1, 4, 5
#define EMBER_VT_HI_2 2, 3, 6, 7
#define EMBER_VT_LO_1 0, 4, 2, 6
#define EMBER_VT_HI_1 1, 5, 3, 7
#endif
static inline void ember_vtranspose(ember_vf* r) {
  int i;
#if EMBER_VL == 16
  for (i = 0; i < 8; ++i) EMBER_VT_PAIR(r[i], r[i + 8], 8);
#endif
#if EMBER_VL >= 8
  for (i = 0; i < EMBER_VL; ++i) {
    if (!(i & 4)) EMBER_VT_PAIR(r[i], r[i + 4], 4);
  }
#endif
  for (i = 0; i < EMBER_VL; ++i) {
    if (!(i & 2)) EMBER_VT_PAIR(r[i], r[i + 2], 2);
  }
  for (i = 0; i < EMBER_VL; i += 2) EMBER_VT_PAIR(r[i], r[i + 1], 1);
}
#undef EMBER_VT_PAIR
#else
static inline float ember_vhsum(ember_vf v) {
  float t[EMBER_VL];
  float s = 0.0f;
  int i;
  ember_vstore(t, v);
  for (i = 0; i < EMBER_VL; ++i) s += t[i];
  return s;
}
static inline float ember_vhmax(ember_vf v) {
  float t[EMBER_VL];
  float m;
  int i;
  ember_vstore(t, v);
  m = t[0];
  for (i = 1; i < EMBER_VL; ++i) m = t[i] > m ? t[i] : m;
  return m;
}
#endif

/* exp(x) for x in [-87.3, 88.37]: x = n ln2 + r, |r| <= ln2/2, exp(r) by a degree-6
 * polynomial, times 2^n (n rounded with EMBER_ROUND_MAGIC: no float-int conversions). */
/* x = n ln2 + r: returns r (|r| <= ln2/2) and sets *v to n plus EMBER_ROUND_MAGIC, whose
 * bits ember_vpow2_rounded turns into 2^n (ln2 in two parts: r exact to float rounding). */
static inline ember_vf ember_vexp_reduce(ember_vf x, ember_vf* v) {
  ember_vf n, r;
  *v = ember_vfma(x, ember_vset1(1.44269504088896341f), ember_vset1(EMBER_ROUND_MAGIC));
  n = ember_vsub(*v, ember_vset1(EMBER_ROUND_MAGIC));
  r = ember_vfma(n, ember_vset1(-0.693359375f), x);
  return ember_vfma(n, ember_vset1(2.12194440e-4f), r);
}

static inline ember_vf ember_vexp_core(ember_vf x) {
  ember_vf v, r = ember_vexp_reduce(x, &v), p;
  p = ember_vset1(1.9875691500e-4f);
  p = ember_vfma(p, r, ember_vset1(1.3981999507e-3f));
  p = ember_vfma(p, r, ember_vset1(8.3334519073e-3f));
  p = ember_vfma(p, r, ember_vset1(4.1665795894e-2f));
  p = ember_vfma(p, r, ember_vset1(1.6666665459e-1f));
  p = ember_vfma(p, r, ember_vset1(5.0000001201e-1f));
  p = ember_vfma(p, ember_vmul(r, r), ember_vadd(r, ember_vset1(1.0f)));
  return ember_vmul(p, ember_vpow2_rounded(v));
}

/* exp(x), inputs clamped to [-87.3, 88.37]; NaN gives NaN (the clamp bound is the first
 * operand of each comparison, so a NaN lane keeps x). */
static inline ember_vf ember_vexp(ember_vf x) {
  return ember_vexp_core(ember_vmin(ember_vset1(88.37f), ember_vmax(ember_vset1(-87.3f), x)));
}

/* exp(v) for v in [-16.5, -0.5] (what ember_verf needs): no clamps, 2^n normal. */
static inline ember_vf ember_vexp_neg(ember_vf v) {
  ember_vf t = ember_vfma(v, ember_vset1(1.44269504f), ember_vset1(EMBER_ROUND_MAGIC));
  ember_vf n = ember_vsub(t, ember_vset1(EMBER_ROUND_MAGIC));
  ember_vf r = ember_vfma(n, ember_vset1(-0.693145752f), v);
  ember_vf p = ember_vset1(1.98412698e-04f);
  r = ember_vfma(n, ember_vset1(-1.42860677e-06f), r);
  p = ember_vfma(p, r, ember_vset1(1.38888889e-03f));
  p = ember_vfma(p, r, ember_vset1(8.33333333e-03f));
  p = ember_vfma(p, r, ember_vset1(4.16666667e-02f));
  p = ember_vfma(p, r, ember_vset1(1.66666667e-01f));
  p = ember_vfma(p, r, ember_vset1(0.5f));
  p = ember_vfma(p, r, ember_vset1(1.0f));
  p = ember_vfma(p, r, ember_vset1(1.0f));
  return ember_vmul(p, ember_vpow2_rounded(t));
}

/* erf(x): vmath.h's ember_erff in vector registers (same polynomials, <= 2 ulp, no division):
 * |x| < 0.875: x + x q(x^2); above: 1 - exp(-x^2) r(min(|x|, 4) - 2.4375) with the sign of x
 * (at |x| = 4 that rounds to 1 already, so no third branch). NaN takes the first side: NaN. */
static inline ember_vf ember_verf(ember_vf x) {
  ember_vf s = ember_vmul(x, x), a = ember_vcopysign(x, ember_vzero());
  ember_vf q = ember_vset1(8.669567e-05f), z, r, e, big;
  q = ember_vfma(q, s, ember_vset1(-0.00082058506f));
  q = ember_vfma(q, s, ember_vset1(0.0052058743f));
  q = ember_vfma(q, s, ember_vset1(-0.026861025f));
  q = ember_vfma(q, s, ember_vset1(0.11283718f));
  q = ember_vfma(q, s, ember_vset1(-0.37612635f));
  q = ember_vfma(q, s, ember_vset1(0.12837917f));
  z = ember_vsub(ember_vmin(a, ember_vset1(4.0f)), ember_vset1(2.4375f));
  r = ember_vset1(1.2129205e-07f);
  r = ember_vfma(r, z, ember_vset1(-5.355154e-07f));
  r = ember_vfma(r, z, ember_vset1(1.1999506e-06f));
  r = ember_vfma(r, z, ember_vset1(-4.2806637e-06f));
  r = ember_vfma(r, z, ember_vset1(1.858804e-05f));
  r = ember_vfma(r, z, ember_vset1(-6.847935e-05f));
  r = ember_vfma(r, z, ember_vset1(0.0002386721f));
  r = ember_vfma(r, z, ember_vset1(-0.0008170706f));
  r = ember_vfma(r, z, ember_vset1(0.0027090905f));
  r = ember_vfma(r, z, ember_vset1(-0.008648258f));
  r = ember_vfma(r, z, ember_vset1(0.026497975f));
  r = ember_vfma(r, z, ember_vset1(-0.07756081f));
  r = ember_vfma(r, z, ember_vset1(0.21555248f));
  e = ember_vexp_neg(ember_vsub(ember_vzero(),
                                ember_vmin(ember_vmax(s, ember_vset1(0.5f)), ember_vset1(16.0f))));
  big = ember_vcopysign(ember_vsub(ember_vset1(1.0f), ember_vmul(e, r)), x);
  return ember_vselect_ge(a, 0.875f, big, ember_vfma(x, q, x));
}

/* tanh(x): vmath.h's ember_tanhf in vector registers: |x| < 0.625: x + x s p(s), s = x^2;
 * above: 1 - 2 / (e^(2 min(|x|, 9.1)) + 1) (tanh rounds to 1 from 9.1) with the sign of x.
 * NaN takes the first side: NaN. */
static inline ember_vf ember_vtanh(ember_vf x) {
  ember_vf one = ember_vset1(1.0f), s = ember_vmul(x, x), a = ember_vcopysign(x, ember_vzero());
  ember_vf p = ember_vset1(0.0022896307f), e, big;
  p = ember_vfma(p, s, ember_vset1(-0.008340872f));
  p = ember_vfma(p, s, ember_vset1(0.021767853f));
  p = ember_vfma(p, s, ember_vset1(-0.05395911f));
  p = ember_vfma(p, s, ember_vset1(0.13333303f));
  p = ember_vfma(p, s, ember_vset1(-0.33333334f));
  e = ember_vmin(a, ember_vset1(9.1f));
  e = ember_vexp_core(ember_vadd(e, e));
  big = ember_vsub(one, ember_vdiv(ember_vset1(2.0f), ember_vadd(e, one)));
  return ember_vselect_ge(a, 0.625f, ember_vcopysign(big, x), ember_vfma(x, ember_vmul(s, p), x));
}

#endif /* EMBER_KERNELS_GEMM_SIMD_H_ */
