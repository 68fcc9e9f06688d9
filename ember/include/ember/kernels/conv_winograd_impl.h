/*!
 * \file ember/kernels/conv_winograd_impl.h
 * \brief The Winograd conv kernel for one lane count: included by conv_winograd.h with EMBER_L
 *        set to 4, 8 and 16 (no include guard on purpose). Names end in _x<L>.
 */
#ifndef EMBER_L
#error "conv_winograd_impl.h is included by ember/kernels/conv_winograd.h only"
#endif

#ifndef EMBER_CAT
#define EMBER_CAT_(a, b) a##b
#define EMBER_CAT(a, b) EMBER_CAT_(a, b)
#endif
#define EMBER_WFN(name) EMBER_CAT(name, EMBER_CAT(_x, EMBER_L))

/* The GEMM's register tile: EMBER_WINO_RW tiles x EMBER_WINO_RB output blocks of
 * accumulators, plus RB weight vectors and a broadcast (AVX-512's 32 registers: 24 + 4 + 1;
 * 16 registers: 12 + 2 + 1, or 6 + 2 + 1 pairs of registers where a vector of L lanes takes
 * two). */
#if defined(__AVX512F__)
#define EMBER_WINO_RW 6
#define EMBER_WINO_RB 4
#elif EMBER_L == 16 || (EMBER_L == 8 && !defined(__AVX__))
#define EMBER_WINO_RW 3
#define EMBER_WINO_RB 2
#else
#define EMBER_WINO_RW 6
#define EMBER_WINO_RB 2
#endif

#if !EMBER_KV
/* v[xi * xs + l] (xi < a*a, l < L) = (B^T d B)[xi] of the a x a patch d of one input block's
 * plane whose top left is (y0, x0), zeros outside the image: lane by lane, in the order of
 * the vector path (ember_wino_vin4/6). */
static inline void EMBER_WFN(ember_wino_in)(const ember_wino_p* p, const float* plane,
                                            int32_t y0, int32_t x0, float* v, size_t xs) {
  float d[EMBER_WINO_MAX_A * EMBER_WINO_MAX_A], t[EMBER_WINO_MAX_A * EMBER_WINO_MAX_A];
  float col[EMBER_WINO_MAX_A], r[EMBER_WINO_MAX_A];
  const int32_t a = p->a;
  int32_t i, j, l;
  for (l = 0; l < EMBER_L; ++l) {
    for (i = 0; i < a; ++i) {
      for (j = 0; j < a; ++j) {
        const int32_t iy = y0 + i, ix = x0 + j;
        d[i * a + j] = iy >= 0 && iy < p->h && ix >= 0 && ix < p->w
                           ? plane[((size_t)iy * p->w + ix) * EMBER_L + l]
                           : 0.0f;
      }
    }
    for (j = 0; j < a; ++j) { /* t = B^T d, column by column */
      for (i = 0; i < a; ++i) col[i] = d[i * a + j];
      ember_wino_bt(a, r, col);
      for (i = 0; i < a; ++i) t[i * a + j] = r[i];
    }
    for (i = 0; i < a; ++i) { /* v = t B, row by row */
      ember_wino_bt(a, r, t + i * a);
      for (j = 0; j < a; ++j) v[(size_t)(i * a + j) * xs + l] = r[j];
    }
  }
}

/* The m x m outputs of tile (ty, tx) of output block ob of image b from mv[xi * xs + l]
 * (M = the GEMMs' products): A^T M A, bias, residual, activation, lane by lane; the rows and
 * columns past the output's edge are not stored. */
static inline void EMBER_WFN(ember_wino_out)(const ember_wino_p* p, const float* mv, size_t xs,
                                             int32_t b, int32_t ob, int32_t ty, int32_t tx) {
  float s[EMBER_WINO_MAX_A * EMBER_WINO_MAX_A], t[EMBER_WINO_MAX_A * EMBER_WINO_MAX_A];
  float col[EMBER_WINO_MAX_A], r[EMBER_WINO_MAX_A];
  const int32_t a = p->a, m = p->m, act = p->act, flags = p->flags;
  const int res_first = (flags & EMBER_EPI_ACT_AFTER_ADD) || !act;
  int32_t i, j, l;
  for (l = 0; l < EMBER_L; ++l) {
    const float bias = p->bias[(size_t)ob * EMBER_L + l];
    for (i = 0; i < a * a; ++i) s[i] = mv[(size_t)i * xs + l];
    for (j = 0; j < a; ++j) { /* t = A^T M, column by column */
      for (i = 0; i < a; ++i) col[i] = s[i * a + j];
      ember_wino_at(a, r, col);
      for (i = 0; i < m; ++i) t[i * a + j] = r[i];
    }
    for (i = 0; i < m && ty * m + i < p->oh; ++i) {
      const size_t row = (((size_t)b * p->ocb + ob) * p->oh + ty * m + i) * p->ow + tx * m;
      ember_wino_at(a, r, t + i * a);
      for (j = 0; j < m && tx * m + j < p->ow; ++j) {
        const size_t o = (row + j) * EMBER_L + l;
        float y = r[j] + bias;
        if (!(flags & EMBER_EPI_RESIDUAL)) {
          y = ember_act_scalar(y, act, p->lo, p->hi);
        } else if (res_first) {
          y = ember_act_scalar(y + p->res[o], act, p->lo, p->hi);
        } else {
          y = ember_act_scalar(y, act, p->lo, p->hi) + p->res[o];
        }
        p->out[o] = y;
      }
    }
  }
}
#endif /* !EMBER_KV */

#if EMBER_KV
#define EV EMBER_VT(EMBER_L)

/* conv_winograd.h's transforms on vectors (unrolled by GCC in the callers). */
static inline void EMBER_WFN(ember_wino_vbt)(int32_t a, EV* o, const EV* d) {
  EMBER_WINO_BT_BODY(EV, a, o, d)
}

static inline void EMBER_WFN(ember_wino_vat)(int32_t a, EV* o, const EV* s) {
  EMBER_WINO_AT_BODY(EV, a, o, s)
}

/* v[xi * xs + l] (xi < a*a, l < L) = (B^T d B)[xi] of the a x a patch d of one input block's
 * plane whose top left is (y0, x0), zeros outside the image; for a = 4 and 6 alike (a's
 * branches are resolved once per call by the two instantiations below). */
#define EMBER_WINO_VIN(A)                                                                      \
  EV d[A * A], t[A * A], col[A], r[A];                                                         \
  int32_t i, j;                                                                                \
  if (y0 >= 0 && x0 >= 0 && y0 + A <= p->h && x0 + A <= p->w) {                               \
    EMBER_KUNROLL for (i = 0; i < A; ++i) EMBER_KUNROLL for (j = 0; j < A; ++j)                \
        d[i * A + j] = EMBER_VLOAD(EMBER_L, plane + ((size_t)(y0 + i) * p->w + x0 + j) *       \
                                                      EMBER_L);                                \
  } else {                                                                                     \
    for (i = 0; i < A; ++i)                                                                    \
      for (j = 0; j < A; ++j) {                                                                \
        const int32_t iy = y0 + i, ix = x0 + j;                                                \
        d[i * A + j] = iy >= 0 && iy < p->h && ix >= 0 && ix < p->w                            \
            ? EMBER_VLOAD(EMBER_L, plane + ((size_t)iy * p->w + ix) * EMBER_L)                 \
            : EMBER_VZERO(EMBER_L);                                                            \
      }                                                                                        \
  }                                                                                            \
  EMBER_KUNROLL for (j = 0; j < A; ++j) { /* t = B^T d, column by column */                    \
    EMBER_KUNROLL for (i = 0; i < A; ++i) col[i] = d[i * A + j];                               \
    EMBER_WFN(ember_wino_vbt)(A, r, col);                                                      \
    EMBER_KUNROLL for (i = 0; i < A; ++i) t[i * A + j] = r[i];                                 \
  }                                                                                            \
  EMBER_KUNROLL for (i = 0; i < A; ++i) { /* v = t B, row by row */                            \
    EMBER_WFN(ember_wino_vbt)(A, r, t + i * A);                                                \
    EMBER_KUNROLL for (j = 0; j < A; ++j)                                                      \
        EMBER_VSTORE(EMBER_L, v + (size_t)(i * A + j) * xs, r[j]);                             \
  }

EMBER_KFN void EMBER_WFN(ember_wino_vin4)(const ember_wino_p* p, const float* plane, int32_t y0,
                                          int32_t x0, float* v, size_t xs) {
  EMBER_WINO_VIN(4)
}

EMBER_KFN void EMBER_WFN(ember_wino_vin6)(const ember_wino_p* p, const float* plane, int32_t y0,
                                          int32_t x0, float* v, size_t xs) {
  EMBER_WINO_VIN(6)
}
#undef EMBER_WINO_VIN

#include "ember/kernels/conv_epilogue_impl.h" /* ember_conv_store_with, _act_exp */

/* The stores of one output row r[0, nj) (bias added) at out_/res_ for the store case
 * ember_epi_store_case: its choices constants (conv_nchwc_impl.h's EMBER_CONV_STORE_RUN). */
#define EMBER_WINO_STORE_ROW(FIRST, CLAMP, LAST)                                               \
  for (j = 0; j < nj; ++j) {                                                                   \
    EV v = r[j];                                                                               \
    if (FIRST) v += EMBER_VLOAD(EMBER_L, res_ + j * EMBER_L);                                  \
    if (CLAMP) v = EMBER_VMAX(EMBER_L, v, vlo);                                                \
    if (CLAMP == 2) v = EMBER_VMIN(EMBER_L, v, vhi);                                           \
    if (LAST) v += EMBER_VLOAD(EMBER_L, res_ + j * EMBER_L);                                   \
    EMBER_VSTORE(EMBER_L, out_ + j * EMBER_L, v);                                              \
  }

/* The m x m outputs of tile (ty, tx) of output block ob of image b from mv[xi * xs + l]
 * (M = the GEMMs' products): A^T M A, bias, then the epilogue row by row; the rows and
 * columns past the output's edge are not stored. */
#define EMBER_WINO_VOUT(A)                                                                     \
  EV s[A * A], t[(A - 2) * A], col[A], r[A];                                                   \
  const EV bv = EMBER_VLOAD(EMBER_L, p->bias + (size_t)ob * EMBER_L);                          \
  const int32_t m = A - 2;                                                                     \
  int32_t i, j;                                                                                \
  const int32_t epi = p->epi, act = p->act, flags = p->flags;                                 \
  const float lo = p->lo, hi = p->hi;                                                          \
  const EV vlo = EMBER_VSPLAT(EMBER_L, (epi >> 1 & 3) == 2 ? lo : 0.0f);                      \
  const EV vhi = EMBER_VSPLAT(EMBER_L, hi);                                                    \
  const int32_t nj = p->ow - tx * m < m ? p->ow - tx * m : m;                                  \
  EMBER_KUNROLL for (i = 0; i < A * A; ++i) s[i] = EMBER_VLOAD(EMBER_L, mv + (size_t)i * xs);  \
  EMBER_KUNROLL for (j = 0; j < A; ++j) { /* t = A^T M, column by column */                    \
    EMBER_KUNROLL for (i = 0; i < A; ++i) col[i] = s[i * A + j];                               \
    EMBER_WFN(ember_wino_vat)(A, r, col);                                                      \
    EMBER_KUNROLL for (i = 0; i < m; ++i) t[i * A + j] = r[i];                                 \
  }                                                                                            \
  for (i = 0; i < m && ty * m + i < p->oh; ++i) {                                              \
    const size_t row = ((((size_t)b * p->ocb + ob) * p->oh + ty * m + i) * p->ow + tx * m) *   \
                       EMBER_L;                                                                \
    float* const out_ = p->out + row;                                                          \
    const float* const res_ = p->res + row;                                                    \
    EMBER_WFN(ember_wino_vat)(A, r, t + i * A);                                                \
    EMBER_KUNROLL for (j = 0; j < m; ++j) r[j] += bv;                                          \
    switch (epi) {                                                                             \
      case 0: EMBER_WINO_STORE_ROW(0, 0, 0) break;                                             \
      case 1: EMBER_WINO_STORE_ROW(1, 0, 0) break;                                             \
      case 2: EMBER_WINO_STORE_ROW(0, 1, 0) break;                                             \
      case 3: EMBER_WINO_STORE_ROW(1, 1, 0) break;                                             \
      case 4: EMBER_WINO_STORE_ROW(0, 2, 0) break;                                             \
      case 5: EMBER_WINO_STORE_ROW(1, 2, 0) break;                                             \
      case 10: EMBER_WINO_STORE_ROW(0, 1, 1) break;                                            \
      case 12: EMBER_WINO_STORE_ROW(0, 2, 1) break;                                            \
      default:                                                                                 \
        for (j = 0; j < nj; ++j)                                                               \
          EMBER_WFN(ember_conv_store_with)(act, flags, lo, hi, &r[j], out_ + j * EMBER_L,      \
                                           res_ + j * EMBER_L);                                \
    }                                                                                          \
    if (act >= EMBER_CONV_ACT_SIGMOID) EMBER_WFN(ember_conv_late_pass)(out_, res_, (size_t)nj * EMBER_L, act, p->flags, \
                                     p->lo, p->hi);      \
  }

EMBER_KFN void EMBER_WFN(ember_wino_vout4)(const ember_wino_p* p, const float* mv, size_t xs,
                                           int32_t b, int32_t ob, int32_t ty, int32_t tx) {
  EMBER_WINO_VOUT(4)
}

EMBER_KFN void EMBER_WFN(ember_wino_vout6)(const ember_wino_p* p, const float* mv, size_t xs,
                                           int32_t b, int32_t ob, int32_t ty, int32_t tx) {
  EMBER_WINO_VOUT(6)
}
#undef EMBER_WINO_VOUT
#undef EMBER_WINO_STORE_ROW
#undef EV
#endif /* EMBER_KV */

/* One work item with no workspace: tile by tile, each input transform used by up to
 * EMBER_WINO_SMALL_NB output blocks (the rest recompute it); a few KB of stack whatever the
 * channels. The products summed in the GEMM's order: the workspace path's bits. */
#define EMBER_WINO_SMALL_NB 4
EMBER_KFN void EMBER_WFN(ember_wino_item_small)(const ember_wino_p* p, int64_t item) {
  float v[EMBER_WINO_MAX_A * EMBER_WINO_MAX_A * EMBER_L];
  float mv[EMBER_WINO_SMALL_NB][EMBER_WINO_MAX_A * EMBER_WINO_MAX_A * EMBER_L];
  const int32_t aa = p->a * p->a;
  int32_t b, t0, cnt, ob0, nob, t, ob, nb, q, k, xi, c;
  ember_wino_where(p, item, &b, &t0, &cnt, &ob0, &nob);
  for (t = t0; t < t0 + cnt; ++t) {
    const int32_t ty = t / p->tw, tx = t % p->tw, y0 = ty * p->m - p->pt, x0 = tx * p->m - p->pl;
    for (ob = ob0; ob < ob0 + nob; ob += nb) {
      nb = ob0 + nob - ob < EMBER_WINO_SMALL_NB ? ob0 + nob - ob : EMBER_WINO_SMALL_NB;
      for (q = 0; q < nb; ++q)
        for (xi = 0; xi < aa * EMBER_L; ++xi) mv[q][xi] = 0.0f;
      for (k = 0; k < p->icb; ++k) {
        const float* plane = p->in + ((size_t)b * p->icb + k) * p->h * p->w * EMBER_L;
#if EMBER_KV
        if (p->a == 4) {
          EMBER_WFN(ember_wino_vin4)(p, plane, y0, x0, v, EMBER_L);
        } else {
          EMBER_WFN(ember_wino_vin6)(p, plane, y0, x0, v, EMBER_L);
        }
#else
        EMBER_WFN(ember_wino_in)(p, plane, y0, x0, v, EMBER_L);
#endif
        for (q = 0; q < nb; ++q) {
          for (xi = 0; xi < aa; ++xi) {
            const float* uk =
                p->u + (((size_t)xi * p->ocb + ob + q) * p->icb + k) * EMBER_L * EMBER_L;
            float* mq = mv[q] + xi * EMBER_L;
#if EMBER_KV
            EMBER_VT(EMBER_L) acc = EMBER_VLOAD(EMBER_L, mq);
            for (c = 0; c < EMBER_L; ++c)
              acc = EMBER_VFMA(EMBER_L, acc, EMBER_VBCAST(EMBER_L, v + xi * EMBER_L + c),
                               EMBER_VLOAD(EMBER_L, uk + c * EMBER_L));
            EMBER_VSTORE(EMBER_L, mq, acc);
#else
            int32_t l;
            for (c = 0; c < EMBER_L; ++c)
              for (l = 0; l < EMBER_L; ++l) mq[l] += v[xi * EMBER_L + c] * uk[c * EMBER_L + l];
#endif
          }
        }
      }
      for (q = 0; q < nb; ++q) {
#if EMBER_KV
        if (p->a == 4) {
          EMBER_WFN(ember_wino_vout4)(p, mv[q], EMBER_L, b, ob + q, ty, tx);
        } else {
          EMBER_WFN(ember_wino_vout6)(p, mv[q], EMBER_L, b, ob + q, ty, tx);
        }
#else
        EMBER_WFN(ember_wino_out)(p, mv[q], EMBER_L, b, ob + q, ty, tx);
#endif
      }
    }
  }
}
#undef EMBER_WINO_SMALL_NB

#if EMBER_KV
#define EV EMBER_VT(EMBER_L)

/* The GEMM register tile: RW tiles x RB output blocks, summed over all input channels. v:
 * V[xi][0][t0] (input block k at v + k * vs), u: U[xi][ob0] (block j at u + j * us, us =
 * icb * L * L), mo: M[xi][j][t0] at mo + j * vs (V's and M's rows are both vs floats). The
 * step over one input channel is conv_nchwc_impl.h's EMBER_TILE_STEP_COLS with the
 * accumulators indexed [block][tile]. */
#define EMBER_WINO_GEMM_BODY(RW, RB)                                                           \
  EV acc[RB][RW];                                                                              \
  const size_t us = (size_t)icb * EMBER_L * EMBER_L;                                           \
  int32_t i, j, c, k;                                                                          \
  EMBER_KUNROLL for (j = 0; j < RB; ++j) EMBER_KUNROLL for (i = 0; i < RW; ++i)                \
      acc[j][i] = EMBER_VZERO(EMBER_L);                                                        \
  for (k = 0; k < icb; ++k) {                                                                  \
    const float* vk = v + (size_t)k * vs;                                                      \
    const float* uk = u + (size_t)k * EMBER_L * EMBER_L;                                       \
    for (c = 0; c < EMBER_L; ++c) {                                                            \
      EV w[RB];                                                                                \
      EMBER_KUNROLL for (j = 0; j < RB; ++j) {                                                 \
        w[j] = EMBER_VLOAD_REG(EMBER_L, uk + j * us + c * EMBER_L);                            \
        EMBER_VPIN(EMBER_L, w[j]);                                                             \
      }                                                                                        \
      EMBER_KUNROLL for (i = 0; i < RW; ++i) {                                                 \
        const EV x = EMBER_VBCAST(EMBER_L, vk + i * EMBER_L + c);                              \
        EMBER_KUNROLL for (j = 0; j < RB; ++j)                                                 \
            acc[j][i] = EMBER_VFMA(EMBER_L, acc[j][i], x, w[j]);                               \
      }                                                                                        \
    }                                                                                          \
  }                                                                                            \
  EMBER_KUNROLL for (j = 0; j < RB; ++j) EMBER_KUNROLL for (i = 0; i < RW; ++i)                \
      EMBER_VSTORE(EMBER_L, mo + j * vs + i * EMBER_L, acc[j][i]);

EMBER_KFN void EMBER_WFN(ember_wino_gemm_wide)(const float* v, const float* u, float* mo,
                                               int32_t icb, size_t vs) {
  EMBER_WINO_GEMM_BODY(EMBER_WINO_RW, EMBER_WINO_RB)
}

EMBER_KFN void EMBER_WFN(ember_wino_gemm_one)(const float* v, const float* u, float* mo,
                                              int32_t icb, size_t vs) {
  EMBER_WINO_GEMM_BODY(EMBER_WINO_RW, 1)
}
#undef EMBER_WINO_GEMM_BODY
#undef EV

/* The tiles of an item rounded up to whole register tiles. */
static inline int32_t EMBER_WFN(ember_wino_padded)(int32_t tiles) {
  return (tiles + EMBER_WINO_RW - 1) / EMBER_WINO_RW * EMBER_WINO_RW;
}

/* The floats of one task's workspace: V [a*a][IC/L][T][L] and M [a*a][blocks][T][L]. */
static inline size_t EMBER_WFN(ember_wino_ws_floats)(const ember_wino_p* p) {
  return (size_t)p->a * p->a * EMBER_WFN(ember_wino_padded)(p->tiles) * EMBER_L *
         ((size_t)p->icb + p->blocks);
}

/* One work item in the workspace ws: (a) input transforms, (b) a*a GEMMs, (c) outputs. */
EMBER_KFN void EMBER_WFN(ember_wino_item)(const ember_wino_p* p, int64_t item, float* ws) {
  const int32_t aa = p->a * p->a;
  int32_t b, t0, cnt, ob0, nob, tp, t, k, xi, j;
  size_t vx, mx, us = (size_t)p->icb * EMBER_L * EMBER_L;
  float *V, *M;
  ember_wino_where(p, item, &b, &t0, &cnt, &ob0, &nob);
  tp = EMBER_WFN(ember_wino_padded)(cnt);
  vx = (size_t)p->icb * tp * EMBER_L; /* V's and M's stride between transform points */
  mx = (size_t)nob * tp * EMBER_L;
  V = ws;
  M = ws + aa * vx;
  for (k = 0; k < p->icb; ++k) {
    const float* plane = p->in + ((size_t)b * p->icb + k) * p->h * p->w * EMBER_L;
    for (t = 0; t < cnt; ++t) {
      const int32_t ty = (t0 + t) / p->tw, tx = (t0 + t) % p->tw;
      float* vt = V + ((size_t)k * tp + t) * EMBER_L;
      if (p->a == 4) {
        EMBER_WFN(ember_wino_vin4)(p, plane, ty * p->m - p->pt, tx * p->m - p->pl, vt, vx);
      } else {
        EMBER_WFN(ember_wino_vin6)(p, plane, ty * p->m - p->pt, tx * p->m - p->pl, vt, vx);
      }
    }
    for (xi = 0; xi < aa; ++xi) /* the padding tiles of the last register tile: zeros */
      for (t = cnt * EMBER_L; t < tp * EMBER_L; ++t) V[xi * vx + (size_t)k * tp * EMBER_L + t] = 0;
  }
  for (xi = 0; xi < aa; ++xi) {
    const float* vxi = V + xi * vx;
    const float* uxi = p->u + ((size_t)xi * p->ocb + ob0) * us;
    float* mxi = M + xi * mx;
    for (j = 0; j < nob;) {
      const int wide = nob - j >= EMBER_WINO_RB;
      for (t = 0; t < tp; t += EMBER_WINO_RW) {
        const size_t ts = (size_t)t * EMBER_L, rs = (size_t)tp * EMBER_L;
        if (wide) {
          EMBER_WFN(ember_wino_gemm_wide)(vxi + ts, uxi + j * us, mxi + j * rs + ts, p->icb, rs);
        } else {
          EMBER_WFN(ember_wino_gemm_one)(vxi + ts, uxi + j * us, mxi + j * rs + ts, p->icb, rs);
        }
      }
      j += wide ? EMBER_WINO_RB : 1;
    }
  }
  for (j = 0; j < nob; ++j) {
    for (t = 0; t < cnt; ++t) {
      const float* mt = M + ((size_t)j * tp + t) * EMBER_L;
      const int32_t ty = (t0 + t) / p->tw, tx = (t0 + t) % p->tw;
      if (p->a == 4) {
        EMBER_WFN(ember_wino_vout4)(p, mt, mx, b, ob0 + j, ty, tx);
      } else {
        EMBER_WFN(ember_wino_vout6)(p, mt, mx, b, ob0 + j, ty, tx);
      }
    }
  }
}
#endif /* EMBER_KV */

/* Items [lo, hi): in one workspace buffer, or with none (the portable build, or no room)
 * tile by tile. */
EMBER_KFN int EMBER_WFN(ember_wino_run)(const ember_wino_p* p, int64_t lo, int64_t hi) {
  int64_t item;
  if (lo >= hi) return 0;
#if EMBER_KV
  {
    float* ws = (float*)TVMBackendAllocWorkspace(
        1, 0, (uint64_t)EMBER_WFN(ember_wino_ws_floats)(p) * sizeof(float), 2, 32);
    if (ws != NULL) {
      for (item = lo; item < hi; ++item) EMBER_WFN(ember_wino_item)(p, item, ws);
      return TVMBackendFreeWorkspace(1, 0, ws) == 0 ? 0 : -1;
    }
  }
#endif
  for (item = lo; item < hi; ++item) EMBER_WFN(ember_wino_item_small)(p, item);
  return 0;
}

/* Task task_id's equal share of the items (they differ only in a last short chunk or range),
 * the items cut finer first where they are too few to keep `tasks` busy (ember_wino_share). */
EMBER_KFN int EMBER_WFN(ember_wino_task)(int task_id, TVMParallelGroupEnv* penv, void* cdata) {
  ember_wino_p q = *(const ember_wino_p*)cdata;
  const int64_t tasks = penv->num_task > 0 ? penv->num_task : 1;
  int64_t items;
  ember_wino_share(&q, tasks, EMBER_WINO_RW);
  items = ember_wino_items(&q);
  return EMBER_WFN(ember_wino_run)(&q, items * task_id / tasks, items * (task_id + 1) / tasks);
}

/*!
 * \brief 3x3 stride-1 conv2d by F(m x m, 3x3) in NCHW[L]c (layouts: conv_winograd.h). `res`
 *        is read only when `flags` has EMBER_EPI_RESIDUAL. Returns -1 for an m other than 2
 *        or 4, a non-positive tile or block count, or a failed launch or workspace free.
 */
#if EMBER_KERNEL_ALL || defined(EMBER_KOBJ_ember_conv_winograd)
EMBER_KENTRY int32_t EMBER_WFN(ember_conv_winograd)(EMBER_CONV_WINOGRAD_PARAMS) {
  ember_wino_p p;
  if ((m != 2 && m != 4) || tiles < 1 || blocks < 1) return -1;
  p.in = in; p.u = u; p.bias = bias; p.res = res; p.out = out;
  p.n = n; p.icb = icb; p.h = h; p.w = wd; p.ocb = ocb; p.oh = oh; p.ow = ow;
  p.pt = pt; p.pl = pl; p.m = m; p.a = m + 2;
  p.th = (oh + m - 1) / m; p.tw = (ow + m - 1) / m;
  /* no item wider than the map (sizes the workspace; a caller's huge count cannot overflow) */
  p.tiles = tiles < p.th * p.tw ? tiles : (p.th * p.tw > 0 ? p.th * p.tw : 1);
  p.blocks = blocks < ocb ? blocks : (ocb > 0 ? ocb : 1);
  p.chunks = (p.th * p.tw + p.tiles - 1) / p.tiles;
  p.ranges = (ocb + p.blocks - 1) / p.blocks;
  p.act = act; p.lo = lo; p.hi = hi;
  p.flags = flags & ~EMBER_EPI_STREAM; /* plain stores: each row is read back by a late act */
  p.epi = ember_epi_store_case(act, p.flags);
  if (ember_wino_items(&p) <= 0) return 0;
  if (threads) return TVMBackendParallelLaunch(EMBER_WFN(ember_wino_task), &p, 0);
  return EMBER_WFN(ember_wino_run)(&p, 0, ember_wino_items(&p));
}
#endif

#undef EMBER_WINO_RW
#undef EMBER_WINO_RB
#undef EMBER_WFN
