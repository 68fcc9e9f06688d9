/*
 * executor_ops.h -- the graph and the AOT executor behind one table of functions, for the
 * code that serves either as a module: the micro RPC server (ember/crt/rpc) and the native
 * runtime's executor modules (ember/runtime/native). Each entry calls the executor's own
 * function (ember_graph_executor_run, ember_aot_executor_run, ...) with ex cast to its type.
 */
#ifndef EMBER_CRT_EXECUTOR_OPS_H_
#define EMBER_CRT_EXECUTOR_OPS_H_

#include <stddef.h>
#include <stdint.h>

#include "ember/dlpack.h"

#include "error_codes.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  uint32_t (*num_inputs)(const void* ex);
  uint32_t (*num_outputs)(const void* ex);
  int32_t (*input_index)(const void* ex, const char* name, uint32_t len);
  tvm_crt_error_t (*input_name)(const void* ex, uint32_t index, const char** name,
                                uint32_t* len);
  tvm_crt_error_t (*set_input)(void* ex, uint32_t index, const DLTensor* value);
  tvm_crt_error_t (*input)(void* ex, uint32_t index, DLTensor** out);
  tvm_crt_error_t (*output)(void* ex, uint32_t index, DLTensor** out);
  tvm_crt_error_t (*load_params)(void* ex, const void* data, size_t size);
  tvm_crt_error_t (*run)(void* ex);
  void (*release)(void* ex);
} EmberExecutorOps;

/*! \brief The table of an EmberGraphExecutor. */
extern const EmberExecutorOps ember_graph_executor_ops;
/*! \brief The table of an EmberAotExecutor. */
extern const EmberExecutorOps ember_aot_executor_ops;

#ifdef __cplusplus
}  /* extern "C" */
#endif
#endif /* EMBER_CRT_EXECUTOR_OPS_H_ */
