"""The round-trip law over random well-typed modules (``program_strategies.modules``): for
every module m that type-checks, parse(astext(m)) is structurally equal to m, sharing
included; printing the parse gives the same text; and the text of the type-inferred module
(with its ``/* ty= */`` comments), or printed with ``annotate=``, parses back to m too."""
from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings

from program_strategies import modules

from ember import relay
from ember.ir import assert_structural_equal
from ember.ir._text_common import decode_array
from ember.ir.parser import fromtext

# Big modules are the point here; hypothesis would flag them as slow to draw.
_SUPPRESS = [HealthCheck.too_slow, HealthCheck.data_too_large]


def metadata_table(text: str) -> dict:
    """The ``init_meta_table`` that the metadata section of ``text`` stands for."""
    if "\n#[metadata]\n" not in text:
        return {}
    table = json.loads(text.split("\n#[metadata]\n", 1)[1])
    return {kind: [decode_array(r) for r in records] for kind, records in table.items()}


def check_round_trip(mod) -> None:
    typed = relay.transform.InferType()(mod)  # well-typed by construction: must not raise
    text = mod.astext()
    again = fromtext(text)
    assert_structural_equal(again, mod)
    assert again.astext() == text
    assert_structural_equal(fromtext(typed.astext()), mod)
    spans = again.astext(annotate=lambda e: str(e.span) if e.span else "")
    assert_structural_equal(fromtext(spans), mod)
    # without the section, the same text parses given the constants from elsewhere
    bare = mod.astext(show_meta_data=False)
    assert "#[metadata]" not in bare
    assert_structural_equal(fromtext(bare, init_meta_table=metadata_table(text)), mod)


@settings(max_examples=50, deadline=None, suppress_health_check=_SUPPRESS)
@given(mod=modules())
def test_random_modules_round_trip(mod):
    check_round_trip(mod)


@pytest.mark.slow
@settings(max_examples=500, deadline=None, suppress_health_check=_SUPPRESS)
@given(mod=modules(max_globals=5, max_depth=4))
def test_random_modules_round_trip_many(mod):
    check_round_trip(mod)
