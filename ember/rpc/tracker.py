"""``ember.rpc.tracker`` (``tvm.rpc.tracker``): see ``ember.runtime.rpc.tracker``."""
from __future__ import annotations

from ..runtime.rpc.tracker import Tracker, TrackerSession, connect_tracker, main  # noqa: F401
