/*
 * ember kernels: the depthwise path of ember_qconv2d with AVX-512 VNNI and VBMI (vpdpbusd,
 * vpermt2b), included by qconv.h only (its args struct and requantizing store).
 *
 * Taps run four at a time as u8 x s8 quads, reading the NCHW input as it is: a vector of 16
 * outputs takes the input bytes its windows read in a register, gathers for every kernel row
 * ky and quad of taps (kx = 4q .. 4q + 3) the four bytes each output reads into one u32 word
 * per lane with a byte permute whose second source is the zero point (for taps that leave
 * the map), and adds their dot product with the quad of weights (vpdpbusd; a missing fourth
 * tap has weight 0): a 3x3 conv is 3 permutes and 3 products per 16 outputs at any stride. A
 * vector's outputs are consecutive in the NCHW output, so the permutes' indexes depend only
 * on the geometry (built once per task) and each vector is one store. By map size:
 * - small (h wd <= 64 bytes: 7x7): the channel in one register, vectors of whole rows (7x7:
 *   two, 14 lanes), indexes per vector;
 * - window (at most 16 outputs wide, an output row's kh input rows within 64 bytes: 14x14):
 *   one masked load per output row (the zero point for rows outside the map);
 * - rows: per vector and kernel row, 64 bytes of that input row (rows outside the map read
 *   a row of zero points; the tensor's last channel from a copy, as a window may read past
 *   it), 16 outputs of a row, or two rows of a narrow map in one two-source permute (the zero
 *   point blended in).
 * Products are exact in int32, the same as every other path.
 *
 * The channel-in-lanes path (qconv_dw.h) transposed every 16 channels of the input into
 * lanes and its results back, which took more time than the products: in mobilenet_v2 this
 * path runs the depthwise convs in 0.4-0.8x that path's time.
 * Taken when the weights need no zero point (w - w_zp fits int8, as quantizers write them),
 * kernels are at most 8 wide and a row vector's window fits 64 bytes (strides up to 3).
 */
#ifndef EMBER_KERNELS_QCONV_DWQ_H_
#define EMBER_KERNELS_QCONV_DWQ_H_

#if defined(EMBER_Q_VBMI)
#define EMBER_QCONV_DWQ 1
#define EMBER_QCONV_DWQ_QUADS 32 /* quads of weights held in locals: 7x7 kernels (14) */

#define EMBER_QCONV_DWQ_SMALL 64 /* index vectors the small maps' path keeps (4 KiB) */

/* The vectors of a call (every channel alike). */
typedef struct {
  int small;      /* the whole channel (h wd <= 64 bytes) in one register */
  int window;     /* at most 16 outputs wide, the kh input rows an output row reads within 64
                     bytes: one load a vector (indexes per kernel row) */
  int64_t rows;   /* output rows per vector: small and ow < 16, 16 / ow; else ow <= 8, 2
                     (the windows of two input rows in one two-source permute; unless
                     window); else 1 */
  int64_t cols;   /* vectors per output row (rows == 1): ceil(ow / 16) */
  int64_t nq;     /* quads per kernel row: ceil(kw / 4) */
  int64_t nvec;   /* vectors per channel */
  int64_t nidx;   /* index vectors: small, nvec kh nq (every vector's own); else cols nq */
} ember_qconv_dwq_geom;

/* Whether this path takes the call, and its geometry. Maps wider than 16 outputs read a
 * 64-byte window of an input row per vector: 15 sw + (kw - 1) dw < 64. */
static int ember_qconv_dwq_plan(const ember_qconv_args* a, ember_qconv_dwq_geom* g) {
  const int64_t cw = a->ow < 16 ? a->ow : 16;
  g->nq = (a->kw + 3) / 4;
  g->cols = (a->ow + 15) / 16;
  g->small = a->h * a->wd <= 64;
  g->rows = g->small && a->ow < 16 ? 16 / a->ow : 1;
  g->nvec = g->rows > 1 ? (a->oh + g->rows - 1) / g->rows : a->oh * g->cols;
  if (g->small && g->nvec * a->kh * g->nq > EMBER_QCONV_DWQ_SMALL) g->small = 0;
  if (!g->small) {
    g->rows = a->ow <= 8 ? 2 : 1;
    g->nvec = (a->oh + g->rows - 1) / g->rows * g->cols;
  }
  g->window = !g->small && a->ow <= 16 && ((a->kh - 1) * a->dh + 1) * a->wd <= 64;
  g->nidx = g->small ? g->nvec * a->kh * g->nq : g->window ? a->kh * g->nq : g->cols * g->nq;
  return (g->small || (cw - 1) * a->sw + (a->kw - 1) * a->dw < 64) && !a->has_w_zp &&
         a->cg == 1 && a->og == 1 && g->nq <= 2 && a->kh * g->nq <= EMBER_QCONV_DWQ_QUADS;
}

/* Output (oy, ox) of lane j of vector v (0: past the map). */
static int ember_qconv_dwq_lane(const ember_qconv_args* a, const ember_qconv_dwq_geom* g,
                                int64_t v, int64_t j, int64_t* oy, int64_t* ox) {
  if (g->rows > 1) { /* one column block */
    *oy = v * g->rows + j / a->ow;
    *ox = j % a->ow;
    return j < g->rows * a->ow && *oy < a->oh;
  }
  *oy = v / g->cols;
  *ox = (v % g->cols) * 16 + j;
  return *ox < a->ow;
}

/* The first column a rows-path window of column block k reads. */
static inline int64_t ember_qconv_dwq_x0(const ember_qconv_args* a, int64_t k) {
  return k * 16 * a->sw - a->pw > 0 ? k * 16 * a->sw - a->pw : 0;
}

/* The permute indexes: lane j's four bytes are where taps kx = 4q .. 4q + 3 of its output
 * read, or 64 (the zero-point vector) where that leaves the map, past kw or past the
 * vector's outputs. Small maps: into the channel, per vector, kernel row and quad; window:
 * into the bytes from the first input row an output row reads, per kernel row and quad;
 * into the window of an input row from ember_qconv_dwq_x0 (+ 64: the second row's), per
 * column block and quad, and with two rows a vector, `zmask` the bytes that leave the map
 * (the second source is a row then: the zero point is blended in). */
static void ember_qconv_dwq_indexes(const ember_qconv_args* a, const ember_qconv_dwq_geom* g,
                                    ember_qc64* idx, unsigned long long* zmask) {
  const int64_t kh = g->small || g->window ? a->kh : 1, blocks = g->small ? g->nvec : g->cols;
  int64_t v, ky, q, j, t, oy, ox;
  for (v = 0; v < blocks; ++v) {
    for (ky = 0; ky < kh; ++ky) {
      for (q = 0; q < g->nq; ++q) {
        const int64_t at = (v * kh + ky) * g->nq + q;
        char bytes[64];
        unsigned long long zm = 0;
        for (j = 0; j < 16; ++j) {
          const int live = ember_qconv_dwq_lane(a, g, v, j, &oy, &ox);
          const int64_t iy = oy * a->sh + ky * a->dh - a->ph;
          const int64_t second = !g->small && g->rows > 1 ? j / a->ow : 0;
          for (t = 0; t < 4; ++t) {
            const int64_t kx = 4 * q + t, ix = ox * a->sw + kx * a->dw - a->pw;
            const int in = live && kx < a->kw && ix >= 0 && ix < a->wd &&
                           (!g->small || (iy >= 0 && iy < a->h));
            const int64_t b = g->small    ? iy * a->wd + ix
                              : g->window ? ky * a->dh * a->wd + ix
                                          : ix - ember_qconv_dwq_x0(a, v % g->cols) + 64 * second;
            bytes[j * 4 + t] = (char)(in ? b : 64);
            zm |= (unsigned long long)!in << (j * 4 + t);
          }
        }
        memcpy(idx + at, bytes, 64);
        zmask[at] = zm;
      }
    }
  }
}

/* The requantized vector acc stored to dst (n outputs). */
static inline __attribute__((always_inline)) void ember_qconv_dwq_store(
    uint8_t* dst, ember_qvi acc, ember_qvf scale, const ember_qrq* rq, int64_t n) {
  const ember_qvub q = ember_qrq_bytes(acc, scale, rq);
  if (n >= 16) {
    *(ember_qvub_u*)dst = q;
  } else {
    ember_qstore_part(dst, q, n);
  }
}

/* Every vector of one channel of a small map (src: its h wd <= 64 bytes; out: its output
 * plane): the channel in one register, the indexes hold each vector's windows; taps (kh nq)
 * a constant where inlined (3x3: 3). */
static inline __attribute__((always_inline)) void ember_qconv_dwq_small(
    const ember_qconv_args* a, const ember_qconv_dwq_geom* g, const uint8_t* src,
    ember_qc64 zraw, const int64_t taps, const ember_qc64* idx, const ember_qvi* w,
    ember_qvi bias, ember_qvf scale, uint8_t* out) {
  /* in locals: the byte stores to out may alias *a and *g, which would be reloaded */
  const ember_qrq rq = ember_qrq_make(a->y_zp, a->y_lo, a->y_hi);
  const int64_t oh = a->oh, ow = a->ow, hw = a->h * a->wd, rows = g->rows, nvec = g->nvec;
  const int64_t cols = g->cols;
  const ember_qc64 flip = (ember_qc64){0} + (char)a->flip;
  const ember_qc64 chv = EMBER_QLOADB_MASK(src, zraw, hw >= 64 ? ~0ull : (1ull << hw) - 1);
  int64_t v, t;
  for (v = 0; v < nvec; ++v) {
    const int64_t oy0 = rows > 1 ? v * rows : v / cols, ox0 = rows > 1 ? 0 : v % cols * 16;
    ember_qvi acc = bias;
    for (t = 0; t < taps; ++t) {
      acc = EMBER_QDOT4(acc, (ember_qvi)(EMBER_QPERM2B(chv, idx[v * taps + t], zraw) ^ flip),
                        w[t]);
    }
    ember_qconv_dwq_store(out + oy0 * ow + ox0, acc, scale, &rq,
                          rows > 1 ? (oh - oy0 < rows ? oh - oy0 : rows) * ow : ow - ox0);
  }
}

/* Every output row of one channel in the window geometry (src: its input plane; out: its
 * output plane): the bytes of the kh input rows it reads in one masked load (the zero point
 * for rows outside the map); kh, nq and hasflip constants where inlined. */
static inline __attribute__((always_inline)) void ember_qconv_dwq_window(
    const ember_qconv_args* a, const uint8_t* src, ember_qc64 zraw, const int64_t kh,
    const int64_t nq, const int hasflip, const ember_qc64* idx, const ember_qvi* w,
    ember_qvi bias, ember_qvf scale, uint8_t* out) {
  /* in locals: the byte stores to out may alias *a, which would be reloaded */
  const ember_qrq rq = ember_qrq_make(a->y_zp, a->y_lo, a->y_hi);
  const int64_t oh = a->oh, ow = a->ow, h = a->h, wd = a->wd, sh = a->sh, ph = a->ph;
  const ember_qc64 flip = (ember_qc64){0} + (char)a->flip;
  int64_t oy, t;
  for (oy = 0; oy < oh; ++oy) {
    const int64_t top = oy * sh - ph, lo = top < 0 ? -top * wd : 0, hi = (h - top) * wd;
    const unsigned long long below = hi >= 64 ? ~0ull : hi <= 0 ? 0 : (1ull << hi) - 1;
    const unsigned long long m = lo >= 64 ? 0 : below & ~((1ull << lo) - 1);
    const ember_qc64 win = EMBER_QLOADB_MASK(src + top * wd, zraw, m);
    ember_qvi acc = bias;
    for (t = 0; t < kh * nq; ++t) {
      const ember_qc64 quads = EMBER_QPERM2B(win, idx[t], zraw);
      acc = EMBER_QDOT4(acc, (ember_qvi)(hasflip ? quads ^ flip : quads), w[t]);
    }
    ember_qconv_dwq_store(out + oy * ow, acc, scale, &rq, ow);
  }
}

/* Every vector of one channel of a larger map (src: its input plane, readable 64 bytes past
 * its end; zrow: wd + 64 bytes of the zero point as the input stores it, read for the rows
 * above and below the map; out: its output plane); kh, nq, rows and whether inputs are s8
 * (hasflip) constants where inlined (3x3 over u8: 3 quads in registers, no flips). */
static inline __attribute__((always_inline)) void ember_qconv_dwq_rows(
    const ember_qconv_args* a, const ember_qconv_dwq_geom* g, const uint8_t* src,
    const uint8_t* zrow, const int64_t kh, const int64_t nq, const int64_t rows,
    const int hasflip, const ember_qc64* idx, const unsigned long long* zmask,
    const ember_qvi* w, ember_qvi bias, ember_qvf scale, uint8_t* out) {
  /* in locals: the byte stores to out may alias *a and *g, which would be reloaded */
  const ember_qrq rq = ember_qrq_make(a->y_zp, a->y_lo, a->y_hi);
  const int64_t oh = a->oh, ow = a->ow, h = a->h, wd = a->wd, sh = a->sh;
  const int64_t dh = a->dh, ph = a->ph, cols = g->cols;
  const ember_qc64 flip = (ember_qc64){0} + (char)a->flip, zraw = (ember_qc64){0} + (char)zrow[0];
  int64_t oy, ky, t, v;
  for (oy = 0; oy < oh; oy += rows) {
    const uint8_t *row0[EMBER_QCONV_DWQ_QUADS], *row1[EMBER_QCONV_DWQ_QUADS];
    for (ky = 0; ky < kh; ++ky) {
      const int64_t iy = oy * sh + ky * dh - ph;
      row0[ky] = iy >= 0 && iy < h ? src + iy * wd : zrow;
      row1[ky] = iy + sh >= 0 && iy + sh < h ? src + (iy + sh) * wd : zrow;
    }
    for (v = 0; rows == 1 && v + 4 <= cols; v += 4) { /* four vectors of a row: one store */
      ember_qvi acc4[4];
      ember_qvf sc4[4];
      ember_qc64 b;
      int j;
      for (j = 0; j < 4; ++j) {
        const int64_t x0 = ember_qconv_dwq_x0(a, v + j);
        acc4[j] = bias;
        sc4[j] = scale;
        for (ky = 0; ky < kh; ++ky) {
          const ember_qc64 win = *(const ember_qc64_u*)(row0[ky] + x0);
          for (t = 0; t < nq; ++t) {
            const ember_qc64 quads = EMBER_QPERM2B(win, idx[(v + j) * nq + t], zraw);
            acc4[j] = EMBER_QDOT4(acc4[j], (ember_qvi)(hasflip ? quads ^ flip : quads),
                                  w[ky * nq + t]);
          }
        }
      }
      b = ember_qrq_pack4(acc4, sc4, &rq, 4);
      if (ow - v * 16 >= 64) {
        *(ember_qc64_u*)(out + oy * ow + v * 16) = b;
      } else {
        ember_qstore64_part(out + oy * ow + v * 16, b, ow - v * 16);
      }
    }
    for (; v < cols; ++v) {
      const int64_t x0 = ember_qconv_dwq_x0(a, v);
      ember_qvi acc = bias;
      for (ky = 0; ky < kh; ++ky) {
        const ember_qc64 win = *(const ember_qc64_u*)(row0[ky] + x0);
        for (t = 0; t < nq; ++t) {
          ember_qc64 quads;
          if (rows == 1) {
            quads = EMBER_QPERM2B(win, idx[v * nq + t], zraw);
          } else { /* one column block; the zero point where the windows leave the map */
            quads = EMBER_QPERM2B(win, idx[t], *(const ember_qc64_u*)(row1[ky] + x0));
            quads = EMBER_QBLENDB(zmask[t], quads, zraw);
          }
          acc = EMBER_QDOT4(acc, (ember_qvi)(hasflip ? quads ^ flip : quads), w[ky * nq + t]);
        }
      }
      ember_qconv_dwq_store(out + oy * ow + v * 16, acc, scale, &rq,
                            rows == 1 ? ow - v * 16 : (oh - oy < 2 ? 1 : 2) * ow);
    }
  }
}

/* Items [lo, hi) (image x channel): each channel's weights as quads, then its vectors. The
 * tensor's last channel is read from a copy (its windows read up to 64 bytes past a row). */
static int ember_qconv_dwq_range(const ember_qconv_args* a, int64_t lo, int64_t hi) {
  const int64_t hw = a->h * a->wd;
  ember_qconv_dwq_geom g;
  uint64_t idx_bytes, zm_bytes, zrow_bytes;
  uint8_t *buf, *zrow, *last;
  const ember_qc64* idx;
  const unsigned long long* zmask;
  ember_qc64 zraw;
  int64_t item, ky, q, t;
  ember_qconv_dwq_plan(a, &g);
  idx_bytes = (uint64_t)g.nidx * 64;
  zm_bytes = ((uint64_t)g.nidx * 8 + 63) & ~(uint64_t)63;
  zrow_bytes = ((uint64_t)a->wd + 64 + 63) & ~(uint64_t)63;
  buf = (uint8_t*)TVMBackendAllocWorkspace(
      1, 0, idx_bytes + zm_bytes + zrow_bytes + (uint64_t)hw + 64, 1, 64);
  if (buf == NULL) return -1;
  zrow = buf + idx_bytes + zm_bytes;
  last = zrow + zrow_bytes;
  memset(zrow, a->x_zp ^ a->flip, zrow_bytes);
  zraw = (ember_qc64){0} + (char)zrow[0];
  ember_qconv_dwq_indexes(a, &g, (ember_qc64*)buf, (unsigned long long*)(buf + idx_bytes));
  idx = (const ember_qc64*)buf;
  zmask = (const unsigned long long*)(buf + idx_bytes);
  for (item = lo; item < hi; ++item) {
    const int64_t ch = item % a->c;
    const uint8_t* src = a->x + item * hw;
    const int8_t* wk = a->w + ch * (a->k4 * 16); /* the group's block: tap t at wk[t * 16] */
    const ember_qvi bias = ember_qset1(a->bias[ch]);
    const ember_qvf scale = (ember_qvf){0} + a->scale[ch];
    uint8_t* out = a->y + item * a->p;
    ember_qvi w[EMBER_QCONV_DWQ_QUADS];
    for (ky = 0; ky < a->kh; ++ky) {
      for (q = 0; q < g.nq; ++q) {
        uint32_t word = 0;
        for (t = 0; t < 4 && 4 * q + t < a->kw; ++t) {
          word |= (uint32_t)(uint8_t)wk[(ky * a->kw + 4 * q + t) * 16] << (8 * t);
        }
        w[ky * g.nq + q] = ember_qset1((int32_t)word);
      }
    }
    if (g.small) {
      if (a->kh * g.nq == 3) {
        ember_qconv_dwq_small(a, &g, src, zraw, 3, idx, w, bias, scale, out);
      } else {
        ember_qconv_dwq_small(a, &g, src, zraw, a->kh * g.nq, idx, w, bias, scale, out);
      }
      continue;
    }
    if (g.window) {
      if (a->kh * g.nq == 3 && !a->flip) {
        ember_qconv_dwq_window(a, src, zraw, 3, 1, 0, idx, w, bias, scale, out);
      } else {
        ember_qconv_dwq_window(a, src, zraw, a->kh, g.nq, 1, idx, w, bias, scale, out);
      }
      continue;
    }
    if (item == a->n * a->c - 1) {
      memcpy(last, src, (size_t)hw);
      src = last;
    }
    if (a->kh == 3 && g.nq == 1 && !a->flip && g.rows == 1) {
      ember_qconv_dwq_rows(a, &g, src, zrow, 3, 1, 1, 0, idx, zmask, w, bias, scale, out);
    } else if (a->kh == 3 && g.nq == 1 && !a->flip) {
      ember_qconv_dwq_rows(a, &g, src, zrow, 3, 1, 2, 0, idx, zmask, w, bias, scale, out);
    } else {
      ember_qconv_dwq_rows(a, &g, src, zrow, a->kh, g.nq, g.rows, 1, idx, zmask, w, bias, scale,
                           out);
    }
  }
  return TVMBackendFreeWorkspace(1, 0, buf) == 0 ? 0 : -1;
}
#endif

#endif /* EMBER_KERNELS_QCONV_DWQ_H_ */
