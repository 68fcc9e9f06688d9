// cpp_deploy: run a model that ember exported, from C++, with no Python.
//
//   cpp_deploy LIB.so INPUT.bin OUTPUT.bin              a library from export_library (graph
//                                                       or AOT: its factory's "default")
//   cpp_deploy_syslib GRAPH.json PARAMS INPUT.bin OUTPUT.bin
//                                                       the kernels linked into this program
//                                                       (deploy_sys.o, system-lib)
//
// Both go through the module-based interface of c_runtime_api.h: create the executor, set
// input 0 from INPUT.bin, run, write output 0 to OUTPUT.bin. Errors are codes plus
// TVMGetLastError(); the wrappers below turn them into exceptions.
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

#include "ember/c_runtime_api.h"

namespace {

void check(int rc, const std::string& what) {
  if (rc != 0) throw std::runtime_error(what + ": " + TVMGetLastError());
}

std::vector<char> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  return std::vector<char>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// A function handle, freed when it goes out of scope.
class Function {
 public:
  explicit Function(TVMFunctionHandle h) : h_(h) {}
  Function(const Function&) = delete;
  Function& operator=(const Function&) = delete;
  ~Function() { TVMFuncFree(h_); }
  // Call with the given arguments; returns the result (its type code in *code).
  TVMValue call(std::vector<TVMValue> args, std::vector<int> codes, int* code = nullptr) const {
    TVMValue ret;
    int ret_code = kTVMNullptr;
    check(TVMFuncCall(h_, args.data(), codes.data(), static_cast<int>(args.size()), &ret,
                      &ret_code),
          "TVMFuncCall");
    if (code != nullptr) *code = ret_code;
    return ret;
  }

 private:
  TVMFunctionHandle h_;
};

// A module handle, freed when it goes out of scope.
class Module {
 public:
  explicit Module(TVMModuleHandle h) : h_(h) {}
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;
  ~Module() { TVMModFree(h_); }
  static Module load(const std::string& path) {
    TVMModuleHandle h;
    check(TVMModLoadFromFile(path.c_str(), "so", &h), "TVMModLoadFromFile");
    return Module(h);
  }
  Module(Module&& other) noexcept : h_(other.h_) { other.h_ = nullptr; }
  Function get(const char* name) const {
    TVMFunctionHandle f;
    check(TVMModGetFunction(h_, name, 0, &f), std::string("TVMModGetFunction(") + name + ")");
    return Function(f);
  }
  TVMModuleHandle handle() const { return h_; }

 private:
  TVMModuleHandle h_;
};

Function global(const char* name) {
  TVMFunctionHandle f;
  check(TVMFuncGetGlobal(name, &f), std::string("TVMFuncGetGlobal(") + name + ")");
  return Function(f);
}

TVMValue value_of(int64_t v) {
  TVMValue x;
  x.v_int64 = v;
  return x;
}

TVMValue value_of(void* p) {
  TVMValue x;
  x.v_handle = p;
  return x;
}

TVMValue value_of(const char* s) {
  TVMValue x;
  x.v_str = s;
  return x;
}

// set input 0 from input_path, run, write output 0 to output_path.
void run(const Module& ex, const std::string& input_path, const std::string& output_path) {
  DLTensor* slot = static_cast<DLTensor*>(ex.get("get_input").call({value_of(int64_t{0})},
                                                                    {kTVMArgInt}).v_handle);
  std::vector<char> input = read_file(input_path);
  TVMArrayHandle arr;
  check(TVMArrayAlloc(slot->shape, slot->ndim, slot->dtype.code, slot->dtype.bits,
                      slot->dtype.lanes, kDLCPU, 0, &arr),
        "TVMArrayAlloc");
  check(TVMArrayCopyFromBytes(arr, input.data(), input.size()), "TVMArrayCopyFromBytes");
  ex.get("set_input").call({value_of(int64_t{0}), value_of(arr)}, {kTVMArgInt, kTVMDLTensorHandle});
  TVMArrayFree(arr);
  ex.get("run").call({}, {});
  DLTensor* out = static_cast<DLTensor*>(ex.get("get_output").call({value_of(int64_t{0})},
                                                                   {kTVMArgInt}).v_handle);
  size_t nbytes = (out->dtype.bits * out->dtype.lanes + 7) / 8;
  for (int i = 0; i < out->ndim; ++i) nbytes *= static_cast<size_t>(out->shape[i]);
  std::vector<char> bytes(nbytes);
  check(TVMArrayCopyToBytes(out, bytes.data(), bytes.size()), "TVMArrayCopyToBytes");
  std::ofstream(output_path, std::ios::binary).write(bytes.data(), bytes.size());
  std::cout << "output 0: " << nbytes << " bytes written to " << output_path << "\n";
}

Module create(const Function& factory_or_create, std::vector<TVMValue> args,
              std::vector<int> codes) {
  int code = kTVMNullptr;
  TVMValue ret = factory_or_create.call(std::move(args), std::move(codes), &code);
  if (code != kTVMModuleHandle) throw std::runtime_error("expected a module back");
  return Module(ret.v_handle);
}

#ifndef EMBER_DEPLOY_SYSLIB
int deploy_library(const std::string& lib_path, const std::string& in, const std::string& out) {
  Module lib = Module::load(lib_path);
  TVMValue dev;
  dev.v_device.device_type = kDLCPU;
  dev.v_device.device_id = 0;
  Module ex = create(lib.get("default"), {dev}, {kDLDevice});
  run(ex, in, out);
  return 0;
}
#else
int deploy_syslib(const std::string& graph, const std::string& params, const std::string& in,
                  const std::string& out) {
  Module syslib = create(global("runtime.SystemLib"), {}, {});
  std::vector<char> json = read_file(graph);
  json.push_back('\0');
  Module ex = create(global("tvm.graph_executor.create"),
                     {value_of(json.data()), value_of(syslib.handle()), value_of(int64_t{kDLCPU}),
                      value_of(int64_t{0})},
                     {kTVMStr, kTVMModuleHandle, kTVMArgInt, kTVMArgInt});
  std::vector<char> blob = read_file(params);
  TVMByteArray bytes{blob.data(), blob.size()};
  ex.get("load_params").call({value_of(&bytes)}, {kTVMBytes});
  run(ex, in, out);
  return 0;
}
#endif

}  // namespace

int main(int argc, char** argv) {
  try {
#ifdef EMBER_DEPLOY_SYSLIB
    if (argc != 5) {
      std::cerr << "usage: cpp_deploy_syslib GRAPH.json PARAMS INPUT.bin OUTPUT.bin\n";
      return 2;
    }
    return deploy_syslib(argv[1], argv[2], argv[3], argv[4]);
#else
    if (argc != 4) {
      std::cerr << "usage: cpp_deploy LIB.so INPUT.bin OUTPUT.bin\n";
      return 2;
    }
    return deploy_library(argv[1], argv[2], argv[3]);
#endif
  } catch (const std::exception& err) {
    std::cerr << "cpp_deploy: " << err.what() << "\n";
    return 1;
  }
}
