"""RPC round trips over loopback: an empty remote call, and NDArray copies each way.

    python benchmarks/bench_rpc.py [--repeat R] [--json PATH] [--transports tcp,pipe,local]
    python benchmarks/bench_rpc.py --limits [--json PATH]

Starts an ``ember.rpc.Server`` on 127.0.0.1 (a free port) and, for each transport (``tcp``:
``rpc.connect``; ``pipe``: ``PopenSession``; ``local``: ``LocalSession``, no transport at all),
times:

- ``call``: a remote call of ``testing.nop`` (request and reply frames, no payload);
- ``to_1MB`` / ``to_16MB``: ``remote_array.copyfrom(numpy_array)`` of float32 data;
- ``from_1MB`` / ``from_16MB``: ``remote_array.numpy()``.

Prints the median and best of R repeats (microseconds for calls, milliseconds and MB/s for
copies) and writes the figures as JSON (default bench_results/rpc.json in the cache directory).

``--limits`` measures the server's limits against hostile clients instead (``docs/rpc.md``,
"Limits"; JSON default bench_results/rpc_limits.json), each against its documented bound:

- ``drip``: how long an unauthenticated client sending a byte every 0.3 s holds its place
  (a server with a secret and a 2 s handshake deadline; bound: the deadline);
- ``behind drippers``: how long a real client waits for its first reply while dripping
  clients fill every handshake place (bound: the handshake deadline);
- ``behind idle``: the same behind sessions that hold every slot and send nothing (bound:
  ``reclaim_idle``, 1 s);
- ``behind keepalive``: the same behind sessions that call ``testing.nop`` every 50 ms
  (bound: ``reclaim_age``, here 3 s);
- ``64 MiB claim``: how much a session process grows on a frame header claiming 64 MiB and
  no payload (bound: the 1 MiB first payload chunk; Linux only).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import statistics
import sys
import threading
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Callable

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _report import open_results, results_path  # noqa: E402
import ember  # noqa: E402
from ember import rpc  # noqa: E402

SIZES = {"1MB": 1 << 20, "16MB": 16 << 20}


def timings(run: Callable[[], Any], repeat: int) -> list[float]:
    """Seconds of each of ``repeat`` runs (after one warm-up run)."""
    run()
    out = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        out.append(time.perf_counter() - start)
    return out


def cases(sess: rpc.RPCSession) -> dict[str, tuple[Callable[[], Any], int]]:
    """name -> (run, bytes moved per run)."""
    nop = sess.get_function("testing.nop")
    out: dict[str, tuple[Callable[[], Any], int]] = {"call": (nop, 0)}
    for label, nbytes in SIZES.items():
        data = np.random.default_rng(0).standard_normal(nbytes // 4).astype("float32")
        remote = ember.nd.empty(data.shape, "float32", sess.cpu(0))
        out[f"to_{label}"] = (lambda r=remote, d=data: r.copyfrom(d), nbytes)
        out[f"from_{label}"] = (remote.numpy, nbytes)
    return out


def measure(sess: rpc.RPCSession, repeat: int) -> dict[str, dict[str, float]]:
    results = {}
    for name, (run, nbytes) in cases(sess).items():
        secs = timings(run, repeat if nbytes < 8 << 20 else max(repeat // 4, 3))
        med, best = statistics.median(secs), min(secs)
        entry = {"median_s": med, "best_s": best, "bytes": nbytes}
        if nbytes:
            entry["median_MBps"] = nbytes / med / 1e6
        results[name] = entry
    return results


def sessions(names: list[str], server: rpc.Server) -> dict[str, rpc.RPCSession]:
    make = {"tcp": lambda: rpc.connect(server.host, server.port, timeout=120),
            "pipe": lambda: rpc.PopenSession(timeout=120),
            "local": rpc.LocalSession}
    return {name: make[name]() for name in names}


def print_table(results: dict[str, dict[str, dict[str, float]]]) -> None:
    print(f"{'transport':<9} {'case':<10} {'median':>12} {'best':>12} {'MB/s':>9}")
    for transport, rows in results.items():
        for name, r in rows.items():
            if r["bytes"]:
                med, best = f"{r['median_s'] * 1e3:.2f} ms", f"{r['best_s'] * 1e3:.2f} ms"
                rate = f"{r['median_MBps']:.0f}"
            else:
                med, best = f"{r['median_s'] * 1e6:.1f} us", f"{r['best_s'] * 1e6:.1f} us"
                rate = ""
            print(f"{transport:<9} {name:<10} {med:>12} {best:>12} {rate:>9}")


# ---- --limits ----------------------------------------------------------------------------------
def _hello_frame() -> bytes:
    from ember.runtime.rpc.handshake import hello_payload
    from ember.runtime.rpc.protocol import Kind, pack_header

    hello = hello_payload("", 0, False, bytes(16))
    return pack_header(Kind.HELLO, 0, len(hello)) + hello


def _drip(sock: socket.socket, every: float, stop: threading.Event) -> float:
    """Send a HELLO a byte every ``every`` s until the server answers or closes; returns
    the seconds that took."""
    start, data = time.monotonic(), _hello_frame()
    for i in range(len(data)):
        try:
            sock.send(data[i:i + 1])
            sock.settimeout(every)
            if not stop.is_set():
                sock.recv(1, socket.MSG_PEEK)
            return time.monotonic() - start
        except TimeoutError:
            continue
        except OSError:
            break
    return time.monotonic() - start


def _first_reply(server: rpc.Server, **kwargs: Any) -> float:
    """Seconds from connecting to a real client's first reply."""
    start = time.monotonic()
    with rpc.connect(server.host, server.port, timeout=60, **kwargs) as sess:
        sess.get_function("testing.nop")()
        return time.monotonic() - start


def _drippers(server: rpc.Server, count: int, stop: threading.Event) -> list[threading.Thread]:
    threads = []
    for _ in range(count):
        sock = socket.create_connection((server.host, server.port), timeout=10)
        threads.append(threading.Thread(target=_drip, args=(sock, 0.3, stop), daemon=True))
        threads[-1].start()
    return threads


def limit_drip() -> dict[str, float]:
    with rpc.Server(port=0, silent=True, log_file=os.devnull, secret="s", handshake_timeout=2.0) as server:
        sock = socket.create_connection((server.host, server.port), timeout=10)
        with sock:
            return {"seconds": _drip(sock, 0.3, threading.Event()), "bound_s": 2.0}


def limit_behind_drippers() -> dict[str, float]:
    with rpc.Server(port=0, silent=True, log_file=os.devnull, secret="s", handshake_timeout=2.0,
                    max_handshakes=4) as server:
        stop = threading.Event()
        _drippers(server, 4, stop)
        time.sleep(0.2)
        wait = _first_reply(server, secret="s")
        stop.set()
        return {"seconds": wait, "bound_s": 2.0}


def _holders(server: rpc.Server, count: int, every: float | None, stack: ExitStack) -> None:
    """``count`` sessions holding the slots: idle (``every`` None) or calling testing.nop."""
    stop = threading.Event()
    stack.callback(stop.set)
    for _ in range(count):
        sess = rpc.connect(server.host, server.port, timeout=60)
        nop = sess.get_function("testing.nop")
        nop()
        if every is not None:
            def ping(nop: Any = nop) -> None:
                while not stop.wait(every):
                    try:
                        nop()
                    except rpc.RPCError:
                        return
            threading.Thread(target=ping, daemon=True).start()


def limit_behind_sessions(every: float | None, reclaim_age: float) -> dict[str, float]:
    with rpc.Server(port=0, silent=True, log_file=os.devnull, max_sessions=4, reclaim_age=reclaim_age) as server, \
            ExitStack() as stack:
        _holders(server, 4, every, stack)
        return {"seconds": _first_reply(server),
                "bound_s": 1.0 if every is None else reclaim_age}


def limit_claim() -> dict[str, float]:
    from ember.runtime.rpc.handshake import client_handshake
    from ember.runtime.rpc.protocol import Kind, pack_header
    from ember.runtime.rpc.transport import PAYLOAD_CHUNK, SocketChannel

    def rss_mib(pid: int) -> float:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return float("nan")

    with rpc.Server(port=0, silent=True, log_file=os.devnull, max_sessions=1, frame_timeout=5.0) as server:
        ch = SocketChannel(socket.create_connection((server.host, server.port), timeout=10))
        client_handshake(ch, "", None, 0, 10.0)
        pid = int(Path(f"/proc/{server.pid}/task/{server.pid}/children").read_text().split()[0])
        before = rss_mib(pid)
        ch.send([pack_header(Kind.CALL, 1, 64 << 20)], 5.0)
        time.sleep(0.5)
        grown = rss_mib(pid) - before
        ch.close()
    return {"MiB": grown, "bound_MiB": PAYLOAD_CHUNK / (1 << 20)}


def measure_limits() -> dict[str, dict[str, float]]:
    results = {"drip": limit_drip(), "behind drippers": limit_behind_drippers(),
               "behind idle": limit_behind_sessions(None, 600.0),
               "behind keepalive": limit_behind_sessions(0.05, 3.0)}
    if Path("/proc/self/task").exists():
        results["64 MiB claim"] = limit_claim()
    return results


def print_limits(results: dict[str, dict[str, float]]) -> None:
    print(f"{'case':<18} {'measured':>10} {'bound':>8}")
    for name, r in results.items():
        if "MiB" in r:
            print(f"{name:<18} {r['MiB']:>6.1f} MiB {r['bound_MiB']:>4.0f} MiB")
        else:
            print(f"{name:<18} {r['seconds']:>8.2f} s {r['bound_s']:>6.1f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=200, help="runs per case (copies of "
                        "16 MB use a quarter of them)")
    parser.add_argument("--transports", default="tcp,pipe,local",
                        help="comma-separated: tcp, pipe, local")
    parser.add_argument("--limits", action="store_true",
                        help="measure the server's limits against hostile clients instead")
    parser.add_argument("--json", default=None, help="where to write results")
    opts = parser.parse_args()
    if opts.limits:
        opts.json = opts.json or str(results_path("rpc_limits.json"))
        limits = measure_limits()
        print_limits(limits)
        with open_results(opts.json) as f:
            json.dump({"benchmark": "rpc_limits", "python": platform.python_version(),
                       "machine": platform.machine(), "results": limits}, f, indent=2)
        print(f"wrote {opts.json}")
        return
    opts.json = opts.json or str(results_path("rpc.json"))

    with rpc.Server(port=0, silent=True) as server:
        opened = sessions(opts.transports.split(","), server)
        try:
            results = {name: measure(sess, opts.repeat) for name, sess in opened.items()}
        finally:
            for sess in opened.values():
                sess.close()
    print_table(results)
    os.makedirs(os.path.dirname(os.path.abspath(opts.json)), exist_ok=True)
    with open_results(opts.json) as f:
        json.dump({"benchmark": "rpc", "repeat": opts.repeat, "python": platform.python_version(),
                   "machine": platform.machine(), "results": results}, f, indent=2)
    print(f"wrote {opts.json}")


if __name__ == "__main__":
    main()
