/*
 * backend.c -- the backend API compiled into every library ember builds.
 *
 * It implements c_backend_api.h (workspace, errors, call_packed, parallel launch) and the
 * hosted half of c_runtime_api.h. Everything that needs the Python runtime (looking up
 * functions, calling Python, loading modules) goes through a table of host function
 * pointers that ember's loader installs with EmberInstallHostTable when it opens the
 * library; without it those calls fail with a message instead of crashing.
 *
 * Each library has its own copy of this file (and of its globals): the loader opens
 * libraries RTLD_LOCAL and links them with -Bsymbolic where the linker supports it.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ember/c_runtime_api.h"
#include "host_table.h"
#include "thread_pool.h"

#if defined(__GLIBC__)
#include <link.h> /* ElfW, for EmberSymbolKind */
#endif

#if defined(_MSC_VER)
#define EMBER_TLS __declspec(thread)
#else
#define EMBER_TLS __thread
#endif

/* Bump when the host table or the exported Ember* functions change incompatibly. */
#define EMBER_ABI_VERSION 1
#define EMBER_ERROR_SIZE 4096

/* "EMBERLIB abi=<n>": load_module rejects shared libraries without it. */
EMBER_DLL const char __ember_library_info[] = "EMBERLIB abi=1 dlpack=80";
/* Weak so generated code that defines its own __tvm_module_ctx (as TVM's does) still links. */
EMBER_DLL __attribute__((weak)) void* __tvm_module_ctx = NULL;

static EmberHostTable g_host;
static EMBER_TLS char g_last_error[EMBER_ERROR_SIZE];
static EMBER_TLS char g_taken_error[EMBER_ERROR_SIZE];

static void set_error(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(g_last_error, EMBER_ERROR_SIZE, fmt, ap);
  va_end(ap);
}

void TVMPackedFuncSetLastError(const char* msg) { set_error("%s", msg ? msg : ""); }
void TVMAPISetLastError(const char* msg) { set_error("%s", msg ? msg : ""); }
const char* TVMGetLastError(void) { return g_last_error; }

/* The error of this thread, then cleared, so that a stale message is never reported twice. */
EMBER_DLL const char* EmberTakeLastError(void) {
  memcpy(g_taken_error, g_last_error, EMBER_ERROR_SIZE);
  g_last_error[0] = '\0';
  return g_taken_error;
}

EMBER_DLL int EmberLibraryABIVersion(void) { return EMBER_ABI_VERSION; }

EMBER_DLL int EmberInstallHostTable(const EmberHostTable* table, void* module_ctx) {
  if (table == NULL || table->version != EMBER_HOST_TABLE_VERSION ||
      table->size < EMBER_HOST_TABLE_MIN_SIZE) {
    set_error("EmberInstallHostTable: host table version mismatch (library ABI %d)",
              EMBER_ABI_VERSION);
    return -1;
  }
  memset(&g_host, 0, sizeof g_host);
  memcpy(&g_host, table, table->size < (int32_t)sizeof g_host ? (size_t)table->size
                                                               : sizeof g_host);
  __tvm_module_ctx = module_ctx;
  return 0;
}

/*
 * What addr is, as seen from this library: 0 = not in this library (e.g. a libc symbol that
 * dlsym found through a dependency), 1 = a function, 2 = data, 3 = in this library but of
 * unknown kind (no symbol table access). Lets the loader refuse to call data or foreign code.
 */
EMBER_DLL int EmberSymbolKind(const void* addr) {
  Dl_info mine, theirs;
  if (!dladdr((const void*)&EmberSymbolKind, &mine)) return 0;
#if defined(__GLIBC__)
  {
    const ElfW(Sym)* sym = NULL;
    if (!dladdr1(addr, &theirs, (void**)&sym, RTLD_DL_SYMENT)) return 0;
    if (theirs.dli_fbase != mine.dli_fbase) return 0;
    if (sym == NULL || theirs.dli_saddr != addr) return 3;
    switch (sym->st_info & 0xf) { /* ELF{32,64}_ST_TYPE */
      case STT_FUNC: return 1;
      case STT_OBJECT: return 2;
      default: return 3;
    }
  }
#else
  if (!dladdr(addr, &theirs) || theirs.dli_fbase != mine.dli_fbase) return 0;
  return 3;
#endif
}

/* ---- workspace -------------------------------------------------------------------------
 * Kernels take their scratch (packed weight panels, padded rows) with TVMBackendAllocWorkspace
 * on every call, often in each task: a malloc and a free of tens of kilobytes each, and the
 * allocator's consolidation now and then, a microsecond or more of a small model's call. So
 * a freed block goes back to a small cache that the next allocation of about its size takes
 * from (blocks up to EMBER_WS_CACHE_MAX_BLOCK, at most EMBER_WS_CACHE_SLOTS of them and
 * EMBER_WS_CACHE_MAX_BYTES in all, under one lock: the library's threads share it). A block
 * carries its capacity in a header of EMBER_WS_HEADER bytes before the pointer it hands out,
 * which stays 64-byte aligned. The cache is freed when the library is unloaded. */
#define EMBER_WS_HEADER 64
#define EMBER_WS_CACHE_SLOTS 16
#define EMBER_WS_CACHE_MAX_BLOCK ((uint64_t)16 << 20)
#define EMBER_WS_CACHE_MAX_BYTES ((uint64_t)64 << 20)

static void* g_ws_cache[EMBER_WS_CACHE_SLOTS]; /* raw blocks (their header first) */
static int g_ws_cached;
static uint64_t g_ws_bytes; /* the capacity of the cached blocks, together */
static pthread_mutex_t g_ws_mu = PTHREAD_MUTEX_INITIALIZER;

static uint64_t ember_ws_capacity(const void* raw) { return *(const uint64_t*)raw; }

/* A cached block of at least `bytes` and at most twice that (a small request does not pin a
 * large block), taken out of the cache; NULL if none. */
static void* ember_ws_take(uint64_t bytes) {
  void* found = NULL;
  int i, best = -1;
  pthread_mutex_lock(&g_ws_mu);
  for (i = 0; i < g_ws_cached; ++i) {
    uint64_t cap = ember_ws_capacity(g_ws_cache[i]);
    if (cap >= bytes && cap / 2 <= bytes &&
        (best < 0 || cap < ember_ws_capacity(g_ws_cache[best]))) {
      best = i;
    }
  }
  if (best >= 0) {
    found = g_ws_cache[best];
    g_ws_cache[best] = g_ws_cache[--g_ws_cached];
    g_ws_bytes -= ember_ws_capacity(found);
  }
  pthread_mutex_unlock(&g_ws_mu);
  return found;
}

/* Keep raw block `raw` for a later allocation; 0 if the cache is full of blocks at least as
 * large or would pass its byte limit (the caller frees it), else 1 (a smaller block it
 * displaced is freed here). */
static int ember_ws_keep(void* raw) {
  uint64_t cap = ember_ws_capacity(raw);
  void* evicted = NULL;
  int i, smallest = 0, kept = 1;
  if (cap > EMBER_WS_CACHE_MAX_BLOCK) return 0;
  pthread_mutex_lock(&g_ws_mu);
  if (g_ws_bytes + cap > EMBER_WS_CACHE_MAX_BYTES) {
    kept = 0;
  } else if (g_ws_cached < EMBER_WS_CACHE_SLOTS) {
    g_ws_cache[g_ws_cached++] = raw;
    g_ws_bytes += cap;
  } else {
    for (i = 1; i < g_ws_cached; ++i) {
      if (ember_ws_capacity(g_ws_cache[i]) < ember_ws_capacity(g_ws_cache[smallest])) {
        smallest = i;
      }
    }
    if (ember_ws_capacity(g_ws_cache[smallest]) < cap) {
      evicted = g_ws_cache[smallest];
      g_ws_cache[smallest] = raw;
      g_ws_bytes += cap - ember_ws_capacity(evicted);
    } else {
      kept = 0;
    }
  }
  pthread_mutex_unlock(&g_ws_mu);
  free(evicted);
  return kept;
}

__attribute__((destructor)) static void ember_ws_release(void) {
  while (g_ws_cached > 0) free(g_ws_cache[--g_ws_cached]);
  g_ws_bytes = 0;
}

/* A child of fork() has only the forking thread: another may have held the lock, mid-update.
 * The child starts with an empty cache (what was cached stays allocated, unused). */
static void ember_ws_after_fork(void) {
  pthread_mutex_init(&g_ws_mu, NULL);
  g_ws_cached = 0;
  g_ws_bytes = 0;
}

__attribute__((constructor)) static void ember_ws_register_fork(void) {
  pthread_atfork(NULL, NULL, ember_ws_after_fork);
}

/* Blocks the workspace cache holds now (for tests). */
EMBER_DLL int EmberWorkspaceCached(void) {
  int n;
  pthread_mutex_lock(&g_ws_mu);
  n = g_ws_cached;
  pthread_mutex_unlock(&g_ws_mu);
  return n;
}

void* TVMBackendAllocWorkspace(int device_type, int device_id, uint64_t nbytes,
                               int dtype_code_hint, int dtype_bits_hint) {
  void* raw = NULL;
  /* A multiple of the alignment; 0 bytes still gives a unique pointer. */
  uint64_t bytes = ((nbytes + 63) & ~(uint64_t)63) + (nbytes == 0 ? 64 : 0);
  (void)dtype_code_hint;
  (void)dtype_bits_hint;
  if (device_type != kDLCPU) {
    set_error("TVMBackendAllocWorkspace: device type %d (id %d) is not supported; ember "
              "allocates on the CPU (device type 1) only", device_type, device_id);
    return NULL;
  }
  if (nbytes > ((uint64_t)1 << 62)) {
    set_error("TVMBackendAllocWorkspace: %llu bytes is more than any allocation can hold",
              (unsigned long long)nbytes);
    return NULL;
  }
  raw = ember_ws_take(bytes);
  if (raw == NULL) {
    if (posix_memalign(&raw, 64, (size_t)(bytes + EMBER_WS_HEADER)) != 0) {
      set_error("TVMBackendAllocWorkspace: out of memory allocating %llu bytes",
                (unsigned long long)nbytes);
      return NULL;
    }
    *(uint64_t*)raw = bytes;
  }
  return (char*)raw + EMBER_WS_HEADER;
}

int TVMBackendFreeWorkspace(int device_type, int device_id, void* ptr) {
  void* raw;
  (void)device_type;
  (void)device_id;
  if (ptr == NULL) return 0;
  raw = (char*)ptr - EMBER_WS_HEADER;
  if (!ember_ws_keep(raw)) free(raw);
  return 0;
}

/* ---- functions of the environment (forwarded to the host) -------------------------------- */

static int no_host(const char* what) {
  set_error("%s: no ember runtime is attached to this library (load it with "
            "ember.runtime.load_module)", what);
  return -1;
}

static int host_lookup(void* mod, const char* name, int flags, TVMFunctionHandle* out,
                       const char* what) {
  if (g_host.get_function == NULL) return no_host(what);
  if (name == NULL || out == NULL) {
    set_error("%s: function name and output must not be NULL", what);
    return -1;
  }
  *out = NULL;
  if (g_host.get_function(mod, name, flags, out) != 0) {
    const char* msg = g_host.last_error();
    set_error("%s", msg ? msg : "function lookup failed");
    return -1;
  }
  return 0;
}

int TVMBackendGetFuncFromEnv(void* mod_node, const char* func_name, TVMFunctionHandle* out) {
  int flags = EMBER_LOOKUP_SELF | EMBER_LOOKUP_IMPORTS | EMBER_LOOKUP_GLOBAL | EMBER_LOOKUP_ENV;
  return host_lookup(mod_node, func_name, flags, out, "TVMBackendGetFuncFromEnv");
}

int TVMFuncGetGlobal(const char* name, TVMFunctionHandle* out) {
  return host_lookup(NULL, name, EMBER_LOOKUP_GLOBAL, out, "TVMFuncGetGlobal");
}

int TVMModGetFunction(TVMModuleHandle mod, const char* func_name, int query_imports,
                      TVMFunctionHandle* out) {
  int flags = EMBER_LOOKUP_SELF | (query_imports ? EMBER_LOOKUP_IMPORTS : 0);
  return host_lookup(mod, func_name, flags, out, "TVMModGetFunction");
}

int TVMFuncCall(TVMFunctionHandle func, TVMValue* arg_values, int* type_codes, int num_args,
                TVMValue* ret_val, int* ret_type_code) {
  int rc;
  if (g_host.func_call == NULL) return no_host("TVMFuncCall");
  if (ret_type_code != NULL) *ret_type_code = kTVMNullptr;
  rc = g_host.func_call(func, arg_values, type_codes, num_args, ret_val, ret_type_code);
  if (rc != 0) {
    /* The host's message (e.g. "ValueError: ...") becomes this library's error. */
    const char* msg = g_host.last_error();
    set_error("%s", msg && msg[0] ? msg : "TVMFuncCall: the called function failed");
  }
  return rc;
}

static int host_free(void* handle, const char* what) {
  if (handle == NULL) return 0;
  if (g_host.handle_free == NULL) return no_host(what);
  return g_host.handle_free(handle);
}

int TVMFuncFree(TVMFunctionHandle func) { return host_free(func, "TVMFuncFree"); }
int TVMModFree(TVMModuleHandle mod) { return host_free(mod, "TVMModFree"); }
int TVMObjectFree(TVMObjectHandle obj) { return host_free(obj, "TVMObjectFree"); }

int TVMModLoadFromFile(const char* file_name, const char* format, TVMModuleHandle* out) {
  if (g_host.load_module == NULL) return no_host("TVMModLoadFromFile");
  if (g_host.load_module(file_name, format ? format : "", out) != 0) {
    const char* msg = g_host.last_error();
    set_error("%s", msg ? msg : "TVMModLoadFromFile failed");
    return -1;
  }
  return 0;
}

/* ---- tensors ----------------------------------------------------------------------------- */

int TVMArrayAlloc(const int64_t* shape, int ndim, int dtype_code, int dtype_bits,
                  int dtype_lanes, int device_type, int device_id, TVMArrayHandle* out) {
  DLTensor* t;
  uint64_t count = 1;
  int i;
  if (ndim < 0 || (ndim > 0 && shape == NULL) || out == NULL) {
    set_error("TVMArrayAlloc: invalid arguments (ndim %d)", ndim);
    return -1;
  }
  for (i = 0; i < ndim; ++i) count *= (uint64_t)shape[i];
  t = (DLTensor*)calloc(1, sizeof(DLTensor) + sizeof(int64_t) * (size_t)(ndim ? ndim : 1));
  if (t == NULL) return set_error("TVMArrayAlloc: out of memory"), -1;
  t->shape = (int64_t*)(t + 1);
  if (ndim) memcpy(t->shape, shape, sizeof(int64_t) * (size_t)ndim);
  t->ndim = ndim;
  t->dtype.code = (uint8_t)dtype_code;
  t->dtype.bits = (uint8_t)dtype_bits;
  t->dtype.lanes = (uint16_t)dtype_lanes;
  t->device.device_type = (DLDeviceType)device_type;
  t->device.device_id = device_id;
  t->data = TVMBackendAllocWorkspace(device_type, device_id,
                                     count * (uint64_t)((dtype_bits * dtype_lanes + 7) / 8),
                                     dtype_code, dtype_bits);
  if (t->data == NULL) return free(t), -1;
  *out = t;
  return 0;
}

int TVMArrayFree(TVMArrayHandle handle) {
  if (handle != NULL) TVMBackendFreeWorkspace(kDLCPU, 0, handle->data);
  free(handle);
  return 0;
}

/* ---- parallel launch --------------------------------------------------------------------- */

/* The process's pool when the host shares one (EmberHostTable.parallel_launch), else ours. */
int TVMBackendParallelLaunch(FTVMParallelLambda flambda, void* cdata, int num_task) {
  EmberLaunchContext ctx;
  int rc;
  if (flambda == NULL) {
    set_error("TVMBackendParallelLaunch: the task function is NULL");
    return -1;
  }
  rc = ember_pool_launch_from(g_host.parallel_launch, flambda, cdata, num_task, &ctx);
  if (rc == 0) return 0;
  if (ctx.error[0] != '\0') set_error("%s", ctx.error);
  if (g_last_error[0] == '\0') {
    set_error("TVMBackendParallelLaunch: a task returned %d without setting an error message",
              rc);
  }
  return -1;
}

/* This library's pool, for the host to share with the libraries it loads after this one. */
EMBER_DLL int EmberPoolLaunch(FTVMParallelLambda flambda, void* cdata, int num_task,
                              int num_threads) {
  return ember_pool_launch(flambda, cdata, num_task, num_threads);
}

/* Worker threads this library's pool has started (they live as long as the process). */
EMBER_DLL int EmberPoolNumWorkers(void) { return ember_pool_num_workers(); }

/* This library's pool's counters (thread_pool.h's EMBER_POOL_STAT_*: launches, tasks, tasks
 * stolen from a late thread, caller sleeps, worker sleeps) into out[0 .. n); returns how many
 * the pool keeps. NULL out with n 0 just asks the count. */
EMBER_DLL int EmberPoolStats(int64_t* out, int n) {
  return ember_pool_stats(out, out != NULL ? n : 0);
}

/* Threads (the caller included) of the launches that the calling thread makes from now on;
 * n <= 0 only asks. Returns the count in force before the call. The Python runtime sets it
 * around each run of a model compiled with a thread count. */
EMBER_DLL int EmberSetNumThreads(int n) { return ember_pool_set_num_threads(n); }

/* Wait until every task of the launch reaches the barrier (all its tasks run at once). */
int TVMBackendParallelBarrier(int task_id, TVMParallelGroupEnv* penv) {
  return ember_pool_barrier_of(task_id, penv);
}

/* ---- system library --------------------------------------------------------------------- */

/* Symbols this library registered from its constructors (built with system-lib): the host
 * (ember.runtime.system_lib(), or the native runtime's "runtime.SystemLib") asks for them
 * by name with EmberSystemLibLookup. Constructors run single-threaded, at load. */
typedef struct {
  const char* name;
  void* ptr;
} EmberSymbol;
static EmberSymbol* g_syslib;
static size_t g_syslib_len, g_syslib_cap;

int TVMBackendRegisterSystemLibSymbol(const char* name, void* ptr) {
  if (name == NULL || ptr == NULL) {
    set_error("TVMBackendRegisterSystemLibSymbol: name and pointer must not be NULL");
    return -1;
  }
  if (g_syslib_len == g_syslib_cap) {
    size_t cap = g_syslib_cap ? 2 * g_syslib_cap : 16;
    EmberSymbol* grown = (EmberSymbol*)realloc(g_syslib, cap * sizeof(EmberSymbol));
    if (grown == NULL) {
      set_error("TVMBackendRegisterSystemLibSymbol: out of memory");
      return -1;
    }
    g_syslib = grown;
    g_syslib_cap = cap;
  }
  g_syslib[g_syslib_len].name = name;
  g_syslib[g_syslib_len++].ptr = ptr;
  return 0;
}

EMBER_DLL void* EmberSystemLibLookup(const char* name) {
  size_t i;
  for (i = 0; name != NULL && i < g_syslib_len; ++i) {
    if (strcmp(g_syslib[i].name, name) == 0) return g_syslib[i].ptr;
  }
  return NULL;
}

/* ---- executors ------------------------------------------------------------------------- */

/* One packed call of an executor's plan, its argument arrays filled in once. */
typedef struct {
  TVMBackendPackedCFunc func;
  TVMValue* args;
  int* codes;
  int32_t num_args;
} EmberPlannedCall;

/* Make the calls in order (a graph executor's run: one call from the host instead of one per
 * kernel); on a failure, *failed_at = its index and the kernel's error is its library's. */
EMBER_DLL int EmberRunCalls(const EmberPlannedCall* calls, int32_t n, int32_t* failed_at) {
  int32_t i;
  for (i = 0; i < n; ++i) {
    TVMValue ret;
    int ret_code = kTVMNullptr;
    if (calls[i].func(calls[i].args, calls[i].codes, calls[i].num_args, &ret, &ret_code,
                      NULL) != 0) {
      *failed_at = i;
      return -1;
    }
  }
  return 0;
}

/* One planned call profiled (the debug executor's work-split pass): its launches record the
 * thread and CPU time of every task into record->launches (capacity records, the caller's
 * memory), record->kernel_cpu_ns/kernel_wall_ns the whole call's. Returns the call's status.
 * Only this thread's launches of this call are recorded: the flag is a thread-local pointer. */
EMBER_DLL int EmberSplitRun(const EmberPlannedCall* call, EmberSplitRecord* record) {
  TVMValue ret;
  int ret_code = kTVMNullptr, rc;
  int64_t cpu0, wall0;
  if (call == NULL || record == NULL || record->capacity < 0 ||
      (record->capacity > 0 && record->launches == NULL)) {
    set_error("EmberSplitRun: call and record must not be NULL, capacity >= 0 with launches");
    return -1;
  }
  record->num_launches = 0;
  (void)ember_split_clock_ns(); /* measured before the span, once a process */
  cpu0 = ember_split_cpu_ns();
  wall0 = ember_pool_now_ns();
  g_split = record;
  rc = call->func(call->args, call->codes, call->num_args, &ret, &ret_code, NULL);
  g_split = NULL;
  record->kernel_cpu_ns = ember_split_span_ns(cpu0);
  record->kernel_wall_ns = ember_pool_now_ns() - wall0;
  { /* each recorded launch's two readings of the clock, inside this span, not its own */
    const int32_t kept = record->num_launches < record->capacity ? record->num_launches
                                                                 : record->capacity;
    const int64_t less = record->kernel_cpu_ns - 2 * (int64_t)kept * ember_split_clock_ns();
    record->kernel_cpu_ns = less > 0 ? less : 0;
  }
  return rc;
}

/* sizeof(EmberSplitLaunch): the host checks its mirror of the record against it. */
EMBER_DLL int EmberSplitLaunchSize(void) { return (int)sizeof(EmberSplitLaunch); }

/* ---- one model call from Python (ember/runtime/model_call.py) --------------------------- */

/* Where CPython and numpy keep what a call reads, in bytes from the object's start. The host
 * measures them on probe objects when it makes a plan and makes none if they do not hold. */
typedef struct {
  int64_t ob_type, var_size, tuple_items, list_items;
  int64_t array_data, array_ndim, array_dims, array_descr, array_flags;
  const void* ndarray_type;
} EmberObjectLayout;

/* One input or output of a model: the numpy array it must be, and the executor's buffer. */
typedef struct {
  const int64_t* shape;
  const void* descr; /* the dtype object an array of it has (numpy's canonical one) */
  void* buffer;
  int64_t nbytes;
  int32_t ndim;
} EmberCallTensor;

typedef struct {
  const EmberObjectLayout* layout;
  const EmberCallTensor* inputs;
  const EmberCallTensor* outputs;
  const EmberPlannedCall* calls;
  int32_t num_inputs, num_outputs, num_calls, num_threads;
  int32_t failed_at; /* set by a call whose kernel failed: the index in calls */
  /* The call's arguments, written by the host before each call (fields, not parameters: a
   * ctypes call converts each parameter in Python, ~0.2 us apiece). */
  const void* args;
  const void* outs;
} EmberModelCallPlan;

#define EMBER_FIELD(obj, off, type) (*(type*)((const char*)(obj) + (off)))
#define EMBER_NPY_C_CONTIGUOUS 0x0001
#define EMBER_NPY_ALIGNED 0x0100

/* Whether obj is a C-contiguous, aligned numpy.ndarray (not a subclass) of t's dtype and shape. */
static int ember_array_is(const EmberObjectLayout* L, const void* obj, const EmberCallTensor* t) {
  const int64_t* dims;
  int32_t k;
  if (EMBER_FIELD(obj, L->ob_type, const void*) != L->ndarray_type) return 0;
  if (EMBER_FIELD(obj, L->array_descr, const void*) != t->descr) return 0;
  if ((EMBER_FIELD(obj, L->array_flags, int) & (EMBER_NPY_C_CONTIGUOUS | EMBER_NPY_ALIGNED)) !=
      (EMBER_NPY_C_CONTIGUOUS | EMBER_NPY_ALIGNED))
    return 0;
  if (EMBER_FIELD(obj, L->array_ndim, int) != t->ndim) return 0;
  dims = EMBER_FIELD(obj, L->array_dims, const int64_t*);
  for (k = 0; k < t->ndim; ++k) {
    if (dims[k] != t->shape[k]) return 0;
  }
  return 1;
}

/* A model call's arrays used in place of the executor's buffers (EmberModelCallDirect):
 * each site is the data field of a tensor the planned calls use that lies in the buffer of
 * input or output `tensor` (inputs first, then outputs), `offset` bytes from its start. The
 * host lists a buffer's sites only where no other tensor shares its memory. */
typedef struct {
  void** field;
  int64_t offset;
  int32_t tensor;
} EmberDirectSite;

typedef struct {
  EmberModelCallPlan call;
  const EmberDirectSite* sites;
  const int8_t* direct; /* per input, then output: 1 where its sites take the array's memory */
  int32_t num_sites;
} EmberDirectCallPlan;

/* Point each site into the caller's arrays (arrays != NULL) or back into the buffers. */
static void ember_point_sites(const EmberDirectCallPlan* d, const void* const* items,
                              const void* const* out_items) {
  const EmberModelCallPlan* c = &d->call;
  const EmberObjectLayout* L = c->layout;
  int32_t i;
  for (i = 0; i < d->num_sites; ++i) {
    const EmberDirectSite* s = &d->sites[i];
    int32_t t = s->tensor;
    char* base;
    if (!d->direct[t]) continue; /* (a dynamic call decides per signature: dynamic_call.h) */
    if (items == NULL) {
      base = (char*)(t < c->num_inputs ? c->inputs[t].buffer
                                       : c->outputs[t - c->num_inputs].buffer);
    } else {
      const void* obj = t < c->num_inputs ? items[t] : out_items[t - c->num_inputs];
      base = EMBER_FIELD(obj, L->array_data, char*);
    }
    *s->field = base + s->offset;
  }
}

/* EmberModelCall with, where `direct` is given, the caller's arrays as the buffers of the
 * inputs and outputs it marks (no copy in or out), the buffers' own memory restored after. */
static int ember_model_call(EmberModelCallPlan* plan, const EmberDirectCallPlan* direct) {
  const EmberObjectLayout* L = plan->layout;
  const void* args = plan->args;
  const void* outs = plan->outs;
  const void* const* items = (const void* const*)((const char*)args + L->tuple_items);
  const void* const* out_items;
  const int8_t* in_place = direct != NULL ? direct->direct : NULL;
  int32_t i;
  int saved = g_pool_num_threads, rc;
  if (EMBER_FIELD(args, L->var_size, int64_t) != plan->num_inputs) return 1;
  for (i = 0; i < plan->num_inputs; ++i) {
    if (!ember_array_is(L, items[i], &plan->inputs[i])) return 1;
  }
  if (plan->num_outputs == 1) {
    out_items = &outs;
  } else {
    out_items = EMBER_FIELD(outs, L->list_items, const void* const*);
  }
  for (i = 0; i < plan->num_inputs; ++i) {
    if (in_place == NULL || !in_place[i])
      memcpy(plan->inputs[i].buffer, EMBER_FIELD(items[i], L->array_data, const void*),
             (size_t)plan->inputs[i].nbytes);
  }
  if (direct != NULL) ember_point_sites(direct, items, out_items);
  /* the model's thread count for this call only (0: the thread's own, set by the host) */
  if (plan->num_threads > 0) ember_pool_set_num_threads(plan->num_threads);
  rc = EmberRunCalls(plan->calls, plan->num_calls, &plan->failed_at);
  g_pool_num_threads = saved;
  if (direct != NULL) ember_point_sites(direct, NULL, NULL);
  if (rc != 0) return -1;
  for (i = 0; i < plan->num_outputs; ++i) {
    if (in_place == NULL || !in_place[plan->num_inputs + i])
      memcpy(EMBER_FIELD(out_items[i], L->array_data, void*), plan->outputs[i].buffer,
             (size_t)plan->outputs[i].nbytes);
  }
  return 0;
}

/* A whole call, numpy in and numpy out, made without the GIL (ctypes releases it):
 * plan->args is the caller's tuple of arrays, plan->outs the output array (one output) or a
 * list of them, made by the host with the outputs' shapes and dtypes. Returns 0 when done; 1 when an argument is
 * not exactly what the plan takes (a conversion or a check the host makes, nothing written);
 * -1 when a kernel failed (plan->failed_at = its index in plan->calls; the error is the
 * kernel's). A plan belongs to one executor's buffers: one call at a time.
 * The host holds references to args and outs for the call; the arrays' memory is read and
 * written only here, as onnxruntime's run does. */
EMBER_DLL int EmberModelCall(EmberModelCallPlan* plan) { return ember_model_call(plan, NULL); }

/* EmberModelCall that reads the inputs and writes the outputs the plan marks in the caller's
 * arrays themselves (a large output is not written twice). */
EMBER_DLL int EmberModelCallDirect(EmberDirectCallPlan* plan) {
  return ember_model_call(&plan->call, plan);
}

/* sizeof(EmberDirectCallPlan): the host checks its mirror against it. */
EMBER_DLL int64_t EmberDirectCallPlanSize(void) { return (int64_t)sizeof(EmberDirectCallPlan); }

/* The same call at any input shape of a VM model (shape phase and checks in C). */
#include "dynamic_call.h"

/* ---- timing ------------------------------------------------------------------------------ */

/* Call f `number` times with the same arguments; *out_seconds = total wall time. */
EMBER_DLL int EmberTimeLoop(TVMBackendPackedCFunc f, TVMValue* args, int* codes, int num_args,
                            int64_t number, double* out_seconds) {
  struct timespec t0, t1;
  int64_t i;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (i = 0; i < number; ++i) {
    TVMValue ret;
    int ret_code = kTVMNullptr;
    if (f(args, codes, num_args, &ret, &ret_code, NULL) != 0) return -1;
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  *out_seconds = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
  return 0;
}
