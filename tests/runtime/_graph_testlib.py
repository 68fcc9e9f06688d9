"""Shared by the graph executor tests: a C library of a few packed kernels, graph JSON written
by hand, and helpers to build executors from them."""
from __future__ import annotations

import json
from typing import Any

import pytest

from ember.contrib import cc
from ember.runtime.module import CSourceModule

requires_cc = pytest.mark.skipif(cc.get_cc() is None, reason="no C compiler found")

# Every kernel checks its arguments like generated code does: count, type code, dtype, shapes.
KERNELS = r"""
#include <stdio.h>
#include "ember/c_runtime_api.h"

static __thread char msg[256];
static int fail(void) { TVMPackedFuncSetLastError(msg); return -1; }

static DLTensor* tensor(const char* fn, TVMValue* args, int* codes, int i) {
  DLTensor* t;
  if (codes[i] != kTVMDLTensorHandle && codes[i] != kTVMNDArrayHandle) {
    snprintf(msg, sizeof msg, "%s: argument %d: expected a tensor, got type code %d", fn, i,
             codes[i]);
    return NULL;
  }
  t = (DLTensor*)args[i].v_handle;
  if (t->dtype.code != kDLFloat || t->dtype.bits != 32) {
    snprintf(msg, sizeof msg, "%s: argument %d: expected float32", fn, i);
    return NULL;
  }
  return t;
}

static int64_t numel(DLTensor* t) {
  int64_t n = 1;
  int i;
  for (i = 0; i < t->ndim; ++i) n *= t->shape[i];
  return n;
}

#define ARGS(fn, count)                                                                  \
  if (n != count) {                                                                      \
    snprintf(msg, sizeof msg, "%s: expected %d arguments, got %d", fn, count, n);        \
    return fail();                                                                       \
  }

/* add(a, b, out): elementwise, equal sizes */
TVM_DLL int k_add(TVMValue* args, int* codes, int n, TVMValue* r, int* rc, void* h) {
  DLTensor *a, *b, *o;
  int64_t i, len;
  ARGS("k_add", 3)
  if (!(a = tensor("k_add", args, codes, 0)) || !(b = tensor("k_add", args, codes, 1)) ||
      !(o = tensor("k_add", args, codes, 2))) return fail();
  len = numel(o);
  if (numel(a) != len || numel(b) != len) {
    snprintf(msg, sizeof msg, "k_add: size mismatch");
    return fail();
  }
  for (i = 0; i < len; ++i) ((float*)o->data)[i] = ((float*)a->data)[i] + ((float*)b->data)[i];
  return 0;
}

/* relu(x, out) */
TVM_DLL int k_relu(TVMValue* args, int* codes, int n, TVMValue* r, int* rc, void* h) {
  DLTensor *x, *o;
  int64_t i;
  ARGS("k_relu", 2)
  if (!(x = tensor("k_relu", args, codes, 0)) || !(o = tensor("k_relu", args, codes, 1)))
    return fail();
  for (i = 0; i < numel(o); ++i) {
    float v = ((float*)x->data)[i];
    ((float*)o->data)[i] = v > 0 ? v : 0;
  }
  return 0;
}

/* matmul(a[m,k], b[k,n], out[m,n]) */
TVM_DLL int k_matmul(TVMValue* args, int* codes, int n, TVMValue* r, int* rc, void* h) {
  DLTensor *a, *b, *o;
  int64_t i, j, p, M, K, N;
  ARGS("k_matmul", 3)
  if (!(a = tensor("k_matmul", args, codes, 0)) || !(b = tensor("k_matmul", args, codes, 1)) ||
      !(o = tensor("k_matmul", args, codes, 2))) return fail();
  if (a->ndim != 2 || b->ndim != 2 || o->ndim != 2) {
    snprintf(msg, sizeof msg, "k_matmul: expected 2-D tensors");
    return fail();
  }
  M = a->shape[0]; K = a->shape[1]; N = b->shape[1];
  if (b->shape[0] != K || o->shape[0] != M || o->shape[1] != N) {
    snprintf(msg, sizeof msg, "k_matmul: shape mismatch");
    return fail();
  }
  for (i = 0; i < M; ++i)
    for (j = 0; j < N; ++j) {
      float s = 0;
      for (p = 0; p < K; ++p) s += ((float*)a->data)[i * K + p] * ((float*)b->data)[p * N + j];
      ((float*)o->data)[i * N + j] = s;
    }
  return 0;
}

/* halves(x[2n], lo[n], hi[n]): two outputs */
TVM_DLL int k_halves(TVMValue* args, int* codes, int n, TVMValue* r, int* rc, void* h) {
  DLTensor *x, *lo, *hi;
  int64_t i, half;
  ARGS("k_halves", 3)
  if (!(x = tensor("k_halves", args, codes, 0)) || !(lo = tensor("k_halves", args, codes, 1)) ||
      !(hi = tensor("k_halves", args, codes, 2))) return fail();
  half = numel(lo);
  for (i = 0; i < half; ++i) {
    ((float*)lo->data)[i] = ((float*)x->data)[i];
    ((float*)hi->data)[i] = ((float*)x->data)[half + i];
  }
  return 0;
}

/* ndim1(x, out): copies, but insists on 1-D tensors (for flatten_data) */
TVM_DLL int k_ndim1(TVMValue* args, int* codes, int n, TVMValue* r, int* rc, void* h) {
  DLTensor *x, *o;
  int64_t i;
  ARGS("k_ndim1", 2)
  if (!(x = tensor("k_ndim1", args, codes, 0)) || !(o = tensor("k_ndim1", args, codes, 1)))
    return fail();
  if (x->ndim != 1 || o->ndim != 1) {
    snprintf(msg, sizeof msg, "k_ndim1: expected ndim 1, got %d", x->ndim);
    return fail();
  }
  for (i = 0; i < numel(o); ++i) ((float*)o->data)[i] = ((float*)x->data)[i];
  return 0;
}

/* positive(x, out): copies, failing if x[0] < 0 (a run-time kernel error) */
TVM_DLL int k_positive(TVMValue* args, int* codes, int n, TVMValue* r, int* rc, void* h) {
  DLTensor *x, *o;
  int64_t i;
  ARGS("k_positive", 2)
  if (!(x = tensor("k_positive", args, codes, 0)) || !(o = tensor("k_positive", args, codes, 1)))
    return fail();
  if (((float*)x->data)[0] < 0) {
    snprintf(msg, sizeof msg, "k_positive: x[0] is negative");
    return fail();
  }
  for (i = 0; i < numel(o); ++i) ((float*)o->data)[i] = ((float*)x->data)[i];
  return 0;
}
"""


def lib() -> CSourceModule:
    """The kernels as a C source module (compiled on first use, cached by content hash)."""
    return CSourceModule(KERNELS)


def op(name: str, func: str, inputs: list[list[int]], num_outputs: int = 1,
       flatten: int = 0) -> dict[str, Any]:
    return {"op": "tvm_op", "name": name, "inputs": inputs,
            "attrs": {"func_name": func, "num_inputs": str(len(inputs)),
                      "num_outputs": str(num_outputs), "flatten_data": str(flatten)}}


def var(name: str) -> dict[str, Any]:
    return {"op": "null", "name": name, "inputs": []}


def graph(nodes: list[dict[str, Any]], heads: list[list[int]], sids: list[int],
          shapes: list[list[int]], dtypes: list[str] | None = None) -> dict[str, Any]:
    """A graph dict; entries (sids/shapes/dtypes) in node order, one per output."""
    ptr = [0]
    for node in nodes:
        ptr.append(ptr[-1] + int(node.get("attrs", {}).get("num_outputs", 1)))
    return {"nodes": nodes, "arg_nodes": [i for i, n in enumerate(nodes) if n["op"] == "null"],
            "heads": heads, "node_row_ptr": ptr,
            "attrs": {"storage_id": ["list_int", sids], "shape": ["list_shape", shapes],
                      "dltype": ["list_str", dtypes or ["float32"] * len(sids)]}}


def mlp_graph() -> dict[str, Any]:
    """out = relu(x @ w + b) + x @ w, where the last add writes into the storage of the
    first (dead by then): two entries share storage id 4."""
    nodes = [var("x"), var("w"), var("b"),
             op("mm", "k_matmul", [[0, 0, 0], [1, 0, 0]]),
             op("add_bias", "k_add", [[3, 0, 0], [2, 0, 0]]),
             op("relu", "k_relu", [[4, 0, 0]]),
             op("residual", "k_add", [[5, 0, 0], [3, 0, 0]])]
    shapes = [[2, 3], [3, 4], [2, 4], [2, 4], [2, 4], [2, 4], [2, 4]]
    return graph(nodes, [[6, 0, 0]], [0, 1, 2, 3, 4, 5, 4], shapes)


def dumps(g: dict[str, Any]) -> str:
    return json.dumps(g)
