"""EMBER_DEBUG is parsed in one place (ember/runtime/env.py)."""
from __future__ import annotations

import pytest

from ember.runtime.env import debug_level
from ember.runtime.errors import EnvironmentSettingError


@pytest.mark.parametrize("raw, level", [(None, 0), ("", 0), (" 0 ", 0), ("1", 1), ("3", 3)])
def test_debug_level(monkeypatch, raw, level):
    if raw is None:
        monkeypatch.delenv("EMBER_DEBUG", raising=False)
    else:
        monkeypatch.setenv("EMBER_DEBUG", raw)
    assert debug_level() == level


@pytest.mark.parametrize("raw", ["yes", "-1", "1.5"])
def test_a_bad_debug_level_names_the_variable(monkeypatch, raw):
    monkeypatch.setenv("EMBER_DEBUG", raw)
    with pytest.raises(EnvironmentSettingError, match="EMBER_DEBUG"):
        debug_level()
    assert issubclass(EnvironmentSettingError, ValueError)
