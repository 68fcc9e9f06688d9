"""Compiled models on the VM's static plans (runtime/vm/static_plan.py): zoo models and random
elementwise graphs give bit for bit the interpreter's results, and a result survives the next
run."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from _vm_check import requires_cc
from hypothesis import given, settings
from hypothesis import strategies as st

import ember
from ember import relay
from ember.relay import testing
from ember.runtime.container import ADT
from ember.runtime.vm import Executable, VirtualMachine
from ember.runtime.vm.static_plan import StaticPlan

pytestmark = requires_cc
CPU = ember.cpu(0)


def planned_and_interpreted(exe: Executable) -> tuple[VirtualMachine, VirtualMachine]:
    interpreter = VirtualMachine(exe, CPU)
    interpreter.static_plans = False
    return VirtualMachine(exe, CPU), interpreter


def arrays(result: Any) -> list[np.ndarray]:
    return [f.numpy() for f in result.fields] if isinstance(result, ADT) else [result.numpy()]


def assert_bit_identical(got: Any, want: Any) -> None:
    got_arrays, want_arrays = arrays(got), arrays(want)
    assert [a.shape for a in got_arrays] == [w.shape for w in want_arrays]
    assert [a.tobytes() for a in got_arrays] == [w.tobytes() for w in want_arrays]


def random_inputs(mod: ember.IRModule, params: dict, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {p.name_hint: rng.uniform(-1, 1, [int(d) for d in p.type_annotation.shape])
            .astype(p.type_annotation.dtype)
            for p in mod["main"].params if p.name_hint not in params}


@pytest.mark.parametrize("name, kwargs", [
    ("mlp", {"batch_size": 1}), ("autoencoder", {}), ("dscnn", {}), ("resnet8", {})])
def test_zoo_model_plan_equals_interpreter(name: str, kwargs: dict) -> None:
    mod, params = getattr(testing, name).get_workload(**kwargs)
    with ember.transform.PassContext(opt_level=3):
        exe = relay.vm.compile(mod, target="llvm", params=params)
    vm, interpreter = planned_and_interpreted(exe)
    first_inputs, second_inputs = random_inputs(mod, params, 0), random_inputs(mod, params, 1)
    first = vm.invoke("main", **first_inputs)
    assert isinstance(vm._plans[vm._function_index("main")], StaticPlan)
    kept = arrays(first)
    assert_bit_identical(first, interpreter.invoke("main", **first_inputs))
    second = vm.invoke("main", **second_inputs)
    assert_bit_identical(second, interpreter.invoke("main", **second_inputs))
    assert [a.tobytes() for a in arrays(first)] == [k.tobytes() for k in kept]


BINARY = [(relay.add, np.add), (relay.multiply, np.multiply), (relay.subtract, np.subtract),
          (relay.maximum, np.maximum)]
UNARY = [(relay.nn.relu, lambda a: np.maximum(a, 0)), (relay.negative, np.negative)]


@st.composite
def elementwise_graphs(draw: st.DrawFn) -> tuple[ember.IRModule, dict[str, np.ndarray],
                                                 list[np.ndarray]]:
    """(module, inputs, numpy results) of a random graph of elementwise ops over inputs of
    static, broadcast-compatible shapes; the result is a tensor or a tuple of two."""
    rows, cols = draw(st.integers(1, 4)), draw(st.integers(1, 6))
    shapes = draw(st.lists(st.sampled_from([(rows, cols), (1, cols), (cols,), (rows, 1)]),
                           min_size=1, max_size=3))
    rng = np.random.default_rng(draw(st.integers(0, 2**31 - 1)))
    names = [f"x{i}" for i in range(len(shapes))]
    inputs = {n: rng.uniform(-2, 2, s).astype("float32") for n, s in zip(names, shapes)}
    params = [relay.var(n, shape=s, dtype="float32") for n, s in zip(names, shapes)]
    pool: list[tuple[Any, np.ndarray]] = list(zip(params, inputs.values()))
    for _ in range(draw(st.integers(1, 6))):
        a = pool[draw(st.integers(0, len(pool) - 1))]
        if draw(st.booleans()):
            rfn, nfn = draw(st.sampled_from(UNARY))
            pool.append((rfn(a[0]), nfn(a[1])))
        else:
            b = pool[draw(st.integers(0, len(pool) - 1))]
            rfn, nfn = draw(st.sampled_from(BINARY))
            pool.append((rfn(a[0], b[0]), nfn(a[1], b[1])))
    outs = pool[-2:] if len(pool) > len(params) + 1 and draw(st.booleans()) else pool[-1:]
    body = relay.Tuple([o[0] for o in outs]) if len(outs) == 2 else outs[0][0]
    return (ember.IRModule.from_expr(relay.Function(params, body)), inputs,
            [o[1] for o in outs])


@settings(max_examples=6, deadline=None)
@given(elementwise_graphs())
def test_random_elementwise_graphs_plan_equals_interpreter(graph: tuple) -> None:
    mod, inputs, expected = graph
    with ember.transform.PassContext(opt_level=3):
        exe = relay.vm.compile(mod, target="llvm")
    vm, interpreter = planned_and_interpreted(exe)
    got = vm.invoke("main", **inputs)
    assert_bit_identical(got, interpreter.invoke("main", **inputs))
    for g, e in zip(arrays(got), expected):
        np.testing.assert_allclose(g, e, rtol=1e-6, atol=1e-6)
    plan = vm._plans[vm._function_index("main")]
    assert isinstance(plan, StaticPlan), plan
