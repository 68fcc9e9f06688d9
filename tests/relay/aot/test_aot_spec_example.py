"""The example of the AOT RFC (spec/aot-module-based-runtime-rfc.md), written as the RFC writes
it with ``import ember as tvm``: the text format's ``%a + %b``, ``"llvm -executor=aot"`` and
``module_name=``, ``factory["my_mod"](tvm.cpu(0))``, then the module-based interface."""
from __future__ import annotations

import numpy as np
import pytest
from _aot_util import needs_cc

import ember as tvm

pytestmark = needs_cc


def test_rfc_example():
    ir_mod = tvm.parser.fromtext("""\
      #[version = "0.0.5"]
      def @main(%a : Tensor[(1, 2), uint8], %b : Tensor[(1, 2), uint8]) {
          %0 = %a + %b;
          %0
      }"""
    )
    with tvm.transform.PassContext(opt_level=3):
        factory = tvm.relay.build(ir_mod, "llvm -executor=aot", module_name="my_mod")

    aot_executor = factory["my_mod"](tvm.cpu(0))
    aot_executor.set_input("a", tvm.nd.array(np.array([[1, 2]], dtype="uint8")))
    aot_executor.set_input("b", tvm.nd.array(np.array([[3, 5]], dtype="uint8")))
    aot_executor.run()
    output = aot_executor.get_output(0)
    np.testing.assert_array_equal(output.numpy(), np.array([[4, 7]], dtype="uint8"))


def test_rfc_example_shape_of_the_build():
    """What the RFC says the build is: an AotExecutorFactory whose run_model calls
    tvmgen_my_mod_fused_add, with the metadata of RFC 0046."""
    ir_mod = tvm.parser.fromtext('#[version = "0.0.5"]\n'
                                 "def @main(%a: Tensor[(1, 2), uint8], %b: Tensor[(1, 2), uint8]) "
                                 "{ %a + %b }")
    factory = tvm.relay.build(ir_mod, "llvm -executor=aot", module_name="my_mod")
    assert type(factory).__name__ == "AotExecutorFactoryModule"
    assert factory.executor_kind == "aot" and factory.list_module_names() == ["my_mod"]
    meta = factory.get_model_metadata()
    assert meta.module_name == "my_mod" and meta.version == 1
    main = meta.functions[0]
    assert main.function_name == "tvmgen_my_mod_run_model"
    assert [(p.relay_name_hint, p.shape, p.dtype) for p in main.params] == [
        ("a", (1, 2), "uint8"), ("b", (1, 2), "uint8"), ("output", (1, 2), "uint8")]
    assert (main.num_inputs, main.num_outputs, main.io_size_bytes) == (2, 1, 6)
    assert "tvmgen_my_mod_fused_add(" in factory.sources["my_mod_lib1.c"]
    # the legacy triple: executor config (the metadata JSON), lib, params
    config, _lib, params = factory
    assert '"module_name":"my_mod"' in config and params == {}


def test_module_name_and_mod_name_must_agree():
    mod = tvm.IRModule.from_expr(tvm.relay.Function([x := tvm.relay.var("x", shape=(2,))],
                                                    tvm.relay.exp(x)))
    with pytest.raises(tvm.TVMError, match="disagree"):
        tvm.relay.build(mod, "llvm -executor=aot", mod_name="a", module_name="b")
    factory = tvm.relay.build(mod, "llvm -executor=aot", mod_name="same", module_name="same")
    assert factory.list_module_names() == ["same"]
