"""``relay.random``: counter-based random numbers with explicit keys, as in the Relay era.

    key = random.threefry_key(0)                       # uint64 (10,), a constant
    key, bits = random.threefry_generate(key, (3, 4))  # the next key, uint64 (3, 4)
    left, right = random.threefry_split(key)           # two independent keys
    key, u = random.uniform(key, (5,), "float32", low=-1.0, high=1.0)   # [low, high)
    key, z = random.normal(key, (5,), "float32", mean=0.0, scale=2.0)
    key, idx = random.multinomial(key, probs, num_samples=4)            # int32 (..., 4)

Every op takes a key and returns the key to use next, so a program is a pure function of its
inputs: the same key gives the same numbers on every executor and every run.

The generator is not Threefry (the names are kept so Relay-era programs run unchanged): number
``i`` of a key is SplitMix64's, ``mix(stream + (counter + i + 1) * golden)``, with ``mix`` in
C (``ember/include/ember/kernels/random.h``: the loop-level IR has no xor or shifts) and in
numpy for the reference. Key layout: ``key[0]`` the stream, ``key[1]`` how many numbers it
has given, the rest zero. Values therefore differ from TVM's Threefry, as they do between any
two generators.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import numpy as np

from ...ir.expr import RelayExpr, const
from ...ir.types import TensorType, TupleType, Type
from ...te import tensor as te
from ...tir import op as tir
from ...tir.expr import PrimExpr
from ._attrs_base import OpAttrs, attrs_class
from ._reg import OPAQUE, call, defop
from ._shape import fail, tensor_of
from ._tuple import TupleWrapper

__all__ = ["multinomial", "normal", "threefry_generate", "threefry_key", "threefry_split",
           "uniform"]
U64 = "uint64"
KEY_SIZE = 10
GOLDEN, MUL1, MUL2 = 0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB
SPLIT_LEFT, SPLIT_RIGHT = 0x243F6A8885A308D3, 0x13198A2E03707344  # digits of pi: two streams


HEADER = "ember/kernels/random.h"


def _np_mix(z: Any) -> np.ndarray:
    """SplitMix64's finaliser (``ember_splitmix64`` in the header) on uint64 arrays."""
    z = np.asarray(z, U64)
    with np.errstate(over="ignore"):
        z = (z ^ (z >> np.uint64(30))) * np.uint64(MUL1)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(MUL2)
        return z ^ (z >> np.uint64(31))


def _te_mix(z: PrimExpr) -> PrimExpr:
    return tir.call_extern(U64, "ember_splitmix64", z, header=HEADER)


def _np_bits(key: np.ndarray, count: int, skip: int = 0) -> np.ndarray:
    """The ``count`` numbers after the first ``skip`` that ``key`` gives."""
    with np.errstate(over="ignore"):
        i = np.arange(skip + 1, skip + count + 1, dtype=U64)
        return _np_mix(key[0] + (key[1] + i) * np.uint64(GOLDEN))


def _te_bits(key: te.Tensor, i: PrimExpr) -> PrimExpr:
    counter = key(1) + tir.cast(i, U64) + tir.const(1, U64)
    return _te_mix(key(0) + counter * tir.const(GOLDEN, U64))


def _np_next_key(key: np.ndarray, used: int) -> np.ndarray:
    out = key.copy()
    with np.errstate(over="ignore"):
        out[1] += np.uint64(used)
    return out


def _te_next_key(key: te.Tensor, used: int) -> te.Tensor:
    return te.compute((KEY_SIZE,), lambda k: tir.Select_(
        k == 1, key(1) + tir.const(used, U64), key(k)), name="T_random_next_key",
        tag="injective")


def threefry_key(seed: int) -> RelayExpr:
    """A new key (a uint64 (10,) constant) for ``seed``."""
    if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool):
        raise TypeError(f"random.threefry_key: seed must be an int, got {seed!r}")
    key = np.zeros(KEY_SIZE, U64)
    key[0] = _np_mix(np.uint64(int(seed) % 2**64))
    return const(key)


def _check_key(op: str, key: TensorType) -> None:
    if key.dtype != U64 or tuple(key.shape) != (KEY_SIZE,):
        raise fail(op, f"key must be uint64[{KEY_SIZE}] (from random.threefry_key), got "
                       f"{key.dtype}{list(key.shape)}")


def _size(shape: Sequence[int]) -> int:
    return int(np.prod(shape, dtype=np.int64))


def _unravel(shape: Sequence[Any], idx: Sequence[PrimExpr]) -> PrimExpr:
    flat: PrimExpr = tir.const(0)
    for d, i in zip(shape, idx):
        flat = flat * tir.const(int(d)) + i
    return flat


KEY_T = tensor_of((KEY_SIZE,), U64)


# ------------------------------------------------------------------ threefry_generate / split
@attrs_class("ThreefryGenerateAttrs")
class ThreefryGenerateAttrs(OpAttrs):
    """random.threefry_generate: the shape of the random bits."""

    out_shape: tuple[int, ...] = ()
    _op: ClassVar[str] = "random.threefry_generate"

    def __post_init__(self) -> None:
        self._ints("out_shape")
        self._positive("out_shape", allow_zero=True)


def _generate_rel(args: list[TensorType], attrs: ThreefryGenerateAttrs) -> Type:
    _check_key("random.threefry_generate", args[0])
    return TupleType((KEY_T, tensor_of(attrs.out_shape, U64)))


def _generate_ref(key: np.ndarray, attrs: ThreefryGenerateAttrs) -> tuple[np.ndarray, ...]:
    n = _size(attrs.out_shape)
    return _np_next_key(key, n), _np_bits(key, n).reshape(attrs.out_shape)


def _generate_compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    key, shape = inputs[0], attrs.out_shape
    bits = te.compute(shape, lambda *i: _te_bits(key, _unravel(shape, i)),
                      name="T_random_bits", tag="injective")
    return [_te_next_key(key, _size(shape)), bits]


defop("random.threefry_generate", _generate_rel, _generate_ref, OPAQUE, args=("key",),
      attrs=ThreefryGenerateAttrs, compute=_generate_compute,
      doc="The next key and uint64 random bits of out_shape.")


def _split_rel(args: list[TensorType], attrs: Any) -> Type:
    _check_key("random.threefry_split", args[0])
    return TupleType((KEY_T, KEY_T))


def _split_ref(key: np.ndarray, attrs: Any) -> tuple[np.ndarray, np.ndarray]:
    with np.errstate(over="ignore"):
        base = key[0] + key[1] * np.uint64(GOLDEN)
        return tuple(np.array([_np_mix(base + np.uint64(s))] + [0] * (KEY_SIZE - 1), U64)
                     for s in (SPLIT_LEFT, SPLIT_RIGHT))  # type: ignore[return-value]


def _split_compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    key = inputs[0]

    def child(salt: int) -> te.Tensor:
        base = key(0) + key(1) * tir.const(GOLDEN, U64) + tir.const(salt, U64)
        return te.compute((KEY_SIZE,), lambda k: tir.Select_(
            k == 0, _te_mix(base), tir.const(0, U64)), name="T_random_split", tag="injective")
    return [child(SPLIT_LEFT), child(SPLIT_RIGHT)]


defop("random.threefry_split", _split_rel, _split_ref, OPAQUE, args=("key",),
      compute=_split_compute, doc="Two independent keys from one.")


# ------------------------------------------------------------------ uniform / normal
@attrs_class("RandomDistributionAttrs")
class DistributionAttrs(OpAttrs):
    """random.uniform / random.normal: the shape and float dtype of the values."""

    out_shape: tuple[int, ...] = ()
    out_dtype: str = "float32"
    _op: ClassVar[str] = "random.uniform/normal"

    def __post_init__(self) -> None:
        self._ints("out_shape")
        self._positive("out_shape", allow_zero=True)
        self._dtype("out_dtype")
        if self.out_dtype not in ("float32", "float64"):
            raise self._invalid("out_dtype", "float32 or float64")


def _distribution_rel(name: str) -> Callable[[list[TensorType], DistributionAttrs], Type]:
    def rel(args: list[TensorType], attrs: DistributionAttrs) -> Type:
        _check_key(name, args[0])
        for arg, what in zip(args[1:], ("low/mean", "high/scale")):
            if arg.shape != () or arg.dtype != attrs.out_dtype:
                raise fail(name, f"{what} must be a {attrs.out_dtype} scalar, got "
                                 f"{arg.dtype}{list(arg.shape)}")
        return TupleType((KEY_T, tensor_of(attrs.out_shape, attrs.out_dtype)))
    return rel


def _np_unit(bits: np.ndarray, dtype: str) -> np.ndarray:
    """Bits to [0, 1): the top 24 (float32) or 53 (float64) bits, scaled."""
    keep = 24 if dtype == "float32" else 53
    return ((bits >> np.uint64(64 - keep)).astype(dtype) * np.asarray(2.0**-keep, dtype))


def _te_unit(bits: PrimExpr, dtype: str) -> PrimExpr:
    keep = 24 if dtype == "float32" else 53
    top = tir.div(bits, tir.const(2 ** (64 - keep), U64))
    return tir.cast(top, dtype) * tir.const(2.0**-keep, dtype)


def _uniform_ref(key: np.ndarray, low: np.ndarray, high: np.ndarray, attrs: DistributionAttrs
                 ) -> tuple[np.ndarray, np.ndarray]:
    n = _size(attrs.out_shape)
    u = _np_unit(_np_bits(key, n), attrs.out_dtype).reshape(attrs.out_shape)
    return _np_next_key(key, n), (low + (high - low) * u).astype(attrs.out_dtype)


def _uniform_compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    key, low, high = inputs
    shape, dtype = attrs.out_shape, attrs.out_dtype

    def value(*i: PrimExpr) -> PrimExpr:
        u = _te_unit(_te_bits(key, _unravel(shape, i)), dtype)
        return low() + (high() - low()) * u
    values = te.compute(shape, value, name="T_random_uniform", tag="injective")
    return [_te_next_key(key, _size(shape)), values]


def _normal_ref(key: np.ndarray, mean: np.ndarray, scale: np.ndarray, attrs: DistributionAttrs
                ) -> tuple[np.ndarray, np.ndarray]:
    n, dtype = _size(attrs.out_shape), attrs.out_dtype
    u = _np_unit(_np_bits(key, 2 * n), dtype).reshape(n, 2)  # Box-Muller: two per value
    radius = np.sqrt(np.asarray(-2, dtype) * np.log(np.asarray(1, dtype) - u[:, 0]))
    z = radius * np.cos(np.asarray(2 * math.pi, dtype) * u[:, 1])
    return _np_next_key(key, 2 * n), (mean + scale * z.reshape(attrs.out_shape)).astype(dtype)


def _normal_compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    key, mean, scale = inputs
    shape, dtype = attrs.out_shape, attrs.out_dtype

    def value(*i: PrimExpr) -> PrimExpr:
        flat = _unravel(shape, i) * tir.const(2)
        u1 = _te_unit(_te_bits(key, flat), dtype)
        u2 = _te_unit(_te_bits(key, flat + tir.const(1)), dtype)
        radius = tir.sqrt(tir.const(-2.0, dtype) * tir.log(tir.const(1.0, dtype) - u1))
        return mean() + scale() * radius * tir.cos(tir.const(2 * math.pi, dtype) * u2)
    values = te.compute(shape, value, name="T_random_normal", tag="injective")
    return [_te_next_key(key, 2 * _size(shape)), values]


defop("random.uniform", _distribution_rel("random.uniform"), _uniform_ref, OPAQUE,
      args=("key", "low", "high"), attrs=DistributionAttrs, compute=_uniform_compute,
      doc="The next key and values uniform in [low, high).")
defop("random.normal", _distribution_rel("random.normal"), _normal_ref, OPAQUE,
      args=("key", "mean", "scale"), attrs=DistributionAttrs, compute=_normal_compute,
      doc="The next key and normally distributed values (Box-Muller).")


# ------------------------------------------------------------------ multinomial
@attrs_class("MultinomialAttrs")
class MultinomialAttrs(OpAttrs):
    """random.multinomial: how many draws per distribution."""

    num_samples: int = 1
    _op: ClassVar[str] = "random.multinomial"

    def __post_init__(self) -> None:
        self._int("num_samples")
        self._positive("num_samples")


def _multinomial_rel(args: list[TensorType], attrs: MultinomialAttrs) -> Type:
    key, probs = args
    _check_key("random.multinomial", key)
    if probs.ndim not in (1, 2) or not all(isinstance(d, int) for d in probs.shape):
        raise fail("random.multinomial", "probs must be a 1-D or 2-D tensor of static shape, "
                                         f"got {probs.dtype}{list(probs.shape)}")
    if probs.dtype not in ("float32", "float64"):
        raise fail("random.multinomial", f"probs must be float32 or float64, got {probs.dtype}")
    return TupleType((KEY_T, tensor_of((*probs.shape[:-1], attrs.num_samples), "int32")))


def _multinomial_ref(key: np.ndarray, probs: np.ndarray, attrs: MultinomialAttrs
                     ) -> tuple[np.ndarray, np.ndarray]:
    rows = probs.reshape(-1, probs.shape[-1])
    n = rows.shape[0] * attrs.num_samples
    u = _np_unit(_np_bits(key, n), probs.dtype).reshape(rows.shape[0], attrs.num_samples)
    cdf = np.cumsum(rows, axis=1)
    target = u * cdf[:, -1:]
    idx = (cdf[:, None, :] <= target[:, :, None]).sum(-1)
    idx = np.minimum(idx, rows.shape[1] - 1).astype("int32")
    return _np_next_key(key, n), idx.reshape(*probs.shape[:-1], attrs.num_samples)


def _multinomial_compute(attrs: Any, inputs: list[te.Tensor], out_type: Type
                         ) -> list[te.Tensor]:
    key, probs = inputs
    dims = [int(d.value) for d in probs.shape]  # type: ignore[attr-defined]
    batch, classes, samples = dims[:-1], dims[-1], attrs.num_samples

    def cumulative(*i: PrimExpr) -> PrimExpr:
        t = te.reduce_axis((0, classes), "t")
        return te.sum(tir.Select_(t.var <= i[-1], probs(*i[:-1], t.var),
                                  tir.const(0, probs.dtype)), axis=[t])
    cdf = te.compute(probs.shape, cumulative, name="T_multinomial_cdf", tag="comm_reduce")

    def draw(*i: PrimExpr) -> PrimExpr:
        row = _unravel(batch, i[:-1]) if batch else tir.const(0)
        u = _te_unit(_te_bits(key, row * tir.const(samples) + i[-1]), probs.dtype)
        target = u * cdf(*i[:-1], tir.const(classes - 1))
        j = te.reduce_axis((0, classes), "j")
        return te.sum(tir.Select_(cdf(*i[:-1], j.var) <= target, tir.const(1), tir.const(0)),
                      axis=[j])
    shape = (*batch, samples)
    count = te.compute(shape, draw, name="T_multinomial_count", tag="comm_reduce")
    idx = te.compute(shape, lambda *i: tir.min(count(*i), tir.const(classes - 1)),
                     name="T_multinomial", tag="injective")
    return [_te_next_key(key, _size(shape)), idx]


defop("random.multinomial", _multinomial_rel, _multinomial_ref, OPAQUE, args=("key", "probs"),
      attrs=MultinomialAttrs, compute=_multinomial_compute,
      doc="The next key and num_samples category indices per row of (unnormalised) probs.")


# ------------------------------------------------------------------ API
def threefry_generate(key: RelayExpr, shape: Sequence[int]) -> TupleWrapper:
    """(the next key, uint64 random bits of ``shape``)."""
    attrs = ThreefryGenerateAttrs(out_shape=tuple(shape))
    return TupleWrapper(call("random.threefry_generate", key, attrs=attrs), 2)


def threefry_split(key: RelayExpr) -> TupleWrapper:
    """Two new keys whose streams are independent of each other and of ``key``'s."""
    return TupleWrapper(call("random.threefry_split", key), 2)


def _scalar(value: Any, dtype: str) -> RelayExpr:
    return value if isinstance(value, RelayExpr) else const(np.array(value, dtype))


def uniform(key: RelayExpr, shape: Sequence[int], dtype: str = "float32", low: Any = 0.0,
            high: Any = 1.0) -> TupleWrapper:
    """(the next key, ``dtype`` values of ``shape`` uniform in [low, high))."""
    attrs = DistributionAttrs(out_shape=tuple(shape), out_dtype=dtype)
    return TupleWrapper(call("random.uniform", key, _scalar(low, dtype), _scalar(high, dtype),
                             attrs=attrs), 2)


def normal(key: RelayExpr, shape: Sequence[int], dtype: str = "float32", mean: Any = 0.0,
           scale: Any = 1.0) -> TupleWrapper:
    """(the next key, ``dtype`` values of ``shape`` from N(mean, scale^2))."""
    attrs = DistributionAttrs(out_shape=tuple(shape), out_dtype=dtype)
    return TupleWrapper(call("random.normal", key, _scalar(mean, dtype), _scalar(scale, dtype),
                             attrs=attrs), 2)


def multinomial(key: RelayExpr, probs: RelayExpr, num_samples: int = 1) -> TupleWrapper:
    """(the next key, int32 (..., num_samples) indices drawn from each row of ``probs``:
    non-negative weights of the categories along the last axis, not necessarily summing
    to 1)."""
    attrs = MultinomialAttrs(num_samples=num_samples)
    return TupleWrapper(call("random.multinomial", key, probs, attrs=attrs), 2)
