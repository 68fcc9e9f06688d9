"""Parser base: token handling, types, patterns, literals and attribute values.

``parser.py`` builds the expression and module grammar on top of this class.

The grammar nests (types in types, patterns in patterns, lists in lists), so every rule that
may reach itself is a step run on ``ir.trampoline``: it yields the rules it descends into
instead of calling them. Nesting depth is then bounded by memory only, never by Python's
recursion limit, and deep input gives a program or a DiagnosticError.
"""
from __future__ import annotations

import difflib
from collections.abc import Callable, Generator, Iterable
from typing import Any as _Any
from typing import TypeVar as _TypeVar
from typing import cast

import numpy as np

from ..runtime.dtype import DataType
from ..runtime.errors import DiagnosticError
from ..runtime.ndarray import array as nd_array
from ._lexer import EOF, GLOBAL, IDENT, LOCAL, NUMBER, PUNCT, STRING, Source, Token
from ._text_common import literal_value
from .adt import Constructor, Pattern, PatternConstructor, PatternTuple, PatternVar, PatternWildcard
from .expr import Constant, RelayExpr, Var
from .trampoline import Step
from .types import (
    Any,
    Dim,
    FuncType,
    GlobalTypeVar,
    IncompleteType,
    RelayRefType,
    ShapeVar,
    TensorType,
    TupleType,
    Type,
    TypeCall,
    TypeVar,
)

_T = _TypeVar("_T")
MAX_ATTR_NESTING = 32  # list levels in an attribute value (documented in docs/text_format.md)


def did_you_mean(name: str, candidates: Iterable[str]) -> str:
    close = difflib.get_close_matches(name, list(candidates), n=3, cutoff=0.6)
    return f"; did you mean {', '.join(close)}?" if close else ""


class Scopes:
    """The local names of the open blocks, innermost last. A name maps to the stack of its
    bindings, so a lookup costs the same however deeply the blocks nest."""

    def __init__(self) -> None:
        self.frames: list[dict[str, RelayExpr]] = [{}]
        self.visible: dict[str, list[RelayExpr]] = {}

    def push(self) -> None:
        self.frames.append({})

    def pop(self) -> None:
        for name in self.frames.pop():
            stack = self.visible[name]
            stack.pop()
            if not stack:
                del self.visible[name]

    def bind(self, name: str, value: RelayExpr) -> None:
        """Bind ``name`` in the innermost block (again: the later binding wins)."""
        frame = self.frames[-1]
        if name in frame:
            self.visible[name][-1] = value
        else:
            self.visible.setdefault(name, []).append(value)
        frame[name] = value

    def lookup(self, name: str) -> RelayExpr | None:
        stack = self.visible.get(name)
        return stack[-1] if stack else None

    def bound_here(self, name: str) -> bool:
        return name in self.frames[-1]

    def names(self) -> list[str]:
        return list(self.visible)


class TypeParser:
    """Token cursor plus the type, pattern and literal grammar."""

    def __init__(self, src: Source, tokens: list[Token]) -> None:
        self.src = src
        self.toks = tokens
        self.pos = 0
        self.prev = tokens[0]
        self.type_globals: dict[str, GlobalTypeVar] = {}
        self.ctors: dict[str, Constructor] = {}
        self.type_scopes: list[dict[str, TypeVar]] = []
        self.shape_vars: dict[str, ShapeVar] = {}
        self.locals = Scopes()

    # -- token cursor -------------------------------------------------------------------------
    def peek(self, k: int = 0) -> Token:
        i = self.pos + k
        return self.toks[i] if i < len(self.toks) else self.toks[-1]

    def next(self) -> Token:
        tok = self.toks[self.pos]
        if tok.kind != EOF:
            self.pos += 1
        self.prev = tok
        return tok

    def at(self, text: str) -> bool:
        tok = self.toks[self.pos]  # pos never passes the final EOF token
        return tok.text == text and tok.kind == PUNCT

    def at_word(self, word: str) -> bool:
        return self.peek().is_(IDENT, word)

    def accept(self, text: str) -> Token | None:
        return self.next() if self.at(text) else None

    def expect(self, text: str, where: str = "") -> Token:
        if not self.at(text):
            raise self.fail(f"expected {text!r}{' ' + where if where else ''}")
        return self.next()

    def expect_kind(self, kind: str, what: str) -> Token:
        if self.peek().kind != kind:
            raise self.fail(f"expected {what}")
        return self.next()

    def fail(self, message: str, tok: Token | None = None, got: bool = True) -> DiagnosticError:
        """A DiagnosticError at ``tok`` (default: the next token); raise what it returns."""
        return self.src.error_at(tok or self.peek(), message, got)

    def span(self, start: Token) -> _Any:
        return self.src.span(start, self.prev)

    def comma_list(self, close: str, item: Callable[[], _T | Step[_T]], where: str
                   ) -> Step[tuple[_T, ...]]:
        """``item (',' item)* [',']`` up to and including ``close`` (``item`` may be a step)."""
        out: list[_T] = []
        while not self.at(close):
            out.append((yield from_step(item())))
            if not self.accept(","):
                break
        self.expect(close, where)
        return tuple(out)

    # -- types --------------------------------------------------------------------------------
    def parse_type(self) -> Step[Type]:
        tok = self.peek()
        if tok.is_(PUNCT, "("):
            return (yield self.tuple_type())
        if tok.kind != IDENT:
            raise self.fail("expected a type")
        if tok.text == "Tensor":
            return (yield self.tensor_type())
        if tok.text == "fn":
            return (yield self.func_type())
        if tok.text == "ref":
            return (yield self.ref_type())
        if tok.text == "_":
            self.next()
            return IncompleteType()
        return (yield self.named_type())

    def tuple_type(self) -> Step[Type]:
        start = self.expect("(")
        fields = yield self.comma_list(")", self.parse_type, "after tuple type fields")
        return TupleType(fields, span=self.span(start))

    def ref_type(self) -> Step[Type]:
        self.next()
        self.expect("(", "after 'ref'")
        value = yield self.parse_type()
        self.expect(")", "after the referenced type")
        return RelayRefType(value)

    def tensor_type(self) -> Step[Type]:
        start = self.next()
        self.expect("[", "after 'Tensor'")
        self.expect("(", "to open the shape of a tensor type")
        shape = yield self.comma_list(")", self.dim, "after the shape of a tensor type")
        self.expect(",", "between the shape and the dtype of a tensor type")
        dtype = self.dtype()
        self.expect("]", "after the dtype of a tensor type")
        return TensorType(shape, dtype, span=self.span(start))

    def dim(self) -> Dim:
        tok = self.next()
        if tok.is_(PUNCT, "?"):
            return Any()
        if tok.kind == IDENT:
            return self.shape_vars.setdefault(tok.text, ShapeVar(tok.text))
        if tok.kind == NUMBER and tok.text.isdigit():  # no sign, point or suffix
            return int(tok.text)
        raise self.fail("expected a dimension (a non-negative integer, '?' or a name)", tok)

    def dtype(self) -> str:
        tok = self.expect_kind(IDENT, "a dtype such as float32")
        try:
            return str(DataType(tok.text))
        except ValueError:
            raise self.fail(f"unknown dtype {tok.text!r}; expected e.g. float32, int8, bool",
                            tok, got=False) from None

    def func_type(self) -> Step[Type]:
        start = self.next()
        self.type_scopes.append((yield self.type_params()))
        self.expect("(", "to open the argument types of a function type")
        args = yield self.comma_list(")", self.parse_type, "after the argument types")
        self.expect("->", "in a function type")
        ret = yield self.parse_type()
        params = tuple(self.type_scopes.pop().values())
        return FuncType(args, ret, params, span=self.span(start))

    def type_params(self) -> Step[dict[str, TypeVar]]:
        """``[A, B]`` (optional): new type variables, by name."""
        out: dict[str, TypeVar] = {}
        if self.accept("["):
            toks = yield self.comma_list("]", lambda: self.expect_kind(IDENT, "a type parameter"),
                                         "after type parameters")
            for tok in toks:
                out[tok.text] = TypeVar(tok.text, span=self.src.span(tok))
        return out

    def named_type(self) -> Step[Type]:
        tok = self.next()
        for scope in reversed(self.type_scopes):
            if tok.text in scope:
                return scope[tok.text]
        gtv = self.type_globals.get(tok.text)
        if gtv is not None:
            if not self.accept("["):
                return gtv
            args = yield self.comma_list("]", self.parse_type, "after type arguments")
            return TypeCall(gtv, args, span=self.span(tok))
        try:
            return TensorType((), str(DataType(tok.text)), span=self.src.span(tok))
        except ValueError:
            known = [n for s in self.type_scopes for n in s] + list(self.type_globals)
            hint = did_you_mean(tok.text, known + ["Tensor", "float32", "int32"])
            raise self.fail(f"unknown type {tok.text!r}{hint}", tok, got=False) from None

    # -- literals -----------------------------------------------------------------------------
    def literal(self) -> Constant:
        tok = self.next()
        number, suffix = cast(tuple[str, str], tok.value)
        try:
            arr = literal_value(number, suffix)
        except ValueError as err:
            raise self.fail(f"bad literal {tok.text}: {err}", tok, got=False) from None
        return Constant(nd_array(arr), span=self.src.span(tok))

    def attr_value(self, depth: int = 0) -> Step[_Any]:
        """An attribute value: number, string, True/False/None, inf/nan or a list (-> tuple).

        Lists nest at most ``MAX_ATTR_NESTING`` deep (no operator attribute nests more than
        twice; deeper lists would only reach the attrs' own checks)."""
        tok = self.peek()
        if self.accept("["):
            if depth >= MAX_ATTR_NESTING:
                raise self.fail(f"attribute lists nest at most {MAX_ATTR_NESTING} deep", tok,
                                got=False)
            return (yield self.comma_list("]", lambda: self.attr_value(depth + 1),
                                          "after list elements"))
        if tok.kind == STRING:
            return self.next().value
        if tok.kind == NUMBER:
            number, suffix = cast(tuple[str, str], self.next().value)
            if suffix:
                return self.literal_item(tok)
            is_float = any(c in number for c in ".eE")
            return float(number) if is_float else int(number)
        words = {"True": True, "False": False, "None": None, "inf": np.inf, "nan": np.nan}
        if tok.kind == IDENT and tok.text in words:
            return words[self.next().text]
        if tok.is_(PUNCT, "-") and self.peek(1).is_(IDENT, "inf"):
            self.next(), self.next()
            return -np.inf
        raise self.fail("expected an attribute value (number, string, True/False/None or list)")

    def literal_item(self, tok: Token) -> _Any:
        try:
            return literal_value(*tok.value).item()  # type: ignore[misc]
        except ValueError as err:
            raise self.fail(f"bad literal {tok.text}: {err}", tok, got=False) from None

    # -- patterns -----------------------------------------------------------------------------
    def pattern(self) -> Step[Pattern]:
        tok = self.peek()
        if tok.is_(IDENT, "_"):
            self.next()
            return PatternWildcard()
        if tok.kind == LOCAL:
            return PatternVar((yield self.binding_var()))
        if self.accept("("):
            return PatternTuple((yield self.comma_list(")", self.pattern, "after tuple patterns")))
        if tok.kind == IDENT:
            ctor = self.constructor(self.next())
            subs = (yield self.comma_list(")", self.pattern, "after constructor patterns")) \
                if self.accept("(") else ()
            return PatternConstructor(ctor, subs)
        raise self.fail("expected a pattern (a constructor, a %variable, '_' or a tuple)")

    def constructor(self, tok: Token) -> Constructor:
        ctor = self.ctors.get(tok.text)
        if ctor is None:
            hint = did_you_mean(tok.text, self.ctors)
            raise self.fail(f"unknown constructor {tok.text!r}{hint}", tok, got=False)
        return ctor

    def binding_var(self) -> Step[Var]:
        """``%x`` or ``%x: T`` where a variable is bound; it is added to the current block."""
        tok = self.expect_kind(LOCAL, "a %variable")
        ty = (yield self.parse_type()) if self.accept(":") else None
        var = Var(str(tok.value), ty, span=self.span(tok))
        self.locals.bind(str(tok.value), var)
        return var

    def global_token(self) -> Token:
        return self.expect_kind(GLOBAL, "a global name such as @main")


def from_step(value: _Any) -> Step[_Any]:
    """A step giving ``value``, or running it first if it is a step itself (for rules that
    take a callback which may or may not descend)."""
    if isinstance(value, Generator):
        return (yield value)
    return value
