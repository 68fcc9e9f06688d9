/*
 * crt.h -- the application's view of the ember standalone C runtime.
 *
 * A firmware build compiles the generated model sources with libembercrt.a (the runtime
 * core: ember/crt/src) and a platform (platform.h). The application then
 *
 *   static uint8_t g_arena[WORKSPACE_BYTES];
 *   ember_crt_init(g_arena, sizeof(g_arena));                        // workspace arena
 *   ember_crt_register_func_registry(&tvmgen_default_func_registry); // for call_packed
 *   if (tvmgen_default_run(&inputs, &outputs) != 0) report(TVMGetLastError());
 *
 * Nothing allocates: the arena is the application's buffer and every table has the fixed
 * size of crt_config.h. The runtime is single-threaded (TVMBackendParallelLaunch runs the
 * task group serially) and keeps its state in static variables.
 */
#ifndef EMBER_CRT_CRT_H_
#define EMBER_CRT_CRT_H_

#include "ember/c_backend_api.h"

#include "crt_config.h"
#include "error_codes.h"
#include "func_registry.h"
#include "platform.h"
#include "stack_allocator.h"

#ifdef __cplusplus
extern "C" {
#endif

/*!
 * \brief Serve TVMBackendAllocWorkspace from pool[0, size) (it stays the application's).
 * May be called again to move to another buffer once every block has been freed.
 * \return 0; kTvmErrorWorkspaceInvalidPool for a NULL or too small pool;
 *   kTvmErrorWorkspaceBusy while blocks of the current arena are live.
 */
tvm_crt_error_t ember_crt_init(void* pool, size_t size);

/*!
 * \brief Drop every live block of the arena. Generated code frees its blocks when it fails;
 * code that returns early without freeing may leave some behind: call this after a failed
 * run (never during one) to start the next run from an empty arena. The peak is kept.
 */
void ember_crt_workspace_reset(void);

/*!
 * \brief Drop the blocks allocated since mark (an earlier ember_crt_workspace_stats()),
 * keeping older ones: a host that keeps its own blocks in the arena (the micro RPC server)
 * cleans up after a failed call this way. \return 0, or kTvmErrorGenericInvalidArgument when
 * blocks below the mark were freed since (nothing is changed).
 */
tvm_crt_error_t ember_crt_workspace_release_to(EmberStackAllocatorStats mark);

/*! \brief Usage of the workspace arena (all zero before ember_crt_init). */
EmberStackAllocatorStats ember_crt_workspace_stats(void);

/*!
 * \brief Make the functions of registry findable by TVMBackendGetFuncFromEnv and
 * TVMFuncGetGlobal. Registries are searched in registration order; registering the same
 * registry twice is a no-op. The registry must stay valid (it is normally a const global).
 * \return 0; kTvmErrorFunctionRegistryInvalid for NULL fields or over-long names;
 *   kTvmErrorFunctionRegistryDuplicate if two entries share a name;
 *   kTvmErrorFunctionRegistryFull beyond EMBER_CRT_MAX_FUNC_REGISTRIES.
 */
tvm_crt_error_t ember_crt_register_func_registry(const EmberFuncRegistry* registry);

/*! \brief Forget every registered registry (handles found before become invalid). */
void ember_crt_clear_func_registries(void);

/*! \brief The code of the last error (kTvmErrorNoError once the error is cleared). */
tvm_crt_error_t ember_crt_last_error_code(void);

/*! \brief The message of the last error, "" if none (as in c_runtime_api.h). */
TVM_DLL const char* TVMGetLastError(void);

/*! \brief Find a function of the registered registries by name. \return 0 or an error code. */
int TVMFuncGetGlobal(const char* name, TVMFunctionHandle* out);

/*! \brief Handles of the C runtime point into static tables: freeing is a no-op. */
int TVMFuncFree(TVMFunctionHandle func);

#ifdef __cplusplus
}  /* extern "C" */
#endif
#endif /* EMBER_CRT_CRT_H_ */
