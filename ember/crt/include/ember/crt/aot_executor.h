/*
 * aot_executor.h -- the AOT executor in C: a compiled tvmgen_<mod>_run behind the executor
 * interface. It reads the model's metadata JSON (ember/runtime/aot_format.py), allocates the
 * inputs, outputs, the constant pool (params not linked) and the workspace, and calls the
 * entry: the PackedFunc <prefix>_run (interface-api=packed) or, when the host can give plain
 * symbols, int32_t <prefix>_run(struct inputs*, struct outputs*) (interface-api=c).
 *
 * run refuses to start while an input or a constant has not been set. The metadata text
 * must outlive the executor (names point into it).
 */
#ifndef EMBER_CRT_AOT_EXECUTOR_H_
#define EMBER_CRT_AOT_EXECUTOR_H_

#include "executor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct EmberAotExecutor EmberAotExecutor;

/*! \brief Parse the metadata, allocate, and find the entry through env. */
tvm_crt_error_t ember_aot_executor_create(const char* metadata_json, size_t len,
                                          const EmberExecutorEnv* env, DLDevice dev,
                                          EmberAotExecutor** out);
void ember_aot_executor_release(EmberAotExecutor* ex);

uint32_t ember_aot_executor_num_inputs(const EmberAotExecutor* ex);
uint32_t ember_aot_executor_num_outputs(const EmberAotExecutor* ex);
int32_t ember_aot_executor_input_index(const EmberAotExecutor* ex, const char* name,
                                       uint32_t len);
tvm_crt_error_t ember_aot_executor_input_name(const EmberAotExecutor* ex, uint32_t index,
                                              const char** name, uint32_t* len);
tvm_crt_error_t ember_aot_executor_set_input(EmberAotExecutor* ex, uint32_t index,
                                             const DLTensor* value);
/*! \brief The executor's tensor of input index, a writable view: from then on the input
 * counts as set (filling the view is the Relay-era get_input(name).copyfrom(value)). */
tvm_crt_error_t ember_aot_executor_input(EmberAotExecutor* ex, uint32_t index, DLTensor** out);
tvm_crt_error_t ember_aot_executor_output(EmberAotExecutor* ex, uint32_t index, DLTensor** out);
/*! \brief Constants (by name, into the constant pool) or inputs from a params blob. */
tvm_crt_error_t ember_aot_executor_load_params(EmberAotExecutor* ex, const void* data,
                                               size_t size);
tvm_crt_error_t ember_aot_executor_run(EmberAotExecutor* ex);

#ifdef __cplusplus
}  /* extern "C" */
#endif
#endif /* EMBER_CRT_AOT_EXECUTOR_H_ */
