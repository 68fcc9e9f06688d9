"""Every operator of the library has a compute rule, lowers, compiles and matches its reference.

One module holds one kernel per op (one compiler run). A new op without a compute rule, or
without a case in ``_lowering_cases``, fails here.
"""
from __future__ import annotations

import numpy as np
from _lowering_cases import default_cases
from _lowering_util import check_cases

from ember.ir.op import OP_REGISTRY
from ember.ir.op import list_op_names as _all_op_names


# BYOC's region markers: PartitionGraph removes them, and building one is refused with a
# message saying so (tests/relay/backend/contrib/test_ccompiler.py).
NOT_LOWERED = {"annotation.compiler_begin", "annotation.compiler_end"}


def list_op_names() -> list[str]:
    """ember's operators, without those other test modules register (test.*, test_*.*),
    which a parallel worker may have loaded first, and without the BYOC markers."""
    return [n for n in _all_op_names() if not n.startswith("test") and n not in NOT_LOWERED]


def test_every_op_has_a_compute_rule():
    missing = [n for n in list_op_names() if OP_REGISTRY[n].compute is None]
    assert not missing, f"ops without a compute rule: {missing}"


def test_every_op_has_a_lowering_case():
    cases = default_cases(np.random.default_rng(0))
    assert sorted(cases) == list_op_names()


def test_every_op_lowers_compiles_and_matches_reference():
    cases = default_cases(np.random.default_rng(1))
    lowered = check_cases([cases[n] for n in list_op_names()])
    names = [lf.name for lf in lowered]
    assert all(n.startswith("tvmgen_default_fused_") for n in names)
