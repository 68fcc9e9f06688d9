"""What the built-in ``ccompiler`` codegen takes (``target.ccompiler``): elementwise ``add``,
``subtract`` and ``multiply`` of float32 tensors of one static shape (or with a scalar), the
Relay-era ccompiler's ops. Its C emitter (``relay/backend/contrib/ccompiler``) also writes
``nn.relu``, reached through composite functions (a ``ccompiler.<name>`` pattern table)."""
from __future__ import annotations

from typing import Any

from ....ir.expr import Call
from ....ir.op import register_op_attr
from ....ir.types import TensorType

CCOMPILER_OPS = ("add", "subtract", "multiply")


def _static_f32(ty: Any) -> bool:
    return (isinstance(ty, TensorType) and ty.dtype == "float32"
            and all(isinstance(d, int) for d in ty.shape))


def ccompiler_supported(call: Call) -> bool:
    """True when ``call`` (typed) is one the ccompiler emits: an elementwise op on float32
    tensors of one static shape, or a tensor and a scalar."""
    types = [a.checked_type_ for a in call.args]
    if not all(_static_f32(t) for t in types):
        return False
    shapes = {tuple(t.shape) for t in types if tuple(t.shape) != ()}
    return len(shapes) <= 1


for _op in CCOMPILER_OPS:
    register_op_attr(_op, "target.ccompiler", ccompiler_supported)
