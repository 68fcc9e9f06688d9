"""``ember tune``: writes records for the bundled MLP and a small conv model, prints a table or
JSON, and reports bad input as one line with a hint."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _cli_util import call, needs_cc, spawn

from ember.topi import tile_records as R

pytestmark = needs_cc


@pytest.fixture(scope="module")
def conv_model(tmp_path_factory: Any) -> Path:
    """A conv + relu + dense model as Relay text, weights inline (16 input channels: the
    blocked conv template, not the first-conv kernel of inputs with 8 or fewer)."""
    import ember
    from ember import relay

    rng = np.random.default_rng(0)
    x = relay.var("data", shape=(1, 16, 16, 16))
    w1 = relay.const(rng.standard_normal((16, 16, 3, 3)).astype("float32"))
    w2 = relay.const(rng.standard_normal((4, 16 * 8 * 8)).astype("float32"))
    y = relay.nn.relu(relay.nn.conv2d(x, w1, strides=(2, 2), padding=(1, 1)))
    y = relay.nn.dense(relay.nn.batch_flatten(y), w2)
    path = tmp_path_factory.mktemp("tune_models") / "conv.relay"
    path.write_text(ember.IRModule.from_expr(relay.Function([x], y)).astext(
        show_meta_data=True))
    return path


@pytest.mark.slow  # ~25 s of measurements; tune -> compile below runs by default
def test_tune_mlp_writes_records_and_prints_a_table(models: dict[str, Any],
                                                    tmp_path: Path) -> None:
    records = tmp_path / "tiles.json"
    proc = spawn("tune", models["mlp"], "--budget", "1", "--threads", "2", "--records", records)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("kernel") and "speed-up" in proc.stdout
    assert f"records: {records} (" in proc.stdout and "2 thread(s)" in proc.stdout
    entries = json.loads(records.read_text())["records"]
    assert {e["kernel"] for e in entries} == {"sgemm"} and len(entries) == 3
    assert all(e["threads"] == 2 for e in entries)


def test_tune_conv_model_json(conv_model: Path, tmp_path: Path) -> None:
    records = tmp_path / "tiles.json"
    proc = spawn("tune", conv_model, "--budget", "1", "--records", records, "--json",
                 env={"EMBER_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["records"] == str(records) and doc["threads"] == 1
    assert [k["kernel"] for k in doc["kernels"]] == ["conv2d_nchwc", "sgemm"]
    conv = doc["kernels"][0]
    assert conv["call"] == "16x16x16 -> 16x8x8 3x3/2" and conv["speedup"] > 0
    assert set(conv["tiles"]) == {"rb", "rw", "strip", "order", "threads"}
    stored = R.load(records)
    assert sorted(k[0] for k in stored.records) == ["conv2d_nchwc", "sgemm"]


def test_tune_then_compile_reads_the_records(models: dict[str, Any], tmp_path: Path) -> None:
    records = tmp_path / "tiles.json"
    assert call_ok("tune", models["small"], "--budget", "0.5", "--threads", "1",
                   "--records", records)
    doc = json.loads(records.read_text())
    doc["records"][0]["tiles"]["mc"] = 5  # hand-edited: not a multiple of 6
    records.write_text(json.dumps(doc))
    proc = spawn("compile", models["small"], "--threads", "1", "-o", tmp_path / "m.so",
                 env={R.ENV_VAR: str(records)})
    assert proc.returncode == 1
    assert f"{records}: records[0]" in proc.stderr and "mc must be a positive multiple" in \
        proc.stderr and "hint: " in proc.stderr


def call_ok(*argv: Any) -> bool:
    return spawn(*argv).returncode == 0


@pytest.mark.parametrize("argv, env, code, message", [
    (["missing.relay"], {}, 1, "missing.relay: no such file"),
    (["model.so"], {}, 2, "not a model file"),
    (["{mlp}", "--input-shapes", "data:1xfoo"], {}, 2, "'1xfoo' is not a shape"),
    (["{mlp}", "--input-shapes", "data:1x784"], {}, 2, "applies to ONNX models"),
    (["{mlp}"], {R.ENV_VAR: "off"}, 2, "tuning records are off"),
    (["{mlp}", "--records", "nodir/tiles.json"], {}, 1, "no directory 'nodir'"),
    (["{mlp}", "--records", "{bad}"], {}, 1, "not an ember tuning record file"),
])
def test_tune_errors_are_one_line_with_a_hint(models: dict[str, Any], tmp_path: Path,
                                              capsys: Any, monkeypatch: Any, argv: list[str],
                                              env: dict[str, str], code: int,
                                              message: str) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(R.ENV_VAR, str(tmp_path / "records.json"))
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    (tmp_path / "bad.json").write_text('{"format": "something else"}')
    args = [a.format(mlp=models["mlp"], bad=tmp_path / "bad.json") for a in argv]
    status, out, err = call(capsys, "tune", *args, "--budget", "0.1")
    assert status == code and out == ""
    first, hint = err.splitlines()[:2]
    assert first.startswith("ember tune: error: ") and message in first
    assert hint.startswith("hint: ")


def test_tune_bad_budget_is_a_usage_error(models: dict[str, Any], capsys: Any) -> None:
    status, _, err = call(capsys, "tune", models["mlp"], "--budget", "0")
    assert status == 2 and "must be a positive number, got 0" in err


def test_tune_help_has_examples(capsys: Any) -> None:
    status, out, _ = call(capsys, "tune", "--help")
    assert status == 0 and "examples:" in out and "EMBER_TUNING_RECORDS" in out
