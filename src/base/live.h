// Process-wide counts of live runtime objects, by kind.
//
// Every create increments its kind and every destroy decrements it, on
// whatever thread those run. Tests use the counts to prove that every object
// is destroyed on every path (including from JavaScript, after GC).
// Two kinds count memory held for reuse rather than objects: the blocks that
// local devices keep cached (hal/local/local_allocator.h) and their bytes.
// Flight recorders count the traces they hold and the bytes of their copies
// (modules/sinks/recorder_sink.h).
#ifndef HRT_BASE_LIVE_H_
#define HRT_BASE_LIVE_H_

#include <stdint.h>

typedef enum hrt_live_kind_e {
  HRT_LIVE_INSTANCE = 0,
  HRT_LIVE_DEVICE,
  HRT_LIVE_BUFFER,
  HRT_LIVE_BUFFER_VIEW,
  HRT_LIVE_EXECUTABLE,
  HRT_LIVE_COMMAND_BUFFER,
  HRT_LIVE_SEMAPHORE,
  HRT_LIVE_SUBMISSION,
  HRT_LIVE_MODULE,
  HRT_LIVE_CONTEXT,
  HRT_LIVE_INVOCATION,
  HRT_LIVE_BLOCK_POOL,
  HRT_LIVE_CACHED_BLOCK,
  HRT_LIVE_CACHED_BYTES,
  HRT_LIVE_RECORDED_TRACE,
  HRT_LIVE_RECORDED_BYTES,
  HRT_LIVE_KIND_COUNT_,
} hrt_live_kind_t;

void hrt_live_add(hrt_live_kind_t kind, int64_t delta);
int64_t hrt_live_count(hrt_live_kind_t kind);
// "device", "buffer", ... (keys of halrt.liveObjects() in JavaScript).
const char* hrt_live_kind_name(hrt_live_kind_t kind);

#endif  // HRT_BASE_LIVE_H_
