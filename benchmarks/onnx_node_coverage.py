"""ONNX's backend node tests through ember and onnxruntime: how many pass.

    python benchmarks/onnx_node_coverage.py                       # both systems, opsets <= 21
    python benchmarks/onnx_node_coverage.py --systems ember --jobs 2 --match conv
    python benchmarks/onnx_node_coverage.py --max-opset 0         # every opset the onnx has

The tests are those of the installed ``onnx`` (``onnx.backend.test``, kind "node"; see
``ember/testing/onnx_node_tests.py``) whose default-domain opset is at most ``--max-opset``
(issue 19: 21). Each runs through ONNX's backend API, ``EmberBackend`` for ember and
``onnxruntime.backend`` for onnxruntime, one thread each, on ``--jobs`` worker processes; a
test that takes longer than ``--timeout`` seconds counts as "timeout", one that kills its
worker as "crash". Outcomes: pass, wrong (outputs differ from ONNX's reference at the test's
rtol/atol), refused (prepare raised), failed (run raised), timeout, crash.

Two figures per system (issue 19's targets for ember: at least 97 % and 90 %):

- *listed*: % of the tests whose every operator ``docs/onnx_support.md`` lists (at the
  version the test uses) that pass;
- *all*: % of all the tests that pass.

Then ember's failures grouped by their first line (numbers and names blanked), largest
group first. The JSON (default ``bench_results/onnx_node_coverage.json`` in the cache
directory) holds every test's outcome per system.
"""
from __future__ import annotations

import argparse
import collections
import json
import multiprocessing as mp
import os
import queue
import re
import signal
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _report import open_results, results_path, table  # noqa: E402
from ember.testing.onnx_node_tests import (  # noqa: E402
    MAX_OPSET,
    NodeTest,
    Outcome,
    load_node_tests,
    run_node_test,
    unlisted_operators,
)

TARGETS = {"listed": 97.0, "all": 90.0}
SYSTEMS = ("ember", "onnxruntime")
_TESTS: list[NodeTest] = []  # set before the workers fork


class _Timeout(BaseException):
    """Raised by the alarm in a worker; a BaseException so no ``except Exception`` eats it."""


def _backend(system: str) -> tuple[Any, dict[str, Any]]:
    if system == "ember":
        from ember.testing.onnx_backend import EmberBackend

        return EmberBackend, {"threads": 1}
    import onnxruntime.backend

    return onnxruntime.backend, {"intra_op_num_threads": 1, "inter_op_num_threads": 1}


def _on_alarm(signum: int, frame: Any) -> None:
    raise _Timeout()


def _worker(tasks: Any, results: Any, timeout: float) -> None:
    """Run (system, index) tasks until a None arrives; report each before and after."""
    signal.signal(signal.SIGALRM, _on_alarm)
    while (task := tasks.get()) is not None:
        system, index = task
        results.put(("start", os.getpid(), task, None))
        start = time.perf_counter()
        signal.alarm(max(1, int(timeout)))
        try:
            backend, kwargs = _backend(system)
            outcome = run_node_test(backend, _TESTS[index], **kwargs)
        except _Timeout:
            outcome = Outcome("timeout", f"over {timeout:g} s")
        finally:
            signal.alarm(0)
        results.put(("done", os.getpid(), task, (outcome, time.perf_counter() - start)))


class _Pool:
    """Worker processes (forked, so they share the loaded tests) that survive crashes: a
    worker that dies, or hangs past the timeout in native code, is replaced and its test
    counted as a crash or a timeout."""

    def __init__(self, jobs: int, timeout: float) -> None:
        self.ctx = mp.get_context("fork")
        self.tasks, self.results = self.ctx.Queue(), self.ctx.Queue()
        self.timeout = timeout
        self.workers: dict[int, Any] = {}
        self.running: dict[int, tuple[tuple[str, int], float]] = {}
        for _ in range(jobs):
            self._start()

    def _start(self) -> None:
        proc = self.ctx.Process(target=_worker, args=(self.tasks, self.results, self.timeout),
                                daemon=True)
        proc.start()
        self.workers[proc.pid] = proc

    def _reap(self, out: dict[tuple[str, int], tuple[Outcome, float]]) -> None:
        now = time.perf_counter()
        for pid, proc in list(self.workers.items()):
            task, since = self.running.get(pid, (None, now))
            stuck = task is not None and now - since > self.timeout + 60
            if stuck:
                proc.kill()
                proc.join()
            if proc.is_alive():
                continue
            del self.workers[pid]
            self.running.pop(pid, None)
            if task is not None:
                status = "timeout" if stuck else "crash"
                out[task] = (Outcome(status, f"worker exit code {proc.exitcode}"), now - since)
            self._start()

    def run(self, tasks: list[tuple[str, int]], progress: Any) -> dict[tuple[str, int],
                                                                      tuple[Outcome, float]]:
        out: dict[tuple[str, int], tuple[Outcome, float]] = {}
        for task in tasks:
            self.tasks.put(task)
        while len(out) < len(tasks):
            try:
                kind, pid, task, value = self.results.get(timeout=5)
            except queue.Empty:
                self._reap(out)
                continue
            if kind == "start":
                self.running[pid] = (task, time.perf_counter())
            elif task not in out:
                self.running.pop(pid, None)
                out[task] = value
                progress(len(out), len(tasks), task, value)
        return out

    def close(self) -> None:
        for _ in self.workers:
            self.tasks.put(None)
        for proc in self.workers.values():
            proc.join(timeout=10)
            if proc.is_alive():
                proc.kill()


def _progress(done: int, total: int, task: tuple[str, int], value: Any) -> None:
    outcome, seconds = value
    if outcome.status != "pass" or done % 50 == 0:
        print(f"[{done}/{total}] {task[0]} {_TESTS[task[1]].name}: {outcome.status} "
              f"({seconds:.1f} s) {outcome.message[:160]}", flush=True)


def _cause(message: str) -> str:
    """A failure's first line with numbers, quoted names and shapes blanked, to group by."""
    text = re.sub(r"'[^']*'", "'_'", message)
    text = re.sub(r"\([^()]*\d[^()]*\)", "(_)", text)
    return re.sub(r"\d+", "N", text)[:150]


def xfail_reason(outcome: Outcome, unlisted: list[str]) -> str:
    """A short reason for the expected-failure list: the operators or domains not imported,
    the input that must be known at import, or the outcome and the start of its message."""
    message = outcome.message
    ops = re.findall(r"\| (\S+) \([^)]*\): node", message)
    if outcome.status == "refused" and ops:
        return "not imported: " + ", ".join(dict.fromkeys(ops))
    if "declares no opset for the default ONNX domain" in message:
        return "not imported: " + ", ".join(unlisted)
    value = re.search(r"(\w+) node '[^']*': (input \d+ \(\w+\)) must be known when", message)
    if value:
        return f"run-time value: {value[1]} {value[2]}"
    return f"{outcome.status}: {message}"[:140].rstrip()


def write_xfail(path: str, outcomes: dict[str, Outcome],
                unlisted: dict[str, list[str]]) -> None:
    """The expected-failure list (``tests/relay/frontend/onnx_node_xfail.txt``): every test
    that did not pass, by name, with its reason."""
    lines = [f"{name} {xfail_reason(o, unlisted[name])}" for name, o in sorted(outcomes.items())
             if o.status != "pass"]
    header = ("# ONNX backend node tests ember fails (strict: delete a line when its test "
              "passes).\n# Written by benchmarks/onnx_node_coverage.py --write-xfail; "
              "name, then why.\n")
    Path(path).write_text(header + "\n".join(lines) + "\n")


def _figures(outcomes: dict[str, Outcome], listed: set[str]) -> dict[str, Any]:
    passed = {n for n, o in outcomes.items() if o.status == "pass"}
    statuses = collections.Counter(o.status for o in outcomes.values())
    return {"listed_total": len(listed), "listed_pass": len(passed & listed),
            "listed_pct": 100.0 * len(passed & listed) / max(1, len(listed)),
            "all_total": len(outcomes), "all_pass": len(passed),
            "all_pct": 100.0 * len(passed) / max(1, len(outcomes)),
            "statuses": dict(statuses)}


def main(argv: list[str]) -> int:
    global _TESTS
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument("--jobs", type=int, default=max(1, min(4, os.cpu_count() or 1)))
    parser.add_argument("--timeout", type=float, default=180.0)
    parser.add_argument("--max-opset", type=int, default=MAX_OPSET, help="0: every opset")
    parser.add_argument("--match", default="", help="only tests whose name has this regex")
    parser.add_argument("--causes", type=int, default=40, help="failure groups to print")
    parser.add_argument("--write-xfail", metavar="PATH", default="",
                        help="write ember's failures as the expected-failure list")
    parser.add_argument("--json", default=str(results_path("onnx_node_coverage.json")))
    opts = parser.parse_args(argv)
    systems = [s for s in opts.systems.split(",") if s]
    unknown = sorted(set(systems) - set(SYSTEMS))
    if unknown:
        parser.error(f"--systems: unknown {', '.join(unknown)} (known: {', '.join(SYSTEMS)})")

    _TESTS = [t for t in load_node_tests(opts.max_opset or None)
              if re.search(opts.match, t.name)]
    listed = {t.name for t in _TESTS if not unlisted_operators(t)}
    print(f"{len(_TESTS)} node tests (opset <= {opts.max_opset or 'any'}), {len(listed)} "
          f"listed; {opts.jobs} worker(s), timeout {opts.timeout:g} s", flush=True)
    start = time.perf_counter()
    pool = _Pool(opts.jobs, opts.timeout)
    try:
        raw = pool.run([(s, i) for i in range(len(_TESTS)) for s in systems], _progress)
    finally:
        pool.close()
    wall = time.perf_counter() - start

    per_system = {s: {_TESTS[i].name: raw[(s, i)][0] for i in range(len(_TESTS))}
                  for s in systems}
    figures = {s: _figures(per_system[s], listed) for s in systems}
    rows = [[s, f["listed_pass"], f["listed_total"], f["listed_pct"], f["all_pass"],
             f["all_total"], f["all_pct"]] for s, f in figures.items()]
    print(f"\nwall {wall:.0f} s")
    print(table(rows, ["system", "listed pass", "of", "listed %", "all pass", "of", "all %"]))
    print(f"targets (ember): listed >= {TARGETS['listed']:g} %, all >= {TARGETS['all']:g} %")

    if "ember" in per_system:
        causes = collections.Counter(
            f"{o.status}: {_cause(o.message)}" for o in per_system["ember"].values()
            if o.status != "pass")
        print(f"\nember failures by cause ({sum(causes.values())} tests):")
        for cause, count in causes.most_common(opts.causes):
            print(f"{count:5d}  {cause}")

    if opts.write_xfail and "ember" in per_system:
        write_xfail(opts.write_xfail, per_system["ember"],
                    {t.name: unlisted_operators(t) for t in _TESTS})
        print(f"wrote {opts.write_xfail}")
    record = {"max_opset": opts.max_opset, "jobs": opts.jobs, "wall_s": wall,
              "targets": TARGETS, "figures": figures,
              "tests": {t.name: {"listed": t.name in listed,
                                 "unlisted": unlisted_operators(t),
                                 **{s: {"status": per_system[s][t.name].status,
                                        "message": per_system[s][t.name].message,
                                        "seconds": raw[(s, i)][1]} for s in systems}}
                        for i, t in enumerate(_TESTS)}}
    with open_results(opts.json) as f:
        json.dump(record, f, indent=1)
    print(f"\nwrote {opts.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
