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
#include "ember/kernels/qsimd.h"

#define EMBER_QADD_CHUNK 4096 /* elements per parallel chunk (a multiple of the vector) */

typedef struct {
  const uint8_t *a, *b;
  uint8_t* y;
  int64_t n;
  float ra, rb;
  int32_t a_zp, b_zp, y_zp, y_lo, y_hi; /* a_zp, b_zp in the u8 view */
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
  const float pa = (float)((int32_t)(uint8_t)(a ^ p->a_flip) - p->a_zp) * p->ra;
  const float pb = (float)((int32_t)(uint8_t)(b ^ p->b_flip) - p->b_zp) * p->rb;
  return (uint8_t)ember_qsaturate(pa + pb, p->y_zp, p->y_lo, p->y_hi);
}

/* Elements [lo, hi): EMBER_QF_L at a time (bytes widened to int32, then float; qsimd.h's
 * float epilogue: clamp, round, low bytes), the rest one by one. */
static EMBER_QADD_EXACT_FN void ember_qadd_range(const ember_qadd_args* p, int64_t lo,
                                                 int64_t hi) {
  EMBER_QADD_EXACT_FP
  int64_t i = lo;
#if defined(EMBER_QF_L)
  const ember_qfvf zf = {0}, ra = zf + p->ra, rb = zf + p->rb;
  const ember_qfrq rq = ember_qfrq_make(p->y_zp, p->y_lo, p->y_hi);
  const ember_qfvub zb = {0}, af = zb + p->a_flip, bf = zb + p->b_flip;
  const ember_qfvi zi = {0}, az = zi + p->a_zp, bz = zi + p->b_zp;
  /* in locals: the stores to y may alias *p, whose fields were reloaded every vector */
  const uint8_t *const pa_ = p->a, *const pb_ = p->b;
  uint8_t* const py_ = p->y;
  for (; i + EMBER_QF_L <= hi; i += EMBER_QF_L) {
    ember_qfvub a, b;
    ember_qfvf pa, pb, v;
    memcpy(&a, pa_ + i, sizeof a);
    memcpy(&b, pb_ + i, sizeof b);
    pa = __builtin_convertvector(__builtin_convertvector(a ^ af, ember_qfvi) - az, ember_qfvf) * ra;
    pb = __builtin_convertvector(__builtin_convertvector(b ^ bf, ember_qfvi) - bz, ember_qfvf) * rb;
    v = pa + pb;
    ember_qf_store(py_ + i, &v, &rq);
  }
#endif
  for (; i < hi; ++i) p->y[i] = ember_qadd_one(p, p->a[i], p->b[i]);
}

/* The arguments of a call of ember_qadd (its parameters but `parallel`): signed operands in
 * the u8 view. Also the residual add that qconv.h runs after a conv. */
static inline void ember_qadd_init(ember_qadd_args* p, const void* a, const void* b, void* y,
                                   int64_t n, float ra, float rb, int32_t a_zp, int32_t b_zp,
                                   int32_t y_zp, int32_t y_lo, int32_t y_hi, int32_t a_signed,
                                   int32_t b_signed) {
  p->a = (const uint8_t*)a; p->b = (const uint8_t*)b; p->y = (uint8_t*)y; p->n = n;
  p->ra = ra; p->rb = rb; p->y_lo = y_lo; p->y_hi = y_hi;
  p->a_flip = a_signed ? 0x80 : 0; p->b_flip = b_signed ? 0x80 : 0;
  p->a_zp = a_zp + (a_signed ? 128 : 0); p->b_zp = b_zp + (b_signed ? 128 : 0); p->y_zp = y_zp;
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
  ember_qadd_init(&p, a, b, y, n, ra, rb, a_zp, b_zp, y_zp, y_lo, y_hi, a_signed, b_signed);
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
