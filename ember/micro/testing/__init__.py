"""Test helpers for code built for the C runtime (``tvm.micro.testing``).

``aot_test_utils``: the default AOT test runner and ``parametrize_aot_options``, the pytest
parametrisation over the valid interface / calling-convention / runner combinations;
``utils.get_conv2d_relay_module``: a small int8 conv2d model. The heavy lifting is
``ember.testing.aot``.
"""
from __future__ import annotations

from .aot_test_utils import AOT_CORSTONE300_RUNNER, AOT_DEFAULT_RUNNER, parametrize_aot_options
from .utils import get_conv2d_relay_module

__all__ = ["AOT_CORSTONE300_RUNNER", "AOT_DEFAULT_RUNNER", "get_conv2d_relay_module",
           "parametrize_aot_options"]
