/*
 * executor_common.c -- dtypes, sizes, checked copies and messages shared by both executors.
 */
#include <string.h>

#include "ember/crt/executor.h"

#include "../src/backend/internal.h"

static int digits(const char* s, uint32_t n, uint32_t* i, uint32_t* out) {
  uint32_t v = 0, start = *i;
  while (*i < n && s[*i] >= '0' && s[*i] <= '9' && v < 100000u) {
    v = v * 10u + (uint32_t)(s[*i] - '0');
    ++*i;
  }
  *out = v;
  return *i > start ? 0 : -1;
}

static int prefix(const char* s, uint32_t n, const char* p, uint32_t* len) {
  uint32_t k = 0;
  while (p[k] != '\0' && k < n && s[k] == p[k]) ++k;
  *len = k;
  return p[k] == '\0';
}

int ember_dtype_parse(const char* s, uint32_t n, DLDataType* out) {
  static const char* const kNames[] = {"bfloat", "float", "uint", "int", "bool"};
  static const uint8_t kCodes[] = {kDLBfloat, kDLFloat, kDLUInt, kDLInt, kDLBool};
  uint32_t i = 0, bits = 8, lanes = 1, k;
  for (k = 0; k < 5; ++k) {
    if (prefix(s, n, kNames[k], &i)) break;
  }
  if (k == 5) return -1;
  if (k < 4 && digits(s, n, &i, &bits) != 0) return -1;
  if (i < n && s[i] == 'x') {
    ++i;
    if (digits(s, n, &i, &lanes) != 0 || lanes == 0u || lanes > 65535u) return -1;
  }
  if (i != n) return -1;
  if (k == 4 ? bits != 8u : (bits != 8u && bits != 16u && bits != 32u && bits != 64u)) return -1;
  if ((k == 0 && bits != 16u) || (k == 1 && bits == 8u)) return -1;
  out->code = kCodes[k];
  out->bits = (uint8_t)bits;
  out->lanes = (uint16_t)lanes;
  return 0;
}

uint64_t ember_tensor_bytes(DLDataType dtype, int32_t ndim, const int64_t* shape) {
  uint64_t count = 1;
  int32_t i;
  for (i = 0; i < ndim; ++i) count *= (uint64_t)shape[i];
  return count * (((uint64_t)dtype.bits * dtype.lanes + 7u) / 8u);
}

void ember_error_append_str(const char* s, uint32_t n) {
  char one[2] = {0, 0};
  uint32_t i;
  ember_crt_error_append("'");
  for (i = 0; i < n && i < 96u; ++i) {
    one[0] = s[i];
    ember_crt_error_append(one);
  }
  ember_crt_error_append(i < n ? "...'" : "'");
}

void ember_error_append_type(DLDataType dtype, int32_t ndim, const int64_t* shape) {
  static const char* const kNames[] = {"int", "uint", "float", "handle", "bfloat", "complex",
                                       "bool"};
  int32_t i;
  ember_crt_error_append(dtype.code <= 6u ? kNames[dtype.code] : "dtype?");
  if (dtype.code != kDLBool) ember_crt_error_append_u64(dtype.bits);
  if (dtype.lanes != 1u) {
    ember_crt_error_append("x");
    ember_crt_error_append_u64(dtype.lanes);
  }
  ember_crt_error_append("[");
  for (i = 0; i < ndim && shape != NULL; ++i) {
    if (i > 0) ember_crt_error_append(", ");
    if (i == 8 && ndim > 9) {
      ember_crt_error_append("...");
      break;
    }
    ember_crt_error_append_i64(shape[i]);
  }
  ember_crt_error_append("]");
}

static int same_dtype(DLDataType a, DLDataType b) {
  if (a.code == b.code && a.bits == b.bits && a.lanes == b.lanes) return 1;
  /* bool travels as kDLBool/8 (ember) or kDLUInt/1 (DLPack producers) */
  return a.code == kDLBool && a.lanes == 1u && b.lanes == 1u && b.code == kDLUInt && b.bits == 1u;
}

static int is_compact(const DLTensor* t) {
  int64_t step = 1;
  int32_t i;
  if (t->strides == NULL) return 1;
  for (i = t->ndim - 1; i >= 0; --i) {
    if (t->shape[i] != 1 && t->strides[i] != step) return 0;
    step *= t->shape[i];
  }
  return 1;
}

static void start(const char* who, const char* slot_kind, const char* slot, uint32_t slot_len) {
  ember_crt_error(kTvmErrorExecutorBadInput, who);
  ember_crt_error_append(": ");
  ember_crt_error_append(slot_kind);
  ember_crt_error_append(" ");
  ember_error_append_str(slot, slot_len);
}

tvm_crt_error_t ember_tensor_copy_checked(const char* who, const char* slot_kind,
                                          const char* slot, uint32_t slot_len, DLTensor* dst,
                                          const DLTensor* src) {
  int32_t i;
  int same = src != NULL && src->ndim == dst->ndim && same_dtype(dst->dtype, src->dtype);
  if (src == NULL || src->data == NULL || (src->ndim > 0 && src->shape == NULL)) {
    start(who, slot_kind, slot, slot_len);
    ember_crt_error_append(": the tensor (or its data or shape) is NULL");
    return kTvmErrorExecutorBadInput;
  }
  if (src->device.device_type != kDLCPU) {
    start(who, slot_kind, slot, slot_len);
    ember_crt_error_append(": the tensor is not on the CPU (device type ");
    ember_crt_error_append_i64(src->device.device_type);
    ember_crt_error_append(")");
    return kTvmErrorExecutorBadInput;
  }
  for (i = 0; same && i < dst->ndim; ++i) same = src->shape[i] == dst->shape[i];
  if (!same) {
    start(who, slot_kind, slot, slot_len);
    ember_crt_error_append(": expected ");
    ember_error_append_type(dst->dtype, dst->ndim, dst->shape);
    ember_crt_error_append(", got ");
    ember_error_append_type(src->dtype, src->ndim < 0 ? 0 : src->ndim, src->shape);
    return kTvmErrorExecutorBadInput;
  }
  if (!is_compact(src)) {
    start(who, slot_kind, slot, slot_len);
    ember_crt_error_append(": the tensor is not compact (row-major without gaps)");
    return kTvmErrorExecutorBadInput;
  }
  memcpy((uint8_t*)dst->data + dst->byte_offset, (const uint8_t*)src->data + src->byte_offset,
         (size_t)ember_tensor_bytes(dst->dtype, dst->ndim, dst->shape));
  return 0;
}

tvm_crt_error_t ember_param_copy_checked(const char* who, const EmberParam* param, DLTensor* dst) {
  DLTensor src;
  src.data = (void*)(uintptr_t)param->data; /* read only: copied from, never written */
  src.device.device_type = kDLCPU;
  src.device.device_id = 0;
  src.ndim = (int32_t)param->ndim;
  src.dtype = param->dtype;
  src.shape = (int64_t*)(uintptr_t)param->shape;
  src.strides = NULL;
  src.byte_offset = 0;
  return ember_tensor_copy_checked(who, "param", param->name, param->name_len, dst, &src);
}
