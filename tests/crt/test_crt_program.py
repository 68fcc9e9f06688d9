"""A firmware-style program on the C runtime: stand-in generated code (tests/crt/programs/
model.c, which includes only the two headers generated code may include), a registry, and an
application that runs the model and every error path, built with libembercrt.a and run."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

PROGRAMS = Path(__file__).parent / "programs"
N = 16


def _sources(*names: str) -> dict[str, str]:
    return {name: (PROGRAMS / name).read_text() for name in names}


def _lines(stdout: str) -> dict[str, str]:
    """'label: rest' lines -> {label: rest}."""
    return dict(line.split(": ", 1) for line in stdout.splitlines() if ": " in line)


def _run(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(argv, check=False, capture_output=True, text=True, timeout=60)


def _expected_output() -> list[float]:
    i = np.arange(N, dtype=np.float32)
    return list(np.maximum((i - 8) + np.float32(0.25) * i, 0))


@pytest.fixture(scope="module")
def model_exe(build_program) -> Path:
    """model.c + registry.c + main.c, linked with the host platform and libembercrt.a."""
    return build_program("model", _sources("model.c", "registry.c", "main.c"))


@pytest.fixture(scope="module")
def model_out(model_exe: Path) -> dict[str, str]:
    """The labelled lines of one normal run of the program (which must exit 0)."""
    proc = _run(str(model_exe))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.rstrip().endswith("done")
    return _lines(proc.stdout)


def test_generated_code_includes_only_the_backend_headers():
    includes = re.findall(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', _sources("model.c")["model.c"],
                          re.MULTILINE)
    assert includes == ["ember/c_backend_api.h", "ember/c_packed_func.h"]


def test_model_runs_and_every_error_path_is_reported(model_out):
    out = model_out

    rc, *values = out["run"].split()
    assert rc == "0"
    np.testing.assert_allclose([float(v) for v in values], _expected_output(), rtol=1e-6)
    assert out["rerun"] == out["run"]  # the arena is reusable after every failure below

    assert out["uninit"].startswith("rc=-1 code=kTvmErrorWorkspaceNotInitialized msg="
                                    "TVMBackendAllocWorkspace: no workspace arena; call "
                                    "ember_crt_init")
    assert out["init"] == "0" and out["register"] == "0"
    assert "code=kTvmErrorFunctionNameNotFound" in out["unregistered"]
    assert "no function registry is registered" in out["unregistered"]
    assert out["bad_call"] == ("rc=-1 code=kTvmErrorFunctionReportedError "
                               "msg=tvmgen_test_fused_nn_relu: expected 2 arguments")
    assert out["missing"] == (
        "rc=-1 code=kTvmErrorFunctionNameNotFound msg=TVMBackendGetFuncFromEnv: no function "
        "named 'tvmgen_test_no_such_op' among the 1 functions of 1 registered registry(ies)")
    assert re.fullmatch(r"rc=-1 code=kTvmErrorWorkspaceExhausted msg=TVMBackendAllocWorkspace: "
                        r"workspace arena exhausted: requested 2400 bytes, \d+ available "
                        r"\(\d+ of \d+ bytes in use by 1 block\(s\)\); give ember_crt_init a "
                        r"larger pool", out["exhausted"])


def test_failed_runs_leave_the_arena_empty(model_out):
    stats = {k: dict(kv.split("=") for kv in model_out[k].split())
             for k in ("after_run", "after_errors", "after_lifo")}
    for s in stats.values():
        assert s["used"] == "0" and s["live"] == "0"
    # the arena was handed over misaligned (g_arena + 1): the start is rounded up
    assert 4096 - 63 <= int(stats["after_run"]["size"]) < 4096
    # one run of N floats: two blocks of 64 bytes, each behind a header and alignment padding
    assert 2 * N * 4 < int(stats["after_run"]["peak"]) <= 2 * (N * 4 + 4 + 64 + 64)


def test_workspace_misuse_is_an_error_code_not_a_crash(model_out):
    out = model_out
    assert out["lifo"] == "p1=1 p2=1 distinct=1 aligned=1"
    assert out["free_p1_first"].startswith("rc=514 code=kTvmErrorWorkspaceFreeNotLast msg="
                                           "TVMBackendFreeWorkspace: blocks must be freed in "
                                           "reverse order of allocation (LIFO)")
    assert out["busy"].startswith("rc=517 code=kTvmErrorWorkspaceBusy msg=ember_crt_init: the "
                                  "workspace arena still has 2 live block(s)")
    assert out["free_p2"] == "0" and out["free_p1"] == "0"
    assert "code=kTvmErrorWorkspaceFreeInvalid" in out["double_free"]
    assert "freed twice" in out["double_free"]
    assert out["device"].startswith("rc=-1 code=kTvmErrorWorkspaceUnsupportedDevice msg="
                                    "TVMBackendAllocWorkspace: device type 2 (id 0) is not "
                                    "supported")


def test_overrun_of_a_workspace_block_calls_the_platform_abort(model_exe):
    proc = _run(str(model_exe), "overrun")
    assert proc.returncode == 70  # platform/host/platform.c's abort status
    assert "unreachable" not in proc.stdout
    assert proc.stderr.startswith("TVMPlatformAbort: kTvmErrorPlatformWorkspaceCorrupted "
                                  "(0x101): TVMBackendFreeWorkspace: a workspace block was "
                                  "written past its end")


OWN_WORKSPACE = r"""
/* An application that brings its own workspace functions: libembercrt.a's workspace.o must
 * then stay out of the link (no duplicate symbols), the rest of the runtime still serves. */
#include <stdio.h>
#include "ember/crt/crt.h"

static unsigned char g_pool[1 << 12];
static size_t g_top;
static int g_allocs;

void* TVMBackendAllocWorkspace(int device_type, int device_id, uint64_t nbytes, int c, int b) {
  void* p = g_pool + g_top;
  (void)device_type; (void)device_id; (void)c; (void)b;
  g_top += (size_t)((nbytes + 63u) & ~(uint64_t)63u);
  ++g_allocs;
  return p;
}

int TVMBackendFreeWorkspace(int device_type, int device_id, void* ptr) {
  (void)device_type; (void)device_id;
  g_top = (size_t)((unsigned char*)ptr - g_pool);
  return 0;
}

extern const EmberFuncRegistry tvmgen_test_func_registry;
int32_t tvmgen_test_run_model(float* a, float* b, float* out, int64_t n, int bad);

int main(void) {
  float a[4] = {-2, -1, 1, 2}, b[4] = {0, 0, 0, 1}, out[4];
  int rc;
  ember_crt_register_func_registry(&tvmgen_test_func_registry);
  rc = tvmgen_test_run_model(a, b, out, 4, 0);
  printf("rc=%d allocs=%d top=%lu out=%g %g %g %g\n", rc, g_allocs, (unsigned long)g_top,
         out[0], out[1], out[2], out[3]);
  return 0;
}
"""


def test_application_may_replace_the_workspace_functions(build_program):
    sources = _sources("model.c", "registry.c")
    sources["own_workspace.c"] = OWN_WORKSPACE
    exe = build_program("own_workspace", sources)
    proc = _run(str(exe))
    assert proc.stdout.strip() == "rc=0 allocs=2 top=0 out=0 0 1 3"
