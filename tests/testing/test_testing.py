"""ember.testing: assert_allclose, targets, marks, fixture factories and the pytest plugin."""
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import ember
import ember.testing as tt

needs_cc = pytest.mark.skipif(tt.find_c_compiler() is None, reason="no C compiler")


def test_assert_allclose_accepts_ndarrays_numpy_and_lists():
    tt.assert_allclose(ember.nd.array([1.0, 2.0]), [1.0, 2.0])
    tt.assert_allclose([1.0, 2.0 + 1e-9], np.array([1.0, 2.0]), rtol=1e-6)
    tt.assert_allclose(ember.nd.array([1, 2]), ember.nd.array([1, 2]))
    with pytest.raises(AssertionError, match=r"shape mismatch: actual has shape \(2,\), "
                                             r"desired has shape \(1, 2\)"):
        tt.assert_allclose([1.0, 2.0], [[1.0, 2.0]])
    with pytest.raises(AssertionError, match="Not equal to tolerance"):
        tt.assert_allclose([1.0], [1.1], rtol=1e-3)
    tt.assert_allclose([1.0], [1.1], atol=0.2)


def test_tolerance_table():
    assert tt.tolerance("float16") == {"rtol": 1e-2, "atol": 1e-2}
    assert tt.tolerance(np.float32) == {"rtol": 1e-5, "atol": 1e-5}
    assert tt.tolerance("float32x4") == tt.tolerance("float32")
    assert tt.tolerance("int8") == {"rtol": 0.0, "atol": 0.0}


def test_conftest_fixtures(tol, allclose):
    assert tol("float64") == {"rtol": 1e-10, "atol": 1e-10}
    allclose(ember.nd.array(np.float32([1.0])), np.float32([1.000001]))
    with pytest.raises(AssertionError):
        allclose(np.int32([1]), np.int32([2]))


@needs_cc
def test_enabled_targets_default_and_environment(monkeypatch):
    monkeypatch.delenv("TVM_TEST_TARGETS", raising=False)
    monkeypatch.delenv("EMBER_TEST_TARGETS", raising=False)
    assert tt.enabled_targets() == [("llvm", ember.cpu(0))]
    monkeypatch.setenv("TVM_TEST_TARGETS", "llvm -mcpu=x; cuda ;c;bogus")
    assert tt.enabled_targets() == [("llvm -mcpu=x", ember.cpu(0)), ("c", ember.cpu(0))]
    assert tt.device_enabled("llvm") and tt.device_enabled("c -keys=cpu")
    assert not tt.device_enabled("cuda") and not tt.device_enabled("vulkan")


def test_no_compiler_means_no_host_targets(monkeypatch):
    monkeypatch.setenv("CC", "/nonexistent/cc")
    monkeypatch.setenv("PATH", "")
    tt.find_c_compiler.cache_clear()
    try:
        assert tt.find_c_compiler() is None
        assert tt.enabled_targets() == []
        assert not tt.requires_llvm.enabled
        assert "C compiler" in tt.requires_llvm.skip_reason
    finally:
        tt.find_c_compiler.cache_clear()


def test_requirements_and_their_marks():
    names = [m.name for m in tt.uses_gpu.marks()]
    assert names == ["gpu"]  # uses_gpu never skips: such tests run on the CPU targets
    assert [m.name for m in tt.requires_gpu.marks()] == ["gpu", "skip"]
    assert "CUDA" in tt.requires_cuda.skip_reason
    assert tt.requires_rpc.enabled == (tt.importlib.util.find_spec("ember.rpc") is not None)

    @tt.requires_gpu
    def sample():
        pass

    assert {m.name for m in sample.pytestmark} == {"gpu", "skip"}
    assert "requirement 'llvm'" in repr(tt.requires_llvm)
    assert tt.skip_if_wheel_test(sample) is sample


def test_parametrize_targets_needs_a_target_argument():
    with pytest.raises(TypeError, match="'target'"):
        @tt.parametrize_targets
        def no_target(dev):
            pass


def test_known_failing_targets_refuses_non_str():
    with pytest.raises(TypeError, match="known_failing_targets: targets are named by str"):
        ember.testing.known_failing_targets(ember.cpu(0))


def test_parameters_validates_its_input():
    with pytest.raises(ValueError, match="2 items"):
        tt.parameters((1, 2), (3,))
    with pytest.raises(ValueError, match="at least one"):
        tt.parameters()


_SAMPLE = textwrap.dedent("""
    import ember
    import ember.testing as tt

    dtype = tt.parameter("float32", "int8")
    shape, size = tt.parameters(((2, 3), 6), ((4,), 4), ids=["2d", "1d"])
    SEEN = []

    def test_parameter(dtype):
        assert dtype in ("float32", "int8")

    def test_parameters_vary_together(shape, size, dtype):
        assert ember.nd.empty(shape, dtype).numpy().size == size

    @tt.parametrize_targets
    def test_default_targets(target, dev):
        assert target == "llvm" and dev == ember.cpu(0)

    @tt.parametrize_targets("llvm", "cuda")
    def test_explicit_targets(target):
        assert target == "llvm"

    def test_plugin_fixtures(target, dev):
        assert dev == ember.device(target)

    @tt.uses_gpu
    def test_uses_gpu_runs():
        pass

    @tt.requires_gpu
    def test_requires_gpu_skips():
        raise AssertionError("must not run")

    @tt.requires_llvm
    def test_requires_llvm_runs():
        pass

    @tt.parametrize_targets("llvm")
    @tt.known_failing_targets("llvm")
    def test_known_failing(target):
        raise AssertionError("fails on llvm")

    @tt.known_failing_targets("llvm -mcpu=x")
    def test_known_failing_plugin(target):
        raise AssertionError("fails on llvm")
""")


@needs_cc
def test_fixtures_marks_and_plugin_under_pytest(tmp_path):
    path = tmp_path / "test_sample.py"
    path.write_text(_SAMPLE)
    env = {k: v for k, v in os.environ.items() if k != "TVM_TEST_TARGETS"}
    root = str(Path(ember.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join([root] + [p for p in [env.get("PYTHONPATH")] if p])
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "-p", "ember.testing.plugin",
                          "-W", "error::pytest.PytestUnknownMarkWarning", str(path)],
                         capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120)
    summary = out.stdout.strip().splitlines()[-1]
    # 2 (parameter) + 2x2 (parameters x dtype) + 1 + 1 (+1 cuda skipped) + 1 + 1 + 1 passed;
    # the two known failures are expected ones
    assert "11 passed, 2 skipped, 2 xfailed" in summary, out.stdout + out.stderr
