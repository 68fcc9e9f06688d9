/* ember/kernels/gemm.h as a shared library for tests/topi/test_gemm_tiles.py: the backend
 * hooks the kernel calls (a parallel launch runs 3 tasks in turn) and an exported entry. */
#include "ember/kernels/gemm.h"
#include "harness_backend.h"
int32_t gemm_register_rows(void) { return EMBER_GEMM_MR; }
int32_t gemm_panel_width(void) { return EMBER_GEMM_NR; }
int32_t test_sgemm(EMBER_SGEMM_PARAMS) {
  return ember_sgemm(batch, M, N, K, A, a_bs, lda, B, b_bs, b_ks, b_ns, b_nr, C, c_bs, ldc, alpha,
                     bias_mode, bias, res_mode, res, act1, p1a, p1b, act2, p2a, p2b, mc, kc,
                     parallel, heads, a_hs, b_hs, c_hs);
}
