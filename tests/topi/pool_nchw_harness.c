/* Test harness of ember/kernels/pool_nchw.h: the entry points behind C functions that take
 * the sizes as an array. The parallel launch runs `tasks` tasks one after another, which
 * exercises the work split. */
#include "ember/kernels/pool_nchw.h"

#include "harness_tasks.h"

/* s: n c h w oh ow kh kw sh sw dh dw pt pl pb pr avg include_pad */
int harness_pool(int tasks, const float* in, float* out, const int32_t* s) {
  harness_tasks = tasks;
  return ember_pool2d_nchw(in, out, s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7], s[8], s[9],
                           s[10], s[11], s[12], s[13], s[14], s[15], s[16], s[17], tasks > 1);
}

/* s: n c h w avg */
int harness_global_pool(int tasks, const float* in, float* out, const int32_t* s) {
  harness_tasks = tasks;
  return ember_global_pool_nchw(in, out, s[0], s[1], s[2], s[3], s[4], tasks > 1);
}
