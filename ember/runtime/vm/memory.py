"""VM memory: storage blocks, tensors carved from them, and the allocators behind them.

``alloc_storage`` asks an allocator for a :class:`Storage` (a byte buffer); ``alloc_tensor``
carves an NDArray out of it at an offset, without copying. A buffer goes back to its
allocator only when nothing views it any more: the Storage, every tensor carved from it and
every numpy array made from those tensors all keep one small keeper object alive (it is the
numpy base of all of them), and the keeper's finaliser returns the buffer. So a result that
the caller still holds (even as ``np.asarray(result)``) is never handed out again.

:class:`PooledAllocator` (the default) keeps returned buffers in free lists keyed by
(device, alignment, size class) and reuses them: once a model has run, running it again
takes every buffer from the pool. ``fresh_allocations`` counts the buffers that were not.
"""
from __future__ import annotations

import ctypes
import os
from typing import Any

import numpy as np

from .._abi import DLTensor
from ..device import Device
from ..dtype import DataType
from ..errors import ArgumentError, TVMError
from ..ndarray import ALIGNMENT, NDArray

MIN_BLOCK = 64


def physical_memory() -> int:
    """Bytes of RAM of this machine (2**48 where the OS does not say)."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):
        return 1 << 48


def size_class(nbytes: int) -> int:
    """The pool bucket for a request of ``nbytes``: at least 64, then quarter steps between
    powers of two (1024, 1280, 1536, 1792, 2048, 2560...), so at most 25% is wasted."""
    if nbytes <= MIN_BLOCK:
        return MIN_BLOCK
    step = (1 << (nbytes - 1).bit_length()) // 8
    return -(-nbytes // step) * step


# A buffer: (uint8 array, its __array_interface__); the interface is made once per buffer,
# as asking numpy for the data pointer costs microseconds.
Buffer = tuple[np.ndarray, dict[str, Any]]


def _raw_buffer(nbytes: int, alignment: int) -> Buffer:
    """A fresh uint8 buffer of ``nbytes`` whose address is a multiple of ``alignment``."""
    align = max(alignment, ALIGNMENT)
    raw = np.empty(nbytes + align, dtype=np.uint8)
    start = (-raw.ctypes.data) % align
    raw = raw[start:start + nbytes]
    return raw, {"data": (raw.ctypes.data, False), "shape": raw.shape, "typestr": "|u1",
                 "version": 3}


class _Keeper:
    """The numpy base of every view of one buffer; returns the buffer when it dies."""

    __slots__ = ("buf", "home", "key", "__array_interface__")

    def __init__(self, buf: Buffer, home: Allocator, key: tuple[Any, ...],
                 interface: dict[str, Any] | None = None) -> None:
        self.buf, self.home, self.key = buf, home, key
        self.__array_interface__ = interface or buf[1]

    def __del__(self) -> None:
        try:
            self.home._give_back(self.key, self.buf)
        except Exception:  # interpreter shutdown: module globals may already be gone
            pass


class Storage:
    """A block of ``nbytes`` bytes on ``device`` from which tensors are carved."""

    __slots__ = ("arr", "ptr", "nbytes", "alignment", "device", "dtype_hint", "__weakref__")

    def __init__(self, keeper: _Keeper, nbytes: int, alignment: int, device: Device,
                 dtype_hint: str) -> None:
        self.arr = np.asarray(keeper)  # base: the keeper
        self.ptr = keeper.buf[1]["data"][0]
        self.nbytes, self.alignment = nbytes, alignment
        self.device, self.dtype_hint = device, dtype_hint

    def check(self, offset: int, nbytes: int, what: str) -> None:
        """Raise TVMError unless bytes [offset, offset + nbytes) lie inside this block."""
        if offset < 0 or offset + nbytes > self.nbytes:
            raise TVMError(f"{what}: a tensor of {nbytes} bytes at offset {offset} does not fit "
                           f"in a storage block of {self.nbytes} bytes")

    def tensor(self, offset: int, shape: tuple[int, ...], dtype: str) -> NDArray:
        """An NDArray of ``shape``/``dtype`` viewing this block at byte ``offset``."""
        dt = DataType(dtype)
        np_dtype = dt.numpy_dtype
        nbytes = int(np.prod(shape, dtype=np.int64)) * np_dtype.itemsize
        self.check(offset, nbytes, "alloc_tensor")
        view = np.ndarray(shape, np_dtype, self.arr, offset)
        shape_arr = (ctypes.c_int64 * max(len(shape), 1))(*shape)
        template = dltensor_template(shape_arr, len(shape), self.device, dt)
        return fast_ndarray(view, self.ptr + offset, template, shape_arr, self.device, dt)

    def __repr__(self) -> str:
        return f"Storage({self.nbytes} bytes, {self.device}, align {self.alignment})"


class Allocator:
    """Base allocator: every request gets a fresh buffer; counts them."""

    kind = "naive"
    # No block may exceed this: a size beyond the machine's memory comes from a shape computed
    # from a wrongly-shaped argument (or a corrupt program), and with overcommit numpy could
    # even hand out such a block and let the kernel writing it take the process down.
    max_block_bytes = physical_memory()

    def __init__(self) -> None:
        self.fresh_allocations = 0  # buffers obtained from the system
        self.fresh_bytes = 0
        self.requests = 0

    def alloc(self, nbytes: int, alignment: int, device: Device, dtype_hint: str = "uint8"
              ) -> Storage:
        """A Storage of ``nbytes`` bytes aligned to ``alignment`` on ``device``."""
        if nbytes < 0:
            raise TVMError(f"alloc_storage: negative size {nbytes}")
        if nbytes > self.max_block_bytes:
            raise TVMError(f"alloc_storage: {nbytes} bytes requested, more than this machine's "
                           f"{self.max_block_bytes} bytes of memory (a size computed from a "
                           "wrongly-shaped argument?)")
        if device.device_type != 1:  # the CPU (kDLCPU)
            device.check_supported()
        key = self.block_key(nbytes, alignment, device)
        buf = self._buffer(key, nbytes, device)
        return Storage(_Keeper(buf, self, key), nbytes, alignment, device, dtype_hint)

    def _buffer(self, key: tuple[Any, ...], nbytes: int, device: Device) -> Buffer:
        """A buffer of size class ``key[3]``: from the pool, else fresh."""
        self.requests += 1
        buf = self._take(key)
        if buf is None:
            try:
                buf = _raw_buffer(key[3], key[2])
            except (MemoryError, ValueError) as err:
                raise TVMError(f"alloc_storage: cannot allocate {nbytes} bytes on {device}: "
                               f"{err}") from None
            self.fresh_allocations += 1
            self.fresh_bytes += key[3]
        return buf

    @staticmethod
    def block_key(nbytes: int, alignment: int, device: Device) -> tuple[Any, ...]:
        """The pool key of a block (what ``alloc_array`` takes)."""
        return (device.device_type, device.device_id, alignment, size_class(nbytes))

    def alloc_array(self, key: tuple[Any, ...], nbytes: int, device: Device, offset: int,
                    shape: tuple[int, ...], typestr: str) -> tuple[np.ndarray, int]:
        """A block as ``alloc`` gives it (same accounting), seen as one numpy array of
        ``shape``/``typestr`` at byte ``offset``, and the block's address: a static plan's
        result, without a Storage and a second view per run. The block returns when the array
        and every view of it are gone. The size and device were checked when the plan was
        made."""
        buf = self._buffer(key, nbytes, device)
        ptr = buf[1]["data"][0]
        keeper = _Keeper(buf, self, key, {"data": (ptr + offset, False), "shape": shape,
                                          "typestr": typestr, "version": 3})
        return np.asarray(keeper), ptr

    def _take(self, key: tuple[Any, ...]) -> Buffer | None:
        return None

    def _give_back(self, key: tuple[Any, ...], buf: Buffer) -> None:
        pass

    def stats(self) -> dict[str, int]:
        """Counters: requests, fresh allocations and bytes, and (pools) bytes held free."""
        return {"requests": self.requests, "fresh_allocations": self.fresh_allocations,
                "fresh_bytes": self.fresh_bytes}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.stats()})"


NaiveAllocator = Allocator


class PooledAllocator(Allocator):
    """Reuses buffers: free lists keyed by (device type, device id, alignment, size class)."""

    kind = "pooled"

    def __init__(self) -> None:
        super().__init__()
        self._free: dict[tuple[Any, ...], list[Buffer]] = {}

    def _take(self, key: tuple[Any, ...]) -> Buffer | None:
        free = self._free.get(key)
        return free.pop() if free else None  # list.pop is atomic: safe against finalisers

    def _give_back(self, key: tuple[Any, ...], buf: Buffer) -> None:
        self._free.setdefault(key, []).append(buf)

    @property
    def free_bytes(self) -> int:
        """Bytes held in the free lists."""
        return sum(key[3] * len(bufs) for key, bufs in list(self._free.items()))

    def release_all(self) -> None:
        """Drop every free buffer (live blocks are unaffected and return later)."""
        self._free.clear()

    def stats(self) -> dict[str, int]:
        return {**super().stats(), "free_bytes": self.free_bytes}


def make_allocator(memory_cfg: str | Allocator | None) -> Allocator:
    """The allocator for ``VirtualMachine(memory_cfg=...)``: "pooled" (default) or "naive"."""
    if isinstance(memory_cfg, Allocator):
        return memory_cfg
    if memory_cfg in (None, "pooled"):
        return PooledAllocator()
    if memory_cfg == "naive":
        return NaiveAllocator()
    raise ArgumentError(f"memory_cfg must be 'pooled', 'naive' or an Allocator, got "
                        f"{memory_cfg!r}")


# ---- building NDArrays without the general constructor ---------------------------------------
_new = NDArray.__new__
_copy_dltensor = DLTensor.from_buffer_copy
# The fast path below sets NDArray's slots itself and copies the DLTensor from a template
# (5x cheaper than NDArray.__init__, which builds the DLTensor field by field and asks numpy
# for the data pointer); it is used only while the slots are the ones it knows.
_FAST = set(NDArray.__slots__) == {"_np", "_dl", "_dl_addr", "_shape_arr", "_device", "_dtype",
                                   "_owner", "__weakref__"}


def dltensor_template(shape_arr: Any, ndim: int, device: Device, dt: DataType) -> bytes:
    """The bytes of a DLTensor with a NULL data pointer, for ``fast_ndarray``."""
    return bytes(DLTensor(None, device.to_dl(), ndim, dt.to_dl(), shape_arr, None, 0))


def fast_ndarray(view: np.ndarray, ptr: int, template: bytes, shape_arr: Any, device: Device,
                 dt: DataType) -> NDArray:
    """An NDArray over ``view`` (a C-contiguous array whose data starts at ``ptr``), its
    DLTensor copied from ``template`` (whose shape pointer is ``shape_arr``: an int64 ctypes
    array that the NDArray keeps alive; it may be shared, it is never written)."""
    if not _FAST:
        return NDArray(view, device, dt)
    t = _new(NDArray)
    t._np = view
    t._device = device
    t._dtype = dt
    t._owner = None
    t._shape_arr = shape_arr
    t._dl = dl = _copy_dltensor(template)
    dl.data = ptr
    t._dl_addr = ctypes.addressof(dl)
    return t
