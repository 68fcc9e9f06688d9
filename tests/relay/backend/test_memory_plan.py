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
def test_chain_reuses_two_blocks():
    plan = plan_memory(chain(6))
    sids = plan.storage_ids
    assert len(set(sids)) == 4  # input, output, and two alternating intermediates
    assert plan.report.num_blocks == 2
    assert plan.report.planned_bytes == plan.report.lower_bound == 2 * 4 * 8 * 4
    assert plan.report.total_bytes == 5 * 4 * 8 * 4


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


def test_dtypes_do_not_share_storage():
    x = relay.var("x", shape=(16,))
    a = prim(relay.nn.relu, (16,))(x)
    b = prim(lambda p: relay.cast(p, "int32"), (16,))(a)
    c = prim(relay.negative, (16,), dtype="int32")(b)
    d = prim(lambda p: relay.cast(p, "float32"), (16,), dtype="int32")(c)
    plan = plan_memory(typed(d, x))
    assert plan.storage_dtypes[plan.storage_ids[2]] == "int32"  # b
    assert plan.storage_ids[3] != plan.storage_ids[1]  # c (int32) cannot reuse a (float32)


def test_sizes_beyond_the_match_range_get_new_blocks():
    x = relay.var("x", shape=(1024,))
    a = prim(relay.nn.relu, (1024,))(x)
    b = prim(lambda p: relay.sum(p, axis=0, keepdims=True), (1024,))(a)  # 1 element
    c = prim(relay.nn.relu, (1,))(b)
    d = prim(relay.nn.relu, (1,))(c)
    plan = plan_memory(typed(d, x))
    assert plan.storage_ids[3] != plan.storage_ids[1]  # 4 bytes never take a 4 KiB block


def test_reshape_only_group_aliases_its_input():
    x = relay.var("x", shape=(2, 8))
    a = prim(relay.nn.relu, (2, 8))(x)
    r = prim(lambda p: relay.reshape(p, (16,)), (2, 8))(a)
    b = prim(relay.exp, (16,))(r)
    plan = plan_memory(typed(b, x))
    nop = plan.dataflow.steps[1]
    assert nop.is_nop
    assert plan.storage_ids[nop.outputs[0]] == plan.storage_ids[nop.inputs[0]]
    assert plan.storage_ids[3] != plan.storage_ids[1]  # the alias keeps `a` alive


def test_unused_tuple_field_is_freed_at_once():
    x = relay.var("x", shape=(4,))
    two = prim(lambda p: relay.Tuple([relay.exp(p), relay.negative(p)]), (4,))(x)
    a = prim(relay.nn.relu, (4,))(relay.TupleGetItem(two, 0))
    b = prim(relay.nn.relu, (4,))(a)
    plan = plan_memory(typed(b, x))
    df = plan.dataflow
    assert df.steps[0].outputs == [1, 2] and df.intervals()[2] == (0, 0)
    assert plan.storage_ids[3] == plan.storage_ids[2]  # a reuses the dead field


def test_report_prints():
    text = str(plan_memory(chain(3)).report)
    assert "blocks" in text and "lower bound" in text


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
    roots = df.alias_roots()
    spans = df.intervals()
    group_span = {}
    for t, r in enumerate(roots):
        lo, hi = group_span.get(r, spans[t])
        group_span[r] = (min(lo, spans[t][0]), max(hi, spans[t][1]))
    pinned = {roots[t] for t in df.outputs} | {roots[t] for t, i in enumerate(df.tensors)
                                               if i.kind != INTERMEDIATE}
    by_sid = {}
    for t, sid in enumerate(plan.storage_ids):
        assert plan.storage_dtypes[sid] == df.tensors[t].dtype  # storage respects dtype
        assert plan.storage_sizes[sid] >= df.tensors[t].nbytes
        by_sid.setdefault(sid, set()).add(roots[t])
    for groups in by_sid.values():
        groups = sorted(groups)
        if len(groups) > 1:
            assert not pinned & set(groups)  # inputs/consts/outputs share with nobody
        for i, a in enumerate(groups):  # no two live groups share a storage id
            for b in groups[i + 1:]:
                (s1, e1), (s2, e2) = group_span[a], group_span[b]
                assert e1 < s2 or e2 < s1, (a, b, group_span[a], group_span[b])
    assert plan.report.planned_bytes >= plan.report.lower_bound
    assert plan.report.planned_bytes <= plan.report.total_bytes


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
