"""ONNX's backend node tests (``onnx.backend.test``, the conformance suite inside the ``onnx``
package) through ``EmberBackend``, against the outputs ONNX's reference gives, with ONNX's
own comparison and tolerances.

The tests are those of opsets up to ``MAX_OPSET`` (``ember/testing/onnx_node_tests.py``).
Every test must pass except those in ``onnx_node_xfail.txt`` (one per line: the name, then
why), which are strict expected failures: one that passes is an error, so the list only
shrinks (delete its line). ``benchmarks/onnx_node_coverage.py --write-xfail`` writes the list
from a sweep.

The default run takes a representative part: for each operator, the first test (plain
before ``_expanded``, fewer operators first, then by name) that adds an operator no earlier
choice covered; the other tests are ``slow``.
"""
from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("onnx", reason="the node tests come with the onnx package")

from ember.contrib import cc  # noqa: E402
from ember.testing.onnx_backend import EmberBackend  # noqa: E402
from ember.testing.onnx_node_tests import (  # noqa: E402
    NodeTest,
    load_node_tests,
    run_node_test,
)

XFAIL_FILE = Path(__file__).with_name("onnx_node_xfail.txt")
TESTS = load_node_tests()
BY_NAME = {t.name: t for t in TESTS}


def read_xfail(path: Path) -> dict[str, str]:
    """name -> reason from the expected-failure file; ValueError naming the line for a line
    without a reason, a repeated name, or a name that is not a node test."""
    out: dict[str, str] = {}
    for number, line in enumerate(path.read_text().splitlines(), 1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        name, _, reason = text.partition(" ")
        where = f"{path.name}:{number}"
        if not reason.strip():
            raise ValueError(f"{where}: {name!r} has no reason (write why after the name)")
        if name in out:
            raise ValueError(f"{where}: {name!r} is listed twice")
        if name not in BY_NAME:
            raise ValueError(f"{where}: {name!r} is not a node test of the installed onnx "
                             f"(opsets up to the checked range); delete the line")
        out[name] = reason.strip()
    return out


XFAIL = read_xfail(XFAIL_FILE)


def representative(tests: list[NodeTest], skip: set[str]) -> set[str]:
    """Names of the tests that first cover each operator (see the module docstring)."""
    covered: set[tuple[str, str]] = set()
    chosen = set()
    order = sorted(tests, key=lambda t: ("_expanded" in t.name, len(t.operators), t.name))
    for test in order:
        if test.name not in skip and not test.operators <= covered:
            chosen.add(test.name)
            covered |= test.operators
    return chosen


DEFAULT = representative(TESTS, set(XFAIL))


def _param(test: NodeTest) -> object:
    marks = []
    if test.name in XFAIL:
        marks.append(pytest.mark.xfail(reason=XFAIL[test.name], strict=True))
    if test.name not in DEFAULT:
        marks.append(pytest.mark.slow)
    return pytest.param(test.name, marks=marks, id=test.name)


@pytest.mark.skipif(cc.get_cc() is None, reason="no C compiler found")
@pytest.mark.parametrize("name", [_param(t) for t in TESTS])
def test_node(name: str) -> None:
    test = BY_NAME[name]
    outcome = run_node_test(EmberBackend, test, threads=1)
    assert outcome.status == "pass", f"{name}: {outcome.status}: {outcome.message}"


def test_default_run_covers_every_passing_operator() -> None:
    """Every operator of a test expected to pass is run by the default run."""
    expected = [t for t in TESTS if t.name not in XFAIL]
    covered = set().union(*(BY_NAME[n].operators for n in DEFAULT))
    assert set().union(*(t.operators for t in expected)) == covered
    assert len(DEFAULT) < len(expected) / 3  # a part, not the whole sweep


def test_xfail_file_is_read_strictly(tmp_path: Path) -> None:
    name = TESTS[0].name
    cases = {f"{name}\n": "has no reason", f"{name} why\n{name} why\n": "listed twice",
             "test_no_such_node_test why\n": "is not a node test"}
    for text, message in cases.items():
        path = tmp_path / "xfail.txt"
        path.write_text(text)
        with pytest.raises(ValueError, match=message):
            read_xfail(path)
    path.write_text(f"# comment\n\n{name} a reason  with spaces\n")
    assert read_xfail(path) == {name: "a reason  with spaces"}
