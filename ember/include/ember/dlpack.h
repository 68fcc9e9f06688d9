/*
 * dlpack.h -- the DLPack v0.8 tensor layouts used by every ember ABI.
 *
 * Written for ember from the DLPack specification (https://dmlc.github.io/dlpack/).
 * The layouts are the standard ones, so a DLTensor* produced by any DLPack framework
 * can be handed to ember-compiled code and vice versa.
 */
#ifndef EMBER_DLPACK_H_
#define EMBER_DLPACK_H_

#include <stddef.h>
#include <stdint.h>

#define DLPACK_VERSION 80
#define DLPACK_ABI_VERSION 1

#ifdef __cplusplus
extern "C" {
#endif

/*! \brief Where a tensor lives. Only kDLCPU has a backend in ember. */
typedef enum {
  kDLCPU = 1,
  kDLCUDA = 2,
  kDLCUDAHost = 3,
  kDLOpenCL = 4,
  kDLVulkan = 7,
  kDLMetal = 8,
  kDLVPI = 9,
  kDLROCM = 10,
  kDLROCMHost = 11,
  kDLExtDev = 12,
  kDLCUDAManaged = 13,
  kDLOneAPI = 14,
  kDLWebGPU = 15,
  kDLHexagon = 16,
} DLDeviceType;

/*! \brief A device: its type and its ordinal among devices of that type. */
typedef struct {
  DLDeviceType device_type;
  int32_t device_id;
} DLDevice;

/*! \brief The kind of number stored in a tensor. */
typedef enum {
  kDLInt = 0U,
  kDLUInt = 1U,
  kDLFloat = 2U,
  kDLOpaqueHandle = 3U,
  kDLBfloat = 4U,
  kDLComplex = 5U,
  kDLBool = 6U,
} DLDataTypeCode;

/*!
 * \brief Element type: code, bit width and vector lanes, e.g. float32 = {kDLFloat, 32, 1}.
 * Fits in 32 bits so it can travel inside a TVMValue.
 */
typedef struct {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
} DLDataType;

/*!
 * \brief A non-owning view of an n-dimensional array.
 *
 * The element at index (i0, ..., in) is at (char*)data + byte_offset +
 * sizeof(element) * sum(ik * stride_k); strides == NULL means compact row-major.
 * ember allocates data 64-byte aligned.
 */
typedef struct {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;
  uint64_t byte_offset;
} DLTensor;

/*!
 * \brief A DLTensor together with its owner: the consumer calls deleter(self) when done.
 */
typedef struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(struct DLManagedTensor* self);
} DLManagedTensor;

#ifdef __cplusplus
}  /* extern "C" */
#endif
#endif  /* EMBER_DLPACK_H_ */
