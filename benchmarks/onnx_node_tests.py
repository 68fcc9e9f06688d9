"""How many of the ONNX backend node tests ember imports, and whether they run right.

    python benchmarks/onnx_node_tests.py [--ops Reshape,Slice,...] [--run] [--json PATH]
        [--baseline PATH [--only-new]]

The node tests are generated from the installed ``onnx`` package
(``onnx.backend.test.case.node.collect_testcases``): one small model per case, with inputs
and the expected outputs. Each is imported with ``from_onnx`` and no shapes (values that fix
shapes, axes and counts are graph inputs there, as in a model with dynamic axes). With
``--run``, each imported case is compiled for the VM and run on every data set, and its
outputs compared with the expected ones (the case's rtol/atol). Prints a table per operator
(cases, imported, run right) and the reasons for refusals; writes the figures as JSON (default
bench_results/onnx_node_tests.json in the cache directory). ``--baseline`` (a JSON written by
an earlier run, e.g. of another checkout) adds the cases that import now and did not then
(``--only-new``: run only those).
"""
from __future__ import annotations

import argparse
import json
import sys
import warnings
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import open_results, results_path, table  # noqa: E402


def cases(ops: set[str] | None) -> list[Any]:
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        found = collect_testcases(None)
    return [c for c in found if ops is None or c.model.graph.node[-1].op_type in ops
            or any(n.op_type in ops for n in c.model.graph.node)]


def op_of(case: Any) -> str:
    return case.model.graph.node[0].op_type if len(case.model.graph.node) == 1 else \
        next((n.op_type for n in case.model.graph.node), "?")


def try_import(case: Any) -> tuple[Any, str | None]:
    from ember import relay

    try:
        return relay.frontend.from_onnx(case.model), None
    except Exception as err:  # noqa: BLE001  (the reason is the result)
        return None, f"{type(err).__name__}: {str(err).splitlines()[0][:160]}"


def run_case(case: Any, imported: Any) -> str | None:
    """None when every data set matches, else why not."""
    import ember
    from ember import relay

    mod, params = imported
    try:
        exe = relay.vm.compile(mod, "llvm", params=params)
        vm = ember.runtime.vm.VirtualMachine(exe, ember.cpu())
        names = [p.name_hint for p in mod["main"].params]
        inputs = [i.name for i in case.model.graph.input]
        for ins, outs in case.data_sets:
            feed = dict(zip(inputs, ins))
            got = _flat(vm.invoke("main", *[feed[n] for n in names]))
            for g, w in zip(got, outs):
                w = np.asarray(w)
                if g.shape != w.shape:
                    return f"shape {g.shape}, expected {w.shape}"
                np.testing.assert_allclose(g, w, rtol=case.rtol, atol=case.atol,
                                           equal_nan=True)
    except AssertionError as err:
        return "mismatch: " + str(err).strip().splitlines()[0][:120]
    except Exception as err:  # noqa: BLE001
        return f"{type(err).__name__}: {str(err).splitlines()[0][:160]}"
    return None


def _flat(value: Any) -> list[np.ndarray]:
    if hasattr(value, "numpy"):
        return [value.numpy()]
    return [x for v in value for x in _flat(v)]


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", help="comma-separated op types (default: every case)")
    ap.add_argument("--run", action="store_true", help="compile, run and compare (slow)")
    ap.add_argument("--json", default=str(results_path("onnx_node_tests.json")))
    ap.add_argument("--baseline", help="JSON of an earlier run, to list what changed")
    ap.add_argument("--only-new", action="store_true",
                    help="with --run and --baseline: run only the cases new since then")
    opts = ap.parse_args(argv)
    ops = set(opts.ops.split(",")) if opts.ops else None
    before = json.loads(Path(opts.baseline).read_text())["cases"] if opts.baseline else {}
    results: dict[str, dict[str, Any]] = {}
    for case in cases(ops):
        imported, why = try_import(case)
        row: dict[str, Any] = {"op": op_of(case), "imports": why is None, "why": why}
        old = before.get(case.name, {}).get("imports", True)
        if opts.run and imported is not None and not (opts.only_new and old):
            row["run_error"] = run_case(case, imported)
        results[case.name] = row
    by_op: dict[str, Counter[str]] = defaultdict(Counter)
    for row in results.values():
        c = by_op[row["op"]]
        c["cases"] += 1
        c["imported"] += row["imports"]
        c["right"] += row["imports"] and "run_error" in row and row["run_error"] is None
    rows = [[op, c["cases"], c["imported"], c["right"] if opts.run else None]
            for op, c in sorted(by_op.items())]
    print(table(rows, ["op", "cases", "imported", "run right"]))
    n, imported = len(results), sum(r["imports"] for r in results.values())
    print(f"\n{imported} of {n} cases import ({100 * imported / max(n, 1):.0f}%)")
    reasons = Counter(r["why"].split(":")[0] + ": " + r["why"].split(": ", 1)[1][:70]
                      for r in results.values() if r["why"])
    print("\nmost common refusals:")
    for why, k in reasons.most_common(15):
        print(f"  {k:4d}  {why}")
    if opts.run:
        wrong = {name: r["run_error"] for name, r in results.items() if r.get("run_error")}
        print(f"\n{len(wrong)} imported case(s) that do not run right:")
        for name, why in sorted(wrong.items()):
            print(f"  {name}: {why}")
    if opts.baseline:
        new = sorted(k for k, r in results.items() if r["imports"]
                     and k in before and not before[k]["imports"])
        print(f"\n{len(new)} case(s) import now and did not in the baseline:")
        for name in new:
            extra = ""
            if opts.run:
                extra = "  ok" if results[name].get("run_error") is None else \
                    f"  WRONG: {results[name]['run_error']}"
            print(f"  {name}{extra}")
    with open_results(opts.json) as f:
        json.dump({"cases": results}, f, indent=1)
    print(f"\nwrote {opts.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
