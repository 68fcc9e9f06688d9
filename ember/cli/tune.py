"""``ember tune MODEL``: measure the tiles of a model's GEMM and conv kernels on this machine
and keep the best in the tuning records, which every later build here reads (a thin front end
over ``ember.tune``, ``ember/tuning/``)."""
from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path
from typing import Any

from ._console import CLIError, Status, fmt_seconds, table
from .compile import add_model_options, load_model
from .options import positive_float, positive_int

EXAMPLES = """\
examples:
  ember tune model.onnx                        # ~30 s of measuring; later builds use the result
  ember tune model.onnx --budget 120 --threads 4
  ember tune model.relay --records tiles.json  # write another file than this machine's default
  ember tune model.onnx --json > tuning.json
  then: ember compile model.onnx               # the build picks the measured tiles up
records:
  default file   $EMBER_CACHE_DIR/tuning/<CPU model>.json (~/.cache/ember when unset)
  EMBER_TUNING_RECORDS=FILE   builds read FILE instead; =off: builds use the cost models only
  A record applies to a build for the same kernel call, SIMD level and thread count
  (compile with the same --threads, target and layout options as the tune).
"""


def add_parser(sub: Any, parents: list[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("tune", parents=parents, help="measure kernel tiles for later builds",
                       description="Measure tile sizes of a model's GEMM and conv kernels on "
                       "this machine and keep the best in the tuning records.",
                       epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_options(p)
    p.add_argument("--threads", type=positive_int, default=None,
                   help="the thread count to tune for (default: the cores)")
    p.add_argument("--budget", type=positive_float, default=30.0, metavar="SECONDS",
                   help="seconds of measuring in all (default 30)")
    p.add_argument("--records", metavar="FILE",
                   help="the record file to update (default: what builds read)")
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    p.set_defaults(func=main)


def _records_file(args: argparse.Namespace) -> Path:
    from ..topi.tile_records import ENV_VAR, records_path

    if args.records is not None:
        path = Path(args.records)
        if not path.parent.is_dir():
            raise CLIError(f"--records {path}: no directory {str(path.parent)!r}")
        return path
    path = records_path()
    if path is None:
        raise CLIError(f"tuning records are off ({ENV_VAR}=off)",
                       f"pass --records FILE, or unset {ENV_VAR}", code=2)
    return path


def describe(kernel: str, geometry: tuple[int, ...]) -> str:
    """A kernel call's geometry for people: ``64x56x56 -> 128x28x28 3x3/2`` (conv, C x H x W,
    kernel / stride) or ``1x512 @ 512x1000`` (GEMM, batch prefix when above 1)."""
    if kernel == "sgemm":
        batch, m, n, k = geometry
        return f"{batch} x " * (batch > 1) + f"{m}x{k} @ {k}x{n}"
    from ..topi.nn.conv2d_nchwc import conv_of_key

    g = conv_of_key(geometry)
    text = f"{g.ic}x{g.h}x{g.w} -> {g.oc}x{g.oh}x{g.ow} {g.kh}x{g.kw}/{g.strides[0]}"
    return text + (f" g{g.groups}" if g.groups > 1 else "") + (f" n{g.n}" if g.n > 1 else "")


def _tiles(tiles: Any) -> dict[str, int]:
    return {k: int(v) for k, v in dataclasses.asdict(tiles).items()}


def _as_json(result: Any, seconds: float) -> dict[str, Any]:
    return {"records": str(result.path), "threads": result.threads, "level": result.level,
            "seconds": seconds,
            "kernels": [{"kernel": o.kernel, "geometry": list(o.geometry),
                         "call": describe(o.kernel, o.geometry),
                         "model_tiles": _tiles(o.model_tiles), "tiles": _tiles(o.tiles),
                         "model_seconds": o.model_seconds, "seconds": o.seconds,
                         "speedup": o.speedup, "tried": o.tried, "rejected": o.rejected}
                        for o in result.outcomes]}


def summary(result: Any, seconds: float) -> str:
    """The table and the lines after it."""
    rows = [(o.kernel, describe(o.kernel, o.geometry), fmt_seconds(o.model_seconds),
             fmt_seconds(o.seconds), f"{o.speedup:.2f}x",
             " ".join(f"{k}={v}" for k, v in _tiles(o.tiles).items()))
            for o in result.outcomes]
    model = sum(o.model_seconds for o in result.outcomes)
    best = sum(o.seconds for o in result.outcomes)
    better = sum(o.tiles != o.model_tiles for o in result.outcomes)
    lines = [table(("kernel", "call", "cost model", "best", "speed-up", "tiles"), rows,
                   right=(2, 3, 4)),
             f"{len(rows)} kernel calls, {better} with better tiles than the cost model's; "
             f"one call of each: {fmt_seconds(model)} -> {fmt_seconds(best)}",
             f"records: {result.path} ({result.level}, {result.threads} thread(s)); "
             f"measured in {fmt_seconds(seconds)}"]
    if not rows:
        lines[0] = "no GEMM or conv kernel calls to tune in this model"
    return "\n".join(lines)


def main(args: argparse.Namespace) -> int:
    from ..ir.transform import PassContext
    from ..topi.tile_records import THREADS_OPTION
    from ..tuning import tune

    start = time.perf_counter()
    with Status(total=2) as status:
        _, mod, params, config, threads, _ = load_model(args, status)
        records = _records_file(args)
        status.stage("finding kernel calls, building the harness")

        def progress(index: int, count: int, query: Any) -> None:
            status.note(f"{index + 1}/{count} {query.kernel} "
                        f"{describe(query.kernel, query.geometry)}")

        with PassContext(opt_level=args.opt_level,
                         config={**config, THREADS_OPTION: threads}):
            result = tune(mod, params or None, args.target, threads, args.budget, records,
                          progress)
    seconds = time.perf_counter() - start
    print(json.dumps(_as_json(result, seconds), indent=1) if args.json
          else summary(result, seconds))
    return 0
