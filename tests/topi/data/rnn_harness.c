/* ctypes entry points for ember/kernels/rnn.h, built by tests/topi/test_rnn_kernel.py at each
 * SIMD level (-march=..., -DEMBER_KERNELS_PORTABLE). The parallel launch runs 3 tasks one
 * after the other (so two directions split over tasks, one task idle, is exercised); the
 * workspace is malloc. */
#include <stdint.h>
#include <stdlib.h>
#include "ember/kernels/rnn.h"

void* TVMBackendAllocWorkspace(int a, int b, uint64_t n, int c, int d) {
  (void)a;
  (void)b;
  (void)c;
  (void)d;
  return malloc(n);
}

int TVMBackendFreeWorkspace(int a, int b, void* p) {
  (void)a;
  (void)b;
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

const char* harness_simd_name(void) { return EMBER_SIMD_NAME; }

int harness_gemm_nr(void) { return EMBER_GEMM_NR; }

int harness_rnn(int32_t cell, int32_t seq, int32_t batch, int32_t hidden, int32_t direction,
                const float* proj, const float* R, int32_t r_nr, const float* bias,
                const float* extra, const float* h0, const float* c0, const int64_t* lens,
                int32_t acts, const float* act_p, float clip, int32_t flags, float* scratch,
                float* Y, float* Y_h, float* Y_c, int32_t parallel) {
  return ember_rnn(cell, seq, batch, hidden, direction, proj, R, r_nr, bias, extra != 0, extra,
                   h0 != 0, h0, c0 != 0, c0, lens != 0, lens, acts, act_p, clip, flags,
                   scratch, Y, Y_h, Y_c, parallel);
}
