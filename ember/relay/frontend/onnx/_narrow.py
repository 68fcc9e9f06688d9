"""float16 and bfloat16 models: computed in float32, with the model's interface kept.

ember's kernels compute in float32 (a float16 kernel would round every partial sum to float16,
and run the generic loops instead of the blocked ones), so an import widens every narrow value
(``_proto.dtype_of``): float16 and bfloat16 initializers and constants become float32 (exactly),
a ``Cast`` to float16 rounds to float16 and widens again (``ops_math.cast``). At the graph's
boundary the model keeps its declared types: a float16 input stays a float16 parameter of
``main``, cast up as it enters; an output the model computes in float16 is cast back down, so
callers pass and get float16 arrays. numpy has no bfloat16, so bfloat16 inputs and outputs are
float32 (the values a bfloat16 model computes are float32 values with the low 16 bits zero,
rounding after each operation left out).
"""
from __future__ import annotations

from typing import Any

from ....ir.expr import Call, Function, RelayExpr, Tuple, TupleGetItem, Var
from ....ir.types import TensorType
from ... import op as _op
from ._graph import _graphs_of
from ._proto import NARROW, interface_dtype, require_onnx
from ._sequences import SeqType, ir_type


def entering(imp: Any, var: Var) -> RelayExpr:
    """What the graph sees of input ``var``: itself, or for a float16 one its float32 value."""
    ty = imp.typer.type_of(var)
    if not isinstance(ty, TensorType) or ty.dtype != "float16":
        return var
    return imp.typer.finish(_op.cast(var, "float32"))


def output_elem_types(proto: Any) -> list[int]:
    """The element type of each graph output: declared, or found by ONNX's shape inference
    when one is not declared in a model that uses narrow floats (0: unknown)."""
    declared = [_elem_type(o) for o in proto.graph.output]
    if all(declared) or not _uses_narrow(proto.graph):
        return declared
    onnx = require_onnx()
    try:
        inferred = onnx.shape_inference.infer_shapes(proto).graph.output
    except Exception:  # noqa: BLE001  (a model ONNX cannot infer keeps its computed types)
        return declared
    return [d or _elem_type(o) for d, o in zip(declared, inferred)]


def _elem_type(vi: Any) -> int:
    ty = vi.type
    if ty.HasField("sequence_type"):
        ty = ty.sequence_type.elem_type
    return int(ty.tensor_type.elem_type) if ty.HasField("tensor_type") else 0


def _uses_narrow(graph: Any) -> bool:
    if any(t.data_type in NARROW for t in graph.initializer):
        return True
    if any(_elem_type(vi) in NARROW for vi in graph.input):
        return True
    stack = list(graph.node)  # the subgraphs' nodes too (a Cast inside an If branch)
    while stack:
        n = stack.pop()
        for a in n.attribute:
            if (a.name == "to" and a.i in NARROW) or (a.HasField("t") and
                                                      a.t.data_type in NARROW):
                return True
        stack.extend(node for g in _graphs_of(n) for node in g.node)
    return False


def leaving(imp: Any, expr: RelayExpr, elem_type: int, where: str) -> RelayExpr:
    """Output ``expr`` as callers get it: cast to float16 when the model declares (or
    computes) it so; sequences element by element."""
    if elem_type not in NARROW or interface_dtype(elem_type, where) != "float16":
        return expr
    ty = imp.typer.type_of(expr)
    if isinstance(ty, TensorType):
        return _op.cast(expr, "float16") if ty.dtype == "float32" else expr
    if not isinstance(ty, SeqType) or ty.dtype != "float32":
        return expr
    if ty.items is not None:
        fields = expr.fields if isinstance(expr, Tuple) else [
            TupleGetItem(expr, k) for k in range(len(ty.items))]
        return Tuple(tuple(_op.cast(f, "float16") for f in fields))
    x = Var("x", ir_type(imp, ty.elem or TensorType((), "float32")))
    down = Function((x,), _op.cast(x, "float16"))
    return Call(imp.prelude.get_global_var("map"), (down, expr))

