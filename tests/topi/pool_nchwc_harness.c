/* Test harness of ember/kernels/pool_nchwc.h: the entry points behind one C function that
 * takes the sizes as an array. The parallel launch runs `tasks` tasks one after another,
 * which exercises the work split. */
#include "ember/kernels/pool_nchwc.h"

#include "harness_tasks.h"

/* s: n cblocks h w oh ow kh kw sh sw dh dw pt pl pb pr avg include_pad relu; scale and
 * shift: the epilogue's per-channel vectors, or NULL */
int harness_pool(int lanes, int tasks, const float* in, float* out, const int32_t* s,
                 const float* scale, const float* shift) {
  harness_tasks = tasks;
#define HARNESS_CALL(L)                                                                      \
  ember_pool2d_nchwc_x##L(in, out, s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7], s[8], s[9], \
                          s[10], s[11], s[12], s[13], s[14], s[15], s[16], s[17], tasks > 1, scale, shift, \
                          s[18])
  HARNESS_BY_LANES(lanes)
#undef HARNESS_CALL
}
