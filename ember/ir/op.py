"""Operators: ``Op`` nodes (singletons by name) and the registry of their rules.

The rules of each op (attrs type, type relation, fusion pattern, numpy reference, compute,
shape function) live in one ``OpDef`` record. The operator library (``ember.relay.op``, a layer
above) registers its ops here when it is imported; the IR only looks them up and never imports
the library (``ember/_layers.py``). ``ember.relay``, ``ember.parser`` and ``ember.ir`` reached
through the ``ember`` namespace load it.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, Callable

from ..runtime.errors import OpNotImplemented
from ..runtime.object import register_object
from .attrs import Attrs, attr_names
from .expr import RelayExpr


class OpPattern(IntEnum):
    """Fusion patterns, in the order FuseOps uses them (lower fuses more freely)."""

    ELEMWISE = 0
    BROADCAST = 1
    INJECTIVE = 2
    COMM_REDUCE = 3
    OUT_ELEMWISE_FUSABLE = 4
    TUPLE = 7
    OPAQUE = 8


@dataclass
class OpDef:
    """All rules of one operator, side by side.

    type_rel(arg_types, attrs) -> result type: arg_types are the (resolved) types of the
    arguments; raise TypeError-like errors naming the op, the argument and the shapes.
    reference(*np_arrays, attrs) -> np.ndarray or tuple of them: the numpy oracle, also
    used by FoldConstant and the interpreter.
    """

    name: str
    num_inputs: int | None = None  # None: variadic
    attrs_type: type[Attrs] | None = None
    type_rel: Callable[..., Any] | None = None
    pattern: OpPattern = OpPattern.OPAQUE
    reference: Callable[..., Any] | None = None
    compute: Callable[..., Any] | None = None
    schedule: Callable[..., Any] | None = None
    shape_func: Callable[..., Any] | None = None
    shape_func_data_dependent: bool = False
    arg_names: tuple[str, ...] = ()
    description: str = ""
    support_level: int = 1
    extra: dict[str, Any] = field(default_factory=dict)


OP_REGISTRY: dict[str, OpDef] = {}
_OPS: dict[str, "Op"] = {}


@register_object("Op")
@dataclass(frozen=True, slots=True, eq=False)
class Op(RelayExpr):
    """A primitive operator, e.g. ``Op.get("nn.conv2d")``. One instance per name."""

    name: str

    def __call__(self, *args: Any) -> Any:
        # An Op is called through its builder, which also makes its attrs (as in Relay).
        raise TypeError(f"an Op is not called directly: use relay.{self.name}(...) or "
                        f"relay.Call(Op.get({self.name!r}), args, attrs)")

    @staticmethod
    def get(name: str) -> "Op":
        """The operator called ``name``; an unknown name raises with the closest matches."""
        op = _OPS.get(name)
        if op is not None:
            return op
        if name in OP_REGISTRY:
            return _OPS.setdefault(name, Op(name))
        close = difflib.get_close_matches(name, OP_REGISTRY, n=3, cutoff=0.6)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        if not OP_REGISTRY:
            hint = "; no operator is registered yet: import ember.relay (the operator library)"
        raise OpNotImplemented(f"unknown operator {name!r}{hint}")

    @property
    def op_def(self) -> OpDef:
        return OP_REGISTRY[self.name]

    def get_attr(self, key: str) -> Any:
        """TVM-style attribute lookup: 'TOpPattern', 'FTVMCompute', ... or an OpDef field."""
        d = self.op_def
        alias = {"TOpPattern": "pattern", "FTVMCompute": "compute", "FTVMStrategy": "schedule",
                 "FShapeFunc": "shape_func", "TNonComputational": None}
        key = alias.get(key, key) or key
        return getattr(d, key, d.extra.get(key))

    def make_attrs(self, **kwargs: Any) -> Attrs | None:
        """Build this op's attrs record from keyword values (lists become tuples)."""
        cls = self.op_def.attrs_type
        if cls is None:
            if kwargs:
                raise TypeError(f"{self.name}: takes no attributes, got {sorted(kwargs)}")
            return None
        known = set(attr_names(cls))
        unknown = sorted(set(kwargs) - known)
        if unknown:
            close = difflib.get_close_matches(unknown[0], known, n=3)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise TypeError(f"{self.name}: unknown attribute {unknown[0]!r}{hint} "
                            f"(it takes {', '.join(sorted(known))})")
        return cls(**kwargs)

    def __repr__(self) -> str:
        return f"Op({self.name})"


def register_op(op_def: OpDef) -> OpDef:
    """Add an operator's rules to the registry (used by ember.relay.op)."""
    if op_def.name in OP_REGISTRY:
        raise ValueError(f"operator {op_def.name!r} is already registered")
    OP_REGISTRY[op_def.name] = op_def
    return op_def


def register_op_attr(op_name: str, attr_key: str, value: Any = None, level: int = 10) -> Any:
    """Set attribute ``attr_key`` of operator ``op_name`` (TVM's ``tvm.ir.register_op_attr``),
    or, without ``value``, a decorator that sets it to the decorated function. BYOC reads
    ``target.<compiler>``: a function ``(call) -> bool`` saying that the compiler takes the
    call. A higher ``level`` overrides a lower one; the same level twice is an error."""
    if op_name not in OP_REGISTRY:
        Op.get(op_name)  # raises, naming the closest operators
    if not isinstance(attr_key, str) or not attr_key:
        raise TypeError(f"register_op_attr({op_name!r}): attr_key must be a non-empty string, "
                        f"got {attr_key!r}")

    def put(v: Any) -> Any:
        levels = OP_REGISTRY[op_name].extra.setdefault("_attr_levels", {})
        old = levels.get(attr_key)
        if old == level:
            raise ValueError(f"register_op_attr: attribute {attr_key!r} of operator "
                             f"{op_name!r} is already registered at level {level}; pass a "
                             "higher level to override it")
        if old is None or level > old:
            levels[attr_key] = level
            OP_REGISTRY[op_name].extra[attr_key] = v
        return v

    return put if value is None else put(value)


def list_op_names() -> list[str]:
    """The names of the registered operators."""
    return sorted(OP_REGISTRY)
