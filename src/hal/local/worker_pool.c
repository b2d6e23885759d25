#include "hal/local/worker_pool.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/alloc.h"
#include "base/threads.h"

// How long a worker that finished a job, or the runner waiting for the
// workers, looks for what it waits for before it sleeps. A program's
// dispatches follow each other within microseconds, and waking a sleeping
// thread costs tens of microseconds on a VM (a dispatch of two workgroups
// took 36 us when every one woke the workers and the runner). 200 us, not
// 50: a program's serial stretches (single-workgroup dispatches, traces)
// often last longer than 50 us, after which every job woke the workers
// again (ch_ppocr_mobile_v2.0_cls traced in 'health' mode: 1.34x its
// untraced time at 50 us, 1.24-1.30x at 200; BENCHMARKS.md).
#define HRT_WORKER_POOL_SPIN_NS ((int64_t)200 * 1000)

typedef struct hrt_worker_s {
  hrt_worker_pool_t* pool;
  uint32_t id;
  hrt_thread_t thread;
} hrt_worker_t;

// A job: what its items run and how many there are.
typedef struct hrt_job_s {
  hrt_worker_pool_fn_t fn;
  void* context;
  atomic_uint_fast64_t count;
} hrt_job_t;

// The claim word: a job's generation in the top bits, the next item to
// claim below.
#define HRT_CLAIM_ITEM_BITS 34
#define HRT_CLAIM_ITEMS ((UINT64_C(1) << HRT_CLAIM_ITEM_BITS) - 1)

struct hrt_worker_pool_s {
  hrt_mutex_t mutex;
  hrt_cond_t work_cond;  // sleeping workers wait here for a new generation
  hrt_cond_t done_cond;  // a sleeping runner waits here for the last item
  // Bumped per job (release) once the job's fields are written.
  atomic_uint_fast64_t generation;
  atomic_bool shutdown;
  uint32_t sleepers;         // guarded by mutex: workers on work_cond
  bool runner_sleeping;      // guarded by mutex
  // Job g is jobs[g & 1], written by the runner before it publishes
  // `claim` = g << HRT_CLAIM_ITEM_BITS (release). A worker claims item n of
  // job g by moving `claim` from (g, n) to (g, n + 1), only while n is
  // below job g's count: a worker that read an older job's word fails the
  // exchange, so no item runs twice or with another job's fields, and the
  // slot it may have read a count from is rewritten only two jobs on. The
  // job is over when `done` reaches its count: the runner waits for the
  // items, never for a worker that claimed none (a thread off its core at
  // the start of a job costs nothing).
  hrt_job_t jobs[2];
  atomic_uint_fast64_t claim;
  atomic_uint_fast64_t done;
  uint64_t last_job;      // the runner's: the latest job's generation
  uint32_t worker_count;  // the runner (worker 0) and the threads
  uint32_t started;       // threads started
  hrt_worker_t workers[];
};

// Runs items of the current job until none is left to claim.
static void hrt_worker_pool_drain(hrt_worker_pool_t* pool, uint32_t worker_id) {
  uint64_t word = atomic_load_explicit(&pool->claim, memory_order_acquire);
  for (;;) {
    hrt_job_t* job = &pool->jobs[(word >> HRT_CLAIM_ITEM_BITS) & 1];
    const uint64_t item = word & HRT_CLAIM_ITEMS;
    const uint64_t count = atomic_load_explicit(&job->count, memory_order_relaxed);
    if (item >= count) return;
    if (!atomic_compare_exchange_weak_explicit(&pool->claim, &word, word + 1,
                                               memory_order_acq_rel,
                                               memory_order_acquire)) {
      continue;
    }
    // The exchange found job g's word: job g is current, and its slot and
    // count were what this worker read.
    job->fn(job->context, item, worker_id);
    if (atomic_fetch_add_explicit(&pool->done, 1, memory_order_acq_rel) + 1 ==
            count &&
        worker_id != 0) {
      hrt_mutex_lock(&pool->mutex);
      if (pool->runner_sleeping) hrt_cond_signal(&pool->done_cond);
      hrt_mutex_unlock(&pool->mutex);
    }
    word = atomic_load_explicit(&pool->claim, memory_order_acquire);
  }
}

// Without the mutex: waits up to HRT_WORKER_POOL_SPIN_NS, without
// sleeping, for a generation other than `seen` or shutdown; whether it came.
static bool hrt_worker_spin(hrt_worker_pool_t* pool, uint64_t seen) {
  const int64_t until = hrt_time_now_ns() + HRT_WORKER_POOL_SPIN_NS;
  for (;;) {
    if (atomic_load_explicit(&pool->generation, memory_order_acquire) != seen ||
        atomic_load_explicit(&pool->shutdown, memory_order_relaxed)) {
      return true;
    }
    if (hrt_time_now_ns() >= until) return false;
    hrt_cpu_pause();
  }
}

static void* hrt_worker_main(void* arg) {
  hrt_thread_give_way();
  hrt_worker_t* worker = arg;
  hrt_worker_pool_t* pool = worker->pool;
  uint64_t seen = 0;
  for (;;) {
    if (!hrt_worker_spin(pool, seen)) {
      hrt_mutex_lock(&pool->mutex);
      while (!atomic_load(&pool->shutdown) &&
             atomic_load(&pool->generation) == seen) {
        ++pool->sleepers;
        hrt_cond_wait(&pool->work_cond, &pool->mutex);
        --pool->sleepers;
      }
      hrt_mutex_unlock(&pool->mutex);
    }
    if (atomic_load(&pool->shutdown)) break;
    seen = atomic_load_explicit(&pool->generation, memory_order_acquire);
    hrt_worker_pool_drain(pool, worker->id);
  }
  return NULL;
}

hrt_status_t hrt_worker_pool_create(uint32_t worker_count,
                                    hrt_worker_pool_t** out_pool) {
  hrt_worker_pool_t* pool = NULL;
  const uint32_t threads = worker_count > 0 ? worker_count - 1 : 0;
  HRT_RETURN_IF_ERROR(
      hrt_allocate_zeroed(sizeof(*pool) + threads * sizeof(hrt_worker_t),
                          "worker pool", (void**)&pool));
  hrt_mutex_init(&pool->mutex);
  hrt_cond_init(&pool->work_cond);
  hrt_cond_init(&pool->done_cond);
  pool->worker_count = worker_count > 0 ? worker_count : 1;
  for (uint32_t i = 0; i < threads; ++i) {
    hrt_worker_t* worker = &pool->workers[i];
    worker->pool = pool;
    worker->id = i + 1;
    char name[32];
    snprintf(name, sizeof(name), "halrt-worker%u", i + 1);
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
  atomic_store(&pool->shutdown, true);
  hrt_mutex_lock(&pool->mutex);
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
  if (item_count == 1 || pool->started == 0 || item_count > HRT_CLAIM_ITEMS) {
    for (uint64_t item = 0; item < item_count; ++item) fn(context, item, 0);
    return;
  }
  // Generations wrap within the word's top bits; a worker would have to
  // stall across all of them, at the same item, to be confused.
  const uint64_t g = (pool->last_job + 1) & (UINT64_MAX >> HRT_CLAIM_ITEM_BITS);
  pool->last_job = g;
  hrt_job_t* job = &pool->jobs[g & 1];
  job->fn = fn;
  job->context = context;
  atomic_store_explicit(&job->count, item_count, memory_order_relaxed);
  atomic_store_explicit(&pool->done, 0, memory_order_relaxed);
  atomic_store_explicit(&pool->claim, g << HRT_CLAIM_ITEM_BITS,
                        memory_order_release);
  atomic_fetch_add_explicit(&pool->generation, 1, memory_order_release);
  hrt_mutex_lock(&pool->mutex);
  if (pool->sleepers > 0) hrt_cond_broadcast(&pool->work_cond);
  hrt_mutex_unlock(&pool->mutex);
  // The runner is worker 0.
  hrt_worker_pool_drain(pool, 0);
  const int64_t until = hrt_time_now_ns() + HRT_WORKER_POOL_SPIN_NS;
  while (atomic_load_explicit(&pool->done, memory_order_acquire) !=
             item_count &&
         hrt_time_now_ns() < until) {
    hrt_cpu_pause();
  }
  if (atomic_load_explicit(&pool->done, memory_order_acquire) == item_count) {
    return;
  }
  hrt_mutex_lock(&pool->mutex);
  pool->runner_sleeping = true;
  while (atomic_load_explicit(&pool->done, memory_order_acquire) !=
         item_count) {
    hrt_cond_wait(&pool->done_cond, &pool->mutex);
  }
  pool->runner_sleeping = false;
  hrt_mutex_unlock(&pool->mutex);
}
