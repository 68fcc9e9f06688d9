"""The saved record of a compiled model (``ember.compile`` / ``CompiledModel.save``).

A ``PyModule`` of type ``EmberModel`` at the root of an exported module tree, importing the
executor factory. Its bytes are UTF-8 JSON: ``{"format": "ember-model", "version": 1,
"executor": "aot", "threads": 4, "inputs": [[name, shape, dtype], ...], "outputs": [...],
"info": {...}}`` with ``None`` for a dynamic dimension, or its name (a string, version 2) where
the model names it (an ONNX ``dim_param``: axes of one name have one size in a call). ``info`` (optional, a JSON object) is
free-form build information that tools show (``ember inspect``: target, options, kernels, the
memory plan); loaders that do not know a key ignore it.

It lives in the runtime layer so that every process that loads libraries (an RPC server, a
plain ``load_module``) can rebuild it; ``ember.api.model`` re-exports it.
"""
from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from . import json_reader
from .errors import ArtifactError
from .module import PyModule, register_py_module
from .threads import check_num_threads

FORMAT = "ember-model"
FORMAT_VERSION = 2
READABLE_VERSIONS = (1, 2)  # version 1 has no named dimensions
EXECUTORS = ("graph", "aot", "vm")


@dataclass(frozen=True)
class TensorSpec:
    """One input or output: ``name``, ``shape`` (an int per static dimension, None for a
    dynamic one, or the dynamic dimension's name, e.g. ``"batch"``; None for the whole shape
    of a non-tensor value) and ``dtype`` (for a non-tensor value, its type)."""

    name: str
    shape: tuple[int | str | None, ...] | None
    dtype: str

    @property
    def is_static(self) -> bool:
        """Whether every dimension is a known size."""
        return self.shape is not None and all(type(d) is int for d in self.shape)

    def __str__(self) -> str:
        if self.shape is None:
            return f"{self.name}: {self.dtype}"
        dims = ", ".join("?" if d is None else str(d) for d in self.shape)
        return f"{self.name}: {self.dtype}[{dims}]"

    def to_json(self) -> list[Any]:
        return [self.name, None if self.shape is None else list(self.shape), self.dtype]

    @classmethod
    def from_json(cls, item: Any) -> TensorSpec:
        name, shape, dtype = item
        if shape is not None:
            shape = tuple(shape)
            for d in shape:
                if not (d is None or type(d) is str or type(d) is int and d >= 0):
                    raise ValueError(f"{name!r}: a dimension must be a size, null or a name, "
                                     f"got {d!r}")
        return cls(str(name), shape, str(dtype))


@register_py_module("EmberModel")
class ModelRecord(PyModule):
    """The saved record of a compiled model; it imports the executor factory."""

    def __init__(self, executor: str, threads: int, inputs: Sequence[TensorSpec],
                 outputs: Sequence[TensorSpec], info: dict[str, Any] | None = None) -> None:
        super().__init__()
        self.executor, self.threads = executor, threads
        self.inputs, self.outputs = tuple(inputs), tuple(outputs)
        self.info: dict[str, Any] = dict(info or {})

    def save_binary(self) -> bytes:
        return json.dumps({"format": FORMAT, "version": FORMAT_VERSION,
                           "executor": self.executor, "threads": self.threads,
                           "inputs": [s.to_json() for s in self.inputs],
                           "outputs": [s.to_json() for s in self.outputs],
                           "info": self.info}).encode()

    @classmethod
    def load_binary(cls, data: bytes) -> ModelRecord:
        what = "ember model record"
        try:
            rec = json_reader.loads(data)
        except ValueError as err:
            raise ArtifactError(f"{what}: not JSON: {err}") from None
        if not isinstance(rec, dict) or rec.get("format") != FORMAT:
            raise ArtifactError(f"{what}: not an {FORMAT} record")
        if rec.get("version") not in READABLE_VERSIONS:
            raise ArtifactError(f"{what}: version {rec.get('version')!r}; this runtime reads "
                                f"versions {', '.join(map(str, READABLE_VERSIONS))}")
        try:
            if rec["executor"] not in EXECUTORS:
                raise ValueError(f"unknown executor {rec['executor']!r}")
            threads = check_num_threads(rec["threads"], "threads")
            info = rec.get("info", {})
            if not isinstance(info, dict):
                raise TypeError(f"info must be an object, got {type(info).__name__}")
            return cls(rec["executor"], threads,
                       [TensorSpec.from_json(s) for s in rec["inputs"]],
                       [TensorSpec.from_json(s) for s in rec["outputs"]], info)
        except (KeyError, TypeError, ValueError) as err:
            raise ArtifactError(f"{what}: corrupt field: {err}") from None
