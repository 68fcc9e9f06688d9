"""``tvm._ffi.runtime_ctypes``: the value types of the FFI (they live in ``ember.runtime``)."""
from ..runtime._abi import ArgTypeCode, DLDevice, DLTensor, TVMByteArray  # noqa: F401
from ..runtime.device import Device  # noqa: F401
from ..runtime.dtype import DataType, DataTypeCode  # noqa: F401

TVMArgTypeCode = ArgTypeCode
