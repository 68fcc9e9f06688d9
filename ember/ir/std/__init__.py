"""ember's standard library in the text format: ``prelude.rly`` (List, Option, Tree and the
functions over them), ``core.rly`` (the VM's ``Storage``) and ``gradient.rly`` (GradCell).

``IRModule.import_from_std(name)`` adds a file's definitions to a module. Each file is parsed
once per process; the parsed nodes are immutable, so every module that imports a file shares
them (and a module never shares the cached IRModule itself).
"""
from __future__ import annotations

import functools
from pathlib import Path

from ..module import IRModule

STD_DIR = Path(__file__).resolve().parent


def std_files() -> list[str]:
    """The names of the standard library files, for ``IRModule.import_from_std``."""
    return sorted(p.name for p in STD_DIR.glob("*.rly"))


def std_path(name: str) -> Path:
    """The path of the standard library file ``name``; ValueError lists the files when there
    is no such file (a name with a directory part is never one of them)."""
    if not isinstance(name, str):
        raise TypeError(f"import_from_std: expected a file name (str), got {type(name).__name__}")
    known = std_files()
    if name not in known:
        raise ValueError(f"import_from_std: no standard library file {name!r}; the files are "
                         f"{', '.join(known)}")
    return STD_DIR / name


def parsed_std_file(name: str) -> IRModule:
    """The module that the file ``name`` defines (shared: copy it before changing it)."""
    return _parse(std_path(name).name)


@functools.lru_cache(maxsize=None)
def _parse(name: str) -> IRModule:
    from ..parser import parse

    text = (STD_DIR / name).read_text(encoding="utf-8")
    return parse(text, source_name=f"ember/ir/std/{name}")
