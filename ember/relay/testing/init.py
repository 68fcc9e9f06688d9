"""Weight initialisers and ``create_workload``: turn a network into ``(mod, params)``.

A network is a ``relay.Function`` whose first parameter is the input ``data`` and whose other
parameters are weights, usually unannotated ``relay.var("conv1_weight")`` that InferType types
from the data and the ops' attributes. ``create_workload`` infers those types, annotates the
parameters with them (so the module prints, parses and binds without another inference) and
fills every weight with deterministic random values::

    mod, params = create_workload(net)                 # He-scaled Xavier weights, seed 0
    mod, params = create_workload(net, Constant(0.1))  # every weight 0.1

An initializer picks a rule from the end of the parameter's name, as MXNet and TVM's Relay
testing did: ``*weight`` -> the initializer's own rule, ``*bias``/``*beta``/``*mean`` -> 0,
``*gamma``/``*var`` -> 1. Batch-norm statistics stay (mean 0, var 1), so at inference every
batch norm is the identity plus its beta.

The default initializer is ``Xavier(factor_type="in", magnitude=6)`` (He initialisation):
each conv/dense + relu then keeps the size of its input, so a deep network's output depends
visibly on its input and weights (``Xavier()``'s magnitude 3 halves the variance at every
relu: after MobileNet's 27 layers every logit is ~1e-6 and the softmax exactly uniform). Fans
come from how ``main`` uses each weight (``InitDesc``), so grouped convolutions and HWIO
kernels get the right scale. Residual networks pick a smaller magnitude (``resnet``).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from typing_extensions import Self  # typing.Self is Python 3.11+

import numpy as np

from ...ir.expr import Call, Function, RelayExpr, Var, bind, var
from ...ir.module import IRModule
from ...ir.op import Op
from ...ir.types import TensorType
from ...ir.visitor import post_order
from ...runtime.ndarray import NDArray, array

__all__ = [
    "Constant",
    "InitDesc",
    "Initializer",
    "Normal",
    "Uniform",
    "Xavier",
    "create_workload",
]

# name suffix -> method; checked in this order (so "moving_var" is a var, not a weight).
_SUFFIX_RULES = (("weight", "_init_weight"), ("bias", "_init_bias"), ("gamma", "_init_gamma"),
                 ("beta", "_init_beta"), ("mean", "_init_mean"), ("var", "_init_var"))


class InitDesc(str):
    """A parameter's name (it *is* the name string) plus what its use says about it.

    ``fan_in``: how many inputs each output of the op using the weight sums over;
    ``fan_out``: how many outputs each input feeds. None when the weight is not the kernel of
    a conv2d, conv2d_transpose or dense in ``main`` (Xavier then reads the shape as (out, in,
    window...)). Knowing the use makes Xavier right for grouped/depthwise convolutions and for
    kernel layouts such as HWIO, where the shape alone misleads.
    """

    fan_in: float | None
    fan_out: float | None

    def __new__(cls, name: str, fan_in: float | None = None,
                fan_out: float | None = None) -> Self:
        desc = super().__new__(cls, name)
        desc.fan_in, desc.fan_out = fan_in, fan_out
        return desc


def fill_uniform(rng: np.random.Generator, arr: np.ndarray, low: float, high: float) -> None:
    """``arr[...] = uniform(low, high)``, drawn directly in float32/float64 (a VGG's 130M
    weights would otherwise go through a float64 temporary: 1 GB and seconds)."""
    if arr.dtype in (np.float32, np.float64) and arr.flags.c_contiguous:
        rng.random(dtype=arr.dtype, out=arr)
        arr *= arr.dtype.type(high - low)
        arr += arr.dtype.type(low)
    else:
        arr[...] = rng.uniform(low, high, size=arr.shape)


def fill_normal(rng: np.random.Generator, arr: np.ndarray, sigma: float) -> None:
    """``arr[...] = normal(0, sigma)``, drawn directly in float32/float64 where possible."""
    if arr.dtype in (np.float32, np.float64) and arr.flags.c_contiguous:
        rng.standard_normal(dtype=arr.dtype, out=arr)
        arr *= arr.dtype.type(sigma)
    else:
        arr[...] = rng.normal(0.0, sigma, size=arr.shape)


class Initializer:
    """Fills a parameter array in place, choosing a rule from the parameter's name.

    Subclasses override ``_init_weight(name, arr)`` and draw from ``self.rng`` (a numpy
    Generator that ``create_workload`` seeds). Raises ValueError for a name that matches no
    rule, naming it, rather than leaving the weight at zero without a word.
    """

    def __init__(self, **kwargs: Any) -> None:
        self._kwargs = kwargs
        self.rng = np.random.default_rng(0)

    def __call__(self, desc: str, arr: np.ndarray, rng: np.random.Generator | None = None) -> None:
        if rng is not None:
            self.rng = rng
        for suffix, method in _SUFFIX_RULES:
            if desc.endswith(suffix):
                getattr(self, method)(desc, arr)
                return
        self._init_default(desc, arr)

    def dumps(self) -> str:
        """The initializer's name and arguments, e.g. ``xavier(magnitude=3, ...)``."""
        args = ", ".join(f"{k}={v!r}" for k, v in self._kwargs.items())
        return f"{type(self).__name__.lower()}({args})"

    def _init_bias(self, _: str, arr: np.ndarray) -> None:
        arr[...] = 0.0

    def _init_gamma(self, _: str, arr: np.ndarray) -> None:
        arr[...] = 1.0

    def _init_beta(self, _: str, arr: np.ndarray) -> None:
        arr[...] = 0.0

    def _init_mean(self, _: str, arr: np.ndarray) -> None:
        arr[...] = 0.0

    def _init_var(self, _: str, arr: np.ndarray) -> None:
        arr[...] = 1.0  # positive, so sqrt(var + eps) in batch_norm stays finite

    def _init_weight(self, name: str, arr: np.ndarray) -> None:
        raise NotImplementedError(f"{type(self).__name__}: no rule for weight {name!r}")

    def _init_default(self, name: str, arr: np.ndarray) -> None:
        raise ValueError(f"{type(self).__name__}: parameter {name!r} has no initialisation "
                         "rule; names must end in weight, bias, gamma, beta, mean or var")


class Constant(Initializer):
    """Every weight (``*weight``) set to ``value``; biases and norms as in Initializer."""

    def __init__(self, value: float) -> None:
        super().__init__(value=value)
        self.value = value

    def _init_weight(self, _: str, arr: np.ndarray) -> None:
        arr[...] = self.value


class Uniform(Initializer):
    """Weights drawn uniformly from ``[-scale, scale]``."""

    def __init__(self, scale: float = 0.07) -> None:
        super().__init__(scale=scale)
        self.scale = scale

    def _init_weight(self, _: str, arr: np.ndarray) -> None:
        fill_uniform(self.rng, arr, -self.scale, self.scale)


class Normal(Initializer):
    """Weights drawn from a normal distribution with mean 0 and standard deviation ``sigma``."""

    def __init__(self, sigma: float = 0.01) -> None:
        super().__init__(sigma=sigma)
        self.sigma = sigma

    def _init_weight(self, _: str, arr: np.ndarray) -> None:
        fill_normal(self.rng, arr, self.sigma)


class Xavier(Initializer):
    """Glorot initialisation: weights of variance ``magnitude / (3 * factor)``.

    ``factor`` is the fan-in, the fan-out or their mean (``factor_type`` "in", "out", "avg").
    The fans come from the InitDesc when ``create_workload`` found the weight's use, else from
    the shape read as (out, in, window...): ``shape[1] * prod(shape[2:])`` and
    ``shape[0] * prod(shape[2:])``;
    ``rnd_type`` is "uniform" (on ``[-s, s]``, ``s = sqrt(magnitude / factor)``) or "gaussian"
    (standard deviation ``s``). Raises ValueError for a weight of rank < 2 or a bad option.
    """

    def __init__(self, rnd_type: str = "uniform", factor_type: str = "avg",
                 magnitude: float = 3) -> None:
        if rnd_type not in ("uniform", "gaussian"):
            raise ValueError(f"Xavier: rnd_type must be 'uniform' or 'gaussian', got {rnd_type!r}")
        if factor_type not in ("avg", "in", "out"):
            raise ValueError(f"Xavier: factor_type must be 'avg', 'in' or 'out', "
                             f"got {factor_type!r}")
        super().__init__(rnd_type=rnd_type, factor_type=factor_type, magnitude=magnitude)
        self.rnd_type, self.factor_type, self.magnitude = rnd_type, factor_type, float(magnitude)

    def _init_weight(self, name: str, arr: np.ndarray) -> None:
        if arr.ndim < 2:
            raise ValueError(f"Xavier: weight {name!r} has shape {arr.shape}; Xavier needs "
                             "rank >= 2 (out, in, ...)")
        fan_in, fan_out = getattr(name, "fan_in", None), getattr(name, "fan_out", None)
        if fan_in is None or fan_out is None:
            window = float(np.prod(arr.shape[2:])) if arr.ndim > 2 else 1.0
            fan_in, fan_out = arr.shape[1] * window, arr.shape[0] * window
        factor = {"avg": (fan_in + fan_out) / 2.0, "in": fan_in, "out": fan_out}[self.factor_type]
        scale = np.sqrt(self.magnitude / factor)
        if self.rnd_type == "uniform":
            fill_uniform(self.rng, arr, -scale, scale)
        else:
            fill_normal(self.rng, arr, scale)


def default_initializer() -> Initializer:
    """He initialisation: Xavier with var ``2 / fan_in``, which a relu halves back to
    ``1 / fan_in``, so plain conv/dense + relu stacks keep their activations' size."""
    return Xavier(rnd_type="uniform", factor_type="in", magnitude=6)


def _kernel_fans(call: Call, shape: tuple[int, ...]) -> tuple[float, float] | None:
    """(fan_in, fan_out) of the weight ``shape`` used as argument 1 of ``call``."""
    assert isinstance(call.op, Op), "only op calls are described"
    name, attrs = call.op.name, cast(Any, call.attrs)
    if name == "nn.dense" and len(shape) == 2:
        return float(shape[1]), float(shape[0])
    if name not in ("nn.conv2d", "nn.conv2d_transpose") or len(shape) != 4:
        return None
    dims = {a: shape[attrs.kernel_layout.index(a)] for a in "OIHW"}
    window = float(dims["H"] * dims["W"])
    if name == "nn.conv2d":  # O = all outputs, I = inputs of one group
        return dims["I"] * window, dims["O"] / attrs.groups * window
    # conv2d_transpose: I = all inputs, O = outputs of one group; a strided transposed conv
    # reaches each output from only window / (sh * sw) taps of each input channel.
    strided = window / (attrs.strides[0] * attrs.strides[1])
    return dims["I"] / attrs.groups * strided, dims["O"] * window


def _describe_params(func: Function) -> dict[Var, InitDesc]:
    """An InitDesc for each parameter, with fans where main uses it as a kernel."""
    fans: dict[Var, tuple[float, float]] = {}
    for node in post_order(func.body):
        if (isinstance(node, Call) and isinstance(node.op, Op) and len(node.args) > 1
                and isinstance(node.args[1], Var) and node.args[1] not in fans):
            ty = node.args[1].checked_type
            shape = _static_shape(ty)
            found = _kernel_fans(node, shape) if shape is not None else None
            if found is not None:
                fans[node.args[1]] = found
    return {p: InitDesc(p.name_hint, *fans.get(p, (None, None))) for p in func.params}


def _annotate_params(func: Function) -> Function:
    """``func`` with every unannotated parameter annotated with its inferred type."""
    binds: dict[Var, RelayExpr] = {}
    params = []
    for p in func.params:
        if p.type_annotation is None:
            binds[p] = new = var(p.name_hint, type_annotation=p.checked_type)
            params.append(new)
        else:
            params.append(p)
    if not binds:
        return func
    return Function(tuple(params), bind(func.body, binds), func.ret_type, func.type_params,
                    func.attrs, span=func.span)


def _static_shape(ty: Any) -> tuple[int, ...] | None:
    """The shape of a tensor type whose dimensions are all integers, else None."""
    dims = ty.shape if isinstance(ty, TensorType) else ()
    ints = tuple(d for d in dims if isinstance(d, int))
    return ints if isinstance(ty, TensorType) and len(ints) == len(dims) else None


def _concrete_shape(name: str, ty: Any) -> tuple[int, ...]:
    shape = _static_shape(ty)
    if shape is None:
        raise ValueError(f"create_workload: parameter {name!r} has type {ty}; weights need a "
                         "tensor type with a static shape")
    return shape


def create_workload(net: Function | IRModule, initializer: Initializer | None = None,
                    seed: int = 0) -> tuple[IRModule, dict[str, NDArray]]:
    """Type ``net`` and give every parameter except ``data`` a deterministic random value.

    ``net`` is a Function (becoming ``main``) or an IRModule with a ``main``; ``initializer``
    defaults to ``default_initializer()`` (He-scaled Xavier), drawing from a numpy Generator
    seeded with ``seed``. Returns
    ``(mod, params)``: the typed module, whose ``main`` parameters are annotated with their
    types, and ``name -> NDArray`` in parameter order. The same seed gives identical params.
    Raises ValueError for a weight without a static tensor type or an initialisation rule.
    """
    from ..transform import InferType

    mod = IRModule.from_expr(net) if isinstance(net, Function) else net
    mod = InferType()(mod)
    main = _annotate_params(mod["main"])
    mod = mod.copy()
    mod["main"] = main
    mod = InferType()(mod)
    initializer = initializer if initializer is not None else default_initializer()
    rng = np.random.default_rng(seed)
    params: dict[str, NDArray] = {}
    descs = _describe_params(mod["main"])
    for p in mod["main"].params:
        if p.name_hint == "data":
            continue
        ty = p.checked_type
        arr = np.zeros(_concrete_shape(p.name_hint, ty), dtype=ty.dtype)
        initializer(descs[p], arr, rng)
        params[p.name_hint] = array(arr)
    return mod, params
