"""Tuning records (ember/topi/tile_records.py): the file round-trips, gemm_tiles/conv_tiles
answer from it for exactly the recorded call, and every kind of broken file is an error that
names the file (and the entry)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ember.ir.transform import PassContext
from ember.runtime.cpu_features import host_cpu_name
from ember.runtime.errors import TuningRecordError
from ember.target.simd import LEVELS
from ember.topi import tile_records as R
from ember.topi.nn import conv2d_nchwc as K
from ember.topi.nn import gemm_kernel as G

AVX2 = LEVELS["avx2"]
GEO = K.ConvGeometry(1, 32, 10, 10, 32, 10, 10, 3, 3, (1, 1), (1,) * 4, (1, 1), 1, 8, 8)
GEMM = (1, 24, 40, 300)


def _conv_record(for_threads: int = 2, **tiles: int) -> R.Record:
    full = {**vars(K.model_conv_tiles(GEO, AVX2)), **tiles}
    return R.Record("conv2d_nchwc", "avx2", for_threads, K.conv_key(GEO),
                    tuple(sorted(full.items())), 1e-4, 2e-4)


def _gemm_record(for_threads: int = 2, **tiles: int) -> R.Record:
    full = {**vars(G.model_gemm_tiles(*GEMM, AVX2)), **tiles}
    return R.Record("sgemm", "avx2", for_threads, GEMM,
                    tuple(sorted((k, int(v)) for k, v in full.items())), 1e-5, 3e-5)


@pytest.fixture
def records(tmp_path: Path, monkeypatch: Any) -> Path:
    """A record file builds read (EMBER_TUNING_RECORDS), looked up for 2 threads."""
    path = tmp_path / "records.json"
    monkeypatch.setenv(R.ENV_VAR, str(path))
    monkeypatch.setenv("EMBER_NUM_THREADS", "2")
    return path


def _write(path: Path, doc: Any) -> None:
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))


def _doc(*entries: dict[str, Any], **header: Any) -> dict[str, Any]:
    return {"format": R.FORMAT, "version": R.VERSION, "cpu": "a cpu", "records": list(entries),
            **header}


def test_records_round_trip_and_merge(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    first, second = _conv_record(rw=4), _gemm_record(kc=300)
    R.save(path, [first], cpu="cpu one")
    R.save(path, [second, _conv_record(rw=2)], cpu="cpu one")  # same key as first: replaced
    loaded = R.load(path)
    assert loaded.cpu == "cpu one"
    assert {r for _, r in loaded.records.values()} == {second, _conv_record(rw=2)}
    assert json.loads(path.read_text())["format"] == R.FORMAT


def test_one_file_holds_the_records_of_one_cpu(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    R.save(path, [_conv_record()], cpu="cpu one")
    with pytest.raises(TuningRecordError, match="measured on 'cpu one'; these are from 'cpu tw"):
        R.save(path, [_gemm_record()], cpu="cpu two")
    assert len(R.load(path).records) == 1


def test_lookup_uses_the_record_of_exactly_this_call(records: Path) -> None:
    model_conv, model_gemm = K.model_conv_tiles(GEO, AVX2), G.model_gemm_tiles(*GEMM, AVX2)
    assert K.conv_tiles(GEO, AVX2) == model_conv  # no file yet
    R.save(records, [_conv_record(rw=4, order=0, strip=5), _gemm_record(kc=300, mc=12)])
    assert K.conv_tiles(GEO, AVX2) == K.ConvTiles(model_conv.rb, 4, 5, 0, model_conv.threads)
    assert G.gemm_tiles(*GEMM, AVX2) == G.GemmTiles(model_gemm.nr, 300, 12, model_gemm.parallel)
    other = K.ConvGeometry(1, 32, 10, 12, 32, 10, 12, 3, 3, (1, 1), (1,) * 4, (1, 1), 1, 8, 8)
    assert K.conv_tiles(other, AVX2) == K.model_conv_tiles(other, AVX2)  # another shape
    assert G.gemm_tiles(*GEMM, LEVELS["avx512"]) == G.model_gemm_tiles(*GEMM, LEVELS["avx512"])
    with PassContext(config={R.THREADS_OPTION: 4}):  # built for another thread count
        assert K.conv_tiles(GEO, AVX2) == model_conv


def test_a_record_of_an_older_kernel_revision_is_skipped(records: Path) -> None:
    """A record measured before its kernel changed (``REVISIONS``; an entry without a
    revision is of revision 1) is skipped, even with tiles the kernel now refuses."""
    avx512 = LEVELS["avx512"]
    model = G.model_gemm_tiles(*GEMM, avx512)
    stale = {**_gemm_record(mc=6).to_json(), "level": "avx512"}
    stale["tiles"] = {**stale["tiles"], "nr": model.nr, "mc": 6}  # 6-row tiles: refused now
    del stale["revision"]
    _write(records, _doc(stale, cpu=host_cpu_name()))
    assert R.REVISIONS["sgemm"] > 1
    assert G.gemm_tiles(*GEMM, avx512) == model
    current = _gemm_record(kc=300)
    assert current.revision == R.REVISIONS["sgemm"] and current.to_json()["revision"] > 1
    R.save(records, [current])
    assert G.gemm_tiles(*GEMM, AVX2).kc == 300
    assert R.load(records).records[current.key][1] == current


def test_records_off_and_missing_file_use_the_cost_model(records: Path,
                                                          monkeypatch: Any) -> None:
    R.save(records, [_conv_record(rw=4)])
    monkeypatch.setenv(R.ENV_VAR, "off")
    assert R.records_path() is None and R.fingerprint() == ""
    assert K.conv_tiles(GEO, AVX2) == K.model_conv_tiles(GEO, AVX2)
    monkeypatch.setenv(R.ENV_VAR, str(records.with_name("absent.json")))
    assert K.conv_tiles(GEO, AVX2) == K.model_conv_tiles(GEO, AVX2)


def test_fingerprint_follows_the_records_and_threads(records: Path) -> None:
    R.save(records, [_conv_record(rw=4)])
    one = R.fingerprint()
    R.save(records, [_conv_record(rw=2)])
    two = R.fingerprint()
    with PassContext(config={R.THREADS_OPTION: 3}):
        three = R.fingerprint()
    assert len({one, two, three}) == 3 and "" not in (one, two, three)


def test_recording_notes_the_cost_models_answer(records: Path) -> None:
    R.save(records, [_conv_record(rw=4)])
    with R.recording() as queries:
        K.conv_tiles(GEO, AVX2)
    assert queries == [R.Query("conv2d_nchwc", K.conv_key(GEO), AVX2,
                               K.model_conv_tiles(GEO, AVX2))]


@pytest.mark.parametrize("text, message", [
    ("{not json", "not JSON"),
    ('{"records": []}', "not an ember tuning record file"),
    (json.dumps(_doc(version=99)), "format version 99"),
    (json.dumps(_doc(cpu=None)), 'expected a "cpu" string'),
    (json.dumps(_doc({"kernel": "sgemm"})), r"records\[0\]: expected an object with the fields"),
    (json.dumps(_doc(_gemm_record().to_json() | {"level": "avx9"})),
     r"records\[0\]: level must be one of"),
    (json.dumps(_doc(_gemm_record().to_json() | {"threads": 0})),
     r"records\[0\]: threads must be a positive integer"),
    (json.dumps(_doc(_gemm_record().to_json(), _gemm_record().to_json() | {"geometry": "x"})),
     r"records\[1\]: geometry must be a list of integers"),
    (json.dumps(_doc(_gemm_record().to_json() | {"tiles": {"kc": "big"}})),
     r"records\[0\]: tiles must map names to integers"),
    (json.dumps(_doc(_gemm_record().to_json() | {"seconds": -1})),
     r"records\[0\]: seconds and model_seconds must be positive"),
    (json.dumps(_doc(_gemm_record().to_json() | {"revision": 0})),
     r"records\[0\]: revision must be a positive integer"),
])
def test_a_broken_file_is_an_error_naming_it(records: Path, text: str, message: str) -> None:
    _write(records, text)
    with pytest.raises(TuningRecordError, match=message) as err:
        G.gemm_tiles(*GEMM, AVX2)
    assert str(records) in str(err.value) and f"{R.ENV_VAR}=off" in str(err.value)


def test_the_default_file_must_be_this_cpus(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv(R.ENV_VAR)
    R.default_path().parent.mkdir()
    _write(R.default_path(), _doc(_gemm_record().to_json(), cpu="another cpu"))
    with pytest.raises(TuningRecordError, match="measured on 'another cpu', this CPU is"):
        G.gemm_tiles(*GEMM, AVX2)
    _write(R.default_path(), _doc(_gemm_record(kc=7).to_json(), cpu=host_cpu_name()))
    assert R.records_path() == R.default_path()


@pytest.mark.parametrize("kernel, tiles, message", [
    ("conv", {"rw": 7}, r"rw must be one of \(12, 8, 6, 4, 2, 1, 5\)"),
    ("conv", {"rb": 3}, "rb must be 1, 2 or 4"),
    ("conv", {"strip": 0}, r"strip must be in 1\.\.10"),
    ("conv", {"strip": 11}, r"strip must be in 1\.\.10"),
    ("conv", {"order": 2}, "order must be 0 or 1"),
    ("conv", {"threads": -1}, "threads must be 0 or 1"),
    ("gemm", {"mc": 7}, "mc must be a positive multiple of 6"),
    ("gemm", {"kc": 0}, "kc must be positive"),
    ("gemm", {"nr": 32}, r"nr must be 16 \(two avx2 vectors\)"),
])
def test_hand_edited_tiles_are_checked_again(records: Path, kernel: str, tiles: dict[str, int],
                                             message: str) -> None:
    record = _conv_record(**tiles) if kernel == "conv" else _gemm_record(**tiles)
    R.save(records, [record])
    with pytest.raises(TuningRecordError, match=message) as err:
        K.conv_tiles(GEO, AVX2) if kernel == "conv" else G.gemm_tiles(*GEMM, AVX2)
    assert str(records) in str(err.value) and "records[0]" in str(err.value)


def test_depthwise_split_from_a_record(records: Path) -> None:
    geo = K.ConvGeometry(1, 32, 10, 10, 32, 10, 10, 3, 3, (1, 1), (1,) * 4, (1, 1), 32, 8, 8)
    model = K.depthwise_tiles(geo, AVX2)
    assert model == K.DepthwiseTiles(10, 0)

    def save(strip: int) -> None:
        R.save(records, [R.Record("depthwise_nchwc", "avx2", 2, K.conv_key(geo),
                                  (("strip", strip), ("threads", 1)), 1.0, 2.0)])

    save(4)
    assert K.depthwise_tiles(geo, AVX2) == K.DepthwiseTiles(4, 1)
    save(11)
    with pytest.raises(TuningRecordError, match=r"records\[0\].*strip must be in 1\.\.10"):
        K.depthwise_tiles(geo, AVX2)


def test_tiles_with_missing_or_extra_fields_are_refused(records: Path) -> None:
    entry = _conv_record().to_json()
    entry["tiles"] = {k: v for k, v in entry["tiles"].items() if k != "rw"} | {"rx": 1}
    _write(records, _doc(entry))
    with pytest.raises(TuningRecordError, match="tiles must have the fields rb, rw, strip"):
        K.conv_tiles(GEO, AVX2)
