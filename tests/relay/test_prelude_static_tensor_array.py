"""Static tensor arrays (TVM's ``StaticTensorArrayOps``): names, registration, type checking,
print/parse, each function on the interpreter against numpy, and one VM run."""
from __future__ import annotations

import numpy as np
import pytest

from ember import relay
from ember.ir import assert_structural_equal
from ember.ir.parser import fromtext
from ember.relay.prelude import Prelude, StaticTensorArrayOps
from ember.relay.prelude.static_tensor_array import STATIC_DEFS, STATIC_DEFS_RANK_1, static_name
from ember.runtime.errors import TVMError

_P = Prelude()
M32 = StaticTensorArrayOps(_P, "float32", (3, 2))  # matrices
ROW = StaticTensorArrayOps(_P, "float32", (2,))  # their rows
PART = StaticTensorArrayOps(_P, "float32", (relay.Any(), 2))  # pieces of a matrix
for _ops in (M32, ROW, PART):
    _ops.register()
_EX = relay.create_executor("debug", mod=_P.mod)
DATA = np.arange(6, dtype="float32").reshape(3, 2)


def call(ops: StaticTensorArrayOps, name: str, *args) -> relay.Expr:
    return relay.Call(ops.get_global_var(name), list(args))


def const(value, dtype="float32") -> relay.Expr:
    return relay.const(np.asarray(value, dtype))


def held(value) -> np.ndarray:
    """The tensor in a tensor_constructor value."""
    assert value.constructor.name_hint.startswith("tensor_constructor_"), value.constructor
    return value.fields[0].numpy()


def rows() -> relay.Expr:
    return call(M32, "tensor_array_unstack", const(DATA))


# -- names and registration -----------------------------------------------------------------------
@pytest.mark.parametrize("shape, text", [((3, 2), "3_2"), ((relay.Any(), 2), "any_2"),
                                         ((), "scalar"), ((1, None, 4), "1_any_4")])
def test_names(shape, text):
    assert static_name("tensor_t", "int8", shape) == f"static_tensor_int8_{text}_t"
    assert static_name("tensor_array_read", "int8", shape) == f"tensor_array_read_int8_{text}"
    assert _P.get_name_static("tensor_nil", "int8", shape) == f"tensor_nil_int8_{text}"


def test_registration_adds_the_functions_and_result_types():
    names = {gv.name_hint for gv in _P.mod.get_global_vars()}
    assert {f"{n}_float32_3_2" for n in STATIC_DEFS + STATIC_DEFS_RANK_1} <= names
    for shape in ("3_2", "any_3_2", "any_2", "2"):
        assert f"static_tensor_float32_{shape}_t" in _P.mod
    nil, ctor = _P.mod[M32.get_type()].constructors
    assert (nil.name_hint, ctor.name_hint) == ("tensor_nil_float32_3_2",
                                               "tensor_constructor_float32_3_2")
    assert M32.get_ctor("tensor_constructor") is ctor
    assert _P.get_tensor_ctor_static("tensor_nil", "float32", (3, 2)) is nil
    before = len(_P.mod.functions)
    StaticTensorArrayOps(_P, "float32", (3, 2)).register()
    assert len(_P.mod.functions) == before


@pytest.mark.parametrize("dtype, shape", [("int32", ()), ("bool", (4,)), ("float16", (2, 3, 1)),
                                          ("int64", (relay.Any(), relay.Any()))])
def test_other_dtypes_and_shapes_type_check_and_round_trip(dtype, shape):
    p = Prelude()
    StaticTensorArrayOps(p, dtype, shape).register()
    if not shape:
        assert "tensor_take_int32_scalar" not in p.mod  # nothing to cut in a rank-0 array
    relay.transform.InferType()(p.mod)
    assert_structural_equal(fromtext(p.mod.astext()), p.mod)


@pytest.mark.parametrize("args, message", [
    (("complex64", (2,)), "no tensor arrays of dtype 'complex64'"),
    (("float32", (2, -1)), r"dimension 1 of shape \(2, -1\) must be a non-negative int or Any, "
                           "got -1"),
    (("float32", (2.5,)), "dimension 0 of shape .* got 2.5"),
    (("float32", 3), "shape must be a tuple of ints and Any, got int"),
])
def test_bad_arguments(args, message):
    with pytest.raises(TVMError, match=message):
        StaticTensorArrayOps(_P, *args)


@pytest.mark.parametrize("batch_dim", [-1, "1", True, 1.0])
def test_bad_batch_dim(batch_dim):
    with pytest.raises(TVMError, match="batch_dim must be None or a non-negative int"):
        StaticTensorArrayOps(_P, "float32", (2,), batch_dim=batch_dim)


def test_unregistered_lookups_are_errors():
    with pytest.raises(TVMError, match=r"no function named 'tensor_array_stack_float32_batch1_7'"
                                       r".*StaticTensorArrayOps\(p, 'float32', \(7,\), "
                                       r"batch_dim=1\).register"):
        _P.get_global_var_static("tensor_array_stack", "float32", (7,), batch_dim=1)
    with pytest.raises(TVMError, match=r"no function named 'tensor_array_float32_7'; add the "
                                       r"static tensor arrays of float32\[7\] with "
                                       r"StaticTensorArrayOps\(p, 'float32', \(7,\)\).register"):
        _P.get_global_var_static("tensor_array", "float32", (7,))


# -- running them ---------------------------------------------------------------------------------
def test_unstack_then_stack_gives_the_matrix_back():
    np.testing.assert_array_equal(held(_EX.evaluate(call(ROW, "tensor_array_stack", rows()))),
                                  DATA)
    second = _EX.evaluate(call(ROW, "tensor_get_data", call(ROW, "tensor_array_read", rows(),
                                                            relay.const(1))))
    np.testing.assert_array_equal(second.numpy(), DATA[1])


def test_gather_scatter_write():
    gathered = call(ROW, "tensor_array_gather", rows(), const([2, 0], "int32"))
    np.testing.assert_array_equal(held(_EX.evaluate(gathered)), DATA[[2, 0]])
    empty = call(ROW, "tensor_array", relay.const(3))
    # values[i] goes to slot indices[i]: slot 2 gets row 0, slot 0 gets row 1
    scattered = call(ROW, "tensor_array_scatter", empty, const([2, 0], "int32"), rows())
    for slot, row in ((2, 0), (0, 1)):
        back = _EX.evaluate(call(ROW, "tensor_array_read", scattered, relay.const(slot)))
        np.testing.assert_array_equal(held(back), DATA[row])
    one = ROW.get_ctor("tensor_constructor")(const([9, 9]))
    written = call(ROW, "tensor_array_write", rows(), relay.const(0), one)
    np.testing.assert_array_equal(held(_EX.evaluate(call(ROW, "tensor_array_stack", written)))[0],
                                  [9, 9])


def test_take_concatenate_expand_dims():
    matrix = M32.get_ctor("tensor_constructor")(const(DATA))
    np.testing.assert_array_equal(
        held(_EX.evaluate(call(M32, "tensor_take", matrix, relay.const(1), relay.const(3)))),
        DATA[1:])
    both = _EX.evaluate(call(M32, "tensor_concatenate", matrix, matrix))
    np.testing.assert_array_equal(held(both), np.concatenate([DATA, DATA]))
    np.testing.assert_array_equal(held(_EX.evaluate(call(M32, "tensor_expand_dims", matrix))),
                                  DATA[None])


def test_split_then_concat():
    matrix = M32.get_ctor("tensor_constructor")(const(DATA))
    pieces = call(M32, "tensor_array_split", call(PART, "tensor_array", relay.const(2)), matrix,
                  const([1, 2], "int32"))
    np.testing.assert_array_equal(
        held(_EX.evaluate(call(PART, "tensor_array_read", pieces, relay.const(1)))), DATA[1:])
    np.testing.assert_array_equal(held(_EX.evaluate(call(PART, "tensor_array_concat", pieces))),
                                  DATA)
    empty = _EX.evaluate(call(PART, "tensor_array_concat", call(PART, "tensor_array",
                                                                 relay.const(0))))
    assert empty.constructor.name_hint == "tensor_nil_float32_any_2"


def test_the_vm_runs_them():
    x = relay.var("x", shape=(3, 2))
    out = call(ROW, "tensor_get_data", call(ROW, "tensor_array_read",
                                            call(M32, "tensor_array_unstack", x), relay.const(2)))
    stacked = call(ROW, "tensor_array_stack", call(M32, "tensor_array_unstack", x))
    mod = _P.mod.copy()
    mod["main"] = relay.Function([x], relay.Tuple([out, stacked]))
    mod = relay.transform.RemoveUnusedFunctions()(mod)
    row, matrix = relay.create_executor("vm", mod=mod, target="llvm").evaluate()(DATA)
    np.testing.assert_array_equal(row.numpy(), DATA[2])
    np.testing.assert_array_equal(matrix[0].numpy(), DATA)


# -- batch_dim=1: an array known to hold one element ---------------------------------------------
def test_batch1_names_follow_tvm():
    assert static_name("tensor_array_stack", "float32", (2,), 1) == \
        "tensor_array_stack_float32_batch1_2"
    assert static_name("tensor_constructor", "float32", (2,), 1) == \
        "tensor_constructor_float32_2"  # types and constructors are shared
    assert static_name("tensor_t", "float32", (2,), 1) == "static_tensor_float32_2_t"
    assert static_name("tensor_array_stack", "float32", (2,), 2) == \
        "tensor_array_stack_float32_2"  # any other batch_dim is the default


def test_batch1_stack_gather_expand_dims_have_a_first_axis_of_one():
    p = Prelude()
    ops, default = (StaticTensorArrayOps(p, "float32", (2,), b) for b in (1, None))
    ops.register()
    default.register()
    assert "static_tensor_float32_1_2_t" in p.mod
    typed = relay.transform.InferType()(p.mod)
    for name in ("tensor_array_stack", "tensor_array_gather", "tensor_expand_dims"):
        ret = typed[ops.get_global_var(name)].checked_type.ret_type
        assert getattr(ret, "func", ret).name_hint == "static_tensor_float32_1_2_t", name
        ret = typed[default.get_global_var(name)].checked_type.ret_type
        assert getattr(ret, "func", ret).name_hint == "static_tensor_float32_any_2_t", name
    ex = relay.create_executor("debug", mod=p.mod)
    row = ops.get_ctor("tensor_constructor")(const([4, 5]))
    one = call(ops, "tensor_array_write", call(ops, "tensor_array", relay.const(1)),
               relay.const(0), row)
    np.testing.assert_array_equal(held(ex.evaluate(call(ops, "tensor_array_stack", one))),
                                  [[4, 5]])
    gathered = call(ops, "tensor_array_gather", one, const([0], "int32"))
    np.testing.assert_array_equal(held(ex.evaluate(gathered)), [[4, 5]])
    np.testing.assert_array_equal(held(ex.evaluate(call(ops, "tensor_expand_dims", row))),
                                  [[4, 5]])
    # TVM's batch-1 stack takes the first element alone
    two = call(ops, "tensor_array_write", call(ops, "tensor_array", relay.const(2)),
               relay.const(0), row)
    two = call(ops, "tensor_array_write", two, relay.const(1),
               ops.get_ctor("tensor_constructor")(const([6, 7])))
    np.testing.assert_array_equal(held(ex.evaluate(call(ops, "tensor_array_stack", two))),
                                  [[4, 5]])
