"""Codegen modes: the stdio-free C of builds for the C runtime (constant messages still naming
the function and argument, no printf family), and workspace blocks freed innermost first on
every early return of a kernel."""
from __future__ import annotations

import re

import numpy as np
import pytest

import ember
from ember import te, tir, topi
from ember.contrib import cc
from ember.runtime.module import CSourceModule
from ember.te.lower import lower
from ember.tir.codegen import generate_c

NAME = "tvmgen_default_fused_add"
needs_cc = pytest.mark.skipif(cc.get_cc() is None, reason="no C compiler found")


def _add_prim():
    a, b = te.placeholder((2, 3), name="a"), te.placeholder((2, 3), name="b")
    c = topi.add(a, b)
    return lower(topi.schedule_injective(c), [a, b, c], NAME)


def test_no_stdio_mode_has_no_formatting():
    src = generate_c([_add_prim()], stdio=False)
    assert not re.search(r"\b(v?s?n?printf|stdio\.h|stdarg\.h|va_list)\b", src)
    hosted = generate_c([_add_prim()])
    assert "vsnprintf" in hosted and "#include <stdio.h>" in hosted
    assert generate_c([_add_prim()], stdio=False) == src  # deterministic


@needs_cc
@pytest.mark.parametrize("args, message", [
    (lambda a: (a((2, 3)), a((2, 3, 1)), a((2, 3))), f"{NAME}: argument 1 (b): ndim mismatch"),
    (lambda a: (a((2, 3)), a((2, 4)), a((2, 3))), f"{NAME}: argument 1 (b): shape mismatch"),
    (lambda a: (a((2, 3), "float64"), a((2, 3)), a((2, 3))),
     f"{NAME}: argument 0 (a): dtype mismatch, expected float32"),
    (lambda a: (a((2, 3)), a((2, 3))), f"{NAME}: wrong number of arguments (expected 3)"),
    (lambda a: (a((2, 3)), 5, a((2, 3))), f"{NAME}: argument 1 (b): expected a tensor"),
])
def test_no_stdio_messages_name_function_and_argument(args, message):
    func = CSourceModule(generate_c([_add_prim()], stdio=False), "c", [NAME])[NAME]

    def arr(shape, dtype="float32"):
        return ember.nd.array(np.ones(shape, dtype))

    with pytest.raises(ember.TVMError, match=re.escape(message) + "$"):
        func(*args(arr))
    out = ember.nd.empty((2, 3))
    func(arr((2, 3)), arr((2, 3)), out)
    np.testing.assert_array_equal(out.numpy(), np.full((2, 3), 2, "float32"))


def _nested_workspace_prim():
    """B and C need the workspace (above the stack limit); C's producer calls a function."""
    n = 8192
    a = te.placeholder((n,), name="A")
    b = te.compute((n,), lambda i: a[i] + 1.0, name="B")
    c = te.extern((n,), [b], lambda ins, outs: tir.call_packed("app.scale", ins[0], outs[0]),
                  name="C")
    d = te.compute((n,), lambda i: c[i] * 3.0, name="D")
    return lower(te.create_schedule(d.op), [a, d], "nested")


def test_early_returns_free_live_workspace_blocks_innermost_first():
    src = generate_c([_nested_workspace_prim()])
    body = src[src.index("int32_t nested_unpacked("):src.index("TVM_DLL int32_t nested(")]
    allocs = re.findall(r"(\w+) = \(float\*\)TVMBackendAllocWorkspace", body)
    assert len(allocs) == 2
    outer, inner = allocs
    # the inner allocation failing frees the outer block, then reports
    fail_inner = body[body.index(f"if ({inner} == NULL)"):]
    assert fail_inner.index(f"TVMBackendFreeWorkspace(1, 0, {outer})") < fail_inner.index(
        "return ember_fail")
    # a failing call_packed frees both, inner first, before returning
    call = body[body.index("TVMFuncCall(cp_func"):]
    frees = re.findall(r"TVMBackendFreeWorkspace\(1, 0, (\w+)\);", call.split("return -1;")[0])
    assert frees == [inner, outer]


@needs_cc
def test_failing_call_inside_workspace_scope_reports_the_error():
    func = CSourceModule(generate_c([_nested_workspace_prim()]), "c", ["nested"])["nested"]

    @ember.register_func("app.scale", override=True)
    def scale(x, y):
        raise ValueError("app.scale failed on purpose")

    try:
        with pytest.raises(ValueError, match="on purpose"):
            func(ember.nd.empty((8192,)), ember.nd.empty((8192,)))
    finally:
        ember.runtime.remove_global_func("app.scale")
