/*!
 * \file ember/kernels/conv_nchw_small.h
 * \brief conv2d of a plain NCHW input to a plain NCHW output with few output channels (those
 *        AlterOpLayout leaves plain: 1 to 7), any padding, stride and dilation. The te
 *        template vectorises such a conv over its few output channels (3 lanes of 16); here
 *        the vectors run along the output row instead.
 *
 * Layouts: input [N][IC][H][W], weight [OC][IC][KH][KW] (OIHW, read as scalars), output
 * [N][OC][OH][OW].
 *
 * The input rows a band of output rows reads are copied once into a buffer, zero-padded on the
 * left and right and split into `sw` phases (phase p, element j: padded column j * sw + p), so
 * that every tap (ky, kx) of an output row is a contiguous run of that buffer: phase
 * (kx * dw) % sw from element (kx * dw) / sw on; rows above or below the image are zero rows.
 * A register tile is up to 4 output channels x 4 rows x 1 vector of output columns (2 rows x
 * 2 vectors when a row is longer than a vector; half the rows with 16 vector registers): each
 * tap loads the rows' vectors once and broadcasts a weight per channel. A row that one tile
 * spans stores its last vector whole, the lanes past the row landing in the next rows of the
 * same channel, written after it; the rows at the end of a work range, and longer rows, store
 * partial vectors. Rows are split over TVMBackendParallelLaunch's tasks when `parallel` is set.
 *
 * Without a workspace (a C-runtime arena with no room) the rows run as a plain loop nest.
 * Returns 0, or -1 when the parallel launch fails.
 * Without GCC/Clang vector extensions the same code runs on gemm_simd.h's plain C vectors.
 */
#ifndef EMBER_KERNELS_CONV_NCHW_SMALL_H_
#define EMBER_KERNELS_CONV_NCHW_SMALL_H_

#include <stdint.h>

#include "ember/kernels/linkage.h"

/* The entry point (linkage and where its body comes from: ember/kernels/linkage.h). */
#define EMBER_CONV2D_NCHW_SMALL_PARAMS                                                             \
  const float* in, const float* w, float* out, int32_t n, int32_t ic, int32_t h, int32_t wd,     \
      int32_t oc, int32_t oh, int32_t ow, int32_t kh, int32_t kw, int32_t sh, int32_t sw,         \
      int32_t dh, int32_t dw, int32_t pt, int32_t pl, int32_t parallel
EMBER_KENTRY int32_t ember_conv2d_nchw_small(EMBER_CONV2D_NCHW_SMALL_PARAMS);

#if EMBER_KERNEL_BODIES
#include <string.h>

#include "ember/c_backend_api.h"
#include "ember/kernels/gemm_simd.h"

/* Floats of input rows one work item buffers at most (then its rows go in bands): in L2. */
#define EMBER_CSMALL_BUFFER (32 * 1024)

/*! \brief One call (sizes in elements). */
typedef struct {
  const float* in;
  const float* in_end; /* past the input's last float */
  const float* w;
  float* out;
  int32_t n, ic, h, wd, oc, oh, ow, kh, kw, sh, sw, dh, dw, pt, pl;
  int64_t len; /* floats per phase of a buffered row: whole vectors of OW plus the taps' reach */
  int32_t band; /* output rows per buffer fill */
  int32_t step; /* output rows per register tile */
} ember_csmall_p;

/* Input rows a band of `rows` output rows reads (before clipping to the image). */
static inline int32_t ember_csmall_rows_in(const ember_csmall_p* p, int32_t rows) {
  return (rows - 1) * p->sh + (p->kh - 1) * p->dh + 1;
}

/* Floats of one work item's buffer: IC x its band's input rows x sw phases x len, and two
 * vectors of slack for the stores of ember_csmall_fill_row. */
static inline int64_t ember_csmall_buffer(const ember_csmall_p* p) {
  return (int64_t)p->ic * ember_csmall_rows_in(p, p->band) * p->sw * p->len + 2 * EMBER_VL;
}

/* n zeros at dst: one vector store when n <= EMBER_VL (the floats after the n are written
 * after it, or are slack), else a library call (which a loop of vector stores becomes). */
static inline void ember_csmall_zero(float* dst, int64_t n) {
  if (n > EMBER_VL) {
    memset(dst, 0, (size_t)n * sizeof(float));
  } else if (n > 0) {
    ember_vstore(dst, ember_vzero());
  }
}

/* Input row `src` (wd floats) into its buffered form at dst: sw phases of len floats, phase p
 * element j the padded column j * sw + p (column c - pl of the row, zero outside it). With
 * stride 1: zeros, whole vectors of the row at pl (a vector may read past the row where the
 * input goes on), zeros from the row's end up to len. A store past len lands in the next
 * buffered row, filled after this one, or in the buffer's slack. */
static inline void ember_csmall_fill_row(const ember_csmall_p* p, const float* src, float* dst) {
  int64_t j, c;
  int32_t ph;
  if (p->sw == 1) {
    const int64_t lead = p->pl < p->len ? p->pl : p->len;
    const int64_t copy = p->wd < p->len - lead ? p->wd : p->len - lead;
    ember_csmall_zero(dst, lead);
    for (j = 0; j < copy && (j + EMBER_VL <= copy || src + j + EMBER_VL <= p->in_end);
         j += EMBER_VL) {
      ember_vstore(dst + lead + j, ember_vload(src + j));
    }
    for (; j < copy; ++j) dst[lead + j] = src[j];
    ember_csmall_zero(dst + lead + copy, p->len - lead - copy);
    return;
  }
  for (ph = 0; ph < p->sw; ++ph) {
    for (j = 0; j < p->len; ++j) {
      c = j * p->sw + ph - p->pl;
      dst[ph * p->len + j] = c >= 0 && c < p->wd ? src[c] : 0.0f;
    }
  }
}

/* Output rows a register tile takes: with 32 vector registers 4 rows of one vector or 2 of
 * two, with 16 half that (at most 16 or 8 accumulators of 4 channels). Enough independent
 * FMA chains to cover their latency: one row of 3 channels ran at a third of the speed. */
#if EMBER_VL == 16
#define EMBER_CSMALL_RT(nv) ((nv) > 1 ? 2 : 4)
#else
#define EMBER_CSMALL_RT(nv) ((nv) > 1 ? 1 : 2)
#endif

/* Where a band's rows are: `rows`, buffered input rows from row iy0 on (padding rows as
 * zeros); taps[kx]: where tap kx starts in a row; output rows [s0, s1) of batch b, stores
 * whole up to `limit` floats into each channel's plane (see ember_csmall_tile). */
typedef struct {
  const float* rows;
  const int64_t* taps;
  int32_t iy0, b, s1;
  int64_t limit;
} ember_csmall_band;

/* Output columns [c0, c0 + nv * EMBER_VL) of rows oy .. oy + rt - 1 (rows from s1 on repeat
 * row s1 - 1 and are not stored) for channels o0 .. o0 + oct - 1; oct, nv and rt constants
 * after inlining, so the accumulators stay in registers. The store of a channel's vector is
 * whole when it ends at or before band->limit floats into the channel's plane or inside its
 * row, else only the row's floats from it on go out. Whole stores past the row's end land in
 * the next rows, written after it, only when one tile spans the row (c0 == 0): the tiles
 * after the first of a longer row come after the next row's first one. */
EMBER_ALWAYS_INLINE void ember_csmall_tile(const ember_csmall_p* p, const ember_csmall_band* band,
                                           int32_t o0, int32_t oy, int32_t c0, const int oct,
                                           const int nv, const int rt) {
  const int64_t wstride = (int64_t)p->ic * p->kh * p->kw, rstride = (int64_t)p->sw * p->len;
  const int64_t rows_in = ember_csmall_rows_in(p, p->band);
  ember_vf acc[4][4][2], x[4][2], wv;
  const float* src[4];
  int32_t c, ky, kx, o, v, r, y;
  int64_t at, left;
  for (o = 0; o < oct; ++o) {
    for (r = 0; r < rt; ++r) {
      for (v = 0; v < nv; ++v) acc[o][r][v] = ember_vzero();
    }
  }
  for (c = 0; c < p->ic; ++c) {
    for (ky = 0; ky < p->kh; ++ky) {
      const float* wk = p->w + (int64_t)o0 * wstride + ((int64_t)c * p->kh + ky) * p->kw;
      for (r = 0; r < rt; ++r) {
        y = oy + r < band->s1 ? oy + r : band->s1 - 1;
        src[r] = band->rows + ((int64_t)c * rows_in + y * p->sh - p->pt - band->iy0 +
                               ky * p->dh) * rstride + c0;
      }
      for (kx = 0; kx < p->kw; ++kx) {
        for (r = 0; r < rt; ++r) {
          for (v = 0; v < nv; ++v) x[r][v] = ember_vload(src[r] + band->taps[kx] + v * EMBER_VL);
        }
        for (o = 0; o < oct; ++o) {
          wv = ember_vset1(wk[o * wstride + kx]);
          for (r = 0; r < rt; ++r) {
            for (v = 0; v < nv; ++v) acc[o][r][v] = ember_vfma(x[r][v], wv, acc[o][r][v]);
          }
        }
      }
    }
  }
  for (r = 0; r < rt && oy + r < band->s1; ++r) {
    at = (int64_t)(oy + r) * p->ow + c0;
    for (o = 0; o < oct; ++o) {
      float* dst = p->out + ((int64_t)band->b * p->oc + o0 + o) * p->oh * p->ow + at;
      for (v = 0; v < nv; ++v) {
        left = p->ow - c0 - v * EMBER_VL; /* floats of the row from this vector on */
        if (left <= 0) break;
        if (left >= EMBER_VL || (c0 == 0 && at + (v + 1) * EMBER_VL <= band->limit)) {
          ember_vstore(dst + v * EMBER_VL, acc[o][r][v]);
        } else {
          ember_vstore_part(dst + v * EMBER_VL, left, acc[o][r][v]);
        }
      }
    }
  }
}

/* All channels and columns of output rows oy .. oy + EMBER_CSMALL_RT(nv) - 1 of the band:
 * tiles of two vectors when a row is longer than one (the last one's second vector may lie
 * past the row: not stored). */
static inline void ember_csmall_rows_tile(const ember_csmall_p* p, const ember_csmall_band* band,
                                          int32_t oy) {
  const int32_t wide = p->ow > EMBER_VL;
  int32_t o0, c0, oct;
  for (o0 = 0; o0 < p->oc; o0 += 4) {
    oct = p->oc - o0 < 4 ? p->oc - o0 : 4;
    for (c0 = 0; c0 < p->ow; c0 += (wide ? 2 : 1) * EMBER_VL) {
#define EMBER_CSMALL_TILE(OCT, NV) \
  ember_csmall_tile(p, band, o0, oy, c0, OCT, NV, EMBER_CSMALL_RT(NV))
      switch (oct * 2 + wide) {
        case 2: EMBER_CSMALL_TILE(1, 1); break;
        case 3: EMBER_CSMALL_TILE(1, 2); break;
        case 4: EMBER_CSMALL_TILE(2, 1); break;
        case 5: EMBER_CSMALL_TILE(2, 2); break;
        case 6: EMBER_CSMALL_TILE(3, 1); break;
        case 7: EMBER_CSMALL_TILE(3, 2); break;
        case 8: EMBER_CSMALL_TILE(4, 1); break;
        default: EMBER_CSMALL_TILE(4, 2); break;
      }
#undef EMBER_CSMALL_TILE
    }
  }
}

/* Output rows [r0, r1) of batch b, in bands of p->band rows through the buffer `buf`
 * (ember_csmall_buffer floats); taps: p->kw offsets. */
static void ember_csmall_rows(const ember_csmall_p* p, float* buf, int64_t* taps, int32_t b,
                              int32_t r0, int32_t r1) {
  const int64_t rows_in = ember_csmall_rows_in(p, p->band), rstride = (int64_t)p->sw * p->len;
  ember_csmall_band band;
  int32_t s0, c, i, iy, oy, kx;
  for (kx = 0; kx < p->kw; ++kx) {
    taps[kx] = (int64_t)(kx * p->dw) % p->sw * p->len + (kx * p->dw) / p->sw;
  }
  band.rows = buf;
  band.taps = taps;
  band.b = b;
  band.limit = (int64_t)r1 * p->ow; /* whole stores up to the range's end */
  for (s0 = r0; s0 < r1; s0 = band.s1) {
    band.s1 = s0 + p->band < r1 ? s0 + p->band : r1;
    band.iy0 = s0 * p->sh - p->pt;
    for (c = 0; c < p->ic; ++c) {
      for (i = 0; i < ember_csmall_rows_in(p, band.s1 - s0); ++i) {
        float* dst = buf + ((int64_t)c * rows_in + i) * rstride;
        iy = band.iy0 + i;
        if (iy >= 0 && iy < p->h) {
          ember_csmall_fill_row(p, p->in + (((int64_t)b * p->ic + c) * p->h + iy) * p->wd, dst);
        } else { /* padding */
          memset(dst, 0, (size_t)rstride * sizeof(float));
        }
      }
    }
    for (oy = s0; oy < band.s1; oy += p->step) ember_csmall_rows_tile(p, &band, oy);
  }
}

/* Output rows [r0, r1) of batch b without a buffer (a C-runtime arena with no room): the
 * plain loop nest. */
static void ember_csmall_plain(const ember_csmall_p* p, int32_t b, int32_t r0, int32_t r1) {
  int32_t o, oy, ox, c, ky, kx, iy, ix;
  for (o = 0; o < p->oc; ++o) {
    for (oy = r0; oy < r1; ++oy) {
      for (ox = 0; ox < p->ow; ++ox) {
        float acc = 0.0f;
        for (c = 0; c < p->ic; ++c) {
          const float* in = p->in + ((int64_t)b * p->ic + c) * p->h * p->wd;
          const float* w = p->w + ((int64_t)o * p->ic + c) * p->kh * p->kw;
          for (ky = 0; ky < p->kh; ++ky) {
            iy = oy * p->sh - p->pt + ky * p->dh;
            if (iy < 0 || iy >= p->h) continue;
            for (kx = 0; kx < p->kw; ++kx) {
              ix = ox * p->sw - p->pl + kx * p->dw;
              if (ix >= 0 && ix < p->wd) acc += in[(int64_t)iy * p->wd + ix] * w[ky * p->kw + kx];
            }
          }
        }
        p->out[(((int64_t)b * p->oc + o) * p->oh + oy) * p->ow + ox] = acc;
      }
    }
  }
}

/* Task t of tasks: rows [oh * t / tasks, oh * (t + 1) / tasks) of every batch item. */
static int32_t ember_csmall_task(const ember_csmall_p* p, int32_t t, int32_t tasks) {
  const int32_t r0 = (int32_t)((int64_t)p->oh * t / tasks);
  const int32_t r1 = (int32_t)((int64_t)p->oh * (t + 1) / tasks);
  int64_t* taps; /* then the buffer */
  int32_t b;
  if (r0 >= r1) return 0;
  taps = (int64_t*)TVMBackendAllocWorkspace(
      1, 0, (uint64_t)p->kw * sizeof(int64_t) + (uint64_t)ember_csmall_buffer(p) * sizeof(float),
      2, 32);
  for (b = 0; b < p->n; ++b) {
    if (taps == NULL) {
      ember_csmall_plain(p, b, r0, r1);
    } else {
      ember_csmall_rows(p, (float*)(taps + p->kw), taps, b, r0, r1);
    }
  }
  if (taps == NULL) return 0;
  return TVMBackendFreeWorkspace(1, 0, taps) == 0 ? 0 : -1;
}

static int ember_csmall_launch(int task_id, TVMParallelGroupEnv* penv, void* cdata) {
  return ember_csmall_task((const ember_csmall_p*)cdata, task_id, penv->num_task);
}

/* See the top of this file. */
#if EMBER_KERNEL_ALL || defined(EMBER_KOBJ_ember_conv2d_nchw_small)
EMBER_KENTRY int32_t ember_conv2d_nchw_small(EMBER_CONV2D_NCHW_SMALL_PARAMS) {
  ember_csmall_p p;
  const int64_t chunk = (ow > EMBER_VL ? 2 : 1) * EMBER_VL; /* a tile's columns */
  const int64_t whole = ((int64_t)ow + chunk - 1) / chunk * chunk;
  p.in = in; p.w = w; p.out = out;
  p.in_end = in + (int64_t)n * ic * h * wd;
  p.n = n; p.ic = ic; p.h = h; p.wd = wd; p.oc = oc; p.oh = oh; p.ow = ow;
  p.kh = kh; p.kw = kw; p.sh = sh; p.sw = sw; p.dh = dh; p.dw = dw; p.pt = pt; p.pl = pl;
  if (n <= 0 || oc <= 0 || oh <= 0 || ow <= 0) return 0;
  /* tap kx reads whole vectors of the row from (kx * dw) / sw on */
  p.len = whole + ((int64_t)(kw - 1) * dw) / sw;
  p.step = ow > EMBER_VL ? EMBER_CSMALL_RT(2) : EMBER_CSMALL_RT(1);
  { /* the most output rows whose input rows fit EMBER_CSMALL_BUFFER, whole tiles of them */
    const int64_t rows = EMBER_CSMALL_BUFFER / ((int64_t)ic * sw * p.len);
    const int64_t band = (rows - (int64_t)(kh - 1) * dh - 1) / sh + 1;
    p.band = band >= oh ? oh : band >= p.step ? (int32_t)(band - band % p.step)
                                               : band > 1 ? (int32_t)band : 1;
  }
  if (parallel && oh > 1) {
    return TVMBackendParallelLaunch(ember_csmall_launch, &p, 0) == 0 ? 0 : -1;
  }
  return ember_csmall_task(&p, 0, 1);
}
#endif
#endif /* EMBER_KERNEL_BODIES */

#endif /* EMBER_KERNELS_CONV_NCHW_SMALL_H_ */
