"""The C interface on the standalone C runtime, with no Python: the generated sources (kernels
and executor compiled as separate files, each with -Wall -Wextra -Werror), the generated header
and ember/crt build into a program that runs the model, matches the executor from Python, and
returns nonzero for a NULL input. Neither generated object references malloc or stdio."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from _aot_util import build, cnn, inputs_for, needs_cc, run

from ember.micro import get_crt_include_dirs, get_standalone_crt_dir
from ember.runtime.aot_executor import constant_pool
from ember.target.simd import cpu_choice
from ember.testing import find_c_compiler

pytestmark = needs_cc
FORBIDDEN = {"malloc", "calloc", "realloc", "free", "printf", "fprintf", "sprintf", "snprintf",
             "vsnprintf", "puts", "fputs", "fwrite"}

MAIN = r"""
#include <stdio.h>
#include "ember/crt/crt.h"
#include "tvmgen_cnn.h"

extern const EmberFuncRegistry tvmgen_cnn_func_registry;
static uint8_t g_arena[TVMGEN_CNN_BACKEND_WORKSPACE_SIZE + 4096];
static float g_out[TVMGEN_CNN_OUTPUT_SIZE / sizeof(float)];
%(data)s
%(pool)s

int main(void) {
  struct tvmgen_cnn_inputs inputs = {(void*)g_data};
  struct tvmgen_cnn_outputs outputs = {g_out};
  struct tvmgen_cnn_inputs missing = {NULL};
  unsigned i;
  if (ember_crt_init(g_arena, sizeof(g_arena)) != 0) return 2;
  if (ember_crt_register_func_registry(&tvmgen_cnn_func_registry) != 0) return 3;
%(set_pool)s
  printf("null: %%d %%s\n", tvmgen_cnn_run(&missing, &outputs) != 0, TVMGetLastError());
  if (tvmgen_cnn_run(&inputs, &outputs) != 0) {
    printf("error: %%s\n", TVMGetLastError());
    return 1;
  }
  printf("live: %%u\n", (unsigned)ember_crt_workspace_stats().live);
  for (i = 0; i < sizeof(g_out) / sizeof(float); ++i) printf("%%.9g\n", g_out[i]);
  return 0;
}
"""


def _array(name: str, data: bytes, ctype: str = "uint8_t") -> str:
    body = ", ".join(str(b) for b in data)
    return f"static const uint8_t {name}[{len(data)}] __attribute__((aligned(64))) = {{{body}}};"


def _compile(cc: str, args: list[str], cwd: Path) -> None:
    proc = subprocess.run([cc, *args], cwd=cwd, capture_output=True, text=True, timeout=300,
                          check=False)
    assert proc.returncode == 0, " ".join(args) + "\n" + proc.stderr


def _undefined(obj: Path) -> set[str]:
    nm = shutil.which("nm")
    if nm is None:
        pytest.skip("nm not found")
    out = subprocess.run([nm, "-u", str(obj)], capture_output=True, text=True, check=True).stdout
    return {line.split()[-1].lstrip("_") for line in out.splitlines() if line.strip()}


# linked params in the program: the slow set (the same strict-flag compile of the conv
# kernels again; test_aot_options and the hosted AOT tests link params by default)
@pytest.mark.parametrize("config", ["crt-c", pytest.param("crt-c-linked", marks=pytest.mark.slow)])
def test_c_interface_program_on_the_c_runtime(tmp_path, config):
    cc = find_c_compiler()
    mod, params = cnn()
    inputs = inputs_for(mod, params)
    factory = build(mod, config, params, mod_name="cnn")
    expected = run(factory, inputs, "cnn")[0]
    meta = factory.get_model_metadata()
    for name, text in factory.sources.items():
        (tmp_path / name).write_text(text)
    (tmp_path / "tvmgen_cnn.h").write_text(factory.header)
    pool = constant_pool(meta, factory.get_params()) if meta.needs_constant_pool else None
    (tmp_path / "main.c").write_text(MAIN % {
        "data": _array("g_data", inputs["data"].tobytes()),
        "pool": _array("g_pool", pool.tobytes()) if pool is not None else "",
        "set_pool": ("  if (tvmgen_cnn_set_constants(g_pool, sizeof(g_pool)) != 0) return 4;"
                     if pool is not None else "")})
    includes = [f"-I{d}" for d in get_crt_include_dirs()] + [f"-I{tmp_path}"]
    # the CPU the C was generated for (target llvm: the host's vector width); without it GCC
    # emulates the 512-bit kernels with SSE, a compile of a minute
    arch = list(cpu_choice("llvm").arch_flags)
    strict = ["-std=c99", "-O2", *arch, "-Wall", "-Wextra", "-Werror", "-Wno-unknown-pragmas"]
    for src in ("cnn_lib0.c", "cnn_lib1.c"):
        _compile(cc, [*strict, *includes, "-c", src, "-o", src[:-2] + ".o"], tmp_path)
        assert not (_undefined(tmp_path / (src[:-2] + ".o")) & FORBIDDEN), src
    crt = Path(get_standalone_crt_dir())
    runtime = sorted(str(p) for p in crt.glob("src/*/*.c")) + [str(crt / "platform/host/platform.c")]
    _compile(cc, ["-std=c99", "-O2", *arch, *includes, "main.c", "cnn_lib0.o", "cnn_lib1.o", *runtime,
                  "-lm", "-o", "prog"], tmp_path)
    proc = subprocess.run([str(tmp_path / "prog")], capture_output=True, text=True, timeout=60,
                          check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "null: 1 tvmgen_cnn_run: input data is NULL"
    assert lines[1] == "live: 0"
    np.testing.assert_allclose(np.array(lines[2:], "float32").reshape(expected.shape), expected,
                               rtol=1e-6, atol=1e-7)
