#include "hal/command_buffer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/live.h"
#include "hal/device.h"

struct hrt_hal_command_buffer_s {
  hrt_ref_t ref;
  hrt_hal_device_t* device;  // retained
  bool finalized;
  uint32_t slot_count;
  uint32_t count;
  uint32_t capacity;
  hrt_hal_command_t* commands;
};

hrt_status_t hrt_hal_command_buffer_create(
    hrt_hal_device_t* device, hrt_hal_command_buffer_t** out_command_buffer) {
  hrt_hal_command_buffer_t* command_buffer = NULL;
  HRT_RETURN_IF_ERROR(hrt_allocate_zeroed(
      sizeof(*command_buffer), "command buffer", (void**)&command_buffer));
  hrt_ref_init(&command_buffer->ref);
  command_buffer->device = device;
  hrt_hal_device_retain(device);
  hrt_live_add(HRT_LIVE_COMMAND_BUFFER, 1);
  *out_command_buffer = command_buffer;
  return HRT_OK;
}

void hrt_hal_command_buffer_retain(hrt_hal_command_buffer_t* command_buffer) {
  if (command_buffer) hrt_ref_retain(&command_buffer->ref);
}

// Releases what a command's refs retained and what it owns.
static void hrt_command_release(hrt_hal_command_t* command) {
  switch (command->type) {
    case HRT_HAL_COMMAND_FILL:
      hrt_hal_buffer_release(command->fill.target.buffer);
      break;
    case HRT_HAL_COMMAND_COPY:
      hrt_hal_buffer_release(command->copy.source.buffer);
      hrt_hal_buffer_release(command->copy.target.buffer);
      break;
    case HRT_HAL_COMMAND_UPDATE:
      free((void*)command->update.data);
      hrt_hal_buffer_release(command->update.target.buffer);
      break;
    case HRT_HAL_COMMAND_READ:
      hrt_hal_buffer_release(command->read.source.buffer);
      break;
    case HRT_HAL_COMMAND_DISPATCH:
      for (uint32_t i = 0; i < command->dispatch.binding_count; ++i) {
        hrt_hal_buffer_release(command->dispatch.bindings[i].buffer);
      }
      free((void*)command->dispatch.bindings);
      free((void*)command->dispatch.constants);
      hrt_hal_executable_release(command->dispatch.executable);
      break;
    case HRT_HAL_COMMAND_TRACE:
      for (uint32_t i = 0; i < command->trace.source_count; ++i) {
        hrt_hal_buffer_release(command->trace.sources[i].buffer);
      }
      free((void*)command->trace.sources);
      free((void*)command->trace.element_types);
      break;
    case HRT_HAL_COMMAND_BARRIER:
      break;
  }
}

void hrt_hal_command_buffer_release(hrt_hal_command_buffer_t* command_buffer) {
  if (!command_buffer || !hrt_ref_release(&command_buffer->ref)) return;
  for (uint32_t i = 0; i < command_buffer->count; ++i) {
    hrt_command_release(&command_buffer->commands[i]);
  }
  free(command_buffer->commands);
  hrt_hal_device_release(command_buffer->device);
  free(command_buffer);
  hrt_live_add(HRT_LIVE_COMMAND_BUFFER, -1);
}

// Checks a ref as far as record time allows: a fixed buffer must belong to
// the device and the range must fit; a slot range is checked at submit.
static hrt_status_t hrt_check_ref(hrt_hal_command_buffer_t* command_buffer,
                                  const hrt_hal_buffer_ref_t* ref,
                                  const char* what, uint64_t* out_length) {
  if (ref->buffer) {
    if (ref->buffer->device != command_buffer->device) {
      return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                             "%s belongs to another device", what);
    }
    hrt_hal_buffer_ref_t resolved;
    hrt_status_t status = hrt_hal_buffer_ref_resolve(ref, NULL, 0, &resolved);
    if (status != HRT_OK) return hrt_status_annotate(status, "%s", what);
    if (out_length) *out_length = resolved.length;
  } else if (out_length) {
    *out_length = ref->length;
  }
  return HRT_OK;
}

// Appends `command` (whose refs are not yet retained) and retains them.
static hrt_status_t hrt_append(hrt_hal_command_buffer_t* command_buffer,
                               const hrt_hal_command_t* command) {
  if (command_buffer->count == command_buffer->capacity) {
    uint32_t capacity =
        command_buffer->capacity ? command_buffer->capacity * 2 : 8;
    hrt_hal_command_t* commands =
        realloc(command_buffer->commands, capacity * sizeof(hrt_hal_command_t));
    if (!commands) {
      return hrt_status_make(HRT_STATUS_RESOURCE_EXHAUSTED,
                             "out of host memory recording a command");
    }
    command_buffer->commands = commands;
    command_buffer->capacity = capacity;
  }
  command_buffer->commands[command_buffer->count++] = *command;
  return HRT_OK;
}

static void hrt_note_slot(hrt_hal_command_buffer_t* command_buffer,
                          const hrt_hal_buffer_ref_t* ref) {
  if (ref->buffer) {
    hrt_hal_buffer_retain(ref->buffer);
  } else if (ref->slot + 1 > command_buffer->slot_count) {
    command_buffer->slot_count = ref->slot + 1;
  }
}

static hrt_status_t hrt_check_recording(
    const hrt_hal_command_buffer_t* command_buffer) {
  if (command_buffer->finalized) {
    return hrt_status_make(HRT_STATUS_FAILED_PRECONDITION,
                           "command buffer is finalized; it cannot record");
  }
  return HRT_OK;
}

hrt_status_t hrt_hal_command_buffer_fill(
    hrt_hal_command_buffer_t* command_buffer, hrt_hal_buffer_ref_t target,
    uint64_t pattern, uint32_t pattern_length) {
  HRT_RETURN_IF_ERROR(hrt_check_recording(command_buffer));
  if (pattern_length != 1 && pattern_length != 2 && pattern_length != 4 &&
      pattern_length != 8) {
    return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                           "fill pattern length must be 1, 2, 4 or 8 (got %u)",
                           pattern_length);
  }
  uint64_t length = 0;
  HRT_RETURN_IF_ERROR(
      hrt_check_ref(command_buffer, &target, "fill target", &length));
  if (length != HRT_HAL_WHOLE_BUFFER && length % pattern_length != 0) {
    return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                           "fill length %llu is not a multiple of the pattern "
                           "length %u",
                           (unsigned long long)length, pattern_length);
  }
  hrt_hal_command_t command = {.type = HRT_HAL_COMMAND_FILL};
  command.fill.target = target;
  command.fill.pattern = pattern;
  command.fill.pattern_length = pattern_length;
  HRT_RETURN_IF_ERROR(hrt_append(command_buffer, &command));
  hrt_note_slot(command_buffer, &target);
  return HRT_OK;
}

hrt_status_t hrt_hal_command_buffer_copy(
    hrt_hal_command_buffer_t* command_buffer, hrt_hal_buffer_ref_t source,
    hrt_hal_buffer_ref_t target) {
  HRT_RETURN_IF_ERROR(hrt_check_recording(command_buffer));
  uint64_t source_length = 0, target_length = 0;
  HRT_RETURN_IF_ERROR(
      hrt_check_ref(command_buffer, &source, "copy source", &source_length));
  HRT_RETURN_IF_ERROR(
      hrt_check_ref(command_buffer, &target, "copy target", &target_length));
  if (source.buffer && target.buffer && source_length != target_length) {
    return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                           "copy source has %llu bytes but target has %llu",
                           (unsigned long long)source_length,
                           (unsigned long long)target_length);
  }
  hrt_hal_command_t command = {.type = HRT_HAL_COMMAND_COPY};
  command.copy.source = source;
  command.copy.target = target;
  HRT_RETURN_IF_ERROR(hrt_append(command_buffer, &command));
  hrt_note_slot(command_buffer, &source);
  hrt_note_slot(command_buffer, &target);
  return HRT_OK;
}

hrt_status_t hrt_hal_command_buffer_update(
    hrt_hal_command_buffer_t* command_buffer, const void* data, uint64_t length,
    hrt_hal_buffer_ref_t target) {
  HRT_RETURN_IF_ERROR(hrt_check_recording(command_buffer));
  target.length = length;
  HRT_RETURN_IF_ERROR(
      hrt_check_ref(command_buffer, &target, "update target", NULL));
  void* copy = NULL;
  HRT_RETURN_IF_ERROR(hrt_allocate((size_t)length, "update data", &copy));
  if (length) memcpy(copy, data, (size_t)length);
  hrt_hal_command_t command = {.type = HRT_HAL_COMMAND_UPDATE};
  command.update.data = copy;
  command.update.target = target;
  hrt_status_t status = hrt_append(command_buffer, &command);
  if (status != HRT_OK) {
    free(copy);
    return status;
  }
  hrt_note_slot(command_buffer, &target);
  return HRT_OK;
}

hrt_status_t hrt_hal_command_buffer_read(
    hrt_hal_command_buffer_t* command_buffer, hrt_hal_buffer_ref_t source,
    void* host_target) {
  HRT_RETURN_IF_ERROR(hrt_check_recording(command_buffer));
  HRT_RETURN_IF_ERROR(
      hrt_check_ref(command_buffer, &source, "read source", NULL));
  hrt_hal_command_t command = {.type = HRT_HAL_COMMAND_READ};
  command.read.source = source;
  command.read.host_target = host_target;
  HRT_RETURN_IF_ERROR(hrt_append(command_buffer, &command));
  hrt_note_slot(command_buffer, &source);
  return HRT_OK;
}

static hrt_status_t hrt_check_dispatch(hrt_hal_command_buffer_t* command_buffer,
                                       const hrt_hal_dispatch_t* dispatch) {
  const hrt_hal_executable_t* executable = dispatch->executable;
  if (executable->device != command_buffer->device) {
    return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                           "dispatch executable '%s' belongs to another device",
                           executable->name);
  }
  if (dispatch->entry_ordinal >= executable->entry_count) {
    return hrt_status_make(HRT_STATUS_OUT_OF_RANGE,
                           "dispatch entry ordinal %u out of range (%u "
                           "kernels in '%s')",
                           dispatch->entry_ordinal, executable->entry_count,
                           executable->name);
  }
  const hrt_hal_executable_entry_t* entry =
      &executable->entries[dispatch->entry_ordinal];
  if (dispatch->binding_count != entry->binding_count ||
      dispatch->constant_count != entry->constant_count) {
    return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                           "kernel '%s' takes %u bindings and %u constants "
                           "(got %u and %u)",
                           entry->name, entry->binding_count,
                           entry->constant_count, dispatch->binding_count,
                           dispatch->constant_count);
  }
  if (dispatch->binding_count < 32 &&
      dispatch->read_only_bindings >> dispatch->binding_count) {
    return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                           "kernel '%s': read_only_bindings 0x%x marks "
                           "bindings past its %u",
                           entry->name, dispatch->read_only_bindings,
                           dispatch->binding_count);
  }
  static const uint32_t max_count[3] = {0x7FFFFFFFu, 65535u, 65535u};
  uint64_t invocations = 1;
  for (int i = 0; i < 3; ++i) {
    if (dispatch->workgroup_count[i] < 1 ||
        dispatch->workgroup_count[i] > max_count[i]) {
      return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                             "kernel '%s': workgroup count[%d] = %u must be "
                             "in [1, %u]",
                             entry->name, i, dispatch->workgroup_count[i],
                             max_count[i]);
    }
    if (dispatch->workgroup_size[i] < 1) {
      return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                             "kernel '%s': workgroup size[%d] must be >= 1",
                             entry->name, i);
    }
    invocations *= dispatch->workgroup_size[i];
  }
  uint64_t workgroups = (uint64_t)dispatch->workgroup_count[0] *
                        dispatch->workgroup_count[1] *
                        dispatch->workgroup_count[2];
  if (workgroups > HRT_HAL_MAX_DISPATCH_WORKGROUPS) {
    return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                           "kernel '%s': %llu workgroups exceed the limit of "
                           "%llu per dispatch",
                           entry->name, (unsigned long long)workgroups,
                           (unsigned long long)HRT_HAL_MAX_DISPATCH_WORKGROUPS);
  }
  if (invocations > 1024) {
    return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                           "kernel '%s': workgroup size %ux%ux%u exceeds 1024 "
                           "invocations",
                           entry->name, dispatch->workgroup_size[0],
                           dispatch->workgroup_size[1],
                           dispatch->workgroup_size[2]);
  }
  for (uint32_t i = 0; i < dispatch->binding_count; ++i) {
    if (dispatch->bindings[i].buffer == NULL) continue;  // checked at submit
    char what[96];
    snprintf(what, sizeof(what), "kernel '%s' binding %u", entry->name, i);
    HRT_RETURN_IF_ERROR(
        hrt_check_ref(command_buffer, &dispatch->bindings[i], what, NULL));
  }
  return HRT_OK;
}

hrt_status_t hrt_hal_command_buffer_dispatch(
    hrt_hal_command_buffer_t* command_buffer,
    const hrt_hal_dispatch_t* dispatch) {
  HRT_RETURN_IF_ERROR(hrt_check_recording(command_buffer));
  HRT_RETURN_IF_ERROR(hrt_check_dispatch(command_buffer, dispatch));
  hrt_hal_command_t command = {.type = HRT_HAL_COMMAND_DISPATCH};
  command.dispatch = *dispatch;
  uint32_t* constants = NULL;
  hrt_hal_buffer_ref_t* bindings = NULL;
  hrt_status_t status =
      hrt_allocate(dispatch->constant_count * sizeof(uint32_t),
                   "dispatch constants", (void**)&constants);
  if (status == HRT_OK) {
    status = hrt_allocate(dispatch->binding_count * sizeof(*bindings),
                          "dispatch bindings", (void**)&bindings);
  }
  if (status == HRT_OK) {
    if (dispatch->constant_count) {
      memcpy(constants, dispatch->constants,
             dispatch->constant_count * sizeof(uint32_t));
    }
    if (dispatch->binding_count) {
      memcpy(bindings, dispatch->bindings,
             dispatch->binding_count * sizeof(*bindings));
    }
    command.dispatch.constants = constants;
    command.dispatch.bindings = bindings;
    status = hrt_append(command_buffer, &command);
  }
  if (status != HRT_OK) {
    free(constants);
    free(bindings);
    return status;
  }
  hrt_hal_executable_retain(dispatch->executable);
  for (uint32_t i = 0; i < dispatch->binding_count; ++i) {
    hrt_note_slot(command_buffer, &bindings[i]);
  }
  return HRT_OK;
}

hrt_status_t hrt_hal_command_buffer_barrier(
    hrt_hal_command_buffer_t* command_buffer) {
  HRT_RETURN_IF_ERROR(hrt_check_recording(command_buffer));
  hrt_hal_command_t command = {.type = HRT_HAL_COMMAND_BARRIER};
  return hrt_append(command_buffer, &command);
}

// Checks a summary source's range (resolved) against its element type: a
// whole number of elements, at an offset a device can load them from;
// `what` names the source.
static hrt_status_t hrt_check_summary_range(const hrt_hal_buffer_ref_t* range,
                                            hrt_hal_element_type_t type,
                                            const char* what) {
  const size_t size = hrt_hal_element_type_size(type);
  if (range->length % size != 0) {
    return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                           "%s has %llu bytes, not a multiple of the %zu-byte "
                           "%s element",
                           what, (unsigned long long)range->length, size,
                           hrt_hal_element_type_name(type));
  }
  if (range->offset % size != 0) {
    return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                           "%s starts at byte %llu of its buffer, not at a "
                           "multiple of the %zu-byte %s element",
                           what, (unsigned long long)range->offset, size,
                           hrt_hal_element_type_name(type));
  }
  return HRT_OK;
}

hrt_status_t hrt_hal_command_buffer_trace_mode(
    hrt_hal_command_buffer_t* command_buffer, hrt_hal_trace_mode_t mode,
    const hrt_hal_buffer_ref_t* sources,
    const hrt_hal_element_type_t* element_types, uint32_t count,
    hrt_hal_trace_fn_t fn, void* user_data) {
  HRT_RETURN_IF_ERROR(hrt_check_recording(command_buffer));
  if (count < 1 || count > HRT_HAL_MAX_TRACE_SOURCES || !fn) {
    return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                           "a trace needs a callback and 1 to %d sources "
                           "(got %u)",
                           HRT_HAL_MAX_TRACE_SOURCES, count);
  }
  if ((unsigned)mode >= HRT_HAL_TRACE_MODE_COUNT_) {
    return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                           "trace mode %d is not one of full, summary, health",
                           (int)mode);
  }
  const bool summary = mode != HRT_HAL_TRACE_FULL;
  if (summary && !element_types) {
    return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                           "a %s trace needs the element type of each source",
                           hrt_hal_trace_mode_name(mode));
  }
  for (uint32_t i = 0; i < count; ++i) {
    char what[48];
    snprintf(what, sizeof(what), "trace source %u", i);
    if (summary && (unsigned)element_types[i] >= HRT_HAL_ELEMENT_TYPE_COUNT_) {
      return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                             "%s: element type %d is not a dtype", what,
                             (int)element_types[i]);
    }
    if (sources[i].buffer == NULL) continue;  // checked at submit
    HRT_RETURN_IF_ERROR(hrt_check_ref(command_buffer, &sources[i], what, NULL));
    if (summary) {
      hrt_hal_buffer_ref_t range;  // resolves: hrt_check_ref succeeded
      HRT_RETURN_IF_ERROR(
          hrt_hal_buffer_ref_resolve(&sources[i], NULL, 0, &range));
      HRT_RETURN_IF_ERROR(
          hrt_check_summary_range(&range, element_types[i], what));
    }
  }
  hrt_hal_buffer_ref_t* copy = NULL;
  hrt_hal_element_type_t* types = NULL;
  HRT_RETURN_IF_ERROR(
      hrt_allocate(count * sizeof(*copy), "trace sources", (void**)&copy));
  memcpy(copy, sources, count * sizeof(*copy));
  hrt_status_t status = HRT_OK;
  if (summary) {
    status = hrt_allocate(count * sizeof(*types), "trace element types",
                          (void**)&types);
    if (status == HRT_OK) memcpy(types, element_types, count * sizeof(*types));
  }
  hrt_hal_command_t command = {.type = HRT_HAL_COMMAND_TRACE};
  command.trace.fn = fn;
  command.trace.user_data = user_data;
  command.trace.source_count = count;
  command.trace.sources = copy;
  command.trace.mode = mode;
  command.trace.element_types = types;
  if (status == HRT_OK) status = hrt_append(command_buffer, &command);
  if (status != HRT_OK) {
    free(copy);
    free(types);
    return status;
  }
  for (uint32_t i = 0; i < count; ++i) hrt_note_slot(command_buffer, &copy[i]);
  return HRT_OK;
}

hrt_status_t hrt_hal_command_buffer_trace(
    hrt_hal_command_buffer_t* command_buffer,
    const hrt_hal_buffer_ref_t* sources, uint32_t count, hrt_hal_trace_fn_t fn,
    void* user_data) {
  return hrt_hal_command_buffer_trace_mode(command_buffer, HRT_HAL_TRACE_FULL,
                                           sources, NULL, count, fn, user_data);
}

void hrt_hal_command_buffer_finalize(hrt_hal_command_buffer_t* command_buffer) {
  command_buffer->finalized = true;
}

hrt_hal_device_t* hrt_hal_command_buffer_device(
    const hrt_hal_command_buffer_t* command_buffer) {
  return command_buffer->device;
}
bool hrt_hal_command_buffer_is_finalized(
    const hrt_hal_command_buffer_t* command_buffer) {
  return command_buffer->finalized;
}
uint32_t hrt_hal_command_buffer_count(
    const hrt_hal_command_buffer_t* command_buffer) {
  return command_buffer->count;
}
const hrt_hal_command_t* hrt_hal_command_buffer_at(
    const hrt_hal_command_buffer_t* command_buffer, uint32_t index) {
  return &command_buffer->commands[index];
}
uint32_t hrt_hal_command_buffer_slot_count(
    const hrt_hal_command_buffer_t* command_buffer) {
  return command_buffer->slot_count;
}

// Resolves `ref` against the table and returns its length, naming the
// command and operand on failure.
// `number` >= 0 numbers the operand within its command ("binding 2"). The
// name is formatted only when resolution fails.
static hrt_status_t hrt_resolve_operand(const hrt_hal_buffer_ref_t* ref,
                                        const hrt_hal_buffer_ref_t* table,
                                        uint32_t table_count, uint32_t index,
                                        const char* operand, int64_t number,
                                        uint64_t* out_length) {
  hrt_hal_buffer_ref_t resolved;
  hrt_status_t status =
      hrt_hal_buffer_ref_resolve(ref, table, table_count, &resolved);
  if (status != HRT_OK) {
    return number >= 0
               ? hrt_status_annotate(status, "command %u %s %u", index, operand,
                                     (unsigned)number)
               : hrt_status_annotate(status, "command %u %s", index, operand);
  }
  *out_length = resolved.length;
  return HRT_OK;
}

hrt_status_t hrt_hal_command_buffer_validate_bindings(
    const hrt_hal_command_buffer_t* command_buffer,
    const hrt_hal_buffer_ref_t* table, uint32_t table_count) {
  if (table_count < command_buffer->slot_count) {
    return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                           "command buffer uses %u binding slots but %u "
                           "bindings were given",
                           command_buffer->slot_count, table_count);
  }
  for (uint32_t i = 0; i < table_count; ++i) {
    if (!table[i].buffer) {
      return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                             "binding %u has no buffer", i);
    }
    if (table[i].buffer->device != command_buffer->device) {
      return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                             "binding %u belongs to another device", i);
    }
  }
  for (uint32_t i = 0; i < command_buffer->count; ++i) {
    const hrt_hal_command_t* command = &command_buffer->commands[i];
    uint64_t a = 0, b = 0;
    switch (command->type) {
      case HRT_HAL_COMMAND_FILL:
        HRT_RETURN_IF_ERROR(hrt_resolve_operand(&command->fill.target, table,
                                                table_count, i, "fill target",
                                                -1, &a));
        if (a % command->fill.pattern_length != 0) {
          return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                                 "command %u fill length %llu is not a "
                                 "multiple of the pattern length %u",
                                 i, (unsigned long long)a,
                                 command->fill.pattern_length);
        }
        break;
      case HRT_HAL_COMMAND_COPY:
        HRT_RETURN_IF_ERROR(hrt_resolve_operand(&command->copy.source, table,
                                                table_count, i, "copy source",
                                                -1, &a));
        HRT_RETURN_IF_ERROR(hrt_resolve_operand(&command->copy.target, table,
                                                table_count, i, "copy target",
                                                -1, &b));
        if (a != b) {
          return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                                 "command %u copy source has %llu bytes but "
                                 "target has %llu",
                                 i, (unsigned long long)a,
                                 (unsigned long long)b);
        }
        break;
      case HRT_HAL_COMMAND_UPDATE:
        HRT_RETURN_IF_ERROR(hrt_resolve_operand(&command->update.target, table,
                                                table_count, i, "update target",
                                                -1, &a));
        break;
      case HRT_HAL_COMMAND_READ:
        HRT_RETURN_IF_ERROR(hrt_resolve_operand(&command->read.source, table,
                                                table_count, i, "read source",
                                                -1, &a));
        break;
      case HRT_HAL_COMMAND_DISPATCH:
        for (uint32_t j = 0; j < command->dispatch.binding_count; ++j) {
          HRT_RETURN_IF_ERROR(
              hrt_resolve_operand(&command->dispatch.bindings[j], table,
                                  table_count, i, "binding", j, &a));
        }
        break;
      case HRT_HAL_COMMAND_TRACE:
        for (uint32_t j = 0; j < command->trace.source_count; ++j) {
          HRT_RETURN_IF_ERROR(hrt_resolve_operand(&command->trace.sources[j],
                                                  table, table_count, i,
                                                  "trace source", j, &a));
          if (command->trace.element_types) {
            hrt_hal_buffer_ref_t range;  // resolves: checked just above
            HRT_RETURN_IF_ERROR(hrt_hal_buffer_ref_resolve(
                &command->trace.sources[j], table, table_count, &range));
            char what[64];
            snprintf(what, sizeof(what), "command %u trace source %u", i, j);
            HRT_RETURN_IF_ERROR(hrt_check_summary_range(
                &range, command->trace.element_types[j], what));
          }
        }
        break;
      case HRT_HAL_COMMAND_BARRIER:
        break;
    }
  }
  return HRT_OK;
}
