/*!
 * \file ember/kernels/conv_winograd.h
 * \brief 3x3 stride-1 dense conv2d in NCHW[L]c by Winograd's minimal filtering F(m x m, 3x3),
 *        m = 2 or 4 (a = m + 2 transform points a side), with the fused conv's epilogue.
 *
 * F(2x2, 3x3) does 16 products per 2x2 outputs (36 direct), F(4x4, 3x3) 36 per 4x4 (144).
 * Layouts (L = lanes: 4, 8 or 16 floats):
 *   input  [N][IC/L][H][W][L]      output, residual [N][OC/L][OH][OW][L]      bias [OC]
 *   weight U[a*a][OC/L][IC][L]: U[xi] = (G g G^T)[xi] for each (oc, ic), transformed in float64
 *          at compile time (ember/topi/nn/conv2d_winograd.py).
 * OH = H + pt + pb - 2, OW = W + pl + pr - 2 (any padding; the kernel needs only the top and
 * left ones and reads zeros outside the image). The output is cut into m x m tiles; a work
 * item is (image, a chunk of `tiles` tiles, a range of `blocks` output blocks). Per item:
 *   (a) V[xi][IC/L][T][L] = B^T d B of every a x a input patch, each element a vector of L
 *       channels (the transforms are vector adds over the lanes);
 *   (b) for each xi the GEMM M[xi] (T x OC) = V[xi] (T x IC) U[xi] (IC x OC): a 1x1 conv over
 *       T "pixels", in register tiles of EMBER_WINO_RW tiles x EMBER_WINO_RB output blocks;
 *   (c) Y = A^T M A per (output block, tile), then bias, residual, activation, stores clipped
 *       at the image's right and bottom edges.
 * Items are cut finer where they are too few to balance the tasks (ember_wino_share); an output's
 * arithmetic does not depend on its item: any split gives the same bits.
 * V and M live in one workspace buffer per task; with no workspace (a C runtime arena with
 * no room) the kernel runs tile by tile, each input transform shared by up to 4 output
 * blocks, with stack buffers of a few KB and the same bits (the same vector transforms, FMA
 * order and epilogue); the portable C99 build (-DEMBER_KERNELS_PORTABLE or no vector
 * extensions) runs that path lane by lane.
 */
#ifndef EMBER_KERNELS_CONV_WINOGRAD_H_
#define EMBER_KERNELS_CONV_WINOGRAD_H_

#include <stdint.h>

#include "ember/kernels/linkage.h"

#define EMBER_CONV_WINOGRAD_PARAMS                                                                 \
  const float* in, const float* u, const float* bias, const float* res, float* out, int32_t n,     \
      int32_t icb, int32_t h, int32_t wd, int32_t ocb, int32_t oh, int32_t ow, int32_t pt,         \
      int32_t pl, int32_t m, int32_t act, float lo, float hi, int32_t flags, int32_t tiles,        \
      int32_t blocks, int32_t threads
EMBER_KENTRY int32_t ember_conv_winograd_x4(EMBER_CONV_WINOGRAD_PARAMS);
EMBER_KENTRY int32_t ember_conv_winograd_x8(EMBER_CONV_WINOGRAD_PARAMS);
EMBER_KENTRY int32_t ember_conv_winograd_x16(EMBER_CONV_WINOGRAD_PARAMS);

#if EMBER_KERNEL_BODIES
#include "ember/c_backend_api.h"
#include "ember/kernels/conv_simd.h"
#include "ember/kernels/gemm_epilogue.h" /* the vector GELUs of the late activation pass */

#define EMBER_WINO_MAX_A 6 /* transform points a side (m = 4) */

/* The transforms (Lavin & Gray's points 0, +-1, +-2 and infinity) as few adds as the points
 * allow, for T a float or a vector of floats (the same association either way: the no-workspace
 * path gives the workspace path's bits). o[i] = (B^T d)[i] for the a = 4 or 6 values d[0, a);
 * a call per row and column of a patch. */
#define EMBER_WINO_BT_BODY(T, a, o, d)                                                         \
  if ((a) == 4) {                                                                              \
    o[0] = d[0] - d[2];                                                                        \
    o[1] = d[1] + d[2];                                                                        \
    o[2] = d[2] - d[1];                                                                        \
    o[3] = d[1] - d[3];                                                                        \
  } else {                                                                                     \
    const T t0 = d[4] - 4.0f * d[2], t1 = d[3] - 4.0f * d[1];                                  \
    const T t2 = d[4] - d[2], t3 = 2.0f * (d[3] - d[1]);                                       \
    o[0] = 4.0f * d[0] - 5.0f * d[2] + d[4];                                                   \
    o[1] = t0 + t1;                                                                            \
    o[2] = t0 - t1;                                                                            \
    o[3] = t2 + t3;                                                                            \
    o[4] = t2 - t3;                                                                            \
    o[5] = 4.0f * d[1] - 5.0f * d[3] + d[5];                                                   \
  }
/* o[i] = (A^T s)[i] for the a values s[0, a): m = a - 2 outputs. */
#define EMBER_WINO_AT_BODY(T, a, o, s)                                                         \
  if ((a) == 4) {                                                                              \
    o[0] = s[0] + s[1] + s[2];                                                                 \
    o[1] = s[1] - s[2] - s[3];                                                                 \
  } else {                                                                                     \
    const T s1 = s[1] + s[2], d1 = s[1] - s[2], s2 = s[3] + s[4], d2 = s[3] - s[4];            \
    o[0] = s[0] + s1 + s2;                                                                     \
    o[1] = d1 + 2.0f * d2;                                                                     \
    o[2] = s1 + 4.0f * s2;                                                                     \
    o[3] = d1 + 8.0f * d2 + s[5];                                                              \
  }

static inline void ember_wino_bt(int32_t a, float* o, const float* d) {
  EMBER_WINO_BT_BODY(float, a, o, d)
}

static inline void ember_wino_at(int32_t a, float* o, const float* s) {
  EMBER_WINO_AT_BODY(float, a, o, s)
}

/*! \brief Everything a Winograd conv call needs (sizes in elements). */
typedef struct {
  const float* in;
  const float* u;
  const float* bias;
  const float* res;
  float* out;
  int32_t n, icb, h, w, ocb, oh, ow, pt, pl, m, a;
  int32_t th, tw;          /* tiles down and across the output */
  int32_t tiles, blocks;   /* tiles and output blocks per work item */
  int32_t chunks, ranges;  /* tile chunks per image, block ranges */
  int32_t act, flags, epi; /* epi: ember_epi_store_case */
  float lo, hi;
} ember_wino_p;

static inline int64_t ember_wino_items(const ember_wino_p* p) {
  return (int64_t)p->n * p->chunks * p->ranges;
}

/* Work item `item`'s image, first tile, tile count, first output block and block count. */
static inline void ember_wino_where(const ember_wino_p* p, int64_t item, int32_t* b, int32_t* t0,
                                    int32_t* cnt, int32_t* ob0, int32_t* nob) {
  const int32_t nt = p->th * p->tw, r = (int32_t)(item % p->ranges);
  const int32_t chunk = (int32_t)(item / p->ranges % p->chunks);
  *b = (int32_t)(item / p->ranges / p->chunks);
  *t0 = chunk * p->tiles;
  *cnt = nt - *t0 < p->tiles ? nt - *t0 : p->tiles;
  *ob0 = r * p->blocks;
  *nob = p->ocb - *ob0 < p->blocks ? p->ocb - *ob0 : p->blocks;
}

/* p's items recut for `tasks` tasks when they are too few to balance (resnet18's 512->512 at 7x7:
 * 16 tiles in one chunk, 4 ranges of 8 blocks, kept 4 of 16 tasks busy): the chunk of whole
 * register tiles of rw and the range of blocks whose longest task is shortest, an item's time
 * taken as its tiles x (its blocks + 1/4: the input transform, which every range of a chunk
 * repeats). Each output's arithmetic is the same in any item, so the bits do not change. */
static inline void ember_wino_share(ember_wino_p* p, int64_t tasks, int32_t rw) {
  const int32_t nt = p->th * p->tw;
  int32_t t, bl, best_t = p->tiles, best_b = p->blocks;
  double best = -1.0;
  if (tasks <= 1 || ember_wino_items(p) >= 4 * tasks) return; /* balanced within 1/4 */
  for (t = p->tiles; t >= 1; t = t > rw ? (t - 1) / rw * rw : 0) {
    const int64_t chunks = (nt + t - 1) / t;
    for (bl = p->blocks; bl >= 1; bl = bl > 1 ? (bl + 1) / 2 : 0) {
      const int64_t items = (int64_t)p->n * chunks * ((p->ocb + bl - 1) / bl);
      const double cost = (double)((items + tasks - 1) / tasks) * (t < nt ? t : nt) * (bl + 0.25);
      if (best < 0 || cost < best) best = cost, best_t = t, best_b = bl;
    }
  }
  p->tiles = best_t;
  p->blocks = best_b;
  p->chunks = (nt + best_t - 1) / best_t;
  p->ranges = (p->ocb + best_b - 1) / best_b;
}

#define EMBER_EACH_LANES_IMPL "ember/kernels/conv_winograd_impl.h"
#include "ember/kernels/each_lanes.h"
#endif /* EMBER_KERNEL_BODIES */

#endif /* EMBER_KERNELS_CONV_WINOGRAD_H_ */
