"""The ``relay.annotation`` namespace: ops that mark the graph for passes, not compute."""
from __future__ import annotations

from typing import Any

from ... import topi
from ...ir.expr import Call
from ...ir.types import Type
from ...te import tensor as te
from ._reg import OPAQUE, call, defop

__all__ = ["stop_fusion"]


def _stop_fusion_compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    return [topi.identity(inputs[0])]


defop("annotation.stop_fusion", lambda args, attrs: args[0], lambda x, attrs: x.copy(), OPAQUE,
      doc="Identity that FuseOps never fuses across.", compute=_stop_fusion_compute)


def stop_fusion(data: Any) -> Call:
    """``data`` unchanged, marked so that FuseOps starts a new group after it."""
    return call("annotation.stop_fusion", data)
