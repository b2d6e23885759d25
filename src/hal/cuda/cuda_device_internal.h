// Internal to the CUDA device's files: cuda_device.c (creation, buffers,
// executables, the lost state, destroy), cuda_issue.c (the issue thread:
// commands enqueued on the stream) and cuda_completion.c (the completion
// thread: waits, completions, trims, and devices finished after destroy).
// The device struct and which thread may touch each field are here; the
// public contract is cuda_device.h.
//
// Memory: buffers are blocks of the device's allocator (cuda_allocator.h:
// the driver's memory pool, stream-ordered, or a caching allocator;
// host_ptr is NULL), zero-filled (cuMemsetD8Async) or initialised from the
// caller's data with work enqueued on the device's stream before allocate
// returns, so every later submission sees it. The caller's data is copied
// into a pinned staging block (cuda_staging.h) and uploaded from there; the
// completion thread releases the block once the copy's event has completed.
// A buffer's memory goes back to the allocator when its last reference
// drops, on any thread: every submission that used it held a reference
// until it completed and its initial fill or upload was enqueued at
// allocate, so all its uses are on the stream already and the
// stream-ordered free (or a reuse of the block) comes after them; trace
// copies of it, on the trace stream, were waited for before the
// submission that made them completed.
//
// No call that can wait for the GPU runs on a caller's thread (the JS
// thread); docs/cuda.md ("Memory and commands") has the table of which
// CUDA call runs on which thread. Keep it true when a call moves.
//
// Threads and streams. Each device has two streams (the stream, and the
// trace stream for the copies of traced ranges) and two threads of its own;
// both threads keep the device's primary context current.
// - The issue thread takes accepted submissions in FIFO order, waits for
//   their wait semaphores, and enqueues their commands into the stream:
//   fills as memsets (8/16/32-bit, or 2-D 32-bit/8-bit memsets for patterns
//   the plain ones cannot express, see cuda_issue.c), copies, updates from
//   staging, reads into staging, and dispatches with cuLaunchKernel. A
//   trace goes to the trace stream: the trace stream waits (cuStreamWaitEvent)
//   for a fork event recorded on the stream after the commands before it,
//   copies the traced ranges into staging, and records the trace's event.
//   A summary or health trace runs, instead of the copies, the summary
//   kernels of the built-in PTX (kernels/builtin.cu) on the trace stream:
//   per source hrt_summary_partial (up to 1024 blocks, one partial each,
//   into a scratch buffer) then hrt_summary_final (one block, into the
//   source's result slot), then one copy of the results (72 bytes a
//   source) into staging. The module and the scratch are made at the
//   device's first such trace and freed when the device is; the trace
//   stream runs in order, so one scratch serves every trace.
//   Later commands do not wait for that work, except those that may write
//   a traced range (hrt_hal_pending_submission_written): the issue thread
//   keeps the trace events not yet waited for by the completion thread,
//   across submissions, and makes the stream wait for the last one whose
//   ranges overlap what the command writes. After the submission's last
//   command it records an event on the stream, then hands the submission to
//   the completion thread. It never calls a completion and never drops a
//   reference.
// - The completion thread takes issued submissions in the same FIFO order
//   and waits for each event in program order with cuEventSynchronize (a
//   stream host function would not be allowed to call CUDA). After the
//   event of a trace it calls the trace callback with the staged copies or
//   summaries (every command before the trace has run then: the trace stream
//   waited for them) and drops the trace from the pending ones; reads are
//   copied from staging to their host targets after the next event. Then it
//   signals or fails the submission's semaphores, drops what the submission
//   retained, and runs its completion (device.h). Every completion, trace
//   callback and semaphore signal runs on this thread, in submission order.
// A trace callback that fails its submission cannot stop the commands after
// the trace: CUDA has usually run them already (they were enqueued ahead).
// The submission still completes with the callback's status, and the host
// side effects of later commands (reads, later traces) do not happen.
//
// Failures. A kernel fault or another error that leaves the context unusable
// (hrt_cuda_result_loses_device) marks the device lost: the submission that saw
// it and every pending one complete with DEVICE_LOST naming the first cause,
// and later submissions, allocations and executable loads fail with DEVICE_LOST
// at once. Nothing aborts; objects are still released normally. Out of memory
// is RESOURCE_EXHAUSTED and leaves the device usable, and so does any other
// failed call (the submission fails with that status).
//
// Lifetime: as for the CPU devices, each pending submission retains the
// device. Destroy (the last reference dropped, on any thread but the issue
// thread) only tells the completion thread, so that the dropping thread
// never waits for the GPU: cuMemFree, cuMemFreeHost and cuModuleUnload wait
// for the whole context, which other devices of the GPU may keep busy. The
// completion thread finishes the uploads, unloads and releases left, joins
// the issue thread, frees everything and the device, and exits (detached).
// Until then it holds the primary context; the process waits for such
// devices at exit, and creating a device that finds the shared context
// lost waits for them and tries once more on a fresh context.
#ifndef HRT_HAL_CUDA_CUDA_DEVICE_INTERNAL_H_
#define HRT_HAL_CUDA_CUDA_DEVICE_INTERNAL_H_

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/threads.h"
#include "hal/cuda/cuda_allocator.h"
#include "hal/cuda/cuda_device.h"
#include "hal/cuda/cuda_staging.h"
#include "hal/pending_submission.h"

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

static inline hrt_cuda_device_t* hrt_cuda_device_cast(hrt_hal_device_t* base) {
  return (hrt_cuda_device_t*)base;
}

static inline hrt_cu_deviceptr_t hrt_cuda_address(
    const hrt_hal_buffer_ref_t* ref) {
  return ((const hrt_cuda_buffer_t*)ref->buffer)->block->pointer + ref->offset;
}

//===----------------------------------------------------------------------===//
// cuda_device.c: lost state, context scopes, teardown (any thread that holds
// the device)
//===----------------------------------------------------------------------===//

// A copy of the lost status, or HRT_OK while the device works.
hrt_status_t hrt_cuda_lost_status(hrt_cuda_device_t* device);

// Returns `status` unchanged unless it is DEVICE_LOST: then the device is
// marked lost (the first cause wins) and a copy of the lost status, which
// names that cause, replaces it. Consumes `status`. Only for statuses of
// this device's own CUDA calls: a DEVICE_LOST that arrives through a
// semaphore or a trace callback says nothing about this device.
hrt_status_t hrt_cuda_check_lost(hrt_cuda_device_t* device,
                                 hrt_status_t status);

// Makes the device's context current on a caller's thread until
// hrt_cuda_leave; the caller's own current context is restored then.
hrt_status_t hrt_cuda_enter(hrt_cuda_device_t* device);

// Ends hrt_cuda_enter's scope.
void hrt_cuda_leave(hrt_cuda_device_t* device);

// Destroys the streams and the fork event, frees the summary kernels and
// scratch, and releases the primary context (hrt_cuda_open and
// hrt_cuda_summary_prepare made them). Nothing is queued on the streams any
// more.
void hrt_cuda_close(hrt_cuda_device_t* device);

//===----------------------------------------------------------------------===//
// cuda_issue.c: the issue thread
//===----------------------------------------------------------------------===//

// `size` rounded up to HRT_CUDA_STAGING_ALIGNMENT.
uint64_t hrt_cuda_align(uint64_t size);

// Where command data at `offset` is staged (NULL when nothing is staged).
char* hrt_cuda_staged(const hrt_cuda_submission_t* sub, uint64_t offset);

// The completion thread has waited for the trace checkpoint `checkpoint`:
// no later writer needs to wait for it, and its event may go.
void hrt_cuda_forget_trace(hrt_cuda_device_t* device,
                           const hrt_cuda_checkpoint_t* checkpoint);

// The issue thread (`arg`: the device): enqueues each submission handed
// over, in order, then hands it to the completion thread.
void* hrt_cuda_issue_main(void* arg);

//===----------------------------------------------------------------------===//
// cuda_completion.c: the completion thread and devices being finished
//===----------------------------------------------------------------------===//

// How many destroyed devices were freed, counting those being finished as
// if they were (after waiting until they are).
uint64_t hrt_cuda_finishing_wait(void);

// How many destroyed devices were freed, waiting for none.
uint64_t hrt_cuda_finishing_freed(void);

// Sets up the list of devices being finished (once; any thread, before a
// device is made).
void hrt_cuda_finishing_setup(void);

// Destroy: a device is being finished.
void hrt_cuda_finishing_begin(void);

// The completion thread (`arg`: the device): waits for uploads and
// submissions in order and completes them; at shutdown it frees the device.
void* hrt_cuda_completion_main(void* arg);

#endif  // HRT_HAL_CUDA_CUDA_DEVICE_INTERNAL_H_
