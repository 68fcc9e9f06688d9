/*
 * executors.c -- graph and AOT executors (ember/crt/executor) as modules: their packed
 * functions set_input, get_input, get_input_index, get_num_inputs, get_num_outputs,
 * get_output, load_params, run (and get_model_metadata for AOT).
 *
 *   set_input(name or index, tensor)      get_input(name or index[, out tensor])
 *   get_output(index[, out tensor])       load_params(bytes)        run()
 * get_input/get_output without out return the executor's own tensor (kTVMDLTensorHandle,
 * valid while the executor lives; the next run or set_input changes it).
 */
#include <stdlib.h>
#include <string.h>

#include "ember/crt/executor_ops.h"
#include "native.h"

typedef struct {
  EmberModule base;
  const EmberExecutorOps* ops;
  void* ex;
  char* text;        /* the graph JSON or the metadata (the executor points into it) */
  EmberObject* keep; /* the factory, when created by one */
  EmberModule* lib;
} Executor;

/* ---- arguments ------------------------------------------------------------------------------ */

int ember_arg_count(const char* who, int n, int lo, int hi) {
  if (n >= lo && n <= hi) return 0;
  ember_crt_error(kTvmErrorFunctionCallNumArgs, who);
  ember_crt_error_append(": expected ");
  ember_crt_error_append_i64(lo);
  if (hi != lo) {
    ember_crt_error_append(" to ");
    ember_crt_error_append_i64(hi);
  }
  ember_crt_error_append(" arguments, got ");
  ember_crt_error_append_i64(n);
  return kTvmErrorFunctionCallNumArgs;
}

static int bad_arg(const char* who, int at, const char* expected) {
  ember_crt_error(kTvmErrorGenericInvalidArgument, who);
  ember_crt_error_append(": argument ");
  ember_crt_error_append_i64(at);
  ember_crt_error_append(" must be ");
  ember_crt_error_append(expected);
  return kTvmErrorGenericInvalidArgument;
}

int ember_arg_device(const char* who, TVMValue* args, int* codes, int n, int at, DLDevice* dev) {
  if (at < n && codes[at] == kDLDevice) {
    *dev = args[at].v_device;
  } else if (at + 1 < n && codes[at] == kTVMArgInt && codes[at + 1] == kTVMArgInt) {
    dev->device_type = (DLDeviceType)args[at].v_int64;
    dev->device_id = (int32_t)args[at + 1].v_int64;
  } else {
    return bad_arg(who, at, "a device (kDLDevice, or device_type and device_id ints)");
  }
  if (dev->device_type != kDLCPU) {
    ember_crt_error(kTvmErrorExecutorUnsupported, who);
    ember_crt_error_append(": device type ");
    ember_crt_error_append_i64(dev->device_type);
    ember_crt_error_append(" is not supported (only the CPU, device type 1)");
    return kTvmErrorExecutorUnsupported;
  }
  return 0;
}

static int arg_tensor(const char* who, TVMValue* args, int* codes, int at, DLTensor** out) {
  if ((codes[at] != kTVMDLTensorHandle && codes[at] != kTVMNDArrayHandle) ||
      args[at].v_handle == NULL) {
    return bad_arg(who, at, "a tensor (DLTensor*, not NULL)");
  }
  *out = (DLTensor*)args[at].v_handle;
  return 0;
}

/* An input given by name (str) or index (int). */
static int arg_input(Executor* e, const char* who, TVMValue* args, int* codes, uint32_t* index) {
  if (codes[0] == kTVMStr && args[0].v_str != NULL) {
    const char* name = args[0].v_str;
    int32_t k = e->ops->input_index(e->ex, name, (uint32_t)strlen(name));
    if (k < 0) {
      ember_crt_error(kTvmErrorExecutorNameNotFound, who);
      ember_crt_error_append(": no input named ");
      ember_crt_error_append_name(name, 128);
      return kTvmErrorExecutorNameNotFound;
    }
    *index = (uint32_t)k;
    return 0;
  }
  if (codes[0] == kTVMArgInt) {
    int64_t k = args[0].v_int64;
    *index = k < 0 || k > 0x7fffffff ? 0x7fffffffu : (uint32_t)k; /* out of range below */
    return 0;
  }
  return bad_arg(who, 0, "an input name (str) or index (int)");
}

static int ret_tensor(Executor* e, const char* who, DLTensor* t, TVMValue* args, int* codes,
                      int n, TVMValue* ret, int* ret_code) {
  DLTensor* out = NULL;
  if (n < 2) {
    ret->v_handle = t;
    *ret_code = kTVMDLTensorHandle;
    return 0;
  }
  (void)e;
  if (arg_tensor(who, args, codes, 1, &out) != 0) return kTvmErrorGenericInvalidArgument;
  if (out->ndim != t->ndim || out->data == NULL) {
    ember_crt_error(kTvmErrorExecutorBadInput, who);
    ember_crt_error_append(": out must be a tensor of ");
    ember_error_append_type(t->dtype, t->ndim, t->shape);
    return kTvmErrorExecutorBadInput;
  }
  return ember_tensor_copy_checked(who, "out", "tensor", 6, out, t) == 0
             ? 0 : (int)kTvmErrorExecutorBadInput;
}

/* ---- methods -------------------------------------------------------------------------------- */

#define METHOD(name) \
  static int name(TVMValue* args, int* codes, int n, TVMValue* ret, int* ret_code, void* res)

METHOD(m_set_input) {
  Executor* e = (Executor*)res;
  uint32_t k = 0;
  DLTensor* t = NULL;
  (void)ret, (void)ret_code;
  if (ember_arg_count("set_input", n, 2, 2) || arg_input(e, "set_input", args, codes, &k) ||
      arg_tensor("set_input", args, codes, 1, &t)) {
    return ember_crt_last_error_code();
  }
  return e->ops->set_input(e->ex, k, t);
}

METHOD(m_get_input) {
  Executor* e = (Executor*)res;
  uint32_t k = 0;
  DLTensor* t = NULL;
  if (ember_arg_count("get_input", n, 1, 2) || arg_input(e, "get_input", args, codes, &k) ||
      e->ops->input(e->ex, k, &t)) {
    return ember_crt_last_error_code();
  }
  return ret_tensor(e, "get_input", t, args, codes, n, ret, ret_code);
}

METHOD(m_get_output) {
  Executor* e = (Executor*)res;
  DLTensor* t = NULL;
  int64_t k;
  if (ember_arg_count("get_output", n, 1, 2) != 0) return kTvmErrorFunctionCallNumArgs;
  if (codes[0] != kTVMArgInt) return bad_arg("get_output", 0, "an output index (int)");
  k = args[0].v_int64;
  if (e->ops->output(e->ex, k < 0 || k > 0x7fffffff ? 0x7fffffffu : (uint32_t)k, &t) != 0) {
    return ember_crt_last_error_code();
  }
  return ret_tensor(e, "get_output", t, args, codes, n, ret, ret_code);
}

METHOD(m_get_input_index) {
  Executor* e = (Executor*)res;
  if (ember_arg_count("get_input_index", n, 1, 1) != 0) return kTvmErrorFunctionCallNumArgs;
  if (codes[0] != kTVMStr || args[0].v_str == NULL) {
    return bad_arg("get_input_index", 0, "an input name (str)");
  }
  ret->v_int64 = e->ops->input_index(e->ex, args[0].v_str, (uint32_t)strlen(args[0].v_str));
  *ret_code = kTVMArgInt;
  return 0;
}

METHOD(m_get_num_inputs) {
  Executor* e = (Executor*)res;
  (void)args, (void)codes;
  if (ember_arg_count("get_num_inputs", n, 0, 0) != 0) return kTvmErrorFunctionCallNumArgs;
  ret->v_int64 = e->ops->num_inputs(e->ex);
  *ret_code = kTVMArgInt;
  return 0;
}

METHOD(m_get_num_outputs) {
  Executor* e = (Executor*)res;
  (void)args, (void)codes;
  if (ember_arg_count("get_num_outputs", n, 0, 0) != 0) return kTvmErrorFunctionCallNumArgs;
  ret->v_int64 = e->ops->num_outputs(e->ex);
  *ret_code = kTVMArgInt;
  return 0;
}

METHOD(m_load_params) {
  Executor* e = (Executor*)res;
  const TVMByteArray* bytes;
  (void)ret, (void)ret_code;
  if (ember_arg_count("load_params", n, 1, 1) != 0) return kTvmErrorFunctionCallNumArgs;
  if (codes[0] != kTVMBytes || args[0].v_handle == NULL) {
    return bad_arg("load_params", 0, "the params blob (kTVMBytes: a TVMByteArray*)");
  }
  bytes = (const TVMByteArray*)args[0].v_handle;
  return e->ops->load_params(e->ex, bytes->data, bytes->size);
}

METHOD(m_run) {
  Executor* e = (Executor*)res;
  (void)args, (void)codes, (void)ret, (void)ret_code;
  if (ember_arg_count("run", n, 0, 0) != 0) return kTvmErrorFunctionCallNumArgs;
  return e->ops->run(e->ex);
}

METHOD(m_get_model_metadata) {
  Executor* e = (Executor*)res;
  (void)args, (void)codes;
  if (ember_arg_count("get_model_metadata", n, 0, 0) != 0) return kTvmErrorFunctionCallNumArgs;
  ret->v_str = e->text;
  *ret_code = kTVMStr;
  return 0;
}

static const struct {
  const char* name;
  TVMBackendPackedCFunc fn;
} kMethods[] = {{"set_input", m_set_input},         {"get_input", m_get_input},
                {"get_output", m_get_output},       {"get_input_index", m_get_input_index},
                {"get_num_inputs", m_get_num_inputs}, {"get_num_outputs", m_get_num_outputs},
                {"load_params", m_load_params},     {"run", m_run},
                {"get_model_metadata", m_get_model_metadata}};

static int executor_get_local(EmberModule* self, const char* name, EmberFunction** out) {
  Executor* e = (Executor*)self;
  size_t i;
  for (i = 0; i < sizeof(kMethods) / sizeof(kMethods[0]); ++i) {
    if (strcmp(name, kMethods[i].name) != 0) continue;
    if (kMethods[i].fn == m_get_model_metadata && e->ops != &ember_aot_executor_ops) return 1;
    *out = ember_function_new(kMethods[i].fn, e, &self->obj, NULL);
    return *out != NULL ? 0 : kTvmErrorExecutorOutOfMemory;
  }
  return 1;
}

static void executor_release(EmberModule* self) {
  Executor* e = (Executor*)self;
  if (e->ex != NULL) e->ops->release(e->ex);
  free(e->text);
  ember_object_release(e->keep);
  ember_object_release(&e->lib->obj);
}

/* ---- creation ------------------------------------------------------------------------------- */

static int env_function(void* ctx, const char* name, TVMFunctionHandle* out) {
  EmberFunction* f = NULL;
  int rc = ember_module_find((EmberModule*)ctx, name, 1, &f);
  if (rc == 1) rc = ember_registry_find(name, &f);
  if (rc == 0) *out = f;
  return rc;
}

static void* env_symbol(void* ctx, const char* name) {
  return ember_module_symbol((EmberModule*)ctx, name);
}

static int make(const EmberExecutorOps* ops, const char* text, size_t len, EmberModule* lib,
                DLDevice dev, const void* params, size_t params_size, EmberObject* keep,
                EmberModule** out) {
  EmberExecutorEnv env;
  Executor* e = (Executor*)calloc(1, sizeof(Executor));
  int rc;
  if (e == NULL || (e->text = ember_strdup(text, len)) == NULL) {
    free(e);
    return ember_crt_error(kTvmErrorExecutorOutOfMemory, "out of memory creating an executor");
  }
  ember_module_init(&e->base, ops == &ember_aot_executor_ops ? "AotExecutor" : "GraphExecutor",
                    executor_get_local, executor_release);
  e->ops = ops;
  e->lib = lib;
  e->keep = keep;
  ember_object_retain(&lib->obj);
  ember_object_retain(keep);
  env.ctx = lib;
  env.get_function = env_function;
  env.get_symbol = env_symbol;
  rc = ops == &ember_aot_executor_ops
           ? ember_aot_executor_create(e->text, len, &env, dev, (EmberAotExecutor**)&e->ex)
           : ember_graph_executor_create(e->text, len, &env, dev, (EmberGraphExecutor**)&e->ex);
  if (rc == 0 && params != NULL && params_size > 0) rc = ops->load_params(e->ex, params, params_size);
  if (rc != 0) {
    ember_object_release(&e->base.obj);
    return rc;
  }
  *out = &e->base;
  return 0;
}

int ember_graph_executor_module(const char* json, size_t len, EmberModule* lib, DLDevice dev,
                                const void* params, size_t params_size, EmberObject* keep,
                                EmberModule** out) {
  return make(&ember_graph_executor_ops, json, len, lib, dev, params, params_size, keep, out);
}

int ember_aot_executor_module(const char* metadata, size_t len, EmberModule* lib, DLDevice dev,
                              const void* params, size_t params_size, EmberObject* keep,
                              EmberModule** out) {
  return make(&ember_aot_executor_ops, metadata, len, lib, dev, params, params_size, keep, out);
}
