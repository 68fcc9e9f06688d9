"""The support table is the one source of truth: docs/onnx_support.md is generated from it,
and every operator it lists is exercised against onnxruntime by some test here."""
from __future__ import annotations

import re
from pathlib import Path

from ember.relay.frontend.onnx import SUPPORT, support_markdown
from ember.relay.frontend.onnx._versions import versions

ROOT = Path(__file__).resolve().parents[3]


def test_committed_doc_is_generated_from_the_table():
    doc = ROOT / "docs" / "onnx_support.md"
    assert doc.read_text() == support_markdown(), (
        "docs/onnx_support.md is out of date: run python tools/gen_onnx_support.py")


def test_table_entries_are_complete():
    for name, entry in SUPPORT.items():
        assert callable(entry.convert), name
        assert entry.note and "|" not in entry.note, name


def test_table_versions_are_the_operators_own():
    """Every operator is one of onnx.defs; a ``since`` above 1 is one of its versions after
    the first (with the reason older ones are refused); attributes read as inputs stop at a
    version where the input appeared."""
    for name, entry in SUPPORT.items():
        known = versions(name)
        assert known, f"{name} is not an operator of the default ONNX domain"
        if entry.since > 1:
            assert entry.since in known[1:] and entry.older, name
        if entry.attr_inputs:
            assert entry.attr_inputs_until in known, name


def test_every_supported_operator_has_a_test():
    text = "\n".join(p.read_text() for p in Path(__file__).parent.glob("test_onnx_*.py"))
    quoted = set(re.findall(r'"([A-Z][A-Za-z0-9]+)"', text))
    missing = sorted(set(SUPPORT) - quoted)
    assert not missing, f"operators without a test against onnxruntime: {missing}"
