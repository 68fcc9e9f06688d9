/*
 * rpc_server.h -- the micro RPC server: ember's RPC protocol (docs/rpc.md, version 1) served
 * by the C runtime over any byte stream, so that a host drives a device (a board over a
 * serial line, or a host process over pipes) with ember.micro.Session.
 *
 * The server runs one session: the handshake (no authentication: a client that holds a secret
 * is refused), then requests until CLOSE or the end of the stream. It serves
 *   - CALL and GET_FUNC of its built-in functions (runtime.SystemLib, tvm.graph_executor.create,
 *     tvm.aot_executor.create, testing.echo, testing.nop, ember.rpc.array_copy,
 *     ember.micro.workspace_stats), of the registered function registries (the system library)
 *     and of the executor modules it created (set_input, run, get_output, ...);
 *   - ARRAY_NEW / ARRAY_WRITE / ARRAY_READ of arrays in the workspace arena (ember_crt_init);
 *   - FREE and CLOSE. UPLOAD and LOAD_MODULE are answered with an error (no file system).
 * It never calls malloc: frames go through the application's buffer, objects live in a
 * table of EMBER_CRT_RPC_MAX_OBJECTS entries, arrays and executors in the workspace arena.
 * Every length is checked; a frame that breaks the protocol is answered with an ERROR frame
 * and ends the session.
 *
 * The arena is a stack: objects are released in the reverse order of their creation. An
 * object the client frees while newer ones live is released once they are; an executor lives
 * as long as the arrays (outputs, inputs) and functions taken from it.
 */
#ifndef EMBER_CRT_RPC_SERVER_H_
#define EMBER_CRT_RPC_SERVER_H_

#include <stddef.h>
#include <stdint.h>

#include "error_codes.h"

#ifdef __cplusplus
extern "C" {
#endif

/*! \brief Most objects (arrays, modules, functions) a session holds at once. */
#ifndef EMBER_CRT_RPC_MAX_OBJECTS
#define EMBER_CRT_RPC_MAX_OBJECTS 32
#endif

/*! \brief Most arguments of one CALL. */
#ifndef EMBER_CRT_RPC_MAX_ARGS
#define EMBER_CRT_RPC_MAX_ARGS 32
#endif

/*! \brief The smallest frame buffer: the protocol's minimum frame limit (64 KiB). */
#define EMBER_CRT_RPC_MIN_FRAME_BYTES (64u * 1024u)

/*! \brief timeout_ms of a read that waits for the next frame as long as it takes. */
#define EMBER_CRT_RPC_WAIT_FOREVER 0xFFFFFFFFu

/*! \brief The byte stream to the host (the platform's part: UART, USB, pipes, ...). */
typedef struct {
  void* ctx;
  /*!
   * Read between 1 and n bytes into buf, waiting at most timeout_ms milliseconds
   * (EMBER_CRT_RPC_WAIT_FOREVER between frames; a platform without a clock may ignore it).
   * \return the bytes read (> 0), 0 at the end of the stream, < 0 on an error or a timeout.
   */
  int32_t (*read)(void* ctx, uint8_t* buf, uint32_t n, uint32_t timeout_ms);
  /*! Write between 1 and n bytes of buf. \return the bytes written (> 0), or < 0 on error. */
  int32_t (*write)(void* ctx, const uint8_t* buf, uint32_t n);
} EmberRpcIo;

/*! \brief What ember_rpc_server_run needs. */
typedef struct {
  EmberRpcIo io;
  /*! Holds one request payload: its size is the frame limit announced to the client (at
   * least EMBER_CRT_RPC_MIN_FRAME_BYTES, at most 0xFFFFFFFF). */
  uint8_t* buffer;
  size_t buffer_size;
  /*! The key a client must present in its HELLO (NULL: ""). */
  const char* key;
  /*! Milliseconds for the rest of a frame once its first byte arrived (0: 10 000). */
  uint32_t frame_timeout_ms;
} EmberRpcServerConfig;

/*!
 * \brief Serve one session on config->io (the workspace arena and the function registries
 * must be set up already). Every object of the session is released before it returns.
 * \return 0 when the client closed the session (CLOSE, or the stream ended between frames);
 *   kTvmErrorRpcProtocol (the client broke the protocol), kTvmErrorRpcRefused (the handshake
 *   failed), kTvmErrorRpcTransport (a read or write failed, or timed out inside a frame),
 *   kTvmErrorGenericInvalidArgument (a bad config); TVMGetLastError() says more.
 */
tvm_crt_error_t ember_rpc_server_run(const EmberRpcServerConfig* config);

#ifdef __cplusplus
}  /* extern "C" */
#endif
#endif /* EMBER_CRT_RPC_SERVER_H_ */
