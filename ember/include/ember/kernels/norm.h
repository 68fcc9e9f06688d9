/*
 * ember kernels: layer normalisation of a float32 tensor viewed as (outer, n, inner), the
 * statistics over n (the normalised axis), with the gamma/beta epilogue:
 *
 *   y = (x - mean) / sqrt(var + eps) * gamma[k] + beta[k]      (var: biased, 1/n)
 *
 * gamma/beta are applied when has_gamma/has_beta (n values each). ember_layer_norm_act adds an
 * epilogue on each normalised row while it is in registers / L1 (a GroupNorm's per-channel
 * affine and the activation after it, which would otherwise be one more pass over the tensor):
 *
 *   y = act(norm(x) * row_scale[r] + row_shift[r]),   r = (row / row_div) % row_count
 *
 * `row` numbers the (outer, inner) positions, outer * inner + lane (each is one normalisation);
 * so a vector of channels broadcast over the other axes is indexed by row_count = channels and
 * row_div = the size of what follows the channels (1 for a GroupNorm of one channel per group
 * over a 1-D conv's frames, plain or NCHW[L]c). The activation codes and parameters are those
 * of gemm_epilogue.h (EMBER_ACT_*), applied with its vector forms (the same as conv/gemm
 * epilogues) per chunk of stored outputs, where many vectors' exp/erf chains overlap.
 * ember_rms_norm is the same without the mean (below). Last axis (inner == 1), per
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
#define EMBER_LAYER_NORM_ACT_PARAMS                                                                \
  const float* x, float* y, int64_t outer, int64_t n, int64_t inner, int32_t has_gamma,            \
      const float* gamma, int32_t has_beta, const float* beta, float eps, int32_t has_row_scale,   \
      const float* row_scale, int32_t has_row_shift, const float* row_shift, int64_t row_count,    \
      int64_t row_div, int32_t act, float p0, float p1, int32_t parallel
EMBER_KENTRY int32_t ember_layer_norm_act(EMBER_LAYER_NORM_ACT_PARAMS);
/* RMS normalisation (T5, LLaMA): y = x / sqrt(mean(x^2) + eps) * gamma[k], the same passes
 * without the mean (nothing centred). */
#define EMBER_RMS_NORM_PARAMS                                                                      \
  const float* x, float* y, int64_t outer, int64_t n, int64_t inner, int32_t has_gamma,            \
      const float* gamma, float eps, int32_t parallel
EMBER_KENTRY int32_t ember_rms_norm(EMBER_RMS_NORM_PARAMS);

#if EMBER_KERNEL_BODIES
#include <math.h>
#include <stddef.h>

#include "ember/c_backend_api.h"
#include "ember/kernels/gemm_epilogue.h"
#include "ember/kernels/gemm_simd.h"

typedef struct {
  const float* x;
  float* y;
  int64_t outer, n, inner;
  const float* gamma; /* NULL: no scale */
  const float* beta;  /* NULL: no shift */
  float eps;
  /* the epilogue of ember_layer_norm_act (NULL / EMBER_ACT_NONE: none) */
  const float* row_scale;
  const float* row_shift;
  int64_t row_count, row_div;
  int32_t act;
  float p0, p1;
  int32_t rms; /* ember_rms_norm: the mean is taken as 0 */
} ember_layer_norm_args;

/* Rows of outputs stored before the activation runs over them: they are still in L1. */
#define EMBER_LAYER_NORM_ACT_CHUNK 512

static inline int64_t ember_layer_norm_row_index(const ember_layer_norm_args* a, int64_t row) {
  return (row / a->row_div) % a->row_count;
}

/* The activation in place on `len` contiguous outputs (the last vector partial). */
static inline void ember_layer_norm_act_span(const ember_layer_norm_args* a, float* y,
                                             int64_t len) {
  int64_t full = len / EMBER_VL, r = len % EMBER_VL;
  if (full) ember_vact_block(y, 0, 1, (int32_t)full, a->act, a->p0, a->p1);
  if (r) {
    float* t = y + full * EMBER_VL;
    ember_vstore_part(t, r, ember_vact(ember_vload_part(t, r, 0.0f), a->act, a->p0, a->p1));
  }
}

/* The sum over a row of n floats (the last n % EMBER_VL as one padded vector) of x, or with
 * `squares` of (x - m)^2: alternate vectors in two accumulators, so that each add waits on the
 * one before the last (one chain of dependent adds was the bound of long rows). Kernel alone,
 * one EPYC core, layer norm with gamma and beta: 128 x 256 5.0 -> 4.55 us, 128 x 768 15.7 ->
 * 13.3, 1500 x 384 85 -> 72, 197 x 192 5.7 -> 5.3; four accumulators were faster on the
 * longest rows but slower at 192 (6.3 us: the extra adds of the reduction). */
static inline float ember_layer_norm_row_sum(const float* x, int64_t n, float m, int squares) {
  int64_t k, r = n % EMBER_VL, nf = n - r;
  ember_vf vm = ember_vset1(m), s0 = ember_vzero(), s1 = ember_vzero(), s2 = ember_vzero(), v;
#define EMBER_LN_ACC(acc, p)                                     \
  do {                                                           \
    v = (p);                                                     \
    if (squares) {                                               \
      v = ember_vsub(v, vm);                                     \
      acc = ember_vfma(v, v, acc);                               \
    } else {                                                     \
      acc = ember_vadd(acc, v);                                  \
    }                                                            \
  } while (0)
  for (k = 0; k + 2 * EMBER_VL <= nf; k += 2 * EMBER_VL) {
    EMBER_LN_ACC(s0, ember_vload(x + k));
    EMBER_LN_ACC(s1, ember_vload(x + k + EMBER_VL));
  }
  for (; k < nf; k += EMBER_VL) EMBER_LN_ACC(s0, ember_vload(x + k));
  /* padding: m, which adds 0 to the squares; 0 to the sum */
  if (r) EMBER_LN_ACC(s2, ember_vload_part(x + nf, r, squares ? m : 0.0f));
#undef EMBER_LN_ACC
  v = ember_vadd(ember_vadd(s0, s1), s2);
  return ember_vhsum(v);
}

/* One row (inner == 1); the last n % EMBER_VL elements as one padded vector. */
static inline void ember_layer_norm_row(const ember_layer_norm_args* a, const float* x,
                                        float* y, int64_t row) {
  int64_t n = a->n, k, k0, r = n % EMBER_VL, nf = n - r, chunk = n;
  ember_vf vm, vr, v, rs = ember_vset1(1.0f), rt = ember_vzero();
  int affine = a->row_scale || a->row_shift;
  float mean = a->rms ? 0.0f : ember_layer_norm_row_sum(x, n, 0.0f, 0) / (float)n;
  vm = ember_vset1(mean);
  vr = ember_vset1(1.0f / sqrtf(ember_layer_norm_row_sum(x, n, mean, 1) / (float)n + a->eps));
  if (affine) {
    int64_t i = ember_layer_norm_row_index(a, row);
    if (a->row_scale) rs = ember_vset1(a->row_scale[i]);
    if (a->row_shift) rt = ember_vset1(a->row_shift[i]);
  }
  if (a->act != EMBER_ACT_NONE) chunk = EMBER_LAYER_NORM_ACT_CHUNK; /* a multiple of EMBER_VL */
  for (k0 = 0; k0 < n; k0 += chunk) {
    int64_t end = n - k0 < chunk ? n : k0 + chunk;
    for (k = k0; k < end; k += EMBER_VL) {
      int full = k < nf;
      v = ember_vmul(ember_vsub(full ? ember_vload(x + k) : ember_vload_part(x + k, r, 0.0f),
                                vm), vr);
      if (a->gamma) {
        v = ember_vmul(v, full ? ember_vload(a->gamma + k) : ember_vload_part(a->gamma + k, r, 0.0f));
      }
      if (a->beta) {
        v = ember_vadd(v, full ? ember_vload(a->beta + k) : ember_vload_part(a->beta + k, r, 0.0f));
      }
      if (affine) v = ember_vfma(v, rs, rt);
      if (full) ember_vstore(y + k, v); else ember_vstore_part(y + k, r, v);
    }
    if (a->act != EMBER_ACT_NONE) ember_layer_norm_act_span(a, y + k0, end - k0);
  }
}

/* EMBER_VL normalisations over n, lanes contiguous at x, elements `inner` apart. The sums
 * run in four accumulators: one would be a chain of dependent adds, one per element, at the
 * add's latency (the whole cost when n is long and inner is one vector: a GroupNorm over a
 * 1-D conv's frames in NCHW[L]c). */
static inline void ember_layer_norm_lanes(const ember_layer_norm_args* a, const float* x,
                                          float* y, int64_t row) {
  int64_t n = a->n, s = a->inner, k, k0, chunk = n;
  ember_vf vs, vm, vr, inv_n = ember_vset1(1.0f / (float)n), rs = ember_vset1(1.0f);
  ember_vf rt = ember_vzero();
  int affine = a->row_scale || a->row_shift;
  ember_vf s0 = ember_vzero(), s1 = ember_vzero(), s2 = ember_vzero(), s3 = ember_vzero();
  float r[EMBER_VL];
  int j;
  for (k = 0; k + 4 <= n && !a->rms; k += 4) {
    s0 = ember_vadd(s0, ember_vload(x + k * s));
    s1 = ember_vadd(s1, ember_vload(x + (k + 1) * s));
    s2 = ember_vadd(s2, ember_vload(x + (k + 2) * s));
    s3 = ember_vadd(s3, ember_vload(x + (k + 3) * s));
  }
  for (; k < n && !a->rms; ++k) s0 = ember_vadd(s0, ember_vload(x + k * s));
  vm = ember_vmul(ember_vadd(ember_vadd(s0, s1), ember_vadd(s2, s3)), inv_n); /* rms: 0 */
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
  if (affine) {
    float t[EMBER_VL];
    if (a->row_scale) {
      for (j = 0; j < EMBER_VL; ++j) t[j] = a->row_scale[ember_layer_norm_row_index(a, row + j)];
      rs = ember_vload(t);
    }
    if (a->row_shift) {
      for (j = 0; j < EMBER_VL; ++j) t[j] = a->row_shift[ember_layer_norm_row_index(a, row + j)];
      rt = ember_vload(t);
    }
  }
  if (a->act != EMBER_ACT_NONE) chunk = EMBER_LAYER_NORM_ACT_CHUNK / EMBER_VL;
  for (k0 = 0; k0 < n; k0 += chunk) {
    int64_t end = n - k0 < chunk ? n : k0 + chunk;
    for (k = k0; k < end; ++k) {
      ember_vf v = ember_vmul(ember_vsub(ember_vload(x + k * s), vm), vr);
      if (a->gamma) v = ember_vmul(v, ember_vset1(a->gamma[k]));
      if (a->beta) v = ember_vadd(v, ember_vset1(a->beta[k]));
      if (affine) v = ember_vfma(v, rs, rt);
      ember_vstore(y + k * s, v);
    }
    if (a->act != EMBER_ACT_NONE) {
      ember_vact_block(y + k0 * s, s, (int32_t)(end - k0), 1, a->act, a->p0, a->p1);
    }
  }
}

/* One normalisation over n with stride s (the lanes past the last full vector). */
EMBER_COLD void ember_layer_norm_strided(const ember_layer_norm_args* a, const float* x, float* y,
                                         int64_t row) {
  int64_t n = a->n, s = a->inner, k;
  float mean = 0.0f, var = 0.0f, r, rs = 1.0f, rt = 0.0f;
  for (k = 0; k < n && !a->rms; ++k) mean += x[k * s];
  mean /= (float)n;
  for (k = 0; k < n; ++k) var += (x[k * s] - mean) * (x[k * s] - mean);
  r = 1.0f / sqrtf(var / (float)n + a->eps);
  if (a->row_scale) rs = a->row_scale[ember_layer_norm_row_index(a, row)];
  if (a->row_shift) rt = a->row_shift[ember_layer_norm_row_index(a, row)];
  for (k = 0; k < n; ++k) {
    float v = (x[k * s] - mean) * r;
    if (a->gamma) v *= a->gamma[k];
    if (a->beta) v += a->beta[k];
    y[k * s] = ember_act1(v * rs + rt, a->act, a->p0, a->p1);
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
      ember_layer_norm_row(a, a->x + item * a->n, a->y + item * a->n, item);
    } else {
      int64_t o = item / blocks, j0 = (item % blocks) * EMBER_VL;
      int64_t off = o * a->n * a->inner + j0;
      int64_t row = o * a->inner + j0; /* the first lane's (outer, inner) position */
      if (j0 + EMBER_VL <= a->inner) {
        ember_layer_norm_lanes(a, a->x + off, a->y + off, row);
      } else {
        for (j = 0; j0 + j < a->inner; ++j) {
          ember_layer_norm_strided(a, a->x + off + j, a->y + off + j, row + j);
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

static inline int32_t ember_layer_norm_run(ember_layer_norm_args* a, int32_t parallel) {
  if (a->outer <= 0 || a->n <= 0 || a->inner <= 0) return 0;
  if (parallel && ember_layer_norm_items(a) > 1) {
    return TVMBackendParallelLaunch(ember_layer_norm_task, a, 0) == 0 ? 0 : -1;
  }
  ember_layer_norm_range(a, 0, ember_layer_norm_items(a));
  return 0;
}

static inline void ember_layer_norm_init(ember_layer_norm_args* a, const float* x, float* y,
                                         int64_t outer, int64_t n, int64_t inner,
                                         int32_t has_gamma, const float* gamma,
                                         int32_t has_beta, const float* beta, float eps) {
  a->x = x; a->y = y; a->outer = outer; a->n = n; a->inner = inner;
  a->gamma = has_gamma ? gamma : NULL;
  a->beta = has_beta ? beta : NULL;
  a->eps = eps;
  a->row_scale = NULL; a->row_shift = NULL;
  a->row_count = 1; a->row_div = 1;
  a->act = EMBER_ACT_NONE; a->p0 = 0.0f; a->p1 = 0.0f;
  a->rms = 0;
}

/* See the top of this file. */
#if EMBER_KERNEL_ALL || defined(EMBER_KOBJ_ember_layer_norm)
EMBER_KENTRY int32_t ember_layer_norm(EMBER_LAYER_NORM_PARAMS) {
  ember_layer_norm_args a;
  ember_layer_norm_init(&a, x, y, outer, n, inner, has_gamma, gamma, has_beta, beta, eps);
  return ember_layer_norm_run(&a, parallel);
}
#endif

#if EMBER_KERNEL_ALL || defined(EMBER_KOBJ_ember_layer_norm_act)
EMBER_KENTRY int32_t ember_layer_norm_act(EMBER_LAYER_NORM_ACT_PARAMS) {
  ember_layer_norm_args a;
  ember_layer_norm_init(&a, x, y, outer, n, inner, has_gamma, gamma, has_beta, beta, eps);
  a.row_scale = has_row_scale ? row_scale : NULL;
  a.row_shift = has_row_shift ? row_shift : NULL;
  a.row_count = row_count > 0 ? row_count : 1;
  a.row_div = row_div > 0 ? row_div : 1;
  a.act = act; a.p0 = p0; a.p1 = p1;
  return ember_layer_norm_run(&a, parallel);
}
#endif

#if EMBER_KERNEL_ALL || defined(EMBER_KOBJ_ember_rms_norm)
EMBER_KENTRY int32_t ember_rms_norm(EMBER_RMS_NORM_PARAMS) {
  ember_layer_norm_args a;
  ember_layer_norm_init(&a, x, y, outer, n, inner, has_gamma, gamma, 0, NULL, eps);
  a.rms = 1;
  return ember_layer_norm_run(&a, parallel);
}
#endif
#endif /* EMBER_KERNEL_BODIES */

#endif /* EMBER_KERNELS_NORM_H_ */
