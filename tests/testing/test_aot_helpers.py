"""ember.testing.aot and ember.micro.testing.aot_test_utils: the TVM flow (compile with AOT for
the C runtime, export Model Library Format, generate a C runner, build it with make, run it,
compare) on a conv2d model over every valid option combination, and the helpers' edges:
several models in one program, params linked or in a pool, fusion off, target-string options,
tuple outputs, runner hooks, the benchmark loop, and the errors."""
from __future__ import annotations

import shutil

import numpy as np
import pytest

import ember as tvm
from ember import relay
from ember.micro.testing import AOT_DEFAULT_RUNNER, get_conv2d_relay_module
from ember.micro.testing.aot_test_utils import (
    AOT_CORSTONE300_RUNNER,
    parametrize_aot_options,
    valid_aot_options,
)
from ember.testing import find_c_compiler
from ember.testing.aot import (
    AOTCompiledTestModel,
    AOTTestModel,
    AOTTestRunner,
    compile_and_run,
    compile_models,
    generate_ref_data,
    run_and_check,
)

needs_make = pytest.mark.skipif(find_c_compiler() is None or shutil.which("make") is None,
                                reason="needs a C compiler and make")


def conv2d_case(seed: int = 0) -> AOTTestModel:
    mod = get_conv2d_relay_module()
    rng = np.random.default_rng(seed)
    inputs = {"data": rng.integers(-8, 8, (1, 3, 64, 64)).astype("int8"),
              "weight": rng.integers(-8, 8, (8, 3, 5, 5)).astype("int8")}
    return AOTTestModel(module=mod, inputs=inputs, outputs=generate_ref_data(mod, inputs))


def small_case(name: str = "default", seed: int = 1) -> AOTTestModel:
    """dense + bias + relu with its weights as params."""
    rng = np.random.default_rng(seed)
    x = relay.var("x", shape=(2, 8))
    w, b = relay.var("w", shape=(4, 8)), relay.var("b", shape=(4,))
    mod = tvm.IRModule.from_expr(relay.Function(
        [x, w, b], relay.nn.relu(relay.nn.bias_add(relay.nn.dense(x, w), b))))
    params = {"w": rng.standard_normal((4, 8)).astype("float32"),
              "b": rng.standard_normal(4).astype("float32")}
    inputs = {"x": rng.standard_normal((2, 8)).astype("float32")}
    return AOTTestModel(module=mod, inputs=inputs, params=params, name=name,
                        outputs=generate_ref_data(mod, inputs, params))


@needs_make
@parametrize_aot_options
def test_conv2d(interface_api, use_unpacked_api, test_runner):
    result = compile_and_run(conv2d_case(), test_runner, interface_api, use_unpacked_api)
    (out,) = result.outputs["default"]
    assert out.dtype == np.int32 and out.shape == (1, 8, 64, 64)


def test_parametrize_aot_options_follows_the_calling_convention_rules():
    combos = {(api, unpacked, runner.makefile) for api, unpacked, runner in valid_aot_options()}
    assert combos == {("packed", True, "default"), ("packed", False, "default"),
                      ("c", True, "default"), ("c", True, "corstone300")}
    # the C interface calls operators directly: never with packed operator calls (rule R2)
    assert not any(api == "c" and not unpacked for api, unpacked, _ in valid_aot_options())
    assert AOT_DEFAULT_RUNNER.pass_config == {} and AOT_DEFAULT_RUNNER.makefile == "default"
    assert AOT_CORSTONE300_RUNNER.makefile == "corstone300"


def test_generate_ref_data_names_outputs_like_tvm():
    x = relay.var("x", shape=(3,))
    one = tvm.IRModule.from_expr(relay.Function([x], relay.exp(x)))
    two = tvm.IRModule.from_expr(relay.Function([x], relay.Tuple([x + x, relay.exp(x)])))
    data = {"x": np.array([0.0, 1.0, 2.0], "float32")}
    assert list(generate_ref_data(one, data)) == ["output"]
    ref = generate_ref_data(two, data)
    assert list(ref) == ["output0", "output1"]
    np.testing.assert_allclose(ref["output0"], 2 * data["x"])
    np.testing.assert_allclose(ref["output1"], np.exp(data["x"]), rtol=1e-6)


@needs_make
@pytest.mark.parametrize("interface_api", ["c", "packed"])
def test_params_in_a_constant_pool(interface_api, tmp_path):
    compile_and_run(small_case(), AOT_DEFAULT_RUNNER, interface_api, True, link_params=False,
                    test_dir=str(tmp_path))
    data = (tmp_path / "build" / "include" / "tvmgen_default_data.h").read_text()
    assert "uint8_t tvmgen_default_constants[" in data


@needs_make
def test_two_models_in_one_program(tmp_path):
    models = [small_case("first", 1), small_case("second", 2)]
    result = compile_and_run(models, AOT_DEFAULT_RUNNER, "c", True, test_dir=str(tmp_path))
    assert set(result.outputs) == {"first", "second"}
    assert (tmp_path / "models" / "first" / "codegen" / "host" / "include" /
            "tvmgen_first.h").is_file()
    assert (tmp_path / "first.tar").is_file() and (tmp_path / "build" / "test_run.log").is_file()


@needs_make
def test_without_fusion_and_with_target_string_options(tmp_path):
    case = small_case()
    fused = compile_models(case, "packed", False)[0].executor_factory
    unfused = compile_models(case, "packed", False, enable_op_fusion=False)[0].executor_factory
    assert len(unfused.get_model_metadata().operators) > len(fused.get_model_metadata().operators)
    compiled = compile_models(case, "c", True, use_runtime_executor=False)
    meta = compiled[0].executor_factory.get_model_metadata()
    assert meta.interface_api == "c" and meta.unpacked_api and meta.link_params
    run_and_check(compiled, AOT_DEFAULT_RUNNER, "c", test_dir=str(tmp_path))


@needs_make
def test_tuple_outputs_and_runner_hooks(tmp_path):
    x = relay.var("x", shape=(2, 3), dtype="int32")
    mod = tvm.IRModule.from_expr(relay.Function([x], relay.Tuple([x + x, x * x])))
    inputs = {"x": np.arange(6, dtype="int32").reshape(2, 3)}
    model = AOTTestModel(module=mod, inputs=inputs, outputs=generate_ref_data(mod, inputs))
    (tmp_path / "hook.h").write_text("#define HOOK_TEXT \"hook-ran\"\n")
    runner = AOTTestRunner(prologue='printf("start\\n");', epilogue='printf("%s\\n", HOOK_TEXT);',
                           includes=["hook.h"],
                           parameters={"CFLAGS": f"-I{tmp_path}",
                                       "TEST_CFLAGS": "-DAOT_BENCH_REPEAT=3"})
    result = compile_and_run(model, runner, "c", True, test_dir=str(tmp_path / "t"))
    lines = result.stdout.splitlines()
    assert lines[0] == "start" and lines[-2:] == ["hook-ran", "AOT_TEST_SUCCESS"]
    twice, squared = result.outputs["default"]
    np.testing.assert_array_equal(twice, 2 * inputs["x"])
    np.testing.assert_array_equal(squared, inputs["x"] ** 2)
    assert result.bench["default"] > 0  # seconds per run of the timing loop


@needs_make
def test_a_wrong_expected_output_fails_with_the_model_and_output(tmp_path):
    case = small_case("net")
    bad = case._replace(outputs={"output": case.outputs["output"] + 1})
    with pytest.raises(AssertionError, match="model 'net', output 0"):
        compile_and_run(bad, AOT_DEFAULT_RUNNER, "c", True, test_dir=str(tmp_path))
    loose = bad._replace(output_tolerance=1.5)  # an absolute tolerance, as in TVM
    compile_and_run(loose, AOT_DEFAULT_RUNNER, "c", True, test_dir=str(tmp_path))


@needs_make
def test_errors_name_what_is_wrong(tmp_path):
    case = small_case("net")
    compiled = compile_models(case, "c", True)
    with pytest.raises(tvm.TVMError, match="no input named 'y'; its inputs are \\['x'\\]"):
        run_and_check([AOTCompiledTestModel(case._replace(inputs={"y": 1}), compiled[0][1])],
                      AOT_DEFAULT_RUNNER, "c", test_dir=str(tmp_path / "a"))
    with pytest.raises(tvm.TVMError, match="input 'x' is float64\\[2, 8\\], expected float32"):
        run_and_check([AOTCompiledTestModel(case._replace(inputs={"x": np.zeros((2, 8))}),
                                            compiled[0][1])],
                      AOT_DEFAULT_RUNNER, "c", test_dir=str(tmp_path / "b"))
    with pytest.raises(tvm.TVMError, match="another interface-api than 'packed'"):
        run_and_check(compiled, AOT_DEFAULT_RUNNER, "packed", test_dir=str(tmp_path / "c"))
    with pytest.raises(tvm.TVMError, match="makefile 'corstone300' is not available"):
        run_and_check(compiled, AOT_CORSTONE300_RUNNER, "c", test_dir=str(tmp_path / "d"))
    with pytest.raises(AssertionError, match="checker rejected"):
        run_and_check(compiled, AOT_DEFAULT_RUNNER, "c", test_dir=str(tmp_path / "e"),
                      checker=lambda path: False)
    with pytest.raises(tvm.TVMError, match="AOT rule R2"):
        compile_models(case, "c", False)


@needs_make
def test_a_failing_run_reports_the_runtime_message(tmp_path):
    """A C-runtime arena too small for the packed entry's workspace: the program says why."""
    x = relay.var("x", shape=(64, 64))
    y = relay.exp(relay.exp(x) + x)  # an intermediate in the arena
    mod = tvm.IRModule.from_expr(relay.Function([x], relay.nn.softmax(y)))
    inputs = {"x": np.zeros((64, 64), "float32")}
    model = AOTTestModel(module=mod, inputs=inputs, outputs=generate_ref_data(mod, inputs),
                         extra_memory_in_bytes=-100_000)
    with pytest.raises(tvm.TVMError, match="AOT_TEST_FAILURE tvmgen_default run rc=-1: "
                                           "TVMBackendAllocWorkspace"):
        compile_and_run(model, AOT_DEFAULT_RUNNER, "packed", True, test_dir=str(tmp_path))
