"""``tvm.contrib.cublaslt``: cuBLASLt kernels. Not available in ember (NotAvailableError)."""
from ._unavailable import NO_CUDA, USE_RELAY_OPS, raising

_stub = raising(__name__, f"{NO_CUDA} (no cuBLASLt)", USE_RELAY_OPS)

matmul = _stub("matmul")

__all__ = ["matmul"]
