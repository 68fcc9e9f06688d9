/*
 * stack_allocator.h -- a LIFO allocator over a buffer the application owns.
 *
 * Generated operators free their workspace in the reverse order of allocation, so a stack
 * is all they need: allocation bumps an offset, freeing the most recent block pops it, and
 * the arena never fragments. Each block is preceded by a small header (size, previous top,
 * a tag) so that a free out of order, a double free or a foreign pointer is reported instead
 * of silently corrupting the stack, and is followed by a guard (EMBER_CRT_WORKSPACE_GUARD)
 * that detects overruns.
 *
 * TVMBackendAllocWorkspace uses one instance (see crt.h: ember_crt_init); applications may
 * create more for their own buffers. No function here sets the last error message: callers
 * add context (workspace.c does).
 */
#ifndef EMBER_CRT_STACK_ALLOCATOR_H_
#define EMBER_CRT_STACK_ALLOCATOR_H_

#include <stddef.h>
#include <stdint.h>

#include "crt_config.h"
#include "error_codes.h"

#ifdef __cplusplus
extern "C" {
#endif

/*! \brief State of one arena; treat as opaque, read with ember_stack_allocator_stats. */
typedef struct {
  uint8_t* base;  /* first aligned byte of the buffer */
  size_t size;    /* usable bytes from base */
  size_t top;     /* offset of the first free byte */
  size_t peak;    /* highest top since init */
  uint32_t live;  /* blocks allocated and not yet freed */
} EmberStackAllocator;

/*! \brief Usage of an arena, for sizing it: peak is what the program needed at most. */
typedef struct {
  size_t size;    /* usable bytes (the buffer minus the alignment of its start) */
  size_t used;    /* bytes in use now, headers and padding included */
  size_t peak;    /* most bytes ever in use at once */
  uint32_t live;  /* blocks not yet freed */
} EmberStackAllocatorStats;

/*!
 * \brief Make an arena over pool[0, size). The start is rounded up to the alignment.
 * \return kTvmErrorWorkspaceInvalidPool if pool is NULL or too small to hold one block.
 */
tvm_crt_error_t ember_stack_allocator_init(EmberStackAllocator* alloc, void* pool, size_t size);

/*!
 * \brief Take nbytes (0 allowed: a unique pointer) aligned to EMBER_CRT_WORKSPACE_ALIGNMENT.
 * \return kTvmErrorWorkspaceExhausted (out untouched) when the block does not fit.
 */
tvm_crt_error_t ember_stack_allocator_alloc(EmberStackAllocator* alloc, uint64_t nbytes,
                                            void** out);

/*!
 * \brief Give back the most recent block.
 * \return kTvmErrorWorkspaceFreeNotLast for a live block that is not the most recent,
 *   kTvmErrorWorkspaceFreeInvalid for a pointer that is not a live block of this arena,
 *   kTvmErrorWorkspaceCorrupted when the block's guard was overwritten (the block is
 *   still freed, so that the arena stays usable for reporting).
 */
tvm_crt_error_t ember_stack_allocator_free(EmberStackAllocator* alloc, void* ptr);

/*! \brief Drop every live block at once (after a failed run); the peak is kept. */
void ember_stack_allocator_reset(EmberStackAllocator* alloc);

/*!
 * \brief Drop the blocks allocated since mark (an earlier ember_stack_allocator_stats of the
 * same arena), keeping the ones below it: what a failed call left behind is discarded while
 * the caller's own blocks stay. \return kTvmErrorGenericInvalidArgument (nothing changed) when
 * mark is not below the current state (blocks under it were freed since).
 */
tvm_crt_error_t ember_stack_allocator_release_to(EmberStackAllocator* alloc,
                                                 EmberStackAllocatorStats mark);

/*!
 * \brief The largest nbytes that ember_stack_allocator_alloc would accept now; 0 also when
 * not even a 0-byte block fits (its header needs room too).
 */
size_t ember_stack_allocator_available(const EmberStackAllocator* alloc);

/*! \brief Current usage. */
EmberStackAllocatorStats ember_stack_allocator_stats(const EmberStackAllocator* alloc);

#ifdef __cplusplus
}  /* extern "C" */
#endif
#endif /* EMBER_CRT_STACK_ALLOCATOR_H_ */
