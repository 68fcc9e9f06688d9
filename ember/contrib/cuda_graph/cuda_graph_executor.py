"""``tvm.contrib.cuda_graph.cuda_graph_executor``: not available in ember (no CUDA backend).

Run the model on the CPU instead: ``graph_executor.GraphModule(lib["default"](ember.cpu()))``.
"""
from .._unavailable import NO_CUDA, raising, unavailable_class

_INSTEAD = ("build for target 'llvm' and run the graph executor on the CPU: "
            "graph_executor.GraphModule(lib['default'](ember.cpu(0)))")
create = raising(__name__, NO_CUDA, _INSTEAD)("create")
GraphModuleCudaGraph = unavailable_class(__name__, "GraphModuleCudaGraph", NO_CUDA, _INSTEAD)
__all__ = ["GraphModuleCudaGraph", "create"]
