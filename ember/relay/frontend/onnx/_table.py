"""THE support table: every ONNX operator ember imports, its converter, the first version of
the operator it imports and a one-line note. ``docs/onnx_support.md`` is generated from it
(``support_markdown``; ``python tools/gen_onnx_support.py`` rewrites the file and a test
checks that the committed file is current).

Versions are the operator's own (its since-versions in ``onnx.defs``; ``_versions.py``): a
node of a model at opset 9 uses Relu-6, Conv-1, BatchNormalization-9. ``since`` is the first
version ember imports (1: every version); converters follow the differences between the
versions they import (``node.version``), and ``attr_inputs`` lists the attributes that older
versions had where newer ones take an input.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from . import (
    ops_cache,
    ops_control,
    ops_deform,
    ops_detect,
    ops_conv,
    ops_einsum,
    ops_index,
    ops_layout,
    ops_linalg,
    ops_loss,
    ops_math,
    ops_nn,
    ops_optional,
    ops_norm,
    ops_quant,
    ops_random,
    ops_reduce,
    ops_resize,
    ops_rnn,
    ops_sample,
    ops_scan,
    ops_sequence,
    ops_shape,
    ops_signal,
    ops_tensor,
    ops_tfidf,
    ops_unique,
)
from ._node import Node
from ._versions import REVIEWED_OPSET, op_version, same_as_previous

m, r = ops_math, ops_reduce
# input index -> (attribute names, the first one present is read; dtype, None: input 0's)
AttrInputs = Mapping[int, tuple[tuple[str, ...], "str | None"]]


@dataclass(frozen=True)
class OpSupport:
    """How one ONNX operator is imported: converter, note, the first version ember imports
    (``older``: why earlier ones are not), and the attributes that versions before
    ``attr_inputs_until`` had in place of inputs."""

    convert: Callable[[Node], Any]
    note: str
    since: int = 1
    older: str = ""
    attr_inputs: AttrInputs = field(default_factory=dict)
    attr_inputs_until: int = 0

    def attr_inputs_at(self, version: int) -> AttrInputs:
        return self.attr_inputs if version < self.attr_inputs_until else {}


def _e(convert: Callable[[Node], Any], note: str, since: int = 1, older: str = "",
       attr_inputs: tuple[int, AttrInputs] | None = None) -> OpSupport:
    until, inputs = attr_inputs or (0, {})
    return OpSupport(convert, note, since, older, dict(inputs), until)


I64 = "int64"
RT_AXES = "; axes known only at run time: each axis reduced where named (rank x the work)"
OLD_BROADCAST = "; broadcast/axis attributes before version 7"
RNN_NOTE = ("; forward, reverse, bidirectional; float32 with the activations Sigmoid, Tanh, "
            "Relu, LeakyRelu, HardSigmoid: one kernel for the whole sequence, any length, "
            "static or symbolic (every executor); otherwise (or with relay.frontend.rnn_kernel "
            "False) step by step: a known length up to relay.frontend.max_unroll (128) "
            "unrolls, a longer or symbolic one runs as a loop (VM)")
RANDOM_NOTE = ("; values differ from onnxruntime's; with seed: the same on every import and "
               "run, without: a seed drawn at import")
RNN_GEMMS = ("nn.lstm/nn.gru/nn.rnn: the input projection as one GEMM, each step's "
             "product on the GEMM micro-kernel with the gate math fused")
SUPPORT: dict[str, OpSupport] = {
    # elementwise arithmetic, comparison and logic
    "Abs": _e(m.unary("abs"), "abs"),
    "Acos": _e(m.unary("acos"), "acos"),
    "Acosh": _e(m.acosh, "log(x + sqrt(x^2 - 1))"),
    "Add": _e(m.binary("add"), "add, numpy broadcasting" + OLD_BROADCAST),
    "And": _e(m.binary("logical_and"), "logical_and" + OLD_BROADCAST),
    "Asin": _e(m.unary("asin"), "asin"),
    "Asinh": _e(m.asinh, "log(x + sqrt(x^2 + 1))"),
    "Atan": _e(m.unary("atan"), "atan"),
    "Atanh": _e(m.atanh, "log((1 + x) / (1 - x)) / 2"),
    "BitwiseAnd": _e(m.binary("bitwise_and"), "bitwise_and, numpy broadcasting"),
    "BitwiseNot": _e(m.unary("bitwise_not"), "bitwise_not"),
    "BitwiseOr": _e(m.binary("bitwise_or"), "bitwise_or, numpy broadcasting"),
    "BitwiseXor": _e(m.binary("bitwise_xor"), "bitwise_xor, numpy broadcasting"),
    "Ceil": _e(m.unary("ceil"), "ceil"),
    "Cos": _e(m.unary("cos"), "cos"),
    "Cosh": _e(m.unary("cosh"), "cosh"),
    "Div": _e(m.binary("divide"), "divide; integer division truncates, as in onnxruntime"
              + OLD_BROADCAST),
    "Equal": _e(m.binary("equal"), "equal" + OLD_BROADCAST),
    "Erf": _e(m.unary("erf"), "erf"),
    "Exp": _e(m.unary("exp"), "exp"),
    "Floor": _e(m.unary("floor"), "floor"),
    "Greater": _e(m.binary("greater"), "greater" + OLD_BROADCAST),
    "GreaterOrEqual": _e(m.binary("greater_equal"), "greater_equal"),
    "Identity": _e(m.identity, "the input itself"),
    "IsInf": _e(m.is_inf, "isinf, with detect_positive/detect_negative"),
    "IsNaN": _e(m.unary("isnan"), "isnan"),
    "Less": _e(m.binary("less"), "less" + OLD_BROADCAST),
    "LessOrEqual": _e(m.binary("less_equal"), "less_equal"),
    "Log": _e(m.unary("log"), "log"),
    "Max": _e(m.variadic("maximum"), "maximum over any number of inputs"),
    "Mean": _e(m.mean, "sum of the inputs divided by their count"),
    "Min": _e(m.variadic("minimum"), "minimum over any number of inputs"),
    "Mod": _e(m.mod, "fmod=1: C fmod; fmod=0: floor modulo (integers)"),
    "Mul": _e(m.binary("multiply"), "multiply" + OLD_BROADCAST),
    "Neg": _e(m.unary("negative"), "negative"),
    "Not": _e(m.unary("logical_not"), "logical_not"),
    "Or": _e(m.binary("logical_or"), "logical_or" + OLD_BROADCAST),
    "Pow": _e(m.pow_, "power; the exponent is cast to the base's dtype" + OLD_BROADCAST),
    "Reciprocal": _e(m.reciprocal, "1 / x"),
    "Round": _e(m.round_half_even, "ties to even (the round_half_even op, C nearbyint; float16 "
                "decomposed)"),
    "Sign": _e(m.unary("sign"), "sign"),
    "Sin": _e(m.unary("sin"), "sin"),
    "Sinh": _e(m.unary("sinh"), "sinh"),
    "Sqrt": _e(m.unary("sqrt"), "sqrt"),
    "Sub": _e(m.binary("subtract"), "subtract" + OLD_BROADCAST),
    "Sum": _e(m.variadic("add"), "sum over any number of inputs"),
    "Tan": _e(m.unary("tan"), "tan"),
    "Where": _e(m.where, "where, three-way broadcasting"),
    "Xor": _e(m.binary("logical_xor"), "logical_xor" + OLD_BROADCAST),
    # activations
    "Celu": _e(m.celu, "decomposed: relu(x) + min(0, alpha * (exp(x / alpha) - 1))"),
    "Elu": _e(m.elu, "decomposed with where and exp"),
    "Gelu": _e(m.gelu, "decomposed through erf (approximate='none') or tanh"),
    "HardSigmoid": _e(m.hard_sigmoid, "clip(alpha * x + beta, 0, 1)"),
    "HardSwish": _e(m.hard_swish, "x * clip(x / 6 + 1 / 2, 0, 1)"),
    "LeakyRelu": _e(m.leaky_relu, "nn.leaky_relu"),
    "Mish": _e(m.mish, "x * tanh(softplus(x))"),
    "PRelu": _e(m.prelu, "where(x < 0, x * slope, x): the slope may be any broadcastable shape "
                "(before version 7, a vector is one slope per channel)"),
    "Relu": _e(m.unary("nn.relu"), "nn.relu"),
    "Selu": _e(m.selu, "decomposed with where and exp"),
    "Shrink": _e(m.shrink, "decomposed with where"),
    "Sigmoid": _e(m.unary("sigmoid"), "sigmoid"),
    "Softplus": _e(m.softplus, "relu(x) + log(1 + exp(-abs(x))), without overflow"),
    "Softsign": _e(m.softsign, "x / (1 + abs(x))"),
    "Swish": _e(m.swish, "x * sigmoid(alpha * x)"),
    "Tanh": _e(m.unary("tanh"), "tanh"),
    "ThresholdedRelu": _e(m.thresholded_relu, "where(x > alpha, x, 0)"),
    # casts
    "BitShift": _e(ops_layout.bit_shift, "x * 2^y (wrapping) or floor(x / 2^y)"),
    "Cast": _e(m.cast, "cast; float to int truncates; string types are not supported; "
               "Cast-1 names the type"),
    "BitCast": _e(m.bit_cast, "reinterpret (same width; float <-> integer through memcpy in "
                  "C); not float16/bfloat16"),
    "CastLike": _e(m.cast_like, "cast to the second input's dtype"),
    "Clip": _e(m.clip, "clip for constant float bounds, else maximum/minimum; min/max "
               "attributes before version 11", attr_inputs=(11, {1: (("min",), None),
                                                                 2: (("max",), None)})),
    # dense, convolution, pooling, normalisation
    "AveragePool": _e(ops_conv.average_pool, "1-D and 2-D; pads, auto_pad, ceil_mode, "
                      "count_include_pad, dilations"),
    "BatchNormalization": _e(ops_nn.batch_norm, "inference mode (nn.batch_norm, folded by "
                             "SimplifyInference); training mode decomposed (batch statistics, "
                             "running mean/var outputs); spatial=0 before version 9: "
                             "per-element statistics, elementwise"),
    "Conv": _e(ops_conv.conv, "1-D and 2-D; pads, auto_pad, strides, dilations, group, bias"),
    "ConvTranspose": _e(ops_conv.conv_transpose, "1-D and 2-D; output_padding, output_shape, "
                        "auto_pad, group, dilations"),
    "Dropout": _e(ops_nn.dropout, "inference: the identity (mask all True; ones of the "
                  "input's type before version 10)"),
    "Gemm": _e(ops_nn.gemm, "nn.dense with alpha, beta, transA, transB, optional C"),
    "GlobalAveragePool": _e(ops_conv.global_average_pool, "any spatial rank"),
    "GlobalLpPool": _e(ops_conv.global_lp_pool, "(sum of abs(x)^p over the spatial axes)^(1/p)"),
    "GlobalMaxPool": _e(ops_conv.global_max_pool, "any spatial rank"),
    "GroupNormalization": _e(ops_norm.group_norm, "decomposed over channel groups; scale and "
                             "bias per channel (21); static shapes"),
    "Hardmax": _e(ops_nn.hardmax, "one_hot of argmax; opset < 13 coerces to 2-D"),
    "InstanceNormalization": _e(ops_nn.instance_norm, "decomposed: mean and variance over the "
                                "spatial axes"),
    "LayerNormalization": _e(ops_nn.layer_norm, "nn.layer_norm over the last axis, else "
                             "decomposed; Mean and InvStdDev outputs"),
    "LpNormalization": _e(ops_norm.lp_normalization, "x / the L1 or L2 norm along axis (0 "
                          "where the norm is 0)"),
    "LogSoftmax": _e(ops_nn.log_softmax, "nn.log_softmax; opset < 13 coerces to 2-D"),
    "LRN": _e(ops_nn.lrn, "NCHW; average pooling over channels"),
    "MatMul": _e(ops_nn.matmul, "numpy matmul: nn.dense for a 2-D right operand, else "
                 "nn.batch_matmul with broadcast batch axes"),
    "MaxUnpool": _e(ops_layout.max_unpool, "scatter_elements of X at its indices per (batch, "
                    "channel) row; output_shape must be known; small tensors"),
    "MeanVarianceNormalization": _e(ops_norm.mean_variance_normalization, "decomposed as "
                                    "ONNX's function body (epsilon 1e-9 added to the std)"),
    "NegativeLogLikelihoodLoss": _e(ops_loss.negative_log_likelihood_loss, "gather of the "
                                    "target's class, weight, ignore_index; mean/sum/none"),
    "SoftmaxCrossEntropyLoss": _e(ops_loss.softmax_cross_entropy_loss, "log_softmax over "
                                  "axis 1, then NegativeLogLikelihoodLoss; log_prob output"),
    "LpPool": _e(ops_conv.lp_pool, "(average pool of abs(x)^p, pads counted, times the window "
                 "size)^(1/p); 1-D and 2-D"),
    "MaxPool": _e(ops_conv.max_pool, "1-D and 2-D; pads, auto_pad, ceil_mode, dilations; no "
                  "Indices output (storage_order ignored)"),
    "RMSNormalization": _e(ops_norm.rms_normalization, "x * rsqrt(mean(x^2) + epsilon) over "
                           "the axes from axis on, times scale"),
    "Softmax": _e(ops_nn.softmax, "nn.softmax; opset < 13 coerces to 2-D"),
    # quantization (8-bit convs and products with constant weights on the int8 kernels,
    # everything else decomposed; 8- and 16-bit integers)
    "ConvInteger": _e(ops_quant.conv_integer, "int32 conv2d of the zero-point-shifted x and "
                      "w (per-channel w zero points); 1-D and 2-D"),
    "DequantizeLinear": _e(ops_quant.dequantize_linear, "(x - zero point) * scale; "
                           "per-tensor, per-axis and blocked; 8/16-bit integers and int32"),
    "DynamicQuantizeLinear": _e(ops_quant.dynamic_quantize_linear, "uint8 with the scale and "
                                "zero point of [min(x, 0), max(x, 0)] (min and max in one "
                                "pass, minmax.h, for static shapes)"),
    "MatMulInteger": _e(ops_quant.matmul_integer, "int8 GEMM kernel for a constant B "
                        "(qdense.h); else int32 matmul of the zero-point-shifted operands "
                        "(per-row/per-column zero points)"),
    "QLinearConv": _e(ops_quant.qlinear_conv, "int8 conv kernel with the "
                      "requantization fused (qconv.h) for 2-D convs by constant weights; else "
                      "int32 conv2d, requantized in float32 with ties to even; per-channel w "
                      "scales; 1-D and 2-D"),
    "QLinearMatMul": _e(ops_quant.qlinear_matmul, "int32 matmul, requantized in float32 with "
                        "ties to even; float16 scales"),
    "QuantizeLinear": _e(ops_quant.quantize_linear, "saturate(round(x / scale) + zero point), "
                         "ties to even; per-tensor, per-axis and blocked; 8/16-bit integers; "
                         "DequantizeLinear -> Conv [-> Relu/Clip] -> QuantizeLinear (QDQ) on the "
                         "int8 conv kernel"),
    # reductions
    "ArgMax": _e(r.arg_max, "argmax with keepdims and select_last_index, int64 result"),
    "ArgMin": _e(r.arg_min, "argmin with keepdims and select_last_index, int64 result"),
    "ReduceL1": _e(r.REDUCERS["ReduceL1"], "sum(abs(x))"),
    "ReduceL2": _e(r.REDUCERS["ReduceL2"], "sqrt(sum(x * x))"),
    "ReduceLogSum": _e(r.REDUCERS["ReduceLogSum"], "log(sum(x))"),
    "ReduceLogSumExp": _e(r.REDUCERS["ReduceLogSumExp"], "max + log(sum(exp(x - max)))"),
    "ReduceMax": _e(r.REDUCERS["ReduceMax"], "max; axes attribute (< 18) or input (18+)" + RT_AXES),
    "ReduceMean": _e(r.REDUCERS["ReduceMean"], "mean; axes attribute (< 18) or input (18+)"
                     + RT_AXES),
    "ReduceMin": _e(r.REDUCERS["ReduceMin"], "min; axes attribute (< 18) or input (18+)" + RT_AXES),
    "ReduceProd": _e(r.REDUCERS["ReduceProd"], "prod; axes attribute (< 18) or input (18+)"
                     + RT_AXES),
    "ReduceSum": _e(r.REDUCERS["ReduceSum"], "sum; axes attribute (< 13) or input (13+), "
                    "noop_with_empty_axes" + RT_AXES),
    "ReduceSumSquare": _e(r.REDUCERS["ReduceSumSquare"], "sum(x * x)"),
    # shapes and data movement
    "Compress": _e(ops_layout.compress, "take of the indices where the condition holds (as "
                   "NonZero: VM, run-time length)"),
    "Concat": _e(ops_tensor.concat, "concatenate; axis 1 by default before version 4"),
    "Constant": _e(ops_shape.constant, "value, value_float(s), value_int(s); not sparse or "
                   "string"),
    "CenterCropPad": _e(ops_layout.center_crop_pad, "strided_slice and nn.pad (their dyn forms "
                        "for a run-time shape)"),
    "Col2Im": _e(ops_layout.col2im, "conv2d_transpose of the columns with a 0/1 kernel; 2-D "
                 "images; image and block shapes must be known"),
    "ConstantOfShape": _e(ops_shape.constant_of_shape, "a constant for known shapes; from "
                          "input shapes for symbolic ones; dyn.full for run-time ones"),
    "DeformConv": _e(ops_deform.deform_conv, "2-D: bilinear samples gathered at the offset "
                     "taps (times mask), then nn.batch_matmul per group, plus bias; static "
                     "shapes"),
    "DepthToSpace": _e(ops_tensor.depth_to_space, "nn.depth_to_space, DCR and CRD"),
    "Det": _e(ops_linalg.det, "Gaussian elimination with partial pivoting unrolled over n "
              "(n <= 64), batched; static shapes"),
    "EyeLike": _e(ops_layout.eye_like, "a constant identity (diagonal k); static shape"),
    "Expand": _e(ops_shape.expand, "broadcast_to for static shapes, broadcast_to_like (or "
                 "where() against its zeros) for another tensor's Shape, where() against a "
                 "template for other symbolic ones, dyn.broadcast_to for run-time ones"),
    "Flatten": _e(ops_tensor.flatten, "reshape to 2-D (also with dynamic sizes)"),
    "NonMaxSuppression": _e(ops_detect.non_max_suppression, "a C kernel: one sort per batch "
                            "and class, IoU against the boxes selected before; any batch, "
                            "class and box count; ONNX's reference rules (VM)"),
    "NonZero": _e(ops_layout.non_zero, "coordinates padded to the input's size by "
                  "nonzero_padded (O(size^2)), cut to the run-time count (VM); static input "
                  "shape"),
    "OneHot": _e(ops_tensor.one_hot, "one_hot (dyn.one_hot for a run-time depth); negative "
                 "indices wrap"),
    "Pad": _e(ops_tensor.pad, "constant, reflect and edge; negative pads crop; axes (18+); "
              "dyn.nn.pad for run-time pads or axes; pads/value attributes before version 11",
              attr_inputs=(11, {1: (("pads", "paddings"), I64), 2: (("value",), None)})),
    "Range": _e(ops_shape.range_, "a constant for known bounds; 0..n for a symbolic n; "
                "arange of run-time bounds otherwise"),
    "Reshape": _e(ops_shape.reshape, "reshape (a run-time shape reduced to the input's own "
                  "sizes and one -1 when it can be), else dyn.reshape; the shape attribute "
                  "before version 5",
                  attr_inputs=(5, {1: (("shape",), I64)})),
    "Shape": _e(ops_shape.shape, "a constant for static shapes; start/end (15+)"),
    "Size": _e(ops_shape.size, "a constant for static shapes"),
    "Slice": _e(ops_tensor.slice_, "strided_slice; dyn.strided_slice for run-time "
                "starts/ends/axes/steps (attributes before version 10)",
                attr_inputs=(10, {1: (("starts",), I64), 2: (("ends",), I64),
                                  3: (("axes",), I64)})),
    "SpaceToDepth": _e(ops_tensor.space_to_depth, "nn.space_to_depth (DCR); CRD (28) by "
                       "reshape and transpose"),
    "Split": _e(ops_tensor.split, "split; sizes from the attribute (< 13) or input (1, "
                "13+; dyn.strided_slice when known at run time only), num_outputs (18+)"),
    "Squeeze": _e(ops_tensor.squeeze, "squeeze; axes attribute (< 13) or input (13+; a "
                  "dyn.reshape when known at run time only)"),
    "TensorScatter": _e(ops_cache.tensor_scatter, "scatter_elements at write_indices + "
                        "position along axis (modulo its size in circular mode); static "
                        "shapes"),
    "Tile": _e(ops_tensor.tile, "tile; dyn.tile for run-time repeats", since=6,
               older="Tile-1 takes a tile count and an axis as inputs"),
    "Transpose": _e(ops_tensor.transpose, "transpose"),
    "Trilu": _e(ops_tensor.trilu, "where() with a constant triangle mask; index grids for "
                "symbolic sizes or a run-time k"),
    "Unique": _e(ops_unique.unique, "relay unique (pairwise comparisons, O(n^2)) cut to the "
                 "run-time count (VM); sorted and unsorted, flattened or slices along axis; "
                 "static input shape"),
    "Unsqueeze": _e(ops_tensor.unsqueeze, "expand_dims; axes attribute (< 13) or input (13+; "
                    "a dyn.reshape when known at run time only)"),
    # indexing, sorting, resampling
    "CumProd": _e(ops_layout.cum_prod, "cumprod with exclusive and reverse"),
    "CumSum": _e(ops_index.cum_sum, "cumsum with exclusive and reverse; a run-time axis "
                 "sums along each axis and picks one"),
    "Einsum": _e(ops_einsum.einsum, "transpose/reshape/nn.batch_matmul per operand pair; "
                 "ellipsis; diagonals (repeated subscripts) of static sizes"),
    "Gather": _e(ops_index.gather, "take; negative indices count from the end, one out of "
                 "range is an error (at import when constant, else check_indices at run time)"),
    "GatherElements": _e(ops_index.gather_elements, "gather; indices range-checked as Gather's"),
    "GatherND": _e(ops_index.gather_nd, "gather_nd with batch_dims; indices range-checked as "
                   "Gather's"),
    "AffineGrid": _e(ops_sample.affine_grid, "constant base grid times theta^T "
                     "(batch_matmul), or from arange for a run-time size; 2-D and 3-D; a "
                     "single aligned point at -1 (ONNX's reference)"),
    "GridSample": _e(ops_sample.grid_sample, "coordinate arithmetic and one gather per tap: "
                     "nearest, (bi)linear, (bi)cubic; zeros, border, reflection; 2-D and 3-D; "
                     "static shapes"),
    "MaxRoiPool": _e(ops_sample.max_roi_pool, "masked maxima over each ROI's bins (Caffe's "
                     "rounding and bin edges, as onnxruntime); 0 for an empty bin"),
    "RoiAlign": _e(ops_sample.roi_align, "bilinear samples gathered per ROI and bin, "
                   "averaged or maxed; both coordinate modes; sampling_ratio must be > 0"),
    "Resize": _e(ops_resize.resize, "image.resize2d on NCW/NCHW: nearest, linear, cubic; "
                 "every coordinate mode (tf_crop_and_resize: nearest and linear, axis by axis "
                 "with gathers); keep_aspect_ratio_policy; antialias (linear, cubic) by an "
                 "(output, input) weight matrix per axis; version 10 as "
                 "Upsample; constant scales of a symbolic height/width as image.resize2d of "
                 "size 0 (scaled at run time); dyn.image.resize2d for run-time scales/sizes"),
    "ScatterElements": _e(ops_index.scatter_elements, "scatter_elements; reduction none, add, "
                          "mul (16+), max, min (18+); indices range-checked as Gather's"),
    "Upsample": _e(ops_resize.upsample, "image.resize2d, asymmetric coordinates: nearest "
                   "(floor) and linear; scales attribute (7) or input (9)"),
    "ReverseSequence": _e(ops_layout.reverse_sequence, "gather along time of computed "
                          "indices; static shapes"),
    "Scatter": _e(ops_index.scatter_elements, "scatter_elements (the name of ScatterElements "
                  "before version 11)"),
    "ScatterND": _e(ops_index.scatter_nd, "scatter_nd; reduction none, add, mul (16+), max, "
                    "min (18+); indices range-checked as Gather's"),
    "TfIdfVectorizer": _e(ops_tfidf.tfidf_vectorizer, "n-gram counts of an integer pool by "
                          "slices and comparisons; TF, IDF, TFIDF; static input length"),
    # random numbers: relay.random on a key made at import (see docs/onnx.md)
    "Bernoulli": _e(ops_random.bernoulli, "a uniform draw below the probability" + RANDOM_NOTE),
    "Multinomial": _e(ops_random.multinomial, "relay.random.multinomial of the exponentiated "
                      "log-probabilities (inverse CDF); int32/int64" + RANDOM_NOTE),
    "RandomNormal": _e(ops_random.random_normal, "relay.random.normal (Box-Muller)"
                       + RANDOM_NOTE),
    "RandomNormalLike": _e(ops_random.random_normal_like, "relay.random.normal of the "
                           "input's shape" + RANDOM_NOTE),
    "RandomUniform": _e(ops_random.random_uniform, "relay.random.uniform" + RANDOM_NOTE),
    "RandomUniformLike": _e(ops_random.random_uniform_like, "relay.random.uniform of the "
                            "input's shape" + RANDOM_NOTE),
    # signal processing
    "BlackmanWindow": _e(ops_signal.blackman_window, "a constant, or from arange(size) at run "
                         "time"),
    "DFT": _e(ops_signal.dft, "forward float32 transforms of a length with prime factors 2, "
              "3, 5 (and at least 32): an FFT (`signal.frames_fft`); others dense products "
              "with constant cos/sin matrices (forward: one product, cos and sin interleaved); "
              "inverse, onesided (rfft, irfft), dft_length; the transformed axis' length and "
              "the axis must be known, other axes may be dynamic"),
    "HammingWindow": _e(ops_signal.hamming_window, "a constant, or from arange(size) at run "
                        "time"),
    "HannWindow": _e(ops_signal.hann_window, "a constant, or from arange(size) at run time"),
    "MelWeightMatrix": _e(ops_signal.mel_weight_matrix, "a constant (ONNX's triangular "
                          "filters); its inputs must be known"),
    "STFT": _e(ops_signal.stft, "with a known step and constant (or no) window and a frame "
               "length of prime factors 2, 3, 5: one FFT kernel (`signal.frames_fft`) that "
               "gathers, windows and transforms the frames (run-time batch and signal length "
               "allowed); otherwise frames gathered by an index table (a run-time step or "
               "signal length allowed), windowed (a constant window folded into the DFT), then "
               "DFT; the frame length must be known"),
    "TopK": _e(ops_index.top_k, "topk (dyn.topk for a run-time K; an attribute before "
               "version 10); sorted, ties to the lower index",
               attr_inputs=(10, {1: (("k",), I64)})),
    # control flow (run by the VM)
    "If": _e(ops_control.if_, "Relay If (VM); a known condition imports only the taken "
             "branch"),
    "Loop": _e(ops_control.loop, "a recursive local function (VM); loop-carried shapes may "
               "change; scan outputs"),
    # optionals: resolved at import where presence is known, else Options (ops_optional.py)
    "Optional": _e(ops_optional.optional, "the value, or empty (type attribute); an Option "
                   "(VM) where presence is known at run time only (graph inputs, If, Loop)"),
    "OptionalGetElement": _e(ops_optional.optional_get_element, "the value (an import error "
                             "for an empty optional, a failed match on the VM for an empty "
                             "Option); a tensor or sequence itself"),
    "OptionalHasElement": _e(ops_optional.optional_has_element, "a constant where presence "
                             "is known at import, else a match on the Option (VM)"),
    # sequences: a tuple when the length is known at import, else a Prelude List (VM)
    "SequenceMap": _e(ops_optional.sequence_map, "the body once per position of sequences "
                      "of known length (unrolled), outputs gathered into tuples; Lists "
                      "(run-time length) zipped and mapped by @map per output (VM)"),
    "SequenceConstruct": _e(ops_sequence.sequence_construct, "a tuple of the tensors"),
    "SequenceEmpty": _e(ops_sequence.sequence_empty, "an empty tuple (a Nil list once it "
                        "must be a List)"),
    "SequenceAt": _e(ops_sequence.sequence_at, "the tensor itself at a known position; @nth "
                     "of a List (VM) otherwise"),
    "SequenceInsert": _e(ops_sequence.sequence_insert, "a longer tuple at a known position; "
                         "@concat / @insert_at on a List (VM) otherwise"),
    "SequenceErase": _e(ops_sequence.sequence_erase, "a shorter tuple at a known position; "
                        "@remove_at on a List (VM) otherwise"),
    "SequenceLength": _e(ops_sequence.sequence_length, "a constant for a tuple; @length of "
                         "a List (VM)"),
    "SplitToSequence": _e(ops_sequence.split_to_sequence, "a tuple of slices; the sizes and "
                          "the number of pieces must be known"),
    "ConcatFromSequence": _e(ops_sequence.concat_from_sequence, "concatenate / stack of a "
                             "tuple; a fold of concatenate over a List (VM)"),
    "Scan": _e(ops_scan.scan, "the body once per step, as the recurrent networks; scan "
               "axes and directions; Scan-8 with a known batch size and sequence_lens absent "
               "or the full length"),
    # recurrent networks: a known sequence length unrolls, a symbolic one loops (VM)
    "GRU": _e(ops_rnn.gru, RNN_GEMMS + " (two products per step without linear_before_reset); "
              "sequence_lens, layout, clip, activations" + RNN_NOTE),
    "LSTM": _e(ops_rnn.lstm, RNN_GEMMS + "; peepholes, input_forget, sequence_lens, layout, "
               "clip, activations" + RNN_NOTE),
    "RNN": _e(ops_rnn.rnn, RNN_GEMMS + "; sequence_lens, layout, clip, activations" + RNN_NOTE),
}


def node_support(op_type: str, opset: int) -> tuple[int | None, str | None]:
    """(the version of default-domain ``op_type`` a model of ``opset`` uses, None when ember
    imports it, else why not: for the error message)."""
    version, undefined = op_version(op_type, opset)
    if version is None:
        return None, undefined
    entry = SUPPORT.get(op_type)
    if entry is None:
        return version, "not supported"
    if version < entry.since:
        why = f": {entry.older}" if entry.older else ""
        return version, f"ember imports {op_type} from version {entry.since}{why}"
    if version > REVIEWED_OPSET and not same_as_previous(op_type, version):
        return version, (f"version {version} changed the operator's inputs or attributes, and "
                         f"ember's table was checked against opsets up to {REVIEWED_OPSET}")
    return version, None


def support_markdown() -> str:
    """``docs/onnx_support.md``: the table above as Markdown."""
    lines = [
        "# ONNX operators supported by `ember.relay.frontend.from_onnx`",
        "",
        ("Generated from `ember/relay/frontend/onnx/_table.py` by "
         "`python tools/gen_onnx_support.py`; do not edit by hand."),
        "",
        (f"{len(SUPPORT)} operator types of the default ONNX domain. A model of any opset "
         "from 1 to the newest the installed `onnx` package defines imports when each of its "
         "nodes does: a node uses the operator's version at the model's opset (Relu-6 in an "
         "opset-9 model), and *versions* below says which versions ember imports "
         "(\"all\", or from which one on). The table was checked against the definitions up "
         f"to opset {REVIEWED_OPSET}; later versions import when they keep the inputs, "
         "outputs and attributes of the version before. See [onnx.md](onnx.md) for how "
         "importing works."),
        "",
        "| operator | versions | how it is imported |",
        "|---|---|---|",
    ]
    for name in sorted(SUPPORT):
        e = SUPPORT[name]
        versions = "all" if e.since == 1 else f"{e.since}+"
        lines.append(f"| {name} | {versions} | {e.note} |")
    return "\n".join(lines) + "\n"
