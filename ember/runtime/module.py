"""Module: a named collection of PackedFuncs, with imported modules.

- ``DSOModule`` (loaders.py): a shared library; its functions are exported C symbols.
- ``CSourceModule`` ("c"): C source text; compiled (and cached) on first use, compiled into
  the library by ``export_library``.
- ``PyModule``: functions are Python callables; a subclass registered with
  ``register_py_module`` can be serialised, so it travels inside an exported library.

``export_library`` compiles every DSO-exportable module of the import tree into one library
and embeds the other modules, serialised, as the ``__ember_dev_mblob`` symbol; ``load_module``
rebuilds the same tree.
"""
from __future__ import annotations

import io
import json
import os
import tarfile
import weakref
from types import ModuleType
from typing import Any, Callable, Iterator, MutableMapping, Sequence, TypeVar

from . import _bridge
from .errors import ArgumentTypeError, FunctionNotFoundError, TVMError
from .packed_func import PackedFunc, as_packed_func, register_pass_type
from .registry import get_global_func, register_func
from .time_eval import BenchmarkResult, time_evaluator  # noqa: F401  (BenchmarkResult re-export)


def compiler_driver() -> ModuleType:
    """``ember.contrib.cc``, the C compiler driver: the one way the runtime reaches it, where
    exporting needs it (``export_library``, ``save`` of an object, linking a ``.tar``, building
    the native runtime). Loaded on first use, so that running a model never loads it."""
    from ..contrib import cc

    return cc


# Packed functions a library answers for the model it holds (RFC 0046's ModelMetadataModule).
_METADATA_FUNC = "get_model_metadata"


class Module:
    """Base of all modules. ``mod["f"]`` / ``mod.get_function("f")`` give a PackedFunc."""

    type_key = "module"
    entry_name = "__tvm_main__"

    def __init__(self) -> None:
        self._imports: list[Module] = []
        # Weak: a function holds its module (a library's, or a bound method's), so a strong
        # cache would make every module a cycle, freed only by the garbage collector; a dropped
        # model would keep its library loaded until then.
        self._func_cache: MutableMapping[str, PackedFunc] = weakref.WeakValueDictionary()
        self._env_handles: dict[str, int] = {}  # call_packed lookups from C, per name
        self._env_funcs: list[PackedFunc] = []  # what they name (the handle table's are weak)
        self._model_prefix = "tvmgen_default"  # of the AOT model a library holds

    def _note_model_prefix(self, prefix: str) -> None:
        """Tell a library which AOT model (its symbol prefix) it holds: its
        ``get_model_metadata`` is then that model's ``<prefix>_get_metadata``."""
        self._model_prefix = prefix
        self._func_cache.pop(_METADATA_FUNC, None)

    def _symbol_of(self, name: str) -> str:
        return f"{self._model_prefix}_get_metadata" if name == _METADATA_FUNC else name

    # -- functions --------------------------------------------------------------------------
    def _get_local(self, name: str) -> PackedFunc | None:
        """This module's own function ``name`` (subclasses), or None."""
        return None

    def _find(self, name: str, query_imports: bool) -> PackedFunc | None:
        func = self._func_cache.get(name)
        if func is None:
            func = self._get_local(name)
            if func is not None:
                self._func_cache[name] = func
        if func is None and query_imports:
            for mod in self._imports:
                func = mod._find(name, True)
                if func is not None:
                    break
        return func

    def get_function(self, name: str, query_imports: bool = False) -> PackedFunc:
        """The function ``name``; FunctionNotFoundError (an AttributeError) naming the function
        and the module if missing."""
        if not isinstance(name, str):
            raise ArgumentTypeError(f"module functions are named by str, got {type(name).__name__}")
        func = self._find(name, query_imports)
        if func is None:
            where = " or its imports" if query_imports and self._imports else ""
            raise FunctionNotFoundError(f"{self!r}{where} has no function named {name!r}")
        return func

    def __getitem__(self, name: str) -> PackedFunc:
        return self.get_function(name)

    def __call__(self, *args: Any) -> Any:
        return self.entry_func(*args)

    @property
    def entry_func(self) -> PackedFunc:
        """The entry function (named by the library's ``__tvm_main__``)."""
        return self.get_function(self.entry_name)

    # -- imports ----------------------------------------------------------------------------
    def import_module(self, module: "Module") -> None:
        """Add ``module`` to this module's imports (searched by ``query_imports`` and C)."""
        if not isinstance(module, Module):
            raise TypeError(f"import_module: expected a Module, got {type(module).__name__}")
        if module is self or self in module._walk():
            raise ValueError(f"import_module: importing {module!r} into {self!r} makes a cycle")
        self._imports.append(module)

    @property
    def imported_modules(self) -> list["Module"]:
        """The directly imported modules, in import order."""
        return list(self._imports)

    def _walk(self) -> Iterator["Module"]:
        """This module and everything it imports, depth first, each once."""
        seen: set[int] = set()
        stack: list[Module] = [self]
        while stack:
            mod = stack.pop()
            if id(mod) not in seen:
                seen.add(id(mod))
                yield mod
                stack.extend(reversed(mod._imports))

    # -- source, saving, export -------------------------------------------------------------
    @property
    def format(self) -> str:
        return self.type_key

    def get_source(self, fmt: str = "") -> str:
        """The source code of this module ("" when it has none)."""
        return ""

    @property
    def is_dso_exportable(self) -> bool:
        """Whether export_library compiles this module into the shared library."""
        return False

    @property
    def is_binary_serializable(self) -> bool:
        """Whether export_library can embed this module (a savebinary function exists)."""
        return get_global_func(f"runtime.module.savebinary_{self.type_key}", True) is not None

    def _export_sources(self, directory: str, index: int) -> list[str]:
        """Write this module's C sources into ``directory`` (DSO-exportable modules)."""
        raise TVMError(f"{self!r} has no C sources to export")

    def save(self, file_name: str, fmt: str = "") -> None:
        """Save this module alone (its source, or its serialised binary) to ``file_name``."""
        save = get_global_func(f"runtime.module.savebinary_{self.type_key}", True)
        if save is None:
            raise TVMError(f"{self!r} cannot be saved: no runtime.module.savebinary_"
                           f"{self.type_key} function is registered")
        with open(file_name, "wb") as f:
            f.write(save(self))

    def export_library(self, file_name: "str | os.PathLike[str]",
                       fcompile: Callable[..., Any] | None = None,
                       addons: Sequence[str] | None = None,
                       workspace_dir: str | None = None, **kwargs: Any) -> None:
        """Write this module and its imports as one shared library (or a .tar of sources).

        DSO-exportable modules are compiled together with ember's backend; other modules are
        serialised into the library and rebuilt by ``load_module``. ``fcompile`` defaults to
        ``ember.contrib.cc.create_shared`` and receives ``options`` plus ``kwargs``.
        """
        from ..contrib import utils
        from .loaders import DSOModule, serialize_tree

        cc = compiler_driver()  # the compiler driver is needed only here

        file_name = os.fspath(file_name)
        tmp = utils.tempdir(workspace_dir)
        files: list[str] = []
        options: list[str] = []
        needs_blob = not self.is_dso_exportable
        archive = file_name.endswith((".tar", ".a"))
        for index, mod in enumerate(self._walk()):
            if mod.is_dso_exportable:
                # A shared library or a .tar (linked into one by load_module) builds from the
                # units the module was compiled from (their objects are cached); a static
                # archive, which a program may link with other models' archives, from the
                # self-contained C (its kernels static, no shared kernel symbols).
                static = file_name.endswith(".a") or not isinstance(mod, CSourceModule)
                new = (mod._export_sources(tmp.path, index) if static
                       else mod._build_sources(tmp.path, index))
                files += [f for f in new if f not in files]  # kernel objects once
                options += getattr(mod, "compile_options", [])
            elif isinstance(mod, DSOModule):
                raise TVMError(f"export_library: {mod!r} is an already compiled library and cannot "
                               "be exported again; export the module it was built from")
            else:
                needs_blob = True
        if needs_blob:
            files.append(_blob_file(serialize_tree(self), tmp.relpath("devc.c")))
        if archive:
            if file_name.endswith(".a"):  # for a static link (system-lib programs)
                objects = _compile_objects(cc, files, options, tmp.path)
                cc.create_staticlib(file_name, objects + list(addons or ()))
            else:  # its objects carry their CPU feature record
                files.append(str(cc.cpu_record_source(options)))
                _write_tar(file_name, [str(o) for o in cc.cached_objects(files, options)],
                           options)
            return
        files += list(addons or ())
        options += list(kwargs.pop("options", []) or [])
        (fcompile or cc.create_shared)(file_name, files, options=options, **kwargs)

    def time_evaluator(self, func_name: str, dev: Any, number: int = 10, repeat: int = 1,
                       min_repeat_ms: int = 0, cooldown_interval_ms: int = 0,
                       repeats_to_cooldown: int = 1, f_preproc: str = "",
                       ) -> Callable[..., BenchmarkResult]:
        """A function that runs ``func_name`` with the given arguments and returns the timings
        (a BenchmarkResult: mean, median, std, min, max, results; in seconds). ``f_preproc``
        is accepted for compatibility and ignored (there is no cache flushing on the CPU)."""
        return time_evaluator(self.get_function(func_name, query_imports=True), dev, number,
                              repeat, min_repeat_ms, cooldown_interval_ms, repeats_to_cooldown)

    def __repr__(self) -> str:
        return f"Module({self.type_key}, {id(self):#x})"


# Where the assembler's .incbin can embed the blob as it is (ELF on these machines).
_INCBIN_MACHINES = ("x86_64", "amd64", "aarch64", "arm64")


def _blob_file(blob: bytes, c_path: str) -> str:
    """A C file defining the module blob symbols; ``c_path`` is where it goes.

    On ELF machines the bytes are stored once under the cache (named by their hash) and
    pulled in with the assembler's ``.incbin``: no C text of the bytes to format or parse, and
    the same blob gives the same C, so the build cache finds an unchanged export. Elsewhere
    they are a C string literal (``loaders.blob_source``)."""
    import platform
    import sys

    from .cache import atomic_write, cache_dir, content_hash
    from .loaders import BLOB_SYMBOL, blob_source

    bin_path = cache_dir("blob") / f"{content_hash(blob)}.bin"
    text = str(bin_path)
    if (sys.platform.startswith("linux") and platform.machine().lower() in _INCBIN_MACHINES
            and not any(ch in text for ch in '"\\\n')):
        if not bin_path.exists():
            atomic_write(bin_path, blob)
        source = (f"/* Generated by ember: modules imported into this library, serialised. */\n"
                  f"#include <stdint.h>\n"
                  f'__attribute__((visibility("default"))) const uint64_t {BLOB_SYMBOL}_size = '
                  f"{len(blob)}ULL;\n"
                  f'__asm__(".section .rodata\\n.globl {BLOB_SYMBOL}\\n'
                  f'.type {BLOB_SYMBOL}, @object\\n.balign 16\\n{BLOB_SYMBOL}:\\n'
                  f'.incbin \\"{text}\\"\\n.size {BLOB_SYMBOL}, {len(blob)}\\n.previous\\n");\n')
    else:
        source = blob_source(blob)
    with open(c_path, "w") as f:
        f.write(source)
    return c_path


def _compile_objects(cc: ModuleType, files: Sequence[str], options: Sequence[str],
                     directory: str) -> list[str]:
    """Each C file compiled to an object (``cc.create_object``, with ``options``)."""
    objects = []
    for path in files:
        obj = os.path.join(directory, os.path.splitext(os.path.basename(path))[0] + ".o")
        cc.create_object(obj, path, [o for o in options if not o.startswith("-Wl,")])
        objects.append(obj)
    return objects


def _write_tar(file_name: str, files: Sequence[str], options: Sequence[str]) -> None:
    """The objects plus a manifest (link options); load_module links them again (with ember's
    backend), and a C build can link them itself."""
    manifest = json.dumps({"format": "ember-tar", "version": 1, "options": list(options)})
    with tarfile.open(file_name, "w") as tar:
        for path in files:
            tar.add(path, arcname=os.path.basename(path))
        info = tarfile.TarInfo("ember_manifest.json")
        info.size = len(manifest.encode())
        tar.addfile(info, io.BytesIO(manifest.encode()))


register_pass_type(Module, _bridge.MODULE)


class CSourceModule(Module):
    """C source code (with the PackedFunc signature for its exported functions).

    Calling a function compiles the source on first use (cached by content hash) and loads
    it; ``export_library`` compiles it into the exported library.

    ``units`` (``(file name, C)`` pairs, optional) are what a hosted build compiles instead
    of ``code``: the same functions split into translation units compiled in parallel, and the
    kernel objects they link (``ember.tir.codegen.split_c``). ``code`` stays the one
    self-contained unit that ``get_source``, ``save`` and C exports use.
    """

    type_key = "c"

    def __init__(self, code: str, fmt: str = "c", func_names: Sequence[str] = (),
                 compile_options: Sequence[str] = (),
                 units: Sequence[tuple[str, str]] = ()) -> None:
        super().__init__()
        self.code = code
        self.units = list(units)
        self._fmt = fmt
        self.func_names = list(func_names)
        self.compile_options = list(compile_options)
        self._dso: Module | None = None

    @property
    def is_dso_exportable(self) -> bool:
        return True

    def get_source(self, fmt: str = "") -> str:
        return self.code

    def _export_sources(self, directory: str, index: int) -> list[str]:
        path = os.path.join(directory, f"lib{index}.{self._fmt or 'c'}")
        with open(path, "w") as f:
            f.write(self.code)
        return [path]

    def _build_sources(self, directory: str, index: int) -> list[str]:
        """Write the units a hosted build compiles into ``directory``: ``units``, or ``code``
        as one. Kernel objects keep their names (the same entry point, the same file)."""
        if not self.units:
            return self._export_sources(directory, index)
        paths = []
        for name, text in self.units:
            path = os.path.join(directory, name if name.startswith("kernel_")
                                else f"lib{index}_{name}")
            with open(path, "w") as f:
                f.write(text)
            paths.append(path)
        return paths

    def save(self, file_name: str, fmt: str = "") -> None:
        """Write the source (``.c`` and any other name), or compile it: an object file for
        ``.o`` (``ember.contrib.cc.create_object``), a static archive for ``.a``."""
        kind = fmt or os.path.splitext(file_name)[1].lstrip(".")
        if kind not in ("o", "a"):
            with open(file_name, "w") as f:
                f.write(self.code)
            return
        from ..contrib import utils

        cc = compiler_driver()
        with utils.tempdir() as tmp:
            (src,) = self._export_sources(tmp.path, 0)
            if kind == "o":
                cc.create_object(file_name, src, self.compile_options)
            else:
                cc.create_staticlib(file_name, [src], self.compile_options)

    def compile(self) -> str:
        """Compile the source into a shared library (cached by content hash) without loading
        it, so that a build for another CPU succeeds here; the library's path. C source
        modules it imports (external codegens' functions) are compiled into the same library,
        as ``export_library`` does, so that its code may call theirs directly."""
        from ..contrib import utils

        with utils.tempdir() as tmp:  # kept with EMBER_KEEP_TEMPS=1
            srcs: list[str] = []
            options = list(self.compile_options)
            for index, mod in enumerate(self._walk()):
                if isinstance(mod, CSourceModule):
                    srcs += [f for f in mod._build_sources(tmp.path, index) if f not in srcs]
                    options += [o for o in mod.compile_options if o not in options]
            return str(compiler_driver().build_shared(srcs, options))

    def _compiled(self) -> Module:
        if self._dso is None:
            from .loaders import DSOModule

            self._dso = DSOModule(self.compile(), env=self)
        return self._dso

    def _get_local(self, name: str) -> PackedFunc | None:
        return self._compiled()._get_local(self._symbol_of(name))


class PyModule(Module):
    """A module whose functions are Python callables: ``PyModule({"f": f})``.

    To embed one in an exported library, subclass it, implement ``save_binary`` and the
    classmethod ``load_binary``, and decorate the class with ``register_py_module(key)``.
    """

    type_key = "PyModule"

    def __init__(self, functions: dict[str, Callable[..., Any]] | None = None) -> None:
        super().__init__()
        self._functions = dict(functions or {})

    def add_function(self, name: str, func: Callable[..., Any]) -> None:
        self._functions[name] = func
        self._func_cache.pop(name, None)

    def _get_local(self, name: str) -> PackedFunc | None:
        func = self._functions.get(name)
        if func is None:
            method = getattr(self, f"ffi_{name}", None)  # methods named ffi_<name>
            func = method if callable(method) else None
        return None if func is None else as_packed_func(func, name)

    def save_binary(self) -> bytes:
        raise TVMError(f"{type(self).__name__} does not implement save_binary")

    @classmethod
    def load_binary(cls, data: bytes) -> "PyModule":
        raise TVMError(f"{cls.__name__} does not implement load_binary")


_PyModuleClass = TypeVar("_PyModuleClass", bound="type[PyModule]")


def register_py_module(type_key: str) -> Callable[[_PyModuleClass], _PyModuleClass]:
    """Class decorator: give a PyModule subclass ``type_key`` and register its
    ``runtime.module.savebinary_<key>`` / ``runtime.module.loadbinary_<key>`` functions."""

    def register(cls: _PyModuleClass) -> _PyModuleClass:
        cls.type_key = type_key
        register_func(f"runtime.module.savebinary_{type_key}", lambda m: m.save_binary(),
                      override=True)
        register_func(f"runtime.module.loadbinary_{type_key}", cls.load_binary, override=True)
        return cls

    return register


def __getattr__(name: str) -> Any:
    # DSOModule and load_module live in loaders.py (which imports this module).
    if name in ("DSOModule", "load_module"):
        from . import loaders

        return getattr(loaders, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
