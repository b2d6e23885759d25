#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/threads.h"
#include "hal/cuda/builtin_ptx.h"
#include "hal/cuda/cuda_allocator.h"
#include "hal/cuda/cuda_device_internal.h"
#include "hal/cuda/cuda_executable.h"
#include "hal/cuda/cuda_staging.h"
#include "hal/pending_submission.h"
#include "hal/tensor_summary.h"

// Devices being finished after destroy
//===----------------------------------------------------------------------===//

// Destroyed devices whose completion thread has not freed them yet. The
// process waits for them at exit, so that no CUDA call runs while the
// driver is torn down. They hold the primary context until then: a device
// created meanwhile shares it, and if it is lost (the way to recover is to
// release the lost devices and create a new one), waits for them and tries
// again on a fresh one.
static struct {
  pthread_once_t once;
  hrt_mutex_t mutex;
  hrt_cond_t cond;
  // Guarded by mutex.
  uint32_t count;
  uint64_t freed;  // how many were freed so far
} hrt_cuda_finishing = {.once = PTHREAD_ONCE_INIT};

uint64_t hrt_cuda_finishing_wait(void) {
  hrt_mutex_lock(&hrt_cuda_finishing.mutex);
  while (hrt_cuda_finishing.count) {
    hrt_cond_wait(&hrt_cuda_finishing.cond, &hrt_cuda_finishing.mutex);
  }
  const uint64_t freed = hrt_cuda_finishing.freed;
  hrt_mutex_unlock(&hrt_cuda_finishing.mutex);
  return freed;
}

uint64_t hrt_cuda_finishing_freed(void) {
  hrt_mutex_lock(&hrt_cuda_finishing.mutex);
  const uint64_t freed = hrt_cuda_finishing.freed;
  hrt_mutex_unlock(&hrt_cuda_finishing.mutex);
  return freed;
}

static void hrt_cuda_finishing_wait_at_exit(void) {
  (void)hrt_cuda_finishing_wait();
}

static void hrt_cuda_finishing_init(void) {
  hrt_mutex_init(&hrt_cuda_finishing.mutex);
  hrt_cond_init(&hrt_cuda_finishing.cond);
  // If it cannot be registered, exit does not wait.
  (void)atexit(hrt_cuda_finishing_wait_at_exit);
}

void hrt_cuda_finishing_setup(void) {
  pthread_once(&hrt_cuda_finishing.once, hrt_cuda_finishing_init);
}

void hrt_cuda_finishing_begin(void) {
  hrt_mutex_lock(&hrt_cuda_finishing.mutex);
  ++hrt_cuda_finishing.count;
  hrt_mutex_unlock(&hrt_cuda_finishing.mutex);
}

// Its completion thread, having freed it.
static void hrt_cuda_finishing_end(void) {
  hrt_mutex_lock(&hrt_cuda_finishing.mutex);
  --hrt_cuda_finishing.count;
  ++hrt_cuda_finishing.freed;
  hrt_cond_broadcast(&hrt_cuda_finishing.cond);
  hrt_mutex_unlock(&hrt_cuda_finishing.mutex);
}

// The host side of commands [begin, end), whose device work has completed:
// reads are copied to their targets and a trace (always the last command
// of its range) is handed its staged ranges or summaries.
static hrt_status_t hrt_cuda_finish_range(const hrt_cuda_submission_t* sub,
                                          uint32_t begin, uint32_t end) {
  for (uint32_t i = begin; i < end && i < sub->issued; ++i) {
    const hrt_hal_command_t* command =
        hrt_hal_command_buffer_at(sub->pending.command_buffer, i);
    const char* staged = hrt_cuda_staged(sub, sub->staging_offsets[i]);
    if (command->type == HRT_HAL_COMMAND_READ) {
      hrt_hal_buffer_ref_t source = hrt_hal_pending_submission_resolve(
          &sub->pending, &command->read.source);
      if (source.length) {
        memcpy(command->read.host_target, staged, (size_t)source.length);
      }
    } else if (command->type == HRT_HAL_COMMAND_TRACE) {
      const void* data[HRT_HAL_MAX_TRACE_SOURCES];
      uint64_t lengths[HRT_HAL_MAX_TRACE_SOURCES];
      const uint32_t count = command->trace.source_count;
      // An empty range still gets a valid address.
      static const char empty[1];
      for (uint32_t j = 0; j < count; ++j) {
        if (command->trace.mode != HRT_HAL_TRACE_FULL) {
          lengths[j] = sizeof(hrt_hal_tensor_summary_t);
          data[j] = staged + j * sizeof(hrt_hal_tensor_summary_t);
          continue;
        }
        lengths[j] = hrt_hal_pending_submission_resolve(
                         &sub->pending, &command->trace.sources[j])
                         .length;
        data[j] = lengths[j] ? staged : empty;
        if (lengths[j]) staged += hrt_cuda_align(lengths[j]);
      }
      HRT_RETURN_IF_ERROR(command->trace.fn(command->trace.user_data,
                                            sub->pending.host_context, count,
                                            data, lengths, NULL));
    }
  }
  return HRT_OK;
}

// Says which commands a failed wait covered. Consumes `status`.
static hrt_status_t hrt_cuda_annotate_range(hrt_status_t status, uint32_t begin,
                                            uint32_t end) {
  if (end == begin + 1) {
    return hrt_status_annotate(status, "waiting for command %u", begin);
  }
  if (end > begin) {
    return hrt_status_annotate(status, "waiting for commands %u to %u", begin,
                               end - 1);
  }
  return hrt_status_annotate(status, "waiting for the end of the submission");
}

// Elapsed device time from `start` to `end` in ns, or -1 when unknown.
static int64_t hrt_cuda_elapsed_ns(const hrt_cuda_symbols_t* cu,
                                   hrt_cu_event_t start, hrt_cu_event_t end) {
  float milliseconds = 0;
  if (!start || !end || cu->cuEventElapsedTime(&milliseconds, start, end)) {
    return -1;
  }
  return (int64_t)((double)milliseconds * 1e6);
}

// Hands the timed dispatches among commands [0, end) not yet reported to the
// submission's dispatch_timing; every command before `end` has completed.
//
// Times come from one device timeline: each profiled submission's first
// event is placed on it relative to the previous one (`anchor`), so times of
// different submissions are as consistent as the GPU's clock, and one
// queue's dispatches never overlap. The timeline meets the host clock
// through observations: when the completion thread sees the stream past an
// event, the host time is at least that event's; the host offset is the
// least (now - timeline point) seen, so mapped times are never before the
// true ones and never after the observation. The offset can only shrink, so
// a start is also kept at or after the end of the dispatch reported before
// it, and an end at or before now: one queue's reported dispatches never
// overlap and each lies within its invocation (a duration is shortened in
// the rare case where both limits meet).
static void hrt_cuda_report_timings(hrt_cuda_device_t* device,
                                    hrt_cuda_submission_t* sub, uint32_t end) {
  const hrt_cuda_symbols_t* cu = device->cu;
  hrt_cuda_timing_t* first = &sub->timings[0];
  uint32_t stop = sub->timings_reported;
  while (stop < sub->timing_count && sub->timings[stop].command < end) ++stop;
  if (stop == sub->timings_reported) return;
  int64_t now = hrt_time_now_ns();
  if (sub->timeline_ns < 0) {
    int64_t step = device->anchor
                       ? hrt_cuda_elapsed_ns(cu, device->anchor, first->start)
                       : 0;
    sub->timeline_ns = device->anchor_ns + (step > 0 ? step : 0);
    // The submission's first event becomes the anchor (owned from now on).
    if (device->anchor) (void)cu->cuEventDestroy_v2(device->anchor);
    device->anchor = first->start;
    device->anchor_ns = sub->timeline_ns;
    first->start = NULL;
  }
  const hrt_cuda_timing_t* last = &sub->timings[stop - 1];
  int64_t last_end = hrt_cuda_elapsed_ns(cu, device->anchor, last->end);
  if (last_end >= 0) {
    int64_t offset = now - (int64_t)sub->timeline_ns - last_end;
    if (offset < device->host_offset_ns) device->host_offset_ns = offset;
  }
  for (; sub->timings_reported < stop; ++sub->timings_reported) {
    const hrt_cuda_timing_t* timing = &sub->timings[sub->timings_reported];
    hrt_cu_event_t start = timing->start ? timing->start : device->anchor;
    int64_t offset = hrt_cuda_elapsed_ns(cu, device->anchor, start);
    int64_t duration = hrt_cuda_elapsed_ns(cu, start, timing->end);
    if (offset < 0 || duration < 0) continue;
    int64_t host_start =
        device->host_offset_ns + (int64_t)sub->timeline_ns + offset;
    if (host_start < device->reported_end_ns) {
      host_start = device->reported_end_ns;
    }
    if (host_start > now) host_start = now;
    if (host_start + duration > now) duration = now - host_start;
    device->reported_end_ns = host_start + duration;
    sub->pending.dispatch_timing(sub->pending.host_context, timing->command,
                                 host_start, duration);
  }
}

static void hrt_cuda_destroy_timings(const hrt_cuda_symbols_t* cu,
                                     hrt_cuda_submission_t* sub) {
  for (uint32_t i = 0; i < sub->timing_count; ++i) {
    if (sub->timings[i].start)
      (void)cu->cuEventDestroy_v2(sub->timings[i].start);
    if (sub->timings[i].end) (void)cu->cuEventDestroy_v2(sub->timings[i].end);
  }
}

// Waits for the submission's checkpoints in order and runs their host work;
// signals the semaphores in order (one that cannot be signalled fails the
// submission, and the semaphores after it with it); drops what the
// submission retained; calls the completion; and only then drops the
// submission's reference to the device (possibly the last one).
static void hrt_cuda_complete(hrt_cuda_device_t* device,
                              hrt_cuda_submission_t* sub) {
  const hrt_cuda_symbols_t* cu = device->cu;
  hrt_status_t status = HRT_OK;
  uint32_t begin = 0;
  for (uint32_t k = 0; k < sub->checkpoint_count; ++k) {
    const hrt_cuda_checkpoint_t* checkpoint = &sub->checkpoints[k];
    hrt_status_t waited =
        HRT_CUDA_CALL(cu, cuEventSynchronize, (checkpoint->event));
    if (status == HRT_OK && waited != HRT_OK) {
      status = hrt_cuda_check_lost(
          device, hrt_cuda_annotate_range(waited, begin, checkpoint->end));
    } else {
      hrt_status_free(waited);
    }
    if (status == HRT_OK) {
      hrt_cuda_report_timings(device, sub, checkpoint->end);
      status = hrt_cuda_finish_range(sub, begin, checkpoint->end);
    }
    if (checkpoint->trace_of) hrt_cuda_forget_trace(device, checkpoint);
    (void)cu->cuEventDestroy_v2(checkpoint->event);
    begin = checkpoint->end;
  }
  if (status == HRT_OK) {
    status = sub->issue_status;
  } else {
    hrt_status_free(sub->issue_status);
  }
  hrt_cuda_destroy_timings(cu, sub);
  hrt_cuda_staging_release(&device->staging, sub->staging);
  hrt_hal_pending_submission_finish(&sub->pending, status, sub, &device->base);
}

// Releases the CUDA resources and frees the device: the completion thread,
// about to exit, with the issue thread gone.
static void hrt_cuda_device_free(hrt_cuda_device_t* device) {
  hrt_status_t entered = hrt_cuda_enter(device);
  if (device->anchor) (void)device->cu->cuEventDestroy_v2(device->anchor);
  hrt_cuda_staging_pool_deinitialize(&device->staging);
  if (entered == HRT_OK) hrt_cuda_leave(device);
  hrt_status_free(entered);
  hrt_cuda_close(device);
  hrt_status_free(device->lost);
  hrt_mutex_deinit(&device->traces_mutex);
  hrt_cond_deinit(&device->completion_cond);
  hrt_cond_deinit(&device->issue_cond);
  hrt_mutex_deinit(&device->mutex);
  hrt_hal_device_deinitialize(&device->base);
  free(device);
}

// Waits for an upload's copy and releases its staging block. A failed wait
// that loses the device marks it lost; the buffer's later users see that.
static void hrt_cuda_finish_upload(hrt_cuda_device_t* device,
                                   hrt_cuda_upload_t* upload) {
  const hrt_cuda_symbols_t* cu = device->cu;
  hrt_status_t status =
      upload->event ? HRT_CUDA_CALL(cu, cuEventSynchronize, (upload->event))
                    : HRT_CUDA_CALL(cu, cuStreamSynchronize, (device->stream));
  hrt_status_free(hrt_cuda_check_lost(device, status));
  if (upload->event) (void)cu->cuEventDestroy_v2(upload->event);
  hrt_cuda_staging_release(&device->staging, upload->staging);
  free(upload);
}

// Runs uploads and submissions as they are handed over, in FIFO order
// each; releases what the allocator could not keep as soon as nothing else
// waits, and trims the allocator once the device has been idle for
// HRT_CUDA_IDLE_TRIM_NS after the end of its last upload or submission, or
// its last free. At shutdown (every queue
// empty) it deinitialises the allocator, so that every cuMemFree runs here.
void* hrt_cuda_completion_main(void* arg) {
  hrt_cuda_device_t* device = arg;
  (void)device->cu->cuCtxSetCurrent(device->context);
  int64_t trim_at = HRT_TIME_INFINITE_FUTURE;
  hrt_mutex_lock(&device->mutex);
  for (;;) {
    hrt_cuda_upload_t* upload = device->upload_head;
    hrt_cuda_submission_t* sub = device->completion_head;
    if (device->memory_freed) {
      trim_at = hrt_time_now_ns() + HRT_CUDA_IDLE_TRIM_NS;
      device->memory_freed = false;
    }
    if (upload) {
      device->upload_head = upload->next;
      if (!device->upload_head) device->upload_tail = NULL;
      hrt_mutex_unlock(&device->mutex);
      hrt_cuda_finish_upload(device, upload);
      // Idle from when the work ended, not from when it was taken.
      trim_at = hrt_time_now_ns() + HRT_CUDA_IDLE_TRIM_NS;
    } else if (sub) {
      device->completion_head = sub->next;
      if (!device->completion_head) device->completion_tail = NULL;
      hrt_mutex_unlock(&device->mutex);
      hrt_cuda_complete(device, sub);
      trim_at = hrt_time_now_ns() + HRT_CUDA_IDLE_TRIM_NS;
    } else if (device->unloads) {
      hrt_cuda_unload_t* unloads = device->unloads;
      device->unloads = NULL;
      hrt_mutex_unlock(&device->mutex);
      while (unloads) {
        hrt_cuda_unload_t* next = unloads->next;
        // Fails only on a lost context, and there is no one to tell.
        (void)device->cu->cuModuleUnload(unloads->module);
        free(unloads);
        unloads = next;
      }
    } else if (device->release_due) {
      device->release_due = false;
      hrt_mutex_unlock(&device->mutex);
      hrt_cuda_allocator_release_pending(&device->allocator);
    } else if (device->shutdown) {
      break;
    } else if (hrt_time_now_ns() >= trim_at) {
      hrt_mutex_unlock(&device->mutex);
      // A free still queued in the stream has not given its memory back to
      // the pool yet: a trim now would keep it reserved until the next one.
      // So trim once the stream has run everything, asking again shortly
      // (never waiting: new work may need this thread).
      if (device->cu->cuStreamQuery(device->stream) ==
          HRT_CUDA_ERROR_NOT_READY) {
        trim_at = hrt_time_now_ns() + HRT_CUDA_TRIM_RETRY_NS;
      } else {
        trim_at = HRT_TIME_INFINITE_FUTURE;
        hrt_cuda_allocator_trim(&device->allocator);
      }
    } else {
      (void)hrt_cond_wait_until(&device->completion_cond, &device->mutex,
                                trim_at);
      continue;
    }
    hrt_mutex_lock(&device->mutex);
  }
  hrt_mutex_unlock(&device->mutex);
  // With nothing to issue the issue thread exits at once.
  hrt_thread_join(&device->issue_thread);
  // The stream-ordered frees still queued (and the fills before them) run
  // first, so that the last trim gives their memory back. Fails only on a
  // lost context. (Every trace copy was waited for by its submission.)
  (void)device->cu->cuStreamSynchronize(device->stream);
  hrt_cuda_allocator_deinitialize(&device->allocator);
  hrt_thread_detach(&device->completion_thread);
  hrt_cuda_device_free(device);
  hrt_cuda_finishing_end();
  return NULL;
}

//===----------------------------------------------------------------------===//
