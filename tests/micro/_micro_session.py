"""Helpers of the host micro session tests: models built for the C runtime, generated and
built projects, and a raw client that sends any bytes to a device program."""
from __future__ import annotations

import shutil
import struct
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _micro_models import cnn_model, mlp_model

import ember as tvm
from ember import relay
from ember.relay.backend import Executor, Runtime
from ember.runtime.rpc.handshake import hello_payload
from ember.runtime.rpc.protocol import HEADER, MAGIC, Kind
from ember.testing import find_c_compiler

needs_toolchain = pytest.mark.skipif(find_c_compiler() is None or shutil.which("make") is None,
                                     reason="needs a C compiler and make")
RTOL = ATOL = 1e-5  # the same C kernels, in another process, against the Python executors
CRT = Runtime("crt", {"system-lib": True})
# Bounds every wait of a test session on the device: a hang fails the test, never blocks it.
TIMEOUTS = tvm.micro.TransportTimeouts(0.0, 20.0, 60.0)


def build(model: str, executor: str, mod_name: str = "default", **options: Any) -> Any:
    """relay.build of the MLP or the small CNN for the C runtime (system-lib), target c."""
    mod, params = mlp_model() if model == "mlp" else cnn_model()
    return relay.build(mod, target="c", params=params, runtime=CRT,
                       executor=Executor(executor, options), mod_name=mod_name)


def input_of(model: str, seed: int = 0) -> np.ndarray:
    shape = (1, 20) if model == "mlp" else (1, 3, 12, 12)
    return np.random.default_rng(seed).standard_normal(shape).astype("float32")


def input_name(model: str) -> str:
    return "data" if model == "mlp" else "image"


def python_output(factory: Any, model: str, data: np.ndarray) -> np.ndarray:
    """The output of the factory's executor in this process."""
    m = factory[factory.libmod_name](tvm.cpu(0))
    m.set_input(input_name(model), data)
    m.run()
    return m.get_output(0).numpy()


def make_project(tmp: Path, module: Any, **options: Any) -> Any:
    """A generated and built host project of ``module`` (factories or an MLF path)."""
    project = tvm.micro.generate_project(tvm.micro.get_microtvm_template_projects("crt") + "/host",
                                         module, tmp, options)
    project.build()
    return project


# ---- raw frames --------------------------------------------------------------------------------
def frame(kind: int, payload: bytes = b"", seq: int = 1, length: int | None = None) -> bytes:
    return HEADER.pack(MAGIC, kind, 0, seq, len(payload) if length is None else length) + payload


def hello(key: str = "", secret: bool = False, version: int = 1) -> bytes:
    payload = hello_payload(key, 0, secret, bytes(16))
    return frame(Kind.HELLO, struct.pack("<I", version) + payload[4:], seq=0)


def sstr(text: str | bytes) -> bytes:
    data = text.encode() if isinstance(text, str) else text
    return struct.pack("<I", len(data)) + data


def call_by_name(name: str, *values: bytes) -> bytes:
    return b"\0" + sstr(name) + struct.pack("<I", len(values)) + b"".join(values)


def parse_frames(data: bytes) -> list[tuple[int, bytes]]:
    """(kind, payload) of every frame in ``data``; asserts they are well formed."""
    out = []
    while data:
        assert len(data) >= HEADER.size, f"a truncated frame header: {data!r}"
        magic, kind, _flags, _seq, length = HEADER.unpack(data[:HEADER.size])
        assert magic == MAGIC and len(data) >= HEADER.size + length, data[:64]
        out.append((kind, data[HEADER.size:HEADER.size + length]))
        data = data[HEADER.size + length:]
    return out


def run_raw(program: Path, data: bytes, timeout: float = 30.0
            ) -> tuple[int, list[tuple[int, bytes]], str]:
    """Send ``data`` to a fresh device process and close its input: (exit status, the frames
    it answered, its stderr)."""
    proc = subprocess.run([str(program)], input=data, capture_output=True, timeout=timeout,
                          check=False)
    return proc.returncode, parse_frames(proc.stdout), proc.stderr.decode(errors="replace")


def error_text(payload: bytes) -> tuple[str, str]:
    """(type, message) of an ERROR payload."""
    n = struct.unpack_from("<I", payload)[0]
    kind = payload[4:4 + n].decode()
    m = struct.unpack_from("<I", payload, 4 + n)[0]
    return kind, payload[8 + n:8 + n + m].decode(errors="replace")
