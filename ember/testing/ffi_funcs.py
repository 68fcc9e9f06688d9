"""The ``testing.*`` global functions of the Relay-era runtime, which test suites call to
exercise the FFI: ``tvm.testing.echo(x)``, ``tvm.testing.device_test(dev, type, id)``,
``tvm.testing.object_use_count(obj)``, ``tvm.testing.test_wrap_callback(f)``,
``tvm.testing.test_raise_error_callback("OpNotImplemented: msg")``,
``tvm.testing.test_check_eq_callback(msg)``, ``tvm.testing.ErrorTest(x, y)``.

Each is registered as a global function (``get_global_func("testing.device_test")``) when
``ember.testing`` is imported, and ``ember.testing.<name>`` reaches every ``testing.<name>``
global function, as the Relay-era ``tvm.testing`` did.

An error raised by a callback comes out as the kind its message names: the message
``"OpNotImplemented: myop"`` raises ``ember.error.OpNotImplemented`` (a NotImplementedError),
as an error coming back from compiled code with that message does.
"""
from __future__ import annotations

import sys
from typing import Any, Callable

from ..runtime._bridge import error_from_message
from ..runtime.device import Device
from ..runtime.packed_func import PackedFunc
from ..runtime.registry import register_func


def device_test(dev: Device, device_type: int, device_id: int) -> Device:
    """``dev`` back after checking that it has ``device_type`` and ``device_id`` (a device
    crosses the FFI as a value); ValueError naming what differs."""
    if not isinstance(dev, Device):
        raise TypeError(f"testing.device_test: argument 0 must be a Device, got "
                        f"{type(dev).__name__}")
    if dev.device_type != device_type or dev.device_id != device_id:
        raise ValueError(f"testing.device_test: got {dev} (device_type {dev.device_type}, "
                         f"device_id {dev.device_id}), expected device_type {device_type}, "
                         f"device_id {device_id}")
    return dev


def object_use_count(obj: Any) -> int:
    """How many references to ``obj`` exist outside this call (1 when one variable of the
    caller holds it). ember's objects are Python objects: this is their reference count, less
    the references the call itself makes."""
    return sys.getrefcount(obj) - 2  # the argument of this call and that of getrefcount


def test_wrap_callback(callback: Callable[[], Any]) -> PackedFunc:
    """A PackedFunc that calls ``callback()``; an exception it raises passes up unchanged,
    through any number of wrappers (each level is one more frame of the traceback)."""
    if not callable(callback):
        raise TypeError(f"testing.test_wrap_callback: expected a callable, got "
                        f"{type(callback).__name__}")

    def wrapped() -> None:
        callback()

    return PackedFunc(wrapped, "testing.test_wrap_callback.wrapped")


def test_raise_error_callback(message: str) -> PackedFunc:
    """A PackedFunc that raises the error ``message`` names: ``"OpNotImplemented: myop"``
    raises ember.error.OpNotImplemented, ``"ValueError: x"`` a ValueError (a TVMError too),
    a message with no known kind a TVMError."""
    if not isinstance(message, str):
        raise TypeError(f"testing.test_raise_error_callback: expected a str, got "
                        f"{type(message).__name__}")

    def raise_error() -> None:
        raise error_from_message(message)

    return PackedFunc(raise_error, "testing.test_raise_error_callback.raise_error")


def test_check_eq_callback(message: str) -> PackedFunc:
    """A PackedFunc ``f(x, y)`` that raises the error ``message`` names (as
    ``test_raise_error_callback``) when ``x != y``."""
    if not isinstance(message, str):
        raise TypeError(f"testing.test_check_eq_callback: expected a str, got "
                        f"{type(message).__name__}")

    def check_eq(x: Any, y: Any) -> None:
        if x != y:
            raise error_from_message(f"{message}\nCheck failed: x == y ({x!r} vs. {y!r})")

    return PackedFunc(check_eq, "testing.test_check_eq_callback.check_eq")


def error_test(x: int, y: int) -> None:
    """``testing.ErrorTest``: raises ValueError (a TVMError too) unless ``x == y``."""
    if x != y:
        raise error_from_message(f"ValueError: testing.ErrorTest: expect x and y to be equal, "
                                 f"got {x!r} and {y!r}")


# Named test_* after the Relay-era functions; they are not tests for pytest to collect.
for _func in (test_wrap_callback, test_raise_error_callback, test_check_eq_callback):
    _func.__test__ = False  # type: ignore[attr-defined]

for _name, _func in (("device_test", device_test), ("object_use_count", object_use_count),
                     ("test_wrap_callback", test_wrap_callback),
                     ("test_raise_error_callback", test_raise_error_callback),
                     ("test_check_eq_callback", test_check_eq_callback),
                     ("ErrorTest", error_test)):
    register_func(f"testing.{_name}", _func, override=True)
