"""The one-C-call path of a model call (ember.runtime.model_call): it takes exactly the arrays
a model takes, leaves every other form of input to the checked Python path untouched, and
gives the same results."""
from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.api.model import ModelInputError
from ember.runtime.model_call import object_layout

TEXT = """#[version = "0.0.5"]
def @main(%x: Tensor[(2, 3), float32], %y: Tensor[(2, 3), float32]) {
  (nn.relu(%x), add(%x, %y))
}
"""


def reference(x: np.ndarray, y: np.ndarray) -> list[np.ndarray]:
    return [np.maximum(x, 0), x + y]


@pytest.fixture(scope="module", params=["graph", "aot"])
def model(request: pytest.FixtureRequest) -> ember.CompiledModel:
    return ember.compile(TEXT, executor=request.param)


def native_of(model: ember.CompiledModel):  # type: ignore[no-untyped-def]
    ctx = model._pool.acquire()
    model._pool.release(ctx)
    return ctx.native


def test_layout_holds_on_this_python() -> None:
    assert object_layout() is not None


def test_plain_arrays_take_the_native_path(model: ember.CompiledModel) -> None:
    native = native_of(model)
    assert native is not None
    rng = np.random.default_rng(0)
    x, y = (rng.standard_normal((2, 3)).astype("float32") for _ in range(2))
    outs = native.new_outputs()
    assert native.call((x, y), outs) == 0
    for got, want in zip(outs, reference(x, y)):
        np.testing.assert_array_equal(got, want)
    for got, want in zip(model(x, y), reference(x, y)):  # fresh arrays, exact
        np.testing.assert_array_equal(got, want)
    ran = native.run((x, y))  # both steps in one: new outputs, or None when declined
    assert ran is not None and ran[0] is not outs[0]
    for got, want in zip(ran, reference(x, y)):
        np.testing.assert_array_equal(got, want)
    assert native.run((x.astype("float64"), y)) is None


def _other_forms(x: np.ndarray) -> dict[str, object]:
    big = np.zeros((3, 6), "float32")
    big[::2, ::2][:2] = x  # a strided view of the same values
    raw = np.zeros(x.nbytes + 1, np.uint8)
    unaligned = np.frombuffer(raw.data, np.float32, count=6, offset=1).reshape(2, 3)
    unaligned[...] = x

    class Sub(np.ndarray):
        pass

    return {"list": x.tolist(), "view": big[::2, ::2][:2], "fortran": np.asfortranarray(x),
            "unaligned": unaligned, "subclass": x.view(Sub),
            "ndarray": ember.nd.array(x), "swapped": x.astype(">f4")}


@pytest.mark.parametrize("form", ["list", "view", "fortran", "unaligned", "subclass",
                                  "ndarray", "swapped"])
def test_other_forms_fall_back_and_agree(model: ember.CompiledModel, form: str) -> None:
    """C declines (returns 1, writes nothing); the Python path converts or refuses."""
    x = np.arange(-3, 3, dtype="float32").reshape(2, 3)
    y = np.full((2, 3), 0.5, "float32")
    value = _other_forms(x)[form]
    native = native_of(model)
    if not (form == "fortran" and value.flags.c_contiguous):  # type: ignore[union-attr]
        outs = [np.full((2, 3), 7, "float32"), np.full((2, 3), 7, "float32")]
        assert native.call((value, y), outs) == 1
        assert all((o == 7).all() for o in outs)
    try:
        got = model(value, y)
    except ModelInputError as err:  # a dtype the model does not take is named, not cast
        assert form == "swapped" and "'x'" in str(err)
        return
    for g, w in zip(got, reference(x, y)):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("args", [(), ("x",), ("x", "y", "y")])
def test_wrong_argument_count_is_named(model: ember.CompiledModel, args: tuple[str, ...]) -> None:
    arrays = {"x": np.ones((2, 3), "float32"), "y": np.ones((2, 3), "float32")}
    assert native_of(model).call(tuple(arrays[a] for a in args), native_of(model)
                                 .new_outputs()) == 1
    with pytest.raises(ModelInputError, match="input"):
        model(*(arrays[a] for a in args))
    np.testing.assert_array_equal(model(arrays["x"], arrays["y"])[1], 2)  # still usable


@pytest.mark.parametrize("shape,dtype", [((3, 2), "float32"), ((2, 3), "float64"),
                                         ((2, 3, 1), "float32"), ((6,), "float32")])
def test_wrong_shape_or_dtype_is_named(model: ember.CompiledModel, shape: tuple[int, ...],
                                       dtype: str) -> None:
    bad = np.ones(shape, dtype)
    with pytest.raises(ModelInputError, match="input 'x': expected float32\\[2, 3\\]"):
        model(bad, np.ones((2, 3), "float32"))


def test_named_arguments_take_the_checked_path(model: ember.CompiledModel) -> None:
    x, y = np.ones((2, 3), "float32"), np.full((2, 3), 2, "float32")
    np.testing.assert_array_equal(model(y=y, x=x)[1], 3)


DYNAMIC = """#[version = "0.0.5"]
def @main(%x: Tensor[(?, 3), float32], %y: Tensor[(?, 3), float32]) {
  (nn.relu(%x), add(%x, %y))
}
"""


def test_vm_model_takes_the_native_path_at_the_shape_that_ran_last() -> None:
    """A dynamic model on the VM: its one-C-call form (vm/plan_native.py) runs any shape whose
    buffers are large enough; a larger one is declined in C and runs (growing the buffers)
    through Python, after which the form reads the new buffers."""
    model = ember.compile(DYNAMIC, executor="vm")
    rng = np.random.default_rng(3)
    ran = []
    for rows in (2, 2, 5, 2, 40, 2, 2, 40, 1):
        x, y = (rng.standard_normal((rows, 3)).astype("float32") for _ in range(2))
        ctx = model._pool.acquire()
        model._pool.release(ctx)
        native = ctx.native
        if native is not None:
            outs = native.run((x, y))
            ran.append((rows, outs is not None))
            for got, want in zip(outs or reference(x, y), reference(x, y)):
                np.testing.assert_array_equal(got, want)
        for got, want in zip(model(x, y), reference(x, y)):
            np.testing.assert_array_equal(got, want)
    assert ctx.native is not None  # the VM path gave one
    # the first 40 needed larger buffers (declined); every shape after it ran in C
    assert ran[ran.index((40, False)) + 1:] == [(2, True), (2, True), (40, True), (1, True)]
