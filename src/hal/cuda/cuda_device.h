// The CUDA device: one GPU through the CUDA Driver API.
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
// thread). CUDA calls by thread:
// - callers (allocate, buffer release, executables): cuMemAllocAsync and
//   cuMemFreeAsync, or cuMemAlloc on a cache miss; cuMemsetD8Async;
//   cuMemAllocHost on a staging miss, cuEventCreate, cuMemcpyHtoDAsync from
//   pinned memory and cuEventRecord for uploads; context push/pop; module
//   loading (cuModuleLoadDataEx, cuda_executable.h; no GPU wait, but it
//   may JIT-compile PTX).
// - issue thread: the commands' async memsets, copies (pinned host side)
//   and launches, cuEventCreate/Record, cuStreamWaitEvent, cuMemAllocHost
//   on a staging miss, cuStreamSynchronize only when a final event (of the
//   stream) or a trace's event (of the trace stream) cannot be recorded.
// - completion thread: cuEventSynchronize, cuEventElapsedTime,
//   cuEventDestroy, cuMemFreeHost beyond the staging cache's bounds, and
//   the allocator's release, trim and deinitialisation (cuMemFree,
//   cuMemPoolTrimTo), trimming once the device has been idle for 500 ms
//   after its last upload, submission or free and its stream has run
//   everything (cuStreamQuery, asked every 20 ms until it has, so that
//   stream-ordered frees are in the pool); cuModuleUnload of released
//   executables (hrt_cuda_device_unload_module), since unloading may wait
//   for the GPU; and once the device is destroyed (no submission is pending
//   then), cuStreamSynchronize (so that the last trim comes after the
//   stream's queued frees), cuEventDestroy of the trace fork event,
//   cuStreamDestroy of both streams, cuMemFree of the summary scratch,
//   cuModuleUnload of the summary kernels, cuMemFreeHost of cached staging
//   and the primary context release.
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
#ifndef HRT_HAL_CUDA_CUDA_DEVICE_H_
#define HRT_HAL_CUDA_CUDA_DEVICE_H_

#include "hal/cuda/cuda_symbols.h"
#include "hal/device.h"

// Creates the device for CUDA ordinal `ordinal` (< symbols->device_count):
// retains its primary context and creates the stream and threads. When
// that fails with DEVICE_LOST while destroyed devices hold (or held) the
// context, waits until they are freed and tries once more.
hrt_status_t hrt_cuda_device_create(const hrt_cuda_symbols_t* symbols,
                                    uint32_t ordinal,
                                    hrt_hal_device_t** out_device) HRT_MUST_USE;

// Any thread (a released executable): hands `module`, loaded in `device`'s
// context, to the device's completion thread, which unloads it before the
// device goes. The caller still holds its reference to `device` and no
// longer uses `module`. Out of memory: unloads it on the calling thread.
void hrt_cuda_device_unload_module(hrt_hal_device_t* device,
                                   hrt_cu_module_t module);

#endif  // HRT_HAL_CUDA_CUDA_DEVICE_H_
