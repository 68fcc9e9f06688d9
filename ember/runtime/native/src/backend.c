/*
 * backend.c -- the backend API (c_backend_api.h) for code linked into the program itself
 * (system-lib objects: they have no backend.c of their own), tensors (TVMArray*), and the
 * executors' memory, and the process's thread pool (../../csrc/thread_pool.h). Loaded libraries
 * keep using their own backend.c, hooked to this runtime (and its pool) through the host
 * table (library.c).
 */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>

#include "native.h"
#include "../../csrc/thread_pool.h"

/* Weak, as in backend.c: generated code that defines its own still links. NULL means
 * "the system library" to TVMBackendGetFuncFromEnv (registry.c). */
TVM_DLL __attribute__((weak)) void* __tvm_module_ctx = NULL;

void* TVMBackendAllocWorkspace(int device_type, int device_id, uint64_t nbytes,
                               int dtype_code_hint, int dtype_bits_hint) {
  void* ptr = NULL;
  (void)dtype_code_hint, (void)dtype_bits_hint;
  if (device_type != kDLCPU) {
    ember_crt_error(kTvmErrorWorkspaceUnsupportedDevice, "TVMBackendAllocWorkspace: device type ");
    ember_crt_error_append_i64(device_type);
    ember_crt_error_append(" (id ");
    ember_crt_error_append_i64(device_id);
    ember_crt_error_append(") is not supported; the CPU only (type 1)");
    return NULL;
  }
  if (nbytes > ((uint64_t)1 << 48) ||
      posix_memalign(&ptr, 64, (size_t)((nbytes + 63u) & ~(uint64_t)63u) + (nbytes == 0)) != 0) {
    ember_crt_error(kTvmErrorWorkspaceExhausted, "TVMBackendAllocWorkspace: out of memory "
                    "allocating ");
    ember_crt_error_append_u64(nbytes);
    ember_crt_error_append(" bytes");
    return NULL;
  }
  return ptr;
}

int TVMBackendFreeWorkspace(int device_type, int device_id, void* ptr) {
  (void)device_type, (void)device_id;
  free(ptr);
  return 0;
}

void* ember_executor_alloc(uint64_t nbytes) {
  return TVMBackendAllocWorkspace(kDLCPU, 0, nbytes, kDLUInt, 8);
}

void ember_executor_free(void* ptr) { free(ptr); }

/* ---- parallel launch: the process's thread pool (shared with the libraries it loads) ------ */

/* The pool of this runtime: libraries loaded through it get it in their host table. */
int ember_native_pool_launch(FTVMParallelLambda flambda, void* cdata, int num_task,
                             int num_threads) {
  return ember_pool_launch(flambda, cdata, num_task, num_threads);
}

/* Code linked into the program (system-lib) launches here. */
int TVMBackendParallelLaunch(FTVMParallelLambda flambda, void* cdata, int num_task) {
  EmberLaunchContext ctx;
  uint32_t serial = ember_crt_error_serial();
  if (flambda == NULL) {
    return ember_crt_error(kTvmErrorGenericInvalidArgument,
                           "TVMBackendParallelLaunch: the task function is NULL");
  }
  if (ember_pool_launch_from(NULL, flambda, cdata, num_task, &ctx) == 0) return 0;
  if (ctx.error[0] != '\0') {
    ember_crt_error(kTvmErrorFunctionParallelTaskFailed, ctx.error);
  } else if (ember_crt_error_serial() == serial) {
    ember_crt_error(kTvmErrorFunctionParallelTaskFailed,
                    "TVMBackendParallelLaunch: a task failed without a message");
  }
  return kTvmErrorFunctionParallelTaskFailed;
}

/* Threads (the caller included) of the calling thread's launches of program-linked code;
 * n <= 0 only asks. Returns the count before the call. Loaded libraries have their own. */
TVM_DLL int EmberSetNumThreads(int n) { return ember_pool_set_num_threads(n); }

int TVMBackendParallelBarrier(int task_id, TVMParallelGroupEnv* penv) {
  return ember_pool_barrier_of(task_id, penv);
}

int TVMSetStream(int device_type, int device_id, void* stream) {
  (void)device_id, (void)stream;
  if (device_type != kDLCPU) {
    return ember_crt_error(kTvmErrorWorkspaceUnsupportedDevice,
                           "TVMSetStream: only the CPU (device type 1) is supported");
  }
  return 0;
}

/* ---- tensors -------------------------------------------------------------------------------- */

int TVMArrayAlloc(const int64_t* shape, int ndim, int dtype_code, int dtype_bits,
                  int dtype_lanes, int device_type, int device_id, TVMArrayHandle* out) {
  DLTensor* t;
  uint64_t count = 1;
  int i;
  if (out == NULL || ndim < 0 || ndim > EMBER_CRT_MAX_NDIM || (ndim > 0 && shape == NULL) ||
      dtype_bits <= 0 || dtype_bits > 64 || dtype_lanes <= 0 || dtype_lanes > 65535 ||
      dtype_code < 0 || dtype_code > 6) {
    ember_crt_error(kTvmErrorGenericInvalidArgument, "TVMArrayAlloc: invalid arguments (ndim ");
    ember_crt_error_append_i64(ndim);
    ember_crt_error_append(", dtype code ");
    ember_crt_error_append_i64(dtype_code);
    ember_crt_error_append(" bits ");
    ember_crt_error_append_i64(dtype_bits);
    ember_crt_error_append(" lanes ");
    ember_crt_error_append_i64(dtype_lanes);
    ember_crt_error_append(")");
    return kTvmErrorGenericInvalidArgument;
  }
  for (i = 0; i < ndim; ++i) {
    if (shape[i] < 0 || (shape[i] > 0 && count > ((uint64_t)1 << 40) / (uint64_t)shape[i])) {
      return ember_crt_error(kTvmErrorGenericInvalidArgument,
                             "TVMArrayAlloc: a dimension is negative or the tensor too large");
    }
    count *= (uint64_t)shape[i];
  }
  t = (DLTensor*)calloc(1, sizeof(DLTensor) + sizeof(int64_t) * (size_t)(ndim ? ndim : 1));
  if (t == NULL) return ember_crt_error(kTvmErrorExecutorOutOfMemory, "TVMArrayAlloc: out of memory");
  t->shape = (int64_t*)(t + 1);
  if (ndim > 0) memcpy(t->shape, shape, sizeof(int64_t) * (size_t)ndim);
  t->ndim = ndim;
  t->dtype.code = (uint8_t)dtype_code;
  t->dtype.bits = (uint8_t)dtype_bits;
  t->dtype.lanes = (uint16_t)dtype_lanes;
  t->device.device_type = (DLDeviceType)device_type;
  t->device.device_id = device_id;
  t->data = TVMBackendAllocWorkspace(device_type, device_id,
                                     ember_tensor_bytes(t->dtype, t->ndim, t->shape), dtype_code,
                                     dtype_bits);
  if (t->data == NULL) {
    free(t);
    return ember_crt_last_error_code();
  }
  *out = t;
  return 0;
}

int TVMArrayFree(TVMArrayHandle handle) {
  if (handle != NULL) free(handle->data);
  free(handle);
  return 0;
}

static int copy_bytes(const char* who, TVMArrayHandle t, size_t nbytes, void* data) {
  uint64_t want;
  if (t == NULL || t->data == NULL || (data == NULL && nbytes > 0)) {
    ember_crt_error(kTvmErrorGenericInvalidArgument, who);
    ember_crt_error_append(": the tensor, its data and the buffer must not be NULL");
    return kTvmErrorGenericInvalidArgument;
  }
  want = ember_tensor_bytes(t->dtype, t->ndim, t->shape);
  if ((uint64_t)nbytes != want) {
    ember_crt_error(kTvmErrorExecutorBadInput, who);
    ember_crt_error_append(": the tensor ");
    ember_error_append_type(t->dtype, t->ndim, t->shape);
    ember_crt_error_append(" has ");
    ember_crt_error_append_u64(want);
    ember_crt_error_append(" bytes, got a buffer of ");
    ember_crt_error_append_u64(nbytes);
    return kTvmErrorExecutorBadInput;
  }
  return 0;
}

int TVMArrayCopyFromBytes(TVMArrayHandle handle, void* data, size_t nbytes) {
  int rc = copy_bytes("TVMArrayCopyFromBytes", handle, nbytes, data);
  if (rc == 0 && nbytes > 0) memcpy((uint8_t*)handle->data + handle->byte_offset, data, nbytes);
  return rc;
}

int TVMArrayCopyToBytes(TVMArrayHandle handle, void* data, size_t nbytes) {
  int rc = copy_bytes("TVMArrayCopyToBytes", handle, nbytes, data);
  if (rc == 0 && nbytes > 0) memcpy(data, (uint8_t*)handle->data + handle->byte_offset, nbytes);
  return rc;
}
