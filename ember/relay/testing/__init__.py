"""ember.relay.testing: the model zoo and helpers for tests (the Relay-era ``relay.testing``).

Every workload module has ``get_workload(...) -> (mod, params)``: an IRModule whose ``main``
takes the input ``data`` and then the weights, and ``params`` (weight name -> NDArray) with
deterministic random values from ``init.create_workload``::

    from ember.relay.testing import resnet
    mod, params = resnet.get_workload(num_layers=18, image_shape=(3, 32, 32))
    out = relay.create_executor("debug", mod=mod).evaluate()(data, **params)
"""
from __future__ import annotations

from . import init, layers, mlp, synthetic  # noqa: F401
from .init import create_workload  # noqa: F401
