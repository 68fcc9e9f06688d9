"""Random call sequences for the executor fuzz tests: valid and invalid ``set_input`` /
``get_input`` / ``get_output`` / ``run`` calls on a tiny three-input model, checked against a
shadow copy of the inputs.

The model: ``(a + b) * cast(c, float32)`` with ``a: float32[2, 3]``, ``b: float32[3]``,
``c: int32[2, 3]``. Every generated call knows whether it is valid and, if not, which input
its message must name. ``Driver.apply`` runs one call and checks:

- a valid call succeeds; an invalid one raises a ``TVMError`` that is also a ValueError,
  TypeError or IndexError (never MemoryError, RecursionError, a bare AttributeError...);
- the message names the input (``'b'`` and ``input 1 of 3``, or the unknown name / index);
- a rejected call changed nothing: every input read back equals the shadow copy.

``Driver.finish`` then sets valid inputs, runs and compares with numpy (exact: the float32
sums and products of small integers are exact).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from hypothesis import strategies as st

import ember
from ember import relay
from ember.relay.backend import Executor, Runtime
from ember.runtime.dtype import DataType
from ember.runtime.errors import TVMError
from ember.runtime.ndarray import NDArray

NAMES = ("a", "b", "c")
TYPES = {"a": ("float32", (2, 3)), "b": ("float32", (3,)), "c": ("int32", (2, 3))}
ALLOWED = (ValueError, TypeError, IndexError)


def tiny_model() -> ember.IRModule:
    a = relay.var("a", shape=(2, 3), dtype="float32")
    b = relay.var("b", shape=(3,), dtype="float32")
    c = relay.var("c", shape=(2, 3), dtype="int32")
    y = relay.multiply(relay.add(a, b), relay.cast(c, "float32"))
    return ember.IRModule.from_expr(relay.Function([a, b, c], y))


@functools.cache
def factory(kind: str) -> Any:
    """The tiny model built for ``kind``: graph, aot-packed, aot-c (C interface) or vm."""
    mod = tiny_model()
    if kind == "graph":
        return relay.build(mod, "llvm")
    if kind == "aot-packed":
        return relay.build(mod, "llvm", executor=Executor("aot"))
    if kind == "aot-c":
        return relay.build(mod, "c", executor=Executor("aot", {"interface-api": "c",
                                                               "unpacked-api": True}),
                           runtime=Runtime("crt"))
    return relay.build(mod, "llvm", executor=Executor("vm"))


def reference(values: dict[str, np.ndarray]) -> np.ndarray:
    return (values["a"] + values["b"]) * values["c"].astype("float32")


# ---- values -----------------------------------------------------------------------------------
@dataclass
class Value:
    """A value to pass, what it holds as a numpy array if valid, and a description."""

    obj: Any
    array: np.ndarray | None  # None: invalid for the input it is drawn for
    what: str


def _ints(draw: Any, dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    flat = draw(st.lists(st.integers(-8, 8), min_size=int(np.prod(shape)),
                         max_size=int(np.prod(shape))))
    return np.array(flat, dtype=dtype).reshape(shape)


@st.composite
def good_value(draw: Any, name: str) -> Value:
    dtype, shape = TYPES[name]
    arr = _ints(draw, dtype, shape)
    form = draw(st.sampled_from(["numpy", "ndarray", "list", "strided", "readonly",
                                 "broadcast", "fortran", "byteswapped"]))
    if form == "ndarray":
        return Value(ember.nd.array(arr), arr, form)
    if form == "list":
        return Value(arr.tolist(), arr, form)
    if form == "strided":  # every other element of a larger array
        big = np.zeros(tuple(2 * d for d in shape), dtype)
        view = big[tuple(slice(None, None, 2) for _ in shape)]
        view[...] = arr
        return Value(view, arr, form)
    if form == "readonly":
        ro = arr.copy()
        ro.flags.writeable = False
        return Value(ro, arr, form)
    if form == "broadcast":  # zero strides: one row repeated
        row = arr.reshape(-1)[: shape[-1]]
        full = np.broadcast_to(row, shape)
        return Value(full, np.array(full), form)
    if form == "fortran":
        return Value(np.asfortranarray(arr), arr, form)
    if form == "byteswapped":
        return Value(arr.astype(arr.dtype.newbyteorder(">")), arr, form)
    return Value(arr, arr, form)


@st.composite
def bad_value(draw: Any, name: str) -> Value:
    dtype, shape = TYPES[name]
    other = "float64" if dtype == "float32" else "int64"
    ok = np.zeros(shape, dtype)
    forms: dict[str, Any] = {
        "wrong dtype": lambda: ok.astype(other),
        "float16": lambda: ok.astype("float16"),
        "bool": lambda: ok.astype(bool),
        "wrong shape": lambda: np.zeros(shape[::-1] + (1,), dtype),
        "broadcastable smaller": lambda: np.zeros(shape[-1:], dtype) if len(shape) > 1 else
        np.zeros((), dtype),
        "scalar": lambda: 1,
        "empty": lambda: np.zeros((0,), dtype),
        "list of wrong shape": lambda: [[1, 2], [3, 4]],
        "ragged list": lambda: [[1, 2, 3], [4]],
        "None": lambda: None,
        "str": lambda: "1.5",
        "bytes": lambda: b"\x00" * 24,
        "dict": lambda: {"value": ok},
        "object array": lambda: ok.astype(object),
        "complex": lambda: ok.astype("complex64"),
        "ndarray wrong dtype": lambda: ember.nd.array(ok.astype(other)),
        "ndarray on a GPU": lambda: NDArray(ok.copy(), ember.cuda(0), DataType(dtype)),
        "huge ints": lambda: np.full(shape, 2**40 + 1).tolist(),  # not exact in float32 either
        "list of str": lambda: np.full(shape, "x").tolist(),
        "float list": lambda: (ok + 0.5).tolist(),
        "set": lambda: {1, 2},
    }
    if dtype.startswith("float"):
        del forms["float list"]  # floats are fine for a float input
        forms["overflowing list"] = lambda: np.full(shape, 1e300).tolist()
    form = draw(st.sampled_from(sorted(forms)))
    return Value(forms[form](), None, form)


# ---- calls ------------------------------------------------------------------------------------
@dataclass
class Call:
    """One call: ``op`` with ``args``; ``valid``, and what an invalid call's message names."""

    op: str
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    valid: bool = True
    names: tuple[str, ...] = ()  # substrings the error message must contain
    sets: dict[str, np.ndarray] = field(default_factory=dict)  # inputs a valid call sets

    def __repr__(self) -> str:
        bits = [repr(a) if not isinstance(a, Value) else f"<{a.what}>" for a in self.args]
        bits += [f"{k}=<{v.what}>" for k, v in self.kwargs.items()]
        return f"{self.op}({', '.join(bits)}){'' if self.valid else ' [invalid]'}"


BAD_KEYS = ["zz", "A", "", 3, 7, -1, 1.5, True, b"a", None]


@st.composite
def key_for(draw: Any, name: str) -> Any:
    return draw(st.sampled_from([name, NAMES.index(name), np.int64(NAMES.index(name))]))


@st.composite
def a_call(draw: Any) -> Call:
    kind = draw(st.sampled_from(["set", "set", "set", "set_many", "get_input", "get_output",
                                 "run", "index"]))
    name = draw(st.sampled_from(NAMES))
    if kind == "set":
        if draw(st.integers(0, 4)) == 0:  # a bad key with a good value
            key = draw(st.sampled_from(BAD_KEYS))
            value = draw(good_value(name))
            return Call("set_input", (key, value), valid=False, names=_key_names(key))
        good = draw(st.booleans())
        value = draw(good_value(name) if good else bad_value(name))
        key = draw(key_for(name))
        if good:
            return Call("set_input", (key, value), sets={name: value.array})
        return Call("set_input", (key, value), valid=False, names=_input_names(name))
    if kind == "set_many":
        chosen = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=3, unique=True))
        bad = draw(st.sampled_from([None, *chosen]))
        values = {n: draw(bad_value(n) if n == bad else good_value(n)) for n in chosen}
        if bad is None:
            return Call("set_input", kwargs=values, sets={n: v.array for n, v in values.items()})
        return Call("set_input", kwargs=values, valid=False, names=_input_names(bad))
    if kind == "get_input":
        if draw(st.booleans()):
            return Call("get_input", (draw(key_for(name)),), names=(name,))
        key = draw(st.sampled_from(BAD_KEYS[:-1]))
        return Call("get_input", (key,), valid=False, names=_key_names(key))
    if kind == "get_output":
        index = draw(st.sampled_from([0, 0, 1, -1, "0", 0.0, None]))
        return Call("get_output", (index,), valid=index == 0 and type(index) is int,
                    names=() if index == 0 else (repr(index) if isinstance(index, int) else
                                                 type(index).__name__,))
    if kind == "index":
        key = draw(st.sampled_from([*NAMES, "zz", 0, None]))
        return Call("get_input_index", (key,), valid=isinstance(key, str),
                    names=(type(key).__name__,))
    return Call("run")


def _input_names(name: str) -> tuple[str, ...]:
    return (repr(name), f"input {NAMES.index(name)} of 3")


def _key_names(key: Any) -> tuple[str, ...]:
    if key is None:
        return ("without an input name",)
    if isinstance(key, str):
        return (repr(key), "'a', 'b', 'c'")
    if isinstance(key, (int, np.integer)) and not isinstance(key, bool):
        return (f"index {key}", "3 inputs")
    return (type(key).__name__,)


# ---- running them -----------------------------------------------------------------------------
class Driver:
    """Applies calls to an executor with the module-based interface and checks each one.

    What an executor does before its inputs are all set differs, and is declared here: the
    graph executor runs on (and reads back) whatever its memory holds; the AOT executor
    refuses ``run`` until every input is set; the VM also has no outputs before a run and no
    value for an input never set. Such refusals are state errors: a TVMError naming what is
    missing, not necessarily a ValueError/TypeError/IndexError.
    """

    runs_without_inputs = True
    outputs_before_run = True
    inputs_before_set = True
    get_input_sets = False  # whether handing out an input's array counts as setting it

    def __init__(self, module: Any) -> None:
        self.m = module
        self.shadow: dict[str, np.ndarray] = {}
        self.handed_out: set[str] = set()  # inputs given out by get_input, contents unknown
        self.ran = False

    def expect(self, call: Call) -> bool:
        """Adjust ``call`` to this executor's state; True if it is a state error."""
        missing = [n for n in NAMES if n not in self.shadow and n not in self.handed_out]
        if call.op == "run" and missing and not self.runs_without_inputs:
            call.valid, call.names = False, (missing[0],)
            return True
        if call.op == "get_output" and not self.ran and not self.outputs_before_run:
            call.valid, call.names = False, ("no outputs",)
            return True
        if (call.op == "get_input" and call.valid and call.names[0] in missing
                and not self.inputs_before_set):
            call.valid = False
            return True
        return False

    def apply(self, call: Call) -> None:
        state_error = self.expect(call)
        try:
            result = self.do(call)
        except TVMError as err:
            assert not call.valid, f"{call} raised {type(err).__name__}: {err}"
            assert state_error or isinstance(err, ALLOWED), \
                f"{call}: {type(err).__mro__} is not a {ALLOWED}"
            text = str(err)
            for needle in call.names:
                assert needle in text, f"{call}: message {text!r} does not name {needle!r}"
            self.check_unchanged()
            return
        except Exception as err:
            raise AssertionError(f"{call} raised a non-ember {type(err).__name__}: {err}") from err
        assert call.valid, f"{call} was accepted (returned {result!r:.80})"
        self.shadow.update(call.sets)
        if call.op == "get_input" and self.get_input_sets:
            self.handed_out.add(call.names[0])
        self.check_result(call, result)

    def do(self, call: Call) -> Any:
        args = [a.obj if isinstance(a, Value) else a for a in call.args]
        kwargs = {k: v.obj for k, v in call.kwargs.items()}
        if call.op == "run":
            self.run()
            self.ran = True
            return None
        return getattr(self.m, call.op)(*args, **kwargs)

    def run(self) -> None:
        self.m.run()

    def check_result(self, call: Call, result: Any) -> None:
        if call.op == "get_input" and call.names[0] in self.shadow:
            np.testing.assert_array_equal(result.numpy(), self.shadow[call.names[0]])
        if call.op == "get_input_index":
            assert result == (NAMES.index(call.args[0]) if call.args[0] in NAMES else -1)
        if call.op == "run" and set(self.shadow) == set(NAMES):
            np.testing.assert_array_equal(self.m.get_output(0).numpy(), reference(self.shadow))

    def check_unchanged(self) -> None:
        for name, want in self.shadow.items():
            np.testing.assert_array_equal(self.m.get_input(name).numpy(), want,
                                          err_msg=f"input {name!r} changed by a rejected call")

    def finish(self) -> None:
        """A final valid run after everything: matches numpy."""
        values = {"a": np.arange(6, dtype="float32").reshape(2, 3) - 2,
                  "b": np.array([0.5, -1, 2], "float32"),
                  "c": np.array([[1, -2, 3], [0, 5, -1]], "int32")}
        for name, value in values.items():
            self.m.set_input(name, value)
        self.run()
        np.testing.assert_array_equal(self.m.get_output(0).numpy(), reference(values))


def run_sequence(driver: Driver, sequence: list[Call]) -> None:
    for call in sequence:
        driver.apply(call)
    driver.finish()


calls = st.lists(a_call(), min_size=1, max_size=12)
