/*!
 * \file ember/kernels/pool_nchw.h
 * \brief Max and average pooling, and global pools, of plain NCHW float32 tensors, for any
 *        channel count (the blocked kernel, pool_nchwc.h, needs channels that split into
 *        4, 8 or 16 lanes and a layout transform each way).
 *
 * ember_pool2d_nchw, with V the target's float lanes (16 with AVX-512, 8 with AVX, else 4):
 * - rows of V outputs or more: each output row is pooled in two passes through a padded row
 *   buffer, first down the window's rows (a vector per V input columns), then across the
 *   window's columns (a vector per V outputs; at stride 2 the even lanes of two loads). The
 *   buffer's padding holds the reduction's identity, so neither pass checks bounds (padding,
 *   ceil_mode's overhang); averages multiply by per-row and per-column reciprocal counts.
 * - shorter rows (a 7 x 7 map), equal strides of 1 or 2: each plane through a padded copy, as
 *   one 1-D stencil over its flattened rows (ember_pooln_flat_plane).
 * - otherwise (rows over EMBER_PN_ROW wide, no vector extensions): a scalar loop per output
 *   over the taps inside the image.
 * Rows (or planes) are split over TVMBackendParallelLaunch's tasks when `threads` is set.
 *
 * ember_global_pool_nchw: the max or mean of each H*W plane as a streaming reduction (four
 * vector accumulators), planes split over tasks.
 *
 * Semantics (Relay's, as pool_nchwc.h): max ignores padding (a window wholly in the padding
 * gives -inf); average divides by the taps inside [0, H) x [0, W), or with count_include_pad
 * by those inside [-pt, H + pb) x [-pl, W + pr) (at least 1).
 */
#ifndef EMBER_KERNELS_POOL_NCHW_H_
#define EMBER_KERNELS_POOL_NCHW_H_

#include <stdint.h>

#include "ember/kernels/linkage.h"

/* The entry points (linkage and where their bodies come from: ember/kernels/linkage.h). */
#define EMBER_POOL2D_NCHW_PARAMS                                                                 \
  const float* in, float* out, int32_t n, int32_t c, int32_t h, int32_t w, int32_t oh,           \
      int32_t ow, int32_t kh, int32_t kw, int32_t sh, int32_t sw, int32_t dh, int32_t dw,        \
      int32_t pt, int32_t pl, int32_t pb, int32_t pr, int32_t avg, int32_t include_pad,          \
      int32_t threads
#define EMBER_GLOBAL_POOL_NCHW_PARAMS                                                            \
  const float* in, float* out, int32_t n, int32_t c, int32_t h, int32_t w, int32_t avg,          \
      int32_t threads
EMBER_KENTRY int32_t ember_pool2d_nchw(EMBER_POOL2D_NCHW_PARAMS);
EMBER_KENTRY int32_t ember_global_pool_nchw(EMBER_GLOBAL_POOL_NCHW_PARAMS);

#if EMBER_KERNEL_BODIES
#include <math.h>

#include "ember/c_backend_api.h"
#include "ember/kernels/conv_simd.h"

/* How a call pools (ember_pooln_choose_mode). */
#define EMBER_PN_SCALAR 0
#define EMBER_PN_ROWS 1
#define EMBER_PN_PLANES 2

/*! \brief One pooling call (sizes in elements). */
typedef struct {
  const float* in;
  float* out;
  int64_t planes;
  int32_t h, w, oh, ow, kh, kw, sh, sw, dh, dw, pt, pl, pb, pr, avg, include_pad;
  int32_t mode;   /* EMBER_PN_SCALAR, EMBER_PN_ROWS or EMBER_PN_PLANES */
  int32_t hp, wp; /* the padded image's rows and columns (ceil_mode's overhang included) */
} ember_pooln_p;

/* The taps of a window from `start` (k of them, d apart) an average divides by along an axis
 * of `size` padded by lo and hi: those inside [0, size), or with include_pad [-lo, size + hi). */
static inline int32_t ember_pooln_count(int32_t start, int32_t d, int32_t k, int32_t size,
                                        int32_t lo, int32_t hi, int32_t include_pad) {
  const int32_t k0 = ember_first_tap(start, d, k);
  return include_pad ? ember_pool_taps(start, d, k, -lo, size + hi)
                     : ember_end_tap(start, d, size, k, k0) - k0;
}

/* 1 / count, 1 for none (a window wholly in the padding averages to 0). */
static inline float ember_pooln_reciprocal(int32_t count) {
  return 1.0f / (float)(count > 0 ? count : 1);
}

/* Output row `item` of the (plane, row) items: its input plane, its output row, and the
 * window rows [ky0, ky1) inside the image from input row iy0. */
typedef struct {
  const float* in;
  float* out;
  int32_t iy0, ky0, ky1;
} ember_pooln_item;

static inline ember_pooln_item ember_pooln_item_at(const ember_pooln_p* p, int64_t item) {
  const int32_t oy = (int32_t)(item % p->oh);
  const int64_t plane = item / p->oh;
  ember_pooln_item r;
  r.in = p->in + (size_t)plane * p->h * p->w;
  r.out = p->out + ((size_t)plane * p->oh + oy) * p->ow;
  r.iy0 = oy * p->sh - p->pt;
  r.ky0 = ember_first_tap(r.iy0, p->dh, p->kh);
  r.ky1 = ember_end_tap(r.iy0, p->dh, p->h, p->kh, r.ky0);
  return r;
}

/* The output at column ox of a row whose window rows are [ky0, ky1) from input row iy0
 * (cy of them counted by an average), through the taps inside the image. */
static inline float ember_pooln_one(const ember_pooln_p* p, const float* in, int32_t iy0,
                                    int32_t ky0, int32_t ky1, int32_t cy, int32_t ox) {
  const int32_t ix0 = ox * p->sw - p->pl;
  const int32_t kx0 = ember_first_tap(ix0, p->dw, p->kw);
  const int32_t kx1 = ember_end_tap(ix0, p->dw, p->w, p->kw, kx0);
  const int32_t cx = ember_pooln_count(ix0, p->dw, p->kw, p->w, p->pl, p->pr, p->include_pad);
  float acc = p->avg ? 0.0f : -INFINITY;
  int32_t ky, kx;
  for (ky = ky0; ky < ky1; ++ky) {
    const float* row = in + (size_t)(iy0 + ky * p->dh) * p->w + ix0;
    for (kx = kx0; kx < kx1; ++kx) {
      const float v = row[kx * p->dw];
      acc = p->avg ? acc + v : (v > acc ? v : acc);
    }
  }
  return p->avg ? acc / (float)(cy * cx > 0 ? cy * cx : 1) : acc;
}

#if EMBER_KV
#if defined(__AVX512F__)
#define EMBER_PN_V 16
#elif defined(__AVX__)
#define EMBER_PN_V 8
#else
#define EMBER_PN_V 4
#endif
#define EMBER_PN_VT EMBER_VT(EMBER_PN_V)

/* The even lanes of the 2V floats a, b (the columns a stride-2 window row starts at). */
#if defined(__clang__)
#if EMBER_PN_V == 16
#define EMBER_PN_EVEN(a, b) \
  __builtin_shufflevector(a, b, 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30)
#elif EMBER_PN_V == 8
#define EMBER_PN_EVEN(a, b) __builtin_shufflevector(a, b, 0, 2, 4, 6, 8, 10, 12, 14)
#else
#define EMBER_PN_EVEN(a, b) __builtin_shufflevector(a, b, 0, 2, 4, 6)
#endif
#else
#if EMBER_PN_V == 16
#define EMBER_PN_EVEN(a, b) \
  __builtin_shuffle(a, b, (ember_i16){0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30})
#elif EMBER_PN_V == 8
#define EMBER_PN_EVEN(a, b) __builtin_shuffle(a, b, (ember_i8){0, 2, 4, 6, 8, 10, 12, 14})
#else
#define EMBER_PN_EVEN(a, b) __builtin_shuffle(a, b, (ember_i4){0, 2, 4, 6})
#endif
#endif

/* The V taps at q, q + SW, ... (SW = 1 or 2, a constant where it is used). */
#define EMBER_PN_LOAD(q, SW)                                                                 \
  ((SW) == 1 ? EMBER_VLOAD(EMBER_PN_V, q)                                                    \
             : EMBER_PN_EVEN(EMBER_VLOAD(EMBER_PN_V, q), EMBER_VLOAD(EMBER_PN_V, (q) + EMBER_PN_V)))

/* The reduction `avg` names (sum or max) of two vectors. */
#define EMBER_PN_OP(avg, a, b) ((avg) ? (a) + (b) : EMBER_VMAX(EMBER_PN_V, a, b))

/* Floats of a row buffer (and of the per-column reciprocals): 32 KB of stack in all, rows of
 * up to ~4000 columns, on 64-bit hosts; 2 KB (rows of ~250 columns, wider ones take the scalar
 * loop) elsewhere: a microcontroller's stack is a few KB. A build may define it. */
#ifndef EMBER_PN_ROW
#if defined(__x86_64__) || defined(__aarch64__) || defined(_M_X64) || defined(_M_ARM64)
#define EMBER_PN_ROW 4096
#else
#define EMBER_PN_ROW 256
#endif
#endif

/* One output row through the row buffer `tmp` (its padding already holds the identity):
 * the window rows [ky0, ky1) reduced down each input column into tmp[pl + x], then output ox
 * reduced across tmp[ox * sw + kx * dw]. `avg`, SW (1, 2; 0: any, the second pass scalar) and
 * KW (the window's width; 0: p->kw) are constants at each call (always inlined: the branches
 * fold away, a constant width unrolls). */
EMBER_ALWAYS_INLINE void ember_pooln_row(const ember_pooln_p* p, const float* in, float* out,
                                         float* tmp, const float* rcx, int32_t iy0,
                                         int32_t ky0, int32_t ky1, float rcy, const int avg,
                                         const int32_t SW, const int32_t KW) {
  const int32_t V = EMBER_PN_V, kw = KW ? KW : p->kw, sw = SW ? SW : p->sw, dw = p->dw;
  const size_t pitch = (size_t)p->dh * p->w;
  const float* r0 = in + (size_t)(iy0 + ky0 * p->dh) * p->w;
  float* t = tmp + p->pl;
  int32_t x = 0, ky, kx, ox = 0;
  if (ky0 >= ky1) { /* every window row in the padding (ceil_mode) */
    for (; x < p->w; ++x) t[x] = avg ? 0.0f : -INFINITY;
  }
  /* V columns at a time; the tail as the last V (rewriting a few with the same values) */
  for (; ky0 < ky1 && x < p->w && p->w >= V; x += V) {
    const float* q;
    EMBER_PN_VT v;
    if (x + V > p->w) x = p->w - V;
    q = r0 + x;
    v = EMBER_VLOAD(EMBER_PN_V, q);
    for (ky = ky0 + 1; ky < ky1; ++ky) v = EMBER_PN_OP(avg, v, EMBER_VLOAD(EMBER_PN_V, q += pitch));
    EMBER_VSTORE(EMBER_PN_V, t + x, v);
  }
  for (; ky0 < ky1 && x < p->w; ++x) {
    const float* q = r0 + x;
    float v = *q;
    for (ky = ky0 + 1; ky < ky1; ++ky) {
      q += pitch;
      v = avg ? v + *q : (*q > v ? *q : v);
    }
    t[x] = v;
  }
  for (; SW && ox < p->ow && p->ow >= V; ox += V) {
    const float* q;
    EMBER_PN_VT a;
    if (ox + V > p->ow) ox = p->ow - V;
    q = tmp + (size_t)ox * SW;
    a = EMBER_PN_LOAD(q, SW);
    for (kx = 1; kx < kw; ++kx) a = EMBER_PN_OP(avg, a, EMBER_PN_LOAD(q + kx * dw, SW));
    if (avg) a *= rcy * EMBER_VLOAD(EMBER_PN_V, rcx + ox);
    EMBER_VSTORE(EMBER_PN_V, out + ox, a);
  }
  for (; ox < p->ow; ++ox) {
    const float* q = tmp + (size_t)ox * sw;
    float a = *q;
    for (kx = 1; kx < kw; ++kx) a = avg ? a + q[kx * dw] : (q[kx * dw] > a ? q[kx * dw] : a);
    out[ox] = avg ? a * (rcy * rcx[ox]) : a;
  }
}

/* One row with the stride and width as constants where they are the zoo's (1 or 2; 2, 3, 5). */
#define EMBER_PN_ROW_K(avg, SW)                                                              \
  if (p->kw == 3) {                                                                          \
    ember_pooln_row(p, r.in, r.out, tmp, rcx, r.iy0, r.ky0, r.ky1, rcy, avg, SW, 3);   \
  } else if (p->kw == 2) {                                                                   \
    ember_pooln_row(p, r.in, r.out, tmp, rcx, r.iy0, r.ky0, r.ky1, rcy, avg, SW, 2);   \
  } else if (p->kw == 5) {                                                                   \
    ember_pooln_row(p, r.in, r.out, tmp, rcx, r.iy0, r.ky0, r.ky1, rcy, avg, SW, 5);   \
  } else {                                                                                   \
    ember_pooln_row(p, r.in, r.out, tmp, rcx, r.iy0, r.ky0, r.ky1, rcy, avg, SW, 0);   \
  }

/* Output rows [lo, hi) of the (plane, row) items through a row buffer. */
EMBER_KFN void ember_pooln_sep_rows(const ember_pooln_p* p, int64_t lo, int64_t hi) {
  float tmp[EMBER_PN_ROW], rcx[EMBER_PN_ROW];
  const float fill = p->avg ? 0.0f : -INFINITY;
  int64_t item;
  int32_t x;
  for (x = 0; x < p->pl; ++x) tmp[x] = fill;
  for (x = p->pl + p->w; x < p->wp + 2 * EMBER_PN_V; ++x) tmp[x] = fill;
  for (x = 0; x < p->ow; ++x)
    rcx[x] = ember_pooln_reciprocal(ember_pooln_count(x * p->sw - p->pl, p->dw, p->kw, p->w,
                                                      p->pl, p->pr, p->include_pad));
  for (item = lo; item < hi; ++item) {
    const ember_pooln_item r = ember_pooln_item_at(p, item);
    const float rcy = ember_pooln_reciprocal(
        ember_pooln_count(r.iy0, p->dh, p->kh, p->h, p->pt, p->pb, p->include_pad));
    if (p->sw == 1 && p->avg) {
      EMBER_PN_ROW_K(1, 1)
    } else if (p->sw == 1) {
      EMBER_PN_ROW_K(0, 1)
    } else if (p->sw == 2 && p->avg) {
      EMBER_PN_ROW_K(1, 2)
    } else if (p->sw == 2) {
      EMBER_PN_ROW_K(0, 2)
    } else if (p->avg) {
      ember_pooln_row(p, r.in, r.out, tmp, rcx, r.iy0, r.ky0, r.ky1, rcy, 1, 0, 0);
    } else {
      ember_pooln_row(p, r.in, r.out, tmp, rcx, r.iy0, r.ky0, r.ky1, rcy, 0, 0, 0);
    }
  }
}
#undef EMBER_PN_ROW_K

/* Floats of the scratch a small plane is pooled in (two thirds its padded copy, a third the
 * flat results): 24 KB of stack on 64-bit hosts, 1.5 KB elsewhere (as EMBER_PN_ROW). */
#ifndef EMBER_PN_FLAT
#if defined(__x86_64__) || defined(__aarch64__) || defined(_M_X64) || defined(_M_ARM64)
#define EMBER_PN_FLAT 6144
#else
#define EMBER_PN_FLAT 384
#endif
#endif

/* One small plane (sh = sw = S, 1 or 2) through a padded copy: every window then lies inside
 * the copy, and the outputs at flat position j = oy * wp + ox read the copy at S * j + ky * dh
 * * wp + kx * dw, one 1-D stencil over the whole plane in vectors of V. The columns ox >= ow
 * of each row are computed and dropped (half of them at stride 2): the rows of a 7 x 7 map are
 * too short for a vector of 16 outputs, the flat positions are not. */
EMBER_ALWAYS_INLINE void ember_pooln_flat_plane(const ember_pooln_p* p, const float* in,
                                                float* out, float* buf, const float* rcx,
                                                const int avg, const int32_t S) {
  const int32_t V = EMBER_PN_V, wp = p->wp;
  const float fill = avg ? 0.0f : -INFINITY;
  const int32_t flat = p->oh * wp, steps = (flat + V - 1) / V;
  float* res = buf + 2 * (EMBER_PN_FLAT / 3);
  int32_t y, x, j, ky, kx;
  for (y = 0; y < p->hp; ++y) {
    float* row = buf + (size_t)y * wp;
    const int32_t iy = y - p->pt;
    if (iy < 0 || iy >= p->h) {
      for (x = 0; x < wp; ++x) row[x] = fill;
      continue;
    }
    for (x = 0; x < p->pl; ++x) row[x] = fill;
    __builtin_memcpy(row + p->pl, in + (size_t)iy * p->w, sizeof(float) * (size_t)p->w);
    for (x = p->pl + p->w; x < wp; ++x) row[x] = fill;
  }
  /* the last vector's loads run past the copy's rows: fill them */
  for (x = p->hp * wp; x < S * steps * V + (p->kh - 1) * p->dh * wp + (p->kw - 1) * p->dw + V;
       ++x)
    buf[x] = fill;
  for (j = 0; j < steps * V; j += V) {
    EMBER_PN_VT acc = EMBER_VSPLAT(EMBER_PN_V, fill);
    for (ky = 0; ky < p->kh; ++ky) {
      const float* q = buf + (size_t)S * j + (size_t)ky * p->dh * wp;
      for (kx = 0; kx < p->kw; ++kx) {
        EMBER_PN_VT v = EMBER_PN_LOAD(q + kx * p->dw, S);
        acc = avg ? acc + v : EMBER_VMAX(EMBER_PN_V, acc, v);
      }
    }
    EMBER_VSTORE(EMBER_PN_V, res + j, acc);
  }
  for (y = 0; y < p->oh; ++y) {
    const float* r = res + (size_t)y * wp;
    float* o = out + (size_t)y * p->ow;
    if (!avg) {
      for (x = 0; x < p->ow; ++x) o[x] = r[x];
      continue;
    }
    {
      const float rcy = ember_pooln_reciprocal(ember_pooln_count(
          y * p->sh - p->pt, p->dh, p->kh, p->h, p->pt, p->pb, p->include_pad));
      for (x = 0; x < p->ow; ++x) o[x] = r[x] * rcy * rcx[x];
    }
  }
}

/* Planes [lo, hi), each through its padded copy. */
EMBER_KFN void ember_pooln_flat(const ember_pooln_p* p, int64_t lo, int64_t hi) {
  float buf[EMBER_PN_FLAT], rcx[EMBER_PN_V];  /* flat planes have ow < V */
  int64_t plane;
  int32_t x;
  for (x = 0; x < p->ow; ++x)
    rcx[x] = ember_pooln_reciprocal(ember_pooln_count(x * p->sw - p->pl, p->dw, p->kw, p->w,
                                                      p->pl, p->pr, p->include_pad));
  for (plane = lo; plane < hi; ++plane) {
    const float* in = p->in + (size_t)plane * p->h * p->w;
    float* out = p->out + (size_t)plane * p->oh * p->ow;
    if (p->sw == 1 && p->avg) {
      ember_pooln_flat_plane(p, in, out, buf, rcx, 1, 1);
    } else if (p->sw == 1) {
      ember_pooln_flat_plane(p, in, out, buf, rcx, 0, 1);
    } else if (p->avg) {
      ember_pooln_flat_plane(p, in, out, buf, rcx, 1, 2);
    } else {
      ember_pooln_flat_plane(p, in, out, buf, rcx, 0, 2);
    }
  }
}
#endif /* EMBER_KV */

/* Output rows [lo, hi) of the (plane, row) items, one output at a time. */
EMBER_KFN void ember_pooln_rows(const ember_pooln_p* p, int64_t lo, int64_t hi) {
  int64_t item;
  for (item = lo; item < hi; ++item) {
    const ember_pooln_item r = ember_pooln_item_at(p, item);
    const int32_t cy =
        ember_pooln_count(r.iy0, p->dh, p->kh, p->h, p->pt, p->pb, p->include_pad);
    int32_t ox;
    for (ox = 0; ox < p->ow; ++ox) {
      r.out[ox] = ember_pooln_one(p, r.in, r.iy0, r.ky0, r.ky1, cy, ox);
    }
  }
}

/* Items [lo, hi) of n in the call's mode: rows, or planes for EMBER_PN_PLANES. */
static inline void ember_pooln_run(const ember_pooln_p* p, int64_t task, int64_t n) {
  const int64_t items = p->mode == EMBER_PN_PLANES ? p->planes : p->planes * p->oh;
  const int64_t lo = items * task / n, hi = items * (task + 1) / n;
#if EMBER_KV
  if (p->mode == EMBER_PN_PLANES) {
    ember_pooln_flat(p, lo, hi);
    return;
  }
  if (p->mode == EMBER_PN_ROWS) {
    ember_pooln_sep_rows(p, lo, hi);
    return;
  }
#endif
  ember_pooln_rows(p, lo, hi);
}

EMBER_KFN int ember_pooln_task(int task_id, TVMParallelGroupEnv* penv, void* cdata) {
  ember_pooln_run((const ember_pooln_p*)cdata, task_id, penv->num_task > 0 ? penv->num_task : 1);
  return 0;
}

/* The call's mode (the header comment) and its padded extents. */
static inline void ember_pooln_choose_mode(ember_pooln_p* p) {
  const int32_t wp = (p->ow - 1) * p->sw + (p->kw - 1) * p->dw + 1;
  const int32_t hp = (p->oh - 1) * p->sh + (p->kh - 1) * p->dh + 1;
  p->wp = wp > p->pl + p->w ? wp : p->pl + p->w;
  p->hp = hp > p->pt + p->h ? hp : p->pt + p->h;
  p->mode = EMBER_PN_SCALAR;
#if EMBER_KV
  {
    /* the flat copy: its reach (the last vector's loads), and the flat results */
    const int64_t flat = (int64_t)p->oh * p->wp + EMBER_PN_V;
    const int64_t reach = p->sw * flat + (int64_t)(p->kh - 1) * p->dh * p->wp +
                          (int64_t)(p->kw - 1) * p->dw + EMBER_PN_V;
    const int64_t copy = (int64_t)p->hp * p->wp > reach ? (int64_t)p->hp * p->wp : reach;
    if (p->ow < EMBER_PN_V && p->sh == p->sw && p->sw <= 2 &&
        copy <= 2 * (EMBER_PN_FLAT / 3) && flat <= EMBER_PN_FLAT - 2 * (EMBER_PN_FLAT / 3)) {
      p->mode = EMBER_PN_PLANES;
    } else if (p->wp + 2 * EMBER_PN_V <= EMBER_PN_ROW) {
      p->mode = EMBER_PN_ROWS;
    }
  }
#endif
}

/*! \brief Max (avg = 0) or average (avg = 1) pooling in NCHW; returns 0. */
#if EMBER_KERNEL_ALL || defined(EMBER_KOBJ_ember_pool2d_nchw)
EMBER_KENTRY int32_t ember_pool2d_nchw(EMBER_POOL2D_NCHW_PARAMS) {
  ember_pooln_p p;
  p.in = in; p.out = out; p.planes = (int64_t)n * c; p.h = h; p.w = w; p.oh = oh; p.ow = ow;
  p.kh = kh; p.kw = kw; p.sh = sh; p.sw = sw; p.dh = dh; p.dw = dw; p.pt = pt; p.pl = pl;
  p.pb = pb; p.pr = pr; p.avg = avg; p.include_pad = include_pad;
  ember_pooln_choose_mode(&p);
  if (threads) return TVMBackendParallelLaunch(ember_pooln_task, &p, 0);
  ember_pooln_run(&p, 0, 1);
  return 0;
}
#endif

/*! \brief One global pooling call. */
typedef struct {
  const float* in;
  float* out;
  int64_t planes, size;
  int32_t avg;
} ember_gpooln_p;

/* The max or mean of each of planes [lo, hi). */
EMBER_KFN void ember_gpooln_planes(const ember_gpooln_p* p, int64_t lo, int64_t hi) {
  const int avg = p->avg;
  int64_t plane;
  for (plane = lo; plane < hi; ++plane) {
    const float* x = p->in + (size_t)plane * p->size;
    float acc = avg ? 0.0f : -INFINITY;
    int64_t i = 0;
#if EMBER_KV
    const int32_t V = EMBER_PN_V;
    if (p->size >= V) {
      const EMBER_PN_VT init = EMBER_VSPLAT(EMBER_PN_V, avg ? 0.0f : -INFINITY);
      EMBER_PN_VT a0 = init, a1 = init, a2 = init, a3 = init;
      int32_t l;
      for (; i + 4 * V <= p->size; i += 4 * V) {
        EMBER_PN_VT v0 = EMBER_VLOAD(EMBER_PN_V, x + i);
        EMBER_PN_VT v1 = EMBER_VLOAD(EMBER_PN_V, x + i + V);
        EMBER_PN_VT v2 = EMBER_VLOAD(EMBER_PN_V, x + i + 2 * V);
        EMBER_PN_VT v3 = EMBER_VLOAD(EMBER_PN_V, x + i + 3 * V);
        if (avg) {
          a0 += v0; a1 += v1; a2 += v2; a3 += v3;
        } else {
          a0 = EMBER_VMAX(EMBER_PN_V, a0, v0); a1 = EMBER_VMAX(EMBER_PN_V, a1, v1);
          a2 = EMBER_VMAX(EMBER_PN_V, a2, v2); a3 = EMBER_VMAX(EMBER_PN_V, a3, v3);
        }
      }
      for (; i + V <= p->size; i += V) {
        EMBER_PN_VT v = EMBER_VLOAD(EMBER_PN_V, x + i);
        a0 = avg ? a0 + v : EMBER_VMAX(EMBER_PN_V, a0, v);
      }
      if (avg) {
        a0 = (a0 + a1) + (a2 + a3);
      } else {
        a0 = EMBER_VMAX(EMBER_PN_V, EMBER_VMAX(EMBER_PN_V, a0, a1),
                        EMBER_VMAX(EMBER_PN_V, a2, a3));
      }
      for (l = 0; l < V; ++l) acc = avg ? acc + a0[l] : (a0[l] > acc ? a0[l] : acc);
    }
#endif
    for (; i < p->size; ++i) acc = avg ? acc + x[i] : (x[i] > acc ? x[i] : acc);
    p->out[plane] = avg ? acc / (float)(p->size > 0 ? p->size : 1) : acc;
  }
}

EMBER_KFN int ember_gpooln_task(int task_id, TVMParallelGroupEnv* penv, void* cdata) {
  const ember_gpooln_p* p = (const ember_gpooln_p*)cdata;
  int64_t n = penv->num_task > 0 ? penv->num_task : 1;
  ember_gpooln_planes(p, p->planes * task_id / n, p->planes * (task_id + 1) / n);
  return 0;
}

/*! \brief The max (avg = 0) or mean (avg = 1) of each H x W plane of NCHW; returns 0. */
#if EMBER_KERNEL_ALL || defined(EMBER_KOBJ_ember_global_pool_nchw)
EMBER_KENTRY int32_t ember_global_pool_nchw(EMBER_GLOBAL_POOL_NCHW_PARAMS) {
  ember_gpooln_p p;
  p.in = in; p.out = out; p.planes = (int64_t)n * c; p.size = (int64_t)h * w; p.avg = avg;
  if (threads) return TVMBackendParallelLaunch(ember_gpooln_task, &p, 0);
  ember_gpooln_planes(&p, 0, p.planes);
  return 0;
}
#endif

#endif /* EMBER_KERNEL_BODIES */

#endif /* EMBER_KERNELS_POOL_NCHW_H_ */
