/*
 * ember kernels: the smallest and the largest value of a float32 tensor in one pass, the kernel
 * of nn.contrib_minmax (the range DynamicQuantizeLinear maps onto [0, 255]: quantize_dynamic's
 * transformers quantize every linear layer's input this way, on every call):
 *
 *   out[0] = min(x), out[1] = max(x)      (NaN if any x is NaN, as numpy's min and max)
 *
 * Four chains of vectors of running minima and maxima (and NaN flags; four: one chain waits on
 * its select's latency), combined at the end: the order of a min or max does not change its
 * value, so every SIMD level gives the same result. n >= 1.
 * Returns 0.
 */
#ifndef EMBER_KERNELS_MINMAX_H_
#define EMBER_KERNELS_MINMAX_H_

#include <stdint.h>
#include <string.h>

#include "ember/kernels/linkage.h"

/* The entry point (linkage and where its body comes from: ember/kernels/linkage.h). */
#define EMBER_MINMAX_PARAMS const float *x, float *out, int64_t n
EMBER_KENTRY int32_t ember_minmax(EMBER_MINMAX_PARAMS);

#if EMBER_KERNEL_BODIES
#if defined(__GNUC__) && !defined(EMBER_KERNELS_PORTABLE)
#if defined(__AVX512F__)
#define EMBER_MINMAX_L 16 /* lanes: the ISA's vectors (wider ones GCC splits into slow code) */
#elif defined(__AVX__)
#define EMBER_MINMAX_L 8
#else
#define EMBER_MINMAX_L 4
#endif
typedef float ember_minmax_vf __attribute__((vector_size(4 * EMBER_MINMAX_L)));
typedef int32_t ember_minmax_vi __attribute__((vector_size(4 * EMBER_MINMAX_L)));
#define EMBER_MINMAX_ACC 4 /* independent chains */

/* The running minima, maxima and NaN flags of one chain, updated with one vector of x. */
static inline void ember_minmax_step(const float* x, ember_minmax_vf* lo, ember_minmax_vf* hi,
                                     ember_minmax_vi* nan) {
  ember_minmax_vf v;
  ember_minmax_vi lt, gt;
  memcpy(&v, x, sizeof v);
  lt = v < *lo;
  gt = v > *hi;
  *lo = (ember_minmax_vf)((lt & (ember_minmax_vi)v) | (~lt & (ember_minmax_vi)*lo));
  *hi = (ember_minmax_vf)((gt & (ember_minmax_vi)v) | (~gt & (ember_minmax_vi)*hi));
  *nan |= v != v;
}
#endif

/* See the top of this file. */
#if EMBER_KERNEL_ALL || defined(EMBER_KOBJ_ember_minmax)
EMBER_KENTRY int32_t ember_minmax(EMBER_MINMAX_PARAMS) {
  float lo, hi;
  int nan;
  int64_t i = 0;
  int l;
  if (n < 1) return -1; /* an empty tensor (a run-time size of 0) has no range */
  lo = hi = x[0];
  nan = x[0] != x[0];
#if defined(__GNUC__) && !defined(EMBER_KERNELS_PORTABLE)
  if (n >= EMBER_MINMAX_L) {
    ember_minmax_vf vlo[EMBER_MINMAX_ACC], vhi[EMBER_MINMAX_ACC], v;
    ember_minmax_vi vnan[EMBER_MINMAX_ACC];
    int a;
    memcpy(&v, x, sizeof v);
    for (a = 0; a < EMBER_MINMAX_ACC; ++a) {
      vlo[a] = vhi[a] = v;
      vnan[a] = (ember_minmax_vi){0};
    }
    for (; i + EMBER_MINMAX_L * EMBER_MINMAX_ACC <= n;
         i += EMBER_MINMAX_L * EMBER_MINMAX_ACC) {
      for (a = 0; a < EMBER_MINMAX_ACC; ++a) {
        ember_minmax_step(x + i + EMBER_MINMAX_L * a, &vlo[a], &vhi[a], &vnan[a]);
      }
    }
    for (; i + EMBER_MINMAX_L <= n; i += EMBER_MINMAX_L) {
      ember_minmax_step(x + i, &vlo[0], &vhi[0], &vnan[0]);
    }
    for (a = 0; a < EMBER_MINMAX_ACC; ++a) {
      for (l = 0; l < EMBER_MINMAX_L; ++l) {
        lo = vlo[a][l] < lo ? vlo[a][l] : lo;
        hi = vhi[a][l] > hi ? vhi[a][l] : hi;
        nan |= vnan[a][l] != 0;
      }
    }
  }
#endif
  for (; i < n; ++i) {
    lo = x[i] < lo ? x[i] : lo;
    hi = x[i] > hi ? x[i] : hi;
    nan |= x[i] != x[i];
  }
  (void)l;
  if (nan) {
    const uint32_t bits = 0x7FC00000u; /* a quiet NaN */
    memcpy(&lo, &bits, sizeof lo);
    hi = lo;
  }
  out[0] = lo;
  out[1] = hi;
  return 0;
}
#endif
#endif /* EMBER_KERNEL_BODIES */

#endif /* EMBER_KERNELS_MINMAX_H_ */
