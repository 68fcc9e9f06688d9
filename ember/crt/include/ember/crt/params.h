/*
 * params.h -- read ember's params byte format (ember/runtime/params.py: save_param_dict).
 *
 *   magic b"\x89EMBPRM\n", u32 version (1), u32 flags, u64 count,
 *   count x (u32 name length, name), count x record:
 *   u8 code, u8 bits, u16 lanes, u32 ndim, ndim x i64 shape, u64 nbytes, nbytes of data,
 *   then, when flags bit 0 is set (ember writes it), u32 CRC-32 of all the bytes before it
 *
 * all little-endian. ember_params_open checks the whole blob (the checksum, every length
 * against the end, nbytes against shape and dtype, no trailing bytes) before anything is read
 * from it.
 */
#ifndef EMBER_CRT_PARAMS_H_
#define EMBER_CRT_PARAMS_H_

#include <stddef.h>
#include <stdint.h>

#include "ember/dlpack.h"

#include "error_codes.h"

#ifdef __cplusplus
extern "C" {
#endif

/*! \brief Most dimensions of one tensor (also the bound the executors accept). */
#define EMBER_CRT_MAX_NDIM 16

/*! \brief A checked params blob (not owned). */
typedef struct {
  const uint8_t* data;
  size_t size;
  uint64_t count;
  size_t names; /* offset of the first name */
  size_t records; /* offset of the first record */
} EmberParams;

/*! \brief One tensor of the blob; name and data point into it (name not NUL-terminated). */
typedef struct {
  const char* name;
  uint32_t name_len;
  DLDataType dtype;
  uint32_t ndim;
  int64_t shape[EMBER_CRT_MAX_NDIM];
  const uint8_t* data;
  uint64_t nbytes;
} EmberParam;

/*! \brief Check data[0, size). \return 0, or kTvmErrorExecutorBadArtifact with a message. */
tvm_crt_error_t ember_params_open(const void* data, size_t size, EmberParams* out);

/*!
 * \brief Iterate over an opened blob: set *index = 0 to start; each call fills *out and
 * returns 1 while tensors are left (name_pos and record_pos are the reader's state).
 */
int ember_params_next(const EmberParams* params, uint64_t* index, size_t* name_pos,
                      size_t* record_pos, EmberParam* out);

#ifdef __cplusplus
}  /* extern "C" */
#endif
#endif /* EMBER_CRT_PARAMS_H_ */
