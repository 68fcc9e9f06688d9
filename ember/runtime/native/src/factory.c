/*
 * factory.c -- the module blob an exported library embeds (__ember_dev_mblob: see
 * ember/runtime/loaders.py) and the executor factories inside it (ember/runtime/
 * executor_factory.py). Every length is checked against the end of its buffer first.
 *
 * A factory answers "default" and its module name (create an executor on a device),
 * "get_graph_json"/"get_executor_config", "get_model_metadata" (AOT), "get_lib" and
 * "get_params" (the params byte format, kTVMBytes).
 */
#include <stdlib.h>
#include <string.h>

#include "ember/crt/json.h"
#include "native.h"

static const uint8_t kBlobMagic[8] = {'E', 'M', 'B', 'E', 'R', 'M', 'B', 0};
enum { kBlobVersion = 2 };

static const uint8_t kFactoryMagic[8] = {0x89, 'E', 'M', 'B', 'E', 'X', 'F', '\n'};

typedef struct {
  EmberModule base;
  int aot;
  char* mod_name;
  char* config; /* graph JSON or AOT metadata, NUL-terminated */
  size_t config_len;
  uint8_t* params;
  TVMByteArray params_bytes;
} Factory;

/* A cursor over bytes that fails (with the file and what was read) instead of overrunning. */
typedef struct {
  const uint8_t* data;
  uint64_t size, pos;
  const char* path;
} Reader;

static int truncated(Reader* r, const char* what) {
  ember_crt_error(kTvmErrorModuleLoadFailed, "TVMModLoadFromFile: ");
  ember_crt_error_append(r->path);
  ember_crt_error_append(": module blob truncated reading ");
  ember_crt_error_append(what);
  ember_crt_error_append(" at offset ");
  ember_crt_error_append_u64(r->pos);
  return kTvmErrorModuleLoadFailed;
}

static int take(Reader* r, uint64_t n, const char* what, const uint8_t** out) {
  if (n > r->size - r->pos) return truncated(r, what);
  *out = r->data + r->pos;
  r->pos += n;
  return 0;
}

static int take_uint(Reader* r, int nbytes, const char* what, uint64_t* out) {
  const uint8_t* p;
  if (take(r, (uint64_t)nbytes, what, &p) != 0) return kTvmErrorModuleLoadFailed;
  *out = ember_read_le(p, nbytes);
  return 0;
}

static int fail(const char* path, const char* what, const char* problem) {
  ember_crt_error(kTvmErrorModuleLoadFailed, "TVMModLoadFromFile: ");
  ember_crt_error_append(path);
  ember_crt_error_append(": ");
  ember_crt_error_append(what);
  ember_crt_error_append(problem);
  return kTvmErrorModuleLoadFailed;
}

/* ---- the factory module ---------------------------------------------------------------------- */

static int factory_create(TVMValue* args, int* codes, int n, TVMValue* ret, int* ret_code,
                          void* res) {
  Factory* f = (Factory*)res;
  EmberModule* ex = NULL;
  DLDevice dev;
  int rc;
  if (ember_arg_count("factory.create", n, 1, 2) != 0) return kTvmErrorFunctionCallNumArgs;
  if (ember_arg_device("factory.create", args, codes, n, 0, &dev) != 0) {
    return ember_crt_last_error_code();
  }
  if (f->base.num_imports == 0) {
    return ember_crt_error(kTvmErrorExecutorNotReady, "factory.create: the factory has no "
                           "kernel library");
  }
  rc = (f->aot ? ember_aot_executor_module : ember_graph_executor_module)(
      f->config, f->config_len, f->base.imports[0], dev, f->params, f->params_bytes.size,
      &f->base.obj, &ex);
  if (rc != 0) return rc;
  ret->v_handle = ex;
  *ret_code = kTVMModuleHandle;
  return 0;
}

static int factory_config(TVMValue* args, int* codes, int n, TVMValue* ret, int* ret_code,
                          void* res) {
  (void)args, (void)codes;
  if (ember_arg_count("get_executor_config", n, 0, 0) != 0) return kTvmErrorFunctionCallNumArgs;
  ret->v_str = ((Factory*)res)->config;
  *ret_code = kTVMStr;
  return 0;
}

static int factory_lib(TVMValue* args, int* codes, int n, TVMValue* ret, int* ret_code,
                       void* res) {
  Factory* f = (Factory*)res;
  (void)args, (void)codes;
  if (ember_arg_count("get_lib", n, 0, 0) != 0) return kTvmErrorFunctionCallNumArgs;
  if (f->base.num_imports == 0) {
    return ember_crt_error(kTvmErrorExecutorNotReady, "get_lib: the factory has no library");
  }
  ember_object_retain(&f->base.imports[0]->obj);
  ret->v_handle = f->base.imports[0];
  *ret_code = kTVMModuleHandle;
  return 0;
}

static int factory_params(TVMValue* args, int* codes, int n, TVMValue* ret, int* ret_code,
                          void* res) {
  (void)args, (void)codes;
  if (ember_arg_count("get_params", n, 0, 0) != 0) return kTvmErrorFunctionCallNumArgs;
  ret->v_handle = &((Factory*)res)->params_bytes;
  *ret_code = kTVMBytes;
  return 0;
}

static int factory_get_local(EmberModule* self, const char* name, EmberFunction** out) {
  Factory* f = (Factory*)self;
  TVMBackendPackedCFunc fn = NULL;
  if (strcmp(name, "default") == 0 || strcmp(name, f->mod_name) == 0) {
    fn = factory_create;
  } else if (strcmp(name, "get_executor_config") == 0 ||
             strcmp(name, f->aot ? "get_model_metadata" : "get_graph_json") == 0) {
    fn = factory_config;
  } else if (strcmp(name, "get_lib") == 0) {
    fn = factory_lib;
  } else if (strcmp(name, "get_params") == 0 || (!f->aot && strcmp(name, "get_graph_params") == 0)) {
    fn = factory_params;
  }
  if (fn == NULL) return 1;
  *out = ember_function_new(fn, f, &self->obj, NULL);
  return *out != NULL ? 0 : kTvmErrorExecutorOutOfMemory;
}

static void factory_release(EmberModule* self) {
  Factory* f = (Factory*)self;
  free(f->mod_name);
  free(f->config);
  free(f->params);
}

/* A decoded JSON string field of the header, NUL-terminated (malloc). */
static char* header_string(const EmberJson* j, const char* key) {
  size_t v, n;
  char* out;
  if (!ember_json_find(j, 0, key, &v) || ember_json_kind(j, v) != '"') return NULL;
  n = ember_json_unescape(j, v, NULL, 0);
  if ((out = (char*)malloc(n + 1)) == NULL) return NULL;
  ember_json_unescape(j, v, out, n);
  out[n] = '\0';
  return out;
}

/* The sections listed by the header ([[name, length], ...]): params are copied. */
static int read_sections(Factory* f, const EmberJson* j, Reader* r) {
  size_t list, e, name, len_pos;
  int more;
  if (!ember_json_find(j, 0, "sections", &list) || ember_json_kind(j, list) != '[') {
    return fail(r->path, "executor factory: ", "the header has no sections list");
  }
  for (more = ember_json_first(j, list, &e); more; more = ember_json_next(j, e, &e)) {
    const uint8_t* data;
    int64_t len;
    if (!ember_json_first(j, e, &name) || !ember_json_next(j, name, &len_pos) ||
        ember_json_int(j, len_pos, &len) != 0 || len < 0) {
      return fail(r->path, "executor factory: ", "a section is not [name, length]");
    }
    if (take(r, (uint64_t)len, "a factory section", &data) != 0) return kTvmErrorModuleLoadFailed;
    if (ember_json_string_is(j, name, "params") && len > 0) {
      if ((f->params = (uint8_t*)malloc((size_t)len)) == NULL) return kTvmErrorExecutorOutOfMemory;
      memcpy(f->params, data, (size_t)len);
      f->params_bytes.data = (const char*)f->params;
      f->params_bytes.size = (size_t)len;
    }
  }
  if (r->pos != r->size) return fail(r->path, "executor factory: ", "unexpected trailing bytes");
  return 0;
}

static int load_factory(const char* path, const uint8_t* data, uint64_t size, EmberModule** out) {
  Reader r = {data, size, 0, path};
  const uint8_t *magic, *text;
  uint64_t version, reserved, hlen;
  EmberJson j;
  size_t v;
  Factory* f;
  int rc;
  if (take(&r, 8, "the factory magic", &magic) != 0 || take_uint(&r, 4, "the version", &version) ||
      take_uint(&r, 4, "the header", &reserved) || take_uint(&r, 8, "the header", &hlen)) {
    return kTvmErrorModuleLoadFailed;
  }
  if (memcmp(magic, kFactoryMagic, 8) != 0) return fail(path, "executor factory: ", "bad magic");
  if (version != 1u) {
    return fail(path, "executor factory: ", "format version is not 1 (the one this runtime reads)");
  }
  if (take(&r, hlen, "the factory header", &text) != 0) return kTvmErrorModuleLoadFailed;
  if (ember_json_validate("executor factory header", (const char*)text, (size_t)hlen, &j) != 0) {
    return kTvmErrorModuleLoadFailed;
  }
  if (!ember_json_find(&j, 0, "executor", &v) ||
      !(ember_json_string_is(&j, v, "graph") || ember_json_string_is(&j, v, "aot"))) {
    return fail(path, "executor factory: ", "the executor is not 'graph' or 'aot' (the VM runs "
                "only under the Python runtime)");
  }
  if ((f = (Factory*)calloc(1, sizeof(Factory))) == NULL) return kTvmErrorExecutorOutOfMemory;
  ember_module_init(&f->base, "executor_factory", factory_get_local, factory_release);
  f->aot = ember_json_string_is(&j, v, "aot");
  f->mod_name = header_string(&j, "mod_name");
  f->config = header_string(&j, "config");
  if (f->mod_name == NULL || f->config == NULL) {
    ember_object_release(&f->base.obj);
    return fail(path, "executor factory: ", "the header lacks mod_name or config strings");
  }
  f->config_len = strlen(f->config);
  if ((rc = read_sections(f, &j, &r)) != 0) {
    ember_object_release(&f->base.obj);
    return rc;
  }
  *out = &f->base;
  return 0;
}

/* ---- the blob -------------------------------------------------------------------------------- */

/* The root module of libraries saved by ember.compile / `ember compile` (CompiledModel.save). */
static const char kRecordKey[] = "EmberModel";

static int load_node(EmberModule* lib, Reader* r, uint32_t i, EmberModule** out) {
  const uint8_t *key, *data;
  uint64_t key_len, len;
  if (take_uint(r, 4, "a module type key length", &key_len) != 0 ||
      take(r, key_len, "a module type key", &key) != 0 ||
      take_uint(r, 8, "a module length", &len) != 0 || take(r, len, "a module", &data) != 0) {
    return kTvmErrorModuleLoadFailed;
  }
  if (key_len == 4u && memcmp(key, "_lib", 4) == 0) {
    ember_object_retain(&lib->obj);
    *out = lib;
    return 0;
  }
  if ((key_len == 20u && memcmp(key, "GraphExecutorFactory", 20) == 0) ||
      (key_len == 18u && memcmp(key, "AotExecutorFactory", 18) == 0)) {
    return load_factory(r->path, data, len, out);
  }
  if (key_len == sizeof(kRecordKey) - 1u && memcmp(key, kRecordKey, key_len) == 0) {
    /* ember.compile's record (JSON for the Python API): an empty module; loading returns
       the factory it imports (ember_blob_load) */
    EmberModule* rec = (EmberModule*)calloc(1, sizeof(EmberModule));
    if (rec == NULL) return kTvmErrorExecutorOutOfMemory;
    ember_module_init(rec, kRecordKey, NULL, NULL);
    *out = rec;
    return 0;
  }
  ember_crt_error(kTvmErrorModuleLoadFailed, "TVMModLoadFromFile: ");
  ember_crt_error_append(r->path);
  ember_crt_error_append(": module ");
  ember_crt_error_append_u64(i);
  ember_crt_error_append(" has type ");
  ember_error_append_str((const char*)key, (uint32_t)(key_len > 64u ? 64u : key_len));
  ember_crt_error_append(", which the native runtime cannot load (it runs graph and AOT "
                         "models; the VM runs only under the Python runtime)");
  return kTvmErrorModuleLoadFailed;
}

/* AOT factories tell their library its symbol prefix: tvmgen_<mod_name as a C identifier>. */
static void note_prefix(EmberModule* mod) {
  Factory* f = (Factory*)mod;
  char prefix[EMBER_CRT_MAX_NAME_LENGTH + 1] = "tvmgen_";
  size_t k, n = strlen(f->mod_name);
  if (mod->get_local != factory_get_local || !f->aot || mod->num_imports == 0 ||
      n + 8u > sizeof(prefix)) {
    return;
  }
  for (k = 0; k < n; ++k) {
    char c = f->mod_name[k];
    int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    prefix[7 + k] = ok ? c : '_';
  }
  prefix[7 + n] = '\0';
  ember_library_set_model_prefix(mod->imports[0], prefix);
}

static int link_imports(Reader* r, EmberModule** mods, uint32_t count) {
  uint32_t i;
  for (i = 0; i < count; ++i) {
    uint64_t kids, k, child;
    if (take_uint(r, 4, "an import count", &kids) != 0) return kTvmErrorModuleLoadFailed;
    for (k = 0; k < kids; ++k) {
      if (take_uint(r, 4, "an import", &child) != 0) return kTvmErrorModuleLoadFailed;
      if (child >= count) return fail(r->path, "module blob: ", "an import is out of range");
      if (ember_module_import(mods[i], mods[child]) != 0) {
        return fail(r->path, "module blob: ", "the imports make a cycle");
      }
    }
    note_prefix(mods[i]);
  }
  return r->pos == r->size ? 0 : fail(r->path, "module blob: ", "unexpected trailing bytes");
}

int ember_blob_load(EmberModule* lib, const char* path, const uint8_t* blob, uint64_t size,
                    EmberModule** out) {
  Reader r = {blob, size, 0, path};
  const uint8_t* magic;
  uint64_t version, reserved, length, checksum, reserved2, count;
  EmberModule** mods;
  uint32_t i, made = 0;
  int rc;
  if (take(&r, 8, "the blob magic", &magic) != 0 || take_uint(&r, 4, "the version", &version) ||
      take_uint(&r, 4, "the header", &reserved) || take_uint(&r, 8, "the length", &length) ||
      take_uint(&r, 4, "the checksum", &checksum) || take_uint(&r, 4, "the header", &reserved2)) {
    return kTvmErrorModuleLoadFailed;
  }
  if (memcmp(magic, kBlobMagic, 8) != 0) return fail(path, "__ember_dev_mblob: ", "bad magic");
  if (version != kBlobVersion) {
    return fail(path, "__ember_dev_mblob: ", "module blob version is not 2 (the one this "
                "runtime reads); rebuild the library with this ember");
  }
  if (reserved != 0u || reserved2 != 0u) {
    return fail(path, "__ember_dev_mblob: ", "a reserved header field is not 0 (corrupt)");
  }
  if (length != size - r.pos) {
    return fail(path, "__ember_dev_mblob: ", "the payload length disagrees with the symbol size");
  }
  if (ember_crc32(blob + r.pos, (size_t)length) != (uint32_t)checksum) {
    return fail(path, "__ember_dev_mblob: ", "corrupt module blob: checksum mismatch (the "
                "embedded graph, metadata or params changed after export)");
  }
  if (take_uint(&r, 4, "the module count", &count) != 0) return kTvmErrorModuleLoadFailed;
  if (count == 0u || count > (size - r.pos) / 16u) {
    return fail(path, "module blob: ", "implausible module count");
  }
  if ((mods = (EmberModule**)calloc((size_t)count, sizeof(EmberModule*))) == NULL) {
    return kTvmErrorExecutorOutOfMemory;
  }
  rc = 0;
  for (i = 0; i < count && rc == 0; ++i) {
    if ((rc = load_node(lib, &r, i, &mods[i])) == 0) ++made;
  }
  if (rc == 0) rc = link_imports(&r, mods, (uint32_t)count);
  if (rc == 0) {
    EmberModule* root = mods[0];
    if (strcmp(root->type_key, kRecordKey) == 0 && root->num_imports == 1) {
      root = root->imports[0]; /* a saved CompiledModel: its executor factory */
    }
    *out = root;
    ember_object_retain(&root->obj);
  }
  for (i = made; i > 0; --i) ember_object_release(&mods[i - 1]->obj);
  free(mods);
  return rc;
}
