"""``tvm.contrib.nvcc``: the CUDA compiler driver. Not available in ember (no CUDA backend):
every function raises NotAvailableError; ``have_cudagraph()`` answers False."""
from ._unavailable import NO_CUDA, USE_CPU, answering_false, raising

_stub = raising(__name__, NO_CUDA, USE_CPU)
_no = answering_false(__name__, NO_CUDA)

compile_cuda = _stub("compile_cuda")
find_cuda_path = _stub("find_cuda_path")
get_cuda_version = _stub("get_cuda_version")
find_libdevice_path = _stub("find_libdevice_path")
callback_libdevice_path = _stub("callback_libdevice_path")
get_target_compute_version = _stub("get_target_compute_version")
parse_compute_version = _stub("parse_compute_version")
have_fp16 = _stub("have_fp16")
have_int8 = _stub("have_int8")
have_tensorcore = _stub("have_tensorcore")
have_bf16 = _stub("have_bf16")
have_cudagraph = _no("have_cudagraph")

__all__ = ["callback_libdevice_path", "compile_cuda", "find_cuda_path", "find_libdevice_path",
           "get_cuda_version", "get_target_compute_version", "have_bf16", "have_cudagraph",
           "have_fp16", "have_int8", "have_tensorcore", "parse_compute_version"]
