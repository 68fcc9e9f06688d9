"""The task cuts of the conv and GEMM kernels (conv_nchwc.h ember_conv_task_start, gemm.h
ember_gemm_task_start): tasks get equal shares of the work (output blocks x columns plus two
a register tile; register tiles of C), not equal counts of work items, so that a last narrow strip, a last one-block
group or a short last row block does not leave a task idle (a 1x1 conv over a 7x7 map in
strips of 48 columns: 48 of 49 columns went to one of two tasks). Checked against a brute
force over the items: conv in both loop orders, dense, grouped and depthwise; GEMM with
batches and short blocks; 1 to 64 tasks."""
from __future__ import annotations

import ctypes
import subprocess

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_conv2d_nchwc import CC, INCLUDE, STRICT

pytestmark = pytest.mark.skipif(CC is None, reason="needs a C compiler")

SOURCE = r"""
#include "ember/c_backend_api.h"
#include "ember/kernels/conv_nchwc.h"
#include "ember/kernels/gemm.h"

/* starts[t] of a GEMM launch; returns the items * 1000000 + the launch's row block */
long long gemm_starts(int batch, int M, int N, int mc, int tasks, long long* starts) {
  ember_gemm_args g;
  int t;
  memset(&g, 0, sizeof g);
  g.batch = batch; g.M = M; g.N = N; g.mc = mc;
  g.mc = ember_gemm_task_mc(&g, tasks);
  for (t = 0; t <= tasks; ++t) starts[t] = ember_gemm_task_start(&g, t, tasks);
  return ember_gemm_items(&g) * 1000000LL + g.mc;
}

int gemm_nr(void) { return EMBER_GEMM_NR; }
int gemm_mr(void) { return EMBER_GEMM_MR; }

/* starts[t] for t in 0..tasks of the launch's strip; returns the item count */
long long task_starts(int n, int groups, int ocb_g, int oh, int ow, int rb, int rw, int strip,
                      int order, int depthwise, int tasks, long long* starts, int kh, int pt) {
  ember_conv_p p = {0};
  int t;
  p.n = n; p.groups = groups; p.ocb_g = ocb_g; p.ocb = groups * ocb_g; p.oh = oh; p.ow = ow;
  p.kh = kh; p.pt = pt; p.h = oh - 1 + kh - 2 * pt; p.sh = p.dh = 1; /* stride 1, pads pt */
  p.rb = rb; p.rw = rw; p.strip = strip; p.order = order; p.depthwise = depthwise;
  p.strip = ember_conv_task_strip(&p, tasks, 0);
  for (t = 0; t <= tasks; ++t) starts[t] = ember_conv_task_start(&p, t, tasks);
  return ember_conv_items(&p) * 1000000LL + p.strip;
}

/* ember_conv_place_share of every task: cover[item in order 0] counts the runs of it,
 * first[t] / last[t] the first and last place (image, row, strip) task t ran; returns the
 * item count * 1000000 + the launch's strip (the place cut's) */
static int* g_cover;
static long long *g_first, *g_last;
static int g_task;
static void record(const ember_conv_p* p, int64_t lo, int64_t hi) {
  const int64_t G = ember_conv_block_groups(p), S = (p->ow + p->strip - 1) / p->strip;
  int64_t i;
  for (i = lo; i < hi; ++i) {
    int32_t b, og, oy, s;
    long long place;
    ember_conv_item(p, i, &b, &og, &oy, &s);
    g_cover[((b * G + og) * p->oh + oy) * S + s] += 1;
    place = ((long long)b * p->oh + oy) * S + s;
    if (g_first[g_task] < 0 || place < g_first[g_task]) g_first[g_task] = place;
    if (place > g_last[g_task]) g_last[g_task] = place;
  }
}

long long place_cover(int n, int groups, int ocb_g, int oh, int ow, int rb, int rw, int strip,
                      int order, int depthwise, int tasks, int* cover, long long* first,
                      long long* last) {
  ember_conv_p p = {0};
  int t;
  p.n = n; p.groups = groups; p.ocb_g = ocb_g; p.ocb = groups * ocb_g; p.oh = oh; p.ow = ow;
  p.rb = rb; p.rw = rw; p.strip = strip; p.order = order; p.depthwise = depthwise;
  p.kh = p.sh = p.dh = 1; p.h = oh; /* rows of equal work */
  p.strip = ember_conv_task_strip(&p, tasks, 1);
  g_cover = cover; g_first = first; g_last = last;
  for (t = 0; t < tasks; ++t) {
    ember_conv_p q = p;
    g_task = t;
    first[t] = -1;
    last[t] = -1;
    ember_conv_place_share(&q, t, tasks, record);
  }
  return ember_conv_items(&p) * 1000000LL + p.strip;
}
"""


@pytest.fixture(scope="module")
def lib(tmp_path_factory: pytest.TempPathFactory) -> ctypes.CDLL:
    out = tmp_path_factory.mktemp("conv_task_split")
    src, so = out / "split.c", out / "split.so"
    src.write_text(SOURCE)
    cmd = [CC, *STRICT, "-Wno-unused-function", "-fPIC", "-shared", f"-I{INCLUDE}", str(src),
           "-o", str(so)]
    proc = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[:4000]
    lib = ctypes.CDLL(str(so))
    lib.task_starts.restype = lib.gemm_starts.restype = ctypes.c_longlong
    lib.place_cover.restype = ctypes.c_longlong
    return lib


def item_work(n, groups, ocb_g, oh, ow, rb, rw, strip, order, depthwise, kh=1, pt=0):
    """Each item's work (blocks x its strip's columns plus 2 a register tile: a tile's weight
    loads, x the kernel rows inside the image of a stride-1 kernel of kh rows padded by pt
    above and below), in item order: the kernel's ember_conv_item."""
    h = oh - 1 + kh - 2 * pt
    taps = [max(min(y - pt + kh, h) - max(y - pt, 0), 1) for y in range(oh)]
    if depthwise:
        sizes = [1] * (groups * ocb_g)
    else:
        per = [min(rb, ocb_g - k) for k in range(0, ocb_g, rb)]
        sizes = per * groups
    widths = [2 * -(-min(strip, ow - x) // rw) + min(strip, ow - x) for x in range(0, ow, strip)]
    out = []
    for _ in range(n):
        if order:
            for y in range(oh):
                for w in widths:
                    out += [w * nb * taps[y] for nb in sizes]
        else:
            for nb in sizes:
                out += [w * nb * taps[y] for y in range(oh) for w in widths]
    return out


SHAPES = st.tuples(st.integers(1, 2), st.integers(1, 3), st.integers(1, 7), st.integers(1, 9),
                   st.integers(1, 70), st.sampled_from([1, 2]), st.integers(1, 8),
                   st.integers(1, 64), st.integers(0, 1), st.booleans(), st.integers(1, 64))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(SHAPES, st.sampled_from([(1, 0), (3, 1), (5, 2), (3, 0), (7, 3)]))
def test_tasks_get_equal_shares_of_the_work(lib, shape, kernel):
    """Shares of the work as the brute force counts it, the rows at the map's top and bottom
    edges lighter by the kernel rows in the padding (kernel: rows, padding)."""
    n, groups, ocb_g, oh, ow, rb, rw, strip, order, depthwise, tasks = shape
    kh, pt = kernel
    if depthwise:
        groups, rb = groups * ocb_g, 1  # one block per group
        ocb_g = 1
    starts = (ctypes.c_longlong * (tasks + 1))()
    packed = lib.task_starts(n, groups, ocb_g, oh, ow, rb, rw, min(strip, ow), order,
                             int(depthwise), tasks, starts, kh, pt)
    items, task_strip = divmod(packed, 1000000)
    work = item_work(n, groups, ocb_g, oh, ow, rb, rw, task_strip, order, depthwise, kh, pt)
    assert len(work) == items
    assert starts[0] == 0 and starts[tasks] == items
    assert all(starts[t] <= starts[t + 1] for t in range(tasks))  # a partition of the items
    total, biggest = sum(work), max(work)
    for t in range(tasks):  # each task within one item of its share
        assert abs(sum(work[starts[t]:starts[t + 1]]) - total / tasks) <= biggest


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(SHAPES)
def test_place_shares_run_every_item_once_each_task_a_run_of_places(lib, shape):
    """ember_conv_place_share: the tasks together run every item exactly once (in either
    planned order), each task's places form one run that follows the previous task's (two
    tasks share at most the place where one ends and the next begins), and the strips are
    cut (in whole tiles) where the planned ones leave fewer places than tasks."""
    n, groups, ocb_g, oh, ow, rb, rw, strip, order, depthwise, tasks = shape
    if depthwise:
        groups, rb = groups * ocb_g, 1
        ocb_g = 1
    cap = n * groups * ocb_g * oh * ow  # at least the items of any strip
    cover = (ctypes.c_int * cap)()
    first, last = (ctypes.c_longlong * tasks)(), (ctypes.c_longlong * tasks)()
    packed = lib.place_cover(n, groups, ocb_g, oh, ow, rb, rw, min(strip, ow), order,
                             int(depthwise), tasks, cover, first, last)
    items, task_strip = divmod(packed, 1000000)
    assert list(cover[:items]) == [1] * items
    ran = [(first[t], last[t]) for t in range(tasks) if first[t] >= 0]
    assert all(a <= b for a, b in ran)
    assert all(b0 <= a1 for (_, b0), (a1, _) in zip(ran, ran[1:]))
    planned = min(strip, ow)
    assert task_strip <= planned
    if n * oh * -(-ow // planned) < tasks and planned > rw:  # too few places: strips cut
        assert task_strip < planned and task_strip % rw == 0


def test_a_narrow_last_strip_no_longer_idles_a_task(lib):
    # 1x1 conv 672 -> 192 over a 7x7 map, flattened to one row of 49 in strips of 48
    starts = (ctypes.c_longlong * 3)()
    packed = lib.task_starts(1, 1, 24, 1, 49, 2, 6, 48, 1, 0, 2, starts, 1, 0)
    items, strip = divmod(packed, 1000000)
    assert (items, strip) == (36, 24)  # cut to 16 items a task: strips of 24, 24 and 1
    work = item_work(1, 1, 24, 1, 49, 2, 6, strip, 1, False)  # 32, 32 and 3 a block
    shares = [sum(work[starts[t]:starts[t + 1]]) for t in range(2)]
    assert shares == [832, 776]  # within one item (64) of 804 each
    whole = item_work(1, 1, 24, 1, 49, 2, 6, 48, 1, False)
    assert [sum(whole[:12]), sum(whole[12:])] == [1536, 72]  # the cut before: 12 items each


def gemm_item_work(batch, M, N, mc, mr, nr):
    """Each GEMM item's register tiles, in item order (batch, panel, row block)."""
    rows = [-(-min(mc, M - m) // mr) for m in range(0, M, mc)]
    return [r for _ in range(batch) for _ in range(0, N, nr) for r in rows]


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(st.integers(1, 3), st.integers(1, 200), st.integers(1, 300), st.integers(1, 8),
       st.integers(1, 64))
def test_gemm_tasks_get_equal_shares_of_the_work(lib, batch, M, N, mc_tiles, tasks):
    mr = lib.gemm_mr()
    starts = (ctypes.c_longlong * (tasks + 1))()
    items, mc = divmod(lib.gemm_starts(batch, M, N, mc_tiles * mr, tasks, starts), 1000000)
    work = gemm_item_work(batch, M, N, mc, mr, lib.gemm_nr())
    assert len(work) == items and starts[0] == 0 and starts[tasks] == items
    assert all(starts[t] <= starts[t + 1] for t in range(tasks))
    for t in range(tasks):
        assert abs(sum(work[starts[t]:starts[t + 1]]) - sum(work) / tasks) <= max(work)
