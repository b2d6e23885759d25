#ifndef _GNU_SOURCE
#define _GNU_SOURCE  // pthread_setname_np
#endif
#include "base/threads.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#if defined(__linux__)
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

void hrt_mutex_init(hrt_mutex_t* mutex) {
  pthread_mutex_init(&mutex->handle, NULL);
}
void hrt_mutex_deinit(hrt_mutex_t* mutex) {
  pthread_mutex_destroy(&mutex->handle);
}
void hrt_mutex_lock(hrt_mutex_t* mutex) { pthread_mutex_lock(&mutex->handle); }
void hrt_mutex_unlock(hrt_mutex_t* mutex) {
  pthread_mutex_unlock(&mutex->handle);
}

void hrt_cond_init(hrt_cond_t* cond) {
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_cond_init(&cond->handle, &attr);
  pthread_condattr_destroy(&attr);
}
void hrt_cond_deinit(hrt_cond_t* cond) { pthread_cond_destroy(&cond->handle); }
void hrt_cond_wait(hrt_cond_t* cond, hrt_mutex_t* mutex) {
  pthread_cond_wait(&cond->handle, &mutex->handle);
}

bool hrt_cond_wait_until(hrt_cond_t* cond, hrt_mutex_t* mutex,
                         int64_t deadline_ns) {
  if (deadline_ns == HRT_TIME_INFINITE_FUTURE) {
    hrt_cond_wait(cond, mutex);
    return true;
  }
  // A deadline already passed (negative ones included) times out at once;
  // otherwise the timespec is in range, so only ETIMEDOUT means timeout.
  if (deadline_ns <= hrt_time_now_ns()) return false;
  struct timespec ts = {
      .tv_sec = (time_t)(deadline_ns / 1000000000),
      .tv_nsec = (long)(deadline_ns % 1000000000),
  };
  return pthread_cond_timedwait(&cond->handle, &mutex->handle, &ts) == 0;
}

void hrt_cond_signal(hrt_cond_t* cond) { pthread_cond_signal(&cond->handle); }
void hrt_cond_broadcast(hrt_cond_t* cond) {
  pthread_cond_broadcast(&cond->handle);
}

int64_t hrt_time_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void hrt_thread_yield(void) { (void)sched_yield(); }

void hrt_thread_give_way(void) {
#if defined(__linux__)
  // Relative to the main thread's (whose id is the process's), so that a
  // thread started by one that already gave way lands on the same level.
  errno = 0;
  const int main_nice = getpriority(PRIO_PROCESS, (id_t)getpid());
  if (errno != 0) return;
  const id_t tid = (id_t)syscall(SYS_gettid);
  errno = 0;
  const int nice = getpriority(PRIO_PROCESS, tid);
  if (errno == 0 && nice < main_nice + HRT_THREAD_GIVE_WAY_NICE) {
    (void)setpriority(PRIO_PROCESS, tid, main_nice + HRT_THREAD_GIVE_WAY_NICE);
  }
#endif
}

hrt_status_t hrt_thread_create(const char* name, void* (*entry)(void*),
                               void* arg, hrt_thread_t* out_thread) {
  pthread_t handle;
  int rc = pthread_create(&handle, NULL, entry, arg);
  if (rc != 0) {
    return hrt_status_make(HRT_STATUS_RESOURCE_EXHAUSTED,
                           "pthread_create for thread '%s' failed: %s", name,
                           strerror(rc));
  }
  char short_name[16];
  snprintf(short_name, sizeof(short_name), "%s", name);
  pthread_setname_np(handle, short_name);
  out_thread->handle = handle;
  return HRT_OK;
}

void hrt_thread_join(hrt_thread_t* thread) {
  pthread_join(thread->handle, NULL);
}
void hrt_thread_detach(hrt_thread_t* thread) { pthread_detach(thread->handle); }
bool hrt_thread_is_current(const hrt_thread_t* thread) {
  return pthread_equal(thread->handle, pthread_self()) != 0;
}

void hrt_notification_init(hrt_notification_t* notification) {
  hrt_mutex_init(&notification->mutex);
  hrt_cond_init(&notification->cond);
  notification->is_set = false;
}

void hrt_notification_deinit(hrt_notification_t* notification) {
  hrt_cond_deinit(&notification->cond);
  hrt_mutex_deinit(&notification->mutex);
}

void hrt_notification_set(hrt_notification_t* notification) {
  hrt_mutex_lock(&notification->mutex);
  notification->is_set = true;
  hrt_cond_broadcast(&notification->cond);
  hrt_mutex_unlock(&notification->mutex);
}

bool hrt_notification_is_set(hrt_notification_t* notification) {
  hrt_mutex_lock(&notification->mutex);
  bool is_set = notification->is_set;
  hrt_mutex_unlock(&notification->mutex);
  return is_set;
}

bool hrt_notification_wait_until(hrt_notification_t* notification,
                                 int64_t deadline_ns) {
  hrt_mutex_lock(&notification->mutex);
  while (!notification->is_set) {
    if (!hrt_cond_wait_until(&notification->cond, &notification->mutex,
                             deadline_ns)) {
      break;
    }
  }
  bool is_set = notification->is_set;
  hrt_mutex_unlock(&notification->mutex);
  return is_set;
}
