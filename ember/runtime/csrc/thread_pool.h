/*
 * thread_pool.h -- ember's thread pool: the parallel half of TVMBackendParallelLaunch on
 * hosted builds (POSIX threads, GCC/Clang atomics). Included by exactly one file per binary:
 * ember/runtime/csrc/backend.c (every library ember builds) and the native runtime's backend.c.
 *
 * One launch at a time per pool; a launch is a job of n tasks (n <= its thread count). Each
 * thread has a task of its own: the caller task 0, worker k task k (mod n), so that a kernel
 * finds the part of its input that the previous kernel's same-numbered task wrote in its own
 * core's cache (onnxruntime's pool keeps a preferred worker per loop for the same reason).
 * A thread that is done claims any task no one has started: a worker that the OS has not
 * scheduled yet (or preempted) simply gets none, so it delays nobody. Workers are created on
 * first need, spin for a short while after each job (the next kernel usually follows within
 * microseconds) and then sleep on a condition variable; the caller, done with its share,
 * spins for the others a quarter as long as its share took before it sleeps.
 * A launch from inside a task, or while another thread's launch holds the pool, runs
 * serially on the calling thread: a process never runs more tasks at once than one launch
 * asked for, plus the callers' own threads.
 *
 * Several libraries in one process share one pool: the host (the Python runtime, the native
 * runtime) passes one pool's launch function to every library it loads (EmberHostTable's
 * parallel_launch); a library loaded without it uses its own.
 *
 * Job state is one 64-bit word: generation (32 bits) | task count (16). Task t is claimed by a
 * compare-and-swap of its own word claim[t] from gen << 1 (posted, open) to gen << 1 | 1: a
 * worker that wakes up late, after its job finished and the next one began, expects its old
 * generation there and can never run a task of the wrong job.
 */
#ifndef EMBER_THREAD_POOL_H_
#define EMBER_THREAD_POOL_H_

#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ember/c_backend_api.h"

#define EMBER_POOL_MAX_THREADS 64
#define EMBER_POOL_SPIN_NS 100000 /* workers spin this long for the next job, then sleep */
#define EMBER_POOL_WAIT_SPIN_NS 20000 /* the caller spins at least this long for stragglers, */
#define EMBER_POOL_WAIT_SPIN_MAX_NS 500000 /* and up to a quarter of its own share, at most this */

#if defined(__x86_64__) || defined(__i386__)
#define EMBER_POOL_PAUSE() __builtin_ia32_pause()
#elif defined(__aarch64__)
#define EMBER_POOL_PAUSE() __asm__ __volatile__("yield")
#else
#define EMBER_POOL_PAUSE() ((void)0)
#endif

#define EMBER_LOAD(p) __atomic_load_n((p), __ATOMIC_SEQ_CST)
#define EMBER_STORE(p, v) __atomic_store_n((p), (v), __ATOMIC_SEQ_CST)
#define EMBER_ADD(p, v) __atomic_add_fetch((p), (v), __ATOMIC_SEQ_CST)

/* penv->sync_handle of a pooled launch: TVMBackendParallelBarrier of any library calls
 * barrier() of the pool that runs the tasks. */
typedef struct EmberPoolSync {
  int (*barrier)(struct EmberPoolSync* sync, int task_id);
  int32_t num_task;
  int32_t arrived;
  uint32_t phase;
} EmberPoolSync;

/* Counters of a pool's life (EmberPoolStats): how often the spin-then-sleep waits slept. */
enum {
  EMBER_POOL_STAT_LAUNCHES,      /* pooled launches (serial ones are not counted) */
  EMBER_POOL_STAT_TASKS,         /* tasks they ran */
  EMBER_POOL_STAT_STOLEN,        /* tasks run by a thread other than the one they belong to */
  EMBER_POOL_STAT_CALLER_SLEEPS, /* launches whose caller slept for a straggler */
  EMBER_POOL_STAT_WORKER_SLEEPS, /* times a worker found no job within its spin and slept */
  EMBER_POOL_NUM_STATS
};

typedef struct {
  pthread_mutex_t mu;
  pthread_cond_t wake;    /* workers sleep here between jobs */
  pthread_cond_t done_cv; /* the caller sleeps here until the last task ends */
  int num_workers;
  int32_t busy;           /* a launch holds the pool */
  uint64_t state;         /* gen << 32 | num_task << 16 */
  uint64_t claim[EMBER_POOL_MAX_THREADS]; /* per task: gen << 1, | 1 once a thread took it */
  int64_t stats[EMBER_POOL_NUM_STATS];
  uint32_t gen;
  int32_t done;
  int32_t failed;
  int32_t sleepers;
  int32_t caller_waiting;
  FTVMParallelLambda flambda;
  void* cdata;
  TVMParallelGroupEnv env;
  EmberPoolSync sync;
} EmberPool;

static EmberPool g_pool = {.mu = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER,
                           .done_cv = PTHREAD_COND_INITIALIZER, .env = {NULL, 1}};
static __thread int g_pool_in_task; /* this thread runs a task: nested launches are serial */
static pthread_once_t g_pool_fork_once = PTHREAD_ONCE_INIT;

static int64_t ember_pool_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int ember_pool_barrier(EmberPoolSync* sync, int task_id) {
  uint32_t phase = EMBER_LOAD(&sync->phase);
  int spins = 0;
  (void)task_id;
  if (sync->num_task <= 1) return 0;
  if (EMBER_ADD(&sync->arrived, 1) == sync->num_task) {
    EMBER_STORE(&sync->arrived, 0);
    EMBER_STORE(&sync->phase, phase + 1);
    return 0;
  }
  while (EMBER_LOAD(&sync->phase) == phase) { /* every task of the job has a thread */
    if (++spins < 4096) {
      EMBER_POOL_PAUSE();
    } else {
      sched_yield();
    }
  }
  return 0;
}

#define EMBER_POOL_COUNT(p, stat, v) __atomic_add_fetch(&(p)->stats[stat], (v), __ATOMIC_RELAXED)

/* Run the tasks of job `gen` that no one has claimed: `own` first (this thread's task), then
 * the others in turn (a thread that is late or preempted leaves its task to the rest). A
 * worker beyond the job's task count (the pool grew for a larger launch) sits it out: the
 * owners and the caller cover every task, and it would only take one from its owner. */
static void ember_pool_run_tasks(EmberPool* p, uint32_t gen, uint32_t own) {
  const uint64_t s = EMBER_LOAD(&p->state);
  const uint32_t n = (uint32_t)((s >> 16) & 0xffff);
  uint32_t k;
  if ((uint32_t)(s >> 32) != gen || own >= n) return;
  for (k = 0; k < n; ++k) {
    const uint32_t task = (own + k) % n;
    uint64_t open = (uint64_t)gen << 1;
    int rc;
    if (!__atomic_compare_exchange_n(&p->claim[task], &open, open | 1, 0, __ATOMIC_SEQ_CST,
                                     __ATOMIC_SEQ_CST)) {
      continue; /* taken, or job `gen` is over (its tasks all taken) */
    }
    /* Task `task` is ours: the job cannot end (nor its fields change) before we count it. */
    if (k != 0) EMBER_POOL_COUNT(p, EMBER_POOL_STAT_STOLEN, 1);
    ++g_pool_in_task;
    rc = p->flambda((int)task, &p->env, p->cdata);
    --g_pool_in_task;
    if (rc != 0) EMBER_STORE(&p->failed, 1);
    if (EMBER_ADD(&p->done, 1) == (int32_t)n && EMBER_LOAD(&p->caller_waiting)) {
      pthread_mutex_lock(&p->mu);
      pthread_cond_signal(&p->done_cv);
      pthread_mutex_unlock(&p->mu);
    }
  }
}

/* The generation of a job newer than `seen` (spin, then sleep until one is posted). */
static uint32_t ember_pool_next_job(EmberPool* p, uint32_t seen) {
  int64_t deadline = ember_pool_now_ns() + EMBER_POOL_SPIN_NS;
  uint32_t gen;
  int i;
  for (;;) {
    for (i = 0; i < 64; ++i) {
      gen = (uint32_t)(EMBER_LOAD(&p->state) >> 32);
      if (gen != seen) return gen;
      EMBER_POOL_PAUSE();
    }
    if (ember_pool_now_ns() > deadline) break;
  }
  EMBER_POOL_COUNT(p, EMBER_POOL_STAT_WORKER_SLEEPS, 1);
  pthread_mutex_lock(&p->mu);
  EMBER_ADD(&p->sleepers, 1);
  while ((gen = (uint32_t)(EMBER_LOAD(&p->state) >> 32)) == seen) {
    pthread_cond_wait(&p->wake, &p->mu);
  }
  EMBER_ADD(&p->sleepers, -1);
  pthread_mutex_unlock(&p->mu);
  return gen;
}

/* The generation before the job that made worker k (a worker must not miss that job); set
 * under the pool's mutex before the thread starts. */
static uint32_t g_pool_worker_gen[EMBER_POOL_MAX_THREADS];

/* arg: the worker's number k (1, 2, ...): task k of a job is its own. */
static void* ember_pool_worker(void* arg) {
  EmberPool* p = &g_pool;
  const uint32_t own = (uint32_t)(uintptr_t)arg;
  uint32_t seen = g_pool_worker_gen[own];
  for (;;) {
    seen = ember_pool_next_job(p, seen);
    ember_pool_run_tasks(p, seen, own);
  }
  return NULL;
}

/* In a child of fork() only the forking thread exists: start again with no workers. */
static void ember_pool_after_fork(void) {
  EmberPool* p = &g_pool;
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->wake, NULL);
  pthread_cond_init(&p->done_cv, NULL);
  p->num_workers = 0;
  p->busy = 0;
  p->sleepers = 0;
  p->caller_waiting = 0;
  g_pool_in_task = 0;
}

static void ember_pool_register_fork(void) { pthread_atfork(NULL, NULL, ember_pool_after_fork); }

/* At least `want` workers (fewer if the OS refuses threads); how many there are. */
static int ember_pool_grow(EmberPool* p, int want) {
  pthread_once(&g_pool_fork_once, ember_pool_register_fork);
  pthread_mutex_lock(&p->mu);
  while (p->num_workers < want) {
    pthread_t tid;
    pthread_attr_t attr;
    int rc;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    g_pool_worker_gen[p->num_workers + 1] = p->gen;
    rc = pthread_create(&tid, &attr, ember_pool_worker, (void*)(uintptr_t)(p->num_workers + 1));
    pthread_attr_destroy(&attr);
    if (rc != 0) break;
    ++p->num_workers;
  }
  want = p->num_workers < want ? p->num_workers : want;
  pthread_mutex_unlock(&p->mu);
  return want;
}

/* Run flambda on up to num_threads threads (the caller is one); num_task 0 means one task
 * per thread, and never more tasks than threads (TVMBackendParallelBarrier needs every task
 * running at once). Returns nonzero if a task failed. */
static int ember_pool_launch(FTVMParallelLambda flambda, void* cdata, int num_task,
                             int num_threads) {
  EmberPool* p = &g_pool;
  TVMParallelGroupEnv serial = {NULL, 1};
  int n = num_threads < EMBER_POOL_MAX_THREADS ? num_threads : EMBER_POOL_MAX_THREADS;
  int32_t expected = 0, failed, k;
  int64_t spin, deadline;
  if (num_task > 0 && num_task < n) n = num_task;
  if (n <= 1 || g_pool_in_task ||
      !__atomic_compare_exchange_n(&p->busy, &expected, 1, 0, __ATOMIC_SEQ_CST,
                                   __ATOMIC_SEQ_CST)) {
    return flambda(0, &serial, cdata);
  }
  n = 1 + ember_pool_grow(p, n - 1);
  if (n <= 1) {
    EMBER_STORE(&p->busy, 0);
    return flambda(0, &serial, cdata);
  }
  p->flambda = flambda;
  p->cdata = cdata;
  p->env.num_task = n;
  p->env.sync_handle = &p->sync;
  p->sync.barrier = ember_pool_barrier;
  p->sync.num_task = n;
  p->sync.arrived = 0;
  p->done = 0;
  p->failed = 0;
  ++p->gen;
  for (k = 0; k < n; ++k) EMBER_STORE(&p->claim[k], (uint64_t)p->gen << 1); /* open */
  EMBER_STORE(&p->state, ((uint64_t)p->gen << 32) | ((uint64_t)n << 16));
  if (EMBER_LOAD(&p->sleepers) > 0) {
    pthread_mutex_lock(&p->mu);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
  }
  EMBER_POOL_COUNT(p, EMBER_POOL_STAT_LAUNCHES, 1);
  EMBER_POOL_COUNT(p, EMBER_POOL_STAT_TASKS, n);
  spin = ember_pool_now_ns();
  ember_pool_run_tasks(p, p->gen, 0);
  /* The others' shares are within a few percent of ours (the kernels cut by work): spin for a
   * quarter of ours (a sleep and its wake-up cost tens of microseconds on a virtual machine;
   * a 3% imbalance of a 1 ms share outlasted the 20 us this once spun), and past that assume
   * a preempted worker and leave this core to it. */
  deadline = ember_pool_now_ns();
  spin = (deadline - spin) / 4;
  spin = spin < EMBER_POOL_WAIT_SPIN_NS ? EMBER_POOL_WAIT_SPIN_NS
         : (spin < EMBER_POOL_WAIT_SPIN_MAX_NS ? spin : EMBER_POOL_WAIT_SPIN_MAX_NS);
  deadline += spin;
  while (EMBER_LOAD(&p->done) < n && ember_pool_now_ns() < deadline) EMBER_POOL_PAUSE();
  if (EMBER_LOAD(&p->done) < n) { /* a worker took a task and was descheduled: sleep */
    EMBER_POOL_COUNT(p, EMBER_POOL_STAT_CALLER_SLEEPS, 1);
    pthread_mutex_lock(&p->mu);
    EMBER_STORE(&p->caller_waiting, 1);
    while (EMBER_LOAD(&p->done) < n) pthread_cond_wait(&p->done_cv, &p->mu);
    EMBER_STORE(&p->caller_waiting, 0);
    pthread_mutex_unlock(&p->mu);
  }
  failed = EMBER_LOAD(&p->failed);
  EMBER_STORE(&p->busy, 0);
  return failed;
}

static int g_pool_default_threads;
static pthread_once_t g_pool_default_once = PTHREAD_ONCE_INIT;

static int ember_pool_positive_env(const char* name) {
  const char* raw = getenv(name);
  char* end = NULL;
  long v = raw != NULL ? strtol(raw, &end, 10) : 0;
  return raw != NULL && end != raw && v > 0 ? (int)(v < EMBER_POOL_MAX_THREADS ? v
                                                     : EMBER_POOL_MAX_THREADS) : 0;
}

/* The CPUs a cgroup CPU quota allows (rounded up), 0 when there is none or it cannot be read:
 * ``root``/cpu.max ("max 100000" or "<quota> <period>", cgroup v2), else
 * ``root``/cpu/cpu.cfs_quota_us and cpu.cfs_period_us (v1, quota -1: none). A container run
 * with --cpus=2 on a 64-CPU host sees all 64 in its affinity mask; a pool of 64 threads there
 * takes turns on 2 CPUs. ember.runtime.cpus.cgroup_cpu_limit reads the same files. */
static long ember_read_long(const char* dir, const char* name) {
  char path[512];
  long v = 0;
  FILE* f;
  if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path) return 0;
  f = fopen(path, "r");
  if (f == NULL) return 0;
  if (fscanf(f, "%ld", &v) != 1) v = 0;
  fclose(f);
  return v;
}

static int ember_cgroup_cpu_limit(const char* root) {
  char path[512];
  long quota = 0, period = 0;
  FILE* f;
  if (snprintf(path, sizeof path, "%s/cpu.max", root) < (int)sizeof path &&
      (f = fopen(path, "r")) != NULL) {
    if (fscanf(f, "%ld %ld", &quota, &period) != 2) quota = period = 0;  /* "max": none */
    fclose(f);
  } else if (snprintf(path, sizeof path, "%s/cpu", root) < (int)sizeof path) {
    quota = ember_read_long(path, "cpu.cfs_quota_us");
    period = ember_read_long(path, "cpu.cfs_period_us");
  }
  if (quota <= 0 || period <= 0) return 0;
  quota = quota / period + (quota % period != 0);  /* rounded up, without overflow */
  return quota < EMBER_POOL_MAX_THREADS ? (int)quota : EMBER_POOL_MAX_THREADS;
}

/* EMBER_NUM_THREADS, else OMP_NUM_THREADS, else the CPUs this process may run on (its affinity
 * mask, at most what a cgroup CPU quota allows). */
static void ember_pool_init_default(void) {
  int n = ember_pool_positive_env("EMBER_NUM_THREADS");
  if (n == 0) n = ember_pool_positive_env("OMP_NUM_THREADS");
  if (n == 0) {  /* chosen by no one: the CPUs there are to run on */
#if defined(__linux__) && defined(_GNU_SOURCE)
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) n = CPU_COUNT(&set);
#endif
    if (n == 0) n = (int)sysconf(_SC_NPROCESSORS_ONLN);
#if defined(__linux__)
    {
      int limit = ember_cgroup_cpu_limit("/sys/fs/cgroup");
      if (limit > 0 && limit < n) n = limit;
    }
#endif
  }
  g_pool_default_threads = n < 1 ? 1 : (n < EMBER_POOL_MAX_THREADS ? n : EMBER_POOL_MAX_THREADS);
}

/* The thread count of a launch whose caller did not choose one. */
static int ember_pool_default_threads(void) {
  pthread_once(&g_pool_default_once, ember_pool_init_default);
  return g_pool_default_threads;
}

/* ---- what every binary that includes this file puts in front of a pool -------------------- */

static __thread int g_pool_num_threads; /* this thread's launches; 0: the default */
static __thread int g_pool_lib_in_task; /* this thread runs a task of this binary's code */

/* The thread count of this thread's next launches. */
static int ember_pool_num_threads(void) {
  return g_pool_num_threads > 0 ? g_pool_num_threads : ember_pool_default_threads();
}

/* EmberSetNumThreads: n > 0 sets this thread's count; returns the count before. */
static int ember_pool_set_num_threads(int n) {
  int before = ember_pool_num_threads();
  if (n > 0) g_pool_num_threads = n < EMBER_POOL_MAX_THREADS ? n : EMBER_POOL_MAX_THREADS;
  return before;
}

/* ---- the work split of profiled launches (docs/profiling.md) ------------------------------
 * A profiling run (EmberSplitRun, backend.c) points this thread's g_split at a record of one
 * kernel call; every launch the kernel makes while it is set records, per task, the thread
 * that ran it and that task's CPU time (CLOCK_THREAD_CPUTIME_ID: the task's own work, however
 * loaded the machine is). Unprofiled launches pay one thread-local load. */
typedef struct {
  int32_t num_task;    /* tasks the launch ran (1: on the calling thread alone) */
  int32_t requested;   /* the kernel's num_task (0: one per thread) */
  int32_t caller;      /* the calling thread's id (task_thread's numbering) */
  int32_t threads;     /* the caller's thread count: tasks short of it leave threads idle */
  int64_t caller_cpu_ns; /* the calling thread's CPU time inside the launch (the times here
                          * less what the clock's own readings cost: ember_split_clock_ns) */
  int64_t wall_ns;
  int32_t task_thread[EMBER_POOL_MAX_THREADS]; /* per task: the id of the thread that ran it */
  int64_t task_cpu_ns[EMBER_POOL_MAX_THREADS]; /* per task: its CPU time */
} EmberSplitLaunch;

typedef struct {
  int64_t kernel_cpu_ns;  /* the calling thread's CPU time of the whole kernel call */
  int64_t kernel_wall_ns;
  int32_t num_launches;   /* launches the call made (records past capacity are not kept) */
  int32_t capacity;
  int32_t simulate;       /* > 0: each launch runs as a job of this many tasks, one after
                           * another on the caller (a split for more threads than cores),
                           * twice: the second pass is recorded (so a kernel that updates a
                           * buffer in place leaves other values than a run would) */
  int32_t reserved;
  EmberSplitLaunch* launches;
} EmberSplitRecord;

static __thread EmberSplitRecord* g_split; /* set only inside a profiled kernel call */
static __thread int32_t g_split_thread_id; /* 0: not numbered yet */
static int32_t g_split_next_thread_id;

static int64_t ember_split_cpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The CPU time one reading of the thread CPU clock costs (the least of a few back-to-back
 * pairs), measured once: each span between two readings holds one reading's cost, which
 * EmberSplitRun's spans take off. The clock is a system call: on a 2-vCPU EPYC virtual
 * machine 0.58 us a reading, and an empty task read as 0.68 us of work, so that 16 simulated
 * tasks of a launch added 10 us to the work of a kernel that one task had done with 0.6 us
 * (mobilenet_v2's kernels, 3 to 10 us a task on 16 threads: `x 1t` 1.44 of which 0.15 was
 * the clock), and the kernel call's own two readings read as serial work. */
static int64_t ember_split_clock_ns(void) {
  static int64_t cost = -1;
  int64_t best = -1, a, b;
  int k;
  if (__atomic_load_n(&cost, __ATOMIC_RELAXED) >= 0) return cost;
  for (k = 0; k < 9; ++k) {
    a = ember_split_cpu_ns();
    b = ember_split_cpu_ns();
    if (best < 0 || b - a < best) best = b - a;
  }
  __atomic_store_n(&cost, best > 0 ? best : 0, __ATOMIC_RELAXED);
  return cost;
}

/* A span between two readings of the clock, less the one reading's cost it holds. */
static int64_t ember_split_span_ns(int64_t start) {
  const int64_t span = ember_split_cpu_ns() - start - ember_split_clock_ns();
  return span > 0 ? span : 0;
}

/* A small number naming this thread in split records (1, 2, ... in order of first use). */
static int32_t ember_split_thread_id(void) {
  if (g_split_thread_id == 0) g_split_thread_id = EMBER_ADD(&g_split_next_thread_id, 1);
  return g_split_thread_id;
}

/* Push this core's private caches out (writes over EMBER_SPLIT_EVICT_BYTES, more than an L2)
 * between the simulated tasks of one thread: otherwise the first task loads the weights and
 * the input rows that the next ones then find in cache, and reads as imbalance. */
#define EMBER_SPLIT_EVICT_BYTES (4 << 20)
static void ember_split_evict(void) {
  static __thread volatile char* scratch;
  size_t i;
  if (scratch == NULL) scratch = (volatile char*)malloc(EMBER_SPLIT_EVICT_BYTES);
  if (scratch == NULL) return;
  for (i = 0; i < EMBER_SPLIT_EVICT_BYTES; i += 64) scratch[i] = (char)i;
}

/* A lambda as a pool (maybe another binary's) runs it: the first task to fail leaves its
 * message, this binary's last error of the thread it ran on, for the caller. */
typedef struct {
  FTVMParallelLambda flambda;
  void* cdata;
  int32_t failed;
  EmberSplitLaunch* split; /* NULL unless the launch is profiled */
  char error[1024];
} EmberLaunchContext;

static int ember_pool_run_task(int task_id, TVMParallelGroupEnv* penv, void* cdata) {
  EmberLaunchContext* ctx = (EmberLaunchContext*)cdata;
  int rc;
  ++g_pool_lib_in_task;
  if (ctx->split == NULL) {
    rc = ctx->flambda(task_id, penv, ctx->cdata);
  } else { /* task ids are < num_task <= EMBER_POOL_MAX_THREADS: each writes its own slot */
    int64_t start = ember_split_cpu_ns();
    rc = ctx->flambda(task_id, penv, ctx->cdata);
    ctx->split->task_cpu_ns[task_id] = ember_split_span_ns(start);
    ctx->split->task_thread[task_id] = ember_split_thread_id();
    EMBER_STORE(&ctx->split->num_task, penv->num_task);
  }
  --g_pool_lib_in_task;
  if (rc != 0 && __atomic_exchange_n(&ctx->failed, 1, __ATOMIC_SEQ_CST) == 0) {
    const char* msg = TVMGetLastError();
    size_t n = 0;
    while (msg != NULL && msg[n] != '\0' && n + 1 < sizeof ctx->error) {
      ctx->error[n] = msg[n];
      ++n;
    }
    ctx->error[n] = '\0';
  }
  return rc;
}

typedef int (*EmberPoolLaunchFn)(FTVMParallelLambda flambda, void* cdata, int num_task,
                                 int num_threads);

static int ember_pool_launch_profiled(EmberPoolLaunchFn launch, FTVMParallelLambda flambda,
                                      void* cdata, int num_task, EmberLaunchContext* ctx);

/* TVMBackendParallelLaunch on `launch` (NULL: this binary's pool): serial for one thread, one
 * task or a launch from inside a task; recorded while this thread profiles a kernel call.
 * Returns the lambda's status; when a task on another thread failed, ctx->error holds its
 * message (empty otherwise). */
static int ember_pool_launch_from(EmberPoolLaunchFn launch, FTVMParallelLambda flambda,
                                  void* cdata, int num_task, EmberLaunchContext* ctx) {
  TVMParallelGroupEnv env = {NULL, 1};
  int threads = ember_pool_num_threads();
  ctx->error[0] = '\0';
  ctx->split = NULL;
  if (g_split != NULL && !g_pool_lib_in_task) {
    return ember_pool_launch_profiled(launch, flambda, cdata, num_task, ctx);
  }
  if (threads <= 1 || num_task == 1 || g_pool_lib_in_task) return flambda(0, &env, cdata);
  ctx->flambda = flambda;
  ctx->cdata = cdata;
  ctx->failed = 0;
  return (launch != NULL ? launch : ember_pool_launch)(ember_pool_run_task, ctx, num_task,
                                                       threads);
}

/* ember_pool_launch_from of a profiled kernel call: the same launch, every task timed (a
 * serial one too, as one task on the caller) into the next record of g_split. */
static int ember_pool_launch_profiled(EmberPoolLaunchFn launch, FTVMParallelLambda flambda,
                                      void* cdata, int num_task, EmberLaunchContext* ctx) {
  EmberSplitRecord* record = g_split;
  TVMParallelGroupEnv env = {NULL, 1};
  int threads = ember_pool_num_threads();
  int64_t cpu0 = ember_split_cpu_ns(), wall0 = ember_pool_now_ns();
  int32_t index = record->num_launches++;
  EmberSplitLaunch* rec = index < record->capacity ? &record->launches[index] : NULL;
  int rc;
  if (rec == NULL) { /* past the caller's capacity: counted, run unprofiled */
    g_split = NULL;
    rc = ember_pool_launch_from(launch, flambda, cdata, num_task, ctx);
    g_split = record;
    return rc;
  }
  memset(rec, 0, sizeof *rec);
  rec->requested = num_task;
  rec->caller = ember_split_thread_id();
  rec->threads = threads;
  ctx->flambda = flambda;
  ctx->cdata = cdata;
  ctx->failed = 0;
  ctx->split = rec;
  if (record->simulate > 0) { /* the pool's task count for `simulate` threads, serially */
    int32_t k, n = num_task > 0 && num_task < record->simulate ? num_task : record->simulate;
    TVMParallelGroupEnv sim = {NULL, n}; /* no kernel waits at a barrier (one would hang) */
    rec->threads = record->simulate;
    /* A first pass, not recorded, as the cores of a real launch ran the kernel's code the
     * run before: else the first task pays for the code, its translations and branches. */
    ctx->split = NULL;
    for (rc = 0, k = 0; k < n; ++k) rc |= ember_pool_run_task(k, &sim, ctx);
    ctx->split = rec;
    for (k = 0; k < n && rc == 0; ++k) {
      ember_split_evict(); /* each task starts as cold as on a core of its own */
      rc |= ember_pool_run_task(k, &sim, ctx);
    }
  } else if (threads <= 1 || num_task == 1) {
    rc = ember_pool_run_task(0, &env, ctx);
  } else {
    rc = (launch != NULL ? launch : ember_pool_launch)(ember_pool_run_task, ctx, num_task,
                                                       threads);
  }
  rec->caller_cpu_ns = ember_split_span_ns(cpu0);
  rec->wall_ns = ember_pool_now_ns() - wall0;
  return rc;
}

/* TVMBackendParallelBarrier: every task of a pooled launch runs at once, so all arrive. */
static int ember_pool_barrier_of(int task_id, TVMParallelGroupEnv* penv) {
  EmberPoolSync* sync;
  if (penv == NULL || penv->num_task <= 1 || penv->sync_handle == NULL) return 0;
  sync = (EmberPoolSync*)penv->sync_handle;
  return sync->barrier(sync, task_id);
}

/* The pool's counters (EMBER_POOL_STAT_*) into out[0 .. n): how many there are. */
static inline int ember_pool_stats(int64_t* out, int n) {
  int k;
  for (k = 0; k < n && k < EMBER_POOL_NUM_STATS; ++k) {
    out[k] = __atomic_load_n(&g_pool.stats[k], __ATOMIC_RELAXED);
  }
  return EMBER_POOL_NUM_STATS;
}

/* Workers of the pool (for tests and diagnostics). */
static inline int ember_pool_num_workers(void) {
  int n;
  pthread_mutex_lock(&g_pool.mu);
  n = g_pool.num_workers;
  pthread_mutex_unlock(&g_pool.mu);
  return n;
}

#endif /* EMBER_THREAD_POOL_H_ */
