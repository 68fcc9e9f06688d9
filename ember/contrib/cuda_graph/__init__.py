"""``tvm.contrib.cuda_graph``: the graph executor on CUDA graphs. Not available in ember (no
CUDA backend); ``cuda_graph_executor.create`` raises NotAvailableError."""
from . import cuda_graph_executor  # noqa: F401
