"""The pass infrastructure: PassContext, Sequential, decorators, instruments, debug output."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import pytest

import ember
from ember import relay
from ember.ir import IRModule
from ember.ir.instrument import PassInstrument, PassTimingInstrument, pass_instrument
from ember.ir.transform import (FunctionPass, ModulePass, PassContext, PassInfo, Sequential,
                                function_pass, get_pass, module_pass, register_pass)
from ember.runtime.errors import DiagnosticError


def _mod() -> IRModule:
    x = relay.var("x", shape=(2,))
    return IRModule.from_expr(relay.Function([x], x))


def _tagger(log: list[str], name: str, opt_level: int = 0, required=None) -> ModulePass:
    """A pass that records that it ran and tags the module."""

    @module_pass(opt_level=opt_level, name=name, required=required)
    def run(mod, ctx):
        log.append(name)
        return mod.with_attr(name, True)

    return run


def test_top_level_names_resolve():
    assert ember.transform.PassContext is PassContext
    assert relay.transform.Sequential is Sequential
    with relay.transform.build_config(opt_level=1, disabled_pass=["A"]) as ctx:
        assert isinstance(ctx, PassContext) and PassContext.current().opt_level == 1


def test_context_manager_nests_and_restores():
    outer = PassContext.current()
    with PassContext(opt_level=3) as ctx:
        assert PassContext.current() is ctx
        with PassContext(opt_level=1, config={"k": 1}):
            assert PassContext.current().opt_level == 1
            assert PassContext.current().config["k"] == 1
        assert PassContext.current() is ctx
    assert PassContext.current() is outer
    assert outer.opt_level == 2


def test_bad_context_arguments_are_named():
    with pytest.raises(TypeError, match="opt_level must be an int"):
        PassContext(opt_level="3")
    with pytest.raises(TypeError, match="instruments must be PassInstruments"):
        PassContext(instruments=[object()])


def test_module_pass_decorator_function():
    log: list[str] = []
    p = _tagger(log, "Tag", opt_level=2)
    assert isinstance(p, ModulePass)
    assert p.info == PassInfo(2, "Tag")
    mod = _mod()
    out = p(mod)
    assert log == ["Tag"] and out.attrs["Tag"] and "Tag" not in mod.attrs  # no in-place edit


def test_module_pass_decorator_bare_and_class():
    @module_pass
    def bare(mod, ctx):
        return mod

    assert bare.info.name == "bare" and bare.info.opt_level == 0

    @module_pass(opt_level=1)
    class AddAttr:
        """Adds an attribute."""

        def __init__(self, key):
            self.key = key

        def transform_module(self, mod, ctx):
            return mod.with_attr(self.key, ctx.opt_level)

    p = AddAttr("level")
    assert isinstance(p, ModulePass) and p.key == "level"
    assert p.info.name == "AddAttr" and AddAttr.__doc__ == "Adds an attribute."
    with PassContext(opt_level=3):
        assert p(_mod()).attrs["level"] == 3


def test_function_pass_skips_primitive_functions():
    seen = []

    @function_pass(opt_level=1)
    def rename(func, mod, ctx):
        seen.append(func)
        return relay.Function(func.params, func.body, func.ret_type)

    y = relay.var("y", shape=(2,))
    prim = relay.Function([y], y).with_attr("Primitive", 1)
    mod = _mod()
    mod["prim"] = prim
    out = rename(mod)
    assert seen == [mod["main"]]
    assert out["prim"] is prim and out["main"] is not mod["main"]
    assert out.get_global_var("main") is mod.get_global_var("main")


def test_function_pass_class_form():
    @function_pass(opt_level=0, name="Identity")
    class Identity:
        def transform_function(self, func, mod, ctx):
            return func

    mod = _mod()
    assert Identity()(mod)["main"] is mod["main"]
    assert isinstance(Identity(), FunctionPass)


def test_dataclass_pass_style():
    @dataclass(frozen=True)
    class Mark(ModulePass):
        name: ClassVar[str] = "mark-it"
        opt_level: ClassVar[int] = 1
        value: int = 7

        def transform_module(self, mod, ctx):
            return mod.with_attr("mark", self.value)

    assert Mark(3)(_mod()).attrs["mark"] == 3
    with PassContext(opt_level=0, required_pass=["MarkIt"]):  # names match loosely
        assert Sequential([Mark()])(_mod()).attrs["mark"] == 7


def test_sequential_runs_in_order_and_gates_on_opt_level():
    log: list[str] = []
    seq = Sequential([_tagger(log, "A", 0), _tagger(log, "B", 3), _tagger(log, "C", 1)])
    with PassContext(opt_level=2):
        out = seq(_mod())
    assert log == ["A", "C"]
    assert "B" not in out.attrs
    log.clear()
    with PassContext(opt_level=3):
        seq(_mod())
    assert log == ["A", "B", "C"]


def test_disabled_and_required_pass():
    log: list[str] = []
    seq = Sequential([_tagger(log, "A", 0), _tagger(log, "B", 4)])
    with PassContext(opt_level=3, disabled_pass=["A"], required_pass=["B"]):
        seq(_mod())
    assert log == ["B"]


def test_direct_call_ignores_opt_level():
    log: list[str] = []
    with PassContext(opt_level=0, disabled_pass=["A"]):
        _tagger(log, "A", 3)(_mod())
    assert log == ["A"]


def test_required_passes_run_first():
    log: list[str] = []
    register_pass("TestPrereq", lambda: _tagger(log, "TestPrereq"))
    seq = Sequential([_tagger(log, "Main", required=["TestPrereq"])])
    seq(_mod())
    assert log == ["TestPrereq", "Main"]
    with pytest.raises(KeyError, match="pass Bad requires unknown pass 'NoSuchPass'"):
        Sequential([_tagger(log, "Bad", required=["NoSuchPass"])])(_mod())


def test_infer_type_is_registered():
    assert get_pass("InferType").info.name == "InferType"
    assert get_pass("infer-type").info.opt_level == 0


def test_pass_rejects_non_module_and_bad_results():
    p = _tagger([], "A")
    with pytest.raises(TypeError, match="expected an IRModule, got Function; wrap it"):
        p(_mod()["main"])

    @module_pass
    def broken(mod, ctx):
        return mod["main"]

    with pytest.raises(TypeError, match="pass broken returned Function"):
        broken(_mod())
    with pytest.raises(TypeError, match=r"passes\[1\]"):
        Sequential([p, "InferType"])


def test_instruments_are_called_in_order():
    events: list[str] = []

    @pass_instrument
    class Recorder:
        def enter_pass_ctx(self):
            events.append("enter")

        def exit_pass_ctx(self):
            events.append("exit")

        def run_before_pass(self, mod, info):
            events.append(f"before {info.name}")

        def run_after_pass(self, mod, info):
            events.append(f"after {info.name}")

    rec = Recorder()
    assert isinstance(rec, PassInstrument)
    with PassContext(instruments=[rec]):
        Sequential([_tagger([], "A")], name="seq")(_mod())
    assert events == ["enter", "before seq", "before A", "after A", "after seq", "exit"]


def test_should_run_can_skip_a_pass():
    log: list[str] = []

    class SkipB(PassInstrument):
        def should_run(self, mod, info):
            return info.name != "B"

    with PassContext(instruments=[SkipB()]):
        Sequential([_tagger(log, "A"), _tagger(log, "B")])(_mod())
    assert log == ["A"]


def test_timing_instrument_and_override():
    timing = PassTimingInstrument()
    with PassContext(instruments=[]) as ctx:
        ctx.override_instruments([timing])
        Sequential([_tagger([], "A")], name="outer")(_mod())
        text = timing.render()
    assert text.splitlines()[0].startswith("  A: ") and "outer: " in text


def test_debug_logging(monkeypatch, capsys):
    monkeypatch.setenv("EMBER_DEBUG", "1")
    Sequential([_tagger([], "A"), _tagger([], "B", 9)], name="seq")(_mod())
    err = capsys.readouterr().err
    assert "[ember]   pass A:" in err and "skip B" in err and "[ember] pass seq:" in err
    monkeypatch.setenv("EMBER_DEBUG", "2")
    _tagger([], "A")(_mod())
    assert "def @main(%x" in capsys.readouterr().err


def test_print_ir_passes_module_through(capsys):
    mod = _mod()
    assert ember.transform.PrintIR("hdr")(mod) is mod
    assert "PrintIR(hdr)" in capsys.readouterr().err


def test_verify_names_the_pass_that_broke_the_module(monkeypatch):
    @module_pass
    def leak(mod, ctx):
        free = relay.var("free", shape=(2,))
        return IRModule({"main": relay.Function([], free)})

    monkeypatch.setenv("EMBER_VERIFY", "1")
    with pytest.raises(DiagnosticError, match="pass leak left the module invalid: .*free"):
        Sequential([leak])(_mod())
    monkeypatch.delenv("EMBER_VERIFY")
    leak(_mod())  # not checked
    with PassContext(config={"ember.verify": True}), pytest.raises(DiagnosticError, match="leak"):
        leak(_mod())
