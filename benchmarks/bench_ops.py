"""Operator benchmarks: ember's scheduled kernels vs numpy (and onnxruntime when importable).

    python benchmarks/bench_ops.py [--threads 1 2] [--repeat 30] [--json [PATH]]

Each thread count runs in its own subprocess (OMP_NUM_THREADS / OPENBLAS_NUM_THREADS set
before anything loads). Times are the minimum over ``--repeat`` calls after a warm-up (the
minimum is the most stable figure on a shared machine); GFLOP/s counts a multiply-add as 2.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _timing import best_of  # noqa: E402
CASES = ["dense_512x512x512", "dense_1x2048x1000", "conv2d_resnet_3x3", "depthwise_mobilenet",
         "conv2d_bias_relu", "concat_yolo_head", "maxpool_sppf_nchw8c"]


# -- cases: (ember builder, numpy reference, onnx graph builder, flops) ------------------------
def _rand(*shape: int) -> Any:
    import numpy as np

    return np.random.default_rng(sum(shape)).standard_normal(shape).astype("float32")


def _conv_np(x: Any, w: Any, pad: int, groups: int = 1) -> Any:
    """numpy baseline: im2col + one matmul per group (the usual numpy formulation)."""
    import numpy as np

    n, c, h, wd = x.shape
    co, cig, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = h + 2 * pad - kh + 1, wd + 2 * pad - kw + 1
    if groups == c and cig == 1:
        out = np.zeros((n, co, oh, ow), np.float32)
        for y in range(kh):
            for z in range(kw):
                out += xp[:, :, y:y + oh, z:z + ow] * w[None, :, 0, y, z, None, None]
        return out
    cols = np.lib.stride_tricks.sliding_window_view(xp, (kh, kw), axis=(2, 3))
    cols = cols.transpose(0, 2, 3, 1, 4, 5).reshape(n * oh * ow, c * kh * kw)
    return (cols @ w.reshape(co, -1).T).reshape(n, oh, ow, co).transpose(0, 3, 1, 2)


def _data_case(name: str) -> dict[str, Any]:
    """The data-movement cases (flops 0): yolov8's head concat (three flattened maps joined on
    the last axis) and its SPPF max pool (5x5, stride 1, padding 2) in NCHW8c, whose ONNX twin
    pools the same values in NCHW."""
    import numpy as np

    from ember import te, topi
    from ember.topi.nn.pool_nchwc import pool2d_nchwc

    if name == "concat_yolo_head":
        xs = [te.placeholder((1, 144, n), name=f"x{n}") for n in (6400, 1600, 400)]
        out = topi.concatenate(xs, axis=2)
        return {"args": [*xs, out], "out": out, "arrays": [_rand(1, 144, n) for n in
                                                          (6400, 1600, 400)],
                "flops": 0, "numpy": lambda *a: np.concatenate(a, 2),
                "onnx": ("Concat", {"axis": 2})}
    x = te.placeholder((1, 16, 20, 20, 8), name="x")
    attrs = SimpleNamespace(layout="NCHW8c", pool_size=(5, 5), strides=(1, 1), dilation=(1, 1),
                            padding=(2, 2, 2, 2), count_include_pad=False)
    out = pool2d_nchwc(x, "max", x.shape, attrs)
    blocked = _rand(1, 16, 20, 20, 8)

    def pool(a: Any) -> Any:
        p = np.pad(a, ((0, 0), (0, 0), (2, 2), (2, 2), (0, 0)), constant_values=-np.inf)
        win = np.lib.stride_tricks.sliding_window_view(p, (5, 5), axis=(2, 3))
        return win.max(axis=(-2, -1))

    return {"args": [x, out], "out": out, "arrays": [blocked], "flops": 0, "numpy": pool,
            "onnx": ("MaxPool", {"kernel_shape": [5, 5], "pads": [2, 2, 2, 2]}),
            "onnx_arrays": [blocked.transpose(0, 1, 4, 2, 3).reshape(1, 128, 20, 20)]}


def case(name: str) -> dict[str, Any]:
    """Inputs, the ember kernel builder, the numpy function and the flop count of a case."""
    from ember import te, topi

    if name in ("concat_yolo_head", "maxpool_sppf_nchw8c"):
        return _data_case(name)
    if name.startswith("dense"):
        m, k, n = (512, 512, 512) if name == "dense_512x512x512" else (1, 2048, 1000)
        a, w = te.placeholder((m, k), name="a"), te.placeholder((n, k), name="w")
        out = topi.nn.dense(a, w)
        arrays = [_rand(m, k), _rand(n, k)]
        return {"args": [a, w, out], "out": out, "arrays": arrays, "flops": 2 * m * n * k,
                "numpy": lambda x, y: x @ y.T, "onnx": ("Gemm", {"transB": 1})}
    if name == "depthwise_mobilenet":
        x, w = te.placeholder((1, 32, 112, 112), name="x"), te.placeholder((32, 1, 3, 3), name="w")
        out = topi.nn.conv2d(x, w, 1, 1, 1, "NCHW", groups=32)
        return {"args": [x, w, out], "out": out, "arrays": [_rand(1, 32, 112, 112), _rand(32, 1, 3, 3)],
                "flops": 2 * 32 * 112 * 112 * 9, "numpy": lambda a, b: _conv_np(a, b, 1, 32),
                "onnx": ("Conv", {"pads": [1, 1, 1, 1], "group": 32})}
    x, w = te.placeholder((1, 64, 56, 56), name="x"), te.placeholder((64, 64, 3, 3), name="w")
    out = topi.nn.conv2d(x, w, 1, 1)
    arrays = [_rand(1, 64, 56, 56), _rand(64, 64, 3, 3)]
    flops = 2 * 64 * 56 * 56 * 64 * 9
    if name == "conv2d_resnet_3x3":
        return {"args": [x, w, out], "out": out, "arrays": arrays, "flops": flops,
                "numpy": lambda a, b: _conv_np(a, b, 1), "onnx": ("Conv", {"pads": [1, 1, 1, 1]})}
    b = te.placeholder((64, 1, 1), name="b")
    fused = topi.nn.relu(topi.add(out, b))
    return {"args": [x, w, b, fused], "out": fused, "arrays": arrays + [_rand(64, 1, 1)],
            "flops": flops, "numpy": lambda a, c, d: (lambda y: (y > 0) * y)(_conv_np(a, c, 1) + d),
            "onnx": ("ConvBiasRelu", {"pads": [1, 1, 1, 1]})}


def _ember(c: dict[str, Any], repeat: int) -> tuple[float, Any]:
    import ember
    from ember import tir, topi

    mod = tir.build(topi.auto_schedule(c["out"]), c["args"], name="bench")
    f = mod["bench"]
    inputs = [ember.nd.array(a) for a in c["arrays"]]
    out = ember.nd.empty([int(d) for d in c["out"].shape])
    return best_of(lambda: f(*inputs, out), repeat), out.numpy()


def _onnx(name: str, c: dict[str, Any], repeat: int) -> float | None:
    try:
        import onnxruntime as ort
        from onnx import TensorProto, helper
    except ImportError:
        return None
    op, attrs = c["onnx"]
    arrays = c.get("onnx_arrays", c["arrays"])
    ins = [helper.make_tensor_value_info(f"i{k}", TensorProto.FLOAT, list(a.shape))
           for k, a in enumerate(arrays)]
    outs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]
    if op == "ConvBiasRelu":
        nodes = [helper.make_node("Conv", ["i0", "i1"], ["c"], **attrs),
                 helper.make_node("Add", ["c", "i2"], ["s"]), helper.make_node("Relu", ["s"], ["y"])]
    else:
        nodes = [helper.make_node(op, [f"i{k}" for k in range(len(arrays))], ["y"], **attrs)]
    model = helper.make_model(helper.make_graph(nodes, name, ins, outs),
                              opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8  # readable by older onnxruntime releases too
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = int(os.environ.get("OMP_NUM_THREADS", "1"))
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    feed = {f"i{k}": a for k, a in enumerate(arrays)}
    return best_of(lambda: sess.run(None, feed), repeat)


def worker(threads: int, repeat: int) -> list[dict[str, Any]]:
    """Run every case in this process (threads already fixed by the environment)."""
    import numpy as np

    rows = []
    for name in CASES:
        c = case(name)
        t_ember, got = _ember(c, repeat)
        want = c["numpy"](*c["arrays"])
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3)
        t_np = best_of(lambda c=c: c["numpy"](*c["arrays"]), max(3, repeat // 3))
        t_ort = _onnx(name, c, repeat)
        row = {"case": name, "threads": threads, "flops": c["flops"], "ember_ms": t_ember * 1e3,
               "numpy_ms": t_np * 1e3, "onnxruntime_ms": None if t_ort is None else t_ort * 1e3}
        rows.append(row)
    return rows


def _table(rows: list[dict[str, Any]]) -> str:
    have_ort = any(r["onnxruntime_ms"] is not None for r in rows)
    head = ["case", "thr", "ember ms", "GFLOP/s", "numpy ms", "GFLOP/s"] + (
        ["ort ms", "GFLOP/s"] if have_ort else [])
    lines = []
    for r in rows:
        cells = [r["case"], str(r["threads"])]
        keys = ["ember_ms", "numpy_ms"] + (["onnxruntime_ms"] if have_ort else [])
        for key in keys:
            ms = r[key]
            cells += ["-", "-"] if ms is None else [f"{ms:.3f}", f"{r['flops'] / ms / 1e6:.1f}"
                                                    if r["flops"] else "-"]
        lines.append(cells)
    widths = [max(len(x) for x in col) for col in zip(head, *lines)]
    fmt = lambda cells: "  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                                  for i, (c, w) in enumerate(zip(cells, widths)))
    return "\n".join([fmt(head), fmt(["-" * w for w in widths])] + [fmt(c) for c in lines])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    p.add_argument("--repeat", type=int, default=30)
    p.add_argument("--json", nargs="?", const="", default=None,
                   help="also write the results as JSON (default path bench_results/ops.json "
                   "in the cache directory)")
    p.add_argument("--worker", type=int, default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker is not None:
        print(json.dumps(worker(args.worker, args.repeat)))
        return 0
    rows: list[dict[str, Any]] = []
    for t in args.threads:
        env = dict(os.environ, OMP_NUM_THREADS=str(t), OPENBLAS_NUM_THREADS=str(t),
                   MKL_NUM_THREADS=str(t), PYTHONPATH=str(ROOT) + os.pathsep +
                   os.environ.get("PYTHONPATH", ""))
        proc = subprocess.run([sys.executable, __file__, "--worker", str(t), "--repeat",
                               str(args.repeat)], env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            sys.stderr.write(proc.stderr)
            return proc.returncode
        rows += json.loads(proc.stdout.strip().splitlines()[-1])
    print(_table(rows))
    if args.json is not None:
        from _report import open_results, results_path

        path = args.json or str(results_path("ops.json"))
        with open_results(path) as f:
            f.write(json.dumps(rows, indent=2) + "\n")
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
