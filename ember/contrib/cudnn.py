"""``tvm.contrib.cudnn``: cuDNN kernels. Not available in ember: ``exists()`` answers False,
every other function raises NotAvailableError."""
from ._unavailable import NO_CUDA, USE_RELAY_OPS, answering_false, raising

_stub = raising(__name__, f"{NO_CUDA} (no cuDNN)", USE_RELAY_OPS)
_no = answering_false(__name__, f"{NO_CUDA} (no cuDNN)")

algo_to_index = _stub("algo_to_index")
conv_output_shape = _stub("conv_output_shape")
conv_dgrad_shape = _stub("conv_dgrad_shape")
conv_find_algo = _stub("conv_find_algo")
conv_forward = _stub("conv_forward")
conv_backward_data = _stub("conv_backward_data")
conv_backward_filter = _stub("conv_backward_filter")
softmax = _stub("softmax")
log_softmax = _stub("log_softmax")
exists = _no("exists")

__all__ = ["algo_to_index", "conv_backward_data", "conv_backward_filter", "conv_dgrad_shape",
           "conv_find_algo", "conv_forward", "conv_output_shape", "exists", "log_softmax",
           "softmax"]
