/* ctypes entry points for ember/kernels/softmax.h and norm.h, built by
 * tests/topi/test_norm_kernels.py at each SIMD level (-march=..., -DEMBER_KERNELS_PORTABLE).
 * The parallel launch runs 3 tasks one after the other (or last to first), so the work split is
 * exercised. */
#include <stdint.h>
#include "ember/kernels/norm.h"
#include "ember/kernels/softmax.h"
#include "harness_backend.h"

const char* harness_simd_name(void) { return EMBER_SIMD_NAME; }

void harness_set_reverse(int reverse) { harness_reverse = reverse; }

int harness_softmax(const float* x, float* y, int64_t outer, int64_t n, int64_t inner,
                    int32_t log, int32_t parallel) {
  return ember_softmax(x, y, outer, n, inner, log, parallel);
}

int harness_layer_norm(const float* x, float* y, int64_t outer, int64_t n, int64_t inner,
                       const float* gamma, const float* beta, float eps, int32_t parallel) {
  return ember_layer_norm(x, y, outer, n, inner, gamma != 0, gamma, beta != 0, beta, eps,
                          parallel);
}

int harness_layer_norm_act(const float* x, float* y, int64_t outer, int64_t n, int64_t inner,
                           const float* gamma, const float* beta, float eps,
                           const float* row_scale, const float* row_shift, int64_t row_count,
                           int64_t row_div, int32_t act, float p0, float p1, int32_t parallel) {
  return ember_layer_norm_act(x, y, outer, n, inner, gamma != 0, gamma, beta != 0, beta, eps,
                              row_scale != 0, row_scale, row_shift != 0, row_shift, row_count,
                              row_div, act, p0, p1, parallel);
}

int harness_rms_norm(const float* x, float* y, int64_t outer, int64_t n, int64_t inner,
                     const float* gamma, float eps, int32_t parallel) {
  return ember_rms_norm(x, y, outer, n, inner, gamma != 0, gamma, eps, parallel);
}
