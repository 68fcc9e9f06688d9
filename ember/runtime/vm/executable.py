"""The VM executable: a verified Program plus the kernel library it calls.

``ExecutableModule`` is the runtime Module form (type key ``vm_exec``): the program, with the
kernel library as its import, so ``exe.mod.export_library("vm.so")`` writes one file and
``load_module("vm.so")`` gives it back. ``Executable`` is the Relay-era Python interface
around it (``bytecode``, ``globals``, ``save``, ``load_exec``...).
"""
from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..device import Device, cpu
from ..errors import TVMError
from ..module import Module
from ..ndarray import NDArray
from ..packed_func import PackedFunc, as_packed_func
from ..params import load_param_dict, save_param_dict
from ..registry import register_func
from .assembler import format_functions, parse_functions
from .program import Program, VMFunction, as_constants
from .serialize import deserialize, serialize
from .verifier import verify


class ExecutableModule(Module):
    """A VM program as a Module; its first import is the kernel library (if any)."""

    type_key = "vm_exec"

    def __init__(self, program: Program, lib: Module | None = None) -> None:
        super().__init__()
        self.program = program
        if lib is not None:
            self.import_module(lib)

    @property
    def lib(self) -> Module | None:
        return self._imports[0] if self._imports else None

    def _get_local(self, name: str) -> PackedFunc | None:
        exe = Executable(self)
        table: dict[str, Callable[..., Any]] = {
            "save": lambda: bytes(serialize(self.program)), "get_lib": lambda: self.lib,
            "get_bytecode": lambda: exe.bytecode, "get_stats": lambda: exe.stats,
            "get_constants": lambda: exe.constants,
            "get_virtual_devices": lambda: exe.virtual_devices,
            "get_num_globals": lambda: len(exe.globals),
            "get_global_fields": lambda i: exe.globals[i],
            "get_function_arity": exe.get_function_arity,
            "get_function_param_name": exe.get_function_param_name,
            "load_late_bound_consts": exe.load_late_bound_consts,
            "move_late_bound_consts": exe.move_late_bound_consts}
        func = table.get(name)
        return None if func is None else as_packed_func(func, name)

    def __repr__(self) -> str:
        return (f"Module(vm_exec, {len(self.program.functions)} functions, "
                f"{len(self.program.primitive_ops)} kernels)")


def _save_binary(mod: ExecutableModule) -> bytes:
    return bytes(serialize(mod.program))


def _load_binary(data: bytes) -> ExecutableModule:
    return ExecutableModule(deserialize(data))


register_func("runtime.module.savebinary_vm_exec", _save_binary, override=True)
register_func("runtime.module.loadbinary_vm_exec", _load_binary, override=True)


class Executable:
    """A compiled VM program: ``Executable(mod)`` for a ``vm_exec`` module (what
    ``load_module`` returns for an exported VM), or ``Executable.from_functions(...)``."""

    def __init__(self, mod: Module) -> None:
        if not isinstance(mod, ExecutableModule):
            raise TypeError(f"Executable: expected a vm_exec module (from relay.vm.compile, "
                            f"load_module or Executable.from_functions), got {mod!r}")
        self.mod = mod

    @property
    def _program(self) -> Program:
        return self.mod.program

    # -- construction -------------------------------------------------------------------------
    @classmethod
    def from_functions(cls, functions: Sequence[VMFunction] | str, constants: Sequence[Any] = (),
                       primitive_ops: Sequence[str] = (), lib: Module | None = None,
                       virtual_devices: Sequence[Device] | None = None,
                       host_device_index: int = 0,
                       const_device_indexes: Sequence[int] = (),
                       value_kernels: Mapping[int, Sequence[int]] | None = None,
                       concat_kernels: Mapping[int, Sequence[int]] | None = None
                       ) -> Executable:
        """Build (and verify) an executable from functions, or from assembly text (see
        ``ember.runtime.vm.assembler``). Raises VerificationError naming the first problem."""
        if isinstance(functions, str):
            functions = parse_functions(functions)
        prog = Program(list(functions), as_constants(constants), list(primitive_ops),
                       list(virtual_devices or [cpu(0)]), host_device_index,
                       list(const_device_indexes),
                       {int(k): tuple(v) for k, v in (value_kernels or {}).items()},
                       {int(k): tuple(v) for k, v in (concat_kernels or {}).items()})
        verify(prog)
        return cls(ExecutableModule(prog, lib))

    @staticmethod
    def load_exec(bytecode: bytes | bytearray | str | os.PathLike[str],
                  lib: Module | str | os.PathLike[str] | None) -> Executable:
        """The executable saved by ``save()``: ``bytecode`` (or a path to a file holding it)
        and the kernel library (a Module, or a path for ``load_module``)."""
        if isinstance(bytecode, (str, os.PathLike)):
            with open(bytecode, "rb") as f:
                bytecode = f.read()
        if isinstance(lib, (str, os.PathLike)):
            from ..loaders import load_module

            lib = load_module(lib)
        if lib is not None and not isinstance(lib, Module):
            raise TypeError(f"load_exec: lib must be a Module or a path, got {type(lib).__name__}")
        return Executable(ExecutableModule(deserialize(bytecode), lib))

    def save(self) -> tuple[bytearray, Module | None]:
        """``(code, lib)``: the serialised program (see ``serialize.py``) and the kernels."""
        return serialize(self._program), self.lib

    # -- inspection ---------------------------------------------------------------------------
    @property
    def lib(self) -> Module | None:
        """The kernel library."""
        return self.mod.lib

    def get_lib(self) -> Module | None:
        return self.lib

    @property
    def functions(self) -> list[VMFunction]:
        return list(self._program.functions)

    @property
    def constant_pool(self) -> list[NDArray | None]:
        """The constants as NDArrays (None for late-bound constants not loaded)."""
        return list(self._program.constants)

    @property
    def bytecode(self) -> str:
        """A listing of every function: header, register count, one instruction per line."""
        return format_functions(self._program.functions)

    @property
    def globals(self) -> list[str]:
        """The function names, in function index order."""
        return [f.name for f in self._program.functions]

    @property
    def primitive_ops(self) -> list[str]:
        """The kernel names; ``PackedFunc[k]`` in the bytecode is ``primitive_ops[k]``."""
        return list(self._program.primitive_ops)

    @property
    def constants(self) -> str:
        """One line per constant: index, shape, dtype, device (for reading and diffing)."""
        lines = []
        for i, (c, dev) in enumerate(zip(self._program.constants,
                                         self._program.const_device_indexes)):
            what = "late-bound, not loaded" if c is None else f"shape {c.shape}, {c.dtype}"
            lines.append(f"Constant[{i}]: {what}, on virtual device {dev}")
        return "\n".join(lines)

    @property
    def virtual_devices(self) -> str:
        """One line per virtual device."""
        prog = self._program
        return "\n".join(f"VirtualDevice[{i}]: {d}" + (" (host)" if i == prog.host_device_index
                                                        else "")
                         for i, d in enumerate(prog.virtual_devices))

    @property
    def stats(self) -> str:
        """Counts and sizes: constants, globals, kernels, instructions."""
        prog = self._program
        loaded = [c for c in prog.constants if c is not None]
        shapes = ", ".join(str(c.shape) for c in loaded)
        return (f"Relay VM executable statistics:\n"
                f"  Constant shapes (# {len(prog.constants)}): [{shapes}]\n"
                f"  Constant bytes: {sum(c.nbytes for c in loaded)}\n"
                f"  Globals (#{len(prog.functions)}): "
                f"[{', '.join(f'({f.name!r}, {i})' for i, f in enumerate(prog.functions))}]\n"
                f"  Primitive ops (#{len(prog.primitive_ops)}): "
                f"[{', '.join(prog.primitive_ops)}]\n"
                f"  Instructions: {sum(len(f.instructions) for f in prog.functions)}\n")

    def get_function_arity(self, func_name: str) -> int:
        return self._function(func_name).arity

    def get_function_param_name(self, func_name: str, index: int) -> str:
        params = self._function(func_name).params
        if not 0 <= index < len(params):
            raise IndexError(f"function {func_name!r} has {len(params)} parameters, no {index}")
        return params[index]

    def get_function_params(self, func_name: str) -> list[str]:
        return list(self._function(func_name).params)

    def _function(self, name: str) -> VMFunction:
        try:
            return self._program.function(name)[1]
        except KeyError as err:
            raise TVMError(err.args[0]) from None

    # -- late-bound constants -----------------------------------------------------------------
    def move_late_bound_consts(self, path: str | os.PathLike[str], byte_limit: int = 4096) -> None:
        """Write constants of at least ``byte_limit`` bytes to ``path`` (params byte format)
        and drop them from the executable, so that ``save()`` stays small; load them again
        with ``load_late_bound_consts`` before creating a VM."""
        prog = self._program
        moved = {str(i): c for i, c in enumerate(prog.constants)
                 if c is not None and c.nbytes >= byte_limit}
        with open(path, "wb") as f:
            f.write(save_param_dict(moved))
        for name in moved:
            prog.constants[int(name)] = None

    def load_late_bound_consts(self, path: str | os.PathLike[str]) -> None:
        """Load constants written by ``move_late_bound_consts``."""
        with open(path, "rb") as f:
            self.load_late_bound_consts_from_map(load_param_dict(f.read()))

    def load_late_bound_consts_from_map(self, consts: Mapping[str, Any]) -> None:
        """Fill in late-bound constants from ``{str(index): array}``."""
        prog = self._program
        for name, value in consts.items():
            if not name.isdigit() or int(name) >= len(prog.constants):
                raise TVMError(f"load_late_bound_consts: no constant {name!r} (the executable "
                               f"has {len(prog.constants)})")
            prog.constants[int(name)] = as_constants([value])[0]

    def __repr__(self) -> str:
        return f"Executable({', '.join(self.globals)}; {len(self.primitive_ops)} kernels)"
