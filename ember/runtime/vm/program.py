"""The data of a VM executable: functions, constants, kernel names, devices.

``Program`` is plain data, shared by the verifier, the serialiser, the listing and the
interpreter; ``Executable`` (executable.py) is the user-facing object around it.
"""
from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..device import Device, cpu
from ..huge_pages import pack
from ..ndarray import NDArray
from .instructions import Instruction


@dataclass(frozen=True)
class TensorInfo:
    """The declared type of a tensor parameter: ``dtype`` and ``shape`` (-1 = any extent)."""

    dtype: str
    shape: tuple[int, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", tuple(operator.index(d) for d in self.shape))

    def matches(self, arr: NDArray) -> bool:
        """Whether ``arr`` has this dtype and a shape this one allows."""
        if arr.dtype != self.dtype or len(arr.shape) != len(self.shape):
            return False
        return all(want < 0 or want == got for want, got in zip(self.shape, arr.shape))

    def __str__(self) -> str:
        return f"{self.dtype}[{', '.join('?' if d < 0 else str(d) for d in self.shape)}]"


@dataclass(frozen=True)
class ListInfo:
    """A parameter of a list type (``List[A] { Cons(A, List[A]), Nil }``): a Python list
    passed for it is turned into the Cons/Nil ADT chain with these constructor tags."""

    cons_tag: int
    nil_tag: int

    def to_adt(self, items: "list[Any] | tuple[Any, ...]", convert: "Callable[[Any], Any]") -> Any:
        from ..container import ADT

        value = ADT(self.nil_tag, [])
        for item in reversed(items):
            value = ADT(self.cons_tag, [convert(item), value])
        return value

    def __str__(self) -> str:
        return f"List[cons={self.cons_tag}, nil={self.nil_tag}]"


@dataclass(frozen=True)
class VMFunction:
    """One function of the program.

    ``params`` are the parameter names (registers ``$0 .. $n-1`` on entry);
    ``register_file_size`` is the number of registers of a frame; ``param_types`` optionally
    gives a TensorInfo (or None for non-tensor params) per parameter, checked on ``invoke``.
    """

    name: str
    params: tuple[str, ...]
    instructions: tuple[Instruction, ...]
    register_file_size: int
    param_device_indexes: tuple[int, ...] = ()
    param_types: tuple[TensorInfo | ListInfo | None, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "params", tuple(self.params))
        object.__setattr__(self, "instructions", tuple(self.instructions))
        object.__setattr__(self, "param_device_indexes",
                           tuple(self.param_device_indexes) or (0,) * len(self.params))
        object.__setattr__(self, "param_types", tuple(self.param_types))

    @property
    def arity(self) -> int:
        return len(self.params)


@dataclass
class Program:
    """Everything an executable holds except the kernel library.

    ``constants[i]`` is None while constant ``i`` is late-bound and not loaded yet.
    ``primitive_ops[k]`` names the kernel that ``invoke_packed PackedFunc[k]`` calls.
    ``value_kernels``: kernel index -> the positions of the arguments it reads only for their
    shape, for the kernels a plan may run once per input signature (pure ones: the compiler's
    ``relay/backend/vm/value_kernels.py``); a kernel not listed runs on every call.
    ``concat_kernels``: kernel index -> its params in output order, for the kernels that
    only concatenate them into one byte range each (``memory_alloc.run_time_concat_order``):
    a plan may drop such a call and have the parts written in place (``plan_concat.py``).
    """

    functions: list[VMFunction]
    constants: list[NDArray | None] = field(default_factory=list)
    primitive_ops: list[str] = field(default_factory=list)
    virtual_devices: list[Device] = field(default_factory=lambda: [cpu(0)])
    host_device_index: int = 0
    const_device_indexes: list[int] = field(default_factory=list)
    value_kernels: dict[int, tuple[int, ...]] = field(default_factory=dict)
    concat_kernels: dict[int, tuple[int, ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.functions = list(self.functions)
        # in one block on huge pages: a kernel streaming a weight from L3 or memory walks the
        # page tables every 4 KiB of it otherwise (huge_pages.py)
        self.constants = pack(list(self.constants))
        self.primitive_ops = [str(p) for p in self.primitive_ops]
        self.virtual_devices = list(self.virtual_devices)
        if not self.const_device_indexes:
            self.const_device_indexes = [self.host_device_index] * len(self.constants)

    @property
    def global_map(self) -> dict[str, int]:
        """Function name -> index."""
        return {f.name: i for i, f in enumerate(self.functions)}

    def function(self, name: str) -> tuple[int, VMFunction]:
        """(index, function) by name; KeyError listing the functions if there is none."""
        for i, func in enumerate(self.functions):
            if func.name == name:
                return i, func
        raise KeyError(f"the executable has no function {name!r}; its functions are "
                       f"{', '.join(repr(f.name) for f in self.functions) or '(none)'}")


def as_constants(values: Sequence[Any]) -> list[NDArray | None]:
    """Constants as NDArrays (numpy arrays and scalars are copied into new ones)."""
    from ..ndarray import array

    return [v if v is None or isinstance(v, NDArray) else array(v) for v in values]
