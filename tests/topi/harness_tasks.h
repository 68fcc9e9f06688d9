/* The parallel launch of the NCHWc kernel harnesses (conv, depthwise, pool, layout): it runs
 * `harness_tasks` tasks one after another on the calling thread, whatever the kernel asked
 * for, which exercises a kernel's work split. Include after the kernel header. */
#ifndef EMBER_TESTS_HARNESS_TASKS_H_
#define EMBER_TESTS_HARNESS_TASKS_H_

static int harness_tasks = 1;

int TVMBackendParallelLaunch(FTVMParallelLambda flambda, void* cdata, int num_task) {
  TVMParallelGroupEnv env;
  int i, rc = 0;
  (void)num_task;
  env.sync_handle = 0;
  env.num_task = harness_tasks;
  for (i = 0; i < harness_tasks; ++i) rc |= flambda(i, &env, cdata);
  return rc;
}

void harness_set_tasks(int tasks) { harness_tasks = tasks; }

#endif /* EMBER_TESTS_HARNESS_TASKS_H_ */
