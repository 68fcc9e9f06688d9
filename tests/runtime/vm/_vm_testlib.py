"""Shared by the VM tests: hand-written C kernels (PackedFunc convention, destination
passing), and helpers that assemble executables naming kernels by name."""
from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from typing import Any

import pytest

from ember.contrib import cc
from ember.runtime.module import CSourceModule, Module
from ember.runtime.vm import Executable

HAVE_CC = cc.get_cc() is not None
requires_cc = pytest.mark.skipif(not HAVE_CC, reason="no C compiler found ($CC, cc, gcc, clang)")

C_SOURCE = r"""
#include <stdio.h>
#include <string.h>
#include "ember/c_runtime_api.h"

static __thread char msg[256];
static int fail(const char* fn, const char* what) {
  snprintf(msg, sizeof msg, "%s: %s", fn, what);
  TVMPackedFuncSetLastError(msg);
  return -1;
}
static int64_t numel(const DLTensor* t) {
  int64_t n = 1; int i;
  for (i = 0; i < t->ndim; ++i) n *= t->shape[i];
  return n;
}
/* n tensor arguments, all of dtype (code, bits) and, if same_size, of one element count */
static int check(const char* fn, TVMValue* args, int* codes, int n, int want, int code, int bits,
                 int same_size) {
  int i;
  if (n != want) { snprintf(msg, sizeof msg, "%s: expected %d arguments, got %d", fn, want, n);
                   TVMPackedFuncSetLastError(msg); return -1; }
  for (i = 0; i < n; ++i) {
    const DLTensor* t = (const DLTensor*)args[i].v_handle;
    if (codes[i] != kTVMDLTensorHandle && codes[i] != kTVMNDArrayHandle)
      return fail(fn, "arguments must be tensors");
    if (code >= 0 && (t->dtype.code != code || t->dtype.bits != bits))
      { snprintf(msg, sizeof msg, "%s: argument %d: wrong dtype (code %d bits %d)", fn, i,
                 t->dtype.code, t->dtype.bits); TVMPackedFuncSetLastError(msg); return -1; }
    if (same_size && numel(t) != numel((const DLTensor*)args[0].v_handle))
      return fail(fn, "arguments must have the same number of elements");
  }
  return 0;
}
#define T(i) ((DLTensor*)args[i].v_handle)
#define BINARY(NAME, CTYPE, CODE, BITS, EXPR)                                                   \
  TVM_DLL int NAME(TVMValue* args, int* codes, int n, TVMValue* r, int* rc, void* h) {        \
    int64_t i, len; const CTYPE *a, *b; CTYPE* out;                                          \
    if (check(#NAME, args, codes, n, 3, CODE, BITS, 1)) return -1;                           \
    len = numel(T(0)); a = (const CTYPE*)T(0)->data; b = (const CTYPE*)T(1)->data;           \
    out = (CTYPE*)T(2)->data;                                                                 \
    for (i = 0; i < len; ++i) out[i] = EXPR;                                                  \
    return 0;                                                                                 \
  }
BINARY(vm_add_f32, float, kDLFloat, 32, a[i] + b[i])
BINARY(vm_mul_f32, float, kDLFloat, 32, a[i] * b[i])
BINARY(vm_add_i64, int64_t, kDLInt, 64, a[i] + b[i])
BINARY(vm_sub_i64, int64_t, kDLInt, 64, a[i] - b[i])

/* out (bool, one byte per element) = a < b, int64 */
TVM_DLL int vm_less_i64(TVMValue* args, int* codes, int n, TVMValue* r, int* rc, void* h) {
  int64_t i, len;
  if (check("vm_less_i64", args, codes, n, 3, -1, 0, 1)) return -1;
  len = numel(T(0));
  for (i = 0; i < len; ++i)
    ((unsigned char*)T(2)->data)[i] = ((int64_t*)T(0)->data)[i] < ((int64_t*)T(1)->data)[i];
  return 0;
}

/* out = a, any dtype, equal byte sizes */
TVM_DLL int vm_copy(TVMValue* args, int* codes, int n, TVMValue* r, int* rc, void* h) {
  if (check("vm_copy", args, codes, n, 2, -1, 0, 1)) return -1;
  memcpy(T(1)->data, T(0)->data, (size_t)numel(T(0)) * ((T(0)->dtype.bits + 7) / 8));
  return 0;
}

/* out (int64 scalar) = bytes of a float32 tensor of the shape held in the int64 vector s */
TVM_DLL int vm_nbytes_f32(TVMValue* args, int* codes, int n, TVMValue* r, int* rc, void* h) {
  int64_t i, size = 4;
  if (check("vm_nbytes_f32", args, codes, n, 2, kDLInt, 64, 0)) return -1;
  for (i = 0; i < numel(T(0)); ++i) size *= ((int64_t*)T(0)->data)[i];
  *(int64_t*)T(1)->data = size;
  return 0;
}

TVM_DLL int vm_fail(TVMValue* args, int* codes, int n, TVMValue* r, int* rc, void* h) {
  return fail("vm_fail", "this kernel always fails");
}
"""

KERNELS = ("vm_add_f32", "vm_mul_f32", "vm_add_i64", "vm_sub_i64", "vm_less_i64", "vm_copy",
           "vm_nbytes_f32", "vm_fail")


@functools.lru_cache(maxsize=1)
def kernel_lib() -> Module:
    """The kernels as a C source module (compiled, and cached, on first use)."""
    return CSourceModule(C_SOURCE)


def resolve_kernels(text: str) -> str:
    """Assembly with ``PackedFunc[vm_add_f32]`` written for ``PackedFunc[<index>]``."""
    return re.sub(r"PackedFunc\[(\w+)\]",
                  lambda m: f"PackedFunc[{KERNELS.index(m.group(1))}]"
                  if not m.group(1).isdigit() else m.group(0), text)


def make_exe(text: str, constants: Sequence[Any] = (), lib: Module | None = None,
             **kwargs: Any) -> Executable:
    """An executable from assembly naming kernels by name, with all KERNELS as primitive ops."""
    return Executable.from_functions(resolve_kernels(text), constants, KERNELS,
                                     lib if lib is not None else kernel_lib(), **kwargs)


# main(x, y) = x + y for float32 vectors of 4 (one storage, one tensor, one kernel call).
ADD = """
main(x, y):
    # param types = float32[4], float32[4]
    load_consti $2 16
    alloc_storage $3 $2 64 float32 0
    load_consti $4 0
    alloc_tensor $5 $3 $4 [4] float32
    invoke_packed PackedFunc[vm_add_f32] (in: $0, $1, out: $5)
    ret $5
"""

# sum(n) = n + sum(n - 1), sum(0) = 0, on int64 scalars: recursion through If and Invoke.
SUM = """
sum(n):
    load_consti $1 0
    if $0 $1 @base @step
base:
    ret $1
step:
    load_consti $2 1
    load_consti $3 8
    alloc_storage $4 $3 64 int64 0
    alloc_tensor $5 $4 $1 [] int64
    invoke_packed PackedFunc[vm_sub_i64] (in: $0, $2, out: $5)
    invoke $6 VMFunc[0]($5)
    alloc_storage $7 $3 64 int64 0
    alloc_tensor $8 $7 $1 [] int64
    invoke_packed PackedFunc[vm_add_i64] (in: $0, $6, out: $8)
    ret $8
main(n):
    invoke $1 VMFunc[0]($0)
    ret $1
"""


# main(x: float32[?]) = reshape(x + x, Const[0]): a block sized by a shape function at run time
# (shape_of, a size kernel, alloc_tensor_reg, reshape).
DYNAMIC = """
main(x):
    # param types = float32[?]
    shape_of $1 $0
    load_consti $2 8
    alloc_storage $3 $2 64 int64 0
    load_consti $4 0
    alloc_tensor $5 $3 $4 [] int64
    invoke_packed PackedFunc[vm_nbytes_f32] (in: $1, out: $5)
    alloc_storage $6 $5 64 float32 0
    alloc_tensor_reg $7 $6 $4 $1 float32
    invoke_packed PackedFunc[vm_add_f32] (in: $0, $0, out: $7)
    load_const $8 Const[0]
    reshape_tensor $9 $7 $8
    ret $9
"""
