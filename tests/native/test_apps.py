"""The deployment examples, built with their Makefiles and the system compiler and run with no
Python in the process: apps/howto_deploy (C++: an exported .so, graph and AOT, and the
system-lib object linked in) and apps/bundle_deploy (model + params + C runtime in one static
executable). Outputs are compared with Python's (float32, rtol = atol = 1e-5). The apps also
take --model resnet; the zoo's resnet through the native runtime is tested in
test_native_run.py (slow)."""
from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import numpy as np
import pytest
from _native_testlib import REPO, compiler, have, run

import ember

APPS = REPO / "apps"
EMBER_DIR = Path(ember.__file__).parent
RTOL = ATOL = 1e-5


def needs(*tools: str) -> None:
    compiler()
    for tool in tools:
        if not have(tool):
            pytest.skip(f"{tool} not found (install it: apt-get install {tool})")


def make(app: str, build: Path, *args: str) -> str:
    return run(["make", "-C", str(APPS / app), f"BUILD={build}", f"EMBER={EMBER_DIR}",
                *args]).stdout


def check_output(out: Path, expected: Path) -> None:
    np.testing.assert_allclose(np.fromfile(out, "float32"), np.fromfile(expected, "float32"),
                               rtol=RTOL, atol=ATOL)


def howto_deploy(tmp_path: Path, model: str) -> None:
    needs("make", "g++")
    run([sys.executable, str(APPS / "howto_deploy" / "prepare_test_libs.py"), str(tmp_path),
         "--model", model])
    make("howto_deploy", tmp_path, f"CXX={os.environ.get('CXX', 'g++')}")
    for lib in ("deploy_graph.so", "deploy_aot.so"):
        run([str(tmp_path / "cpp_deploy"), str(tmp_path / lib), str(tmp_path / "input.bin"),
             str(tmp_path / f"{lib}.out")])
        check_output(tmp_path / f"{lib}.out", tmp_path / "expected.bin")
    run([str(tmp_path / "cpp_deploy_syslib"), str(tmp_path / "deploy_graph.json"),
         str(tmp_path / "deploy.params"), str(tmp_path / "input.bin"), str(tmp_path / "sys.out")])
    check_output(tmp_path / "sys.out", tmp_path / "expected.bin")


def bundle_deploy(tmp_path: Path, model: str) -> int:
    needs("make")
    run([sys.executable, str(APPS / "bundle_deploy" / "build_model.py"), str(tmp_path),
         "--model", model])
    if not have("size"):
        pytest.skip("size not found (binutils)")
    sizes = make("bundle_deploy", tmp_path, f"CC={' '.join(compiler())}", "STATIC=")
    assert re.search(r"text\s+data\s+bss", sizes)
    proc = run([str(tmp_path / "bundle"), str(tmp_path / "input.bin"), str(tmp_path / "o.bin")])
    check_output(tmp_path / "o.bin", tmp_path / "expected.bin")
    peak = int(re.search(r"peak heap: (\d+) bytes", proc.stdout)[1])
    params = int(re.search(r"params (\d+) bytes", proc.stdout)[1])
    assert peak > params  # the weights live in the arena, with the activations
    assert "live blocks after release: 0" in proc.stdout
    return peak


def test_howto_deploy_mlp(tmp_path):
    howto_deploy(tmp_path, "mlp")


def test_bundle_deploy_mlp(tmp_path):
    bundle_deploy(tmp_path, "mlp")
