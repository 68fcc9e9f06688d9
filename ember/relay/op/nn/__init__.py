"""The ``relay.nn`` namespace: convolution, pooling, dense layers, activations, normalisation."""
from __future__ import annotations

from . import _attrs  # noqa: F401
from .conv import *  # noqa: F401,F403
from .conv import __all__ as _conv_all
from .nn import *  # noqa: F401,F403
from .nn import __all__ as _nn_all
from .norm import *  # noqa: F401,F403
from .norm import __all__ as _norm_all
from .pooling import *  # noqa: F401,F403
from .pooling import __all__ as _pool_all

__all__ = [*_conv_all, *_nn_all, *_norm_all, *_pool_all]
