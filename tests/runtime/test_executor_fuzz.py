"""Fuzzing the executors' module-based interface: random sequences of valid and invalid calls
(bad names, indices, shapes, dtypes; strided, read-only, broadcast and byte-swapped arrays;
Python lists, None, strings, foreign devices...) on a tiny three-input model, for the graph
executor, the debug executor, the AOT executor (packed and C interface) and the VM. See
``_executor_fuzz.py`` for what each call checks. The kernels are compiled once per session
(content-hash cache), so each example costs microseconds."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _executor_fuzz import NAMES, Driver, calls, factory, run_sequence

import ember
from ember.testing import find_c_compiler

pytestmark = pytest.mark.skipif(find_c_compiler() is None, reason="no C compiler found")
FUZZ = settings(max_examples=60, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


class AotDriver(Driver):
    runs_without_inputs = False
    get_input_sets = True  # get_input(name).copyfrom(x); run() works, as in the C executor


class DebugDriver(Driver):
    def run(self) -> None:
        self.m.run(number=1, repeat=1, min_repeat_ms=0, display=False)


class VMDriver(Driver):
    runs_without_inputs = outputs_before_run = inputs_before_set = False

    def check_unchanged(self) -> None:
        for name, want in self.shadow.items():
            np.testing.assert_array_equal(self.m.get_input(name).numpy(), want)


@FUZZ
@given(sequence=calls)
def test_graph_executor_fuzz(sequence):
    run_sequence(Driver(factory("graph")["default"](ember.cpu(0))), sequence)


@FUZZ
@given(sequence=calls)
def test_debug_executor_fuzz(sequence):
    run_sequence(DebugDriver(factory("graph").debug_create("default", ember.cpu(0))), sequence)


@FUZZ
@given(sequence=calls)
def test_aot_packed_executor_fuzz(sequence):
    run_sequence(AotDriver(factory("aot-packed")["default"](ember.cpu(0))), sequence)


@FUZZ
@given(sequence=calls)
def test_aot_c_interface_executor_fuzz(sequence):
    module = factory("aot-c")["default"](ember.cpu(0))
    assert module.metadata.interface_api == "c"
    run_sequence(AotDriver(module), sequence)


@FUZZ
@given(sequence=calls)
def test_vm_executor_fuzz(sequence):
    run_sequence(VMDriver(factory("vm")["default"](ember.cpu(0))), sequence)


def test_fuzz_model_has_the_declared_inputs():
    m = factory("graph")["default"](ember.cpu(0))
    assert [m.get_input_index(n) for n in NAMES] == [0, 1, 2]
