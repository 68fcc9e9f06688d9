"""AOT tests: the shared helpers (``_aot_util``) sit beside this file; everything that compiles
C skips when no C compiler is found."""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
