"""Dynamic ONNX twins: a dynamic twin (``_dynamic_twins``) as an ONNX model with symbolic
input dimensions, for onnxruntime.

    model = dynamic_onnx(twin, params, base_shape, probe_shape)   # onnx.ModelProto

The exporter (``ember.relay.testing.onnx_export``) writes concrete shapes only. So the twin
is exported at two concrete input shapes (``base`` and ``probe``: every symbolic axis differs
between them) and the two graphs are merged, as ``_dynamic_twins`` merges two workloads: the
nodes are the same in the same order, and the only constants that differ are the targets of
``Reshape`` nodes (the exporter writes each reshape with its inferred output shape). Each such
target is computed at run time from ``Shape`` of the reshaped tensor: an output dimension that
is the same at both shapes stays a literal, one that moves is the product of the run of input
dimensions it comes from (``_dynamic_twins._groups``), and where a run splits one input axis
into several, its one moving part is ``-1``. The input dimensions that differ become named
symbolic dimensions; the outputs' differing ones unnamed. Anything else that differs between
the two exports raises ValueError naming it, except a ``Resize``'s ``sizes`` whose moving entries
are its input's own (a batch kept through a resize to a fixed height and width), which are
read from ``Shape`` too.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from _dynamic_twins import _groups, with_input_shape

from ember.ir.module import IRModule
from ember.relay.testing.onnx_export import export_onnx, require_onnx
from ember.relay.transform import InferType


def _export(twin: IRModule, params: dict[str, Any], shape: Sequence[int], opset: int,
            export: Callable[..., Any]) -> Any:
    onnx = require_onnx()
    model = export(InferType()(with_input_shape(twin, shape)), params, opset=opset)
    return onnx.shape_inference.infer_shapes(model)


def _shapes(model: Any) -> dict[str, tuple[int, ...]]:
    """Every value's concrete shape (inputs, inferred intermediates, outputs)."""
    infos = [*model.graph.input, *model.graph.value_info, *model.graph.output]
    return {v.name: tuple(d.dim_value for d in v.type.tensor_type.shape.dim) for v in infos}


class _Graph:
    """The nodes of the merged graph, with constants and small shape computations."""

    def __init__(self, onnx: Any) -> None:
        self.onnx, self.nodes, self.consts, self.count = onnx, [], [], 0

    def fresh(self, hint: str) -> str:
        self.count += 1
        return f"_dyn_{hint}_{self.count}"

    def const(self, values: Sequence[int]) -> str:
        name = self.fresh("c")
        self.consts.append(self.onnx.numpy_helper.from_array(np.array(values, np.int64), name))
        return name

    def node(self, op: str, inputs: list[str], **attrs: Any) -> str:
        out = self.fresh(op.lower())
        self.nodes.append(self.onnx.helper.make_node(op, inputs, [out], **attrs))
        return out

    def target(self, data: str, src: tuple[int, ...], dst: tuple[int, ...],
               src2: tuple[int, ...], dst2: tuple[int, ...]) -> str:
        """A Reshape target turning ``src`` into ``dst`` and ``src2`` into ``dst2``, computed
        from ``Shape(data)``; ValueError where no run of input axes explains a moving one."""
        moving = [a != b for a, b in zip(dst, dst2)]
        if sum(moving) <= 1:
            return self.const([-1 if m else d for d, m in zip(dst, moving)])
        groups = _groups(src, dst, src2, dst2)
        if groups is None:
            raise ValueError(f"dynamic onnx: no run of input axes explains reshape {src} -> "
                             f"{dst} ({src2} -> {dst2} at the probe shape)")
        shape = self.node("Shape", [data])
        parts = []
        for s, d in groups:
            if not any(moving[j] for j in d):
                parts.append(self.const([dst[j] for j in d]))
            elif len(d) == 1:  # one output axis: the product of its run of input axes
                run = self.node("Slice", [shape, self.const([s.start]), self.const([s.stop])])
                parts.append(self.node("ReduceProd", [run], keepdims=1))
            elif sum(moving[j] for j in d) == 1:  # one axis split: -1 is the moving part
                parts.append(self.const([-1 if moving[j] else dst[j] for j in d]))
            else:
                raise ValueError(f"dynamic onnx: reshape {src} -> {dst} splits one axis "
                                 "into several moving ones")
        return self.node("Concat", parts, axis=0)

    def sizes(self, data: str, sizes: list[int], sizes2: list[int], src: tuple[int, ...],
              src2: tuple[int, ...]) -> str:
        """A Resize's output sizes whose moving entries are the input's own (a batch that
        a resize to a fixed height and width keeps), read from ``Shape(data)``."""
        shape = self.node("Shape", [data])
        parts = []
        for a, (n, n2) in enumerate(zip(sizes, sizes2)):
            if n == n2:
                parts.append(self.const([n]))
            elif n == src[a] and n2 == src2[a]:
                parts.append(self.node("Slice", [shape, self.const([a]), self.const([a + 1])]))
            else:
                raise ValueError(f"dynamic onnx: Resize size {a} is {n} at the base shape and "
                                 f"{n2} at the probe: it does not follow the input")
        return self.node("Concat", parts, axis=0)


def dynamic_onnx(twin: IRModule, params: dict[str, Any], base: Sequence[int],
                 probe: Sequence[int], opset: int = 17,
                 export: Callable[..., Any] = export_onnx) -> Any:
    """``twin`` as an ONNX model whose input has a symbolic dimension wherever ``base`` and
    ``probe`` differ (see the module docstring). ``export``: the workload's own exporter, if
    it has one (``crnn.export_onnx``). Raises OpNotImplemented where the exporter cannot
    write the twin, ValueError where the two exports differ in more than reshapes."""
    onnx = require_onnx()
    m1 = _export(twin, params, base, opset, export)
    m2 = _export(twin, params, probe, opset, export)
    g1, g2 = m1.graph, m2.graph
    if len(g1.node) != len(g2.node):
        raise ValueError(f"dynamic onnx: {len(g1.node)} nodes at {tuple(base)} but "
                         f"{len(g2.node)} at {tuple(probe)}")
    init2 = {t.name: t for t in g2.initializer}
    moved = {t.name for t in g1.initializer if t.name not in init2 or
             t.dims != init2[t.name].dims or t.raw_data != init2[t.name].raw_data}
    shapes, shapes2 = _shapes(m1), _shapes(m2)
    out = _Graph(onnx)
    for n1, n2 in zip(g1.node, g2.node):
        if n1.op_type != n2.op_type or list(n1.input) != list(n2.input) or \
                list(n1.attribute) != list(n2.attribute):
            raise ValueError(f"dynamic onnx: node {n1.name or n1.output[0]} ({n1.op_type}) "
                             "differs between the two exports")
        if n1.op_type == "Reshape" and n1.input[1] in moved:
            data, dst = n1.input[0], n1.output[0]
            target = out.target(data, shapes[data], shapes[dst], shapes2[data], shapes2[dst])
            n = onnx.helper.make_node("Reshape", [data, target], list(n1.output))
            out.nodes.append(n)
            continue
        if n1.op_type == "Resize" and len(n1.input) == 4 and n1.input[3] in moved:
            data = n1.input[0]
            sizes = out.sizes(data, _ints(g1, n1.input[3]), _ints(g2, n1.input[3]),
                              shapes[data], shapes2[data])
            out.nodes.append(onnx.helper.make_node(
                "Resize", [*n1.input[:3], sizes], list(n1.output), name=n1.name,
                **{a.name: onnx.helper.get_attribute_value(a) for a in n1.attribute}))
            continue
        stray = [i for i in n1.input if i in moved]
        if stray:
            raise ValueError(f"dynamic onnx: constant {stray[0]} of node {n1.output[0]} "
                             f"({n1.op_type}) depends on the input shape")
        out.nodes.append(n1)
    used = {i for n in out.nodes for i in n.input}
    weights = [t for t in g1.initializer if t.name in used] + out.consts
    graph = onnx.helper.make_graph(out.nodes, g1.name, _symbolic(onnx, g1.input, g2.input, "d"),
                                   _symbolic(onnx, g1.output, g2.output, None), weights)
    model = onnx.helper.make_model(graph, opset_imports=list(m1.opset_import),
                                   producer_name="ember-dynamic-twin", ir_version=m1.ir_version)
    onnx.checker.check_model(model)
    return model


def _ints(graph: Any, name: str) -> list[int]:
    onnx = require_onnx()
    init = next(t for t in graph.initializer if t.name == name)
    return [int(v) for v in onnx.numpy_helper.to_array(init)]


def _symbolic(onnx: Any, infos: Any, infos2: Any, name: str | None) -> list[Any]:
    """Value infos with each dimension that differs between the two exports symbolic (named
    ``<name><axis>``, or unnamed when ``name`` is None)."""
    out = []
    for v, v2 in zip(infos, infos2):
        dims = [d.dim_value for d in v.type.tensor_type.shape.dim]
        dims2 = [d.dim_value for d in v2.type.tensor_type.shape.dim]
        shape = [a if a == b else (f"{name}{k}" if name else None)
                 for k, (a, b) in enumerate(zip(dims, dims2))]
        out.append(onnx.helper.make_tensor_value_info(v.name, v.type.tensor_type.elem_type,
                                                      shape))
    return out
