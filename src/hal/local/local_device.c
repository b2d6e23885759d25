#include "hal/local/local_device.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/threads.h"
#include "hal/local/local_allocator.h"
#include "hal/local/local_executable.h"
#include "hal/local/worker_pool.h"
#include "hal/pending_submission.h"

typedef struct hrt_local_submission_s {
  struct hrt_local_submission_s* next;
  hrt_hal_pending_submission_t pending;  // storage follows the struct
} hrt_local_submission_t;

typedef struct hrt_local_device_s {
  hrt_hal_device_t base;
  hrt_worker_pool_t* pool;  // NULL for local-sync
  hrt_local_allocator_t allocator;
  hrt_thread_t thread;
  hrt_mutex_t mutex;
  hrt_cond_t cond;
  // Guarded by mutex.
  hrt_local_submission_t* head;
  hrt_local_submission_t* tail;
  bool shutdown;
  bool free_on_exit;  // destroyed from the queue thread itself
  // The queue thread will trim the allocator when the device has been idle
  // long enough; while it is not, a block going to the cache sets
  // memory_freed and wakes the thread to arm the trim.
  bool trim_armed;
  bool memory_freed;
} hrt_local_device_t;

typedef struct hrt_local_buffer_s {
  hrt_hal_buffer_t base;
} hrt_local_buffer_t;

//===----------------------------------------------------------------------===//
// Buffers
//===----------------------------------------------------------------------===//

// On whatever thread drops the last reference; the device is still alive
// (the buffer's reference to it is released after this).
static void hrt_local_buffer_destroy(hrt_hal_buffer_t* buffer) {
  hrt_local_device_t* device = (hrt_local_device_t*)buffer->device;
  bool cached = hrt_local_allocator_free(&device->allocator, buffer->host_ptr,
                                         (size_t)buffer->byte_length);
  free(buffer);
  if (!cached) return;
  hrt_mutex_lock(&device->mutex);
  if (!device->trim_armed && !device->memory_freed) {
    device->memory_freed = true;
    hrt_cond_signal(&device->cond);
  }
  hrt_mutex_unlock(&device->mutex);
}

static const hrt_hal_buffer_vtable_t hrt_local_buffer_vtable = {
    .destroy = hrt_local_buffer_destroy,
};

// Host memory installed, in bytes: no buffer may be larger. Zero-filling a
// buffer the system cannot back would get the process killed instead of
// failing cleanly. Read once: sysconf costs a system call per allocation.
static uint64_t hrt_physical_memory_bytes;
static pthread_once_t hrt_physical_memory_once = PTHREAD_ONCE_INIT;

static void hrt_read_physical_memory(void) {
  long pages = sysconf(_SC_PHYS_PAGES);
  long page_size = sysconf(_SC_PAGESIZE);
  hrt_physical_memory_bytes = pages <= 0 || page_size <= 0
                                  ? UINT64_MAX
                                  : (uint64_t)pages * (uint64_t)page_size;
}

static uint64_t hrt_physical_memory(void) {
  pthread_once(&hrt_physical_memory_once, hrt_read_physical_memory);
  return hrt_physical_memory_bytes;
}

static hrt_status_t hrt_local_allocate_buffer(hrt_hal_device_t* base,
                                              uint64_t byte_length,
                                              const void* initial_data,
                                              hrt_hal_buffer_t** out_buffer) {
  hrt_local_device_t* device = (hrt_local_device_t*)base;
  // 64-byte alignment for vector loads; the size rounds up to match, which
  // also keeps zero-byte buffers addressable.
  if (byte_length > SIZE_MAX - 64 || byte_length > hrt_physical_memory()) {
    return hrt_status_make(HRT_STATUS_RESOURCE_EXHAUSTED,
                           "out of host memory: %llu bytes on %s exceed the "
                           "host memory installed",
                           (unsigned long long)byte_length, base->info.uri);
  }
  hrt_local_buffer_t* buffer = malloc(sizeof(*buffer));
  void* storage =
      buffer ? hrt_local_allocator_allocate(&device->allocator,
                                            (size_t)byte_length, initial_data)
             : NULL;
  if (!storage) {
    free(buffer);
    return hrt_status_make(HRT_STATUS_RESOURCE_EXHAUSTED,
                           "out of host memory allocating a %llu-byte buffer "
                           "on %s",
                           (unsigned long long)byte_length, base->info.uri);
  }
  hrt_hal_buffer_initialize(&hrt_local_buffer_vtable, base, byte_length,
                            storage, &buffer->base);
  *out_buffer = &buffer->base;
  return HRT_OK;
}

//===----------------------------------------------------------------------===//
// Execution (queue thread)
//===----------------------------------------------------------------------===//

// Host address of a resolved ref.
static char* hrt_host_address(const hrt_hal_buffer_ref_t* ref) {
  return (char*)ref->buffer->host_ptr + ref->offset;
}

static void hrt_fill(const hrt_hal_buffer_ref_t* target, uint64_t pattern,
                     uint32_t pattern_length) {
  char* dst = hrt_host_address(target);
  if (pattern_length == 1) {
    memset(dst, (int)(pattern & 0xFF), (size_t)target->length);
    return;
  }
  for (uint64_t i = 0; i < target->length; i += pattern_length) {
    memcpy(dst + i, &pattern, pattern_length);
  }
}

typedef struct hrt_dispatch_job_s {
  halrt_kernel_fn_t fn;
  halrt_dispatch_state_t state;
  atomic_int result;               // first non-zero kernel result
  atomic_uint_fast64_t failed_at;  // linear id of that workgroup
} hrt_dispatch_job_t;

static void hrt_run_workgroup(void* context, uint64_t item,
                              uint32_t worker_id) {
  hrt_dispatch_job_t* job = context;
  if (atomic_load_explicit(&job->result, memory_order_relaxed) != 0) return;
  const uint32_t* count = job->state.workgroup_count;
  halrt_workgroup_state_t workgroup = {
      .workgroup_id = {(uint32_t)(item % count[0]),
                       (uint32_t)((item / count[0]) % count[1]),
                       (uint32_t)(item / ((uint64_t)count[0] * count[1]))},
      .worker_id = worker_id,
  };
  int result = job->fn(&job->state, &workgroup);
  int expected = 0;
  if (result != 0 &&
      atomic_compare_exchange_strong(&job->result, &expected, result)) {
    atomic_store(&job->failed_at, item);
  }
}

static hrt_status_t hrt_dispatch(hrt_local_device_t* device,
                                 const hrt_hal_dispatch_t* dispatch,
                                 const hrt_local_submission_t* sub,
                                 uint32_t index) {
  void* pointers[HRT_HAL_MAX_DISPATCH_BINDINGS];
  size_t lengths[HRT_HAL_MAX_DISPATCH_BINDINGS];
  for (uint32_t i = 0; i < dispatch->binding_count; ++i) {
    hrt_hal_buffer_ref_t ref = hrt_hal_pending_submission_resolve(
        &sub->pending, &dispatch->bindings[i]);
    pointers[i] = hrt_host_address(&ref);
    lengths[i] = (size_t)ref.length;
  }
  const halrt_kernel_entry_t* kernel = hrt_local_executable_kernel(
      dispatch->executable, dispatch->entry_ordinal);
  hrt_dispatch_job_t job = {
      .fn = kernel->fn,
      .state =
          {
              .workgroup_count = {dispatch->workgroup_count[0],
                                  dispatch->workgroup_count[1],
                                  dispatch->workgroup_count[2]},
              .workgroup_size = {dispatch->workgroup_size[0],
                                 dispatch->workgroup_size[1],
                                 dispatch->workgroup_size[2]},
              .constant_count = dispatch->constant_count,
              .binding_count = dispatch->binding_count,
              .constants = dispatch->constants,
              .bindings = pointers,
              .binding_lengths = lengths,
          },
  };
  atomic_init(&job.result, 0);
  atomic_init(&job.failed_at, 0);
  uint64_t total = (uint64_t)dispatch->workgroup_count[0] *
                   dispatch->workgroup_count[1] * dispatch->workgroup_count[2];
  if (device->pool) {
    hrt_worker_pool_run(device->pool, total, hrt_run_workgroup, &job);
  } else {
    for (uint64_t i = 0; i < total && atomic_load(&job.result) == 0; ++i) {
      hrt_run_workgroup(&job, i, 0);
    }
  }
  int result = atomic_load(&job.result);
  if (result == 0) return HRT_OK;
  uint64_t at = atomic_load(&job.failed_at);
  const uint32_t* count = dispatch->workgroup_count;
  return hrt_status_make(
      result == HALRT_KERNEL_INVALID_ARGUMENT ? HRT_STATUS_INVALID_ARGUMENT
                                              : HRT_STATUS_ABORTED,
      "kernel '%s' of executable '%s' (command %u) returned %d at workgroup "
      "[%llu, %llu, %llu]%s",
      kernel->name, dispatch->executable->name, index, result,
      (unsigned long long)(at % count[0]),
      (unsigned long long)((at / count[0]) % count[1]),
      (unsigned long long)(at / ((uint64_t)count[0] * count[1])),
      result == HALRT_KERNEL_INVALID_ARGUMENT
          ? ": its bindings or constants are inconsistent"
          : "");
}

// Every earlier command has completed (they run in order on this thread), so
// the buffers themselves are the host copies the callback sees.
static hrt_status_t hrt_trace(const hrt_hal_command_t* trace_command,
                              const hrt_local_submission_t* sub) {
  const void* data[HRT_HAL_MAX_TRACE_SOURCES];
  uint64_t lengths[HRT_HAL_MAX_TRACE_SOURCES];
  uint32_t count = trace_command->trace.source_count;
  for (uint32_t i = 0; i < count; ++i) {
    hrt_hal_buffer_ref_t ref = hrt_hal_pending_submission_resolve(
        &sub->pending, &trace_command->trace.sources[i]);
    data[i] = hrt_host_address(&ref);
    lengths[i] = ref.length;
  }
  return trace_command->trace.fn(trace_command->trace.user_data,
                                 sub->pending.host_context, count, data,
                                 lengths);
}

static hrt_status_t hrt_execute(hrt_local_device_t* device,
                                const hrt_local_submission_t* sub) {
  for (uint32_t i = 0; i < sub->pending.wait_count; ++i) {
    HRT_RETURN_IF_ERROR(hrt_hal_semaphore_wait(sub->pending.waits[i].semaphore,
                                               sub->pending.waits[i].value,
                                               HRT_TIME_INFINITE_FUTURE));
  }
  const hrt_hal_command_buffer_t* command_buffer = sub->pending.command_buffer;
  uint32_t count = hrt_hal_command_buffer_count(command_buffer);
  for (uint32_t i = 0; i < count; ++i) {
    const hrt_hal_command_t* command =
        hrt_hal_command_buffer_at(command_buffer, i);
    switch (command->type) {
      case HRT_HAL_COMMAND_FILL: {
        hrt_hal_buffer_ref_t target = hrt_hal_pending_submission_resolve(
            &sub->pending, &command->fill.target);
        hrt_fill(&target, command->fill.pattern, command->fill.pattern_length);
        break;
      }
      case HRT_HAL_COMMAND_COPY: {
        hrt_hal_buffer_ref_t source = hrt_hal_pending_submission_resolve(
            &sub->pending, &command->copy.source);
        hrt_hal_buffer_ref_t target = hrt_hal_pending_submission_resolve(
            &sub->pending, &command->copy.target);
        memmove(hrt_host_address(&target), hrt_host_address(&source),
                (size_t)source.length);
        break;
      }
      case HRT_HAL_COMMAND_UPDATE: {
        hrt_hal_buffer_ref_t target = hrt_hal_pending_submission_resolve(
            &sub->pending, &command->update.target);
        memcpy(hrt_host_address(&target), command->update.data,
               (size_t)target.length);
        break;
      }
      case HRT_HAL_COMMAND_READ: {
        hrt_hal_buffer_ref_t source = hrt_hal_pending_submission_resolve(
            &sub->pending, &command->read.source);
        memcpy(command->read.host_target, hrt_host_address(&source),
               (size_t)source.length);
        break;
      }
      case HRT_HAL_COMMAND_DISPATCH: {
        int64_t start = hrt_time_now_ns();
        HRT_RETURN_IF_ERROR(hrt_dispatch(device, &command->dispatch, sub, i));
        if (sub->pending.dispatch_timing) {
          sub->pending.dispatch_timing(sub->pending.host_context, i, start,
                                       hrt_time_now_ns() - start);
        }
        break;
      }
      case HRT_HAL_COMMAND_TRACE:
        HRT_RETURN_IF_ERROR(hrt_trace(command, sub));
        break;
      case HRT_HAL_COMMAND_BARRIER:
        // Commands already run strictly in order on this device.
        break;
    }
  }
  return HRT_OK;
}

// Runs one submission to completion (see hal/pending_submission.h: the
// submission's reference to the device, possibly the last one, is dropped
// before the completion runs).
static void hrt_complete(hrt_local_device_t* device,
                         hrt_local_submission_t* sub) {
  hrt_status_t status = hrt_execute(device, sub);
  hrt_hal_pending_submission_finish(&sub->pending, status, sub, &device->base);
}

static void hrt_local_device_free(hrt_local_device_t* device) {
  hrt_local_allocator_deinitialize(&device->allocator);
  hrt_worker_pool_destroy(device->pool);
  hrt_cond_deinit(&device->cond);
  hrt_mutex_deinit(&device->mutex);
  hrt_hal_device_deinitialize(&device->base);
  free(device);
}

// Runs submissions in FIFO order. Between them, trims the allocator once the
// device has been idle (no submission, no block cached since it looked) for
// HRT_LOCAL_ALLOCATOR_IDLE_TRIM_NS with something cached.
static void* hrt_queue_main(void* arg) {
  hrt_local_device_t* device = arg;
  int64_t trim_at = HRT_TIME_INFINITE_FUTURE;
  bool worked = false;  // since the queue was last seen empty
  hrt_mutex_lock(&device->mutex);
  for (;;) {
    if (!device->head && !device->shutdown) {
      if (worked || device->memory_freed) {
        worked = false;
        device->memory_freed = false;
        device->trim_armed =
            hrt_local_allocator_cached_bytes(&device->allocator) > 0;
        trim_at = device->trim_armed
                      ? hrt_time_now_ns() + HRT_LOCAL_ALLOCATOR_IDLE_TRIM_NS
                      : HRT_TIME_INFINITE_FUTURE;
      } else if (trim_at != HRT_TIME_INFINITE_FUTURE &&
                 hrt_time_now_ns() >= trim_at) {
        trim_at = HRT_TIME_INFINITE_FUTURE;
        device->trim_armed = false;
        hrt_mutex_unlock(&device->mutex);
        hrt_local_allocator_trim(&device->allocator);
        hrt_mutex_lock(&device->mutex);
        continue;
      }
      (void)hrt_cond_wait_until(&device->cond, &device->mutex, trim_at);
      continue;
    }
    hrt_local_submission_t* sub = device->head;
    if (!sub) break;  // shut down with nothing left
    device->head = sub->next;
    if (!device->head) device->tail = NULL;
    hrt_mutex_unlock(&device->mutex);
    hrt_complete(device, sub);
    worked = true;
    hrt_mutex_lock(&device->mutex);
  }
  bool free_on_exit = device->free_on_exit;
  hrt_mutex_unlock(&device->mutex);
  if (free_on_exit) {
    hrt_thread_detach(&device->thread);
    hrt_local_device_free(device);
  }
  return NULL;
}

//===----------------------------------------------------------------------===//
// Device
//===----------------------------------------------------------------------===//

static void hrt_local_device_destroy(hrt_hal_device_t* base) {
  hrt_local_device_t* device = (hrt_local_device_t*)base;
  // Only called at refcount zero: no submission is pending (each holds a
  // reference), so the queue is empty.
  bool on_queue_thread = hrt_thread_is_current(&device->thread);
  hrt_mutex_lock(&device->mutex);
  device->shutdown = true;
  device->free_on_exit = on_queue_thread;
  hrt_cond_signal(&device->cond);
  hrt_mutex_unlock(&device->mutex);
  if (on_queue_thread) return;
  hrt_thread_join(&device->thread);
  hrt_local_device_free(device);
}

static hrt_status_t hrt_local_create_executable(
    hrt_hal_device_t* device, const hrt_hal_executable_params_t* params,
    hrt_hal_executable_t** out_executable) {
  return hrt_local_executable_create(device, params, out_executable);
}

static hrt_status_t hrt_local_queue_submit(
    hrt_hal_device_t* base, const hrt_hal_submission_t* submission) {
  hrt_local_device_t* device = (hrt_local_device_t*)base;
  hrt_local_submission_t* sub = NULL;
  HRT_RETURN_IF_ERROR(hrt_allocate_zeroed(
      sizeof(*sub) + hrt_hal_pending_submission_storage_size(submission),
      "submission", (void**)&sub));
  hrt_hal_pending_submission_init(&sub->pending, submission, sub + 1);
  hrt_hal_device_retain(base);

  hrt_mutex_lock(&device->mutex);
  if (device->tail) {
    device->tail->next = sub;
  } else {
    device->head = sub;
  }
  device->tail = sub;
  hrt_cond_signal(&device->cond);
  hrt_mutex_unlock(&device->mutex);
  return HRT_OK;
}

static const hrt_hal_device_vtable_t hrt_local_device_vtable = {
    .destroy = hrt_local_device_destroy,
    .allocate_buffer = hrt_local_allocate_buffer,
    .create_executable = hrt_local_create_executable,
    .queue_submit = hrt_local_queue_submit,
};

hrt_status_t hrt_local_device_create(const char* driver_name,
                                     uint32_t worker_count, const char* uri,
                                     hrt_hal_device_t** out_device) {
  hrt_local_device_t* device = NULL;
  HRT_RETURN_IF_ERROR(
      hrt_allocate_zeroed(sizeof(*device), "device", (void**)&device));
  hrt_status_t status =
      hrt_local_allocator_initialize(hrt_physical_memory(), &device->allocator);
  if (status != HRT_OK) {
    free(device);
    return status;
  }
  hrt_mutex_init(&device->mutex);
  hrt_cond_init(&device->cond);
  if (worker_count > 0) {
    status = hrt_worker_pool_create(worker_count, &device->pool);
  }
  // The queue thread starts before the device is initialized below: it
  // touches only the mutex, the condition and the queue until a submission
  // arrives, and none can before create returns.
  if (status == HRT_OK) {
    status = hrt_thread_create("halrt-queue", hrt_queue_main, device,
                               &device->thread);
  }
  if (status != HRT_OK) {
    hrt_worker_pool_destroy(device->pool);
    hrt_local_allocator_deinitialize(&device->allocator);
    hrt_cond_deinit(&device->cond);
    hrt_mutex_deinit(&device->mutex);
    free(device);
    return status;
  }
  hrt_hal_device_initialize(&hrt_local_device_vtable, &device->base);
  hrt_hal_device_info_t* info = &device->base.info;
  snprintf(info->driver, sizeof(info->driver), "%s", driver_name);
  snprintf(info->kind, sizeof(info->kind), "local");
  snprintf(info->uri, sizeof(info->uri), "%s", uri);
  info->worker_count = worker_count ? worker_count : 1;
  uint64_t memory = hrt_physical_memory();
  info->total_memory = memory == UINT64_MAX ? 0 : memory;
  if (worker_count) {
    snprintf(info->name, sizeof(info->name), "CPU (%s, %u workers)",
             driver_name, worker_count);
  } else {
    snprintf(info->name, sizeof(info->name), "CPU (%s, queue thread)",
             driver_name);
  }
  *out_device = &device->base;
  return HRT_OK;
}
