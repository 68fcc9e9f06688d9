"""Plans whose kernels compute a size from data (NonMaxSuppression's kept boxes, NonZero's
count, Unique's): their segments run as one C call (vm/plan_native.py, csrc/dynamic_call.h),
the late checks between them, against onnxruntime (integers exact, float32 rtol 1e-6: the
kept values are gathered, not recomputed). Outputs of 0, 1 and many rows; sizes that grow and
shrink from call to call (earlier results unchanged); several signatures; two threads on one
model; a size that a later shape function rejects (ModelInputError, the model still usable);
a Python-only path when C cannot serve the plan."""
from __future__ import annotations

import os
import sys
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ember
from ember.api.model import ModelInputError
from ember.runtime import execution_pool
from ember.runtime.execution_pool import VMContext
from ember.runtime.vm.plan_native import DynamicCall

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _vm_testlib import requires_cc  # noqa: E402

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto as TP  # noqa: E402
from onnx import helper  # noqa: E402

from ember.relay.testing.exported_onnx import score_threshold, yolo_post_nms  # noqa: E402

pytestmark = requires_cc
BOXES = 64  # score_threshold's box count here


def python_calls(monkeypatch) -> list[int]:
    """A list that grows by one per call that takes the Python path (VMContext.call)."""
    seen: list[int] = []
    original = VMContext.call

    def counted(self, values):
        seen.append(1)
        return original(self, values)
    monkeypatch.setattr(VMContext, "call", counted)
    return seen


def check(got, want) -> None:
    got = got if isinstance(got, list) else [got]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, w.shape, g.dtype, w.dtype)
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=0)


def native_of(model):
    ctx = model._pool.acquire()
    model._pool.release(ctx)
    return ctx.native


@pytest.fixture(scope="module")
def yolo():
    onnx_model = yolo_post_nms()
    session = ort.InferenceSession(onnx_model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    return ember.compile(onnx_model), lambda preds: session.run(None, {"preds": preds})


@pytest.fixture(scope="module")
def thresholds():
    onnx_model = score_threshold(BOXES)
    session = ort.InferenceSession(onnx_model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    return ember.compile(onnx_model), \
        lambda boxes, scores: session.run(None, {"boxes": boxes, "scores": scores})


def preds(rng: np.random.Generator, anchors: int, kept: str) -> np.ndarray:
    """YOLO predictions whose NMS keeps no box, one, or many."""
    p = rng.random((1, 12, anchors), dtype=np.float32)
    p[:, :2] *= 100
    p[:, 2:4] *= 20
    if kept == "none":
        p[:, 4:] *= 0.25  # every score under the threshold (0.3)
    elif kept == "one":
        p[:, 4:] *= 0.25
        p[0, 6, anchors // 2] = 0.9
    return p


def test_yolo_post_processing_runs_in_one_c_call_at_any_size(yolo, monkeypatch) -> None:
    model, reference = yolo
    rng = np.random.default_rng(0)
    calls = [(anchors, kept) for anchors in (1000, 300, 1000, 1, 2000, 300)
             for kept in ("many", "none", "one", "many")]
    kept_results = []
    for anchors, kept in calls:
        p = preds(rng, anchors, kept)
        got, want = model(p), reference(p)
        check(got, want)
        kept_results.append((got, want))
    for got, want in kept_results:  # no later call changed an earlier result
        check(got, want)
    assert isinstance(native_of(model), DynamicCall)
    # Once the buffers hold the largest sizes, every call is C's (no Python path).
    seen = python_calls(monkeypatch)
    for anchors, kept in calls:
        p = preds(rng, anchors, kept)
        before = p.copy()
        check(model(p), reference(p))
        assert p.tobytes() == before.tobytes()  # read in place, never written
    assert seen == []
    assert native_of(model)._plan.call.num_sites == 1  # the input's site; no output's


def test_growing_and_shrinking_kept_counts_match_onnxruntime(thresholds, monkeypatch) -> None:
    model, reference = thresholds
    rng = np.random.default_rng(1)
    seen = python_calls(monkeypatch)
    results = []
    for kept in (0, 1, BOXES, 3, 0, 40, 2, BOXES, 1):
        boxes = rng.random((BOXES, 4), dtype=np.float32)
        scores = np.where(np.arange(BOXES) < kept, 0.75, 0.25).astype("float32")
        rng.shuffle(scores)
        got, want = model(boxes, scores), reference(boxes, scores)
        check(got, want)
        assert got[0].shape == (kept, 4)
        results.append((got, want))
    for got, want in results:
        check(got, want)
    assert isinstance(native_of(model), DynamicCall)
    # a size grows the buffers at most a logarithmic number of times
    assert len(seen) <= 4


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(0, BOXES), min_size=1, max_size=10), st.integers(0, 2**32 - 1))
def test_any_sequence_of_kept_counts_matches_numpy(thresholds, counts, seed) -> None:
    model, _ = thresholds
    rng = np.random.default_rng(seed)
    results = []
    for kept in counts:
        boxes = rng.random((BOXES, 4), dtype=np.float32)
        scores = np.where(rng.permutation(BOXES) < kept, 0.5 + rng.random(BOXES) / 2,
                          rng.random(BOXES) / 2).astype("float32")
        keep = np.nonzero(scores > 0.5)[0]
        want = [boxes[keep], scores[keep], keep.astype("int64")]
        check(model(boxes, scores), want)
        results.append((model(boxes, scores), want))
    for got, want in results:
        check(got, want)


def test_two_threads_share_a_model_with_different_data(yolo) -> None:
    model, reference = yolo
    rng = np.random.default_rng(2)
    work = [[(p, reference(p)) for p in (preds(rng, n, kept) for n in (500, 120, 800)
                                         for kept in ("many", "none", "one"))]
            for _ in range(2)]
    errors: list[BaseException] = []

    def loop(items) -> None:
        try:
            for _ in range(15):
                for p, want in items:
                    check(model(p), want)
        except BaseException as err:  # noqa: BLE001  (reported by the main thread)
            errors.append(err)

    threads = [threading.Thread(target=loop, args=(items,)) for items in work]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


def mask_reshape():
    """x[x > 0] indices reshaped to [3, -1]: a count from data that the reshape's shape
    function rejects unless 3 divides it."""
    vi = helper.make_tensor_value_info
    graph = helper.make_graph(
        [helper.make_node("Greater", ["x", "zero"], ["m"]),
         helper.make_node("NonZero", ["m"], ["nz"]),
         helper.make_node("Reshape", ["nz", "shape"], ["y"])],
        "mask_reshape", [vi("x", TP.FLOAT, [30])], [vi("y", TP.INT64, None)],
        [helper.make_tensor("zero", TP.FLOAT, [], [0.0]),
         helper.make_tensor("shape", TP.INT64, [2], [3, -1])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


def test_a_size_from_data_that_a_shape_function_rejects_raises_and_the_model_runs_on(
        monkeypatch) -> None:
    model = ember.compile(mask_reshape())
    positive = lambda n: np.where(np.arange(30) < n, 1.0, -1.0).astype("float32")  # noqa: E731
    for n in (6, 30, 0):
        np.testing.assert_array_equal(model(positive(n)),
                                      np.nonzero(positive(n) > 0)[0][None].reshape(3, -1))
    assert isinstance(native_of(model), DynamicCall)
    for _ in range(2):
        with pytest.raises(ModelInputError, match="reshape.*vm_mod_fused_reshape_shape_func"):
            model(positive(7))
        # the next call takes the Python path once (which makes C's call valid again)
        seen = python_calls(monkeypatch)
        for n in (9, 12):
            np.testing.assert_array_equal(model(positive(n)), np.arange(n).reshape(3, -1))
        assert seen == [1] and isinstance(native_of(model), DynamicCall)
        monkeypatch.undo()


def test_unique_and_mask_indexing_run_in_c() -> None:
    vi = helper.make_tensor_value_info
    graph = helper.make_graph(
        [helper.make_node("Unique", ["x"], ["u", "i", "inv", "c"], sorted=1),
         helper.make_node("Greater", ["f", "zero"], ["m"]),
         helper.make_node("NonZero", ["m"], ["nz"]),
         helper.make_node("Transpose", ["nz"], ["t"], perm=[1, 0]),
         helper.make_node("GatherND", ["f", "t"], ["picked"])],
        "data_sizes", [vi("x", TP.INT64, [40]), vi("f", TP.FLOAT, [4, 30])],
        [vi(n, TP.INT64, None) for n in ("u", "i", "inv", "c")] +
        [vi("picked", TP.FLOAT, None)], [helper.make_tensor("zero", TP.FLOAT, [], [0.0])])
    onnx_model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx_model.ir_version = 8
    model = ember.compile(onnx_model)
    session = ort.InferenceSession(onnx_model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(3)
    for distinct, shift in ((1, 0.5), (40, 1.5), (3, -1.0), (20, 0.0), (1, 2.0)):
        feeds = {"x": rng.integers(0, distinct, 40).astype("int64"),
                 "f": (rng.random((4, 30)) - shift).astype("float32")}
        check(model(**feeds), session.run(None, feeds))
        check(model(*feeds.values()), session.run(None, feeds))
    assert isinstance(native_of(model), DynamicCall)


def test_without_c_the_segments_run_in_python(monkeypatch) -> None:
    monkeypatch.setattr(execution_pool, "dynamic_call", lambda *args: None)
    onnx_model = score_threshold(BOXES)
    model = ember.compile(onnx_model)
    session = ort.InferenceSession(onnx_model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(4)
    for kept in (5, 0, BOXES, 1):
        boxes = rng.random((BOXES, 4), dtype=np.float32)
        scores = np.where(rng.permutation(BOXES) < kept, 0.75, 0.25).astype("float32")
        check(model(boxes, scores), session.run(None, {"boxes": boxes, "scores": scores}))
    assert native_of(model) is None


# main(s: int64[1], x: float32[?]) = x + x into a block sized from x's shape (the shape
# phase) as a tensor shaped by the *data* of s (copied next to that size: a later segment).
SIZED_EARLY_SHAPED_LATE = """
main(s, x):
    # param types = int64[1], float32[?]
    shape_of $2 $1
    load_consti $3 64
    alloc_storage $4 $3 64 int64 0
    load_consti $5 0
    alloc_tensor $6 $4 $5 [] int64
    invoke_packed PackedFunc[vm_nbytes_f32] (in: $2, out: $6)
    load_consti $7 8
    alloc_tensor $8 $4 $7 [1] int64
    invoke_packed PackedFunc[vm_copy] (in: $0, out: $8)
    alloc_storage $9 $6 64 float32 0
    alloc_tensor_reg $10 $9 $5 $8 float32
    invoke_packed PackedFunc[vm_add_f32] (in: $1, $1, out: $10)
    ret $10
"""


def test_a_tensor_shaped_from_data_fits_a_block_the_shape_phase_sized() -> None:
    from test_plan_arrays import contexts
    from test_static_plan import values

    from ember.runtime.vm import VMError

    ctx, interpreter = contexts(SIZED_EARLY_SHAPED_LATE, dtypes=("int64", "float32"))
    for n in (5, 3, 7, 3, 1):
        s, x = np.array([n], "int64"), np.arange(n, dtype="float32")
        assert ctx.call([s, x])[0].tobytes() == values(interpreter.run(s, x))[0].tobytes()
    plan = ctx.vm._plans[ctx.index]
    assert plan._shape_run is not None and len(plan._segments) == 2
    late = plan._segments[1][0].vector
    assert late is not None and late.fits[0][3] <= -2
    native = ctx.native
    assert isinstance(native, DynamicCall)
    for n in (4, 7, 2):
        s, x = np.array([n], "int64"), np.arange(n, dtype="float32")
        np.testing.assert_array_equal(native.run((s, x)), x + x)
    # a shape from data larger than the block: C's check refuses, the interpreter reports
    s, x = np.array([5], "int64"), np.arange(4, dtype="float32")
    assert native.run((s, x)) is None
    with pytest.raises(VMError):
        ctx.call([s, x])
    # smaller: the kernel refuses (x and the result differ in size), the interpreter reports
    s = np.array([3], "int64")
    assert native.run((s, x)) is None
    with pytest.raises(VMError, match="vm_add_f32"):
        ctx.call([s, x])
    s = np.array([4], "int64")
    np.testing.assert_array_equal(ctx.call([s, x])[0], x + x)
