"""The value phase of a VM plan (vm/plan_phase.value_phase, csrc/dynamic_call.h step 7): kernel
calls that read only constants and shapes run once per input signature, on the Python plan,
plan_arrays and the native dynamic call alike; a signature change recomputes them (stale
values would show when shapes alternate); a model shared by threads keeps them per context;
an impure kernel never joins; the blocks are bounded as other plan blocks."""
from __future__ import annotations

import os
import sys
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ember
from ember import relay, te
from ember.ir import IRModule
from ember.relay.op import random
from ember.relay.backend.vm.value_kernels import value_facts
from ember.runtime.dtype import DataType
from ember.runtime.vm import Executable
from ember.runtime.vm.memory import size_class
from ember.runtime.vm.plan_phase import Early, value_phase
from ember.runtime.vm.plan_walk import Arg, ArgShapes, Block, Call, Tensor
from ember.runtime.vm.serialize import deserialize, serialize
from ember.te.lower import lower
from ember.tir.codegen import function_c

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _vm_testlib import requires_cc  # noqa: E402

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

pytestmark = requires_cc


def position_model() -> onnx.ModelProto:
    """y = x * 0.5 + log(L - range(L)), x of shape (batch, L): the log of the positions
    counted from the end depends only on L (a value-phase chain, as T5's buckets: Range over
    the run-time length, a costly op that FuseOps keeps out of the (batch, L) consumer), and
    every one of them changes with L (a stale value shows whichever length came before)."""
    inits = {"one": np.array(1, "int64"), "zero": np.array(0, "int64"),
             "half": np.array(0.5, "float32")}
    nodes = [
        helper.make_node("Shape", ["x"], ["shp"]),
        helper.make_node("Gather", ["shp", "one"], ["L"], axis=0),
        helper.make_node("Range", ["zero", "L", "one"], ["r"]),
        helper.make_node("Sub", ["L", "r"], ["back"]),
        helper.make_node("Cast", ["back"], ["r1"], to=TensorProto.FLOAT),
        helper.make_node("Log", ["r1"], ["lg"]),
        helper.make_node("Mul", ["x", "half"], ["xh"]),
        helper.make_node("Add", ["xh", "lg"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes, "positions",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "L"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "L"])],
        [numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = min(model.ir_version, 10)
    return model


def expected(x: np.ndarray) -> np.ndarray:
    return x * np.float32(0.5) + np.log(np.arange(x.shape[1], 0, -1).astype("float32"))


@pytest.fixture(scope="module")
def model():
    return ember.compile(position_model(), threads=1)


def context_of(model):
    ctx = model._pool.acquire()
    model._pool.release(ctx)
    return ctx


def value_runs(ctx) -> int:
    """How many times the context's value phase ran, in Python and in C."""
    plan = ctx.vm._plans[ctx.index]
    return plan.value_runs + (ctx.dynamic.value_runs if ctx.dynamic is not None else 0)


def test_the_positions_are_computed_in_the_value_phase(model) -> None:
    x = np.ones((2, 7), "float32")
    np.testing.assert_allclose(model(x), expected(x), rtol=1e-6)
    plan = context_of(model).vm._plans[context_of(model).index]
    names = [plan._funcs[k].name for k in plan._value_calls]
    assert names and any("log" in n for n in names), names
    assert not set(plan._value_calls) & set(plan._rest)


def test_the_value_phase_runs_once_per_signature_and_again_on_a_change(model) -> None:
    rng = np.random.default_rng(0)
    ctx = context_of(model)
    a, b = rng.standard_normal((2, 9)).astype("float32"), \
        rng.standard_normal((3, 5)).astype("float32")
    for x in (a, b, a, b):  # every buffer grown: then C serves each call
        model(x)
    assert ctx.native is not None
    start = value_runs(ctx)
    for _ in range(5):
        np.testing.assert_allclose(model(a), expected(a), rtol=1e-6)
    assert value_runs(ctx) == start + 1  # a differed from the last call's b: once, not 5x
    for k, x in enumerate((b, a, b, a, a, b)):  # alternating shapes: a stale value would show
        np.testing.assert_allclose(model(x), expected(x), rtol=1e-6, err_msg=f"call {k}")
    assert value_runs(ctx) == start + 1 + 5  # each change, not the repeat of a


def test_same_length_other_batch_gives_the_same_values(model) -> None:
    # a signature change where the values happen to be equal (L the same): still correct
    for shape in ((1, 6), (4, 6), (1, 6), (2, 11), (4, 6)):
        x = np.full(shape, 2.0, "float32")
        np.testing.assert_allclose(model(x), expected(x), rtol=1e-6)


@settings(max_examples=20, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 3), st.integers(1, 40)), min_size=1, max_size=8))
def test_any_sequence_of_shapes(model, shapes) -> None:
    for k, shape in enumerate(shapes):
        x = np.linspace(-1, 1, shape[0] * shape[1], dtype="float32").reshape(shape)
        np.testing.assert_allclose(model(x), expected(x), rtol=1e-6, err_msg=f"call {k}")


def test_the_python_plan_alternating_shapes() -> None:
    model = ember.compile(position_model(), threads=1)
    ctx = context_of(model)
    rng = np.random.default_rng(1)
    for n in (3, 12, 3, 1, 12, 3):  # the checked path (NDArray in, plan_arrays) each time
        x = rng.standard_normal((2, n)).astype("float32")
        ctx.native = None
        got = ctx.call([x])[0]
        np.testing.assert_allclose(got, expected(x), rtol=1e-6)
        plan = ctx.vm._plans.get(ctx.index)
        got = plan.run([ember.nd.array(x)])  # the plan's own NDArray run
        np.testing.assert_allclose(got.numpy(), expected(x), rtol=1e-6)


def test_eight_threads_at_different_shapes() -> None:
    model = ember.compile(position_model(), threads=1)
    errors: list[str] = []

    def work(k: int) -> None:
        rng = np.random.default_rng(k)
        for i in range(60):
            x = rng.standard_normal((1 + (k + i) % 3, 2 + 3 * ((k * 7 + i) % 5))
                                    ).astype("float32")
            got = model(x)
            if not np.allclose(got, expected(x), rtol=1e-5, atol=1e-6):
                errors.append(f"thread {k} call {i} shape {x.shape}")
                return

    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:3]


def test_the_value_blocks_are_bounded_as_other_blocks(model) -> None:
    ctx = context_of(model)
    plan = ctx.vm._plans[ctx.index]
    for n in (4, 40, 400, 13):
        model(np.zeros((1, n), "float32"))
    assert plan._value_blocks
    largest = 400 * 8  # the widest value tensor at L=400 (int64 positions)
    for index in plan._value_blocks:
        held = plan._capacity.get(index)
        assert held is not None and held <= size_class(2 * largest), (index, held)
    assert not set(plan._value_blocks) & set(plan._slot_of)  # never shared (plan_share)
    assert not set(plan._value_blocks) & set(plan._result_index)  # never a result


def test_an_impure_kernel_is_never_listed() -> None:
    """The compiler lists no kernel of a random op among those a plan may hoist (the key is
    an argument here: a constant key is folded away before kernels are made)."""
    x = relay.var("x", shape=(relay.Any(), 4), dtype="float32")
    key = relay.var("key", shape=(10,), dtype="uint64")
    drawn = random.uniform(key, (4,), "float32")
    mod = IRModule.from_expr(relay.Function([x, key], relay.add(x, drawn[1])))
    exe = relay.vm.compile(mod, "llvm")
    program = exe.mod.program
    random_kernels = {k for k, n in enumerate(program.primitive_ops)
                      if "random" in n and not n.endswith("_shape_func")}
    assert random_kernels, program.primitive_ops
    assert not random_kernels & set(program.value_kernels)
    assert set(program.value_kernels)  # the add is pure (it reads data: the plan decides)


def test_unused_params_found_in_the_loop_ir() -> None:
    """A tensor the kernel takes for its shape alone (its extent comes in as an argument of
    its own) is an unused parameter of the C function, recorded by position."""
    n = te.var("n")
    shaped, data = te.placeholder((n,), name="shaped"), te.placeholder((n,), name="data")
    out = te.compute((n,), lambda i: data[i] * 2.0, name="out")
    code = function_c(lower(te.create_schedule(out.op), [shaped, data, out], "k"))
    assert code.unused_params == (0,)
    assert "(void)shaped;" in code.unpacked and "(void)data;" not in code.unpacked
    assert code.renamed("k", "k2").unused_params == (0,)


def test_value_facts_of_a_random_kernel_is_none() -> None:
    class Low:  # the parts of a LoweredFunc value_facts reads
        external_module = None

        class code:
            call_packed = True
    assert value_facts(Low()) is None


def test_value_phase_needs_a_listed_kernel() -> None:
    """The rule on a walk made by hand: a call of a kernel that is not listed as pure stays
    in the run, and so does every call that reads what it writes."""
    shapes = ArgShapes()
    shapes.slots[0], shapes.count = 0, 1
    holder = Tensor(shapes, 0, (1,), DataType("int64"))
    f32 = DataType("float32")
    b0, b1 = (Block(i, 64, 64, ember.cpu(0), "float32") for i in range(2))
    x = Tensor(Arg(0, ember.cpu(0)), 0, holder, f32)
    t0, t1 = Tensor(b0, 0, (4,), f32), Tensor(b1, 0, (4,), f32)
    calls = [Call(0, [x, t0], 1), Call(1, [t0, t1], 1)]  # kernel 0 reads x only for its shape
    early = Early(set(), {})
    assert value_phase(calls, [b0, b1], {}, set(), early, set(), {0: (0,), 1: ()}) == \
        ([0, 1], {0, 1})
    assert value_phase(calls, [b0, b1], {}, set(), early, set(), {1: ()}) == ([], set())
    assert value_phase(calls, [b0, b1], {}, set(), early, set(), {0: (), 1: ()}) == ([], set())
    assert value_phase(calls, [b0, b1], {1: t1}, set(), early, set(), {0: (0,), 1: ()}) == \
        ([0], {0})  # a result's block is never a value block


def test_value_kernels_survive_serialization(model) -> None:
    ctx = context_of(model)
    program = ctx.vm.exe.mod.program
    assert program.value_kernels
    again = deserialize(serialize(program))
    assert again.value_kernels == program.value_kernels
    bare = Executable.from_functions(list(program.functions), program.constants,
                                     program.primitive_ops).mod.program
    assert deserialize(serialize(bare)).value_kernels == {}  # the key is optional
