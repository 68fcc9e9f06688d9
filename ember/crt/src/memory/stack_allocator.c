/*
 * stack_allocator.c -- the LIFO arena behind TVMBackendAllocWorkspace (stack_allocator.h).
 *
 * Layout of one block, at offsets from the aligned base of the arena:
 *
 *   prev top | padding | header | payload (aligned, nbytes) | guard | next block ...
 *
 * The header sits right before the payload, so a free finds it from the pointer alone. Its
 * tag mixes a constant with the payload offset: a stale header (a freed block) or random
 * bytes at that place are recognised as "not a live block". Headers are copied byte by byte
 * (copy_bytes): the pool is the application's byte array, and a struct store into it would
 * break strict aliasing. No libc header is needed, so the file builds -ffreestanding.
 */
#include "ember/crt/stack_allocator.h"

#define ALIGN ((size_t)EMBER_CRT_WORKSPACE_ALIGNMENT)
#define GUARD_SIZE ((size_t)(EMBER_CRT_WORKSPACE_GUARD ? 4u : 0u)) /* sizeof(kGuard) */
#define TAG_LIVE 0x52424d45u /* "EMBR" */

typedef struct {
  uint64_t nbytes;  /* payload size as requested */
  size_t prev_top;  /* top of the arena before this block: restored by free */
  uint32_t tag;     /* TAG_LIVE ^ payload offset while live, 0 once freed */
  uint32_t index;   /* number of blocks live below this one */
} BlockHeader;

#define HEADER_SIZE sizeof(BlockHeader)

#if EMBER_CRT_WORKSPACE_GUARD
static const uint8_t kGuard[4] = {0xE5u, 0x4Du, 0xB3u, 0x7Au};
#endif

/* The compiler may turn this into memcpy, which platform.h allows; no other libc call. */
static void copy_bytes(void* dst, const void* src, size_t n) {
  uint8_t* d = (uint8_t*)dst;
  const uint8_t* s = (const uint8_t*)src;
  while (n-- != 0u) *d++ = *s++;
}

/* memcmp would be one more libc symbol for firmware to provide: compare by hand. */
static int guard_intact(const uint8_t* at) {
#if EMBER_CRT_WORKSPACE_GUARD
  size_t i;
  for (i = 0; i < sizeof(kGuard); ++i) {
    if (at[i] != kGuard[i]) return 0;
  }
#else
  (void)at;
#endif
  return 1;
}

static size_t align_up(size_t value) { return (value + ALIGN - 1u) & ~(ALIGN - 1u); }

static uint32_t tag_of(size_t payload_offset) { return TAG_LIVE ^ (uint32_t)payload_offset; }

tvm_crt_error_t ember_stack_allocator_init(EmberStackAllocator* alloc, void* pool, size_t size) {
  uintptr_t start, aligned;
  if (alloc == NULL) return kTvmErrorGenericInvalidArgument;
  alloc->base = NULL; /* until the pool is accepted, every allocation fails cleanly */
  alloc->size = alloc->top = alloc->peak = 0;
  alloc->live = 0;
  if (pool == NULL) return kTvmErrorWorkspaceInvalidPool;
  start = (uintptr_t)pool;
  aligned = (start + (uintptr_t)(ALIGN - 1u)) & ~(uintptr_t)(ALIGN - 1u);
  if (size < (size_t)(aligned - start)) return kTvmErrorWorkspaceInvalidPool;
  size -= (size_t)(aligned - start);
  /* Keep offsets far from SIZE_MAX so that offset + header + alignment cannot wrap. */
  if (size > (size_t)-1 / 2u) size = (size_t)-1 / 2u;
  if (size < align_up(HEADER_SIZE) + GUARD_SIZE) return kTvmErrorWorkspaceInvalidPool;
  alloc->base = (uint8_t*)pool + (aligned - start);
  alloc->size = size;
  return kTvmErrorNoError;
}

tvm_crt_error_t ember_stack_allocator_alloc(EmberStackAllocator* alloc, uint64_t nbytes,
                                            void** out) {
  BlockHeader header;
  size_t payload, end;
  if (alloc == NULL || out == NULL) return kTvmErrorGenericInvalidArgument;
  if (alloc->base == NULL) return kTvmErrorWorkspaceNotInitialized;
  payload = align_up(alloc->top + HEADER_SIZE);
  /* payload <= SIZE_MAX / 2 + header + alignment (see init): the sums cannot wrap */
  if (payload + GUARD_SIZE > alloc->size ||
      nbytes > (uint64_t)(alloc->size - payload - GUARD_SIZE)) {
    return kTvmErrorWorkspaceExhausted;
  }
  end = payload + (size_t)nbytes + GUARD_SIZE;
  header.nbytes = nbytes;
  header.prev_top = alloc->top;
  header.tag = tag_of(payload);
  header.index = alloc->live;
  copy_bytes(alloc->base + payload - HEADER_SIZE, &header, HEADER_SIZE);
#if EMBER_CRT_WORKSPACE_GUARD
  copy_bytes(alloc->base + payload + (size_t)nbytes, kGuard, sizeof(kGuard));
#endif
  alloc->top = end;
  if (end > alloc->peak) alloc->peak = end;
  alloc->live += 1u;
  *out = alloc->base + payload;
  return kTvmErrorNoError;
}

tvm_crt_error_t ember_stack_allocator_free(EmberStackAllocator* alloc, void* ptr) {
  BlockHeader header;
  uintptr_t base, addr;
  size_t offset;
  int guard_ok;
  if (alloc == NULL) return kTvmErrorGenericInvalidArgument;
  if (alloc->base == NULL) return kTvmErrorWorkspaceNotInitialized;
  base = (uintptr_t)alloc->base;
  addr = (uintptr_t)ptr;
  /* Only the live part of the arena can hold a block: [header, top). */
  if (ptr == NULL || addr < base + HEADER_SIZE || addr - base > alloc->top) {
    return kTvmErrorWorkspaceFreeInvalid;
  }
  offset = (size_t)(addr - base);
  if (offset % ALIGN != 0u) return kTvmErrorWorkspaceFreeInvalid;
  copy_bytes(&header, alloc->base + offset - HEADER_SIZE, HEADER_SIZE);
  if (header.tag != tag_of(offset) || header.prev_top > offset - HEADER_SIZE ||
      header.nbytes > (uint64_t)(alloc->top - offset)) {
    return kTvmErrorWorkspaceFreeInvalid;
  }
  if (offset + (size_t)header.nbytes + GUARD_SIZE != alloc->top) {
    return kTvmErrorWorkspaceFreeNotLast;
  }
  guard_ok = guard_intact(alloc->base + offset + (size_t)header.nbytes);
  header.tag = 0u; /* a second free of this block is now "not a live block" */
  copy_bytes(alloc->base + offset - HEADER_SIZE, &header, HEADER_SIZE);
  alloc->top = header.prev_top;
  alloc->live -= 1u;
  return guard_ok ? kTvmErrorNoError : kTvmErrorWorkspaceCorrupted;
}

void ember_stack_allocator_reset(EmberStackAllocator* alloc) {
  /* Headers of the dropped blocks stay in the pool, but above top: free rejects them. */
  if (alloc == NULL) return;
  alloc->top = 0u;
  alloc->live = 0u;
}

tvm_crt_error_t ember_stack_allocator_release_to(EmberStackAllocator* alloc,
                                                 EmberStackAllocatorStats mark) {
  if (alloc == NULL || alloc->base == NULL || mark.used > alloc->top || mark.live > alloc->live ||
      (mark.live == alloc->live && mark.used != alloc->top)) {
    return kTvmErrorGenericInvalidArgument;
  }
  alloc->top = mark.used;
  alloc->live = mark.live;
  return kTvmErrorNoError;
}

size_t ember_stack_allocator_available(const EmberStackAllocator* alloc) {
  size_t payload;
  if (alloc == NULL || alloc->base == NULL) return 0u;
  payload = align_up(alloc->top + HEADER_SIZE);
  if (payload + GUARD_SIZE > alloc->size) return 0u;
  return alloc->size - payload - GUARD_SIZE;
}

EmberStackAllocatorStats ember_stack_allocator_stats(const EmberStackAllocator* alloc) {
  EmberStackAllocatorStats stats = {0u, 0u, 0u, 0u};
  if (alloc == NULL || alloc->base == NULL) return stats;
  stats.size = alloc->size;
  stats.used = alloc->top;
  stats.peak = alloc->peak;
  stats.live = alloc->live;
  return stats;
}
