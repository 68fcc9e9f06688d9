/*
 * error_message.c -- the last error (TVMGetLastError) and the message builder of internal.h.
 *
 * Shared by both hosts of the executors: the C runtime for firmware (one static message) and
 * the native hosted runtime (ember/runtime/native), which compiles this file with
 * -DEMBER_CRT_ERROR_THREAD_LOCAL=__thread for one message per thread. No libc: messages are
 * assembled by hand, truncated at EMBER_CRT_ERROR_BUFFER_SIZE.
 */
#include "internal.h"

static EMBER_CRT_ERROR_THREAD_LOCAL char g_error[EMBER_CRT_ERROR_BUFFER_SIZE];
static EMBER_CRT_ERROR_THREAD_LOCAL uint32_t g_error_len;
static EMBER_CRT_ERROR_THREAD_LOCAL tvm_crt_error_t g_error_code = kTvmErrorNoError;
static EMBER_CRT_ERROR_THREAD_LOCAL uint32_t g_error_serial;

void ember_crt_error_append(const char* text) {
  if (text == NULL) return;
  while (*text != '\0' && g_error_len + 1 < EMBER_CRT_ERROR_BUFFER_SIZE) {
    g_error[g_error_len++] = *text++;
  }
  g_error[g_error_len] = '\0';
}

tvm_crt_error_t ember_crt_error(tvm_crt_error_t code, const char* text) {
  g_error_len = 0;
  g_error[0] = '\0';
  g_error_code = code;
  ++g_error_serial;
  ember_crt_error_append(text);
  return code;
}

void ember_crt_error_append_name(const char* text, uint32_t max_len) {
  char one[2] = {0, 0};
  uint32_t i;
  if (text == NULL) {
    ember_crt_error_append("(null)");
    return;
  }
  ember_crt_error_append("'");
  for (i = 0; i < max_len && text[i] != '\0'; ++i) {
    one[0] = text[i];
    ember_crt_error_append(one);
  }
  ember_crt_error_append(i == max_len && text[i] != '\0' ? "...'" : "'");
}

void ember_crt_error_append_u64(uint64_t value) {
  char digits[21];
  int n = (int)sizeof(digits) - 1;
  digits[n] = '\0';
  do {
    digits[--n] = (char)('0' + (int)(value % 10u));
    value /= 10u;
  } while (value != 0u);
  ember_crt_error_append(digits + n);
}

void ember_crt_error_append_i64(int64_t value) {
  if (value < 0) {
    ember_crt_error_append("-");
    /* negate in unsigned arithmetic: -INT64_MIN overflows int64_t */
    ember_crt_error_append_u64(0u - (uint64_t)value);
  } else {
    ember_crt_error_append_u64((uint64_t)value);
  }
}

uint32_t ember_crt_error_serial(void) { return g_error_serial; }

uint32_t ember_crt_bounded_strlen(const char* s, uint32_t max_len) {
  uint32_t n = 0;
  while (n <= max_len && s[n] != '\0') ++n;
  return n;
}

/* A message from called code: kept verbatim (truncated); NULL or "" clears the error. */
static void set_reported(const char* msg) {
  if (msg == NULL || msg[0] == '\0') {
    ember_crt_error(kTvmErrorNoError, "");
  } else {
    ember_crt_error(kTvmErrorFunctionReportedError, msg);
  }
}

void TVMPackedFuncSetLastError(const char* msg) { set_reported(msg); }

void TVMAPISetLastError(const char* msg) { set_reported(msg); }

const char* TVMGetLastError(void) { return g_error; }

tvm_crt_error_t ember_crt_last_error_code(void) { return g_error_code; }
