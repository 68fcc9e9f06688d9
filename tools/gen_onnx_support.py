#!/usr/bin/env python3
"""Write docs/onnx_support.md from the ONNX frontend's support table (``--check``: exit 1 if
the committed file differs instead of writing it)."""
from __future__ import annotations

import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "onnx_support.md"


def main(argv: list[str]) -> int:
    sys.path.insert(0, str(ROOT))
    from ember.relay.frontend.onnx import support_markdown

    text = support_markdown()
    if "--check" in argv:
        if not DOC.exists() or DOC.read_text() != text:
            print(f"{DOC} is out of date: run python tools/gen_onnx_support.py")
            return 1
        return 0
    DOC.write_text(text)
    print(f"wrote {DOC}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
