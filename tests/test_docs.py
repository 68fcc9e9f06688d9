"""Every fenced ``python``, ``sh`` and ``c`` block of README.md and docs/*.md runs.

Conventions, as HTML comments on the lines right before a block (invisible when rendered):

- ``<!-- not-run: REASON -->``: the block is illustrative only and is not run. Kept rare
  (``MAX_NOT_RUN`` in all), and the reason is required.
- ``<!-- file: NAME -->``: the block is written to ``NAME`` instead of run; a later ``sh``
  block builds or uses it. Every ``c`` block needs one (a C fragment is not a program).

and anywhere in a page, ``<!-- slow: REASON -->`` marks the page's test ``slow``.

The blocks of one page run in order in one fresh directory: ``python`` blocks in one namespace
in this process (as a reader pastes them into one session), ``sh`` blocks with ``bash -e -o
pipefail`` and a ``PATH`` that starts with this interpreter's directory, so ``ember`` and
``python`` are this installation's. Other blocks (``text``, unlabelled) are not code.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
RUN = ("python", "sh", "c")
MAX_NOT_RUN = 6
_FENCE = re.compile(r"^```(\w*)\s*$")
_MARK = re.compile(r"^<!-- (not-run|file|slow): (.+?) -->\s*$")


@dataclass
class Block:
    page: Path
    line: int      # 1-based line of the opening fence
    lang: str
    code: str
    marks: dict[str, str]

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    """The fenced blocks of ``page`` with the markers right above each."""
    lines = page.read_text().splitlines()
    out, i = [], 0
    while i < len(lines):
        fence = _FENCE.match(lines[i])
        if not fence:
            i += 1
            continue
        marks, k = {}, i - 1
        while k >= 0 and (m := _MARK.match(lines[k])):
            marks[m.group(1)] = m.group(2)
            k -= 1
        end = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == "```"), None)
        assert end is not None, f"{page.name}:{i + 1}: a code block is not closed"
        out.append(Block(page, i + 1, fence.group(1), "\n".join(lines[i + 1:end]) + "\n", marks))
        i = end + 1
    return out


def runnable(page: Path) -> list[Block]:
    return [b for b in blocks(page) if b.lang in RUN and "not-run" not in b.marks]


def _param(page: Path) -> Any:
    slow = any(_MARK.match(line) and "slow:" in line for line in page.read_text().splitlines())
    return pytest.param(page, id=page.name, marks=[pytest.mark.slow] if slow else [])


def _run_sh(block: Block, cwd: Path) -> None:
    env = dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep
               + os.environ.get("PATH", ""), EMBER_PROGRESS="0")
    proc = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", block.code], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=900, check=False)
    if proc.returncode != 0:
        pytest.fail(f"{block.where}: sh block exited {proc.returncode}\n--- stdout\n"
                    f"{proc.stdout[-3000:]}\n--- stderr\n{proc.stderr[-3000:]}")


@pytest.mark.parametrize("page", [_param(p) for p in PAGES if runnable(p)])
def test_page_blocks_run(page: Path, tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, Any] = {"__name__": "__docs__"}
    for block in runnable(page):
        if "file" in block.marks:
            (tmp_path / block.marks["file"]).write_text(block.code)
        elif block.lang == "python":
            exec(compile(block.code, block.where, "exec"), namespace)  # noqa: S102
        elif block.lang == "sh":
            _run_sh(block, tmp_path)
        else:
            pytest.fail(f"{block.where}: a c block needs <!-- file: NAME --> above it")


def test_markers_are_rare_and_explained() -> None:
    skipped = [b for p in PAGES for b in blocks(p) if "not-run" in b.marks]
    assert len(skipped) <= MAX_NOT_RUN, [b.where for b in skipped]
    for b in skipped:
        assert len(b.marks["not-run"].split()) >= 3, f"{b.where}: say why the block is not run"
    for p in PAGES:
        for b in blocks(p):
            assert b.lang != "c" or b.marks, f"{b.where}: a c block needs a file or not-run mark"


def test_the_parser_sees_markers_and_fences(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("text\n<!-- file: a.c -->\n```c\nint x;\n```\n\n<!-- not-run: needs a "
                    "board -->\n```sh\nflash\n```\n```text\nout\n```\n")
    found = blocks(page)
    assert [(b.lang, b.line, b.code, b.marks) for b in found] == [
        ("c", 3, "int x;\n", {"file": "a.c"}), ("sh", 8, "flash\n", {"not-run": "needs a board"}),
        ("text", 11, "out\n", {})]
    assert [b.lang for b in runnable(page)] == ["c"]
