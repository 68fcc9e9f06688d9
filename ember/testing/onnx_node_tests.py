"""ONNX's backend node tests (``onnx.backend.test``): each one a small model of one operator,
its inputs and the outputs ONNX's reference gives. ``tests/relay/frontend/
test_onnx_node_tests.py`` runs them through ``EmberBackend``; ``benchmarks/
onnx_node_coverage.py`` runs all of them through ember and onnxruntime and counts.

::

    tests = load_node_tests()                 # the tests of opsets up to MAX_OPSET, by name
    outcome = run_node_test(EmberBackend, tests[0], threads=1)
    outcome.status                            # "pass", "wrong", "refused" or "failed"

The installed ``onnx`` makes the tests by running its case generators (about 7 s); the
result is kept in ember's cache directory, keyed by the ``onnx`` version and location, so a
later process loads it in a fraction of a second.

Which tests count as *listed*: those whose every node (subgraphs included) is of an
operator, at the version the model's opset gives it, that ``docs/onnx_support.md`` lists as
imported (``unlisted_operators`` is empty).
"""
from __future__ import annotations

import pickle
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

from ..relay.frontend.onnx._graph import _graphs_of
from ..relay.frontend.onnx._domains import lookup
from ..runtime.cache import atomic_write, cache_dir, content_hash

# The tests of models whose default-domain opset is at most this (issue 19's target set).
MAX_OPSET = 21
DEFAULT_DOMAINS = ("", "ai.onnx")
_CACHE_FORMAT = 1


@dataclass(frozen=True)
class NodeTest:
    """One node test: ``model``, ``data_sets`` (pairs of input and expected output lists,
    numpy arrays, lists for sequences, None for an absent optional) and its tolerances."""

    name: str
    model: onnx.ModelProto
    data_sets: tuple[tuple[list[Any], list[Any]], ...]
    rtol: float
    atol: float

    @cached_property
    def opset(self) -> int:
        """The model's default-domain opset (0 when it imports none)."""
        return model_opset(self.model)

    @cached_property
    def operators(self) -> frozenset[tuple[str, str]]:
        """(domain, op_type) of every node, subgraphs included ("" for the default domain)."""
        return frozenset(_operators(self.model.graph))


def model_opset(model: onnx.ModelProto) -> int:
    return max((o.version for o in model.opset_import if o.domain in DEFAULT_DOMAINS),
               default=0)


def _operators(graph: onnx.GraphProto) -> set[tuple[str, str]]:
    """Walk the graph and its subgraphs with a stack (no recursion with nesting depth)."""
    found, stack = set(), [graph]
    while stack:
        for node in stack.pop().node:
            domain = "" if node.domain in DEFAULT_DOMAINS else node.domain
            found.add((domain, node.op_type))
            stack.extend(_graphs_of(node))
    return found


def unlisted_operators(test: NodeTest) -> list[str]:
    """The operators of ``test`` that ember's support table does not list at the version the
    test uses (``domain:op`` or ``Op-version (why)``), sorted; empty: the test is listed."""
    out = []
    for domain, op_type in sorted(test.operators):
        version, _, why = lookup(domain, op_type, test.opset)
        if why is not None:
            out.append(f"{domain}:{op_type}" if domain else f"{op_type}-{version} ({why})")
    return out


def _normalize(value: Any) -> Any:
    """numpy arrays for TensorProtos, recursively through sequences."""
    if isinstance(value, onnx.TensorProto):
        return numpy_helper.to_array(value)
    if isinstance(value, list):
        return [_normalize(v) for v in value]
    return value


def _generate() -> list[NodeTest]:
    from onnx.backend.test.loader import load_model_tests

    with warnings.catch_warnings():  # the generators overflow casts on purpose
        warnings.simplefilter("ignore")
        cases = load_model_tests(kind="node")
    return [NodeTest(c.name, c.model, tuple(([_normalize(v) for v in ins],
                                             [_normalize(v) for v in outs])
                                            for ins, outs in c.data_sets), c.rtol, c.atol)
            for c in cases]


def _cache_path() -> Path:
    where = Path(onnx.__file__).resolve().parent
    key = content_hash(str(_CACHE_FORMAT), onnx.__version__, str(where), np.__version__)
    return cache_dir("onnx_node_tests") / f"{key}.pickle"


def load_node_tests(max_opset: int | None = MAX_OPSET) -> list[NodeTest]:
    """The node tests of the installed ``onnx`` whose default-domain opset is at most
    ``max_opset`` (None: all), sorted by name."""
    path = _cache_path()
    tests = None
    if path.exists():
        try:
            rows = pickle.loads(path.read_bytes())
            tests = [NodeTest(n, onnx.ModelProto.FromString(m), d, r, a)
                     for n, m, d, r, a in rows]
        except (pickle.UnpicklingError, EOFError, ValueError, TypeError):
            tests = None  # a damaged cache file is made again
    if tests is None:
        tests = _generate()
        rows = [(t.name, t.model.SerializeToString(), t.data_sets, t.rtol, t.atol)
                for t in tests]
        atomic_write(path, pickle.dumps(rows, protocol=pickle.HIGHEST_PROTOCOL))
    tests.sort(key=lambda t: t.name)
    return [t for t in tests if max_opset is None or t.opset <= max_opset]


@dataclass(frozen=True)
class Outcome:
    """How one test went: "pass"; "wrong" (outputs differ from ONNX's reference); "refused"
    (``prepare`` raised: import or build); "failed" (``run`` raised)."""

    status: str
    message: str = ""


def _summary(err: BaseException) -> str:
    """The exception's name and message on one line, at most 300 characters."""
    text = " | ".join(line.strip() for line in str(err).strip().splitlines())
    return f"{type(err).__name__}: {text}"[:300]


def check_outputs(test: NodeTest, expected: Sequence[Any], got: Sequence[Any]) -> None:
    """ONNX's own comparison (shapes, dtypes, ``assert_allclose`` at the test's rtol/atol);
    AssertionError naming the test when they differ."""
    from onnx.backend.test.runner import Runner

    Runner.assert_similar_outputs(expected, list(got), test.rtol, test.atol,
                                  model_dir=test.name)


def run_node_test(backend: Any, test: NodeTest, **kwargs: Any) -> Outcome:
    """Prepare ``test.model`` with ``backend`` (an ``onnx.backend.base.Backend``; ``kwargs``
    go to its ``prepare``), run every data set and compare."""
    try:
        rep = backend.prepare(test.model, "CPU", **kwargs)
    except Exception as err:  # noqa: BLE001 - every refusal is an outcome to count
        return Outcome("refused", _summary(err))
    for inputs, expected in test.data_sets:
        try:
            got = rep.run(inputs)
        except Exception as err:  # noqa: BLE001
            return Outcome("failed", _summary(err))
        try:
            check_outputs(test, expected, got)
        except (AssertionError, TypeError) as err:
            return Outcome("wrong", _summary(err))
    return Outcome("pass")
