"""Compute rules: each op's tensor expression, registered as ``OpDef.compute``.

A rule is ``compute(attrs, inputs, out_type) -> list[te.Tensor]``: ``attrs`` is the op's attrs
record (defaults filled in), ``inputs`` the te tensors of the arguments (a tuple argument is
flattened into its fields, as for concatenate), ``out_type`` the call's checked type (a
TensorType, or a TupleType for ops with several results, e.g. split or nn.batch_norm). Rules
translate Relay attrs into ``ember.topi`` parameters, and write the expression themselves where
topi has no matching compute or where Relay's semantics differ from topi's (documented in place).

Most op families keep their compute rules next to their other rules (``tensor.py``,
``reduce.py``, ``transform.py``, ``indexing.py``, ``creation.py``, ``algorithm.py``, ``image.py``,
``scatter_gather.py``, ``nn/rearrange.py``), using the helpers of ``_common.py``. The ``nn``
family's rules (dense, conv, pooling) are still here, one module each, imported by
``ember.relay.op`` after the nn ops are defined (importing ``_common`` alone registers nothing).
"""
from __future__ import annotations
