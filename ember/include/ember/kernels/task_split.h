/*!
 * \file ember/kernels/task_split.h
 * \brief Where a task's share of a parallel kernel's work items starts: at equal shares of
 *        the work, not of the item count, since items differ in size (a short last strip or
 *        row block, a one-block last group). Used by the conv (conv_nchwc.h) and GEMM
 *        (gemm.h) launches.
 */
#ifndef EMBER_KERNELS_TASK_SPLIT_H_
#define EMBER_KERNELS_TASK_SPLIT_H_

#include <stdint.h>

/* The work of the items before `item` of the kernel whose arguments are `args`: it grows
 * with item, and at the item count it is the whole. */
typedef int64_t (*ember_work_before_fn)(const void* args, int64_t item);

/* The first item of task `task` of `tasks` (`items` for task == tasks): the first one whose
 * work before it reaches task / tasks of the whole, found by bisection. */
static inline int64_t ember_task_start(ember_work_before_fn work_before, const void* args,
                                       int64_t items, int64_t task, int64_t tasks) {
  const int64_t goal = work_before(args, items) * task / tasks; /* < 2^63: 64 tasks */
  int64_t lo = 0, hi = items;
  if (task >= tasks) return items;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (work_before(args, mid) < goal) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

#endif /* EMBER_KERNELS_TASK_SPLIT_H_ */
