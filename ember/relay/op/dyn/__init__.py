"""The dynamic forms of the ops whose shape, axes or counts are tensors (Relay's ``dyn.*``):
``dyn.reshape``, ``dyn.broadcast_to``, ``dyn.tile``, ``dyn.strided_slice``, ``dyn.full``,
``dyn.zeros``, ``dyn.ones``, ``dyn.one_hot``, ``dyn.topk``, ``dyn.nn.pad``,
``dyn.image.resize2d``, ``dyn.squeeze`` and ``dyn.expand_dims``.

Each op's output size comes from its argument's *values*, so types say ``?`` there and the
VM runs them: its shape function reads the values (``op/_value_dims.py``) and checks them
(a negative size or a reshape that loses elements fails, naming the op and the ``where``
attribute, e.g. the ONNX node). The Relay builders dispatch here when given an expression
(``relay.reshape(x, newshape=relay.shape_of(y))``); ``transform.DynamicToStatic`` turns each
back into its static op once the values are constants.
"""
from __future__ import annotations

from . import algorithm, creation, image, nn, transform, unit_dims
from .algorithm import topk
from .creation import full, one_hot, ones, zeros
from .transform import broadcast_to, reshape, strided_slice, tile
from .unit_dims import expand_dims, squeeze

__all__ = ["broadcast_to", "expand_dims", "full", "image", "nn", "one_hot", "ones", "reshape",
           "squeeze", "strided_slice", "tile", "topk", "zeros"]
__all__ += ["algorithm", "creation", "transform", "unit_dims"]
