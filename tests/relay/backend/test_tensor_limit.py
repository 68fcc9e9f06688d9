"""The build refuses, before generating any code, a tensor larger than the machine could
allocate: an input, an intermediate, or the known axes of a symbolic tensor; for every
executor; the limit is RAM + swap unless the PassContext option sets another."""
from __future__ import annotations

import pytest

import ember
from ember import relay
from ember.contrib import cc
from ember.relay.backend import tensor_limit
from ember.relay.backend.pipeline import stage_listener
from ember.runtime.errors import TensorTooLargeError

HUGE = 2**40


def _build(func: relay.Function, **kwargs: object) -> object:
    return relay.build(ember.IRModule.from_expr(func), "llvm", **kwargs)


@pytest.mark.parametrize("executor", ["graph", "aot", "vm"])
def test_a_huge_input_is_refused_before_any_code(executor: str) -> None:
    """Refused in the first build stage ("optimize"): nothing is lowered or compiled."""
    stages: list[str] = []
    x = relay.var("x", shape=(HUGE, 3))
    func = relay.Function([x], relay.nn.relu(x))
    msg = (r"relay.build: input 'x' has shape \(1099511627776, 3\) of float32: 12.0 TiB "
           r"\(13194139533312 bytes\), more than the .* of this machine's RAM \+ swap; check "
           r"the declared sizes .* relay.build.max_tensor_bytes")
    with pytest.raises(TensorTooLargeError, match=msg) as info, stage_listener(
            lambda name, seconds: stages.append(name) if seconds is None else None):
        if executor == "vm":
            relay.vm.compile(ember.IRModule.from_expr(func), "llvm")
        else:
            _build(func, executor=relay.backend.Executor(executor))
    assert isinstance(info.value, ValueError)
    assert stages == ["optimize"]


def test_a_huge_intermediate_is_named_by_its_operator() -> None:
    x = relay.var("x", shape=(2**20, 1))
    y = relay.var("y", shape=(1, 2**20))
    func = relay.Function([x, y], relay.sum(relay.add(x, y)))  # a 2**40-element broadcast
    with pytest.raises(TensorTooLargeError, match=r"the result of add in @main has shape "
                                                  r"\(1048576, 1048576\) of float32: 4.0 TiB"):
        _build(func)


def test_a_symbolic_tensor_is_judged_by_its_known_axes() -> None:
    x = relay.var("x", shape=(relay.Any(), HUGE))
    func = relay.Function([x], relay.nn.relu(x))
    with pytest.raises(TensorTooLargeError, match=r"input 'x' has shape \(\?, 1099511627776\) "
                                                  r"of float32: at least 4.0 TiB"):
        relay.vm.compile(ember.IRModule.from_expr(func), "llvm")


def test_the_limit_is_a_pass_context_option() -> None:
    if cc.get_cc() is None:
        pytest.skip("no C compiler found")
    x = relay.var("x", shape=(64, 64))
    func = relay.Function([x], relay.nn.relu(x))  # 16 KiB tensors
    with ember.transform.PassContext(config={tensor_limit.CONFIG_KEY: 1000}):
        with pytest.raises(TensorTooLargeError, match=r"16.0 KiB \(16384 bytes\), more than "
                                                      r"the 1000 B of PassContext config"):
            _build(func)
    with ember.transform.PassContext(config={tensor_limit.CONFIG_KEY: 0}):  # no limit
        _build(func)
    with ember.transform.PassContext(config={tensor_limit.CONFIG_KEY: -1}):
        with pytest.raises(TensorTooLargeError, match="must be an int >= 0"):
            _build(func)


def test_the_machine_memory_is_read() -> None:
    memory = tensor_limit.machine_memory()
    assert memory is None or memory > 2**20
    assert tensor_limit.fmt_bytes(13194139533312) == "12.0 TiB"
    assert tensor_limit.fmt_bytes(1000) == "1000 B"
    assert tensor_limit.fmt_bytes(2**70) == "1024.0 EiB"
