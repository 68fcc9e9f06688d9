/*
 * ember kernels: float32 math that a loop can vectorize (exp, sigmoid, tanh, erf, log, log2,
 * log10).
 *
 * A loop that calls libm's erff runs one element at a time (GCC vectorizes libm calls only
 * under -ffast-math), and GELU as exporters write it is an erf per element: 5-10x slower than
 * the multiply-adds around it. These functions are branch-free (the compiler turns their
 * selects into blends), inline, and accurate to about 2 ulp, the accuracy onnxruntime's
 * vectorized Erf and Gelu kernels have (libm's erff: 1 ulp). They are the default lowering
 * of float32 erf; the opt-in fast_erf of FastMath is a cheaper, coarser formula. Selects are
 * written as bit masks, not `?:`: ember compiles with -fno-tree-loop-if-convert, and a
 * conditional left in a loop body stops its vectorization.
 *
 * ember_expf(x): x = n ln 2 + r, |r| <= ln2/2 (ln 2 in two parts), e^r by its Taylor
 * polynomial of degree 7, times 2^n as two powers of two (so results that overflow give inf and
 * those below the normal range round to denormals and 0, as libm's); x is clamped to
 * [-104, 89] first (beyond, the result is 0 or inf anyway) and NaN gives NaN.
 *
 * ember_tanhf(x): |x| < 0.625: x + x s p(s), s = x^2, p of degree 5 (fitted to
 * (tanh(x)/x - 1) / s); above: 1 - 2 / (e^(2|x|) + 1) with |x| clamped to 9.1 (tanh rounds to
 * 1 there), with the sign of x.
 *
 * ember_logf(x): x = 2^k (1 + f) with 1 + f in [sqrt(1/2), sqrt(2)) by integer arithmetic on
 * the bits (a subnormal scaled by 2^25 first), log(1 + f) = 2 atanh(s), s = f / (2 + f), by
 * an odd polynomial in s (the coefficients of musl's logf), k ln 2 in two parts; under 1 ulp.
 * log(0) = -inf, log(x < 0) and log(NaN) = NaN, log(inf) = inf.
 *
 * ember_erff(x): |x| < 0.875: x + x q(x^2), q a degree-6 polynomial (erf(x)/x - 1);
 * 0.875 <= |x| < 4: 1 - exp(-x^2) r(|x| - 2.4375), r a degree-12 polynomial of
 * erfc(a) exp(a^2) (smooth there), with the sign of x; |x| >= 4: +-1 (erfc(4) = 1.5e-8 is
 * below half an ulp of 1). Both fitted with relative weights on Chebyshev nodes; the error
 * over all floats is checked by tests/topi/test_vmath.py. NaN gives NaN.
 */
#ifndef EMBER_KERNELS_VMATH_H_
#define EMBER_KERNELS_VMATH_H_

#include <stdint.h>
#include <string.h>

/* On a function whose loops call these (ember's C emitter puts it there): they are
 * compute-bound, and GCC's AVX-512 tunings vectorize loops 256 bits wide; 512 runs GELU over
 * 1.6M floats 1.35 -> 0.99 ms on one Sapphire Rapids core (onnxruntime: 1.04 ms). */
#if defined(__GNUC__) && !defined(__clang__) && defined(__AVX512F__)
#define EMBER_VMATH_WIDE __attribute__((target("prefer-vector-width=512")))
#else
#define EMBER_VMATH_WIDE
#endif

static inline uint32_t ember_vmath_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static inline float ember_vmath_float(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* c ? t : f, for c 0 or 1, without a branch. */
static inline float ember_vmath_select(int c, float t, float f) {
  uint32_t m = (uint32_t)0 - (uint32_t)c;
  return ember_vmath_float((ember_vmath_bits(t) & m) | (ember_vmath_bits(f) & ~m));
}

/* e^r for |r| <= ln2/2 + a little: Taylor to degree 7 (truncation 5e-9 relative). */
static inline float ember_vmath_exp_poly(float r) {
  float p = 1.98412698e-04f;
  p = p * r + 1.38888889e-03f;
  p = p * r + 8.33333333e-03f;
  p = p * r + 4.16666667e-02f;
  p = p * r + 1.66666667e-01f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  return p * r + 1.0f;
}

/* exp(v) for v in [-16.5, -0.5] (the range ember_erff needs): as ember_expf, with n in
 * [-24, 0] and no clamps. */
static inline float ember_vmath_exp_neg(float v) {
  const float shifter = 12582912.0f; /* 1.5 * 2^23: adding it rounds to an integer */
  float t = v * 1.44269504f + shifter;
  float n = t - shifter;
  float r = (v - n * 0.693145752f) - n * 1.42860677e-06f;
  return ember_vmath_exp_poly(r) * ember_vmath_float((uint32_t)((int32_t)n + 127) << 23);
}

static inline float ember_expf(float x) {
  const float shifter = 12582912.0f; /* 1.5 * 2^23: adding it rounds to an integer */
  float xc = ember_vmath_select(x > -104.0f, ember_vmath_select(x < 89.0f, x, 89.0f), -104.0f);
  float t = xc * 1.44269504f + shifter;
  float n = t - shifter;
  float r = (xc - n * 0.693145752f) - n * 1.42860677e-06f;
  int32_t k = (int32_t)n, k1 = k / 2, k2 = k - k1; /* each in [-75, 65]: a normal power */
  float p = ember_vmath_exp_poly(r);
  p = p * ember_vmath_float((uint32_t)(k1 + 127) << 23);
  p = p * ember_vmath_float((uint32_t)(k2 + 127) << 23);
  return ember_vmath_select(x != x, x, p);
}

/* 1 / (1 + e^-x): relative error that of ember_expf (1 + e >= 1). */
static inline float ember_sigmoidf(float x) { return 1.0f / (1.0f + ember_expf(-x)); }

static inline float ember_tanhf(float x) {
  const uint32_t sign = ember_vmath_bits(x) & 0x80000000u;
  const float a = ember_vmath_float(ember_vmath_bits(x) & 0x7fffffffu);
  const float s = x * x;
  float p, big;
  p = 0.0022896307f;
  p = p * s - 0.008340872f;
  p = p * s + 0.021767853f;
  p = p * s - 0.05395911f;
  p = p * s + 0.13333303f;
  p = p * s - 0.33333334f;
  big = 1.0f - 2.0f / (ember_expf(2.0f * ember_vmath_select(a < 9.1f, a, 9.1f)) + 1.0f);
  big = ember_vmath_float(ember_vmath_bits(big) | sign);
  /* !(a >= 0.625f): NaN takes this side too, and gives NaN */
  return ember_vmath_select(!(a >= 0.625f), x + x * (s * p), big);
}

static inline float ember_erff(float x) {
  const uint32_t sign = ember_vmath_bits(x) & 0x80000000u;
  const float a = ember_vmath_float(ember_vmath_bits(x) & 0x7fffffffu);
  const float s = x * x;
  float q, z, r, e, big;
  q = 8.669567e-05f;
  q = q * s - 0.00082058506f;
  q = q * s + 0.0052058743f;
  q = q * s - 0.026861025f;
  q = q * s + 0.11283718f;
  q = q * s - 0.37612635f;
  q = q * s + 0.12837917f;
  z = ember_vmath_select(a < 4.0f, a, 4.0f) - 2.4375f;
  r = 1.2129205e-07f;
  r = r * z - 5.355154e-07f;
  r = r * z + 1.1999506e-06f;
  r = r * z - 4.2806637e-06f;
  r = r * z + 1.858804e-05f;
  r = r * z - 6.847935e-05f;
  r = r * z + 0.0002386721f;
  r = r * z - 0.0008170706f;
  r = r * z + 0.0027090905f;
  r = r * z - 0.008648258f;
  r = r * z + 0.026497975f;
  r = r * z - 0.07756081f;
  r = r * z + 0.21555248f;
  e = ember_vmath_exp_neg(-ember_vmath_select(s < 16.0f, ember_vmath_select(s > 0.5f, s, 0.5f),
                                              16.0f));
  big = ember_vmath_select(a < 4.0f, 1.0f - e * r, 1.0f);
  big = ember_vmath_float(ember_vmath_bits(big) | sign);
  /* !(a >= 0.875f): NaN takes this side too, and gives NaN */
  return ember_vmath_select(!(a >= 0.875f), x + x * q, big);
}

static inline float ember_logf(float x) {
  /* a subnormal x is scaled by 2^25 (exactly) into the normal range first */
  const int tiny = x < 1.17549435e-38f;
  const float xs = ember_vmath_select(tiny, x * 33554432.0f, x);
  /* x = 2^k (1 + f), 1 + f in [sqrt(1/2), sqrt(2)): the bits of sqrt(1/2) taken off first */
  const uint32_t ix = ember_vmath_bits(xs) - 0x3f3504f3u;
  const float k = (float)((int32_t)ix >> 23) - (float)(tiny * 25);
  const float f = ember_vmath_float((ix & 0x007fffffu) + 0x3f3504f3u) - 1.0f;
  const float s = f / (2.0f + f), z = s * s, w = z * z;
  const float t1 = w * (0.40000972152f + w * 0.24279078841f);
  const float t2 = z * (0.66666662693f + w * 0.28498786688f);
  const float hfsq = 0.5f * f * f;
  float r = s * (hfsq + t1 + t2) + k * 9.0580006145e-06f - hfsq + f + k * 0.69313812256f;
  r = ember_vmath_select(x == ember_vmath_float(0x7f800000u), x, r);             /* inf */
  r = ember_vmath_select(x == 0.0f, ember_vmath_float(0xff800000u), r);         /* -0 too */
  return ember_vmath_select((x < 0.0f) | (x != x), ember_vmath_float(0x7fc00000u), r);
}

/* log2 and log10 as log times a constant (one more rounding: under 2 ulp) */
static inline float ember_log2f(float x) { return ember_logf(x) * 1.44269504089f; }
static inline float ember_log10f(float x) { return ember_logf(x) * 0.434294481903f; }

#endif /* EMBER_KERNELS_VMATH_H_ */
