/*!
 * \file ember/kernels/conv_fewoc_impl.h
 * \brief The few-output-channel conv for one input block width: included by conv_fewoc.h
 *        with EMBER_L set to 8 and 16 (no include guard on purpose). Names end in _x<L>.
 */
#ifndef EMBER_L
#error "conv_fewoc_impl.h is included by ember/kernels/conv_fewoc.h only"
#endif

#ifndef EMBER_CAT
#define EMBER_CAT_(a, b) a##b
#define EMBER_CAT(a, b) EMBER_CAT_(a, b)
#endif
#define EMBER_FFN(name) EMBER_CAT(name, EMBER_CAT(_x, EMBER_L))

#if EMBER_KV
#define EMBER_FV EMBER_VT(EMBER_L)
#define EMBER_FSHUF __builtin_shufflevector

/* The transpose-add tree: a[j] (L vectors, overwritten) -> r whose lane j is the sum of
 * a[j]'s lanes. Each level halves the vectors: a pair's lanes are split in two halves that
 * are added, so each source keeps half as many partial lanes, packed in source order. */
__attribute__((always_inline)) static inline void EMBER_FFN(ember_fewoc_reduce)(EMBER_FV* a, EMBER_FV* r) {
  int32_t i;
#if EMBER_L == 16
  for (i = 0; i < 8; ++i)
    a[i] = EMBER_FSHUF(a[2 * i], a[2 * i + 1], 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21,
                       22, 23) +
           EMBER_FSHUF(a[2 * i], a[2 * i + 1], 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27,
                       28, 29, 30, 31);
  for (i = 0; i < 4; ++i)
    a[i] = EMBER_FSHUF(a[2 * i], a[2 * i + 1], 0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24,
                       25, 26, 27) +
           EMBER_FSHUF(a[2 * i], a[2 * i + 1], 4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28,
                       29, 30, 31);
  for (i = 0; i < 2; ++i)
    a[i] = EMBER_FSHUF(a[2 * i], a[2 * i + 1], 0, 1, 4, 5, 8, 9, 12, 13, 16, 17, 20, 21, 24,
                       25, 28, 29) +
           EMBER_FSHUF(a[2 * i], a[2 * i + 1], 2, 3, 6, 7, 10, 11, 14, 15, 18, 19, 22, 23, 26,
                       27, 30, 31);
  *r = EMBER_FSHUF(a[0], a[1], 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30) +
       EMBER_FSHUF(a[0], a[1], 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
#else
  for (i = 0; i < 4; ++i)
    a[i] = EMBER_FSHUF(a[2 * i], a[2 * i + 1], 0, 1, 2, 3, 8, 9, 10, 11) +
           EMBER_FSHUF(a[2 * i], a[2 * i + 1], 4, 5, 6, 7, 12, 13, 14, 15);
  for (i = 0; i < 2; ++i)
    a[i] = EMBER_FSHUF(a[2 * i], a[2 * i + 1], 0, 1, 4, 5, 8, 9, 12, 13) +
           EMBER_FSHUF(a[2 * i], a[2 * i + 1], 2, 3, 6, 7, 10, 11, 14, 15);
  *r = EMBER_FSHUF(a[0], a[1], 0, 2, 4, 6, 8, 10, 12, 14) +
       EMBER_FSHUF(a[0], a[1], 1, 3, 5, 7, 9, 11, 13, 15);
#endif
}

/* `tiles` register tiles of P = L / OC pixels from output column ox of row oy (kernel rows
 * ky0..ky1 inside the image, every column tap inside), stored from dst on. OC is a constant
 * after inlining, so the accumulators and weights become registers. */
__attribute__((always_inline)) static inline void EMBER_FFN(ember_fewoc_tiles)(
    const ember_fewoc_p* p, int32_t b, const float* inb, int32_t oy, int32_t ox, int32_t ky0,
    int32_t ky1, float* dst, int32_t tiles, const int32_t OC) {
  const int32_t P = EMBER_L / OC, L = EMBER_L;
  const int64_t step = (int64_t)p->sw * L; /* between neighbouring pixels' inputs */
  const EMBER_FV bias = EMBER_VLOAD(EMBER_L, p->bias_tile);
  int32_t t, c, ky, kx, q, o, i;
  const int64_t plane = (int64_t)p->h * p->wd * L;        /* between input blocks */
  const int64_t wstep = (int64_t)p->kh * p->kw * OC * L;  /* between their weights */
  for (t = 0; t < tiles; ++t, ox += P, dst += L) {
    EMBER_FV acc[EMBER_L], r;
    EMBER_KUNROLL
    for (i = 0; i < L; ++i) acc[i] = EMBER_VZERO(EMBER_L);
    for (ky = ky0; ky < ky1; ++ky) {
      const int64_t iy = (int64_t)oy * p->sh - p->pt + (int64_t)ky * p->dh;
      for (kx = 0; kx < p->kw; ++kx) {
        const float* xp = inb + (iy * p->wd + (int64_t)ox * p->sw - p->pl + kx * p->dw) * L;
        const float* wp = p->w + ((int64_t)ky * p->kw + kx) * OC * L;
        for (c = 0; c < p->icb; ++c, xp += plane, wp += wstep) {
          EMBER_FV wv[EMBER_L];
          if (P == 1) {
            /* one pixel: each weight vector is used once, so it is the FMA's memory operand;
             * held in registers, the L weights and L accumulators would not fit (a spilled
             * accumulator made DCGAN's 128 -> 3 transposed conv 1.8x onnxruntime) */
            const EMBER_FV x = EMBER_VLOAD(EMBER_L, xp);
            EMBER_KUNROLL
            for (o = 0; o < OC; ++o)
              acc[o] = EMBER_VFMA(EMBER_L, acc[o], x, EMBER_VLOAD(EMBER_L, wp + o * L));
            continue;
          }
          EMBER_KUNROLL
          for (o = 0; o < OC; ++o) {
            wv[o] = EMBER_VLOAD_REG(EMBER_L, wp + o * L);
            EMBER_VPIN(EMBER_L, wv[o]);
          }
          EMBER_KUNROLL
          for (q = 0; q < P; ++q) {
            const EMBER_FV x = EMBER_VLOAD(EMBER_L, xp + q * step);
            EMBER_KUNROLL
            for (o = 0; o < OC; ++o) acc[q * OC + o] = EMBER_VFMA(EMBER_L, acc[q * OC + o], x, wv[o]);
          }
        }
      }
    }
    EMBER_FFN(ember_fewoc_reduce)(acc, &r);
    r += bias;
    if (p->ish) {
      /* 2x2 phases of one channel inside the crop: a tile is 2P columns of two rows, each
       * the lanes of every other phase pair */
      const int32_t y0 = oy * 2 - p->ioff_h, x0 = ox * 2 - p->ioff_w;
      if (OC == 4 && p->quad && y0 >= 0 && y0 + 1 < p->ioh && x0 >= 0 && x0 + 2 * P <= p->iow) {
        float* o = p->out + ((int64_t)b * p->ioh + y0) * p->iow + x0;
#if EMBER_L == 16
        EMBER_VSTORE(8, o, EMBER_FSHUF(r, r, 0, 1, 4, 5, 8, 9, 12, 13));
        EMBER_VSTORE(8, o + p->iow, EMBER_FSHUF(r, r, 2, 3, 6, 7, 10, 11, 14, 15));
#else
        EMBER_VSTORE(4, o, EMBER_FSHUF(r, r, 0, 1, 4, 5));
        EMBER_VSTORE(4, o + p->iow, EMBER_FSHUF(r, r, 2, 3, 6, 7));
#endif
      } else {
        float v[EMBER_L];
        EMBER_VSTORE(EMBER_L, v, r);
        ember_fewoc_scatter(p, b, oy, ox, v, L);
      }
    } else {
      EMBER_VSTORE(EMBER_L, dst, r);
    }
  }
}

EMBER_KFN void EMBER_FFN(ember_fewoc_tiles4)(const ember_fewoc_p* p, int32_t b,
                                             const float* inb, int32_t oy, int32_t ox,
                                             int32_t ky0, int32_t ky1, float* dst,
                                             int32_t tiles) {
  EMBER_FFN(ember_fewoc_tiles)(p, b, inb, oy, ox, ky0, ky1, dst, tiles, 4);
}

EMBER_KFN void EMBER_FFN(ember_fewoc_tiles8)(const ember_fewoc_p* p, int32_t b,
                                             const float* inb, int32_t oy, int32_t ox,
                                             int32_t ky0, int32_t ky1, float* dst,
                                             int32_t tiles) {
  EMBER_FFN(ember_fewoc_tiles)(p, b, inb, oy, ox, ky0, ky1, dst, tiles, 8);
}

#if EMBER_L == 16
EMBER_KFN void EMBER_FFN(ember_fewoc_tiles16)(const ember_fewoc_p* p, int32_t b,
                                              const float* inb, int32_t oy, int32_t ox,
                                              int32_t ky0, int32_t ky1, float* dst,
                                              int32_t tiles) {
  EMBER_FFN(ember_fewoc_tiles)(p, b, inb, oy, ox, ky0, ky1, dst, tiles, 16);
}
#endif
#endif /* EMBER_KV */

/* One output pixel (all OC channels, the taps inside the image), stored at dst. */
EMBER_KFN void EMBER_FFN(ember_fewoc_pixel)(const ember_fewoc_p* p, const float* inb,
                                            int32_t oy, int32_t ox, int32_t ky0, int32_t ky1,
                                            float* dst) {
  const int32_t L = EMBER_L, oc = p->oc;
  const int32_t ix0 = ox * p->sw - p->pl;
  const int32_t kx0 = ember_first_tap(ix0, p->dw, p->kw);
  const int32_t kx1 = ember_end_tap(ix0, p->dw, p->wd, p->kw, kx0);
  int32_t c, ky, kx, o, l;
#if EMBER_KV
  EMBER_FV acc[16];
  for (o = 0; o < oc; ++o) acc[o] = EMBER_VZERO(EMBER_L);
#else
  float acc[16][EMBER_L];
  for (o = 0; o < oc; ++o)
    for (l = 0; l < L; ++l) acc[o][l] = 0.0f;
#endif
  for (c = 0; c < p->icb; ++c) {
    for (ky = ky0; ky < ky1; ++ky) {
      const int64_t iy = (int64_t)oy * p->sh - p->pt + (int64_t)ky * p->dh;
      const float* row = inb + (c * (int64_t)p->h + iy) * p->wd * L;
      for (kx = kx0; kx < kx1; ++kx) {
        const float* xp = row + (int64_t)(ix0 + kx * p->dw) * L;
        const float* wp = p->w + ((int64_t)((c * p->kh + ky) * p->kw + kx) * oc) * L;
#if EMBER_KV
        const EMBER_FV x = EMBER_VLOAD(EMBER_L, xp);
        for (o = 0; o < oc; ++o)
          acc[o] = EMBER_VFMA(EMBER_L, acc[o], x, EMBER_VLOAD(EMBER_L, wp + o * L));
#else
        for (o = 0; o < oc; ++o)
          for (l = 0; l < L; ++l) acc[o][l] += xp[l] * wp[o * L + l];
#endif
      }
    }
  }
  for (o = 0; o < oc; ++o) {
    float s = p->bias[o];
    for (l = 0; l < L; ++l) s += acc[o][l];
    dst[o] = s;
  }
}

/* One output pixel, stored in the blocked output or scattered into the interleaved one. */
static inline void EMBER_FFN(ember_fewoc_put_pixel)(const ember_fewoc_p* p, int32_t b,
                                                    const float* inb, int32_t oy, int32_t ox,
                                                    int32_t ky0, int32_t ky1, float* row) {
  float v[16];
  if (!p->ish) {
    EMBER_FFN(ember_fewoc_pixel)(p, inb, oy, ox, ky0, ky1, row + (int64_t)ox * p->oc);
    return;
  }
  EMBER_FFN(ember_fewoc_pixel)(p, inb, oy, ox, ky0, ky1, v);
  ember_fewoc_scatter(p, b, oy, ox, v, p->oc);
}

/* Output rows [begin, end) of the flattened (batch, row) range, with their activation. */
EMBER_KFN void EMBER_FFN(ember_fewoc_rows)(const ember_fewoc_p* p, int64_t begin, int64_t end) {
  const int32_t L = EMBER_L;
  int64_t item;
  for (item = begin; item < end; ++item) {
    const int32_t b = (int32_t)(item / p->oh), oy = (int32_t)(item % p->oh);
    const float* inb = p->in + (int64_t)b * p->icb * p->h * p->wd * L;
    float* row = p->ish ? p->out : p->out + item * p->ow * p->oc; /* blocked: its row */
    const int32_t iy0 = oy * p->sh - p->pt;
    const int32_t ky0 = ember_first_tap(iy0, p->dh, p->kh);
    const int32_t ky1 = ember_end_tap(iy0, p->dh, p->h, p->kh, ky0);
    int32_t ox = 0;
    for (; ox < p->x0 && ox < p->ow; ++ox)
      EMBER_FFN(ember_fewoc_put_pixel)(p, b, inb, oy, ox, ky0, ky1, row);
#if EMBER_KV
    {
      const int32_t per = L / p->oc, tiles = p->x1 > ox ? (p->x1 - ox) / per : 0;
      if (tiles > 0) {
#if EMBER_L == 16
        if (p->oc == 16)
          EMBER_FFN(ember_fewoc_tiles16)(p, b, inb, oy, ox, ky0, ky1, row + (int64_t)ox * p->oc,
                                         tiles);
        else
#endif
        if (p->oc == 8)
          EMBER_FFN(ember_fewoc_tiles8)(p, b, inb, oy, ox, ky0, ky1, row + (int64_t)ox * p->oc,
                                        tiles);
        else
          EMBER_FFN(ember_fewoc_tiles4)(p, b, inb, oy, ox, ky0, ky1, row + (int64_t)ox * p->oc,
                                        tiles);
        ox += tiles * per;
      }
    }
#endif
    for (; ox < p->ow; ++ox)
      EMBER_FFN(ember_fewoc_put_pixel)(p, b, inb, oy, ox, ky0, ky1, row);
    if (p->ish) {
      ember_fewoc_act_rows(p, b, oy);
    } else {
      ember_fewoc_act_row(p, row, (int64_t)p->ow * p->oc);
    }
  }
}

EMBER_KFN int EMBER_FFN(ember_fewoc_task)(int task_id, TVMParallelGroupEnv* penv, void* cdata) {
  const ember_fewoc_p* p = (const ember_fewoc_p*)cdata;
  const int64_t total = (int64_t)p->n * p->oh;
  const int64_t tasks = penv->num_task > 0 ? penv->num_task : 1;
  EMBER_FFN(ember_fewoc_rows)(p, total * task_id / tasks, total * (task_id + 1) / tasks);
  return 0;
}

/*! \brief The conv (conv_fewoc.h); returns 0, or -1 when the workspace cannot be had. */
#if EMBER_KERNEL_ALL || defined(EMBER_KOBJ_ember_conv2d_fewoc)
EMBER_KENTRY int32_t EMBER_FFN(ember_conv2d_fewoc)(EMBER_CONV2D_FEWOC_PARAMS) {
  const int32_t L = EMBER_L;
  const int64_t taps = (int64_t)icb * kh * kw;
  const int64_t reach = (int64_t)wd - 1 - (int64_t)(kw - 1) * dw + pl;
  ember_fewoc_p p;
  float* wt;
  int64_t t;
  int32_t o, l, rc = 0;
  if (oc < 1 || oc > L || L % oc) return -1;
  wt = (float*)TVMBackendAllocWorkspace(1, 0, (uint64_t)(taps * oc * L) * sizeof(float), 2, 32);
  if (wt == NULL) return -1;
  for (t = 0; t < taps; ++t) /* [CB][OC] per tap -> [OC][CB] */
    for (o = 0; o < oc; ++o)
      for (l = 0; l < L; ++l) wt[(t * oc + o) * L + l] = w[(t * L + l) * oc + o];
  p.in = in; p.w = wt; p.bias = bias; p.out = out; p.n = n; p.icb = icb; p.h = h; p.wd = wd;
  p.oc = oc; p.oh = oh; p.ow = ow; p.kh = kh; p.kw = kw; p.sh = sh; p.sw = sw; p.dh = dh;
  p.dw = dw; p.pt = pt; p.pl = pl; p.p0 = lo; p.p1 = hi;
  p.act = ember_fewoc_act(act, &p.p0, &p.p1);
  p.x0 = (pl + sw - 1) / sw;
  if (p.x0 > ow) p.x0 = ow;
  p.x1 = reach < 0 ? 0 : (int32_t)(reach / sw + 1);
  if (p.x1 > ow) p.x1 = ow;
  if (p.x1 < p.x0) p.x1 = p.x0;
  for (l = 0; l < L; ++l) p.bias_tile[l] = bias[l % oc];
  p.ish = ish; p.isw = isw; p.ioff_h = ioff_h; p.ioff_w = ioff_w; p.ioh = ioh; p.iow = iow;
  p.ocp = ish > 0 && isw > 0 ? ocr / (ish * isw) : 0;
  if (ish && (ish < 1 || isw < 1 || ocr < 1 || ocr > oc || ocr % (ish * isw))) {
    TVMBackendFreeWorkspace(1, 0, wt);
    return -1;
  }
  if (ish) ember_fewoc_lanes(&p, L);
  p.quad = ish == 2 && isw == 2 && oc == 4 && ocr == 4;
  if (threads) {
    rc = TVMBackendParallelLaunch(EMBER_FFN(ember_fewoc_task), &p, 0);
  } else {
    EMBER_FFN(ember_fewoc_rows)(&p, 0, (int64_t)n * oh);
  }
  TVMBackendFreeWorkspace(1, 0, wt);
  return rc;
}
#endif

#if EMBER_KV
#undef EMBER_FV
#undef EMBER_FSHUF
#endif
#undef EMBER_FFN
