"""The global function registry: named PackedFuncs reachable from Python and from C.

Compiled code finds these through ``TVMBackendGetFuncFromEnv`` / ``TVMFuncGetGlobal`` (after
the calling module's own functions and its imports), so a Python function registered here can
be called from generated C.
"""
from __future__ import annotations

import difflib
import threading
from typing import Any, Callable, TypeVar, overload

from .errors import TVMError
from .packed_func import PackedFunc, as_packed_func

_F = TypeVar("_F", bound=Callable[..., Any])
_REGISTRY: dict[str, PackedFunc] = {}
_LOCK = threading.Lock()


class GlobalFuncNotFoundError(TVMError, ValueError):
    """No global function has this name: 'no global function named X; did you mean ...?'."""


class GlobalFuncExistsError(TVMError, ValueError):
    """A global function of this name exists and override=False."""


@overload
def register_func(func_name: _F, f: None = None, override: bool = False) -> _F: ...
@overload
def register_func(func_name: str | None = None, f: None = None,
                  override: bool = False) -> Callable[[_F], _F]: ...
@overload
def register_func(func_name: str, f: _F, override: bool = False) -> _F: ...


def register_func(func_name: Any = None, f: Any = None, override: bool = False) -> Any:
    """Register ``f`` as a global function named ``func_name`` (default ``f.__name__``).

    Usable as ``register_func("name", f)``, ``@register_func``, ``@register_func("name")`` or
    ``@register_func("name", override=True)``. Returns ``f`` unchanged. Raises
    GlobalFuncExistsError (a ValueError) if the name is taken and ``override`` is false.
    """
    if callable(func_name) and f is None:
        func_name, f = None, func_name
    if func_name is not None and not isinstance(func_name, str):
        raise TypeError(f"register_func: the name must be a str, got {type(func_name).__name__}")

    def register(fn: _F) -> _F:
        if not callable(fn):
            raise TypeError(f"register_func: expected a callable, got {type(fn).__name__}")
        name = func_name or getattr(fn, "__name__", None)
        if not name:
            raise ValueError("register_func: cannot infer a name; pass one explicitly")
        with _LOCK:
            if name in _REGISTRY and not override:
                raise GlobalFuncExistsError(f"register_func: global function {name!r} is already "
                                            "registered (pass override=True to replace it)")
            _REGISTRY[name] = as_packed_func(fn, name)
        return fn

    return register(f) if f is not None else register


def get_global_func(name: str, allow_missing: bool = False) -> PackedFunc | None:
    """The global function ``name``; None if missing and ``allow_missing``, else raises
    GlobalFuncNotFoundError (a ValueError and a TVMError) naming close matches."""
    func = _REGISTRY.get(name)
    if func is None and not allow_missing:
        close = difflib.get_close_matches(name, list(_REGISTRY), n=3, cutoff=0.6)
        hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        raise GlobalFuncNotFoundError(f"no global function named {name!r}{hint}")
    return func


def remove_global_func(name: str) -> None:
    """Remove the global function ``name``; GlobalFuncNotFoundError if there is none."""
    with _LOCK:
        if _REGISTRY.pop(name, None) is None:
            raise GlobalFuncNotFoundError(f"remove_global_func: no global function named {name!r}")


def list_global_func_names() -> list[str]:
    """The names of all registered global functions, sorted."""
    return sorted(_REGISTRY)


# ---- a few builtins, handy for testing the FFI from Python and C ---------------------------
register_func("testing.echo", lambda x: x, override=True)
register_func("testing.nop", lambda *args: None, override=True)
register_func("runtime.GlobalFuncNames", list_global_func_names, override=True)


def _raise_error(msg: str) -> None:
    raise TVMError(msg)


register_func("testing.raise_error", _raise_error, override=True)
