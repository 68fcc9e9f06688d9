"""Transposed convolutions and resizes of a DBNet text detector's head and FPN: ember against
onnxruntime and numpy, and the whole detector against onnxruntime.

    python benchmarks/bench_conv_transpose.py                    # 640x640 input, 1 thread
    python benchmarks/bench_conv_transpose.py --small --threads 2 --json ct.json

Each case is a one-node ONNX model (ConvTranspose with its bias, or Resize) imported with
``relay.frontend.from_onnx`` and built at opt_level 3 for the host (``llvm``); the ember
column is that build, ``ember NCHW`` the same build with AlterOpLayout disabled (for a
ConvTranspose: its phase convs on topi's NCHW conv template), ``ort`` an
onnxruntime session on the same file and ``numpy`` ember's numpy reference. All run
interleaved round by round (``_timing.interleave``); the table gives median milliseconds and
the ratios to ember (above 1: ember is faster). ``dbnet`` is the zoo's detector
(``relay.testing.dbnet``, its ONNX twin for onnxruntime). The JSON (default
``bench_results/conv_transpose.json`` in the cache directory) has every figure.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import open_results, results_path, table  # noqa: E402
from _systems import Runner, ember_runner, ort_runner, ort_session  # noqa: E402
from _timing import interleave  # noqa: E402

import ember  # noqa: E402
from ember import relay  # noqa: E402
from ember.relay.backend import Executor  # noqa: E402


class Case(NamedTuple):
    """One benchmark model: the ONNX model, its input, and numpy's way to the same output."""

    name: str
    model: Any
    x: np.ndarray
    numpy_ref: Any


def _onnx_model(node: Any, x_shape: tuple, y_shape: tuple, inits: list) -> Any:
    from onnx import TensorProto, helper

    graph = helper.make_graph([node], "case",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, y_shape)],
                              inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def conv_transpose_case(c: int, oc: int, hw: int, k: int, s: int, pad: int) -> Case:
    """ConvTranspose (with bias) of a (1, c, hw, hw) input, kernel k, stride s, padding pad."""
    from onnx import helper, numpy_helper

    from ember.relay.op.nn.conv import conv2d_transpose_nchw

    rng = np.random.default_rng(0)
    w = rng.uniform(-0.1, 0.1, (c, oc, k, k)).astype("float32")
    b = rng.uniform(-0.1, 0.1, oc).astype("float32")
    out = (hw - 1) * s - 2 * pad + k
    node = helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], kernel_shape=[k, k],
                            strides=[s, s], pads=[pad] * 4)
    model = _onnx_model(node, (1, c, hw, hw), (1, oc, out, out),
                        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    x = rng.uniform(-1, 1, (1, c, hw, hw)).astype("float32")

    def ref() -> np.ndarray:
        y = conv2d_transpose_nchw(x, w, (s, s), (pad,) * 4, (0, 0), (1, 1), 1)
        return y + b.reshape(1, -1, 1, 1)

    return Case(f"convT {c}->{oc} k{k}s{s}p{pad} {hw}^2", model, x, ref)


def resize_case(c: int, hw: int, mode: str) -> Case:
    """Resize x2 of a (1, c, hw, hw) input: nearest (asymmetric, floor) or bilinear
    (half_pixel)."""
    from onnx import helper, numpy_helper

    from ember.relay.op.image import Resize2DAttrs, _resize_ref

    nearest = mode == "nearest"
    node = helper.make_node(
        "Resize", ["x", "", "scales"], ["y"], mode="nearest" if nearest else "linear",
        coordinate_transformation_mode="asymmetric" if nearest else "half_pixel",
        nearest_mode="floor")
    scales = np.array([1, 1, 2, 2], "float32")
    model = _onnx_model(node, (1, c, hw, hw), (1, c, 2 * hw, 2 * hw),
                        [numpy_helper.from_array(scales, "scales")])
    x = np.random.default_rng(0).uniform(-1, 1, (1, c, hw, hw)).astype("float32")
    attrs = Resize2DAttrs((2 * hw, 2 * hw), (2.0, 2.0), "NCHW",
                          "nearest_neighbor" if nearest else "linear",
                          "asymmetric" if nearest else "half_pixel", "floor")
    return Case(f"resize {mode} x2 {c}x{hw}^2", model, x, lambda: _resize_ref(x, attrs))


def head_cases(size: int) -> list[Case]:
    """The detector's head (FPN at a quarter of the input size) and its FPN upsampling."""
    q = size // 4
    return [conv_transpose_case(64, 64, q, 2, 2, 0), conv_transpose_case(64, 1, 2 * q, 2, 2, 0),
            conv_transpose_case(64, 64, q, 4, 2, 1), conv_transpose_case(32, 32, q, 3, 2, 1),
            resize_case(256, q // 2, "nearest"), resize_case(64, q // 2, "bilinear")]


def _ember(model: Any, x: np.ndarray, threads: int, disabled: tuple = ()) -> Runner:
    from ember.relay.frontend import from_onnx

    mod, params = from_onnx(model, {"x": x.shape})
    with ember.transform.PassContext(opt_level=3, disabled_pass=list(disabled)):
        factory = relay.build(mod, "llvm", params=params, executor=Executor("graph"))
    return ember_runner("graph", factory, factory["default"](ember.cpu(0)), threads, {"x": x})


def _ort(model: Any, x: np.ndarray, threads: int, tmp: Path) -> Runner:
    path = tmp / "model.onnx"
    path.write_bytes(model.SerializeToString())
    return ort_runner(ort_session(str(path), threads), threads,
                      {model.graph.input[0].name: x})


def _numpy(fn: Any) -> Runner:
    import contextlib

    box: list[Any] = [fn()]

    def run() -> None:
        box[0] = fn()

    return Runner("numpy", 1, run, lambda: [box[0]], contextlib.nullcontext)


def measure(case: Case, threads: int, min_time: float, rounds: int) -> dict[str, Any]:
    """Median ms of ember, ember without AlterOpLayout, onnxruntime and numpy on ``case``."""
    with tempfile.TemporaryDirectory() as tmp:
        runners = {"ember": _ember(case.model, case.x, threads),
                   "ember NCHW": _ember(case.model, case.x, threads, ("AlterOpLayout",)),
                   "ort": _ort(case.model, case.x, threads, Path(tmp)),
                   "numpy": _numpy(case.numpy_ref)}
        for r in runners.values():
            r.run()
        want = runners["ort"].outputs()[0]
        for name, r in runners.items():  # the same numbers before timing them
            np.testing.assert_allclose(r.outputs()[0].reshape(want.shape), want, rtol=1e-3,
                                       atol=1e-4, err_msg=f"{case.name}: {name}")
        timings = interleave(list(runners.values()), min_time, rounds)
    return {"case": case.name, **{f"{k}_ms": t.median * 1e3 for k, t in
                                  zip(runners, timings)}}


def measure_dbnet(size: int, threads: int, min_time: float, rounds: int) -> dict[str, Any]:
    """The whole detector at ``size`` x ``size``: ember (Relay zoo module) and onnxruntime
    (its ONNX twin)."""
    from ember.relay.testing import onnx_twin

    model, mod, params = onnx_twin("dbnet", image_shape=(3, size, size))
    x = np.random.default_rng(0).uniform(-1, 1, (1, 3, size, size)).astype("float32")
    with ember.transform.PassContext(opt_level=3):
        factory = relay.build(mod, "llvm", params=params, executor=Executor("graph"))
    name = mod["main"].params[0].name_hint
    runners = [ember_runner("graph", factory, factory["default"](ember.cpu(0)), threads,
                            {name: x})]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "dbnet.onnx"
        path.write_bytes(model.SerializeToString())
        runners.append(ort_runner(ort_session(str(path), threads), threads,
                                  {model.graph.input[0].name: x}))
        for r in runners:
            r.run()
        np.testing.assert_allclose(runners[0].outputs()[0], runners[1].outputs()[0],
                                   rtol=1e-3, atol=1e-4, err_msg="dbnet")
        timings = interleave(runners, min_time, rounds)
    return {"case": f"dbnet {size}^2", "ember_ms": timings[0].median * 1e3,
            "ort_ms": timings[1].median * 1e3}


def _ratio(row: dict[str, Any], key: str) -> float | None:
    return row[key] / row["ember_ms"] if row.get(key) else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=640, help="detector input size (default 640)")
    ap.add_argument("--small", action="store_true", help="input size 320")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--min-time", type=float, default=1.0, help="timed seconds per system")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--no-model", action="store_true", help="skip the whole detector")
    ap.add_argument("--json", default=str(results_path("conv_transpose.json")))
    opts = ap.parse_args()
    size = 320 if opts.small else opts.size
    rows = [measure(c, opts.threads, opts.min_time, opts.rounds) for c in head_cases(size)]
    if not opts.no_model:
        rows.append(measure_dbnet(size, opts.threads, opts.min_time, opts.rounds))
    print(table([[r["case"], r["ember_ms"], r.get("ember NCHW_ms"), r["ort_ms"],
                  r.get("numpy_ms"), _ratio(r, "ember NCHW_ms"), _ratio(r, "ort_ms"),
                  _ratio(r, "numpy_ms")] for r in rows],
                ["case", "ember ms", "NCHW ms", "ort ms", "numpy ms", "NCHW/ember",
                 "ort/ember", "numpy/ember"]))
    with open_results(opts.json) as f:
        json.dump({"threads": opts.threads, "size": size, "rows": rows}, f, indent=1)
    print(f"wrote {opts.json}")


if __name__ == "__main__":
    main()
