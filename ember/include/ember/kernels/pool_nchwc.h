/*!
 * \file ember/kernels/pool_nchwc.h
 * \brief Max and average pooling in the blocked layout NCHW[L]c (L = 4, 8 or 16 lanes): each
 *        output pixel is one vector, reduced over the window taps inside the image (padding
 *        is never read). Entry points ember_pool2d_nchwc_x<L>; output rows are split over
 *        TVMBackendParallelLaunch's tasks when `threads` is set.
 *
 * Semantics (Relay's): max ignores padding (a window wholly in the padding gives -inf);
 * average divides by the taps inside [0, H) x [0, W), or with count_include_pad by the taps
 * inside the padded extent [-pt, H + pb) x [-pl, W + pr) (at least 1).
 */
#ifndef EMBER_KERNELS_POOL_NCHWC_H_
#define EMBER_KERNELS_POOL_NCHWC_H_

#include <math.h>

#include "ember/c_backend_api.h"
#include "ember/kernels/conv_simd.h"

/*! \brief One pooling call (sizes in elements). */
typedef struct {
  const float* in;
  float* out;
  int32_t n, cblocks, h, w, oh, ow, kh, kw, sh, sw, dh, dw, pt, pl, pb, pr;
  int32_t avg, include_pad;
} ember_pool_p;

/* Taps start + k * d (0 <= k < taps) inside [lo, hi). */
static inline int32_t ember_pool_taps(int32_t start, int32_t d, int32_t taps, int32_t lo,
                                      int32_t hi) {
  int32_t first = ember_first_tap(start - lo, d, taps);
  int32_t end = ember_end_tap(start - lo, d, hi - lo, taps, first);
  return end - first;
}

#define EMBER_L 4
#include "ember/kernels/pool_nchwc_impl.h"
#undef EMBER_L
#define EMBER_L 8
#include "ember/kernels/pool_nchwc_impl.h"
#undef EMBER_L
#define EMBER_L 16
#include "ember/kernels/pool_nchwc_impl.h"
#undef EMBER_L

#endif /* EMBER_KERNELS_POOL_NCHWC_H_ */
