"""Micro tests (Model Library Format, the standalone C build, the AOT test runner): the shared
models and build helpers (``_micro_models``) sit beside this file."""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
