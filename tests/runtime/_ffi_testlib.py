"""Shared by the FFI tests: a C library of hand-written PackedFuncs and a serialisable
Python module type (also imported by the subprocess that loads an exported library)."""
from __future__ import annotations

import json
from typing import Any

import pytest

from ember.contrib import cc
from ember.runtime.module import PyModule, register_py_module

HAVE_CC = cc.get_cc() is not None
requires_cc = pytest.mark.skipif(not HAVE_CC, reason="no C compiler found ($CC, cc, gcc, clang)")

C_SOURCE = r"""
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include "ember/c_runtime_api.h"

static int fail(const char* msg) { TVMPackedFuncSetLastError(msg); return -1; }

/* argument i must be a float32 tensor of rank 1 */
static int check_vec(const char* fn, TVMValue* args, int* codes, int i, const char* name) {
  static __thread char buf[256];
  DLTensor* t;
  if (codes[i] != kTVMDLTensorHandle && codes[i] != kTVMNDArrayHandle) {
    snprintf(buf, sizeof buf, "%s: argument %d (%s): expected a tensor, got type code %d",
             fn, i, name, codes[i]);
    return fail(buf);
  }
  t = (DLTensor*)args[i].v_handle;
  if (t->dtype.code != kDLFloat || t->dtype.bits != 32 || t->dtype.lanes != 1) {
    snprintf(buf, sizeof buf, "%s: argument %d (%s): expected float32, got code %d bits %d",
             fn, i, name, t->dtype.code, t->dtype.bits);
    return fail(buf);
  }
  if (t->ndim != 1) {
    snprintf(buf, sizeof buf, "%s: argument %d (%s): expected ndim 1, got %d", fn, i, name,
             t->ndim);
    return fail(buf);
  }
  return 0;
}

/* out = a + b, all float32 vectors of one length */
TVM_DLL int add_f32(TVMValue* args, int* codes, int n, TVMValue* ret, int* ret_code, void* h) {
  int64_t i, len;
  float *a, *b, *out;
  if (n != 3) return fail("add_f32: expected 3 arguments (a, b, out)");
  if (check_vec("add_f32", args, codes, 0, "a") || check_vec("add_f32", args, codes, 1, "b") ||
      check_vec("add_f32", args, codes, 2, "out")) return -1;
  len = ((DLTensor*)args[0].v_handle)->shape[0];
  if (((DLTensor*)args[1].v_handle)->shape[0] != len ||
      ((DLTensor*)args[2].v_handle)->shape[0] != len)
    return fail("add_f32: arguments must have the same length");
  a = (float*)((DLTensor*)args[0].v_handle)->data;
  b = (float*)((DLTensor*)args[1].v_handle)->data;
  out = (float*)((DLTensor*)args[2].v_handle)->data;
  for (i = 0; i < len; ++i) out[i] = a[i] + b[i];
  return 0;
}

TVM_DLL int nop(TVMValue* args, int* codes, int n, TVMValue* ret, int* ret_code, void* h) {
  return 0;
}

TVM_DLL int echo(TVMValue* args, int* codes, int n, TVMValue* ret, int* ret_code, void* h) {
  if (n != 1) return fail("echo: expected 1 argument");
  *ret = args[0];
  *ret_code = codes[0];
  return 0;
}

TVM_DLL int type_code(TVMValue* args, int* codes, int n, TVMValue* ret, int* ret_code, void* h) {
  ret->v_int64 = codes[0];
  *ret_code = kTVMArgInt;
  return 0;
}

TVM_DLL int hello(TVMValue* args, int* codes, int n, TVMValue* ret, int* ret_code, void* h) {
  ret->v_str = "hello from C";
  *ret_code = kTVMStr;
  return 0;
}

/* call_global(name, *rest): look name up in the environment and call it with rest */
TVM_DLL int call_global(TVMValue* args, int* codes, int n, TVMValue* ret, int* ret_code,
                        void* h) {
  TVMFunctionHandle f;
  if (n < 1 || codes[0] != kTVMStr) return fail("call_global: argument 0 must be a name");
  if (TVMBackendGetFuncFromEnv(__tvm_module_ctx, args[0].v_str, &f) != 0) return -1;
  return TVMFuncCall(f, args + 1, codes + 1, n - 1, ret, ret_code);
}

/* call_cb(f, *rest): f(*rest) */
TVM_DLL int call_cb(TVMValue* args, int* codes, int n, TVMValue* ret, int* ret_code, void* h) {
  if (n < 1 || codes[0] != kTVMPackedFuncHandle)
    return fail("call_cb: argument 0 must be a function");
  return TVMFuncCall(args[0].v_handle, args + 1, codes + 1, n - 1, ret, ret_code);
}

/* call_cb_n(f, count): call f() count times */
TVM_DLL int call_cb_n(TVMValue* args, int* codes, int n, TVMValue* ret, int* ret_code,
                      void* h) {
  int64_t i;
  TVMValue r;
  int rc;
  for (i = 0; i < args[1].v_int64; ++i)
    if (TVMFuncCall(args[0].v_handle, NULL, NULL, 0, &r, &rc) != 0) return -1;
  return 0;
}

/* catch_cb(f): call f(); on failure return "caught: <message>" instead of failing */
TVM_DLL int catch_cb(TVMValue* args, int* codes, int n, TVMValue* ret, int* ret_code,
                     void* h) {
  static __thread char buf[512];
  if (TVMFuncCall(args[0].v_handle, NULL, NULL, 0, ret, ret_code) == 0) return 0;
  snprintf(buf, sizeof buf, "caught: %s", TVMGetLastError());
  TVMAPISetLastError(NULL); /* handled: clear it, as c_backend_api.h asks */
  ret->v_str = buf;
  *ret_code = kTVMStr;
  return 0;
}

TVM_DLL int raise_msg(TVMValue* args, int* codes, int n, TVMValue* ret, int* ret_code,
                      void* h) {
  return fail(n > 0 && codes[0] == kTVMStr ? args[0].v_str : "raise_msg: failed");
}

TVM_DLL int fail_silently(TVMValue* args, int* codes, int n, TVMValue* ret, int* ret_code,
                          void* h) {
  return -1;
}

/* workspace(nbytes): allocate, write, free; returns the address modulo 64 */
TVM_DLL int workspace(TVMValue* args, int* codes, int n, TVMValue* ret, int* ret_code,
                      void* h) {
  char* p = (char*)TVMBackendAllocWorkspace(kDLCPU, 0, (uint64_t)args[0].v_int64, 2, 32);
  if (p == NULL) return -1;
  memset(p, 1, (size_t)args[0].v_int64);
  ret->v_int64 = (int64_t)((uintptr_t)p % 64);
  *ret_code = kTVMArgInt;
  return TVMBackendFreeWorkspace(kDLCPU, 0, p);
}

/* workspace_reuse(nbytes): allocate, free, allocate the same size again; returns
 * 1 if the second block is the first one (kept by the workspace cache) and the count of
 * blocks the cache holds after both are freed, as 1 + 2 * cached (or -1 on failure). */
int EmberWorkspaceCached(void);
TVM_DLL int workspace_reuse(TVMValue* args, int* codes, int n, TVMValue* ret, int* ret_code,
                            void* h) {
  uint64_t nbytes = (uint64_t)args[0].v_int64;
  void* first = TVMBackendAllocWorkspace(kDLCPU, 0, nbytes, 2, 32);
  void* second;
  if (first == NULL) return -1;
  memset(first, 7, (size_t)nbytes);
  TVMBackendFreeWorkspace(kDLCPU, 0, first);
  second = TVMBackendAllocWorkspace(kDLCPU, 0, nbytes, 2, 32);
  if (second == NULL) return -1;
  memset(second, 9, (size_t)nbytes);
  TVMBackendFreeWorkspace(kDLCPU, 0, second);
  ret->v_int64 = (second == first) + 2 * EmberWorkspaceCached();
  *ret_code = kTVMArgInt;
  return 0;
}

/* One thread's churn: blocks of mixed sizes, each filled with its own byte, checked before it
 * is freed (out of allocation order); returns the number of corrupted blocks. */
static void* churn(void* arg) {
  static const uint64_t sizes[] = {0, 1, 100, 4096, 40000, 36864, 300000, 64};
  static const int free_order[] = {1, 3, 5, 7, 0, 2, 4, 6};
  uintptr_t seed = (uintptr_t)arg, bad = 0;
  int round, k;
  for (round = 0; round < 400; ++round) {
    unsigned char* live[8];
    for (k = 0; k < 8; ++k) {
      uint64_t size = sizes[(k + round + seed) % 8];
      live[k] = (unsigned char*)TVMBackendAllocWorkspace(kDLCPU, 0, size, 2, 32);
      if (live[k] == NULL || (uintptr_t)live[k] % 64 != 0) return (void*)(uintptr_t)1000;
      memset(live[k], (int)(seed * 8 + k), (size_t)size);
    }
    for (k = 0; k < 8; ++k) {
      int slot = free_order[k];
      uint64_t size = sizes[(slot + round + seed) % 8], i;
      for (i = 0; i < size; ++i) {
        if (live[slot][i] != (unsigned char)(seed * 8 + slot)) {
          ++bad;
          break;
        }
      }
      TVMBackendFreeWorkspace(kDLCPU, 0, live[slot]);
    }
  }
  return (void*)bad;
}

/* workspace_churn(threads): churn on that many threads at once; returns corrupted blocks. */
TVM_DLL int workspace_churn(TVMValue* args, int* codes, int n, TVMValue* ret, int* ret_code,
                            void* h) {
  pthread_t tids[16];
  int64_t threads = args[0].v_int64, t, bad = 0;
  if (threads < 1 || threads > 16) return fail("workspace_churn: 1 to 16 threads");
  for (t = 0; t < threads; ++t) {
    if (pthread_create(&tids[t], NULL, churn, (void*)(uintptr_t)t) != 0)
      return fail("workspace_churn: pthread_create failed");
  }
  for (t = 0; t < threads; ++t) {
    void* out;
    pthread_join(tids[t], &out);
    bad += (int64_t)(uintptr_t)out;
  }
  ret->v_int64 = bad;
  *ret_code = kTVMArgInt;
  return 0;
}

typedef struct { const float* x; int64_t len; double partial[256]; } SumCtx;

static int sum_task(int task_id, TVMParallelGroupEnv* penv, void* cdata) {
  SumCtx* ctx = (SumCtx*)cdata;
  int64_t chunk = (ctx->len + penv->num_task - 1) / penv->num_task, i;
  int64_t lo = task_id * chunk, hi = lo + chunk < ctx->len ? lo + chunk : ctx->len;
  double s = 0;
  for (i = lo; i < hi; ++i) s += ctx->x[i];
  ctx->partial[task_id] = s;
  return TVMBackendParallelBarrier(task_id, penv);
}

/* parallel_sum(x): sum of a float32 vector, computed by TVMBackendParallelLaunch */
TVM_DLL int parallel_sum(TVMValue* args, int* codes, int n, TVMValue* ret, int* ret_code,
                         void* h) {
  SumCtx ctx;
  double s = 0;
  int i;
  if (check_vec("parallel_sum", args, codes, 0, "x")) return -1;
  ctx.x = (const float*)((DLTensor*)args[0].v_handle)->data;
  ctx.len = ((DLTensor*)args[0].v_handle)->shape[0];
  memset(ctx.partial, 0, sizeof ctx.partial);
  if (TVMBackendParallelLaunch(sum_task, &ctx, 4) != 0) return fail("parallel_sum: task failed");
  for (i = 0; i < 256; ++i) s += ctx.partial[i];
  ret->v_float64 = s;
  *ret_code = kTVMArgFloat;
  return 0;
}

/* host_api(path): load a module, call functions and allocate a tensor through
   c_runtime_api.h; returns "<hello>|<echo(5)>|<data 64-byte aligned>" */
TVM_DLL int host_api(TVMValue* args, int* codes, int n, TVMValue* ret, int* ret_code,
                     void* h) {
  static __thread char buf[256];
  TVMModuleHandle mod;
  TVMFunctionHandle hello_f, echo_f;
  TVMValue r1, r2, five;
  int c1, c2, int_code = kTVMArgInt, aligned;
  TVMArrayHandle t;
  int64_t shape[2] = {3, 4};
  if (TVMModLoadFromFile(args[0].v_str, "", &mod) != 0) return -1;
  if (TVMModGetFunction(mod, "hello", 0, &hello_f) != 0) return -1;
  if (TVMFuncCall(hello_f, NULL, NULL, 0, &r1, &c1) != 0) return -1;
  TVMFuncFree(hello_f);
  TVMModFree(mod);
  if (TVMFuncGetGlobal("testing.echo", &echo_f) != 0) return -1;
  five.v_int64 = 5;
  if (TVMFuncCall(echo_f, &five, &int_code, 1, &r2, &c2) != 0) return -1;
  TVMFuncFree(echo_f);
  if (TVMArrayAlloc(shape, 2, kDLFloat, 32, 1, kDLCPU, 0, &t) != 0) return -1;
  ((float*)t->data)[11] = 1.0f;
  aligned = ((uintptr_t)t->data % 64) == 0 && t->shape[1] == 4;
  TVMArrayFree(t);
  snprintf(buf, sizeof buf, "%s|%lld|%d", r1.v_str, (long long)r2.v_int64, aligned);
  ret->v_str = buf;
  *ret_code = kTVMStr;
  return 0;
}

/* mod_call(mod, name, *rest): mod's function name (imports searched) called with rest */
TVM_DLL int mod_call(TVMValue* args, int* codes, int n, TVMValue* ret, int* ret_code,
                     void* h) {
  TVMFunctionHandle f;
  int rc;
  if (n < 2 || codes[0] != kTVMModuleHandle || codes[1] != kTVMStr)
    return fail("mod_call: expected (module, name, ...)");
  if (TVMModGetFunction(args[0].v_handle, args[1].v_str, 1, &f) != 0) return -1;
  rc = TVMFuncCall(f, args + 2, codes + 2, n - 2, ret, ret_code);
  TVMFuncFree(f);
  return rc;
}

const int some_data = 42;
const char __tvm_main__[] = "add_f32";
"""


@register_py_module("testing.KVModule")
class KVModule(PyModule):
    """A Python module over a str -> int table, serialised as JSON."""

    def __init__(self, table: dict[str, Any]) -> None:
        super().__init__()
        self.table = dict(table)

    def ffi_get(self, key: str) -> Any:
        return self.table[key]

    def ffi_keys(self) -> list[str]:
        return sorted(self.table)

    def save_binary(self) -> bytes:
        return json.dumps(self.table).encode()

    @classmethod
    def load_binary(cls, data: bytes) -> "KVModule":
        return cls(json.loads(data))
