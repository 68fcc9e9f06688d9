"""Every zoo model (``ember.relay.testing``) as a standalone C program: AOT for the C runtime,
Model Library Format, the generated C runner built with make (``ember.testing.aot``), its
outputs compared with the graph executor (``generate_ref_data``; absolute tolerance 1e-4: the
runner is compiled with other flags, so sums may round differently) and with the reference
interpreter (rtol 1e-4, atol 1e-5). Params go in a constant pool handed over by the program
(large pools are assembled from a binary file). The Python-side AOT executor runs the same zoo
in tests/relay/aot/test_aot_zoo.py; a fast subset runs by default, the rest is ``slow``."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from _micro_models import interpreter, needs_make

import ember as tvm
from ember import relay
from ember.micro.testing import AOT_DEFAULT_RUNNER
from ember.relay import testing
from ember.testing.aot import AOTTestModel, compile_and_run, generate_ref_data

pytestmark = needs_make
SMALL = {"num_classes": 10, "image_shape": (3, 32, 32)}
FAST: dict[str, Any] = {
    "mlp": lambda: testing.mlp.get_workload(1),
    "synthetic": lambda: testing.synthetic.get_workload(),  # dense, 3x3 conv, softmax, BN
}
SLOW: dict[str, Any] = {
    # depthwise and 1x1 convs on the C runtime (11 s of the default run; the hosted builds run
    # those kernels by default, and synthetic's 3x3 conv runs on the C runtime)
    "mobilenet_32": lambda: testing.mobilenet.get_workload(alpha=0.25, **SMALL),
    # the recurrent kernel (kernels/rnn.h) in its standalone form, on the C runtime (11 s of
    # the default run; tests/topi/test_rnn_kernel.py builds that header standalone there)
    "crnn_tiny": lambda: testing.crnn.get_workload(image_shape=(3, 32, 24), width=0.125,
                                                   hidden=8, num_classes=5),
    # a keyword spotter that computes its own log-mel features: the take of the frames and
    # the DFT's dense products on the C runtime
    "kws_tiny": lambda: testing.kws.get_workload(samples=4000, num_mels=16, filters=8,
                                                 num_blocks=2),
    # its convs and pools are mobilenet_32's kernels (12 s of the default run)
    "resnet18_32": lambda: testing.resnet.get_workload(num_layers=18, **SMALL),
    "dqn": lambda: testing.dqn.get_workload(1),
    "dcgan": lambda: testing.dcgan.get_workload(1, ngf=16, random_len=20),
    "vgg11_32": lambda: testing.vgg.get_workload(1, num_classes=10, image_shape=(3, 32, 32)),
    "squeezenet_64": lambda: testing.squeezenet.get_workload(num_classes=10,
                                                             image_shape=(3, 64, 64)),
    "resnet50_64": lambda: testing.resnet.get_workload(num_layers=50, num_classes=10,
                                                       image_shape=(3, 64, 64)),
    "mobilenet_224": lambda: testing.mobilenet.get_workload(),
    "densenet121_64": lambda: testing.densenet.get_workload(batch_size=1, classes=10,
                                                            image_shape=(3, 64, 64)),
    "inception_v3": lambda: testing.inception_v3.get_workload(num_classes=10),
}
CASES = ([pytest.param(n, "c", id=f"{n}-c") for n in FAST]
         + [pytest.param("mlp", "packed", id="mlp-packed")]
         + [pytest.param(n, api, id=f"{n}-{api}", marks=pytest.mark.slow)
            for n in SLOW for api in ("c", "packed")]
         + [pytest.param(n, "packed", id=f"{n}-packed", marks=pytest.mark.slow)
            for n in FAST if n != "mlp"])


def _model(name: str) -> tuple[AOTTestModel, dict[str, np.ndarray]]:
    mod, params = {**FAST, **SLOW}[name]()
    params = {k: v.numpy() for k, v in params.items()}
    rng = np.random.default_rng(0)
    inputs = {p.name_hint: rng.standard_normal([int(d) for d in p.type_annotation.shape])
              .astype(p.type_annotation.dtype)
              for p in mod["main"].params if p.name_hint not in params}
    model = AOTTestModel(module=mod, inputs=inputs, params=params, output_tolerance=1e-4,
                         outputs=generate_ref_data(mod, inputs, params))
    return model, params


@pytest.mark.parametrize("name, interface_api", CASES)
def test_zoo_model_as_a_c_program(name: str, interface_api: str) -> None:
    model, params = _model(name)
    result = compile_and_run(model, AOT_DEFAULT_RUNNER, interface_api, True, link_params=False)
    ref = interpreter(model.module, dict(model.inputs), params)
    for got, want in zip(result.outputs["default"], ref, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_lstm_is_refused_with_the_reason() -> None:
    """The zoo's LSTM keeps its cell as a Relay function: AOT says to use the VM."""
    mod, params = testing.lstm.get_workload(iterations=2, num_hidden=4)
    with pytest.raises(tvm.TVMError, match="AOT needs static shapes and no control flow; use "
                                           "the VM"), tvm.transform.PassContext(opt_level=3):
        relay.build(mod, "c", params=params,
                    executor=relay.backend.Executor("aot", {"interface-api": "c",
                                                            "unpacked-api": True}),
                    runtime=relay.backend.Runtime("crt"))
