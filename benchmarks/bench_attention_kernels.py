"""ember's attention-family kernels straight from their headers: GEMM epilogues (GELU erf and
tanh, sigmoid, SiLU, tanh), softmax rows, a wide GEMM; this checkout against another one.

    python benchmarks/bench_attention_kernels.py                       # this checkout
    python benchmarks/bench_attention_kernels.py --baseline /path/to/main --big

``benchmarks/_attention_kernels.c`` is compiled once per include directory (this checkout's,
and ``--baseline``'s when given) with ember's flags for this host, then the executables run
in turns for ``--rounds`` rounds, each case's best kept. Times are the calling thread's CPU
time (one thread), so other processes loading the machine barely move them. Prints a table
and writes JSON (``--json``, default under ember's cache directory).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(Path(__file__).resolve().parent)]

from _report import open_results, results_path, table

from ember.contrib import cc

DRIVER = Path(__file__).resolve().parent / "_attention_kernels.c"
HEADER = Path("ember/include/ember/kernels/gemm.h")
FLAGS = ["-O3", "-std=c99", "-ffp-contract=fast", "-march=native", "-fno-tree-loop-if-convert"]


def build(include: Path, out: Path) -> Path:
    """The driver compiled against the headers under ``include``; CalledProcessError names
    the command."""
    compiler = cc.get_cc()
    if compiler is None:
        raise RuntimeError("bench_attention_kernels: no C compiler found")
    subprocess.run([compiler, *FLAGS, "-I", str(include), str(DRIVER), "-o", str(out), "-lm"],
                   check=True)
    return out


def run_once(exe: Path, reps: int, big: bool) -> dict[str, float]:
    out = subprocess.run([str(exe), str(reps), str(int(big))], check=True, capture_output=True,
                         text=True).stdout
    return {name: float(us) for name, us in (line.split() for line in out.splitlines())}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=Path, default=None,
                        help="another ember checkout (its ember/include) to compare with")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--reps", type=int, default=40, help="calls per case per round")
    parser.add_argument("--big", action="store_true", help="add the 128x384x16384 GEMM")
    parser.add_argument("--json", default=str(results_path("attention_kernels.json")))
    opts = parser.parse_args(argv)
    if opts.rounds < 1 or opts.reps < 1:
        parser.error(f"--rounds and --reps must be >= 1, got {opts.rounds}, {opts.reps}")
    if opts.baseline is not None and not (opts.baseline / HEADER).is_file():
        parser.error(f"--baseline {opts.baseline}: no {HEADER} there (not an ember checkout)")
    with tempfile.TemporaryDirectory(prefix="ember-attn-bench-") as tmp:
        exes = {"ember": build(ROOT / "ember" / "include", Path(tmp) / "this")}
        if opts.baseline is not None:
            exes["baseline"] = build(opts.baseline / "ember" / "include", Path(tmp) / "base")
        best: dict[str, dict[str, float]] = {k: {} for k in exes}
        for _ in range(opts.rounds):
            for key, exe in exes.items():
                for case, us in run_once(exe, opts.reps, opts.big).items():
                    best[key][case] = min(us, best[key].get(case, us))
    heads = ["case", "ember us"] + (["baseline us", "ember/baseline"] if "baseline" in best else [])
    rows = []
    for case, us in best["ember"].items():
        row = [case, us]
        if "baseline" in best:
            row += [best["baseline"][case], us / best["baseline"][case]]
        rows.append(row)
    print(table(rows, heads))
    with open_results(opts.json) as f:
        json.dump({"clock": "thread_time", "best_us": best,
                   "baseline": str(opts.baseline) if opts.baseline else None}, f, indent=1)
    print(f"wrote {opts.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
