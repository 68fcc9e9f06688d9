/*
 * library.c -- loading an exported library: check the file, dlopen it, check that ember
 * built it for this ABI, install the native host table (so its call_packed, errors and
 * module lookups go through this runtime instead of Python), then rebuild the module tree
 * of its embedded blob (factory.c). Every failure names the file and what is wrong.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "native.h"

#define LIBRARY_ABI "1"

/* parallel_launch: every library runs its parallel loops on this runtime's one pool. */
static const EmberHostTable kHostTable = {EMBER_HOST_TABLE_VERSION,
                                          (int32_t)sizeof(EmberHostTable),
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

/* ---- CPU features ----------------------------------------------------------------------------
 * Every library ember builds records the CPU features its code was compiled for, as the string
 * "EMBER-CPU/1 arch=<flags> features=<cpuinfo names>" in its data (ember/runtime/cpu_features.py).
 * The file is searched for it before dlopen, since the library's constructors may already use
 * the instructions; a library without a record (older ember) is loaded as before. */

#define CPU_RECORD_MAGIC "EMBER-CPU/1 "
#define CPU_RECORD_MAX 4096

/* Whether the host has the feature named as /proc/cpuinfo does; 1 when it cannot be told. */
static int cpuinfo_has(const char* name, size_t len) {
  static char flags[8192];
  static int state; /* 0: not read, 1: read, -1: unreadable */
  const char* p;
  if (state == 0) {
    FILE* f = fopen("/proc/cpuinfo", "r");
    char line[8192];
    state = -1;
    while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
      if (strncmp(line, "flags", 5) == 0 || strncmp(line, "Features", 8) == 0) {
        const char* colon = strchr(line, ':');
        snprintf(flags, sizeof(flags), " %s", colon != NULL ? colon + 1 : "");
        flags[strcspn(flags, "\n")] = ' ';
        state = 1;
        break;
      }
    }
    if (f != NULL) fclose(f);
  }
  if (state != 1) return 1;
  for (p = strstr(flags, " "); p != NULL; p = strstr(p + 1, " ")) {
    if (strncmp(p + 1, name, len) == 0 && (p[1 + len] == ' ' || p[1 + len] == '\0')) return 1;
  }
  return 0;
}

static int host_has(const char* name, size_t len) {
#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
  /* cpuid (with the OS's XSAVE support), for the x86 features the compiler can ask about */
  static const char* const kNames[] = {"sse2", "pni", "ssse3", "sse4_1", "sse4_2", "popcnt",
                                       "avx", "avx2", "fma", "bmi1", "bmi2", "avx512f",
                                       "avx512cd", "avx512bw", "avx512dq", "avx512vl"};
  int have[sizeof(kNames) / sizeof(kNames[0])];
  size_t i;
  __builtin_cpu_init();
  have[0] = __builtin_cpu_supports("sse2");
  have[1] = __builtin_cpu_supports("sse3");
  have[2] = __builtin_cpu_supports("ssse3");
  have[3] = __builtin_cpu_supports("sse4.1");
  have[4] = __builtin_cpu_supports("sse4.2");
  have[5] = __builtin_cpu_supports("popcnt");
  have[6] = __builtin_cpu_supports("avx");
  have[7] = __builtin_cpu_supports("avx2");
  have[8] = __builtin_cpu_supports("fma");
  have[9] = __builtin_cpu_supports("bmi");
  have[10] = __builtin_cpu_supports("bmi2");
  have[11] = __builtin_cpu_supports("avx512f");
  have[12] = __builtin_cpu_supports("avx512cd");
  have[13] = __builtin_cpu_supports("avx512bw");
  have[14] = __builtin_cpu_supports("avx512dq");
  have[15] = __builtin_cpu_supports("avx512vl");
  for (i = 0; i < sizeof(kNames) / sizeof(kNames[0]); ++i) {
    if (strlen(kNames[i]) == len && strncmp(kNames[i], name, len) == 0) return have[i] != 0;
  }
#endif
  return cpuinfo_has(name, len);
}

static const char* find_bytes(const char* hay, size_t n, const char* needle, size_t m) {
  size_t i;
  for (i = 0; m <= n && i <= n - m; ++i) {
    const char* hit = (const char*)memchr(hay + i, needle[0], n - m + 1 - i);
    if (hit == NULL) return NULL;
    i = (size_t)(hit - hay);
    if (memcmp(hit, needle, m) == 0) return hit;
  }
  return NULL;
}

/* Appends to `missing` (comma-separated) the features of one record the host lacks. */
static void record_missing(const char* rec, size_t n, char* missing, size_t cap, char* arch,
                           size_t arch_cap) {
  const char* end = rec + n;
  const char* f = find_bytes(rec, n, " features=", 10);
  const char* a = find_bytes(rec, n, "arch=", 5);
  if (a != NULL && arch[0] == '\0') {
    size_t len = strcspn(a + 5, " ");
    if (len >= arch_cap) len = arch_cap - 1;
    memcpy(arch, a + 5, len);
    arch[len] = '\0';
  }
  if (f == NULL) return;
  for (f += 10; f < end && *f != ' ';) {
    size_t len = 0;
    while (f + len < end && f[len] != ',' && f[len] != ' ') ++len;
    if (len > 0 && !host_has(f, len) && strlen(missing) + len + 3 < cap) {
      if (missing[0] != '\0') strcat(missing, ", ");
      strncat(missing, f, len);
    }
    f += len + (f + len < end && f[len] == ',');
  }
}

/* Refuse a library whose recorded CPU features this host lacks (before anything of it runs). */
static int check_cpu(const char* path, const struct stat* st) {
  char missing[512] = "", arch[128] = "";
  const char* data;
  const char* p;
  size_t size = (size_t)st->st_size;
  int fd;
  if (size == 0 || (fd = open(path, O_RDONLY)) < 0) return 0;
  data = (const char*)mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (data == (const char*)MAP_FAILED) return 0;
  for (p = data; (p = find_bytes(p, size - (size_t)(p - data), CPU_RECORD_MAGIC,
                                 sizeof(CPU_RECORD_MAGIC) - 1)) != NULL; ++p) {
    size_t left = size - (size_t)(p - data);
    const char* nul = (const char*)memchr(p, '\0', left < CPU_RECORD_MAX ? left : CPU_RECORD_MAX);
    record_missing(p, nul != NULL ? (size_t)(nul - p) : (left < CPU_RECORD_MAX ? left
                                                                              : CPU_RECORD_MAX),
                   missing, sizeof(missing), arch, sizeof(arch));
  }
  munmap((void*)data, size);
  if (missing[0] == '\0') return 0;
  ember_crt_error(kTvmErrorModuleLoadFailed, "TVMModLoadFromFile: ");
  ember_crt_error_append(path);
  ember_crt_error_append(": this library was compiled for a CPU with ");
  ember_crt_error_append(missing);
  ember_crt_error_append(" (compiler flags ");
  ember_crt_error_append(arch[0] != '\0' ? arch : "?");
  ember_crt_error_append("), which this machine does not have; running it would crash with an "
                         "illegal instruction. Rebuild it for this machine: target 'llvm' (the "
                         "host CPU), a -mcpu this CPU runs (e.g. 'llvm -mcpu=haswell'), or "
                         "EMBER_MARCH=x86-64-v3 (AVX2) / x86-64-v2 (SSE) with a target without "
                         "-mcpu");
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
  int (*install)(const EmberHostTable*, void*);
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
  if ((rc = check_cpu(path, &st)) != 0) return rc;
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
