"""DLPack exchange with numpy and any other producer/consumer of "dltensor" capsules.

Ownership, both ways, is handled by numpy's C implementation of DLPack rather than by ctypes
callbacks. The reason: a DLPack deleter or capsule destructor runs while an object is being
deallocated, and that can happen while an exception is propagating (``[arr.__dlpack__(),
1 / 0]`` drops the capsule during unwinding). A ctypes Python callback run at that moment
returns with the exception still set, CPython turns that into a SystemError, the unraisable
hook clears the in-flight exception and the interpreter crashes. numpy's deleters are C and
call no Python code, so they are safe there; all ember adds is a holder object in the
numpy base chain that keeps the NDArray (or the foreign producer) alive.

Export (``NDArray.__dlpack__``): a numpy array is built over the NDArray's memory with a
``_MemoryView`` holding the NDArray as its base; its ``__dlpack__`` capsule ("dltensor")
holds a DLManagedTensor whose ``manager_ctx`` references that array, so the NDArray stays
alive until the consumer calls the deleter. A capsule dropped unconsumed is released by the
capsule destructor, which calls the deleter only while the name is still "dltensor"
(a consumer renames it "used_dltensor" and owns the deleter from then on).

Import (``from_dlpack``): an unversioned "dltensor" capsule (what ``__dlpack__()`` returns
by default) is consumed here: renamed "used_dltensor", and its deleter called by the
``__del__`` of an owner object in the numpy base chain of the view. ``__del__`` is safe where
ctypes callbacks are not, because tp_finalize saves and restores the in-flight exception.
Versioned capsules, and producers that can only export versioned ones (read-only numpy
arrays), go through ``numpy.from_dlpack``, which honours the read-only flag. ember wraps the
result zero-copy when it is C-contiguous and writable, and copies it into fresh 64-byte
aligned storage otherwise (see ``from_dlpack``).
"""
from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

from ._abi import DLManagedTensor
from .device import cpu
from .dtype import DataType
from .errors import TVMError
from .ndarray import SUPPORTED_DTYPES, NDArray, _dltensor_view, _MemoryView, array

_PyCapsule_IsValid = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_IsValid", ctypes.pythonapi))
_PyCapsule_GetPointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi))
_PyCapsule_SetName = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_void_p)(
    ("PyCapsule_SetName", ctypes.pythonapi))
_MANAGED_PTR = ctypes.POINTER(DLManagedTensor)
_CapsuleType = type(np.empty(0).__dlpack__())
# A capsule keeps a pointer to its name, so the name must never be freed: not even at shutdown.
_USED_NAME = ctypes.create_string_buffer(b"used_dltensor")
ctypes.pythonapi.Py_IncRef(ctypes.py_object(_USED_NAME))


def export_capsule(arr: NDArray, *, stream: Any = None, max_version: Any = None,
                   dl_device: Any = None, copy: bool | None = None) -> Any:
    """The DLPack capsule of ``arr`` (implements ``NDArray.__dlpack__``).

    ``stream`` must be None (or -1) for CPU arrays; ``dl_device`` may only ask for the array's
    own device; ``copy=True`` exports a fresh copy. Vector dtypes (lanes > 1) raise
    BufferError since DLPack consumers such as numpy cannot represent them.
    """
    if stream is not None and stream != -1:
        raise BufferError(f"NDArray.__dlpack__: stream must be None for {arr.device}, "
                          f"got {stream!r}")
    if dl_device is not None and tuple(dl_device) != arr.__dlpack_device__():
        raise BufferError(f"NDArray.__dlpack__: cannot export an array on {arr.device} to "
                          f"DLPack device {tuple(dl_device)}")
    if arr._dtype.lanes != 1:
        raise BufferError(f"NDArray.__dlpack__: vector dtype {arr.dtype} has no DLPack form "
                          "numpy understands; use arr.numpy() instead")
    if copy:
        arr = array(arr)
    view = np.asarray(_MemoryView(arr.data_ptr, arr._np.shape, arr._np.dtype, arr))
    kwargs = {"max_version": max_version} if max_version is not None else {}
    try:
        return view.__dlpack__(**kwargs)
    except TypeError:  # numpy 1.x: no max_version keyword
        return view.__dlpack__()


class _CapsuleSource:
    """Lets ``numpy.from_dlpack`` consume a raw capsule (it wants an object with __dlpack__)."""

    __slots__ = ("capsule",)

    def __init__(self, capsule: Any) -> None:
        self.capsule = capsule

    def __dlpack__(self, **_: Any) -> Any:
        return self.capsule

    def __dlpack_device__(self) -> tuple[int, int]:
        return (1, 0)  # numpy checks the device recorded in the tensor itself


class _ManagedTensorOwner:
    """Owns a consumed DLManagedTensor and calls its deleter when the last view of it dies.

    ``__del__`` runs through CPython's tp_finalize, which saves and restores an in-flight
    exception, so calling the producer's deleter from here is safe during unwinding (unlike a
    ctypes callback invoked directly by C).
    """

    __slots__ = ("ptr",)

    def __init__(self, ptr: int) -> None:
        self.ptr = ptr

    # Defaults bind the helpers, which may already be gone from the module at shutdown.
    def __del__(self, _managed: Any = DLManagedTensor, _cast: Any = ctypes.cast,
                _ptr_type: Any = _MANAGED_PTR) -> None:
        ptr, self.ptr = self.ptr, 0
        if ptr:
            deleter = _managed.from_address(ptr).deleter
            if deleter:
                deleter(_cast(ptr, _ptr_type))


def _consume_unversioned(capsule: Any) -> np.ndarray:
    """Take ownership of a "dltensor" capsule (DLPack < 1.0: writable by convention)."""
    ptr = _PyCapsule_GetPointer(capsule, b"dltensor")
    owner = _ManagedTensorOwner(ptr)
    if _PyCapsule_SetName(capsule, _USED_NAME) != 0:  # from now on the deleter is ours to call
        owner.ptr = 0
        raise BufferError("from_dlpack: could not mark the capsule as consumed")
    # dl_tensor is the first member of DLManagedTensor, so ptr is also the DLTensor*.
    view, _, _ = _dltensor_view(ptr, owner)
    return view


def _consume(obj: Any) -> np.ndarray:
    """A numpy array over ``obj``'s DLPack tensor that owns the producer's DLManagedTensor."""
    if isinstance(obj, _CapsuleType):
        capsule = obj
    elif hasattr(obj, "__dlpack__"):
        try:
            capsule = obj.__dlpack__()
        except BufferError:
            # e.g. a read-only numpy array, exportable only as a versioned (flagged) capsule
            capsule = None
    else:
        raise TypeError(f"from_dlpack: expected an object with __dlpack__ (e.g. a numpy array) "
                        f"or a DLPack capsule, got {type(obj).__name__}")
    try:
        if capsule is not None and _PyCapsule_IsValid(capsule, b"dltensor"):
            return _consume_unversioned(capsule)
        if capsule is None:
            return np.from_dlpack(obj)
        if _PyCapsule_IsValid(capsule, b"dltensor_versioned"):
            return np.from_dlpack(_CapsuleSource(capsule))
    except (BufferError, TVMError, ValueError) as err:
        raise BufferError(f"from_dlpack: {err}") from None
    raise ValueError("from_dlpack: the capsule was already consumed or is not a DLPack "
                     "capsule (its name is not 'dltensor' / 'dltensor_versioned')")


def from_dlpack(obj: Any, *, copy: bool | None = None) -> NDArray:
    """An NDArray from a DLPack producer (numpy array, NDArray, torch tensor...) or capsule.

    Zero-copy policy: with ``copy=None`` (default) the result shares memory with the producer
    (which stays alive as long as the NDArray does) when the tensor is C-contiguous and
    writable; otherwise the data is copied into new 64-byte aligned storage. A shared array
    keeps the producer's alignment, which may be less than 64 bytes (see
    ``NDArray.is_aligned``). ``copy=True`` always copies; ``copy=False`` never does and raises
    BufferError when sharing is impossible.
    """
    view = _consume(obj)
    if view.dtype.name not in SUPPORTED_DTYPES:
        raise TypeError(f"from_dlpack: dtype {view.dtype} is not supported by ember NDArray "
                        f"(supported: {', '.join(SUPPORTED_DTYPES)})")
    shareable = view.flags.c_contiguous and view.flags.writeable
    if copy is True or (copy is None and not shareable):
        return array(view)
    if not shareable:
        why = "not C-contiguous" if not view.flags.c_contiguous else "read-only"
        raise BufferError(f"from_dlpack: copy=False but the tensor is {why} (shape {view.shape})")
    return NDArray(view, cpu(0), DataType(view.dtype.name), owner=view)


def to_dlpack(arr: NDArray) -> Any:
    """The DLPack capsule of ``arr`` (same as ``arr.__dlpack__()``)."""
    return export_capsule(arr)
