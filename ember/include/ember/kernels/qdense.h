/*
 * ember kernels: int8 matrix product with a constant right operand, the kernel of
 * nn.contrib_qdense (ONNX MatMulInteger, as quantize_dynamic writes transformers' linear
 * layers):
 *
 *   y[m, n] = sum_k u[m, k] * w[n, k] - zp * colsum[n]      (int32, exact)
 *
 * u is the left operand a (M, K) as u8 (an s8 operand has 128 added, a_signed), zp its zero
 * point in that u8 view (read from memory: DynamicQuantizeLinear computes it at run time), w
 * the weight minus its zero point as int8, prepacked at build time as (ceil(N / 16), k4, 16, 4)
 * (columns in blocks of 16, k in quads, zeros past N and K), and colsum[n] = sum_k w[n, k]
 * (build time). Columns run along the vector lanes: a tile is EMBER_QDENSE_MR rows x
 * EMBER_QDENSE_NB vectors of columns; each row's four k bytes are broadcast (vpdpbusd with
 * VNNI, vpmaddwd on int16 pairs otherwise; qsimd.h). Work items (blocks of rows x blocks of
 * columns) are split over TVMBackendParallelLaunch tasks when `parallel`. Returns 0, or -1 when
 * a workspace or the parallel launch fails.
 *
 * AVX2 (EMBER_QDENSE_WIDE) has no exact 4-byte dot product (vpmaddubsw's int16 pair sums
 * saturate), so its products are vpmaddwd on int16: a tile's rows are widened once to int16
 * (the flip applied) into a per-task workspace, a quad of k of four columns is one vpmovsxbw of
 * 16 packed weight bytes, and each row's quad is one 64-bit broadcast from the workspace.
 * A lane then holds half a column's sum (k pairs 0-1 or 2-3), the halves are added at the end.
 * Two multiplies per 32 products (as onnxruntime's vpmaddubsw + vpmaddwd on AVX2), with no
 * shifts or masks per step: about twice the throughput of unpacking bytes into pairs.
 */
#ifndef EMBER_KERNELS_QDENSE_H_
#define EMBER_KERNELS_QDENSE_H_

#include <stdint.h>

#include "ember/kernels/linkage.h"

/* The entry point (linkage and where its body comes from: ember/kernels/linkage.h). */
#define EMBER_QDENSE_PARAMS                                                                    \
  const void *a, const int8_t *w, const int32_t *colsum, const void *a_zp, int32_t *y,        \
      int64_t m, int64_t n, int64_t k, int32_t a_signed, int32_t parallel
EMBER_KENTRY int32_t ember_qdense(EMBER_QDENSE_PARAMS);

#if EMBER_KERNEL_BODIES
#include "ember/c_backend_api.h"
#include "ember/kernels/qsimd.h"

#if defined(EMBER_Q_PAIRS) && EMBER_QL == 8
#define EMBER_QDENSE_WIDE 1
#define EMBER_QDENSE_MR 6 /* rows per tile: 12 accumulators, 2 weight vectors, 1 broadcast */
#else
#define EMBER_QDENSE_MR 4 /* rows per register tile */
#endif
#if defined(EMBER_Q_VNNI)
#define EMBER_QDENSE_NB 4 /* column vectors per tile: 4 x 4 accumulators, 64 columns */
#else
#define EMBER_QDENSE_NB 2
#endif
#define EMBER_QDENSE_NW 16 /* columns per packed block */
#define EMBER_QDENSE_ROWS 64 /* rows per work item */
#define EMBER_QDENSE_COLS 64 /* columns per work item: whole packed blocks */

typedef struct {
  const uint8_t* a;
  const int8_t* w;
  const int32_t* colsum;
  int32_t* y;
  int64_t m, n, k, k4, rblocks, cblocks;
  int32_t zp, flip;
} ember_qdense_args;

/* The four k bytes of quad q of row r (u8 view), as one word; the last quad of a row whose
 * K is not a multiple of 4 is read byte by byte (zeros past K: the weights there are 0). */
static inline int32_t ember_qdense_word(const ember_qdense_args* p, const uint8_t* row,
                                        int64_t q) {
  uint32_t word = 0;
  if (q * 4 + 4 <= p->k) {
    memcpy(&word, row + q * 4, 4);
    word ^= (uint32_t)p->flip;
  } else {
    int64_t j;
    for (j = 0; q * 4 + j < p->k; ++j) {
      word |= (uint32_t)(row[q * 4 + j] ^ (p->flip & 0xFF)) << (8 * j);
    }
  }
  return (int32_t)word;
}

#if defined(EMBER_Q_VECTOR_EXT)
/* acc += quad q's products: the rows' words bw (broadcast), the weight vectors at wq[v]. */
static inline __attribute__((always_inline)) void ember_qdense_step(
    const ember_qvi bw[EMBER_QDENSE_MR], const int8_t* const wq[EMBER_QDENSE_NB], int64_t off,
    const int nb, const int mr, ember_qvi acc[EMBER_QDENSE_MR][EMBER_QDENSE_NB]) {
  ember_qvi wv[EMBER_QDENSE_NB];
  int r, v;
  for (v = 0; v < nb; ++v) {
    wv[v] = ember_qload(wq[v] + off);
#if defined(EMBER_Q_VNNI) /* in a register: GCC would fold the load into every vpdpbusd */
    __asm__("" : "+v"(wv[v]));
#endif
  }
#if defined(EMBER_Q_PAIRS)
  {
    ember_qvi w02[EMBER_QDENSE_NB], w13[EMBER_QDENSE_NB];
    for (v = 0; v < nb; ++v) { /* the s8 bytes as int16 pairs: (b0, b2), (b1, b3) */
      const ember_qvi lo = (wv[v] << 24) >> 24, b1 = (wv[v] << 16) >> 24;
      const ember_qvi b2 = (wv[v] << 8) >> 24, hi = wv[v] >> 24;
      w02[v] = (lo & 0xFFFF) | (b2 << 16);
      w13[v] = (b1 & 0xFFFF) | (hi << 16);
    }
    for (r = 0; r < mr; ++r) {
      const ember_qvi a02 = bw[r] & 0x00FF00FF, a13 = (bw[r] >> 8) & 0x00FF00FF;
      for (v = 0; v < nb; ++v) {
        acc[r][v] += EMBER_QMADD(a02, w02[v]) + EMBER_QMADD(a13, w13[v]);
      }
    }
  }
#else
  for (r = 0; r < mr; ++r) {
    for (v = 0; v < nb; ++v) acc[r][v] = EMBER_QDOT4(acc[r][v], bw[r], wv[v]);
  }
#endif
}

/* Rows r0 .. r0 + rows - 1 x nb column vectors from column c0 (a multiple of EMBER_QL). All
 * mr rows are computed (a short tile repeats row r0): constant counts keep acc in registers;
 * mr is EMBER_QDENSE_MR, or 1 for a single row. */
static inline __attribute__((always_inline)) void ember_qdense_tile(
    const ember_qdense_args* p, int64_t r0, int rows, int64_t c0, const int nb, const int mr) {
  ember_qvi acc[EMBER_QDENSE_MR][EMBER_QDENSE_NB], bw[EMBER_QDENSE_MR];
  ember_qvi flip = ember_qset1(p->flip);
  const uint8_t* arow[EMBER_QDENSE_MR];
  const int8_t* wq[EMBER_QDENSE_NB];
  const int64_t full = p->k / 4;
  int64_t q;
  int r, v;
  for (v = 0; v < nb; ++v) { /* column c: packed block c / 16, lane c % 16 */
    const int64_t c = c0 + v * EMBER_QL;
    wq[v] = p->w + (c / EMBER_QDENSE_NW) * p->k4 * 64 + (c % EMBER_QDENSE_NW) * 4;
  }
#if defined(EMBER_Q_VNNI) /* opaque: GCC would xor the words in a GPR and broadcast that */
  __asm__("" : "+v"(flip));
#endif
  for (r = 0; r < mr; ++r) {
    arow[r] = p->a + (r0 + (r < rows ? r : 0)) * p->k;
    for (v = 0; v < nb; ++v) acc[r][v] = ember_qset1(0);
  }
  for (q = 0; q < full; ++q) {
    for (r = 0; r < mr; ++r) { /* a broadcast from memory (a load), the flip in vectors */
      int32_t word;
      memcpy(&word, arow[r] + q * 4, 4);
      bw[r] = ember_qset1(word) ^ flip;
    }
    ember_qdense_step(bw, wq, q * 64, nb, mr, acc);
  }
  if (full < p->k4) { /* the last quad of a K not a multiple of 4 */
    for (r = 0; r < mr; ++r) bw[r] = ember_qset1(ember_qdense_word(p, arow[r], q));
    ember_qdense_step(bw, wq, q * 64, nb, mr, acc);
  }
  for (v = 0; v < nb; ++v) { /* minus zp * colsum: one vector per column vector */
    const int64_t c = c0 + v * EMBER_QL, left = p->n - c;
    ember_qvi zc;
    if (left <= 0) break;
    if (left >= EMBER_QL) {
      zc = ember_qload(p->colsum + c) * p->zp;
      for (r = 0; r < rows; ++r) {
        const ember_qvi s = acc[r][v] - zc;
        memcpy(p->y + (r0 + r) * p->n + c, &s, sizeof(s));
      }
    } else {
      int32_t cs[EMBER_QL] = {0};
      memcpy(cs, p->colsum + c, (size_t)left * 4);
      zc = ember_qload(cs) * p->zp;
      for (r = 0; r < rows; ++r) {
        const ember_qvi s = acc[r][v] - zc;
        memcpy(p->y + (r0 + r) * p->n + c, &s, (size_t)left * 4);
      }
    }
  }
}
#endif

#if defined(EMBER_QDENSE_WIDE)
typedef char ember_qd_b16_u __attribute__((vector_size(16), aligned(1), may_alias)); /* x86: signed */
typedef uint8_t ember_qd_ub16_u __attribute__((vector_size(16), aligned(1), may_alias));
typedef int16_t ember_qd_h16 __attribute__((vector_size(32)));
typedef int16_t ember_qd_h16_u __attribute__((vector_size(32), aligned(1), may_alias));
typedef int64_t ember_qd_q4 __attribute__((vector_size(32)));
/* 16 s8 (u8) -> 16 int16: vpmovsxbw (vpmovzxbw); GCC's generic conversion takes two halves
 * and an insert */
#if defined(__clang__)
#define EMBER_QDENSE_SXBW(b) __builtin_convertvector((b), ember_qd_h16)
#define EMBER_QDENSE_ZXBW(b) __builtin_convertvector((b), ember_qd_h16)
#else
#define EMBER_QDENSE_SXBW(b) ((ember_qd_h16)__builtin_ia32_pmovsxbw256((b)))
#define EMBER_QDENSE_ZXBW(b) ((ember_qd_h16)__builtin_ia32_pmovzxbw256((ember_qd_b16_u)(b)))
#endif
#define EMBER_QDENSE_WCOLS 4 /* columns per weight vector: 4 x (4 k as int16) */

/* Row r of a (u8 view, the flip applied) as int16 into dst, zeros up to k4 * 4. */
static void ember_qdense_widen(const ember_qdense_args* p, const uint8_t* row, int16_t* dst) {
  const ember_qd_ub16_u flip = (ember_qd_ub16_u){0} + (uint8_t)(p->flip & 0xFF);
  int64_t j = 0;
  for (; j + 16 <= p->k; j += 16) {
    const ember_qd_ub16_u b = *(const ember_qd_ub16_u*)(row + j) ^ flip;
    *(ember_qd_h16_u*)(dst + j) = EMBER_QDENSE_ZXBW(b);
  }
  for (; j < p->k; ++j) dst[j] = (int16_t)(row[j] ^ (p->flip & 0xFF));
  for (; j < p->k4 * 4; ++j) dst[j] = 0;
}

/* The sums of column vectors 2 v and 2 v + 1 (half sums in lane pairs) in column order. */
static inline ember_qvi ember_qdense_halves(ember_qvi x, ember_qvi y) {
#if defined(__clang__)
  return __builtin_shufflevector(x, y, 0, 2, 4, 6, 8, 10, 12, 14) +
         __builtin_shufflevector(x, y, 1, 3, 5, 7, 9, 11, 13, 15);
#else
  return __builtin_shuffle(x, y, (ember_qvi){0, 2, 4, 6, 8, 10, 12, 14}) +
         __builtin_shuffle(x, y, (ember_qvi){1, 3, 5, 7, 9, 11, 13, 15});
#endif
}

/* Rows r0 .. r0 + rows - 1 (widened: arow[r]) x nb weight vectors (4 columns each) from
 * column c0. All mr rows are computed (a short tile's extra rows repeat its first). */
static inline __attribute__((always_inline)) void ember_qdense_wide_tile(
    const ember_qdense_args* p, const int16_t* const arow[EMBER_QDENSE_MR], int64_t r0,
    int rows, int64_t c0, const int nb, const int mr) {
  ember_qvi acc[EMBER_QDENSE_MR][EMBER_QDENSE_NB];
  const int8_t* wq[EMBER_QDENSE_NB];
  int64_t q;
  int r, v;
  for (v = 0; v < nb; ++v) { /* column c: packed block c / 16, lane c % 16 */
    const int64_t c = c0 + v * EMBER_QDENSE_WCOLS;
    wq[v] = p->w + (c / EMBER_QDENSE_NW) * p->k4 * 64 + (c % EMBER_QDENSE_NW) * 4;
  }
  for (r = 0; r < mr; ++r) {
    for (v = 0; v < nb; ++v) acc[r][v] = ember_qset1(0);
  }
  for (q = 0; q < p->k4; ++q) {
    ember_qvi wv[EMBER_QDENSE_NB];
    for (v = 0; v < nb; ++v) { /* vpmovsxbw from memory */
      wv[v] = (ember_qvi)EMBER_QDENSE_SXBW(*(const ember_qd_b16_u*)(wq[v] + q * 64));
    }
    for (r = 0; r < mr; ++r) {
      int64_t quad;
      ember_qvi bq;
      memcpy(&quad, arow[r] + q * 4, 8);
      bq = (ember_qvi)((ember_qd_q4){0} + quad); /* vpbroadcastq from memory */
      for (v = 0; v < nb; ++v) acc[r][v] += EMBER_QMADD(bq, wv[v]);
    }
  }
  { /* minus zp * colsum, 8 columns (or what is left of them) per row */
    const int64_t left = p->n - c0;
    int32_t cs[8] = {0};
    ember_qvi zc;
    memcpy(cs, p->colsum + c0, (size_t)(left < 8 ? left : 8) * 4);
    zc = ember_qload(cs) * p->zp;
    for (r = 0; r < rows; ++r) {
      const ember_qvi s = ember_qdense_halves(acc[r][0], nb > 1 ? acc[r][1] : acc[r][0]) - zc;
      if (left >= 8) {
        memcpy(p->y + (r0 + r) * p->n + c0, &s, sizeof(s));
      } else {
        memcpy(p->y + (r0 + r) * p->n + c0, &s, (size_t)left * 4);
      }
    }
  }
}

/* One item on the widened rows: per tile of rows, the rows widened into abuf once, then every
 * column tile of the item. */
static void ember_qdense_wide_item(const ember_qdense_args* p, int64_t item, int16_t* abuf) {
  const int64_t rb = item / p->cblocks, cb = item % p->cblocks, stride = p->k4 * 4;
  const int64_t r_end = (rb + 1) * EMBER_QDENSE_ROWS < p->m ? (rb + 1) * EMBER_QDENSE_ROWS : p->m;
  const int64_t c_end = (cb + 1) * EMBER_QDENSE_COLS < p->n ? (cb + 1) * EMBER_QDENSE_COLS : p->n;
  const int64_t tile_cols = EMBER_QDENSE_NB * EMBER_QDENSE_WCOLS;
  const int16_t* arow[EMBER_QDENSE_MR];
  int64_t r0, c0;
  int r;
  for (r0 = rb * EMBER_QDENSE_ROWS; r0 < r_end; r0 += EMBER_QDENSE_MR) {
    const int rows = (int)(r_end - r0 < EMBER_QDENSE_MR ? r_end - r0 : EMBER_QDENSE_MR);
    for (r = 0; r < EMBER_QDENSE_MR; ++r) {
      if (r < rows) ember_qdense_widen(p, p->a + (r0 + r) * p->k, abuf + r * stride);
      arow[r] = abuf + (r < rows ? r : 0) * stride;
    }
    for (c0 = cb * EMBER_QDENSE_COLS; c0 < c_end; c0 += tile_cols) {
      const int nb = c_end - c0 > EMBER_QDENSE_WCOLS ? 2 : 1;
      if (rows == 1) { /* one row (a classifier's): not MR rows' products for one */
        if (nb == 2) ember_qdense_wide_tile(p, arow, r0, 1, c0, 2, 1);
        else ember_qdense_wide_tile(p, arow, r0, 1, c0, 1, 1);
      } else if (rows <= 4) {
        if (nb == 2) ember_qdense_wide_tile(p, arow, r0, rows, c0, 2, 4);
        else ember_qdense_wide_tile(p, arow, r0, rows, c0, 1, 4);
      } else if (nb == 2) {
        ember_qdense_wide_tile(p, arow, r0, rows, c0, 2, EMBER_QDENSE_MR);
      } else {
        ember_qdense_wide_tile(p, arow, r0, rows, c0, 1, EMBER_QDENSE_MR);
      }
    }
  }
}
#endif

/* One item: rows [rb * ROWS, ...) x columns [cb * COLS, ...) (with EMBER_QDENSE_WIDE, the
 * path of a task that got no workspace for its widened rows: a C runtime's arena without room). */
static void ember_qdense_item(const ember_qdense_args* p, int64_t item) {
  const int64_t rb = item / p->cblocks, cb = item % p->cblocks;
  const int64_t r_end = (rb + 1) * EMBER_QDENSE_ROWS < p->m ? (rb + 1) * EMBER_QDENSE_ROWS : p->m;
  const int64_t c_end = (cb + 1) * EMBER_QDENSE_COLS < p->n ? (cb + 1) * EMBER_QDENSE_COLS : p->n;
  int64_t r0, c0;
#if defined(EMBER_Q_VECTOR_EXT)
  const int64_t tile_cols = EMBER_QDENSE_NB * EMBER_QL;
  for (c0 = cb * EMBER_QDENSE_COLS; c0 < c_end; c0 += tile_cols) {
    const int64_t vecs = (c_end - c0 + EMBER_QL - 1) / EMBER_QL;
    const int nb = (int)(vecs < EMBER_QDENSE_NB ? vecs : EMBER_QDENSE_NB);
    for (r0 = rb * EMBER_QDENSE_ROWS; r0 < r_end; r0 += EMBER_QDENSE_MR) {
      const int rows = (int)(r_end - r0 < EMBER_QDENSE_MR ? r_end - r0 : EMBER_QDENSE_MR);
      if (rows == 1) { /* one row (a classifier's): not MR rows' products for one */
        switch (nb) {
#if EMBER_QDENSE_NB == 4
          case 4: ember_qdense_tile(p, r0, 1, c0, 4, 1); break;
          case 3: ember_qdense_tile(p, r0, 1, c0, 3, 1); break;
#endif
          case 2: ember_qdense_tile(p, r0, 1, c0, 2, 1); break;
          default: ember_qdense_tile(p, r0, 1, c0, 1, 1); break;
        }
        continue;
      }
      switch (nb) { /* constant widths: the accumulators stay in registers */
#if EMBER_QDENSE_NB == 4
        case 4: ember_qdense_tile(p, r0, rows, c0, 4, EMBER_QDENSE_MR); break;
        case 3: ember_qdense_tile(p, r0, rows, c0, 3, EMBER_QDENSE_MR); break;
#endif
        case 2: ember_qdense_tile(p, r0, rows, c0, 2, EMBER_QDENSE_MR); break;
        default: ember_qdense_tile(p, r0, rows, c0, 1, EMBER_QDENSE_MR); break;
      }
    }
  }
#else
  for (r0 = rb * EMBER_QDENSE_ROWS; r0 < r_end; ++r0) {
    const uint8_t* row = p->a + r0 * p->k;
    for (c0 = cb * EMBER_QDENSE_COLS; c0 < c_end; ++c0) {
      const int8_t* wc = p->w + (c0 / EMBER_QDENSE_NW) * p->k4 * 64 + (c0 % EMBER_QDENSE_NW) * 4;
      int32_t s = 0;
      int64_t q;
      int j;
      for (q = 0; q < p->k4; ++q) {
        const uint32_t word = (uint32_t)ember_qdense_word(p, row, q);
        for (j = 0; j < 4; ++j) s += (int32_t)((word >> (8 * j)) & 0xFF) * wc[q * 64 + j];
      }
      p->y[r0 * p->n + c0] = s - p->zp * p->colsum[c0];
    }
  }
#endif
}

/* Items [begin, end); -1 when freeing the widened rows' workspace fails. */
static int ember_qdense_items(const ember_qdense_args* p, int64_t begin, int64_t end) {
  int64_t item;
#if defined(EMBER_QDENSE_WIDE)
  int16_t* abuf = (int16_t*)TVMBackendAllocWorkspace(
      1, 0, (uint64_t)EMBER_QDENSE_MR * (uint64_t)p->k4 * 4 * sizeof(int16_t), 0, 16);
  if (abuf == NULL) { /* no workspace: the byte-pair tiles, which need none */
    for (item = begin; item < end; ++item) ember_qdense_item(p, item);
    return 0;
  }
  for (item = begin; item < end; ++item) ember_qdense_wide_item(p, item, abuf);
  return TVMBackendFreeWorkspace(1, 0, abuf) == 0 ? 0 : -1;
#else
  for (item = begin; item < end; ++item) ember_qdense_item(p, item);
  return 0;
#endif
}

static inline int ember_qdense_task(int task_id, TVMParallelGroupEnv* penv, void* cdata) {
  const ember_qdense_args* p = (const ember_qdense_args*)cdata;
  const int64_t items = p->rblocks * p->cblocks, tasks = penv->num_task;
  return ember_qdense_items(p, items * task_id / tasks, items * (task_id + 1) / tasks);
}

/* See the top of this file; a_zp is one value of a's type (NULL: 0). */
#if EMBER_KERNEL_ALL || defined(EMBER_KOBJ_ember_qdense)
EMBER_KENTRY int32_t ember_qdense(EMBER_QDENSE_PARAMS) {
  ember_qdense_args p;
  p.a = (const uint8_t*)a; p.w = w; p.colsum = colsum; p.y = y;
  p.m = m; p.n = n; p.k = k; p.k4 = (k + 3) / 4;
  p.rblocks = (m + EMBER_QDENSE_ROWS - 1) / EMBER_QDENSE_ROWS;
  p.cblocks = (n + EMBER_QDENSE_COLS - 1) / EMBER_QDENSE_COLS;
  p.flip = a_signed ? (int32_t)0x80808080u : 0;
  p.zp = a_zp == NULL ? 0
         : a_signed ? (int32_t)*(const int8_t*)a_zp + 128 : (int32_t)*(const uint8_t*)a_zp;
  if (a_zp == NULL && a_signed) p.zp = 128;
  if (m <= 0 || n <= 0) return 0;
  if (parallel && p.rblocks * p.cblocks > 1) {
    return TVMBackendParallelLaunch(ember_qdense_task, &p, 0) == 0 ? 0 : -1;
  }
  return ember_qdense_items(&p, 0, p.rblocks * p.cblocks);
}
#endif
#endif /* EMBER_KERNEL_BODIES */

#endif /* EMBER_KERNELS_QDENSE_H_ */
