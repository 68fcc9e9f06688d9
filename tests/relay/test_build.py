"""relay.build / relay.optimize: the driver's choices and its errors."""
from __future__ import annotations

import numpy as np
import pytest

import ember as tvm
from ember import relay
from ember.relay.backend import Executor, Runtime
from ember.relay.build_module import _reconstruct_from_deprecated_options
from ember.target import Target


def add_relu(shape=(2, 3)):
    x, y = relay.var("x", shape=shape), relay.var("y", shape=shape)
    return tvm.IRModule.from_expr(relay.Function([x, y], relay.nn.relu(relay.add(x, y))))


# -- deprecated target options ----------------------------------------------------------------
def test_deprecated_options_map_to_executor_and_runtime():
    ex, rt = _reconstruct_from_deprecated_options(Target(
        "c -executor=aot -interface-api=c -unpacked-api -link-params -runtime=c --system-lib "
        "-workspace-byte-alignment=8 -constants-byte-alignment=32"))
    assert ex == Executor("aot", {"interface-api": "c", "unpacked-api": True, "link-params": True,
                                  "workspace-byte-alignment": 8, "constant-byte-alignment": 32})
    assert rt == Runtime("crt", {"system-lib": True})
    assert _reconstruct_from_deprecated_options(Target("llvm")) == (None, None)
    ex, rt = _reconstruct_from_deprecated_options(Target("llvm -link-params=0 -runtime=cpp"))
    assert ex is None and rt == Runtime("cpp")


# -- optimize -----------------------------------------------------------------------------------
def test_optimize_binds_params_and_fuses():
    mod = add_relu()
    with tvm.transform.PassContext(opt_level=3):
        opt, params = relay.optimize(mod, "llvm", params={"y": np.ones((2, 3), "float32")})
    main = opt["main"]
    assert [p.name_hint for p in main.params] == ["x"]
    assert list(params) == ["y"] and isinstance(params["y"], tvm.nd.NDArray)
    callee = main.body.op
    assert isinstance(callee, relay.Function) and callee.get_attr("Primitive") == 1


def test_optimize_accepts_a_function_and_opt_level_zero_fuses_nothing():
    x = relay.var("x", shape=(4,))
    func = relay.Function([x], relay.exp(relay.nn.relu(x)))
    with tvm.transform.PassContext(opt_level=0):
        opt, _ = relay.optimize(func)
    calls = [opt["main"].body, opt["main"].body.args[0]]
    assert all(c.op.get_attr("Primitive") == 1 for c in calls)  # one function per op


# -- errors -------------------------------------------------------------------------------------
@pytest.mark.parametrize("target", ["cuda", "vulkan", {"gpu": "opencl"}, "llvm"])
def test_non_cpu_targets_are_refused(target):
    host = "cuda" if target == "llvm" else None
    with pytest.raises(tvm.TVMError, match="is not supported; ember compiles for CPU targets"):
        relay.build(add_relu(), target=target, target_host=host)


def test_unknown_target_string_is_a_value_error():
    with pytest.raises(ValueError, match="unknown target kind 'llvmm'"):
        relay.build(add_relu(), target="llvmm")
    with pytest.raises(ValueError, match="unknown option -mpcu"):
        relay.build(add_relu(), target="llvm -mpcu=native")


def test_executor_must_be_an_executor_object():
    with pytest.raises(tvm.TVMError, match="executor must be a relay.backend.Executor, got str"):
        relay.build(add_relu(), "llvm", executor="graph")


def test_deprecated_executor_option_is_honoured():
    from ember.runtime.executor_factory import AotExecutorFactoryModule

    assert isinstance(relay.build(add_relu(), "c -executor=aot"), AotExecutorFactoryModule)


def test_bad_module_and_mod_name():
    with pytest.raises(tvm.TVMError, match="expected an IRModule or a relay.Function, got int"):
        relay.build(3)
    with pytest.raises(tvm.TVMError, match="the module has no main function"):
        relay.build(tvm.IRModule())
    with pytest.raises(tvm.TVMError, match="mod_name must be a non-empty str"):
        relay.build(add_relu(), "llvm", mod_name="")
    with pytest.raises(tvm.TVMError, match="runtime must be a relay.backend.Runtime"):
        relay.build(add_relu(), "llvm", runtime="crt")


def test_dynamic_shapes_ask_for_the_vm():
    x = relay.var("x", shape=(relay.Any(), 3))
    mod = tvm.IRModule.from_expr(relay.Function([x], relay.nn.relu(x)))
    with pytest.raises(tvm.TVMError, match="input %x has the dynamic type .*use the VM"):
        relay.build(mod, "llvm")


def test_control_flow_asks_for_the_vm():
    x = relay.var("x", shape=(3,))
    cond = relay.less(relay.sum(x), relay.const(0.0))
    mod = tvm.IRModule.from_expr(relay.Function([x], relay.If(cond, x, relay.exp(x))))
    with pytest.raises(tvm.TVMError, match="cannot run If nodes.*need the VM"):
        relay.build(mod, "llvm")


# -- building -----------------------------------------------------------------------------------
def test_build_runs_and_legacy_tuple_form():
    mod = add_relu()
    x, y = np.random.randn(2, 3).astype("float32"), np.random.randn(2, 3).astype("float32")
    factory = relay.build(mod, target="llvm", params={"y": y})
    m = factory["default"](tvm.cpu(0))
    m.set_input("x", x)
    m.run()
    np.testing.assert_allclose(m.get_output(0).numpy(), np.maximum(x + y, 0), rtol=1e-6)
    graph, lib, params = relay.build(mod, target="llvm", params={"y": y})
    assert isinstance(graph, str) and list(params) == ["p0"]
    from ember.contrib import graph_executor

    legacy = graph_executor.create(graph, lib, tvm.cpu(0))
    legacy.set_input(**params)
    legacy.set_input("x", x)
    legacy.run()
    np.testing.assert_allclose(legacy.get_output(0).numpy(), np.maximum(x + y, 0), rtol=1e-6)


def test_build_names_kernels_after_mod_name_and_uses_the_current_target():
    with Target("c"):
        factory = relay.build(add_relu(), mod_name="my_net")
    assert str(factory.target).startswith("c ")
    names = [n.func_name for n in factory.graph.nodes if not n.is_input]
    assert names and all(n.startswith("tvmgen_my_net_") for n in names)
    assert factory["my_net"](tvm.cpu(0)).get_num_outputs() == 1


def test_build_config_opt_level_reaches_the_passes():
    x = relay.var("x", shape=(4,))
    mod = tvm.IRModule.from_expr(relay.Function([x], relay.exp(relay.nn.relu(x))))
    with relay.build_config(opt_level=0):
        g0 = relay.build(mod, "llvm").graph
    with relay.build_config(opt_level=3):
        g3 = relay.build(mod, "llvm").graph
    assert sum(not n.is_input for n in g0.nodes) == 2
    assert sum(not n.is_input for n in g3.nodes) == 1


def test_create_executor_graph_kind():
    x = relay.var("x", shape=(3,))
    mod = tvm.IRModule.from_expr(relay.Function([x], relay.Tuple([relay.exp(x), relay.nn.relu(x)])))
    data = np.array([-1.0, 0.0, 2.0], "float32")
    out = relay.create_executor("graph", mod=mod, device=tvm.cpu(0), target="llvm").evaluate()(data)
    np.testing.assert_allclose(out[0].numpy(), np.exp(data), rtol=1e-6)
    np.testing.assert_allclose(out[1].numpy(), np.maximum(data, 0))
    one = relay.create_executor("graph", mod=mod).evaluate(relay.Function([x], relay.exp(x)))
    np.testing.assert_allclose(one(x=data).numpy(), np.exp(data), rtol=1e-6)


def test_op_without_lowering_raises_op_not_implemented():
    from ember.ir.op import OP_REGISTRY, Op, OpDef, OpPattern, register_op

    if "test.build_no_lowering" not in OP_REGISTRY:
        register_op(OpDef("test.build_no_lowering", 1, type_rel=lambda types, attrs: types[0],
                          pattern=OpPattern.ELEMWISE, reference=lambda x, attrs=None: x))
    x = relay.var("x", shape=(3,))
    call = relay.Call(Op.get("test.build_no_lowering"), [relay.exp(x)])
    with pytest.raises(tvm.error.OpNotImplemented, match="test.build_no_lowering"):
        relay.build(tvm.IRModule.from_expr(relay.Function([x], call)), "llvm")


def test_constants_inside_primitive_functions_become_params():
    x, p = relay.var("x", shape=(3,)), relay.var("p0", shape=(3,))
    table = relay.const(np.array([1, 2, 3], "float32"))
    f = relay.Function([p], relay.add(p, table)).with_attr("Primitive", 1)
    mod = tvm.IRModule.from_expr(relay.Function([x], relay.Tuple([f(x), f(relay.exp(x))])))
    factory = relay.build(mod, "llvm")
    m = factory["default"](tvm.cpu(0))
    m.set_input("x", np.zeros(3, "float32"))
    m.run()
    np.testing.assert_allclose(m.get_output(0).numpy(), [1, 2, 3])
    np.testing.assert_allclose(m.get_output(1).numpy(), [2, 3, 4])
    assert factory.graph.input_names == ["x", "p0"]  # one param, shared by both calls


def test_let_bound_programs_still_fuse():
    x, a, b = relay.var("x", shape=(3,)), relay.var("a"), relay.var("b")
    body = relay.Let(a, relay.exp(x), relay.Let(b, relay.add(a, x), relay.nn.relu(b)))
    with tvm.transform.PassContext(opt_level=3):
        factory = relay.build(tvm.IRModule.from_expr(relay.Function([x], body)), "llvm")
    kernels = [n.func_name for n in factory.graph.nodes if not n.is_input]
    assert kernels == ["tvmgen_default_fused_exp_add_nn_relu"]
    m = factory["default"](tvm.cpu(0))
    data = np.array([1, -2, 3], "float32")
    m.set_input("x", data)
    m.run()
    np.testing.assert_allclose(m.get_output(0).numpy(), np.maximum(np.exp(data) + data, 0),
                               rtol=1e-6)


@pytest.mark.parametrize("opt_level", [0, 3])
def test_bool_and_int_tensors(opt_level):
    x, y = relay.var("x", shape=(5,)), relay.var("y", shape=(5,), dtype="int32")
    b = relay.less(x, relay.const(0.0))
    out = relay.Tuple([b, relay.where(b, relay.cast(y, "float32"), x),
                       relay.add(y, relay.const(1, "int32"))])
    with tvm.transform.PassContext(opt_level=opt_level):
        factory = relay.build(tvm.IRModule.from_expr(relay.Function([x, y], out)), "llvm")
    m = factory["default"](tvm.cpu(0))
    xs, ys = np.array([-1, 2, -3, 4, 0], "float32"), np.arange(5, dtype="int32")
    m.set_input(x=xs, y=ys)
    m.run()
    np.testing.assert_array_equal(m.get_output(0).numpy(), xs < 0)
    np.testing.assert_array_equal(m.get_output(1).numpy(), np.where(xs < 0, ys, xs))
    np.testing.assert_array_equal(m.get_output(2).numpy(), ys + 1)
