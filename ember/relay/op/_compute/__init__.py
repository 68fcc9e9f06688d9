"""Compute rules: each op's tensor expression, registered as ``OpDef.compute``.

A rule is ``compute(attrs, inputs, out_type) -> list[te.Tensor]``: ``attrs`` is the op's attrs
record (defaults filled in), ``inputs`` the te tensors of the arguments (a tuple argument is
flattened into its fields, as for concatenate), ``out_type`` the call's checked type (a
TensorType, or a TupleType for ops with several results, e.g. split or nn.batch_norm). Rules
translate Relay attrs into ``ember.topi`` parameters, and write the expression themselves where
topi has no matching compute or where Relay's semantics differ from topi's (documented in place).

One module per op family; importing this package registers every rule.
"""
from __future__ import annotations

from . import conv, conv_nchwc, creation, elemwise, nn, pooling, reduce, transform  # noqa: F401
from ._common import register_compute  # noqa: F401
