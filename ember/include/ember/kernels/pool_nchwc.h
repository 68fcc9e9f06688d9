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
 *
 * Epilogue (nn.contrib_max_pool2d_NCHWc_fused: a batch norm and relu after the stem's pool):
 * out = pool * scale[c] + shift[c], then max(out, 0) with `relu`; scale/shift NULL: 1 and 0.
 * It runs on the vector in registers, so the pool's result is written once.
 */
#ifndef EMBER_KERNELS_POOL_NCHWC_H_
#define EMBER_KERNELS_POOL_NCHWC_H_

#include <stdint.h>

#include "ember/kernels/linkage.h"

/* The entry points (linkage and where their bodies come from: ember/kernels/linkage.h). */
#define EMBER_POOL2D_NCHWC_PARAMS                                                                  \
  const float* in, float* out, int32_t n, int32_t cblocks, int32_t h, int32_t w, int32_t oh,       \
      int32_t ow, int32_t kh, int32_t kw, int32_t sh, int32_t sw, int32_t dh, int32_t dw,          \
      int32_t pt, int32_t pl, int32_t pb, int32_t pr, int32_t avg, int32_t include_pad,            \
      int32_t threads, const float* scale, const float* shift, int32_t relu
EMBER_KENTRY int32_t ember_pool2d_nchwc_x4(EMBER_POOL2D_NCHWC_PARAMS);
EMBER_KENTRY int32_t ember_pool2d_nchwc_x8(EMBER_POOL2D_NCHWC_PARAMS);
EMBER_KENTRY int32_t ember_pool2d_nchwc_x16(EMBER_POOL2D_NCHWC_PARAMS);

#if EMBER_KERNEL_BODIES
#include <math.h>

#include "ember/c_backend_api.h"
#include "ember/kernels/conv_simd.h"

/*! \brief One pooling call (sizes in elements). */
typedef struct {
  const float* in;
  float* out;
  int32_t n, cblocks, h, w, oh, ow, kh, kw, sh, sw, dh, dw, pt, pl, pb, pr;
  int32_t avg, include_pad;
  const float* scale; /* the epilogue (see the header comment); NULL: 1 */
  const float* shift; /* NULL: 0 */
  int32_t relu;
} ember_pool_p;

#define EMBER_EACH_LANES_IMPL "ember/kernels/pool_nchwc_impl.h"
#include "ember/kernels/each_lanes.h"
#endif /* EMBER_KERNEL_BODIES */

#endif /* EMBER_KERNELS_POOL_NCHWC_H_ */
