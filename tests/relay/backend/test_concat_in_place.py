"""Concatenations written in place by their producers (``_liveness.place_concats``).

Built models are compared bitwise with the copying build (PassContext option
``relay.backend.concat_in_place`` off: the same kernels, so results must be identical) and
with the reference interpreter (float32, rtol 1e-4, atol 1e-5). Planner laws run on
hand-built Dataflows.
"""
from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ember as tvm
from ember import relay
from ember.ir.transform import PassContext
from ember.relay.backend import Executor
from ember.relay.backend._liveness import (
    CONCAT,
    CONCAT_IN_PLACE_CONFIG,
    INPUT,
    INTERMEDIATE,
    SLICE,
    Dataflow,
    Step,
    TensorInfo,
)
from ember.relay.backend.memory_plan import plan_dataflow_arena, plan_storage

RTOL, ATOL = 1e-4, 1e-5


# -- hand-built dataflows -------------------------------------------------------------------
def _concat_df() -> Dataflow:
    """x -> a (step 0), b (step 1), c = f(a) (step 2), out = concat(a, b) (step 3), g(out)."""
    f32 = [TensorInfo((1, 4), "float32", INPUT)] + [
        TensorInfo(s, "float32", INTERMEDIATE) for s in [(1, 4), (1, 12), (1, 4), (1, 16), (1, 16)]]
    steps = [Step(None, [0], [1]), Step(None, [0], [2]), Step(None, [1], [3]),
             Step(None, [1, 2], [4], CONCAT), Step(None, [4], [5])]
    return Dataflow(tensors=f32, steps=steps, outputs=[5])


def test_concat_inputs_are_slices_of_the_output():
    df = _concat_df()
    assert df.alias_places() == [(0, 0), (4, 0), (4, 16), (3, 0), (4, 0), (5, 0)]
    group = df.groups()[4]
    assert sorted(group.members) == [1, 2, 4]
    assert group.nbytes == 64
    assert group.interval == (0, 4)  # from a's producer to the concat's reader


def test_planners_place_the_group_once():
    df = _concat_df()
    plan = plan_storage(df, alignment=16)
    assert plan.storage_ids[1:5] == [plan.arena_id] * 4  # the intermediates' arena
    at = plan.storage_offsets
    assert at[1] == at[4] and at[2] == at[4] + 16
    assert not (at[3] < at[4] + 64 and at[4] < at[3] + 16)  # c is made while the group lives
    offsets, arena = plan_dataflow_arena(df, alignment=16)
    assert offsets[2] == offsets[4] + 16 and offsets[1] == offsets[4]
    assert not (offsets[3] < offsets[4] + 64 and offsets[4] < offsets[3] + 16)


def test_slice_view_and_concat_compose():
    """a (8 bytes) sliced at 4 (s, 4 bytes, a SLICE view), then concat(a, b): s lands at 4."""
    t = [TensorInfo((1, 4), "float32", INPUT)] + [TensorInfo(s, "float32", INTERMEDIATE)
                                                    for s in [(1, 2), (1, 1), (1, 2), (1, 4)]]
    steps = [Step(None, [0], [1]), Step(None, [1], [2], SLICE, offset=4),
             Step(None, [0], [3]), Step(None, [1, 3], [4], CONCAT)]
    df = Dataflow(tensors=t, steps=steps, outputs=[4])
    assert df.alias_places()[1:] == [(4, 0), (4, 4), (4, 8), (4, 0)]


def test_nested_concat_places_parts_in_the_outer_output():
    t = [TensorInfo((1, 4), "float32", INPUT)] + [TensorInfo(s, "float32", INTERMEDIATE)
                                                    for s in [(1, 4), (1, 4), (1, 8), (1, 4),
                                                              (1, 12)]]
    steps = [Step(None, [0], [1]), Step(None, [0], [2]), Step(None, [1, 2], [3], CONCAT),
             Step(None, [0], [4]), Step(None, [3, 4], [5], CONCAT)]
    df = Dataflow(tensors=t, steps=steps, outputs=[5])
    assert df.alias_places()[1:] == [(5, 0), (5, 16), (5, 0), (5, 32), (5, 0)]


@st.composite
def dataflows_with_concats(draw):
    tensors = [TensorInfo((draw(st.integers(1, 16)),), "float32", INPUT)]
    steps: list[Step] = []
    free: list[int] = []  # kernel outputs not yet in a concat
    for _ in range(draw(st.integers(1, 14))):
        if len(free) >= 2 and draw(st.booleans()):
            parts = draw(st.lists(st.sampled_from(free), min_size=2, max_size=3, unique=True))
            for t in parts:
                free.remove(t)
            tensors.append(TensorInfo((sum(tensors[t].shape[0] for t in parts),), "float32",
                                      INTERMEDIATE))
            steps.append(Step(None, parts, [len(tensors) - 1], CONCAT))
            if draw(st.booleans()):
                free.append(len(tensors) - 1)  # may be a part of a later concat
            continue
        reads = draw(st.lists(st.integers(0, len(tensors) - 1), min_size=1, max_size=2))
        tensors.append(TensorInfo((draw(st.integers(1, 16)),), "float32", INTERMEDIATE))
        steps.append(Step(None, reads, [len(tensors) - 1]))
        free.append(len(tensors) - 1)
    return Dataflow(tensors=tensors, steps=steps, outputs=[len(tensors) - 1])


def _overlap(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


@settings(max_examples=150, deadline=None)
@given(dataflows_with_concats())
def test_no_two_live_tensors_share_bytes(df):
    """Tensors of different groups whose bytes overlap (same storage id, or the arena) are
    never alive at the same time; the members of a group stay within its extent."""
    places = df.alias_places()
    groups = df.groups()
    spans = df.intervals()
    plan = plan_storage(df)
    offsets, _ = plan_dataflow_arena(df, alignment=4)
    for t, (r, at) in enumerate(places):
        assert at + df.tensors[t].nbytes <= groups[r].nbytes
        assert groups[r].interval[0] <= spans[t][0] and spans[t][1] <= groups[r].interval[1]
    n = len(df.tensors)
    for t in range(n):
        for u in range(t + 1, n):
            (rt, at), (ru, au) = places[t], places[u]
            if rt == ru:
                continue
            apart = not _overlap(groups[rt].interval, groups[ru].interval)
            at, au = plan.storage_offsets[t], plan.storage_offsets[u]
            span_t, span_u = (at, at + df.tensors[t].nbytes), (au, au + df.tensors[u].nbytes)
            if plan.storage_ids[t] == plan.storage_ids[u] and _overlap(span_t, span_u):
                assert apart, (t, u)
            if t in offsets and u in offsets and _overlap(
                    (offsets[t], offsets[t] + df.tensors[t].nbytes),
                    (offsets[u], offsets[u] + df.tensors[u].nbytes)):
                assert apart, (t, u)


# -- built models -------------------------------------------------------------------------
def _typed_conv(x, x_shape, channels, kernel, name):
    w = relay.var(name, shape=(channels, x_shape[1], kernel, kernel))
    y = relay.nn.relu(relay.nn.conv2d(x, w, padding=(kernel // 2, kernel // 2)))
    return y, w, (x_shape[0], channels, x_shape[2], x_shape[3])


def _after(cat, channels, size=5):
    """A 1x1 conv reading ``cat`` (a conv does not fuse its input: the concat stays alone)."""
    y, w, _ = _typed_conv(cat, (1, channels, size, size), 4, 1, "w_after")
    return y, w


def fire(n=1, squeeze=8, expand=(16, 16), size=9, in_ch=12):
    """A squeezenet fire module and a 1x1 conv after it."""
    x = relay.var("data", shape=(n, in_ch, size, size))
    s, ws, s_shape = _typed_conv(x, (n, in_ch, size, size), squeeze, 1, "ws")
    e1, w1, _ = _typed_conv(s, s_shape, expand[0], 1, "w1")
    e3, w3, _ = _typed_conv(s, s_shape, expand[1], 3, "w3")
    cat = relay.concatenate([e1, e3], axis=1)
    out, wo, _ = _typed_conv(cat, (n, sum(expand), size, size), 8, 1, "wo")
    return relay.Function([x, ws, w1, w3, wo], out)


def three_convs(channels=(3, 5, 7), order=(0, 1, 2), size=6):
    """Three convs of one input, concatenated in ``order`` (the producers run 0, 1, 2)."""
    x = relay.var("data", shape=(1, 4, size, size))
    convs, ws = [], []
    for k, c in enumerate(channels):
        y, w, _ = _typed_conv(x, (1, 4, size, size), c, 3, f"w{k}")
        convs.append(y)
        ws.append(w)
    out, w = _after(relay.concatenate([convs[k] for k in order], axis=1), sum(channels), size)
    return relay.Function([x, *ws, w], out)


def _random_inputs(func, seed=0):
    rng = np.random.default_rng(seed)
    return {p.name_hint: rng.uniform(-1, 1, [int(d) for d in p.type_annotation.shape])
            .astype("float32") for p in func.params}


def _build(func, executor, in_place, opt_level=3, config=None):
    mod = tvm.IRModule.from_expr(func)
    cfg = {CONCAT_IN_PLACE_CONFIG: in_place, **(config or {})}
    with PassContext(opt_level=opt_level, config=cfg):
        return relay.build(mod, "llvm", executor=Executor(executor))


def _run(factory, inputs):
    m = factory["default"](tvm.cpu(0))
    m.set_input(**inputs)
    m.run()
    return [m.get_output(i).numpy() for i in range(m.get_num_outputs())]


def _reference(func, inputs):
    mod = tvm.IRModule.from_expr(func)
    out = relay.create_executor("debug", mod=mod).evaluate()(**inputs)
    return [out.numpy()] if isinstance(out, tvm.nd.NDArray) else [o.numpy() for o in out]


def _in_place_nodes(factory) -> int:
    """The graph's concatenations written in place (__nop nodes with several inputs)."""
    graph = json.loads(factory.get_graph_json())
    return sum(1 for n in graph["nodes"] if n.get("attrs", {}).get("func_name") == "__nop"
               and len(n["inputs"]) > 1)


def check(func, executor, opt_level=3, config=None, expect_in_place=None):
    """Built with and without concatenations in place: bitwise equal, and close to the
    reference interpreter. Returns the in-place build."""
    inputs = _random_inputs(func)
    copying = _run(_build(func, executor, False, opt_level, config), inputs)
    factory = _build(func, executor, True, opt_level, config)
    got = _run(factory, inputs)
    for a, b in zip(got, copying, strict=True):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(got, _reference(func, inputs), strict=True):
        np.testing.assert_allclose(a, b, rtol=RTOL, atol=ATOL)
    if executor == "graph" and expect_in_place is not None:
        assert _in_place_nodes(factory) == expect_in_place
    return factory


@pytest.mark.parametrize("executor", ["graph", "aot"])
@pytest.mark.parametrize("opt_level", [2, 3])
def test_fire_module_concat_costs_nothing(executor, opt_level):
    factory = check(fire(), executor, opt_level, expect_in_place=1)
    if executor == "graph":
        graph = json.loads(factory.get_graph_json())
        assert "storage_offset" in graph["attrs"]
        assert not any("concatenate" in n.get("attrs", {}).get("func_name", "")
                       for n in graph["nodes"])


@pytest.mark.parametrize("executor", ["graph", "aot"])
@pytest.mark.parametrize("order", [(0, 1, 2), (2, 1, 0), (1, 2, 0)])
def test_three_convs_in_any_order(executor, order):
    """Producers run in one order, their slices lie in another: a producer that wrote past
    its slice (or before it) would be caught by one of the orders. Odd channel counts at
    opt_level 2 (plain NCHW) put slices at offsets that are not 16-byte multiples."""
    check(three_convs(order=order), executor, 2, expect_in_place=1)
    check(three_convs(channels=(16, 32, 16), order=order), executor, 3, expect_in_place=1)


@pytest.mark.parametrize("executor", ["graph", "aot"])
def test_batch_of_two_is_a_copy(executor):
    check(fire(n=2), executor, 2, expect_in_place=0)


@pytest.mark.parametrize("executor", ["graph", "aot"])
def test_input_that_is_also_an_output_is_a_copy(executor):
    x = relay.var("data", shape=(1, 4, 5, 5))
    a, wa, _ = _typed_conv(x, (1, 4, 5, 5), 6, 1, "wa")
    b, wb, _ = _typed_conv(x, (1, 4, 5, 5), 6, 3, "wb")
    out, w = _after(relay.concatenate([a, b], axis=1), 12)
    func = relay.Function([x, wa, wb, w], relay.Tuple([out, a]))
    check(func, executor, 2, expect_in_place=0)


@pytest.mark.parametrize("executor", ["graph", "aot"])
def test_same_tensor_twice_or_a_graph_input_is_a_copy(executor):
    x = relay.var("data", shape=(1, 4, 5, 5))
    a, wa, _ = _typed_conv(x, (1, 4, 5, 5), 6, 1, "wa")
    out, w = _after(relay.concatenate([a, a], axis=1), 12)
    check(relay.Function([x, wa, w], out), executor, 2, expect_in_place=0)
    out, w = _after(relay.concatenate([a, x], axis=1), 10)
    check(relay.Function([x, wa, w], out), executor, 2, expect_in_place=0)


@pytest.mark.parametrize("executor", ["graph", "aot"])
def test_input_of_two_concats_is_placed_once(executor):
    x = relay.var("data", shape=(1, 4, 5, 5))
    a, wa, _ = _typed_conv(x, (1, 4, 5, 5), 6, 1, "wa")
    b, wb, _ = _typed_conv(x, (1, 4, 5, 5), 6, 3, "wb")
    c, wc, _ = _typed_conv(x, (1, 4, 5, 5), 6, 1, "wc")
    one, w1 = _after(relay.concatenate([a, b], axis=1), 12)
    two, w2 = _typed_conv(relay.concatenate([b, c], axis=1), (1, 12, 5, 5), 4, 1, "w2")[:2]
    check(relay.Function([x, wa, wb, wc, w1, w2], relay.Tuple([one, two])), executor, 2,
          expect_in_place=1)


@pytest.mark.parametrize("executor", ["graph", "aot"])
def test_input_read_by_others_stays_alive_in_its_slice(executor):
    """A skip tensor read by the concat and, later, by another conv (unet, yolov8's SPPF)."""
    x = relay.var("data", shape=(1, 4, 6, 6))
    a, wa, _ = _typed_conv(x, (1, 4, 6, 6), 5, 3, "wa")
    b, wb, _ = _typed_conv(a, (1, 5, 6, 6), 7, 3, "wb")
    cat = relay.concatenate([a, b], axis=1)
    c, wc, _ = _typed_conv(cat, (1, 12, 6, 6), 4, 3, "wc")
    d, wd, _ = _typed_conv(a, (1, 5, 6, 6), 4, 1, "wd")
    check(relay.Function([x, wa, wb, wc, wd], relay.add(c, d)), executor, 2,
          expect_in_place=1)


@pytest.mark.parametrize("executor", ["graph", "aot"])
def test_concat_that_is_the_output_is_written_there(executor):
    x = relay.var("data", shape=(1, 4, 5, 5))
    a, wa, _ = _typed_conv(x, (1, 4, 5, 5), 6, 1, "wa")
    b, wb, _ = _typed_conv(x, (1, 4, 5, 5), 3, 3, "wb")
    check(relay.Function([x, wa, wb], relay.concatenate([a, b], axis=1)), executor, 2,
          expect_in_place=1)


@pytest.mark.parametrize("executor", ["graph", "aot"])
def test_concat_fused_with_an_elementwise_op_stays_a_kernel(executor):
    x = relay.var("data", shape=(1, 4, 5, 5))
    a, wa, _ = _typed_conv(x, (1, 4, 5, 5), 6, 1, "wa")
    b, wb, _ = _typed_conv(x, (1, 4, 5, 5), 6, 3, "wb")
    out = relay.nn.relu(relay.concatenate([a, b], axis=1))
    check(relay.Function([x, wa, wb], out), executor, 2, expect_in_place=0)


def test_channels_not_whole_blocks():
    """At opt_level 3, 20-channel convs (not whole 16-wide blocks) concatenated: whatever
    the layout pass makes of them, the in-place build equals the copying one."""
    check(fire(squeeze=8, expand=(20, 12)), "graph", 3)
    check(fire(squeeze=8, expand=(20, 12)), "aot", 3)


def test_aot_with_usmp():
    check(fire(), "aot", 3, {"tir.usmp.enable": True})


@pytest.mark.parametrize("use_workspace_io", [False, True])
def test_aot_c_interface_with_pools(use_workspace_io):
    """The C interface run by ember.testing.aot (the inputs and outputs in the pools too)."""
    from ember.micro.testing import AOT_DEFAULT_RUNNER
    from ember.testing.aot import AOTTestModel, compile_models, generate_ref_data, run_and_check

    func = fire(size=5)
    mod = relay.transform.InferType()(tvm.IRModule.from_expr(func))
    inputs = _random_inputs(func)
    model = AOTTestModel(module=mod, inputs=inputs, outputs=generate_ref_data(mod, inputs))
    config = {"tir.usmp.enable": True, "tir.usmp.use_workspace_io": use_workspace_io}
    compiled = compile_models(model, "c", True, pass_config=config)
    run_and_check(compiled, AOT_DEFAULT_RUNNER, "c", use_workspace_io=use_workspace_io)


def test_exported_library_loads_and_runs(tmp_path):
    func = fire()
    inputs = _random_inputs(func)
    factory = _build(func, "graph", True)
    want = _run(factory, inputs)
    factory.export_library(tmp_path / "fire.so")
    loaded = tvm.runtime.load_module(tmp_path / "fire.so")
    m = loaded["default"](tvm.cpu(0))
    m.set_input(**inputs)
    m.run()
    np.testing.assert_array_equal(m.get_output(0).numpy(), want[0])


def test_debug_executor_reports_the_concat_as_free():
    from ember.runtime import debug_executor

    func = fire()
    factory = _build(func, "graph", True)
    m = debug_executor.create(factory.get_graph_json(), factory.get_lib(), tvm.cpu(0))
    m.set_input(**_random_inputs(func))
    times = m.run_individual(number=1)
    graph = json.loads(factory.get_graph_json())
    concat = [i for i, n in enumerate(graph["nodes"]) if len(n["inputs"]) > 1
              and n.get("attrs", {}).get("func_name") == "__nop"]
    assert len(concat) == 1 and times[concat[0]] == 0.0


# -- slices as views ------------------------------------------------------------------------
def _views(factory) -> list[int]:
    """The byte offsets of the graph's one-input __nop nodes' outputs (views) in their
    inputs."""
    graph = json.loads(factory.get_graph_json())
    offsets = graph["attrs"].get("storage_offset", ["list_int", [0] * 10**6])[1]
    rows = graph["node_row_ptr"]
    return [offsets[rows[i]] - offsets[rows[n["inputs"][0][0]] + n["inputs"][0][1]]
            for i, n in enumerate(graph["nodes"])
            if n.get("attrs", {}).get("func_name") == "__nop" and len(n["inputs"]) == 1]


@pytest.mark.parametrize("executor", ["graph", "aot"])
def test_contiguous_slice_is_a_view(executor):
    x = relay.var("data", shape=(1, 4, 5, 5))
    t, wt, _ = _typed_conv(x, (1, 4, 5, 5), 8, 1, "wt")
    y = relay.strided_slice(t, begin=[5], end=[8], axes=[1])
    out, w = _typed_conv(y, (1, 3, 5, 5), 4, 3, "w")[:2]
    other, w2, _ = _typed_conv(t, (1, 8, 5, 5), 4, 1, "w2")  # t is read by others too
    factory = check(relay.Function([x, wt, w, w2], relay.add(out, other)), executor, 2)
    if executor == "graph":
        assert 5 * 25 * 4 in _views(factory)


@pytest.mark.parametrize("executor", ["graph", "aot"])
def test_slice_of_rows_or_of_a_batch_is_a_copy(executor):
    x = relay.var("data", shape=(2, 4, 5, 5))
    t, wt, _ = _typed_conv(x, (2, 4, 5, 5), 8, 1, "wt")
    y = relay.strided_slice(t, begin=[4], end=[8], axes=[1])  # N=2: two byte ranges
    rows = relay.strided_slice(t, begin=[1], end=[3], axes=[2])  # rows of every channel
    out, w = _typed_conv(y, (2, 4, 5, 5), 4, 1, "w")[:2]
    factory = check(relay.Function([x, wt, w], relay.Tuple([out, relay.exp(rows)])),
                    executor, 2)
    if executor == "graph":
        assert _views(factory) == []


@pytest.mark.parametrize("executor", ["graph", "aot"])
@pytest.mark.parametrize("opt_level", [2, 3])
def test_c2f_concat_of_a_split_is_in_place(executor, opt_level):
    """yolov8's C2f: cv1's output split in two, the second half read by a bottleneck, and
    both halves concatenated with the bottleneck's output: the halves are cv1's output, so
    cv1 writes into the concat's output, the split is a view and nothing is copied."""
    check(c2f(), executor, opt_level, expect_in_place=1)


def c2f(c=16):
    x = relay.var("data", shape=(1, 8, 6, 6))
    t, w1, _ = _typed_conv(x, (1, 8, 6, 6), 2 * c, 1, "w1")
    y0 = relay.strided_slice(t, begin=[0], end=[c], axes=[1])
    y1 = relay.strided_slice(t, begin=[c], end=[2 * c], axes=[1])
    m, w2, _ = _typed_conv(y1, (1, c, 6, 6), c, 3, "w2")
    out, w3 = _after(relay.concatenate([y0, y1, m], axis=1), 3 * c, 6)
    return relay.Function([x, w1, w2, w3], out)


@st.composite
def slices(draw):
    rank = draw(st.integers(1, 4))
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=rank, max_size=rank)))
    axes = draw(st.lists(st.integers(0, rank - 1), min_size=1, max_size=rank, unique=True))
    begin = [draw(st.integers(-shape[a], shape[a] - 1)) for a in axes]
    end = [draw(st.integers((b % shape[a]) + 1, shape[a])) for a, b in zip(axes, begin)]
    return shape, axes, begin, end


@settings(max_examples=200, deadline=None)
@given(slices())
def test_slice_offset_is_the_slice_when_contiguous(case):
    """Whenever slice_offset gives an offset, the slice is that run of the flat input."""
    from ember.relay.backend._in_place import slice_offset

    shape, axes, begin, end = case
    x = relay.var("x", shape=shape, dtype="int32")
    mod = relay.transform.InferType()(tvm.IRModule.from_expr(relay.Function(
        [x], relay.strided_slice(x, begin=begin, end=end, axes=axes))))
    offset = slice_offset(mod["main"].body)
    data = np.arange(np.prod(shape), dtype="int32").reshape(shape)
    index = [slice(None)] * len(shape)
    for a, b, e in zip(axes, begin, end):
        index[a] = slice(b % shape[a], e)
    want = data[tuple(index)]
    contiguous = np.array_equal(want.ravel(), np.arange(want.size) + want.ravel()[0])
    if offset is not None:
        assert offset == 4 * int(want.ravel()[0]) and contiguous
    elif all(shape[a] == 1 for a in range(len(shape) - 1)):
        assert not contiguous or want.size == 0  # a vector's slices are always found


# -- the VM -----------------------------------------------------------------------------------
def _vm(func, inputs, in_place, opt_level=3):
    mod = tvm.IRModule.from_expr(func)
    with PassContext(opt_level=opt_level, config={CONCAT_IN_PLACE_CONFIG: in_place}):
        exe = relay.vm.compile(mod, "llvm")
    vm = tvm.runtime.vm.VirtualMachine(exe, tvm.cpu(0))
    runs = []
    for _ in range(2):  # interpreted, then (once main has its plan) the native calls
        out = vm.run(**inputs)
        runs.append([o.numpy() for o in ([out] if isinstance(out, tvm.nd.NDArray) else out)])
    for a, b in zip(*runs, strict=True):
        np.testing.assert_array_equal(a, b)
    return runs[1], exe.bytecode


@pytest.mark.parametrize("make, calls", [
    (fire, 4),  # squeeze, two expands, the conv after: the concat makes no call
    (lambda: three_convs(order=(2, 0, 1)), 4),
    (lambda: fire(n=2), 5),  # a batch of two: the concat is a copy
    (c2f, 5),  # a concat of a slice: a copy in the VM (no offset views there)
])
@pytest.mark.parametrize("opt_level", [2, 3])
def test_vm_places_concat_inputs_in_its_arena(make, calls, opt_level):
    func = make()
    inputs = _random_inputs(func)
    copying, _ = _vm(func, inputs, False, opt_level)
    got, code = _vm(func, inputs, True, opt_level)
    for a, b in zip(got, copying, strict=True):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(got, _reference(func, inputs), strict=True):
        np.testing.assert_allclose(a, b, rtol=RTOL, atol=ATOL)
    assert code.count("invoke_packed") == calls


def test_vm_concat_that_is_returned_is_a_copy():
    x = relay.var("data", shape=(1, 4, 5, 5))
    a, wa, _ = _typed_conv(x, (1, 4, 5, 5), 6, 1, "wa")
    b, wb, _ = _typed_conv(x, (1, 4, 5, 5), 3, 3, "wb")
    func = relay.Function([x, wa, wb], relay.concatenate([a, b], axis=1))
    inputs = _random_inputs(func)
    got, code = _vm(func, inputs, True, 2)
    assert code.count("invoke_packed") == 3  # the result escapes: its own storage, a copy
    np.testing.assert_array_equal(got[0], _vm(func, inputs, False, 2)[0][0])


@pytest.mark.parametrize("executor", ["graph", "aot", "vm"])
def test_concat_output_through_the_model_call(executor):
    """ember.compile's call writes outputs straight into the caller's array where it can
    (model_call.direct_sites): a concatenation written in place by two convs is such an
    output; both calls (new arrays each time) hold the whole result."""
    rng = np.random.default_rng(5)
    x = relay.var("data", shape=(1, 16, 6, 6))
    a = relay.nn.conv2d(x, relay.const(rng.standard_normal((16, 16, 1, 1)).astype("float32")))
    b = relay.nn.conv2d(x, relay.const(rng.standard_normal((16, 16, 3, 3)).astype("float32")),
                        padding=(1, 1))
    func = relay.Function([x], relay.concatenate([a, b], axis=1))
    model = tvm.compile(tvm.IRModule.from_expr(func), executor=executor)
    for scale in (1.0, -2.0):
        xv = (rng.standard_normal((1, 16, 6, 6)) * scale).astype("float32")
        np.testing.assert_allclose(model(xv), _reference(func, {"data": xv})[0],
                                   rtol=1e-5, atol=1e-4)
