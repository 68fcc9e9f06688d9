"""DynamicToStatic: a dyn op whose values are known becomes its static op; the result is
unchanged (the interpreter is the oracle); values known only at run time stay dynamic."""
from __future__ import annotations

import numpy as np
import pytest
from _pass_helpers import assert_main_equal, run

import ember
from ember import relay
from ember.relay.transform import DynamicToStatic
from ember.relay.transform.dynamic_to_static import dynamic_ops
from ember.runtime.errors import TVMError

dyn = relay.op.dyn
RNG = np.random.default_rng(0)


def _mod(body, *params):
    params = params or tuple(relay.analysis.free_vars(body))
    return relay.transform.InferType()(ember.IRModule.from_expr(relay.Function(params, body)))


def _i64(v):
    return relay.const(np.array(v, "int64"))


def _same_results(before, after):
    args = [RNG.standard_normal(p.checked_type.concrete_shape).astype(p.checked_type.dtype)
            for p in before["main"].params]
    want = relay.create_executor("debug", mod=before).evaluate()(*args)
    got = relay.create_executor("debug", mod=after).evaluate()(*args)
    want = want if isinstance(want, (list, tuple)) else [want]
    got = got if isinstance(got, (list, tuple)) else [got]
    for w, g in zip(want, got):
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-6)


def test_a_constant_shape_makes_reshape_static():
    x = relay.var("x", shape=(2, 6))
    out = run(DynamicToStatic(), _mod(dyn.reshape(x, _i64([3, -1]))))
    assert_main_equal(out, _mod(relay.reshape(x, (3, 4)), x))


def test_shape_of_a_static_tensor_is_known():
    x, y = relay.var("x", shape=(relay.Any(), 6)), relay.var("y", shape=(4, 3))
    s = relay.concatenate([relay.take(relay.shape_of(y, "int64"), _i64([1])), _i64([-1])], 0)
    out = run(DynamicToStatic(), _mod(dyn.reshape(x, s), x, y))
    assert_main_equal(out, _mod(relay.reshape(x, (3, -1)), x, y))


def test_a_rewrite_can_make_the_next_value_known():
    # the second op's shape is the first op's result shape: known once the first is static
    x, z = relay.var("x", shape=(2, 6)), relay.var("z", shape=(1, 4))
    r = dyn.reshape(x, _i64([3, 4]))
    body = relay.add(r, dyn.broadcast_to(z, relay.shape_of(r, "int64")))
    before = _mod(body, x, z)
    out = run(DynamicToStatic(), before)
    assert dynamic_ops(out) == []
    assert out["main"].checked_type.ret_type.shape == (3, 4)
    _same_results(before, out)


def test_run_time_values_stay_dynamic():
    x, s = relay.var("x", shape=(2, 6)), relay.var("s", shape=(2,), dtype="int64")
    y = relay.var("y", shape=(relay.Any(), 3))
    before = _mod(relay.Tuple([dyn.reshape(x, s), dyn.zeros(relay.shape_of(y, "int64"))]), x,
                  s, y)
    out = run(DynamicToStatic(), before)
    assert dynamic_ops(out) == ["dyn.reshape", "dyn.zeros"]


@pytest.mark.parametrize("name, build", [
    ("broadcast_to", lambda x: dyn.broadcast_to(x, _i64([2, 3, 4]))),
    ("tile", lambda x: dyn.tile(x, _i64([2, 1, 3]))),
    ("tile_zero", lambda x: dyn.tile(x, _i64([0, 2]))),
    ("strided_slice", lambda x: dyn.strided_slice(x, _i64([2, 3]), _i64([-2 ** 63, 0]),
                                                  _i64([-1, -2]))),
    ("full", lambda x: dyn.full(relay.const(1.5), _i64([2, 2]), "float32")),
    ("zeros", lambda x: dyn.zeros(_i64([3]), "float32")),
    ("ones", lambda x: dyn.ones(_i64([1, 2]), "float32")),
    ("one_hot", lambda x: dyn.one_hot(relay.const(np.array([1, 0], "int64")), relay.const(1.0),
                                      relay.const(0.0), _i64(3))),
    ("topk", lambda x: dyn.topk(x, _i64(2), axis=1, ret_type="values")),
    ("pad", lambda x: dyn.nn.pad(x, _i64([[1, -1], [-2, 3]]), 0.5)),
    ("pad_edge", lambda x: dyn.nn.pad(x, _i64([[0, 2], [1, -1]]), 0.0, "edge")),
    ("resize", lambda x: dyn.image.resize2d(relay.reshape(x, (1, 1, 3, 4)), _i64([5, 2]),
                                            relay.const(np.array([1.5, 0.5], "float32")))),
])
def test_each_dyn_op_becomes_static_with_the_same_result(name, build):
    x = relay.var("x", shape=(3, 4))
    before = _mod(build(x), x)
    out = run(DynamicToStatic(), before)
    assert dynamic_ops(out) == [], name
    assert out["main"].checked_type.ret_type.is_static
    _same_results(before, out)


def test_values_the_static_op_refuses_name_the_dyn_op():
    x = relay.var("x", shape=(2, 6))
    with pytest.raises(TVMError, match=r"dyn.reshape \(Reshape node 'r'\).*as many elements"):
        run(DynamicToStatic(), _mod(dyn.reshape(x, _i64([5, 5]), where="Reshape node 'r'")))
    with pytest.raises(TVMError, match=r"Slice node 's'.*strides"):
        run(DynamicToStatic(), _mod(dyn.strided_slice(x, _i64([0]), _i64([1]), _i64([0]),
                                                      where="Slice node 's'")))


def test_the_optimize_pipeline_runs_it_so_graph_and_aot_build():
    from ember.contrib import cc

    if cc.get_cc() is None:
        pytest.skip("no C compiler found")
    x, y = relay.var("x", shape=(2, 6)), relay.var("y", shape=(4, 3))
    mod = _mod(relay.add(dyn.reshape(x, relay.shape_of(y, "int64")), y), x, y)
    a = RNG.standard_normal((2, 6)).astype("float32")
    b = RNG.standard_normal((4, 3)).astype("float32")
    for executor in ("graph", "aot"):
        lib = relay.build(mod, "llvm", executor=relay.backend.Executor(executor))
        m = lib["default"](ember.cpu())
        m.set_input("x", a)
        m.set_input("y", b)
        m.run()
        np.testing.assert_allclose(m.get_output(0).numpy(), a.reshape(4, 3) + b, rtol=1e-6)
