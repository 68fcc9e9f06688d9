/*
 * ember kernels: the smallest and the largest value of a float32 tensor in one pass, the kernel
 * of nn.contrib_minmax (the range DynamicQuantizeLinear maps onto [0, 255]: quantize_dynamic's
 * transformers quantize every linear layer's input this way, on every call):
 *
 *   out[0] = min(x), out[1] = max(x)      (NaN if any x is NaN, as numpy's min and max)
 *
 * Four chains of vectors (gemm_simd.h's) of running minima and maxima (and NaN flags; four: one
 * chain waits on its min's latency), combined at the end: the order of a min or max does not
 * change its value, so every SIMD level gives the same result. n >= 1.
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
#include "ember/kernels/gemm_simd.h"

#if defined(EMBER_SIMD_VECTOR_EXT)
#define EMBER_MINMAX_ACC 4 /* independent chains */

/* The running minima, maxima and NaN flags of one chain, updated with one vector of x
 * (ember_vmin(v, lo) is v < lo ? v : lo, the scalar loop's choice lane by lane). */
static inline void ember_minmax_step(const float* x, ember_vf* lo, ember_vf* hi, ember_vi* nan) {
  const ember_vf v = ember_vload(x);
  *lo = ember_vmin(v, *lo);
  *hi = ember_vmax(v, *hi);
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
#if defined(EMBER_SIMD_VECTOR_EXT)
  if (n >= EMBER_VL) {
    ember_vf vlo[EMBER_MINMAX_ACC], vhi[EMBER_MINMAX_ACC];
    ember_vi vnan[EMBER_MINMAX_ACC];
    const ember_vf v = ember_vload(x);
    int a;
    for (a = 0; a < EMBER_MINMAX_ACC; ++a) {
      vlo[a] = vhi[a] = v;
      vnan[a] = (ember_vi){0};
    }
    for (; i + EMBER_VL * EMBER_MINMAX_ACC <= n; i += EMBER_VL * EMBER_MINMAX_ACC) {
      for (a = 0; a < EMBER_MINMAX_ACC; ++a) {
        ember_minmax_step(x + i + EMBER_VL * a, &vlo[a], &vhi[a], &vnan[a]);
      }
    }
    for (; i + EMBER_VL <= n; i += EMBER_VL) {
      ember_minmax_step(x + i, &vlo[0], &vhi[0], &vnan[0]);
    }
    for (a = 0; a < EMBER_MINMAX_ACC; ++a) {
      for (l = 0; l < EMBER_VL; ++l) {
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
