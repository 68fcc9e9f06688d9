/* Test harness of ember/kernels/conv_nchw_input.h: the entry point behind one C function that
 * takes its sizes as an array (one compiled library per SIMD level serves every test shape).
 * The parallel launch runs `tasks` tasks one after another, which exercises the work split. */
#include "ember/kernels/conv_nchw_input.h"

#include "harness_tasks.h"
#include "harness_workspace.h"

/* s: n ic h w ocb oh ow kh kw sh sw dh dw pt pl act flags rw rows blocks threads */
int harness_conv_nchw_input(int lanes, const float* in, const float* w, const float* b,
                            const float* res, float* out, const int32_t* s, float lo,
                            float hi) {
#define HARNESS_CALL(L)                                                                        \
  ember_conv2d_nchw_input_x##L(in, w, b, res, out, s[0], s[1], s[2], s[3], s[4], s[5], s[6],  \
                               s[7], s[8], s[9], s[10], s[11], s[12], s[13], s[14], s[15], lo, \
                               hi, s[16], s[17], s[18], s[19], s[20])
  HARNESS_BY_LANES(lanes)
#undef HARNESS_CALL
}
