/*
 * rpc_functions.c -- the micro RPC server's built-in functions and the methods of the
 * executor modules it creates.
 *
 * Built-ins (found by name before the function registries):
 *   runtime.SystemLib()                                  the module of the registries
 *   tvm.graph_executor.create(graph_json, lib, device)  device: a Device, or type and id
 *   tvm.aot_executor.create(lib, device[, module_name="default"])
 *   testing.echo(x), testing.nop(...), ember.rpc.array_copy(dst, src),
 *   ember.micro.workspace_stats(field)   field: size, used, peak, live (blocks) or objects
 * Executor methods: set_input(key, tensor), get_input(key[, out]), get_output(i[, out]),
 * get_input_index(name), get_input_name(i), get_num_inputs(), get_num_outputs(),
 * load_params(bytes), run(), and get_model_metadata() (AOT).
 */
#include <string.h>

#include "rpc_internal.h"

/* ---- arguments ------------------------------------------------------------------------------ */
static tvm_crt_error_t bad_arg(const char* who, int at, const char* expected) {
  ember_crt_error(kTvmErrorGenericInvalidArgument, who);
  ember_crt_error_append(": argument ");
  ember_crt_error_append_i64(at);
  ember_crt_error_append(" must be ");
  ember_crt_error_append(expected);
  return kTvmErrorGenericInvalidArgument;
}

static tvm_crt_error_t arg_count(const char* who, const RpcCall* c, int lo, int hi) {
  if (c->n >= lo && c->n <= hi) return 0;
  ember_crt_error(kTvmErrorFunctionCallNumArgs, who);
  ember_crt_error_append(": expected ");
  ember_crt_error_append_i64(lo);
  if (hi != lo) {
    ember_crt_error_append(" to ");
    ember_crt_error_append_i64(hi);
  }
  ember_crt_error_append(" arguments, got ");
  ember_crt_error_append_i64(c->n);
  return kTvmErrorFunctionCallNumArgs;
}

/* A device at `at`: a Device value, or device type and id; *next is the argument after it. */
static tvm_crt_error_t arg_device(const char* who, const RpcCall* c, int at, DLDevice* dev,
                                  int* next) {
  if (at < c->n && c->codes[at] == kDLDevice) {
    *dev = c->values[at].v_device;
    *next = at + 1;
  } else if (at + 1 < c->n && c->codes[at] == kTVMArgInt && c->codes[at + 1] == kTVMArgInt) {
    dev->device_type = (DLDeviceType)c->values[at].v_int64;
    dev->device_id = (int32_t)c->values[at + 1].v_int64;
    *next = at + 2;
  } else {
    return bad_arg(who, at, "a device (a Device, or device type and id)");
  }
  if (dev->device_type == kDLCPU) return 0;
  ember_crt_error(kTvmErrorExecutorUnsupported, who);
  ember_crt_error_append(": device type ");
  ember_crt_error_append_i64(dev->device_type);
  ember_crt_error_append(" is not a device of this server (only the CPU, device type 1)");
  return kTvmErrorExecutorUnsupported;
}

static tvm_crt_error_t arg_tensor(const char* who, const RpcCall* c, int at, DLTensor** out) {
  if (at >= c->n || c->codes[at] != kTVMDLTensorHandle) return bad_arg(who, at, "an array");
  *out = (DLTensor*)c->values[at].v_handle;
  return 0;
}

static tvm_crt_error_t arg_syslib(const char* who, const RpcCall* c, int at) {
  if (at < c->n && c->objs[at] != NULL && c->objs[at]->kind == kObjSysLib) return 0;
  return bad_arg(who, at, "the system library (runtime.SystemLib())");
}

static int find_function(void* ctx, const char* name, TVMFunctionHandle* out) {
  (void)ctx;
  return TVMFuncGetGlobal(name, out);
}

static void ret_object(RpcRet* ret, RpcObject* obj) {
  ret->tag = obj->kind == kObjFunc ? kTagFuncHandle
             : (obj->kind == kObjArray || obj->kind == kObjView) ? kTagArrayHandle
                                                                  : kTagModuleHandle;
  ret->obj = obj;
}

static void ret_int(RpcRet* ret, int64_t v) {
  ret->tag = kTagInt;
  ret->v.v_int64 = v;
}

tvm_crt_error_t rpc_ret_from_packed(TVMValue v, int code, RpcRet* ret) {
  memset(ret, 0, sizeof(*ret));
  ret->v = v;
  switch (code) {
    case kTVMNullptr:
      ret->tag = kTagNone;
      return 0;
    case kTVMArgInt:
    case kTVMArgUInt:
      ret->tag = kTagInt;
      return 0;
    case kTVMArgFloat:
      ret->tag = kTagFloat;
      return 0;
    case kTVMDataType:
      ret->tag = kTagDtype;
      return 0;
    case kDLDevice:
      ret->tag = kTagDevice;
      return 0;
    case kTVMStr:
      ret->tag = kTagStr;
      ret->data = (const uint8_t*)v.v_str;
      ret->len = v.v_str == NULL ? 0u : ember_crt_bounded_strlen(v.v_str, 0x7FFFFFFFu);
      return 0;
    case kTVMBytes: {
      const TVMByteArray* b = (const TVMByteArray*)v.v_handle;
      if (b == NULL || b->size > 0x7FFFFFFFu) break;
      ret->tag = kTagBytes;
      ret->data = (const uint8_t*)b->data;
      ret->len = (uint32_t)b->size;
      return 0;
    }
    default:
      break;
  }
  ember_crt_error(kTvmErrorRpcUnsupported, "micro RPC server: the function returned a value of "
                  "type code ");
  ember_crt_error_append_i64(code);
  ember_crt_error_append(", which cannot cross the link");
  return kTvmErrorRpcUnsupported;
}

/* ---- built-ins ------------------------------------------------------------------------------ */
static tvm_crt_error_t system_lib(RpcServer* s, RpcCall* c, RpcRet* ret) {
  RpcObject* o;
  tvm_crt_error_t rc = arg_count("runtime.SystemLib", c, 0, 0);
  if (rc != 0) return rc;
  if ((o = rpc_object_new(s, kObjSysLib, 0)) == NULL) return kTvmErrorRpcTableFull;
  ret_object(ret, o);
  return 0;
}

static tvm_crt_error_t graph_create(RpcServer* s, RpcCall* c, RpcRet* ret) {
  static const char who[] = "tvm.graph_executor.create";
  EmberExecutorEnv env = {NULL, find_function, NULL};
  DLDevice dev;
  RpcObject* o;
  int next;
  tvm_crt_error_t rc = arg_count(who, c, 3, 4);
  if (rc == 0 && c->codes[0] != kTVMStr) rc = bad_arg(who, 0, "the graph JSON (a str)");
  if (rc == 0) rc = arg_syslib(who, c, 1);
  if (rc == 0) rc = arg_device(who, c, 2, &dev, &next);
  if (rc == 0 && next != c->n) rc = arg_count(who, c, next, next);
  if (rc != 0) return rc;
  if ((o = rpc_object_new(s, kObjGraph, 1)) == NULL) return kTvmErrorRpcTableFull;
  /* the executor points into the JSON: keep a copy below it in the arena */
  o->u.exec.text = (char*)TVMBackendAllocWorkspace(kDLCPU, 0, (uint64_t)c->lens[0] + 1u, kDLUInt,
                                                   8);
  if (o->u.exec.text == NULL) {
    rpc_object_drop(s, o);
    ember_crt_error_append(" (tvm.graph_executor.create: a copy of the graph JSON)");
    return kTvmErrorWorkspaceExhausted;
  }
  memcpy(o->u.exec.text, c->values[0].v_str, c->lens[0] + 1u);
  o->u.exec.text_len = c->lens[0];
  rc = ember_graph_executor_create(o->u.exec.text, c->lens[0], &env, dev,
                                   (EmberGraphExecutor**)&o->u.exec.ex);
  if (rc != 0) {
    (void)TVMBackendFreeWorkspace(kDLCPU, 0, o->u.exec.text);
    rpc_object_drop(s, o);
    return rc;
  }
  ret_object(ret, o);
  return 0;
}

/* "<prefix>_get_metadata" for module name: tvmgen_<name>, other characters than [A-Za-z0-9]
 * replaced by '_' (ember.runtime.aot_format.c_prefix). */
static tvm_crt_error_t metadata_name(const char* name, uint32_t len, char* out, uint32_t cap) {
  static const char head[] = "tvmgen_", tail[] = "_get_metadata";
  uint32_t i, n = 0;
  if (len + sizeof(head) + sizeof(tail) > cap) {
    return ember_crt_error(kTvmErrorGenericInvalidArgument, "tvm.aot_executor.create: the "
                           "module name is too long");
  }
  for (i = 0; head[i] != '\0' && (len > 0u || head[i] != '_'); ++i) out[n++] = head[i];
  for (i = 0; i < len; ++i) {
    char ch = name[i];
    int alnum = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9');
    out[n++] = alnum ? ch : '_';
  }
  memcpy(out + n, tail, sizeof(tail));
  return 0;
}

static tvm_crt_error_t aot_create(RpcServer* s, RpcCall* c, RpcRet* ret) {
  static const char who[] = "tvm.aot_executor.create";
  EmberExecutorEnv env = {NULL, find_function, NULL};
  char fname[EMBER_CRT_MAX_NAME_LENGTH + 1];
  const char* mod_name = "default";
  uint32_t mod_len = 7;
  TVMFunctionHandle get_metadata;
  TVMValue meta;
  int meta_code = kTVMNullptr, next;
  DLDevice dev;
  RpcObject* o;
  tvm_crt_error_t rc = arg_count(who, c, 2, 4);
  if (rc == 0) rc = arg_syslib(who, c, 0);
  if (rc == 0) rc = arg_device(who, c, 1, &dev, &next);
  if (rc == 0 && next < c->n) {
    if (c->codes[next] != kTVMStr) return bad_arg(who, next, "the module name (a str)");
    mod_name = c->values[next].v_str;
    mod_len = c->lens[next++];
  }
  if (rc == 0 && next != c->n) rc = arg_count(who, c, next, next);
  if (rc == 0) rc = metadata_name(mod_name, mod_len, fname, sizeof(fname));
  if (rc != 0) return rc;
  if (TVMFuncGetGlobal(fname, &get_metadata) != 0 ||
      TVMFuncCall(get_metadata, NULL, NULL, 0, &meta, &meta_code) != 0 || meta_code != kTVMStr) {
    ember_crt_error(kTvmErrorExecutorNameNotFound, "tvm.aot_executor.create: no AOT model named ");
    ember_error_append_str(mod_name, mod_len);
    ember_crt_error_append(" in the system library (its ");
    ember_crt_error_append(fname);
    ember_crt_error_append(" is not registered)");
    return kTvmErrorExecutorNameNotFound;
  }
  if ((o = rpc_object_new(s, kObjAot, 1)) == NULL) return kTvmErrorRpcTableFull;
  o->u.exec.text = (char*)(uintptr_t)meta.v_str; /* static in the model: not copied */
  o->u.exec.text_len = ember_crt_bounded_strlen(meta.v_str, 0x7FFFFFFFu);
  rc = ember_aot_executor_create(meta.v_str, o->u.exec.text_len, &env, dev,
                                 (EmberAotExecutor**)&o->u.exec.ex);
  if (rc != 0) {
    rpc_object_drop(s, o);
    return rc;
  }
  ret_object(ret, o);
  return 0;
}

static tvm_crt_error_t echo(RpcServer* s, RpcCall* c, RpcRet* ret) {
  tvm_crt_error_t rc = arg_count("testing.echo", c, 1, 1);
  (void)s;
  if (rc != 0) return rc;
  if (c->objs[0] != NULL || c->tags[0] == kTagNDArray) {
    return bad_arg("testing.echo", 0, "a value (the micro server does not echo handles)");
  }
  ret->tag = c->tags[0];
  ret->v = c->values[0];
  if (c->tags[0] == kTagStr) {
    ret->data = (const uint8_t*)c->values[0].v_str;
    ret->len = c->lens[0];
  } else if (c->tags[0] == kTagBytes) {
    ret->data = (const uint8_t*)c->bytes[0].data;
    ret->len = (uint32_t)c->bytes[0].size;
  }
  return 0;
}

static tvm_crt_error_t nop(RpcServer* s, RpcCall* c, RpcRet* ret) {
  (void)s;
  (void)c;
  ret->tag = kTagNone;
  return 0;
}

static tvm_crt_error_t array_copy(RpcServer* s, RpcCall* c, RpcRet* ret) {
  DLTensor *dst, *src;
  tvm_crt_error_t rc = arg_count("ember.rpc.array_copy", c, 2, 2);
  (void)s;
  if (rc == 0) rc = arg_tensor("ember.rpc.array_copy", c, 0, &dst);
  if (rc == 0) rc = arg_tensor("ember.rpc.array_copy", c, 1, &src);
  if (rc == 0) rc = ember_tensor_copy_checked("ember.rpc.array_copy", "array", "dst", 3, dst, src);
  ret->tag = kTagNone;
  return rc;
}

static tvm_crt_error_t workspace_stats(RpcServer* s, RpcCall* c, RpcRet* ret) {
  static const char* const kFields[] = {"size", "used", "peak", "live", "objects"};
  EmberStackAllocatorStats st = ember_crt_workspace_stats();
  const uint64_t values[] = {st.size, st.used, st.peak, st.live, rpc_live_objects(s)};
  uint32_t i;
  tvm_crt_error_t rc = arg_count("ember.micro.workspace_stats", c, 1, 1);
  if (rc != 0) return rc;
  for (i = 0; c->codes[0] == kTVMStr && i < 5u; ++i) {
    if (strcmp(c->values[0].v_str, kFields[i]) == 0) {
      ret_int(ret, (int64_t)values[i]);
      return 0;
    }
  }
  return bad_arg("ember.micro.workspace_stats", 0, "one of size, used, peak, live, objects");
}

typedef tvm_crt_error_t (*Builtin)(RpcServer* s, RpcCall* c, RpcRet* ret);
static const struct {
  const char* name;
  Builtin fn;
} kBuiltins[] = {
    {"runtime.SystemLib", system_lib},       {"tvm.graph_executor.create", graph_create},
    {"tvm.aot_executor.create", aot_create}, {"testing.echo", echo},
    {"testing.nop", nop},                    {"ember.rpc.array_copy", array_copy},
    {"ember.micro.workspace_stats", workspace_stats},
};
#define NUM_BUILTINS ((int)(sizeof(kBuiltins) / sizeof(kBuiltins[0])))

int rpc_builtin_find(const char* name) {
  int i;
  for (i = 0; i < NUM_BUILTINS; ++i) {
    if (strcmp(kBuiltins[i].name, name) == 0) return i;
  }
  return -1;
}

tvm_crt_error_t rpc_call_builtin(RpcServer* s, int index, RpcCall* c, RpcRet* ret) {
  memset(ret, 0, sizeof(*ret));
  return kBuiltins[index].fn(s, c, ret);
}
