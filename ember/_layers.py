"""The layers of ember, bottom to top (DESIGN.md, "The layers"): the one table of them.

A module may import modules of its own layer and of the layers below it, never of a layer
above; ``tests/test_import_discipline.py`` reads this table and checks every import statement
in the package (lazy ones inside functions included). A layer above extends a layer below by
registering into it (ops into ``ember.ir.op``, passes into ``ember.ir.transform``, executor
builders into ``ember.relay.backend.registry``), never by the layer below importing it.

A module belongs to the layer of the longest prefix listed below that matches its dotted name.
This module imports nothing, so every layer may read it.
"""
from __future__ import annotations

# (layer, what lives there, module prefixes), bottom first.
LAYERS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("runtime",
     ("PackedFunc, objects, NDArray, modules and loaders, the C ABI bridge, the graph/AOT/VM "
      "executors, profiling, RPC, the native runtime; the top-level namespace"),
     ("ember", "ember._layers", "ember.error", "ember._ffi", "ember.runtime", "ember.rpc",
      "ember.contrib", "ember.contrib.utils", "ember.contrib.graph_executor",
      "ember.contrib.debugger", "ember.testing", "ember.support")),
    ("IR",
     ("types, expressions, IRModule, attrs, visitors, well-formedness, structural equality, "
      "the text printer and parser, the op registry (Op, OpDef) and the pass manager"),
     ("ember.ir", "ember.instrument")),
    ("target", "Target parsing and the SIMD level of a target",
     ("ember.target",)),
    ("tensor lowering",
     ("tensor expressions, loop-level IR, schedules, C code generation, topi's "
      "tensor-expression kernels (te.Tensor's operators are topi's)"),
     ("ember.te", "ember.tir", "ember.topi")),
    ("operators",
     ("the operator library: per op family its attrs, type relations, patterns, computes, "
      "shape functions and numpy references"),
     ("ember.relay.op",)),
    ("passes", "Relay analyses and passes, and the Relay-level helpers they share",
     ("ember.relay.transform", "ember.relay.analysis", "ember.relay.expr_functor",
      "ember.relay.scope_builder", "ember.relay.loops", "ember.relay.prelude",
      "ember.relay.dataflow_pattern")),
    ("backends",
     ("graph, AOT and VM codegen (each executor's compile side), lowering to C, memory "
      "planning, the shared build pipeline, the executor-builder registry"),
     ("ember.relay.backend",)),
    ("driver", "relay.build and relay.vm.compile, the C compiler driver, the relay namespace",
     ("ember.relay", "ember.relay._build", "ember.relay.build_module", "ember.relay.vm",
      "ember.contrib.cc", "ember.contrib.cc_toolchain")),
    ("frontends", "the ONNX importer, the text-format entry (ember.parser), the model zoo",
     ("ember.relay.frontend", "ember.relay.testing", "ember.parser")),
    ("one-line API", "ember.compile and ember.load; ember.tune, the measured tile search",
     ("ember.api", "ember.tuning")),
    ("tools",
     ("the ember command, RPC server/tracker programs, micro projects, test helpers that "
      "build models"),
     ("ember.cli", "ember.__main__", "ember.exec", "ember.micro", "ember.testing.aot",
      "ember.contrib.relay_viz",
      "ember.testing._aot_c", "ember.testing.plugin", "ember.testing.onnx_backend",
      "ember.testing.onnx_node_tests")),
)

# The runtime reaches the C compiler driver only where exporting needs it, through this one
# function (module, function) -> the module it may import.
_ROOT = "ember"

# The top-level namespace loads any layer on attribute access (``tvm.relay``, ``tvm.ir``), so
# that ``import ember`` stays light: imports inside this function may reach every layer.
NAMESPACE_LOADER: tuple[str, str] = (_ROOT, "__getattr__")

RUNTIME_TO_DRIVER: tuple[tuple[str, str], str] = (("ember.runtime.module", "compiler_driver"),
                                                  "ember.contrib.cc")


def layer_index(module: str) -> int:
    """The position in ``LAYERS`` (0 = bottom) of the layer ``module`` belongs to."""
    best, best_len = -1, -1
    for index, (_, _, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            # the root package is its __init__ alone: a new subpackage must be placed here
            within = module.startswith(prefix + ".") and prefix != _ROOT
            if (module == prefix or within) and len(prefix) > best_len:
                best, best_len = index, len(prefix)
    if best < 0:
        raise KeyError(f"module {module!r} is not in any layer of ember._layers.LAYERS")
    return best


def layer_name(module: str) -> str:
    """The name of the layer ``module`` belongs to."""
    return LAYERS[layer_index(module)][0]
