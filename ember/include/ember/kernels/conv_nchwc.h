/*!
 * \file ember/kernels/conv_nchwc.h
 * \brief conv2d (dense, grouped, depthwise) in the blocked layout NCHW[L]c, with the epilogue
 *        (bias, residual add, activation) applied while the tile is in registers (the
 *        exp-based activations in a second pass over each strip, while it is in L1).
 *
 * Layouts (L = lanes: 4, 8 or 16 floats; CB = L, or 1 for a plain NCHW input):
 *   input  [N][IC/CB][H][W][CB]          weight [OC/L][ICg/CB][KH][KW][CB][L]
 *   output [N][OC/L][OH][OW][L]          bias   [OC]      residual: as the output
 * ICg is the input channels of one group. Depthwise (groups == IC == OC, CB == L) takes the
 * weight [C/L][KH][KW][L].
 *
 * The dense kernel computes RW output columns x RB output-channel blocks per register tile;
 * RW, RB, the strip width (output columns per work item), the loop order and whether to
 * launch threads come from the cost model in ember/topi/nn/conv2d_nchwc.py. Padding is handled
 * here: each output row uses only the kernel rows inside the image, and the columns whose
 * window crosses the left or right edge are computed one at a time with their valid taps.
 * Work items (strips of one output row) are split over TVMBackendParallelLaunch's tasks.
 *
 * Entry points (one per lane count, e.g. ember_conv2d_nchwc_x8) return 0; a lane count the
 * header does not provide fails to compile. Without GCC/Clang vector extensions (or with
 * -DEMBER_KERNELS_PORTABLE) the same entry points run a plain C99 loop nest.
 */
#ifndef EMBER_KERNELS_CONV_NCHWC_H_
#define EMBER_KERNELS_CONV_NCHWC_H_

#include <stdint.h>

#include "ember/kernels/linkage.h"
#include "ember/kernels/task_split.h"

/* The entry points (linkage and where their bodies come from: ember/kernels/linkage.h). */
#define EMBER_CONV2D_NCHWC_PARAMS                                                                  \
  const float* in, const float* w, const float* bias, const float* res, float* out, int32_t n,     \
      int32_t icb, int32_t cb, int32_t h, int32_t wd, int32_t ocb, int32_t groups, int32_t oh,     \
      int32_t ow, int32_t kh, int32_t kw, int32_t sh, int32_t sw, int32_t dh, int32_t dw,          \
      int32_t pt, int32_t pl, int32_t act, float lo, float hi, int32_t flags, int32_t rb,          \
      int32_t rw, int32_t strip, int32_t order, int32_t threads
#define EMBER_DEPTHWISE_NCHWC_PARAMS                                                               \
  const float* in, const float* w, const float* bias, const float* res, float* out, int32_t n,     \
      int32_t cblocks, int32_t h, int32_t wd, int32_t oh, int32_t ow, int32_t kh, int32_t kw,      \
      int32_t sh, int32_t sw, int32_t dh, int32_t dw, int32_t pt, int32_t pl, int32_t act,         \
      float lo, float hi, int32_t flags, int32_t strip, int32_t threads
EMBER_KENTRY int32_t ember_conv2d_nchwc_x4(EMBER_CONV2D_NCHWC_PARAMS);
EMBER_KENTRY int32_t ember_conv2d_nchwc_x8(EMBER_CONV2D_NCHWC_PARAMS);
EMBER_KENTRY int32_t ember_conv2d_nchwc_x16(EMBER_CONV2D_NCHWC_PARAMS);
EMBER_KENTRY int32_t ember_depthwise_nchwc_x4(EMBER_DEPTHWISE_NCHWC_PARAMS);
EMBER_KENTRY int32_t ember_depthwise_nchwc_x8(EMBER_DEPTHWISE_NCHWC_PARAMS);
EMBER_KENTRY int32_t ember_depthwise_nchwc_x16(EMBER_DEPTHWISE_NCHWC_PARAMS);
/* The conv object in three parts (linkage.h): its register tiles are most of its code; part 0
 * the rest and the narrow tiles, parts 1 and 2 the wide ones (conv_nchwc_impl.h's groups). */
EMBER_KPARTS(ember_conv2d_nchwc, 3)

#if EMBER_KERNEL_BODIES
#include "ember/c_backend_api.h"
#include "ember/kernels/conv_simd.h"
#include "ember/kernels/gemm_epilogue.h" /* the vector GELUs of the late activation pass */

/*! \brief The weights a pass of the row tiles prefetches for the next one (ember_conv_chunked):
 *         nb regions of len floats, wob apart from base, a step of them per tile; at: the
 *         floats of each region prefetched so far. */
typedef struct {
  const float* base;
  size_t wob, len, step, at;
  int32_t nb;
} ember_conv_pf;

/*! \brief Everything a conv kernel call needs (sizes in elements). */
typedef struct {
  const float* in;
  const float* wt;
  const float* bias;
  const float* res;
  float* out;
  int32_t n, icb, icb_g, cb, h, w;   /* input blocks (all, per group), block size, image */
  int32_t ocb, ocb_g, oh, ow;        /* output blocks (all, per group), output image */
  int32_t kh, kw, sh, sw, dh, dw, pt, pl;
  int32_t act, flags;
  float lo, hi;
  int32_t rb, rw, strip, order;      /* tile and loop order (cost model) */
  int32_t groups;
  int32_t depthwise;
  int32_t wicb;                      /* input blocks of one output block's weights (icb_g) */
  int32_t icl;                       /* lanes of input block icb_g - 1 that the taps read
                                        (ember_conv_live_lanes; cb: all) */
  int32_t accum;                     /* tiles add the output's partial sums, not the bias */
  int32_t epi;                       /* the tiles' store case: ember_conv_epi_case */
  ember_conv_pf* pf;                 /* the next pass's weights to prefetch, or NULL */
  const float* pair_w;               /* AVX-512's 8-lane 1x1 pair tiles: repacked weights and
                                        bias (conv_nchwc_pair_impl.h), or NULL */
} ember_conv_p;

/* The store case of the register tiles (EMBER_CONV_STORE_TILE), from act, flags and accum:
 * res_first | clamp << 1 | res_last << 3 for the common epilogues (none, relu, clip, or an
 * exp-based one that runs later; a residual before or after), 16 | clamp << 1 for a later
 * pass over input blocks (accum) with none or relu and no residual (the row tiles' passes
 * of one input block each store every tile 16 times), 33 for streamed stores
 * (EMBER_EPI_STREAM) of a residual add with no activation, -1 for the rest (then
 * ember_conv_store_general, out of line, its activation chosen per vector). Set wherever
 * those fields are: computed in each tile, GCC's jump threading copied every tile's stores
 * once per path to the switch (30% of the conv object's code and of its compile time). */
static inline int32_t ember_conv_epi_case(const ember_conv_p* p) {
  const int32_t act = p->act, flags = p->flags;
  const int32_t epi = ember_epi_store_case(act, flags); /* conv_simd.h: the common cases */
  if (epi < 0) return -1;
  if (p->accum) /* later passes: no residual, no clip */
    return (flags & EMBER_EPI_RESIDUAL) || act == EMBER_CONV_ACT_CLIP ? -1 : 16 | (epi & 6);
  if ((flags & EMBER_EPI_STREAM) && epi == 1 && !act) return 33; /* streamed: a 1x1 add */
  return epi;
}

/* The lanes of the last input block whose weights are not all zero (cb if the last lane's
 * are not, or where the tiles read every lane): the rest the tiles skip. A channel count that
 * does not fill whole blocks (HRNet's 18 and 36, padded by the planner to 32 and 48 with zero
 * weights: channel_pad.py) otherwise spends the padded lanes' FMAs too; the 3x3 18->18 at
 * 64x48 did 32 of them per tap and output block for 18 useful ones (1.4x onnxruntime's time,
 * which reads only the real channels). Trailing lanes are scanned from the last one down and
 * the scan stops at the first non-zero weight: nothing for an unpadded conv. A real channel
 * whose weights are all zero is skipped as well (its inf or NaN input then no longer reaches
 * the output). Dense convs over blocks of `lanes` (the output's) input channels only. */
static inline int32_t ember_conv_live_lanes(const ember_conv_p* p, int32_t lanes) {
  const int32_t cb = p->cb;
  const size_t block = (size_t)p->kh * p->kw * cb * cb; /* one input block of an output block */
  int32_t c, ob, t, l;
  if (p->depthwise || p->groups != 1 || p->icb_g < 1 || cb != lanes) return cb;
  for (c = cb - 1; c > 0; --c) {
    for (ob = 0; ob < p->ocb; ++ob) {
      const float* wk = p->wt + ((size_t)ob * p->icb_g + p->icb_g - 1) * block + (size_t)c * cb;
      for (t = 0; t < p->kh * p->kw; ++t, wk += (size_t)cb * cb)
        for (l = 0; l < cb; ++l)
          if (wk[l] != 0.0f) return c + 1; /* a NaN counts as live */
    }
  }
  return 1;
}

/* The epilogue flags a dense conv runs: EMBER_EPI_STREAM (the planner's, for an output far
 * larger than the last-level cache: conv2d_nchwc.py) kept only where the output is aligned
 * to whole vectors of `lanes` floats (every store of the tiles then is) and the activation
 * runs with the stores (a later pass over each strip would read it back from memory).
 * Streamed, the 1x1 16->256 conv + add of a text detector's FPN at 160x160 (26 MB out, as
 * much residual in) ran in 1.1 ms instead of 2.4 ms on a Zen 5 core: plain stores read
 * every output line from memory before writing it. The 1x1 tiles stream a residual add
 * with no activation in line (ember_conv_epi_case's 33: what the planner asks for); the
 * other tiles store that case, and the rare epilogues, through ember_conv_store_general,
 * which streams too; the other common epilogues (relu, clip) keep plain stores. */
static inline int32_t ember_conv_stream_flags(int32_t flags, int32_t act, const float* out,
                                              int32_t lanes) {
  const int keep = act < EMBER_CONV_ACT_SIGMOID &&
                   (uintptr_t)out % ((uintptr_t)lanes * sizeof(float)) == 0;
  return keep ? flags : flags & ~EMBER_EPI_STREAM;
}

/* Whether the activation runs in a second pass over each stored strip (the exp-based ones:
 * a tight loop there, where per stored vector it would be a call each). */
static inline int ember_conv_late_act(const ember_conv_p* p) {
  return p->act >= EMBER_CONV_ACT_SIGMOID;
}

/* The loops over a kernel row's taps (kx, c) of a channel-blocked input, unrolled 4 times
 * on AVX-512: rolled, each quad step (24 FMAs) paid its loop's pointer steps, compare and
 * branch, and the quads ran at 80% of the FMA peak (one core, weights cold, thread time:
 * crnn's 3x3s over 80-wide rows 3-7% faster, resnet18's and inception's 3x3s 2-5%). AVX2's
 * pairs (12 FMAs a step) gain nothing, and their flat tiles over 35x35 maps lost 1-2%. */
#if defined(__AVX512F__) && defined(__clang__)
#define EMBER_TAP_UNROLL _Pragma("unroll 4")
#elif defined(__AVX512F__) && defined(__GNUC__) && __GNUC__ >= 8
#define EMBER_TAP_UNROLL _Pragma("GCC unroll 4")
#else
#define EMBER_TAP_UNROLL
#endif

/* Prefetch the cache line at ptr into the L2 (asm on x86: GCC 12 drops __builtin_prefetch
 * from some loops). */
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define EMBER_PREFETCH_L2(ptr) __asm__ volatile("prefetcht1 %0" : : "m"(*(const char*)(ptr)))
#elif defined(__GNUC__)
#define EMBER_PREFETCH_L2(ptr) __builtin_prefetch((ptr), 0, 2)
#else
#define EMBER_PREFETCH_L2(ptr) ((void)(ptr))
#endif
/* ... into the L1 */
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define EMBER_PREFETCH_L1(ptr) __asm__ volatile("prefetcht0 %0" : : "m"(*(const char*)(ptr)))
#elif defined(__GNUC__)
#define EMBER_PREFETCH_L1(ptr) __builtin_prefetch((ptr), 0, 3)
#else
#define EMBER_PREFETCH_L1(ptr) ((void)(ptr))
#endif

/* The next step of the prefetches of pf (one tile's share), if any are left. */
static inline void ember_conv_pf_step(ember_conv_pf* pf) {
  size_t a, end;
  int32_t r;
  if (pf == NULL || pf->at >= pf->len) return;
  end = pf->at + pf->step < pf->len ? pf->at + pf->step : pf->len;
  for (r = 0; r < pf->nb; ++r) {
    const float* region = pf->base + (size_t)r * pf->wob;
    for (a = pf->at; a < end; a += 16) EMBER_PREFETCH_L2(region + a); /* 16 floats a line */
  }
  pf->at = end;
}

/* What a column tap in the padding reads (at least as many floats as any block). */
static const float ember_conv_zeros[16] = {0.0f};

/* Block groups of one conv group: pairs (rb = 2) and, for an odd count, a last single. */
static inline int32_t ember_conv_block_groups(const ember_conv_p* p) {
  return p->depthwise ? p->ocb : p->groups * ((p->ocb_g + p->rb - 1) / p->rb);
}

/* The first output block of block group og, and how many blocks it has. */
static inline int32_t ember_conv_blocks(const ember_conv_p* p, int32_t og, int32_t* nb) {
  int32_t per = (p->ocb_g + p->rb - 1) / p->rb, g = og / per, k = og % per;
  int32_t first = k * p->rb;
  *nb = p->ocb_g - first < p->rb ? p->ocb_g - first : p->rb;
  return g * p->ocb_g + first;
}

/* Work items: (batch, output block group, row, strip); order 1 puts the block group inside. */
static inline void ember_conv_item(const ember_conv_p* p, int64_t item, int32_t* b, int32_t* og,
                                   int32_t* oy, int32_t* s) {
  int32_t groups = ember_conv_block_groups(p);
  int32_t strips = (p->ow + p->strip - 1) / p->strip;
  if (p->order) {
    *og = (int32_t)(item % groups);
    item /= groups;
    *s = (int32_t)(item % strips);
    item /= strips;
    *oy = (int32_t)(item % p->oh);
    *b = (int32_t)(item / p->oh);
  } else {
    *s = (int32_t)(item % strips);
    item /= strips;
    *oy = (int32_t)(item % p->oh);
    item /= p->oh;
    *og = (int32_t)(item % groups);
    *b = (int32_t)(item / groups);
  }
}

/* The coordinates of item + 1, from those of item (ember_conv_item's nesting): a run of items
 * steps through them with no division (a division per item took as long as a small
 * depthwise strip's FMAs: dscnn's 25x5 maps). */
static inline void ember_conv_item_next(const ember_conv_p* p, int32_t groups, int32_t strips,
                                        int32_t* b, int32_t* og, int32_t* oy, int32_t* s) {
  if (p->order) {
    if (++*og < groups) return;
    *og = 0;
    if (++*s < strips) return;
    *s = 0;
    if (++*oy < p->oh) return;
    *oy = 0;
    ++*b;
  } else {
    if (++*s < strips) return;
    *s = 0;
    if (++*oy < p->oh) return;
    *oy = 0;
    if (++*og < groups) return;
    *og = 0;
    ++*b;
  }
}

static inline int64_t ember_conv_items(const ember_conv_p* p) {
  int32_t groups = ember_conv_block_groups(p);
  int32_t strips = (p->ow + p->strip - 1) / p->strip;
  return (int64_t)p->n * groups * p->oh * strips;
}

/* The strip width of a launch on `tasks` threads where the planned strips give fewer than
 * EMBER_CONV_ITEMS_PER_TASK work items per task (or, by place, fewer places than tasks):
 * the planned one cut (in whole register tiles) to EMBER_CONV_ITEMS_PER_TASK items a task,
 * or, for a 1x1 conv cut by place, the width whose longest task is shortest by
 * ember_conv_strip_cost among that one and the even widths that cut each row into a count
 * of strips that makes the item count a multiple of the tasks (up to EMBER_CONV_STRIP_TRIES
 * items a task). The kernel was planned
 * for a few threads; on many cores a layer with few channel blocks and rows (a late 7x7
 * layer, a 1x1 conv over one flattened row) would otherwise leave threads idle or finish on
 * the one task with an extra item. Cut in whole register tiles instead, the 1x1 384->64 over
 * a flattened 14x14 map on 16 tasks ran in 33 strips of 6 (task 0 three of them: 5.0 us,
 * the others 3.8); in 14 strips of 14 no task has more than one.
 * Every task computes the same width from the same count. */
#define EMBER_CONV_ITEMS_PER_TASK 16
#define EMBER_CONV_STRIP_TRIES 8
#define EMBER_CONV_TILE_FIXED 2 /* a register tile's work in columns (ember_conv_work_before) */
/* The work (ember_conv_work_before's units, a block) of the longest task when `rows` rows
 * (places cut by place: a place's block groups stay together) of `per_row` strips of
 * `width` are cut over `tasks`. */
static inline int64_t ember_conv_strip_cost(int64_t rows, int64_t per_row, int64_t width,
                                            int64_t rw, int64_t tasks) {
  const int64_t most = (rows * per_row + tasks - 1) / tasks; /* items of the longest task */
  return most * (EMBER_CONV_TILE_FIXED * ((width + rw - 1) / rw) + width);
}
static inline int32_t ember_conv_task_strip(const ember_conv_p* p, int64_t tasks,
                                            int by_place) {
  const int64_t items = ember_conv_items(p), want = EMBER_CONV_ITEMS_PER_TASK * tasks;
  const int64_t per_row = (p->ow + p->strip - 1) / p->strip;
  const int64_t rows = (int64_t)p->n * p->oh * (by_place ? 1 : ember_conv_block_groups(p));
  const int64_t tile = p->rw > 0 ? p->rw : 1;
  /* even widths only, the row's last strip not 1 column (a narrow tile spends more loads per
   * FMA; every tile width sums in one order, EMBER_TILE_1X1_CB); by place only: cut by
   * group, the wider items of a weight-heavy conv span more block groups' weights */
  const int any_even = by_place && p->kw == 1 && p->pl == 0 && tile % 2 == 0 &&
                       (p->strip % 2 == 0 || p->strip >= p->ow);
  int64_t cuts, best, cost, m, w, k;
  by_place = by_place && rows * per_row < tasks; /* only too few places need narrower strips */
  if (tasks <= 1 || p->strip <= tile || (items >= want && !by_place)) return p->strip;
  cuts = items < want ? (want + items - 1) / items : 1; /* whole tiles, `want` items */
  if (by_place && rows * per_row * cuts < tasks) cuts = (tasks + rows * per_row - 1) /
                                                        (rows * per_row); /* a place each */
  best = ((p->strip + cuts - 1) / cuts + tile - 1) / tile * tile;
  best = best < p->strip ? best : p->strip;
  if (!any_even) return (int32_t)best;
  cost = ember_conv_strip_cost(rows, (p->ow + best - 1) / best, best, tile, tasks);
  for (k = 1; k <= EMBER_CONV_STRIP_TRIES; ++k) {
    m = (k * tasks + rows - 1) / rows; /* strips a row */
    if (m <= per_row) continue;
    if (m > p->ow) break;
    w = (p->ow + m - 1) / m;
    w += w % 2;
    m = (p->ow + w - 1) / w; /* the strips that width gives */
    if (w < p->strip && p->ow % w != 1) {
      const int64_t mine = ember_conv_strip_cost(rows, m, w, tile, tasks);
      if (mine < cost) {
        cost = mine;
        best = w;
      }
    }
  }
  return (int32_t)best;
}

/* The kernel rows of output row oy that fall inside the image (at least 1: a row of padding
 * only still stores its bias). */
static inline int32_t ember_conv_row_taps(const ember_conv_p* p, int32_t oy) {
  const int32_t start = oy * p->sh - p->pt, first = ember_first_tap(start, p->dh, p->kh);
  const int32_t taps = ember_end_tap(start, p->dh, p->h, p->kh, first) - first;
  return taps > 1 ? taps : 1;
}

/* The row taps (ember_conv_row_taps) of output rows [0, r): kh a row but in the rows whose
 * kernel crosses the top or bottom of the image (a few: their loops are short). */
static inline int64_t ember_conv_taps_before(const ember_conv_p* p, int32_t r) {
  const int32_t top = p->pt > 0 ? (p->pt + p->sh - 1) / p->sh : 0; /* rows [0, top) cross */
  const int32_t below = p->h - (p->kh - 1) * p->dh + p->pt;        /* rows from here cross */
  int32_t bottom = below > 0 ? (below + p->sh - 1) / p->sh : 0, oy;
  int64_t taps = (int64_t)r * p->kh;
  for (oy = 0; oy < r && oy < top; ++oy) taps -= p->kh - ember_conv_row_taps(p, oy);
  for (oy = bottom > top ? bottom : top; oy < r; ++oy) taps -= p->kh - ember_conv_row_taps(p, oy);
  return taps;
}

/* The work of the items before `item`, in output blocks x (columns + EMBER_CONV_TILE_FIXED a
 * register tile) x kernel rows inside the image: a strip's items cost their columns and the
 * weight loads of their tiles (a last strip of 1 column of a 49-wide row: a tile's loads
 * for one column; where the weights overflow the L1 each tile streams them from the L2:
 * in resnet18's 3x3 512->512 at 7x7 a 6-wide tile cost as much as 7.8 columns), a
 * block group's as tall as its blocks (the last group of an odd count has one), and a row
 * of a 3x3 conv at the top or bottom of the map does two thirds of the others' (counted as
 * a whole row, the tasks of resnet18's 3x3s at 28x28 that held the map's edges ran 0.92x
 * the others' time on 16 threads; counted in tiles alone, a 4-wide last strip of a 28-wide
 * row as much as a 12-wide one). */
static inline int64_t ember_conv_work_before(const void* args, int64_t item) {
  const ember_conv_p* p = (const ember_conv_p*)args;
  const int64_t G = ember_conv_block_groups(p), S = (p->ow + p->strip - 1) / p->strip;
  const int64_t B = p->depthwise ? p->ocb : (int64_t)p->groups * p->ocb_g;
  const int64_t per = p->depthwise ? 1 : (p->ocb_g + p->rb - 1) / p->rb;
  const int64_t rw = p->rw > 0 ? p->rw : 1, last = p->ow - (S - 1) * p->strip;
  const int64_t T = EMBER_CONV_TILE_FIXED * ((p->strip + rw - 1) / rw) + p->strip; /* a strip */
  const int64_t W = (S - 1) * T + EMBER_CONV_TILE_FIXED * ((last + rw - 1) / rw) + last;
  const int64_t image = ember_conv_taps_before(p, p->oh);                  /* rows' taps */
  int64_t og, s, rest, before, nb, place;
  int32_t oy;
#define EMBER_BLOCKS_BEFORE(g)                                                                 \
  (p->depthwise ? (g) : (g) / per * p->ocb_g +                                                 \
   ((g) % per * p->rb < p->ocb_g ? (g) % per * p->rb : p->ocb_g))
#define EMBER_TILES_BEFORE(k) ((k) < S ? (k) * T : W)
  if (p->order) { /* ((b, oy), s, og): og innermost */
    place = item / (S * G);
    oy = (int32_t)(place % p->oh);
    rest = item % (S * G);
    s = rest / G;
    og = rest % G;
    return (place / p->oh * image + ember_conv_taps_before(p, oy)) * W * B +
           ember_conv_row_taps(p, oy) *
               (EMBER_TILES_BEFORE(s) * B +
                (EMBER_TILES_BEFORE(s + 1) - EMBER_TILES_BEFORE(s)) * EMBER_BLOCKS_BEFORE(og));
  }
  rest = item % (G * p->oh * S); /* (b, og, oy, s): strips innermost */
  og = rest / (p->oh * S);
  rest %= p->oh * S;
  oy = (int32_t)(rest / S);
  before = EMBER_BLOCKS_BEFORE(og);
  nb = EMBER_BLOCKS_BEFORE(og + 1) - before;
  return (item / (G * p->oh * S) * B + before) * image * W +
         nb * (ember_conv_taps_before(p, oy) * W +
               ember_conv_row_taps(p, oy) * EMBER_TILES_BEFORE(rest % S));
#undef EMBER_BLOCKS_BEFORE
#undef EMBER_TILES_BEFORE
}

/* The first item of task `task` of `tasks`: where the work before it reaches task / tasks of
 * the whole (equal item counts would give one task the wide strips or the two-block groups:
 * 48 of 49 columns for a 1x1 conv over a 7x7 map cut into strips of 48). */
static inline int64_t ember_conv_task_start(const ember_conv_p* p, int64_t task, int64_t tasks) {
  return ember_task_start(ember_conv_work_before, p, ember_conv_items(p), task, tasks);
}

typedef void (*ember_conv_range_fn)(const ember_conv_p* p, int64_t lo, int64_t hi);

/* Whether a launch's tasks cut by output place (ember_conv_place_share) rather than by block
 * group: where the input outweighs the weights. By place, every core reads all the weights
 * once; by group, every core reads all of the input, half of it from the other core's cache
 * when its producer cut by place. A depthwise kernel follows the 1x1 conv that usually feeds
 * it (whose input of C channels outweighs its C x channels weights where the map is larger
 * than the depthwise's channel count). Measured on mobilenet_v2-style blocks at 2 threads:
 * 56x56 maps 2.10 -> 1.71 ms by place, 14x14 maps 1.57 -> 1.76 ms (so they stay by group). */
static inline int ember_conv_cuts_by_place(const ember_conv_p* p, int32_t lanes) {
  const int64_t map = (int64_t)p->h * p->w;
  return p->depthwise ? map > (int64_t)p->ocb * lanes
                      : map * p->groups > (int64_t)p->ocb_g * lanes * p->kh * p->kw;
}

/* Task `task` of `tasks` runs its share of the output's places (image, row, strip), every
 * block group of each: the items in order 1 (groups innermost) cut by work. A task so reads
 * the places that the previous kernel's task of the same number wrote, in its own core's
 * cache (thread_pool.h gives a thread the same task number each launch; the kernels all cut
 * by place where ember_conv_cuts_by_place says so). Cut by block groups, each task read
 * half of its input from the other core's cache: on a 2-vCPU EPYC virtual machine a cache
 * line takes ~215 ns to cross between the cores, and with both threads running at once
 * mobilenet_v2's kernels took 1.37x their one-thread CPU time summed over the two. A kernel
 * planned in order 0 (a group's weights reused over all places) runs the whole places of its
 * share group by group, the part places at its two ends item by item. */
static inline void ember_conv_place_share(ember_conv_p* q, int64_t task, int64_t tasks,
                                          ember_conv_range_fn run) {
  const int32_t order = q->order;
  const int64_t G = ember_conv_block_groups(q);
  const int64_t per_image = (int64_t)q->oh * ((q->ow + q->strip - 1) / q->strip);
  int64_t lo, hi, u0, u1, og;
  q->order = 1;
  lo = ember_conv_task_start(q, task, tasks);
  hi = ember_conv_task_start(q, task + 1, tasks);
  u0 = (lo + G - 1) / G; /* the share's whole places: [u0, u1) */
  u1 = hi / G;
  if (order == 1 || u0 >= u1) {
    run(q, lo, hi);
    return;
  }
  run(q, lo, u0 * G);
  run(q, u1 * G, hi);
  q->order = 0; /* items (image, group, row, strip): a group's places of one image in a run */
  while (u0 < u1) {
    const int64_t b = u0 / per_image, end = (b + 1) * per_image < u1 ? (b + 1) * per_image : u1;
    for (og = 0; og < G; ++og) {
      const int64_t first = (b * G + og - b) * per_image; /* item of (b, og, place 0) - b's */
      run(q, first + u0, first + end);
    }
    u0 = end;
  }
}

/* One task's share of a conv launch: its run of places (by_place) or of items. */
static inline void ember_conv_task_run(ember_conv_p* q, int task_id, int64_t n, int by_place,
                                       ember_conv_range_fn run) {
  q->strip = ember_conv_task_strip(q, n, by_place);
  if (by_place) {
    ember_conv_place_share(q, task_id, n, run);
  } else {
    run(q, ember_conv_task_start(q, task_id, n), ember_conv_task_start(q, task_id + 1, n));
  }
}

/* Whether the dense kernel packs the input of each strip: a 1x1 conv (one input column per
 * output column) with many input channel blocks, looping over its output blocks innermost
 * (each packed strip then serves every block group). In NCHW[L]c the channel blocks of a
 * column lie a whole plane apart (128 KiB for a 64x64 map): a tile's loads then walk one
 * cache set (a power-of-two plane) or a new page per block, and a 1024-channel strip missed
 * L1 and L2 on every block (SegFormer's 1x1 1024->256 at 64x64: 5x onnxruntime's time).
 * Packed, a strip is one contiguous [block][column][CB] run. Only where the input overflows
 * the L2 (EMBER_CONV_PACK_MIN_BYTES) and at least EMBER_CONV_PACK_MIN_GROUPS block groups
 * read each strip: a small map's input stays in the L2 anyway, and with few groups the copy
 * costs more than it saves (MobileNetV2's 576->96 at 14x14: 276 -> 247 us unpacked; 144->24
 * at 56x56, two block groups: 420 -> 330 us). Not for groups (rare for 1x1) nor for a plain
 * NCHW input (CB = 1: its tiles read one channel per tap anyway). */
#define EMBER_CONV_PACK_MIN_BLOCKS 16
#define EMBER_CONV_PACK_MIN_GROUPS 4
#define EMBER_CONV_PACK_MIN_BYTES (512 * 1024)
static inline int ember_conv_packs(const ember_conv_p* p) {
  const int64_t in_bytes = (int64_t)p->icb * p->h * p->w * p->cb * (int64_t)sizeof(float);
  return !p->depthwise && p->kh == 1 && p->kw == 1 && p->groups == 1 && p->order == 1 &&
         p->cb > 1 && p->icb_g >= EMBER_CONV_PACK_MIN_BLOCKS &&
         (p->ocb_g + p->rb - 1) / p->rb >= EMBER_CONV_PACK_MIN_GROUPS &&
         in_bytes > EMBER_CONV_PACK_MIN_BYTES;
}

/* Rows and columns of the zero-padded input copy of the small-map tiles
 * (conv_nchwc_flat_impl.h): every tap of every output position. */
static inline int32_t ember_conv_flat_hp(const ember_conv_p* p) {
  return (p->oh - 1) * p->sh + (p->kh - 1) * p->dh + 1;
}
static inline int32_t ember_conv_flat_wp(const ember_conv_p* p) {
  return (p->ow - 1) * p->sw + p->kw;
}

/* The output columns [xi0, xi1) whose taps all fall inside the image, within [x0, x1). */
static inline void ember_conv_interior(const ember_conv_p* p, int32_t x0, int32_t x1,
                                       int32_t* xi0, int32_t* xi1) {
  const int32_t span = (p->kw - 1) * p->dw;
  int32_t a = ember_div_nonneg(p->pl + p->sw - 1, p->sw);
  int32_t b = p->w - 1 + p->pl - span >= 0
                  ? ember_div_nonneg(p->w - 1 + p->pl - span, p->sw) + 1 : 0;
  a = a < x0 ? x0 : (a > x1 ? x1 : a);
  b = b > x1 ? x1 : (b < a ? a : b);
  *xi0 = a;
  *xi1 = b;
}

/* The input pointer of each of the RW columns of a tile for one kernel tap: columns whose
 * tap falls in the padding read zeros instead (padding handled here, no padded copy). */
#define EMBER_TILE_COLUMNS(RW, col, rowk, ixk, stride, cb, interior)                           \
  if (interior) {                                                                              \
    EMBER_KUNROLL for (j = 0; j < RW; ++j)                                                      \
      col[j] = p->in + ((rowk) + (ptrdiff_t)((ixk) + j * (stride)) * (cb));                    \
  } else {                                                                                     \
    EMBER_KUNROLL for (j = 0; j < RW; ++j) {                                                    \
      int32_t ix_ = (ixk) + j * (stride);                                                      \
      col[j] = ix_ >= 0 && ix_ < p->w ? p->in + ((rowk) + (ptrdiff_t)ix_ * (cb))               \
                                      : ember_conv_zeros;                                      \
    }                                                                                          \
  }

/* Plain C99 reference of the whole call, any lane count: the portable path. */
static inline void ember_conv_portable(const ember_conv_p* p, int32_t lanes, int64_t lo,
                                       int64_t hi) {
  int64_t item;
  for (item = lo; item < hi; ++item) {
    int32_t b, og, oy, s, ob, ob1, ox, l, ic, ky, kx;
    ember_conv_item(p, item, &b, &og, &oy, &s);
    if (p->depthwise) {
      ob = og;
      ob1 = og + 1;
    } else {
      ob = ember_conv_blocks(p, og, &ob1);
      ob1 += ob;
    }
    for (; ob < ob1; ++ob) {
      int32_t g = p->depthwise ? 0 : ob / p->ocb_g;
      int32_t x1 = (s + 1) * p->strip < p->ow ? (s + 1) * p->strip : p->ow;
      for (ox = s * p->strip; ox < x1; ++ox) {
        size_t o = ((((size_t)b * p->ocb + ob) * p->oh + oy) * p->ow + ox) * lanes;
        for (l = 0; l < lanes; ++l) {
          float acc = p->bias[ob * lanes + l], v;
          int32_t nic = p->depthwise ? 1 : p->icb_g * p->cb;
          for (ic = 0; ic < nic; ++ic) {
            for (ky = 0; ky < p->kh; ++ky) {
              int32_t iy = oy * p->sh - p->pt + ky * p->dh;
              if (iy < 0 || iy >= p->h) continue;
              for (kx = 0; kx < p->kw; ++kx) {
                int32_t ix = ox * p->sw - p->pl + kx * p->dw;
                size_t xi, wi;
                if (ix < 0 || ix >= p->w) continue;
                if (p->depthwise) {
                  xi = ((((size_t)b * p->icb + ob) * p->h + iy) * p->w + ix) * lanes + l;
                  wi = (((size_t)ob * p->kh + ky) * p->kw + kx) * lanes + l;
                } else {
                  int32_t cbk = ic / p->cb, c = ic % p->cb;
                  xi = ((((size_t)b * p->icb + g * p->icb_g + cbk) * p->h + iy) * p->w + ix) *
                           p->cb + c;
                  wi = (((((size_t)ob * p->icb_g + cbk) * p->kh + ky) * p->kw + kx) * p->cb +
                        c) * lanes + l;
                }
                acc += p->in[xi] * p->wt[wi];
              }
            }
          }
          v = acc;
          if (!(p->flags & EMBER_EPI_RESIDUAL)) {
            v = ember_act_scalar(v, p->act, p->lo, p->hi);
          } else if (p->flags & EMBER_EPI_ACT_AFTER_ADD) {
            v = ember_act_scalar(v + p->res[o + l], p->act, p->lo, p->hi);
          } else {
            v = ember_act_scalar(v, p->act, p->lo, p->hi) + p->res[o + l];
          }
          p->out[o + l] = v;
        }
      }
    }
  }
}

#define EMBER_EACH_LANES_IMPL "ember/kernels/conv_nchwc_impl.h"
#include "ember/kernels/each_lanes.h"
#endif /* EMBER_KERNEL_BODIES */

#endif /* EMBER_KERNELS_CONV_NCHWC_H_ */
