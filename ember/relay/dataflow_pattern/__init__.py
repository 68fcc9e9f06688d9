"""``relay.dataflow_pattern``: a pattern language over Relay programs, with matching,
partitioning and rewriting (the Relay-era API).

    from tvm.relay.dataflow_pattern import is_op, wildcard, is_constant, rewrite

    conv = is_op("nn.conv2d")(wildcard(), wildcard())
    pat = is_op("nn.relu")(is_op("nn.bias_add")(conv, is_constant()))
    pat.match(expr)                                    # True / False
    pat.partition(expr, {"Composite": "conv_bias_relu"})  # each match becomes a function call

    class DropRelu(DFPatternCallback):
        def __init__(self):
            super().__init__()
            self.x = wildcard()
            self.pattern = is_op("nn.relu")(self.x)
        def callback(self, pre, post, node_map):
            return node_map[self.x][0]
    rewrite(DropRelu(), expr)

``pattern.py`` defines the patterns and builders, ``matcher.py`` matching, ``graph.py`` the
dominator tree dominator patterns need, ``rewrite.py`` grouping, ``partition`` and
``rewrite``.
"""
from __future__ import annotations

from .matcher import match
from .pattern import (
    AltPattern,
    AttrPattern,
    CallPattern,
    ConstantPattern,
    DataTypePattern,
    DFPattern,
    DominatorPattern,
    ExprPattern,
    FunctionPattern,
    IfPattern,
    LetPattern,
    ShapePattern,
    TupleGetItemPattern,
    TuplePattern,
    TypePattern,
    VarPattern,
    WildcardPattern,
    dominates,
    has_attr,
    has_dtype,
    has_shape,
    has_type,
    is_constant,
    is_expr,
    is_if,
    is_let,
    is_op,
    is_tuple,
    is_tuple_get_item,
    is_var,
    wildcard,
)
from .rewrite import PARTITIONED_FROM_PATTERN, DFPatternCallback, partition, rewrite

__all__ = ["AltPattern", "AttrPattern", "CallPattern", "ConstantPattern", "DFPattern",
           "DFPatternCallback", "DataTypePattern", "DominatorPattern", "ExprPattern",
           "FunctionPattern", "IfPattern", "LetPattern", "PARTITIONED_FROM_PATTERN",
           "ShapePattern", "TupleGetItemPattern", "TuplePattern", "TypePattern", "VarPattern",
           "WildcardPattern", "dominates", "has_attr", "has_dtype", "has_shape", "has_type",
           "is_constant", "is_expr", "is_if", "is_let", "is_op", "is_tuple",
           "is_tuple_get_item", "is_var", "match", "partition", "rewrite", "wildcard"]
