/*
 * workspace.c -- TVMBackendAllocWorkspace / TVMBackendFreeWorkspace over one static arena.
 *
 * The application hands over a buffer with ember_crt_init; generated code allocates and
 * frees scratch memory from it in LIFO order (stack_allocator.c). Misuse (a free out of
 * order, an unknown pointer, an exhausted arena) is an error code plus a message; an overrun
 * block is fatal (TVMPlatformAbort), since the memory after it may belong to the caller.
 *
 * This file is its own object in libembercrt.a: an application that defines its own
 * TVMBackendAllocWorkspace/TVMBackendFreeWorkspace simply does not link it.
 */
#include "internal.h"

static EmberStackAllocator g_arena;

static int check_device(const char* who, int device_type, int device_id) {
  if (device_type == kDLCPU) return 0;
  ember_crt_error(kTvmErrorWorkspaceUnsupportedDevice, who);
  ember_crt_error_append(": device type ");
  ember_crt_error_append_i64(device_type);
  ember_crt_error_append(" (id ");
  ember_crt_error_append_i64(device_id);
  ember_crt_error_append(") is not supported; the C runtime allocates on the CPU (type 1) only");
  return kTvmErrorWorkspaceUnsupportedDevice;
}

static void append_usage(void) {
  EmberStackAllocatorStats stats = ember_stack_allocator_stats(&g_arena);
  ember_crt_error_append_u64(stats.used);
  ember_crt_error_append(" of ");
  ember_crt_error_append_u64(stats.size);
  ember_crt_error_append(" bytes in use by ");
  ember_crt_error_append_u64(stats.live);
  ember_crt_error_append(" block(s)");
}

tvm_crt_error_t ember_crt_init(void* pool, size_t size) {
  EmberStackAllocator fresh;
  tvm_crt_error_t rc;
  if (g_arena.live != 0u) {
    ember_crt_error(kTvmErrorWorkspaceBusy, "ember_crt_init: the workspace arena still has ");
    ember_crt_error_append_u64(g_arena.live);
    ember_crt_error_append(" live block(s); free them before moving to another buffer");
    return kTvmErrorWorkspaceBusy;
  }
  rc = ember_stack_allocator_init(&fresh, pool, size);
  if (rc != kTvmErrorNoError) {
    ember_crt_error(rc, "ember_crt_init: the pool must be non-NULL and hold at least one block"
                        " (alignment ");
    ember_crt_error_append_u64(EMBER_CRT_WORKSPACE_ALIGNMENT);
    ember_crt_error_append(" plus a header); got ");
    ember_crt_error_append_u64(size);
    ember_crt_error_append(pool == NULL ? " bytes at NULL" : " bytes");
    return rc;
  }
  g_arena = fresh;
  ember_crt_error(kTvmErrorNoError, "");
  return kTvmErrorNoError;
}

void ember_crt_workspace_reset(void) { ember_stack_allocator_reset(&g_arena); }

tvm_crt_error_t ember_crt_workspace_release_to(EmberStackAllocatorStats mark) {
  tvm_crt_error_t rc = ember_stack_allocator_release_to(&g_arena, mark);
  if (rc != kTvmErrorNoError) {
    ember_crt_error(rc, "ember_crt_workspace_release_to: the mark (");
    ember_crt_error_append_u64(mark.live);
    ember_crt_error_append(" blocks, ");
    ember_crt_error_append_u64(mark.used);
    ember_crt_error_append(" bytes) is not below the arena's state (");
    append_usage();
    ember_crt_error_append(")");
  }
  return rc;
}

EmberStackAllocatorStats ember_crt_workspace_stats(void) {
  return ember_stack_allocator_stats(&g_arena);
}

void* TVMBackendAllocWorkspace(int device_type, int device_id, uint64_t nbytes,
                               int dtype_code_hint, int dtype_bits_hint) {
  void* ptr = NULL;
  tvm_crt_error_t rc;
  (void)dtype_code_hint;
  (void)dtype_bits_hint;
  if (check_device("TVMBackendAllocWorkspace", device_type, device_id) != 0) return NULL;
  rc = ember_stack_allocator_alloc(&g_arena, nbytes, &ptr);
  if (rc == kTvmErrorNoError) return ptr;
  if (rc == kTvmErrorWorkspaceNotInitialized) {
    ember_crt_error(rc, "TVMBackendAllocWorkspace: no workspace arena; call "
                        "ember_crt_init(pool, size) before running the model");
    return NULL;
  }
  ember_crt_error(rc, "TVMBackendAllocWorkspace: workspace arena exhausted: requested ");
  ember_crt_error_append_u64(nbytes);
  ember_crt_error_append(" bytes, ");
  ember_crt_error_append_u64(ember_stack_allocator_available(&g_arena));
  ember_crt_error_append(" available (");
  append_usage();
  ember_crt_error_append("); give ember_crt_init a larger pool");
  return NULL;
}

int TVMBackendFreeWorkspace(int device_type, int device_id, void* ptr) {
  tvm_crt_error_t rc;
  if (check_device("TVMBackendFreeWorkspace", device_type, device_id) != 0) {
    return kTvmErrorWorkspaceUnsupportedDevice;
  }
  if (ptr == NULL) return 0; /* as free(NULL), and as backend.c */
  rc = ember_stack_allocator_free(&g_arena, ptr);
  switch (rc) {
    case kTvmErrorNoError:
      return 0;
    case kTvmErrorWorkspaceNotInitialized:
      ember_crt_error(rc, "TVMBackendFreeWorkspace: no workspace arena (ember_crt_init was not "
                          "called), so this pointer was not allocated by it");
      break;
    case kTvmErrorWorkspaceFreeNotLast:
      ember_crt_error(rc, "TVMBackendFreeWorkspace: blocks must be freed in reverse order of "
                          "allocation (LIFO); this block is not the most recent one (");
      append_usage();
      ember_crt_error_append(")");
      break;
    case kTvmErrorWorkspaceCorrupted:
      ember_crt_error(kTvmErrorPlatformWorkspaceCorrupted,
                      "TVMBackendFreeWorkspace: a workspace block was written past its end "
                      "(its guard bytes changed); memory after it may be corrupt");
      TVMPlatformAbort(kTvmErrorPlatformWorkspaceCorrupted);
    default:
      ember_crt_error(rc, "TVMBackendFreeWorkspace: the pointer is not a live block of the "
                          "workspace arena (freed twice, or not from TVMBackendAllocWorkspace)");
      break;
  }
  return rc;
}
