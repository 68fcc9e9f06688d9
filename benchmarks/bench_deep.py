"""Deep programs: does every compiler step take time linear in the nesting depth?

    python benchmarks/bench_deep.py                              # every kind and step
    python benchmarks/bench_deep.py --kinds tuples,fns --steps infer,print --depths 1000,2000
    python benchmarks/bench_deep.py --budget 60 --json deep.json

For each kind of nesting, ``depth`` levels deep, the table gives CPU seconds (the machine may
be shared) of each step, and per doubling of the depth the growth of the time: about 2 means
linear, about 4 quadratic. Kinds (each a ``main`` over ``%x: Tensor[(2), float32]``):

- ``tuples``: ``((((%x,),),),)``; ``projections``: that tuple, then ``.0`` as many times;
- ``fns``: ``fn () { fn () { ... %x } }``; ``calls``: ``negative(negative(... %x))``;
- ``let_chain``: ``let %a1 = negative(%x); let %a2 = negative(%a1); ...`` (nested bodies);
- ``nested_lets``: ``let %v1 = (let %v2 = (...); %v2); %v1`` (nested values);
- ``ifs``: ``if (%c) { negative(if (%c) { ... } else { %x }) } else { %x }``;
- ``metadata``: a ``#[metadata]`` section with a JSON entry that many lists deep (parse only).

Steps: ``infer`` (InferType on the untyped module), ``print`` (``astext`` of the typed one),
``parse`` (that text back), ``equal`` / ``hash`` (structural, against a second copy),
``well_formed``, and every pass of ``relay.build``'s optimisation pipeline at opt_level 3
(``optimize_passes``, FuseOps) plus the normal forms the executors' code generators use, each
on the typed module. A step that would take longer than ``--budget`` seconds at the next depth
if it were quadratic is skipped there (``skip``); a step that fails shows the exception's name.
The JSON (default ``bench_results/deep.json`` in the cache directory) has every figure.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import open_results, results_path, table  # noqa: E402
import ember  # noqa: E402
from ember import relay  # noqa: E402
from ember.ir import structural_equal, structural_hash  # noqa: E402
from ember.ir.well_formed import well_formed  # noqa: E402
from ember.relay.backend.pipeline import optimize_passes  # noqa: E402
from ember.relay.transform import FuseOps, InferType  # noqa: E402
from ember.relay.transform.to_a_normal_form import ToANormalForm  # noqa: E402
from ember.relay.transform.to_graph_normal_form import ToGraphNormalForm  # noqa: E402

T = {"shape": (2,), "dtype": "float32"}


# -- the programs ---------------------------------------------------------------------------------
def _main(body: Callable[[relay.Var], relay.Expr], *extra: relay.Var) -> ember.IRModule:
    x = relay.var("x", **T)
    return ember.IRModule.from_expr(relay.Function([x, *extra], body(x)))


def tuples(n: int) -> ember.IRModule:
    def body(x: relay.Expr) -> relay.Expr:
        for _ in range(n):
            x = relay.Tuple([x])
        return x
    return _main(body)


def projections(n: int) -> ember.IRModule:
    def body(x: relay.Expr) -> relay.Expr:
        for _ in range(n):
            x = relay.Tuple([x])
        for _ in range(n):
            x = relay.TupleGetItem(x, 0)
        return x
    return _main(body)


def fns(n: int) -> ember.IRModule:
    def body(x: relay.Expr) -> relay.Expr:
        for _ in range(n):
            x = relay.Function([], x)
        return x
    return _main(body)


def calls(n: int) -> ember.IRModule:
    def body(x: relay.Expr) -> relay.Expr:
        for _ in range(n):
            x = relay.negative(x)
        return x
    return _main(body)


def let_chain(n: int) -> ember.IRModule:
    def body(x: relay.Expr) -> relay.Expr:
        vs = [relay.var(f"a{i}", **T) for i in range(n)]
        out: relay.Expr = vs[-1]
        for i in reversed(range(n)):
            out = relay.Let(vs[i], relay.negative(x if i == 0 else vs[i - 1]), out)
        return out
    return _main(body)


def nested_lets(n: int) -> ember.IRModule:
    def body(x: relay.Expr) -> relay.Expr:
        for i in range(n):
            v = relay.var(f"v{i}")
            x = relay.Let(v, x, v)
        return x
    return _main(body)


def ifs(n: int) -> ember.IRModule:
    c = relay.var("c", shape=(), dtype="bool")

    def body(x: relay.Expr) -> relay.Expr:
        e = x
        for _ in range(n):
            e = relay.If(c, relay.negative(e), x)
        return e
    return _main(body, c)


def metadata_text(n: int) -> str:
    """A small program whose metadata section holds an entry ``n`` lists deep."""
    return ('fn (%x: Tensor[(2), float32]) { %x }\n#[metadata]\n{"relay.Constant": [], '
            '"deep": [' + "[" * n + "]" * n + "]}")


KINDS: dict[str, Callable[[int], Any]] = {
    "tuples": tuples, "projections": projections, "fns": fns, "calls": calls,
    "let_chain": let_chain, "nested_lets": nested_lets, "ifs": ifs, "metadata": metadata_text,
}


# -- the steps ------------------------------------------------------------------------------------
class Case:
    """One kind at one depth: the untyped module, a second copy and, lazily, the typed one
    and its text (the steps that need them run after ``infer`` and ``print``)."""

    def __init__(self, kind: str, n: int) -> None:
        self.kind, self.n = kind, n
        self.mod = KINDS[kind](n)
        self._typed: ember.IRModule | None = None
        self.text: str | None = None

    @property
    def typed(self) -> ember.IRModule:
        if self._typed is None:
            self._typed = InferType()(self.mod)
        return self._typed


def _print(case: Case) -> None:
    case.text = case.typed.astext()


def _parse(case: Case) -> None:
    if isinstance(case.mod, str):  # the metadata kind is text from the start
        ember.parser.fromtext(case.mod)
    else:
        ember.parser.fromtext(case.text if case.text is not None else case.typed.astext())


def _pass_step(make: Callable[[], Any]) -> Callable[[Case], None]:
    def step(case: Case) -> None:
        with ember.transform.PassContext(opt_level=3):
            make()(case.typed)
    return step


STEPS: dict[str, Callable[[Case], None]] = {
    "infer": lambda c: InferType()(c.mod),
    "print": _print,
    "parse": _parse,
    "equal": lambda c: structural_equal(c.typed, KINDS[c.kind](c.n), map_free_vars=True),
    "hash": lambda c: structural_hash(c.typed),
    "well_formed": lambda c: well_formed(c.typed),
    # The VM build (lowering, memory planning, bytecode) of the whole program.
    "vm_compile": lambda c: relay.vm.compile(c.typed, "llvm"),
}
_PIPELINE = [*optimize_passes(), FuseOps(), ToANormalForm(), ToGraphNormalForm()]
for _p in _PIPELINE:
    STEPS.setdefault(type(_p).__name__, _pass_step(lambda p=_p: p))
# Set up outside the timed region: the typed module and its text for later steps.
_NEEDS = {"infer": (), "print": ("typed",), "parse": ("typed", "text")}


def _prepare(case: Case, step: str) -> None:
    needs = _NEEDS.get(step, ("typed",)) if not isinstance(case.mod, str) else ()
    if "typed" in needs:
        case.typed  # noqa: B018 - computed and cached
    if "text" in needs and case.text is None:
        case.text = case.typed.astext()


def _inputs(kind: str, step: str) -> tuple[str, ...]:
    """The steps whose results ``step`` starts from (made again, untimed, if not run)."""
    if kind == "metadata" or step == "infer":
        return ()
    return ("infer", "print") if step == "parse" else ("infer",)


def measure(case: Case, step: str) -> float | str:
    """CPU seconds of one run of ``step`` on ``case``, or the name of what it raised."""
    try:
        _prepare(case, step)
        start = time.process_time()
        STEPS[step](case)
        return time.process_time() - start
    except Exception as err:  # noqa: BLE001 - reported in the table
        return type(err).__name__


def steps_for(kind: str) -> list[str]:
    return ["parse"] if kind == "metadata" else list(STEPS)


# -- the table ------------------------------------------------------------------------------------
def growth(depths: list[int], times: list[Any]) -> list[float | None]:
    """Per consecutive pair of depths, the time ratio scaled to a doubling of the depth."""
    out: list[float | None] = []
    for (d0, t0), (d1, t1) in zip(zip(depths, times), zip(depths[1:], times[1:])):
        ok = isinstance(t0, float) and isinstance(t1, float) and t0 > 0.02
        out.append((t1 / t0) ** (math.log(2) / math.log(d1 / d0)) if ok else None)
    return out


def run_kind(kind: str, steps: list[str], depths: list[int], budget: float) -> dict[str, list]:
    """``{step: [time or error or 'skip' per depth]}``; a step is skipped at a depth where it
    would exceed ``budget`` if its time grew quadratically from the depth before."""
    results: dict[str, list[Any]] = {s: [] for s in steps}
    for i, n in enumerate(depths):
        case: Case | None = None
        for step in steps:
            prev = results[step][-1] if i else 0.0
            slow = not isinstance(prev, float) or prev * (n / depths[i - 1]) ** 2 > budget
            # The typed module and its text are made untimed: not where infer or print failed.
            if slow or any(isinstance(results.get(s, [0.0] * (i + 1))[i], str)
                           for s in _inputs(kind, step)):
                results[step].append("skip")
                continue
            if case is None:
                case = Case(kind, n)
            results[step].append(measure(case, step))
            print(f"  {kind:>12} {step:>24} {n:>6}: {results[step][-1]}", file=sys.stderr,
                  flush=True)
    return results


def _k(n: int) -> str:
    return f"{n // 1000}k" if n % 1000 == 0 else str(n)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--steps", default=None, help="comma-separated; default: all")
    parser.add_argument("--depths", default="1000,2000,4000,10000")
    parser.add_argument("--budget", type=float, default=20.0,
                        help="seconds one step may take (estimated quadratically)")
    parser.add_argument("--json", default=str(results_path("deep.json")))
    opts = parser.parse_args()
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 1000))
    depths = sorted(int(d) for d in opts.depths.split(","))
    report: dict[str, Any] = {"depths": depths, "budget_s": opts.budget, "results": {}}
    rows = []
    for kind in opts.kinds.split(","):
        wanted = opts.steps.split(",") if opts.steps else steps_for(kind)
        res = run_kind(kind, [s for s in steps_for(kind) if s in wanted], depths, opts.budget)
        report["results"][kind] = res
        for step, times in res.items():
            rows.append([f"{kind} {step}", *times, *growth(depths, times)])
    heads = ["kind step", *(f"{d}" for d in depths),
             *(f"x {_k(a)}->{_k(b)}" for a, b in zip(depths, depths[1:]))]
    print(table(rows, heads))
    with open_results(opts.json) as f:
        json.dump(report, f, indent=2)
    print(f"\nCPU seconds per step; growth scaled to a doubling (2 linear, 4 quadratic). "
          f"JSON: {opts.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
