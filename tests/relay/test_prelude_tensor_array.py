"""Tensor arrays of the Prelude (TVM's dynamic ``TensorArrayOps``): the definitions per dtype,
that they type-check and print/parse back, and each function run on the interpreter against
numpy, with one VM run of them all."""
from __future__ import annotations

import numpy as np
import pytest

from ember import relay
from ember.ir import assert_structural_equal
from ember.ir.parser import fromtext
from ember.relay.prelude import (MAX_RANK, TENSOR_ARRAY_DEFS, TENSOR_ARRAY_DTYPES, Prelude,
                                 TensorArrayOps)
from ember.runtime.errors import TVMError

_P = Prelude()
_OPS = TensorArrayOps(_P, "float32")
_OPS.register()
_EX = relay.create_executor("debug", mod=_P.mod)


def fn(name: str) -> relay.GlobalVar:
    return _OPS.get_global_var(name)


def tensor(arr) -> relay.Expr:
    """A tensor_float32_t value holding ``arr``."""
    arr = np.asarray(arr, "float32")
    return _OPS.get_ctor(f"tensor{arr.ndim}")(relay.const(arr))


def unstack(arr) -> relay.Expr:
    arr = np.asarray(arr, "float32")
    return relay.Call(fn(f"tensor_array_unstack_tensor{arr.ndim}"), [relay.const(arr)])


def run(expr):
    return _EX.evaluate(expr)


def value(v) -> tuple[str, np.ndarray | None]:
    """(constructor name, held array) of a tensor_float32_t value."""
    name = v.constructor.name_hint
    return name, (v.fields[0].numpy() if v.fields else None)


def ints(values) -> relay.Expr:
    return relay.const(np.array(values, "int32"))


# -- definitions ----------------------------------------------------------------------------------
def test_type_and_constructors():
    t = _P.get_type("tensor_t", "float32")
    ctors = _P.mod[t].constructors
    assert t.name_hint == "tensor_float32_t"
    assert [c.name_hint for c in ctors] == ["tensor_nil_float32"] + [
        f"tensor{r}_float32" for r in range(MAX_RANK + 1)]
    assert _P.get_ctor("tensor_t", "tensor3", "float32") is ctors[4]
    assert _P.get_ctor("tensor_float32_t", "tensor3", "float32") is ctors[4]  # TVM's spelling
    assert _P.get_tensor_ctor("tensor_nil", "float32") is ctors[0]
    assert _OPS.get_type("tensor_t") is t


def test_every_function_exists_and_registration_is_idempotent():
    names = {gv.name_hint for gv in _P.mod.get_global_vars()}
    assert {f"{n}_float32" for n in TENSOR_ARRAY_DEFS} <= names
    before = len(_P.mod.functions)
    TensorArrayOps(_P, "float32").register()
    assert len(_P.mod.functions) == before


@pytest.mark.parametrize("dtype", ["int32", "bool", "float16", "uint8"])
def test_other_dtypes_type_check(dtype):
    p = Prelude()
    gv = p.get_global_var("tensor_array_stack", dtype)  # registers the dtype on first use
    assert gv.name_hint == f"tensor_array_stack_{dtype}"
    typed = relay.transform.InferType()(p.mod)
    assert typed[gv.name_hint].checked_type.ret_type.name_hint == f"tensor_{dtype}_t"


def test_two_dtypes_live_in_one_module_and_round_trip():
    p = Prelude()
    p.get_global_var("tensor_array", "float32")
    p.get_global_var("tensor_array", "int64")
    again = fromtext(p.mod.astext())
    assert_structural_equal(again, p.mod)


def test_unknown_dtype_and_name():
    with pytest.raises(TVMError, match="no tensor arrays of dtype 'complex64'; the dtypes are "
                                       + ", ".join(TENSOR_ARRAY_DTYPES)):
        _P.get_global_var("tensor_array", "complex64")
    with pytest.raises(TVMError, match="no constructor of tensor_t named 'tensor9_float32'"):
        _P.get_ctor("tensor_t", "tensor9", "float32")


# -- running them ---------------------------------------------------------------------------------
def test_tensor_array_read_write():
    ta = relay.Call(fn("tensor_array"), [relay.const(3)])
    ta = relay.Call(fn("tensor_array_write"), [ta, relay.const(1), tensor([[1, 2]])])
    assert value(run(relay.Call(fn("tensor_array_read"), [ta, relay.const(1)])))[0] == \
        "tensor2_float32"
    assert value(run(relay.Call(fn("tensor_array_read"), [ta, relay.const(0)]))) == \
        ("tensor_nil_float32", None)


@pytest.mark.parametrize("rank", [1, 2, 3])
def test_unstack_then_stack_is_the_identity(rank):
    arr = np.arange(3 * 2 ** (rank - 1), dtype="float32").reshape((3,) + (2,) * (rank - 1))
    rows = run(relay.Call(fn("tensor_array_read"), [unstack(arr), relay.const(2)]))
    assert value(rows)[0] == f"tensor{rank - 1}_float32"
    np.testing.assert_array_equal(value(rows)[1], arr[2])
    name, back = value(run(relay.Call(fn("tensor_array_stack"), [unstack(arr)])))
    assert name == f"tensor{rank}_float32"
    np.testing.assert_array_equal(back, arr)


def test_concat_take_expand_dims_concatenate():
    arr = np.arange(8, dtype="float32").reshape(4, 2)
    np.testing.assert_array_equal(
        value(run(relay.Call(fn("tensor_array_concat"), [unstack(arr.reshape(2, 2, 2))])))[1], arr)
    take = relay.Call(fn("tensor_take"), [tensor(arr), relay.const(1), relay.const(3)])
    np.testing.assert_array_equal(value(run(take))[1], arr[1:3])
    name, out = value(run(relay.Call(fn("tensor_expand_dims"), [tensor(7.0)])))
    assert name == "tensor1_float32" and out.tolist() == [7.0]
    both = relay.Call(fn("tensor_concatenate"), [tensor(arr), tensor(arr[:1])])
    np.testing.assert_array_equal(value(run(both))[1], np.concatenate([arr, arr[:1]]))
    empty = relay.Call(fn("tensor_array_concat"), [relay.Call(fn("tensor_array"),
                                                              [relay.const(0)])])
    assert value(run(empty))[0] == "tensor_nil_float32"


def test_scatter_gather_split():
    arr = np.arange(6, dtype="float32").reshape(3, 2)
    ta = relay.Call(fn("tensor_array"), [relay.const(4)])
    scattered = relay.Call(fn("tensor_array_scatter"), [ta, ints([3, 0]), unstack(arr[:2])])
    gathered = relay.Call(fn("tensor_array_gather"), [scattered, ints([0, 3])])
    np.testing.assert_array_equal(value(run(gathered))[1], arr[[1, 0]])
    split = relay.Call(fn("tensor_array_split"), [ta, tensor(arr), ints([1, 2])])
    np.testing.assert_array_equal(
        value(run(relay.Call(fn("tensor_array_read"), [split, relay.const(1)])))[1], arr[1:])
    assert value(run(relay.Call(fn("tensor_array_read"), [split, relay.const(2)])))[0] == \
        "tensor_nil_float32"


def test_expand_dims_of_a_rank_6_tensor_has_no_clause():
    six = tensor(np.zeros((1,) * 6, "float32"))
    with pytest.raises(TVMError, match="match failed"):
        run(relay.Call(fn("tensor_expand_dims"), [six]))


def test_the_vm_runs_them_with_dynamic_shapes():
    x = relay.var("x", shape=(relay.Any(), relay.Any()))
    ta = relay.Call(fn("tensor_array_unstack_tensor2"), [x])
    t2 = _OPS.get_ctor("tensor2")
    split = relay.Call(fn("tensor_array_split"),
                       [relay.Call(fn("tensor_array"), [relay.const(2)]), t2(x), ints([1, 2])])
    outs = [relay.Call(fn("tensor_array_stack"), [ta]),
            relay.Call(fn("tensor_array_gather"), [ta, ints([2, 0])]),
            relay.Call(fn("tensor_array_read"), [split, relay.const(1)])]
    mod = _P.mod.copy()
    mod["main"] = relay.Function([x], relay.Tuple(outs))
    mod = relay.transform.RemoveUnusedFunctions()(mod)  # less to compile
    data = np.arange(6, dtype="float32").reshape(3, 2)
    got = relay.create_executor("vm", mod=mod, target="llvm").evaluate()(data)
    tag2 = _OPS.get_ctor("tensor2").tag
    for out, want in zip(got, [data, data[[2, 0]], data[1:]]):
        assert out.tag == tag2
        np.testing.assert_array_equal(out[0].numpy(), want)
