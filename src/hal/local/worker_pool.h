// A fixed pool of worker threads that runs the items of one job at a time.
//
// Threads: hrt_worker_pool_run() is called by one thread at a time (a local
// device's queue thread, the runner) and returns once every item has run.
// Items run concurrently and in any order on the runner, as worker 0, and
// on worker_count - 1 threads; `worker_id` identifies the worker (0 <=
// worker_id < worker_count) so items may use per-worker scratch. The
// runner waits for the items, not for each thread: a thread that finds
// every item taken (or is off its core meanwhile) holds nothing up. Between
// jobs the threads, and the runner waiting for the last items, spin a while
// before they sleep (worker_pool.c). The threads give way to the JS thread
// (hrt_thread_give_way). destroy() joins the threads; call it from a thread
// that is not one.
#ifndef HRT_HAL_LOCAL_WORKER_POOL_H_
#define HRT_HAL_LOCAL_WORKER_POOL_H_

#include <stdint.h>

#include "base/status.h"

typedef struct hrt_worker_pool_s hrt_worker_pool_t;

typedef void (*hrt_worker_pool_fn_t)(void* context, uint64_t item,
                                     uint32_t worker_id);

hrt_status_t hrt_worker_pool_create(uint32_t worker_count,
                                    hrt_worker_pool_t** out_pool) HRT_MUST_USE;
void hrt_worker_pool_destroy(hrt_worker_pool_t* pool);
void hrt_worker_pool_run(hrt_worker_pool_t* pool, uint64_t item_count,
                         hrt_worker_pool_fn_t fn, void* context);

#endif  // HRT_HAL_LOCAL_WORKER_POOL_H_
