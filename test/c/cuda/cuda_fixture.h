// What test_cuda's sections (test/c/cuda/*.c, one per part of docs/cuda.md,
// listed by test_cuda.c) share: the driver library and the fake's controls,
// the test kernels, and objects that the harness releases when the case
// ends (TEST_DEFER, test.h), so that a case checks with everything alive and
// leaves nothing behind when a check fails.
//
// The CUDA device runs against the fake driver library
// (test/support/fakecuda, the default: HRT_TEST_FAKECUDA or libfakecuda.so
// beside this binary) or, with HRT_TEST_REAL_CUDA=1, against the real
// libcuda on a GPU (test/gpu/run.sh). Cases that need the fake's fault
// injection say "skipped" on a GPU; everything else runs on both, with the
// test kernels of test/gpu/kernels.cu as committed PTX.
#ifndef HRT_TEST_CUDA_CUDA_FIXTURE_H_
#define HRT_TEST_CUDA_CUDA_FIXTURE_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../../support/fakecuda/fakecuda.h"
#include "hal/cuda/cuda_api.h"
#include "hal/cuda/cuda_symbols.h"
#include "hal/device.h"
#include "test.h"
#include "test_submit.h"

//===----------------------------------------------------------------------===//
// Setup: which driver library, and the fake's controls
//===----------------------------------------------------------------------===//

typedef struct {
  bool ready;
  bool fake;
  char root[1100];  // the repository
  fakecuda_hold_streams_fn hold_streams;
  fakecuda_queued_operations_fn queued_operations;
  fakecuda_fail_next_launch_fn fail_next_launch;
  fakecuda_destroy_contexts_fn destroy_contexts;
  fakecuda_memory_fn memory;
  fakecuda_streams_created_fn streams_created;
  fakecuda_hold_stream_fn hold_stream;
  fakecuda_stream_state_fn stream_state;
} cuda_test_setup_t;

extern cuda_test_setup_t g_cuda;

// The fake's own entry points, for the cases that check a rule of the
// driver by making a call halrt never makes (resolved by cuda_setup).
typedef struct {
#define FAKE_ENTRY(name, params) hrt_cu_result_t(*name) params;
#define FAKE_ENTRY_EITHER(field, newer, older, params) FAKE_ENTRY(field, params)
  HRT_CUDA_SYMBOLS(FAKE_ENTRY, FAKE_ENTRY, FAKE_ENTRY_EITHER)
#undef FAKE_ENTRY_EITHER
#undef FAKE_ENTRY
} cuda_fake_entries_t;

extern cuda_fake_entries_t g_cu;

// Chooses the library before anything loads it (loading happens once per
// process). Called first by every case; the first call decides.
bool cuda_setup(void);

#define CUDA_SETUP() CHECK(cuda_setup())

// Skips a case that needs the fake's fault injection.
#define FAKE_ONLY()                                          \
  do {                                                       \
    CUDA_SETUP();                                            \
    if (!g_cuda.fake) {                                      \
      printf("  (skipped on a real GPU: needs fakecuda)\n"); \
      return;                                                \
    }                                                        \
  } while (0)

// Reads `path` (relative to the repository) into a NUL-terminated buffer.
char* read_file(const char* path, size_t* out_length);

//===----------------------------------------------------------------------===//
// The test kernels, buffers
//===----------------------------------------------------------------------===//

// The parameters of the test kernels, declared: vector_add_f32,
// write_index_u32, scale_offset_f64, fault_illegal_address.
// scale_offset_f64's int64 and double scalars do not follow the inferred
// rule, so the PTX of test/gpu/kernels.cu loads only with declarations.
enum { TEST_KERNEL_DECL_COUNT = 4 };
extern const hrt_hal_entry_decl_t kTestKernelDecls[TEST_KERNEL_DECL_COUNT];

// The test kernels (test/gpu/kernels.ptx) as an executable, declared;
// released when the case ends.
hrt_status_t load_test_kernels(hrt_hal_device_t* device,
                               hrt_hal_executable_t** out);

hrt_hal_buffer_ref_t range(hrt_hal_buffer_t* buffer, uint64_t offset,
                           uint64_t length);

// write_index_u32 over a 16-element buffer on a CUDA device: the dispatch
// (whose sizes a case may change) and the command buffer that records it.
typedef struct {
  hrt_hal_device_t* device;
  hrt_hal_executable_t* executable;
  hrt_hal_buffer_t* buffer;
  hrt_hal_buffer_ref_t binding;
  uint32_t n;
  hrt_hal_dispatch_t dispatch;
  hrt_hal_command_buffer_t* cb;
} write_index_t;

// Makes `*out` and everything in it; all released when the case ends.
hrt_status_t write_index_open(write_index_t** out);

// Records the dispatch alone in a new command buffer (replacing the last).
hrt_status_t write_index_record(write_index_t* w);

// Runs the recorded command buffer and checks that it wrote 0..15.
hrt_status_t write_index_run(write_index_t* w);

//===----------------------------------------------------------------------===//
// The fake: held streams, waits, memory
//===----------------------------------------------------------------------===//

// While held, no stream of the fake runs anything (work queues up); the
// hold ends with release_streams() or, at the latest, when the case ends.
void hold_streams(void);
void release_streams(void);

// The same for the one stream `serial` (fakecuda.h).
void hold_stream(int serial);
void release_stream(int serial);

// Waits (10 s at most) until the fake's streams hold `count` operations
// (the issue thread has enqueued everything submitted so far).
void wait_for_queued(int count);

// Waits (10 s at most) until no device is live: the completion thread of
// an earlier one may still be finishing it.
void wait_for_no_devices(void);

// The fake's memory counts (fakecuda.h).
fakecuda_memory_t fake_memory(void);

// Waits up to 5 s for the fake to hold `count` live device allocations;
// returns how many it holds.
long long wait_for_allocations(long long count);

// A CUDA device as a driver with (`pools`) or without memory pools
// (FAKECUDA_NO_MEMORY_POOLS) makes it; released when the case ends.
hrt_status_t make_device_with_pools(bool pools, hrt_hal_device_t** out);

#endif  // HRT_TEST_CUDA_CUDA_FIXTURE_H_
