"""Device: a (device_type, device_id) pair. Only the CPU has a backend; others are named
and refused with a clear error when memory is asked of them.

A device of an RPC session (``session.cpu(0)``) carries the session in its type, as the
Relay-era runtime encodes it: ``device_type = base_type + RPC_SESS_MASK * (index + 1)``;
``str()`` gives ``remote[index]:cpu(0)``, and arrays on it live on the server.
"""
from __future__ import annotations

import itertools
import weakref
from typing import Any

from ._abi import DLDevice, DLDeviceType
from .errors import TVMError

RPC_SESS_MASK = 128
_RPC_SESSIONS: weakref.WeakValueDictionary[int, Any] = weakref.WeakValueDictionary()
_RPC_INDEX = itertools.count()

_NAME2TYPE = {"cpu": 1, "llvm": 1, "c": 1, "stackvm": 1, "cuda": 2, "gpu": 2, "nvptx": 2,
              "cuda_host": 3, "cl": 4, "opencl": 4, "aocl": 5, "aocl_sw_emu": 5, "sdaccel": 6,
              "vulkan": 7, "spirv": 7, "metal": 8, "mtl": 8, "vpi": 9, "rocm": 10,
              "ext_dev": 12, "webgpu": 15, "hexagon": 16}
_TYPE2NAME = {1: "cpu", 2: "cuda", 3: "cuda_host", 4: "opencl", 5: "aocl", 6: "sdaccel",
              7: "vulkan", 8: "metal", 9: "vpi", 10: "rocm", 12: "ext_dev", 15: "webgpu",
              16: "hexagon"}
# What a device attribute query answers on the CPU (the Relay-era runtime's CPU answers only
# ``exist``; the others are GPU properties, None on the CPU).
_GPU_ATTRIBUTES = ("max_threads_per_block", "warp_size", "max_shared_memory_per_block",
                   "compute_version", "max_clock_rate", "multi_processor_count",
                   "max_thread_dimensions", "max_registers_per_block", "gcn_arch",
                   "api_version", "driver_version", "l2_cache_size_bytes",
                   "total_global_memory")


class Device:
    """A device. ``ember.cpu(0)``; ``ember.device("cpu", 0)``; ``Device.exist`` is True only
    for devices ember can run on (the CPU)."""

    __slots__ = ("device_type", "device_id")
    kDLCPU, kDLCUDA, kDLOpenCL, kDLVulkan = 1, 2, 4, 7
    kDLMetal, kDLVPI, kDLROCM, kDLExtDev, kDLWebGPU, kDLHexagon = 8, 9, 10, 12, 15, 16
    MASK2STR = dict(_TYPE2NAME)
    STR2MASK = dict(_NAME2TYPE)

    def __init__(self, device_type: int, device_id: int = 0) -> None:
        self.device_type = int(device_type)
        self.device_id = int(device_id)

    @property
    def exist(self) -> bool:
        return self.device_type % RPC_SESS_MASK == DLDeviceType.CPU

    @property
    def device_name(self) -> str:
        base = self.device_type % RPC_SESS_MASK
        return _TYPE2NAME.get(base, f"device_type{base}")

    def check_supported(self) -> None:
        """Raise unless ember can allocate on this device in this process."""
        if self.device_type >= RPC_SESS_MASK:
            raise TVMError(f"device {self} is a device of an RPC session: its memory lives on "
                           "the server (make arrays with ember.nd.array(x, device=dev), run "
                           "modules loaded with session.load_module)")
        if self.device_type != DLDeviceType.CPU:
            raise TVMError(f"device {self} is not supported: ember runs on the CPU only "
                           "(use ember.cpu(0))")

    def __getattr__(self, name: str) -> Any:
        # The GPU properties of the Relay-era Device (``dev.compute_version``...): None on
        # the CPU, as there; on another device ember cannot ask, and says so.
        if name not in _GPU_ATTRIBUTES:
            raise AttributeError(f"'Device' object has no attribute {name!r}")
        if self.device_type % RPC_SESS_MASK == DLDeviceType.CPU:
            return None
        raise TVMError(f"device {self}: cannot read {name}: ember has no {self.device_name} "
                       "backend (it runs on the CPU only; dev.exist is False here, check it "
                       "before asking a device for its properties)")

    def sync(self) -> None:
        """Wait for pending work on the device (a no-op on the CPU)."""

    def to_dl(self) -> DLDevice:
        return DLDevice(self.device_type, self.device_id)

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Device) and self.device_type == other.device_type
                and self.device_id == other.device_id)

    def __hash__(self) -> int:
        return hash((self.device_type, self.device_id))

    def __repr__(self) -> str:
        prefix = ""
        if self.device_type >= RPC_SESS_MASK:
            prefix = f"remote[{self.device_type // RPC_SESS_MASK - 1}]:"
        return f"{prefix}{self.device_name}({self.device_id})"

    def __reduce__(self) -> tuple[type, tuple[int, int]]:
        return (Device, (self.device_type, self.device_id))


# ---- devices of RPC sessions ----------------------------------------------------------------
def register_rpc_session(session: Any) -> int:
    """A new session index (devices of ``session`` carry it); the table holds it weakly."""
    index = next(_RPC_INDEX)
    _RPC_SESSIONS[index] = session
    return index


def rpc_session_of(dev: Device) -> Any:
    """The RPC session of a remote device, None for a local one; TVMError if it is closed."""
    if dev.device_type < RPC_SESS_MASK:
        return None
    index = dev.device_type // RPC_SESS_MASK - 1
    session = _RPC_SESSIONS.get(index)
    if session is None:
        raise TVMError(f"device {dev}: its RPC session is closed")
    return session


def device(dev_type: "str | int", dev_id: int = 0) -> Device:
    """``device("cpu", 0)`` or ``device("cuda -arch=sm_80")``: the Device for a name or type."""
    if isinstance(dev_type, Device):
        return dev_type
    if isinstance(dev_type, int):
        return Device(dev_type, dev_id)
    name = str(dev_type).split()[0].lower() if str(dev_type).strip() else ""
    if name not in _NAME2TYPE:
        raise ValueError(f"unknown device {dev_type!r}; known: {', '.join(sorted(_NAME2TYPE))}")
    return Device(_NAME2TYPE[name], dev_id)


def cpu(dev_id: int = 0) -> Device:
    return Device(1, dev_id)


def cuda(dev_id: int = 0) -> Device:
    return Device(2, dev_id)


def opencl(dev_id: int = 0) -> Device:
    return Device(4, dev_id)


def vulkan(dev_id: int = 0) -> Device:
    return Device(7, dev_id)


def metal(dev_id: int = 0) -> Device:
    return Device(8, dev_id)


def rocm(dev_id: int = 0) -> Device:
    return Device(10, dev_id)


def ext_dev(dev_id: int = 0) -> Device:
    return Device(12, dev_id)


def vpi(dev_id: int = 0) -> Device:
    return Device(9, dev_id)


def webgpu(dev_id: int = 0) -> Device:
    return Device(15, dev_id)


def hexagon(dev_id: int = 0) -> Device:
    return Device(16, dev_id)


gpu = cuda
cl = opencl
mtl = metal

# Device kinds ember has no backend for (``enabled`` answers False for each).
_NO_BACKEND = ("cuda", "gpu", "nvptx", "cl", "opencl", "aocl", "sdaccel", "vulkan", "metal",
               "rocm", "vpi", "ext_dev", "webgpu", "hexagon", "stackvm")


def enabled(target: Any) -> bool:
    """Whether ember can build and run code for ``target`` here (``tvm.runtime.enabled``):
    "cpu" and "rpc" always, "llvm" and "c" when a C compiler is found (ember compiles them
    through C), device targets never. ValueError names the known targets for anything else."""
    kind = str(target).split()[0] if str(target).strip() else ""
    if kind in ("cpu", "rpc"):
        return True
    if kind in ("llvm", "c"):
        from ..testing import find_c_compiler

        return find_c_compiler() is not None
    if kind in _NO_BACKEND:
        return False
    raise ValueError(f"enabled: unknown target {target!r}; known: cpu, rpc, llvm, c, "
                     f"{', '.join(_NO_BACKEND)}")
