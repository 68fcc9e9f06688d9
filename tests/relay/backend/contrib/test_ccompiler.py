"""The ccompiler path end to end: annotate + merge + partition a model, then the graph
executor (and export_library -> load_module), AOT (packed interface, and the C interface on
the C runtime with no Python), the VM and Model Library Format, each against the reference
interpreter; and the ccompiler's refusals."""
from __future__ import annotations

import shutil
import tarfile

import numpy as np
import pytest

import ember as tvm
from ember import relay
from ember.relay.backend import Executor, Runtime
from ember.relay.backend.contrib import CcompilerError, ccompiler_kernel
from ember.relay.testing import byoc
from ember.relay.transform import (AnnotateTarget, InferType, MergeCompilerRegions,
                                   PartitionGraph, Sequential)
from ember.testing import find_c_compiler

needs_cc = pytest.mark.skipif(find_c_compiler() is None, reason="no C compiler found")
SHAPE = (2, 8)


def _model() -> tvm.IRModule:
    """Two ccompiler regions (one with a scalar and a tensor constant, one with two outputs)
    around ember's own exp and tanh."""
    x, y, w = (relay.var(n, shape=SHAPE) for n in ("x", "y", "w"))
    bias = relay.const(np.linspace(-1, 1, 16, dtype="float32").reshape(SHAPE))
    a = relay.multiply(relay.subtract(relay.add(x, y), w), relay.const(0.5))
    b = relay.exp(relay.add(a, bias))
    c = relay.multiply(b, x)
    d = relay.subtract(c, y)
    out = relay.Tuple([relay.tanh(c), d])
    return tvm.IRModule.from_expr(relay.Function([x, y, w], out))


BYOC = Sequential([AnnotateTarget(["ccompiler"]), MergeCompilerRegions(), PartitionGraph()])
RNG = np.random.default_rng(0)
INPUTS = {n: RNG.standard_normal(SHAPE).astype("float32") for n in ("x", "y", "w")}


@pytest.fixture(scope="module")
def partitioned() -> tvm.IRModule:
    return BYOC(_model())


@pytest.fixture(scope="module")
def expected() -> list[np.ndarray]:
    out = relay.create_executor("debug", mod=_model()).evaluate()(**INPUTS)
    return [f.numpy() for f in out]


def _check(outputs: list[np.ndarray], expected: list[np.ndarray]) -> None:
    assert len(outputs) == len(expected)
    for got, want in zip(outputs, expected):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def _run(factory, mod_name: str = "default") -> list[np.ndarray]:
    m = factory[mod_name](tvm.cpu(0))
    m.set_input(**INPUTS)
    m.run()
    return [m.get_output(i).numpy() for i in range(m.get_num_outputs())]


def test_partition_names_and_attributes(partitioned):
    names = sorted(gv.name_hint for gv in partitioned.functions)
    assert names == ["main", "tvmgen_default_ccompiler_main_0", "tvmgen_default_ccompiler_main_1"]
    f = partitioned["tvmgen_default_ccompiler_main_1"]
    assert (f.get_attr("Compiler"), int(f.get_attr("Primitive"))) == ("ccompiler", 1)
    assert isinstance(f.body, relay.Tuple)  # c and d both leave the second region


@needs_cc
def test_graph_executor_and_export(partitioned, expected, tmp_path):
    lib = relay.build(partitioned, "llvm")
    source = lib.get_lib().get_source()
    assert "ccompiler: tvmgen_default_ccompiler_main_0" in source
    assert "static const float const0[16]" in source  # the tensor constant stays inside
    _check(_run(lib), expected)
    path = tmp_path / "byoc.so"
    lib.export_library(str(path))
    _check(_run(tvm.runtime.load_module(str(path))), expected)


@needs_cc
def test_aot_packed_and_vm(partitioned, expected):
    lib = relay.build(partitioned, "llvm", executor=Executor("aot"))
    _check(_run(lib), expected)
    exe = relay.vm.compile(partitioned, "llvm")
    vm = tvm.runtime.vm.VirtualMachine(exe, tvm.cpu(0))
    _check([o.numpy() for o in vm.invoke("main", *INPUTS.values())], expected)


@needs_cc
def test_model_library_format_carries_the_kernels(partitioned, tmp_path):
    lib = relay.build(partitioned, "c", executor=Executor("aot", {"interface-api": "c",
                                                                  "unpacked-api": True}),
                      runtime=Runtime("crt"))
    path = tvm.micro.export_model_library_format(lib, tmp_path / "byoc.tar")
    with tarfile.open(path) as tar:
        sources = [tar.extractfile(m).read().decode() for m in tar.getmembers()
                   if m.name.startswith("./codegen/host/src/") or "/src/" in m.name
                   and m.name.endswith(".c")]
    assert any("tvmgen_default_ccompiler_main_1_unpacked(" in s for s in sources)


@pytest.mark.skipif(find_c_compiler() is None or shutil.which("make") is None,
                    reason="needs a C compiler and make")
def test_aot_c_interface_on_the_c_runtime(partitioned, expected):
    from ember.micro.testing import AOT_DEFAULT_RUNNER
    from ember.testing.aot import AOTTestModel, compile_and_run

    outputs = {f"output{i}": e for i, e in enumerate(expected)}
    result = compile_and_run(AOTTestModel(module=partitioned, inputs=INPUTS, outputs=outputs),
                             AOT_DEFAULT_RUNNER, interface_api="c", use_unpacked_api=True)
    _check(result.outputs["default"], expected)


@needs_cc
def test_ccompiler_annotator_program(expected):
    x = relay.var("x", shape=(4, 4))
    ws = [relay.var(f"w{i}", shape=(4, 4)) for i in range(4)]
    q = relay.multiply(relay.subtract(relay.add(x, ws[0]), ws[1]), ws[2])
    out = relay.concatenate((q, relay.add(x, ws[3])), axis=0)
    func = relay.Function([x, *ws], out)
    mod = tvm.IRModule.from_expr(byoc.CcompilerAnnotator().visit(func))
    mod = PartitionGraph()(mod)
    assert [gv.name_hint for gv in mod.functions if gv.name_hint != "main"] == [
        "tvmgen_default_ccompiler_main_0"]
    args = [RNG.standard_normal((4, 4)).astype("float32") for _ in range(5)]
    want = relay.create_executor("debug", mod=tvm.IRModule.from_expr(func)).evaluate()(*args)
    exe = relay.vm.compile(mod, "llvm")
    got = tvm.runtime.vm.VirtualMachine(exe, tvm.cpu(0)).invoke("main", *args)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)


@needs_cc
def test_relay_ext_ccompiler_module(partitioned):
    func = partitioned["tvmgen_default_ccompiler_main_0"]
    mod = tvm.get_global_func("relay.ext.ccompiler")(func)
    assert mod.type_key == "c"
    x, y, w = (tvm.nd.array(INPUTS[n]) for n in ("x", "y", "w"))
    out = tvm.nd.empty(SHAPE, "float32")
    mod["tvmgen_default_ccompiler_main_0"](x, y, w, out)
    bias = np.linspace(-1, 1, 16, dtype="float32").reshape(SHAPE)
    want = (INPUTS["x"] + INPUTS["y"] - INPUTS["w"]) * 0.5 + bias  # the region ends at exp
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-6)
    bad = tvm.nd.empty((3, 8), "float32")
    with pytest.raises(tvm.TVMError, match=r"tvmgen_default_ccompiler_main_0: argument 3 "
                                           r"\(out0\)"):
        mod["tvmgen_default_ccompiler_main_0"](x, y, w, bad)


def _external(text: str) -> relay.Function:
    mod = InferType()(tvm.parser.fromtext('#[version = "0.0.5"]\n' + text))
    return mod["f"]


def test_ccompiler_refuses_what_it_cannot_emit():
    f = _external("""def @f(%a: Tensor[(4), float32], Compiler="ccompiler", Primitive=1,
                            global_symbol="f") { exp(%a) }""")
    with pytest.raises(CcompilerError, match=r"@f: cannot emit .*exp.*supports add, subtract"):
        ccompiler_kernel(f, "f")
    f = _external("""def @f(%a: Tensor[(4), int32], Compiler="ccompiler", Primitive=1,
                            global_symbol="f") { add(%a, %a) }""")
    with pytest.raises(CcompilerError, match="float32 tensors of static shape only"):
        ccompiler_kernel(f, "f")
    f = _external("""def @f(%a: Tensor[(4), float32], %b: Tensor[(2, 4), float32],
                            Compiler="ccompiler", Primitive=1, global_symbol="f") {
                       add(%a, %b) }""")
    with pytest.raises(CcompilerError, match="tensors of 4 and 8 elements"):
        ccompiler_kernel(f, "f")


@pytest.mark.parametrize("params", ["%a: Tensor[(1), float32], %b: Tensor[(2, 4), float32]",
                                    "%b: Tensor[(2, 4), float32], %a: Tensor[(1), float32]"])
def test_one_element_tensors_broadcast_like_scalars(params):
    # A Tensor[(1)] operand read as a[i] in an 8-step loop read past its one float; and the
    # other parameter order was refused. Both orders now read a[0].
    f = _external(f"""def @f({params}, Compiler="ccompiler", Primitive=1,
                            global_symbol="f") {{ add(%a, %b) }}""")
    code = ccompiler_kernel(f, "f").code.unpacked
    assert "i < 8;" in code and "a[0] + b[i]" in code and "a[i]" not in code


@needs_cc
def test_one_element_operand_runs_broadcast():
    a, b = relay.var("a", shape=(1,)), relay.var("b", shape=SHAPE)
    mod = BYOC(tvm.IRModule.from_expr(relay.Function([a, b], relay.add(a, b))))
    lib = relay.build(mod, "llvm")
    m = lib["default"](tvm.cpu(0))
    av = np.array([1.5], "float32")
    m.set_input(a=av, b=INPUTS["x"])
    m.run()
    np.testing.assert_allclose(m.get_output(0).numpy(), av + INPUTS["x"], rtol=1e-6)


def test_unpartitioned_annotations_are_refused_at_build():
    mod = AnnotateTarget(["ccompiler"])(_model())
    with pytest.raises(tvm.TVMError, match=r"annotation.compiler_(begin|end)\(compiler="
                                           r"'(ccompiler|default)'\) reached the build: "
                                           "partition the annotated module first"):
        relay.build(mod, "llvm")


def test_relay_ext_ccompiler_needs_a_global_symbol():
    f = _external("""def @f(%a: Tensor[(4), float32], Compiler="ccompiler", Primitive=1) {
                       add(%a, %a) }""")
    with pytest.raises(tvm.TVMError, match="no global_symbol attribute"):
        tvm.get_global_func("relay.ext.ccompiler")(f)


@needs_cc
def test_composite_functions_are_inlined_into_the_loop():
    from ember.relay.dataflow_pattern import is_op, wildcard
    from ember.relay.transform import MergeComposite

    x, y = relay.var("x", shape=SHAPE), relay.var("y", shape=SHAPE)
    mod = tvm.IRModule.from_expr(relay.Function([x, y], relay.exp(relay.nn.relu(
        relay.add(x, y)))))
    table = [("ccompiler.add_relu", is_op("nn.relu")(is_op("add")(wildcard(), wildcard())))]
    partitioned = Sequential([MergeComposite(table), BYOC])(mod)
    lib = relay.build(partitioned, "llvm")
    assert "(v0 > 0.0f ? v0 : 0.0f)" in lib.get_lib().get_source()
    m = lib["default"](tvm.cpu(0))
    m.set_input(x=INPUTS["x"], y=INPUTS["y"])
    m.run()
    want = np.exp(np.maximum(INPUTS["x"] + INPUTS["y"], 0))
    np.testing.assert_allclose(m.get_output(0).numpy(), want, rtol=1e-6)
