/*
 * rpc_methods.c -- the functions of the executor modules a micro RPC session creates
 * (tvm.graph_executor.create, tvm.aot_executor.create): the module-based interface.
 *
 *   set_input(name or index, array)       get_input(name or index[, out array])
 *   get_output(index[, out array])        get_input_index(name)   get_input_name(index)
 *   get_num_inputs()   get_num_outputs()  load_params(bytes)      run()
 *   get_model_metadata()                  (AOT: the metadata JSON)
 *
 * get_input and get_output without out return a view of the executor's tensor (valid while
 * the executor lives: the view keeps it alive; the next run or set_input changes it).
 */
#include <string.h>

#include "ember/crt/executor_ops.h"
#include "rpc_internal.h"

static const EmberExecutorOps* ops_of(const RpcObject* exec) {
  return exec->kind == kObjGraph ? &ember_graph_executor_ops : &ember_aot_executor_ops;
}

static tvm_crt_error_t wrong_args(const char* who, const char* expected) {
  ember_crt_error(kTvmErrorGenericInvalidArgument, who);
  ember_crt_error_append(": expected ");
  ember_crt_error_append(expected);
  return kTvmErrorGenericInvalidArgument;
}

/* Input `at` of the call named by a str or an int. */
static tvm_crt_error_t input_key(const char* who, const RpcObject* exec, const RpcCall* c,
                                 uint32_t* index) {
  const EmberExecutorOps* ops = ops_of(exec);
  if (c->codes[0] == kTVMArgInt) {
    *index = c->values[0].v_int64 < 0 ? 0xFFFFFFFFu
             : c->values[0].v_int64 > 0xFFFFFFFF ? 0xFFFFFFFFu : (uint32_t)c->values[0].v_int64;
    return 0;
  }
  if (c->codes[0] == kTVMStr) {
    int32_t k = ops->input_index(exec->u.exec.ex, c->values[0].v_str, c->lens[0]);
    if (k >= 0) {
      *index = (uint32_t)k;
      return 0;
    }
    ember_crt_error(kTvmErrorGenericInvalidArgument, who);
    ember_crt_error_append(": no input named ");
    ember_error_append_str(c->values[0].v_str, c->lens[0]);
    ember_crt_error_append(" (this model has ");
    ember_crt_error_append_u64(ops->num_inputs(exec->u.exec.ex));
    ember_crt_error_append(" inputs)");
    return kTvmErrorGenericInvalidArgument;
  }
  return wrong_args(who, "an input name (str) or index (int) first");
}

/* A view of tensor t, or t copied into the call's argument `at` when there is one. */
static tvm_crt_error_t give_tensor(RpcServer* s, RpcObject* exec, const char* who,
                                   const RpcCall* c, int at, DLTensor* t, RpcRet* ret) {
  RpcObject* view;
  if (c->n > at) {
    if (c->codes[at] != kTVMDLTensorHandle) return wrong_args(who, "an array to copy into");
    ret->tag = kTagNone;
    return ember_tensor_copy_checked(who, "out", "out", 3, (DLTensor*)c->values[at].v_handle, t);
  }
  if ((view = rpc_object_new(s, kObjView, 0)) == NULL) return kTvmErrorRpcTableFull;
  view->u.array.t = *t;
  rpc_object_adopt(s, view, exec);
  ret->tag = kTagArrayHandle;
  ret->obj = view;
  return 0;
}

static tvm_crt_error_t set_input(RpcServer* s, RpcObject* exec, RpcCall* c, RpcRet* ret) {
  uint32_t index;
  tvm_crt_error_t rc;
  (void)s;
  ret->tag = kTagNone;
  if (c->n != 2) return wrong_args("set_input", "(name or index, array)");
  if ((rc = input_key("set_input", exec, c, &index)) != 0) return rc;
  if (c->codes[1] != kTVMDLTensorHandle) return wrong_args("set_input", "an array second");
  return ops_of(exec)->set_input(exec->u.exec.ex, index, (const DLTensor*)c->values[1].v_handle);
}

static tvm_crt_error_t get_input(RpcServer* s, RpcObject* exec, RpcCall* c, RpcRet* ret) {
  uint32_t index;
  DLTensor* t;
  tvm_crt_error_t rc;
  if (c->n < 1 || c->n > 2) return wrong_args("get_input", "(name or index[, out array])");
  if ((rc = input_key("get_input", exec, c, &index)) != 0) return rc;
  if ((rc = ops_of(exec)->input(exec->u.exec.ex, index, &t)) != 0) return rc;
  return give_tensor(s, exec, "get_input", c, 1, t, ret);
}

static tvm_crt_error_t get_output(RpcServer* s, RpcObject* exec, RpcCall* c, RpcRet* ret) {
  DLTensor* t;
  uint32_t index;
  tvm_crt_error_t rc;
  if (c->n < 1 || c->n > 2 || c->codes[0] != kTVMArgInt) {
    return wrong_args("get_output", "(index[, out array])");
  }
  index = c->values[0].v_int64 < 0 || c->values[0].v_int64 > 0xFFFFFFFF
              ? 0xFFFFFFFFu : (uint32_t)c->values[0].v_int64;
  if ((rc = ops_of(exec)->output(exec->u.exec.ex, index, &t)) != 0) return rc;
  return give_tensor(s, exec, "get_output", c, 1, t, ret);
}

static tvm_crt_error_t get_input_index(RpcServer* s, RpcObject* exec, RpcCall* c, RpcRet* ret) {
  (void)s;
  if (c->n != 1 || c->codes[0] != kTVMStr) return wrong_args("get_input_index", "(name)");
  ret->tag = kTagInt;
  ret->v.v_int64 = ops_of(exec)->input_index(exec->u.exec.ex, c->values[0].v_str, c->lens[0]);
  return 0;
}

static tvm_crt_error_t get_input_name(RpcServer* s, RpcObject* exec, RpcCall* c, RpcRet* ret) {
  const char* name;
  uint32_t len, index;
  tvm_crt_error_t rc;
  (void)s;
  if (c->n != 1 || c->codes[0] != kTVMArgInt) return wrong_args("get_input_name", "(index)");
  index = c->values[0].v_int64 < 0 || c->values[0].v_int64 > 0xFFFFFFFF
              ? 0xFFFFFFFFu : (uint32_t)c->values[0].v_int64;
  if ((rc = ops_of(exec)->input_name(exec->u.exec.ex, index, &name, &len)) != 0) return rc;
  ret->tag = kTagStr;
  ret->data = (const uint8_t*)name;
  ret->len = len;
  return 0;
}

static tvm_crt_error_t get_num_inputs(RpcServer* s, RpcObject* exec, RpcCall* c, RpcRet* ret) {
  (void)s;
  if (c->n != 0) return wrong_args("get_num_inputs", "no arguments");
  ret->tag = kTagInt;
  ret->v.v_int64 = ops_of(exec)->num_inputs(exec->u.exec.ex);
  return 0;
}

static tvm_crt_error_t get_num_outputs(RpcServer* s, RpcObject* exec, RpcCall* c, RpcRet* ret) {
  (void)s;
  if (c->n != 0) return wrong_args("get_num_outputs", "no arguments");
  ret->tag = kTagInt;
  ret->v.v_int64 = ops_of(exec)->num_outputs(exec->u.exec.ex);
  return 0;
}

static tvm_crt_error_t load_params(RpcServer* s, RpcObject* exec, RpcCall* c, RpcRet* ret) {
  const TVMByteArray* b;
  (void)s;
  ret->tag = kTagNone;
  if (c->n != 1 || c->codes[0] != kTVMBytes) {
    return wrong_args("load_params", "(bytes): the save_param_dict bytes");
  }
  b = (const TVMByteArray*)c->values[0].v_handle;
  return ops_of(exec)->load_params(exec->u.exec.ex, b->data, b->size);
}

static tvm_crt_error_t run(RpcServer* s, RpcObject* exec, RpcCall* c, RpcRet* ret) {
  (void)s;
  ret->tag = kTagNone;
  if (c->n != 0) return wrong_args("run", "no arguments (set the inputs with set_input)");
  return ops_of(exec)->run(exec->u.exec.ex);
}

static tvm_crt_error_t model_metadata(RpcServer* s, RpcObject* exec, RpcCall* c, RpcRet* ret) {
  (void)s;
  if (c->n != 0) return wrong_args("get_model_metadata", "no arguments");
  ret->tag = kTagStr;
  ret->data = (const uint8_t*)exec->u.exec.text;
  ret->len = exec->u.exec.text_len;
  return 0;
}

typedef tvm_crt_error_t (*Method)(RpcServer* s, RpcObject* exec, RpcCall* c, RpcRet* ret);
static const struct {
  const char* name;
  Method fn;
} kMethods[] = {
    {"set_input", set_input},         {"get_input", get_input},
    {"get_output", get_output},       {"get_input_index", get_input_index},
    {"get_input_name", get_input_name}, {"get_num_inputs", get_num_inputs},
    {"get_num_outputs", get_num_outputs}, {"load_params", load_params},
    {"run", run},                     {"get_model_metadata", model_metadata},
};
#define NUM_METHODS ((int)(sizeof(kMethods) / sizeof(kMethods[0])))
#define METHOD_AOT_ONLY 9 /* get_model_metadata */

int rpc_method_find(const RpcObject* exec, const char* name) {
  int i;
  for (i = 0; i < NUM_METHODS; ++i) {
    if (strcmp(kMethods[i].name, name) == 0) {
      return i == METHOD_AOT_ONLY && exec->kind != kObjAot ? -1 : i;
    }
  }
  return -1;
}

tvm_crt_error_t rpc_call_method(RpcServer* s, RpcObject* exec, int index, RpcCall* c,
                                RpcRet* ret) {
  memset(ret, 0, sizeof(*ret));
  return kMethods[index].fn(s, exec, c, ret);
}
