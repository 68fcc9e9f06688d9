"""A small Relay-to-ONNX exporter, enough to give every model of the zoo an ONNX twin.

``export_onnx(mod, params, opset=17)`` walks ``mod["main"]`` (after InferType) children
first, in one flat loop, and emits one or a few ``onnx.helper`` nodes per Relay call through
the table of ``_onnx_ops``: convolutions (grouped, depthwise, transposed; any data/kernel
layout, by transposing to NCHW/OIHW), dense/matmul/batch_matmul, bias_add, batch_norm
(BatchNormalization), layer_norm (LayerNormalization from opset 17, decomposed below),
activations, elementwise arithmetic, softmax, pooling, reshapes, transpose, concatenate,
split, strided_slice (Slice), where, mean/sum/max/min (Reduce*), nearest ``nn.upsampling``
(Resize), ``image.resize2d`` (Resize with sizes, or scales where the op has them), take
(Gather), dropout. As exporters write a model with batch norms folded, a ``bias_add`` on the
result of a convolution read nowhere else is that Conv's (or ConvTranspose's) bias input.
``main``'s parameters named in ``params`` become initializers, the others graph inputs with
the same names, shapes and dtypes; a tuple result gives several outputs. The model is what
ember computes: feed both the same arrays and compare.

Not exported (``OpNotImplemented`` naming the op or construct): operators outside the table,
control flow, let bindings, local functions, ADTs, references, calls to other globals. ONNX's
Gather rejects an out-of-range index where Relay's ``take`` (mode "clip") clamps it.

``onnx`` is imported on first use; without it, ImportError says ``pip install 'ember[onnx]'``.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ...ir.expr import Call, Constant, Function, GlobalVar, RelayExpr, Tuple, TupleGetItem, Var
from ...ir.module import IRModule
from ...ir.op import Op
from ...ir.types import TensorType, TupleType
from ...ir.visitor import post_order
from ...runtime.errors import OpNotImplemented

__all__ = ["DEFAULT_OPSET", "MIN_OPSET", "export_onnx", "require_onnx"]

# Nodes the walk enters; any other (let, if, match, a function...) is refused as a whole.
_DATAFLOW = (Call, Constant, Op, Tuple, TupleGetItem, Var)

DEFAULT_OPSET = 17
MIN_OPSET = 13  # Softmax over one axis, Squeeze/Unsqueeze/ReduceSum axes as inputs
_HINT = "pip install 'ember[onnx]'"


def require_onnx() -> Any:
    """The ``onnx`` package, or ImportError telling how to install it."""
    try:
        import onnx
    except ImportError as err:
        raise ImportError(f"ONNX export needs the onnx package: {_HINT}") from err
    return onnx


def workload_weights(mod: IRModule, params: Mapping[str, Any], model: str,
                     marker: str) -> tuple[dict[str, np.ndarray], list[str], tuple[int, ...]]:
    """For a workload module's own ``export_onnx``: ``params`` as numpy arrays, the names of
    ``main``'s weights, and its ``data`` input's shape. ValueError naming what is wrong when
    ``mod`` is not ``model``'s ``get_workload`` module (no ``data`` input, no ``marker``
    weight) or ``params`` lacks some of its weights."""
    arrays = {k: v.numpy() if hasattr(v, "numpy") else np.asarray(v) for k, v in params.items()}
    weights = [p.name_hint for p in mod["main"].params[1:]]
    missing = [w for w in weights if w not in arrays]
    if mod["main"].params[0].name_hint != "data" or marker not in weights or missing:
        takes = [p.name_hint for p in mod["main"].params][:4]
        raise ValueError(f"{model}.export_onnx: expected a {model}.get_workload module and all "
                         f"its weights in params; main takes {takes}..., params lack "
                         f"{missing[:4]}")
    return arrays, weights, tuple(int(d) for d in mod["main"].params[0].checked_type.shape)


class Exporter:
    """The graph being built: nodes, initializers, and the ONNX name of each Relay value.

    A value is a name (str), a list of values (a tuple), or None for a tuple field that has no
    ONNX counterpart (batch_norm's running statistics); reading None raises.
    """

    def __init__(self, onnx: Any, opset: int) -> None:
        self.onnx, self.helper, self.opset = onnx, onnx.helper, opset
        self.nodes: list[Any] = []
        self.initializers: list[Any] = []
        self.values: dict[RelayExpr, Any] = {}
        self.uses: dict[RelayExpr, int] = {}  # how many calls read each node of main
        self._used: set[str] = set()

    def fresh(self, hint: str) -> str:
        """A new unique ONNX name based on ``hint``."""
        name, i = hint, 1
        while name in self._used:
            i += 1
            name = f"{hint}_{i}"
        self._used.add(name)
        return name

    def const(self, value: Any, hint: str = "const", dtype: str | None = None) -> str:
        """An initializer holding ``value`` (numpy-convertible); returns its name."""
        arr = np.asarray(value, dtype=dtype)
        name = self.fresh(hint)
        self.initializers.append(self.onnx.numpy_helper.from_array(arr, name))
        return name

    def node(self, op_type: str, inputs: list[str], num_outputs: int = 1,
             **attrs: Any) -> Any:
        """Append a node; returns its output name (a list of names when num_outputs > 1)."""
        outs = [self.fresh(op_type.lower()) for _ in range(num_outputs)]
        self.nodes.append(self.helper.make_node(op_type, inputs, outs,
                                                name=self.fresh(f"node_{op_type}"), **attrs))
        return outs[0] if num_outputs == 1 else outs

    def producer(self, name: str) -> Any:
        """The node whose output is ``name`` (None for an input or initializer)."""
        return next((n for n in reversed(self.nodes) if name in n.output), None)

    def value_info(self, name: str, ty: Any, what: str) -> Any:
        if not isinstance(ty, TensorType):
            raise OpNotImplemented(f"onnx export: {what} has type {ty}; only tensors are "
                                   "exported")
        shape = [d if isinstance(d, int) else None for d in ty.shape]
        return self.helper.make_tensor_value_info(name, onnx_dtype(self.onnx, ty.dtype), shape)


def onnx_dtype(onnx: Any, dtype: str) -> int:
    """The ONNX TensorProto element type of an ember dtype string."""
    return int(onnx.helper.np_dtype_to_tensor_dtype(np.dtype(dtype)))


def _check_opset(onnx: Any, opset: int) -> None:
    newest = onnx.defs.onnx_opset_version()
    if not isinstance(opset, int) or not MIN_OPSET <= opset <= newest:
        raise ValueError(f"export_onnx: opset must be an int from {MIN_OPSET} to {newest} "
                         f"(this onnx package's newest), got {opset!r}")


def _typed_main(mod: IRModule) -> Function:
    from ..transform import InferType

    if not isinstance(mod, IRModule) or "main" not in [g.name_hint for g in mod.get_global_vars()]:
        raise TypeError(f"export_onnx: expected an IRModule with a main function, got "
                        f"{type(mod).__name__}")
    return InferType()(mod)["main"]


def _visit(ex: Exporter, node: RelayExpr, inputs: dict[Var, str], index: int,
           translate: Any) -> None:
    """Give ``node`` (whose children already have values) its ONNX value; op calls go
    through ``translate`` (``_onnx_ops.translate``)."""
    if isinstance(node, Op):
        return
    if isinstance(node, Var):
        if node not in inputs:
            raise OpNotImplemented(f"onnx export: variable %{node.name_hint} is bound inside "
                                   "main (let or a local function); only main's parameters "
                                   "are exported")
        ex.values[node] = inputs[node]
    elif isinstance(node, Constant):
        ex.values[node] = ex.const(node.data.numpy(), "const")
    elif isinstance(node, Tuple):
        ex.values[node] = [ex.values[f] for f in node.fields]
    elif isinstance(node, TupleGetItem):
        ex.values[node] = _tuple_field(ex.values[node.tuple_value], node.index)
    elif isinstance(node, Call) and isinstance(node.op, Op):
        args = [ex.values[a] for a in node.args]
        ex.values[node] = translate(ex, node, args, index)
    else:
        what = ("a call of " + str(node.op) if isinstance(node, Call) and
                isinstance(node.op, GlobalVar) else type(node).__name__)
        raise OpNotImplemented(f"onnx export: {what} in main is not supported; the exporter "
                               "handles dataflow graphs of operator calls only")


def _tuple_field(value: Any, index: int) -> Any:
    if not isinstance(value, list) or value[index] is None:
        raise OpNotImplemented(f"onnx export: tuple field {index} has no ONNX counterpart "
                               "(e.g. batch_norm's running statistics)")
    return value[index]


def _flat_outputs(value: Any, ty: Any) -> list[tuple[str, Any]]:
    if isinstance(ty, TupleType):
        if not isinstance(value, list):
            raise OpNotImplemented("onnx export: a tuple-typed result must be a tuple literal")
        return [pair for v, t in zip(value, ty.fields) for pair in _flat_outputs(v, t)]
    return [(_tuple_field([value], 0), ty)]


def export_onnx(mod: IRModule, params: Mapping[str, Any] | None = None,
                opset: int = DEFAULT_OPSET, graph_name: str = "main") -> Any:
    """``mod["main"]`` as an ``onnx.ModelProto`` at ``opset`` (13 .. onnx's newest).

    ``params`` (name -> NDArray or numpy array) become initializers; main's other parameters
    are the graph's inputs, in order. Raises OpNotImplemented naming an operator or construct
    without a translation, ValueError for a bad opset, ImportError without onnx.
    """
    onnx = require_onnx()
    _check_opset(onnx, opset)
    main = _typed_main(mod)
    params = dict(params or {})
    ex = Exporter(onnx, opset)
    inputs, graph_inputs = {}, []
    for p in main.params:
        name = ex.fresh(p.name_hint)
        inputs[p] = name
        if p.name_hint in params:
            value = params[p.name_hint]
            arr = value.numpy() if hasattr(value, "numpy") else np.asarray(value)
            ex.initializers.append(onnx.numpy_helper.from_array(arr, name))
        else:
            graph_inputs.append(ex.value_info(name, p.checked_type, f"input %{p.name_hint}"))
    from ._onnx_ops import translate  # (it imports Exporter from here)

    calls = 0
    nodes = list(post_order(main.body, skip=lambda n: not isinstance(n, _DATAFLOW)))
    for node in nodes:
        for kid in (node.args if isinstance(node, Call) else ()):
            ex.uses[kid] = ex.uses.get(kid, 0) + 1
    ex.uses[main.body] = ex.uses.get(main.body, 0) + 1
    for node in nodes:
        calls += isinstance(node, Call)
        _visit(ex, node, inputs, calls, translate)
    outputs = []
    for i, (name, ty) in enumerate(_flat_outputs(ex.values[main.body], main.body.checked_type)):
        if name in [o.name for o in outputs] or name in inputs.values():
            name = ex.node("Identity", [name])  # an output must be its own value
        outputs.append(ex.value_info(name, ty, f"output {i}"))
    used = {name for n in ex.nodes for name in n.input} | {o.name for o in outputs}
    weights = [w for w in ex.initializers if w.name in used]  # e.g. batch_norm's unused gamma
    graph = onnx.helper.make_graph(ex.nodes, graph_name, graph_inputs, outputs, weights)
    opsets = [onnx.helper.make_opsetid("", opset)]
    model = onnx.helper.make_model(graph, opset_imports=opsets, producer_name="ember",
                                   ir_version=onnx.helper.find_min_ir_version_for(opsets))
    return model
