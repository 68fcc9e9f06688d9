"""Modules: imports, export_library/load_module (also in a process without a compiler),
rejection of bad files, time_evaluator."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import ember
from ember.runtime import load_module
from ember.runtime.errors import ArtifactError
from ember.runtime.loaders import BLOB_MAGIC, DSOModule
from ember.runtime.module import CSourceModule, Module, PyModule

# the shared helper sits beside this file (also under --import-mode=importlib)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _ffi_testlib import C_SOURCE, KVModule, requires_cc  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HERE = os.path.dirname(os.path.abspath(__file__))
KV_SOURCE = C_SOURCE + r"""
/* kv_lookup(key): the imported Python module's "get", found through the environment */
TVM_DLL int kv_lookup(TVMValue* args, int* codes, int n, TVMValue* ret, int* ret_code, void* h) {
  static TVMFunctionHandle get = NULL;
  if (get == NULL && TVMBackendGetFuncFromEnv(__tvm_module_ctx, "get", &get) != 0) return -1;
  return TVMFuncCall(get, args, codes, n, ret, ret_code);
}
"""


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> str:
    """A library with an imported KVModule, exported to .so."""
    if ember.contrib.cc.get_cc() is None:
        pytest.skip("no C compiler found")
    lib = CSourceModule(KV_SOURCE)
    lib.import_module(KVModule({"a": 1, "b": 22}))
    path = str(tmp_path_factory.mktemp("export") / "model.so")
    lib.export_library(path)
    return path


def test_python_module_functions_and_imports():
    kv = KVModule({"x": 5})
    outer = PyModule({"twice": lambda v: 2 * v})
    outer.import_module(kv)
    assert outer["twice"](4) == 8
    assert outer.get_function("get", query_imports=True)("x") == 5
    assert outer.imported_modules == [kv]
    with pytest.raises(AttributeError, match="has no function named 'get'"):
        outer.get_function("get")
    with pytest.raises(AttributeError, match="or its imports has no function named 'zzz'"):
        outer.get_function("zzz", query_imports=True)
    with pytest.raises(ValueError, match="cycle"):
        kv.import_module(outer)


@requires_cc
def test_exported_library_loads_with_imports_in_process(exported):
    mod = load_module(exported)
    assert isinstance(mod, DSOModule) and mod.type_key == "library"
    (kv,) = mod.imported_modules
    assert isinstance(kv, KVModule) and kv.table == {"a": 1, "b": 22}
    assert mod["kv_lookup"]("b") == 22
    assert mod.get_function("keys", query_imports=True)() == ["a", "b"]
    out = ember.nd.empty((2,), "float32")
    ones = ember.nd.array(np.ones(2, "float32"))
    mod["add_f32"](ones, ones, out)
    np.testing.assert_array_equal(out.numpy(), [2, 2])


@requires_cc
def test_exported_library_runs_without_a_compiler(exported, tmp_path):
    script = textwrap.dedent(f"""
        import numpy as np
        import ember
        from ember.contrib import cc
        from ember.runtime.errors import CompilerNotFoundError
        import _ffi_testlib  # registers runtime.module.loadbinary_testing.KVModule
        try:
            cc.find_cc()
            raise SystemExit("a compiler was found")
        except CompilerNotFoundError:
            pass
        mod = ember.runtime.load_module({exported!r})
        assert mod["kv_lookup"]("a") == 1
        assert mod.get_function("get", query_imports=True)("b") == 22
        a = ember.nd.array(np.arange(4, dtype="float32"))
        out = ember.nd.empty((4,), "float32")
        mod["add_f32"](a, a, out)
        assert out.numpy().tolist() == [0, 2, 4, 6]
        print("OK")
    """)
    env = {k: v for k, v in os.environ.items() if k != "CC"}
    empty_bin = tmp_path / "bin"
    empty_bin.mkdir()
    env.update(PATH=str(empty_bin), PYTHONPATH=os.pathsep.join([REPO, HERE]),
               EMBER_CACHE_DIR=str(tmp_path / "cache"), HOME=str(tmp_path))
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "OK"


@requires_cc
def test_non_dso_root_module_is_returned_by_load(tmp_path):
    kv = KVModule({"k": 3})
    kv.import_module(CSourceModule(C_SOURCE))
    kv.export_library(str(tmp_path / "kv.so"))
    loaded = load_module(str(tmp_path / "kv.so"))
    assert isinstance(loaded, KVModule) and loaded["get"]("k") == 3
    (lib,) = loaded.imported_modules
    assert lib["hello"]() == "hello from C"


@requires_cc
def test_tar_export_round_trip(tmp_path):
    lib = CSourceModule(C_SOURCE)
    lib.import_module(KVModule({"t": 9}))
    lib.export_library(str(tmp_path / "m.tar"))
    loaded = load_module(str(tmp_path / "m.tar"))
    assert loaded["hello"]() == "hello from C"
    assert loaded.get_function("get", query_imports=True)("t") == 9


def test_export_of_unserialisable_module_fails_clearly(tmp_path):
    with pytest.raises(ember.TVMError, match="savebinary_PyModule"):
        PyModule({"f": lambda: 1}).export_library(str(tmp_path / "x.so"))


def test_load_missing_file():
    with pytest.raises(ArtifactError, match="no such file"):
        load_module("/nonexistent/model.so")


def test_load_text_file(tmp_path):
    path = tmp_path / "notes.so"
    path.write_text("just some text\n")
    with pytest.raises(ArtifactError, match=r"notes.so: not a shared library"):
        load_module(str(path))


def test_load_unknown_extension(tmp_path):
    path = tmp_path / "x.weird"
    path.write_bytes(b"1234")
    with pytest.raises(ArtifactError, match="no loader for format 'weird'"):
        load_module(str(path))


def _system_libm() -> str | None:
    for path in ("/lib/x86_64-linux-gnu/libm.so.6", "/lib/aarch64-linux-gnu/libm.so.6",
                 "/usr/lib/libm.so.6", "/lib64/libm.so.6", "/usr/lib/libm.dylib"):
        if os.path.exists(path):
            return path
    return None


def test_load_foreign_library():
    libm = _system_libm()
    if libm is None:
        pytest.skip("no system libm found to use as a foreign library")
    with pytest.raises(ArtifactError, match="libm.* not an ember library"):
        load_module(libm)


@requires_cc
@pytest.mark.parametrize("keep", [100, 0.9])
def test_load_truncated_library(exported, tmp_path, keep):
    with open(exported, "rb") as f:
        data = f.read()
    n = keep if isinstance(keep, int) else int(len(data) * keep)
    path = tmp_path / "truncated.so"
    path.write_bytes(data[:n])
    with pytest.raises(ArtifactError, match="truncated.so: truncated"):
        load_module(str(path))


@requires_cc
@pytest.mark.parametrize("offset, value, message", [(0, b"X", "bad magic"),
                                                    (8, b"\x07", "blob version 7"),
                                                    (16, b"\xff", "disagrees"),
                                                    (24, b"\x01", "checksum mismatch"),
                                                    (28, b"\x01", "reserved header field"),
                                                    (40, b"\x09", "checksum mismatch"),
                                                    (-1, b"\x80", "checksum mismatch")])
def test_load_corrupt_blob(exported, tmp_path, offset, value, message):
    with open(exported, "rb") as f:
        data = bytearray(f.read())
    start = data.index(BLOB_MAGIC)
    at = start + offset if offset >= 0 else start + blob_size(data, start) + offset
    data[at:at + len(value)] = bytes(b ^ v for b, v in zip(data[at:at + len(value)], value)) \
        if offset >= 24 or offset < 0 else value
    path = tmp_path / "corrupt.so"
    path.write_bytes(bytes(data))
    with pytest.raises(ArtifactError, match=message):
        load_module(str(path))


def blob_size(data: bytes, start: int) -> int:
    """The blob's bytes (header + payload) from its header at ``start``."""
    return 32 + int.from_bytes(data[start + 16:start + 24], "little")


@requires_cc
def test_every_changed_blob_byte_is_reported(exported, tmp_path):
    with open(exported, "rb") as f:
        data = f.read()
    start = data.index(BLOB_MAGIC)
    size = blob_size(data, start)
    for pos in sorted({*range(0, 40), *range(40, size, max(1, size // 60)), size - 1}):
        blob = bytearray(data)
        blob[start + pos] ^= 0x5A
        path = tmp_path / f"flip{pos}.so"
        path.write_bytes(bytes(blob))
        with pytest.raises(ArtifactError, match=r"flip\d+\.so: .*(bad magic|blob version|reserved|"
                                                r"disagrees|checksum mismatch)"):
            load_module(str(path))


@requires_cc
def test_load_same_library_twice_gives_independent_modules(exported):
    first, second = load_module(exported), load_module(exported)
    assert first is not second
    assert first["kv_lookup"]("a") == 1 and second["kv_lookup"]("b") == 22


@requires_cc
def test_c_source_module_source_and_save(tmp_path):
    mod = CSourceModule(C_SOURCE)
    assert mod.is_dso_exportable and mod.get_source() == C_SOURCE and mod.type_key == "c"
    mod.save(str(tmp_path / "lib.c"))
    assert load_module(str(tmp_path / "lib.c"))["hello"]() == "hello from C"


@requires_cc
def test_time_evaluator_of_compiled_function():
    mod = CSourceModule(C_SOURCE)
    a = ember.nd.array(np.ones(1000, "float32"))
    timer = mod.time_evaluator("add_f32", ember.cpu(0), number=5, repeat=3)
    res = timer(a, a, ember.nd.empty((1000,), "float32"))
    assert len(res.results) == 3 and res.mean > 0
    assert res.min <= res.median <= res.max and res.std >= 0
    assert "mean (ms)" in str(res)
    with pytest.raises(ember.TVMError, match="add_f32: expected 3 arguments"):
        timer(a)


def test_time_evaluator_of_python_function_with_min_repeat_ms():
    mod = PyModule({"f": lambda: sum(range(10))})
    res = mod.time_evaluator("f", ember.cpu(0), number=1, repeat=2, min_repeat_ms=5)()
    assert len(res.results) == 2 and all(r > 0 for r in res.results)


def test_module_is_a_packed_func_argument():
    kv = KVModule({"a": 1})
    assert ember.get_global_func("testing.echo")(kv) is kv
    assert isinstance(kv, Module)
