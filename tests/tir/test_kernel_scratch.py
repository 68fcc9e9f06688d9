"""A kernel's scratch laid out at build time (``ember.tir.kernel_scratch``) and passed by the
caller: nested allocations stack, siblings share bytes, small ones and those in parallel loops
stay on the stack; the emitted kernel calls no TVMBackendAllocWorkspace, computes what the
heap-allocating one computes, and its packed wrapper refuses a missing or short block."""
from __future__ import annotations

import re

import numpy as np
import pytest

import ember
from ember import te
from ember.contrib import cc
from ember.runtime.module import CSourceModule
from ember.te.lower import lower
from ember.tir.codegen import function_c, join_c
from ember.tir.codegen_c import STACK_LIMIT
from ember.tir.functor import post_order
from ember.tir.kernel_scratch import scratch_layout
from ember.tir.stmt import Allocate

N = 8192  # floats: 32 KiB per stage, above the stack limit
needs_cc = pytest.mark.skipif(cc.get_cc() is None, reason="no C compiler found")


def _chain_prim(name: str = "chain"):
    """A -> B = A + 1 -> C = B * 2 -> D = C + 3: B and C are 32 KiB allocations."""
    a = te.placeholder((N,), name="A")
    b = te.compute((N,), lambda i: a[i] + 1.0, name="B")
    c = te.compute((N,), lambda i: b[i] * 2.0, name="C")
    d = te.compute((N,), lambda i: c[i] + 3.0, name="D")
    return lower(te.create_schedule(d.op), [a, d], name)


def test_layout_gives_each_large_allocation_its_own_live_bytes():
    prim = _chain_prim()
    layout = scratch_layout(prim)
    allocs = [n for n in post_order(prim.body) if isinstance(n, Allocate)]
    assert len(allocs) == 2 and len(layout.offsets) == 2
    offsets = sorted(layout.offsets.values())
    assert offsets[0] == 0 and offsets[1] >= N * 4  # nested: B is live while C is written
    assert layout.nbytes == offsets[1] + N * 4
    assert N * 4 > STACK_LIMIT


def test_small_allocations_need_no_scratch():
    a = te.placeholder((16,), name="A")
    b = te.compute((16,), lambda i: a[i] + 1.0, name="B")
    c = te.compute((16,), lambda i: b[i] * 2.0, name="C")
    layout = scratch_layout(lower(te.create_schedule(c.op), [a, c], "small"))
    assert layout.nbytes == 0 and not layout.offsets


def test_the_emitted_kernel_takes_its_scratch_as_last_argument():
    prim = _chain_prim()
    code = join_c([function_c(prim, scratch_layout(prim))])
    assert not re.search(r"\)TVMBackendAllocWorkspace\(", code)
    assert "uint8_t* restrict ember_workspace) {" in code
    assert re.search(r"float\* \w+ = \(float\*\)\(ember_workspace \+ 0\);", code)
    plain = join_c([function_c(prim)])
    assert re.search(r"\)TVMBackendAllocWorkspace\(", plain)


@needs_cc
def test_the_kernel_with_passed_scratch_computes_what_the_heap_one_does():
    prim = _chain_prim("chain_scratch")
    layout = scratch_layout(prim)
    kernel = CSourceModule(join_c([function_c(prim, layout)]), "c",
                           ["chain_scratch"])["chain_scratch"]
    heap = CSourceModule(join_c([function_c(_chain_prim("chain_heap"))]), "c",
                         ["chain_heap"])["chain_heap"]
    x = np.linspace(-1, 1, N, dtype="float32")
    want, got = ember.nd.empty((N,)), ember.nd.empty((N,))
    heap(ember.nd.array(x), want)
    kernel(ember.nd.array(x), got, ember.nd.empty((layout.nbytes,), "uint8"))
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    np.testing.assert_allclose(got.numpy(), (x + 1) * 2 + 3)
    with pytest.raises(ember.TVMError, match="chain_scratch: expected 3 arguments, got 2"):
        kernel(ember.nd.array(x), got)
    with pytest.raises(ember.TVMError, match=rf"chain_scratch: argument 2 \(workspace\): "
                                             rf"expected at least {layout.nbytes} bytes"):
        kernel(ember.nd.array(x), got, ember.nd.empty((layout.nbytes - 1,), "uint8"))
