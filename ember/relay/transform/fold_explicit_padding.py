"""FoldExplicitPadding: a zero ``nn.pad`` of the image axes that a 2-D convolution reads
becomes the convolution's own padding.

Exporters write the "SAME" padding of a strided convolution as an explicit pad before it
(tf2onnx's models, and PyTorch ports of TensorFlow ones: MediaPipe's BlazeFace pads
``(0, 2, 0, 2)`` before each stride-2 depthwise conv). As its own kernel the pad copies the
whole map (0.08-0.1 ms of a 1.8 ms detector), and the conv then pads nothing; folded, the
conv's kernel pads as it reads. As Relay's pass of the same name, for ``nn.conv2d`` in NCHW:
the pad must be ``constant`` mode with a constant zero value, zero on the batch and channel
axes; the convolution's (top, left, bottom, right) padding grows by the pad's (before, after)
of the height and width, which may differ (asymmetric). Other readers of the pad still read it.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

from ...ir.expr import Call, Constant, RelayExpr
from ...ir.module import IRModule
from ...ir.op import Op
from ...ir.transform import ModulePass, PassContext, register_pass
from ._helpers import PassMutator, rewrite_functions

__all__ = ["FoldExplicitPadding"]


def _zero_image_pad(e: RelayExpr) -> tuple[int, int, int, int] | None:
    """(top, left, bottom, right) of a zero pad of an NCHW tensor's image axes, else None."""
    if not (isinstance(e, Call) and isinstance(e.op, Op) and e.op.name == "nn.pad"):
        return None
    value = e.args[1]
    if e.attrs.pad_mode != "constant" or not isinstance(value, Constant) or \
            value.data.numpy().size != 1 or value.data.numpy().reshape(()) != 0:
        return None
    width = e.attrs.pad_width
    if len(width) != 4 or any(width[0]) or any(width[1]):
        return None
    (top, bottom), (left, right) = width[2], width[3]
    return top, left, bottom, right


class _Folder(PassMutator):
    def visit_call(self, orig: Call) -> RelayExpr:
        new: Call = super().visit_call(orig)
        if not (isinstance(new.op, Op) and new.op.name == "nn.conv2d") or \
                new.attrs.data_layout != "NCHW":
            return new
        pad = _zero_image_pad(new.args[0])
        if pad is None:
            return new
        padding = tuple(int(a + b) for a, b in zip(new.attrs.padding, pad))
        return Call(new.op, (new.args[0].args[0], *new.args[1:]),
                    replace(new.attrs, padding=padding), span=new.span)


@dataclass(frozen=True)
class FoldExplicitPadding(ModulePass):
    """``nn.conv2d(nn.pad(x, zeros on H and W))`` -> ``nn.conv2d(x)`` with that padding."""

    name: ClassVar[str] = "FoldExplicitPadding"
    opt_level: ClassVar[int] = 3

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        return rewrite_functions(mod, lambda f: _Folder().visit(f))


register_pass("FoldExplicitPadding", FoldExplicitPadding)
