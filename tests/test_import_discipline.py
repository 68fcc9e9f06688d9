"""ember.runtime must never load the compiler (DESIGN.md, "The layers")."""
import ast
import pathlib
import subprocess
import sys

from ember import _layers

COMPILER = ("ember.relay", "ember.ir", "ember.te", "ember.tir", "ember.topi", "ember.parser")


def _loaded_after(code: str) -> list[str]:
    probe = code + "\nimport sys\nprint('\\n'.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return [m for m in out.stdout.split() if m.startswith(COMPILER)]


def test_import_ember_loads_no_compiler():
    assert _loaded_after("import ember") == []


def test_import_runtime_loads_no_compiler():
    assert _loaded_after("import ember.runtime; ember.nd.array([1.0]); ember.cpu(0)") == []


def test_compiler_loads_lazily_on_attribute_access():
    assert "ember.relay" in _loaded_after("import ember as tvm; tvm.relay")


# -- the layer table (ember/_layers.py): no import, lazy ones included, runs against it --------
PACKAGE = pathlib.Path(_layers.__file__).parent


def _module_name(path: pathlib.Path, root: pathlib.Path = PACKAGE.parent) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(name: str) -> bool:
    rel = pathlib.Path(*name.split("."))
    return (PACKAGE.parent / rel.with_suffix(".py")).exists() or \
        (PACKAGE.parent / rel / "__init__.py").exists()


def _walk(tree: ast.AST) -> list[tuple[ast.AST, str | None, bool]]:
    """Every node of ``tree`` with its enclosing function's name and whether an ``if
    TYPE_CHECKING`` holds it: one traversal, not a parent map walked up from each import."""
    out, stack = [], [(tree, None, False)]
    while stack:
        node, func, type_checking = stack.pop()
        out.append((node, func, type_checking))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            func = node.name
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            type_checking = True
        children = [(child, func, type_checking) for child in ast.iter_child_nodes(node)]
        stack.extend(reversed(children))  # popped in source order
    return out


def _imports(path: pathlib.Path, root: pathlib.Path = PACKAGE.parent
             ) -> list[tuple[str, int, str | None]]:
    """(imported ember module, line, enclosing function) for every import in ``path`` (a file
    under ``root``/ember): import statements anywhere and ``importlib.import_module("...")``
    with a literal name."""
    module = _module_name(path, root)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    tree = ast.parse(path.read_text(), str(path))
    found = []
    for node, func, type_checking in _walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([node.module] if node.module else []))
            subs = [f"{base}.{a.name}" for a in node.names if _is_module(f"{base}.{a.name}")]
            targets = subs if len(subs) == len(node.names) else [base, *subs]
        elif (isinstance(node, ast.Call) and node.args
              and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)
              and ast.unparse(node.func) in ("importlib.import_module", "import_module",
                                             "__import__")):
            targets = [node.args[0].value]
        if targets and type_checking:
            continue
        for target in targets:
            if target == "ember" or target.startswith("ember."):
                found.append((target, node.lineno, func))
    return found


def _violations(paths: list[pathlib.Path] | None = None,
                root: pathlib.Path = PACKAGE.parent) -> list[str]:
    """The imports against the layer table in ``paths`` (default: every module of ember),
    each a file under ``root``/ember."""
    (allowed_module, allowed_func), allowed_target = _layers.RUNTIME_TO_DRIVER
    bad = []
    for path in sorted(PACKAGE.rglob("*.py")) if paths is None else paths:
        module = _module_name(path, root)
        level = _layers.layer_index(module)
        for target, line, func in _imports(path, root):
            if (module, func, target) == (allowed_module, allowed_func, allowed_target):
                continue
            if (module, func) == _layers.NAMESPACE_LOADER:
                continue
            if _layers.layer_index(target) > level:
                bad.append(f"{path.relative_to(root)}:{line}: {module} "
                           f"({_layers.layer_name(module)}) imports {target} "
                           f"({_layers.layer_name(target)})")
    return bad


def test_every_module_has_a_layer():
    for path in PACKAGE.rglob("*.py"):
        _layers.layer_index(_module_name(path))  # raises KeyError naming the module


def test_no_import_runs_against_the_layer_order():
    bad = _violations()
    assert not bad, "imports against ember/_layers.py:\n" + "\n".join(bad)


def test_runtime_reaches_the_driver_through_one_function():
    (module, func), target = _layers.RUNTIME_TO_DRIVER
    path = PACKAGE.parent / (module.replace(".", "/") + ".py")
    assert (target, func) in {(t, f) for t, _, f in _imports(path)}
    runtime_modules = [p for p in PACKAGE.rglob("*.py")
                       if _layers.layer_name(_module_name(p)) == "runtime"]
    reaching = {(_module_name(p), f) for p in runtime_modules for t, _, f in _imports(p)
                if _layers.layer_index(t) > 0 and (_module_name(p), f) != _layers.NAMESPACE_LOADER}
    assert reaching == {(module, func)}


def test_the_checker_sees_lazy_imports(tmp_path):
    # a lazy import inside a function of the IR layer, of a passes-layer module, is caught;
    # the probe is a module of the IR layer by its path under tmp_path, never written into the
    # package (a parallel scan of the package would see it)
    probe = tmp_path / "ember" / "ir" / "_layer_probe.py"
    probe.parent.mkdir(parents=True)
    probe.write_text("def f():\n    from ..relay.transform import InferType\n"
                     "    import importlib\n    importlib.import_module('ember.relay.op')\n")
    bad = _violations([probe], root=tmp_path)
    assert len(bad) == 2 and "ember.relay.transform" in bad[0] and "ember.relay.op" in bad[1]


def test_layer_lookup():
    assert _layers.layer_name("ember") == "runtime"
    assert _layers.layer_name("ember.relay.op.tensor") == "operators"
    assert _layers.layer_name("ember.relay.backend.vm.compiler") == "backends"
    try:
        _layers.layer_index("ember.nonexistent_package")
    except KeyError as err:
        assert "ember.nonexistent_package" in str(err)
    else:
        raise AssertionError("an unplaced package must raise")


def test_the_ir_loads_no_relay_module():
    assert [m for m in _loaded_after("import ember.ir, ember.ir.transform")
            if m.startswith("ember.relay")] == []


def test_ops_register_from_above():
    code = ("import ember.ir\nfrom ember.ir.op import OP_REGISTRY\nprint('before', len(OP_REGISTRY))\n"
            "import ember.relay\nprint('after', len(OP_REGISTRY) > 100)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["before", "0", "after", "True"]
