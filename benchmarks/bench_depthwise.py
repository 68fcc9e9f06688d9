"""ember's depthwise and layout-copy kernels alone, per call, on one thread: the depthwise
convs of the zoo's depthwise-separable models (dscnn, mobilenet_v2, mobilenet_v3_large,
efficientnet_lite0) and NCHW <-> NCHW8c copies.

    python benchmarks/bench_depthwise.py                        # this checkout's kernels
    python benchmarks/bench_depthwise.py --baseline /work/main  # next to another checkout's
    python benchmarks/bench_depthwise.py --quick                # one case of each kind

A small C driver (``bench_depthwise_driver.c``) is compiled against ember's headers (and
against ``--baseline``'s, where given) with -O3 -march=native; each case is timed on the
calling thread's CPU clock (``CLOCK_THREAD_CPUTIME_ID``: on a machine shared with other
processes, wall time mostly measures the scheduler), best of 5 rounds. 8 lanes (AVX2), clip
epilogue. Prints a table and writes JSON (``--json``).
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]

from _report import open_results, results_path, table

DRIVER = Path(__file__).with_name("bench_depthwise_driver.c")
ROOT = Path(__file__).resolve().parents[1]
DEFAULT_JSON = results_path("bench_depthwise.json")
# (channels, h, w, kernel, stride): the zoo models' depthwise convs
DEPTHWISE = [(32, 112, 112, 3, 1), (96, 112, 112, 3, 2), (144, 56, 56, 3, 1),
             (144, 56, 56, 5, 2), (240, 28, 28, 5, 1), (480, 14, 14, 3, 1),
             (672, 14, 14, 5, 1), (672, 14, 14, 5, 2), (1152, 7, 7, 5, 1), (960, 7, 7, 3, 1),
             (64, 25, 5, 3, 1),
             # EfficientDet-style (512x512 input): the backbone's stride-2 convs on maps larger
             # than the L2 (L3-bandwidth bound), and the heads' 3x3 on 64x64 maps
             (96, 256, 256, 3, 2), (144, 128, 128, 3, 2), (240, 64, 64, 3, 2), (64, 64, 64, 3, 1)]
# (channels, h * w, block, to_blocked)
LAYOUT = [(64, 56 * 56, 8, 1), (64, 56 * 56, 8, 0), (24, 112 * 112, 8, 1), (1280, 49, 8, 0),
          (3, 224 * 224, 3, 1), (3, 48 * 192, 3, 1)]  # an RGB input read whole (NCHW3c)


def build(root: Path, out: Path) -> Path:
    """The driver compiled against ``root``'s headers."""
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        raise SystemExit("bench_depthwise: needs a C compiler (cc, gcc or clang)")
    exe = out / f"driver_{abs(hash(str(root)))}"
    # the two entry points alone, 8 lanes (as a model's kernel objects are built): seconds,
    # not the whole conv header at every lane count
    only = ["-DEMBER_KERNEL_OBJECT", "-DEMBER_KOBJ_ember_depthwise_nchwc",
            "-DEMBER_KOBJ_ember_layout_nchwc", "-DEMBER_KERNEL_LANES=8"]
    cmd = [cc, "-O3", "-march=native", "-std=c99", "-ffp-contract=fast", *only,
           f"-I{root / 'ember' / 'include'}", str(DRIVER), "-o", str(exe), "-lm"]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode:
        raise SystemExit(f"bench_depthwise: {' '.join(cmd)} failed:\n{proc.stderr[:2000]}")
    return exe


def timed(exe: Path | None, args: list[str]) -> float | None:
    """Microseconds per call, or None (no driver, or a kernel its headers lack)."""
    if exe is None:
        return None
    proc = subprocess.run([str(exe), *args], capture_output=True, text=True, check=False)
    return float(proc.stdout) if proc.returncode == 0 else None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--baseline", type=Path, help="another ember checkout to time alongside")
    p.add_argument("--quick", action="store_true", help="one depthwise and one layout case")
    p.add_argument("--json", default=str(DEFAULT_JSON))
    opts = p.parse_args(argv)
    if opts.baseline is not None and not (opts.baseline / "ember" / "include").is_dir():
        p.error(f"--baseline {opts.baseline}: not an ember checkout (no ember/include)")
    depthwise, layout = (DEPTHWISE[-1:], LAYOUT[:1]) if opts.quick else (DEPTHWISE, LAYOUT)
    rows, records = [], []
    with tempfile.TemporaryDirectory(prefix="ember-bench-dw-") as tmp:
        exe = build(ROOT, Path(tmp))
        base = None if opts.baseline is None else (
            exe if opts.baseline.resolve() == ROOT else build(opts.baseline, Path(tmp)))
        cases = [(f"dw {k}x{k}/{s} {c}x{h}x{w}", ["dw", str(c), str(h), str(w), str(k), str(s)],
                  c * (((h - 1) // s + 1) * ((w - 1) // s + 1)) * k * k)
                 for c, h, w, k, s in depthwise]
        cases += [(f"layout {c}x{hw} {'to' if to else 'from'} NCHW{blk}c",
                   ["layout", str(c), str(hw), str(blk), str(to)], 0)
                  for c, hw, blk, to in layout]
        for name, args, macs in cases:
            us, was = timed(exe, args), timed(base, args)
            rate = macs / us / 1e3 if us and macs else None
            rows.append([name, us, was, was / us if us and was else None, rate])
            records.append({"case": name, "us": us, "baseline_us": was, "gmacs": rate})
    print(table(rows, ["case", "us", "baseline us", "speedup", "GMAC/s"]))
    with open_results(opts.json) as f:
        json.dump({"baseline": str(opts.baseline) if opts.baseline else None,
                   "cases": records}, f, indent=1)
    print(f"wrote {opts.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
