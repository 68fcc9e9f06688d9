"""Graph codegen on hand-fused modules, run by the graph executor with Python kernels
(each kernel evaluates its primitive function with the reference interpreter)."""
from __future__ import annotations

import json

import numpy as np
import pytest

import ember as tvm
from ember import relay
from ember.relay.backend.graph.codegen import generate_graph
from ember.runtime import graph_executor
from ember.runtime.module import PyModule


def prim(fn, *shapes, dtype="float32"):
    ps = [relay.var(f"p{i}", shape=s, dtype=dtype) for i, s in enumerate(shapes)]
    return relay.Function(ps, fn(*ps)).with_attr("Primitive", 1)


def typed(body, *params):
    return relay.transform.InferType()(tvm.IRModule.from_expr(relay.Function(list(params), body)))


def kernels(mod):
    """Kernel names for every primitive callee of main, and a PyModule implementing them."""
    from ember.relay.backend._liveness import Dataflow

    names, funcs = {}, {}
    for step in Dataflow.from_function(mod["main"], mod).steps:
        func = step.func
        if func in names:
            continue
        names[func] = name = f"k{len(names)}_{func.body.op.name.replace('.', '_')}" if hasattr(
            func.body, "op") else f"k{len(names)}"
        run = relay.create_executor("debug", mod=tvm.IRModule()).evaluate(func)

        def kernel(*args, run=run, n_in=len(func.params)):  # noqa: B008
            res = run(*args[:n_in])
            outs = [res] if isinstance(res, tvm.nd.NDArray) else list(res)
            for dst, src in zip(args[n_in:], outs, strict=True):
                dst.copyfrom(src.numpy())

        funcs[name] = kernel
    return names, PyModule(funcs)


def run_both(mod, inputs):
    names, lib = kernels(mod)
    res = generate_graph(mod, names)
    ex = graph_executor.create(res.graph_json, lib, tvm.cpu(0))
    ex.load_params(res.params) if res.params else None
    ex.set_input(**inputs)
    ex.run()
    got = [ex.get_output(i).numpy() for i in range(ex.get_num_outputs())]
    want = relay.create_executor("debug", mod=mod).evaluate()(**inputs)
    want = [want.numpy()] if isinstance(want, tvm.nd.NDArray) else [w.numpy() for w in want]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)
    return res


def test_chain_with_constant_and_reshape():
    x = relay.var("x", shape=(2, 8))
    a = prim(relay.add, (2, 8), (2, 8))(x, relay.const(np.arange(16, dtype="float32").reshape(2, 8)))
    r = prim(lambda p: relay.reshape(p, (16,)), (2, 8))(a)
    b = prim(relay.nn.relu, (16,))(r)
    res = run_both(typed(b, x), {"x": np.random.randn(2, 8).astype("float32")})
    g = json.loads(res.graph_json)
    assert [n["op"] for n in g["nodes"]] == ["null", "null", "tvm_op", "tvm_op", "tvm_op"]
    assert [n["name"] for n in g["nodes"][:2]] == ["x", "p0"]
    assert g["arg_nodes"] == [0, 1]
    assert g["nodes"][3]["attrs"]["func_name"] == "__nop"
    sid = g["attrs"]["storage_id"][1]
    assert sid[3] == sid[2]  # the __nop output aliases its input
    assert g["attrs"]["shape"][1][3] == [16] and g["attrs"]["dltype"][1][0] == "float32"
    assert list(res.params) == ["p0"] and res.params["p0"].shape == (2, 8)
    assert res.func_names == ["k0_add", "k2_nn_relu"]


def test_tuple_outputs_projections_and_lets():
    x = relay.var("x", shape=(3, 4))
    two = prim(lambda p: relay.Tuple([relay.exp(p), relay.negative(p)]), (3, 4))(x)
    t = relay.var("t")
    first = prim(relay.nn.relu, (3, 4))(relay.TupleGetItem(t, 1))
    body = relay.Let(t, two, relay.Tuple([first, relay.TupleGetItem(t, 0), x]))
    res = run_both(typed(body, x), {"x": np.random.randn(3, 4).astype("float32")})
    g = res.graph
    multi = g.nodes[1]
    assert multi.num_outputs == 2 and len(g.node_row_ptr) == len(g.nodes) + 1
    assert [h.to_json() for h in g.heads] == [[2, 0, 0], [1, 0, 0], [0, 0, 0]]


def test_shared_callee_and_diamond():
    x = relay.var("x", shape=(5,))
    relu = prim(relay.nn.relu, (5,))
    a = relu(x)
    b = prim(relay.exp, (5,))(a)
    c = prim(relay.negative, (5,))(a)
    d = prim(relay.add, (5,), (5,))(b, c)
    res = run_both(typed(relu(d), x), {"x": np.linspace(-2, 2, 5).astype("float32")})
    assert res.func_names[0] == res.graph.nodes[-1].func_name  # one kernel, called twice


def test_storage_is_shared_along_a_chain():
    x = relay.var("x", shape=(64,))
    y = x
    for op in (relay.nn.relu, relay.exp, relay.negative, relay.nn.relu, relay.exp):
        y = prim(op, (64,))(y)
    res = run_both(typed(y, x), {"x": np.random.randn(64).astype("float32")})
    sids = res.graph.storage_id
    assert len(set(sids)) < len(sids)


def test_constant_names_skip_parameter_names():
    p0 = relay.var("p0", shape=(2,))
    a = prim(relay.add, (2,), (2,))(p0, relay.const(np.ones(2, "float32")))
    res = run_both(typed(a, p0), {"p0": np.array([1, 2], "float32")})
    assert res.graph.input_names == ["p0", "p1"] and list(res.params) == ["p1"]


def test_output_may_be_an_input_or_a_constant():
    x = relay.var("x", shape=(2,))
    res = run_both(typed(relay.Tuple([x, relay.const(np.full(2, 3, "float32"))]), x),
                   {"x": np.array([1, 2], "float32")})
    assert not any(n.op == "tvm_op" for n in res.graph.nodes)


def test_global_var_callees_name_their_kernel():
    x = relay.var("x", shape=(2,))
    mod = tvm.IRModule()
    mod["main"] = relay.Function([x], relay.Call(relay.GlobalVar("my_kernel"), [x]))
    mod = typed_with_type(mod, relay.TensorType((2,), "float32"))
    res = generate_graph(mod)
    assert res.graph.nodes[1].func_name == "my_kernel"


def typed_with_type(mod, ty):
    # A call to an undefined global has no type relation: set the call's type by hand.
    call = mod["main"].body
    object.__setattr__(call, "checked_type_", ty)
    object.__setattr__(mod["main"].params[0], "checked_type_", ty)
    return mod


@pytest.mark.parametrize("make, match", [
    (lambda x: relay.If(relay.const(True), x, x), r"cannot run If nodes.*need the VM"),
    (lambda x: prim(relay.nn.relu, (2,))(x), r"no lowered kernel is known for a primitive"),
    (lambda x: relay.nn.relu(x), r"no lowered kernel is known for operator nn.relu"),
    (lambda x: relay.Function([relay.var("y", shape=(2,))], x)(x),
     r"calls a non-primitive function; run FuseOps first"),
])
def test_unsupported_programs_raise(make, match):
    x = relay.var("x", shape=(2,))
    with pytest.raises(tvm.TVMError, match=match):
        generate_graph(typed(make(x), x))


def test_duplicate_parameter_names_raise():
    x1, x2 = relay.var("x", shape=(2,)), relay.var("x", shape=(2,))
    mod = typed(prim(relay.add, (2,), (2,))(x1, x2), x1, x2)
    with pytest.raises(tvm.TVMError, match="two parameters named 'x'"):
        generate_graph(mod, lambda f: "k")


def test_tuple_parameter_raises():
    t = relay.var("t", relay.TupleType([relay.TensorType((2,)), relay.TensorType((2,))]))
    with pytest.raises(tvm.TVMError, match="parameter %t has type .*graph inputs must be tensors"):
        generate_graph(typed(relay.TupleGetItem(t, 0), t))


def test_graph_executor_codegen_tvm_entry():
    from ember.relay.backend import graph_executor_codegen

    x = relay.var("x", shape=(4,))
    mod = relay.transform.FuseOps(fuse_opt_level=2)(typed(relay.nn.relu(relay.exp(x)), x))
    codegen = graph_executor_codegen.GraphExecutorCodegen(None, "llvm")
    graph_json, lowered, params = codegen.codegen(mod, mod["main"])
    assert params == {} and list(lowered) == ["llvm -keys=cpu"]
    ex = graph_executor.create(graph_json, lowered["llvm -keys=cpu"], tvm.cpu(0))
    ex.set_input("x", np.array([-1, 0, 1, 2], "float32"))
    ex.run()
    np.testing.assert_allclose(ex.get_output(0).numpy(), np.exp([-1, 0, 1, 2]), rtol=1e-6)
    with pytest.raises(tvm.TVMError, match="'cuda' is not supported"):
        graph_executor_codegen.GraphExecutorCodegen(None, "cuda")
