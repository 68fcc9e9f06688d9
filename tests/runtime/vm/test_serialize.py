"""The executable's byte format: round trips (in process, in a fresh process, one exported
file), the verifier's messages, and corrupt input (every truncation, random byte flips)."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ember
from ember.runtime import load_module
from ember.runtime.errors import ArtifactError
from ember.runtime.vm import (
    Executable,
    ExecutableModule,
    TensorInfo,
    VerificationError,
    VirtualMachine,
    VMFunction,
)
from ember.runtime.vm import instructions as I
from ember.runtime.vm.serialize import MAGIC, deserialize, reseal

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _vm_testlib import ADD, SUM, make_exe, requires_cc  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
CPU = ember.cpu(0)
CONSTS = (np.arange(6, dtype="float32").reshape(2, 3), np.array(7, dtype="int64"))


def small_exe(lib: object = None) -> Executable:
    """Two functions, typed params, constants, every operand kind; no kernels needed."""
    text = """
main(x, y):
    # param types = float32[2, ?], -
    load_const $2 Const[0]
    load_consti $3 -5
    alloc_data $4 tag(1) [$0, $2, $3]
    invoke $5 VMFunc[1]($4)
    if $3 $3 1 @end
    fatal
end:
    ret $5
second(t):
    get_field $1 $0[2]
    ret $1
"""
    return Executable.from_functions(text, CONSTS, primitive_ops=["k0", "k1"])


def same_program(a: Executable, b: Executable) -> None:
    assert a.functions == b.functions
    assert a.primitive_ops == b.primitive_ops and a.globals == b.globals
    for x, y in zip(a.constant_pool, b.constant_pool):
        assert x.dtype == y.dtype and x.shape == y.shape
        np.testing.assert_array_equal(x.numpy(), y.numpy())


def test_round_trip_in_process() -> None:
    exe = small_exe()
    code, lib = exe.save()
    assert isinstance(code, bytearray) and code.startswith(MAGIC) and lib is None
    back = Executable.load_exec(code, lib)
    same_program(exe, back)
    assert back.functions[0].param_types == (TensorInfo("float32", (2, -1)), None)
    assert back.bytecode == exe.bytecode and back.save()[0] == code  # deterministic


def test_listing_names_the_instructions() -> None:
    listing = small_exe().bytecode
    assert "VM Function[0]: main(x, y)" in listing and "VM Function[1]: second(t)" in listing
    assert "# reg file size = 6" in listing
    for text in ("load_const $2 Const[0]", "alloc_data $4 tag(1) [$0, $2, $3]",
                 "invoke $5 VMFunc[1]($4)", "if $3 $3 1 2", "get_field $1 $0[2]", "ret $5"):
        assert f"# {text}" in listing
    assert "11 0 2   # load_const" in listing  # opcode and fields, as numbers


@requires_cc
def test_save_load_and_run_with_an_exported_kernel_library(tmp_path: object) -> None:
    exe = make_exe(SUM)
    code, lib = exe.save()
    path = os.path.join(str(tmp_path), "kernels.so")
    lib.export_library(path)
    back = Executable.load_exec(code, load_module(path))
    assert VirtualMachine(back, CPU).run(np.int64(10)).numpy() == 55
    back = Executable.load_exec(code, path)  # a path works too
    assert VirtualMachine(back, CPU).run(np.int64(4)).numpy() == 10


@requires_cc
def test_fresh_process_without_the_compiler(tmp_path: object) -> None:
    exe = make_exe(ADD)
    code, lib = exe.save()
    lib.export_library(os.path.join(str(tmp_path), "lib.so"))
    with open(os.path.join(str(tmp_path), "code.ro"), "wb") as f:
        f.write(code)
    exe.mod.export_library(os.path.join(str(tmp_path), "vm.so"))  # the one-file form
    script = textwrap.dedent("""
        import sys
        import numpy as np
        import ember
        from ember.runtime.vm import Executable, VirtualMachine
        x = np.arange(4, dtype="float32")
        lib = ember.runtime.load_module("./lib.so")
        exe = Executable.load_exec(open("code.ro", "rb").read(), lib)
        a = VirtualMachine(exe, ember.cpu()).run(x, x).numpy()
        mod = ember.runtime.load_module("./vm.so")
        b = VirtualMachine(Executable(mod), ember.cpu()).run(x, x).numpy()
        assert (a == 2 * x).all() and (b == 2 * x).all(), (a, b)
        bad = [m for m in sys.modules if m.startswith(("ember.relay", "ember.ir", "ember.te",
                                                       "ember.tir", "ember.contrib.cc"))]
        assert not bad, bad
        print("ok")
    """)
    env = dict(os.environ, PYTHONPATH=REPO)
    proc = subprocess.run([sys.executable, "-c", script], cwd=str(tmp_path), env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr


@requires_cc
def test_one_file_export_in_process(tmp_path: object) -> None:
    path = os.path.join(str(tmp_path), "vm.so")
    make_exe(ADD).mod.export_library(path)
    mod = load_module(path)
    assert isinstance(mod, ExecutableModule) and mod.lib is not None
    x = np.ones(4, "float32")
    np.testing.assert_array_equal(VirtualMachine(mod, CPU).run(x, x).numpy(), 2 * x)
    assert mod["get_bytecode"]().startswith("VM Function[0]: main(x, y)")


def test_late_bound_constants(tmp_path: object) -> None:
    exe = small_exe()
    path = os.path.join(str(tmp_path), "consts.params")
    exe.move_late_bound_consts(path, byte_limit=16)
    assert exe.constant_pool[0] is None and exe.constant_pool[1] is not None
    assert "late-bound, not loaded" in exe.constants
    code, _ = exe.save()
    back = Executable.load_exec(code, None)
    assert back.constant_pool[0] is None
    back.load_late_bound_consts(path)
    np.testing.assert_array_equal(back.constant_pool[0].numpy(), CONSTS[0])
    again = Executable.load_exec(code, None)
    again.mod["load_late_bound_consts"](path)  # the packed-function form
    assert again.constant_pool[0] is not None


# ---- the verifier ---------------------------------------------------------------------------
def build(*instructions: I.Instruction, regs: int = 4, consts: int = 1, nprims: int = 1) -> None:
    funcs = [VMFunction("main", ("x",), instructions, regs),
             VMFunction("f", ("a", "b"), (I.Ret(0),), 2)]
    Executable.from_functions(funcs, [np.zeros(1)] * consts, [f"k{i}" for i in range(nprims)])


@pytest.mark.parametrize("instructions, message", [
    ((I.AllocTensor(0, 1, (2,), "float32", 9), I.Ret(0)),
     r"functions\['main'\].instructions\[0\] \(AllocTensor\): register \$9 out of range "
     r"\(frame has 4\)"),
    ((I.Move(0, 1), I.Ret(4)), r"instructions\[1\] \(Ret\): register \$4 out of range"),
    ((I.Invoke(5, (0, 0), 1), I.Ret(1)), r"\(Invoke\): func_index: function index 5 out of "
                                          r"range \(2 functions\)"),
    ((I.Invoke(1, (0,), 1), I.Ret(1)), r"passes 1 arguments to function 'f', which takes 2"),
    ((I.LoadConst(3, 1), I.Ret(1)), r"\(LoadConst\): const_index: constant index 3 out of range "
                                    r"\(1 constants\)"),
    ((I.Goto(5), I.Ret(0)), r"instructions\[0\] \(Goto\): pc_offset: jump target 5 \(offset "
                            r"\+5\) out of range \(function has 2 instructions\)"),
    ((I.If(0, 0, 1, -1), I.Ret(0)), r"\(If\): false_offset: jump target -1"),
    ((I.Goto(0),), r"jump offset 0 would loop forever"),
    ((I.Move(0, 1),), r"instructions\[0\] \(Move\): control falls off the end"),
    ((I.InvokePacked(2, 2, 1, (0, 1)), I.Ret(0)), r"kernel index 2 out of range"),
    ((I.InvokePacked(0, 3, 1, (0, 1)), I.Ret(0)), r"arity 3 but 2 argument registers"),
    ((I.AllocStorage(0, 48, "float32", 0, 1), I.Ret(0)), r"alignment 48 is not a power of two"),
    ((I.AllocStorage(0, 64, "float32", 1, 1), I.Ret(0)), r"device index 1 out of range"),
    ((I.AllocTensor(0, 0, (2,), "float7", 1), I.Ret(0)), r"dtype: invalid dtype 'float7'"),
    ((I.AllocADT(0, 3, (0,), 1), I.Ret(1)), r"tag 0 with 3 fields but 1 registers"),
    ((I.AllocClosure(1, 3, (0, 0, 0), 1), I.Ret(1)), r"3 free variables \(3 registers\) for "
                                                    r"function 'f' of arity 2"),
])
def test_verifier_messages(instructions: tuple, message: str) -> None:
    with pytest.raises(VerificationError, match=r"^vm executable: .*" + message):
        build(*instructions)


def test_verifier_function_level_checks() -> None:
    with pytest.raises(VerificationError, match=r"functions\['main'\]: register file size 1 must "
                                                r"be between the parameter count 2"):
        Executable.from_functions([VMFunction("main", ("a", "b"), (I.Ret(0),), 1)])
    with pytest.raises(VerificationError, match="function name is empty or duplicated"):
        Executable.from_functions([VMFunction("f", (), (I.Fatal(),), 0)] * 2)
    with pytest.raises(VerificationError, match="no instructions"):
        Executable.from_functions([VMFunction("f", (), (), 0)])
    with pytest.raises(VerificationError, match=r"parameter 0 \(a\): invalid dtype"):
        Executable.from_functions([VMFunction("f", ("a",), (I.Ret(0),), 1,
                                              param_types=(TensorInfo("nope", (1,)),))])


@pytest.mark.parametrize("text, message", [
    ("main(x):\n    move $2 $1\n    ret $2", r"instructions\[0\] \(Move\): register \$1 is read "
                                            r"before it is written"),
    ("main(x):\n    if $0 $0 1 2\n    move $1 $0\n    ret $1",  # $1 unset on the false path
     r"instructions\[2\] \(Ret\): register \$1 is read before it is written \(on some path"),
    ("main(x):\n    move $1 $0\n    kill_register $1\n    ret $1", r"\(Ret\): register \$1"),
])
def test_verifier_rejects_reads_of_empty_registers(text: str, message: str) -> None:
    with pytest.raises(VerificationError, match=message):
        Executable.from_functions(text)


def test_verifier_accepts_writes_on_every_path() -> None:
    text = "main(x):\n    if $0 $0 1 3\n    move $1 $0\n    goto 2\n    move $1 $0\n    ret $1"
    assert Executable.from_functions(text).functions[0].register_file_size == 2


# ---- corrupt input --------------------------------------------------------------------------
CODE = bytes(small_exe().save()[0])


def test_every_truncation_is_an_artifact_error() -> None:
    for cut in range(len(CODE)):
        with pytest.raises(ArtifactError, match="truncated|not an ember VM executable"):
            deserialize(CODE[:cut])
    with pytest.raises(ArtifactError, match=r"checksum mismatch .* 1 bytes? are present|bytes "
                                            r"appended"):
        deserialize(CODE + b"\0")
    with pytest.raises(ArtifactError, match="unexpected trailing bytes"):
        deserialize(reseal(CODE + b"\0"))  # consistent length and checksum: the parser sees it


def test_foreign_and_older_or_newer_data() -> None:
    with pytest.raises(ArtifactError, match="not an ember VM executable"):
        deserialize(b"\x7fELF" + CODE[4:])
    newer = CODE[:8] + (99).to_bytes(4, "little") + CODE[12:]
    with pytest.raises(ArtifactError, match="format version 99 is not supported"):
        deserialize(newer)
    older = CODE[:8] + (1).to_bytes(4, "little") + CODE[12:]
    with pytest.raises(ArtifactError, match="version 1 is not supported .* checksum; save it "
                                            "again"):
        deserialize(older)
    with pytest.raises(TypeError, match="expected the bytes"):
        deserialize("text")  # type: ignore[arg-type]


def test_truncation_message_names_field_section_and_offset() -> None:
    tag = CODE.index(b"CODE")
    with pytest.raises(ArtifactError, match=r"checksum mismatch .*truncated\?"):
        deserialize(CODE[:tag + 30])
    with pytest.raises(ArtifactError, match=r"truncated data: the CODE section needs \d+ bytes "
                                            r"but only 18 remain \(section header, byte offset"):
        deserialize(reseal(CODE[:tag + 30]))
    # A consistent section length around a cut payload: the field inside is named.
    short = reseal(CODE[:tag + 4] + (60).to_bytes(8, "little") + CODE[tag + 12:tag + 72])
    with pytest.raises(ArtifactError, match=r"truncated data: the shape of parameter 0 of "
                                            r"function 'main' needs 16 bytes but only 15 remain "
                                            r"\(section CODE, byte offset \d+\)"):
        deserialize(short)


def _flip_error(pos: int) -> str:
    """What a changed byte at ``pos`` must be reported as."""
    if pos < 8:
        return "not an ember VM executable"
    if pos < 12:
        return "format version .* is not supported"
    return "corrupt VM executable: checksum mismatch"


def test_every_flipped_byte_is_caught_at_load() -> None:
    for pos in range(len(CODE)):
        blob = bytearray(CODE)
        blob[pos] ^= 0xFF
        with pytest.raises(ArtifactError, match=_flip_error(pos)):
            deserialize(blob)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_random_byte_changes_are_caught_at_load(data: st.DataObject) -> None:
    blob = bytearray(CODE)
    positions = data.draw(st.lists(st.integers(0, len(blob) - 1), min_size=1, max_size=4,
                                   unique=True))
    for pos in positions:
        blob[pos] ^= data.draw(st.integers(1, 255))
    with pytest.raises(ArtifactError, match=_flip_error(min(positions))):
        deserialize(blob)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_resealed_random_changes_never_crash(data: st.DataObject) -> None:
    """Past the checksum (a writer's bug, or a forger): the parser and verifier still hold."""
    blob = bytearray(CODE)
    for _ in range(data.draw(st.integers(1, 4))):
        pos = data.draw(st.integers(40, len(blob) - 1))
        blob[pos] ^= data.draw(st.integers(1, 255))
    try:
        exe = Executable(ExecutableModule(deserialize(reseal(blob))))
    except ArtifactError:
        return
    assert exe.bytecode  # loaded and verified: printable, and safe to hand to a VM


@settings(max_examples=200, deadline=None)
@given(st.integers(0, len(CODE) - 1))
def test_random_truncation(cut: int) -> None:
    with pytest.raises(ArtifactError, match="truncated|not an ember VM executable"):
        deserialize(CODE[:cut])
