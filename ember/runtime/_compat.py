"""Names from newer Pythons, with fallbacks for Python 3.10 (the oldest ember supports)."""
from __future__ import annotations

from typing import Any

try:
    from typing import dataclass_transform
except ImportError:  # Python 3.10: the marker only informs type checkers
    def dataclass_transform(**_: Any) -> Any:  # type: ignore[no-redef]
        return lambda obj: obj

__all__ = ["dataclass_transform"]
