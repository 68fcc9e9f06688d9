/*
 * rpc_internal.h -- the micro RPC server's state, shared by its sources; not part of the API.
 *
 * One session at a time, so the state is one static RpcServer (rpc_server.c). Status codes:
 * 0, kTvmErrorRpcProtocol (the request broke the protocol: ERROR frame, end of the session),
 * or any other code (the request failed: ERROR reply, the session goes on). The message is
 * TVMGetLastError(); err_type, when set, names the Python class the client raises.
 */
#ifndef EMBER_CRT_RPC_INTERNAL_H_
#define EMBER_CRT_RPC_INTERNAL_H_

#include <stdint.h>

#include "ember/crt/aot_executor.h"
#include "ember/crt/crt.h"
#include "ember/crt/graph_executor.h"
#include "ember/crt/rpc_server.h"

#include "../src/backend/internal.h"

/* ---- wire constants (docs/rpc.md) ------------------------------------------------------- */
enum {
  kRpcHello = 0x0001, kRpcChallenge = 0x0002, kRpcAuth = 0x0003, kRpcWelcome = 0x0004,
  kRpcCall = 0x0010, kRpcGetFunc = 0x0011, kRpcArrayNew = 0x0020, kRpcArrayWrite = 0x0021,
  kRpcArrayRead = 0x0022, kRpcUpload = 0x0030, kRpcLoadModule = 0x0031, kRpcFree = 0x0040,
  kRpcClose = 0x0041, kRpcReturn = 0x0080, kRpcError = 0x0081
};
enum {
  kTagNone = 0, kTagInt = 1, kTagFloat = 2, kTagBool = 3, kTagStr = 4, kTagBytes = 5,
  kTagDevice = 6, kTagDtype = 7, kTagNDArray = 8, kTagArrayHandle = 9, kTagModuleHandle = 10,
  kTagFuncHandle = 11, kTagList = 12, kTagMap = 13, kTagAdt = 14
};
#define RPC_HEADER_BYTES 16u
#define RPC_PROTOCOL_VERSION 1u
#define RPC_MAX_WIRE_NDIM 64u
#define RPC_REPLY_BYTES 1024u /* the fixed part of a reply; large data goes as its tail */

/* ---- objects ------------------------------------------------------------------------------ */
typedef enum {
  kObjFree = 0, kObjArray, kObjView, kObjSysLib, kObjGraph, kObjAot, kObjFunc
} RpcObjKind;
typedef enum { kFnBuiltin = 0, kFnRegistry, kFnMethod } RpcFnKind;

typedef struct {
  uint64_t handle;   /* what the client calls it; 0: the slot is free */
  uint32_t serial;   /* creation order of the objects holding arena memory (0: none) */
  uint16_t children; /* live objects taken from this one (views, methods) */
  int16_t parent;    /* the slot this one was taken from, or -1 */
  uint8_t kind;
  uint8_t zombie; /* freed by the client (or a call's temporary): released when it can be */
  union {
    struct {
      DLTensor t;
      void* block; /* kObjArray: its arena block (the shape, then the data) */
    } array;
    struct {
      void* ex;
      char* text; /* kObjGraph: the graph JSON, copied (the executor points into it) */
      uint32_t text_len;
    } exec;
    struct {
      TVMFunctionHandle fn; /* kFnRegistry */
      uint8_t fkind;
      uint8_t index; /* kFnBuiltin, kFnMethod */
    } func;
  } u;
} RpcObject;

/* ---- one call ----------------------------------------------------------------------------- */
typedef struct {
  TVMValue values[EMBER_CRT_RPC_MAX_ARGS];
  int codes[EMBER_CRT_RPC_MAX_ARGS];
  uint8_t tags[EMBER_CRT_RPC_MAX_ARGS];    /* the wire tag of each argument */
  uint32_t lens[EMBER_CRT_RPC_MAX_ARGS];   /* byte length of str arguments */
  RpcObject* objs[EMBER_CRT_RPC_MAX_ARGS]; /* the object of handle arguments, else NULL */
  TVMByteArray bytes[EMBER_CRT_RPC_MAX_ARGS];
  int n;
} RpcCall;

/* A result: a wire tag with its value; STR and BYTES point to data (len bytes) that stays
 * valid until the reply is sent; handles are objects. */
typedef struct {
  uint8_t tag;
  TVMValue v;
  const uint8_t* data;
  uint32_t len;
  RpcObject* obj;
} RpcRet;

/* ---- the server --------------------------------------------------------------------------- */
typedef struct {
  const EmberRpcServerConfig* cfg;
  uint32_t max_frame;
  uint32_t frame_timeout; /* milliseconds */
  uint32_t seq;
  const char* err_type; /* set by a failing step to choose the client's exception class */
  RpcObject objects[EMBER_CRT_RPC_MAX_OBJECTS];
  uint64_t next_handle;
  uint32_t next_serial;
  RpcCall call;
  uint8_t reply[RPC_HEADER_BYTES + RPC_REPLY_BYTES];
  uint32_t reply_len; /* payload bytes written after the header */
  int reply_overflow;
} RpcServer;

/* rpc_wire.c: frames, payload readers, replies */
typedef struct {
  uint8_t* p;
  uint32_t len, pos;
  const char* what; /* the request kind, for messages */
} RpcReader;

tvm_crt_error_t rpc_protocol_error(const char* what, const char* problem);
tvm_crt_error_t rpc_take(RpcReader* r, uint32_t n, const char* field, uint8_t** out);
tvm_crt_error_t rpc_u8(RpcReader* r, const char* field, uint8_t* out);
tvm_crt_error_t rpc_u32(RpcReader* r, const char* field, uint32_t* out);
tvm_crt_error_t rpc_u64(RpcReader* r, const char* field, uint64_t* out);
/* A str field, NUL-terminated in place (the bytes move over their length prefix). */
tvm_crt_error_t rpc_str(RpcReader* r, const char* field, char** out, uint32_t* len);
/* A shape: ndim (at most 64 on the wire) and dims >= 0; dims beyond cap are read, not kept. */
tvm_crt_error_t rpc_shape(RpcReader* r, const char* field, int64_t* dims, uint32_t cap,
                          uint32_t* ndim);
tvm_crt_error_t rpc_done(RpcReader* r);

void rpc_reply_start(RpcServer* s);
void rpc_w_u8(RpcServer* s, uint8_t v);
void rpc_w_u32(RpcServer* s, uint32_t v);
void rpc_w_u64(RpcServer* s, uint64_t v);
void rpc_w_bytes(RpcServer* s, const void* data, uint32_t n);
void rpc_w_str(RpcServer* s, const char* text, uint32_t n);
void rpc_w_cstr(RpcServer* s, const char* text);
void rpc_w_dtype(RpcServer* s, DLDataType dtype);
/* Send the reply (kind, the written payload, then tail[0, tail_len)). */
tvm_crt_error_t rpc_send(RpcServer* s, uint16_t kind, const uint8_t* tail, uint32_t tail_len);
/* An ERROR frame for code with TVMGetLastError() as its message. */
tvm_crt_error_t rpc_send_error(RpcServer* s, tvm_crt_error_t code);
/* Read one frame: 0, a protocol or transport error, or 1 at the end of the stream. */
tvm_crt_error_t rpc_read_frame(RpcServer* s, uint16_t* kind, uint32_t* len);

/* rpc_objects.c: the object table, arrays */
RpcObject* rpc_object_new(RpcServer* s, RpcObjKind kind, int holds_memory);
void rpc_object_adopt(RpcServer* s, RpcObject* child, RpcObject* parent);
/* Forget a slot taken by rpc_object_new whose creation failed (nothing allocated). */
void rpc_object_drop(RpcServer* s, RpcObject* obj);
RpcObject* rpc_object_find(RpcServer* s, uint64_t handle, uint32_t kind_mask, const char* what);
void rpc_object_free(RpcServer* s, uint64_t handle);
/* Release every zombie that nothing depends on, newest arena memory first. */
void rpc_collect(RpcServer* s);
void rpc_release_all(RpcServer* s);
uint32_t rpc_live_objects(const RpcServer* s);
tvm_crt_error_t rpc_array_new(RpcServer* s, DLDataType dtype, uint32_t ndim, const int64_t* shape,
                              RpcObject** out);
#define RPC_MASK(kind) (1u << (kind))
#define RPC_MODULES (RPC_MASK(kObjSysLib) | RPC_MASK(kObjGraph) | RPC_MASK(kObjAot))
#define RPC_ARRAYS (RPC_MASK(kObjArray) | RPC_MASK(kObjView))

/* rpc_functions.c: built-in functions and executor methods */
int rpc_builtin_find(const char* name);
int rpc_method_find(const RpcObject* exec, const char* name);
tvm_crt_error_t rpc_call_builtin(RpcServer* s, int index, RpcCall* c, RpcRet* ret);
tvm_crt_error_t rpc_call_method(RpcServer* s, RpcObject* exec, int index, RpcCall* c,
                                RpcRet* ret);
/* Fill ret from a packed function's return value. */
tvm_crt_error_t rpc_ret_from_packed(TVMValue v, int code, RpcRet* ret);

#endif /* EMBER_CRT_RPC_INTERNAL_H_ */
