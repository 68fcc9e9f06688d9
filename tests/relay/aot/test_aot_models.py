"""Models through AOT in every calling-convention combination (``_aot_util.CONFIGS``: packed /
cpacked / unpacked operator calls, packed and C interfaces, params linked or in a constant
pool), compared with the reference interpreter and the graph executor (rtol = atol = 1e-5);
outputs that alias inputs, constants or each other; the arena against its lower bound."""
from __future__ import annotations

import functools

import numpy as np
import pytest
from _aot_util import (
    CONFIGS,
    assert_outputs,
    build,
    cnn,
    graph_outputs,
    inputs_for,
    mlp,
    needs_cc,
    reference,
    run,
)

import ember as tvm
from ember import relay

pytestmark = needs_cc
MODELS = {"mlp": mlp, "cnn": cnn}


@functools.cache
def case(name: str):
    """(mod, params, inputs, interpreter outputs, graph executor outputs), built once."""
    mod, params = MODELS[name]()
    inputs = inputs_for(mod, params)
    return mod, params, inputs, reference(mod, inputs, params), graph_outputs(mod, inputs, params)


@pytest.mark.parametrize("config", list(CONFIGS))
@pytest.mark.parametrize("model", list(MODELS))
def test_model_matches_interpreter_and_graph(model, config):
    mod, params, inputs, ref, graph = case(model)
    factory = build(mod, config, params)
    out = run(factory, inputs)
    assert_outputs(out, ref)
    assert_outputs(out, graph)


@pytest.mark.parametrize("model", list(MODELS))
def test_calling_conventions_in_the_source(model):
    mod, params, *_ = case(model)
    # mlp's first kernel is a GEMM with its epilogue; cnn's conv keeps its own name
    kernel = "tvmgen_default_fused_nn_"
    src = {c: build(mod, c, params).sources["default_lib1.c"]
           for c in ("cpp-cpacked", "cpp-packed", "crt-c")}
    assert f'TVMBackendGetFuncFromEnv(__tvm_module_ctx, "{kernel}' in src["cpp-packed"]
    assert "TVMFuncCall(func" in src["cpp-packed"]
    assert f"rc = {kernel}" in src["cpp-cpacked"] and "values, codes" in src["cpp-cpacked"]
    assert f"rc = {kernel}" in src["crt-c"] and "_unpacked((float*)" in src["crt-c"]
    for text in src.values():  # every call's return code is checked
        assert text.count("if (rc != 0) return rc;") == text.count("rc = tvmgen_default_fused") \
            + text.count("TVMFuncCall(func")


@pytest.mark.parametrize("model", list(MODELS))
def test_arena_within_5_percent_of_the_lower_bound(model):
    mod, params, *_ = case(model)
    memory = build(mod, "cpp-cpacked", params).get_model_metadata().memory
    assert memory["lower_bound"] <= memory["planned_bytes"] <= 1.05 * memory["lower_bound"]
    assert memory["planned_bytes"] <= memory["total_bytes"]


def test_link_params_puts_the_weights_in_the_library():
    mod, params, inputs, ref, _ = case("mlp")
    linked, pooled = build(mod, "cpp-linked", params), build(mod, "cpp-cpacked", params)
    assert linked.get_params() == {} and set(pooled.get_params()) == {f"p{i}" for i in range(6)}
    src = linked.sources["default_lib1.c"]
    assert src.count('__attribute__((section(".rodata.tvm"), aligned(16)))') == 6
    assert linked.get_model_metadata().constant_pool_bytes == 0
    assert pooled.get_model_metadata().constant_pool_bytes == pooled.metadata.main.constant_size_bytes
    assert "const uint8_t* constants" in pooled.sources["default_lib1.c"]
    assert_outputs(run(linked, inputs), ref)


def test_outputs_that_alias_inputs_constants_and_each_other():
    x = relay.var("x", shape=(2, 3))
    e = relay.exp(x)
    c = relay.const(np.arange(4, dtype="float32"))
    body = relay.Tuple([e, relay.reshape(e, (3, 2)), x, e, c, relay.reshape(x, (6,))])
    mod = tvm.IRModule.from_expr(relay.Function([x], body))
    inputs = {"x": np.random.default_rng(3).standard_normal((2, 3)).astype("float32")}
    ref = reference(mod, inputs)
    for config in ("cpp-cpacked", "crt-c", "crt-c-linked"):
        factory = build(mod, config)
        assert [p.relay_name_hint for p in factory.metadata.main.outputs] == [
            f"output{i}" for i in range(6)]
        assert_outputs(run(factory, inputs), ref)


def test_reshape_only_groups_make_no_call():
    """reshape(x) aliases the input, reshape(dense(...)) its arena buffer: two calls only."""
    x, w, w2 = (relay.var(n, shape=s) for n, s in (("x", (2, 6)), ("w", (4, 12)),
                                                     ("w2", (3, 2))))
    y = relay.nn.dense(relay.reshape(x, (1, 12)), w)
    y = relay.nn.dense(relay.reshape(y, (2, 2)), w2)
    mod = tvm.IRModule.from_expr(relay.Function([x, w, w2], y))
    rng = np.random.default_rng(5)
    inputs = {n: rng.standard_normal(s).astype("float32")
              for n, s in (("x", (2, 6)), ("w", (4, 12)), ("w2", (3, 2)))}
    for config in ("cpp-cpacked", "crt-c"):
        factory = build(mod, config)
        run_model = factory.sources["default_lib1.c"].split("run_model:")[1]
        calls = [ln for ln in run_model.split("return 0;")[0].splitlines() if "rc = " in ln]
        assert len(calls) == 2 and all("fused_nn_contrib_gemm" in c for c in calls)
        assert_outputs(run(factory, inputs), reference(mod, inputs))


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int32", "float64", "bool"])
def test_dtypes(dtype):
    a, b = relay.var("a", shape=(3, 4), dtype=dtype), relay.var("b", shape=(3, 4), dtype=dtype)
    body = relay.logical_and(a, b) if dtype == "bool" else relay.maximum(a, b)
    mod = tvm.IRModule.from_expr(relay.Function([a, b], body))
    rng = np.random.default_rng(4)
    inputs = {n: (rng.standard_normal((3, 4)) * 50).astype(dtype) for n in "ab"}
    for config in ("cpp-cpacked", "crt-c"):
        assert_outputs(run(build(mod, config), inputs), reference(mod, inputs))


def test_builds_are_deterministic():
    mod, params, *_ = case("cnn")
    first, second = build(mod, "crt-c", params), build(mod, "crt-c", params)
    assert first.sources == second.sources and first.header == second.header


def test_a_model_without_inputs():
    """Every parameter bound: the output is a constant (folded), copied out by run_model."""
    x = relay.var("x", shape=(3,))
    mod = tvm.IRModule.from_expr(relay.Function([x], relay.exp(x)))
    for config in ("cpp-cpacked", "crt-c", "crt-c-linked"):
        factory = build(mod, config, {"x": np.ones(3, "float32")})
        assert factory.get_model_metadata().main.num_inputs == 0
        assert "void* unused;" in factory.header or config == "cpp-cpacked"
        np.testing.assert_allclose(run(factory, {})[0], np.full(3, np.e, "float32"), rtol=1e-6)
