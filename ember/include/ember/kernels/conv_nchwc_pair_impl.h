/*!
 * \file ember/kernels/conv_nchwc_pair_impl.h
 * \brief 1x1 convs to 8-lane output blocks on AVX-512: two output blocks per 16-lane
 *        accumulator. Included by conv_nchwc_impl.h for EMBER_L == 8 when the target has
 *        AVX-512 (EMBER_CONV_PAIRS is then 1); no include guard on purpose.
 *
 * Channel counts that split into blocks of 8 but not 16 (24, 40, 72, 120, 184: the
 * projections and expansions of MobileNetV2/V3 and EfficientNet) keep NCHW8c on AVX-512, and
 * the 8-lane kernel ran them at half the vector width, over a 16-lane input block with a
 * pointer per column (EfficientDet's 1x1 96->24 at 128x128 and 144->40 at 64x64: 1.75x and
 * 1.5x onnxruntime's time). Here a 16-lane accumulator holds output blocks 2k and 2k + 1 of
 * one pixel (both sum the same input channels, so one broadcast feeds both halves): a tile
 * of RW pixels x NP such pairs covers up to 8 blocks (64 channels), so a projection to 24 or
 * 40 channels reads its input once, every FMA full width. The weights are repacked per call
 * into a workspace, per block group [input channel][pair][16] (an odd group's last pair has
 * zeros in its upper half; its store skips them), and the bias as [pair][16] after them.
 *
 * Applies (ember_conv_pairs) to a dense 1x1 stride-1 unpadded conv (the flattened form the
 * cost model gives it) over an input in blocks of 8 or 16 channels, planned with an even rb
 * of at most 8 (blocks per group: 2 * NP), when the entry point got the workspace.
 */
#if EMBER_L != 8 || !defined(__AVX512F__)
#error "conv_nchwc_pair_impl.h is for the 8-lane kernel of an AVX-512 build"
#endif

#define EMBER_PAIR_MAX_NP 4 /* pairs per tile: 4 x 6 accumulators + 4 weights + a broadcast */
/* Output pixels (all images) below which the per-call weight repack costs more than the wide
 * FMAs save (an SE block's convs on a 1x1 map): the 8-lane tiles run them. The cost model
 * (conv2d_nchwc.py's PAIR_MIN_PIXELS) applies it to static sizes; this check, at run time,
 * to a dynamic build's, which chose the pair plan without knowing them. */
#define EMBER_PAIR_MIN_PIXELS 64

typedef ember_v16 ember_pv;

/* Whether a call runs on the pair tiles (before the workspace: pair_w not yet needed). */
static inline int ember_conv_pairs_apply(const ember_conv_p* p) {
  return !p->depthwise && p->groups == 1 && p->kh == 1 && p->kw == 1 && p->sh == 1 &&
         p->sw == 1 && p->pt == 0 && p->pl == 0 && p->h == p->oh && p->w == p->ow &&
         (p->cb == 8 || p->cb == 16) && p->rb >= 2 && p->rb % 2 == 0 &&
         p->rb <= 2 * EMBER_PAIR_MAX_NP &&
         (int64_t)p->n * p->oh * p->ow >= EMBER_PAIR_MIN_PIXELS;
}

/* Floats of the repacked weights and bias. */
static inline size_t ember_conv_pair_floats(const ember_conv_p* p) {
  const size_t pairs = (size_t)(p->ocb + 1) / 2, ic = (size_t)p->icb * p->cb;
  return pairs * ic * 16 + pairs * 16;
}

/* Repack w [OC/8][IC/CB][CB][8] and bias [OC] into dst (layout: file comment), a block's
 * 8 floats at a time: it runs on the calling thread before the launch, and per float (an
 * index computation and a bounds test each) it took 3 us of mobilenet_v2's 144->24 1x1 (a
 * third of a task's time on 16 threads). */
static inline void ember_conv_pair_pack(const ember_conv_p* p, float* dst) {
  const int32_t ic = p->icb * p->cb, pairs = (p->ocb + 1) / 2;
  float* bias = dst + (size_t)pairs * ic * 16;
  int32_t ob0, k, c, l;
  for (ob0 = 0; ob0 < p->ocb; ob0 += p->rb) {
    const int32_t nb = p->ocb - ob0 < p->rb ? p->ocb - ob0 : p->rb, np = (nb + 1) / 2;
    float* g = dst + (size_t)(ob0 / 2) * ic * 16;
    for (k = 0; k < np; ++k) {
      const float* lo_w = p->wt + (size_t)(ob0 + 2 * k) * ic * 8;
      const float* hi_w = 2 * k + 1 < nb ? lo_w + (size_t)ic * 8 : NULL;
      float* v = g + (size_t)k * 16;
      for (c = 0; c < ic; ++c, v += (size_t)np * 16) {
        __builtin_memcpy(v, lo_w + (size_t)c * 8, 8 * sizeof(float));
        if (hi_w != NULL) {
          __builtin_memcpy(v + 8, hi_w + (size_t)c * 8, 8 * sizeof(float));
        } else {
          for (l = 8; l < 16; ++l) v[l] = 0.0f;
        }
      }
    }
  }
  for (k = 0; k < pairs; ++k) {
    for (l = 0; l < 16; ++l) bias[k * 16 + l] = 2 * k + l / 8 < p->ocb ? p->bias[k * 16 + l] : 0.0f;
  }
}

/* The general store (conv_nchwc's ember_conv_store: any epilogue) of n accumulators of a tile
 * (acc[j * np + k]: pixel j, pair k) plus their pairs' bias, each split into its two 8-lane
 * blocks; the upper half of the last pair only where the group has that block (half: it does
 * not). Out of line: inlined, its switch over the activations was copied into every tile. */
EMBER_KFN void ember_pair_store_general(const ember_conv_p* p, const ember_pv* acc, int32_t rw,
                                        int32_t np, const float* pb, size_t o, size_t oob,
                                        int32_t half) {
  int32_t j, k, u;
  for (k = 0; k < np; ++k) {
    const ember_pv bv = EMBER_VLOAD(16, pb + k * 16);
    for (j = 0; j < rw; ++j) {
      const ember_pv v = acc[j * np + k] + bv;
      ember_v8 h[2];
      h[0] = __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7);
      h[1] = __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15);
      for (u = 0; u < 2 - (k == np - 1 && half); ++u) {
        const size_t at = o + (size_t)(2 * k + u) * oob + (size_t)j * 8;
        ember_conv_store_x8(p, &h[u], p->out + at, p->res + at);
      }
    }
  }
}

/* The stores of a tile for one epilogue (its choices constants, as EMBER_CONV_STORE_RUN):
 * each accumulator plus its pair's bias, split into the two 8-lane blocks it holds; the
 * upper half of the last pair only where the group has that block (half: it does not). */
#define EMBER_PAIR_STORE_RUN(RW, NP, FIRST, CLAMP, LAST)                                       \
  EMBER_KUNROLL for (k = 0; k < NP; ++k) {                                                     \
    const ember_pv bv = EMBER_VLOAD(16, pb + k * 16);                                          \
    EMBER_KUNROLL for (j = 0; j < RW; ++j) {                                                   \
      const ember_pv v = acc[j][k] + bv;                                                       \
      ember_v8 h[2];                                                                           \
      int32_t u;                                                                               \
      h[0] = __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7);                            \
      h[1] = __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15);                      \
      EMBER_KUNROLL for (u = 0; u < 2; ++u) {                                                  \
        const size_t at = (size_t)(2 * k + u) * oob + (size_t)j * 8;                           \
        ember_v8 x = h[u];                                                                     \
        if (u == 1 && k == NP - 1 && half) continue;                                           \
        if (FIRST) x += EMBER_VLOAD(8, res_ + at);                                             \
        if (CLAMP) x = EMBER_VMAX(8, x, vlo_);                                                 \
        if (CLAMP == 2) x = EMBER_VMIN(8, x, vhi_);                                            \
        if (LAST) x += EMBER_VLOAD(8, res_ + at);                                              \
        EMBER_VSTORE(8, out_ + at, x);                                                         \
      }                                                                                        \
    }                                                                                          \
  }

/* Tiles of RW pixels x NP pairs over an input in blocks of CB channels: `count` of them side
 * by side from the pixel at `src` (block 0; blocks cs floats apart), output at p->out + o
 * (blocks oob floats apart); pw: the group's packed weights, pb its bias; half: the group's
 * last pair has no upper block. */
#define EMBER_PAIR_TILE(CB, NP, RW)                                                            \
  static inline void ember_pair_tile_##CB##_##NP##_##RW(                                       \
      const ember_conv_p* p, const float* src, ptrdiff_t cs, const float* pw, const float* pb, \
      size_t o, size_t oob, int32_t half, int32_t count) {                                     \
    const int32_t icb_n = p->icb;                                                              \
    int32_t tile, icb, c, j, k;                                                                \
    for (tile = 0; tile < count; ++tile, src += RW * CB, o += RW * 8) {                        \
      ember_pv acc[RW][NP];                                                                    \
      const float* s = src;                                                                    \
      const float* wq = pw;                                                                    \
      EMBER_KUNROLL for (j = 0; j < RW; ++j)                                                   \
        EMBER_KUNROLL for (k = 0; k < NP; ++k) acc[j][k] = EMBER_VZERO(16);                    \
      for (icb = 0; icb < icb_n; ++icb, s += cs) {                                             \
        EMBER_KUNROLL for (c = 0; c < CB; ++c, wq += NP * 16) {                                \
          ember_pv wv[NP];                                                                     \
          EMBER_KUNROLL for (k = 0; k < NP; ++k) {                                             \
            ember_pv w_ = EMBER_VLOAD_REG(16, wq + k * 16);                                    \
            if (RW <= 4) EMBER_VPIN(16, w_);                                                   \
            wv[k] = w_;                                                                        \
          }                                                                                    \
          EMBER_KUNROLL for (j = 0; j < RW; ++j) {                                             \
            const ember_pv bx = EMBER_VBCAST(16, s + j * CB + c);                              \
            EMBER_KUNROLL for (k = 0; k < NP; ++k)                                             \
              acc[j][k] = EMBER_VFMA(16, acc[j][k], bx, wv[k]);                                \
          }                                                                                    \
        }                                                                                      \
      }                                                                                        \
      {                                                                                        \
        float* const out_ = p->out + o;                                                        \
        const float* const res_ = p->res + o;                                                  \
        const ember_v8 vlo_ = EMBER_VSPLAT(8, (p->epi >> 1 & 3) == 2 ? p->lo : 0.0f);          \
        const ember_v8 vhi_ = EMBER_VSPLAT(8, p->hi);                                          \
        switch (RW == 1 ? -1 : p->epi) { /* single pixels: the general store (compile time) */ \
          case 0: EMBER_PAIR_STORE_RUN(RW, NP, 0, 0, 0) break;                                 \
          case 1: EMBER_PAIR_STORE_RUN(RW, NP, 1, 0, 0) break;                                 \
          case 2: EMBER_PAIR_STORE_RUN(RW, NP, 0, 1, 0) break;                                 \
          case 3: EMBER_PAIR_STORE_RUN(RW, NP, 1, 1, 0) break;                                 \
          case 4: EMBER_PAIR_STORE_RUN(RW, NP, 0, 2, 0) break;                                 \
          case 5: EMBER_PAIR_STORE_RUN(RW, NP, 1, 2, 0) break;                                 \
          case 10: EMBER_PAIR_STORE_RUN(RW, NP, 0, 1, 1) break;                                \
          case 12: EMBER_PAIR_STORE_RUN(RW, NP, 0, 2, 1) break;                                \
          default: { /* the rest (never partial sums: 1x1 convs run in one pass) */            \
            ember_pv spill_[RW * NP]; /* a copy: acc, its address taken, would spill */        \
            EMBER_KUNROLL for (j = 0; j < RW; ++j)                                             \
              EMBER_KUNROLL for (k = 0; k < NP; ++k) spill_[j * NP + k] = acc[j][k];           \
            ember_pair_store_general(p, spill_, RW, NP, pb, o, oob, half);                     \
            break;                                                                             \
          }                                                                                    \
        }                                                                                      \
      }                                                                                        \
    }                                                                                          \
  }

/* Tile widths: as many accumulators as fit beside NP weights and a broadcast (24 of the 32
 * registers for NP = 2, 3, 4), and single pixels for a strip's last columns. */
#define EMBER_PAIR_TILES(CB)                                                                   \
  EMBER_PAIR_TILE(CB, 1, 12) EMBER_PAIR_TILE(CB, 1, 1)                                         \
  EMBER_PAIR_TILE(CB, 2, 12) EMBER_PAIR_TILE(CB, 2, 1)                                         \
  EMBER_PAIR_TILE(CB, 3, 8) EMBER_PAIR_TILE(CB, 3, 1)                                          \
  EMBER_PAIR_TILE(CB, 4, 6) EMBER_PAIR_TILE(CB, 4, 1)
EMBER_PAIR_TILES(8)
EMBER_PAIR_TILES(16)
#undef EMBER_PAIR_TILES

/* The tile width of NP pairs (the cost model's rw for these convs: conv2d_nchwc.py). */
static inline int32_t ember_pair_width(int32_t np) { return np <= 2 ? 12 : np == 3 ? 8 : 6; }

/* Run `count` tiles of NP pairs, RW = ember_pair_width(np) columns wide (wide) or 1. */
static inline void ember_pair_tiles(const ember_conv_p* p, int32_t np, int wide,
                                    const float* src, ptrdiff_t cs, const float* pw,
                                    const float* pb, size_t o, size_t oob, int32_t half,
                                    int32_t count) {
#define EMBER_PAIR_CALL(CB, NP, RW) \
  ember_pair_tile_##CB##_##NP##_##RW(p, src, cs, pw, pb, o, oob, half, count)
#define EMBER_PAIR_CASES(CB)                                                                   \
  switch (np * 2 + !wide) {                                                                    \
    case 2: EMBER_PAIR_CALL(CB, 1, 12); return;                                                \
    case 3: EMBER_PAIR_CALL(CB, 1, 1); return;                                                 \
    case 4: EMBER_PAIR_CALL(CB, 2, 12); return;                                                \
    case 5: EMBER_PAIR_CALL(CB, 2, 1); return;                                                 \
    case 6: EMBER_PAIR_CALL(CB, 3, 8); return;                                                 \
    case 7: EMBER_PAIR_CALL(CB, 3, 1); return;                                                 \
    case 8: EMBER_PAIR_CALL(CB, 4, 6); return;                                                 \
    default: EMBER_PAIR_CALL(CB, 4, 1); return;                                                \
  }
  if (p->cb == 8) {
    EMBER_PAIR_CASES(8)
  } else {
    EMBER_PAIR_CASES(16)
  }
#undef EMBER_PAIR_CASES
#undef EMBER_PAIR_CALL
}

/* Work items [lo, hi) on the pair tiles: each item's strip of one row for its block group,
 * in tiles as wide as the group's pair count allows, its last columns one at a time. */
EMBER_KFN void ember_conv_pair_range_x8(const ember_conv_p* p, int64_t lo, int64_t hi) {
  const size_t plane = (size_t)p->h * p->w, ic = (size_t)p->icb * p->cb;
  const size_t oob = (size_t)p->oh * p->ow * 8;
  const float* pbias = p->pair_w + (size_t)((p->ocb + 1) / 2) * ic * 16;
  int64_t item;
  for (item = lo; item < hi; ++item) {
    int32_t b, og, oy, s, nb, ob, x0, x1, np, rw, full, sb;
    size_t o;
    const float* src;
    ember_conv_item(p, item, &b, &og, &oy, &s);
    ob = ember_conv_blocks(p, og, &nb);
    x0 = s * p->strip;
    x1 = x0 + p->strip < p->ow ? x0 + p->strip : p->ow;
    np = (nb + 1) / 2;
    rw = ember_pair_width(np);
    full = (x1 - x0) / rw;
    src = p->in + ((size_t)b * p->icb * plane + (size_t)oy * p->w + x0) * p->cb;
    o = (((size_t)b * p->ocb + ob) * p->oh + oy) * p->ow * 8 + (size_t)x0 * 8;
    /* ob is even (groups of an even rb): the group's pairs start at pair ob / 2 */
    if (full > 0) {
      ember_pair_tiles(p, np, 1, src, (ptrdiff_t)(plane * p->cb), p->pair_w + ob / 2 * ic * 16,
                       pbias + ob / 2 * 16, o, oob, nb & 1, full);
    }
    if (x1 - x0 > full * rw) {
      ember_pair_tiles(p, np, 0, src + (size_t)full * rw * p->cb, (ptrdiff_t)(plane * p->cb),
                       p->pair_w + ob / 2 * ic * 16, pbias + ob / 2 * 16,
                       o + (size_t)full * rw * 8, oob, nb & 1, x1 - x0 - full * rw);
    }
    if (ember_conv_late_act(p)) {
      for (sb = 0; sb < nb; ++sb) {
        const size_t orow = (((size_t)b * p->ocb + ob + sb) * p->oh + oy) * p->ow * 8;
        ember_conv_act_pass_x8(p, orow + (size_t)x0 * 8, (size_t)(x1 - x0) * 8);
      }
    }
  }
}
