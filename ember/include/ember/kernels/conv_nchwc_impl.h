/*!
 * \file ember/kernels/conv_nchwc_impl.h
 * \brief The conv kernels for one lane count: included by conv_nchwc.h with EMBER_L set to
 *        4, 8 and 16 (no include guard on purpose). Names end in _x<L>.
 */
#ifndef EMBER_L
#error "conv_nchwc_impl.h is included by ember/kernels/conv_nchwc.h only"
#endif

#ifndef EMBER_CAT
#define EMBER_CAT_(a, b) a##b
#define EMBER_CAT(a, b) EMBER_CAT_(a, b)
#define EMBER_CAT4_(a, b, c, d) a##_x##b##_##c##_##d
#define EMBER_CAT4(a, b, c, d) EMBER_CAT4_(a, b, c, d)
#endif

#define EMBER_FN(name) EMBER_CAT(name, EMBER_CAT(_x, EMBER_L))

#if EMBER_KV
#define EV EMBER_VT(EMBER_L)

#include "ember/kernels/conv_epilogue_impl.h" /* ember_conv_act, _act_exp, _store_with */

/* The late activation over the n floats at p->out + at (conv_epilogue_impl.h). */
EMBER_KFN void EMBER_FN(ember_conv_act_pass)(const ember_conv_p* p, size_t at, size_t n) {
  EMBER_FN(ember_conv_late_pass)(p->out + at, p->res + at, n, p->act, p->flags, p->lo, p->hi);
}

static inline void EMBER_FN(ember_conv_store)(const ember_conv_p* p, EV* v, float* out,
                                              const float* res) {
  EMBER_FN(ember_conv_store_with)(p->act, p->flags, p->lo, p->hi, v, out, res);
}

/* The general epilogue of a RW x RB register tile (a residual with a hardswish, hardsigmoid or
 * leaky relu, partial sums added): each vector of acc (acc[j][r] at acc + j * rb + r) plus the
 * bias or the output's partial sum, through ember_conv_store_with. Out of line, as
 * conv_nchw_input_impl.h's: inlined, its switch over the activations per vector was copied
 * RW x RB times into every tile. */
EMBER_KFN void EMBER_FN(ember_conv_store_general)(const ember_conv_p* p, const EV* acc,
                                                  int32_t rw, int32_t rb, const float* bias,
                                                  size_t o, size_t oob) {
  const int32_t act = p->act, flags = p->flags, accum = p->accum;
  const float lo = p->lo, hi = p->hi;
  float* const out = p->out + o;
  const float* const res = p->res + o;
  int32_t j, r;
  for (r = 0; r < rb; ++r) {
    const EV bv = EMBER_VLOAD(EMBER_L, bias + r * EMBER_L);
    for (j = 0; j < rw; ++j) {
      const size_t at = r * oob + (size_t)j * EMBER_L;
      EV v = acc[j * rb + r] + (accum ? EMBER_VLOAD(EMBER_L, out + at) : bv);
      EMBER_FN(ember_conv_store_with)(act, flags, lo, hi, &v, out + at, res + at);
    }
  }
}

/* The stores of a RW x RB register tile (bias added) at output offset o, blocks oob floats
 * apart: the common epilogues (p->epi, ember_conv_epi_case) chosen once per tile, each a
 * straight-line run of stores (per vector, the epilogue's branches cost as much as the FMAs of
 * a 1x1 tile with 16 input channels: 16->96 at 112x112, 60 -> 73 GFLOP/s), the rest out of
 * line. The epilogue's fields are read into locals once: read through p, they were reloaded
 * after every store (a float store may alias *p), which cost as much as the FMAs of a 1x1
 * conv with 16 input channels (16->64 at 112x112: 1.6x onnxruntime's time). */
#define EMBER_CONV_STORE_TILE(RW, RB, STREAMS)                                                 \
  {                                                                                            \
    float* const out_ = p->out + o;                                                            \
    const float* const res_ = p->res + o;                                                      \
    const EV vlo_ = EMBER_VSPLAT(EMBER_L, (p->epi >> 1 & 3) == 2 ? p->lo : 0.0f);            \
    const EV vhi_ = EMBER_VSPLAT(EMBER_L, p->hi);                                              \
    switch (p->epi) {                                                                          \
      case 0: EMBER_CONV_STORE_RUN(RW, RB, 0, 0, 0, 0, 0) break;                               \
      case 1: EMBER_CONV_STORE_RUN(RW, RB, 1, 0, 0, 0, 0) break;                               \
      case 2: EMBER_CONV_STORE_RUN(RW, RB, 0, 1, 0, 0, 0) break;                               \
      case 3: EMBER_CONV_STORE_RUN(RW, RB, 1, 1, 0, 0, 0) break;                               \
      case 4: EMBER_CONV_STORE_RUN(RW, RB, 0, 2, 0, 0, 0) break;                               \
      case 5: EMBER_CONV_STORE_RUN(RW, RB, 1, 2, 0, 0, 0) break;                               \
      case 10: EMBER_CONV_STORE_RUN(RW, RB, 0, 1, 1, 0, 0) break;                              \
      case 12: EMBER_CONV_STORE_RUN(RW, RB, 0, 2, 1, 0, 0) break; /* clip, then the add */     \
      case 16: EMBER_CONV_STORE_RUN(RW, RB, 0, 0, 0, 1, 0) break; /* a pass's partial sums */  \
      case 18: EMBER_CONV_STORE_RUN(RW, RB, 0, 1, 0, 1, 0) break;                              \
      EMBER_CAT(EMBER_CONV_STREAM_CASE_, STREAMS)(RW, RB)                                      \
      default: {                                                                               \
        EV spill_[RW * RB]; /* a copy: acc, its address taken, would leave the registers */  \
        EMBER_KUNROLL for (j = 0; j < RW; ++j)                                                  \
          EMBER_KUNROLL for (r = 0; r < RB; ++r) spill_[j * RB + r] = acc[j][r];                \
        EMBER_FN(ember_conv_store_general)(p, spill_, RW, RB, bias, o, oob);                   \
        break;                                                                                 \
      }                                                                                        \
    }                                                                                          \
  }

/* EMBER_CONV_STORE_TILE's case of streamed stores of a residual add (ember_conv_epi_case's
 * 33) where STREAMS is 1 (the 1x1 tiles, whose convs wait on memory), the residual of a
 * later tile prefetched first; elsewhere the general store streams them. */
#define EMBER_CONV_STREAM_CASE_1(RW, RB)                                                       \
  case 33:                                                                                     \
    EMBER_FN(ember_conv_res_prefetch)(p, o, RW, RB);                                           \
    EMBER_CONV_STORE_RUN(RW, RB, 1, 0, 0, 0, 1) break;
#define EMBER_CONV_STREAM_CASE_0(RW, RB)

/* The stores of EMBER_CONV_STORE_TILE for one epilogue, its choices constants: the residual
 * added first (FIRST) or last (LAST), CLAMP 1 (relu: max with 0) or 2 (clip: max lo, min
 * hi) or 0, ACC 1 to add the partial sums in the output (a later pass over input blocks)
 * instead of the bias, STREAM 1 for non-temporal stores (EMBER_EPI_STREAM). */
#define EMBER_CONV_STORE_RUN(RW, RB, FIRST, CLAMP, LAST, ACC, STREAM)                          \
  EMBER_KUNROLL for (r = 0; r < RB; ++r) {                                                     \
    EV bv = ACC ? EMBER_VZERO(EMBER_L) : EMBER_VLOAD(EMBER_L, bias + r * L);                   \
    EMBER_KUNROLL for (j = 0; j < RW; ++j) {                                                   \
      const size_t at = r * oob + (size_t)j * L;                                               \
      EV v = acc[j][r] + (ACC ? EMBER_VLOAD(EMBER_L, out_ + at) : bv);                         \
      if (FIRST) v += EMBER_VLOAD(EMBER_L, res_ + at);                                         \
      if (CLAMP) v = EMBER_VMAX(EMBER_L, v, vlo_);                                             \
      if (CLAMP == 2) v = EMBER_VMIN(EMBER_L, v, vhi_);                                        \
      if (LAST) v += EMBER_VLOAD(EMBER_L, res_ + at);                                          \
      if (STREAM) {                                                                            \
        EMBER_VSTREAM(EMBER_L, out_ + at, v);                                                  \
      } else {                                                                                 \
        EMBER_VSTORE(EMBER_L, out_ + at, v);                                                   \
      }                                                                                        \
    }                                                                                          \
  }

/* acc[j][r] += input (column j, element c) * weight vector r at wq. */
#define EMBER_TILE_STEP(RW, RB, wq, c)                                                         \
  {                                                                                            \
    EV wv[RB];                                                                                 \
    EMBER_KUNROLL for (r = 0; r < RB; ++r) {                                                   \
      EV w_ = EMBER_VLOAD_REG(EMBER_L, (wq) + r * wob);                                        \
      if (RW <= 4) EMBER_VPIN(EMBER_L, w_); /* the wider tiles keep it without */              \
      wv[r] = w_;                                                                              \
    }                                                                                          \
    EMBER_KUNROLL for (j = 0; j < RW; ++j) {                                                   \
      EV bx = EMBER_VBCAST(EMBER_L, col[j] + (c));                                             \
      EMBER_KUNROLL for (r = 0; r < RB; ++r)                                                   \
        acc[j][r] = EMBER_VFMA(EMBER_L, acc[j][r], bx, wv[r]);                                 \
    }                                                                                          \
  }

/* The same with the RW columns at stride S (1 or 2) in a channel-blocked input (CB = L):
 * column j of tap c at src + j * S * L, one base pointer for the whole tile (no per-column
 * pointers to keep in registers). */
#define EMBER_TILE_STEP_UNIT(RW, RB, wq, src, S) \
  EMBER_TILE_STEP_COLS(RW, RB, wq, src, (S) * EMBER_L)
/* ... with the RW columns STEP floats apart. */
#define EMBER_TILE_STEP_COLS(RW, RB, wq, src, STEP)                                            \
  {                                                                                            \
    EV wv[RB];                                                                                 \
    EMBER_KUNROLL for (r = 0; r < RB; ++r) {                                                   \
      EV w_ = EMBER_VLOAD_REG(EMBER_L, (wq) + r * wob);                                        \
      if (RW <= 4) EMBER_VPIN(EMBER_L, w_); /* the wider tiles keep it without */              \
      wv[r] = w_;                                                                              \
    }                                                                                          \
    EMBER_KUNROLL for (j = 0; j < RW; ++j) {                                                   \
      EV bx = EMBER_VBCAST(EMBER_L, (src) + j * (STEP));                                       \
      EMBER_KUNROLL for (r = 0; r < RB; ++r)                                                   \
        acc[j][r] = EMBER_VFMA(EMBER_L, acc[j][r], bx, wv[r]);                                 \
    }                                                                                          \
  }

/* A 1x1 tile's loop over the input blocks of its group, columns S * L floats apart. The tile
 * of a 1x1 map (a GEMV: an SE block's convs) sums its channel steps into EMBER_GEMV_CHAINS
 * partial accumulators per block, added at the end: with one, each FMA waited for the one
 * before (960->240 on a 1x1 map: 26 us with two chains, 40 us with one). Any other tile, one
 * column wide too, sums each output's products in one chain in channel order, as every wider
 * tile does: a split over tasks may move a column into or out of a one-column tile (a strip's
 * end), and each thread count must give the same bits. */
#define EMBER_GEMV_CHAINS 4
#define EMBER_TILE_1X1_BLOCKS(RW, RB, base, S) EMBER_TILE_1X1_CB(RW, RB, base, S, EMBER_L)
/* ... over input blocks of CB channels (EMBER_L, or half of it: EMBER_HALF_CB_1X1). */
#define EMBER_TILE_1X1_CB(RW, RB, base, S, CB)                                                 \
  if (RW == 1 && p->oh * p->ow == 1) {                                                         \
    EV part[EMBER_GEMV_CHAINS][RB];                                                            \
    int32_t q;                                                                                 \
    EMBER_KUNROLL for (q = 0; q < EMBER_GEMV_CHAINS; ++q)                                      \
      EMBER_KUNROLL for (r = 0; r < RB; ++r) part[q][r] = EMBER_VZERO(EMBER_L);                \
    for (icb = 0; icb < p->icb_g; ++icb) {                                                     \
      const float* src = (base) + icb * cs;                                                    \
      const float* wk = w + (ptrdiff_t)icb * (CB) * L;                                         \
      EMBER_KUNROLL for (c = 0; c < (CB); ++c) {                                               \
        EV bx = EMBER_VBCAST(EMBER_L, src + c);                                                \
        EMBER_KUNROLL for (r = 0; r < RB; ++r) {                                               \
          EV w_ = EMBER_VLOAD(EMBER_L, wk + c * L + r * wob);                                  \
          part[c % EMBER_GEMV_CHAINS][r] =                                                     \
              EMBER_VFMA(EMBER_L, part[c % EMBER_GEMV_CHAINS][r], bx, w_);                     \
        }                                                                                      \
      }                                                                                        \
    }                                                                                          \
    EMBER_KUNROLL for (r = 0; r < RB; ++r)                                                     \
      acc[0][r] = (part[0][r] + part[1][r]) + (part[2][r] + part[3][r]);                       \
  } else {                                                                                     \
    for (icb = 0; icb < p->icb_g; ++icb) {                                                     \
      const float* src = (base) + icb * cs;                                                    \
      const float* wk = w + (ptrdiff_t)icb * (CB) * L;                                         \
      EMBER_KUNROLL for (c = 0; c < (CB); ++c)                                                 \
        EMBER_TILE_STEP_COLS(RW, RB, wk + c * L, src + c, (S) * (CB))                          \
    }                                                                                          \
  }

/* Whether the 16-lane tiles take 1x1 convs over 8-channel input blocks on the 1x1 path too:
 * AVX-512 keeps 24, 40, 72 or 184 channels in NCHW8c, and the 1x1 convs that read them
 * (MobileNetV2's and EfficientNet's expansions, 24->144 and 40->240) went through a pointer
 * per column and one tile per call (EfficientDet's 24->144 at 128x128 and 40->240 at 64x64:
 * 1.07x and 1.10x onnxruntime's time, with the layout transforms around them). */
#define EMBER_HALF_CB_1X1 (EMBER_L == 16)

/* Prefetch into L1 the residual of the 1x1 tile EMBER_RES_AHEAD tiles after the one at
 * output offset o (rw columns x rb blocks; past the row's end it reads nothing the kernel
 * needs, and a prefetch never faults), for the streamed stores of an add (epilogue case 33).
 * A 1x1 tile has few FMAs (384 with 16 input channels) to hide the residual's loads behind,
 * and its stores come right after them: the FPN's 16->256 1x1 + add at 160x160 streamed ran
 * in 2.2 ms without, 1.1 ms with (the residual is then the only stream in from memory).
 * Not for a residual in the caches: 32->64 at 56x56 + add 7% slower with it. */
#ifndef EMBER_RES_AHEAD
#define EMBER_RES_AHEAD 4
#endif
static inline void EMBER_FN(ember_conv_res_prefetch)(const ember_conv_p* p, size_t o,
                                                    int32_t rw, int32_t rb) {
  const size_t oob = (size_t)p->oh * p->ow * EMBER_L, ahead = (size_t)EMBER_RES_AHEAD * rw;
  const float* res = p->res + o + ahead * EMBER_L;
  int32_t r, j;
  for (r = 0; r < rb; ++r)
    for (j = 0; j < rw * EMBER_L; j += 16) EMBER_PREFETCH_L1(res + r * oob + j);
}

/* Whether an interior tile of output row [ky0, ky1) takes the 1x1 path (several tiles per
 * call, see EMBER_CONV_TILE): 1x1 at stride 1 or 2, a channel-blocked input, a row inside
 * the image. */
static inline int EMBER_FN(ember_conv_tile_runs)(const ember_conv_p* p, int32_t ky0,
                                                 int32_t ky1) {
  return p->kh == 1 && p->kw == 1 && ky1 > ky0 &&
         ((p->sw <= 2 && p->cb == EMBER_L) ||
          (EMBER_HALF_CB_1X1 && p->sw == 1 && p->cb == EMBER_L / 2));
}

/* Register tiles of RW output columns (the first at input column ix0_first, output offset
 * o_first) x RB output blocks, over all input channels of the group and kernel rows
 * [ky0, ky1). `row` is the input offset of kernel row 0 at column 0 (possibly outside the
 * image: only valid rows are read); `interior`: every tap of every column is inside the
 * image. `count` tiles side by side where the 1x1 path runs (ember_conv_tile_runs), else
 * one: a call's setup (the sizes and strides read from p, the path chosen) cost as much as
 * the FMAs of a 1x1 tile with 16 input channels (16->96 at 112x112 ran at 45% of the FMA
 * peak); the other paths keep one tile per call (with the loop around them, GCC's
 * allocation of their row loops cost 3x3 convs 1-2%). */
#define EMBER_CONV_TILE_FN(LINK, RW, RB)                                                       \
  LINK void EMBER_CAT4(ember_conv_tile, EMBER_L, RW, RB)(                                      \
      const ember_conv_p* p, ptrdiff_t row, int32_t ix0_first, const float* w,                 \
      const float* bias, size_t o_first, int32_t ky0, int32_t ky1, int32_t interior,           \
      int32_t count)
#define EMBER_CONV_TILE(RW, RB) EMBER_CONV_TILE_DEF(static inline, RW, RB)
#define EMBER_CONV_TILE_SHARED(RW, RB) EMBER_CONV_TILE_DEF(EMBER_KPART_FN, RW, RB)
#define EMBER_CONV_TILE_DECL(RW, RB) EMBER_CONV_TILE_FN(EMBER_KPART_FN, RW, RB);
#define EMBER_CONV_TILE_DEF(LINK, RW, RB)                                                      \
  EMBER_CONV_TILE_FN(LINK, RW, RB) {                                                           \
    EV acc[RW][RB];                                                                            \
    const float* col[RW];                                                                      \
    const int32_t cb = p->cb, L = EMBER_L;                                                     \
    const ptrdiff_t ys = (ptrdiff_t)p->w * cb, cs = (ptrdiff_t)p->h * ys;                      \
    const ptrdiff_t dys = (ptrdiff_t)p->dh * ys;                                               \
    const ptrdiff_t wob = (ptrdiff_t)p->wicb * p->kh * p->kw * cb * L;                         \
    const size_t oob = (size_t)p->oh * p->ow * L;                                              \
    int32_t j, r, icb, ky, kx, c, tile;                                                        \
    if (interior && EMBER_FN(ember_conv_tile_runs)(p, ky0, ky1)) {                             \
      /* 1x1 at stride 1 or 2: one tap per block, its L channel steps unrolled in one loop    \
       * over the blocks (a loop of L steps per block spent a third of the time on overhead); \
       * the stride a constant, so that each column is a fixed offset from one pointer */      \
      for (tile = 0; tile < count; ++tile) {                                                   \
        const size_t o = o_first + (size_t)tile * RW * L;                                      \
        const float* base = p->in + (row + (ptrdiff_t)(ix0_first + tile * RW * p->sw) * cb);  \
        EMBER_KUNROLL for (j = 0; j < RW; ++j)                                                  \
          EMBER_KUNROLL for (r = 0; r < RB; ++r) acc[j][r] = EMBER_VZERO(EMBER_L);              \
        if (EMBER_HALF_CB_1X1 && cb != L) {                                                    \
          EMBER_TILE_1X1_CB(RW, RB, base, 1, EMBER_L / 2)                                      \
        } else if (p->sw == 1) {                                                               \
          EMBER_TILE_1X1_BLOCKS(RW, RB, base, 1)                                               \
        } else {                                                                               \
          EMBER_TILE_1X1_BLOCKS(RW, RB, base, 2)                                               \
        }                                                                                      \
        EMBER_CONV_STORE_TILE(RW, RB, 1)                                                       \
      }                                                                                        \
      return;                                                                                  \
    }                                                                                          \
    {                                                                                          \
    const int32_t ix0 = ix0_first;                                                             \
    const size_t o = o_first;                                                                  \
    (void)count;                                                                               \
    EMBER_KUNROLL for (j = 0; j < RW; ++j)                                                      \
      EMBER_KUNROLL for (r = 0; r < RB; ++r) acc[j][r] = EMBER_VZERO(EMBER_L);                  \
    for (icb = 0; icb < p->icb_g; ++icb) {                                                     \
      /* the lanes read: all but the last block's zero-weight ones (ember_conv_live_lanes) */ \
      const int32_t live = icb + 1 < p->icb_g ? cb : p->icl;                                   \
      for (ky = ky0; ky < ky1; ++ky) {                                                         \
        const ptrdiff_t rowk = row + icb * cs + ky * dys;                                      \
        const float* wk = w + ((ptrdiff_t)icb * p->kh + ky) * p->kw * cb * L;                  \
        if (interior && p->dw == 1 && p->sw == 1 && cb == L) {                                 \
          /* Unit stride: the taps (kx, c) of a row are contiguous, columns L apart. */        \
          const int32_t taps = p->kw * cb;                                                     \
          const float* base = p->in + (rowk + (ptrdiff_t)ix0 * cb);                            \
          for (kx = 0; kx < taps; kx += cb)                                                    \
            EMBER_TAP_UNROLL for (c = kx; c < kx + live; ++c)                                  \
              EMBER_TILE_STEP_UNIT(RW, RB, wk + c * L, base + c, 1)                             \
        } else if (interior && p->dw == 1 && p->sw == 2 && cb == L) {                          \
          /* Stride 2 (wav2vec2's conv1d stack, downsampling 3x3s): the same, columns 2 L      \
           * apart (with a pointer per column, wav2vec2's 1x3/2 512->512 ran at 80 GFLOP/s,     \
           * unit stride at 85; now 85 too) */                                                 \
          const int32_t taps = p->kw * cb;                                                     \
          const float* base = p->in + (rowk + (ptrdiff_t)ix0 * cb);                            \
          for (kx = 0; kx < taps; kx += cb)                                                    \
            EMBER_TAP_UNROLL for (c = kx; c < kx + live; ++c)                                  \
              EMBER_TILE_STEP_UNIT(RW, RB, wk + c * L, base + c, 2)                             \
        } else if (interior && p->dw == 1) {                                                   \
          /* The taps (kx, c) of a row are contiguous in input and weight: one loop. */        \
          const int32_t taps = p->kw * cb;                                                     \
          EMBER_TILE_COLUMNS(RW, col, rowk, ix0, p->sw, cb, 1)                                 \
          for (kx = 0; kx < taps; kx += cb)                                                    \
            for (c = kx; c < kx + live; ++c) EMBER_TILE_STEP(RW, RB, wk + c * L, c)             \
        } else {                                                                               \
          /* the taps that reach the image for one column of the tile or more (the rest add   \
           * zeros): wav2vec2's grouped conv1d of 128 taps over a 49-wide row padded by 64    \
           * reaches it with 60 of them for a 12-wide tile */                                  \
          const int32_t kx1 = ember_end_tap(ix0, p->dw, p->w, p->kw, 0);                       \
          kx = ember_first_tap(ix0 + (RW - 1) * p->sw, p->dw, p->kw);                          \
          for (; kx < kx1; ++kx) {                                                             \
            const float* wp = wk + (ptrdiff_t)kx * cb * L;                                     \
            EMBER_TILE_COLUMNS(RW, col, rowk, ix0 + kx * p->dw, p->sw, cb, interior)           \
            for (c = 0; c < live; ++c) EMBER_TILE_STEP(RW, RB, wp + c * L, c)                  \
          }                                                                                    \
        }                                                                                      \
      }                                                                                        \
    }                                                                                          \
    EMBER_CONV_STORE_TILE(RW, RB, 0)                                                           \
    }                                                                                          \
  }

/* The register tiles: widths 12/8/4/2/1 of one output block, 6/5/4/3/2/1 of two (12/8 too
 * with AVX-512's 32 registers), 6/4/3/2/1 of four. Fewer tiles compile faster; the cost model in
 * ember/topi/nn/conv2d_nchwc.py asks for these widths, and any other width still works
 * (the widest instantiated one below it is used, then the rest of the row). The narrow ones
 * go with the code that calls them (part 0 of the object in parts, linkage.h); the wide ones,
 * most of the code, in parts 1 and 2 (about a third of the object each), declared here for
 * the other parts. */
EMBER_CONV_TILE(1, 1)
EMBER_CONV_TILE(2, 1)
EMBER_CONV_TILE(1, 2)
EMBER_CONV_TILE(2, 2)
#define EMBER_CONV_TILES_PART1(X) X(4, 1) X(8, 1) X(12, 1) X(3, 2) X(4, 2)
#define EMBER_CONV_TILES_PART2(X) X(5, 2) X(6, 2)
#if defined(__AVX512F__)
/* 32 registers: wider pairs, and quads (4 output blocks) for rows too short for a wide pair
 * (7- and 5-wide maps) and for inputs with few channels per block, where each tap's loads and
 * address arithmetic are spread over 4 * RW FMAs instead of 2 * RW. */
#define EMBER_WIDE_PAIRS 1
#define EMBER_MAX_RB 4
EMBER_CONV_TILE(1, 4)
EMBER_CONV_TILE(2, 4)
#define EMBER_CONV_TILES_WIDE1(X) X(8, 2) X(12, 2)
#define EMBER_CONV_TILES_WIDE2(X) X(3, 4) X(4, 4) X(6, 4)
#else
#define EMBER_WIDE_PAIRS 0
#define EMBER_MAX_RB 2
#define EMBER_CONV_TILES_WIDE1(X)
#define EMBER_CONV_TILES_WIDE2(X)
#endif
EMBER_CONV_TILES_PART1(EMBER_CONV_TILE_DECL)
EMBER_CONV_TILES_WIDE1(EMBER_CONV_TILE_DECL)
EMBER_CONV_TILES_PART2(EMBER_CONV_TILE_DECL)
EMBER_CONV_TILES_WIDE2(EMBER_CONV_TILE_DECL)
#if EMBER_KERNEL_IN_PART(1)
EMBER_CONV_TILES_PART1(EMBER_CONV_TILE_SHARED)
EMBER_CONV_TILES_WIDE1(EMBER_CONV_TILE_SHARED)
#endif
#if EMBER_KERNEL_IN_PART(2)
EMBER_CONV_TILES_PART2(EMBER_CONV_TILE_SHARED)
EMBER_CONV_TILES_WIDE2(EMBER_CONV_TILE_SHARED)
#endif
#undef EMBER_CONV_TILES_PART1
#undef EMBER_CONV_TILES_PART2
#undef EMBER_CONV_TILES_WIDE1
#undef EMBER_CONV_TILES_WIDE2

/* The widest instantiated tile width <= want for rb output blocks. */
static inline int32_t EMBER_FN(ember_tile_width)(int32_t want, int32_t rb) {
  if (rb == 4) return want >= 6 ? 6 : want >= 4 ? 4 : want;
  if (rb == 2) {
    if (EMBER_WIDE_PAIRS && want >= 8) return want >= 12 ? 12 : 8;
    return want >= 6 ? 6 : want >= 1 ? want : 1;
  }
  return want >= 12 ? 12 : want >= 8 ? 8 : want >= 4 ? 4 : want >= 2 ? 2 : 1;
}

/* Run `count` tiles of exactly `rw` columns (an instantiated width for rb) side by side. */
EMBER_KFN void EMBER_FN(ember_conv_tile)(const ember_conv_p* p, int32_t rw, int32_t rb,
                                         ptrdiff_t row, int32_t ix0, const float* w,
                                         const float* bias, size_t o, int32_t ky0, int32_t ky1,
                                         int32_t interior, int32_t count) {
#define EMBER_TILE_CALL(RW, RB) \
  EMBER_CAT4(ember_conv_tile, EMBER_L, RW, RB)(p, row, ix0, w, bias, o, ky0, ky1, interior, count)
#if EMBER_MAX_RB >= 4
  if (rb == 4) {
    switch (rw) {
      case 6: EMBER_TILE_CALL(6, 4); return;
      case 4: EMBER_TILE_CALL(4, 4); return;
      case 3: EMBER_TILE_CALL(3, 4); return;
      case 2: EMBER_TILE_CALL(2, 4); return;
      default: EMBER_TILE_CALL(1, 4); return;
    }
  }
#endif
  if (rb == 2) {
    switch (rw) {
#if EMBER_WIDE_PAIRS
      case 12: EMBER_TILE_CALL(12, 2); return;
      case 8: EMBER_TILE_CALL(8, 2); return;
#endif
      case 6: EMBER_TILE_CALL(6, 2); return;
      case 5: EMBER_TILE_CALL(5, 2); return;
      case 4: EMBER_TILE_CALL(4, 2); return;
      case 3: EMBER_TILE_CALL(3, 2); return;
      case 2: EMBER_TILE_CALL(2, 2); return;
      default: EMBER_TILE_CALL(1, 2); return;
    }
  }
  switch (rw) {
    case 12: EMBER_TILE_CALL(12, 1); return;
    case 8: EMBER_TILE_CALL(8, 1); return;
    case 4: EMBER_TILE_CALL(4, 1); return;
    case 2: EMBER_TILE_CALL(2, 1); return;
    default: EMBER_TILE_CALL(1, 1); return;
  }
#undef EMBER_TILE_CALL
}

/* Output columns [x0, x1) of row oy for output blocks [ob, ob + nb): the blocks in tiles of
 * 4 (where instantiated), 2 and 1, each tile group along the whole strip. */
EMBER_KFN void EMBER_FN(ember_conv_strip)(const ember_conv_p* p, int32_t b, int32_t ob,
                                          int32_t nb, int32_t oy, int32_t x0, int32_t x1) {
  const int32_t L = EMBER_L, cb = p->cb;
  const int32_t g = ob / p->ocb_g;
  const int32_t iy0 = oy * p->sh - p->pt;
  const int32_t ky0 = ember_first_tap(iy0, p->dh, p->kh);
  const int32_t ky1 = ember_end_tap(iy0, p->dh, p->h, p->kh, ky0);
  const ptrdiff_t row = ((((ptrdiff_t)b * p->icb + (ptrdiff_t)g * p->icb_g) * p->h) + iy0) *
                        p->w * cb;
  const size_t wob = (size_t)p->wicb * p->kh * p->kw * cb * L;
  int32_t xi0, xi1, sb, rb;
  ember_conv_interior(p, x0, x1, &xi0, &xi1);
  for (sb = 0; sb < nb; sb += rb) {
    const int32_t left = nb - sb;
    const float* w = p->wt + (size_t)(ob + sb) * wob;
    const float* bias = p->bias + (size_t)(ob + sb) * L;
    const size_t orow = ((((size_t)b * p->ocb + ob + sb) * p->oh) + oy) * p->ow * L;
    int32_t ox = x0, rw;
    rb = left >= 4 && EMBER_MAX_RB >= 4 ? 4 : left >= 2 ? 2 : 1;
    /* the last blocks of an odd count, fewer than the plan's rb, in tiles as many
     * accumulators wide as the plan's (up to 12 columns): a single block 5 columns wide (a
     * pair's width) ran as a 4-wide tile, 5 loads per 4 FMAs (MobileNetV2's 144->24 1x1) */
    rw = rb < p->rb && p->rw * p->rb / rb > p->rw ? p->rw * p->rb / rb : p->rw;
    rw = rw > 12 && rw > p->rw ? 12 : rw;
    while (ox < x1) {
      int32_t want = x1 - ox < rw ? x1 - ox : rw, t, interior, count = 1;
      if (cb == 1 && xi1 - xi0 >= rw) {
        /* a plain NCHW input (one channel per tap) with room for full interior tiles: the
         * border columns get tiles of their own, so that no interior tile pays bounds checks
         * on every tap (with a channel block, the checks are shared by cb taps) */
        if (ox < xi0 && xi0 - ox < want) want = xi0 - ox;
        if (ox >= xi0 && ox < xi1 && xi1 - ox < want) want = xi1 - ox;
      } else if (rb == 2 && !EMBER_WIDE_PAIRS) {
        /* pairs of every width up to 6: the rest of the strip in tiles of even widths (a
         * 14-wide row as 5 + 5 + 4, not 6 + 6 + 2: a 2-wide pair spends 4 loads per 4 FMAs,
         * and 256->256 3x3 convs at 14x14 ran at 76% of the 6-wide tiles' rate) */
        const int32_t rest = x1 - ox, wide = EMBER_FN(ember_tile_width)(rw, rb);
        const int32_t tiles = (rest + wide - 1) / wide;
        want = (rest + tiles - 1) / tiles;
        /* the plan's next tiles - (tiles * want - rest) are as wide as this one */
        count = tiles - (tiles * want - rest);
      } else {
        /* full tiles of rw columns (or the one rest), where they leave the strip one column
         * (a one-column tile sums in the wider tiles' order, its FMA chains as few as its
         * blocks, EMBER_TILE_1X1_CB) the last of them in two: a 7-wide row of quads as 4 + 3,
         * not 6 + 1 (1x1 convs at 7x7 10-15% faster), a 9-wide one of pairs as 5 + 4 */
        const int32_t rest = x1 - ox, wide = EMBER_FN(ember_tile_width)(want, rb);
        count = wide == want ? rest / want : 1;
        if (rb > 1 && wide > 1 && rest - wide * count == 1) { /* single blocks: no odd tile */
          if (count > 1) {
            --count;
          } else {
            want = EMBER_FN(ember_tile_width)((rest + 1) / 2, rb);
          }
        }
      }
      t = EMBER_FN(ember_tile_width)(want, rb);
      interior = ox >= xi0 && ox + t <= xi1;
      if (t != want || !interior || !EMBER_FN(ember_conv_tile_runs)(p, ky0, ky1)) {
        count = 1;
      } else if ((xi1 - ox) / t < count) {
        count = (xi1 - ox) / t; /* the interior tiles in one call; a border one alone */
      }
      ember_conv_pf_step(p->pf);
      EMBER_FN(ember_conv_tile)(p, t, rb, row, ox * p->sw - p->pl, w, bias,
                                orow + (size_t)ox * L, ky0, ky1, interior, count);
      ox += t * count;
    }
  }
  if (ember_conv_late_act(p)) {
    for (sb = 0; sb < nb; ++sb) {
      const size_t orow = ((((size_t)b * p->ocb + ob + sb) * p->oh) + oy) * p->ow * L;
      EMBER_FN(ember_conv_act_pass)(p, orow + (size_t)x0 * L, (size_t)(x1 - x0) * L);
    }
  }
}

#undef EMBER_WIDE_PAIRS

/* The input columns of output columns [x0, x1) of row oy (a 1x1 conv: one input column each)
 * copied to `pack` as a one-row image [icb][x1 - x0][cb]; columns in the padding are zeros. */
EMBER_KFN void EMBER_FN(ember_conv_pack)(const ember_conv_p* p, float* pack, int32_t b,
                                         int32_t oy, int32_t x0, int32_t x1) {
  const int32_t cb = p->cb, n = x1 - x0, iy = oy * p->sh - p->pt;
  int32_t icb, x, c;
  for (icb = 0; icb < p->icb; ++icb) {
    float* dst = pack + (size_t)icb * n * cb;
    const float* src = p->in + (((size_t)b * p->icb + icb) * p->h + iy) * p->w * cb;
    for (x = x0; x < x1; ++x, dst += cb) {
      const int32_t ix = x * p->sw - p->pl;
      if (iy < 0 || iy >= p->h || ix < 0 || ix >= p->w) {
        for (c = 0; c < cb; ++c) dst[c] = 0.0f;
      } else if (cb == EMBER_L) {
        EMBER_VSTORE(EMBER_L, dst, EMBER_VLOAD(EMBER_L, src + (size_t)ix * cb));
      } else {
        for (c = 0; c < cb; ++c) dst[c] = src[(size_t)ix * cb + c];
      }
    }
  }
}

/* ember_conv_strip over a strip packed by ember_conv_pack: the pack is presented as a one-row
 * image of x1 - x0 columns starting at column x0 (pl = x0, unit stride) that every batch and
 * output row reads (icb = 0 and sh = 0 make its batch and row offsets zero). */
static inline void EMBER_FN(ember_conv_strip_packed)(const ember_conv_p* p, const float* pack,
                                                     int32_t b, int32_t ob, int32_t nb,
                                                     int32_t oy, int32_t x0, int32_t x1) {
  ember_conv_p q = *p;
  q.in = pack;
  q.icb = 0;
  q.h = 1;
  q.w = x1 - x0;
  q.sh = 0;
  q.sw = 1;
  q.pt = 0;
  q.pl = x0;
  EMBER_FN(ember_conv_strip)(&q, b, ob, nb, oy, x0, x1);
}

/* Depthwise: RW output columns of one channel block (arguments as for the conv tile). */
#define EMBER_DW_TILE(RW)                                                                      \
  static inline void EMBER_CAT4(ember_dw_tile, EMBER_L, RW, 1)(                                \
      const ember_conv_p* p, ptrdiff_t row, int32_t ix0, const float* w, const float* bias,    \
      size_t o, int32_t ky0, int32_t ky1, int32_t interior) {                                  \
    EV acc[RW];                                                                                \
    const float* col[RW];                                                                      \
    const int32_t L = EMBER_L;                                                                 \
    const ptrdiff_t dys = (ptrdiff_t)p->dh * p->w * L;                                         \
    EV bv = EMBER_VLOAD(EMBER_L, bias);                                                        \
    int32_t j, ky, kx;                                                                         \
    EMBER_KUNROLL for (j = 0; j < RW; ++j) acc[j] = bv;                                         \
    for (ky = ky0; ky < ky1; ++ky) {                                                           \
      const ptrdiff_t rowk = row + ky * dys;                                                   \
      for (kx = 0; kx < p->kw; ++kx) {                                                         \
        EV wv = EMBER_VLOAD(EMBER_L, w + ((ptrdiff_t)ky * p->kw + kx) * L);                    \
        EMBER_TILE_COLUMNS(RW, col, rowk, ix0 + kx * p->dw, p->sw, L, interior)                \
        EMBER_KUNROLL for (j = 0; j < RW; ++j)                                                  \
          acc[j] = EMBER_VFMA(EMBER_L, acc[j], EMBER_VLOAD(EMBER_L, col[j]), wv);              \
      }                                                                                        \
    }                                                                                          \
    EMBER_KUNROLL for (j = 0; j < RW; ++j) {                                                    \
      size_t at = o + (size_t)j * L;                                                           \
      EMBER_FN(ember_conv_store)(p, &acc[j], p->out + at, p->res + at);                        \
    }                                                                                          \
  }

EMBER_DW_TILE(1)
EMBER_DW_TILE(2)
EMBER_DW_TILE(4)
EMBER_DW_TILE(8)

/* Full unrolling of the row loops below (up to (RW - 1) * S + K = 19 input vectors): the
 * tap conditions fold away only when every iteration is a constant. */
#if defined(__clang__)
#define EMBER_DW_UNROLL _Pragma("unroll")
#elif defined(__GNUC__) && __GNUC__ >= 8
#define EMBER_DW_UNROLL _Pragma("GCC unroll 32")
#else
#define EMBER_DW_UNROLL
#endif

/* The n vectors at acc (a copy of a tile's accumulators) through ember_conv_store, to
 * p->out + o: ember_dw_store's rare epilogues. Out of line: unrolled in every tile, the switch
 * over the activations per vector was more than half of the depthwise object's code. */
EMBER_KFN void EMBER_FN(ember_dw_store_general)(const ember_conv_p* p, EV* acc, int32_t n,
                                                size_t o) {
  int32_t j;
  for (j = 0; j < n; ++j) {
    const size_t at = o + (size_t)j * EMBER_L;
    EMBER_FN(ember_conv_store)(p, &acc[j], p->out + at, p->res + at);
  }
}

/* Store the first n of the rw output vectors of a depthwise tile at p->out + o after the
 * epilogue, with the activation chosen once per tile (not once per vector, as ember_conv_store
 * does): the common ones (none, relu, clip, and the exp-based ones that run later in
 * ember_conv_act_pass) without a residual store straight from registers; the rest go through
 * ember_dw_store_general. */
static inline void EMBER_FN(ember_dw_store)(const ember_conv_p* p, EV* acc, int32_t rw,
                                            int32_t n, size_t o) {
  float* out = p->out + o;
  const int32_t L = EMBER_L;
  int32_t j;
  if (!(p->flags & EMBER_EPI_RESIDUAL)) {
    if (p->act == EMBER_CONV_ACT_NONE || ember_conv_late_act(p)) {
      EMBER_DW_UNROLL for (j = 0; j < rw && j < n; ++j) EMBER_VSTORE(EMBER_L, out + j * L, acc[j]);
      return;
    }
    if (p->act == EMBER_CONV_ACT_RELU) {
      EMBER_DW_UNROLL for (j = 0; j < rw && j < n; ++j)
        EMBER_VSTORE(EMBER_L, out + j * L, EMBER_VMAX(EMBER_L, acc[j], EMBER_VZERO(EMBER_L)));
      return;
    }
    if (p->act == EMBER_CONV_ACT_CLIP) {
      const EV lo = EMBER_VSPLAT(EMBER_L, p->lo), hi = EMBER_VSPLAT(EMBER_L, p->hi);
      EMBER_DW_UNROLL for (j = 0; j < rw && j < n; ++j) {
        EV t = EMBER_VMAX(EMBER_L, acc[j], lo);
        EMBER_VSTORE(EMBER_L, out + j * L, EMBER_VMIN(EMBER_L, t, hi));
      }
      return;
    }
  }
  {
    EV spill[12]; /* a copy (rw <= 12): acc, its address taken, would leave the registers */
    EMBER_DW_UNROLL for (j = 0; j < rw; ++j) spill[j] = acc[j];
    EMBER_FN(ember_dw_store_general)(p, spill, n, o);
  }
}

/* Input vector i of a K-wide tile's kernel row at ip (column ix0 + i): in an EDGE tile, a
 * column outside the image reads the zero vector (a pointer select, checked once a vector). */
#define EMBER_DWK_LOAD(EDGE, ip, ix0, i)                                                       \
  EMBER_VLOAD(EMBER_L, (EDGE) && (uint32_t)((ix0) + (i)) >= (uint32_t)p->w                     \
                           ? ember_conv_zeros                                                  \
                           : (ip) + (ptrdiff_t)(i) * EMBER_L)

/* Depthwise K-wide kernel rows, unit dilation, stride S: RW output columns of one channel
 * block (the first reading input column ix0). The input vectors of a kernel row are loaded in
 * order, each once, and used at once for every column whose window holds it: (RW - 1) * S + K
 * loads and K weight loads for K * RW FMAs, with only RW + K + 1 vectors live (RW = 8, K = 5:
 * 14 of AVX2's 16 registers). EDGE: input columns outside the image read as zeros (each vector
 * checked once, not once per tap) and only the first `valid` columns are stored: the borders,
 * the rest of a row, and rows narrower than a tile (the 7- and 14-wide maps of late layers). */
#define EMBER_DWK_TILE(NAME, K, RW, S, EDGE)                                                   \
  static inline void EMBER_CAT4(NAME, EMBER_L, K##x##RW, S)(                                   \
      const ember_conv_p* p, ptrdiff_t row, int32_t ix0, const float* w, const float* bias,    \
      size_t o, int32_t ky0, int32_t ky1, int32_t valid) {                                     \
    EV acc[RW], wv[K];                                                                         \
    const int32_t L = EMBER_L;                                                                 \
    const ptrdiff_t dys = (ptrdiff_t)p->dh * p->w * L;                                         \
    EV bv = EMBER_VLOAD(EMBER_L, bias);                                                        \
    int32_t i, j, ky;                                                                          \
    EMBER_DW_UNROLL for (j = 0; j < RW; ++j) acc[j] = bv;                                      \
    for (ky = ky0; ky < ky1; ++ky) {                                                           \
      const float* ip = p->in + (row + ky * dys + (ptrdiff_t)ix0 * L);                         \
      EMBER_DW_UNROLL for (i = 0; i < K; ++i)                                                  \
        wv[i] = EMBER_VLOAD(EMBER_L, w + ((ptrdiff_t)ky * K + i) * L);                         \
      EMBER_DW_UNROLL for (i = 0; i < (RW - 1) * S + K; ++i) {                                 \
        const EV x = EMBER_DWK_LOAD(EDGE, ip, ix0, i);                                         \
        EMBER_DW_UNROLL for (j = 0; j < RW; ++j) {                                             \
          if (i - j * S >= 0 && i - j * S < K)                                                 \
            acc[j] = EMBER_VFMA(EMBER_L, acc[j], x, wv[i - j * S]);                            \
        }                                                                                      \
      }                                                                                        \
    }                                                                                          \
    EMBER_FN(ember_dw_store)(p, acc, RW, EDGE ? valid : RW, o);                                \
  }
#define EMBER_DWK(K, RW, S)                                                                    \
  EMBER_DWK_TILE(ember_dwk_tile, K, RW, S, 0)                                                  \
  EMBER_DWK_TILE(ember_dwk_edge, K, RW, S, 1)

/* The row widths of a tile: 8 columns (RW + K + 1 live vectors fit 16 registers up to K = 5),
 * 6 for 7-wide kernel rows, and 12 for 3-wide ones at stride 1 on rows of 24 columns or more
 * (16 live vectors: the fixed cost of a tile over more FMAs; ~10% faster on 56-wide maps,
 * slower on 14-wide ones, where a 12-wide tile is mostly edge). */
/* The (K, RW, S) shapes that single-row and two-row tiles both have. */
#define EMBER_DWK_EACH_SHAPE(X) X(3, 8, 1) X(3, 8, 2) X(5, 8, 1) X(5, 8, 2) X(7, 6, 1) X(7, 6, 2)
EMBER_DWK_EACH_SHAPE(EMBER_DWK)
EMBER_DWK(3, 12, 1)
#undef EMBER_DWK
#undef EMBER_DWK_TILE

#if defined(__AVX512F__)
/* Two output rows (oy, oy + 1) of a depthwise strip at stride S both ways and unit dilation:
 * the K + S input rows the two read are loaded once each (two single-row tiles load 2K), the
 * per-strip setup is paid once for both. Each accumulator sums the same products in the same
 * order as ember_dwk_tile's (rows, then columns, ascending), so the results are the same bits.
 * 2 * RW accumulators, 2K weights and an input vector are live: AVX-512's 32 registers. An
 * input row outside the image is skipped, as the single-row tiles skip its taps. */
#define EMBER_DWK2_TILE(NAME, K, RW, S, EDGE)                                                  \
  static inline void EMBER_CAT4(NAME, EMBER_L, K##x##RW, S)(                                   \
      const ember_conv_p* p, ptrdiff_t row, int32_t iy0, int32_t ix0, const float* w,        \
      const float* bias, size_t o, int32_t valid) {                                            \
    EV a0[RW], a1[RW], w0[K], w1[K];                                                           \
    const int32_t L = EMBER_L;                                                                 \
    const ptrdiff_t ys = (ptrdiff_t)p->w * L;                                                  \
    EV bv = EMBER_VLOAD(EMBER_L, bias);                                                        \
    int32_t i, j, r;                                                                           \
    EMBER_DW_UNROLL for (j = 0; j < RW; ++j) a0[j] = a1[j] = bv;                               \
    EMBER_DW_UNROLL for (r = 0; r < K + S; ++r) {                                              \
      const float* ip;                                                                         \
      if ((uint32_t)(iy0 + r) >= (uint32_t)p->h) continue;                                     \
      ip = p->in + (row + r * ys + (ptrdiff_t)ix0 * L);                                        \
      EMBER_DW_UNROLL for (i = 0; i < K; ++i) {                                                \
        if (r < K) w0[i] = EMBER_VLOAD(EMBER_L, w + ((ptrdiff_t)r * K + i) * L);               \
        if (r >= S) w1[i] = EMBER_VLOAD(EMBER_L, w + ((ptrdiff_t)(r - S) * K + i) * L);        \
      }                                                                                        \
      EMBER_DW_UNROLL for (i = 0; i < (RW - 1) * S + K; ++i) {                                 \
        const EV x = EMBER_DWK_LOAD(EDGE, ip, ix0, i);                                         \
        EMBER_DW_UNROLL for (j = 0; j < RW; ++j) {                                             \
          if (i - j * S >= 0 && i - j * S < K) {                                               \
            if (r < K) a0[j] = EMBER_VFMA(EMBER_L, a0[j], x, w0[i - j * S]);                   \
            if (r >= S) a1[j] = EMBER_VFMA(EMBER_L, a1[j], x, w1[i - j * S]);                  \
          }                                                                                    \
        }                                                                                      \
      }                                                                                        \
    }                                                                                          \
    EMBER_FN(ember_dw_store)(p, a0, RW, EDGE ? valid : RW, o);                                 \
    EMBER_FN(ember_dw_store)(p, a1, RW, EDGE ? valid : RW, o + (size_t)p->ow * L);             \
  }
#define EMBER_DWK2(K, RW, S)                                                                   \
  EMBER_DWK2_TILE(ember_dwk2_tile, K, RW, S, 0)                                                \
  EMBER_DWK2_TILE(ember_dwk2_edge, K, RW, S, 1)
EMBER_DWK_EACH_SHAPE(EMBER_DWK2)
#undef EMBER_DWK2
#undef EMBER_DWK2_TILE
#define EMBER_DW_TWO_ROWS 1
#else
#define EMBER_DW_TWO_ROWS 0
#endif
#undef EMBER_DWK_LOAD
#undef EMBER_DWK_EACH_SHAPE

/* The K-wide tile shapes (K, RW, S) by p->kw and p->sw: CALL(K, RW, S) runs one. */
#define EMBER_DWK_SHAPES(CALL)                                                                 \
  if (p->kw == 3 && p->sw == 1) {                                                              \
    CALL(3, 8, 1)                                                                              \
  } else if (p->kw == 3) {                                                                     \
    CALL(3, 8, 2)                                                                              \
  } else if (p->kw == 5 && p->sw == 1) {                                                       \
    CALL(5, 8, 1)                                                                              \
  } else if (p->kw == 5) {                                                                     \
    CALL(5, 8, 2)                                                                              \
  } else if (p->sw == 1) {                                                                     \
    CALL(7, 6, 1)                                                                              \
  } else {                                                                                     \
    CALL(7, 6, 2)                                                                              \
  }

/* The depthwise tiles of one strip (see ember_dw_strip). */
static inline void EMBER_FN(ember_dw_strip_tiles)(const ember_conv_p* p, ptrdiff_t row,
    const float* w, const float* bias, size_t orow, int32_t ky0, int32_t ky1, int32_t xi0,
    int32_t xi1, int32_t x0, int32_t x1) {
  const int32_t L = EMBER_L;
  int32_t ox = x0;
  if ((p->kw == 3 || p->kw == 5 || p->kw == 7) && p->dw == 1 && p->sw <= 2) {
    /* 3-, 5- and 7-wide rows at stride 1 or 2: full interior tiles, and edge tiles (up to a
     * tile's width) for the borders and the rest of the row */
    const int32_t wide = p->kw == 7 ? 6 : p->kw == 3 && p->sw == 1 && p->ow >= 24 ? 12 : 8;
    while (ox < x1) {
      const int32_t ix0 = ox * p->sw - p->pl, edge = !(ox >= xi0 && ox + wide <= xi1);
      const int32_t t = edge && x1 - ox < wide ? x1 - ox : wide;
      const size_t o = orow + (size_t)ox * L;
#define EMBER_DWK_CALL(K, RW, S)                                                               \
  if (edge) {                                                                                  \
    EMBER_CAT4(ember_dwk_edge, EMBER_L, K##x##RW, S)(p, row, ix0, w, bias, o, ky0, ky1, t);    \
  } else {                                                                                     \
    EMBER_CAT4(ember_dwk_tile, EMBER_L, K##x##RW, S)(p, row, ix0, w, bias, o, ky0, ky1, t);    \
  }
      if (wide == 12) {
        EMBER_DWK_CALL(3, 12, 1)
      } else {
        EMBER_DWK_SHAPES(EMBER_DWK_CALL)
      }
#undef EMBER_DWK_CALL
      ox += t;
    }
    return;
  }
  while (ox < x1) {
    /* border columns one at a time, so that the interior starts with full tiles */
    int32_t left = ox < xi0 ? 1 : ox < xi1 ? xi1 - ox : x1 - ox;
    int32_t t = left >= 8 ? 8 : left >= 4 ? 4 : left >= 2 ? 2 : 1;
    int32_t interior = ox >= xi0 && ox + t <= xi1, ix0 = ox * p->sw - p->pl;
    size_t o = orow + (size_t)ox * L;
    if (t == 8) {
      EMBER_CAT4(ember_dw_tile, EMBER_L, 8, 1)(p, row, ix0, w, bias, o, ky0, ky1, interior);
    } else if (t == 4) {
      EMBER_CAT4(ember_dw_tile, EMBER_L, 4, 1)(p, row, ix0, w, bias, o, ky0, ky1, interior);
    } else if (t == 2) {
      EMBER_CAT4(ember_dw_tile, EMBER_L, 2, 1)(p, row, ix0, w, bias, o, ky0, ky1, interior);
    } else {
      EMBER_CAT4(ember_dw_tile, EMBER_L, 1, 1)(p, row, ix0, w, bias, o, ky0, ky1, interior);
    }
    ox += t;
  }
}

EMBER_KFN void EMBER_FN(ember_dw_strip)(const ember_conv_p* p, int32_t b, int32_t cbk,
                                        int32_t oy, int32_t x0, int32_t x1) {
  const int32_t L = EMBER_L;
  const int32_t iy0 = oy * p->sh - p->pt;
  const int32_t ky0 = ember_first_tap(iy0, p->dh, p->kh);
  const int32_t ky1 = ember_end_tap(iy0, p->dh, p->h, p->kh, ky0);
  const ptrdiff_t row = ((((ptrdiff_t)b * p->icb + cbk) * p->h) + iy0) * p->w * L;
  const float* w = p->wt + (size_t)cbk * p->kh * p->kw * L;
  const float* bias = p->bias + (size_t)cbk * L;
  const size_t orow = ((((size_t)b * p->ocb + cbk) * p->oh) + oy) * p->ow * L;
  int32_t xi0, xi1;
  ember_conv_interior(p, x0, x1, &xi0, &xi1);
  EMBER_FN(ember_dw_strip_tiles)(p, row, w, bias, orow, ky0, ky1, xi0, xi1, x0, x1);
  if (ember_conv_late_act(p)) {
    EMBER_FN(ember_conv_act_pass)(p, orow + (size_t)x0 * L, (size_t)(x1 - x0) * L);
  }
}

#if EMBER_DW_TWO_ROWS
/* Whether ember_dw_range runs whole-row strips in pairs of rows through ember_dw_strip2:
 * rows in item order (order 0), the same stride (1 or 2) both ways, unit
 * dilation, a square 3-, 5- or 7-wide kernel. A wide 3x3's rows run in pairs of 8-wide tiles
 * too, not its single-row 12-wide ones: 94 -> 69 us on 32x112x112, 103 -> 74 on 144x56x56
 * (pairs of 12-wide tiles were no faster but at 112 columns); at stride 2, 96x112x112 99 ->
 * 85 us, 512x14x14 7.7 -> 6.2. */
static inline int EMBER_FN(ember_dw_two_rows)(const ember_conv_p* p) {
  return p->order == 0 && p->sh == p->sw && p->sw <= 2 && p->dh == 1 && p->dw == 1 &&
         p->kh == p->kw && (p->kw == 3 || p->kw == 5 || p->kw == 7);
}

/* Whole output rows oy and oy + 1 of channel block cbk: ember_dw_strip's two calls in one
 * (ember_dwk2_tile; its own function, not a flag of ember_dw_strip: merged, the two ran
 * 5-13% slower). */
EMBER_KFN void EMBER_FN(ember_dw_strip2)(const ember_conv_p* p, int32_t b, int32_t cbk,
                                         int32_t oy) {
  const int32_t L = EMBER_L, iy0 = oy * p->sh - p->pt;
  const ptrdiff_t row = ((((ptrdiff_t)b * p->icb + cbk) * p->h) + iy0) * p->w * L;
  const float* w = p->wt + (size_t)cbk * p->kh * p->kw * L;
  const float* bias = p->bias + (size_t)cbk * L;
  const size_t orow = ((((size_t)b * p->ocb + cbk) * p->oh) + oy) * p->ow * L;
  const int32_t wide = p->kw == 7 ? 6 : 8, x1 = p->ow;
  int32_t xi0, xi1, ox = 0;
  ember_conv_interior(p, 0, x1, &xi0, &xi1);
  while (ox < x1) {
    const int32_t ix0 = ox * p->sw - p->pl, edge = !(ox >= xi0 && ox + wide <= xi1);
    const int32_t t = edge && x1 - ox < wide ? x1 - ox : wide;
    const size_t o = orow + (size_t)ox * L;
#define EMBER_DWK2_CALL(K, RW, S)                                                              \
  if (edge) {                                                                                  \
    EMBER_CAT4(ember_dwk2_edge, EMBER_L, K##x##RW, S)(p, row, iy0, ix0, w, bias, o, t);        \
  } else {                                                                                     \
    EMBER_CAT4(ember_dwk2_tile, EMBER_L, K##x##RW, S)(p, row, iy0, ix0, w, bias, o, t);        \
  }
    EMBER_DWK_SHAPES(EMBER_DWK2_CALL)
#undef EMBER_DWK2_CALL
    ox += t;
  }
  if (ember_conv_late_act(p)) {
    EMBER_FN(ember_conv_act_pass)(p, orow, (size_t)2 * p->ow * L); /* the two rows: one run */
  }
}
#endif
#undef EMBER_DWK_SHAPES

#include "ember/kernels/conv_nchwc_flat_impl.h"
#if EMBER_L == 8 && defined(__AVX512F__)
#define EMBER_PAIRS_HERE 1
#include "ember/kernels/conv_nchwc_pair_impl.h"
#else
#define EMBER_PAIRS_HERE 0
#endif

/* Input blocks per pass of ember_conv_range: all of them, unless the weights of one block
 * pair over all input blocks pass EMBER_CONV_CHUNK_MIN_BYTES: then chunks whose weights, for
 * every block pair, fit EMBER_CONV_CHUNK_BYTES of L2 (dense, ungrouped, blocked input, wider
 * than 1x1: DBNet's 3x3 256->64 at 160x160 has 147 KiB a pair, 590 KiB in all), in at most
 * EMBER_CONV_CHUNK_MAX_PASSES passes: each pass reads and writes the whole output again, which
 * costs more than the weights' misses save when the output is wide (wav2vec2's 1x3 512->512
 * over 1599 frames would take 22 passes: 8% slower than one). */
#ifndef EMBER_CONV_CHUNK_BYTES
#define EMBER_CONV_CHUNK_BYTES (160 * 1024)
#endif
#define EMBER_CONV_CHUNK_MIN_BYTES (64 * 1024)
#define EMBER_CONV_CHUNK_MAX_PASSES 4
static inline int32_t EMBER_FN(ember_conv_ic_chunk)(const ember_conv_p* p) {
  const int64_t block = (int64_t)p->kh * p->kw * p->cb * EMBER_L * (int64_t)sizeof(float);
  int64_t chunk;
  if (p->depthwise || p->groups != 1 || p->cb != EMBER_L || p->kh * p->kw == 1 ||
      2 * block * p->icb_g <= EMBER_CONV_CHUNK_MIN_BYTES) {
    return p->icb_g;
  }
  chunk = EMBER_CONV_CHUNK_BYTES / (block * p->ocb);
  chunk = chunk < 1 ? 1 : chunk;
  if (chunk >= p->icb_g || (p->icb_g + chunk - 1) / chunk > EMBER_CONV_CHUNK_MAX_PASSES) {
    return p->icb_g;
  }
  return (int32_t)chunk;
}

/* Set pf to the weights that follow the pass over input blocks [k0, k0 + chunk) of the run
 * of items [lo, hi) of one block group (order 0): the next chunk of the same blocks, or after
 * the last pass the first chunk of the next block group (if any in the conv group), one slice
 * per register tile of the run. Returns pf, or NULL when nothing follows. */
static inline ember_conv_pf* EMBER_FN(ember_conv_pf_next)(const ember_conv_p* p, int64_t lo,
                                                          int64_t hi, int32_t k0, int32_t chunk,
                                                          ember_conv_pf* pf) {
  const size_t per_block = (size_t)p->kh * p->kw * p->cb * EMBER_L;
  const size_t tiles = (size_t)(hi - lo) * (size_t)((p->strip + p->rw - 1) / p->rw);
  int32_t b, og, oy, s, nb, ob, next_k0 = k0 + chunk, next_ob;
  ember_conv_item(p, lo, &b, &og, &oy, &s);
  ob = ember_conv_blocks(p, og, &nb);
  next_ob = ob;
  if (next_k0 >= p->icb_g) {
    next_k0 = 0;
    next_ob = ob + nb;
  }
  if (next_ob + nb > (ob / p->ocb_g + 1) * p->ocb_g || tiles == 0) return NULL;
  pf->wob = (size_t)p->wicb * per_block;
  pf->base = p->wt + (size_t)next_ob * pf->wob + (size_t)next_k0 * per_block;
  pf->len = (size_t)(p->icb_g - next_k0 < chunk ? p->icb_g - next_k0 : chunk) * per_block;
  pf->step = ((pf->len + tiles - 1) / tiles + 15) & ~(size_t)15; /* whole lines */
  pf->at = 0;
  pf->nb = nb;
  return pf;
}

/* Work items [lo, hi) in passes over chunks of input blocks (ember_conv_ic_chunk), each
 * pass adding to the partial sums the last left in the output: a pass's weights stay in L2
 * while its rows stream by, where all of them (every row visiting every input block) were
 * read from L3 once per row (DBNet's 3x3 256->64 at 160x160: 95 -> 85 ms on one AVX2 core,
 * onnxruntime 80 ms). The epilogue (residual, activation) runs with the last pass.
 * `prefetch` (a run of one block group, ember_conv_row_passes): each tile of a pass
 * prefetches its slice of the weights of the pass after it into the L2 (ember_conv_pf_next).
 * Without, every pass began by reading its chunk of weights from memory, a few tiles' worth
 * of FMAs to hide them: crnn's 3x3s 128->256 and 256->256 over 3x80 maps (1.2 and 2.4 MiB
 * of weights) 3-5% faster with the weights cold, the same warm. */
static inline void EMBER_FN(ember_conv_chunked)(const ember_conv_p* p, int64_t lo, int64_t hi,
                                                int32_t chunk, int prefetch) {
  ember_conv_p q = *p;
  ember_conv_pf pf;
  int32_t k0;
  int64_t item;
  for (k0 = 0; k0 < p->icb_g; k0 += chunk) {
    q.pf = prefetch && lo < hi ? EMBER_FN(ember_conv_pf_next)(p, lo, hi, k0, chunk, &pf) : NULL;
    const int32_t last = k0 + chunk >= p->icb_g;
    q.in = p->in + (size_t)k0 * p->h * p->w * p->cb;
    q.wt = p->wt + (size_t)k0 * p->kh * p->kw * p->cb * EMBER_L;
    q.icb_g = last ? p->icb_g - k0 : chunk;
    q.icl = last ? p->icl : p->cb;
    q.accum = k0 > 0;
    q.act = last ? p->act : 0;
    q.flags = last ? p->flags : 0;
    q.epi = ember_conv_epi_case(&q);
    for (item = lo; item < hi; ++item) {
      int32_t b, og, oy, s, nb, ob;
      ember_conv_item(p, item, &b, &og, &oy, &s);
      ob = ember_conv_blocks(p, og, &nb);
      EMBER_FN(ember_conv_strip)(&q, b, ob, nb, oy, s * p->strip,
                                 (s + 1) * p->strip < p->ow ? (s + 1) * p->strip : p->ow);
    }
  }
}

/* Input blocks per pass of the row tiles over the run of one block group's items (blocks
 * outermost, order 0, not the flat tiles): as many as keep a tile group's weights of one
 * pass in EMBER_CONV_ROW_CHUNK_BYTES of L1 (one input block of a 16-lane quad of a 3x3
 * conv: 36 KiB; 8 of an 8-lane pair), where all of them pass EMBER_CONV_ROW_CHUNK_MIN_BYTES.
 * In one pass, every tile of RW columns streamed its group's weights over all input blocks
 * from the L2 or beyond: maps of few rows and many columns (a text recogniser's 3x80) have
 * too few rows for the tiles to spend them on (crnn's 3x3 256->256 at 3x80, 590 KiB a quad
 * and 2.4 MiB in all, at 1.14x onnxruntime's time). Each later pass reads and writes the
 * output's partial sums again: a load and a store per output vector for the 144 FMAs into
 * it of a 3x3 16-lane pass. */
#ifndef EMBER_CONV_ROW_CHUNK_BYTES
#define EMBER_CONV_ROW_CHUNK_BYTES (40 * 1024)
#endif
#ifndef EMBER_CONV_ROW_CHUNK_MIN_BYTES
#define EMBER_CONV_ROW_CHUNK_MIN_BYTES (128 * 1024)
#endif
static inline int32_t EMBER_FN(ember_conv_row_chunk)(const ember_conv_p* p) {
  const int64_t block = (int64_t)p->rb * p->kh * p->kw * EMBER_L * EMBER_L * 4;
  const int64_t chunk = EMBER_CONV_ROW_CHUNK_BYTES / block;
  if (p->depthwise || p->groups != 1 || p->cb != EMBER_L || p->order != 0 ||
      p->kh * p->kw == 1 || chunk >= p->icb_g ||
      block * p->icb_g <= EMBER_CONV_ROW_CHUNK_MIN_BYTES) {
    return p->icb_g;
  }
  return chunk < 1 ? 1 : (int32_t)chunk;
}

/* Items [lo, hi) (order 0) in runs of one (batch, block group), each run in passes over
 * chunks of input blocks (ember_conv_row_chunk) adding to the partial sums the pass before
 * stored (the tiles' straight-line stores, EMBER_CONV_STORE_TILE's cases 16 and 18), the
 * epilogue with the last pass. A run rather than one row per pass: the same (one row per
 * pass, the output row kept in L1, as MLAS's NCHWc kernel loops) measured no faster. */
static inline void EMBER_FN(ember_conv_row_passes)(const ember_conv_p* p, int64_t lo,
                                                   int64_t hi, int32_t chunk) {
  const int64_t per_group = (int64_t)p->oh * ((p->ow + p->strip - 1) / p->strip);
  int64_t end;
  for (; lo < hi; lo = end) {
    end = (lo / per_group + 1) * per_group < hi ? (lo / per_group + 1) * per_group : hi;
    EMBER_FN(ember_conv_chunked)(p, lo, end, chunk, 1);
  }
}

EMBER_KFN void EMBER_FN(ember_conv_range)(const ember_conv_p* p, int64_t lo, int64_t hi) {
  int64_t item, packed = -1; /* the strip (b, oy, s) now in `pack` */
  const int32_t chunk = EMBER_FN(ember_conv_ic_chunk)(p);
  int32_t padded = -1;        /* the batch image now in `pad` */
  int32_t pad_y0 = 0, pad_y1 = ember_conv_flat_hp(p); /* its padded rows the range reads */
  float *pack = NULL, *pad = NULL;
  const int64_t per_group = (int64_t)p->oh * ((p->ow + p->strip - 1) / p->strip);
#if EMBER_PAIRS_HERE
  if (p->pair_w != NULL) {
    ember_conv_pair_range_x8(p, lo, hi);
    return;
  }
#endif
  if (chunk < p->icb_g && !ember_conv_packs(p) && !EMBER_FN(ember_conv_flat)(p)) {
    EMBER_FN(ember_conv_chunked)(p, lo, hi, chunk, 0);
    return;
  }
  if (!ember_conv_packs(p) && !EMBER_FN(ember_conv_flat)(p) &&
      EMBER_FN(ember_conv_row_chunk)(p) < p->icb_g) {
    EMBER_FN(ember_conv_row_passes)(p, lo, hi, EMBER_FN(ember_conv_row_chunk)(p));
    return;
  }
  if (lo < hi && ember_conv_packs(p)) {
    /* no workspace (a C-runtime arena with no room): the strips are read where they lie */
    pack = (float*)TVMBackendAllocWorkspace(1, 0, (uint64_t)p->icb * p->strip * p->cb *
                                            sizeof(float), 2, 32);
  } else if (lo < hi && EMBER_FN(ember_conv_flat)(p)) {
    /* no workspace: the row tiles of ember_conv_strip */
    pad = (float*)TVMBackendAllocWorkspace(1, 0, (uint64_t)p->icb * ember_conv_flat_hp(p) *
                                           ember_conv_flat_wp(p) * EMBER_L * sizeof(float),
                                           2, 32);
  }
  if (pad != NULL && lo / per_group == (hi - 1) / per_group) { /* rows of one run: theirs */
    int32_t b, og, oy0, oy1, s;
    ember_conv_item(p, lo, &b, &og, &oy0, &s);
    ember_conv_item(p, hi - 1, &b, &og, &oy1, &s);
    pad_y0 = oy0 * p->sh;
    pad_y1 = oy1 * p->sh + (p->kh - 1) * p->dh + 1;
  }
  for (item = lo; item < hi; ++item) {
    int32_t b, og, oy, s, x0, x1;
    ember_conv_item(p, item, &b, &og, &oy, &s);
    x0 = s * p->strip;
    x1 = x0 + p->strip < p->ow ? x0 + p->strip : p->ow;
    int32_t nb, ob = ember_conv_blocks(p, og, &nb);
    if (pad != NULL) {
      /* order 0: the items of one (batch, block group) are consecutive and cover consecutive
       * flattened positions; the run of them in [item, hi) goes in one call */
      const int64_t end = (item / per_group + 1) * per_group < hi
                              ? (item / per_group + 1) * per_group : hi;
      int32_t b1, og1, oy1, s1;
      ember_conv_item(p, end - 1, &b1, &og1, &oy1, &s1);
      if (b != padded) EMBER_FN(ember_conv_flat_pad)(p, pad, b, pad_y0, pad_y1);
      padded = b;
      EMBER_FN(ember_conv_flat_run)(p, pad, b, ob, nb, oy * p->ow + x0,
                                    oy1 * p->ow + ((s1 + 1) * p->strip < p->ow
                                                       ? (s1 + 1) * p->strip : p->ow));
      item = end - 1;
    } else if (pack != NULL) {
      const int64_t key = item / ember_conv_block_groups(p); /* order 1: og innermost */
      if (key != packed) EMBER_FN(ember_conv_pack)(p, pack, b, oy, x0, x1);
      packed = key;
      EMBER_FN(ember_conv_strip_packed)(p, pack, b, ob, nb, oy, x0, x1);
    } else {
      EMBER_FN(ember_conv_strip)(p, b, ob, nb, oy, x0, x1);
    }
  }
  if (pack != NULL) TVMBackendFreeWorkspace(1, 0, pack);
  if (pad != NULL) TVMBackendFreeWorkspace(1, 0, pad);
}

EMBER_KFN void EMBER_FN(ember_dw_range)(const ember_conv_p* p, int64_t lo, int64_t hi) {
  const int32_t groups = ember_conv_block_groups(p), strips = (p->ow + p->strip - 1) / p->strip;
  int64_t item;
  int32_t b, og, oy, s;
#if EMBER_DW_TWO_ROWS
  const int pairs = strips == 1 && EMBER_FN(ember_dw_two_rows)(p);
#endif
  if (lo >= hi) return;
  ember_conv_item(p, lo, &b, &og, &oy, &s);
  for (item = lo; item < hi; ++item) {
    const int32_t x0 = s * p->strip;
    const int32_t x1 = x0 + p->strip < p->ow ? x0 + p->strip : p->ow;
#if EMBER_DW_TWO_ROWS
    if (pairs && item + 1 < hi && oy + 1 < p->oh) { /* this item and the next: rows oy, oy+1 */
      EMBER_FN(ember_dw_strip2)(p, b, og, oy);
      ember_conv_item_next(p, groups, strips, &b, &og, &oy, &s);
      ember_conv_item_next(p, groups, strips, &b, &og, &oy, &s);
      ++item;
      continue;
    }
#endif
    EMBER_FN(ember_dw_strip)(p, b, og, oy, x0, x1);
    ember_conv_item_next(p, groups, strips, &b, &og, &oy, &s);
  }
}
#undef EV
#else
static inline int EMBER_FN(ember_conv_flat)(const ember_conv_p* p) { return (void)p, 0; }

EMBER_KFN void EMBER_FN(ember_conv_range)(const ember_conv_p* p, int64_t lo, int64_t hi) {
  ember_conv_portable(p, EMBER_L, lo, hi);
}

EMBER_KFN void EMBER_FN(ember_dw_range)(const ember_conv_p* p, int64_t lo, int64_t hi) {
  ember_conv_portable(p, EMBER_L, lo, hi);
}
#endif /* EMBER_KV */

/* The output blocks a tile of a 1x1 conv cut by block group on `tasks` >= 4 threads: fewer
 * than the plan's where the plan's groups are at most half of the tasks (pairs for quads),
 * or fewer than half (single blocks for pairs), the tile as many accumulators wide (up to
 * 12 columns); with more groups, pairs ran slower (960->320 on 8 tasks 18.3 -> 19.6 us). Two tasks that share a group of 4 blocks each read all 4 blocks' weights,
 * for half of its columns, and the tasks that start in one group and end in the next read
 * two groups' (AVX-512's 32 registers): on 16 tasks the 1x1 960->320 at 7x7 (5 quads) ran
 * its tasks in 13.2 us of CPU at most, in pairs 10.9 us; 960->160 (3 groups) 8.2 us, in single blocks 7.4; 256->512
 * (8 quads) 6.1 us, in pairs 5.4. Each output still sums its products in the same order
 * (a tile's columns and blocks are independent): the same bits. */
static inline void EMBER_FN(ember_conv_task_rb)(ember_conv_p* q, int64_t tasks) {
#if !EMBER_KV || !defined(__AVX512F__) /* EMBER_WIDE_PAIRS */
  /* the portable loops have no tiles; with 16 registers a pair's strip is shared out in
   * tiles of up to 6 columns, where single blocks' tiles load as many weights per FMA */
  (void)q, (void)tasks;
#else
  if (tasks < 4 || q->kh != 1 || q->kw != 1 || q->depthwise || q->pair_w != NULL) return;
  if (q->rb == 4 && 2 * (int64_t)ember_conv_block_groups(q) <= tasks) {
    q->rb = 2;
    q->rw = EMBER_FN(ember_tile_width)(q->rw * 2, 2);
  }
  if (q->rb == 2 && 2 * (int64_t)ember_conv_block_groups(q) < tasks) {
    q->rb = 1;
    q->rw = EMBER_FN(ember_tile_width)(q->rw * 2, 1);
  }
#endif
}

/* Tasks cut by output place where ember_conv_cuts_by_place says so, except the small-map
 * tiles, which pad a copy of the image per range (their tasks keep runs of groups). Those cut
 * at single positions (strip 1; a task's run of positions is tiled whole, evenly): cut at
 * strips of a row, whose work counted a 1-wide strip as a whole tile, one of the two tasks
 * of each quad of resnet18's 3x3 512->512 at 7x7 on 16 threads ran 27 positions, the other
 * 22 (1.22x). */
EMBER_KFN int EMBER_FN(ember_conv_task)(int task_id, TVMParallelGroupEnv* penv,
                                        void* cdata) {
  ember_conv_p q = *(const ember_conv_p*)cdata;
  int64_t n = penv->num_task > 0 ? penv->num_task : 1;
  const int flat = EMBER_FN(ember_conv_flat)(&q);
  const int by_place = n > 1 && !flat && ember_conv_cuts_by_place(&q, EMBER_L);
  if (n > 1 && flat) q.strip = 1;
  if (!by_place && !flat) EMBER_FN(ember_conv_task_rb)(&q, n);
  ember_conv_task_run(&q, task_id, n, by_place, EMBER_FN(ember_conv_range));
  if (q.flags & EMBER_EPI_STREAM) EMBER_STREAM_FENCE(); /* before the launch's barrier */
  return 0;
}

EMBER_KFN int EMBER_FN(ember_dw_task)(int task_id, TVMParallelGroupEnv* penv, void* cdata) {
  ember_conv_p q = *(const ember_conv_p*)cdata;
  int64_t n = penv->num_task > 0 ? penv->num_task : 1;
  const int by_place = n > 1 && ember_conv_cuts_by_place(&q, EMBER_L);
  ember_conv_task_run(&q, task_id, n, by_place, EMBER_FN(ember_dw_range));
  return 0;
}

/*!
 * \brief conv2d in NCHW[L]c (see conv_nchwc.h for the layouts). `res` is read only when
 *        `flags` has EMBER_EPI_RESIDUAL. rb (1, 2, or 4 with AVX-512) output blocks per
 *        tile; the rest of a group's blocks go in smaller tiles.
 */
#if EMBER_KERNEL_ALL || (defined(EMBER_KOBJ_ember_conv2d_nchwc) && EMBER_KERNEL_IN_PART(0))
EMBER_KENTRY int32_t EMBER_FN(ember_conv2d_nchwc)(EMBER_CONV2D_NCHWC_PARAMS) {
  ember_conv_p p;
  p.pf = NULL;
  p.pair_w = NULL;
  p.in = in; p.wt = w; p.bias = bias; p.res = res; p.out = out;
  p.n = n; p.icb = icb; p.icb_g = icb / groups; p.cb = cb; p.h = h; p.w = wd;
  p.ocb = ocb; p.ocb_g = ocb / groups; p.oh = oh; p.ow = ow;
  p.kh = kh; p.kw = kw; p.sh = sh; p.sw = sw; p.dh = dh; p.dw = dw; p.pt = pt; p.pl = pl;
  p.act = act; p.flags = ember_conv_stream_flags(flags, act, out, EMBER_L); p.lo = lo; p.hi = hi;
  p.rb = rb; p.rw = rw; p.strip = strip; p.order = order; p.depthwise = 0; p.groups = groups;
  p.wicb = p.icb_g; p.accum = 0; p.epi = ember_conv_epi_case(&p);
  p.icl = ember_conv_live_lanes(&p, EMBER_L);
  if (strip < 1) return -1;
  if (ember_conv_items(&p) <= 0) return 0; /* an empty output: nothing to launch */
#if EMBER_KV && EMBER_PAIRS_HERE
  if (ember_conv_pairs_apply(&p)) {
    p.flags &= ~EMBER_EPI_STREAM; /* the pair tiles store their own way */
    p.epi = ember_conv_epi_case(&p);
    /* no workspace (a C-runtime arena with no room): the 8-lane tiles */
    float* pw = (float*)TVMBackendAllocWorkspace(
        1, 0, (uint64_t)ember_conv_pair_floats(&p) * sizeof(float), 2, 32);
    int32_t rc = 0;
    if (pw != NULL) {
      ember_conv_pair_pack(&p, pw);
      p.pair_w = pw;
      if (threads) {
        rc = TVMBackendParallelLaunch(EMBER_FN(ember_conv_task), &p, 0);
      } else {
        EMBER_FN(ember_conv_range)(&p, 0, ember_conv_items(&p));
      }
      TVMBackendFreeWorkspace(1, 0, pw);
      return rc;
    }
  }
#endif
  if (threads) return TVMBackendParallelLaunch(EMBER_FN(ember_conv_task), &p, 0);
  EMBER_FN(ember_conv_range)(&p, 0, ember_conv_items(&p));
  if (p.flags & EMBER_EPI_STREAM) EMBER_STREAM_FENCE();
  return 0;
}
#endif

/*! \brief Depthwise conv2d in NCHW[L]c: weight [C/L][KH][KW][L], multiplier 1. */
#if EMBER_KERNEL_ALL || defined(EMBER_KOBJ_ember_depthwise_nchwc)
EMBER_KENTRY int32_t EMBER_FN(ember_depthwise_nchwc)(EMBER_DEPTHWISE_NCHWC_PARAMS) {
  ember_conv_p p;
  p.pf = NULL;
  p.pair_w = NULL;
  p.in = in; p.wt = w; p.bias = bias; p.res = res; p.out = out;
  p.n = n; p.icb = cblocks; p.icb_g = 1; p.cb = EMBER_L; p.h = h; p.w = wd;
  p.ocb = cblocks; p.ocb_g = 1; p.oh = oh; p.ow = ow;
  p.kh = kh; p.kw = kw; p.sh = sh; p.sw = sw; p.dh = dh; p.dw = dw; p.pt = pt; p.pl = pl;
  p.act = act; p.flags = flags & ~EMBER_EPI_STREAM; p.lo = lo; p.hi = hi;
  p.rb = 1; p.rw = 8; p.strip = strip; p.order = 0; p.depthwise = 1; p.groups = cblocks;
  p.wicb = 1; p.accum = 0; p.epi = ember_conv_epi_case(&p); p.icl = EMBER_L;
  if (strip < 1) return -1;
  if (ember_conv_items(&p) <= 0) return 0; /* an empty output: nothing to launch */
  if (threads) return TVMBackendParallelLaunch(EMBER_FN(ember_dw_task), &p, 0);
  EMBER_FN(ember_dw_range)(&p, 0, ember_conv_items(&p));
  return 0;
}
#endif

#undef EMBER_PAIRS_HERE
#undef EMBER_DW_TWO_ROWS
#undef EMBER_HALF_CB_1X1
#undef EMBER_FN
