"""Shared test configuration: per-dtype tolerances and ember's pytest marks.

Compare computed results with the numpy reference using the dtype's tolerance::

    def test_add(tol):
        np.testing.assert_allclose(out.numpy(), ref, **tol("float32"))

or ``allclose(out, ref)`` which picks the tolerance from the reference's dtype.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest

from ember.testing import TOLERANCE, assert_allclose, tolerance

# dtype -> (rtol, atol); dtypes not listed (ints, bool) compare exactly.
TOL: dict[str, tuple[float, float]] = TOLERANCE


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: Any) -> int:
    """``-n auto``: one worker per CPU this process may use, a cgroup CPU quota included
    (xdist counts the affinity mask: a 2-CPU container on a large host would get a worker per
    host CPU, each compiling and running threads on the same 2 CPUs); --maxprocesses caps it."""
    from ember.runtime.cpus import usable_cpus

    return usable_cpus()


def pytest_configure(config: Any) -> None:
    import os

    from ember.testing.plugin import MARKS

    # Tile sizes from the cost models: golden C files and tile tests must not depend on what
    # `ember tune` measured on this machine (tests of the records set their own file).
    os.environ.setdefault("EMBER_TUNING_RECORDS", "off")

    for name, doc in MARKS.items():
        config.addinivalue_line("markers", f"{name}: {doc}")

    # No hypothesis example may fail for taking long: CI's 2 loaded cores make any per-example
    # deadline a wall-clock assertion (tests never assert on time).
    try:
        from hypothesis import settings
    except ImportError:
        return
    settings.register_profile("ember", deadline=None)
    settings.load_profile("ember")


@pytest.fixture
def tol() -> Callable[[Any], dict[str, float]]:
    """``tol(dtype)`` -> ``{"rtol": ..., "atol": ...}`` for ``np.testing.assert_allclose``."""
    return tolerance


@pytest.fixture
def allclose() -> Callable[..., None]:
    """``allclose(actual, desired, dtype=None)``: shape check, then the dtype's tolerance
    (``dtype`` defaults to that of ``desired``)."""

    def check(actual: Any, desired: Any, dtype: Any = None) -> None:
        want = desired.numpy() if hasattr(desired, "numpy") else np.asarray(desired)
        assert_allclose(actual, want, **tolerance(dtype or want.dtype))

    return check


def pytest_addoption(parser: Any) -> None:
    # Here, not in tests/tir/conftest.py: options must be known when pytest starts from the root.
    parser.addoption("--update-golden", action="store_true", default=False,
                     help="rewrite the golden generated-C files under tests/tir/golden")
