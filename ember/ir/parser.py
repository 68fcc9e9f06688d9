"""The text format parser (version 0.0.5): ``fromtext``/``parse`` -> IRModule, ``parse_expr``.

A hand-written recursive-descent parser over the tokens of ``_lexer.py``; the grammar is in
docs/text_format.md. Errors raise ``DiagnosticError`` with ``source:line:column``, what was
expected, the token found, and the source line with a caret. Parsed nodes carry spans.
"""
from __future__ import annotations

import re
from json import JSONDecodeError
from collections.abc import Mapping
from typing import Any

from ..runtime.json_reader import loads as json_loads
from ._lexer import EOF, GLOBAL, IDENT, PUNCT, STRING, Source, Token, tokenize
from ._parse_expr import ExprParser
from ._text_common import CONSTANT_KIND, decode_array
from ._tvm_metadata import is_tvm_graph, read_tvm_metadata
from .adt import Constructor, TypeData
from .expr import Function, GlobalVar, RelayExpr
from .module import IRModule
from .trampoline import Step, run
from .types import GlobalTypeVar
from .visitor import free_vars

__all__ = ["fromtext", "parse", "parse_expr"]
_VERSIONS = ("0.0.5", "0.0.4")
_METADATA_RE = re.compile(r"^#\[metadata\][ \t\r]*$", re.MULTILINE)  # \r: CRLF text


class Parser(ExprParser):
    """Definitions and modules on top of the expression parser; one instance per text."""

    def __init__(self, src: Source, mod: IRModule, meta: dict[str, list[Any]]) -> None:
        super().__init__(src, tokenize(src), meta)
        self.mod = mod
        self.globals = {gv.name_hint: gv for gv in mod.functions}
        self.defined: dict[str, Token] = {}
        self.type_globals = {gtv.name_hint: gtv for gtv in mod.type_definitions}
        self.ctors = {c.name_hint: c for td in mod.type_definitions.values()
                      for c in td.constructors}

    # -- top level ----------------------------------------------------------------------------
    def header(self) -> None:
        """The optional ``#[version = "0.0.5"]`` line."""
        if not self.accept("#"):
            return
        self.expect("[", "after '#'")
        if not self.at_word("version"):
            raise self.fail("expected 'version' in the '#[version = \"0.0.5\"]' header")
        self.next()
        self.expect("=", "after 'version'")
        tok = self.expect_kind(STRING, 'a version string such as "0.0.5"')
        if tok.value not in _VERSIONS:
            raise self.fail(f"unsupported text format version {tok.text}; ember reads "
                            f'"{_VERSIONS[0]}"', tok, got=False)
        self.expect("]", "after the version")

    def module(self) -> Step[IRModule]:
        """Definitions (``def``/``type``), or a lone expression which becomes ``@main``."""
        self.header()
        if not any(self.at_word(w) for w in ("def", "type", "extern")):
            expr = yield self.top_expr()
            self.mod.add("main", expr if isinstance(expr, Function)
                         else Function(tuple(free_vars(expr)), expr, span=expr.span))
            return self.mod
        self.declare_globals()
        while self.peek().kind != EOF:
            if self.at_word("def"):
                yield self.definition()
            elif self.at_word("type"):
                yield self.type_definition()
            elif self.at_word("extern"):
                yield self.extern_type()
            else:
                raise self.fail("expected 'def', 'type' or 'extern type' at top level")
        return self.mod

    def top_expr(self) -> Step[RelayExpr]:
        """``free_var`` declarations, then a block body, then the end of the text."""
        while self.at_word("free_var"):
            self.next()
            yield self.binding_var()
            self.expect(";", "after a free_var declaration")
        expr = yield self.seq()
        if self.peek().kind != EOF:
            raise self.fail("expected the end of the text after the expression")
        return expr

    def declare_globals(self) -> None:
        """Name every top-level def and type first, so bodies may refer to later ones."""
        depth = 0
        for tok, nxt in zip(self.toks, self.toks[1:]):
            if tok.kind == PUNCT and tok.text in "([{":
                depth += 1
            elif tok.kind == PUNCT and tok.text in ")]}":
                depth -= 1
            elif depth == 0 and tok.is_(IDENT, "def") and nxt.kind == GLOBAL:
                self.declare_def(nxt)
            elif depth == 0 and tok.is_(IDENT, "type") and nxt.kind == IDENT:
                self.declare_type(nxt)

    def declare_def(self, tok: Token) -> None:
        name = str(tok.value)
        first = self.defined.get(name)
        if first is not None:
            raise self.fail(f"duplicate definition of @{name} (first defined at line "
                            f"{first.line})", tok, got=False)
        self.defined[name] = tok
        if name not in self.globals:
            self.globals[name] = GlobalVar(name, span=self.src.span(tok))

    def declare_type(self, tok: Token) -> None:
        if ("type " + tok.text) in self.defined:
            raise self.fail(f"duplicate definition of type {tok.text}", tok, got=False)
        self.defined["type " + tok.text] = tok
        if tok.text not in self.type_globals:
            self.type_globals[tok.text] = GlobalTypeVar(tok.text, span=self.src.span(tok))

    def definition(self) -> Step[None]:
        start = self.next()
        gv = self.globals[str(self.global_token().value)]
        self.mod.add(gv, (yield self.function_rest(start)))

    def type_definition(self) -> Step[None]:
        """``type Name[A] { Ctor(A, Name[A]), Other, }``."""
        self.next()
        gtv = self.type_globals[self.expect_kind(IDENT, "a type name").text]
        self.type_scopes.append((yield self.type_params()))
        self.expect("{", "to open the constructors of a type definition")
        ctors = yield self.comma_list("}", lambda: self.ctor_decl(gtv), "after the constructors")
        tvars = tuple(self.type_scopes.pop().values())
        self.mod.add_type_def(gtv, TypeData(gtv, tvars, ctors))

    def extern_type(self) -> Step[None]:
        """``extern type Storage``: a type with no constructors, made and taken apart only by
        operators (TVM's ``core.rly`` declares the VM's ``Storage`` so)."""
        self.next()
        if not self.at_word("type"):
            raise self.fail("expected 'type' after 'extern'")
        self.next()
        gtv = self.type_globals[self.expect_kind(IDENT, "a type name").text]
        tvars = tuple((yield self.type_params()).values())
        self.mod.add_type_def(gtv, TypeData(gtv, tvars, ()))

    def ctor_decl(self, gtv: GlobalTypeVar) -> Step[Constructor]:
        tok = self.expect_kind(IDENT, "a constructor name")
        if tok.text in self.ctors and self.ctors[tok.text].belong_to is not gtv:
            raise self.fail(f"constructor {tok.text} is already defined", tok, got=False)
        inputs = (yield self.comma_list(")", self.parse_type, "after constructor fields")) \
            if self.accept("(") else ()
        ctor = Constructor(tok.text, inputs, gtv, span=self.src.span(tok))
        self.ctors[tok.text] = ctor
        return ctor

# -- public API -------------------------------------------------------------------------------
def _split_metadata(text: str, src_name: str) -> tuple[str, dict[str, list[Any]]]:
    """The program text and the decoded ``#[metadata]`` section after it (if any)."""
    m = _METADATA_RE.search(text)
    if m is None:
        return text, {}
    body, first_line = text[: m.start()], text.count("\n", 0, m.start()) + 1
    src = Source(text, src_name)
    try:
        table = json_loads(text[m.end():])  # any depth: json.loads recurses per level
    except JSONDecodeError as err:
        raise src.error(f"bad metadata section: {err.msg}", first_line + err.lineno - 1,
                        err.colno) from None
    if is_tvm_graph(table):  # text that TVM printed
        try:
            return body, read_tvm_metadata(table)
        except (ValueError, TypeError, KeyError) as err:
            raise src.error(f"bad metadata section (TVM's object graph): {err}", first_line,
                            1) from None
    if not isinstance(table, dict) or not all(isinstance(v, list) for v in table.values()):
        raise src.error("bad metadata section: expected an object of lists", first_line, 1)
    for i, record in enumerate(table.get(CONSTANT_KIND, [])):
        try:
            table[CONSTANT_KIND][i] = decode_array(record)
        except (ValueError, TypeError) as err:
            raise src.error(f"bad metadata entry {CONSTANT_KIND}[{i}]: {err}", first_line,
                            1) from None
    return body, table


def _parser(text: str, source_name: str, init_module: IRModule | None,
            init_meta_table: Mapping[str, Any] | None) -> Parser:
    if not isinstance(text, str):
        raise TypeError(f"parse: expected the program as a str, got {type(text).__name__}")
    body, meta = _split_metadata(text, source_name)
    table = {k: list(v) for k, v in (init_meta_table or {}).items()}
    table.update(meta)
    mod = init_module.copy() if init_module is not None else IRModule()
    return Parser(Source(body, source_name), mod, table)


def fromtext(text: str, source_name: str = "<string>", init_module: IRModule | None = None,
             init_meta_table: Mapping[str, Any] | None = None) -> IRModule:
    """Parse a program in the text format into an IRModule.

    The text holds ``def``/``type`` definitions, or a single expression that becomes
    ``@main`` (wrapped in a function over its free variables). ``init_module``'s functions
    and types are visible to the text and kept in the result; ``init_meta_table`` supplies
    ``meta[...]`` entries (``{"relay.Constant": [...]}``) when the text has no metadata.
    Raises DiagnosticError (with line, column and a caret) on any error in the text.
    """
    return run(_parser(text, source_name, init_module, init_meta_table).module())


def parse(text: str, source_name: str = "<string>", init_module: IRModule | None = None,
          init_meta_table: Mapping[str, Any] | None = None) -> IRModule:
    """Same as ``fromtext``."""
    return fromtext(text, source_name, init_module, init_meta_table)


def parse_expr(text: str, source_name: str = "<string>", init_module: IRModule | None = None,
               init_meta_table: Mapping[str, Any] | None = None) -> RelayExpr:
    """Parse one expression (optionally after the version header and ``free_var`` lines).

    A ``@name`` that ``init_module`` does not define becomes a new GlobalVar (one per name), so
    expressions for a module still to be built can refer to its functions.
    """
    p = _parser(text, source_name, init_module, init_meta_table)
    p.open_globals = True
    p.header()
    return run(p.top_expr())
