/* The parallel launch of the NCHWc kernel harnesses (conv, depthwise, pool, layout): it runs
 * `harness_tasks` tasks one after another on the calling thread, whatever the kernel asked
 * for, which exercises a kernel's work split. Include after the kernel header. */
#ifndef EMBER_TESTS_HARNESS_TASKS_H_
#define EMBER_TESTS_HARNESS_TASKS_H_

static int harness_tasks = 1;
/* harness_watch: after each task, the output floats it wrote (NaN before it: the tests fill
 * the output with NaNs) are marked with its number in owner (-1 before) */
static const float* harness_watched;
static long harness_watched_size;
static int* harness_owner;

int TVMBackendParallelLaunch(FTVMParallelLambda flambda, void* cdata, int num_task) {
  TVMParallelGroupEnv env;
  int i, rc = 0;
  long k;
  (void)num_task;
  env.sync_handle = 0;
  env.num_task = harness_tasks;
  for (i = 0; i < harness_tasks; ++i) {
    rc |= flambda(i, &env, cdata);
    for (k = 0; harness_owner != NULL && k < harness_watched_size; ++k)
      if (harness_owner[k] < 0 && harness_watched[k] == harness_watched[k]) harness_owner[k] = i;
  }
  return rc;
}

void harness_set_tasks(int tasks) { harness_tasks = tasks; }

/* Mark in owner (size ints, -1 each) which task wrote each float of out[0, size); out NULL:
 * stop. */
void harness_watch(const float* out, long size, int* owner) {
  harness_watched = out;
  harness_watched_size = size;
  harness_owner = out != NULL ? owner : NULL;
}

/* The entry point of `lanes` lanes through the harness's HARNESS_CALL(L); -1 for another
 * lane count (harnesses built with every lane count). */
#define HARNESS_BY_LANES(lanes)                                                              \
  switch (lanes) {                                                                           \
    case 4: return HARNESS_CALL(4);                                                          \
    case 8: return HARNESS_CALL(8);                                                          \
    case 16: return HARNESS_CALL(16);                                                        \
    default: return -1;                                                                      \
  }

#endif /* EMBER_TESTS_HARNESS_TASKS_H_ */
