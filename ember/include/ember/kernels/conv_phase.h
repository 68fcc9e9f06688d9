/*!
 * \file ember/kernels/conv_phase.h
 * \brief A transposed conv on a small map, as its phase convs (topi/nn/conv2d_transpose.py)
 *        computed phase by phase and written interleaved into the blocked output.
 *
 * On a small input map (DCGAN's 1024 -> 512 at 4x4, 512 -> 256 at 8x8) the weights are MBs
 * and the pixels few: the row kernel of conv_nchwc.h reloads every weight block once per
 * output row, and the one phase conv of all s*s phases computes (Q+1)^2 pixels per phase where
 * each phase needs Q^2 (its rows and columns are offset by the crop). Here each phase is its
 * own stride-1 conv over exactly the pixels it owns, in register tiles of R rows x C columns
 * of the phase's map x RB output blocks (a tile of the whole 4x4 map reads each weight once),
 * and each tile's outputs go straight to their places in the NCHW[L]c output, with the bias
 * and activation: no interleave pass.
 *
 * Layouts (L = lanes, 8 or 16; the input in blocks of L too):
 *   input  [N][IC/L][H][W][L]
 *   weight [S][OCBp][IC/L][TH][TW][L][L]   phase p = ry * sw + rx: conv_nchwc.h's packing of
 *          its OIHW phase weight, OCBp = the output blocks rounded up to RB (zero blocks)
 *   bias   [S][OCBp * L]                    per phase (the phase conv's bias)
 *   output [N][OC/L][OH][OW][L]
 * out[b, c, y, x] = conv_p[b, c, qy, qx] at y = qy * sh + ry - off_h, x = qx * sw + rx - off_w,
 * conv_p the stride-1 conv of the input padded by (pt, pl) on top and left (zeros past the
 * input's bottom and right) with phase p's TH x TW taps.
 *
 * The input is copied once per call into a zero-padded workspace, so every tile reads all
 * its taps with no edge cases (and tiles that overhang a phase's map compute zeros that are
 * not stored). Work items are (batch, phase, block group, tile), split over
 * TVMBackendParallelLaunch's tasks when `threads` is set. The register tile is one of
 * EMBER_PHASE_TILES, chosen at build time (topi/nn/conv2d_phase.py). Without GCC/Clang vector
 * extensions the entry points run a plain C loop nest.
 *
 * `act` is gemm_epilogue.h's activation code (EMBER_ACT_*), `lo` and `hi` its parameters.
 * Entry points ember_conv2d_phase_x<L> return 0, or -1 when the workspace cannot be had or
 * the tile index is unknown.
 */
#ifndef EMBER_KERNELS_CONV_PHASE_H_
#define EMBER_KERNELS_CONV_PHASE_H_

#include <stdint.h>

#include "ember/kernels/linkage.h"

/* The entry points (linkage and where their bodies come from: ember/kernels/linkage.h). */
#define EMBER_CONV2D_PHASE_PARAMS                                                                  \
  const float* in, const float* w, const float* bias, float* out, int32_t n, int32_t icb,          \
      int32_t h, int32_t wd, int32_t ocb, int32_t th, int32_t tw, int32_t pt, int32_t pl,          \
      int32_t qh, int32_t qw, int32_t sh, int32_t sw, int32_t off_h, int32_t off_w, int32_t oh,    \
      int32_t ow, int32_t act, float lo, float hi, int32_t tile, int32_t threads
EMBER_KENTRY int32_t ember_conv2d_phase_x8(EMBER_CONV2D_PHASE_PARAMS);
EMBER_KENTRY int32_t ember_conv2d_phase_x16(EMBER_CONV2D_PHASE_PARAMS);

/* The register tiles, X(index, R, C, RB): R rows x C columns of a phase's map x RB output
 * blocks (0-6: 24 accumulators, or 16, of AVX-512's 32 registers; 7-9: 12 of AVX2's 16).
 * topi/nn/conv2d_phase.py's TILES is this list. */
#define EMBER_PHASE_TILES(X) \
  X(0, 1, 8, 3)              \
  X(1, 2, 4, 3)              \
  X(2, 4, 2, 3)              \
  X(3, 1, 12, 2)             \
  X(4, 2, 6, 2)              \
  X(5, 4, 4, 1)              \
  X(6, 1, 4, 1)              \
  X(7, 3, 4, 1)              \
  X(8, 1, 6, 2)              \
  X(9, 2, 2, 3)

#if EMBER_KERNEL_BODIES
#include "ember/c_backend_api.h"
#include "ember/kernels/conv_simd.h"
#include "ember/kernels/gemm_epilogue.h"

/*! \brief One call (sizes in elements). */
typedef struct {
  const float* pad; /* the zero-padded input [N][IC/L][HP][WP][L] */
  const float* w;
  const float* bias;
  float* out;
  int32_t n, icb, ocb, ocbp, th, tw, hp, wp, sh, sw, off_h, off_w, oh, ow;
  int32_t act; /* gemm_epilogue.h's code (EMBER_ACT_*), with its parameters p0, p1 */
  float p0, p1;
  int32_t R, C, RB, tile;
  /* per phase: its first map row and column, its rows and columns, its tiles down and across */
  int32_t q0y[16], q0x[16], nqy[16], nqx[16], ty[16], tx[16];
  int64_t items_per_batch, tile_start[17]; /* tile_start[p]: phase p's first tile */
} ember_phase_p;

/* A phase's first map row (or column) and how many it has: q with 0 <= q * s + r - off < o. */
static inline void ember_phase_range(int32_t r, int32_t s, int32_t off, int32_t o, int32_t* q0,
                                     int32_t* nq) {
  int32_t first = off - r > 0 ? (off - r + s - 1) / s : 0;
  int32_t y = first * s + r - off;
  *q0 = first;
  *nq = y < o ? (o - y + s - 1) / s : 0;
}

/* Store a tile's outputs (buf: [R*C][RB][L], bias and activation to apply) to their places. */
static inline void ember_phase_store(const ember_phase_p* p, float* buf, int32_t b, int32_t ph,
                                     int32_t ob, int32_t qy, int32_t qx, int32_t L) {
  const int32_t ry = ph / p->sw, rx = ph % p->sw;
  const int32_t rows = p->q0y[ph] + p->nqy[ph] - qy, cols = p->q0x[ph] + p->nqx[ph] - qx;
  const int32_t nb = p->ocb - ob < p->RB ? p->ocb - ob : p->RB;
  const float* bias = p->bias + ((int64_t)ph * p->ocbp + ob) * L;
  const int64_t count = (int64_t)p->R * p->C * p->RB * L;
  int32_t i, j, r, l, q;
  for (q = 0; q < p->R * p->C; ++q)
    for (r = 0; r < p->RB; ++r)
      for (l = 0; l < L; ++l) buf[((int64_t)q * p->RB + r) * L + l] += bias[r * L + l];
  if (p->act == EMBER_ACT_RELU) {
    for (q = 0; q < count; ++q) buf[q] = buf[q] > 0.0f ? buf[q] : 0.0f;
  } else if (p->act != EMBER_ACT_NONE) {
    if (L % EMBER_VL == 0) {
      ember_vact_block(buf, 0, 1, (int32_t)(count / EMBER_VL), p->act, p->p0, p->p1);
    } else {
      for (q = 0; q < count; ++q) buf[q] = ember_act1(buf[q], p->act, p->p0, p->p1);
    }
  }
  for (i = 0; i < p->R && i < rows; ++i) {
    const int32_t y = (qy + i) * p->sh + ry - p->off_h;
    for (j = 0; j < p->C && j < cols; ++j) {
      const int32_t x = (qx + j) * p->sw + rx - p->off_w;
      const float* v = buf + (int64_t)(i * p->C + j) * p->RB * L;
      for (r = 0; r < nb; ++r) {
        float* o = p->out + ((((int64_t)b * p->ocb + ob + r) * p->oh + y) * p->ow + x) * L;
        for (l = 0; l < L; ++l) o[l] = v[r * L + l];
      }
    }
  }
}

#define EMBER_EACH_LANES_IMPL "ember/kernels/conv_phase_impl.h"
#define EMBER_EACH_LANES_FROM_8
#include "ember/kernels/each_lanes.h"
#endif /* EMBER_KERNEL_BODIES */

#endif /* EMBER_KERNELS_CONV_PHASE_H_ */
