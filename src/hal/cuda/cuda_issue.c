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

// Issuing (issue thread)
//===----------------------------------------------------------------------===//

uint64_t hrt_cuda_align(uint64_t size) {
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

char* hrt_cuda_staged(const hrt_cuda_submission_t* sub,
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
  if (!hrt_builtin_op_valid(signature, dispatch->constants)) {
    return hrt_status_make(
        HRT_STATUS_INVALID_ARGUMENT,
        "kernel '%s' of executable '%s': constant %u selects operation %u, "
        "but the kernel has %u",
        signature->name, dispatch->executable->name, signature->op_constant,
        dispatch->constants[signature->op_constant], signature->op_limit);
  }
  if (signature->check && !signature->check(dispatch->constants)) {
    return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                           "kernel '%s' of executable '%s': the constants do "
                           "not describe a dispatch of it",
                           signature->name, dispatch->executable->name);
  }
  for (uint32_t i = 0; i < signature->binding_count; ++i) {
    const uint64_t needed =
        hrt_builtin_binding_min_bytes(signature, i, dispatch->constants,
                                      dispatch->workgroup_count);
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

void hrt_cuda_forget_trace(hrt_cuda_device_t* device,
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

void* hrt_cuda_issue_main(void* arg) {
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
    HRT_LIST_APPEND(device->completion_head, device->completion_tail, sub,
                    next);
    hrt_cond_signal(&device->completion_cond);
  }
  hrt_mutex_unlock(&device->mutex);
  return NULL;
}

//===----------------------------------------------------------------------===//
