"""``Node``: what a converter sees of one ONNX node (inputs, attributes, types, errors).

Every message a converter raises through ``Node`` starts with the node's op type and name
(``Conv node 'conv1': ...``), so a failure points at the node in the model.

``node.version`` is the version of the operator the node uses (its since-version at the
model's opset, ``_versions.py``). Where an older version took as an attribute what a newer
one takes as an input (Reshape's ``shape`` before 5, Slice's ``starts``/``ends``/``axes``
before 10, TopK's ``k`` before 10, Clip's ``min``/``max`` and Pad's ``pads``/``value`` before
11), the support table names the attribute and ``Node`` presents its value as that input, so
one converter serves every version.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ....ir.expr import Constant, RelayExpr, const
from ....ir.types import TensorType, Type
from ....runtime.errors import (
    FrontendError,
    OpAttributeInvalid,
    OpAttributeRequired,
    OpAttributeUnImplemented,
    OpNotImplemented,
)
from ._proto import attribute_type_name, attribute_value
from ._versions import attribute_type
from ._symbolic import SymShape

if TYPE_CHECKING:
    from ._graph import Scope

_REQUIRED = object()
# (expected, given) AttributeProto types read as the expected one: an int where a float is
# defined (``helper.make_node("LeakyRelu", alpha=1)`` writes one), ints where floats are.
_WIDENS = {(1, 2), (6, 7)}  # FLOAT <- INT, FLOATS <- INTS


class Node:
    """One ONNX node being converted, in the scope that defines its inputs."""

    def __init__(self, proto: Any, name: str, scope: Scope, version: int | None = None,
                 attr_inputs: Mapping[int, tuple[tuple[str, ...], str | None]] | None = None
                 ) -> None:
        self.proto = proto
        self.op_type: str = proto.op_type
        self.name = name
        self.scope = scope
        self.opset: int = scope.importer.opset
        self.version: int = self.opset if version is None else version
        self.label = f"{self.op_type} node {name!r}"
        self._attrs = {a.name: a for a in proto.attribute}
        self.sym_out: dict[int, SymShape] = {}
        self._attr_inputs: dict[int, Constant] = {}
        self._attr_inputs = self._read_attr_inputs(attr_inputs or {})

    def _read_attr_inputs(self, spec: Mapping[int, tuple[tuple[str, ...], str | None]]
                          ) -> dict[int, Constant]:
        """Input index -> the constant the first present attribute of ``names`` gives (of
        ``dtype``; None: input 0's)."""
        out = {}
        for i, (names, dtype) in spec.items():
            name = next((n for n in names if n in self._attrs), None)
            if name is not None:
                try:
                    value = np.asarray(self.attr(name)).astype(dtype or self.dtype(0))
                except (TypeError, ValueError) as err:
                    raise self.fail(f"attribute {name}: {err}") from None
                out[i] = const(value)
        return out

    # -- inputs ---------------------------------------------------------------------------------
    @property
    def num_inputs(self) -> int:
        """The number of input slots (trailing empty names included)."""
        return max(len(self.proto.input), *(i + 1 for i in self._attr_inputs), 0)

    def has_input(self, i: int) -> bool:
        return i in self._attr_inputs or (i < len(self.proto.input) and self.proto.input[i] != "")

    def input(self, i: int, what: str = "") -> RelayExpr:
        """Input ``i``; FrontendError naming it when the node does not give it."""
        if not self.has_input(i):
            raise self.fail(f"input {i}{_what(what)} is required but not given "
                            f"(the node has {len(self.proto.input)} input(s))")
        if i in self._attr_inputs:
            return self._attr_inputs[i]
        return self.scope.lookup(self.proto.input[i])

    def optional(self, i: int) -> RelayExpr | None:
        return self.input(i) if self.has_input(i) else None

    def inputs(self) -> list[RelayExpr]:
        """Every given input, in order (empty optional slots skipped)."""
        return [self.scope.lookup(n) for n in self.proto.input if n]

    def type(self, i: int) -> TensorType:
        return self.type_of(self.input(i))

    def shape(self, i: int) -> tuple[Any, ...]:
        return self.type(i).shape

    def dtype(self, i: int) -> str:
        return self.type(i).dtype

    def ndim(self, i: int) -> int:
        return self.type(i).ndim

    def type_of(self, expr: RelayExpr) -> Any:
        return self.scope.importer.typer.type_of(expr)

    def static_shape(self, i: int, what: str = "") -> tuple[int, ...]:
        """The shape of input ``i``, which must be fully known at import time."""
        ty = self.type(i)
        if not ty.is_static:
            raise self.unsupported(f"input {i}{_what(what)} has a dynamic shape "
                                   f"{_fmt(ty.shape)}; this case needs static sizes (give them "
                                   "with from_onnx(shape=...))")
        return ty.concrete_shape

    def value(self, i: int) -> np.ndarray | None:
        """The value of input ``i`` when it is known at import time (a constant, an
        initializer, or computed from static shapes), else None."""
        if not self.has_input(i):
            return None
        if i in self._attr_inputs:
            return self._attr_inputs[i].data.numpy()
        name = self.proto.input[i]
        known = self.scope.known_value(name)
        if known is not None:
            return known
        expr = self.scope.lookup(name)
        return expr.data.numpy() if isinstance(expr, Constant) else None

    def const_value(self, i: int, what: str = "") -> np.ndarray:
        """The value of input ``i``, which must be known at import time."""
        self.input(i, what)
        v = self.value(i)
        if v is None:
            sym = self.sym(i)
            detail = f" (it depends on the run-time sizes {_fmt(sym.elems)})" if sym else ""
            raise self.unsupported(f"input {i}{_what(what)} must be known when importing "
                                   f"(a constant, or computed from static shapes){detail}; "
                                   "give static input shapes with from_onnx(shape=...)")
        return v

    def ints(self, i: int, what: str = "") -> list[int]:
        """A known integer input as a list of ints."""
        return [int(v) for v in np.asarray(self.const_value(i, what)).reshape(-1)]

    def sym(self, i: int) -> SymShape | None:
        """Input ``i`` as a symbolic shape value, if it is one (static ones included)."""
        if not self.has_input(i):
            return None
        v = self.value(i)
        if v is not None:
            if v.dtype.kind in "iu" and v.ndim <= 1:
                return SymShape(tuple(int(x) for x in v.reshape(-1)), scalar=v.ndim == 0)
            return None
        return self.scope.sym.get(self.proto.input[i])

    # -- attributes -----------------------------------------------------------------------------
    def has_attr(self, name: str) -> bool:
        return name in self._attrs

    def attr(self, name: str, default: Any = _REQUIRED) -> Any:
        """Attribute ``name`` as a Python value; OpAttributeRequired when absent and no default."""
        a = self._attrs.get(name)
        if a is None:
            if default is _REQUIRED:
                raise OpAttributeRequired(f"{self.label}: attribute {name} is required")
            return default
        expected = attribute_type(self.op_type, self.version, name)
        if expected is not None and a.type != expected and (expected, a.type) not in _WIDENS:
            raise OpAttributeInvalid(f"{self.label}: attribute {name} must be of type "
                                     f"{attribute_type_name(expected)}, got "
                                     f"{attribute_type_name(a.type)} (version {self.version})")
        return attribute_value(a, f"{self.label}")

    def choice(self, name: str, default: str, choices: Sequence[str]) -> str:
        """A string attribute that must be one of ``choices``."""
        value = self.attr(name, default)
        if value not in choices:
            raise self.unsupported_attr(name, value, f"one of {', '.join(map(repr, choices))}")
        return str(value)

    # -- outputs --------------------------------------------------------------------------------
    @property
    def num_outputs(self) -> int:
        return len(self.proto.output)

    def wants_output(self, i: int) -> bool:
        return i < len(self.proto.output) and self.proto.output[i] != ""

    def set_sym(self, value: SymShape | None, i: int = 0) -> None:
        """Record output ``i``'s value as a shape (for Reshape/Expand downstream); a fully
        static one replaces the output by a constant."""
        if value is not None:
            self.sym_out[i] = value

    # -- building -------------------------------------------------------------------------------
    def const(self, value: Any, dtype: str) -> Constant:
        return const(np.asarray(value, dtype=dtype))

    def finish(self, expr: RelayExpr) -> RelayExpr:
        """``expr`` typed (and folded when constant)."""
        return self.scope.importer.typer.finish(expr)

    def declare(self, expr: RelayExpr, ty: Type) -> None:
        self.scope.importer.typer.declare(expr, ty)

    # -- errors ---------------------------------------------------------------------------------
    def fail(self, msg: str) -> FrontendError:
        """The model is wrong here: FrontendError naming the node."""
        return FrontendError(f"{self.label}: {msg}")

    def unsupported(self, msg: str) -> OpNotImplemented:
        """A valid use that ember cannot import (yet): OpNotImplemented naming the node."""
        return OpNotImplemented(f"{self.label}: {msg}")

    def unsupported_attr(self, name: str, value: Any, supported: str) -> OpAttributeUnImplemented:
        return OpAttributeUnImplemented(f"{self.label}: attribute {name}={value!r} is not "
                                        f"supported (supported: {supported})")

    def invalid_attr(self, name: str, value: Any, expected: str) -> OpAttributeInvalid:
        return OpAttributeInvalid(f"{self.label}: attribute {name} must be {expected}, "
                                  f"got {value!r}")


def _what(what: str) -> str:
    return f" ({what})" if what else ""


def _fmt(dims: Sequence[Any]) -> str:
    from ...op._shape import fmt_shape

    return fmt_shape(dims)
