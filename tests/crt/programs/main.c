/*
 * main.c -- the application around the model: owns the arena, registers the model's
 * functions, runs it, and prints one "label: ..." line per check for the test to read.
 * "main overrun" writes past a workspace block instead (TVMPlatformAbort must stop it).
 */
#include <stdio.h>
#include <string.h>

#include "ember/crt/crt.h"

#define ARENA_BYTES 4096
#define N 16

extern const EmberFuncRegistry tvmgen_test_func_registry;
int32_t tvmgen_test_run_model(float* a, float* b, float* out, int64_t n, int bad);

/* One byte more, so that the arena can start misaligned (g_arena + 1). */
static unsigned char g_arena[ARENA_BYTES + 1];
static float g_a[1024], g_b[1024], g_out[1024];

static void report(const char* label, int rc) {
  printf("%s: rc=%d code=%s msg=%s\n", label, rc, ember_crt_error_name(ember_crt_last_error_code()),
         TVMGetLastError());
}

static void stats(const char* label) {
  EmberStackAllocatorStats s = ember_crt_workspace_stats();
  printf("%s: used=%lu live=%lu peak=%lu size=%lu\n", label, (unsigned long)s.used,
         (unsigned long)s.live, (unsigned long)s.peak, (unsigned long)s.size);
}

static int run_and_print(const char* label) {
  int i, rc = tvmgen_test_run_model(g_a, g_b, g_out, N, 0);
  printf("%s: %d", label, rc);
  for (i = 0; i < N; ++i) printf(" %g", g_out[i]);
  printf("\n");
  return rc;
}

static void check_lifo(void) {
  void* p1 = TVMBackendAllocWorkspace(kDLCPU, 0, 100, kDLFloat, 32);
  void* p2 = TVMBackendAllocWorkspace(kDLCPU, 0, 0, kDLFloat, 32);
  printf("lifo: p1=%d p2=%d distinct=%d aligned=%d\n", p1 != NULL, p2 != NULL, p1 != p2,
         ((size_t)p1 % EMBER_CRT_WORKSPACE_ALIGNMENT) == 0 &&
             ((size_t)p2 % EMBER_CRT_WORKSPACE_ALIGNMENT) == 0);
  report("free_p1_first", TVMBackendFreeWorkspace(kDLCPU, 0, p1));
  report("busy", ember_crt_init(g_arena, sizeof(g_arena)));
  printf("free_p2: %d\n", TVMBackendFreeWorkspace(kDLCPU, 0, p2));
  printf("free_p1: %d\n", TVMBackendFreeWorkspace(kDLCPU, 0, p1));
  report("double_free", TVMBackendFreeWorkspace(kDLCPU, 0, p1));
  report("device", TVMBackendAllocWorkspace(kDLCUDA, 0, 16, kDLFloat, 32) == NULL ? -1 : 0);
}

static int overrun(void) {
  char* p;
  ember_crt_init(g_arena, sizeof(g_arena));
  p = (char*)TVMBackendAllocWorkspace(kDLCPU, 0, 8, kDLInt, 8);
  memset(p, 1, 9); /* one byte too many */
  TVMBackendFreeWorkspace(kDLCPU, 0, p);
  printf("unreachable\n");
  return 0;
}

int main(int argc, char** argv) {
  int i;
  if (argc > 1 && strcmp(argv[1], "overrun") == 0) return overrun();
  for (i = 0; i < 1024; ++i) {
    g_a[i] = (float)(i - 8);
    g_b[i] = 0.25f * (float)i;
  }
  report("uninit", tvmgen_test_run_model(g_a, g_b, g_out, N, 0));
  printf("init: %d\n", ember_crt_init(g_arena + 1, ARENA_BYTES));
  report("unregistered", tvmgen_test_run_model(g_a, g_b, g_out, N, 0));
  printf("register: %d\n", ember_crt_register_func_registry(&tvmgen_test_func_registry));
  run_and_print("run");
  stats("after_run");
  report("bad_call", tvmgen_test_run_model(g_a, g_b, g_out, N, 1));
  report("missing", tvmgen_test_run_model(g_a, g_b, g_out, N, 2));
  report("exhausted", tvmgen_test_run_model(g_a, g_b, g_out, 600, 0));
  stats("after_errors");
  check_lifo();
  stats("after_lifo");
  run_and_print("rerun");
  printf("done\n");
  return 0;
}
