/*
 * c_runtime_api.h -- what a host uses to drive a compiled library from C.
 *
 * Three implementations exist:
 * - Python-hosted: inside a process running the ember Python runtime, backend.c (linked into
 *   every library ember builds) implements these functions by forwarding to the Python
 *   runtime through the host table installed by ember.runtime.load_module. C code loaded by
 *   ember can use them to reach any module or registered function.
 * - native: libember_runtime (ember/runtime/native, no Python) implements all of them for C
 *   and C++ programs: it loads exported libraries (installing its own host table, so the
 *   same library works under both hosts) and runs them with the graph and AOT executors.
 * - standalone: ember/crt implements the function registry part for firmware.
 * Handles returned here are owned by the caller unless noted; free them with the matching
 * *Free function.
 */
#ifndef EMBER_C_RUNTIME_API_H_
#define EMBER_C_RUNTIME_API_H_

#include "c_backend_api.h"

#ifdef __cplusplus
extern "C" {
#endif

/*! \brief The message of the last failing call on this thread ("" if none). */
TVM_DLL const char* TVMGetLastError(void);

/*! \brief Find a function of the global registry. \return nonzero if there is none. */
TVM_DLL int TVMFuncGetGlobal(const char* name, TVMFunctionHandle* out);

/*! \brief Release a function handle owned by the caller. */
TVM_DLL int TVMFuncFree(TVMFunctionHandle func);

/*! \brief Load a module from a file (an exported library, .tar, ...). */
TVM_DLL int TVMModLoadFromFile(const char* file_name, const char* format, TVMModuleHandle* out);

/*! \brief Get a function of a module, searching its imports too when query_imports != 0. */
TVM_DLL int TVMModGetFunction(TVMModuleHandle mod, const char* func_name, int query_imports,
                              TVMFunctionHandle* out);

/*! \brief Release a module handle owned by the caller. */
TVM_DLL int TVMModFree(TVMModuleHandle mod);

/*! \brief Release an object handle owned by the caller. */
TVM_DLL int TVMObjectFree(TVMObjectHandle obj);

/*! \brief Make module dep an import of mod (searched by query_imports and call_packed). */
TVM_DLL int TVMModImport(TVMModuleHandle mod, TVMModuleHandle dep);

/*!
 * \brief Register func under name in the global registry (a reference is kept).
 * \return nonzero if the name is taken and override is 0.
 */
TVM_DLL int TVMFuncRegisterGlobal(const char* name, TVMFunctionHandle func, int override);

/*!
 * \brief Wrap a C PackedFunc (and its resource_handle) as a function handle; fin (may be
 * NULL) is called with resource_handle when the last reference goes.
 */
TVM_DLL int TVMFuncCreateFromCFunc(TVMBackendPackedCFunc func, void* resource_handle,
                                   void (*fin)(void* resource_handle), TVMFunctionHandle* out);

/*! \brief Set the stream of a device: ember runs on the CPU, which has none (a no-op). */
TVM_DLL int TVMSetStream(int device_type, int device_id, void* stream);

/*! \brief Allocate a compact tensor with 64-byte aligned data; free with TVMArrayFree. */
TVM_DLL int TVMArrayAlloc(const int64_t* shape, int ndim, int dtype_code, int dtype_bits,
                          int dtype_lanes, int device_type, int device_id, TVMArrayHandle* out);

/*! \brief Free a tensor from TVMArrayAlloc. */
TVM_DLL int TVMArrayFree(TVMArrayHandle handle);

/*! \brief Copy nbytes (exactly the tensor's size) from data into a compact tensor. */
TVM_DLL int TVMArrayCopyFromBytes(TVMArrayHandle handle, void* data, size_t nbytes);

/*! \brief Copy a compact tensor into data (nbytes must be exactly its size). */
TVM_DLL int TVMArrayCopyToBytes(TVMArrayHandle handle, void* data, size_t nbytes);

#ifdef __cplusplus
}  /* extern "C" */
#endif
#endif  /* EMBER_C_RUNTIME_API_H_ */
