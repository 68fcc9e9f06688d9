"""The Python side of deployment without Python: system-lib builds seen by
ember.runtime.system_lib(), Module.save of objects and sources, export_library to .tar
(objects) and .a, static archives from ember.contrib.cc, the library answering
get_model_metadata, and building the native runtime on demand."""
from __future__ import annotations

import json
import tarfile

import numpy as np
import pytest
from _native_testlib import compiler, run, zoo

import ember
from ember import relay
from ember.contrib import cc
from ember.relay.backend import Executor, Runtime
from ember.runtime import native


def add_module() -> ember.IRModule:
    a = relay.var("a", shape=(1, 4), dtype="float32")
    b = relay.var("b", shape=(1, 4), dtype="float32")
    return ember.IRModule.from_expr(relay.Function([a, b], relay.add(a, b)))


def elf_type(path) -> int:
    with open(path, "rb") as f:
        data = f.read(18)
    assert data[:4] == b"\x7fELF", data[:4]
    return int.from_bytes(data[16:18], "little")  # 1 relocatable, 3 shared


def test_system_lib_functions_are_found_by_name():
    compiler()
    factory = relay.build(add_module(), "llvm", mod_name="syslib_add",
                          runtime=Runtime("cpp", {"system-lib": True}))
    assert "TVMBackendRegisterSystemLibSymbol" in factory.get_lib().get_source()
    func = ember.runtime.system_lib()["tvmgen_syslib_add_fused_add"]
    a, b = np.ones((1, 4), "float32"), np.arange(4, dtype="float32").reshape(1, 4)
    out = ember.nd.empty((1, 4), "float32")
    func(ember.nd.array(a), ember.nd.array(b), out)
    np.testing.assert_array_equal(out.numpy(), a + b)
    assert ember.get_global_func("runtime.SystemLib")() is ember.runtime.system_lib()
    with pytest.raises(AttributeError, match="no function named 'not_registered'"):
        ember.runtime.system_lib()["not_registered"]


def test_system_lib_from_the_target_string():
    compiler()
    factory = relay.build(add_module(), "llvm --system-lib", mod_name="syslib_target")
    assert "tvmgen_syslib_target_register_system_lib" in factory.get_lib().get_source()


def test_crt_graph_build_has_a_function_table():
    compiler()
    factory = relay.build(add_module(), "c", runtime=Runtime("crt", {"system-lib": True}))
    src = factory.get_lib().get_source()
    assert "tvmgen_default_func_registry" in src and "constructor" not in src


def test_save_writes_objects_and_sources(tmp_path):
    compiler()
    lib = relay.build(add_module(), "llvm").get_lib()
    lib.save(str(tmp_path / "m.o"))
    lib.save(str(tmp_path / "m.c"))
    lib.save(str(tmp_path / "m.a"))
    assert elf_type(tmp_path / "m.o") == 1
    assert (tmp_path / "m.c").read_text() == lib.get_source()
    assert (tmp_path / "m.a").read_bytes().startswith(b"!<arch>\n")


def test_export_tar_holds_objects_and_loads_back(tmp_path):
    compiler()
    factory = relay.build(add_module(), "llvm")
    factory.export_library(tmp_path / "m.tar")
    with tarfile.open(tmp_path / "m.tar") as tar:
        names = tar.getnames()
        manifest = json.load(tar.extractfile("ember_manifest.json"))
    assert manifest["format"] == "ember-tar"
    assert [n for n in names if n.endswith(".o")] and not [n for n in names if n.endswith(".c")]
    m = ember.runtime.load_module(tmp_path / "m.tar")["default"](ember.cpu())
    m.run(a=np.ones((1, 4), "float32"), b=np.ones((1, 4), "float32"))
    np.testing.assert_array_equal(m.get_output(0).numpy(), np.full((1, 4), 2, "float32"))


def test_export_static_archive(tmp_path):
    compiler()
    relay.build(add_module(), "llvm").export_library(tmp_path / "m.a")
    assert (tmp_path / "m.a").read_bytes().startswith(b"!<arch>\n")
    members = run(["ar", "t", str(tmp_path / "m.a")]).stdout.split()
    assert "devc.o" in members and len(members) == 2


def test_create_staticlib_compiles_sources(tmp_path):
    compiler()
    (tmp_path / "f.c").write_text("int f(void) { return 41; }\n")
    cc.create_staticlib(tmp_path / "libf.a", [str(tmp_path / "f.c")])
    (tmp_path / "main.c").write_text("int f(void);\nint main(void) { return f() == 41 ? 0 : 1; }\n")
    run([*compiler(), str(tmp_path / "main.c"), str(tmp_path / "libf.a"), "-o",
         str(tmp_path / "main")])
    run([str(tmp_path / "main")])


def test_create_object_failure_names_the_command(tmp_path):
    compiler()
    (tmp_path / "bad.c").write_text("int f(void) { return }\n")
    with pytest.raises(ember.runtime.errors.CompileError, match=r"(?s)command: .*bad\.c"):
        cc.create_object(tmp_path / "bad.o", tmp_path / "bad.c")


def test_library_answers_get_model_metadata(tmp_path):
    compiler()
    mod, params, _ = zoo("mlp")
    factory = relay.build(mod, "llvm", params=params, executor=Executor("aot"), mod_name="mlp")
    expected = factory.get_executor_config()
    assert factory.get_lib()["get_model_metadata"]() == expected
    factory.export_library(tmp_path / "mlp.so")
    loaded = ember.runtime.load_module(tmp_path / "mlp.so")
    assert loaded.get_lib()["get_model_metadata"]() == expected
    assert loaded["get_model_metadata"]() == expected


def test_graph_library_has_no_model_metadata():
    compiler()
    lib = relay.build(add_module(), "llvm").get_lib()
    with pytest.raises(AttributeError, match="get_model_metadata"):
        lib["get_model_metadata"]


def test_native_library_is_built_once_and_cached():
    compiler()
    first = native.library_path()
    assert first.name == "libember_runtime.so" and elf_type(first) == 3
    assert native.library_path() == first
    assert native.library_path(static=True).read_bytes().startswith(b"!<arch>\n")
    assert str(first.parent).startswith(str(ember.runtime.cache.cache_dir()))
    for d in native.include_dirs():
        assert any(p.name.endswith(".h") for p in __import__("pathlib").Path(d).rglob("*.h"))


def test_runtime_reaches_the_compiler_driver_through_one_function():
    """ember.runtime imports ember.contrib.cc in compiler_driver() and nowhere else."""
    import ast
    from pathlib import Path

    root = Path(ember.runtime.__file__).parent
    found = []
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom) or node.module is None:
                continue
            names = {a.name for a in node.names}
            if node.module.endswith("contrib.cc") or (node.module.endswith("contrib")
                                                       and "cc" in names):
                found.append(f"{path.relative_to(root)}:{node.lineno}")
    assert len(found) == 1 and found[0].startswith("module.py"), found
