"""One model shared by threads: every call gets its own input's result, never another's.

Eight threads call one model from ``ember.compile`` (each executor) or ``ember.load`` at once,
each with inputs of its own; every result is checked against the numpy reference of the
inputs that thread passed. The pool of execution contexts grows only as far as calls overlap
(``ember.runtime.execution_pool``).
"""
from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest
from _api_models import DYNAMIC_TEXT, STATIC_TEXT, dense_model, dense_reference

import ember
from ember.api.model import CompiledModel

EXECUTORS = ["graph", "aot", "vm"]
THREADS = 8


def hammer(call_and_check, calls: int, threads: int = THREADS) -> list[str]:
    """``call_and_check(rng)`` -> an error message or None, ``calls`` times in each of
    ``threads`` threads started together; the messages of every wrong call."""
    errors: list[str] = []
    start = threading.Barrier(threads)

    def work(seed: int) -> None:
        rng = np.random.default_rng(seed)
        start.wait()
        try:
            for _ in range(calls):
                found = call_and_check(rng)
                if found:
                    errors.append(f"thread {seed}: {found}")
        except Exception as err:  # noqa: BLE001 - reported to the test
            errors.append(f"thread {seed} raised {type(err).__name__}: {err}")

    pool = [threading.Thread(target=work, args=(s,)) for s in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join(timeout=300)
    return errors + [f"{t.name} still running" for t in pool if t.is_alive()]


def dense_checker(model: CompiledModel, params: dict[str, np.ndarray]):
    def check(rng: np.random.Generator) -> str | None:
        x = rng.standard_normal((4, 16)).astype("float32")
        got = model(x)
        want = dense_reference(x, params)
        if not np.allclose(got, want, rtol=1e-5, atol=1e-5):
            return f"wrong result (max error {np.abs(got - want).max()})"
        return None

    return check


@pytest.mark.parametrize("executor", EXECUTORS)
def test_threads_sharing_a_compiled_model_get_their_own_results(executor: str) -> None:
    mod, params = dense_model()
    model = ember.compile(mod, executor=executor, params=params, threads=1)
    assert hammer(dense_checker(model, params), calls=300) == []
    assert 1 <= model._pool.size <= model.max_contexts


@pytest.mark.parametrize("executor", EXECUTORS)
def test_threads_sharing_a_loaded_model_get_their_own_results(executor: str,
                                                              tmp_path: Path) -> None:
    mod, params = dense_model()
    ember.compile(mod, executor=executor, params=params, threads=1).save(tmp_path / "m.so")
    model = ember.load(tmp_path / "m.so")
    assert hammer(dense_checker(model, params), calls=300) == []


@pytest.mark.slow
@pytest.mark.parametrize("executor", EXECUTORS)
def test_thousands_of_calls_from_eight_threads(executor: str) -> None:
    mod, params = dense_model(batch=4, features=64, units=32)
    model = ember.compile(mod, executor=executor, params=params, threads=2)

    def check(rng: np.random.Generator) -> str | None:
        x = rng.standard_normal((4, 64)).astype("float32")
        return None if np.allclose(model(x), dense_reference(x, params), rtol=1e-4,
                                   atol=1e-4) else "wrong result"

    assert hammer(check, calls=3000) == []


def test_dynamic_shapes_from_threads() -> None:
    """A VM model with a symbolic batch: threads pass different batch sizes at once."""
    model = ember.compile(DYNAMIC_TEXT)
    assert model.executor == "vm"

    def check(rng: np.random.Generator) -> str | None:
        x = rng.standard_normal((int(rng.integers(1, 9)), 3)).astype("float32")
        got = model(x)
        return None if got.shape == x.shape and np.array_equal(got, np.maximum(x, 0)) else \
            f"wrong result for batch {x.shape[0]}"

    assert hammer(check, calls=200) == []


@pytest.mark.parametrize("executor", EXECUTORS)
def test_several_outputs_by_name_from_threads(executor: str) -> None:
    model = ember.compile(STATIC_TEXT, executor=executor)

    def check(rng: np.random.Generator) -> str | None:
        x, y = rng.standard_normal((2, 2, 3)).astype("float32")
        relu, total = model(y=y, x=x)
        ok = np.array_equal(relu, np.maximum(x, 0)) and np.allclose(total, x + y)
        return None if ok else "wrong result"

    assert hammer(check, calls=200) == []


@pytest.mark.parametrize("executor", EXECUTORS)
def test_results_belong_to_the_caller(executor: str) -> None:
    """A result is the caller's array: later calls do not change it, and writing into it
    does not change the model."""
    model = ember.compile(STATIC_TEXT, executor=executor)
    x, y = np.ones((2, 3), "float32"), np.full((2, 3), 2, "float32")
    first = model(x, y)
    first[1][:] = 100
    second = model(-x, y)
    assert np.array_equal(first[0], np.ones((2, 3))) and np.all(first[1] == 100)
    assert np.array_equal(second[0], np.zeros((2, 3))) and np.allclose(second[1], 1)
    assert np.allclose(model(x, y)[1], 3)


def test_the_pool_grows_only_when_calls_overlap() -> None:
    mod, params = dense_model()
    model = ember.compile(mod, executor="graph", params=params)
    x = np.ones((4, 16), "float32")
    for _ in range(50):
        model(x)
    assert model._pool.size == 1  # calls in turn reuse one context


def test_max_contexts_bounds_the_pool() -> None:
    mod, params = dense_model()
    model = ember.compile(mod, executor="aot", params=params, threads=1)
    model.max_contexts = 2
    assert hammer(dense_checker(model, params), calls=100) == []
    assert model._pool.size <= 2
    for bad, error in ((0, ValueError), (-1, ValueError), (1.5, TypeError), (True, TypeError)):
        with pytest.raises(error, match="max_contexts must be a positive int"):
            model.max_contexts = bad
    assert model.max_contexts == 2


def test_a_bad_call_in_one_thread_leaves_the_others_right() -> None:
    mod, params = dense_model()
    model = ember.compile(mod, executor="graph", params=params, threads=1)
    good = dense_checker(model, params)

    def check(rng: np.random.Generator) -> str | None:
        if rng.random() < 0.3:
            with pytest.raises(ember.api.model.ModelInputError, match="input 'x': expected"):
                model(np.ones((3, 16), "float32"))
            return None
        return good(rng)

    assert hammer(check, calls=200) == []
