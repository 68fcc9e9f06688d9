"""The LIFO arena (src/memory/stack_allocator.c) driven through ctypes, checked against a
model with hypothesis: blocks are aligned, inside the pool and disjoint (filling one never
changes another), an allocation fails exactly when it exceeds ``available``, frees out of
order and of dead pointers are refused without changing anything, an overrun is detected."""
from __future__ import annotations

import ctypes
import os
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _crt_testlib import StackAllocator, bind, error_codes

E = error_codes()
# name -> (alignment, guard bytes, -D flags)
CONFIGS = {"align64_guard": (64, 4, ()),
           "align16_noguard": (16, 0, ("-DEMBER_CRT_WORKSPACE_ALIGNMENT=16",
                                       "-DEMBER_CRT_WORKSPACE_GUARD=0"))}


@pytest.fixture(scope="module")
def libs(crt_shared):
    return {name: (bind(crt_shared(*flags)), align, guard)
            for name, (align, guard, flags) in CONFIGS.items()}


class Arena:
    """One allocator over a Python buffer starting `offset` bytes past a 64-byte boundary."""

    def __init__(self, lib: ctypes.CDLL, size: int, offset: int = 0) -> None:
        self.lib = lib
        self.raw = ctypes.create_string_buffer(size + 128)
        start = (ctypes.addressof(self.raw) + 63) // 64 * 64 + offset
        self.start, self.end = start, start + size
        self.state = StackAllocator()
        self.rc = lib.ember_stack_allocator_init(ctypes.byref(self.state), start, size)

    def alloc(self, n: int) -> tuple[int, int | None]:
        out = ctypes.c_void_p()
        rc = self.lib.ember_stack_allocator_alloc(ctypes.byref(self.state), n, ctypes.byref(out))
        return rc, out.value

    def free(self, ptr: int | None) -> int:
        return self.lib.ember_stack_allocator_free(ctypes.byref(self.state), ptr)

    def available(self) -> int:
        return self.lib.ember_stack_allocator_available(ctypes.byref(self.state))

    def stats(self) -> tuple[int, int, int, int]:
        s = self.lib.ember_stack_allocator_stats(ctypes.byref(self.state))
        return s.size, s.used, s.peak, s.live


OPS = st.one_of(st.tuples(st.just("alloc"), st.integers(0, 600)),
                st.tuples(st.just("alloc_all"), st.just(0)),
                st.tuples(st.just("free_top"), st.just(0)),
                st.tuples(st.just("free_below"), st.integers(0, 20)),
                st.tuples(st.just("free_dead"), st.integers(0, 20)),
                st.tuples(st.just("reset"), st.just(0)))


HEADER = 24 if ctypes.sizeof(ctypes.c_void_p) == 8 else 20  # sizeof(BlockHeader)


def _round_up(n: int, align: int) -> int:
    return (n + align - 1) // align * align


@settings(max_examples=80, deadline=None)
@given(config=st.sampled_from(sorted(CONFIGS)), size=st.integers(0, 3000),
       offset=st.integers(0, 63), ops=st.lists(OPS, max_size=40))
def test_arena_follows_the_stack_model(libs, config, size, offset, ops):
    lib, align, guard = libs[config]
    arena = Arena(lib, size, offset)
    skip = -offset % align  # the start is rounded up to the alignment
    if size < skip + _round_up(HEADER, align) + guard:
        assert arena.rc == E["kTvmErrorWorkspaceInvalidPool"]
        assert arena.alloc(0)[0] == E["kTvmErrorWorkspaceNotInitialized"]
        return
    assert arena.rc == 0 and arena.stats() == (size - skip, 0, 0, 0)
    live: list[tuple[int, int, int, int]] = []  # (ptr, nbytes, used before, fill byte)
    dead: list[int] = []
    peak = 0
    for step, (op, arg) in enumerate(ops):
        used = arena.stats()[1]
        if op.startswith("alloc"):
            # the model: a header, then the payload at the next aligned offset, then the guard
            payload = _round_up(used + HEADER, align)
            avail = arena.available()
            assert avail == max(0, size - skip - payload - guard)
            n = avail if op == "alloc_all" else arg
            rc, ptr = arena.alloc(n)
            if payload + n + guard > size - skip:
                assert rc == E["kTvmErrorWorkspaceExhausted"] and arena.stats()[1] == used
                continue
            assert rc == 0 and ptr == arena.start + skip + payload
            assert ptr % align == 0 and ptr + n + guard <= arena.end
            assert not live or ptr >= live[-1][0] + live[-1][1] + guard  # above the last block
            ctypes.memset(ptr, step & 0x7F, n)
            live.append((ptr, n, used, step & 0x7F))
            dead = [d for d in dead if d != ptr]
            peak = max(peak, arena.stats()[1])
        elif op == "free_top" and live:
            ptr, n, used_before, _ = live.pop()
            assert arena.free(ptr) == 0 and arena.stats()[1] == used_before
            dead.append(ptr)
        elif op == "free_below" and len(live) >= 2:
            before = arena.stats()
            assert arena.free(live[-2 - arg % (len(live) - 1)][0]) == \
                E["kTvmErrorWorkspaceFreeNotLast"]
            assert arena.stats() == before
        elif op == "free_dead" and dead:
            before = arena.stats()
            assert arena.free(dead[arg % len(dead)]) == E["kTvmErrorWorkspaceFreeInvalid"]
            assert arena.stats() == before
        elif op == "reset":
            lib.ember_stack_allocator_reset(ctypes.byref(arena.state))
            live, dead = [], []
        _, used_now, peak_now, live_now = arena.stats()
        assert (peak_now, live_now) == (peak, len(live)) and used_now <= peak_now
        for ptr, n, _, fill in live:  # no block (or header, or guard) overlaps another
            assert ctypes.string_at(ptr, n) == bytes([fill]) * n
    while live:  # everything still live frees in LIFO order, back to an empty arena
        assert arena.free(live.pop()[0]) == 0
    assert arena.stats()[1:] == (0, peak, 0)


@pytest.mark.parametrize("n", [0, 1, 13, 64])
def test_overrun_is_detected_and_the_block_still_freed(libs, n):
    lib, _, guard = libs["align64_guard"]
    arena = Arena(lib, 1024)
    rc, ptr = arena.alloc(n)
    assert rc == 0 and guard == 4
    ctypes.memset(ptr, 0, n + 1)  # one byte too many
    assert arena.free(ptr) == E["kTvmErrorWorkspaceCorrupted"]
    assert arena.stats()[1:] == (0, arena.stats()[2], 0)


def test_bad_pointers_are_refused(libs):
    lib, _, _ = libs["align64_guard"]
    arena = Arena(lib, 1024)
    _, ptr = arena.alloc(100)
    for bad in (None, ptr + 1, ptr + 64, ptr - 64, arena.start, arena.end + 64, 8):
        assert arena.free(bad) == E["kTvmErrorWorkspaceFreeInvalid"], bad
    assert arena.free(ptr) == 0
    assert arena.alloc(2**64 - 1)[0] == E["kTvmErrorWorkspaceExhausted"]
    assert arena.alloc(2**63)[0] == E["kTvmErrorWorkspaceExhausted"]


def test_null_arguments_are_errors(libs):
    lib, _, _ = libs["align64_guard"]
    assert lib.ember_stack_allocator_init(None, None, 0) == E["kTvmErrorGenericInvalidArgument"]
    state = StackAllocator()
    assert lib.ember_stack_allocator_init(ctypes.byref(state), None, 4096) == \
        E["kTvmErrorWorkspaceInvalidPool"]
    assert lib.ember_stack_allocator_free(ctypes.byref(state), 64) == \
        E["kTvmErrorWorkspaceNotInitialized"]
    assert lib.ember_stack_allocator_available(ctypes.byref(state)) == 0


def test_release_to_drops_only_the_blocks_after_the_mark(libs):
    """What a failed call left above a mark goes; the blocks below stay usable (the micro RPC
    server keeps its arrays and executors in the arena this way)."""
    lib, _, _ = libs["align64_guard"]
    arena = Arena(lib, 4096)
    _, keep = arena.alloc(100)
    mark = lib.ember_stack_allocator_stats(ctypes.byref(arena.state))
    for n in (10, 200, 0):
        assert arena.alloc(n)[0] == 0
    assert lib.ember_stack_allocator_release_to(ctypes.byref(arena.state), mark) == 0
    assert arena.stats()[1] == mark.used and arena.stats()[3] == 1
    assert lib.ember_stack_allocator_release_to(ctypes.byref(arena.state), mark) == 0  # no-op
    assert arena.free(keep) == 0
    # blocks below the mark were freed since: the mark is refused, nothing changes
    assert lib.ember_stack_allocator_release_to(ctypes.byref(arena.state), mark) == \
        E["kTvmErrorGenericInvalidArgument"]
    assert arena.stats()[1:] == (0, arena.stats()[2], 0)
