"""ONNX optionals (Optional, OptionalHasElement, OptionalGetElement) and SequenceMap.

An optional is resolved while importing: ``Optional(x)`` holds ``x``, ``Optional()`` (with
its ``type`` attribute) holds nothing, and which one a value is stays known through the
graph, so ``OptionalHasElement`` is a constant and ``OptionalGetElement`` the value itself (an
import error naming the node when the optional is empty). In a scope an optional is a Relay
tuple of its value (or the empty tuple) declared with an ``OptType``. An optional whose
presence is known only at run time (a graph input, ``If`` branches of which one gives a value
and the other none, a ``Loop`` that carries one) is the Prelude's ``Option`` (``_options``),
which the VM runs.

``SequenceMap`` runs its body once per position of sequences of known length (tuples), with
the other inputs (tensors, or sequences of the same length, position by position), and
gathers each output into a sequence: what the ONNX function body's Loop computes, unrolled.
When any input sequence has a run-time length (a List), every sequence input is a List and
they are mapped together with the Prelude's ``@map`` over their ``@zip`` (the VM runs it).
"""
from __future__ import annotations

from typing import Any

from ....ir.expr import Call, Function, RelayExpr, Tuple, TupleGetItem, Var
from ....ir.types import TensorType, TupleType
from ._node import Node
from ._boundary import import_type
from ._options import has_value, some_value, value_of
from ._sequences import (
    OptType,
    SeqType,
    call_prelude,
    element_fit,
    fresh_sizes,
    ir_type,
    items_of,
    make_tuple,
    to_list,
)


def make_optional(node: Node, value: RelayExpr | None, what: str,
                  declared: Any = None) -> RelayExpr:
    """An optional holding ``value`` (None: empty, of values of type ``declared``)."""
    out = Tuple(() if value is None else (node.finish(value),))
    node.declare(out, OptType(None if value is None else node.type_of(value), what,
                              declared=declared))
    return out


def optional(node: Node) -> RelayExpr:
    if node.has_input(0):
        return make_optional(node, node.input(0, "input"), str(node.type_of(node.input(0))))
    if not node.has_attr("type"):
        raise node.fail("an Optional without input needs the 'type' attribute (the element "
                        "type of the empty optional)")
    proto = next(a.tp for a in node.proto.attribute if a.name == "type")
    declared = import_type(proto, f"{node.label}: attribute type", optional_ok=False)
    return make_optional(node, None, " ".join(str(proto).split()), declared)


def optional_has_element(node: Node) -> RelayExpr:
    if not node.has_input(0):
        return node.const(False, "bool")
    x = node.input(0)
    ty = node.type_of(x)
    if isinstance(ty, OptType) and ty.runtime:
        return has_value(node, x)
    return node.const(ty.present if isinstance(ty, OptType) else True, "bool")


def optional_get_element(node: Node) -> RelayExpr:
    x = node.input(0, "input")
    ty = node.type_of(x)
    if not isinstance(ty, OptType):  # a tensor or sequence (version 18+): itself
        return x
    if ty.runtime:
        return some_value(node, x, ty)
    if not ty.present:
        raise node.fail(f"the optional is empty (of {ty.what}); OptionalGetElement needs a "
                        "value")
    return value_of(node, x)


# ---------------------------------------------------------------- SequenceMap
def sequence_map(node: Node) -> list[RelayExpr]:
    body = node.attr("body")
    args = [node.input(i, "input_sequence" if i == 0 else f"additional_inputs[{i - 1}]")
            for i in range(node.num_inputs)]
    if len(body.input) != len(args):
        raise node.fail(f"the body has {len(body.input)} inputs; the node gives {len(args)}")
    if not isinstance(node.type_of(args[0]), SeqType):
        raise node.fail(f"input 0 (input_sequence) must be a sequence, got "
                        f"{node.type_of(args[0])}")
    if any(isinstance(t, SeqType) and t.is_list for t in map(node.type_of, args)):
        return _map_list(node, body, args)
    length = None
    per_arg = []
    for i, arg in enumerate(args):
        ty = node.type_of(arg)
        if isinstance(ty, SeqType):
            if length is not None and len(ty.items) != length:
                raise node.fail(f"input {i} has {len(ty.items)} elements, input 0 {length}")
            length = len(ty.items)
            per_arg.append(items_of(node, arg, ty))
        else:
            per_arg.append(None)
    assert length is not None, "input 0 is a sequence"
    outs: list[list[RelayExpr]] = [[] for _ in body.output]
    for k in range(length):
        bindings = {b.name: (arg if items is None else items[k])
                    for b, arg, items in zip(body.input, args, per_arg)}
        for j, value in enumerate(node.scope.convert_subgraph(body, bindings)):
            outs[j].append(value)
    return [_sequence_of(node, values, j) for j, values in enumerate(outs)]


def _map_list(node: Node, body: Any, args: list[RelayExpr]) -> list[RelayExpr]:
    """Sequences of which one has a run-time length, all as Lists:
    ``@map(fn (%elems) { output j of the body }, @zip(%s0, @zip(%s1, ...)))`` per output
    (the body is converted once per output; the VM runs the maps). Lists of different
    lengths map over the shorter (ONNX requires one length)."""
    imp = node.scope.importer
    seqs = [i for i, a in enumerate(args) if isinstance(node.type_of(a), SeqType)]
    lists = [to_list(node, args[i]) for i in seqs]
    elems = [_elem(node.type_of(xs)) for xs in lists]
    zipped = lists[-1]
    for xs in reversed(lists[:-1]):  # zip(s0, zip(s1, s2)): elements (e0, (e1, e2))
        zipped = Call(imp.prelude.get_global_var("zip"), (xs, zipped))
    outs = []
    for j in range(len(body.output)):
        param, items = _zipped_param(node, elems)
        bindings = {b.name: a for b, a in zip(body.input, args)}
        bindings.update({body.input[i].name: item for i, item in zip(seqs, items)})
        value = node.finish(node.scope.convert_subgraph(body, bindings)[j])
        out_ty = node.type_of(value)
        if not isinstance(out_ty, TensorType):
            raise node.unsupported(f"output {j} of the body is {out_ty}; a List maps to tensors")
        seq_ty = SeqType(out_ty.dtype, element_fit(node, None, out_ty))
        func = Function((param,), value)
        outs.append(call_prelude(node, "map", [func, zipped], seq_ty))
    return outs


def _elem(ty: SeqType) -> TensorType:
    return ty.elem or TensorType((), ty.dtype)


def _zipped_param(node: Node, elems: list[TensorType]) -> tuple[Var, list[RelayExpr]]:
    """The map function's parameter (one element, or the nested pairs of zipped elements)
    and each sequence's element read from it (each ``?`` size found at run time)."""
    imp = node.scope.importer
    if len(elems) == 1:
        var = imp.tensor_var("elem", elems[0].dtype, elems[0].shape)
        return var, [var]
    levels: list[Any] = [ir_type(imp, elems[-1])]  # the type of each nesting, innermost first
    for e in reversed(elems[:-1]):
        levels.append(TupleType((ir_type(imp, e), levels[-1])))
    levels.reverse()
    var = Var("elems", levels[0])
    node.declare(var, levels[0])
    items, rest = [], var
    for k, e in enumerate(elems):
        if k == len(elems) - 1:
            items.append(fresh_sizes(node, rest, e))
            break
        items.append(fresh_sizes(node, TupleGetItem(rest, 0), e))
        rest = TupleGetItem(rest, 1)
        node.declare(rest, levels[k + 1])
    return var, items


def _sequence_of(node: Node, values: list[RelayExpr], j: int) -> RelayExpr:
    if not values:  # an empty input sequence maps to empty outputs of the body's types
        raise node.unsupported(f"output {j}: mapping an empty sequence (the outputs' element "
                               "types are not known)")
    return make_tuple(node, values, node.type_of(values[0]).dtype)
