"""Models written the way exporters write them, compiled as a user does, against onnxruntime.

    python benchmarks/bench_exported.py [--threads 1,2] [--rounds 5] [--min-time 0.3]
                                        [--clock thread|wall] [--only paddle_det,...] [--json PATH]

Each model of ``ember.relay.testing.exported_onnx``, ``exported_onnx_more`` and
``exported_transformers`` (a PaddleOCR-style detector, diffusion-UNet blocks: GroupNorm, SiLU,
attention over pixels; torchvision's ShuffleNetV2 (channel counts of 58 and 116, channel
shuffles); MediaPipe's BlazeFace (explicit SAME pads, skips widened by channel pads to 28, 36,
42 channels); DeepLabV3+ (dilated convs, ASPP, bilinear resizes to ``Shape``-computed sizes);
an HRNet-style pose net (branches of 18 and 36 channels, fuse layers); Whisper-tiny's encoder
(attention over 1500 frames); an EfficientDet-style detector (BiFPN, TF-SAME max pools, heads
of 810 channels transposed to channels-last); a
Silero-style voice activity model with its LSTM state in and out, YOLO-style post-processing
with NonMaxSuppression, torchvision-style score thresholding with NonZero (its box count
fixed, the kept count from data), BERT and T5 encoders, a GPT-2 decoder step with a KV cache)
is compiled with ``ember.compile(model)``: no shapes given, its symbolic dimensions stay
symbolic (the VM with a static plan). At each shape the same model with that shape fixed (``input_shapes=``) is the
static build, and onnxruntime runs the file as it is (numpy in, numpy out, as ember is called).
All runners of all models are timed interleaved (``_timing.interleave``); outputs are checked
against onnxruntime first (rtol 1e-3, atol 1e-4 of the output's scale).

Columns (microseconds per call, median): ``dynamic`` (ember, no shapes), ``static`` (shape
fixed; empty where a model's output size depends on data), ``ort``; ``dyn/st`` and
``dyn/ort``. Two extra rows time what dynamic shapes are for:

- ``gpt2_kv decode loop``: a generation loop of 128 steps, past length 8 .. 135, each step a
  shape the model has not seen (``first``: every call is a new signature), against onnxruntime
  on the same loop;
- ``vad stream``: 512-sample chunks with the state fed back.

JSON goes to bench_results/exported.json in the cache directory.
"""
from __future__ import annotations

import json
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]

from _report import open_results, results_path, table  # noqa: E402
from _systems import Runner, call_runner, compare_options, ort_session  # noqa: E402
from _timing import interleave  # noqa: E402

DEFAULT_JSON = results_path("exported.json")


@dataclass
class Case:
    """One model at one shape: its feeds (by input name)."""

    model: str
    shape: str
    onnx_model: Any
    feeds: dict[str, np.ndarray]
    static: bool = True  # whether a build with the shape fixed is meaningful
    runners: list[Runner] = field(default_factory=list)


def _cases(only: set[str] | None) -> list[Case]:
    from ember.relay.testing import exported_onnx as ex
    from ember.relay.testing import exported_onnx_more as mx
    from ember.relay.testing import exported_transformers as tx

    rng = np.random.default_rng(0)
    cases: list[Case] = []
    if not only or "paddle_det" in only:
        det = ex.paddle_text_detector()
        for h, w in ((320, 320), (480, 640)):
            cases.append(Case("paddle_det", f"1x3x{h}x{w}", det,
                              {"x": rng.random((1, 3, h, w), dtype=np.float32)}))
    if not only or "diffusion" in only:
        unet = ex.diffusion_unet()
        for n, h, w in ((1, 32, 32), (2, 48, 64)):
            cases.append(Case("diffusion", f"{n}x4x{h}x{w}", unet, {
                "sample": rng.standard_normal((n, 4, h, w)).astype("float32"),
                "temb": rng.standard_normal((n, 128)).astype("float32")}))
    if not only or "shufflenet" in only:
        shuffle = ex.shufflenet_v2()
        for batch in (1, 4):
            cases.append(Case("shufflenet", f"{batch}x3x224x224", shuffle, {
                "input": rng.standard_normal((batch, 3, 224, 224)).astype("float32")}))
    if not only or "blazeface" in only:  # (no symbolic dimension: both builds alike)
        cases.append(Case("blazeface", "1x3x128x128", ex.blazeface(), {
            "input": rng.standard_normal((1, 3, 128, 128)).astype("float32")}))
    if not only or "deeplab" in only:
        deeplab = mx.deeplabv3plus()
        for h, w in ((512, 512), (384, 640)):
            cases.append(Case("deeplab", f"1x3x{h}x{w}", deeplab, {
                "input": rng.standard_normal((1, 3, h, w)).astype("float32")}))
    if not only or "hrnet" in only:
        cases.append(Case("hrnet", "1x3x256x192", mx.hrnet_small(), {
            "input": rng.standard_normal((1, 3, 256, 192)).astype("float32")}))
    if not only or "whisper" in only:
        cases.append(Case("whisper", "1x80x3000", mx.whisper_encoder(), {
            "input_features": rng.standard_normal((1, 80, 3000)).astype("float32")}))
    if not only or "efficientdet" in only:  # (static, as BlazeFace)
        cases.append(Case("efficientdet", "1x3x512x512", mx.efficientdet(), {
            "input": rng.standard_normal((1, 3, 512, 512)).astype("float32")}))
    if not only or "vad" in only:
        vad = ex.vad_lstm()
        for samples in (512, 16000):
            cases.append(Case("vad", f"1x{samples}", vad, {
                "input": rng.standard_normal((1, samples)).astype("float32") * 0.3,
                "h": np.zeros((1, 1, 64), "float32"), "c": np.zeros((1, 1, 64), "float32")}))
    if not only or "gpt2_kv" in only:
        gpt = tx.gpt2_kv_decoder()
        for batch, seq, past in ((1, 16, 0), (1, 1, 32), (1, 1, 128), (4, 1, 64)):
            cases.append(Case("gpt2_kv", f"{batch}x{seq} past {past}", gpt,
                              tx.kv_cache_feeds(gpt, batch, seq, past, rng)))
    for name, build in (("bert", tx.bert), ("t5", tx.t5)):
        if only and name not in only:
            continue
        model = build()
        for batch, seq in ((1, 16), (1, 128), (4, 64), (2, 77)):
            feeds = tx.token_feeds(batch, seq, seed=seq)
            if name == "t5":
                del feeds["token_type_ids"]
            cases.append(Case(name, f"{batch}x{seq}", model, feeds))
    if not only or "yolo_post" in only:
        post = ex.yolo_post_nms()
        for anchors in (1000, 8400):
            preds = rng.random((1, 12, anchors), dtype=np.float32)
            preds[:, :2] *= 100
            preds[:, 2:4] *= 20
            cases.append(Case("yolo_post", f"1x12x{anchors}", post, {"preds": preds},
                              static=False))
    if not only or "score_thr" in only:
        for boxes in (1000, 8400):
            scores = rng.random(boxes, dtype=np.float32)
            cases.append(Case("score_thr", f"{boxes}", ex.score_threshold(boxes), {
                "boxes": rng.random((boxes, 4), dtype=np.float32), "scores": scores},
                static=False))
    return cases


def _check(case: Case) -> str:
    want = case.runners[-1].outputs()
    for r in case.runners[:-1]:
        got = r.outputs()
        if len(got) != len(want) or any(
                g.shape != w.shape or not np.allclose(  # (atol: of the output's scale)
                    g, w, rtol=1e-3, atol=1e-4 * max(1.0, float(np.abs(w).max(initial=0))))
                for g, w in zip(got, want)):
            return f"WRONG ({r.system})"
    return ""


def _loop(step: Callable[[int], Any], steps: range, clock: Callable[[], float]) -> float:
    times = []
    for k in steps:
        start = clock()
        step(k)
        times.append(clock() - start)
    return statistics.median(times)


def _decode_loop(threads: int, clock: Callable[[], float]) -> list[Any]:
    """ember (a fresh compile: every step a new signature) and onnxruntime over past 8..135."""
    import ember
    from ember.relay.testing import exported_transformers as tx

    gpt = tx.gpt2_kv_decoder()
    names = [i.name for i in gpt.graph.input]
    rng = np.random.default_rng(1)
    feeds = {p: tx.kv_cache_feeds(gpt, 1, 1, p, rng) for p in range(8, 136)}
    model, session = ember.compile(gpt, threads=threads), ort_session(gpt, threads)
    first = _loop(lambda p: model(*[feeds[p][k] for k in names]), range(8, 136), clock)
    ort_t = _loop(lambda p: session.run(None, feeds[p]), range(8, 136), clock)
    return ["gpt2_kv decode loop", "1x1 past 8..135", threads, first * 1e6, None,
            ort_t * 1e6, None, first / ort_t, "each step a new signature"]


def _vad_stream(threads: int, clock: Callable[[], float]) -> list[Any]:
    import ember
    from ember.relay.testing import exported_onnx as ex

    vad = ex.vad_lstm()
    model, session = ember.compile(vad, threads=threads), ort_session(vad, threads)
    rng = np.random.default_rng(2)
    chunks = [rng.standard_normal((1, 512)).astype("float32") * 0.3 for _ in range(200)]
    state = [np.zeros((1, 1, 64), "float32")] * 2
    ort_state = list(state)

    def ours(k: int) -> None:
        _, state[0], state[1] = model(chunks[k], state[0], state[1])

    def theirs(k: int) -> None:
        _, ort_state[0], ort_state[1] = session.run(
            None, {"input": chunks[k], "h": ort_state[0], "c": ort_state[1]})

    mine, other = _loop(ours, range(200), clock), _loop(theirs, range(200), clock)
    return ["vad stream", "1x512 chunks", threads, mine * 1e6, None, other * 1e6, None,
            mine / other, "state fed back"]


def main() -> None:
    opts = compare_options(__doc__.split("\n")[0],
                           "models: paddle_det,diffusion,shufflenet,blazeface,deeplab,hrnet,"
                           "whisper,efficientdet,vad,gpt2_kv,yolo_post,score_thr,bert,t5",
                           DEFAULT_JSON)
    import ember

    clock, only = opts.clock, opts.only
    rows: list[list[Any]] = []
    for threads in opts.threads:
        cases = _cases(only)
        built: dict[int, Any] = {}
        for case in cases:
            key = id(case.onnx_model)
            if key not in built:
                built[key] = (ember.compile(case.onnx_model, threads=threads),
                              ort_session(case.onnx_model, threads))
            dynamic, session = built[key]
            args = list(case.feeds.values())
            case.runners = [call_runner("dynamic", threads, lambda m=dynamic, a=args: m(*a))]
            if case.static:
                shapes = {k: v.shape for k, v in case.feeds.items()}
                static = ember.compile(case.onnx_model, threads=threads, input_shapes=shapes)
                case.runners.append(call_runner("static", threads,
                                                lambda m=static, a=args: m(*a)))
            case.runners.append(call_runner("onnxruntime", threads,
                                            lambda s=session, f=case.feeds: s.run(None, f)))
        timings = interleave([r for c in cases for r in c.runners], opts.min_time, opts.rounds,
                             clock)
        at = 0
        for case in cases:
            t = [x.median * 1e6 for x in timings[at:at + len(case.runners)]]
            at += len(case.runners)
            dyn, ort_t = t[0], t[-1]
            st = t[1] if case.static else None
            rows.append([case.model, case.shape, threads, dyn, st, ort_t,
                         dyn / st if st else None, dyn / ort_t, _check(case)])
        if not only or "gpt2_kv" in only:
            rows.append(_decode_loop(threads, clock))
        if not only or "vad" in only:
            rows.append(_vad_stream(threads, clock))
    heads = ["model", "shape", "thr", "dynamic", "static", "ort", "dyn/st", "dyn/ort", ""]
    print(f"exporter-style models, ember {ember.__version__}, clock {opts.clock_name}, "
          f"{opts.rounds} rounds interleaved (microseconds per call)")
    print(table(rows, heads))
    with open_results(opts.json) as f:
        json.dump([dict(zip(heads, r)) for r in rows], f, indent=1)


if __name__ == "__main__":
    main()
