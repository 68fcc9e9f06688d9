"""Code size at -Os of what a firmware model pulls in from the C runtime (tools/
native_footprint.py computes it as an archive link would). Generous budgets: a regression to
printf, a big table or a dependency on libc shows up here. The Cortex-M4 case skips when
arm-none-eabi-gcc is not installed (apt-get install gcc-arm-none-eabi)."""
from __future__ import annotations

import importlib.util
import shutil

import pytest
from _native_testlib import REPO, compiler

_spec = importlib.util.spec_from_file_location("native_footprint",
                                               REPO / "tools" / "native_footprint.py")
footprint = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(footprint)

# (C interface AOT, AOT executor, graph executor, micro RPC server): .text budgets in bytes
BUDGETS = {"x86-64": (8 * 1024, 32 * 1024, 40 * 1024, 72 * 1024),
           "Cortex-M4": (6 * 1024, 24 * 1024, 28 * 1024, 48 * 1024)}
# .data + .bss: the RPC server's object table (EMBER_CRT_RPC_MAX_OBJECTS) and reply buffer
STATIC_BUDGET = {"micro RPC server": 8 * 1024}


def check(target: str, tmp_path, record_property) -> None:
    objects = footprint.compile_crt(target, tmp_path)
    assert len(footprint.SCENARIOS) == len(BUDGETS[target])
    for (what, roots), budget in zip(footprint.SCENARIOS.items(), BUDGETS[target]):
        taken = footprint.pulled_in(target, objects, roots)
        text, data, bss = footprint.sizes(target, taken)
        record_property(f"{target} {what}", f"{text} {data} {bss}")
        assert text < budget, (what, text)
        static = next((b for k, b in STATIC_BUDGET.items() if what.startswith(k)), 1024)
        assert data + bss < static, (what, data, bss)
        names = {o.stem.split("_", 1)[1] for o in taken}
        if "C interface" in what:
            assert not names & {"json", "graph_parse", "aot_executor", "func_registry"}, names
        elif what.startswith("micro RPC server"):
            assert {"rpc_server", "rpc_wire", "graph_executor", "aot_executor"} <= names
        elif "graph" in what:
            assert {"graph_executor", "graph_parse", "json", "params"} <= names


def test_footprint_x86_64(tmp_path, record_property):
    compiler()
    if shutil.which("nm") is None or shutil.which("size") is None:
        pytest.skip("nm/size not found (binutils)")
    check("x86-64", tmp_path, record_property)


@pytest.mark.slow
def test_footprint_cortex_m4(tmp_path, record_property):
    if shutil.which("arm-none-eabi-gcc") is None:
        pytest.skip("arm-none-eabi-gcc not found (apt-get install gcc-arm-none-eabi)")
    check("Cortex-M4", tmp_path, record_property)
