"""USMP builds as standalone C: the model exported as Model Library Format compiles with
``-Wall -Werror``, and a C ``main`` that provides the workspace pools (static arrays of the
header's ``TVMGEN_<MOD>_<POOL>_WORKSPACE_POOL_SIZE`` bytes) runs it and prints what the
reference interpreter computes: with one, two and three pools, each planning algorithm, and
with the inputs and outputs in the pools (``tir.usmp.use_workspace_io``); the linked weights
live in two constant pools.
"""
from __future__ import annotations

import json
import re
import tarfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _micro_models import ATOL, RTOL, cnn_model, inputs_for, interpreter, needs_make
from test_standalone_build import CFLAGS, _run, crt  # noqa: F401  (crt: a fixture)

import ember as tvm
from ember import relay
from ember.ir.memory_pools import (
    ConstantMemoryPools,
    ConstantPoolInfo,
    PoolInfoProperties,
    WorkspaceMemoryPools,
    WorkspacePoolInfo,
)
from ember.micro import export_model_library_format
from ember.relay.backend import Executor, Runtime
from ember.testing import find_c_compiler
from ember.testing._aot_c import data_header

pytestmark = needs_make
C_IFACE = {"interface-api": "c", "unpacked-api": True, "link-params": True}
# the linked weights in two constant pools: a small one that fills, then one without a limit
CONSTANT_POOLS = ConstantMemoryPools([
    ConstantPoolInfo("flash", ["c"], pool_info_properties=PoolInfoProperties(
        size_hint_bytes=256)), ConstantPoolInfo("rom", ["c"])])

MAIN = r"""#include <stdio.h>
#include <string.h>
#include "ember/crt/crt.h"
#include "{prefix}.h"
#include "data.h"

static uint8_t arena[{PREFIX}_BACKEND_WORKSPACE_SIZE + 4096] __attribute__((aligned(64)));
{pool_arrays}

int main(void) {{
  struct {prefix}_workspace_pools pools = {{{pool_members}}};
  size_t i;
  int32_t rc = ember_crt_init(arena, sizeof(arena));
  if (rc != 0) return 2;
{run}
  printf("run: %d\n", (int)rc);
{prints}
  return rc != 0;
}}
"""


def _pools(n: int, sizes: list[int]) -> WorkspaceMemoryPools:
    """``n`` pools: the first ``n - 1`` bounded (small, so buffers spill), the last not."""
    out = [WorkspacePoolInfo(f"pool{k}", ["c"], PoolInfoProperties(size_hint_bytes=sizes[k]))
           for k in range(n - 1)]
    out.append(WorkspacePoolInfo(f"pool{n - 1}", ["c"]))
    return WorkspaceMemoryPools(out)


def scratch_model() -> tuple[tvm.IRModule, dict[str, Any]]:
    """A conv2d whose padded input (16 x 34 x 34 floats) is above the kernel stack limit: the
    kernel needs scratch (weights as an input keep the padding in the kernel), then a linked
    constant added."""
    x = relay.var("x", shape=(1, 16, 32, 32))
    w = relay.var("w", shape=(8, 16, 3, 3))
    y = relay.nn.conv2d(x, w, padding=(1, 1), channels=8, kernel_size=(3, 3))
    y = relay.add(relay.nn.relu(y), relay.var("bias", shape=(1, 8, 1, 1)))
    mod = relay.transform.InferType()(tvm.IRModule.from_expr(relay.Function(
        relay.analysis.free_vars(y), y)))
    return mod, {"bias": np.linspace(-1, 1, 8, dtype="float32").reshape(1, 8, 1, 1)}


def _build(n_pools: int, algorithm: str, io: bool, model: Any = cnn_model) -> Any:
    mod, params = model()
    config = {"tir.usmp.enable": True, "tir.usmp.algorithm": algorithm,
              "tir.usmp.use_workspace_io": io}
    with tvm.transform.PassContext(opt_level=3, config=config):
        return relay.build(mod, "c", executor=Executor("aot", C_IFACE), runtime=Runtime("crt"),
                           params=params, mod_name="usmp",
                           workspace_memory_pools=_pools(n_pools, [1024, 2048]),
                           constant_memory_pools=CONSTANT_POOLS)


def _main_c(meta: Any, io: bool) -> str:
    p, P = meta.prefix, meta.prefix.upper()
    names = [q["pool_name"] for q in meta.pools]
    arrays = "\n".join(f"static uint8_t {n}_mem[{P}_{n.upper()}_WORKSPACE_POOL_SIZE + 1] "
                       f"__attribute__((aligned({P}_WORKSPACE_ALIGNMENT)));" for n in names)
    if io:
        run = [f"  struct {p}_inputs in = {p}_map_inputs(&pools);",
               f"  struct {p}_outputs out = {p}_map_outputs(&pools);"]
        run += [f"  memcpy(in.{q.tir_name_hint}, input_{i}, sizeof(input_{i}));"
                for i, q in enumerate(meta.main.inputs)]
        run.append(f"  rc = {p}_run(&pools);")
        run += [f"  memcpy(output_{j}, out.{q.tir_name_hint}, sizeof(output_{j}));"
                for j, q in enumerate(meta.main.outputs)]
    else:
        ins = ", ".join(f".{q.tir_name_hint} = input_{i}" for i, q in enumerate(meta.main.inputs))
        outs = ", ".join(f".{q.tir_name_hint} = output_{j}"
                         for j, q in enumerate(meta.main.outputs))
        run = [f"  struct {p}_inputs in = {{{ins}}};", f"  struct {p}_outputs out = {{{outs}}};",
               f'  printf("null_pools: %d\\n", (int){p}_run(&in, &out, NULL));',
               f"  rc = {p}_run(&in, &out, &pools);"]
    prints = [f'  printf("output_{j}:");\n  for (i = 0; i < {q.nbytes}; ++i) '
              f'printf(" %02x", output_{j}[i]);\n  printf("\\n");'
              for j, q in enumerate(meta.main.outputs)]
    return MAIN.format(prefix=p, PREFIX=P, pool_arrays=arrays,
                       pool_members=", ".join(f".{n} = {n}_mem" for n in names),
                       run="\n".join(run), prints="\n".join(prints))


def _run_program(factory: Any, io: bool, tmp: Path, crt_dir: Path, model: Any = cnn_model
                 ) -> tuple[dict[str, str], Any]:
    meta = factory.get_model_metadata()
    with tarfile.open(export_model_library_format(factory, tmp / "model.tar")) as tar:
        tar.extractall(tmp / "mlf", filter="data")
    mlf = tmp / "mlf"
    mod, params = model()
    inputs = inputs_for(mod, params)
    arrays = [(f"input_{i}", inputs[q.relay_name_hint], q.relay_name_hint)
              for i, q in enumerate(meta.main.inputs)]
    arrays += [(f"output_{j}", np.zeros(q.shape, q.dtype), "output")
               for j, q in enumerate(meta.main.outputs)]
    (tmp / "data.h").write_text(data_header("DATA_H_", arrays))
    (tmp / "main.c").write_text(_main_c(meta, io))
    cc = find_c_compiler()
    incs = [f"-I{mlf / 'runtime' / 'include'}", f"-I{mlf / 'codegen' / 'host' / 'include'}",
            f"-I{tmp}"]
    objs = []
    for src in sorted((mlf / "codegen" / "host" / "src").glob("*.c")) + [tmp / "main.c"]:
        objs.append(str(tmp / (src.stem + ".o")))
        _run([cc, *CFLAGS, *incs, "-c", str(src), "-o", objs[-1]])
    exe = tmp / "program"
    _run([cc, *objs, str(crt_dir / "platform_host.o"), str(crt_dir / "libembercrt.a"), "-lm", "-o",
          str(exe)])
    out = _run([str(exe)])
    lines = dict(line.split(":", 1) for line in out.splitlines() if ":" in line)
    expected = interpreter(mod, inputs, params)
    for j, (q, want) in enumerate(zip(meta.main.outputs, expected, strict=True)):
        got = np.frombuffer(bytes.fromhex(lines[f"output_{j}"].replace(" ", "")), q.dtype)
        np.testing.assert_allclose(got.reshape(q.shape), want, rtol=RTOL, atol=ATOL)
    return lines, json.loads((mlf / "metadata.json").read_text())


# the default run: several pools and the I/O in them, in one program (each a compile of
# the model's C under the strict flags); the algorithms' plans are tested without programs
@pytest.mark.parametrize("n_pools,algorithm,io", [
    (2, "greedy_by_conflicts", True),
    pytest.param(1, "hill_climb", True, marks=pytest.mark.slow),
    pytest.param(2, "greedy_by_conflicts", False, marks=pytest.mark.slow),
    pytest.param(1, "greedy_by_size", False, marks=pytest.mark.slow),
    pytest.param(3, "greedy_by_size", True, marks=pytest.mark.slow),
    pytest.param(3, "hill_climb", False, marks=pytest.mark.slow),
])
def test_usmp_program_matches_the_interpreter(n_pools, algorithm, io, tmp_path, crt):  # noqa: F811
    factory = _build(n_pools, algorithm, io)
    lines, mlf_meta = _run_program(factory, io, tmp_path, crt)
    assert lines["run"].strip() == "0"
    if not io:
        assert lines["null_pools"].strip() != "0"  # a NULL pools struct is refused, no crash
    pools = factory.get_model_metadata().pools
    assert [q["pool_name"] for q in pools] == [f"pool{k}" for k in range(n_pools)]
    for q in pools:
        assert q["size_hint_bytes"] < 0 or q["planned_bytes"] <= q["size_hint_bytes"]
        assert q["planned_bytes"] >= q["lower_bound"]
    (entry,) = mlf_meta["modules"].values() if "modules" in mlf_meta else [mlf_meta]
    assert entry["memory"]["pools"] == [{**q, "operator_workspace_bytes": 0} for q in pools]
    code = factory.lib.code
    assert "static const unsigned char tvmgen_usmp_flash[" in code
    assert "static const unsigned char tvmgen_usmp_rom[" in code


# A kernel's scratch taken from the run-time workspace: ``<type>* name = (<type>*)TVMBackend...``
RUNTIME_WORKSPACE = re.compile(r"\)TVMBackendAllocWorkspace\(")


def test_kernel_scratch_lives_in_the_pools_with_no_heap(tmp_path, crt):  # noqa: F811
    """The conv2d's padded input comes from the pools: the C calls no
    TVMBackendAllocWorkspace, and the program runs with a C runtime arena too small for it."""
    factory = _build(2, "greedy_by_size", False, scratch_model)
    meta = factory.get_model_metadata()
    assert meta.memory["backend_workspace_bytes"] == 0
    scratch = meta.memory["operator_workspace_bytes"]
    assert scratch >= 16 * 34 * 34 * 4  # the padded input
    assert "#define TVMGEN_USMP_BACKEND_WORKSPACE_SIZE 0" in factory.get_header()
    lines, mlf_meta = _run_program(factory, False, tmp_path, crt, scratch_model)
    assert lines["run"].strip() == "0"
    sources = "".join(p.read_text() for p in (tmp_path / "mlf").rglob("codegen/host/src/*.c"))
    assert "ember_workspace" in sources and not RUNTIME_WORKSPACE.search(sources)
    (entry,) = mlf_meta["modules"].values() if "modules" in mlf_meta else [mlf_meta]
    pools = entry["memory"]["pools"]
    assert max(q["operator_workspace_bytes"] for q in pools) == scratch
    # the bounded pool (1024 bytes) cannot hold it: the scratch spills into the last pool
    assert pools[0]["operator_workspace_bytes"] == 0 and pools[-1]["planned_bytes"] >= scratch
    # the bias (32 bytes) fits the first constant pool; the second is reported, empty
    assert entry["memory"]["constant_pools"] == [{"pool_name": "flash", "size_bytes": 32},
                                                 {"pool_name": "rom", "size_bytes": 0}]
