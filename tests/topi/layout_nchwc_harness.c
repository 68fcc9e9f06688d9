/* Test harness of ember/kernels/layout_nchwc.h: the entry point behind a function with
 * external linkage; the parallel launch runs `tasks` tasks one after another, which checks
 * the work split. */
#include "ember/kernels/layout_nchwc.h"

#include "harness_tasks.h"

int harness_layout(const float* in, float* out, int32_t n, int32_t c, int32_t hw,
                   int32_t block, int32_t to_blocked, int32_t tasks) {
  harness_tasks = tasks;
  return ember_layout_nchwc(in, out, n, c, hw, block, to_blocked, tasks > 1);
}

int harness_layout_nhwc(const float* in, float* out, int32_t n, int32_t c, int32_t hw,
                        int32_t block, int32_t to_blocked, int32_t tasks) {
  harness_tasks = tasks;
  return ember_layout_nhwc(in, out, n, c, hw, block, to_blocked, tasks > 1);
}
