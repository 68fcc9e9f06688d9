"""tir test options: ``pytest --update-golden`` rewrites tests/tir/golden/*.c."""
from __future__ import annotations

import os
from typing import Any

import pytest


def pytest_addoption(parser: Any) -> None:
    try:
        parser.addoption("--update-golden", action="store_true", default=False,
                         help="rewrite the golden generated-C files under tests/tir/golden")
    except ValueError:  # already added by another conftest
        pass


@pytest.fixture
def update_golden(request: Any) -> bool:
    """True under ``--update-golden`` (or EMBER_UPDATE_GOLDEN=1)."""
    try:
        opt = bool(request.config.getoption("--update-golden"))
    except ValueError:
        opt = False
    return opt or os.environ.get("EMBER_UPDATE_GOLDEN") == "1"
