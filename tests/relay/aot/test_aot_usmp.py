"""The USMP planner (``aot/usmp.py``) and its build-time checks.

The planner: no two buffers alive at the same time overlap in one pool, no pool passes its
size, each pool is at least its liveness lower bound (hypothesis over random buffers); the
algorithms order differently; hill_climb reaches the bound where the greedy orders miss it.
The build: pools in the metadata and the header; a pool too small fails with the size the
model needs; bad configurations fail with a message naming what was wrong.
"""
from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_aot_zoo import FAST, SLOW

import ember as tvm
from ember import relay
from ember.ir.memory_pools import (
    ConstantMemoryPools,
    ConstantPoolInfo,
    PoolError,
    PoolInfoProperties,
    WorkspaceMemoryPools,
    WorkspacePoolInfo,
)
from ember.relay.backend import Executor, Runtime
from ember.relay.backend.aot.build import memory_report
from ember.relay.backend.aot.usmp import ALGORITHMS, candidate_order, conflicts, plan_pools
from ember.relay.backend.aot.usmp_placement import Placement
from ember.relay.backend.memory_plan import lower_bound

C_IFACE = {"interface-api": "c", "unpacked-api": True, "link-params": True}


def _pool(name: str, size: int = -1) -> WorkspacePoolInfo:
    return WorkspacePoolInfo(name, ["c"], PoolInfoProperties(size_hint_bytes=size))


@st.composite
def buffers(draw: st.DrawFn) -> tuple[list[int], list[tuple[int, int]]]:
    n = draw(st.integers(1, 24))
    sizes = draw(st.lists(st.integers(1, 300), min_size=n, max_size=n))
    intervals = []
    for _ in range(n):
        start = draw(st.integers(-1, 15))
        intervals.append((start, start + draw(st.integers(0, 6))))
    return sizes, intervals


def _check_plan(plan, sizes, intervals, pools, alignment):
    padded = [(s + alignment - 1) // alignment * alignment for s in sizes]
    for i in range(len(sizes)):
        k = plan.pool_of[i]
        assert plan.offsets[i] % alignment == 0
        assert plan.offsets[i] + padded[i] <= plan.pools[k].planned_bytes
        limit = pools[k].size_hint_bytes
        assert limit < 0 or plan.offsets[i] + padded[i] <= limit
        for j in range(i):
            alive_together = (intervals[i][0] <= intervals[j][1]
                              and intervals[j][0] <= intervals[i][1])
            if alive_together and plan.pool_of[j] == k:
                assert (plan.offsets[i] + padded[i] <= plan.offsets[j]
                        or plan.offsets[j] + padded[j] <= plan.offsets[i]), (i, j)
    for usage in plan.pools:
        assert usage.planned_bytes >= usage.lower_bound
    assert plan.lower_bound == lower_bound(padded, intervals)


@settings(max_examples=60, deadline=None)
@given(buffers(), st.sampled_from(ALGORITHMS), st.integers(1, 3), st.sampled_from([1, 8, 16]))
def test_no_two_live_buffers_overlap_in_a_pool(bufs, algorithm, n_pools, alignment):
    sizes, intervals = bufs
    # every pool but the last is bounded (small: buffers spill into the next one)
    pools = [_pool(f"p{k}", 256 * (k + 1)) for k in range(n_pools - 1)] + [_pool("last")]
    plan = plan_pools(sizes, intervals, pools, algorithm, alignment)
    _check_plan(plan, sizes, intervals, pools, alignment)


@settings(max_examples=40, deadline=None)
@given(buffers())
def test_hill_climb_is_never_worse_than_the_greedy_orders(bufs):
    sizes, intervals = bufs
    pools = [_pool("one")]
    totals = {a: plan_pools(sizes, intervals, pools, a, 1).total for a in ALGORITHMS}
    assert totals["hill_climb"] <= min(totals["greedy_by_size"], totals["greedy_by_conflicts"])


@settings(max_examples=60, deadline=None)
@given(buffers(), st.integers(1, 3), st.booleans(),
       st.lists(st.tuples(st.integers(0, 23), st.integers(0, 23)), max_size=40))
def test_incremental_swaps_leave_the_placement_a_full_one_gives(bufs, n_pools, keep_all,
                                                                swaps):
    """try_swap re-places only what a swap can change; the result (kept or rolled back) is
    exactly the placement of its order from scratch."""
    sizes, intervals = bufs
    padded = [(s + 15) // 16 * 16 for s in sizes]
    limits = [256 * (k + 1) for k in range(n_pools - 1)] + [-1]
    placement = Placement(list(range(len(sizes))), padded, intervals, limits, 16)
    best = placement.cost
    for a, b in swaps:
        if placement.try_swap(a % len(sizes), b % len(sizes), float("inf") if keep_all
                              else best):
            best = placement.cost
    full = Placement(placement.order, padded, intervals, limits, 16)
    assert (placement.pool_of, placement.offsets) == (full.pool_of, full.offsets)
    assert placement.cost == full.cost <= best


def test_hill_climb_reaches_the_bound_where_greedy_by_size_misses_it():
    # A small early buffer and a large one alive later: largest-first puts the large one at 0,
    # then the long-lived middle one above it; the bound is 30.
    sizes = [10, 20, 10, 10]
    intervals = [(0, 3), (2, 3), (0, 0), (1, 1)]
    pools = [_pool("one")]
    plan = plan_pools(sizes, intervals, pools, "hill_climb", 1)
    assert plan.total == plan.lower_bound == 30
    _check_plan(plan, sizes, intervals, pools, 1)


def test_conflicts_count_the_buffers_alive_together():
    assert conflicts([(0, 1), (1, 2), (3, 4), (0, 4)]) == [2, 2, 1, 3]


def test_a_full_bounded_pool_spills_into_the_next():
    plan = plan_pools([100, 100], [(0, 1), (0, 1)], [_pool("small", 128), _pool("big")],
                      "greedy_by_size", 16)
    assert sorted(plan.pool_of) == [0, 1]
    assert [u.planned_bytes for u in plan.pools] == [112, 112]


def _timed_pool(name: str, read: int, write: int, latency: int = 0, size: int = -1,
                **extra) -> WorkspacePoolInfo:
    return WorkspacePoolInfo(name, ["c"], PoolInfoProperties(
        size_hint_bytes=size, read_bandwidth_bytes_per_cycle=read,
        write_bandwidth_bytes_per_cycle=write, read_latency_cycles=latency,
        write_latency_cycles=latency, **extra))


def test_the_faster_pool_is_filled_first_whatever_the_order_given():
    slow = _timed_pool("dram", 1, 1, latency=20)
    fast = _timed_pool("sram", 8, 8, size=128)
    plan = plan_pools([100, 100, 100], [(0, 1), (0, 1), (0, 1)], [slow, fast],
                      "greedy_by_size", 16, target="c")
    # one buffer fits sram (128 bytes): it goes there first; the rest spill into dram
    assert [u.planned_bytes for u in plan.pools] == [224, 112]
    assert plan.pool_of.count(1) == 1
    assert candidate_order([slow, fast], "c") == [1, 0]
    # unknown bandwidths: the order given (TVM's), after the pools with a known cost
    assert candidate_order([_pool("a"), _pool("b")], "c") == [0, 1]
    assert candidate_order([_pool("a"), fast, slow], "c") == [1, 2, 0]


def test_latency_bursts_and_clocks_weigh_in_the_pool_order():
    # same bandwidth; a long burst amortises the latency of "flash" below that of "tcm"
    flash = _timed_pool("flash", 4, 4, latency=16, target_burst_bytes={"c": 256})
    tcm = _timed_pool("tcm", 4, 4, latency=4)
    assert candidate_order([tcm, flash], "c") == [1, 0]
    assert candidate_order([tcm, flash], "llvm") == [0, 1]  # no burst for llvm: 1 byte
    # at twice the clock, a pool twice as slow in cycles is as fast: the order given stays
    a = _timed_pool("a", 2, 2, clock_frequency_hz=100)
    b = _timed_pool("b", 4, 4, clock_frequency_hz=50)
    assert candidate_order([a, b], "c") == [0, 1] and candidate_order([b, a], "c") == [0, 1]


def test_the_build_fills_the_faster_pool_first():
    pools = WorkspaceMemoryPools([_timed_pool("dram", 1, 1, latency=20),
                                  _timed_pool("sram", 8, 8, size=64)])
    factory = _build({"tir.usmp.algorithm": "greedy_by_size"}, pools)
    meta = factory.get_model_metadata()
    assert [(q["pool_name"], q["planned_bytes"]) for q in meta.pools] == [("dram", 128),
                                                                          ("sram", 64)]
    # the struct keeps the order given
    assert "struct tvmgen_default_workspace_pools {\n  void* dram;\n  void* sram;\n};" in \
        factory.get_header()


@pytest.mark.parametrize("bad,match", [
    ({"target_burst_bytes": 64}, "target_burst_bytes must map targets to bytes, got int"),
    ({"target_burst_bytes": {"c": 0}}, r"target_burst_bytes\['c'\] must be positive"),
    ({"target_burst_bytes": {42: 8}}, "42 is not a target"),
])
def test_bad_burst_sizes_are_refused(bad, match):
    with pytest.raises(PoolError, match=match):
        PoolInfoProperties(**bad)


def test_pools_too_small_name_the_buffer_and_the_needed_size():
    with pytest.raises(PoolError, match=r"buf1 \(112 bytes\) fits in none of small \(128 "
                                        r"bytes\), tiny \(16 bytes\); the model needs at least "
                                        r"224 bytes of workspace .*a single pool of 224 bytes"):
        plan_pools([100, 100], [(0, 1), (0, 1)], [_pool("small", 128), _pool("tiny", 16)],
                   "greedy_by_size", 16, names=["buf0", "buf1"])


# -- the build ----------------------------------------------------------------------------------
def _model() -> tvm.IRModule:
    x = relay.var("x", shape=(1, 16), dtype="float32")
    y = relay.nn.relu(relay.add(x, relay.const(np.ones((1, 16), "float32"))))
    y = relay.multiply(relay.exp(y), y)
    return tvm.IRModule.from_expr(relay.Function([x], relay.tanh(y)))


def _build(config=None, pools=None, executor=C_IFACE, target="c", runtime="crt"):
    cfg = {"tir.usmp.enable": True, "relay.FuseOps.max_depth": 1, **(config or {})}
    with tvm.transform.PassContext(opt_level=3, config=cfg):
        return relay.build(_model(), target, executor=Executor("aot", executor),
                           runtime=Runtime(runtime), workspace_memory_pools=pools)


def test_build_reports_each_pool_next_to_its_lower_bound():
    factory = _build({"tir.usmp.algorithm": "hill_climb"},
                     WorkspaceMemoryPools([_pool("sram", 64), _pool("dram")]))
    meta = factory.get_model_metadata()
    assert [q["pool_name"] for q in meta.pools] == ["sram", "dram"]
    assert meta.pools[0]["planned_bytes"] == 64  # one 64-byte tensor fits the bounded pool
    assert meta.main.workspace_size_bytes == sum(q["planned_bytes"] for q in meta.pools)
    assert meta.memory["planned_bytes"] == meta.memory["lower_bound"]
    report = memory_report(meta)
    assert "pool sram: 64 bytes planned (lower bound 64, limit 64)" in report
    head = factory.get_header()
    assert "#define TVMGEN_DEFAULT_SRAM_WORKSPACE_POOL_SIZE 64" in head
    assert "struct tvmgen_default_workspace_pools {\n  void* sram;\n  void* dram;\n};" in head
    assert ("int32_t tvmgen_default_run(struct tvmgen_default_inputs* inputs, struct "
            "tvmgen_default_outputs* outputs, struct tvmgen_default_workspace_pools* "
            "workspace_pools);") in head


def test_ember_debug_prints_each_pool_next_to_its_bound(monkeypatch, capsys):
    monkeypatch.setenv("EMBER_DEBUG", "1")
    _build({"tir.usmp.algorithm": "greedy_by_size"},
           WorkspaceMemoryPools([_pool("sram", 64), _pool("dram")]))
    err = capsys.readouterr().err
    assert "[ember] relay.build: aot workspace pools 192 bytes (lower bound 192" in err
    assert "[ember]   pool sram: 64 bytes planned (lower bound 64, limit 64)" in err
    assert "[ember]   pool dram: 128 bytes planned (lower bound 128, no limit)" in err


def test_default_pool_and_packed_interface_run_on_the_cpp_runtime():
    """Without pools the USMP uses one unbounded pool; the packed entry carves the pools out
    of its one workspace, so the model runs through the usual executor."""
    factory = _build(pools=None, executor={}, target="llvm", runtime="cpp")
    meta = factory.get_model_metadata()
    assert [q["pool_name"] for q in meta.pools] == ["global_workspace"]
    from ember.runtime.executor import AotModule

    x = np.linspace(-1, 1, 16, dtype="float32").reshape(1, 16)
    mod = AotModule(factory["default"](tvm.cpu()))
    mod.set_input("x", x)
    mod.run()
    y = np.maximum(x + 1, 0)
    np.testing.assert_allclose(mod.get_output(0).numpy(), np.tanh(np.exp(y) * y), rtol=1e-5)


def test_a_pool_that_is_too_small_fails_the_build_with_the_needed_size():
    with pytest.raises(PoolError, match=r"workspace pools are too small: .* the model needs "
                                        r"at least 192 bytes of workspace .*; a single pool "
                                        r"of 192 bytes holds this plan"):
        _build(pools=WorkspaceMemoryPools([_pool("sram", 32)]))


@pytest.mark.parametrize("size", [0, -2, -100])
def test_pools_with_zero_or_negative_sizes_are_refused(size):
    with pytest.raises(PoolError, match=rf"size_hint_bytes must be positive \(or -1 for no "
                                        rf"limit\), got {size}"):
        PoolInfoProperties(size_hint_bytes=size)


@pytest.mark.parametrize("bad,match", [
    ({"size_hint_bytes": 1.5}, "size_hint_bytes must be an int, got float"),
    ({"size_hint_bytes": True}, "size_hint_bytes must be an int, got bool"),
    ({"read_bandwidth_bytes_per_cycle": 0}, "read_bandwidth_bytes_per_cycle must be positive"),
    ({"read_latency_cycles": -1}, "read_latency_cycles must be an int >= 0"),
])
def test_bad_pool_properties_name_the_field(bad, match):
    with pytest.raises(PoolError, match=match):
        PoolInfoProperties(**bad)


@pytest.mark.parametrize("make,match", [
    (lambda: WorkspacePoolInfo("my pool", ["c"]), "pool_name must be a C identifier"),
    (lambda: WorkspacePoolInfo("", ["c"]), "pool_name must be a C identifier"),
    (lambda: WorkspacePoolInfo("p", []), "targets must be a non-empty list"),
    (lambda: WorkspacePoolInfo("p", [42]), "42 is not a target"),
    (lambda: WorkspacePoolInfo("p", ["c"], {"size_hint_bytes": 4}),
     "pool_info_properties must be PoolInfoProperties, got dict"),
    (lambda: WorkspaceMemoryPools([_pool("a"), _pool("a")]), "two pools are named 'a'"),
    (lambda: WorkspaceMemoryPools(["a"]), "pool 0 must be a WorkspacePoolInfo, got str"),
    (lambda: WorkspaceMemoryPools(_pool("a")), "expected a list of WorkspacePoolInfo"),
])
def test_bad_pools_are_refused_where_they_are_made(make, match):
    with pytest.raises(PoolError, match=match):
        make()


def test_a_pool_no_target_can_use_is_refused():
    pools = WorkspaceMemoryPools([_pool("sram"), WorkspacePoolInfo("gpu_mem", ["cuda"])])
    with pytest.raises(PoolError, match=r"workspace pool 'gpu_mem' serves targets \['cuda"
                                        r".*none of which is the build's target 'c"):
        _build(pools=pools)


def test_workspace_io_with_the_packed_interface_is_refused():
    with pytest.raises(PoolError, match="use_workspace_io needs Executor.*interface-api.*'c'"):
        _build({"tir.usmp.use_workspace_io": True}, executor={}, target="llvm", runtime="cpp")


def test_an_unknown_algorithm_is_refused():
    with pytest.raises(PoolError, match=r"tir.usmp.algorithm must be one of 'greedy_by_size', "
                                        r"'greedy_by_conflicts', 'hill_climb', got 'best'"):
        _build({"tir.usmp.algorithm": "best"})


def test_pools_without_the_usmp_are_refused():
    with pytest.raises(PoolError, match=r"workspace_memory_pools need the USMP"):
        _build({"tir.usmp.enable": False}, WorkspaceMemoryPools([_pool("sram")]))
    with pytest.raises(PoolError, match="must be WorkspaceMemoryPools, got list"):
        _build(pools=[_pool("sram")])


# -- the zoo: hill_climb reaches the liveness lower bound ------------------------------------------
ZOO_DEFAULT = ("mlp", "mobilenet_32", "resnet50_64")  # resnet50: the greedy orders miss it


@pytest.mark.parametrize("name", [pytest.param(n, id=n, marks=() if n in ZOO_DEFAULT else
                                               pytest.mark.slow) for n in {**FAST, **SLOW}])
def test_hill_climb_reaches_the_bound_on_the_zoo(name):
    from ember.ir.transform import PassContext
    from ember.relay.backend._liveness import Dataflow
    from ember.relay.backend.aot.usmp import UsmpSettings, plan_dataflow_pools
    from ember.relay.backend.pipeline import optimize
    from ember.relay.transform import InferType, ToGraphNormalForm
    from ember.target import Target

    mod, params = {**FAST, **SLOW}[name]()
    with PassContext(opt_level=3):
        fused, _ = optimize(ToGraphNormalForm()(InferType()(mod)), Target("c"), None, params)
    df = Dataflow.from_function(fused["main"], fused)
    _, plan = plan_dataflow_pools(df, UsmpSettings("hill_climb", False, (_pool("one"),)), 16)
    assert plan.total == plan.lower_bound > 0


# -- constant pools -----------------------------------------------------------------------------
def _cpool(name: str, size: int = -1) -> ConstantPoolInfo:
    return ConstantPoolInfo(name, ["llvm"], pool_info_properties=PoolInfoProperties(
        size_hint_bytes=size))


def _const_build(pools, link_params=True):
    x = relay.var("x", shape=(1, 16), dtype="float32")
    a = np.arange(16, dtype="float32").reshape(1, 16)
    b = np.arange(16, dtype="int32").reshape(1, 16)
    y = relay.add(relay.multiply(x, relay.const(a)), relay.cast(relay.const(b), "float32"))
    with tvm.transform.PassContext(opt_level=3):
        factory = relay.build(tvm.IRModule.from_expr(relay.Function([x], y)), "llvm",
                              executor=Executor("aot", {"link-params": link_params}),
                              runtime=Runtime("cpp"), constant_memory_pools=pools)
    return factory, a + b


def test_constant_pools_hold_the_linked_constants():
    factory, want = _const_build(ConstantMemoryPools([_cpool("flash", 64), _cpool("rom")]))
    code = factory.lib.code
    # the first constant (64 bytes) fills flash, the next spills into rom
    assert re.search(r"static const unsigned char tvmgen_default_flash\[65\] __attribute__\("
                     r'\(section\("\.rodata\.tvm"\), aligned\(16\)\)\)', code)
    assert "static const unsigned char tvmgen_default_rom[" in code
    assert "tvmgen_default_constant_0" not in code  # no separate arrays
    # reported: the metadata (JSON and C struct), the header, EMBER_DEBUG's report
    meta = factory.get_model_metadata()
    assert meta.memory["constant_pool.flash.planned_bytes"] == 64
    assert meta.memory["constant_pool.rom.planned_bytes"] == 64
    head = factory.get_header()
    assert "#define TVMGEN_DEFAULT_FLASH_CONSTANT_POOL_SIZE 64" in head
    assert "#define TVMGEN_DEFAULT_ROM_CONSTANT_POOL_SIZE 64" in head
    assert 'static const struct TVMPoolInfo tvmgen_default_constant_pools[] = {\n  {"flash", ' \
           '64LL},\n  {"rom", 64LL},\n};' in code
    assert re.search(r'\{"p\d", "flash", 0LL, 64LL\},\n  \{"p\d", "rom", 0LL, 64LL\}', code)
    assert "tvmgen_default_constant_pools, 2, tvmgen_default_pooled_constants, 2};" in code
    assert "[ember]   constant pool flash: 64 bytes" in memory_report(meta)
    from ember.runtime.executor import AotModule

    mod = AotModule(factory["default"](tvm.cpu()))
    mod.set_input("x", np.ones((1, 16), "float32"))
    mod.run()
    np.testing.assert_allclose(mod.get_output(0).numpy(), want)


def test_constant_pools_too_small_or_misused_are_refused():
    with pytest.raises(PoolError, match=r"constant pools are too small: constant p\d \(64 "
                                        r"bytes\) fits in none of flash \(32 bytes, 0 used\)"):
        _const_build(ConstantMemoryPools([_cpool("flash", 32)]))
    with pytest.raises(PoolError, match=r"constant_memory_pools hold linked constants: build "
                                        r"with Executor\('aot', \{'link-params': True\}\)"):
        _const_build(ConstantMemoryPools([_cpool("flash")]), link_params=False)
    with pytest.raises(PoolError, match=r"constant pool 'flash' serves targets \['c'\]"):
        _const_build(ConstantMemoryPools([ConstantPoolInfo("flash", ["c"])]))
    with pytest.raises(PoolError, match="must be ConstantMemoryPools, got list"):
        _const_build([_cpool("flash")])
    with pytest.raises(PoolError, match="pool 0 must be a ConstantPoolInfo, got WorkspacePoolInfo"):
        ConstantMemoryPools([_pool("flash")])


# -- through ember.testing.aot, as TVM's test_crt_aot_usmp.py drives it ---------------------------
@pytest.mark.parametrize("use_workspace_io", [False, True])
def test_testing_aot_runner_provides_the_pools(use_workspace_io):
    from ember.micro.testing import AOT_DEFAULT_RUNNER
    from ember.testing.aot import AOTTestModel, compile_models, generate_ref_data, run_and_check

    mod = _model()
    inputs = {"x": np.linspace(-2, 2, 16, dtype="float32").reshape(1, 16)}
    model = AOTTestModel(module=mod, inputs=inputs, outputs=generate_ref_data(mod, inputs))
    config = {"tir.usmp.enable": True, "tir.usmp.algorithm": "greedy_by_size",
              "tir.usmp.use_workspace_io": use_workspace_io, "relay.FuseOps.max_depth": 1}
    pools = WorkspaceMemoryPools([_pool("sram", 64), _pool("dram")])
    compiled = compile_models(model, "c", True, pass_config=config,
                              workspace_memory_pools=pools)
    assert [q["pool_name"] for q in compiled[0].executor_factory.get_model_metadata().pools] \
        == ["sram", "dram"]
    run_and_check(compiled, AOT_DEFAULT_RUNNER, "c", use_workspace_io=use_workspace_io)


def test_pools_survive_the_metadata_json_and_a_bad_pool_entry_is_named():
    import json

    from ember.runtime.aot_format import MetadataError, parse_metadata

    meta = _build(pools=WorkspaceMemoryPools([_pool("sram", 64), _pool("dram")]),
                  config={"tir.usmp.use_workspace_io": True}).get_model_metadata()
    back = parse_metadata(meta.to_json())
    assert back.pools == meta.pools and back.use_workspace_io
    obj = json.loads(meta.to_json())
    del obj["pools"][1]["planned_bytes"]
    with pytest.raises(MetadataError, match=r"pools\[1\]"):
        parse_metadata(json.dumps(obj))
    obj["pools"] = "sram"
    with pytest.raises(MetadataError, match=r"pools: expected list, got str"):
        parse_metadata(json.dumps(obj))


def test_the_cli_accepts_the_usmp_options():
    from ember.cli._console import CLIError
    from ember.cli.options import parse_pass_config

    assert parse_pass_config(["tir.usmp.enable=1", "tir.usmp.algorithm=hill_climb",
                              "tir.usmp.use_workspace_io=0"]) == {
        "tir.usmp.enable": True, "tir.usmp.algorithm": "hill_climb",
        "tir.usmp.use_workspace_io": False}
    with pytest.raises(CLIError, match="hill_climb"):
        parse_pass_config(["tir.usmp.algorithm=best"])


# -- operator scratch in the pools ------------------------------------------------------------------
def _scratch_model() -> tvm.IRModule:
    """conv2d with the weights as an input: the kernel pads its input in scratch
    (16 x 34 x 34 floats, above the stack limit)."""
    x = relay.var("x", shape=(1, 16, 32, 32))
    w = relay.var("w", shape=(8, 16, 3, 3))
    y = relay.nn.relu(relay.nn.conv2d(x, w, padding=(1, 1), channels=8, kernel_size=(3, 3)))
    return tvm.IRModule.from_expr(relay.Function([x, w], y))


def _run_hosted(factory, inputs):
    from ember.runtime.executor import AotModule

    mod = AotModule(factory["default"](tvm.cpu()))
    for name, value in inputs.items():
        mod.set_input(name, value)
    mod.run()
    return mod.get_output(0).numpy()


@pytest.fixture(scope="module")
def scratch_builds():
    """The scratch model built for the C++ runtime (packed operator calls) with and without the
    USMP, and its inputs."""
    rng = np.random.default_rng(0)
    inputs = {"x": rng.standard_normal((1, 16, 32, 32), dtype="float32"),
              "w": rng.standard_normal((8, 16, 3, 3), dtype="float32")}
    out = {}
    for usmp in (True, False):
        cfg = {"tir.usmp.enable": usmp, "tir.usmp.algorithm": "greedy_by_size"}
        pools = WorkspaceMemoryPools([
            WorkspacePoolInfo("sram", ["llvm"], PoolInfoProperties(size_hint_bytes=4096)),
            WorkspacePoolInfo("dram", ["llvm"])]) if usmp else None
        with tvm.transform.PassContext(opt_level=3, config=cfg):
            out[usmp] = relay.build(_scratch_model(), "llvm", executor=Executor("aot"),
                                    runtime=Runtime("cpp"), workspace_memory_pools=pools)
    return out, inputs


def test_kernel_scratch_is_planned_into_the_pools(scratch_builds, monkeypatch, capsys):
    builds, inputs = scratch_builds
    with_usmp, without = builds[True], builds[False]
    meta = with_usmp.get_model_metadata()
    need = without.get_model_metadata().memory["backend_workspace_bytes"]
    assert need > 16 * 34 * 34 * 4  # without the USMP: TVMBackendAllocWorkspace at run time
    assert meta.memory["backend_workspace_bytes"] == 0
    scratch = meta.memory["operator_workspace_bytes"]
    assert 16 * 34 * 34 * 4 <= scratch <= need
    # sram (4096 bytes) cannot hold it: it spills into dram, next to nothing else
    assert meta.memory["workspace_pool.dram.operator_workspace_bytes"] == scratch
    assert meta.memory["workspace_pool.sram.operator_workspace_bytes"] == 0
    assert meta.pools[1]["planned_bytes"] >= scratch
    code = with_usmp.lib.code
    assert re.search(r"\)TVMBackendAllocWorkspace\(", without.lib.code)
    assert not re.search(r"\)TVMBackendAllocWorkspace\(", code)
    assert "uint8_t* restrict ember_workspace" in code
    np.testing.assert_allclose(_run_hosted(with_usmp, inputs), _run_hosted(without, inputs),
                               rtol=1e-5, atol=1e-5)
    report = memory_report(meta)
    assert f"pool dram: {meta.pools[1]['planned_bytes']} bytes planned" in report
    assert f"operator scratch up to {scratch})" in report


def test_a_kernel_called_without_its_scratch_names_the_missing_argument(scratch_builds):
    builds, inputs = scratch_builds
    meta = builds[True].get_model_metadata()
    (name,) = [op["function_name"] for op in meta.operators]
    kernel = builds[True].lib[name]
    out = tvm.nd.empty((1, 8, 32, 32))
    with pytest.raises(tvm.TVMError, match=rf"{name}: expected 4 arguments, got 3"):
        kernel(tvm.nd.array(inputs["x"]), tvm.nd.array(inputs["w"]), out)
    small = tvm.nd.empty((64,), "uint8")
    with pytest.raises(tvm.TVMError, match=rf"{name}: argument 3 \(workspace\): expected at "
                                           rf"least {meta.memory['operator_workspace_bytes']} "
                                           "bytes"):
        kernel(tvm.nd.array(inputs["x"]), tvm.nd.array(inputs["w"]), out, small)
    with pytest.raises(tvm.TVMError, match=rf"{name}: argument 3 \(workspace\)"):
        kernel(tvm.nd.array(inputs["x"]), tvm.nd.array(inputs["w"]), out,
               tvm.nd.empty((1 << 20,), "float32"))


# -- tir.disable_storage_rewrite ------------------------------------------------------------------
def test_disable_storage_rewrite_gives_every_buffer_its_own_bytes():
    reuse = _build({"tir.usmp.algorithm": "greedy_by_size"}).get_model_metadata()
    alone = _build({"tir.usmp.algorithm": "greedy_by_size",
                    "tir.disable_storage_rewrite": True}).get_model_metadata()
    # _model: four 64-byte intermediates, at most three alive together
    assert reuse.pools[0]["planned_bytes"] == 192
    assert alone.pools[0]["planned_bytes"] == alone.memory["total_bytes"] == 256
    assert alone.pools[0]["lower_bound"] == 256


def test_default_algorithm_is_improved_to_the_bound_where_greedy_misses_it() -> None:
    """No tir.usmp.algorithm configured: the default (greedy_by_conflicts) plan is handed to
    hill_climb when it is above the liveness bound; a configured algorithm is taken as is."""
    import random as _random

    from ember.ir.memory_pools import WorkspacePoolInfo as _Pool
    from ember.relay.backend.aot.usmp import DEFAULT_ALGORITHM, plan_pools, usmp_settings

    rng = _random.Random(0)  # dense random spans, as benchmarks/bench_usmp.py --synthetic
    spans = []
    for _ in range(100):
        start = rng.randrange(33)
        spans.append((start, start + rng.randrange(1, 12)))
    sizes = [rng.randrange(1, 2000) * 16 for _ in range(100)]
    target = tvm.target.Target("c")
    pools = [_Pool("global_workspace", [target])]
    plain = plan_pools(sizes, spans, pools, DEFAULT_ALGORITHM, 16)
    improved = plan_pools(sizes, spans, pools, DEFAULT_ALGORITHM, 16, improve=True)
    assert plain.pools[0].planned_bytes > plain.lower_bound  # the greedy order misses it here
    assert improved.pools[0].planned_bytes < plain.pools[0].planned_bytes
    assert usmp_settings({"tir.usmp.enable": True}, None, target, "c").improve
    assert not usmp_settings({"tir.usmp.enable": True, "tir.usmp.algorithm": DEFAULT_ALGORITHM},
                             None, target, "c").improve
