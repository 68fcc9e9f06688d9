/*
 * object.c -- handles (functions and modules), their reference counts, and the entry points
 * of c_runtime_api.h that work on them: TVMFuncCall, TVMModGetFunction, TVMModImport,
 * TVMFuncCreateFromCFunc and the *Free functions.
 */
#include <stdlib.h>
#include <string.h>

#include "native.h"

void ember_object_retain(EmberObject* obj) {
  if (obj != NULL) __atomic_add_fetch(&obj->refs, 1, __ATOMIC_RELAXED);
}

void ember_object_release(EmberObject* obj) {
  if (obj == NULL || __atomic_sub_fetch(&obj->refs, 1, __ATOMIC_ACQ_REL) != 0) return;
  obj->tag = EMBER_TAG_DEAD;
  obj->destroy(obj);
}

static void destroy_function(EmberObject* obj) {
  EmberFunction* f = (EmberFunction*)obj;
  if (f->finalize != NULL) f->finalize(f->resource);
  ember_object_release(f->owner);
  free(f);
}

EmberFunction* ember_function_new(TVMBackendPackedCFunc fn, void* resource, EmberObject* owner,
                                  const char* (*take_error)(void)) {
  EmberFunction* f = (EmberFunction*)calloc(1, sizeof(EmberFunction));
  if (f == NULL) {
    ember_crt_error(kTvmErrorExecutorOutOfMemory, "out of memory creating a function handle");
    return NULL;
  }
  f->obj.tag = EMBER_TAG_FUNCTION;
  f->obj.refs = 1;
  f->obj.destroy = destroy_function;
  f->fn = fn;
  f->resource = resource;
  f->owner = owner;
  f->take_error = take_error;
  ember_object_retain(owner);
  return f;
}

static int bad_handle(const char* who, const char* what, void* handle) {
  ember_crt_error(kTvmErrorModuleHandleInvalid, who);
  ember_crt_error_append(handle == NULL ? ": the " : ": not a ");
  ember_crt_error_append(what);
  ember_crt_error_append(handle == NULL ? " handle is NULL" : " handle (freed, or another kind)");
  return kTvmErrorModuleHandleInvalid;
}

EmberFunction* ember_as_function(void* handle, const char* who) {
  EmberObject* obj = (EmberObject*)handle;
  if (obj == NULL || obj->tag != EMBER_TAG_FUNCTION) {
    bad_handle(who, "function", handle);
    return NULL;
  }
  return (EmberFunction*)obj;
}

EmberModule* ember_as_module(void* handle, const char* who) {
  EmberObject* obj = (EmberObject*)handle;
  if (obj == NULL || obj->tag != EMBER_TAG_MODULE) {
    bad_handle(who, "module", handle);
    return NULL;
  }
  return (EmberModule*)obj;
}

static void destroy_module(EmberObject* obj) {
  EmberModule* mod = (EmberModule*)obj;
  uint32_t i;
  for (i = 0; i < mod->num_env; ++i) {
    free(mod->env[i].name);
    ember_object_release(&mod->env[i].func->obj);
  }
  free(mod->env);
  if (mod->release != NULL) mod->release(mod);
  for (i = mod->num_imports; i > 0; --i) ember_object_release(&mod->imports[i - 1]->obj);
  free(mod->imports);
  free(mod);
}

void ember_module_init(EmberModule* mod, const char* type_key, EmberGetLocal get_local,
                       void (*release)(EmberModule*)) {
  mod->obj.tag = EMBER_TAG_MODULE;
  mod->obj.refs = 1;
  mod->obj.destroy = destroy_module;
  mod->type_key = type_key;
  mod->get_local = get_local;
  mod->release = release;
}

static int reaches(EmberModule* from, EmberModule* target, uint32_t depth) {
  uint32_t i;
  if (from == target) return 1;
  if (depth > 64u) return 1; /* deeper than any real tree: treat as a cycle */
  for (i = 0; i < from->num_imports; ++i) {
    if (reaches(from->imports[i], target, depth + 1u)) return 1;
  }
  return 0;
}

int ember_module_import(EmberModule* mod, EmberModule* dep) {
  if (reaches(dep, mod, 0)) {
    return ember_crt_error(kTvmErrorGenericInvalidArgument,
                           "TVMModImport: the import would make a cycle (or a tree deeper "
                           "than 64)");
  }
  if (mod->num_imports == mod->cap_imports) {
    uint32_t cap = mod->cap_imports ? 2u * mod->cap_imports : 4u;
    EmberModule** grown = (EmberModule**)realloc(mod->imports, cap * sizeof(EmberModule*));
    if (grown == NULL) return ember_crt_error(kTvmErrorExecutorOutOfMemory, "out of memory");
    mod->imports = grown;
    mod->cap_imports = cap;
  }
  ember_object_retain(&dep->obj);
  mod->imports[mod->num_imports++] = dep;
  return 0;
}

/* Depth is bounded by ember_module_import (no cycles, at most 64 deep). */
int ember_module_find(EmberModule* mod, const char* name, int query_imports,
                      EmberFunction** out) {
  uint32_t i;
  int rc = mod->get_local != NULL ? mod->get_local(mod, name, out) : 1;
  for (i = 0; rc == 1 && query_imports && i < mod->num_imports; ++i) {
    rc = ember_module_find(mod->imports[i], name, 1, out);
  }
  return rc;
}

void* ember_module_symbol(EmberModule* mod, const char* name) {
  uint32_t i;
  void* sym = mod->get_symbol != NULL ? mod->get_symbol(mod, name) : NULL;
  for (i = 0; sym == NULL && i < mod->num_imports; ++i) {
    sym = ember_module_symbol(mod->imports[i], name);
  }
  return sym;
}

/* ---- c_runtime_api.h -------------------------------------------------------------------- */

int TVMFuncCall(TVMFunctionHandle func, TVMValue* arg_values, int* type_codes, int num_args,
                TVMValue* ret_val, int* ret_type_code) {
  EmberFunction* f = ember_as_function(func, "TVMFuncCall");
  TVMValue ret_scratch;
  int code_scratch, rc;
  uint32_t serial;
  if (f == NULL) return kTvmErrorModuleHandleInvalid;
  if (num_args < 0 || (num_args > 0 && (arg_values == NULL || type_codes == NULL))) {
    ember_crt_error(kTvmErrorFunctionCallNumArgs, "TVMFuncCall: bad argument list (");
    ember_crt_error_append_i64(num_args);
    ember_crt_error_append(" arguments, arrays must be non-NULL)");
    return kTvmErrorFunctionCallNumArgs;
  }
  if (ret_val == NULL) ret_val = &ret_scratch;
  if (ret_type_code == NULL) ret_type_code = &code_scratch;
  *ret_type_code = kTVMNullptr;
  serial = ember_crt_error_serial();
  rc = f->fn(arg_values, type_codes, num_args, ret_val, ret_type_code, f->resource);
  if (rc == 0) return 0;
  if (f->take_error != NULL) { /* a library's function: its message is in its own buffer */
    const char* msg = f->take_error();
    if (msg != NULL && msg[0] != '\0') {
      ember_crt_error(kTvmErrorFunctionReportedError, msg);
      return kTvmErrorFunctionReportedError;
    }
  }
  if (ember_crt_error_serial() == serial) {
    ember_crt_error(kTvmErrorFunctionCallFailed, "TVMFuncCall: the function returned ");
    ember_crt_error_append_i64(rc);
    ember_crt_error_append(" without setting an error message");
  }
  rc = ember_crt_last_error_code();
  return rc != 0 ? rc : kTvmErrorFunctionCallFailed;
}

int TVMFuncFree(TVMFunctionHandle func) {
  EmberFunction* f;
  if (func == NULL) return 0;
  if ((f = ember_as_function(func, "TVMFuncFree")) == NULL) return kTvmErrorModuleHandleInvalid;
  ember_object_release(&f->obj);
  return 0;
}

int TVMModFree(TVMModuleHandle mod) {
  EmberModule* m;
  if (mod == NULL) return 0;
  if ((m = ember_as_module(mod, "TVMModFree")) == NULL) return kTvmErrorModuleHandleInvalid;
  ember_object_release(&m->obj);
  return 0;
}

int TVMObjectFree(TVMObjectHandle obj) {
  EmberObject* o = (EmberObject*)obj;
  if (o == NULL) return 0;
  if (o->tag != EMBER_TAG_FUNCTION && o->tag != EMBER_TAG_MODULE) {
    return bad_handle("TVMObjectFree", "function or module", obj);
  }
  ember_object_release(o);
  return 0;
}

int TVMModGetFunction(TVMModuleHandle mod, const char* func_name, int query_imports,
                      TVMFunctionHandle* out) {
  EmberModule* m = ember_as_module(mod, "TVMModGetFunction");
  EmberFunction* f = NULL;
  int rc;
  if (m == NULL) return kTvmErrorModuleHandleInvalid;
  if (func_name == NULL || out == NULL) {
    return ember_crt_error(kTvmErrorGenericInvalidArgument,
                           "TVMModGetFunction: the name and out must not be NULL");
  }
  *out = NULL;
  rc = ember_module_find(m, func_name, query_imports, &f);
  if (rc == 1) {
    ember_crt_error(kTvmErrorModuleFunctionNotFound, "TVMModGetFunction: module (");
    ember_crt_error_append(m->type_key);
    ember_crt_error_append(query_imports ? ") and its imports have" : ") has");
    ember_crt_error_append(" no function named ");
    ember_crt_error_append_name(func_name, 200);
    return kTvmErrorModuleFunctionNotFound;
  }
  if (rc == 0) *out = f;
  return rc;
}

int TVMModImport(TVMModuleHandle mod, TVMModuleHandle dep) {
  EmberModule* m = ember_as_module(mod, "TVMModImport");
  EmberModule* d = m != NULL ? ember_as_module(dep, "TVMModImport") : NULL;
  return d == NULL ? kTvmErrorModuleHandleInvalid : ember_module_import(m, d);
}

int TVMFuncCreateFromCFunc(TVMBackendPackedCFunc func, void* resource_handle,
                           void (*fin)(void* resource_handle), TVMFunctionHandle* out) {
  EmberFunction* f;
  if (func == NULL || out == NULL) {
    return ember_crt_error(kTvmErrorGenericInvalidArgument,
                           "TVMFuncCreateFromCFunc: func and out must not be NULL");
  }
  f = ember_function_new(func, resource_handle, NULL, NULL);
  if (f == NULL) return kTvmErrorExecutorOutOfMemory;
  f->finalize = fin;
  *out = f;
  return 0;
}
