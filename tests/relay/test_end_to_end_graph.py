"""End to end: models built with the relay API -> relay.build -> graph executor, compared
with the reference interpreter (rtol 1e-4, atol 1e-4); export_library -> load_module in a
fresh process; the memory plan of each model next to its lower bound."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ember as tvm
from ember import relay
from ember.relay.backend.memory_plan import plan_dataflow_arena, plan_memory

RTOL = ATOL = 1e-4


def mlp(batch=2, features=16, hidden=(32, 16), classes=10):
    data = relay.var("data", shape=(batch, features))
    y, params, prev = data, {}, features
    rng = np.random.default_rng(1)
    for i, units in enumerate(hidden + (classes,)):
        w, b = relay.var(f"fc{i}_weight", shape=(units, prev)), relay.var(f"fc{i}_bias",
                                                                         shape=(units,))
        y = relay.nn.bias_add(relay.nn.dense(y, w), b)
        if i < len(hidden):
            y = relay.nn.relu(y)
        params[w.name_hint] = rng.standard_normal((units, prev)).astype("float32") * 0.3
        params[b.name_hint] = rng.standard_normal(units).astype("float32") * 0.1
        prev = units
    y = relay.nn.softmax(y)
    return tvm.IRModule.from_expr(relay.Function(relay.analysis.free_vars(y), y)), params


def cnn(batch=1, channels=4, size=8, classes=10):
    rng = np.random.default_rng(2)
    data = relay.var("data", shape=(batch, 3, size, size))
    w = relay.var("conv_weight", shape=(channels, 3, 3, 3))
    bn = [relay.var(f"bn_{n}", shape=(channels,)) for n in ("gamma", "beta", "mean", "var")]
    y = relay.nn.conv2d(data, w, padding=(1, 1), channels=channels, kernel_size=(3, 3))
    y = relay.nn.batch_norm(y, *bn)[0]
    y = relay.nn.max_pool2d(relay.nn.relu(y), pool_size=(2, 2), strides=(2, 2))
    y = relay.nn.batch_flatten(y)
    flat = channels * (size // 2) ** 2
    wd = relay.var("fc_weight", shape=(classes, flat))
    y = relay.nn.softmax(relay.nn.dense(y, wd))
    params = {"conv_weight": rng.standard_normal((channels, 3, 3, 3)).astype("float32") * 0.3,
              "bn_gamma": rng.random(channels).astype("float32") + 0.5,
              "bn_beta": rng.standard_normal(channels).astype("float32") * 0.1,
              "bn_mean": rng.standard_normal(channels).astype("float32") * 0.1,
              "bn_var": rng.random(channels).astype("float32") + 0.5,
              "fc_weight": rng.standard_normal((classes, flat)).astype("float32") * 0.1}
    return tvm.IRModule.from_expr(relay.Function(relay.analysis.free_vars(y), y)), params


def reference(mod, params, data):
    run = relay.create_executor("debug", mod=mod, params=params).evaluate()
    return run(data=data).numpy()


def build_and_run(mod, params, data, opt_level=3):
    with tvm.transform.PassContext(opt_level=opt_level):
        factory = relay.build(mod, target="llvm", params=params)
    m = factory["default"](tvm.cpu(0))
    m.set_input("data", data)
    m.run()
    return factory, m.get_output(0).numpy()


def resnet_block(batch=2, channels=16, size=16, classes=10):
    """A bigger model for the slow run: conv-bn-relu twice with a residual add, global pool."""
    rng = np.random.default_rng(6)
    data = relay.var("data", shape=(batch, 3, size, size))
    params = {}

    def conv_bn_relu(x, name, cin, relu=True):
        w = relay.var(f"{name}_weight", shape=(channels, cin, 3, 3))
        params[w.name_hint] = rng.standard_normal((channels, cin, 3, 3)).astype("float32") * 0.2
        bn = []
        for stat in ("gamma", "beta", "mean", "var"):
            v = relay.var(f"{name}_{stat}", shape=(channels,))
            params[v.name_hint] = (rng.random(channels) + 0.5 if stat in ("gamma", "var")
                                   else rng.standard_normal(channels) * 0.1).astype("float32")
            bn.append(v)
        y = relay.nn.conv2d(x, w, padding=(1, 1), channels=channels, kernel_size=(3, 3))
        y = relay.nn.batch_norm(y, *bn)[0]
        return relay.nn.relu(y) if relu else y

    stem = conv_bn_relu(data, "stem", 3)
    y = conv_bn_relu(conv_bn_relu(stem, "b1", channels), "b2", channels, relu=False)
    y = relay.nn.relu(relay.add(y, stem))
    y = relay.nn.batch_flatten(relay.nn.global_avg_pool2d(y))
    wd = relay.var("fc_weight", shape=(classes, channels))
    params["fc_weight"] = rng.standard_normal((classes, channels)).astype("float32") * 0.3
    y = relay.nn.softmax(relay.nn.dense(y, wd))
    return tvm.IRModule.from_expr(relay.Function(relay.analysis.free_vars(y), y)), params


MODELS = {"mlp": mlp, "cnn": cnn}
SLOW_MODELS = {"resnet_block": resnet_block,
               "wide_mlp": lambda: mlp(batch=8, features=256, hidden=(512, 256), classes=100)}


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("opt_level", [0, 3])
def test_model_matches_interpreter(name, opt_level):
    mod, params = MODELS[name]()
    shape = [int(d) for d in mod["main"].params[0].type_annotation.shape]
    data = np.random.default_rng(3).standard_normal(shape).astype("float32")
    _, got = build_and_run(mod, params, data, opt_level)
    np.testing.assert_allclose(got, reference(mod, params, data), rtol=RTOL, atol=ATOL)


@pytest.mark.slow
@pytest.mark.parametrize("name", SLOW_MODELS)
def test_bigger_model_matches_interpreter(name, capsys):
    mod, params = SLOW_MODELS[name]()
    shape = [int(d) for d in mod["main"].params[0].type_annotation.shape]
    data = np.random.default_rng(7).standard_normal(shape).astype("float32")
    _, got = build_and_run(mod, params, data)
    np.testing.assert_allclose(got, reference(mod, params, data), rtol=RTOL, atol=ATOL)
    with tvm.transform.PassContext(opt_level=3):
        plan = plan_memory(relay.optimize(mod, "llvm", params=params)[0])
    _, arena = plan_dataflow_arena(plan.dataflow, alignment=64)
    with capsys.disabled():
        print(f"\n[{name}] memory plan: {plan.report}; AOT arena {arena.total} bytes "
              f"(lower bound {arena.lower_bound})")


def test_params_left_unbound_are_inputs():
    mod, params = mlp()
    data = np.random.default_rng(4).standard_normal((2, 16)).astype("float32")
    factory = relay.build(mod, target="llvm")
    m = factory["default"](tvm.cpu(0))
    m.set_input(data=data, **params)
    m.run()
    np.testing.assert_allclose(m.get_output(0).numpy(), reference(mod, params, data),
                               rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("name", MODELS)
def test_memory_plan_report(name, capsys):
    mod, params = MODELS[name]()
    with tvm.transform.PassContext(opt_level=3):
        opt, _ = relay.optimize(mod, "llvm", params=params)
    plan = plan_memory(opt)
    report = plan.report
    _, arena = plan_dataflow_arena(plan.dataflow, alignment=64)
    with capsys.disabled():
        print(f"\n[{name}] memory plan: {report}; AOT arena {arena.total} bytes "
              f"(lower bound {arena.lower_bound})")
    assert report.lower_bound <= report.planned_bytes <= report.total_bytes
    assert arena.lower_bound <= arena.total


def test_export_library_and_load_in_a_fresh_process(tmp_path):
    mod, params = cnn()
    data = np.random.default_rng(5).standard_normal((1, 3, 8, 8)).astype("float32")
    factory, expected = build_and_run(mod, params, data)
    path = tmp_path / "cnn.so"
    factory.export_library(str(path))
    np.save(tmp_path / "data.npy", data)
    script = textwrap.dedent(f"""
        import sys
        import numpy as np
        import ember.runtime as rt
        lib = rt.load_module({str(path)!r})
        m = lib["default"](rt.cpu(0))
        m["set_input"]("data", rt.nd.array(np.load({str(tmp_path / 'data.npy')!r})))
        m["run"]()
        np.save({str(tmp_path / 'out.npy')!r}, m["get_output"](0).numpy())
        bad = [k for k in sys.modules if k.startswith(("ember.relay", "ember.ir", "ember.te",
                                                          "ember.tir"))]
        assert not bad, bad
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    subprocess.run([sys.executable, "-c", script], check=True, env=env, timeout=120)
    np.testing.assert_allclose(np.load(tmp_path / "out.npy"), expected, rtol=1e-6, atol=1e-6)


# -- law: building (fusion + memory planning + codegen) preserves the interpreter's result ------
_UNARY = (relay.nn.relu, relay.negative, relay.tanh, relay.sigmoid)
_BINARY = (relay.add, relay.multiply, relay.subtract, relay.maximum)


@st.composite
def programs(draw):
    """A random DAG over a (3, 4) input: unary/binary elementwise ops, reshapes, reuse."""
    x = relay.var("x", shape=(3, 4))
    values = [x]
    for _ in range(draw(st.integers(2, 7))):
        kind = draw(st.sampled_from(["unary", "binary", "reshape"]))
        a = draw(st.sampled_from(values))
        if kind == "unary":
            values.append(draw(st.sampled_from(_UNARY))(a))
        elif kind == "binary":
            values.append(draw(st.sampled_from(_BINARY))(a, draw(st.sampled_from(values))))
        else:
            values.append(relay.reshape(relay.reshape(a, (12,)), (3, 4)))
    outs = draw(st.lists(st.sampled_from(values[1:]), min_size=1, max_size=3, unique_by=id))
    body = outs[0] if len(outs) == 1 else relay.Tuple(outs)
    return tvm.IRModule.from_expr(relay.Function([x], body))


@settings(max_examples=6, deadline=None)
@given(programs(), st.sampled_from([0, 3]))
def test_random_programs_match_interpreter(mod, opt_level):
    data = np.random.default_rng(8).standard_normal((3, 4)).astype("float32")
    with tvm.transform.PassContext(opt_level=opt_level):
        factory = relay.build(mod, target="llvm")
    m = factory["default"](tvm.cpu(0))
    m.set_input("x", data)
    m.run()
    want = relay.create_executor("debug", mod=mod).evaluate()(data)
    want = [want] if isinstance(want, tvm.nd.NDArray) else list(want)
    assert m.get_num_outputs() == len(want)
    for i, w in enumerate(want):
        np.testing.assert_allclose(m.get_output(i).numpy(), w.numpy(), rtol=1e-5, atol=1e-5)
