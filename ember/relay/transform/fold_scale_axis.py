"""FoldScaleAxis: fold per-channel multiplications into the weights of conv2d and dense.

After SimplifyInference and FoldConstant a batch norm is ``multiply(y, s)`` then
``add(.., shift)`` with constant per-channel ``s``. This pass moves such scales into the
weights of the neighbouring ``nn.conv2d`` / ``nn.dense``:

- backward (a scale after the op): ``conv(x, W) * s`` -> ``conv(x, W * s[O])``, also through
  a per-channel constant bias: ``(conv(x, W) + b) * s`` -> ``conv(x, W * s[O]) + b * s``, and
  through ``nn.relu`` when every ``s > 0``;
- forward (a scale before the op): ``conv(x * s, W)`` -> ``conv(x, W * s[I])``, also through
  ``nn.relu`` (every ``s > 0``) and a per-channel constant add (``x * s + b = (x + b/s) * s``,
  every ``s != 0``). Zero padding commutes with scaling, so any padding is fine.

Channels follow the layouts (``NCHW``/``OIHW``, ``NHWC``/``HWIO``/``HWOI``, any order of the
letters); grouped and depthwise convolutions map input channel ``c`` to the weights of its
group. Only intermediate values with no other consumer are rewritten, and only constant
scales are folded. ``FoldScaleAxis`` runs backward, forward, then FoldConstant (as TVM), so
a constant weight comes out already multiplied.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ...ir.base import merge_spans
from ...ir.expr import Call, Constant, RelayExpr, const
from ...ir.module import IRModule
from ...ir.op import Op
from ...ir.transform import ModulePass, PassContext, register_pass
from ...ir.types import TensorType
from ...ir.visitor import children, is_primitive, post_order
from ._helpers import PassMutator, op_call, rewrite_functions
from .fold_constant import ConstantFolder

__all__ = ["BackwardFoldScaleAxis", "FoldScaleAxis", "ForwardFoldScaleAxis"]


def _is(e: RelayExpr, *names: str) -> bool:
    return isinstance(e, Call) and isinstance(e.op, Op) and e.op.name in names


def _channel_vector(c: RelayExpr, ty: Any, axis: int) -> np.ndarray | None:
    """The per-channel values of constant ``c`` broadcast along ``axis`` of a tensor of
    type ``ty``, or None if ``c`` varies along any other axis (or is not a constant)."""
    if not isinstance(c, Constant) or not isinstance(ty, TensorType):
        return None
    arr, rank = c.data.numpy(), len(ty.shape)
    axis %= rank
    size = ty.shape[axis]
    if arr.ndim > rank or not isinstance(size, int):
        return None
    shape = (1,) * (rank - arr.ndim) + arr.shape
    if any(d != 1 for i, d in enumerate(shape) if i != axis) or shape[axis] not in (1, size):
        return None
    return np.broadcast_to(arr.reshape(-1), (size,)).copy()


def _channel_axis(call: Any, output: bool) -> int:
    """The channel axis of the data (or, with ``output``, the result) of conv2d/dense."""
    if call.op.name == "nn.dense":
        return -1
    layout = call.attrs.data_layout
    if output and call.attrs.out_layout:
        layout = call.attrs.out_layout
    return layout.index("C")


def _weight_scale(call: Any, wty: Any, s: np.ndarray, output: bool) -> np.ndarray:
    """A constant to multiply the weight by: ``s`` along O (output) or along I (input)."""
    if call.op.name == "nn.dense":
        return s.reshape(-1, 1) if output else s.reshape(1, -1)
    layout, groups = call.attrs.kernel_layout, call.attrs.groups
    o_ax, i_ax = layout.index("O"), layout.index("I")
    o, i = wty.shape[o_ax], wty.shape[i_ax]
    if output:
        table = np.broadcast_to(s.reshape(-1, 1), (o, i))
    else:  # weight (o, i) reads input channel (o // (o/groups)) * i + i
        group = np.arange(o) // (o // groups)
        table = s[(group * i)[:, None] + np.arange(i)[None, :]]
    if o_ax > i_ax:
        table = table.T
    shape = [1] * len(layout)
    shape[o_ax], shape[i_ax] = o, i
    return np.ascontiguousarray(table).reshape(shape).astype(wty.dtype)


def _scaled_weight(w: RelayExpr, scale: np.ndarray) -> RelayExpr:
    if isinstance(w, Constant):  # fold right away: the weights are usually constants
        return const((w.data.numpy() * scale).astype(scale.dtype))
    return op_call("multiply", w, const(scale))


class _Folder(PassMutator):
    """Shared state: how many consumers each original node has, and constant folding of
    scale expressions that are not literal constants yet."""

    def __init__(self, func: RelayExpr) -> None:
        super().__init__()
        self.uses: dict[int, int] = {id(func): 1}
        for node in post_order(func, skip=is_primitive):
            if not is_primitive(node):
                for c in children(node):
                    self.uses[id(c)] = self.uses.get(id(c), 0) + 1

    def single(self, e: RelayExpr) -> bool:
        return self.uses.get(id(e), 0) == 1

    def constant(self, orig: RelayExpr, new: RelayExpr) -> RelayExpr:
        if isinstance(new, Constant) or not isinstance(orig, Call):
            return new
        folded = ConstantFolder().visit(orig)
        return folded if isinstance(folded, Constant) else new

    def split_scale(self, orig: Call, new: Call, ty: Any, axis: int
                    ) -> tuple[int, np.ndarray] | None:
        """(index of the scaled operand, per-channel scale) of ``multiply`` ``new``."""
        for k in (1, 0):
            s = _channel_vector(self.constant(orig.args[k], new.args[k]), ty, axis)
            if s is not None and orig.args[1 - k].checked_type_ == ty:
                return 1 - k, s
        return None


class _Backward(_Folder):
    def visit_call(self, orig: Call) -> RelayExpr:
        new: Call = super().visit_call(orig)
        if not _is(new, "multiply") or not isinstance(orig.checked_type_, TensorType):
            return new
        for k in (0, 1):
            out = self._fold(orig.args[k], new.args[k], orig, new, k)
            if out is not None:
                return out
        return new

    def _fold(self, o_y: Any, n_y: Any, orig: Call, new: Call, k: int
              ) -> RelayExpr | None:
        chain: list[tuple[Any, Any]] = []  # (orig, new) of bias adds / relus between
        while self.single(o_y) and _is(o_y, "add", "nn.bias_add", "nn.relu") and \
                type(n_y) is Call and n_y.op is o_y.op:
            chain.append((o_y, n_y))
            o_y, n_y = o_y.args[0], n_y.args[0]
        if not (self.single(o_y) and _is(o_y, "nn.conv2d", "nn.dense") and _is(n_y, o_y.op.name)):
            return None
        axis = _channel_axis(o_y, output=True)
        ty: Any = orig.checked_type_
        s = _channel_vector(self.constant(orig.args[1 - k], new.args[1 - k]), ty, axis)
        if s is None or s.dtype != np.dtype(ty.dtype):
            return None
        body = self._rescale_chain(chain, s, ty, axis)
        if body is None:
            return None
        w = n_y.args[1]
        scale = _weight_scale(n_y, o_y.args[1].checked_type_, s, output=True)
        out: RelayExpr = Call(n_y.op, (n_y.args[0], _scaled_weight(w, scale)),
                              n_y.attrs, span=merge_spans(n_y.span, new.span))
        for rebuild_step in reversed(body):
            out = rebuild_step(out)
        return out

    def _rescale_chain(self, chain: list[tuple[Any, Any]], s: np.ndarray, ty: Any,
                       axis: int) -> list[Any] | None:
        """Per node between the op and the scale, a function rebuilding it on the scaled op
        (relu as is, a bias multiplied by ``s``); None if some node does not allow it."""
        rank = len(ty.shape)
        steps = []
        for o_n, n_n in chain:
            if o_n.op.name == "nn.relu":
                if not np.all(s > 0):
                    return None
                steps.append(_rebuild_unary(n_n))
                continue
            bias = self._bias_vector(o_n, n_n, ty, axis)
            if bias is None:
                return None
            scaled = (bias * s).astype(s.dtype)
            if o_n.op.name == "add":
                scaled = scaled.reshape((-1,) + (1,) * (rank - 1 - axis % rank))
            steps.append(_rebuild_binary(n_n, const(scaled)))
        return steps

    def _bias_vector(self, o_n: Any, n_n: Any, ty: Any, axis: int) -> np.ndarray | None:
        b: Any = self.constant(o_n.args[1], n_n.args[1])
        if o_n.op.name == "nn.bias_add":
            ok = isinstance(b, Constant) and b.data.ndim == 1 and \
                o_n.attrs.axis % len(ty.shape) == axis % len(ty.shape)
            return b.data.numpy() if ok else None
        if o_n.checked_type_ != ty or o_n.args[0].checked_type_ != ty:
            return None  # the bias must not broadcast the data to a bigger shape
        return _channel_vector(b, ty, axis)


# rebuilt calls keep their spans (ONNX node names), so that a profile still names them
def _rebuild_unary(node: Any) -> Any:
    return lambda e: Call(node.op, (e,), node.attrs, span=node.span)


def _rebuild_binary(node: Any, rhs: RelayExpr) -> Any:
    return lambda e: Call(node.op, (e, rhs), node.attrs, span=node.span)


class _Forward(_Folder):
    def visit_call(self, orig: Any) -> RelayExpr:
        new: Any = super().visit_call(orig)
        if not (_is(new, "nn.conv2d", "nn.dense") and _is_float(orig)):
            return new
        axis = _channel_axis(orig, output=False)
        chain: list[tuple[Any, Any, int]] = []  # (orig, new, data operand) relus and adds
        o_x: Any = orig.args[0]
        n_x: Any = new.args[0]
        while self.single(o_x) and _is(o_x, "nn.relu", "add") and type(n_x) is Call and \
                n_x.op is o_x.op:
            k: int | None = 0 if _is(o_x, "nn.relu") else self._data_operand(o_x)
            if k is None:
                break
            chain.append((o_x, n_x, k))
            o_x, n_x = o_x.args[k], n_x.args[k]
        if not (self.single(o_x) and _is(o_x, "multiply") and _is(n_x, "multiply")):
            return new
        ty: Any = o_x.checked_type_
        found = self.split_scale(o_x, n_x, ty, axis)
        if found is None or found[1].dtype != np.dtype(ty.dtype):
            return new
        k, s = found
        data: Any = n_x.args[k]
        for o_n, n_n, kd in reversed(chain):
            data = self._unscale(o_n, n_n, kd, data, s, ty, axis)
            if data is None:
                return new
        scale = _weight_scale(new, orig.args[1].checked_type_, s, output=False)
        return Call(new.op, (data, _scaled_weight(new.args[1], scale)), new.attrs,
                    span=merge_spans(new.span, n_x.span))

    def _data_operand(self, add: Any) -> int | None:
        ty = add.checked_type_
        for k in (0, 1):
            if add.args[k].checked_type_ == ty and not isinstance(add.args[k], Constant):
                return k
        return None

    def _unscale(self, o_n: Any, n_n: Any, kd: int, data: RelayExpr, s: np.ndarray,
                 ty: Any, axis: int) -> RelayExpr | None:
        """Node ``o_n`` rebuilt on the unscaled data: relu(x*s) = relu(x)*s for s > 0;
        x*s + b = (x + b/s)*s for s != 0."""
        if o_n.op.name == "nn.relu":
            return Call(n_n.op, (data,), n_n.attrs, span=n_n.span) if np.all(s > 0) else None
        bias = _channel_vector(self.constant(o_n.args[1 - kd], n_n.args[1 - kd]), ty, axis)
        if bias is None or not np.all(s != 0):
            return None
        rank = len(ty.shape)
        shifted = (bias / s).astype(s.dtype).reshape((-1,) + (1,) * (rank - 1 - axis % rank))
        args = (data, const(shifted)) if kd == 0 else (const(shifted), data)
        return Call(n_n.op, args, n_n.attrs, span=n_n.span)


def _is_float(call: Any) -> bool:
    ty = call.checked_type_
    wty = call.args[1].checked_type_
    return (isinstance(ty, TensorType) and ty.dtype.startswith("float")
            and isinstance(wty, TensorType) and wty.dtype == ty.dtype)


def _run(mod: IRModule, folder: type[_Folder]) -> IRModule:
    return rewrite_functions(mod, lambda f: folder(f).visit(f))


@dataclass(frozen=True)
class BackwardFoldScaleAxis(ModulePass):
    """Fold per-channel scales that follow conv2d/dense into their weights."""

    name: ClassVar[str] = "BackwardFoldScaleAxis"
    opt_level: ClassVar[int] = 3

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        return _run(mod, _Backward)


@dataclass(frozen=True)
class ForwardFoldScaleAxis(ModulePass):
    """Fold per-channel scales of the input of conv2d/dense into their weights."""

    name: ClassVar[str] = "ForwardFoldScaleAxis"
    opt_level: ClassVar[int] = 3

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        return _run(mod, _Forward)


@dataclass(frozen=True)
class FoldScaleAxis(ModulePass):
    """BackwardFoldScaleAxis, ForwardFoldScaleAxis, then FoldConstant (TVM's sequence)."""

    name: ClassVar[str] = "FoldScaleAxis"
    opt_level: ClassVar[int] = 3

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        from .fold_constant import FoldConstant

        mod = _run(_run(mod, _Backward), _Forward)
        return FoldConstant().transform_module(mod, ctx)


for _cls in (BackwardFoldScaleAxis, ForwardFoldScaleAxis, FoldScaleAxis):
    register_pass(_cls.name, _cls)
