"""Parsing of the command line's value syntaxes, each with a message that shows the expected
form: input shapes (``data:1x3x224x224``), pass options (``KEY=VALUE``), ``host:port[:key]``."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from ._console import CLIError

MODEL_SUFFIXES = (".onnx", ".relay", ".txt")
SHAPES_HINT = "expected NAME:D1xD2x..., comma-separated, e.g. data:1x3x224x224,mask:1x128"

# The PassContext options ember's passes read (the config itself is free-form, so a key outside
# this table would be accepted and silently ignored): key -> type or allowed values.
PASS_CONFIG: dict[str, Any] = {
    "relay.FuseOps.max_depth": int,
    "relay.FuseOps.link_params": bool,
    "ember.aot.operator_calling_convention": ("packed", "cpacked", "unpacked"),
    "relay.AlterOpLayout.desired_layout": ("NCHW", "NCHWc", "NCHW4c", "NCHW8c", "NCHW16c"),
    "relay.AlterOpLayout.pad_channels": bool,
    "relay.build.max_tensor_bytes": int,
    "tir.usmp.enable": bool,
    "tir.usmp.algorithm": ("greedy_by_size", "greedy_by_conflicts", "hill_climb"),
    "tir.usmp.use_workspace_io": bool,
    "tir.disable_storage_rewrite": bool,
    "relay.backend.concat_in_place": bool,
    "relay.backend.use_winograd": bool,
    # read while the ONNX file is imported (recurrent ops)
    "relay.frontend.max_unroll": int,
    "relay.frontend.rnn_kernel": bool,
}
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    import argparse

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def positive_float(text: str) -> float:
    """argparse type: a number > 0."""
    import argparse
    import math

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0 or math.isinf(value):
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text}")
    return value


def check_model_path(text: str) -> Path:
    """The model file ``text`` names; CLIError if missing or of an unknown kind."""
    path = Path(text)
    if path.suffix not in MODEL_SUFFIXES:
        raise CLIError(f"{text}: not a model file (expected .onnx, .relay or .txt)",
                       "`ember run`/`ember inspect` take compiled .so and .tar files", code=2)
    if path.is_dir():
        raise CLIError(f"{text}: a directory, not a model file", "give the model file itself")
    if not path.is_file():
        raise CLIError(f"{text}: no such file", "check the path")
    return path


def parse_input_shapes(text: str | None) -> dict[str, tuple[int, ...]] | None:
    """``"data:1x3x224x224,mask:1x128"`` -> ``{"data": (1, 3, 224, 224), "mask": (1, 128)}``.

    The name is everything before the last colon (ONNX names such as ``input:0`` work)."""
    if text is None:
        return None
    shapes: dict[str, tuple[int, ...]] = {}
    for item in text.split(","):
        name, colon, dims = item.strip().rpartition(":")
        if not colon or not name:
            raise CLIError(f"--input-shapes {text!r}: {item.strip()!r} has no NAME:",
                           SHAPES_HINT, code=2)
        try:
            shape = tuple(int(d) for d in dims.split("x"))
        except ValueError:
            raise CLIError(f"--input-shapes {text!r}: {dims!r} is not a shape",
                           SHAPES_HINT, code=2) from None
        if any(d <= 0 for d in shape):
            raise CLIError(f"--input-shapes {text!r}: dimensions of {name!r} must be positive",
                           SHAPES_HINT, code=2)
        if name in shapes:
            raise CLIError(f"--input-shapes {text!r}: {name!r} is given twice", code=2)
        shapes[name] = shape
    return shapes


def parse_pass_config(items: list[str]) -> dict[str, Any]:
    """``["relay.FuseOps.max_depth=8"]`` -> ``{"relay.FuseOps.max_depth": 8}``, typed."""
    known = ", ".join(PASS_CONFIG)
    config: dict[str, Any] = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise CLIError(f"--pass-config {item!r}: expected KEY=VALUE", f"keys: {known}",
                           code=2)
        kind = PASS_CONFIG.get(key)
        if kind is None:
            raise CLIError(f"--pass-config {item!r}: unknown key {key!r}", f"keys: {known}",
                           code=2)
        config[key] = _typed(item, value, kind)
    return config


def _typed(item: str, value: str, kind: Any) -> Any:
    if kind is bool:
        if value.lower() not in _TRUE + _FALSE:
            raise CLIError(f"--pass-config {item!r}: expected true or false", code=2)
        return value.lower() in _TRUE
    if kind is int:
        try:
            return int(value)
        except ValueError:
            raise CLIError(f"--pass-config {item!r}: expected an integer", code=2) from None
    if value not in kind:
        raise CLIError(f"--pass-config {item!r}: expected one of {', '.join(kind)}", code=2)
    return value


def parse_rpc_address(text: str) -> tuple[str, int, str]:
    """``"host:port[:key]"`` -> (host, port, key)."""
    parts = text.split(":")
    if len(parts) not in (2, 3) or not parts[0] or not parts[1].isdigit():
        raise CLIError(f"--rpc {text!r}: expected HOST:PORT or HOST:PORT:KEY",
                       "e.g. --rpc 127.0.0.1:9091 (start a server with `ember rpc-server`)",
                       code=2)
    port = int(parts[1])
    if not 0 < port < 65536:
        raise CLIError(f"--rpc {text!r}: port {port} out of range 1-65535", code=2)
    return parts[0], port, parts[2] if len(parts) == 3 else ""
