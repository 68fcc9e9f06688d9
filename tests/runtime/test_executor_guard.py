"""One executor module used by several threads: ConcurrentUseError, never mixed results.

The module-based API (``set_input``/``run``/``get_output`` on one module) serves one thread
at a time, as in the Relay era; ``ember.runtime.executor_guard`` detects the misuse. Each
interleaving below is driven step by step from named threads, then eight threads hammer one
module and every result they read is checked.
"""
from __future__ import annotations

import os
import queue
import sys
import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import ember
from ember.runtime.errors import ConcurrentUseError
from ember.runtime.executor_guard import UseGuard

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _executor_fuzz import factory, reference  # noqa: E402

KINDS = ["graph", "aot-packed", "vm"]


class Worker:
    """A thread that runs the functions it is given, one at a time, and hands back their
    result or exception: steps of a test run in a chosen thread, in a chosen order."""

    def __init__(self) -> None:
        self._jobs: queue.Queue[Any] = queue.Queue()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while (job := self._jobs.get()) is not None:
            func, done = job
            try:
                done.put((True, func()))
            except BaseException as err:  # noqa: BLE001 - handed to the test
                done.put((False, err))

    def __call__(self, func: Callable[[], Any]) -> Any:
        done: queue.Queue[Any] = queue.Queue()
        self._jobs.put((func, done))
        ok, value = done.get(timeout=60)
        if not ok:
            raise value
        return value

    def stop(self) -> None:
        self._jobs.put(None)
        self._thread.join(timeout=10)


@pytest.fixture
def workers():
    pair = Worker(), Worker()
    yield pair
    for w in pair:
        w.stop()


def inputs(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"a": rng.random((2, 3), dtype="float32"), "b": rng.random(3, dtype="float32"),
            "c": rng.integers(0, 4, (2, 3)).astype("int32")}


def module(kind: str) -> Any:
    return factory(kind)["default"](ember.cpu(0))


def set_all(m: Any, values: dict[str, np.ndarray]) -> None:
    for name, v in values.items():
        m.set_input(name, v)


@pytest.mark.parametrize("kind", KINDS)
def test_inputs_overwritten_by_another_thread_refuse_the_run(kind, workers) -> None:
    a, b = workers
    m = module(kind)
    a(lambda: set_all(m, inputs(0)))
    b(lambda: m.set_input("a", inputs(1)["a"]))
    with pytest.raises(ConcurrentUseError, match=r"run\(\): input 0 was set by another "
                                                 r"thread.*one module per thread"):
        a(m.run)
    b(m.run)  # the other thread set the last input: its run is its own
    # Once reported, a thread that sets every input again runs normally.
    a(lambda: set_all(m, inputs(2)))
    a(m.run)
    np.testing.assert_allclose(a(lambda: m.get_output(0).numpy()), reference(inputs(2)),
                               rtol=1e-6)


@pytest.mark.parametrize("kind", KINDS)
def test_repeated_runs_of_one_thread_still_see_another_threads_inputs(kind, workers) -> None:
    """A thread's run after its own run skips the checks (nothing changed between them);
    a set_input of any thread in between brings them back."""
    a, b = workers
    m = module(kind)
    a(lambda: set_all(m, inputs(0)))
    for _ in range(3):
        a(m.run)
    a(lambda: m.set_input("b", inputs(4)["b"]))
    b(lambda: m.set_input("a", inputs(1)["a"]))
    with pytest.raises(ConcurrentUseError, match=r"run\(\): input \d was set by another"):
        a(m.run)
    b(m.run)  # and the other thread's runs repeat as their own
    b(m.run)
    with pytest.raises(ConcurrentUseError, match=r"get_outputs?\(\): another thread ran"):
        a(lambda: m.get_output(0))
    expect = {**inputs(0), "a": inputs(1)["a"], "b": inputs(4)["b"]}
    np.testing.assert_allclose(b(lambda: m.get_output(0).numpy()), reference(expect),
                               rtol=1e-6)


def test_a_reused_thread_ident_still_counts_as_a_runner() -> None:
    """The skip keys on the thread's ident, which a new thread may reuse: its run must still
    mark it a runner, so that a later run by another thread refuses its get_output."""
    guard = UseGuard("aot executor")
    guard.run()  # this thread: settled
    guard._tls = threading.local()  # as a new thread with this ident would see it
    guard.run()
    seen: list[BaseException] = []
    t = threading.Thread(target=lambda: _try(guard.run, seen))
    t.start()
    t.join(timeout=10)
    assert seen == []
    with pytest.raises(ConcurrentUseError, match="another thread ran"):
        guard.read("get_output")


@pytest.mark.parametrize("kind", KINDS)
def test_outputs_replaced_by_another_run_refuse_get_output(kind, workers) -> None:
    a, b = workers
    m = module(kind)
    a(lambda: set_all(m, inputs(0)))
    a(m.run)
    b(lambda: set_all(m, inputs(1)))
    b(m.run)
    with pytest.raises(ConcurrentUseError, match=r"get_outputs?\(\): another thread ran"):
        a(lambda: m.get_output(0))
    np.testing.assert_allclose(b(lambda: m.get_output(0).numpy()), reference(inputs(1)),
                               rtol=1e-6)


@pytest.mark.parametrize("kind", KINDS)
def test_handing_a_module_to_another_thread_is_allowed(kind, workers) -> None:
    """Inputs set in one thread, run in another, outputs read back in the first."""
    a, b = workers
    m = module(kind)
    a(lambda: set_all(m, inputs(3)))
    b(m.run)
    np.testing.assert_allclose(a(lambda: m.get_output(0).numpy()), reference(inputs(3)),
                               rtol=1e-6)


class Blocking:
    """An array-like whose conversion waits: a thread stays inside ``set_input``."""

    def __init__(self, value: np.ndarray) -> None:
        self.value, self.entered, self.go = value, threading.Event(), threading.Event()

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        self.entered.set()
        self.go.wait(timeout=30)
        return self.value


@pytest.mark.parametrize("kind", ["graph", "aot-packed"])
def test_a_call_while_another_thread_is_inside_one_is_refused(kind) -> None:
    m = module(kind)
    slow = Blocking(inputs(0)["a"])
    inside = threading.Thread(target=lambda: m.set_input("a", slow))
    inside.start()
    try:
        assert slow.entered.wait(timeout=30)
        with pytest.raises(ConcurrentUseError,
                           match=r"run\(\) while another thread is in set_input\(\)"):
            m.run()
    finally:
        slow.go.set()
        inside.join(timeout=30)
    set_all(m, inputs(0))  # the module stays usable
    m.run()
    np.testing.assert_allclose(m.get_output(0).numpy(), reference(inputs(0)), rtol=1e-6)


@pytest.mark.parametrize("kind", KINDS)
def test_eight_threads_on_one_module_never_read_a_wrong_result(kind) -> None:
    """Misuse on purpose: eight threads share one module. Every call either raises
    ConcurrentUseError or gives this thread's result (outputs copied inside get_output)."""
    m = module(kind)
    wrong: list[str] = []
    refused = [0]

    def work(seed: int) -> None:
        out = ember.nd.empty((2, 3), "float32")
        for i in range(300):
            values = inputs(seed * 1000 + i)
            try:
                set_all(m, values)
                m.run()
                got = m.get_output(0, out=out).numpy() if kind != "vm" else \
                    m.get_output(0).numpy()
            except ConcurrentUseError:
                refused[0] += 1
                continue
            if not np.allclose(got, reference(values), rtol=1e-6):
                wrong.append(f"thread {seed} call {i}")

    threads = [threading.Thread(target=work, args=(s,)) for s in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads)
    assert wrong == []


def test_the_guard_is_reentrant_for_its_own_thread() -> None:
    """A kernel that calls back into its own module (same thread) is not refused."""
    guard = UseGuard("graph executor")
    guard.enter("run")
    guard.enter("get_output")
    guard.leave()
    guard.leave()
    seen: list[BaseException] = []
    t = threading.Thread(target=lambda: _try(lambda: guard.enter("run"), seen))
    guard.enter("set_input")
    t.start()
    t.join(timeout=10)
    guard.leave()
    assert len(seen) == 1 and "run() while another thread is in set_input()" in str(seen[0])


def _try(func: Callable[[], Any], seen: list[BaseException]) -> None:
    try:
        func()
    except ConcurrentUseError as err:
        seen.append(err)
