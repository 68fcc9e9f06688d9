"""The ``relay.nn`` namespace: convolution, pooling, dense layers, activations, normalisation."""
from __future__ import annotations

from . import conv, conv_nchwc, gemm, nn, norm, pooling, rearrange  # noqa: F401  (gemm, conv_nchwc register their ops)
from .conv import *
from .nn import *
from .norm import *
from .pooling import *
from .rearrange import *

__all__: list[str] = []
__all__ += conv.__all__ + nn.__all__ + norm.__all__ + pooling.__all__ + rearrange.__all__
