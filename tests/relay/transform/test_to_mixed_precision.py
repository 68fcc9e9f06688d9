"""ToMixedPrecision as Relay-era scripts use it: ALWAYS/FOLLOW/NEVER placement, float32
accumulation for conv2d/dense, user overrides through register_mixed_precision_conversion,
missing_op_mode, keep_orig_output_dtype; results stay close to float32 on the interpreter and
the compiled graph executor."""
from __future__ import annotations

import numpy as np
import pytest
from _pass_helpers import assert_main_equal, evaluate, parse, run

import ember as tvm
from ember import relay
from ember.contrib import cc
from ember.relay.op import register_mixed_precision_conversion
from ember.relay.op.mixed_precision import KEY
from ember.relay.transform import ToMixedPrecision
from ember.relay.transform import mixed_precision as mp

CNN = """def @main(%x: Tensor[(1, 3, 8, 8), float32], %w: Tensor[(4, 3, 3, 3), float32],
                   %b: Tensor[(4), float32], %d: Tensor[(10, 64), float32]) {
  %0 = nn.relu(nn.bias_add(nn.conv2d(%x, %w, padding=[1, 1, 1, 1]), %b));
  %1 = nn.batch_flatten(nn.max_pool2d(%0, pool_size=[2, 2], strides=[2, 2]));
  nn.softmax(nn.dense(%1, %d))
}"""
CNN_FP16 = """def @main(%x: Tensor[(1, 3, 8, 8), float32], %w: Tensor[(4, 3, 3, 3), float32],
                        %b: Tensor[(4), float32], %d: Tensor[(10, 64), float32]) {
  %0 = nn.conv2d(cast(%x, dtype="float16"), cast(%w, dtype="float16"), padding=[1, 1, 1, 1],
                 out_dtype="float32");
  %1 = nn.relu(nn.bias_add(cast(%0, dtype="float16"), cast(%b, dtype="float16")));
  %2 = nn.batch_flatten(nn.max_pool2d(%1, pool_size=[2, 2], strides=[2, 2]));
  nn.softmax(nn.dense(%2, cast(%d, dtype="float16"), out_dtype="float32"))
}"""


def _args(mod, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.uniform(-1, 1, [int(d) for d in p.checked_type.shape]).astype("float32")
            for p in mod["main"].params]


@pytest.fixture
def restore_rules():
    """Tests that register rules at a higher level put the defaults back afterwards."""
    saved = {n: dict(relay.op.get(n).op_def.extra) for n in ("nn.conv2d", "exp", "nn.relu")}
    yield
    for name, extra in saved.items():
        relay.op.get(name).op_def.extra.clear()
        relay.op.get(name).op_def.extra.update(extra)


def test_cnn_placement_and_float32_accumulation():
    mod = parse(CNN)
    out = run(ToMixedPrecision("float16"), mod)
    assert_main_equal(out, CNN_FP16)
    args = _args(mod)
    np.testing.assert_allclose(evaluate(out, *args), evaluate(mod, *args), rtol=1e-2, atol=1e-3)


def test_follow_op_after_never_op_stays_float32():
    before = """def @main(%x: Tensor[(4, 4), float32], %w: Tensor[(4, 4), float32]) {
      %0 = exp(nn.dense(%x, %w));
      (add(%0, 1f), nn.relu(nn.dense(%x, %w)))
    }"""
    expected = """def @main(%x: Tensor[(4, 4), float32], %w: Tensor[(4, 4), float32]) {
      %0 = cast(%x, dtype="float16");
      %1 = cast(%w, dtype="float16");
      %2 = nn.dense(%0, %1, out_dtype="float32");
      %3 = nn.dense(%0, %1, out_dtype="float32");
      (add(exp(%2), 1f), nn.relu(cast(%3, dtype="float16")))
    }"""
    # casts are shared; the two dense calls were two nodes before and stay two
    assert_main_equal(run(ToMixedPrecision(), before), expected)


def test_let_bound_values_take_the_new_type():
    before = """def @main(%x: Tensor[(2, 2), float32]) {
      let %y: Tensor[(2, 2), float32] = nn.dense(%x, %x);
      add(%y, %y)
    }"""
    out = run(ToMixedPrecision(), before)
    assert str(out["main"].body.var.checked_type.dtype) == "float16"
    assert out["main"].checked_type.ret_type.dtype == "float16"


def test_keep_orig_output_dtype():
    mod = parse(CNN.replace("nn.softmax(", "nn.relu("))
    with tvm.transform.PassContext(config={"relay.ToMixedPrecision.keep_orig_output_dtype": True}):
        out = ToMixedPrecision()(mod)
    assert out["main"].checked_type.ret_type.dtype == "float32"
    assert ToMixedPrecision()(mod)["main"].checked_type.ret_type.dtype == "float16"


def test_user_override_at_a_higher_level(restore_rules):
    @register_mixed_precision_conversion("nn.conv2d", level=11)
    def never(call, mixed_type):
        return [mp.MIXED_PRECISION_NEVER, "float32", "float32"]

    out = run(ToMixedPrecision(), CNN)
    conv = [n for n in tvm.ir.post_order(out["main"])
            if isinstance(n, relay.Call) and getattr(n.op, "name", "") == "nn.conv2d"]
    assert conv[0].checked_type.dtype == "float32" and conv[0].attrs.out_dtype == ""
    with pytest.raises(ValueError, match="nn.conv2d already has a rule at level 11"):
        register_mixed_precision_conversion("nn.conv2d", never, level=11)
    register_mixed_precision_conversion("nn.conv2d", lambda c, t: [0, t, t], level=3)  # ignored
    assert relay.op.get("nn.conv2d").op_def.extra[KEY][1] == 11


def test_follow_everything_with_fp16_accumulation(restore_rules):
    register_mixed_precision_conversion(
        "exp", lambda call, t: [mp.MIXED_PRECISION_ALWAYS, t, t], level=11)
    out = run(ToMixedPrecision(), "def @main(%x: Tensor[(3), float32]) { exp(%x) }")
    assert_main_equal(out, 'def @main(%x: Tensor[(3), float32]) { exp(cast(%x, dtype="float16")) }')


def test_bad_rule_result_names_the_op(restore_rules):
    register_mixed_precision_conversion("nn.relu", lambda call, t: [0, t], level=12)
    with pytest.raises(tvm.TVMError, match=r"the mixed-precision rule of nn.relu returned \[0, "
                                           r"'float16'\]; expected \[category"):
        run(ToMixedPrecision(), "def @main(%x: Tensor[(3), float32]) { nn.relu(%x) }")


def test_missing_op_modes():
    text = "def @main(%x: Tensor[(3), float32]) { sin(%x) }"
    with pytest.raises(tvm.TVMError, match=r"ops without a mixed-precision rule: sin \(1x\)"):
        run(ToMixedPrecision(missing_op_mode=0), text)
    with pytest.warns(UserWarning, match="op sin has no mixed-precision rule"):
        out = run(ToMixedPrecision(missing_op_mode=1), text)
    # treated as FOLLOW: a variable input is cast once
    assert_main_equal(out, 'def @main(%x: Tensor[(3), float32]) { sin(cast(%x, dtype="float16")) }')


@pytest.mark.parametrize("kwargs, match", [
    ({"mixed_precision_type": "int8"}, "mixed_precision_type must be a floating-point dtype"),
    ({"missing_op_mode": 3}, "missing_op_mode must be 0, 1 or 2, got 3"),
    ({"missing_op_mode": "1"}, "missing_op_mode must be 0, 1 or 2, got '1'"),
])
def test_bad_options(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ToMixedPrecision(**kwargs)


def test_match_is_refused():
    mod = tvm.IRModule()
    p = relay.prelude.Prelude(mod)
    x = relay.var("x", shape=(2,))
    mod["main"] = relay.Function([x], relay.Call(p.hd, [relay.Call(p.cons, [x, p.nil()])]))
    with pytest.raises(tvm.TVMError, match="match expressions .* are not supported"):
        ToMixedPrecision()(relay.transform.InferType()(mod))


def test_compiled_float16_model_matches_float32():
    if cc.get_cc() is None:
        pytest.skip("no C compiler found")
    mod = parse(CNN)
    out = ToMixedPrecision()(mod)
    lib = relay.build(out, target="c")
    gm = tvm.contrib.graph_executor.GraphModule(lib["default"](tvm.cpu()))
    args = _args(mod, seed=1)
    for p, a in zip(mod["main"].params, args):
        gm.set_input(p.name_hint, a)
    gm.run()
    np.testing.assert_allclose(gm.get_output(0).numpy(), evaluate(mod, *args), rtol=1e-2,
                               atol=1e-3)
