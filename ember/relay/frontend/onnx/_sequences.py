"""ONNX sequences while importing: a Relay tuple when the length is known, a List when not.

A sequence value in a scope is a Relay expression whose import-time type is a ``SeqType``:

- **known length** (``SequenceConstruct``, ``SplitToSequence`` of a known axis,
  ``SequenceInsert`` at a known position, ...): a Relay tuple of its tensors. Everything done
  to it happens at import time (``SequenceAt`` at a known position *is* that tensor,
  ``ConcatFromSequence`` one ``concatenate``), so such models build for every executor;
- **length known only at run time** (a sequence carried through a ``Loop``, the branches of an
  ``If`` that build sequences of different lengths, a position known only at run time, a
  sequence input of the graph): a value of the Prelude's ``List[Tensor[...]]`` (``Cons`` /
  ``Nil``), worked on by Prelude functions (``nth``, ``length``, ``concat``, ``insert_at``,
  ``remove_at``, ``foldl``, ``rev``) that the VM runs.

A list's element type is the one type all its elements fit: ``?`` in the axes where they may
differ. ``import_module`` gives ``main`` a module holding the Prelude's functions that it calls
(and nothing else) when the import made a list.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ....ir.expr import Call, Function, GlobalVar, RelayExpr, Tuple, TupleGetItem, Var
from ....ir.adt import Clause, Match, PatternConstructor, PatternVar
from ....ir.module import IRModule
from ....ir.types import Any as AnyDim
from ....ir.types import ShapeVar, TensorType, TupleType, Type, TypeCall
from ... import op as _op

if TYPE_CHECKING:
    from ._graph import Importer
    from ._node import Node


@dataclass(frozen=True)
class SeqType:
    """The import-time type of a sequence: its element dtype, the type every element fits
    (None while no element is known: an empty sequence), and, when its length is known, the
    type of each element (it is then a Relay tuple; None: a List)."""

    dtype: str
    elem: TensorType | None
    items: tuple[TensorType, ...] | None = None

    @property
    def is_list(self) -> bool:
        return self.items is None

    def __str__(self) -> str:
        elem = "?" if self.elem is None else str(self.elem)
        size = "run-time length" if self.items is None else f"length {len(self.items)}"
        return f"sequence of {elem} ({self.dtype}, {size})"


@dataclass(frozen=True)
class OptType:
    """The import-time type of an optional. Known at import (``runtime`` False): a Relay
    tuple of its value, ``value`` that value's type (None: empty; ``declared`` is then the
    type it would hold, when the model says). Known only at run time (``runtime``): a value
    of the Prelude's ``Option[...]`` (``Some(x)`` / ``None``), ``value`` the type of what
    ``Some`` holds. ``what`` describes the element type for messages."""

    value: Any
    what: str
    runtime: bool = False
    declared: Any = None

    @property
    def present(self) -> bool:
        """Whether an optional known at import holds a value."""
        return self.value is not None and not self.runtime

    @property
    def content(self) -> Any:
        """The type a value of this optional has (None when not known)."""
        return self.declared if self.value is None else self.value

    def __str__(self) -> str:
        if self.runtime:
            return f"optional of {self.value} (presence known at run time)"
        return f"optional {'holding ' + str(self.value) if self.present else 'empty'}"


def element_fit(node: Node, a: TensorType | None, b: TensorType | None) -> TensorType | None:
    """The type both ``a`` and ``b`` fit (``?`` where sizes differ or are symbolic: the
    elements of a list have sizes of their own); FrontendError naming the node when dtype or
    rank differ."""
    if a is None or b is None:
        return _loose(a if b is None else b)
    if a.dtype != b.dtype or a.ndim != b.ndim:
        raise node.unsupported(f"a sequence cannot hold both {a} and {b} (its elements "
                               "must share dtype and rank)")
    return TensorType(tuple(x if isinstance(x, int) and x == y else AnyDim()
                            for x, y in zip(a.shape, b.shape)), a.dtype)


def _loose(ty: TensorType | None) -> TensorType | None:
    """``ty`` with symbolic sizes made ``?``."""
    if ty is None:
        return None
    return TensorType(tuple(AnyDim() if isinstance(d, ShapeVar) else d for d in ty.shape),
                      ty.dtype)


def fit_all(node: Node, types: Sequence[TensorType], start: TensorType | None = None
            ) -> TensorType | None:
    out = _loose(start)
    for t in types:
        out = element_fit(node, out, t)
    return out


def seq_input(node: Node, i: int, what: str = "input_sequence") -> tuple[RelayExpr, SeqType]:
    """Input ``i``, which must be a sequence, and its SeqType."""
    expr = node.input(i, what)
    ty = node.type_of(expr)
    if not isinstance(ty, SeqType):
        raise node.fail(f"input {i} ({what}) must be a sequence, got a tensor {ty}")
    return expr, ty


def make_tuple(node: Node, items: Sequence[RelayExpr], dtype: str) -> RelayExpr:
    """A sequence of known length holding ``items``."""
    types = tuple(node.type_of(e) for e in items)
    for k, t in enumerate(types):
        if not isinstance(t, TensorType) or t.dtype != dtype:
            raise node.fail(f"sequence element {k} is {t}; the sequence holds {dtype} tensors")
    out = Tuple(tuple(node.finish(e) for e in items))
    node.declare(out, SeqType(dtype, fit_all(node, types), types))
    return out


def items_of(node: Node, seq: RelayExpr, ty: SeqType) -> list[RelayExpr]:
    """The tensors of a sequence of known length."""
    assert ty.items is not None, "items_of needs a sequence of known length"
    if isinstance(seq, Tuple):
        return list(seq.fields)
    out = []
    for k, t in enumerate(ty.items):
        item = TupleGetItem(seq, k)
        node.declare(item, t)
        out.append(item)
    return out


def fresh_sizes(node: Node, expr: RelayExpr, ty: TensorType) -> RelayExpr:
    """``expr`` declared of type ``ty`` with each ``?`` a size of its own, found at run time
    from ``expr``'s shape (so later converters can compute with it)."""
    sizes = node.scope.importer.sizes
    node.declare(expr, TensorType(sizes.elems_of(expr, ty), ty.dtype))
    return expr


# ---------------------------------------------------------------- lists
def list_ir_type(imp: Importer, dtype: str, elem: TensorType | None) -> TypeCall:
    """``List[elem]`` as the IR states it (an empty sequence's: a list of 0-d tensors)."""
    ty = _loose(elem) or TensorType((), dtype)
    return TypeCall(imp.prelude.l, [ty])


def ir_type(imp: Importer, ty: Any) -> Type:
    """A value's import-time type as the IR states it: symbolic sizes ``?``, sequences as
    tuples or Lists, optionals as tuples or ``Option``s."""
    if isinstance(ty, OptType):
        if ty.runtime:
            return TypeCall(imp.prelude.optional, [ir_type(imp, ty.value)])
        return TupleType(() if ty.value is None else (ir_type(imp, ty.value),))
    if isinstance(ty, SeqType):
        if ty.items is None:
            return list_ir_type(imp, ty.dtype, ty.elem)
        return TupleType(tuple(_loose(t) for t in ty.items))  # type: ignore[misc]
    if isinstance(ty, TupleType):
        return TupleType(tuple(ir_type(imp, f) for f in ty.fields))
    return _loose(ty)  # type: ignore[return-value]


def list_var(imp: Importer, name: str, ty: SeqType) -> Var:
    """A variable holding a List of ``ty``'s elements."""
    var = Var(name, list_ir_type(imp, ty.dtype, ty.elem))
    imp.typer.declare(var, SeqType(ty.dtype, ty.elem))
    return var


def to_list(node: Node, seq: RelayExpr, elem: TensorType | None = None) -> RelayExpr:
    """``seq`` as a List (a tuple becomes Cons(...) ending in Nil); ``elem``: the element type
    the list is used as (default: the sequence's own)."""
    ty = node.type_of(seq)
    assert isinstance(ty, SeqType), f"to_list of a {ty}"
    elem = element_fit(node, ty.elem, elem) if elem is not None else _loose(ty.elem)
    if ty.items is None:
        if elem == _loose(ty.elem):
            return seq
        out = ascribe(seq, list_ir_type(node.scope.importer, ty.dtype, elem))
        node.declare(out, SeqType(ty.dtype, elem))
        return out
    imp = node.scope.importer
    chain: RelayExpr = imp.prelude.nil()
    elem_ir = ir_type(imp, elem) if elem is not None else None
    for item in reversed(items_of(node, seq, ty)):
        if elem_ir is not None and ir_type(imp, node.type_of(item)) != elem_ir:
            item = ascribe(item, elem_ir)  # (a static size must not win over the list's ?)
        chain = imp.prelude.cons(item, chain)
    out = ascribe(chain, list_ir_type(imp, ty.dtype, elem))
    node.declare(out, SeqType(ty.dtype, elem))
    return out


def ascribe(expr: RelayExpr, ty: Type) -> RelayExpr:
    """``expr`` as a value of type ``ty``, whose ``?`` sizes it forgets: an annotated identity
    function applied to it. Lists need it: the constructors type a list by the elements it
    holds, and type inference lets a static size win over ``?`` where a value meets a
    Prelude function's type parameter, so a list that will hold elements of other sizes
    (and the elements put in it) must say so. (A let's annotation would not last: the VM's
    passes dissolve lets.)"""
    var = Var("v", ty)
    return Call(Function((var,), var, ty), (expr,))


def call_prelude(node: Node, name: str, args: Sequence[RelayExpr], ty: Any) -> RelayExpr:
    """``@name(args...)`` (a Prelude function) declared of import-time type ``ty``."""
    call = Call(node.scope.importer.prelude.get_global_var(name), tuple(args))
    node.declare(call, ty)
    return call


def concat_list(node: Node, xs: RelayExpr, elem: TensorType, axis: int, new_axis: bool,
                empty: RelayExpr | None = None) -> RelayExpr:
    """The elements of List ``xs`` concatenated along ``axis`` (stacked along a new one with
    ``new_axis``): ``match (xs) { Cons(%h, %t) => @foldl(fn (%acc, %x) { concatenate((%acc,
    %x), axis) }, %h, %t), Nil => empty }`` (without ``empty``, an empty list stops the VM
    with a failed match)."""
    imp = node.scope.importer
    p = imp.prelude
    dims = list(_loose(elem).shape)  # type: ignore[union-attr]
    if new_axis:
        dims.insert(axis, 1)
    dims[axis] = AnyDim()
    acc_t = TensorType(tuple(dims), elem.dtype)
    elem_t = ir_type(imp, elem)
    acc, x = Var("acc", acc_t), Var("x", elem_t)
    head, rest = Var("head", elem_t), Var("rest", list_ir_type(imp, elem.dtype, elem))

    def prep(e: RelayExpr) -> RelayExpr:
        return _op.expand_dims(e, axis) if new_axis else e

    step = Function((acc, x), _op.concatenate([acc, prep(x)], axis), acc_t)
    fold = Call(p.get_global_var("foldl"), (step, ascribe(prep(head), acc_t), rest))
    clauses = [Clause(PatternConstructor(p.cons, [PatternVar(head), PatternVar(rest)]), fold)]
    if empty is not None:
        clauses.append(Clause(PatternConstructor(p.nil, []), ascribe(empty, acc_t)))
    out = Match(xs, clauses, empty is not None)
    return fresh_sizes(node, out, acc_t)


def import_module(main: Function, prelude: Any) -> IRModule:
    """The module of an import: ``main``, with the Prelude's types and those of its functions
    that ``main`` calls when the import used lists (``prelude`` not None)."""
    if prelude is None:
        return IRModule.from_expr(main)
    mod = prelude.mod
    mod["main"] = main
    keep = _reachable(mod)
    for gv in list(mod.functions):
        if gv not in keep:
            mod.remove(gv)
    return mod


def _reachable(mod: IRModule) -> set[GlobalVar]:
    from ....ir.visitor import post_order

    main = mod.get_global_var("main")
    seen, todo = {main}, [main]
    while todo:
        gv = todo.pop()
        for e in post_order(mod[gv]):
            if isinstance(e, GlobalVar) and e not in seen:
                seen.add(e)
                todo.append(e)
    return seen
