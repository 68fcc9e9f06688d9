"""A pytest plugin giving tests ``target`` and ``dev`` fixtures over the enabled targets.

Opt in with ``pytest_plugins = ["ember.testing.plugin"]`` in a conftest.py. A test that takes
``target`` (or ``dev``) and is not already parametrized over it runs once per entry of
``ember.testing.enabled_targets()`` (from ``$TVM_TEST_TARGETS``, default ``llvm``); with no
runnable target it is skipped. The plugin also registers ember's marks.
"""
from __future__ import annotations

from typing import Any

import pytest

from . import _target_device, enabled_targets, known_failures

MARKS = {"llvm": "needs the host C toolchain (skipped without a C compiler)",
         "micro": "needs micro support and a C compiler",
         "rpc": "needs ember.rpc",
         "gpu": "may use a GPU target (runs on the CPU targets too)",
         "cuda": "needs CUDA (always skipped: ember has no GPU backend)"}


def pytest_configure(config: Any) -> None:
    for name, doc in MARKS.items():
        config.addinivalue_line("markers", f"{name}: {doc}")


def pytest_generate_tests(metafunc: Any) -> None:
    if "target" not in metafunc.fixturenames:
        return
    for mark in metafunc.definition.iter_markers("parametrize"):
        argnames = mark.args[0] if mark.args else mark.kwargs.get("argnames", "")
        names = argnames.split(",") if isinstance(argnames, str) else list(argnames)
        if "target" in (n.strip() for n in names):
            return  # parametrize_targets (or the test itself) already chose the targets
    targets = [pytest.param(t, marks=known_failures(metafunc.function, t), id=str(t))
               for t, _ in enabled_targets()]
    metafunc.parametrize("target", targets)


@pytest.fixture
def dev(target: str) -> Any:
    """The device of the ``target`` under test."""
    return _target_device(target)
