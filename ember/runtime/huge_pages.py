"""A model's constants in one block of host memory on transparent huge pages.

A kernel that streams a weight from L3 or memory (a GEMM of a few rows: a transformer at a
short sequence, a batch-1 dense layer) walks the page tables once every 4 KiB of it when the
weight lies on ordinary pages: about 1,800 pages for BERT-mini's 7 MiB of weights, which
overflow the second-level TLB at every call. On 2 MiB pages the same weights take four TLB
entries. Measured on one Sapphire Rapids core (1 thread, thread time): BERT (hidden 256, two
layers) at 1x16 spent 25% more in its GEMM tiles on the VM, whose constants were one numpy
allocation each, than in the AOT build, whose constant pool was one allocation of more than
4 MiB (which numpy advises for huge pages by itself); with the VM's constants packed here
the two run the same (dynamic/static 1.11 -> 1.02).

:func:`pack` copies arrays into one block; :func:`buffer` is that block: from
``HUGE_PAGE_BYTES`` on it is aligned to a huge page, rounded up to whole ones and advised
with ``madvise(MADV_HUGEPAGE)`` (Linux; elsewhere, or where the kernel refuses, the block is
ordinary memory and everything works the same, only slower to stream). Smaller blocks stay
on ordinary pages: their pages fit the TLB, and a huge page would make them resident at
2 MiB.
"""
from __future__ import annotations

import ctypes
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

from .ndarray import ALIGNMENT, NDArray

HUGE_PAGE_BYTES = 2 << 20  # x86-64 and AArch64 (4 KiB base pages)
_MADV_HUGEPAGE = 14  # <sys/mman.h> on Linux, every architecture


def _madvise() -> Any:
    """libc's madvise, or None off Linux or without it."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        fn = ctypes.CDLL(None, use_errno=True).madvise
    except (OSError, AttributeError):
        return None
    fn.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    fn.restype = ctypes.c_int
    return fn


_MADVISE = _madvise()


def _at(raw: np.ndarray, offset: int, nbytes: int) -> np.ndarray:
    # not raw[offset:offset + nbytes]: numpy leaves the pointer of an empty slice unmoved
    return np.ndarray((nbytes,), dtype=np.uint8, buffer=raw, offset=offset)


def buffer(nbytes: int, alignment: int = ALIGNMENT) -> np.ndarray:
    """A uint8 array of ``nbytes`` whose address is a multiple of ``alignment`` (at least
    ALIGNMENT); from ``HUGE_PAGE_BYTES`` on, the start of huge pages advised as such (the
    block behind it a whole number of them long)."""
    if nbytes < HUGE_PAGE_BYTES or alignment > HUGE_PAGE_BYTES:
        align = max(alignment, ALIGNMENT)
        raw = np.empty(nbytes + align, np.uint8)
        return _at(raw, (-raw.ctypes.data) % align, nbytes)
    size = -(-nbytes // HUGE_PAGE_BYTES) * HUGE_PAGE_BYTES
    raw = np.empty(size + HUGE_PAGE_BYTES, np.uint8)
    start = (-raw.ctypes.data) % HUGE_PAGE_BYTES
    if _MADVISE is not None:
        # advice only: a kernel without THP (or with it off) answers EINVAL, and the block
        # stays on ordinary pages
        _MADVISE(raw.ctypes.data + start, size, _MADV_HUGEPAGE)
    return _at(raw, start, nbytes)


def _packable(value: Any) -> bool:
    return type(value) is NDArray and value.device.device_type == 1


def pack(values: Sequence[Any]) -> list[Any]:
    """``values`` with each host NDArray replaced by a copy in one shared :func:`buffer`
    (ALIGNMENT-aligned each, in order); anything else (None, arrays on other devices) is kept
    as it is. The copies keep the block alive."""
    sizes = [v._np.nbytes if _packable(v) else 0 for v in values]
    slots = [-(-max(s, 1) // ALIGNMENT) * ALIGNMENT for s in sizes]
    block = buffer(sum(slot for slot, v in zip(slots, values) if _packable(v)))
    out, offset = [], 0
    for value, size, slot in zip(values, sizes, slots):
        if not _packable(value):
            out.append(value)
            continue
        src = value._np
        view = _at(block, offset, size).view(src.dtype).reshape(src.shape)
        view[...] = src
        out.append(NDArray(view, value.device, value._dtype))
        offset += slot
    return out
