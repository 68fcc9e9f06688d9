"""The registry of external codegens, by compiler name (see the package docstring)."""
from __future__ import annotations

from collections.abc import Callable

from ....ir.expr import Function
from ....runtime.errors import TVMError
from ....runtime.module import CSourceModule, Module
from ....runtime.registry import get_global_func, register_func
from ....tir.codegen import join_c
from .ccompiler import ExternKernel, ccompiler_kernel

KernelCodegen = Callable[[Function, str], ExternKernel]
_KERNEL_CODEGENS: dict[str, KernelCodegen] = {}


class ExternalCodegenError(TVMError):
    """A partitioned function no codegen can build, or a codegen that returned nothing
    usable; the message names the compiler and the function."""


def register_kernel_codegen(name: str, codegen: KernelCodegen) -> None:
    """Make ``codegen(func, symbol) -> ExternKernel`` the kernel codegen of compiler ``name``."""
    _KERNEL_CODEGENS[name] = codegen


def kernel_codegen(name: str) -> KernelCodegen | None:
    return _KERNEL_CODEGENS.get(name)


def has_codegen(name: str) -> bool:
    """Whether compiler ``name`` has a kernel codegen or a ``relay.ext.<name>`` function."""
    return name in _KERNEL_CODEGENS or get_global_func(f"relay.ext.{name}", True) is not None


def codegen_module(func: Function, name: str, symbol: str) -> Module:
    """The runtime module that ``relay.ext.<name>`` makes of ``func``; checked to be a Module."""
    codegen = get_global_func(f"relay.ext.{name}", allow_missing=True)
    if codegen is None:
        known = sorted(set(_KERNEL_CODEGENS) | {n[len("relay.ext."):] for n in _ext_names()})
        raise ExternalCodegenError(
            f"@{symbol} has Compiler={name!r}, but no codegen is registered for {name!r}: "
            f"register a function 'relay.ext.{name}' (tvm.register_func) returning a runtime "
            f"module; known compilers: {', '.join(known) or 'none'}")
    try:
        mod = codegen(func)
    except Exception as err:
        raise ExternalCodegenError(f"relay.ext.{name} failed on @{symbol}: "
                                   f"{type(err).__name__}: {err}") from err
    if not isinstance(mod, Module):
        raise ExternalCodegenError(f"relay.ext.{name} must return a runtime Module for "
                                   f"@{symbol}, got {type(mod).__name__}")
    return mod


def _ext_names() -> list[str]:
    from ....runtime.registry import list_global_func_names

    return [n for n in list_global_func_names() if n.startswith("relay.ext.")]


def _ccompiler_module(func: Function) -> CSourceModule:
    """``relay.ext.ccompiler``: the ccompiler's C of ``func`` as a module of its own."""
    symbol = str(func.get_attr("global_symbol") or "")
    if not symbol:
        raise ExternalCodegenError("relay.ext.ccompiler: the function has no global_symbol "
                                   "attribute (run PartitionGraph)")
    kernel = ccompiler_kernel(_typed(func), symbol)
    return CSourceModule(join_c([kernel.code]), "c", [symbol])


def _typed(func: Function) -> Function:
    if func.checked_type_ is None:
        from ...transform.type_infer import infer_type

        return infer_type(func)  # type: ignore[return-value]
    return func


register_kernel_codegen("ccompiler", ccompiler_kernel)
register_func("relay.ext.ccompiler", _ccompiler_module, override=True)
