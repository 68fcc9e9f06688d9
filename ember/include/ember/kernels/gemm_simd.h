/*
 * ember kernels: a small float vector abstraction shared by the GEMM, softmax and layer-norm
 * kernels, selected by the compiler's ISA macros:
 *
 *   __AVX512F__            16 lanes, AVX-512F intrinsics
 *   __AVX2__ && __FMA__     8 lanes, AVX2 + FMA intrinsics
 *   __SSE2__                4 lanes, SSE2 intrinsics (multiply + add)
 *   otherwise               4 lanes, portable C99 (a struct of 4 floats; compilers vectorise
 *                           it where they can)
 *
 * EMBER_VL is the lane count. Every function is static inline so a translation unit that
 * uses only some of them compiles warning-free with -std=c99 -Wall -Wextra.
 * ember_vexp is a Cephes-style exp (relative error ~2e-7 over the float range, inputs
 * clamped to [-88.37, 88.37]); ember_verf is Abramowitz-Stegun 7.1.26 (absolute error
 * <= 1.5e-7).
 */
#ifndef EMBER_KERNELS_GEMM_SIMD_H_
#define EMBER_KERNELS_GEMM_SIMD_H_

#include <math.h>
#include <stdint.h>
#include <string.h>

#if defined(__AVX512F__)
#include <immintrin.h>
#define EMBER_VL 16
#define EMBER_SIMD_NAME "avx512"
typedef __m512 ember_vf;
static inline ember_vf ember_vload(const float* p) { return _mm512_loadu_ps(p); }
static inline void ember_vstore(float* p, ember_vf v) { _mm512_storeu_ps(p, v); }
static inline ember_vf ember_vset1(float x) { return _mm512_set1_ps(x); }
static inline ember_vf ember_vadd(ember_vf a, ember_vf b) { return _mm512_add_ps(a, b); }
static inline ember_vf ember_vsub(ember_vf a, ember_vf b) { return _mm512_sub_ps(a, b); }
static inline ember_vf ember_vmul(ember_vf a, ember_vf b) { return _mm512_mul_ps(a, b); }
static inline ember_vf ember_vdiv(ember_vf a, ember_vf b) { return _mm512_div_ps(a, b); }
static inline ember_vf ember_vmax(ember_vf a, ember_vf b) { return _mm512_max_ps(a, b); }
static inline ember_vf ember_vmin(ember_vf a, ember_vf b) { return _mm512_min_ps(a, b); }
/* a * b + c */
static inline ember_vf ember_vfma(ember_vf a, ember_vf b, ember_vf c) {
  return _mm512_fmadd_ps(a, b, c);
}
static inline ember_vf ember_vfloor(ember_vf a) {
  return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
}
/* 2^n for integral n in [-126, 127] */
static inline ember_vf ember_vpow2i(ember_vf n) {
  __m512i e = _mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127));
  return _mm512_castsi512_ps(_mm512_slli_epi32(e, 23));
}
static inline ember_vf ember_vcopysign(ember_vf mag, ember_vf sign) {
  __m512i m = _mm512_set1_epi32((int)0x80000000u);
  return _mm512_castsi512_ps(_mm512_or_si512(
      _mm512_andnot_si512(m, _mm512_castps_si512(mag)),
      _mm512_and_si512(m, _mm512_castps_si512(sign))));
}

#elif defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define EMBER_VL 8
#define EMBER_SIMD_NAME "avx2"
typedef __m256 ember_vf;
static inline ember_vf ember_vload(const float* p) { return _mm256_loadu_ps(p); }
static inline void ember_vstore(float* p, ember_vf v) { _mm256_storeu_ps(p, v); }
static inline ember_vf ember_vset1(float x) { return _mm256_set1_ps(x); }
static inline ember_vf ember_vadd(ember_vf a, ember_vf b) { return _mm256_add_ps(a, b); }
static inline ember_vf ember_vsub(ember_vf a, ember_vf b) { return _mm256_sub_ps(a, b); }
static inline ember_vf ember_vmul(ember_vf a, ember_vf b) { return _mm256_mul_ps(a, b); }
static inline ember_vf ember_vdiv(ember_vf a, ember_vf b) { return _mm256_div_ps(a, b); }
static inline ember_vf ember_vmax(ember_vf a, ember_vf b) { return _mm256_max_ps(a, b); }
static inline ember_vf ember_vmin(ember_vf a, ember_vf b) { return _mm256_min_ps(a, b); }
static inline ember_vf ember_vfma(ember_vf a, ember_vf b, ember_vf c) {
  return _mm256_fmadd_ps(a, b, c);
}
static inline ember_vf ember_vfloor(ember_vf a) { return _mm256_floor_ps(a); }
static inline ember_vf ember_vpow2i(ember_vf n) {
  __m256i e = _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127));
  return _mm256_castsi256_ps(_mm256_slli_epi32(e, 23));
}
static inline ember_vf ember_vcopysign(ember_vf mag, ember_vf sign) {
  ember_vf m = _mm256_set1_ps(-0.0f);
  return _mm256_or_ps(_mm256_andnot_ps(m, mag), _mm256_and_ps(m, sign));
}

#elif defined(__SSE2__)
#include <emmintrin.h>
#define EMBER_VL 4
#define EMBER_SIMD_NAME "sse2"
typedef __m128 ember_vf;
static inline ember_vf ember_vload(const float* p) { return _mm_loadu_ps(p); }
static inline void ember_vstore(float* p, ember_vf v) { _mm_storeu_ps(p, v); }
static inline ember_vf ember_vset1(float x) { return _mm_set1_ps(x); }
static inline ember_vf ember_vadd(ember_vf a, ember_vf b) { return _mm_add_ps(a, b); }
static inline ember_vf ember_vsub(ember_vf a, ember_vf b) { return _mm_sub_ps(a, b); }
static inline ember_vf ember_vmul(ember_vf a, ember_vf b) { return _mm_mul_ps(a, b); }
static inline ember_vf ember_vdiv(ember_vf a, ember_vf b) { return _mm_div_ps(a, b); }
static inline ember_vf ember_vmax(ember_vf a, ember_vf b) { return _mm_max_ps(a, b); }
static inline ember_vf ember_vmin(ember_vf a, ember_vf b) { return _mm_min_ps(a, b); }
static inline ember_vf ember_vfma(ember_vf a, ember_vf b, ember_vf c) {
  return _mm_add_ps(_mm_mul_ps(a, b), c);
}
static inline ember_vf ember_vfloor(ember_vf a) {
  /* truncate, then step down where truncation rounded up (negative non-integers) */
  ember_vf t = _mm_cvtepi32_ps(_mm_cvttps_epi32(a));
  return _mm_sub_ps(t, _mm_and_ps(_mm_cmpgt_ps(t, a), _mm_set1_ps(1.0f)));
}
static inline ember_vf ember_vpow2i(ember_vf n) {
  __m128i e = _mm_add_epi32(_mm_cvtps_epi32(n), _mm_set1_epi32(127));
  return _mm_castsi128_ps(_mm_slli_epi32(e, 23));
}
static inline ember_vf ember_vcopysign(ember_vf mag, ember_vf sign) {
  ember_vf m = _mm_set1_ps(-0.0f);
  return _mm_or_ps(_mm_andnot_ps(m, mag), _mm_and_ps(m, sign));
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
static inline ember_vf ember_vfloor(ember_vf a) {
  ember_vf r; int i;
  for (i = 0; i < 4; ++i) r.v[i] = floorf(a.v[i]);
  return r;
}
static inline ember_vf ember_vpow2i(ember_vf n) {
  ember_vf r; int i;
  for (i = 0; i < 4; ++i) r.v[i] = ldexpf(1.0f, (int)n.v[i]);
  return r;
}
#endif

static inline ember_vf ember_vzero(void) { return ember_vset1(0.0f); }

/* Horizontal sum and max through memory: only used once per row, not in inner loops. */
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

/* exp(x): x = n ln2 + r, |r| <= ln2/2, exp(r) by a degree-6 polynomial, times 2^n. */
static inline ember_vf ember_vexp(ember_vf x) {
  ember_vf n, r, p;
  x = ember_vmin(ember_vmax(x, ember_vset1(-87.3f)), ember_vset1(88.37f));
  n = ember_vfloor(ember_vfma(x, ember_vset1(1.44269504088896341f), ember_vset1(0.5f)));
  r = ember_vfma(n, ember_vset1(-0.693359375f), x);
  r = ember_vfma(n, ember_vset1(2.12194440e-4f), r);
  p = ember_vset1(1.9875691500e-4f);
  p = ember_vfma(p, r, ember_vset1(1.3981999507e-3f));
  p = ember_vfma(p, r, ember_vset1(8.3334519073e-3f));
  p = ember_vfma(p, r, ember_vset1(4.1665795894e-2f));
  p = ember_vfma(p, r, ember_vset1(1.6666665459e-1f));
  p = ember_vfma(p, r, ember_vset1(5.0000001201e-1f));
  p = ember_vfma(p, ember_vmul(r, r), ember_vadd(r, ember_vset1(1.0f)));
  return ember_vmul(p, ember_vpow2i(n));
}

/* erf(x), Abramowitz-Stegun 7.1.26 on |x|, sign restored. */
static inline ember_vf ember_verf(ember_vf x) {
  ember_vf one = ember_vset1(1.0f);
  ember_vf ax = ember_vmax(x, ember_vsub(ember_vzero(), x));
  ember_vf t = ember_vdiv(one, ember_vfma(ember_vset1(0.3275911f), ax, one));
  ember_vf p = ember_vset1(1.061405429f);
  ember_vf y;
  p = ember_vfma(p, t, ember_vset1(-1.453152027f));
  p = ember_vfma(p, t, ember_vset1(1.421413741f));
  p = ember_vfma(p, t, ember_vset1(-0.284496736f));
  p = ember_vfma(p, t, ember_vset1(0.254829592f));
  p = ember_vmul(p, t);
  y = ember_vsub(one, ember_vmul(p, ember_vexp(ember_vsub(ember_vzero(), ember_vmul(ax, ax)))));
  return ember_vcopysign(y, x);
}

/* tanh(x) = 1 - 2 / (exp(2x) + 1): saturates correctly at both ends. */
static inline ember_vf ember_vtanh(ember_vf x) {
  ember_vf one = ember_vset1(1.0f);
  ember_vf e = ember_vexp(ember_vadd(x, x));
  return ember_vsub(one, ember_vdiv(ember_vset1(2.0f), ember_vadd(e, one)));
}

#endif /* EMBER_KERNELS_GEMM_SIMD_H_ */
