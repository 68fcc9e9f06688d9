"""Parser of expressions, blocks and functions (the module level is in ``parser.py``).

Rules that nest are steps on ``ir.trampoline`` (see ``_parse_types.py``): ``x = yield
self.expr()`` where a recursive-descent parser would call ``self.expr()``.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..runtime.errors import OpNotImplemented, TVMError
from ..runtime.ndarray import NDArray
from ..runtime.ndarray import array as nd_array
from ._lexer import GLOBAL, IDENT, LOCAL, NUMBER, PUNCT, Source, Token
from ._parse_types import TypeParser, did_you_mean, from_step
from .adt import Clause, Match
from .attrs import attr_names, make_attrs
from .expr import (
    Call,
    Constant,
    Function,
    GlobalVar,
    If,
    Let,
    RefCreate,
    RefRead,
    RefWrite,
    RelayExpr,
    Tuple,
    TupleGetItem,
    Var,
)
from .op import Op
from .trampoline import Step

# Infix operators: token -> (operator, precedence); higher binds tighter.
_BINARY = {"*": ("multiply", 4), "/": ("divide", 4), "+": ("add", 3), "-": ("subtract", 3),
           "<": ("less", 2), ">": ("greater", 2), "<=": ("less_equal", 2),
           ">=": ("greater_equal", 2), "==": ("equal", 1), "!=": ("not_equal", 1)}


class ExprParser(TypeParser):
    """Blocks, bindings and expressions. Scopes: ``locals``."""

    def __init__(self, src: Source, tokens: list[Token], meta: dict[str, list[Any]]) -> None:
        super().__init__(src, tokens)
        self.meta = meta
        self.globals: dict[str, GlobalVar] = {}
        self.open_globals = False  # whether an unknown @name makes a new GlobalVar

    # -- functions and blocks -----------------------------------------------------------------
    def function_rest(self, start: Token) -> Step[Function]:
        """``[A](%x: T, key=value) -> R { body }`` after ``fn`` or ``def @name``."""
        self.type_scopes.append((yield self.type_params()))
        self.locals.push()
        self.expect("(", "to open the parameter list")
        params: list[Var] = []
        attrs: dict[str, Any] = {}
        for item in (yield self.comma_list(")", self.param, "after the parameters")):
            if isinstance(item, Var):
                params.append(item)
            else:
                attrs[item[0]] = item[1]
        ret = (yield self.parse_type()) if self.accept("->") else None
        body = yield self.block("a function body")
        self.locals.pop()
        tparams = tuple(self.type_scopes.pop().values())
        return Function(tuple(params), body, ret, tparams, make_attrs(attrs or None),
                        span=self.span(start))

    def param(self) -> Step[Var | tuple[str, Any]]:
        if self.peek().kind == IDENT and self.peek(1).is_(PUNCT, "="):
            key = self.next().text
            self.next()
            return key, (yield self.attr_value())
        return (yield self.binding_var())

    def block(self, what: str) -> Step[RelayExpr]:
        self.expect("{", f"to open {what}")
        self.locals.push()
        body = yield self.seq()
        self.locals.pop()
        self.expect("}", f"to close {what}")
        return body

    def seq(self) -> Step[RelayExpr]:
        """Bindings (``let %x = e;`` and ``%0 = e;``) then an expression. A loop, so a long
        let chain is not nested."""
        lets: list[tuple[Var, RelayExpr, Token]] = []
        while True:
            if self.at_word("let"):
                lets.append((yield self.let_binding()))
            elif self.peek().kind == LOCAL and self.peek(1).is_(PUNCT, "="):
                yield self.graph_binding()
            else:
                break
        body = yield self.expr()
        for var, value, start in reversed(lets):
            body = Let(var, value, body, span=self.src.span(start, self.prev))
        return body

    def let_binding(self) -> Step[tuple[Var, RelayExpr, Token]]:
        start = self.next()
        tok = self.expect_kind(LOCAL, "a %variable after 'let'")
        ty = (yield self.parse_type()) if self.accept(":") else None
        var = Var(str(tok.value), ty, span=self.src.span(tok, self.prev))
        self.expect("=", "after the let variable")
        recursive = self.at_word("fn")  # a let-bound function may call itself
        if recursive:
            self.locals.bind(var.name_hint, var)
        value = yield self.expr()
        self.expect(";", "after the let value")
        self.locals.bind(var.name_hint, var)
        return var, value, start

    def graph_binding(self) -> Step[None]:
        tok = self.next()
        if not str(tok.value).isdigit():
            raise self.fail(f"a binding without 'let' must use a numbered name such as %0; "
                            f"write 'let {tok.text} = ...;'", tok, got=False)
        if self.locals.bound_here(str(tok.value)):
            raise self.fail(f"{tok.text} is already bound in this block", tok, got=False)
        self.next()
        value = yield self.expr()
        self.expect(";", f"after the value of {tok.text}")
        self.locals.bind(str(tok.value), value)

    # -- expressions --------------------------------------------------------------------------
    def expr(self) -> Step[RelayExpr]:
        """An expression, with infix operators (``%a + %b`` is ``add(%a, %b)``; TVM's table
        of precedences: ``* /`` over ``+ -`` over comparisons over ``== !=``)."""
        start = self.peek()
        return (yield self.binary((yield self.postfix()), 0, start))

    def binary(self, lhs: RelayExpr, min_prec: int, start: Token) -> Step[RelayExpr]:
        """Precedence climbing over ``_BINARY``; operators of one level group to the left."""
        while (op := self.binary_op(min_prec)) is not None:
            self.next()
            rhs_start = self.peek()
            rhs = yield self.postfix()
            while (inner := self.binary_op(op[1] + 1)) is not None:
                rhs = yield self.binary(rhs, inner[1], rhs_start)
            callee = Op.get(op[0])
            lhs = Call(callee, (lhs, rhs), self.op_attrs(callee, start, {}),
                       span=self.span(start))
        return lhs

    def binary_op(self, min_prec: int) -> tuple[str, int] | None:
        tok = self.peek()
        op = _BINARY.get(tok.text) if tok.kind == PUNCT else None
        return op if op is not None and op[1] >= min_prec else None

    def postfix(self) -> Step[RelayExpr]:
        """A primary expression followed by calls ``(...)`` and projections ``.N``."""
        start = self.peek()
        e = yield self.primary()
        while True:
            if self.at("("):
                e = yield self.call(e, start)
            elif self.accept("."):
                tok = self.expect_kind(NUMBER, "a field index after '.'")
                if not tok.text.isdigit():
                    raise self.fail("a field index must be a non-negative integer", tok, False)
                e = TupleGetItem(e, int(tok.text), span=self.span(start))
            else:
                return e

    def primary(self) -> Step[RelayExpr]:
        tok = self.peek()
        if tok.kind == LOCAL:
            return self.local_ref(self.next())
        if tok.kind == GLOBAL:
            return self.global_ref(self.next())
        if tok.kind == NUMBER:
            return self.literal()
        if tok.is_(PUNCT, "("):
            return (yield self.paren())
        if tok.is_(PUNCT, "{"):
            return (yield self.block("a block"))
        if tok.kind == IDENT:
            keyword = _KEYWORDS.get(tok.text)
            return (yield from_step(keyword(self))) if keyword else self.name_ref(self.next())
        raise self.fail("expected an expression")

    def local_ref(self, tok: Token) -> RelayExpr:
        found = self.locals.lookup(str(tok.value))
        if found is not None:
            return found
        names = {"%" + n for n in self.locals.names()}
        hint = did_you_mean(tok.text, names)
        raise self.fail(f"unbound variable {tok.text}{hint}", tok, got=False)

    def global_ref(self, tok: Token) -> GlobalVar:
        gv = self.globals.get(str(tok.value))
        if gv is None and self.open_globals:  # parse_expr: globals of a module to come
            gv = self.globals[str(tok.value)] = GlobalVar(str(tok.value), span=self.src.span(tok))
        if gv is None:
            hint = did_you_mean(tok.text, ["@" + n for n in self.globals])
            raise self.fail(f"undefined global {tok.text}{hint}", tok, got=False)
        return gv

    def name_ref(self, tok: Token) -> RelayExpr:
        """A constructor (a nullary one stands for its value) or an operator."""
        if tok.text in self.ctors:
            ctor = self.ctors[tok.text]
            if ctor.inputs or self.at("("):
                return ctor
            return Call(ctor, (), span=self.src.span(tok))
        try:
            return Op.get(tok.text)
        except OpNotImplemented as err:
            hint = did_you_mean(tok.text, self.ctors) if tok.text[:1].isupper() else ""
            raise self.fail(f"{err}{hint}", tok, got=False) from None

    def paren(self) -> Step[RelayExpr]:
        """``()``, ``(e)``, ``(e,)`` or ``(e1, e2, ...)``."""
        start = self.next()
        if self.accept(")"):
            return Tuple((), span=self.span(start))
        first = yield self.expr()
        if self.accept(")"):
            return first
        self.expect(",", "or ')' after a parenthesized expression")
        fields = (first, *(yield self.comma_list(")", self.expr, "after tuple fields")))
        return Tuple(fields, span=self.span(start))

    def call(self, callee: RelayExpr, start: Token) -> Step[Call]:
        self.next()
        args: list[RelayExpr] = []
        kwargs: dict[str, tuple[Token, Any]] = {}
        while not self.at(")"):
            if self.peek().kind == IDENT and self.peek(1).is_(PUNCT, "="):
                key = self.next()
                self.next()
                kwargs[key.text] = (key, (yield self.attr_value()))
            elif kwargs:
                raise self.fail("expected a keyword argument after keyword arguments")
            else:
                args.append((yield self.expr()))
            if not self.accept(","):
                break
        self.expect(")", "after call arguments")
        attrs = self.op_attrs(callee, start, kwargs)
        return Call(callee, tuple(args), attrs, span=self.span(start))

    def op_attrs(self, callee: RelayExpr, start: Token, kwargs: dict[str, Any]) -> Any:
        """The attrs record of an operator call, checked key by key."""
        if not isinstance(callee, Op):
            if kwargs:
                raise self.fail("keyword arguments are only allowed in operator calls",
                                next(iter(kwargs.values()))[0], got=False)
            return None
        cls = callee.op_def.attrs_type
        fields = attr_names(cls) if cls else []
        for key, (tok, _) in kwargs.items():
            if key not in fields:
                hint = did_you_mean(key, fields) or (
                    f"; it has: {', '.join(fields)}" if fields else "; it takes none")
                raise self.fail(f"unknown attribute {key!r} of {callee.name}{hint}", tok, False)
        if cls is None:
            return None
        try:
            return callee.make_attrs(**{k: v for k, (_, v) in kwargs.items()})
        except (TypeError, ValueError, TVMError) as err:
            # Point at the attribute the message names, if any, else at the operator.
            at = next((t for k, (t, _) in kwargs.items() if f"attribute {k} " in str(err)), start)
            msg = str(err) if str(err).startswith(callee.name) else f"{callee.name}: {err}"
            raise self.fail(msg, at, got=False) from None

    def keyword_fn(self) -> Step[RelayExpr]:
        return (yield self.function_rest(self.next()))

    def keyword_if(self) -> Step[RelayExpr]:
        start = self.next()
        self.expect("(", "after 'if'")
        cond = yield self.expr()
        self.expect(")", "after the if condition")
        then = yield self.block("the then-branch")
        if not self.at_word("else"):
            raise self.fail("expected 'else' after the then-branch of an if")
        self.next()
        other = yield self.block("the else-branch")
        return If(cond, then, other, span=self.span(start))

    def keyword_match(self) -> Step[RelayExpr]:
        """``match (e) { p => e, ... }``; ``match?`` allows incomplete clauses. The matched
        expression's parentheses may hold a tuple: ``match (%a, %b)`` matches ``(%a, %b)``."""
        start = self.next()
        complete = self.accept("?") is None
        if not self.at("("):
            raise self.fail("expected '(' after 'match'")
        data = yield self.paren()
        self.expect("{", "to open the match clauses")
        clauses = yield self.comma_list("}", self.clause, "after the match clauses")
        return Match(data, clauses, complete, span=self.span(start))

    def clause(self) -> Step[Clause]:
        self.locals.push()
        lhs = yield self.pattern()
        self.expect("=>", "after a pattern")
        rhs = (yield self.block("a clause body")) if self.at("{") else (yield self.expr())
        self.locals.pop()
        return Clause(lhs, rhs)

    def keyword_let(self) -> Step[RelayExpr]:
        self.locals.push()  # a let inside an expression scopes over its own body only
        body = yield self.seq()
        self.locals.pop()
        return body

    def keyword_bool(self) -> RelayExpr:
        tok = self.next()
        return Constant(nd_array(np.array(tok.text == "True")), span=self.src.span(tok))

    def keyword_ref(self) -> Step[RelayExpr]:
        start = self.next()
        self.expect("(", f"after '{start.text}'")
        args = [(yield self.expr())]
        if start.text == "ref_write":
            self.expect(",", "between the reference and the value of ref_write")
            args.append((yield self.expr()))
        self.expect(")", f"after the arguments of {start.text}")
        cls = {"ref": RefCreate, "ref_read": RefRead, "ref_write": RefWrite}[start.text]
        node: RelayExpr = cls(*args, span=self.span(start))
        return node

    def keyword_meta(self) -> RelayExpr:
        """``meta[relay.Constant][i]``: entry ``i`` of the metadata section."""
        start = self.next()
        self.expect("[", "after 'meta'")
        kind = self.expect_kind(IDENT, "a metadata kind such as relay.Constant").text
        self.expect("]", "after the metadata kind")
        self.expect("[", "before the metadata index")
        index_tok = self.expect_kind(NUMBER, "a metadata index")
        self.expect("]", "after the metadata index")
        entries = self.meta.get(kind)
        index = int(index_tok.text) if index_tok.text.isdigit() else -1
        if entries is None or not 0 <= index < len(entries):
            have = f"has {len(entries)} {kind} entries" if entries is not None else \
                f"has no {kind} entries (is the #[metadata] section missing?)"
            raise self.fail(f"{self.src_text(start)} is not defined: the metadata {have}",
                            start, got=False)
        return _as_meta_constant(entries, index, kind, lambda m: self.fail(m, start, False))

    def src_text(self, start: Token) -> str:
        return "".join(t.text for t in self.toks[self.toks.index(start): self.pos])

    def keyword_free_var(self) -> RelayExpr:
        raise self.fail("free_var declarations must come before the expression, at top level",
                        got=False)


_P = ExprParser
_KEYWORDS = {"fn": _P.keyword_fn, "if": _P.keyword_if, "match": _P.keyword_match,
             "let": _P.keyword_let, "True": _P.keyword_bool, "False": _P.keyword_bool,
             "ref": _P.keyword_ref, "ref_read": _P.keyword_ref, "ref_write": _P.keyword_ref,
             "meta": _P.keyword_meta, "free_var": _P.keyword_free_var}


def _as_meta_constant(entries: list[Any], index: int, kind: str, fail: Any) -> Constant:
    """Entry ``index`` as a Constant, cached so every reference shares one node."""
    entry = entries[index]
    if isinstance(entry, Constant):
        return entry
    if isinstance(entry, (NDArray, np.ndarray, np.generic)):
        const = Constant(entry if isinstance(entry, NDArray) else nd_array(np.asarray(entry)))
        entries[index] = const
        return const
    raise fail(f"meta[{kind}][{index}] is a {type(entry).__name__}, not a constant")
