"""VM artifacts: save/load_exec, the one-file export, a fresh process without the compiler,
the VM executor factory of ``relay.build``, and ``create_executor("vm")``."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from _vm_check import requires_cc, vm_run

import ember
from ember import relay
from ember.relay.backend import Executor
from ember.runtime.vm import Executable, VirtualMachine

pytestmark = requires_cc


def _loop_mod() -> ember.IRModule:
    """main(x: float32[?, 4], n: int32) adds x to itself n times in a recursive global."""
    mod = ember.IRModule()
    f = relay.GlobalVar("f")
    acc, k = relay.var("acc", shape=(relay.Any(), 4)), relay.var("k", shape=(), dtype="int32")
    mod[f] = relay.Function([acc, k], relay.If(
        relay.equal(k, relay.const(0, "int32")), acc,
        f(relay.add(acc, acc), relay.subtract(k, relay.const(1, "int32")))))
    x, n = relay.var("x", shape=(relay.Any(), 4)), relay.var("n", shape=(), dtype="int32")
    mod["main"] = relay.Function([x, n], relay.nn.relu(f(x, n)))
    return mod


def test_save_and_load_exec_with_paths(tmp_path) -> None:
    exe = relay.vm.compile(_loop_mod(), target="llvm")
    code, lib = exe.save()
    (tmp_path / "code.ro").write_bytes(bytes(code))
    lib.export_library(str(tmp_path / "lib.so"))
    loaded = Executable.load_exec(str(tmp_path / "code.ro"), str(tmp_path / "lib.so"))
    assert loaded.globals == exe.globals and loaded.bytecode == exe.bytecode
    x = np.ones((3, 4), "float32")
    np.testing.assert_allclose(vm_run(loaded, x, np.int32(3)).numpy(), 8 * x)


def test_one_file_export_runs_in_a_fresh_process_without_the_compiler(tmp_path) -> None:
    exe = relay.vm.compile(_loop_mod(), target="llvm")
    path = str(tmp_path / "vm.so")
    exe.mod.export_library(path)
    script = textwrap.dedent(f"""
        import sys
        import numpy as np
        import ember.runtime as rt
        from ember.runtime.vm import Executable, VirtualMachine
        vm = VirtualMachine(Executable(rt.load_module({path!r})), rt.cpu(0))
        out = vm.invoke("main", np.full((2, 4), -1.0, "float32"), np.int32(0))
        assert (out.numpy() == 0).all(), out
        out = vm.invoke("main", np.ones((5, 4), "float32"), np.int32(2))
        assert out.shape == (5, 4) and (out.numpy() == 4).all(), out
        bad = [k for k in sys.modules if k.startswith(("ember.relay", "ember.ir", "ember.te",
                                                          "ember.tir"))]
        assert not bad, bad
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    subprocess.run([sys.executable, "-c", script], check=True, env=env, timeout=120)


def test_relay_build_with_the_vm_executor_gives_a_factory(tmp_path) -> None:
    x, w = relay.var("x", shape=(2, 3)), relay.var("w", shape=(4, 3))
    mod = ember.IRModule.from_expr(relay.Function(
        [x, w], relay.Tuple([relay.nn.dense(x, w), relay.nn.relu(x)])))
    wv = np.arange(12, dtype="float32").reshape(4, 3)
    factory = relay.build(mod, target="llvm", params={"w": wv}, executor=Executor("vm"))
    xv = np.linspace(-1, 1, 6, dtype="float32").reshape(2, 3)

    def check(m) -> None:
        m.set_input("x", xv)
        m.run()
        assert m.get_num_outputs() == 2 and m.get_num_inputs() == 1
        np.testing.assert_allclose(m.get_output(0).numpy(), xv @ wv.T, rtol=1e-5)
        np.testing.assert_allclose(m.get_output(1).numpy(), np.maximum(xv, 0))
        assert m.get_input_index("x") == 0

    check(factory["default"](ember.cpu(0)))
    assert "invoke_packed" in factory.get_executor_config()
    path = str(tmp_path / "factory.so")
    factory.export_library(path)
    loaded = ember.runtime.load_module(path)
    check(loaded["default"](ember.cpu(0)))
    with pytest.raises(ember.TVMError, match="no input named 'y'"):
        loaded["default"](ember.cpu(0)).set_input("y", xv)


def test_create_executor_vm_matches_the_interpreter() -> None:
    mod = _loop_mod()
    x = np.arange(8, dtype="float32").reshape(2, 4) - 3
    got = relay.create_executor("vm", mod=mod, target="llvm").evaluate()(x, np.int32(2))
    ref = relay.create_executor("debug", mod=mod).evaluate()(x, np.int32(2))
    np.testing.assert_allclose(got.numpy(), ref.numpy())


def test_steady_state_runs_allocate_nothing() -> None:
    exe = relay.vm.compile(_loop_mod(), target="llvm")
    vm = VirtualMachine(exe, ember.cpu())
    x = np.ones((3, 4), "float32")
    for _ in range(2):
        vm.invoke_stateful("main", x, np.int32(4))
    before = vm.allocator.fresh_allocations
    for _ in range(5):
        vm.invoke_stateful("main", x, np.int32(4))
    assert vm.allocator.fresh_allocations == before


def test_vm_compiler_staged_api() -> None:
    from ember.relay.backend.vm import VMCompiler

    compiler = VMCompiler()
    x = relay.var("x", shape=(2,))
    b = relay.var("b", shape=(2,))
    mod = ember.IRModule.from_expr(relay.Function([x, b], relay.add(x, b)))
    compiler.set_params({"b": np.ones(2, "float32")})
    opt, _ = compiler.optimize(mod, "llvm", params=compiler.get_params())
    assert [p.name_hint for p in opt["main"].params] == ["x"]
    with pytest.raises(ember.TVMError, match="call lower"):
        compiler.get_exec()
    compiler.lower(mod, "llvm")
    compiler.codegen()
    exe = compiler.get_exec()
    assert exe.primitive_ops == ["vm_mod_fused_add"]
    np.testing.assert_allclose(vm_run(exe, np.zeros(2, "float32")).numpy(), [1, 1])
