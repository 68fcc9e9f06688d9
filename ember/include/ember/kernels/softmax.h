/*
 * ember kernels: softmax and log_softmax along one axis of a float32 tensor viewed as
 * (outer, n, inner), n the axis:
 *
 *   softmax      y = exp(x - max) / sum(exp(x - max))
 *   log_softmax  y = x - max - log(sum(exp(x - max)))
 *
 * Last axis (inner == 1), per row: one pass for the max, one pass that writes exp(x - max) (or,
 * for log_softmax, only sums it) while summing, then a scale of the row already in cache: the
 * input is read from memory once. A row shorter than a vector is one vector, its lanes past
 * the row masked. Another axis: vectors run along the contiguous inner dimension (EMBER_VL
 * lanes of inner at a time, each lane its own softmax over n), the same three passes with
 * stride `inner`; an inner dimension narrower than a vector, and the ragged end of a wider
 * one, go EMBER_VL softmaxes at a time through a transposed copy (one softmax per lane).
 * Rows whose max is not finite (all -inf, or a +inf) or that hold a NaN take a scalar libm path
 * so the result follows IEEE arithmetic as numpy's formula does (NaN where it gives NaN; the
 * short-row and transposed paths let a NaN input make the sum, hence the softmax, NaN); exp
 * of arguments at or below -127 ln 2 (-88.03) is 0, so masked (-inf) entries give exactly 0.
 * Work items (rows, or (outer, inner block) pairs) are split over TVMBackendParallelLaunch
 * tasks when `parallel`. x and y must not overlap. Returns 0, or -1 when the parallel launch
 * fails.
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
#include <string.h>

#include "ember/c_backend_api.h"
#include "ember/kernels/gemm_simd.h"

/* -127 ln 2: at and below it 2^n in ember_vexp0 has a zero exponent field, so exp is 0. */
#define EMBER_EXP_FLUSH (-88.02969193f)

/* exp(x) for x <= 0 (x - max), NaN for NaN; 0 at and below EMBER_EXP_FLUSH (-inf included):
 * x is clamped there, where the power of two built from n = -127 is +0, so no mask is needed.
 * e^r, |r| <= ln2/2, by 1 + r + r^2 q(r), q of degree 4 fitted for relative error on
 * Chebyshev nodes (8e-8 in float arithmetic): six FMAs, one fewer than ember_vexp_core. */
static inline ember_vf ember_vexp0(ember_vf x) {
  ember_vf v, r, p;
  x = ember_vmax(ember_vset1(EMBER_EXP_FLUSH), x); /* NaN stays NaN */
  r = ember_vexp_reduce(x, &v);
  p = ember_vset1(1.3748823e-3f);
  p = ember_vfma(p, r, ember_vset1(8.3696283e-3f));
  p = ember_vfma(p, r, ember_vset1(4.1669644e-2f));
  p = ember_vfma(p, r, ember_vset1(1.6666512e-1f));
  p = ember_vfma(p, r, ember_vset1(4.9999988e-1f));
  p = ember_vfma(p, r, ember_vset1(1.0f));
  p = ember_vfma(p, r, ember_vset1(1.0f));
  return ember_vmul(p, ember_vpow2_rounded(v));
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

/* Lane indices 0, 1, ..., for masking the lanes of an overlapping last vector. */
static inline ember_vf ember_softmax_lane_ids(void) {
  static const float ids[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  return ember_vload(ids);
}

/* One row (inner == 1), n >= EMBER_VL: a pass for the max, one for the exps and their sum
 * (a NaN input makes the sum NaN, then the row takes the IEEE path), one to scale. A ragged
 * end is one vector ending at the row's end, overlapping the last whole one (no copy through
 * the stack): the max may see its lanes twice; the exp sum masks the repeated lanes; the scale
 * keeps that vector in a register and stores it last. Two accumulators per reduction halve
 * the add chain. */
static inline void ember_softmax_row(const float* x, float* y, int64_t n, int32_t log) {
  ember_vf vm0 = ember_vset1(-INFINITY), vm1 = vm0, vs0 = ember_vzero(), vs1 = vs0, v, w, tail;
  int64_t k, r = n % EMBER_VL, nf = n - r, last = n - EMBER_VL;
  float m, t;
  for (k = 0; k + 2 * EMBER_VL <= nf; k += 2 * EMBER_VL) {
    v = ember_vload(x + k);
    w = ember_vload(x + k + EMBER_VL);
    vm0 = ember_vmax(vm0, v);
    vm1 = ember_vmax(vm1, w);
  }
  for (; k < n; k += EMBER_VL) vm0 = ember_vmax(vm0, ember_vload(x + (k < nf ? k : last)));
  m = ember_vhmax(ember_vmax(vm0, vm1));
  if (!(m > -INFINITY && m < INFINITY)) {
    ember_softmax_ieee(x, y, n, 1, log);
    return;
  }
  vm0 = ember_vset1(m);
  for (k = 0; k + 2 * EMBER_VL <= nf; k += 2 * EMBER_VL) {
    v = ember_vexp0(ember_vsub(ember_vload(x + k), vm0));
    w = ember_vexp0(ember_vsub(ember_vload(x + k + EMBER_VL), vm0));
    if (!log) {
      ember_vstore(y + k, v);
      ember_vstore(y + k + EMBER_VL, w);
    }
    vs0 = ember_vadd(vs0, v);
    vs1 = ember_vadd(vs1, w);
  }
  for (; k < nf; k += EMBER_VL) {
    v = ember_vexp0(ember_vsub(ember_vload(x + k), vm0));
    if (!log) ember_vstore(y + k, v);
    vs0 = ember_vadd(vs0, v);
  }
  if (r) {
    /* lanes below EMBER_VL - r were summed above */
    v = ember_vexp0(ember_vsub(ember_vload(x + last), vm0));
    if (!log) ember_vstore(y + last, v);
    vs1 = ember_vadd(vs1, ember_vkeep_ge(v, ember_softmax_lane_ids(), (float)(EMBER_VL - r)));
  }
  t = ember_vhsum(ember_vadd(vs0, vs1));
  if (t != t) { /* a NaN input (ember_vexp0 keeps NaN): numpy's formula */
    ember_softmax_ieee(x, y, n, 1, log);
    return;
  }
  if (log) {
    t = m + logf(t);
    vm0 = ember_vset1(t);
    for (k = 0; k < nf; k += EMBER_VL) ember_vstore(y + k, ember_vsub(ember_vload(x + k), vm0));
    if (r) ember_vstore(y + last, ember_vsub(ember_vload(x + last), vm0));
  } else {
    vs0 = ember_vset1(1.0f / t);
    tail = ember_vmul(ember_vload(y + last), vs0); /* before the loop scales its first lanes */
    for (k = 0; k < nf; k += EMBER_VL) ember_vstore(y + k, ember_vmul(ember_vload(y + k), vs0));
    if (r) ember_vstore(y + last, tail);
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

/* Softmaxes of at most this many elements may run EMBER_VL at a time through a transposed
 * copy (ember_softmax_gathered: a stack buffer of this many vectors). */
#define EMBER_SOFTMAX_GATHER_N 64
/* `lanes` (<= EMBER_VL) softmaxes of n <= EMBER_SOFTMAX_GATHER_N elements, lane j's at
 * x[base[j] + k * s], k < n: the lanes of a narrow or ragged inner dimension.
 * They are copied transposed into a buffer whose vectors hold element k of every lane, so each
 * softmax is one lane of the vector passes (no horizontal reduction, no per-row overhead),
 * then copied back. Lanes past `lanes` hold zeros, which give finite results nobody reads. A
 * lane with a +inf or no finite entry sends all of them to the IEEE path; a NaN input makes
 * its lane's sum NaN, hence its whole softmax, as in numpy's formula. */
EMBER_NOINLINE void ember_softmax_gathered(const float* x, float* y, const int64_t* base,
                                       int lanes, int64_t n, int64_t s, int32_t log) {
  float buf[EMBER_SOFTMAX_GATHER_N * EMBER_VL];
  float sums[EMBER_VL], m;
  ember_vf vm = ember_vset1(-INFINITY), vs = ember_vzero(), t;
  int64_t k;
  int j;
  for (j = 0; j < lanes; ++j) {
    for (k = 0; k < n; ++k) buf[k * EMBER_VL + j] = x[base[j] + k * s];
  }
  for (; j < EMBER_VL; ++j) {
    for (k = 0; k < n; ++k) buf[k * EMBER_VL + j] = 0.0f;
  }
  for (k = 0; k < n; ++k) vm = ember_vmax(vm, ember_vload(buf + k * EMBER_VL));
  for (k = 0; k < n; ++k) {
    ember_vf e = ember_vexp0(ember_vsub(ember_vload(buf + k * EMBER_VL), vm));
    if (!log) ember_vstore(buf + k * EMBER_VL, e);
    vs = ember_vadd(vs, e);
  }
  /* m - m is NaN where a lane's max is not finite (a NaN input that the max kept too: the
   * IEEE path gives the same NaN row as the sum of exps, NaN, does) */
  m = ember_vhsum(ember_vsub(vm, vm));
  if (m != m) {
    for (j = 0; j < lanes; ++j) ember_softmax_ieee(x + base[j], y + base[j], n, s, log);
    return;
  }
  if (log) {
    ember_vstore(sums, vs);
    for (j = 0; j < EMBER_VL; ++j) sums[j] = logf(sums[j]);
    t = ember_vadd(vm, ember_vload(sums));
    for (k = 0; k < n; ++k) {
      ember_vstore(buf + k * EMBER_VL, ember_vsub(ember_vload(buf + k * EMBER_VL), t));
    }
  } else {
    t = ember_vdiv(ember_vset1(1.0f), vs);
    for (k = 0; k < n; ++k) {
      ember_vstore(buf + k * EMBER_VL, ember_vmul(ember_vload(buf + k * EMBER_VL), t));
    }
  }
  for (j = 0; j < lanes; ++j) {
    for (k = 0; k < n; ++k) y[base[j] + k * s] = buf[k * EMBER_VL + j];
  }
}

typedef struct {
  const float* x;
  float* y;
  int64_t outer, n, inner;
  int32_t log;
} ember_softmax_args;

/* `rows` rows (inner == 1) shorter than a vector, each read and written as one vector from
 * its start: lanes n.. read the next rows (set to -inf here) and their stores land in the
 * next rows' outputs, which are written after it (x and y do not overlap). The max and the
 * exp sum by horizontal reductions. */
static inline void ember_softmax_vector_rows(const float* x, float* y, int64_t rows, int64_t n,
                                             int32_t log) {
  ember_vf ids = ember_softmax_lane_ids(), v, e;
  float m, s;
  int64_t r;
  for (r = 0; r < rows; ++r, x += n, y += n) {
    v = ember_vselect_ge(ids, (float)n, ember_vset1(-INFINITY), ember_vload(x));
    m = ember_vhmax(v);
    if (!(m > -INFINITY && m < INFINITY)) {
      ember_softmax_ieee(x, y, n, 1, log);
      continue;
    }
    e = ember_vexp0(ember_vsub(v, ember_vset1(m)));
    s = ember_vhsum(e); /* NaN for a NaN input (ember_vexp0 keeps it): a NaN row, as numpy's */
    if (log) {
      ember_vstore(y, ember_vsub(v, ember_vset1(m + logf(s))));
    } else {
      ember_vstore(y, ember_vmul(e, ember_vset1(1.0f / s)));
    }
  }
}

/* Rows begin .. end - 1 (inner == 1) shorter than a vector (ember_softmax_vector_rows); the
 * last ones, whose vectors would pass the end of the range, fewer than EMBER_VL floats in all,
 * through a copy with room for their vectors. */
static inline void ember_softmax_short_rows(const ember_softmax_args* a, int64_t begin,
                                            int64_t end) {
  const int64_t n = a->n;
  int64_t safe = end - (EMBER_VL + n - 1) / n + 1, count;
  float xs[2 * EMBER_VL], ys[2 * EMBER_VL];
  if (safe < begin) safe = begin;
  ember_softmax_vector_rows(a->x + begin * n, a->y + begin * n, safe - begin, n, a->log);
  if (safe == end) return;
  count = (end - safe) * n; /* < EMBER_VL: the rows' vectors end within 2 * EMBER_VL */
  memcpy(xs, a->x + safe * n, (size_t)count * sizeof(float));
  ember_vstore(xs + count, ember_vzero());
  ember_softmax_vector_rows(xs, ys, end - safe, n, a->log);
  memcpy(a->y + safe * n, ys, (size_t)count * sizeof(float));
}

/* Whether the softmaxes go EMBER_VL at a time through ember_softmax_gathered, lanes the
 * (outer, inner) positions in order: an inner dimension narrower than a vector (whose lanes
 * would otherwise take the scalar IEEE path). */
static inline int ember_softmax_by_positions(const ember_softmax_args* a) {
  return a->inner > 1 && a->inner < EMBER_VL && a->n <= EMBER_SOFTMAX_GATHER_N;
}

/* Items: blocks of EMBER_VL positions (ember_softmax_by_positions); else rows when
 * inner == 1, else (outer, block of EMBER_VL lanes or the ragged tail). */
static inline int64_t ember_softmax_items(const ember_softmax_args* a) {
  if (ember_softmax_by_positions(a)) return (a->outer * a->inner + EMBER_VL - 1) / EMBER_VL;
  return a->inner == 1 ? a->outer : a->outer * ((a->inner + EMBER_VL - 1) / EMBER_VL);
}

/* Block `item` of EMBER_VL (outer, inner) positions, the last one possibly partial. */
static inline void ember_softmax_positions(const ember_softmax_args* a, int64_t item) {
  int64_t base[EMBER_VL], p = item * EMBER_VL, end = a->outer * a->inner;
  int lanes = 0;
  for (; p < end && lanes < EMBER_VL; ++p, ++lanes) {
    base[lanes] = (p / a->inner) * a->n * a->inner + p % a->inner;
  }
  ember_softmax_gathered(a->x, a->y, base, lanes, a->n, a->inner, a->log);
}

/* The ragged last inner block of outer index o (lanes j0 .. inner - 1). */
static inline void ember_softmax_inner_tail(const ember_softmax_args* a, int64_t off,
                                            int64_t j0) {
  int64_t base[EMBER_VL], j;
  if (a->n > EMBER_SOFTMAX_GATHER_N) {
    for (j = 0; j0 + j < a->inner; ++j) {
      ember_softmax_ieee(a->x + off + j, a->y + off + j, a->n, a->inner, a->log);
    }
    return;
  }
  for (j = 0; j0 + j < a->inner; ++j) base[j] = off + j;
  ember_softmax_gathered(a->x, a->y, base, (int)j, a->n, a->inner, a->log);
}

static void ember_softmax_range(const ember_softmax_args* a, int64_t begin, int64_t end) {
  int64_t blocks = (a->inner + EMBER_VL - 1) / EMBER_VL, item;
  int by_positions = ember_softmax_by_positions(a);
  if (a->inner == 1 && a->n < EMBER_VL) {
    ember_softmax_short_rows(a, begin, end);
    return;
  }
  for (item = begin; item < end; ++item) {
    if (by_positions) {
      ember_softmax_positions(a, item);
    } else if (a->inner == 1) {
      ember_softmax_row(a->x + item * a->n, a->y + item * a->n, a->n, a->log);
    } else {
      int64_t o = item / blocks, j0 = (item % blocks) * EMBER_VL;
      int64_t off = o * a->n * a->inner + j0;
      if (j0 + EMBER_VL <= a->inner) {
        ember_softmax_lanes(a->x + off, a->y + off, a->n, a->inner, a->log);
      } else {
        ember_softmax_inner_tail(a, off, j0);
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
