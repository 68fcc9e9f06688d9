/*
 * error.c -- error helpers of the native runtime only. The last error of each thread (a code
 * and a message, TVMGetLastError) and its message builder are the C runtime's
 * (ember/crt/src/backend/error_message.c, compiled with a thread-local buffer).
 */
#include <stdlib.h>
#include <string.h>

#include "native.h"

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
