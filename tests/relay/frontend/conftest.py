"""Make ``strategies`` (tests/) and ``_onnx_util`` (this folder) importable under any
pytest import mode (``--import-mode=importlib`` does not put test folders on sys.path)."""
from __future__ import annotations

import sys
from pathlib import Path

for _folder in (Path(__file__).parent, Path(__file__).parents[2]):
    if str(_folder) not in sys.path:
        sys.path.insert(0, str(_folder))
