"""The model zoo as benchmark cases: each model as Relay and as its ONNX twin, with an input.

    from _models import zoo_models
    for case in zoo_models():                       # every exportable zoo model, full size
        case.name, case.onnx_model, case.mod, case.params, case.inputs
    for case in zoo_models(["dscnn", "resnet8"], small=True): ...

``zoo_models(names=None, small=False, opset=17, seed=0)`` yields ``ZooCase`` records (a
NamedTuple: name, onnx_model, mod, params, inputs) lazily, one model at a time, so a caller
holds one full-size VGG at a time. ``inputs`` maps each graph input name to a random array
(uniform [-1, 1) floats, or token ids), the same for the Relay model and the ONNX one.
``small=True`` gives reduced configurations that build in seconds (smoke runs, CI).
Besides the zoo's names, ``ALIASES`` names common configurations (``resnet18``: the zoo's
``resnet`` with 18 layers on 224x224 images).
Needs the ``onnx`` package (``pip install 'ember[bench]'``).
"""
from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import ember
from ember.relay.testing import onnx_twin
from ember.relay.testing.twins import ZOO

_IMG32 = {"image_shape": (3, 32, 32), "num_classes": 10}
# name -> reduced get_workload kwargs (batch 1), for smoke runs
SMALL: dict[str, dict[str, Any]] = {
    "mlp": {"batch_size": 1}, "synthetic": {}, "dqn": {"batch_size": 1},
    "dcgan": {"batch_size": 1, "ngf": 8}, "resnet": {"num_layers": 18, **_IMG32},
    "mobilenet": {"alpha": 0.25, **_IMG32},
    "squeezenet": {"version": "1.1", "image_shape": (3, 64, 64), "num_classes": 10},
    "vgg": {"batch_size": 1, **_IMG32},
    "inception_v3": {"image_shape": (3, 75, 75), "num_classes": 10, "global_pool": True},
    "densenet": {"batch_size": 1, "image_shape": (3, 32, 32), "classes": 10},
    "dscnn": {}, "resnet8": {}, "mobilenet_v2": {"alpha": 0.35, **_IMG32},
    "autoencoder": {}, "transformer": {"seq_len": 16, "hidden": 32, "ffn": 64},
    "mobilenet_v3": {"mode": "large", "alpha": 0.5, **_IMG32},
    "efficientnet": {"variant": "b0", "alpha": 0.5, **_IMG32},
    "dbnet": {"image_shape": (3, 64, 64), "alpha": 0.35},
    "yolov8": {"image_shape": (3, 64, 64), "num_classes": 8, "width": 0.125},
    "vit": {"image_size": 32, "patch": 8, "dim": 48, "depth": 2, "num_classes": 10},
    "gpt2": {"seq_len": 16, "hidden": 32, "num_heads": 2, "num_layers": 2, "vocab_size": 64},
    "unet": {"image_shape": (3, 32, 32), "levels": 3, "base": 8},
    "segformer": {"image_shape": (3, 64, 64), "decoder_dim": 32, "num_classes": 10,
                  "stages": ((16, 1, 1, 4), (32, 1, 2, 2), (48, 1, 3, 1), (64, 1, 4, 1))},
    "wav2vec2": {"samples": 1600, "hidden": 64, "num_heads": 2, "num_layers": 1, "ffn": 128,
                 "convs": ((64, 10, 5), (64, 3, 2), (64, 2, 2))},
    "crnn": {"image_shape": (3, 32, 64), "width": 0.25, "hidden": 16, "num_classes": 11},
    "kws": {"samples": 4000, "filters": 16, "num_blocks": 2},
}

# benchmark name -> (zoo name, get_workload kwargs at full size, reduced kwargs)
ALIASES: dict[str, tuple[str, dict[str, Any], dict[str, Any]]] = {
    "resnet18": ("resnet", {"batch_size": 1, "num_layers": 18, "image_shape": (3, 224, 224)},
                 SMALL["resnet"]),
    "resnet50": ("resnet", {"batch_size": 1, "num_layers": 50, "image_shape": (3, 224, 224)},
                 {"num_layers": 50, **_IMG32}),
    "vgg16": ("vgg", {"batch_size": 1, "num_layers": 16}, SMALL["vgg"]),
    "mobilenet_v3_large": ("mobilenet_v3", {"mode": "large"}, SMALL["mobilenet_v3"]),
    "mobilenet_v3_small": ("mobilenet_v3", {"mode": "small"},
                           {"mode": "small", "alpha": 0.5, **_IMG32}),
    "efficientnet_b0": ("efficientnet", {"variant": "b0"}, SMALL["efficientnet"]),
    "efficientnet_lite0": ("efficientnet", {"variant": "lite0"},
                           {"variant": "lite0", "alpha": 0.5, **_IMG32}),
    "dbnet_mv3": ("dbnet", {}, SMALL["dbnet"]),
    "dbnet_320": ("dbnet", {"image_shape": (3, 320, 320)}, SMALL["dbnet"]),
    "yolov8n": ("yolov8", {}, SMALL["yolov8"]),
    "vit_tiny": ("vit", {}, SMALL["vit"]),
    "gpt2_small": ("gpt2", {"hidden": 768, "num_heads": 12, "num_layers": 12,
                            "vocab_size": 50257}, SMALL["gpt2"]),
    "unet_320": ("unet", {"image_shape": (3, 320, 320)}, SMALL["unet"]),
    "segformer_512": ("segformer", {"image_shape": (3, 512, 512)}, SMALL["segformer"]),
    # PaddleOCR's text-orientation classifier: MobileNetV3 small x0.35 on 48x192 text lines
    "ocr_cls": ("mobilenet_v3", {"mode": "small", "alpha": 0.35, "image_shape": (3, 48, 192),
                                 "num_classes": 2},
                {"mode": "small", "alpha": 0.35, "image_shape": (3, 48, 96), "num_classes": 2}),
}


def known_models() -> list[str]:
    """Every name ``zoo_models`` takes: the zoo's, then the aliases."""
    return [*ZOO, *ALIASES]


def workload(name: str, small: bool = False) -> tuple[str, dict[str, Any]]:
    """(zoo name, get_workload kwargs) of benchmark model ``name``; ValueError if unknown."""
    if name in ALIASES:
        zoo, full, reduced = ALIASES[name]
        return zoo, dict(reduced if small else full)
    table = SMALL if small else ZOO
    if name not in table:
        raise ValueError(f"unknown model {name!r}; choose from {', '.join(known_models())}")
    return name, dict(table[name])


class ZooCase(NamedTuple):
    """One benchmark model: ``mod``/``params`` for ember, ``onnx_model`` for onnxruntime."""

    name: str
    onnx_model: Any
    mod: ember.IRModule
    params: dict[str, Any]
    inputs: dict[str, np.ndarray]


def random_inputs(mod: ember.IRModule, params: dict[str, Any],
                  seed: int = 0) -> dict[str, np.ndarray]:
    """A random array for each input of ``main`` that is not a param."""
    rng = np.random.default_rng(seed)
    out = {}
    for p in mod["main"].params:
        if p.name_hint in params:
            continue
        ty = p.checked_type
        shape = tuple(int(d) for d in ty.shape)
        if ty.dtype.startswith("int"):  # token ids: below the first weight's row count
            rows = int(next(iter(params.values())).shape[0])
            out[p.name_hint] = rng.integers(0, rows, size=shape).astype(ty.dtype)
        else:
            out[p.name_hint] = rng.uniform(-1, 1, size=shape).astype(ty.dtype)
    return out


def zoo_models(names: Iterable[str] | None = None, small: bool = False, opset: int = 17,
               seed: int = 0) -> Iterator[ZooCase]:
    """Yield a ZooCase per model in ``names`` (zoo names or ``ALIASES``; default: all of
    ``ZOO``, in its order)."""
    for name in names if names is not None else list(ZOO):
        zoo, kwargs = workload(name, small)
        model, mod, params = onnx_twin(zoo, opset=opset, **kwargs)
        yield ZooCase(name, model, mod, params, random_inputs(mod, params, seed))


if __name__ == "__main__":
    from ember.relay import testing

    chosen = [a for a in sys.argv[1:] if not a.startswith("--")]
    for case in zoo_models(chosen or None, small="--small" in sys.argv):
        print(f"{case.name}: {len(case.onnx_model.graph.node)} ONNX nodes; "
              f"{testing.summary(case.mod, case.params)[:120]}")
