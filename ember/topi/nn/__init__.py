"""ember.topi.nn: neural-network operators (compute + schedule templates)."""
from __future__ import annotations

from .conv2d import conv2d, conv2d_nchw, conv2d_nhwc  # noqa: F401
from .dense import batch_matmul, dense, matmul  # noqa: F401
from .misc import (  # noqa: F401
                   batch_flatten,
                   bias_add,
                   conv2d_transpose_nchw,
                   leaky_relu,
                   prelu,
                   relu,
                   upsampling,
)
from .norm import batch_norm, layer_norm, log_softmax, rms_norm, softmax  # noqa: F401
from .pad import pad  # noqa: F401
from .pooling import (  # noqa: F401
                   adaptive_avg_pool2d,
                   adaptive_max_pool2d,
                   adaptive_pool,
                   avg_pool2d,
                   global_avg_pool2d,
                   global_max_pool2d,
                   global_pool,
                   max_pool2d,
                   pool2d,
)
