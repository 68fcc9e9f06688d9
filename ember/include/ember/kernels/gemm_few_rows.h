/*
 * ember kernels: the GEMM of a few rows (a matrix-vector product, a batch of a few inputs to a
 * dense layer, an RNN step; EMBER_GEMM_FEW_TAKES(M): up to 6 rows on AVX-512, 2 with 16
 * vector registers), part of gemm.h (included from it, after its panel helpers).
 *
 * Such a product does 2M flops per 4 bytes of B, so it runs at the rate B streams in, not at
 * the FMA rate: B is read once, the whole of K per panel (no k blocks: nothing would reuse
 * them), and S column panels at a time side by side. A packed B lies panel after panel, so
 * the S panels are S sequential streams K * EMBER_GEMM_NR floats apart, each of which the
 * hardware prefetcher follows on its own; one panel at a time it follows a single stream and
 * stops at every 4 KiB page. Measured on one Sapphire Rapids core, a 4096 x 4096 weight
 * streamed from memory (the cache flushed before each call, thread time): one panel at a time
 * 12.6 GB/s, 2 panels 15.9, 4 panels 16.5-17.0, 8 panels no further; the row kernel as it was
 * (the whole next panel prefetched in a burst before each row) 9.3 GB/s. The same 4 panels
 * interleaved into one (K, 4 * EMBER_GEMM_NR) stream reached 14 GB/s, so the packed layout
 * stays as it is. Software prefetches ahead of the streams (prefetcht0/t1 at 0.5-8 KiB)
 * changed nothing measurable, prefetchnta made it slower (9.5 GB/s).
 *
 * The register tile is R rows (M) x S panels x 2 vectors, with S as large as the register
 * file allows (EMBER_GEMM_FEW_FITS; at most 4 panels); a single row alternates two sets
 * of accumulators over even and odd k where they fit, so 16 FMA chains hide the FMA latency
 * when B is in cache. Panels left over at the end of a task's range run one at a time; a panel
 * that is not in place (the last, partial panel of a row-major B, or a transposed B) is
 * copied first (ember_gemm_panel) and runs alone.
 */
#ifndef EMBER_KERNELS_GEMM_FEW_ROWS_H_
#define EMBER_KERNELS_GEMM_FEW_ROWS_H_

/* Products of at most this many rows may take this path (7 and more run gemm.h's tiles). */
#define EMBER_GEMM_FEW_ROWS 6
/* Panels side by side for r rows (EMBER_GEMM_FEW_PANELS(r)), and the k phases of r rows x s
 * panels: the tile's accumulators (2 r s per phase), r broadcasts of A per phase and the two
 * B vectors in the register file (32 on AVX-512, 16 elsewhere), at most 4 panels. */
#if EMBER_VL == 16
#define EMBER_GEMM_FEW_REGS 32
#else
#define EMBER_GEMM_FEW_REGS 16
#endif
#define EMBER_GEMM_FEW_MAX_PANELS 4
#define EMBER_GEMM_FEW_FITS(r, s, ph) ((2 * (r) * (s) + (r)) * (ph) + 2 <= EMBER_GEMM_FEW_REGS)
#define EMBER_GEMM_FEW_PANELS(r)                                                     \
  (EMBER_GEMM_FEW_FITS(r, 4, 1) && EMBER_GEMM_FEW_MAX_PANELS >= 4   ? 4             \
   : EMBER_GEMM_FEW_FITS(r, 3, 1) && EMBER_GEMM_FEW_MAX_PANELS >= 3 ? 3             \
   : EMBER_GEMM_FEW_FITS(r, 2, 1) && EMBER_GEMM_FEW_MAX_PANELS >= 2 ? 2             \
                                                                    : 1)
#define EMBER_GEMM_FEW_PHASES(r, s) (EMBER_GEMM_FEW_FITS(r, s, 2) ? 2 : 1)
/* Whether a product of m rows takes this path: m <= EMBER_GEMM_FEW_ROWS, and at least two
 * panels fit side by side. Not 3 or 4 rows in 16 registers (one panel at a time, 6 or 8
 * FMA chains): on AVX2 the 3-row tile and 3 + 1 rows of gemm.h stream a 4096 x 4096 B from
 * memory 7% faster (one panel) and 3 rows from cache 15% faster. 5 and 6 rows on AVX-512
 * (2 panels) beat the 6-row tile by 10-25% from cache (256 x 256, 512 x 1000) and about 7%
 * from memory. */
#define EMBER_GEMM_FEW_TAKES(m) ((m) <= EMBER_GEMM_FEW_ROWS && EMBER_GEMM_FEW_PANELS(m) > 1)

/* Rows [0, R) x panels [0, S) of C (panel s at c + s * EMBER_GEMM_NR, its valid width nr[s])
 * from A rows at a (stride lda) and S panels of B at b + s * ps (row stride ks), over all of
 * K. R, S and PH are constants at every call (ember_gemm_few_tile), so the loops unroll and
 * the accumulator array lives in registers. */
EMBER_ALWAYS_INLINE void ember_gemm_few_block(int32_t K, const float* a, int64_t lda,
                                              const float* b, int64_t ks, int64_t ps,
                                              const int32_t R, const int32_t S,
                                              const int32_t PH, float* c, int64_t ldc,
                                              const int32_t* nr, const ember_epilogue* e,
                                              int64_t n0, int64_t res_off) {
  ember_vf acc[2][EMBER_GEMM_FEW_ROWS][EMBER_GEMM_FEW_MAX_PANELS][2];
  int32_t k = 0, p, r, s;
  for (p = 0; p < PH; ++p) {
    for (r = 0; r < R; ++r) {
      for (s = 0; s < S; ++s) acc[p][r][s][0] = acc[p][r][s][1] = ember_vzero();
    }
  }
  for (; k + PH <= K; k += PH) {
    const float* row = b + (int64_t)k * ks;
    ember_vf t[2][EMBER_GEMM_FEW_ROWS];
    for (p = 0; p < PH; ++p) {
      for (r = 0; r < R; ++r) t[p][r] = ember_vset1(a[r * lda + k + p]);
    }
    for (s = 0; s < S; ++s) {
      for (p = 0; p < PH; ++p) {
        const float* q = row + p * ks + s * ps;
        ember_vf b0 = ember_vload(q), b1 = ember_vload(q + EMBER_VL);
        for (r = 0; r < R; ++r) {
          acc[p][r][s][0] = ember_vfma(t[p][r], b0, acc[p][r][s][0]);
          acc[p][r][s][1] = ember_vfma(t[p][r], b1, acc[p][r][s][1]);
        }
      }
    }
  }
  for (; k < K; ++k) { /* odd K with two phases: the last k into the first set */
    const float* row = b + (int64_t)k * ks;
    for (s = 0; s < S; ++s) {
      ember_vf b0 = ember_vload(row + s * ps), b1 = ember_vload(row + s * ps + EMBER_VL);
      for (r = 0; r < R; ++r) {
        ember_vf t = ember_vset1(a[r * lda + k]);
        acc[0][r][s][0] = ember_vfma(t, b0, acc[0][r][s][0]);
        acc[0][r][s][1] = ember_vfma(t, b1, acc[0][r][s][1]);
      }
    }
  }
  for (r = 0; r < R; ++r) {
    for (s = 0; s < S; ++s) {
      ember_vf x0 = acc[0][r][s][0], x1 = acc[0][r][s][1];
      if (PH == 2) {
        x0 = ember_vadd(x0, acc[1][r][s][0]);
        x1 = ember_vadd(x1, acc[1][r][s][1]);
      }
      ember_gemm_store_row(x0, x1, c + r * ldc + s * EMBER_GEMM_NR, nr[s], e,
                           n0 + s * EMBER_GEMM_NR, res_off + r * ldc + s * EMBER_GEMM_NR);
    }
  }
}

/* ember_gemm_few_block with R = rows (1 .. EMBER_GEMM_FEW_ROWS) and S = panels, which is
 * EMBER_GEMM_FEW_PANELS(rows) or 1: one copy of the loop per such pair. */
#define EMBER_GEMM_FEW_CASE(R)                                                                \
  case R:                                                                                     \
    if (panels > 1) {                                                                         \
      ember_gemm_few_block(K, a, lda, b, ks, ps, R, EMBER_GEMM_FEW_PANELS(R),                 \
                           EMBER_GEMM_FEW_PHASES(R, EMBER_GEMM_FEW_PANELS(R)), c, ldc, nr, e, \
                           n0, res_off);                                                      \
    } else {                                                                                  \
      ember_gemm_few_block(K, a, lda, b, ks, ps, R, 1, EMBER_GEMM_FEW_PHASES(R, 1), c, ldc,   \
                           nr, e, n0, res_off);                                               \
    }                                                                                         \
    break;
static inline void ember_gemm_few_tile(int32_t K, const float* a, int64_t lda, int32_t rows,
                                       const float* b, int64_t ks, int64_t ps, int32_t panels,
                                       float* c, int64_t ldc, const int32_t* nr,
                                       const ember_epilogue* e, int64_t n0, int64_t res_off) {
  switch (rows) {
    EMBER_GEMM_FEW_CASE(1)
    EMBER_GEMM_FEW_CASE(2)
    EMBER_GEMM_FEW_CASE(3)
    EMBER_GEMM_FEW_CASE(4)
    EMBER_GEMM_FEW_CASE(5)
    EMBER_GEMM_FEW_CASE(6)
    default:
      break;
  }
}
#undef EMBER_GEMM_FEW_CASE

/* Items [begin, end) of a product of M rows, EMBER_GEMM_FEW_TAKES(M): one row block, so an item
 * is column panel j of batch b (item = b * panels + j). Runs of
 * EMBER_GEMM_FEW_PANELS(M) panels of one batch that lie in place go side by side; the other
 * panels one at a time. Returns 0, or ember_gemm_range_direct's result when a panel copy
 * finds no workspace. */
EMBER_NOINLINE int ember_gemm_few_range(const ember_gemm_args* g, int64_t begin, int64_t end) {
  const int64_t panels = (g->N + EMBER_GEMM_NR - 1) / EMBER_GEMM_NR;
  const int32_t group = EMBER_GEMM_FEW_PANELS(g->M);
  /* the distance between neighbouring panels where they lie in place */
  const int64_t ps = g->b_nr == EMBER_GEMM_NR ? (int64_t)g->K * EMBER_GEMM_NR : EMBER_GEMM_NR;
  float* buf = NULL;
  int64_t item = begin;
  if (begin >= end) return 0;
  if (ember_gemm_needs_buffer(g)) {
    buf = (float*)TVMBackendAllocWorkspace(1, 0, (uint64_t)g->K * EMBER_GEMM_NR * sizeof(float),
                                           2, 32);
    if (buf == NULL) return ember_gemm_range_direct(g, begin, end);
  }
  while (item < end) {
    int64_t b = item / panels, j = item % panels, n0 = j * EMBER_GEMM_NR, ks, s;
    int32_t run = group, nr[EMBER_GEMM_FEW_MAX_PANELS];
    const float* panel;
    if (j + run > panels || item + run > end ||
        ember_gemm_panel_in_place(g, b, j + run - 1, &ks) == NULL) {
      run = 1;
    }
    const int64_t c_off = ember_gemm_boff(g, b, g->c_bs, g->c_hs) + n0;
    panel = run > 1 ? ember_gemm_panel_in_place(g, b, j, &ks)
                    : ember_gemm_panel(g, g->B + ember_gemm_boff(g, b, g->b_bs, g->b_hs), j, 0,
                                       g->K, buf, &ks);
    for (s = 0; s < run; ++s) {
      int64_t left = g->N - n0 - s * EMBER_GEMM_NR;
      nr[s] = (int32_t)(left < EMBER_GEMM_NR ? left : EMBER_GEMM_NR);
    }
    ember_gemm_few_tile(g->K, g->A + ember_gemm_boff(g, b, g->a_bs, g->a_hs), g->lda, g->M,
                        panel, ks, ps, run, g->C + c_off, g->ldc, nr, &g->epi, n0, c_off);
    item += run;
  }
  if (buf != NULL) TVMBackendFreeWorkspace(1, 0, buf);
  return 0;
}

#endif /* EMBER_KERNELS_GEMM_FEW_ROWS_H_ */
