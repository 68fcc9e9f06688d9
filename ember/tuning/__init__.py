"""The measured tile search: ``ember.tune`` (``tasks.py``) finds a model's GEMM and conv kernel
calls, times tile candidates for each on a C harness (``harness.py``, ``search.py``) and writes
the best to the tuning records that builds read (``ember/topi/tile_records.py``)."""
from __future__ import annotations

from .search import Outcome
from .tasks import TuneResult, extract_tasks, tune

__all__ = ["Outcome", "TuneResult", "extract_tasks", "tune"]
