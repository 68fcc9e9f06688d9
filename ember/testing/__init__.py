"""ember.testing: helpers for tests written against the Relay-era ``tvm.testing`` API.

``assert_allclose``, target enumeration (``enabled_targets``, ``device_enabled``), pytest marks
(``requires_llvm``, ``requires_micro``, ``requires_rpc``, ``uses_gpu``), fixture factories
(``parameter``, ``parameters``), ``parametrize_targets``, and the ``testing.*`` global
functions that exercise the FFI (``echo``, ``device_test``, ``object_use_count``,
``test_wrap_callback``, ... in ``ffi_funcs.py``). Importing this module loads
neither the compiler packages nor pytest (pytest is imported when a mark or fixture is made).

Targets under test come from ``$TVM_TEST_TARGETS`` (or ``$EMBER_TEST_TARGETS``), a
``;``-separated list, default ``llvm``. A target is *enabled* when ember can run it here:
``llvm`` and ``c`` need a C compiler (``$CC``, ``cc``, ``gcc`` or ``clang`` on PATH); device
targets (``cuda``, ``vulkan``, ...) never are.
"""
from __future__ import annotations

import functools
import importlib.util
import inspect
import itertools
import os
import shutil
import sys
import warnings
from typing import Any, Callable, Iterable, Sequence, TypeVar

import numpy as np

from ..runtime.device import Device, device
from ..runtime.dtype import DataType
from ..runtime.ndarray import NDArray

_F = TypeVar("_F", bound=Callable[..., Any])

# rtol/atol per dtype for comparing computed results with a numpy reference; ints are exact.
TOLERANCE: dict[str, tuple[float, float]] = {
    "float16": (1e-2, 1e-2), "float32": (1e-5, 1e-5), "float64": (1e-10, 1e-10)}
_HOST_KINDS = ("llvm", "c")


def tolerance(dtype: "str | DataType | np.dtype") -> dict[str, float]:
    """``{"rtol": ..., "atol": ...}`` for results of ``dtype`` (exact for ints and bool)."""
    rtol, atol = TOLERANCE.get(DataType(dtype).scalar, (0.0, 0.0))
    return {"rtol": rtol, "atol": atol}


def _to_numpy(value: Any) -> np.ndarray:
    return value.numpy() if isinstance(value, NDArray) else np.asarray(value)


def assert_allclose(actual: Any, desired: Any, rtol: float = 1e-7, atol: float = 0) -> None:
    """Assert that two arrays (NDArray, numpy or nested lists) have equal shapes and values
    within ``atol + rtol * |desired|``. The shapes are compared first, without broadcasting."""
    a, d = _to_numpy(actual), _to_numpy(desired)
    if a.shape != d.shape:
        raise AssertionError(f"assert_allclose: shape mismatch: actual has shape {a.shape}, "
                             f"desired has shape {d.shape}")
    np.testing.assert_allclose(a, d, rtol=rtol, atol=atol, verbose=True)


# -- environment ------------------------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def find_c_compiler() -> str | None:
    """Path of the C compiler ember would use ($CC, cc, gcc, clang), or None."""
    for cand in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if cand and cand.split():
            path = shutil.which(cand.split()[0])
            if path:
                return path
    return None


def _target_kind(target: Any) -> str:
    text = str(target).strip()
    return text.split()[0] if text else ""


def _target_device(target: Any) -> Device | None:
    try:
        return device(_target_kind(target))
    except ValueError:
        return None


def _skip_reason(target: Any) -> str | None:
    kind = _target_kind(target)
    if kind in _HOST_KINDS:
        return None if find_c_compiler() else (
            f"target {kind!r} needs a C compiler; none of $CC, cc, gcc, clang was found")
    if _target_device(target) is None:
        return f"unknown target {str(target)!r}"
    return f"target {kind!r} is not supported by ember (it runs on the CPU only)"


def _test_targets() -> list[str]:
    env = os.environ.get("TVM_TEST_TARGETS") or os.environ.get("EMBER_TEST_TARGETS") or "llvm"
    return [t.strip() for t in env.split(";") if t.strip()]


def enabled_targets() -> list[tuple[str, Device]]:
    """``[(target, dev), ...]`` for the targets under test that can run here (see module doc)."""
    out = []
    for target in _test_targets():
        dev = _target_device(target)
        if dev is not None and _skip_reason(target) is None:
            out.append((target, dev))
    return out


def device_enabled(target: Any) -> bool:
    """Whether ``target`` (a string like ``"llvm -mcpu=x"`` or a Target) is under test and
    runnable here; compares the target kind only."""
    return _target_kind(target) in {_target_kind(t) for t, _ in enabled_targets()}


# -- marks ----------------------------------------------------------------------------------------
class _Requirement:
    """A decorator marking a test with ``pytest.mark.<name>`` and skipping it when the
    requirement is not met. ``.marks()`` gives the marks (e.g. for ``pytestmark``)."""

    def __init__(self, name: str, check: Callable[[], str | None]) -> None:
        self.name = name
        self._check = check

    @property
    def skip_reason(self) -> str | None:
        return self._check()

    @property
    def enabled(self) -> bool:
        return self._check() is None

    def marks(self) -> list[Any]:
        import pytest

        reason = self._check()
        with warnings.catch_warnings():
            # The marks are registered by ember.testing.plugin; without it they still work.
            warnings.simplefilter("ignore", pytest.PytestUnknownMarkWarning)
            marks = [getattr(pytest.mark, self.name)]
        if reason is not None:
            marks.append(pytest.mark.skip(reason=reason))
        return marks

    def __call__(self, func: _F) -> _F:
        for mark in self.marks():
            func = mark(func)
        return func

    def __repr__(self) -> str:
        return f"<ember.testing requirement {self.name!r}: {self.skip_reason or 'enabled'}>"


def _needs_cc() -> str | None:
    return None if find_c_compiler() else "needs a C compiler; none of $CC, cc, gcc, clang found"


def _needs_module(module: str, what: str) -> Callable[[], str | None]:
    def check() -> str | None:
        return None if importlib.util.find_spec(module) else f"{what} ({module}) is not available"

    return check


def _needs_micro() -> str | None:
    return _needs_cc() or _needs_module("ember.micro", "micro support")()


requires_llvm = _Requirement("llvm", _needs_cc)
requires_micro = _Requirement("micro", _needs_micro)
requires_rpc = _Requirement("rpc", _needs_module("ember.rpc", "RPC support"))
# uses_gpu marks a test that *may* use a GPU when one is enabled; like tvm.testing.uses_gpu it
# still runs (on the CPU targets). requires_gpu/requires_cuda always skip: no GPU backend.
uses_gpu = _Requirement("gpu", lambda: None)
requires_gpu = _Requirement("gpu", lambda: "ember has no GPU backend")
requires_cuda = _Requirement("cuda", lambda: "ember has no CUDA backend")


def skip_if_wheel_test(func: _F) -> _F:
    """Kept for API compatibility: ember tests never depend on a source checkout."""
    return func


# -- fixtures and parametrization -----------------------------------------------------------------
def parameter(*values: Any, ids: Sequence[str] | Callable[[Any], str] | None = None) -> Any:
    """A pytest fixture taking each of ``values`` in turn; assign it at module level, and the
    variable name is the fixture name: ``dtype = ember.testing.parameter("float32", "int8")``."""
    import pytest

    def as_fixture(request: Any) -> Any:
        return request.param

    return pytest.fixture(params=list(values), ids=ids)(as_fixture)


_GROUPS = itertools.count()


def parameters(*value_sets: Sequence[Any], ids: Sequence[str] | None = None) -> tuple[Any, ...]:
    """Fixtures that vary together: ``shape, dtype = parameters(((2,), "int8"), ((4,), "f32"))``
    gives two fixtures and two test cases (not four). Call at module level."""
    import pytest

    if not value_sets:
        raise ValueError("parameters: at least one value tuple is required")
    width = len(value_sets[0])
    if any(len(vs) != width for vs in value_sets):
        raise ValueError(f"parameters: every value tuple must have {width} items, got "
                         f"{[len(vs) for vs in value_sets]}")
    group = f"_ember_parameters_{next(_GROUPS)}"

    def group_fixture(request: Any) -> Any:
        return request.param

    # The group fixture must be found by pytest's collection, i.e. live in the caller's module.
    sys._getframe(1).f_globals[group] = pytest.fixture(params=list(value_sets), ids=ids)(
        group_fixture)
    return tuple(pytest.fixture(_member(group, i)) for i in range(width))


def _member(group: str, index: int) -> Callable[..., Any]:
    def member(**kwargs: Any) -> Any:
        return kwargs[group][index]

    # pytest reads a fixture's dependencies from its signature.
    member.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter(group, inspect.Parameter.KEYWORD_ONLY)])
    return member


def parametrize_targets(*targets: Any) -> Any:
    """Run a test once per target: bare ``@parametrize_targets`` uses ``enabled_targets()``,
    ``@parametrize_targets("llvm", "cuda")`` the given ones (skipping those that cannot run).
    The test takes ``target`` and optionally ``dev``."""
    if len(targets) == 1 and callable(targets[0]) and not isinstance(targets[0], str):
        return _parametrize(None)(targets[0])
    return _parametrize(targets or None)


def _parametrize(targets: Iterable[Any] | None) -> Callable[[_F], _F]:
    def decorator(func: _F) -> _F:
        import pytest

        names = inspect.signature(func).parameters
        if "target" not in names:
            raise TypeError(f"parametrize_targets: {func.__name__} must take a 'target' argument")
        chosen = [t for t, _ in enabled_targets()] if targets is None else list(targets)
        with_dev = "dev" in names
        params = []
        for target in chosen:
            # Targets named explicitly run whenever they can; the environment only picks defaults.
            reason = _skip_reason(target)
            marks = [pytest.mark.skip(reason=reason)] if reason else known_failures(func, target)
            values = (target, _target_device(target)) if with_dev else (target,)
            params.append(pytest.param(*values, marks=marks, id=str(target)))
        return pytest.mark.parametrize("target,dev" if with_dev else "target", params)(func)

    return decorator


# -- the testing.* global functions (ffi_funcs.py) ------------------------------------------------
from .ffi_funcs import (  # noqa: E402,F401  (tvm.testing.<name>)
    device_test,
    error_test as ErrorTest,  # noqa: N812  (the Relay-era name)
    object_use_count,
    test_check_eq_callback,
    test_raise_error_callback,
    test_wrap_callback,
)


def known_failing_targets(*targets: str) -> Callable[[_F], _F]:
    """Decorator: the test is known to fail on ``targets`` (kinds, e.g. ``"llvm"``); its runs
    on them (from ``parametrize_targets`` or the plugin's ``target`` fixture) are expected
    to fail (``pytest.mark.xfail``) instead of being failures. Put it below
    ``parametrize_targets``."""
    bad = [t for t in targets if not isinstance(t, str)]
    if bad:
        raise TypeError(f"known_failing_targets: targets are named by str, got {bad!r}")

    def mark(func: _F) -> _F:
        func.tvm_known_failing_targets = tuple(targets)  # type: ignore[attr-defined]
        return func

    return mark


def known_failures(func: Any, target: Any) -> list[Any]:
    """The xfail mark for a run of ``func`` on ``target`` when ``known_failing_targets``
    names its kind, else no marks."""
    import pytest

    failing = getattr(func, "tvm_known_failing_targets", ())
    if _target_kind(target) not in {_target_kind(t) for t in failing}:
        return []
    return [pytest.mark.xfail(reason=f"known to fail on target {_target_kind(target)!r}")]


def echo(*args: Any) -> Any:
    """The registered ``testing.echo`` PackedFunc: returns its argument (round-trips the FFI)."""
    from ..runtime.registry import get_global_func

    return get_global_func("testing.echo")(*args)


def __getattr__(name: str) -> Any:
    # As the Relay-era tvm.testing: every global function "testing.<name>" is tvm.testing.<name>.
    from ..runtime.registry import get_global_func

    func = None if name.startswith("_") else get_global_func(f"testing.{name}", allow_missing=True)
    if func is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return func
