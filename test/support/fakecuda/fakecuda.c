// fakecuda: see fakecuda.h for what it models and how tests control it.
//
// One mutex guards all state and one condition variable announces every
// change (new work, finished work, hold released, context lost); stream
// threads run operations without the lock.
#include "fakecuda.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../cuda_model/cuda_model_launch.h"
#include "hal/cuda/cuda_api.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define FAKE_ASAN 1
#endif

#define FAKE_EXPORT __attribute__((visibility("default")))

// Every entry point halrt loads, declared from the same table halrt uses,
// so that a signature mismatch fails to compile.
#define FAKE_DECLARE(name, params) FAKE_EXPORT hrt_cu_result_t name params;
#define FAKE_DECLARE_EITHER(field, newer, older, params) \
  FAKE_DECLARE(newer, params) FAKE_DECLARE(older, params)
HRT_CUDA_SYMBOLS(FAKE_DECLARE, FAKE_DECLARE, FAKE_DECLARE_EITHER)
#undef FAKE_DECLARE
#undef FAKE_DECLARE_EITHER

#define FAKE_MAX_DEVICES 8
#define FAKE_TOTAL_MEMORY ((size_t)1 << 30)
#define FAKE_MAX_PARAMS 96
// The parameter bytes one launch may carry (CUDA's classic 4 KiB limit).
#define FAKE_MAX_PARAM_BYTES 4096
#define FAKE_STACK_DEPTH 16
// Bytes past the end of every device allocation (beyond its rounding to
// 256), filled with FAKE_GUARD_BYTE: a kernel that writes there has written
// past the end of a buffer.
#define FAKE_GUARD_BYTES 256
#define FAKE_GUARD_BYTE 0xA5

// cuLaunchKernel's limits, those of every GPU halrt supports (compute
// capability 7.0 and later): CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_* and
// MAX_BLOCK_DIM_*, and MAX_THREADS_PER_BLOCK for the block's product.
#define FAKE_MAX_GRID_X 2147483647u
#define FAKE_MAX_GRID_YZ 65535u
#define FAKE_MAX_BLOCK_XY 1024u
#define FAKE_MAX_BLOCK_Z 64u
#define FAKE_MAX_BLOCK_THREADS 1024u

//===----------------------------------------------------------------------===//
// State
//===----------------------------------------------------------------------===//

struct hrt_cu_context_s {
  int device;
  int retains;
  hrt_cu_result_t lost;  // sticky error, or 0
};

struct hrt_cu_mempool_s;

typedef struct fake_allocation_s {
  struct fake_allocation_s* next;
  char* base;
  size_t size;      // bytes asked for: what copies and kernels may touch
  size_t capacity;  // bytes reserved (size rounded up to 256)
  bool pinned;      // cuMemAllocHost; otherwise device memory
  struct hrt_cu_mempool_s* pool;  // cuMemAllocAsync's pool, or NULL
  bool freed;  // cuMemFreeAsync was called: no later work may use it
} fake_allocation_t;

// A device's default memory pool.
struct hrt_cu_mempool_s {
  uint64_t release_threshold;  // CU_MEMPOOL_ATTR_RELEASE_THRESHOLD
  size_t reserved;             // bytes held: handed out or in `free_blocks`
  // Memory held but not handed out (its free ran in its stream), kept as
  // the allocations it was, for reuse.
  fake_allocation_t* free_blocks;
};

struct fake_launch_s;
typedef hrt_cu_result_t (*fake_kernel_fn_t)(const struct fake_launch_s* launch);

struct hrt_cu_function_s {
  char name[128];
  fake_kernel_fn_t run;  // NULL: no implementation in the fake
  uint32_t param_count;
  uint8_t param_sizes[FAKE_MAX_PARAMS];
};

struct hrt_cu_module_s {
  struct hrt_cu_context_s* context;
  uint32_t count;
  struct hrt_cu_function_s functions[];
};

struct hrt_cu_event_s {
  bool timing;            // created without CU_EVENT_DISABLE_TIMING
  int pending;            // records queued and not yet reached
  // Records enqueued and records reached, ever: a cuStreamWaitEvent waits
  // until `reached` catches up with `recorded` as it was at the call.
  uint64_t recorded;
  uint64_t reached_count;
  hrt_cu_result_t error;  // the context's error when the last one was reached
  bool reached;           // a record was reached at least once
  struct timespec time;   // when the last record was reached
};

typedef struct fake_launch_s {
  char name[128];
  uint32_t grid[3];
  uint32_t block[3];
  uint32_t binding_count;
  uint32_t constant_count;
  void* bindings[FAKE_MAX_PARAMS];
  size_t lengths[FAKE_MAX_PARAMS];  // 0 for a pointer outside every allocation
  // The live device allocation each binding points into (its end
  // included), or NULL.
  fake_allocation_t* allocations[FAKE_MAX_PARAMS];
  uint32_t constants[FAKE_MAX_PARAMS];
  // Every parameter as the kernel declares it: its bytes, read from the
  // caller's pointer by the declared size, and for an 8-byte one its index
  // in `bindings` (each is also taken as a possible pointer).
  uint32_t param_count;
  uint8_t param_sizes[FAKE_MAX_PARAMS];
  uint16_t param_offsets[FAKE_MAX_PARAMS];
  uint32_t param_bindings[FAKE_MAX_PARAMS];
  uint8_t param_data[FAKE_MAX_PARAM_BYTES];
} fake_launch_t;

typedef enum {
  FAKE_OP_COPY,
  FAKE_OP_SET,
  FAKE_OP_LAUNCH,
  FAKE_OP_RECORD,
  FAKE_OP_WAIT,
  FAKE_OP_FREE
} fake_op_kind_t;

typedef struct fake_op_s {
  struct fake_op_s* next;
  fake_op_kind_t kind;
  union {
    struct {
      void* target;
      const void* source;
      size_t bytes;
      void* snapshot;  // owned copy of a pageable source
    } copy;
    struct {
      char* target;
      size_t pitch;
      uint32_t value;
      uint32_t element_size;  // 1, 2 or 4
      size_t width;           // elements per row
      size_t height;          // rows
    } set;
    struct {
      fake_kernel_fn_t run;
      fake_launch_t* launch;  // owned
    } launch;
    struct hrt_cu_event_s* record;
    struct {
      // NULL once the event is destroyed (its records had all been reached).
      struct hrt_cu_event_s* event;
      uint64_t until;  // the event's `recorded` at cuStreamWaitEvent
    } wait;
    fake_allocation_t* free;  // a stream-ordered free (cuMemFreeAsync)
  };
} fake_op_t;

struct hrt_cu_stream_s {
  struct hrt_cu_stream_s* next;  // in fake_streams
  struct hrt_cu_context_s* context;
  pthread_t thread;
  fake_op_t* head;
  fake_op_t* tail;
  int queued;
  int enqueued;  // ever
  int serial;    // 1 for the first stream created, and so on
  bool busy;
  bool closing;
  bool held;  // fakecuda_hold_stream
};

static pthread_mutex_t fake_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t fake_changed = PTHREAD_COND_INITIALIZER;
static bool fake_initialized;
static int fake_device_count;
static size_t fake_device_bytes;
static bool fake_hold;
static int fake_streams_created;
static hrt_cu_result_t fake_next_launch_error;
static fake_allocation_t* fake_allocations;
static struct hrt_cu_stream_s* fake_streams;
static struct hrt_cu_context_s* fake_primary[FAKE_MAX_DEVICES];
static struct hrt_cu_mempool_s fake_pools[FAKE_MAX_DEVICES];
static fakecuda_memory_t fake_counters;  // the call counts of fakecuda_memory

static _Thread_local struct hrt_cu_context_s* fake_stack[FAKE_STACK_DEPTH];
static _Thread_local int fake_depth;

static struct hrt_cu_context_s* fake_current(void) {
  return fake_depth ? fake_stack[fake_depth - 1] : NULL;
}

// The errors after which cuda.h says that "any further CUDA work will
// return the same error" or that the process "must be terminated and
// relaunched" (CUDA 13), CUDA_ERROR_ASSERT ("the context cannot be used
// anymore"), and CONTEXT_IS_DESTROYED, which is how the fake models a
// driver reset. The two cuda_api.h does not name are written as numbers.
static bool fake_is_sticky(hrt_cu_result_t result) {
  switch (result) {
    case HRT_CUDA_ERROR_CONTAINED:
    case HRT_CUDA_ERROR_ILLEGAL_ADDRESS:
    case HRT_CUDA_ERROR_LAUNCH_TIMEOUT:
    case HRT_CUDA_ERROR_CONTEXT_IS_DESTROYED:
    case HRT_CUDA_ERROR_ASSERT:
    case HRT_CUDA_ERROR_HARDWARE_STACK_ERROR:
    case HRT_CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case HRT_CUDA_ERROR_MISALIGNED_ADDRESS:
    case HRT_CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case HRT_CUDA_ERROR_INVALID_PC:
    case HRT_CUDA_ERROR_LAUNCH_FAILED:
    case HRT_CUDA_ERROR_TENSOR_MEMORY_LEAK:
    case 810:  // CUDA_ERROR_MPS_CLIENT_TERMINATED
    case 911:  // CUDA_ERROR_EXTERNAL_DEVICE
      return true;
    default:
      return false;
  }
}

// Whether the calling thread may make a call that works in a context: the
// driver is initialised and a context is current. Every entry point that
// takes a stream, event, module, function or memory (not only those that
// create one) checks this, as the driver does, so that a halrt thread that
// never made its context current fails here and not first on a GPU.
static hrt_cu_result_t fake_require_context(void) {
  if (!fake_initialized) return HRT_CUDA_ERROR_NOT_INITIALIZED;
  return fake_current() ? HRT_CUDA_SUCCESS : HRT_CUDA_ERROR_INVALID_CONTEXT;
}

// The error a call on the current context gets before doing anything:
// not initialised, no context, or the context's sticky error. Lock held.
static hrt_cu_result_t fake_check_context(void) {
  hrt_cu_result_t result = fake_require_context();
  return result ? result : fake_current()->lost;
}

// The allocation that holds [pointer, pointer + bytes), or NULL. Lock held.
static fake_allocation_t* fake_find(const void* pointer, size_t bytes,
                                    bool pinned) {
  const char* p = pointer;
  for (fake_allocation_t* a = fake_allocations; a; a = a->next) {
    if (a->pinned == pinned && !a->freed && p >= a->base &&
        p <= a->base + a->size &&
        bytes <= (size_t)(a->base + a->size - p)) {
      return a;
    }
  }
  return NULL;
}

// fake_check_context for a caller without the lock.
static hrt_cu_result_t fake_context_checked(void) {
  pthread_mutex_lock(&fake_mutex);
  hrt_cu_result_t result = fake_check_context();
  pthread_mutex_unlock(&fake_mutex);
  return result;
}

static void* fake_device_pointer(hrt_cu_deviceptr_t pointer) {
  return (void*)(uintptr_t)pointer;
}

// Unlinks `allocation` from the live list. Lock held.
static void fake_unlink(fake_allocation_t* allocation) {
  fake_allocation_t** link = &fake_allocations;
  while (*link && *link != allocation) link = &(*link)->next;
  if (*link) *link = allocation->next;
}

// Gives memory back to the system until `pool` holds at most `keep` bytes
// or has nothing unused left. Lock held.
static void fake_pool_release(struct hrt_cu_mempool_s* pool, uint64_t keep) {
  while (pool->reserved > keep && pool->free_blocks) {
    fake_allocation_t* block = pool->free_blocks;
    pool->free_blocks = block->next;
    pool->reserved -= block->capacity;
    fake_device_bytes -= block->capacity;
    free(block->base);
    free(block);
  }
}

// A stream-ordered free has reached its point in the stream: the memory
// goes back to its pool, unused. Lock held.
static void fake_pool_take_back(fake_allocation_t* allocation) {
  fake_unlink(allocation);
  allocation->next = allocation->pool->free_blocks;
  allocation->pool->free_blocks = allocation;
}

// As the driver does at every stream, event or context synchronisation:
// pools holding more than their release threshold give memory back. Lock
// held.
static void fake_pools_synchronized(void) {
  for (int i = 0; i < FAKE_MAX_DEVICES; ++i) {
    fake_pool_release(&fake_pools[i], fake_pools[i].release_threshold);
  }
}

// Whether devices report CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED (not
// with FAKECUDA_NO_MEMORY_POOLS=1, read at every call).
static bool fake_pools_supported(void) {
  const char* value = getenv("FAKECUDA_NO_MEMORY_POOLS");
  return !(value && strcmp(value, "1") == 0);
}

//===----------------------------------------------------------------------===//
// Streams
//===----------------------------------------------------------------------===//

// Writes `count` copies of the first `size` bytes of `value` (little-endian)
// at `target`, doubling what is written: a few memcpy calls rather than one
// per element, which ThreadSanitizer (the tests run the fake under it)
// intercepts one by one.
static void fake_fill(char* target, const void* value, size_t size,
                      size_t count) {
  size_t total = size * count;
  if (!total) return;
  memcpy(target, value, size);
  for (size_t done = size; done < total;) {
    size_t n = done < total - done ? done : total - done;
    memcpy(target + done, target, n);
    done += n;
  }
}

// Writes `value` (its low `size` bytes: 1, 2 or 4) once at the start of each
// of `height` rows `pitch` bytes apart; the caller checked the alignment.
static void fake_fill_column(char* target, size_t pitch, uint32_t value,
                             uint32_t size, size_t height) {
  for (size_t row = 0; row < height; ++row, target += pitch) {
    if (size == 4) {
      *(uint32_t*)target = value;
    } else if (size == 2) {
      *(uint16_t*)target = (uint16_t)value;
    } else {
      *(uint8_t*)target = (uint8_t)value;
    }
  }
}

static hrt_cu_result_t fake_run(const fake_op_t* op) {
  switch (op->kind) {
    case FAKE_OP_COPY:
      memmove(op->copy.target,
              op->copy.snapshot ? op->copy.snapshot : op->copy.source,
              op->copy.bytes);
      return HRT_CUDA_SUCCESS;
    case FAKE_OP_SET:
      if (op->set.width == 1) {
        // A column (an 8-byte pattern is two of them): one store per row
        // rather than a memcpy call per row, which sanitizers intercept.
        fake_fill_column(op->set.target, op->set.pitch, op->set.value,
                         op->set.element_size, op->set.height);
        return HRT_CUDA_SUCCESS;
      }
      for (size_t row = 0; row < op->set.height; ++row) {
        fake_fill(op->set.target + row * op->set.pitch, &op->set.value,
                  op->set.element_size, op->set.width);
      }
      return HRT_CUDA_SUCCESS;
    case FAKE_OP_LAUNCH:
      return op->launch.run(op->launch.launch);
    case FAKE_OP_RECORD:
    case FAKE_OP_WAIT:  // fake_stream_main waited before taking it
    case FAKE_OP_FREE:  // fake_stream_main returns the memory to its pool
      return HRT_CUDA_SUCCESS;
  }
  return HRT_CUDA_SUCCESS;
}

static void fake_op_free(fake_op_t* op) {
  if (op->kind == FAKE_OP_COPY) free(op->copy.snapshot);
  if (op->kind == FAKE_OP_LAUNCH) free(op->launch.launch);
  free(op);
}

// Whether all streams or one are held (fakecuda_hold_streams,
// fakecuda_hold_stream): then the calls that wait for streams do not, as
// waiting might never end. Lock held.
static bool fake_holding(void) {
  if (fake_hold) return true;
  for (struct hrt_cu_stream_s* s = fake_streams; s; s = s->next) {
    if (s->held) return true;
  }
  return false;
}

// Whether `op` is an event wait whose record has not been reached yet. A
// lost context waits for nothing (its streams only drain). Lock held.
static bool fake_op_waits(const struct hrt_cu_stream_s* stream,
                          const fake_op_t* op) {
  return op->kind == FAKE_OP_WAIT && op->wait.event &&
         op->wait.event->reached_count < op->wait.until &&
         !stream->context->lost;
}

// Whether the stream may not take its next operation now: none queued,
// streams or this stream held (unless closing), or an event wait. Lock held.
static bool fake_stream_stopped(const struct hrt_cu_stream_s* stream) {
  if (!stream->head) return true;
  if (!stream->closing && (fake_hold || stream->held)) return true;
  return fake_op_waits(stream, stream->head);
}

static void* fake_stream_main(void* arg) {
  struct hrt_cu_stream_s* stream = arg;
  pthread_mutex_lock(&fake_mutex);
  for (;;) {
    while (fake_stream_stopped(stream) && !(stream->closing && !stream->head)) {
      pthread_cond_wait(&fake_changed, &fake_mutex);
    }
    fake_op_t* op = stream->head;
    if (!op) break;  // closing and drained
    stream->head = op->next;
    if (!stream->head) stream->tail = NULL;
    --stream->queued;
    stream->busy = true;
    hrt_cu_result_t lost = stream->context->lost;
    pthread_mutex_unlock(&fake_mutex);
    // A lost context runs nothing more; events are still reached, failed.
    hrt_cu_result_t result = lost ? lost : fake_run(op);
    pthread_mutex_lock(&fake_mutex);
    if (result && !stream->context->lost) stream->context->lost = result;
    if (op->kind == FAKE_OP_FREE) fake_pool_take_back(op->free);
    if (op->kind == FAKE_OP_RECORD) {
      op->record->error = stream->context->lost;
      op->record->reached = true;
      clock_gettime(CLOCK_MONOTONIC, &op->record->time);
      --op->record->pending;
      ++op->record->reached_count;
    }
    stream->busy = false;
    pthread_cond_broadcast(&fake_changed);
    fake_op_free(op);
  }
  pthread_mutex_unlock(&fake_mutex);
  return NULL;
}

// Appends `op` (owned) to `stream`, whatever its context's state. Lock
// held.
static void fake_append(struct hrt_cu_stream_s* stream, fake_op_t* op) {
  op->next = NULL;
  if (stream->tail) {
    stream->tail->next = op;
  } else {
    stream->head = op;
  }
  stream->tail = op;
  ++stream->queued;
  ++stream->enqueued;
  pthread_cond_broadcast(&fake_changed);
}

// Queues `op` (owned) on `stream`, or frees it and returns the error that
// stops it. Lock held.
static hrt_cu_result_t fake_enqueue(struct hrt_cu_stream_s* stream,
                                    fake_op_t* op) {
  hrt_cu_result_t result = fake_check_context();
  if (!result && (!stream || stream->context != fake_current())) {
    result = HRT_CUDA_ERROR_INVALID_HANDLE;
  }
  if (result) {
    fake_op_free(op);
    return result;
  }
  fake_append(stream, op);
  return HRT_CUDA_SUCCESS;
}

static fake_op_t* fake_op_new(fake_op_kind_t kind) {
  fake_op_t* op = calloc(1, sizeof(*op));
  if (op) op->kind = kind;
  return op;
}

//===----------------------------------------------------------------------===//
// Kernels
//===----------------------------------------------------------------------===//

static uint64_t fake_thread_count(const fake_launch_t* launch) {
  return (uint64_t)launch->grid[0] * launch->grid[1] * launch->grid[2] *
         launch->block[0] * launch->block[1] * launch->block[2];
}

// Whether binding `index` holds `count` elements of `size` bytes.
static bool fake_fits(const fake_launch_t* launch, uint32_t index,
                      uint64_t count, uint64_t size) {
  return index < launch->binding_count &&
         count <= launch->lengths[index] / size;
}

// vector_add_f32(a, b, out, n): one element per thread of the x dimension.
static hrt_cu_result_t fake_vector_add_f32(const fake_launch_t* launch) {
  uint64_t covered = (uint64_t)launch->grid[0] * launch->block[0];
  uint64_t n = launch->constants[0] < covered ? launch->constants[0] : covered;
  for (uint32_t b = 0; b < 3; ++b) {
    if (!fake_fits(launch, b, n, sizeof(float))) {
      return HRT_CUDA_ERROR_ILLEGAL_ADDRESS;
    }
  }
  const float* x = launch->bindings[0];
  const float* y = launch->bindings[1];
  float* out = launch->bindings[2];
  for (uint64_t i = 0; i < n; ++i) out[i] = x[i] + y[i];
  return HRT_CUDA_SUCCESS;
}

// write_index_u32(out, n): out[i] = i for all i < n.
static hrt_cu_result_t fake_write_index_u32(const fake_launch_t* launch) {
  uint64_t n = launch->constants[0];
  if (fake_thread_count(launch) == 0 || !fake_fits(launch, 0, n, 4)) {
    return HRT_CUDA_ERROR_ILLEGAL_ADDRESS;
  }
  uint32_t* out = launch->bindings[0];
  for (uint64_t i = 0; i < n; ++i) out[i] = (uint32_t)i;
  return HRT_CUDA_SUCCESS;
}

// Parameter `index`'s bytes into `out`; false unless the kernel declares it
// with `size` bytes.
static bool fake_param(const fake_launch_t* launch, uint32_t index, size_t size,
                       void* out) {
  if (index >= launch->param_count || launch->param_sizes[index] != size) {
    return false;
  }
  memcpy(out, launch->param_data + launch->param_offsets[index], size);
  return true;
}

// Parameter `index` as a device pointer to at least `count` elements of
// `size` bytes, or NULL.
static void* fake_param_buffer(const fake_launch_t* launch, uint32_t index,
                               uint64_t count, uint64_t size) {
  if (index >= launch->param_count || launch->param_sizes[index] != 8) {
    return NULL;
  }
  const uint32_t b = launch->param_bindings[index];
  return fake_fits(launch, b, count, size) ? launch->bindings[b] : NULL;
}

// scale_offset_f64(x, n, a, y), n an int64 and a a double passed by value:
// y[i] = a * x[i] + i for every i < n, whatever the grid.
static hrt_cu_result_t fake_scale_offset_f64(const fake_launch_t* launch) {
  int64_t n = 0;
  double a = 0;
  if (!fake_param(launch, 1, 8, &n) || !fake_param(launch, 2, 8, &a)) {
    return HRT_CUDA_ERROR_LAUNCH_FAILED;
  }
  if (n <= 0) return HRT_CUDA_SUCCESS;
  const double* x = fake_param_buffer(launch, 0, (uint64_t)n, sizeof(double));
  double* y = fake_param_buffer(launch, 3, (uint64_t)n, sizeof(double));
  if (fake_thread_count(launch) == 0 || !x || !y) {
    return HRT_CUDA_ERROR_ILLEGAL_ADDRESS;
  }
  for (int64_t i = 0; i < n; ++i) y[i] = a * x[i] + (double)i;
  return HRT_CUDA_SUCCESS;
}

// sleep_ms(unused, ms): keeps the stream busy for `ms` milliseconds (the
// GPU-bound work of the tests that check what waits for the GPU).
static hrt_cu_result_t fake_sleep_ms(const fake_launch_t* launch) {
  if (launch->constant_count < 1) return HRT_CUDA_ERROR_LAUNCH_FAILED;
  struct timespec delay = {(time_t)(launch->constants[0] / 1000),
                           (long)(launch->constants[0] % 1000) * 1000000L};
  while (nanosleep(&delay, &delay) != 0) {
  }
  return HRT_CUDA_SUCCESS;
}

static hrt_cu_result_t fake_fault_illegal_address(const fake_launch_t* launch) {
  (void)launch;
  return HRT_CUDA_ERROR_ILLEGAL_ADDRESS;
}

// Whether the guard bytes past `allocation`'s end are untouched. Under
// AddressSanitizer they are poisoned instead, and a write there is its
// report.
static bool fake_guard_intact(const fake_allocation_t* allocation) {
#ifdef FAKE_ASAN
  (void)allocation;
  return true;
#else
  const size_t end = allocation->capacity + FAKE_GUARD_BYTES;
  for (size_t i = allocation->size; i < end; ++i) {
    if ((uint8_t)allocation->base[i] != FAKE_GUARD_BYTE) return false;
  }
  return true;
#endif
}

static hrt_cu_result_t fake_kernel_error(const fake_launch_t* launch,
                                         hrt_cu_result_t result,
                                         const char* message) {
  fprintf(stderr, "fakecuda: kernel '%s' (grid %u,%u,%u, block %u,%u,%u): %s\n",
          launch->name, launch->grid[0], launch->grid[1], launch->grid[2],
          launch->block[0], launch->block[1], launch->block[2], message);
  return result;
}

// A kernel of our own CUDA C (src/hal/cuda/kernels), run by its host build
// (test/support/cuda_model) with the launch's grid, block and parameters.
// The parameters the PTX declares must be those the C++ declares, and each
// pointer must point into a live allocation; a write past an allocation's
// end is an illegal address, as a barrier some threads skip is a failed
// launch (each also described on stderr).
static hrt_cu_result_t fake_model_kernel(const fake_launch_t* launch) {
  const hrt_model_kernel_t* kernel = hrt_model_builtin_kernel(launch->name);
  char message[512];
  if (kernel->param_count != launch->param_count) {
    snprintf(message, sizeof(message),
             "the PTX declares %u parameters, the host build %u",
             launch->param_count, kernel->param_count);
    return fake_kernel_error(launch, HRT_CUDA_ERROR_LAUNCH_FAILED, message);
  }
  for (uint32_t i = 0; i < kernel->param_count; ++i) {
    if (kernel->param_sizes[i] != launch->param_sizes[i]) {
      snprintf(message, sizeof(message),
               "parameter %u is %u bytes in the PTX, %u in the host build", i,
               launch->param_sizes[i], kernel->param_sizes[i]);
      return fake_kernel_error(launch, HRT_CUDA_ERROR_LAUNCH_FAILED, message);
    }
    if (kernel->param_pointers[i] &&
        !launch->allocations[launch->param_bindings[i]]) {
      snprintf(message, sizeof(message),
               "parameter %u points outside every live allocation", i);
      return fake_kernel_error(launch, HRT_CUDA_ERROR_ILLEGAL_ADDRESS, message);
    }
  }
  const hrt_model_shape_t shape = {
      {launch->grid[0], launch->grid[1], launch->grid[2]},
      {launch->block[0], launch->block[1], launch->block[2]}};
  if (kernel->run(launch->param_data, launch->param_offsets, &shape, message,
                  sizeof(message)) != 0) {
    return fake_kernel_error(launch, HRT_CUDA_ERROR_LAUNCH_FAILED, message);
  }
  for (uint32_t i = 0; i < kernel->param_count; ++i) {
    const fake_allocation_t* allocation =
        kernel->param_pointers[i]
            ? launch->allocations[launch->param_bindings[i]]
            : NULL;
    if (allocation && !fake_guard_intact(allocation)) {
      snprintf(message, sizeof(message),
               "wrote past the end of parameter %u's allocation (%zu bytes)",
               i, allocation->size);
      return fake_kernel_error(launch, HRT_CUDA_ERROR_ILLEGAL_ADDRESS, message);
    }
  }
  return HRT_CUDA_SUCCESS;
}

static fake_kernel_fn_t fake_kernel_for(const char* name) {
  static const struct {
    const char* name;
    fake_kernel_fn_t run;
  } kTestKernels[] = {
      {"vector_add_f32", fake_vector_add_f32},
      {"write_index_u32", fake_write_index_u32},
      // write_index_u32<unsigned int> of a C++ template kernel
      // (test/nvrtc.test.js), as NVRTC lowers its name.
      {"_Z15write_index_u32IjEvPT_j", fake_write_index_u32},
      {"scale_offset_f64", fake_scale_offset_f64},
      {"fault_illegal_address", fake_fault_illegal_address},
      {"sleep_ms", fake_sleep_ms},
  };
  for (size_t i = 0; i < sizeof(kTestKernels) / sizeof(kTestKernels[0]); ++i) {
    if (strcmp(kTestKernels[i].name, name) == 0) return kTestKernels[i].run;
  }
  return hrt_model_builtin_kernel(name) ? fake_model_kernel : NULL;
}

//===----------------------------------------------------------------------===//
// Modules: PTX text -> functions
//===----------------------------------------------------------------------===//

// Writes a ptxas-style message into the caller's JIT error log, if any.
static void fake_jit_log(unsigned int option_count, const int* options,
                         void** values, const char* message) {
  char* buffer = NULL;
  size_t size = 0;
  int size_index = -1;
  for (unsigned int i = 0; i < option_count; ++i) {
    if (options[i] == HRT_CU_JIT_ERROR_LOG_BUFFER) buffer = values[i];
    if (options[i] == HRT_CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES) {
      size = (size_t)(uintptr_t)values[i];
      size_index = (int)i;
    }
  }
  if (!buffer || size == 0) return;
  snprintf(buffer, size, "%s", message);
  values[size_index] = (void*)(uintptr_t)(strlen(buffer) + 1);
}

// The fake JIT's checks (fakecuda.h). Returns 0 or the line of the error,
// and describes it in `message`.
static int fake_jit_check(const char* text, char* message, size_t size) {
  const char* c = text;
  for (;;) {
    c += strspn(c, " \t\r\n");
    if (c[0] != '/' || c[1] != '/') break;
    c += strcspn(c, "\n");
  }
  if (strncmp(c, ".version", 8) != 0) {
    snprintf(message, size,
             "ptxas application ptx input, line 1; fatal   : Missing "
             ".version directive at start of file");
    return 1;
  }
  int line = 1;
  for (const char* p = text; *p; ++p) {
    if (*p == '\n') ++line;
    if (strncmp(p, "bogus", 5) == 0 &&
        (p == text || p[-1] == ' ' || p[-1] == '\t' || p[-1] == '\n')) {
      snprintf(message, size,
               "ptxas application ptx input, line %d; error   : Not a name "
               "of any known instruction: 'bogus'",
               line);
      return line;
    }
  }
  return 0;
}

// The size of the `.param` declaration in [c, stop): its type's (`.u64`,
// `.b8` ...; the qualifiers `.ptr`, `.global`, `.align N` are skipped)
// times the element count of `name[N]`, as the driver sizes by-value
// structs and arrays. At most 255.
static uint8_t fake_ptx_param_size(const char* c, const char* stop) {
  unsigned long bytes = 4;
  for (const char* t = c; t < stop; ++t) {
    if (t[0] == '.' && strchr("bsuf", t[1]) && t[2] >= '0' && t[2] <= '9') {
      bytes = strtoul(t + 2, NULL, 10) / 8;
      break;
    }
  }
  const char* bracket = memchr(c, '[', (size_t)(stop - c));
  if (bracket) bytes *= strtoul(bracket + 1, NULL, 10);
  return (uint8_t)(bytes > 255 ? 255 : bytes);
}

// Parses `.entry NAME(.param .TYPE name, ...)` at `c` (just past ".entry")
// into `function`. Returns the text after the parameter list.
static const char* fake_parse_entry(const char* c,
                                    struct hrt_cu_function_s* function) {
  while (*c == ' ' || *c == '\t' || *c == '\n') ++c;
  size_t length = strcspn(c, " \t\n(");
  if (length >= sizeof(function->name)) length = sizeof(function->name) - 1;
  memcpy(function->name, c, length);
  function->name[length] = 0;
  function->run = fake_kernel_for(function->name);
  c += length;
  while (*c == ' ' || *c == '\t' || *c == '\n') ++c;
  if (*c != '(') return c;
  const char* end = strchr(c, ')');
  if (!end) return c + strlen(c);
  for (const char* p = strstr(c, ".param"); p && p < end;
       p = strstr(p + 6, ".param")) {
    if (function->param_count == FAKE_MAX_PARAMS) break;
    function->param_sizes[function->param_count++] =
        fake_ptx_param_size(p + 6, p + strcspn(p, ",)"));
  }
  return end + 1;
}

static uint32_t fake_count_entries(const char* text) {
  uint32_t count = 0;
  for (const char* p = strstr(text, ".entry"); p; p = strstr(p + 6, ".entry")) {
    ++count;
  }
  return count;
}

//===----------------------------------------------------------------------===//
// Modules: cubin and fatbin images -> functions
//===----------------------------------------------------------------------===//

// The driver is given only a pointer, so an image's extent is what its own
// headers say: a fatbin's declared size, an entry's payload size, a cubin's
// section header table. Everything must lie inside that, and every field the
// fake reads must hold a value nvcc writes; anything else is
// CUDA_ERROR_INVALID_IMAGE, never a read past the image. Fields are little
// endian, as on every platform halrt supports.
#define FAKE_ELF_MAGIC "\x7f" "ELF"
#define FAKE_EM_CUDA 190
#define FAKE_SHT_SYMTAB 2
#define FAKE_SHT_NOBITS 8
#define FAKE_STT_FUNC 2
#define FAKE_STB_GLOBAL 1
#define FAKE_STB_WEAK 2  // template kernel instances are weak
// st_other bit nvcc and NVRTC set on kernel (__global__) symbols; weak
// device functions the compiler adds (64-bit division helpers) lack it.
#define FAKE_STO_CUDA_ENTRY 0x10
#define FAKE_FATBIN_KIND_ELF 2
#define FAKE_SM 90  // the compute capability the fake reports, 9.0
#define FAKE_EIATTR_KPARAM_INFO 0x17

// Whether `text` starts with the 4 bytes at `prefix`; reads no further than
// a NUL, so that it is safe on short PTX text.
static bool fake_starts_with(const uint8_t* text, const uint8_t* prefix) {
  for (int i = 0; i < 4; ++i) {
    if (text[i] != prefix[i]) return false;
  }
  return true;
}

static uint64_t fake_read(const uint8_t* p, size_t bytes) {
  uint64_t value = 0;
  memcpy(&value, p, bytes);
  return value;
}

typedef struct {
  const uint8_t* base;
  uint64_t extent;  // bytes the headers vouch for
  uint64_t shoff;
  uint32_t shnum;
  uint32_t shstrndx;
} fake_elf_t;

static const uint8_t* fake_elf_section(const fake_elf_t* elf, uint32_t i) {
  return elf->base + elf->shoff + (uint64_t)i * 64;
}

// Section `i`'s bytes, or NULL when they are not inside the image.
static const uint8_t* fake_elf_data(const fake_elf_t* elf, uint32_t i,
                                    uint64_t* out_size) {
  const uint8_t* header = fake_elf_section(elf, i);
  uint64_t offset = fake_read(header + 24, 8), size = fake_read(header + 32, 8);
  if (offset > elf->extent || size > elf->extent - offset) return NULL;
  *out_size = size;
  return elf->base + offset;
}

// The NUL-terminated string at `offset` of string table section `table`.
static const char* fake_elf_string(const fake_elf_t* elf, uint32_t table,
                                   uint64_t offset) {
  uint64_t size = 0;
  const uint8_t* data =
      table < elf->shnum ? fake_elf_data(elf, table, &size) : NULL;
  if (!data || offset >= size || !memchr(data + offset, 0, size - offset)) {
    return NULL;
  }
  return (const char*)data + offset;
}

// Checks the ELF header of a cubin at `base`. `limit` is the extent an
// enclosing fatbin entry vouches for (UINT64_MAX for a bare cubin, whose
// extent is its section header table's end).
static hrt_cu_result_t fake_elf_open(const uint8_t* base, uint64_t limit,
                                     fake_elf_t* elf) {
  if (limit < 64 || memcmp(base, FAKE_ELF_MAGIC, 4) != 0 || base[4] != 2 ||
      base[5] != 1 || fake_read(base + 18, 2) != FAKE_EM_CUDA ||
      fake_read(base + 20, 4) != 1 || fake_read(base + 52, 2) != 64 ||
      fake_read(base + 58, 2) != 64) {
    return HRT_CUDA_ERROR_INVALID_IMAGE;
  }
  *elf = (fake_elf_t){.base = base,
                      .shoff = fake_read(base + 40, 8),
                      .shnum = (uint32_t)fake_read(base + 60, 2),
                      .shstrndx = (uint32_t)fake_read(base + 62, 2)};
  if (elf->shoff < 64 || elf->shoff > (1ull << 32) || elf->shnum == 0 ||
      elf->shstrndx >= elf->shnum) {
    return HRT_CUDA_ERROR_INVALID_IMAGE;
  }
  elf->extent = elf->shoff + (uint64_t)elf->shnum * 64;
  if (elf->extent > limit) return HRT_CUDA_ERROR_INVALID_IMAGE;
  for (uint32_t i = 1; i < elf->shnum; ++i) {
    uint64_t size = 0;
    if (fake_read(fake_elf_section(elf, i) + 4, 4) != FAKE_SHT_NOBITS &&
        !fake_elf_data(elf, i, &size)) {
      return HRT_CUDA_ERROR_INVALID_IMAGE;
    }
  }
  return HRT_CUDA_SUCCESS;
}

// The index of the section named `name`, or 0.
static uint32_t fake_elf_find(const fake_elf_t* elf, const char* name) {
  for (uint32_t i = 1; i < elf->shnum; ++i) {
    const char* s = fake_elf_string(elf, elf->shstrndx,
                                    fake_read(fake_elf_section(elf, i), 4));
    if (s && strcmp(s, name) == 0) return i;
  }
  return 0;
}

// Parameter sizes from the kernel's .nv.info.NAME section: one
// EIATTR_KPARAM_INFO attribute per parameter (ordinal, offset, and the
// size in bits 18-31 of its last word). Attributes are a format byte, an
// attribute byte and a value: none (format 1), a half word (2 and 3), or a
// 16-bit length and that many bytes (4).
static hrt_cu_result_t fake_elf_params(const fake_elf_t* elf,
                                       struct hrt_cu_function_s* function) {
  char name[160];
  snprintf(name, sizeof(name), ".nv.info.%s", function->name);
  uint32_t section = fake_elf_find(elf, name);
  uint64_t size = 0;
  const uint8_t* p = section ? fake_elf_data(elf, section, &size) : NULL;
  if (!p) return HRT_CUDA_SUCCESS;  // a kernel without parameters
  bool seen[FAKE_MAX_PARAMS] = {false};
  for (uint64_t at = 0; at < size;) {
    if (size - at < 2) return HRT_CUDA_ERROR_INVALID_IMAGE;
    const uint8_t format = p[at], attribute = p[at + 1];
    uint64_t length = format == 1 ? 2 : format == 2 || format == 3 ? 4 : 0;
    if (format == 4 && size - at >= 4) length = 4 + fake_read(p + at + 2, 2);
    if (length == 0 || length > size - at) return HRT_CUDA_ERROR_INVALID_IMAGE;
    if (format == 4 && attribute == FAKE_EIATTR_KPARAM_INFO) {
      if (length != 16) return HRT_CUDA_ERROR_INVALID_IMAGE;
      uint32_t ordinal = (uint32_t)fake_read(p + at + 8, 2);
      uint32_t bytes = (uint32_t)(fake_read(p + at + 12, 4) >> 18) & 0x3fff;
      if (ordinal >= FAKE_MAX_PARAMS || bytes == 0 || bytes > 255 ||
          seen[ordinal]) {
        return HRT_CUDA_ERROR_INVALID_IMAGE;
      }
      seen[ordinal] = true;
      function->param_sizes[ordinal] = (uint8_t)bytes;
      if (ordinal >= function->param_count) function->param_count = ordinal + 1;
    }
    at += length;
  }
  // Every ordinal below the count has its size.
  for (uint32_t i = 0; i < function->param_count; ++i) {
    if (!seen[i]) return HRT_CUDA_ERROR_INVALID_IMAGE;
  }
  return HRT_CUDA_SUCCESS;
}

// Whether the symbol at `symbol` (an Elf64_Sym) is a kernel: a global or
// weak function marked as a CUDA entry.
static bool fake_is_kernel(const uint8_t* symbol) {
  const uint8_t info = symbol[4], other = symbol[5];
  return (info & 0xf) == FAKE_STT_FUNC &&
         ((info >> 4) == FAKE_STB_GLOBAL || (info >> 4) == FAKE_STB_WEAK) &&
         (other & FAKE_STO_CUDA_ENTRY);
}

// A module with one function per kernel symbol of the cubin.
static hrt_cu_result_t fake_load_cubin(const uint8_t* base, uint64_t limit,
                                       struct hrt_cu_module_s** out) {
  fake_elf_t elf;
  hrt_cu_result_t result = fake_elf_open(base, limit, &elf);
  if (result) return result;
  const uint8_t* symbols = NULL;
  uint64_t symbols_size = 0;
  uint32_t strings = 0;
  for (uint32_t i = 1; i < elf.shnum && !symbols; ++i) {
    const uint8_t* header = fake_elf_section(&elf, i);
    if (fake_read(header + 4, 4) != FAKE_SHT_SYMTAB) continue;
    if (fake_read(header + 56, 8) != 24) return HRT_CUDA_ERROR_INVALID_IMAGE;
    symbols = fake_elf_data(&elf, i, &symbols_size);
    strings = (uint32_t)fake_read(header + 40, 4);
  }
  if (!symbols) return HRT_CUDA_ERROR_INVALID_IMAGE;
  uint32_t count = 0;
  for (uint64_t at = 0; at + 24 <= symbols_size; at += 24) {
    count += fake_is_kernel(symbols + at);
  }
  struct hrt_cu_module_s* loaded =
      calloc(1, sizeof(*loaded) + count * sizeof(loaded->functions[0]));
  if (!loaded) return HRT_CUDA_ERROR_OUT_OF_MEMORY;
  for (uint64_t at = 0; at + 24 <= symbols_size && !result; at += 24) {
    if (!fake_is_kernel(symbols + at)) continue;
    const char* name =
        fake_elf_string(&elf, strings, fake_read(symbols + at, 4));
    struct hrt_cu_function_s* function = &loaded->functions[loaded->count++];
    if (!name || strlen(name) >= sizeof(function->name)) {
      result = HRT_CUDA_ERROR_INVALID_IMAGE;
      break;
    }
    snprintf(function->name, sizeof(function->name), "%s", name);
    function->run = fake_kernel_for(function->name);
    result = fake_elf_params(&elf, function);
  }
  if (result) {
    free(loaded);
    return result;
  }
  *out = loaded;
  return HRT_CUDA_SUCCESS;
}

// A fatbin: a header (magic, version 1, header size 16, size of the
// entries) and entries (kind, version, header size, payload size, ..., the
// SM at byte 28). The fake loads the uncompressed cubin for its SM; it
// JITs no PTX from a fatbin, so a fatbin without one is
// CUDA_ERROR_NO_BINARY_FOR_GPU.
static hrt_cu_result_t fake_load_fatbin(const uint8_t* base,
                                        struct hrt_cu_module_s** out) {
  if (fake_read(base + 4, 2) != 1 || fake_read(base + 6, 2) != 16) {
    return HRT_CUDA_ERROR_INVALID_IMAGE;
  }
  const uint64_t size = fake_read(base + 8, 8);
  if (size == 0 || size > (1ull << 32)) return HRT_CUDA_ERROR_INVALID_IMAGE;
  const uint8_t* entries = base + 16;
  for (uint64_t at = 0; at < size;) {
    if (size - at < 32) return HRT_CUDA_ERROR_INVALID_IMAGE;
    const uint8_t* entry = entries + at;
    const uint64_t header = fake_read(entry + 4, 4);
    const uint64_t payload = fake_read(entry + 8, 8);
    if (header < 32 || header > size - at || payload > size - at - header) {
      return HRT_CUDA_ERROR_INVALID_IMAGE;
    }
    if (fake_read(entry, 2) == FAKE_FATBIN_KIND_ELF &&
        fake_read(entry + 28, 4) == FAKE_SM && payload >= 4 &&
        memcmp(entry + header, FAKE_ELF_MAGIC, 4) == 0) {
      return fake_load_cubin(entry + header, payload, out);
    }
    at += header + payload;
  }
  return HRT_CUDA_ERROR_NO_BINARY_FOR_GPU;
}

hrt_cu_result_t cuModuleLoadDataEx(hrt_cu_module_t* module, const void* image,
                                   unsigned int option_count, int* options,
                                   void** option_values) {
  pthread_mutex_lock(&fake_mutex);
  hrt_cu_result_t result = fake_check_context();
  struct hrt_cu_context_s* context = fake_current();
  pthread_mutex_unlock(&fake_mutex);
  if (result) return result;
  if (!module || !image) return HRT_CUDA_ERROR_INVALID_VALUE;
  // Told apart by their first bytes, as the driver does: a cubin is an ELF
  // file, a fatbin starts with its magic, anything else is PTX text.
  const uint8_t* bytes = image;
  // 0xBA55ED50, little endian.
  static const uint8_t kFatbinMagic[4] = {0x50, 0xED, 0x55, 0xBA};
  const bool fatbin = fake_starts_with(bytes, kFatbinMagic);
  if (fatbin || fake_starts_with(bytes, (const uint8_t*)FAKE_ELF_MAGIC)) {
    struct hrt_cu_module_s* loaded = NULL;
    result = fatbin ? fake_load_fatbin(bytes, &loaded)
                    : fake_load_cubin(bytes, UINT64_MAX, &loaded);
    if (result) return result;
    loaded->context = context;
    *module = loaded;
    return HRT_CUDA_SUCCESS;
  }
  const char* text = image;
  char message[256];
  if (fake_jit_check(text, message, sizeof(message))) {
    fake_jit_log(option_count, options, option_values, message);
    return HRT_CUDA_ERROR_INVALID_PTX;
  }
  const uint32_t count = fake_count_entries(text);
  struct hrt_cu_module_s* loaded =
      calloc(1, sizeof(*loaded) + count * sizeof(loaded->functions[0]));
  if (!loaded) return HRT_CUDA_ERROR_OUT_OF_MEMORY;
  loaded->context = context;
  const char* c = text;
  for (const char* p = strstr(c, ".entry"); p; p = strstr(c, ".entry")) {
    c = fake_parse_entry(p + 6, &loaded->functions[loaded->count++]);
  }
  *module = loaded;
  return HRT_CUDA_SUCCESS;
}

// Unloads even on a lost context (returning its error), so that tests end
// without leaks.
static bool fake_streams_busy(void);

// Waits for the queued work first, as cuMemFree does (a module may not go
// while a kernel of it can still run), except while streams are held.
hrt_cu_result_t cuModuleUnload(hrt_cu_module_t module) {
  hrt_cu_result_t result = fake_context_checked();
  if (result == HRT_CUDA_ERROR_NOT_INITIALIZED ||
      result == HRT_CUDA_ERROR_INVALID_CONTEXT) {
    return result;
  }
  pthread_mutex_lock(&fake_mutex);
  while (!fake_holding() && fake_streams_busy()) {
    pthread_cond_wait(&fake_changed, &fake_mutex);
  }
  pthread_mutex_unlock(&fake_mutex);
  free(module);
  return result;
}

hrt_cu_result_t cuModuleGetFunction(hrt_cu_function_t* function,
                                    hrt_cu_module_t module, const char* name) {
  pthread_mutex_lock(&fake_mutex);
  hrt_cu_result_t result = fake_check_context();
  pthread_mutex_unlock(&fake_mutex);
  if (result) return result;
  for (uint32_t i = 0; i < module->count; ++i) {
    if (strcmp(module->functions[i].name, name) == 0 &&
        module->functions[i].run) {
      *function = &module->functions[i];
      return HRT_CUDA_SUCCESS;
    }
  }
  return HRT_CUDA_ERROR_NOT_FOUND;
}

hrt_cu_result_t cuModuleGetFunctionCount(unsigned int* count,
                                         hrt_cu_module_t module) {
  hrt_cu_result_t result = fake_context_checked();
  if (result) return result;
  *count = module->count;
  return HRT_CUDA_SUCCESS;
}

hrt_cu_result_t cuModuleEnumerateFunctions(hrt_cu_function_t* functions,
                                           unsigned int count,
                                           hrt_cu_module_t module) {
  hrt_cu_result_t result = fake_context_checked();
  if (result) return result;
  for (unsigned int i = 0; i < count && i < module->count; ++i) {
    functions[i] = &module->functions[i];
  }
  return HRT_CUDA_SUCCESS;
}

hrt_cu_result_t cuFuncGetName(const char** name, hrt_cu_function_t function) {
  hrt_cu_result_t result = fake_context_checked();
  if (result) return result;
  *name = function->name;
  return HRT_CUDA_SUCCESS;
}

hrt_cu_result_t cuFuncGetParamInfo(hrt_cu_function_t function, size_t index,
                                   size_t* offset, size_t* size) {
  hrt_cu_result_t result = fake_context_checked();
  if (result) return result;
  if (index >= function->param_count) return HRT_CUDA_ERROR_INVALID_VALUE;
  size_t at = 0;
  for (size_t i = 0; i < index; ++i) at += function->param_sizes[i];
  *offset = at;
  *size = function->param_sizes[index];
  return HRT_CUDA_SUCCESS;
}

hrt_cu_result_t cuLaunchKernel(hrt_cu_function_t function, unsigned int grid_x,
                               unsigned int grid_y, unsigned int grid_z,
                               unsigned int block_x, unsigned int block_y,
                               unsigned int block_z, unsigned int shared_bytes,
                               hrt_cu_stream_t stream, void** params,
                               void** extra) {
  hrt_cu_result_t checked = fake_context_checked();
  if (checked) return checked;
  if (!function || !function->run || shared_bytes || extra || !params ||
      !grid_x || !grid_y || !grid_z || !block_x || !block_y || !block_z ||
      grid_x > FAKE_MAX_GRID_X || grid_y > FAKE_MAX_GRID_YZ ||
      grid_z > FAKE_MAX_GRID_YZ || block_x > FAKE_MAX_BLOCK_XY ||
      block_y > FAKE_MAX_BLOCK_XY || block_z > FAKE_MAX_BLOCK_Z ||
      (uint64_t)block_x * block_y * block_z > FAKE_MAX_BLOCK_THREADS) {
    return HRT_CUDA_ERROR_INVALID_VALUE;
  }
  fake_op_t* op = fake_op_new(FAKE_OP_LAUNCH);
  fake_launch_t* launch = calloc(1, sizeof(*launch));
  if (!op || !launch) {
    free(op);
    free(launch);
    return HRT_CUDA_ERROR_OUT_OF_MEMORY;
  }
  *launch = (fake_launch_t){.grid = {grid_x, grid_y, grid_z},
                            .block = {block_x, block_y, block_z}};
  memcpy(launch->name, function->name, sizeof(launch->name));
  op->launch.run = function->run;
  op->launch.launch = launch;
  pthread_mutex_lock(&fake_mutex);
  hrt_cu_result_t injected = fake_next_launch_error;
  fake_next_launch_error = HRT_CUDA_SUCCESS;
  struct hrt_cu_context_s* context = fake_current();
  if (injected && fake_is_sticky(injected) && context && !context->lost) {
    context->lost = injected;
  }
  uint32_t bytes = 0;
  for (uint32_t i = 0; i < function->param_count && !injected; ++i) {
    const uint8_t size = function->param_sizes[i];
    if (bytes + size > FAKE_MAX_PARAM_BYTES) {
      injected = HRT_CUDA_ERROR_INVALID_VALUE;
      break;
    }
    launch->param_sizes[i] = size;
    launch->param_offsets[i] = (uint16_t)bytes;
    memcpy(launch->param_data + bytes, params[i], size);
    bytes += size;
    launch->param_count = i + 1;
    if (size == 8) {
      uint64_t pointer = 0;
      memcpy(&pointer, params[i], 8);
      uint32_t b = launch->binding_count++;
      launch->param_bindings[i] = b;
      launch->bindings[b] = fake_device_pointer(pointer);
      fake_allocation_t* allocation = fake_find(launch->bindings[b], 0, false);
      launch->allocations[b] = allocation;
      launch->lengths[b] = allocation
                               ? (size_t)(allocation->base + allocation->size -
                                          (char*)launch->bindings[b])
                               : 0;
    } else {
      memcpy(&launch->constants[launch->constant_count++], params[i],
             size < 4 ? size : 4);
    }
  }
  hrt_cu_result_t result = injected;
  if (injected) {
    fake_op_free(op);
  } else {
    result = fake_enqueue(stream, op);
  }
  pthread_mutex_unlock(&fake_mutex);
  return result;
}

//===----------------------------------------------------------------------===//
// Initialisation, devices, contexts
//===----------------------------------------------------------------------===//

hrt_cu_result_t cuInit(unsigned int flags) {
  if (flags != 0) return HRT_CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&fake_mutex);
  if (!fake_initialized) {
    const char* count = getenv("FAKECUDA_DEVICE_COUNT");
    fake_device_count = count ? atoi(count) : 1;
    if (fake_device_count < 0) fake_device_count = 0;
    if (fake_device_count > FAKE_MAX_DEVICES) {
      fake_device_count = FAKE_MAX_DEVICES;
    }
    fake_initialized = true;
  }
  pthread_mutex_unlock(&fake_mutex);
  return HRT_CUDA_SUCCESS;
}

hrt_cu_result_t cuDriverGetVersion(int* version) {
  *version = 13000;
  return HRT_CUDA_SUCCESS;
}

hrt_cu_result_t cuDeviceGetCount(int* count) {
  if (!fake_initialized) return HRT_CUDA_ERROR_NOT_INITIALIZED;
  *count = fake_device_count;
  return HRT_CUDA_SUCCESS;
}

hrt_cu_result_t cuDeviceGet(hrt_cu_device_t* device, int ordinal) {
  if (!fake_initialized) return HRT_CUDA_ERROR_NOT_INITIALIZED;
  if (ordinal < 0 || ordinal >= fake_device_count) {
    return HRT_CUDA_ERROR_INVALID_DEVICE;
  }
  *device = ordinal;
  return HRT_CUDA_SUCCESS;
}

hrt_cu_result_t cuDeviceGetName(char* name, int length,
                                hrt_cu_device_t device) {
  if (device < 0 || device >= fake_device_count || length < 1) {
    return HRT_CUDA_ERROR_INVALID_VALUE;
  }
  snprintf(name, (size_t)length, "fakecuda device %d", device);
  return HRT_CUDA_SUCCESS;
}

hrt_cu_result_t cuDeviceTotalMem_v2(size_t* bytes, hrt_cu_device_t device) {
  if (device < 0 || device >= fake_device_count) {
    return HRT_CUDA_ERROR_INVALID_VALUE;
  }
  *bytes = FAKE_TOTAL_MEMORY;
  return HRT_CUDA_SUCCESS;
}

hrt_cu_result_t cuDeviceGetAttribute(int* value, int attribute,
                                     hrt_cu_device_t device) {
  if (device < 0 || device >= fake_device_count) {
    return HRT_CUDA_ERROR_INVALID_VALUE;
  }
  switch (attribute) {
    case HRT_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
      *value = 9;
      break;
    case HRT_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
      *value = 0;
      break;
    case HRT_CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
      *value = 4;
      break;
    case HRT_CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED:
      *value = fake_pools_supported();
      break;
    default:
      return HRT_CUDA_ERROR_INVALID_VALUE;
  }
  return HRT_CUDA_SUCCESS;
}

hrt_cu_result_t cuDevicePrimaryCtxRetain(hrt_cu_context_t* context,
                                         hrt_cu_device_t device) {
  if (device < 0 || device >= fake_device_count) {
    return HRT_CUDA_ERROR_INVALID_DEVICE;
  }
  pthread_mutex_lock(&fake_mutex);
  if (!fake_primary[device]) {
    fake_primary[device] = calloc(1, sizeof(struct hrt_cu_context_s));
    if (fake_primary[device]) fake_primary[device]->device = device;
  }
  struct hrt_cu_context_s* primary = fake_primary[device];
  if (primary) ++primary->retains;
  pthread_mutex_unlock(&fake_mutex);
  if (!primary) return HRT_CUDA_ERROR_OUT_OF_MEMORY;
  *context = primary;
  return HRT_CUDA_SUCCESS;
}

// The last release destroys the context; the next retain makes a fresh one.
hrt_cu_result_t cuDevicePrimaryCtxRelease_v2(hrt_cu_device_t device) {
  if (device < 0 || device >= fake_device_count) {
    return HRT_CUDA_ERROR_INVALID_DEVICE;
  }
  pthread_mutex_lock(&fake_mutex);
  struct hrt_cu_context_s* primary = fake_primary[device];
  const bool retained = primary != NULL;
  if (retained && --primary->retains == 0) {
    free(primary);
    fake_primary[device] = NULL;
    // The context's pool memory goes with it.
    fake_pool_release(&fake_pools[device], 0);
  }
  pthread_mutex_unlock(&fake_mutex);
  return retained ? HRT_CUDA_SUCCESS : HRT_CUDA_ERROR_INVALID_CONTEXT;
}

hrt_cu_result_t cuCtxSetCurrent(hrt_cu_context_t context) {
  if (fake_depth == 0) fake_depth = 1;
  fake_stack[fake_depth - 1] = context;
  return HRT_CUDA_SUCCESS;
}

hrt_cu_result_t cuCtxPushCurrent_v2(hrt_cu_context_t context) {
  if (!context || fake_depth == FAKE_STACK_DEPTH) {
    return HRT_CUDA_ERROR_INVALID_VALUE;
  }
  fake_stack[fake_depth++] = context;
  return HRT_CUDA_SUCCESS;
}

hrt_cu_result_t cuCtxPopCurrent_v2(hrt_cu_context_t* context) {
  if (fake_depth == 0) return HRT_CUDA_ERROR_INVALID_CONTEXT;
  *context = fake_stack[--fake_depth];
  return HRT_CUDA_SUCCESS;
}

static const struct {
  hrt_cu_result_t result;
  const char* name;
  const char* text;
} kFakeErrors[] = {
    {HRT_CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE",
     "invalid argument"},
    {HRT_CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {HRT_CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED",
     "initialization error"},
    {HRT_CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE",
     "invalid device ordinal"},
    {HRT_CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT",
     "invalid device context"},
    {HRT_CUDA_ERROR_INVALID_PTX, "CUDA_ERROR_INVALID_PTX",
     "a PTX JIT compilation failed"},
    {HRT_CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE",
     "invalid resource handle"},
    {HRT_CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND",
     "named symbol not found"},
    {HRT_CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS",
     "an illegal memory access was encountered"},
    {HRT_CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES,
     "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
     "too many resources requested for launch"},
    {HRT_CUDA_ERROR_CONTEXT_IS_DESTROYED, "CUDA_ERROR_CONTEXT_IS_DESTROYED",
     "context is destroyed"},
    {HRT_CUDA_ERROR_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED",
     "unspecified launch failure"},
};

hrt_cu_result_t cuGetErrorName(hrt_cu_result_t result, const char** name) {
  for (size_t i = 0; i < sizeof(kFakeErrors) / sizeof(kFakeErrors[0]); ++i) {
    if (kFakeErrors[i].result == result) {
      *name = kFakeErrors[i].name;
      return HRT_CUDA_SUCCESS;
    }
  }
  return HRT_CUDA_ERROR_INVALID_VALUE;
}

hrt_cu_result_t cuGetErrorString(hrt_cu_result_t result, const char** text) {
  for (size_t i = 0; i < sizeof(kFakeErrors) / sizeof(kFakeErrors[0]); ++i) {
    if (kFakeErrors[i].result == result) {
      *text = kFakeErrors[i].text;
      return HRT_CUDA_SUCCESS;
    }
  }
  return HRT_CUDA_ERROR_INVALID_VALUE;
}

//===----------------------------------------------------------------------===//
// Memory
//===----------------------------------------------------------------------===//

// Fills device memory past `allocation`'s size, to the end of its guard,
// with FAKE_GUARD_BYTE, and poisons it for AddressSanitizer, so that a
// kernel's write past the end shows (fake_guard_intact) and a read past it
// is a report. Lock held.
static void fake_guard(fake_allocation_t* allocation) {
  const size_t end = allocation->capacity + FAKE_GUARD_BYTES;
#ifdef FAKE_ASAN
  ASAN_UNPOISON_MEMORY_REGION(allocation->base, end);
#endif
  memset(allocation->base + allocation->size, FAKE_GUARD_BYTE,
         end - allocation->size);
#ifdef FAKE_ASAN
  ASAN_POISON_MEMORY_REGION(allocation->base + allocation->size,
                            end - allocation->size);
#endif
}

static hrt_cu_result_t fake_allocate(void** pointer, size_t bytes,
                                     bool pinned) {
  if (!pointer || bytes == 0) return HRT_CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&fake_mutex);
  hrt_cu_result_t result = fake_check_context();
  if (!result && !pinned &&
      (bytes + 255) / 256 * 256 > FAKE_TOTAL_MEMORY - fake_device_bytes) {
    result = HRT_CUDA_ERROR_OUT_OF_MEMORY;
  }
  fake_allocation_t* allocation = NULL;
  if (!result) {
    allocation = calloc(1, sizeof(*allocation));
    // Device memory is 256-byte aligned, as cuMemAlloc's is.
    size_t padded = (bytes + 255) & ~(size_t)255;
    char* base = allocation ? aligned_alloc(256, padded + FAKE_GUARD_BYTES)
                            : NULL;
    if (!base) {
      free(allocation);
      result = HRT_CUDA_ERROR_OUT_OF_MEMORY;
    } else {
      *allocation = (fake_allocation_t){.next = fake_allocations,
                                        .base = base,
                                        .size = bytes,
                                        .capacity = padded,
                                        .pinned = pinned};
      fake_allocations = allocation;
      if (!pinned) {
        fake_guard(allocation);
        fake_device_bytes += padded;
        ++fake_counters.mem_alloc_calls;
      }
      *pointer = base;
    }
  }
  pthread_mutex_unlock(&fake_mutex);
  return result;
}

// Whether any stream has work queued or running. Lock held.
static bool fake_streams_busy(void) {
  for (struct hrt_cu_stream_s* s = fake_streams; s; s = s->next) {
    if (s->head || s->busy) return true;
  }
  return false;
}

// Frees even on a lost context (returning its error, as every call on it
// does), so that tests end without leaks. Like the
// driver's cuMemFree and cuMemFreeHost, it first waits for the work queued
// on every stream (which may still use the memory: halrt frees a buffer
// whose zero-fill or upload is still queued), except while streams are
// held, when waiting would never end.
static hrt_cu_result_t fake_free(void* pointer, bool pinned) {
  pthread_mutex_lock(&fake_mutex);
  hrt_cu_result_t required = fake_require_context();
  if (required) {
    pthread_mutex_unlock(&fake_mutex);
    return required;
  }
  while (!fake_holding() && fake_streams_busy()) {
    pthread_cond_wait(&fake_changed, &fake_mutex);
  }
  fake_allocation_t** link = &fake_allocations;
  while (*link && !((*link)->base == pointer && (*link)->pinned == pinned &&
                    !(*link)->freed)) {
    link = &(*link)->next;
  }
  fake_allocation_t* allocation = *link;
  if (allocation) {
    *link = allocation->next;
    if (allocation->pool) allocation->pool->reserved -= allocation->capacity;
    if (!pinned) {
      fake_device_bytes -= allocation->capacity;
      ++fake_counters.mem_free_calls;
    }
  }
  hrt_cu_result_t lost = fake_current()->lost;
  pthread_mutex_unlock(&fake_mutex);
  if (!allocation) return lost ? lost : HRT_CUDA_ERROR_INVALID_VALUE;
  free(allocation->base);
  free(allocation);
  return lost;
}

hrt_cu_result_t cuMemAlloc_v2(hrt_cu_deviceptr_t* pointer, size_t bytes) {
  void* base = NULL;
  hrt_cu_result_t result = fake_allocate(&base, bytes, false);
  if (!result) *pointer = (hrt_cu_deviceptr_t)(uintptr_t)base;
  return result;
}

hrt_cu_result_t cuMemFree_v2(hrt_cu_deviceptr_t pointer) {
  return fake_free(fake_device_pointer(pointer), false);
}

hrt_cu_result_t cuMemAllocHost_v2(void** pointer, size_t bytes) {
  return fake_allocate(pointer, bytes, true);
}

hrt_cu_result_t cuMemFreeHost(void* pointer) {
  return fake_free(pointer, true);
}

// The current context's device's pool, or NULL when pools are off. Lock
// held, context checked.
static struct hrt_cu_mempool_s* fake_current_pool(void) {
  return fake_pools_supported() ? &fake_pools[fake_current()->device] : NULL;
}

// Stream-ordered allocation from the device's default pool: memory the pool
// holds unused is reused (the smallest block that fits), else reserved
// anew. The memory is usable by work enqueued after the call.
hrt_cu_result_t cuMemAllocAsync(hrt_cu_deviceptr_t* pointer, size_t bytes,
                                hrt_cu_stream_t stream) {
  if (!pointer || bytes == 0) return HRT_CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&fake_mutex);
  hrt_cu_result_t result = fake_check_context();
  struct hrt_cu_mempool_s* pool = result ? NULL : fake_current_pool();
  if (!result && !pool) result = HRT_CUDA_ERROR_NOT_SUPPORTED;
  if (!result && (!stream || stream->context != fake_current())) {
    result = HRT_CUDA_ERROR_INVALID_HANDLE;
  }
  const size_t padded = (bytes + 255) & ~(size_t)255;
  fake_allocation_t* allocation = NULL;
  if (!result) {
    fake_allocation_t** best = NULL;
    for (fake_allocation_t** link = &pool->free_blocks; *link;
         link = &(*link)->next) {
      if ((*link)->capacity >= padded &&
          (!best || (*link)->capacity < (*best)->capacity)) {
        best = link;
      }
    }
    // Short of memory, the pool first gives back what it holds unused.
    if (!best && padded > FAKE_TOTAL_MEMORY - fake_device_bytes) {
      fake_pool_release(pool, 0);
    }
    if (best) {
      allocation = *best;
      *best = allocation->next;
    } else if (padded > FAKE_TOTAL_MEMORY - fake_device_bytes) {
      result = HRT_CUDA_ERROR_OUT_OF_MEMORY;
    } else {
      allocation = calloc(1, sizeof(*allocation));
      char* base =
          allocation ? aligned_alloc(256, padded + FAKE_GUARD_BYTES) : NULL;
      if (!base) {
        free(allocation);
        allocation = NULL;
        result = HRT_CUDA_ERROR_OUT_OF_MEMORY;
      } else {
        *allocation = (fake_allocation_t){
            .base = base, .capacity = padded, .pool = pool};
        pool->reserved += padded;
        fake_device_bytes += padded;
      }
    }
  }
  if (allocation) {
    allocation->size = bytes;
    fake_guard(allocation);
    allocation->freed = false;
    allocation->next = fake_allocations;
    fake_allocations = allocation;
    ++fake_counters.alloc_async_calls;
    *pointer = (hrt_cu_deviceptr_t)(uintptr_t)allocation->base;
  }
  pthread_mutex_unlock(&fake_mutex);
  return result;
}

// Stream-ordered free: from the call on, no work may be enqueued that uses
// the memory (it is no allocation any more: INVALID_VALUE for copies and
// memsets, an illegal address for kernels); work enqueued before may still
// use it until the free runs in the stream, which returns it to its pool.
//
// A lost context still frees, as every destroying call does (so that tests
// end without leaks), and returns its error; the free is queued all the
// same, since the operation its stream took before the loss may still be
// running on the memory. A lost stream drops the rest of its work, so the
// memory is back in the pool, where a trim or a synchronisation may free
// it, as soon as that operation ends, and not before.
hrt_cu_result_t cuMemFreeAsync(hrt_cu_deviceptr_t pointer,
                               hrt_cu_stream_t stream) {
  fake_op_t* op = fake_op_new(FAKE_OP_FREE);
  if (!op) return HRT_CUDA_ERROR_OUT_OF_MEMORY;
  pthread_mutex_lock(&fake_mutex);
  fake_allocation_t* allocation = fake_find(fake_device_pointer(pointer), 0,
                                            false);
  hrt_cu_result_t result = fake_require_context();
  if (!result && (!allocation || !allocation->pool ||
                  allocation->base != fake_device_pointer(pointer))) {
    result = fake_current()->lost ? fake_current()->lost
                                  : HRT_CUDA_ERROR_INVALID_VALUE;
  } else if (!result && (!stream || stream->context != fake_current())) {
    result = fake_current()->lost ? fake_current()->lost
                                  : HRT_CUDA_ERROR_INVALID_HANDLE;
  }
  if (result) {
    fake_op_free(op);
  } else {
    op->free = allocation;
    allocation->freed = true;
    fake_append(stream, op);
    result = fake_current()->lost;
    if (!result) ++fake_counters.free_async_calls;
  }
  pthread_mutex_unlock(&fake_mutex);
  return result;
}

hrt_cu_result_t cuDeviceGetDefaultMemPool(hrt_cu_mempool_t* pool,
                                          hrt_cu_device_t device) {
  if (!fake_initialized) return HRT_CUDA_ERROR_NOT_INITIALIZED;
  if (device < 0 || device >= fake_device_count) {
    return HRT_CUDA_ERROR_INVALID_DEVICE;
  }
  if (!fake_pools_supported()) return HRT_CUDA_ERROR_NOT_SUPPORTED;
  *pool = &fake_pools[device];
  return HRT_CUDA_SUCCESS;
}

hrt_cu_result_t cuMemPoolSetAttribute(hrt_cu_mempool_t pool, int attribute,
                                      void* value) {
  if (!fake_initialized) return HRT_CUDA_ERROR_NOT_INITIALIZED;
  if (!pool || !value || attribute != HRT_CU_MEMPOOL_ATTR_RELEASE_THRESHOLD) {
    return HRT_CUDA_ERROR_INVALID_VALUE;
  }
  pthread_mutex_lock(&fake_mutex);
  memcpy(&pool->release_threshold, value, sizeof(uint64_t));
  pthread_mutex_unlock(&fake_mutex);
  return HRT_CUDA_SUCCESS;
}

// Gives back what the pool holds unused beyond `keep` bytes; never waits.
hrt_cu_result_t cuMemPoolTrimTo(hrt_cu_mempool_t pool, size_t keep) {
  if (!fake_initialized) return HRT_CUDA_ERROR_NOT_INITIALIZED;
  if (!pool) return HRT_CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&fake_mutex);
  fake_pool_release(pool, keep);
  ++fake_counters.trims;
  pthread_mutex_unlock(&fake_mutex);
  return HRT_CUDA_SUCCESS;
}

// Queues a copy after checking its ranges: device ranges must lie in device
// allocations and host targets in pinned memory. A pageable host source is
// copied now. Lock not held.
static hrt_cu_result_t fake_copy(void* target, bool target_on_device,
                                 const void* source, bool source_on_device,
                                 size_t bytes, hrt_cu_stream_t stream) {
  fake_op_t* op = fake_op_new(FAKE_OP_COPY);
  if (!op) return HRT_CUDA_ERROR_OUT_OF_MEMORY;
  op->copy.target = target;
  op->copy.source = source;
  op->copy.bytes = bytes;
  pthread_mutex_lock(&fake_mutex);
  bool valid = fake_find(target, bytes, !target_on_device) != NULL;
  if (source_on_device) {
    valid = valid && fake_find(source, bytes, false) != NULL;
  } else if (!fake_find(source, bytes, true)) {
    // From pageable memory the driver copies through its own staging and
    // may wait for the stream first, as the fake does (unless held).
    while (!fake_holding() && stream && (stream->head || stream->busy)) {
      pthread_cond_wait(&fake_changed, &fake_mutex);
    }
    op->copy.snapshot = malloc(bytes ? bytes : 1);
    if (op->copy.snapshot) memcpy(op->copy.snapshot, source, bytes);
    valid = valid && op->copy.snapshot;
  }
  hrt_cu_result_t result = HRT_CUDA_ERROR_INVALID_VALUE;
  if (valid) {
    result = fake_enqueue(stream, op);
  } else {
    fake_op_free(op);
  }
  pthread_mutex_unlock(&fake_mutex);
  return result;
}

hrt_cu_result_t cuMemcpyHtoDAsync_v2(hrt_cu_deviceptr_t target,
                                     const void* source, size_t bytes,
                                     hrt_cu_stream_t stream) {
  return fake_copy(fake_device_pointer(target), true, source, false, bytes,
                   stream);
}

hrt_cu_result_t cuMemcpyDtoHAsync_v2(void* target, hrt_cu_deviceptr_t source,
                                     size_t bytes, hrt_cu_stream_t stream) {
  return fake_copy(target, false, fake_device_pointer(source), true, bytes,
                   stream);
}

hrt_cu_result_t cuMemcpyDtoDAsync_v2(hrt_cu_deviceptr_t target,
                                     hrt_cu_deviceptr_t source, size_t bytes,
                                     hrt_cu_stream_t stream) {
  const char* t = fake_device_pointer(target);
  const char* s = fake_device_pointer(source);
  if (bytes && t < s + bytes && s < t + bytes) {
    return HRT_CUDA_ERROR_INVALID_VALUE;  // CUDA leaves overlap undefined
  }
  return fake_copy(fake_device_pointer(target), true,
                   fake_device_pointer(source), true, bytes, stream);
}

// Queues a 2-D memset of `height` rows of `width` elements, `pitch` bytes
// apart; the target and pitch must be aligned to the element size.
static hrt_cu_result_t fake_set(hrt_cu_deviceptr_t target, size_t pitch,
                                uint32_t value, uint32_t element_size,
                                size_t width, size_t height,
                                hrt_cu_stream_t stream) {
  if (target % element_size ||
      (height > 1 && (pitch % element_size || pitch < width * element_size))) {
    return HRT_CUDA_ERROR_INVALID_VALUE;
  }
  fake_op_t* op = fake_op_new(FAKE_OP_SET);
  if (!op) return HRT_CUDA_ERROR_OUT_OF_MEMORY;
  op->set.target = fake_device_pointer(target);
  op->set.pitch = pitch;
  op->set.value = value;
  op->set.element_size = element_size;
  op->set.width = width;
  op->set.height = height;
  size_t extent = height ? (height - 1) * pitch + width * element_size : 0;
  pthread_mutex_lock(&fake_mutex);
  hrt_cu_result_t result = HRT_CUDA_ERROR_INVALID_VALUE;
  if (fake_find(op->set.target, extent, false)) {
    result = fake_enqueue(stream, op);
  } else {
    fake_op_free(op);
  }
  pthread_mutex_unlock(&fake_mutex);
  return result;
}

hrt_cu_result_t cuMemsetD8Async(hrt_cu_deviceptr_t target, unsigned char value,
                                size_t count, hrt_cu_stream_t stream) {
  return fake_set(target, count, value, 1, count, 1, stream);
}

hrt_cu_result_t cuMemsetD16Async(hrt_cu_deviceptr_t target,
                                 unsigned short value, size_t count,
                                 hrt_cu_stream_t stream) {
  return fake_set(target, count * 2, value, 2, count, 1, stream);
}

hrt_cu_result_t cuMemsetD32Async(hrt_cu_deviceptr_t target, unsigned int value,
                                 size_t count, hrt_cu_stream_t stream) {
  return fake_set(target, count * 4, value, 4, count, 1, stream);
}

hrt_cu_result_t cuMemsetD2D8Async(hrt_cu_deviceptr_t target, size_t pitch,
                                  unsigned char value, size_t width,
                                  size_t height, hrt_cu_stream_t stream) {
  return fake_set(target, pitch, value, 1, width, height, stream);
}

hrt_cu_result_t cuMemsetD2D32Async(hrt_cu_deviceptr_t target, size_t pitch,
                                   unsigned int value, size_t width,
                                   size_t height, hrt_cu_stream_t stream) {
  return fake_set(target, pitch, value, 4, width, height, stream);
}

//===----------------------------------------------------------------------===//
// Streams and events
//===----------------------------------------------------------------------===//

hrt_cu_result_t cuStreamCreate(hrt_cu_stream_t* stream, unsigned int flags) {
  (void)flags;
  pthread_mutex_lock(&fake_mutex);
  hrt_cu_result_t result = fake_check_context();
  pthread_mutex_unlock(&fake_mutex);
  if (result) return result;
  struct hrt_cu_stream_s* created = calloc(1, sizeof(*created));
  if (!created) return HRT_CUDA_ERROR_OUT_OF_MEMORY;
  created->context = fake_current();
  if (pthread_create(&created->thread, NULL, fake_stream_main, created) != 0) {
    free(created);
    return HRT_CUDA_ERROR_OUT_OF_MEMORY;
  }
  pthread_mutex_lock(&fake_mutex);
  created->serial = ++fake_streams_created;
  created->next = fake_streams;
  fake_streams = created;
  pthread_mutex_unlock(&fake_mutex);
  *stream = created;
  return HRT_CUDA_SUCCESS;
}

// Runs what is queued (even while held), then frees the stream.
hrt_cu_result_t cuStreamDestroy_v2(hrt_cu_stream_t stream) {
  pthread_mutex_lock(&fake_mutex);
  hrt_cu_result_t required = fake_require_context();
  if (required) {
    pthread_mutex_unlock(&fake_mutex);
    return required;
  }
  struct hrt_cu_stream_s** link = &fake_streams;
  while (*link && *link != stream) link = &(*link)->next;
  const bool found = *link != NULL;
  if (found) {
    *link = stream->next;
    stream->closing = true;
    pthread_cond_broadcast(&fake_changed);
  }
  pthread_mutex_unlock(&fake_mutex);
  if (!found) return HRT_CUDA_ERROR_INVALID_HANDLE;
  pthread_join(stream->thread, NULL);
  free(stream);
  // Destroyed even on a lost context, which still answers with its error.
  return fake_context_checked();
}

hrt_cu_result_t cuStreamSynchronize(hrt_cu_stream_t stream) {
  pthread_mutex_lock(&fake_mutex);
  hrt_cu_result_t required = fake_require_context();
  if (required) {
    pthread_mutex_unlock(&fake_mutex);
    return required;
  }
  while (stream->head || stream->busy) {
    pthread_cond_wait(&fake_changed, &fake_mutex);
  }
  hrt_cu_result_t result = fake_check_context();
  if (!result) result = stream->context->lost;
  fake_pools_synchronized();
  pthread_mutex_unlock(&fake_mutex);
  return result;
}

// SUCCESS when the stream has run everything enqueued, else NOT_READY;
// never waits.
hrt_cu_result_t cuStreamQuery(hrt_cu_stream_t stream) {
  pthread_mutex_lock(&fake_mutex);
  hrt_cu_result_t result = fake_require_context();
  if (!result) {
    result = stream->head || stream->busy ? HRT_CUDA_ERROR_NOT_READY
                                          : stream->context->lost;
  }
  pthread_mutex_unlock(&fake_mutex);
  return result;
}

hrt_cu_result_t cuEventCreate(hrt_cu_event_t* event, unsigned int flags) {
  pthread_mutex_lock(&fake_mutex);
  hrt_cu_result_t result = fake_check_context();
  pthread_mutex_unlock(&fake_mutex);
  if (result) return result;
  *event = calloc(1, sizeof(struct hrt_cu_event_s));
  if (!*event) return HRT_CUDA_ERROR_OUT_OF_MEMORY;
  (*event)->timing = !(flags & HRT_CU_EVENT_DISABLE_TIMING);
  return HRT_CUDA_SUCCESS;
}

hrt_cu_result_t cuEventRecord(hrt_cu_event_t event, hrt_cu_stream_t stream) {
  fake_op_t* op = fake_op_new(FAKE_OP_RECORD);
  if (!op) return HRT_CUDA_ERROR_OUT_OF_MEMORY;
  op->record = event;
  pthread_mutex_lock(&fake_mutex);
  hrt_cu_result_t result = fake_enqueue(stream, op);
  if (!result) {
    ++event->pending;
    ++event->recorded;
  }
  pthread_mutex_unlock(&fake_mutex);
  return result;
}

// Work enqueued on `stream` after this waits until the last record of
// `event` enqueued before this call has been reached (at once when there is
// none), on whichever stream it was recorded, as the driver does.
hrt_cu_result_t cuStreamWaitEvent(hrt_cu_stream_t stream, hrt_cu_event_t event,
                                  unsigned int flags) {
  if (flags != 0) return HRT_CUDA_ERROR_INVALID_VALUE;  // CU_EVENT_WAIT_DEFAULT
  if (!event) return HRT_CUDA_ERROR_INVALID_HANDLE;
  fake_op_t* op = fake_op_new(FAKE_OP_WAIT);
  if (!op) return HRT_CUDA_ERROR_OUT_OF_MEMORY;
  pthread_mutex_lock(&fake_mutex);
  op->wait.event = event;
  op->wait.until = event->recorded;
  hrt_cu_result_t result = fake_enqueue(stream, op);
  pthread_mutex_unlock(&fake_mutex);
  return result;
}

// Waits until every record of `event` was reached; a lost context's error
// is returned then, as CUDA returns sticky errors from every call.
hrt_cu_result_t cuEventSynchronize(hrt_cu_event_t event) {
  pthread_mutex_lock(&fake_mutex);
  hrt_cu_result_t required = fake_require_context();
  if (required) {
    pthread_mutex_unlock(&fake_mutex);
    return required;
  }
  while (event->pending > 0) pthread_cond_wait(&fake_changed, &fake_mutex);
  hrt_cu_result_t result = event->error ? event->error : fake_check_context();
  fake_pools_synchronized();
  pthread_mutex_unlock(&fake_mutex);
  return result;
}

// Milliseconds between the points the stream reached the two events. As
// cuda.h documents, an event created with CU_EVENT_DISABLE_TIMING, or one
// never recorded, is CUDA_ERROR_INVALID_HANDLE.
hrt_cu_result_t cuEventElapsedTime(float* milliseconds, hrt_cu_event_t start,
                                   hrt_cu_event_t end) {
  pthread_mutex_lock(&fake_mutex);
  hrt_cu_result_t result = fake_check_context();
  if (result) {
    // no context, or a lost one: nothing more to check
  } else if (!start->timing || !end->timing) {
    result = HRT_CUDA_ERROR_INVALID_HANDLE;
  } else if (start->pending > 0 || end->pending > 0) {
    result = HRT_CUDA_ERROR_NOT_READY;
  } else if (!start->reached || !end->reached) {
    result = HRT_CUDA_ERROR_INVALID_HANDLE;
  } else {
    double ns = (double)(end->time.tv_sec - start->time.tv_sec) * 1e9 +
                (double)(end->time.tv_nsec - start->time.tv_nsec);
    *milliseconds = (float)(ns / 1e6);
  }
  pthread_mutex_unlock(&fake_mutex);
  return result;
}

#ifndef FAKECUDA_WITHOUT_ELAPSED_TIME_V2
// The name cuda.h 12.8+ maps cuEventElapsedTime to; the variant built with
// FAKECUDA_WITHOUT_ELAPSED_TIME_V2 stands for an older driver.
hrt_cu_result_t cuEventElapsedTime_v2(float* milliseconds,
                                      hrt_cu_event_t start,
                                      hrt_cu_event_t end) {
  return cuEventElapsedTime(milliseconds, start, end);
}
#endif

hrt_cu_result_t cuEventDestroy_v2(hrt_cu_event_t event) {
  pthread_mutex_lock(&fake_mutex);
  hrt_cu_result_t result = fake_check_context();
  const bool pending = event->pending > 0;
  pthread_mutex_unlock(&fake_mutex);
  if (result == HRT_CUDA_ERROR_NOT_INITIALIZED ||
      result == HRT_CUDA_ERROR_INVALID_CONTEXT) {
    return result;
  }
  // halrt destroys events only after waiting for them; a fake that freed a
  // pending event would corrupt the stream, so refuse instead.
  if (pending) return HRT_CUDA_ERROR_INVALID_HANDLE;
  // Waits queued on it are satisfied (every record was reached): they
  // forget it, as the driver lets an event go while streams wait on it.
  pthread_mutex_lock(&fake_mutex);
  for (struct hrt_cu_stream_s* s = fake_streams; s; s = s->next) {
    for (fake_op_t* op = s->head; op; op = op->next) {
      if (op->kind == FAKE_OP_WAIT && op->wait.event == event) {
        op->wait.event = NULL;
      }
    }
  }
  pthread_mutex_unlock(&fake_mutex);
  // Freed even on a lost context, which still answers with its error.
  free(event);
  return result;
}

//===----------------------------------------------------------------------===//
// Test controls (fakecuda.h)
//===----------------------------------------------------------------------===//

FAKE_EXPORT void fakecuda_hold_streams(int hold) {
  pthread_mutex_lock(&fake_mutex);
  fake_hold = hold != 0;
  pthread_cond_broadcast(&fake_changed);
  pthread_mutex_unlock(&fake_mutex);
}

FAKE_EXPORT int fakecuda_streams_created(void) {
  pthread_mutex_lock(&fake_mutex);
  int created = fake_streams_created;
  pthread_mutex_unlock(&fake_mutex);
  return created;
}

FAKE_EXPORT void fakecuda_hold_stream(int serial, int hold) {
  pthread_mutex_lock(&fake_mutex);
  for (struct hrt_cu_stream_s* s = fake_streams; s; s = s->next) {
    if (s->serial == serial) s->held = hold != 0;
  }
  pthread_cond_broadcast(&fake_changed);
  pthread_mutex_unlock(&fake_mutex);
}

FAKE_EXPORT void fakecuda_stream_state(int serial,
                                       fakecuda_stream_state_t* out) {
  memset(out, 0, sizeof(*out));
  pthread_mutex_lock(&fake_mutex);
  for (struct hrt_cu_stream_s* s = fake_streams; s; s = s->next) {
    if (s->serial != serial) continue;
    out->exists = 1;
    out->enqueued = s->enqueued;
    out->unfinished = s->queued + (s->busy ? 1 : 0);
    out->waiting = s->head && fake_op_waits(s, s->head);
  }
  pthread_mutex_unlock(&fake_mutex);
}

FAKE_EXPORT int fakecuda_queued_operations(void) {
  pthread_mutex_lock(&fake_mutex);
  int queued = 0;
  for (struct hrt_cu_stream_s* s = fake_streams; s; s = s->next) {
    queued += s->queued;
  }
  pthread_mutex_unlock(&fake_mutex);
  return queued;
}

FAKE_EXPORT void fakecuda_memory(fakecuda_memory_t* out) {
  pthread_mutex_lock(&fake_mutex);
  *out = fake_counters;
  out->allocations = 0;
  out->allocated_bytes = 0;
  for (fake_allocation_t* a = fake_allocations; a; a = a->next) {
    if (a->pinned) continue;
    ++out->allocations;
    out->allocated_bytes += (long long)a->size;
  }
  out->pool_reserved_bytes = (long long)fake_pools[0].reserved;
  out->release_threshold = fake_pools[0].release_threshold;
  pthread_mutex_unlock(&fake_mutex);
}

FAKE_EXPORT void fakecuda_fail_next_launch(int result) {
  pthread_mutex_lock(&fake_mutex);
  fake_next_launch_error = result;
  pthread_mutex_unlock(&fake_mutex);
}

FAKE_EXPORT void fakecuda_destroy_contexts(void) {
  pthread_mutex_lock(&fake_mutex);
  for (int i = 0; i < FAKE_MAX_DEVICES; ++i) {
    if (fake_primary[i] && !fake_primary[i]->lost) {
      fake_primary[i]->lost = HRT_CUDA_ERROR_CONTEXT_IS_DESTROYED;
    }
  }
  pthread_cond_broadcast(&fake_changed);
  pthread_mutex_unlock(&fake_mutex);
}
