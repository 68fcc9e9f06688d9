"""A VM model's call at any input shape as one C call (vm/plan_native.py,
csrc/dynamic_call.h): new signatures run without Python once the buffers are large enough,
results equal the interpreter's, and whatever C cannot decide (a buffer to grow, a failed
check, a rejected shape, inputs that contradict each other) goes back to the checked Python
path, which grows or raises the usual error."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ember
from ember.api.model import ModelInputError
from ember.runtime.execution_pool import VMContext
from ember.runtime.vm import VMError
from ember.runtime.vm import plan_native
from ember.runtime.vm.plan_native import COUNT, FIT, SIZE, DynamicCall, _program, dim_rules

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_plan_arrays import contexts  # noqa: E402
from test_dynamic_plan import GROWING  # noqa: E402
from test_static_plan import values  # noqa: E402
from _vm_testlib import DYNAMIC, requires_cc  # noqa: E402

pytestmark = requires_cc

TWO_OUTPUTS = """#[version = "0.0.5"]
def @main(%x: Tensor[(?, 3, ?), float32], %y: Tensor[(?, 3, ?), float32]) {
  (nn.relu(add(%x, %y)), multiply(%x, 2f))
}
"""


@pytest.fixture(scope="module")
def two_outputs():
    return ember.compile(TWO_OUTPUTS)


def python_calls(model, monkeypatch) -> list[int]:
    """A list that grows by one per call that takes the Python path (VMContext.call)."""
    seen: list[int] = []
    original = VMContext.call

    def counted(self, values):
        seen.append(1)
        return original(self, values)
    monkeypatch.setattr(VMContext, "call", counted)
    return seen


def context_of(model) -> VMContext:
    ctx = model._pool.acquire()
    model._pool.release(ctx)
    return ctx


def test_new_shapes_within_the_buffers_run_in_c(two_outputs, monkeypatch) -> None:
    rng = np.random.default_rng(0)
    big = rng.standard_normal((2, 9, 3, 11)).astype("float32")
    two_outputs(big[0], big[1])
    two_outputs(big[0], big[1])  # the plan's array calls made: C serves from now on
    assert isinstance(context_of(two_outputs).native, DynamicCall)
    python = python_calls(two_outputs, monkeypatch)
    for n, m in [(1, 1), (5, 7), (9, 11), (1, 10), (5, 7), (3, 2)]:
        x, y = rng.standard_normal((2, n, 3, m)).astype("float32")
        relu, twice = two_outputs(x, y)
        np.testing.assert_array_equal(relu, np.maximum(x + y, 0))
        np.testing.assert_array_equal(twice, x * 2)
    assert python == []


def _check_two_outputs(model, rng, n: int, m: int) -> None:
    x, y = rng.standard_normal((2, n, 3, m)).astype("float32")
    relu, twice = model(x, y)
    np.testing.assert_array_equal(relu, np.maximum(x + y, 0))
    np.testing.assert_array_equal(twice, x * 2)


def _native_after_a_big_call(model) -> DynamicCall:
    big = np.ones((9, 3, 11), "float32")
    model(big, big)
    model(big, big)
    native = context_of(model).native
    assert isinstance(native, DynamicCall)
    return native


def test_a_kept_signature_restores_its_shape_phase(monkeypatch) -> None:
    model = ember.compile(TWO_OUTPUTS)
    native = _native_after_a_big_call(model)
    python = python_calls(model, monkeypatch)
    rng = np.random.default_rng(1)
    for n, m in [(1, 1), (5, 7), (1, 1), (5, 7), (2, 3), (1, 1)]:
        _check_two_outputs(model, rng, n, m)
    # kept once each (9 x 11 ran in Python): the calls at a kept shape restored it
    assert (native._plan.kept_count, native._plan.kept_next) == (3, 3)
    assert python == []


def test_kept_signatures_are_bounded_oldest_first(monkeypatch) -> None:
    model = ember.compile(TWO_OUTPUTS)
    native = _native_after_a_big_call(model)
    native.keep(2)
    rng = np.random.default_rng(2)
    for n, m in [(1, 1), (5, 7), (2, 3), (1, 1)]:  # (2, 3) replaces (1, 1), which comes back
        _check_two_outputs(model, rng, n, m)
    assert (native._plan.kept_count, native._plan.kept_next) == (2, 0)
    assert native._keep["kept"][0][:3].tolist() == [2, 3, 3]  # (the dims of the first kept)
    native.keep(0)  # none: every shape other than the last runs its shape phase again
    for n, m in [(1, 1), (5, 7), (1, 1)]:
        _check_two_outputs(model, rng, n, m)
    assert native._plan.kept_count == 0


def test_kept_signatures_are_dropped_when_the_buffers_grow(monkeypatch) -> None:
    model = ember.compile(TWO_OUTPUTS)
    native = _native_after_a_big_call(model)
    rng = np.random.default_rng(3)
    for n, m in [(1, 1), (5, 7)]:
        _check_two_outputs(model, rng, n, m)
    assert native._plan.kept_count == 2
    python = python_calls(model, monkeypatch)
    _check_two_outputs(model, rng, 30, 40)  # grows in Python: C's records were for the old
    assert len(python) == 1 and context_of(model).native._plan.kept_count == 0
    for n, m in [(1, 1), (29, 40), (5, 7), (1, 1), (30, 40)]:
        _check_two_outputs(model, rng, n, m)
    assert len(python) == 1


@settings(max_examples=25, deadline=None)
@given(keep=st.integers(0, 3),
       shapes=st.lists(st.tuples(st.integers(1, 9), st.integers(1, 11)), min_size=1,
                       max_size=12))
def test_alternating_shapes_with_kept_signatures_match_numpy(two_outputs, keep, shapes) -> None:
    native = _native_after_a_big_call(two_outputs)
    native.keep(keep)
    rng = np.random.default_rng(len(shapes))
    try:
        for n, m in shapes:
            _check_two_outputs(two_outputs, rng, n, m)
        assert native._plan.kept_count <= keep
    finally:
        native.keep(plan_native.KEPT_SIGNATURES)


def test_results_are_fresh_arrays_per_call(two_outputs) -> None:
    x = np.ones((4, 3, 2), "float32")
    two_outputs(x, x)
    first = two_outputs(x, x)
    kept = [a.copy() for a in first]
    two_outputs(x * 3, x)
    two_outputs(np.ones((2, 3, 5), "float32"), np.ones((2, 3, 5), "float32"))
    assert all(a.tobytes() == b.tobytes() for a, b in zip(first, kept))


def test_a_larger_shape_grows_in_python_then_runs_in_c(two_outputs, monkeypatch) -> None:
    x = np.ones((2, 3, 2), "float32")
    two_outputs(x, x)
    two_outputs(x, x)
    python = python_calls(two_outputs, monkeypatch)
    big = np.full((40, 3, 33), 2, "float32")
    np.testing.assert_array_equal(two_outputs(big, big)[1], big * 2)
    assert len(python) == 1  # C declined: the buffers grew
    small = np.full((39, 3, 30), 3, "float32")
    np.testing.assert_array_equal(two_outputs(small, small)[0], small * 2)
    np.testing.assert_array_equal(two_outputs(big, big)[1], big * 2)
    assert len(python) == 1


def test_shapes_that_a_shape_function_rejects_raise_model_input_error(two_outputs) -> None:
    x = np.ones((6, 3, 4), "float32")
    two_outputs(x, x)
    two_outputs(x, x)
    with pytest.raises(ModelInputError, match="cannot run on these inputs"):
        two_outputs(x, np.ones((5, 3, 4), "float32"))
    with pytest.raises(ModelInputError, match="x.*y|y.*x"):
        two_outputs(np.ones((2, 3, 3), "float32"), np.ones((2, 3, 4), "float32"))
    np.testing.assert_array_equal(two_outputs(x, x)[1], x * 2)


def test_a_declared_extent_is_checked_in_c(two_outputs) -> None:
    x = np.ones((2, 3, 2), "float32")
    two_outputs(x, x)
    two_outputs(x, x)
    native = context_of(two_outputs).native
    wrong = np.ones((2, 4, 2), "float32")
    assert native.run((wrong, wrong)) is None  # declined, nothing run
    with pytest.raises(ModelInputError, match="x"):
        two_outputs(wrong, wrong)
    # other kinds of argument: declined, the checked path converts or refuses them
    assert native.run((x.astype("float64"), x)) is None
    assert native.run((x,)) is None
    assert native.run((x[:, :, :1], x[:, :, :1])) is None  # a view, not C-contiguous
    np.testing.assert_array_equal(two_outputs(x.tolist(), x)[1], x * 2)


def test_shape_functions_are_direct_calls_on_the_arena(two_outputs) -> None:
    x = np.ones((2, 3, 2), "float32")
    two_outputs(x, x)
    two_outputs(x, x)
    native = context_of(two_outputs).native
    direct, shape_calls = native._keep["direct"], native.plan._shape_cplan
    arena = native.plan._arena_i64
    lo, hi, at = arena.ctypes.data, arena.ctypes.data + arena.nbytes, 0
    for _ in range(shape_calls._count):  # "fn n p_1..p_n": every pointer in the arena
        n = int(direct[at + 1])
        assert 1 <= n <= 16 and all(lo <= p < hi for p in direct[at + 2:at + 2 + n])
        at += 2 + n
    assert at == len(direct)


def test_shape_calls_outside_the_arena_stay_packed(two_outputs) -> None:
    x = np.ones((2, 3, 2), "float32")
    two_outputs(x, x)
    two_outputs(x, x)
    shape_calls = context_of(two_outputs).native.plan._shape_cplan
    assert plan_native._direct_calls(shape_calls, np.zeros(4, np.int64)) is None


def _split_model(pieces: int) -> str:
    """A ``?`` batch split into ``pieces`` outputs: its shape function takes 1 + 2 * pieces
    arguments (the input's shape, and per output its shape and byte size)."""
    outs = ", ".join(f"nn.softmax(%0.{k})" for k in range(pieces))
    return f"""#[version = "0.0.5"]
def @main(%x: Tensor[(?, {2 * pieces}), float32]) {{
  %0 = split(%x, indices_or_sections={pieces}, axis=1);
  ({outs})
}}
"""


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _direct_arities(native: DynamicCall, direct: np.ndarray | None = None) -> list[int]:
    """Per entry of the direct-call table (``native``'s, or ``direct`` of its shape calls):
    its number of pointers, -1 for a packed call."""
    direct, at, arities = native._keep["direct"] if direct is None else direct, 0, []
    for _ in range(native.plan._shape_cplan._count):
        arities.append(int(direct[at + 1]))
        at += 3 if arities[-1] == -1 else 2 + arities[-1]
    assert at == len(direct)
    return arities


def _table_slice_model() -> bytes:
    """ONNX: y = x + table[:seq] with seq = Shape(x)[1] (as torch exports a position table
    sliced to the sequence): the shape phase has a ``take`` of the shape, a kernel that is no
    shape function, among the shape functions."""
    from onnx import TensorProto, helper, numpy_helper

    table = np.arange(64, dtype="float32").reshape(16, 4) / 10
    nodes = [helper.make_node("Shape", ["x"], ["shape"]),
             helper.make_node("Gather", ["shape", "one"], ["seq"], axis=0),
             helper.make_node("Slice", ["table", "zero", "seq", "zero"], ["rows"]),
             helper.make_node("Add", ["x", "rows"], ["sum"]),
             helper.make_node("Relu", ["sum"], ["y"])]
    inits = [numpy_helper.from_array(table, "table"),
             numpy_helper.from_array(np.array([1], "int64"), "one"),
             numpy_helper.from_array(np.array([0], "int64"), "zero")]
    graph = helper.make_graph(
        nodes, "table_slice", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                             [1, "seq", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, "seq", 4])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_a_kernel_that_is_no_shape_function_stays_packed_and_the_rest_direct(
        monkeypatch) -> None:
    model = ember.compile(_table_slice_model())
    table = np.arange(64, dtype="float32").reshape(16, 4) / 10
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 16, 4)).astype("float32")  # the buffers at their largest
    model(x)
    model(x)
    native = context_of(model).native
    assert isinstance(native, DynamicCall)
    names = [f.name for f in native.plan._shape_cplan._funcs]
    arities = _direct_arities(native)
    # the take of the shape stays packed; the slice's shape function (reading the slice's
    # begin and strides, constants of the plan) and add+relu's are direct
    packed = [name for name, n in zip(names, arities) if n == -1]
    assert packed == [name for name in names if not name.endswith("_shape_func")] != [], names
    # without the constants' ranges, the slice's shape function would be packed too
    arena_only = plan_native._direct_calls(native.plan._shape_cplan, native.plan._arena_i64)
    assert _direct_arities(native, arena_only).count(-1) == len(packed) + 1
    seen = python_calls(model, monkeypatch)
    for seq in (1, 7, 15, 3, 9):  # new signatures, one C call each with the mixed table
        x = rng.standard_normal((1, seq, 4)).astype("float32")
        np.testing.assert_allclose(model(x), np.maximum(x + table[:seq], 0), rtol=1e-6)
    assert not seen
    monkeypatch.setattr(plan_native, "_packed_entries", lambda lib: False)
    arena = native.plan._arena_i64  # a library that predates packed entries: all packed
    assert plan_native._direct_calls(native.plan._shape_cplan, arena) is None


@pytest.mark.parametrize("pieces, direct", [(3, True), (8, False)])
def test_shape_functions_of_many_outputs_are_direct_calls_up_to_the_library_limit(
        pieces, direct) -> None:
    """A split into 3 (a shape function of 7 arguments, as GPT-2's fused QKV split) is called
    directly; one of 17 arguments (past EMBER_DIRECT_MAX_ARGS) through its packed entry, the
    softmaxes' still directly. Both compute the same shapes at every batch."""
    model = ember.compile(_split_model(pieces))
    rng = np.random.default_rng(3)
    for n in (2, 2, 5, 1, 3):
        x = rng.standard_normal((n, 2 * pieces)).astype("float32")
        got = model(x)
        for k in range(pieces):
            np.testing.assert_allclose(got[k], _softmax(x[:, 2 * k:2 * k + 2]), rtol=1e-5)
    native = context_of(model).native
    assert isinstance(native, DynamicCall)
    arities = _direct_arities(native)
    assert (1 + 2 * pieces in arities) is direct
    assert (-1 in arities) is not direct
    assert arities.count(3) == pieces  # each softmax's: its input's shape, its outputs'
    assert plan_native.direct_max_args(native.plan._shape_cplan.lib) == 16


def test_a_library_that_predates_the_limit_keeps_seven_arguments_packed(monkeypatch) -> None:
    class Old:  # a library built before it said how many arguments its direct calls take
        pass
    assert plan_native.direct_max_args(Old()) == 6
    model = ember.compile(_split_model(3))
    x = np.ones((2, 6), "float32")
    model(x)
    model(x)
    shape_calls = context_of(model).native.plan._shape_cplan
    arena = context_of(model).native.plan._arena_i64
    assert plan_native._direct_calls(shape_calls, arena) is not None
    monkeypatch.setattr(plan_native, "direct_max_args", lambda lib: 6)
    table = plan_native._direct_calls(shape_calls, arena)  # the split's 7: a packed entry
    assert table is not None and list(table[:3]) == [0, -1, 0]
    monkeypatch.setattr(plan_native, "_packed_entries", lambda lib: False)
    assert plan_native._direct_calls(shape_calls, arena) is None


def test_a_library_with_another_plan_layout_gets_no_dynamic_call(monkeypatch) -> None:
    class Old:  # a library built before its plan said its size
        pass
    assert plan_native._plan_size(Old()) == -1
    monkeypatch.setattr(plan_native, "_plan_size", lambda lib: -1)
    model = ember.compile(TWO_OUTPUTS)
    rng = np.random.default_rng(1)
    for n in (4, 4, 2, 7):
        x, y = rng.standard_normal((2, n, 3, 5)).astype("float32")
        np.testing.assert_array_equal(model(x, y)[0], np.maximum(x + y, 0))
    assert not isinstance(context_of(model).native, DynamicCall)


def test_dimensions_of_one_name_must_agree() -> None:
    ctx, _ = contexts(TWO_INPUT_ADD, dtypes=("float32", "float32"))
    ctx.patterns = [("n",), ("n",)]
    x = np.arange(5, dtype="float32")
    ctx.call([x, x])
    ctx.call([x, x])
    assert isinstance(ctx.native, DynamicCall)
    assert ctx.native.run((x[:3].copy(), x[:3].copy())).tolist() == [0, 2, 4]
    assert ctx.native.run((x[:3].copy(), x[:4].copy())) is None  # n = 3 and n = 4


def test_dim_rules() -> None:
    ctx, _ = contexts(TWO_INPUT_ADD, dtypes=("float32", "float32"))
    x = np.ones(4, "float32")
    ctx.call([x, x])
    plan = ctx.vm._plans[ctx.index]
    assert dim_rules(plan, None) == [-1, -1]
    assert dim_rules(plan, [("n",), ("n",)]) == [-1, -2]
    assert dim_rules(plan, [(None,), ("n",)]) == [-1, -1]
    assert dim_rules(plan, [(4,), ("n",)]) == [4, -1]  # the model declares 4
    assert dim_rules(plan, [("n",), (4,)]) == [-1, 4]
    assert dim_rules(plan, [("n", 2), ("n",)]) is None  # a rank that is not the argument's


# main(x: float32[?], y: float32[?]) = x + y (the kernel refuses different lengths)
TWO_INPUT_ADD = """
main(x, y):
    # param types = float32[?], float32[?]
    shape_of $2 $0
    load_consti $3 8
    alloc_storage $4 $3 64 int64 0
    load_consti $5 0
    alloc_tensor $6 $4 $5 [] int64
    invoke_packed PackedFunc[vm_nbytes_f32] (in: $2, out: $6)
    alloc_storage $7 $6 64 float32 0
    alloc_tensor_reg $8 $7 $5 $2 float32
    invoke_packed PackedFunc[vm_add_f32] (in: $0, $1, out: $8)
    ret $8
"""


def test_the_check_program_refuses_what_the_python_checks_refuse() -> None:
    ctx, interpreter = contexts(DYNAMIC, (np.array([2, 3], "int64"),))
    x = np.arange(6, dtype="float32")
    ctx.call([x])
    ctx.call([x])
    plan = ctx.vm._plans[ctx.index]
    vector = plan._early.vector
    program = _program(vector)
    assert program.count(SIZE) >= len(vector.blocks) and COUNT in program
    assert program[:4 * len(vector.blocks):4] == [SIZE] * len(vector.blocks)
    assert FIT in program or not vector.fits
    native = ctx.native
    assert native.run((x,)).tolist() == [[0, 2, 4], [6, 8, 10]]
    # 4 elements fit the buffers, but the reshape to [2, 3] needs 6: the COUNT refuses
    assert native.run((x[:4].copy(),)) is None
    with pytest.raises(VMError, match=r"cannot reshape tensor float32\[4\] to \[2, 3\]"):
        ctx.call([x[:4].copy()])
    assert native.run is not None and ctx.call([x])[0].tolist() == \
        values(interpreter.run(x))[0].tolist()


def test_growing_results_match_the_interpreter_at_every_length() -> None:
    ctx, interpreter = contexts(GROWING)
    rng = np.random.default_rng(3)
    for n in (9, 9, 1, 0, 5, 9, 2, 17, 3):
        x = rng.standard_normal(n).astype("float32")
        want = values(interpreter.run(x))[0]
        native = ctx.native
        got = native.run((x,)) if native is not None else None
        if got is None:
            got = ctx.call([x])
        got = got[0] if isinstance(got, list) else got  # ctx.call gives a list
        assert got.shape == want.shape and got.tobytes() == want.tobytes()


DENSE = """#[version = "0.0.5"]
def @main(%x: Tensor[(?, 4), float32], %w: Tensor[(?, 4), float32]) {
  nn.dense(%x, %w)
}
"""


def test_a_huge_size_is_a_memory_error_naming_the_bytes() -> None:
    model = ember.compile(DENSE)
    a = np.ones((3, 4), "float32")
    model(a, a)
    model(a, a)
    assert isinstance(context_of(model).native, DynamicCall)
    huge = np.ones((1_000_000, 4), "float32")  # a (10**6, 10**6) result: 4 TB
    with pytest.raises(VMError, match="4000000000000 bytes requested"):
        model(huge, huge)
    np.testing.assert_array_equal(model(a[:2], a), np.full((2, 3), 4, "float32"))


@settings(max_examples=20, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 12), st.integers(1, 9)), min_size=1, max_size=6))
def test_any_sequence_of_shapes_equals_numpy(two_outputs, shapes) -> None:
    rng = np.random.default_rng(len(shapes))
    for n, m in shapes:
        x, y = rng.standard_normal((2, n, 3, m)).astype("float32")
        relu, twice = two_outputs(x, y)
        assert relu.shape == twice.shape == (n, 3, m)
        np.testing.assert_array_equal(relu, np.maximum(x + y, 0))
        np.testing.assert_array_equal(twice, x * 2)


def test_named_dimensions_are_checked_in_c_even_where_kernels_would_broadcast(tmp_path) -> None:
    """An ONNX model whose inputs share ``batch`` and ``seq``: once C serves its calls, a call
    that gives them different sizes is still refused (add would broadcast the 1)."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    vi = [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["batch", "seq"]) for n in "abc"]
    graph = helper.make_graph([helper.make_node("Add", ["a", "b"], ["c"])], "g", vi[:2], vi[2:])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]),
              tmp_path / "add.onnx")
    model = ember.compile(tmp_path / "add.onnx")
    ones = lambda *shape: np.ones(shape, "float32")  # noqa: E731
    for shape in [(4, 5), (4, 5), (2, 3)]:
        np.testing.assert_array_equal(model(ones(*shape), ones(*shape)), 2 * ones(*shape))
    native = context_of(model).native
    assert isinstance(native, DynamicCall)
    assert native.run((ones(2, 3), ones(1, 3))) is None  # declined: batch 2 and 1
    with pytest.raises(ModelInputError, match="share dimension 'batch'"):
        model(ones(2, 3), ones(1, 3))
    with pytest.raises(ModelInputError, match="share dimension 'seq'"):
        model(ones(2, 3), ones(2, 1))
    np.testing.assert_array_equal(model(ones(3, 2), ones(3, 2)), 2 * ones(3, 2))


def test_a_signature_is_keyed_by_the_one_input_with_free_dimensions(tmp_path) -> None:
    """A state model's inputs: x (batch, samples) and h (1, batch, 4), whose batch is x's. A
    repeated signature is told by x's shape alone (no tuple of every shape per call); a new
    x shape, or an h that contradicts it, still reaches C's checks and the checked path."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("ReduceMean", ["x"], ["m"], axes=[1], keepdims=0),
         helper.make_node("Relu", ["h"], ["hn"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "samples"]),
         helper.make_tensor_value_info("h", TensorProto.FLOAT, [1, "batch", 4])],
        [helper.make_tensor_value_info("m", TensorProto.FLOAT, ["batch"]),
         helper.make_tensor_value_info("hn", TensorProto.FLOAT, [1, "batch", 4])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]),
              tmp_path / "state.onnx")
    model = ember.compile(tmp_path / "state.onnx")
    rng = np.random.default_rng(3)
    big = rng.standard_normal((3, 50)).astype("float32")
    h = rng.standard_normal((1, 3, 4)).astype("float32")
    model(big, h)
    model(big, h)
    native = context_of(model).native
    assert isinstance(native, DynamicCall) and native.lead == 0
    for b, s in [(2, 9), (2, 9), (3, 50), (1, 7), (1, 7), (3, 50)]:
        x, hb = big[:b, :s].copy(), h[:, :b].copy()
        m, hn = model(x, hb)
        np.testing.assert_allclose(m, x.mean(axis=1), rtol=1e-6, atol=1e-6)
        np.testing.assert_array_equal(hn, np.maximum(hb, 0))
    assert native.retries <= 1  # the first new shape, before the guess has learnt
    assert native.run((big[:2, :9].copy(), h[:, :1].copy())) is None  # batch 2 and 1
    with pytest.raises(ModelInputError, match="share dimension 'batch'"):
        model(big[:2, :9].copy(), h[:, :1].copy())


# -- output shapes predicted for new signatures (one C call, not two) ---------------------------
def test_output_shapes_follow_symbolic_input_dimensions_first() -> None:
    guess = plan_native.OutputShapes([0, 2], dynamic=[0])
    assert guess.predict((5, 10)) is None  # nothing learnt yet
    guess.learn((1, 10), (1, 10))  # (batch 1 equals the fixed 10's neighbour, not the 10)
    assert guess.predict((7, 10)) == [(7, 10)]


def test_output_shapes_drop_rules_that_a_signature_breaks() -> None:
    guess = plan_native.OutputShapes([0, 1], dynamic=[0])
    guess.learn((2, 2), (2,))  # equal to dim 0, to dim 1 and to the constant 2
    assert guess.predict((3, 2)) == [(3,)]
    guess.learn((3, 2), (6,))  # a product: no rule is left
    assert guess.candidates == [(None, [])] and guess.predict((4, 2)) is None


def test_output_shapes_split_per_output_and_keep_constants() -> None:
    guess = plan_native.OutputShapes([0, 2, 3], dynamic=[0, 2])
    guess.learn((4, 3, 5), (4, 7, 5))
    guess.learn((2, 3, 9), (2, 7, 9))
    assert guess.predict((6, 3, 1)) == [(6, 7), (1,)]


SEQUENCE = """#[version = "0.0.5"]
def @main(%x: Tensor[(?, ?, 8), float32]) {
  nn.relu(%x)
}
"""
FLATTEN = """#[version = "0.0.5"]
def @main(%x: Tensor[(?, 2), float32]) {
  nn.relu(reshape(%x, newshape=[-1]))
}
"""


def test_a_new_signature_is_one_c_call_when_outputs_follow_inputs(monkeypatch) -> None:
    model = ember.compile(SEQUENCE)
    rng = np.random.default_rng(1)
    big = rng.standard_normal((6, 40, 8)).astype("float32")
    model(big)
    model(big)
    native = context_of(model).native
    assert isinstance(native, DynamicCall)
    python = python_calls(model, monkeypatch)
    model(big[:1, :3])  # learns: output (b, s, 8) of input (b, s, 8)
    before = native.retries
    for b, s in [(2, 9), (1, 37), (5, 1), (3, 17), (2, 9)]:
        x = big[:b, :s].copy()
        np.testing.assert_array_equal(model(x), np.maximum(x, 0))
    assert native.retries == before and python == []


def test_outputs_that_follow_no_rule_are_made_again_and_stay_right(monkeypatch) -> None:
    model = ember.compile(FLATTEN)
    x = np.arange(-20, 20, dtype="float32").reshape(20, 2)
    model(x)
    model(x)
    native = context_of(model).native
    assert isinstance(native, DynamicCall)
    python = python_calls(model, monkeypatch)
    # n = 1 first: its output (2,) looks like "the input's 2", a wrong guess for n = 3
    for n in (1, 3, 1, 7, 20, 2):
        np.testing.assert_array_equal(model(x[:n].copy()), np.maximum(x[:n].reshape(-1), 0))
    # every new n made twice; n = 1 again (not the last shape) takes the shape C gave for it
    assert native.retries == 5 and python == []


def test_outputs_shapes_met_before_are_kept_within_a_bound(monkeypatch) -> None:
    model = ember.compile(FLATTEN)
    x = np.arange(-20, 20, dtype="float32").reshape(20, 2)
    model(x)
    model(x)
    native = context_of(model).native
    assert isinstance(native, DynamicCall)
    python = python_calls(model, monkeypatch)
    alternating = (1, 3, 1, 3, 20, 1)
    for n in alternating:  # each shape other than the last: C's outputs' shapes are kept
        np.testing.assert_array_equal(model(x[:n].copy()), np.maximum(x[:n].reshape(-1), 0))
    assert native.retries == 3 and python == []  # once per n (the first 20 ran in Python)
    monkeypatch.setattr(plan_native, "KNOWN_SHAPES", 1)  # a new shape forgets the others
    for n in (5, 6, 5, 6, 1):
        np.testing.assert_array_equal(model(x[:n].copy()), np.maximum(x[:n].reshape(-1), 0))
    assert native.retries == 3 + 5 and python == []


def test_output_shapes_stop_learning_once_a_dimension_follows_no_rule() -> None:
    guess = plan_native.OutputShapes([0, 1], dynamic=[0])
    guess.learn((4,), (8,))
    guess.learn((3,), (6,))  # twice the input: neither a constant nor an input dimension
    assert guess.getters is None
    guess.learn((8,), (8,))  # no rule comes back, whatever a later signature shows
    assert guess.candidates == [(None, [])] and guess.predict((8,)) is None


def test_output_shapes_guess_nothing_for_inputs_of_another_rank() -> None:
    guess = plan_native.OutputShapes([0, 2], dynamic=[0, 1])
    guess.learn((2, 5), (2, 5))
    assert guess.predict((3, 4)) == [(3, 4)]
    assert guess.predict((3, 4, 1)) is None  # (C refuses the rank; no guess is made for it)
    assert guess.single((3, 4)) == (3, 4) and guess.single((3, 4, 1)) is None


def test_the_single_output_guess_is_predict_and_goes_with_the_rules() -> None:
    # (the one-input one-output call guesses through ``single``, without predict's lists)
    guess = plan_native.OutputShapes([0, 2], dynamic=[0])
    assert guess.single is None  # nothing learnt yet
    guess.learn((1, 1, 28, 28), (1, 10))
    for dims in [(3, 1, 28, 28), (1, 1, 28, 28), (64, 1, 28, 28)]:
        assert [guess.single(dims)] == guess.predict(dims) == [(dims[0], 10)]
    guess.learn((3, 1, 28, 28), (6, 10))  # no rule left: no guess at all
    assert guess.single is None and guess.getters is None
    several = plan_native.OutputShapes([0, 1, 2], dynamic=[0])
    several.learn((4, 2), (4, 2))
    assert several.single is None and several.predict((5, 2)) == [(5,), (2,)]
