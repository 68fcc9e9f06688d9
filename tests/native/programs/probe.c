/*
 * probe.c -- drive the native runtime's error paths and print what each returns.
 *
 *   probe load PATH              TVMModLoadFromFile(PATH)
 *   probe graph JSON_FILE        tvm.graph_executor.create(<file contents>, system lib, cpu)
 *   probe params LIB PARAMS_FILE load_params(<file contents>) on LIB's graph executor
 *   probe aot METADATA_FILE      tvm.aot_executor.create on a system library whose metadata
 *                                function returns the file contents
 *   probe api LIB                misuse of handles, names, indices and inputs of LIB's executor
 *
 * Each check prints one line "<case>: rc=<code> <TVMGetLastError()>" (rc=0: no error). The
 * process must never crash: the tests run it under AddressSanitizer and UBSan too.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ember/c_runtime_api.h"

static void report(const char* what, int rc) {
  printf("%s: rc=%d %s\n", what, rc, rc != 0 ? TVMGetLastError() : "");
}

static char* read_all(const char* path, size_t* size) {
  FILE* f = fopen(path, "rb");
  char* buf;
  long n;
  if (f == NULL) return NULL;
  fseek(f, 0, SEEK_END);
  n = ftell(f);
  fseek(f, 0, SEEK_SET);
  buf = (char*)malloc((size_t)n + 1);
  if (buf != NULL && fread(buf, 1, (size_t)n, f) != (size_t)n) n = 0;
  fclose(f);
  if (buf != NULL) buf[n] = '\0';
  *size = (size_t)n;
  return buf;
}

static int call(TVMFunctionHandle f, int n, TVMValue* args, int* codes, TVMValue* ret) {
  int code;
  return TVMFuncCall(f, args, codes, n, ret, &code);
}

/* The graph executor of a loaded library's factory, or NULL. */
static TVMModuleHandle executor_of(const char* path, TVMModuleHandle* lib) {
  TVMFunctionHandle create;
  TVMValue arg, ret;
  int code = kDLDevice;
  if (TVMModLoadFromFile(path, "so", lib) != 0) return NULL;
  if (TVMModGetFunction(*lib, "default", 0, &create) != 0) return NULL;
  arg.v_device.device_type = kDLCPU;
  arg.v_device.device_id = 0;
  if (call(create, 1, &arg, &code, &ret) != 0) ret.v_handle = NULL;
  TVMFuncFree(create);
  return ret.v_handle;
}

static int probe_load(const char* path) {
  TVMModuleHandle mod = NULL;
  int rc = TVMModLoadFromFile(path, "so", &mod);
  report("load", rc);
  TVMModFree(mod);
  return 0;
}

static int probe_graph(const char* json_path) {
  TVMFunctionHandle syslib_fn, create;
  TVMValue args[4], ret;
  int codes[4] = {kTVMStr, kTVMModuleHandle, kTVMArgInt, kTVMArgInt}, rc;
  size_t size;
  char* json = read_all(json_path, &size);
  if (json == NULL) return 2;
  if (TVMFuncGetGlobal("runtime.SystemLib", &syslib_fn) != 0 ||
      TVMFuncGetGlobal("tvm.graph_executor.create", &create) != 0 ||
      call(syslib_fn, 0, NULL, NULL, &ret) != 0) {
    report("setup", 1);
    return 1;
  }
  args[0].v_str = json;
  args[1].v_handle = ret.v_handle;
  args[2].v_int64 = kDLCPU;
  args[3].v_int64 = 0;
  rc = call(create, 4, args, codes, &ret);
  report("graph", rc);
  if (rc == 0) TVMModFree(ret.v_handle);
  TVMModFree(args[1].v_handle);
  TVMFuncFree(create);
  TVMFuncFree(syslib_fn);
  free(json);
  return 0;
}

static int probe_params(const char* lib_path, const char* params_path) {
  TVMModuleHandle lib, ex = executor_of(lib_path, &lib);
  TVMFunctionHandle load;
  TVMByteArray bytes;
  TVMValue arg, ret;
  int code = kTVMBytes;
  size_t size;
  char* blob = read_all(params_path, &size);
  if (ex == NULL || blob == NULL || TVMModGetFunction(ex, "load_params", 0, &load) != 0) {
    report("setup", 1);
    return 1;
  }
  bytes.data = blob;
  bytes.size = size;
  arg.v_handle = &bytes;
  report("load_params", call(load, 1, &arg, &code, &ret));
  TVMFuncFree(load);
  TVMModFree(ex);
  TVMModFree(lib);
  free(blob);
  return 0;
}

static char* g_metadata;

/* tvmgen_default_get_metadata of the system library: the metadata file's text. */
static int get_metadata(TVMValue* args, int* codes, int n, TVMValue* ret, int* ret_code,
                        void* res) {
  (void)args, (void)codes, (void)n, (void)res;
  ret->v_str = g_metadata;
  *ret_code = kTVMStr;
  return 0;
}

static int probe_aot(const char* metadata_path) {
  TVMFunctionHandle syslib_fn, create;
  TVMValue args[3], ret;
  int codes[3] = {kTVMModuleHandle, kTVMArgInt, kTVMArgInt}, rc;
  size_t size;
  if ((g_metadata = read_all(metadata_path, &size)) == NULL) return 2;
  TVMBackendRegisterSystemLibSymbol("tvmgen_default_get_metadata", (void*)(uintptr_t)get_metadata);
  if (TVMFuncGetGlobal("runtime.SystemLib", &syslib_fn) != 0 ||
      TVMFuncGetGlobal("tvm.aot_executor.create", &create) != 0 ||
      call(syslib_fn, 0, NULL, NULL, &ret) != 0) {
    report("setup", 1);
    return 1;
  }
  args[0].v_handle = ret.v_handle;
  args[1].v_int64 = kDLCPU;
  args[2].v_int64 = 0;
  rc = call(create, 3, args, codes, &ret);
  report("aot", rc);
  if (rc == 0) TVMModFree(ret.v_handle);
  TVMModFree(args[0].v_handle);
  TVMFuncFree(create);
  TVMFuncFree(syslib_fn);
  free(g_metadata);
  return 0;
}

static void probe_handles(void) {
  struct {
    uint32_t tag;
    int32_t refs;
  } fake = {0, 1};
  TVMFunctionHandle f = NULL;
  TVMValue ret;
  TVMArrayHandle arr;
  int64_t shape[2] = {2, 3};
  char small[4];
  report("get_function_null_module", TVMModGetFunction(NULL, "run", 0, &f));
  report("get_function_fake_module", TVMModGetFunction(&fake, "run", 0, &f));
  report("call_null_function", TVMFuncCall(NULL, NULL, NULL, 0, &ret, NULL));
  report("call_fake_function", TVMFuncCall(&fake, NULL, NULL, 0, &ret, NULL));
  report("free_fake_module", TVMModFree(&fake));
  report("global_unknown", TVMFuncGetGlobal("no.such.function", &f));
  report("load_null_path", TVMModLoadFromFile(NULL, "so", NULL));
  report("load_tar_format", TVMModLoadFromFile("model.tar", "tar", &f));
  report("array_bad_ndim", TVMArrayAlloc(shape, -1, kDLFloat, 32, 1, kDLCPU, 0, &arr));
  report("array_bad_dim", TVMArrayAlloc((int64_t[]){-4}, 1, kDLFloat, 32, 1, kDLCPU, 0, &arr));
  if (TVMArrayAlloc(shape, 2, kDLFloat, 32, 1, kDLCPU, 0, &arr) == 0) {
    report("array_copy_wrong_size", TVMArrayCopyFromBytes(arr, small, sizeof(small)));
    report("array_copy_to_wrong_size", TVMArrayCopyToBytes(arr, small, sizeof(small)));
    TVMArrayFree(arr);
  }
  report("set_stream_cpu", TVMSetStream(kDLCPU, 0, NULL));
}

static void probe_executor(TVMModuleHandle lib, TVMModuleHandle ex) {
  TVMFunctionHandle set_input, get_output, run, unknown, index;
  TVMValue args[2], ret;
  int codes[2];
  TVMArrayHandle wrong_shape, wrong_dtype;
  int64_t shape[2] = {1, 3};
  report("unknown_function", TVMModGetFunction(lib, "no_such_kernel", 1, &unknown));
  TVMModGetFunction(ex, "set_input", 0, &set_input);
  TVMModGetFunction(ex, "get_output", 0, &get_output);
  TVMModGetFunction(ex, "run", 0, &run);
  TVMModGetFunction(ex, "get_input_index", 0, &index);
  TVMArrayAlloc(shape, 2, kDLFloat, 32, 1, kDLCPU, 0, &wrong_shape);
  TVMArrayAlloc(shape, 2, kDLInt, 8, 1, kDLCPU, 0, &wrong_dtype);
  args[0].v_str = "data";
  codes[0] = kTVMStr;
  args[1].v_handle = wrong_shape;
  codes[1] = kTVMDLTensorHandle;
  report("set_input_wrong_shape", call(set_input, 2, args, codes, &ret));
  args[1].v_handle = wrong_dtype;
  report("set_input_wrong_dtype", call(set_input, 2, args, codes, &ret));
  args[1].v_handle = NULL;
  report("set_input_null_tensor", call(set_input, 2, args, codes, &ret));
  args[0].v_str = "no_such_input";
  args[1].v_handle = wrong_shape;
  report("set_input_unknown_name", call(set_input, 2, args, codes, &ret));
  args[0].v_int64 = 99;
  codes[0] = kTVMArgInt;
  report("set_input_index_out_of_range", call(set_input, 2, args, codes, &ret));
  args[0].v_int64 = -1;
  report("set_input_negative_index", call(set_input, 2, args, codes, &ret));
  report("set_input_one_argument", call(set_input, 1, args, codes, &ret));
  args[0].v_int64 = 5;
  report("get_output_out_of_range", call(get_output, 1, args, codes, &ret));
  args[0].v_str = "x";
  codes[0] = kTVMStr;
  report("get_output_by_str", call(get_output, 1, args, codes, &ret));
  args[0].v_str = "no_such_input";
  printf("get_input_index_unknown: %d\n",
         call(index, 1, args, codes, &ret) == 0 ? (int)ret.v_int64 : -100);
  report("run_with_arguments", call(run, 1, args, codes, &ret));
  report("run", call(run, 0, NULL, NULL, &ret));
  TVMArrayFree(wrong_shape);
  TVMArrayFree(wrong_dtype);
  TVMFuncFree(set_input);
  TVMFuncFree(get_output);
  TVMFuncFree(run);
  TVMFuncFree(index);
}

int main(int argc, char** argv) {
  if (argc == 3 && strcmp(argv[1], "load") == 0) return probe_load(argv[2]);
  if (argc == 3 && strcmp(argv[1], "graph") == 0) return probe_graph(argv[2]);
  if (argc == 4 && strcmp(argv[1], "params") == 0) return probe_params(argv[2], argv[3]);
  if (argc == 3 && strcmp(argv[1], "aot") == 0) return probe_aot(argv[2]);
  if (argc == 3 && strcmp(argv[1], "api") == 0) {
    TVMModuleHandle lib = NULL, ex;
    probe_handles();
    ex = executor_of(argv[2], &lib);
    if (ex == NULL) {
      report("executor", 1);
      return 1;
    }
    probe_executor(lib, ex);
    TVMModFree(ex);
    TVMModFree(lib);
    return 0;
  }
  fprintf(stderr, "usage: probe load PATH | graph JSON | params LIB PARAMS | api LIB\n");
  return 2;
}
