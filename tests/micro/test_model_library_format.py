"""Model Library Format: every path and metadata key for an AOT factory (C interface) and a graph
factory, several modules in one tar, and the refusals (repeated names, modules without C)."""
from __future__ import annotations

import datetime
import functools
import json
import subprocess
import tarfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _micro_models import add_model, build_aot, build_graph, cnn_model, mlp_model, needs_cc

import ember as tvm
from ember import relay
from ember.micro import UnsupportedInModelLibraryFormatError, export_model_library_format
from ember.micro import model_library_format as mlf
from ember.runtime.params import load_param_dict

pytestmark = needs_cc
RUNTIME_FILES = ["runtime/Makefile", "runtime/include/ember/crt/crt.h",
                 "runtime/include/ember/crt/crt_config.h", "runtime/include/ember/c_backend_api.h",
                 "runtime/include/ember/c_packed_func.h", "runtime/include/ember/dlpack.h",
                 "runtime/src/backend/backend_api.c", "runtime/src/backend/workspace.c",
                 "runtime/src/memory/stack_allocator.c", "runtime/platform/host/platform.c"]


@functools.cache
def aot_factory() -> Any:
    mod, params = mlp_model()
    return build_aot(mod, params, name="mlp", **{"link-params": True})


@functools.cache
def graph_factory(target: str = "c") -> Any:
    mod, params = cnn_model()
    return build_graph(mod, params, name="cnn", target=target)


def export(factory: Any, tmp_path: Path, name: str = "model.tar") -> tuple[tarfile.TarFile, dict]:
    path = export_model_library_format(factory, tmp_path / name)
    assert path == tmp_path / name
    tar = tarfile.open(path)  # noqa: SIM115 (the tests read it after return; closed on exit)
    return tar, json.loads(tar.extractfile("metadata.json").read())


def read(tar: tarfile.TarFile, name: str) -> bytes:
    return tar.extractfile(name).read()


def check_common(entry: dict, name: str, executor: str) -> None:
    assert entry["model_name"] == name
    assert entry["executors"] == [executor] and entry["style"] == "full-model"
    datetime.datetime.strptime(entry["export_datetime"], mlf.DATETIME_FORMAT)  # the format only
    assert entry["target"] and entry["target"][0].split()[0] == "c"


def test_aot_factory_c_interface(tmp_path):
    factory = aot_factory()
    tar, meta = export(factory, tmp_path)
    names = set(tar.getnames())
    assert {"metadata.json", "codegen/host/src/mlp_lib0.c", "codegen/host/src/mlp_lib1.c",
            "codegen/host/include/tvmgen_mlp.h", "parameters/mlp.params", "src/mlp.relay",
            *RUNTIME_FILES} <= names
    assert not any(n.startswith(("executor-config", "codegen/host/lib")) for n in names)
    assert meta["version"] == mlf._GENERATED_VERSION == 7
    assert list(meta["modules"]) == ["mlp"]
    entry = meta["modules"]["mlp"]
    check_common(entry, "mlp", "aot")
    assert set(entry["memory"]) == {"functions"}  # no sids: AOT plans one arena
    fmeta = factory.get_model_metadata()
    (main,) = entry["memory"]["functions"]["main"]
    largest = max(op["workspace_size_bytes"] for op in fmeta.operators)
    assert main == {"device": 1, "workspace_size_bytes": fmeta.main.workspace_size_bytes + largest,
                    "io_size_bytes": fmeta.main.io_size_bytes,
                    "constants_size_bytes": fmeta.main.constant_size_bytes,
                    "inputs": {"data": {"size": 80, "dtype": "float32"}},
                    "outputs": {"output": {"size": 40, "dtype": "float32"}}}
    ops = entry["memory"]["functions"]["operator_functions"]
    assert [op["function_name"] for op in ops] == [op["function_name"] for op in fmeta.operators]
    assert all(op["workspace"] == [{"device": 1, "workspace_size_bytes": o["workspace_size_bytes"]}]
               for op, o in zip(ops, fmeta.operators))
    # the files are the build's own
    assert read(tar, "codegen/host/include/tvmgen_mlp.h").decode() == factory.get_header()
    for file_name, text in factory.sources.items():
        assert read(tar, f"codegen/host/src/{file_name}").decode() == text
    assert load_param_dict(read(tar, "parameters/mlp.params")) == {}  # linked into the C
    assert '.rodata.tvm' in read(tar, "codegen/host/src/mlp_lib1.c").decode()
    tvm.ir.assert_structural_equal(tvm.parser.fromtext(read(tar, "src/mlp.relay").decode()),
                                   factory.ir_mod)


def test_aot_constant_pool_params_are_exported(tmp_path):
    mod, params = mlp_model()
    factory = build_aot(mod, params, name="pool", **{"interface-api": "packed"})
    tar, _ = export(factory, tmp_path)
    saved = load_param_dict(read(tar, "parameters/pool.params"))
    assert set(saved) == set(factory.get_params()) and saved
    for k, v in factory.get_params().items():
        np.testing.assert_array_equal(saved[k].numpy(), v.numpy())
    assert "TVMGEN_POOL_CONSTANTS_SIZE" in read(tar, "codegen/host/include/tvmgen_pool.h").decode()


def test_graph_factory(tmp_path):
    factory = graph_factory()
    tar, meta = export(factory, tmp_path)
    names = set(tar.getnames())
    assert {"metadata.json", "codegen/host/src/cnn_lib0.c", "executor-config/graph/cnn.graph",
            "parameters/cnn.params", "src/cnn.relay", *RUNTIME_FILES} <= names
    assert read(tar, "executor-config/graph/cnn.graph").decode() == factory.get_graph_json()
    assert read(tar, "codegen/host/src/cnn_lib0.c").decode() == factory.lib.get_source()
    saved = load_param_dict(read(tar, "parameters/cnn.params"))
    assert sorted(saved) == sorted(factory.get_params())
    entry = meta["modules"]["cnn"]
    check_common(entry, "cnn", "graph")
    graph = factory.graph
    sids = entry["memory"]["sids"]
    assert [s["storage_id"] for s in sids] == sorted(set(graph.storage_id))
    for s in sids:  # a storage id holds every tensor in it at its offset
        eids = [e for e in range(graph.num_entries) if graph.storage_id[e] == s["storage_id"]]
        assert s["size_bytes"] == graph.storage_bytes()[s["storage_id"]]
        assert s["size_bytes"] >= max(graph.offset(e) + graph.nbytes(e) for e in eids)
    bound = {s["input_binding"]: s["size_bytes"] for s in sids if "input_binding" in s}
    assert bound["image"] == 3 * 12 * 12 * 4 and set(bound) == set(graph.input_names)
    (main,) = entry["memory"]["functions"]["main"]
    intermediates = sum(s["size_bytes"] for s in sids if "input_binding" not in s)
    ops = entry["memory"]["functions"]["operator_functions"]
    assert main["workspace_size_bytes"] == intermediates + max(
        op["workspace"][0]["workspace_size_bytes"] for op in ops)
    assert main["io_size_bytes"] == 3 * 12 * 12 * 4 + 10 * 4
    assert main["constants_size_bytes"] == sum(v.nbytes for v in factory.get_params().values())
    kernels = {n.func_name for n in graph.nodes if not n.is_input and n.func_name != "__nop"}
    assert {op["function_name"] for op in ops} == kernels


def test_llvm_target_also_writes_objects(tmp_path):
    mod, params = mlp_model()
    tar, meta = export(build_graph(mod, params, name="mlp", target="llvm"), tmp_path)
    obj = read(tar, "codegen/host/lib/mlp_lib0.o")
    assert obj[:4] == b"\x7fELF"
    assert "codegen/host/src/mlp_lib0.c" in tar.getnames()  # ember's llvm goes through C
    assert meta["modules"]["mlp"]["target"][0].startswith("llvm")


def test_llvm_objects_are_compiled_for_the_targets_cpu(tmp_path, monkeypatch):
    """The C of an llvm target has the target CPU's vector width (the host's: x16 kernels on
    AVX-512); compiled for the baseline CPU, GCC would emulate those vectors with SSE."""
    from ember.target.simd import cpu_choice

    commands = []

    def fake_compiler(cmd, **kwargs):
        commands.append(cmd)
        Path(cmd[cmd.index("-o") + 1]).write_bytes(b"\x7fELF")
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(mlf.subprocess, "run", fake_compiler)
    mlf._populate_codegen_dir({"a.c": "int f(void) { return 0; }\n"}, str(tmp_path), "m",
                              "llvm", "llvm -mcpu=skylake-avx512")
    mlf._populate_codegen_dir({"a.c": "int f(void) { return 0; }\n"}, str(tmp_path), "h", "llvm")
    assert [f for f in cpu_choice("llvm -mcpu=skylake-avx512").arch_flags if f not in commands[0]] == []
    assert [f for f in cpu_choice("llvm").arch_flags if f not in commands[1]] == []


def test_several_modules_in_one_tar(tmp_path):
    mod, _ = add_model()
    first = build_aot(mod, {}, name="first")
    second = build_graph(mod, {}, name="second")
    tar, meta = export([first, second], tmp_path)
    assert sorted(meta["modules"]) == ["first", "second"]
    assert meta["modules"]["second"]["executors"] == ["graph"]
    names = set(tar.getnames())
    assert {"codegen/host/src/first_lib0.c", "codegen/host/src/first_lib1.c",
            "codegen/host/src/second_lib0.c", "codegen/host/include/tvmgen_first.h",
            "executor-config/graph/second.graph"} <= names
    # relay.export_model_library_format is the same function
    assert relay.export_model_library_format is export_model_library_format


def test_repeated_module_names_are_refused(tmp_path):
    mod, _ = add_model()
    a, b = build_aot(mod, {}, name="same"), build_graph(mod, {}, name="same")
    with pytest.raises(ValueError, match="Multiple modules should have unique names: 'same'"):
        export_model_library_format([a, b], tmp_path / "x.tar")
    assert not (tmp_path / "x.tar").exists()


def test_modules_without_c_sources_are_refused(tmp_path):
    factory = build_aot(*add_model(), name="add", **{"interface-api": "packed",
                                                     "unpacked-api": False})
    factory.export_library(tmp_path / "add.so")
    loaded = tvm.runtime.load_module(str(tmp_path / "add.so"))
    with pytest.raises(UnsupportedInModelLibraryFormatError, match="has none"):
        export_model_library_format(loaded, tmp_path / "loaded.tar")
    with pytest.raises(UnsupportedInModelLibraryFormatError, match="executor factories"):
        export_model_library_format(factory.lib, tmp_path / "lib.tar")
    with pytest.raises(tvm.TVMError, match="no module to export"):
        export_model_library_format([], tmp_path / "none.tar")


def test_vm_factories_are_refused(tmp_path):
    mod, _ = add_model()
    with tvm.transform.PassContext(opt_level=3):
        vm = relay.build(mod, "c", executor=relay.backend.Executor("vm"))
    with pytest.raises(UnsupportedInModelLibraryFormatError, match="graph and AOT"):
        export_model_library_format(vm, tmp_path / "vm.tar")


def test_function_memory_map_adds_the_largest_operator_workspace():
    got = mlf._build_function_memory_map({
        "__tvm_main__": {"workspace_size_bytes": 100, "io_size_bytes": 8,
                         "constants_size_bytes": 4},
        "op_a": {"workspace_size_bytes": 30}, "op_b": {"workspace_size_bytes": 50}})
    assert got["main"] == [{"device": 1, "workspace_size_bytes": 150, "io_size_bytes": 8,
                            "constants_size_bytes": 4}]
    assert got["operator_functions"][1] == {
        "function_name": "op_b", "workspace": [{"device": 1, "workspace_size_bytes": 50}]}


def test_populate_codegen_dir_writes_module_sources(tmp_path):
    written = mlf._populate_codegen_dir([graph_factory().lib], str(tmp_path), "net")
    assert written == [str(tmp_path / "host" / "src" / "net_lib0.c")]


FIXED = datetime.datetime(2021, 3, 4, 5, 6, 7, 890, tzinfo=datetime.timezone.utc)


def test_export_datetime_is_the_clock_at_export_in_utc(tmp_path, monkeypatch):
    monkeypatch.setattr(mlf, "_now", lambda: FIXED)  # no wall-clock dependence
    _, meta = export(aot_factory(), tmp_path)
    assert meta["modules"]["mlp"]["export_datetime"] == "2021-03-04 05:06:07Z"


def test_export_is_deterministic_apart_from_the_date(tmp_path, monkeypatch):
    factory = aot_factory()
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    tars = [export(factory, tmp_path / d)[0] for d in ("a", "b")]
    assert tars[0].getnames() == tars[1].getnames()
    for name in tars[0].getnames():
        if name != "metadata.json":
            assert read(tars[0], name) == read(tars[1], name), name
    monkeypatch.setattr(mlf, "_now", lambda: FIXED)
    metas = [export(factory, tmp_path / d, "fixed.tar")[1] for d in ("a", "b")]
    assert metas[0] == metas[1]  # with the clock fixed, metadata.json is identical too
