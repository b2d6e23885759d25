// fakecuda: a test double of libcuda for halrt's CUDA device.
//
// Built as a shared library (make -C test/c fakecuda -> build/ctest/
// libfakecuda.so) and loaded instead of libcuda with
// HALRT_CUDA_LIBRARY=<path>. It implements exactly the entry points in
// src/hal/cuda/cuda_api.h, on host memory:
// - Device pointers are host addresses of allocations the fake tracks;
//   every copy, memset and kernel argument is checked against them.
//   FAKECUDA_DEVICE_COUNT (default 1) sets the number of devices; each has
//   1 GiB, compute capability 9.0 and 4 multiprocessors.
// - Each stream has its own thread that runs its work in order, off the
//   caller's thread; events are recorded in streams and cuEventSynchronize
//   waits for them; cuStreamWaitEvent makes a stream wait for an event's
//   last record (on any stream) before it runs what follows. Async copies to
//   the host must target pinned memory (cuMemAllocHost), which is stricter than
//   CUDA and proves halrt stages; host-to-device copies from pageable memory
//   are snapshotted at the call, as the driver does, after waiting for the
//   stream to drain (unless streams, or one stream, are held), as the
//   driver may: halrt must stage uploads.
// - What waits for the GPU on a real driver waits here: cuMemFree,
//   cuMemFreeHost and cuModuleUnload wait for every stream's queued work,
//   cuStreamSynchronize and cuEventSynchronize for theirs (the frees and
//   the unload do not wait while streams, or one stream, are held, when
//   waiting might never end).
// - Stream-ordered memory: each device has a default memory pool
//   (cuDeviceGetDefaultMemPool). cuMemAllocAsync reuses memory the pool
//   holds unused (the smallest block that fits) or reserves more;
//   cuMemFreeAsync makes the memory unusable for work enqueued after it
//   (copies and memsets fail, kernels fault with an illegal address) and
//   returns it to the pool when the free runs in the stream, on a lost
//   context too (after the operation the stream was running). At every
//   stream or event synchronisation a pool holding more than its release
//   threshold (CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, default 0) gives the
//   unused memory back; cuMemPoolTrimTo does so at once; neither waits.
//   FAKECUDA_NO_MEMORY_POOLS=1 (read at each call) makes every device
//   report CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED = 0 and the pool
//   calls return CUDA_ERROR_NOT_SUPPORTED, as a driver without pools.
// - Module images are told apart by their first bytes, as the driver does.
//   A cubin (ELF) and a fatbin (magic 0xBA55ED50) are read by their
//   headers: the fatbin's uncompressed sm_90 cubin is loaded (no PTX is
//   JIT-compiled from a fatbin: without one, CUDA_ERROR_NO_BINARY_FOR_GPU);
//   each global or weak (template instance) function symbol of the
//   cubin becomes a function, with the parameter sizes of its .nv.info
//   attributes; a corrupt header, or sizes
//   that cut the image short, is CUDA_ERROR_INVALID_IMAGE. Anything else is
//   PTX text. The JIT rejects text that does not
//   start with a `.version` directive and lines using an instruction named
//   `bogus...`, writing a ptxas-style message to CU_JIT_ERROR_LOG_BUFFER.
//   Each `.entry NAME(...)` becomes a function whose parameter sizes come
//   from its `.param` types (`.b8 s[12]`: 12 bytes). cuLaunchKernel copies
//   each parameter's bytes by its size (at most 4 KiB in all, else
//   CUDA_ERROR_INVALID_VALUE). Launching runs, by the kernel's name, either
//   the host build of our own CUDA C (every kernel of
//   src/hal/cuda/kernels/builtin.cu: the built-ins and the device's summary
//   kernels hrt_summary_partial and hrt_summary_final) on the CUDA model of
//   test/support/cuda_model, with the launch's grid, block and parameter
//   bytes (their sizes as the PTX declares them must be the C++'s, and each
//   pointer must point into a live allocation), or a C stand-in for the
//   test kernels of test/gpu/kernels.cu (vector_add_f32, write_index_u32,
//   scale_offset_f64, which reads its int64 and double parameters as 8
//   bytes at their offsets, fault_illegal_address), also write_index_u32
//   as the C++ template instance write_index_u32<unsigned int>
//   (_Z15write_index_u32IjEvPT_j, compiled by NVRTC in
//   test/nvrtc.test.js), and sleep_ms(buffer, u32 ms), which keeps its
//   stream busy for `ms` milliseconds (the PTX in test/cuda-memory.test.js
//   spins on %globaltimer for as long on a GPU). Any other name fails
//   cuModuleGetFunction with CUDA_ERROR_NOT_FOUND. The bytes of device memory
//   past an allocation's requested size (its rounding to 256, and 256 more)
//   are guard bytes, poisoned under AddressSanitizer (a kernel's read past
//   a buffer's end is a report) and checked after each model launch (a
//   write there is CUDA_ERROR_ILLEGAL_ADDRESS); a barrier some threads of a
//   block skip is CUDA_ERROR_LAUNCH_FAILED. Both are described on stderr.
// - A kernel that touches memory outside its bindings, or
//   fault_illegal_address, fails with CUDA_ERROR_ILLEGAL_ADDRESS: the
//   context is lost, queued work is dropped, and every later call on it
//   returns that error, as on a GPU. A new primary context (after the last
//   release) starts healthy.
// - The driver's rules halrt could break are enforced (docs/cuda.md lists
//   them): a current context for every call that works in one
//   (CUDA_ERROR_INVALID_CONTEXT), sticky errors, no elapsed time from a
//   CU_EVENT_DISABLE_TIMING event (CUDA_ERROR_INVALID_HANDLE), and
//   cuLaunchKernel's grid and block limits (CUDA_ERROR_INVALID_VALUE).
//
// The control functions below are exported for tests (dlsym them from the
// same path); they may be called from any thread.
#ifndef HRT_TEST_FAKECUDA_H_
#define HRT_TEST_FAKECUDA_H_

// While `hold` is non-zero no stream runs anything: work queues up, so a
// test can submit several things before the first one runs.
void fakecuda_hold_streams(int hold);
// The number of operations queued in all streams and not yet run.
int fakecuda_queued_operations(void);
// Streams are numbered 1, 2, ... in the order they are created (across
// contexts); this is the number of the last one (0: none yet). A halrt
// CUDA device creates its main stream, then its trace stream.
int fakecuda_streams_created(void);
// While `hold` is non-zero stream `serial` runs nothing (work queues up);
// other streams run, and wait for its events as cuStreamWaitEvent says.
void fakecuda_hold_stream(int serial, int hold);
typedef struct fakecuda_stream_state_s {
  int exists;      // stream `serial` is live
  int enqueued;    // operations ever enqueued on it
  int unfinished;  // operations queued on it or running
  int waiting;     // its next operation waits for an event not yet reached
} fakecuda_stream_state_t;
void fakecuda_stream_state(int serial, fakecuda_stream_state_t* out);
// The next cuLaunchKernel returns `result` without running anything; a
// sticky result (the errors cuda.h calls unrecoverable: 226, 700, 702, 710,
// 714-719, 721, 810, 911, and 709) also loses the context.
void fakecuda_fail_next_launch(int result);
// Destroys every live context under the running work, as a driver reset
// would: queued work is dropped and every call on the contexts returns
// CUDA_ERROR_CONTEXT_IS_DESTROYED.
void fakecuda_destroy_contexts(void);

// Device memory as the fake sees it, and counts of calls since the library
// was loaded.
typedef struct fakecuda_memory_s {
  long long allocations;          // live device allocations (any kind)
  long long allocated_bytes;      // their requested bytes
  long long pool_reserved_bytes;  // device 0's pool: handed out or kept
  unsigned long long release_threshold;  // of device 0's pool
  long long mem_alloc_calls;      // successful cuMemAlloc_v2
  long long mem_free_calls;       // successful cuMemFree_v2
  long long alloc_async_calls;    // successful cuMemAllocAsync
  long long free_async_calls;     // successful cuMemFreeAsync
  long long trims;                // cuMemPoolTrimTo
} fakecuda_memory_t;
void fakecuda_memory(fakecuda_memory_t* out);

typedef void (*fakecuda_hold_streams_fn)(int hold);
typedef int (*fakecuda_queued_operations_fn)(void);
typedef int (*fakecuda_streams_created_fn)(void);
typedef void (*fakecuda_hold_stream_fn)(int serial, int hold);
typedef void (*fakecuda_stream_state_fn)(int serial,
                                         fakecuda_stream_state_t* out);
typedef void (*fakecuda_fail_next_launch_fn)(int result);
typedef void (*fakecuda_destroy_contexts_fn)(void);
typedef void (*fakecuda_memory_fn)(fakecuda_memory_t* out);

#endif  // HRT_TEST_FAKECUDA_H_
