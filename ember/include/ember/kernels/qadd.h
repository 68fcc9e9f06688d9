/*
 * ember kernels: the elementwise sum of two quantized tensors of one shape, requantized, the
 * kernel of nn.contrib_qadd (onnxruntime's QLinearAdd, as quantize_static writes the residual
 * adds of MobileNet-style networks):
 *
 *   y[i] = clamp(round_half_even((a[i] - a_zp) * ra + (b[i] - b_zp) * rb) + y_zp, y_lo, y_hi)
 *
 * with ra = a_scale / y_scale and rb = b_scale / y_scale (float32 ratios, as onnxruntime
 * computes them), in float32: each product rounded, then their sum (the functions below are
 * compiled without fused multiply-adds, so every SIMD level and the numpy reference of
 * topi/nn/qadd.py agree bit for bit). onnxruntime's kernels order the same float32 terms
 * differently (a fixed part first, fused or not by platform): they differ from this by at
 * most one unit of y, where their rounding of the sum lands on the other side of a half.
 *
 * a, b and y are bytes: a signed operand (a_signed, b_signed) is read in the u8 view (128
 * added, its zero point too); y is stored as the low byte of the result ([y_lo, y_hi]: u8's or
 * s8's range, or less where a relu was folded in). The n elements are split into chunks over
 * TVMBackendParallelLaunch tasks when `parallel`. Returns 0, or -1 when the launch fails.
 */
#ifndef EMBER_KERNELS_QADD_H_
#define EMBER_KERNELS_QADD_H_

#include <stdint.h>
#include <string.h>

#include "ember/kernels/linkage.h"

/* The entry point (linkage and where its body comes from: ember/kernels/linkage.h). */
#define EMBER_QADD_PARAMS                                                                      \
  const void *a, const void *b, void *y, int64_t n, float ra, float rb, int32_t a_zp,         \
      int32_t b_zp, int32_t y_zp, int32_t y_lo, int32_t y_hi, int32_t a_signed,                \
      int32_t b_signed, int32_t parallel
EMBER_KENTRY int32_t ember_qadd(EMBER_QADD_PARAMS);

#if EMBER_KERNEL_BODIES
#include "ember/c_backend_api.h"

#define EMBER_QADD_CHUNK 4096 /* elements per parallel chunk (a multiple of the vector) */

typedef struct {
  const uint8_t *a, *b;
  uint8_t* y;
  int64_t n;
  float ra, rb, lo, hi; /* lo, hi: y's bounds minus y_zp */
  int32_t a_zp, b_zp, y_zp; /* a_zp, b_zp in the u8 view */
  uint8_t a_flip, b_flip;
} ember_qadd_args;

/* The float32 arithmetic below is evaluated as written: products rounded before the sum (no
 * fused multiply-add whatever -ffp-contract says), as numpy evaluates the reference. */
#if defined(__clang__)
#define EMBER_QADD_EXACT_FP _Pragma("clang fp contract(off)")
#define EMBER_QADD_EXACT_FN
#elif defined(__GNUC__)
#define EMBER_QADD_EXACT_FP
#define EMBER_QADD_EXACT_FN __attribute__((optimize("fp-contract=off")))
#else
#define EMBER_QADD_EXACT_FP
#define EMBER_QADD_EXACT_FN
#endif

/* y[i] of one element (the vector loop's tail, and the loop without vector extensions). */
static EMBER_QADD_EXACT_FN uint8_t ember_qadd_one(const ember_qadd_args* p, uint8_t a,
                                                  uint8_t b) {
  EMBER_QADD_EXACT_FP
  const float magic = 12582912.0f; /* 1.5 * 2^23: adding it rounds to an integer */
  const float pa = (float)((int32_t)(uint8_t)(a ^ p->a_flip) - p->a_zp) * p->ra;
  const float pb = (float)((int32_t)(uint8_t)(b ^ p->b_flip) - p->b_zp) * p->rb;
  float v = pa + pb;
  v = v < p->lo ? p->lo : v;
  v = v > p->hi ? p->hi : v;
  v = (v + magic) - magic; /* not folded: IEEE, no -ffast-math */
  return (uint8_t)((int32_t)v + p->y_zp);
}

#if defined(__GNUC__) && !defined(EMBER_KERNELS_PORTABLE)
/* lanes a vector: one register of int32 (16 lanes on AVX2 went through the stack: 2.5x
 * slower than 8) */
#if defined(__AVX512F__)
#define EMBER_QADD_VL 16
#elif defined(__AVX2__)
#define EMBER_QADD_VL 8
#else
#define EMBER_QADD_VL 4
#endif
typedef float ember_qadd_vf __attribute__((vector_size(4 * EMBER_QADD_VL)));
typedef int32_t ember_qadd_vi __attribute__((vector_size(4 * EMBER_QADD_VL)));
typedef uint8_t ember_qadd_vb __attribute__((vector_size(EMBER_QADD_VL)));

/* v clamped into [lo, hi] (no NaN here: finite ratios), then rounded half to even to int32
 * lanes. With AVX-512: maxps, minps and one vcvtps2dq (the current rounding: nearest even),
 * a third of the loop's time less than compares, blends and the 1.5 * 2^23 trick; the
 * results are the same. Macros: no vector arguments, whose ABI differs between levels. */
#if defined(__AVX512F__) && defined(__clang__)
#define EMBER_QADD_ROUND(v, lo, hi)                                                         \
  ((ember_qadd_vi)__builtin_ia32_cvtps2dq512_mask(                                          \
      __builtin_ia32_minps512((hi), __builtin_ia32_maxps512((lo), (v), 4), 4),              \
      (ember_qadd_vi){0}, (short)-1, 4))
#elif defined(__AVX512F__)
#define EMBER_QADD_ROUND(v, lo, hi)                                                         \
  ((ember_qadd_vi)__builtin_ia32_cvtps2dq512_mask(                                          \
      __builtin_ia32_minps512_mask((hi),                                                    \
                                   __builtin_ia32_maxps512_mask((lo), (v), (ember_qadd_vf){0}, \
                                                                (short)-1, 4),              \
                                   (ember_qadd_vf){0}, (short)-1, 4),                       \
      (ember_qadd_vi){0}, (short)-1, 4))
#else
/* lanes of x where m is set, else of y (C has no ?: on vectors) */
#define EMBER_QADD_SELECT(m, x, y) \
  ((ember_qadd_vf)(((m) & (ember_qadd_vi)(x)) | (~(m) & (ember_qadd_vi)(y))))
#define EMBER_QADD_ROUND(v, lo, hi)                                                      \
  __builtin_convertvector(                                                               \
      (EMBER_QADD_SELECT((v) > (hi), (hi), EMBER_QADD_SELECT((v) < (lo), (lo), (v))) +   \
       12582912.0f) - 12582912.0f, ember_qadd_vi)
#endif
#endif

/* Elements [lo, hi): EMBER_QADD_VL at a time (bytes widened to int32, then float), the rest
 * one by one; the clamp before the round keeps |v| small (the 1.5 * 2^23 rounding trick, and
 * vcvtps2dq's range). */
static EMBER_QADD_EXACT_FN void ember_qadd_range(const ember_qadd_args* p, int64_t lo,
                                                 int64_t hi) {
  EMBER_QADD_EXACT_FP
  int64_t i = lo;
#if defined(__GNUC__) && !defined(EMBER_KERNELS_PORTABLE)
  const ember_qadd_vf zf = {0}, ra = zf + p->ra, rb = zf + p->rb;
  const ember_qadd_vf vlo = zf + p->lo, vhi = zf + p->hi;
  const ember_qadd_vb zb = {0}, af = zb + p->a_flip, bf = zb + p->b_flip;
  const ember_qadd_vi zi = {0}, az = zi + p->a_zp, bz = zi + p->b_zp, yz = zi + p->y_zp;
  /* in locals: the stores to y may alias *p, whose fields were reloaded every vector */
  const uint8_t *const pa_ = p->a, *const pb_ = p->b;
  uint8_t* const py_ = p->y;
  for (; i + EMBER_QADD_VL <= hi; i += EMBER_QADD_VL) {
    ember_qadd_vb a, b, out;
    ember_qadd_vf pa, pb, v;
    memcpy(&a, pa_ + i, sizeof a);
    memcpy(&b, pb_ + i, sizeof b);
    pa = __builtin_convertvector(__builtin_convertvector(a ^ af, ember_qadd_vi) - az,
                                 ember_qadd_vf) * ra;
    pb = __builtin_convertvector(__builtin_convertvector(b ^ bf, ember_qadd_vi) - bz,
                                 ember_qadd_vf) * rb;
    v = pa + pb;
    out = __builtin_convertvector(EMBER_QADD_ROUND(v, vlo, vhi) + yz, ember_qadd_vb);
    memcpy(py_ + i, &out, sizeof out);
  }
#endif
  for (; i < hi; ++i) p->y[i] = ember_qadd_one(p, p->a[i], p->b[i]);
}

static inline int ember_qadd_task(int task_id, TVMParallelGroupEnv* penv, void* cdata) {
  const ember_qadd_args* p = (const ember_qadd_args*)cdata;
  const int64_t chunks = (p->n + EMBER_QADD_CHUNK - 1) / EMBER_QADD_CHUNK;
  const int64_t first = chunks * task_id / penv->num_task;
  const int64_t last = chunks * (task_id + 1) / penv->num_task;
  const int64_t hi = last * EMBER_QADD_CHUNK;
  ember_qadd_range(p, first * EMBER_QADD_CHUNK, hi < p->n ? hi : p->n);
  return 0;
}

/* See the top of this file. */
#if EMBER_KERNEL_ALL || defined(EMBER_KOBJ_ember_qadd)
EMBER_KENTRY int32_t ember_qadd(EMBER_QADD_PARAMS) {
  ember_qadd_args p;
  p.a = (const uint8_t*)a; p.b = (const uint8_t*)b; p.y = (uint8_t*)y; p.n = n;
  p.ra = ra; p.rb = rb;
  p.lo = (float)(y_lo - y_zp); p.hi = (float)(y_hi - y_zp);
  p.a_flip = a_signed ? 0x80 : 0; p.b_flip = b_signed ? 0x80 : 0;
  p.a_zp = a_zp + (a_signed ? 128 : 0); p.b_zp = b_zp + (b_signed ? 128 : 0); p.y_zp = y_zp;
  if (n <= 0) return 0;
  if (parallel && n > EMBER_QADD_CHUNK) {
    return TVMBackendParallelLaunch(ember_qadd_task, &p, 0) == 0 ? 0 : -1;
  }
  ember_qadd_range(&p, 0, n);
  return 0;
}
#endif
#endif /* EMBER_KERNEL_BODIES */

#endif /* EMBER_KERNELS_QADD_H_ */
