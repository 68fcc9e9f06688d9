"""Code from ember's own C generator (ember.tir) runs on the C runtime: a kernel with two
workspace buffers above the stack limit and a call_packed to an application function, built
with libembercrt.a and no Python. Exhausting the arena fails cleanly: the failing kernel frees
the blocks it took (in LIFO order) before returning, so the arena is not left busy."""
from __future__ import annotations

import re
import subprocess

import numpy as np
import pytest

N = 8192  # 32 KiB per buffer: above tir's stack limit, so both use TVMBackendAllocWorkspace

MAIN = r"""
#include <stdio.h>
#include "ember/crt/crt.h"

int crt_e2e(TVMValue* args, int* type_codes, int num_args, TVMValue* out_ret_value,
            int* out_ret_tcode, void* resource_handle);

/* app.scale(x, y): y = 2 x, a hand-written packed function the kernel calls by name */
static int app_scale(TVMValue* args, int* codes, int n, TVMValue* ret, int* ret_code, void* h) {
  const DLTensor* x = (const DLTensor*)args[0].v_handle;
  const DLTensor* y = (const DLTensor*)args[1].v_handle;
  int64_t i;
  (void)codes; (void)n; (void)ret; (void)ret_code; (void)h;
  for (i = 0; i < x->shape[0]; ++i) ((float*)y->data)[i] = 2.0f * ((const float*)x->data)[i];
  return 0;
}

static const EmberFuncEntry g_funcs[] = {{"app.scale", app_scale}};
static const EmberFuncRegistry g_registry = {"app", g_funcs, 1};
static unsigned char g_small[40 * 1024], g_big[80 * 1024];
static float g_a[N] __attribute__((aligned(64))), g_d[N] __attribute__((aligned(64)));

static int run(const char* label) {
  int64_t shape[1] = {N};
  DLTensor a = {g_a, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, shape, NULL, 0};
  DLTensor d = {g_d, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, shape, NULL, 0};
  TVMValue args[2], ret;
  int codes[2] = {kTVMDLTensorHandle, kTVMDLTensorHandle}, ret_code = kTVMNullptr;
  int rc;
  args[0].v_handle = &a;
  args[1].v_handle = &d;
  rc = crt_e2e(args, codes, 2, &ret, &ret_code, NULL);
  printf("%s: rc=%d live=%u msg=%s\n", label, rc, (unsigned)ember_crt_workspace_stats().live,
         rc ? TVMGetLastError() : "");
  return rc;
}

int main(void) {
  int i;
  for (i = 0; i < N; ++i) g_a[i] = (float)(i % 97) - 48.0f;
  ember_crt_register_func_registry(&g_registry);
  ember_crt_init(g_small, sizeof(g_small));
  run("small");                            /* B fits, C does not */
  printf("busy: %d\n", ember_crt_init(g_big, sizeof(g_big)) == kTvmErrorWorkspaceBusy);
  ember_crt_workspace_reset();             /* drop what the failed kernel left */
  printf("init: %d\n", ember_crt_init(g_big, sizeof(g_big)));
  if (run("big") != 0) return 1;
  for (i = 0; i < N; ++i) printf("%g\n", g_d[i]);
  return 0;
}
"""


@pytest.fixture(scope="module")
def kernel_source() -> str:
    from ember import te, tir

    a = te.placeholder((N,), name="A")
    b = te.compute((N,), lambda i: a[i] + 1.0, name="B")
    c = te.extern((N,), [b], lambda ins, outs: tir.call_packed("app.scale", ins[0], outs[0]),
                  name="C")
    d = te.compute((N,), lambda i: c[i] * 3.0, name="D")
    return tir.build(te.create_schedule(d.op), [a, d], name="crt_e2e").get_source()


def test_generated_kernel_runs_on_the_c_runtime(build_program, kernel_source):
    calls = re.findall(r"TVMBackendAllocWorkspace\((?!int )", kernel_source)  # not the prototype
    assert len(calls) == 2
    exe = build_program("codegen", {"kernel.c": kernel_source, "main.c": MAIN},
                        flags=(f"-DN={N}",), strict=False)
    proc = subprocess.run([str(exe)], check=False, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "small: rc=-1 live=0 msg=crt_e2e: cannot allocate the workspace C"
    assert lines[1:4] == ["busy: 0", "init: 0", "big: rc=0 live=0 msg="]
    a = (np.arange(N) % 97 - 48).astype("float32")
    np.testing.assert_allclose(np.array(lines[4:], dtype="float32"), (a + 1) * 2 * 3, rtol=1e-6)
