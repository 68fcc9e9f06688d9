"""Attribute records of the ``nn.*`` operators (Relay's names, fields and defaults).

Window attributes are normalised as Relay does: strides/dilation/pool_size/kernel_size become
2-tuples, padding becomes 4 values (top, left, bottom, right): one value pads all sides, two
values are (height, width).
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import permutations
from typing import ClassVar

from ..attrs import OpAttrs, attrs_class

_DATA_LAYOUTS = tuple("".join(p) for p in permutations("NCHW"))
_KERNEL_LAYOUTS = tuple("".join(p) for p in permutations("OIHW"))


class _Window(OpAttrs):
    """Shared normalisation of the 2-D window attributes."""

    __slots__ = ()

    def _pair(self, name: str, optional: bool = False, allow_zero: bool = False) -> None:
        self._ints(name, length=(1, 2), optional=optional)
        value = getattr(self, name)
        if value is not None:
            self._set(name, value * 2 if len(value) == 1 else value)
            self._positive(name, allow_zero=allow_zero)

    def _padding(self, name: str = "padding") -> None:
        self._ints(name, length=(1, 2, 4))
        p = getattr(self, name)
        self._set(name, p * 4 if len(p) == 1 else p * 2 if len(p) == 2 else p)
        self._positive(name, allow_zero=True)

    def _layout(self, name: str, choices: tuple[str, ...], allow_empty: bool = False) -> None:
        value = getattr(self, name)
        if not (allow_empty and value == "") and value not in choices:
            raise self._invalid(name, f"a permutation of {choices[0]}"
                                + (" (or '' for the default)" if allow_empty else ""))

    def _pool_layout(self, name: str) -> None:
        from .._layout import Layout

        value = getattr(self, name)
        try:
            letters = [a for a, _ in Layout.parse(value).axes]
        except ValueError:
            letters = []
        if not {"H", "W"} <= set(letters) or {"h", "w"} & set(letters):
            raise self._invalid(name, "a layout with unsplit H and W axes, e.g. NCHW or NHWC")


@attrs_class("Conv2DAttrs")
class Conv2DAttrs(_Window):
    """nn.conv2d. ``channels``/``kernel_size``, when given, must match the weight."""

    strides: tuple[int, int] = (1, 1)
    padding: tuple[int, int, int, int] = (0, 0, 0, 0)
    dilation: tuple[int, int] = (1, 1)
    groups: int = 1
    channels: int | None = None
    kernel_size: tuple[int, int] | None = None
    data_layout: str = "NCHW"
    kernel_layout: str = "OIHW"
    out_layout: str = ""
    out_dtype: str = ""
    _op: ClassVar[str] = "nn.conv2d"

    def __post_init__(self) -> None:
        self._pair("strides")
        self._pair("dilation")
        self._padding()
        self._int("groups")
        self._positive("groups")
        self._int("channels", optional=True)
        self._pair("kernel_size", optional=True)
        self._layout("data_layout", _DATA_LAYOUTS)
        self._layout("kernel_layout", _KERNEL_LAYOUTS)
        self._layout("out_layout", _DATA_LAYOUTS, allow_empty=True)
        self._dtype("out_dtype", allow_empty=True)


@attrs_class("Conv2DTransposeAttrs")
class Conv2DTransposeAttrs(_Window):
    """nn.conv2d_transpose; the weight is (in_channels, out_channels / groups, kh, kw) in IOHW."""

    channels: int | None = None
    kernel_size: tuple[int, int] | None = None
    strides: tuple[int, int] = (1, 1)
    padding: tuple[int, int, int, int] = (0, 0, 0, 0)
    output_padding: tuple[int, int] = (0, 0)
    dilation: tuple[int, int] = (1, 1)
    groups: int = 1
    data_layout: str = "NCHW"
    kernel_layout: str = "IOHW"
    out_layout: str = ""
    out_dtype: str = ""
    _op: ClassVar[str] = "nn.conv2d_transpose"

    def __post_init__(self) -> None:
        self._int("channels", optional=True)
        self._pair("kernel_size", optional=True)
        self._pair("strides")
        self._padding()
        self._pair("output_padding", allow_zero=True)
        self._pair("dilation")
        self._int("groups")
        self._positive("groups")
        self._layout("data_layout", _DATA_LAYOUTS)
        self._layout("kernel_layout", _KERNEL_LAYOUTS)
        self._layout("out_layout", _DATA_LAYOUTS, allow_empty=True)
        self._dtype("out_dtype", allow_empty=True)


@attrs_class("DenseAttrs")
class DenseAttrs(OpAttrs):
    """nn.dense: ``units`` (must match the weight when given) and the output dtype."""

    units: int | None = None
    out_dtype: str = ""
    _op: ClassVar[str] = "nn.dense"

    def __post_init__(self) -> None:
        self._int("units", optional=True)
        self._dtype("out_dtype", allow_empty=True)


@attrs_class("MatmulAttrs")
class MatmulAttrs(OpAttrs):
    """nn.matmul: dense with explicit transposes (dense is transpose_b=True)."""

    units: int | None = None
    out_dtype: str = ""
    transpose_a: bool = False
    transpose_b: bool = False
    _op: ClassVar[str] = "nn.matmul"

    def __post_init__(self) -> None:
        self._int("units", optional=True)
        self._dtype("out_dtype", allow_empty=True)
        self._bool("transpose_a", "transpose_b")


@attrs_class("BatchMatmulAttrs")
class BatchMatmulAttrs(OpAttrs):
    """nn.batch_matmul: by default y is (batch, N, K) (transpose_b=True), as in Relay."""

    out_dtype: str = ""
    transpose_a: bool = False
    transpose_b: bool = True
    _op: ClassVar[str] = "nn.batch_matmul"

    def __post_init__(self) -> None:
        self._dtype("out_dtype", allow_empty=True)
        self._bool("transpose_a", "transpose_b")


@attrs_class("BiasAddAttrs")
class BiasAddAttrs(OpAttrs):
    """nn.bias_add: the axis of data that the 1-D bias runs along."""

    axis: int = 1
    _op: ClassVar[str] = "nn.bias_add"

    def __post_init__(self) -> None:
        self._int("axis")


@attrs_class("LeakyReluAttrs")
class LeakyReluAttrs(OpAttrs):
    """nn.leaky_relu: the slope for negative inputs."""

    alpha: float = 0.01
    _op: ClassVar[str] = "nn.leaky_relu"

    def __post_init__(self) -> None:
        self._set("alpha", float(self.alpha))


@attrs_class("PReluAttrs")
class PReluAttrs(OpAttrs):
    """nn.prelu: the channel axis that the 1-D alpha runs along."""

    axis: int = 1
    _op: ClassVar[str] = "nn.prelu"

    def __post_init__(self) -> None:
        self._int("axis")


@attrs_class("SoftmaxAttrs")
class SoftmaxAttrs(OpAttrs):
    """nn.softmax / nn.log_softmax: the normalised axis."""

    axis: int = -1
    _op: ClassVar[str] = "nn.softmax"

    def __post_init__(self) -> None:
        self._int("axis")


@dataclass(frozen=True, slots=True)
class _Pool2DAttrs(_Window):
    """The fields and checks that max and average pooling share (not an op's record)."""

    pool_size: tuple[int, int] = (1, 1)
    strides: tuple[int, int] = (1, 1)
    dilation: tuple[int, int] = (1, 1)
    padding: tuple[int, int, int, int] = (0, 0, 0, 0)
    layout: str = "NCHW"
    out_layout: str = ""
    ceil_mode: bool = False

    def __post_init__(self) -> None:
        for name in ("pool_size", "strides", "dilation"):
            self._pair(name)
        self._padding()
        self._pool_layout("layout")
        self._bool("ceil_mode")


@attrs_class("MaxPool2DAttrs")
class MaxPool2DAttrs(_Pool2DAttrs):
    """nn.max_pool2d."""

    _op: ClassVar[str] = "nn.max_pool2d"


@attrs_class("AvgPool2DAttrs")
class AvgPool2DAttrs(_Pool2DAttrs):
    """nn.avg_pool2d; count_include_pad counts explicit padding in the divisor."""

    count_include_pad: bool = False
    _op: ClassVar[str] = "nn.avg_pool2d"

    def __post_init__(self) -> None:
        _Pool2DAttrs.__post_init__(self)  # (no zero-argument super() in a slotted dataclass)
        self._bool("count_include_pad")


@attrs_class("GlobalPool2DAttrs")
class GlobalPool2DAttrs(_Window):
    """nn.global_avg_pool2d / nn.global_max_pool2d."""

    layout: str = "NCHW"
    out_layout: str = ""
    _op: ClassVar[str] = "nn.global_pool2d"

    def __post_init__(self) -> None:
        self._pool_layout("layout")


@attrs_class("AdaptivePool2DAttrs")
class AdaptivePool2DAttrs(_Window):
    """nn.adaptive_avg_pool2d / max: output (height, width); None keeps the input size."""

    output_size: tuple[int, int] | None = None
    layout: str = "NCHW"
    out_layout: str = ""
    _op: ClassVar[str] = "nn.adaptive_pool2d"

    def __post_init__(self) -> None:
        self._pair("output_size", optional=True)
        self._pool_layout("layout")


@dataclass(frozen=True, slots=True)
class _NormAttrs(OpAttrs):
    """The fields and checks of batch_norm and layer_norm (not an op's record)."""

    axis: int = 1
    epsilon: float = 1e-5
    center: bool = True
    scale: bool = True

    def __post_init__(self) -> None:
        self._int("axis")
        self._set("epsilon", float(self.epsilon))
        self._bool("center", "scale")


@attrs_class("BatchNormAttrs")
class BatchNormAttrs(_NormAttrs):
    """nn.batch_norm: channel axis, epsilon, and whether beta (center) / gamma (scale) apply."""

    _op: ClassVar[str] = "nn.batch_norm"


@attrs_class("LayerNormAttrs")
class LayerNormAttrs(_NormAttrs):
    """nn.layer_norm: normalised axis, epsilon, center/scale."""

    axis: int = -1
    _op: ClassVar[str] = "nn.layer_norm"


@attrs_class("RmsNormAttrs")
class RmsNormAttrs(OpAttrs):
    """nn.rms_norm: normalised axis, epsilon, and whether gamma (scale) applies."""

    axis: int = -1
    epsilon: float = 1e-5
    scale: bool = True
    _op: ClassVar[str] = "nn.rms_norm"

    def __post_init__(self) -> None:
        self._int("axis")
        self._set("epsilon", float(self.epsilon))
        self._bool("scale")


@attrs_class("PadAttrs")
class PadAttrs(OpAttrs):
    """nn.pad: (before, after) per axis and the mode (constant, edge, reflect)."""

    pad_width: tuple[tuple[int, int], ...] = ()
    pad_mode: str = "constant"
    _op: ClassVar[str] = "nn.pad"

    def __post_init__(self) -> None:
        try:
            pairs = tuple((int(a), int(b)) for a, b in self.pad_width)
        except (TypeError, ValueError):
            raise self._invalid("pad_width", "a (before, after) pair per axis") from None
        if any(a < 0 or b < 0 for a, b in pairs):
            raise self._invalid("pad_width", "non-negative")
        self._set("pad_width", pairs)
        self._choice("pad_mode", ("constant", "edge", "reflect"))


@attrs_class("DropoutAttrs")
class DropoutAttrs(OpAttrs):
    """nn.dropout: the drop probability (inference is the identity)."""

    rate: float = 0.5
    _op: ClassVar[str] = "nn.dropout"

    def __post_init__(self) -> None:
        self._set("rate", float(self.rate))
        if not 0.0 <= self.rate < 1.0:
            raise self._invalid("rate", "in [0, 1)")


@attrs_class("UpSamplingAttrs")
class UpSamplingAttrs(OpAttrs):
    """nn.upsampling: scale factors, layout (NCHW/NHWC) and interpolation method."""

    scale_h: float = 1.0
    scale_w: float = 1.0
    layout: str = "NCHW"
    method: str = "nearest_neighbor"
    align_corners: bool = False
    _op: ClassVar[str] = "nn.upsampling"

    def __post_init__(self) -> None:
        for name in ("scale_h", "scale_w"):
            self._set(name, float(getattr(self, name)))
            if getattr(self, name) <= 0:
                raise self._invalid(name, "positive")
        from .._layout import nchwc_lanes

        if not nchwc_lanes(self.layout):  # NCHW<L>c: AlterOpLayout's blocked layout
            self._choice("layout", ("NCHW", "NHWC", "NCHW<L>c"))
        self._choice("method", ("nearest_neighbor", "bilinear", "bicubic"))
        self._bool("align_corners")
