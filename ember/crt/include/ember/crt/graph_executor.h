/*
 * graph_executor.h -- the graph executor in C: runs a graph JSON (ember/runtime/graph_format.py
 * documents the layout) as a list of packed calls, with the storage plan of the Python one:
 * one 64-byte aligned buffer per storage id (its storage_size, or else as large as its largest
 * entry at offset 0), every entry a view into it at its storage_offset, __nop nodes aliasing
 * their input.
 *
 * The JSON is validated (bounded size and depth, no recursion) and every index, storage id,
 * shape and dtype checked before anything is allocated past the executor's own tables.
 * The JSON text must outlive the executor (names point into it). Errors are codes of the
 * kTvmErrorExecutor* family with a message (TVMGetLastError()).
 */
#ifndef EMBER_CRT_GRAPH_EXECUTOR_H_
#define EMBER_CRT_GRAPH_EXECUTOR_H_

#include "executor.h"

#ifdef __cplusplus
extern "C" {
#endif

/*! \brief Longest kernel name the executor looks up. */
#define EMBER_CRT_MAX_FUNC_NAME 255

typedef struct EmberGraphExecutor EmberGraphExecutor;

/*! \brief Parse json[0, json_len), plan storage, find every kernel through env. */
tvm_crt_error_t ember_graph_executor_create(const char* json, size_t json_len,
                                            const EmberExecutorEnv* env, DLDevice dev,
                                            EmberGraphExecutor** out);
/*! \brief Free the executor (NULL is a no-op). */
void ember_graph_executor_release(EmberGraphExecutor* ex);

uint32_t ember_graph_executor_num_inputs(const EmberGraphExecutor* ex);
uint32_t ember_graph_executor_num_outputs(const EmberGraphExecutor* ex);
/*! \brief The index of the input (or param) named name[0, len), or -1. */
int32_t ember_graph_executor_input_index(const EmberGraphExecutor* ex, const char* name,
                                         uint32_t len);
/*! \brief The name of input index (not NUL-terminated). */
tvm_crt_error_t ember_graph_executor_input_name(const EmberGraphExecutor* ex, uint32_t index,
                                                const char** name, uint32_t* len);
/*! \brief Copy value (a compact CPU tensor of the input's dtype and shape) into input index. */
tvm_crt_error_t ember_graph_executor_set_input(EmberGraphExecutor* ex, uint32_t index,
                                               const DLTensor* value);
/*! \brief The executor's tensor of input index (a view: set_input changes it). */
tvm_crt_error_t ember_graph_executor_input(EmberGraphExecutor* ex, uint32_t index,
                                           DLTensor** out);
/*! \brief The executor's tensor of output index (a view: the next run changes it). */
tvm_crt_error_t ember_graph_executor_output(EmberGraphExecutor* ex, uint32_t index,
                                            DLTensor** out);
/*! \brief Set inputs by name from a params blob; checks every tensor before copying any. */
tvm_crt_error_t ember_graph_executor_load_params(EmberGraphExecutor* ex, const void* data,
                                                 size_t size);
/*! \brief Run every node in order. */
tvm_crt_error_t ember_graph_executor_run(EmberGraphExecutor* ex);

#ifdef __cplusplus
}  /* extern "C" */
#endif
#endif /* EMBER_CRT_GRAPH_EXECUTOR_H_ */
