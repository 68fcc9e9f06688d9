"""tir test options: ``pytest --update-golden`` rewrites tests/tir/golden/*.c."""
from __future__ import annotations

import os
from typing import Any

import pytest


@pytest.fixture
def update_golden(request: Any) -> bool:
    """True under ``--update-golden`` (or EMBER_UPDATE_GOLDEN=1)."""
    try:
        opt = bool(request.config.getoption("--update-golden"))
    except ValueError:
        opt = False
    return opt or os.environ.get("EMBER_UPDATE_GOLDEN") == "1"
