// Copies whose destination is not wanted in this core's caches.
//
// Why: a trace's copy goes into a block the sink hands to JavaScript, which
// reads it (if at all) later and usually on another core; when the block is
// not in the caches, ordinary stores first read every destination line from
// memory, which halves the copy's speed (BENCHMARKS.md, issue 25). Stores
// that bypass the caches write whole lines without reading them.
//
// Threads: any; the copy is complete and visible to any thread that later
// synchronizes with the caller (it ends with a store fence).
#ifndef HRT_BASE_COPY_H_
#define HRT_BASE_COPY_H_

#include <stdbool.h>
#include <stddef.h>

// memcpy of `length` bytes between ranges that do not overlap, with stores
// that bypass the caches where the platform has them (x86-64); memcpy
// elsewhere and for lengths under HRT_COPY_STREAMING_MIN_BYTES.
void hrt_copy_streaming(void* dst, const void* src, size_t length);

// hrt_copy_streaming when `streaming`, else memcpy.
void hrt_copy(void* dst, const void* src, size_t length, bool streaming);

// Below this a streaming copy is a memcpy: the destination of a small copy
// is as likely to be cached, and the fence costs more than it saves.
#define HRT_COPY_STREAMING_MIN_BYTES ((size_t)16 * 1024)

#endif  // HRT_BASE_COPY_H_
