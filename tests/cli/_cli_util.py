"""Helpers of the ``ember`` command's tests: run it in-process or as a subprocess, check PNGs."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ember.testing import find_c_compiler

needs_cc = pytest.mark.skipif(find_c_compiler() is None, reason="no C compiler found")
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def call(capsys: Any, *argv: str) -> tuple[int, str, str]:
    """``ember ARGV`` in this process: (exit status, stdout, stderr)."""
    from ember.cli import main

    try:
        code = main([str(a) for a in argv])
    except SystemExit as exc:  # argparse: --help (0) and usage errors (2)
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def spawn(*argv: str, cwd: str | os.PathLike[str] | None = None,
          env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m ember ARGV`` as a subprocess (a fresh interpreter, as a user runs it)."""
    return subprocess.run([sys.executable, "-m", "ember", *map(str, argv)], check=False,
                          capture_output=True, text=True, cwd=cwd,
                          env={**os.environ, **(env or {})}, timeout=600)


def check_png(path: Path, min_colors: int = 4) -> None:
    """``path`` is a PNG that matplotlib drew something in: the signature, then at least
    ``min_colors`` distinct colours in the decoded image (a blank canvas has one or two)."""
    import matplotlib.image

    assert path.read_bytes()[:8] == PNG_SIGNATURE, f"{path} is not a PNG"
    pixels = matplotlib.image.imread(path)
    assert pixels.ndim == 3 and pixels.shape[0] > 100 and pixels.shape[1] > 100
    colors = np.unique(pixels.reshape(-1, pixels.shape[-1]).round(3), axis=0)
    assert len(colors) >= min_colors, f"{path}: only {len(colors)} colours"


def one_line_error(err: str, *, contains: str) -> None:
    """stderr holds ``ember ...: error: ...contains...`` and a hint, and no traceback."""
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines and "error:" in lines[0] and contains in lines[0], err
    assert lines[-1].startswith("hint: "), err


def reference(workload: tuple[Any, dict[str, Any]], x: np.ndarray) -> np.ndarray:
    """The reference interpreter's output (numpy kernels) for input ``x``."""
    from ember import relay

    mod, params = workload
    return relay.create_executor("debug", mod=mod).evaluate()(x, **params).numpy()
