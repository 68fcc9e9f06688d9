"""Micro projects: a model plus a template, built into a "device" program (``tvm.micro``'s API).

    project = ember.micro.generate_project(
        ember.micro.get_microtvm_template_projects("crt") + "/host", factory, "proj",
        {"verbose": False})
    project.build()        # make: the model's C, the C runtime, its micro RPC server, main.c
    project.flash()        # start the device: for the host template, a process
    with ember.micro.Session(project.transport()) as sess: ...

``generate_project`` writes the Model Library Format export of the model (``model.tar``,
unpacked in ``model/``), the template's files, ``src/model_registries.c`` (the function
tables of the models, registered at start-up) and ``project_options.json``. The model must be
built for the C runtime: ``Runtime("crt", {"system-lib": True})`` and target ``"c"``.

Options (``PROJECT_OPTIONS``): ``verbose``, ``workspace_size_bytes``, ``max_frame_bytes``,
``max_objects``, ``cc``, ``extra_cflags``, ``sanitize``, ``session_timeout_sec``.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import tarfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from ..runtime.aot_format import c_prefix
from ..runtime.cache import cache_dir, content_hash, temp_sibling
from ..runtime.errors import CompileError, TVMError
from .host_process import HostTransport, ProcessDevice
from .transport import TransportTimeouts

_TEMPLATES = Path(__file__).resolve().parents[1] / "crt" / "template"  # <crt>/template/host
_TEMPLATE_MARKER = "template.json"
_OPTIONS_FILE = "project_options.json"
_BUILD_TIMEOUT = 900.0


class ProjectError(TVMError, ValueError):
    """A project cannot be generated or used: a bad template, option, model or directory."""


@dataclass(frozen=True)
class ProjectOption:
    """One option of a project: its type, default and what it does."""

    kind: type
    default: Any
    help: str


PROJECT_OPTIONS: dict[str, ProjectOption] = {
    "verbose": ProjectOption(bool, False, "print the build's commands"),
    "workspace_size_bytes": ProjectOption(int, 16 << 20, "the device's arena: arrays, executors "
                                          "and kernel workspace"),
    "max_frame_bytes": ProjectOption(int, 4 << 20, "the largest request the device accepts "
                                     "(at least 65536)"),
    "max_objects": ProjectOption(int, 64, "objects a session holds at once on the device"),
    "cc": ProjectOption(str, "", "the C compiler command (default: the one ember uses)"),
    "extra_cflags": ProjectOption(str, "", "more compiler flags"),
    "sanitize": ProjectOption(bool, False, "build with AddressSanitizer and UBSan"),
    "session_timeout_sec": ProjectOption(float, 60.0, "the wait for each reply of the device"),
}


def get_microtvm_template_projects(platform: str) -> str:
    """The directory of ember's template projects for ``platform``: for ``"crt"`` (the only
    one), ``<standalone crt>/template``, which holds the ``host`` template (the directory
    itself also stands for ``host``)."""
    if platform != "crt":
        raise ProjectError(f"get_microtvm_template_projects: platform {platform!r} is not "
                           "supported (ember ships the 'crt' templates)")
    return str(_TEMPLATES)


def check_options(options: Mapping[str, Any] | None) -> dict[str, Any]:
    """``options`` with defaults filled in; ProjectError names an unknown option or a value
    of the wrong type."""
    out = {name: opt.default for name, opt in PROJECT_OPTIONS.items()}
    for name, value in (options or {}).items():
        opt = PROJECT_OPTIONS.get(name)
        if opt is None:
            raise ProjectError(f"unknown project option {name!r}; the options are "
                               f"{', '.join(sorted(PROJECT_OPTIONS))}")
        ok = isinstance(value, opt.kind) and not (opt.kind is int and isinstance(value, bool))
        if opt.kind is float and isinstance(value, int) and not isinstance(value, bool):
            value, ok = float(value), True
        if not ok:
            raise ProjectError(f"project option {name!r} must be a {opt.kind.__name__}, got "
                               f"{value!r}")
        out[name] = value
    if out["max_frame_bytes"] < 65536 or out["workspace_size_bytes"] < 4096:
        raise ProjectError("project options: max_frame_bytes must be at least 65536 and "
                           "workspace_size_bytes at least 4096")
    if not 1 <= out["max_objects"] <= 32767:
        raise ProjectError("project option 'max_objects' must be between 1 and 32767")
    return out


def _template_dir(path: str | os.PathLike[str]) -> Path:
    root = Path(path)
    if (root / _TEMPLATE_MARKER).is_file():
        return root
    if (root / "host" / _TEMPLATE_MARKER).is_file():
        return root / "host"
    raise ProjectError(f"{root} is not a micro template project (it has no {_TEMPLATE_MARKER}); "
                       f"use ember.micro.get_microtvm_template_projects('crt') + '/host'")


class TemplateProject:
    """A template (``Makefile``, ``main.c``, ``template.json``) to generate projects from."""

    @classmethod
    def from_directory(cls, template_project_dir: str | os.PathLike[str],
                       options: Mapping[str, Any] | None = None) -> TemplateProject:
        return cls(_template_dir(template_project_dir), options)

    def __init__(self, template_dir: Path, options: Mapping[str, Any] | None = None) -> None:
        self.template_dir = template_dir
        self.info = json.loads((template_dir / _TEMPLATE_MARKER).read_text())
        self._options = dict(options or {})

    def generate_project(self, module: Any, project_dir: str | os.PathLike[str],
                         options: Mapping[str, Any] | None = None) -> GeneratedProject:
        """A project of ``module`` (an executor factory, a list of them with distinct module
        names, or the path of a Model Library Format tar) in ``project_dir``, which must not
        exist or be empty."""
        opts = check_options({**self._options, **(options or {})})
        root = _fresh_dir(Path(project_dir))
        mlf = root / "model.tar"
        if isinstance(module, (str, os.PathLike)):
            if not Path(module).is_file():
                raise ProjectError(f"generate_project: {module} is not a Model Library Format "
                                   "file")
            shutil.copyfile(module, mlf)
        else:
            from .model_library_format import export_model_library_format

            export_model_library_format(module, mlf)
        names = _unpack_model(mlf, root / "model")
        for path in sorted(self.template_dir.iterdir()):
            if path.is_file():
                shutil.copyfile(path, root / path.name)
        (root / "src").mkdir()
        (root / "src" / "model_registries.c").write_text(_registries_source(names))
        (root / _OPTIONS_FILE).write_text(json.dumps(opts, indent=2, sort_keys=True) + "\n")
        return GeneratedProject(root, opts)

    generate_project_from_mlf = generate_project


def _fresh_dir(path: Path) -> Path:
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        raise ProjectError(f"generate_project: {path} already exists and is not an empty "
                           "directory")
    path.mkdir(parents=True, exist_ok=True)
    return path.resolve()


def _unpack_model(mlf: Path, dest: Path) -> list[str]:
    """Unpack the MLF tar (regular files and directories inside ``dest`` only); the module
    names of its ``metadata.json``, each checked to carry a C runtime function table."""
    try:
        with tarfile.open(mlf) as tar:
            for member in tar.getmembers():
                parts = PurePosixPath(member.name).parts
                if (not (member.isfile() or member.isdir()) or member.name.startswith("/")
                        or ".." in parts):
                    raise ProjectError(f"generate_project: {mlf.name} holds {member.name!r}, "
                                       "which is not a plain file inside the archive")
                target = dest.joinpath(*parts)
                if member.isdir():
                    target.mkdir(parents=True, exist_ok=True)
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                source = tar.extractfile(member)
                assert source is not None, "a regular member has contents"
                target.write_bytes(source.read())
        metadata = json.loads((dest / "metadata.json").read_text())
    except (tarfile.TarError, OSError, ValueError) as err:
        if isinstance(err, ProjectError):
            raise
        raise ProjectError(f"generate_project: {mlf.name} is not a readable Model Library Format "
                           f"export: {err}") from None
    names = sorted(metadata.get("modules", {}))
    if not names:
        raise ProjectError(f"generate_project: {mlf.name} holds no model")
    for name in names:
        _check_module(dest, name)
    return names


def _check_module(model_dir: Path, name: str) -> None:
    sources = sorted((model_dir / "codegen" / "host" / "src").glob(f"{name}_lib*.c"))
    table = f"{c_prefix(name)}_func_registry"
    if not any(f"EmberFuncRegistry {table} " in p.read_text() for p in sources):
        raise ProjectError(f"generate_project: model {name!r} has no C runtime function table "
                           f"({table}); build it with target 'c' and "
                           "runtime=Runtime('crt', {'system-lib': True})")


def _registries_source(names: list[str]) -> str:
    tables = [f"{c_prefix(n)}_func_registry" for n in names]
    lines = ["/* Generated by ember.micro.generate_project: the models' function tables. */",
             '#include "ember/crt/func_registry.h"', ""]
    lines += [f"extern const EmberFuncRegistry {t};" for t in tables]
    lines += ["", "const EmberFuncRegistry* const ember_micro_registries[] = {"]
    lines += [f"    &{t}," for t in tables] + ["    0,", "};"]
    return "\n".join(lines) + "\n"


class GeneratedProject:
    """A generated project: ``build()`` it, ``flash()`` it (start the device process) and
    open sessions over ``transport()``."""

    @classmethod
    def from_directory(cls, project_dir: str | os.PathLike[str],
                       options: Mapping[str, Any] | None = None) -> GeneratedProject:
        root = Path(project_dir).resolve()
        saved = root / _OPTIONS_FILE
        if not saved.is_file():
            raise ProjectError(f"{root} is not a generated micro project (no {_OPTIONS_FILE})")
        return cls(root, check_options({**json.loads(saved.read_text()), **(options or {})}))

    def __init__(self, project_dir: Path, options: dict[str, Any]) -> None:
        self.project_dir = project_dir
        self.options = options
        self.program = project_dir / "build" / "micro_host"
        self._device: ProcessDevice | None = None

    def build(self) -> None:
        """Compile the device program with make and the system C compiler. CompileError
        carries the command and the compiler's output when the build fails."""
        if shutil.which("make") is None:
            raise CompileError("GeneratedProject.build: 'make' is not installed")
        variables = self._make_variables()
        crt = _cached_runtime(self.project_dir, variables, self._run_make)
        stamp = self.project_dir / "build" / "make_variables.json"
        config = json.dumps([*variables, f"CRT_BUILD={crt}"])
        if stamp.is_file() and stamp.read_text() != config:  # other options: build afresh
            shutil.rmtree(self.project_dir / "build")
        self._run_make([*variables, f"CRT_BUILD={crt}", "all"])
        stamp.write_text(config)

    def _run_make(self, args: list[str]) -> None:
        """``make -C <project> args``; CompileError with the command and its output."""
        cmd = ["make", "-C", str(self.project_dir), f"-j{min(os.cpu_count() or 1, 4)}", *args]
        if not self.options["verbose"]:
            cmd.insert(1, "-s")
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=_BUILD_TIMEOUT,
                                  check=False)
        except subprocess.TimeoutExpired:
            raise CompileError(f"GeneratedProject.build: make did not finish within "
                               f"{_BUILD_TIMEOUT:g} s\ncommand: {' '.join(cmd)}") from None
        if self.options["verbose"]:
            print(proc.stdout, end="")
        if proc.returncode != 0:
            raise CompileError(f"GeneratedProject.build: building {self.project_dir} failed "
                               f"(status {proc.returncode})\ncommand: {' '.join(cmd)}\n"
                               f"{(proc.stderr or proc.stdout).strip()[-6000:]}")

    def _make_variables(self) -> list[str]:
        from ..contrib.cc import find_cc

        o = self.options
        return [f"CC={o['cc'] or find_cc()}", f"WORKSPACE_BYTES={o['workspace_size_bytes']}",
                f"MAX_FRAME_BYTES={o['max_frame_bytes']}", f"MAX_OBJECTS={o['max_objects']}",
                f"SANITIZE={int(o['sanitize'])}", f"EXTRA_CFLAGS={o['extra_cflags']}"]

    def flash(self) -> None:
        """Start the device: a fresh process of the built program (ending one started
        before). A transport opened afterwards connects to it."""
        if not self.program.is_file():
            raise ProjectError(f"GeneratedProject.flash: {self.program} does not exist; call "
                               "build() first")
        self.stop()
        self._device = ProcessDevice(self.program, self.project_dir / "build" / "micro_host.log")

    def take_device(self) -> ProcessDevice:
        """The flashed device process for a transport (flashing again when there is none: the
        host device serves one session per process)."""
        if self._device is None or self._device.used:
            self.flash()
        assert self._device is not None, "flash() started a device"
        self._device.used = True
        return self._device

    def forget_device(self, device: ProcessDevice) -> None:
        """A transport ended ``device``: the next session flashes a new one."""
        if self._device is device:
            self._device = None

    def stop(self) -> None:
        """End the device process, if one runs (it is reaped)."""
        if self._device is not None:
            self._device.stop()
            self._device = None

    def transport(self) -> HostTransport:
        """A transport (a context manager) over the device's stdin and stdout."""
        timeout = self.options["session_timeout_sec"]
        return HostTransport(self, TransportTimeouts(0.0, min(timeout, 30.0), timeout))

    def __repr__(self) -> str:
        return f"GeneratedProject({self.project_dir})"


def _cached_runtime(project_dir: Path, variables: list[str],
                    run_make: Callable[[list[str]], None]) -> Path:
    """The C runtime's libraries (core, executors, RPC server, host platform) as the project's
    Makefile builds them for these make variables: built once per configuration (sources,
    compiler, flags) under the cache directory."""
    runtime = project_dir / "model" / "runtime"
    files = sorted(p for p in runtime.rglob("*") if p.is_file())
    key = content_hash(*[f"{p.relative_to(runtime)}\0" for p in files],
                       *[p.read_bytes() for p in files], (project_dir / "Makefile").read_bytes(),
                       *variables)
    out = cache_dir("micro") / key[:24]
    if (out / "libembercrt_rpc.a").is_file():
        return out
    tmp = temp_sibling(out)
    try:
        run_make([*variables, f"CRT_BUILD={tmp}", f"{tmp}/libembercrt_rpc.a"])
        shutil.rmtree(tmp / "obj", ignore_errors=True)
        try:
            os.replace(tmp, out)
        except OSError:  # another build got there first: use its libraries
            pass
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def generate_project(template_project_dir: str | os.PathLike[str], module: Any,
                     project_dir: str | os.PathLike[str],
                     options: Mapping[str, Any] | None = None) -> GeneratedProject:
    """Generate a project of ``module`` from a template (see this module's doc)."""
    return TemplateProject.from_directory(template_project_dir, options).generate_project(
        module, project_dir)


__all__ = ["PROJECT_OPTIONS", "GeneratedProject", "ProjectError", "TemplateProject",
           "check_options", "generate_project", "get_microtvm_template_projects"]
