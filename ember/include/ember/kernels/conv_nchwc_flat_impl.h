/*!
 * \file ember/kernels/conv_nchwc_flat_impl.h
 * \brief Dense convs on small maps (7x7 to 28x28: the later layers of a CNN) in register tiles
 *        that span output rows: included by conv_nchwc_impl.h for one lane count (no include
 *        guard on purpose).
 *
 * Why: a tile of one output row reads every weight of its output blocks once. A 7-wide row
 * splits into 4 + 3 columns, so a 3x3 512->512 conv streamed its 295 KB of pair weights from
 * the L2 14 times per block pair (1.43x onnxruntime's time), and the 3-wide tile spends 5 loads
 * per 6 FMAs. Here the output map is one flattened run of oh * ow positions cut in tiles of up
 * to 6 (49 = 9 tiles, 196 = 33), each position with its own input offset into a zero-padded
 * copy of the input (made once per task and batch image), so that no tap needs a bounds check.
 *
 * Used (ember_conv_flat) for dense convs with a channel-blocked input, unit column dilation,
 * a kernel of more than one tap (one column too: a 7x1 conv's row tiles split a 17-wide row
 * into 6 + 6 + 4 + 1, its 1-wide quad four FMA chains long), blocks outermost (order 0: the consecutive work items of one block
 * group then cover consecutive positions) and rows of at most EMBER_CONV_FLAT_MAX_OW columns:
 * with 16 vector registers in pairs of output blocks, with AVX-512's 32 in quads (EMBER_FLAT_RB
 * = EMBER_MAX_RB) where the plan asks for quads. On AVX-512 the row tiles left a 7-wide row as
 * a 6-wide quad and a 1-wide one, 5 loads per 4 FMAs (resnet18's 3x3 512->512 at 7x7: 1.2x
 * onnxruntime's time). The blocks left over (fewer than EMBER_FLAT_RB) and a task with no
 * workspace take the row tiles of ember_conv_strip.
 */
#ifndef EMBER_L
#error "conv_nchwc_flat_impl.h is included by ember/kernels/conv_nchwc_impl.h only"
#endif

/* up to 35 columns (28 = 6 + 6 + 6 + 5 + 5 per row, 131 flat tiles instead of 140: 128->128
 * 3x3 at 28x28 2744 -> 2545 us on one AVX2 core; inception's 35x35 and 32x32 maps, one core,
 * thread time, interleaved: 3x3 96->96 at 35x35 2448 -> 2113 us on AVX2, 256->256 at 32x32
 * 14.0 -> 11.3 ms on AVX2 and 7.2 -> 6.8 ms on AVX-512); 56-wide rows are not measured */
#define EMBER_CONV_FLAT_MAX_OW 35
/* AVX-512's quads over a strided conv: rows up to 14 columns. Its padded copy is about sh * sw
 * times the output map per input block, which the row tiles do not pay, and they lose little
 * on a row of 15 to 28 columns (one narrow tile of 4 at most): resnet18's 3x3 64->128 at
 * stride 2 to 28x28, 8% faster in row tiles (weights cold, input warm; the same warm), 48 -> 24
 * columns 10%, 40 -> 20 even; 14-wide rows stay 10% faster flat (128->256 from 28x28). */
#define EMBER_CONV_FLAT_MAX_STRIDED_OW 14
/* 2 x 6 accumulators + 2 weights + 1 broadcast: 15 of 16 registers; 4 x 6 + 4 + 1: 29 of 32 */
#define EMBER_CONV_FLAT_RW 6
#define EMBER_FLAT_RB EMBER_MAX_RB /* output blocks of a flat tile: pairs, or AVX-512's quads */

/* Whether the call runs in flat tiles: the plan's quads on AVX-512 (its pairs keep the row
 * tiles; with 16 registers any plan of order 0 takes pairs). */
static inline int EMBER_FN(ember_conv_flat)(const ember_conv_p* p) {
  const int32_t max_ow = EMBER_FLAT_RB == 4 && p->sh * p->sw > 1 ? EMBER_CONV_FLAT_MAX_STRIDED_OW
                                                                 : EMBER_CONV_FLAT_MAX_OW;
  return (EMBER_FLAT_RB == 2 || p->rb == EMBER_FLAT_RB) && !p->depthwise && p->groups == 1 &&
         p->cb == EMBER_L && p->order == 0 && p->dw == 1 && p->kh * p->kw > 1 && p->ow <= max_ow &&
         p->ocb_g >= EMBER_FLAT_RB;
}

/* Copy padded rows [y0, y1) of batch image b of the input to `pad` as [icb][hp][wp][L], zeros
 * in the padding (padded row y, column x hold input row y - pt, column x - pl). A task copies
 * only the rows its output rows read: on 16 threads each of resnet18's 7x7 and 14x14 convs
 * copied its whole input 16 times. */
EMBER_KFN void EMBER_FN(ember_conv_flat_pad)(const ember_conv_p* p, float* pad, int32_t b,
                                             int32_t y0, int32_t y1) {
  const int32_t L = EMBER_L, hp = ember_conv_flat_hp(p), wp = ember_conv_flat_wp(p);
  int32_t icb, y, x;
  for (icb = 0; icb < p->icb; ++icb) {
    const float* src = p->in + ((size_t)b * p->icb + icb) * p->h * p->w * L;
    for (y = y0 < 0 ? 0 : y0; y < hp && y < y1; ++y) {
      const int32_t iy = y - p->pt;
      float* dst = pad + (((size_t)icb * hp + y) * wp) * L;
      for (x = 0; x < wp; ++x) {
        const int32_t ix = x - p->pl;
        const int inside = iy >= 0 && iy < p->h && ix >= 0 && ix < p->w;
        EMBER_VSTORE(EMBER_L, dst + (size_t)x * L,
                     inside ? EMBER_VLOAD(EMBER_L, src + ((size_t)iy * p->w + ix) * L)
                            : EMBER_VZERO(EMBER_L));
      }
    }
  }
}

/* acc[j][r] += padded input (position j, tap c of a kernel row at src) * weight vector r. */
#define EMBER_FLAT_STEP(RW, RB, wq, src)                                                       \
  {                                                                                            \
    EV wv[RB];                                                                                 \
    EMBER_KUNROLL for (r = 0; r < RB; ++r) {                                                   \
      EV w_ = EMBER_VLOAD_REG(EMBER_L, (wq) + r * wob);                                        \
      if (RW <= 4) EMBER_VPIN(EMBER_L, w_);                                                    \
      wv[r] = w_;                                                                              \
    }                                                                                          \
    EMBER_KUNROLL for (j = 0; j < RW; ++j) {                                                   \
      EV bx = EMBER_VBCAST(EMBER_L, (src) + pos[j]);                                           \
      EMBER_KUNROLL for (r = 0; r < RB; ++r)                                                   \
        acc[j][r] = EMBER_VFMA(EMBER_L, acc[j][r], bx, wv[r]);                                 \
    }                                                                                          \
  }

/* RW flattened output positions [f0, f0 + RW) x RB output blocks (weights w, bias, output
 * block offset o) over the padded input: only the kernel rows that reach the image for some
 * position of the tile (rows of padding add zeros: skipped where the whole tile allows). */
#define EMBER_FLAT_TILE_FN(LINK, RW, RB)                                                       \
  LINK void EMBER_CAT4(ember_flat_tile, EMBER_L, RW, RB)(                                      \
      const ember_conv_p* p, const float* pad, int32_t f0, const float* w, const float* bias,  \
      size_t o_blocks)
#define EMBER_FLAT_TILE_DECL(RW, RB) EMBER_FLAT_TILE_FN(EMBER_KPART_FN, RW, RB);
#define EMBER_FLAT_TILE(LINK, RW, RB)                                                          \
  EMBER_FLAT_TILE_FN(LINK, RW, RB) {                                                           \
    EV acc[RW][RB];                                                                            \
    ptrdiff_t pos[RW];                                                                         \
    const int32_t L = EMBER_L, hp = ember_conv_flat_hp(p), wp = ember_conv_flat_wp(p);         \
    const ptrdiff_t cs = (ptrdiff_t)hp * wp * L, dys = (ptrdiff_t)p->dh * wp * L;              \
    const ptrdiff_t wob = (ptrdiff_t)p->wicb * p->kh * p->kw * L * L;                          \
    const size_t oob = (size_t)p->oh * p->ow * L;                                              \
    const int32_t taps = p->kw * L, oy0 = f0 / p->ow, oy1 = (f0 + RW - 1) / p->ow;             \
    const int32_t ky0 = ember_first_tap(oy1 * p->sh - p->pt, p->dh, p->kh);                    \
    const int32_t ky1 = ember_end_tap(oy0 * p->sh - p->pt, p->dh, p->h, p->kh, ky0);           \
    int32_t j, r, icb, ky, c, t;                                                               \
    EMBER_KUNROLL for (j = 0; j < RW; ++j) {                                                   \
      const int32_t oy = (f0 + j) / p->ow, ox = (f0 + j) % p->ow;                              \
      pos[j] = ((ptrdiff_t)oy * p->sh * wp + (ptrdiff_t)ox * p->sw) * L;                       \
      EMBER_KUNROLL for (r = 0; r < RB; ++r) acc[j][r] = EMBER_VZERO(EMBER_L);                 \
    }                                                                                          \
    for (icb = 0; icb < p->icb_g; ++icb) {                                                     \
      const int32_t live = icb + 1 < p->icb_g ? L : p->icl;                                    \
      for (ky = ky0; ky < ky1; ++ky) {                                                         \
        const float* base = pad + (icb * cs + ky * dys);                                       \
        const float* wk = w + ((ptrdiff_t)icb * p->kh + ky) * p->kw * L * L;                   \
        for (t = 0; t < taps; t += L)                                                          \
          EMBER_TAP_UNROLL for (c = t; c < t + live; ++c)                                      \
            EMBER_FLAT_STEP(RW, RB, wk + c * L, base + c)                                      \
      }                                                                                        \
    }                                                                                          \
    {                                                                                          \
      const size_t o = o_blocks + (size_t)f0 * L; /* positions f0.. are consecutive vectors */ \
      EMBER_CONV_STORE_TILE(RW, RB, 0)                                                         \
    }                                                                                          \
  }

/* Widths 1 to 6 of EMBER_FLAT_RB blocks, in part 2 of the object in parts (linkage.h),
 * declared for part 0. */
#define EMBER_FLAT_TILES(X) X(1, EMBER_FLAT_RB) X(2, EMBER_FLAT_RB) X(3, EMBER_FLAT_RB) \
  X(4, EMBER_FLAT_RB) X(5, EMBER_FLAT_RB) X(6, EMBER_FLAT_RB)
#define EMBER_FLAT_TILE_SHARED(RW, RB) EMBER_FLAT_TILE(EMBER_KPART_FN, RW, RB)
EMBER_FLAT_TILES(EMBER_FLAT_TILE_DECL)
#if EMBER_KERNEL_IN_PART(2)
EMBER_FLAT_TILES(EMBER_FLAT_TILE_SHARED)
#endif
#undef EMBER_FLAT_TILES
#undef EMBER_FLAT_TILE_SHARED
#undef EMBER_FLAT_TILE_DECL
#undef EMBER_FLAT_TILE_FN
#undef EMBER_FLAT_TILE
#undef EMBER_FLAT_STEP

/* Input blocks per pass of the quads' flat tiles over a run of positions, where a quad's
 * weights pass EMBER_FLAT_CHUNK_MIN_BYTES: as many as keep a quad's weights of one pass in
 * EMBER_FLAT_CHUNK_BYTES of L1 (one block of a 3x3 conv at 16 lanes: 36 KiB). Each pass adds
 * to the partial sums the last one stored (the epilogue with the last pass), so that a weight
 * vector read from memory then serves every tile of the run from L1. In one pass, the first
 * tile of each quad streamed the quad's weights from memory with a ninth of their FMAs to
 * hide it (resnet18's 3x3 512->512 at 7x7: 1.2 MiB a quad, 9 tiles), and the other tiles read
 * them from the L2: 1624 -> 1309 us with the caches flushed before each call, the 14x14 and
 * 28x28 maps unchanged (80 or 160 KiB a pass: no faster). Pairs (16 registers) keep one pass. */
#ifndef EMBER_FLAT_CHUNK_BYTES
#define EMBER_FLAT_CHUNK_BYTES (40 * 1024)
#endif
#define EMBER_FLAT_CHUNK_MIN_BYTES (256 * 1024)
static inline int32_t EMBER_FN(ember_conv_flat_chunk)(const ember_conv_p* p) {
  const int64_t block = (int64_t)EMBER_FLAT_RB * p->kh * p->kw * EMBER_L * EMBER_L * 4;
  const int64_t chunk = EMBER_FLAT_CHUNK_BYTES / block;
  if (EMBER_FLAT_RB != 4 || chunk >= p->icb_g || block * p->icb_g <= EMBER_FLAT_CHUNK_MIN_BYTES)
    return p->icb_g;
  return chunk < 1 ? 1 : (int32_t)chunk;
}

/* Positions [f0, f1) of EMBER_FLAT_RB blocks (weights w, bias, output offset o) over the
 * padded input pad, in tiles of even widths up to 6 (49 as 6 * 4 + 5 * 5, not 6 * 8 + 1: a
 * narrow tile spends more loads per FMA): one pass over q's input blocks. */
static inline void EMBER_FN(ember_conv_flat_pass)(const ember_conv_p* q, const float* pad,
                                                  const float* w, const float* bias, size_t o,
                                                  int32_t f0, int32_t f1) {
  int32_t f;
  for (f = f0; f < f1;) {
    const int32_t rest = f1 - f, tiles = (rest + EMBER_CONV_FLAT_RW - 1) / EMBER_CONV_FLAT_RW;
    const int32_t t = (rest + tiles - 1) / tiles;
    ember_conv_pf_step(q->pf);
#define EMBER_FLAT_CALL(RW) \
  EMBER_CAT4(ember_flat_tile, EMBER_L, RW, EMBER_FLAT_RB)(q, pad, f, w, bias, o)
    switch (t) {
      case 6: EMBER_FLAT_CALL(6); break;
      case 5: EMBER_FLAT_CALL(5); break;
      case 4: EMBER_FLAT_CALL(4); break;
      case 3: EMBER_FLAT_CALL(3); break;
      case 2: EMBER_FLAT_CALL(2); break;
      default: EMBER_FLAT_CALL(1); break;
    }
#undef EMBER_FLAT_CALL
    f += t;
  }
}

/* Flattened positions [f0, f1) of batch b for output blocks [ob, ob + nb): EMBER_FLAT_RB
 * blocks at a time, in passes over chunks of input blocks (ember_conv_flat_chunk); the
 * blocks left over in the row tiles of ember_conv_strip. In passes, each tile prefetches its
 * slice of the next pass's weights into the L2 (ember_conv_pf_step): each pass began by
 * reading its chunk from memory (one core, weights cold, thread time: resnet18's 3x3
 * 512->512 at 7x7 and 256->256 at 14x14 0.93x, inception's 8x8 convs 0.92-0.95x, its 7x1
 * 192->192 at 17x17 0.94x; 0.98-1.0x with the weights warm). */
EMBER_KFN void EMBER_FN(ember_conv_flat_run)(const ember_conv_p* p, const float* pad,
                                             int32_t b, int32_t ob, int32_t nb, int32_t f0,
                                             int32_t f1) {
  const int32_t L = EMBER_L, chunk = EMBER_FN(ember_conv_flat_chunk)(p);
  const size_t wob = (size_t)p->icb_g * p->kh * p->kw * L * L;
  const size_t cs = (size_t)ember_conv_flat_hp(p) * ember_conv_flat_wp(p) * L;
  ember_conv_p q = *p;
  ember_conv_pf pf;
  int32_t sb, oy, k0;
  for (sb = 0; sb + EMBER_FLAT_RB <= nb; sb += EMBER_FLAT_RB) {
    const float* bias = p->bias + (size_t)(ob + sb) * L;
    const size_t o = ((size_t)b * p->ocb + ob + sb) * p->oh * p->ow * L;
    if (chunk >= p->icb_g && EMBER_FLAT_RB == 2) { /* p itself (a copy cost AVX2's pairs 3%) */
      EMBER_FN(ember_conv_flat_pass)(p, pad, p->wt + (ob + sb) * wob, bias, o, f0, f1);
      continue;
    }
    for (k0 = 0; k0 < p->icb_g; k0 += chunk) {
      const int32_t last = k0 + chunk >= p->icb_g;
      /* each tile prefetches its slice of the next pass's weights (of this quad, or the
       * next quad's first pass after the last one) */
      const int32_t next_k0 = last ? 0 : k0 + chunk, next_ob = last ? ob + sb + EMBER_FLAT_RB
                                                                    : ob + sb;
      q.pf = NULL;
      if (next_ob + EMBER_FLAT_RB <= ob + nb) {
        const size_t per_block = (size_t)p->kh * p->kw * L * L;
        const size_t tiles = (size_t)(f1 - f0 + EMBER_CONV_FLAT_RW - 1) / EMBER_CONV_FLAT_RW;
        pf.wob = wob;
        pf.base = p->wt + (size_t)next_ob * wob + (size_t)next_k0 * per_block;
        pf.len = (size_t)(p->icb_g - next_k0 < chunk ? p->icb_g - next_k0 : chunk) * per_block;
        pf.step = ((pf.len + tiles - 1) / tiles + 15) & ~(size_t)15;
        pf.at = 0;
        pf.nb = EMBER_FLAT_RB;
        q.pf = &pf;
      }
      q.icb_g = last ? p->icb_g - k0 : chunk;
      q.icl = last ? p->icl : L;
      q.accum = k0 > 0; /* the partial sums of the passes before, not the bias */
      q.act = last ? p->act : 0;
      q.flags = last ? p->flags : 0;
      q.epi = ember_conv_epi_case(&q);
      EMBER_FN(ember_conv_flat_pass)(&q, pad + k0 * cs,
                                     p->wt + (ob + sb) * wob + (size_t)k0 * p->kh * p->kw * L * L,
                                     bias, o, f0, f1);
    }
  }
  if (ember_conv_late_act(p)) {
    int32_t pb;
    for (pb = 0; pb < sb; ++pb) {
      const size_t o = ((size_t)b * p->ocb + ob + pb) * p->oh * p->ow * L;
      EMBER_FN(ember_conv_act_pass)(p, o + (size_t)f0 * L, (size_t)(f1 - f0) * L);
    }
  }
  if (sb < nb) { /* blocks left: their rows (or row pieces) as ember_conv_strip computes them */
    for (oy = f0 / p->ow; oy * p->ow < f1; ++oy) {
      const int32_t x0 = f0 > oy * p->ow ? f0 - oy * p->ow : 0;
      const int32_t x1 = f1 < (oy + 1) * p->ow ? f1 - oy * p->ow : p->ow;
      EMBER_FN(ember_conv_strip)(p, b, ob + sb, nb - sb, oy, x0, x1);
    }
  }
}
