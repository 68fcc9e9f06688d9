"""Parser base: token handling, types, patterns, literals and attribute values.

``parser.py`` builds the expression and module grammar on top of this class.
"""
from __future__ import annotations

import difflib
from typing import Any as _Any, Callable, Iterable, cast
from typing import TypeVar as _TypeVar

import numpy as np

from ..runtime.dtype import DataType
from ..runtime.errors import DiagnosticError
from ..runtime.ndarray import array as nd_array
from .adt import Constructor, Pattern, PatternConstructor, PatternTuple, PatternVar, PatternWildcard
from .expr import Constant, RelayExpr, Var
from .types import (Any, Dim, FuncType, GlobalTypeVar, IncompleteType, RelayRefType, ShapeVar,
                    TensorType, TupleType, Type, TypeCall, TypeVar)
from ._lexer import EOF, GLOBAL, IDENT, LOCAL, NUMBER, PUNCT, STRING, Source, Token
from ._text_common import literal_value

_T = _TypeVar("_T")


def did_you_mean(name: str, candidates: Iterable[str]) -> str:
    close = difflib.get_close_matches(name, list(candidates), n=3, cutoff=0.6)
    return f"; did you mean {', '.join(close)}?" if close else ""


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
        self.locals: list[dict[str, RelayExpr]] = [{}]

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

    def comma_list(self, close: str, item: Callable[[], _T], where: str) -> tuple[_T, ...]:
        """``item (',' item)* [',']`` up to and including ``close``."""
        out: list[_T] = []
        while not self.at(close):
            out.append(item())
            if not self.accept(","):
                break
        self.expect(close, where)
        return tuple(out)

    # -- types --------------------------------------------------------------------------------
    def parse_type(self) -> Type:
        tok = self.peek()
        if tok.is_(PUNCT, "("):
            return self.tuple_type()
        if tok.kind != IDENT:
            raise self.fail("expected a type")
        special = {"Tensor": self.tensor_type, "fn": self.func_type, "_": self.incomplete_type,
                   "ref": self.ref_type}.get(tok.text)
        return special() if special else self.named_type()

    def tuple_type(self) -> Type:
        start = self.expect("(")
        fields = self.comma_list(")", self.parse_type, "after tuple type fields")
        return TupleType(fields, span=self.span(start))

    def incomplete_type(self) -> Type:
        self.next()
        return IncompleteType()

    def ref_type(self) -> Type:
        self.next()
        self.expect("(", "after 'ref'")
        value = self.parse_type()
        self.expect(")", "after the referenced type")
        return RelayRefType(value)

    def tensor_type(self) -> Type:
        start = self.next()
        self.expect("[", "after 'Tensor'")
        self.expect("(", "to open the shape of a tensor type")
        shape = self.comma_list(")", self.dim, "after the shape of a tensor type")
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

    def func_type(self) -> Type:
        start = self.next()
        self.type_scopes.append(self.type_params())
        self.expect("(", "to open the argument types of a function type")
        args = self.comma_list(")", self.parse_type, "after the argument types")
        self.expect("->", "in a function type")
        ret = self.parse_type()
        params = tuple(self.type_scopes.pop().values())
        return FuncType(args, ret, params, span=self.span(start))

    def type_params(self) -> dict[str, TypeVar]:
        """``[A, B]`` (optional): new type variables, by name."""
        out: dict[str, TypeVar] = {}
        if self.accept("["):
            for tok in self.comma_list("]", lambda: self.expect_kind(IDENT, "a type parameter"),
                                       "after type parameters"):
                out[tok.text] = TypeVar(tok.text, span=self.src.span(tok))
        return out

    def named_type(self) -> Type:
        tok = self.next()
        for scope in reversed(self.type_scopes):
            if tok.text in scope:
                return scope[tok.text]
        gtv = self.type_globals.get(tok.text)
        if gtv is not None:
            if not self.accept("["):
                return gtv
            args = self.comma_list("]", self.parse_type, "after type arguments")
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

    def attr_value(self) -> _Any:
        """An attribute value: number, string, True/False/None, inf/nan or a list (-> tuple)."""
        tok = self.peek()
        if self.accept("["):
            return self.comma_list("]", self.attr_value, "after list elements")
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
    def pattern(self) -> Pattern:
        tok = self.peek()
        if tok.is_(IDENT, "_"):
            self.next()
            return PatternWildcard()
        if tok.kind == LOCAL:
            return PatternVar(self.binding_var())
        if self.accept("("):
            return PatternTuple(self.comma_list(")", self.pattern, "after tuple patterns"))
        if tok.kind == IDENT:
            ctor = self.constructor(self.next())
            subs = self.comma_list(")", self.pattern, "after constructor patterns") \
                if self.accept("(") else ()
            return PatternConstructor(ctor, subs)
        raise self.fail("expected a pattern (a constructor, a %variable, '_' or a tuple)")

    def constructor(self, tok: Token) -> Constructor:
        ctor = self.ctors.get(tok.text)
        if ctor is None:
            hint = did_you_mean(tok.text, self.ctors)
            raise self.fail(f"unknown constructor {tok.text!r}{hint}", tok, got=False)
        return ctor

    def binding_var(self) -> Var:
        """``%x`` or ``%x: T`` where a variable is bound; it is added to the current block."""
        tok = self.expect_kind(LOCAL, "a %variable")
        ty = self.parse_type() if self.accept(":") else None
        var = Var(str(tok.value), ty, span=self.span(tok))
        self.locals[-1][str(tok.value)] = var
        return var

    def global_token(self) -> Token:
        return self.expect_kind(GLOBAL, "a global name such as @main")
