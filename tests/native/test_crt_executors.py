"""The C executors on the C runtime (firmware-style: no Python, no malloc, one arena): the AOT
executor runs a packed-interface model for Runtime("crt") with its constants loaded from a
params array; the graph executor is covered by apps/bundle_deploy (test_apps.py). Outputs are
compared with Python's (float32, rtol = atol = 1e-5)."""
from __future__ import annotations

import re
import shutil
import sys

import numpy as np
import pytest
from _native_testlib import PROGRAMS, REPO, compiler, python_output, run

import ember
from ember import relay
from ember.micro import get_standalone_crt_dir
from ember.relay.backend import Executor, Runtime

sys.path.insert(0, str(REPO / "apps" / "bundle_deploy"))
from build_model import c_array


@pytest.fixture(scope="module")
def crt_libs(tmp_path_factory):
    compiler()
    if shutil.which("make") is None:
        pytest.skip("make not found")
    out = tmp_path_factory.mktemp("crt")
    run(["make", "-C", get_standalone_crt_dir(), f"BUILD={out}", f"CC={' '.join(compiler())}",
         "executor", "platform"])
    return out


def dense_model() -> tuple[ember.IRModule, dict, tuple[int, ...]]:
    """relu(dense(x, w) + b): small, with constants (a pool the params fill)."""
    x = relay.var("data", shape=(1, 16), dtype="float32")
    w, b = relay.var("w", shape=(8, 16)), relay.var("b", shape=(8,))
    body = relay.nn.relu(relay.nn.bias_add(relay.nn.dense(x, w), b))
    rng = np.random.default_rng(4)
    params = {"w": rng.standard_normal((8, 16)).astype("float32"),
              "b": rng.standard_normal(8).astype("float32")}
    return ember.IRModule.from_expr(relay.Function([x, w, b], body)), params, (1, 16)


def test_aot_executor_on_the_c_runtime(crt_libs, tmp_path):
    mod, params, shape = dense_model()
    factory = relay.build(mod, "c", params=params, executor=Executor("aot"),
                          runtime=Runtime("crt"))
    (tmp_path / "model.c").write_text(factory.get_lib().get_source())
    blob = bytes(ember.runtime.save_param_dict(factory.get_params()))
    (tmp_path / "data.c").write_text(
        c_array("ember_metadata", factory.get_executor_config().encode())
        + c_array("ember_params", blob))
    exe = tmp_path / "crt_aot"
    includes = [f"-I{d}" for d in ember.micro.get_crt_include_dirs()]
    run([*compiler(), "-std=c99", "-O2", *includes, str(PROGRAMS / "crt_aot.c"),
         str(tmp_path / "model.c"), str(tmp_path / "data.c"), str(crt_libs / "platform_host.o"),
         str(crt_libs / "libembercrt_executor.a"), str(crt_libs / "libembercrt.a"), "-o",
         str(exe), "-lm"])
    data = np.random.default_rng(3).uniform(-1, 1, shape).astype("float32")
    data.tofile(tmp_path / "in.bin")
    proc = run([str(exe), str(tmp_path / "in.bin"), str(tmp_path / "out.bin")])
    codes = {"kTvmErrorExecutorNotReady": (6 << 8) | 5}
    assert f"before set_input: {codes['kTvmErrorExecutorNotReady']} run: input 'data' has not " \
           "been set" in proc.stdout
    np.testing.assert_allclose(np.fromfile(tmp_path / "out.bin", "float32"),
                               python_output(factory, data).ravel(), rtol=1e-5, atol=1e-5)
    peak = int(re.search(r"peak heap: (\d+)", proc.stdout)[1])
    assert peak >= (8 * 16 + 8) * 4  # the constant pool is in the arena
    assert "live blocks after release: 0" in proc.stdout
