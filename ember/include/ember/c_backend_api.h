/*
 * c_backend_api.h -- what generated code may call.
 *
 * Every library ember builds links ember/runtime/csrc/backend.c, which implements these
 * functions, so an exported library needs nothing but the ember Python runtime to run.
 * The standalone C runtime (ember/crt) provides the same functions for firmware.
 */
#ifndef EMBER_C_BACKEND_API_H_
#define EMBER_C_BACKEND_API_H_

#include "c_packed_func.h"

#ifdef __cplusplus
extern "C" {
#endif

/*!
 * \brief The module this library belongs to; pass it to TVMBackendGetFuncFromEnv.
 * Set by the loader. Defined (weakly) by backend.c: generated code only declares it.
 */
extern TVM_DLL void* __tvm_module_ctx;

/*!
 * \brief Allocate nbytes of scratch memory, 64-byte aligned, on a device (only kDLCPU).
 * \return the pointer, or NULL with the error set (TVMPackedFuncSetLastError).
 */
TVM_DLL void* TVMBackendAllocWorkspace(int device_type, int device_id, uint64_t nbytes,
                                       int dtype_code_hint, int dtype_bits_hint);

/*! \brief Free memory from TVMBackendAllocWorkspace. \return 0 on success. */
TVM_DLL int TVMBackendFreeWorkspace(int device_type, int device_id, void* ptr);

/*!
 * \brief Find a function by name for call_packed: first among the functions of the module
 * mod_node (normally __tvm_module_ctx), then its imported modules, then the global registry
 * (functions registered with ember.register_func). The handle stays valid as long as the
 * module does; cache it and do not free it.
 * \return 0 on success, nonzero (error set) when no function has that name.
 */
TVM_DLL int TVMBackendGetFuncFromEnv(void* mod_node, const char* func_name,
                                     TVMFunctionHandle* out);

/*!
 * \brief Call a PackedFunc handle (from TVMBackendGetFuncFromEnv or a kTVMPackedFuncHandle
 * argument). Sets *ret_type_code (kTVMNullptr when nothing is returned).
 * \return 0 on success, nonzero with the callee's error message set. Code that handles
 * the failure instead of returning it should clear the message (TVMAPISetLastError(NULL)),
 * so that it is not reported again by a later failure that sets none.
 */
TVM_DLL int TVMFuncCall(TVMFunctionHandle func, TVMValue* arg_values, int* type_codes,
                        int num_args, TVMValue* ret_val, int* ret_type_code);

/*! \brief Environment of one parallel task group. */
typedef struct {
  void* sync_handle;  /* reserved */
  int32_t num_task;   /* number of tasks actually running */
} TVMParallelGroupEnv;

/*! \brief Body of a parallel region: task_id in [0, penv->num_task). Return 0 on success. */
typedef int (*FTVMParallelLambda)(int task_id, TVMParallelGroupEnv* penv, void* cdata);

/*!
 * \brief Run flambda(task_id, penv, cdata) for task_id in [0, penv->num_task).
 * num_task is a request: 0 lets the runtime choose (one task per thread of the caller's
 * count), and penv->num_task is never more than that count, so every task runs at once
 * (TVMBackendParallelBarrier works). Hosted builds run the tasks on ember's thread pool, the
 * caller taking tasks too; the C runtime runs one task (num_task == 1). Nested launches run
 * serially. The lambda must split its work by penv->num_task. A launch costs about a
 * microsecond: do not launch for a few microseconds of work.
 * \return 0 if every task returned 0 (else the error of the first failing task is set).
 */
TVM_DLL int TVMBackendParallelLaunch(FTVMParallelLambda flambda, void* cdata, int num_task);

/*! \brief Wait until every task of the group reaches this barrier. */
TVM_DLL int TVMBackendParallelBarrier(int task_id, TVMParallelGroupEnv* penv);

/*!
 * \brief Add a symbol to the system library ("runtime.SystemLib"): code built with
 * Runtime(..., {"system-lib": True}) calls this from a constructor for each of its functions,
 * so that a program that links it statically finds them by name.
 * \return 0 (nonzero, error set, when the table is full or the name is NULL).
 */
TVM_DLL int TVMBackendRegisterSystemLibSymbol(const char* name, void* ptr);

/*! \brief Same as TVMPackedFuncSetLastError (the historical name). */
TVM_DLL void TVMAPISetLastError(const char* msg);

#ifdef __cplusplus
}  /* extern "C" */
#endif
#endif  /* EMBER_C_BACKEND_API_H_ */
