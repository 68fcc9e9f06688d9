"""Storage and the pooled allocator: reuse between runs, no sharing of live memory, and
buffers that stay valid while anything still views them."""
from __future__ import annotations

import gc
import os
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ember
from ember.runtime.errors import TVMError
from ember.runtime.vm import NaiveAllocator, PooledAllocator, VirtualMachine
from ember.runtime.vm.memory import size_class

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _vm_testlib import ADD, SUM, make_exe, requires_cc  # noqa: E402

CPU = ember.cpu(0)


@given(st.integers(0, 1 << 40))
def test_size_class_bounds(n: int) -> None:
    c = size_class(n)
    assert c >= max(n, 64) and c % 16 == 0
    assert n <= 64 or c <= n * 1.25 + 1  # at most a quarter wasted


def test_pool_reuses_a_returned_buffer() -> None:
    pool = PooledAllocator()
    a = pool.alloc(1000, 64, CPU)
    ptr = a.ptr
    del a
    b = pool.alloc(900, 64, CPU)  # same size class (1024)
    assert b.ptr == ptr and pool.fresh_allocations == 1
    c = pool.alloc(900, 64, CPU)  # b is alive: a new buffer
    assert c.ptr != ptr and pool.fresh_allocations == 2
    assert pool.stats()["requests"] == 3


def test_alignment_is_honoured_and_part_of_the_key() -> None:
    pool = PooledAllocator()
    for align in (1, 64, 128, 4096):
        block = pool.alloc(100, align, CPU)
        assert block.ptr % max(align, 64) == 0
    del block
    assert pool.alloc(100, 128, CPU).ptr % 128 == 0


def test_naive_allocator_never_reuses() -> None:
    naive = NaiveAllocator()
    for _ in range(3):
        naive.alloc(64, 64, CPU)
    assert naive.fresh_allocations == 3


def test_tensor_views_keep_the_buffer_out_of_the_pool() -> None:
    pool = PooledAllocator()
    block = pool.alloc(64, 64, CPU)
    t = block.tensor(16, (4,), "float32")
    view = np.asarray(t)  # a numpy view made from the tensor
    del block, t
    gc.collect()
    assert pool.free_bytes == 0  # still viewed: not back in the pool
    other = pool.alloc(64, 64, CPU)
    other.tensor(0, (16,), "float32").numpy()  # touches a different buffer
    view[:] = 5.0
    del view
    assert pool.free_bytes == 64  # now it is


def test_carving_checks_bounds() -> None:
    block = PooledAllocator().alloc(16, 64, CPU)
    assert block.tensor(8, (2,), "float32").shape == (2,)
    with pytest.raises(TVMError, match="a tensor of 12 bytes at offset 8 does not fit in a "
                                       "storage block of 16 bytes"):
        block.tensor(8, (3,), "float32")


def test_carved_tensor_is_a_proper_ndarray() -> None:
    block = PooledAllocator().alloc(256, 64, CPU)
    t = block.tensor(64, (2, 3), "int32")
    ref = ember.nd.empty((2, 3), "int32")
    assert (t.shape, t.dtype, t.device) == (ref.shape, ref.dtype, ref.device)
    assert t._dl.data == t.data_ptr == block.ptr + 64 and t._dl.ndim == 2
    assert list(t._dl.shape[:2]) == [2, 3] and t._dl.dtype.bits == 32
    t.copyfrom(np.arange(6, dtype="int32").reshape(2, 3))
    assert t.numpy().sum() == 15


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 5000), st.booleans()), min_size=1, max_size=40))
def test_live_blocks_never_overlap(ops: list[tuple[int, bool]]) -> None:
    # Law: blocks handed out while others are alive never share a byte.
    pool = PooledAllocator()
    live: list = []
    for size, drop in ops:
        if drop and live:
            live.pop(0)
        block = pool.alloc(size, 64, CPU)
        for other in live:
            assert block.ptr + block.nbytes <= other.ptr or other.ptr + other.nbytes <= block.ptr
        live.append(block)


@requires_cc
def test_second_run_allocates_nothing_new() -> None:
    vm = VirtualMachine(make_exe(ADD), CPU)
    x = np.ones(4, "float32")
    vm.run(x, x)
    first = vm.allocator.fresh_allocations
    assert first == 1
    for _ in range(3):
        vm.run(x, x)  # the result is dropped at once
    assert vm.allocator.fresh_allocations == first


@requires_cc
def test_steady_state_while_holding_the_previous_result() -> None:
    vm = VirtualMachine(make_exe(SUM), CPU)
    out = vm.run(np.int64(50))
    out = vm.run(np.int64(50))  # the first result is alive during this run
    settled = vm.allocator.fresh_allocations
    for _ in range(3):
        out = vm.run(np.int64(50))
    assert vm.allocator.fresh_allocations == settled and out.numpy() == 1275


@requires_cc
def test_results_stay_valid_after_later_runs() -> None:
    vm = VirtualMachine(make_exe(ADD), CPU)
    x = np.arange(4, dtype="float32")
    first = np.asarray(vm.run(x, x))  # only a numpy view survives
    for _ in range(3):
        vm.run(x + 100, x)
    np.testing.assert_array_equal(first, 2 * x)


@requires_cc
def test_naive_memory_config_and_shared_allocator() -> None:
    x = np.ones(4, "float32")
    naive = VirtualMachine(make_exe(ADD), CPU, memory_cfg="naive")
    naive.run(x, x)
    naive.run(x, x)
    assert naive.allocator.fresh_allocations == 2
    shared = PooledAllocator()
    for _ in range(2):
        VirtualMachine(make_exe(ADD), CPU, memory_cfg=shared).run(x, x)
    assert shared.fresh_allocations == 1
    with pytest.raises(ValueError, match="memory_cfg must be"):
        VirtualMachine(make_exe(ADD), CPU, memory_cfg="arena")
