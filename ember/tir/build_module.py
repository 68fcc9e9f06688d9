"""``build``: lower (if given a schedule), generate C, and wrap it in a runtime Module.

The result is a :class:`ember.runtime.module.CSourceModule`: ``get_source()`` returns the C,
and the first function call compiles it (through ``ember.contrib.cc``, cached by content hash)
and loads it. Targets ``"c"`` and ``"llvm"`` (the host CPU, compiled through C) are accepted.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..runtime.errors import TVMError
from .codegen import generate_c
from .stmt import PrimFunc

_HOST_TARGETS = ("c", "llvm")


def _target_kind(target: Any) -> str:
    if target is None:
        return "c"
    text = str(getattr(target, "kind", target)).split()[0]
    text = getattr(text, "name", text)
    if text not in _HOST_TARGETS:
        raise TVMError(f"build: target {text!r} is not supported; ember compiles for the host "
                       "CPU with target 'c' or 'llvm'")
    return text


def _as_funcs(inputs: Any, args: Sequence[Any] | None, name: str) -> list[PrimFunc]:
    if isinstance(inputs, PrimFunc):
        return [inputs if "global_symbol" in inputs.attrs else inputs.with_attr("global_symbol",
                                                                                 name)]
    if isinstance(inputs, dict):
        return [f.with_attr("global_symbol", k) for k, f in inputs.items()]
    if isinstance(inputs, (list, tuple)) and inputs and isinstance(inputs[0], PrimFunc):
        return list(inputs)
    if hasattr(inputs, "functions") and not hasattr(inputs, "stages"):  # an IRModule of PrimFuncs
        return [f.with_attr("global_symbol", getattr(k, "name_hint", str(k)))
                for k, f in inputs.functions.items() if isinstance(f, PrimFunc)]
    from ..te.lower import lower

    if args is None:
        raise TVMError("build: a schedule needs the argument tensors (build(s, [A, B, C]))")
    return [lower(inputs, args, name)]


def build(inputs: Any, args: Sequence[Any] | None = None, target: Any = "c",
          target_host: Any = None, name: str = "default_function", **_: Any) -> Any:
    """Compile a schedule (with ``args``), a PrimFunc, or several, into a Module.

    ``mod[name](*ndarrays)`` calls the packed function; outputs are written in place.
    """
    _target_kind(target)
    funcs = _as_funcs(inputs, args, name)
    from ..runtime.module import CSourceModule

    code = generate_c(funcs)
    if len(funcs) == 1:
        # A one-function module is callable directly (mod(*args)), as TVM's: the loader reads
        # the entry's name from the __tvm_main__ string.
        code += f'\n/* entry function of this module */\nconst char __tvm_main__[] = "{funcs[0].name}";\n'
    _debug(funcs, code)
    return CSourceModule(code, "c", [f.name for f in funcs])


def _debug(funcs: list[PrimFunc], code: str) -> None:
    """EMBER_DEBUG=2 prints the lowered loop IR, =3 also the generated C (on stderr)."""
    import sys

    from ..runtime.env import debug_level

    level = debug_level()
    if level >= 2:
        for f in funcs:
            print(f"ember: lowered {f.name}\n{f}", file=sys.stderr)
    if level >= 3:
        print(f"ember: generated C\n{code}", file=sys.stderr)
