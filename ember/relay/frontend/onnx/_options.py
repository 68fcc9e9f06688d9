"""ONNX optionals whose presence is known only at run time: the Prelude's ``Option``.

Most optionals are resolved while importing (``ops_optional``: a Relay tuple of the value, or
the empty tuple). Where presence depends on run-time values the optional is a value of the
Prelude's ``Option[A] { Some(A), None }``, declared with an ``OptType`` whose ``runtime`` is
set and whose ``value`` is the type ``Some`` holds:

- a graph input of ``optional_type`` (the caller passes None or a value);
- ``If`` branches of which one gives a value and the other none;
- a ``Loop`` that carries an optional (the body may give a plain value for it).

``OptionalHasElement`` is then ``match (%o) { Some(_) => True, None => False }`` and
``OptionalGetElement`` ``match (%o) { Some(%x) => %x }`` (the VM stops with a failed match
when the optional is empty, as onnxruntime stops with an error). An optional's sequence is
always a List here (its length is as unknown as its presence).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ....ir.adt import Clause, Match, PatternConstructor, PatternVar, PatternWildcard
from ....ir.expr import Constant, RelayExpr, Tuple, TupleGetItem, Var
from ....ir.types import TensorType, TypeCall
from ._node import Node
from ._sequences import (
    OptType,
    SeqType,
    ascribe,
    element_fit,
    fresh_sizes,
    ir_type,
    to_list,
)


def content_fit(node: Node, a: Any, b: Any) -> Any:
    """The type both contents ``a`` and ``b`` fit (tensors: ``?`` where sizes differ;
    sequences: Lists of elements both fit; None: not known); FrontendError naming the node
    when one is a tensor and the other a sequence, or their dtypes differ."""
    if a is None or b is None:
        one = a if b is None else b
        if one is None or isinstance(one, TensorType):
            return element_fit(node, None, one)
        return SeqType(one.dtype, element_fit(node, one.elem, None))
    if isinstance(a, SeqType) and isinstance(b, SeqType):
        if a.dtype != b.dtype:
            raise node.fail(f"an optional cannot hold both a sequence of {a.dtype} and one "
                            f"of {b.dtype}")
        return SeqType(a.dtype, element_fit(node, a.elem, b.elem))
    if isinstance(a, TensorType) and isinstance(b, TensorType):
        return element_fit(node, a, b)
    raise node.fail(f"an optional cannot hold both {a} and {b}")


def option_type(node: Node, content: Any) -> TypeCall:
    """``Option[content]`` as the IR states it."""
    imp = node.scope.importer
    return TypeCall(imp.prelude.optional, [ir_type(imp, content)])


def _as_content(node: Node, value: RelayExpr, content: Any) -> RelayExpr:
    """``value`` (a tensor or sequence) as a value of type ``content``."""
    if isinstance(content, SeqType):
        return to_list(node, value, content.elem)
    if node.type_of(value) == content:
        return value
    return ascribe(value, ir_type(node.scope.importer, content))


def value_of(node: Node, opt: RelayExpr) -> RelayExpr:
    """The value of a present optional known at import (field 0 of its tuple)."""
    if isinstance(opt, Tuple):
        return opt.fields[0]
    out = TupleGetItem(opt, 0)
    node.declare(out, node.type_of(opt).value)
    return out


def to_option(node: Node, expr: RelayExpr, content: Any) -> RelayExpr:
    """``expr`` (an optional of either kind, or a plain tensor or sequence: a present
    optional) as an ``Option`` holding values of type ``content``."""
    ty = node.type_of(expr)
    what = ty.what if isinstance(ty, OptType) else str(ty)
    p = node.scope.importer.prelude
    if isinstance(ty, OptType) and ty.runtime:
        if ty.value == content:
            return expr
        out = ascribe(expr, option_type(node, content))
    elif isinstance(ty, OptType) and not ty.present:
        out = ascribe(p.none(), option_type(node, content))
    else:
        value = value_of(node, expr) if isinstance(ty, OptType) else expr
        out = ascribe(p.some(_as_content(node, value, content)), option_type(node, content))
    node.declare(out, OptType(content, what, runtime=True))
    return out


def has_value(node: Node, opt: RelayExpr) -> RelayExpr:
    """``match (%opt) { Some(_) => True, None => False }``."""
    p = node.scope.importer.prelude
    clauses = [Clause(PatternConstructor(p.some, [PatternWildcard()]),
                      Constant(np.array(True))),
               Clause(PatternConstructor(p.none, []), Constant(np.array(False)))]
    out = Match(opt, clauses, True)
    node.declare(out, TensorType((), "bool"))
    return out


def some_value(node: Node, opt: RelayExpr, ty: OptType) -> RelayExpr:
    """``match (%opt) { Some(%x) => %x }``: the value (a failed match on the VM when none)."""
    p = node.scope.importer.prelude
    x = Var("x", ir_type(node.scope.importer, ty.value))
    out = Match(opt, [Clause(PatternConstructor(p.some, [PatternVar(x)]), x)], False)
    if isinstance(ty.value, TensorType):
        return fresh_sizes(node, out, ty.value)
    node.declare(out, ty.value)
    return out
