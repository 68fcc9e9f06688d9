/*!
 * \file ember/kernels/conv_nchw_input.h
 * \brief The first conv of a CNN: a dense conv (groups 1) reading a plain NCHW input with few
 *        channels (1-8: an image, a spectrogram) and writing NCHW[L]c, with the epilogue of
 *        conv_nchwc.h (bias, residual add, activation).
 *
 * Why its own kernel: the NCHW[L]c kernel's tiles loop over input channel blocks; with 1-3
 * channels each tap is one FMA per weight vector behind per-tap column pointers and bounds
 * checks on every border tile (dscnn's 10x4/2 conv on 1x49x10: 2x onnxruntime's time). Here
 * each work item (a batch image and a run of output rows) first copies the input rows it reads
 * to a zero-padded buffer [IC][rows][WB] (at most 64 KiB: IC is small), so every tile is an interior
 * one, and the tail of a row is a full tile whose extra columns read the buffer's slack and are
 * not stored. A register tile is RW output columns x RB (1 or 2) output blocks: for each input
 * channel and tap, RB weight vectors and RW broadcast input values, RW * RB FMAs (the scheme of
 * MLAS's NCHW conv kernel). Every output block of the image runs over the item's rows while
 * they are in cache.
 *
 * Layouts (L = lanes: 4, 8 or 16 floats):
 *   input  [N][IC][H][W]                 weight [OC/L][IC][KH][KW][L]  (conv_nchwc.h's with CB 1)
 *   output [N][OC/L][OH][OW][L]          bias   [OC]      residual: as the output
 * rw (register tile width: 4, 5 or 6, 8 or 12 too with AVX-512), rows (output rows per work
 * item) and blocks (output blocks per work item: all of them, unless too few items would keep
 * threads idle) come from ember/topi/nn/conv2d_nchw_input.py; another rw runs the widest instantiated
 * one below it. Without GCC/Clang vector extensions (or with -DEMBER_KERNELS_PORTABLE) the
 * entry points run conv_nchwc.h's plain C99 loop nest.
 */
#ifndef EMBER_KERNELS_CONV_NCHW_INPUT_H_
#define EMBER_KERNELS_CONV_NCHW_INPUT_H_

#include <stdint.h>

#include "ember/kernels/linkage.h"

#define EMBER_CONV2D_NCHW_INPUT_PARAMS                                                             \
  const float* in, const float* w, const float* bias, const float* res, float* out, int32_t n,     \
      int32_t ic, int32_t h, int32_t wd, int32_t ocb, int32_t oh, int32_t ow, int32_t kh,          \
      int32_t kw, int32_t sh, int32_t sw, int32_t dh, int32_t dw, int32_t pt, int32_t pl,          \
      int32_t act, float lo, float hi, int32_t flags, int32_t rw, int32_t rows, int32_t blocks,  \
      int32_t threads
EMBER_KENTRY int32_t ember_conv2d_nchw_input_x4(EMBER_CONV2D_NCHW_INPUT_PARAMS);
EMBER_KENTRY int32_t ember_conv2d_nchw_input_x8(EMBER_CONV2D_NCHW_INPUT_PARAMS);
EMBER_KENTRY int32_t ember_conv2d_nchw_input_x16(EMBER_CONV2D_NCHW_INPUT_PARAMS);

#if EMBER_KERNEL_BODIES
/* the parameter block, the portable loop nest and the vector epilogue (ember_conv_store_x<L>,
 * ember_conv_act_pass_x<L>) */
#include "ember/kernels/conv_nchwc.h"

/* Work items: (batch image, run of p->strip output rows, group of p->rb output blocks), the
 * groups innermost (consecutive items of a task share the run's row buffer). */
static inline int64_t ember_nchw_in_items(const ember_conv_p* p) {
  return (int64_t)p->n * ((p->oh + p->strip - 1) / p->strip) * ((p->ocb + p->rb - 1) / p->rb);
}

/* Item `item`'s batch image, output rows [*oy0, *oy1) and output blocks [*ob0, *ob1); returns
 * the index of its (batch image, run of rows). */
static inline int64_t ember_nchw_in_item(const ember_conv_p* p, int64_t item, int32_t* b,
                                         int32_t* oy0, int32_t* oy1, int32_t* ob0,
                                         int32_t* ob1) {
  const int32_t groups = (p->ocb + p->rb - 1) / p->rb, runs = (p->oh + p->strip - 1) / p->strip;
  const int64_t run = item / groups;
  *ob0 = (int32_t)(item % groups) * p->rb;
  *ob1 = *ob0 + p->rb < p->ocb ? *ob0 + p->rb : p->ocb;
  *b = (int32_t)(run / runs);
  *oy0 = (int32_t)(run % runs) * p->strip;
  *oy1 = *oy0 + p->strip < p->oh ? *oy0 + p->strip : p->oh;
  return run;
}

/* The rows per item of a launch on `tasks` threads: the planned count or down to half of it,
 * whichever gives the busiest task (equal item counts) the fewest rows, the most rows per
 * item among equals (each item re-reads its kernel's extra input rows). Planned for a few
 * threads, resnet18's 7x7 conv to 112x112 ran 14 items of 8 rows: two of 16 threads had
 * none (1.14x the even split's time), mobilenet_v2's first conv 12 of 10 rows (1.5x); in
 * items of 7 rows both split evenly. Every task computes the same count. */
static inline int32_t ember_nchw_in_task_rows(const ember_conv_p* p, int64_t tasks) {
  const int64_t groups = (p->ocb + p->rb - 1) / p->rb;
  int32_t best = p->strip, r;
  int64_t best_rows = -1;
  if (tasks <= 1) return p->strip;
  for (r = p->strip; r >= 1 && 2 * r >= p->strip; --r) {
    const int64_t items = (int64_t)p->n * ((p->oh + r - 1) / r) * groups;
    const int64_t busiest = (items + tasks - 1) / tasks * r;
    if (best_rows < 0 || busiest < best_rows) {
      best = r;
      best_rows = busiest;
    }
  }
  return best;
}

/* Columns of the padded row buffer: every tap of ceil(ow / rw) full tiles of rw columns. */
static inline int32_t ember_nchw_in_wb(const ember_conv_p* p, int32_t rw) {
  const int32_t tiles = (p->ow + rw - 1) / rw;
  return (tiles * rw - 1) * p->sw + (p->kw - 1) * p->dw + 1;
}

/* Rows of the buffer of `rows` output rows (at most the image's). */
static inline int32_t ember_nchw_in_hb(const ember_conv_p* p, int32_t rows) {
  const int32_t need = (rows - 1) * p->sh + (p->kh - 1) * p->dh + 1;
  return need < p->h ? need : p->h;
}

#define EMBER_EACH_LANES_IMPL "ember/kernels/conv_nchw_input_impl.h"
#include "ember/kernels/each_lanes.h"
#endif /* EMBER_KERNEL_BODIES */

#endif /* EMBER_KERNELS_CONV_NCHW_INPUT_H_ */
