"""The ``relay.nn`` namespace: convolution, pooling, dense layers, activations, normalisation."""
from __future__ import annotations

from . import (  # noqa: F401  (gemm, conv_nchwc register their ops)
    activation,
    attention,
    channel_shuffle,
    conv,
    conv_nchwc,
    conv_transpose_nchwc,
    conv_winograd,
    gemm,
    linear,
    minmax,
    nn,
    norm,
    pool_nchwc_fused,
    pooling,
    qadd,
    qconv,
    qdense,
    rearrange,
    recurrent,
    resample,
)
from .activation import *
from .channel_shuffle import *
from .conv import *
from .conv_transpose_nchwc import *
from .linear import *
from .minmax import *
from .nn import *
from .norm import *
from .pooling import *
from .qadd import *
from .qconv import *
from .qdense import *
from .rearrange import *
from .recurrent import *
from .resample import *

__all__: list[str] = []
__all__ += (activation.__all__ + channel_shuffle.__all__ + conv.__all__ + conv_transpose_nchwc.__all__ + linear.__all__ + minmax.__all__ + nn.__all__ + norm.__all__ + pooling.__all__ + qadd.__all__ + qconv.__all__ + qdense.__all__
            + rearrange.__all__ + resample.__all__ + recurrent.__all__)
