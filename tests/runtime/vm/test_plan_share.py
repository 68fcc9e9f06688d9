"""Dynamic blocks that are never live together share one storage (vm/plan_share.py): the
partition itself, and a compiled model whose intermediates share storage giving the static
build's results at growing, shrinking and new shapes, on the C path and the Python one."""
from __future__ import annotations

import functools
import os
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ember
from ember.runtime.vm.plan_share import packed_offsets, shape_tensors, shared_slots
from ember.runtime.vm.plan_walk import Block, Call, Tensor
from ember.runtime.dtype import DataType

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_plan_native import context_of  # noqa: E402
from _vm_testlib import requires_cc  # noqa: E402

F32 = DataType("float32")


def _blocks(n: int) -> list[Block]:
    return [Block(i, 0, 64, ember.cpu(0), "float32") for i in range(n)]


def _t(block: Block, shape=(4,)) -> Tensor:
    return Tensor(block, 0, shape, F32)


def _chain(blocks: list[Block]) -> list[Call]:
    """call k reads block k and writes block k + 1."""
    return [Call(k, [_t(blocks[k]), _t(blocks[k + 1])], 1) for k in range(len(blocks) - 1)]


def test_blocks_of_disjoint_lifetimes_share_and_neighbours_do_not() -> None:
    blocks = _blocks(5)
    calls = _chain(blocks)
    slots = shared_slots(calls, range(len(calls)), blocks, set(), [])
    # 0 [0,0], 1 [0,1], 2 [1,2], 3 [2,3], 4 [3,3]: a call's input and output never share
    assert sorted(map(sorted, slots)) == [[0, 2, 4], [1, 3]]


def test_excluded_blocks_and_blocks_holding_shapes_keep_their_own_storage() -> None:
    blocks = _blocks(5)
    calls = _chain(blocks)
    shape = _t(blocks[2], (1,))  # block 2 holds a run-time shape a check reads later
    slots = shared_slots(calls, range(len(calls)), blocks, {4}, [shape])
    # left: 0 [0, 0], 1 [0, 1], 3 [2, 3]; 3 takes the slot that freed up first
    assert slots == [[0, 3]]
    sized = Block(9, 0, 64, ember.cpu(0), "float32", size=shape)
    assert shape_tensors([], [sized]) == [shape]


def test_the_run_order_decides_the_lifetimes() -> None:
    blocks = _blocks(3)
    calls = [Call(0, [_t(blocks[0])], 1), Call(1, [_t(blocks[1])], 1),
             Call(2, [_t(blocks[0]), _t(blocks[2])], 1)]
    # in this order block 0 is live from the first call to the last: only 1 and 2 share
    assert shared_slots(calls, [0, 1, 2], blocks, set(), []) == [[1, 2]]
    # with the second call first, block 1 is done before block 0 starts
    assert sorted(map(sorted, shared_slots(calls, [1, 0, 2], blocks, set(), []))) == [[0, 1]]


# softmaxes do not fuse: every intermediate is a block of the input's run-time size
CHAIN = """#[version = "0.0.5"]
def @main(%x: Tensor[(?, ?), float32]) {
  %0 = nn.softmax(%x);
  %1 = nn.softmax(add(%0, %x));
  %2 = nn.softmax(add(%1, %0));
  %3 = nn.softmax(add(%2, %1));
  nn.softmax(add(%3, %2))
}
"""


def _softmax(a: np.ndarray) -> np.ndarray:
    e = np.exp(a - a.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _want(x: np.ndarray) -> np.ndarray:
    s0 = _softmax(x)
    s1 = _softmax(s0 + x)
    s2 = _softmax(s1 + s0)
    s3 = _softmax(s2 + s1)
    return _softmax(s3 + s2)


@pytest.fixture(scope="module")
def chain():
    return ember.compile(CHAIN, executor="vm")


@requires_cc
def test_a_model_whose_intermediates_share_storage_is_right_at_every_shape(chain) -> None:
    rng = np.random.default_rng(0)
    # growing, shrinking, back to a seen shape, then many new ones (the slot grows for the
    # largest, never shrinks, and a later small shape reads only its own bytes)
    shapes = [(1, 3), (4, 17), (2, 5), (4, 17), (9, 33), (1, 1), (3, 64), (7, 7)]
    shapes += [(1 + k % 5, 2 + 3 * k) for k in range(20)]
    for shape in shapes:
        x = rng.uniform(-2, 2, size=shape).astype("float32")
        np.testing.assert_allclose(chain(x), _want(x), rtol=1e-5, atol=1e-6,
                                   err_msg=f"at {shape}")
    plan = context_of(chain).arrays.plan
    storages = {id(s) for s in plan._grown.values()}
    assert plan._slot_of and len(storages) < len(plan._grown), plan._grown
    for members in {id(m): m for m in plan._slot_of.values()}.values():
        assert len({id(plan._grown[i]) for i in members if i in plan._grown}) <= 1


@requires_cc
def test_a_static_build_gives_the_same_result_as_the_shared_storage(chain) -> None:
    x = np.random.default_rng(1).uniform(-2, 2, size=(3, 29)).astype("float32")
    chain(np.ones((8, 40), "float32"))  # the slots grown for a larger shape first
    static = ember.compile(CHAIN.replace("(?, ?)", "(3, 29)"), executor="graph")
    np.testing.assert_allclose(chain(x), static(x), rtol=1e-6, atol=1e-7)


# -- packed placement: blocks of different sizes at offsets in one storage ----------------

@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 12), st.integers(0, 6), st.integers(0, 5000)),
                min_size=1, max_size=24))
def test_packed_blocks_live_together_never_overlap(blocks) -> None:
    span = {i: [first, first + length] for i, (first, length, _) in enumerate(blocks)}
    sizes = {i: nbytes for i, (_, _, nbytes) in enumerate(blocks)}
    offsets, total = packed_offsets(span, sizes, 64)
    assert sorted(offsets) == sorted(span)
    assert all(offset % 64 == 0 and offset + max(sizes[i], 1) <= total
               for i, offset in offsets.items())
    for i in span:
        for j in span:
            together = not (span[i][1] < span[j][0] or span[j][1] < span[i][0])
            if i < j and together:
                apart = offsets[i] + max(sizes[i], 1) <= offsets[j] or \
                    offsets[j] + max(sizes[j], 1) <= offsets[i]
                assert apart, (i, j, offsets, span, sizes)
    # never more than every block side by side, nor less than the bytes live at one call
    assert total <= sum(-(-max(n, 1) // 64) * 64 for n in sizes.values())
    live = max(sum(sizes[i] for i in span if span[i][0] <= pos <= span[i][1])
               for pos in range(20))
    assert total >= live


def test_packing_reuses_a_large_block_for_smaller_ones_after_it() -> None:
    # one 4 KiB block, then two 1 KiB blocks live together, both after it: they go where the
    # large one was (interval slots took 4 + 4 KiB: a slot is as large as its largest member)
    span = {0: [0, 1], 1: [2, 3], 2: [2, 4], 3: [1, 2]}
    sizes = {0: 4096, 1: 1024, 2: 1024, 3: 4096}
    offsets, total = packed_offsets(span, sizes)
    assert total == 8192
    assert {offsets[1], offsets[2]} == {offsets[0], offsets[0] + 1024}


# blocks of three sizes: the row's, twice the row's and one value per row
PYRAMID = """#[version = "0.0.5"]
def @main(%x: Tensor[(?, ?), float32]) {
  %0 = nn.softmax(%x);
  %1 = concatenate((%0, %0), axis=1);
  %2 = nn.softmax(%1);
  %3 = nn.softmax(add(%2, %1));
  %4 = sum(%3, axis=[1], keepdims=True);
  %5 = nn.softmax(add(%0, %4));
  nn.softmax(add(%5, %0))
}
"""


def _pyramid_want(x: np.ndarray) -> np.ndarray:
    s0 = _softmax(x)
    s1 = np.concatenate([s0, s0], axis=1)
    s3 = _softmax(_softmax(s1) + s1)
    s5 = _softmax(s0 + s3.sum(axis=1, keepdims=True))
    return _softmax(s5 + s0)


@requires_cc
@settings(max_examples=12, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 9), st.integers(1, 70)), min_size=1, max_size=4))
def test_blocks_of_different_sizes_packed_in_one_storage_are_right_at_any_shape(shapes) -> None:
    model = _pyramid()
    rng = np.random.default_rng(0)
    for shape in shapes + [(1, 1), shapes[0]]:
        x = rng.uniform(-2, 2, size=shape).astype("float32")
        np.testing.assert_allclose(model(x), _pyramid_want(x), rtol=1e-5, atol=1e-6,
                                   err_msg=f"at {shape}")
    plan = context_of(model).arrays.plan
    assert plan._span and len({id(plan._grown[i]) for i in plan._span}) == 1
    for i in plan._span:  # no two blocks live together overlap, at the room each has
        for j in plan._span:
            a, b = plan._span[i], plan._span[j]
            if i < j and not (a[1] < b[0] or b[1] < a[0]):
                assert plan._base[i] + plan._capacity[i] <= plan._base[j] or \
                    plan._base[j] + plan._capacity[j] <= plan._base[i]


@functools.lru_cache(maxsize=None)
def _pyramid():
    return ember.compile(PYRAMID, executor="vm")
