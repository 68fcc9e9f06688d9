"""The USMP planner on the model zoo: planned bytes next to the liveness lower bound, per
algorithm, with one unbounded pool (intermediates only), and the planning time.

    python benchmarks/bench_usmp.py                       # every zoo model below
    python benchmarks/bench_usmp.py --models mlp,resnet18_32 --json out.json
    python benchmarks/bench_usmp.py --models '' --synthetic 100,300,1000

Also random problems of 100 and 300 buffers (``--synthetic``) on which hill_climb runs all of
its steps. Only planning runs (the fused ``main`` as the AOT build sees it, then the planner): no C is
compiled. Times are wall-clock seconds of one run on a possibly shared machine.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from typing import Any

import ember
from ember.ir.memory_pools import WorkspacePoolInfo
from ember.ir.transform import PassContext
from ember.relay import testing
from ember.relay.backend._liveness import Dataflow
from ember.relay.backend.aot.usmp import (
    ALGORITHMS,
    DEFAULT_ALGORITHM,
    UsmpSettings,
    plan_dataflow_pools,
    plan_pools,
)
from ember.relay.backend.pipeline import optimize
from ember.relay.transform import InferType, ToGraphNormalForm

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _report import open_results, results_path, table  # noqa: E402

SMALL = {"num_classes": 10, "image_shape": (3, 32, 32)}
MODELS: dict[str, Any] = {
    "mlp": lambda: testing.mlp.get_workload(1),
    "resnet18_32": lambda: testing.resnet.get_workload(num_layers=18, **SMALL),
    "mobilenet_32": lambda: testing.mobilenet.get_workload(alpha=0.25, **SMALL),
    "dqn": lambda: testing.dqn.get_workload(1),
    "vgg11_32": lambda: testing.vgg.get_workload(1, num_classes=10, image_shape=(3, 32, 32)),
    "squeezenet_64": lambda: testing.squeezenet.get_workload(num_classes=10,
                                                             image_shape=(3, 64, 64)),
    "resnet50_64": lambda: testing.resnet.get_workload(num_layers=50, num_classes=10,
                                                       image_shape=(3, 64, 64)),
    "densenet121_64": lambda: testing.densenet.get_workload(batch_size=1, classes=10,
                                                            image_shape=(3, 64, 64)),
    "inception_v3": lambda: testing.inception_v3.get_workload(num_classes=10),
}


def fused_dataflow(mod: ember.IRModule, params: dict[str, Any]) -> Dataflow:
    """The dataflow of ``main`` after the AOT build's optimisations and fusion (target c)."""
    with PassContext(opt_level=3):
        fused, _ = optimize(ToGraphNormalForm()(InferType()(mod)), ember.target.Target("c"),
                            None, params)
    return Dataflow.from_function(fused["main"], fused)


def plan_model(name: str) -> list[dict[str, Any]]:
    mod, params = MODELS[name]()
    df = fused_dataflow(mod, params)
    rows = []
    pool = (WorkspacePoolInfo("global_workspace", ["c"]),)
    # the three algorithms by name, then the default (no algorithm configured: the default
    # greedy order improved by hill_climb where it misses the bound)
    for algorithm, settings in [*((a, UsmpSettings(a, False, pool)) for a in ALGORITHMS),
                                ("default", UsmpSettings(DEFAULT_ALGORITHM, False, pool,
                                                         improve=True))]:
        start = time.perf_counter()
        _, plan = plan_dataflow_pools(df, settings, 16)
        rows.append({"model": name, "algorithm": algorithm, "planned_bytes": plan.total,
                     "lower_bound": plan.lower_bound, "buffers": len(plan.offsets),
                     "plan_s": time.perf_counter() - start})
    return rows


def synthetic(n: int, seed: int = 0) -> tuple[list[int], list[tuple[int, int]]]:
    """``n`` buffers of random sizes alive over random short spans of ``n // 3`` steps: dense
    enough that the greedy orders miss the bound and hill_climb runs all its steps."""
    rng = random.Random(seed)
    spans = []
    for _ in range(n):
        start = rng.randrange(max(n // 3, 1))
        spans.append((start, start + rng.randrange(1, 12)))
    return [rng.randrange(1, 2000) * 16 for _ in range(n)], spans


def plan_synthetic(n: int) -> list[dict[str, Any]]:
    sizes, spans = synthetic(n)
    rows = []
    for algorithm in ALGORITHMS:
        start = time.perf_counter()
        plan = plan_pools(sizes, spans, [WorkspacePoolInfo("global_workspace", ["c"])],
                          algorithm, 16)
        rows.append({"model": f"synthetic_{n}", "algorithm": algorithm,
                     "planned_bytes": plan.total, "lower_bound": plan.lower_bound,
                     "buffers": n, "plan_s": time.perf_counter() - start})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--synthetic", default="100,300",
                    help="buffer counts of random planning problems ('' for none)")
    ap.add_argument("--json", default=str(results_path("usmp.json")))
    args = ap.parse_args()
    rows = [r for name in args.models.split(",") if name for r in plan_model(name)]
    rows += [r for n in args.synthetic.split(",") if n for r in plan_synthetic(int(n))]
    print(table([[r["model"], r["algorithm"], r["buffers"], r["planned_bytes"], r["lower_bound"],
                  f"{r['planned_bytes'] / max(r['lower_bound'], 1):.3f}", r["plan_s"]]
                 for r in rows],
                ["model", "algorithm", "buffers", "planned", "bound", "ratio", "plan s"]))
    with open_results(args.json) as f:
        json.dump(rows, f, indent=1)
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
