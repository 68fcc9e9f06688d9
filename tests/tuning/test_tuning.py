"""The measured tile search (ember/tuning/): the harness computes what numpy does, the search
keeps only candidates whose output agrees, tasks are the calls a build makes, and a tuned
record changes the generated C while the results stay numpy's."""
from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import ember
from ember import relay
from ember.relay.op.nn.conv import conv2d_nchw
from ember.target.simd import cpu_choice
from ember.testing import find_c_compiler
from ember.topi import tile_records as R
from ember.topi.nn import conv2d_nchwc as K
from ember.topi.nn import gemm_kernel as G
from ember.tuning import extract_tasks, search, tune
from ember.tuning.harness import Harness, Workload, workload

pytestmark = pytest.mark.skipif(find_c_compiler() is None, reason="needs a C compiler")
HOST = cpu_choice(None)
LANES = min(HOST.level.lanes("float32"), 16) if HOST.level.lanes("float32") >= 4 else 4


@pytest.fixture(scope="module")
def harness() -> Harness:
    h = Harness(HOST)
    h.set_threads(2)
    return h


def _conv_query(geo: K.ConvGeometry) -> R.Query:
    return R.Query("conv2d_nchwc", K.conv_key(geo), HOST.level, K.model_conv_tiles(geo, HOST.level))


def _conv_reference(work: Workload, geo: K.ConvGeometry) -> np.ndarray:
    data, weight, bias, _ = work.arrays
    x = K.from_blocked(data)
    o, icg_b, kh, kw, cb, lanes = weight.shape
    w = weight.transpose(0, 5, 1, 4, 2, 3).reshape(o * lanes, icg_b * cb, kh, kw)
    out = conv2d_nchw(x.astype(np.float64), w.astype(np.float64), geo.strides, geo.padding,
                      geo.dilation, geo.groups) + bias.reshape(1, -1, 1, 1)
    return K.to_blocked(out, lanes)


@pytest.mark.parametrize("geo", [
    K.ConvGeometry(1, 2 * LANES, 9, 11, 2 * LANES, 5, 6, 3, 3, (2, 2), (1, 1, 1, 1), (1, 1), 1,
                   LANES, LANES),
    K.ConvGeometry(2, 3, 8, 8, LANES, 8, 8, 3, 3, (1, 1), (1, 1, 1, 1), (1, 1), 1, LANES, 1),
    K.ConvGeometry(1, 4 * LANES, 6, 6, 4 * LANES, 6, 6, 1, 1, (1, 1), (0,) * 4, (1, 1), 2,
                   LANES, LANES),
], ids=["strided", "nchw-input", "grouped"])
def test_conv_harness_computes_the_convolution(harness: Harness, geo: K.ConvGeometry) -> None:
    work = workload(_conv_query(geo), harness)
    other = dataclasses.replace(work.query.model, rb=1, rw=2, strip=3, order=0, threads=1)
    for tiles in (work.query.model, other):
        assert work.run(tiles, 2) > 0
        np.testing.assert_allclose(work.output, _conv_reference(work, geo), rtol=1e-4, atol=1e-4)


def test_depthwise_harness_computes_the_convolution(harness: Harness) -> None:
    c = 2 * LANES
    geo = K.ConvGeometry(1, c, 9, 9, c, 5, 5, 3, 3, (2, 2), (1, 1, 1, 1), (1, 1), c, LANES,
                         LANES)
    model = K.depthwise_tiles(geo, HOST.level)
    work = workload(R.Query("depthwise_nchwc", K.conv_key(geo), HOST.level, model), harness)
    for tiles in (model, K.DepthwiseTiles(2, 1)):
        work.run(tiles)
        np.testing.assert_allclose(work.output, _conv_reference(work, geo), rtol=1e-4, atol=1e-4)


def test_gemm_harness_computes_the_product(harness: Harness) -> None:
    geometry = (2, 13, 40, 70)
    query = R.Query("sgemm", geometry, HOST.level, G.model_gemm_tiles(*geometry, HOST.level))
    work = workload(query, harness)
    a, b, _ = work.arrays
    nr = G.panel_width(HOST.level)
    dense_b = b.transpose(0, 2, 1, 3).reshape(2, 70, -1)[:, :, :40]
    for tiles in (query.model, G.GemmTiles(nr, 16, 6, True)):
        work.run(tiles)
        np.testing.assert_allclose(work.output, a @ dense_b, rtol=1e-4, atol=1e-4)


@dataclasses.dataclass
class _Scripted(Workload):
    """A workload whose times are given by ``cost(tiles)`` and whose output is wrong for the
    tiles ``wrong`` says: the search's choices without a timer."""

    cost: Any = None
    wrong: Any = None

    def run(self, tiles: Any, number: int = 1) -> float:
        seconds = super().run(tiles, number)  # the real kernel: a real output
        if self.wrong(tiles):
            self.output[0, 0, 0, 0, 0] += 1.0
        return self.cost(tiles) if self.cost is not None else seconds


def _scripted(harness: Harness, cost: Any, wrong: Any) -> _Scripted:
    geo = K.ConvGeometry(1, 2 * LANES, 8, 8, 2 * LANES, 8, 8, 3, 3, (1, 1), (1,) * 4, (1, 1), 1,
                         LANES, LANES)
    base = workload(_conv_query(geo), harness)
    return _Scripted(base.query, harness, base.entry, base.arrays, base.sizes, cost, wrong)


def test_conv_search_tries_every_pair_group_on_avx512() -> None:
    from ember.target.simd import LEVELS

    # a 1x1 96->40 projection to 8-lane blocks (5 blocks): the pair tiles' groups of 1, 2
    # and 3 pairs (the cost model's is 3: rb 6), each at its width, and the 8-lane singles
    geo = K.ConvGeometry(1, 96, 1, 3136, 40, 1, 3136, 1, 1, (1, 1), (0,) * 4, (1, 1), 1, 8, 16)
    tiles = next(search.axes("conv2d_nchwc", K.conv_key(geo), LEVELS["avx512"], 2))
    assert [(t["rb"], t["rw"]) for t in tiles if t["rb"] > 1] == [(2, 12), (4, 12), (6, 8)]
    assert {t["rb"] for t in tiles} == {1, 2, 4, 6}
    model = K.conv_tiles(geo, LEVELS["avx512"])
    assert {"rb": model.rb, "rw": model.rw} in tiles
    assert all(K.check_conv_tiles(dataclasses.replace(model, **t), geo) is None for t in tiles)
    # AVX2 has no pair tiles: rb 1 and 2 in the 8-lane tiles
    avx2 = next(search.axes("conv2d_nchwc", K.conv_key(geo), LEVELS["avx2"], 2))
    assert {t["rb"] for t in avx2} == {1, 2}


def test_search_never_keeps_a_candidate_with_another_output(harness: Harness) -> None:
    # The wrong candidates are the fastest: a search that skipped the check would pick one.
    work = _scripted(harness, cost=lambda t: 1e-3 if t.rw == 2 else 2e-3,
                     wrong=lambda t: t.rw == 2)
    assert work.query.model.rw != 2
    outcome = search.search(work, budget=60.0, threads=2)
    assert outcome.rejected >= 1
    assert outcome.tiles == outcome.model_tiles and outcome.seconds == outcome.model_seconds


def test_search_keeps_the_fastest_agreeing_candidate(harness: Harness) -> None:
    def cost(t: K.ConvTiles) -> float:
        return 1e-3 - 1e-4 * (t.rw == 2) - 2e-4 * (t.order == 0) - 1e-4 * (t.strip == 4)

    work = _scripted(harness, cost=cost, wrong=lambda t: False)
    outcome = search.search(work, budget=60.0, threads=2)
    assert (outcome.tiles.rw, outcome.tiles.order, outcome.tiles.strip) == (2, 0, 4)
    assert outcome.rejected == 0
    assert outcome.speedup == pytest.approx(cost(outcome.model_tiles) / 6e-4)


def test_search_within_no_budget_measures_the_cost_model_only(harness: Harness) -> None:
    work = _scripted(harness, cost=None, wrong=lambda t: False)
    outcome = search.search(work, budget=0.0, threads=2)
    assert outcome.tried == 1 and outcome.tiles == outcome.model_tiles


def _conv_dense_model() -> tuple[Any, dict[str, np.ndarray]]:
    # 16 input channels: a conv of the blocked template (a plain input of 8 or fewer channels
    # goes to the first-conv kernel, which has no tiles to tune)
    rng = np.random.default_rng(0)
    x = relay.var("x", shape=(1, 16, 12, 12))
    w1 = relay.var("w1", shape=(32, 16, 3, 3))
    w2 = relay.var("w2", shape=(10, 32 * 6 * 6))
    y = relay.nn.relu(relay.nn.conv2d(x, w1, strides=(2, 2), padding=(1, 1)))
    y = relay.nn.dense(relay.nn.batch_flatten(y), w2)
    params = {"w1": rng.standard_normal((32, 16, 3, 3)).astype("float32") * 0.1,
              "w2": rng.standard_normal((10, 32 * 36)).astype("float32") * 0.05}
    return ember.IRModule.from_expr(relay.Function([x, w1, w2], y)), params


def _reference(params: dict[str, np.ndarray], x: np.ndarray) -> np.ndarray:
    y = np.maximum(conv2d_nchw(x, params["w1"], (2, 2), (1, 1, 1, 1), (1, 1), 1), 0)
    return y.reshape(1, -1) @ params["w2"].T


def _build_and_run(mod: Any, params: dict[str, np.ndarray], x: np.ndarray) -> tuple[str, Any]:
    from ember.contrib import graph_executor

    with ember.transform.PassContext(opt_level=3, config={R.THREADS_OPTION: 2}):
        factory = relay.build(mod, "llvm", params=params)
    gm = graph_executor.GraphModule(factory["default"](ember.cpu()))
    gm.set_input("x", x)
    gm.run()
    return factory.get_lib().get_source(), gm.get_output(0).numpy()


def test_extract_tasks_finds_the_builds_kernel_calls() -> None:
    mod, params = _conv_dense_model()
    with ember.transform.PassContext(opt_level=3):
        queries = extract_tasks(mod, params)
    kinds = [(q.kernel, q.geometry) for q in queries]
    lanes = HOST.level.lanes("float32") if HOST.level.lanes("float32") in K.LANES else 4
    assert kinds == [("conv2d_nchwc", (1, 16, 12, 12, 32, 6, 6, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1,
                                       lanes, lanes)),
                     ("sgemm", (1, 1, 10, 32 * 36))]


def test_a_record_changes_the_c_and_the_results_stay_numpys(tmp_path: Path,
                                                            monkeypatch: Any) -> None:
    mod, params = _conv_dense_model()
    x = np.random.default_rng(1).standard_normal((1, 16, 12, 12)).astype("float32")
    monkeypatch.setenv(R.ENV_VAR, str(tmp_path / "records.json"))
    model_c, model_out = _build_and_run(mod, params, x)
    with ember.transform.PassContext(opt_level=3):
        conv, gemm = extract_tasks(mod, params)
    conv_tiles = dataclasses.replace(conv.model, rb=1, rw=2, strip=5, order=1 - conv.model.order)
    gemm_tiles = dataclasses.replace(gemm.model, kc=100, mc=12)
    R.save(tmp_path / "records.json", [
        R.Record(q.kernel, q.level.name, 2, q.geometry,
                 tuple(sorted((k, int(v)) for k, v in dataclasses.asdict(t).items())), 1.0, 2.0)
        for q, t in ((conv, conv_tiles), (gemm, gemm_tiles))])
    tuned_c, tuned_out = _build_and_run(mod, params, x)
    tail = ", ".join(str(v) for v in (12, 100, int(gemm_tiles.parallel)))
    assert re.search(rf"ember_sgemm\([^;]*, {tail}, 1, 0, 0, 0\)", tuned_c)
    assert not re.search(rf"ember_sgemm\([^;]*, {tail}, 1, 0, 0, 0\)", model_c)
    conv_tail = f"1, 2, 5, {conv_tiles.order}, {conv_tiles.threads})"
    assert conv_tail in tuned_c.replace("\n", "") and conv_tail not in model_c.replace("\n", "")
    want = _reference(params, x)
    np.testing.assert_allclose(model_out, want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(tuned_out, want, rtol=1e-4, atol=1e-4)


def test_a_depthwise_record_changes_the_c(tmp_path: Path, monkeypatch: Any) -> None:
    from ember.contrib import graph_executor

    c = 2 * LANES
    rng = np.random.default_rng(2)
    w = rng.standard_normal((c, 1, 3, 3)).astype("float32")
    x = relay.var("x", shape=(1, c, 10, 10))
    y = relay.nn.conv2d(x, relay.const(w), padding=(1, 1), groups=c, channels=c)
    mod = ember.IRModule.from_expr(relay.Function([x], y))
    monkeypatch.setenv(R.ENV_VAR, str(tmp_path / "records.json"))
    with ember.transform.PassContext(opt_level=3):
        (query,) = extract_tasks(mod)
    assert query.kernel == "depthwise_nchwc" and query.model == K.DepthwiseTiles(10, 0)
    R.save(tmp_path / "records.json", [R.Record(query.kernel, query.level.name, 2,
                                                query.geometry, (("strip", 3), ("threads", 1)),
                                                1.0, 2.0)])
    with ember.transform.PassContext(opt_level=3, config={R.THREADS_OPTION: 2}):
        factory = relay.build(mod, "llvm")
    assert re.search(r"ember_depthwise_nchwc_x\d+\([^;]*, 3, 1\)", factory.get_lib().get_source())
    gm = graph_executor.GraphModule(factory["default"](ember.cpu()))
    data = rng.standard_normal((1, c, 10, 10)).astype("float32")
    gm.set_input("x", data)
    gm.run()
    want = conv2d_nchw(data, w, (1, 1), (1, 1, 1, 1), (1, 1), c)
    np.testing.assert_allclose(gm.get_output(0).numpy(), want, rtol=1e-4, atol=1e-4)


def test_tune_writes_a_record_per_call(tmp_path: Path) -> None:
    mod, params = _conv_dense_model()
    path = tmp_path / "tiles.json"
    seen: list[tuple[int, int]] = []
    with ember.transform.PassContext(opt_level=3):
        result = tune(mod, params, threads=2, budget=0.5, records=path,
                      progress=lambda i, n, q: seen.append((i, n)))
    assert seen == [(0, 2), (1, 2)] and result.path == path and result.threads == 2
    doc = json.loads(path.read_text())
    assert [(r["kernel"], r["threads"]) for r in doc["records"]] == [("conv2d_nchwc", 2),
                                                                     ("sgemm", 2)]
    for outcome, record in zip(result.outcomes, R.load(path).records.values()):
        assert dict(record[1].tiles) == {k: int(v) for k, v in
                                         dataclasses.asdict(outcome.tiles).items()}


def test_tune_errors(tmp_path: Path, monkeypatch: Any) -> None:
    mod, params = _conv_dense_model()
    monkeypatch.setenv(R.ENV_VAR, "off")
    with pytest.raises(ember.TVMError, match="tuning records are off"):
        tune(mod, params)
    with pytest.raises(ember.TVMError, match="budget must be a positive number"):
        tune(mod, params, budget=0, records=tmp_path / "r.json")
    (tmp_path / "bad.json").write_text("[]")
    with pytest.raises(R.TuningRecordError, match="bad.json: not an ember tuning record"):
        tune(mod, params, records=tmp_path / "bad.json")
    other = R.Record("sgemm", "avx2", 1, (1, 2, 3, 4), (("kc", 4),), 1.0, 1.0)
    R.save(tmp_path / "other.json", [other], cpu="another cpu")
    with pytest.raises(R.TuningRecordError, match="measured on 'another cpu'"):
        tune(mod, params, records=tmp_path / "other.json")
