"""C literals the backends' generated sources share: strings, and byte arrays in
``.rodata.tvm`` (AOT's linked constants and constant pools, the graph executor's linked
params, the system-lib registry's module name)."""
from __future__ import annotations

import numpy as np

from ...tir.codegen_c import c_string  # noqa: F401 (the backends' C strings, as kernels')


_HEX = np.frombuffer(b"0123456789abcdef", np.uint8)


def c_bytes_literal(data: bytes, per_line: int = 32) -> str:
    """``data`` as C string literal lines of ``\\xNN`` escapes (every byte escaped, so none
    runs into the next), built with numpy: weights are megabytes."""
    raw = np.frombuffer(data, np.uint8)
    rows = -(-len(raw) // per_line) or 1
    esc = np.zeros((rows * per_line, 4), np.uint8)
    esc[:, 0], esc[:, 1] = ord("\\"), ord("x")
    esc[:len(raw), 2], esc[:len(raw), 3] = _HEX[raw >> 4], _HEX[raw & 15]
    grid = np.zeros((rows, 3 + per_line * 4 + 2), np.uint8)
    grid[:, :3] = np.frombuffer(b'  "', np.uint8)
    grid[:, 3:-2] = esc.reshape(rows, per_line * 4)
    grid[:, -2:] = np.frombuffer(b'"\n', np.uint8)
    text = grid.tobytes().decode("ascii")
    tail = len(raw) - (rows - 1) * per_line  # bytes on the last line
    cut = len(text) - (per_line - tail) * 4 - 2  # drop the padding and the last '"\n'
    return text[:cut] + '"'


def rodata_array(name: str, data: bytes, align: int) -> list[str]:
    """``static const unsigned char name[]`` in ``.rodata.tvm``, aligned to ``align``, holding
    ``data`` as a string literal (exact, and far faster to compile than a list of numbers;
    +1 for its NUL)."""
    return [f"static const unsigned char {name}[{len(data) + 1}] "
            f'__attribute__((section(".rodata.tvm"), aligned({align}))) =',
            c_bytes_literal(data) + ";"]
