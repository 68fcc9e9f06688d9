"""Memory planning: storage ids (graph executor) and arenas (AOT), with their laws."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ember as tvm
from ember import relay
from ember.relay.backend._liveness import (
    CONST,
    INPUT,
    INTERMEDIATE,
    RESHAPE,
    Dataflow,
    Step,
    TensorInfo,
)
from ember.relay.backend.memory_plan import (
    lower_bound,
    plan_arena,
    plan_dataflow_arena,
    plan_memory,
    plan_storage,
)


def prim(fn, *shapes, dtype="float32"):
    ps = [relay.var(f"p{i}", shape=s, dtype=dtype) for i, s in enumerate(shapes)]
    return relay.Function(ps, fn(*ps)).with_attr("Primitive", 1)


def typed(body, *params):
    return relay.transform.InferType()(tvm.IRModule.from_expr(relay.Function(list(params), body)))


def chain(n, shape=(4, 8)):
    x = relay.var("x", shape=shape)
    y = x
    for _ in range(n):
        y = prim(relay.nn.relu, shape)(y)
    return typed(y, x)


# -- known plans ----------------------------------------------------------------------------
def test_chain_intermediates_take_two_buffers_of_one_arena():
    plan = plan_memory(chain(6))
    sids = plan.storage_ids
    assert len(set(sids)) == 3  # the input, the output, and the intermediates' arena
    assert sids[1:6] == [plan.arena_id] * 5
    assert plan.report.num_buffers == 5
    assert plan.report.planned_bytes == plan.report.lower_bound == 2 * 4 * 8 * 4
    assert plan.storage_sizes[plan.arena_id] == 2 * 4 * 8 * 4
    assert plan.report.total_bytes == 5 * 4 * 8 * 4
    assert {plan.storage_offsets[t] for t in range(1, 6)} == {0, 128}


def test_inputs_constants_outputs_never_share():
    x = relay.var("x", shape=(8,))
    c = relay.const(np.ones(8, "float32"))
    a = prim(relay.add, (8,), (8,))(x, c)
    b = prim(relay.nn.relu, (8,))(a)
    out = relay.Tuple([a, prim(relay.exp, (8,))(b)])
    plan = plan_memory(typed(out, x))
    df = plan.dataflow
    pinned = [t for t, info in enumerate(df.tensors) if info.kind != INTERMEDIATE]
    pinned += df.outputs
    for t in set(pinned):
        others = [u for u in range(len(df.tensors)) if u != t]
        assert all(plan.storage_ids[u] != plan.storage_ids[t] for u in others)
        assert plan.storage_offsets[t] == 0
        assert plan.storage_sizes[plan.storage_ids[t]] == df.tensors[t].nbytes


def test_dtypes_share_the_arena_at_whole_elements():
    x = relay.var("x", shape=(16,))
    a = prim(relay.nn.relu, (16,))(x)
    b = prim(lambda p: relay.cast(p, "int8"), (16,))(a)
    c = prim(relay.negative, (16,), dtype="int8")(b)
    d = prim(lambda p: relay.cast(p, "float64"), (16,), dtype="int8")(c)
    e = prim(relay.exp, (16,), dtype="float64")(d)
    plan = plan_memory(typed(e, x))
    assert plan.storage_ids[1:5] == [plan.arena_id] * 4  # float32, int8, int8, float64
    assert all(plan.storage_offsets[t] % 64 == 0 for t in range(1, 5))
    assert plan.report.planned_bytes == 64 + 128  # b or c (16 B each, padded) beside d


def test_a_small_tensor_takes_the_bytes_of_a_dead_large_one():
    x = relay.var("x", shape=(1024,))
    a = prim(relay.nn.relu, (1024,))(x)
    b = prim(lambda p: relay.sum(p, axis=0, keepdims=True), (1024,))(a)  # 1 element
    c = prim(relay.nn.relu, (1,))(b)
    d = prim(relay.nn.relu, (1,))(c)
    plan = plan_memory(typed(d, x))
    assert plan.report.planned_bytes == 4096 + 64  # a and b, then c where either was


def test_vector_dtypes_align_to_whole_elements():
    df = Dataflow(tensors=[TensorInfo((4,), "float32x3", INPUT)] + [
        TensorInfo((n,), "float32x3", INTERMEDIATE) for n in (5, 7, 2)],
        steps=[Step(None, [0], [1]), Step(None, [1], [2]), Step(None, [1, 2], [3])],
        outputs=[3])
    plan = plan_storage(df)
    assert all(plan.storage_offsets[t] % 192 == 0 for t in (1, 2))  # lcm(64, 12 bytes)


def test_reshape_only_group_aliases_its_input():
    x = relay.var("x", shape=(2, 8))
    a = prim(relay.nn.relu, (2, 8))(x)
    r = prim(lambda p: relay.reshape(p, (16,)), (2, 8))(a)
    b = prim(relay.exp, (16,))(r)
    c = prim(relay.exp, (16,))(b)
    plan = plan_memory(typed(c, x))
    nop = plan.dataflow.steps[1]
    assert nop.is_nop
    at = plan.storage_offsets
    assert plan.storage_ids[nop.outputs[0]] == plan.storage_ids[nop.inputs[0]]
    assert at[nop.outputs[0]] == at[nop.inputs[0]]
    assert at[3] != at[1]  # the alias keeps `a` alive while b is made


def test_unused_tuple_field_is_freed_at_once():
    x = relay.var("x", shape=(4,))
    two = prim(lambda p: relay.Tuple([relay.exp(p), relay.negative(p)]), (4,))(x)
    a = prim(relay.nn.relu, (4,))(relay.TupleGetItem(two, 0))
    b = prim(relay.nn.relu, (4,))(a)
    c = prim(relay.nn.relu, (4,))(b)
    plan = plan_memory(typed(c, x))
    df = plan.dataflow
    assert df.steps[0].outputs == [1, 2] and df.intervals()[2] == (0, 0)
    assert plan.report.lower_bound == 2 * 16
    assert plan.report.planned_bytes == 2 * 64  # the two fields, then a and b (64-byte aligned)


def test_report_prints():
    text = str(plan_memory(chain(3)).report)
    assert "buffers" in text and "lower bound" in text


# -- laws (hypothesis) ----------------------------------------------------------------------
@st.composite
def dataflows(draw):
    n_in = draw(st.integers(1, 3))
    n_steps = draw(st.integers(1, 12))
    tensors = [TensorInfo((draw(st.integers(1, 64)),), draw(st.sampled_from(["float32", "int8"])),
                          draw(st.sampled_from([INPUT, CONST]))) for _ in range(n_in)]
    steps = []
    for _ in range(n_steps):
        reads = draw(st.lists(st.integers(0, len(tensors) - 1), min_size=1, max_size=3))
        nop = draw(st.booleans()) and len(reads) == 1
        src = tensors[reads[0]]
        n_out = 1 if nop else draw(st.integers(1, 2))
        outs = list(range(len(tensors), len(tensors) + n_out))
        for _ in outs:
            tensors.append(src if nop else TensorInfo(
                (draw(st.integers(1, 256)),), draw(st.sampled_from(["float32", "int8"])),
                INTERMEDIATE))
        tensors[-1] = TensorInfo(tensors[-1].shape, tensors[-1].dtype, INTERMEDIATE)
        steps.append(Step(None, reads, outs, RESHAPE if nop else None))
    outputs = draw(st.lists(st.integers(n_in, len(tensors) - 1), min_size=1, max_size=3))
    return Dataflow(tensors=tensors, steps=steps, outputs=outputs)


@settings(max_examples=150, deadline=None)
@given(dataflows())
def test_storage_plan_laws(df):
    plan = plan_storage(df)
    places = df.alias_places()
    groups = df.groups()
    pinned = {places[t][0] for t in df.outputs} | {places[t][0] for t, i in
                                                  enumerate(df.tensors) if i.kind != INTERMEDIATE}
    owner: dict[int, int] = {}
    for t, sid in enumerate(plan.storage_ids):
        at, size = plan.storage_offsets[t], df.tensors[t].nbytes
        assert at + size <= plan.storage_sizes[sid]  # every tensor fits its storage
        assert at % max(1, size // max(1, df.tensors[t].shape[0])) == 0  # whole elements
        root = places[t][0]
        if root in pinned:  # inputs/consts/outputs share their storage with nobody
            assert owner.setdefault(sid, root) == root
            assert sid != plan.arena_id
        else:
            assert sid == plan.arena_id
    arena = [t for t, sid in enumerate(plan.storage_ids) if sid == plan.arena_id]
    for i, t in enumerate(arena):  # no two live groups share a byte
        for u in arena[i + 1:]:
            (rt, _), (ru, _) = places[t], places[u]
            if rt == ru:
                continue
            (s1, e1), (s2, e2) = groups[rt].interval, groups[ru].interval
            a, b = plan.storage_offsets[t], plan.storage_offsets[u]
            apart = a + df.tensors[t].nbytes <= b or b + df.tensors[u].nbytes <= a
            assert apart or e1 < s2 or e2 < s1, (t, u)
    assert plan.report.planned_bytes >= plan.report.lower_bound
    assert plan.report.planned_bytes <= sum(-(-groups[r].nbytes // 64) * 64 for r in groups
                                            if r not in pinned)


buffers = st.lists(st.tuples(st.integers(1, 500), st.integers(0, 20), st.integers(0, 8)),
                   max_size=25)


@settings(max_examples=150, deadline=None)
@given(buffers, st.sampled_from([1, 8, 16, 64]))
def test_arena_laws(bufs, alignment):
    sizes = [b[0] for b in bufs]
    intervals = [(b[1], b[1] + b[2]) for b in bufs]
    plan = plan_arena(sizes, intervals, alignment)
    assert plan.total >= plan.lower_bound >= lower_bound(sizes, intervals)
    assert plan.total <= sum(-(-s // alignment) * alignment for s in sizes)
    for i, (off, size) in enumerate(zip(plan.offsets, sizes)):
        assert off % alignment == 0 and off + size <= plan.total
        for j in range(i + 1, len(sizes)):
            live_together = intervals[i][0] <= intervals[j][1] and intervals[j][0] <= intervals[i][1]
            apart = off + size <= plan.offsets[j] or plan.offsets[j] + sizes[j] <= off
            assert not live_together or apart


def test_arena_of_a_chain_is_two_buffers():
    df = plan_memory(chain(5)).dataflow
    offsets, arena = plan_dataflow_arena(df, alignment=64)
    assert arena.total == arena.lower_bound == 2 * 128
    assert len(offsets) == 4  # intermediates only: not the input, not the output


def test_arena_bad_arguments():
    with pytest.raises(ValueError, match="alignment must be positive"):
        plan_arena([4], [(0, 1)], 0)
    with pytest.raises(ValueError, match="1 sizes but 2 intervals"):
        plan_arena([4], [(0, 1), (1, 2)])


def test_lower_bound_counts_overlap_at_shared_step():
    assert lower_bound([10, 20], [(0, 1), (1, 2)]) == 30
    assert lower_bound([10, 20], [(0, 1), (2, 3)]) == 20
    assert lower_bound([], []) == 0


def test_dynamic_shapes_are_refused_with_a_hint():
    x = relay.var("x", shape=(relay.Any(), 4))
    mod = typed(prim(relay.nn.relu, (relay.Any(), 4))(x), x)
    with pytest.raises(tvm.TVMError, match="dynamic shape.*use the VM"):
        plan_memory(mod)


def test_arena_reaches_the_lower_bound_on_resnet50_where_greedy_orders_miss():
    import json
    import pathlib

    from ember.relay.backend.memory_plan import _place

    data = json.loads((pathlib.Path(__file__).parent / "data" / "resnet50_arena.json").read_text())
    sizes, intervals = data["sizes"], [tuple(i) for i in data["intervals"]]
    largest_first = sorted(range(len(sizes)), key=lambda i: (-sizes[i], intervals[i][0]))
    greedy = _place(largest_first, sizes, intervals, 64)[1]
    plan = plan_arena(sizes, intervals, 64)
    assert greedy > plan.lower_bound  # the case the hill climb is for
    assert plan.total == plan.lower_bound
    assert plan_arena(sizes, intervals, 64).offsets == plan.offsets  # deterministic
