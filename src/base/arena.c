#include "base/arena.h"

#include <stdalign.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct hrt_arena_chunk_s {
  hrt_arena_chunk_t* next;
  size_t used;
  size_t capacity;
  alignas(16) unsigned char data[];
};

void* hrt_arena_alloc(hrt_arena_t* arena, size_t size) {
  if (size > SIZE_MAX - 64) return NULL;
  size = (size + 15) & ~(size_t)15;
  hrt_arena_chunk_t* chunk = arena->chunks;
  if (!chunk || chunk->capacity - chunk->used < size) {
    size_t capacity = size > 16384 ? size : 16384;
    chunk = malloc(sizeof(*chunk) + capacity);
    if (!chunk) return NULL;
    chunk->used = 0;
    chunk->capacity = capacity;
    chunk->next = arena->chunks;
    arena->chunks = chunk;
  }
  void* ptr = chunk->data + chunk->used;
  chunk->used += size;
  memset(ptr, 0, size);
  return ptr;
}

hrt_status_t hrt_arena_allocate(hrt_arena_t* arena, size_t size,
                                const char* what, void** out_ptr) {
  void* ptr = hrt_arena_alloc(arena, size);
  if (!ptr) {
    return hrt_status_make(HRT_STATUS_RESOURCE_EXHAUSTED,
                           "out of host memory allocating %zu bytes for %s",
                           size, what);
  }
  *out_ptr = ptr;
  return HRT_OK;
}

char* hrt_arena_strndup(hrt_arena_t* arena, const char* text, size_t length) {
  char* copy = hrt_arena_alloc(arena, length + 1);
  if (copy) memcpy(copy, text, length);
  return copy;
}

void hrt_arena_deinit(hrt_arena_t* arena) {
  hrt_arena_chunk_t* chunk = arena->chunks;
  while (chunk) {
    hrt_arena_chunk_t* next = chunk->next;
    free(chunk);
    chunk = next;
  }
  arena->chunks = NULL;
}
