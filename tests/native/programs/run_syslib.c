/*
 * run_syslib.c -- run a graph whose kernels are linked into this program (system-lib).
 *
 *   run_syslib GRAPH.json PARAMS INPUT.bin OUTPUT.bin
 *
 * runtime.SystemLib gives the module of the kernels that registered themselves at start-up;
 * tvm.graph_executor.create builds the executor on it; load_params, set input 0, run, and
 * output 0 is written out.
 */
#include <stdio.h>
#include <stdlib.h>

#include "ember/c_runtime_api.h"

static char* read_all(const char* path, size_t* size) {
  FILE* f = fopen(path, "rb");
  char* buf;
  long n;
  if (f == NULL) return NULL;
  fseek(f, 0, SEEK_END);
  n = ftell(f);
  fseek(f, 0, SEEK_SET);
  buf = (char*)malloc((size_t)n + 1);
  if (fread(buf, 1, (size_t)n, f) != (size_t)n) n = 0;
  fclose(f);
  buf[n] = '\0';
  *size = (size_t)n;
  return buf;
}

static int fail(const char* what) {
  fprintf(stderr, "%s: %s\n", what, TVMGetLastError());
  return 1;
}

int main(int argc, char** argv) {
  TVMFunctionHandle syslib_fn, create, load, get_input, run, get_output;
  TVMValue args[4], ret;
  int codes[4] = {kTVMStr, kTVMModuleHandle, kTVMArgInt, kTVMArgInt}, code;
  TVMModuleHandle syslib, ex;
  TVMByteArray bytes;
  size_t json_size, params_size, in_size;
  char *json, *params, *input;
  DLTensor* t;
  FILE* f;
  if (argc != 5) return 2;
  json = read_all(argv[1], &json_size);
  params = read_all(argv[2], &params_size);
  input = read_all(argv[3], &in_size);
  if (TVMFuncGetGlobal("runtime.SystemLib", &syslib_fn) ||
      TVMFuncCall(syslib_fn, NULL, NULL, 0, &ret, &code)) {
    return fail("runtime.SystemLib");
  }
  syslib = ret.v_handle;
  if (TVMFuncGetGlobal("tvm.graph_executor.create", &create)) return fail("create");
  args[0].v_str = json;
  args[1].v_handle = syslib;
  args[2].v_int64 = kDLCPU;
  args[3].v_int64 = 0;
  if (TVMFuncCall(create, args, codes, 4, &ret, &code)) return fail("tvm.graph_executor.create");
  ex = ret.v_handle;
  if (TVMModGetFunction(ex, "load_params", 0, &load) ||
      TVMModGetFunction(ex, "get_input", 0, &get_input) ||
      TVMModGetFunction(ex, "run", 0, &run) ||
      TVMModGetFunction(ex, "get_output", 0, &get_output)) {
    return fail("TVMModGetFunction");
  }
  bytes.data = params;
  bytes.size = params_size;
  args[0].v_handle = &bytes;
  codes[0] = kTVMBytes;
  if (TVMFuncCall(load, args, codes, 1, &ret, &code)) return fail("load_params");
  args[0].v_int64 = 0;
  codes[0] = kTVMArgInt;
  if (TVMFuncCall(get_input, args, codes, 1, &ret, &code)) return fail("get_input");
  t = (DLTensor*)ret.v_handle;
  if (TVMArrayCopyFromBytes(t, input, in_size)) return fail("TVMArrayCopyFromBytes");
  if (TVMFuncCall(run, NULL, NULL, 0, &ret, &code)) return fail("run");
  if (TVMFuncCall(get_output, args, codes, 1, &ret, &code)) return fail("get_output");
  t = (DLTensor*)ret.v_handle;
  f = fopen(argv[4], "wb");
  fwrite(t->data, 4, (size_t)(t->shape[0] * t->shape[1]), f);
  fclose(f);
  TVMFuncFree(load);
  TVMFuncFree(get_input);
  TVMFuncFree(run);
  TVMFuncFree(get_output);
  TVMFuncFree(create);
  TVMFuncFree(syslib_fn);
  TVMModFree(ex);
  TVMModFree(syslib);
  free(json);
  free(params);
  free(input);
  return 0;
}
