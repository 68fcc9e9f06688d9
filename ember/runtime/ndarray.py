"""NDArray: an n-dimensional array in 64-byte aligned host memory with a stable DLTensor.

The DLTensor (``arr._dl_addr``, ``arr.handle``) stays valid, at the same address, for the life
of the array, so compiled code can be handed ``DLTensor*`` without any per-call allocation.

Storage is always a C-contiguous numpy array (``arr._np``) whose base chain keeps the memory
alive: for arrays made by ``empty``/``array`` that is an over-allocated uint8 buffer; for views
over foreign memory (``from_dltensor_address``, ``from_dlpack``) it is a small holder object
that also keeps the foreign owner alive. Vector dtypes (``float32x4``) store the lanes as a
trailing numpy axis; ``shape`` never shows it.
"""
from __future__ import annotations

import ctypes
import functools
import math
import operator
from typing import Any, Sequence

import numpy as np

from ._abi import DLDeviceType, DLTensor
from .device import (RPC_SESS_MASK, Device, cl, cpu, cuda, gpu,  # noqa: F401  (ember.nd.cpu)
                     opencl, rpc_session_of, vulkan)
from .dtype import DataType
from .errors import TVMError

ALIGNMENT = 64
_INT64_P = ctypes.POINTER(ctypes.c_int64)
SUPPORTED_DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                    "uint64", "float16", "float32", "float64")
# np.dtype.name is slow (microseconds): look names up by dtype instead.
_NP_NAME = {np.dtype(n): n for n in SUPPORTED_DTYPES}


@functools.lru_cache(maxsize=256)
def _parse_dtype(dtype: "str | DataType") -> tuple[DataType, np.dtype]:
    """(DataType, numpy dtype of one lane), cached: dtype parsing is on every allocation."""
    dt = DataType(dtype)
    return dt, DataType(dt.scalar).numpy_dtype


def _aligned_buffer(nbytes: int) -> np.ndarray:
    """A uint8 numpy array of ``nbytes`` whose data pointer is a multiple of ALIGNMENT."""
    raw = np.empty(nbytes + ALIGNMENT, dtype=np.uint8)
    offset = (-raw.ctypes.data) % ALIGNMENT
    # Not raw[offset:offset + nbytes]: numpy leaves the pointer of an empty slice unmoved.
    return np.ndarray((nbytes,), dtype=np.uint8, buffer=raw, offset=offset)


class _MemoryView:
    """Exposes foreign memory to numpy (``np.asarray(view)``) and keeps ``owner`` alive.

    numpy records this object as the base of the array it builds, so the owner lives as long
    as any numpy array (or DLPack capsule exported from one) still points into the memory.
    """

    __slots__ = ("__array_interface__", "owner")

    def __init__(self, ptr: int, shape: tuple[int, ...], np_dtype: np.dtype, owner: Any,
                 strides: tuple[int, ...] | None = None) -> None:
        self.owner = owner
        self.__array_interface__ = {"data": (ptr, False), "shape": shape,
                                    "typestr": np_dtype.str, "strides": strides, "version": 3}


class NDArray:
    """A tensor on a device (the CPU). Create with ``ember.nd.array`` or ``ember.nd.empty``."""

    __slots__ = ("_np", "_dl", "_dl_addr", "_shape_arr", "_device", "_dtype", "_owner",
                 "__weakref__")

    def __init__(self, np_view: np.ndarray, device: Device, dtype: DataType, owner: Any = None):
        # np_view: a C-contiguous numpy array over the storage; owner keeps foreign memory alive.
        if not np_view.flags.c_contiguous:
            raise ValueError("NDArray storage must be C-contiguous")
        self._np = np_view
        self._device = device
        self._dtype = dtype
        self._owner = owner
        shape = np_view.shape if dtype.lanes == 1 else np_view.shape[:-1]
        self._shape_arr = shape_arr = (ctypes.c_int64 * max(len(shape), 1))(*shape)
        # One constructor call: field-by-field assignment costs several microseconds.
        dl = DLTensor(np_view.ctypes.data, device.to_dl(), len(shape), dtype.to_dl(),
                      shape_arr, None, 0)
        self._dl = dl
        self._dl_addr = ctypes.addressof(dl)

    # -- properties ---------------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        """The logical shape (without the lanes axis of vector dtypes)."""
        return tuple(self._np.shape if self._dtype.lanes == 1 else self._np.shape[:-1])

    @property
    def dtype(self) -> str:
        """The dtype as a string, e.g. ``'float32'`` (compare with ``==`` to a DataType too)."""
        return str(self._dtype)

    @property
    def device(self) -> Device:
        return self._device

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def handle(self) -> ctypes.c_void_p:
        """The ``DLTensor*`` of this array (valid, and unchanged, while the array lives)."""
        return ctypes.c_void_p(self._dl_addr)

    @property
    def nbytes(self) -> int:
        return int(self._np.nbytes)

    @property
    def data_ptr(self) -> int:
        return int(self._np.ctypes.data)

    @property
    def is_aligned(self) -> bool:
        """Whether the data pointer is ALIGNMENT-byte aligned (always true unless this is a view
        over foreign memory, see ``from_dlpack``)."""
        return self.data_ptr % ALIGNMENT == 0

    @property
    def is_view(self) -> bool:
        """Whether this array views memory it does not own (``from_dlpack`` and friends)."""
        return self._owner is not None

    # -- conversion ---------------------------------------------------------------------------
    def numpy(self) -> np.ndarray:
        """A copy of the contents as a numpy array (vector dtypes get a trailing lanes axis)."""
        return self._np.copy()

    asnumpy = numpy

    def copyfrom(self, source: "NDArray | np.ndarray | Sequence[Any] | Any") -> "NDArray":
        """Copy ``source`` (NDArray, numpy array, nested lists, scalar) into this array.

        The shapes must match exactly; the values are converted to this array's dtype.
        Raises ValueError naming both shapes on a mismatch. Returns ``self``.
        """
        if isinstance(source, NDArray):
            source = source._np
        src = np.asarray(source)
        if src.shape != self._np.shape:
            lanes = self._dtype.lanes
            want = self.shape if lanes == 1 else f"{self.shape} x {lanes} lanes"
            raise ValueError(f"NDArray.copyfrom: shape mismatch: array has shape {want}, "
                             f"source has shape {src.shape}")
        if src.dtype.kind not in "biuf":
            raise TypeError(f"NDArray.copyfrom: cannot convert {src.dtype} values to {self.dtype}")
        np.copyto(self._np, src, casting="unsafe")
        return self

    def copyto(self, target: "NDArray | Device") -> "NDArray":
        """Copy into another NDArray (returned), or into a new array on ``target`` if a Device."""
        if isinstance(target, Device):  # empty() refuses devices ember cannot allocate on
            return empty(self.shape, self.dtype, target).copyfrom(self)
        dev = getattr(target, "device", None)
        if isinstance(target, NDArray) or isinstance(dev, Device) and dev.device_type >= \
                RPC_SESS_MASK:  # an array of an RPC session
            return target.copyfrom(self)
        raise TypeError(f"NDArray.copyto: expected an NDArray or a Device, "
                        f"got {type(target).__name__}")

    def __setitem__(self, key: Any, value: Any) -> None:
        # Only whole-array assignment (``arr[:] = x``), as in the Relay-era API.
        if not (isinstance(key, slice) and key == slice(None)) and key is not Ellipsis:
            raise ValueError("NDArray only supports whole-array assignment: arr[:] = value")
        if isinstance(value, NDArray) or np.ndim(value) > 0:
            self.copyfrom(value)
        else:
            self._np[...] = value

    def __repr__(self) -> str:
        return f"<ember.NDArray shape={self.shape}, {self._device}>\n{self._np!r}"

    def __str__(self) -> str:
        return str(self._np)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        out = self._np if dtype is None else self._np.astype(dtype, copy=False)
        return out.copy() if copy and out is self._np else out

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickles by value; DataType keeps vector dtypes intact.
        return (array, (self._np.copy(), None, self.dtype))

    # -- DLPack (implemented in dlpack.py) ----------------------------------------------------
    def __dlpack__(self, *, stream: Any = None, max_version: Any = None, dl_device: Any = None,
                   copy: bool | None = None) -> Any:
        """Export as a DLPack capsule (named "dltensor"); see ``ember.runtime.dlpack``."""
        from .dlpack import export_capsule

        return export_capsule(self, stream=stream, max_version=max_version, dl_device=dl_device,
                              copy=copy)

    def __dlpack_device__(self) -> tuple[int, int]:
        return (self._device.device_type, self._device.device_id)


def _normalize_shape(shape: Sequence[int] | int, where: str) -> tuple[int, ...]:
    if isinstance(shape, (int, np.integer)):
        shape = (int(shape),)
    try:
        if isinstance(shape, (str, bytes)):
            raise TypeError
        out = tuple(operator.index(s) for s in shape)
    except TypeError:
        raise TypeError(f"{where}: shape must be an int or a sequence of ints, "
                        f"got {shape!r}") from None
    if any(s < 0 for s in out):
        raise ValueError(f"{where}: negative dimension in shape {out}")
    return out


def empty(shape: Sequence[int] | int, dtype: "str | DataType" = "float32",
          device: Device | None = None, mem_scope: str | None = None) -> NDArray:
    """A new uninitialised array of ``shape`` and ``dtype`` on ``device`` (default CPU).

    Raises TVMError for devices ember cannot allocate on (anything but the CPU). On a device
    of an RPC session the array is allocated on the server (a RemoteNDArray).
    """
    device = cpu(0) if device is None else device
    if device.device_type >= RPC_SESS_MASK:
        return rpc_session_of(device).empty(shape, dtype, device)  # type: ignore[no-any-return]
    device.check_supported()
    if mem_scope not in (None, "global"):
        raise ValueError(f"nd.empty: memory scope {mem_scope!r} is not supported on {device}")
    shape = _normalize_shape(shape, "nd.empty")
    dt, scalar_np = _parse_dtype(dtype)
    full_shape = shape if dt.lanes == 1 else shape + (dt.lanes,)
    count = math.prod(full_shape)
    storage = _aligned_buffer(count * scalar_np.itemsize)
    return NDArray(storage.view(scalar_np).reshape(full_shape), device, dt)


def array(obj: Any, device: Device | None = None, dtype: "str | DataType | None" = None) -> NDArray:
    """Copy ``obj`` (numpy array, NDArray, nested lists, scalar) into a new NDArray.

    Without ``dtype`` the numpy dtype of ``obj`` is kept (Python floats give float64, ints
    int64). With a vector ``dtype`` such as ``float32x4`` the last axis of ``obj`` holds the
    lanes. Raises TypeError for dtypes ember has no NDArray for (complex, strings, objects).
    On a device of an RPC session the data is copied to the server (a RemoteNDArray).
    """
    if device is not None and device.device_type >= RPC_SESS_MASK:
        return rpc_session_of(device).array(obj, device, dtype)  # type: ignore[no-any-return]
    if isinstance(obj, NDArray):
        if dtype is None:
            dtype = obj._dtype
        obj = obj._np
    dt, np_dt = (None, None) if dtype is None else _parse_dtype(dtype)
    src = np.asarray(obj, dtype=np_dt)
    if dt is None:
        name = _NP_NAME.get(src.dtype) or _NP_NAME.get(src.dtype.newbyteorder("="))
        if name is None:
            raise TypeError(f"nd.array: numpy dtype {src.dtype} is not supported; use one of "
                            f"{', '.join(SUPPORTED_DTYPES)}")
        dt = _parse_dtype(name)[0]
    shape = src.shape
    if dt.lanes > 1:
        if not shape or shape[-1] != dt.lanes:
            raise ValueError(f"nd.array: dtype {dt} needs a last axis of {dt.lanes} lanes, "
                             f"got shape {shape}")
        shape = shape[:-1]
    out = empty(shape, dt, device)
    np.copyto(out._np, src, casting="unsafe")
    return out


def _dltensor_view(addr: int, owner: Any) -> tuple[np.ndarray, DataType, Device]:
    """A numpy array (strided if the DLTensor is) over the memory of the ``DLTensor*`` at
    ``addr``, whose base keeps ``owner`` alive; plus the DataType and Device of the tensor."""
    if not addr:
        raise ValueError("NULL DLTensor*")
    dl = DLTensor.from_address(int(addr))
    dev = Device(dl.device.device_type, dl.device.device_id)
    if dev.device_type not in (DLDeviceType.CPU, DLDeviceType.CUDA_HOST):
        raise TVMError(f"cannot view memory on device {dev} from Python")
    if dl.ndim < 0:
        raise ValueError(f"negative ndim {dl.ndim}")
    try:
        dt = DataType.from_dl(dl.dtype.code, dl.dtype.bits, dl.dtype.lanes)
        scalar_np = DataType(dt.scalar).numpy_dtype
    except (ValueError, TypeError) as err:
        raise TVMError(f"unsupported DLDataType (code={dl.dtype.code}, bits={dl.dtype.bits}, "
                       f"lanes={dl.dtype.lanes}): {err}") from None
    shape = tuple(int(dl.shape[i]) for i in range(dl.ndim))
    full_shape = shape if dt.lanes == 1 else shape + (dt.lanes,)
    if int(np.prod(full_shape, dtype=np.int64)) == 0:
        return np.empty(full_shape, scalar_np), dt, cpu(dev.device_id)  # nothing to share
    ptr = (dl.data or 0) + int(dl.byte_offset)
    if not dl.data:
        raise TVMError(f"DLTensor of shape {shape} and dtype {dt} has a NULL data pointer")
    strides = None
    if dl.strides and dl.ndim:
        elem = scalar_np.itemsize * dt.lanes  # DLPack strides count elements, numpy's bytes
        strides = tuple(int(dl.strides[i]) * elem for i in range(dl.ndim))
        strides += (scalar_np.itemsize,) if dt.lanes > 1 else ()
    view = np.asarray(_MemoryView(ptr, full_shape, scalar_np, owner, strides))
    return view, dt, cpu(dev.device_id)


def from_dltensor_address(addr: int, owner: Any = None) -> NDArray:
    """A non-owning NDArray viewing the memory described by the ``DLTensor*`` at ``addr``.

    The FFI uses this when C hands a ``DLTensor*`` to a Python callback. Shape, dtype and data
    pointer are read from the struct now; the struct itself need not outlive the view, but the
    data must (``owner``, if given, is kept alive by the view for that purpose). Compact
    strides are accepted; other strides raise ValueError, as NDArrays are always contiguous.
    Raises TVMError for non-CPU memory and dtypes without a numpy equivalent.
    """
    try:
        view, dt, dev = _dltensor_view(addr, owner)
    except (ValueError, TVMError) as err:
        raise type(err)(f"from_dltensor_address: {err}") from None
    if not view.flags.c_contiguous:
        dl = DLTensor.from_address(int(addr))
        strides = tuple(int(dl.strides[i]) for i in range(dl.ndim))
        raise ValueError(f"from_dltensor_address: non-contiguous DLTensor (shape "
                         f"{view.shape}, strides {strides}) cannot be viewed as an NDArray")
    return NDArray(view, dev, dt, owner=owner if owner is not None else _NON_OWNING)


# A marker owner for views whose memory the caller guarantees (``is_view`` is True).
_NON_OWNING = object()

from .dlpack import from_dlpack  # noqa: E402,F401  (dlpack.py needs NDArray defined above)
