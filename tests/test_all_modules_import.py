"""Every module of the package imports on this interpreter (CI runs this on Python 3.10, the
oldest supported: a 3.11-only name or syntax anywhere fails here, not at a user's site)."""
from __future__ import annotations

import importlib
import pkgutil

import pytest

import ember

MODULES = sorted(m.name for m in pkgutil.walk_packages(ember.__path__, "ember.")
                 if m.name != "ember.__main__")


@pytest.mark.parametrize("name", MODULES)
def test_module_imports(name):
    importlib.import_module(name)
