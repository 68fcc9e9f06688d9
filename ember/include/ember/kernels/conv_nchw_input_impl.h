/*!
 * \file ember/kernels/conv_nchw_input_impl.h
 * \brief The NCHW-input conv kernel for one lane count: included by conv_nchw_input.h with
 *        EMBER_L set to 4, 8 and 16 (no include guard on purpose). Names end in _x<L>.
 */
#ifndef EMBER_L
#error "conv_nchw_input_impl.h is included by ember/kernels/conv_nchw_input.h only"
#endif

#define EMBER_FN(name) EMBER_CAT(name, EMBER_CAT(_x, EMBER_L))

/* Items [lo, hi) through conv_nchwc.h's plain loop nest: the portable build, and a task that
 * got no workspace for its row buffer. Item (b, rows, blocks) is, for each of its output
 * blocks, the run of that loop nest's items (b, block, row) with whole rows (strip = ow,
 * order 0). */
static inline void EMBER_FN(ember_nchw_in_portable)(const ember_conv_p* p, int64_t lo,
                                                    int64_t hi) {
  ember_conv_p q = *p;
  int64_t item;
  int32_t b, oy0, oy1, ob0, ob1, ob;
  q.strip = p->ow;
  q.order = 0;
  q.rb = 1;
  for (item = lo; item < hi; ++item) {
    ember_nchw_in_item(p, item, &b, &oy0, &oy1, &ob0, &ob1);
    for (ob = ob0; ob < ob1; ++ob) {
      const int64_t first = ((int64_t)b * p->ocb + ob) * p->oh;
      ember_conv_portable(&q, EMBER_L, first + oy0, first + oy1);
    }
  }
}

#if EMBER_KV
#define EV EMBER_VT(EMBER_L)

/* The general epilogue of a tile (a residual, another activation, a row's tail): the first
 * `valid` of its columns' rb accumulators (acc[j][r] at acc + j * rb + r, bias added) through
 * ember_conv_store. Out of line: inlined, its 12 copies per tile made the kernel's build 4x
 * slower, for the rare tiles. */
EMBER_KFN void EMBER_FN(ember_nchw_in_store)(const ember_conv_p* p, EV* acc, int32_t rb,
                                             int32_t valid, size_t o) {
  const size_t oob = (size_t)p->oh * p->ow * EMBER_L;
  int32_t j, r;
  for (r = 0; r < rb; ++r) {
    for (j = 0; j < valid; ++j) {
      const size_t at = o + r * oob + (size_t)j * EMBER_L;
      EMBER_FN(ember_conv_store)(p, &acc[j * rb + r], p->out + at, p->res + at);
    }
  }
}

/* One register tile: RW output columns x RB output blocks over every input channel and the
 * kernel rows of `nky` (from the first valid one). x: the buffer at the tile's first column
 * and first valid row; cs, ys: the buffer's channel and kernel-row (dh rows) steps; w: the
 * weights of the first block at the first valid kernel row. Columns at stride S (0: p->sw).
 * Only the first `valid` columns are stored (a row's tail tile). */
#define EMBER_NCHW_IN_TILE(RW, RB, S)                                                          \
  static inline void EMBER_CAT4(ember_nchw_in_tile, EMBER_L, RW##x##RB, S)(                    \
      const ember_conv_p* p, const float* x, ptrdiff_t cs, ptrdiff_t ys, int32_t nky,          \
      const float* w, const float* bias, size_t o, int32_t valid) {                            \
    EV acc[RW][RB];                                                                            \
    const int32_t L = EMBER_L, kw = p->kw, dw = p->dw, sw = S ? S : p->sw;                     \
    const ptrdiff_t wky = (ptrdiff_t)kw * L, wic = (ptrdiff_t)p->kh * wky;                     \
    const ptrdiff_t wob = (ptrdiff_t)p->icb * wic;                                             \
    const size_t oob = (size_t)p->oh * p->ow * L;                                              \
    int32_t c, ky, kx, j, r;                                                                   \
    EMBER_KUNROLL for (j = 0; j < RW; ++j)                                                      \
      EMBER_KUNROLL for (r = 0; r < RB; ++r) acc[j][r] = EMBER_VZERO(EMBER_L);                  \
    for (c = 0; c < p->icb; ++c) {                                                             \
      for (ky = 0; ky < nky; ++ky) {                                                           \
        const float* xr = x + c * cs + ky * ys;                                                \
        const float* wr = w + c * wic + ky * wky;                                              \
        for (kx = 0; kx < kw; ++kx) {                                                          \
          const float* src = xr + kx * dw;                                                     \
          EV wv[RB];                                                                           \
          EMBER_KUNROLL for (r = 0; r < RB; ++r) {                                             \
            EV w_ = EMBER_VLOAD(EMBER_L, wr + kx * L + r * wob);                               \
            EMBER_VPIN(EMBER_L, w_);                                                           \
            wv[r] = w_;                                                                        \
          }                                                                                    \
          EMBER_KUNROLL for (j = 0; j < RW; ++j) {                                             \
            EV bx = EMBER_VBCAST(EMBER_L, src + j * sw);                                       \
            EMBER_KUNROLL for (r = 0; r < RB; ++r)                                             \
              acc[j][r] = EMBER_VFMA(EMBER_L, acc[j][r], bx, wv[r]);                           \
          }                                                                                    \
        }                                                                                      \
      }                                                                                        \
    }                                                                                          \
    EMBER_KUNROLL for (r = 0; r < RB; ++r) {                                                    \
      EV bv = EMBER_VLOAD(EMBER_L, bias + r * L);                                              \
      EMBER_KUNROLL for (j = 0; j < RW; ++j) acc[j][r] += bv;                                   \
    }                                                                                          \
    if (!(p->flags & EMBER_EPI_RESIDUAL) && p->act <= EMBER_CONV_ACT_RELU) {                  \
      /* the common stores (no residual, relu or none) straight from registers, the          \
       * activation chosen once per tile instead of once per vector */                       \
      const EV zero = EMBER_VZERO(EMBER_L);                                                    \
      EMBER_KUNROLL for (r = 0; r < RB; ++r)                                                    \
        EMBER_KUNROLL for (j = 0; j < RW; ++j) {                                                \
          if (p->act) acc[j][r] = EMBER_VMAX(EMBER_L, acc[j][r], zero);                        \
          if (j < valid) EMBER_VSTORE(EMBER_L, p->out + o + r * oob + (size_t)j * L, acc[j][r]); \
        }                                                                                      \
      return;                                                                                  \
    }                                                                                          \
    {                                                                                          \
      EV spill[RW * RB]; /* a copy: acc itself, its address taken, would leave the registers */ \
      EMBER_KUNROLL for (j = 0; j < RW; ++j)                                                    \
        EMBER_KUNROLL for (r = 0; r < RB; ++r) spill[j * RB + r] = acc[j][r];                   \
      EMBER_FN(ember_nchw_in_store)(p, spill, RB, valid, o);                                   \
    }                                                                                          \
  }
#define EMBER_NCHW_IN_TILES(RW)                                                                \
  EMBER_NCHW_IN_TILE(RW, 1, 1)                                                                 \
  EMBER_NCHW_IN_TILE(RW, 1, 2)                                                                 \
  EMBER_NCHW_IN_TILE(RW, 1, 0)                                                                 \
  EMBER_NCHW_IN_TILE(RW, 2, 1)                                                                 \
  EMBER_NCHW_IN_TILE(RW, 2, 2)                                                                 \
  EMBER_NCHW_IN_TILE(RW, 2, 0)

/* Widths 4, 5 and 6 (12 accumulators + 2 weights + 1 broadcast: 15 of 16 registers; 5 for
 * rows of 5 and 10 columns: dscnn's first conv 12.3 -> 11.9 us); with AVX-512's 32 registers,
 * 8, 10 and 12 too (10 for rows of 20: dqn's 8x8/4 conv, which 12 cut into 12 + 8 of 12). */
EMBER_NCHW_IN_TILES(4)
EMBER_NCHW_IN_TILES(5)
EMBER_NCHW_IN_TILES(6)
#if defined(__AVX512F__)
#define EMBER_NCHW_IN_WIDE 1
EMBER_NCHW_IN_TILES(8)
EMBER_NCHW_IN_TILES(10)
EMBER_NCHW_IN_TILES(12)
#else
#define EMBER_NCHW_IN_WIDE 0
#endif
#undef EMBER_NCHW_IN_TILES
#undef EMBER_NCHW_IN_TILE

/* The instantiated width the kernel runs for a planned rw. */
static inline int32_t EMBER_FN(ember_nchw_in_width)(int32_t rw) {
  if (EMBER_NCHW_IN_WIDE && rw >= 8) return rw >= 12 ? 12 : rw >= 10 ? 10 : 8;
  return rw >= 6 ? 6 : rw == 5 ? 5 : 4;
}

/* Output row oy of blocks [ob, ob + rb) from the row buffer (input rows from iy_lo). */
EMBER_KFN void EMBER_FN(ember_nchw_in_row)(const ember_conv_p* p, const float* buf,
                                           int32_t wb, int32_t hb, int32_t iy_lo, int32_t b,
                                           int32_t ob, int32_t rb, int32_t rw, int32_t oy) {
  const int32_t L = EMBER_L, iy0 = oy * p->sh - p->pt;
  const int32_t ky0 = ember_first_tap(iy0, p->dh, p->kh);
  const int32_t ky1 = ember_end_tap(iy0, p->dh, p->h, p->kh, ky0);
  const ptrdiff_t cs = (ptrdiff_t)hb * wb, ys = (ptrdiff_t)p->dh * wb;
  const float* x = ky1 > ky0 ? buf + (ptrdiff_t)(iy0 + ky0 * p->dh - iy_lo) * wb : buf;
  const float* w = p->wt + ((size_t)ob * p->icb * p->kh + ky0) * p->kw * L;
  const float* bias = p->bias + (size_t)ob * L;
  const size_t orow = ((((size_t)b * p->ocb + ob) * p->oh) + oy) * p->ow * L;
  const int32_t nky = ky1 - ky0, s = p->sw == 1 ? 1 : p->sw == 2 ? 2 : 0;
  int32_t ox;
  for (ox = 0; ox < p->ow; ox += rw) {
    const int32_t valid = p->ow - ox < rw ? p->ow - ox : rw;
    const float* xt = x + (ptrdiff_t)ox * p->sw;
    const size_t o = orow + (size_t)ox * L;
#define EMBER_NCHW_IN_CALL(RW, RB, S) \
  EMBER_CAT4(ember_nchw_in_tile, EMBER_L, RW##x##RB, S)(p, xt, cs, ys, nky, w, bias, o, valid)
#define EMBER_NCHW_IN_STRIDES(RW, RB)                                                          \
  if (s == 1) {                                                                                \
    EMBER_NCHW_IN_CALL(RW, RB, 1);                                                             \
  } else if (s == 2) {                                                                         \
    EMBER_NCHW_IN_CALL(RW, RB, 2);                                                             \
  } else {                                                                                     \
    EMBER_NCHW_IN_CALL(RW, RB, 0);                                                             \
  }
#define EMBER_NCHW_IN_BLOCKS(RW)                                                               \
  if (rb == 2) {                                                                               \
    EMBER_NCHW_IN_STRIDES(RW, 2)                                                               \
  } else {                                                                                     \
    EMBER_NCHW_IN_STRIDES(RW, 1)                                                               \
  }
#if EMBER_NCHW_IN_WIDE
    if (rw == 12) {
      EMBER_NCHW_IN_BLOCKS(12)
    } else if (rw == 10) {
      EMBER_NCHW_IN_BLOCKS(10)
    } else if (rw == 8) {
      EMBER_NCHW_IN_BLOCKS(8)
    } else
#endif
    if (rw == 6) {
      EMBER_NCHW_IN_BLOCKS(6)
    } else if (rw == 5) {
      EMBER_NCHW_IN_BLOCKS(5)
    } else {
      EMBER_NCHW_IN_BLOCKS(4)
    }
#undef EMBER_NCHW_IN_BLOCKS
#undef EMBER_NCHW_IN_STRIDES
#undef EMBER_NCHW_IN_CALL
  }
}

/* Copy input rows [iy_lo, iy_hi) of batch image b to the row buffer [IC][hb][wb]: buffer
 * column c holds input column c - pl, zeros outside the image. */
static inline void EMBER_FN(ember_nchw_in_fill)(const ember_conv_p* p, float* buf, int32_t wb,
                                                int32_t hb, int32_t b, int32_t iy_lo,
                                                int32_t iy_hi) {
  const int32_t x0 = p->pl < 0 ? 0 : (p->pl < wb ? p->pl : wb);
  const int32_t x1 = p->pl + p->w < wb ? p->pl + p->w : wb;
  int32_t c, y, x;
  for (c = 0; c < p->icb; ++c) {
    for (y = iy_lo; y < iy_hi; ++y) {
      float* dst = buf + ((ptrdiff_t)c * hb + (y - iy_lo)) * wb;
      const float* src = p->in + (((size_t)b * p->icb + c) * p->h + y) * p->w;
      for (x = 0; x < x0; ++x) dst[x] = 0.0f;
      if (x1 > x0) __builtin_memcpy(dst + x0, src + (x0 - p->pl), (size_t)(x1 - x0) * 4);
      for (x = x1 > x0 ? x1 : x0; x < wb; ++x) dst[x] = 0.0f;
    }
  }
}

EMBER_KFN void EMBER_FN(ember_nchw_in_range)(const ember_conv_p* p, int64_t lo, int64_t hi) {
  const int32_t L = EMBER_L, rw = EMBER_FN(ember_nchw_in_width)(p->rw);
  const int32_t wb = ember_nchw_in_wb(p, rw), hb = ember_nchw_in_hb(p, p->strip);
  const int32_t late = ember_conv_late_act(p);
  float* buf;
  int64_t item, filled = -1; /* the (batch image, run of rows) now in buf */
  if (lo >= hi) return;
  buf = (float*)TVMBackendAllocWorkspace(1, 0, (uint64_t)p->icb * (hb > 0 ? hb : 1) * wb *
                                         sizeof(float), 2, 32);
  if (buf == NULL) { /* a C-runtime arena with no room: the plain loop nest */
    EMBER_FN(ember_nchw_in_portable)(p, lo, hi);
    return;
  }
  for (item = lo; item < hi; ++item) {
    int32_t b, oy0, oy1, ob0, ob1, ob, nb, oy;
    const int64_t run = ember_nchw_in_item(p, item, &b, &oy0, &oy1, &ob0, &ob1);
    const int32_t top = oy0 * p->sh - p->pt;
    const int32_t bottom = (oy1 - 1) * p->sh - p->pt + (p->kh - 1) * p->dh + 1;
    const int32_t iy_lo = top > 0 ? top : 0, iy_hi = bottom < p->h ? bottom : p->h;
    if (run != filled) EMBER_FN(ember_nchw_in_fill)(p, buf, wb, hb, b, iy_lo, iy_hi);
    filled = run;
    for (ob = ob0; ob < ob1; ob += nb) {
      nb = ob1 - ob >= 2 ? 2 : 1;
      for (oy = oy0; oy < oy1; ++oy)
        EMBER_FN(ember_nchw_in_row)(p, buf, wb, hb, iy_lo, b, ob, nb, rw, oy);
      if (late) {
        int32_t k;
        for (k = ob; k < ob + nb; ++k) {
          const size_t at = ((((size_t)b * p->ocb + k) * p->oh) + oy0) * p->ow * L;
          EMBER_FN(ember_conv_act_pass)(p, at, (size_t)(oy1 - oy0) * p->ow * L);
        }
      }
    }
  }
  TVMBackendFreeWorkspace(1, 0, buf);
}
#undef EV
#else
EMBER_KFN void EMBER_FN(ember_nchw_in_range)(const ember_conv_p* p, int64_t lo, int64_t hi) {
  EMBER_FN(ember_nchw_in_portable)(p, lo, hi);
}
#endif /* EMBER_KV */

EMBER_KFN int EMBER_FN(ember_nchw_in_task)(int task_id, TVMParallelGroupEnv* penv,
                                           void* cdata) {
  ember_conv_p q = *(const ember_conv_p*)cdata;
  const int64_t n = penv->num_task > 0 ? penv->num_task : 1;
  int64_t total;
  q.strip = ember_nchw_in_task_rows(&q, n);
  total = ember_nchw_in_items(&q);
  EMBER_FN(ember_nchw_in_range)(&q, total * task_id / n, total * (task_id + 1) / n);
  return 0;
}

/*!
 * \brief A dense conv from a plain NCHW input to NCHW[L]c (layouts: conv_nchw_input.h).
 *        `res` is read only when `flags` has EMBER_EPI_RESIDUAL.
 */
#if EMBER_KERNEL_ALL || defined(EMBER_KOBJ_ember_conv2d_nchw_input)
EMBER_KENTRY int32_t EMBER_FN(ember_conv2d_nchw_input)(EMBER_CONV2D_NCHW_INPUT_PARAMS) {
  ember_conv_p p;
  p.pf = NULL;
  p.pair_w = NULL;
  p.in = in; p.wt = w; p.bias = bias; p.res = res; p.out = out;
  p.n = n; p.icb = ic; p.icb_g = ic; p.cb = 1; p.h = h; p.w = wd;
  p.ocb = ocb; p.ocb_g = ocb; p.oh = oh; p.ow = ow;
  p.kh = kh; p.kw = kw; p.sh = sh; p.sw = sw; p.dh = dh; p.dw = dw; p.pt = pt; p.pl = pl;
  p.act = act; p.flags = flags & ~EMBER_EPI_STREAM; p.lo = lo; p.hi = hi;
  p.rb = blocks > 0 && blocks < ocb ? blocks : (ocb > 0 ? ocb : 1); /* blocks per item */
  p.rw = rw; p.strip = rows > 0 ? rows : 1; p.order = 0; p.depthwise = 0;
  p.groups = 1; p.icl = 1;
  if (threads) return TVMBackendParallelLaunch(EMBER_FN(ember_nchw_in_task), &p, 0);
  EMBER_FN(ember_nchw_in_range)(&p, 0, ember_nchw_in_items(&p));
  return 0;
}
#endif

#undef EMBER_FN
