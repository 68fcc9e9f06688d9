"""``ember.rpc.Server`` and ``python -m ember.exec.rpc_server``.

``Server(...)`` starts the server in a process of its own (as the Relay-era ``rpc.Server``
did) and knows the port it chose; ``terminate()`` (or leaving a ``with`` block) ends it and its
sessions. The command line takes the same options. A server runs the code of every library
its clients upload: bind it to loopback (the default), or require a shared secret.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from collections.abc import Sequence

from ..errors import RPCError
from .launch import (
    PARENT_FLAG,
    PARENT_FLAG_HELP,
    ManagedProcess,
    announce,
    announce_error,
    exit_with_parent,
    exposure_warning,
    setup_logging,
)
from .protocol import DEFAULT_MAX_FRAME, MIN_MAX_FRAME
from .serve import ServerLoop, ServerOptions, bind_listener, load_libraries, run_session

NAME = "ember-rpc-server"
SECRET_ENV = "EMBER_RPC_SECRET"


class Server(ManagedProcess):
    """An RPC server in a subprocess: ``host``/``port`` say where it listens.

    ``port`` is the first port tried, up to ``port_end`` (exclusive); ``port=0`` lets the
    system choose. ``key`` must match the clients'. With ``tracker_addr=(host, port)`` the
    server registers with that tracker under ``key`` and takes only the clients it dispatches.
    ``load_library`` lists shared libraries opened (symbols global) before any session.
    ``secret`` makes clients prove they know it (it reaches the server process through the
    environment, not its command line). The limits (``docs/rpc.md``, "Limits"): a client must
    finish the whole handshake within ``handshake_timeout`` seconds (at most
    ``max_handshakes`` at once), send each frame in full within ``frame_timeout`` once it has
    started it, and start a request at least every ``idle_timeout`` seconds (0: no limit).
    ``max_sessions`` sessions run at once; a client that finished its handshake while all are
    taken gets the slot of the session idle longest (if idle ``reclaim_idle`` s), else of one
    that has held its slot ``reclaim_age`` s (0: never) and is between requests.
    ``log_file`` receives the server's log instead of stderr. Raises RPCError when the server
    cannot start.
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 9091, port_end: int = 9199,
                 key: str = "", tracker_addr: tuple[str, int] | None = None,
                 load_library: Sequence[str] | str | None = None, silent: bool = False, *,
                 custom_addr: str | None = None, secret: str | bytes | None = None,
                 max_frame_bytes: int = DEFAULT_MAX_FRAME, max_sessions: int = 4,
                 handshake_timeout: float = 10.0, frame_timeout: float = 60.0,
                 idle_timeout: float = 300.0, max_handshakes: int = 8,
                 reclaim_idle: float = 1.0, reclaim_age: float = 600.0,
                 log_file: str | None = None, startup_timeout: float = 60.0) -> None:
        argv = [sys.executable, "-m", "ember.exec.rpc_server", "--host", host, "--port",
                str(port), "--port-end", str(port_end), "--key", key, "--max-frame-bytes",
                str(max_frame_bytes), "--max-sessions", str(max_sessions),
                "--handshake-timeout", str(handshake_timeout), "--frame-timeout",
                str(frame_timeout), "--idle-timeout", str(idle_timeout), "--max-handshakes",
                str(max_handshakes), "--reclaim-idle", str(reclaim_idle), "--reclaim-age",
                str(reclaim_age)]
        if log_file:
            argv += ["--log-file", os.path.abspath(log_file)]
        if tracker_addr is not None:
            argv += ["--tracker", f"{tracker_addr[0]}:{tracker_addr[1]}"]
        if custom_addr:
            argv += ["--custom-addr", custom_addr]
        libs = [load_library] if isinstance(load_library, str) else list(load_library or [])
        for lib in libs:
            argv += ["--load-library", os.path.abspath(lib)]
        if silent:
            argv.append("--silent")
        env = dict(os.environ)
        env.pop(SECRET_ENV, None)
        if secret:
            env[SECRET_ENV] = secret if isinstance(secret, str) else secret.decode()
        super().__init__("RPC server", argv, env, startup_timeout)
        self.key = key


# ---- the command line -----------------------------------------------------------------------
def _parser(prog: str, epilog: str | None) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog, epilog=epilog, formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Serve ember RPC sessions: clients upload libraries, load and run them "
                    "here. Anyone who can connect runs code on this machine.")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to bind (default 127.0.0.1; 0.0.0.0 exposes the server)")
    p.add_argument("--port", type=int, default=9091, help="first port to try (0: any free)")
    p.add_argument("--port-end", type=int, default=9199, help="last port to try (exclusive)")
    p.add_argument("--key", default="", help="key clients must present")
    p.add_argument("--tracker", default=None, help="HOST:PORT of a tracker to register with")
    p.add_argument("--custom-addr", default=None,
                   help="address the tracker gives clients for this server")
    p.add_argument("--load-library", action="append", default=[],
                   help="shared library to open before serving (repeat, or comma-separated)")
    p.add_argument("--secret-file", default=None,
                   help=f"file holding the shared secret clients must prove (or ${SECRET_ENV})")
    p.add_argument("--max-frame-bytes", type=int, default=DEFAULT_MAX_FRAME,
                   help="largest frame accepted from a client (default 64 MiB)")
    p.add_argument("--max-sessions", type=int, default=4,
                   help="sessions served at once (default 4)")
    p.add_argument("--max-handshakes", type=int, default=8,
                   help="connections in their handshake at once (default 8)")
    p.add_argument("--handshake-timeout", type=float, default=10.0,
                   help="seconds a client has for the whole handshake (default 10)")
    p.add_argument("--frame-timeout", type=float, default=60.0,
                   help="seconds a started frame may take to arrive in full (default 60)")
    p.add_argument("--idle-timeout", type=float, default=None,
                   help="seconds a session may go without starting a request (default 300; "
                        "0: no limit; with --stdio, no limit unless given)")
    p.add_argument("--reclaim-idle", type=float, default=1.0,
                   help="when a client waits for a slot, a session idle this many seconds "
                        "gives it up (default 1)")
    p.add_argument("--reclaim-age", type=float, default=600.0,
                   help="...else a session between requests that has held its slot this many "
                        "seconds (default 600; 0: never)")
    p.add_argument("--silent", action="store_true", help="log warnings only")
    p.add_argument("--log-file", default=None, help="append the log to this file, not stderr")
    p.add_argument("--stdio", action="store_true",
                   help="serve one session on stdin/stdout instead of listening")
    p.add_argument(PARENT_FLAG, action="store_true", help=PARENT_FLAG_HELP)
    return p


def _options(args: argparse.Namespace) -> ServerOptions:
    secret = os.environ.get(SECRET_ENV, "").encode() or None
    if args.secret_file:
        with open(args.secret_file, "rb") as f:
            secret = f.read().strip() or None
    if args.stdio and args.exit_with_parent:
        raise RPCError(f"--stdio and {PARENT_FLAG} both need stdin: give one of them")
    tracker = None
    if args.tracker:
        host, _, port = args.tracker.rpartition(":")
        if not host or not port.isdigit():
            raise RPCError(f"--tracker {args.tracker!r}: expected HOST:PORT")
        tracker = (host, int(port))
    if args.max_frame_bytes < MIN_MAX_FRAME:
        raise RPCError(f"--max-frame-bytes {args.max_frame_bytes}: at least {MIN_MAX_FRAME}")
    for name in ("max_sessions", "max_handshakes"):
        if getattr(args, name) < 1:
            raise RPCError(f"--{name.replace('_', '-')} {getattr(args, name)}: at least 1")
    if args.idle_timeout is None:
        args.idle_timeout = 0.0 if args.stdio else 300.0
    for name, low in (("handshake_timeout", "> 0"), ("frame_timeout", "> 0"),
                      ("idle_timeout", ">= 0"), ("reclaim_idle", ">= 0"),
                      ("reclaim_age", ">= 0")):
        value = getattr(args, name)
        if not (value > 0 if low == "> 0" else value >= 0) or value == float("inf"):
            raise RPCError(f"--{name.replace('_', '-')} {value}: must be a number of seconds "
                           f"{low}")
    libs = [p for item in args.load_library for p in item.split(",") if p]
    return ServerOptions(args.host, args.port, args.port_end, args.key, tracker,
                         args.custom_addr, libs, secret, args.max_frame_bytes, args.max_sessions,
                         args.handshake_timeout, args.frame_timeout, args.idle_timeout,
                         args.max_handshakes, args.reclaim_idle, args.reclaim_age)


def _serve_stdio(opts: ServerOptions) -> int:
    """One session over stdin/stdout; stray output of loaded code goes to stderr."""
    from .transport import PipeChannel

    read_fd, write_fd = os.dup(0), os.dup(1)
    os.dup2(2, 1)
    workdir = tempfile.mkdtemp(prefix="ember_rpc_session_")
    try:
        ch = PipeChannel(read_fd, write_fd, "stdio")
        own = opts.key
        return run_session(ch, workdir, lambda k: None if k == own else "key mismatch", opts)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def main(argv: Sequence[str] | None = None, prog: str = "python -m ember.exec.rpc_server",
         epilog: str | None = None) -> int:
    """Run the server until interrupted; returns the exit status. ``prog`` and ``epilog``
    are for the help text of front ends (``ember rpc-server``)."""
    args = _parser(prog, epilog).parse_args(argv)
    try:
        opts = _options(args)
        if args.exit_with_parent:
            exit_with_parent()
        setup_logging(args.silent, args.log_file)
        load_libraries(opts.load_library)
        if args.stdio:
            return _serve_stdio(opts)
        listener = bind_listener(opts.host, opts.port, opts.port_end)
    except (RPCError, OSError) as err:
        announce_error(NAME, str(err))
        return 1
    port = listener.getsockname()[1]
    risk = ("Anyone who can connect can upload a library and run it on this machine"
            + ("." if opts.secret else ": require a shared secret (--secret-file)."))
    banner = exposure_warning("RPC server", opts.host, port, risk)
    if banner:
        print(banner, file=sys.stderr, flush=True)
    announce(NAME, opts.host, port)
    ServerLoop(opts, listener).run()
    return 0
