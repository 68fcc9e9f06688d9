"""The AOT executor's compile side (``relay.build(..., executor=Executor("aot"))``).

- ``calling_convention``: the interface / operator calling conventions and the rules that
  combine them (errors cite the rule);
- ``codegen``: ``main`` -> ``tvmgen_<mod>_run_model`` as loop IR, over one planned arena;
- ``emit_c``: run_model and the linked constants as C;
- ``interface``: C names, the header ``tvmgen_<mod>.h``, the packed and C entry points;
- ``metadata``: the unified metadata (JSON, C struct, macros);
- ``build``: the pipeline, registered as the ``"aot"`` builder of ``relay.build``
  (``backend/registry.py``);
- ``evaluator``: the ``"aot"`` kind of ``relay.create_executor``.

The run side is ``ember.runtime.aot_executor``; the contract between them is
``ember.runtime.aot_format``.
"""
from __future__ import annotations

from ..registry import register_builder, register_evaluator
from .build import build_aot, check_supported
from .evaluator import AotEvaluator

__all__ = ["AotEvaluator", "build_aot", "check_supported"]

register_builder("aot", build_aot)
register_evaluator("aot", AotEvaluator)
