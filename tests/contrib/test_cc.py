"""The compiler driver (ember.contrib.cc) and temporary directories (ember.contrib.utils)."""
from __future__ import annotations

import gc
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import ember
from ember.contrib import cc, utils
from ember.runtime.errors import CompileError, CompilerNotFoundError

requires_cc = pytest.mark.skipif(cc.get_cc() is None, reason="no C compiler found")
GOOD = ('#include "ember/c_packed_func.h"\n'
        "TVM_DLL int answer(TVMValue* a, int* c, int n, TVMValue* r, int* rc, void* h) {\n"
        "  r->v_int64 = 42; *rc = kTVMArgInt; return 0; }\n")


def test_missing_compiler_says_what_was_tried(monkeypatch, tmp_path):
    monkeypatch.setenv("CC", "/nonexistent")
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(CompilerNotFoundError) as info:
        cc.find_cc()
    msg = str(info.value)
    assert "$CC='/nonexistent' (not found)" in msg and "cc, gcc, clang" in msg
    assert "apt-get install gcc" in msg
    assert cc.get_cc() is None
    src = tmp_path / "a.c"
    src.write_text(GOOD)
    with pytest.raises(CompilerNotFoundError):
        cc.create_shared(str(tmp_path / "a.so"), [str(src)])


@requires_cc
def test_cc_environment_variable_is_used(monkeypatch):
    monkeypatch.setenv("CC", "gcc" if cc._resolve("gcc") else "cc")
    assert os.path.basename(cc.find_cc()) in ("gcc", "cc")


@requires_cc
def test_compile_error_has_command_stderr_and_kept_source(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path / "cache"))
    src = tmp_path / "broken.c"
    src.write_text("int f(void) { return undefined_variable; }\n")
    with pytest.raises(CompileError) as info:
        cc.create_shared(str(tmp_path / "broken.so"), [str(src)])
    msg = str(info.value)
    assert "command:" in msg and "broken.c" in msg and " -c " in msg  # sources compile alone
    assert "undefined_variable" in msg  # the compiler's stderr
    kept = msg.split("sources kept in ")[1].split(" ---")[0]
    assert os.path.exists(os.path.join(kept, "broken.c"))


@requires_cc
def test_builds_are_cached_by_content(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path / "cache"))
    src = tmp_path / "good.c"
    src.write_text(GOOD)
    first = cc.build_shared([str(src)])
    assert str(first).startswith(str(tmp_path / "cache"))
    inode = first.stat().st_ino  # a rebuild would os.replace a new file onto the name
    assert cc.build_shared([str(src)]) == first and first.stat().st_ino == inode
    assert cc.build_shared([str(src)], options=["-DX=1"]) != first
    src.write_text(GOOD + "\n/* changed */\n")
    assert cc.build_shared([str(src)]) != first


def test_own_headers_are_read_again_only_when_written(tmp_path):
    # ember's headers join every object's cache key; a build reads them again only when one
    # changed (here a stand-in directory: a header rewritten, one added)
    (tmp_path / "k").mkdir()
    (tmp_path / "a.h").write_bytes(b"int a;")
    first = cc._own_header_chunks(tmp_path)
    assert first == [b"a.h\0int a;"]
    assert cc._own_header_chunks(tmp_path) is first  # unchanged: not read again
    (tmp_path / "a.h").write_bytes(b"int bb;")
    (tmp_path / "k" / "b.h").write_bytes(b"int c;")
    assert cc._own_header_chunks(tmp_path) == [b"a.h\0int bb;", b"k/b.h\0int c;"]


@requires_cc
def test_create_shared_output_always_has_backend(tmp_path):
    src = tmp_path / "good.c"
    src.write_text(GOOD)
    out = tmp_path / "good.so"
    cc.create_shared(str(out), [str(src)])
    mod = ember.runtime.load_module(str(out))
    assert mod["answer"]() == 42
    symbols = subprocess.run(["nm", "-D", str(out)], capture_output=True, text=True).stdout
    assert "__ember_library_info" in symbols or not symbols  # nm may be missing


@requires_cc
def test_default_flags():
    flags = cc.default_flags()
    for flag in ("-O3", "-fPIC", "-shared", "-std=c99"):
        assert flag in flags
    assert str(cc.INCLUDE_DIR) in flags


@requires_cc
def test_math_functions_leave_errno_alone():
    # without -fno-math-errno GCC keeps sqrtf(x[row]) inside a row's vector loop (a call that
    # may set errno cannot be hoisted): an RMS norm's scale ran 7x slower. Results stay IEEE:
    # the square root of a negative number is still NaN.
    assert "-fno-math-errno" in cc.default_flags()
    from ember import relay

    x, m = relay.var("x", shape=(3, 16)), relay.var("m", shape=(3, 1))
    body = relay.multiply(x, relay.divide(relay.const(1.0), relay.sqrt(m)))
    lib = relay.build(ember.IRModule.from_expr(relay.Function([x, m], body)), "llvm")
    mod = lib["default"](ember.cpu())
    xv = np.ones((3, 16), "float32")
    mv = np.array([[4.0], [-1.0], [0.25]], "float32")
    mod.set_input("x", xv)
    mod.set_input("m", mv)
    mod.run()
    with np.errstate(invalid="ignore"):
        want = xv / np.sqrt(mv)
    np.testing.assert_allclose(mod.get_output(0).numpy(), want, rtol=1e-6)


@requires_cc
def test_create_executable(tmp_path):
    src = tmp_path / "main.c"
    src.write_text('#include <stdio.h>\nint main(void) { printf("hi\\n"); return 0; }\n')
    exe = tmp_path / "main"
    cc.create_executable(str(exe), [str(src)])
    assert subprocess.run([str(exe)], capture_output=True, text=True).stdout == "hi\n"


def test_tempdir_paths_and_cleanup():
    tmp = utils.tempdir()
    path = tmp.path
    with open(tmp.relpath("x.txt"), "w") as f:
        f.write("x")
    assert tmp.listdir() == ["x.txt"] and tmp.relpath("x.txt") == os.path.join(path, "x.txt")
    del tmp
    gc.collect()
    assert not os.path.exists(path)


def test_tempdir_remove_and_context_manager():
    with utils.tempdir() as tmp:
        path = tmp.path
        assert os.path.isdir(path)
    assert not os.path.exists(path)


def test_tempdir_kept_for_debug(monkeypatch):
    monkeypatch.setenv("EMBER_KEEP_TEMPS", "1")
    tmp = utils.tempdir()
    path = tmp.path
    tmp.remove()
    assert os.path.isdir(path)
    os.rmdir(path)
    monkeypatch.delenv("EMBER_KEEP_TEMPS")
    with utils.TempDirectory.set_keep_for_debug():
        kept = utils.tempdir()
    kept.remove()
    assert os.path.isdir(kept.path)
    os.rmdir(kept.path)


def test_tempdir_custom_path_is_not_removed(tmp_path):
    tmp = utils.tempdir(str(tmp_path / "mine"))
    tmp.remove()
    assert os.path.isdir(tmp_path / "mine")


def test_contrib_submodules_load_on_attribute_access():
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    code = "import ember; print(ember.contrib.cc.__name__, ember.contrib.utils.__name__)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": repo}, check=False)
    assert proc.stdout.split() == ["ember.contrib.cc", "ember.contrib.utils"], proc.stderr


def test_ember_march_replaces_native_for_portable_libraries(monkeypatch):
    from ember.contrib import cc as _cc

    monkeypatch.setenv("EMBER_MARCH", "x86-64")
    flags = _cc.default_flags()
    assert "-march=native" not in flags and "-march=x86-64" in flags
    monkeypatch.setenv("EMBER_MARCH", "native")
    assert "-march=x86-64" not in _cc.default_flags()


def test_tempdir_behaves_as_a_path():
    # as Relay-era scripts use it: temp / "name", export there, list, load back
    with utils.tempdir() as temp:
        so = temp / "lib.so"
        assert isinstance(so, pathlib.Path) and so.parent == temp.path
        so.write_text("x")
        assert temp.listdir() == ["lib.so"]
        assert temp.relpath("lib.so") == str(so) == os.path.join(os.fspath(temp), "lib.so")
        assert os.path.isfile(os.path.join(temp, "lib.so"))
        with pytest.raises(TypeError, match="TempDirectory / operator: expected a str or path"):
            temp / 3  # noqa: B018
    assert not so.exists()
