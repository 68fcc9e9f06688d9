/*
 * library.c -- loading an exported library: check the file, dlopen it, check that ember
 * built it for this ABI, install the native host table (so its call_packed, errors and
 * module lookups go through this runtime instead of Python), then rebuild the module tree
 * of its embedded blob (factory.c). Every failure names the file and what is wrong.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "native.h"

#define LIBRARY_ABI "1"
#define HOST_TABLE_VERSION 1

/* The host table of backend.c (keep in step with ember/runtime/csrc/backend.c). */
typedef struct {
  int32_t version;
  int32_t size;
  int (*get_function)(void* mod, const char* name, int flags, TVMFunctionHandle* out);
  int (*func_call)(TVMFunctionHandle f, TVMValue* args, int* codes, int n, TVMValue* ret,
                   int* ret_code);
  int (*handle_free)(void* handle);
  const char* (*last_error)(void);
  int (*load_module)(const char* path, const char* fmt, TVMModuleHandle* out);
  int (*parallel_launch)(FTVMParallelLambda flambda, void* cdata, int num_task,
                         int num_threads);
} HostTable;

/* parallel_launch: every library runs its parallel loops on this runtime's one pool. */
static const HostTable kHostTable = {HOST_TABLE_VERSION, (int32_t)sizeof(HostTable),
                                     ember_host_get_function, TVMFuncCall, TVMObjectFree,
                                     TVMGetLastError, TVMModLoadFromFile,
                                     ember_native_pool_launch};

typedef struct {
  EmberModule base;
  void* handle;
  char* path;
  dev_t dev;
  ino_t ino;
  char prefix[EMBER_CRT_MAX_NAME_LENGTH + 1]; /* of the AOT model it holds (get_model_metadata) */
  const char* (*take_error)(void);
  int (*symbol_kind)(const void*);
} Library;

/* Libraries open now, so that loading a file twice shares one copy (and its globals). */
static Library* g_open[256];
static uint32_t g_num_open;

static int load_error(const char* path, const char* problem) {
  ember_crt_error(kTvmErrorModuleLoadFailed, "TVMModLoadFromFile: ");
  ember_crt_error_append(path);
  ember_crt_error_append(": ");
  ember_crt_error_append(problem);
  return kTvmErrorModuleLoadFailed;
}

static uint64_t read_uint(const unsigned char* p, int nbytes, int little) {
  uint64_t v = 0;
  int k;
  for (k = 0; k < nbytes; ++k) v = (v << 8) | p[little ? nbytes - 1 - k : k];
  return v;
}

/* Headers of an ELF file must lie within it: a truncated copy is caught before dlopen. */
static int check_elf(const char* path, const unsigned char* h, size_t got, uint64_t size) {
  int little = h[5] == 1, wide = h[4] == 2, k;
  uint64_t off[2], num[2], entsize[2];
  static const char* const kWhat[2] = {"program", "section"};
  if (got < 52u || (h[4] != 1 && h[4] != 2) || (h[5] != 1 && h[5] != 2) ||
      (wide && got < 64u)) {
    return load_error(path, "truncated or corrupt ELF header");
  }
  off[0] = read_uint(h + (wide ? 32 : 28), wide ? 8 : 4, little);
  off[1] = read_uint(h + (wide ? 40 : 32), wide ? 8 : 4, little);
  entsize[0] = read_uint(h + (wide ? 54 : 42), 2, little);
  num[0] = read_uint(h + (wide ? 56 : 44), 2, little);
  entsize[1] = read_uint(h + (wide ? 58 : 46), 2, little);
  num[1] = read_uint(h + (wide ? 60 : 48), 2, little);
  for (k = 0; k < 2; ++k) {
    if (off[k] + num[k] * entsize[k] > size) {
      ember_crt_error(kTvmErrorModuleLoadFailed, "TVMModLoadFromFile: ");
      ember_crt_error_append(path);
      ember_crt_error_append(": truncated: the ELF ");
      ember_crt_error_append(kWhat[k]);
      ember_crt_error_append(" headers end at byte ");
      ember_crt_error_append_u64(off[k] + num[k] * entsize[k]);
      ember_crt_error_append(" but the file has ");
      ember_crt_error_append_u64(size);
      ember_crt_error_append(" bytes");
      return kTvmErrorModuleLoadFailed;
    }
  }
  return 0;
}

static int check_file(const char* path, struct stat* st) {
  unsigned char head[64];
  size_t got;
  FILE* f;
  if (stat(path, st) != 0) return load_error(path, "no such file");
  if (!S_ISREG(st->st_mode)) return load_error(path, "not a regular file");
  if ((f = fopen(path, "rb")) == NULL) return load_error(path, "cannot be opened for reading");
  got = fread(head, 1, sizeof(head), f);
  fclose(f);
  if (got >= 4u && memcmp(head, "\177ELF", 4) == 0) {
    return check_elf(path, head, got, (uint64_t)st->st_size);
  }
  if (got >= 4u && (memcmp(head, "\xcf\xfa\xed\xfe", 4) == 0 ||
                    memcmp(head, "\xce\xfa\xed\xfe", 4) == 0)) {
    return 0;
  }
  ember_crt_error(kTvmErrorModuleLoadFailed, "TVMModLoadFromFile: ");
  ember_crt_error_append(path);
  ember_crt_error_append(": not a shared library (");
  ember_crt_error_append_u64((uint64_t)st->st_size);
  ember_crt_error_append(" bytes that do not start with an ELF or Mach-O header)");
  return kTvmErrorModuleLoadFailed;
}

/* ---- the library module --------------------------------------------------------------------- */

static const char* const kReserved[] = {"TVMBackend", "TVMAPI", "TVMFunc", "TVMMod", "TVMArray",
                                        "TVMObject", "TVMSetStream", "TVMGetLastError",
                                        "TVMPackedFuncSetLastError", "Ember", "__ember",
                                        "__tvm_module_ctx"};

static int is_reserved(const char* name) {
  size_t i;
  for (i = 0; i < sizeof(kReserved) / sizeof(kReserved[0]); ++i) {
    if (strncmp(name, kReserved[i], strlen(kReserved[i])) == 0) return 1;
  }
  return 0;
}

/* A function of this library (not a dependency's symbol, not data). */
static void* own_function(Library* lib, const char* name) {
  void* sym;
  int kind;
  if (is_reserved(name) || (sym = dlsym(lib->handle, name)) == NULL) return NULL;
  kind = lib->symbol_kind(sym);
  return kind == 1 || kind == 3 ? sym : NULL;
}

static int library_get_local(EmberModule* self, const char* name, EmberFunction** out) {
  Library* lib = (Library*)self;
  char buf[EMBER_CRT_MAX_NAME_LENGTH + 32];
  void* sym;
  if (strcmp(name, "__tvm_main__") == 0) {
    const char* entry = (const char*)dlsym(lib->handle, "__tvm_main__");
    if (entry == NULL || lib->symbol_kind(entry) != 2) return 1;
    return strcmp(entry, "__tvm_main__") == 0 ? 1 : library_get_local(self, entry, out);
  }
  if (strcmp(name, "get_model_metadata") == 0) { /* the AOT model's metadata (RFC 0046) */
    snprintf(buf, sizeof(buf), "%s_get_metadata", lib->prefix[0] ? lib->prefix : "tvmgen_default");
    name = buf;
  }
  if ((sym = own_function(lib, name)) == NULL) return 1;
  *out = ember_function_new((TVMBackendPackedCFunc)(uintptr_t)sym, NULL, &self->obj,
                            lib->take_error);
  return *out != NULL ? 0 : kTvmErrorExecutorOutOfMemory;
}

static void* library_get_symbol(EmberModule* self, const char* name) {
  return own_function((Library*)self, name);
}

static void library_release(EmberModule* self) {
  Library* lib = (Library*)self;
  uint32_t i;
  ember_registry_remove_library(self);
  ember_lock();
  for (i = 0; i < g_num_open; ++i) {
    if (g_open[i] == lib) {
      g_open[i] = g_open[--g_num_open];
      break;
    }
  }
  ember_unlock();
  dlclose(lib->handle);
  free(lib->path);
}

void ember_library_set_model_prefix(EmberModule* mod, const char* prefix) {
  Library* lib = (Library*)mod;
  size_t n = strlen(prefix);
  if (mod->get_local == library_get_local && n < sizeof(lib->prefix)) {
    memcpy(lib->prefix, prefix, n + 1);
  }
}

/* Check the library's ABI and hook it up to this runtime. */
static int attach(Library* lib, const char* path) {
  const char* info = (const char*)dlsym(lib->handle, "__ember_library_info");
  const char* abi;
  int (*install)(const HostTable*, void*);
  void* (*syslib)(const char*);
  if (info == NULL) {
    return load_error(path, "not an ember library (no __ember_library_info symbol); build "
                      "libraries with export_library or ember.contrib.cc.create_shared");
  }
  abi = strstr(info, "abi=");
  if (strncmp(info, "EMBERLIB", 8) != 0 || abi == NULL ||
      strncmp(abi + 4, LIBRARY_ABI " ", 2) != 0) {
    ember_crt_error(kTvmErrorModuleLoadFailed, "TVMModLoadFromFile: ");
    ember_crt_error_append(path);
    ember_crt_error_append(": built for another ember library ABI (");
    ember_crt_error_append_name(info, 40);
    ember_crt_error_append("), this runtime needs ABI " LIBRARY_ABI "; rebuild it");
    return kTvmErrorModuleLoadFailed;
  }
  *(void**)&install = dlsym(lib->handle, "EmberInstallHostTable");
  *(void**)&lib->take_error = dlsym(lib->handle, "EmberTakeLastError");
  *(void**)&lib->symbol_kind = dlsym(lib->handle, "EmberSymbolKind");
  *(void**)&syslib = dlsym(lib->handle, "EmberSystemLibLookup");
  if (install == NULL || lib->take_error == NULL || lib->symbol_kind == NULL) {
    return load_error(path, "the ember backend functions (EmberInstallHostTable, ...) are "
                      "missing; rebuild the library");
  }
  if (install(&kHostTable, lib) != 0) {
    ember_crt_error(kTvmErrorModuleLoadFailed, "TVMModLoadFromFile: ");
    ember_crt_error_append(path);
    ember_crt_error_append(": ");
    ember_crt_error_append(lib->take_error());
    return kTvmErrorModuleLoadFailed;
  }
  if (syslib != NULL) ember_registry_add_library(&lib->base, syslib, lib->take_error);
  return 0;
}

static Library* find_open(const struct stat* st) {
  uint32_t i;
  Library* found = NULL;
  ember_lock();
  for (i = 0; i < g_num_open && found == NULL; ++i) {
    if (g_open[i]->dev == st->st_dev && g_open[i]->ino == st->st_ino) found = g_open[i];
  }
  if (found != NULL) ember_object_retain(&found->base.obj);
  ember_unlock();
  return found;
}

int ember_library_load(const char* path, EmberModule** out) {
  struct stat st;
  char* full;
  Library* lib;
  int rc;
  if ((rc = check_file(path, &st)) != 0) return rc;
  if ((lib = find_open(&st)) != NULL) {
    *out = &lib->base;
    return 0;
  }
  if ((lib = (Library*)calloc(1, sizeof(Library))) == NULL ||
      (lib->path = ember_strdup(path, strlen(path))) == NULL) {
    free(lib);
    return kTvmErrorExecutorOutOfMemory;
  }
  ember_module_init(&lib->base, "library", library_get_local, library_release);
  lib->base.get_symbol = library_get_symbol;
  lib->dev = st.st_dev;
  lib->ino = st.st_ino;
  /* an absolute path: dlopen searches the library path for a bare name ("m.so") */
  full = realpath(path, NULL);
  lib->handle = full != NULL ? dlopen(full, RTLD_NOW | RTLD_LOCAL) : NULL;
  free(full);
  if (lib->handle == NULL) {
    const char* why = dlerror();
    ember_crt_error(kTvmErrorModuleLoadFailed, "TVMModLoadFromFile: ");
    ember_crt_error_append(path);
    ember_crt_error_append(": cannot be loaded as a shared library: ");
    ember_crt_error_append(why != NULL ? why : "dlopen failed");
    free(lib->path);
    free(lib);
    return kTvmErrorModuleLoadFailed;
  }
  ember_lock();
  if (g_num_open < sizeof(g_open) / sizeof(g_open[0])) g_open[g_num_open++] = lib;
  ember_unlock();
  if ((rc = attach(lib, path)) != 0) {
    ember_object_release(&lib->base.obj);
    return rc;
  }
  *out = &lib->base;
  return 0;
}

/* ---- TVMModLoadFromFile --------------------------------------------------------------------- */

static int blob_of(Library* lib, const char* path, const uint8_t** blob, uint64_t* size) {
  const uint64_t* size_sym = (const uint64_t*)dlsym(lib->handle, "__ember_dev_mblob_size");
  *blob = (const uint8_t*)dlsym(lib->handle, "__ember_dev_mblob");
  if (*blob == NULL || size_sym == NULL) {
    *blob = NULL;
    return 0;
  }
  if (lib->symbol_kind(*blob) != 2 || lib->symbol_kind(size_sym) != 2) {
    return load_error(path, "__ember_dev_mblob is not data of this library");
  }
  *size = *size_sym;
  return 0;
}

int TVMModLoadFromFile(const char* file_name, const char* format, TVMModuleHandle* out) {
  EmberModule* lib = NULL;
  const uint8_t* blob;
  uint64_t size = 0;
  int rc;
  if (file_name == NULL || out == NULL) {
    return ember_crt_error(kTvmErrorGenericInvalidArgument,
                           "TVMModLoadFromFile: file_name and out must not be NULL");
  }
  *out = NULL;
  if (format != NULL && format[0] != '\0' && strcmp(format, "so") != 0 &&
      strcmp(format, "dll") != 0 && strcmp(format, "dylib") != 0) {
    ember_crt_error(kTvmErrorModuleLoadFailed, "TVMModLoadFromFile: ");
    ember_crt_error_append(file_name);
    ember_crt_error_append(": format ");
    ember_crt_error_append_name(format, 32);
    ember_crt_error_append(" is not supported by the native runtime (it loads shared libraries:"
                           " \"so\"; link a .tar's objects with the system compiler first)");
    return kTvmErrorModuleLoadFailed;
  }
  if ((rc = ember_library_load(file_name, &lib)) != 0) return rc;
  if ((rc = blob_of((Library*)lib, file_name, &blob, &size)) == 0) {
    if (blob == NULL) {
      *out = lib;
      return 0;
    }
    rc = ember_blob_load(lib, file_name, blob, size, (EmberModule**)out);
  }
  ember_object_release(&lib->obj);
  return rc;
}
