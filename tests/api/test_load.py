"""``CompiledModel.save`` / ``ember.load``, and the per-model thread count.

A saved model is one shared library; a fresh interpreter with no C compiler on PATH (and
``CC=/nonexistent``) loads it with ``ember.load``, runs it on every executor with the
compiler's modules never imported, and keeps the thread count it was compiled with.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _api_models import STATIC_TEXT, dense_model, dense_reference

import ember
from ember.api.model import CompiledModel, ModelRecord
from ember.runtime.errors import ArtifactError
from ember.runtime.threads import ENV_VAR, default_num_threads, physical_cores
from ember.testing import find_c_compiler

pytestmark = pytest.mark.skipif(find_c_compiler() is None, reason="no C compiler found")
COMPILER = ("ember.relay", "ember.ir", "ember.te", "ember.tir", "ember.topi", "ember.parser",
            "ember.contrib", "ember.api.compiler")

# Runs in a fresh interpreter: load, run on the saved input, report.
_LOAD_AND_RUN = f"""
import json, os, shutil, sys
import numpy as np
import ember
path, x_path = sys.argv[1:3]
before = len(os.listdir("/proc/self/task")) if os.path.isdir("/proc/self/task") else -1
model = ember.load(path)
out = model(np.load(x_path))
after = len(os.listdir("/proc/self/task")) if os.path.isdir("/proc/self/task") else -1
np.save(x_path + ".out.npy", out)
print(json.dumps({{
    "executor": model.executor, "threads": model.threads,
    "inputs": [str(s) for s in model.inputs], "os_threads_added": after - before,
    "compiler_modules": sorted(m for m in sys.modules if m.startswith({COMPILER!r})),
    "cc_on_path": shutil.which("cc") or shutil.which("gcc") or shutil.which("clang"),
}}))
"""


def run_fresh(path: Path, x: np.ndarray, tmp_path: Path) -> tuple[dict[str, Any], np.ndarray]:
    """``_LOAD_AND_RUN`` in a new interpreter without a C compiler; (report, output)."""
    x_path = tmp_path / "x.npy"
    np.save(x_path, x)
    empty_bin = tmp_path / "bin"
    empty_bin.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", ENV_VAR)}
    env.update(CC="/nonexistent", PATH=str(empty_bin),
               PYTHONPATH=str(Path(ember.__file__).resolve().parents[1]))
    proc = subprocess.run([sys.executable, "-c", _LOAD_AND_RUN, str(path), str(x_path)],
                          capture_output=True, text=True, env=env, check=False, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout), np.load(str(x_path) + ".out.npy")


@pytest.mark.parametrize("executor", ["graph", "aot", "vm"])
def test_save_and_load_without_a_compiler(executor: str, tmp_path: Path) -> None:
    mod, params = dense_model()
    model = ember.compile(mod, executor=executor, params=params, threads=3)
    path = tmp_path / "model.so"
    model.save(path)
    x = np.random.default_rng(2).standard_normal((4, 16)).astype("float32")
    report, out = run_fresh(path, x, tmp_path)
    assert report["cc_on_path"] is None
    assert report["compiler_modules"] == []
    assert (report["executor"], report["threads"]) == (executor, 3)
    assert report["inputs"] == ["x: float32[4, 16]"]
    np.testing.assert_array_equal(out, model(x))
    np.testing.assert_allclose(out, dense_reference(x, params), rtol=1e-5, atol=1e-5)


def test_load_in_process_and_save_again(tmp_path: Path) -> None:
    model = ember.compile(STATIC_TEXT, executor="vm", threads=2)
    model.save(tmp_path / "a.so")
    loaded = ember.load(tmp_path / "a.so")
    assert (loaded.executor, loaded.threads, loaded.inputs, loaded.outputs) == (
        "vm", 2, model.inputs, model.outputs)
    x, y = np.ones((2, 3), "float32"), np.full((2, 3), 2, "float32")
    for got, want in zip(loaded(x, y), model(x, y)):
        np.testing.assert_array_equal(got, want)
    loaded.save(tmp_path / "b.so")  # a loaded model is copied: its kernels are compiled
    again = ember.load(tmp_path / "b.so")
    np.testing.assert_array_equal(again(x, y=y)[1], x + y)


def test_load_refuses_what_is_not_a_saved_model(tmp_path: Path) -> None:
    mod, params = dense_model()
    factory = ember.relay.build(mod, "llvm", params=params)
    factory.export_library(tmp_path / "factory.so")
    with pytest.raises(ArtifactError, match="not a model saved by CompiledModel.save"):
        ember.load(tmp_path / "factory.so")
    with pytest.raises(ArtifactError):
        ember.load(tmp_path / "missing.so")


@pytest.mark.parametrize("data, match", [
    (b"\xff", "not JSON"),
    (b"[1]", "not an ember-model record"),
    (b'{"format": "ember-model", "version": 9}', "version 9; this runtime reads versions 1, 2"),
    ((b'{"format": "ember-model", "version": 1, "executor": "jit", "threads": 1, "inputs": [],'
     b' "outputs": []}'), "unknown executor 'jit'"),
    ((b'{"format": "ember-model", "version": 1, "executor": "vm", "threads": 0, "inputs": [],'
     b' "outputs": []}'), "threads must be a positive int"),
    (b'{"format": "ember-model", "version": 1, "executor": "vm", "threads": 1}', "corrupt field"),
])
def test_corrupt_records_are_refused(data: bytes, match: str) -> None:
    with pytest.raises(ArtifactError, match=match):
        ModelRecord.load_binary(data)


# ---------------------------------------------------------------- threads
def test_default_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_VAR, raising=False)
    assert 1 <= physical_cores() <= (os.cpu_count() or 1)
    assert default_num_threads() == physical_cores()
    assert ember.compile(STATIC_TEXT, executor="graph").threads == physical_cores()
    monkeypatch.setenv(ENV_VAR, "5")
    assert ember.compile(STATIC_TEXT, executor="graph").threads == 5
    assert ember.compile(STATIC_TEXT, executor="graph", threads=2).threads == 2
    for bad in ("0", "two", "-1"):
        monkeypatch.setenv(ENV_VAR, bad)
        with pytest.raises(ValueError, match=f"{ENV_VAR} must be a positive integer, got"):
            ember.compile(STATIC_TEXT, executor="graph")


class _SpyContext:
    """An execution context that records the thread count its calls run with (through the
    Python path: ``native`` None; the one-C-call path sets the count in C, see below)."""

    native = None

    def __init__(self, model: CompiledModel, seen: list[int | None]) -> None:
        self.inner, self.model, self.seen = model._pool.acquire(), model, seen
        model._pool.release(self)

    def call(self, values):
        self.seen.append(self.model._threads.current())
        return self.inner.call(values)


@pytest.mark.parametrize("executor", ["graph", "aot", "vm"])
def test_each_model_runs_on_its_own_thread_count(executor: str) -> None:
    """A call sets this thread's count for the model's libraries (and leaves it: the next
    call needs no C call); two models with different counts alternate correctly."""
    mod, params = dense_model()
    three = ember.compile(mod, executor=executor, params=params, threads=3)
    one = ember.compile(mod, executor=executor, params=params, threads=1)
    seen: list[int | None] = []
    _SpyContext(three, seen)
    _SpyContext(one, seen)
    assert three._threads.available and one._threads.available
    x = np.ones((4, 16), "float32")
    for _ in range(2):
        three(x)
        one(x)
    assert seen == [3, 1, 3, 1]
    with three._threads.use(2):  # use() sets and restores, and keeps the record right
        assert three._threads.current() == 2
    three(x)
    assert seen[-1] == 3


@pytest.mark.parametrize("executor", ["graph", "aot"])
def test_a_native_call_sets_the_thread_count_for_itself_only(executor: str) -> None:
    """The one-C-call path runs on the model's count and leaves this thread's setting as it
    was, so two models with different counts alternate without a Python-side setting."""
    mod, params = dense_model()
    three = ember.compile(mod, executor=executor, params=params, threads=3)
    one = ember.compile(mod, executor=executor, params=params, threads=1)
    ctx = three._pool.acquire()
    three._pool.release(ctx)
    assert ctx.native is not None
    x = np.ones((4, 16), "float32")
    with three._threads.use(2):
        for _ in range(2):
            np.testing.assert_allclose(three(x), one(x), rtol=1e-6)
            assert three._threads.current() == 2


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="needs Linux /proc")
@pytest.mark.parametrize("threads", [1, 3])
def test_saved_thread_count_sizes_the_worker_pool(threads: int, tmp_path: Path) -> None:
    # A dense layer big enough for its outer loop to run in parallel.
    mod, params = dense_model(batch=64, features=256, units=256)
    model: CompiledModel = ember.compile(mod, executor="aot", params=params, threads=threads)
    model.save(tmp_path / "m.so")
    report, _ = run_fresh(tmp_path / "m.so", np.ones((64, 256), "float32"), tmp_path)
    assert report["threads"] == threads
    assert report["os_threads_added"] == threads - 1  # OpenMP's workers beside the caller


def test_a_version_1_record_still_loads() -> None:
    """Records written before named dimensions (version 1) read as they were."""
    from ember.runtime.model_record import ModelRecord

    rec = ModelRecord.load_binary(b'{"format": "ember-model", "version": 1, "executor": "vm",'
                                  b' "threads": 1, "inputs": [["x", [null, 3], "float32"]],'
                                  b' "outputs": [["output0", [null, 3], "float32"]]}')
    assert str(rec.inputs[0]) == "x: float32[?, 3]" and not rec.inputs[0].is_static
    for bad in (b'[["x", [-1, 3], "float32"]]', b'[["x", [1.5], "float32"]]'):
        with pytest.raises(ArtifactError, match="a dimension must be a size, null or a name"):
            ModelRecord.load_binary(b'{"format": "ember-model", "version": 2, "executor": "vm",'
                                    b' "threads": 1, "inputs": ' + bad + b', "outputs": []}')
