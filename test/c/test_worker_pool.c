// src/hal/local/worker_pool: every item of every job runs exactly once,
// while its job is running, with more threads than cores (so that threads
// are taken off their cores mid-job), jobs of a few items back to back (a
// late thread meeting the next job), and a watchdog for a runner that never
// returns. Each pool runs jobs for a while (a race between a job's end and
// the next job's start took a million jobs or so, a second or two, to
// show).
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/threads.h"
#include "hal/local/worker_pool.h"
#include "test.h"

enum { MAX_ITEMS = 64 };

typedef struct {
  atomic_bool live;
  atomic_int runs[MAX_ITEMS];
} job_t;

static atomic_long late_runs, extra_runs, wild_items, jobs_done;

static void run_item(void* context, uint64_t item, uint32_t worker_id) {
  job_t* job = context;
  (void)worker_id;
  if (!atomic_load(&job->live)) atomic_fetch_add(&late_runs, 1);
  if (item >= MAX_ITEMS) {
    atomic_fetch_add(&wild_items, 1);
    return;
  }
  if (atomic_fetch_add(&job->runs[item], 1) != 0) atomic_fetch_add(&extra_runs, 1);
  // Items of uneven length, so that threads finish out of step.
  for (volatile uint64_t k = 0; k < item * 7 % 50; ++k) {
  }
}

// Ends the binary when no job has finished for 20 s (a job takes
// microseconds, even under the sanitizers on a loaded machine).
static void* watchdog(void* arg) {
  atomic_bool* stop = arg;
  long last = -1;
  int64_t since = hrt_time_now_ns();
  while (!atomic_load(stop)) {
    struct timespec pause = {0, 20000000};
    nanosleep(&pause, NULL);
    const long done = atomic_load(&jobs_done);
    if (done != last) {
      last = done;
      since = hrt_time_now_ns();
    } else if (hrt_time_now_ns() - since > 20000000000LL) {
      fprintf(stderr, "%s:%d: no worker pool job ended in 20 s (after %ld); exiting\n",
              __FILE__, __LINE__, done);
      fflush(stdout);
      _exit(1);
    }
  }
  return NULL;
}

static void every_item_runs_once_while_its_job_runs(void) {
  static const uint32_t kWorkers[] = {2, 8};
  static const int64_t kRunNs[] = {1000000000LL, 3000000000LL};
  static job_t jobs[2];
  atomic_bool stop = false;
  hrt_thread_t dog;
  CHECK_OK(hrt_thread_create("watchdog", watchdog, &stop, &dog));
  long wrong_counts = 0;
  for (size_t w = 0; w < sizeof(kWorkers) / sizeof(kWorkers[0]); ++w) {
    hrt_worker_pool_t* pool = NULL;
    hrt_status_t made = hrt_worker_pool_create(kWorkers[w], &pool);
    if (made != HRT_OK) {
      atomic_store(&stop, true);
      hrt_thread_join(&dog);
      CHECK_OK(made);
    }
    const int64_t until = hrt_time_now_ns() + kRunNs[w];
    for (long i = 0; hrt_time_now_ns() < until; ++i) {
      job_t* job = &jobs[i & 1];
      const uint64_t count = i % 997 == 0 ? MAX_ITEMS - 1 : 2 + (uint64_t)(i % 3);
      for (uint64_t k = 0; k <= count; ++k) atomic_store(&job->runs[k], 0);
      atomic_store(&job->live, true);
      hrt_worker_pool_run(pool, count, run_item, job);
      atomic_store(&job->live, false);
      atomic_fetch_add(&jobs_done, 1);
      // Each item once, and nothing past the last.
      for (uint64_t k = 0; k <= count; ++k) {
        wrong_counts += atomic_load(&job->runs[k]) != (k < count ? 1 : 0);
      }
    }
    hrt_worker_pool_destroy(pool);
  }
  atomic_store(&stop, true);
  hrt_thread_join(&dog);
  CHECK_EQ_INT(wrong_counts, 0);
  CHECK_EQ_INT(atomic_load(&late_runs), 0);
  CHECK_EQ_INT(atomic_load(&extra_runs), 0);
  CHECK_EQ_INT(atomic_load(&wild_items), 0);
}

// The nice level of the calling thread (Linux: each thread has its own).
static int thread_nice(void) {
  errno = 0;
  const int nice = getpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid));
  return errno == 0 ? nice : -100;
}

static atomic_int worker_nice = -100;

// The runner's item waits (at most 10 s) until a worker thread has run the
// other one and recorded its nice level, however late a loaded machine lets
// it start.
static void record_nice(void* context, uint64_t item, uint32_t worker_id) {
  (void)context;
  if (worker_id != 0) {
    atomic_store(&worker_nice, thread_nice());
    return;
  }
  (void)item;
  const int64_t until = hrt_time_now_ns() + 10000000000LL;
  while (atomic_load(&worker_nice) == -100 && hrt_time_now_ns() < until) {
    struct timespec pause = {0, 1000000};
    nanosleep(&pause, NULL);
  }
}

static void* give_way_twice(void* arg) {
  hrt_thread_give_way();
  hrt_thread_give_way();
  atomic_store((atomic_int*)arg, thread_nice());
  return NULL;
}

// The pool's threads run HRT_THREAD_GIVE_WAY_NICE levels below the main
// thread (at most 19), so that the JS thread keeps its core, however many
// times they give way.
static void workers_give_way_to_the_main_thread(void) {
  const int creator = thread_nice();
  CHECK(creator != -100);
  hrt_worker_pool_t* pool = NULL;
  CHECK_OK(hrt_worker_pool_create(2, &pool));
  hrt_worker_pool_run(pool, 2, record_nice, NULL);
  hrt_worker_pool_destroy(pool);
  const int expected = creator + HRT_THREAD_GIVE_WAY_NICE > 19
                           ? 19
                           : creator + HRT_THREAD_GIVE_WAY_NICE;
  CHECK_EQ_INT(atomic_load(&worker_nice), expected);
  CHECK_EQ_INT(thread_nice(), creator);  // the caller's own is unchanged
  // A thread giving way again (as one started by a thread that gave way
  // does) stays there.
  hrt_thread_t twice;
  atomic_int twice_nice = -100;
  CHECK_OK(hrt_thread_create("twice", give_way_twice, &twice_nice, &twice));
  hrt_thread_join(&twice);
  CHECK_EQ_INT(atomic_load(&twice_nice), expected);
}

TEST_MAIN(TEST_CASE(every_item_runs_once_while_its_job_runs),
          TEST_CASE(workers_give_way_to_the_main_thread),
          TEST_CASE(every_object_is_destroyed))
