"""Kernel objects (ember.tir.kernel_objects) and split translation units (codegen.split_c):
a hosted build compiles a model's functions as several units that link ember's kernels from
cached objects; the one self-contained unit (join_c) stays for C exports."""
from __future__ import annotations

import re

import numpy as np
import pytest

import ember
from ember import te, tir, topi
from ember.contrib import cc
from ember.runtime.module import CSourceModule
from ember.tir import kernel_objects
from ember.tir.codegen import LINKED_DEFINE, function_c, join_c, split_c, unit_count

needs_cc = pytest.mark.skipif(cc.get_cc() is None, reason="no C compiler found")
SOFTMAX_H = "ember/kernels/softmax.h"


def test_entry_points_are_read_from_the_headers():
    conv = kernel_objects.entry_points("ember/kernels/conv_nchwc.h")
    assert {"ember_conv2d_nchwc_x8", "ember_depthwise_nchwc_x16"} <= conv
    assert kernel_objects.entry_points("ember/kernels/gemm.h") == {"ember_sgemm"}
    assert kernel_objects.entry_points(SOFTMAX_H) == {"ember_softmax"}
    # helpers meant to inline into fused loops, and headers that do not exist: no entries
    assert kernel_objects.entry_points("ember/kernels/fast_math.h") == frozenset()
    assert kernel_objects.entry_points("no/such/header.h") == frozenset()


def test_object_source_defines_one_entry_point_and_lane_count():
    src = kernel_objects.object_source("ember/kernels/conv_nchwc.h", "ember_conv2d_nchwc_x8")
    assert "#define EMBER_KERNEL_LANES 8" in src
    assert "#define EMBER_KOBJ_ember_conv2d_nchwc 1" in src
    assert src.rstrip().endswith('#include "ember/kernels/conv_nchwc.h"')
    gemm = kernel_objects.object_source("ember/kernels/gemm.h", "ember_sgemm")
    assert "EMBER_KERNEL_LANES" not in gemm and "EMBER_KOBJ_ember_sgemm" in gemm


@pytest.mark.parametrize("header, name", [("ember/kernels/fast_math.h", "ember_pow2i"),
                                          ("ember/kernels/gemm.h", "ember_softmax"),
                                          ("../../etc/passwd", "x")])
def test_object_source_refuses_what_a_header_does_not_declare(header, name):
    with pytest.raises(ValueError, match=re.escape(f"declares no entry point {name!r}")):
        kernel_objects.object_source(header, name)


CONV_H = "ember/kernels/conv_nchwc.h"


def test_the_conv_object_comes_in_parts_listed_first():
    assert kernel_objects.part_count(CONV_H, "ember_conv2d_nchwc_x8") == 3
    assert kernel_objects.part_count(CONV_H, "ember_depthwise_nchwc_x8") == 1
    assert kernel_objects.part_count("ember/kernels/gemm.h", "ember_sgemm") == 1
    part2 = kernel_objects.object_source(CONV_H, "ember_conv2d_nchwc_x4", 2)
    assert "#define EMBER_KERNEL_PART 2" in part2 and "#define EMBER_KERNEL_LANES 4" in part2
    assert "EMBER_KERNEL_PART" not in kernel_objects.object_source(CONV_H,
                                                                   "ember_depthwise_nchwc_x8")
    names = [n for n, _ in kernel_objects.object_sources([
        (SOFTMAX_H, "ember_softmax"), (CONV_H, "ember_depthwise_nchwc_x8"),
        (CONV_H, "ember_conv2d_nchwc_x8"), (SOFTMAX_H, "ember_softmax")])]
    assert names == ["kernel_ember_conv2d_nchwc_x8.c", "kernel_ember_conv2d_nchwc_x8_part1.c",
                     "kernel_ember_conv2d_nchwc_x8_part2.c", "kernel_ember_depthwise_nchwc_x8.c",
                     "kernel_ember_softmax.c"]


@pytest.mark.parametrize("name, part", [("ember_conv2d_nchwc_x8", 3), ("ember_conv2d_nchwc_x8", -1),
                                        ("ember_conv2d_nchwc_x8", "1"),
                                        ("ember_conv2d_nchwc_x8", True),
                                        ("ember_depthwise_nchwc_x8", 1)])
def test_object_source_refuses_a_part_the_object_does_not_have(name, part):
    with pytest.raises(ValueError, match=re.escape(f"not {part!r}")):
        kernel_objects.object_source(CONV_H, name, part)


def _softmax(rows: int, name: str) -> tir.PrimFunc:
    x = te.placeholder((rows, 8), name="x")
    y = te.extern((rows, 8), [x], lambda ins, outs: tir.call_extern(
        "int32", "ember_softmax", ins[0].data, outs[0].data, rows, 8, 1, 0, 0,
        header=SOFTMAX_H), name="y")
    return te.lower(te.create_schedule(y.op), [x, y], name)


def _add(n: int, name: str) -> tir.PrimFunc:
    a = te.placeholder((n,), name="a")
    b = topi.add(a, 1.0)
    return te.lower(topi.schedule_injective(b), [a, b], name)


def _parts():
    return [function_c(f) for f in (_add(64, "f_add0"), _softmax(3, "f_softmax"),
                                    _add(32, "f_add1"), _softmax(5, "f_softmax5"))]


def test_split_units_define_every_function_once_and_link_the_checks():
    parts = _parts()
    units = split_c(parts, units=3)
    names = [n for n, _ in units]
    assert names[0] == "kernel_ember_softmax.c"  # one object for both calls, first
    assert names[1:] == ["kernel_ember_arg_checks.c", "lib_0.c", "lib_1.c", "lib_2.c"]
    code = [text for n, text in units if n.startswith("lib_")]
    for part in parts:  # each packed entry defined in exactly one unit
        defs = [c for c in code if re.search(rf"TVM_DLL int32_t {part.name}\(", c)]
        assert len(defs) == 1, part.name
    for text in code:
        assert text.startswith(LINKED_DEFINE)
        # the checks are declared, their bodies in the shared object (one per library)
        assert "static int ember_fail(" not in text
        assert "EMBER_CHECKS_API int ember_check_tensor(" in text
    checks = dict(units)["kernel_ember_arg_checks.c"]
    assert "EMBER_CHECKS_API int ember_check_tensor(" in checks and "static int" not in checks
    whole = join_c(parts)
    assert LINKED_DEFINE not in whole  # the standalone unit has the kernel bodies
    assert "static int ember_check_tensor(" in whole  # and the checks, static


def test_split_refuses_bad_unit_counts_and_duplicate_names():
    parts = _parts()
    with pytest.raises(ValueError, match="units must be at least 1, got 0"):
        split_c(parts, units=0)
    with pytest.raises(ValueError, match="two functions are named 'f_add0'"):
        split_c(parts + [parts[0]], units=2)


def test_unit_count_follows_size_and_cpus():
    parts = _parts()
    assert unit_count(parts, cpus=8) == 1  # small: one unit
    big = [parts[0].renamed("f_add0", f"f{i}") for i in range(200)]
    assert unit_count(big, cpus=1) == 1
    assert 1 < unit_count(big, cpus=64) <= len(big)


@needs_cc
def test_split_module_links_and_matches_the_standalone_one():
    parts = _parts()
    names = [p.name for p in parts]
    split = CSourceModule(join_c(parts), "c", names, units=split_c(parts, units=3))
    whole = CSourceModule(join_c(parts), "c", names)
    rng = np.random.default_rng(0)
    for mod in (split, whole):
        for rows, fname in ((3, "f_softmax"), (5, "f_softmax5")):
            xv = rng.standard_normal((rows, 8)).astype("float32")
            out = ember.nd.empty((rows, 8), "float32")
            mod[fname](ember.nd.array(xv), out)
            e = np.exp(xv - xv.max(axis=1, keepdims=True))
            np.testing.assert_allclose(out.numpy(), e / e.sum(axis=1, keepdims=True),
                                       rtol=1e-5, atol=1e-6)
        av = np.arange(64, dtype="float32")
        out = ember.nd.empty((64,), "float32")
        mod["f_add0"](ember.nd.array(av), out)
        np.testing.assert_array_equal(out.numpy(), av + 1)


def test_a_small_change_changes_one_unit():
    parts = [function_c(_add(64 + i, f"f_add{i}")) for i in range(6)]
    changed = list(parts)
    changed[4] = function_c(_add(69, "f_add4"))  # another extent (68 before): same C size
    assert len(changed[4].unpacked) == len(parts[4].unpacked)
    before, after = split_c(parts, units=3), split_c(changed, units=3)
    assert [n for n, _ in before] == [n for n, _ in after]
    assert sum(a != b for a, b in zip(before, after)) == 1


KERNEL_HEADERS = ("conv_nchwc.h", "conv_nchw_input.h", "pool_nchwc.h", "pool_nchw.h", "gemm.h",
                  "softmax.h", "norm.h", "fft.h", "nms.h", "minmax.h", "qadd.h",
                  "qconv.h", "qdense.h", "channel_shuffle.h", "conv_nchw_small.h",
                  "attention.h", "conv_winograd.h")
STRICT = ["-std=c99", "-Wall", "-Wextra", "-Werror", "-fsyntax-only"]


def _cc_check(tmp_path, name: str, text: str, flags: list[str]) -> None:
    import subprocess
    from pathlib import Path

    src = tmp_path / name
    src.write_text(text)
    include = Path(ember.__file__).parent / "include"
    proc = subprocess.run([*cc.compiler_argv(), *STRICT, *flags, "-I", str(include), str(src)],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, f"{name} {flags}:\n{proc.stderr}"


@needs_cc
@pytest.mark.parametrize("flags, lanes", [
    (["-DEMBER_KERNELS_PORTABLE"], ("", "4", "8", "16")),
    (["-march=native"], ("", "8")),
    pytest.param(["-march=native"], ("4", "16"), marks=pytest.mark.slow)])  # ~30 s
def test_every_kernel_object_and_a_linked_unit_compile_warning_free(tmp_path, flags, lanes):
    linked = [LINKED_DEFINE]
    for header in KERNEL_HEADERS:
        path = f"ember/kernels/{header}"
        linked.append(f'#include "{path}"')
        for name in sorted(kernel_objects.entry_points(path)):
            lane = re.search(r"_x(\d+)$", name)
            if (lane.group(1) if lane else "") in lanes:
                for part in range(kernel_objects.part_count(path, name)):
                    _cc_check(tmp_path, f"{name}_{part}.c",
                              kernel_objects.object_source(path, name, part), flags)
    # A model's unit: declarations only, callable.
    linked.append("void* ember_test_entries[] = {(void*)&ember_conv2d_nchwc_x8, "
                  "(void*)&ember_sgemm, (void*)&ember_layer_norm};")
    _cc_check(tmp_path, "linked.c", "\n".join(linked) + "\n", flags)


@needs_cc
def test_hosted_and_firmware_checks_link_into_one_library():
    """Split units of both variants in one library: each wrapper reports through its own
    checks (the firmware ones renamed, so the two objects do not clash)."""
    hosted = _parts()
    firmware = [p.renamed(p.name, p.name + "_fw") for p in _parts()]
    units = dict(split_c(hosted, units=2))  # a kernel object once, as a build writes it
    units.update((n.replace("lib_", "fw_lib_"), t)
                 for n, t in split_c(firmware, units=2, stdio=False))
    assert "kernel_ember_arg_checks_fw.c" in units
    names = [p.name for p in hosted + firmware]
    mod = CSourceModule(join_c(hosted), "c", names, units=list(units.items()))
    av = np.arange(64, dtype="float32")
    for fname in ("f_add0", "f_add0_fw"):
        out = ember.nd.empty((64,), "float32")
        mod[fname](ember.nd.array(av), out)
        np.testing.assert_array_equal(out.numpy(), av + 1)
    bad = ember.nd.array(av.reshape(8, 8))
    with pytest.raises(ember.TVMError, match=r"f_add0: argument 0 \(a\): expected ndim 1, got 2"):
        mod["f_add0"](bad, ember.nd.empty((64,), "float32"))
    with pytest.raises(ember.TVMError, match=r"f_add0_fw: argument 0 \(a\): ndim mismatch"):
        mod["f_add0_fw"](bad, ember.nd.empty((64,), "float32"))
