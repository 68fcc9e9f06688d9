"""``rpc.test.*``: small server-side functions that tests call through a session.

Registered in every process that imports ``ember.runtime.rpc`` (servers included), as the
Relay-era ``tvm.rpc.testing`` did; they only compute on their arguments.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from ..ndarray import NDArray, array
from ..registry import register_func


def _addone(x: float) -> int | float:
    return x + 1


def _strcat(name: str, x: int) -> str:
    return f"{name}:{x}"


def _raise(message: str) -> None:
    raise ValueError(message)


def _add_to_lhs(x: Any) -> Callable[[Any], Any]:
    return lambda y: x + y


def _sleep(seconds: float) -> float:
    time.sleep(min(float(seconds), 600.0))
    return float(seconds)


def _array_sum(arr: NDArray) -> float:
    return float(arr.numpy().sum())


def _array_add_one(arr: NDArray) -> NDArray:
    return array(arr.numpy() + 1)


def _ones(n: int, dtype: str = "float32") -> NDArray:
    return array(np.ones(int(n), dtype))


def _echo_all(*args: Any) -> list[Any]:
    return list(args)


_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "rpc.test.addone": _addone,
    "rpc.test.strcat": _strcat,
    "rpc.test.except": _raise,
    "rpc.test.add_to_lhs": _add_to_lhs,
    "rpc.test.sleep": _sleep,
    "rpc.test.array_sum": _array_sum,
    "rpc.test.array_add_one": _array_add_one,
    "rpc.test.ones": _ones,
    "rpc.test.echo_all": _echo_all,
    "rpc.test.runtime_str_concat": lambda x, y: x + y,
}

for _name, _func in _FUNCTIONS.items():
    register_func(_name, _func, override=True)
