"""SegFormer-style decoders against onnxruntime: token maps seen as images (Transpose,
Reshape), resized (every coordinate mode, nearest and linear, odd sizes), joined along the
channels and read by a 1x1 conv, so that the concat is written in the conv's blocked layout
(``te/piecewise.py``: split by blocks when the parts are whole blocks, the per-element form
when they are not) in one kernel with the resizes and the reshapes."""
from __future__ import annotations

import numpy as np
from _onnx_util import SUMS, OnnxCase, check, helper, rand

COORDS = ["half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric"]
OUT = (9, 13)  # from 5 x 7 maps: odd sizes, neither an integer scale


def _decoder(name: str, mode: str, coord: str, channels: tuple[int, ...], seed: int
             ) -> OnnxCase:
    """Each part: tokens (1, 35, c) -> (1, c, 5, 7) -> resized to OUT; the last part is a
    full-size map taken as it is; concat -> 1x1 conv of 8 channels."""
    rng = np.random.default_rng(seed)
    nodes, inputs, inits, parts = [], {}, {"roi": np.zeros(0, "float32")}, []
    for k, c in enumerate(channels[:-1]):
        inputs[f"t{k}"] = rand(rng, 1, 35, c)
        inits[f"shape{k}"] = np.array([1, c, 5, 7], "int64")
        inits[f"sizes{k}"] = np.array([1, c, *OUT], "int64")
        extra = {"nearest_mode": "floor"} if mode == "nearest" else {}
        nodes += [helper.make_node("Transpose", [f"t{k}"], [f"tt{k}"], perm=[0, 2, 1],
                                   name=f"transpose{k}"),
                  helper.make_node("Reshape", [f"tt{k}", f"shape{k}"], [f"img{k}"],
                                   name=f"reshape{k}"),
                  helper.make_node("Resize", [f"img{k}", "roi", "", f"sizes{k}"], [f"up{k}"],
                                   mode=mode, coordinate_transformation_mode=coord,
                                   name=f"resize{k}", **extra)]
        parts.append(f"up{k}")
    inputs["full"] = rand(rng, 1, channels[-1], *OUT)
    inits["w"] = rand(rng, 8, sum(channels), 1, 1, lo=-0.3, hi=0.3)
    nodes += [helper.make_node("Concat", [*parts, "full"], ["cat"], axis=1),
              helper.make_node("Conv", ["cat", "w"], ["out"])]
    return OnnxCase(name, nodes, inputs, ["out"], inits, tol=SUMS)


def test_resized_token_maps_joined_in_whole_blocks_match_onnxruntime():
    cases = [_decoder(f"{mode}_{coord}", mode, coord, (8, 16, 8), seed=i)
             for i, (mode, coord) in enumerate((m, c) for m in ("linear", "nearest")
                                               for c in COORDS)]
    check(cases)


def test_resized_token_maps_joined_in_ragged_parts_match_onnxruntime():
    # parts of 12 and 5 channels and a full map of 7: the join is not in whole blocks
    check([_decoder("ragged", "linear", "pytorch_half_pixel", (12, 5, 7), seed=9),
           _decoder("ragged_nearest", "nearest", "asymmetric", (4, 12, 8), seed=10)])
