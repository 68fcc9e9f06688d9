/*
 * ember kernels: the range check of run-time indices (relay op check_indices,
 * ember/relay/op/index_check.py) that ONNX's Gather, GatherElements, GatherND, ScatterElements
 * and ScatterND ask for: an index outside [-n, n) is an error, not a value to wrap or clamp.
 *
 * ember_check_indices_i64/_i32(src, dst, count, period, position, axis, bound, what) looks at the
 * elements position, position + period, ... of src (count elements in all), copies them to dst,
 * and returns 0 when each is in [-bound, bound); otherwise it sets the error (naming `what`,
 * the element's flat position, its value, the axis of data and the range) and returns -1. The message is built
 * by hand: firmware builds have no stdio.
 */
#ifndef EMBER_KERNELS_INDEX_CHECK_H_
#define EMBER_KERNELS_INDEX_CHECK_H_

#include <stdint.h>

#include "ember/c_backend_api.h"

/* Appends `text` to msg (of capacity cap, holding *n characters), truncating. */
static inline void ember_index_check_put(char* msg, int* n, int cap, const char* text) {
  while (*text && *n < cap - 1) msg[(*n)++] = *text++;
}

static inline void ember_index_check_put_int(char* msg, int* n, int cap, int64_t v) {
  char digits[24];
  int k = 0;
  uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
  do {
    digits[k++] = (char)('0' + (int)(u % 10));
    u /= 10;
  } while (u);
  if (v < 0) digits[k++] = '-';
  while (k && *n < cap - 1) msg[(*n)++] = digits[--k];
}

static inline int32_t ember_index_check_fail(const char* what, int64_t at, int64_t value,
                                             int64_t axis, int64_t bound) {
  char msg[512];
  int n = 0;
  ember_index_check_put(msg, &n, sizeof msg, what);
  ember_index_check_put(msg, &n, sizeof msg, ": index ");
  ember_index_check_put_int(msg, &n, sizeof msg, value);
  ember_index_check_put(msg, &n, sizeof msg, " (element ");
  ember_index_check_put_int(msg, &n, sizeof msg, at);
  ember_index_check_put(msg, &n, sizeof msg, " of the indices, flat) is out of range for axis ");
  ember_index_check_put_int(msg, &n, sizeof msg, axis);
  ember_index_check_put(msg, &n, sizeof msg, " of data (size ");
  ember_index_check_put_int(msg, &n, sizeof msg, bound);
  ember_index_check_put(msg, &n, sizeof msg, "): indices must be in [");
  ember_index_check_put_int(msg, &n, sizeof msg, -bound);
  ember_index_check_put(msg, &n, sizeof msg, ", ");
  ember_index_check_put_int(msg, &n, sizeof msg, bound - 1);
  ember_index_check_put(msg, &n, sizeof msg, "]");
  msg[n] = '\0';
  TVMAPISetLastError(msg);
  return -1;
}

#define EMBER_INDEX_CHECK_BODY                                                         \
  int64_t i;                                                                           \
  int64_t bad = -1;                                                                    \
  for (i = position; i < count; i += period) {                                         \
    dst[i] = src[i];                                                                   \
    bad = (bad < 0 && (src[i] < -bound || src[i] >= bound)) ? i : bad;                 \
  }                                                                                    \
  return bad < 0 ? 0 : ember_index_check_fail(what, bad, (int64_t)src[bad], axis, bound);

static inline int32_t ember_check_indices_i64(const int64_t* src, int64_t* dst, int64_t count,
                                              int64_t period, int64_t position, int64_t axis,
                                              int64_t bound, const char* what) {
  EMBER_INDEX_CHECK_BODY
}

static inline int32_t ember_check_indices_i32(const int32_t* src, int32_t* dst, int64_t count,
                                              int64_t period, int64_t position, int64_t axis,
                                              int64_t bound, const char* what) {
  EMBER_INDEX_CHECK_BODY
}

#undef EMBER_INDEX_CHECK_BODY

#endif /* EMBER_KERNELS_INDEX_CHECK_H_ */
