// The CPU device behind both local drivers.
//
// Threads: one queue thread per device executes submissions in FIFO order
// and is the device's completion thread (completions, semaphore signals and
// failures run there). With a worker pool (`local-task`) the queue thread
// hands each dispatch's workgroups to the pool and waits for them; without
// one (`local-sync`) it runs them itself. Buffers come from the device's
// caching allocator (local_allocator.h); when the device has been idle for a
// while with blocks cached, the queue thread trims it.
//
// Lifetime: each pending submission retains the device. When the last
// reference drops on another thread, destroy joins the idle queue thread;
// when it drops on the queue thread itself (a completion released it), the
// thread is detached and frees the device as it exits.
#ifndef HRT_HAL_LOCAL_LOCAL_DEVICE_H_
#define HRT_HAL_LOCAL_LOCAL_DEVICE_H_

#include "hal/device.h"

// `worker_count` 0 makes a local-sync device; otherwise a local-task device
// with that many workers. `uri` is the canonical URI recorded in the info.
hrt_status_t hrt_local_device_create(
    const char* driver_name, uint32_t worker_count, const char* uri,
    hrt_hal_device_t** out_device) HRT_MUST_USE;

#endif  // HRT_HAL_LOCAL_LOCAL_DEVICE_H_
