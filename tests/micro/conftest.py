"""Micro tests (Model Library Format, the standalone C build, the AOT test runner): the shared
models and build helpers (``_micro_models``) sit beside this file."""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import pytest


@pytest.fixture(scope="session")
def host_project(tmp_path_factory):
    """One host micro project shared by the session tests: the MLP on the graph executor
    (module "mlp"), the small CNN on the AOT executor (module "cnn", params not linked), and
    the MLP for AOT's C interface (module "mlpc", which the device's AOT executor refuses)."""
    from _micro_session import build, make_project, needs_toolchain

    if needs_toolchain.args[0]:
        pytest.skip(needs_toolchain.kwargs["reason"])
    factories = {"mlp": build("mlp", "graph", "mlp"), "cnn": build("cnn", "aot", "cnn"),
                 "mlpc": build("mlp", "aot", "mlpc", **{"interface-api": "c",
                                                       "unpacked-api": True})}
    project = make_project(tmp_path_factory.mktemp("micro") / "project",
                           list(factories.values()))
    yield project, factories
    project.stop()
