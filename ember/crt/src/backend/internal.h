/*
 * internal.h -- helpers shared by the runtime core's sources; not part of the API.
 *
 * Messages are built without printf: ember_crt_error starts one (and records its code), the
 * append functions add text and numbers, truncating at EMBER_CRT_ERROR_BUFFER_SIZE.
 */
#ifndef EMBER_CRT_SRC_BACKEND_INTERNAL_H_
#define EMBER_CRT_SRC_BACKEND_INTERNAL_H_

#include <stdint.h>

#include "ember/crt/crt.h"

/* Start the last error with code and text; returns code (for `return ember_crt_error(...)`). */
tvm_crt_error_t ember_crt_error(tvm_crt_error_t code, const char* text);
void ember_crt_error_append(const char* text);
/* Append at most max_len characters of text, quoted: names from callers may be garbage. */
void ember_crt_error_append_name(const char* text, uint32_t max_len);
void ember_crt_error_append_u64(uint64_t value);
void ember_crt_error_append_i64(int64_t value);
/* Counts messages set, so a caller can tell whether a callee set one. */
uint32_t ember_crt_error_serial(void);

/* Length of s if it ends within max_len characters, else max_len + 1. */
uint32_t ember_crt_bounded_strlen(const char* s, uint32_t max_len);

#endif /* EMBER_CRT_SRC_BACKEND_INTERNAL_H_ */
