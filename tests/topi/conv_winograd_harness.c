/* Test harness of ember/kernels/conv_winograd.h: each lane count behind one C function that
 * takes its sizes as an array. The parallel launch runs `tasks` tasks one after another
 * (harness_tasks.h); the workspace can be withheld (harness_workspace.h). */
#include "ember/kernels/conv_winograd.h"

#include "harness_tasks.h"
#include "harness_workspace.h"

/* s: n icb h w ocb oh ow pt pl m act flags tiles blocks threads */
int harness_wino(int lanes, const float* in, const float* u, const float* b, const float* res,
                 float* out, const int32_t* s, float lo, float hi) {
#define HARNESS_CALL(L)                                                                      \
  ember_conv_winograd_x##L(in, u, b, res, out, s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7], \
                           s[8], s[9], s[10], lo, hi, s[11], s[12], s[13], s[14])
  HARNESS_BY_LANES(lanes)
#undef HARNESS_CALL
}
