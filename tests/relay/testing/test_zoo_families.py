"""The zoo families added for issue 21 (``unet``, ``crnn``, ``wav2vec2``, ``segformer``): each
ONNX twin passes ``onnx.checker`` and, run by onnxruntime, matches

- ember's reference interpreter on the Relay model (default run, tiny sizes, every weight,
  biases and norm scales included, drawn at random so that a misplaced one shows);
- ember's compiled graph executor on the twin imported by ``relay.frontend.from_onnx`` (default
  run: the tiny CRNN; ``-m slow``: every family, tiny and at full size).

Tolerance: rtol 1e-4 and atol 1e-5 times the output's scale (at least 1), as the other zoo
twins (two runtimes sum in different orders).
"""
from __future__ import annotations

import importlib
from collections import Counter
from typing import Any

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

import ember
from ember import relay
from ember.relay.testing import crnn, onnx_twin, segformer, unet, wav2vec2
from ember.relay.testing.onnx_export import export_onnx
from ember.testing import find_c_compiler

from _zoo_checks import assert_close as _assert_close  # noqa: E402
from _zoo_checks import onnxruntime_output as _onnxruntime  # noqa: E402

needs_cc = pytest.mark.skipif(find_c_compiler() is None, reason="no C compiler found")
# id -> (zoo name, tiny kwargs, full-size kwargs)
CASES: dict[str, tuple[str, dict[str, Any], dict[str, Any]]] = {
    "unet": ("unet", {"image_shape": (3, 32, 48), "levels": 3, "base": 4, "num_classes": 3},
             {}),
    "crnn": ("crnn", {"image_shape": (3, 32, 24), "width": 0.125, "hidden": 8,
                      "num_classes": 11}, {}),
    "wav2vec2": ("wav2vec2", {"samples": 800, "hidden": 32, "num_heads": 2, "num_layers": 1,
                              "ffn": 64, "convs": ((16, 10, 5), (16, 3, 2), (16, 2, 2))}, {}),
    "segformer": ("segformer", {"image_shape": (3, 64, 64), "decoder_dim": 16,
                                "num_classes": 5,
                                "stages": ((8, 1, 1, 4), (16, 1, 2, 2), (24, 1, 3, 1),
                                           (32, 1, 4, 1))}, {}),
}
# compiled in the default run (the LSTM import is the path no other zoo twin takes); the
# others' ops (transposed convs, attention, resize) are compiled by other default-run tests
COMPILED = ("crnn",)


def _random_weights(params: dict[str, Any], seed: int = 1) -> dict[str, np.ndarray]:
    """Every weight at random: create_workload's zero biases and unit scales would hide a
    bias or scale that the twin puts in the wrong place."""
    rng = np.random.default_rng(seed)
    return {k: (v.numpy() if "weight" in k else rng.uniform(0.5, 1.5, v.shape) if "gamma" in k
                else rng.uniform(-0.5, 0.5, v.shape)).astype("float32")
            for k, v in params.items()}


def _input(mod: ember.IRModule, seed: int = 0) -> np.ndarray:
    shape = [int(d) for d in mod["main"].params[0].checked_type.shape]
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype("float32")




@pytest.mark.parametrize("case", list(CASES))
def test_twin_matches_the_interpreter(case: str) -> None:
    name, kwargs, _ = CASES[case]
    module = importlib.import_module(f"ember.relay.testing.{name}")
    mod, params = module.get_workload(**kwargs)
    weights = _random_weights(params)
    model = getattr(module, "export_onnx", export_onnx)(mod, weights, graph_name=name)
    onnx.checker.check_model(model, full_check=True)
    x = _input(mod)
    want = relay.create_executor("debug", mod=mod).evaluate()(x, **weights).numpy()
    _assert_close(_onnxruntime(model, x), want)


def _compiled_twin_matches_onnxruntime(name: str, kwargs: dict[str, Any]) -> None:
    from ember.contrib import graph_executor

    model, mod, _ = onnx_twin(name, **kwargs)
    onnx.checker.check_model(model)
    imported, params = relay.frontend.from_onnx(model)
    with ember.transform.PassContext(opt_level=3):
        lib = relay.build(imported, "llvm", params=params)
    m = graph_executor.GraphModule(lib["default"](ember.cpu()))
    x = _input(mod)
    m.set_input("data", x)
    m.run()
    _assert_close(m.get_output(0).numpy(), _onnxruntime(model, x))


@needs_cc
@pytest.mark.parametrize("case", [pytest.param(c, marks=() if c in COMPILED else
                                               pytest.mark.slow) for c in CASES])
def test_imported_twin_compiles_and_matches_onnxruntime(case: str) -> None:
    name, kwargs, _ = CASES[case]
    _compiled_twin_matches_onnxruntime(name, kwargs)


@needs_cc
@pytest.mark.slow
@pytest.mark.parametrize("case", list(CASES))
def test_full_size_twin_matches_onnxruntime(case: str) -> None:
    name, _, full = CASES[case]
    _compiled_twin_matches_onnxruntime(name, full)


def _node_types(name: str) -> Counter:
    model = onnx_twin(name, **CASES[name][1])[0]
    return Counter(n.op_type for n in model.graph.node)


def test_twins_are_written_as_exporters_write_them() -> None:
    types = _node_types("unet")
    assert types["ConvTranspose"] == 2 and types["Concat"] == 2 and types["MaxPool"] == 2
    types = _node_types("crnn")
    assert types["LSTM"] == 1 and types["Softmax"] == 1 and types["MaxPool"] == 1
    lstm = next(n for n in onnx_twin("crnn", **CASES["crnn"][1])[0].graph.node
                if n.op_type == "LSTM")
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in lstm.attribute}
    assert attrs == {"hidden_size": 8, "direction": b"bidirectional"}
    types = _node_types("wav2vec2")
    assert types["Erf"] and types["ReduceMean"] and types["Pow"] and not types[
        "LayerNormalization"] + types["InstanceNormalization"]
    model = onnx_twin("segformer", **CASES["segformer"][1])[0]
    resizes = [n for n in model.graph.node if n.op_type == "Resize"]
    assert len(resizes) == 3  # the three deeper stages, to stride 4
    for node in resizes:
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        assert attrs["mode"] == b"linear"
        assert attrs["coordinate_transformation_mode"] == b"pytorch_half_pixel"


def test_full_size_shapes() -> None:
    """The default configurations: the sizes the issue names."""
    def io(mod: ember.IRModule) -> tuple[tuple[int, ...], tuple[int, ...]]:
        main = mod["main"]
        return (tuple(int(d) for d in main.params[0].checked_type.shape),
                tuple(int(d) for d in main.body.checked_type.shape))

    assert io(unet.get_workload()[0]) == ((1, 3, 256, 256), (1, 2, 256, 256))
    assert io(crnn.get_workload()[0]) == ((1, 3, 48, 320), (1, 80, 97))
    assert io(wav2vec2.get_workload()[0]) == ((1, 16000), (1, 49, 384))
    assert io(segformer.get_workload()[0]) == ((1, 3, 256, 256), (1, 150, 64, 64))


def test_crnn_export_refuses_a_foreign_module_or_missing_weights() -> None:
    mod, params = crnn.get_workload(**CASES["crnn"][1])
    partial = {k: v for k, v in params.items() if k != "lstm_bw_R_weight"}
    with pytest.raises(ValueError, match=r"params lack \['lstm_bw_R_weight'\]"):
        crnn.export_onnx(mod, partial)
    other, other_params = unet.get_workload(**CASES["unet"][1])
    with pytest.raises(ValueError, match="expected a crnn.get_workload module"):
        crnn.export_onnx(other, other_params)


@pytest.mark.parametrize("make, match", [
    (lambda: unet.get_workload(image_shape=(3, 100, 96)), "multiples of 8"),
    (lambda: unet.get_workload(levels=1), "levels must be >= 2"),
    (lambda: unet.get_workload(base=0), "base=0"),
    (lambda: crnn.get_workload(image_shape=(3, 40, 320)), "H a multiple of 16"),
    (lambda: crnn.get_workload(image_shape=(3, 48)), "image_shape must be"),
    (lambda: crnn.get_workload(hidden=0), "hidden=0"),
    (lambda: crnn.get_workload(width=-1.0), "width=-1.0"),
    (lambda: wav2vec2.get_workload(hidden=100), "multiple of num_heads"),
    (lambda: wav2vec2.get_workload(samples=300), "300 samples are too few"),
    (lambda: wav2vec2.get_workload(convs=((512, 0, 2),)), "positive channels, kernels"),
    (lambda: wav2vec2.get_workload(convs=()), "convs non-empty"),
    (lambda: segformer.get_workload(image_shape=(3, 100, 100)), "multiples of 32"),
    (lambda: segformer.get_workload(stages=((30, 1, 4, 1),)), "stage 1 .* multiple of heads"),
    (lambda: segformer.get_workload(image_shape=(3, 32, 32), stages=((8, 1, 1, 16),)),
     "stage 1's map 8x8 is not a multiple of its sr_ratio 16"),
    (lambda: segformer.get_workload(num_classes=0), "must be positive"),
])
def test_bad_configurations_are_refused(make: Any, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        make()
