/*
 * native.h -- the internals of libember_runtime, ember's native hosted runtime (no Python).
 *
 * Handles are objects with a tag and a reference count: an EmberFunction (a C PackedFunc
 * with its resource and the object that keeps it valid) or an EmberModule (a loaded library,
 * an executor factory, an executor, the system library). Every entry point checks the tag of
 * the handles it receives, so a NULL or wrong-kind handle is an error code, not a crash.
 *
 * Errors use the C runtime's message builder (ember/crt/src/backend/internal.h and
 * error_message.c, compiled here over a thread-local buffer), so the shared executor sources
 * report the same way under both runtimes.
 */
#ifndef EMBER_NATIVE_NATIVE_H_
#define EMBER_NATIVE_NATIVE_H_

#include <stddef.h>
#include <stdint.h>

#include "ember/c_runtime_api.h"
#include "ember/crt/aot_executor.h"
#include "ember/crt/graph_executor.h"

#include "../../../crt/src/backend/internal.h"
#include "../../csrc/host_table.h" /* EmberHostTable and its lookup flags */

#define EMBER_TAG_FUNCTION 0x454d4246u /* "EMBF" */
#define EMBER_TAG_MODULE 0x454d424du   /* "EMBM" */
#define EMBER_TAG_DEAD 0xdeadbeefu


typedef struct EmberObject {
  uint32_t tag;
  int32_t refs;
  void (*destroy)(struct EmberObject* self);
} EmberObject;

typedef struct EmberFunction {
  EmberObject obj;
  TVMBackendPackedCFunc fn;
  void* resource;                  /* passed as resource_handle */
  void (*finalize)(void* resource);
  EmberObject* owner;              /* a reference that keeps fn valid, or NULL */
  const char* (*take_error)(void); /* the library's own error, for its functions */
} EmberFunction;

typedef struct EmberModule EmberModule;
/* 0 and *out (a new reference) if found, 1 if not found, another code with the error set. */
typedef int (*EmberGetLocal)(EmberModule* self, const char* name, EmberFunction** out);

typedef struct {
  char* name;
  EmberFunction* func;
} EmberEnvEntry;

struct EmberModule {
  EmberObject obj;
  const char* type_key;
  EmberGetLocal get_local;
  void (*release)(EmberModule* self); /* frees what the subtype owns */
  void* (*get_symbol)(EmberModule* self, const char* name); /* plain C symbols, or NULL */
  EmberModule** imports;
  uint32_t num_imports, cap_imports;
  EmberEnvEntry* env; /* call_packed lookups from compiled code, by name */
  uint32_t num_env, cap_env;
};

/* object.c */
void ember_object_retain(EmberObject* obj);
void ember_object_release(EmberObject* obj);
EmberFunction* ember_function_new(TVMBackendPackedCFunc fn, void* resource, EmberObject* owner,
                                  const char* (*take_error)(void));
EmberFunction* ember_as_function(void* handle, const char* who);
EmberModule* ember_as_module(void* handle, const char* who);
void ember_module_init(EmberModule* mod, const char* type_key, EmberGetLocal get_local,
                       void (*release)(EmberModule*));
int ember_module_import(EmberModule* mod, EmberModule* dep);
/* Own functions, then imports depth first when query_imports. 0 found, 1 not, else error. */
int ember_module_find(EmberModule* mod, const char* name, int query_imports,
                      EmberFunction** out);
void* ember_module_symbol(EmberModule* mod, const char* name);

/* registry.c */
int ember_registry_find(const char* name, EmberFunction** out);
int ember_host_get_function(void* mod, const char* name, int flags, TVMFunctionHandle* out);
EmberModule* ember_system_lib(void);
void ember_registry_add_library(EmberModule* lib, void* (*lookup)(const char*),
                                const char* (*take_error)(void));
void ember_registry_remove_library(EmberModule* lib);
void ember_lock(void);
void ember_unlock(void);

/* library.c */
int ember_library_load(const char* path, EmberModule** out);
/* Tell a loaded library which AOT model (its symbol prefix) it holds, for get_model_metadata. */
void ember_library_set_model_prefix(EmberModule* lib, const char* prefix);

/* factory.c */
int ember_blob_load(EmberModule* lib, const char* path, const uint8_t* blob, uint64_t size,
                    EmberModule** out);

/* executors.c */
int ember_graph_executor_module(const char* json, size_t len, EmberModule* lib, DLDevice dev,
                                const void* params, size_t params_size, EmberObject* keep,
                                EmberModule** out);
int ember_aot_executor_module(const char* metadata, size_t len, EmberModule* lib, DLDevice dev,
                              const void* params, size_t params_size, EmberObject* keep,
                              EmberModule** out);
/* Argument helpers of the packed methods. */
int ember_arg_device(const char* who, TVMValue* args, int* codes, int n, int at, DLDevice* dev);
int ember_arg_count(const char* who, int n, int lo, int hi);

/* backend.c: the thread pool's launch, for the host table of loaded libraries. */
int ember_native_pool_launch(FTVMParallelLambda flambda, void* cdata, int num_task,
                             int num_threads);

/* error.c */
char* ember_strdup(const char* s, size_t n);

#endif /* EMBER_NATIVE_NATIVE_H_ */
