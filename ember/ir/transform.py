"""The pass infrastructure: PassContext, module and function passes, Sequential.

A pass is a named object and a function from IRModule to IRModule; it never edits its input.
Write one as a dataclass::

    @dataclass(frozen=True)
    class FoldConstant(ModulePass):
        name: ClassVar[str] = "FoldConstant"
        opt_level: ClassVar[int] = 2
        def transform_module(self, mod, ctx): ...

or with the ``module_pass`` / ``function_pass`` decorators (TVM's Python API). ``Sequential``
runs a list of passes, skipping those above the context's ``opt_level`` or disabled by it.
Pass names are matched ignoring case, ``-`` and ``_`` (``"fold-constant"`` is
``"FoldConstant"``). ``EMBER_DEBUG=1`` logs every pass with its time to stderr; ``=2`` also
prints the IR after each pass. ``EMBER_VERIFY=1`` (or the config key ``"ember.verify"``)
checks after each pass that the module is well formed and names the pass that broke it.
"""
from __future__ import annotations

import inspect
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from ..runtime.env import debug_level as _debug_level
from ..runtime.errors import DiagnosticError
from .expr import Function
from .instrument import PassInstrument, PassTimingInstrument, pass_instrument  # noqa: F401
from .module import IRModule
from .well_formed import check_well_formed


def canonical_name(name: str) -> str:
    """The form in which pass names are compared: ``FuseOps`` == ``fuse-ops`` == ``fuse_ops``."""
    return name.replace("-", "").replace("_", "").lower()


@dataclass(frozen=True)
class PassInfo:
    """What the pass manager knows of a pass: its name, its opt_level and the passes it needs."""

    opt_level: int
    name: str
    required: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "required", tuple(self.required or ()))


class PassContext:
    """Options for a pipeline of passes; use as ``with PassContext(opt_level=3): ...``.

    ``required_pass`` names passes that run whatever their opt_level, ``disabled_pass`` names
    passes that never run inside a Sequential, ``instruments`` are PassInstruments, ``config``
    a dict of pass options (``"relay.FuseOps.max_depth": 10``).
    """

    _local = threading.local()

    def __init__(self, opt_level: int = 2, required_pass: Iterable[str] | None = None,
                 disabled_pass: Iterable[str] | None = None,
                 instruments: Sequence[PassInstrument] | None = None,
                 config: dict[str, Any] | None = None) -> None:
        if not isinstance(opt_level, int) or isinstance(opt_level, bool):
            raise TypeError(f"PassContext: opt_level must be an int, got {opt_level!r}")
        self.opt_level = opt_level
        self.required_pass = _names("required_pass", required_pass)
        self.disabled_pass = _names("disabled_pass", disabled_pass)
        self.instruments = _instruments(instruments)
        self.config: dict[str, Any] = dict(config or {})

    @staticmethod
    def _stack() -> list[PassContext]:
        local = PassContext._local
        if not hasattr(local, "stack"):
            local.stack = [PassContext()]
        stack: list[PassContext] = local.stack
        return stack

    @staticmethod
    def current() -> PassContext:
        """The innermost context entered on this thread (a default one outside any ``with``)."""
        return PassContext._stack()[-1]

    def __enter__(self) -> PassContext:
        for inst in self.instruments:
            inst.enter_pass_ctx()
        PassContext._stack().append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        stack = PassContext._stack()
        if len(stack) > 1 and stack[-1] is self:
            stack.pop()
        for inst in self.instruments:
            inst.exit_pass_ctx()

    def override_instruments(self, instruments: Sequence[PassInstrument] | None) -> None:
        """Replace the instruments of this (possibly entered) context."""
        for inst in self.instruments:
            inst.exit_pass_ctx()
        self.instruments = _instruments(instruments)
        for inst in self.instruments:
            inst.enter_pass_ctx()

    def pass_enabled(self, info: PassInfo) -> bool:
        """Required passes always run; disabled ones never; others when opt_level allows."""
        name = canonical_name(info.name)
        if name in self.required_pass:
            return True
        if name in self.disabled_pass:
            return False
        return self.opt_level >= info.opt_level

    @staticmethod
    def list_configs() -> dict[str, Any]:
        """Config keys are free-form in ember; this returns the current context's config."""
        return dict(PassContext.current().config)

    def __repr__(self) -> str:
        return (f"PassContext(opt_level={self.opt_level}, required={sorted(self.required_pass)}, "
                f"disabled={sorted(self.disabled_pass)})")


def _names(what: str, names: Iterable[str] | None) -> frozenset[str]:
    if isinstance(names, str):
        names = [names]
    out = set()
    for n in names or ():
        if not isinstance(n, str):
            raise TypeError(f"PassContext: {what} must hold pass names, got {n!r}")
        out.add(canonical_name(n))
    return frozenset(out)


def _instruments(instruments: Sequence[PassInstrument] | None) -> tuple[PassInstrument, ...]:
    out = tuple(instruments or ())
    for inst in out:
        if not callable(getattr(inst, "run_before_pass", None)):
            raise TypeError(f"PassContext: instruments must be PassInstruments (see "
                            f"ember.ir.instrument.pass_instrument), got {inst!r}")
    return out


# -- passes -------------------------------------------------------------------------------------
_depth = threading.local()


class Pass:
    """A transformation of an IRModule. Call it: ``new_mod = pass_obj(mod)``.

    Subclasses set ``name``/``opt_level``/``required`` (class attributes) and implement
    ``transform_module(mod, ctx)``. Calling a pass runs it whatever its opt_level; only
    ``Sequential`` filters by the context.
    """

    name: ClassVar[str] = "Pass"
    opt_level: ClassVar[int] = 0
    required: ClassVar[tuple[str, ...]] = ()
    # False: the pass is given the module's Relay functions only (see _run_logged).
    sees_all_functions: ClassVar[bool] = False

    @property
    def info(self) -> PassInfo:
        return PassInfo(self.opt_level, self.name, tuple(self.required))

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        raise NotImplementedError(f"pass {self.name} does not implement transform_module")

    def __call__(self, mod: IRModule) -> IRModule:
        if not isinstance(mod, IRModule):
            hint = "; wrap it with IRModule.from_expr(...)" if isinstance(mod, Function) else ""
            raise TypeError(f"pass {self.name}: expected an IRModule, got "
                            f"{type(mod).__name__}{hint}")
        ctx = PassContext.current()
        info = self.info
        if not all(inst.should_run(mod, info) for inst in ctx.instruments):
            return mod
        for inst in ctx.instruments:
            inst.run_before_pass(mod, info)
        out = self._run_logged(mod, ctx)
        for inst in ctx.instruments:
            inst.run_after_pass(out, info)
        return out

    def _run_logged(self, mod: IRModule, ctx: PassContext) -> IRModule:
        depth = getattr(_depth, "n", 0)
        _depth.n = depth + 1
        start = time.perf_counter()
        # A Relay pass sees the module without its PrimFuncs, which come through unchanged
        # (TVM's Relay passes skip every function that is not a relay.Function).
        others = {} if self.sees_all_functions else mod.other_functions()
        given = mod.relay_part() if others else mod
        try:
            out = self.transform_module(given, ctx)
        finally:
            _depth.n = depth
        if not isinstance(out, IRModule):
            raise TypeError(f"pass {self.name} returned {type(out).__name__}, "
                            "expected an IRModule")
        if out is given:
            out = mod  # unchanged: the same module back, PrimFuncs included
        elif others:
            out = out.copy()
            for gv, func in others.items():
                if gv.name_hint not in out:
                    out.add(gv, func)
        if not isinstance(self, Sequential) and _verify_enabled(ctx):
            _verify(out, self.name)
        level = _debug_level()
        if level >= 1:
            ms = (time.perf_counter() - start) * 1e3
            print(f"[ember] {'  ' * depth}pass {self.name}: {ms:.2f} ms", file=sys.stderr)
        if level >= 2:
            print(_module_text(out), file=sys.stderr)
        return out

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, opt_level={self.opt_level})"


def _verify_enabled(ctx: PassContext) -> bool:
    return os.environ.get("EMBER_VERIFY", "0") not in ("", "0") or bool(
        ctx.config.get("ember.verify", False))


def _verify(mod: IRModule, pass_name: str) -> None:
    """Check that a pass left the module well formed; the error names the pass."""
    try:
        check_well_formed(mod)
    except DiagnosticError as err:
        raise DiagnosticError(f"pass {pass_name} left the module invalid: {err}") from err


def _module_text(mod: IRModule, show_meta_data: bool = False) -> str:
    try:
        return mod.astext(show_meta_data=show_meta_data)
    except Exception as err:  # the printer must never break a pipeline that only logs
        return f"<cannot print the module: {type(err).__name__}: {err}>"


class ModulePass(Pass):
    """A pass over the whole module: implement ``transform_module(mod, ctx)``."""


class FunctionPass(Pass):
    """A pass applied to each Relay function of a module: implement
    ``transform_function(func, mod, ctx)``.

    Functions marked ``Primitive``, ``Compiler`` (external codegen) or ``SkipOptimization``
    are left alone.
    """

    def transform_function(self, func: Function, mod: IRModule, ctx: PassContext) -> Function:
        raise NotImplementedError(f"pass {self.name} does not implement transform_function")

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        out = mod.copy()
        for gv, func in mod.functions.items():
            if not isinstance(func, Function) or _skip_function(func):
                continue
            new = self.transform_function(func, mod, ctx)
            if not isinstance(new, Function):
                raise TypeError(f"pass {self.name} turned @{gv.name_hint} into "
                                f"{type(new).__name__}, expected a relay.Function")
            if new is not func:
                out.add(gv, new)
        return out


def _skip_function(func: Function) -> bool:
    return bool(func.get_attr("Primitive", 0) or func.get_attr("Compiler")
                or func.get_attr("SkipOptimization", 0))


class Sequential(ModulePass):
    """Run ``passes`` in order; a pass runs when the current PassContext enables it.

    Before a pass runs, the passes named in its ``required`` run (looked up with ``get_pass``).
    """

    sees_all_functions: ClassVar[bool] = True  # each of its passes takes its own part

    def __init__(self, passes: Sequence[Pass] | None = None, opt_level: int = 0,
                 name: str = "sequential", required: Sequence[str] | None = None) -> None:
        self.passes = list(passes or ())
        for i, p in enumerate(self.passes):
            if not isinstance(p, Pass):
                raise TypeError(f"Sequential {name!r}: passes[{i}] is {p!r}, not a Pass")
        _set_info(self, PassInfo(opt_level, name, tuple(required or ())))

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        for p in self.passes:
            info = p.info
            if not ctx.pass_enabled(info):
                if _debug_level() >= 1:
                    print(f"[ember] skip {info.name} (opt_level {info.opt_level} > "
                          f"{ctx.opt_level} or disabled)", file=sys.stderr)
                continue
            for req in info.required:
                mod = get_pass(req, needed_by=info.name)(mod)
            mod = p(mod)
        return mod

    def __repr__(self) -> str:
        return f"Sequential({self.name!r}, [{', '.join(p.name for p in self.passes)}])"


# -- the registry of passes by name (for `required` and the command line) -----------------------
_PASSES: dict[str, Callable[[], Pass]] = {}


def register_pass(name: str, factory: Callable[[], Pass]) -> Callable[[], Pass]:
    """Make ``factory()`` the pass called ``name`` (for ``required`` lists and ``get_pass``)."""
    _PASSES[canonical_name(name)] = factory
    return factory


def get_pass(name: str, needed_by: str | None = None) -> Pass:
    """A new instance of the registered pass ``name``."""
    factory = _PASSES.get(canonical_name(name))
    if factory is None:
        # The pass library (ember.relay.transform) registers its passes when it is imported.
        who = f"pass {needed_by} requires " if needed_by else ""
        known = ", ".join(sorted(_PASSES)) or "none (import ember.relay.transform)"
        raise KeyError(f"{who}unknown pass {name!r}; registered passes: {known}")
    return factory()


def list_passes() -> list[str]:
    """The names of the registered passes (``ember.relay.transform`` registers the pass
    library when it is imported, so ``relay.transform.list_passes()`` lists them all)."""
    return sorted(_PASSES)


# -- decorators (TVM's Python API) --------------------------------------------------------------
def _set_info(p: Pass, info: PassInfo) -> None:
    # Decorated passes are instances of one class each carrying its own name and opt_level:
    # the class-level defaults of Pass are shadowed per instance.
    for key, value in (("name", info.name), ("opt_level", info.opt_level),
                       ("required", info.required)):
        setattr(p, key, value)


class _FuncModulePass(ModulePass):
    def __init__(self, fn: Callable[..., IRModule], info: PassInfo) -> None:
        self._fn = fn
        _set_info(self, info)

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        return self._fn(mod, ctx)


class _FuncFunctionPass(FunctionPass):
    def __init__(self, fn: Callable[..., Function], info: PassInfo) -> None:
        self._fn = fn
        _set_info(self, info)

    def transform_function(self, func: Function, mod: IRModule, ctx: PassContext) -> Function:
        return self._fn(func, mod, ctx)


def _wrap_class(cls: type, base: type, info: PassInfo, method: str) -> type:
    """A Pass class whose instances wrap an instance of the user's class ``cls``."""
    if not callable(getattr(cls, method, None)):
        raise TypeError(f"{base.__name__} decorator: class {cls.__name__} must define {method}")

    class Wrapped(base):  # type: ignore[misc]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self._inst = cls(*args, **kwargs)
            _set_info(self, info)

        def __getattr__(self, attr: str) -> Any:
            if attr == "_inst":
                raise AttributeError(attr)
            return getattr(self._inst, attr)

    setattr(Wrapped, method, lambda self, *a: getattr(self._inst, method)(*a))
    Wrapped.__name__, Wrapped.__qualname__ = cls.__name__, cls.__qualname__
    Wrapped.__doc__, Wrapped.__module__ = cls.__doc__, cls.__module__
    return Wrapped


def _decorator(kind: str, base: type, func_cls: type, method: str, pass_func: Any,
               opt_level: int, name: str | None, required: Sequence[str] | None) -> Any:
    def create(arg: Any) -> Any:
        if not callable(arg):
            raise TypeError(f"{kind}: expected a function or a class, got {arg!r}")
        info = PassInfo(opt_level, name or arg.__name__, tuple(required or ()))
        if inspect.isclass(arg):
            return _wrap_class(arg, base, info, method)
        return func_cls(arg, info)

    return create(pass_func) if pass_func is not None else create


def module_pass(pass_func: Any = None, opt_level: int = 0, name: str | None = None,
                required: Sequence[str] | None = None) -> Any:
    """Make a ModulePass from ``fn(mod, ctx) -> mod`` or from a class with ``transform_module``.

    Usable bare (``@module_pass``) or with options (``@module_pass(opt_level=2)``). A decorated
    class becomes a Pass class: its constructor arguments are those of the original class.
    """
    return _decorator("module_pass", ModulePass, _FuncModulePass, "transform_module",
                      pass_func, opt_level, name, required)


def function_pass(pass_func: Any = None, opt_level: int = 0, name: str | None = None,
                  required: Sequence[str] | None = None) -> Any:
    """Make a FunctionPass from ``fn(func, mod, ctx) -> func`` or a class with
    ``transform_function``; see ``module_pass``."""
    return _decorator("function_pass", FunctionPass, _FuncFunctionPass, "transform_function",
                      pass_func, opt_level, name, required)


class PrintIR(ModulePass):
    """Print the module to stderr and pass it on unchanged."""

    name: ClassVar[str] = "PrintIR"

    def __init__(self, header: str = "", show_meta_data: bool = False) -> None:
        self.header, self.show_meta_data = header, show_meta_data

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        print(f"PrintIR({self.header}):\n{_module_text(mod, self.show_meta_data)}", file=sys.stderr)
        return mod
