/*
 * ember kernels: the depthwise paths of ember_qconv2d (one input and one output channel per
 * group), included by qconv.h only (its args struct and requantizing store).
 *
 * Taps run in pairs. The input values (u8 view, 0..255) are held as int32 words of two int16:
 * a position's value (low half) and the next position's (high half; ember_qconv_dw_pair), so
 * two taps whose offsets differ by one are one pair product of a word with (w_a, w_b):
 * vpdpwssd with VNNI, vpmaddwd with AVX2 or SSE2 (EMBER_QDOT2), ember_qdot2 in C, instead of
 * an int32 multiply (vpmulld: two uops) and an add per tap. A 3x3 conv is 6 pair products per
 * output at any stride: at stride 2 taps kx = 0 and 2 read adjacent values of one phase plane.
 * A tap with no partner pairs with a zero weight. A weight zero point is folded into the
 * weights (w - w_zp lies in [-255, 255]: an int16), so no input sum is kept. Every product and
 * sum is exact in int32: results equal the unpaired ones bit for bit.
 *
 * With AVX-512 VBMI the quads path (qconv_dwq.h) takes every conv it can (weights without a
 * zero point, windows within 64 bytes); otherwise three paths, by map size and geometry:
 * - channels in lanes (AVX-512, padded planes of at most EMBER_QCONV_LANES_MAX pixels): an item is
 *   (image, block of 16 channels), the block gathered into a padded plane of pair words
 *   [hp][ww][16] (ember_qconv_dwl_item);
 * - "same" (stride and dilation 1, symmetric width padding): the channel widened with
 *   zero-point rows above and below, one vector loop over flat positions, edge taps corrected
 *   (ember_qconv_dws_item);
 * - otherwise the channel's zero-point-padded plane split into stride phases, each tap one
 *   offset into it (ember_qconv_dw_item).
 */
#ifndef EMBER_KERNELS_QCONV_DW_H_
#define EMBER_KERNELS_QCONV_DW_H_

/* A pair of taps: the word offset both read (tap lo at it, tap hi at it + 1; hi < 0: none). */
typedef struct {
  int64_t offset;
  int32_t lo, hi;
} ember_qconv_dw_tpair;

/* Taps [0, taps) at `offsets` as pairs (at most taps of them; returns the count): sorted by
 * offset (insertion sort: taps are few), neighbours one apart paired greedily. */
static int64_t ember_qconv_dw_pairs(const int64_t* offsets, int64_t taps,
                                    ember_qconv_dw_tpair* pairs) {
  int64_t i, j, n = 0;
  for (i = 0; i < taps; ++i) {
    ember_qconv_dw_tpair cur;
    cur.offset = offsets[i];
    cur.lo = (int32_t)i;
    cur.hi = -1;
    for (j = i; j > 0 && pairs[j - 1].offset > cur.offset; --j) pairs[j] = pairs[j - 1];
    pairs[j] = cur;
  }
  for (i = 0; i < taps; ++n) { /* in place: n <= i, and pairs[i], pairs[i + 1] read first */
    ember_qconv_dw_tpair cur = pairs[i];
    if (i + 1 < taps && pairs[i + 1].offset == cur.offset + 1) {
      cur.hi = pairs[i + 1].lo;
      i += 2;
    } else {
      i += 1;
    }
    pairs[n] = cur;
  }
  return n;
}

/* The weight word of pair p of channel block wk ([k4][4][4] int8, tap t at wk[t * 16]). */
static inline uint32_t ember_qconv_dw_wword(const int8_t* wk, int32_t wz,
                                            const ember_qconv_dw_tpair* p) {
  return ember_qpair(wk[p->lo * 16] - wz, p->hi < 0 ? 0 : wk[p->hi * 16] - wz);
}

/* v[q] (0..255) becomes the word (v[q], v[q + 1]) for q < n - 1, in place (v[n - 1] keeps a
 * zero high half). */
static void ember_qconv_dw_pair(int32_t* v, int64_t n) {
  int64_t q = 0;
#if defined(EMBER_Q_VECTOR_EXT)
  for (; q + EMBER_QL < n; q += EMBER_QL) { /* both loads before the store */
    const ember_qvi w = ember_qload(v + q) | (ember_qload(v + q + 1) << 16);
    memcpy(v + q, &w, sizeof w);
  }
#endif
  for (; q + 1 < n; ++q) v[q] |= v[q + 1] << 16;
}

#define EMBER_QCONV_DW_PAIRS_MAX 32 /* pairs held in locals: 7x7 kernels (28 pairs) */

#if defined(EMBER_Q_VECTOR_EXT)
/* The vector loop of ember_qconv_dw_taps, inlined with a constant pair count for 3x3 (6) and
 * its offsets and weights in locals (the byte stores to out may alias pairs, wwords and *a,
 * which would be reloaded for every vector). */
static inline __attribute__((always_inline)) void ember_qconv_dw_taps_vec(
    const ember_qconv_args* a, const int32_t* base, const ember_qconv_dw_tpair* pairs,
    const uint32_t* wwords, const int64_t npairs, int64_t positions, const int32_t* corr,
    int32_t bias, float scale, uint8_t* out) {
  const ember_qrq rq = ember_qrq_make(a->y_zp, a->y_lo, a->y_hi);
  const ember_qvf vscale = (ember_qvf){0} + scale;
  const ember_qvi vbias = ember_qset1(bias);
  int64_t offsets[EMBER_QCONV_DW_PAIRS_MAX];
  ember_qvi w[EMBER_QCONV_DW_PAIRS_MAX];
  int64_t p, t;
  for (t = 0; t < npairs; ++t) {
    offsets[t] = pairs[t].offset;
    w[t] = ember_qset1((int32_t)wwords[t]);
  }
  for (p = 0; p < positions; p += EMBER_QL) {
    const int64_t left = positions - p;
    ember_qvi acc = vbias;
    ember_qvub q;
    if (corr) acc += ember_qload(corr + p);
    for (t = 0; t < npairs; ++t) acc = EMBER_QDOT2(acc, ember_qload(base + offsets[t] + p), w[t]);
    q = ember_qrq_bytes(acc, vscale, &rq);
    if (left >= EMBER_QL) {
      *(ember_qvub_u*)(out + p) = q;
    } else {
      memcpy(out + p, &q, (size_t)left);
    }
  }
}
#endif

/* A depthwise channel's outputs at flat positions [0, positions): bias (+ corr[p] when
 * given) + over the pairs, the pair product of the word at p + pairs[t].offset with wwords[t],
 * requantized and stored to out[p]. One vector of positions at a time, its pairs accumulated
 * in registers. */
static void ember_qconv_dw_taps(const ember_qconv_args* a, const int32_t* base,
                                const ember_qconv_dw_tpair* pairs, const uint32_t* wwords,
                                int64_t npairs, int64_t positions, const int32_t* corr,
                                int32_t bias, float scale, uint8_t* out) {
  int64_t p, t;
#if defined(EMBER_Q_VECTOR_EXT)
  if (npairs == 6) {
    ember_qconv_dw_taps_vec(a, base, pairs, wwords, 6, positions, corr, bias, scale, out);
    return;
  }
  if (npairs <= EMBER_QCONV_DW_PAIRS_MAX) {
    ember_qconv_dw_taps_vec(a, base, pairs, wwords, npairs, positions, corr, bias, scale, out);
    return;
  }
  for (p = 0; p < positions; p += EMBER_QL) {
    const int64_t left = positions - p;
    ember_qvi acc = ember_qset1(bias);
    if (corr) acc += ember_qload(corr + p);
    for (t = 0; t < npairs; ++t) {
      acc = EMBER_QDOT2(acc, ember_qload(base + pairs[t].offset + p),
                        ember_qset1((int32_t)wwords[t]));
    }
    ember_qstore(out + p, acc, scale, a->y_zp, a->y_lo, a->y_hi,
                 left < EMBER_QL ? left : EMBER_QL);
  }
#else
  for (p = 0; p < positions; ++p) {
    int32_t acc = bias + (corr ? corr[p] : 0);
    for (t = 0; t < npairs; ++t) acc += ember_qdot2((uint32_t)base[pairs[t].offset + p], wwords[t]);
    out[p] = (uint8_t)ember_qrequant(acc, scale, a->y_zp, a->y_lo, a->y_hi);
  }
#endif
}

/* The depthwise plane: the input padded with x_zp and cropped to what the windows read, as
 * int32 (widened once here, not per tap), its rows split into sh phases and its columns into
 * sw phases (row y in row phase y % sh at y / sh; column x alike), each phase plane hq x wq.
 * Every tap then reads, for the output at flat position p = oy * wq + ox, the value at p plus
 * a constant offset in one phase plane: a whole channel is one run of oh * wq positions (the
 * wq - ow past each row computed and dropped), so the loop over it is long enough to
 * vectorise at any width and stride. */
typedef struct {
  int64_t hq, wq;              /* a phase plane's rows and columns */
  int64_t phase;               /* its values: hq x wq, and slack for the positions past the
                                  last row's ow and the last vector's tail (read, never used) */
  int64_t positions;           /* oh x wq flat output positions */
  int64_t taps;                /* kh x kw */
  int64_t npairs;              /* the taps' pairs */
  int64_t* offsets;            /* per tap, its offset into the plane */
  int64_t* cols;               /* per column phase, the columns [lo, hi) that hold input */
  ember_qconv_dw_tpair* pairs; /* the taps in pairs */
  uint32_t* wwords;            /* per pair, the channel's weight word */
} ember_qconv_dw_geom;

/* The int64 cells of a geometry's tables (offsets, cols, pairs; wwords after them). */
static inline int64_t ember_qconv_dw_cells(const ember_qconv_args* a) {
  return a->kh * a->kw * (1 + (int64_t)sizeof(ember_qconv_dw_tpair) / 8 + 1) + 2 * a->sw;
}

/* The geometry of every channel of the call, computed once per task (`table`:
 * ember_qconv_dw_cells entries): the divisions stay out of the per-channel work. */
static void ember_qconv_dw_geometry(const ember_qconv_args* a, ember_qconv_dw_geom* g,
                                    int64_t* table) {
  const int64_t hp = (a->oh - 1) * a->sh + (a->kh - 1) * a->dh + 1;
  int64_t ky, kx, cph;
  g->hq = (hp + a->sh - 1) / a->sh;
  g->wq = ((a->ow - 1) * a->sw + (a->kw - 1) * a->dw + 1 + a->sw - 1) / a->sw;
  g->phase = (g->hq + 1) * g->wq + 2 * EMBER_QL;
  g->positions = a->oh * g->wq;
  g->taps = a->kh * a->kw;
  g->offsets = table;
  g->cols = table + g->taps;
  g->pairs = (ember_qconv_dw_tpair*)(table + g->taps + 2 * a->sw);
  g->wwords = (uint32_t*)(g->pairs + g->taps);
  for (ky = 0; ky < a->kh; ++ky) {
    for (kx = 0; kx < a->kw; ++kx) {
      const int64_t row = ky * a->dh, col = kx * a->dw;
      g->offsets[ky * a->kw + kx] = ((row % a->sh) * a->sw + col % a->sw) * g->phase +
                                    (row / a->sh) * g->wq + col / a->sw;
    }
  }
  g->npairs = ember_qconv_dw_pairs(g->offsets, g->taps, g->pairs);
  for (cph = 0; cph < a->sw; ++cph) { /* columns j whose input column j sw + cph - pw is in */
    int64_t lo = (a->pw - cph + a->sw - 1) / a->sw;
    int64_t hi = (a->pw + a->wd - cph + a->sw - 1) / a->sw;
    lo = lo < 0 ? 0 : lo > g->wq ? g->wq : lo;
    hi = hi < lo ? lo : hi > g->wq ? g->wq : hi;
    g->cols[2 * cph] = lo;
    g->cols[2 * cph + 1] = hi;
  }
}

static inline void ember_qconv_dw_fill(int32_t* row, int64_t n, int32_t v) {
  int64_t j;
  for (j = 0; j < n; ++j) row[j] = v;
}

/* The phase planes of one channel (src: its h x wd bytes), read straight from the bytes,
 * each paired (ember_qconv_dw_pair) once built. */
static void ember_qconv_dw_plane(const ember_qconv_args* a, const ember_qconv_dw_geom* g,
                                 const uint8_t* src, int32_t* plane) {
  const int64_t hq = g->hq, wq = g->wq, sw = a->sw;
  const int32_t zp = a->x_zp;
  const uint8_t flip = a->flip;
  int64_t rph, cph, iy, j;
  for (rph = 0; rph < a->sh; ++rph) {
    for (cph = 0; cph < sw; ++cph) {
      int32_t* phase = plane + (rph * sw + cph) * g->phase;
      const int64_t lo = g->cols[2 * cph], hi = g->cols[2 * cph + 1];
      for (iy = 0; iy < hq; ++iy) {
        const int64_t sy = iy * a->sh + rph - a->ph;
        int32_t* row = phase + iy * wq;
        const uint8_t* in = src + sy * a->wd + cph - a->pw;
        if (sy < 0 || sy >= a->h) {
          ember_qconv_dw_fill(row, wq, zp);
          continue;
        }
        ember_qconv_dw_fill(row, lo, zp);
        if (sw == 1) {
          for (j = lo; j < hi; ++j) row[j] = (uint8_t)(in[j] ^ flip);
        } else if (sw == 2) {
          for (j = lo; j < hi; ++j) row[j] = (uint8_t)(in[j * 2] ^ flip);
        } else {
          for (j = lo; j < hi; ++j) row[j] = (uint8_t)(in[j * sw] ^ flip);
        }
        ember_qconv_dw_fill(row + hi, wq - hi, zp);
      }
      ember_qconv_dw_fill(phase + hq * wq, g->phase - hq * wq, zp);
      ember_qconv_dw_pair(phase, g->phase); /* while it is in L1 (no pair crosses planes) */
    }
  }
}

/* One (image, channel) plane of a depthwise conv: per vector of flat output positions, the
 * pairs accumulated in registers, requantized into `out` (oh x wq bytes), whose rows' first
 * ow bytes are then the output's rows. */
static void ember_qconv_dw_item(const ember_qconv_args* a, const ember_qconv_dw_geom* g,
                                int64_t item, int32_t* plane, uint8_t* out) {
  const int64_t ch = item % a->c, wq = g->wq;
  uint8_t* dst = a->y + item * a->p;
  const int8_t* wk = a->w + ch * (a->k4 * 16); /* the group's block: row 0 of [k4][4][4] */
  const int32_t wz = a->has_w_zp ? a->w_zp[ch] : 0;
  int64_t oy, t;
  for (t = 0; t < g->npairs; ++t) g->wwords[t] = ember_qconv_dw_wword(wk, wz, g->pairs + t);
  ember_qconv_dw_plane(a, g, a->x + item * a->h * a->wd, plane);
  ember_qconv_dw_taps(a, plane, g->pairs, g->wwords, g->npairs, g->positions, NULL,
                      a->bias[ch], a->scale[ch], out);
  for (oy = 0; oy < a->oh; ++oy) memcpy(dst + oy * a->ow, out + oy * wq, (size_t)a->ow);
}

/* Whether a depthwise conv keeps the width at stride and dilation 1 (pw = (kw - 1) / 2 on
 * both sides: "same" padding, as most are): its channel then needs no padded plane. */
static inline int ember_qconv_dw_same(const ember_qconv_args* a) {
  return a->sh == 1 && a->sw == 1 && a->dh == 1 && a->dw == 1 && a->ow == a->wd &&
         a->pw == (a->kw - 1) / 2 &&
         a->ph >= 0 && a->ph < a->kh && a->oh >= 1;
}

/* The rows (oh + kh - 1 of them, from input row -ph) of the widened channel, front slack
 * of EMBER_QL values and back slack for the last vector's taps. */
static inline int64_t ember_qconv_dws_values(const ember_qconv_args* a) {
  return (a->oh + a->kh) * a->wd + 3 * EMBER_QL;
}

/* One (image, channel) of a "same" depthwise conv: the channel widened to int32 with
 * zero-point rows above and below, every output at flat position p = oy * wd + ox the sum of
 * the values at p plus each tap's offset (one vector loop over the channel, stored straight
 * to the output). A tap past the left or right edge reads the neighbouring row's value instead
 * of the zero point: `corr` (positions + EMBER_QL int32) holds what that adds, subtracted
 * first. `g` holds the taps' pairs (offsets ky wd + kx - pw) and room for their weights. */
static void ember_qconv_dws_item(const ember_qconv_args* a, const ember_qconv_dw_geom* g,
                                 int64_t item, int32_t* wide, int32_t* corr) {
  const int64_t ch = item % a->c, wd = a->wd, pw = (a->kw - 1) / 2;
  const int64_t positions = a->oh * wd, rows = a->oh + a->kh - 1;
  const int64_t top = a->ph, real = a->h < rows - top ? a->h : rows - top;
  const uint8_t* src = a->x + item * a->h * wd;
  uint8_t* dst = a->y + item * a->p;
  const int8_t* wk = a->w + ch * (a->k4 * 16); /* the group's block: row 0 of [k4][4][4] */
  const int32_t wz = a->has_w_zp ? a->w_zp[ch] : 0, zp = a->x_zp;
  const uint8_t flip = a->flip;
  int32_t* base = wide + EMBER_QL; /* input row -ph, column 0 */
  int64_t j, p, oy, ky, kx, t;
  for (j = 0; j < EMBER_QL + top * wd; ++j) wide[j] = zp;
  for (j = 0; j < real * wd; ++j) base[top * wd + j] = (uint8_t)(src[j] ^ flip);
  for (j = (top + real) * wd; j < ember_qconv_dws_values(a) - EMBER_QL; ++j) base[j] = zp;
  for (p = 0; p < positions + EMBER_QL; ++p) corr[p] = 0;
  for (ky = 0; ky < a->kh; ++ky) {
    for (kx = 0; kx < a->kw; ++kx) {
      const int32_t w = (int32_t)wk[(ky * a->kw + kx) * 16] - wz;
      const int64_t lo = kx < pw ? 0 : wd - (kx - pw), hi = kx < pw ? pw - kx : wd;
      if (kx == pw) continue;
      for (oy = 0; oy < a->oh; ++oy) {
        for (p = oy * wd + lo; p < oy * wd + hi; ++p) {
          corr[p] += w * (zp - base[p + ky * wd + kx - pw]);
        }
      }
    }
  }
  for (t = 0; t < g->npairs; ++t) g->wwords[t] = ember_qconv_dw_wword(wk, wz, g->pairs + t);
  ember_qconv_dw_pair(wide, ember_qconv_dws_values(a));
  ember_qconv_dw_taps(a, base, g->pairs, g->wwords, g->npairs, positions, corr, a->bias[ch],
                      a->scale[ch], dst);
}

/* The pairs of a "same" conv's taps (offsets ky wd + kx - pw from `table`'s first cells). */
static void ember_qconv_dws_geometry(const ember_qconv_args* a, ember_qconv_dw_geom* g,
                                     int64_t* table) {
  int64_t ky, kx;
  g->taps = a->kh * a->kw;
  g->offsets = table;
  g->pairs = (ember_qconv_dw_tpair*)(table + g->taps + 2 * a->sw);
  g->wwords = (uint32_t*)(g->pairs + g->taps);
  for (ky = 0; ky < a->kh; ++ky) {
    for (kx = 0; kx < a->kw; ++kx) g->offsets[ky * a->kw + kx] = ky * a->wd + kx - (a->kw - 1) / 2;
  }
  g->npairs = ember_qconv_dw_pairs(g->offsets, g->taps, g->pairs);
}

#if defined(EMBER_Q_VNNI)
/* Depthwise with channels in lanes (AVX-512), for maps up to about 128x128: faster than a loop
 * per channel at every size measured, by most on small maps (7x7, 14x14: a channel's set-up
 * outweighed its taps). An item is (image, block of 16 channels):
 * the block's input is read 16 pixels of its 16 channels at a time, transposed into
 * zero-point-padded rows of bytes [wp][16], widened into a plane of pair words [hp][ww][16]
 * (each lane's word: a pixel's value and the next pixel's; at stride 2 along the width,
 * columns 2j and 2j + 1, so ww is about wp / 2: ember_qconv_dwl_half), each output pixel
 * accumulates its pairs as whole vectors (per-lane weight words and scale), the requantized
 * bytes go to `staged` [pixel][16] and are transposed back 16 pixels at a time. */
/* the padded plane's pixels up to which depthwise runs in lanes (64 bytes each: about 1 MiB,
 * within L2; 112x112 maps at stride 1 and 2 ran 0.7-0.8x the per-channel paths' time) */
#define EMBER_QCONV_LANES_MAX 16900
typedef int32_t ember_qv16 __attribute__((vector_size(64)));
/* 16 bytes zero-extended to int32 lanes (vpmovzxbd): GCC 12 widens a vector read from memory
 * through __builtin_convertvector byte by byte (16 scalar loads and inserts) */
#if defined(__clang__)
#define EMBER_QCONV_DWL_WIDEN(b) __builtin_convertvector((b), ember_qv16)
#else
#define EMBER_QCONV_DWL_WIDEN(b) \
  ((ember_qv16)__builtin_ia32_pmovzxbd512_mask((ember_qc16)(b), (ember_qv16){0}, \
                                               (unsigned short)-1))
#endif

static inline int64_t ember_qconv_dwl_hp(const ember_qconv_args* a) {
  return (a->oh - 1) * a->sh + (a->kh - 1) * a->dh + 1;
}
static inline int64_t ember_qconv_dwl_wp(const ember_qconv_args* a) {
  return (a->ow - 1) * a->sw + (a->kw - 1) * a->dw + 1;
}
/* Stride 2 along the width (dilation 1): the plane's words pair columns 2j and 2j + 1 of a row
 * (half as many words, each tap kx at word ox + kx / 2); otherwise a word pairs a position
 * with the next one, flat along the plane. */
static inline int ember_qconv_dwl_half(const ember_qconv_args* a) {
  return a->sw == 2 && a->dw == 1;
}
/* Words per plane row. */
static inline int64_t ember_qconv_dwl_ww(const ember_qconv_args* a) {
  return ember_qconv_dwl_half(a) ? (ember_qconv_dwl_wp(a) + 1) / 2 : ember_qconv_dwl_wp(a);
}

/* 16 x 16 bytes transposed in place (r[j] becomes byte j of every r): four rounds of
 * interleaving r[i] with r[i + 8] (punpcklbw / punpckhbw). */
static inline void ember_qconv_dwl_transpose(ember_qb16 r[16]) {
  ember_qb16 t[16];
  int i, k;
  for (k = 0; k < 4; ++k) {
    for (i = 0; i < 8; ++i) {
      t[2 * i] = EMBER_QSHUF16(r[i], r[i + 8], 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22,
                               7, 23);
      t[2 * i + 1] = EMBER_QSHUF16(r[i], r[i + 8], 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13,
                                   29, 14, 30, 15, 31);
    }
    memcpy(r, t, sizeof t);
  }
}

/* The output pixels of an item into `staged` (see ember_qconv_dwl_item); inlined with a
 * constant pair count for 3x3 (6: the loop unrolled, the weights in registers). */
static inline __attribute__((always_inline)) void ember_qconv_dwl_pixels(
    const ember_qconv_args* a, const ember_qv16* plane, uint8_t* staged, const ember_qv16* wv,
    const ember_qconv_dw_tpair* pairs, const int64_t npairs, ember_qv16 bias, ember_qvf scale) {
  /* in locals: the byte stores to staged may alias *a and pairs, which would be reloaded */
  const int64_t oh = a->oh, ow = a->ow, sy = a->sh * ember_qconv_dwl_ww(a);
  const int64_t sx = ember_qconv_dwl_half(a) ? 1 : a->sw;
  const ember_qrq rq = ember_qrq_make(a->y_zp, a->y_lo, a->y_hi);
  int64_t offsets[EMBER_QCONV_DW_PAIRS_MAX];
  ember_qv16 w[EMBER_QCONV_DW_PAIRS_MAX];
  int64_t oy, ox, t;
  for (t = 0; t < npairs; ++t) {
    offsets[t] = pairs[t].offset;
    w[t] = wv[t];
  }
  for (oy = 0; oy < oh; ++oy) {
    const ember_qv16* row = plane + oy * sy;
    uint8_t* out = staged + oy * ow * 16;
    for (ox = 0; ox < ow; ++ox) {
      const ember_qv16* at = row + ox * sx;
      ember_qv16 acc = bias;
      ember_qvub q;
      for (t = 0; t < npairs; ++t) acc = EMBER_QDOT2(acc, at[offsets[t]], w[t]);
      q = ember_qrq_bytes(acc, scale, &rq);
      memcpy(out + ox * 16, &q, 16);
    }
  }
}

/* As ember_qconv_dwl_pixels for more pairs than it holds in locals (kernels over 7x7). */
static void ember_qconv_dwl_pixels_wide(const ember_qconv_args* a, const ember_qv16* plane,
                                        uint8_t* staged, const ember_qv16* wv,
                                        const ember_qconv_dw_tpair* pairs, int64_t npairs,
                                        ember_qv16 bias, ember_qvf scale) {
  const int64_t sy = a->sh * ember_qconv_dwl_ww(a), sx = ember_qconv_dwl_half(a) ? 1 : a->sw;
  const ember_qrq rq = ember_qrq_make(a->y_zp, a->y_lo, a->y_hi);
  int64_t oy, ox, t;
  for (oy = 0; oy < a->oh; ++oy) {
    for (ox = 0; ox < a->ow; ++ox) {
      const ember_qv16* at = plane + oy * sy + ox * sx;
      ember_qv16 acc = bias;
      ember_qvub q;
      for (t = 0; t < npairs; ++t) acc = EMBER_QDOT2(acc, at[pairs[t].offset], wv[t]);
      q = ember_qrq_bytes(acc, scale, &rq);
      memcpy(staged + (oy * a->ow + ox) * 16, &q, 16);
    }
  }
}

/* The pairs of the lanes plane's taps into `pairs`, `offsets` scratch (taps cells each): in
 * the half plane (ember_qconv_dwl_half) taps kx = 2j and 2j + 1 of a row share word j (an odd
 * last one pairs with nothing); otherwise taps at offsets ky dh wp + kx dw one apart pair. */
static int64_t ember_qconv_dwl_pairs(const ember_qconv_args* a, int64_t* offsets,
                                     ember_qconv_dw_tpair* pairs) {
  const int64_t wp = ember_qconv_dwl_wp(a), ww = ember_qconv_dwl_ww(a);
  int64_t ky, kx, n = 0;
  if (ember_qconv_dwl_half(a)) {
    for (ky = 0; ky < a->kh; ++ky) {
      for (kx = 0; kx < a->kw; kx += 2, ++n) {
        pairs[n].offset = ky * a->dh * ww + kx / 2;
        pairs[n].lo = (int32_t)(ky * a->kw + kx);
        pairs[n].hi = kx + 1 < a->kw ? (int32_t)(ky * a->kw + kx + 1) : -1;
      }
    }
    return n;
  }
  for (ky = 0; ky < a->kh; ++ky) {
    for (kx = 0; kx < a->kw; ++kx) offsets[ky * a->kw + kx] = ky * a->dh * wp + kx * a->dw;
  }
  return ember_qconv_dw_pairs(offsets, a->kh * a->kw, pairs);
}

/* Row `in` (the block's input row y of channel 0; channel l hw bytes on) into `row` (wp
 * pixels of 16 channel bytes, u8 view): `left` zero-point pixels, the input's (16 pixels of
 * 16 channels transposed at a time), zero points to the right. */
static void ember_qconv_dwl_row(const ember_qconv_args* a, ember_qb16* row, const uint8_t* in,
                                int64_t y, int64_t nl, int64_t left, ember_qb16 bflip,
                                ember_qb16 zp) {
  const int64_t wp = ember_qconv_dwl_wp(a), hw = a->h * a->wd;
  const ember_qb16 bzero = {0};
  int64_t i, l, x;
  for (i = 0; i < left; ++i) row[i] = zp;
  for (i = a->pw + a->wd; i < wp; ++i) row[i] = zp;
  for (x = 0; x < a->wd && x + a->pw < wp; x += 16) {
    const int64_t n = a->wd - x < 16 ? a->wd - x : 16;
    /* 16 bytes from here stay in the channel's plane (a short row reads into the next, whose
     * pixels are then dropped): one vector load, not a copy of n bytes (a libc call per
     * channel and row took most of a 7x7 map's time) */
    const int whole = y * a->wd + x + 16 <= hw;
    ember_qb16 r[16];
    for (l = 0; l < 16; ++l) {
      if (l < nl && whole) {
        memcpy(&r[l], in + l * hw + x, 16); /* a constant size: one vector load */
      } else {
        r[l] = bzero;
        if (l < nl) memcpy(&r[l], in + l * hw + x, (size_t)n);
      }
    }
    ember_qconv_dwl_transpose(r);
    for (i = 0; i < n && x + i + a->pw < wp; ++i) row[x + i + a->pw] = r[i] ^ bflip;
  }
}

/* Plane row `words` from byte row `row`: word j = (row[step j], row[step j + 1]) as int16
 * halves of each lane, for j < n (row[step (n - 1) + 1] must be readable). */
static void ember_qconv_dwl_words(const ember_qb16* row, ember_qv16* words, int64_t n,
                                  int64_t step) {
  int64_t j;
  for (j = 0; j < n; ++j) {
    words[j] = EMBER_QCONV_DWL_WIDEN(row[step * j]) |
               (EMBER_QCONV_DWL_WIDEN(row[step * j + 1]) << 16);
  }
}

static void ember_qconv_dwl_item(const ember_qconv_args* a, int64_t item, ember_qv16* plane,
                                 ember_qb16* rows8, uint8_t* staged, ember_qv16* wv,
                                 const ember_qconv_dw_tpair* pairs, int64_t npairs) {
  const int64_t blocks = (a->c + 15) / 16, b = item / blocks, c0 = (item % blocks) * 16;
  const int64_t nl = a->c - c0 < 16 ? a->c - c0 : 16;
  const int64_t hp = ember_qconv_dwl_hp(a), wp = ember_qconv_dwl_wp(a), hw = a->h * a->wd;
  const int64_t ww = ember_qconv_dwl_ww(a);
  const int half = ember_qconv_dwl_half(a);
  const ember_qb16 bzero = {0}, bflip = bzero + a->flip, bzp = bzero + a->x_zp;
  const uint8_t* src = a->x + (b * a->c + c0) * hw;
  int32_t lane_bias[16];
  float lane_scale[16];
  ember_qv16 bias;
  ember_qvf scale;
  int64_t l, t, i, iy;
  for (l = 0; l < 16; ++l) { /* lanes past the channels: zero weights, never stored */
    const int64_t ch = c0 + (l < nl ? l : 0);
    const int8_t* wk = a->w + ch * (a->k4 * 16);
    const int32_t wz = a->has_w_zp ? a->w_zp[ch] : 0;
    for (t = 0; t < npairs; ++t) {
      ((int32_t*)(wv + t))[l] = l < nl ? (int32_t)ember_qconv_dw_wword(wk, wz, pairs + t) : 0;
    }
    lane_bias[l] = a->bias[ch];
    lane_scale[l] = a->scale[ch];
  }
  memcpy(&bias, lane_bias, sizeof bias);
  memcpy(&scale, lane_scale, sizeof scale);
  for (iy = 0; iy < hp; ++iy) { /* row iy as bytes, then row iy - 1's words (in L1) */
    ember_qb16* row = rows8 + (iy & 1) * (wp + 1);
    const int64_t y = iy - a->ph, left = a->pw < wp ? a->pw : wp;
    if (y < 0 || y >= a->h) {
      for (i = 0; i < wp; ++i) row[i] = bzp;
    } else {
      ember_qconv_dwl_row(a, row, src + y * a->wd, y, nl, left, bflip, bzp);
    }
    if (iy > 0) { /* flat pairs: its last value pairs with this row's first */
      ember_qb16* prev = rows8 + ((iy - 1) & 1) * (wp + 1);
      prev[wp] = half ? bzero : row[0];
      ember_qconv_dwl_words(prev, plane + (iy - 1) * ww, ww, half ? 2 : 1);
    }
  }
  rows8[((hp - 1) & 1) * (wp + 1) + wp] = bzero;
  ember_qconv_dwl_words(rows8 + ((hp - 1) & 1) * (wp + 1), plane + (hp - 1) * ww, ww,
                        half ? 2 : 1);
  if (npairs == 6) {
    ember_qconv_dwl_pixels(a, plane, staged, wv, pairs, 6, bias, scale);
  } else if (npairs <= EMBER_QCONV_DW_PAIRS_MAX) {
    ember_qconv_dwl_pixels(a, plane, staged, wv, pairs, npairs, bias, scale);
  } else {
    ember_qconv_dwl_pixels_wide(a, plane, staged, wv, pairs, npairs, bias, scale);
  }
  for (i = 0; i < a->p; i += 16) { /* 16 pixels of the 16 channels, transposed back */
    const int64_t n = a->p - i < 16 ? a->p - i : 16;
    ember_qb16 r[16];
    for (l = 0; l < 16; ++l) {
      r[l] = bzero;
      if (l < n) memcpy(&r[l], staged + (i + l) * 16, 16);
    }
    ember_qconv_dwl_transpose(r);
    for (l = 0; l < nl; ++l) {
      uint8_t* dst = a->y + (b * a->c + c0 + l) * a->p + i;
      if (n == 16) {
        memcpy(dst, &r[l], 16); /* a constant size: one vector store */
      } else {
        ember_qstore_part(dst, (ember_qvub)r[l], n); /* a masked store, not a libc call */
      }
    }
  }
}
#endif

/* Depthwise items [lo, hi) with this task's workspaces (the path by a->lanes and
 * ember_qconv_dw_same). Returns 0, or -1 when a workspace fails. */
static int ember_qconv_dw_range(const ember_qconv_args* a, int64_t lo, int64_t hi) {
  const uint64_t table_bytes = (uint64_t)ember_qconv_dw_cells(a) * 8;
  ember_qconv_dw_geom g;
  uint64_t plane_bytes, out_bytes;
  uint8_t* buf;
  int64_t item;
#if defined(EMBER_QCONV_DWQ)
  if (a->dwq) return ember_qconv_dwq_range(a, lo, hi);
#endif
#if defined(EMBER_Q_VNNI)
  if (a->lanes) {
    const int64_t taps = a->kh * a->kw;
    const uint64_t staged_bytes = (uint64_t)(a->p + 16) * 64, wv_bytes = (uint64_t)taps * 64;
    const uint64_t rows_bytes = ((uint64_t)(ember_qconv_dwl_wp(a) + 1) * 32 + 63) & ~(uint64_t)63;
    int64_t npairs;
    plane_bytes = (uint64_t)(ember_qconv_dwl_hp(a) * ember_qconv_dwl_ww(a)) * 64;
    buf = (uint8_t*)TVMBackendAllocWorkspace(
        1, 0, plane_bytes + rows_bytes + staged_bytes + wv_bytes + table_bytes, 1, 64);
    if (buf == NULL) return -1;
    g.offsets = (int64_t*)(buf + plane_bytes + rows_bytes + staged_bytes + wv_bytes);
    g.pairs = (ember_qconv_dw_tpair*)(g.offsets + taps);
    npairs = ember_qconv_dwl_pairs(a, g.offsets, g.pairs);
    for (item = lo; item < hi; ++item) {
      ember_qconv_dwl_item(a, item, (ember_qv16*)buf, (ember_qb16*)(buf + plane_bytes),
                           buf + plane_bytes + rows_bytes,
                           (ember_qv16*)(buf + plane_bytes + rows_bytes + staged_bytes),
                           g.pairs, npairs);
    }
    return TVMBackendFreeWorkspace(1, 0, buf) == 0 ? 0 : -1;
  }
#endif
  if (ember_qconv_dw_same(a)) {
    const uint64_t wide_bytes = ((uint64_t)ember_qconv_dws_values(a) * 4 + 63) & ~(uint64_t)63;
    const uint64_t corr_bytes = ((uint64_t)(a->oh * a->wd + EMBER_QL) * 4 + 63) & ~(uint64_t)63;
    buf = (uint8_t*)TVMBackendAllocWorkspace(1, 0, wide_bytes + corr_bytes + table_bytes, 1, 64);
    if (buf == NULL) return -1;
    ember_qconv_dws_geometry(a, &g, (int64_t*)(buf + wide_bytes + corr_bytes));
    for (item = lo; item < hi; ++item) {
      ember_qconv_dws_item(a, &g, item, (int32_t*)buf, (int32_t*)(buf + wide_bytes));
    }
    return TVMBackendFreeWorkspace(1, 0, buf) == 0 ? 0 : -1;
  }
  {
    /* the geometry first, in a workspace of its own: the plane's size depends on it */
    int64_t* table = (int64_t*)TVMBackendAllocWorkspace(1, 0, table_bytes, 1, 64);
    int ok;
    if (table == NULL) return -1;
    ember_qconv_dw_geometry(a, &g, table);
    out_bytes = (uint64_t)(g.positions + 2 * EMBER_QL + 63) & ~(uint64_t)63;
    plane_bytes = (uint64_t)(a->sh * a->sw * g.phase * 4 + 63) & ~(uint64_t)63;
    buf = (uint8_t*)TVMBackendAllocWorkspace(1, 0, plane_bytes + out_bytes, 1, 64);
    if (buf != NULL) {
      for (item = lo; item < hi; ++item) {
        ember_qconv_dw_item(a, &g, item, (int32_t*)buf, buf + plane_bytes);
      }
    }
    ok = buf != NULL && TVMBackendFreeWorkspace(1, 0, buf) == 0;
    return TVMBackendFreeWorkspace(1, 0, table) == 0 && ok ? 0 : -1;
  }
}

#endif /* EMBER_KERNELS_QCONV_DW_H_ */
