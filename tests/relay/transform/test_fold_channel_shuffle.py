"""FoldChannelShuffle: each rewrite as a before/expected pair (ShuffleNetV2's halves of 58
channels in NCHW16c), the graphs it must leave alone, results against the unrewritten graph
(interpreter), and small ShuffleNetV2s as torchvision exports them, built, against
onnxruntime at batch 1 and 2."""
from __future__ import annotations

import numpy as np
import pytest
from _pass_helpers import (
    assert_built_onnx_matches_onnxruntime,
    assert_main_equal,
    assert_same_result,
    parse,
    run,
)

import ember
from ember.relay.transform import FoldChannelShuffle
from ember.relay.transform.fold_channel_shuffle import RULES

MAPS = "%a: Tensor[(2, 4, 3, 5, 16), float32], %b: Tensor[(2, 4, 3, 5, 16), float32]"
MAP_C = "%c: Tensor[(2, 4, 3, 5, 16), float32]"
RUNTIME_MAPS = MAPS.replace("(2,", "(?,")


def view(x: str, c: int = 58, lanes: int = 16) -> str:
    """AlterOpLayout's way back from a blocked map of c real channels."""
    back = f'layout_transform({x}, src_layout="NCHW{lanes}c", dst_layout="NCHW")'
    return back if c % lanes == 0 else f"strided_slice({back}, begin=[0], end=[{c}], axes=[1])"


def shuffle(u: str, v: str, c: int = 116, groups: int = 2, axes: str = "0, 2, 1, 3, 4") -> str:
    """torchvision's channel shuffle of the concatenation of u and v, (2, c, 3, 5)."""
    return (f"reshape(transpose(reshape(concatenate(({u}, {v}), axis=1), newshape=[2, {groups}, "
            f"{c // groups}, 3, 5]), axes=[{axes}]), newshape=[2, {c}, 3, 5])")


def blocked(x: str, y: str, begin: int, end: int, lanes: int = 0, groups: int = 2) -> str:
    extra = f", lanes={lanes}" if lanes else ""
    return (f"nn.contrib_channel_shuffle_nchwc({x}, {y}, channels=[58, 58], groups={groups}, "
            f"begin={begin}, end={end}{extra})")


def to_blocked(x: str, pad: int, lanes: int = 16) -> str:
    padded = f"nn.pad({x}, 0f, pad_width=[[0, 0], [0, {pad}], [0, 0], [0, 0]])" if pad else x
    return f'layout_transform({padded}, src_layout="NCHW", dst_layout="NCHW{lanes}c")'


UNIT = (f"%0 = {shuffle(view('%a'), view('%b'))}; %1 = split(%0, indices_or_sections=[58], "
        "axis=1);")
CASES = {
    "shuffle_to_blocked": (
        f"def @main({MAPS}) {{ {shuffle(view('%a'), view('%b'))} }}",
        f"def @main({MAPS}) {{ {view(blocked('%a', '%b', 0, 116), 116)} }}"),
    "unit": (  # the half a conv reads padded to 64 in NCHW16c, the other half passed on
        f"def @main({MAPS}) {{ {UNIT} ({to_blocked('%1.1', 6)}, %1.0) }}",
        f"def @main({MAPS}) {{ ({blocked('%a', '%b', 58, 116)}, "
        f"{view(blocked('%a', '%b', 0, 58))}) }}"),
    "chain": (  # the half passed on is a branch of the next shuffle
        f"def @main({MAPS}, {MAP_C}) {{ {UNIT} %2 = {shuffle('%1.0', view('%c'))}; "
        f"{to_blocked('%2', 12)} }}",
        f"def @main({MAPS}, {MAP_C}) {{ nn.contrib_channel_shuffle_nchwc("
        f"{blocked('%a', '%b', 0, 58)}, %c, channels=[58, 58], groups=2, begin=0, end=116) }}"),
    "other_blocking": (  # the conv reads 116 channels (and 4 zeros) in NCHW8c
        f"def @main({MAPS}) {{ {to_blocked(shuffle(view('%a'), view('%b')), 4, 8)} }}",
        f"def @main({MAPS}) {{ {blocked('%a', '%b', 0, 116, lanes=8)} }}"),
    "equal_sections": (
        f"def @main({MAPS}) {{ %0 = {shuffle(view('%a'), view('%b'))}; "
        "%1 = split(%0, indices_or_sections=2, axis=1); (%1.0, %1.1) }",
        f"def @main({MAPS}) {{ ({view(blocked('%a', '%b', 0, 58))}, "
        f"{view(blocked('%a', '%b', 58, 116))}) }}"),
    "runtime_batch": (  # ember.compile with no shapes: Reshape's 0 copies the batch
        f"def @main({RUNTIME_MAPS}) {{ %0 = reshape(transpose(reshape(concatenate(("
        f"{view('%a')}, {view('%b')}), axis=1), newshape=[0, 2, 58, 3, 5]), "
        "axes=[0, 2, 1, 3, 4]), newshape=[0, 116, 3, 5]); "
        f"%1 = split(%0, indices_or_sections=[58], axis=1); ({to_blocked('%1.1', 6)}, %1.0) }}",
        f"def @main({RUNTIME_MAPS}) {{ ({blocked('%a', '%b', 58, 116)}, "
        f"{view(blocked('%a', '%b', 0, 58))}) }}"),
    "four_groups": (
        f"def @main({MAPS}) {{ {to_blocked(shuffle(view('%a'), view('%b'), groups=4), 12)} }}",
        f"def @main({MAPS}) {{ {blocked('%a', '%b', 0, 116, groups=4)} }}"),
}

LEFT_ALONE = [
    # three branches
    f"def @main({MAPS}, {MAP_C}) {{ reshape(transpose(reshape(concatenate(({view('%a')}, "
    f"{view('%b')}, {view('%c')}), axis=1), newshape=[2, 2, 87, 3, 5]), axes=[0, 2, 1, 3, 4]), "
    "newshape=[2, 174, 3, 5]) }",
    # not the shuffle's transpose
    f"def @main({MAPS}) {{ {shuffle(view('%a'), view('%b'), axes='0, 1, 2, 4, 3')} }}",
    # a branch in NCHW, not a blocked map's view
    f"def @main(%a: Tensor[(2, 4, 3, 5, 16), float32], %x: Tensor[(2, 58, 3, 5), float32]) {{ "
    f"{shuffle(view('%a'), '%x')} }}",
    # branches of two blockings
    f"def @main(%a: Tensor[(2, 4, 3, 5, 16), float32], %e: Tensor[(2, 8, 3, 5, 8), float32]) {{ "
    f"{shuffle(view('%a'), view('%e', lanes=8))} }}",
    # a branch that is not the first channels of its map
    f"def @main({MAPS}) {{ {shuffle(view('%a'), view('%b').replace('begin=[0], end=[58]', 'begin=[2], end=[60]'))} }}",
    # the groups' reshape splits the image, not the channels
    f"def @main({MAPS}) {{ reshape(transpose(reshape(concatenate(({view('%a')}, {view('%b')}), "
    "axis=1), newshape=[2, 2, 58, 15, 1]), axes=[0, 2, 1, 3, 4]), newshape=[2, 116, 3, 5]) }",
    # the join is along another axis
    f"def @main({MAPS}) {{ reshape(transpose(reshape(concatenate(({view('%a')}, {view('%b')}), "
    "axis=2), newshape=[2, 2, 29, 6, 5]), axes=[0, 2, 1, 3, 4]), newshape=[2, 58, 6, 5]) }",
    # a run-time image size
    "def @main(%a: Tensor[(2, 4, ?, 5, 16), float32], %b: Tensor[(2, 4, ?, 5, 16), float32]) { "
    f"reshape(transpose(reshape(concatenate(({view('%a')}, {view('%b')}), axis=1), "
    "newshape=[2, 2, 58, -1, 5]), axes=[0, 2, 1, 3, 4]), newshape=[2, 116, -1, 5]) }",
    # float16 branches (the kernel moves float32)
    f"def @main({MAPS.replace('float32', 'float16')}) {{ {shuffle(view('%a'), view('%b'))} }}",
    # a pad of the image too, before the transform to blocks
    f"def @main({MAPS}) {{ layout_transform(nn.pad({view(blocked('%a', '%b', 0, 58))}, 0f, "
    'pad_width=[[0, 0], [0, 6], [1, 1], [0, 0]]), src_layout="NCHW", dst_layout="NCHW16c") }',
    # a pad past the last block (64 + 16 channels)
    f"def @main({MAPS}) {{ {to_blocked(view(blocked('%a', '%b', 0, 58)), 22)} }}",
]


@pytest.mark.parametrize("case", sorted(CASES))
def test_rewrite(case):  # (the numerics below: a run-time batch has no static arguments)
    before, expected = CASES[case]
    assert_main_equal(run(FoldChannelShuffle(), before), expected)


@pytest.mark.parametrize("before", LEFT_ALONE)
def test_left_alone(before):
    assert_main_equal(run(FoldChannelShuffle(), before), before)


def test_every_rule_is_a_named_function():
    assert {fn.__name__ for _, fn in RULES} == {"shuffle_to_blocked", "split_blocked_shuffle",
                                                "blocked_shuffle_to_blocked"}


@pytest.mark.parametrize("case", sorted(CASES))
def test_rewritten_graph_computes_the_same(case):
    """Against the unrewritten graph on the interpreter, with garbage in the padded lanes of
    the blocked branches (the views drop them; so must the shuffle)."""
    before = parse(CASES[case][0])
    after = run(FoldChannelShuffle(), before)
    rng = np.random.default_rng(7)
    args = [rng.uniform(-1, 1, (2, 4, 3, 5, 16)).astype("float32")
            for _ in before["main"].params]
    assert_same_result(before, after, *args, rtol=0, atol=0)


def _unit_model(channels: int, image: int, seed: int = 0):
    """ShuffleNetV2 as torchvision exports it (Shape-computed shuffle sizes), a few units:
    (N, 3, image, image) -> logits."""
    from ember.relay.testing import exported_onnx

    return exported_onnx.shufflenet_v2(seed=seed, stages=(channels, 2 * channels),
                                       repeats=(2, 2), classes=10, image=image)


@pytest.mark.parametrize("batch", [1, pytest.param(2, marks=pytest.mark.slow)])
def test_built_shufflenet_matches_onnxruntime_and_runs_blocked_shuffles(batch):
    x = np.random.default_rng(8).uniform(-1, 1, (batch, 3, 32, 32)).astype("float32")
    # halves of 58 and 116: padded last blocks
    assert_built_onnx_matches_onnxruntime(_unit_model(116, 32), {"input": x},
                                          "ember_channel_shuffle_nchwc", rtol=1e-4, atol=1e-4)


@pytest.mark.slow
def test_compiled_with_a_runtime_batch_matches_onnxruntime_at_two_batches():
    """``ember.compile`` with no shapes (the VM, batch ``?``): the shuffles stay blocked, the
    kernel takes the batch at run time."""
    ort = pytest.importorskip("onnxruntime")
    model = _unit_model(116, 32)
    compiled = ember.compile(model)
    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    for batch in (1, 3):
        x = np.random.default_rng(batch).uniform(-1, 1, (batch, 3, 32, 32)).astype("float32")
        np.testing.assert_allclose(np.asarray(compiled(x)), session.run(None, {"input": x})[0],
                                   rtol=1e-4, atol=1e-4)
