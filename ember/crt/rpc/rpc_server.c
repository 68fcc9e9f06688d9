/*
 * rpc_server.c -- the micro RPC server's session: handshake, requests, replies (see
 * rpc_server.h and docs/rpc.md).
 *
 * Each request is decoded from the frame buffer in place (strings are NUL-terminated where
 * their length prefix was), served, and answered with one RETURN or ERROR frame. A request
 * that breaks the protocol (a truncated field, trailing bytes, an unknown tag or kind) gets
 * an ERROR frame and ends the session; one that fails (an unknown handle or name, a wrong
 * argument, a kernel error) gets an ERROR reply and the session goes on.
 */
#include <string.h>

#include "rpc_internal.h"

static RpcServer g_server;

static const char kServerInfo[] = "ember micro RPC server (C runtime)";
static const char kFuncNotFound[] = "ember.runtime.errors.FunctionNotFoundError";

/* ---- arguments ------------------------------------------------------------------------------ */
static tvm_crt_error_t decode_array(RpcServer* s, RpcReader* r, int i) {
  RpcCall* c = &s->call;
  int64_t shape[EMBER_CRT_MAX_NDIM];
  uint32_t ndim, dlen;
  uint64_t nbytes;
  uint8_t* data;
  char* dtype_text;
  DLDataType dtype;
  RpcObject* o;
  tvm_crt_error_t rc = rpc_str(r, "array dtype", &dtype_text, &dlen);
  if (rc == 0 && ember_dtype_parse(dtype_text, dlen, &dtype) != 0) {
    rc = rpc_protocol_error(r->what, "an array by value has an unknown dtype");
  }
  if (rc == 0) rc = rpc_shape(r, "array shape", shape, EMBER_CRT_MAX_NDIM, &ndim);
  if (rc == 0) rc = rpc_u64(r, "array byte count", &nbytes);
  if (rc == 0 && nbytes > r->len - r->pos) {
    rc = rpc_protocol_error(r->what, "payload truncated reading the data of an array by value");
  }
  if (rc != 0) return rc;
  if (ndim <= EMBER_CRT_MAX_NDIM && nbytes != ember_tensor_bytes(dtype, (int32_t)ndim, shape)) {
    return rpc_protocol_error(r->what, "an array by value has a byte count that does not match "
                              "its dtype and shape");
  }
  if ((rc = rpc_take(r, (uint32_t)nbytes, "array data", &data)) != 0) return rc;
  if ((rc = rpc_array_new(s, dtype, ndim, shape, &o)) != 0) return rc;
  memcpy(o->u.array.t.data, data, (size_t)nbytes);
  c->objs[i] = o; /* a temporary: freed when the call ends */
  c->values[i].v_handle = &o->u.array.t;
  c->codes[i] = kTVMDLTensorHandle;
  return 0;
}

static tvm_crt_error_t decode_handle(RpcServer* s, RpcReader* r, int i, uint8_t tag) {
  RpcCall* c = &s->call;
  int64_t dims[1];
  uint64_t handle, skip64;
  uint32_t n, skip;
  char* text;
  RpcObject* o;
  tvm_crt_error_t rc = rpc_u64(r, "handle", &handle);
  if (rc == 0 && tag == kTagArrayHandle) {
    rc = rpc_str(r, "array dtype", &text, &n);
    if (rc == 0) rc = rpc_shape(r, "array shape", dims, 0, &n);
    if (rc == 0) rc = rpc_u64(r, "array device", &skip64);
  } else if (rc == 0 && tag == kTagModuleHandle) {
    rc = rpc_str(r, "module type key", &text, &n);
    if (rc == 0) rc = rpc_u32(r, "module flags", &skip);
  }
  if (rc != 0) return rc;
  o = rpc_object_find(s, handle, tag == kTagArrayHandle    ? RPC_ARRAYS
                                 : tag == kTagModuleHandle ? RPC_MODULES
                                                           : RPC_MASK(kObjFunc),
                      tag == kTagArrayHandle ? "array" : tag == kTagModuleHandle ? "module"
                                                                                 : "function");
  if (o == NULL) return kTvmErrorRpcHandleInvalid;
  c->objs[i] = o;
  c->values[i].v_handle = tag == kTagArrayHandle ? (void*)&o->u.array.t : (void*)o;
  c->codes[i] = tag == kTagArrayHandle    ? kTVMDLTensorHandle
                : tag == kTagModuleHandle ? kTVMModuleHandle
                                          : kTVMPackedFuncHandle;
  return 0;
}

static tvm_crt_error_t decode_arg(RpcServer* s, RpcReader* r, int i) {
  RpcCall* c = &s->call;
  uint8_t tag, b;
  uint32_t u;
  uint64_t v;
  char* text;
  tvm_crt_error_t rc = rpc_u8(r, "value tag", &tag);
  c->tags[i] = tag;
  c->objs[i] = NULL;
  if (rc != 0) return rc;
  switch (tag) {
    case kTagNone:
      c->codes[i] = kTVMNullptr;
      c->values[i].v_handle = NULL;
      return 0;
    case kTagInt:
    case kTagFloat:
      rc = rpc_u64(r, tag == kTagInt ? "int" : "float", &v);
      memcpy(&c->values[i], &v, sizeof(v)); /* v_int64 or v_float64: the same 8 bytes */
      c->codes[i] = tag == kTagInt ? kTVMArgInt : kTVMArgFloat;
      return rc;
    case kTagBool:
      rc = rpc_u8(r, "bool", &b);
      c->values[i].v_int64 = b != 0u;
      c->codes[i] = kTVMArgInt;
      return rc;
    case kTagStr:
      rc = rpc_str(r, "str", &text, &c->lens[i]);
      c->values[i].v_str = text;
      c->codes[i] = kTVMStr;
      return rc;
    case kTagBytes:
      rc = rpc_u32(r, "bytes length", &u);
      if (rc == 0) rc = rpc_take(r, u, "bytes", (uint8_t**)&c->bytes[i].data);
      c->bytes[i].size = u;
      c->values[i].v_handle = &c->bytes[i];
      c->codes[i] = kTVMBytes;
      return rc;
    case kTagDevice:
      rc = rpc_u64(r, "device", &v);
      c->values[i].v_device.device_type = (DLDeviceType)(int32_t)(uint32_t)(v & 0xFFFFFFFFu);
      c->values[i].v_device.device_id = (int32_t)(uint32_t)(v >> 32);
      c->codes[i] = kDLDevice;
      return rc;
    case kTagDtype:
      rc = rpc_str(r, "dtype", &text, &u);
      if (rc == 0 && ember_dtype_parse(text, u, &c->values[i].v_type) != 0) {
        rc = rpc_protocol_error(r->what, "a dtype value is not a dtype this server knows");
      }
      c->codes[i] = kTVMDataType;
      return rc;
    case kTagNDArray:
      return decode_array(s, r, i);
    case kTagArrayHandle:
    case kTagModuleHandle:
    case kTagFuncHandle:
      return decode_handle(s, r, i, tag);
    case kTagList:
    case kTagMap:
    case kTagAdt:
      return ember_crt_error(kTvmErrorRpcUnsupported, "micro RPC server: lists, maps and ADTs "
                             "cannot be passed to its functions");
    default:
      return rpc_protocol_error(r->what, "unknown value tag");
  }
}

/* Free the call's temporaries (arrays sent by value). */
static void end_call(RpcServer* s) {
  RpcCall* c = &s->call;
  int i;
  for (i = 0; i < c->n; ++i) {
    if (c->tags[i] == kTagNDArray && c->objs[i] != NULL) c->objs[i]->zombie = 1;
  }
  c->n = 0;
  rpc_collect(s);
}

static tvm_crt_error_t decode_args(RpcServer* s, RpcReader* r) {
  RpcCall* c = &s->call;
  uint32_t argc, i;
  tvm_crt_error_t rc = rpc_u32(r, "argument count", &argc);
  c->n = 0;
  if (rc != 0) return rc;
  if (argc > r->len - r->pos) return rpc_protocol_error(r->what, "more arguments than bytes");
  if (argc > EMBER_CRT_RPC_MAX_ARGS) {
    ember_crt_error(kTvmErrorRpcUnsupported, "micro RPC server: a call takes at most ");
    ember_crt_error_append_u64(EMBER_CRT_RPC_MAX_ARGS);
    ember_crt_error_append(" arguments (EMBER_CRT_RPC_MAX_ARGS), got ");
    ember_crt_error_append_u64(argc);
    return kTvmErrorRpcUnsupported;
  }
  for (i = 0; i < argc && rc == 0; ++i) {
    c->n = (int)i + 1;
    rc = decode_arg(s, r, (int)i);
  }
  return rc == 0 ? rpc_done(r) : rc;
}

/* ---- replies -------------------------------------------------------------------------------- */
static void write_array_handle(RpcServer* s, const RpcObject* o) {
  const DLTensor* t = &o->u.array.t;
  int32_t d;
  rpc_w_u64(s, o->handle);
  rpc_w_dtype(s, t->dtype);
  rpc_w_u32(s, (uint32_t)t->ndim);
  for (d = 0; d < t->ndim; ++d) rpc_w_u64(s, (uint64_t)t->shape[d]);
  rpc_w_u32(s, (uint32_t)t->device.device_type);
  rpc_w_u32(s, (uint32_t)t->device.device_id);
}

static tvm_crt_error_t send_return(RpcServer* s, const RpcRet* ret) {
  uint64_t bits;
  rpc_reply_start(s);
  rpc_w_u8(s, ret->tag);
  switch (ret->tag) {
    case kTagInt:
    case kTagFloat:
      memcpy(&bits, &ret->v, sizeof(bits));
      rpc_w_u64(s, bits);
      break;
    case kTagBool:
      rpc_w_u8(s, ret->v.v_int64 != 0);
      break;
    case kTagStr:
    case kTagBytes:
      rpc_w_u32(s, ret->len);
      return rpc_send(s, kRpcReturn, ret->data, ret->len);
    case kTagDevice:
      rpc_w_u32(s, (uint32_t)ret->v.v_device.device_type);
      rpc_w_u32(s, (uint32_t)ret->v.v_device.device_id);
      break;
    case kTagDtype:
      rpc_w_dtype(s, ret->v.v_type);
      break;
    case kTagArrayHandle:
      write_array_handle(s, ret->obj);
      break;
    case kTagModuleHandle:
      rpc_w_u64(s, ret->obj->handle);
      rpc_w_cstr(s, ret->obj->kind == kObjGraph ? "GraphExecutor"
                    : ret->obj->kind == kObjAot ? "AotExecutor" : "system_lib");
      rpc_w_u32(s, ret->obj->kind == kObjSysLib ? 0u : 1u); /* executors: the interface */
      break;
    case kTagFuncHandle:
      rpc_w_u64(s, ret->obj->handle);
      break;
    default: /* kTagNone */
      break;
  }
  return rpc_send(s, kRpcReturn, NULL, 0);
}

/* ---- requests ------------------------------------------------------------------------------- */
static tvm_crt_error_t not_found(RpcServer* s, const char* where, const char* name,
                                 const char* type) {
  s->err_type = type;
  ember_crt_error(kTvmErrorFunctionNameNotFound, where);
  ember_crt_error_append(" has no function named ");
  ember_crt_error_append_name(name, EMBER_CRT_MAX_NAME_LENGTH);
  return kTvmErrorFunctionNameNotFound;
}

/* Call func (a function object, or by name: builtin >= 0, else registry handle fn). */
static tvm_crt_error_t invoke(RpcServer* s, const RpcObject* func, int builtin,
                              TVMFunctionHandle fn, RpcRet* ret) {
  RpcCall* c = &s->call;
  TVMValue v;
  int code = kTVMNullptr;
  tvm_crt_error_t rc;
  if (func != NULL && func->u.func.fkind == kFnMethod) {
    return rpc_call_method(s, &s->objects[func->parent], func->u.func.index, c, ret);
  }
  if (func != NULL) {
    builtin = func->u.func.fkind == kFnBuiltin ? func->u.func.index : -1;
    fn = func->u.func.fn;
  }
  if (builtin >= 0) return rpc_call_builtin(s, builtin, c, ret);
  rc = TVMFuncCall(fn, c->values, c->codes, c->n, &v, &code);
  return rc != 0 ? rc : rpc_ret_from_packed(v, code, ret);
}

static tvm_crt_error_t serve_call(RpcServer* s, RpcReader* r) {
  EmberStackAllocatorStats mark;
  TVMFunctionHandle fn = NULL;
  RpcObject* func = NULL;
  RpcRet ret;
  int builtin = -1;
  uint8_t target;
  uint64_t handle;
  uint32_t len;
  char* name;
  tvm_crt_error_t rc = rpc_u8(r, "call target", &target);
  if (rc == 0 && target == 0u) {
    if ((rc = rpc_str(r, "function name", &name, &len)) != 0) return rc;
    builtin = rpc_builtin_find(name);
    if (builtin < 0 && TVMFuncGetGlobal(name, &fn) != 0) {
      return not_found(s, "the micro RPC server (its built-ins and the system library)", name,
                       NULL);
    }
  } else if (rc == 0 && target == 1u) {
    if ((rc = rpc_u64(r, "function handle", &handle)) != 0) return rc;
    if ((func = rpc_object_find(s, handle, RPC_MASK(kObjFunc), "function")) == NULL) {
      return kTvmErrorRpcHandleInvalid;
    }
  } else if (rc == 0) {
    return rpc_protocol_error("CALL", "unknown call target kind (expected 0: by name, 1: by "
                              "handle)");
  }
  if (rc == 0) rc = decode_args(s, r);
  if (rc == 0) {
    mark = ember_crt_workspace_stats();
    rc = invoke(s, func, builtin, fn, &ret);
    if (rc != 0 && ember_crt_workspace_stats().live > mark.live) {
      (void)ember_crt_workspace_release_to(mark); /* what a failed kernel left behind */
    }
  }
  if (rc == 0) {
    rc = send_return(s, &ret);
    end_call(s);
    return rc == 0 ? 0 : kTvmErrorRpcTransport;
  }
  end_call(s);
  return rc;
}

static tvm_crt_error_t serve_get_func(RpcServer* s, RpcReader* r, RpcRet* ret) {
  TVMFunctionHandle fn = NULL;
  RpcObject *mod = NULL, *f;
  uint64_t handle;
  uint8_t query_imports;
  uint32_t len;
  char* name;
  int index = -1;
  tvm_crt_error_t rc = rpc_u64(r, "module handle", &handle);
  if (rc == 0) rc = rpc_u8(r, "query imports", &query_imports);
  if (rc == 0) rc = rpc_str(r, "name", &name, &len);
  if (rc == 0) rc = rpc_done(r);
  if (rc != 0) return rc;
  if (handle != 0u && (mod = rpc_object_find(s, handle, RPC_MODULES, "module")) == NULL) {
    return kTvmErrorRpcHandleInvalid;
  }
  if (mod == NULL) {
    index = rpc_builtin_find(name);
    if (index < 0 && TVMFuncGetGlobal(name, &fn) != 0) {
      return not_found(s, "the micro RPC server (its built-ins and the system library)", name,
                       NULL);
    }
  } else if (mod->kind == kObjSysLib) {
    if (TVMFuncGetGlobal(name, &fn) != 0) {
      return not_found(s, "the system library", name, kFuncNotFound);
    }
  } else if ((index = rpc_method_find(mod, name)) < 0) {
    return not_found(s, mod->kind == kObjGraph ? "the graph executor" : "the AOT executor", name,
                     kFuncNotFound);
  }
  if ((f = rpc_object_new(s, kObjFunc, 0)) == NULL) return kTvmErrorRpcTableFull;
  f->u.func.fkind = mod == NULL ? (index >= 0 ? kFnBuiltin : kFnRegistry)
                    : mod->kind == kObjSysLib ? kFnRegistry : kFnMethod;
  f->u.func.index = (uint8_t)(index < 0 ? 0 : index);
  f->u.func.fn = fn;
  if (f->u.func.fkind == kFnMethod) rpc_object_adopt(s, f, mod);
  ret->tag = kTagFuncHandle;
  ret->obj = f;
  return 0;
}

static tvm_crt_error_t serve_array_new(RpcServer* s, RpcReader* r, RpcRet* ret) {
  int64_t shape[EMBER_CRT_MAX_NDIM];
  uint32_t ndim, len, dev_type, dev_id;
  DLDataType dtype;
  char* text;
  tvm_crt_error_t rc = rpc_str(r, "dtype", &text, &len);
  if (rc == 0) rc = rpc_shape(r, "shape", shape, EMBER_CRT_MAX_NDIM, &ndim);
  if (rc == 0) rc = rpc_u32(r, "device type", &dev_type);
  if (rc == 0) rc = rpc_u32(r, "device id", &dev_id);
  if (rc == 0) rc = rpc_done(r);
  if (rc != 0) return rc;
  if (ember_dtype_parse(text, len, &dtype) != 0) {
    ember_crt_error(kTvmErrorGenericInvalidArgument, "ARRAY_NEW: unknown dtype ");
    ember_error_append_str(text, len);
    return kTvmErrorGenericInvalidArgument;
  }
  if (dev_type != kDLCPU) {
    ember_crt_error(kTvmErrorGenericInvalidArgument, "ARRAY_NEW: device type ");
    ember_crt_error_append_u64(dev_type);
    ember_crt_error_append(" is not a device of this server (only the CPU, device type 1)");
    return kTvmErrorGenericInvalidArgument;
  }
  if ((rc = rpc_array_new(s, dtype, ndim, shape, &ret->obj)) != 0) return rc;
  ret->tag = kTagArrayHandle;
  return 0;
}

/* The bytes [offset, offset + n) of an array, checked. */
static tvm_crt_error_t array_span(RpcServer* s, RpcReader* r, uint64_t n_or_max, int n_given,
                                  uint8_t** at, uint64_t* n) {
  uint64_t handle, offset, size;
  RpcObject* o;
  tvm_crt_error_t rc = rpc_u64(r, "array handle", &handle);
  if (rc == 0) rc = rpc_u64(r, "offset", &offset);
  if (rc == 0 && n_given) rc = rpc_u64(r, "length", &n_or_max);
  if (rc == 0 && n_given) rc = rpc_done(r);
  if (rc == 0 && !n_given) n_or_max = r->len - r->pos;
  if (rc != 0) return rc;
  if ((o = rpc_object_find(s, handle, RPC_ARRAYS, "array")) == NULL) {
    return kTvmErrorRpcHandleInvalid;
  }
  size = ember_tensor_bytes(o->u.array.t.dtype, o->u.array.t.ndim, o->u.array.t.shape);
  if (offset > size || n_or_max > size - offset || n_or_max > 0x7FFFFFF0u) {
    s->err_type = "IndexError";
    ember_crt_error(kTvmErrorGenericInvalidArgument, "array copy of bytes [");
    ember_crt_error_append_u64(offset);
    ember_crt_error_append(", +");
    ember_crt_error_append_u64(n_or_max);
    ember_crt_error_append(") is out of range for an array of ");
    ember_crt_error_append_u64(size);
    ember_crt_error_append(" bytes");
    return kTvmErrorGenericInvalidArgument;
  }
  *at = (uint8_t*)o->u.array.t.data + o->u.array.t.byte_offset + offset;
  *n = n_or_max;
  return 0;
}

static tvm_crt_error_t serve_free(RpcServer* s, RpcReader* r) {
  uint32_t count, i;
  uint64_t handle;
  tvm_crt_error_t rc = rpc_u32(r, "handle count", &count);
  if (rc == 0 && count != (r->len - r->pos) / 8u) {
    return rpc_protocol_error("FREE", "the handle count does not match the payload");
  }
  for (i = 0; rc == 0 && i < count; ++i) {
    if ((rc = rpc_u64(r, "handle", &handle)) == 0) rpc_object_free(s, handle);
  }
  if (rc == 0) rc = rpc_done(r);
  rpc_collect(s);
  return rc;
}

/* One request: 0 (answered), kTvmErrorRpcProtocol (the caller ends the session) or
 * kTvmErrorRpcTransport (a reply could not be written). *closed is set by CLOSE. */
static tvm_crt_error_t serve_request(RpcServer* s, uint16_t kind, uint32_t len, int* closed) {
  RpcReader r;
  RpcRet ret;
  uint8_t* at;
  uint64_t n = 0;
  tvm_crt_error_t rc;
  r.p = s->cfg->buffer;
  r.len = len;
  r.pos = 0;
  memset(&ret, 0, sizeof(ret));
  switch (kind) {
    case kRpcCall:
      r.what = "CALL";
      rc = serve_call(s, &r);
      break;
    case kRpcGetFunc:
      r.what = "GET_FUNC";
      rc = serve_get_func(s, &r, &ret);
      if (rc == 0) rc = send_return(s, &ret) == 0 ? 0 : kTvmErrorRpcTransport;
      break;
    case kRpcArrayNew:
      r.what = "ARRAY_NEW";
      rc = serve_array_new(s, &r, &ret);
      if (rc == 0) rc = send_return(s, &ret) == 0 ? 0 : kTvmErrorRpcTransport;
      break;
    case kRpcArrayWrite:
      r.what = "ARRAY_WRITE";
      rc = array_span(s, &r, 0, 0, &at, &n);
      if (rc == 0) {
        memcpy(at, r.p + r.pos, (size_t)n);
        rc = send_return(s, &ret) == 0 ? 0 : kTvmErrorRpcTransport;
      }
      break;
    case kRpcArrayRead:
      r.what = "ARRAY_READ";
      rc = array_span(s, &r, 0, 1, &at, &n);
      if (rc == 0) {
        rpc_reply_start(s);
        rpc_w_u8(s, kTagBytes);
        rpc_w_u32(s, (uint32_t)n);
        rc = rpc_send(s, kRpcReturn, at, (uint32_t)n) == 0 ? 0 : kTvmErrorRpcTransport;
      }
      break;
    case kRpcUpload:
    case kRpcLoadModule:
      rc = ember_crt_error(kTvmErrorRpcUnsupported, "the micro RPC server has no file system: "
                           "files cannot be uploaded or loaded; the model is linked into the "
                           "program (use get_system_lib())");
      break;
    case kRpcFree:
      r.what = "FREE";
      return serve_free(s, &r);
    case kRpcClose:
      *closed = 1;
      return 0;
    default:
      ember_crt_error(kTvmErrorRpcProtocol, "frame: unexpected frame kind ");
      ember_crt_error_append_u64(kind);
      ember_crt_error_append(" from the client");
      return kTvmErrorRpcProtocol;
  }
  if (rc == 0 || rc == kTvmErrorRpcProtocol || rc == kTvmErrorRpcTransport) return rc;
  return rpc_send_error(s, rc) == 0 ? 0 : kTvmErrorRpcTransport;
}

/* ---- the handshake -------------------------------------------------------------------------- */
static tvm_crt_error_t read_hello(RpcServer* s) {
  RpcReader r;
  uint16_t kind;
  uint32_t len, version, flags, timeout, key_len;
  uint8_t* nonce;
  char* key;
  const char* own = s->cfg->key != NULL ? s->cfg->key : "";
  tvm_crt_error_t rc = rpc_read_frame(s, &kind, &len);
  if (rc == 1) return ember_crt_error(kTvmErrorRpcRefused, "the host closed the stream before "
                                      "its HELLO");
  if (rc != 0) return rc;
  if (kind != kRpcHello) {
    return rpc_protocol_error("HELLO", "expected a HELLO frame to start the session");
  }
  r.p = s->cfg->buffer;
  r.len = len;
  r.pos = 0;
  r.what = "HELLO";
  rc = rpc_u32(&r, "protocol version", &version);
  if (rc == 0 && version != RPC_PROTOCOL_VERSION) {
    ember_crt_error(kTvmErrorRpcProtocol, "the client speaks RPC protocol version ");
    ember_crt_error_append_u64(version);
    ember_crt_error_append("; this server speaks version 1");
    return kTvmErrorRpcProtocol;
  }
  if (rc == 0) rc = rpc_u32(&r, "flags", &flags);
  if (rc == 0) rc = rpc_u32(&r, "session timeout", &timeout);
  if (rc == 0) rc = rpc_take(&r, 16, "client nonce", &nonce);
  if (rc == 0) rc = rpc_str(&r, "key", &key, &key_len);
  if (rc == 0) rc = rpc_done(&r);
  if (rc != 0) return rc;
  if (flags & 1u) {
    s->err_type = "ember.runtime.rpc.protocol.AuthenticationError";
    return ember_crt_error(kTvmErrorRpcRefused, "the micro RPC server does not support "
                           "authentication: connect without a secret, over a link you trust "
                           "(a pipe, a serial line)");
  }
  if (strlen(key) != key_len || strcmp(key, own) != 0) {
    ember_crt_error(kTvmErrorRpcRefused, "key ");
    ember_error_append_str(key, key_len);
    ember_crt_error_append(" does not match the server's key");
    return kTvmErrorRpcRefused;
  }
  return 0;
}

static tvm_crt_error_t send_welcome(RpcServer* s) {
  static const uint8_t kNoProof[32] = {0};
  rpc_reply_start(s);
  rpc_w_u32(s, RPC_PROTOCOL_VERSION);
  rpc_w_u32(s, 0u); /* not authenticated */
  rpc_w_u64(s, s->max_frame);
  rpc_w_bytes(s, kNoProof, sizeof(kNoProof));
  rpc_w_cstr(s, kServerInfo);
  return rpc_send(s, kRpcWelcome, NULL, 0);
}

/* ---- the session ---------------------------------------------------------------------------- */
tvm_crt_error_t ember_rpc_server_run(const EmberRpcServerConfig* cfg) {
  RpcServer* s = &g_server;
  uint16_t kind;
  uint32_t len;
  int closed = 0;
  tvm_crt_error_t rc;
  if (cfg == NULL || cfg->io.read == NULL || cfg->io.write == NULL || cfg->buffer == NULL ||
      cfg->buffer_size < EMBER_CRT_RPC_MIN_FRAME_BYTES) {
    return ember_crt_error(kTvmErrorGenericInvalidArgument, "ember_rpc_server_run: the config "
                           "needs read and write hooks and a buffer of at least 64 KiB");
  }
  memset(s, 0, sizeof(*s));
  s->cfg = cfg;
  s->max_frame = cfg->buffer_size > 0xFFFFFFFFu ? 0xFFFFFFFFu : (uint32_t)cfg->buffer_size;
  s->frame_timeout = cfg->frame_timeout_ms != 0u ? cfg->frame_timeout_ms : 10000u;
  s->next_handle = 1;
  rc = read_hello(s);
  if (rc == 0) {
    rc = send_welcome(s);
    if (rc != 0) ember_crt_error(rc, "micro RPC server: writing WELCOME to the host failed");
  } else if (rc != kTvmErrorRpcTransport) {
    (void)rpc_send_error(s, rc);
  }
  while (rc == 0 && !closed) {
    rc = rpc_read_frame(s, &kind, &len);
    if (rc == 1) { /* the host went away between frames */
      rc = 0;
      break;
    }
    if (rc == 0) rc = serve_request(s, kind, len, &closed);
    if (rc == kTvmErrorRpcProtocol) {
      (void)rpc_send_error(s, rc);
    } else if (rc == kTvmErrorRpcTransport) {
      ember_crt_error(rc, "micro RPC server: writing a reply to the host failed");
    }
  }
  rpc_release_all(s);
  return rc;
}
