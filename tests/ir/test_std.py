"""The standard library files (ember/ir/std/*.rly) and IRModule.import_from_std."""
from __future__ import annotations

import pytest

import ember as tvm
from ember import relay
from ember.ir import assert_structural_equal
from ember.ir.parser import fromtext
from ember.ir.std import STD_DIR, std_files
from ember.runtime.errors import TVMError


def test_the_files():
    assert std_files() == ["core.rly", "gradient.rly", "prelude.rly"]


@pytest.mark.parametrize("name", ["core.rly", "gradient.rly", "prelude.rly"])
def test_each_file_type_checks_and_round_trips(name):
    mod = tvm.IRModule().import_from_std(name)
    typed = relay.transform.InferType()(mod)
    assert all(f.checked_type is not None for f in typed.functions.values())
    again = fromtext(mod.astext())
    assert_structural_equal(again, mod)
    assert again.astext() == mod.astext()


def test_import_is_in_place_and_idempotent():
    mod = tvm.IRModule()
    assert mod.import_from_std("prelude.rly") is mod
    assert {"map", "foldl", "iterate"} <= {gv.name_hint for gv in mod.get_global_vars()}
    before = mod.astext()
    mod.import_from_std("prelude.rly")
    assert mod.astext() == before


def test_imports_combine_and_keep_the_module_s_own_definitions():
    x = relay.var("x", "float32")
    mod = tvm.IRModule.from_expr(relay.Function([x], relay.negative(x)))
    mod.import_from_std("core.rly").import_from_std("gradient.rly")
    assert "main" in mod and "Storage" in mod and "AddGradCell" in mod
    storage = mod[mod.get_global_type_var("Storage")]
    assert storage.constructors == ()


def test_spans_point_into_the_file():
    mod = tvm.IRModule().import_from_std("prelude.rly")
    span = mod["map"].body.span
    assert span.source_name.name == "ember/ir/std/prelude.rly"
    lines = (STD_DIR / "prelude.rly").read_text().split("\n")
    assert lines[span.line - 1][span.column - 1:].startswith("match (%xs)")


def test_two_modules_do_not_share_state():
    a, b = tvm.IRModule(), tvm.IRModule()
    a.import_from_std("prelude.rly")
    assert "map" not in b
    b.import_from_std("prelude.rly")
    b.remove("map")
    assert "map" in a


def test_partial_clash_is_an_error_naming_the_definitions():
    mod = tvm.IRModule()
    x = relay.var("x", "int32")
    mod["map"] = relay.Function([x], x)
    with pytest.raises(TVMError, match=r"import_from_std\('prelude.rly'\): the module already "
                                       r"defines map but not the rest"):
        mod.import_from_std("prelude.rly")
    assert list(mod.type_definitions) == []


@pytest.mark.parametrize("name, error, message", [
    ("nope.rly", ValueError, r"no standard library file 'nope.rly'; the files are core.rly, "
                             r"gradient.rly, prelude.rly"),
    ("../std/prelude.rly", ValueError, "no standard library file '../std/prelude.rly'"),
    ("/etc/passwd", ValueError, "no standard library file '/etc/passwd'"),
    ("prelude", ValueError, "no standard library file 'prelude'"),
    ("", ValueError, "no standard library file ''"),
    (["prelude.rly"], TypeError, "expected a file name \\(str\\), got list"),
])
def test_bad_file_names(name, error, message):
    with pytest.raises(error, match=message):
        tvm.IRModule().import_from_std(name)


def test_prelude_is_the_std_file():
    p = relay.Prelude()
    assert_structural_equal(p.mod, tvm.IRModule().import_from_std("prelude.rly"))
