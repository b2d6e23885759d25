#include "hal/local/local_device.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/copy.h"
#include "base/list.h"
#include "base/threads.h"
#include "hal/local/local_allocator.h"
#include "hal/local/local_executable.h"
#include "hal/local/worker_pool.h"
#include "hal/pending_submission.h"
#include "hal/tensor_summary.h"

typedef struct hrt_local_submission_s hrt_local_submission_t;

// Work the queue thread hands to the trace thread, run in FIFO order: a
// trace callback, a dispatch timing, or a submission's finish.
typedef enum hrt_trace_job_kind_e {
  HRT_TRACE_JOB_TRACE = 0,
  HRT_TRACE_JOB_TIMING,
  HRT_TRACE_JOB_FINISH,
} hrt_trace_job_kind_t;

typedef struct hrt_trace_job_s {
  struct hrt_trace_job_s* next;
  hrt_trace_job_kind_t kind;
  uint64_t sequence;  // 1 for the device's first job, then 2, ...
  hrt_local_submission_t* sub;
  union {
    struct {
      const hrt_hal_command_t* command;
      uint32_t source_count;
      // A full trace's sources, resolved, or a summary trace's summaries,
      // computed; either follows the job (the other is NULL). Only the
      // sources are read by the callback, so only they order later writers.
      hrt_hal_buffer_ref_t* sources;
      hrt_hal_tensor_summary_t* summaries;
    } trace;
    struct {
      uint32_t command_index;
      int64_t start_ns;
      int64_t duration_ns;
    } timing;
    hrt_status_t finish_status;  // the queue thread's (owned)
  };
} hrt_trace_job_t;

struct hrt_local_submission_s {
  hrt_local_submission_t* next;
  // The first failure of one of its trace callbacks. Written by whichever
  // thread runs its traces, read by whichever runs its finish: never at
  // once (see hrt_local_device_t).
  hrt_status_t trace_status;
  // Set with trace_status: the queue thread stops running its commands.
  atomic_bool trace_failed;
  hrt_trace_job_t finish_job;            // when the finish is handed off
  hrt_hal_pending_submission_t pending;  // storage follows the struct
};

// The most jobs handed to the trace thread and not yet run; the queue thread
// waits when there are this many. It bounds the memory they take and the
// ranges a later writer is checked against.
#define HRT_TRACE_JOB_LIMIT 256

// A trace of fewer bytes than this (its sources together), met while the
// trace thread has no work, runs on the queue thread at once: handing it off
// would cost more than the sink's copy of it.
#define HRT_TRACE_INLINE_BYTES (64 * 1024)

// The most workgroups of a dispatch, and units of a job after it, whose
// workers are matched (hrt_affine_t).
#define HRT_LOCAL_AFFINITY_PARTS 64

typedef struct hrt_local_loan_s hrt_local_loan_t;

typedef struct hrt_local_device_s {
  hrt_hal_device_t base;
  hrt_worker_pool_t* pool;  // NULL for local-sync
  // Queue thread's (the workers write their own items during a dispatch):
  // the worker that ran each workgroup of the last dispatch, when it had
  // 2 to HRT_LOCAL_AFFINITY_PARTS (dispatch_parts; 0 otherwise).
  uint32_t dispatch_parts;
  uint8_t dispatch_worker[HRT_LOCAL_AFFINITY_PARTS];
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
  // Whether `head` is set, for the queue thread to look at without the
  // mutex while it spins (written under the mutex).
  atomic_bool queued;
  bool queue_sleeping;  // guarded by mutex: waiting for a submission
  // The trace thread: started by the queue thread the first time it hands
  // off a trace; it runs the jobs the queue thread hands it (hrt_trace_*).
  // Trace, timing and completion callbacks run on one of the two threads,
  // never at once: the queue thread runs them itself only when every job
  // handed off has run (trace_done == trace_enqueued), and only it hands
  // jobs off.
  bool trace_started;  // written by the queue thread only
  hrt_thread_t trace_thread;
  hrt_cond_t trace_cond;  // the trace thread waits on it for jobs
  // Guarded by mutex.
  hrt_trace_job_t* trace_head;  // handed off, not yet started
  hrt_trace_job_t* trace_tail;
  hrt_trace_job_t* trace_current;  // the trace job running, if any
  uint64_t trace_enqueued;         // sequence of the last job handed off
  uint64_t trace_done;             // sequence of the last job run
  bool trace_waiting;   // the queue thread waits on cond for trace_done
  bool trace_sleeping;  // the trace thread waits on trace_cond
  bool trace_shutdown;
  bool trace_free_on_exit;  // destroyed from the trace thread itself
  // Loans (hal/device.h) that writers must respect: the lent and open ones,
  // guarded by mutex; loan_count mirrors their number for the queue
  // thread's look without the mutex. loan_cond wakes a writer waiting for
  // an open loan to close, and an opener waiting for a writer's copy.
  hrt_local_loan_t* loans;
  atomic_uint loan_count;
  hrt_cond_t loan_cond;
} hrt_local_device_t;

// A loan's life: LENT (made; a writer first copies the bytes into the
// spare: COPYING, then COPIED) or OPEN (JavaScript reads the buffer's own
// bytes; writers wait), until closed. Guarded by the device's mutex.
typedef enum hrt_local_loan_state_e {
  HRT_LOCAL_LOAN_LENT,
  HRT_LOCAL_LOAN_OPEN,
  HRT_LOCAL_LOAN_COPYING,
  HRT_LOCAL_LOAN_COPIED,
} hrt_local_loan_state_t;

struct hrt_local_loan_s {
  hrt_hal_loan_t base;
  hrt_hal_buffer_t* buffer;  // retained until closed (for good if abandoned)
  const char* data;
  uint64_t length;
  void* spare;
  hrt_local_loan_state_t state;
  // In device->loans while LENT, OPEN or COPYING.
  hrt_local_loan_t* prev;
  hrt_local_loan_t* next;
  hrt_local_loan_t* copy_next;  // the writer's list of loans it copies
};

typedef struct hrt_local_buffer_s {
  hrt_hal_buffer_t base;
  // Set by a loan abandoned while open (hrt_local_loan_close): JavaScript
  // may still read the storage, which is then never freed.
  atomic_bool keep_storage;
} hrt_local_buffer_t;

//===----------------------------------------------------------------------===//
// Buffers
//===----------------------------------------------------------------------===//

// On whatever thread drops the last reference; the device is still alive
// (the buffer's reference to it is released after this).
static void hrt_local_buffer_destroy(hrt_hal_buffer_t* buffer) {
  hrt_local_device_t* device = (hrt_local_device_t*)buffer->device;
  bool cached = !atomic_load(&((hrt_local_buffer_t*)buffer)->keep_storage) &&
                hrt_local_allocator_free(&device->allocator, buffer->host_ptr,
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
  atomic_init(&buffer->keep_storage, false);
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
  uint8_t* worker_of;              // [workgroup count] when recorded, else NULL
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
  if (job->worker_of) job->worker_of[item] = (uint8_t)worker_id;
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
    const bool recorded = total >= 2 && total <= HRT_LOCAL_AFFINITY_PARTS &&
                          device->base.info.worker_count <= UINT8_MAX;
    job.worker_of = recorded ? device->dispatch_worker : NULL;
    device->dispatch_parts = recorded ? (uint32_t)total : 0;
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

//===----------------------------------------------------------------------===//
// Trace thread
//===----------------------------------------------------------------------===//

// Runs `command` (a trace) over `sources`, resolved, or `summaries`, of
// `sub`, unless an earlier trace of `sub` failed; records a failure. The
// buffers are the host copies the callback sees: every command before the
// trace has run, and no later writer of a traced range runs until it has
// returned. Summaries were computed when the trace's turn came.
static void hrt_trace_run(hrt_local_submission_t* sub,
                          const hrt_hal_command_t* command,
                          const hrt_hal_buffer_ref_t* sources,
                          const hrt_hal_tensor_summary_t* summaries) {
  if (sub->trace_status != HRT_OK) return;
  const void* data[HRT_HAL_MAX_TRACE_SOURCES];
  uint64_t lengths[HRT_HAL_MAX_TRACE_SOURCES];
  hrt_hal_buffer_t* buffers[HRT_HAL_MAX_TRACE_SOURCES];
  uint32_t count = command->trace.source_count;
  for (uint32_t i = 0; i < count; ++i) {
    if (summaries) {
      data[i] = &summaries[i];
      lengths[i] = sizeof(summaries[i]);
    } else {
      data[i] = hrt_host_address(&sources[i]);
      lengths[i] = sources[i].length;
      buffers[i] = sources[i].buffer;
    }
  }
  hrt_status_t status =
      command->trace.fn(command->trace.user_data, sub->pending.host_context,
                        count, data, lengths, summaries ? NULL : buffers);
  if (status != HRT_OK) {
    sub->trace_status = status;
    atomic_store(&sub->trace_failed, true);
  }
}

// Reports a dispatch's time unless a trace of `sub` failed (the submission
// has failed; without the trace thread, that dispatch would not have run).
static void hrt_timing_run(const hrt_local_submission_t* sub,
                           uint32_t command_index, int64_t start_ns,
                           int64_t duration_ns) {
  if (sub->trace_status != HRT_OK) return;
  sub->pending.dispatch_timing(sub->pending.host_context, command_index,
                               start_ns, duration_ns);
}

// Finishes `sub` with `status` (owned), or with its trace's failure, which
// came earlier in program order, then drops its reference to the device
// (possibly the last one).
static void hrt_finish_run(hrt_local_device_t* device,
                           hrt_local_submission_t* sub, hrt_status_t status) {
  if (sub->trace_status != HRT_OK) {
    hrt_status_free(status);
    status = sub->trace_status;
  }
  hrt_hal_pending_submission_finish(&sub->pending, status, sub, &device->base);
}

static void hrt_local_device_free(hrt_local_device_t* device);

// Runs the jobs in FIFO order until shut down with none left. A trace job
// stays visible to the queue thread (trace_current) until it has run, so
// that a later writer of its ranges waits for it.
static void* hrt_trace_main(void* arg) {
  hrt_thread_give_way();
  hrt_local_device_t* device = arg;
  hrt_mutex_lock(&device->mutex);
  for (;;) {
    hrt_trace_job_t* job = device->trace_head;
    if (!job) {
      if (device->trace_shutdown) break;
      device->trace_sleeping = true;
      hrt_cond_wait(&device->trace_cond, &device->mutex);
      device->trace_sleeping = false;
      continue;
    }
    device->trace_head = job->next;
    if (!device->trace_head) device->trace_tail = NULL;
    device->trace_current = job->kind == HRT_TRACE_JOB_TRACE ? job : NULL;
    hrt_mutex_unlock(&device->mutex);
    uint64_t sequence = job->sequence;
    switch (job->kind) {
      case HRT_TRACE_JOB_TRACE:
        hrt_trace_run(job->sub, job->trace.command, job->trace.sources,
                      job->trace.summaries);
        break;
      case HRT_TRACE_JOB_TIMING:
        hrt_timing_run(job->sub, job->timing.command_index,
                       job->timing.start_ns, job->timing.duration_ns);
        break;
      case HRT_TRACE_JOB_FINISH:
        // The job lives in the submission, which this frees.
        hrt_finish_run(device, job->sub, job->finish_status);
        job = NULL;
        break;
    }
    hrt_mutex_lock(&device->mutex);
    device->trace_current = NULL;
    device->trace_done = sequence;
    if (device->trace_waiting) hrt_cond_signal(&device->cond);
    free(job);
  }
  bool free_on_exit = device->trace_free_on_exit;
  hrt_mutex_unlock(&device->mutex);
  if (free_on_exit) {
    // The queue thread has been told to stop and has nothing left to run.
    hrt_thread_join(&device->thread);
    hrt_thread_detach(&device->trace_thread);
    hrt_local_device_free(device);
  }
  return NULL;
}

// Queue thread, mutex held: waits until the trace thread has run the job
// numbered `sequence` (and so every job before it).
static void hrt_trace_wait_locked(hrt_local_device_t* device,
                                  uint64_t sequence) {
  while (device->trace_done < sequence) {
    device->trace_waiting = true;
    hrt_cond_wait(&device->cond, &device->mutex);
  }
  device->trace_waiting = false;
}

// Queue thread: waits until every job handed off has run.
static void hrt_trace_drain(hrt_local_device_t* device) {
  if (!device->trace_started) return;
  hrt_mutex_lock(&device->mutex);
  hrt_trace_wait_locked(device, device->trace_enqueued);
  hrt_mutex_unlock(&device->mutex);
}

// Queue thread: whether jobs handed off have not all run, so that a
// callback must be handed off too to keep its place in the order.
static bool hrt_trace_busy(hrt_local_device_t* device) {
  if (!device->trace_started) return false;
  hrt_mutex_lock(&device->mutex);
  bool busy = device->trace_done != device->trace_enqueued;
  hrt_mutex_unlock(&device->mutex);
  return busy;
}

// Queue thread: hands `job` to the trace thread, first waiting while
// HRT_TRACE_JOB_LIMIT jobs are queued.
static void hrt_trace_enqueue(hrt_local_device_t* device,
                              hrt_trace_job_t* job) {
  hrt_mutex_lock(&device->mutex);
  if (device->trace_enqueued - device->trace_done >= HRT_TRACE_JOB_LIMIT) {
    hrt_trace_wait_locked(device,
                          device->trace_enqueued - HRT_TRACE_JOB_LIMIT + 1);
  }
  job->sequence = ++device->trace_enqueued;
  HRT_LIST_APPEND(device->trace_head, device->trace_tail, job, next);
  if (device->trace_sleeping) hrt_cond_signal(&device->trace_cond);
  hrt_mutex_unlock(&device->mutex);
}

// Whether trace job `job` reads a byte of `written[0..count)`.
static bool hrt_trace_job_overlaps(const hrt_trace_job_t* job,
                                   const hrt_hal_buffer_ref_t* written,
                                   uint32_t count) {
  if (!job->trace.sources) return false;  // summaries: nothing left to read
  for (uint32_t i = 0; i < job->trace.source_count; ++i) {
    for (uint32_t j = 0; j < count; ++j) {
      if (hrt_hal_buffer_ranges_overlap(&job->trace.sources[i], &written[j])) {
        return true;
      }
    }
  }
  return false;
}

// Queue thread, before `command` of `sub`: waits until every trace handed
// off that reads a range the command may write has run. Readers never wait.
static void hrt_trace_order_writer(hrt_local_device_t* device,
                                   const hrt_local_submission_t* sub,
                                   const hrt_hal_command_t* command) {
  if (!device->trace_started) return;
  hrt_mutex_lock(&device->mutex);
  if (device->trace_done != device->trace_enqueued) {
    hrt_hal_buffer_ref_t written[HRT_HAL_MAX_DISPATCH_BINDINGS];
    uint32_t count =
        hrt_hal_pending_submission_written(&sub->pending, command, written);
    uint64_t last = 0;  // the latest overlapping trace's sequence
    if (count > 0) {
      if (device->trace_current &&
          hrt_trace_job_overlaps(device->trace_current, written, count)) {
        last = device->trace_current->sequence;
      }
      for (const hrt_trace_job_t* job = device->trace_head; job;
           job = job->next) {
        if (job->kind == HRT_TRACE_JOB_TRACE &&
            hrt_trace_job_overlaps(job, written, count)) {
          last = job->sequence;
        }
      }
    }
    if (last) hrt_trace_wait_locked(device, last);
  }
  hrt_mutex_unlock(&device->mutex);
}

// Work on a dispatch's output that follows the caches. Right after a
// dispatch of 2 to HRT_LOCAL_AFFINITY_PARTS workgroups, its output is still
// in the caches of the workers that wrote it, workgroup i's share being
// part i of the output's bytes (the built-in kernels write linear chunks
// in workgroup order). A job over that output in `count` units runs
// `count` items, each taking (hrt_affine_take) the first unit not yet taken
// whose middle byte is in a part its worker wrote, else any unit not yet
// taken: every unit runs once. A copy from another core's cache ran at
// 16.5 GB/s here, from its own at 24.8.
typedef struct hrt_affine_s {
  uint32_t count;  // 0: no preferences (item i runs unit i)
  uint8_t prefer[HRT_LOCAL_AFFINITY_PARTS];
  atomic_bool taken[HRT_LOCAL_AFFINITY_PARTS];
} hrt_affine_t;

// Queue thread: preferences for `units` units of `unit_bytes` over
// `byte_length` bytes from the last dispatch, if there was one and the
// units are 2 to HRT_LOCAL_AFFINITY_PARTS (larger outputs are out of the
// caches anyway).
static void hrt_affine_init(hrt_affine_t* affine,
                            const hrt_local_device_t* device, uint64_t units,
                            uint64_t unit_bytes, uint64_t byte_length) {
  affine->count = 0;
  const uint32_t parts = device->dispatch_parts;
  if (parts < 2 || units < 2 || units > HRT_LOCAL_AFFINITY_PARTS) return;
  const uint64_t part_bytes = (byte_length + parts - 1) / parts;
  for (uint32_t i = 0; i < units; ++i) {
    uint64_t middle = i * unit_bytes + unit_bytes / 2;
    if (middle >= byte_length) middle = byte_length - 1;
    const uint64_t part = middle / part_bytes;
    affine->prefer[i] =
        device->dispatch_worker[part < parts ? part : parts - 1];
    atomic_init(&affine->taken[i], false);
  }
  affine->count = (uint32_t)units;
}

static bool hrt_affine_try(hrt_affine_t* affine, uint32_t unit) {
  return !atomic_load_explicit(&affine->taken[unit], memory_order_relaxed) &&
         !atomic_exchange_explicit(&affine->taken[unit], true,
                                   memory_order_relaxed);
}

// Any worker, once per item of a job of `count` items: the unit to run.
static uint64_t hrt_affine_take(hrt_affine_t* affine, uint64_t item,
                                uint32_t worker_id) {
  if (affine->count == 0) return item;
  for (uint32_t i = 0; i < affine->count; ++i) {
    if (affine->prefer[i] == worker_id && hrt_affine_try(affine, i)) return i;
  }
  // Fewer than `count` items have run before this one: a unit is left.
  uint32_t i = 0;
  while (!hrt_affine_try(affine, i)) ++i;
  return i;
}

// One source's summary computed by the worker pool: one item per chunk.
typedef struct hrt_summary_job_s {
  hrt_hal_trace_mode_t mode;
  hrt_hal_element_type_t type;
  const void* data;
  uint64_t count;
  hrt_hal_tensor_summary_t* partials;  // [chunk count]
  hrt_affine_t affine;
} hrt_summary_job_t;

static void hrt_summarize_chunk(void* context, uint64_t item,
                                uint32_t worker_id) {
  hrt_summary_job_t* job = context;
  const uint64_t chunk = hrt_affine_take(&job->affine, item, worker_id);
  hrt_hal_tensor_summary_chunk(job->mode, job->type, job->data, job->count,
                               chunk, &job->partials[chunk]);
}

// Queue thread: the summary of `source` (resolved) in `mode`, over the live
// buffer, which every command before the trace has written. On a local-task
// device a source of several chunks is summarized by the worker pool, whose
// partials are merged here in chunk order (the queue thread is the pool's
// only caller); the result is the same as the serial computation's, which
// runs where there is no pool or no memory for the partials.
static void hrt_summarize(hrt_local_device_t* device,
                          const hrt_hal_buffer_ref_t* source,
                          hrt_hal_trace_mode_t mode,
                          hrt_hal_element_type_t type,
                          hrt_hal_tensor_summary_t* out) {
  hrt_summary_job_t job = {
      .mode = mode,
      .type = type,
      .data = hrt_host_address(source),
      .count = source->length / hrt_hal_element_type_size(type),
  };
  const uint64_t chunks = hrt_hal_tensor_summary_chunk_count(job.count);
  if (device->pool && chunks > 1 && chunks <= SIZE_MAX / sizeof(*out)) {
    job.partials = malloc((size_t)chunks * sizeof(*out));
  }
  if (!job.partials) {
    hrt_hal_tensor_summary_compute(mode, type, job.data, job.count, out);
    return;
  }
  hrt_affine_init(
      &job.affine, device, chunks,
      HRT_HAL_TENSOR_SUMMARY_CHUNK * hrt_hal_element_type_size(type),
      source->length);
  hrt_worker_pool_run(device->pool, chunks, hrt_summarize_chunk, &job);
  hrt_hal_tensor_summary_init(out);
  for (uint64_t i = 0; i < chunks; ++i) {
    hrt_hal_tensor_summary_merge(out, &job.partials[i]);
  }
  hrt_hal_tensor_summary_finish(out, mode);
  free(job.partials);
}

// Queue thread, at a trace command: resolves its sources (a summary trace
// computes its summaries now, in program order) and hands it to the trace
// thread (started on first use), unless what the callback gets is small
// and the thread idle (HRT_TRACE_INLINE_BYTES). Where the thread or the job
// cannot be had, runs it here once the jobs before it have run.
static void hrt_trace(hrt_local_device_t* device, hrt_local_submission_t* sub,
                      const hrt_hal_command_t* command) {
  uint32_t count = command->trace.source_count;
  hrt_hal_buffer_ref_t sources[HRT_HAL_MAX_TRACE_SOURCES];
  hrt_hal_tensor_summary_t summaries[HRT_HAL_MAX_TRACE_SOURCES];
  const bool summary = command->trace.mode != HRT_HAL_TRACE_FULL;
  uint64_t bytes = 0;
  for (uint32_t i = 0; i < count; ++i) {
    sources[i] = hrt_hal_pending_submission_resolve(&sub->pending,
                                                    &command->trace.sources[i]);
    if (summary) {
      hrt_summarize(device, &sources[i], command->trace.mode,
                    command->trace.element_types[i], &summaries[i]);
      bytes += sizeof(summaries[i]);
    } else {
      bytes += sources[i].length;
    }
  }
  const size_t item =
      summary ? sizeof(hrt_hal_tensor_summary_t) : sizeof(hrt_hal_buffer_ref_t);
  // With workers, a full trace runs here, where the sink's copies can be
  // spread over them (hrt_local_copy_host) while they would otherwise wait
  // for the next dispatch; on the trace thread it would compete with them
  // for the cores.
  const bool here = !summary && device->base.info.worker_count > 1;
  hrt_trace_job_t* job = NULL;
  if (!here && (bytes >= HRT_TRACE_INLINE_BYTES || hrt_trace_busy(device))) {
    if (!device->trace_started) {
      hrt_status_t status = hrt_thread_create("halrt-trace", hrt_trace_main,
                                              device, &device->trace_thread);
      device->trace_started = status == HRT_OK;
      hrt_status_free(status);
    }
    if (device->trace_started) job = malloc(sizeof(*job) + count * item);
  }
  if (!job) {
    hrt_trace_drain(device);
    hrt_trace_run(sub, command, summary ? NULL : sources,
                  summary ? summaries : NULL);
    return;
  }
  job->kind = HRT_TRACE_JOB_TRACE;
  job->sub = sub;
  job->trace.command = command;
  job->trace.source_count = count;
  job->trace.sources = summary ? NULL : (hrt_hal_buffer_ref_t*)(job + 1);
  job->trace.summaries = summary ? (hrt_hal_tensor_summary_t*)(job + 1) : NULL;
  memcpy(job + 1, summary ? (const void*)summaries : (const void*)sources,
         count * item);
  hrt_trace_enqueue(device, job);
}

// A copy spread over the worker pool: one item per chunk.
#define HRT_LOCAL_COPY_CHUNK ((uint64_t)128 * 1024)

typedef struct hrt_copy_job_s {
  char* dst;
  const char* src;
  uint64_t length;
  bool streaming;
  hrt_affine_t affine;
} hrt_copy_job_t;

static void hrt_copy_chunk(void* context, uint64_t item, uint32_t worker_id) {
  hrt_copy_job_t* job = context;
  const uint64_t begin =
      hrt_affine_take(&job->affine, item, worker_id) * HRT_LOCAL_COPY_CHUNK;
  const uint64_t left = job->length - begin;
  hrt_copy(job->dst + begin, job->src + begin,
           (size_t)(left < HRT_LOCAL_COPY_CHUNK ? left : HRT_LOCAL_COPY_CHUNK),
           job->streaming);
}

// Any thread; on the queue thread (the pool's only caller, which runs
// traces between jobs) the chunks go to the worker pool, each first to a
// worker that wrote it (hrt_affine_t).
static void hrt_local_copy_host(hrt_hal_device_t* base, void* dst,
                                const void* src, uint64_t byte_length,
                                bool streaming) {
  hrt_local_device_t* device = (hrt_local_device_t*)base;
  const uint64_t chunks =
      (byte_length + HRT_LOCAL_COPY_CHUNK - 1) / HRT_LOCAL_COPY_CHUNK;
  if (!device->pool || chunks < 2 || !hrt_thread_is_current(&device->thread)) {
    hrt_copy(dst, src, (size_t)byte_length, streaming);
    return;
  }
  hrt_copy_job_t job = {
      .dst = dst, .src = src, .length = byte_length, .streaming = streaming};
  hrt_affine_init(&job.affine, device, chunks, HRT_LOCAL_COPY_CHUNK,
                  byte_length);
  hrt_worker_pool_run(device->pool, chunks, hrt_copy_chunk, &job);
}

//===----------------------------------------------------------------------===//
// Loans (hal/device.h)
//===----------------------------------------------------------------------===//

// Under the mutex.
static void hrt_loan_unlink(hrt_local_device_t* device,
                            hrt_local_loan_t* loan) {
  if (loan->prev) loan->prev->next = loan->next;
  if (loan->next) loan->next->prev = loan->prev;
  if (device->loans == loan) device->loans = loan->next;
  atomic_store_explicit(
      &device->loan_count,
      atomic_load_explicit(&device->loan_count, memory_order_relaxed) - 1,
      memory_order_release);
}

// The completion thread, during the trace callback given `data`.
static hrt_hal_loan_t* hrt_local_lend(hrt_hal_device_t* base,
                                      hrt_hal_buffer_t* buffer,
                                      const void* data, uint64_t length,
                                      void* spare) {
  hrt_local_device_t* device = (hrt_local_device_t*)base;
  if (buffer->device != base) return NULL;
  hrt_local_loan_t* loan = calloc(1, sizeof(*loan));
  if (loan == NULL) return NULL;
  loan->base.device = base;
  loan->buffer = buffer;
  loan->data = data;
  loan->length = length;
  loan->spare = spare;
  loan->state = HRT_LOCAL_LOAN_LENT;
  hrt_hal_buffer_retain(buffer);
  hrt_mutex_lock(&device->mutex);
  loan->next = device->loans;
  if (device->loans) device->loans->prev = loan;
  device->loans = loan;
  atomic_store_explicit(
      &device->loan_count,
      atomic_load_explicit(&device->loan_count, memory_order_relaxed) + 1,
      memory_order_release);
  hrt_mutex_unlock(&device->mutex);
  return &loan->base;
}

static const void* hrt_local_loan_open(hrt_hal_loan_t* base) {
  hrt_local_loan_t* loan = (hrt_local_loan_t*)base;
  hrt_local_device_t* device = (hrt_local_device_t*)base->device;
  hrt_mutex_lock(&device->mutex);
  while (loan->state == HRT_LOCAL_LOAN_COPYING) {
    hrt_cond_wait(&device->loan_cond, &device->mutex);
  }
  if (loan->state == HRT_LOCAL_LOAN_LENT) loan->state = HRT_LOCAL_LOAN_OPEN;
  const void* bytes = loan->state == HRT_LOCAL_LOAN_OPEN
                          ? (const void*)loan->data
                          : loan->spare;
  hrt_mutex_unlock(&device->mutex);
  return bytes;
}

static void hrt_local_loan_close(hrt_hal_loan_t* base, bool abandon) {
  hrt_local_loan_t* loan = (hrt_local_loan_t*)base;
  hrt_local_device_t* device = (hrt_local_device_t*)base->device;
  hrt_mutex_lock(&device->mutex);
  // A writer copying into the spare is done before the caller reuses it.
  while (loan->state == HRT_LOCAL_LOAN_COPYING) {
    hrt_cond_wait(&device->loan_cond, &device->mutex);
  }
  const bool was_open = loan->state == HRT_LOCAL_LOAN_OPEN;
  if (loan->state != HRT_LOCAL_LOAN_COPIED) {
    hrt_loan_unlink(device, loan);
    if (was_open) hrt_cond_broadcast(&device->loan_cond);
  }
  hrt_mutex_unlock(&device->mutex);
  // Abandoned while open, the buffer's own bytes may still be read: they
  // are kept for good (the buffer and the device still go). Lent or copied,
  // JavaScript never had them.
  if (abandon && was_open) {
    atomic_store(&((hrt_local_buffer_t*)loan->buffer)->keep_storage, true);
  }
  // The buffer may be the last reference to the device: released last.
  hrt_hal_buffer_t* buffer = loan->buffer;
  free(loan);
  hrt_hal_buffer_release(buffer);
}

// Whether `loan`'s bytes share one with the host ranges `written`.
static bool hrt_loan_overlaps(const hrt_local_loan_t* loan,
                              const hrt_hal_buffer_ref_t* written,
                              uint32_t count) {
  for (uint32_t i = 0; i < count; ++i) {
    const char* begin = hrt_host_address(&written[i]);
    if (written[i].length > 0 && loan->length > 0 &&
        begin < loan->data + loan->length &&
        loan->data < begin + written[i].length) {
      return true;
    }
  }
  return false;
}

// Queue thread, before `command` of `sub`: keeps every loan of a range the
// command may write as it was lent. A lent one is copied into its spare
// first (the mutex is not held during the copies: submitters take it), an
// open one is waited for.
static void hrt_loans_before_write(hrt_local_device_t* device,
                                   const hrt_local_submission_t* sub,
                                   const hrt_hal_command_t* command) {
  if (atomic_load_explicit(&device->loan_count, memory_order_acquire) == 0) {
    return;
  }
  hrt_hal_buffer_ref_t written[HRT_HAL_MAX_DISPATCH_BINDINGS];
  const uint32_t count =
      hrt_hal_pending_submission_written(&sub->pending, command, written);
  if (count == 0) return;
  hrt_mutex_lock(&device->mutex);
  for (;;) {
    hrt_local_loan_t* copies = NULL;
    bool open = false;
    for (hrt_local_loan_t* loan = device->loans; loan; loan = loan->next) {
      if (!hrt_loan_overlaps(loan, written, count)) continue;
      if (loan->state == HRT_LOCAL_LOAN_LENT) {
        loan->state = HRT_LOCAL_LOAN_COPYING;
        loan->copy_next = copies;
        copies = loan;
      } else if (loan->state == HRT_LOCAL_LOAN_OPEN) {
        open = true;
      }
    }
    if (copies) {
      hrt_mutex_unlock(&device->mutex);
      for (hrt_local_loan_t* loan = copies; loan; loan = loan->copy_next) {
        hrt_local_copy_host(&device->base, loan->spare, loan->data,
                            loan->length, false);
      }
      hrt_mutex_lock(&device->mutex);
      for (hrt_local_loan_t* loan = copies; loan; loan = loan->copy_next) {
        hrt_loan_unlink(device, loan);
        loan->state = HRT_LOCAL_LOAN_COPIED;
      }
      hrt_cond_broadcast(&device->loan_cond);
      continue;
    }
    if (!open) break;
    hrt_cond_wait(&device->loan_cond, &device->mutex);
  }
  hrt_mutex_unlock(&device->mutex);
}

// Queue thread: reports a dispatch's time after every trace before it.
static void hrt_timing(hrt_local_device_t* device, hrt_local_submission_t* sub,
                       uint32_t command_index, int64_t start_ns,
                       int64_t duration_ns) {
  hrt_trace_job_t* job = hrt_trace_busy(device) ? malloc(sizeof(*job)) : NULL;
  if (!job) {
    hrt_trace_drain(device);
    hrt_timing_run(sub, command_index, start_ns, duration_ns);
    return;
  }
  job->kind = HRT_TRACE_JOB_TIMING;
  job->sub = sub;
  job->timing.command_index = command_index;
  job->timing.start_ns = start_ns;
  job->timing.duration_ns = duration_ns;
  hrt_trace_enqueue(device, job);
}

//===----------------------------------------------------------------------===//
// Submissions (queue thread)
//===----------------------------------------------------------------------===//

// Runs the commands of `sub` in order, until one fails or one of its traces
// has failed (the submission fails with the trace's status then).
static hrt_status_t hrt_execute(hrt_local_device_t* device,
                                hrt_local_submission_t* sub) {
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
    hrt_trace_order_writer(device, sub, command);
    hrt_loans_before_write(device, sub, command);
    if (atomic_load_explicit(&sub->trace_failed, memory_order_relaxed)) break;
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
          hrt_timing(device, sub, i, start, hrt_time_now_ns() - start);
        }
        break;
      }
      case HRT_HAL_COMMAND_TRACE:
        hrt_trace(device, sub, command);
        break;
      case HRT_HAL_COMMAND_BARRIER:
        // Commands already run strictly in order on this device.
        break;
    }
  }
  return HRT_OK;
}

// Runs one submission, then finishes it (see hal/pending_submission.h: its
// reference to the device, possibly the last one, is dropped before its
// completion runs): here, or on the trace thread after the jobs handed off
// before it.
static void hrt_complete(hrt_local_device_t* device,
                         hrt_local_submission_t* sub) {
  hrt_status_t status = hrt_execute(device, sub);
  if (!hrt_trace_busy(device)) {
    hrt_finish_run(device, sub, status);
    return;
  }
  sub->finish_job.kind = HRT_TRACE_JOB_FINISH;
  sub->finish_job.sub = sub;
  sub->finish_job.finish_status = status;
  hrt_trace_enqueue(device, &sub->finish_job);
}

static void hrt_local_device_free(hrt_local_device_t* device) {
  hrt_local_allocator_deinitialize(&device->allocator);
  hrt_worker_pool_destroy(device->pool);
  hrt_cond_deinit(&device->loan_cond);
  hrt_cond_deinit(&device->trace_cond);
  hrt_cond_deinit(&device->cond);
  hrt_mutex_deinit(&device->mutex);
  hrt_hal_device_deinitialize(&device->base);
  free(device);
}

// How long the queue thread looks for the next submission once the queue
// is empty before it sleeps. A caller that awaits each result, or keeps
// several in flight, submits again within microseconds; waking a sleeping
// thread costs the submitter a system call and both threads several
// microseconds (most of the JS thread's time per call on a VM). The spin
// yields the core between looks (hrt_thread_yield) rather than pausing: a
// submitter that shares the core runs at once instead of waiting out the
// spin (on 2 cores with one taken by other work, a pausing spin tripled the
// latency of a call awaited in a loop, which is why an earlier version
// stopped spinning for a while after a spin found nothing).
#define HRT_LOCAL_QUEUE_SPIN_NS ((int64_t)50 * 1000)

// Queue thread, without the mutex: waits until a submission is queued or
// HRT_LOCAL_QUEUE_SPIN_NS have passed, without sleeping.
static void hrt_queue_spin(hrt_local_device_t* device) {
  const int64_t until = hrt_time_now_ns() + HRT_LOCAL_QUEUE_SPIN_NS;
  while (!atomic_load_explicit(&device->queued, memory_order_relaxed) &&
         hrt_time_now_ns() < until) {
    hrt_thread_yield();
  }
}

// Runs submissions in FIFO order. Once the queue is empty after work, it
// spins a while (hrt_queue_spin) before sleeping. Between submissions, trims
// the allocator once the device has been idle (no submission, no block
// cached since it looked) for HRT_LOCAL_ALLOCATOR_IDLE_TRIM_NS with
// something cached.
static void* hrt_queue_main(void* arg) {
  hrt_thread_give_way();
  hrt_local_device_t* device = arg;
  int64_t trim_at = HRT_TIME_INFINITE_FUTURE;
  bool worked = false;  // since the queue was last seen empty
  bool spun = false;    // since the last submission was taken
  hrt_mutex_lock(&device->mutex);
  for (;;) {
    if (!device->head && !device->shutdown) {
      if (worked && !spun) {
        spun = true;
        hrt_mutex_unlock(&device->mutex);
        hrt_queue_spin(device);
        hrt_mutex_lock(&device->mutex);
        continue;
      }
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
      device->queue_sleeping = true;
      (void)hrt_cond_wait_until(&device->cond, &device->mutex, trim_at);
      device->queue_sleeping = false;
      continue;
    }
    // Everything queued is taken at once, so that a submitter contends for
    // the mutex once per batch rather than once per submission.
    hrt_local_submission_t* sub = device->head;
    if (!sub) break;  // shut down with nothing left
    device->head = device->tail = NULL;
    atomic_store_explicit(&device->queued, false, memory_order_relaxed);
    hrt_mutex_unlock(&device->mutex);
    while (sub) {
      hrt_local_submission_t* next = sub->next;
      hrt_complete(device, sub);
      sub = next;
    }
    worked = true;
    spun = false;
    hrt_mutex_lock(&device->mutex);
  }
  bool free_on_exit = device->free_on_exit;
  hrt_mutex_unlock(&device->mutex);
  if (free_on_exit) {
    // The trace thread has been told to stop and has nothing left to run.
    if (device->trace_started) hrt_thread_join(&device->trace_thread);
    hrt_thread_detach(&device->thread);
    hrt_local_device_free(device);
  }
  return NULL;
}

//===----------------------------------------------------------------------===//
// Device
//===----------------------------------------------------------------------===//

// Only called at refcount zero: no submission is pending (each holds a
// reference until its finish has run), so both queues are empty. On the
// queue or the trace thread (a finish released the device), that thread
// frees the device as it exits, after joining the other one.
static void hrt_local_device_destroy(hrt_hal_device_t* base) {
  hrt_local_device_t* device = (hrt_local_device_t*)base;
  bool on_queue_thread = hrt_thread_is_current(&device->thread);
  bool on_trace_thread =
      device->trace_started && hrt_thread_is_current(&device->trace_thread);
  hrt_mutex_lock(&device->mutex);
  device->shutdown = true;
  device->free_on_exit = on_queue_thread;
  device->trace_shutdown = true;
  device->trace_free_on_exit = on_trace_thread;
  hrt_cond_signal(&device->cond);
  hrt_cond_signal(&device->trace_cond);
  hrt_mutex_unlock(&device->mutex);
  if (on_queue_thread || on_trace_thread) return;
  hrt_thread_join(&device->thread);
  if (device->trace_started) hrt_thread_join(&device->trace_thread);
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
  HRT_RETURN_IF_ERROR(hrt_allocate_recycled(
      sizeof(*sub) + hrt_hal_pending_submission_storage_size(submission),
      "submission", (void**)&sub));
  atomic_init(&sub->trace_failed, false);
  hrt_hal_pending_submission_init(&sub->pending, submission, sub + 1);
  hrt_hal_device_retain(base);

  hrt_mutex_lock(&device->mutex);
  HRT_LIST_APPEND(device->head, device->tail, sub, next);
  atomic_store_explicit(&device->queued, true, memory_order_relaxed);
  // Only a sleeping queue thread is signalled: a spinning or busy one finds
  // the submission itself, and neither side then makes a system call. The
  // signal stays under the mutex: after the unlock the submission may
  // already have completed and dropped the last reference to the device
  // (the caller's may have gone to the completion).
  if (device->queue_sleeping) hrt_cond_signal(&device->cond);
  hrt_mutex_unlock(&device->mutex);
  return HRT_OK;
}

static const hrt_hal_device_vtable_t hrt_local_device_vtable = {
    .destroy = hrt_local_device_destroy,
    .allocate_buffer = hrt_local_allocate_buffer,
    .create_executable = hrt_local_create_executable,
    .queue_submit = hrt_local_queue_submit,
    .copy_host = hrt_local_copy_host,
    .lend = hrt_local_lend,
    .loan_open = hrt_local_loan_open,
    .loan_close = hrt_local_loan_close,
};

hrt_status_t hrt_local_device_create(const char* driver_name,
                                     uint32_t worker_count, const char* uri,
                                     hrt_hal_device_t** out_device) {
  hrt_local_device_t* device = NULL;
  HRT_RETURN_IF_ERROR(
      hrt_allocate_zeroed(sizeof(*device), "device", (void**)&device));
  atomic_init(&device->queued, false);
  hrt_status_t status =
      hrt_local_allocator_initialize(hrt_physical_memory(), &device->allocator);
  if (status != HRT_OK) {
    free(device);
    return status;
  }
  hrt_mutex_init(&device->mutex);
  hrt_cond_init(&device->cond);
  hrt_cond_init(&device->trace_cond);
  hrt_cond_init(&device->loan_cond);
  atomic_init(&device->loan_count, 0);
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
    hrt_cond_deinit(&device->loan_cond);
    hrt_cond_deinit(&device->trace_cond);
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
