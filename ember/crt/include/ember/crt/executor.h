/*
 * executor.h -- what the graph and AOT executors (ember/crt/executor) share, and what they
 * need from the runtime that hosts them.
 *
 * The same executor sources serve two hosts:
 * - the C runtime for firmware (libembercrt_executor.a): memory comes from the workspace
 *   arena of ember_crt_init (executor_memory.c), kernels from the registered function
 *   registries (TVMFuncGetGlobal);
 * - the native hosted runtime (ember/runtime/native): memory from malloc, kernels from a
 *   loaded library or the system library.
 * An executor allocates only while it is created and frees in reverse order when released,
 * so the arena's LIFO rule holds as long as executors are released in reverse order too.
 */
#ifndef EMBER_CRT_EXECUTOR_H_
#define EMBER_CRT_EXECUTOR_H_

#include <stddef.h>
#include <stdint.h>

#include "ember/c_backend_api.h"

#include "error_codes.h"
#include "params.h"

#ifdef __cplusplus
extern "C" {
#endif

/*! \brief Where an executor finds the functions it calls. */
typedef struct {
  void* ctx;
  /*! A PackedFunc by name: 0 and *out (released with TVMFuncFree), or nonzero, error set. */
  int (*get_function)(void* ctx, const char* name, TVMFunctionHandle* out);
  /*! A plain C symbol by name, or NULL (for interface-api=c); the member may be NULL. */
  void* (*get_symbol)(void* ctx, const char* name);
} EmberExecutorEnv;

/*! \brief nbytes of memory aligned to 64 bytes, or NULL with the error set. */
void* ember_executor_alloc(uint64_t nbytes);
/*! \brief Free memory of ember_executor_alloc (reverse order on the C runtime). */
void ember_executor_free(void* ptr);

/* ---- helpers of both executors (executor_common.c) ---------------------------------------- */

/*! \brief Parse "float32", "int8", "uint16", "bool", "float32x4"... \return 0 or -1. */
int ember_dtype_parse(const char* s, uint32_t n, DLDataType* out);
/*! \brief Bytes of a compact tensor of this dtype and shape (lanes and sub-byte counted). */
uint64_t ember_tensor_bytes(DLDataType dtype, int32_t ndim, const int64_t* shape);
/*! \brief Append "float32[1, 3, 224, 224]" to the last error. */
void ember_error_append_type(DLDataType dtype, int32_t ndim, const int64_t* shape);
/*! \brief Append at most n bytes of s, quoted. */
void ember_error_append_str(const char* s, uint32_t n);
/*!
 * \brief Copy src into dst after checking that src is a compact CPU tensor of dst's dtype and
 * shape; messages start with who and name the slot (e.g. "set_input", "input 'data'").
 */
tvm_crt_error_t ember_tensor_copy_checked(const char* who, const char* slot_kind,
                                          const char* slot, uint32_t slot_len, DLTensor* dst,
                                          const DLTensor* src);
/*! \brief Copy a params record into dst after checking its dtype and shape. */
tvm_crt_error_t ember_param_copy_checked(const char* who, const EmberParam* param, DLTensor* dst);

/* ---- readers of the byte formats (params.c; the native runtime's module blob too) --------- */

/*! \brief The unsigned little-endian integer of nbytes (<= 8) bytes at p, any alignment. */
uint64_t ember_read_le(const uint8_t* p, int nbytes);
/*! \brief CRC-32 of d[0, n) (IEEE 802.3, zlib's crc32). */
uint32_t ember_crc32(const uint8_t* d, size_t n);

#ifdef __cplusplus
}  /* extern "C" */
#endif
#endif /* EMBER_CRT_EXECUTOR_H_ */
