/*
 * run_model.c -- load an exported ember library with the native runtime and run it.
 *
 *   run_model LIB OUT_PREFIX [IN0.bin IN1.bin ...]
 *
 * Creates the executor of the library's factory ("default") on the CPU, sets input i from
 * the raw bytes of INi.bin (the input's own dtype and shape), runs, and writes output j's
 * bytes to OUT_PREFIX<j>.bin. Prints the model's input and output counts. Any failure prints
 * TVMGetLastError() and exits 1.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ember/c_runtime_api.h"

static int fail(const char* what) {
  fprintf(stderr, "%s failed: %s\n", what, TVMGetLastError());
  return 1;
}

/* Call f with up to two arguments; the result in *ret. */
static int call(TVMFunctionHandle f, int n, TVMValue* args, int* codes, TVMValue* ret,
                int* ret_code) {
  return TVMFuncCall(f, args, codes, n, ret, ret_code);
}

static int get(TVMModuleHandle mod, const char* name, TVMFunctionHandle* out) {
  return TVMModGetFunction(mod, name, 0, out);
}

static size_t nbytes(const DLTensor* t) {
  size_t n = (size_t)((t->dtype.bits * t->dtype.lanes + 7) / 8);
  int i;
  for (i = 0; i < t->ndim; ++i) n *= (size_t)t->shape[i];
  return n;
}

int main(int argc, char** argv) {
  TVMModuleHandle lib, ex;
  TVMFunctionHandle create, set_input, get_input, run, get_output, num_in, num_out;
  TVMValue args[2], ret;
  int codes[2], ret_code, i, n_in, n_out;
  if (argc < 3) {
    fprintf(stderr, "usage: run_model LIB OUT_PREFIX [IN0.bin ...]\n");
    return 2;
  }
  if (TVMModLoadFromFile(argv[1], "so", &lib) != 0) return fail("TVMModLoadFromFile");
  if (get(lib, "default", &create) != 0) return fail("TVMModGetFunction(default)");
  args[0].v_device.device_type = kDLCPU;
  args[0].v_device.device_id = 0;
  codes[0] = kDLDevice;
  if (call(create, 1, args, codes, &ret, &ret_code) != 0) return fail("default(cpu)");
  ex = ret.v_handle;
  if (get(ex, "set_input", &set_input) || get(ex, "get_input", &get_input) ||
      get(ex, "run", &run) || get(ex, "get_output", &get_output) ||
      get(ex, "get_num_inputs", &num_in) || get(ex, "get_num_outputs", &num_out)) {
    return fail("TVMModGetFunction");
  }
  if (call(num_in, 0, NULL, NULL, &ret, &ret_code) != 0) return fail("get_num_inputs");
  n_in = (int)ret.v_int64;
  if (call(num_out, 0, NULL, NULL, &ret, &ret_code) != 0) return fail("get_num_outputs");
  n_out = (int)ret.v_int64;
  printf("inputs %d outputs %d\n", n_in, n_out);
  for (i = 0; i + 3 < argc && i < n_in; ++i) {
    DLTensor* slot;
    TVMArrayHandle arr;
    FILE* f;
    size_t size;
    void* buf;
    args[0].v_int64 = i;
    codes[0] = kTVMArgInt;
    if (call(get_input, 1, args, codes, &ret, &ret_code) != 0) return fail("get_input");
    slot = (DLTensor*)ret.v_handle;
    if (TVMArrayAlloc(slot->shape, slot->ndim, slot->dtype.code, slot->dtype.bits,
                      slot->dtype.lanes, kDLCPU, 0, &arr) != 0) {
      return fail("TVMArrayAlloc");
    }
    size = nbytes(slot);
    buf = malloc(size + 1);
    f = fopen(argv[3 + i], "rb");
    if (f == NULL || fread(buf, 1, size + 1, f) != size) {
      fprintf(stderr, "%s: expected %zu bytes\n", argv[3 + i], size);
      return 1;
    }
    fclose(f);
    if (TVMArrayCopyFromBytes(arr, buf, size) != 0) return fail("TVMArrayCopyFromBytes");
    args[1].v_handle = arr;
    codes[1] = kTVMDLTensorHandle;
    if (call(set_input, 2, args, codes, &ret, &ret_code) != 0) return fail("set_input");
    TVMArrayFree(arr);
    free(buf);
  }
  if (call(run, 0, NULL, NULL, &ret, &ret_code) != 0) return fail("run");
  for (i = 0; i < n_out; ++i) {
    char path[4096];
    DLTensor* t;
    FILE* f;
    args[0].v_int64 = i;
    codes[0] = kTVMArgInt;
    if (call(get_output, 1, args, codes, &ret, &ret_code) != 0) return fail("get_output");
    t = (DLTensor*)ret.v_handle;
    snprintf(path, sizeof(path), "%s%d.bin", argv[2], i);
    f = fopen(path, "wb");
    if (f == NULL || fwrite(t->data, 1, nbytes(t), f) != nbytes(t)) return 1;
    fclose(f);
  }
  TVMFuncFree(set_input);
  TVMFuncFree(get_input);
  TVMFuncFree(run);
  TVMFuncFree(get_output);
  TVMFuncFree(num_in);
  TVMFuncFree(num_out);
  TVMFuncFree(create);
  TVMModFree(ex);
  TVMModFree(lib);
  return 0;
}
