"""``tvm.contrib.mps``: Metal Performance Shaders kernels. Not available in ember."""
from ._unavailable import USE_RELAY_OPS, raising

_stub = raising(__name__, "ember compiles for the CPU only and has no Metal backend", USE_RELAY_OPS)

matmul = _stub("matmul")
conv2d = _stub("conv2d")

__all__ = ["conv2d", "matmul"]
