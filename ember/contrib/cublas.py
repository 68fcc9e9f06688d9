"""``tvm.contrib.cublas``: cuBLAS kernels. Not available in ember (NotAvailableError)."""
from ._unavailable import NO_CUDA, USE_RELAY_OPS, raising

_stub = raising(__name__, f"{NO_CUDA} (no cuBLAS)", USE_RELAY_OPS)

matmul = _stub("matmul")
batch_matmul = _stub("batch_matmul")

__all__ = ["batch_matmul", "matmul"]
