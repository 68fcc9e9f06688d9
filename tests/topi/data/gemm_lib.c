/* ember/kernels/gemm.h as a shared library for tests/topi/test_gemm_tiles.py: the backend
 * hooks the kernel calls (a parallel launch runs 3 tasks in turn) and an exported entry. */
#include <stdlib.h>
#include "ember/kernels/gemm.h"
void* TVMBackendAllocWorkspace(int a, int b, uint64_t n, int c, int d) {
  (void)a; (void)b; (void)c; (void)d;
  return malloc(n);
}
int TVMBackendFreeWorkspace(int a, int b, void* p) {
  (void)a; (void)b;
  free(p);
  return 0;
}
int TVMBackendParallelLaunch(FTVMParallelLambda f, void* cdata, int n) {
  TVMParallelGroupEnv env;
  int i;
  (void)n;
  env.num_task = 3;
  env.sync_handle = 0;
  for (i = 0; i < 3; ++i) {
    if (f(i, &env, cdata)) return -1;
  }
  return 0;
}
int32_t gemm_register_rows(void) { return EMBER_GEMM_MR; }
int32_t gemm_panel_width(void) { return EMBER_GEMM_NR; }
int32_t test_sgemm(EMBER_SGEMM_PARAMS) {
  return ember_sgemm(batch, M, N, K, A, a_bs, lda, B, b_bs, b_ks, b_ns, b_nr, C, c_bs, ldc, alpha,
                     bias_mode, bias, res_mode, res, act1, p1a, p1b, act2, p2a, p2b, mc, kc,
                     parallel);
}
