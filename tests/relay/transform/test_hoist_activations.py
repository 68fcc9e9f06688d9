"""HoistActivations: an activation after transposes, reshapes and a concatenation moves onto
the values they rearrange (before/expected pairs), the graphs it must leave alone, results
against the unrewritten graph (interpreter), and a detector head whose sigmoid lands in the
blocked convs' epilogues."""
from __future__ import annotations

import pytest
from _pass_helpers import assert_main_equal, assert_rewrites, run

import ember
from ember.relay.transform import HoistActivations

LEVELS = "%a: Tensor[(1, 6, 2, 3), float32], %b: Tensor[(1, 6, 1, 2), float32]"

CASES = {
    "head_of_two_levels": (  # EfficientDet's scores: sigmoid(concat(levels channels last))
        f"def @main({LEVELS}) {{ %0 = reshape(transpose(exp(%a), axes=[0, 2, 3, 1]), "
        "newshape=[1, -1, 3]); %1 = reshape(transpose(exp(%b), axes=[0, 2, 3, 1]), "
        "newshape=[1, -1, 3]); sigmoid(concatenate((%0, %1), axis=1)) }",
        f"def @main({LEVELS}) {{ %0 = reshape(transpose(sigmoid(exp(%a)), axes=[0, 2, 3, 1]), "
        "newshape=[1, -1, 3]); %1 = reshape(transpose(sigmoid(exp(%b)), axes=[0, 2, 3, 1]), "
        "newshape=[1, -1, 3]); concatenate((%0, %1), axis=1) }"),
    "one_level": (
        f"def @main({LEVELS}) {{ nn.relu(transpose(negative(%a), axes=[0, 2, 3, 1])) }}",
        f"def @main({LEVELS}) {{ transpose(nn.relu(negative(%a)), axes=[0, 2, 3, 1]) }}"),
    "activation_with_attrs": (
        f"def @main({LEVELS}) {{ clip(reshape(abs(%a), newshape=[6, 6]), a_min=0f, "
        "a_max=6f) }",
        f"def @main({LEVELS}) {{ reshape(clip(abs(%a), a_min=0f, a_max=6f), "
        "newshape=[6, 6]) }"),
}

LEFT_ALONE = [
    # a parameter under the transpose: no producer to take the activation
    f"def @main({LEVELS}) {{ sigmoid(transpose(%a, axes=[0, 2, 3, 1])) }}",
    # the transposed value has another reader
    f"def @main({LEVELS}) {{ %0 = transpose(exp(%a), axes=[0, 2, 3, 1]); "
    "(sigmoid(%0), %0) }",
    # the producer has another reader
    f"def @main({LEVELS}) {{ %0 = exp(%a); (sigmoid(transpose(%0, axes=[0, 2, 3, 1])), %0) }}",
    # one field of the concatenation is a parameter
    f"def @main({LEVELS}) {{ %0 = reshape(exp(%a), newshape=[1, -1]); "
    "%1 = reshape(%b, newshape=[1, -1]); sigmoid(concatenate((%0, %1), axis=1)) }",
    # not an epilogue activation (the epilogues take none of these)
    f"def @main({LEVELS}) {{ negative(transpose(exp(%a), axes=[0, 2, 3, 1])) }}",
    # not a rearrangement: a slice computes fewer elements than its input has
    f"def @main({LEVELS}) {{ sigmoid(strided_slice(exp(%a), begin=[0], end=[2], axes=[1])) }}",
]


@pytest.mark.parametrize("case", sorted(CASES))
def test_rewrite(case):
    assert_rewrites(HoistActivations(), *CASES[case])


@pytest.mark.parametrize("before", LEFT_ALONE)
def test_left_alone(before):
    assert_main_equal(run(HoistActivations(), before), before)


def test_hoisted_activation_keeps_its_onnx_node_name():
    from ember import relay

    x = relay.var("x", shape=(1, 2, 3, 3))
    sig = relay.sigmoid(relay.transpose(relay.exp(x), (0, 2, 3, 1)))
    span = ember.ir.Span(ember.ir.SourceName("node_Sigmoid_7"), 0, 0, 0, 0)
    sig = relay.Call(sig.op, sig.args, sig.attrs, span=span)
    out = run(HoistActivations(), ember.IRModule.from_expr(relay.Function([x], sig)))
    moved = out["main"].body.args[0]
    assert moved.op.name == "sigmoid" and "node_Sigmoid_7" in str(moved.span)


def test_a_chain_of_rearrangements_as_long_as_the_program():
    """3000 reshapes between the producer and the activation: no recursion per step."""
    from ember import relay

    x = relay.var("x", shape=(2, 3, 4, 5))
    y = relay.exp(x)
    for i in range(3000):
        y = relay.reshape(y, (2, 3, 20) if i % 2 == 0 else (2, 3, 4, 5))
    out = run(HoistActivations(), ember.IRModule.from_expr(relay.Function([x], relay.sigmoid(y))))
    body = out["main"].body
    for _ in range(3000):
        assert body.op.name == "reshape"
        body = body.args[0]
    assert body.op.name == "sigmoid" and body.args[0].op.name == "exp"
