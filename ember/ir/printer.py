"""The text printer: IRModules, expressions, types, patterns and attrs in format 0.0.5.

Dataflow prints in TVM's graph style: every non-atomic expression is bound to a numbered
temporary (``%0 = add(%a, %b);``) except the last expression of a block, which is printed
inline unless it is shared. Variables, globals, operators, constructors and constants are
always printed inline. A shared expression is bound once, in the innermost block enclosing
all its uses (``_print_blocks.py``). Walks over dataflow are iterative, so deep graphs and
long ``let`` chains do not hit Python's recursion limit; nested blocks (functions in
functions, ifs in ifs) are printed by steps run on ``ir.trampoline``, for the same reason.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np

from ._print_blocks import Block, BlockPlan, dataflow_children, is_nullary_ctor_call
from ._print_layout import Layout
from ._print_types import TYPE_WORDS, TypePrinter, attrs_items_text, attrs_text, tuple_text
from ._text_common import NameTable, encode_metadata, sanitize_name, scalar_literal
from .adt import Clause, Constructor, Match, Pattern, TypeData
from .attrs import Attrs, DictAttrs
from .base import Node
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
from .module import IRModule
from .op import Op
from .trampoline import Step, run
from .types import Type
from .visitor import free_vars

VERSION = "0.0.5"
_ATOMIC = (Var, GlobalVar, Op, Constructor, Constant)


class _Frame:
    __slots__ = ("bound", "lines", "outer", "scope")

    def __init__(self, scope: Block) -> None:
        self.scope = scope
        self.outer: _Frame | None = None  # an open frame of the same block, if any
        self.bound: list[int] = []  # ids of the nodes bound to temporaries here
        self.lines: list[str] = []


class TextPrinter(TypePrinter):
    """Prints one root (module, expression, type, ...) to text. Use ``astext``."""

    def __init__(self, show_meta_data: bool = True, show_types: bool = True,
                 annotate: Callable[[RelayExpr], str] | None = None) -> None:
        super().__init__()
        self.show_meta_data = show_meta_data
        self.show_types = show_types
        self.annotate = annotate
        self.meta: list[np.ndarray] = []
        self.meta_index: dict[int, int] = {}
        self.vars = NameTable()
        self.frames: list[_Frame] = []  # the open blocks, innermost last
        # What the open frames know, in one place (a lookup per frame would cost the depth):
        self.frame_of: dict[int, _Frame] = {}  # id of a block -> its open frame
        self.temp_names: dict[int, str] = {}  # id of a node -> its temporary in an open frame
        self.layout = Layout()
        self.plan = BlockPlan(Tuple(()))  # replaced by analyze() for each printed root
        self.temps = 0
        # The statement printed for one node, for short_text (keeping every statement would
        # hold a nested program's text once per level).
        self.wanted: RelayExpr | None = None
        self.statement: str | None = None
        self._keep: list[Any] = []

    # -- roots --------------------------------------------------------------------------------
    def module(self, mod: IRModule) -> str:
        parts = []
        for _, td in sorted(mod.type_definitions.items(), key=lambda kv: kv[0].name_hint):
            self.type_vars = NameTable(TYPE_WORDS)
            parts.append(self.type_data(td))
        for gv, func in sorted(mod.functions.items(), key=lambda kv: kv[0].name_hint):
            # Names and temporaries restart in each def: defs are closed.
            self.vars, self.type_vars, self.temps = NameTable(), NameTable(TYPE_WORDS), 0
            if isinstance(func, Function):
                self.analyze(func)
                text = run(self.function(func, f"def @{sanitize_name(gv.name_hint)}"))
                parts.append(self.layout.text(text))
            elif getattr(func, "name", None) == gv.name_hint:
                # A PrimFunc prints as loop IR under its own name (as TVM's printer, the
                # parser reads it back no more than TVM's did).
                parts.append(str(func))
            else:
                parts.append(f"// @{gv.name_hint}: {type(func).__name__}\n{func}")
        return "\n\n".join(parts)

    def top_expr(self, expr: RelayExpr) -> str:
        """An expression as a block at top level, with ``free_var`` lines for its free vars."""
        top = self.analyze(expr)
        decls = [f"free_var {self.binder(v)};" for v in free_vars(expr)]
        return self.layout.text("\n".join(decls + run(self.scope(expr, top))))

    def analyze(self, root: RelayExpr) -> Block:
        self.plan = BlockPlan(root)
        return self.plan.top

    def block_of(self, owner: RelayExpr, slot: int) -> Block:
        return self.plan.block(owner, slot, self.frames[-1].scope if self.frames else None)

    # -- blocks -------------------------------------------------------------------------------
    def scope(self, body: RelayExpr, block: Block, unroll_root: bool = False
              ) -> Step[list[str]]:
        """The statements of a block ending in ``body``; let chains are walked in a loop.

        A shared let is printed as a block of its own (``unroll_root``) and bound once.
        """
        self.push(_Frame(block))
        e = body
        while isinstance(e, Let) and (unroll_root and e is body or self.plan.uses_of(e) <= 1):
            name = self.binder(e.var)  # named before the value: a let may be recursive
            value = yield self.inline(e.value, force=self._recursive(e))
            self.emit(f"let {name} = {value};", e, self.frames[-1])
            e = e.body
        final = yield self.inline(e)
        return self.pop().lines + [final]

    def push(self, frame: _Frame) -> None:
        self.frames.append(frame)
        frame.outer = self.frame_of.get(id(frame.scope))
        self.frame_of[id(frame.scope)] = frame

    def pop(self) -> _Frame:
        frame = self.frames.pop()
        if frame.outer is not None:
            self.frame_of[id(frame.scope)] = frame.outer
        else:
            del self.frame_of[id(frame.scope)]
        for key in frame.bound:  # its temporaries are out of scope now
            del self.temp_names[key]
        return frame

    def _recursive(self, let: Let) -> bool:
        # A shared function that calls itself through the let variable must be printed in
        # place: bound to a temporary first, it would use the variable before its binding.
        value = let.value
        return (isinstance(value, Function) and self.plan.uses_of(value) > 1
                and any(v is let.var for v in free_vars(value)))

    def emit(self, statement: str, node: RelayExpr, frame: _Frame) -> None:
        frame.lines.append(statement)
        if node is self.wanted:
            self.statement = statement

    def lookup(self, e: RelayExpr) -> str | None:
        """The temporary ``e`` is bound to in an open block, if any."""
        return self.temp_names.get(id(e))

    def inline(self, e: RelayExpr, force: bool = False) -> Step[str]:
        """``e`` printed in place (its sub-expressions bound first), or its temporary."""
        if self.atomic(e) or self.lookup(e) or (self.plan.uses_of(e) > 1 and not force):
            return (yield self.operand(e))
        yield self.prepare(e)
        doc = yield self.doc(e)
        if e is self.wanted and self.statement is None:
            self.statement = doc
        return doc

    def prepare(self, root: RelayExpr) -> Step[None]:
        """Bind every non-atomic same-block sub-expression of ``root`` (children first)."""
        stack = [(c, False) for c in reversed(dataflow_children(root))]  # left to right
        while stack:
            node, ready = stack.pop()
            if self.atomic(node) or self.lookup(node) is not None:
                continue
            if ready:
                yield self.bind_temp(node)
                continue
            stack.append((node, True))
            stack.extend((c, False) for c in reversed(dataflow_children(node)))

    def bind_temp(self, e: RelayExpr) -> Step[str]:
        """``%N = e;`` in the innermost open block that encloses every use of ``e``."""
        home = self.plan.home.get(id(e))
        frame = self.frame_of.get(id(home), self.frames[-1]) if home is not None \
            else self.frames[-1]
        doc = yield self.doc(e)  # before numbering, so temporaries inside it come first
        name = f"%{self.temps}"
        self.temps += 1
        self.emit(f"{name} = {doc};", e, frame)
        frame.bound.append(id(e))
        self.temp_names[id(e)] = name
        return name

    def operand(self, e: RelayExpr) -> Step[str]:
        """How ``e`` is referred to from another expression."""
        name = self.known(e)
        if name is None:
            yield self.prepare(e)
            name = self.lookup(e) or (yield self.bind_temp(e))
        return name

    def known(self, e: RelayExpr) -> str | None:
        """How ``e`` is referred to, if that needs no printing: an atom or a bound node."""
        return self.atom(e) if self.atomic(e) else self.lookup(e)

    def operands(self, exprs: tuple[RelayExpr, ...] | list[RelayExpr]) -> Step[list[str]]:
        out = []
        for e in exprs:
            text = self.known(e)
            out.append(text if text is not None else (yield self.operand(e)))
        return out

    # -- expressions --------------------------------------------------------------------------
    def atomic(self, e: RelayExpr) -> bool:
        """Printed in place wherever it is used (a shared ``Nil`` gets a temporary, so that
        the parsed program shares it too)."""
        if isinstance(e, _ATOMIC):
            return True
        return is_nullary_ctor_call(e) and self.plan.uses_of(e) <= 1

    def atom(self, e: RelayExpr) -> str:
        if isinstance(e, Var):
            return "%" + self.vars.get(e, e.name_hint)
        if isinstance(e, GlobalVar):
            return "@" + sanitize_name(e.name_hint)
        if isinstance(e, Op):
            return e.name
        if isinstance(e, Constructor):
            return e.name_hint
        if isinstance(e, Call):
            return self.atom(e.op)  # an unshared nullary constructor call: ``Nil``
        return self.constant(e)  # type: ignore[arg-type]

    def constant(self, c: Constant) -> str:
        arr = c.data.numpy()
        text = scalar_literal(arr) if arr.ndim == 0 else None
        if text is None:
            if id(c) not in self.meta_index:
                self.meta_index[id(c)] = len(self.meta)
                self.meta.append(arr)
                self._keep.append(c)
            text = f"meta[relay.Constant][{self.meta_index[id(c)]}]"
        return text + self.type_comment(c)

    def type_comment(self, e: RelayExpr) -> str:
        """`` /* ty=T */`` after an expression, or the caller's ``annotate(e)`` instead."""
        if self.annotate is not None:
            return annotation_comment(self.annotate(e), e)
        ty = e.checked_type_
        return f" /* ty={self.brief_type(ty)} */" if self.show_types and ty is not None else ""

    def doc(self, e: RelayExpr) -> Step[str]:
        """The text of ``e`` itself, its operands already bound."""
        if isinstance(e, Function):
            return (yield self.function(e, "fn"))
        printer: Callable[[Any], Step[str]] | None = getattr(self, f"_doc_{type(e).__name__}",
                                                             None)
        if printer is None:
            return self.atom(e) if isinstance(e, _ATOMIC) else self._doc_unknown(e)
        return (yield printer(e)) + self.type_comment(e)

    def _doc_unknown(self, e: Any) -> str:
        return f"/* unprintable {type(e).__name__} */ ()"

    def _doc_Call(self, e: Call) -> Step[str]:
        if is_nullary_ctor_call(e):
            return self.atom(e.op)
        args = yield self.operands(e.args)
        if isinstance(e.op, Op):
            args += attrs_items_text(e.attrs)
        return f"{(yield self.operand(e.op))}({', '.join(args)})"

    def _doc_Tuple(self, e: Tuple) -> Step[str]:
        return tuple_text((yield self.operands(e.fields)))

    def _doc_TupleGetItem(self, e: TupleGetItem) -> Step[str]:
        return f"{(yield self.operand(e.tuple_value))}.{e.index}"

    def _doc_Let(self, e: Let) -> Step[str]:
        return self.layout.block((yield self.scope(e, self.block_of(e, 0), unroll_root=True)))

    def _doc_If(self, e: If) -> Step[str]:
        cond = yield self.operand(e.cond)
        then = self.layout.block((yield self.scope(e.true_branch, self.block_of(e, 0))))
        other = self.layout.block((yield self.scope(e.false_branch, self.block_of(e, 1))))
        return f"if ({cond}) {then} else {other}"

    def _doc_Match(self, e: Match) -> Step[str]:
        head = f"match{'' if e.complete else '?'} ({(yield self.operand(e.data))}) "
        clauses = []
        for i, c in enumerate(e.clauses):
            clauses.append((yield self.clause(c, self.block_of(e, i))))
        return head + self.layout.block(clauses)

    def clause(self, c: Clause, block: Block) -> Step[str]:
        lhs = self.pattern(c.lhs, self.binder)
        lines = yield self.scope(c.rhs, block)
        return f"{lhs} => {lines[0] if len(lines) == 1 else self.layout.block(lines)},"

    def _doc_RefCreate(self, e: RefCreate) -> Step[str]:
        return f"ref({(yield self.operand(e.value))})"

    def _doc_RefRead(self, e: RefRead) -> Step[str]:
        return f"ref_read({(yield self.operand(e.ref))})"

    def _doc_RefWrite(self, e: RefWrite) -> Step[str]:
        ref, value = yield self.operands((e.ref, e.value))
        return f"ref_write({ref}, {value})"

    def binder(self, v: Var) -> str:
        """A variable where it is bound: ``%x`` or ``%x: Tensor[(3), float32]``."""
        name = "%" + self.vars.get(v, v.name_hint)
        return name if v.type_annotation is None else f"{name}: {self.type(v.type_annotation)}"

    def function(self, f: Function, head: str) -> Step[str]:
        """``fn [A](%x: A, Primitive=1) -> A { body }`` (head is ``fn`` or ``def @name``)."""
        tparams = self.type_params(f.type_params)
        params = [self.binder(p) for p in f.params] + attrs_items_text(f.attrs)
        ret = f" -> {self.type(f.ret_type)}" if f.ret_type is not None else ""
        head = f"{head} {tparams}" if head == "fn" else head + tparams
        body = yield self.scope(f.body, self.block_of(f, 0))
        return f"{head}({', '.join(params)}){ret} {self.layout.block(body)}"

    def statement_of(self, e: RelayExpr) -> str | None:
        """The statement or inline text printed for ``e``, when ``e`` is an atom or the
        ``wanted`` node (None if it was not printed)."""
        if self.atomic(e):
            return self.atom(e)
        if e is not self.wanted or self.statement is None:
            return None
        return self.layout.text(self.statement)


def _header(text: str) -> str:
    return f'#[version = "{VERSION}"]\n{text}' if text else f'#[version = "{VERSION}"]'


def annotation_comment(text: Any, e: RelayExpr) -> str:
    """The comment that ``annotate(e)`` returned ``text`` for: nothing for an empty string,
    ``text`` itself if it is one block comment, else ``/* text */``. A stray ``*/`` in it is
    spaced apart so that the comment cannot end early and the text still parses."""
    if not isinstance(text, str):
        raise TypeError(f"astext: annotate must return a str, got {type(text).__name__} for "
                        f"a {type(e).__name__}")
    if not text:
        return ""
    if len(text) >= 4 and text.startswith("/*") and text.endswith("*/") and \
            text.count("/*") == 1 and text.count("*/") == 1:  # comments nest: one of each
        return " " + text
    return " /* " + text.replace("*/", "* /").replace("/*", "/ *") + " */"


def astext(node: Any, show_meta_data: bool = True, show_types: bool = True,
           annotate: Callable[[RelayExpr], str] | None = None) -> str:
    """``node`` in the text format (docs/text_format.md).

    Modules and expressions get the ``#[version = "0.0.5"]`` header, and (when
    ``show_meta_data``) a ``#[metadata]`` section holding the non-scalar constants. Inferred
    types are shown as ``/* ty=... */`` comments when ``show_types``. ``annotate(expr) -> str``
    (TVM's ``astext(annotate=...)``) replaces those comments: its text, when not empty, is
    printed as a comment after each call, tuple, projection, control-flow expression and
    constant (``lambda e: str(e.span)`` shows where each came from). Types, patterns, attrs
    and type definitions print bare.
    """
    p = TextPrinter(show_meta_data, show_types, annotate)
    if isinstance(node, IRModule):
        text = _header(p.module(node))
    elif isinstance(node, RelayExpr):
        text = _header(p.top_expr(node))
    else:
        return _bare(p, node)
    if p.meta:
        if show_meta_data:
            text += "\n\n#[metadata]\n" + encode_metadata(p.meta)
        else:
            text += "\n/* the metadata section is omitted (show_meta_data=False) */"
    return text


def _bare(p: TextPrinter, node: Any) -> str:
    if isinstance(node, Type) or node is None:
        return p.type(node)
    if isinstance(node, TypeData):
        return p.type_data(node)
    if isinstance(node, Pattern):
        return p.pattern(node)
    if isinstance(node, Clause):
        return p.layout.text(run(p.clause(node, p.analyze(node.rhs)))).rstrip(",")
    if isinstance(node, (Attrs, DictAttrs)):
        return attrs_text(node)
    if isinstance(node, Node):
        return f"{type(node).__name__}({', '.join(node.field_names())})"
    raise TypeError(f"astext: cannot print a {type(node).__name__}")


def short_text(expr: RelayExpr, within: RelayExpr | None = None, limit: int = 160) -> str:
    """One line for error messages: ``%3 = add(%1, %2)`` for a call, ``%x`` for a var.

    Temporaries are numbered as in ``astext(within)`` (default: the expression itself), so the
    line can be found in the full printout of ``within``.
    """
    try:
        text = None
        for root in ([within] if within is not None else []) + [expr]:
            p = TextPrinter(show_meta_data=False, show_types=False)
            p.wanted = expr
            p.top_expr(root)
            text = p.statement_of(expr)
            if text is not None:  # else: expr is not inside within; print it alone
                break
        text = text or type(expr).__name__
    except Exception as err:  # noqa: BLE001 - a message must not fail because printing did
        text = f"<{type(expr).__name__} (unprintable: {err})>"
    text = re.sub(r"\s*\n\s*", " ", text).rstrip(";")
    return text if len(text) <= limit else text[: limit - 3] + "..."
