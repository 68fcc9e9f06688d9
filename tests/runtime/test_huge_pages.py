"""huge_pages: constants packed into one block, large blocks aligned to and advised for huge
pages."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ember
from ember.runtime import huge_pages
from ember.runtime.huge_pages import HUGE_PAGE_BYTES, buffer, pack
from ember.runtime.ndarray import ALIGNMENT

_DTYPES = ("float32", "int64", "uint8", "float16", "bool")


@st.composite
def _constants(draw):
    """A list of NDArrays of small shapes and mixed dtypes, with Nones among them."""
    out = []
    for _ in range(draw(st.integers(0, 6))):
        if draw(st.booleans()) and draw(st.booleans()):
            out.append(None)
            continue
        shape = tuple(draw(st.lists(st.integers(0, 7), max_size=3)))
        dtype = draw(st.sampled_from(_DTYPES))
        seed = draw(st.integers(0, 2**16))
        out.append(ember.nd.array((np.random.default_rng(seed).random(shape) * 100)
                                  .astype(dtype)))
    return out


@settings(max_examples=40, deadline=None)
@given(_constants())
def test_pack_keeps_values_dtypes_and_order(values):
    packed = pack(values)
    assert len(packed) == len(values)
    for old, new in zip(values, packed):
        if old is None:
            assert new is None
            continue
        assert new is not old and new.dtype == old.dtype and new.shape == old.shape
        np.testing.assert_array_equal(new.numpy(), old.numpy())
        assert new._np.ctypes.data % ALIGNMENT == 0


def test_pack_places_arrays_in_one_block_without_overlap():
    values = [ember.nd.array(np.full(n, n, "float32")) for n in (1, 17, 300, 5)]
    packed = pack(values)
    spans = sorted((a._np.ctypes.data, a._np.ctypes.data + a._np.nbytes) for a in packed)
    for (_, end), (start, _) in zip(spans, spans[1:]):
        assert end <= start
    assert spans[-1][1] - spans[0][0] <= 64 + 128 + 1216 + 64  # one block, 64-byte slots
    packed[1]._np[:] = 0  # writing one leaves its neighbours alone
    for a, n in zip(packed, (1, 17, 300, 5)):
        np.testing.assert_array_equal(a.numpy(), np.zeros(17) if n == 17 else np.full(n, n))


def test_pack_keeps_vector_dtypes():
    a = ember.nd.array(np.arange(24, dtype="float32").reshape(6, 4), dtype="float32x4")
    (b,) = pack([a])
    assert b.dtype == "float32x4" and b.shape == (6,)
    np.testing.assert_array_equal(b.numpy(), a.numpy())


@pytest.mark.parametrize("nbytes", [0, 1, 1000, HUGE_PAGE_BYTES - 1])
def test_small_buffers_stay_ordinary(nbytes, monkeypatch):
    calls = []
    monkeypatch.setattr(huge_pages, "_MADVISE", lambda *a: calls.append(a) or 0)
    buf = buffer(nbytes)
    assert buf.nbytes == nbytes and buf.ctypes.data % ALIGNMENT == 0 and not calls


@pytest.mark.parametrize("nbytes", [HUGE_PAGE_BYTES, HUGE_PAGE_BYTES + 1, 3 * HUGE_PAGE_BYTES])
def test_large_buffers_are_advised_whole_huge_pages(nbytes, monkeypatch):
    calls = []
    monkeypatch.setattr(huge_pages, "_MADVISE", lambda *a: calls.append(a) or 0)
    buf = buffer(nbytes)
    assert buf.nbytes == nbytes and buf.ctypes.data % HUGE_PAGE_BYTES == 0
    (addr, size, advice), = calls
    assert addr == buf.ctypes.data and size % HUGE_PAGE_BYTES == 0 and size >= nbytes
    assert advice == 14
    buf[-1] = 7  # the whole block is writable
    assert buf[-1] == 7


def test_buffer_honours_a_larger_alignment():
    assert buffer(100, 4096).ctypes.data % 4096 == 0


def test_buffer_works_without_madvise(monkeypatch):
    monkeypatch.setattr(huge_pages, "_MADVISE", None)
    buf = buffer(HUGE_PAGE_BYTES + 5)
    buf[:] = 3
    assert buf.nbytes == HUGE_PAGE_BYTES + 5 and int(buf.sum()) == 3 * buf.nbytes


def test_vm_constants_share_one_block():
    """The VM executable's constants are packed (its kernels stream weights from there), as
    built and as loaded from a file."""
    from ember.runtime.vm import Executable
    from ember.runtime.vm.program import Program, as_constants

    consts = Program([], as_constants([np.ones((64, 64), "float32"), None,
                                       ember.nd.array(np.arange(5))])).constants
    assert consts[1] is None
    assert abs(consts[2]._np.ctypes.data - consts[0]._np.ctypes.data) < 64 * 64 * 4 + 2 * 64
    np.testing.assert_array_equal(consts[2].numpy(), np.arange(5))
    exe = Executable.from_functions("main(x):\n    ret $0\n",
                                    [np.ones(300, "float32"), np.arange(7)])
    loaded = Executable.load_exec(exe.save()[0], None)
    for prog in (exe._program, loaded._program):
        a, b = prog.constants
        assert b._np.ctypes.data - a._np.ctypes.data == 1216  # 1200 bytes, 64-byte slots
        np.testing.assert_array_equal(b.numpy(), np.arange(7))


@settings(max_examples=30, deadline=None)
@given(st.dictionaries(st.integers(0, 50), st.integers(0, 5000), max_size=8))
def test_graph_executor_storage_is_one_block_without_overlap(sizes):
    """The graph executor's storage ids (params among them) are carved out of one block."""
    from ember.runtime.graph_executor import _carve

    pools = _carve(sizes)
    assert {sid: buf.nbytes for sid, buf in pools.items()} == sizes
    spans = sorted((b.ctypes.data, b.ctypes.data + b.nbytes) for b in pools.values() if b.nbytes)
    for (_, end), (start, _) in zip(spans, spans[1:]):
        assert end <= start
    assert all(b.ctypes.data % ALIGNMENT == 0 for b in pools.values() if b.nbytes)
    if spans:
        assert spans[-1][1] - spans[0][0] <= sum(-(-max(s, 1) // 64) * 64 for s in sizes.values())
