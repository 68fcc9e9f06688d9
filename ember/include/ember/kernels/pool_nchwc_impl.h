/*!
 * \file ember/kernels/pool_nchwc_impl.h
 * \brief The pooling kernel for one lane count: included by pool_nchwc.h with EMBER_L set to
 *        4, 8 and 16 (no include guard on purpose). Names end in _x<L>.
 */
#ifndef EMBER_L
#error "pool_nchwc_impl.h is included by ember/kernels/pool_nchwc.h only"
#endif

#ifndef EMBER_CAT
#define EMBER_CAT_(a, b) a##b
#define EMBER_CAT(a, b) EMBER_CAT_(a, b)
#endif
#define EMBER_PFN(name) EMBER_CAT(name, EMBER_CAT(_x, EMBER_L))

#if EMBER_KV
/* The epilogue on one output vector of channel block cb, stored at out (by pointer: a
 * 16-lane vector returned by value changes the ABI where AVX-512 is off). */
static inline void EMBER_PFN(ember_pool_store)(const ember_pool_p* p, EMBER_VT(EMBER_L) * v,
                                               int32_t cb, float* out) {
  if (p->scale) *v *= EMBER_VLOAD(EMBER_L, p->scale + (size_t)cb * EMBER_L);
  if (p->shift) *v += EMBER_VLOAD(EMBER_L, p->shift + (size_t)cb * EMBER_L);
  /* max(0, v): the second operand wins ties and NaN, so NaN propagates as numpy's */
  if (p->relu) *v = EMBER_VMAX(EMBER_L, EMBER_VSPLAT(EMBER_L, 0.0f), *v);
  EMBER_VSTORE(EMBER_L, out, *v);
}

/* Four neighbouring outputs' accumulators (averages scaled) stored at out (by pointer, as
 * ember_pool_store's). */
static inline void EMBER_PFN(ember_pool_quad_store)(const ember_pool_p* p, EMBER_VT(EMBER_L) * a0,
                                                    EMBER_VT(EMBER_L) * a1, EMBER_VT(EMBER_L) * a2,
                                                    EMBER_VT(EMBER_L) * a3, const int avg,
                                                    float scale, int32_t cb, float* out) {
  if (avg) {
    *a0 *= scale; *a1 *= scale; *a2 *= scale; *a3 *= scale;
  }
  EMBER_PFN(ember_pool_store)(p, a0, cb, out);
  EMBER_PFN(ember_pool_store)(p, a1, cb, out + EMBER_L);
  EMBER_PFN(ember_pool_store)(p, a2, cb, out + 2 * EMBER_L);
  EMBER_PFN(ember_pool_store)(p, a3, cb, out + 3 * EMBER_L);
}

/* Four neighbouring output pixels of one row whose windows lie wholly inside the input's
 * columns, window rows [ky0, ky1): four independent accumulators, so that the latency of one
 * pixel's chain of max/add (one per tap) does not bound the loop (a 5x5 max pool is 25
 * dependent maxes per pixel). `avg` is a constant at each call (the loop is specialised). */
static inline void EMBER_PFN(ember_pool_quad)(const ember_pool_p* p, const float* in,
                                               float* out, int32_t iy0, int32_t ky0,
                                               int32_t ky1, int32_t ox, float scale,
                                               const int avg, int32_t cb) {
  const int32_t L = EMBER_L;
  const size_t step = (size_t)p->sw * L;
  const EMBER_VT(EMBER_L) init = EMBER_VSPLAT(EMBER_L, avg ? 0.0f : -INFINITY);
  EMBER_VT(EMBER_L) a0 = init, a1 = init, a2 = init, a3 = init;
  int32_t ky, kx;
  for (ky = ky0; ky < ky1; ++ky) {
    const float* row = in + ((size_t)(iy0 + ky * p->dh) * p->w + (ox * p->sw - p->pl)) * L;
    for (kx = 0; kx < p->kw; ++kx) {
      const float* q = row + (size_t)kx * p->dw * L;
      EMBER_VT(EMBER_L) v0 = EMBER_VLOAD(EMBER_L, q);
      EMBER_VT(EMBER_L) v1 = EMBER_VLOAD(EMBER_L, q + step);
      EMBER_VT(EMBER_L) v2 = EMBER_VLOAD(EMBER_L, q + 2 * step);
      EMBER_VT(EMBER_L) v3 = EMBER_VLOAD(EMBER_L, q + 3 * step);
      if (avg) {
        a0 += v0; a1 += v1; a2 += v2; a3 += v3;
      } else {
        a0 = EMBER_VMAX(EMBER_L, a0, v0); a1 = EMBER_VMAX(EMBER_L, a1, v1);
        a2 = EMBER_VMAX(EMBER_L, a2, v2); a3 = EMBER_VMAX(EMBER_L, a3, v3);
      }
    }
  }
  EMBER_PFN(ember_pool_quad_store)(p, &a0, &a1, &a2, &a3, avg, scale, cb, out + (size_t)ox * L);
}

/* ember_pool_quad with the window's width KW and the stride SW known at compile time (and
 * dilation 1): each window row's 3 * SW + KW input columns are loaded once and fed to every
 * output whose window covers them. A 3x3 stride-2 pool loads 9 columns per window row for the
 * four outputs instead of 12, a 2x2 stride-2 one 8 instead of 8 but with no tap loop, yolov8's
 * 5x5 stride-1 SPPF 8 instead of 20. Always inlined, so the column tests fold away. */
#if defined(__GNUC__)
__attribute__((always_inline))
#endif
static inline void EMBER_PFN(ember_pool_quad_k)(const ember_pool_p* p, const float* in,
                                                 float* out, int32_t iy0, int32_t ky0,
                                                 int32_t ky1, int32_t ox, float scale,
                                                 const int avg, int32_t cb, const int32_t KW,
                                                 const int32_t SW) {
  const int32_t L = EMBER_L;
  const EMBER_VT(EMBER_L) init = EMBER_VSPLAT(EMBER_L, avg ? 0.0f : -INFINITY);
  EMBER_VT(EMBER_L) a0 = init, a1 = init, a2 = init, a3 = init;
  int32_t ky, c;
  for (ky = ky0; ky < ky1; ++ky) {
    const float* row = in + ((size_t)(iy0 + ky * p->dh) * p->w + (ox * SW - p->pl)) * L;
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC unroll 24
#endif
    for (c = 0; c < 3 * SW + KW; ++c) {
      EMBER_VT(EMBER_L) v = EMBER_VLOAD(EMBER_L, row + (size_t)c * L);
#define EMBER_POOL_TAP(a, j)                                                                   \
  if (c >= (j) * SW && c < (j) * SW + KW) a = avg ? a + v : EMBER_VMAX(EMBER_L, a, v)
      EMBER_POOL_TAP(a0, 0);
      EMBER_POOL_TAP(a1, 1);
      EMBER_POOL_TAP(a2, 2);
      EMBER_POOL_TAP(a3, 3);
#undef EMBER_POOL_TAP
    }
  }
  EMBER_PFN(ember_pool_quad_store)(p, &a0, &a1, &a2, &a3, avg, scale, cb, out + (size_t)ox * L);
}

/* Four interior outputs: the shapes of the zoo's pools with their width and stride as
 * constants (ember_pool_quad_k), any other through the loops of ember_pool_quad. */
static inline void EMBER_PFN(ember_pool_quad_any)(const ember_pool_p* p, const float* in,
                                                   float* out, int32_t iy0, int32_t ky0,
                                                   int32_t ky1, int32_t ox, float scale,
                                                   const int avg, int32_t cb) {
#define EMBER_POOL_QUAD_K(kw_, sw_)                                                            \
  if (p->kw == (kw_) && p->sw == (sw_)) {                                                      \
    EMBER_PFN(ember_pool_quad_k)(p, in, out, iy0, ky0, ky1, ox, scale, avg, cb, kw_, sw_);     \
    return;                                                                                    \
  }
  if (p->dw == 1 || p->kw == 1) {
    EMBER_POOL_QUAD_K(3, 2)
    EMBER_POOL_QUAD_K(2, 2)
    EMBER_POOL_QUAD_K(5, 1)
    EMBER_POOL_QUAD_K(3, 1)
    EMBER_POOL_QUAD_K(1, 1)
  }
#undef EMBER_POOL_QUAD_K
  EMBER_PFN(ember_pool_quad)(p, in, out, iy0, ky0, ky1, ox, scale, avg, cb);
}

/* Whether output column ox's window lies wholly inside the input's columns. */
static inline int EMBER_PFN(ember_pool_inside)(const ember_pool_p* p, int32_t ox) {
  const int32_t ix0 = ox * p->sw - p->pl;
  return ix0 >= 0 && ix0 + (p->kw - 1) * p->dw < p->w;
}
#endif

/* Output rows [lo, hi) of the (batch, channel block, row) items. */
EMBER_KFN void EMBER_PFN(ember_pool_rows)(const ember_pool_p* p, int64_t lo, int64_t hi) {
  const int32_t L = EMBER_L;
  int64_t item;
  for (item = lo; item < hi; ++item) {
    const int32_t oy = (int32_t)(item % p->oh);
    const int64_t plane = item / p->oh;
    const int32_t cb = (int32_t)(plane % p->cblocks);
    const float* in = p->in + (size_t)plane * p->h * p->w * L;
    float* out = p->out + ((size_t)plane * p->oh + oy) * p->ow * L;
    const int32_t iy0 = oy * p->sh - p->pt;
    const int32_t ky0 = ember_first_tap(iy0, p->dh, p->kh);
    const int32_t ky1 = ember_end_tap(iy0, p->dh, p->h, p->kh, ky0);
    const int32_t cy = p->include_pad ? ember_pool_taps(iy0, p->dh, p->kh, -p->pt, p->h + p->pb)
                                      : ky1 - ky0;
    int32_t ox, ky, kx, l;
    for (ox = 0; ox < p->ow; ++ox) {
#if EMBER_KV
      /* interior columns four at a time; the edges (taps in the padding) one by one */
      while (ox + 3 < p->ow && EMBER_PFN(ember_pool_inside)(p, ox) &&
             EMBER_PFN(ember_pool_inside)(p, ox + 3)) {
        const int32_t cx = p->kw;  /* every tap counts, with or without count_include_pad */
        const float scale = 1.0f / (float)(cy * cx > 0 ? cy * cx : 1);
        if (p->avg) {
          EMBER_PFN(ember_pool_quad_any)(p, in, out, iy0, ky0, ky1, ox, scale, 1, cb);
        } else {
          EMBER_PFN(ember_pool_quad_any)(p, in, out, iy0, ky0, ky1, ox, scale, 0, cb);
        }
        ox += 4;
      }
      if (ox >= p->ow) break;
#endif
      const int32_t ix0 = ox * p->sw - p->pl;
      const int32_t kx0 = ember_first_tap(ix0, p->dw, p->kw);
      const int32_t kx1 = ember_end_tap(ix0, p->dw, p->w, p->kw, kx0);
      const int32_t cx = p->include_pad
                             ? ember_pool_taps(ix0, p->dw, p->kw, -p->pl, p->w + p->pr)
                             : kx1 - kx0;
#if EMBER_KV
      EMBER_VT(EMBER_L) acc = EMBER_VSPLAT(EMBER_L, p->avg ? 0.0f : -INFINITY);
      for (ky = ky0; ky < ky1; ++ky) {
        const float* row = in + ((size_t)(iy0 + ky * p->dh) * p->w) * L;
        for (kx = kx0; kx < kx1; ++kx) {
          EMBER_VT(EMBER_L) v = EMBER_VLOAD(EMBER_L, row + (size_t)(ix0 + kx * p->dw) * L);
          if (p->avg) {
            acc += v;
          } else {
            acc = EMBER_VMAX(EMBER_L, acc, v);
          }
        }
      }
      if (p->avg) acc *= 1.0f / (float)(cy * cx > 0 ? cy * cx : 1);
      EMBER_PFN(ember_pool_store)(p, &acc, cb, out + (size_t)ox * L);
      (void)l;
#else
      for (l = 0; l < L; ++l) {
        float acc = p->avg ? 0.0f : -INFINITY;
        for (ky = ky0; ky < ky1; ++ky) {
          for (kx = kx0; kx < kx1; ++kx) {
            float v = in[((size_t)(iy0 + ky * p->dh) * p->w + (ix0 + kx * p->dw)) * L + l];
            acc = p->avg ? acc + v : (v > acc ? v : acc);
          }
        }
        const int32_t c = cb * L + l;
        if (p->avg) acc /= (float)(cy * cx > 0 ? cy * cx : 1);
        if (p->scale) acc *= p->scale[c];
        if (p->shift) acc += p->shift[c];
        if (p->relu && !(acc >= 0.0f)) acc = acc != acc ? acc : 0.0f;
        out[(size_t)ox * L + l] = acc;
      }
#endif
    }
  }
}

EMBER_KFN int EMBER_PFN(ember_pool_task)(int task_id, TVMParallelGroupEnv* penv, void* cdata) {
  const ember_pool_p* p = (const ember_pool_p*)cdata;
  int64_t total = (int64_t)p->n * p->cblocks * p->oh;
  int64_t n = penv->num_task > 0 ? penv->num_task : 1;
  EMBER_PFN(ember_pool_rows)(p, total * task_id / n, total * (task_id + 1) / n);
  return 0;
}

/*! \brief Max (avg = 0) or average (avg = 1) pooling in NCHW[L]c; returns 0. */
#if EMBER_KERNEL_ALL || defined(EMBER_KOBJ_ember_pool2d_nchwc)
EMBER_KENTRY int32_t EMBER_PFN(ember_pool2d_nchwc)(EMBER_POOL2D_NCHWC_PARAMS) {
  ember_pool_p p;
  p.in = in; p.out = out; p.n = n; p.cblocks = cblocks; p.h = h; p.w = w; p.oh = oh;
  p.ow = ow; p.kh = kh; p.kw = kw; p.sh = sh; p.sw = sw; p.dh = dh; p.dw = dw; p.pt = pt;
  p.pl = pl; p.pb = pb; p.pr = pr; p.avg = avg; p.include_pad = include_pad;
  p.scale = scale; p.shift = shift; p.relu = relu;
  if (threads) return TVMBackendParallelLaunch(EMBER_PFN(ember_pool_task), &p, 0);
  EMBER_PFN(ember_pool_rows)(&p, 0, (int64_t)n * cblocks * oh);
  return 0;
}
#endif

#undef EMBER_PFN
