/*
 * ember kernels: single-precision GEMM with a fused epilogue,
 *
 *   C[b, m, n] = epilogue(sum_k A[b, m, k] * B[b, k, n])      (see gemm_epilogue.h)
 *
 * Batch b of each operand starts at b * bs (a_bs, b_bs, c_bs), or with heads > 1 at
 * (b / heads) * bs + (b % heads) * hs (a_hs, b_hs, c_hs): the heads of a batch > 1 of
 * attention, cut out of (batch, seq, heads * dim) rows, which no single stride reaches.
 * A is row-major with row stride lda. B is either
 *   - packed (b_nr > 0): panels of b_nr columns, B[(n / b_nr) * K * b_nr + k * b_nr + n % b_nr]
 *     (zero past N), the layout ember packs constant weights into at build time; or
 *   - strided (b_nr == 0): B[k * b_ks + n * b_ns] (a (K, N) row-major matrix: b_ks = N,
 *     b_ns = 1; a dense weight (N, K): b_ks = 1, b_ns = K).
 * The register tile is EMBER_GEMM_MR rows (12 on AVX-512, else 6) x EMBER_GEMM_NR (two
 * vectors) columns (gemm_tile.h); the k loop broadcasts one A value per row and does two
 * FMAs per row. A panel of B that is not already K x EMBER_GEMM_NR contiguous (the packed
 * layout of another width, a transposed B, the last partial panel) is copied into a per-task
 * buffer once and reused by every row tile (a transposed B by in-register transposes of
 * EMBER_VL x EMBER_VL blocks).
 * Any b_nr works, so a layout packed for another SIMD width is still computed correctly.
 * A is read in place, or, on AVX-512 for a row stride of a multiple of 4 KiB, packed per
 * k block into a k-major stream of 12-row tiles (EMBER_GEMM_PACK_A_LDA).
 *
 * A product of a few rows (a matrix-vector product; up to 6 rows on AVX-512, 2 on AVX2) runs
 * gemm_few_rows.h instead: it is bound by the rate B streams in, so it reads B once, several
 * panels side by side.
 *
 * Work items are (batch, column panel, block of mc rows) (or, for a product of a few panels
 * with a large A, (batch, row block, panel): ember_gemm_item); with `parallel` they are split over
 * TVMBackendParallelLaunch tasks (contiguous ranges, so a task keeps its panel), else run
 * serially. ember_sgemm returns 0, or -1 when a packing buffer cannot be allocated.
 */
#ifndef EMBER_KERNELS_GEMM_H_
#define EMBER_KERNELS_GEMM_H_

#include <stddef.h>
#include <stdint.h>

#include "ember/kernels/linkage.h"
#include "ember/kernels/task_split.h"

/* The entry point (linkage and where its body comes from: ember/kernels/linkage.h). */
#define EMBER_SGEMM_PARAMS                                                                         \
  int32_t batch, int32_t M, int32_t N, int32_t K, const float* A, int32_t a_bs, int32_t lda,       \
      const float* B, int32_t b_bs, int32_t b_ks, int32_t b_ns, int32_t b_nr, float* C,            \
      int32_t c_bs, int32_t ldc, float alpha, int32_t bias_mode, const float* bias,                \
      int32_t res_mode, const float* res, int32_t act1, float p1a, float p1b, int32_t act2,        \
      float p2a, float p2b, int32_t mc, int32_t kc, int32_t parallel, int32_t heads,           \
      int32_t a_hs, int32_t b_hs, int32_t c_hs
EMBER_KENTRY int32_t ember_sgemm(EMBER_SGEMM_PARAMS);

#if EMBER_KERNEL_BODIES
#include "ember/c_backend_api.h"
#include "ember/kernels/gemm_epilogue.h"
#include "ember/kernels/gemm_simd.h"

/* The register tile: 12 rows x 2 vectors on AVX-512 (24 accumulators of its 32 registers),
 * else 6 rows x 2 vectors (12 of 16). */
#if EMBER_VL == 16
#define EMBER_GEMM_MR 12
#else
#define EMBER_GEMM_MR 6
#endif
#define EMBER_GEMM_NR (2 * EMBER_VL)

typedef struct {
  int32_t batch, M, N, K;
  const float* A;
  int64_t a_bs, lda;
  const float* B;
  int64_t b_bs, b_ks, b_ns;
  int32_t b_nr;
  float* C;
  int64_t c_bs, ldc;
  int64_t heads, a_hs, b_hs, c_hs; /* batch b = (b / heads, b % heads): see the top */
  ember_epilogue epi;
  int32_t mc; /* rows per work item (a multiple of EMBER_GEMM_MR) */
  int32_t kc; /* k per block: a kc x EMBER_GEMM_NR panel block stays in L1 */
  int32_t panel_inner; /* items ordered (batch, row block, panel): ember_gemm_item */
} ember_gemm_args;

/* The offset of batch b of an operand with batch stride bs and head stride hs. */
static inline int64_t ember_gemm_boff(const ember_gemm_args* g, int64_t b, int64_t bs,
                                      int64_t hs) {
  return g->heads > 1 ? b / g->heads * bs + b % g->heads * hs : b * bs;
}

/* Work items are (batch, column panel, row block), the row blocks innermost, so that a task
 * keeps its panel (copied once, when B is not read in place) while its row blocks stream
 * past. With few panels read in place and an A too big for L2 (attention's probabilities x V
 * at a long sequence: Whisper's 6 heads of 1500 x 1500 x 64, two panels, 9 MB of A per
 * head), A then came from memory once per panel; `panel_inner` orders them (batch, row
 * block, panel): each row block's A is read from memory once and from L2 for the other
 * panels. */
#define EMBER_GEMM_INNER_PANELS 4
#ifndef EMBER_GEMM_INNER_A_BYTES /* a -D may override it (tests take the order at any size) */
#define EMBER_GEMM_INNER_A_BYTES (1 << 20)
#endif
static inline void ember_gemm_item(const ember_gemm_args* g, int64_t item, int64_t panels,
                                   int64_t mblocks, int64_t* b, int64_t* j, int64_t* mb) {
  if (g->panel_inner) {
    *j = item % panels;
    *mb = item / panels % mblocks;
  } else {
    *mb = item % mblocks;
    *j = item / mblocks % panels;
  }
  *b = item / (mblocks * panels);
}

/* The sums x0, x1 of one row's panel through the epilogue into c[0 .. nr) (columns n0..,
 * residual at res_off). */
EMBER_ALWAYS_INLINE void ember_gemm_store_row(ember_vf x0, ember_vf x1, float* c, int32_t nr,
                                              const ember_epilogue* e, int64_t n0,
                                              int64_t res_off) {
  if (nr == EMBER_GEMM_NR && ember_epi_in_registers(e)) {
    ember_vstore(c, ember_epi_vec(x0, e, n0, res_off));
    ember_vstore(c + EMBER_VL, ember_epi_vec(x1, e, n0 + EMBER_VL, res_off + EMBER_VL));
  } else {
    float tmp[EMBER_GEMM_NR];
    int32_t j;
    ember_vstore(tmp, x0);
    ember_vstore(tmp + EMBER_VL, x1);
    ember_epi_block(tmp, EMBER_GEMM_NR, 1, nr, e, n0, res_off, 0);
    for (j = 0; j < nr; ++j) c[j] = tmp[j];
  }
}

/* One row of a longer product (its last tile): four k phases keep eight FMA chains in
 * flight. */
static inline void ember_gemm_row(int32_t K, const float* a, const float* b, int64_t b_ks,
                                  float* c, int32_t nr, const ember_epilogue* e, int64_t n0,
                                  int64_t res_off) {
  ember_vf x0 = ember_vzero(), x1 = ember_vzero(), y0 = ember_vzero(), y1 = ember_vzero();
  ember_vf z0 = ember_vzero(), z1 = ember_vzero(), w0 = ember_vzero(), w1 = ember_vzero();
  int32_t k = 0;
  for (; k + 4 <= K; k += 4) {
    const float* p = b + k * b_ks;
    ember_vf t0 = ember_vset1(a[k]), t1 = ember_vset1(a[k + 1]);
    ember_vf t2 = ember_vset1(a[k + 2]), t3 = ember_vset1(a[k + 3]);
    x0 = ember_vfma(t0, ember_vload(p), x0);
    x1 = ember_vfma(t0, ember_vload(p + EMBER_VL), x1);
    y0 = ember_vfma(t1, ember_vload(p + b_ks), y0);
    y1 = ember_vfma(t1, ember_vload(p + b_ks + EMBER_VL), y1);
    z0 = ember_vfma(t2, ember_vload(p + 2 * b_ks), z0);
    z1 = ember_vfma(t2, ember_vload(p + 2 * b_ks + EMBER_VL), z1);
    w0 = ember_vfma(t3, ember_vload(p + 3 * b_ks), w0);
    w1 = ember_vfma(t3, ember_vload(p + 3 * b_ks + EMBER_VL), w1);
  }
  for (; k < K; ++k) {
    ember_vf t = ember_vset1(a[k]);
    x0 = ember_vfma(t, ember_vload(b + k * b_ks), x0);
    x1 = ember_vfma(t, ember_vload(b + k * b_ks + EMBER_VL), x1);
  }
  x0 = ember_vadd(ember_vadd(x0, y0), ember_vadd(z0, w0));
  x1 = ember_vadd(ember_vadd(x1, y1), ember_vadd(z1, w1));
  ember_gemm_store_row(x0, x1, c, nr, e, n0, res_off);
}

/* The sums of a tile of at most 3 rows (rows a0, a1, a2; a short tile repeats row 0) added
 * to *c00 .. *c21: even and odd k in separate accumulators, so 12 FMA chains stay in flight
 * (the 6-row loop on such a tile spends half or more of its FMAs on copies of row 0; the
 * last tile of M = 128 rows is 2 rows). */
EMBER_ALWAYS_INLINE void ember_gemm_tile3(int32_t K, const float* a0, const float* a1,
                                          const float* a2, const float* b, int64_t b_ks,
                                          ember_vf* c00, ember_vf* c01, ember_vf* c10,
                                          ember_vf* c11, ember_vf* c20, ember_vf* c21) {
  ember_vf x00 = *c00, x01 = *c01, x10 = *c10, x11 = *c11, x20 = *c20, x21 = *c21;
  ember_vf y00 = ember_vzero(), y01 = ember_vzero(), y10 = ember_vzero();
  ember_vf y11 = ember_vzero(), y20 = ember_vzero(), y21 = ember_vzero();
  int32_t k = 0;
  for (; k + 2 <= K; k += 2) {
    ember_vf b0 = ember_vload(b), b1 = ember_vload(b + EMBER_VL), t;
    t = ember_vset1(a0[k]); x00 = ember_vfma(t, b0, x00); x01 = ember_vfma(t, b1, x01);
    t = ember_vset1(a1[k]); x10 = ember_vfma(t, b0, x10); x11 = ember_vfma(t, b1, x11);
    t = ember_vset1(a2[k]); x20 = ember_vfma(t, b0, x20); x21 = ember_vfma(t, b1, x21);
    b0 = ember_vload(b + b_ks);
    b1 = ember_vload(b + b_ks + EMBER_VL);
    b += 2 * b_ks;
    t = ember_vset1(a0[k + 1]); y00 = ember_vfma(t, b0, y00); y01 = ember_vfma(t, b1, y01);
    t = ember_vset1(a1[k + 1]); y10 = ember_vfma(t, b0, y10); y11 = ember_vfma(t, b1, y11);
    t = ember_vset1(a2[k + 1]); y20 = ember_vfma(t, b0, y20); y21 = ember_vfma(t, b1, y21);
  }
  if (k < K) {
    ember_vf b0 = ember_vload(b), b1 = ember_vload(b + EMBER_VL), t;
    t = ember_vset1(a0[k]); x00 = ember_vfma(t, b0, x00); x01 = ember_vfma(t, b1, x01);
    t = ember_vset1(a1[k]); x10 = ember_vfma(t, b0, x10); x11 = ember_vfma(t, b1, x11);
    t = ember_vset1(a2[k]); x20 = ember_vfma(t, b0, x20); x21 = ember_vfma(t, b1, x21);
  }
  *c00 = ember_vadd(x00, y00); *c01 = ember_vadd(x01, y01);
  *c10 = ember_vadd(x10, y10); *c11 = ember_vadd(x11, y11);
  *c20 = ember_vadd(x20, y20); *c21 = ember_vadd(x21, y21);
}

/* Row p[0 .. EMBER_GEMM_NR) of a panel into L2 (its first and last 64-byte lines: the row is
 * one or two lines). */
#if defined(__GNUC__)
#define EMBER_GEMM_PREFETCH_ROW(p)                                                           \
  do {                                                                                       \
    __builtin_prefetch((p), 0, 2);                                                           \
    __builtin_prefetch((p) + EMBER_GEMM_NR - 1, 0, 2);                                       \
  } while (0)
#else
#define EMBER_GEMM_PREFETCH_ROW(p) ((void)(p))
#endif

/* Rows [0, mr) of a tile of C (row stride ldc, EMBER_GEMM_NR floats each: two or three
 * 64-byte lines, as the row's start falls) into L1 for writing, issued before the tile's k
 * loop so that the lines arrive while it runs. A C larger than the caches (from
 * EMBER_GEMM_PREFETCH_C_BYTES of it) comes from memory: each tile's stores then missed on
 * 24-36 lines of rows ldc apart, which no hardware prefetcher follows, and the core waited on
 * them after its FMAs. Attention scores at a long sequence are such a product (Whisper's
 * encoder: 6 heads of 1500 x 64 x 1500, a 54 MB C): on one Sapphire Rapids core 28.6 ->
 * 17.4 ms (AVX-512), 27 -> 22.7 ms (built for AVX2); products whose C stays in L2 are
 * unchanged (so the threshold: their lines are there already). */
#if defined(__GNUC__)
static inline void ember_gemm_prefetch_c(float* c, int64_t ldc, int32_t mr) {
  int32_t i;
  for (i = 0; i < mr; ++i) {
    __builtin_prefetch(c + i * ldc, 1, 3);
    __builtin_prefetch(c + i * ldc + EMBER_GEMM_NR / 2, 1, 3);
    __builtin_prefetch(c + i * ldc + EMBER_GEMM_NR - 1, 1, 3);
  }
}
#else
static inline void ember_gemm_prefetch_c(float* c, int64_t ldc, int32_t mr) {
  (void)c; (void)ldc; (void)mr;
}
#endif
#ifndef EMBER_GEMM_PREFETCH_C_BYTES
#define EMBER_GEMM_PREFETCH_C_BYTES (2 << 20)
#endif

/* The register tiles (gemm_tile.h): 6 rows, and 12 where the register file holds them. */
#define EMBER_GEMM_ROWS6(X) X(0) X(1) X(2) X(3) X(4) X(5)
#define EMBER_GEMM_TILE_NAME ember_gemm_tile6
#define EMBER_GEMM_TILE_ROWS 6
#define EMBER_GEMM_TILE_EACH EMBER_GEMM_ROWS6
#include "ember/kernels/gemm_tile.h"
#if EMBER_GEMM_MR == 12
#define EMBER_GEMM_ROWS12(X) EMBER_GEMM_ROWS6(X) X(6) X(7) X(8) X(9) X(10) X(11)
#define EMBER_GEMM_TILE_NAME ember_gemm_tile12
#define EMBER_GEMM_TILE_ROWS 12
#define EMBER_GEMM_TILE_EACH EMBER_GEMM_ROWS12
#include "ember/kernels/gemm_tile.h"
#define EMBER_GEMM_TILE_NAME ember_gemm_tile12_packed
#define EMBER_GEMM_TILE_ROWS 12
#define EMBER_GEMM_TILE_EACH EMBER_GEMM_ROWS12
#define EMBER_GEMM_TILE_PACKED 1
#include "ember/kernels/gemm_tile.h"
#endif

/* A is packed (AVX-512) when its row stride is a multiple of EMBER_GEMM_PACK_A_LDA floats
 * (4 KiB): the 12 rows of a tile then lie in one L1 set (12 ways on a Sapphire Rapids core),
 * which the B panel's lines need too; packed, a tile's A is one contiguous stream. Measured on
 * one such core (kernel alone, interleaved, median of 8 pairs): 128x1024x3072 and 128x2048x1536
 * 2-3% faster, 128x3072x768 1%; but the copy (12 scalar loads and stores per k of a tile) costs
 * about 1/panels of the product, 128x1024x384 and 128x2048x384 (12 panels) 1-3% slower, so
 * only from EMBER_GEMM_PACK_A_PANELS panels on. Elsewhere packing gains nothing measurable
 * (the register tile's 12 row offsets, partly reloaded from the stack, cost no FMA slots). */
#define EMBER_GEMM_PACK_A_LDA 1024
#ifndef EMBER_GEMM_PACK_A_PANELS /* a -D may override it (tests pack at every size with 1) */
#define EMBER_GEMM_PACK_A_PANELS 32
#endif
/* ... and its packed rows (all row blocks of one k block) take at most this many bytes */
#define EMBER_GEMM_PACK_A_BYTES (8 << 20)

/* The EMBER_GEMM_MR rows at a (row stride lda), k in [0, kb), k-major into dst:
 * dst[k * EMBER_GEMM_MR + i] = a[i * lda + k] (the packed register tile's layout). */
static inline void ember_gemm_pack_a(const float* a, int64_t lda, int32_t kb, float* dst) {
  int32_t k, i;
  for (k = 0; k < kb; ++k) {
    for (i = 0; i < EMBER_GEMM_MR; ++i) dst[(int64_t)k * EMBER_GEMM_MR + i] = a[i * lda + k];
  }
}

/* The rows of the next tile when `left` rows remain: EMBER_GEMM_MR while there are that many;
 * of a shorter rest, 4 rows as a 3-row tile and then the row kernel (about 3 + 1.5 cycles per
 * k for 6 on the 6-row loop; M = 16, 64, 256, ... end so), and on AVX-512 7 or 8 rows as 6
 * and then the rest (9 to 11 run the 12-row loop: one pass over the panel for the cost of
 * 12 rows, where 6 + the rest would cost as much in two). */
static inline int32_t ember_gemm_next_rows(int64_t left) {
  int32_t mr = (int32_t)(left < EMBER_GEMM_MR ? left : EMBER_GEMM_MR);
  if (mr == 4) return 3;
  return EMBER_GEMM_MR > 6 && mr > 6 && mr <= 8 ? 6 : mr;
}

/* One tile of mr rows (ember_gemm_next_rows's) x nr columns: see gemm_tile.h. */
static inline void ember_gemm_tile(int32_t K, const float* a, int64_t lda, int32_t mr,
                                   const float* b, int64_t b_ks, float* c, int64_t ldc,
                                   int32_t nr, const ember_epilogue* e, int64_t n0,
                                   int64_t res_off, int accumulate, const float* pf,
                                   int64_t pf_ks, int32_t pf_rows) {
  if (mr == 1 && !accumulate) {
    int32_t k;
    for (k = 0; k < pf_rows; ++k) EMBER_GEMM_PREFETCH_ROW(pf + k * pf_ks);
    ember_gemm_row(K, a, b, b_ks, c, nr, e, n0, res_off);
  } else if (mr <= 6) {
    ember_gemm_tile6(K, a, lda, mr, b, b_ks, c, ldc, nr, e, n0, res_off, accumulate, pf, pf_ks,
                     pf_rows);
  } else {
#if EMBER_GEMM_MR == 12
    ember_gemm_tile12(K, a, lda, mr, b, b_ks, c, ldc, nr, e, n0, res_off, accumulate, pf,
                      pf_ks, pf_rows);
#endif
  }
}

/* Element (k, n) of B (one batch). */
static inline float ember_gemm_b_at(const ember_gemm_args* g, const float* B, int64_t k,
                                    int64_t n) {
  if (g->b_nr > 0) {
    return B[(n / g->b_nr) * (int64_t)g->K * g->b_nr + k * g->b_nr + n % g->b_nr];
  }
  return B[k * g->b_ks + n * g->b_ns];
}

/* Rows [k0, k0 + kb) of columns [n0, n0 + w) of a strided B (element (k, n) at
 * B[k * b_ks + n * b_ns]) into rows of EMBER_GEMM_NR floats at buf, zero past w. Row by row,
 * so that the stores run along consecutive floats (a row-major B's row is a plain copy the
 * compiler vectorises): a column at a time, every element was a scalar load and store with
 * a branch, and the panel copy of an attention product at a short sequence (N = L of 16,
 * less than a panel) took half of ember_gemm_range's time. */
#if defined(EMBER_HAVE_VTRANSPOSE)
/* ... for a B stored transposed (b_ks == 1: a column's k values are contiguous, as K of
 * attention's Q K^T is): EMBER_VL x EMBER_VL blocks transposed in registers, the rest (k and
 * column tails, zeros past w) element by element. Element by element throughout, the copy cost
 * about a quarter of the FMAs' time in the product at M = 128 (each element: a load and a
 * store; each of its products: 1/32 cycle of FMA): BERT's 4 x 128 x 128 x 64 scores at 185
 * GFLOP/s on one EPYC core where the product with a row-major B ran at 254. */
static inline void ember_gemm_copy_transposed(const float* B, int64_t b_ns, int64_t k0,
                                              int64_t kb, int64_t n0, int64_t w, float* buf) {
  const int64_t kv = kb / EMBER_VL * EMBER_VL, wv = w / EMBER_VL * EMBER_VL;
  int64_t k, jj;
  int i;
  for (jj = 0; jj < wv; jj += EMBER_VL) {
    for (k = 0; k < kv; k += EMBER_VL) {
      ember_vf r[EMBER_VL];
      for (i = 0; i < EMBER_VL; ++i) r[i] = ember_vload(B + (n0 + jj + i) * b_ns + k0 + k);
      ember_vtranspose(r);
      for (i = 0; i < EMBER_VL; ++i) ember_vstore(buf + (k + i) * EMBER_GEMM_NR + jj, r[i]);
    }
  }
  for (k = 0; k < kb; ++k) {
    float* dst = buf + k * EMBER_GEMM_NR;
    for (jj = k < kv ? wv : 0; jj < w; ++jj) dst[jj] = B[(n0 + jj) * b_ns + k0 + k];
    for (jj = w; jj < EMBER_GEMM_NR; ++jj) dst[jj] = 0.0f;
  }
}
#endif

static inline void ember_gemm_copy_strided(const float* B, int64_t b_ks, int64_t b_ns,
                                           int64_t k0, int64_t kb, int64_t n0, int64_t w,
                                           float* buf) {
  int64_t k, jj;
#if defined(EMBER_HAVE_VTRANSPOSE)
  if (b_ks == 1 && b_ns != 1) {
    ember_gemm_copy_transposed(B, b_ns, k0, kb, n0, w, buf);
    return;
  }
#endif
  for (k = 0; k < kb; ++k) {
    const float* src = B + (k0 + k) * b_ks + n0 * b_ns;
    float* dst = buf + k * EMBER_GEMM_NR;
    if (b_ns == 1) {
      for (jj = 0; jj < w; ++jj) dst[jj] = src[jj];
    } else {
      for (jj = 0; jj < w; ++jj) dst[jj] = src[jj * b_ns];
    }
    for (jj = w; jj < EMBER_GEMM_NR; ++jj) dst[jj] = 0.0f;
  }
}

/* Rows [k0, k0 + kb) of panel j of B as a kb x EMBER_GEMM_NR block: a pointer into B when it
 * already is one, else copied (zero past N) into buf. *ks gets the block's row stride. */
static inline const float* ember_gemm_panel(const ember_gemm_args* g, const float* B, int64_t j,
                                            int64_t k0, int64_t kb, float* buf, int64_t* ks) {
  int64_t n0 = j * EMBER_GEMM_NR, w = g->N - n0 < EMBER_GEMM_NR ? g->N - n0 : EMBER_GEMM_NR;
  int64_t k, jj;
  if (g->b_nr == EMBER_GEMM_NR) {
    *ks = EMBER_GEMM_NR;
    return B + (j * (int64_t)g->K + k0) * EMBER_GEMM_NR;
  }
  if (g->b_nr == 0 && g->b_ns == 1 && n0 + EMBER_GEMM_NR <= g->N) {
    *ks = g->b_ks;
    return B + k0 * g->b_ks + n0;
  }
  *ks = EMBER_GEMM_NR;
  if (g->b_nr == 0) {
    ember_gemm_copy_strided(B, g->b_ks, g->b_ns, k0, kb, n0, w, buf);
    return buf;
  }
  /* packed for another vector width (a library built for another SIMD level) */
  for (k = 0; k < kb; ++k) {
    for (jj = 0; jj < EMBER_GEMM_NR; ++jj) {
      buf[k * EMBER_GEMM_NR + jj] = jj < w ? ember_gemm_b_at(g, B, k0 + k, n0 + jj) : 0.0f;
    }
  }
  return buf;
}

static inline int ember_gemm_needs_buffer(const ember_gemm_args* g) {
  return !(g->b_nr == EMBER_GEMM_NR ||
           (g->b_nr == 0 && g->b_ns == 1 && g->N % EMBER_GEMM_NR == 0));
}

/* The items [begin, end) element by element, reading B where it lies: for when no workspace
 * can be had for a panel copy (a C-runtime arena sized by the memory planner has no room for
 * it, e.g. firmware built with other vector widths than the weights were packed for). */
EMBER_NOINLINE int ember_gemm_range_direct(const ember_gemm_args* g, int64_t begin,
                                           int64_t end) {
  int64_t panels = (g->N + EMBER_GEMM_NR - 1) / EMBER_GEMM_NR;
  int64_t mblocks = (g->M + g->mc - 1) / g->mc, item;
  for (item = begin; item < end; ++item) {
    int64_t mb, j, b;
    int64_t m_end, n_end;
    ember_gemm_item(g, item, panels, mblocks, &b, &j, &mb);
    m_end = (mb + 1) * g->mc < g->M ? (mb + 1) * g->mc : g->M;
    const float* A = g->A + ember_gemm_boff(g, b, g->a_bs, g->a_hs);
    const float* B = g->B + ember_gemm_boff(g, b, g->b_bs, g->b_hs);
    int64_t m, n, k;
    n_end = (j + 1) * EMBER_GEMM_NR < g->N ? (j + 1) * EMBER_GEMM_NR : g->N;
    for (m = mb * g->mc; m < m_end; ++m) {
      for (n = j * EMBER_GEMM_NR; n < n_end; ++n) {
        int64_t off = ember_gemm_boff(g, b, g->c_bs, g->c_hs) + m * g->ldc + n;
        float acc = 0.0f;
        for (k = 0; k < g->K; ++k) acc += A[m * g->lda + k] * ember_gemm_b_at(g, B, k, n);
        g->C[off] = ember_epi_one(acc, &g->epi, n, off);
      }
    }
  }
  return 0;
}

/* Panel j of batch b where the kernel reads it in place (a packed panel of EMBER_GEMM_NR, a
 * full panel of a row-major B), with its row stride in *ks; NULL when it is copied. */
static inline const float* ember_gemm_panel_in_place(const ember_gemm_args* g, int64_t b,
                                                     int64_t j, int64_t* ks) {
  const float* B = g->B + ember_gemm_boff(g, b, g->b_bs, g->b_hs);
  if (g->b_nr == EMBER_GEMM_NR) {
    *ks = EMBER_GEMM_NR;
    return B + j * (int64_t)g->K * EMBER_GEMM_NR;
  }
  if (g->b_nr == 0 && g->b_ns == 1 && (j + 1) * EMBER_GEMM_NR <= g->N) {
    *ks = g->b_ks;
    return B + j * EMBER_GEMM_NR;
  }
  return NULL;
}

#include "ember/kernels/gemm_few_rows.h"

/* Prefetching the next panel pays from this many bytes of B on (per batch): a B that large
 * comes from memory at every call, and the first row tile of each panel would wait on it (the
 * hardware prefetcher starts on a new panel late): GPT-2's 128x384x16384 LM head (24 MiB)
 * runs 10-15% faster with it on a Sapphire Rapids core. A B from L2 or L3 streams well
 * enough, where the prefetches cost 2-4%. Each tile of a panel prefetches its slice of the
 * next panel one row per k step of its own loop (gemm_tile.h), not all before it: the LM head
 * a further 4-13% faster, GPT-2 small's 77x768x3072 12-14% (kernel alone, interleaved).
 * A -D may override the threshold (tests take the path at every size with 0). */
#ifndef EMBER_GEMM_PREFETCH_BYTES
#define EMBER_GEMM_PREFETCH_BYTES (8 << 20)
#endif

/* Work items [begin, end): item = (b * panels + j) * mblocks + mb; the k blocks outermost, so
 * a task's block of A rows (mc x kc) stays in L2 while its panels stream past it (items inside
 * a k block: a K of 3072 over 128 rows is 1.5 MiB of A, which every panel read again from L3
 * when each item ran all its k blocks: GPT-2 small's MLP down-projection 128x3072x768 ran at
 * 135-145 GFLOP/s, the same kernel at K 1536 at 165-175). Partial sums wait in C between
 * k blocks. Out of line: one copy per translation unit however many kernels call it (the
 * epilogue and strides are runtime values whose branches are taken once per vector, not per
 * FMA). */
EMBER_NOINLINE int ember_gemm_range(const ember_gemm_args* g, int64_t begin, int64_t end) {
  int64_t panels = (g->N + EMBER_GEMM_NR - 1) / EMBER_GEMM_NR;
  int64_t mblocks = (g->M + g->mc - 1) / g->mc;
  int64_t have_b = -1, have_j = -1, have_k0 = -1, item, ks = 0, k0, pf_ks = 0, pf_k, pf_step;
  /* AVX-512 only: the AVX2 kernel gained 0-4% from it on the LM head (on an AVX-512 machine;
   * not measured where its tiles were tuned) */
  const int prefetch = EMBER_GEMM_MR == 12 &&
                       (int64_t)g->K * g->N * (int64_t)sizeof(float) >= EMBER_GEMM_PREFETCH_BYTES;
  int32_t mr = EMBER_GEMM_MR, pf_rows;
  const int prefetch_c = (int64_t)g->batch * g->M * g->N * (int64_t)sizeof(float) >=
                         EMBER_GEMM_PREFETCH_C_BYTES;
  ember_epilogue ident;
  float* buf = NULL;
  float* apack = NULL;
  int64_t* packed_b = NULL;
  /* rows of A packed per k block (its full register tiles: ember_gemm_pack_a), or 0 */
  int64_t pack_rows = g->M / EMBER_GEMM_MR * EMBER_GEMM_MR;
  const float* panel = NULL;
  if (EMBER_GEMM_MR != 12 || g->lda % EMBER_GEMM_PACK_A_LDA != 0 ||
      panels < EMBER_GEMM_PACK_A_PANELS ||
      pack_rows * (g->K < g->kc ? g->K : g->kc) * (int64_t)sizeof(float) >
          EMBER_GEMM_PACK_A_BYTES) {
    pack_rows = 0;
  }
  if (EMBER_GEMM_FEW_TAKES(g->M)) return ember_gemm_few_range(g, begin, end);
  if (begin >= end) return 0;
  memset(&ident, 0, sizeof ident);
  ident.alpha = 1.0f;
  if (ember_gemm_needs_buffer(g)) {
    int64_t rows = g->K < g->kc ? g->K : g->kc;
    buf = (float*)TVMBackendAllocWorkspace(1, 0, (uint64_t)rows * EMBER_GEMM_NR * sizeof(float),
                                           2, 32);
    if (buf == NULL) return ember_gemm_range_direct(g, begin, end);
  }
  if (pack_rows > 0) {
    /* the packed full tiles of every row block, then which batch each block holds (-1: none) */
    int64_t floats = pack_rows * (g->K < g->kc ? g->K : g->kc);
    apack = (float*)TVMBackendAllocWorkspace(
        1, 0, (uint64_t)floats * sizeof(float) + (uint64_t)mblocks * sizeof(int64_t), 2, 32);
    packed_b = apack == NULL ? NULL : (int64_t*)(apack + floats);
    if (apack == NULL) pack_rows = 0; /* no room: the tiles read A in place */
  }
  for (k0 = 0; k0 < g->K || k0 == 0; k0 += g->kc) {
    int32_t kb = (int32_t)(g->K - k0 < g->kc ? g->K - k0 : g->kc);
    int last = k0 + g->kc >= g->K;
    for (item = 0; item < mblocks && pack_rows > 0; ++item) packed_b[item] = -1;
    for (item = begin; item < end; ++item) {
      int64_t mb, j, b, n0, m, m_end, c_off;
      int32_t nr;
      const float* A;
      const float* next = NULL; /* the next item's panel, when this item ends this one's */
      float* C;
      ember_gemm_item(g, item, panels, mblocks, &b, &j, &mb);
      n0 = j * EMBER_GEMM_NR;
      m_end = (mb + 1) * g->mc;
      nr = (int32_t)(g->N - n0 < EMBER_GEMM_NR ? g->N - n0 : EMBER_GEMM_NR);
      A = g->A + ember_gemm_boff(g, b, g->a_bs, g->a_hs);
      c_off = ember_gemm_boff(g, b, g->c_bs, g->c_hs);
      C = g->C + c_off;
      if (b != have_b || j != have_j || k0 != have_k0) {
        panel = ember_gemm_panel(g, g->B + ember_gemm_boff(g, b, g->b_bs, g->b_hs), j, k0, kb,
                                 buf, &ks);
        have_b = b;
        have_j = j;
        have_k0 = k0;
      }
      if (m_end > g->M) m_end = g->M;
      if (pack_rows > 0 && packed_b[mb] != b) {
        /* this block's full tiles, once per k block (every panel of the range reuses them) */
        for (m = mb * g->mc; m + EMBER_GEMM_MR <= m_end; m += EMBER_GEMM_MR) {
          ember_gemm_pack_a(A + m * g->lda + k0, g->lda, kb, apack + m * kb);
        }
        packed_b[mb] = b;
      }
      if (prefetch && !g->panel_inner && mb == mblocks - 1 && item + 1 < end) {
        int64_t nj = (j + 1) % panels;
        next = ember_gemm_panel_in_place(g, nj == 0 ? b + 1 : b, nj, &pf_ks);
      }
      /* the next panel's rows of this k block, a slice before each of this item's tiles */
      pf_step = (kb * (int64_t)EMBER_GEMM_MR + m_end - mb * g->mc - 1) / (m_end - mb * g->mc);
      pf_k = k0;
      for (m = mb * g->mc; m < m_end; m += mr) {
        int64_t off = m * g->ldc + n0;
        mr = ember_gemm_next_rows(m_end - m);
        if (prefetch_c) ember_gemm_prefetch_c(C + off, g->ldc, mr);
        pf_rows = 0;
        if (next != NULL && pf_k < k0 + kb) {
          pf_rows = (int32_t)(pf_k + pf_step < k0 + kb ? pf_step : k0 + kb - pf_k);
        }
#if EMBER_GEMM_MR == 12
        if (pack_rows > 0 && mr == EMBER_GEMM_MR) {
          ember_gemm_tile12_packed(kb, apack + m * kb, 1, mr, panel, ks, C + off, g->ldc, nr,
                                   last ? &g->epi : &ident, n0, c_off + off, k0 > 0,
                                   pf_rows > 0 ? next + pf_k * pf_ks : NULL, pf_ks, pf_rows);
        } else
#endif
        {
          ember_gemm_tile(kb, A + m * g->lda + k0, g->lda, mr, panel, ks, C + off, g->ldc, nr,
                          last ? &g->epi : &ident, n0, c_off + off, k0 > 0,
                          pf_rows > 0 ? next + pf_k * pf_ks : NULL, pf_ks, pf_rows);
        }
        pf_k += pf_rows;
      }
    }
  }
  if (apack != NULL) TVMBackendFreeWorkspace(1, 0, apack);
  if (buf != NULL) TVMBackendFreeWorkspace(1, 0, buf);
  return 0;
}

static inline int64_t ember_gemm_items(const ember_gemm_args* g) {
  return (int64_t)g->batch * ((g->N + EMBER_GEMM_NR - 1) / EMBER_GEMM_NR) *
         ((g->M + g->mc - 1) / g->mc);
}

/* The row block of a launch on `tasks` threads: the planned mc, cut (in whole register tiles)
 * until there are EMBER_GEMM_ITEMS_PER_TASK items per task where the planned blocks give
 * fewer (mc was planned for a few threads; see ember_conv_task_strip). Every task computes
 * the same value from the same count. */
#define EMBER_GEMM_ITEMS_PER_TASK 4
static inline int32_t ember_gemm_task_mc(const ember_gemm_args* g, int64_t tasks) {
  int64_t items = ember_gemm_items(g), want = EMBER_GEMM_ITEMS_PER_TASK * tasks, cuts;
  int32_t mc;
  if (tasks <= 1 || items >= want || g->mc <= EMBER_GEMM_MR) return g->mc;
  cuts = (want + items - 1) / items;
  mc = (int32_t)((g->mc + cuts - 1) / cuts);
  mc = (mc + EMBER_GEMM_MR - 1) / EMBER_GEMM_MR * EMBER_GEMM_MR;
  return mc < g->mc ? mc : g->mc;
}

/* The work of the items before `item`, in register tiles (a short tile costs a whole one's
 * loads), in either order of ember_gemm_item; the last row block may be short. Every panel
 * is one tile wide. */
static inline int64_t ember_gemm_work_before(const void* args, int64_t item) {
  const ember_gemm_args* g = (const ember_gemm_args*)args;
  const int64_t mblocks = (g->M + g->mc - 1) / g->mc;
  const int64_t panels = (g->N + EMBER_GEMM_NR - 1) / EMBER_GEMM_NR;
  const int64_t tiles = (g->M + EMBER_GEMM_MR - 1) / EMBER_GEMM_MR; /* of a column panel */
  int64_t mb, j, b, before, block;
  ember_gemm_item(g, item, panels, mblocks, &b, &j, &mb);
  /* tiles of the row blocks before mb (mc: whole tiles), and of block mb */
  before = ((mb * g->mc < g->M ? mb * g->mc : g->M) + EMBER_GEMM_MR - 1) / EMBER_GEMM_MR;
  block = (((mb + 1) * g->mc < g->M ? (mb + 1) * g->mc : g->M) + EMBER_GEMM_MR - 1) /
          EMBER_GEMM_MR - before;
  if (g->panel_inner) return b * panels * tiles + before * panels + j * block;
  return (b * panels + j) * tiles + before;
}

/* The first item of task `task` of `tasks`: where the work before it reaches its share
 * (equal item counts give a task the short last block on top of full ones). */
static inline int64_t ember_gemm_task_start(const ember_gemm_args* g, int64_t task,
                                            int64_t tasks) {
  return ember_task_start(ember_gemm_work_before, g, ember_gemm_items(g), task, tasks);
}

static inline int ember_gemm_task(int task_id, TVMParallelGroupEnv* penv, void* cdata) {
  ember_gemm_args g = *(const ember_gemm_args*)cdata;
  int64_t tasks = penv->num_task > 0 ? penv->num_task : 1;
  g.mc = ember_gemm_task_mc(&g, tasks);
  return ember_gemm_range(&g, ember_gemm_task_start(&g, task_id, tasks),
                          ember_gemm_task_start(&g, task_id + 1, tasks));
}

/* See the top of this file. bias_mode/res_mode: 0 none, 1 scalar, 2 per column resp. laid
 * out like C (same strides). act codes: gemm_epilogue.h. */
#if EMBER_KERNEL_ALL || defined(EMBER_KOBJ_ember_sgemm)
EMBER_KENTRY int32_t ember_sgemm(EMBER_SGEMM_PARAMS) {
  ember_gemm_args g;
  g.batch = batch; g.M = M; g.N = N; g.K = K;
  g.A = A; g.a_bs = a_bs; g.lda = lda;
  g.B = B; g.b_bs = b_bs; g.b_ks = b_ks; g.b_ns = b_ns; g.b_nr = b_nr;
  g.C = C; g.c_bs = c_bs; g.ldc = ldc;
  g.heads = heads < 1 ? 1 : heads; g.a_hs = a_hs; g.b_hs = b_hs; g.c_hs = c_hs;
  g.epi.alpha = alpha; g.epi.bias_mode = bias_mode; g.epi.bias = bias;
  g.epi.res_mode = res_mode; g.epi.res = res;
  g.epi.act1 = act1; g.epi.p1a = p1a; g.epi.p1b = p1b;
  g.epi.act2 = act2; g.epi.p2a = p2a; g.epi.p2b = p2b;
  mc = mc < EMBER_GEMM_MR ? EMBER_GEMM_MR : mc - mc % EMBER_GEMM_MR;
  g.mc = mc;
  g.kc = kc < 1 ? 1 : kc;
  g.panel_inner = 0;
  if (batch <= 0 || M <= 0 || N <= 0) return 0;
  g.panel_inner = !ember_gemm_needs_buffer(&g) && N > EMBER_GEMM_NR &&
                  N <= EMBER_GEMM_INNER_PANELS * EMBER_GEMM_NR && M > mc &&
                  (int64_t)M * K * (int64_t)sizeof(float) >= EMBER_GEMM_INNER_A_BYTES;
  if (parallel && ember_gemm_items(&g) > 1) {
    return TVMBackendParallelLaunch(ember_gemm_task, &g, 0) == 0 ? 0 : -1;
  }
  return ember_gemm_range(&g, 0, ember_gemm_items(&g));
}
#endif
#endif /* EMBER_KERNEL_BODIES */

#endif /* EMBER_KERNELS_GEMM_H_ */
