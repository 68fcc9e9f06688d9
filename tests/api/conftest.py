"""One-line API tests: the shared tiny models (``_api_models``) sit beside this file."""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
