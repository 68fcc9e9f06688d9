"""Environment switches read in more than one layer (one parser each).

``EMBER_DEBUG``: 0 (or unset/empty) is quiet; 1 logs each build stage and pass with its time;
2 also prints the IR after each pass, the lowered loop IR and the VM bytecode; 3 also the
generated C and the compiler commands.
"""
from __future__ import annotations

import os

from .errors import EnvironmentSettingError

DEBUG_VAR = "EMBER_DEBUG"


def debug_level() -> int:
    """The level set by ``EMBER_DEBUG`` (0 when unset or empty)."""
    raw = os.environ.get(DEBUG_VAR, "").strip()
    if not raw:
        return 0
    try:
        level = int(raw)
    except ValueError:
        raise EnvironmentSettingError(
            f"{DEBUG_VAR}={raw!r}: expected a non-negative integer (0 quiet, 1 stage times, "
            "2 IR, 3 generated C)") from None
    if level < 0:
        raise EnvironmentSettingError(f"{DEBUG_VAR}={raw!r}: expected a non-negative integer")
    return level
