/* ember/kernels/gemm.h as a shared library for ctypes (tests/topi/test_gemm_tails.py): the
 * standalone header, harness_backend.h's workspace and launch (its tasks in turn, as many as
 * `tasks` says), and one exported entry with the kernel's arguments. */
#include "ember/kernels/gemm.h"
#include "harness_backend.h"
int32_t gemm_lanes(void) { return EMBER_VL; }
/* C = act(A B + bias) + R, B packed in panels of b_nr (0: B is (K, N) row-major) */
int32_t gemm_call(int32_t M, int32_t N, int32_t K, const float* A, const float* B, int32_t b_nr,
                  float* C, const float* bias, const float* R, int32_t act, int32_t mc,
                  int32_t kc, int32_t tasks) {
  harness_tasks = tasks;
  return ember_sgemm(1, M, N, K, A, 0, K, B, 0, b_nr ? 0 : N, b_nr ? 0 : 1, b_nr, C, 0, N, 1.0f,
                     2, bias, R ? 2 : 0, R, act, 0.5f, 0.7978845608f, 0, 0.0f, 0.0f, mc, kc,
                     tasks > 1, 1, 0, 0, 0);
}
/* The same with B at any strides: element (k, n) at B[k * b_ks + n * b_ns] (b_nr 0), or
 * packed in panels of b_nr columns of any width */
int32_t gemm_call_b(int32_t M, int32_t N, int32_t K, const float* A, const float* B,
                    int32_t b_ks, int32_t b_ns, int32_t b_nr, float* C, const float* bias,
                    int32_t mc, int32_t kc, int32_t tasks) {
  harness_tasks = tasks;
  return ember_sgemm(1, M, N, K, A, 0, K, B, 0, b_ks, b_ns, b_nr, C, 0, N, 1.0f, 2, bias, 0, C,
                     0, 0.0f, 0.0f, 0, 0.0f, 0.0f, mc, kc, tasks > 1, 1, 0, 0,
                     0);
}
