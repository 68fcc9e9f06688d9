"""The systems a benchmark compares, each as a ``Runner``: a ``run()`` to time, its outputs,
and a context that sets its thread count.

- ember: ``relay.build(mod, "llvm", params, executor=graph|aot|vm)`` at opt_level 3, run
  through ``factory["default"](cpu(0))``; inputs set once, ``run()`` timed (outputs stay in
  the executor's buffers). Threads: ``ember.runtime.threads.ThreadControl`` (the model's
  ``EmberSetNumThreads``, the same mechanism ``ember.compile(..., threads=N)`` uses).
- onnxruntime: an ``InferenceSession`` per thread count on the same ONNX file
  (``intra_op_num_threads=N``, ``inter_op_num_threads=1``, sequential execution, default
  graph optimisations), run through an IOBinding with the input and output buffers bound
  once, so neither side pays numpy conversions per call.
- OpenVINO (optional, ``run.py --openvino``): the same ONNX file compiled for its CPU plugin
  per thread count (``INFERENCE_NUM_THREADS=N``, one stream, the latency hint, float32
  inference: on a CPU with bf16 or AMX its default would compute in bf16, not the same
  arithmetic; threads not pinned, as ember's and onnxruntime's are not), run through one
  infer request whose input tensors share the numpy buffers, set once, its outputs left in
  the request's tensors (``share_outputs``: no copy into new arrays per call).

Build times: :func:`build_ember` builds twice in a fresh, empty ``EMBER_CACHE_DIR`` (the
cold build, then the rebuild that finds the compiled library in the cache), each time up to a
runnable executor, and reports how much of the cold build the C compiler took.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

import ember
from ember import relay
from ember.contrib import cc
from ember.relay.backend import Executor
from ember.runtime.threads import ThreadControl

EXECUTORS = ("graph", "aot", "vm")
SOURCES = ("onnx", "relay")


@dataclass
class Runner:
    """One system at one thread count: ``run()`` is what is timed."""

    system: str  # "graph", "aot", "vm", or a reference system (_report.REFERENCE_SYSTEMS)
    threads: int
    run: Callable[[], Any]
    outputs: Callable[[], list[np.ndarray]]
    use_threads: Callable[[], contextlib.AbstractContextManager[Any]]
    keep: tuple[Any, ...] = ()  # what run() needs alive (buffers an IOBinding points into)

    @property
    def key(self) -> str:
        return f"{self.system}@{self.threads}"


@dataclass
class BuildTimes:
    """Seconds to a runnable executor. ``build_s``: the first build, in an empty temporary
    cache when ``cache`` is "cold" (else in the user's cache, "shared"); ``cc_s``: how much of
    it the C compiler took; ``rebuild_s``: the same build again, the compiled library now
    cached; ``import_s``: the ONNX import (source onnx), part of both."""

    build_s: float
    cc_s: float
    rebuild_s: float
    import_s: float
    cache: str

    def to_json(self, source: str) -> dict[str, Any]:
        return {"build_s": self.build_s, "cc_s": self.cc_s, "rebuild_s": self.rebuild_s,
                "import_s": self.import_s if source == "onnx" else None, "cache": self.cache}


def frontend_available() -> bool:
    """Whether this ember has the ONNX importer (``ember.relay.frontend.from_onnx``)."""
    try:
        from ember.relay.frontend import from_onnx  # noqa: F401
    except ImportError:
        return False
    return True


def to_relay(source: str, onnx_path: str, mod: Any, params: dict[str, Any]) -> tuple[Any, Any]:
    """(mod, params) ember builds: the ONNX file imported, or the twin's own Relay module."""
    if source == "relay":
        return mod, params
    from ember.relay.frontend import from_onnx

    return from_onnx(onnx_path)


@contextlib.contextmanager
def _cc_timer(total: list[float]) -> Iterator[None]:
    """Adds the seconds spent in ``cc.build_shared`` (the C compiler, or a cache hit) to
    ``total[0]`` while the context is open. Wraps the module attribute; nothing else changes."""
    original = cc.build_shared

    def timed(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            total[0] += time.perf_counter() - start

    cc.build_shared = timed
    try:
        yield
    finally:
        cc.build_shared = original


@contextlib.contextmanager
def cache_dir(path: str) -> Iterator[None]:
    """``EMBER_CACHE_DIR=path`` while open (ember reads it on every lookup)."""
    before = os.environ.get("EMBER_CACHE_DIR")
    os.environ["EMBER_CACHE_DIR"] = path
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("EMBER_CACHE_DIR", None)
        else:
            os.environ["EMBER_CACHE_DIR"] = before


def _build_once(executor: str, source: str, onnx_path: str, mod: Any,
                params: dict[str, Any]) -> tuple[Any, Any, float, float]:
    """(factory, executor module, import seconds, build seconds) of one full build."""
    start = time.perf_counter()
    built_mod, built_params = to_relay(source, onnx_path, mod, params)
    imported = time.perf_counter()
    with ember.transform.PassContext(opt_level=3):
        factory = relay.build(built_mod, "llvm", params=built_params,
                              executor=Executor(executor))
    module = factory["default"](ember.cpu(0))
    ThreadControl(factory)  # loads every library (compiling any C not compiled yet)
    return factory, module, imported - start, time.perf_counter() - imported


def build_ember(executor: str, source: str, onnx_path: str, mod: Any, params: dict[str, Any],
                cold: bool) -> tuple[Any, Any, BuildTimes]:
    """Build ``executor`` twice, in an empty temporary cache (``cold``) or in the user's; the
    second build finds the compiled library cached. Returns (factory, module, times)."""
    tmp = tempfile.mkdtemp(prefix="ember-bench-cache-") if cold else None
    cc_total = [0.0]
    try:
        with cache_dir(tmp) if tmp else contextlib.nullcontext():
            with _cc_timer(cc_total):
                _, _, import_s, build_s = _build_once(executor, source, onnx_path, mod, params)
            factory, module, _, rebuild_s = _build_once(executor, source, onnx_path, mod,
                                                        params)
    finally:  # the loaded libraries stay mapped after their files are gone
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    return factory, module, BuildTimes(build_s, cc_total[0], rebuild_s, import_s,
                                       "cold" if cold else "shared")


def ember_runner(executor: str, factory: Any, module: Any, threads: int,
                 inputs: dict[str, np.ndarray]) -> Runner:
    """A Runner for an ember executor module (inputs set here, once)."""
    module.set_input(**inputs)
    control = ThreadControl(factory)
    if not control.available:
        raise RuntimeError(f"ember {executor}: the compiled library exports no "
                           "EmberSetNumThreads; the thread count cannot be set")

    def outputs() -> list[np.ndarray]:
        outs = [module.get_output(i) for i in range(module.get_num_outputs())]
        return [o.numpy() for o in outs]

    return Runner(executor, threads, module.run, outputs, lambda: control.use(threads))


def ort_session(onnx_path: Any, threads: int, profile: bool = False) -> Any:
    """An onnxruntime session on ``threads`` intra-op threads, one inter-op thread, of an
    ONNX file or an ``onnx.ModelProto``; with ``profile`` (a file only), per-node profiling
    into a file beside ``onnx_path`` (``end_profiling()`` names it)."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    if profile:
        opts.enable_profiling = True
        opts.profile_file_prefix = str(Path(onnx_path).with_suffix(""))
    source = onnx_path if isinstance(onnx_path, (str, Path)) else onnx_path.SerializeToString()
    return ort.InferenceSession(source, opts, providers=["CPUExecutionProvider"])


def call_runner(system: str, threads: int, call: Callable[[], Any]) -> Runner:
    """A Runner of ``call`` (numpy in, new arrays out, as users call a model); its outputs
    are the last call's result (one array or a list of them)."""
    out: list[Any] = [call()]

    def run() -> None:
        out[0] = call()

    def outputs() -> list[np.ndarray]:
        value = out[0]
        return [np.asarray(v) for v in value] if isinstance(value, (list, tuple)) else \
            [np.asarray(value)]

    return Runner(system, threads, run, outputs, contextlib.nullcontext)


def ort_runner(session: Any, threads: int, inputs: dict[str, np.ndarray]) -> Runner:
    """A Runner for an onnxruntime session: inputs and preallocated outputs bound once."""
    import onnxruntime as ort

    first = session.run(None, inputs)
    binding = session.io_binding()
    # the binding points into these buffers: the Runner keeps them alive
    ins = {k: ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(v)) for k, v in inputs.items()}
    for name, value in ins.items():
        binding.bind_ortvalue_input(name, value)
    outs = [ort.OrtValue.ortvalue_from_numpy(np.empty_like(o)) for o in first]
    for meta, value in zip(session.get_outputs(), outs):
        binding.bind_ortvalue_output(meta.name, value)

    def run() -> None:
        session.run_with_iobinding(binding)

    return Runner("onnxruntime", threads, run, lambda: [o.numpy() for o in outs],
                  contextlib.nullcontext, keep=(ins, outs))


def openvino_available() -> bool:
    """Whether OpenVINO's Python runtime (``pip install openvino``) can be imported."""
    try:
        import openvino  # noqa: F401
    except ImportError:
        return False
    return True


def openvino_runner(onnx_path: str, threads: int, inputs: dict[str, np.ndarray]
                    ) -> tuple[Runner, float]:
    """A Runner of OpenVINO's CPU plugin on ``onnx_path`` at ``threads`` threads (the module
    docstring's settings), and the seconds its compile took."""
    import openvino as ov

    start = time.perf_counter()
    compiled = ov.Core().compile_model(onnx_path, "CPU", {
        "INFERENCE_NUM_THREADS": threads, "NUM_STREAMS": 1, "PERFORMANCE_HINT": "LATENCY",
        "INFERENCE_PRECISION_HINT": "f32", "ENABLE_CPU_PINNING": False})
    compile_s = time.perf_counter() - start
    request = compiled.create_infer_request()
    ins = {k: np.ascontiguousarray(v) for k, v in inputs.items()}
    for name, value in ins.items():
        request.set_tensor(name, ov.Tensor(value, shared_memory=True))

    def outputs() -> list[np.ndarray]:
        return [request.get_output_tensor(i).data.copy() for i in range(len(compiled.outputs))]

    def run() -> None:  # outputs stay in the request's tensors, as onnxruntime's bound ones
        request.infer(share_outputs=True)

    return Runner("openvino", threads, run, outputs, contextlib.nullcontext,
                  keep=(ins, compiled)), compile_s


@dataclass
class CompareOptions:
    """The options bench_exported and bench_quantized share, parsed."""

    threads: list[int]
    rounds: int
    min_time: float
    clock_name: str
    clock: Callable[[], float]
    only: set[str]
    json: str


def compare_options(description: str, only_help: str, default_json: Path) -> CompareOptions:
    """Parse --threads, --rounds, --min-time, --clock (thread or wall), --only, --json."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--threads", default="1", help="comma-separated thread counts")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--min-time", type=float, default=0.3, help="seconds of calls per runner")
    ap.add_argument("--clock", choices=("thread", "wall"), default="thread")
    ap.add_argument("--only", default="", help=only_help)
    ap.add_argument("--json", default=str(default_json))
    opts = ap.parse_args()
    return CompareOptions([int(t) for t in opts.threads.split(",")], opts.rounds, opts.min_time,
                          opts.clock, time.thread_time if opts.clock == "thread"
                          else time.perf_counter, set(filter(None, opts.only.split(","))),
                          opts.json)
