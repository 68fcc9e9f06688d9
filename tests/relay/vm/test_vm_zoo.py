"""Every zoo model (``ember.relay.testing``) on the VM matches the graph executor (or, for
the LSTM, which the graph executor cannot run, the interpreter). Big models are slow-marked."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from _vm_check import interpret, requires_cc, vm_run

import ember
from ember import relay
from ember.contrib.graph_executor import GraphModule
from ember.relay import testing

pytestmark = requires_cc

SMALL = {"mlp": {"batch_size": 2}, "dqn": {"batch_size": 1},
         "synthetic": {}, "dcgan": {"batch_size": 1, "ngf": 8}}
BIG = {"resnet": {"batch_size": 1, "num_layers": 18}, "mobilenet": {"batch_size": 1},
       "squeezenet": {"batch_size": 1}, "vgg": {"batch_size": 1, "num_layers": 11},
       "densenet": {"batch_size": 1}, "inception_v3": {"batch_size": 1}}
CASES = [pytest.param(n, kw, id=n) for n, kw in SMALL.items()] + [
    pytest.param(n, kw, id=n, marks=pytest.mark.slow) for n, kw in BIG.items()]


def _inputs(mod: ember.IRModule, params: dict) -> dict[str, Any]:
    rng = np.random.default_rng(0)
    return {p.name_hint: rng.standard_normal([int(d) for d in p.type_annotation.shape])
            .astype(p.type_annotation.dtype)
            for p in mod["main"].params if p.name_hint not in params}


@pytest.mark.parametrize("name, kwargs", CASES)
def test_zoo_model_matches_the_graph_executor(name: str, kwargs: dict) -> None:
    mod, params = getattr(testing, name).get_workload(**kwargs)
    data = _inputs(mod, params)
    with ember.transform.PassContext(opt_level=3):
        exe = relay.vm.compile(mod, target="llvm", params=params)
        factory = relay.build(mod, target="llvm", params=params)
    graph = GraphModule(factory["default"](ember.cpu()))
    graph.set_input(**data)
    graph.run()
    out = vm_run(exe, *data.values())
    outs = list(out.fields) if hasattr(out, "fields") else [out]
    assert len(outs) == graph.get_num_outputs()
    for i, o in enumerate(outs):
        np.testing.assert_allclose(o.numpy(), graph.get_output(i).numpy(), rtol=1e-5, atol=1e-5)


def test_lstm_matches_the_interpreter() -> None:
    mod, params = testing.lstm.get_workload(iterations=3, num_hidden=8)
    data = _inputs(mod, params)
    exe = relay.vm.compile(mod, target="llvm", params=params)
    from ember.relay.build_module import bind_params_by_name

    ref_mod = mod.copy()
    ref_mod["main"] = bind_params_by_name(mod["main"], params)
    got, ref = vm_run(exe, *data.values()), interpret(ref_mod, *data.values())
    from _vm_check import assert_same, to_py

    assert_same(to_py(got), to_py(ref), 1e-5, 1e-5)
