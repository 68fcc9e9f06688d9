"""The ``relay.annotation`` namespace: ops that mark the graph for passes, not compute.

``compiler_begin(x, "ccompiler")`` / ``compiler_end(y, "ccompiler")`` mark where a region
offloaded to an external compiler starts and ends (AnnotateTarget writes them,
MergeCompilerRegions joins neighbouring regions, PartitionGraph lifts each region into a
function and removes them). They are identities with no lowering of their own: a module that
still holds them when it is built is refused.
"""
from __future__ import annotations

from typing import Any, ClassVar

from ... import topi
from ...ir.expr import Call
from ...ir.types import Type
from ...te import tensor as te
from ._attrs_base import OpAttrs, attrs_class
from ...ir.op import OpDef, register_op
from ...runtime.errors import TVMError, TypeInferenceError
from ._reg import OPAQUE, call, defop, resolve_attrs

__all__ = ["compiler_begin", "compiler_end", "stop_fusion"]

COMPILER_BEGIN = "annotation.compiler_begin"
COMPILER_END = "annotation.compiler_end"


def _stop_fusion_compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    return [topi.identity(inputs[0])]


defop("annotation.stop_fusion", lambda args, attrs: args[0], lambda x, attrs: x.copy(), OPAQUE,
      doc="Identity that FuseOps never fuses across.", compute=_stop_fusion_compute)


def stop_fusion(data: Any) -> Call:
    """``data`` unchanged, marked so that FuseOps starts a new group after it."""
    return call("annotation.stop_fusion", data)


@attrs_class("CompilerAttrs")
class CompilerAttrs(OpAttrs):
    """compiler_begin / compiler_end: the target the region is offloaded to."""

    compiler: str = "default"
    _op: ClassVar[str] = "annotation.compiler_begin/end"

    def __post_init__(self) -> None:
        if not isinstance(self.compiler, str) or not self.compiler.isidentifier():
            raise self._invalid("compiler", "a target name such as 'ccompiler' (an identifier)")


def _identity_rel(name: str) -> Any:
    # Unlike defop's ops, the annotations take a value of any type (a tuple crosses a region
    # boundary as one value).
    def rel(arg_types: list[Any], attrs: Any = None) -> Any:
        if len(arg_types) != 1:
            raise TypeInferenceError(f"{name}: expected 1 argument (data), got "
                                     f"{len(arg_types)}")
        resolve_attrs(name, CompilerAttrs, attrs)
        return arg_types[0]

    return rel


def _refuse_lowering(name: str) -> Any:
    def compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
        raise TVMError(f"{name}(compiler={attrs.compiler!r}) reached the build: partition "
                       "the annotated module first (relay.transform.PartitionGraph())")

    return compute


for _name, _what in ((COMPILER_BEGIN, "starts"), (COMPILER_END, "ends")):
    register_op(OpDef(_name, 1, CompilerAttrs, _identity_rel(_name), OPAQUE,
                      reference=lambda x, attrs=None: x, compute=_refuse_lowering(_name),
                      arg_names=("data",),
                      description=f"Identity that {_what} a region offloaded to ``compiler``."))


def compiler_begin(data: Any, compiler: str) -> Call:
    """``data`` entering a region offloaded to ``compiler``."""
    return call(COMPILER_BEGIN, data, attrs=CompilerAttrs(compiler))


def compiler_end(data: Any, compiler: str) -> Call:
    """``data`` leaving a region offloaded to ``compiler``."""
    return call(COMPILER_END, data, attrs=CompilerAttrs(compiler))
