"""A Relay module built at opt_level 3 and run through the graph executor.

Import from any test (``tests/`` is on ``sys.path`` through pyproject's pythonpath)::

    from graph_runs import graph_outputs
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

import ember
from ember import relay
from ember.contrib import graph_executor


def graph_outputs(mod: ember.IRModule, inputs: Sequence[np.ndarray],
                  target: str = "llvm") -> list[np.ndarray]:
    """The outputs of ``mod`` built for ``target`` at opt_level 3 and run on ``inputs`` (its
    inputs in order)."""
    with ember.transform.PassContext(opt_level=3):
        lib = relay.build(mod, target)
    m = graph_executor.GraphModule(lib["default"](ember.cpu()))
    for i, x in enumerate(inputs):
        m.set_input(i, x)
    m.run()
    return [m.get_output(i).numpy() for i in range(m.get_num_outputs())]
