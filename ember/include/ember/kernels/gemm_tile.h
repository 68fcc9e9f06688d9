/*
 * ember kernels: one register tile of the GEMM in gemm.h, as a template included once per
 * tile height (no include guard). The includer defines
 *
 *   EMBER_GEMM_TILE_NAME        the function's name
 *   EMBER_GEMM_TILE_ROWS        its rows (6; 12 on AVX-512, whose 32 vector registers hold
 *                               24 accumulators, 2 B vectors and a broadcast)
 *   EMBER_GEMM_TILE_EACH(X)     X(i) for i = 0 .. EMBER_GEMM_TILE_ROWS - 1
 *   EMBER_GEMM_TILE_PACKED      (optional) 1: A is a packed block (ember_gemm_pack_a), whose
 *                               rows are all present (mr = EMBER_GEMM_TILE_ROWS)
 *
 * and gets
 *
 *   void EMBER_GEMM_TILE_NAME(K, a, lda, mr, b, b_ks, c, ldc, nr, e, n0, res_off, accumulate,
 *                             pf, pf_ks, pf_rows)
 *
 * rows [0, mr) (mr <= EMBER_GEMM_TILE_ROWS) x columns [0, nr) of C at c (row stride ldc),
 * from A rows at a (stride lda) and a K x EMBER_GEMM_NR panel at b (row stride b_ks).
 * Columns are n0.., the residual of element (i, j) is at res_off + i * ldc + j. Its first
 * pf_rows k steps also prefetch rows of the next panel (pf, row stride pf_ks; see gemm.h). The rows past
 * mr repeat row 0 (computed, never stored). One macro per row keeps every accumulator a named
 * variable, so each stays in a register without relying on the compiler to split an array.
 */
#if !defined(EMBER_GEMM_TILE_NAME) || !defined(EMBER_GEMM_TILE_ROWS) || \
    !defined(EMBER_GEMM_TILE_EACH)
#error "gemm_tile.h is a template: define EMBER_GEMM_TILE_NAME, _ROWS and _EACH first"
#endif

#define EMBER_GEMM_T_ROWS EMBER_GEMM_TILE_ROWS
#if defined(EMBER_GEMM_TILE_PACKED) && EMBER_GEMM_TILE_PACKED
/* A packed k-major (gemm.h's ember_gemm_pack_a: element (i, k) at a[k * rows + i], every row
 * present): row i's values from a + i at a stride of the tile's rows; lda and mr unused */
#define EMBER_GEMM_T_DECL(i)                                                                 \
  const float* a##i = a + (i);                                                              \
  ember_vf c##i##_0 = ember_vzero(), c##i##_1 = ember_vzero();
#define EMBER_GEMM_T_A_KS EMBER_GEMM_T_ROWS
#else
/* row i's A pointer (row 0 again past mr) and two accumulators */
#define EMBER_GEMM_T_DECL(i)                                                                 \
  const float* a##i = a + (mr > (i) ? (i) : 0) * lda;                                       \
  ember_vf c##i##_0 = ember_vzero(), c##i##_1 = ember_vzero();
#define EMBER_GEMM_T_A_KS 1
#endif
#define EMBER_GEMM_T_LOAD_C(i)                                                               \
  c##i##_0 = ember_vload(c + (i) * ldc);                                                    \
  c##i##_1 = ember_vload(c + (i) * ldc + EMBER_VL);
#define EMBER_GEMM_T_LOAD_TMP(i)                                                             \
  c##i##_0 = ember_vload(tmp + (i) * EMBER_GEMM_NR);                                        \
  c##i##_1 = ember_vload(tmp + (i) * EMBER_GEMM_NR + EMBER_VL);
#define EMBER_GEMM_T_FMA(i)                                                                  \
  t = ember_vset1(a##i[k * EMBER_GEMM_T_A_KS]);                                             \
  c##i##_0 = ember_vfma(t, b0, c##i##_0);                                                   \
  c##i##_1 = ember_vfma(t, b1, c##i##_1);
#define EMBER_GEMM_T_STORE_EPI(i)                                                            \
  ember_vstore(c + (i) * ldc, ember_epi_vec(c##i##_0, e, n0, res_off + (i) * ldc));         \
  ember_vstore(c + (i) * ldc + EMBER_VL,                                                    \
               ember_epi_vec(c##i##_1, e, n0 + EMBER_VL, res_off + (i) * ldc + EMBER_VL));
#define EMBER_GEMM_T_STORE_SCALED(i)                                                         \
  ember_vstore(c + (i) * ldc, ember_epi_scale_bias(c##i##_0, e, n0));                       \
  ember_vstore(c + (i) * ldc + EMBER_VL, ember_epi_scale_bias(c##i##_1, e, n0 + EMBER_VL));
#define EMBER_GEMM_T_STORE_TMP(i)                                                            \
  ember_vstore(tmp + (i) * EMBER_GEMM_NR, c##i##_0);                                        \
  ember_vstore(tmp + (i) * EMBER_GEMM_NR + EMBER_VL, c##i##_1);

static inline void EMBER_GEMM_TILE_NAME(int32_t K, const float* a, int64_t lda, int32_t mr,
                                        const float* b, int64_t b_ks, float* c, int64_t ldc,
                                        int32_t nr, const ember_epilogue* e, int64_t n0,
                                        int64_t res_off, int accumulate, const float* pf,
                                        int64_t pf_ks, int32_t pf_rows) {
  EMBER_GEMM_TILE_EACH(EMBER_GEMM_T_DECL)
  int32_t k;
#if defined(EMBER_GEMM_TILE_PACKED) && EMBER_GEMM_TILE_PACKED
  (void)lda;
#endif
  if (accumulate && mr == EMBER_GEMM_T_ROWS && nr == EMBER_GEMM_NR) {
    /* a later block of k: start from the partial sums in C */
    EMBER_GEMM_TILE_EACH(EMBER_GEMM_T_LOAD_C)
  } else if (accumulate) {
    /* the same for an edge tile, its valid part only */
    float tmp[EMBER_GEMM_T_ROWS * EMBER_GEMM_NR];
    int32_t i, j;
    for (i = 0; i < EMBER_GEMM_T_ROWS; ++i) {
      for (j = 0; j < EMBER_GEMM_NR; ++j) {
        tmp[i * EMBER_GEMM_NR + j] = i < mr && j < nr ? c[i * ldc + j] : 0.0f;
      }
    }
    EMBER_GEMM_TILE_EACH(EMBER_GEMM_T_LOAD_TMP)
  }
#if EMBER_GEMM_TILE_ROWS == 6
  if (mr <= 3) {
    for (k = 0; k < pf_rows; ++k) EMBER_GEMM_PREFETCH_ROW(pf + k * pf_ks);
    ember_gemm_tile3(K, a0, a1, a2, b, b_ks, &c0_0, &c0_1, &c1_0, &c1_1, &c2_0, &c2_1);
  } else
#endif
  {
    /* the first pf_rows steps each prefetch one row of the next panel (pf, row stride pf_ks)
     * into L2: spread over the FMAs, not issued in a burst before the tile, where they would
     * hold the line fill buffers while the tile's own loads wait */
    int32_t kp = pf_rows < K ? pf_rows : K;
    for (k = 0; k < kp; ++k) {
      ember_vf b0 = ember_vload(b), b1 = ember_vload(b + EMBER_VL), t;
      EMBER_GEMM_PREFETCH_ROW(pf + k * pf_ks);
      b += b_ks;
      EMBER_GEMM_TILE_EACH(EMBER_GEMM_T_FMA)
    }
    /* 4 steps of k per iteration: on a Sapphire Rapids core 1-9% faster for 12 rows and
     * 1-6% for 6 (built for AVX2 there) than one (the loop's own instructions and the row
     * offsets reloaded from the stack are paid once per 4 steps) */
#if defined(__clang__)
#pragma unroll 4
#elif defined(__GNUC__)
#pragma GCC unroll 4
#endif
    for (; k < K; ++k) {
      ember_vf b0 = ember_vload(b), b1 = ember_vload(b + EMBER_VL), t;
      b += b_ks;
      EMBER_GEMM_TILE_EACH(EMBER_GEMM_T_FMA)
    }
  }
  if (mr == EMBER_GEMM_T_ROWS && nr == EMBER_GEMM_NR && ember_epi_in_registers(e)) {
    /* full tile, cheap epilogue: the epilogue on the registers, then one store per vector */
    EMBER_GEMM_TILE_EACH(EMBER_GEMM_T_STORE_EPI)
  } else if (mr == EMBER_GEMM_T_ROWS && nr == EMBER_GEMM_NR) {
    /* full tile, costly activation: alpha and bias in registers, stored, then the
     * activations over the block in place */
    EMBER_GEMM_TILE_EACH(EMBER_GEMM_T_STORE_SCALED)
    ember_epi_block_acts(c, ldc, EMBER_GEMM_T_ROWS, EMBER_GEMM_NR, e, res_off, ldc);
  } else {
    /* edge tile: through a buffer (the epilogue there, vectorised), the valid part only */
    float tmp[EMBER_GEMM_T_ROWS * EMBER_GEMM_NR];
    int32_t i, j;
    EMBER_GEMM_TILE_EACH(EMBER_GEMM_T_STORE_TMP)
    if (!ember_epi_is_identity(e)) {
      ember_epi_block(tmp, EMBER_GEMM_NR, mr, nr, e, n0, res_off, ldc);
    }
    for (i = 0; i < mr; ++i) {
      for (j = 0; j < nr; ++j) c[i * ldc + j] = tmp[i * EMBER_GEMM_NR + j];
    }
  }
}

#undef EMBER_GEMM_T_ROWS
#undef EMBER_GEMM_T_DECL
#undef EMBER_GEMM_T_A_KS
#undef EMBER_GEMM_T_LOAD_C
#undef EMBER_GEMM_T_LOAD_TMP
#undef EMBER_GEMM_T_FMA
#undef EMBER_GEMM_T_STORE_EPI
#undef EMBER_GEMM_T_STORE_SCALED
#undef EMBER_GEMM_T_STORE_TMP
#undef EMBER_GEMM_TILE_NAME
#undef EMBER_GEMM_TILE_ROWS
#undef EMBER_GEMM_TILE_EACH
#undef EMBER_GEMM_TILE_PACKED
