"""Models exported by ember, loaded and run from C by the native runtime (no Python in the
program), compared with Python's results (float32, rtol = atol = 1e-5; the same kernels run,
so results are normally identical)."""
from __future__ import annotations

import tarfile

import numpy as np
import pytest
from _native_testlib import build_program, compiler, python_output, run, run_program, zoo

import ember
from ember import relay
from ember.relay.backend import Executor
from ember.runtime import native

RTOL = ATOL = 1e-5


def run_lib(run_model, lib, data: np.ndarray, tmp_path, sanitize: bool = False) -> np.ndarray:
    data.tofile(tmp_path / "in0.bin")
    proc = run_program([run_model, lib, tmp_path / "out", tmp_path / "in0.bin"], sanitize)
    assert proc.stdout.startswith("inputs ")
    return np.fromfile(tmp_path / "out0.bin", "float32")


@pytest.mark.parametrize("kind", ["graph", "aot"])
def test_exported_mlp_runs_from_c(run_model, mlp_exports, kind, tmp_path):
    out = run_lib(run_model, mlp_exports["dir"] / f"{kind}.so", mlp_exports["input"], tmp_path)
    np.testing.assert_allclose(out.reshape(mlp_exports["expected"].shape),
                               mlp_exports["expected"], rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("kind", ["graph", "aot"])
def test_saved_compiled_model_runs_from_c(run_model, mlp_exports, kind, tmp_path):
    """A library of ember.compile / `ember compile` (its record at the root) loads as its
    executor factory."""
    mod, params, _ = zoo("mlp")
    ember.compile(mod, params=params, executor=kind).save(tmp_path / "model.so")
    out = run_lib(run_model, tmp_path / "model.so", mlp_exports["input"], tmp_path)
    np.testing.assert_allclose(out.reshape(mlp_exports["expected"].shape),
                               mlp_exports["expected"], rtol=RTOL, atol=ATOL)


def test_concat_written_in_place_runs_from_c(run_model, tmp_path):
    """A fire module: its concat is a __nop of two inputs at storage offsets (graph JSON
    storage_offset), which the C runtime's views must honour."""
    rng = np.random.default_rng(0)
    x = relay.var("data", shape=(1, 8, 7, 7))
    params, layers = {}, {}
    for name, (c_out, c_in, k) in {"s": (8, 8, 1), "e1": (16, 8, 1), "e3": (16, 8, 3),
                                   "o": (4, 32, 1)}.items():
        params[name] = rng.uniform(-1, 1, (c_out, c_in, k, k)).astype("float32")
        layers[name] = lambda y, n=name, k=k: relay.nn.relu(relay.nn.conv2d(
            y, relay.var(n, shape=params[n].shape), padding=(k // 2, k // 2)))
    s = layers["s"](x)
    out = layers["o"](relay.concatenate([layers["e1"](s), layers["e3"](s)], axis=1))
    mod = ember.IRModule.from_expr(relay.Function(relay.analysis.free_vars(out), out))
    factory = relay.build(mod, "llvm", params=params)
    assert "storage_offset" in factory.get_graph_json()
    assert "storage_size" in factory.get_graph_json()  # the intermediates' arena
    factory.export_library(tmp_path / "fire.so")
    data = rng.uniform(-1, 1, (1, 8, 7, 7)).astype("float32")
    out = run_lib(run_model, tmp_path / "fire.so", data, tmp_path)
    np.testing.assert_allclose(out, python_output(factory, data).ravel(), rtol=RTOL, atol=ATOL)


def test_graph_executor_reports_params_as_inputs(run_model, mlp_exports, tmp_path):
    proc = run_program([run_model, mlp_exports["dir"] / "graph.so", tmp_path / "o"])
    assert proc.stdout.split()[:4] == ["inputs", "7", "outputs", "1"]  # data + 6 weights


def test_aot_with_linked_params(run_model, mlp_exports, tmp_path):
    mod, params, _ = zoo("mlp")
    factory = relay.build(mod, "llvm", params=params,
                          executor=Executor("aot", {"link-params": True}))
    factory.export_library(tmp_path / "linked.so")
    out = run_lib(run_model, tmp_path / "linked.so", mlp_exports["input"], tmp_path)
    np.testing.assert_allclose(out, mlp_exports["expected"].ravel(), rtol=RTOL, atol=ATOL)


def test_tar_of_objects_links_into_a_library_a_c_build_loads(run_model, mlp_exports, tmp_path):
    """export_library("x.tar") holds objects (no C sources); the system compiler links them
    with ember's backend into a library that the native runtime loads."""
    mlp_exports["graph"].export_library(tmp_path / "model.tar")
    with tarfile.open(tmp_path / "model.tar") as tar:
        names = tar.getnames()
        tar.extractall(tmp_path / "x", filter="data")
    assert not any(n.endswith(".c") for n in names)
    objects = sorted(str(p) for p in (tmp_path / "x").glob("*.o"))
    assert objects
    backend = ember.contrib.cc.BACKEND_SOURCE  # what create_shared links in
    run([*compiler(), "-shared", "-fPIC", "-O2", *[f"-I{d}" for d in native.include_dirs()],
         *objects, str(backend), "-o", str(tmp_path / "linked.so"), "-fopenmp", "-ldl", "-lm"])
    out = run_lib(run_model, tmp_path / "linked.so", mlp_exports["input"], tmp_path)
    np.testing.assert_allclose(out, mlp_exports["expected"].ravel(), rtol=RTOL, atol=ATOL)


def test_system_lib_object_links_into_a_program(mlp_exports, tmp_path):
    """Module.save("x.o") of a system-lib build + a C program + the static runtime: the
    kernels register at start-up and the graph executor finds them in runtime.SystemLib."""
    from ember.relay.backend import Runtime

    mod, params, _ = zoo("mlp")
    factory = relay.build(mod, "llvm", params=params,
                          runtime=Runtime("cpp", {"system-lib": True}))
    factory.get_lib().save(str(tmp_path / "model.o"))
    (tmp_path / "graph.json").write_text(factory.get_graph_json())
    (tmp_path / "model.params").write_bytes(ember.runtime.save_param_dict(factory.get_params()))
    from _native_testlib import PROGRAMS

    exe = tmp_path / "syslib"
    run([*compiler(), "-std=c99", "-O1", *[f"-I{d}" for d in native.include_dirs()],
         str(PROGRAMS / "run_syslib.c"), str(tmp_path / "model.o"), "-o", str(exe),
         *native.link_flags(static=True), "-fopenmp", "-lm"])
    mlp_exports["input"].tofile(tmp_path / "in.bin")
    run_program([exe, tmp_path / "graph.json", tmp_path / "model.params", tmp_path / "in.bin",
                 tmp_path / "out.bin"])
    out = np.fromfile(tmp_path / "out.bin", "float32")
    np.testing.assert_allclose(out, mlp_exports["expected"].ravel(), rtol=RTOL, atol=ATOL)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["graph", "aot"])
def test_exported_resnet_runs_from_c(run_model, kind, tmp_path):
    mod, params, shape = zoo("resnet")
    executor = Executor("aot") if kind == "aot" else Executor("graph")
    factory = relay.build(mod, "llvm", params=params, executor=executor)
    factory.export_library(tmp_path / "resnet.so")
    data = np.random.default_rng(2).uniform(-1, 1, shape).astype("float32")
    expected = python_output(factory, data)
    out = run_lib(run_model, tmp_path / "resnet.so", data, tmp_path)
    np.testing.assert_allclose(out, expected.ravel(), rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("kind", ["graph", "aot"])
def test_exported_mlp_runs_under_sanitizers(mlp_exports, kind, tmp_path):
    """The whole load-create-run path under AddressSanitizer and UBSan (reports fail it)."""
    from _native_testlib import PROGRAMS

    exe = build_program(PROGRAMS / "run_model.c", tmp_path / "run_model_asan", sanitize=True)
    out = run_lib(exe, mlp_exports["dir"] / f"{kind}.so", mlp_exports["input"], tmp_path,
                  sanitize=True)
    np.testing.assert_allclose(out, mlp_exports["expected"].ravel(), rtol=RTOL, atol=ATOL)


def test_onnx_model_with_source_nodes_runs_from_c(run_model, tmp_path):
    """An imported model's graph lists each kernel's ONNX nodes (``source_nodes``, a list in
    the node attrs); the C graph executor reads past them."""
    pytest.importorskip("onnx", reason="needs the onnx package")
    from onnx import TensorProto, helper

    w = helper.make_tensor("w", TensorProto.FLOAT, [4, 4],
                           np.random.default_rng(0).uniform(-1, 1, 16).astype("float32"))
    nodes = [helper.make_node("MatMul", ["data", "w"], ["m"], name="matmul"),
             helper.make_node("Relu", ["m"], ["y"], name="relu")]
    io = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 4]) for n in ("data", "y")]
    model = helper.make_model(helper.make_graph(nodes, "g", io[:1], io[1:], [w]),
                              opset_imports=[helper.make_opsetid("", 17)])
    mod, params = relay.frontend.from_onnx(model)
    factory = relay.build(mod, "llvm", params=params)
    assert '"source_nodes"' in factory.get_graph_json()
    factory.export_library(tmp_path / "model.so")
    data = np.random.default_rng(1).uniform(-1, 1, (2, 4)).astype("float32")
    out = run_lib(run_model, tmp_path / "model.so", data, tmp_path)
    np.testing.assert_allclose(out.reshape(2, 4), python_output(factory, data), rtol=RTOL,
                               atol=ATOL)
