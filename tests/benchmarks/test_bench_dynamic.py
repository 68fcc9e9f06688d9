"""benchmarks/bench_dynamic.py: the twins it makes (symbolic input, reshapes that follow it),
a smoke run and its JSON. Nothing here asserts on a measured time."""
from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import pytest

from ember.ir.types import Any as AnyDim
from ember.relay.transform import InferType

pytest.importorskip("onnx")

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))
bench = importlib.import_module("bench_dynamic")
twins = importlib.import_module("_dynamic_twins")


def _types_at_each_shape(twin: str) -> list[tuple[int, ...]]:
    """The twin's output shape at each of its shapes (type inference only, no build)."""
    t = bench.TWINS[twin]
    mod = bench.twin_module(twin, bench.probe_module(t.model, {}, False))
    assert isinstance(mod["main"].params[0].type_annotation.shape[t.axes[0]], AnyDim)
    outs = []
    for shape in t.shapes:
        ty = InferType()(twins.with_input_shape(mod, shape))["main"].checked_type.ret_type
        ty = ty.fields[0] if hasattr(ty, "fields") else ty
        outs.append(tuple(int(d) for d in ty.shape))
    return outs


# cheap twins of each kind: batch, sequence (transformer), audio length, image width, H and W
@pytest.mark.parametrize("twin", ["mlp", "transformer", "wav2vec2/len", "crnn/width", "unet/hw"])
def test_twins_type_check_at_every_shape(twin):
    outs = _types_at_each_shape(twin)
    shapes = bench.TWINS[twin].shapes
    if 0 in bench.TWINS[twin].axes:  # the batch follows the input
        assert [o[0] for o in outs] == [s[0] for s in shapes]
    assert len(set(outs)) == len(outs)


@pytest.mark.slow
@pytest.mark.parametrize("twin", sorted(bench.TWINS))
def test_every_twin_type_checks_at_every_shape(twin):
    outs = _types_at_each_shape(twin)
    assert len(outs) >= 3


@pytest.mark.slow
@pytest.mark.parametrize("twin", sorted(bench.TWINS))
def test_every_twin_equals_its_static_builds(twin):
    """The dynamic build at each shape (1, sizes that are no multiple of a tile) against
    the static build of that shape."""
    zoo = next(iter(bench.zoo_models([bench.TWINS[twin].model], small=True)))
    case = bench.build_case(twin, zoo, threads=1)
    assert len(case.shapes) >= 3 and any(1 in s for s in case.shapes)
    assert case.checked == [True] * len(case.shapes)


def test_the_default_run_names_known_twins_of_every_kind():
    assert set(bench.DEFAULT_TWINS) <= set(bench.TWINS)
    kinds = {name.partition("/")[2] for name in bench.DEFAULT_TWINS}
    assert {"", "hw", "width", "len"} <= kinds


def test_smoke_run_checks_every_twin_against_its_static_build(tmp_path, capsys):
    out = tmp_path / "dynamic.json"
    code = bench.main(["--models", "mlp,transformer", "--threads", "1", "--min-time", "0.01",
                       "--rounds", "1", "--unseen", "2", "--json", str(out)])
    assert code == 0
    rows = json.loads(out.read_text())["rows"]
    assert {r["model"] for r in rows} == {"mlp", "transformer"}
    assert len(rows) == 6 and all(r["correct"] for r in rows)
    assert all(r["static_ms"] > 0 and r["dynamic_ms"] > 0 and r["unseen_ms"] > 0 for r in rows)
    # onnxruntime on each twin as a dynamic ONNX model, checked against the static build
    assert all(r["ort_ms"] > 0 and r["ort_correct"] and not r["ort_note"] for r in rows)
    printed = capsys.readouterr().out
    assert "WRONG" not in printed and "ORT-DIFF" not in printed
    assert "u.ratio" in printed and "d/ort" in printed


@pytest.mark.parametrize("n", [2, 4, 6])
def test_balanced_orders_put_each_item_after_each_other_once(n):
    orders = bench.balanced_orders(n)
    assert len(orders) == n and all(sorted(o) == list(range(n)) for o in orders)
    pairs = [(o[i], o[i + 1]) for o in orders for i in range(n - 1)]
    assert sorted(pairs) == [(a, b) for a in range(n) for b in range(n) if a != b]


def test_unseen_columns_change_order_so_each_follows_the_others(monkeypatch):
    """unseen_columns times its columns in balanced_orders' orders, round after round (the
    block right after another build's ran slower for all of its calls), and the unseen column
    alone runs with one signature kept."""
    calls: list[tuple[str, int, int]] = []  # (model, input index, SIGNATURES) per call

    class Model:
        def __init__(self, name: str) -> None:
            self.name = name
            self._pool = type("Pool", (), {"free": []})()

        def __call__(self, x: object) -> None:
            calls.append((self.name, inputs.index(x), bench.static_plan.SIGNATURES))

    inputs = [object(), object()]
    case = bench.Case("stub", 1, Model("dynamic"), [(1,), (2,)],
                      [Model("static0"), Model("static1")], inputs, [True, True])
    monkeypatch.setattr(bench, "UNSEEN_TIME", 0.0)
    saved = bench.static_plan.SIGNATURES
    bench.unseen_columns(case, 0, 4 * bench.UNSEEN_BLOCK, lambda: 0.0)
    assert bench.static_plan.SIGNATURES == saved
    # the calls come in pairs (the first model, then the timed one at shape 0); a column is
    # told by its first call, and its blocks by the runs of that
    assert all(c[:2] in (("dynamic", 0), ("static0", 0)) for c in calls[1::2])
    firsts = calls[0::2]
    blocks = [c for i, c in enumerate(firsts) if i == 0 or c != firsts[i - 1]]
    # (unseen, d.after, s.after, s.each), four rounds
    columns = [("dynamic", 1, 1), ("dynamic", 1, saved), ("static1", 1, saved),
               ("static0", 0, saved)]
    assert blocks == [columns[c] for order in bench.balanced_orders(4) for c in order]
    assert len(firsts) == 4 * 4 * (bench.UNSEEN_BLOCK + 1)


@pytest.mark.parametrize("args, message", [
    (["--models", "alexnet"], "unknown twins"),
    (["--threads", "0"], "--threads"),
    (["--threads", "one"], "--threads"),
])
def test_bad_arguments_are_named(args, message, capsys):
    with pytest.raises(SystemExit):
        bench.main(args)
    assert message in capsys.readouterr().err
