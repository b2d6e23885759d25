#include "cuda_fixture.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/live.h"
#include "base/threads.h"

//===----------------------------------------------------------------------===//
// Setup: which driver library, and the fake's controls
//===----------------------------------------------------------------------===//

cuda_test_setup_t g_cuda;
cuda_fake_entries_t g_cu;

static bool resolve_fake_entries(void* handle) {
  bool all = true;
#define FAKE_RESOLVE_AS(field, name)               \
  {                                                \
    void* address = dlsym(handle, #name);          \
    memcpy(&g_cu.field, &address, sizeof(address)); \
    all = all && address != NULL;                  \
  }
#define FAKE_RESOLVE(name, params) FAKE_RESOLVE_AS(name, name)
#define FAKE_RESOLVE_EITHER(field, newer, older, params) \
  FAKE_RESOLVE_AS(field, newer)
  HRT_CUDA_SYMBOLS(FAKE_RESOLVE, FAKE_RESOLVE, FAKE_RESOLVE_EITHER)
#undef FAKE_RESOLVE_EITHER
#undef FAKE_RESOLVE
#undef FAKE_RESOLVE_AS
  return all;
}

// The directory of this executable, for defaults (build/ctest/...).
static void executable_dir(char* out, size_t size) {
  ssize_t length = readlink("/proc/self/exe", out, size - 1);
  out[length > 0 ? length : 0] = 0;
  char* slash = strrchr(out, '/');
  if (slash) *slash = 0;
}

bool cuda_setup(void) {
  if (g_cuda.ready) return true;
  char dir[1024];
  executable_dir(dir, sizeof(dir));
  const char* root = getenv("HRT_TEST_ROOT");
  if (root) {
    snprintf(g_cuda.root, sizeof(g_cuda.root), "%s", root);
  } else {
    snprintf(g_cuda.root, sizeof(g_cuda.root), "%s/../..", dir);
  }
  const char* real = getenv("HRT_TEST_REAL_CUDA");
  if (real && strcmp(real, "1") == 0) {
    g_cuda.ready = true;
    return true;
  }
  char fake[1100];
  const char* path = getenv("HRT_TEST_FAKECUDA");
  if (!path) {
    snprintf(fake, sizeof(fake), "%s/libfakecuda.so", dir);
    path = fake;
  }
  void* handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    fprintf(stderr, "cannot load the fake CUDA driver: %s\n", dlerror());
    return false;
  }
  // Two devices, so that ordinals are exercised.
  setenv("FAKECUDA_DEVICE_COUNT", "2", 1);
  setenv("HALRT_CUDA_LIBRARY", path, 1);
  void* symbols[8] = {dlsym(handle, "fakecuda_hold_streams"),
                      dlsym(handle, "fakecuda_queued_operations"),
                      dlsym(handle, "fakecuda_fail_next_launch"),
                      dlsym(handle, "fakecuda_destroy_contexts"),
                      dlsym(handle, "fakecuda_memory"),
                      dlsym(handle, "fakecuda_streams_created"),
                      dlsym(handle, "fakecuda_hold_stream"),
                      dlsym(handle, "fakecuda_stream_state")};
  memcpy(&g_cuda.hold_streams, &symbols[0], sizeof(void*));
  memcpy(&g_cuda.queued_operations, &symbols[1], sizeof(void*));
  memcpy(&g_cuda.fail_next_launch, &symbols[2], sizeof(void*));
  memcpy(&g_cuda.destroy_contexts, &symbols[3], sizeof(void*));
  memcpy(&g_cuda.memory, &symbols[4], sizeof(void*));
  memcpy(&g_cuda.streams_created, &symbols[5], sizeof(void*));
  memcpy(&g_cuda.hold_stream, &symbols[6], sizeof(void*));
  memcpy(&g_cuda.stream_state, &symbols[7], sizeof(void*));
  g_cuda.fake = g_cuda.hold_streams && g_cuda.queued_operations &&
                g_cuda.fail_next_launch && g_cuda.destroy_contexts &&
                g_cuda.memory && g_cuda.streams_created && g_cuda.hold_stream &&
                g_cuda.stream_state && resolve_fake_entries(handle);
  g_cuda.ready = g_cuda.fake;
  // The runtime opens the same file: both handles share one instance.
  return g_cuda.ready;
}

char* read_file(const char* path, size_t* out_length) {
  char full[2048];
  snprintf(full, sizeof(full), "%s/%s", g_cuda.root, path);
  FILE* file = fopen(full, "rb");
  if (!file) return NULL;
  fseek(file, 0, SEEK_END);
  long length = ftell(file);
  fseek(file, 0, SEEK_SET);
  char* data = malloc((size_t)length + 1);
  if (data && fread(data, 1, (size_t)length, file) != (size_t)length) {
    free(data);
    data = NULL;
  }
  fclose(file);
  if (data) {
    data[length] = 0;
    if (out_length) *out_length = (size_t)length;
  }
  return data;
}

//===----------------------------------------------------------------------===//
// The test kernels, buffers
//===----------------------------------------------------------------------===//

#define B HRT_HAL_PARAM_BUFFER
static const hrt_hal_param_type_t kVectorAddParams[] = {B, B, B,
                                                        HRT_HAL_PARAM_U32};
static const hrt_hal_param_type_t kBufferU32Params[] = {B, HRT_HAL_PARAM_U32};
static const hrt_hal_param_type_t kScaleOffsetParams[] = {B, HRT_HAL_PARAM_I64,
                                                          HRT_HAL_PARAM_F64, B};
#undef B
const hrt_hal_entry_decl_t kTestKernelDecls[TEST_KERNEL_DECL_COUNT] = {
    {"vector_add_f32", NULL, true, 4, kVectorAddParams},
    {"write_index_u32", NULL, true, 2, kBufferU32Params},
    {"scale_offset_f64", NULL, true, 4, kScaleOffsetParams},
    {"fault_illegal_address", NULL, true, 2, kBufferU32Params},
};

hrt_status_t load_test_kernels(hrt_hal_device_t* device,
                               hrt_hal_executable_t** out) {
  size_t length = 0;
  char* ptx = read_file("test/gpu/kernels.ptx", &length);
  if (!ptx) {
    return hrt_status_make(HRT_STATUS_NOT_FOUND, "test/gpu/kernels.ptx");
  }
  hrt_hal_executable_params_t params = {
      .format = HRT_HAL_EXECUTABLE_FORMAT_PTX,
      .data = ptx,
      .data_length = length,
      .entry_decl_count = TEST_KERNEL_DECL_COUNT,
      .entry_decls = kTestKernelDecls};
  hrt_status_t status = case_executable(device, &params, out);
  free(ptx);
  return status;
}

hrt_hal_buffer_ref_t range(hrt_hal_buffer_t* buffer, uint64_t offset,
                           uint64_t length) {
  return (hrt_hal_buffer_ref_t){buffer, 0, offset, length};
}

// Releases what is left of `arg`, a write_index_t: the objects its open
// made are deferred on their own.
static void write_index_free(void* arg) {
  write_index_t* w = arg;
  if (w->cb) hrt_hal_command_buffer_release(w->cb);
  free(w);
}

hrt_status_t write_index_open(write_index_t** out) {
  write_index_t* w = calloc(1, sizeof(*w));
  if (!w) return hrt_status_make(HRT_STATUS_RESOURCE_EXHAUSTED, "write_index");
  TEST_DEFER(write_index_free, w);
  *out = w;
  HRT_RETURN_IF_ERROR(case_device("cuda", &w->device));
  HRT_RETURN_IF_ERROR(load_test_kernels(w->device, &w->executable));
  uint32_t ordinal = 0;
  HRT_RETURN_IF_ERROR(
      hrt_hal_executable_lookup(w->executable, "write_index_u32", &ordinal));
  HRT_RETURN_IF_ERROR(case_buffer(w->device, 64, NULL, &w->buffer));
  w->binding = whole(w->buffer);
  w->n = 16;
  w->dispatch = (hrt_hal_dispatch_t){w->executable, ordinal, {1, 1, 1},
                                     {16, 1, 1},    1,       &w->n,
                                     1,             &w->binding, 0};
  return HRT_OK;
}

hrt_status_t write_index_record(write_index_t* w) {
  if (w->cb) hrt_hal_command_buffer_release(w->cb);
  w->cb = NULL;
  HRT_RETURN_IF_ERROR(hrt_hal_command_buffer_create(w->device, &w->cb));
  HRT_RETURN_IF_ERROR(hrt_hal_command_buffer_dispatch(w->cb, &w->dispatch));
  hrt_hal_command_buffer_finalize(w->cb);
  return HRT_OK;
}

hrt_status_t write_index_run(write_index_t* w) {
  HRT_RETURN_IF_ERROR(run(w->device, w->cb, NULL, 0));
  uint32_t out[16];
  HRT_RETURN_IF_ERROR(read_back(w->device, w->buffer, out));
  for (uint32_t i = 0; i < 16; ++i) {
    if (out[i] != i) {
      return hrt_status_make(HRT_STATUS_INTERNAL, "element %u is %u", i,
                             out[i]);
    }
  }
  return HRT_OK;
}

//===----------------------------------------------------------------------===//
// The fake: held streams, waits, memory
//===----------------------------------------------------------------------===//

static void release_streams_(void* unused) {
  (void)unused;
  release_streams();
}

void hold_streams(void) {
  g_cuda.hold_streams(1);
  TEST_DEFER(release_streams_, NULL);
}

void release_streams(void) { g_cuda.hold_streams(0); }

static void release_stream_(void* serial) {
  release_stream((int)(intptr_t)serial);
}

void hold_stream(int serial) {
  g_cuda.hold_stream(serial, 1);
  TEST_DEFER(release_stream_, (void*)(intptr_t)serial);
}

void release_stream(int serial) { g_cuda.hold_stream(serial, 0); }

void wait_for_queued(int count) {
  int64_t deadline = hrt_time_now_ns() + 10000000000LL;
  while (g_cuda.queued_operations() < count && hrt_time_now_ns() < deadline) {
    struct timespec pause = {0, 1000000};
    nanosleep(&pause, NULL);
  }
}

void wait_for_no_devices(void) {
  int64_t deadline = hrt_time_now_ns() + 10000000000LL;
  while (hrt_live_count(HRT_LIVE_DEVICE) != 0 && hrt_time_now_ns() < deadline) {
    struct timespec pause = {0, 1000000};
    nanosleep(&pause, NULL);
  }
}

fakecuda_memory_t fake_memory(void) {
  fakecuda_memory_t memory;
  g_cuda.memory(&memory);
  return memory;
}

long long wait_for_allocations(long long count) {
  int64_t deadline = hrt_time_now_ns() + 5000000000LL;
  while (fake_memory().allocations != count && hrt_time_now_ns() < deadline) {
    struct timespec pause = {0, 1000000};
    nanosleep(&pause, NULL);
  }
  return fake_memory().allocations;
}

hrt_status_t make_device_with_pools(bool pools, hrt_hal_device_t** out) {
  if (!pools) setenv("FAKECUDA_NO_MEMORY_POOLS", "1", 1);
  hrt_status_t status = case_device("cuda", out);
  unsetenv("FAKECUDA_NO_MEMORY_POOLS");
  return status;
}
