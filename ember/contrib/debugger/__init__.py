"""``tvm.contrib.debugger``: the debug graph executor (see ``debug_executor``)."""
from __future__ import annotations

from . import debug_executor  # noqa: F401
