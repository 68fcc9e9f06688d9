/*
 * c_packed_func.h -- the C PackedFunc calling convention.
 *
 * This header alone is enough to write (or generate) a function that ember can call:
 *
 *   TVM_DLL int my_func(TVMValue* args, int* type_codes, int num_args,
 *                       TVMValue* out_ret_value, int* out_ret_tcode, void* resource_handle);
 *
 * - args[i] holds argument i; type_codes[i] says which member of the union is valid.
 * - Return 0 on success. On failure call TVMPackedFuncSetLastError("<func>: <what went wrong>")
 *   and return a nonzero value; ember raises ember.TVMError with that message.
 * - To return a value, write *out_ret_value and *out_ret_tcode. The caller presets
 *   *out_ret_tcode to kTVMNullptr, so a function that returns nothing may leave both alone.
 *   A returned kTVMStr / kTVMBytes must point to memory that stays valid after the return
 *   (static or thread-local storage); the caller copies it at once.
 *
 * Arguments are borrowed for the duration of the call. ember passes an NDArray as
 * kTVMDLTensorHandle whose v_handle is a DLTensor*; code should accept kTVMNDArrayHandle
 * too (its v_handle is also a DLTensor*). Handles with codes kTVMObjectHandle,
 * kTVMModuleHandle and kTVMPackedFuncHandle are opaque; a PackedFunc handle can be called
 * with TVMFuncCall (c_backend_api.h).
 */
#ifndef EMBER_C_PACKED_FUNC_H_
#define EMBER_C_PACKED_FUNC_H_

#include "dlpack.h"

#ifndef TVM_DLL
#if defined(_WIN32)
#define TVM_DLL __declspec(dllexport)
#else
#define TVM_DLL __attribute__((visibility("default")))
#endif
#endif
#ifndef EMBER_DLL
#define EMBER_DLL TVM_DLL
#endif

#ifdef __cplusplus
extern "C" {
#endif

/*! \brief Type codes of PackedFunc arguments and return values (ember.runtime._abi.ArgTypeCode). */
typedef enum {
  kTVMArgInt = kDLInt,               /* 0: v_int64 */
  kTVMArgUInt = kDLUInt,             /* 1: v_int64, read as unsigned */
  kTVMArgFloat = kDLFloat,           /* 2: v_float64 */
  kTVMOpaqueHandle = 3U,             /* 3: v_handle, an opaque pointer */
  kTVMNullptr = 4U,                  /* 4: None */
  kTVMDataType = 5U,                 /* 5: v_type */
  kDLDevice = 6U,                    /* 6: v_device */
  kTVMDLTensorHandle = 7U,           /* 7: v_handle is a DLTensor* */
  kTVMObjectHandle = 8U,             /* 8: v_handle, an object of the host */
  kTVMModuleHandle = 9U,             /* 9: v_handle, a module of the host */
  kTVMPackedFuncHandle = 10U,        /* 10: v_handle, call with TVMFuncCall */
  kTVMStr = 11U,                     /* 11: v_str, NUL-terminated UTF-8 */
  kTVMBytes = 12U,                   /* 12: v_handle is a TVMByteArray* */
  kTVMNDArrayHandle = 13U,           /* 13: v_handle is a DLTensor* */
  kTVMObjectRValueRefArg = 14U,      /* 14: v_handle, an object moved into the callee */
  kTVMExtBegin = 15U,
} TVMArgTypeCode;

/*! \brief One argument or return value; type_codes say which member is valid. */
typedef union {
  int64_t v_int64;
  double v_float64;
  void* v_handle;
  const char* v_str;
  DLDataType v_type;
  DLDevice v_device;
} TVMValue;

/*! \brief A byte string that may contain NULs (kTVMBytes). */
typedef struct {
  const char* data;
  size_t size;
} TVMByteArray;

typedef void* TVMFunctionHandle;
typedef void* TVMModuleHandle;
typedef void* TVMObjectHandle;
typedef DLTensor* TVMArrayHandle;

/*!
 * \brief The C PackedFunc signature: every function ember compiles has it.
 * \return 0 on success, nonzero on failure after TVMPackedFuncSetLastError.
 */
typedef int (*TVMBackendPackedCFunc)(TVMValue* args, int* type_codes, int num_args,
                                     TVMValue* out_ret_value, int* out_ret_tcode,
                                     void* resource_handle);

/*! \brief Record the error message of the failing call on this thread (copied). */
TVM_DLL void TVMPackedFuncSetLastError(const char* msg);

#ifdef __cplusplus
}  /* extern "C" */
#endif
#endif  /* EMBER_C_PACKED_FUNC_H_ */
