"""Loading modules: shared libraries (DSOModule), the embedded module blob, and load_module.

Everything is verified before it runs: a missing, truncated or foreign file raises
ArtifactError naming the path and the reason; the blob's magic, version, lengths and checksum
are checked before it is parsed, so a changed byte in anything embedded (graph JSON, AOT
metadata, params, VM code) is reported as ``corrupt module blob`` rather than read. Nothing
here needs a C compiler except loading a ``.tar``.

Module blob (``__ember_dev_mblob``), little-endian::

    magic     8 bytes   b"EMBERMB\\0"
    version   u32       BLOB_VERSION (2)
    reserved  u32       0
    length    u64       payload bytes
    checksum  u32       CRC-32 (zlib's polynomial) of the payload; the C runtime checks it too
    reserved  u32       0
    payload   u32 module count; per module: u32 type key length, type key, u64 length, the
              bytes of runtime.module.savebinary_<type key> ("_lib": the library itself, empty);
              per module: u32 import count, u32 index of each import
"""
from __future__ import annotations

import ctypes
import json
import os
import struct
import tarfile
import tempfile
import weakref
import zlib
from collections.abc import Callable
from ctypes import c_char_p, c_int, c_int64, c_void_p
from typing import Any

from . import _bridge
from .cpu_features import check_library_cpu
from .dso import check_library_file, close_library, open_library, share_thread_pool
from .errors import ArtifactError, CpuFeatureError, TVMError
from .module import Module
from .packed_func import CPackedFunc, PackedFunc
from .registry import get_global_func, register_func

ABI_VERSION = 1
BLOB_SYMBOL = "__ember_dev_mblob"
BLOB_MAGIC = b"EMBERMB\0"
BLOB_VERSION = 2
_BLOB_HEADER = struct.Struct("<8sIIQII")  # magic, version, reserved, length, crc32, reserved
_LIB_KEY = "_lib"  # the blob's name for "the shared library itself"
# Exported by backend.c, never PackedFuncs.
_RESERVED = ("TVMBackend", "TVMAPI", "TVMFunc", "TVMMod", "TVMArray", "TVMObject", "TVMSetStream",
             "TVMGetLastError", "TVMPackedFuncSetLastError", "Ember", "__ember", "__tvm_module_ctx")
_LIBRARIES: weakref.WeakSet[DSOModule] = weakref.WeakSet()  # for the system library


def _check_library_info(lib: ctypes.CDLL, path: str) -> None:
    """ArtifactError unless ``lib`` is an ember library of this runtime's ABI."""
    try:
        info_sym = ctypes.c_char.in_dll(lib, "__ember_library_info")
    except ValueError:
        raise ArtifactError(f"{path}: not an ember library (no __ember_library_info symbol); "
                            "build libraries with export_library or "
                            "ember.contrib.cc.create_shared") from None
    info = ctypes.string_at(ctypes.addressof(info_sym))
    fields = dict(f.split("=", 1) for f in info.decode("ascii", "replace").split()[1:]
                  if "=" in f)
    if not info.startswith(b"EMBERLIB") or fields.get("abi") != str(ABI_VERSION):
        raise ArtifactError(f"{path}: built for ember library ABI {fields.get('abi')!r}, this "
                            f"runtime needs ABI {ABI_VERSION}; rebuild it")


def _unload(lib: ctypes.CDLL, env_handle: int) -> None:
    """A freed DSOModule's library: its handle dropped and the library closed (dso.py)."""
    _bridge.release_handle(env_handle)
    close_library(lib)


# ---- DSOModule ------------------------------------------------------------------------------
class DSOModule(Module):
    """A shared library built by ember; its functions are the exported PackedFunc symbols.

    ``env`` is the module whose imports compiled code searches with call_packed
    (``TVMBackendGetFuncFromEnv``); it defaults to this module.
    """

    type_key = "library"

    def __init__(self, path: str, env: Module | None = None) -> None:
        super().__init__()
        check_library_file(path)
        check_library_cpu(path)  # before dlopen: constructors could use the instructions
        self.path = path
        self._symbols: dict[str, tuple[Any, int] | None] = {}
        lib = open_library(path)
        try:
            _check_library_info(lib, path)
            self._setup_backend(lib)
        except BaseException:
            close_library(lib)
            raise
        self._lib = lib
        self._env = env  # C looks functions up in it for as long as this library is loaded
        self._env_handle = _bridge.new_handle(env or self, weak=True)
        # Unloaded with the module (as TVM's DSO modules are): every PackedFunc of the library
        # holds the module, so nothing can call into it afterwards.
        weakref.finalize(self, _unload, lib, self._env_handle)
        if lib.EmberInstallHostTable(ctypes.byref(_bridge.HOST_TABLE), self._env_handle) != 0:
            raise ArtifactError(f"{path}: {lib.EmberTakeLastError().decode(errors='replace')}")
        share_thread_pool(lib)
        _LIBRARIES.add(self)

    def _setup_backend(self, lib: ctypes.CDLL) -> None:
        lib.EmberInstallHostTable.argtypes = [c_void_p, c_void_p]
        lib.EmberInstallHostTable.restype = c_int
        lib.EmberTakeLastError.argtypes = []
        lib.EmberTakeLastError.restype = c_char_p
        lib.EmberSymbolKind.argtypes = [c_void_p]
        lib.EmberSymbolKind.restype = c_int
        lib.EmberTimeLoop.argtypes = [c_void_p, c_void_p, c_void_p, c_int, c_int64, c_void_p]
        lib.EmberTimeLoop.restype = c_int
        self._take_error = lib.EmberTakeLastError
        self._syslib_lookup = getattr(lib, "EmberSystemLibLookup", None)  # older libraries lack it
        if self._syslib_lookup is not None:
            self._syslib_lookup.argtypes = [c_char_p]
            self._syslib_lookup.restype = c_void_p

    def _system_lib_function(self, name: str) -> PackedFunc | None:
        """The function ``name`` this library registered for the system library, if any."""
        addr = self._syslib_lookup(name.encode()) if self._syslib_lookup is not None else None
        if not addr:
            return None
        cfn = ctypes.cast(addr, ctypes.CFUNCTYPE(c_int))
        return CPackedFunc(cfn, name, self._take_error, owner=self, address=addr,
                           time_loop=self._lib.EmberTimeLoop)

    def _symbol_string(self, name: str) -> str | None:
        try:
            addr = ctypes.addressof(ctypes.c_char.in_dll(self._lib, name))
        except ValueError:
            return None
        return ctypes.string_at(addr).decode("utf-8", "replace") if self._owns(addr, 2) else None

    def _owns(self, addr: int, kind: int) -> bool:
        # EmberSymbolKind: 0 = not in this library (e.g. libc's), 1 = function, 2 = data.
        return self._lib.EmberSymbolKind(addr) in (kind, 3)

    def _get_local(self, name: str) -> PackedFunc | None:
        name = self._symbol_of(name)
        if name == self.entry_name:
            entry = self._symbol_string(name)
            return None if entry is None else self._get_local(entry)
        # The function cache is weak (module.py): a function that nobody holds is made again
        # from the checked symbol, which holds the library, not this module.
        if name not in self._symbols:
            self._symbols[name] = self._checked_symbol(name)
        found = self._symbols[name]
        if found is None:
            return None
        cfn, addr = found
        return CPackedFunc(cfn, name, self._take_error, owner=self, address=addr,
                           time_loop=self._lib.EmberTimeLoop)

    def _checked_symbol(self, name: str) -> tuple[Any, int] | None:
        """The exported PackedFunc ``name`` (ctypes function, address), or None."""
        if name.startswith(_RESERVED):
            return None
        try:
            cfn = self._lib[name]
        except AttributeError:
            return None
        addr = ctypes.cast(cfn, c_void_p).value or 0
        if not self._owns(addr, 1):  # a dependency's symbol, or data: calling it would crash
            return None
        return cfn, addr

    def __repr__(self) -> str:
        return f"Module(library, {os.path.basename(self.path)!r})"


class SystemLibModule(Module):
    """The system library: functions that libraries built with ``Runtime(..., {"system-lib":
    True})`` registered when they were loaded (``TVMBackendRegisterSystemLibSymbol``), found
    by name across every library this process has open."""

    type_key = "system_lib"

    def _get_local(self, name: str) -> PackedFunc | None:
        for lib in list(_LIBRARIES):
            func = lib._system_lib_function(name)
            if func is not None:
                return func
        return None

    def _find(self, name: str, query_imports: bool) -> PackedFunc | None:
        return self._get_local(name)  # libraries come and go: nothing is cached

    def __repr__(self) -> str:
        return "Module(system_lib)"


_SYSTEM_LIB: SystemLibModule | None = None


def system_lib() -> Module:
    """The system library module (``runtime.SystemLib``): ``system_lib()["fused_add"]``."""
    global _SYSTEM_LIB
    if _SYSTEM_LIB is None:
        _SYSTEM_LIB = SystemLibModule()
    return _SYSTEM_LIB


# ---- the module blob ------------------------------------------------------------------------
def serialize_tree(root: Module) -> bytes:
    """The blob (header + payload) describing the import tree under ``root``.

    All DSO-exportable modules become one node, "_lib" (they are compiled into one library);
    the others are saved with their ``runtime.module.savebinary_<type_key>`` function.
    """
    nodes: list[Any] = []
    index: dict[int, int] = {}

    def node_of(mod: Module) -> int:
        key = 0 if mod.is_dso_exportable else id(mod)
        if key not in index:
            index[key] = len(nodes)
            nodes.append(_LIB_KEY if key == 0 else mod)
        return index[key]

    edges: dict[int, list[int]] = {}
    node_of(root)
    for mod in root._walk():
        parent = node_of(mod)
        for child in mod._imports:
            c = node_of(child)
            if c != parent and c not in edges.setdefault(parent, []):
                edges[parent].append(c)
    out = [struct.pack("<I", len(nodes))]
    for node in nodes:
        key = _LIB_KEY if node == _LIB_KEY else node.type_key
        data = b"" if node == _LIB_KEY else _save_binary(node)
        out += [struct.pack("<I", len(key.encode())), key.encode(), struct.pack("<Q", len(data)),
                data]
    for i in range(len(nodes)):
        kids = edges.get(i, [])
        out.append(struct.pack(f"<I{len(kids)}I", len(kids), *kids))
    payload = b"".join(out)
    return _BLOB_HEADER.pack(BLOB_MAGIC, BLOB_VERSION, 0, len(payload), zlib.crc32(payload),
                             0) + payload


def _save_binary(mod: Module) -> bytes:
    save = get_global_func(f"runtime.module.savebinary_{mod.type_key}", allow_missing=True)
    if save is None:
        raise TVMError(f"export_library: {mod!r} cannot be embedded in a library: no "
                       f"runtime.module.savebinary_{mod.type_key} function is registered")
    data = save(mod)
    if not isinstance(data, (bytes, bytearray)):
        raise TVMError(f"runtime.module.savebinary_{mod.type_key} returned "
                       f"{type(data).__name__}, expected bytes")
    return bytes(data)


def blob_source(blob: bytes) -> str:
    """C source defining the blob as the exported symbol __ember_dev_mblob (+ its size)."""
    lines = ["/* Generated by ember: modules imported into this library, serialised. */",
             "#include <stdint.h>",
             (f'__attribute__((visibility("default"))) const uint64_t {BLOB_SYMBOL}_size = '
              f"{len(blob)}ULL;"),
             (f'__attribute__((visibility("default"))) const unsigned char {BLOB_SYMBOL}'
              f"[{len(blob)}] =")]
    for start in range(0, len(blob), 64):  # a string literal compiles far faster than {0x..}
        lines.append('  "' + "".join(f"\\x{b:02x}" for b in blob[start:start + 64]) + '"')
    return "\n".join(lines) + ";\n"


class _Reader:
    def __init__(self, data: bytes | memoryview, path: str) -> None:
        self.data, self.pos, self.path = data, 0, path

    def take(self, n: int, what: str) -> bytes | memoryview:
        if n < 0 or self.pos + n > len(self.data):
            raise ArtifactError(f"{self.path}: module blob truncated reading {what} at offset "
                                f"{self.pos} (needs {n} bytes, {len(self.data) - self.pos} left)")
        self.pos += n
        return self.data[self.pos - n:self.pos]

    def u32(self, what: str) -> int:
        value: int = struct.unpack("<I", self.take(4, what))[0]
        return value

    def u64(self, what: str) -> int:
        value: int = struct.unpack("<Q", self.take(8, what))[0]
        return value


def _read_blob(dso: DSOModule) -> memoryview | None:
    lib, path = dso._lib, dso.path
    try:
        head_t = ctypes.c_ubyte * _BLOB_HEADER.size
        addr = ctypes.addressof(head_t.in_dll(lib, BLOB_SYMBOL))
        size = ctypes.c_uint64.in_dll(lib, BLOB_SYMBOL + "_size").value
    except ValueError:
        return None
    if size < 16:
        raise ArtifactError(f"{path}: module blob of {size} bytes: truncated or corrupt")
    magic, version = struct.unpack("<8sI", ctypes.string_at(addr, 12))
    if magic != BLOB_MAGIC:
        raise ArtifactError(f"{path}: {BLOB_SYMBOL} has a bad magic {magic!r}")
    if version != BLOB_VERSION:
        raise ArtifactError(f"{path}: module blob version {version}, this runtime reads "
                            f"version {BLOB_VERSION} (export the model again; if this ember "
                            "exported it, the file is corrupt)")
    if size < _BLOB_HEADER.size:
        raise ArtifactError(f"{path}: module blob of {size} bytes: truncated or corrupt")
    _, _, reserved, length, stored, reserved2 = _BLOB_HEADER.unpack(
        ctypes.string_at(addr, _BLOB_HEADER.size))
    if reserved != 0 or reserved2 != 0:
        raise ArtifactError(f"{path}: module blob: a reserved header field is not 0 (corrupt)")
    if size != _BLOB_HEADER.size + length or size > os.path.getsize(path):
        raise ArtifactError(f"{path}: module blob length {length} disagrees with its symbol size "
                            f"{size} or the file size")
    # A view of the library's own memory, valid while ``dso`` is loaded: not copied (a model's
    # weights make it large); each module's part is copied out by _parse_blob.
    payload = memoryview((ctypes.c_ubyte * length).from_address(addr + _BLOB_HEADER.size))
    if zlib.crc32(payload) != stored:
        raise ArtifactError(f"{path}: corrupt module blob: checksum mismatch (stored "
                            f"{stored:#010x}, computed {zlib.crc32(payload):#010x}); the embedded "
                            "modules (graph, metadata, params, VM code) changed after export")
    return payload


def _parse_blob(payload: bytes | memoryview, dso: DSOModule) -> Module:
    r = _Reader(payload, dso.path)
    count = r.u32("the module count")
    mods: list[Module] = []
    if count == 0:
        raise ArtifactError(f"{dso.path}: module blob lists no modules")
    for i in range(count):
        raw = r.take(r.u32(f"module {i} type key length"), f"module {i} type key")
        try:
            key = bytes(raw).decode("ascii")
        except UnicodeDecodeError:
            raise ArtifactError(f"{dso.path}: module blob: module {i} has a type key that is "
                                f"not ASCII: {bytes(raw[:40])!r}") from None
        data = bytes(r.take(r.u64(f"module {i} length"), f"module {i} ({key})"))
        mods.append(dso if key == _LIB_KEY else _load_binary(key, data, dso.path, i))
    for i in range(count):
        for k in range(r.u32(f"module {i} import count")):
            child = r.u32(f"module {i} import {k}")
            if child >= count:
                raise ArtifactError(f"{dso.path}: module blob: module {i} imports module "
                                    f"{child}, but there are only {count}")
            try:
                mods[i].import_module(mods[child])
            except ValueError:
                raise ArtifactError(f"{dso.path}: module blob: import cycle through module "
                                    f"{i}") from None
    if r.pos != len(payload):
        raise ArtifactError(f"{dso.path}: module blob: {len(payload) - r.pos} unexpected trailing "
                            "bytes")
    return mods[0]


def _load_binary(key: str, data: bytes, path: str, i: int) -> Module:
    load = get_global_func(f"runtime.module.loadbinary_{key}", allow_missing=True)
    if load is None:
        raise ArtifactError(f"{path}: module {i} has type {key!r}, but no "
                            f"runtime.module.loadbinary_{key} function is registered (import the "
                            "Python module that defines it before load_module)")
    try:
        mod = load(data)
    except TVMError as err:  # name the file and the part: the loader knows neither
        raise ArtifactError(f"{path}: module {i} ({key}): {err}") from None
    except (ValueError, TypeError, KeyError, IndexError, UnicodeDecodeError,
            struct.error) as err:
        raise ArtifactError(f"{path}: module {i} ({key}) is corrupt: {type(err).__name__}: "
                            f"{err}") from None
    if not isinstance(mod, Module):
        raise ArtifactError(f"{path}: runtime.module.loadbinary_{key} returned "
                            f"{type(mod).__name__}, expected a Module")
    return mod


# ---- load_module ----------------------------------------------------------------------------
def _load_library(path: str) -> Module:
    dso = DSOModule(path)
    payload = _read_blob(dso)
    return dso if payload is None else _parse_blob(payload, dso)


def _load_tar(path: str) -> Module:
    linked = link_tar(path)
    try:
        return _load_library(linked)
    except CpuFeatureError as err:  # name the file the user loaded
        raise CpuFeatureError(str(err).replace(linked, f"{path} (linked as {linked})",
                                               1)) from None


def link_tar(path: str) -> str:
    """Compile and link a .tar of sources or objects written by ``export_library`` into a
    shared library (cached by content); returns its path. Needs a C compiler."""
    from .module import compiler_driver

    cc = compiler_driver()  # linking a .tar needs the compiler

    with tempfile.TemporaryDirectory(prefix="ember_tar_") as tmp:
        try:
            with tarfile.open(path) as tar:
                tar.extractall(tmp, filter="data")
        except (tarfile.TarError, OSError) as err:
            raise ArtifactError(f"{path}: not a readable tar archive: {err}") from None
        manifest = os.path.join(tmp, "ember_manifest.json")
        options = []
        if os.path.exists(manifest):
            with open(manifest) as f:
                options = json.load(f).get("options", [])
        sources = sorted(os.path.join(tmp, f) for f in os.listdir(tmp) if f.endswith((".c", ".o")))
        if not sources:
            raise ArtifactError(f"{path}: the archive holds no .c or .o files")
        return str(cc.build_shared(sources, options))


def _load_c_source(path: str) -> Module:
    from .module import CSourceModule

    with open(path) as f:
        return CSourceModule(f.read())


_LOADERS: dict[str, Callable[[str], Module]] = {
    "so": _load_library, "dll": _load_library, "dylib": _load_library, "tar": _load_tar,
    "c": _load_c_source,
}


def register_loader(ext: str, loader: Callable[[str], Module]) -> None:
    """Make ``load_module`` open files ending in ``.ext`` with ``loader(path)``."""
    _LOADERS[ext.lstrip(".")] = loader


def load_module(path: str | os.PathLike[str], fmt: str = "") -> Module:
    """Load a module from a file: an exported library (.so), a .tar of sources, C source, or
    any format with a registered loader. Raises ArtifactError naming the path and reason."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise ArtifactError(f"load_module: {path}: no such file")
    ext = fmt or os.path.splitext(path)[1].lstrip(".")
    if not fmt and ".so." in os.path.basename(path):
        ext = "so"  # versioned names such as libfoo.so.1
    loader = _LOADERS.get(ext)
    if loader is None:
        found = get_global_func(f"runtime.module.loadfile_{ext}", allow_missing=True)
        if found is None:
            raise ArtifactError(f"load_module: {path}: no loader for format {ext!r} (known: "
                                f"{', '.join(sorted(_LOADERS))})")
        module: Module = found(path, ext)
        return module
    return loader(path)


# ---- lookups on behalf of C (the host table) --------------------------------------------------
_GLOBAL_ENV: dict[str, int] = {}


def _host_lookup(mod: Any, name: str, flags: int) -> int:
    """Handle of the function ``name`` for C: the module's own, its imports', the registry's."""
    if mod is not None and not isinstance(mod, Module):
        raise TVMError(f"function lookup {name!r}: handle is a {type(mod).__name__}, not a module")
    env = flags & _bridge.LOOKUP_ENV
    cache = (mod._env_handles if mod is not None else _GLOBAL_ENV) if env else None
    if cache is not None and name in cache:
        return cache[name]
    func = None
    if mod is not None and flags & _bridge.LOOKUP_SELF:
        func = mod._find(name, bool(flags & _bridge.LOOKUP_IMPORTS))
    elif mod is not None and flags & _bridge.LOOKUP_IMPORTS:
        func = next((f for m in mod._imports if (f := m._find(name, True))), None)
    if func is None and flags & _bridge.LOOKUP_GLOBAL:
        func = get_global_func(name, allow_missing=True)
    if func is None:
        where = f"{mod!r}, its imports or the global registry" if mod else "the global registry"
        raise TVMError(f"cannot find function {name!r} in {where}")
    if cache is None:
        return _bridge.new_handle(func)
    if mod is None:  # the process's environment: one handle per name, for good
        cache[name] = _bridge.new_handle(func, permanent=True)
    else:
        # The table refers to the function weakly and the module holds it: a function of the
        # module itself holds the module, and a strong entry in the process-wide table would
        # keep module and library loaded for good. The handles go when the module does.
        if not cache:
            weakref.finalize(mod, _release_handles, cache)
        mod._env_funcs.append(func)
        cache[name] = _bridge.new_handle(func, weak=True)
    return cache[name]


def _release_handles(handles: dict[str, int]) -> None:
    for h in handles.values():
        _bridge.release_handle(h)
    handles.clear()


_bridge.HOOKS["lookup"] = _host_lookup
register_func("runtime.SystemLib", system_lib, override=True)
_bridge.HOOKS["load"] = load_module
