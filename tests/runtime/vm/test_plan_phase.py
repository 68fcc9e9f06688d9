"""Which calls a VM plan runs first (plan_phase.shape_phase): the calls that compute values
from the arguments' shapes and constants alone, into blocks only they write. A kernel left in
place may read such a value (a slice's end derived from ``Shape(x)``) between two of the
block's writers, where every write has a static shape and no two share bytes; not where a
write's bytes are only known at run time."""
from __future__ import annotations

from ember.runtime.device import cpu
from ember.runtime.dtype import DataType
from ember.runtime.vm.plan_phase import shape_phase
from ember.runtime.vm.plan_walk import INT64, Arg, ArgShapes, Block, Call, Tensor

F32 = DataType("float32")


def _calls(second_write):
    """take(shape(x)) -> end; slice(x, end) -> y (reads end: data); second_write -> the
    block of end, after the slice."""
    shapes = ArgShapes()
    shapes.count = 2
    x_shape = Tensor(shapes, 0, (2,), INT64)
    derived = Block(0, 128, 64, cpu(0), "int64")
    end = Tensor(derived, 0, (1,), INT64)
    y_block = Block(1, 0, 64, cpu(0), "float32", size=Tensor(derived, 8, (), INT64))
    x = Tensor(Arg(0, cpu(0)), 0, x_shape, F32)
    y = Tensor(y_block, 0, x_shape, F32)
    calls = [Call(0, [x_shape, end], 1),  # take(shape_of(x), 1)
             Call(0, [x_shape, Tensor(derived, 8, (), INT64)], 1),  # y's byte size
             Call(1, [x, end, y], 1),  # the slice: a kernel on data
             Call(2, [x_shape, second_write(derived)], 1)]  # a later derived value
    return calls, [derived, y_block]


def test_a_kernel_may_read_a_derived_value_between_its_blocks_writers() -> None:
    calls, blocks = _calls(lambda b: Tensor(b, 64, (2,), INT64))
    hoisted, arena, _ = shape_phase(calls, blocks, {})
    assert hoisted == {0, 1, 3} and [b.index for b in arena] == [0]


def test_not_where_a_write_to_the_block_has_a_run_time_shape() -> None:
    calls, blocks = _calls(lambda b: Tensor(b, 64, Tensor(b, 0, (1,), INT64), INT64))
    hoisted, arena, _ = shape_phase(calls, blocks, {})
    assert 3 not in hoisted and arena == []


def test_not_where_two_writes_share_bytes() -> None:
    calls, blocks = _calls(lambda b: Tensor(b, 0, (1,), INT64))  # end's bytes, written again
    hoisted, arena, _ = shape_phase(calls, blocks, {})
    assert arena == [] and hoisted == set()


def test_bytes_written_after_a_size_from_data_leave_the_rest_of_the_block_early() -> None:
    """Shape functions side by side in one block: the first reads the argument's shape; the
    second reads a count a kernel computed from data. The first runs in the shape phase and
    its bytes are known early; the second's bytes are not."""
    shapes = ArgShapes()
    shapes.count = 1
    x_shape = Tensor(shapes, 0, (1,), INT64)
    shape_funcs = Block(0, 128, 64, cpu(0), "int64")
    count = Block(1, 8, 64, cpu(0), "int64")
    first, second = Tensor(shape_funcs, 0, (1,), INT64), Tensor(shape_funcs, 64, (1,), INT64)
    x = Tensor(Arg(0, cpu(0)), 0, x_shape, F32)
    calls = [Call(0, [x_shape, first], 1),  # a shape function of x's shape
             Call(1, [x, Tensor(count, 0, (1,), INT64)], 1),  # NonZero's count, from data
             Call(2, [Tensor(count, 0, (1,), INT64), second], 1)]  # a shape function of it
    hoisted, arena, early = shape_phase(calls, [shape_funcs, count], {})
    assert hoisted == {0} and [b.index for b in arena] == [0]
    assert early.holds(first) and not early.holds(second) and early.holds(x_shape)
    assert not early.holds(Tensor(shape_funcs, 0, (2,), INT64))  # past the early bytes
