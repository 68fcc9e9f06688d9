"""Bad input to the native runtime: error codes and messages, never a crash. Every case runs
in the probe program (programs/probe.c) twice: plain, and under AddressSanitizer + UBSan
(skipped with the reason when the toolchain has no sanitizers)."""
from __future__ import annotations

import json
import re

import pytest
from _native_testlib import PROGRAMS, build_program, compiler, run, run_program

import ember

# Every case runs plain; under the sanitizers all of them in the slow run, and a
# representative set in the default run (test_sanitized_smoke).
MODES = ["plain", pytest.param("sanitized", marks=pytest.mark.slow)]


def make_probe(sanitize: bool, tmp_path_factory):
    compiler()
    exe = build_program(PROGRAMS / "probe.c", tmp_path_factory.mktemp("probe") / "probe",
                        sanitize=sanitize)

    def call(*args: object) -> dict[str, tuple[int, str]]:
        proc = run_program([exe, *args], sanitize, check=False)
        assert proc.returncode == 0, f"probe crashed or failed ({proc.returncode}):\n" \
                                     f"{proc.stdout}\n{proc.stderr}"
        out = {}
        for line in proc.stdout.splitlines():
            m = re.match(r"(\w+): rc=(-?\d+) ?(.*)", line)
            if m:
                out[m[1]] = (int(m[2]), m[3])
            elif ":" in line:
                key, value = line.split(":", 1)
                out[key] = (int(value), "")
        return out

    return call


@pytest.fixture(scope="module", params=MODES)
def probe(request, tmp_path_factory):
    return make_probe(request.param == "sanitized", tmp_path_factory)


def test_sanitized_smoke(mlp_exports, tmp_path, tmp_path_factory):
    """Under ASan + UBSan: the API misuse cases, a truncated library, deep and malformed JSON,
    corrupt params (the full matrix runs with -m slow)."""
    sanitized = make_probe(True, tmp_path_factory)
    api = sanitized("api", mlp_exports["dir"] / "graph.so")
    assert api["set_input_wrong_shape"][0] == codes()["kTvmErrorExecutorBadInput"]
    assert api["call_fake_function"][0] == codes()["kTvmErrorModuleHandleInvalid"]
    assert api["run"] == (0, "")
    data = (mlp_exports["dir"] / "graph.so").read_bytes()
    (tmp_path / "cut.so").write_bytes(data[: len(data) // 3])
    assert "truncated" in load(sanitized, tmp_path / "cut.so")[1]
    for text in ("[" * 5000, '{"nodes": [{"op": "null", "name": "x"}], "arg_nodes": [0]',
                 with_change("nodes.1.inputs", [[5, 0, 0]])):
        assert graph_case(sanitized, tmp_path, text)[0] == codes()["kTvmErrorExecutorBadArtifact"]
    good = bytes(ember.runtime.save_param_dict(mlp_exports["graph"].get_params()))
    assert "truncated" in params_case(sanitized, mlp_exports, tmp_path, good[:-7])[1]


def codes() -> dict[str, int]:
    """kTvmError* values from error_codes.h."""
    import sys

    sys.path.insert(0, str(PROGRAMS.parents[1] / "crt"))
    from _crt_testlib import error_codes

    return error_codes()


# ---- loading ------------------------------------------------------------------------------------
def load(probe, path) -> tuple[int, str]:
    return probe("load", path)["load"]


def test_missing_file_names_it(probe, tmp_path):
    rc, msg = load(probe, tmp_path / "nope.so")
    assert rc == codes()["kTvmErrorModuleLoadFailed"]
    assert str(tmp_path / "nope.so") in msg and "no such file" in msg


def test_truncated_library_is_refused_before_dlopen(probe, mlp_exports, tmp_path):
    data = (mlp_exports["dir"] / "graph.so").read_bytes()
    (tmp_path / "cut.so").write_bytes(data[: len(data) // 2])
    rc, msg = load(probe, tmp_path / "cut.so")
    assert rc == codes()["kTvmErrorModuleLoadFailed"]
    assert "cut.so: truncated: the ELF section headers end at byte" in msg


def test_foreign_files_are_refused(probe, tmp_path):
    (tmp_path / "text.so").write_text("hello, not a library\n")
    rc, msg = load(probe, tmp_path / "text.so")
    assert rc != 0 and "text.so: not a shared library" in msg
    (tmp_path / "other.c").write_text("int f(void) { return 1; }\n")
    run([*compiler(), "-shared", "-fPIC", str(tmp_path / "other.c"), "-o",
         str(tmp_path / "other.so")])
    rc, msg = load(probe, tmp_path / "other.so")
    assert rc != 0 and "other.so: not an ember library (no __ember_library_info symbol)" in msg


def _patched(src, dst, old: bytes, new: bytes) -> None:
    data = src.read_bytes()
    assert data.count(old) >= 1, old
    dst.write_bytes(data.replace(old, new, 1))


def test_wrong_library_abi_is_named(probe, mlp_exports, tmp_path):
    _patched(mlp_exports["dir"] / "graph.so", tmp_path / "abi.so", b"EMBERLIB abi=1",
             b"EMBERLIB abi=7")
    rc, msg = load(probe, tmp_path / "abi.so")
    assert rc == codes()["kTvmErrorModuleLoadFailed"]
    assert "abi.so: built for another ember library ABI ('EMBERLIB abi=7" in msg
    assert "rebuild it" in msg


def test_wrong_blob_version_is_named(probe, mlp_exports, tmp_path):
    _patched(mlp_exports["dir"] / "graph.so", tmp_path / "blob.so",
             b"EMBERMB\x00\x02\x00\x00\x00", b"EMBERMB\x00\x09\x00\x00\x00")
    rc, msg = load(probe, tmp_path / "blob.so")
    assert rc == codes()["kTvmErrorModuleLoadFailed"]
    assert "blob.so: __ember_dev_mblob: module blob version is not 2" in msg


def test_changed_blob_byte_is_a_checksum_error(probe, mlp_exports, tmp_path):
    data = bytearray((mlp_exports["dir"] / "graph.so").read_bytes())
    at = data.index(b"EMBERMB\x00") + 32 + 40  # 40 bytes into the payload, after the header
    data[at] ^= 0x20
    (tmp_path / "flip.so").write_bytes(bytes(data))
    rc, msg = load(probe, tmp_path / "flip.so")
    assert rc == codes()["kTvmErrorModuleLoadFailed"]
    assert "flip.so: __ember_dev_mblob: corrupt module blob: checksum mismatch" in msg


def test_vm_library_is_refused_with_the_reason(probe, tmp_path):
    from ember import relay

    x = relay.var("x", shape=(2,), dtype="float32")
    mod = ember.IRModule.from_expr(relay.Function([x], relay.add(x, x)))
    factory = relay.build(mod, "llvm", executor=relay.backend.Executor("vm"))
    factory.export_library(tmp_path / "vm.so")
    rc, msg = load(probe, tmp_path / "vm.so")
    assert rc == codes()["kTvmErrorModuleLoadFailed"]
    assert "vm.so" in msg and "the VM runs only under the Python runtime" in msg


# ---- handles, names, indices, inputs ---------------------------------------------------------
@pytest.fixture(scope="module")
def api(probe, mlp_exports):
    return probe("api", mlp_exports["dir"] / "graph.so")


@pytest.mark.parametrize("case", ["get_function_null_module", "get_function_fake_module",
                                  "call_null_function", "call_fake_function",
                                  "free_fake_module"])
def test_bad_handles_are_error_codes(api, case):
    rc, msg = api[case]
    assert rc == codes()["kTvmErrorModuleHandleInvalid"]
    assert "handle" in msg


def test_unknown_names(api):
    rc, msg = api["unknown_function"]
    assert rc == codes()["kTvmErrorModuleFunctionNotFound"]
    assert "no function named 'no_such_kernel'" in msg
    rc, msg = api["global_unknown"]
    assert rc == codes()["kTvmErrorFunctionNameNotFound"] and "'no.such.function'" in msg
    rc, msg = api["set_input_unknown_name"]
    assert rc == codes()["kTvmErrorExecutorNameNotFound"] and "'no_such_input'" in msg
    assert api["get_input_index_unknown"][0] == -1


def test_wrong_inputs_name_expected_and_found(api):
    rc, msg = api["set_input_wrong_shape"]
    assert rc == codes()["kTvmErrorExecutorBadInput"]
    assert "set_input: input 'data': expected float32[1, 1, 28, 28], got float32[1, 3]" in msg
    rc, msg = api["set_input_wrong_dtype"]
    assert rc == codes()["kTvmErrorExecutorBadInput"] and "got int8[1, 3]" in msg
    rc, msg = api["set_input_null_tensor"]
    assert rc != 0 and "tensor (DLTensor*, not NULL)" in msg


def test_out_of_range_indices(api):
    for case in ("set_input_index_out_of_range", "set_input_negative_index",
                 "get_output_out_of_range"):
        rc, msg = api[case]
        assert rc == codes()["kTvmErrorExecutorIndexOutOfRange"], case
        assert "out of range (this model has" in msg
    assert "output index 5 out of range (this model has 1 output)" in \
        api["get_output_out_of_range"][1]


def test_wrong_argument_lists(api):
    assert api["set_input_one_argument"][0] == codes()["kTvmErrorFunctionCallNumArgs"]
    assert "set_input: expected 2 arguments, got 1" in api["set_input_one_argument"][1]
    assert api["run_with_arguments"][0] == codes()["kTvmErrorFunctionCallNumArgs"]
    assert api["get_output_by_str"][0] == codes()["kTvmErrorGenericInvalidArgument"]
    assert api["run"] == (0, "")  # the executor is still usable after every error


def test_api_argument_checks(api):
    assert api["load_null_path"][0] == codes()["kTvmErrorGenericInvalidArgument"]
    assert "format 'tar' is not supported" in api["load_tar_format"][1]
    assert api["array_bad_ndim"][0] == codes()["kTvmErrorGenericInvalidArgument"]
    assert api["array_bad_dim"][0] == codes()["kTvmErrorGenericInvalidArgument"]
    assert "has 24 bytes, got a buffer of 4" in api["array_copy_wrong_size"][1]
    assert api["array_copy_to_wrong_size"][0] == codes()["kTvmErrorExecutorBadInput"]
    assert api["set_stream_cpu"] == (0, "")


# ---- params ------------------------------------------------------------------------------------
def params_case(probe, mlp_exports, tmp_path, blob: bytes) -> tuple[int, str]:
    (tmp_path / "p.bin").write_bytes(blob)
    return probe("params", mlp_exports["dir"] / "graph.so", tmp_path / "p.bin")["load_params"]


def test_params_blob_errors(probe, mlp_exports, tmp_path):
    good = bytes(ember.runtime.save_param_dict(mlp_exports["graph"].get_params()))
    assert params_case(probe, mlp_exports, tmp_path, good) == (0, "")
    bad = codes()["kTvmErrorExecutorBadArtifact"]
    rc, msg = params_case(probe, mlp_exports, tmp_path, good[: len(good) // 2])
    assert rc == bad and "params: truncated data" in msg
    rc, msg = params_case(probe, mlp_exports, tmp_path, b"\x00" * 64)
    assert rc == bad and "not an ember params blob (bad magic) at byte offset 0" in msg
    rc, msg = params_case(probe, mlp_exports, tmp_path, good + b"x")
    assert rc == bad and "unexpected trailing bytes" in msg
    flipped = bytearray(good)
    flipped[-9] ^= 0x01  # inside the last tensor's data: only the checksum can tell
    rc, msg = params_case(probe, mlp_exports, tmp_path, bytes(flipped))
    assert rc == bad and "checksum mismatch: the data is corrupt" in msg
    import numpy as np

    wrong = bytes(ember.runtime.save_param_dict({"p0": np.zeros((3, 3), "float32")}))
    rc, msg = params_case(probe, mlp_exports, tmp_path, wrong)
    assert rc == codes()["kTvmErrorExecutorBadInput"]
    # p0 is the first weight, packed into GEMM panels at build time
    assert re.search(r"param 'p0': expected float32\[\d+, 784, \d+\], got float32\[3, 3\]", msg)
    unknown = bytes(ember.runtime.save_param_dict({"zz": np.zeros(2, "float32")}))
    rc, msg = params_case(probe, mlp_exports, tmp_path, unknown)
    assert rc == codes()["kTvmErrorExecutorNameNotFound"] and "'zz' is not an input" in msg


# ---- graph JSON ----------------------------------------------------------------------------------
GOOD = {"nodes": [{"op": "null", "name": "x", "inputs": []},
                  {"op": "tvm_op", "name": "f", "inputs": [[0, 0, 0]],
                   "attrs": {"func_name": "no_such_kernel", "num_inputs": "1",
                             "num_outputs": "1", "flatten_data": "0"}}],
        "arg_nodes": [0], "heads": [[1, 0, 0]], "node_row_ptr": [0, 1, 2],
        "attrs": {"storage_id": ["list_int", [0, 1]], "shape": ["list_shape", [[2], [2]]],
                  "dltype": ["list_str", ["float32", "float32"]]}}


def graph_case(probe, tmp_path, text: str) -> tuple[int, str]:
    (tmp_path / "g.json").write_text(text)
    return probe("graph", tmp_path / "g.json")["graph"]


def with_change(path: str, value) -> str:
    doc = json.loads(json.dumps(GOOD))
    *parents, last = path.split(".")
    target = doc
    for key in parents:
        target = target[int(key)] if key.isdigit() else target[key]
    target[int(last) if last.isdigit() else last] = value
    return json.dumps(doc)


@pytest.mark.parametrize("text, expected", [
    ('{"nodes": [}', "malformed JSON: unexpected character at byte 11"),
    ("{} x", "malformed JSON: trailing characters after the value at byte 3"),
    ('{"a": "\x01"}', "malformed JSON: bad string at byte 6"),
    ('{"a" 1}', "expected ':' after a key"),
    ("[" * 100000, "malformed JSON: nested too deeply at byte 32"),
    ("{}", "graph json: nodes: missing or not a list"),
    ("[1, 2]", "expected a JSON object"),
])
def test_malformed_graph_json(probe, tmp_path, text, expected):
    rc, msg = graph_case(probe, tmp_path, text)
    assert rc == codes()["kTvmErrorExecutorBadArtifact"]
    assert expected in msg


def test_huge_graph_json_is_refused(probe, tmp_path):
    rc, msg = graph_case(probe, tmp_path, " " * (64 * 1024 * 1024 + 1))
    assert rc == codes()["kTvmErrorExecutorBadArtifact"]
    assert "document larger than the limit" in msg


@pytest.mark.parametrize("path, value, expected", [
    ("nodes.1.inputs", [[5, 0, 0]], "nodes[1].inputs: node 5 out of range (graph has 2 nodes)"),
    ("nodes.1.inputs", [[1, 0, 0]], "nodes[1].inputs: node 1 is not before this node"),
    ("nodes.1.inputs", [[0, 3, 0]], "output 3 of node 0 out of range"),
    ("nodes.1.op", "conv", "nodes[1].op: expected 'null' or 'tvm_op'"),
    ("nodes.1.attrs.num_outputs", "-1", "num_outputs: expected an integer >= 1"),
    ("nodes.1.attrs.num_inputs", "3", "num_inputs: disagrees with the node's inputs"),
    ("arg_nodes", [1], "arg_nodes[0]: names a tvm_op node"),
    ("arg_nodes", [7], "arg_nodes[0]: not a node id of this graph"),
    ("heads", [[9, 0, 0]], "heads[0]: node 9 out of range"),
    ("node_row_ptr", [0, 1, 5], "node_row_ptr: disagrees with the nodes' output counts"),
    ("attrs.storage_id", ["list_int", [0, 9]], "storage_id[1][1]: must be in [0, number"),
    ("attrs.storage_id", ["list_int", [0, 0]], "shares the storage of graph input 'x'"),
    ("attrs.shape", ["list_shape", [[2]]], "attrs.shape: has 1 values but the graph has 2"),
    ("attrs.shape", ["list_shape", [[2], [-2]]], "dimensions must be integers >= 0"),
    ("attrs.dltype", ["list_str", ["float32", "float33"]], "dltype[1][1]: unknown dtype"),
    ("attrs.dltype", ["list_int", [1, 2]], "attrs.dltype: expected [\"list_str\", [...]]"),
    ("attrs.storage_offset", ["list_int", [0, -4]], "storage_offset[1][1]: must be an integer"),
    ("attrs.storage_offset", ["list_int", [0, 2]], "storage_offset[1][1]: not a multiple of"),
    ("attrs.storage_offset", ["list_int", [0, 4]], "storage_offset[1][1]: runs past the end"),
    ("attrs.storage_size", ["list_int", [8, 4]],
     "storage_size[1][1]: storage 1 is too small for entry 1 at bytes [0, 8)"),
    ("attrs.storage_size", ["list_int", [8]],
     "attrs.storage_size: has 1 values but the graph has 2 storage ids"),
    ("attrs.storage_size", ["list_int", [8, -1]], "storage_size[1][1]: must be an integer >= 0"),
    ("attrs.storage_size", ["list_shape", [8, 8]], "attrs.storage_size: expected [\"list_int\""),
    ("attrs.format_version", ["size_t", 4], "reads graph format versions 1 to 3"),
])
def test_invalid_graphs_name_the_place(probe, tmp_path, path, value, expected):
    rc, msg = graph_case(probe, tmp_path, with_change(path, value))
    assert rc == codes()["kTvmErrorExecutorBadArtifact"], msg
    assert expected in msg


def test_declared_storage_size_holds_entries_past_the_largest_at_offset_0(probe, tmp_path):
    """Format 3: storage 1 is 64 bytes, its one entry at byte 32 (without storage_size it
    would be 8 bytes, and the entry would run past its end)."""
    doc = json.loads(json.dumps(GOOD))
    doc["attrs"].update(storage_offset=["list_int", [0, 32]],
                        storage_size=["list_int", [8, 64]], format_version=["size_t", 3])
    rc, msg = graph_case(probe, tmp_path, json.dumps(doc))
    assert rc == codes()["kTvmErrorExecutorNameNotFound"], msg  # parsed; no kernel to call
    del doc["attrs"]["storage_size"]
    rc, msg = graph_case(probe, tmp_path, json.dumps(doc))
    assert "storage_offset[1][1]: runs past the end of its storage" in msg


def test_missing_kernel_is_named(probe, tmp_path):
    rc, msg = graph_case(probe, tmp_path, json.dumps(GOOD))
    assert rc == codes()["kTvmErrorExecutorNameNotFound"]
    assert "nodes[1] ('f') calls 'no_such_kernel', which is not a function" in msg


def test_concat_nop_inputs_must_lie_end_to_end(probe, tmp_path):
    doc = json.loads(json.dumps(GOOD))
    doc["nodes"].append({"op": "tvm_op", "name": "cat", "inputs": [[1, 0, 0], [1, 0, 0]],
                         "attrs": {"func_name": "__nop", "num_inputs": "2", "num_outputs": "1"}})
    doc["heads"], doc["node_row_ptr"] = [[2, 0, 0]], [0, 1, 2, 3]
    doc["attrs"].update(storage_id=["list_int", [0, 1, 1]],
                        shape=["list_shape", [[2], [2], [4]]],
                        dltype=["list_str", ["float32"] * 3])
    rc, msg = graph_case(probe, tmp_path, json.dumps(doc))
    assert rc == codes()["kTvmErrorExecutorBadArtifact"]
    assert "nodes[2]: a __nop node's inputs must lie end to end" in msg


def test_graph_without_kernels_builds(probe, tmp_path):
    nop = json.loads(json.dumps(GOOD))
    nop["nodes"][1]["attrs"]["func_name"] = "__nop"
    nop["attrs"]["storage_id"] = ["list_int", [0, 0]]
    assert graph_case(probe, tmp_path, json.dumps(nop)) == (0, "")



# ---- AOT metadata --------------------------------------------------------------------------------
META = {"version": 1, "module_name": "default", "prefix": "tvmgen_default",
        "interface_api": "packed", "unpacked_api": False, "link_params": False,
        "operator_calling_convention": "cpacked", "workspace_alignment": 16,
        "constant_alignment": 16,
        "functions": [{"function_name": "tvmgen_default_run_model",
                       "params": [{"relay_name_hint": "a", "tir_name_hint": "a", "shape": [2],
                                   "dtype": "float32"},
                                  {"relay_name_hint": "output", "tir_name_hint": "output",
                                   "shape": [2], "dtype": "float32"}],
                       "num_inputs": 1, "num_outputs": 1, "workspace_size_bytes": 0,
                       "io_size_bytes": 16, "constant_size_bytes": 0}],
        "constants": [], "operators": [], "memory": {}}


def aot_case(probe, tmp_path, doc) -> tuple[int, str]:
    (tmp_path / "m.json").write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return probe("aot", tmp_path / "m.json")["aot"]


def meta_with(change) -> dict:
    doc = json.loads(json.dumps(META))
    change(doc)
    return doc


@pytest.mark.parametrize("doc, expected", [
    ('{"version": 1', "aot metadata: malformed JSON: expected ',' or '}' at byte 13"),
    (meta_with(lambda d: d.update(version=2)), "version: missing, or not 1"),
    (meta_with(lambda d: d.update(functions=[])), "functions: the model's run_model function is"),
    (meta_with(lambda d: d["functions"][0].update(num_inputs=2)), "num_inputs + num_outputs"),
    (meta_with(lambda d: d["functions"][0]["params"][0].update(dtype="float3")),
     "functions[0].params[0]: missing or unknown dtype"),
    (meta_with(lambda d: d["functions"][0]["params"][0].update(shape=[2**31 - 1] * 3)),
     "the tensor is implausibly large"),
    (meta_with(lambda d: d["functions"][0]["params"][1].update(shape=[-1])),
     "dimensions must be integers >= 0"),
    (meta_with(lambda d: d.update(constants=[{"name": "c", "shape": [2], "dtype": "float32"}])),
     "constants[0]: bad offset"),
])
def test_malformed_aot_metadata(probe, tmp_path, doc, expected):
    rc, msg = aot_case(probe, tmp_path, doc)
    assert rc == codes()["kTvmErrorExecutorBadArtifact"], msg
    assert expected in msg


def test_aot_entry_missing_is_named(probe, tmp_path):
    rc, msg = aot_case(probe, tmp_path, META)
    assert rc == codes()["kTvmErrorExecutorNameNotFound"]
    assert "no function 'tvmgen_default_run'" in msg
