"""FusePoolEpilogue: before/expected pairs, the graphs it must leave alone, the fused op's type
errors, and numerics of built models (the resnet stem) against the unfused build and numpy."""
from __future__ import annotations

import numpy as np
import pytest
from _pass_helpers import assert_main_equal, run

import ember
from ember import relay
from ember.relay.op.nn.pool_nchwc_fused import contrib_max_pool2d_nchwc_fused
from ember.relay.transform import FusePoolEpilogue, InferType
from ember.runtime.errors import TypeInferenceError

SHAPE = (1, 2, 9, 9, 8)  # C = 16 in NCHW8c
POOL = dict(pool_size=(3, 3), strides=(2, 2), padding=(1, 1, 1, 1), layout="NCHW8c")
RNG = np.random.default_rng(5)
SCALE = RNG.uniform(-1, 1, 16).astype("float32")
SHIFT = RNG.standard_normal(16).astype("float32")


def _blocked(vec):
    return relay.const(vec.reshape(1, 2, 1, 1, 8))


def _mod(body_of):
    x = relay.var("x", shape=SHAPE)
    return InferType()(ember.IRModule.from_expr(relay.Function([x], body_of(x))))


def _fused(x, scale, shift, relu):
    return contrib_max_pool2d_nchwc_fused(x, relay.const(scale), relay.const(shift), relu=relu,
                                          **POOL)


def _pool(x):
    return relay.nn.max_pool2d(x, **POOL)


ONES, ZEROS = np.ones(16, "float32"), np.zeros(16, "float32")
CASES = {
    "batch_norm_relu": (
        lambda x: relay.nn.relu(_pool(x) * _blocked(SCALE) + _blocked(SHIFT)),
        lambda x: _fused(x, SCALE, SHIFT, True)),
    "relu_only": (lambda x: relay.nn.relu(_pool(x)), lambda x: _fused(x, ONES, ZEROS, True)),
    # a multiply after the add scales both; a constant on the left; a scalar broadcasts
    "add_then_scale": (
        lambda x: _blocked(SCALE) * (_pool(x) + relay.const(np.float32(0.5))),
        lambda x: _fused(x, SCALE, SCALE * np.float32(0.5), False)),
    # the relu ends the epilogue: the multiply after it stays a separate op
    "after_relu": (
        lambda x: relay.nn.relu(_pool(x)) * _blocked(SCALE),
        lambda x: _fused(x, ONES, ZEROS, True) * _blocked(SCALE)),
}


@pytest.mark.parametrize("case", list(CASES))
def test_rewrites(case):
    before, expected = CASES[case]
    assert_main_equal(run(FusePoolEpilogue(), _mod(before)), _mod(expected))


def _read_twice(x):
    p = _pool(x)  # one pool node with two readers
    return relay.Tuple([p, relay.nn.relu(p)])


LEFT_ALONE = {
    "pool_read_twice": _read_twice,
    "not_per_channel": lambda x: _pool(x) * relay.const(RNG.random((1, 2, 5, 5, 8), "float32")),
    "tensor_operand": lambda x: _pool(x) * _pool(x),
    "plain_layout": lambda x: relay.nn.relu(relay.nn.max_pool2d(
        relay.reshape(x, (1, 16, 9, 9)), pool_size=(3, 3))),
    "average_pool": lambda x: relay.nn.relu(relay.nn.avg_pool2d(x, **POOL)),
}


@pytest.mark.parametrize("case", list(LEFT_ALONE))
def test_leaves_alone(case):
    mod = _mod(LEFT_ALONE[case])
    assert_main_equal(run(FusePoolEpilogue(), mod), mod)


def test_nothing_fused_when_fusion_is_bounded_to_one_op():
    mod = _mod(CASES["batch_norm_relu"][0])
    assert_main_equal(run(FusePoolEpilogue(), mod, **{"relay.FuseOps.max_depth": 1}), mod)


def test_type_errors_name_the_argument():
    x = relay.var("x", shape=SHAPE)
    bad_scale = contrib_max_pool2d_nchwc_fused(x, relay.const(ONES[:8]), relay.const(ZEROS),
                                               **POOL)
    with pytest.raises(TypeInferenceError, match="scale must be a float32 vector of the 16"):
        InferType()(ember.IRModule.from_expr(relay.Function([x], bad_scale)))
    plain = relay.var("p", shape=(1, 16, 9, 9))
    bad_layout = contrib_max_pool2d_nchwc_fused(plain, relay.const(ONES), relay.const(ZEROS),
                                                pool_size=(3, 3))
    with pytest.raises(TypeInferenceError, match="NCHW\\[L\\]c"):
        InferType()(ember.IRModule.from_expr(relay.Function([plain], bad_layout)))


def _stem():
    """A resnet stem in NCHW, as models arrive: conv, relu, max pool, batch norm, relu;
    channels 24 (three blocks of 8), an odd map."""
    rng = np.random.default_rng(11)
    x = relay.var("x", shape=(2, 3, 21, 19))
    w = relay.const((rng.standard_normal((24, 3, 3, 3)) * 0.3).astype("float32"))
    y = relay.nn.relu(relay.nn.conv2d(x, w, padding=(1, 1)))
    y = relay.nn.max_pool2d(y, pool_size=(3, 3), strides=(2, 2), padding=(1, 1))
    bn = [relay.const(v.astype("float32")) for v in (
        rng.uniform(-1, 1, 24), rng.standard_normal(24), rng.standard_normal(24) * 0.1,
        rng.uniform(0.5, 2, 24))]
    y = relay.nn.relu(relay.nn.batch_norm(y, *bn)[0])
    return ember.IRModule.from_expr(relay.Function([x], y)), rng.standard_normal(
        (2, 3, 21, 19)).astype("float32")


def _built(mod, x, disabled=()):
    from ember.contrib import graph_executor

    with ember.transform.PassContext(opt_level=3, disabled_pass=list(disabled)):
        lib = relay.build(mod, "llvm")
        fused, _ = relay.optimize(mod, "llvm")
    m = graph_executor.GraphModule(lib["default"](ember.cpu()))
    m.set_input("x", x)
    m.run()
    return m.get_output(0).numpy(), fused


def test_stem_matches_the_unfused_build_and_the_interpreter():
    mod, x = _stem()
    got, fused = _built(mod, x)
    assert "nn.contrib_max_pool2d_NCHWc_fused" in fused.astext()
    want, unfused = _built(mod, x, disabled=["FusePoolEpilogue"])
    assert "nn.contrib_max_pool2d_NCHWc_fused" not in unfused.astext()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    ref = relay.create_executor("debug", mod=mod).evaluate()(x).numpy()
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)


def test_op_lowers_without_the_kernel_where_it_does_not_apply():
    # float64 (the kernel is float32): the generic pool and the epilogue as a loop
    from ember.contrib import graph_executor
    from ember.relay.op.nn.pool_nchwc_fused import _ref

    rng = np.random.default_rng(2)
    x = relay.var("x", shape=(1, 2, 5, 6, 4), dtype="float64")
    scale, shift = rng.uniform(-1, 1, 8), rng.standard_normal(8)
    body = contrib_max_pool2d_nchwc_fused(x, relay.const(scale), relay.const(shift), relu=True,
                                          pool_size=(3, 3), strides=(2, 2), padding=(1, 1),
                                          layout="NCHW4c")
    with ember.transform.PassContext(opt_level=3):
        lib = relay.build(ember.IRModule.from_expr(relay.Function([x], body)), "llvm")
    m = graph_executor.GraphModule(lib["default"](ember.cpu()))
    xv = rng.standard_normal((1, 2, 5, 6, 4))
    m.set_input("x", xv)
    m.run()
    want = _ref(xv, scale, shift, attrs=body.attrs)
    np.testing.assert_allclose(m.get_output(0).numpy(), want, rtol=1e-12)
    assert (want == 0).any() and (want > 0).any()  # the relu cut some, kept others


def test_run_time_batch_runs_the_fused_kernel():
    x = relay.var("x", shape=(relay.Any(), 2, 9, 9, 8))
    body = relay.nn.relu(_pool(x) * _blocked(SCALE) + _blocked(SHIFT))
    mod = ember.IRModule.from_expr(relay.Function([x], body))
    with ember.transform.PassContext(opt_level=3):
        fused, _ = relay.optimize(mod, "llvm")
        exe = relay.vm.compile(mod, "llvm")
    assert "nn.contrib_max_pool2d_NCHWc_fused" in fused.astext()
    xv = np.random.default_rng(4).standard_normal((3, 2, 9, 9, 8)).astype("float32")
    got = ember.runtime.vm.VirtualMachine(exe, ember.cpu()).run(xv).numpy()
    want = relay.create_executor("debug", mod=mod).evaluate()(xv).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
