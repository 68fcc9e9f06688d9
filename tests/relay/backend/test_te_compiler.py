"""The TE compiler: kernel names, caching, fused groups vs the interpreter, symbolic shapes,
constants, tuple outputs, lower_module, and errors."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import ember
from ember import relay
from ember.ir.op import OP_REGISTRY, OpDef, register_op
from ember.ir.types import Any as AnyDim
from ember.ir.types import ShapeVar
from ember.relay.backend import name_transforms as nt
from ember.relay.backend.te_compiler import TECompiler, lower_function, lower_module
from ember.relay.backend.utils import mangle_module_name
from ember.runtime.errors import OpNotImplemented, TVMError

sys.path.insert(0, str(Path(__file__).parents[1] / "op"))
from _lowering_util import build, need_cc


def prim(params, body, **attrs):
    f = relay.Function(params, body).with_attr("Primitive", 1)
    for k, v in attrs.items():
        f = f.with_attr(k, v)
    return f


def run_kernel(compiler, lowered, *arrays, out_shapes=None):
    mod = build([lowered], compiler)
    shapes = out_shapes or [o.shape for o in lowered.outputs]
    outs = [ember.nd.empty(s, o.dtype) for s, o in zip(shapes, lowered.outputs)]
    mod[lowered.name](*[ember.nd.array(a) for a in arrays], *lowered.constants, *outs)
    return [o.numpy() for o in outs]


def interpret(func, *arrays):
    """The reference interpreter's result of calling ``func`` (Primitive attr dropped)."""
    plain = relay.Function(func.params, func.body)
    mod = ember.IRModule.from_expr(plain)
    out = relay.create_executor("debug", mod=mod).evaluate()(*arrays)
    if isinstance(out, (list, tuple)) or hasattr(out, "fields"):
        return [o.numpy() for o in out]
    return [out.numpy()]


# ---------------------------------------------------------------- names
def conv_add_relu():
    x, w, b = (relay.var("p0", shape=(1, 3, 7, 7)), relay.var("p1", shape=(4, 3, 3, 3)),
               relay.var("p2", shape=(4, 1, 1)))
    return prim([x, w, b], relay.nn.relu(relay.add(relay.nn.conv2d(x, w, padding=(1, 1)), b)))


def test_names_join_the_ops_in_order():
    x = relay.var("p0", shape=(2, 5))
    y = relay.var("p1", shape=(2, 5), dtype="int32")
    c = TECompiler()
    assert c.lower(conv_add_relu()).name == "tvmgen_default_fused_nn_conv2d_add_nn_relu"
    assert c.lower(prim([x], relay.add(relay.nn.softmax(x), x))).name == \
        "tvmgen_default_fused_nn_softmax_add"
    cma = relay.add(relay.multiply(relay.cast(y, "float32"), x), x)
    assert c.lower(prim([x, y], cma)).name == "tvmgen_default_fused_cast_multiply_add"


def test_module_name_is_mangled_and_sanitised():
    x = relay.var("p0", shape=(3,))
    assert lower_function(prim([x], relay.exp(x)), "my_mod").name == "tvmgen_my_mod_fused_exp"
    assert lower_function(prim([x], relay.exp(x)), "my-mod.v2").name == \
        "tvmgen_my_mod_v2_fused_exp"
    assert mangle_module_name("default") == "tvmgen_default"
    assert mangle_module_name("") == "tvmgen"


def test_clashing_names_get_suffixes_and_identical_functions_share_a_kernel():
    c = TECompiler()
    a, b = relay.var("p0", shape=(3,)), relay.var("p0", shape=(4,))
    first = c.lower(prim([a], relay.exp(a)))
    f1 = prim([a], relay.exp(a))
    same = c.lower(f1)
    assert same is first  # structurally equal: cached
    other = c.lower(prim([b], relay.exp(b)))
    d = relay.var("p0", shape=(5,))
    third = c.lower(prim([d], relay.exp(d)))
    assert {first.name, other.name} == {"tvmgen_default_fused_exp", "tvmgen_default_fused_exp_1"}
    assert third.name.startswith("tvmgen_default_fused_exp_")
    names = [lf.name for lf in c.items()]
    assert len(names) == len(set(names))


def test_cache_key_is_structure_and_target():
    c = TECompiler()
    x = relay.var("p0", shape=(3,))
    f = prim([x], relay.sqrt(x))
    y = relay.var("p0", shape=(3,))
    g = prim([y], relay.sqrt(y))  # separately built, structurally equal
    assert c.lower(f) is c.lower(g)
    assert c.lower(f, "llvm") is not c.lower(f, "c")
    assert len(c.items()) == 2


def test_long_names_are_cut_with_a_hash():
    x = relay.var("p0", shape=(3,))
    body = x
    for _ in range(20):
        body = relay.nn.relu(relay.exp(body))
    name = lower_function(prim([x], body)).name
    assert name.startswith("tvmgen_default_fused_exp_nn_relu_exp_nn_relu")
    assert len(name) <= len("tvmgen_default_") + 80 + 17


def test_custom_mangling_for_the_vm():
    c = TECompiler(mangle=lambda name, mod_name: f"vm_mod_{name}")
    x = relay.var("p0", shape=(3,))
    assert c.lower(prim([x], relay.add(x, x))).name == "vm_mod_fused_add"


def test_name_transforms():
    assert nt.to_c_function_style("TVM_woof") == "TVMWoof"
    assert nt.to_c_function_style("TVMGen_woof_woof") == "TVMGenWoofWoof"
    assert nt.to_c_variable_style("TVM_Woof") == "tvm_woof"
    assert nt.to_c_constant_style("TVM_Woof") == "TVM_WOOF"
    assert nt.prefix_name(["woof", "moo"]) == "TVM_woof_moo"
    assert nt.prefix_generated_name("Woof") == "TVMGen_Woof"
    assert nt.sanitize_name("+_+ ") == "____"
    assert nt.sanitize_name("woof:1") == "woof_1"
    for fn, msg in [(nt.to_c_function_style, "Function not TVM prefixed"),
                    (nt.to_c_variable_style, "Variable not TVM prefixed"),
                    (nt.to_c_constant_style, "Constant not TVM prefixed")]:
        with pytest.raises(TVMError, match=msg):
            fn("Cake_Bakery")
    with pytest.raises(TVMError, match="Name is empty"):
        nt.sanitize_name("")
    with pytest.raises(TVMError, match="Name segments empty"):
        nt.prefix_name([])
    with pytest.raises(TVMError, match="Name segment is empty"):
        nt.prefix_name([""])


def test_names_that_clash_after_sanitising_raise():
    assert nt.check_unique_c_names(["a", "b.c"]) == {"a": "a", "b.c": "b_c"}
    with pytest.raises(TVMError, match="input name clash: 'input:1' and 'input-1'"):
        nt.check_unique_c_names(["input:1", "input-1"], "input")


# ---------------------------------------------------------------- the C
def test_c_carries_the_relay_source_and_is_deterministic():
    a = lower_function(conv_add_relu())
    b = lower_function(conv_add_relu())
    assert a.c_source == b.c_source
    assert "/* from: fn (%p0: Tensor[(1, 3, 7, 7), float32]" in a.c_source
    assert "nn.conv2d(%p0, %p1" in a.c_source
    assert f"TVM_DLL int32_t {a.name}(TVMValue* args" in a.c_source


def test_kernel_checks_its_arguments():
    need_cc()
    c = TECompiler()
    x = relay.var("p0", shape=(2, 3))
    lf = c.lower(prim([x], relay.exp(x)))
    mod = build([lf], c)
    with pytest.raises(TVMError, match=rf"{lf.name}: argument 0 \(p0\): expected shape \(2, 3\)"):
        mod[lf.name](ember.nd.empty((3, 2)), ember.nd.empty((2, 3)))
    with pytest.raises(TVMError, match="expected 2 arguments, got 1"):
        mod[lf.name](ember.nd.empty((2, 3)))


# ---------------------------------------------------------------- fused groups vs interpreter
def _check_vs_interpreter(func, arrays, tol=1e-5):
    need_cc()
    c = TECompiler()
    lf = c.lower(func)
    got = run_kernel(c, lf, *arrays)
    want = interpret(func, *arrays)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol)
    return lf


def _rand(*shape, dtype="float32"):
    return np.random.default_rng(sum(shape)).uniform(-2, 2, size=shape).astype(dtype)


def test_conv2d_add_relu_group():
    arrays = [_rand(1, 3, 7, 7), _rand(4, 3, 3, 3), _rand(4, 1, 1)]
    _check_vs_interpreter(conv_add_relu(), arrays, 1e-4)


def test_dense_bias_add_group():
    x, w, b = relay.var("p0", shape=(5, 9)), relay.var("p1", shape=(7, 9)), relay.var("p2",
                                                                                     shape=(7,))
    f = prim([x, w, b], relay.add(relay.nn.dense(x, w), b))
    _check_vs_interpreter(f, [_rand(5, 9), _rand(7, 9), _rand(7)], 1e-4)


def test_reshape_chain_group():
    x = relay.var("p0", shape=(2, 3, 4))
    body = relay.transpose(relay.reshape(relay.reshape(x, (6, 4)), (4, -1)), (1, 0))
    _check_vs_interpreter(prim([x], relay.expand_dims(body, 0)), [_rand(2, 3, 4)])


def test_tuple_outputs_and_tuple_get_item():
    x = relay.var("p0", shape=(4, 6))
    parts = relay.split(x, 3, axis=1)
    body = relay.Tuple([relay.add(parts[0], parts[2]), relay.exp(parts[1]), parts[1]])
    lf = _check_vs_interpreter(prim([x], body), [_rand(4, 6)])
    assert [o.shape for o in lf.outputs] == [(4, 2)] * 3


def test_batch_norm_group_uses_the_first_field():
    data, g, b, m, v = (relay.var(f"p{i}", shape=s) for i, s in
                        enumerate([(2, 3, 4), (3,), (3,), (3,), (3,)]))
    bn = relay.nn.batch_norm(data, g, b, m, v)
    f = prim([data, g, b, m, v], relay.nn.relu(bn[0]))
    _check_vs_interpreter(f, [_rand(2, 3, 4), _rand(3), _rand(3), _rand(3),
                              np.abs(_rand(3)) + 0.5])


def test_concatenate_of_a_tuple_parameter():
    t = relay.var("p0", relay.TupleType([relay.TensorType((2, 3)), relay.TensorType((2, 5))]))
    f = prim([t], relay.concatenate([relay.TupleGetItem(t, 0), relay.TupleGetItem(t, 1)], 1))
    need_cc()
    c = TECompiler()
    lf = c.lower(f)
    assert [i.shape for i in lf.inputs] == [(2, 3), (2, 5)]
    a, b = _rand(2, 3), _rand(2, 5)
    np.testing.assert_array_equal(run_kernel(c, lf, a, b)[0], np.concatenate([a, b], 1))


def test_let_bound_body_and_an_output_that_is_a_parameter():
    x = relay.var("p0", shape=(3,))
    v = relay.var("v")
    body = relay.Let(v, relay.exp(x), relay.Tuple([relay.add(v, v), x]))
    _check_vs_interpreter(prim([x], body), [_rand(3)])


def test_scalar_constants_are_inlined_and_tensor_constants_passed():
    x = relay.var("p0", shape=(2, 3))
    table = np.arange(6, dtype="float32").reshape(2, 3)
    f = prim([x], relay.multiply(relay.add(x, relay.const(1.5)), relay.const(table)))
    lf = _check_vs_interpreter(f, [_rand(2, 3)])
    assert len(lf.constants) == 1 and len(lf.inputs) == 1
    assert "1.5f" in lf.c_source


# ---------------------------------------------------------------- symbolic shapes
def test_dense_bias_relu_with_any_batch_runs_at_several_sizes():
    need_cc()
    x = relay.var("p0", shape=(AnyDim(), 16))
    w, b = relay.var("p1", shape=(10, 16)), relay.var("p2", shape=(10,))
    f = prim([x, w, b], relay.nn.relu(relay.nn.bias_add(relay.nn.dense(x, w), b)))
    c = TECompiler()
    lf = c.lower(f)
    assert lf.is_dynamic and lf.inputs[0].shape[1] == 16
    mod = build([lf], c)
    wv, bv = _rand(10, 16), _rand(10)
    for n in (1, 3, 8, 17):
        xv = _rand(n, 16)
        out = ember.nd.empty((n, 10))
        mod[lf.name](ember.nd.array(xv), ember.nd.array(wv), ember.nd.array(bv), out)
        np.testing.assert_allclose(out.numpy(), np.maximum(xv @ wv.T + bv, 0), rtol=1e-4,
                                   atol=1e-4)


def test_a_shape_var_is_one_size_everywhere():
    need_cc()
    n = ShapeVar("n")
    x, y = relay.var("p0", shape=(n, 3)), relay.var("p1", shape=(n, 3))
    c = TECompiler()
    lf = c.lower(prim([x, y], relay.subtract(x, y)))
    assert lf.inputs[0].shape == lf.inputs[1].shape == ("n", 3)
    mod = build([lf], c)
    a, b = _rand(4, 3), _rand(4, 3)
    out = ember.nd.empty((4, 3))
    mod[lf.name](ember.nd.array(a), ember.nd.array(b), out)
    np.testing.assert_allclose(out.numpy(), a - b)
    with pytest.raises(TVMError, match=r"argument 1 \(p1\): expected shape \(4, 3\), got \(5, 3\)"):
        mod[lf.name](ember.nd.array(a), ember.nd.array(_rand(5, 3)), out)


# ---------------------------------------------------------------- lower_module
def _two_group_module():
    x = relay.var("x", shape=(3, 4))
    p = relay.var("p0", shape=(3, 4))
    q = relay.var("p0", shape=(3, 4))
    f1, f2 = prim([p], relay.exp(p)), prim([q], relay.exp(q))  # identical groups
    r = relay.var("p0", shape=(3, 4))
    gv = relay.GlobalVar("fused_relu")
    mod = ember.IRModule({"main": relay.Function([x], gv(relay.add(f1(x), f2(x)))),
                          gv: prim([r], relay.nn.relu(r))})
    return mod, f1, f2, gv


def test_lower_module_finds_inline_and_global_primitive_functions():
    mod, _, _, _ = _two_group_module()
    # Keys are the nodes of the typed module (InferType makes typed copies, never edits).
    mod = relay.transform.InferType()(mod)
    gv = mod.get_global_var("fused_relu")
    add = mod["main"].body.args[0]
    f1, f2 = add.args[0].op, add.args[1].op
    funcs, lib = lower_module(mod, "c", "m1")
    assert funcs[f1] is funcs[f2] and funcs[f1].name == "tvmgen_m1_fused_exp"
    assert funcs[gv].name == "tvmgen_m1_fused_nn_relu"
    assert "tvmgen_m1_fused_exp" in funcs
    src = lib.get_source()
    assert src.count("int32_t tvmgen_m1_fused_exp(TVMValue*") == 1
    assert "tvmgen_m1_fused_add" not in src  # add is in main, not in a primitive function


def test_lower_module_after_fuse_ops():
    need_cc()
    x = relay.var("x", shape=(1, 3, 8, 8))
    w = relay.var("w", shape=(4, 3, 3, 3))
    y = relay.nn.relu(relay.nn.conv2d(x, w, padding=(1, 1)))
    y = relay.nn.softmax(relay.nn.batch_flatten(relay.nn.max_pool2d(y, (2, 2), (2, 2))))
    mod = ember.IRModule.from_expr(relay.Function([x, w], y))
    mod = relay.transform.InferType()(mod)
    mod = relay.transform.FuseOps(fuse_opt_level=2)(mod)
    funcs, lib = lower_module(mod)
    names = sorted({lf.name for lf in funcs.values()})
    assert "tvmgen_default_fused_nn_conv2d_nn_relu" in names
    for lf in {id(v): v for v in funcs.values()}.values():
        hint = lf.source_func.get_attr("func_name_hint")
        if hint is not None:
            assert lf.name.startswith(f"tvmgen_default_{hint}")
        lib[lf.name]  # every kernel is in the compiled library


def _small_cnn():
    x = relay.var("x", shape=(2, 3, 9, 9))
    w1, b1 = relay.var("w1", shape=(8, 3, 3, 3)), relay.var("b1", shape=(8,))
    w2 = relay.var("w2", shape=(8, 1, 3, 3))
    wd, bd = relay.var("wd", shape=(10, 32)), relay.var("bd", shape=(10,))
    y = relay.nn.relu(relay.nn.bias_add(relay.nn.conv2d(x, w1, padding=(1, 1)), b1))
    z = relay.nn.conv2d(y, w2, padding=(1, 1), groups=8)  # depthwise
    y = relay.add(y, relay.sigmoid(z))  # residual join
    y = relay.nn.max_pool2d(y, (2, 2), (2, 2))
    y = relay.nn.batch_flatten(relay.mean(y, axis=[2], keepdims=True))
    y = relay.nn.softmax(relay.add(relay.nn.dense(y, wd), bd))
    return relay.Function([x, w1, b1, w2, wd, bd], y)


def test_every_fused_group_of_a_small_cnn_matches_the_interpreter():
    need_cc()
    mod = relay.transform.InferType()(ember.IRModule.from_expr(_small_cnn()))
    mod = relay.transform.FuseOps(fuse_opt_level=2)(mod)
    compiler = TECompiler()
    funcs, _ = lower_module(mod, compiler=compiler)
    kernels = list({id(v): v for v in funcs.values()}.values())
    assert len(kernels) >= 4
    lib = build(kernels, compiler)
    rng = np.random.default_rng(0)
    for lf in kernels:
        arrays = [rng.uniform(-1, 1, size=i.shape).astype(i.dtype) for i in lf.inputs]
        outs = [ember.nd.empty(o.shape, o.dtype) for o in lf.outputs]
        lib[lf.name](*[ember.nd.array(a) for a in arrays], *outs)
        want = interpret(lf.source_func, *arrays)
        for got, w in zip(outs, want):
            np.testing.assert_allclose(got.numpy(), w, rtol=1e-4, atol=1e-4, err_msg=lf.name)


def test_lower_module_without_main_raises():
    with pytest.raises(TVMError, match="no 'main' function"):
        lower_module(ember.IRModule())


# ---------------------------------------------------------------- errors
@pytest.fixture
def op_without_compute():
    from ember.ir.types import TensorType

    name = "test_lowering.no_compute"
    register_op(OpDef(name, 1, type_rel=lambda args, attrs=None: args[0],
                      reference=lambda x, attrs=None: x))
    yield name
    del OP_REGISTRY[name]
    from ember.ir import op as op_mod

    op_mod._OPS.pop(name, None)
    assert TensorType  # keep the import local to the fixture


def test_op_without_compute_raises_op_not_implemented(op_without_compute):
    x = relay.var("p0", shape=(3,))
    call = relay.Call(ember.ir.Op.get(op_without_compute), [x])
    with pytest.raises(OpNotImplemented, match=rf"{op_without_compute}: operator has no "
                                               "compute rule"):
        lower_function(prim([x], call))


def test_unsupported_attrs_raise_op_not_implemented():
    x = relay.var("p0", shape=(1, 1, 2, 2))
    f = prim([x], relay.nn.upsampling(x, 2, 2, method="bicubic"))
    with pytest.raises(OpNotImplemented, match="nn.upsampling: method 'bicubic'"):
        lower_function(f)


def test_free_variables_raise():
    x, q = relay.var("p0", shape=(3,)), relay.var("q", shape=(3,))
    with pytest.raises(TVMError, match="free variable %q"):
        lower_function(prim([x], relay.add(x, q)))


def test_non_operator_calls_and_bad_targets_raise():
    x = relay.var("p0", shape=(3,))
    inner = relay.Function([x], relay.exp(x))
    y = relay.var("p1", shape=(3,))
    with pytest.raises(TVMError, match="call operators only"):
        lower_function(prim([y], relay.Call(inner, [y])))
    with pytest.raises(TVMError, match="target 'cuda' is not supported"):
        lower_function(prim([y], relay.exp(y)), target="cuda")
    with pytest.raises(TVMError, match="expected a relay Function"):
        TECompiler().lower(relay.exp(y))
