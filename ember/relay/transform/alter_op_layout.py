"""AlterOpLayout / ConvertLayout: plan the blocked layout NCHW[L]c for convolution chains.

``AlterOpLayout()`` (opt_level 3, in ``relay.build``'s pipeline for CPU targets) rewrites each
float32 ``nn.conv2d`` (NCHW data, OIHW constant weight) into
``nn.contrib_conv2d_NCHWc_fused[_add]`` (``relay/op/nn/conv_nchwc.py``), which keeps its result
in NCHW[L]c, with L the float32 lanes of the target's SIMD level (``target.simd``; 4 for a
``scalar`` build, whose portable kernels still work on 4-lane blocks), or, for a dense 3x3
stride-1 conv the selection of ``topi/nn/conv2d_winograd.py`` takes (unless the PassContext
option ``relay.backend.use_winograd`` is false), ``nn.contrib_conv2d_winograd_NCHWc_fused[_add]``
(``relay/op/nn/conv_winograd.py``: the same epilogue, transformed weights):

- a conv whose output channels do not split into L takes L/2 when they split into that (a
  24-channel layer in NCHW8c on an AVX-512 target), unless a few padded lanes make whole
  blocks of L (squeezenet's 1000 classes: 1008 in NCHW16c, ``pads_over_half_blocks``;
  ShuffleNetV2's 232: 240, ``_pads_half_blocks``);
  blocked values of different L meet through
  one ``layout_transform`` between the two blocks; an ungrouped one that splits into neither
  is padded with zero output channels to whole blocks of L where that wins
  (``channel_pad.py``): the transform back is followed by a slice that drops the padded lanes,
  and a conv reading the padded result takes it blocked, with zero weights for those lanes; a
  depthwise conv of a padded result is padded too (each padded lane a group of zero weights:
  ShuffleNetV2's branches of 58 and 116 channels stay blocked from one 1x1 conv to the next),
  and so are elementwise ops and resizes of padded values that keep the padded lanes finite
  (``PADDED_UNARY``, ``PADDED_BINARY``: HRNet's fuse layers of 18 and 36 channels);
- the weight is packed at build time (a constant of the model; nothing is repacked at run
  time), the bias is a constant vector;
- the epilogue absorbs what follows the conv while each intermediate has no other user:
  per-channel constant adds (bias, ``nn.bias_add``), one residual ``add`` of another tensor of
  the same shape, and one activation (before or after the residual add): ``nn.relu``,
  ``clip``, ``nn.hardswish``, ``nn.hardsigmoid``, ``nn.leaky_relu``, ``sigmoid``, ``nn.silu``,
  ``nn.mish``, ``nn.gelu`` (both forms; exporters' spelled-out forms are these ops after ``RecogniseActivations``);
- blocked values flow through elementwise ops (both operands blocked, one of them possibly
  (N, C, 1, 1) broadcast over the image, as a squeeze-and-excitation scale; or a scalar or
  per-channel constant, which is re-blocked at build time), pools (their ``layout`` becomes
  NCHW[L]c; a global pool of a static image is a pool with the image as its window; a max or
  average pool of a plain value whose channels split into blocks is converted to run blocked
  too: the generic window reduction on NCHW was 3-10x onnxruntime, which reorders as well;
  ``mean`` over the image is the pool with the image as its window),
  pads of the image alone (TF's SAME padding before a pool), and ``concatenate`` / ``split`` along the channels in whole blocks (a split's
  fields become slices of the block axis) without conversion; a conv whose input is plain NCHW reads it as NCHW1c (the
  first conv of a network needs no transform), except an RGB-like input (2 to 15 channels) of
  a stride-1 or large-kernel conv, read as one block of all its channels, and an input of at
  least L channels, read in blocks: half blocks where they fit, else zero-padded to whole
  ones (``padded_blocks``; ShuffleNetV2's channel shuffle leaves 58, 116 and 232 channels
  plain), as is a depthwise conv's whose channels fill no block;
- ``image.resize2d`` and ``dyn.image.resize2d`` (nearest, linear) and ``nn.upsampling``
  (nearest, bilinear) of a blocked value run in NCHW[L]c, so an FPN's upsampling stays
  blocked (at a run-time size too); ``shape_of`` of a blocked value reads the blocked shape
  (its channels static) instead of converting the value back;
- ``nn.layer_norm`` over the height or the width of a blocked value (wav2vec2's GroupNorm
  of one channel per group, over a 1-D conv's frames) runs in NCHW[L]c: the same axis, each
  lane its own row (the kernel's vectors run along the lanes);
- ``nn.conv2d_transpose`` (float32 NCHW, constant IOHW weight, any dilation) becomes its phase
  convs (``topi/nn/conv2d_transpose.py``: one blocked conv of ``s*s*OC`` channels, or one per
  phase when grouped, joined) and ``nn.contrib_conv2d_transpose_interleave``, blocked when the
  output channels split into blocks; or one ``nn.contrib_conv2d_transpose_fewoc`` that writes
  the phases interleaved where they make a block of 4 or 8 channels over wider input blocks
  (a transposed conv to one channel: DBNet's head); or, on a small static map with more than
  one tap per phase, one ``nn.contrib_conv2d_transpose_phased`` that computes each phase over
  its own pixels straight into the blocked output (``topi/nn/conv2d_phase.py``: DCGAN); a
  per-channel constant ``multiply`` after a transposed conv that writes its own output (a
  batch norm's scale) folds into its phase weights and bias, so the activation after it
  joins the epilogue too;
- ``layout_transform`` back to NCHW is inserted only where a value leaves the blocked world:
  ops that cannot take it, tuples, and the function's result.

The batch, height and width may be ``?`` (a model exported with a dynamic batch or image
size): the blocked kernels take them at run time, the packed weights and the plan are those of
a static build (nothing here depends on a symbolic dimension: a transposed conv's phase plan
is that of a probe size, its interleave sizing a ``?`` axis from the phase convs' output; a
conv left plain runs topi's NCHW template with the sizes as arguments); a
residual is fused when its
type has the result's shape (``?`` sizes taken as equal), and the kernel checks at run time
that it does. Channels must be static. Functions with
control flow or let bindings are left unchanged.
``ConvertLayout({"nn.conv2d": ["NCHW8c", ...]})`` runs the same planning with the lanes of
the requested layout.
"""
from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, ClassVar

import numpy as np

from ...ir.base import Span, merge_spans
from ...ir.expr import Call, Constant, Function, RelayExpr, Tuple, TupleGetItem, Var, const
from ...ir.module import IRModule
from ...ir.op import Op
from ...ir.transform import ModulePass, PassContext
from ...ir.types import TensorType, TupleType
from ...ir.visitor import children, post_order
from ...runtime.errors import OpAttributeInvalid
from ..op._layout import nchwc_lanes
from ..op.nn._attrs import Conv2DAttrs
from ..op.reduce import reduce_axes
from ...topi.nn.conv2d_nchw_input import nchw_input_wins
from ...topi.nn.conv2d_fewoc import fewoc_takes
from ...topi.nn.conv2d_nchwc import pack_weight
from ...topi.nn.conv2d_winograd import CONFIG as WINOGRAD_CONFIG
from ...topi.nn.conv2d_winograd import plan_tile as winograd_plan_tile
from ...topi.nn.conv2d_winograd import transform_weight as winograd_weight
from ...topi.nn.conv2d_phase import (
    TILES,
    choose_tile,
    pack_phase_bias,
    pack_phase_weight,
    phase_kernel_takes,
    phase_ranges,
)
from ...topi.nn.conv2d_transpose import (
    PhasePlan,
    dilated_kernel,
    phase_weights,
    symbolic_phase_plan,
)
from ._helpers import map_functions, op_call, same_shape
from .channel_pad import feeds_conv, pad_axis, pad_output, pads_over_half_blocks
from .type_infer import InferType

__all__ = ["AlterOpLayout", "ConvertLayout", "plan_lanes"]

GELU_ERF_SCALE = 1.0 / math.sqrt(2.0)  # GELU(x) = x / 2 * (1 + erf(x / sqrt(2)))
GELU_TANH_SCALE = math.sqrt(2.0 / math.pi)  # and x / 2 * (1 + tanh(sqrt(2/pi) (x + ...)))

UNARY = frozenset(["nn.relu", "clip", "sigmoid", "tanh", "exp", "negative", "abs", "sqrt",
                   "rsqrt", "nn.leaky_relu", "copy", "erf", "floor", "ceil", "round", "log",
                   "nn.hardswish", "nn.hardsigmoid", "nn.silu", "nn.gelu", "nn.mish"])
BINARY = frozenset(["add", "subtract", "multiply", "divide", "maximum", "minimum"])
GLOBAL_POOLS = frozenset(["nn.global_avg_pool2d", "nn.global_max_pool2d"])
POOLS = frozenset(["nn.max_pool2d", "nn.avg_pool2d"]) | GLOBAL_POOLS
# a pool of a plain value whose image is at least this wide runs in NCHW (the plain kernel)
# even when its channels split into blocks (AlterOpLayout._plain_pool_lanes)
NCHW_POOL_MIN_WIDTH = 48
# resizes that take NCHW[L]c, with the methods they take it for
RESIZES = {"nn.upsampling": ("nearest_neighbor", "bilinear"),
           "image.resize2d": ("nearest_neighbor", "linear"),
           "dyn.image.resize2d": ("nearest_neighbor", "linear")}
# op -> (epilogue activation, its two parameters from the call's attrs)
ACTS: dict[str, Any] = {
    "nn.relu": lambda a: ("relu", (0.0, 0.0)),
    "clip": lambda a: ("clip", (float(a.a_min), float(a.a_max))),
    "nn.hardswish": lambda a: ("hardswish", (0.0, 0.0)),
    "nn.hardsigmoid": lambda a: ("hardsigmoid", (a.alpha, a.beta)),
    "nn.leaky_relu": lambda a: ("leaky_relu", (float(a.alpha), 0.0)),
    "sigmoid": lambda a: ("sigmoid", (0.0, 0.0)),
    "tanh": lambda a: ("tanh", (0.0, 0.0)),
    "nn.silu": lambda a: ("silu", (0.0, 0.0)),
    "nn.mish": lambda a: ("mish", (0.0, 0.0)),
    "nn.gelu": lambda a: ("gelu_erf", (0.5, GELU_ERF_SCALE)) if a.approximate == "none"
    else ("gelu_tanh", (0.5, GELU_TANH_SCALE)),
}

# what a conv's epilogue may absorb between it and a conv that reads its result
EPILOGUE_OPS = frozenset(ACTS) | {"nn.bias_add", "add"}
# ops that keep a padded value padded (_Planner._padded_call; with resizes, max and average
# pools and image pads): each lane from the same lane of its operands, and finite where they are. The padded lanes are read by convs with zero
# weights, so they may hold anything but an inf or a NaN (0 * inf is NaN): no division,
# logarithm, square root or exponential
PADDED_UNARY = frozenset(["nn.relu", "clip", "sigmoid", "tanh", "nn.leaky_relu", "copy",
                          "negative", "abs", "nn.hardswish", "nn.hardsigmoid", "nn.silu",
                          "nn.gelu", "nn.mish"])
PADDED_BINARY = frozenset(["add", "subtract", "multiply", "maximum", "minimum"])
# ... and what lies between a conv and a conv that reads it padded (channel_pad.feeds_conv)
PADDED_THROUGH = EPILOGUE_OPS | PADDED_UNARY | PADDED_BINARY | frozenset(RESIZES) | {
    "nn.pad", "nn.max_pool2d", "nn.avg_pool2d"}


def plan_lanes(target: Any = None) -> int:
    """The block size L of NCHW[L]c for ``target``: its float32 SIMD lanes, 4 for scalar."""
    from ...target.simd import simd_level

    lanes = simd_level(target).lanes("float32")
    return lanes if lanes in (4, 8, 16) else 4


def _pads_half_blocks(channels: int, lanes: int, taps: int, in_channels: int) -> bool:
    """Whether an ungrouped conv whose ``channels`` split into blocks of ``lanes // 2`` but not
    of ``lanes``, ``taps`` kernel taps and ``in_channels`` is padded to whole blocks:
    channel_pad's rule (``pads_over_half_blocks``) for any number of taps when the padded lanes
    add at most a sixteenth; at most an eighth when it sums 128 taps or more itself (HRNet's
    72-channel branch: 3x3 72->72, 3x3/2 36->72, 3x3/2 18->72 and its fuse layers' 1x1
    144->72, all of them, or the blocks change between them; MobileNetV3's 1x1 24->72 and
    40->120 expansions keep their half blocks). Its readers
    take the padded blocks as they are (a conv) or through the transform to NCHW that half
    blocks would need as well, with the slice of the padded lanes fused into it; the conv runs
    at the full vector width. ShuffleNetV2's 232-channel stage (1x1 convs of 232 -> 232 at
    1.26-1.4x onnxruntime's in NCHW8c on AVX-512): the whole model 4-5% faster at batch 1 and
    4 (one thread, thread time, interleaved)."""
    return pads_over_half_blocks(channels, lanes, 1, 256) or (  # as if it summed enough taps
        pads_over_half_blocks(channels, lanes, taps, in_channels, share=8, min_sum=128))


def _is(e: Any, *names: str) -> bool:
    return isinstance(e, Call) and isinstance(e.op, Op) and e.op.name in names


def _tensor(e: RelayExpr) -> TensorType | None:
    """The type of ``e`` if the planning can use it: a static shape, or a 4-D one (NCHW) whose
    channels are static and batch, height or width symbolic."""
    ty = e.checked_type_
    if not isinstance(ty, TensorType):
        return None
    if all(isinstance(d, int) for d in ty.shape):
        return ty
    return ty if ty.ndim == 4 and isinstance(ty.shape[1], int) else None


def _nchw_f32(e: RelayExpr) -> TensorType | None:
    ty = _tensor(e)
    return ty if ty is not None and ty.ndim == 4 and ty.dtype == "float32" else None


def _channel_const(c: RelayExpr, channels: int) -> np.ndarray | None:
    """The per-channel values of a constant broadcast along axis 1 of a 4-D tensor (a scalar
    gives the same value for all), else None."""
    if not isinstance(c, Constant):
        return None
    arr = c.data.numpy()
    if arr.ndim > 4 or arr.dtype != np.float32:
        return None
    shape = (1,) * (4 - arr.ndim) + arr.shape
    if shape[0] != 1 or shape[2:] != (1, 1) or shape[1] not in (1, channels):
        return None
    return np.broadcast_to(arr.reshape(-1), (channels,)).astype("float32")


@dataclass(frozen=True)
class _Plan:
    """A conv being assembled: its epilogue grows while single-use consumers are absorbed."""

    data: RelayExpr  # the input, plain NCHW or blocked
    in_block: int
    weight: np.ndarray  # OIHW
    bias: np.ndarray
    attrs: Any
    lanes: int  # the block of the result, NCHW[lanes]c
    residual: RelayExpr | None = None
    act: str = "none"
    clip: tuple[float, float] = (0.0, 0.0)
    act_after_add: bool = True
    # a transposed conv's phase conv: the attrs of the interleave that follows it (its
    # bias and activation still go into the conv's epilogue: they commute with it)
    interleave: tuple[tuple[str, Any], ...] = ()
    span: Span | None = None  # of the conv and every call its epilogue absorbed
    # the real output channels when the weight and bias were padded with zeros to whole
    # blocks (150 classes in NCHW8c: 152 computed, the last 2 lanes dropped); 0: not padded
    channels: int = 0
    # a transposed conv on the phase kernel (topi/nn/conv2d_phase.py): its register tile and
    # the phase convs' (rows, columns); None: the blocked conv and the interleave
    phased: tuple[int, tuple[int, int]] | None = None
    # a transposed conv's phase channels when zero channels pad them to one block for the
    # few-output-channel kernel (DCGAN's 128 -> 3: 12 of 16); 0: not padded
    phase_channels: int = 0
    out_hw: tuple = ()  # the conv's output height and width (Winograd's selection)

    @property
    def result_lanes(self) -> int:
        """The block of what the plan computes (0: plain NCHW)."""
        if not self.interleave:
            return self.lanes
        return nchwc_lanes(dict(self.interleave)["out_layout"])

    @property
    def phases(self) -> int:
        if not self.interleave:
            return 1
        sh, sw = dict(self.interleave)["strides"]
        return sh * sw


@dataclass
class _Value:
    """What an original node became: a plain expression, a blocked one, or a pending plan."""

    expr: RelayExpr | None = None
    blocked: bool = False
    plan: _Plan | None = None
    lanes: int = 0  # the block of a blocked value
    channels: int = 0  # a padded blocked value's real channels (_Plan.channels)


def _fewoc_interleaves(p: _Plan) -> bool:
    """Whether a transposed conv's phase conv and its interleave run as one
    ``nn.contrib_conv2d_transpose_fewoc`` (``relay/op/nn/conv_transpose_nchwc.py``): the few-
    output-channel kernel's conv (``fewoc_takes``) to a plain output (of a static size, or
    one the data sizes at run time)."""
    if not p.interleave or p.residual is not None or p.channels:
        return False
    il = dict(p.interleave)
    return (il["out_layout"] == "NCHW" and p.in_block > 1
            and fewoc_takes(p.weight.shape[0], p.lanes, p.in_block, p.attrs.groups,
                            interleaved=p.phase_channels > 0))


def _phased(plan: PhasePlan, shape: tuple, lanes: int, out_lanes: int, in_block: int,
            oc: int, groups: int) -> tuple[int, tuple[int, int]] | None:
    """The phase kernel's (tile, phase conv rows) for a transposed conv of input ``shape``
    and ``plan``, if it runs there (``conv2d_phase.phase_kernel_takes``), else None."""
    static = all(isinstance(d, int) for d in shape)
    if not static or out_lanes != lanes or plan.phases == 1:  # stride 1: a plain conv
        return None
    maps = [(h, w) for _, h in phase_ranges(plan.out[0], plan.strides[0], plan.offset[0])
            for _, w in phase_ranges(plan.out[1], plan.strides[1], plan.offset[1])]
    if not phase_kernel_takes(lanes, in_block, oc, groups, plan.taps, plan.phases,
                              max(h * w for h, w in maps), static, lanes >= 8):
        return None
    return choose_tile(maps, oc // lanes, lanes), plan.rows


def _out_channels(p: _Plan) -> int:
    """The real output channels of what ``p`` computes."""
    return p.channels or (p.phase_channels or p.bias.shape[0]) // p.phases


def _conv_channels(p: _Plan, vec: np.ndarray) -> np.ndarray:
    """A per-output-channel vector as one per channel of ``p``'s conv: zeros for padded
    lanes, repeated per phase (phases outermost)."""
    if p.channels:
        vec = pad_axis(vec, 0, p.lanes)
    full = np.tile(vec, p.phases)
    return pad_axis(full, 0, p.lanes) if p.phase_channels else full


def _scale(p: _Plan, c: RelayExpr) -> _Plan | None:
    """``p`` times a per-channel constant, folded into its weights and bias (``p`` with no
    activation or residual yet), else None."""
    vec = _channel_const(c, _out_channels(p))
    if vec is None or p.residual is not None or p.act != "none":
        return None
    full = _conv_channels(p, vec)
    return replace(p, weight=(p.weight * full[:, None, None, None]).astype("float32"),
                   bias=(p.bias * full).astype("float32"))


class _Planner:
    def __init__(self, lanes: int, pad: bool = True, winograd: bool = True) -> None:
        self.lanes = lanes
        self.pad = pad  # pad channel counts that do not split into blocks (channel_pad.py)
        self.winograd = winograd  # 3x3 stride-1 convs by Winograd where it wins
        self.vals: dict[int, _Value] = {}
        self.users: dict[int, int] = {}
        self.readers: dict[int, list[RelayExpr]] = {}  # node id -> the nodes that read it
        self.plain_cache: dict[int, RelayExpr] = {}
        self.blocked_cache: dict[tuple[int, int], RelayExpr] = {}

    # -- values -----------------------------------------------------------------------------
    def _value(self, node: RelayExpr) -> _Value:
        return self.vals[id(node)]

    def _materialise(self, node: RelayExpr) -> _Value:
        v = self._value(node)
        if v.plan is not None:
            lanes, v.channels = v.plan.result_lanes, v.plan.channels
            v.expr, v.blocked, v.lanes, v.plan = self._emit(v.plan), lanes > 0, lanes, None
        return v

    def plain(self, node: RelayExpr) -> RelayExpr:
        v = self._materialise(node)
        if not v.blocked:
            return v.expr  # type: ignore[return-value]
        if id(node) not in self.plain_cache:
            out = op_call("layout_transform", v.expr, src_layout=f"NCHW{v.lanes}c",
                          dst_layout="NCHW")
            if v.channels:  # drop the padded lanes (FuseOps fuses the slice into the transform)
                out = op_call("strided_slice", out, begin=[0], end=[v.channels], axes=[1])
            self.plain_cache[id(node)] = out
        return self.plain_cache[id(node)]

    def blocked(self, node: RelayExpr, lanes: int = 0) -> RelayExpr:
        """``node`` in NCHW[lanes]c (lanes 0: a blocked value as it is, a plain one in the
        planner's lanes), converted where it is plain or has another block."""
        v = self._materialise(node)
        if v.channels:  # padded: other rules see it as plain, and convert the plain value
            return self.blocked_cache.setdefault(
                (id(node), lanes or self.lanes), op_call(
                    "layout_transform", self.plain(node), src_layout="NCHW",
                    dst_layout=f"NCHW{lanes or self.lanes}c"))
        want = lanes or (v.lanes if v.blocked else self.lanes)
        if v.blocked and v.lanes == want:
            return v.expr  # type: ignore[return-value]
        key = (id(node), want)
        if key not in self.blocked_cache:
            self.blocked_cache[key] = op_call(
                "layout_transform", v.expr, src_layout=f"NCHW{v.lanes}c" if v.blocked else "NCHW",
                dst_layout=f"NCHW{want}c")
        return self.blocked_cache[key]

    def padded_blocks(self, node: RelayExpr, lanes: int) -> RelayExpr:
        """``node`` (plain, or blocked with whole blocks) with zero channels appended up to
        whole blocks of ``lanes``, in NCHW[lanes]c: the input of a conv that reads it with zero
        weights for the padded lanes. FuseOps fuses the pad and the transform into the
        producer's kernel when that is injective (ShuffleNetV2's channel shuffle)."""
        if self._padded(node)[0] == lanes:
            return self._materialise(node).expr  # type: ignore[return-value]
        key = (id(node), -lanes)
        if key not in self.blocked_cache:
            extra = -_nchw_f32(node).shape[1] % lanes  # type: ignore[union-attr]
            padded = op_call("nn.pad", self.plain(node), const(np.float32(0)),
                             pad_width=((0, 0), (0, extra), (0, 0), (0, 0)))
            self.blocked_cache[key] = op_call("layout_transform", padded, src_layout="NCHW",
                                              dst_layout=f"NCHW{lanes}c")
        return self.blocked_cache[key]

    def _is_blocked(self, node: RelayExpr) -> bool:
        """Whether ``node`` is (or will be) blocked with whole blocks of real channels; a
        padded value reads as plain to every rule but a conv's input (``_padded``)."""
        v = self._value(node)
        if v.plan is not None:
            return v.plan.result_lanes > 0 and not v.plan.channels
        return v.blocked and not v.channels

    def _padded(self, node: RelayExpr) -> tuple[int, int]:
        """(lanes, real channels) of a padded blocked value, else (0, 0)."""
        v = self._value(node)
        if v.plan is not None:
            return (v.plan.lanes, v.plan.channels) if v.plan.channels else (0, 0)
        return (v.lanes, v.channels) if v.channels else (0, 0)

    def _lanes(self, node: RelayExpr) -> int:
        """The block of a blocked (or planned) value."""
        v = self._value(node)
        return v.plan.result_lanes if v.plan is not None else v.lanes

    def _out_lanes(self, oc: int, ic: int, groups: int, depthwise: bool) -> int:
        """The block of a conv's result: the planner's lanes, else half of them when the
        channels only split that way (MobileNetV2's 24-channel stage in NCHW8c on AVX-512,
        instead of leaving the blocked layout); 0 if neither."""
        for lanes in (self.lanes, self.lanes // 2):
            if lanes < 4 or oc % lanes:
                continue
            if groups > 1 and not depthwise and ((ic // groups) % lanes or
                                                 (oc // groups) % lanes):
                continue
            return lanes
        return 0

    def _emit(self, p: _Plan) -> RelayExpr:
        a = p.attrs
        wcb = 1 if a.groups > 1 and a.groups == p.weight.shape[0] == p.weight.shape[1] * a.groups \
            else p.in_block
        if p.phased is not None:
            return self._emit_phased(p)
        m = self._winograd_tile(p)  # packs its own weight: the direct one is not built
        weight = const(winograd_weight(p.weight, m, p.lanes) if m else
                       pack_weight(p.weight, p.lanes, wcb))
        if _fewoc_interleaves(p):  # the phase conv writes the interleaved output itself
            il = dict(p.interleave)
            return _spanned(p.span, op_call(
                "nn.contrib_conv2d_transpose_fewoc", p.data, weight, const(p.bias),
                padding=a.padding, lanes=p.lanes, in_block=p.in_block, activation=p.act,
                clip_min=p.clip[0], clip_max=p.clip[1], strides=il["strides"],
                offset=il["offset"], out_size=il["out_size"], channels=p.phase_channels,
                trim=il["trim"]))
        name, extra = ("nn.contrib_conv2d_winograd_NCHWc_fused", {"tile_size": m}) if m else \
            ("nn.contrib_conv2d_NCHWc_fused", {})
        conv = op_call(name + ("_add" if p.residual is not None else ""),
                       p.data, weight, const(p.bias), *([p.residual] if p.residual is not None
                                                         else []),
                       strides=a.strides, padding=a.padding, dilation=a.dilation,
                       groups=a.groups, lanes=p.lanes, in_block=p.in_block,
                       activation=p.act, clip_min=p.clip[0], clip_max=p.clip[1],
                       act_after_add=p.act_after_add, **extra)
        conv = _spanned(p.span, conv)  # a transposed conv's phase conv names its node too
        if not p.interleave:
            return conv
        return _spanned(p.span, op_call("nn.contrib_conv2d_transpose_interleave", conv,
                                        **dict(p.interleave)))

    def _winograd_tile(self, p: _Plan) -> int:
        """The m of the Winograd kernel for ``p`` (topi/nn/conv2d_winograd.py), 0: direct."""
        if not self.winograd or p.interleave or p.phased is not None:
            return 0
        a = p.attrs
        return winograd_plan_tile(p.weight.shape, a.strides, a.padding, a.dilation, a.groups,
                                  p.lanes, p.in_block, p.out_hw)

    def _emit_phased(self, p: _Plan) -> RelayExpr:
        """A transposed conv on the phase kernel: ``nn.contrib_conv2d_transpose_phased``."""
        assert p.phased is not None, "a phased plan"
        (tile, rows), il, rb = p.phased, dict(p.interleave), TILES[p.phased[0]][2]
        weights = p.weight.reshape(p.phases, -1, *p.weight.shape[1:])
        return _spanned(p.span, op_call(
            "nn.contrib_conv2d_transpose_phased", p.data,
            const(pack_phase_weight(weights, p.lanes, rb)),
            const(pack_phase_bias(p.bias, p.phases, p.lanes, rb)), padding=p.attrs.padding,
            rows=rows, strides=il["strides"], offset=il["offset"], out_size=il["out_size"],
            channels=weights.shape[1], tile=tile, activation=p.act, clip_min=p.clip[0],
            clip_max=p.clip[1]))

    # -- rules --------------------------------------------------------------------------------
    def visit(self, node: RelayExpr) -> None:
        if isinstance(node, Call) and isinstance(node.op, Op):
            value = self._call(node)  # type: ignore[assignment]
        elif isinstance(node, Tuple):
            value = _Value(Tuple(tuple(self.plain(f) for f in node.fields)))
        elif isinstance(node, TupleGetItem):
            value = self._split_field(node) or _Value(TupleGetItem(self.plain(node.tuple_value),
                                                                  node.index))
        else:
            value = _Value(node)
        self.vals[id(node)] = value

    def _single(self, node: RelayExpr) -> _Plan | None:
        v = self._value(node)
        return v.plan if v.plan is not None and self.users.get(id(node), 0) == 1 else None

    def _call(self, call: Call) -> _Value:
        name = call.op.name  # type: ignore[union-attr]
        if name == "nn.conv2d":
            plan = self._conv(call)
            if plan is not None:
                out_hw = tuple(call.checked_type_.shape[2:])  # type: ignore[attr-defined]
                return _Value(plan=replace(plan, span=call.span, out_hw=out_hw))
        if name == "nn.conv2d_transpose" and (phased := self._conv_transpose(call)) is not None:
            return phased
        if name == "concatenate" and (joined := self._concat(call)) is not None:
            return joined
        absorbed = self._absorb(call, name)
        if absorbed is not None:
            return _Value(plan=replace(absorbed, span=merge_spans(absorbed.span, call.span)))
        if (padded := self._padded_call(call, name)) is not None:
            return padded
        if self._blocked_ok(call, name):
            expr, lanes = self._rebuild_blocked(call, name)
            return _Value(expr, blocked=True, lanes=lanes)
        if name == "shape_of" and (shape := self._blocked_shape(call)) is not None:
            return _Value(shape)
        if name == "mean" and (pooled := self._image_mean(call)) is not None:
            return pooled
        return _Value(Call(call.op, tuple(self.plain(a) for a in call.args), call.attrs,
                           span=call.span))

    def _image_mean(self, call: Call) -> _Value | None:
        """``mean`` over the height and width of a blocked (or padded) NCHW value of a static
        image: the blocked pool with the image as its window (the GLOBAL_POOLS rule), blocked
        as its result when the axes are kept, else converted back and squeezed. Exporters
        write a global average pool so (torchvision's ShuffleNetV2: ``x.mean([2, 3])``); the
        whole 1024 x 7 x 7 map went back to NCHW for it (21 us, the mean itself 11 us)."""
        x, ty = call.args[0], _nchw_f32(call.args[0])
        if ty is None or not (self._is_blocked(x) or self._padded(x)[0]) or \
                not all(isinstance(d, int) for d in ty.shape[2:]) or \
                reduce_axes("mean", 4, call.attrs) != [2, 3]:
            return None
        lanes, channels = self._padded(x) if self._padded(x)[0] else (self._lanes(x), 0)
        pooled = _spanned(call.span, op_call(
            "nn.avg_pool2d", self._materialise(x).expr, pool_size=tuple(ty.shape[2:]),
            layout=f"NCHW{lanes}c"))
        if call.attrs.keepdims:
            return _Value(pooled, blocked=True, lanes=lanes, channels=channels)
        plain = op_call("layout_transform", pooled, src_layout=f"NCHW{lanes}c",
                        dst_layout="NCHW")
        if channels:
            plain = op_call("strided_slice", plain, begin=[0], end=[channels], axes=[1])
        return _Value(op_call("squeeze", plain, axis=[2, 3]))

    def _blocked_shape(self, call: Call) -> RelayExpr | None:
        """``shape_of`` of a blocked (or padded) NCHW value as the batch, height and width of
        its blocked shape and its static channels: an FPN resized to a blocked map's size
        converted the map back to NCHW only to read its sizes."""
        node = call.args[0]
        ty = _nchw_f32(node)
        if ty is None or not isinstance(ty.shape[1], int) or not (
                self._is_blocked(node) or self._padded(node)[0]):
            return None
        dtype = call.attrs.dtype  # type: ignore[union-attr]
        dims = op_call("strided_slice", op_call("shape_of", self._materialise(node).expr,
                                                dtype=dtype), begin=[0], end=[4], axes=[0])
        keep = op_call("multiply", dims, const(np.array([1, 0, 1, 1], dtype)))
        return op_call("add", keep, const(np.array([0, ty.shape[1], 0, 0], dtype)))

    def _conv(self, call: Call) -> _Plan | None:
        a, (data, weight) = call.attrs, call.args
        dty, oty = _nchw_f32(data), _nchw_f32(call)
        if dty is None or oty is None or not isinstance(weight, Constant):
            return None
        if a.data_layout != "NCHW" or a.kernel_layout != "OIHW" or (
                a.out_layout not in ("", "NCHW")) or a.out_dtype not in ("", "float32"):
            return None
        w = weight.data.numpy()
        if w.dtype != np.float32:
            return None
        ic, oc, g = dty.shape[1], oty.shape[1], a.groups
        depthwise = g > 1 and g == ic == oc and w.shape[1] == 1
        lanes, channels = self._out_lanes(oc, ic, g, depthwise), 0
        in_lanes, in_channels = self._padded(data)
        if depthwise and self.pad and (lanes == 0 and (in_lanes or not self._is_blocked(data))
                                       or 0 < lanes < in_lanes):
            # a depthwise conv of a padded producer (ShuffleNetV2's 58 and 116 channels; 232,
            # which would take half blocks): padded too, each padded lane a group of zero
            # weights, its result padded for the next conv (converted back, the two 1x1 convs
            # around it ran on NCHW, 2x slower);
            # a plain input (a channel shuffle's result) is padded into blocks for it: the
            # plain depthwise loops ran ShuffleNetV2's 116-channel 3x3/2 at 9x onnxruntime
            in_lanes = in_lanes or self.lanes
            w = pad_axis(w, 0, in_lanes)
            return _Plan(self.padded_blocks(data, in_lanes), in_lanes, w,
                         np.zeros(w.shape[0], "float32"), replace(a, groups=w.shape[0]),
                         in_lanes, channels=oc)
        if lanes == self.lanes // 2 and self.pad and g == 1 and _pads_half_blocks(
                oc, self.lanes, w.shape[2] * w.shape[3], ic):
            lanes = 0  # padded to whole blocks below (pad_output holds for these)
        if lanes == 0 and self.pad and g == 1 and pad_output(
                oc, self.lanes, w.shape[2] * w.shape[3], ic,
                feeds_conv(call, self.readers, PADDED_THROUGH) or in_lanes > 0
                or self._is_blocked(data)):
            # a blocked input counts as a conv's: the plain conv would convert its input
            # anyway, while the padded one's transform back fuses into its reader (ShuffleNetV2's
            # 24 -> 58 1x1 into the concat: 93 against onnxruntime's 32 us plain)
            lanes, channels, w = self.lanes, oc, pad_axis(w, 0, self.lanes)
        if lanes == 0:
            return None
        bias = np.zeros(w.shape[0], "float32")
        if in_lanes and g == 1:  # a padded producer's blocks as they are: zero weights for
            w = pad_axis(w, 1, in_lanes)  # its padded lanes
            return _Plan(self._materialise(data).expr, in_lanes, w, bias, a, lanes,
                         channels=channels)
        if depthwise:  # input and output in one block; keep the input's if it fits
            if self._is_blocked(data) and oc % self._lanes(data) == 0:
                lanes = self._lanes(data)
            return _Plan(self.blocked(data, lanes), lanes, w, bias, a, lanes)
        if self._is_blocked(data):
            cb = self._lanes(data)
            if (ic // g) % cb:
                return None
            return _Plan(self.blocked(data), cb, w, bias, a, lanes, channels=channels)
        if nchw_input_wins(ic, g, w.shape[2:], a.dilation):
            # a network's first conv on few channels: its own kernel reads the plain input
            # (topi/nn/conv2d_nchw_input.py), no transform
            return _Plan(self.plain(data), 1, w, bias, a, lanes, channels=channels)
        if 1 < ic < 16 and g == 1 and (a.strides[1] == 1 or w.shape[3] >= 5):
            # a network's first conv (RGB; YOLOv5's Focus: 12 channels): the input as one
            # block of all its channels, so that each kernel row reads kw * ic neighbouring
            # floats; worth its one transform of the input when the taps are many per output
            # (measured: resnet18's 7x7/2 and resnet8's 3x3/1 gain, MobileNetV2's 3x3/2 does
            # not; the Focus conv 12 -> 16 3x3 at 160x160 1.5 -> ~1.0 ms)
            return _Plan(self.blocked(data, ic), ic, w, bias, a, lanes, channels=channels)
        if (ic // g) % self.lanes == 0:
            # a plain input whose channels fill whole blocks (a graph input of many channels):
            # one transform of the input lets the kernel read a block per tap instead of a
            # channel per tap (measured: 128->128 3x3 on 28x28, 2x faster with the transform)
            return _Plan(self.blocked(data, self.lanes), self.lanes, w, bias, a, lanes,
                         channels=channels)
        if g == 1 and ic >= self.lanes:
            return self._wide_plain_input(data, ic, w, a, lanes, channels)
        return _Plan(self.plain(data), 1, w, bias, a, lanes, channels=channels)

    def _wide_plain_input(self, data: RelayExpr, ic: int, w: np.ndarray, a: Any, lanes: int,
                          channels: int) -> _Plan:
        """An ungrouped conv of a plain input of at least a block of channels that fill no
        whole blocks (ShuffleNetV2's 58, 116, 232 after its channel shuffle): the input in half
        blocks when they fit, else zero-padded to whole blocks, read with zero weights there.
        The kernel then reads a block per tap instead of a channel per tap: the 1x1 116 -> 116
        on 14x14 ran at 2x its blocked time on the plain input, and the transform fuses into
        the producer when that is injective."""
        half = self.lanes // 2
        if half >= 4 and ic % half == 0:
            return _Plan(self.blocked(data, half), half, w, np.zeros(w.shape[0], "float32"), a,
                         lanes, channels=channels)
        return _Plan(self.padded_blocks(data, self.lanes), self.lanes,
                     pad_axis(w, 1, self.lanes), np.zeros(w.shape[0], "float32"), a, lanes,
                     channels=channels)

    def _conv_transpose(self, call: Call) -> _Value | None:
        """``nn.conv2d_transpose`` as blocked phase convs (one, or one per phase when grouped,
        joined along the channels) and their interleave (``topi/nn/conv2d_transpose.py``);
        the result stays blocked when its channels split into the convs' lanes."""
        a, (data, weight) = call.attrs, call.args
        dty, oty = _nchw_f32(data), _nchw_f32(call)
        if dty is None or oty is None or not isinstance(weight, Constant) or \
                a.data_layout != "NCHW" or \
                a.kernel_layout != "IOHW" or a.out_layout not in ("", "NCHW") or \
                a.out_dtype not in ("", "float32") or weight.data.dtype != "float32":
            return None
        w = dilated_kernel(weight.data.numpy(), tuple(a.dilation))  # dilation 1: w itself
        # a ``?`` height or width: the plan of a probe size, whose convs and weights are those
        # of every size; the interleave sizes those axes from the convs' output at run time
        hw = dty.shape[2:]
        plan = symbolic_phase_plan(*hw, w.shape[2:], a.strides, a.padding, a.output_padding)
        if plan is None:
            return None
        ic, oc, g = dty.shape[1], oty.shape[1], a.groups
        depthwise = g > 1 and g == ic == oc
        out_lanes = lanes = self._out_lanes(oc, ic, g, depthwise)
        if (padded := self._padded_phases(data, plan, w, oc, g, out_lanes)) is not None:
            return _Value(plan=replace(padded, span=call.span))
        if lanes == 0 and g == 1:  # the phases' channels together may still split (OC = 1)
            lanes = next((n for n in (self.lanes, self.lanes // 2, self.lanes // 4)
                          if n >= 4 and oc * plan.phases % n == 0), 0)
        if lanes == 0:
            return None
        if depthwise and self._is_blocked(data) and oc % self._lanes(data) == 0:
            lanes = out_lanes = self._lanes(data)
        if depthwise:
            x, cb = self.blocked(data, lanes), lanes
        elif self._is_blocked(data) and (ic // g) % self._lanes(data) == 0:
            x, cb = self.blocked(data), self._lanes(data)
        elif (ic // g) % self.lanes == 0:  # a plain input is worth one transform (measured
            x, cb = self.blocked(data, self.lanes), self.lanes  # 64 channels: 8x faster)
        else:
            x, cb = self.plain(data), 1
        weights = phase_weights(w, g, plan)
        if g == 1:
            weights = weights.reshape(1, oc * plan.phases, ic, *plan.taps)
        attrs = Conv2DAttrs(padding=plan.padding, groups=g)
        interleave = () if plan.phases == 1 and out_lanes == lanes else (  # stride 1: no need
            ("strides", plan.strides), ("offset", plan.offset),
            ("out_size", tuple(o if isinstance(d, int) else 0 for o, d in zip(plan.out, hw))),
            ("data_layout", f"NCHW{lanes}c"),
            ("out_layout", f"NCHW{out_lanes}c" if out_lanes else "NCHW"), ("trim", plan.trim))
        convs = [_Plan(x, cb, pw, np.zeros(pw.shape[0], "float32"), attrs, lanes)
                 for pw in weights]
        if len(convs) == 1:  # pending: the bias and activation may join its epilogue
            phased = _phased(plan, dty.shape, lanes, out_lanes, cb, oc, g)
            return _Value(plan=replace(convs[0], interleave=interleave, span=call.span,
                                       phased=phased))
        joined = op_call("concatenate", Tuple(tuple(self._emit(p) for p in convs)), axis=1)
        out = _spanned(call.span, op_call("nn.contrib_conv2d_transpose_interleave", joined,
                                          **dict(interleave)))
        return _Value(out, blocked=bool(out_lanes), lanes=out_lanes)

    def _padded_phases(self, data: RelayExpr, plan: PhasePlan, w: np.ndarray, oc: int,
                       groups: int, out_lanes: int) -> _Plan | None:
        """A transposed conv whose phase channels (9 to 15, DCGAN's 128 -> 3: 12) fill no
        block of 4 or 8, padded with zero channels to one block of the planner's lanes over
        an input in blocks of as many (a plain input of whole blocks converted), on the
        few-output-channel kernel writing the plain output interleaved
        (``conv2d_fewoc.py``); else None."""
        channels, ic = oc * plan.phases, w.shape[0]
        blocked = self._is_blocked(data) and self._lanes(data) == self.lanes
        if groups != 1 or out_lanes or channels in (4, 8) or channels >= self.lanes or \
                not (blocked or (not self._is_blocked(data) and ic % self.lanes == 0)) or \
                not all(isinstance(d, int) for d in (*plan.out, *plan.rows)):
            return None
        weight = pad_axis(phase_weights(w, 1, plan).reshape(channels, -1, *plan.taps), 0,
                          self.lanes)
        interleave = (("strides", plan.strides), ("offset", plan.offset),
                      ("out_size", plan.out), ("data_layout", f"NCHW{self.lanes}c"),
                      ("out_layout", "NCHW"), ("trim", plan.trim))
        return _Plan(self.blocked(data, self.lanes), self.lanes, weight,
                     np.zeros(self.lanes, "float32"),
                     Conv2DAttrs(padding=plan.padding), self.lanes, interleave=interleave,
                     phase_channels=channels)

    def _absorb(self, call: Call, name: str) -> _Plan | None:
        args = call.args
        if name in ACTS and (p := self._single(args[0])) is not None and p.act == "none":
            act, params = ACTS[name](call.attrs)
            return replace(p, act=act, clip=params)
        if name == "multiply":  # a batch norm's scale after a transposed conv whose
            # kernel writes the output (the interleave pass does it otherwise: folded into a
            # blocked phase conv's weights, with the relu in its epilogue, DCGAN's 16x16
            # layer ran 3-8% slower on AVX2)
            for mine, other in ((args[0], args[1]), (args[1], args[0])):
                if (p := self._single(mine)) is not None and (
                        p.phased is not None or p.phase_channels) and (
                        scaled := _scale(p, other)) is not None:
                    return scaled
        if name == "nn.bias_add" and call.attrs.axis in (1, -3) and (
                p := self._single(args[0])) is not None:
            return self._add_bias(p, args[1])
        if name != "add":
            return None
        for mine, other in ((args[0], args[1]), (args[1], args[0])):
            p = self._single(mine)
            if p is None:
                continue
            biased = self._add_bias(p, other)
            if biased is not None:
                return biased
            if p.residual is None and not p.interleave and _tensor(other) is not None and \
                    _tensor(call) is not None \
                    and same_shape(_tensor(other), _tensor(call)):
                return replace(p, residual=self._residual(other, p),
                               act_after_add=p.act == "none")
        return None

    def _residual(self, node: RelayExpr, p: _Plan) -> RelayExpr:
        """``node`` as the residual of ``p``'s epilogue: in ``p``'s blocks; for a padded plan
        (BlazeFace's 28 and 36 channels, a residual of zero-padded channels) a value padded
        to the same blocks as it is, or a plain one padded with zero channels and copied into
        them). What the padded lanes of the sum hold is never read: a conv
        reading it has zero weights there, and the way back to NCHW drops them."""
        if not p.channels:
            return self.blocked(node, p.lanes)
        return self.padded_blocks(node, p.lanes)

    # -- channel concatenation and split: block by block ------------------------------------
    def _channel_lanes(self, call: Call, parts: list[RelayExpr]) -> int:
        """The block for joining or splitting ``parts`` along the channels of ``call`` (axis 1
        of NCHW): a blocked part's, if every part's channels are a multiple of it; else 0."""
        if _nchw_f32(call) is None or call.attrs.axis not in (1, -3):
            return 0
        blocked = [p for p in parts if self._is_blocked(p)]
        types = [_nchw_f32(p) for p in parts]
        if not blocked or any(t is None for t in types):
            return 0
        lanes = self._lanes(blocked[0])
        return lanes if all(t.shape[1] % lanes == 0 for t in types) else 0  # type: ignore[union-attr]

    def _concat(self, call: Call) -> _Value | None:
        """``concatenate`` along the channels of blocked values: the same along the block axis
        of NCHW[L]c, when every part has whole blocks."""
        fields = call.args[0]
        if not isinstance(fields, Tuple):
            return None
        lanes = self._channel_lanes(call, list(fields.fields))
        if not lanes:
            return None
        joined = Tuple(tuple(self.blocked(f, lanes) for f in fields.fields))
        return _Value(Call(call.op, (joined,), call.attrs, span=call.span), blocked=True,
                      lanes=lanes)

    def _split_field(self, item: TupleGetItem) -> _Value | None:
        """Field ``i`` of a ``split`` along the channels of a blocked value, in whole blocks:
        a slice of the blocked tensor's block axis."""
        split = item.tuple_value
        if not _is(split, "split") or not isinstance(split.checked_type_, TupleType):
            return None
        x, fields = split.args[0], split.checked_type_.fields  # type: ignore[attr-defined]
        ty = _nchw_f32(x)
        if ty is None or split.attrs.axis not in (1, -3) or not self._is_blocked(x):
            return None
        lanes = self._lanes(x)
        sizes = [f.shape[1] for f in fields]
        if any(not isinstance(c, int) or c % lanes for c in sizes):
            return None
        begin = sum(sizes[:item.index])
        part = _spanned(split.span, op_call("strided_slice", self.blocked(x, lanes),
                                            begin=[begin // lanes],
                                            end=[(begin + sizes[item.index]) // lanes], axes=[1]))
        return _Value(part, blocked=True, lanes=lanes)

    def _padded_call(self, call: Call, name: str) -> _Value | None:
        """An elementwise op, a resize (nearest, linear), a max or average pool or an image
        pad of padded values in their padded blocks, its result padded the same: HRNet's
        fuse layers (branches of 18 and 36
        channels, padded to 32 and 48 for their convs: 1x1 convs, upsampled, summed with the
        other branches, relu) went back to NCHW at each resize and add, and the next conv
        read the sum channel by channel (1.5x slower than blocked). The operands: values
        padded to the same blocks (of the result's shape, or its (N, C, 1, 1)), scalars and
        per-channel constants (zero in the padded lanes). Only on the way to a conv that reads
        the result blocked."""
        out = _nchw_f32(call)
        if out is None or not call.args or not feeds_conv(call, self.readers, PADDED_THROUGH):
            return None  # a result that only leaves: dropping the lanes first costs less (an
            # upsampling's input is the smaller side: DeepLab's last resize, 4x to the input)
        windowed = name in ("nn.max_pool2d", "nn.avg_pool2d") and \
            call.attrs.layout == "NCHW" and call.attrs.out_layout in ("", "NCHW")
        if name in PADDED_UNARY or windowed or (
                name in RESIZES and call.attrs.layout == "NCHW" and
                call.attrs.method in RESIZES[name]) or (name == "nn.pad" and _image_pad(call)):
            lanes, channels = self._padded(call.args[0])
            if not lanes:
                return None
            expr = self._materialise(call.args[0]).expr
            if name == "nn.pad":
                return _Value(_blocked_pad(call, expr, self.plain(call.args[1])), blocked=True,
                              lanes=lanes, channels=channels)
            if windowed:
                attrs, args = replace(call.attrs, layout=f"NCHW{lanes}c", out_layout=""), (expr,)
            elif name in RESIZES:  # a dyn.image.resize2d's size and scales stay plain
                attrs = replace(call.attrs, layout=f"NCHW{lanes}c")
                args = (expr, *(self.plain(a) for a in call.args[1:]))
            else:
                attrs, args = call.attrs, (expr,)
            return _Value(Call(call.op, args, attrs, span=call.span), blocked=True,
                          lanes=lanes, channels=channels)
        if name not in PADDED_BINARY:
            return None
        padded = [self._padded(a) for a in call.args]
        lanes, channels = next((p for p in padded if p[0]), (0, 0))
        if not lanes:
            return None
        args = []
        for a, pad in zip(call.args, padded):
            ty = _tensor(a)
            if pad == (lanes, channels) and _broadcasts_over_image(ty, out):
                args.append(self._materialise(a).expr)
            elif pad[0] == 0 and ty is not None and ty.ndim == 0:
                args.append(self.plain(a))
            elif pad[0] == 0 and (vec := _channel_const(a, channels)) is not None:
                args.append(const(pad_axis(vec, 0, lanes).reshape(1, -1, 1, 1, lanes)))
            else:
                return None
        return _Value(Call(call.op, tuple(args), call.attrs, span=call.span), blocked=True,
                      lanes=lanes, channels=channels)

    def _add_bias(self, p: _Plan, c: RelayExpr) -> _Plan | None:
        vec = _channel_const(c, _out_channels(p))
        if vec is None or p.residual is not None or p.act != "none":
            return None
        return replace(p, bias=p.bias + _conv_channels(p, vec))

    def _blocked_ok(self, call: Call, name: str) -> bool:
        args = call.args
        if name in UNARY:
            return self._is_blocked(args[0]) and _nchw_f32(call) is not None
        if name in RESIZES:
            return call.attrs.layout == "NCHW" and call.attrs.method in RESIZES[name] and \
                self._is_blocked(args[0]) and _nchw_f32(call) is not None
        if name == "nn.pad":  # of the image only: TF's SAME padding before a pool
            return self._is_blocked(args[0]) and _image_pad(call)
        if name == "nn.layer_norm":  # over the height or the width (a GroupNorm of one
            # channel per group over a 1-D conv's output, as wav2vec2's feature extractor)
            return self._is_blocked(args[0]) and _nchw_f32(call) is not None and (
                call.attrs.axis % 4 in (2, 3))
        if name in POOLS:
            return call.attrs.layout == "NCHW" and (
                self._is_blocked(args[0]) or self._plain_pool_lanes(call, name) > 0) and (
                not hasattr(call.attrs, "out_layout") or call.attrs.out_layout in ("", "NCHW"))
        if name not in BINARY or _nchw_f32(call) is None:
            return False
        if not any(self._is_blocked(a) for a in args):
            return False
        lanes = self._call_lanes(call)
        return all(self._blocked_operand(a, call, lanes, check=True) is not None for a in args)

    def _call_lanes(self, call: Call) -> int:
        """The block an elementwise call computes in: its first blocked operand's (a pool of
        a plain value: the block its channels split into)."""
        lanes = next((self._lanes(a) for a in call.args if self._is_blocked(a)), 0)
        return lanes or self._plain_pool_lanes(call, call.op.name)  # type: ignore[union-attr]

    def _plain_pool_lanes(self, call: Call, name: str) -> int:
        """The block a max or average pool of a plain float32 NCHW value runs in: the
        planner's lanes, half or a quarter of them (at least 4), the first its channels split
        into; 0 (the plain NCHW kernel) for other channel counts and for images at least
        ``NCHW_POOL_MIN_WIDTH`` wide. The NCHW kernel runs along rows, so short rows cost
        it more per output, while the blocked one pays a transform each way: on one core,
        64 channels, 3x3 / 2 max pool, AVX-512: 224 x 224 blocked 1.14 ms, NCHW 0.62
        (onnxruntime 1.87); 57 x 57: 66 against 47 us; 40 x 40: 25 against 29; 28 x 28: 13
        against 23; AVX2 alike (57: 71 against 58 us; 40: 30 against 28; 28: 14 against
        18)."""
        ty = _nchw_f32(call.args[0])
        if name not in ("nn.max_pool2d", "nn.avg_pool2d") or ty is None or \
                self._is_blocked(call.args[0]) or not isinstance(ty.shape[1], int):
            return 0
        width = ty.shape[3]
        if not isinstance(width, int) or width >= NCHW_POOL_MIN_WIDTH:
            return 0
        return next((lanes for lanes in (self.lanes, self.lanes // 2, self.lanes // 4)
                     if lanes >= 4 and ty.shape[1] % lanes == 0), 0)

    def _blocked_operand(self, a: RelayExpr, call: Call, lanes: int,
                         check: bool = False) -> RelayExpr | None:
        """Operand ``a`` of an elementwise ``call`` computed in NCHW[lanes]c, or None if it
        cannot be (``check``: only say whether it can, emitting nothing)."""
        if self._is_blocked(a):
            if not _broadcasts_over_image(_tensor(a), _tensor(call)):
                return None
            return a if check else self.blocked(a, lanes)
        ty = _tensor(a)
        if ty is not None and ty.ndim == 0:
            return a if check else self.plain(a)
        vec = _channel_const(a, _tensor(call).shape[1])  # type: ignore[union-attr]
        if vec is None:
            return None
        return const(vec.reshape(1, -1, 1, 1, lanes))

    def _rebuild_blocked(self, call: Call, name: str) -> tuple[RelayExpr, int]:
        lanes = self._call_lanes(call)
        hw = _nchw_f32(call.args[0]).shape[2:] if name in GLOBAL_POOLS else ()  # type: ignore[union-attr]
        if name in GLOBAL_POOLS and all(isinstance(d, int) for d in hw):
            # the whole image as one window: the blocked pool kernel reads it contiguously,
            # one vector per tap (the generic reduction strides over the lanes)
            op = "nn.avg_pool2d" if name == "nn.global_avg_pool2d" else "nn.max_pool2d"
            return _spanned(call.span, op_call(op, self.blocked(call.args[0]),
                                               pool_size=tuple(hw), layout=f"NCHW{lanes}c")), lanes
        if name in POOLS or name in RESIZES:
            attrs = replace(call.attrs, layout=f"NCHW{lanes}c")
            if hasattr(attrs, "out_layout"):
                attrs = replace(attrs, out_layout="")
            # a dyn.image.resize2d's size and scales are shape values: plain
            return Call(call.op, (self.blocked(call.args[0], lanes),
                                  *(self.plain(a) for a in call.args[1:])), attrs,
                        span=call.span), lanes
        if name in UNARY:
            return Call(call.op, (self.blocked(call.args[0]),), call.attrs, span=call.span), lanes
        if name == "nn.pad":
            return _blocked_pad(call, self.blocked(call.args[0]), self.plain(call.args[1])), lanes
        if name == "nn.layer_norm":  # the same axis index in NCHW[L]c, each lane its own row;
            # gamma and beta run along that axis, as in NCHW
            args = (self.blocked(call.args[0]), *(self.plain(a) for a in call.args[1:]))
            attrs = replace(call.attrs, axis=call.attrs.axis % 4)
            return Call(call.op, args, attrs, span=call.span), lanes
        args = tuple(self._blocked_operand(a, call, lanes) for a in call.args)
        return Call(call.op, args, call.attrs, span=call.span), lanes  # type: ignore[arg-type]


def _image_pad(call: Call) -> bool:
    """Whether ``call`` (an ``nn.pad``) of an NCHW float32 value pads only its image axes."""
    return _nchw_f32(call) is not None and all(
        tuple(p) == (0, 0) for p in call.attrs.pad_width[:2])


def _blocked_pad(call: Call, data: RelayExpr, value: RelayExpr) -> Call:
    """An image-only ``nn.pad`` of NCHW[L]c ``data``: the lanes not padded. TensorFlow's SAME
    padding before a max pool, as exporters write it (EfficientDet's down-sampling), went back
    to NCHW for the pad, and the pool of the plain result ran on the plain loops."""
    attrs = replace(call.attrs, pad_width=(*call.attrs.pad_width, (0, 0)))
    return Call(call.op, (data, value), attrs, span=call.span)


def _spanned(span: Span | None, call: Call) -> Call:
    """``call`` (new) with the span of the calls it stands for."""
    return call if span is None else replace(call, span=span)


def _broadcasts_over_image(a: TensorType | None, out: TensorType | None) -> bool:
    """Operand type ``a`` is the result's (NCHW), or its (N, C, 1, 1): in NCHW[L]c either
    broadcasts against the result blocked the same way."""
    if a is None or out is None or a.dtype != out.dtype or a.ndim != 4:
        return False
    if a == out:
        return True
    return tuple(a.shape[:2]) == tuple(out.shape[:2]) and tuple(a.shape[2:]) == (1, 1)


def _dataflow(body: RelayExpr) -> list[RelayExpr] | None:
    """The nodes of ``body`` in post order, or None if it is not a static dataflow graph."""
    nodes = []
    for node in post_order(body):
        if not isinstance(node, (Call, Tuple, TupleGetItem, Var, Constant, Op)):
            return None
        if isinstance(node, Call) and not isinstance(node.op, Op):
            return None
        nodes.append(node)
    return nodes


def plan_function(func: Function, lanes: int, pad: bool = True,
                  winograd: bool = True) -> Function:
    """``func`` with its conv chains (and pools) in NCHW[lanes]c (unchanged if nothing
    applies); ``pad``: pad channel counts that do not split into blocks where that wins
    (``channel_pad.py``); ``winograd``: 3x3 stride-1 convs on the Winograd kernel where
    ``topi/nn/conv2d_winograd.py`` says it wins."""
    nodes = _dataflow(func.body)
    if nodes is None or not any(_is(n, "nn.conv2d", "nn.conv2d_transpose", "nn.max_pool2d",
                                    "nn.avg_pool2d") for n in nodes):
        return func
    planner = _Planner(lanes, pad, winograd)
    for node in nodes:
        for c in children(node):
            planner.users[id(c)] = planner.users.get(id(c), 0) + 1
            planner.readers.setdefault(id(c), []).append(node)
    planner.users[id(func.body)] = planner.users.get(id(func.body), 0) + 1
    for node in nodes:
        planner.visit(node)
    body = planner.plain(func.body)
    if body is func.body:
        return func
    return Function(func.params, body, func.ret_type, func.type_params, func.attrs,
                    span=func.span)


def _run(mod: IRModule, lanes: int, pad: bool = True, winograd: bool = True) -> IRModule:
    mod = InferType()(mod)
    return InferType()(map_functions(mod, lambda f: plan_function(f, lanes, pad, winograd)))


class AlterOpLayout(ModulePass):
    """Plan NCHW[L]c layouts and fused conv kernels for the current target (module docstring).

    The PassContext option ``relay.AlterOpLayout.desired_layout`` chooses instead: ``"NCHW"``
    keeps the model's layout, ``"NCHWc"`` the target's lanes (the default), ``"NCHW4c"``,
    ``"NCHW8c"`` or ``"NCHW16c"`` that block size (``ember compile --desired-layout``);
    ``relay.AlterOpLayout.pad_channels`` (default True) set False keeps a conv whose channels
    do not split into blocks in its plain form instead of padding it;
    ``relay.backend.use_winograd`` (default True where the target has SIMD, False for a scalar
    build) set False keeps every 3x3 conv on the direct kernel."""

    name: ClassVar[str] = "AlterOpLayout"
    opt_level: ClassVar[int] = 3

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        from ...target import Target
        from ...target.simd import simd_level

        desired = ctx.config.get("relay.AlterOpLayout.desired_layout", "NCHWc")
        lanes = layout_lanes(desired, "relay.AlterOpLayout.desired_layout")
        if lanes == 0:
            return mod
        pad = ctx.config.get("relay.AlterOpLayout.pad_channels", True)
        if not isinstance(pad, bool):
            raise OpAttributeInvalid("relay.AlterOpLayout.pad_channels must be True or False, "
                                     f"got {pad!r}")
        # default: on where the target has SIMD; a scalar (portable C) build is what goes to
        # microcontrollers, where the transformed weights (1.8x-4x a 3x3 conv's) cost flash
        winograd = ctx.config.get(WINOGRAD_CONFIG, simd_level(Target.current()).name != "scalar")
        if not isinstance(winograd, bool):
            raise OpAttributeInvalid(f"{WINOGRAD_CONFIG} must be True or False, got {winograd!r}")
        return _run(mod, lanes if lanes > 0 else plan_lanes(Target.current()), pad, winograd)


_BLOCKED = re.compile(r"^NCHW(\d*)c$")
DESIRED_LAYOUTS = ("NCHW", "NCHWc", "NCHW4c", "NCHW8c", "NCHW16c")


def layout_lanes(data: Any, where: str) -> int:
    """0 for ``"NCHW"`` (keep), L for ``"NCHW<L>c"``, -1 for ``"NCHWc"`` (the target's)."""
    m = _BLOCKED.match(data) if isinstance(data, str) else None
    if data != "NCHW" and (m is None or (m.group(1) and int(m.group(1)) not in (4, 8, 16))):
        raise OpAttributeInvalid(f"{where}: nn.conv2d data layout {data!r} is not supported "
                                 f"(use {', '.join(DESIRED_LAYOUTS)})")
    return 0 if data == "NCHW" else int(m.group(1)) if m and m.group(1) else -1


class ConvertLayout(ModulePass):
    """Relay's ``ConvertLayout(desired_layouts)`` for what ember's kernels take:
    ``{"nn.conv2d": ["NCHW8c", "default"]}`` plans NCHW8c (``"NCHWc"``: the target's lanes);
    ``"NCHW"`` keeps the graph as it is."""

    name: ClassVar[str] = "ConvertLayout"
    opt_level: ClassVar[int] = 3

    def __init__(self, desired_layouts: Mapping[str, Any]) -> None:
        if not isinstance(desired_layouts, Mapping):
            raise OpAttributeInvalid("ConvertLayout: desired_layouts must be a dict of op name "
                                     f"-> [data_layout, kernel_layout], got {desired_layouts!r}")
        unknown = sorted(set(desired_layouts) - {"nn.conv2d"})
        if unknown:
            raise OpAttributeInvalid(f"ConvertLayout: only nn.conv2d layouts can be chosen, not "
                                     f"{', '.join(unknown)}")
        layouts = list(desired_layouts.get("nn.conv2d", ["NCHW"]))
        self.lanes = layout_lanes(layouts[0] if layouts else "NCHW", "ConvertLayout")

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        from ...target import Target

        if self.lanes == 0:
            return mod
        return _run(mod, self.lanes if self.lanes > 0 else plan_lanes(Target.current()))

