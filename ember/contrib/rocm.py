"""``tvm.contrib.rocm``: the ROCm toolchain. Not available in ember (NotAvailableError);
``have_matrixcore()`` answers False."""
from ._unavailable import NO_ROCM, USE_CPU, answering_false, raising

_stub = raising(__name__, NO_ROCM, USE_CPU)
_no = answering_false(__name__, NO_ROCM)

find_lld = _stub("find_lld")
rocm_link = _stub("rocm_link")
callback_rocm_link = _stub("callback_rocm_link")
callback_rocm_bitcode_path = _stub("callback_rocm_bitcode_path")
find_rocm_path = _stub("find_rocm_path")
parse_device_arch = _stub("parse_device_arch")
get_rocm_arch = _stub("get_rocm_arch")
have_matrixcore = _no("have_matrixcore")

__all__ = ["callback_rocm_bitcode_path", "callback_rocm_link", "find_lld", "find_rocm_path",
           "get_rocm_arch", "have_matrixcore", "parse_device_arch", "rocm_link"]
