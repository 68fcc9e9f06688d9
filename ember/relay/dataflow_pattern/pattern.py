"""The pattern language: one class per kind of pattern, and the builders scripts use.

    pat = is_op("nn.relu")(is_op("nn.bias_add")(is_op("nn.conv2d")(wildcard(), wildcard()),
                                                 is_constant()))
    pat.match(expr)                      # -> bool
    (pat | is_op("nn.relu")(wildcard())).has_attr({"TOpPattern": 0})

Patterns compare by identity: one pattern object used twice in a pattern must match one and
the same expression both times (``x = wildcard(); is_op("add")(x, x)`` matches ``a + a`` and
not ``a + b``). ``match``, ``partition`` and ``rewrite`` live in ``matcher.py`` and
``rewrite.py``.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ...ir.expr import RelayExpr
from ...ir.op import Op
from ...ir.types import Type


def _as_pattern(value: Any, where: str) -> DFPattern:
    """A pattern, or an expression to match exactly (``is_expr``); TypeError otherwise."""
    if isinstance(value, DFPattern):
        return value
    if isinstance(value, RelayExpr):
        return ExprPattern(value)
    raise TypeError(f"{where}: expected a dataflow pattern (wildcard(), is_op(...)(...), ...) "
                    f"or a relay expression, got {type(value).__name__} {value!r}")


def _patterns(values: Sequence[Any] | None, where: str) -> tuple[DFPattern, ...] | None:
    if values is None:
        return None
    if isinstance(values, (DFPattern, RelayExpr)) or not isinstance(values, (list, tuple)):
        raise TypeError(f"{where}: expected a list of patterns (or None for any), got "
                        f"{type(values).__name__}")
    return tuple(_as_pattern(v, f"{where}[{i}]") for i, v in enumerate(values))


class DFPattern:
    """Base of dataflow patterns. Calling a pattern makes a call pattern; ``|`` an
    alternative; ``+ - * /`` calls of add, subtract, multiply, divide."""

    __slots__ = ("__weakref__",)

    def __call__(self, *args: Any) -> CallPattern:
        return CallPattern(self, list(args))

    def __or__(self, other: Any) -> AltPattern:
        return AltPattern(self, other)

    def __add__(self, other: Any) -> CallPattern:
        return is_op("add")(self, other)

    def __sub__(self, other: Any) -> CallPattern:
        return is_op("subtract")(self, other)

    def __mul__(self, other: Any) -> CallPattern:
        return is_op("multiply")(self, other)

    def __truediv__(self, other: Any) -> CallPattern:
        return is_op("divide")(self, other)

    def has_attr(self, attrs: Mapping[str, Any]) -> AttrPattern:
        """Also require attributes: of the call's attrs, of a function's attrs, or of an op
        (``{"TOpPattern": 0}``)."""
        return AttrPattern(self, attrs)

    def has_type(self, ttype: Type) -> TypePattern:
        """Also require the expression's type to be (structurally) ``ttype``."""
        return TypePattern(self, ttype)

    def has_dtype(self, dtype: str) -> DataTypePattern:
        """Also require a tensor of ``dtype``."""
        return DataTypePattern(self, dtype)

    def has_shape(self, shape: Sequence[Any]) -> ShapePattern:
        """Also require a tensor of ``shape``."""
        return ShapePattern(self, shape)

    def match(self, expr: RelayExpr) -> bool:
        """Whether ``expr`` matches this pattern."""
        from .matcher import match

        return match(self, expr)

    def partition(self, expr: RelayExpr, attrs: Mapping[str, Any] | None = None,
                  check: Callable[[RelayExpr], bool] | None = None) -> RelayExpr:
        """``expr`` with each match lifted into a function called in its place (see
        ``dataflow_pattern.partition``)."""
        from .rewrite import partition

        return partition(self, expr, attrs, check)

    def dominates(self, parent: Any, path: Any = None) -> DominatorPattern:
        """This pattern (the child) dominating ``parent`` through nodes matching ``path``
        (default: any)."""
        return DominatorPattern(parent, wildcard() if path is None else path, self)

    def optional(self, option_constructor: Callable[[DFPattern], DFPattern]) -> AltPattern:
        """This pattern, or ``option_constructor(self)``: ``conv.optional(is_op("nn.relu"))``
        matches a conv with or without a relu after it."""
        if not callable(option_constructor):
            raise TypeError(f"optional: expected a callable making a pattern from this one, "
                            f"got {type(option_constructor).__name__}")
        return self | option_constructor(self)

    def __repr__(self) -> str:
        from .printer import show

        return show(self)


class ExprPattern(DFPattern):
    """Matches an expression structurally equal to ``expr`` (an op: that op)."""

    __slots__ = ("expr",)

    def __init__(self, expr: RelayExpr) -> None:
        if not isinstance(expr, RelayExpr):
            raise TypeError(f"is_expr: expected a relay expression, got {type(expr).__name__}")
        self.expr = expr


class VarPattern(DFPattern):
    """Matches a variable; named ``name_hint`` unless that is empty."""

    __slots__ = ("name",)

    def __init__(self, name_hint: str = "") -> None:
        if not isinstance(name_hint, str):
            raise TypeError(f"is_var: name_hint must be a str, got {type(name_hint).__name__}")
        self.name = name_hint

    def name_hint(self) -> str:
        return self.name


class ConstantPattern(DFPattern):
    """Matches a constant."""

    __slots__ = ()


class WildcardPattern(DFPattern):
    """Matches anything."""

    __slots__ = ()


class CallPattern(DFPattern):
    """Matches a call whose callee matches ``op`` and whose arguments match ``args`` (None:
    any arguments). Calls of add and multiply also match with their arguments swapped."""

    __slots__ = ("op", "args")

    def __init__(self, op: Any, args: Sequence[Any] | None) -> None:
        self.op = _as_pattern(op, "CallPattern: op")
        self.args = _patterns(args, "CallPattern: args")


class FunctionPattern(DFPattern):
    """Matches a function whose parameters match ``params`` (None: any) and body ``body``."""

    __slots__ = ("params", "body")

    def __init__(self, params: Sequence[Any] | None, body: Any) -> None:
        self.params = _patterns(params, "FunctionPattern: params")
        self.body = _as_pattern(body, "FunctionPattern: body")


class TuplePattern(DFPattern):
    """Matches a tuple whose fields match ``fields`` (None: any tuple)."""

    __slots__ = ("fields",)

    def __init__(self, fields: Sequence[Any] | None) -> None:
        self.fields = _patterns(fields, "is_tuple: fields")

    def __getitem__(self, index: int) -> DFPattern:
        if self.fields is None:
            raise IndexError("is_tuple(None) matches any tuple and has no fields to index")
        return self.fields[index]

    def __len__(self) -> int:
        return 0 if self.fields is None else len(self.fields)


class TupleGetItemPattern(DFPattern):
    """Matches ``tuple.index`` (``index`` None or -1: any index)."""

    __slots__ = ("tuple_value", "index")

    def __init__(self, tuple_value: Any, index: int | None = None) -> None:
        self.tuple_value = _as_pattern(tuple_value, "is_tuple_get_item: tuple_value")
        if index is not None and (isinstance(index, bool) or not isinstance(index, int)):
            raise TypeError(f"is_tuple_get_item: index must be an int or None, got {index!r}")
        self.index = -1 if index is None else index


class IfPattern(DFPattern):
    """Matches ``if (cond) { true_branch } else { false_branch }``."""

    __slots__ = ("cond", "true_branch", "false_branch")

    def __init__(self, cond: Any, true_branch: Any, false_branch: Any) -> None:
        self.cond = _as_pattern(cond, "is_if: cond")
        self.true_branch = _as_pattern(true_branch, "is_if: true_branch")
        self.false_branch = _as_pattern(false_branch, "is_if: false_branch")


class LetPattern(DFPattern):
    """Matches ``let var = value; body``."""

    __slots__ = ("var", "value", "body")

    def __init__(self, var: Any, value: Any, body: Any) -> None:
        self.var = _as_pattern(var, "is_let: var")
        self.value = _as_pattern(value, "is_let: value")
        self.body = _as_pattern(body, "is_let: body")


class AltPattern(DFPattern):
    """Matches what ``left`` matches, else what ``right`` matches."""

    __slots__ = ("left", "right")

    def __init__(self, left: Any, right: Any) -> None:
        self.left = _as_pattern(left, "| (left)")
        self.right = _as_pattern(right, "| (right)")


class AttrPattern(DFPattern):
    """Matches what ``pattern`` matches when it also has the attributes ``attrs``."""

    __slots__ = ("pattern", "attrs")

    def __init__(self, pattern: Any, attrs: Mapping[str, Any]) -> None:
        self.pattern = _as_pattern(pattern, "has_attr: pattern")
        if not isinstance(attrs, Mapping) or not all(isinstance(k, str) for k in attrs):
            raise TypeError(f"has_attr: attrs must be a dict with str keys, got {attrs!r}")
        self.attrs = dict(attrs)


class TypePattern(DFPattern):
    """Matches what ``pattern`` matches when its type is ``type``."""

    __slots__ = ("pattern", "type")

    def __init__(self, pattern: Any, ttype: Type) -> None:
        self.pattern = _as_pattern(pattern, "has_type: pattern")
        if not isinstance(ttype, Type):
            raise TypeError(f"has_type: expected a relay type (relay.TensorType(...)), got "
                            f"{type(ttype).__name__} {ttype!r}")
        self.type = ttype


class DataTypePattern(DFPattern):
    """Matches what ``pattern`` matches when it is a tensor of ``dtype``."""

    __slots__ = ("pattern", "dtype")

    def __init__(self, pattern: Any, dtype: str) -> None:
        self.pattern = _as_pattern(pattern, "has_dtype: pattern")
        self.dtype = str(dtype)


class ShapePattern(DFPattern):
    """Matches what ``pattern`` matches when it is a tensor of ``shape``."""

    __slots__ = ("pattern", "shape")

    def __init__(self, pattern: Any, shape: Sequence[Any]) -> None:
        self.pattern = _as_pattern(pattern, "has_shape: pattern")
        if not isinstance(shape, (list, tuple)):
            raise TypeError(f"has_shape: shape must be a list or tuple, got {shape!r}")
        self.shape = tuple(shape)


class DominatorPattern(DFPattern):
    """Matches an expression matching ``child`` that dominates an expression matching
    ``parent``: every path from the parent to it runs through nodes matching ``path``."""

    __slots__ = ("parent", "path", "child")

    def __init__(self, parent: Any, path: Any, child: Any) -> None:
        self.parent = _as_pattern(parent, "dominates: parent")
        self.path = _as_pattern(path, "dominates: path")
        self.child = _as_pattern(child, "dominates: child")


_INPUTS: dict[type, Callable[[Any], tuple[DFPattern, ...]]] = {
    CallPattern: lambda p: (p.op, *(p.args or ())),
    FunctionPattern: lambda p: (*(p.params or ()), p.body),
    TuplePattern: lambda p: p.fields or (),
    TupleGetItemPattern: lambda p: (p.tuple_value,),
    IfPattern: lambda p: (p.cond, p.true_branch, p.false_branch),
    LetPattern: lambda p: (p.var, p.value, p.body),
    AltPattern: lambda p: (p.left, p.right),
    DominatorPattern: lambda p: (p.parent, p.path, p.child),
    AttrPattern: lambda p: (p.pattern,), TypePattern: lambda p: (p.pattern,),
    DataTypePattern: lambda p: (p.pattern,), ShapePattern: lambda p: (p.pattern,),
}


def inputs(pattern: DFPattern) -> tuple[DFPattern, ...]:
    """The sub-patterns of ``pattern``, in matching order (none for the leaves)."""
    for klass in type(pattern).__mro__:
        fn = _INPUTS.get(klass)
        if fn is not None:
            return fn(pattern)
    return ()


def post_order(pattern: DFPattern) -> list[DFPattern]:
    """Every sub-pattern, each once, inputs first (iterative)."""
    out: list[DFPattern] = []
    seen: set[int] = set()
    stack: list[tuple[DFPattern, bool]] = [(pattern, False)]
    while stack:
        node, ready = stack.pop()
        if id(node) in seen:
            continue
        if ready:
            seen.add(id(node))
            out.append(node)
            continue
        stack.append((node, True))
        stack.extend((p, False) for p in reversed(inputs(node)) if id(p) not in seen)
    return out


# -- the builders -------------------------------------------------------------------------------
def is_var(name: str = "") -> VarPattern:
    """A variable (named ``name`` unless that is empty)."""
    return VarPattern(name)


def is_constant() -> ConstantPattern:
    """A constant."""
    return ConstantPattern()


def is_expr(expr: RelayExpr) -> ExprPattern:
    """An expression structurally equal to ``expr``."""
    return ExprPattern(expr)


def is_op(op_name: str) -> ExprPattern:
    """The operator ``op_name``; call it with argument patterns to match a call of it. An
    unknown name raises OpNotImplemented naming the closest ones."""
    if not isinstance(op_name, str):
        raise TypeError(f"is_op: expected an op name (str), got {type(op_name).__name__}")
    return ExprPattern(Op.get(op_name))


def is_tuple(fields: Sequence[Any] | None) -> TuplePattern:
    """A tuple of ``fields`` (None: any tuple)."""
    return TuplePattern(fields)


def is_tuple_get_item(tuple_value: Any, index: int | None = None) -> TupleGetItemPattern:
    """Field ``index`` (None: any) of ``tuple_value``."""
    return TupleGetItemPattern(tuple_value, index)


def is_if(cond: Any, true_branch: Any, false_branch: Any) -> IfPattern:
    """An if expression."""
    return IfPattern(cond, true_branch, false_branch)


def is_let(var: Any, value: Any, body: Any) -> LetPattern:
    """A let expression."""
    return LetPattern(var, value, body)


def wildcard() -> WildcardPattern:
    """Anything."""
    return WildcardPattern()


def has_type(ttype: Type, pattern: DFPattern | None = None) -> TypePattern:
    """``pattern`` (default: anything) of type ``ttype``."""
    return TypePattern(wildcard() if pattern is None else pattern, ttype)


def has_dtype(dtype: str, pattern: DFPattern | None = None) -> DataTypePattern:
    """``pattern`` (default: anything), a tensor of ``dtype``."""
    return DataTypePattern(wildcard() if pattern is None else pattern, dtype)


def has_shape(shape: Sequence[Any], pattern: DFPattern | None = None) -> ShapePattern:
    """``pattern`` (default: anything), a tensor of ``shape``."""
    return ShapePattern(wildcard() if pattern is None else pattern, shape)


def has_attr(attrs: Mapping[str, Any], pattern: DFPattern | None = None) -> AttrPattern:
    """``pattern`` (default: anything) with the attributes ``attrs``."""
    return AttrPattern(wildcard() if pattern is None else pattern, attrs)


def dominates(parent: Any, path: Any, child: Any) -> DominatorPattern:
    """``child`` dominating ``parent`` through ``path`` (see DominatorPattern)."""
    return DominatorPattern(parent, path, child)
