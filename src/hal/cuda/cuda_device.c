#include "hal/cuda/cuda_device.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/list.h"
#include "base/threads.h"
#include "hal/cuda/builtin_ptx.h"
#include "hal/cuda/cuda_allocator.h"
#include "hal/cuda/cuda_device_internal.h"
#include "hal/cuda/cuda_executable.h"
#include "hal/cuda/cuda_staging.h"
#include "hal/pending_submission.h"
#include "hal/tensor_summary.h"

// Lost state and context scopes
//===----------------------------------------------------------------------===//

hrt_status_t hrt_cuda_lost_status(hrt_cuda_device_t* device) {
  hrt_mutex_lock(&device->mutex);
  hrt_status_t status = hrt_status_clone(device->lost);
  hrt_mutex_unlock(&device->mutex);
  return status;
}

hrt_status_t hrt_cuda_check_lost(hrt_cuda_device_t* device,
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

hrt_status_t hrt_cuda_enter(hrt_cuda_device_t* device) {
  return HRT_CUDA_CALL(device->cu, cuCtxPushCurrent_v2, (device->context));
}

void hrt_cuda_leave(hrt_cuda_device_t* device) {
  hrt_cu_context_t popped = NULL;
  (void)device->cu->cuCtxPopCurrent_v2(&popped);
}

void hrt_cuda_close(hrt_cuda_device_t* device) {
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
  HRT_LIST_APPEND(device->upload_head, device->upload_tail, upload, next);
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

// Allocates and initialises device memory (HRT_HAL_UNINITIALIZED: not at
// all); the context is current.
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
  if (initial_data == HRT_HAL_UNINITIALIZED) {
    // The caller writes every byte first.
  } else if (byte_length && initial_data) {
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
  HRT_RETURN_IF_ERROR(hrt_allocate_recycled(
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
  HRT_LIST_APPEND(device->issue_head, device->issue_tail, sub, next);
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
  hrt_cuda_finishing_setup();
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
