"""``tvm.contrib.miopen``: MIOpen kernels. Not available in ember (NotAvailableError)."""
from ._unavailable import NO_ROCM, USE_RELAY_OPS, raising

_stub = raising(__name__, f"{NO_ROCM} (no MIOpen)", USE_RELAY_OPS)

conv2d_forward = _stub("conv2d_forward")
softmax = _stub("softmax")
log_softmax = _stub("log_softmax")

__all__ = ["conv2d_forward", "log_softmax", "softmax"]
