"""Python lists passed for a List-typed parameter become prelude List values (Cons/Nil)."""
import numpy as np
import pytest

import ember
from ember import relay
from ember.runtime.vm import Executable, VirtualMachine
from ember.testing import find_c_compiler

pytestmark = pytest.mark.skipif(find_c_compiler() is None, reason="no C compiler found")


def _sum_list_module():
    p = relay.prelude.Prelude()
    mod = p.mod
    elem = relay.TensorType((2,), "float32")
    xs = relay.var("xs", relay.TypeCall(mod.get_global_type_var("List"), [elem]))
    acc, x = relay.var("acc", elem), relay.var("x", elem)
    add = relay.Function([acc, x], relay.add(acc, x))
    mod["main"] = relay.Function([xs], mod.get_global_var("foldl")(add, relay.const(np.zeros(2, "float32")), xs))
    return mod


def test_python_list_is_converted_for_a_list_parameter():
    exe = relay.vm.compile(_sum_list_module(), target="llvm")
    vm = VirtualMachine(exe, ember.cpu(0))
    items = [np.full(2, i, "float32") for i in range(1, 5)]
    np.testing.assert_allclose(vm.invoke("main", items).numpy(), [10.0, 10.0])
    np.testing.assert_allclose(vm.invoke("main", []).numpy(), [0.0, 0.0])
    np.testing.assert_allclose(vm.invoke("main", items[:2]).numpy(), items[0] + items[1])


def test_list_parameter_info_survives_save_and_listing():
    exe = relay.vm.compile(_sum_list_module(), target="llvm")
    code, lib = exe.save()
    loaded = Executable.load_exec(code, lib)
    assert "List[cons=" in loaded.bytecode
    vm = VirtualMachine(loaded, ember.cpu(0))
    np.testing.assert_allclose(vm.invoke("main", [np.ones(2, "float32")] * 3).numpy(), [3, 3])


def test_list_element_of_wrong_kind_is_a_clear_error():
    exe = relay.vm.compile(_sum_list_module(), target="llvm")
    vm = VirtualMachine(exe, ember.cpu(0))
    with pytest.raises((TypeError, ember.TVMError), match="element"):
        vm.invoke("main", [object()])
