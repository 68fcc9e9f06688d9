/*
 * ember kernels: softmax and log_softmax along one axis of a float32 tensor viewed as
 * (outer, n, inner), n the axis:
 *
 *   softmax      y = exp(x - max) / sum(exp(x - max))
 *   log_softmax  y = x - max - log(sum(exp(x - max)))
 *
 * Last axis (inner == 1), per row: one pass for the max, one pass that writes exp(x - max) (or,
 * for log_softmax, only sums it) while summing, then a scale of the row already in cache: the
 * input is read from memory once. Another axis: vectors run along the contiguous inner
 * dimension (EMBER_VL lanes of inner at a time, each lane its own softmax over n), the same
 * three passes with stride `inner`.
 * Rows whose max is not finite (all -inf, or a +inf) or that hold a NaN take a scalar libm path
 * so the result follows IEEE arithmetic as numpy's formula does (NaN where it gives NaN); exp
 * of arguments below -87.3 is flushed to 0 so masked (-inf) entries give exactly 0.
 * Work items (rows, or (outer, inner block) pairs) are split over TVMBackendParallelLaunch
 * tasks when `parallel`. Returns 0, or -1 when the parallel launch fails.
 */
#ifndef EMBER_KERNELS_SOFTMAX_H_
#define EMBER_KERNELS_SOFTMAX_H_

#include <stdint.h>

#include "ember/kernels/linkage.h"

/* The entry point (linkage and where its body comes from: ember/kernels/linkage.h). */
#define EMBER_SOFTMAX_PARAMS                                                                       \
  const float* x, float* y, int64_t outer, int64_t n, int64_t inner, int32_t log, int32_t parallel
EMBER_KENTRY int32_t ember_softmax(EMBER_SOFTMAX_PARAMS);

#if EMBER_KERNEL_BODIES
#include <math.h>

#include "ember/c_backend_api.h"
#include "ember/kernels/gemm_simd.h"

#define EMBER_EXP_FLUSH (-87.3f)

/* exp(x) for x <= 0 (x - max), 0 below EMBER_EXP_FLUSH (-inf included): one clamp and a
 * mask instead of ember_vexp's two clamps. */
static inline ember_vf ember_vexp0(ember_vf x) {
  ember_vf e = ember_vexp_core(ember_vmax(x, ember_vset1(EMBER_EXP_FLUSH)));
  return ember_vkeep_ge(e, x, EMBER_EXP_FLUSH);
}

/* The IEEE path of one softmax (stride s between elements): numpy's formula, libm's exp. */
EMBER_COLD void ember_softmax_ieee(const float* x, float* y, int64_t n, int64_t s, int32_t log) {
  float m = -INFINITY, sum = 0.0f;
  int64_t k;
  for (k = 0; k < n; ++k) m = x[k * s] > m || x[k * s] != x[k * s] ? x[k * s] : m;
  for (k = 0; k < n; ++k) sum += expf(x[k * s] - m);
  for (k = 0; k < n; ++k) {
    y[k * s] = log ? x[k * s] - m - logf(sum) : expf(x[k * s] - m) / sum;
  }
}

/* True when the fast path may be used: the max m is finite and the plain sum of the inputs
 * (acc) is not NaN, i.e. no NaN input (and not both infinities, which m already rules out). */
static inline int ember_softmax_finite(float m, float acc) {
  return m > -INFINITY && m < INFINITY && acc == acc;
}

/* One row (inner == 1); the last n % EMBER_VL elements as one vector padded with -inf. */
static inline void ember_softmax_row(const float* x, float* y, int64_t n, int32_t log) {
  ember_vf vm = ember_vset1(-INFINITY), vs = ember_vzero(), va = ember_vzero(), v;
  int64_t k, r = n % EMBER_VL, nf = n - r;
  float m, t;
  for (k = 0; k < n; k += EMBER_VL) {
    v = k < nf ? ember_vload(x + k) : ember_vload_part(x + k, r, -INFINITY);
    vm = ember_vmax(vm, v);
    va = ember_vadd(va, v); /* -inf padding keeps it a number; a NaN input makes it NaN */
  }
  m = ember_vhmax(vm);
  if (!ember_softmax_finite(m, ember_vhsum(va))) {
    ember_softmax_ieee(x, y, n, 1, log);
    return;
  }
  vm = ember_vset1(m);
  for (k = 0; k < n; k += EMBER_VL) {
    v = k < nf ? ember_vload(x + k) : ember_vload_part(x + k, r, -INFINITY);
    v = ember_vexp0(ember_vsub(v, vm)); /* padding: exp(-inf) = 0 */
    if (!log) {
      if (k < nf) ember_vstore(y + k, v); else ember_vstore_part(y + k, r, v);
    }
    vs = ember_vadd(vs, v);
  }
  if (log) {
    t = m + logf(ember_vhsum(vs));
    vm = ember_vset1(t);
    for (k = 0; k < nf; k += EMBER_VL) ember_vstore(y + k, ember_vsub(ember_vload(x + k), vm));
    if (r) ember_vstore_part(y + nf, r, ember_vsub(ember_vload_part(x + nf, r, 0.0f), vm));
  } else {
    vs = ember_vset1(1.0f / ember_vhsum(vs));
    for (k = 0; k < nf; k += EMBER_VL) ember_vstore(y + k, ember_vmul(ember_vload(y + k), vs));
    if (r) ember_vstore_part(y + nf, r, ember_vmul(ember_vload_part(y + nf, r, 0.0f), vs));
  }
}

/* EMBER_VL independent softmaxes over n, lanes contiguous at x, elements `inner` apart. */
static inline void ember_softmax_lanes(const float* x, float* y, int64_t n, int64_t inner,
                                       int32_t log) {
  ember_vf vm = ember_vset1(-INFINITY), vs = ember_vzero(), va = ember_vzero(), t;
  float lanes[EMBER_VL], accs[EMBER_VL];
  int64_t k;
  int j;
  for (k = 0; k < n; ++k) {
    ember_vf v = ember_vload(x + k * inner);
    vm = ember_vmax(vm, v);
    va = ember_vadd(va, v);
  }
  ember_vstore(lanes, vm);
  ember_vstore(accs, va);
  for (j = 0; j < EMBER_VL; ++j) {
    if (!ember_softmax_finite(lanes[j], accs[j])) break;
  }
  if (j < EMBER_VL) {
    for (j = 0; j < EMBER_VL; ++j) ember_softmax_ieee(x + j, y + j, n, inner, log);
    return;
  }
  for (k = 0; k < n; ++k) {
    ember_vf e = ember_vexp0(ember_vsub(ember_vload(x + k * inner), vm));
    if (!log) ember_vstore(y + k * inner, e);
    vs = ember_vadd(vs, e);
  }
  if (log) {
    ember_vstore(lanes, vs);
    for (j = 0; j < EMBER_VL; ++j) lanes[j] = logf(lanes[j]);
    t = ember_vadd(vm, ember_vload(lanes));
    for (k = 0; k < n; ++k) ember_vstore(y + k * inner, ember_vsub(ember_vload(x + k * inner), t));
  } else {
    t = ember_vdiv(ember_vset1(1.0f), vs);
    for (k = 0; k < n; ++k) ember_vstore(y + k * inner, ember_vmul(ember_vload(y + k * inner), t));
  }
}

typedef struct {
  const float* x;
  float* y;
  int64_t outer, n, inner;
  int32_t log;
} ember_softmax_args;

/* Items: rows when inner == 1, else (outer, block of EMBER_VL lanes or the scalar tail). */
static inline int64_t ember_softmax_items(const ember_softmax_args* a) {
  return a->inner == 1 ? a->outer : a->outer * ((a->inner + EMBER_VL - 1) / EMBER_VL);
}

static void ember_softmax_range(const ember_softmax_args* a, int64_t begin, int64_t end) {
  int64_t blocks = (a->inner + EMBER_VL - 1) / EMBER_VL, item, j;
  for (item = begin; item < end; ++item) {
    if (a->inner == 1) {
      ember_softmax_row(a->x + item * a->n, a->y + item * a->n, a->n, a->log);
    } else {
      int64_t o = item / blocks, j0 = (item % blocks) * EMBER_VL;
      int64_t off = o * a->n * a->inner + j0;
      if (j0 + EMBER_VL <= a->inner) {
        ember_softmax_lanes(a->x + off, a->y + off, a->n, a->inner, a->log);
      } else {
        for (j = 0; j0 + j < a->inner; ++j) {
          ember_softmax_ieee(a->x + off + j, a->y + off + j, a->n, a->inner, a->log);
        }
      }
    }
  }
}

static inline int ember_softmax_task(int task_id, TVMParallelGroupEnv* penv, void* cdata) {
  const ember_softmax_args* a = (const ember_softmax_args*)cdata;
  int64_t items = ember_softmax_items(a), tasks = penv->num_task;
  ember_softmax_range(a, items * task_id / tasks, items * (task_id + 1) / tasks);
  return 0;
}

/* See the top of this file; log selects log_softmax. */
#if EMBER_KERNEL_ALL || defined(EMBER_KOBJ_ember_softmax)
EMBER_KENTRY int32_t ember_softmax(EMBER_SOFTMAX_PARAMS) {
  ember_softmax_args a;
  a.x = x; a.y = y; a.outer = outer; a.n = n; a.inner = inner; a.log = log;
  if (outer <= 0 || n <= 0 || inner <= 0) return 0;
  if (parallel && ember_softmax_items(&a) > 1) {
    return TVMBackendParallelLaunch(ember_softmax_task, &a, 0) == 0 ? 0 : -1;
  }
  ember_softmax_range(&a, 0, ember_softmax_items(&a));
  return 0;
}
#endif
#endif /* EMBER_KERNEL_BODIES */

#endif /* EMBER_KERNELS_SOFTMAX_H_ */
