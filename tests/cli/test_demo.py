"""``ember demo``: every executor checked against the interpreter, JSON, the memory picture,
usage errors."""
import json
import subprocess
import sys

import pytest

from ember.cli import main
from ember.cli.demo import run_demo
from ember.testing import find_c_compiler

needs_cc = pytest.mark.skipif(find_c_compiler() is None, reason="no C compiler found")


@needs_cc
def test_demo_checks_every_executor_against_the_interpreter():
    rows = run_demo("mlp")
    assert [r.executor for r in rows] == ["graph", "aot", "vm"]
    for r in rows:
        assert r.max_abs_err < 1e-4 and r.median_us > 0 and "B" in r.memory


@needs_cc
def test_demo_json_output(capsys):
    assert main(["demo", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {r["executor"] for r in rows} == {"graph", "aot", "vm"}


def test_unknown_command_is_a_usage_error():
    proc = subprocess.run([sys.executable, "-m", "ember", "frobnicate"], check=False,
                          capture_output=True, text=True)
    assert proc.returncode == 2 and "invalid choice" in proc.stderr


def test_unknown_demo_model_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["demo", "--model", "alexnet"])
    assert exc.value.code == 2 and "invalid choice" in capsys.readouterr().err


@needs_cc
def test_demo_prints_the_memory_picture(capsys):
    pytest.importorskip("matplotlib")
    from pathlib import Path

    from _cli_util import check_png

    from ember.runtime.cache import cache_dir

    assert main(["demo"]) == 0
    line = next(s for s in capsys.readouterr().out.splitlines() if s.startswith("memory plan"))
    path = Path(line.rsplit(": ", 1)[1])
    assert path == cache_dir("demo") / "memory-mlp.png"
    check_png(path)
