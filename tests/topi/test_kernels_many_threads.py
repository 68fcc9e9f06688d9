"""Kernels launched on more threads than their planned work items: each task's strips (conv,
conv_nchwc.h ember_conv_task_strip) or row blocks (GEMM, gemm.h ember_gemm_task_mc) are cut
finer, tasks start where their share of the work does (ember_conv_task_start,
ember_gemm_task_start), and every thread count gives the same result as numpy (the layers a many-core machine
finds with too little work per thread: late 7x7 layers, a 1x1 conv over one flattened row,
depthwise, a dense layer of a small batch)."""
from __future__ import annotations

import numpy as np
import pytest

import ember
from ember import relay
from ember.api.model import CompiledModel, ModelRecord
from ember.runtime.threads import ThreadControl


def conv_reference(x: np.ndarray, w: np.ndarray, stride: int, pad: int,
                   groups: int) -> np.ndarray:
    n, c, h, wd = x.shape
    oc, icg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = (h + 2 * pad - kh) // stride + 1, (wd + 2 * pad - kw) // stride + 1
    out = np.zeros((n, oc, oh, ow), np.float64)
    ocg = oc // groups
    for g in range(groups):
        xs = xp[:, g * icg:(g + 1) * icg]
        for i in range(kh):
            for j in range(kw):
                patch = xs[:, :, i:i + stride * oh:stride, j:j + stride * ow:stride]
                out[:, g * ocg:(g + 1) * ocg] += np.einsum(
                    "nchw,oc->nohw", patch, w[g * ocg:(g + 1) * ocg, :, i, j])
    return out


CASES = {  # (channels in, out, size, kernel, stride, pad, groups)
    "late_3x3": (64, 64, 7, 3, 1, 1, 1),
    "flat_1x1": (64, 32, 9, 1, 1, 0, 1),
    "depthwise": (16, 16, 24, 3, 1, 1, 16),
}


@pytest.mark.parametrize("case", [
    "late_3x3", *(pytest.param(c, marks=pytest.mark.slow) for c in ("depthwise", "flat_1x1"))])
def test_conv_agrees_on_any_thread_count(case: str) -> None:
    ic, oc, size, k, stride, pad, groups = CASES[case]
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, ic, size, size)).astype("float32")
    w = rng.standard_normal((oc, ic // groups, k, k)).astype("float32")
    data = relay.var("x", shape=x.shape)
    weight = relay.var("w", shape=w.shape)
    body = relay.nn.conv2d(data, weight, strides=(stride, stride), padding=(pad, pad),
                           groups=groups, kernel_size=(k, k), channels=oc)
    mod = ember.IRModule.from_expr(relay.Function([data, weight], body))
    want = conv_reference(x.astype(np.float64), w.astype(np.float64), stride, pad, groups)
    agrees_on_any_thread_count(mod, {"w": w}, x, want, case)


def agrees_on_any_thread_count(mod: ember.IRModule, params: dict[str, np.ndarray],
                               x: np.ndarray, want: np.ndarray, case: str,
                               counts: tuple[int, ...] = (1, 2, 3, 8, 16)) -> None:
    built = ember.compile(mod, params=params, executor="graph", threads=1)
    for threads in counts:  # the same kernels, run on another thread count
        r = built._record
        record = ModelRecord(r.executor, threads, r.inputs, r.outputs, r.info)
        got = CompiledModel(built.factory, record)(x)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max(),
                                   err_msg=f"{case} on {threads} threads")


def _dense(rows: int, units: int, width: int, seed: int) -> tuple:
    """A dense layer (module, weight, input, float64 reference)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, width)).astype("float32")
    w = rng.standard_normal((units, width)).astype("float32")
    data, weight = relay.var("x", shape=x.shape), relay.var("w", shape=w.shape)
    mod = ember.IRModule.from_expr(relay.Function([data, weight], relay.nn.dense(data, weight)))
    return mod, w, x, x.astype(np.float64) @ w.astype(np.float64).T


def test_dense_agrees_on_any_thread_count() -> None:
    mod, w, x, want = _dense(64, 256, 256, 2)
    agrees_on_any_thread_count(mod, {"w": w}, x, want, "dense")


def test_work_weighted_cuts_agree_on_any_thread_count() -> None:
    """The conv and GEMM cuts by work (ember_conv_task_start, ember_gemm_task_start): a 1x1
    conv whose output blocks pair up with one left over (3 blocks of 8), over a map flattened
    into strips with a narrow last one, then a dense layer with a short last row block and
    column panel; at 1, 2, 3 and 7 threads."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 64, 7, 7)).astype("float32")
    w = rng.standard_normal((24, 64, 1, 1)).astype("float32")
    d = rng.standard_normal((901, 49)).astype("float32")  # 1.06M multiply-adds: parallel
    data, weight, dense = (relay.var(n, shape=a.shape) for n, a in (("x", x), ("w", w),
                                                                  ("d", d)))
    conv = relay.nn.conv2d(data, weight, kernel_size=(1, 1), channels=24)
    body = relay.nn.dense(relay.reshape(conv, (24, 49)), dense)  # M 24, N 901: short tiles
    mod = ember.IRModule.from_expr(relay.Function([data, weight, dense], body))
    want = conv_reference(x.astype(np.float64), w.astype(np.float64), 1, 0, 1)
    want = want.reshape(24, 49) @ d.astype(np.float64).T
    agrees_on_any_thread_count(mod, {"w": w, "d": d}, x, want, "1x1 then dense", (1, 2, 3, 7))
    # both kernels do split (else the cuts above were never taken)
    built = ember.compile(mod, params={"w": w, "d": d}, executor="graph", threads=1)
    dbg = built.factory.debug_create("default", ember.cpu(0))
    dbg.set_input(x=x)
    with ThreadControl(built.factory).use(3):
        splits = dbg.measure_work_split()
    tasks = {dbg.graph.nodes[nid].func_name: [launch.num_task for launch in calls[0].launches]
             for nid, calls in splits.items()}
    assert [t for name, t in tasks.items() if "conv2d" in name or "gemm" in name] == [[3], [3]]


def test_matrix_vector_product_splits_by_the_size_of_its_weights() -> None:
    """A one-row dense layer (resnet18's classifier: 512 -> 1000) has too few multiply-adds for
    PARALLEL_MACS but streams 2 MB of weights: it launches threads (gemm_kernel's
    PARALLEL_B_FLOATS), each task a range of column panels, and agrees at 1, 2, 3, 7 threads;
    a small one (512 -> 100) stays serial."""
    from ember.topi.nn import gemm_kernel as G

    assert G.model_gemm_tiles(1, 1, 1000, 512).parallel
    assert not G.model_gemm_tiles(1, 1, 100, 512).parallel
    mod, w, x, want = _dense(1, 1000, 512, 4)
    agrees_on_any_thread_count(mod, {"w": w}, x, want, "matrix-vector", (1, 2, 3, 7))
    built = ember.compile(mod, params={"w": w}, executor="graph", threads=1)
    dbg = built.factory.debug_create("default", ember.cpu(0))
    dbg.set_input(x=x)
    with ThreadControl(built.factory).use(2):
        splits = dbg.measure_work_split()
    tasks = [launch.num_task for calls in splits.values() for launch in calls[0].launches]
    assert tasks == [2]


def test_place_shares_agree_on_any_thread_count() -> None:
    """Tasks cut by output place (conv_nchwc.h ember_conv_place_share, where the input
    outweighs the weights): a dense 3x3 conv, a 1x1 expansion, a depthwise 3x3 at stride 1 and
    2 and a 1x1 projection, batch 2 (a share that crosses from one image to the next), shares
    that start and end inside a place (13 and 7 rows on 2, 3 and 7 threads); every conv does
    launch."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 16, 13, 15)).astype("float32")
    ws = {"w0": rng.standard_normal((8, 16, 3, 3)).astype("float32") * 0.2,
          "w1": rng.standard_normal((80, 8, 1, 1)).astype("float32") * 0.3,
          "w2": rng.standard_normal((80, 1, 3, 3)).astype("float32"),
          "w3": rng.standard_normal((80, 1, 3, 3)).astype("float32"),
          "w4": rng.standard_normal((8, 80, 1, 1)).astype("float32")}
    data = relay.var("x", shape=x.shape)
    k = {n: relay.var(n, shape=a.shape) for n, a in ws.items()}
    y = relay.nn.relu(relay.nn.conv2d(data, k["w0"], padding=(1, 1), channels=8,
                                      kernel_size=(3, 3)))
    y = relay.nn.conv2d(y, k["w1"], channels=80, kernel_size=(1, 1))
    y = relay.nn.relu(relay.nn.conv2d(y, k["w2"], padding=(1, 1), groups=80, channels=80,
                                      kernel_size=(3, 3)))
    y = relay.nn.conv2d(y, k["w3"], strides=(2, 2), padding=(1, 1), groups=80, channels=80,
                        kernel_size=(3, 3))
    y = relay.nn.conv2d(y, k["w4"], channels=8, kernel_size=(1, 1))
    mod = ember.IRModule.from_expr(relay.Function([data, *k.values()], y))
    f64 = {n: a.astype(np.float64) for n, a in ws.items()}
    want = np.maximum(conv_reference(x.astype(np.float64), f64["w0"], 1, 1, 1), 0)
    want = conv_reference(want, f64["w1"], 1, 0, 1)
    want = np.maximum(conv_reference(want, f64["w2"], 1, 1, 80), 0)
    want = conv_reference(want, f64["w3"], 2, 1, 80)
    want = conv_reference(want, f64["w4"], 1, 0, 1)
    agrees_on_any_thread_count(mod, ws, x, want, "place shares", (1, 2, 3, 7))
    built = ember.compile(mod, params=ws, executor="graph", threads=1)
    dbg = built.factory.debug_create("default", ember.cpu(0))
    dbg.set_input(x=x)
    with ThreadControl(built.factory).use(3):
        splits = dbg.measure_work_split()
    launches = [[launch.num_task for launch in calls[0].launches]
                for nid, calls in splits.items() if "conv2d" in dbg.graph.nodes[nid].func_name]
    assert launches == [[3]] * 5  # every conv does split (else no cut was taken)
