/* ctypes entry points for ember/kernels/rnn.h, built by tests/topi/test_rnn_kernel.py at each
 * SIMD level (-march=..., -DEMBER_KERNELS_PORTABLE). The parallel launch of harness_backend.h
 * runs 3 tasks (two directions split over tasks, one task idle). */
#include <stdint.h>

#include "ember/kernels/rnn.h"
#include "harness_backend.h"

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
