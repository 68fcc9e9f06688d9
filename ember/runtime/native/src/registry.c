/*
 * registry.c -- the global function registry (TVMFuncGetGlobal / TVMFuncRegisterGlobal), the
 * system library (symbols registered by TVMBackendRegisterSystemLibSymbol, found through
 * "runtime.SystemLib"), and the lookups compiled code makes through the host table.
 *
 * One mutex guards the tables; registration may run from constructors before main.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "native.h"

typedef struct {
  char* name;
  EmberFunction* func;
} Global;

typedef struct {
  const char* name;
  void* ptr;
} Symbol;

typedef struct {
  EmberModule* lib;
  void* (*lookup)(const char*);
  const char* (*take_error)(void);
} SysLibrary;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static Global* g_globals;
static uint32_t g_num_globals, g_cap_globals;
static Symbol* g_symbols;
static uint32_t g_num_symbols, g_cap_symbols;
static SysLibrary* g_libs;
static uint32_t g_num_libs, g_cap_libs;
static EmberModule* g_system_lib;

void ember_lock(void) { pthread_mutex_lock(&g_lock); }
void ember_unlock(void) { pthread_mutex_unlock(&g_lock); }

/* Grow an array of elem-byte items to hold one more; 0 or an error. */
static int grow(void** items, uint32_t* cap, uint32_t len, size_t elem) {
  void* grown;
  uint32_t want;
  if (len < *cap) return 0;
  want = *cap ? 2u * *cap : 16u;
  grown = realloc(*items, want * elem);
  if (grown == NULL) return ember_crt_error(kTvmErrorExecutorOutOfMemory, "out of memory");
  *items = grown;
  *cap = want;
  return 0;
}

/* ---- system library -------------------------------------------------------------------- */

int TVMBackendRegisterSystemLibSymbol(const char* name, void* ptr) {
  int rc;
  if (name == NULL || ptr == NULL) {
    return ember_crt_error(kTvmErrorGenericInvalidArgument,
                           "TVMBackendRegisterSystemLibSymbol: name and ptr must not be NULL");
  }
  ember_lock();
  rc = grow((void**)&g_symbols, &g_cap_symbols, g_num_symbols, sizeof(Symbol));
  if (rc == 0) {
    g_symbols[g_num_symbols].name = name;
    g_symbols[g_num_symbols++].ptr = ptr;
  }
  ember_unlock();
  return rc;
}

void ember_registry_add_library(EmberModule* lib, void* (*lookup)(const char*),
                                const char* (*take_error)(void)) {
  ember_lock();
  if (grow((void**)&g_libs, &g_cap_libs, g_num_libs, sizeof(SysLibrary)) == 0) {
    g_libs[g_num_libs].lib = lib;
    g_libs[g_num_libs].lookup = lookup;
    g_libs[g_num_libs++].take_error = take_error;
  }
  ember_unlock();
}

void ember_registry_remove_library(EmberModule* lib) {
  uint32_t i;
  ember_lock();
  for (i = 0; i < g_num_libs; ++i) {
    if (g_libs[i].lib == lib) {
      g_libs[i] = g_libs[--g_num_libs];
      break;
    }
  }
  ember_unlock();
}

/* A symbol of the system library: linked into the program, or registered by a library. */
static void* syslib_symbol(const char* name, SysLibrary* from) {
  uint32_t i;
  void* ptr = NULL;
  ember_lock();
  for (i = 0; i < g_num_symbols && ptr == NULL; ++i) {
    if (strcmp(g_symbols[i].name, name) == 0) ptr = g_symbols[i].ptr;
  }
  for (i = 0; i < g_num_libs && ptr == NULL; ++i) {
    if ((ptr = g_libs[i].lookup(name)) != NULL && from != NULL) *from = g_libs[i];
  }
  ember_unlock();
  return ptr;
}

static int syslib_get_local(EmberModule* self, const char* name, EmberFunction** out) {
  SysLibrary from = {NULL, NULL, NULL};
  void* ptr = syslib_symbol(name, &from);
  (void)self;
  if (ptr == NULL) return 1;
  *out = ember_function_new((TVMBackendPackedCFunc)(uintptr_t)ptr, NULL,
                            from.lib != NULL ? &from.lib->obj : NULL, from.take_error);
  return *out != NULL ? 0 : kTvmErrorExecutorOutOfMemory;
}

static void* syslib_get_symbol(EmberModule* self, const char* name) {
  (void)self;
  return syslib_symbol(name, NULL);
}

EmberModule* ember_system_lib(void) {
  EmberModule* mod;
  ember_lock();
  if (g_system_lib == NULL && (mod = (EmberModule*)calloc(1, sizeof(EmberModule))) != NULL) {
    ember_module_init(mod, "system_lib", syslib_get_local, NULL);
    mod->get_symbol = syslib_get_symbol;
    mod->obj.refs = 1; /* the registry's: the system library lives as long as the process */
    g_system_lib = mod;
  }
  mod = g_system_lib;
  if (mod != NULL) ember_object_retain(&mod->obj);
  ember_unlock();
  if (mod == NULL) ember_crt_error(kTvmErrorExecutorOutOfMemory, "out of memory");
  return mod;
}

/* ---- global functions ------------------------------------------------------------------- */

static void register_builtins(void);
static pthread_once_t g_builtins_once = PTHREAD_ONCE_INIT;

int ember_registry_find(const char* name, EmberFunction** out) {
  uint32_t i;
  int rc = 1;
  pthread_once(&g_builtins_once, register_builtins);
  ember_lock();
  for (i = 0; i < g_num_globals; ++i) {
    if (strcmp(g_globals[i].name, name) == 0) {
      ember_object_retain(&g_globals[i].func->obj);
      *out = g_globals[i].func;
      rc = 0;
      break;
    }
  }
  ember_unlock();
  return rc;
}

int TVMFuncGetGlobal(const char* name, TVMFunctionHandle* out) {
  EmberFunction* f = NULL;
  if (name == NULL || out == NULL) {
    return ember_crt_error(kTvmErrorGenericInvalidArgument,
                           "TVMFuncGetGlobal: name and out must not be NULL");
  }
  *out = NULL;
  if (ember_registry_find(name, &f) != 0) {
    ember_crt_error(kTvmErrorFunctionNameNotFound, "TVMFuncGetGlobal: no global function named ");
    ember_crt_error_append_name(name, 200);
    return kTvmErrorFunctionNameNotFound;
  }
  *out = f;
  return 0;
}

static int register_global(const char* name, EmberFunction* f, int override) {
  uint32_t i;
  int rc = 0;
  char* copy;
  ember_lock();
  for (i = 0; i < g_num_globals; ++i) {
    if (strcmp(g_globals[i].name, name) == 0) break;
  }
  if (i < g_num_globals && !override) {
    ember_unlock();
    ember_crt_error(kTvmErrorFunctionRegistryDuplicate, "TVMFuncRegisterGlobal: ");
    ember_crt_error_append_name(name, 200);
    ember_crt_error_append(" is already registered (pass override = 1 to replace it)");
    return kTvmErrorFunctionRegistryDuplicate;
  }
  ember_object_retain(&f->obj);
  if (i < g_num_globals) {
    ember_object_release(&g_globals[i].func->obj);
    g_globals[i].func = f;
  } else if ((copy = ember_strdup(name, strlen(name))) == NULL ||
             (rc = grow((void**)&g_globals, &g_cap_globals, g_num_globals, sizeof(Global))) != 0) {
    free(copy);
    ember_object_release(&f->obj);
    rc = kTvmErrorExecutorOutOfMemory;
  } else {
    g_globals[g_num_globals].name = copy;
    g_globals[g_num_globals++].func = f;
  }
  ember_unlock();
  return rc;
}

int TVMFuncRegisterGlobal(const char* name, TVMFunctionHandle func, int override) {
  EmberFunction* f;
  if (name == NULL) {
    return ember_crt_error(kTvmErrorGenericInvalidArgument, "TVMFuncRegisterGlobal: name is NULL");
  }
  if ((f = ember_as_function(func, "TVMFuncRegisterGlobal")) == NULL) {
    return kTvmErrorModuleHandleInvalid;
  }
  pthread_once(&g_builtins_once, register_builtins);
  return register_global(name, f, override);
}

/* ---- lookups of compiled code (the host table's get_function) ------------------------------ */

static int env_lookup(EmberModule* mod, const char* name, EmberFunction** out) {
  uint32_t i;
  int rc = 1;
  ember_lock();
  for (i = 0; i < mod->num_env; ++i) {
    if (strcmp(mod->env[i].name, name) == 0) {
      *out = mod->env[i].func;
      rc = 0;
      break;
    }
  }
  ember_unlock();
  return rc;
}

/* Keep f in mod's cache, owned by mod; its owner is mod or kept alive by mod (an import, a
 * registered global), so the cached handle drops its own reference (no cycle). */
static int env_store(EmberModule* mod, const char* name, EmberFunction* f) {
  char* copy = ember_strdup(name, strlen(name));
  int rc;
  if (copy == NULL) return kTvmErrorExecutorOutOfMemory;
  ember_lock();
  rc = grow((void**)&mod->env, &mod->cap_env, mod->num_env, sizeof(EmberEnvEntry));
  if (rc == 0) {
    mod->env[mod->num_env].name = copy;
    mod->env[mod->num_env++].func = f;
    if (f->owner != NULL && f->owner->refs > 1) {
      ember_object_release(f->owner);
      f->owner = NULL;
    }
  }
  ember_unlock();
  if (rc != 0) free(copy);
  return rc;
}

int ember_host_get_function(void* handle, const char* name, int flags, TVMFunctionHandle* out) {
  EmberModule* mod = handle != NULL ? ember_as_module(handle, "TVMBackendGetFuncFromEnv") : NULL;
  EmberFunction* f = NULL;
  int rc = 1;
  uint32_t i;
  if (handle != NULL && mod == NULL) return kTvmErrorModuleHandleInvalid;
  if (mod != NULL && (flags & EMBER_LOOKUP_ENV) && env_lookup(mod, name, &f) == 0) {
    *out = f;
    return 0;
  }
  if (mod != NULL && (flags & EMBER_LOOKUP_SELF)) {
    rc = ember_module_find(mod, name, flags & EMBER_LOOKUP_IMPORTS, &f);
  } else if (mod != NULL && (flags & EMBER_LOOKUP_IMPORTS)) {
    for (i = 0; rc == 1 && i < mod->num_imports; ++i) {
      rc = ember_module_find(mod->imports[i], name, 1, &f);
    }
  }
  if (rc == 1 && (flags & EMBER_LOOKUP_GLOBAL)) rc = ember_registry_find(name, &f);
  if (rc == 1) {
    ember_crt_error(kTvmErrorFunctionNameNotFound, "cannot find function ");
    ember_crt_error_append_name(name, 200);
    ember_crt_error_append(mod != NULL ? " in the module, its imports or the global registry"
                                       : " in the global registry");
    return kTvmErrorFunctionNameNotFound;
  }
  if (rc != 0) return rc;
  if (mod != NULL && (flags & EMBER_LOOKUP_ENV) && (rc = env_store(mod, name, f)) != 0) {
    ember_object_release(&f->obj);
    return rc;
  }
  *out = f;
  return 0;
}

int TVMBackendGetFuncFromEnv(void* mod_node, const char* func_name, TVMFunctionHandle* out) {
  EmberModule* syslib;
  int rc;
  if (func_name == NULL || out == NULL) {
    return ember_crt_error(kTvmErrorGenericInvalidArgument,
                           "TVMBackendGetFuncFromEnv: the name and out must not be NULL");
  }
  if (mod_node != NULL) {
    return ember_host_get_function(mod_node, func_name, EMBER_LOOKUP_SELF | EMBER_LOOKUP_IMPORTS |
                                   EMBER_LOOKUP_GLOBAL | EMBER_LOOKUP_ENV, out);
  }
  /* code linked into the program (system-lib): its module is the system library */
  if ((syslib = ember_system_lib()) == NULL) return kTvmErrorExecutorOutOfMemory;
  rc = ember_host_get_function(syslib, func_name, EMBER_LOOKUP_SELF | EMBER_LOOKUP_GLOBAL |
                               EMBER_LOOKUP_ENV, out);
  ember_object_release(&syslib->obj);
  return rc;
}

/* ---- built-in global functions ------------------------------------------------------------ */

static int ret_module(EmberModule* mod, TVMValue* ret, int* ret_code) {
  if (mod == NULL) return ember_crt_last_error_code();
  ret->v_handle = mod;
  *ret_code = kTVMModuleHandle;
  return 0;
}

static int builtin_system_lib(TVMValue* args, int* codes, int n, TVMValue* ret, int* ret_code,
                              void* res) {
  (void)args, (void)codes, (void)res;
  if (ember_arg_count("runtime.SystemLib", n, 0, 0) != 0) return kTvmErrorFunctionCallNumArgs;
  return ret_module(ember_system_lib(), ret, ret_code);
}

static EmberModule* arg_module(const char* who, TVMValue* args, int* codes, int at) {
  if (codes[at] != kTVMModuleHandle) {
    ember_crt_error(kTvmErrorGenericInvalidArgument, who);
    ember_crt_error_append(": argument ");
    ember_crt_error_append_i64(at);
    ember_crt_error_append(" must be a module");
    return NULL;
  }
  return ember_as_module(args[at].v_handle, who);
}

/* tvm.graph_executor.create(graph_json, lib, device_type, device_id) */
static int builtin_graph_create(TVMValue* args, int* codes, int n, TVMValue* ret, int* ret_code,
                                void* res) {
  const char* who = "tvm.graph_executor.create";
  EmberModule *lib, *ex = NULL;
  DLDevice dev;
  (void)res;
  if (ember_arg_count(who, n, 3, 4) != 0) return kTvmErrorFunctionCallNumArgs;
  if (codes[0] != kTVMStr || args[0].v_str == NULL) {
    return ember_crt_error(kTvmErrorGenericInvalidArgument,
                           "tvm.graph_executor.create: argument 0 must be the graph JSON (str)");
  }
  if ((lib = arg_module(who, args, codes, 1)) == NULL) return ember_crt_last_error_code();
  if (ember_arg_device(who, args, codes, n, 2, &dev) != 0) return ember_crt_last_error_code();
  if (ember_graph_executor_module(args[0].v_str, strlen(args[0].v_str), lib, dev, NULL, 0, NULL,
                                  &ex) != 0) {
    return ember_crt_last_error_code();
  }
  return ret_module(ex, ret, ret_code);
}

/* tvm.aot_executor.create(lib, device_type, device_id[, module_name]) */
static int builtin_aot_create(TVMValue* args, int* codes, int n, TVMValue* ret, int* ret_code,
                              void* res) {
  const char* who = "tvm.aot_executor.create";
  char name[EMBER_CRT_MAX_NAME_LENGTH + 32] = "tvmgen_default_get_metadata";
  EmberModule *lib, *ex = NULL;
  EmberFunction* getter = NULL;
  TVMValue meta;
  int meta_code = kTVMNullptr, rc;
  DLDevice dev;
  (void)res;
  if (ember_arg_count(who, n, 2, 4) != 0) return kTvmErrorFunctionCallNumArgs;
  if ((lib = arg_module(who, args, codes, 0)) == NULL) return ember_crt_last_error_code();
  if (ember_arg_device(who, args, codes, n, 1, &dev) != 0) return ember_crt_last_error_code();
  if (n >= 3 && codes[n - 1] == kTVMStr && args[n - 1].v_str != NULL) {
    const char* m = args[n - 1].v_str;
    size_t k, len = strlen(m);
    if (len > EMBER_CRT_MAX_NAME_LENGTH) {
      return ember_crt_error(kTvmErrorGenericInvalidArgument, "tvm.aot_executor.create: "
                             "module name too long");
    }
    memcpy(name, "tvmgen_", 7);
    for (k = 0; k < len; ++k) {
      char c = m[k];
      int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
      name[7 + k] = ok ? c : '_';
    }
    memcpy(name + 7 + len, "_get_metadata", 14);
  }
  if ((rc = ember_module_find(lib, name, 1, &getter)) != 0) {
    if (rc == 1) {
      ember_crt_error(kTvmErrorModuleFunctionNotFound, "tvm.aot_executor.create: the library "
                      "has no ");
      ember_crt_error_append_name(name, 200);
      ember_crt_error_append(" (not an AOT model, or built for another module name)");
      rc = kTvmErrorModuleFunctionNotFound;
    }
    return rc;
  }
  rc = TVMFuncCall(getter, NULL, NULL, 0, &meta, &meta_code);
  if (rc == 0 && (meta_code != kTVMStr || meta.v_str == NULL)) {
    rc = ember_crt_error(kTvmErrorExecutorBadArtifact, "tvm.aot_executor.create: the metadata "
                         "function did not return a string");
  }
  if (rc == 0) {
    rc = ember_aot_executor_module(meta.v_str, strlen(meta.v_str), lib, dev, NULL, 0, NULL, &ex);
  }
  ember_object_release(&getter->obj);
  return rc == 0 ? ret_module(ex, ret, ret_code) : rc;
}

/* runtime.ModuleLoadFromFile(path[, format]) */
static int builtin_load(TVMValue* args, int* codes, int n, TVMValue* ret, int* ret_code,
                        void* res) {
  TVMModuleHandle mod = NULL;
  (void)res;
  if (ember_arg_count("runtime.ModuleLoadFromFile", n, 1, 2) != 0) {
    return kTvmErrorFunctionCallNumArgs;
  }
  if (codes[0] != kTVMStr) {
    return ember_crt_error(kTvmErrorGenericInvalidArgument,
                           "runtime.ModuleLoadFromFile: argument 0 must be a path (str)");
  }
  if (TVMModLoadFromFile(args[0].v_str, n > 1 && codes[1] == kTVMStr ? args[1].v_str : "", &mod)) {
    return ember_crt_last_error_code();
  }
  return ret_module((EmberModule*)mod, ret, ret_code);
}

static void register_builtins(void) {
  static const struct {
    const char* name;
    TVMBackendPackedCFunc fn;
  } kBuiltins[] = {{"runtime.SystemLib", builtin_system_lib},
                   {"tvm.graph_executor.create", builtin_graph_create},
                   {"tvm.aot_executor.create", builtin_aot_create},
                   {"runtime.ModuleLoadFromFile", builtin_load}};
  uint32_t i;
  for (i = 0; i < sizeof(kBuiltins) / sizeof(kBuiltins[0]); ++i) {
    EmberFunction* f = ember_function_new(kBuiltins[i].fn, NULL, NULL, NULL);
    if (f == NULL) continue;
    register_global(kBuiltins[i].name, f, 1);
    ember_object_release(&f->obj);
  }
}
