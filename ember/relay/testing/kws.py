"""A keyword-spotting CNN over an STFT front end: the model takes the waveform and computes
its own log-mel spectrogram, as models exported from torch with ``torch.stft`` in ``forward``
do (``dscnn`` starts from precomputed MFCCs).

- Front end: ``torch.stft(x, n_fft=512, hop_length=160, win_length=480, window=hann(480),
  center=False, return_complex=False)``: frames of ``n_fft`` samples every ``hop_length``
  (10 ms at 16 kHz), the periodic Hann window of ``win_length`` (30 ms) centred in them with
  zeros (as torch.onnx pads it for ONNX's STFT), the one-sided DFT (``n_fft // 2 + 1``
  bins); its magnitude; ``num_mels`` triangular mel filters (HTK scale, 20 Hz to 4 kHz, no
  normalisation: torchaudio's ``melscale_fbanks``) as one constant matrix; ``log(x + 1e-6)``;
  (batch, 1, frames, num_mels). A second of audio gives 97 frames.
- CNN: DS-CNN's (``dscnn.classifier``): a 10x4/2 conv, depthwise-separable blocks, a pool
  over the whole map, a dense layer of ``num_classes`` (12 keywords) and softmax.

The Relay model's STFT is what ember's ONNX importer makes of one (``ops_signal``): frames by
``take`` of a constant index table, the window multiplied, the DFT as products with constant
cosine and sine matrices. Its ONNX twin (``export_onnx``, called by ``onnx_twin``) writes the
front end as torch.onnx does (opset 17): an ``STFT`` node on the (batch, samples) signal with
the padded window as an initializer, ``Transpose`` to torch's (batch, bins, frames, 2),
``Pow``/``ReduceSum``/``Sqrt``, ``Transpose``, ``MatMul`` by the mel matrix, ``Add``,
``Log``, ``Unsqueeze``; then the CNN as ``onnx_export`` writes it, with the same weights.
Input ``data`` (batch_size, samples) float32; output (batch_size, num_classes).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ... import relay
from ...ir.expr import Call, Constant, Function, RelayExpr, const
from ...ir.module import IRModule
from ...ir.visitor import post_order
from ...runtime.ndarray import NDArray
from . import dscnn
from .init import create_workload
from .onnx_export import DEFAULT_OPSET
from .onnx_export import export_onnx as export_dataflow

LOG_OFFSET = 1e-6  # log(mel + LOG_OFFSET): silence stays finite
MEL_RANGE_HZ = (20.0, 4000.0)  # the MFCC range of TensorFlow's speech commands (DS-CNN's)


def hann_window(win_length: int, n_fft: int) -> np.ndarray:
    """The periodic Hann window of ``win_length`` centred in ``n_fft`` samples by zeros, as
    torch.onnx pads ``torch.stft``'s window (the extra zero of an odd difference after)."""
    window = 0.5 - 0.5 * np.cos(2.0 * np.pi * np.arange(win_length) / win_length)
    left = (n_fft - win_length) // 2
    return np.pad(window, (left, n_fft - win_length - left)).astype("float32")


def mel_filters(n_fft: int, num_mels: int, sample_rate: int,
                f_min: float = MEL_RANGE_HZ[0], f_max: float = MEL_RANGE_HZ[1]) -> np.ndarray:
    """(n_fft // 2 + 1, num_mels) triangular filters, evenly spaced in HTK mels from
    ``f_min`` to ``f_max``, each rising from its left edge to its centre and falling to its
    right (its neighbours' centres), read at the bins' frequencies (torchaudio's
    ``melscale_fbanks`` with norm None)."""
    def mel(hz: Any) -> Any:
        return 2595.0 * np.log10(1.0 + np.asarray(hz) / 700.0)

    freqs = np.linspace(0.0, sample_rate / 2, n_fft // 2 + 1)
    edges = 700.0 * (10.0 ** (np.linspace(mel(f_min), mel(f_max), num_mels + 2) / 2595.0) - 1)
    width = np.diff(edges)
    rise = (freqs[:, None] - edges[None, :-2]) / width[None, :-1]
    fall = (edges[None, 2:] - freqs[:, None]) / width[None, 1:]
    return np.maximum(0.0, np.minimum(rise, fall)).astype("float32")


def frame_count(samples: int, n_fft: int, hop_length: int) -> int:
    """Frames of ``n_fft`` every ``hop_length`` in ``samples`` (torch's ``center=False``)."""
    return 1 + (samples - n_fft) // hop_length


def log_mel(data: RelayExpr, samples: int, n_fft: int = 512, win_length: int = 480,
            hop_length: int = 160, num_mels: int = 40, sample_rate: int = 16000,
            dtype: str = "float32") -> RelayExpr:
    """The front end over ``data`` (batch, samples): log-mel features (batch, frames,
    num_mels)."""
    # the importer's DFT (imported here: ``import ember.relay.testing`` stays importer-free)
    from ..frontend.onnx.ops_signal import dft_last_axis

    frames = frame_count(samples, n_fft, hop_length)
    index = np.arange(frames, dtype="int64")[:, None] * hop_length + np.arange(n_fft)
    x = relay.take(data, const(index), axis=1)  # (batch, frames, n_fft)
    x = relay.multiply(x, const(hann_window(win_length, n_fft).astype(dtype)))
    real, imag = dft_last_axis(x, None, n_fft, n_fft, False, True, dtype)
    magnitude = relay.sqrt(relay.add(relay.multiply(real, real), relay.multiply(imag, imag)))
    mel = relay.nn.dense(magnitude, const(np.ascontiguousarray(
        mel_filters(n_fft, num_mels, sample_rate).T).astype(dtype)))
    return relay.log(relay.add(mel, relay.const(LOG_OFFSET, dtype)))


def get_net(batch_size: int = 1, samples: int = 16000, n_fft: int = 512, win_length: int = 480,
            hop_length: int = 160, num_mels: int = 40, sample_rate: int = 16000,
            num_classes: int = 12, filters: int = 64, num_blocks: int = 4,
            dtype: str = "float32") -> Function:
    """The keyword spotter's Function of ``data`` (batch_size, samples)."""
    if not 0 < win_length <= n_fft or hop_length < 1 or sample_rate < 1:
        raise ValueError(f"kws: need 0 < win_length <= n_fft and a positive hop_length and "
                         f"sample_rate, got win_length={win_length}, n_fft={n_fft}, "
                         f"hop_length={hop_length}, sample_rate={sample_rate}")
    frames = frame_count(samples, n_fft, hop_length) if samples >= n_fft else 0
    if frames < 4 or num_mels < 4:
        raise ValueError(f"kws: {samples} samples give {frames} frames of {n_fft} every "
                         f"{hop_length}, and {num_mels} mels; the CNN needs at least 4 of each")
    if min(batch_size, num_classes, filters) < 1 or num_blocks < 0:
        raise ValueError(f"kws: batch_size, num_classes and filters must be positive, got "
                         f"{batch_size}, {num_classes}, {filters} (num_blocks {num_blocks})")
    data = relay.var("data", shape=(batch_size, samples), dtype=dtype)
    features = log_mel(data, samples, n_fft, win_length, hop_length, num_mels, sample_rate, dtype)
    out = dscnn.classifier(relay.expand_dims(features, 1), (frames, num_mels), filters,
                           num_blocks, num_classes)
    weights = [v for v in relay.analysis.free_vars(out) if v is not data]
    return relay.Function([data, *weights], out)


def get_workload(batch_size: int = 1, samples: int = 16000, n_fft: int = 512,
                 win_length: int = 480, hop_length: int = 160, num_mels: int = 40,
                 sample_rate: int = 16000, num_classes: int = 12, filters: int = 64,
                 num_blocks: int = 4, dtype: str = "float32",
                 ) -> tuple[IRModule, dict[str, NDArray]]:
    """``(mod, params)`` of the keyword spotter with He-scaled weights (seed 0); the window,
    DFT and mel matrices are constants of the model, not params."""
    return create_workload(get_net(batch_size, samples, n_fft, win_length, hop_length, num_mels,
                                   sample_rate, num_classes, filters, num_blocks, dtype))


def _front_end_constants(mod: IRModule) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(frame index table, window, mel matrix (bins, mels)) that ``mod``'s front end holds."""
    index = window = mel = None
    for node in post_order(mod["main"].body):
        if not isinstance(node, Call):
            continue
        name = getattr(node.op, "name", "")
        arg = node.args[-1]
        if not isinstance(arg, Constant):
            continue
        if name == "take" and index is None:
            index = arg.data.numpy()
        elif name == "multiply" and index is not None and window is None:
            window = arg.data.numpy()
        elif name == "nn.dense" and index is not None and \
                arg.data.shape[1] == index.shape[1] // 2 + 1:
            mel = arg.data.numpy().T
    if index is None or window is None or mel is None:
        raise ValueError("kws.export_onnx: main has no front end of kws.get_workload (a take "
                         "of frames, a window, a mel matrix)")
    return index, window, mel


def export_onnx(mod: IRModule, params: Mapping[str, Any], opset: int = DEFAULT_OPSET,
                graph_name: str = "kws") -> Any:
    """The ONNX twin of a ``get_workload`` model: the front end as torch.onnx writes
    ``torch.stft`` and the magnitude, mel and log after it, then the CNN as ``onnx_export``
    writes it, with the front end's constants and the weights in ``params``."""
    from .onnx_export import require_onnx, workload_weights

    onnx = require_onnx()
    if opset < 17:
        raise ValueError(f"kws.export_onnx: the STFT node needs opset 17 or newer, got {opset}")
    arrays, weights, shape = workload_weights(mod, params, "kws", "conv1_weight")
    index, window, mel = _front_end_constants(mod)
    (frames, n_fft), num_mels = index.shape, mel.shape[1]
    hop = int(index[1, 0] - index[0, 0]) if frames > 1 else 1
    blocks = sum(1 for w in weights if w.endswith("_dw_weight"))
    features = relay.var("logmel", shape=(shape[0], 1, frames, num_mels), dtype="float32")
    cnn = dscnn.classifier(features, (frames, num_mels), arrays["conv1_weight"].shape[0],
                           blocks, arrays["fc_weight"].shape[0])
    model = export_dataflow(IRModule.from_expr(relay.Function(relay.analysis.free_vars(cnn),
                                                              cnn)),
                            arrays, opset, graph_name)
    graph, helper = model.graph, onnx.helper
    front: list[Any] = []

    def init(name: str, value: np.ndarray) -> str:
        graph.initializer.append(onnx.numpy_helper.from_array(np.array(value, order="C"), name))
        return name

    def node(op: str, inputs: list[str], out: str, **attrs: Any) -> str:
        front.append(helper.make_node(op, inputs, [out], name=f"node_{out}", **attrs))
        return out

    i64 = "int64"
    y = node("STFT", ["data", init("stft_step", np.array(hop, i64)),
                      init("stft_window", window), init("stft_length", np.array(n_fft, i64))],
             "stft", onesided=1)
    y = node("Transpose", [y], "stft_t", perm=[0, 2, 1, 3])  # torch's (batch, bins, frames, 2)
    y = node("Pow", [y, init("stft_two", np.array(2.0, "float32"))], "stft_sq")
    y = node("ReduceSum", [y, init("stft_last_axis", np.array([-1], i64))], "power", keepdims=0)
    y = node("Sqrt", [y], "magnitude")
    y = node("Transpose", [y], "magnitude_t", perm=[0, 2, 1])
    y = node("MatMul", [y, init("mel_filters", mel)], "mel")
    y = node("Add", [y, init("mel_log_offset", np.array(LOG_OFFSET, "float32"))], "mel_offset")
    y = node("Log", [y], "log_mel")
    node("Unsqueeze", [y, init("mel_channel_axis", np.array([1], i64))], "logmel")
    cnn_nodes = list(graph.node)
    del graph.node[:]
    graph.node.extend(front + cnn_nodes)
    del graph.input[:]
    graph.input.append(helper.make_tensor_value_info("data", onnx.TensorProto.FLOAT, shape))
    return model
