/*
 * func_registry.h -- the static table of functions that TVMBackendGetFuncFromEnv searches.
 *
 * Without a heap or a dynamic loader, the functions a model can reach by name are a table
 * compiled into the firmware. The AOT code generator emits one per model,
 *
 *   static const EmberFuncEntry tvmgen_default_funcs[] = {
 *     {"tvmgen_default_fused_add", tvmgen_default_fused_add},
 *   };
 *   const EmberFuncRegistry tvmgen_default_func_registry = {
 *     "default", tvmgen_default_funcs, sizeof(tvmgen_default_funcs) / sizeof(EmberFuncEntry)};
 *
 * and the application registers it once (ember_crt_register_func_registry in crt.h). This
 * header depends only on ember/c_packed_func.h, so a generated file may include it.
 *
 * Note: the layout is ember's, not that of TVM's TVMFuncRegistry (which packs the names
 * into one string); the TVMFuncRegistry name is kept as an alias for readers of TVM code.
 */
#ifndef EMBER_CRT_FUNC_REGISTRY_H_
#define EMBER_CRT_FUNC_REGISTRY_H_

#include <stdint.h>

#include "ember/c_packed_func.h"

#ifdef __cplusplus
extern "C" {
#endif

/*! \brief One named PackedFunc. A TVMFunctionHandle of the C runtime points to one. */
typedef struct {
  const char* name;
  TVMBackendPackedCFunc func;
} EmberFuncEntry;

/*! \brief The functions of one compiled module, e.g. tvmgen_<mod>_func_registry. */
typedef struct {
  const char* module_name;      /* for messages, e.g. "default" */
  const EmberFuncEntry* funcs;  /* num_funcs entries with distinct, non-NULL names */
  uint32_t num_funcs;
} EmberFuncRegistry;

typedef EmberFuncRegistry TVMFuncRegistry;

#ifdef __cplusplus
}  /* extern "C" */
#endif
#endif /* EMBER_CRT_FUNC_REGISTRY_H_ */
