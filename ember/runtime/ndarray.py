"""NDArray: an n-dimensional array in 64-byte aligned host memory with a stable DLTensor.

The DLTensor (``arr._dl_addr``) stays valid, at the same address, for the life of the array,
so compiled code can be handed ``DLTensor*`` without any per-call allocation.
"""
from __future__ import annotations

import ctypes
from typing import Any, Sequence

import numpy as np

from ._abi import DLTensor
from .device import Device, cpu
from .dtype import DataType

ALIGNMENT = 64


def _aligned_buffer(nbytes: int) -> np.ndarray:
    """A uint8 numpy array of ``nbytes`` whose data pointer is a multiple of ALIGNMENT."""
    raw = np.empty(nbytes + ALIGNMENT, dtype=np.uint8)
    offset = (-raw.ctypes.data) % ALIGNMENT
    return raw[offset : offset + nbytes]


class NDArray:
    """A tensor on a device (the CPU). Create with ``ember.nd.array`` or ``ember.nd.empty``."""

    __slots__ = ("_np", "_dl", "_dl_addr", "_shape_arr", "_device", "_dtype", "_owner",
                 "__weakref__")

    def __init__(self, np_view: np.ndarray, device: Device, dtype: DataType, owner: Any = None):
        # np_view: a C-contiguous numpy array over the storage; owner keeps foreign memory alive.
        self._np = np_view
        self._device = device
        self._dtype = dtype
        self._owner = owner
        shape = np_view.shape if dtype.lanes == 1 else np_view.shape[:-1]
        self._shape_arr = (ctypes.c_int64 * max(len(shape), 1))(*shape)
        dl = DLTensor()
        dl.data = np_view.ctypes.data
        dl.device = device.to_dl()
        dl.ndim = len(shape)
        dl.dtype = dtype.to_dl()
        dl.shape = ctypes.cast(self._shape_arr, ctypes.POINTER(ctypes.c_int64))
        dl.strides = None
        dl.byte_offset = 0
        self._dl = dl
        self._dl_addr = ctypes.addressof(dl)

    # -- properties ---------------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self._np.shape if self._dtype.lanes == 1 else self._np.shape[:-1])

    @property
    def dtype(self) -> str:
        return str(self._dtype)

    @property
    def device(self) -> Device:
        return self._device

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def handle(self) -> ctypes.c_void_p:
        """The ``DLTensor*`` of this array (valid while the array lives)."""
        return ctypes.c_void_p(self._dl_addr)

    @property
    def nbytes(self) -> int:
        return int(self._np.nbytes)

    @property
    def data_ptr(self) -> int:
        return int(self._np.ctypes.data)

    # -- conversion ---------------------------------------------------------------------------
    def numpy(self) -> np.ndarray:
        """A copy of the contents as a numpy array."""
        return self._np.copy()

    asnumpy = numpy

    def copyfrom(self, source: "NDArray | np.ndarray | Sequence[Any]") -> "NDArray":
        """Copy ``source`` into this array; shapes must match and dtypes must be convertible."""
        if isinstance(source, NDArray):
            source = source._np
        src = np.asarray(source)
        if src.shape != self._np.shape:
            raise ValueError(f"NDArray.copyfrom: shape mismatch: array has shape {self.shape}, "
                             f"source has shape {src.shape}")
        np.copyto(self._np, src, casting="unsafe")
        return self

    def copyto(self, target: "NDArray | Device") -> "NDArray":
        """Copy into another NDArray, or into a new array on ``target`` if it is a Device."""
        if isinstance(target, Device):
            target.check_supported()
            return empty(self.shape, self.dtype, target).copyfrom(self)
        if isinstance(target, NDArray):
            return target.copyfrom(self)
        raise TypeError(f"NDArray.copyto: expected an NDArray or a Device, got {type(target).__name__}")

    def __repr__(self) -> str:
        return f"<ember.NDArray shape={self.shape}, {self._device}>\n{self._np!r}"

    def __str__(self) -> str:
        return str(self._np)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return self._np if dtype is None else self._np.astype(dtype)


def empty(shape: Sequence[int] | int, dtype: "str | DataType" = "float32",
          device: Device | None = None) -> NDArray:
    """A new uninitialised array of ``shape`` and ``dtype`` on ``device`` (default CPU)."""
    device = cpu(0) if device is None else device
    device.check_supported()
    shape = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(s) for s in shape)
    if any(s < 0 for s in shape):
        raise ValueError(f"nd.empty: negative dimension in shape {shape}")
    dt = DataType(dtype)
    full_shape = shape if dt.lanes == 1 else shape + (dt.lanes,)
    scalar_np = DataType(dt.scalar).numpy_dtype
    count = int(np.prod(full_shape, dtype=np.int64))
    storage = _aligned_buffer(count * scalar_np.itemsize)
    return NDArray(storage.view(scalar_np).reshape(full_shape), device, dt)


def array(obj: Any, device: Device | None = None, dtype: "str | DataType | None" = None) -> NDArray:
    """Copy ``obj`` (numpy array, NDArray, nested lists, scalar) into a new NDArray."""
    if isinstance(obj, NDArray):
        obj = obj._np
    src = np.asarray(obj, dtype=None if dtype is None else DataType(dtype).numpy_dtype)
    if dtype is None and str(src.dtype) not in ("bool", "int8", "int16", "int32", "int64",
                                                   "uint8", "uint16", "uint32", "uint64",
                                                   "float16", "float32", "float64"):
        raise TypeError(f"nd.array: numpy dtype {src.dtype} is not supported; use one of bool, "
                        "int8/16/32/64, uint8/16/32/64, float16/32/64")
    out = empty(src.shape, dtype if dtype is not None else str(src.dtype), device)
    np.copyto(out._np, src, casting="unsafe")
    return out
