/*!
 * \file ember/kernels/conv_fewoc.h
 * \brief conv2d to few output channels (one output block of OC = 4 or 8 lanes, fewer than
 *        the input block's CB; or 16 for a transposed conv's 9 to 15 phase channels): the phase convs of a transposed conv to one channel (DBNet's
 *        head), detector and segmentation heads. The blocked kernel (conv_nchwc.h) would run
 *        OC-lane FMAs there, a broadcast per input channel each: load-bound at a quarter of
 *        the vector. Here the vectors run along the input block's CB channel lanes instead.
 *
 * Layouts (CB = the input block, 8 or 16 lanes; OC divides CB):
 *   input  [N][IC/CB][H][W][CB]       weight [1][IC/CB][KH][KW][CB][OC] (conv_nchwc.h's)
 *   output [N][1][OH][OW][OC]         bias   [OC]
 *
 * A register tile is P = CB / OC neighbouring output pixels x OC channels (OC = CB only for
 * an interleaved conv): CB accumulators
 * of CB lanes, each a channel-partial sum; per input block and tap it loads P input vectors
 * and OC weight vectors for CB full-width FMAs. At the end of the reduction a transpose-add
 * tree (log2(CB) levels of two shuffles and an add per pair) turns the CB accumulators into
 * one vector: the tile's P x OC outputs, contiguous in the output, stored at once. Pixels
 * whose window crosses the left or right edge, and a row's last P - 1, run one at a time.
 * The weights are transposed to [IC/CB][KH][KW][OC][CB] once per call (a small workspace).
 *
 * Interleaved (ish > 0): the conv is the phase conv of a transposed conv with strides
 * (ish, isw), its first ocr channels phase-major (phase * OCP + c, OCP = ocr / (ish * isw);
 * the OC - ocr after them zero padding: DCGAN's 12 phase channels of a conv to 3 in a block of
 * 16, a tile of one pixel), and
 * each output goes straight to its place in the transposed conv's plain NCHW output
 * [N][OCP][IOH][IOW] (``nn.contrib_conv2d_transpose_interleave``'s rule, cropped there):
 *   out[b, c, qy * ish + ry - ioff_h, qx * isw + rx - ioff_w] = conv[b, (ry * isw + rx) * OCP + c, qy, qx]
 * so no second pass moves the outputs (a scalar store each, at offsets tabled per tile lane).
 * The activation runs in a second pass over each output row (gemm_epilogue.h's vector forms).
 * Rows are split over TVMBackendParallelLaunch's tasks when `threads` is set.
 *
 * Entry points ember_conv2d_fewoc_x<CB> return 0, or -1 when the workspace cannot be
 * allocated. Without GCC/Clang vector extensions the same entry points run plain C loops.
 */
#ifndef EMBER_KERNELS_CONV_FEWOC_H_
#define EMBER_KERNELS_CONV_FEWOC_H_

#include <stdint.h>

#include "ember/kernels/linkage.h"

/* The entry points (linkage and where their bodies come from: ember/kernels/linkage.h). */
#define EMBER_CONV2D_FEWOC_PARAMS                                                                  \
  const float* in, const float* w, const float* bias, float* out, int32_t n, int32_t icb,          \
      int32_t h, int32_t wd, int32_t oc, int32_t oh, int32_t ow, int32_t kh, int32_t kw,           \
      int32_t sh, int32_t sw, int32_t dh, int32_t dw, int32_t pt, int32_t pl, int32_t act,         \
      float lo, float hi, int32_t threads, int32_t ish, int32_t isw, int32_t ioff_h,              \
      int32_t ioff_w, int32_t ioh, int32_t iow, int32_t ocr
EMBER_KENTRY int32_t ember_conv2d_fewoc_x8(EMBER_CONV2D_FEWOC_PARAMS);
EMBER_KENTRY int32_t ember_conv2d_fewoc_x16(EMBER_CONV2D_FEWOC_PARAMS);

#if EMBER_KERNEL_BODIES
#include "ember/c_backend_api.h"
#include "ember/kernels/conv_simd.h"
#include "ember/kernels/gemm_epilogue.h" /* the activations' vector forms */

/*! \brief One call (sizes in elements). */
typedef struct {
  const float* in;
  const float* w; /* transposed: [IC/CB][KH][KW][OC][CB] */
  const float* bias;
  float* out;
  int32_t n, icb, h, wd, oc, oh, ow, kh, kw, sh, sw, dh, dw, pt, pl;
  int32_t act; /* gemm_epilogue.h's code (EMBER_ACT_*) */
  float p0, p1;
  int32_t x0, x1; /* the output columns whose every tap lies inside the image's columns */
  float bias_tile[16]; /* bias[j % OC]: a tile's P x OC outputs */
  /* interleaved output (ish > 0; the header comment): per tile lane j, its output's row and
   * column from (qy * ish - ioff_h, qx * isw - ioff_w) at the tile's first pixel, and its
   * offset from there in the output of its batch */
  int32_t ish, isw, ioff_h, ioff_w, ioh, iow;
  int32_t ocp; /* the transposed conv's output channels: ocr / (ish * isw) */
  int32_t quad; /* 2x2 phases of one channel: a tile's two output rows by two shuffles */
  int32_t lane_dy[16], lane_dx[16];
  int64_t lane_off[16];
} ember_fewoc_p;

/* conv_simd.h's activation code and parameters as gemm_epilogue.h's. */
static inline int32_t ember_fewoc_act(int32_t act, float* p0, float* p1) {
  switch (act) {
    case EMBER_CONV_ACT_RELU: return EMBER_ACT_RELU;
    case EMBER_CONV_ACT_CLIP: return EMBER_ACT_CLIP;
    case EMBER_CONV_ACT_HARDSWISH: *p0 = 1.0f / 6.0f; return EMBER_ACT_HARDSWISH;
    case EMBER_CONV_ACT_HARDSIGMOID: return EMBER_ACT_HARDSIGMOID;
    case EMBER_CONV_ACT_LEAKY_RELU: return EMBER_ACT_LEAKY_RELU;
    case EMBER_CONV_ACT_SIGMOID: return EMBER_ACT_SIGMOID;
    case EMBER_CONV_ACT_SILU: return EMBER_ACT_SILU;
    case EMBER_CONV_ACT_MISH: return EMBER_ACT_MISH;
    case EMBER_CONV_ACT_GELU_ERF: return EMBER_ACT_GELU_ERF;
    case EMBER_CONV_ACT_GELU_TANH: return EMBER_ACT_GELU_TANH;
    case EMBER_CONV_ACT_TANH: return EMBER_ACT_TANH;
    default: return EMBER_ACT_NONE;
  }
}

/* The activation over the n floats of one output row. */
static inline void ember_fewoc_act_row(const ember_fewoc_p* p, float* row, int64_t n) {
  const int64_t whole = n - n % EMBER_VL;
  int64_t i;
  if (p->act == EMBER_ACT_NONE) return;
  ember_vact_block(row, 0, 1, (int32_t)(whole / EMBER_VL), p->act, p->p0, p->p1);
  for (i = whole; i < n; ++i) row[i] = ember_act1(row[i], p->act, p->p0, p->p1);
}

/* Lane j's place in the interleaved output (ember_fewoc_p's lane tables). */
static inline void ember_fewoc_lanes(ember_fewoc_p* p, int32_t lanes) {
  const int32_t ocp = p->ocp;
  int32_t j;
  for (j = 0; j < lanes; ++j) {
    const int32_t q = j / p->oc, ph = (j % p->oc) / ocp, c = (j % p->oc) % ocp;
    if (j % p->oc >= ocp * p->ish * p->isw) { /* a padded channel: stored nowhere */
      p->lane_dy[j] = -p->ioh - p->ish;
      p->lane_dx[j] = 0;
      p->lane_off[j] = 0;
      continue;
    }
    p->lane_dy[j] = ph / p->isw;
    p->lane_dx[j] = q * p->isw + ph % p->isw;
    p->lane_off[j] = ((int64_t)c * p->ioh + p->lane_dy[j]) * p->iow + p->lane_dx[j];
  }
}

/* The first `count` tile lanes at v, for output pixel (qy, qx) of batch b: each to its place
 * in the interleaved output, if inside the crop. */
static inline void ember_fewoc_scatter(const ember_fewoc_p* p, int32_t b, int32_t qy,
                                       int32_t qx, const float* v, int32_t count) {
  const int32_t ocp = p->ocp;
  const int32_t y0 = qy * p->ish - p->ioff_h, x0 = qx * p->isw - p->ioff_w;
  float* out = p->out + ((int64_t)b * ocp * p->ioh + y0) * p->iow + x0;
  int32_t j;
  for (j = 0; j < count; ++j) {
    const int32_t y = y0 + p->lane_dy[j], x = x0 + p->lane_dx[j];
    if (y >= 0 && y < p->ioh && x >= 0 && x < p->iow) out[p->lane_off[j]] = v[j];
  }
}

/* The activation over the interleaved output rows that conv row qy of batch b wrote. */
static inline void ember_fewoc_act_rows(const ember_fewoc_p* p, int32_t b, int32_t qy) {
  const int32_t ocp = p->ocp;
  int32_t c, ry;
  if (p->act == EMBER_ACT_NONE) return;
  for (c = 0; c < ocp; ++c) {
    for (ry = 0; ry < p->ish; ++ry) {
      const int32_t y = qy * p->ish + ry - p->ioff_h;
      if (y < 0 || y >= p->ioh) continue;
      ember_fewoc_act_row(p, p->out + (((int64_t)b * ocp + c) * p->ioh + y) * p->iow, p->iow);
    }
  }
}

#define EMBER_EACH_LANES_IMPL "ember/kernels/conv_fewoc_impl.h"
#define EMBER_EACH_LANES_FROM_8
#include "ember/kernels/each_lanes.h"
#endif /* EMBER_KERNEL_BODIES */

#endif /* EMBER_KERNELS_CONV_FEWOC_H_ */
