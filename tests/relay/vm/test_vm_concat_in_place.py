"""Concatenations of run-time size written in place by a VM plan (runtime/vm/plan_concat.py):
the concat call is dropped, each part's producer writes it inside the output at the sum of
the earlier parts' sizes, per signature, in Python and in C; results equal the interpreter's
(which still copies) bit for bit."""
from __future__ import annotations

import numpy as np
import pytest
from _vm_check import requires_cc

import ember
from ember import relay
from ember.runtime.errors import InternalError
from ember.runtime.vm import Executable, VirtualMachine
from ember.runtime.vm.plan_checks import slot
from ember.runtime.vm.plan_native import DynamicCall
from ember.runtime.vm.static_plan import StaticPlan

pytestmark = requires_cc
CPU = ember.cpu(0)
SHAPES = [(5, 7), (1, 1), (9, 4), (3, 11), (5, 7)]  # (h, w); the last one seen before

# Two convs concatenated along channels (batch 1: each part one byte range of the output);
# the first part is read again after the concatenation, by the sum.
CONCAT = """#[version = "0.0.5"]
def @main(%x: Tensor[(BATCH, 4, ?, ?), float32], %w1: Tensor[(6, 4, 1, 1), float32],
          %w2: Tensor[(10, 4, 3, 3), float32], %w: Tensor[(5, 16, 3, 3), float32]) {
  %0 = nn.relu(nn.conv2d(%x, %w1, padding=[0, 0, 0, 0]));
  %1 = nn.relu(nn.conv2d(%x, %w2, padding=[1, 1, 1, 1]));
  %2 = concatenate((%0, %1), axis=1);
  %3 = nn.conv2d(%2, %w, padding=[1, 1, 1, 1]);
  add(%3, sum(%0, axis=[1], keepdims=True))
}
"""
# Nested: the inner concatenation is a part of the outer one and read by a sum of its own.
NESTED = """#[version = "0.0.5"]
def @main(%x: Tensor[(1, 4, ?, ?), float32], %w1: Tensor[(6, 4, 1, 1), float32],
          %w2: Tensor[(10, 4, 1, 1), float32], %w3: Tensor[(3, 4, 1, 1), float32],
          %w: Tensor[(5, 19, 1, 1), float32]) {
  %0 = nn.relu(nn.conv2d(%x, %w1, padding=[0, 0, 0, 0]));
  %1 = nn.relu(nn.conv2d(%x, %w2, padding=[0, 0, 0, 0]));
  %2 = nn.relu(nn.conv2d(%x, %w3, padding=[0, 0, 0, 0]));
  %3 = concatenate((%0, %1), axis=1);
  %4 = concatenate((%3, %2), axis=1);
  add(nn.conv2d(%4, %w, padding=[0, 0, 0, 0]), sum(%3, axis=[1], keepdims=True))
}
"""
# Along the batch axis, of run-time size: nothing precedes it.
BATCH = """#[version = "0.0.5"]
def @main(%x: Tensor[(?, 4, 5, 6), float32], %w1: Tensor[(6, 4, 1, 1), float32],
          %w2: Tensor[(6, 4, 3, 3), float32], %w: Tensor[(5, 6, 1, 1), float32]) {
  %0 = nn.relu(nn.conv2d(%x, %w1, padding=[0, 0, 0, 0]));
  %1 = nn.relu(nn.conv2d(%x, %w2, padding=[1, 1, 1, 1]));
  nn.conv2d(concatenate((%1, %0), axis=0), %w, padding=[0, 0, 0, 0])
}
"""
WEIGHTS = {"w1": (6, 4, 1, 1), "w2": (10, 4, 3, 3), "w3": (3, 4, 1, 1), "w": (5, 16, 3, 3),
           "v": (5, 16, 1, 1)}


def _module(text: str, batch: str = "1", **shapes: tuple[int, ...]
            ) -> tuple[ember.IRModule, dict[str, np.ndarray]]:
    mod = ember.parser.parse(text.replace("BATCH", batch))
    rng = np.random.default_rng(0)
    names = [p.name_hint for p in mod["main"].params[1:]]
    return mod, {n: rng.standard_normal({**WEIGHTS, **shapes}[n]).astype("float32") * 0.3
                 for n in names}


def _compile(text: str, config: dict | None = None, batch: str = "1", **shapes) -> Executable:
    mod, params = _module(text, batch, **shapes)
    with ember.transform.PassContext(opt_level=3, config=config or {}):
        return relay.vm.compile(mod, target="llvm", params=params)


def _plan_and_interpreter(exe: Executable) -> tuple[VirtualMachine, VirtualMachine]:
    interpreter = VirtualMachine(exe, CPU)
    interpreter.static_plans = False
    return VirtualMachine(exe, CPU), interpreter


def _same_as_interpreter(exe: Executable, shapes: list[tuple[int, ...]]) -> StaticPlan:
    vm, interpreter = _plan_and_interpreter(exe)
    rng = np.random.default_rng(1)
    for shape in shapes:
        x = rng.standard_normal(shape).astype("float32")
        got, want = vm.invoke("main", x).numpy(), interpreter.invoke("main", x).numpy()
        assert got.shape == want.shape and got.tobytes() == want.tobytes(), shape
    plan = vm._plans[vm._function_index("main")]
    assert isinstance(plan, StaticPlan), plan
    return plan


@pytest.fixture(scope="module")
def concat_exe() -> Executable:
    return _compile(CONCAT)


def test_the_plan_drops_the_concat_and_places_the_parts(concat_exe) -> None:
    assert list(concat_exe._program.concat_kernels.values()) == [(0, 1)]
    plan = _same_as_interpreter(concat_exe, [(1, 4, h, w) for h, w in SHAPES])
    (concat,) = plan.concats
    assert "concatenate" in concat.name and concat.call not in plan._rest
    # the parts lie end to end in the output, at this signature's sizes
    first, second = concat.parts
    base, size = plan._base[concat.out.index], plan._arena_i64[slot(plan, first.size)]
    assert plan._base[first.index] == base and plan._base[second.index] == base + size
    assert first.index not in plan._capacity and second.index not in plan._capacity
    # a plan per signature kept, none made again
    assert len(plan._seen) == len(set(SHAPES))


def test_nested_concatenations_are_placed_in_place() -> None:
    exe = _compile(NESTED, w2=(10, 4, 1, 1), w=(5, 19, 1, 1))  # (the model call's)
    plan = _same_as_interpreter(exe, [(1, 4, h, w) for h, w in SHAPES])
    inner, outer = plan.concats
    assert inner.out in outer.parts
    assert plan._roots[inner.out.index] == outer.out.index
    assert all(plan._roots[p.index] == outer.out.index for p in inner.parts)


def test_a_concat_along_a_run_time_batch_is_in_place() -> None:
    exe = _compile(BATCH, w2=(6, 4, 3, 3), w=(5, 6, 1, 1))
    plan = _same_as_interpreter(exe, [(n, 4, 5, 6) for n in (3, 1, 2, 3)])
    assert len(plan.concats) == 1


def test_the_option_off_keeps_the_copy() -> None:
    exe = _compile(CONCAT, {"relay.backend.concat_in_place": False})
    assert exe._program.concat_kernels == {}
    assert _same_as_interpreter(exe, [(1, 4, 5, 7), (1, 4, 2, 3)]).concats == []


def test_a_symbolic_batch_keeps_the_copy() -> None:
    """Channels after a batch of run-time size: a part is not one byte range of the output."""
    exe = _compile(CONCAT, batch="?")
    assert exe._program.concat_kernels == {}
    plan = _same_as_interpreter(exe, [(1, 4, 5, 7), (3, 4, 5, 7), (2, 4, 1, 3)])
    assert plan.concats == []


def test_parts_that_do_not_fill_the_output_raise(concat_exe) -> None:
    vm, _ = _plan_and_interpreter(concat_exe)
    x = np.ones((1, 4, 5, 7), "float32")
    vm.invoke("main", x)
    plan = vm._plans[vm._function_index("main")]
    at = slot(plan, plan.concats[0].out.size)
    shape_run = plan._shape_run

    def wrong() -> int:  # the output's size as a broken shape function would give it
        failed = shape_run()
        plan._arena_i64[at] += 64
        return failed
    plan._shape_run = wrong
    with pytest.raises(InternalError, match="concatenation vm_mod_fused_concatenate"):
        vm.invoke("main", np.ones((1, 4, 6, 7), "float32"))


def test_the_model_call_runs_in_c(monkeypatch) -> None:
    """ember.compile's call (nested concatenations): new signatures within the buffers in
    C, which points the parts per signature; the results equal the interpreter's."""
    from ember.runtime.execution_pool import VMContext

    shapes = {"w2": (10, 4, 1, 1), "w": (5, 19, 1, 1)}
    mod, params = _module(NESTED, **shapes)
    model = ember.compile(mod, executor="vm", params=params)
    interpreter = VirtualMachine(_compile(NESTED, **shapes), CPU)
    interpreter.static_plans = False
    rng = np.random.default_rng(2)
    big = rng.standard_normal((1, 4, 12, 12)).astype("float32")
    model(big)
    model(big)  # the buffers at their largest: C serves every smaller signature
    ctx = model._pool.acquire()
    model._pool.release(ctx)
    assert isinstance(ctx.native, DynamicCall) and len(ctx.arrays.plan.concats) == 2
    python: list[int] = []
    original = VMContext.call
    monkeypatch.setattr(VMContext, "call", lambda self, v: python.append(1) or original(self, v))
    for h, w in SHAPES:
        x = rng.standard_normal((1, 4, h, w)).astype("float32")
        want = interpreter.invoke("main", x).numpy()
        assert model(x).tobytes() == want.tobytes(), (h, w)
    assert python == []
    # Python's path again, at the shape it placed the parts for last (an input C does not
    # take, before it looks at the shape): C moved them since
    x = rng.standard_normal((1, 4, 12, 12)).astype("float32")
    assert model(ember.nd.array(x)).tobytes() == interpreter.invoke("main", x).numpy().tobytes()
    assert python == [1]


def test_a_saved_executable_keeps_its_concat_kernels(concat_exe) -> None:
    code, lib = concat_exe.save()
    loaded = Executable.load_exec(code, lib)
    assert loaded._program.concat_kernels == concat_exe._program.concat_kernels != {}


def test_a_part_lives_as_its_output() -> None:
    """plan_share: a call naming a part names the block holding it, so that block is live
    from the first part's producer to the last reader of any part (here: block 4 holds
    parts 1 and 2; 3 is written while part 1 is live, and read after 4's last use)."""
    from ember.runtime.dtype import DataType
    from ember.runtime.vm.plan_share import lifetimes
    from ember.runtime.vm.plan_walk import Block, Call, Tensor

    blocks = [Block(i, 0, 64, CPU, "float32") for i in range(5)]

    def t(i: int) -> Tensor:
        return Tensor(blocks[i], 0, (4,), DataType("float32"))
    calls = [Call(0, [t(0), t(1)], 1), Call(1, [t(0), t(3)], 1), Call(2, [t(0), t(2)], 1),
             Call(3, [t(4), t(0)], 1), Call(4, [t(1), t(3)], 1)]
    assert lifetimes(calls, range(5), blocks, set(), [], {1: 4, 2: 4}) == \
        {0: [0, 3], 3: [1, 4], 4: [0, 4]}
    assert lifetimes(calls, range(5), blocks, set(), [])[4] == [3, 3]
