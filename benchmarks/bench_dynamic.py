"""Dynamic shapes at static speed: each zoo model with symbolic dimensions (its "dynamic twin")
against the static build of the same shape.

    python benchmarks/bench_dynamic.py [--models mlp,transformer,resnet18/hw,... | all]
                                       [--threads 1,2] [--min-time 0.2] [--rounds 5]
                                       [--unseen 15] [--full] [--no-ort] [--json PATH]

Twins (``TWINS``; the small zoo configurations unless ``--full``): ``<model>`` has a ``?``
batch, ``<model>/hw`` a ``?`` height and width, ``transformer`` a ``?`` batch and sequence,
``wav2vec2/len`` a ``?`` audio length, ``crnn/width`` a ``?`` image width. Each is made by
``_dynamic_twins.dynamic_twin`` from the workload built at two shapes (its usual one and a
probe): the dimensions that differ between the two follow the input, and the reshapes, slices
and broadcasts that carry them are rewritten so that they do (Relay's special values
``0, -1, -3, -4``, ``squeeze``/``expand_dims``, a slice end counted from the axis' end,
``broadcast_to_like``). Each twin is compiled once per thread count with
``ember.compile(mod, executor="vm")``; at each of its shapes the same model with that shape
fixed is compiled with ``executor="graph"``, and the two results are compared (a mismatch is
printed as ``WRONG``).

Columns (milliseconds per call, numpy in and out, median of the interleaved samples):

- ``static``, ``dynamic``: steady state at that shape; ``ratio`` = dynamic / static (the issue's
  target: at most 1.10); ``+us``: dynamic - static in microseconds (a gap that stays the same
  across models and shapes is a per-call cost of the executor, not of the kernels);
- ``unseen``: a dynamic call at a shape other than the last call's (the run computes the
  shapes, checks and sizes again, in C since ``vm/plan_native.py``; its memory blocks are
  already large enough), median of ``--unseen`` calls (or more, to 30 ms of them), each after
  a call at another shape, timed in blocks of 5 in turn with ``d.after``, ``s.each`` and
  ``s.after``, in an order that changes from round to round (drift and the place after the
  other builds' calls hit the four alike; ``unseen_columns``).
  The Python plan keeps 32 shapes and the C call 8 besides the last; here
  ``ember.runtime.vm.static_plan.SIGNATURES`` is set to 1 and the C call keeps none
  (``plan_native.DynamicCall.keep(0)``) for those calls, so that alternating two shapes makes
  every call unseen there too (its shape phase and checks run again);
- ``s.each``: the static build at that shape with each call timed alone, as ``unseen`` is
  (reading ``time.thread_time`` costs about a microsecond: 10% of mlp's call), and
  ``u.ratio`` = unseen / s.each (the issue's target: at most 1.15);
- ``d.after``: the dynamic build timed as ``unseen`` is, each call after a call at another
  shape, but with both shapes kept (nothing recomputed: the switch alone), and ``u.own`` =
  unseen / d.after: what not having seen the shape costs, apart from the switch;
- ``s.after``: the static build at that shape timed the same way, each call after a call of
  the static build of another shape (what switching shapes costs any build: caches), and
  ``u.fair`` = unseen / s.after;
- ``first``: the dynamic build's first call at that shape on a new execution context (a new
  process's first call, the library loaded): the plan made, buffers sized, the C call set up.
- ``ort``: onnxruntime at that shape on the twin as a dynamic ONNX model (``_onnx_dynamic``:
  the input's symbolic axes named, its reshapes computed from ``Shape``), one session per
  thread count, called as the dynamic build is (numpy in, new numpy arrays out), steady state
  interleaved with the other two; ``d/ort`` = dynamic / ort. Empty where the twin has no ONNX
  form (an op the exporter does not write: the note under the table says which);
  ``ORT-DIFF`` where onnxruntime's result is not the static build's (rtol 1e-3).

All static and dynamic runners of all models and thread counts are timed interleaved, round by
round (``_timing.interleave``), so drift hits them alike; by default with ``time.thread_time``
(the calling thread's CPU time: steady on a loaded machine, but blind to the kernels' worker
threads at 2 threads; ``--clock wall`` for ``time.perf_counter``). JSON goes to
bench_results/dynamic.json in the cache directory.
"""
from __future__ import annotations

import argparse
import contextlib
import importlib
import itertools
import json
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _dynamic_twins import dynamic_twin, with_input_shape  # noqa: E402
from _models import workload, zoo_models  # noqa: E402
from _onnx_dynamic import dynamic_onnx  # noqa: E402
from _report import open_results, results_path, table  # noqa: E402
from _systems import Runner  # noqa: E402
from _timing import interleave  # noqa: E402
import ember  # noqa: E402
from ember.ir.module import IRModule  # noqa: E402
from ember.relay.testing.onnx_export import export_onnx  # noqa: E402
from ember.runtime.errors import OpNotImplemented  # noqa: E402
from ember.runtime.vm import plan_native, static_plan  # noqa: E402

_B = {"batch_size": 2}  # the probe of a batch twin


def _hw(h: int, w: int) -> dict[str, Any]:
    return {"image_shape": (3, h, w)}


def _b(*shapes: tuple[int, ...]) -> list[tuple[int, ...]]:
    return list(shapes)


class Twin(NamedTuple):
    """A benchmark model with ``?`` at ``axes`` of its input, timed at ``shapes``. ``probe``
    (and ``base``, if the usual build will not do) are the workload's keyword arguments over
    its usual ones that build it at two shapes, which ``_dynamic_twins`` compares to find
    what follows the input."""

    model: str
    axes: tuple[int, ...]
    shapes: list[tuple[int, ...]]
    probe: dict[str, Any]
    base: dict[str, Any] | None = None


# Shapes: 1, sizes that are not multiples of any tile (3, 37, 53), and where the network needs
# it (an FPN's strides of 32, a U-Net's 4) multiples of its stride. Not here, because their
# workloads fix what would have to follow the input: yolov8n's height and width (its anchor
# grid is a constant), segformer's (its decoder resizes to a fixed size and splits H*W back
# into H and W), gpt2's sequence (its position table has seq_len rows), kws's audio length (its
# frames are a ``take`` of a constant index table with a row per frame; the ONNX importer
# computes that table per call when the STFT's signal length is symbolic, but the Relay
# workload, which the twins are made from, has it as a constant).
_IMG = ((1, 3, 32, 32), (2, 3, 32, 32), (3, 3, 32, 32))  # batch twins of 32x32 classifiers
_HW = ((1, 3, 32, 32), (1, 3, 48, 40), (1, 3, 67, 53))
_FPN = ((1, 3, 64, 64), (2, 3, 64, 64), (3, 3, 64, 64))  # batch twins of 64x64 detectors
_FPN_HW = ((1, 3, 64, 64), (1, 3, 96, 64), (1, 3, 64, 160))

TWINS: dict[str, Twin] = {
    "mlp": Twin("mlp", (0,), _b((1, 1, 28, 28), (3, 1, 28, 28), (8, 1, 28, 28)), _B),
    "autoencoder": Twin("autoencoder", (0,), _b((1, 640), (3, 640), (8, 640)), _B),
    "dscnn": Twin("dscnn", (0,), _b((1, 1, 49, 10), (3, 1, 49, 10), (8, 1, 49, 10)), _B),
    "resnet8": Twin("resnet8", (0,), _b((1, 3, 32, 32), (3, 3, 32, 32), (8, 3, 32, 32)), _B),
    "mobilenet_v2": Twin("mobilenet_v2", (0,), _b((1, 3, 32, 32), (3, 3, 32, 32),
                                                  (8, 3, 32, 32)), _B),
    "mobilenet_v2/hw": Twin("mobilenet_v2", (2, 3), _b(*_HW), _hw(64, 48)),
    "resnet18": Twin("resnet18", (0,), _b(*_IMG), _B),
    # (probe height 30: above 32 the workload adds a downsampling stem)
    "resnet18/hw": Twin("resnet18", (2, 3), _b(*_HW), _hw(30, 48)),
    "mobilenet_v3_large": Twin("mobilenet_v3_large", (0,), _b(*_IMG), _B),
    "mobilenet_v3_large/hw": Twin("mobilenet_v3_large", (2, 3), _b(*_HW), _hw(64, 48)),
    "efficientnet_lite0": Twin("efficientnet_lite0", (0,), _b(*_IMG), _B),
    "efficientnet_lite0/hw": Twin("efficientnet_lite0", (2, 3), _b(*_HW), _hw(64, 48)),
    "yolov8n": Twin("yolov8n", (0,), _b(*_FPN), _B),
    "dbnet": Twin("dbnet_mv3", (0,), _b(*_FPN), _B),
    "dbnet/hw": Twin("dbnet_mv3", (2, 3), _b(*_FPN_HW), _hw(96, 128)),
    "unet": Twin("unet", (0,), _b(*_IMG), _B),
    "unet/hw": Twin("unet", (2, 3), _b((1, 3, 32, 32), (1, 3, 48, 40), (1, 3, 36, 52)),
                    _hw(64, 48)),
    "segformer": Twin("segformer", (0,), _b(*_FPN), _B),
    # (vit broadcasts its class token only from batch 2: the twin starts there)
    "vit_tiny": Twin("vit_tiny", (0,), _b(*_IMG), {"batch_size": 3}, _B),
    "transformer": Twin("transformer", (0, 1), _b((1, 16, 32), (2, 9, 32), (1, 37, 32)),
                        {"batch_size": 2, "seq_len": 24}),
    "gpt2": Twin("gpt2", (0,), _b((1, 16), (2, 16), (3, 16)), _B),
    "wav2vec2": Twin("wav2vec2", (0,), _b((1, 1600), (2, 1600), (3, 1600)), _B),
    "wav2vec2/len": Twin("wav2vec2", (1,), _b((1, 1600), (1, 1000), (1, 2345)),
                         {"samples": 2000}),
    "kws": Twin("kws", (0,), _b((1, 4000), (2, 4000), (3, 4000)), _B),
    "crnn": Twin("crnn", (0,), _b((1, 3, 32, 64), (2, 3, 32, 64), (3, 3, 32, 64)), _B),
    "crnn/width": Twin("crnn", (3,), _b((1, 3, 32, 64), (1, 3, 32, 100), (1, 3, 32, 36)),
                       _hw(32, 96)),
    "ocr_cls": Twin("ocr_cls", (0,), _b((1, 3, 48, 96), (2, 3, 48, 96), (3, 3, 48, 96)), _B),
    "ocr_cls/width": Twin("ocr_cls", (3,), _b((1, 3, 48, 96), (1, 3, 48, 100), (1, 3, 48, 37)),
                          _hw(48, 160)),
    "mobilenet": Twin("mobilenet", (0,), _b(*_IMG), _B),
    "mobilenet/hw": Twin("mobilenet", (2, 3), _b(*_HW), _hw(64, 48)),
    "squeezenet": Twin("squeezenet", (0,), _b((1, 3, 64, 64), (2, 3, 64, 64), (3, 3, 64, 64)),
                       _B),
    "squeezenet/hw": Twin("squeezenet", (2, 3), _b((1, 3, 64, 64), (1, 3, 80, 72),
                                                   (1, 3, 67, 53)), _hw(96, 80)),
    "vgg16": Twin("vgg16", (0,), _b(*_IMG), _B),
    "inception_v3": Twin("inception_v3", (0,), _b((1, 3, 75, 75), (2, 3, 75, 75),
                                                  (3, 3, 75, 75)), _B),
    "densenet": Twin("densenet", (0,), _b(*_IMG), _B),
    "dqn": Twin("dqn", (0,), _b((1, 4, 84, 84), (2, 4, 84, 84), (3, 4, 84, 84)), _B),
    "dcgan": Twin("dcgan", (0,), _b((1, 100), (2, 100), (3, 100)), _B),
    "synthetic": Twin("synthetic", (0,), _b((1, 3, 24, 12), (2, 3, 24, 12), (3, 3, 24, 12)),
                      {"input_shape": (2, 3, 24, 12)}),
}

# The default run: each kind of twin once, small models (a few minutes on a loaded 2-core
# machine at 1 and 2 threads; ``--models all`` takes half an hour there).
DEFAULT_TWINS = ("mlp", "dscnn", "resnet8", "mobilenet_v2", "mobilenet_v2/hw", "transformer",
                 "crnn/width", "wav2vec2/len", "efficientnet_lite0/hw")


# -- the twins ----------------------------------------------------------------------------------
def probe_module(model: str, probe: dict[str, Any], full: bool) -> IRModule:
    """Benchmark ``model``'s workload built with ``probe`` over its usual arguments."""
    zoo, kwargs = workload(model, small=not full)
    if "batch_size" in probe or zoo in ("mlp", "dqn", "dcgan"):
        kwargs.setdefault("batch_size", 1)
    kwargs.update(probe)
    mod, _ = importlib.import_module(f"ember.relay.testing.{zoo}").get_workload(**kwargs)
    return mod


def twin_module(twin: str, base: IRModule, full: bool = False) -> IRModule:
    """``twin``'s dynamic module, from ``base`` (the benchmark model at its usual shape)."""
    t = TWINS[twin]
    if t.base is not None:
        base = probe_module(t.model, t.base, full)
    return dynamic_twin(base, probe_module(t.model, t.probe, full), t.axes)


@dataclass
class Case:
    """One twin at one thread count: its dynamic model and, per shape, the static one."""

    twin: str
    threads: int
    dynamic: Any
    shapes: list[tuple[int, ...]]
    static: list[Any]
    inputs: list[np.ndarray]
    checked: list[bool]
    ort: Any = None  # onnxruntime on the twin's dynamic ONNX model, if it has one
    ort_checked: list[bool] | None = None
    ort_note: str = ""  # why there is no ort session


def build_case(twin: str, zoo: Any, threads: int, full: bool = False,
               ort: bool = True) -> Case:
    shapes = TWINS[twin].shapes
    mod = twin_module(twin, zoo.mod, full)
    dynamic = ember.compile(mod, executor="vm", params=zoo.params, threads=threads)
    dtype = mod["main"].params[0].type_annotation.dtype
    rng = np.random.default_rng(0)
    statics, inputs, checked, wants = [], [], [], []
    for shape in shapes:
        model = ember.compile(with_input_shape(mod, shape), executor="graph",
                              params=zoo.params, threads=threads)
        x = _random_input(rng, shape, dtype, zoo.params)
        want, got = _first(model(x)), _first(dynamic(x))
        checked.append(_close(got, want))
        statics.append(model)
        inputs.append(x)
        wants.append(want)
    case = Case(twin, threads, dynamic, list(shapes), statics, inputs, checked)
    if ort:
        _add_ort(case, mod, zoo.params, full, wants)
    return case


def _close(got: np.ndarray, want: np.ndarray, tol: float = 1e-4) -> bool:
    return want.shape == got.shape and bool(np.allclose(got, want, rtol=tol, atol=tol))


def _add_ort(case: Case, mod: IRModule, params: dict[str, Any], full: bool,
             wants: list[np.ndarray]) -> None:
    """An onnxruntime session on the twin as a dynamic ONNX model (``_onnx_dynamic``), at the
    case's thread count, checked at every shape against the static build; ``ort_note`` says
    why there is none (an op the exporter does not write, onnxruntime missing)."""
    try:
        import onnxruntime as ort

        model = _dynamic_onnx(case.twin, mod, params, full)
    except (ImportError, ValueError, OpNotImplemented) as err:
        case.ort_note = f"{type(err).__name__}: {err}"
        return
    opts = ort.SessionOptions()
    opts.intra_op_num_threads, opts.inter_op_num_threads = case.threads, 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    try:
        session = ort.InferenceSession(model.SerializeToString(), opts,
                                       providers=["CPUExecutionProvider"])
    except Exception as err:  # noqa: BLE001  (onnxruntime's own classes: a note, not a stop)
        case.ort_note = f"onnxruntime: {err}"
        return
    name = session.get_inputs()[0].name
    case.ort = lambda x: session.run(None, {name: x})
    # (onnxruntime's float accumulation order differs from ember's: 1e-3)
    case.ort_checked = [_close(_first(case.ort(x)), want, 1e-3)
                        for x, want in zip(case.inputs, wants)]


def _dynamic_onnx(twin: str, mod: IRModule, params: dict[str, Any], full: bool) -> Any:
    """``twin``'s dynamic ONNX model, exported at two of its shapes that differ on every
    symbolic axis (the workload's own exporter where it has one, as ``onnx_twin`` does)."""
    t = TWINS[twin]
    pair = next(((p, q) for p, q in itertools.combinations(t.shapes, 2)
                 if all(p[a] != q[a] for a in t.axes)), None)
    if pair is None:
        raise ValueError(f"{twin}: no two of its shapes differ on every symbolic axis")
    zoo, _ = workload(t.model, small=not full)
    export = getattr(importlib.import_module(f"ember.relay.testing.{zoo}"), "export_onnx",
                     export_onnx)
    return dynamic_onnx(mod, params, *pair, export=export)


def _random_input(rng: np.random.Generator, shape: tuple[int, ...], dtype: str,
                  params: dict[str, Any]) -> np.ndarray:
    """Uniform [-1, 1) floats, or token ids below the first weight's row count."""
    if dtype.startswith("int"):
        rows = int(next(iter(params.values())).shape[0])
        return rng.integers(0, rows, size=shape).astype(dtype)
    return rng.uniform(-1, 1, size=shape).astype(dtype)


def _first(out: Any) -> np.ndarray:
    return np.asarray(out[0] if isinstance(out, (list, tuple)) else out)


# -- timing -------------------------------------------------------------------------------------
def _runner(system: str, threads: int, model: Any, x: np.ndarray) -> Runner:
    return Runner(system, threads, lambda: model(x), lambda: [], contextlib.nullcontext)


UNSEEN_TIME = 0.03  # seconds of timed calls per unseen-type column and shape, at least


UNSEEN_BLOCK = 5  # timed calls per column in a row (after one untimed pair), see below


def balanced_orders(n: int) -> list[list[int]]:
    """n orders of 0..n-1 (n even) in which every ordered pair of distinct items stands next
    to each other exactly once: the rows of a Williams (balanced Latin) square, row r the
    first one, 0 1 n-1 2 n-2 ..., plus r (mod n)."""
    first, low, high = [0], 1, n - 1
    while len(first) < n:
        first.append(low)
        low += 1
        if len(first) < n:
            first.append(high)
            high -= 1
    return [[(c + r) % n for c in first] for r in range(n)]


def unseen_columns(case: Case, k: int, calls: int, clock: Any
                   ) -> tuple[float, float, float, float]:
    """Median ms of (``unseen``, ``d.after``, ``s.after``, ``s.each``) at shape k, each call
    timed alone right after an untimed one: of the dynamic build after its call at another
    shape (the plan keeping one shape, so the call at k is always one it has not kept), of
    the dynamic build after its call at another shape with both shapes kept (the switch
    alone, nothing recomputed), of the static build of shape k after the static build of the
    other shape, and of the static build of shape k after itself.

    The columns are timed in blocks of ``UNSEEN_BLOCK`` calls, in turn, round after round
    (at least ``calls`` calls and ``UNSEEN_TIME`` seconds of each): timed one whole column
    after the other, a load change on a shared machine between them moved ``u.ratio`` by
    0.1-0.2; timed one call of each in turn, each pair ran on caches the other builds had
    just used (autoencoder's unseen read 1.55x, not 1.1x). Each block starts with one
    untimed pair, so that every timed call follows calls of its own builds only. The order
    of the columns changes from round to round (``balanced_orders``: over four rounds each
    column is timed right after each other one once), so that what a block leaves behind for
    the next one (a model called after another build can run slower for more than its first
    call) weighs on the four alike: in one fixed order ``unseen`` always came right after
    ``s.each``, and ``d.after`` right after ``unseen``."""
    j = (k + 1) % len(case.inputs)
    other, x = case.inputs[j], case.inputs[k]
    # (first model, its input, the timed model, whether the dynamic build keeps one shape)
    pairs = [(case.dynamic, other, case.dynamic, True), (case.dynamic, other, case.dynamic, False),
             (case.static[j], other, case.static[k], False),
             (case.static[k], x, case.static[k], False)]
    times: list[list[float]] = [[] for _ in pairs]
    saved = static_plan.SIGNATURES
    orders, rnd = balanced_orders(len(pairs)), 0
    try:
        while len(times[0]) < calls or min(sum(t) for t in times) < UNSEEN_TIME and \
                len(times[0]) < 20 * calls:
            for column in orders[rnd % len(orders)]:
                first, before, model, forget = pairs[column]
                samples = times[column]
                static_plan.SIGNATURES = 1 if forget else saved
                _keep_signatures(case.dynamic, 0 if forget else plan_native.KEPT_SIGNATURES)
                first(before)  # (each model sets its own thread count per call)
                model(x)
                for _ in range(UNSEEN_BLOCK):
                    first(before)
                    start = clock()
                    model(x)
                    samples.append(clock() - start)
            rnd += 1
    finally:
        static_plan.SIGNATURES = saved
        _keep_signatures(case.dynamic, plan_native.KEPT_SIGNATURES)
    unseen, d_after, s_after, each = (statistics.median(t) * 1e3 for t in times)
    return unseen, d_after, s_after, each


def _keep_signatures(model: Any, signatures: int) -> None:
    """Have the C call of each of ``model``'s contexts keep ``signatures`` signatures besides
    the last (``plan_native.DynamicCall.keep``)."""
    for ctx in model._pool.free:
        dynamic = getattr(ctx, "dynamic", None)
        if dynamic is not None:
            dynamic.keep(signatures)


def first_call_ms(case: Case, k: int, clock: Any) -> float:
    """Ms of the dynamic build's first call at shape k on a new execution context (a new
    process's first call at that shape, its library already loaded): the plan made, its
    buffers sized, its C call set up."""
    pool = case.dynamic._pool
    saved = list(pool.free)
    pool.free[:] = [pool._make()]
    try:
        start = clock()
        case.dynamic(case.inputs[k])
        return (clock() - start) * 1e3
    finally:
        pool.free[:] = saved


def measure(cases: list[Case], min_time: float, rounds: int, unseen: int,
            clock: Any = time.thread_time) -> list[dict]:
    runners, keys = [], []
    for c in cases:
        for k, x in enumerate(c.inputs):
            at = len(runners)
            runners += [_runner("static", c.threads, c.static[k], x),
                        _runner("dynamic", c.threads, c.dynamic, x)]
            if c.ort is not None:
                runners.append(_runner("onnxruntime", c.threads, c.ort, x))
            keys.append((c, k, at))
    timings = interleave(runners, min_time, rounds, clock)
    rows = []
    for c, k, at in keys:
        st, dy = timings[at].median * 1e3, timings[at + 1].median * 1e3
        ort = timings[at + 2].median * 1e3 if c.ort is not None else None
        un = d_after = after = each = None
        if unseen and len(c.inputs) > 1:
            un, d_after, after, each = unseen_columns(c, k, unseen, clock)
        rows.append({"model": c.twin, "shape": list(c.shapes[k]), "threads": c.threads,
                     "static_ms": st, "dynamic_ms": dy, "ratio": dy / st,
                     "extra_us": (dy - st) * 1e3,
                     "unseen_ms": un, "static_each_ms": each,
                     "unseen_ratio": None if un is None else un / each,
                     "dynamic_after_other_ms": d_after,
                     "unseen_own_ratio": None if un is None else un / d_after,
                     "static_after_other_ms": after,
                     "unseen_fair_ratio": None if un is None else un / after,
                     "first_call_ms": first_call_ms(c, k, clock),
                     "ort_ms": ort, "ort_ratio": None if ort is None else dy / ort,
                     "ort_correct": None if c.ort_checked is None else c.ort_checked[k],
                     "ort_note": c.ort_note,
                     "correct": c.checked[k]})
    return rows


def report(rows: list[dict]) -> str:
    lines = [[r["model"], "x".join(map(str, r["shape"])), r["threads"], r["static_ms"],
              r["dynamic_ms"], r["ratio"], round(r["extra_us"]), r["unseen_ms"],
              r["static_each_ms"], r["unseen_ratio"], r["dynamic_after_other_ms"],
              r["unseen_own_ratio"], r["static_after_other_ms"],
              r["unseen_fair_ratio"], r["first_call_ms"], r["ort_ms"], r["ort_ratio"],
              _flags(r)] for r in rows]
    heads = ["model", "shape", "thr", "static", "dynamic", "ratio", "+us", "unseen", "s.each",
             "u.ratio", "d.after", "u.own", "s.after",
             "u.fair", "first", "ort", "d/ort", ""]
    notes = sorted({f"{r['model']}: no ort ({r['ort_note']})" for r in rows if r["ort_note"]})
    return "\n".join([table(lines, heads), *notes])


def _flags(row: dict) -> str:
    """WRONG where the dynamic build disagrees with the static one, ORT-DIFF where
    onnxruntime does (its column then times a different computation)."""
    return " ".join(f for f, bad in (("WRONG", not row["correct"]),
                                     ("ORT-DIFF", row["ort_correct"] is False)) if bad)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default=",".join(DEFAULT_TWINS),
                    help=f"twins, comma-separated, or 'all' (default: {', '.join(DEFAULT_TWINS)}; "
                         f"all: {', '.join(TWINS)})")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--min-time", type=float, default=0.2,
                    help="seconds of timed calls per runner in all (default 0.2)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--unseen", type=int, default=15,
                    help="calls timed per shape for the unseen column (0: skip)")
    ap.add_argument("--full", action="store_true", help="full-size zoo models, not the small")
    ap.add_argument("--no-ort", action="store_true",
                    help="no onnxruntime column (no dynamic ONNX export)")
    ap.add_argument("--clock", choices=("thread", "wall"), default="thread",
                    help="time.thread_time (default) or time.perf_counter")
    ap.add_argument("--json", default=str(results_path("dynamic.json")))
    opts = ap.parse_args(argv)
    twins = list(TWINS) if opts.models == "all" else [t for t in opts.models.split(",") if t]
    unknown = [t for t in twins if t not in TWINS]
    if unknown:
        ap.error(f"unknown twins {unknown}; choose from {', '.join(TWINS)}")
    try:
        threads = [int(t) for t in opts.threads.split(",")]
    except ValueError:
        threads = []
    if not threads or min(threads) < 1:
        ap.error(f"--threads: expected positive integers separated by commas, got "
                 f"{opts.threads!r}")
    cases: list[Case] = []
    zoo_names = list(dict.fromkeys(TWINS[t].model for t in twins))
    for zoo in zoo_models(zoo_names, small=not opts.full):
        for twin in (t for t in twins if TWINS[t].model == zoo.name):
            for n in threads:
                print(f"building {twin} at {n} thread(s)", file=sys.stderr)
                cases.append(build_case(twin, zoo, n, opts.full, ort=not opts.no_ort))
    clock = time.thread_time if opts.clock == "thread" else time.perf_counter
    rows = measure(cases, opts.min_time, opts.rounds, opts.unseen, clock)
    print(report(rows))
    with open_results(opts.json) as f:
        json.dump({"rows": rows, "full": opts.full, "threads": threads, "clock": opts.clock}, f, indent=1)
    print(f"\nJSON: {opts.json}", file=sys.stderr)
    return 0 if all(r["correct"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
