/*
 * ember kernels: the smallest and the largest value of a float32 tensor in one pass, the kernel
 * of nn.contrib_minmax (the range DynamicQuantizeLinear maps onto [0, 255]: quantize_dynamic's
 * transformers quantize every linear layer's input this way, on every call):
 *
 *   out[0] = min(x), out[1] = max(x)      (NaN if any x is NaN, as numpy's min and max)
 *
 * 16 lanes of running minima and maxima (and a NaN flag), combined at the end: the order of a
 * min or max does not change its value, so every SIMD level gives the same result. n >= 1.
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
  typedef float vf __attribute__((vector_size(64)));
  typedef int32_t vi __attribute__((vector_size(64)));
  if (n >= 16) {
    vf vlo, vhi, v;
    vi vnan = {0};
    memcpy(&vlo, x, sizeof vlo);
    vhi = vlo;
    for (; i + 16 <= n; i += 16) {
      vi lt, gt;
      memcpy(&v, x + i, sizeof v);
      lt = v < vlo;
      gt = v > vhi;
      vlo = (vf)((lt & (vi)v) | (~lt & (vi)vlo));
      vhi = (vf)((gt & (vi)v) | (~gt & (vi)vhi));
      vnan |= v != v;
    }
    for (l = 0; l < 16; ++l) {
      lo = vlo[l] < lo ? vlo[l] : lo;
      hi = vhi[l] > hi ? vhi[l] : hi;
      nan |= vnan[l] != 0;
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
