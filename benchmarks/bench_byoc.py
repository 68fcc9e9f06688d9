"""BYOC passes: how long AnnotateTarget, MergeCompilerRegions and PartitionGraph take as
programs grow (they must stay linear in program size), and on resnet18.

    python benchmarks/bench_byoc.py                      # chains of 300, 1000, 3000 ops
    python benchmarks/bench_byoc.py --sizes 1000 --json byoc.json

A chain alternates ``exp`` (ember's) with two ``add`` (the ccompiler's), so a third of its ops
start a region that the merge joins with the next; resnet18 (32x32 input) offloads its
residual adds. The table gives seconds per pass and the partitions made; the JSON (default
``bench_results/byoc.json`` in the cache directory) has every figure.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import open_results, results_path, table  # noqa: E402
import ember  # noqa: E402
from ember import relay  # noqa: E402

PASSES = ("AnnotateTarget", "MergeCompilerRegions", "PartitionGraph")


def _chain(size: int) -> ember.IRModule:
    x = relay.var("x", shape=(4,))
    y = x
    for i in range(size):
        y = relay.add(y, x) if i % 3 else relay.exp(y)
    return ember.IRModule.from_expr(relay.Function([x], y))


def _resnet18() -> ember.IRModule:
    mod, _ = relay.testing.resnet.get_workload(num_layers=18, image_shape=(3, 32, 32))
    return mod


def measure(name: str, mod: ember.IRModule) -> dict[str, Any]:
    passes = [relay.transform.AnnotateTarget(["ccompiler"]),
              relay.transform.MergeCompilerRegions(), relay.transform.PartitionGraph()]
    row: dict[str, Any] = {"program": name}
    for label, p in zip(PASSES, passes):
        start = time.perf_counter()
        mod = p(mod)
        row[label] = time.perf_counter() - start
    row["partitions"] = len(mod.functions) - 1
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[300, 1000, 3000])
    ap.add_argument("--json", default=str(results_path("byoc.json")))
    args = ap.parse_args()
    rows = [measure(f"chain {n}", _chain(n)) for n in args.sizes]
    rows.append(measure("resnet18", _resnet18()))
    print(table([[r["program"], *(r[p] for p in PASSES), r["partitions"]] for r in rows],
                ["program", *(f"{p} s" for p in PASSES), "partitions"]))
    with open_results(args.json) as f:
        json.dump(rows, f, indent=2)


if __name__ == "__main__":
    main()
