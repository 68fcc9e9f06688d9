"""Concatenate as one copy loop per input (te/piecewise.py) on every executor: yolov8's neck
(nearest 2x upsampling joined with a skip map, in the blocked layout after planning) and its
head (three maps flattened and joined, then split), against numpy."""
from __future__ import annotations

import numpy as np
import pytest

import ember
from ember import relay
from ember.contrib import cc

needs_cc = pytest.mark.skipif(cc.get_cc() is None, reason="no C compiler found")
RNG = np.random.default_rng(0)


def _neck_and_head():
    up = relay.var("up", shape=(1, 8, 3, 5))
    skip = relay.var("skip", shape=(1, 4, 6, 10))
    maps = [relay.var(f"m{s}", shape=(1, 6, s, s)) for s in (4, 2, 1)]
    big = relay.image.resize2d(up, size=(6, 10), method="nearest_neighbor",
                               coordinate_transformation_mode="asymmetric",
                               rounding_method="floor")
    neck = relay.concatenate([big, skip], axis=1)
    flat = relay.concatenate([relay.reshape(m, (1, 6, -1)) for m in maps], axis=2)
    head = relay.split(flat, [2], axis=1)
    body = relay.Tuple([neck, head[0], head[1]])
    return ember.IRModule.from_expr(relay.Function([up, skip, *maps], body))


def _expected(up, skip, m4, m2, m1):
    neck = np.concatenate([up.repeat(2, 2).repeat(2, 3), skip], 1)
    flat = np.concatenate([m.reshape(1, 6, -1) for m in (m4, m2, m1)], 2)
    return [neck, flat[:, :2], flat[:, 2:]]


def _run(executor: str, mod, arrays):
    from ember.contrib import graph_executor
    from ember.relay.backend import Executor

    with ember.transform.PassContext(opt_level=3):
        if executor == "vm":
            exe = relay.vm.compile(mod, "llvm")
            outs = ember.runtime.vm.VirtualMachine(exe, ember.cpu()).run(*arrays)
            return [o.numpy() for o in outs]
        lib = relay.build(mod, "llvm", executor=Executor(executor))
    if executor == "aot":
        from ember.runtime.aot_executor import AotModule

        m = AotModule(lib["default"](ember.cpu()))
    else:
        m = graph_executor.GraphModule(lib["default"](ember.cpu()))
    for i, a in enumerate(arrays):
        m.set_input(i, a)
    m.run()
    return [m.get_output(i).numpy() for i in range(m.get_num_outputs())]


@needs_cc
@pytest.mark.parametrize("executor", ["graph", "aot", "vm"])
def test_neck_and_head_concats_on_every_executor(executor):
    shapes = [(1, 8, 3, 5), (1, 4, 6, 10), (1, 6, 4, 4), (1, 6, 2, 2), (1, 6, 1, 1)]
    arrays = [RNG.standard_normal(s).astype("float32") for s in shapes]
    got = _run(executor, _neck_and_head(), arrays)
    for g, want in zip(got, _expected(*arrays), strict=True):
        np.testing.assert_array_equal(g, want)
