"""ember's thread pool behind TVMBackendParallelLaunch: every task runs once, errors come back,
nested launches are serial, barriers hold, concurrent callers and changing thread counts are
safe, and parallel generated code computes what the serial code does."""
from __future__ import annotations

import ctypes
import os
import sys
import threading

import numpy as np
import pytest

import ember
from ember import te
from ember.runtime.module import CSourceModule
from ember.runtime.dso import pool_owner
from ember.runtime.threads import ThreadControl, pool_workers

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _ffi_testlib import requires_cc

pytestmark = requires_cc

POOL_SOURCE = r"""
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include "ember/c_backend_api.h"
#include "ember/c_runtime_api.h"

#define MAX_TASKS 64
typedef struct {
  int runs[MAX_TASKS];
  pthread_t who[MAX_TASKS];
  int num_task;
  int fail_task;
  int inner_num_task[MAX_TASKS];
  double partial[MAX_TASKS];
  int barrier_ok;
  volatile double sink;
} Job;

static int task(int id, TVMParallelGroupEnv* penv, void* cdata) {
  Job* job = (Job*)cdata;
  char msg[64];
  double s = 0;
  int i;
  __atomic_add_fetch(&job->runs[id], 1, __ATOMIC_SEQ_CST);
  job->who[id] = pthread_self();
  job->num_task = penv->num_task;
  for (i = 0; i < 20000; ++i) s += (double)i * 1e-9; /* a little work */
  job->sink = s;
  if (id == job->fail_task) {
    snprintf(msg, sizeof msg, "task %d of %d failed on purpose", id, penv->num_task);
    TVMAPISetLastError(msg);
    return -1;
  }
  return 0;
}

static void init(Job* job, int fail_task) {
  memset(job, 0, sizeof *job);
  job->fail_task = fail_task;
}

/* run(num_task, fail_task) -> num_task * 10000 + distinct threads * 100 + (each task once) */
TVM_DLL int run(TVMValue* args, int* codes, int n, TVMValue* ret, int* ret_code, void* h) {
  Job job;
  int i, j, once = 1, distinct = 0;
  (void)codes, (void)n, (void)h;
  init(&job, (int)args[1].v_int64);
  if (TVMBackendParallelLaunch(task, &job, (int)args[0].v_int64) != 0) return -1;
  for (i = 0; i < MAX_TASKS; ++i) once &= i < job.num_task ? job.runs[i] == 1 : job.runs[i] == 0;
  for (i = 0; i < job.num_task; ++i) {
    for (j = 0; j < i && !pthread_equal(job.who[i], job.who[j]); ++j) {}
    distinct += j == i;
  }
  ret->v_int64 = job.num_task * 10000 + distinct * 100 + once;
  *ret_code = kTVMArgInt;
  return 0;
}

static int inner(int id, TVMParallelGroupEnv* penv, void* cdata) {
  (void)id;
  *(int*)cdata = penv->num_task;
  return 0;
}

static int outer(int id, TVMParallelGroupEnv* penv, void* cdata) {
  Job* job = (Job*)cdata;
  job->num_task = penv->num_task;
  return TVMBackendParallelLaunch(inner, &job->inner_num_task[id], 0);
}

/* nested() -> outer num_task * 100 + largest inner num_task */
TVM_DLL int nested(TVMValue* args, int* codes, int n, TVMValue* ret, int* ret_code, void* h) {
  Job job;
  int i, most = 0;
  (void)args, (void)codes, (void)n, (void)h;
  init(&job, -1);
  if (TVMBackendParallelLaunch(outer, &job, 0) != 0) return -1;
  for (i = 0; i < job.num_task; ++i) most = job.inner_num_task[i] > most ? job.inner_num_task[i] : most;
  ret->v_int64 = job.num_task * 100 + most;
  *ret_code = kTVMArgInt;
  return 0;
}

static int with_barrier(int id, TVMParallelGroupEnv* penv, void* cdata) {
  Job* job = (Job*)cdata;
  double total = 0;
  int i, round;
  job->num_task = penv->num_task;
  for (round = 1; round <= 3; ++round) {
    job->partial[id] = (double)(round * (id + 1));
    if (TVMBackendParallelBarrier(id, penv) != 0) return -1;
    for (total = 0, i = 0; i < penv->num_task; ++i) total += job->partial[i];
    if (total != round * penv->num_task * (penv->num_task + 1) / 2.0) job->barrier_ok = 0;
    if (TVMBackendParallelBarrier(id, penv) != 0) return -1;
  }
  return 0;
}

/* barrier() -> num_task * 10 + every task saw every other task's partial before reading */
TVM_DLL int barrier(TVMValue* args, int* codes, int n, TVMValue* ret, int* ret_code, void* h) {
  Job job;
  (void)args, (void)codes, (void)n, (void)h;
  init(&job, -1);
  job.barrier_ok = 1;
  if (TVMBackendParallelLaunch(with_barrier, &job, 0) != 0) return -1;
  ret->v_int64 = job.num_task * 10 + job.barrier_ok;
  *ret_code = kTVMArgInt;
  return 0;
}

/* own_first(calls, num_task) -> launches of `calls` whose task 0 ran on the calling thread,
 * + 1000000 unless every task of every launch ran exactly once */
TVM_DLL int own_first(TVMValue* args, int* codes, int n, TVMValue* ret, int* ret_code,
                      void* h) {
  Job job;
  int call, i, caller_first = 0, once = 1;
  (void)codes, (void)n, (void)h;
  for (call = 0; call < (int)args[0].v_int64; ++call) {
    init(&job, -1);
    if (TVMBackendParallelLaunch(task, &job, (int)args[1].v_int64) != 0) return -1;
    for (i = 0; i < MAX_TASKS; ++i) once &= i < job.num_task ? job.runs[i] == 1 : job.runs[i] == 0;
    caller_first += job.num_task > 0 && pthread_equal(job.who[0], pthread_self());
  }
  ret->v_int64 = caller_first + (once ? 0 : 1000000);
  *ret_code = kTVMArgInt;
  return 0;
}

/* null_task() -> the launch of a NULL function fails with a message */
TVM_DLL int null_task(TVMValue* args, int* codes, int n, TVMValue* ret, int* ret_code, void* h) {
  (void)args, (void)codes, (void)n, (void)ret, (void)ret_code, (void)h;
  return TVMBackendParallelLaunch(NULL, NULL, 0);
}
"""


@pytest.fixture(scope="module")
def lib() -> CSourceModule:
    mod = CSourceModule(POOL_SOURCE)
    mod["run"]  # compile once for the file
    return mod


def decode(code: int) -> tuple[int, int, bool]:
    """(num_task, distinct threads, every task ran exactly once) of run()'s result."""
    return code // 10000, code // 100 % 100, bool(code % 100)


@pytest.mark.parametrize("threads", [1, 2, 3, 8])
def test_every_task_runs_once_on_at_most_the_threads_asked(lib, threads):
    with ThreadControl(lib).use(threads):
        for num_task in (0, 1, 2, 5, 64):
            tasks, distinct, once = decode(lib["run"](num_task, -1))
            want = threads if num_task == 0 else min(num_task, threads)
            assert (tasks, once) == (want, True)
            assert 1 <= distinct <= tasks
    assert pool_workers() >= 0


def _pool_stats() -> list[int]:
    """The process pool's counters (EmberPoolStats): launches, tasks, stolen tasks, caller
    sleeps, worker sleeps."""
    owner = pool_owner()
    fn = owner.EmberPoolStats
    fn.argtypes, fn.restype = [ctypes.c_void_p, ctypes.c_int], ctypes.c_int
    count = fn(None, 0)
    out = (ctypes.c_int64 * count)()
    assert fn(out, count) == count
    return list(out)


def test_the_caller_runs_task_0_and_every_task_runs_once(lib):
    # Task 0 is the caller's own; a worker takes another task first and only then looks for
    # tasks no one has started, so the caller loses task 0 only if it is preempted between
    # posting the job and claiming it (hence "most", not "all", on a loaded machine).
    with ThreadControl(lib).use(2):
        for num_task in (0, 2):
            got = lib["own_first"](50, num_task)
            assert got < 1000000, "a task ran twice or not at all"
            assert got >= 25


def test_tasks_of_alternating_sizes_each_run_once(lib):
    # Jobs of 2, 3, 2, 4 ... tasks back to back: a worker that arrives late for one job must
    # not run (or re-run) a task of the next, whose claim words were reopened.
    with ThreadControl(lib).use(4):
        for num_task in (2, 3, 2, 4, 1, 3, 2) * 20:
            assert lib["own_first"](1, num_task) < 1000000


def test_pool_counters_count_launches_and_tasks(lib):
    with ThreadControl(lib).use(3):
        lib["run"](0, -1)  # the workers exist
        before = _pool_stats()
        for _ in range(20):
            assert decode(lib["run"](0, -1))[::2] == (3, True)
        lib["run"](1, -1)  # one task: serial, not a pooled launch
        after = _pool_stats()
    launches, tasks, stolen, caller_sleeps, worker_sleeps = (a - b for a, b in zip(after, before))
    assert (launches, tasks) == (20, 60)
    assert 0 <= stolen <= tasks and 0 <= caller_sleeps <= launches and worker_sleeps >= 0


def test_thread_count_changes_between_runs(lib):
    control = ThreadControl(lib)
    for threads in (2, 1, 4, 3, 1, 2):
        with control.use(threads):
            assert control.current() == threads
            assert decode(lib["run"](0, -1))[:1] == (threads,)


@pytest.mark.parametrize("threads", [1, 2, 4])
@pytest.mark.parametrize("failing", [0, 1, 3])
def test_an_error_in_any_task_propagates(lib, threads, failing):
    with ThreadControl(lib).use(threads):
        if failing >= threads:  # no such task: the launch succeeds
            assert decode(lib["run"](0, failing))[2]
            return
        with pytest.raises(ember.TVMError, match=f"task {failing} of {threads} failed on purpose"):
            lib["run"](0, failing)
        assert decode(lib["run"](0, -1))[2]  # the pool is usable afterwards


def test_a_null_task_function_is_refused(lib):
    with pytest.raises(ember.TVMError, match="the task function is NULL"):
        lib["null_task"]()


@pytest.mark.parametrize("threads", [1, 2, 4])
def test_nested_launches_run_serially(lib, threads):
    with ThreadControl(lib).use(threads):
        assert lib["nested"]() == threads * 100 + 1


@pytest.mark.parametrize("threads", [1, 2, 4])
def test_barrier_waits_for_every_task(lib, threads):
    with ThreadControl(lib).use(threads):
        assert lib["barrier"]() == threads * 10 + 1


def _hammer(lib, threads_per_caller, callers, calls):
    errors: list[str] = []

    def work(k: int) -> None:
        control = ThreadControl(lib)
        try:
            with control.use(threads_per_caller[k % len(threads_per_caller)]):
                for i in range(calls):
                    if i % 7 == 3:
                        try:
                            lib["run"](0, 0)
                            errors.append("a failing task did not fail")
                        except ember.TVMError as err:
                            if "failed on purpose" not in str(err):
                                errors.append(f"wrong message: {err}")
                        continue
                    tasks, _, once = decode(lib["run"](0, -1))
                    if not once or tasks < 1:
                        errors.append(f"tasks {tasks}, once {once}")
        except Exception as err:  # noqa: BLE001 - reported below
            errors.append(repr(err))

    workers = [threading.Thread(target=work, args=(k,)) for k in range(callers)]
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    return errors


def test_concurrent_callers_from_python_threads(lib):
    assert _hammer(lib, [2, 3, 1], callers=4, calls=150) == []


@pytest.mark.slow
def test_concurrent_callers_stress(lib):
    assert _hammer(lib, [2, 4, 1, 3], callers=8, calls=3000) == []


def test_pool_after_fork(lib):
    with ThreadControl(lib).use(2):
        lib["run"](0, -1)  # the parent's pool has a worker now
        pid = os.fork()
        if pid == 0:  # the child starts without workers and must still run every task
            code = 0
            try:
                code = 0 if decode(lib["run"](0, -1)) [::2] == (2, True) else 3
            except BaseException:  # noqa: BLE001
                code = 4
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.WEXITSTATUS(status) == 0


def _parallel_kernel(rows: int, cols: int) -> ember.runtime.Module:
    x = te.placeholder((rows, cols), name="x")
    w = te.placeholder((cols,), name="w")
    k = te.reduce_axis((0, cols), "k")
    y = te.compute((rows,), lambda i: te.sum(x[i, k] * w[k] + x[i, cols - 1 - k], axis=k),
                   name="y")
    s = te.create_schedule(y.op)
    s[y].parallel(y.op.axis[0])
    return ember.tir.build(s, [x, w, y], name="rowdot")


@pytest.mark.parametrize("rows", [1, 7, 300])
def test_parallel_generated_loop_matches_serial(rows):
    mod = _parallel_kernel(rows, 257)
    rng = np.random.default_rng(rows)
    x = rng.standard_normal((rows, 257)).astype("float32")
    w = rng.standard_normal(257).astype("float32")
    results = []
    for threads in (1, 2, 3, 5):
        out = ember.nd.empty((rows,), "float32")
        with ThreadControl(mod).use(threads):
            mod["rowdot"](ember.nd.array(x), ember.nd.array(w), out)
        results.append(out.numpy())
    for r in results[1:]:
        np.testing.assert_array_equal(r, results[0])  # each row is summed by one thread alone
    want = (x.astype("float64") @ w + x[:, ::-1].sum(axis=1)).astype("float32")
    np.testing.assert_allclose(results[0], want, rtol=1e-4, atol=1e-4)


def test_large_parallel_loop_is_a_task_function_small_one_is_serial():
    big = _parallel_kernel(300, 257).get_source()
    small = _parallel_kernel(4, 8).get_source()
    assert "TVMBackendParallelLaunch(rowdot_par0" in big
    assert "TVMBackendParallelLaunch" not in small.split("#endif", 1)[1]
    assert "omp parallel" not in big


def test_model_results_identical_across_thread_counts():
    from ember import relay

    x = relay.var("x", shape=(8, 512))
    w = relay.var("w", shape=(384, 512))
    y = relay.nn.relu(relay.nn.dense(x, w))
    mod = ember.IRModule.from_expr(relay.Function([x, w], y))
    rng = np.random.default_rng(0)
    params = {"w": rng.standard_normal((384, 512)).astype("float32")}
    data = rng.standard_normal((8, 512)).astype("float32")
    outs = [ember.compile(mod, executor="aot", params=params, threads=t)(data) for t in (1, 2, 4)]
    for o in outs[1:]:
        np.testing.assert_array_equal(o, outs[0])
    want = np.maximum(data @ params["w"].T, 0)
    np.testing.assert_allclose(outs[0], want, rtol=1e-4, atol=1e-3)


def test_two_python_threads_each_running_a_model():
    from ember import relay

    x = relay.var("x", shape=(16, 256))
    w = relay.var("w", shape=(256, 256))
    y = relay.nn.relu(relay.nn.dense(x, w))
    mod = ember.IRModule.from_expr(relay.Function([x, w], y))
    rng = np.random.default_rng(1)
    params = {"w": rng.standard_normal((256, 256)).astype("float32")}
    models = [ember.compile(mod, executor=ex, params=params, threads=2) for ex in ("graph", "aot")]
    data = [rng.standard_normal((16, 256)).astype("float32") for _ in range(4)]
    want = [models[0](d) for d in data]
    errors: list[str] = []

    def work(model) -> None:
        for i in range(40):
            got = model(data[i % 4])
            if not np.array_equal(got, want[i % 4]):
                errors.append(f"run {i}: wrong result")

    threads = [threading.Thread(target=work, args=(m,)) for m in models]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


@pytest.mark.parametrize("env, want", [({"EMBER_NUM_THREADS": "3"}, 3),
                                       ({"OMP_NUM_THREADS": "2"}, 2),
                                       ({"EMBER_NUM_THREADS": "1", "OMP_NUM_THREADS": "4"}, 1)])
def test_default_thread_count_comes_from_the_environment(lib, env, want):
    import subprocess

    script = (f"import sys; sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})\n"
              "from test_thread_pool import POOL_SOURCE, decode\n"
              "from ember.runtime.module import CSourceModule\n"
              "print(decode(CSourceModule(POOL_SOURCE)['run'](0, -1))[0])\n")
    clean = {k: v for k, v in os.environ.items() if k not in ("EMBER_NUM_THREADS",
                                                             "OMP_NUM_THREADS")}
    proc = subprocess.run([sys.executable, "-c", script], env={**clean, **env},
                          capture_output=True, text=True, check=False, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert int(proc.stdout.split()[-1]) == want
