"""AOT test runners and the pytest parametrisation of the AOT options
(``tvm.micro.testing.aot_test_utils``).

``AOT_DEFAULT_RUNNER`` builds the test program for this machine with the default Makefile of
``ember.testing.aot``; ``AOT_CORSTONE300_RUNNER`` stands for TVM's Arm Corstone-300 reference
system, which ember does not ship: tests parametrised with it are skipped.

``parametrize_aot_options(test)`` runs ``test(interface_api, use_unpacked_api, test_runner)``
over the combinations the calling-convention rules allow (RFC 0046, and the AOT rules of
``ember.relay.backend.aot.calling_convention``): interface ``packed`` or ``c`` x operator
calls packed or unpacked, except the C interface with packed operator calls (rule R2: the C
interface calls every operator directly), and the reference-system runner only with the C
interface and unpacked calls.
"""
from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any, TypeVar

from ...testing.aot import AOTTestRunner

_F = TypeVar("_F", bound=Callable[..., Any])

AOT_DEFAULT_RUNNER = AOTTestRunner()

# TVM's Arm Corstone-300 runner (an FVP with its own Makefile): not available in ember.
AOT_CORSTONE300_RUNNER = AOTTestRunner(makefile="corstone300", prologue="UartStdOutInit();",
                                       includes=("uart.h",),
                                       pass_config={"relay.ext.cmsisnn.options":
                                                    {"mcpu": "cortex-m55"}})

_UNAVAILABLE = {id(AOT_CORSTONE300_RUNNER): "the Arm Corstone-300 reference system is not "
                                           "available in ember"}


def valid_aot_options() -> list[tuple[str, bool, AOTTestRunner]]:
    """``(interface_api, use_unpacked_api, test_runner)`` combinations the rules allow."""
    combos = itertools.product(("packed", "c"), (True, False),
                               (AOT_DEFAULT_RUNNER, AOT_CORSTONE300_RUNNER))
    return [(api, unpacked, runner) for api, unpacked, runner in combos
            if not (api == "c" and not unpacked)
            and not (runner is AOT_CORSTONE300_RUNNER and (api == "packed" or not unpacked))]


def _runner_id(runner: AOTTestRunner) -> str:
    return "corstone300" if runner is AOT_CORSTONE300_RUNNER else runner.makefile


def parametrize_aot_options(test: _F) -> _F:
    """Parametrise ``test`` over ``interface_api``, ``use_unpacked_api`` and ``test_runner``
    (see the module doc); unavailable runners, and a missing C compiler or make, skip."""
    import pytest

    from ...testing import find_c_compiler

    params = []
    for api, unpacked, runner in valid_aot_options():
        marks = []
        if id(runner) in _UNAVAILABLE:
            marks.append(pytest.mark.skip(reason=_UNAVAILABLE[id(runner)]))
        params.append(pytest.param(api, unpacked, runner, marks=marks,
                                   id=f"{api}-{'unpacked' if unpacked else 'packed'}-"
                                      f"{_runner_id(runner)}"))
    test = pytest.mark.skipif(find_c_compiler() is None or not _have_make(),
                              reason="needs a C compiler and make")(test)
    return pytest.mark.parametrize(("interface_api", "use_unpacked_api", "test_runner"),
                                   params)(test)


def _have_make() -> bool:
    import shutil

    return shutil.which("make") is not None


__all__ = ["AOT_CORSTONE300_RUNNER", "AOT_DEFAULT_RUNNER", "parametrize_aot_options",
           "valid_aot_options"]
