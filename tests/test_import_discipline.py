"""ember.runtime must never load the compiler (DESIGN.md, "The layers")."""
import subprocess
import sys

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
