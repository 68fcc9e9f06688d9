/*
 * c_runtime_api.h -- what a host uses to drive a compiled library from C.
 *
 * Two implementations exist:
 * - hosted: inside a process running the ember Python runtime, backend.c (linked into every
 *   library ember builds) implements these functions by forwarding to the Python runtime
 *   through the host table installed by ember.runtime.load_module. C code loaded by ember can
 *   use them to reach any module or registered function.
 * - standalone: ember/crt implements them in plain C for programs without Python.
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

/*! \brief Allocate a compact tensor with 64-byte aligned data; free with TVMArrayFree. */
TVM_DLL int TVMArrayAlloc(const int64_t* shape, int ndim, int dtype_code, int dtype_bits,
                          int dtype_lanes, int device_type, int device_id, TVMArrayHandle* out);

/*! \brief Free a tensor from TVMArrayAlloc. */
TVM_DLL int TVMArrayFree(TVMArrayHandle handle);

#ifdef __cplusplus
}  /* extern "C" */
#endif
#endif  /* EMBER_C_RUNTIME_API_H_ */
