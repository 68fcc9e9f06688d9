"""Model importers: ``from_onnx`` (ONNX models; needs the optional ``onnx`` package, imported
only when a model is imported: ``pip install 'ember[onnx]'``)."""
from __future__ import annotations

from . import onnx
from .onnx import from_onnx

__all__ = ["from_onnx", "onnx"]
