"""ManifestAlloc keeps every shape function's results for the whole scope, in an arena of
their own: a tensor of symbolic shape reads its shape from them as long as it lives (a VM plan
points the tensor's DLTensor shape there and runs all shape functions before the kernels), so
two of them never share bytes and no kernel writes where they are. A model with several
symbolic layers, and static intermediates after them, runs on its plan as one native call of
shape functions and one of kernels, never on the interpreter."""
from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.contrib import cc
from ember.runtime.vm.static_plan import StaticPlan

pytestmark = pytest.mark.skipif(cc.get_cc() is None, reason="no C compiler found")

THREE_LAYERS = """#[version = "0.0.5"]
def @main(%x: Tensor[(?, 12), float32], %w1: Tensor[(20, 12), float32],
          %w2: Tensor[(9, 20), float32], %w3: Tensor[(5, 9), float32]) {
  %0 = nn.relu(nn.dense(%x, %w1));
  %1 = nn.relu(nn.dense(%0, %w2));
  nn.softmax(nn.dense(%1, %w3))
}
"""


# the same layers, then a sum over the rows: the last dense and softmax have static shapes,
# their tensors live in the scope's arena next to nothing the shape functions write
POOLED = THREE_LAYERS.replace("nn.softmax(nn.dense(%1, %w3))",
                              "nn.softmax(nn.dense(sum(%1, axis=[0], keepdims=True), %w3))")


def _softmax(h: np.ndarray) -> np.ndarray:
    e = np.exp(h - h.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _ref(x: np.ndarray, w: dict[str, np.ndarray]) -> np.ndarray:
    return _softmax(np.maximum(np.maximum(x @ w["w1"].T, 0) @ w["w2"].T, 0) @ w["w3"].T)


def _pooled_ref(x: np.ndarray, w: dict[str, np.ndarray]) -> np.ndarray:
    h = np.maximum(np.maximum(x @ w["w1"].T, 0) @ w["w2"].T, 0)
    return _softmax(h.sum(0, keepdims=True) @ w["w3"].T)


@pytest.mark.parametrize("text, ref", [(THREE_LAYERS, _ref), (POOLED, _pooled_ref)],
                         ids=["symbolic", "static-after-symbolic"])
def test_a_model_of_several_symbolic_layers_runs_on_its_plan(text: str, ref) -> None:
    rng = np.random.default_rng(0)
    w = {"w1": rng.standard_normal((20, 12)), "w2": rng.standard_normal((9, 20)),
         "w3": rng.standard_normal((5, 9))}
    w = {k: v.astype("float32") for k, v in w.items()}
    model = ember.compile(text, executor="vm", params=w)
    context = model._pool.acquire()  # the one context every call below runs on
    model._pool.release(context)
    vm = context.vm
    interpreted = []
    real = vm._interpret
    vm._interpret = lambda *a: interpreted.append(a) or real(*a)
    for n in (3, 1, 17, 3):
        x = rng.standard_normal((n, 12)).astype("float32")
        np.testing.assert_allclose(model(x), ref(x, w), rtol=1e-5, atol=1e-5)
    assert model._pool.size == 1
    plan = vm._plans[vm._function_index("main")]
    assert isinstance(plan, StaticPlan), plan
    assert not interpreted, "a run fell back to the interpreter"
    assert plan._shape_run is not None and len(plan._segments) == 1


SHAPES = """#[version = "0.0.5"]
def @main(%x: Tensor[(?, 3), float32]) {
  (shape_of(%x, dtype="int64"), shape_of(%x, dtype="int32"), add(%x, 1f))
}
"""


def test_shape_of_is_read_from_the_argument_and_may_be_returned() -> None:
    # An int64 shape_of becomes vm.shape_of (no kernel reads x's bytes for it); returned, the
    # result is a fresh array per call; an int32 one stays a kernel.
    model = ember.compile(SHAPES, executor="vm")
    first = None
    for n in (4, 1, 4):
        x = np.full((n, 3), 2.0, "float32")
        shape64, shape32, plus = model(x)
        assert shape64.dtype == np.int64 and shape64.tolist() == [n, 3]
        assert shape32.dtype == np.int32 and shape32.tolist() == [n, 3]
        np.testing.assert_array_equal(plus, x + 1)
        if first is None:
            first = shape64
    assert first.tolist() == [4, 3]  # not overwritten by the later calls
