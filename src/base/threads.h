// Threads and synchronization: thin wrappers over pthreads so the rest of the
// runtime has one vocabulary and one error mapping.
//
// hrt_notification_t is one-shot: once set it stays set, and every current and
// future waiter returns. Any thread may set or wait.
#ifndef HRT_BASE_THREADS_H_
#define HRT_BASE_THREADS_H_

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/status.h"

typedef struct hrt_mutex_s {
  pthread_mutex_t handle;
} hrt_mutex_t;

typedef struct hrt_cond_s {
  pthread_cond_t handle;
} hrt_cond_t;

void hrt_mutex_init(hrt_mutex_t* mutex);
void hrt_mutex_deinit(hrt_mutex_t* mutex);
void hrt_mutex_lock(hrt_mutex_t* mutex);
void hrt_mutex_unlock(hrt_mutex_t* mutex);

// Conditions use CLOCK_MONOTONIC for timed waits.
void hrt_cond_init(hrt_cond_t* cond);
void hrt_cond_deinit(hrt_cond_t* cond);
void hrt_cond_wait(hrt_cond_t* cond, hrt_mutex_t* mutex);
// Waits until signalled or `deadline_ns` (hrt_time_now_ns() clock) passes.
// Returns false on timeout, at once when the deadline has already passed
// (any value <= now, negative ones included); HRT_TIME_INFINITE_FUTURE waits
// without a deadline. A true return may be spurious: callers re-check.
bool hrt_cond_wait_until(hrt_cond_t* cond, hrt_mutex_t* mutex,
                         int64_t deadline_ns);
void hrt_cond_signal(hrt_cond_t* cond);
void hrt_cond_broadcast(hrt_cond_t* cond);

// Monotonic clock in nanoseconds.
int64_t hrt_time_now_ns(void);

// A hint to the CPU inside a spin-wait loop (x86 pause, Arm yield).
static inline void hrt_cpu_pause(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ volatile("yield");
#endif
}
// Gives the core to another runnable thread, if any, and returns at once
// otherwise (sched_yield): a spin-wait that calls it never delays a thread it
// shares a core with.
void hrt_thread_yield(void);
// Lowers the calling thread's scheduling priority to HRT_THREAD_GIVE_WAY_NICE
// nice levels below the process's main thread (Linux, where each thread
// has its own; never raises it; best effort, nothing elsewhere): a device's
// threads give way to the JavaScript thread when the cores are fewer than
// the runnable threads, and take any core left idle as before.
#define HRT_THREAD_GIVE_WAY_NICE 5
void hrt_thread_give_way(void);
#define HRT_TIME_INFINITE_FUTURE INT64_MAX

typedef struct hrt_thread_s {
  pthread_t handle;
} hrt_thread_t;

// Starts `entry(arg)` on a new thread named `name` (truncated to 15 chars).
hrt_status_t hrt_thread_create(const char* name, void* (*entry)(void*),
                               void* arg,
                               hrt_thread_t* out_thread) HRT_MUST_USE;
void hrt_thread_join(hrt_thread_t* thread);
// Lets a thread that will never be joined free its own resources on exit.
void hrt_thread_detach(hrt_thread_t* thread);
bool hrt_thread_is_current(const hrt_thread_t* thread);

typedef struct hrt_notification_s {
  hrt_mutex_t mutex;
  hrt_cond_t cond;
  bool is_set;
} hrt_notification_t;

void hrt_notification_init(hrt_notification_t* notification);
void hrt_notification_deinit(hrt_notification_t* notification);
void hrt_notification_set(hrt_notification_t* notification);
bool hrt_notification_is_set(hrt_notification_t* notification);
// Returns false when `deadline_ns` passed before the notification was set
// (a deadline in the past checks without waiting).
bool hrt_notification_wait_until(hrt_notification_t* notification,
                                 int64_t deadline_ns);

#endif  // HRT_BASE_THREADS_H_
