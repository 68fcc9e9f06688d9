/*
 * crt_aot.c -- the AOT executor of the C runtime (ember/crt/executor) on a firmware-style
 * build: no Python, no malloc, one static arena.
 *
 *   crt_aot INPUT.bin OUTPUT.bin
 *
 * The model's metadata and params are arrays (data.c), its functions the registry of
 * model.c. Before the real run it checks that run refuses unset inputs.
 */
#include <stdio.h>

#include "ember/crt/aot_executor.h"
#include "ember/crt/crt.h"

extern const unsigned char ember_metadata[];
extern const unsigned long ember_metadata_len;
extern const unsigned char ember_params[];
extern const unsigned long ember_params_len;
extern const EmberFuncRegistry tvmgen_default_func_registry;

static uint8_t g_arena[4u << 20] __attribute__((aligned(64)));

static int find_function(void* ctx, const char* name, TVMFunctionHandle* out) {
  (void)ctx;
  return TVMFuncGetGlobal(name, out);
}

static int fail(const char* what) {
  fprintf(stderr, "crt_aot: %s failed: %s\n", what, TVMGetLastError());
  return 1;
}

int main(int argc, char** argv) {
  EmberExecutorEnv env = {NULL, find_function, NULL};
  DLDevice cpu = {kDLCPU, 0};
  EmberAotExecutor* ex;
  DLTensor *in, *out;
  size_t n = 1;
  int32_t i;
  FILE* f;
  if (argc != 3) return 2;
  if (ember_crt_init(g_arena, sizeof(g_arena)) != 0) return fail("ember_crt_init");
  if (ember_crt_register_func_registry(&tvmgen_default_func_registry) != 0) {
    return fail("register");
  }
  if (ember_aot_executor_create((const char*)ember_metadata, ember_metadata_len, &env, cpu,
                                &ex) != 0) {
    return fail("ember_aot_executor_create");
  }
  printf("before set_input: %d %s\n", (int)ember_aot_executor_run(ex), TVMGetLastError());
  if (ember_params_len > 0 && ember_aot_executor_load_params(ex, ember_params, ember_params_len)) {
    return fail("load_params");
  }
  if (ember_aot_executor_input(ex, 0, &in) != 0) return fail("input");
  for (i = 0; i < in->ndim; ++i) n *= (size_t)in->shape[i];
  f = fopen(argv[1], "rb");
  if (f == NULL || fread(in->data, 4, n, f) != n) return fail("reading the input");
  fclose(f);
  if (ember_aot_executor_set_input(ex, 0, in) != 0) return fail("set_input");
  if (ember_aot_executor_run(ex) != 0) return fail("run");
  if (ember_aot_executor_output(ex, 0, &out) != 0) return fail("output");
  n = 1;
  for (i = 0; i < out->ndim; ++i) n *= (size_t)out->shape[i];
  f = fopen(argv[2], "wb");
  if (f == NULL || fwrite(out->data, 4, n, f) != n) return 1;
  fclose(f);
  printf("peak heap: %lu bytes\n", (unsigned long)ember_crt_workspace_stats().peak);
  ember_aot_executor_release(ex);
  printf("live blocks after release: %u\n", (unsigned)ember_crt_workspace_stats().live);
  return 0;
}
