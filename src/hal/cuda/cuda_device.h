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
// stream-ordered free (or a reuse of the block) comes after them.
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
//   and launches, cuEventCreate/Record, cuMemAllocHost on a staging miss,
//   cuStreamSynchronize only when a final event cannot be recorded.
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
//   stream's queued frees), cuStreamDestroy, cuMemFreeHost of cached
//   staging and the primary context release.
//
// Threads. Each device has one stream and two threads of its own; both keep
// the device's primary context current.
// - The issue thread takes accepted submissions in FIFO order, waits for
//   their wait semaphores, and enqueues their commands into the stream:
//   fills as memsets (8/16/32-bit, or 2-D 32-bit/8-bit memsets for patterns
//   the plain ones cannot express, see cuda_device.c), copies, updates from
//   staging, reads and traced ranges into staging, and dispatches with
//   cuLaunchKernel. After each trace command and after the submission's last
//   command it records an event, then hands the submission to the completion
//   thread. It never calls a completion and never drops a reference.
// - The completion thread takes issued submissions in the same FIFO order
//   and waits for each event with cuEventSynchronize (a stream host function
//   would not be allowed to call CUDA). After the event of a trace it calls
//   the trace callback with the staged copies; reads are copied from staging
//   to their host targets after the event that follows them. Then it signals
//   or fails the submission's semaphores, drops what the submission
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
