/*!
 * \file ember/kernels/conv_phase_impl.h
 * \brief The phase-by-phase transposed conv for one lane count: included by conv_phase.h with
 *        EMBER_L set to 8 and 16 (no include guard on purpose). Names end in _x<L>.
 */
#ifndef EMBER_L
#error "conv_phase_impl.h is included by ember/kernels/conv_phase.h only"
#endif

#ifndef EMBER_CAT
#define EMBER_CAT_(a, b) a##b
#define EMBER_CAT(a, b) EMBER_CAT_(a, b)
#endif
#define EMBER_PFN(name) EMBER_CAT(name, EMBER_CAT(_x, EMBER_L))

#if EMBER_KV
#define EMBER_PV EMBER_VT(EMBER_L)

/* One register tile: x the padded input at the tile's first pixel (input block 0), w the
 * weights of its first output block (input block 0), results to buf [R*C][RB][L] (without
 * the bias). R, C and RB are constants after inlining, so the accumulators are registers;
 * each lane step loads RB weight vectors and broadcasts R*C inputs, at constant offsets
 * from R row pointers. */
__attribute__((always_inline)) static inline void EMBER_PFN(ember_phase_tile)(
    const ember_phase_p* p, const float* x, const float* w, float* buf, const int32_t R,
    const int32_t C, const int32_t RB) {
  const int32_t L = EMBER_L;
  const int64_t plane = (int64_t)p->hp * p->wp * L, row = (int64_t)p->wp * L;
  const int64_t wob = (int64_t)p->icb * p->th * p->tw * L * L; /* between output blocks */
  const int64_t wib = (int64_t)p->th * p->tw * L * L;          /* between input blocks */
  const int32_t taps = p->tw * L;
  EMBER_PV acc[24];
  int32_t c, u, t, i, j, r;
  EMBER_KUNROLL
  for (i = 0; i < R * C * RB; ++i) acc[i] = EMBER_VZERO(EMBER_L);
  for (c = 0; c < p->icb; ++c, x += plane, w += wib) {
    for (u = 0; u < p->th; ++u) {
      /* the taps (v, l) of kernel row u are contiguous in input and weight: one loop, not
       * unrolled (unrolled over the lanes, GCC gathered the broadcasts through the stack) */
      const float* xp = x + u * row;
      const float* wp = w + (int64_t)u * taps * L;
      for (t = 0; t < taps; ++t) {
        EMBER_PV wv[3];
        EMBER_KUNROLL
        for (r = 0; r < RB; ++r) {
          wv[r] = EMBER_VLOAD_REG(EMBER_L, wp + r * wob + t * L);
          EMBER_VPIN(EMBER_L, wv[r]);
          /* 16 KiB ahead: on a 4x4 map every weight is read once, from L3 (DCGAN's 1024 ->
           * 512 on one AVX-512 core: 2100 -> 1650-1800 us with it; 4 KiB ahead: 1870) */
          __builtin_prefetch(wp + r * wob + t * L + 4096, 0, 3);
        }
        EMBER_KUNROLL
        for (i = 0; i < R; ++i) {
          EMBER_KUNROLL
          for (j = 0; j < C; ++j) {
            const EMBER_PV xb = EMBER_VBCAST(EMBER_L, xp + i * row + j * L + t);
            EMBER_KUNROLL
            for (r = 0; r < RB; ++r)
              acc[(i * C + j) * RB + r] = EMBER_VFMA(EMBER_L, acc[(i * C + j) * RB + r], xb,
                                                     wv[r]);
          }
        }
      }
    }
  }
  EMBER_KUNROLL
  for (i = 0; i < R * C * RB; ++i) EMBER_VSTORE(EMBER_L, buf + i * L, acc[i]);
}

#define EMBER_PHASE_TILE_FN(index, R, C, RB)                                                  \
  EMBER_KFN void EMBER_PFN(ember_phase_tile_##index)(const ember_phase_p* p, const float* x, \
                                                      const float* w, float* buf) {           \
    EMBER_PFN(ember_phase_tile)(p, x, w, buf, R, C, RB);                                      \
  }
EMBER_PHASE_TILES(EMBER_PHASE_TILE_FN)
#undef EMBER_PHASE_TILE_FN
#endif /* EMBER_KV */

/* One tile in plain C (no vector extensions): the same sums, loop by loop. */
EMBER_KFN void EMBER_PFN(ember_phase_tile_c)(const ember_phase_p* p, const float* x,
                                             const float* w, float* buf) {
  const int32_t L = EMBER_L;
  const int64_t plane = (int64_t)p->hp * p->wp * L, row = (int64_t)p->wp * L;
  const int64_t wob = (int64_t)p->icb * p->th * p->tw * L * L;
  int32_t c, u, v, l, i, j, r, o;
  for (i = 0; i < p->R * p->C * p->RB * L; ++i) buf[i] = 0.0f;
  for (c = 0; c < p->icb; ++c)
    for (u = 0; u < p->th; ++u)
      for (v = 0; v < p->tw; ++v)
        for (l = 0; l < L; ++l)
          for (i = 0; i < p->R; ++i)
            for (j = 0; j < p->C; ++j) {
              const float xv = x[c * plane + i * row + (int64_t)(j + v) * L + u * row + l];
              float* acc = buf + (int64_t)(i * p->C + j) * p->RB * L;
              for (r = 0; r < p->RB; ++r) {
                const float* wr = w + r * wob + (((int64_t)c * p->th + u) * p->tw + v) * L * L +
                                  (int64_t)l * L;
                for (o = 0; o < L; ++o) acc[r * L + o] += xv * wr[o];
              }
            }
}

/* Work items [begin, end): (batch, phase, block group, tile) in that order of nesting. */
EMBER_KFN void EMBER_PFN(ember_phase_items)(const ember_phase_p* p, int64_t begin, int64_t end) {
  const int32_t L = EMBER_L;
  const int32_t groups = p->ocbp / p->RB;
  float buf[24 * 16];
  int64_t item;
  for (item = begin; item < end; ++item) {
    const int32_t b = (int32_t)(item / p->items_per_batch);
    const int64_t t = item % p->items_per_batch;
    int32_t ph = 0, g, k, qy, qx;
    const float* x;
    const float* w;
    while (t >= p->tile_start[ph + 1] * groups) ++ph;
    k = (int32_t)(t - p->tile_start[ph] * groups);
    g = k / (p->ty[ph] * p->tx[ph]);
    k %= p->ty[ph] * p->tx[ph];
    qy = p->q0y[ph] + (k / p->tx[ph]) * p->R;
    qx = p->q0x[ph] + (k % p->tx[ph]) * p->C;
    x = p->pad + (((int64_t)b * p->icb * p->hp + qy) * p->wp + qx) * L;
    w = p->w + ((int64_t)ph * p->ocbp + (int64_t)g * p->RB) * p->icb * p->th * p->tw * L * L;
    switch (p->tile) {
#if EMBER_KV
#define EMBER_PHASE_TILE_CASE(index, R, C, RB) \
  case index: EMBER_PFN(ember_phase_tile_##index)(p, x, w, buf); break;
      EMBER_PHASE_TILES(EMBER_PHASE_TILE_CASE)
#undef EMBER_PHASE_TILE_CASE
#endif
      default: EMBER_PFN(ember_phase_tile_c)(p, x, w, buf); break;
    }
    ember_phase_store(p, buf, b, ph, g * p->RB, qy, qx, L);
  }
}

EMBER_KFN int EMBER_PFN(ember_phase_task)(int task_id, TVMParallelGroupEnv* penv, void* cdata) {
  const ember_phase_p* p = (const ember_phase_p*)cdata;
  const int64_t total = (int64_t)p->n * p->items_per_batch;
  const int64_t tasks = penv->num_task > 0 ? penv->num_task : 1;
  EMBER_PFN(ember_phase_items)(p, total * task_id / tasks, total * (task_id + 1) / tasks);
  return 0;
}

/*! \brief The transposed conv (conv_phase.h); returns 0, or -1 on a bad tile or workspace. */
#if EMBER_KERNEL_ALL || defined(EMBER_KOBJ_ember_conv2d_phase)
EMBER_KENTRY int32_t EMBER_PFN(ember_conv2d_phase)(EMBER_CONV2D_PHASE_PARAMS) {
  const int32_t L = EMBER_L;
  static const int32_t shapes[][3] = {
#define EMBER_PHASE_TILE_SHAPE(index, R, C, RB) {R, C, RB},
      EMBER_PHASE_TILES(EMBER_PHASE_TILE_SHAPE)
#undef EMBER_PHASE_TILE_SHAPE
  };
  ember_phase_p p;
  float* pad;
  int64_t size, b, c, y, tiles = 0;
  int32_t ph, rc = 0;
  if (tile < 0 || tile >= (int32_t)(sizeof(shapes) / sizeof(shapes[0])) || sh * sw > 16)
    return -1;
  p.R = shapes[tile][0]; p.C = shapes[tile][1]; p.RB = shapes[tile][2]; p.tile = tile;
  p.n = n; p.icb = icb; p.ocb = ocb; p.ocbp = (ocb + p.RB - 1) / p.RB * p.RB;
  p.th = th; p.tw = tw; p.sh = sh; p.sw = sw; p.off_h = off_h; p.off_w = off_w;
  p.oh = oh; p.ow = ow; p.w = w; p.bias = bias; p.out = out; p.p0 = lo; p.p1 = hi;
  p.act = act;
  /* room for a tile overhanging the map by R - 1 rows and C - 1 columns */
  p.hp = qh + th - 1 + p.R;
  p.wp = qw + tw - 1 + p.C;
  for (ph = 0; ph < sh * sw; ++ph) {
    ember_phase_range(ph / sw, sh, off_h, oh, &p.q0y[ph], &p.nqy[ph]);
    ember_phase_range(ph % sw, sw, off_w, ow, &p.q0x[ph], &p.nqx[ph]);
    p.ty[ph] = (p.nqy[ph] + p.R - 1) / p.R;
    p.tx[ph] = (p.nqx[ph] + p.C - 1) / p.C;
    p.tile_start[ph] = tiles;
    tiles += (int64_t)p.ty[ph] * p.tx[ph];
  }
  p.tile_start[sh * sw] = tiles;
  p.items_per_batch = tiles * (p.ocbp / p.RB);
  size = (int64_t)n * icb * p.hp * p.wp * L;
  pad = (float*)TVMBackendAllocWorkspace(1, 0, (uint64_t)size * sizeof(float), 2, 32);
  if (pad == NULL) return -1;
  for (b = 0; b < (int64_t)n * icb; ++b) { /* the input at (pt, pl), zeros around it */
    float* dst = pad + b * p.hp * p.wp * L;
    const float* src = in + b * h * wd * L;
    const int64_t row = (int64_t)p.wp * L, left = (int64_t)pl * L, mid = (int64_t)wd * L;
    for (c = 0; c < pt * row; ++c) dst[c] = 0.0f;
    for (y = 0; y < h; ++y) {
      float* r = dst + (y + pt) * row;
      for (c = 0; c < left; ++c) r[c] = 0.0f;
      for (c = 0; c < mid; ++c) r[left + c] = src[y * mid + c];
      for (c = left + mid; c < row; ++c) r[c] = 0.0f;
    }
    for (c = (pt + h) * row; c < (int64_t)p.hp * row; ++c) dst[c] = 0.0f;
  }
  p.pad = pad;
  if (threads) {
    rc = TVMBackendParallelLaunch(EMBER_PFN(ember_phase_task), &p, 0);
  } else {
    EMBER_PFN(ember_phase_items)(&p, 0, (int64_t)n * p.items_per_batch);
  }
  TVMBackendFreeWorkspace(1, 0, pad);
  return rc;
}
#endif

#if EMBER_KV
#undef EMBER_PV
#endif
#undef EMBER_PFN
