/*
 * rpc_objects.c -- the objects a micro RPC session hands out by handle, and their memory.
 *
 * Arrays and executors live in the workspace arena, which is a stack. An object is released
 * when the client frees it (or, for a call's temporary array, when the call ends) and
 *   - nothing taken from it is alive (an executor outlives its output views and methods), and
 *   - it holds no arena memory, or the newest arena memory of the session.
 * Until then it is a zombie: invisible to the client, its memory kept. So the arena's LIFO
 * rule holds whatever order the client frees in; the cost is memory held a little longer.
 */
#include <string.h>

#include "rpc_internal.h"

static const char* const kKindNames[] = {"free slot", "array", "array", "module", "module",
                                         "module", "function"};

RpcObject* rpc_object_new(RpcServer* s, RpcObjKind kind, int holds_memory) {
  uint32_t i;
  for (i = 0; i < EMBER_CRT_RPC_MAX_OBJECTS; ++i) {
    RpcObject* o = &s->objects[i];
    if (o->handle != 0u) continue;
    memset(o, 0, sizeof(*o));
    o->handle = s->next_handle++;
    o->kind = (uint8_t)kind;
    o->parent = -1;
    if (holds_memory) o->serial = ++s->next_serial;
    return o;
  }
  ember_crt_error(kTvmErrorRpcTableFull, "micro RPC server: all ");
  ember_crt_error_append_u64(EMBER_CRT_RPC_MAX_OBJECTS);
  ember_crt_error_append(" object slots are taken (arrays, modules and functions the client "
                         "still holds); free some, or raise EMBER_CRT_RPC_MAX_OBJECTS");
  return NULL;
}

void rpc_object_adopt(RpcServer* s, RpcObject* child, RpcObject* parent) {
  child->parent = (int16_t)(parent - s->objects);
  parent->children++;
}

void rpc_object_drop(RpcServer* s, RpcObject* obj) {
  if (obj->serial == s->next_serial) s->next_serial--;
  if (obj->parent >= 0) s->objects[obj->parent].children--;
  memset(obj, 0, sizeof(*obj));
}

RpcObject* rpc_object_find(RpcServer* s, uint64_t handle, uint32_t kind_mask, const char* what) {
  uint32_t i;
  for (i = 0; handle != 0u && i < EMBER_CRT_RPC_MAX_OBJECTS; ++i) {
    RpcObject* o = &s->objects[i];
    if (o->handle != handle || o->zombie) continue;
    if ((RPC_MASK(o->kind) & kind_mask) != 0u) return o;
    ember_crt_error(kTvmErrorRpcHandleInvalid, "micro RPC server: handle ");
    ember_crt_error_append_u64(handle);
    ember_crt_error_append(" is a ");
    ember_crt_error_append(kKindNames[o->kind]);
    ember_crt_error_append(", not a ");
    ember_crt_error_append(what);
    return NULL;
  }
  ember_crt_error(kTvmErrorRpcHandleInvalid, "micro RPC server: no ");
  ember_crt_error_append(what);
  ember_crt_error_append(" with handle ");
  ember_crt_error_append_u64(handle);
  ember_crt_error_append(" in this session (freed, or never handed out)");
  return NULL;
}

void rpc_object_free(RpcServer* s, uint64_t handle) {
  uint32_t i;
  for (i = 0; handle != 0u && i < EMBER_CRT_RPC_MAX_OBJECTS; ++i) {
    if (s->objects[i].handle == handle) s->objects[i].zombie = 1;
  }
}

static uint32_t newest_serial(const RpcServer* s) {
  uint32_t i, top = 0;
  for (i = 0; i < EMBER_CRT_RPC_MAX_OBJECTS; ++i) {
    if (s->objects[i].handle != 0u && s->objects[i].serial > top) top = s->objects[i].serial;
  }
  return top;
}

static void release(RpcServer* s, RpcObject* o) {
  switch (o->kind) {
    case kObjArray:
      (void)TVMBackendFreeWorkspace(kDLCPU, 0, o->u.array.block);
      break;
    case kObjGraph:
      ember_graph_executor_release((EmberGraphExecutor*)o->u.exec.ex);
      (void)TVMBackendFreeWorkspace(kDLCPU, 0, o->u.exec.text);
      break;
    case kObjAot:
      ember_aot_executor_release((EmberAotExecutor*)o->u.exec.ex);
      break;
    default: /* views, modules and functions own no memory */
      break;
  }
  if (o->parent >= 0) s->objects[o->parent].children--;
  if (o->serial != 0u && o->serial == s->next_serial) s->next_serial--;
  memset(o, 0, sizeof(*o));
}

void rpc_collect(RpcServer* s) {
  int progress = 1;
  while (progress) {
    uint32_t i, top = newest_serial(s);
    progress = 0;
    for (i = 0; i < EMBER_CRT_RPC_MAX_OBJECTS; ++i) {
      RpcObject* o = &s->objects[i];
      if (o->handle == 0u || !o->zombie || o->children != 0u) continue;
      if (o->serial != 0u && o->serial != top) continue;
      release(s, o);
      progress = 1;
      top = newest_serial(s);
    }
  }
}

void rpc_release_all(RpcServer* s) {
  uint32_t i;
  for (i = 0; i < EMBER_CRT_RPC_MAX_OBJECTS; ++i) s->objects[i].zombie = 1;
  rpc_collect(s);
}

uint32_t rpc_live_objects(const RpcServer* s) {
  uint32_t i, n = 0;
  for (i = 0; i < EMBER_CRT_RPC_MAX_OBJECTS; ++i) n += s->objects[i].handle != 0u;
  return n;
}

/* bytes of a compact tensor, or UINT64_MAX when the product overflows */
static uint64_t checked_bytes(DLDataType dtype, uint32_t ndim, const int64_t* shape) {
  uint64_t n = ((uint64_t)dtype.bits * dtype.lanes + 7u) / 8u;
  uint32_t i;
  for (i = 0; i < ndim; ++i) {
    uint64_t d = (uint64_t)shape[i];
    if (d != 0u && n > UINT64_MAX / d) return UINT64_MAX;
    n *= d;
  }
  return n;
}

tvm_crt_error_t rpc_array_new(RpcServer* s, DLDataType dtype, uint32_t ndim, const int64_t* shape,
                              RpcObject** out) {
  uint64_t nbytes = checked_bytes(dtype, ndim, shape), head = ((uint64_t)ndim * 8u + 63u) & ~63u;
  RpcObject* o;
  uint8_t* block;
  if (ndim > EMBER_CRT_MAX_NDIM) {
    ember_crt_error(kTvmErrorRpcUnsupported, "micro RPC server: arrays have at most ");
    ember_crt_error_append_u64(EMBER_CRT_MAX_NDIM);
    ember_crt_error_append(" dimensions, got ");
    ember_crt_error_append_u64(ndim);
    return kTvmErrorRpcUnsupported;
  }
  if (nbytes > UINT64_MAX - head) {
    return ember_crt_error(kTvmErrorWorkspaceExhausted, "micro RPC server: the array's size "
                           "overflows 64 bits");
  }
  if ((o = rpc_object_new(s, kObjArray, 1)) == NULL) return kTvmErrorRpcTableFull;
  block = (uint8_t*)TVMBackendAllocWorkspace(kDLCPU, 0, head + nbytes, kDLUInt, 8);
  if (block == NULL) {
    rpc_object_drop(s, o);
    ember_crt_error_append(" (micro RPC server: a new array)");
    return kTvmErrorWorkspaceExhausted;
  }
  if (ndim > 0u) memcpy(block, shape, ndim * sizeof(int64_t));
  o->u.array.block = block;
  o->u.array.t.data = block + head;
  o->u.array.t.device.device_type = kDLCPU;
  o->u.array.t.device.device_id = 0;
  o->u.array.t.ndim = (int32_t)ndim;
  o->u.array.t.dtype = dtype;
  o->u.array.t.shape = (int64_t*)(void*)block;
  o->u.array.t.strides = NULL;
  o->u.array.t.byte_offset = 0;
  *out = o;
  return 0;
}
