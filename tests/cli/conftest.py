"""Fixtures of the ``ember`` command's tests: model files written once per session, and
libraries compiled from them once (in-process) for the run/inspect tests."""
from __future__ import annotations

import contextlib
import io
import os
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from ember.testing import find_c_compiler


def _relay_text(mod: Any, params: dict[str, Any]) -> str:
    """``mod`` with its weights bound as constants, printed with the metadata section."""
    from ember.relay.build_module import bind_params_by_name

    bound = mod.copy()
    bound["main"] = bind_params_by_name(mod["main"], params)
    return bound.astext(show_meta_data=True)


@pytest.fixture(scope="session")
def models(tmp_path_factory: Any) -> dict[str, Any]:
    """``small.relay`` (an MLP on 1x1x4x4 inputs, small weights) and ``mlp.relay`` (the
    demo's bundled MLP), with their modules for reference results."""
    from ember.relay.testing import mlp

    root = tmp_path_factory.mktemp("cli_models")
    out: dict[str, Any] = {"dir": root}
    for name, kwargs in (("small", {"image_shape": (1, 4, 4)}), ("mlp", {})):
        mod, params = mlp.get_workload(batch_size=1, **kwargs)
        path = root / f"{name}.relay"
        path.write_text(_relay_text(mod, params))
        out[name] = path
        out[f"{name}_workload"] = (mod, params)
    return out


@pytest.fixture(scope="session")
def built(models: dict[str, Any], tmp_path_factory: Any) -> dict[str, Path]:
    """``small.relay`` compiled by ``ember compile`` with each executor: {executor: .so}."""
    from ember.cli import main

    if find_c_compiler() is None:
        pytest.skip("no C compiler found")
    root = tmp_path_factory.mktemp("cli_built")
    out = {}
    for executor in ("aot", "graph", "vm"):
        path = root / f"small-{executor}.so"
        with contextlib.redirect_stdout(io.StringIO()):
            code = main(["compile", str(models["small"]), "--executor", executor, "-o",
                         str(path), "--threads", "1"])
        assert code == 0 and path.is_file()
        out[executor] = path
    return out
