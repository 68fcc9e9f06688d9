"""Kernels with ``?`` dimensions check at run time what their ops require of the sizes
(broadcasting, reduction lengths, joined dimensions, element counts, windows): a call with
sizes that do not fit fails with the op's message instead of reading past a buffer, and the
VM stays usable."""
from __future__ import annotations

from functools import cache

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ember
from ember import relay
from ember.runtime.vm import VirtualMachine

A = relay.Any()
side = st.integers(1, 5)


@cache
def vm_for(name: str) -> VirtualMachine:
    """A VM running one op over arguments whose every dimension is ``?``."""
    x, y = relay.var("x", shape=(A, A)), relay.var("y", shape=(A, A))
    body = {
        "add": lambda: relay.add(x, y),
        "multiply": lambda: relay.multiply(x, y),
        "concatenate": lambda: relay.concatenate([x, y], 0),
        "nn.dense": lambda: relay.nn.dense(x, y),
        "reshape": lambda: relay.reshape(x, (-1, 4)),
    }[name]()
    params = [x, y] if name != "reshape" else [x]
    mod = ember.IRModule.from_expr(relay.Function(params, body))
    return VirtualMachine(relay.vm.compile(mod, "llvm"), ember.cpu())


def numpy_result(name: str, a: np.ndarray, b: np.ndarray) -> np.ndarray | None:
    """numpy's answer, or None where numpy (the op's definition) refuses the shapes."""
    try:
        if name == "add":
            return a + b
        if name == "multiply":
            return a * b
        if name == "concatenate":
            return np.concatenate([a, b], 0)
        if name == "nn.dense":
            return a @ b.T
        return a.reshape(-1, 4) if a.size % 4 == 0 else None
    except ValueError:
        return None


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(["add", "multiply", "concatenate", "nn.dense", "reshape"]),
       st.tuples(side, side), st.tuples(side, side), st.integers(0, 2**16))
def test_mismatched_sizes_raise_and_the_vm_stays_usable(name, sa, sb, seed):
    rng = np.random.default_rng(seed)
    a, b = rng.uniform(-1, 1, sa).astype("float32"), rng.uniform(-1, 1, sb).astype("float32")
    vm = vm_for(name)
    args = (a,) if name == "reshape" else (a, b)
    want = numpy_result(name, a, b)
    if want is None:
        # reshape's size check runs in the VM's reshape_tensor instruction (its fast path)
        pattern = r"reshape(_tensor)?: .*(must|cannot reshape)" if name == "reshape" else (
            rf"{name}: .*must")
        with pytest.raises(ember.TVMError, match=pattern) as info:
            vm.invoke("main", *args)
        assert str(list(a.shape)).replace(" ", "") in str(info.value).replace(" ", "")
    else:
        np.testing.assert_allclose(vm.invoke("main", *args).numpy(), want, rtol=1e-5, atol=1e-5)
    ok = (np.ones((2, 4), "float32"),) if name == "reshape" else (np.ones((2, 2), "float32"),) * 2
    assert vm.invoke("main", *ok).numpy().size > 0  # still usable after an error


def test_broadcast_error_names_the_op_and_both_shapes():
    vm = vm_for("add")
    with pytest.raises(ember.TVMError) as info:
        vm.invoke("main", np.ones((2, 3), "float32"), np.ones((5, 3), "float32"))
    text = str(info.value)
    assert "add: cannot broadcast the operands" in text
    assert "float32[2, 3]" in text and "float32[5, 3]" in text


@pytest.mark.parametrize("case", ["conv2d", "max_pool2d"])
def test_window_that_does_not_fit_is_refused(case):
    d = relay.var("d", shape=(1, 2, A, A))
    if case == "conv2d":
        k = relay.var("k", shape=(4, 2, 3, 3))
        func, args = relay.Function([d, k], relay.nn.conv2d(d, k)), [(1, 2, 2, 2), (4, 2, 3, 3)]
    else:
        func, args = relay.Function([d], relay.nn.max_pool2d(d, (3, 3))), [(1, 2, 2, 5)]
    vm = VirtualMachine(relay.vm.compile(ember.IRModule.from_expr(func), "llvm"), ember.cpu())
    with pytest.raises(ember.TVMError, match="window must fit in the padded height"):
        vm.invoke("main", *[np.ones(s, "float32") for s in args])
    fits = [(1, 2, 5, 5)] + args[1:]
    assert vm.invoke("main", *[np.ones(s, "float32") for s in fits]).numpy().shape[2:] == (3, 3)
