/*
 * ember kernels: layer normalisation of a float32 tensor viewed as (outer, n, inner), the
 * statistics over n (the normalised axis), with the gamma/beta epilogue:
 *
 *   y = (x - mean) / sqrt(var + eps) * gamma[k] + beta[k]      (var: biased, 1/n)
 *
 * gamma/beta are applied when has_gamma/has_beta (n values each). Last axis (inner == 1), per
 * row: a pass for the mean, one for the centred sum of squares (two passes: no cancellation as
 * with E[x^2] - E[x]^2), one writing the output; the row is read from memory once and from
 * cache after. Another axis: vectors run along the contiguous inner dimension (EMBER_VL lanes,
 * each its own normalisation over n), the same passes with stride `inner`, a scalar loop for
 * the last lanes. Work items are split over TVMBackendParallelLaunch tasks when `parallel`.
 * Returns 0, or -1 when the parallel launch fails.
 */
#ifndef EMBER_KERNELS_NORM_H_
#define EMBER_KERNELS_NORM_H_

#include <stdint.h>

#include "ember/kernels/linkage.h"

/* The entry point (linkage and where its body comes from: ember/kernels/linkage.h). */
#define EMBER_LAYER_NORM_PARAMS                                                                    \
  const float* x, float* y, int64_t outer, int64_t n, int64_t inner, int32_t has_gamma,            \
      const float* gamma, int32_t has_beta, const float* beta, float eps, int32_t parallel
EMBER_KENTRY int32_t ember_layer_norm(EMBER_LAYER_NORM_PARAMS);

#if EMBER_KERNEL_BODIES
#include <math.h>
#include <stddef.h>

#include "ember/c_backend_api.h"
#include "ember/kernels/gemm_simd.h"

typedef struct {
  const float* x;
  float* y;
  int64_t outer, n, inner;
  const float* gamma; /* NULL: no scale */
  const float* beta;  /* NULL: no shift */
  float eps;
} ember_layer_norm_args;

/* One row (inner == 1); the last n % EMBER_VL elements as one padded vector. */
static inline void ember_layer_norm_row(const ember_layer_norm_args* a, const float* x,
                                        float* y) {
  int64_t n = a->n, k, r = n % EMBER_VL, nf = n - r;
  ember_vf vs = ember_vzero(), vm, vr, v;
  float mean;
  for (k = 0; k < nf; k += EMBER_VL) vs = ember_vadd(vs, ember_vload(x + k));
  if (r) vs = ember_vadd(vs, ember_vload_part(x + nf, r, 0.0f));
  mean = ember_vhsum(vs) / (float)n;
  vm = ember_vset1(mean);
  vs = ember_vzero();
  for (k = 0; k < n; k += EMBER_VL) {
    v = k < nf ? ember_vload(x + k) : ember_vload_part(x + k, r, mean); /* padding: d = 0 */
    v = ember_vsub(v, vm);
    vs = ember_vfma(v, v, vs);
  }
  vr = ember_vset1(1.0f / sqrtf(ember_vhsum(vs) / (float)n + a->eps));
  for (k = 0; k < n; k += EMBER_VL) {
    int full = k < nf;
    v = ember_vmul(ember_vsub(full ? ember_vload(x + k) : ember_vload_part(x + k, r, 0.0f),
                              vm), vr);
    if (a->gamma) {
      v = ember_vmul(v, full ? ember_vload(a->gamma + k) : ember_vload_part(a->gamma + k, r, 0.0f));
    }
    if (a->beta) {
      v = ember_vadd(v, full ? ember_vload(a->beta + k) : ember_vload_part(a->beta + k, r, 0.0f));
    }
    if (full) ember_vstore(y + k, v); else ember_vstore_part(y + k, r, v);
  }
}

/* EMBER_VL normalisations over n, lanes contiguous at x, elements `inner` apart. The sums
 * run in four accumulators: one would be a chain of dependent adds, one per element, at the
 * add's latency (the whole cost when n is long and inner is one vector: a GroupNorm over a
 * 1-D conv's frames in NCHW[L]c). */
static inline void ember_layer_norm_lanes(const ember_layer_norm_args* a, const float* x,
                                          float* y) {
  int64_t n = a->n, s = a->inner, k;
  ember_vf vs, vm, vr, inv_n = ember_vset1(1.0f / (float)n);
  ember_vf s0 = ember_vzero(), s1 = ember_vzero(), s2 = ember_vzero(), s3 = ember_vzero();
  float r[EMBER_VL];
  int j;
  for (k = 0; k + 4 <= n; k += 4) {
    s0 = ember_vadd(s0, ember_vload(x + k * s));
    s1 = ember_vadd(s1, ember_vload(x + (k + 1) * s));
    s2 = ember_vadd(s2, ember_vload(x + (k + 2) * s));
    s3 = ember_vadd(s3, ember_vload(x + (k + 3) * s));
  }
  for (; k < n; ++k) s0 = ember_vadd(s0, ember_vload(x + k * s));
  vm = ember_vmul(ember_vadd(ember_vadd(s0, s1), ember_vadd(s2, s3)), inv_n);
  s0 = s1 = s2 = s3 = ember_vzero();
  for (k = 0; k + 4 <= n; k += 4) {
    ember_vf d0 = ember_vsub(ember_vload(x + k * s), vm);
    ember_vf d1 = ember_vsub(ember_vload(x + (k + 1) * s), vm);
    ember_vf d2 = ember_vsub(ember_vload(x + (k + 2) * s), vm);
    ember_vf d3 = ember_vsub(ember_vload(x + (k + 3) * s), vm);
    s0 = ember_vfma(d0, d0, s0);
    s1 = ember_vfma(d1, d1, s1);
    s2 = ember_vfma(d2, d2, s2);
    s3 = ember_vfma(d3, d3, s3);
  }
  for (; k < n; ++k) {
    ember_vf d = ember_vsub(ember_vload(x + k * s), vm);
    s0 = ember_vfma(d, d, s0);
  }
  vs = ember_vadd(ember_vadd(s0, s1), ember_vadd(s2, s3));
  ember_vstore(r, ember_vfma(vs, inv_n, ember_vset1(a->eps)));
  for (j = 0; j < EMBER_VL; ++j) r[j] = 1.0f / sqrtf(r[j]);
  vr = ember_vload(r);
  for (k = 0; k < n; ++k) {
    ember_vf v = ember_vmul(ember_vsub(ember_vload(x + k * s), vm), vr);
    if (a->gamma) v = ember_vmul(v, ember_vset1(a->gamma[k]));
    if (a->beta) v = ember_vadd(v, ember_vset1(a->beta[k]));
    ember_vstore(y + k * s, v);
  }
}

/* One normalisation over n with stride s (the lanes past the last full vector). */
EMBER_COLD void ember_layer_norm_strided(const ember_layer_norm_args* a, const float* x, float* y) {
  int64_t n = a->n, s = a->inner, k;
  float mean = 0.0f, var = 0.0f, r;
  for (k = 0; k < n; ++k) mean += x[k * s];
  mean /= (float)n;
  for (k = 0; k < n; ++k) var += (x[k * s] - mean) * (x[k * s] - mean);
  r = 1.0f / sqrtf(var / (float)n + a->eps);
  for (k = 0; k < n; ++k) {
    float v = (x[k * s] - mean) * r;
    if (a->gamma) v *= a->gamma[k];
    if (a->beta) v += a->beta[k];
    y[k * s] = v;
  }
}

/* Items: rows when inner == 1, else (outer, block of EMBER_VL lanes or the scalar tail). */
static inline int64_t ember_layer_norm_items(const ember_layer_norm_args* a) {
  return a->inner == 1 ? a->outer : a->outer * ((a->inner + EMBER_VL - 1) / EMBER_VL);
}

static void ember_layer_norm_range(const ember_layer_norm_args* a, int64_t begin, int64_t end) {
  int64_t blocks = (a->inner + EMBER_VL - 1) / EMBER_VL, item, j;
  for (item = begin; item < end; ++item) {
    if (a->inner == 1) {
      ember_layer_norm_row(a, a->x + item * a->n, a->y + item * a->n);
    } else {
      int64_t o = item / blocks, j0 = (item % blocks) * EMBER_VL;
      int64_t off = o * a->n * a->inner + j0;
      if (j0 + EMBER_VL <= a->inner) {
        ember_layer_norm_lanes(a, a->x + off, a->y + off);
      } else {
        for (j = 0; j0 + j < a->inner; ++j) {
          ember_layer_norm_strided(a, a->x + off + j, a->y + off + j);
        }
      }
    }
  }
}

static inline int ember_layer_norm_task(int task_id, TVMParallelGroupEnv* penv, void* cdata) {
  const ember_layer_norm_args* a = (const ember_layer_norm_args*)cdata;
  int64_t items = ember_layer_norm_items(a), tasks = penv->num_task;
  ember_layer_norm_range(a, items * task_id / tasks, items * (task_id + 1) / tasks);
  return 0;
}

/* See the top of this file. */
#if EMBER_KERNEL_ALL || defined(EMBER_KOBJ_ember_layer_norm)
EMBER_KENTRY int32_t ember_layer_norm(EMBER_LAYER_NORM_PARAMS) {
  ember_layer_norm_args a;
  a.x = x; a.y = y; a.outer = outer; a.n = n; a.inner = inner;
  a.gamma = has_gamma ? gamma : NULL;
  a.beta = has_beta ? beta : NULL;
  a.eps = eps;
  if (outer <= 0 || n <= 0 || inner <= 0) return 0;
  if (parallel && ember_layer_norm_items(&a) > 1) {
    return TVMBackendParallelLaunch(ember_layer_norm_task, &a, 0) == 0 ? 0 : -1;
  }
  ember_layer_norm_range(&a, 0, ember_layer_norm_items(&a));
  return 0;
}
#endif
#endif /* EMBER_KERNEL_BODIES */

#endif /* EMBER_KERNELS_NORM_H_ */
