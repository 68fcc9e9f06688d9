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
/* The epilogue of one channel block as vectors: out = max(lo, pool * s + b), where a call
 * without scale, shift or relu has s = 1, b = 0, lo = -inf (the same results, NaN included:
 * EMBER_VMAX's second operand wins ties and NaN). Loaded once per output row. */
typedef struct {
  EMBER_VT(EMBER_L) s, b, lo;
} EMBER_PFN(ember_pool_epi);

static inline void EMBER_PFN(ember_pool_epi_load)(const ember_pool_p* p, int32_t cb,
                                                  EMBER_PFN(ember_pool_epi) * e) {
  e->s = p->scale ? EMBER_VLOAD(EMBER_L, p->scale + (size_t)cb * EMBER_L)
                  : EMBER_VSPLAT(EMBER_L, 1.0f);
  e->b = p->shift ? EMBER_VLOAD(EMBER_L, p->shift + (size_t)cb * EMBER_L)
                  : EMBER_VSPLAT(EMBER_L, 0.0f);
  e->lo = EMBER_VSPLAT(EMBER_L, p->relu ? 0.0f : -INFINITY);
}

/* The epilogue on one output vector, stored at out (vectors by pointer: a 16-lane vector
 * passed by value changes the ABI where AVX-512 is off; inlined, the pointers vanish). */
EMBER_ALWAYS_INLINE void EMBER_PFN(ember_pool_store)(const EMBER_PFN(ember_pool_epi) * e,
                                                     EMBER_VT(EMBER_L) * v, float* out) {
  *v *= e->s;
  *v += e->b;
  *v = EMBER_VMAX(EMBER_L, e->lo, *v);
  EMBER_VSTORE(EMBER_L, out, *v);
}

/* Quads of interior outputs (windows wholly inside the input's columns) ox, ox + 4, ...
 * (nq of them) of one output row, window rows [ky0, ky1): four independent accumulators per
 * quad, so that the latency of one pixel's chain of max/add (one per tap) does not bound the
 * loop. With KW > 0, the window's width KW and stride SW are constants (dilation 1): each
 * window row's 3 * SW + KW input columns are loaded once and fed to every output whose window
 * covers them (a 3x3 stride-2 pool loads 9 columns per window row for four outputs instead
 * of 12; yolov8's 5x5 stride-1 SPPF 8 instead of 20); KW = 0: p's sizes, in loops.
 * Always inlined into ember_pool_row_quads with constant `avg`, KW and SW, so that the whole
 * row is one loop: called per quad, the accumulators went through the stack and the call
 * cost more than the taps (resnet18's stem pool ran at half the rate of its input's reads). */
EMBER_ALWAYS_INLINE void EMBER_PFN(ember_pool_quads_k)(
    const ember_pool_p* p, const EMBER_PFN(ember_pool_epi) * e, const float* in, float* out,
    int32_t iy0, int32_t ky0, int32_t ky1, int32_t ox, int32_t nq, float scale, const int avg,
    const int32_t KW, const int32_t SW) {
  const int32_t L = EMBER_L;
  const int32_t sw = KW ? SW : p->sw;
  const size_t step = (size_t)sw * L, row_step = (size_t)p->dh * p->w * L;
  const EMBER_VT(EMBER_L) init = EMBER_VSPLAT(EMBER_L, avg ? 0.0f : -INFINITY);
  const float* base = in + ((size_t)(iy0 + ky0 * p->dh) * p->w + (ox * sw - p->pl)) * L;
  int32_t q, ky, c;
  for (q = 0; q < nq; ++q, base += 4 * step) {
    EMBER_VT(EMBER_L) a0 = init, a1 = init, a2 = init, a3 = init;
    const float* row = base;
    for (ky = ky0; ky < ky1; ++ky, row += row_step) {
      if (KW) {
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC unroll 24
#endif
        for (c = 0; c < 3 * SW + KW; ++c) {
          EMBER_VT(EMBER_L) v = EMBER_VLOAD(EMBER_L, row + (size_t)c * L);
#define EMBER_POOL_TAP(a, j) \
  if (c >= (j) * SW && c < (j) * SW + KW) a = avg ? a + v : EMBER_VMAX(EMBER_L, a, v)
          EMBER_POOL_TAP(a0, 0);
          EMBER_POOL_TAP(a1, 1);
          EMBER_POOL_TAP(a2, 2);
          EMBER_POOL_TAP(a3, 3);
#undef EMBER_POOL_TAP
        }
      } else {
        for (c = 0; c < p->kw; ++c) {
          const float* t = row + (size_t)c * p->dw * L;
          EMBER_VT(EMBER_L) v0 = EMBER_VLOAD(EMBER_L, t);
          EMBER_VT(EMBER_L) v1 = EMBER_VLOAD(EMBER_L, t + step);
          EMBER_VT(EMBER_L) v2 = EMBER_VLOAD(EMBER_L, t + 2 * step);
          EMBER_VT(EMBER_L) v3 = EMBER_VLOAD(EMBER_L, t + 3 * step);
          if (avg) {
            a0 += v0; a1 += v1; a2 += v2; a3 += v3;
          } else {
            a0 = EMBER_VMAX(EMBER_L, a0, v0); a1 = EMBER_VMAX(EMBER_L, a1, v1);
            a2 = EMBER_VMAX(EMBER_L, a2, v2); a3 = EMBER_VMAX(EMBER_L, a3, v3);
          }
        }
      }
    }
    if (avg) {
      a0 *= scale; a1 *= scale; a2 *= scale; a3 *= scale;
    }
    {
      float* o = out + (size_t)(ox + 4 * q) * L;
      EMBER_PFN(ember_pool_store)(e, &a0, o);
      EMBER_PFN(ember_pool_store)(e, &a1, o + L);
      EMBER_PFN(ember_pool_store)(e, &a2, o + 2 * L);
      EMBER_PFN(ember_pool_store)(e, &a3, o + 3 * L);
    }
  }
}

/* The interior quads of one output row (ember_pool_quads_k): the zoo's window shapes with
 * their width and stride as constants (max pools 3x3/2, 2x2/2, 5x5/1, 3x3/1; average pools
 * 2x2/2 and 3x3/1), any other through p's sizes (as fast for a 1-wide window). Each
 * specialisation costs compile time of the kernel object. `scale`: 1 / the taps of an
 * average. */
static void EMBER_PFN(ember_pool_row_quads)(const ember_pool_p* p,
                                            const EMBER_PFN(ember_pool_epi) * e,
                                            const float* in, float* out, int32_t iy0,
                                            int32_t ky0, int32_t ky1, int32_t ox, int32_t nq,
                                            float scale) {
  const int32_t k = p->dw == 1 ? p->kw : 0, s = p->sw;
#define EMBER_POOL_QUADS(avg_, kw_, sw_) \
  EMBER_PFN(ember_pool_quads_k)(p, e, in, out, iy0, ky0, ky1, ox, nq, scale, avg_, kw_, sw_)
  if (p->avg) {
    if (k == 2 && s == 2) EMBER_POOL_QUADS(1, 2, 2);
    else if (k == 3 && s == 1) EMBER_POOL_QUADS(1, 3, 1);
    else EMBER_POOL_QUADS(1, 0, 0);
  } else {
    if (k == 3 && s == 2) EMBER_POOL_QUADS(0, 3, 2);
    else if (k == 2 && s == 2) EMBER_POOL_QUADS(0, 2, 2);
    else if (k == 5 && s == 1) EMBER_POOL_QUADS(0, 5, 1);
    else if (k == 3 && s == 1) EMBER_POOL_QUADS(0, 3, 1);
    else EMBER_POOL_QUADS(0, 0, 0);
  }
#undef EMBER_POOL_QUADS
}
#endif

/* Output rows [lo, hi) of the (batch, channel block, row) items. */
EMBER_KFN void EMBER_PFN(ember_pool_rows)(const ember_pool_p* p, int64_t lo, int64_t hi) {
  const int32_t L = EMBER_L;
#if EMBER_KV
  /* the interior output columns (windows wholly inside the input's) [qlo, qhi], as quads */
  const int32_t qlo = (p->pl + p->sw - 1) / p->sw;
  const int32_t span = p->w - 1 - (p->kw - 1) * p->dw + p->pl;
  const int32_t qhi = span < 0 ? -1 : (span / p->sw < p->ow - 1 ? span / p->sw : p->ow - 1);
  const int32_t nq = qhi >= qlo ? (qhi - qlo + 1) / 4 : 0;
#endif
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
#if EMBER_KV
    EMBER_PFN(ember_pool_epi) epi;
    EMBER_PFN(ember_pool_epi_load)(p, cb, &epi);
#endif
    for (ox = 0; ox < p->ow; ++ox) {
#if EMBER_KV
      /* interior columns four at a time; the edges (taps in the padding) one by one */
      if (ox == qlo && nq > 0) {
        const int32_t cx = p->kw; /* every tap counts, with or without count_include_pad */
        const float scale = 1.0f / (float)(cy * cx > 0 ? cy * cx : 1);
        EMBER_PFN(ember_pool_row_quads)(p, &epi, in, out, iy0, ky0, ky1, ox, nq, scale);
        ox += 4 * nq;
        if (ox >= p->ow) break;
      }
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
      EMBER_PFN(ember_pool_store)(&epi, &acc, out + (size_t)ox * L);
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
