/* The backend API a kernel harness links against, in place of ember's runtime: workspace from
 * malloc, and a parallel launch that runs harness_tasks (3 unless the harness sets it) tasks
 * one after the other, last to first when harness_reverse is set (so a kernel's work split is
 * exercised, with more tasks than some kernels have work items). */
#ifndef EMBER_TESTS_HARNESS_BACKEND_H_
#define EMBER_TESTS_HARNESS_BACKEND_H_

#include <stdint.h>
#include <stdlib.h>

#include "ember/c_backend_api.h"

/* set: no workspace, as a C-runtime arena with no room gives */
static int harness_no_workspace = 0;

void* TVMBackendAllocWorkspace(int a, int b, uint64_t n, int c, int d) {
  (void)a;
  (void)b;
  (void)c;
  (void)d;
  return harness_no_workspace ? NULL : malloc(n);
}

int TVMBackendFreeWorkspace(int a, int b, void* p) {
  (void)a;
  (void)b;
  free(p);
  return 0;
}

static int harness_tasks = 3;
/* set: the tasks run last to first, so a task that writes past its share is caught */
static int harness_reverse = 0;

int TVMBackendParallelLaunch(FTVMParallelLambda f, void* cdata, int n) {
  TVMParallelGroupEnv env;
  int i;
  (void)n;
  env.num_task = harness_tasks;
  env.sync_handle = 0;
  for (i = 0; i < harness_tasks; ++i) {
    if (f(harness_reverse ? harness_tasks - 1 - i : i, &env, cdata)) return -1;
  }
  return 0;
}

#endif /* EMBER_TESTS_HARNESS_BACKEND_H_ */
