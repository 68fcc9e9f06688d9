"""Converters of the loss operators: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss,
decomposed into gather, where and sums (as ONNX's own function bodies define them).

For input (N, C, d1, ..., dk) and integer target (N, d1, ..., dk): the loss at each element
is ``-input[n, target, d...] * weight[target]`` (weight 1 without the input), 0 where target
is ``ignore_index``; ``reduction`` "none" keeps it, "sum" adds it up, "mean" divides the sum
by the sum of the weights of the elements not ignored.
"""
from __future__ import annotations

from typing import Any

from ....ir.expr import RelayExpr
from ... import op as _op
from ._node import Node
from ._util import scalar

REDUCTIONS = ("mean", "sum", "none")


def _nll(node: Node, log_prob: RelayExpr, target: RelayExpr, weight: RelayExpr | None,
         dtype: str) -> RelayExpr:
    """The loss of ``log_prob`` (N, C, ...) at ``target`` (N, ...), reduced per the node."""
    reduction = node.choice("reduction", "mean", REDUCTIONS)
    target_dtype = node.dtype(1)
    if not target_dtype.startswith(("int", "uint")):
        raise node.fail(f"target must be an integer tensor, got {target_dtype}")
    ignore = node.attr("ignore_index", None)
    keep = None
    if ignore is not None:
        keep = _op.not_equal(target, scalar(ignore, target_dtype))
        # an ignored target may be any value, also out of range: gather at class 0 instead
        target = _op.where(keep, target, scalar(0, target_dtype))
    picked = _op.squeeze(_op.gather(log_prob, 1, _op.expand_dims(target, 1)), [1])
    loss = _op.negative(picked)
    w = None if weight is None else _op.take(weight, target, axis=0)
    if keep is not None:
        mask = _op.cast(keep, dtype)
        w = mask if w is None else _op.multiply(w, mask)
    if w is not None:
        loss = _op.multiply(loss, w)
    if reduction == "none":
        return loss
    total = _op.sum(loss)
    if reduction == "sum":
        return total
    return _op.divide(total, _op.sum(w)) if w is not None else _op.mean(loss)


def _check_shapes(node: Node, what: str) -> None:
    rank, target_rank = node.ndim(0), node.ndim(1)
    if rank < 2 or target_rank != rank - 1:
        raise node.fail(f"{what} must have shape (N, C, d1, ...) and target (N, d1, ...), got "
                        f"ranks {rank} and {target_rank}")


def negative_log_likelihood_loss(node: Node) -> RelayExpr:
    """NegativeLogLikelihoodLoss: input holds log-probabilities along axis 1."""
    _check_shapes(node, "input")
    dtype = node.dtype(0)
    return _nll(node, node.input(0, "input"), node.input(1, "target"), node.optional(2), dtype)


def softmax_cross_entropy_loss(node: Node) -> Any:
    """SoftmaxCrossEntropyLoss: the NLL loss of log_softmax(scores) along axis 1; the second
    output, when asked for, is that log_softmax."""
    _check_shapes(node, "scores")
    dtype = node.dtype(0)
    log_prob = _op.nn.log_softmax(node.input(0, "scores"), axis=1)
    loss = _nll(node, log_prob, node.input(1, "labels"), node.optional(2), dtype)
    return [loss, log_prob if node.wants_output(1) else None]
