/*
 * rpc_wire.c -- frames and payload fields of the micro RPC server (docs/rpc.md).
 *
 * Integers are assembled byte by byte (little-endian, any alignment). Readers check every
 * length against the bytes left; a field that does not fit is a protocol error naming the
 * request, the field and the byte offset. Replies are written into the server's fixed reply
 * buffer, with an optional tail (array data, a long string) sent from where it lies.
 */
#include <string.h>

#include "rpc_internal.h"

static const uint8_t kMagic[4] = {0x45u, 0x4Du, 0x42u, 0x52u}; /* "EMBR" */

tvm_crt_error_t rpc_protocol_error(const char* what, const char* problem) {
  ember_crt_error(kTvmErrorRpcProtocol, what);
  ember_crt_error_append(": ");
  ember_crt_error_append(problem);
  return kTvmErrorRpcProtocol;
}

/* ---- readers ------------------------------------------------------------------------------ */
tvm_crt_error_t rpc_take(RpcReader* r, uint32_t n, const char* field, uint8_t** out) {
  if (n > r->len - r->pos) {
    ember_crt_error(kTvmErrorRpcProtocol, r->what);
    ember_crt_error_append(": payload truncated reading ");
    ember_crt_error_append(field);
    ember_crt_error_append(" at byte ");
    ember_crt_error_append_u64(r->pos);
    ember_crt_error_append(" (needs ");
    ember_crt_error_append_u64(n);
    ember_crt_error_append(" bytes, ");
    ember_crt_error_append_u64(r->len - r->pos);
    ember_crt_error_append(" left)");
    return kTvmErrorRpcProtocol;
  }
  *out = r->p + r->pos;
  r->pos += n;
  return 0;
}

tvm_crt_error_t rpc_u8(RpcReader* r, const char* field, uint8_t* out) {
  uint8_t* b;
  tvm_crt_error_t rc = rpc_take(r, 1, field, &b);
  if (rc == 0) *out = b[0];
  return rc;
}

tvm_crt_error_t rpc_u32(RpcReader* r, const char* field, uint32_t* out) {
  uint8_t* b;
  tvm_crt_error_t rc = rpc_take(r, 4, field, &b);
  if (rc == 0) *out = (uint32_t)ember_read_le(b, 4);
  return rc;
}

tvm_crt_error_t rpc_u64(RpcReader* r, const char* field, uint64_t* out) {
  uint8_t* b;
  tvm_crt_error_t rc = rpc_take(r, 8, field, &b);
  if (rc == 0) *out = ember_read_le(b, 8);
  return rc;
}

tvm_crt_error_t rpc_str(RpcReader* r, const char* field, char** out, uint32_t* len) {
  uint32_t n;
  uint8_t* b;
  tvm_crt_error_t rc = rpc_u32(r, field, &n);
  if (rc == 0) rc = rpc_take(r, n, field, &b);
  if (rc != 0) return rc;
  /* The length prefix is spent: move the bytes back over it and end them with a NUL. */
  b -= 4;
  memmove(b, b + 4, n);
  b[n] = 0;
  *out = (char*)b;
  *len = n;
  return 0;
}

tvm_crt_error_t rpc_shape(RpcReader* r, const char* field, int64_t* dims, uint32_t cap,
                          uint32_t* ndim) {
  uint32_t i;
  uint64_t d;
  tvm_crt_error_t rc = rpc_u32(r, field, ndim);
  if (rc != 0) return rc;
  if (*ndim > RPC_MAX_WIRE_NDIM) {
    ember_crt_error(kTvmErrorRpcProtocol, r->what);
    ember_crt_error_append(": ");
    ember_crt_error_append(field);
    ember_crt_error_append(" has ndim ");
    ember_crt_error_append_u64(*ndim);
    ember_crt_error_append(" (at most 64)");
    return kTvmErrorRpcProtocol;
  }
  for (i = 0; i < *ndim; ++i) {
    if ((rc = rpc_u64(r, field, &d)) != 0) return rc;
    if (d >> 63) return rpc_protocol_error(r->what, "a shape has a negative dimension");
    if (i < cap) dims[i] = (int64_t)d;
  }
  return 0;
}

tvm_crt_error_t rpc_done(RpcReader* r) {
  if (r->pos == r->len) return 0;
  ember_crt_error(kTvmErrorRpcProtocol, r->what);
  ember_crt_error_append(": ");
  ember_crt_error_append_u64(r->len - r->pos);
  ember_crt_error_append(" unexpected bytes after the payload");
  return kTvmErrorRpcProtocol;
}

/* ---- replies ------------------------------------------------------------------------------ */
void rpc_reply_start(RpcServer* s) {
  s->reply_len = 0;
  s->reply_overflow = 0;
}

void rpc_w_bytes(RpcServer* s, const void* data, uint32_t n) {
  if (s->reply_overflow || n > RPC_REPLY_BYTES - s->reply_len) {
    s->reply_overflow = 1;
    return;
  }
  memcpy(s->reply + RPC_HEADER_BYTES + s->reply_len, data, n);
  s->reply_len += n;
}

static void put_le(uint8_t* b, uint64_t v, int n) {
  int i;
  for (i = 0; i < n; ++i, v >>= 8) b[i] = (uint8_t)(v & 0xFFu);
}

void rpc_w_u8(RpcServer* s, uint8_t v) { rpc_w_bytes(s, &v, 1); }

void rpc_w_u32(RpcServer* s, uint32_t v) {
  uint8_t b[4];
  put_le(b, v, 4);
  rpc_w_bytes(s, b, 4);
}

void rpc_w_u64(RpcServer* s, uint64_t v) {
  uint8_t b[8];
  put_le(b, v, 8);
  rpc_w_bytes(s, b, 8);
}

void rpc_w_str(RpcServer* s, const char* text, uint32_t n) {
  rpc_w_u32(s, n);
  rpc_w_bytes(s, text, n);
}

void rpc_w_cstr(RpcServer* s, const char* text) {
  rpc_w_str(s, text, ember_crt_bounded_strlen(text, RPC_REPLY_BYTES));
}

/* The digits of v at out (at most 5: v < 65536); returns how many. */
static uint32_t decimal(char* out, uint32_t v) {
  char digits[5];
  uint32_t n = 0, i;
  do {
    digits[n++] = (char)('0' + v % 10u);
    v /= 10u;
  } while (v != 0u && n < sizeof(digits));
  for (i = 0; i < n; ++i) out[i] = digits[n - 1u - i];
  return n;
}

void rpc_w_dtype(RpcServer* s, DLDataType dtype) {
  static const char* const kNames[] = {"int", "uint", "float", "handle", "bfloat", "complex",
                                       "bool"};
  char text[32];
  uint32_t n = 0;
  const char* name = dtype.code <= 6u ? kNames[dtype.code] : "handle";
  while (*name != '\0') text[n++] = *name++;
  if (dtype.code != kDLBool) n += decimal(text + n, dtype.bits);
  if (dtype.lanes != 1u) {
    text[n++] = 'x';
    n += decimal(text + n, dtype.lanes);
  }
  rpc_w_str(s, text, n);
}

/* ---- frames ------------------------------------------------------------------------------- */
static tvm_crt_error_t write_all(RpcServer* s, const uint8_t* data, uint32_t n) {
  const EmberRpcIo* io = &s->cfg->io;
  while (n > 0u) {
    int32_t k = io->write(io->ctx, data, n);
    if (k <= 0 || (uint32_t)k > n) return kTvmErrorRpcTransport; /* the caller says more */
    data += k;
    n -= (uint32_t)k;
  }
  return 0;
}

tvm_crt_error_t rpc_send(RpcServer* s, uint16_t kind, const uint8_t* tail, uint32_t tail_len) {
  uint8_t* h = s->reply;
  tvm_crt_error_t rc;
  if (s->reply_overflow) {
    return ember_crt_error(kTvmErrorRpcUnsupported, "micro RPC server: the reply does not fit "
                           "its buffer");
  }
  if (tail_len > 0xFFFFFFFFu - s->reply_len) {
    return ember_crt_error(kTvmErrorRpcUnsupported, "micro RPC server: the reply is longer than "
                           "a frame can be");
  }
  memcpy(h, kMagic, 4);
  put_le(h + 4, kind, 2);
  put_le(h + 6, 0u, 2);
  put_le(h + 8, s->seq, 4);
  put_le(h + 12, s->reply_len + tail_len, 4);
  rc = write_all(s, h, RPC_HEADER_BYTES + s->reply_len);
  if (rc == 0 && tail_len > 0u) rc = write_all(s, tail, tail_len);
  return rc;
}

/* The Python class a client raises for an error code (ember's, or a builtin). */
static const char* error_type(tvm_crt_error_t code) {
  switch (code) {
    case kTvmErrorRpcProtocol:
      return "ember.runtime.rpc.protocol.ProtocolError";
    case kTvmErrorRpcRefused:
    case kTvmErrorRpcHandleInvalid:
    case kTvmErrorRpcUnsupported:
    case kTvmErrorRpcTableFull:
    case kTvmErrorRpcTransport:
      return "ember.runtime.errors.RPCError";
    case kTvmErrorFunctionNameNotFound:
      return "ember.runtime.registry.GlobalFuncNotFoundError";
    case kTvmErrorExecutorBadInput:
    case kTvmErrorGenericInvalidArgument:
    case kTvmErrorFunctionCallNumArgs:
      return "ember.runtime.errors.ArgumentError";
    case kTvmErrorExecutorIndexOutOfRange:
      return "ember.runtime.errors.ArgumentIndexError";
    case kTvmErrorExecutorBadArtifact:
      return "ember.runtime.errors.ArtifactError";
    case kTvmErrorWorkspaceExhausted:
    case kTvmErrorExecutorOutOfMemory:
      return "MemoryError";
    default:
      return "ember.runtime.errors.TVMError";
  }
}

tvm_crt_error_t rpc_send_error(RpcServer* s, tvm_crt_error_t code) {
  const char* message = TVMGetLastError();
  const char* type = s->err_type != NULL ? s->err_type : error_type(code);
  rpc_reply_start(s);
  rpc_w_cstr(s, type);
  rpc_w_cstr(s, message[0] != '\0' ? message : "micro RPC server: the request failed");
  rpc_w_str(s, "", 0); /* no traceback */
  s->err_type = NULL;
  return rpc_send(s, kRpcError, NULL, 0);
}

/* Read n bytes into dst: the first within first_timeout, the rest within the frame timeout.
 * *got says how many arrived; returns -1 when a read failed or timed out, else 0. */
static int read_exact(RpcServer* s, uint8_t* dst, uint32_t n, uint32_t first_timeout,
                      uint32_t* got) {
  const EmberRpcIo* io = &s->cfg->io;
  uint32_t timeout = first_timeout;
  *got = 0;
  while (*got < n) {
    int32_t k = io->read(io->ctx, dst + *got, n - *got, timeout);
    if (k < 0 || (uint32_t)k > n - *got) return -1;
    if (k == 0) return 0; /* the end of the stream */
    *got += (uint32_t)k;
    timeout = s->frame_timeout;
  }
  return 0;
}

tvm_crt_error_t rpc_read_frame(RpcServer* s, uint16_t* kind, uint32_t* len) {
  uint8_t h[RPC_HEADER_BYTES];
  uint32_t got;
  if (read_exact(s, h, 1, EMBER_CRT_RPC_WAIT_FOREVER, &got) != 0) {
    return ember_crt_error(kTvmErrorRpcTransport, "micro RPC server: reading from the host "
                           "failed");
  }
  if (got == 0u) return 1; /* the stream ended between frames: the host went away */
  s->seq = 0;
  if (read_exact(s, h + 1, RPC_HEADER_BYTES - 1u, s->frame_timeout, &got) != 0 ||
      got != RPC_HEADER_BYTES - 1u) {
    return rpc_protocol_error("frame", "truncated frame: the stream ended or timed out inside "
                              "its header");
  }
  if (memcmp(h, kMagic, 4) != 0) {
    return rpc_protocol_error("frame", "bad frame magic (expected \"EMBR\"): not an ember RPC "
                              "client, or the stream lost its framing");
  }
  *kind = (uint16_t)ember_read_le(h + 4, 2);
  s->seq = (uint32_t)ember_read_le(h + 8, 4);
  *len = (uint32_t)ember_read_le(h + 12, 4);
  if (*len > s->max_frame) {
    ember_crt_error(kTvmErrorRpcProtocol, "frame: a frame of ");
    ember_crt_error_append_u64(*len);
    ember_crt_error_append(" bytes exceeds the limit of ");
    ember_crt_error_append_u64(s->max_frame);
    ember_crt_error_append(" bytes");
    return kTvmErrorRpcProtocol;
  }
  if (read_exact(s, s->cfg->buffer, *len, s->frame_timeout, &got) != 0 || got != *len) {
    ember_crt_error(kTvmErrorRpcProtocol, "frame: truncated frame: the stream ended or timed out "
                    "after ");
    ember_crt_error_append_u64(got);
    ember_crt_error_append(" of ");
    ember_crt_error_append_u64(*len);
    ember_crt_error_append(" payload bytes");
    return kTvmErrorRpcProtocol;
  }
  return 0;
}
