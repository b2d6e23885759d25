#include "hal/buffer.h"

#include "base/live.h"
#include "hal/device.h"

void hrt_hal_buffer_initialize(const hrt_hal_buffer_vtable_t* vtable,
                               hrt_hal_device_t* device, uint64_t byte_length,
                               void* host_ptr, hrt_hal_buffer_t* buffer) {
  hrt_ref_init(&buffer->ref);
  buffer->vtable = vtable;
  buffer->device = device;
  buffer->byte_length = byte_length;
  buffer->host_ptr = host_ptr;
  hrt_hal_device_retain(device);
  hrt_live_add(HRT_LIVE_BUFFER, 1);
}

void hrt_hal_buffer_retain(hrt_hal_buffer_t* buffer) {
  if (buffer) hrt_ref_retain(&buffer->ref);
}

void hrt_hal_buffer_release(hrt_hal_buffer_t* buffer) {
  if (!buffer || !hrt_ref_release(&buffer->ref)) return;
  hrt_hal_device_t* device = buffer->device;
  buffer->vtable->destroy(buffer);
  hrt_live_add(HRT_LIVE_BUFFER, -1);
  hrt_hal_device_release(device);
}

hrt_status_t hrt_hal_buffer_ref_resolve(const hrt_hal_buffer_ref_t* ref,
                                        const hrt_hal_buffer_ref_t* table,
                                        uint32_t table_count,
                                        hrt_hal_buffer_ref_t* out_resolved) {
  hrt_hal_buffer_ref_t base;
  if (ref->buffer) {
    base = (hrt_hal_buffer_ref_t){ref->buffer, 0, 0, ref->buffer->byte_length};
  } else {
    if (ref->slot >= table_count || !table[ref->slot].buffer) {
      return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                             "uses binding slot %u but the binding table has "
                             "%u entries",
                             ref->slot, table_count);
    }
    HRT_RETURN_IF_ERROR(
        hrt_hal_buffer_ref_resolve(&table[ref->slot], NULL, 0, &base));
  }
  if (ref->offset > base.length) {
    return hrt_status_make(HRT_STATUS_OUT_OF_RANGE,
                           "offset %llu is past the end of its %llu-byte "
                           "range",
                           (unsigned long long)ref->offset,
                           (unsigned long long)base.length);
  }
  uint64_t available = base.length - ref->offset;
  uint64_t length =
      ref->length == HRT_HAL_WHOLE_BUFFER ? available : ref->length;
  if (length > available) {
    return hrt_status_make(HRT_STATUS_OUT_OF_RANGE,
                           "%llu bytes at offset %llu do not fit in its "
                           "%llu-byte range",
                           (unsigned long long)length,
                           (unsigned long long)ref->offset,
                           (unsigned long long)base.length);
  }
  *out_resolved =
      (hrt_hal_buffer_ref_t){base.buffer, 0, base.offset + ref->offset, length};
  return HRT_OK;
}
