"""``lower`` and ``build``, the schedule-level driver (``tvm.lower``, ``tvm.build``).

``lower`` turns a schedule into an IRModule of one PrimFunc; ``build`` lowers (if given a
schedule), generates C, and wraps it in a runtime Module.

The result is a :class:`ember.runtime.module.CSourceModule`: ``get_source()`` returns the C,
and the first function call compiles it (through ``ember.contrib.cc``, cached by content hash)
and loads it. Targets ``"c"`` and ``"llvm"`` (the host CPU, compiled through C) are accepted.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..ir.module import IRModule
from ..runtime.errors import TVMError
from ..te.schedule import Schedule
from .codegen import function_c, generate_c, split_c
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


def lower(inp: Any, args: Sequence[Any] | None = None, name: str = "main", binds: Any = None,
          simple_mode: bool = False) -> IRModule:
    """``tvm.lower``: an IRModule holding the lowered PrimFunc under the global name ``name``.

    ``inp`` is a schedule (with ``args``, the tensors and vars that become the parameters),
    a PrimFunc (renamed ``name``) or an IRModule (returned with the ``tir.add_lower_pass``
    passes applied to its PrimFuncs). ``mod[name]`` is the PrimFunc; ``print(mod)`` shows
    the loop IR (``simple_mode`` is accepted for TVM's signature: the printed IR is always the
    simple form); ``build(mod, target="llvm")`` compiles it. Raises TVMError for anything else.
    """
    if isinstance(inp, IRModule):
        return _lower_module(inp)
    if isinstance(inp, PrimFunc):
        func = _with_lower_passes(inp.with_attr("global_symbol", name))
    elif isinstance(inp, Schedule):
        if args is None:
            raise TVMError(f"lower {name}: a schedule needs the argument tensors "
                           "(lower(s, [A, B, C]))")
        from ..te.lower import lower as lower_schedule

        func = lower_schedule(inp, args, name, binds, simple_mode)
    else:
        raise TVMError(f"lower {name}: expected a te.Schedule, a tir.PrimFunc or an IRModule, "
                       f"got {type(inp).__name__}")
    return IRModule({name: func})


def _with_lower_passes(func: PrimFunc) -> PrimFunc:
    from ..ir.transform import PassContext

    extra = PassContext.current().config.get("tir.add_lower_pass")
    if not extra:
        return func
    from .transform import run_lower_passes

    return run_lower_passes(func, extra)


def _lower_module(mod: IRModule) -> IRModule:
    out = mod.copy()
    for gv, func in mod.other_functions().items():
        out.add(gv, _with_lower_passes(func))
    return out


def _module_funcs(mod: IRModule) -> list[PrimFunc]:
    relay = [gv.name_hint for gv in mod.relay_part().functions]
    if relay:
        raise TVMError(f"build: the IRModule holds Relay functions ({', '.join(relay)}); "
                       "compile a Relay module with relay.build, a lowered one "
                       "(ember.lower) with build")
    if not mod.functions:
        raise TVMError("build: the IRModule has no functions; lower a schedule into it first "
                       "(mod = ember.lower(s, [A, B], name='f'))")
    return [f.with_attr("global_symbol", gv.name_hint) for gv, f in mod.functions.items()]


def _as_funcs(inputs: Any, args: Sequence[Any] | None, name: str) -> list[PrimFunc]:
    if isinstance(inputs, PrimFunc):
        return [inputs if "global_symbol" in inputs.attrs else inputs.with_attr("global_symbol",
                                                                                 name)]
    if isinstance(inputs, dict):
        return [f.with_attr("global_symbol", k) for k, f in inputs.items()]
    if isinstance(inputs, (list, tuple)) and inputs and isinstance(inputs[0], PrimFunc):
        return list(inputs)
    if isinstance(inputs, IRModule):
        return _module_funcs(inputs)
    if not isinstance(inputs, Schedule):
        raise TVMError(f"build: expected a te.Schedule (with args), an IRModule from "
                       f"ember.lower, or PrimFuncs, got {type(inputs).__name__}")
    from ..te.lower import lower as lower_schedule

    if args is None:
        raise TVMError("build: a schedule needs the argument tensors (build(s, [A, B, C]))")
    return [lower_schedule(inputs, args, name)]


def build(inputs: Any, args: Sequence[Any] | None = None, target: Any = "c",
          target_host: Any = None, name: str = "default_function", **_: Any) -> Any:
    """Compile a schedule (with ``args``), a PrimFunc, or several, into a Module.

    ``mod[name](*ndarrays)`` calls the packed function; outputs are written in place.
    """
    _target_kind(target)
    funcs = _as_funcs(inputs, args, name)
    from ..runtime.module import CSourceModule

    code = generate_c(funcs)
    # The units a hosted build compiles: ember's kernels as linked kernel objects (compiled
    # once per flag set) and the functions' C, as a model build's; ``code`` is the one-unit
    # form that get_source and C exports show.
    units = split_c([function_c(f) for f in funcs])
    if len(funcs) == 1:
        # A one-function module is callable directly (mod(*args)), as TVM's: the loader reads
        # the entry's name from the __tvm_main__ string.
        main = f'\n/* entry function of this module */\nconst char __tvm_main__[] = "{funcs[0].name}";\n'
        code += main
        units[-1] = (units[-1][0], units[-1][1] + main)
    _debug(funcs, code)
    return CSourceModule(code, "c", [f.name for f in funcs], units=units)


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
