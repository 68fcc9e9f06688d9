/*
 * host_table.h -- the table of host functions through which a library ember built
 * (backend.c) does what it cannot do alone: look functions up, call them, free handles, load
 * modules and, optionally, run its parallel loops on the host's thread pool. The Python
 * runtime (ember/runtime/_bridge.py) and the native runtime (native/src/library.c) each
 * install one with the library's EmberInstallHostTable.
 */
#ifndef EMBER_RUNTIME_HOST_TABLE_H_
#define EMBER_RUNTIME_HOST_TABLE_H_

#include <stddef.h>
#include <stdint.h>

#include "ember/c_backend_api.h"
#include "ember/c_runtime_api.h"

/* Bump when the table changes incompatibly. */
#define EMBER_HOST_TABLE_VERSION 1

/* Lookup flags of EmberHostTable.get_function (mirrored in ember/runtime/_bridge.py). */
#define EMBER_LOOKUP_SELF 1    /* the module's own functions */
#define EMBER_LOOKUP_IMPORTS 2 /* its imported modules, depth first */
#define EMBER_LOOKUP_GLOBAL 4  /* the global registry */
#define EMBER_LOOKUP_ENV 8     /* handle owned by the module (call_packed); never freed */

typedef struct EmberHostTable {
  int32_t version;
  int32_t size;
  int (*get_function)(void* mod, const char* name, int flags, TVMFunctionHandle* out);
  int (*func_call)(TVMFunctionHandle f, TVMValue* args, int* codes, int n, TVMValue* ret,
                   int* ret_code);
  int (*handle_free)(void* handle);
  const char* (*last_error)(void);
  int (*load_module)(const char* path, const char* fmt, TVMModuleHandle* out);
  /* Optional (hosts that predate it pass a shorter table): the process's one thread pool,
   * another library's EmberPoolLaunch. NULL: the library uses its own pool. */
  int (*parallel_launch)(FTVMParallelLambda flambda, void* cdata, int num_task,
                         int num_threads);
} EmberHostTable;

/* The size of the table before parallel_launch was added. */
#define EMBER_HOST_TABLE_MIN_SIZE ((int32_t)offsetof(EmberHostTable, parallel_launch))

#endif /* EMBER_RUNTIME_HOST_TABLE_H_ */
