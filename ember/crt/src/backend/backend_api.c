/*
 * backend_api.c -- parallel launch and the module context of the C runtime.
 *
 * The standalone counterpart of ember/runtime/csrc/backend.c for what needs no arena and no
 * registry: TVMBackendParallelLaunch (serial) and __tvm_module_ctx. The last error is in
 * error_message.c.
 */
#include "internal.h"

/*
 * Generated code passes __tvm_module_ctx to TVMBackendGetFuncFromEnv. The C runtime searches
 * every registered registry whatever the value, so it stays NULL. Weak, as in backend.c, so
 * that generated code which defines its own still links.
 */
#if defined(__GNUC__) || defined(__clang__)
__attribute__((weak))
#endif
void* __tvm_module_ctx = NULL;

/* ---- parallel launch: one task, run in place ------------------------------------------- */

int TVMBackendParallelLaunch(FTVMParallelLambda flambda, void* cdata, int num_task) {
  TVMParallelGroupEnv env;
  uint32_t serial = ember_crt_error_serial();
  int rc;
  (void)num_task; /* a request, not a promise: the lambda splits work by penv->num_task */
  if (flambda == NULL) {
    return ember_crt_error(kTvmErrorGenericInvalidArgument,
                           "TVMBackendParallelLaunch: the task function is NULL");
  }
  env.sync_handle = NULL;
  env.num_task = 1;
  rc = flambda(0, &env, cdata);
  if (rc == 0) return 0;
  if (ember_crt_error_serial() == serial) { /* keep the task's own message if it set one */
    ember_crt_error(kTvmErrorFunctionParallelTaskFailed,
                    "TVMBackendParallelLaunch: the task returned ");
    ember_crt_error_append_i64(rc);
    ember_crt_error_append(" without setting an error message");
  }
  return kTvmErrorFunctionParallelTaskFailed;
}

int TVMBackendParallelBarrier(int task_id, TVMParallelGroupEnv* penv) {
  (void)task_id; /* one task: every task has already arrived */
  (void)penv;
  return 0;
}
