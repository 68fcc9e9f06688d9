"""``relay.dataflow_pattern`` partition and rewrite, as Relay-era scripts use them; every
transformed program is run and compared with numpy."""
from __future__ import annotations

import numpy as np
import pytest

import ember as tvm
from ember import relay
from ember.relay.dataflow_pattern import (
    DFPatternCallback,
    FunctionPattern,
    dominates,
    is_constant,
    is_op,
    is_var,
    partition,
    rewrite,
    wildcard,
)

RNG = np.random.default_rng(0)
D = RNG.standard_normal((1, 3, 8, 8)).astype("float32")
W = RNG.standard_normal((4, 3, 3, 3)).astype("float32")
B = RNG.standard_normal((4,)).astype("float32")


def _run(expr, *args):
    func = expr if isinstance(expr, relay.Function) else \
        relay.Function(relay.analysis.free_vars(expr), expr)
    return relay.create_executor("debug", mod=tvm.IRModule.from_expr(func)).evaluate()(*args)


def _conv_ref(d, w):
    out = np.zeros((1, 4, 8, 8), "float32")
    padded = np.pad(d, ((0, 0), (0, 0), (1, 1), (1, 1)))
    for i in range(8):
        for j in range(8):
            out[0, :, i, j] = np.tensordot(w, padded[0, :, i:i + 3, j:j + 3], axes=3)
    return out


def _conv_bias_relu():
    d, w = relay.var("d", shape=(1, 3, 8, 8)), relay.var("w", shape=(4, 3, 3, 3))
    conv = relay.nn.conv2d(d, w, padding=(1, 1))
    return relay.Function([d, w], relay.nn.relu(relay.nn.bias_add(conv, relay.const(B))))


def _cbr_pattern(bias=None):
    conv = is_op("nn.conv2d")(wildcard(), wildcard())
    return is_op("nn.relu")(is_op("nn.bias_add")(conv, bias or is_constant()))


def test_partition_makes_a_composite_function_that_computes_the_same():
    func = _conv_bias_relu()
    body = _cbr_pattern().partition(func.body, {"Composite": "conv_bias_relu"})
    call = body
    assert isinstance(call, relay.Call) and isinstance(call.op, relay.Function)
    inner = call.op
    assert inner.get_attr("Composite") == "conv_bias_relu"
    assert inner.get_attr("PartitionedFromPattern") == "nn.conv2d_nn.bias_add_nn.relu_"
    assert [p.name_hint for p in inner.params] == ["FunctionVar_0_0", "FunctionVar_0_1"]
    assert call.args == func.params  # the constant stays inside (is_constant)
    got = _run(relay.Function(func.params, body), D, W).numpy()
    np.testing.assert_allclose(got, np.maximum(_conv_ref(D, W) + B.reshape(1, 4, 1, 1), 0),
                               rtol=1e-4, atol=1e-4)


def test_a_wildcard_bias_becomes_a_parameter():
    func = _conv_bias_relu()
    body = partition(_cbr_pattern(bias=wildcard()), func.body)
    assert len(body.op.params) == 3 and isinstance(body.args[2], relay.Constant)


def test_check_decides_per_match():
    func = _conv_bias_relu()
    kept = partition(_cbr_pattern(), func.body, check=lambda pre: False)
    tvm.ir.assert_structural_equal(kept, func.body)
    seen = []
    partition(_cbr_pattern(), func.body, check=lambda pre: seen.append(pre) or True)
    assert seen == [func.body]


def test_partitioned_functions_are_not_partitioned_again():
    func = _conv_bias_relu()
    once = partition(_cbr_pattern(), func.body)
    twice = partition(_cbr_pattern(), once)
    tvm.ir.assert_structural_equal(once, twice)


def test_overlapping_matches_group_from_the_output():
    x = relay.var("x", shape=(3,))
    y = relay.nn.relu(relay.nn.relu(relay.nn.relu(x)))
    pat = is_op("nn.relu")(is_op("nn.relu")(wildcard()))
    out = partition(pat, y)
    assert isinstance(out.op, relay.Function)  # the outer two relus
    assert out.args[0].op.name == "nn.relu" and out.args[0].args[0] is x
    v = np.array([-1.0, 0.5, 2.0], "float32")
    np.testing.assert_allclose(_run(out, v).numpy(), np.maximum(v, 0))


def test_a_region_whose_inside_is_used_outside_is_not_partitioned():
    x = relay.var("x", shape=(3,))
    inner = relay.exp(x)
    y = relay.Tuple([relay.nn.relu(inner), inner])
    out = partition(is_op("nn.relu")(is_op("exp")(wildcard())), y)
    tvm.ir.assert_structural_equal(out, y)


def test_partition_a_diamond():
    d, w = relay.var("d", shape=(1, 3, 8, 8)), relay.var("w", shape=(4, 3, 3, 3))
    relu = relay.nn.relu(relay.nn.conv2d(d, w, padding=(1, 1)))
    out = relu + relay.nn.leaky_relu(relu, alpha=0.1)
    elemwise = wildcard().has_attr({"TOpPattern": 0})(wildcard())
    diamond = dominates(is_op("nn.conv2d")(wildcard(), wildcard()), elemwise,
                        is_op("add")(wildcard(), wildcard()))
    part = diamond.partition(out)
    assert part.op.get_attr("PartitionedFromPattern") == "nn.conv2d_nn.relu_nn.leaky_relu_add_"
    ref = np.maximum(_conv_ref(D, W), 0)
    want = ref + np.where(ref > 0, ref, 0.1 * ref)
    np.testing.assert_allclose(_run(relay.Function([d, w], part), D, W).numpy(), want,
                               rtol=1e-4, atol=1e-4)


def test_partitioning_a_function_pattern_changes_nothing():
    x = relay.var("x")
    f = relay.Function([x], x)
    assert partition(FunctionPattern(None, wildcard()), f) is f


class AddToMultiply(DFPatternCallback):
    """x + x -> x * 2"""

    def __init__(self):
        super().__init__()
        self.x = wildcard()
        self.pattern = is_op("add")(self.x, self.x)

    def callback(self, pre, post, node_map):
        x = node_map[self.x][0]
        return relay.multiply(x, relay.const(2.0))


def test_rewrite_replaces_and_computes_the_same():
    x = relay.var("x", shape=(3,))
    y = relay.nn.relu(x + x) - relay.nn.relu(x + x) * relay.const(0.5)
    out = rewrite(AddToMultiply(), y)
    ops = set()
    relay.analysis.post_order_visit(out, lambda e: ops.add(e.op.name) if isinstance(
        e, relay.Call) else None)
    assert "add" not in ops and "multiply" in ops
    v = np.array([-1.0, 0.5, 2.0], "float32")
    np.testing.assert_allclose(_run(out, v).numpy(), 0.5 * np.maximum(2 * v, 0))


class CollapseRelu(DFPatternCallback):
    """relu(relu(x)) -> relu(x)"""

    def __init__(self, rewrite_once=False):
        super().__init__(rewrite_once=rewrite_once)
        self.x = wildcard()
        self.pattern = is_op("nn.relu")(is_op("nn.relu")(self.x))

    def callback(self, pre, post, node_map):
        return relay.nn.relu(node_map[self.x][0])


def _relus(y):
    n = 0
    while isinstance(y, relay.Call):
        n, y = n + 1, y.args[0]
    return n


def test_rewrite_runs_until_nothing_changes_or_once():
    x = relay.var("x", shape=(3,))
    y = x
    for _ in range(4):
        y = relay.nn.relu(y)
    assert _relus(rewrite(CollapseRelu(), y)) == 1
    assert _relus(CollapseRelu(rewrite_once=True).rewrite(y)) == 2


def test_node_map_holds_rewritten_expressions_and_the_root():
    x = relay.var("x", shape=(3,))
    seen = {}

    class Spy(DFPatternCallback):
        def __init__(self):
            super().__init__(rewrite_once=True)
            self.inner = is_op("exp")(wildcard())
            self.pattern = is_op("nn.relu")(self.inner)

        def callback(self, pre, post, node_map):
            seen.update(pre=pre, post=post, inner=node_map[self.inner], root=node_map[self.pattern])
            return post

    y = relay.nn.relu(relay.exp(x + x))
    out = rewrite([AddToMultiply(), Spy()], y)
    assert seen["pre"].op.name == "nn.relu" and seen["root"] == [seen["post"]]
    assert seen["inner"][0].args[0].op.name == "multiply"  # after the first callback
    assert out.args[0].args[0].op.name == "multiply"


def test_require_type_types_the_program_for_dtype_patterns():
    class CastAway(DFPatternCallback):
        def __init__(self):
            super().__init__(require_type=True)
            self.x = wildcard().has_dtype("float32")
            self.pattern = is_op("cast")(self.x).has_dtype("float32")

        def callback(self, pre, post, node_map):
            return node_map[self.x][0]

    x = relay.var("x", shape=(3,), dtype="float32")
    y = relay.exp(relay.cast(x, "float32"))
    out = rewrite(CastAway(), y)
    assert out.args[0] is not None and isinstance(out.args[0], relay.Var)
    v = np.array([0.0, 1.0, 2.0], "float32")
    np.testing.assert_allclose(_run(out, v).numpy(), np.exp(v), rtol=1e-6)


def test_rewrite_and_partition_deep_programs_without_recursion():
    x = relay.var("x", shape=(2,))
    y = x
    for _ in range(10000):
        y = relay.negative(y)

    class DropDoubleNegation(DFPatternCallback):
        def __init__(self):
            super().__init__()
            self.x = wildcard()
            self.pattern = is_op("negative")(is_op("negative")(self.x))

        def callback(self, pre, post, node_map):
            return node_map[self.x][0]

    assert rewrite(DropDoubleNegation(), y) is x
    parts = partition(is_op("negative")(is_op("negative")(is_var("x"))), y)
    assert _relus(parts) == 9999  # only the innermost pair reads %x


def test_bad_callbacks_are_named():
    class NoPattern(DFPatternCallback):
        def callback(self, pre, post, node_map):
            return post

    x = relay.var("x")
    with pytest.raises(TypeError, match=r"NoPattern.pattern must be a dataflow pattern"):
        rewrite(NoPattern(), x)
    with pytest.raises(TypeError, match=r"callbacks\[1\] is a str"):
        rewrite([AddToMultiply(), "cb"], x)

    class ReturnsNone(DFPatternCallback):
        def __init__(self):
            super().__init__()
            self.pattern = is_op("nn.relu")(wildcard())

        def callback(self, pre, post, node_map):
            return None

    with pytest.raises(tvm.TVMError, match="ReturnsNone.callback returned NoneType"):
        rewrite(ReturnsNone(), relay.nn.relu(x))

    class Unimplemented(DFPatternCallback):
        def __init__(self):
            super().__init__()
            self.pattern = is_op("nn.relu")(wildcard())

    with pytest.raises(NotImplementedError, match="must override callback"):
        rewrite(Unimplemented(), relay.nn.relu(x))
    with pytest.raises(TypeError, match="partition: attrs must be a dict"):
        partition(wildcard(), x, attrs=["Composite"])
