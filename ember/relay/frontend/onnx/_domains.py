"""Which converter imports a node, by its domain: the default ONNX domain's support table
(``_table.SUPPORT``, by the operator's version at the model's opset) or com.microsoft's
(``ops_contrib``), and the operators that onnxruntime defines in the default domain before
ONNX does (LayerNormalization before opset 17, SimplifiedLayerNormalization), which models
saved by onnxruntime's optimiser carry, and ONNX's experimental operators of opsets 1-9
(``ops_experimental``: ImageScaler, Scale, ..., and the versions of ThresholdedRelu and
MeanVarianceNormalization before ONNX defined them), which ONNX no longer defines and older
Model Zoo files still use.
"""
from __future__ import annotations

import functools
from ._load import DEFAULT_DOMAINS
from ._table import SUPPORT, OpSupport, node_support
from ._table import support_markdown as _default_markdown
from .ops_contrib import DOMAIN as CONTRIB_DOMAIN
from .ops_contrib import contrib_table
from . import ops_experimental as ex
from .ops_math import thresholded_relu

# default-domain names onnxruntime defines itself (version 1) -> the table that imports them
ONNXRUNTIME_DEFAULT = {"LayerNormalization": "default", "SimplifiedLayerNormalization": "contrib"}

# ONNX's experimental operators (opsets 1-9; onnx.defs no longer has them), as onnxruntime runs
EXPERIMENTAL = {
    "ImageScaler": OpSupport(ex.image_scaler, "scale * x + bias[c] over NCHW data"),
    "Scale": OpSupport(ex.scale, "scale * x"),
    "Affine": OpSupport(ex.affine, "alpha * x + beta"),
    "ScaledTanh": OpSupport(ex.scaled_tanh, "alpha * tanh(beta * x)"),
    "ParametricSoftplus": OpSupport(ex.parametric_softplus, "alpha * softplus(beta * x)"),
    "Crop": OpSupport(ex.crop, "strided_slice of the height and width (border, or a window "
                      "of `scale` at the top-left border); height and width known at import"),
    "ThresholdedRelu": OpSupport(thresholded_relu, "before opset 10: as version 10"),
    "MeanVarianceNormalization": OpSupport(
        ex.mean_variance_normalization_1, "before opset 9, as onnxruntime: over "
        "axes 0, 2, 3 (and 1 with across_channels); normalize_variance"),
}


@functools.cache
def contrib() -> dict[str, OpSupport]:
    return contrib_table()


def lookup(domain: str, op_type: str, opset: int) -> tuple[int | None, OpSupport | None,
                                                            str | None]:
    """(version, entry, None) for a node ember imports; (version or None, None, why not)
    otherwise. ``opset`` is the model's default-domain opset."""
    if domain in DEFAULT_DOMAINS:
        version, why = node_support(op_type, opset)
        if version is None and op_type in ONNXRUNTIME_DEFAULT:
            table = SUPPORT if ONNXRUNTIME_DEFAULT[op_type] == "default" else contrib()
            return None, table[op_type], None
        if version is None and op_type in EXPERIMENTAL:
            return None, EXPERIMENTAL[op_type], None
        return version, (SUPPORT[op_type] if why is None else None), why
    if domain == CONTRIB_DOMAIN:
        entry = contrib().get(op_type)
        return 1, entry, (None if entry is not None else "not supported")
    return None, None, (f"custom domain {domain!r}: ember imports the default ONNX domain and "
                        f"{CONTRIB_DOMAIN}")


def support_markdown() -> str:
    """``docs/onnx_support.md``: the default domain's table, then com.microsoft's."""
    lines = [
        "",
        f"## {CONTRIB_DOMAIN}",
        "",
        (f"{len(contrib())} operators of onnxruntime's {CONTRIB_DOMAIN} domain (version 1), "
         "which its optimiser and transformer exporters leave in models; also "
         + " and ".join(sorted(ONNXRUNTIME_DEFAULT)) + " in the default domain at opsets "
         "where ONNX does not define them."),
        "",
        "| operator | how it is imported |",
        "|---|---|",
    ]
    lines += [f"| {name} | {e.note} |" for name, e in sorted(contrib().items())]
    lines += ["", "## Experimental operators of ONNX opsets 1-9", "",
              ("Operators ONNX marked experimental and removed at opset 10 (no longer in "
               "`onnx.defs`), which older Model Zoo files use and onnxruntime runs; imported "
               "at any opset where ONNX does not define the name."), "",
              "| operator | how it is imported |", "|---|---|"]
    lines += [f"| {name} | {e.note} |" for name, e in sorted(EXPERIMENTAL.items())]
    return _default_markdown() + "\n".join(lines) + "\n"


def describe(domain: str, op_type: str, version: int | None) -> str:
    """How a node's operator is named in messages: ``Op-version`` or ``domain.Op``."""
    if domain not in DEFAULT_DOMAINS:
        return f"{domain}.{op_type}"
    return op_type if version is None else f"{op_type}-{version}"

