"""NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss against onnxruntime: every
reduction, with and without weights, ignore_index in and out of the class range, ranks 2 to
4; and the errors a wrong model gets."""
from __future__ import annotations

import numpy as np
import pytest
from _onnx_util import SUMS, check, graph_model, node_case, rand, run_graph
from onnx import TensorProto as TP
from onnx import helper

from ember.runtime.errors import FrontendError, OpAttributeUnImplemented

RNG = np.random.default_rng(7)


def _cases(op: str) -> list:
    cases = []
    for rank in (2, 3, 4):
        spatial = (3, 2)[: rank - 2]
        scores = rand(RNG, 2, 5, *spatial)
        valid = RNG.integers(0, 5, size=(2, *spatial)).astype("int64")
        weight = rand(RNG, 5, lo=0.5, hi=2.0)
        for reduction in ("mean", "sum", "none"):
            for weighted in (False, True):
                for ignore in (None, -1, 2):
                    attrs = {"reduction": reduction}
                    target = valid.copy()
                    if ignore is not None:  # -1: the ignored class is out of range
                        attrs["ignore_index"] = ignore
                        target.reshape(-1)[::2] = ignore
                    inits = {"w": weight} if weighted else {}
                    name = f"r{rank}_{reduction}_{int(weighted)}_{ignore}".replace("-", "m")
                    cases.append(node_case(name, op, {"x": scores, "t": target}, inits=inits,
                                           tol=SUMS, **attrs))
    return cases


def test_negative_log_likelihood_loss_matches_onnxruntime():
    check(_cases("NegativeLogLikelihoodLoss"), opset=13)


def test_softmax_cross_entropy_loss_matches_onnxruntime_with_log_prob():
    cases = _cases("SoftmaxCrossEntropyLoss")
    for c in cases[::3]:  # also the second output, log_softmax(scores)
        c.nodes[0].output.append("out1")
        c.outputs.append("out1")
    check(cases, opset=13)


def _loss_model(op: str, target_type: int = TP.INT64, target_shape=(2,), **attrs):
    return graph_model(
        [helper.make_node(op, ["x", "t"], ["y"], name="loss", **attrs)],
        inputs=[helper.make_tensor_value_info("x", TP.FLOAT, [2, 3]),
                helper.make_tensor_value_info("t", target_type, list(target_shape))])


@pytest.mark.parametrize("op", ["NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss"])
def test_loss_errors_name_the_node(op):
    with pytest.raises(FrontendError, match=rf"{op} node 'loss': target must be an integer "
                                            "tensor, got float32"):
        run_graph(_loss_model(op, TP.FLOAT), {})
    with pytest.raises(FrontendError, match=r"and target \(N, d1, ...\), got ranks 2 and 2"):
        run_graph(_loss_model(op, target_shape=(2, 3)), {})
    with pytest.raises(OpAttributeUnImplemented, match="attribute reduction='max' is not "
                                                       "supported"):
        run_graph(_loss_model(op, reduction="max"), {})
