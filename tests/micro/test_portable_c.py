"""Portable C: every C file of a Model Library Format export (generated kernels, the AOT
C-interface code and header, the C runtime and its host platform) and ember's hosted backend
(``ember/runtime/csrc``) compiles with ``-std=c99 -Wall -Wextra -Werror``, with and without
``-fopenmp``, with gcc and with clang when it is installed.

Models: an MLP (graph executor), a small CNN with conv2d, batch_norm, max and average pooling
(graph executor, target ``llvm``: parallel loops), reductions with softmax (graph), and the
MLP through the AOT executor's C interface (``runtime=crt``, unpacked calls, linked params).
Each (model, compiler, flags) is one compiler run over all its files, from a scratch folder.
"""
from __future__ import annotations

import functools
import shutil
import subprocess
import tarfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _micro_models import build_aot, build_graph, mlp_model, needs_cc

import ember as tvm
from ember import relay

pytestmark = needs_cc
STRICT = ["-std=c99", "-Wall", "-Wextra", "-Werror", "-O1"]
FLAG_SETS = {"no-openmp": [], "openmp": ["-fopenmp"]}
COMPILERS = [c for c in ("gcc", "clang") if shutil.which(c)]
CSRC = Path(tvm.__file__).parent / "runtime" / "csrc"
INCLUDE = Path(tvm.__file__).parent / "include"


def _cnn_bn(c: int = 4) -> tuple[tvm.IRModule, dict[str, Any]]:
    """conv2d -> batch_norm -> relu -> max_pool -> conv2d -> avg_pool -> flatten -> dense,
    ``c`` channels (4: plain kernels on AVX2 builds; 8: the blocked NCHWc kernels)."""
    rng = np.random.default_rng(5)
    x = relay.var("image", shape=(1, 3, 10, 10))
    names = {"w1": (c, 3, 3, 3), "gamma": (c,), "beta": (c,), "mean": (c,), "var": (c,),
             "w2": (c, c, 3, 3), "fc": (5, 4 * c)}
    p = {n: relay.var(n, shape=s) for n, s in names.items()}
    y = relay.nn.conv2d(x, p["w1"], padding=(1, 1), channels=c, kernel_size=(3, 3))
    y = relay.nn.batch_norm(y, p["gamma"], p["beta"], p["mean"], p["var"])[0]
    y = relay.nn.max_pool2d(relay.nn.relu(y), pool_size=(2, 2), strides=(2, 2))
    y = relay.nn.conv2d(y, p["w2"], padding=(1, 1), channels=c, kernel_size=(3, 3))
    y = relay.nn.avg_pool2d(y, pool_size=(3, 3), strides=(2, 2))
    y = relay.nn.dense(relay.nn.batch_flatten(y), p["fc"], units=5)
    params = {n: rng.standard_normal(s).astype("float32") for n, s in names.items()}
    params["var"] = np.abs(params["var"]) + 0.5
    return tvm.IRModule.from_expr(relay.Function(relay.analysis.free_vars(y), y)), params


def _reductions() -> tuple[tvm.IRModule, dict[str, Any]]:
    """sum, max, mean and argmax over axes, then softmax and log_softmax."""
    x = relay.var("x", shape=(3, 4, 5))
    s = relay.sum(x, axis=[2], keepdims=True)
    m = relay.max(x, axis=[1, 2], keepdims=True)
    y = relay.nn.softmax(relay.subtract(x, s) * relay.mean(x, axis=[0], keepdims=True), axis=-1)
    z = relay.nn.log_softmax(relay.add(y, m), axis=1)
    a = relay.cast(relay.argmax(z, axis=[2]), "float32")
    return tvm.IRModule.from_expr(relay.Function([x], relay.Tuple([z, a]))), {}


def _checked_gather() -> tuple[tvm.IRModule, dict[str, Any]]:
    """take of run-time indices checked in range (kernels/index_check.h: its error text is
    built without stdio, for firmware)."""
    x = relay.var("x", shape=(5, 4))
    i = relay.var("i", shape=(3,), dtype="int64")
    y = relay.take(x, relay.check_indices(x, i, axes=0, where="Gather node 'g'"), axis=0,
                   mode="wrap")
    return tvm.IRModule.from_expr(relay.Function([x, i], y)), {}


@functools.cache
def exported(name: str, tmp: Path) -> Path:
    """The MLF of model ``name``, extracted under ``tmp/name``."""
    from ember.micro import export_model_library_format

    if name == "mlp":
        factory = build_graph(*mlp_model(), name="mlp")
    elif name == "cnn_bn":
        factory = build_graph(*_cnn_bn(), name="cnn", target="llvm")
    elif name == "cnn_nchwc":  # target c: portable build, NCHW4c conv kernels (header)
        factory = build_graph(*_cnn_bn(8), name="cnnc", target="c")
    elif name == "reductions":
        factory = build_graph(*_reductions(), name="red")
    elif name == "checked_gather":
        factory = build_graph(*_checked_gather(), name="gather")
    else:
        factory = build_aot(*mlp_model(), name="mlp_c", **{"link-params": True})
    out = tmp / name
    with tarfile.open(export_model_library_format(factory, tmp / f"{name}.tar")) as tar:
        tar.extractall(out, filter="data")
    return out


def _compile_all(cc: str, flags: list[str], files: list[Path], includes: list[Path],
                 workdir: Path) -> None:
    workdir.mkdir(parents=True, exist_ok=True)
    cmd = [cc, *STRICT, *flags, *(f"-I{i}" for i in includes), "-c", *map(str, files)]
    proc = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"{' '.join(cmd)}\n{proc.stderr[:4000]}"


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("portable_c")


# (model, flags): the conv models (their kernel headers inline under the strict flags: 10 s
# each, a compile no other test shares) in the slow set. The default run builds the other
# models' generated C under every flag set, and tests/tir/test_kernel_objects.py checks every
# kernel header (conv included, at each lane count) against the same warning flags (front end
# only: warnings that need the optimiser show in the slow set).
def _model_flags(model: str, flags: str) -> Any:
    slow = model.startswith("cnn")
    return pytest.param(model, flags, id=f"{model}-{flags}",
                        marks=[pytest.mark.slow] if slow else [])


MODEL_FLAGS = [_model_flags(m, f)
               for m in ("mlp", "cnn_bn", "cnn_nchwc", "reductions", "checked_gather", "aot_c") for f in FLAG_SETS]


@pytest.mark.parametrize("cc", COMPILERS)
@pytest.mark.parametrize("model, flags", MODEL_FLAGS)
def test_model_library_format_c_builds_warning_free(scratch, model, flags, cc):
    root = exported(model, scratch)
    files = sorted(root.glob("codegen/host/src/*.c"))
    assert files, f"no generated C in {root}"
    if model == "aot_c":
        files += sorted(root.glob("runtime/src/*/*.c"))
        files += sorted(root.glob("runtime/platform/*/*.c"))
    _compile_all(cc, FLAG_SETS[flags], files,
                 [root / "runtime" / "include", root / "codegen" / "host" / "include"],
                 scratch / "obj" / f"{model}-{flags}-{cc}")


@pytest.mark.parametrize("cc", COMPILERS)
@pytest.mark.parametrize("flags", FLAG_SETS)
def test_hosted_backend_builds_warning_free(tmp_path, flags, cc):
    _compile_all(cc, ["-fPIC", *FLAG_SETS[flags]], sorted(CSRC.glob("*.c")), [INCLUDE],
                 tmp_path)


def test_blocked_conv_kernels_ship_with_the_export(scratch):
    """The NCHWc conv kernels are called from the generated C and their headers are in the
    export (the compile test above builds them with the strict flags in the slow set; by
    default tests/tir/test_kernel_objects.py checks them against the same warnings)."""
    root = exported("cnn_nchwc", scratch)
    text = "\n".join(p.read_text() for p in root.glob("codegen/host/src/*.c"))
    assert "ember_conv2d_nchwc_x4(" in text
    assert list(root.rglob("ember/kernels/conv_nchwc_impl.h"))
    # the first conv (3 channels of a plain NCHW input) on the NCHW-input kernel
    assert "ember_conv2d_nchw_input_x4(" in text
    assert list(root.rglob("ember/kernels/conv_nchw_input_impl.h"))


# slow: exports three models only to read their C (the hosted builds compile the same
# EMBER_* macro forms in the default run)
@pytest.mark.slow
def test_openmp_hints_are_guarded(scratch):
    """The generated loops carry EMBER_* macros, never a bare pragma; parallel loops are task
    functions for TVMBackendParallelLaunch, never OpenMP regions."""
    # the blocked cnn's flatten is now the layout kernel's call, so its generic loops (with
    # the SIMD hint) come from the plain-layout build of the same cnn and the reductions
    text = "\n".join(p.read_text() for m in ("cnn_nchwc", "cnn_bn", "reductions")
                     for p in exported(m, scratch).glob("codegen/host/src/*.c"))
    assert "EMBER_SIMD" in text
    assert "#pragma omp" not in text and "omp parallel" not in text
