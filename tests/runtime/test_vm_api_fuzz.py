"""Fuzzing the Relay-era VirtualMachine API (``set_input``, ``set_one_input``, ``invoke``,
``run``, ``invoke_stateful``, ``get_outputs``, ``get_output``, ``get_input_index``) on the
tiny model of ``_executor_fuzz``: random mixes of good and bad arguments (values, counts,
names, indices, function names). Every invalid call must raise a TVMError that is a
ValueError/TypeError/IndexError naming the argument (``argument 1 (b)``) and leave the stored
inputs as they were; valid runs match numpy exactly."""
from __future__ import annotations

import functools
import os
import sys
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ember
from ember import relay
from ember.runtime.errors import TVMError
from ember.runtime.vm import VirtualMachine
from ember.testing import find_c_compiler

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _executor_fuzz import ALLOWED, BAD_KEYS, NAMES, bad_value, good_value, reference, tiny_model

pytestmark = pytest.mark.skipif(find_c_compiler() is None, reason="no C compiler found")


@functools.cache
def executable() -> Any:
    return relay.vm.compile(tiny_model(), target="llvm")


@st.composite
def arguments(draw: Any) -> tuple[list[Any], dict[str, np.ndarray], tuple[str, ...]]:
    """Three values (one maybe bad): (objects, arrays if all good, names a message needs)."""
    bad = draw(st.sampled_from([None, None, *NAMES]))
    values = [draw(bad_value(n) if n == bad else good_value(n)) for n in NAMES]
    names = () if bad is None else (f"argument {NAMES.index(bad)} ({bad})",)
    return [v.obj for v in values], {n: v.array for n, v in zip(NAMES, values)}, names


@st.composite
def vm_call(draw: Any) -> tuple[str, tuple[Any, ...], dict[str, Any], dict[str, Any], tuple]:
    """(method, args, kwargs, inputs a valid call stores, names an invalid one must give)."""
    kind = draw(st.sampled_from(["invoke", "set_input", "set_input_kw", "set_one_input",
                                 "stateful", "outputs", "output", "index", "bad_function",
                                 "count"]))
    if kind in ("invoke", "set_input"):
        objs, arrays, names = draw(arguments())
        return kind, ("main", *objs), {}, arrays, names
    if kind == "set_input_kw":
        objs, arrays, names = draw(arguments())
        return "set_input", ("main",), dict(zip(NAMES, objs)), arrays, names
    if kind == "set_one_input":
        name = draw(st.sampled_from(NAMES))
        if draw(st.integers(0, 3)) == 0:
            key = draw(st.sampled_from(BAD_KEYS[:-1]))
            return kind, ("main", key, np.zeros(3, "float32")), {}, {}, ("set_one_input",)
        good = draw(st.booleans())
        value = draw(good_value(name) if good else bad_value(name))
        key = draw(st.sampled_from([name, NAMES.index(name)]))
        names = () if good else (f"argument {NAMES.index(name)} ({name})",)
        return kind, ("main", key, value.obj), {}, {name: value.array} if good else {}, names
    if kind == "stateful":
        return "invoke_stateful", ("main",), {}, {}, ()
    if kind == "outputs":
        return "get_outputs", (), {}, {}, ()
    if kind == "output":
        index = draw(st.sampled_from([0, 1, -1, "0", None]))
        return "get_output", (index,), {}, {}, ()
    if kind == "index":
        return "get_input_index", (draw(st.sampled_from([*NAMES, "zz", 3])),), {}, {}, ()
    if kind == "bad_function":
        return "invoke", (draw(st.sampled_from(["nope", 3, None])),), {}, {}, ("invoke",)
    count = draw(st.sampled_from([1, 2, 4, 5]))  # 0 would run on the stored inputs
    return "invoke", ("main", *[np.zeros(1)] * count), {}, {}, (f"got {count}",)


class VMState:
    """The VM under test and what a correct one would hold."""

    def __init__(self) -> None:
        self.vm = VirtualMachine(executable(), ember.cpu(0))
        self.stored: dict[str, np.ndarray] = {}
        self.has_outputs = False

    def valid(self, op: str, args: tuple, sets: dict[str, Any], names: tuple) -> bool:
        if names or any(v is None for v in sets.values()):
            return False
        if op in ("invoke", "set_input"):
            return len(sets) == 3 or (len(args) == 1 and set(self.stored) == set(NAMES))
        if op == "invoke_stateful":
            return set(self.stored) == set(NAMES)
        if op in ("get_outputs", "get_output"):
            return self.has_outputs and (op == "get_outputs" or
                                         (type(args[0]) is int and args[0] == 0))
        if op == "get_input_index":
            return isinstance(args[0], str)
        return True

    def apply(self, op: str, args: tuple, kwargs: dict, sets: dict, names: tuple) -> None:
        ok = self.valid(op, args, sets, names)
        call = f"{op}{args!r:.120}{kwargs and ' kwargs' or ''}"
        try:
            result = getattr(self.vm, op)(*args, **kwargs)
        except TVMError as err:
            assert not ok, f"{call} raised {type(err).__name__}: {err}"
            state = op in ("get_outputs", "get_output", "invoke_stateful") or (
                op == "invoke" and len(args) == 1 and args[0] == "main")
            assert state or isinstance(err, ALLOWED), f"{call}: {type(err).__mro__}"
            for needle in names:
                assert needle in str(err), f"{call}: {str(err)!r} does not name {needle!r}"
            self.check_stored()
            return
        except Exception as err:
            raise AssertionError(f"{call} raised a non-ember {type(err).__name__}: {err}") from err
        assert ok, f"{call} was accepted"
        self.stored.update(sets)
        if op == "invoke":
            np.testing.assert_array_equal(result.numpy(), reference(self.stored))
        if op == "invoke_stateful":
            self.has_outputs = True
            np.testing.assert_array_equal(self.vm.get_output(0).numpy(), reference(self.stored))
        if op == "get_input_index":
            assert result == (NAMES.index(args[0]) if args[0] in NAMES else -1)

    def check_stored(self) -> None:
        inputs = self.vm._inputs.get("main", [])
        for name, want in self.stored.items():
            np.testing.assert_array_equal(inputs[NAMES.index(name)].numpy(), want,
                                          err_msg=f"{name} changed by a rejected call")


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                HealthCheck.data_too_large])
@given(st.lists(vm_call(), min_size=1, max_size=10))
def test_virtual_machine_api_fuzz(sequence):
    state = VMState()
    for op, args, kwargs, sets, names in sequence:
        state.apply(op, args, kwargs, sets, names)
    values = {"a": np.full((2, 3), 1.5, "float32"), "b": np.arange(3, dtype="float32"),
              "c": np.arange(6, dtype="int32").reshape(2, 3)}
    out = state.vm.invoke("main", *values.values())
    np.testing.assert_array_equal(out.numpy(), reference(values))
