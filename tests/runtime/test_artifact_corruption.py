"""Truncated and corrupted artifacts, format by format: graph JSON, AOT metadata, the JSON object
format, executor factories and the exported library's module blob. Every truncation fails with
the format's own ember error naming the format (``graph json:``, ``aot metadata:``,
``load_json:``, ``executor factory:``); random byte changes either still parse (text formats
carry no checksum: a digit may change into another) or fail the same way, never with a bare
Python exception; inside an exported library the blob's checksum catches every change."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ember import relay
from ember.runtime import load_module
from ember.runtime.aot_format import MetadataError, parse_metadata
from ember.runtime.errors import ArtifactError, TVMError
from ember.runtime.executor_factory import _load_factory
from ember.runtime.graph_format import GraphFormatError, parse_graph
from ember.runtime.loaders import BLOB_MAGIC
from ember.runtime.serialization import JSONFormatError, load_json, save_json
from ember.testing import find_c_compiler

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _executor_fuzz import factory  # noqa: E402

needs_cc = pytest.mark.skipif(find_c_compiler() is None, reason="no C compiler found")
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[
    HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


def _json_doc() -> str:
    return save_json(relay.add(relay.var("x", shape=(2,)), relay.const(np.ones(2, "float32"))))


def _formats() -> dict[str, tuple]:
    """name -> (loader, data, error class, message prefix)."""
    return {
        "graph": (parse_graph, factory("graph").get_graph_json(), GraphFormatError,
                  "graph json:"),
        "metadata": (parse_metadata, factory("aot-packed").get_executor_config(), MetadataError,
                     "aot metadata:"),
        "json": (load_json, _json_doc(), JSONFormatError, "load_json:"),
        "graph factory": (_load_factory, factory("graph").save_binary(), ArtifactError,
                          "executor factory:"),
        "aot factory": (_load_factory, factory("aot-packed").save_binary(), ArtifactError,
                        "executor factory:"),
        "vm factory": (_load_factory, factory("vm").save_binary(), ArtifactError,
                       "executor factory:"),
    }


FORMATS = ["graph", "metadata", "json", "graph factory", "aot factory", "vm factory"]


@needs_cc
@pytest.mark.parametrize("name", FORMATS)
def test_every_truncation_fails_naming_the_format(name):
    load, data, error, prefix = _formats()[name]
    step = max(1, len(data) // 400)  # every length for small files, ~400 of them for larger
    for cut in range(0, len(data) - 1, step):
        with pytest.raises(error, match=prefix):
            load(data[:cut])


@needs_cc
@SETTINGS
@given(name=st.sampled_from(FORMATS), data=st.data())
def test_changed_bytes_parse_or_fail_with_the_format_error(name, data):
    load, blob, error, prefix = _formats()[name]
    raw = bytearray(blob.encode() if isinstance(blob, str) else blob)
    for _ in range(data.draw(st.integers(1, 3))):
        raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    changed = raw.decode("latin-1") if isinstance(blob, str) else bytes(raw)
    try:
        load(changed)
    except TVMError as err:
        assert isinstance(err, error) and str(err).startswith(prefix), f"{type(err)}: {err}"


@needs_cc
def test_a_section_that_is_not_utf8_is_named():
    data = factory("aot-packed").save_binary()
    header_at = data.rindex(b"#ifndef")  # the C header section
    bad = data[:header_at] + b"\xff" + data[header_at + 1:]
    with pytest.raises(ArtifactError, match="executor factory: aot executor: corrupt section: "
                                            "UnicodeDecodeError"):
        _load_factory(bad)


@needs_cc
@pytest.mark.parametrize("kind, marker", [("graph", b"arg_nodes"), ("graph", b"params"),
                                          ("aot-packed", b"relay_name_hint"), ("vm", b"CODE")])
def test_changes_inside_an_exported_library_are_caught_by_the_blob_checksum(tmp_path, kind,
                                                                           marker):
    path = tmp_path / f"{kind}.so"
    factory(kind).export_library(str(path))
    data = bytearray(path.read_bytes())
    start = data.index(BLOB_MAGIC)
    at = data.index(marker, start)
    data[at + 1] ^= 0x01  # one bit, inside the graph / metadata / code / params
    bad = tmp_path / f"bad_{kind}.so"
    bad.write_bytes(bytes(data))
    with pytest.raises(ArtifactError, match=rf"bad_{kind}\.so: corrupt module blob: checksum "
                                            r"mismatch"):
        load_module(str(bad))
    assert load_module(str(path))  # the untouched file still loads
