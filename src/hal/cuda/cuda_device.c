#include "hal/cuda/cuda_device.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/threads.h"
#include "hal/cuda/builtin_ptx.h"
#include "hal/cuda/cuda_allocator.h"
#include "hal/cuda/cuda_executable.h"
#include "hal/cuda/cuda_staging.h"
#include "hal/pending_submission.h"
#include "hal/tensor_summary.h"

// Staged ranges start at multiples of this (DMA-friendly, and aligned for
// any element type a trace callback reads).
#define HRT_CUDA_STAGING_ALIGNMENT 64u

// The most blocks hrt_summary_partial runs with (the partials one source
// leaves in the summary scratch), and the elements per thread that make a
// smaller source use fewer.
#define HRT_CUDA_SUMMARY_MAX_BLOCKS 1024u
#define HRT_CUDA_SUMMARY_ELEMENTS_PER_THREAD 16u

// How long the device stays idle (nothing to complete, memory freed since
// the last trim) before the completion thread trims the allocator.
#define HRT_CUDA_IDLE_TRIM_NS ((int64_t)500 * 1000 * 1000)
// How soon an idle trim is tried again while the stream still runs work (the
// stream-ordered frees a trim is for).
#define HRT_CUDA_TRIM_RETRY_NS ((int64_t)20 * 1000 * 1000)

// An upload enqueued by allocate (a buffer's initial data): the staging
// block its copy reads, released by the completion thread once `event`
// (recorded after the copy) has completed. event NULL: recording failed;
// the completion thread waits for the whole stream instead.
typedef struct hrt_cuda_upload_s {
  struct hrt_cuda_upload_s* next;
  hrt_cu_event_t event;
  hrt_cuda_staging_t staging;
} hrt_cuda_upload_t;

// A module of a released executable, for the completion thread to unload
// (hrt_cuda_device_unload_module).
typedef struct hrt_cuda_unload_s {
  struct hrt_cuda_unload_s* next;
  hrt_cu_module_t module;
} hrt_cuda_unload_t;

// An event recorded after commands [previous checkpoint's end, end): on
// the stream, or for a trace (command end - 1) on the trace stream after
// its copies, which waited for the commands before it on the stream.
typedef struct hrt_cuda_checkpoint_s {
  hrt_cu_event_t event;
  uint32_t end;
  // A trace's checkpoint is in the device's `traces` from when it is
  // recorded until the completion thread has waited for it.
  const hrt_hal_pending_submission_t* trace_of;  // NULL: not a trace's
  struct hrt_cuda_checkpoint_s* next_trace;
  bool waited;  // issue thread only: the stream was made to wait for it
} hrt_cuda_checkpoint_t;

// The events around one dispatch of a profiled submission.
typedef struct hrt_cuda_timing_s {
  uint32_t command;
  hrt_cu_event_t start;
  hrt_cu_event_t end;
} hrt_cuda_timing_t;

typedef struct hrt_cuda_submission_s {
  struct hrt_cuda_submission_s* next;
  hrt_hal_pending_submission_t pending;
  // Written by the issue thread, read by the completion thread after the
  // hand-off (which goes through the device mutex).
  hrt_status_t issue_status;  // why issuing stopped early; owned
  uint32_t issued;            // commands [0, issued) were enqueued
  hrt_cuda_staging_t staging;
  uint64_t* staging_offsets;  // [command count]; see hrt_cuda_plan_staging
  uint32_t checkpoint_count;
  hrt_cuda_checkpoint_t* checkpoints;  // [trace commands + 1]
  // Profiling (pending.dispatch_timing != NULL): events around each
  // dispatch issued.
  uint32_t timing_count;
  hrt_cuda_timing_t* timings;  // [dispatch commands]
  // Completion thread only.
  uint32_t timings_reported;
  double timeline_ns;  // timings[0].start on the device timeline; < 0: unset
} hrt_cuda_submission_t;

typedef struct hrt_cuda_device_s {
  hrt_hal_device_t base;
  const hrt_cuda_symbols_t* cu;
  hrt_cu_device_t cu_device;
  hrt_cu_context_t context;  // primary context, retained
  hrt_cu_stream_t stream;
  // Trace copies run here, off the stream; `trace_fork` (issue thread
  // only) is recorded on the stream before each trace and waited for here.
  hrt_cu_stream_t trace_stream;
  hrt_cu_event_t trace_fork;
  // The summary kernels (a module of the built-in PTX) and their scratch:
  // HRT_CUDA_SUMMARY_MAX_BLOCKS partials, then HRT_HAL_MAX_TRACE_SOURCES
  // results. Made by the issue thread at the first summary or health trace
  // (hrt_cuda_summary_prepare), used only on the trace stream, whose order
  // makes one scratch enough; freed by hrt_cuda_close.
  hrt_cu_module_t summary_module;
  hrt_cu_function_t summary_partial;
  hrt_cu_function_t summary_final;
  hrt_cu_deviceptr_t summary_scratch;
  hrt_cuda_staging_pool_t staging;
  hrt_cuda_allocator_t allocator;
  hrt_thread_t issue_thread;
  hrt_thread_t completion_thread;
  hrt_mutex_t mutex;
  hrt_cond_t issue_cond;
  hrt_cond_t completion_cond;
  // The checkpoints of traces whose copies may not have run yet, in issue
  // order; guarded by traces_mutex (issue and completion threads only).
  hrt_mutex_t traces_mutex;
  hrt_cuda_checkpoint_t* traces;
  // Guarded by mutex.
  hrt_cuda_submission_t* issue_head;  // accepted, not yet issued
  hrt_cuda_submission_t* issue_tail;
  hrt_cuda_submission_t* completion_head;  // issued, not yet completed
  hrt_cuda_submission_t* completion_tail;
  hrt_cuda_upload_t* upload_head;  // enqueued, staging not yet released
  hrt_cuda_upload_t* upload_tail;
  hrt_cuda_unload_t* unloads;  // modules to unload, any order
  bool memory_freed;  // a buffer was freed since the completion thread looked
  bool release_due;   // the allocator holds blocks for release_pending
  bool shutdown;      // destroyed: the completion thread finishes and frees it
  hrt_status_t lost;  // the first fatal failure (DEVICE_LOST); owned
  // Completion thread only: the device timeline of profiled dispatches (see
  // hrt_cuda_report_timings). `anchor` is the first timing event of the last
  // profiled submission (owned), at `anchor_ns` on the timeline; the host
  // time of timeline point t is `host_offset_ns` + t.
  hrt_cu_event_t anchor;
  double anchor_ns;
  int64_t host_offset_ns;
  int64_t reported_end_ns;  // host end of the last dispatch reported
} hrt_cuda_device_t;

typedef struct hrt_cuda_buffer_s {
  hrt_hal_buffer_t base;
  hrt_cuda_block_t* block;  // owned
} hrt_cuda_buffer_t;

static hrt_cuda_device_t* hrt_cuda_device_cast(hrt_hal_device_t* base) {
  return (hrt_cuda_device_t*)base;
}

static hrt_cu_deviceptr_t hrt_cuda_address(const hrt_hal_buffer_ref_t* ref) {
  return ((const hrt_cuda_buffer_t*)ref->buffer)->block->pointer + ref->offset;
}

//===----------------------------------------------------------------------===//
// Lost state and context scopes
//===----------------------------------------------------------------------===//

// A copy of the lost status, or HRT_OK while the device works.
static hrt_status_t hrt_cuda_lost_status(hrt_cuda_device_t* device) {
  hrt_mutex_lock(&device->mutex);
  hrt_status_t status = hrt_status_clone(device->lost);
  hrt_mutex_unlock(&device->mutex);
  return status;
}

// Returns `status` unchanged unless it is DEVICE_LOST: then the device is
// marked lost (the first cause wins) and a copy of the lost status, which
// names that cause, replaces it. Consumes `status`. Only for statuses of
// this device's own CUDA calls: a DEVICE_LOST that arrives through a
// semaphore or a trace callback says nothing about this device.
static hrt_status_t hrt_cuda_check_lost(hrt_cuda_device_t* device,
                                        hrt_status_t status) {
  if (hrt_status_code(status) != HRT_STATUS_DEVICE_LOST) return status;
  hrt_mutex_lock(&device->mutex);
  if (device->lost == HRT_OK) {
    device->lost = hrt_status_annotate(status, "CUDA device %s is lost",
                                       device->base.info.uri);
  } else {
    hrt_status_free(status);
  }
  hrt_status_t lost = hrt_status_clone(device->lost);
  hrt_mutex_unlock(&device->mutex);
  return lost;
}

// Makes the device's context current on a caller's thread until
// hrt_cuda_leave; the caller's own current context is restored then.
static hrt_status_t hrt_cuda_enter(hrt_cuda_device_t* device) {
  return HRT_CUDA_CALL(device->cu, cuCtxPushCurrent_v2, (device->context));
}

static void hrt_cuda_leave(hrt_cuda_device_t* device) {
  hrt_cu_context_t popped = NULL;
  (void)device->cu->cuCtxPopCurrent_v2(&popped);
}

// Destroys the streams and the fork event, frees the summary kernels and
// scratch, and releases the primary context (hrt_cuda_open and
// hrt_cuda_summary_prepare made them). Nothing is queued on the streams any
// more.
static void hrt_cuda_close(hrt_cuda_device_t* device) {
  const hrt_cuda_symbols_t* cu = device->cu;
  hrt_status_t entered = hrt_cuda_enter(device);
  if (entered == HRT_OK) {
    if (device->summary_scratch) {
      (void)cu->cuMemFree_v2(device->summary_scratch);
    }
    if (device->summary_module) {
      (void)cu->cuModuleUnload(device->summary_module);
    }
    if (device->trace_fork) (void)cu->cuEventDestroy_v2(device->trace_fork);
    if (device->trace_stream) {
      (void)cu->cuStreamDestroy_v2(device->trace_stream);
    }
    (void)cu->cuStreamDestroy_v2(device->stream);
    hrt_cuda_leave(device);
  }
  hrt_status_free(entered);
  (void)device->cu->cuDevicePrimaryCtxRelease_v2(device->cu_device);
}

//===----------------------------------------------------------------------===//
// Buffers
//===----------------------------------------------------------------------===//

// Gives `block` back to the allocator (the context is current) and tells
// the completion thread, which trims when the device goes idle and releases
// what the allocator could not keep.
static void hrt_cuda_free_block(hrt_cuda_device_t* device,
                                hrt_cuda_block_t* block) {
  const bool release = hrt_cuda_allocator_free(&device->allocator, block);
  hrt_mutex_lock(&device->mutex);
  device->memory_freed = true;
  device->release_due = device->release_due || release;
  hrt_cond_signal(&device->completion_cond);
  hrt_mutex_unlock(&device->mutex);
}

// Any thread: every submission that used the buffer retained it and has
// completed, and its initial fill or upload was enqueued before allocate
// returned, so all its work is on the stream already (cuda_allocator.h);
// its trace copies, on the trace stream, have run (a submission completes
// after its trace events).
static void hrt_cuda_buffer_destroy(hrt_hal_buffer_t* base) {
  hrt_cuda_buffer_t* buffer = (hrt_cuda_buffer_t*)base;
  hrt_cuda_device_t* device = hrt_cuda_device_cast(base->device);
  hrt_status_t status = hrt_cuda_enter(device);
  if (status == HRT_OK) {
    hrt_cuda_free_block(device, buffer->block);
    hrt_cuda_leave(device);
  } else {
    // Without the context nothing can be freed; the memory goes with it.
    free(buffer->block);
  }
  hrt_status_free(status);
  free(buffer);
}

static const hrt_hal_buffer_vtable_t hrt_cuda_buffer_vtable = {
    .destroy = hrt_cuda_buffer_destroy,
};

// Hands `upload` to the completion thread, which waits for its event (or
// the stream) and releases its staging block.
static void hrt_cuda_queue_upload(hrt_cuda_device_t* device,
                                  hrt_cuda_upload_t* upload) {
  hrt_mutex_lock(&device->mutex);
  if (device->upload_tail) {
    device->upload_tail->next = upload;
  } else {
    device->upload_head = upload;
  }
  device->upload_tail = upload;
  hrt_cond_signal(&device->completion_cond);
  hrt_mutex_unlock(&device->mutex);
}

// Enqueues the copy of `length` bytes of `data` to `target` through a
// pinned staging block (a copy from pageable memory may wait for the
// stream) and hands the block to the completion thread, which releases it
// once the copy has run (or, when enqueueing failed, at once). The context
// is current.
static hrt_status_t hrt_cuda_upload(hrt_cuda_device_t* device,
                                    hrt_cu_deviceptr_t target, const void* data,
                                    size_t length) {
  const hrt_cuda_symbols_t* cu = device->cu;
  hrt_cuda_upload_t* upload = NULL;
  HRT_RETURN_IF_ERROR(
      hrt_allocate_zeroed(sizeof(*upload), "upload", (void**)&upload));
  hrt_status_t status =
      hrt_cuda_staging_acquire(&device->staging, length, &upload->staging);
  if (status == HRT_OK) {
    status = HRT_CUDA_CALL(cu, cuEventCreate,
                           (&upload->event, HRT_CU_EVENT_BLOCKING_SYNC |
                                                HRT_CU_EVENT_DISABLE_TIMING));
  }
  if (status == HRT_OK) {
    memcpy(upload->staging.host, data, length);
    status =
        HRT_CUDA_CALL(cu, cuMemcpyHtoDAsync_v2,
                      (target, upload->staging.host, length, device->stream));
  }
  if (status != HRT_OK) {
    // Nothing was enqueued that reads the block, but releasing it may call
    // cuMemFreeHost, which waits for the GPU: the completion thread does.
    if (upload->event) (void)cu->cuEventDestroy_v2(upload->event);
    upload->event = NULL;
    if (upload->staging.host) {
      hrt_cuda_queue_upload(device, upload);
    } else {
      free(upload);
    }
    return status;
  }
  if (cu->cuEventRecord(upload->event, device->stream) != HRT_CUDA_SUCCESS) {
    (void)cu->cuEventDestroy_v2(upload->event);
    upload->event = NULL;
  }
  hrt_cuda_queue_upload(device, upload);
  return HRT_OK;
}

// Allocates and initialises device memory; the context is current.
static hrt_status_t hrt_cuda_allocate_memory(hrt_cuda_device_t* device,
                                             uint64_t byte_length,
                                             const void* initial_data,
                                             hrt_cuda_block_t** out_block) {
  hrt_cuda_block_t* block = NULL;
  hrt_status_t status = hrt_cuda_allocator_allocate(
      &device->allocator, (size_t)byte_length, &block);
  if (status != HRT_OK) {
    // The completion thread releases what the allocator gave up.
    hrt_mutex_lock(&device->mutex);
    device->release_due = true;
    hrt_cond_signal(&device->completion_cond);
    hrt_mutex_unlock(&device->mutex);
    return status;
  }
  if (byte_length && initial_data) {
    status = hrt_cuda_upload(device, block->pointer, initial_data,
                             (size_t)byte_length);
  } else if (byte_length) {
    status =
        HRT_CUDA_CALL(device->cu, cuMemsetD8Async,
                      (block->pointer, 0, (size_t)byte_length, device->stream));
  }
  if (status != HRT_OK) {
    hrt_cuda_free_block(device, block);
    return status;
  }
  *out_block = block;
  return HRT_OK;
}

static hrt_status_t hrt_cuda_allocate_buffer(hrt_hal_device_t* base,
                                             uint64_t byte_length,
                                             const void* initial_data,
                                             hrt_hal_buffer_t** out_buffer) {
  hrt_cuda_device_t* device = hrt_cuda_device_cast(base);
  HRT_RETURN_IF_ERROR(hrt_cuda_lost_status(device));
  if (byte_length > SIZE_MAX) {
    return hrt_status_make(HRT_STATUS_RESOURCE_EXHAUSTED,
                           "cannot allocate %llu bytes",
                           (unsigned long long)byte_length);
  }
  hrt_cuda_buffer_t* buffer = NULL;
  HRT_RETURN_IF_ERROR(
      hrt_allocate_zeroed(sizeof(*buffer), "buffer", (void**)&buffer));
  hrt_status_t status = hrt_cuda_enter(device);
  if (status == HRT_OK) {
    status = hrt_cuda_allocate_memory(device, byte_length, initial_data,
                                      &buffer->block);
    hrt_cuda_leave(device);
  }
  if (status != HRT_OK) {
    free(buffer);
    return hrt_status_annotate(hrt_cuda_check_lost(device, status),
                               "allocating a %llu-byte buffer on %s",
                               (unsigned long long)byte_length, base->info.uri);
  }
  hrt_hal_buffer_initialize(&hrt_cuda_buffer_vtable, base, byte_length, NULL,
                            &buffer->base);
  *out_buffer = &buffer->base;
  return HRT_OK;
}

//===----------------------------------------------------------------------===//
// Executables
//===----------------------------------------------------------------------===//

static hrt_status_t hrt_cuda_create_executable(
    hrt_hal_device_t* base, const hrt_hal_executable_params_t* params,
    hrt_hal_executable_t** out_executable) {
  hrt_cuda_device_t* device = hrt_cuda_device_cast(base);
  HRT_RETURN_IF_ERROR(hrt_cuda_lost_status(device));
  hrt_status_t status = hrt_cuda_enter(device);
  if (status == HRT_OK) {
    status =
        hrt_cuda_executable_create(base, device->cu, params, out_executable);
    hrt_cuda_leave(device);
  }
  return hrt_cuda_check_lost(device, status);
}

//===----------------------------------------------------------------------===//
// Issuing (issue thread)
//===----------------------------------------------------------------------===//

static uint64_t hrt_cuda_align(uint64_t size) {
  return (size + HRT_CUDA_STAGING_ALIGNMENT - 1) &
         ~(uint64_t)(HRT_CUDA_STAGING_ALIGNMENT - 1);
}

// Whether a copy's source and target overlap (cuMemcpyDtoD does not allow
// it, but the HAL's copy has memmove semantics).
static bool hrt_cuda_copy_overlaps(const hrt_hal_buffer_ref_t* source,
                                   const hrt_hal_buffer_ref_t* target) {
  return source->buffer == target->buffer && source->length &&
         source->offset != target->offset &&
         source->offset < target->offset + target->length &&
         target->offset < source->offset + source->length;
}

// The staged bytes command `command` needs: update sources, read targets,
// overlapping copies (bounced through the host) and traced ranges (the
// summaries, one after the other, of a summary or health trace).
static uint64_t hrt_cuda_staged_bytes(const hrt_hal_command_t* command,
                                      const hrt_cuda_submission_t* sub) {
  switch (command->type) {
    case HRT_HAL_COMMAND_UPDATE:
      return hrt_hal_pending_submission_resolve(&sub->pending,
                                                &command->update.target)
          .length;
    case HRT_HAL_COMMAND_READ:
      return hrt_hal_pending_submission_resolve(&sub->pending,
                                                &command->read.source)
          .length;
    case HRT_HAL_COMMAND_COPY: {
      hrt_hal_buffer_ref_t source = hrt_hal_pending_submission_resolve(
          &sub->pending, &command->copy.source);
      hrt_hal_buffer_ref_t target = hrt_hal_pending_submission_resolve(
          &sub->pending, &command->copy.target);
      return hrt_cuda_copy_overlaps(&source, &target) ? source.length : 0;
    }
    case HRT_HAL_COMMAND_TRACE: {
      if (command->trace.mode != HRT_HAL_TRACE_FULL) {
        return command->trace.source_count * sizeof(hrt_hal_tensor_summary_t);
      }
      uint64_t total = 0;
      for (uint32_t i = 0; i < command->trace.source_count; ++i) {
        total += hrt_cuda_align(hrt_hal_pending_submission_resolve(
                                    &sub->pending, &command->trace.sources[i])
                                    .length);
      }
      return total;
    }
    default:
      return 0;
  }
}

// Lays out the submission's staging block: command i's host data starts at
// staging_offsets[i] (a trace's sources follow each other from there, each
// aligned), and returns the total size.
static uint64_t hrt_cuda_plan_staging(hrt_cuda_submission_t* sub) {
  uint32_t count = hrt_hal_command_buffer_count(sub->pending.command_buffer);
  uint64_t total = 0;
  for (uint32_t i = 0; i < count; ++i) {
    sub->staging_offsets[i] = total;
    total += hrt_cuda_align(hrt_cuda_staged_bytes(
        hrt_hal_command_buffer_at(sub->pending.command_buffer, i), sub));
  }
  return total;
}

// Where command data at `offset` is staged (NULL when nothing is staged).
static char* hrt_cuda_staged(const hrt_cuda_submission_t* sub,
                             uint64_t offset) {
  return sub->staging.host ? (char*)sub->staging.host + offset : NULL;
}

// Fills `length` bytes at `target` with the `pattern_length`-byte pattern,
// using the widest memset the pattern and alignment allow: 8-bit when every
// byte of the pattern is equal; 16/32-bit when the address is aligned; an
// 8-byte pattern at a 4-byte aligned address as two 2-D 32-bit memsets of
// pitch 8 (low words, then high words); anything else as one 2-D 8-bit
// memset per pattern byte, with the pattern length as pitch.
static hrt_status_t hrt_cuda_enqueue_fill(hrt_cuda_device_t* device,
                                          hrt_cu_deviceptr_t target,
                                          uint64_t length, uint64_t pattern,
                                          uint32_t pattern_length) {
  const hrt_cuda_symbols_t* cu = device->cu;
  hrt_cu_stream_t stream = device->stream;
  if (length == 0) return HRT_OK;
  uint8_t bytes[8];
  for (int i = 0; i < 8; ++i) bytes[i] = (uint8_t)(pattern >> (8 * i));
  bool uniform = true;
  for (uint32_t i = 1; i < pattern_length; ++i) {
    uniform = uniform && bytes[i] == bytes[0];
  }
  const size_t count = (size_t)(length / pattern_length);
  if (uniform) {
    return HRT_CUDA_CALL(cu, cuMemsetD8Async,
                         (target, bytes[0], (size_t)length, stream));
  }
  if (pattern_length == 2 && target % 2 == 0) {
    return HRT_CUDA_CALL(cu, cuMemsetD16Async,
                         (target, (unsigned short)pattern, count, stream));
  }
  if (pattern_length == 4 && target % 4 == 0) {
    return HRT_CUDA_CALL(cu, cuMemsetD32Async,
                         (target, (unsigned int)pattern, count, stream));
  }
  if (pattern_length == 8 && target % 4 == 0) {
    HRT_RETURN_IF_ERROR(
        HRT_CUDA_CALL(cu, cuMemsetD2D32Async,
                      (target, 8, (unsigned int)pattern, 1, count, stream)));
    return HRT_CUDA_CALL(
        cu, cuMemsetD2D32Async,
        (target + 4, 8, (unsigned int)(pattern >> 32), 1, count, stream));
  }
  for (uint32_t i = 0; i < pattern_length; ++i) {
    HRT_RETURN_IF_ERROR(HRT_CUDA_CALL(
        cu, cuMemsetD2D8Async,
        (target + i, pattern_length, bytes[i], 1, count, stream)));
  }
  return HRT_OK;
}

// The CUDA built-in kernels trust their constants, so the host applies the
// checks the CPU kernels make (docs/kernels.md, "Validation").
static hrt_status_t hrt_cuda_check_builtin(
    const hrt_builtin_signature_t* signature,
    const hrt_hal_dispatch_t* dispatch, const hrt_hal_buffer_ref_t* bindings) {
  if (strcmp(signature->name, "matmul_f32") == 0 &&
      dispatch->workgroup_count[2] != 1) {
    return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                           "kernel 'matmul_f32' of executable '%s' needs "
                           "workgroup count[2] == 1, not %u",
                           dispatch->executable->name,
                           dispatch->workgroup_count[2]);
  }
  for (uint32_t i = 0; i < signature->binding_count; ++i) {
    const uint64_t needed =
        hrt_builtin_binding_min_bytes(signature, i, dispatch->constants);
    if (bindings[i].length < needed) {
      return hrt_status_make(
          HRT_STATUS_INVALID_ARGUMENT,
          "kernel '%s' of executable '%s': binding %u has %llu bytes but the "
          "constants need %llu; its bindings or constants are inconsistent",
          signature->name, dispatch->executable->name, i,
          (unsigned long long)bindings[i].length, (unsigned long long)needed);
    }
  }
  return HRT_OK;
}

static hrt_status_t hrt_cuda_enqueue_dispatch(
    hrt_cuda_device_t* device, const hrt_hal_dispatch_t* dispatch,
    const hrt_cuda_submission_t* sub) {
  hrt_hal_buffer_ref_t bindings[HRT_HAL_MAX_DISPATCH_BINDINGS];
  hrt_cu_deviceptr_t pointers[HRT_HAL_MAX_DISPATCH_BINDINGS];
  // A 64-bit scalar's two constant words, joined in an 8-byte aligned slot.
  uint64_t wide[HRT_HAL_MAX_DISPATCH_CONSTANTS / 2];
  void* params[HRT_HAL_MAX_DISPATCH_BINDINGS + HRT_HAL_MAX_DISPATCH_CONSTANTS];
  for (uint32_t i = 0; i < dispatch->binding_count; ++i) {
    bindings[i] = hrt_hal_pending_submission_resolve(&sub->pending,
                                                     &dispatch->bindings[i]);
    pointers[i] = hrt_cuda_address(&bindings[i]);
  }
  // The entry's layout (hal/executable.h), whose counts the command buffer
  // checked the dispatch against: declared, or bindings then 32-bit words.
  const hrt_hal_executable_entry_t* entry =
      &dispatch->executable->entries[dispatch->entry_ordinal];
  const uint32_t param_count =
      entry->params ? entry->param_count
                    : dispatch->binding_count + dispatch->constant_count;
  for (uint32_t p = 0, b = 0, w = 0, s = 0; p < param_count; ++p) {
    const hrt_hal_param_type_t type = entry->params ? entry->params[p]
                                      : p < dispatch->binding_count
                                          ? HRT_HAL_PARAM_BUFFER
                                          : HRT_HAL_PARAM_U32;
    const uint32_t words = hrt_hal_param_type_words(type);
    if (words == 0) {
      params[p] = &pointers[b++];
    } else if (words == 1) {
      params[p] = (void*)&dispatch->constants[w++];
    } else {
      wide[s] = (uint64_t)dispatch->constants[w] |
                (uint64_t)dispatch->constants[w + 1] << 32;
      params[p] = &wide[s++];
      w += 2;
    }
  }
  const hrt_cuda_kernel_t* kernel =
      hrt_cuda_executable_kernel(dispatch->executable, dispatch->entry_ordinal);
  uint32_t block[3] = {dispatch->workgroup_size[0], dispatch->workgroup_size[1],
                       dispatch->workgroup_size[2]};
  if (kernel->builtin) {
    HRT_RETURN_IF_ERROR(
        hrt_cuda_check_builtin(kernel->builtin, dispatch, bindings));
    block[0] = HRT_CUDA_BUILTIN_BLOCK_SIZE;
    block[1] = block[2] = 1;
  }
  const uint32_t* grid = dispatch->workgroup_count;
  hrt_status_t status =
      HRT_CUDA_CALL(device->cu, cuLaunchKernel,
                    (kernel->function, grid[0], grid[1], grid[2], block[0],
                     block[1], block[2], 0, device->stream, params, NULL));
  return hrt_status_annotate(
      status, "kernel '%s' of executable '%s' (grid %ux%ux%u, block %ux%ux%u)",
      entry->name, dispatch->executable->name, grid[0], grid[1], grid[2],
      block[0], block[1], block[2]);
}

// Records a checkpoint after everything enqueued so far on `stream`
// (commands < end) and returns it.
static hrt_status_t hrt_cuda_record_checkpoint(
    hrt_cuda_device_t* device, hrt_cu_stream_t stream,
    hrt_cuda_submission_t* sub, uint32_t end,
    hrt_cuda_checkpoint_t** out_checkpoint) {
  const hrt_cuda_symbols_t* cu = device->cu;
  hrt_cu_event_t event = NULL;
  HRT_RETURN_IF_ERROR(HRT_CUDA_CALL(
      cu, cuEventCreate,
      (&event, HRT_CU_EVENT_BLOCKING_SYNC | HRT_CU_EVENT_DISABLE_TIMING)));
  hrt_status_t status = HRT_CUDA_CALL(cu, cuEventRecord, (event, stream));
  if (status != HRT_OK) {
    (void)cu->cuEventDestroy_v2(event);
    return status;
  }
  hrt_cuda_checkpoint_t* checkpoint =
      &sub->checkpoints[sub->checkpoint_count++];
  *checkpoint = (hrt_cuda_checkpoint_t){.event = event, .end = end};
  if (out_checkpoint) *out_checkpoint = checkpoint;
  return HRT_OK;
}

// Whether a range of the trace of `checkpoint` overlaps one of `ranges`.
static bool hrt_cuda_trace_overlaps(const hrt_cuda_checkpoint_t* checkpoint,
                                    const hrt_hal_buffer_ref_t* ranges,
                                    uint32_t count) {
  const hrt_hal_pending_submission_t* pending = checkpoint->trace_of;
  const hrt_hal_command_t* trace =
      hrt_hal_command_buffer_at(pending->command_buffer, checkpoint->end - 1);
  for (uint32_t i = 0; i < trace->trace.source_count; ++i) {
    hrt_hal_buffer_ref_t source =
        hrt_hal_pending_submission_resolve(pending, &trace->trace.sources[i]);
    for (uint32_t j = 0; j < count; ++j) {
      if (hrt_hal_buffer_ranges_overlap(&source, &ranges[j])) return true;
    }
  }
  return false;
}

// Makes the stream wait for the copies of every pending trace (of any
// submission) that `command` may overwrite; readers never wait. Once the
// stream waits for a trace it is also past every trace before it (the
// trace stream runs in order), so those are not waited for again.
static hrt_status_t hrt_cuda_order_after_traces(
    hrt_cuda_device_t* device, const hrt_cuda_submission_t* sub,
    const hrt_hal_command_t* command) {
  hrt_hal_buffer_ref_t written[HRT_HAL_MAX_DISPATCH_BINDINGS];
  const uint32_t count =
      hrt_hal_pending_submission_written(&sub->pending, command, written);
  if (count == 0) return HRT_OK;
  hrt_status_t status = HRT_OK;
  hrt_mutex_lock(&device->traces_mutex);
  hrt_cuda_checkpoint_t* last = NULL;
  for (hrt_cuda_checkpoint_t* c = device->traces; c; c = c->next_trace) {
    if (!c->waited && hrt_cuda_trace_overlaps(c, written, count)) last = c;
  }
  if (last) {
    // The completion thread destroys the event only after unlinking it.
    status = HRT_CUDA_CALL(device->cu, cuStreamWaitEvent,
                           (device->stream, last->event, 0));
  }
  for (hrt_cuda_checkpoint_t* c = device->traces; status == HRT_OK && last;
       c = c->next_trace) {
    c->waited = true;
    if (c == last) break;
  }
  hrt_mutex_unlock(&device->traces_mutex);
  return status;
}

// Issue thread: loads the summary kernels and allocates their scratch, the
// first time a summary or health trace needs them.
static hrt_status_t hrt_cuda_summary_prepare(hrt_cuda_device_t* device) {
  const hrt_cuda_symbols_t* cu = device->cu;
  if (!device->summary_module) {
    HRT_RETURN_IF_ERROR(hrt_status_annotate(
        HRT_CUDA_CALL(
            cu, cuModuleLoadDataEx,
            (&device->summary_module, hrt_cuda_builtin_ptx, 0, NULL, NULL)),
        "loading the summary kernels"));
  }
  if (!device->summary_partial) {
    HRT_RETURN_IF_ERROR(
        HRT_CUDA_CALL(cu, cuModuleGetFunction,
                      (&device->summary_partial, device->summary_module,
                       "hrt_summary_partial")));
  }
  if (!device->summary_final) {
    HRT_RETURN_IF_ERROR(HRT_CUDA_CALL(
        cu, cuModuleGetFunction,
        (&device->summary_final, device->summary_module, "hrt_summary_final")));
  }
  if (!device->summary_scratch) {
    HRT_RETURN_IF_ERROR(hrt_status_annotate(
        HRT_CUDA_CALL(
            cu, cuMemAlloc_v2,
            (&device->summary_scratch,
             (HRT_CUDA_SUMMARY_MAX_BLOCKS + HRT_HAL_MAX_TRACE_SOURCES) *
                 sizeof(hrt_hal_tensor_summary_t))),
        "allocating the summary scratch"));
  }
  return HRT_OK;
}

// Enqueues on the trace stream the summary of `source` (resolved) into
// result slot `slot` of the scratch: per-block partials over the elements,
// then one block over the partials (kernels/builtin.cu).
static hrt_status_t hrt_cuda_enqueue_summary(hrt_cuda_device_t* device,
                                             const hrt_hal_buffer_ref_t* source,
                                             hrt_hal_element_type_t type,
                                             hrt_hal_trace_mode_t mode,
                                             uint32_t slot) {
  const hrt_cuda_symbols_t* cu = device->cu;
  hrt_cu_deviceptr_t data = hrt_cuda_address(source);
  uint64_t count = source->length / hrt_hal_element_type_size(type);
  hrt_cu_deviceptr_t partials = device->summary_scratch;
  hrt_cu_deviceptr_t result = partials + (HRT_CUDA_SUMMARY_MAX_BLOCKS + slot) *
                                             sizeof(hrt_hal_tensor_summary_t);
  const uint64_t per_block = (uint64_t)HRT_CUDA_BUILTIN_BLOCK_SIZE *
                             HRT_CUDA_SUMMARY_ELEMENTS_PER_THREAD;
  uint64_t wanted = (count + per_block - 1) / per_block;
  uint32_t blocks = wanted < 1 ? 1
                    : wanted > HRT_CUDA_SUMMARY_MAX_BLOCKS
                        ? HRT_CUDA_SUMMARY_MAX_BLOCKS
                        : (uint32_t)wanted;
  uint32_t type_code = (uint32_t)type;
  uint32_t mode_code = (uint32_t)mode;
  void* partial_params[4] = {&data, &count, &partials, &type_code};
  HRT_RETURN_IF_ERROR(hrt_status_annotate(
      HRT_CUDA_CALL(
          cu, cuLaunchKernel,
          (device->summary_partial, blocks, 1, 1, HRT_CUDA_BUILTIN_BLOCK_SIZE,
           1, 1, 0, device->trace_stream, partial_params, NULL)),
      "kernel 'hrt_summary_partial' (grid %u)", blocks));
  void* final_params[4] = {&partials, &blocks, &result, &mode_code};
  return hrt_status_annotate(
      HRT_CUDA_CALL(
          cu, cuLaunchKernel,
          (device->summary_final, 1, 1, 1, HRT_CUDA_BUILTIN_BLOCK_SIZE, 1, 1, 0,
           device->trace_stream, final_params, NULL)),
      "kernel 'hrt_summary_final'");
}

// A summary or health trace's device work on the trace stream: each
// source's summary into the scratch, then one copy of them all into
// `staged`.
static hrt_status_t hrt_cuda_enqueue_summaries(hrt_cuda_device_t* device,
                                               const hrt_cuda_submission_t* sub,
                                               const hrt_hal_command_t* trace,
                                               char* staged) {
  HRT_RETURN_IF_ERROR(hrt_cuda_summary_prepare(device));
  const uint32_t count = trace->trace.source_count;
  for (uint32_t i = 0; i < count; ++i) {
    hrt_hal_buffer_ref_t source = hrt_hal_pending_submission_resolve(
        &sub->pending, &trace->trace.sources[i]);
    HRT_RETURN_IF_ERROR(hrt_status_annotate(
        hrt_cuda_enqueue_summary(device, &source, trace->trace.element_types[i],
                                 trace->trace.mode, i),
        "summary of trace source %u", i));
  }
  return HRT_CUDA_CALL(
      device->cu, cuMemcpyDtoHAsync_v2,
      (staged,
       device->summary_scratch +
           HRT_CUDA_SUMMARY_MAX_BLOCKS * sizeof(hrt_hal_tensor_summary_t),
       count * sizeof(hrt_hal_tensor_summary_t), device->trace_stream));
}

// A trace: the trace stream waits for the commands before it on the
// stream, copies its ranges (or, for a summary or health trace, computes
// their summaries and copies those) into staging and records its
// checkpoint, which joins the pending traces. The commands after it do not
// wait for that work unless they overwrite a traced range
// (hrt_cuda_order_after_traces).
static hrt_status_t hrt_cuda_enqueue_trace(hrt_cuda_device_t* device,
                                           hrt_cuda_submission_t* sub,
                                           uint32_t index, char* staged) {
  const hrt_cuda_symbols_t* cu = device->cu;
  const hrt_hal_command_t* trace =
      hrt_hal_command_buffer_at(sub->pending.command_buffer, index);
  HRT_RETURN_IF_ERROR(
      HRT_CUDA_CALL(cu, cuEventRecord, (device->trace_fork, device->stream)));
  HRT_RETURN_IF_ERROR(HRT_CUDA_CALL(
      cu, cuStreamWaitEvent, (device->trace_stream, device->trace_fork, 0)));
  hrt_status_t status = HRT_OK;
  if (trace->trace.mode != HRT_HAL_TRACE_FULL) {
    status = hrt_cuda_enqueue_summaries(device, sub, trace, staged);
  } else {
    for (uint32_t i = 0; i < trace->trace.source_count && status == HRT_OK;
         ++i) {
      hrt_hal_buffer_ref_t source = hrt_hal_pending_submission_resolve(
          &sub->pending, &trace->trace.sources[i]);
      if (source.length) {
        status = HRT_CUDA_CALL(cu, cuMemcpyDtoHAsync_v2,
                               (staged, hrt_cuda_address(&source),
                                (size_t)source.length, device->trace_stream));
        staged += hrt_cuda_align(source.length);
      }
    }
  }
  hrt_cuda_checkpoint_t* checkpoint = NULL;
  if (status == HRT_OK) {
    status = hrt_cuda_record_checkpoint(device, device->trace_stream, sub,
                                        index + 1, &checkpoint);
  }
  if (status != HRT_OK) {
    // No checkpoint covers the copies enqueued: they must be done before
    // the staging goes back, and nothing else would wait for them.
    (void)cu->cuStreamSynchronize(device->trace_stream);
    return status;
  }
  checkpoint->trace_of = &sub->pending;
  hrt_mutex_lock(&device->traces_mutex);
  hrt_cuda_checkpoint_t** link = &device->traces;
  while (*link) link = &(*link)->next_trace;
  *link = checkpoint;
  hrt_mutex_unlock(&device->traces_mutex);
  return HRT_OK;
}

// The completion thread has waited for the trace checkpoint `checkpoint`:
// no later writer needs to wait for it, and its event may go.
static void hrt_cuda_forget_trace(hrt_cuda_device_t* device,
                                  const hrt_cuda_checkpoint_t* checkpoint) {
  hrt_mutex_lock(&device->traces_mutex);
  hrt_cuda_checkpoint_t** link = &device->traces;
  while (*link && *link != checkpoint) link = &(*link)->next_trace;
  if (*link) *link = checkpoint->next_trace;
  hrt_mutex_unlock(&device->traces_mutex);
}

// Records a new timing event on the stream into `out_event`.
static hrt_status_t hrt_cuda_record_timing_event(hrt_cuda_device_t* device,
                                                 hrt_cu_event_t* out_event) {
  const hrt_cuda_symbols_t* cu = device->cu;
  HRT_RETURN_IF_ERROR(HRT_CUDA_CALL(cu, cuEventCreate,
                                    (out_event, HRT_CU_EVENT_BLOCKING_SYNC)));
  hrt_status_t status =
      HRT_CUDA_CALL(cu, cuEventRecord, (*out_event, device->stream));
  if (status != HRT_OK) {
    (void)cu->cuEventDestroy_v2(*out_event);
    *out_event = NULL;
  }
  return status;
}

// A dispatch between two timing events (profiled submissions).
static hrt_status_t hrt_cuda_enqueue_timed_dispatch(hrt_cuda_device_t* device,
                                                    hrt_cuda_submission_t* sub,
                                                    uint32_t index) {
  hrt_cuda_timing_t* timing = &sub->timings[sub->timing_count];
  timing->command = index;
  HRT_RETURN_IF_ERROR(hrt_cuda_record_timing_event(device, &timing->start));
  ++sub->timing_count;  // completion destroys the events recorded
  const hrt_hal_command_t* command =
      hrt_hal_command_buffer_at(sub->pending.command_buffer, index);
  HRT_RETURN_IF_ERROR(
      hrt_cuda_enqueue_dispatch(device, &command->dispatch, sub));
  return hrt_cuda_record_timing_event(device, &timing->end);
}

static hrt_status_t hrt_cuda_enqueue_command(hrt_cuda_device_t* device,
                                             hrt_cuda_submission_t* sub,
                                             uint32_t index) {
  const hrt_cuda_symbols_t* cu = device->cu;
  hrt_cu_stream_t stream = device->stream;
  const hrt_hal_command_t* command =
      hrt_hal_command_buffer_at(sub->pending.command_buffer, index);
  char* staged = hrt_cuda_staged(sub, sub->staging_offsets[index]);
  HRT_RETURN_IF_ERROR(hrt_cuda_order_after_traces(device, sub, command));
  switch (command->type) {
    case HRT_HAL_COMMAND_FILL: {
      hrt_hal_buffer_ref_t target = hrt_hal_pending_submission_resolve(
          &sub->pending, &command->fill.target);
      return hrt_cuda_enqueue_fill(device, hrt_cuda_address(&target),
                                   target.length, command->fill.pattern,
                                   command->fill.pattern_length);
    }
    case HRT_HAL_COMMAND_COPY: {
      hrt_hal_buffer_ref_t source = hrt_hal_pending_submission_resolve(
          &sub->pending, &command->copy.source);
      hrt_hal_buffer_ref_t target = hrt_hal_pending_submission_resolve(
          &sub->pending, &command->copy.target);
      if (source.length == 0 ||
          (source.buffer == target.buffer && source.offset == target.offset)) {
        return HRT_OK;
      }
      if (hrt_cuda_copy_overlaps(&source, &target)) {
        HRT_RETURN_IF_ERROR(HRT_CUDA_CALL(cu, cuMemcpyDtoHAsync_v2,
                                          (staged, hrt_cuda_address(&source),
                                           (size_t)source.length, stream)));
        return HRT_CUDA_CALL(
            cu, cuMemcpyHtoDAsync_v2,
            (hrt_cuda_address(&target), staged, (size_t)source.length, stream));
      }
      return HRT_CUDA_CALL(
          cu, cuMemcpyDtoDAsync_v2,
          (hrt_cuda_address(&target), hrt_cuda_address(&source),
           (size_t)source.length, stream));
    }
    case HRT_HAL_COMMAND_UPDATE: {
      hrt_hal_buffer_ref_t target = hrt_hal_pending_submission_resolve(
          &sub->pending, &command->update.target);
      if (target.length == 0) return HRT_OK;
      memcpy(staged, command->update.data, (size_t)target.length);
      return HRT_CUDA_CALL(
          cu, cuMemcpyHtoDAsync_v2,
          (hrt_cuda_address(&target), staged, (size_t)target.length, stream));
    }
    case HRT_HAL_COMMAND_READ: {
      hrt_hal_buffer_ref_t source = hrt_hal_pending_submission_resolve(
          &sub->pending, &command->read.source);
      if (source.length == 0) return HRT_OK;
      return HRT_CUDA_CALL(
          cu, cuMemcpyDtoHAsync_v2,
          (staged, hrt_cuda_address(&source), (size_t)source.length, stream));
    }
    case HRT_HAL_COMMAND_DISPATCH:
      if (sub->pending.dispatch_timing) {
        return hrt_cuda_enqueue_timed_dispatch(device, sub, index);
      }
      return hrt_cuda_enqueue_dispatch(device, &command->dispatch, sub);
    case HRT_HAL_COMMAND_TRACE:
      return hrt_cuda_enqueue_trace(device, sub, index, staged);
    case HRT_HAL_COMMAND_BARRIER:
      // One stream runs its work in order.
      return HRT_OK;
  }
  return HRT_OK;
}

static const char* hrt_cuda_command_name(hrt_hal_command_type_t type) {
  static const char* const names[] = {"fill",     "copy",    "update", "read",
                                      "dispatch", "barrier", "trace"};
  return names[type];
}

// Enqueues every command of `sub`; the first failure stops it and is kept
// in sub->issue_status. Work already enqueued is always covered by a final
// checkpoint (or, if even that cannot be recorded, waited for here), so the
// completion thread never frees staging memory a copy still uses.
static void hrt_cuda_enqueue_commands(hrt_cuda_device_t* device,
                                      hrt_cuda_submission_t* sub) {
  const uint32_t count =
      hrt_hal_command_buffer_count(sub->pending.command_buffer);
  hrt_status_t status = hrt_cuda_staging_acquire(
      &device->staging, hrt_cuda_plan_staging(sub), &sub->staging);
  uint32_t index = 0;
  for (; index < count && status == HRT_OK; ++index) {
    status = hrt_cuda_enqueue_command(device, sub, index);
    if (status != HRT_OK) {
      status = hrt_status_annotate(
          status, "command %u (%s)", index,
          hrt_cuda_command_name(
              hrt_hal_command_buffer_at(sub->pending.command_buffer, index)
                  ->type));
      break;
    }
  }
  sub->issued = index;
  hrt_status_t final_status =
      hrt_cuda_record_checkpoint(device, device->stream, sub, index, NULL);
  if (final_status != HRT_OK) {
    (void)device->cu->cuStreamSynchronize(device->stream);
    if (status == HRT_OK) {
      status = final_status;
    } else {
      hrt_status_free(final_status);
    }
  }
  sub->issue_status = hrt_cuda_check_lost(device, status);
}

static void hrt_cuda_issue(hrt_cuda_device_t* device,
                           hrt_cuda_submission_t* sub) {
  hrt_status_t status = HRT_OK;
  for (uint32_t i = 0; i < sub->pending.wait_count && status == HRT_OK; ++i) {
    status = hrt_hal_semaphore_wait(sub->pending.waits[i].semaphore,
                                    sub->pending.waits[i].value,
                                    HRT_TIME_INFINITE_FUTURE);
  }
  if (status == HRT_OK) status = hrt_cuda_lost_status(device);
  if (status != HRT_OK) {
    sub->issue_status = status;
    return;
  }
  hrt_cuda_enqueue_commands(device, sub);
}

static void* hrt_cuda_issue_main(void* arg) {
  hrt_cuda_device_t* device = arg;
  // If this fails every CUDA call below fails too, and reports it.
  (void)device->cu->cuCtxSetCurrent(device->context);
  hrt_mutex_lock(&device->mutex);
  for (;;) {
    while (!device->issue_head && !device->shutdown) {
      hrt_cond_wait(&device->issue_cond, &device->mutex);
    }
    hrt_cuda_submission_t* sub = device->issue_head;
    if (!sub) break;  // shut down with nothing left
    device->issue_head = sub->next;
    if (!device->issue_head) device->issue_tail = NULL;
    hrt_mutex_unlock(&device->mutex);
    hrt_cuda_issue(device, sub);
    hrt_mutex_lock(&device->mutex);
    // The device outlives this: destroy joins this thread first.
    sub->next = NULL;
    if (device->completion_tail) {
      device->completion_tail->next = sub;
    } else {
      device->completion_head = sub;
    }
    device->completion_tail = sub;
    hrt_cond_signal(&device->completion_cond);
  }
  hrt_mutex_unlock(&device->mutex);
  return NULL;
}

//===----------------------------------------------------------------------===//
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

// How many destroyed devices were freed, counting those being finished as
// if they were (after waiting until they are).
static uint64_t hrt_cuda_finishing_wait(void) {
  hrt_mutex_lock(&hrt_cuda_finishing.mutex);
  while (hrt_cuda_finishing.count) {
    hrt_cond_wait(&hrt_cuda_finishing.cond, &hrt_cuda_finishing.mutex);
  }
  const uint64_t freed = hrt_cuda_finishing.freed;
  hrt_mutex_unlock(&hrt_cuda_finishing.mutex);
  return freed;
}

// How many destroyed devices were freed, waiting for none.
static uint64_t hrt_cuda_finishing_freed(void) {
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

// Destroy: a device is being finished.
static void hrt_cuda_finishing_begin(void) {
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
                                            data, lengths));
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
static void* hrt_cuda_completion_main(void* arg) {
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
// Device
//===----------------------------------------------------------------------===//

// Only called at refcount zero: no submission is pending (each holds a
// reference), so both submission queues are empty; uploads, unloads and
// releases may still be. Waits for nothing: the completion thread finishes
// them (which may wait for the GPU, even for other devices' work on it,
// since cuMemFree, cuMemFreeHost and cuModuleUnload wait for the context),
// frees the device and exits, wherever the last reference dropped.
static void hrt_cuda_device_destroy(hrt_hal_device_t* base) {
  hrt_cuda_device_t* device = hrt_cuda_device_cast(base);
  hrt_mutex_lock(&device->mutex);
  hrt_cuda_finishing_begin();
  device->shutdown = true;
  hrt_cond_signal(&device->issue_cond);
  hrt_cond_signal(&device->completion_cond);
  hrt_mutex_unlock(&device->mutex);
}

void hrt_cuda_device_unload_module(hrt_hal_device_t* base,
                                   hrt_cu_module_t module) {
  hrt_cuda_device_t* device = hrt_cuda_device_cast(base);
  hrt_cuda_unload_t* unload = malloc(sizeof(*unload));
  if (!unload) {
    // Out of memory: unload here, at the cost of a wait.
    hrt_status_t status = hrt_cuda_enter(device);
    if (status == HRT_OK) {
      (void)device->cu->cuModuleUnload(module);
      hrt_cuda_leave(device);
    }
    hrt_status_free(status);
    return;
  }
  unload->module = module;
  hrt_mutex_lock(&device->mutex);
  unload->next = device->unloads;
  device->unloads = unload;
  hrt_cond_signal(&device->completion_cond);
  hrt_mutex_unlock(&device->mutex);
}

static uint32_t hrt_cuda_count_commands(const hrt_hal_command_buffer_t* cb,
                                        hrt_hal_command_type_t type) {
  uint32_t count = 0;
  for (uint32_t i = 0; i < hrt_hal_command_buffer_count(cb); ++i) {
    count += hrt_hal_command_buffer_at(cb, i)->type == type;
  }
  return count;
}

static hrt_status_t hrt_cuda_queue_submit(
    hrt_hal_device_t* base, const hrt_hal_submission_t* submission) {
  hrt_cuda_device_t* device = hrt_cuda_device_cast(base);
  HRT_RETURN_IF_ERROR(hrt_cuda_lost_status(device));
  hrt_hal_command_buffer_t* command_buffer = submission->command_buffer;
  const uint32_t command_count = hrt_hal_command_buffer_count(command_buffer);
  const size_t offsets_size = command_count * sizeof(uint64_t);
  const size_t checkpoints_size =
      (hrt_cuda_count_commands(command_buffer, HRT_HAL_COMMAND_TRACE) + 1) *
      sizeof(hrt_cuda_checkpoint_t);
  const size_t timings_size =
      submission->dispatch_timing
          ? hrt_cuda_count_commands(command_buffer, HRT_HAL_COMMAND_DISPATCH) *
                sizeof(hrt_cuda_timing_t)
          : 0;
  hrt_cuda_submission_t* sub = NULL;
  HRT_RETURN_IF_ERROR(hrt_allocate_zeroed(
      sizeof(*sub) + offsets_size + checkpoints_size + timings_size +
          hrt_hal_pending_submission_storage_size(submission),
      "submission", (void**)&sub));
  // 8-byte members first, so that every array is aligned.
  sub->staging_offsets = (uint64_t*)(sub + 1);
  sub->checkpoints =
      (hrt_cuda_checkpoint_t*)((char*)sub->staging_offsets + offsets_size);
  sub->timings =
      (hrt_cuda_timing_t*)((char*)sub->checkpoints + checkpoints_size);
  sub->timeline_ns = -1;
  hrt_hal_pending_submission_init(&sub->pending, submission,
                                  (char*)sub->timings + timings_size);
  hrt_hal_device_retain(base);

  hrt_mutex_lock(&device->mutex);
  if (device->issue_tail) {
    device->issue_tail->next = sub;
  } else {
    device->issue_head = sub;
  }
  device->issue_tail = sub;
  hrt_cond_signal(&device->issue_cond);
  hrt_mutex_unlock(&device->mutex);
  return HRT_OK;
}

static const hrt_hal_device_vtable_t hrt_cuda_device_vtable = {
    .destroy = hrt_cuda_device_destroy,
    .allocate_buffer = hrt_cuda_allocate_buffer,
    .create_executable = hrt_cuda_create_executable,
    .queue_submit = hrt_cuda_queue_submit,
};

// Fills the device info from the driver.
static hrt_status_t hrt_cuda_query_info(const hrt_cuda_symbols_t* cu,
                                        hrt_cu_device_t cu_device,
                                        uint32_t ordinal,
                                        hrt_hal_device_info_t* info) {
  memset(info, 0, sizeof(*info));
  snprintf(info->driver, sizeof(info->driver), "cuda");
  snprintf(info->kind, sizeof(info->kind), "cuda");
  snprintf(info->uri, sizeof(info->uri), "cuda://%u", ordinal);
  info->ordinal = ordinal;
  HRT_RETURN_IF_ERROR(HRT_CUDA_CALL(
      cu, cuDeviceGetName, (info->name, (int)sizeof(info->name), cu_device)));
  info->name[sizeof(info->name) - 1] = 0;
  size_t total_memory = 0;
  HRT_RETURN_IF_ERROR(
      HRT_CUDA_CALL(cu, cuDeviceTotalMem_v2, (&total_memory, cu_device)));
  info->total_memory = total_memory;
  static const int attributes[3] = {
      HRT_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
      HRT_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
      HRT_CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT};
  int values[3] = {0, 0, 0};
  for (int i = 0; i < 3; ++i) {
    HRT_RETURN_IF_ERROR(HRT_CUDA_CALL(cu, cuDeviceGetAttribute,
                                      (&values[i], attributes[i], cu_device)));
  }
  info->compute_capability[0] = (uint32_t)values[0];
  info->compute_capability[1] = (uint32_t)values[1];
  info->multiprocessor_count = (uint32_t)values[2];
  info->driver_version = cu->driver_version;
  return HRT_OK;
}

// Retains the primary context, creates the streams and the fork event
// and sets up the allocator.
static hrt_status_t hrt_cuda_open(hrt_cuda_device_t* device) {
  const hrt_cuda_symbols_t* cu = device->cu;
  HRT_RETURN_IF_ERROR(HRT_CUDA_CALL(cu, cuDevicePrimaryCtxRetain,
                                    (&device->context, device->cu_device)));
  hrt_status_t status = hrt_cuda_enter(device);
  if (status != HRT_OK) {
    (void)cu->cuDevicePrimaryCtxRelease_v2(device->cu_device);
    return status;
  }
  status = HRT_CUDA_CALL(cu, cuStreamCreate,
                         (&device->stream, HRT_CU_STREAM_NON_BLOCKING));
  if (status == HRT_OK) {
    status = HRT_CUDA_CALL(cu, cuStreamCreate,
                           (&device->trace_stream, HRT_CU_STREAM_NON_BLOCKING));
  }
  if (status == HRT_OK) {
    status =
        HRT_CUDA_CALL(cu, cuEventCreate,
                      (&device->trace_fork, HRT_CU_EVENT_BLOCKING_SYNC |
                                                HRT_CU_EVENT_DISABLE_TIMING));
  }
  if (status == HRT_OK) {
    hrt_cuda_allocator_initialize(cu, device->cu_device, device->stream,
                                  &device->allocator);
  }
  hrt_cuda_leave(device);
  if (status != HRT_OK) {
    if (device->stream) {
      hrt_cuda_close(device);
    } else {
      (void)cu->cuDevicePrimaryCtxRelease_v2(device->cu_device);
    }
  }
  return status;
}

static hrt_status_t hrt_cuda_device_create_once(
    const hrt_cuda_symbols_t* symbols, uint32_t ordinal,
    hrt_hal_device_t** out_device) {
  hrt_cuda_device_t* device = NULL;
  HRT_RETURN_IF_ERROR(
      hrt_allocate_zeroed(sizeof(*device), "device", (void**)&device));
  device->cu = symbols;
  device->host_offset_ns = INT64_MAX;  // no observation yet
  device->reported_end_ns = INT64_MIN;
  hrt_status_t status =
      HRT_CUDA_CALL(symbols, cuDeviceGet, (&device->cu_device, (int)ordinal));
  if (status == HRT_OK) {
    status = hrt_cuda_query_info(symbols, device->cu_device, ordinal,
                                 &device->base.info);
  }
  if (status == HRT_OK) status = hrt_cuda_open(device);
  if (status != HRT_OK) {
    free(device);
    return hrt_status_annotate(status, "creating CUDA device %u", ordinal);
  }
  hrt_mutex_init(&device->mutex);
  hrt_mutex_init(&device->traces_mutex);
  hrt_cond_init(&device->issue_cond);
  hrt_cond_init(&device->completion_cond);
  hrt_cuda_staging_pool_initialize(symbols, &device->staging);
  status = hrt_thread_create("halrt-cu-issue", hrt_cuda_issue_main, device,
                             &device->issue_thread);
  if (status == HRT_OK) {
    status = hrt_thread_create("halrt-cu-done", hrt_cuda_completion_main,
                               device, &device->completion_thread);
    if (status != HRT_OK) {
      hrt_mutex_lock(&device->mutex);
      device->shutdown = true;
      hrt_cond_signal(&device->issue_cond);
      hrt_mutex_unlock(&device->mutex);
      hrt_thread_join(&device->issue_thread);
    }
  }
  if (status != HRT_OK) {
    hrt_status_t entered = hrt_cuda_enter(device);
    hrt_cuda_allocator_deinitialize(&device->allocator);
    if (entered == HRT_OK) hrt_cuda_leave(device);
    hrt_status_free(entered);
    hrt_cuda_staging_pool_deinitialize(&device->staging);
    hrt_cond_deinit(&device->completion_cond);
    hrt_cond_deinit(&device->issue_cond);
    hrt_mutex_deinit(&device->traces_mutex);
    hrt_mutex_deinit(&device->mutex);
    hrt_cuda_close(device);
    free(device);
    return status;
  }
  // Info was filled above; initialize only sets the ref, vtable and count.
  hrt_hal_device_initialize(&hrt_cuda_device_vtable, &device->base);
  *out_device = &device->base;
  return HRT_OK;
}

hrt_status_t hrt_cuda_device_create(const hrt_cuda_symbols_t* symbols,
                                    uint32_t ordinal,
                                    hrt_hal_device_t** out_device) {
  pthread_once(&hrt_cuda_finishing.once, hrt_cuda_finishing_init);
  const uint64_t freed = hrt_cuda_finishing_freed();
  hrt_status_t status =
      hrt_cuda_device_create_once(symbols, ordinal, out_device);
  // A lost primary context that destroyed devices held (or still hold):
  // once they are freed, the next retain makes a fresh one.
  if (hrt_status_code(status) == HRT_STATUS_DEVICE_LOST &&
      hrt_cuda_finishing_wait() != freed) {
    hrt_status_free(status);
    status = hrt_cuda_device_create_once(symbols, ordinal, out_device);
  }
  return status;
}
