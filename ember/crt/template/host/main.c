/*
 * main.c -- the host as a micro device: one micro RPC session on stdin/stdout.
 *
 * The program sets up the C runtime (one static workspace arena, the model's function
 * registries), then serves ember's RPC protocol on its standard streams until the host
 * closes the session, and exits: 0 for a session the host ended, 1 when the session failed
 * (the reason goes to stderr). Nothing else may write to stdout: it carries the frames.
 *
 * EMBER_MICRO_WORKSPACE_BYTES (the arena) and EMBER_MICRO_MAX_FRAME_BYTES (the largest
 * request) come from the project's options (the Makefile).
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

#include "ember/crt/crt.h"
#include "ember/crt/rpc_server.h"

#ifndef EMBER_MICRO_WORKSPACE_BYTES
#define EMBER_MICRO_WORKSPACE_BYTES (16u << 20)
#endif
#ifndef EMBER_MICRO_MAX_FRAME_BYTES
#define EMBER_MICRO_MAX_FRAME_BYTES (4u << 20)
#endif

/* The model's registries, NULL-terminated (src/model_registries.c, written by the project). */
extern const EmberFuncRegistry* const ember_micro_registries[];

static uint8_t g_arena[EMBER_MICRO_WORKSPACE_BYTES] __attribute__((aligned(64)));
static uint8_t g_frame[EMBER_MICRO_MAX_FRAME_BYTES] __attribute__((aligned(64)));

static int32_t host_read(void* ctx, uint8_t* buf, uint32_t n, uint32_t timeout_ms) {
  struct pollfd pfd;
  int rc;
  ssize_t got;
  (void)ctx;
  pfd.fd = STDIN_FILENO;
  pfd.events = POLLIN;
  do {
    rc = poll(&pfd, 1, timeout_ms == EMBER_CRT_RPC_WAIT_FOREVER ? -1 : (int)timeout_ms);
  } while (rc < 0 && errno == EINTR);
  if (rc <= 0) return -1; /* an error, or the time ran out */
  do {
    got = read(STDIN_FILENO, buf, n > 0x10000000u ? 0x10000000u : n);
  } while (got < 0 && errno == EINTR);
  return got < 0 ? -1 : (int32_t)got;
}

static int32_t host_write(void* ctx, const uint8_t* buf, uint32_t n) {
  ssize_t put;
  (void)ctx;
  do {
    put = write(STDOUT_FILENO, buf, n > 0x10000000u ? 0x10000000u : n);
  } while (put < 0 && errno == EINTR);
  return put <= 0 ? -1 : (int32_t)put;
}

static int fail(const char* what, tvm_crt_error_t code) {
  fprintf(stderr, "micro_host: %s: %s (%s)\n", what, TVMGetLastError(), ember_crt_error_name(code));
  return 1;
}

int main(void) {
  EmberRpcServerConfig config;
  tvm_crt_error_t rc;
  int i;
  signal(SIGPIPE, SIG_IGN); /* a host that went away is a failed write, not a signal */
  if ((rc = ember_crt_init(g_arena, sizeof(g_arena))) != 0) return fail("ember_crt_init", rc);
  for (i = 0; ember_micro_registries[i] != NULL; ++i) {
    if ((rc = ember_crt_register_func_registry(ember_micro_registries[i])) != 0) {
      return fail("registering the model's functions", rc);
    }
  }
  config.io.ctx = NULL;
  config.io.read = host_read;
  config.io.write = host_write;
  config.buffer = g_frame;
  config.buffer_size = sizeof(g_frame);
  config.key = "";
  config.frame_timeout_ms = 10000u;
  rc = ember_rpc_server_run(&config);
  if (rc != 0) return fail("the session ended", rc);
  return 0;
}
