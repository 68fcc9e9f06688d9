/*
 * func_registry.c -- call_packed without a loader: TVMBackendGetFuncFromEnv and TVMFuncCall
 * over the static function tables the application registers (func_registry.h).
 *
 * A TVMFunctionHandle is a pointer to an EmberFuncEntry of a registered table. TVMFuncCall
 * checks that it is one before calling through it, so a stale or garbage handle is an error
 * message rather than a jump to a random address.
 */
#include "internal.h"

static const EmberFuncRegistry* g_registries[EMBER_CRT_MAX_FUNC_REGISTRIES];
static uint32_t g_num_registries;

/* Equal names, comparing at most EMBER_CRT_MAX_NAME_LENGTH + 1 characters. */
static int same_name(const char* a, const char* b) {
  uint32_t i;
  for (i = 0; i <= EMBER_CRT_MAX_NAME_LENGTH; ++i) {
    if (a[i] != b[i]) return 0;
    if (a[i] == '\0') return 1;
  }
  return 0; /* longer than any registered name can be */
}

static tvm_crt_error_t bad_entry(const EmberFuncRegistry* reg, uint32_t index, const char* what) {
  ember_crt_error(kTvmErrorFunctionRegistryInvalid, "ember_crt_register_func_registry: ");
  ember_crt_error_append_name(reg->module_name, EMBER_CRT_MAX_NAME_LENGTH);
  ember_crt_error_append(" entry ");
  ember_crt_error_append_u64(index);
  ember_crt_error_append(what);
  return kTvmErrorFunctionRegistryInvalid;
}

static tvm_crt_error_t validate(const EmberFuncRegistry* reg) {
  uint32_t i, j;
  if (reg->num_funcs != 0u && reg->funcs == NULL) {
    return bad_entry(reg, 0u, ": funcs is NULL but num_funcs is not 0");
  }
  for (i = 0; i < reg->num_funcs; ++i) {
    const EmberFuncEntry* e = &reg->funcs[i];
    if (e->name == NULL) return bad_entry(reg, i, ": the name is NULL");
    if (e->func == NULL) return bad_entry(reg, i, ": the function pointer is NULL");
    if (ember_crt_bounded_strlen(e->name, EMBER_CRT_MAX_NAME_LENGTH) >
        EMBER_CRT_MAX_NAME_LENGTH) {
      return bad_entry(reg, i, ": the name is longer than EMBER_CRT_MAX_NAME_LENGTH");
    }
    for (j = 0; j < i; ++j) {
      if (same_name(reg->funcs[j].name, e->name)) {
        ember_crt_error(kTvmErrorFunctionRegistryDuplicate, "ember_crt_register_func_registry: ");
        ember_crt_error_append_name(reg->module_name, EMBER_CRT_MAX_NAME_LENGTH);
        ember_crt_error_append(" has two functions named ");
        ember_crt_error_append_name(e->name, EMBER_CRT_MAX_NAME_LENGTH);
        return kTvmErrorFunctionRegistryDuplicate;
      }
    }
  }
  return kTvmErrorNoError;
}

tvm_crt_error_t ember_crt_register_func_registry(const EmberFuncRegistry* registry) {
  uint32_t i;
  tvm_crt_error_t rc;
  if (registry == NULL) {
    return ember_crt_error(kTvmErrorFunctionRegistryInvalid,
                           "ember_crt_register_func_registry: the registry is NULL");
  }
  for (i = 0; i < g_num_registries; ++i) {
    if (g_registries[i] == registry) return kTvmErrorNoError;
  }
  rc = validate(registry);
  if (rc != kTvmErrorNoError) return rc;
  if (g_num_registries == EMBER_CRT_MAX_FUNC_REGISTRIES) {
    ember_crt_error(kTvmErrorFunctionRegistryFull, "ember_crt_register_func_registry: cannot add ");
    ember_crt_error_append_name(registry->module_name, EMBER_CRT_MAX_NAME_LENGTH);
    ember_crt_error_append(": all ");
    ember_crt_error_append_u64(EMBER_CRT_MAX_FUNC_REGISTRIES);
    ember_crt_error_append(" slots are taken (raise EMBER_CRT_MAX_FUNC_REGISTRIES)");
    return kTvmErrorFunctionRegistryFull;
  }
  g_registries[g_num_registries++] = registry;
  return kTvmErrorNoError;
}

void ember_crt_clear_func_registries(void) { g_num_registries = 0; }

static int lookup(const char* who, const char* name, TVMFunctionHandle* out) {
  uint32_t r, i, total = 0;
  if (name == NULL || out == NULL) {
    ember_crt_error(kTvmErrorGenericInvalidArgument, who);
    ember_crt_error_append(": the function name and the output must not be NULL");
    return kTvmErrorGenericInvalidArgument;
  }
  *out = NULL;
  for (r = 0; r < g_num_registries; ++r) {
    const EmberFuncRegistry* reg = g_registries[r];
    for (i = 0; i < reg->num_funcs; ++i) {
      if (same_name(reg->funcs[i].name, name)) {
        *out = (TVMFunctionHandle)&reg->funcs[i];
        return 0;
      }
    }
    total += reg->num_funcs;
  }
  ember_crt_error(kTvmErrorFunctionNameNotFound, who);
  ember_crt_error_append(": no function named ");
  ember_crt_error_append_name(name, EMBER_CRT_MAX_NAME_LENGTH);
  if (g_num_registries == 0u) {
    ember_crt_error_append("; no function registry is registered (call "
                           "ember_crt_register_func_registry(&tvmgen_<mod>_func_registry))");
  } else {
    ember_crt_error_append(" among the ");
    ember_crt_error_append_u64(total);
    ember_crt_error_append(" functions of ");
    ember_crt_error_append_u64(g_num_registries);
    ember_crt_error_append(" registered registry(ies)");
  }
  return kTvmErrorFunctionNameNotFound;
}

int TVMBackendGetFuncFromEnv(void* mod_node, const char* func_name, TVMFunctionHandle* out) {
  (void)mod_node; /* one flat namespace: there is no module tree without a loader */
  return lookup("TVMBackendGetFuncFromEnv", func_name, out);
}

int TVMFuncGetGlobal(const char* name, TVMFunctionHandle* out) {
  return lookup("TVMFuncGetGlobal", name, out);
}

int TVMFuncFree(TVMFunctionHandle func) {
  (void)func;
  return 0;
}

/* The entry a handle points to, or NULL if it is not an entry of a registered table. */
static const EmberFuncEntry* entry_of(TVMFunctionHandle handle) {
  uintptr_t h = (uintptr_t)handle;
  uint32_t r;
  for (r = 0; r < g_num_registries; ++r) {
    const EmberFuncRegistry* reg = g_registries[r];
    uintptr_t first = (uintptr_t)reg->funcs;
    if (reg->num_funcs != 0u && h >= first && h < (uintptr_t)(reg->funcs + reg->num_funcs) &&
        (h - first) % sizeof(EmberFuncEntry) == 0u) {
      return &reg->funcs[(h - first) / sizeof(EmberFuncEntry)];
    }
  }
  return NULL;
}

int TVMFuncCall(TVMFunctionHandle func, TVMValue* arg_values, int* type_codes, int num_args,
                TVMValue* ret_val, int* ret_type_code) {
  const EmberFuncEntry* entry = entry_of(func);
  TVMValue ret_scratch;
  int code_scratch;
  uint32_t serial;
  int rc;
  if (entry == NULL) {
    return ember_crt_error(kTvmErrorFunctionHandleInvalid,
                           "TVMFuncCall: the handle is not a function of a registered registry "
                           "(get it from TVMBackendGetFuncFromEnv)");
  }
  if (num_args < 0 || num_args > EMBER_CRT_MAX_ARGS ||
      (num_args > 0 && (arg_values == NULL || type_codes == NULL))) {
    ember_crt_error(kTvmErrorFunctionCallNumArgs, "TVMFuncCall: ");
    ember_crt_error_append_name(entry->name, EMBER_CRT_MAX_NAME_LENGTH);
    ember_crt_error_append(": bad argument list (");
    ember_crt_error_append_i64(num_args);
    ember_crt_error_append(" arguments; at most EMBER_CRT_MAX_ARGS = ");
    ember_crt_error_append_u64(EMBER_CRT_MAX_ARGS);
    ember_crt_error_append(", arrays non-NULL)");
    return kTvmErrorFunctionCallNumArgs;
  }
  if (ret_val == NULL) ret_val = &ret_scratch;
  if (ret_type_code == NULL) ret_type_code = &code_scratch;
  *ret_type_code = kTVMNullptr;
  serial = ember_crt_error_serial();
  rc = entry->func(arg_values, type_codes, num_args, ret_val, ret_type_code, NULL);
  if (rc == 0) return 0;
  if (ember_crt_error_serial() == serial) { /* the callee failed without saying why */
    ember_crt_error(kTvmErrorFunctionCallFailed, "TVMFuncCall: ");
    ember_crt_error_append_name(entry->name, EMBER_CRT_MAX_NAME_LENGTH);
    ember_crt_error_append(" returned ");
    ember_crt_error_append_i64(rc);
    ember_crt_error_append(" without setting an error message");
  }
  return rc;
}
