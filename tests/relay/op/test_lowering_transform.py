"""Lowered data-movement ops (reshapes, transpose, squeeze, broadcast_to, tile, repeat, reverse,
layout_transform, shape_of, concatenate, stack, split, take, strided_slice) and creation ops vs
their numpy references, with hypothesis-drawn shapes and attrs; one compile per example."""
from __future__ import annotations

import numpy as np
from _lowering_util import Case, build, check_cases, need_cc, prim_func, rand, reference, run, sweep
from hypothesis import strategies as st
from strategies import shapes

from ember.ir.types import Any as AnyDim
from ember.ir.types import TensorType
from ember.relay.backend.te_compiler import TECompiler


def _seed(data: st.DataObject) -> np.random.Generator:
    return np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))


@st.composite
def newshapes(draw, shape: tuple) -> tuple:
    """A valid reshape target for ``shape`` using Relay's special values."""
    n = len(shape)
    forms = ["merge", "(-1,)", "(-2,)"] + (["(0,-1)", "(-3,-2)"] if n >= 2 else []) + (
        ["-4"] if n >= 1 and shape[0] % 2 == 0 else [])
    form = draw(st.sampled_from(forms))
    if form == "(-1,)":
        return (-1,)
    if form == "(-2,)":
        return (-2,)
    if form == "(0,-1)":
        return (0, -1)
    if form == "(-3,-2)":
        return (-3, -2)
    if form == "-4":
        return (-4, 2, -1, -2)
    groups, cur = [], 1
    for d in shape:  # merge neighbouring dims at random, then maybe write one as -1
        cur *= d
        if draw(st.booleans()):
            groups.append(cur)
            cur = 1
    groups.append(cur)
    if draw(st.booleans()):
        groups[draw(st.integers(0, len(groups) - 1))] = -1
    return tuple(groups)


def _reshapes_and_permutations(data: st.DataObject) -> None:
    rng = _seed(data)
    cases = []
    shape = data.draw(shapes(0, 4), label="reshape")
    x = rand(rng, shape)
    cases.append(Case("reshape", [x], {"newshape": data.draw(newshapes(shape))}))
    rshape = tuple(reversed(data.draw(shapes(2, 4), label="reverse_reshape")))
    cases.append(Case("contrib_reverse_reshape", [rand(rng, rshape)],
                      {"newshape": data.draw(st.sampled_from([(-1, 0), (0, -1), (-1,)]))}))
    like = data.draw(st.permutations(shape)) if shape else ()
    cases.append(Case("reshape_like", [x, rand(rng, tuple(like))]))
    if shape:
        cases.append(Case("nn.batch_flatten", [x]))
        perm = data.draw(st.one_of(st.none(), st.permutations(range(len(shape)))))
        cases.append(Case("transpose", [x], {"axes": None if perm is None else tuple(perm)}))
        axis = data.draw(st.integers(-len(shape), len(shape) - 1))
        cases.append(Case("reverse", [x], {"axis": axis}))
        cases.append(Case("repeat", [x], {"repeats": data.draw(st.integers(1, 3)), "axis": axis}))
    cases.append(Case("tile", [x], {"reps": tuple(data.draw(st.lists(
        st.integers(1, 3), min_size=1, max_size=len(shape) + 1)))}))
    cases.append(Case("expand_dims", [x], {"axis": data.draw(st.integers(-len(shape) - 1,
                                                                          len(shape))),
                                           "num_newaxis": data.draw(st.integers(0, 2))}))
    sq = data.draw(shapes(1, 4, max_side=3), label="squeeze")
    ones = [i for i, d in enumerate(sq) if d == 1]
    axis = data.draw(st.one_of(st.none(), st.lists(st.sampled_from(ones), unique=True).map(
        tuple))) if ones else None
    cases.append(Case("squeeze", [rand(rng, sq)], {"axis": axis}))
    cases.append(Case("shape_of", [x], {"dtype": data.draw(st.sampled_from(["int32", "int64"]))}))
    check_cases(cases)


test_reshapes_and_permutations, test_reshapes_and_permutations_wide = sweep(
    _reshapes_and_permutations)


@st.composite
def broadcast_source(draw, target: tuple) -> tuple:
    keep = draw(st.integers(0, len(target)))
    return tuple(1 if draw(st.booleans()) else d for d in target[len(target) - keep:])


def _broadcast_and_layouts(data: st.DataObject) -> None:
    rng = _seed(data)
    target = data.draw(shapes(0, 4), label="target")
    src = data.draw(broadcast_source(target))
    dtype = data.draw(st.sampled_from(["float32", "int32", "bool"]))
    cases = [Case("broadcast_to", [rand(rng, src, dtype)], {"shape": target}),
             Case("broadcast_to_like", [rand(rng, src, dtype), rand(rng, target)])]
    n, c, h, w = (data.draw(st.integers(1, 3)), 4 * data.draw(st.integers(1, 3)),
                  data.draw(st.integers(1, 5)), data.draw(st.integers(1, 5)))
    x = rand(rng, (n, c, h, w))
    for dst in ("NHWC", "NCHW4c", "CHWN"):
        cases.append(Case("layout_transform", [x], {"src_layout": "NCHW", "dst_layout": dst}))
    blocked = rand(rng, (n, c // 4, h, w, 4))
    cases.append(Case("layout_transform", [blocked], {"src_layout": "NCHW4c",
                                                      "dst_layout": "NHWC"}))
    check_cases(cases)


test_broadcast_and_layouts, test_broadcast_and_layouts_wide = sweep(_broadcast_and_layouts)


def _joins_and_splits(data: st.DataObject) -> None:
    rng = _seed(data)
    base = data.draw(shapes(1, 4), label="base")
    axis = data.draw(st.integers(-len(base), len(base) - 1))
    parts = []
    for _ in range(data.draw(st.integers(1, 3))):
        s = list(base)
        s[axis] = data.draw(st.integers(1, 4))
        parts.append(rand(rng, s))
    cases = [Case("concatenate", [parts], {"axis": axis}),
             Case("stack", [[rand(rng, base) for _ in parts]],
                  {"axis": data.draw(st.integers(-len(base) - 1, len(base)))})]
    x = rand(rng, base)
    d = base[axis]
    sections = data.draw(st.sampled_from([k for k in range(1, d + 1) if d % k == 0]))
    cases.append(Case("split", [x], {"indices_or_sections": sections, "axis": axis}))
    idx = tuple(sorted(data.draw(st.lists(st.integers(0, d + 2), min_size=1, max_size=3))))
    cases.append(Case("split", [x], {"indices_or_sections": idx, "axis": axis}))
    check_cases(cases)


test_joins_and_splits, test_joins_and_splits_wide = sweep(_joins_and_splits)


def _take_and_strided_slice(data: st.DataObject) -> None:
    rng = _seed(data)
    shape = data.draw(shapes(1, 4), label="data")
    x = rand(rng, shape)
    cases = []
    for mode in ("clip", "wrap", "fast"):
        axis = data.draw(st.one_of(st.none(), st.integers(-len(shape), len(shape) - 1)))
        n = int(np.prod(shape)) if axis is None else shape[axis]
        ishape = data.draw(shapes(0, 2), label="indices")
        lo, hi = (-n, n - 1) if mode == "fast" else (-2 * n - 1, 2 * n + 1)
        idx = rng.integers(lo, hi + 1, size=ishape).astype(data.draw(st.sampled_from(
            ["int32", "int64"])))
        cases.append(Case("take", [x, idx], {"axis": axis, "mode": mode}))
    if len(shape) >= 2:  # batch_dims: the first axis of data and indices walk together
        idx = rng.integers(0, shape[1], size=(shape[0], 3)).astype("int32")
        cases.append(Case("take", [x, idx], {"axis": 1, "batch_dims": 1}))
    for mode in ("end", "size"):
        k = data.draw(st.integers(1, len(shape)))
        begin = tuple(data.draw(st.integers(-8, 8)) for _ in range(k))
        end = tuple(data.draw(st.integers(-8, 8)) for _ in range(k))
        strides = tuple(data.draw(st.sampled_from([1, 2, 3, -1, -2])) for _ in range(
            data.draw(st.integers(1, k))))
        axes = data.draw(st.one_of(st.none(), st.permutations(range(len(shape))).map(
            lambda p, k=k: tuple(p[:k]))))
        cases.append(Case("strided_slice", [x], {"begin": begin, "end": end, "strides": strides,
                                                 "axes": axes, "slice_mode": mode}))
    check_cases(cases)


test_take_and_strided_slice, test_take_and_strided_slice_wide = sweep(_take_and_strided_slice)


def _creation(data: st.DataObject) -> None:
    rng = _seed(data)
    shape = data.draw(shapes(0, 4), label="shape")
    dtype = data.draw(st.sampled_from(["float32", "int32", "float64", "uint8"]))
    x = rand(rng, shape, dtype, 0, 9)
    fill = np.array(data.draw(st.integers(-3, 3)), "float32")
    start = data.draw(st.integers(-5, 5))
    step = data.draw(st.sampled_from([1, 2, 0.5, -1, -1.5]))
    stop = start + step * data.draw(st.integers(0, 9))
    indices = rng.integers(-1, 6, size=data.draw(shapes(0, 3))).astype("int32")
    ax = data.draw(st.integers(-1, indices.ndim))
    cases = [Case("zeros", [], {"shape": shape, "dtype": dtype}),
             Case("ones", [], {"shape": shape, "dtype": dtype}),
             Case("full", [fill], {"shape": shape, "dtype": dtype}),
             Case("zeros_like", [x]), Case("ones_like", [x]),
             Case("full_like", [x, fill.astype(dtype)]),
             Case("arange", [np.array(v, "float32") for v in (start, stop, step)],
                  {"start": start, "stop": stop, "step": step, "dtype": "float32"}),
             Case("one_hot", [indices, np.array(2, "int32"), np.array(-1, "int32")],
                  {"depth": 5, "axis": ax, "dtype": data.draw(st.sampled_from(
                      ["float32", "int32"]))})]
    check_cases(cases)


test_creation, test_creation_wide = sweep(_creation)


def test_reshape_of_symbolic_batch_runs_at_several_sizes():
    need_cc()
    compiler = TECompiler()
    dyn = TensorType((AnyDim(), 3, 4), "float32")
    proto = Case("reshape", [np.zeros((2, 3, 4), "float32")], {"newshape": (-1, 6)},
                 types=[dyn])
    lowered = compiler.lower(prim_func(proto))
    assert lowered.outputs[0].shape[1] == 6 and isinstance(lowered.outputs[0].shape[0], str)
    mod = build([lowered], compiler)
    for n in (1, 2, 5):
        case = Case("reshape", [rand(np.random.default_rng(n), (n, 3, 4))], {"newshape": (-1, 6)})
        want = reference(case)
        np.testing.assert_array_equal(run(mod, lowered, case.args, want)[0], want[0])


def test_arange_with_a_run_time_length_fills_the_buffer_it_is_given():
    need_cc()
    compiler = TECompiler()
    args = [np.array(v, "float32") for v in (2.0, 9.0, 0.5)]
    proto = Case("arange", args, {"dtype": "float32"})  # no start/stop/step attrs: length ?
    lowered = compiler.lower(prim_func(proto))
    assert isinstance(lowered.outputs[0].shape[0], str)
    mod = build([lowered], compiler)
    for start, stop, step in [(2.0, 9.0, 0.5), (0.0, 3.0, 1.0), (5.0, -1.0, -1.5)]:
        case = Case("arange", [np.array(v, "float32") for v in (start, stop, step)],
                    {"dtype": "float32"})
        want = reference(case)
        np.testing.assert_allclose(run(mod, lowered, case.args, want)[0], want[0], rtol=1e-6)


def test_concatenate_of_short_rows_reads_every_input():
    """GCC 12 at -O3 -march=native (AVX) once built an all-zero load mask for the second input
    of this short constant-trip loop; ember compiles with -fno-tree-loop-if-convert since."""
    need_cc()
    import ember
    from ember import relay

    a, b = relay.var("a", shape=(2, 2)), relay.var("b", shape=(3, 2))
    mod = ember.IRModule.from_expr(relay.Function([a, b], relay.concatenate([a, b], axis=0)))
    m = relay.build(mod, "llvm")["default"](ember.cpu())
    x, y = np.arange(4, dtype="float32").reshape(2, 2), np.arange(6, dtype="float32").reshape(3, 2)
    m.set_input("a", x)
    m.set_input("b", y + 10)
    m.run()
    np.testing.assert_array_equal(m.get_output(0).numpy(), np.concatenate([x, y + 10]))


def test_channel_slice_of_a_blocked_transform_matches_numpy():
    # AlterOpLayout's padded conv output: NCHW8c back to NCHW, then its real channels (the
    # lowering makes the pair one copy that drops the padded lanes)
    import ember
    from ember import relay

    need_cc()
    x = relay.var("x", shape=(2, 3, 5, 7, 8), dtype="float32")
    y = relay.strided_slice(relay.layout_transform(x, "NCHW8c", "NCHW"), [0], [21], axes=[1])
    with ember.transform.PassContext(opt_level=3):
        lib = relay.build(ember.IRModule.from_expr(relay.Function([x], y)), target="llvm")
    gm = ember.contrib.graph_executor.GraphModule(lib["default"](ember.cpu(0)))
    v = rand(np.random.default_rng(5), (2, 3, 5, 7, 8))
    gm.set_input("x", v)
    gm.run()
    want = v.transpose(0, 1, 4, 2, 3).reshape(2, 24, 5, 7)[:, :21]
    np.testing.assert_array_equal(gm.get_output(0).numpy(), want)
