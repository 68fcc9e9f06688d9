/*
 * bundle.c -- a model, its params and the C runtime in one executable: no Python, no loader,
 * no malloc (every byte the runtime uses comes from one static arena).
 *
 *   bundle INPUT.bin OUTPUT.bin
 *
 * The graph executor of the C runtime (ember/crt/executor) reads the graph JSON and params
 * compiled in (bundle_data.c), finds the kernels in the model's function table
 * (tvmgen_default_func_registry, model.c) and runs. It prints the arena's peak use: the
 * program's whole heap.
 */
#include <stdio.h>

#include "ember/crt/crt.h"
#include "ember/crt/graph_executor.h"

#ifndef BUNDLE_ARENA_BYTES
#define BUNDLE_ARENA_BYTES (8u << 20)
#endif

extern const unsigned char ember_graph_json[];
extern const unsigned long ember_graph_json_len;
extern const unsigned char ember_params[];
extern const unsigned long ember_params_len;
extern const EmberFuncRegistry tvmgen_default_func_registry;

static uint8_t g_arena[BUNDLE_ARENA_BYTES] __attribute__((aligned(64)));

static int find_function(void* ctx, const char* name, TVMFunctionHandle* out) {
  (void)ctx;
  return TVMFuncGetGlobal(name, out);
}

static int fail(const char* what) {
  fprintf(stderr, "bundle: %s failed: %s (%s)\n", what, TVMGetLastError(),
          ember_crt_error_name(ember_crt_last_error_code()));
  return 1;
}

static size_t nbytes(const DLTensor* t) {
  size_t n = (size_t)((t->dtype.bits * t->dtype.lanes + 7) / 8);
  int32_t i;
  for (i = 0; i < t->ndim; ++i) n *= (size_t)t->shape[i];
  return n;
}

int main(int argc, char** argv) {
  EmberExecutorEnv env = {NULL, find_function, NULL};
  DLDevice cpu = {kDLCPU, 0};
  EmberGraphExecutor* ex;
  DLTensor *in, *out;
  EmberStackAllocatorStats stats;
  FILE* f;
  if (argc != 3) {
    fprintf(stderr, "usage: bundle INPUT.bin OUTPUT.bin\n");
    return 2;
  }
  if (ember_crt_init(g_arena, sizeof(g_arena)) != 0) return fail("ember_crt_init");
  if (ember_crt_register_func_registry(&tvmgen_default_func_registry) != 0) {
    return fail("ember_crt_register_func_registry");
  }
  if (ember_graph_executor_create((const char*)ember_graph_json, ember_graph_json_len, &env, cpu,
                                  &ex) != 0) {
    return fail("ember_graph_executor_create");
  }
  if (ember_graph_executor_load_params(ex, ember_params, ember_params_len) != 0) {
    return fail("load_params");
  }
  if (ember_graph_executor_input(ex, 0, &in) != 0) return fail("get_input");
  f = fopen(argv[1], "rb");
  if (f == NULL || fread(in->data, 1, nbytes(in), f) != nbytes(in)) {
    fprintf(stderr, "bundle: %s must hold %lu bytes\n", argv[1], (unsigned long)nbytes(in));
    return 1;
  }
  fclose(f);
  if (ember_graph_executor_run(ex) != 0) return fail("run");
  if (ember_graph_executor_output(ex, 0, &out) != 0) return fail("get_output");
  f = fopen(argv[2], "wb");
  if (f == NULL || fwrite(out->data, 1, nbytes(out), f) != nbytes(out)) return 1;
  fclose(f);
  stats = ember_crt_workspace_stats();
  printf("peak heap: %lu bytes (arena of %lu bytes; graph JSON %lu bytes, params %lu bytes)\n",
         (unsigned long)stats.peak, (unsigned long)stats.size,
         (unsigned long)ember_graph_json_len, (unsigned long)ember_params_len);
  ember_graph_executor_release(ex);
  stats = ember_crt_workspace_stats();
  printf("live blocks after release: %u\n", (unsigned)stats.live);
  return 0;
}
