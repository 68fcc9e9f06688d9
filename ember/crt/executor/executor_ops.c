/*
 * executor_ops.c -- the tables of executor_ops.h: each entry casts ex to the executor's type.
 */
#include "ember/crt/executor_ops.h"

#include "ember/crt/aot_executor.h"
#include "ember/crt/graph_executor.h"

#define ADAPT(kind, T)                                                                        \
  static uint32_t kind##_num_inputs(const void* e) {                                          \
    return ember_##kind##_num_inputs((const T*)e);                                            \
  }                                                                                           \
  static uint32_t kind##_num_outputs(const void* e) {                                         \
    return ember_##kind##_num_outputs((const T*)e);                                           \
  }                                                                                           \
  static int32_t kind##_input_index(const void* e, const char* n, uint32_t l) {               \
    return ember_##kind##_input_index((const T*)e, n, l);                                     \
  }                                                                                           \
  static tvm_crt_error_t kind##_input_name(const void* e, uint32_t i, const char** n,         \
                                           uint32_t* l) {                                     \
    return ember_##kind##_input_name((const T*)e, i, n, l);                                   \
  }                                                                                           \
  static tvm_crt_error_t kind##_set_input(void* e, uint32_t i, const DLTensor* v) {           \
    return ember_##kind##_set_input((T*)e, i, v);                                             \
  }                                                                                           \
  static tvm_crt_error_t kind##_input(void* e, uint32_t i, DLTensor** o) {                    \
    return ember_##kind##_input((T*)e, i, o);                                                 \
  }                                                                                           \
  static tvm_crt_error_t kind##_output(void* e, uint32_t i, DLTensor** o) {                   \
    return ember_##kind##_output((T*)e, i, o);                                                \
  }                                                                                           \
  static tvm_crt_error_t kind##_load_params(void* e, const void* d, size_t n) {               \
    return ember_##kind##_load_params((T*)e, d, n);                                           \
  }                                                                                           \
  static tvm_crt_error_t kind##_run(void* e) { return ember_##kind##_run((T*)e); }            \
  static void kind##_release(void* e) { ember_##kind##_release((T*)e); }                      \
  const EmberExecutorOps ember_##kind##_ops = {                                               \
      kind##_num_inputs, kind##_num_outputs, kind##_input_index, kind##_input_name,           \
      kind##_set_input,  kind##_input,       kind##_output,      kind##_load_params,          \
      kind##_run,        kind##_release};

ADAPT(graph_executor, EmberGraphExecutor)
ADAPT(aot_executor, EmberAotExecutor)
