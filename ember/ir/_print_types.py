"""Printing types, patterns and attrs in the text format (the expression printer builds on it)."""
from __future__ import annotations

from typing import Any as _Any

from ._text_common import NameTable, attr_value_text
from .adt import Pattern, PatternConstructor, PatternTuple, PatternVar, PatternWildcard, TypeData
from .attrs import Attrs, DictAttrs
from .types import (
    Any,
    FuncType,
    GlobalTypeVar,
    IncompleteType,
    RelayRefType,
    ShapeVar,
    TensorType,
    TupleType,
    Type,
    TypeCall,
    TypeConstraint,
    TypeVar,
    fold_type,
    type_children,
)

# Types in /* ty=... */ comments show this many levels; deeper parts print as "...": the
# comments of a deeply nested tuple would otherwise hold its type once per level.
COMMENT_TYPE_DEPTH = 8
# Words that start another kind of type where a type variable's name would stand.
TYPE_WORDS = ("Tensor", "fn", "_", "ref")
_COMPOSITE = (TupleType, FuncType, TypeCall, RelayRefType)  # printed from their children's text


class TypePrinter:
    """Prints types with consistent names for type variables and symbolic dimensions."""

    def __init__(self) -> None:
        self.type_vars = NameTable(TYPE_WORDS)
        self.shape_vars = NameTable()

    def type(self, ty: Type | None) -> str:
        """The text of ``ty`` (children first: types nest as deeply as tuples do)."""
        text: str = fold_type(ty, self._type_text)
        return text

    def brief_type(self, ty: Type | None, depth: int = COMMENT_TYPE_DEPTH) -> str:
        """``ty`` as ``type`` prints it, except that types nested more than ``depth`` levels
        in print as ``...`` (for comments; costs at most the size of the levels shown)."""
        text: dict[tuple[int, int], str] = {}
        stack: list[tuple[_Any, int, bool]] = [(ty, 0, False)]
        while stack:
            t, level, ready = stack.pop()
            if (id(t), level) in text:
                continue
            kids = type_children(t)
            if kids and level >= depth:
                text[id(t), level] = "..."
            elif ready or not kids:
                text[id(t), level] = self._type_text(t, [text[id(k), level + 1] for k in kids])
            else:
                stack.append((t, level, True))
                stack.extend((k, level + 1, False) for k in reversed(kids))
        return text[id(ty), 0]

    def _type_text(self, ty: Type | None, kids: list[str]) -> str:
        method = getattr(self, f"_{type(ty).__name__}", None)
        if method is None:
            return f"/* unprintable type {type(ty).__name__} */ _"
        text: str = method(ty, kids) if isinstance(ty, _COMPOSITE) else method(ty)
        return text

    def _TensorType(self, ty: TensorType) -> str:
        if not ty.shape:
            return ty.dtype
        return f"Tensor[({', '.join(self.dim(d) for d in ty.shape)}), {ty.dtype}]"

    def dim(self, d: _Any) -> str:
        if isinstance(d, Any):
            return "?"
        if isinstance(d, ShapeVar):
            return self.shape_vars.get(d, d.name)
        return str(d)

    def _TupleType(self, ty: TupleType, kids: list[str]) -> str:
        return tuple_text(kids)

    def _FuncType(self, ty: FuncType, kids: list[str]) -> str:
        return f"fn {self.type_params(ty.type_params)}({', '.join(kids[:-1])}) -> {kids[-1]}"

    def _TypeVar(self, ty: TypeVar) -> str:
        return self.type_vars.get(ty, ty.name_hint)

    def _GlobalTypeVar(self, ty: GlobalTypeVar) -> str:
        return ty.name_hint

    def _TypeCall(self, ty: TypeCall, kids: list[str]) -> str:
        return f"{kids[0]}[{', '.join(kids[1:])}]"

    def _IncompleteType(self, ty: IncompleteType) -> str:
        return "_"

    def _NoneType(self, ty: None) -> str:
        return "_"

    def _RelayRefType(self, ty: RelayRefType, kids: list[str]) -> str:
        return f"ref({kids[0]})"

    def _TypeConstraint(self, ty: TypeConstraint) -> str:
        return f"/* {type(ty).__name__} */ _"

    def type_params(self, params: tuple[TypeVar, ...]) -> str:
        """``[A, B]`` (empty when there are none); names are allocated here, at the binder."""
        if not params:
            return ""
        return "[" + ", ".join(self._TypeVar(p) for p in params) + "]"

    def type_data(self, td: TypeData) -> str:
        """``type List[A] {`` one constructor per line ``}``; ``extern type T`` when there are
        no constructors."""
        if not td.constructors:
            return f"extern type {td.header.name_hint}{self.type_params(td.type_vars)}"
        head = f"type {td.header.name_hint}{self.type_params(td.type_vars)} {{"
        ctors = []
        for c in td.constructors:
            args = f"({', '.join(self.type(t) for t in c.inputs)})" if c.inputs else ""
            ctors.append(f"  {c.name_hint}{args},")
        return "\n".join([head, *ctors, "}"])

    def pattern(self, pat: Pattern, var_doc: _Any = None) -> str:
        """A pattern; ``var_doc(var)`` prints a bound variable (default: ``%name_hint``).
        Children first from a stack: patterns may nest deeply."""
        text: dict[int, str] = {}
        stack: list[tuple[Pattern, bool]] = [(pat, False)]
        while stack:
            p, ready = stack.pop()
            subs = getattr(p, "patterns", ())
            if not ready and subs:
                stack.append((p, True))
                stack.extend((s, False) for s in reversed(subs))
                continue
            text[id(p)] = self._pattern_text(p, [text[id(s)] for s in subs], var_doc)
        return text[id(pat)]

    def _pattern_text(self, pat: Pattern, subs: list[str], var_doc: _Any) -> str:
        if isinstance(pat, PatternWildcard):
            return "_"
        if isinstance(pat, PatternVar):
            return var_doc(pat.var) if var_doc else f"%{pat.var.name_hint}"
        if isinstance(pat, PatternTuple):
            return tuple_text(subs)
        if isinstance(pat, PatternConstructor):
            name = pat.constructor.name_hint
            return f"{name}({', '.join(subs)})" if subs else name
        return f"/* unprintable pattern {type(pat).__name__} */ _"


def tuple_text(items: list[str]) -> str:
    """``()``, ``(a,)`` or ``(a, b)``."""
    if len(items) == 1:
        return f"({items[0]},)"
    return f"({', '.join(items)})"


def attrs_items_text(attrs: Attrs | DictAttrs | None) -> list[str]:
    """``key=value`` strings: the non-default fields of op attrs, all keys of DictAttrs sorted."""
    if attrs is None:
        return []
    if isinstance(attrs, DictAttrs):
        items = sorted(attrs.items())
    else:
        items = attrs.non_default_items()
    return [f"{k}={attr_value_text(v)}" for k, v in items]


def attrs_text(attrs: Attrs | DictAttrs) -> str:
    """``Conv2DAttrs(padding=[1, 1, 1, 1], channels=16)`` (standalone printing)."""
    return f"{type(attrs).__name__}({', '.join(attrs_items_text(attrs))})"
