"""The standalone C build: a model exported as Model Library Format builds, with the C runtime
of its own ``runtime/`` folder and a small C ``main``, into a program that runs with no Python
and no heap, and prints what the reference interpreter computes.

Per model (the AOT RFC's add, an MLP, a small CNN; C interface, unpacked operator calls): every
generated file compiles alone with ``-std=c99 -Wall -Werror`` (plus ``-fopenmp-simd
-DEMBER_OPENMP_SIMD``: the kernels' vectorisation hints, no OpenMP runtime); the model's
objects linked together (``ld -r``) leave no undefined allocator or stdio symbol; the
program's outputs equal the interpreter's (rtol = atol = 1e-5; integers exactly); NULL
arguments return nonzero with a message instead of crashing.
"""
from __future__ import annotations

import functools
import re
import shlex
import shutil
import subprocess
import tarfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _micro_models import (
    ATOL,
    RTOL,
    add_model,
    build_aot,
    cnn_model,
    inputs_for,
    interpreter,
    mlp_model,
    needs_make,
)

from ember.micro import export_model_library_format
from ember.testing import find_c_compiler
from ember.testing._aot_c import data_header

pytestmark = needs_make
CFLAGS = ["-std=c99", "-Wall", "-Werror", "-fopenmp-simd", "-DEMBER_OPENMP_SIMD", "-O2"]
# What model code must not pull in: an allocator, stdio, or anything that exits.
FORBIDDEN = re.compile(r"malloc|calloc|realloc|^free$|printf|puts|putc|fwrite|fputs|fopen|"
                       r"stdout|stderr|^exit$|^abort$")
# mlp: params in the constant pool the program hands over; cnn: linked into the model
MODELS = {"add": (add_model, "my_mod", {}), "mlp": (mlp_model, "mlp", {}),
          "cnn": (cnn_model, "cnn", {"link-params": True}), "cnn_pool": (cnn_model, "cnn", {})}
SLOW_MODELS = {"cnn_pool"}  # the cnn's kernels again, params as the mlp's

MAIN = r"""#include <stdio.h>
#include "ember/crt/crt.h"
#include "{prefix}.h"
#include "data.h"

static uint8_t arena[{PREFIX}_BACKEND_WORKSPACE_SIZE + 4096] __attribute__((aligned(64)));

static void check(const char* what, int32_t rc) {{
  printf("%s: %d %s\n", what, (int)rc, rc != 0 ? TVMGetLastError() : "");
}}

int main(void) {{
  struct {prefix}_inputs in = {{{inputs}}};
  struct {prefix}_outputs out = {{{outputs}}};
  size_t i;
  int32_t rc = ember_crt_init(arena, sizeof(arena));
  check("init", rc);
  {constants}
  check("null_inputs", {prefix}_run(NULL, &out));
  check("null_outputs", {prefix}_run(&in, NULL));
  in.{first} = NULL;
  check("null_member", {prefix}_run(&in, &out));
  in.{first} = input_0;
  rc = {prefix}_run(&in, &out);
  check("run", rc);
{prints}
  return rc != 0;
}}
"""


def _run(cmd: list[str], **kw: Any) -> str:
    proc = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=300, **kw)
    if proc.returncode != 0:
        pytest.fail(f"{shlex.join(cmd)} failed ({proc.returncode}):\n{proc.stdout}{proc.stderr}")
    return proc.stdout


@pytest.fixture(scope="module")
def crt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """libembercrt.a + platform_host.o, built by the Makefile of an MLF's runtime/ folder."""
    root = tmp_path_factory.mktemp("mlf_runtime")
    with tarfile.open(export_model_library_format(build_aot(*add_model(), name="rt"),
                                                  root / "rt.tar")) as tar:
        tar.extractall(root / "rt", filter="data")
    build = root / "crt"
    _run(["make", "-s", "-C", str(root / "rt" / "runtime"), f"BUILD={build}",
          f"CC={find_c_compiler()}", "platform"])
    return build


def _main_c(meta: Any, pool: bool) -> str:
    main = meta.main
    p = meta.prefix
    prints = []
    for j, q in enumerate(main.outputs):
        prints.append(f'  printf("output_{j}:");\n  for (i = 0; i < {q.nbytes}; ++i) '
                      f'printf(" %02x", output_{j}[i]);\n  printf("\\n");')
    constants = (f'check("constants", {p}_set_constants(constants, {p.upper()}_CONSTANTS_SIZE));'
                 if pool else "")
    return MAIN.format(
        prefix=p, PREFIX=p.upper(), first=main.inputs[0].tir_name_hint, constants=constants,
        inputs=", ".join(f".{q.tir_name_hint} = input_{i}" for i, q in enumerate(main.inputs)),
        outputs=", ".join(f".{q.tir_name_hint} = output_{j}" for j, q in enumerate(main.outputs)),
        prints="\n".join(prints))


@functools.cache
def _case(key: str) -> tuple[Any, dict, dict, list[np.ndarray]]:
    make, name, options = MODELS[key]
    mod, params = make()
    inputs = inputs_for(mod, params)
    return build_aot(mod, params, name=name, **options), params, inputs, interpreter(
        mod, inputs, params)


def _build(key: str, tmp: Path, crt: Path) -> tuple[Path, Path, Any]:
    """Unpack the MLF, write data.h and main.c, compile, link; (program, model.o, metadata)."""
    factory, _, inputs, _ = _case(key)
    meta = factory.get_model_metadata()
    with tarfile.open(export_model_library_format(factory, tmp / "model.tar")) as tar:
        tar.extractall(tmp / "mlf", filter="data")
    mlf = tmp / "mlf"
    arrays = [(f"input_{i}", inputs[q.relay_name_hint], q.relay_name_hint)
              for i, q in enumerate(meta.main.inputs)]
    arrays += [(f"output_{j}", np.zeros(q.shape, q.dtype), "output")
               for j, q in enumerate(meta.main.outputs)]
    if meta.needs_constant_pool:
        pool = np.zeros(meta.constant_pool_bytes, np.uint8)
        for c in meta.constants:
            data = np.frombuffer(factory.get_params()[c.name].numpy().tobytes(), np.uint8)
            pool[c.offset:c.offset + data.size] = data
        arrays.append(("constants", pool, "the constant pool"))
    (tmp / "data.h").write_text(data_header("DATA_H_", arrays))
    (tmp / "main.c").write_text(_main_c(meta, meta.needs_constant_pool))
    cc = find_c_compiler()
    incs = [f"-I{mlf / 'runtime' / 'include'}", f"-I{mlf / 'codegen' / 'host' / 'include'}",
            f"-I{tmp}"]
    objs = []
    for src in sorted((mlf / "codegen" / "host" / "src").glob("*.c")):
        objs.append(tmp / (src.stem + ".o"))
        _run([cc, *CFLAGS, *incs, "-c", str(src), "-o", str(objs[-1])])
    model_o = tmp / "model.o"
    _run(["ld", "-r", *map(str, objs), "-o", str(model_o)])
    _run([cc, *CFLAGS, *incs, "-c", str(tmp / "main.c"), "-o", str(tmp / "main.o")])
    exe = tmp / "program"
    _run([cc, str(tmp / "main.o"), str(model_o), str(crt / "platform_host.o"),
          str(crt / "libembercrt.a"), "-lm", "-o", str(exe)])
    return exe, model_o, meta


def _lines(stdout: str) -> dict[str, str]:
    return dict(line.split(": ", 1) for line in stdout.splitlines() if ": " in line)


@pytest.mark.parametrize("key", [pytest.param(k, marks=[pytest.mark.slow] if k in SLOW_MODELS
                                                else []) for k in MODELS])
def test_program_matches_the_interpreter(key, tmp_path, crt):
    exe, model_o, meta = _build(key, tmp_path, crt)
    undefined = set(_run(["nm", "-u", "--format=just-symbols", str(model_o)]).split())
    assert not {s for s in undefined if FORBIDDEN.search(s)}, sorted(undefined)
    proc = subprocess.run([str(exe)], check=False, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = _lines(proc.stdout)
    p = meta.prefix
    assert out["init"].strip() == "0" and out["run"].strip() == "0"
    assert out.get("constants", "0").strip() == "0"
    assert out["null_inputs"] == f"-1 {p}_run: inputs and outputs must not be NULL"
    assert out["null_outputs"] == out["null_inputs"]
    assert out["null_member"] == f"-1 {p}_run: input {meta.main.inputs[0].tir_name_hint} is NULL"
    *_, ref = _case(key)
    for j, (q, want) in enumerate(zip(meta.main.outputs, ref, strict=True)):
        raw = bytes(int(b, 16) for b in out[f"output_{j}"].split())
        got = np.frombuffer(raw, q.dtype).reshape(q.shape)
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)


def test_add_program_prints_the_rfc_result(tmp_path, crt):
    """uint8 [[a0, a1]] + [[b0, b1]], exactly (the RFC's example through C)."""
    exe, _, _ = _build("add", tmp_path, crt)
    out = _lines(_run([str(exe)]))
    _, _, inputs, _ = _case("add")
    want = (inputs["a"] + inputs["b"]).astype(np.uint8).tobytes().hex(" ")
    assert out["output_0"].strip() == want


@pytest.mark.skipif(shutil.which("size") is None, reason="no size tool")
def test_model_and_runtime_code_sizes_are_measurable(tmp_path, crt):
    """``size`` reads the model objects and the runtime archive (figures in the report)."""
    _, model_o, _ = _build("mlp", tmp_path, crt)
    for path in (model_o, crt / "libembercrt.a", crt / "platform_host.o"):
        rows = _run(["size", str(path)]).splitlines()[1:]
        assert rows and sum(int(r.split()[0]) for r in rows) > 0


# the c-packed form's link check is the slow set's (its objects are the unpacked form's but for
# the call wrappers)
@pytest.mark.parametrize("unpacked", [True, pytest.param(False, marks=pytest.mark.slow)],
                         ids=["unpacked-calls", "cpacked-calls"])
def test_packed_interface_objects_pull_in_no_allocator_or_stdio(tmp_path, unpacked):
    """The C runtime's packed interface (kernels' own argument checks, DLTensor entry) too."""
    mod, params = cnn_model()
    factory = build_aot(mod, params, name="packed_cnn",
                        **{"interface-api": "packed", "unpacked-api": unpacked})
    with tarfile.open(export_model_library_format(factory, tmp_path / "m.tar")) as tar:
        tar.extractall(tmp_path / "mlf", filter="data")
    mlf = tmp_path / "mlf"
    objs = []
    for src in sorted((mlf / "codegen" / "host" / "src").glob("*.c")):
        objs.append(str(tmp_path / (src.stem + ".o")))
        _run([find_c_compiler(), *CFLAGS, f"-I{mlf / 'runtime' / 'include'}",
              f"-I{mlf / 'codegen' / 'host' / 'include'}", "-c", str(src), "-o", objs[-1]])
    _run(["ld", "-r", *objs, "-o", str(tmp_path / "model.o")])
    undefined = set(_run(["nm", "-u", "--format=just-symbols", str(tmp_path / "model.o")]).split())
    assert not {s for s in undefined if FORBIDDEN.search(s)}, sorted(undefined)
    assert "TVMBackendAllocWorkspace" in undefined  # the packed entry takes its arena from there
