/* Test harness of ember/kernels/channel_shuffle.h: the entry point behind a function with
 * external linkage; the parallel launch runs `tasks` tasks one after another, which checks
 * the work split. */
#include "ember/kernels/channel_shuffle.h"

#include "harness_tasks.h"

int harness_shuffle(const float* a, const float* b, float* out, int32_t n, int32_t ca,
                    int32_t cb, int32_t hw, int32_t block, int32_t out_block, int32_t groups,
                    int32_t begin, int32_t end, int32_t tasks) {
  harness_tasks = tasks;
  return ember_channel_shuffle_nchwc(a, b, out, n, ca, cb, hw, block, out_block, groups, begin,
                                     end, tasks > 1);
}
