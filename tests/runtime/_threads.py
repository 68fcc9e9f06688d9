"""Running one piece of work in several threads at once, for the executors' thread tests."""
from __future__ import annotations

import threading
from collections.abc import Callable


def errors_in_threads(work: Callable[[int], str | None], count: int = 4,
                      timeout: float = 120.0) -> list[str]:
    """Start ``work(seed)`` for seeds 0..count-1 in threads at once and wait for them; the
    errors the calls returned (a message, or None), plus one for a thread still running after
    ``timeout`` seconds or one that raised."""
    errors: list[str] = []

    def run(seed: int) -> None:
        try:
            found = work(seed)
        except Exception as err:  # noqa: BLE001 - reported to the test, which fails
            found = f"thread {seed} raised {type(err).__name__}: {err}"
        if found:
            errors.append(found)

    threads = [threading.Thread(target=run, args=(s,)) for s in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=timeout)
    errors += [f"{t.name} still running after {timeout} s" for t in threads if t.is_alive()]
    return errors
