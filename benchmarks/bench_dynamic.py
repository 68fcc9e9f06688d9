"""Dynamic shapes at static speed: each zoo model with symbolic dimensions (its "dynamic twin")
against the static build of the same shape.

    python benchmarks/bench_dynamic.py [--models mlp,dscnn,resnet8,mobilenet_v2,transformer]
                                       [--threads 1,2] [--min-time 0.2] [--rounds 5]
                                       [--unseen 15] [--full] [--json PATH]

Twins (the small zoo configurations unless ``--full``), made by rewriting ``main``'s input
type: ``<model>`` has a ``?`` batch; ``mobilenet_v2/hw`` a ``?`` height and width (it ends in a
global pool; resnet8 and dscnn end in fixed pools before their dense layer, so their images
cannot change size); ``transformer`` a ``?`` batch and sequence (its reshapes rewritten to Relay's special
values, ``[0, 0, heads, -1]``, ``[-3, -2]``, ``[-4, -1, heads, -2]``, so they follow the input).
Each twin is compiled once per thread count with ``ember.compile(mod, executor="vm")``; at each
of its shapes the same model with that shape fixed is compiled with ``executor="graph"``, and
the two results are compared (a mismatch is printed as ``WRONG``).

Columns (milliseconds per call, numpy in and out, median of the interleaved samples):

- ``static``, ``dynamic``: steady state at that shape; ``ratio`` = dynamic / static (the issue's
  target: at most 1.10); ``+us``: dynamic - static in microseconds (a gap that stays the same
  across models and shapes is a per-call cost of the executor, not of the kernels);
- ``unseen``: a dynamic call at a shape other than the last call's (the run computes the
  shapes, checks and sizes again, in C since ``vm/plan_native.py``; its memory blocks are
  already large enough), median of ``--unseen`` calls, each after a call at another shape.
  The Python plan keeps 32 shapes; here ``ember.runtime.vm.static_plan.SIGNATURES`` is set to
  1 for those calls so that alternating two shapes makes every call unseen there too.
  ``u.ratio`` = unseen / static (the issue's target: at most 1.15);
- ``s.after``: the static build at that shape timed the same way, each call after a call of
  the static build of another shape (what switching shapes costs any build: caches), and
  ``u.fair`` = unseen / s.after.

All static and dynamic runners of all models and thread counts are timed interleaved, round by
round (``_timing.interleave``), so drift hits them alike; by default with ``time.thread_time``
(the calling thread's CPU time: steady on a loaded machine, but blind to the kernels' worker
threads at 2 threads; ``--clock wall`` for ``time.perf_counter``). JSON goes to
bench_results/dynamic.json in the cache directory.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _models import zoo_models  # noqa: E402
from _report import open_results, results_path, table  # noqa: E402
from _systems import Runner  # noqa: E402
from _timing import interleave  # noqa: E402
import ember  # noqa: E402
from ember.ir.expr import Call, Function, Var  # noqa: E402
from ember.ir.module import IRModule  # noqa: E402
from ember.ir.types import Any as AnyDim  # noqa: E402
from ember.ir.types import TensorType  # noqa: E402
from ember.ir.visitor import ExprMutator  # noqa: E402
from ember.relay.op.attrs import ReshapeAttrs  # noqa: E402
from ember.runtime.vm import static_plan  # noqa: E402

# twin -> (zoo model, symbolic axes of the input, shapes to time at)
TWINS: dict[str, tuple[str, tuple[int, ...], list[tuple[int, ...]]]] = {
    "mlp": ("mlp", (0,), [(1, 1, 28, 28), (3, 1, 28, 28), (8, 1, 28, 28)]),
    "dscnn": ("dscnn", (0,), [(1, 1, 49, 10), (3, 1, 49, 10), (8, 1, 49, 10)]),
    "resnet8": ("resnet8", (0,), [(1, 3, 32, 32), (3, 3, 32, 32), (8, 3, 32, 32)]),
    "mobilenet_v2": ("mobilenet_v2", (0,), [(1, 3, 32, 32), (3, 3, 32, 32), (8, 3, 32, 32)]),
    "mobilenet_v2/hw": ("mobilenet_v2", (2, 3), [(1, 3, 32, 32), (1, 3, 48, 40),
                                                  (1, 3, 67, 53)]),
    "transformer": ("transformer", (0, 1), [(1, 16, 32), (2, 9, 32), (1, 37, 32)]),
}


# -- the twins ----------------------------------------------------------------------------------
def _newshape(src: Sequence[int], dst: Sequence[int]) -> list[int]:
    """A reshape's new shape in Relay's special values, following the leading (batch,
    sequence) dimensions of its input instead of naming them: keep both (0, 0, ...), merge the
    first two (-3, -2), or split the first (-4, -1, d, -2)."""
    if len(dst) == len(src) - 1 and dst[0] == src[0] * src[1] and tuple(dst[1:]) == tuple(
            src[2:]):
        return [-3, -2]
    if len(dst) == len(src) + 1 and dst[0] * dst[1] == src[0] and tuple(dst[2:]) == tuple(
            src[1:]):
        return [-4, -1, dst[1], -2]
    if tuple(dst[:2]) == tuple(src[:2]):
        return [0, 0, *dst[2:-1], -1]
    raise ValueError(f"bench_dynamic: no symbolic form for reshape {tuple(src)} -> {tuple(dst)}")


class _Twin(ExprMutator):
    """``main``'s body over a new input variable, its reshapes in special values."""

    def __init__(self, old: Var, new: Var) -> None:
        super().__init__()
        self.old, self.new = old, new

    def visit_var(self, e: Var) -> Any:
        return self.new if e is self.old else e

    def visit_call(self, call: Call) -> Any:
        out = super().visit_call(call)
        if getattr(call.op, "name", None) != "reshape":
            return out
        src = call.args[0].checked_type_.shape
        attrs = ReshapeAttrs(_newshape(src, call.checked_type_.shape))
        return Call(out.op, out.args, attrs, span=out.span)


def with_input_shape(mod: IRModule, shape: Sequence[Any]) -> IRModule:
    """``mod`` with its first input of ``shape`` (ints, or None for ``?``)."""
    main = mod["main"]
    old = main.params[0]
    ty = old.checked_type_
    dims = tuple(AnyDim() if d is None else int(d) for d in shape)
    new = Var(old.name_hint, TensorType(dims, ty.dtype))
    body = _Twin(old, new).visit(main.body)
    return IRModule.from_expr(Function((new, *main.params[1:]), body))


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


def build_case(twin: str, zoo: Any, threads: int) -> Case:
    name, axes, shapes = TWINS[twin]
    base = [int(d) for d in zoo.mod["main"].params[0].checked_type_.shape]
    dyn_shape = [None if i in axes else d for i, d in enumerate(base)]
    dynamic = ember.compile(with_input_shape(zoo.mod, dyn_shape), executor="vm",
                            params=zoo.params, threads=threads)
    rng = np.random.default_rng(0)
    statics, inputs, checked = [], [], []
    for shape in shapes:
        model = ember.compile(with_input_shape(zoo.mod, shape), executor="graph",
                              params=zoo.params, threads=threads)
        x = rng.uniform(-1, 1, size=shape).astype("float32")
        want, got = _first(model(x)), _first(dynamic(x))
        checked.append(want.shape == got.shape and np.allclose(got, want, rtol=1e-4,
                                                                atol=1e-4))
        statics.append(model)
        inputs.append(x)
    return Case(twin, threads, dynamic, list(shapes), statics, inputs, checked)


def _first(out: Any) -> np.ndarray:
    return np.asarray(out[0] if isinstance(out, (list, tuple)) else out)


# -- timing -------------------------------------------------------------------------------------
def _runner(system: str, threads: int, model: Any, x: np.ndarray) -> Runner:
    return Runner(system, threads, lambda: model(x), lambda: [], contextlib.nullcontext)


def after_other_ms(case: Case, k: int, calls: int, clock: Any, dynamic: bool) -> float:
    """Median ms of a call at shape k right after one at another shape: of the dynamic build,
    with the plan keeping one shape (so the call at k is always one it has not kept), or of
    the static builds of the two shapes."""
    j = (k + 1) % len(case.inputs)
    other, x, times = case.inputs[j], case.inputs[k], []
    first, model = (case.dynamic, case.dynamic) if dynamic else (case.static[j],
                                                                 case.static[k])
    saved = static_plan.SIGNATURES
    static_plan.SIGNATURES = 1
    try:
        for _ in range(calls):  # (each model sets its own thread count per call)
            first(other)
            start = clock()
            model(x)
            times.append(clock() - start)
    finally:
        static_plan.SIGNATURES = saved
    return statistics.median(times) * 1e3


def measure(cases: list[Case], min_time: float, rounds: int, unseen: int,
            clock: Any = time.thread_time) -> list[dict]:
    runners, keys = [], []
    for c in cases:
        for k, x in enumerate(c.inputs):
            runners += [_runner("static", c.threads, c.static[k], x),
                        _runner("dynamic", c.threads, c.dynamic, x)]
            keys.append((c, k))
    timings = interleave(runners, min_time, rounds, clock)
    rows = []
    for i, (c, k) in enumerate(keys):
        st, dy = timings[2 * i].median * 1e3, timings[2 * i + 1].median * 1e3
        un = after = None
        if unseen and len(c.inputs) > 1:
            un = after_other_ms(c, k, unseen, clock, dynamic=True)
            after = after_other_ms(c, k, unseen, clock, dynamic=False)
        rows.append({"model": c.twin, "shape": list(c.shapes[k]), "threads": c.threads,
                     "static_ms": st, "dynamic_ms": dy, "ratio": dy / st,
                     "extra_us": (dy - st) * 1e3,
                     "unseen_ms": un, "unseen_ratio": None if un is None else un / st,
                     "static_after_other_ms": after,
                     "unseen_fair_ratio": None if un is None else un / after,
                     "correct": c.checked[k]})
    return rows


def report(rows: list[dict]) -> str:
    lines = [[r["model"], "x".join(map(str, r["shape"])), r["threads"], r["static_ms"],
              r["dynamic_ms"], r["ratio"], round(r["extra_us"]), r["unseen_ms"],
              r["unseen_ratio"], r["static_after_other_ms"], r["unseen_fair_ratio"],
              "" if r["correct"] else "WRONG"] for r in rows]
    heads = ["model", "shape", "thr", "static", "dynamic", "ratio", "+us", "unseen", "u.ratio",
             "s.after", "u.fair", ""]
    return table(lines, heads)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default=",".join(TWINS),
                    help=f"twins, comma-separated (default all: {', '.join(TWINS)})")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--min-time", type=float, default=0.2,
                    help="seconds of timed calls per runner in all (default 0.2)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--unseen", type=int, default=15,
                    help="calls timed per shape for the unseen column (0: skip)")
    ap.add_argument("--full", action="store_true", help="full-size zoo models, not the small")
    ap.add_argument("--clock", choices=("thread", "wall"), default="thread",
                    help="time.thread_time (default) or time.perf_counter")
    ap.add_argument("--json", default=str(results_path("dynamic.json")))
    opts = ap.parse_args(argv)
    twins = [t for t in opts.models.split(",") if t]
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
    zoo_names = list(dict.fromkeys(TWINS[t][0] for t in twins))
    for zoo in zoo_models(zoo_names, small=not opts.full):
        for twin in (t for t in twins if TWINS[t][0] == zoo.name):
            for n in threads:
                print(f"building {twin} at {n} thread(s)", file=sys.stderr)
                cases.append(build_case(twin, zoo, n))
    clock = time.thread_time if opts.clock == "thread" else time.perf_counter
    rows = measure(cases, opts.min_time, opts.rounds, opts.unseen, clock)
    print(report(rows))
    with open_results(opts.json) as f:
        json.dump({"rows": rows, "full": opts.full, "threads": threads, "clock": opts.clock}, f, indent=1)
    print(f"\nJSON: {opts.json}", file=sys.stderr)
    return 0 if all(r["correct"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
