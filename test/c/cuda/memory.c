// docs/cuda.md, "Memory and commands" (device memory, cuda_allocator.h),
// on the fake: its counts show which calls were made, and on which side of
// the work; the pool and the caching allocator, idle trims, and memory of
// lost devices.
#include <stdbool.h>
#include <stdlib.h>

#include "base/live.h"
#include "cuda_fixture.h"
#include "hal/cuda/cuda_allocator.h"

// A context made current on this thread, a stream in it and an allocator
// on that stream, for the cases that drive an allocator directly.
typedef struct {
  const hrt_cuda_symbols_t* cu;
  hrt_cu_device_t device;
  hrt_cu_context_t context;
  hrt_cu_stream_t stream;
  hrt_cuda_allocator_t allocator;
} raw_allocator_t;

static hrt_status_t raw_open_stream(raw_allocator_t* raw) {
  HRT_RETURN_IF_ERROR(hrt_cuda_symbols_load(&raw->cu));
  const hrt_cuda_symbols_t* cu = raw->cu;
  HRT_RETURN_IF_ERROR(HRT_CUDA_CALL(cu, cuDeviceGet, (&raw->device, 0)));
  HRT_RETURN_IF_ERROR(HRT_CUDA_CALL(cu, cuDevicePrimaryCtxRetain,
                                    (&raw->context, raw->device)));
  HRT_RETURN_IF_ERROR(HRT_CUDA_CALL(cu, cuCtxPushCurrent_v2, (raw->context)));
  return HRT_CUDA_CALL(cu, cuStreamCreate,
                       (&raw->stream, HRT_CU_STREAM_NON_BLOCKING));
}

static void raw_close(void* arg) {
  raw_allocator_t* raw = arg;
  hrt_cuda_allocator_deinitialize(&raw->allocator);
  hrt_cu_context_t popped = NULL;
  (void)raw->cu->cuStreamDestroy_v2(raw->stream);
  (void)raw->cu->cuCtxPopCurrent_v2(&popped);
  (void)raw->cu->cuDevicePrimaryCtxRelease_v2(raw->device);
  free(raw);
}

// Makes `*out` with the allocator a driver with (`pools`) or without memory
// pools would have (FAKECUDA_NO_MEMORY_POOLS); closed when the case ends.
static hrt_status_t raw_open(bool pools, raw_allocator_t** out) {
  raw_allocator_t* raw = calloc(1, sizeof(*raw));
  if (!raw) return hrt_status_make(HRT_STATUS_RESOURCE_EXHAUSTED, "raw_open");
  hrt_status_t status = raw_open_stream(raw);
  if (status != HRT_OK) {
    free(raw);
    return status;
  }
  if (!pools) setenv("FAKECUDA_NO_MEMORY_POOLS", "1", 1);
  hrt_cuda_allocator_initialize(raw->cu, raw->device, raw->stream,
                                &raw->allocator);
  unsetenv("FAKECUDA_NO_MEMORY_POOLS");
  TEST_DEFER(raw_close, raw);
  *out = raw;
  return HRT_OK;
}

// Without pools: freed blocks are kept for requests they fit (at least the
// request rounded to the granule, at most twice it), within the count and
// byte bounds; the rest waits for release_pending; trim frees the cache;
// nothing but those two calls cuMemFree.
static void allocator_cache_reuses_blocks_within_its_bounds(void) {
  FAKE_ONLY();
  wait_for_no_devices();  // a device of an earlier case trims the fake's pool as it ends
  raw_allocator_t* raw = NULL;
  CHECK_OK(raw_open(false, &raw));
  hrt_cuda_allocator_t* allocator = &raw->allocator;
  CHECK(!hrt_cuda_allocator_uses_pool(allocator));
  const fakecuda_memory_t before = fake_memory();
  hrt_cuda_block_t* block = NULL;
  CHECK_OK(hrt_cuda_allocator_allocate(allocator, 3000, &block));
  CHECK_EQ_INT(block->size, 3072);
  const hrt_cu_deviceptr_t first = block->pointer;
  CHECK(!hrt_cuda_allocator_free(allocator, block));
  CHECK_OK(hrt_cuda_allocator_allocate(allocator, 2000, &block));
  CHECK(block->pointer == first);  // 3072 serves 2048: the same block
  CHECK(!hrt_cuda_allocator_free(allocator, block));
  CHECK_OK(hrt_cuda_allocator_allocate(allocator, 1000, &block));
  CHECK(block->pointer != first);  // 3072 is more than twice 1024
  CHECK_EQ_INT(block->size, 1024);
  const hrt_cu_deviceptr_t small = block->pointer;
  CHECK(!hrt_cuda_allocator_free(allocator, block));
  CHECK_OK(hrt_cuda_allocator_allocate(allocator, 0, &block));
  CHECK(block->pointer == small);  // zero bytes: one granule, in 1024
  CHECK(!hrt_cuda_allocator_free(allocator, block));
  fakecuda_memory_t now = fake_memory();
  CHECK_EQ_INT(now.mem_alloc_calls - before.mem_alloc_calls, 2);
  CHECK_EQ_INT(now.mem_free_calls, before.mem_free_calls);
  hrt_cuda_allocator_trim(allocator);
  CHECK_EQ_INT(fake_memory().mem_free_calls - before.mem_free_calls, 2);
  CHECK_EQ_INT(fake_memory().allocations, before.allocations);

  // The count bound: the block after HRT_CUDA_ALLOCATOR_MAX_CACHED waits.
  hrt_cuda_block_t* blocks[HRT_CUDA_ALLOCATOR_MAX_CACHED + 1];
  for (int i = 0; i <= HRT_CUDA_ALLOCATOR_MAX_CACHED; ++i) {
    CHECK_OK(hrt_cuda_allocator_allocate(allocator, 512, &blocks[i]));
  }
  for (int i = 0; i < HRT_CUDA_ALLOCATOR_MAX_CACHED; ++i) {
    CHECK(!hrt_cuda_allocator_free(allocator, blocks[i]));
  }
  CHECK(hrt_cuda_allocator_free(allocator,
                                blocks[HRT_CUDA_ALLOCATOR_MAX_CACHED]));
  now = fake_memory();
  CHECK_EQ_INT(now.mem_free_calls - before.mem_free_calls, 2);
  hrt_cuda_allocator_release_pending(allocator);
  CHECK_EQ_INT(fake_memory().mem_free_calls - now.mem_free_calls, 1);
  hrt_cuda_allocator_trim(allocator);
  CHECK_EQ_INT(fake_memory().mem_free_calls - now.mem_free_calls,
               1 + HRT_CUDA_ALLOCATOR_MAX_CACHED);

  // The byte bound.
  hrt_cuda_block_t* big = NULL;
  hrt_cuda_block_t* more = NULL;
  CHECK_OK(hrt_cuda_allocator_allocate(allocator, 200 << 20, &big));
  CHECK_OK(hrt_cuda_allocator_allocate(allocator, 100 << 20, &more));
  CHECK(!hrt_cuda_allocator_free(allocator, big));
  CHECK(hrt_cuda_allocator_free(allocator, more));  // 300 MiB > 256 MiB
  hrt_cuda_allocator_release_pending(allocator);

  // Out of memory: the cache is handed to release_pending, so that a
  // retry can have the memory.
  CHECK_STATUS(hrt_cuda_allocator_allocate(allocator, (size_t)2 << 30, &big),
               HRT_STATUS_RESOURCE_EXHAUSTED, "CUDA_ERROR_OUT_OF_MEMORY");
  now = fake_memory();
  CHECK_EQ_INT(now.allocations, before.allocations + 1);  // the 200 MiB
  hrt_cuda_allocator_release_pending(allocator);
  CHECK_EQ_INT(fake_memory().allocations, before.allocations);
}

// With pools: blocks come from the default pool with cuMemAllocAsync and go
// back with cuMemFreeAsync; the release threshold keeps freed memory in the
// pool across synchronisations (for reuse) until trim.
static void allocator_pool_keeps_freed_memory_until_trimmed(void) {
  FAKE_ONLY();
  wait_for_no_devices();  // a device of an earlier case trims the fake's pool as it ends
  raw_allocator_t* raw = NULL;
  CHECK_OK(raw_open(true, &raw));
  hrt_cuda_allocator_t* allocator = &raw->allocator;
  CHECK(hrt_cuda_allocator_uses_pool(allocator));
  const fakecuda_memory_t before = fake_memory();
  CHECK(before.release_threshold == UINT64_MAX);
  hrt_cuda_block_t* block = NULL;
  CHECK_OK(hrt_cuda_allocator_allocate(allocator, 1 << 20, &block));
  const hrt_cu_deviceptr_t first = block->pointer;
  CHECK(!hrt_cuda_allocator_free(allocator, block));
  CHECK_OK(HRT_CUDA_CALL(raw->cu, cuStreamSynchronize, (raw->stream)));
  fakecuda_memory_t now = fake_memory();
  CHECK_EQ_INT(now.alloc_async_calls - before.alloc_async_calls, 1);
  CHECK_EQ_INT(now.free_async_calls - before.free_async_calls, 1);
  CHECK_EQ_INT(now.allocations, before.allocations);
  CHECK_EQ_INT(now.pool_reserved_bytes - before.pool_reserved_bytes, 1 << 20);
  CHECK_OK(hrt_cuda_allocator_allocate(allocator, 1 << 20, &block));
  CHECK(block->pointer == first);  // reused from the pool
  CHECK(!hrt_cuda_allocator_free(allocator, block));
  CHECK_OK(HRT_CUDA_CALL(raw->cu, cuStreamSynchronize, (raw->stream)));
  CHECK_EQ_INT(fake_memory().pool_reserved_bytes - before.pool_reserved_bytes,
               1 << 20);
  CHECK_EQ_INT(fake_memory().mem_alloc_calls, before.mem_alloc_calls);
  hrt_cuda_allocator_trim(allocator);
  now = fake_memory();
  CHECK_EQ_INT(now.trims - before.trims, 1);
  CHECK_EQ_INT(now.pool_reserved_bytes, before.pool_reserved_bytes);
  CHECK_EQ_INT(now.mem_free_calls, before.mem_free_calls);
}

// A buffer released while work that uses it is queued (its zero fill, a
// submission): the caller's thread makes no cuMemFree, the work still runs
// on valid memory, and the memory goes back only after it (the pool's free
// runs in the stream; the cache keeps the block until the device's thread
// frees it).
static void memory_is_freed_after_its_last_use(void) {
  FAKE_ONLY();
  for (int pools = 1; pools >= 0; --pools) {
    printf("  %s\n", pools ? "pool" : "cache");
    wait_for_no_devices();
    hrt_hal_device_t* device = NULL;
    CHECK_OK(make_device_with_pools(pools, &device));
    const fakecuda_memory_t before = fake_memory();
    hold_streams();
    // Freed with its zero fill still queued.
    hrt_hal_buffer_t* dropped = NULL;
    CHECK_OK(hrt_hal_device_allocate_buffer(device, 4096, NULL, &dropped));
    hrt_hal_buffer_release(dropped);
    // Freed while a submission that fills and reads it is queued.
    hrt_hal_buffer_t* buffer = NULL;
    CHECK_OK(hrt_hal_device_allocate_buffer(device, 256, NULL, &buffer));
    hrt_hal_command_buffer_t* cb = NULL;
    CHECK_OK(hrt_hal_command_buffer_create(device, &cb));
    uint32_t out[64];
    memset(out, 0, sizeof(out));
    CHECK_OK(hrt_hal_command_buffer_fill(cb, whole(buffer), 0xabcd1234u, 4));
    CHECK_OK(hrt_hal_command_buffer_read(cb, whole(buffer), out));
    hrt_hal_command_buffer_finalize(cb);
    completion_t completion;
    CHECK_OK(submit(device, cb, NULL, 0, &completion));
    wait_for_queued(3 + 2 + 1);  // 2 memsets, fill, read, event (+ free)
    hrt_hal_buffer_release(buffer);
    hrt_hal_command_buffer_release(cb);
    fakecuda_memory_t now = fake_memory();
    release_streams();
    CHECK_OK(completion_wait(&completion));
    CHECK_EQ_INT(now.mem_free_calls, before.mem_free_calls);
    CHECK_EQ_INT(now.allocations, before.allocations + 2);  // still valid
    CHECK_EQ_INT(out[0], 0xabcd1234u);
    CHECK_EQ_INT(out[63], 0xabcd1234u);
    if (pools) {
      // Both stream-ordered frees have run after the work.
      CHECK_EQ_INT(wait_for_allocations(before.allocations),
                   before.allocations);
      CHECK_EQ_INT(fake_memory().free_async_calls - before.free_async_calls, 2);
    } else {
      // Kept for reuse: an allocation of a fitting size gets a block back.
      hrt_hal_buffer_t* again = NULL;
      CHECK_OK(hrt_hal_device_allocate_buffer(device, 4000, NULL, &again));
      CHECK_EQ_INT(fake_memory().allocations, before.allocations + 2);
      CHECK_EQ_INT(fake_memory().mem_alloc_calls, before.mem_alloc_calls + 2);
      hrt_hal_buffer_release(again);
    }
    CHECK_EQ_INT(fake_memory().mem_free_calls, before.mem_free_calls);
    test_run_deferred();
    wait_for_no_devices();
    if (!pools) {
      // The device's thread freed the cache as the device went away.
      CHECK_EQ_INT(fake_memory().mem_free_calls - before.mem_free_calls, 2);
    }
    CHECK_EQ_INT(fake_memory().allocations, before.allocations - 0);
  }
}

// Memory freed on an idle device is given back by its completion thread
// HRT_CUDA_IDLE_TRIM_NS (500 ms) later, not at once.
static void idle_devices_give_memory_back(void) {
  FAKE_ONLY();
  for (int pools = 1; pools >= 0; --pools) {
    printf("  %s\n", pools ? "pool" : "cache");
    wait_for_no_devices();
    hrt_hal_device_t* device = NULL;
    CHECK_OK(make_device_with_pools(pools, &device));
    const fakecuda_memory_t before = fake_memory();
    hrt_hal_buffer_t* buffer = NULL;
    CHECK_OK(hrt_hal_device_allocate_buffer(device, 4 << 20, NULL, &buffer));
    // Read before the free: the trim cannot come sooner than 500 ms after
    // this, however late this thread runs again.
    const int64_t freed = hrt_time_now_ns();
    hrt_hal_buffer_release(buffer);
    fakecuda_memory_t now = fake_memory();
    CHECK_EQ_INT(now.trims, before.trims);
    CHECK_EQ_INT(now.mem_free_calls, before.mem_free_calls);
    int64_t deadline = freed + 5000000000LL;
    while (hrt_time_now_ns() < deadline) {
      now = fake_memory();
      if (pools ? now.trims > before.trims &&
                      now.pool_reserved_bytes == before.pool_reserved_bytes
                : now.mem_free_calls > before.mem_free_calls) {
        break;
      }
      struct timespec pause = {0, 2000000};
      nanosleep(&pause, NULL);
    }
    const int64_t waited_ms = (hrt_time_now_ns() - freed) / 1000000;
    printf("    given back after %lld ms\n", (long long)waited_ms);
    CHECK(waited_ms >= 400 && waited_ms < 5000);
    CHECK_EQ_INT(now.allocations, before.allocations);
    if (pools) {
      CHECK_EQ_INT(now.pool_reserved_bytes, before.pool_reserved_bytes);
    } else {
      CHECK_EQ_INT(now.mem_free_calls - before.mem_free_calls, 1);
    }
    test_run_deferred();
  }
}

// The idle time counts from the end of the last work, not from when the
// completion thread took it: a submission that keeps the GPU busy for
// longer than HRT_CUDA_IDLE_TRIM_NS is not followed by a trim as soon as it
// completes (a program that awaits each long invocation before starting
// the next would have its memory given back and reserved again each time).
static void idle_time_counts_from_the_end_of_work(void) {
  FAKE_ONLY();
  wait_for_no_devices();
  hrt_hal_device_t* device = NULL;
  CHECK_OK(make_device_with_pools(true, &device));
  hrt_hal_buffer_t* buffer = NULL;
  CHECK_OK(case_buffer(device, 4096, NULL, &buffer));
  hrt_hal_command_buffer_t* cb = NULL;
  CHECK_OK(case_command_buffer(device, &cb));
  CHECK_OK(hrt_hal_command_buffer_fill(cb, whole(buffer), 7, 4));
  hrt_hal_command_buffer_finalize(cb);
  hold_streams();
  completion_t completion;
  CHECK_OK(submit(device, cb, NULL, 0, &completion));
  // The GPU is busy for 800 ms.
  struct timespec busy = {0, 800000000};
  nanosleep(&busy, NULL);
  const long long trims = fake_memory().trims;
  // The work ends after this (however late the completion reaches this
  // thread), so the trim is at least 500 ms after it.
  const int64_t done = hrt_time_now_ns();
  release_streams();
  CHECK_OK(completion_wait(&completion));
  const int64_t deadline = done + 5000000000LL;
  while (fake_memory().trims == trims && hrt_time_now_ns() < deadline) {
    struct timespec pause = {0, 2000000};
    nanosleep(&pause, NULL);
  }
  const int64_t waited_ms = (hrt_time_now_ns() - done) / 1000000;
  printf("  trimmed %lld ms after the end of the work\n",
         (long long)waited_ms);
  CHECK(waited_ms >= 400 && waited_ms < 5000);
}

// An idle trim waits for the stream to run the frees queued in it: a free
// still queued when the device has been idle for 500 ms (the GPU busy with
// other work, here: streams held) has not given its memory back to the pool,
// and a trim then would leave it reserved until the next trim, which an idle
// device never makes.
static void idle_trim_waits_for_queued_frees(void) {
  FAKE_ONLY();
  wait_for_no_devices();
  hrt_hal_device_t* device = NULL;
  CHECK_OK(make_device_with_pools(true, &device));
  const fakecuda_memory_t before = fake_memory();
  hold_streams();
  hrt_hal_buffer_t* buffer = NULL;
  CHECK_OK(hrt_hal_device_allocate_buffer(device, 4 << 20, NULL, &buffer));
  hrt_hal_buffer_release(buffer);  // its free waits in the stream
  struct timespec held = {0, 800000000};
  nanosleep(&held, NULL);
  const long long trims_while_held = fake_memory().trims;
  release_streams();
  CHECK_EQ_INT(trims_while_held, before.trims);
  const int64_t deadline = hrt_time_now_ns() + 5000000000LL;
  fakecuda_memory_t now = fake_memory();
  while ((now.trims == before.trims ||
          now.pool_reserved_bytes != before.pool_reserved_bytes) &&
         hrt_time_now_ns() < deadline) {
    nanosleep(&(struct timespec){0, 2000000}, NULL);
    now = fake_memory();
  }
  CHECK_EQ_INT(now.free_async_calls - before.free_async_calls, 1);
  CHECK_EQ_INT(now.pool_reserved_bytes, before.pool_reserved_bytes);
  test_run_deferred();
  wait_for_no_devices();
}

// A device destroyed with stream-ordered frees still queued gives their
// memory back too: its last trim of the GPU's pool comes after its stream
// has run them. (Another device keeps the context, and with it the pool,
// alive; its release threshold keeps freed memory until a trim.)
static void destroyed_device_trims_after_its_queued_frees(void) {
  FAKE_ONLY();
  wait_for_no_devices();
  hrt_hal_device_t* keeper = NULL;
  CHECK_OK(make_device_with_pools(true, &keeper));
  hrt_hal_device_t* device = NULL;
  CHECK_OK(make_device("cuda", &device));  // with pools; released below
  const fakecuda_memory_t before = fake_memory();
  hold_streams();
  hrt_hal_buffer_t* buffer = NULL;
  CHECK_OK(hrt_hal_device_allocate_buffer(device, 4 << 20, NULL, &buffer));
  hrt_hal_buffer_release(buffer);  // its free waits in the stream
  hrt_hal_device_release(device);
  struct timespec pause = {0, 100000000};
  nanosleep(&pause, NULL);
  release_streams();
  const int64_t deadline = hrt_time_now_ns() + 5000000000LL;
  while (hrt_live_count(HRT_LIVE_DEVICE) != 1 && hrt_time_now_ns() < deadline) {
    nanosleep(&(struct timespec){0, 1000000}, NULL);
  }
  CHECK_EQ_INT(hrt_live_count(HRT_LIVE_DEVICE), 1);
  const fakecuda_memory_t now = fake_memory();
  CHECK_EQ_INT(now.free_async_calls - before.free_async_calls, 1);
  CHECK_EQ_INT(now.pool_reserved_bytes, before.pool_reserved_bytes);
  test_run_deferred();
  wait_for_no_devices();
}

// On a lost context, buffers (cached, pooled, zero-byte, with data) are
// still released without leaks, and allocating fails with DEVICE_LOST.
static void memory_of_a_lost_device_is_released(void) {
  FAKE_ONLY();
  for (int pools = 1; pools >= 0; --pools) {
    printf("  %s\n", pools ? "pool" : "cache");
    wait_for_no_devices();
    const long long live = fake_memory().allocations;
    hrt_hal_device_t* device = NULL;
    CHECK_OK(make_device_with_pools(pools, &device));
    hrt_hal_buffer_t* kept = NULL;
    hrt_hal_buffer_t* cached = NULL;
    const uint32_t data[4] = {1, 2, 3, 4};
    CHECK_OK(case_buffer(device, sizeof(data), data, &kept));
    CHECK_OK(hrt_hal_device_allocate_buffer(device, 0, NULL, &cached));
    uint32_t out[4] = {0, 0, 0, 0};
    CHECK_OK(read_back(device, kept, out));
    CHECK_EQ_INT(out[3], 4);
    hrt_hal_buffer_release(cached);
    g_cuda.destroy_contexts();
    hrt_hal_buffer_t* more = NULL;
    CHECK_STATUS(hrt_hal_device_allocate_buffer(device, 16, data, &more),
                 HRT_STATUS_DEVICE_LOST, "CUDA_ERROR_CONTEXT_IS_DESTROYED");
    CHECK_STATUS(hrt_hal_device_allocate_buffer(device, 16, NULL, &more),
                 HRT_STATUS_DEVICE_LOST, "is lost");
    test_run_deferred();  // kept, then the device
    wait_for_no_devices();
    CHECK_EQ_INT(wait_for_allocations(live), live);
  }
}

// A device's last release returns at once and its completion thread
// finishes it, holding the primary context until then. A device created
// right after a lost one was released (the way to recover) would get that
// lost context: it waits for the destroyed devices to be freed and tries
// again on a fresh one. (Here the last reference is the test's: a
// submission drops its own just after its completion has run.)
static void device_made_after_a_lost_one_is_healthy(void) {
  FAKE_ONLY();
  wait_for_no_devices();
  for (int round = 0; round < 20; ++round) {
    hrt_hal_device_t* device = NULL;
    CHECK_OK(case_device("cuda", &device));
    hrt_hal_buffer_t* buffer = NULL;
    const uint32_t data[4] = {1, 2, 3, 4};
    CHECK_OK(case_buffer(device, sizeof(data), data, &buffer));
    g_cuda.destroy_contexts();
    hrt_hal_buffer_t* more = NULL;
    CHECK_STATUS(hrt_hal_device_allocate_buffer(device, 16, data, &more),
                 HRT_STATUS_DEVICE_LOST, "CUDA_ERROR_CONTEXT_IS_DESTROYED");
    // The buffer, then the last reference: no submission holds one.
    test_run_deferred();
    CHECK_OK(case_device("cuda", &device));
    CHECK_OK(case_buffer(device, sizeof(data), data, &buffer));
    uint32_t out[4] = {0, 0, 0, 0};
    CHECK_OK(read_back(device, buffer, out));
    CHECK_EQ_INT(out[3], 4);
    test_run_deferred();
  }
  wait_for_no_devices();
}

// Zero-byte buffers get an address of their own, take part in submissions
// (empty fills and reads), with or without initial data, and are freed.
static void zero_byte_buffers_have_an_address(void) {
  FAKE_ONLY();
  for (int pools = 1; pools >= 0; --pools) {
    wait_for_no_devices();
    const long long live = fake_memory().allocations;
    hrt_hal_device_t* device = NULL;
    CHECK_OK(make_device_with_pools(pools, &device));
    hrt_hal_buffer_t* buffers[2] = {NULL, NULL};
    const char data[1] = {7};
    CHECK_OK(case_buffer(device, 0, NULL, &buffers[0]));
    CHECK_OK(case_buffer(device, 0, data, &buffers[1]));
    for (int i = 0; i < 2; ++i) {
      CHECK_EQ_INT(buffers[i]->byte_length, 0);
      CHECK_OK(run_fill(device, whole(buffers[i]), 0x55, 1));
      char out[1] = {9};
      CHECK_OK(read_back(device, buffers[i], out));
      CHECK_EQ_INT(out[0], 9);  // nothing read
    }
    CHECK_EQ_INT(fake_memory().allocations, live + 2);
    test_run_deferred();
    wait_for_no_devices();
    CHECK_EQ_INT(wait_for_allocations(live), live);
  }
}

TEST_SUITE(cuda_memory,
           TEST_CASE(allocator_cache_reuses_blocks_within_its_bounds),
           TEST_CASE(allocator_pool_keeps_freed_memory_until_trimmed),
           TEST_CASE(memory_is_freed_after_its_last_use),
           TEST_CASE(idle_devices_give_memory_back),
           TEST_CASE(idle_time_counts_from_the_end_of_work),
           TEST_CASE(idle_trim_waits_for_queued_frees),
           TEST_CASE(destroyed_device_trims_after_its_queued_frees),
           TEST_CASE(memory_of_a_lost_device_is_released),
           TEST_CASE(device_made_after_a_lost_one_is_healthy),
           TEST_CASE(zero_byte_buffers_have_an_address));
