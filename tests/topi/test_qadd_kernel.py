"""The quantized add kernel (ember/kernels/qadd.h) through a ctypes harness at every SIMD level
this machine runs, bit for bit against its numpy reference (topi.nn.qadd.reference): all 65536
byte pairs, ties at +-0.5 and 1.5, a NaN, infinite and huge ratio, signed operands, a tail and
an unaligned start (and the generic vectors' path, forced on x86; and run on aarch64 under
qemu where installed). Its vector loop is checked in the generated code: 16 float lanes (zmm)
wherever AVX-512F is (not only with VNNI), NEON vectors on aarch64."""
from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from topi_util import HARNESS_LEVELS, HARNESS_STRICT, c_compiler, harness_library

import ember
from ember.topi.nn.qadd import reference

HERE = Path(__file__).parent
INCLUDE = Path(ember.__file__).parent / "include"
# and two more: native (the VNNI paths where the host has them) and the generic vectors that
# non-x86 targets (aarch64) take, forced here
EXTRA_LEVELS = {"native": ["-march=native"], "generic": ["-DEMBER_QF_GENERIC"]}
LEVELS = [*HARNESS_LEVELS, *EXTRA_LEVELS]
LANES = {"avx512": 16, "avx2": 8, "sse2": 4, "portable": 1, "generic": 4}

# ra, rb, a_zp, b_zp, y_zp, (y_lo, y_hi), a_signed, b_signed
PARAMS = [
    (0.5, 0.25, 0, 0, 3, (0, 255), 0, 0),  # quarters: ties at +0.5, 1.5, ...
    (0.5, 0.5, 128, 128, 128, (0, 255), 0, 0),  # negative ties (-0.5, -1.5)
    (0.05 / 0.08, 0.03 / 0.08, 120, 7, 100, (0, 255), 0, 0),
    (0.02 / 0.07, 0.11 / 0.07, -3, 5, 9, (-128, 127), 1, 1),
    (0.5, 0.5, 0, 0, -20, (-128, 127), 1, 0),  # mixed signedness, ties
    (1.5, 0.75, 17, 200, 5, (5, 255), 0, 0),  # a folded relu: y_lo = y_zp
    (float("nan"), 0.5, 0, 0, 77, (0, 255), 0, 0),
    (float("inf"), 0.5, 3, 0, 77, (0, 255), 0, 0),  # 0 * inf: NaN lanes too
    (1e30, -1e30, 0, 9, 128, (0, 255), 0, 0),  # saturation both ways
]


@pytest.fixture(scope="module", params=LEVELS)
def harness(request: pytest.FixtureRequest,
            tmp_path_factory: pytest.TempPathFactory) -> tuple[ctypes.CDLL, str]:
    source, out_dir = HERE / "data" / "qadd_harness.c", tmp_path_factory.mktemp(request.param)
    if request.param in EXTRA_LEVELS:
        out = out_dir / f"qadd_harness_{request.param}.so"
        subprocess.run([c_compiler(), *HARNESS_STRICT, *EXTRA_LEVELS[request.param], "-fPIC",
                        "-shared", "-I", str(INCLUDE), str(source), "-o", str(out)], check=True)
        lib = ctypes.CDLL(str(out))
    else:
        lib = harness_library(source, request.param, out_dir)
    lib.harness_qadd.argtypes = [ctypes.c_void_p] * 5
    lib.harness_qadd_time.argtypes = [ctypes.c_void_p] * 5 + [ctypes.c_int]
    lib.harness_qadd_time.restype = ctypes.c_double
    return lib, request.param


def run(lib: ctypes.CDLL, a: np.ndarray, b: np.ndarray, p: tuple, y_dtype: str,
        parallel: int = 0) -> np.ndarray:
    ra, rb, a_zp, b_zp, y_zp, (y_lo, y_hi), a_signed, b_signed = p
    y = np.zeros(a.size, y_dtype)
    r = np.array([ra, rb], np.float32)
    s = np.array([a.size, a_zp, b_zp, y_zp, y_lo, y_hi, a_signed, b_signed, parallel], np.int64)
    assert lib.harness_qadd(a.ctypes.data, b.ctypes.data, y.ctypes.data, r.ctypes.data,
                            s.ctypes.data) == 0
    return y


def want(a: np.ndarray, b: np.ndarray, p: tuple, y_dtype: str) -> np.ndarray:
    ra, rb, a_zp, b_zp, y_zp, y_range, _, _ = p
    with np.errstate(invalid="ignore", over="ignore"):  # NaN -> int: INT_MIN, low byte y_zp
        return reference(a, b, ra=float(np.float32(ra)), rb=float(np.float32(rb)), a_zp=a_zp,
                         b_zp=b_zp, y_zp=y_zp, y_range=y_range, out_dtype=y_dtype)


def all_pairs(p: tuple) -> tuple[np.ndarray, np.ndarray, str, np.ndarray]:
    """a, b over all 65536 byte pairs (a = i >> 8, b = i & 255) in p's operand types, y's
    type, and the reference's y."""
    pairs = np.arange(65536)
    a = (pairs >> 8).astype(np.uint8).view("int8" if p[6] else "uint8")
    b = (pairs & 255).astype(np.uint8).view("int8" if p[7] else "uint8")
    y_dtype = "int8" if p[5][0] < 0 else "uint8"
    return a, b, y_dtype, want(a, b, p, y_dtype)


@pytest.mark.parametrize("p", PARAMS, ids=range(len(PARAMS)))
def test_all_byte_pairs_bit_identical(harness: tuple[ctypes.CDLL, str], p: tuple) -> None:
    lib, level = harness
    a, b, y_dtype, expect = all_pairs(p)
    got = run(lib, a, b, p, y_dtype, parallel=1)  # 16 chunks over the harness's 3 tasks
    bad = np.flatnonzero(got != expect)
    assert bad.size == 0, (f"{level}: a={a[bad[0]]} b={b[bad[0]]} -> {got[bad[0]]}, "
                           f"want {expect[bad[0]]} ({bad.size} differ)")
    # an unaligned start and a length that is no multiple of any vector (a tail)
    got = run(lib, a[1:1000], b[1:1000], p, y_dtype)
    np.testing.assert_array_equal(got, expect[1:1000], err_msg=level)


@pytest.mark.parametrize("n", [1, 3, 15, 17, 33])
def test_short_lengths(harness: tuple[ctypes.CDLL, str], n: int) -> None:
    lib, _ = harness
    rng = np.random.default_rng(n)
    a, b = rng.integers(0, 256, (2, n)).astype(np.uint8)
    p = PARAMS[2]
    np.testing.assert_array_equal(run(lib, a, b, p, "uint8"), want(a, b, p, "uint8"))


def test_float_epilogue_lanes(harness: tuple[ctypes.CDLL, str]) -> None:
    """AVX-512F without VNNI (x86-64-v4) takes 16 float lanes, as with VNNI: the lanes follow
    the float ISA, not the int8 dot-product one (8 there halved the kernel's speed)."""
    lib, level = harness
    if level != "native":
        assert lib.harness_qadd_lanes() == LANES[level]


def _assembly(cmd: list[str], tmp_path: Path) -> list[str]:
    src = tmp_path / "qadd.c"
    src.write_text('#include "ember/kernels/qadd.h"\n')
    out = subprocess.run([*cmd, "-O3", "-DEMBER_KERNEL_OBJECT", "-DEMBER_KOBJ_ember_qadd",
                          "-I", str(INCLUDE), "-S", "-o", "-", str(src)],
                         check=True, capture_output=True, text=True).stdout
    return [line.strip() for line in out.split("\n")
            if line.startswith("\t") and not line.startswith("\t.")]


def test_x86_64_v4_loop_is_zmm(tmp_path: Path) -> None:
    body = _assembly([c_compiler(), "-std=c99", "-march=x86-64-v4"], tmp_path)
    zmm = [i for i in body if "zmm" in i]
    assert any(i.startswith("vcvtps2dq") for i in zmm), body
    assert any(i.startswith("vpmovdb") for i in zmm), body


def _aarch64_clang(tmp_path: Path) -> list[str]:
    """clang for aarch64 without aarch64 system headers: freestanding, memcpy the builtin as
    a hosted build has it (skips where clang cannot target aarch64)."""
    if shutil.which("clang") is None:
        pytest.skip("no clang")
    inc = tmp_path / "inc"
    inc.mkdir(exist_ok=True)
    (inc / "string.h").write_text("#include <stddef.h>\n#define memcpy __builtin_memcpy\n"
                                  "#define memset __builtin_memset\n")
    cmd = ["clang", "--target=aarch64-linux-gnu", "-ffreestanding", "-isystem", str(inc),
           "-std=c99", "-Wall", "-Werror", "-O3", "-I", str(INCLUDE)]
    probe = subprocess.run([*cmd, "-x", "c", "-c", "-o", os.devnull, "-"], input="int x;\n",
                           capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"clang cannot target aarch64 here: {probe.stderr[:200]}")
    return cmd


def test_aarch64_loop_is_neon(tmp_path: Path) -> None:
    """The float epilogue in NEON registers (4 lanes of generic vectors)."""
    body = _assembly(_aarch64_clang(tmp_path), tmp_path)
    vector = [i for i in body if ".4s" in i]
    assert any(i.startswith(("fmul", "fcvt")) for i in vector), body
    assert any(i.startswith(("fcvtns", "fcvtzs", "frintn")) for i in vector), body


def test_aarch64_run_bit_identical(tmp_path: Path) -> None:
    """The NEON build run under qemu-aarch64 (where installed, with an aarch64 linker): every
    parameter set over all byte pairs, and unaligned, equal to the reference."""
    qemu = shutil.which("qemu-aarch64-static") or shutil.which("qemu-aarch64")
    linker = shutil.which("aarch64-linux-gnu-ld") or shutil.which("ld.lld")
    if qemu is None or linker is None:
        pytest.skip("no qemu-aarch64 or aarch64 linker")
    cmd = _aarch64_clang(tmp_path)
    obj, exe = tmp_path / "qadd.o", tmp_path / "qadd"
    subprocess.run([*cmd, "-c", "-o", str(obj), str(HERE / "data" / "qadd_aarch64.c")],
                   check=True)
    subprocess.run([linker, "-static", "-o", str(exe), str(obj)], check=True)
    records = b"".join(np.array(p[:2], np.float32).tobytes() +
                       np.array([*p[2:5], *p[5], *p[6:]], np.int32).tobytes() for p in PARAMS)
    raw = np.frombuffer(subprocess.run([qemu, str(exe)], input=records, check=True,
                                       capture_output=True).stdout, np.uint8)
    assert raw.size == len(PARAMS) * (65536 + 999)
    for k, p in enumerate(PARAMS):
        _, _, _, expect = all_pairs(p)
        expect = expect.view(np.uint8)
        got = raw[k * (65536 + 999):(k + 1) * (65536 + 999)]
        bad = np.flatnonzero(got[:65536] != expect)
        assert bad.size == 0, (f"params {k}: pair {bad[0]:#06x} -> {got[bad[0]]}, want "
                               f"{expect[bad[0]]} ({bad.size} differ)")
        np.testing.assert_array_equal(got[65536:], expect[1:1000], err_msg=f"params {k}")
