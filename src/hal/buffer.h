// Buffers: device memory of a fixed byte length, reference counted.
//
// A buffer retains the device that allocated it, so a device lives at least
// as long as its buffers. `host_ptr` is the host address of the storage when
// the host can address it directly (CPU devices) and NULL otherwise (CUDA
// device memory); drivers read and write buffers only from their own threads
// or from the thread that creates them.
//
// Buffers are created by hrt_hal_device_allocate_buffer(); implementations
// fill the common fields with hrt_hal_buffer_initialize().
#ifndef HRT_HAL_BUFFER_H_
#define HRT_HAL_BUFFER_H_

#include <stdint.h>

#include "base/ref.h"
#include "base/status.h"

typedef struct hrt_hal_device_s hrt_hal_device_t;
typedef struct hrt_hal_buffer_s hrt_hal_buffer_t;

typedef struct hrt_hal_buffer_vtable_s {
  // Frees the storage and the buffer struct; the device is released after.
  void (*destroy)(hrt_hal_buffer_t* buffer);
} hrt_hal_buffer_vtable_t;

struct hrt_hal_buffer_s {
  hrt_ref_t ref;
  const hrt_hal_buffer_vtable_t* vtable;
  hrt_hal_device_t* device;  // retained
  uint64_t byte_length;
  void* host_ptr;  // NULL when not host-addressable
};

// For implementations: sets the common fields and retains `device`.
void hrt_hal_buffer_initialize(const hrt_hal_buffer_vtable_t* vtable,
                               hrt_hal_device_t* device, uint64_t byte_length,
                               void* host_ptr, hrt_hal_buffer_t* buffer);

void hrt_hal_buffer_retain(hrt_hal_buffer_t* buffer);
// Any thread; the last release frees the storage on that thread.
void hrt_hal_buffer_release(hrt_hal_buffer_t* buffer);

// A byte range of a buffer, or of a binding-table slot resolved at submit
// time (buffer == NULL). `length` may be HRT_HAL_WHOLE_BUFFER: up to the end.
#define HRT_HAL_WHOLE_BUFFER UINT64_MAX
typedef struct hrt_hal_buffer_ref_s {
  hrt_hal_buffer_t* buffer;
  uint32_t slot;
  uint64_t offset;
  uint64_t length;
} hrt_hal_buffer_ref_t;

// Resolves `ref` against `table` (used when ref->buffer is NULL) into a
// concrete buffer and an in-bounds range: OUT_OF_RANGE when the range does
// not fit, INVALID_ARGUMENT when the slot is not in the table. The message
// does not name the operand; callers prefix it (hrt_status_annotate), so
// that a resolve that succeeds formats nothing. Any thread.
hrt_status_t hrt_hal_buffer_ref_resolve(
    const hrt_hal_buffer_ref_t* ref, const hrt_hal_buffer_ref_t* table,
    uint32_t table_count, hrt_hal_buffer_ref_t* out_resolved) HRT_MUST_USE;

#endif  // HRT_HAL_BUFFER_H_
