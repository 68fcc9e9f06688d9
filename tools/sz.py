#!/usr/bin/env python3
"""Print code lines per layer of ember (non-blank, non-comment), as a table."""
from __future__ import annotations

import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent / "ember"
LAYERS = ["runtime", "include", "crt", "ir", "te", "tir", "topi", "relay/op", "relay/transform",
          "relay/backend", "relay/frontend", "relay", "contrib", "micro", "testing", "cli"]


def code_lines(path: pathlib.Path) -> int:
    n = 0
    for line in path.read_text(errors="replace").splitlines():
        s = line.strip()
        if s and not s.startswith(("#", "//", "/*", "*")):
            n += 1
    return n


def main() -> int:
    counts: dict[str, int] = {}
    for f in ROOT.rglob("*"):
        if f.suffix not in (".py", ".c", ".h") or "__pycache__" in f.parts:
            continue
        rel = f.relative_to(ROOT).as_posix()
        layer = next((l for l in LAYERS if rel.startswith(l + "/")), "(top)")
        counts[layer] = counts.get(layer, 0) + code_lines(f)
    width = max(map(len, counts)) if counts else 8
    for layer in sorted(counts, key=lambda l: LAYERS.index(l) if l in LAYERS else 99):
        print(f"{layer:<{width}}  {counts[layer]:>7}")
    print(f"{'total':<{width}}  {sum(counts.values()):>7}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
