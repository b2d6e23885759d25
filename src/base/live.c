#include "base/live.h"

#include <stdatomic.h>

static atomic_int_fast64_t hrt_live_counts[HRT_LIVE_KIND_COUNT_];

static const char* const hrt_live_names[HRT_LIVE_KIND_COUNT_] = {
    "instance",    "device",        "buffer",        "bufferView",
    "executable",  "commandBuffer", "semaphore",     "submission",
    "module",      "context",       "invocation",    "blockPool",
    "cachedBlock", "cachedBytes",   "recordedTrace", "recordedBytes",
};

void hrt_live_add(hrt_live_kind_t kind, int64_t delta) {
  atomic_fetch_add_explicit(&hrt_live_counts[kind], delta,
                            memory_order_relaxed);
}

int64_t hrt_live_count(hrt_live_kind_t kind) {
  return atomic_load_explicit(&hrt_live_counts[kind], memory_order_relaxed);
}

const char* hrt_live_kind_name(hrt_live_kind_t kind) {
  return hrt_live_names[kind];
}
