"""``tvm.lower`` returns an IRModule holding the PrimFunc, and ``tvm.build`` takes it (TVM's
driver API as Relay-era scripts call it)."""
import numpy as np
import pytest

import ember as tvm
from ember import relay, te
from ember.contrib import cc
from ember.runtime.errors import TVMError

needs_cc = pytest.mark.skipif(cc.get_cc() is None, reason="no C compiler found")


def _double(n=8):
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 2.0, name="B")
    return te.create_schedule(B.op), [A, B]


def test_lower_returns_a_module_under_the_given_name():
    s, args = _double()
    mod = tvm.lower(s, args, name="f")
    assert isinstance(mod, tvm.IRModule)
    assert [gv.name_hint for gv in mod.get_global_vars()] == ["f"]
    assert isinstance(mod["f"], tvm.tir.PrimFunc) and mod["f"].name == "f"
    assert "B[i] = (A[i] * 2.0f)" in str(mod) and mod.script() == str(mod)
    assert isinstance(tvm.lower(s, args)["main"], tvm.tir.PrimFunc)  # the default name
    assert isinstance(tvm.tir.lower(s, args, name="g")["g"], tvm.tir.PrimFunc)


def test_lower_takes_a_prim_func_or_a_module():
    s, args = _double()
    func = te.lower(s, args, "inner")
    mod = tvm.lower(func, name="renamed")
    assert mod["renamed"].name == "renamed" and "inner" not in mod
    again = tvm.lower(mod)
    assert tvm.ir.structural_equal(again, mod)
    assert tvm.IRModule.from_expr(func)["main"] is func
    assert tvm.IRModule({"k": func})["k"] is func


def test_lower_bad_input_names_what_it_got():
    s, args = _double()
    with pytest.raises(TVMError, match="lower f: a schedule needs the argument tensors"):
        tvm.lower(s, name="f")
    with pytest.raises(TVMError, match="expected a te.Schedule, a tir.PrimFunc or an "
                                       "IRModule, got Tensor"):
        tvm.lower(args[1], args)  # the tensor instead of its schedule
    with pytest.raises(TypeError, match="expected a relay.Function or a tir.PrimFunc for "
                                        "'x', got str"):
        tvm.IRModule({"x": "def @x() { 0 }"})


@needs_cc
@pytest.mark.parametrize("target", ["llvm", "c"])
def test_build_takes_the_lowered_module(target):
    s, args = _double()
    lib = tvm.build(tvm.lower(s, args, name="twice"), target=target)
    a = tvm.nd.array(np.arange(8, dtype="float32"))
    b = tvm.nd.empty((8,))
    lib["twice"](a, b)
    np.testing.assert_allclose(b.numpy(), np.arange(8) * 2.0)
    lib(a, tvm.nd.empty((8,)))  # a one-function module is callable directly
    sched_lib = tvm.build(s, args, "llvm", name="twice_s")  # and a schedule still builds
    c = tvm.nd.empty((8,))
    sched_lib["twice_s"](a, c)
    np.testing.assert_allclose(c.numpy(), b.numpy())


def test_build_refuses_relay_and_empty_modules():
    x = relay.var("x", shape=(2,))
    with pytest.raises(TVMError, match=r"holds Relay functions \(main\); compile a Relay "
                                       "module with relay.build"):
        tvm.build(tvm.IRModule.from_expr(relay.add(x, x)), target="llvm")
    with pytest.raises(TVMError, match="the IRModule has no functions"):
        tvm.build(tvm.IRModule(), target="llvm")
    with pytest.raises(TVMError, match="expected a te.Schedule .* got str"):
        tvm.build("s", [], target="llvm")


def test_relay_passes_skip_prim_funcs():
    s, args = _double()
    x = relay.var("x", shape=(2,), dtype="float32")
    mod = tvm.IRModule.from_expr(relay.add(x, relay.const(np.ones(2, "float32"))))
    mod["f"] = te.lower(s, args, "f")
    typed = relay.transform.InferType()(mod)
    assert typed["f"] is mod["f"] and typed["main"].checked_type is not None
    seq = tvm.transform.Sequential([relay.transform.FoldConstant(),
                                    relay.transform.DeadCodeElimination()])
    with tvm.transform.PassContext(opt_level=3, config={"ember.verify": True}):
        out = seq(typed)
    assert out["f"] is mod["f"]
    only_prims = tvm.lower(s, args, name="g")
    assert relay.transform.InferType()(only_prims)["g"] is only_prims["g"]
    assert "B[i] = (A[i] * 2.0f)" in out.astext() and "def @main" in out.astext()


def test_tir_passes_take_the_module_and_keep_relay_functions():
    s, args = _double(16)
    mod = tvm.lower(s, args, name="f")
    x = relay.var("x", shape=(2,))
    mod["main"] = relay.Function([x], x)
    renamed = tvm.tir.transform.Apply(lambda f: f.with_attr("note", 1))(mod)
    assert renamed["f"].attrs["note"] == 1 and renamed["main"] is mod["main"]
    assert tvm.tir.transform.VectorizeLoop()(mod) is mod
    seq = tvm.transform.Sequential([tvm.tir.transform.Simplify(), relay.transform.InferType()])
    out = seq(mod)
    assert isinstance(out["f"], tvm.tir.PrimFunc) and out["main"].checked_type is not None
