// The CPU device behind both local drivers.
//
// Threads: one queue thread per device executes submissions in FIFO order.
// With a worker pool (`local-task`) the queue thread hands each dispatch's
// workgroups to the pool and waits for them; without one (`local-sync`) it
// runs them itself. Once the queue empties after work, the queue thread
// spins up to 50 us for the next submission (yielding its core to any
// thread that wants it) before it sleeps, and a submit signals it only
// while it sleeps: a caller that awaits each result, or keeps several in
// flight, then makes no system call to wake it. The device's threads give
// way to the JS thread (hrt_thread_give_way). Buffers
// come from the device's caching allocator
// (local_allocator.h); when the device has been idle for a while with blocks
// cached, the queue thread trims it.
//
// Traces: on a local-task device with two or more workers, a full trace
// runs on the queue thread at its place, and the sink's copies of it
// (hrt_hal_device_copy_host) are spread over the workers, idle until the
// next command: on the trace thread the copy would compete with them for
// the cores (a flight recorder's copies took 1.7x their floor that way,
// 0.9x this way). Elsewhere (local-sync, one worker), at a trace of 64 KiB
// or more, or at any trace while the trace
// thread has work, the queue thread resolves the traced ranges, hands the
// callback to the FIFO of the device's trace thread ("halrt-trace", started
// the first time; a device that never hands one off has none) and goes on.
// A smaller trace met while that thread is idle runs on the queue thread at
// once: handing it off would cost more than the sink's copy. The callback
// reads the live buffers, which the submission retains until it finishes. A
// later command that may write a range of a trace handed off and not yet
// run (any submission's; what hrt_hal_pending_submission_written reports)
// waits until that trace has run; reads never wait. While the trace thread
// has work, the queue thread hands it dispatch timings and submission
// finishes (semaphore signals, completion, device release) too, so that
// they run after the traces before them; otherwise it runs them itself. So
// the device's completion thread is the queue thread or the trace thread,
// taking turns: trace callbacks, timings and completions run in program
// order and never at once.
//
// Summary and health traces: the queue thread computes the summaries when
// it reaches the trace, in program order, over the live buffers
// (hal/tensor_summary.h), and hands on only them, by the rules above with
// their size as the bytes. Such a trace then reads no buffer, so no later
// command waits for it. On a local-task device the worker pool computes
// the chunks of a source of more than one chunk, and the queue thread
// merges their partials in chunk order: the queue thread stays the pool's
// only caller (the trace thread never uses it), and every local device
// gives the serial computation's result, bit for bit.
//
// Lifetime: each pending submission retains the device. When the last
// reference drops on another thread, destroy joins the idle queue and trace
// threads; when it drops on one of them (a completion released it), that
// thread is detached, joins the other, and frees the device as it exits.
#ifndef HRT_HAL_LOCAL_LOCAL_DEVICE_H_
#define HRT_HAL_LOCAL_LOCAL_DEVICE_H_

#include "hal/device.h"

// `worker_count` 0 makes a local-sync device; otherwise a local-task device
// with that many workers. `uri` is the canonical URI recorded in the info.
hrt_status_t hrt_local_device_create(
    const char* driver_name, uint32_t worker_count, const char* uri,
    hrt_hal_device_t** out_device) HRT_MUST_USE;

#endif  // HRT_HAL_LOCAL_LOCAL_DEVICE_H_
