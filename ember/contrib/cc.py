"""The C compiler driver: the one place where ember runs the system C compiler.

``create_shared`` builds a shared library from C sources (or objects) and always links in
``ember/runtime/csrc/backend.c``, so the result loads and runs wherever ember is installed,
compiler or not. ``create_object`` compiles one source to an object file, ``create_staticlib``
archives objects (``ar``), ``compile_objects``/``link_shared`` build libraries with exactly
the flags given (the native runtime). Builds are cached by content hash (sources, headers
next to them, flags and compiler identity) under ``$EMBER_CACHE_DIR/lib``: an identical
rebuild is a file copy.

Which compiler and which flags is ``ember.contrib.cc_toolchain``'s (its public names are
re-exported here). The instruction set comes from one decision,
``ember.target.simd.cpu_choice``: a target's ``-mcpu``/``-mattr`` (passed down as
``-march=``/``-m<feature>`` options), else ``$EMBER_MARCH``, else the host (``-march=native``). Every shared library records the CPU
features its code was compiled for (``ember.runtime.cpu_features``), read from the compiler's
own predefined macros for those flags, so loaders refuse it on a CPU that lacks them.

Every object is cached by its own content under ``$EMBER_CACHE_DIR/obj`` too: a model's C
comes as several units plus kernel objects (``ember.tir.codegen.split_c``), so a rebuild
after a small change compiles one unit, and the kernels compile once per flag set. A cached
object that is not intact (truncated, not an object file) is compiled again. What a build
did and how long each step took is a ``BuildReport`` (``build_reports()`` collects them;
``EMBER_DEBUG=1`` prints them).
"""
from __future__ import annotations

import os
import re
import shlex
import shutil
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ..runtime.cache import (atomic_write, cache_dir, content_hash, note_growth, temp_sibling,
                             touch)
from ..runtime.env import debug_level
from ..runtime.cpus import usable_cpus
from ..runtime.errors import CompileError
from .cc_toolchain import (  # noqa: F401  (the compiler's public names live on here too)
    _ABI_TAG,
    _PKG,
    INCLUDE_DIR,
    _compiler_argv,
    _cpu_record,
    _host_cpu,
    _identity,
    _resolve,
    arch_flags_of,
    compiled_features,
    compiler_argv,
    compiler_id,
    default_arch_flags,
    default_flags,
    find_ar,
    find_cc,
    get_cc,
    object_flags,
)

BACKEND_SOURCE = _PKG / "runtime" / "csrc" / "backend.c"
_C_SUFFIXES = (".c",)


@dataclass(frozen=True)
class CompileStep:
    """One C source of a build: its file name, and the seconds its compile took (0.0 and
    ``cached`` when its object came from the cache)."""

    source: str
    seconds: float
    cached: bool


@dataclass(frozen=True)
class BuildReport:
    """Where one ``build_shared`` spent its time: each source's compile (they run in
    parallel, so ``compile_seconds`` is wall time, not their sum), then the link. A library
    found whole in the cache has no steps (``cached``)."""

    library: str
    steps: tuple[CompileStep, ...]
    compile_seconds: float
    link_seconds: float
    cached: bool = False

    def summary(self) -> str:
        """One line: ``3 compiled (lib0_lib_0.c 1.20s, ...), 2 cached; link 0.05s``."""
        if self.cached:
            return "library cached"
        done = sorted((s for s in self.steps if not s.cached), key=lambda s: -s.seconds)
        ran = ", ".join(f"{s.source} {s.seconds:.2f}s" for s in done)
        cached = len(self.steps) - len(done)
        return (f"{len(done)} compiled in {self.compile_seconds:.2f}s"
                + (f" ({ran})" if ran else "") + f", {cached} cached; "
                f"link {self.link_seconds:.2f}s")


_REPORTS: list[list[BuildReport]] = []


@contextmanager
def build_reports() -> Iterator[list[BuildReport]]:
    """Within the block, every ``build_shared`` appends its ``BuildReport`` to the list."""
    reports: list[BuildReport] = []
    _REPORTS.append(reports)
    try:
        yield reports
    finally:
        _REPORTS.remove(reports)


def _report(report: BuildReport) -> None:
    for reports in _REPORTS:
        reports.append(report)
    if debug_level() >= 1:
        print(f"ember: built {report.library}: {report.summary()}", file=sys.stderr)


def _normalize_options(options: str | Sequence[str] | None) -> list[str]:
    if options is None:
        return []
    return shlex.split(options) if isinstance(options, str) else [str(o) for o in options]


_ABSOLUTE_INCLUDE = re.compile(rb'^[ \t]*#[ \t]*include[ \t]*["<](/[^">\n]+)[">]', re.M)


def _hash_inputs(files: Sequence[Path], options: Sequence[str]) -> list[bytes]:
    """Contents of the inputs, plus of the headers they may include (their directories, the
    -I directories of options, ember's own include directory)."""
    dirs = {f.parent for f in files} | {Path(o[2:]) for o in options
                                        if o.startswith("-I") and len(o) > 2}
    dirs |= {Path(b) for a, b in zip(options, options[1:])
             if a in ("-I", "-isystem", "-iquote", "-idirafter")}
    dirs.add(INCLUDE_DIR / "ember")
    texts = [f.read_bytes() for f in files]
    chunks = [f.suffix.encode() + b"\0" + t for f, t in zip(files, texts)]
    # headers named by absolute path (``#include "/x/y.h"``, ``-include /x/y.h``) lie in
    # none of those directories; their contents join the key too
    named = {Path(m.decode(errors="replace")) for f, t in zip(files, texts)
             if f.suffix not in (".o", ".a") for m in _ABSOLUTE_INCLUDE.findall(t)}
    named |= {Path(b) for a, b in zip(options, options[1:]) if a == "-include"}
    for h in sorted(n for n in named if n.is_absolute() and n.is_file()):
        chunks.append(str(h).encode() + b"\0" + h.read_bytes())
    for d in sorted(dirs):
        # ember's own headers recursively (kernel headers live in ember/kernels/); other
        # directories only at their top level (a source's folder may be large).
        if d == INCLUDE_DIR / "ember":
            chunks += _own_header_chunks(d)
            continue
        for h in sorted(d.glob("*.h")) if d.is_dir() else ():
            chunks.append(str(h.relative_to(d)).encode() + b"\0" + h.read_bytes())
    return chunks


_OWN_HEADERS: dict[Path, tuple[tuple, list[bytes]]] = {}


def _own_header_chunks(d: Path) -> list[bytes]:
    """The key chunks of ember's own headers under ``d``, read again only when one of them
    was added, removed or written since the last build in this process (every object of
    every build hashes them: 42 files, 0.6 MB)."""
    paths = sorted(d.rglob("*.h"))
    stats = [h.stat() for h in paths]
    signature = tuple((str(h), st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino)
                      for h, st in zip(paths, stats))
    cached = _OWN_HEADERS.get(d)
    if cached is not None and cached[0] == signature:
        return cached[1]
    chunks = [str(h.relative_to(d)).encode() + b"\0" + h.read_bytes() for h in paths]
    _OWN_HEADERS[d] = (signature, chunks)
    return chunks


def _keep_failed(files: Sequence[Path], key: str) -> Path:
    """Copy the failed inputs (and headers beside them) where the user can find them."""
    dest = cache_dir("failed", key)
    for f in files:
        if f != BACKEND_SOURCE:
            shutil.copy2(f, dest / f.name)
            for h in f.parent.glob("*.h"):
                shutil.copy2(h, dest / h.name)
    return dest


def build_shared(sources: str | os.PathLike | Sequence[str | os.PathLike],
                 options: str | Sequence[str] | None = None, cc: str | None = None,
                 cwd: str | None = None) -> Path:
    """Compile and link ``sources`` (+ backend.c and the CPU feature record) into a cached
    shared library; its path.

    Each C source becomes an object cached by its own content (``$EMBER_CACHE_DIR/obj``):
    ember's backend compiles once for all models, and an export that adds the module blob to
    an already built model compiles only the blob. Missing objects compile in parallel."""
    if isinstance(sources, (str, os.PathLike)):
        sources = [sources]
    files = [Path(cwd or ".", s).resolve() for s in sources]
    for f in files:
        if not f.is_file():
            raise CompileError(f"create_shared: input file {f} does not exist")
    if BACKEND_SOURCE not in files:
        files.append(BACKEND_SOURCE)
    argv = _compiler_argv(cc)
    opts = _normalize_options(options)
    flags = default_flags(shlex.join(argv), all(f.suffix in _C_SUFFIXES for f in files), opts)
    files.append(_cpu_record(flags + opts, shlex.join(argv)))
    libs = ["-lm"] if sys.platform == "darwin" else ["-lm", "-ldl"]
    cpu = _host_cpu() if "-march=native" in flags else ""
    key = content_hash(_ABI_TAG, _identity(argv), cpu, *flags, "--", *opts,
                       *_hash_inputs(files, opts))
    out = cache_dir("lib") / f"{key}.so"
    if touch(out):
        _report(BuildReport(out.name, (), 0.0, 0.0, cached=True))
        return out
    start = time.perf_counter()
    inputs, steps = _objects(argv, flags, opts, files, cpu, cwd)
    compiled = time.perf_counter()
    tmp_out = temp_sibling(out)
    cmd = [*argv, *flags, *map(str, inputs), "-o", str(tmp_out), *opts, *libs]
    try:
        _run_compiler(cmd, files, key, cwd, tmp_out)
    except CompileError:
        reused = [obj for obj, step in zip(inputs, steps) if step and step.cached]
        if not reused:
            raise
        # A cached object may be damaged in a way the intactness check cannot see: compile
        # the reused ones again and link once more (a real error fails the same way again).
        for obj in reused:
            obj.unlink(missing_ok=True)
        inputs, steps = _objects(argv, flags, opts, files, cpu, cwd)
        _run_compiler(cmd, files, key, cwd, tmp_out)
    os.replace(tmp_out, out)
    note_growth(_size(out) + sum(_size(obj) for obj, step in zip(inputs, steps)
                                 if step and not step.cached))
    end = time.perf_counter()
    _report(BuildReport(out.name, tuple(s for s in steps if s), compiled - start,
                        end - compiled))
    return out


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


# Flags whose value is the next argument (kept together for ``cc -c``).
_PAIRED = ("-I", "-D", "-U", "-include", "-isystem", "-iquote", "-idirafter")


def _compile_only(flags: Sequence[str], opts: Sequence[str]) -> tuple[list[str], list[str]]:
    """The flags and options of ``cc -c``: without -shared, linker flags and linker inputs."""
    def keep(args: Sequence[str]) -> list[str]:
        out: list[str] = []
        take_next = False
        for a in args:
            if take_next:
                out.append(a)
                take_next = False
            elif a in _PAIRED:
                out.append(a)
                take_next = True
            elif a.startswith("-") and a != "-shared" and not a.startswith(("-Wl,", "-l", "-L")):
                out.append(a)
        return out

    return keep(flags), keep(opts)


# Object file magic numbers: ELF, Mach-O (32/64-bit, both byte orders), COFF (x86-64, arm64).
_OBJECT_MAGIC = (b"\x7fELF", b"\xfe\xed\xfa\xce", b"\xce\xfa\xed\xfe", b"\xfe\xed\xfa\xcf",
                 b"\xcf\xfa\xed\xfe", b"\x64\x86", b"\x64\xaa")


def object_intact(path: Path) -> bool:
    """Whether ``path`` looks like a whole object file: a known magic number and, for ELF,
    the section header table inside the file (a truncated object fails that)."""
    try:
        with open(path, "rb") as f:
            head = f.read(64)
            size = os.fstat(f.fileno()).st_size
    except OSError:
        return False
    if not head.startswith(_OBJECT_MAGIC):
        return False
    if not head.startswith(b"\x7fELF") or len(head) < 52:
        return True
    order = "<" if head[5] == 1 else ">"
    if head[4] == 2:  # 64-bit: e_shoff at 40, e_shentsize and e_shnum at 58
        if len(head) < 64:
            return False
        (shoff,) = struct.unpack_from(order + "Q", head, 40)
        shentsize, shnum = struct.unpack_from(order + "HH", head, 58)
    else:  # 32-bit: e_shoff at 32, e_shentsize and e_shnum at 46
        (shoff,) = struct.unpack_from(order + "I", head, 32)
        shentsize, shnum = struct.unpack_from(order + "HH", head, 46)
    return shoff > 0 and shoff + shentsize * shnum <= size


def _object_path(argv: Sequence[str], cflags: Sequence[str], copts: Sequence[str], f: Path,
                 cpu: str) -> tuple[Path, str]:
    """Where the object of C source ``f`` is cached, and its key (content, flags, compiler)."""
    key = content_hash(_ABI_TAG, "obj", _identity(argv), cpu, *cflags, "--", *copts,
                       *_hash_inputs([f], copts))
    return cache_dir("obj", key[:2]) / f"{key}.o", key


def _objects(argv: list[str], flags: list[str], opts: list[str], files: list[Path], cpu: str,
             cwd: str | None) -> tuple[list[Path], list[CompileStep | None]]:
    """``files`` with each C source replaced by its cached object (compiled when missing or
    not intact), and per input its ``CompileStep`` (None for inputs that are not C)."""
    cflags, copts = _compile_only(flags, opts)
    jobs: dict[Path, tuple[list[str], Path, str]] = {}
    inputs: list[Path] = []
    steps: list[CompileStep | None] = []
    for f in files:
        if f.suffix not in _C_SUFFIXES:
            inputs.append(f)
            steps.append(None)
            continue
        obj, key = _object_path(argv, cflags, copts, f, cpu)
        early = _prefetched(obj)
        if early is not None:  # compiled in the background while the model was lowered
            steps.append(CompileStep(f.name, early, False))
        elif touch(obj) and object_intact(obj):
            steps.append(CompileStep(f.name, 0.0, True))
        else:
            tmp = temp_sibling(obj)
            jobs[obj] = ([*argv, *cflags, "-c", str(f), "-o", str(tmp), *copts], tmp, key)
            steps.append(CompileStep(f.name, 0.0, False))
        inputs.append(obj)
    seconds = _compile_jobs(jobs, files, cwd)
    steps = [CompileStep(s.source, seconds.get(obj, s.seconds), s.cached) if s else None
             for s, obj in zip(steps, inputs)]
    return inputs, steps


@contextmanager
def _object_lock(obj: Path) -> Iterator[None]:
    """Held while this process compiles ``obj``. Another process that needs the same object
    (two test workers, or two builds started together on an empty cache) waits for it and
    then takes it from the cache instead of compiling it a second time on the same cores.
    The lock ends with its holder, even a killed one; without ``fcntl`` there is none."""
    try:
        import fcntl
        fd = os.open(obj.with_name(obj.name + ".lock"), os.O_CREAT | os.O_RDWR, 0o644)
    except (ImportError, OSError):
        fd = -1
    try:
        if fd >= 0:
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        if fd >= 0:
            os.close(fd)


def _timed_compile(cmd: list[str], files: Sequence[Path], key: str, cwd: str | None,
                   tmp: Path, obj: Path) -> float:
    """Compile to ``tmp`` and move it to ``obj``; the seconds it took (0.0 when another
    process compiled ``obj`` while this one waited for it)."""
    with _object_lock(obj):
        if obj.exists() and object_intact(obj):
            tmp.unlink(missing_ok=True)
            return 0.0
        start = time.perf_counter()
        _run_compiler(cmd, files, key, cwd, tmp)
        os.replace(tmp, obj)
        return time.perf_counter() - start


def _compile_jobs(jobs: dict[Path, tuple[list[str], Path, str]], files: Sequence[Path],
                  cwd: str | None) -> dict[Path, float]:
    """Run the compile ``jobs`` (object -> command, temporary output, cache key) in parallel,
    one per CPU; each object's seconds. The first failure raises once all have ended."""
    if not jobs:
        return {}
    workers = min(len(jobs), usable_cpus())
    with ThreadPoolExecutor(max_workers=workers) as pool:
        done = {obj: pool.submit(_timed_compile, cmd, files, key, cwd, tmp, obj)
                for obj, (cmd, tmp, key) in jobs.items()}
    errors = []
    seconds = {}
    for obj, future in done.items():
        try:
            seconds[obj] = future.result()
        except CompileError as err:
            errors.append(err)
    if errors:
        raise errors[0]
    return seconds


def _run_compiler(cmd: list[str], files: Sequence[Path], key: str, cwd: str | None,
                  tmp_out: Path) -> None:
    """Run one compiler command; CompileError (command, stderr, kept sources) on failure."""
    if debug_level() >= 3:
        print("ember: " + shlex.join(cmd), file=sys.stderr)
    proc = subprocess.run(cmd, check=False, capture_output=True, text=True, cwd=cwd)
    if proc.returncode != 0:
        kept = _keep_failed(files, key)
        tmp_out.unlink(missing_ok=True)
        raise CompileError(f"C compilation failed (exit status {proc.returncode})\n"
                           f"command: {shlex.join(cmd)}\n"
                           f"--- compiler stderr ---\n{proc.stderr.strip()}\n"
                           f"--- sources kept in {kept} ---")


# ---- objects compiled ahead, in the background -----------------------------------------------
# A cold build's kernel objects take longest and are known early (as the model is lowered):
# ``prefetch_objects`` starts them then, on the cores lowering leaves idle; ``_objects`` waits
# for one in flight instead of compiling it again. Object -> seconds its compile took (None:
# it failed; the build compiles it again and reports the error).
_INFLIGHT: dict[Path, Future[float | None]] = {}
_STARTED: set[str] = set()  # sources (text, options) already handed to prefetch_objects
_PREFETCH_LOCK = threading.Lock()
_PREFETCH_POOL: list[ThreadPoolExecutor] = []


def _prefetched(obj: Path) -> float | None:
    """The seconds the background compile of ``obj`` took once it has ended (it ran for this
    build), or None when none ran or it failed."""
    with _PREFETCH_LOCK:
        future = _INFLIGHT.pop(obj, None)
    seconds = future.result() if future is not None else None
    return seconds if seconds is not None and object_intact(obj) else None


def _background_compile(cmd: list[str], src: Path, key: str, tmp: Path, obj: Path
                        ) -> float | None:
    try:
        return _timed_compile(cmd, [src], key, None, tmp, obj)
    except (CompileError, OSError):
        tmp.unlink(missing_ok=True)
        return None


def prefetch_objects(sources: Sequence[tuple[str, str]],
                     options: str | Sequence[str] | None = None) -> int:
    """Start compiling the C ``sources`` (``(file name, C)``, e.g. kernel objects) into the
    object cache in the background, with the flags ``build_shared(..., options)`` will use;
    how many compiles started (0 for sources cached, in flight or handed here before).

    Never raises for a source: a compile that fails is done again, and reported, by the
    build that needs it. ``EMBER_PREFETCH=0`` turns this off."""
    if os.environ.get("EMBER_PREFETCH", "1").strip() == "0":
        return 0
    opts = _normalize_options(options)
    root = str(cache_dir(create=False))  # another cache (EMBER_CACHE_DIR) starts afresh
    todo = [(n, t) for n, t in sources if content_hash(root, n, t, *opts) not in _STARTED]
    if not todo:
        return 0
    argv = _compiler_argv()
    flags = default_flags(shlex.join(argv), True, opts)
    cflags, copts = _compile_only(flags, opts)
    cpu = _host_cpu() if "-march=native" in flags else ""
    started = 0
    for name, text in todo:
        _STARTED.add(content_hash(root, name, text, *opts))
        # alone in a folder of its own: no header beside it changes its key
        src = cache_dir("prefetch", content_hash(text)[:16]) / name
        if not src.exists():
            atomic_write(src, text.encode())
        obj, key = _object_path(argv, cflags, copts, src, cpu)
        with _PREFETCH_LOCK:
            if obj in _INFLIGHT or (obj.exists() and object_intact(obj)):
                continue
            if not _PREFETCH_POOL:
                _PREFETCH_POOL.append(ThreadPoolExecutor(usable_cpus(), "ember-cc"))
            tmp = temp_sibling(obj)
            cmd = [*argv, *cflags, "-c", str(src), "-o", str(tmp), *copts]
            _INFLIGHT[obj] = _PREFETCH_POOL[0].submit(_background_compile, cmd, src, key, tmp,
                                                      obj)
            started += 1
    return started


def _copy_atomic(src: Path, dst: str | os.PathLike) -> None:
    dst = Path(dst)
    tmp = temp_sibling(dst)
    shutil.copyfile(src, tmp)
    os.replace(tmp, dst)


def create_shared(output: str | os.PathLike, objects: str | Sequence[str],
                  options: str | Sequence[str] | None = None, cc: str | None = None,
                  cwd: str | None = None, **_ignored: object) -> None:
    """Build the shared library ``output`` from C sources or objects (plus ember's backend).

    ``options`` are extra compiler/linker flags (a string or a list). Raises
    CompilerNotFoundError when no compiler is found, CompileError (with the command line, the
    compiler's stderr and where the sources were kept) when compilation fails.
    """
    _copy_atomic(build_shared(objects, options, cc, cwd), output)


create_shared.output_format = "so"  # type: ignore[attr-defined]


def create_executable(output: str | os.PathLike, objects: str | Sequence[str],
                      options: str | Sequence[str] | None = None,
                      cc: str | None = None) -> None:
    """Build a program from C sources (no backend, no cache): for standalone C runtimes."""
    objects = [objects] if isinstance(objects, (str, os.PathLike)) else list(objects)
    cmd = [*_compiler_argv(cc), "-O2", "-I", str(INCLUDE_DIR), *map(str, objects), "-o",
           str(output), *_normalize_options(options), "-lm"]
    proc = subprocess.run(cmd, check=False, capture_output=True, text=True)
    if proc.returncode != 0:
        raise CompileError(f"C compilation failed (exit status {proc.returncode})\n"
                           f"command: {shlex.join(cmd)}\n--- compiler stderr ---\n"
                           f"{proc.stderr.strip()}\n--- sources: {', '.join(map(str, objects))}")


create_executable.output_format = "exe"  # type: ignore[attr-defined]


# ---- objects and static archives ------------------------------------------------------------
def _check_run(cmd: list[str], sources: Sequence[str | os.PathLike]) -> None:
    if debug_level() >= 3:
        print("ember: " + shlex.join(cmd), file=sys.stderr)
    proc = subprocess.run(cmd, check=False, capture_output=True, text=True)
    if proc.returncode != 0:
        raise CompileError(f"C compilation failed (exit status {proc.returncode})\n"
                           f"command: {shlex.join(cmd)}\n--- compiler stderr ---\n"
                           f"{proc.stderr.strip()}\n--- sources: {', '.join(map(str, sources))}")


def create_object(output: str | os.PathLike, source: str | os.PathLike,
                  options: str | Sequence[str] | None = None, cc: str | None = None) -> None:
    """Compile the C source ``source`` into the object file ``output`` (``cc -c``)."""
    argv = _compiler_argv(cc)
    opts = _normalize_options(options)
    cmd = [*argv, *object_flags(shlex.join(argv), opts), "-c", str(source), "-o", str(output),
           *opts]
    _check_run(cmd, [source])


def cpu_record_source(options: str | Sequence[str] | None = None,
                      cc: str | None = None) -> Path:
    """The C file of the CPU feature record for code compiled with ``create_object``'s flags
    plus ``options`` (export_library puts it into a ``.tar``'s objects)."""
    opts = _normalize_options(options)
    return _cpu_record(object_flags(cc, opts) + opts, cc)


create_object.output_format = "o"  # type: ignore[attr-defined]


def cached_objects(sources: Sequence[str | os.PathLike],
                   options: str | Sequence[str] | None = None, cc: str | None = None
                   ) -> list[Path]:
    """Each C source compiled as ``build_shared`` compiles it (the same flags and the same
    object cache: a model's units and kernel objects are usually there already); the
    objects' paths, in order (inputs that are not C pass through)."""
    files = [Path(s).resolve() for s in sources]
    argv = _compiler_argv(cc)
    opts = _normalize_options(options)
    flags = default_flags(shlex.join(argv), True, opts)
    cpu = _host_cpu() if "-march=native" in flags else ""
    return _objects(argv, flags, opts, files, cpu, None)[0]


def compile_objects(sources: Sequence[str | os.PathLike], out_dir: str | os.PathLike,
                    flags: Sequence[str], cc: str | None = None) -> list[Path]:
    """Compile each C source with exactly ``flags`` into ``out_dir``; the object paths."""
    argv = _compiler_argv(cc)
    objects = []
    for i, src in enumerate(sources):
        obj = Path(out_dir, f"{i:03d}_{Path(src).stem}.o")
        _check_run([*argv, *flags, "-c", str(src), "-o", str(obj)], [src])
        objects.append(obj)
    return objects


def link_shared(output: str | os.PathLike, objects: Sequence[str | os.PathLike],
                options: str | Sequence[str] | None = None, cc: str | None = None) -> None:
    """Link objects into a shared library as they are (no ember backend added)."""
    cmd = [*_compiler_argv(cc), "-shared", *map(str, objects), "-o", str(output),
           *_normalize_options(options)]
    _check_run(cmd, objects)


def create_staticlib(output: str | os.PathLike, inputs: str | Sequence[str],
                     options: str | Sequence[str] | None = None, cc: str | None = None,
                     **_ignored: object) -> None:
    """A static archive (``ar rcs``) of objects; C sources among ``inputs`` are compiled
    first with ``create_object``'s flags plus ``options``."""
    from .utils import tempdir

    inputs = [inputs] if isinstance(inputs, (str, os.PathLike)) else list(inputs)
    tmp = tempdir()
    objects = []
    for i, path in enumerate(inputs):
        if str(path).endswith(_C_SUFFIXES):
            obj = tmp.relpath(f"{i:03d}_{Path(path).stem}.o")
            create_object(obj, path, options, cc)
            objects.append(obj)
        else:
            objects.append(str(path))
    out = Path(output)
    out.unlink(missing_ok=True)  # ar would add to an existing archive
    _check_run([*find_ar(), "rcs", str(out), *objects], objects)


create_staticlib.output_format = "a"  # type: ignore[attr-defined]
