"""Micro (firmware) support: the standalone C runtime and Model Library Format.

``get_standalone_crt_dir()`` locates ``ember/crt``, the C runtime a firmware build compiles
with the generated model sources (see ``ember/crt/README.md``); ``get_crt_include_dirs()``
lists the include directories such a build needs. ``export_model_library_format(factory,
"model.tar")`` writes a compiled model as C sources, header, params and that runtime
(``model_library_format``); ``ember.micro.testing`` has the AOT test runners.

Host micro sessions (``project``, ``session``, ``transport``): ``generate_project(
get_microtvm_template_projects("crt") + "/host", factory, dir, options)`` builds the model, the
C runtime and its micro RPC server into a host "device" program (``build()``, ``flash()``), and
``Session(project.transport())`` runs the model's executors inside that process.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from ..runtime.errors import TVMError

__all__ = ["GeneratedProject", "IoTimeoutError", "MicroSessionError", "ProjectError", "Session",
           "SessionTerminatedError", "TemplateProject", "Transport", "TransportTimeouts",
           "UnsupportedInModelLibraryFormatError", "create_local_graph_executor",
           "export_model_library_format", "generate_project", "get_crt_include_dirs",
           "get_microtvm_template_projects", "get_standalone_crt_dir"]

# Public names of the submodules, imported on first use (they load the RPC client).
_LAZY = {
    "GeneratedProject": "project", "ProjectError": "project", "TemplateProject": "project",
    "generate_project": "project", "get_microtvm_template_projects": "project",
    "Session": "session", "create_local_graph_executor": "session",
    "IoTimeoutError": "transport", "MicroSessionError": "transport",
    "SessionTerminatedError": "transport", "Transport": "transport",
    "TransportTimeouts": "transport",
}

_PKG = Path(__file__).resolve().parents[1]
_CRT_DIR = _PKG / "crt"
_INCLUDE_DIR = _PKG / "include"
# Files whose absence means the package was installed without the C runtime sources.
_CRT_MARKERS = ("Makefile", "include/ember/crt/crt.h", "src/backend/backend_api.c")


class UnsupportedInModelLibraryFormatError(TVMError):
    """A module cannot be exported to Model Library Format: '<module kind>: <why>'."""


def get_standalone_crt_dir() -> str:
    """The directory of ember's standalone C runtime (``Makefile``, ``include/``, ``src/``,
    ``platform/host/``), inside the installed package, as TVM's function of this name.

    Raises TVMError naming the missing file if the package was installed without the
    runtime's C sources (check the ``package-data`` of the build).
    """
    for rel in _CRT_MARKERS:
        if not (_CRT_DIR / rel).is_file():
            raise TVMError(f"get_standalone_crt_dir: {_CRT_DIR / rel} is missing; this ember "
                           "installation does not ship the standalone C runtime sources")
    return str(_CRT_DIR)


def get_crt_include_dirs() -> list[str]:
    """Include directories for code built against the C runtime: the runtime's own headers
    (``ember/crt/...``) and ember's C ABI (``ember/c_backend_api.h``, ...)."""
    return [str(Path(get_standalone_crt_dir()) / "include"), str(_INCLUDE_DIR)]


def __getattr__(name: str) -> Any:
    # The exporter loads the executor factories, the test helpers the compiler: on first use.
    import importlib

    if name == "export_model_library_format":
        return importlib.import_module(f"{__name__}.model_library_format").__dict__[name]
    if name in _LAZY:
        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    if name in ("model_library_format", "testing", "project", "session", "transport"):
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
