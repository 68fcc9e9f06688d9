"""Code size of ember's runtimes without Python, at -Os: the native hosted runtime
(libember_runtime) and the parts of the C runtime that a firmware AOT or graph-executor model,
or the micro RPC server of a host-driven session, pulls in. Prints a markdown table (the one kept in docs/native_runtime.md).

    python tools/native_footprint.py                     # x86-64 with the host compiler
    python tools/native_footprint.py --arm               # also Cortex-M4 (arm-none-eabi-gcc)

"Pulls in" is computed as a linker would from an archive: starting from the symbols the
application and the generated model reference, add every object of ember/crt that defines a
symbol still undefined, until nothing changes (nm). The platform hooks (TVMPlatformAbort) and
libc's memset/memcpy are the application's and are not counted.
"""
from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EMBER = REPO / "ember"
CRT = EMBER / "crt"
INCLUDES = [f"-I{CRT / 'include'}", f"-I{EMBER / 'include'}"]
# What a model plus its application reference, per deployment.
_EXEC = ["ember_crt_init", "ember_crt_register_func_registry", "TVMGetLastError"]
SCENARIOS = {
    "AOT model, C interface (tvmgen_<mod>_run)": [
        "ember_crt_init", "TVMGetLastError", "TVMBackendAllocWorkspace",
        "TVMBackendFreeWorkspace", "TVMPackedFuncSetLastError"],
    "AOT model, C runtime AOT executor": _EXEC + [
        f"ember_aot_executor_{f}" for f in ("create", "set_input", "load_params", "run",
                                             "output", "release")],
    "graph-executor model, C runtime graph executor": _EXEC + [
        f"ember_graph_executor_{f}" for f in ("create", "set_input", "load_params", "run",
                                               "output", "release")],
    "micro RPC server (graph and AOT executors, arrays; the frame buffer is the app's)":
        _EXEC + ["ember_rpc_server_run"],
}
TARGETS = {"x86-64": ("cc", [], "size", "nm"),
           "Cortex-M4": ("arm-none-eabi-gcc", ["-mcpu=cortex-m4", "-mthumb"], "arm-none-eabi-size",
                         "arm-none-eabi-nm")}


def _run(cmd: list[str]) -> str:
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def compile_crt(target: str, out: Path) -> list[Path]:
    """Every object of the C runtime (core and executors) at -Os for ``target``."""
    cc, flags, _, _ = TARGETS[target]
    sources = (sorted(CRT.glob("src/*/*.c")) + sorted(CRT.glob("executor/*.c"))
               + sorted(CRT.glob("rpc/*.c")))
    objects = []
    for src in sources:
        obj = out / f"{src.parent.name}_{src.stem}.o"
        _run([cc, "-std=c99", "-Os", *flags, *INCLUDES, "-c", str(src), "-o", str(obj)])
        objects.append(obj)
    return objects


def _symbols(nm: str, obj: Path) -> tuple[set[str], set[str]]:
    defined, undefined = set(), set()
    for line in _run([nm, str(obj)]).splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == "U":
            undefined.add(parts[1])
        elif len(parts) == 3 and parts[1] in "TDBRCVWtdbr" and parts[1].isupper():
            defined.add(parts[2])
    return defined, undefined


def pulled_in(target: str, objects: list[Path], roots: list[str]) -> list[Path]:
    """The objects an archive link starting from ``roots`` would take."""
    nm = TARGETS[target][3]
    table = {obj: _symbols(nm, obj) for obj in objects}
    want, taken = set(roots), []
    changed = True
    while changed:
        changed = False
        for obj, (defined, undefined) in table.items():
            if obj not in taken and defined & want:
                taken.append(obj)
                want |= undefined
                changed = True
    return taken


def sizes(target: str, files: list[Path]) -> tuple[int, int, int]:
    """(.text, .data, .bss) summed over ``files`` (size's Berkeley format)."""
    rows = _run([TARGETS[target][2], *map(str, files)]).splitlines()[1:]
    total = [0, 0, 0]
    for row in rows:
        for k in range(3):
            total[k] += int(row.split()[k])
    return total[0], total[1], total[2]


def native_runtime(out: Path) -> tuple[int, int, int]:
    """libember_runtime.so at -Os (hosted x86-64), built with its Makefile."""
    subprocess.run(["make", "-s", "-C", str(EMBER / "runtime" / "native"), f"BUILD={out}",
                    "OPT=-Os", str(out / "libember_runtime.so")], check=True,
                   capture_output=True)
    return sizes("x86-64", [out / "libember_runtime.so"])


def report(targets: list[str]) -> list[tuple[str, str, int, int, int, str]]:
    """Rows (target, what, text, data, bss, objects)."""
    rows = []
    with tempfile.TemporaryDirectory(prefix="ember_footprint_") as tmp:
        if shutil.which("make"):
            rows.append(("x86-64", "native hosted runtime (libember_runtime.so)",
                         *native_runtime(Path(tmp) / "native"), "all"))
        for target in targets:
            out = Path(tmp) / target
            out.mkdir()
            objects = compile_crt(target, out)
            for what, roots in SCENARIOS.items():
                taken = pulled_in(target, objects, roots)
                names = ", ".join(sorted(o.stem.split("_", 1)[1] for o in taken))
                rows.append((target, what, *sizes(target, taken), names))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arm", action="store_true", help="also Cortex-M4 (arm-none-eabi-gcc)")
    args = parser.parse_args()
    targets = ["x86-64"] + (["Cortex-M4"] if args.arm else [])
    if args.arm and shutil.which("arm-none-eabi-gcc") is None:
        sys.exit("arm-none-eabi-gcc not found (apt-get install gcc-arm-none-eabi)")
    print("| target | what | .text | .data | .bss | objects |")
    print("|---|---|---:|---:|---:|---|")
    for target, what, text, data, bss, names in report(targets):
        print(f"| {target} | {what} | {text} | {data} | {bss} | {names} |")


if __name__ == "__main__":
    main()
