#include "hal/local/worker_pool.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/alloc.h"
#include "base/threads.h"

typedef struct hrt_worker_s {
  hrt_worker_pool_t* pool;
  uint32_t id;
  hrt_thread_t thread;
} hrt_worker_t;

struct hrt_worker_pool_s {
  hrt_mutex_t mutex;
  hrt_cond_t work_cond;  // workers wait here for a new generation
  hrt_cond_t done_cond;  // the runner waits here for busy == 0
  uint64_t generation;   // guarded by mutex; bumped per job
  uint32_t busy;         // guarded by mutex; workers still in the job
  bool shutdown;         // guarded by mutex
  // The current job; written by the runner before the generation bump.
  hrt_worker_pool_fn_t fn;
  void* context;
  uint64_t item_count;
  atomic_uint_fast64_t next_item;
  uint32_t worker_count;
  uint32_t started;
  hrt_worker_t workers[];
};

static void hrt_worker_pool_drain(hrt_worker_pool_t* pool, uint32_t worker_id) {
  for (;;) {
    uint64_t item =
        atomic_fetch_add_explicit(&pool->next_item, 1, memory_order_relaxed);
    if (item >= pool->item_count) return;
    pool->fn(pool->context, item, worker_id);
  }
}

static void* hrt_worker_main(void* arg) {
  hrt_worker_t* worker = arg;
  hrt_worker_pool_t* pool = worker->pool;
  uint64_t seen = 0;
  hrt_mutex_lock(&pool->mutex);
  for (;;) {
    while (!pool->shutdown && pool->generation == seen) {
      hrt_cond_wait(&pool->work_cond, &pool->mutex);
    }
    if (pool->shutdown) break;
    seen = pool->generation;
    hrt_mutex_unlock(&pool->mutex);
    hrt_worker_pool_drain(pool, worker->id);
    hrt_mutex_lock(&pool->mutex);
    if (--pool->busy == 0) hrt_cond_signal(&pool->done_cond);
  }
  hrt_mutex_unlock(&pool->mutex);
  return NULL;
}

hrt_status_t hrt_worker_pool_create(uint32_t worker_count,
                                    hrt_worker_pool_t** out_pool) {
  hrt_worker_pool_t* pool = NULL;
  HRT_RETURN_IF_ERROR(
      hrt_allocate_zeroed(sizeof(*pool) + worker_count * sizeof(hrt_worker_t),
                          "worker pool", (void**)&pool));
  hrt_mutex_init(&pool->mutex);
  hrt_cond_init(&pool->work_cond);
  hrt_cond_init(&pool->done_cond);
  pool->worker_count = worker_count;
  for (uint32_t i = 0; i < worker_count; ++i) {
    hrt_worker_t* worker = &pool->workers[i];
    worker->pool = pool;
    worker->id = i;
    char name[32];
    snprintf(name, sizeof(name), "halrt-worker%u", i);
    hrt_status_t status =
        hrt_thread_create(name, hrt_worker_main, worker, &worker->thread);
    if (status != HRT_OK) {
      hrt_worker_pool_destroy(pool);
      return status;
    }
    pool->started = i + 1;
  }
  *out_pool = pool;
  return HRT_OK;
}

void hrt_worker_pool_destroy(hrt_worker_pool_t* pool) {
  if (!pool) return;
  hrt_mutex_lock(&pool->mutex);
  pool->shutdown = true;
  hrt_cond_broadcast(&pool->work_cond);
  hrt_mutex_unlock(&pool->mutex);
  for (uint32_t i = 0; i < pool->started; ++i) {
    hrt_thread_join(&pool->workers[i].thread);
  }
  hrt_cond_deinit(&pool->done_cond);
  hrt_cond_deinit(&pool->work_cond);
  hrt_mutex_deinit(&pool->mutex);
  free(pool);
}

void hrt_worker_pool_run(hrt_worker_pool_t* pool, uint64_t item_count,
                         hrt_worker_pool_fn_t fn, void* context) {
  if (item_count == 0) return;
  if (item_count == 1) {
    fn(context, 0, 0);
    return;
  }
  hrt_mutex_lock(&pool->mutex);
  pool->fn = fn;
  pool->context = context;
  pool->item_count = item_count;
  atomic_store_explicit(&pool->next_item, 0, memory_order_relaxed);
  pool->busy = pool->worker_count;
  ++pool->generation;
  hrt_cond_broadcast(&pool->work_cond);
  while (pool->busy != 0) hrt_cond_wait(&pool->done_cond, &pool->mutex);
  hrt_mutex_unlock(&pool->mutex);
}
