"""Checking ONNX operators against onnxruntime, many small graphs per build.

A test lists ``OnnxCase``s (a few nodes, their inputs, the outputs to compare). ``check``
merges the cases of one opset into ONE model (every name prefixed by its case's name), runs
it in onnxruntime, imports it with ``from_onnx``, builds it once for the graph executor
(static shapes) and compares every output with the dtype's tolerance: float32 rtol 1e-5 /
atol 1e-5 unless a case states more (``SUMS`` for accumulations whose order differs), integers
and bools exactly. When the merged model fails to import or build, each case is retried
alone so the failure names its case.

Hypothesis sweeps in the default run are derandomized (the same few examples every run, so
an onnxruntime quirk cannot make CI flaky); their ``slow`` twins draw many random examples.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the ONNX frontend tests need the onnx package")
ort = pytest.importorskip("onnxruntime", reason="onnxruntime is the reference for ONNX tests")
from onnx import helper, numpy_helper

import ember
from ember import relay
from ember.contrib import cc

F32 = (1e-5, 1e-5)
SUMS = (1e-4, 1e-4)  # conv, matmul, pools, reductions: summation order differs
LOOSE = (1e-3, 1e-3)  # long chains of transcendental ops (cubic resize, gelu-tanh, LRN)
TOL = {"float32": F32, "float64": (1e-9, 1e-9), "float16": (1e-2, 1e-2)}


@dataclass
class OnnxCase:
    """A small graph: ``nodes`` read ``inputs`` (fed) and ``inits`` (initializers) by name."""

    name: str
    nodes: list[Any]
    inputs: dict[str, np.ndarray]
    outputs: list[str]
    inits: dict[str, np.ndarray] = field(default_factory=dict)
    tol: tuple[float, float] | None = None

    @property
    def op_types(self) -> list[str]:
        return [n.op_type for n in self.nodes]


def node_case(name: str, op: str, inputs: dict[str, np.ndarray], n_out: int = 1,
              inits: dict[str, np.ndarray] | None = None, tol: tuple[float, float] | None = None,
              order: Sequence[str] | None = None, **attrs: Any) -> OnnxCase:
    """One node of ``op`` over ``order`` (default: inputs then inits, in the given order; ""
    for an absent optional input)."""
    inits = inits or {}
    names = list(order) if order is not None else [*inputs, *inits]
    outs = [f"out{k}" for k in range(n_out)]
    node = helper.make_node(op, names, outs, **attrs)
    return OnnxCase(name, [node], inputs, outs, inits, tol)


def _rename(name: str, prefix: str) -> str:
    return f"{prefix}{name}" if name else ""


def _prefixed_node(n: Any, prefix: str) -> Any:
    copy = onnx.NodeProto()
    copy.CopyFrom(n)
    del copy.input[:]
    del copy.output[:]
    copy.input.extend(_rename(i, prefix) for i in n.input)
    copy.output.extend(_rename(o, prefix) for o in n.output)
    copy.name = prefix + (n.name or n.op_type)
    return copy


def make_model(cases: Sequence[OnnxCase], opset: int, symbolic: dict[str, list[Any]] | None = None
               ) -> Any:
    """One model holding every case (names prefixed ``<case>__``)."""
    nodes, inputs, outputs, inits = [], [], [], []
    symbolic = symbolic or {}
    for c in cases:
        p = f"{c.name}__"
        nodes += [_prefixed_node(n, p) for n in c.nodes]
        for name, arr in c.inputs.items():
            shape = symbolic.get(name, list(arr.shape))
            elem = helper.np_dtype_to_tensor_dtype(arr.dtype)
            inputs.append(helper.make_tensor_value_info(p + name, elem, shape))
        for name, arr in c.inits.items():
            inits.append(numpy_helper.from_array(np.asarray(arr), p + name))
        for name in c.outputs:
            vi = onnx.ValueInfoProto()
            vi.name = p + name
            outputs.append(vi)
    graph = helper.make_graph(nodes, "cases", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = min(model.ir_version, 10)
    return model


def graph_model(nodes: Sequence[Any], inputs: Sequence[Any] | None = None,
                outputs: Sequence[str] = ("y",), inits: Sequence[Any] = (), opset: int = 13,
                domains: Sequence[str] = ()) -> Any:
    """A model of ``nodes`` (input ``x`` float32[2, 3] unless ``inputs`` are given; outputs of
    unknown type), at ``opset`` of the default domain (and version 1 of ``domains``)."""
    inputs = inputs if inputs is not None else [
        helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 3])]
    outs = [helper.make_tensor_value_info(o, onnx.TensorProto.FLOAT, None) for o in outputs]
    graph = helper.make_graph(list(nodes), "g", list(inputs), outs, list(inits))
    imports = [helper.make_opsetid("", opset), *[helper.make_opsetid(d, 1) for d in domains]]
    model = helper.make_model(graph, opset_imports=imports)
    model.ir_version = min(model.ir_version, 10)
    return model


def feeds(cases: Sequence[OnnxCase]) -> dict[str, np.ndarray]:
    return {f"{c.name}__{k}": v for c in cases for k, v in c.inputs.items()}


def run_ort(model: Any, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, inputs)


def check_without_shapes(model: Any, shapes: Sequence[tuple[int, ...]], name: str = "input",
                         rtol: float = 1e-4) -> None:
    """``ember.compile(model)`` with no shapes given, against onnxruntime at each of ``shapes``
    (random float32 input ``name``; tolerance relative to the output's scale)."""
    compiled = ember.compile(model, threads=1)
    for shape in shapes:
        x = np.random.default_rng(1).standard_normal(shape).astype("float32")
        want = run_ort(model, {name: x})[0]
        np.testing.assert_allclose(compiled(x), want, rtol=rtol,
                                   atol=rtol * np.abs(want).max())


def run_graph(model: Any, inputs: dict[str, np.ndarray], **kwargs: Any) -> list[np.ndarray]:
    """Import, build for the graph executor and run."""
    if cc.get_cc() is None:
        pytest.skip("no C compiler found")
    mod, params = relay.frontend.from_onnx(model, **kwargs)
    factory = relay.build(mod, "llvm", params=params)
    gm = factory["default"](ember.cpu(0))
    for name, value in inputs.items():
        gm.set_input(name, value)
    gm.run()
    return [gm.get_output(i).numpy() for i in range(gm.get_num_outputs())]


def run_vm(model: Any, args: Sequence[np.ndarray], **kwargs: Any) -> list[np.ndarray]:
    """Import, compile for the VM and run ``main`` on ``args`` (positional inputs)."""
    if cc.get_cc() is None:
        pytest.skip("no C compiler found")
    mod, params = relay.frontend.from_onnx(model, **kwargs)
    exe = relay.vm.compile(mod, "llvm", params=params)
    vm = ember.runtime.vm.VirtualMachine(exe, ember.cpu(0))
    return flatten(vm.invoke("main", *args))


def flatten(value: Any) -> list[np.ndarray]:
    if hasattr(value, "numpy"):
        return [value.numpy()]
    return [x for v in value for x in flatten(v)]


def compare(label: str, got: Sequence[np.ndarray], want: Sequence[np.ndarray],
            tol: tuple[float, float] | None = None) -> None:
    assert len(got) == len(want), f"{label}: {len(got)} outputs, onnxruntime gives {len(want)}"
    for k, (g, w) in enumerate(zip(got, want)):
        w = np.asarray(w)
        assert g.shape == w.shape, f"{label} output {k}: shape {g.shape}, onnxruntime {w.shape}"
        assert g.dtype == w.dtype, f"{label} output {k}: dtype {g.dtype}, onnxruntime {w.dtype}"
        if w.dtype.kind in "biu":
            np.testing.assert_array_equal(g, w, err_msg=f"{label} output {k}")
        else:
            rtol, atol = tol or TOL.get(str(w.dtype), F32)
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, equal_nan=True,
                                       err_msg=f"{label} output {k}")


def check(cases: Sequence[OnnxCase], opset: int = 17) -> None:
    """Every case matches onnxruntime (one model, one build); failures name their case."""
    names = [c.name for c in cases]
    assert len(set(names)) == len(names), f"case names repeat: {names}"
    model = make_model(cases, opset)
    fed = feeds(cases)
    want = run_ort(model, fed)
    try:
        got = run_graph(model, fed)
    except Exception:
        _find_failing(cases, opset)
        raise
    k = 0
    failures = []
    for c in cases:
        n = len(c.outputs)
        try:
            compare(f"{c.name} ({'/'.join(c.op_types)}, opset {opset})", got[k:k + n],
                    want[k:k + n], c.tol)
        except AssertionError as err:
            failures.append(str(err))
        k += n
    assert not failures, "\n\n".join(failures)


def _find_failing(cases: Sequence[OnnxCase], opset: int) -> None:
    for c in cases:
        model = make_model([c], opset)
        try:
            run_graph(model, feeds([c]))
        except Exception as err:
            raise AssertionError(f"case {c.name} ({'/'.join(c.op_types)}, opset {opset}) "
                                 f"fails: {type(err).__name__}: {err}") from err


def rand(rng: np.random.Generator, *shape: int, dtype: str = "float32", lo: float = -3.0,
         hi: float = 3.0) -> np.ndarray:
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if np.dtype(dtype).kind in "iu":
        return rng.integers(int(lo), int(hi) + 1, size=shape).astype(dtype)
    return rng.uniform(lo, hi, size=shape).astype(dtype)
