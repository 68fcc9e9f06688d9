/*
 * error.c -- the last error of each thread: a code and a message (TVMGetLastError), built
 * with the C runtime's message functions (internal.h), which the executors use too.
 */
#include <stdlib.h>
#include <string.h>

#include "native.h"

#define ERROR_SIZE 4096

static __thread char g_error[ERROR_SIZE];
static __thread uint32_t g_error_len;
static __thread tvm_crt_error_t g_error_code;
static __thread uint32_t g_error_serial;

void ember_crt_error_append(const char* text) {
  if (text == NULL) return;
  while (*text != '\0' && g_error_len + 1 < ERROR_SIZE) g_error[g_error_len++] = *text++;
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

tvm_crt_error_t ember_crt_last_error_code(void) { return g_error_code; }

const char* TVMGetLastError(void) { return g_error; }

/* A message from called code; NULL or "" clears the error. */
void TVMPackedFuncSetLastError(const char* msg) {
  ember_crt_error(msg != NULL && msg[0] != '\0' ? kTvmErrorFunctionReportedError : 0, msg);
}

void TVMAPISetLastError(const char* msg) { TVMPackedFuncSetLastError(msg); }

char* ember_strdup(const char* s, size_t n) {
  char* out = (char*)malloc(n + 1);
  if (out == NULL) {
    ember_crt_error(kTvmErrorExecutorOutOfMemory, "out of memory");
    return NULL;
  }
  memcpy(out, s, n);
  out[n] = '\0';
  return out;
}
