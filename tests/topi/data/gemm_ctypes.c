/* ember/kernels/gemm.h as a shared library for ctypes (tests/topi/test_gemm_tails.py): the
 * standalone header, serial workspace and launch stubs (a launch runs its tasks in turn, as
 * many as `tasks` says), and one exported entry with the kernel's arguments. */
#include <stdlib.h>
#include "ember/kernels/gemm.h"
static int g_tasks = 1;
void* TVMBackendAllocWorkspace(int a, int b, uint64_t n, int c, int d) {
  (void)a; (void)b; (void)c; (void)d;
  return malloc(n);
}
int TVMBackendFreeWorkspace(int a, int b, void* p) {
  (void)a; (void)b;
  free(p);
  return 0;
}
int TVMBackendParallelLaunch(FTVMParallelLambda f, void* c, int n) {
  TVMParallelGroupEnv e;
  int i;
  (void)n;
  e.num_task = g_tasks;
  e.sync_handle = 0;
  for (i = 0; i < g_tasks; ++i) {
    if (f(i, &e, c)) return -1;
  }
  return 0;
}
int32_t gemm_lanes(void) { return EMBER_VL; }
/* C = act(A B + bias) + R, B packed in panels of b_nr (0: B is (K, N) row-major) */
int32_t gemm_call(int32_t M, int32_t N, int32_t K, const float* A, const float* B, int32_t b_nr,
                  float* C, const float* bias, const float* R, int32_t act, int32_t mc,
                  int32_t kc, int32_t tasks) {
  g_tasks = tasks;
  return ember_sgemm(1, M, N, K, A, 0, K, B, 0, b_nr ? 0 : N, b_nr ? 0 : 1, b_nr, C, 0, N, 1.0f,
                     2, bias, R ? 2 : 0, R, act, 0.5f, 0.7978845608f, 0, 0.0f, 0.0f, mc, kc,
                     tasks > 1);
}
