/*!
 * \file ember/kernels/layout_nchwc.h
 * \brief layout_transform between NCHW and the blocked NCHW[L]c (any block L) as a blocked
 *        copy: each channel block is an L x HW matrix in NCHW and its transpose, HW x L, in
 *        NCHW[L]c. It is copied in tiles of EMBER_LAYOUT_TILE positions, so that the L source
 *        (or destination) rows of a tile and the tile's L x TILE block stay in L1, and the
 *        inner loops run over unit-stride rows (the generic lowering computed one output
 *        element at a time, with a division and a modulo per position: 2-4x slower).
 *
 * Entry point: ember_layout_nchwc(in, out, n, c, hw, block, to_blocked, threads), c the
 * channels of the NCHW side; to_blocked 1: NCHW -> NCHW[L]c, 0: the reverse. The blocked side
 * has ceil(c / L) blocks: when c is not a multiple of L, the last block's lanes past c are
 * written as zeros (to NCHW[L]c; an 8x8 register block loads zero rows for them) or dropped
 * (from NCHW[L]c). Work items (batch x channel block x position tile) are split over
 * TVMBackendParallelLaunch's tasks when `threads` is set. Returns 0.
 *
 * Entry point: ember_layout_nhwc(in, out, n, c, hw, block, to_blocked, threads): the same
 * between channels-last (N, HW, C: NHWC, or a transformer's tokens N x positions x C) and
 * NCHW[L]c. Position p of channel block b is L contiguous floats on both sides
 * (out[n][p][b * L + l] = in[n][b][p][l]), so the copy is one L-float move per (position,
 * block), in the order that writes the destination contiguously; no transposition at all
 * (composing NCHW[L]c -> NCHW with a transpose to tokens read one float per cache line); a
 * padded last block as for NCHW.
 */
#ifndef EMBER_KERNELS_LAYOUT_NCHWC_H_
#define EMBER_KERNELS_LAYOUT_NCHWC_H_

#include <stddef.h>
#include <stdint.h>

#include "ember/kernels/linkage.h"

/* The entry point (linkage and where its body comes from: ember/kernels/linkage.h). */
EMBER_KENTRY int32_t ember_layout_nchwc(const float* in, float* out, int32_t n, int32_t c, int32_t hw, int32_t block, int32_t to_blocked, int32_t threads);
EMBER_KENTRY int32_t ember_layout_nhwc(const float* in, float* out, int32_t n, int32_t c, int32_t hw, int32_t block, int32_t to_blocked, int32_t threads);

#if EMBER_KERNEL_BODIES
#include "ember/c_backend_api.h"

#if defined(__AVX__) && !defined(EMBER_KERNELS_PORTABLE)
#include <immintrin.h>
#define EMBER_LAYOUT_AVX 1

/* Transpose the 8x8 block of rows src[k * ss] (k < 8) into dst[k * ds]: unpack, shuffle,
 * then swap 128-bit halves (24 shuffles for 64 floats). For a padded last channel block,
 * source rows k >= `loads` read as zeros (to NCHW[L]c) and destination rows k >= `stores`
 * are not written (from NCHW[L]c); whole blocks pass the constants 8, 8. Always inlined (as
 * ember_layout_copy): the callers' constant block sizes and row counts must fold into the
 * copy loops (GCC stops inlining a function this size once it has many callers). */
EMBER_ALWAYS_INLINE void ember_layout_t8(const float* src, size_t ss, float* dst, size_t ds,
                                         int32_t loads, int32_t stores) {
  __m256 r[8], t[8], u[8];
  int k;
  for (k = 0; k < 8; ++k) r[k] = k < loads ? _mm256_loadu_ps(src + k * ss) : _mm256_setzero_ps();
  for (k = 0; k < 8; k += 2) {
    t[k] = _mm256_unpacklo_ps(r[k], r[k + 1]);
    t[k + 1] = _mm256_unpackhi_ps(r[k], r[k + 1]);
  }
  for (k = 0; k < 8; k += 4) {
    u[k] = _mm256_shuffle_ps(t[k], t[k + 2], _MM_SHUFFLE(1, 0, 1, 0));
    u[k + 1] = _mm256_shuffle_ps(t[k], t[k + 2], _MM_SHUFFLE(3, 2, 3, 2));
    u[k + 2] = _mm256_shuffle_ps(t[k + 1], t[k + 3], _MM_SHUFFLE(1, 0, 1, 0));
    u[k + 3] = _mm256_shuffle_ps(t[k + 1], t[k + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (k = 0; k < 4; ++k) {
    if (k < stores) _mm256_storeu_ps(dst + k * ds, _mm256_permute2f128_ps(u[k], u[k + 4], 0x20));
    if (k + 4 < stores) {
      _mm256_storeu_ps(dst + (k + 4) * ds, _mm256_permute2f128_ps(u[k], u[k + 4], 0x31));
    }
  }
}
#else
#define EMBER_LAYOUT_AVX 0
#endif

/* Positions per tile: L x 64 floats (2 KiB at L = 8) of destination per tile, in L1. */
#define EMBER_LAYOUT_TILE 64

/*! \brief One layout copy (sizes in elements). */
typedef struct {
  const float* in;
  float* out;
  int32_t n, c, hw, block, to_blocked;
  int32_t last; /* the other side is channels-last (ember_layout_nhwc), not NCHW */
} ember_layout_p;

static inline int64_t ember_layout_blocks(const ember_layout_p* p) {
  return (p->c + p->block - 1) / p->block;
}

/* Work items: (batch x channel block, position tile) for NCHW; (batch, position tile) for
 * channels-last, whose tile moves every block. */
static inline int64_t ember_layout_items(const ember_layout_p* p) {
  int64_t tiles = (p->hw + EMBER_LAYOUT_TILE - 1) / EMBER_LAYOUT_TILE;
  return (int64_t)p->n * (p->last ? 1 : ember_layout_blocks(p)) * tiles;
}

/* Items [lo, hi): (plane = batch x channel block, position tile). The block's L rows of one
 * tile are read (or written) row by row at unit stride; the other side is the tile's
 * contiguous L x TILE block. A last block with rows < L channels present: to NCHW[L]c its
 * other lanes get zeros, from NCHW[L]c they are not read. */
EMBER_ALWAYS_INLINE void ember_layout_copy(const ember_layout_p* p, int64_t lo, int64_t hi,
                                           const int32_t L, const int padded) {
  const int64_t tiles = (p->hw + EMBER_LAYOUT_TILE - 1) / EMBER_LAYOUT_TILE;
  const int64_t blocks = ember_layout_blocks(p);
  int64_t item;
  for (item = lo; item < hi; ++item) {
    const int64_t plane = item / tiles, g0 = padded ? plane % blocks : 0;
    const int32_t p0 = (int32_t)(item % tiles) * EMBER_LAYOUT_TILE;
    const int32_t p1 = p0 + EMBER_LAYOUT_TILE < p->hw ? p0 + EMBER_LAYOUT_TILE : p->hw;
    const int32_t rows = padded && p->c - (int32_t)g0 * L < L ? p->c - (int32_t)g0 * L : L;
    /* its L x hw block in NCHW[L]c, and the block's first row in NCHW (the same offset
     * when c % L == 0; the divisions only when not) */
    const size_t blk = (size_t)plane * L * p->hw;
    const size_t flat = padded ? ((size_t)(plane / blocks) * p->c + (size_t)g0 * L) * p->hw : blk;
    int32_t k, x, q = p0; /* positions [p0, q): done as whole 8x8 blocks */
#if EMBER_LAYOUT_AVX
    if (L % 8 == 0 && rows == L) { /* whole 8x8 blocks in registers (L / 8 per 8
                                    * positions); the rest of the tile below */
      int32_t g;
      for (; q + 8 <= p1; q += 8) {
        for (g = 0; g < L; g += 8) {
          const size_t at = flat + (size_t)g * p->hw + q, cols = blk + (size_t)q * L + g;
          if (p->to_blocked) {
            ember_layout_t8(p->in + at, (size_t)p->hw, p->out + cols, (size_t)L, 8, 8);
          } else {
            ember_layout_t8(p->in + cols, (size_t)L, p->out + at, (size_t)p->hw, 8, 8);
          }
        }
      }
    } else if (L % 8 == 0) { /* a padded last block: the rows g.. of its 8-row groups that
                              * are present (rows - g, none when <= 0) */
      int32_t g;
      for (; q + 8 <= p1; q += 8) {
        for (g = 0; g < L; g += 8) {
          const size_t at = flat + (size_t)(rows > g ? g : 0) * p->hw + q;
          const size_t cols = blk + (size_t)q * L + g;
          if (p->to_blocked) { /* zeros for the absent rows */
            ember_layout_t8(p->in + at, (size_t)p->hw, p->out + cols, (size_t)L, rows - g, 8);
          } else if (rows > g) { /* the absent rows are not written */
            ember_layout_t8(p->in + cols, (size_t)L, p->out + at, (size_t)p->hw, 8, rows - g);
          }
        }
      }
    }
#endif
    if (p->to_blocked) {
      for (k = 0; k < rows; ++k) {
        const float* src = p->in + flat + (size_t)k * p->hw;
        float* dst = p->out + blk + k;
        for (x = q; x < p1; ++x) dst[(size_t)x * L] = src[x];
      }
      for (; k < L; ++k) {
        float* dst = p->out + blk + k;
        for (x = q; x < p1; ++x) dst[(size_t)x * L] = 0.0f;
      }
    } else {
      for (k = 0; k < rows; ++k) {
        const float* src = p->in + blk + k;
        float* dst = p->out + flat + (size_t)k * p->hw;
        for (x = q; x < p1; ++x) dst[x] = src[(size_t)x * L];
      }
    }
  }
}

/* Channels-last <-> NCHW[L]c, items [lo, hi): (batch, position tile). For each position the
 * ceil(c / L) blocks are moved in channel order, so the channels-last side is walked
 * contiguously and the blocked side as unit-stride streams, one per block plane. A padded last
 * block (c % L channels present) gets zeros in its other lanes, or loses them on the way back. */
static inline void ember_layout_last_copy(const ember_layout_p* p, int64_t lo, int64_t hi,
                                          const int32_t L) {
  const int64_t tiles = (p->hw + EMBER_LAYOUT_TILE - 1) / EMBER_LAYOUT_TILE;
  const int32_t whole = p->c / L, tail = p->c - whole * L;
  const size_t plane = (size_t)p->hw * L; /* one channel block of the blocked side */
  int64_t item;
  for (item = lo; item < hi; ++item) {
    const int64_t batch = item / tiles;
    const int32_t p0 = (int32_t)(item % tiles) * EMBER_LAYOUT_TILE;
    const int32_t p1 = p0 + EMBER_LAYOUT_TILE < p->hw ? p0 + EMBER_LAYOUT_TILE : p->hw;
    const size_t last0 = (size_t)batch * p->c * p->hw;
    const size_t blocked0 = (size_t)batch * (size_t)(whole + (tail > 0)) * plane;
    int32_t x, b, l;
    for (x = p0; x < p1; ++x) {
      const size_t last = last0 + (size_t)x * p->c, blocked = blocked0 + (size_t)x * L;
      for (b = 0; b < whole; ++b) {
        if (p->to_blocked) {
          for (l = 0; l < L; ++l) p->out[blocked + b * plane + l] = p->in[last + b * L + l];
        } else {
          for (l = 0; l < L; ++l) p->out[last + b * L + l] = p->in[blocked + b * plane + l];
        }
      }
      if (tail > 0) { /* the padded last block */
        const size_t at = blocked + (size_t)whole * plane;
        if (p->to_blocked) {
          for (l = 0; l < tail; ++l) p->out[at + l] = p->in[last + (size_t)whole * L + l];
          for (; l < L; ++l) p->out[at + l] = 0.0f;
        } else {
          for (l = 0; l < tail; ++l) p->out[last + (size_t)whole * L + l] = p->in[at + l];
        }
      }
    }
  }
}

/* The copy with the common blocks as constants (unrolled, vectorised inner loops): the SIMD
 * lanes, and 3, the block of an RGB input that a network's first conv reads whole. A padded
 * last block has its own instances (the whole-block ones keep no per-block row count). */
static inline void ember_layout_range(const ember_layout_p* p, int64_t lo, int64_t hi) {
  if (p->last) {
    switch (p->block) {
      case 4: ember_layout_last_copy(p, lo, hi, 4); return;
      case 8: ember_layout_last_copy(p, lo, hi, 8); return;
      case 16: ember_layout_last_copy(p, lo, hi, 16); return;
      default: ember_layout_last_copy(p, lo, hi, p->block); return;
    }
  }
  if (p->c % p->block) {
    switch (p->block) {
      case 8: ember_layout_copy(p, lo, hi, 8, 1); return;
      case 16: ember_layout_copy(p, lo, hi, 16, 1); return;
      default: ember_layout_copy(p, lo, hi, p->block, 1); return;
    }
  }
  switch (p->block) {
    case 3: ember_layout_copy(p, lo, hi, 3, 0); return;
    case 4: ember_layout_copy(p, lo, hi, 4, 0); return;
    case 8: ember_layout_copy(p, lo, hi, 8, 0); return;
    case 16: ember_layout_copy(p, lo, hi, 16, 0); return;
    default: ember_layout_copy(p, lo, hi, p->block, 0); return;
  }
}

static inline int ember_layout_task(int task_id, TVMParallelGroupEnv* penv, void* cdata) {
  const ember_layout_p* p = (const ember_layout_p*)cdata;
  const int64_t total = ember_layout_items(p), n = penv->num_task > 0 ? penv->num_task : 1;
  ember_layout_range(p, total * task_id / n, total * (task_id + 1) / n);
  return 0;
}

static inline int32_t ember_layout_run(const float* in, float* out, int32_t n, int32_t c,
                                       int32_t hw, int32_t block, int32_t to_blocked,
                                       int32_t threads, int32_t last) {
  ember_layout_p p;
  p.in = in; p.out = out; p.n = n; p.c = c; p.hw = hw; p.block = block;
  p.to_blocked = to_blocked; p.last = last;
  if (threads) return TVMBackendParallelLaunch(ember_layout_task, &p, 0);
  ember_layout_range(&p, 0, ember_layout_items(&p));
  return 0;
}

#if EMBER_KERNEL_ALL || defined(EMBER_KOBJ_ember_layout_nchwc)
EMBER_KENTRY int32_t ember_layout_nchwc(const float* in, float* out, int32_t n, int32_t c, int32_t hw, int32_t block, int32_t to_blocked, int32_t threads) {
  return ember_layout_run(in, out, n, c, hw, block, to_blocked, threads, 0);
}
#endif

#if EMBER_KERNEL_ALL || defined(EMBER_KOBJ_ember_layout_nhwc)
EMBER_KENTRY int32_t ember_layout_nhwc(const float* in, float* out, int32_t n, int32_t c, int32_t hw, int32_t block, int32_t to_blocked, int32_t threads) {
  return ember_layout_run(in, out, n, c, hw, block, to_blocked, threads, 1);
}
#endif
#endif /* EMBER_KERNEL_BODIES */

#endif /* EMBER_KERNELS_LAYOUT_NCHWC_H_ */
