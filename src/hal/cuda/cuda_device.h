// The CUDA device: one GPU through the CUDA Driver API, behind the device
// vtable (device.h). What a caller must know:
// - No call that can wait for the GPU runs on the calling thread (the JS
//   thread): allocate, buffer release, executables and submit return
//   without waiting; a buffer's memory goes back when its last reference
//   drops, on any thread, after every use already enqueued.
// - Completions, trace callbacks and semaphore signals run on the device's
//   completion thread, in submission order. A trace callback that fails its
//   submission cannot stop the commands after the trace (CUDA has usually
//   run them); their host side effects (reads, later traces) do not happen.
// - A kernel fault or an error that leaves the context unusable marks the
//   device lost: pending and later work fails with DEVICE_LOST naming the
//   first cause; nothing aborts. Out of memory is RESOURCE_EXHAUSTED and
//   leaves the device usable.
// - Each pending submission retains the device. The last reference may drop
//   on any thread but the issue thread; it never waits for the GPU (the
//   completion thread frees the device later; the process waits for such
//   devices at exit).
// How it works (streams, threads, which CUDA call runs where):
// cuda_device_internal.h.
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
