// A bump allocator: many small allocations freed together.
//
// Allocations are 16-byte aligned and zero-filled, and live until
// hrt_arena_deinit(). Not thread-safe: one owner at a time.
#ifndef HRT_BASE_ARENA_H_
#define HRT_BASE_ARENA_H_

#include <stddef.h>

#include "base/status.h"

typedef struct hrt_arena_chunk_s hrt_arena_chunk_t;

typedef struct hrt_arena_s {
  hrt_arena_chunk_t* chunks;
} hrt_arena_t;

#define HRT_ARENA_INIT \
  { NULL }

// NULL when out of memory.
void* hrt_arena_alloc(hrt_arena_t* arena, size_t size);
// RESOURCE_EXHAUSTED naming `what` when out of memory.
hrt_status_t hrt_arena_allocate(hrt_arena_t* arena, size_t size,
                                const char* what, void** out_ptr) HRT_MUST_USE;
// A NUL-terminated copy of `length` bytes of `text`; NULL when out of memory.
char* hrt_arena_strndup(hrt_arena_t* arena, const char* text, size_t length);
void hrt_arena_deinit(hrt_arena_t* arena);

#endif  // HRT_BASE_ARENA_H_
