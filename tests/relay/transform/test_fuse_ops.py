"""FuseOps: grouping on known graphs (anchors, diamonds, reductions, opaque ops, tuples,
stop_fusion, lets, limits), the functions it builds, and the law that fusion keeps results."""
from __future__ import annotations

import numpy as np
import pytest
from _pass_helpers import (
    assert_main_equal,
    assert_same_result,
    count_primitives,
    dataflow_programs,
    law,
    parse,
    primitive_names,
    run,
)
from hypothesis import given, settings

import ember
from ember import relay
from ember.ir import IRModule
from ember.relay.transform import FuseOps, InferType
from ember.relay.transform import _fuse_graph as fuse_graph
from ember.relay.transform.fuse_ops import fused_function_name

CONV = """def @main(%x: Tensor[(1, 3, 8, 8), float32], %w: Tensor[(4, 3, 3, 3), float32],
                     %b: Tensor[(4), float32]) {
  %0 = nn.conv2d(%x, %w, padding=[1, 1, 1, 1]);
  %1 = nn.bias_add(%0, %b);
  nn.relu(%1)
}"""


def test_conv_bias_relu_is_one_group():
    expected = """def @main(%x: Tensor[(1, 3, 8, 8), float32], %w: Tensor[(4, 3, 3, 3), float32],
                         %b: Tensor[(4), float32]) {
      %0 = fn (%p0: Tensor[(1, 3, 8, 8), float32], %p1: Tensor[(4, 3, 3, 3), float32],
               %p2: Tensor[(4), float32], Primitive=1,
               func_name_hint="fused_nn_conv2d_nn_bias_add_nn_relu")
               -> Tensor[(1, 4, 8, 8), float32] {
        %1 = nn.conv2d(%p0, %p1, padding=[1, 1, 1, 1]);
        %2 = nn.bias_add(%1, %p2);
        nn.relu(%2)
      };
      %0(%x, %w, %b)
    }"""
    assert_main_equal(run(FuseOps(), CONV), expected)


def test_opt_level_zero_makes_singletons():
    out = run(FuseOps(fuse_opt_level=0), CONV)
    assert primitive_names(out) == ["fused_nn_conv2d", "fused_nn_bias_add", "fused_nn_relu"]
    with ember.transform.PassContext(opt_level=0):
        assert count_primitives(FuseOps()(parse(CONV))) == 3  # -1: the context's level


def test_diamond_of_elementwise_ops_fuses():
    before = """def @main(%x: Tensor[(4, 5), float32]) {
      %0 = add(%x, 1f);
      %1 = exp(%0);
      %2 = sqrt(%0);
      %3 = multiply(%1, %2);
      nn.relu(%3)
    }"""
    expected = """def @main(%x: Tensor[(4, 5), float32]) {
      %0 = fn (%p0: Tensor[(4, 5), float32], Primitive=1,
               func_name_hint="fused_add_exp_sqrt_multiply_nn_relu") -> Tensor[(4, 5), float32] {
        %1 = add(%p0, 1f);
        %2 = exp(%1);
        %3 = sqrt(%1);
        %4 = multiply(%2, %3);
        nn.relu(%4)
      };
      %0(%x)
    }"""
    assert_main_equal(run(FuseOps(), before), expected)


def test_diamond_through_conv_stays_apart():
    # The conv's result is used twice by a join whose path goes through another conv:
    # the anchor cannot absorb a non-elementwise path.
    before = """def @main(%x: Tensor[(1, 4, 6, 6), float32], %w: Tensor[(4, 4, 3, 3), float32]) {
      %0 = nn.conv2d(%x, %w, padding=[1, 1, 1, 1]);
      %1 = nn.relu(%0);
      %2 = nn.conv2d(%1, %w, padding=[1, 1, 1, 1]);
      add(%1, %2)
    }"""
    out = run(FuseOps(), before)
    assert primitive_names(out) == ["fused_nn_conv2d_nn_relu", "fused_nn_conv2d_add"]


def test_reduction_absorbs_elementwise_but_not_injective():
    before = """def @main(%x: Tensor[(4, 5), float32], %y: Tensor[(4, 5), float32]) {
      %0 = exp(add(%x, %y));
      %1 = sum(%0, axis=[1]);
      %2 = transpose(%x);
      (%1, max(%2, axis=[0]))
    }"""
    out = run(FuseOps(), before)
    assert sorted(primitive_names(out)) == ["fused_add_exp_sum", "fused_max", "fused_transpose"]


def test_costly_ops_are_not_recomputed_by_a_larger_consumer():
    """A log over (L, L) gathered per head and added to (B, H, L, L) scores (T5's relative
    position buckets) runs once per element as its own kernel; where the consumer iterates
    over no more elements, it still fuses."""
    before = """def @main(%r: Tensor[(?, ?), float32], %t: Tensor[(32, 4), float32],
                     %s: Tensor[(?, 4, ?, ?), float32]) {
      %0 = log(%r);
      %1 = cast(%0, dtype="int64");
      %2 = take(%t, %1, axis=0);
      %3 = transpose(%2, axes=[2, 0, 1]);
      add(%s, %3)
    }"""
    out = run(FuseOps(), before)
    assert primitive_names(out) == ["fused_log_cast", "fused_take_transpose_add"]
    same_size = """def @main(%x: Tensor[(2, 3), float32], %y: Tensor[(2, 3), float32]) {
      %0 = sqrt(%x);
      %1 = log(%0);
      add(%1, %y)
    }"""
    assert primitive_names(run(FuseOps(), same_size)) == ["fused_sqrt_log_add"]
    broadcast = """def @main(%g: Tensor[(1, 8, 1, 1), float32], %x: Tensor[(1, 8, 5, 5), float32]) {
      %0 = sigmoid(%g);
      multiply(%x, %0)
    }"""
    assert primitive_names(run(FuseOps(), broadcast)) == ["fused_sigmoid", "fused_multiply"]


def _value_gather(cast_only: bool = False) -> IRModule:
    """A table (a constant) gathered at indices made from a shape alone (ones_like of an input:
    its shape, not its bytes), transposed, added to data: T5's bias, gathered by its
    buckets. ``cast_only``: the value is only a cast of ones_like, elementwise."""
    x = relay.var("x", shape=(relay.Any(), relay.Any()), dtype="int64")
    s = relay.var("s", shape=(relay.Any(), 4, relay.Any(), relay.Any()), dtype="float32")
    idx = relay.ones_like(x)
    if cast_only:
        value = relay.cast(idx, "float32")
    else:
        table = relay.const(np.arange(128, dtype="float32").reshape(32, 4))
        value = relay.transpose(relay.take(table, idx, axis=0), axes=[2, 0, 1])
    return InferType()(IRModule.from_expr(relay.Function([x, s], relay.add(s, value))))


def test_a_value_group_does_not_fuse_into_data_in_a_dynamic_function(monkeypatch):
    """Point 5 of _fuse_graph: values made from shapes and constants alone keep a kernel of
    their own (the VM runs it once per input signature) where they do more than elementwise
    work; an elementwise one still fuses; the rule's switch off gives the old grouping."""
    assert primitive_names(run(FuseOps(), _value_gather())) == \
        ["fused_ones_like_take_transpose", "fused_add"]
    assert primitive_names(run(FuseOps(), _value_gather(cast_only=True))) == \
        ["fused_ones_like_cast_add"]
    monkeypatch.setattr(fuse_graph, "KEEP_VALUES_APART", False)
    assert primitive_names(run(FuseOps(), _value_gather())) == \
        ["fused_ones_like_take_transpose_add"]


def test_value_nodes_only_where_a_dimension_is_symbolic():
    static = """def @main(%x: Tensor[(2, 3), int64], %s: Tensor[(2, 3), int64]) {
      %0 = ones_like(%x);
      %1 = transpose(%0);
      %2 = transpose(%1);
      add(%s, %2)
    }"""
    mod = InferType()(parse(static))
    assert fuse_graph.value_nodes(fuse_graph.build_graph(mod["main"])) == set()
    graph = fuse_graph.build_graph(_value_gather()["main"])
    values = {type(n.ref).__name__ + ":" + getattr(getattr(n.ref, "op", None), "name", "")
              for n in graph.nodes if n.index in fuse_graph.value_nodes(graph)}
    assert values == {"Call:ones_like", "Constant:", "Call:take", "Call:transpose"}


def test_opaque_op_is_alone_and_elementwise_after_it_groups():
    before = """def @main(%x: Tensor[(4, 5), float32]) {
      %0 = add(%x, 1f);
      %1 = nn.softmax(%0);
      %2 = multiply(%1, 2f);
      exp(%2)
    }"""
    out = run(FuseOps(), before)
    assert primitive_names(out) == ["fused_add", "fused_nn_softmax", "fused_multiply_exp"]


def test_copy_to_a_blocked_layout_takes_no_producer():
    """Point 6: an NCHW -> NCHW16c transform the blocked-copy kernel runs is a group of its
    own (a producer inlined into it would gather 16 channel planes per vector); to a layout
    the kernel does not run (int32, channels-last source) it fuses as any injective op; the
    result is the same either way."""
    text = """def @main(%x: Tensor[(1, 32, 6, 6), {dt}]) {{
      %0 = multiply(%x, %x);
      %1 = nn.relu(%0);
      layout_transform(%1, src_layout="{src}", dst_layout="NCHW16c")
    }}"""
    alone = run(FuseOps(), text.format(dt="float32", src="NCHW"))
    assert primitive_names(alone) == ["fused_multiply_nn_relu", "fused_layout_transform"]
    x = np.random.default_rng(0).standard_normal((1, 32, 6, 6)).astype("float32")
    got = ember.compile(parse(text.format(dt="float32", src="NCHW")))(x)
    want = np.maximum(x * x, 0).reshape(1, 2, 16, 6, 6).transpose(0, 1, 3, 4, 2)
    np.testing.assert_allclose(got, want, rtol=1e-6)  # the kernel copies exactly
    fused = run(FuseOps(), text.format(dt="int32", src="NCHW"))
    assert primitive_names(fused) == ["fused_multiply_nn_relu_layout_transform"]
    other = run(FuseOps(), text.format(dt="float32", src="NHWC").replace("32, 6, 6", "6, 6, 32"))
    assert primitive_names(other) == ["fused_multiply_nn_relu_layout_transform"]


SHUFFLE = """def @main(%a: Tensor[(1, 4, 5, 7, 16), float32], %b: Tensor[(1, 58, 5, 7), float32]) {
  %0 = layout_transform(%a, src_layout="NCHW16c", dst_layout="NCHW");
  %1 = strided_slice(%0, begin=[0], end=[58], axes=[1]);
  %2 = (%b, %1);
  %3 = concatenate(%2, axis=1);
  %4 = reshape(%3, newshape=[1, 2, 58, 5, 7]);
  %5 = transpose(%4, axes=[0, 2, 1, 3, 4]);
  %6 = reshape(%5, newshape=[1, 116, 5, 7]);
  %7 = nn.pad(%6, 0f, pad_width=[[0, 0], [0, 12], [0, 0], [0, 0]]);
  layout_transform(%7, src_layout="NCHW", dst_layout="NCHW16c")
}"""


def test_channel_shuffle_into_blocks_is_not_inlined_into_the_copy():
    """Point 6 through ops that move whole image rows (ShuffleNetV2's concat, channel shuffle
    and pad into blocks, a blocked value read back): the shuffle runs along rows into a plain
    value and the kernel copies it into blocks (inlined, the copy's vector gathered 16
    channel planes: 152 us against 31 + 10 us at 116 x 28 x 28). A zero channel pad of a
    function input stays with the copy: the kernel pads as it copies."""
    shuffle, copy = primitive_names(run(FuseOps(), SHUFFLE))  # (a long name is hashed)
    assert shuffle.startswith("fused_layout_transform_strided_slice_concatenate_reshape_")
    assert copy == "fused_layout_transform"
    a = np.random.default_rng(0).standard_normal((1, 4, 5, 7, 16)).astype("float32")
    b = np.random.default_rng(1).standard_normal((1, 58, 5, 7)).astype("float32")
    got = ember.compile(parse(SHUFFLE))(a, b)
    plain = a.transpose(0, 1, 4, 2, 3).reshape(1, 64, 5, 7)[:, :58]
    shuffled = np.concatenate([b, plain], 1).reshape(1, 2, 58, 5, 7).transpose(0, 2, 1, 3, 4)
    want = np.pad(shuffled.reshape(1, 116, 5, 7), ((0, 0), (0, 12), (0, 0), (0, 0)))
    np.testing.assert_array_equal(got, want.reshape(1, 8, 16, 5, 7).transpose(0, 1, 3, 4, 2))
    pad_only = """def @main(%b: Tensor[(1, 58, 5, 7), float32]) {
      %0 = nn.pad(%b, 0f, pad_width=[[0, 0], [0, 6], [0, 0], [0, 0]]);
      layout_transform(%0, src_layout="NCHW", dst_layout="NCHW16c")
    }"""
    assert primitive_names(run(FuseOps(), pad_only)) == ["fused_nn_pad_layout_transform"]
HEADS = """def @main(%a: Tensor[(1, 3, 4, 5, 8), float32], %b: Tensor[(1, 3, 2, 3, 8), float32]) {{
  %0 = layout_transform(%a, src_layout="NCHW8c", dst_layout="{dst}");
  %1 = reshape(strided_slice(%0, begin=[0], end=[21], axes=[3]), newshape=[1, -1, 7]);
  %2 = layout_transform(%b, src_layout="NCHW8c", dst_layout="{dst}");
  %3 = reshape(strided_slice(%2, begin=[0], end=[21], axes=[3]), newshape=[1, -1, 7]);
  concatenate((%1, %3), axis={axis})
}}"""


def test_concat_of_channels_last_copies_takes_no_field():
    """Point 7: the levels of a detector head, each a blocked map copied channels-last (its
    first 21 channels, as (1, H * W * 3, 7)), stay one group each, and the concatenation
    (along an axis with extents of 1 before it) is a group of its own, which the planner
    makes in place; the built model computes the same either way."""
    text = HEADS.format(dst="NHWC", axis=1)
    out = run(FuseOps(), text)
    assert primitive_names(out) == ["fused_layout_transform_strided_slice_reshape"] * 2 + \
        ["fused_concatenate"]
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal(s).astype("float32") for s in [(1, 3, 4, 5, 8), (1, 3, 2, 3, 8)])
    got = ember.compile(parse(text))(a, b)
    want = np.concatenate([x.transpose(0, 2, 3, 1, 4).reshape(1, -1, 24)[..., :21]
                           .reshape(1, -1, 7) for x in (a, b)], axis=1)
    np.testing.assert_array_equal(got, want)  # the kernels copy exactly


def test_concat_of_other_copies_fuses_them():
    """Point 7 does not apply to a batch of two (each field is not one byte range of the
    result), nor to copies to NCHW."""
    batch = HEADS.format(dst="NHWC", axis=1).replace("(1, 3", "(2, 3").replace("[1, -1", "[2, -1")
    assert count_primitives(run(FuseOps(), batch)) == 1
    nchw = HEADS.format(dst="NCHW", axis=1).replace("axes=[3]", "axes=[1]")
    assert count_primitives(run(FuseOps(), nchw)) == 1


def test_injective_chain_and_tuple_into_concatenate():
    before = """def @main(%x: Tensor[(2, 3), float32], %y: Tensor[(3, 2), float32]) {
      %0 = transpose(%y);
      %1 = nn.relu(%x);
      %2 = (%1, %0);
      %3 = concatenate(%2);
      reshape(%3, newshape=[12])
    }"""
    out = run(FuseOps(), before)
    assert primitive_names(out) == ["fused_nn_relu_transpose_concatenate_reshape"]


def test_output_tuple_is_not_a_group():
    before = """def @main(%x: Tensor[(2, 3), float32]) {
      %0 = exp(%x);
      (%0, nn.relu(%0))
    }"""
    out = run(FuseOps(), before)
    body = out["main"].body
    assert isinstance(body, relay.Tuple) and count_primitives(out) == 2


def test_stop_fusion_splits_and_disappears():
    before = """def @main(%x: Tensor[(2, 3), float32]) {
      %0 = add(%x, 1f);
      %1 = annotation.stop_fusion(%0);
      nn.relu(%1)
    }"""
    out = run(FuseOps(), before)
    assert primitive_names(out) == ["fused_add", "fused_nn_relu"]
    assert "stop_fusion" not in out.astext()


def test_let_values_are_not_fused_through():
    before = """def @main(%x: Tensor[(2, 3), float32]) {
      let %a = exp(add(%x, 1f));
      nn.relu(%a)
    }"""
    out = run(FuseOps(), before)
    assert primitive_names(out) == ["fused_add_exp", "fused_nn_relu"]
    assert isinstance(out["main"].body, relay.Let)


def test_max_depth_bounds_group_size():
    x = relay.var("x", shape=(3,))
    y = x
    for _ in range(10):
        y = relay.add(y, relay.const(1.0))
    mod = InferType()(IRModule.from_expr(relay.Function([x], y)))
    assert count_primitives(run(FuseOps(), mod)) == 1
    small = run(FuseOps(), mod, **{"relay.FuseOps.max_depth": 3})
    assert count_primitives(small) > 3
    assert_same_result(mod, small, np.arange(3, dtype="float32"))
    with pytest.raises(ValueError, match="max_depth must be >= 1"):
        run(FuseOps(), mod, **{"relay.FuseOps.max_depth": 0})


def test_parameters_dedupe_and_constants():
    c = relay.const(np.arange(3, dtype="float32"))
    x = relay.var("x", shape=(3,))
    y = relay.multiply(relay.add(x, x), c) + relay.const(2.0)
    mod = InferType()(IRModule.from_expr(relay.Function([x], y)))
    out = run(FuseOps(), mod)
    call = out["main"].body
    func = call.op
    # x once, the vector constant passed in, the scalar inlined
    assert [p.name_hint for p in func.params] == ["p0", "p1"]
    assert call.args[0] is out["main"].params[0] and isinstance(call.args[1], relay.Constant)
    linked = run(FuseOps(), mod, **{"relay.FuseOps.link_params": True})
    assert len(linked["main"].body.op.params) == 1
    assert_same_result(mod, linked, np.ones(3, "float32"))


def test_reshape_only_groups_are_marked():
    out = run(FuseOps(), """def @main(%x: Tensor[(2, 3), float32]) {
      nn.relu(reshape(%x, newshape=[6]))
    }""", opt_level=0)
    funcs = [e for e in ember.ir.post_order(out["main"]) if isinstance(e, relay.Function)
             and e.get_attr("Primitive", 0)]
    marks = {f.get_attr("func_name_hint"): f.get_attr("relay.reshape_only") for f in funcs}
    assert marks == {"fused_reshape": 1, "fused_nn_relu": None}


def test_long_names_are_cut_with_a_hash():
    x = relay.var("x", shape=(3,))
    y = x
    for _ in range(30):
        y = relay.nn.relu(y)
    f = relay.Function([x], y)
    name = fused_function_name(f)
    assert name.startswith("fused_nn_relu_nn_relu") and len(name) == 80 + 17


def test_dense_bias_relu_and_mlp_group_count():
    x = relay.var("x", shape=(2, 8))
    w1, b1 = relay.var("w1", shape=(16, 8)), relay.var("b1", shape=(16,))
    w2, b2 = relay.var("w2", shape=(4, 16)), relay.var("b2", shape=(4,))
    h = relay.nn.relu(relay.nn.bias_add(relay.nn.dense(x, w1), b1))
    y = relay.nn.softmax(relay.nn.bias_add(relay.nn.dense(h, w2), b2))
    mod = InferType()(IRModule.from_expr(relay.Function([x, w1, b1, w2, b2], y)))
    out = run(FuseOps(), mod)
    assert primitive_names(out) == ["fused_nn_dense_nn_bias_add_nn_relu",
                                    "fused_nn_dense_nn_bias_add", "fused_nn_softmax"]
    rng = np.random.default_rng(1)
    args = [rng.normal(size=p.type_annotation.shape).astype("float32")
            for p in mod["main"].params]
    assert_same_result(mod, out, *args)


def test_residual_block_shares_producer():
    before = """def @main(%x: Tensor[(1, 4, 6, 6), float32], %w: Tensor[(4, 4, 3, 3), float32],
                         %s: Tensor[(4, 1, 1), float32]) {
      %0 = nn.relu(%x);
      %1 = nn.conv2d(%0, %w, padding=[1, 1, 1, 1]);
      %2 = multiply(%1, %s);
      %3 = nn.relu(%2);
      %4 = nn.conv2d(%3, %w, padding=[1, 1, 1, 1]);
      %5 = add(%4, %0);
      nn.relu(%5)
    }"""
    mod = parse(before)
    out = run(FuseOps(), mod)
    assert primitive_names(out) == ["fused_nn_relu", "fused_nn_conv2d_multiply_nn_relu",
                                    "fused_nn_conv2d_add_nn_relu"]
    rng = np.random.default_rng(2)
    args = [rng.normal(size=p.type_annotation.shape).astype("float32")
            for p in mod["main"].params]
    assert_same_result(mod, out, *args, rtol=1e-4, atol=1e-4)


def test_already_fused_module_is_stable():
    once = run(FuseOps(), CONV)
    twice = run(FuseOps(), once)
    assert_main_equal(twice, once)


def test_bad_options():
    with pytest.raises(ValueError, match="fuse_opt_level"):
        run(FuseOps(fuse_opt_level=-2), CONV)


@settings(max_examples=40, deadline=None)
@given(dataflow_programs())
def test_law_preserves_result(program):
    mod, args = program
    out = law(FuseOps, mod, args)
    ops = sum(1 for e in ember.ir.post_order(mod["main"]) if isinstance(e, relay.Call)
              and getattr(e.op, "name", "") != "annotation.stop_fusion")
    assert 1 <= count_primitives(out) <= ops
    law(lambda: FuseOps(fuse_opt_level=0), mod, args)


def test_projection_of_an_opaque_tuple():
    # A field used by an elementwise op joins its group through a tuple parameter; a field
    # read by an opaque op stays a projection in main.
    before = """def @main(%x: Tensor[(4, 6), float32]) {
      %0 = split(%x, indices_or_sections=2, axis=1);
      (exp(%0.0), nn.softmax(%0.1))
    }"""
    mod = parse(before)
    out = run(FuseOps(), mod)
    assert primitive_names(out) == ["fused_split", "fused_exp", "fused_nn_softmax"]
    exp_fn = next(e for e in ember.ir.post_order(out["main"]) if isinstance(e, relay.Function)
                  and e.get_attr("func_name_hint") == "fused_exp")
    assert isinstance(exp_fn.params[0].type_annotation, relay.TupleType)
    assert_same_result(mod, out, np.arange(24, dtype="float32").reshape(4, 6))


def test_match_branches_fuse_inside():
    before = """type Opt { Some(Tensor[(3), float32]), Nothing }
    def @main(%x: Tensor[(3), float32]) {
      %0 = exp(%x);
      match (Some(add(%0, 1f))) {
        Some(%y) => nn.relu(multiply(%y, %0)),
        Nothing => negative(%0),
      }
    }"""
    mod = parse(before)
    out = run(FuseOps(), mod)
    assert sorted(primitive_names(out)) == ["fused_add", "fused_exp", "fused_multiply_nn_relu",
                                            "fused_negative"]
    assert_same_result(mod, out, np.ones(3, "float32"))
