/*
 * ember kernels: int8 2-D convolution (NCHW) with a fused requantizing epilogue, the kernel of
 * nn.contrib_qconv2d (ONNX QLinearConv):
 *
 *   acc[o, p] = bias[o] + sum_k u[k, p] * w[o, k] - (has_w_zp ? w_zp[o] * sum_k u[k, p] : 0)
 *   y[o, p]   = clamp(round_half_even(acc[o, p] * scale[o]) + y_zp, y_lo, y_hi)
 *
 * over k = (input channel of o's group, ky, kx) and output pixels p ([y_lo, y_hi]: the output
 * type's range, or less where a relu or clip was folded in), where u is the input as
 * u8 (an s8 input has 128 added, x_signed) and padding reads x_zp (the input's zero point in
 * that u8 view). The zero points' other terms depend only on the weights and are folded into
 * bias at build time (topi/nn/qconv.py), so the products are plain u8 x s8 -> s32 (vpdpbusd
 * with VNNI; qsimd.h). int32 accumulation is exact: results equal onnxruntime's.
 *
 * w is prepacked at build time as (groups, ocb, k4, 4, 4) int8: output channels of a group in
 * blocks of EMBER_QCONV_MR = 4 (zero rows past the group's count), k ordered (ky, kx, input
 * channel) with the group's channels padded to a multiple of 4 (zeros), in quads: a quad is
 * four channels of one tap, which the panel gathers as one u32 word per pixel.
 * A work item is (image, group, block of at most EMBER_QCONV_PB output pixels, the blocks of
 * a map alike in size): its input window is
 * gathered once into a panel [k4][pixel][4] (u8) in which vectors run along pixels, and every
 * 4-channel block of the group reads it; the output is stored along pixels (NCHW rows; with
 * AVX-512 VBMI four vectors of bytes to a store). Tasks (TVMBackendParallelLaunch, when
 * `parallel`) share the (item, 4-channel block) units by pixel count.
 * Depthwise convs (one input and one output channel per group) take a direct path instead:
 * with AVX-512 VBMI, taps four at a time as u8 x s8 quads gathered by byte permutes from the
 * NCHW rows (qconv_dwq.h); otherwise (qconv_dw.h) with AVX-512 (maps up to about 128x128), 16
 * channels in the lanes of each vector, or a channel at a time, its zero-point-padded plane
 * split into stride phases so that each tap is one offset into it and the channel one vector
 * loop (at stride 1 with symmetric width padding, no plane); taps two at a time as int16 pair
 * products; depthwise items (image, channel or block of 16 channels) split over the tasks.
 * With `res` (not NULL: nn.contrib_qconv2d_add, a QLinearAdd of the conv's output and a
 * residual folded in), each work unit's outputs y, as soon as they are written, become
 *
 *   s = clamp(round_half_even((y - y_zp) * ra + (res - r_zp) * rb) + s_zp, s_lo, s_hi)
 *
 * in place, by the elementwise kernel of qadd.h on that unit's rows (y: the conv's output,
 * s8 where y_signed; res: s8 where r_signed; s: the sum's type): the values the separate
 * kernel gives, without the conv's output going out to memory and back.
 * Returns 0, or -1 when a workspace or the parallel launch fails.
 */
#ifndef EMBER_KERNELS_QCONV_H_
#define EMBER_KERNELS_QCONV_H_

#include <stdint.h>

#include "ember/kernels/linkage.h"

/* The entry point (linkage and where its body comes from: ember/kernels/linkage.h). */
#define EMBER_QCONV2D_PARAMS                                                                       \
  const void *x, const int8_t *w, const int32_t *bias, const int32_t *w_zp, const float *scale,    \
      void *y, int64_t n, int64_t c, int64_t h, int64_t wd, int64_t o, int64_t oh, int64_t ow,    \
      int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t ph, int64_t pw, int64_t dh,         \
      int64_t dw, int64_t groups, int32_t x_signed, int32_t x_zp, int32_t has_w_zp, int32_t y_zp, \
      int32_t y_lo, int32_t y_hi, int32_t parallel, const void *res, float ra, float rb,         \
      int32_t y_signed, int32_t r_signed, int32_t r_zp, int32_t s_zp, int32_t s_lo, int32_t s_hi
EMBER_KENTRY int32_t ember_qconv2d(EMBER_QCONV2D_PARAMS);

#if EMBER_KERNEL_BODIES
#include "ember/c_backend_api.h"
#include "ember/kernels/qadd.h"
#include "ember/kernels/qsimd.h"

#define EMBER_QCONV_MR 4  /* output channels per register tile (the packed weights' block) */
#define EMBER_QCONV_PB 96 /* output pixels per work item (a multiple of every tile's width) */
#if defined(EMBER_Q_VNNI)
#define EMBER_QCONV_NB 6 /* pixel vectors per tile: 4 x 6 accumulators of 32 zmm */
#else
#define EMBER_QCONV_NB 3 /* 4 x 3 accumulators of 16 ymm */
#endif
#define EMBER_QCONV_TW (EMBER_QCONV_NB * EMBER_QL) /* pixels per tile */
#if defined(EMBER_Q_VNNI)
#define EMBER_QCONV_KC 64 /* quads per range at most: a panel of 24 KiB (half the L1 cache) */
#define EMBER_QCONV_KC_BYTES 65536 /* ... where a block's quads take more than this */
#else
#define EMBER_QCONV_KC 0 /* all the quads in one range */
#endif
/* a tile's loops over its rows and vectors unrolled whatever -O3 weighs: indexed by a loop
 * variable, the accumulators would go through the stack */
#if defined(__clang__)
#define EMBER_QCONV_UNROLL _Pragma("unroll")
#else
#define EMBER_QCONV_UNROLL _Pragma("GCC unroll 8")
#endif

typedef struct {
  const uint8_t* x;
  const int8_t* w;
  const int32_t *bias, *w_zp;
  const float* scale;
  uint8_t* y;
  int64_t n, c, h, wd, o, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw, groups;
  int64_t cg, og, k, k4, ocb, p, pblocks;
  int64_t pb; /* pixels per block: whole vectors, at most EMBER_QCONV_PB */
  int64_t kc; /* quads per range (ember_qconv_item) */
  int64_t hp, wp; /* the interleaved plane's height and width (padding included) */
  int32_t direct; /* 1x1, stride 1, no padding: the plane is the panel */
  int32_t lanes;  /* a depthwise conv with channels in vector lanes (small maps) */
  int32_t dwq;    /* a depthwise conv on u8 x s8 quads (qconv_dwq.h) */
  uint8_t flip, x_zp;
  int32_t has_w_zp, y_zp, y_lo, y_hi;
  const ember_qadd_args* add; /* the residual add after the conv (ember_qconv_add), or NULL */
} ember_qconv_args;

/* The residual add on channels [c0, c1) of image b, pixels [p0, p0 + cnt) of each. */
static inline void ember_qconv_add(const ember_qconv_args* a, int64_t b, int64_t c0, int64_t c1,
                                   int64_t p0, int64_t cnt) {
  int64_t ch;
  for (ch = c0; ch < c1; ++ch) {
    const int64_t at = (b * a->o + ch) * a->p + p0;
    ember_qadd_range(a->add, at, at + cnt);
  }
}

static inline int ember_qconv_depthwise(const ember_qconv_args* a) {
  return a->cg == 1 && a->og == 1;
}

static inline int64_t ember_qconv_items(const ember_qconv_args* a) {
  if (a->lanes) return a->n * ((a->c + EMBER_QL - 1) / EMBER_QL);
  return ember_qconv_depthwise(a) ? a->n * a->c : a->n * a->groups * a->pblocks;
}

#if defined(EMBER_Q_VBMI)
/* ember_qconv_words for n > 0: 64 pixels at a time, the last 64 overlapping (under 64, one
 * round of masked loads and stores), by byte permutes of 64-byte vectors (byte pairs of r0,
 * r1 and of r2, r3, then their words): 8 permutes where the 16-byte interleaves took 32 (a
 * tenth of a 1x1 conv over 32 channels). */
static inline void ember_qconv_words64(const uint8_t* r0, const uint8_t* r1, const uint8_t* r2,
                                       const uint8_t* r3, uint32_t* dst, int64_t n,
                                       uint32_t flip, uint32_t mask) {
  const ember_qc64 iota = {0,  1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15,
                           16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31,
                           32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47,
                           48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63};
  /* pairs: byte 2i + t is byte i of the first source (t = 0) or the second; words: byte
   * 4j + t is byte 2j + t of the first pair vector (t < 2) or 2j + t - 2 of the second */
  const ember_qc64 pairs = (iota >> 1) | ((iota & 1) << 6), words = ((iota >> 2) << 1) |
                                                                    (iota & 1) | ((iota & 2) << 5);
  const ember_qc64 vflip = (ember_qc64)ember_qset1((int32_t)flip);
  const ember_qc64 vmask = (ember_qc64)ember_qset1((int32_t)mask);
  const ember_qc64 zero = {0};
  int64_t x = 0;
  for (;;) {
    /* a row under 64 pixels: masked loads and stores (nothing read or written past n) */
    const unsigned long long m = n >= 64 ? ~0ull : (1ull << n) - 1;
    ember_qc64 b0, b1, b2, b3, p01, p23, w[4];
    int i;
    if (x + 64 > n && n >= 64) x = n - 64;
    b0 = EMBER_QLOADB_MASK(r0 + x, zero, m);
    b1 = EMBER_QLOADB_MASK(r1 + x, zero, m);
    b2 = EMBER_QLOADB_MASK(r2 + x, zero, m);
    b3 = EMBER_QLOADB_MASK(r3 + x, zero, m);
    p01 = EMBER_QPERM2B(b0, pairs, b1);
    p23 = EMBER_QPERM2B(b2, pairs, b3);
    w[0] = EMBER_QPERM2B(p01, words, p23);
    w[1] = EMBER_QPERM2B(p01, words + 32, p23);
    if (n <= 32) { /* a short row: its words in the first two vectors */
      for (i = 0; i < 2; ++i) {
        EMBER_QSTORE32_MASK(dst + 16 * i, (ember_qvi)((w[i] ^ vflip) & vmask),
                            (unsigned short)(n >= 16 * i + 16 ? 0xFFFFu
                                             : n <= 16 * i ? 0u : (1u << (n - 16 * i)) - 1u));
      }
      return;
    }
    p01 = EMBER_QPERM2B(b0, pairs + 32, b1);
    p23 = EMBER_QPERM2B(b2, pairs + 32, b3);
    w[2] = EMBER_QPERM2B(p01, words, p23);
    w[3] = EMBER_QPERM2B(p01, words + 32, p23);
    for (i = 0; i < 4; ++i) {
      if (n >= 64) {
        *(ember_qc64_u*)(dst + x + 16 * i) = (w[i] ^ vflip) & vmask;
      } else if (n > 16 * i) {
        EMBER_QSTORE32_MASK(dst + 16 * i, (ember_qvi)((w[i] ^ vflip) & vmask),
                            (unsigned short)(n >= 16 * i + 16 ? 0xFFFFu
                                                              : (1u << (n - 16 * i)) - 1u));
      }
    }
    x += 64;
    if (x >= n) return;
  }
}
#endif

/* dst[x] = the word of bytes r0[x], r1[x], r2[x], r3[x] (low first), ^ flip, & mask, for
 * x < n: 16 pixels at a time as two rounds of interleaves (bytes, then byte pairs), a tail
 * of n >= 16 as the last 16 again (overlapping: a 28-pixel row's 12 in scalar code took a
 * tenth of a 3x3/2 conv's time). */
static inline void ember_qconv_words(const uint8_t* r0, const uint8_t* r1, const uint8_t* r2,
                                     const uint8_t* r3, uint32_t* dst, int64_t n, uint32_t flip,
                                     uint32_t mask) {
  int64_t x = 0;
#if defined(EMBER_Q_VBMI)
  if (n > 0) ember_qconv_words64(r0, r1, r2, r3, dst, n, flip, mask);
  return;
#endif
#if defined(EMBER_Q_VECTOR_EXT)
  const ember_qw4 zw = {0}, vflip = zw + flip, vmask = zw + mask;
  for (; x < n && n >= 16; x = x + 32 <= n ? x + 16 : x < n - 16 ? n - 16 : n) {
    ember_qb16 b0, b1, b2, b3, lo01, hi01, lo23, hi23;
    ember_qw4 w[4];
    int i;
    memcpy(&b0, r0 + x, 16);
    memcpy(&b1, r1 + x, 16);
    memcpy(&b2, r2 + x, 16);
    memcpy(&b3, r3 + x, 16);
    lo01 = EMBER_QSHUF16(b0, b1, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    hi01 = EMBER_QSHUF16(b0, b1, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
    lo23 = EMBER_QSHUF16(b2, b3, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    hi23 = EMBER_QSHUF16(b2, b3, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
    w[0] = (ember_qw4)EMBER_QSHUF8H((ember_qh8)lo01, (ember_qh8)lo23, 0, 8, 1, 9, 2, 10, 3, 11);
    w[1] = (ember_qw4)EMBER_QSHUF8H((ember_qh8)lo01, (ember_qh8)lo23, 4, 12, 5, 13, 6, 14, 7, 15);
    w[2] = (ember_qw4)EMBER_QSHUF8H((ember_qh8)hi01, (ember_qh8)hi23, 0, 8, 1, 9, 2, 10, 3, 11);
    w[3] = (ember_qw4)EMBER_QSHUF8H((ember_qh8)hi01, (ember_qh8)hi23, 4, 12, 5, 13, 6, 14, 7, 15);
    for (i = 0; i < 4; ++i) {
      w[i] = (w[i] ^ vflip) & vmask;
      memcpy(dst + x + 4 * i, &w[i], 16);
    }
  }
#endif
  for (; x < n; ++x) {
    dst[x] = (((uint32_t)r0[x] | (uint32_t)r1[x] << 8 | (uint32_t)r2[x] << 16 |
               (uint32_t)r3[x] << 24) ^ flip) & mask;
  }
}

/* Rows [y0, y1) of the input of group g of image b as u32 words xq[cq][hp][wp], zero-point
 * padded: word (cq, y, x) holds input channels 4 cq .. 4 cq + 3 of the group at (y - ph,
 * x - pw) in its bytes (u8 view; zero bytes past the group's channels). Each input byte is
 * combined once; the panels then copy words. An unpadded plane (no padding, nothing cropped)
 * is one run. A task builds the rows its pixels read (both of two tasks built all of a
 * 112x112 map's: a third of a 1x1 conv over 32 channels). */
static void ember_qconv_interleave(const ember_qconv_args* a, int64_t b, int64_t g,
                                   int64_t y0, int64_t y1, uint32_t* xq) {
  const int64_t cq4 = (a->cg + 3) / 4;
  const int64_t cols = a->wd < a->wp - a->pw ? a->wd : a->wp - a->pw;
  const int flat = a->ph == 0 && a->pw == 0 && a->hp == a->h && a->wp == a->wd;
  int64_t cq, y, x, j;
  for (cq = 0; cq < cq4; ++cq) {
    const int64_t c0 = cq * 4, real = a->cg - c0 < 4 ? a->cg - c0 : 4;
    const uint32_t mask = real == 4 ? 0xFFFFFFFFu : ((1u << (8 * real)) - 1u);
    const uint32_t zpw = (uint32_t)a->x_zp * 0x01010101u & mask;
    const uint32_t flip = (uint32_t)a->flip * 0x01010101u & mask;
    const uint8_t* planes[4];
    for (j = 0; j < 4; ++j) {
      const int64_t ci = g * a->cg + c0 + (j < real ? j : 0);
      planes[j] = a->x + (b * a->c + ci) * a->h * a->wd;
    }
    if (flat) {
      const int64_t off = y0 * a->wd;
      ember_qconv_words(planes[0] + off, planes[1] + off, planes[2] + off, planes[3] + off,
                        xq + cq * a->hp * a->wp + off, (y1 - y0) * a->wd, flip, mask);
      continue;
    }
    for (y = y0; y < y1; ++y) {
      const int64_t sy = y - a->ph, off = sy * a->wd;
      uint32_t* dst = xq + (cq * a->hp + y) * a->wp;
      if (sy < 0 || sy >= a->h) {
        for (x = 0; x < a->wp; ++x) dst[x] = zpw;
        continue;
      }
      for (x = 0; x < a->pw; ++x) dst[x] = zpw;
      ember_qconv_words(planes[0] + off, planes[1] + off, planes[2] + off, planes[3] + off,
                        dst + a->pw, cols, flip, mask);
      for (x = a->pw + cols; x < a->wp; ++x) dst[x] = zpw;
    }
  }
}

/* d[i] = src[i] for i < n, a vector at a time (a copy of n words was a libc call per run
 * and quad), the tail under a mask with AVX-512. Reads up to a vector past src[n - 1]. */
static inline void ember_qconv_copy(const uint32_t* src, uint32_t* d, int64_t n) {
  int64_t i = 0;
#if defined(EMBER_Q_VECTOR_EXT)
  for (; i + EMBER_QL <= n; i += EMBER_QL) {
    const ember_qvi v = ember_qload(src + i);
    memcpy(d + i, &v, sizeof v);
  }
#if defined(EMBER_Q_VNNI)
  if (i < n) {
    EMBER_QSTORE32_MASK(d + i, ember_qload(src + i), (unsigned short)((1u << (n - i)) - 1u));
    return;
  }
#endif
#endif
  for (; i < n; ++i) d[i] = src[i];
}

#if defined(EMBER_Q_VNNI)
/* d[i] = src[2 i] for i < n: two vectors' even words in one shuffle (vpermt2d), the last
 * vector stored under a mask. Reads up to 31 words past src[2 (n - 1)] (the plane's slack). */
static inline void ember_qconv_evens(const uint32_t* src, uint32_t* d, int64_t n) {
  int64_t i;
  for (i = 0; i < n; i += EMBER_QL) {
    const ember_qvi even = EMBER_QEVENS(ember_qload(src + 2 * i),
                                        ember_qload(src + 2 * i + EMBER_QL));
    if (n - i >= EMBER_QL) {
      memcpy(d + i, &even, sizeof even);
    } else {
      EMBER_QSTORE32_MASK(d + i, even, (unsigned short)((1u << (n - i)) - 1u));
    }
  }
}
#endif

/* The panel of pixels [p0, p0 + cnt) and quads [q0, q1): panel[q - q0][PB] words, quad q =
 * tap q / cq4 (ky, kx) and channel quad q % cq4, copied from the interleaved plane xq (words
 * past cnt to the next whole vector: 0). The block's runs along output rows are found once;
 * the quads then loop without divisions (five per quad, in int64, took a tenth of a 3x3/2
 * conv's time). */
static void ember_qconv_gather(const ember_qconv_args* a, const uint32_t* xq, int64_t p0,
                               int64_t cnt, int64_t q0, int64_t q1, uint32_t* panel) {
  const int64_t cq4 = (a->cg + 3) / 4, sw = a->sw, plane = a->hp * a->wp;
  const int64_t end = (cnt + EMBER_QL - 1) / EMBER_QL * EMBER_QL;
  int64_t run_src[EMBER_QCONV_PB], run_len[EMBER_QCONV_PB], runs = 0;
  int64_t q, cq, r, t, i;
  {
    int64_t oy = p0 / a->ow, ox = p0 % a->ow;
    for (t = 0; t < cnt; ++runs, ox = 0, ++oy) {
      run_len[runs] = a->ow - ox < cnt - t ? a->ow - ox : cnt - t;
      run_src[runs] = oy * a->sh * a->wp + ox * sw;
      t += run_len[runs];
    }
  }
  for (q = q0; q < q1;) { /* a tap's channel quads of the range at a time */
    const int64_t tap = q / cq4, c0 = q % cq4;
    const int64_t nq = cq4 - c0 < q1 - q ? cq4 - c0 : q1 - q;
    const uint32_t* base =
        xq + c0 * plane + tap / a->kw * a->dh * a->wp + tap % a->kw * a->dw;
    uint32_t* dst = panel + (q - q0) * EMBER_QCONV_PB;
    int64_t off = 0;
    /* a run at a time over the channel quads (each quad's plane `plane` words on) */
    for (r = 0; r < runs; off += run_len[r], ++r) {
      const uint32_t* src = base + run_src[r];
      uint32_t* d = dst + off;
      const int64_t len = run_len[r];
#if defined(EMBER_Q_VNNI)
      if (len <= EMBER_QL && sw <= 2) { /* one vector a quad, its mask computed once */
        const unsigned short m = (unsigned short)((1u << len) - 1u);
        for (cq = 0; cq < nq; ++cq, src += plane, d += EMBER_QCONV_PB) {
          EMBER_QSTORE32_MASK(d, sw == 1 ? ember_qload(src) :
                                 EMBER_QEVENS(ember_qload(src), ember_qload(src + EMBER_QL)), m);
        }
        continue;
      }
#endif
      for (cq = 0; cq < nq; ++cq, src += plane, d += EMBER_QCONV_PB) {
        if (sw == 1) {
          ember_qconv_copy(src, d, len);
#if defined(EMBER_Q_VNNI)
        } else if (sw == 2) {
          ember_qconv_evens(src, d, len);
#endif
        } else {
          for (i = 0; i < len; ++i) d[i] = src[i * sw];
        }
      }
    }
    for (cq = 0; cq < nq; ++cq) {
      for (t = cnt; t < end; ++t) dst[cq * EMBER_QCONV_PB + t] = 0;
    }
    q += nq;
  }
}

/* Adds to each pixel's sum the input values of nq quads (for a weight zero point): panel rows
 * rs words apart. */
static void ember_qconv_sums(const uint32_t* panel, int64_t rs, int64_t nq, int64_t cnt,
                             int32_t* sums) {
  int64_t q, t;
  for (q = 0; q < nq; ++q) {
    const uint8_t* src = (const uint8_t*)(panel + q * rs);
    for (t = 0; t < cnt; ++t) {
      sums[t] += (int32_t)src[t * 4] + src[t * 4 + 1] + src[t * 4 + 2] + src[t * 4 + 3];
    }
  }
}

#if defined(EMBER_Q_VECTOR_EXT)
/* The accumulators of a tile (ember_qconv_tile) before its quads: acc[r][v] = bias[r], or
 * part[r][v] where part is not NULL. */
EMBER_ALWAYS_INLINE void ember_qconv_tile_start(
    const int nb, const ember_qvi bias[EMBER_QCONV_MR], const int32_t* part,
    ember_qvi acc[EMBER_QCONV_MR][EMBER_QCONV_NB]) {
  int r, v;
  for (r = 0; r < EMBER_QCONV_MR; ++r) {
    for (v = 0; v < nb; ++v) {
      acc[r][v] = part ? ember_qload(part + (r * EMBER_QCONV_NB + v) * EMBER_QL) : bias[r];
    }
  }
}
#endif

#if defined(EMBER_Q_VNNI)
/* acc[r][v] = bias[r] (or part[r][v], a previous range of quads' sums, where part is not
 * NULL) + the dot products of output channel r of the block (weights wk: [k4][4][4]) with
 * pixel vector v of the tile (panel: rows of u32 words rs apart, from the tile's first
 * pixel), nb vectors. */
static inline __attribute__((always_inline)) void ember_qconv_tile(
    const uint32_t* panel, int64_t rs, const int8_t* wk, int64_t k4n, const int nb,
    const ember_qvi bias[EMBER_QCONV_MR], const int32_t* part,
    ember_qvi acc[EMBER_QCONV_MR][EMBER_QCONV_NB]) {
  int64_t k4;
  int r, v;
  ember_qconv_tile_start(nb, bias, part, acc);
  for (k4 = 0; k4 < k4n; ++k4) {
    const uint32_t* ap = panel + k4 * rs;
    ember_qvi bw[EMBER_QCONV_MR];
    for (r = 0; r < EMBER_QCONV_MR; ++r) {
      int32_t word;
      memcpy(&word, wk + k4 * 16 + r * 4, 4);
      bw[r] = ember_qset1(word);
    }
    for (v = 0; v < nb; ++v) { /* each pixel vector loaded once: 4 + nb loads per quad */
      const ember_qvi av = ember_qload(ap + v * EMBER_QL);
      for (r = 0; r < EMBER_QCONV_MR; ++r) acc[r][v] = EMBER_QDOT4(acc[r][v], av, bw[r]);
    }
  }
}
#elif defined(EMBER_Q_PAIRS)
/* As above on the pair forms: panel [k4][PB / L][2][L] words (a0, a2) then (a1, a3) of each
 * pixel; weights [k4][4][2] words (w0, w2), (w1, w3). */
static inline __attribute__((always_inline)) void ember_qconv_tile(
    const uint32_t* panel, int64_t rs, const uint32_t* wk, int64_t k4n, const int nb,
    const ember_qvi bias[EMBER_QCONV_MR], const int32_t* part,
    ember_qvi acc[EMBER_QCONV_MR][EMBER_QCONV_NB]) {
  int64_t k4;
  int r, v;
  ember_qconv_tile_start(nb, bias, part, acc);
  for (k4 = 0; k4 < k4n; ++k4) {
    const uint32_t* ap = panel + k4 * rs;
    for (r = 0; r < EMBER_QCONV_MR; ++r) {
      const ember_qvi w02 = ember_qset1((int32_t)wk[k4 * 8 + r * 2]);
      const ember_qvi w13 = ember_qset1((int32_t)wk[k4 * 8 + r * 2 + 1]);
      for (v = 0; v < nb; ++v) {
        acc[r][v] += EMBER_QMADD(ember_qload(ap + v * 2 * EMBER_QL), w02) +
                     EMBER_QMADD(ember_qload(ap + (v * 2 + 1) * EMBER_QL), w13);
      }
    }
  }
}
#endif

#if defined(EMBER_Q_VECTOR_EXT)
/* A block's per-row constants: the bias (the tile's first value), the multiplier and the
 * weight zero point of each of its output channels (zeros past the group's channels). */
typedef struct {
  ember_qvi bias[EMBER_QCONV_MR];
  ember_qvf scale[EMBER_QCONV_MR];
  int32_t w_zp[EMBER_QCONV_MR];
} ember_qconv_rows;

/* Requantizes tile acc into y (row r of the tile at y + r * ystride; rows of them, left valid
 * pixels from the tile's first), nb vectors a row (a constant where inlined: acc stays in
 * registers); sums: the tile's pixel sums, or NULL without a weight zero point. */
static inline __attribute__((always_inline)) void ember_qconv_out(
    uint8_t* y, int64_t ystride, int rows, int64_t left, const int nb,
    ember_qvi acc[EMBER_QCONV_MR][EMBER_QCONV_NB], const ember_qconv_rows* k,
    const int32_t* sums, const ember_qrq* rq) {
  int r, v;
  EMBER_QCONV_UNROLL
  for (r = 0; r < EMBER_QCONV_MR; ++r) {
    uint8_t* yrow = y + r * ystride;
    if (r >= rows) continue; /* not a loop bound: the loop stays unrolled */
#if defined(EMBER_Q_VBMI)
    { /* four vectors to a store (a masked one for the tile's last pixels) */
      ember_qvi s[EMBER_QCONV_NB];
      ember_qvf sc[EMBER_QCONV_NB];
      int g;
      EMBER_QCONV_UNROLL
      for (v = 0; v < nb; ++v) {
        s[v] = acc[r][v];
        sc[v] = k->scale[r];
        if (sums != NULL) s[v] -= ember_qload(sums + v * EMBER_QL) * k->w_zp[r];
      }
      EMBER_QCONV_UNROLL
      for (g = 0; g < nb; g += 4) {
        const int cnt = nb - g < 4 ? nb - g : 4;
        const ember_qc64 b = ember_qrq_pack4(s + g, sc + g, rq, cnt);
        if (left >= (g + cnt) * EMBER_QL) {
          memcpy(yrow + g * EMBER_QL, &b, (size_t)(cnt * EMBER_QL)); /* a constant size */
        } else if (left > g * EMBER_QL) {
          ember_qstore64_part(yrow + g * EMBER_QL, b, left - g * EMBER_QL);
        }
      }
    }
    continue;
#endif
    EMBER_QCONV_UNROLL
    for (v = 0; v < nb; ++v) {
      const int64_t n = left - v * EMBER_QL;
      ember_qvi s = acc[r][v];
      ember_qvub q;
      if (sums != NULL) s -= ember_qload(sums + v * EMBER_QL) * k->w_zp[r];
      q = ember_qrq_bytes(s, k->scale[r], rq);
      if (n >= EMBER_QL) {
        *(ember_qvub_u*)(yrow + v * EMBER_QL) = q; /* one vector store, not through a copy */
      } else if (n > 0) {
        ember_qstore_part(yrow + v * EMBER_QL, q, n);
      }
    }
  }
}

/* One tile: products and epilogue inlined together with a constant width nb, its
 * accumulators local to each width's copy (one array shared by the widths went through the
 * stack). A range of quads that is not the last leaves its sums in part (for the next range:
 * from `in`, NULL in the first) instead. */
#if defined(EMBER_Q_VNNI)
typedef int8_t ember_qconv_wt;
#else
typedef uint32_t ember_qconv_wt;
#endif
static inline __attribute__((always_inline)) void ember_qconv_tile_out(
    const uint32_t* ap, int64_t rs, const ember_qconv_wt* wt, int64_t k4n, const int nb,
    uint8_t* y, int64_t ystride, int rows, int64_t left, const ember_qconv_rows* k,
    const int32_t* sums, const ember_qrq* rq, const int32_t* in, int32_t* part) {
  ember_qvi acc[EMBER_QCONV_MR][EMBER_QCONV_NB];
  int r, v;
  ember_qconv_tile(ap, rs, wt, k4n, nb, k->bias, in, acc);
  if (part == NULL) {
    ember_qconv_out(y, ystride, rows, left, nb, acc, k, sums, rq);
    return;
  }
  for (r = 0; r < EMBER_QCONV_MR; ++r) {
    for (v = 0; v < nb; ++v) {
      memcpy(part + (r * EMBER_QCONV_NB + v) * EMBER_QL, &acc[r][v], sizeof acc[r][v]);
    }
  }
}
#define EMBER_QCONV_TILE_OUT(nb)                                                           \
  ember_qconv_tile_out(ap, rs, wt, k4n, (nb), yt, ystride, nrows, cnt - t0, &rk, st, &rq, \
                       pin, pout)
#endif

/* Output channel blocks [ob0, ob1) of one (image, group, pixel block) item of the
 * dense-channel path; xq is the group's interleaved plane (ember_qconv_interleave). The
 * quads go in ranges of at most a->kc, each gathered into the panel and read by every block
 * of channels before the next (a panel of all 288 quads of a 3x3 conv over 128 channels
 * was twice the L1 cache, streamed from L2 by each block); a block's tiles keep their sums
 * in parts between ranges (MR x NB vectors a tile). */
static void ember_qconv_item(const ember_qconv_args* a, int64_t item, int64_t ob0, int64_t ob1,
                             const uint32_t* xq, uint32_t* panel, uint32_t* pairs,
                             uint32_t* wpairs, int32_t* sums, int32_t* parts) {
  const int64_t blk = item % a->pblocks, g = (item / a->pblocks) % a->groups;
  const int64_t b = item / (a->pblocks * a->groups);
  const int64_t p0 = blk * a->pb;
  const int64_t cnt = a->p - p0 < a->pb ? a->p - p0 : a->pb;
  int64_t q0, ob, t0, t;
  if (cnt <= 0) return;
#if defined(EMBER_Q_VECTOR_EXT)
  /* in locals: the output's byte stores may alias *a, whose fields would be reloaded */
  const ember_qrq rq = ember_qrq_make(a->y_zp, a->y_lo, a->y_hi);
  const int64_t ystride = a->p;
#endif
#if EMBER_QCONV_KC == 0
  (void)parts;
#endif
  if (a->has_w_zp) {
    for (t = 0; t < EMBER_QCONV_PB; ++t) sums[t] = 0;
  }
  for (q0 = 0; q0 == 0 || q0 < a->k4; q0 += a->kc) { /* (one range where k4 is 0) */
    const int64_t q1 = a->k4 - q0 < a->kc ? a->k4 : q0 + a->kc, k4n = q1 - q0;
    const uint32_t* rows = panel; /* the panel's rows of words, rs apart */
    int64_t rs = EMBER_QCONV_PB;
    if (a->direct) {
      rs = a->hp * a->wp;
      rows = xq + q0 * rs + p0;
    } else {
      ember_qconv_gather(a, xq, p0, cnt, q0, q1, panel);
    }
    if (a->has_w_zp) ember_qconv_sums(rows, rs, k4n, cnt, sums);
#if defined(EMBER_Q_PAIRS)
    { /* the panel as int16 pairs, vectors of L pixels: (a0, a2), then (a1, a3) */
      int64_t k4;
      for (k4 = 0; k4 < k4n; ++k4) {
        const uint8_t* src = (const uint8_t*)(rows + k4 * rs);
        uint32_t* dst = pairs + k4 * EMBER_QCONV_PB * 2;
        for (t = 0; t + EMBER_QL <= cnt; t += EMBER_QL) { /* whole vectors: masks and a shift */
          const ember_qvi wv = ember_qload(src + t * 4);
          const ember_qvi a02 = wv & 0x00FF00FF, a13 = (wv >> 8) & 0x00FF00FF;
          memcpy(dst + t * 2, &a02, sizeof(a02));
          memcpy(dst + t * 2 + EMBER_QL, &a13, sizeof(a13));
        }
        for (; t < EMBER_QCONV_PB; ++t) { /* a byte at a time (a scalar loop took a quarter
                                           * of a 3x3 conv's time), zeros past cnt */
          const int64_t v = t / EMBER_QL, l = t % EMBER_QL;
          const int live = t < cnt;
          dst[v * 2 * EMBER_QL + l] = live ? ember_qpair(src[t * 4], src[t * 4 + 2]) : 0;
          dst[(v * 2 + 1) * EMBER_QL + l] =
              live ? ember_qpair(src[t * 4 + 1], src[t * 4 + 3]) : 0;
        }
      }
      rows = pairs;
      rs = EMBER_QCONV_PB * 2;
    }
#else
    (void)pairs;
    (void)wpairs;
#endif
    for (ob = ob0; ob < ob1; ++ob) {
      const int8_t* wk = a->w + ((g * a->ocb + ob) * a->k4 + q0) * 16;
      const int64_t oc0 = g * a->og + ob * EMBER_QCONV_MR;
      const int nrows = (int)(a->og - ob * EMBER_QCONV_MR < EMBER_QCONV_MR
                                  ? a->og - ob * EMBER_QCONV_MR : EMBER_QCONV_MR);
#if defined(EMBER_Q_VECTOR_EXT)
      ember_qconv_rows rk;
      int r;
      for (r = 0; r < EMBER_QCONV_MR; ++r) {
        const ember_qvf z = {0};
        rk.bias[r] = ember_qset1(r < nrows ? a->bias[oc0 + r] : 0);
        rk.scale[r] = z + (r < nrows ? a->scale[oc0 + r] : 0.0f);
        rk.w_zp[r] = r < nrows && a->has_w_zp ? a->w_zp[oc0 + r] : 0;
      }
#endif
#if defined(EMBER_Q_PAIRS)
      int64_t i;
      for (i = 0; i < k4n * EMBER_QCONV_MR; ++i) {
        wpairs[i * 2] = ember_qpair(wk[i * 4], wk[i * 4 + 2]);
        wpairs[i * 2 + 1] = ember_qpair(wk[i * 4 + 1], wk[i * 4 + 3]);
      }
#endif
      for (t0 = 0; t0 < cnt; t0 += EMBER_QCONV_TW) {
#if defined(EMBER_Q_VECTOR_EXT)
        const int nb = (int)((cnt - t0 + EMBER_QL - 1) / EMBER_QL < EMBER_QCONV_NB
                                 ? (cnt - t0 + EMBER_QL - 1) / EMBER_QL : EMBER_QCONV_NB);
        uint8_t* yt = a->y + (b * a->o + oc0) * a->p + p0 + t0;
        const int32_t* st = a->has_w_zp ? sums + t0 : NULL;
#if EMBER_QCONV_KC > 0
        /* this tile's sums between quad ranges: read after the first, written before the
         * last */
        int32_t* part = parts + ((ob - ob0) * (EMBER_QCONV_PB / EMBER_QCONV_TW) +
                                 t0 / EMBER_QCONV_TW) * (EMBER_QCONV_MR * EMBER_QCONV_TW);
        const int32_t* pin = q0 > 0 ? part : NULL;
        int32_t* pout = q1 < a->k4 ? part : NULL;
#else
        const int32_t* const pin = NULL; /* one range: no code for the others */
        int32_t* const pout = NULL;
#endif
#if defined(EMBER_Q_VNNI)
        const uint32_t* ap = rows + t0;
        const ember_qconv_wt* wt = wk;
#else
        const uint32_t* ap = rows + t0 * 2;
        const ember_qconv_wt* wt = wpairs;
#endif
        switch (nb) { /* constant tile widths: the accumulators stay in registers */
#if EMBER_QCONV_NB == 6
          case 6: EMBER_QCONV_TILE_OUT(6); break;
          case 5: EMBER_QCONV_TILE_OUT(5); break;
          case 4: EMBER_QCONV_TILE_OUT(4); break;
#endif
          case 3: EMBER_QCONV_TILE_OUT(3); break;
          case 2: EMBER_QCONV_TILE_OUT(2); break;
          default: EMBER_QCONV_TILE_OUT(1); break;
        }
#else
        /* portable: the same tile in scalar C (one range of quads: kc = k4) */
        int32_t acc[EMBER_QCONV_MR][EMBER_QCONV_TW];
        const int64_t tw = cnt - t0 < EMBER_QCONV_TW ? cnt - t0 : EMBER_QCONV_TW;
        int64_t k4;
        int r, j;
        for (r = 0; r < nrows; ++r) {
          for (t = 0; t < tw; ++t) acc[r][t] = a->bias[oc0 + r];
        }
        for (k4 = 0; k4 < k4n; ++k4) {
          const uint8_t* ap = (const uint8_t*)(rows + k4 * rs + t0);
          for (r = 0; r < nrows; ++r) {
            const int8_t* wr = wk + k4 * 16 + r * 4;
            for (t = 0; t < tw; ++t) {
              int32_t sum = 0;
              for (j = 0; j < 4; ++j) sum += (int32_t)ap[t * 4 + j] * (int32_t)wr[j];
              acc[r][t] += sum;
            }
          }
        }
        for (r = 0; r < nrows; ++r) {
          const int64_t oc = oc0 + r;
          uint8_t* yrow = a->y + (b * a->o + oc) * a->p + p0 + t0;
          for (t = 0; t < tw; ++t) {
            int32_t v = acc[r][t] - (a->has_w_zp ? a->w_zp[oc] * sums[t0 + t] : 0);
            yrow[t] = (uint8_t)ember_qrequant(v, a->scale[oc], a->y_zp, a->y_lo, a->y_hi);
          }
        }
#endif
      }
    }
  }
}

#include "ember/kernels/qconv_dwq.h"
#include "ember/kernels/qconv_dw.h"

/* Work units [lo, hi) with this task's workspaces: depthwise, items (ember_qconv_items);
 * otherwise (image, group, pixel block, output channel block), the blocks of channels
 * innermost (a block's panel gathered once for its run of them). */
static int ember_qconv_range(const ember_qconv_args* a, int64_t lo, int64_t hi) {
  uint64_t slack, plane_bytes, panel_bytes, pair_bytes = 0, wpair_bytes = 0, sum_bytes;
  uint64_t part_bytes;
  uint8_t* buf;
  int64_t u, built = -1;
  if (lo >= hi) return 0;
  if (ember_qconv_depthwise(a)) {
    const int status = ember_qconv_dw_range(a, lo, hi);
    if (a->add != NULL && status == 0) { /* the items' channel planes */
      const int64_t per = a->lanes ? EMBER_QL : 1, blocks = (a->c + per - 1) / per;
      for (u = lo; u < hi; ++u) {
        const int64_t c0 = u % blocks * per;
        ember_qconv_add(a, u / blocks, c0, c0 + per < a->c ? c0 + per : a->c, 0, a->p);
      }
    }
    return status;
  }
  /* the plane, with a block of slack: a direct panel's last block reads past its end, the
   * panels from a whole line */
  slack = (uint64_t)((a->cg + 3) / 4) * a->hp * a->wp * 4;
  plane_bytes = (slack + EMBER_QCONV_PB * 4 + 63) / 64 * 64;
  panel_bytes = a->direct ? 0 : (uint64_t)a->kc * EMBER_QCONV_PB * 4;
#if defined(EMBER_Q_PAIRS)
  pair_bytes = (uint64_t)a->kc * EMBER_QCONV_PB * 8;
  wpair_bytes = (uint64_t)a->kc * EMBER_QCONV_MR * 8;
#endif
  sum_bytes = EMBER_QCONV_PB * 4;
  /* the tiles' sums between ranges of quads: MR x PB int32 a block of channels */
  part_bytes = a->kc < a->k4 ? (uint64_t)a->ocb * EMBER_QCONV_MR * EMBER_QCONV_PB * 4 : 0;
  buf = (uint8_t*)TVMBackendAllocWorkspace(
      1, 0, plane_bytes + panel_bytes + pair_bytes + wpair_bytes + sum_bytes + part_bytes, 1,
      32);
  if (buf == NULL) return -1;
  for (u = lo; u < hi;) {
    const int64_t item = u / a->ocb, ob0 = u % a->ocb;
    const int64_t ob1 = hi - item * a->ocb < a->ocb ? hi - item * a->ocb : a->ocb;
    const int64_t bg = item / a->pblocks; /* image * groups + group */
    if (bg != built) { /* the plane rows this range's pixels of bg read */
      const int64_t per_bg = a->pblocks * a->ocb;
      const int64_t last = (hi < (bg + 1) * per_bg ? hi : (bg + 1) * per_bg) - 1;
      const int64_t p_lo = (u / a->ocb % a->pblocks) * a->pb;
      const int64_t p_hi = (last / a->ocb % a->pblocks + 1) * a->pb;
      const int64_t y0 = p_lo / a->ow * a->sh;
      const int64_t oy1 = ((p_hi < a->p ? p_hi : a->p) - 1) / a->ow;
      const int64_t y1 = oy1 * a->sh + (a->kh - 1) * a->dh + 1;
      ember_qconv_interleave(a, bg / a->groups, bg % a->groups, y0, y1 < a->hp ? y1 : a->hp,
                             (uint32_t*)buf);
      memset(buf + slack, 0, EMBER_QCONV_PB * 4);
      built = bg;
    }
    ember_qconv_item(a, item, ob0, ob1, (const uint32_t*)buf,
                     (uint32_t*)(buf + plane_bytes), (uint32_t*)(buf + plane_bytes + panel_bytes),
                     (uint32_t*)(buf + plane_bytes + panel_bytes + pair_bytes),
                     (int32_t*)(buf + plane_bytes + panel_bytes + pair_bytes + wpair_bytes),
                     (int32_t*)(buf + plane_bytes + panel_bytes + pair_bytes + wpair_bytes +
                                sum_bytes));
    if (a->add != NULL) { /* this unit's rows, while in cache */
      const int64_t blk = item % a->pblocks, g = bg % a->groups, p0 = blk * a->pb;
      const int64_t c1 = ob1 * EMBER_QCONV_MR < a->og ? ob1 * EMBER_QCONV_MR : a->og;
      ember_qconv_add(a, bg / a->groups, g * a->og + ob0 * EMBER_QCONV_MR, g * a->og + c1, p0,
                      a->p - p0 < a->pb ? a->p - p0 : a->pb);
    }
    u = item * a->ocb + ob1;
  }
  return TVMBackendFreeWorkspace(1, 0, buf) == 0 ? 0 : -1;
}

/* The work units of a call: depthwise, its items; otherwise pixel blocks x channel blocks. */
static inline int64_t ember_qconv_units(const ember_qconv_args* a) {
  return ember_qconv_depthwise(a) ? ember_qconv_items(a) : ember_qconv_items(a) * a->ocb;
}

/* The first unit of a dense conv's share `share` of `tasks`: the units split by their pixels
 * (a block's channel blocks each weigh its pixel count), so that tasks get equal work
 * whatever the blocks' sizes and however few (one block of a 7x7 map ran on one thread, the
 * 80 + 80 + 36 pixels of a 14x14 map as 80 and 116). */
static int64_t ember_qconv_split(const ember_qconv_args* a, int64_t share, int64_t tasks) {
  const int64_t per_bg = a->p * a->ocb, bgs = a->n * a->groups;
  const int64_t cost = bgs * per_bg * share / tasks;
  const int64_t bg = cost / per_bg, rem = cost % per_bg;
  int64_t blk = rem / (a->pb * a->ocb), cnt, ob;
  if (share >= tasks) return ember_qconv_units(a);
  blk = blk < a->pblocks - 1 ? blk : a->pblocks - 1;
  cnt = a->p - blk * a->pb < a->pb ? a->p - blk * a->pb : a->pb;
  ob = (rem - blk * a->pb * a->ocb + cnt - 1) / cnt; /* the first unit starting at or after */
  return (bg * a->pblocks + blk) * a->ocb + ob;
}

static inline int ember_qconv_task(int task_id, TVMParallelGroupEnv* penv, void* cdata) {
  const ember_qconv_args* a = (const ember_qconv_args*)cdata;
  const int64_t tasks = penv->num_task;
  if (ember_qconv_depthwise(a)) {
    const int64_t items = ember_qconv_items(a);
    return ember_qconv_range(a, items * task_id / tasks, items * (task_id + 1) / tasks);
  }
  return ember_qconv_range(a, ember_qconv_split(a, task_id, tasks),
                           ember_qconv_split(a, task_id + 1, tasks));
}

/* See the top of this file. */
#if EMBER_KERNEL_ALL || defined(EMBER_KOBJ_ember_qconv2d)
EMBER_KENTRY int32_t ember_qconv2d(EMBER_QCONV2D_PARAMS) {
  ember_qconv_args a;
  ember_qadd_args add;
  a.x = (const uint8_t*)x; a.w = w; a.bias = bias; a.w_zp = w_zp; a.scale = scale;
  a.y = (uint8_t*)y;
  a.n = n; a.c = c; a.h = h; a.wd = wd; a.o = o; a.oh = oh; a.ow = ow; a.kh = kh; a.kw = kw;
  a.sh = sh; a.sw = sw; a.ph = ph; a.pw = pw; a.dh = dh; a.dw = dw; a.groups = groups;
  a.cg = c / groups; a.og = o / groups; a.k = a.cg * kh * kw; a.k4 = (a.cg + 3) / 4 * kh * kw;
  a.ocb = (a.og + EMBER_QCONV_MR - 1) / EMBER_QCONV_MR;
  a.p = oh * ow; a.pblocks = (a.p + EMBER_QCONV_PB - 1) / EMBER_QCONV_PB;
  /* the vectors shared evenly by the blocks: 196 pixels as 80 + 80 + 36, not 96 + 96 + 4,
   * whose tile of one vector waits on its four accumulators' latency */
  a.pb = ((a.p + EMBER_QL - 1) / EMBER_QL + a.pblocks - 1) / a.pblocks * EMBER_QL;
  a.hp = (oh - 1) * sh + (kh - 1) * dh + 1;
  a.wp = (ow - 1) * sw + (kw - 1) * dw + 1;
  a.hp = a.hp > h + ph ? a.hp : h + ph;
  a.wp = a.wp > wd + pw ? a.wp : wd + pw;
  a.direct = kh == 1 && kw == 1 && sh == 1 && sw == 1 && ph == 0 && pw == 0 && a.hp == h &&
             a.wp == wd && oh == h && ow == wd;
  /* ranges of quads alike in size (288 as 5 x 58, not 4 x 64 + 32), only where the tiles
   * read the plane itself, in blocks of pixels (a block's part of each row: lines shared
   * with the next block), and a block's rows of it exceed 64 KiB: 1x1 convs of 1024 -> 256
   * and 1152 -> 128 channels on 14x14 17% and 14% faster; gathered panels (whole lines),
   * one block (2048 -> 512 on 7x7: the rows read in turn) and smaller planes no faster or
   * slower in ranges */
  a.kc = a.k4 > 0 ? a.k4 : 1;
#if EMBER_QCONV_KC > 0
  if (a.direct && a.pblocks > 1 && a.k4 * a.pb * 4 > EMBER_QCONV_KC_BYTES) {
    const int64_t ranges = (a.k4 + EMBER_QCONV_KC - 1) / EMBER_QCONV_KC;
    a.kc = (a.k4 + ranges - 1) / ranges;
  }
#endif
  a.flip = x_signed ? 0x80 : 0; a.x_zp = (uint8_t)x_zp; a.has_w_zp = has_w_zp;
  a.y_zp = y_zp; a.y_lo = y_lo; a.y_hi = y_hi;
  a.add = NULL;
  if (res != NULL) {
    ember_qadd_init(&add, y, res, y, n * o * oh * ow, ra, rb, y_zp, r_zp, s_zp, s_lo, s_hi,
                    y_signed, r_signed);
    a.add = &add;
  }
  a.dwq = 0;
#if defined(EMBER_QCONV_DWQ)
  {
    ember_qconv_dwq_geom geom;
    a.dwq = ember_qconv_dwq_plan(&a, &geom);
  }
#endif
#if defined(EMBER_Q_VNNI)
  a.lanes = !a.dwq && ember_qconv_depthwise(&a) &&
            ember_qconv_dwl_hp(&a) * ember_qconv_dwl_wp(&a) <= EMBER_QCONV_LANES_MAX;
#else
  a.lanes = 0;
#endif
  if (n <= 0 || o <= 0 || oh <= 0 || ow <= 0) return 0;
  if (parallel && ember_qconv_units(&a) > 1) {
    return TVMBackendParallelLaunch(ember_qconv_task, &a, 0) == 0 ? 0 : -1;
  }
  return ember_qconv_range(&a, 0, ember_qconv_units(&a));
}
#endif
#endif /* EMBER_KERNEL_BODIES */

#endif /* EMBER_KERNELS_QCONV_H_ */
