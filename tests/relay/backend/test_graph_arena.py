"""The graph executor's intermediates in one arena (``memory_plan.plan_storage``): zoo models
give the AOT executor's outputs, and the graph's storage is bounded by AOT's.

The bound: every storage of the graph is either an input, param or output (exactly its
tensor's bytes, as AOT's caller provides them) or the arena of the intermediates, and the arena
is at most AOT's arena (``workspace``, 16-byte aligned offsets) plus 48 bytes per buffer in it
(the graph aligns its offsets to 64 bytes).
"""
from __future__ import annotations

import json

import numpy as np
import pytest

import ember
from ember import relay
from ember.relay.backend import Executor
from ember.relay.testing import densenet, mobilenet_v2, resnet, squeezenet, yolov8
from ember.runtime.graph_format import parse_graph
from ember.testing import find_c_compiler

pytestmark = pytest.mark.skipif(find_c_compiler() is None, reason="no C compiler found")

IMG32 = {"image_shape": (3, 32, 32), "num_classes": 10}
MODELS = {  # reduced sizes: residual adds, dense concatenations, C2f splits, fire modules
    "resnet18-32px": (resnet, {"num_layers": 18, **IMG32}),
    "densenet-32px": (densenet, {"batch_size": 1, "image_shape": (3, 32, 32), "classes": 10}),
    "yolov8-64px": (yolov8, {"image_shape": (3, 64, 64), "num_classes": 8, "width": 0.125}),
    "squeezenet-64px": (squeezenet, {"version": "1.1", "image_shape": (3, 64, 64),
                                     "num_classes": 10}),
    "mobilenet_v2-32px": (mobilenet_v2, {"alpha": 0.35, **IMG32}),
}
SLOW = {"densenet-32px"}


def _run(factory: object, data: np.ndarray) -> np.ndarray:
    m = factory["default"](ember.cpu(0))  # type: ignore[index]
    m.set_input("data", data)
    m.run()
    return m.get_output(0).numpy()


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n
                                  for n in MODELS])
def test_graph_matches_aot_within_its_memory(name: str) -> None:
    module, kwargs = MODELS[name]
    mod, params = module.get_workload(**kwargs)
    shape = [int(d) for d in mod["main"].params[0].checked_type.shape]
    data = np.random.default_rng(0).uniform(-1, 1, shape).astype("float32")
    graph_f = relay.build(mod, "llvm", params=params)
    aot_f = relay.build(mod, "llvm", params=params, executor=Executor("aot"))
    np.testing.assert_allclose(_run(graph_f, data), _run(aot_f, data), rtol=1e-5, atol=1e-6)

    graph = parse_graph(graph_f.get_graph_json())
    assert graph.storage_size is not None  # format 3: the arena is not its largest tensor
    sizes = graph.storage_bytes()
    own = {graph.entry_id(n) for n in graph.arg_nodes} | {graph.entry_id(h) for h in graph.heads}
    for eid in own:  # an input, param or output: a storage of exactly its bytes
        assert sizes[graph.storage_id[eid]] == graph.nbytes(eid)
    (arena,) = set(sizes) - {graph.storage_id[e] for e in own}
    kernel_outputs = [graph.entry_id(i, k) for i, n in enumerate(graph.nodes)
                      if not n.is_input and n.func_name != "__nop"
                      for k in range(n.num_outputs)]
    buffers = sum(graph.storage_id[e] == arena for e in kernel_outputs)
    aot_arena = aot_f.get_model_metadata().memory["planned_bytes"]
    assert sizes[arena] <= aot_arena + 48 * buffers, (sizes[arena], aot_arena)
    assert all(graph.offset(e) % 64 == 0 for e in kernel_outputs if graph.storage_id[e] == arena)


def _storage_per_tensor(doc: dict) -> dict:
    """``doc`` laid out as TVM's graphs (and ember's before format 3) are: a storage per kernel
    output at offset 0, sized by its largest tensor (no storage_size); __nop views stay in
    their input's storage, at their offset in it."""
    attrs, rows = doc["attrs"], doc["node_row_ptr"]
    n = len(attrs["storage_id"][1])
    given = attrs.get("storage_offset", ["list_int", [0] * n])[1]
    sid, offset = list(range(n)), [0] * n
    for i, node in enumerate(doc["nodes"]):
        if node.get("attrs", {}).get("func_name") == "__nop":
            (nid, k, *_), = node["inputs"]  # a view: one input
            src, dst = rows[nid] + k, rows[i]
            sid[dst], offset[dst] = sid[src], offset[src] + given[dst] - given[src]
    for key in ("storage_offset", "storage_size", "format_version"):
        attrs.pop(key, None)
    attrs["storage_id"][1] = sid
    if any(offset):
        attrs["storage_offset"] = ["list_int", offset]
    return doc


def test_old_graph_json_without_storage_size_still_runs() -> None:
    """The same kernels run from the old layout (no storage_size) give the same result."""
    mod, params = resnet.get_workload(num_layers=18, **IMG32)
    factory = relay.build(mod, "llvm", params=params)
    data = np.random.default_rng(1).uniform(-1, 1, (1, 3, 32, 32)).astype("float32")
    old = json.dumps(_storage_per_tensor(json.loads(factory.get_graph_json())))
    assert parse_graph(old).storage_size is None
    m = ember.runtime.graph_executor.create(old, factory.get_lib(), ember.cpu(0))
    m.set_input(**factory.get_params())
    m.set_input("data", data)
    m.run()
    np.testing.assert_array_equal(m.get_output(0).numpy(), _run(factory, data))
