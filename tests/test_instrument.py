"""``tvm.instrument``: the pass instruments, including the printing ones."""
from __future__ import annotations

import pytest

import ember as tvm
from ember import relay


def _mod():
    x = relay.var("x", shape=(2,))
    return tvm.IRModule.from_expr(relay.Function([x], x + relay.const(1.0) + relay.const(2.0)))


def test_names_are_those_of_ir_instrument():
    assert tvm.instrument.PassInstrument is tvm.ir.instrument.PassInstrument
    assert tvm.instrument.pass_instrument is tvm.ir.instrument.pass_instrument


def test_print_after_all_prints_each_pass(capsys):
    with tvm.transform.PassContext(opt_level=3, instruments=[tvm.instrument.PrintAfterAll()]):
        relay.transform.FoldConstant()(_mod())
    out = capsys.readouterr().out
    assert "After Running Pass: FoldConstant" in out and "def @main" in out


def test_printing_instrument_prints_only_named_passes(capsys):
    pi = tvm.instrument.PassPrintingInstrument(print_before_pass_names=["FoldConstant"],
                                               print_after_pass_names="InferType")
    with tvm.transform.PassContext(opt_level=3, instruments=[pi]):
        relay.transform.FoldConstant()(_mod())
        relay.transform.InferType()(_mod())
    out = capsys.readouterr().out
    assert "Before Running Pass: FoldConstant" in out and "After Running Pass: InferType" in out
    assert "After Running Pass: FoldConstant" not in out


def test_printing_instrument_refuses_non_str_names():
    with pytest.raises(TypeError, match="pass names must be str"):
        tvm.instrument.PassPrintingInstrument(print_before_pass_names=[3])


def test_pass_instrument_decorator_as_scripts_use_it():
    @tvm.instrument.pass_instrument
    class Count:
        def __init__(self):
            self.names = []

        def run_before_pass(self, mod, info):
            self.names.append(info.name)

    count = Count()
    with tvm.transform.PassContext(instruments=[count]):
        relay.transform.InferType()(_mod())
    assert count.names == ["InferType"]
