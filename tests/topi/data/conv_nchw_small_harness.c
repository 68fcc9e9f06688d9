/* ctypes entry point for ember/kernels/conv_nchw_small.h, built by
 * tests/topi/test_conv2d_nchw_small.py at each SIMD level (-march=..., -DEMBER_KERNELS_PORTABLE).
 * The parallel launch runs 3 tasks (harness_backend.h; last to first when asked); the
 * workspace may be refused. */
#include <stdint.h>
#include "ember/kernels/conv_nchw_small.h"
#include "harness_backend.h"

const char* harness_simd_name(void) { return EMBER_SIMD_NAME; }

/* s: n ic h w oc oh ow kh kw sh sw dh dw pt pl parallel reverse no_workspace */
int harness_conv_nchw_small(const float* in, const float* w, float* out, const int32_t* s) {
  harness_reverse = s[16];
  harness_no_workspace = s[17];
  return ember_conv2d_nchw_small(in, w, out, s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7],
                                 s[8], s[9], s[10], s[11], s[12], s[13], s[14], s[15]);
}
