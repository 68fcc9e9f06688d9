"""Helpers for the lowering tests: one-op primitive functions, compiled together, checked
against each op's numpy reference.

A test builds a list of ``Case``s (op, input arrays, attrs), and ``check_cases`` lowers them
all with one TECompiler, builds them into one library as a model build does
(``TECompiler.build``: the fused kernels' C, linked with ember's kernel objects, which compile
once per flag set instead of once per example; the compiler's content-hash cache makes reruns
of the same cases instant), runs every kernel and compares.
"""
from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ember
from ember.contrib import cc
from ember.ir.expr import Call, Function, Tuple, Var
from ember.ir.op import Op
from ember.ir.types import TensorType, Type
from ember.relay.backend.te_compiler import LoweredFunc, TECompiler
from ember.relay.transform.type_infer import infer_type

# hypothesis examples per lowering test in the default run; each example is one compiler run
# (cached by content) and CI draws new ones each time; the wide sweeps below take 60
EXAMPLES = int(os.environ.get("EMBER_LOWERING_EXAMPLES", "3"))
WIDE_EXAMPLES = 60  # the @pytest.mark.slow sweeps
F32 = (1e-5, 1e-5)
SUMS = (1e-4, 1e-4)  # conv, dense, pools, reductions: accumulation order differs from numpy
F64 = (1e-9, 1e-9)


@dataclass
class Case:
    """One op applied to ``args`` (arrays; a list of arrays is a tuple argument)."""

    op: str
    args: list[Any]
    attrs: dict[str, Any] = field(default_factory=dict)
    tol: tuple[float, float] | None = None
    types: list[Type] | None = None  # parameter types (default: the arrays' static types)

    def __repr__(self) -> str:
        shapes = [[a.shape for a in x] if isinstance(x, list) else (x.shape, str(x.dtype))
                  for x in self.args]
        return f"Case({self.op}, {shapes}, {self.attrs})"


def need_cc() -> None:
    if cc.get_cc() is None:
        pytest.skip("no C compiler found")


def _type_of(a: np.ndarray) -> TensorType:
    return TensorType(a.shape, str(a.dtype))


def prim_func(case: Case) -> Function:
    """``fn (%p0, ...) { op(%p0, ...) }`` marked Primitive and typed."""
    params: list[Var] = []
    call_args = []
    types = iter(case.types or [])
    for i, a in enumerate(case.args):
        if isinstance(a, list):
            fields = []
            for j, x in enumerate(a):
                v = Var(f"p{i}_{j}", next(types, None) or _type_of(x))
                params.append(v)
                fields.append(v)
            call_args.append(Tuple(tuple(fields)))
        else:
            v = Var(f"p{i}", next(types, None) or _type_of(a))
            params.append(v)
            call_args.append(v)
    op = Op.get(case.op)
    attrs = op.make_attrs(**case.attrs) if op.op_def.attrs_type else None
    func = Function(tuple(params), Call(op, tuple(call_args), attrs)).with_attr("Primitive", 1)
    return infer_type(func)


def reference(case: Case) -> list[np.ndarray]:
    op = Op.get(case.op)
    out = op.op_def.reference(*case.args, attrs=case.attrs or None)
    return list(out) if isinstance(out, tuple) else [out]


def flat_args(case: Case) -> list[np.ndarray]:
    return [x for a in case.args for x in (a if isinstance(a, list) else [a])]


def build(lowered: Sequence[LoweredFunc], compiler: TECompiler) -> Any:
    """Compile ``lowered`` into one shared library and load it."""
    need_cc()
    return compiler.build(list({lf.name: lf for lf in lowered}.values()))


def run(mod: Any, lowered: LoweredFunc, arrays: Sequence[np.ndarray],
        out_like: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Call the kernel on ``arrays``; outputs are allocated like ``out_like``."""
    outs = [ember.nd.empty(o.shape, str(o.dtype)) for o in out_like]
    args = [ember.nd.array(np.array(a, order="C")) for a in arrays]
    mod[lowered.name](*args, *lowered.constants, *outs)
    return [o.numpy() for o in outs]


def tolerance(case: Case, dtype: np.dtype) -> tuple[float, float]:
    if dtype.kind in "biu":
        return 0.0, 0.0
    if case.tol is not None:
        return case.tol
    return F64 if dtype == np.float64 else F32


def compare(case: Case, got: Sequence[np.ndarray], want: Sequence[np.ndarray]) -> None:
    assert len(got) == len(want), f"{case}: {len(got)} outputs, reference has {len(want)}"
    for k, (g, w) in enumerate(zip(got, want)):
        assert g.shape == w.shape and g.dtype == w.dtype, (
            f"{case} output {k}: got {g.dtype}{g.shape}, reference {w.dtype}{w.shape}")
        rtol, atol = tolerance(case, w.dtype)
        if rtol == 0 and atol == 0:
            np.testing.assert_array_equal(g, w, err_msg=f"{case} output {k}")
        else:
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=f"{case} output {k}")


def check_cases(cases: Sequence[Case]) -> list[LoweredFunc]:
    """Lower, compile (once) and run every case; compare with the references."""
    compiler = TECompiler()
    lowered = [compiler.lower(prim_func(c)) for c in cases]
    wants = [reference(c) for c in cases]
    mod = build(lowered, compiler)
    for case, lf, want in zip(cases, lowered, wants):
        compare(case, run(mod, lf, flat_args(case), want), want)
    return lowered


def sweep(body: Callable[[st.DataObject], None]) -> tuple[Any, Any]:
    """Two tests from one hypothesis body: the default one (``EXAMPLES`` examples) and a wide
    sweep (``WIDE_EXAMPLES``) marked slow."""
    def make(n: int) -> Any:
        return settings(max_examples=n, deadline=None)(given(data=st.data())(body))
    return make(EXAMPLES), pytest.mark.slow(make(WIDE_EXAMPLES))


# ---------------------------------------------------------------- data
def rand(rng: np.random.Generator, shape: Sequence[int], dtype: str = "float32",
         lo: float = -3.0, hi: float = 3.0) -> np.ndarray:
    """Random values of ``dtype`` in [lo, hi] (integers: rounded; bool: coin flips)."""
    shape = tuple(shape)
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if np.dtype(dtype).kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(max(int(lo), info.min), min(int(hi), info.max) + 1,
                            size=shape).astype(dtype)
    return rng.uniform(lo, hi, size=shape).astype(dtype)
