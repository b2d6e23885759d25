// The CUDA device end to end, against the fake driver library
// (test/support/fakecuda, the default: HRT_TEST_FAKECUDA or libfakecuda.so
// beside this binary) or, with HRT_TEST_REAL_CUDA=1, against the real
// libcuda on a GPU (test/gpu/run.sh). Cases that need the fake's fault
// injection say "skipped" on a GPU; everything else runs on both, with the
// test kernels of test/gpu/kernels.cu as committed PTX.
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../support/fakecuda/fakecuda.h"
#include "base/live.h"
#include "base/threads.h"
#include "hal/builtin_signatures.h"
#include "hal/cuda/cuda_allocator.h"
#include "hal/cuda/cuda_api.h"
#include "hal/cuda/cuda_driver.h"
#include "hal/cuda/cuda_executable.h"
#include "hal/cuda/cuda_image.h"
#include "hal/cuda/cuda_ptx.h"
#include "hal/cuda/cuda_symbols.h"
#include "hal/driver.h"
#include "test.h"
#include "test_submit.h"
#include "test_summary.h"

//===----------------------------------------------------------------------===//
// Setup: which driver library, and the fake's controls
//===----------------------------------------------------------------------===//

static struct {
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
} g_cuda;

// The fake's own entry points, for the cases that check a rule of the
// driver by making a call halrt never makes (resolved by cuda_setup).
static struct {
#define FAKE_ENTRY(name, params) hrt_cu_result_t(*name) params;
#define FAKE_ENTRY_EITHER(field, newer, older, params) FAKE_ENTRY(field, params)
  HRT_CUDA_SYMBOLS(FAKE_ENTRY, FAKE_ENTRY, FAKE_ENTRY_EITHER)
#undef FAKE_ENTRY_EITHER
#undef FAKE_ENTRY
} g_cu;

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

// Chooses the library before anything loads it (loading happens once per
// process). Called first by every case; the first call decides.
static bool cuda_setup(void) {
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
static char* read_file(const char* path, size_t* out_length) {
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

// The parameters of the test kernels, declared: scale_offset_f64's int64
// and double scalars do not follow the inferred rule, so the PTX of
// test/gpu/kernels.cu loads only with declarations.
#define B HRT_HAL_PARAM_BUFFER
static const hrt_hal_param_type_t kVectorAddParams[] = {B, B, B,
                                                        HRT_HAL_PARAM_U32};
static const hrt_hal_param_type_t kBufferU32Params[] = {B, HRT_HAL_PARAM_U32};
static const hrt_hal_param_type_t kScaleOffsetParams[] = {B, HRT_HAL_PARAM_I64,
                                                          HRT_HAL_PARAM_F64, B};
#undef B
static const hrt_hal_entry_decl_t kTestKernelDecls[] = {
    {"vector_add_f32", NULL, true, 4, kVectorAddParams},
    {"write_index_u32", NULL, true, 2, kBufferU32Params},
    {"scale_offset_f64", NULL, true, 4, kScaleOffsetParams},
    {"fault_illegal_address", NULL, true, 2, kBufferU32Params},
};
#define TEST_KERNEL_DECL_COUNT \
  (uint32_t)(sizeof(kTestKernelDecls) / sizeof(kTestKernelDecls[0]))

// The test kernels (test/gpu/kernels.ptx) as an executable, declared.
static hrt_status_t load_test_kernels(hrt_hal_device_t* device,
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
  hrt_status_t status = hrt_hal_device_create_executable(device, &params, out);
  free(ptx);
  return status;
}

//===----------------------------------------------------------------------===//
// Buffers and random data
//===----------------------------------------------------------------------===//

static hrt_hal_buffer_ref_t range(hrt_hal_buffer_t* buffer, uint64_t offset,
                                  uint64_t length) {
  return (hrt_hal_buffer_ref_t){buffer, 0, offset, length};
}

static uint32_t g_random = 12345;

static uint32_t random_u32(void) {
  g_random = g_random * 1664525u + 1013904223u;
  return g_random ^ (g_random >> 16);
}

//===----------------------------------------------------------------------===//
// Availability (child processes: the library is chosen once per process)
//===----------------------------------------------------------------------===//

// Runs the cuda probe in a child with HALRT_CUDA_LIBRARY=`library` (and
// FAKECUDA_DEVICE_COUNT=`devices` when not NULL); returns what it reported:
// "<code name>: <message>", and which driver `auto` picked.
static void probe_in_child(const char* library, const char* devices, char* out,
                           size_t size) {
  int pipe_fds[2];
  out[0] = 0;
  if (pipe(pipe_fds) != 0) return;
  pid_t pid = fork();
  if (pid == 0) {
    close(pipe_fds[0]);
    setenv("HALRT_CUDA_LIBRARY", library, 1);
    if (devices) setenv("FAKECUDA_DEVICE_COUNT", devices, 1);
    hrt_status_t status = hrt_cuda_driver.probe();
    hrt_hal_device_t* device = NULL;
    hrt_status_t created = make_device("auto", &device);
    char text[1200];
    int length = snprintf(text, sizeof(text), "%s: %s [auto=%s]",
                          hrt_status_code_name(hrt_status_code(status)),
                          hrt_status_message(status),
                          created == HRT_OK ? device->info.driver : "failed");
    if (write(pipe_fds[1], text, (size_t)length) != length) _exit(2);
    _exit(0);
  }
  close(pipe_fds[1]);
  ssize_t total = 0, n = 0;
  while (total < (ssize_t)size - 1 &&
         (n = read(pipe_fds[0], out + total, size - 1 - (size_t)total)) > 0) {
    total += n;
  }
  out[total > 0 ? total : 0] = 0;
  close(pipe_fds[0]);
  int child_status = 0;
  waitpid(pid, &child_status, 0);
}

static void cuda_is_unavailable_with_the_reason(void) {
  CUDA_SETUP();
  char report[1300];
  probe_in_child("/nonexistent/libcuda.so.1", NULL, report, sizeof(report));
  printf("  missing library: %s\n", report);
  CHECK(strstr(report,
               "UNAVAILABLE: CUDA is not usable: cannot load "
               "/nonexistent/libcuda.so.1") == report);
  CHECK(strstr(report, "[auto=local-task]") != NULL);
  if (g_cuda.fake) {
    probe_in_child(getenv("HALRT_CUDA_LIBRARY"), "0", report, sizeof(report));
    printf("  no device: %s\n", report);
    CHECK(strstr(report, "UNAVAILABLE: CUDA is not usable: no CUDA device") ==
          report);
    CHECK(strstr(report, "[auto=local-task]") != NULL);
  }
  // A library without the entry points halrt needs (the kernel library of
  // the CPU tests is a shared object without any of them).
  char other[1100];
  snprintf(other, sizeof(other), "%s/kernels_good.so",
           getenv("HRT_TEST_KERNEL_DIR") ? getenv("HRT_TEST_KERNEL_DIR") : ".");
  if (access(other, R_OK) == 0) {
    probe_in_child(other, NULL, report, sizeof(report));
    printf("  not a driver: %s\n", report);
    CHECK(strstr(report, "lacks cuInit") != NULL);
  }
  const char* stub = "/usr/local/cuda/lib64/stubs/libcuda.so";
  if (access(stub, R_OK) == 0) {
    probe_in_child(stub, NULL, report, sizeof(report));
    printf("  stub library: %s\n", report);
    // The stub cannot name its own errors either: halrt's words are used.
    CHECK(strcmp(report,
                 "UNAVAILABLE: CUDA is not usable: cuInit failed: "
                 "CUDA_ERROR_STUB_LIBRARY (the CUDA toolkit's stub library "
                 "was loaded, not the NVIDIA driver) [auto=local-task]") == 0);
  }
}

// Resolves the table from `path`; *out_entry is the address that fills the
// cuEventElapsedTime field, *out_v2 / *out_v1 the addresses of the two
// exported names (NULL when absent).
static void elapsed_time_entry(const char* path, void** out_entry,
                               void** out_v2, void** out_v1) {
  void* handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  CHECK(handle != NULL);
  *out_v2 = dlsym(handle, "cuEventElapsedTime_v2");
  *out_v1 = dlsym(handle, "cuEventElapsedTime");
  hrt_dynlib_t* library = NULL;
  CHECK_OK(hrt_dynlib_open(&path, 1, &library));
  hrt_cuda_symbols_t symbols;
  memset(&symbols, 0, sizeof(symbols));
  CHECK_OK(hrt_cuda_symbols_resolve(library, &symbols));
  memcpy(out_entry, &symbols.cuEventElapsedTime, sizeof(*out_entry));
  hrt_dynlib_close(library);
  dlclose(handle);  // only compared afterwards, never called
}

// cuda.h 12.8+ maps cuEventElapsedTime to cuEventElapsedTime_v2; drivers
// before 12.8 export only the old name.
static void elapsed_time_prefers_the_v2_name_and_falls_back(void) {
  FAKE_ONLY();
  const char* fake = getenv("HALRT_CUDA_LIBRARY");
  void* v2 = NULL;
  void* v1 = NULL;
  void* entry = NULL;
  elapsed_time_entry(fake, &entry, &v2, &v1);
  CHECK(v2 != NULL && v1 != NULL && v2 != v1);
  CHECK(entry == v2);

  char old[1200];
  snprintf(old, sizeof(old), "%s", fake);
  char* slash = strrchr(old, '/');
  snprintf(slash ? slash + 1 : old,
           sizeof(old) - (size_t)(slash ? slash + 1 - old : 0),
           "libfakecuda_before_12_8.so");
  elapsed_time_entry(old, &entry, &v2, &v1);
  CHECK(v2 == NULL && v1 != NULL);
  CHECK(entry == v1);
}

// The sticky list is exactly cuda.h's "the process must be terminated and
// relaunched" codes; a few more lose the device without being sticky.
static void sticky_results_match_cuda_h(void) {
  static const int sticky[] = {226, 700, 702, 714, 715, 716,
                               717, 718, 719, 721, 810, 911};
  static const int also_lost[] = {4, 214, 220, 709, 710};
  int fatal_count = 0;
  int lost_count = 0;
  for (int result = 0; result <= 1000; ++result) {
    bool expect_fatal = false;
    bool expect_lost = false;
    for (size_t i = 0; i < sizeof(sticky) / sizeof(sticky[0]); ++i) {
      if (sticky[i] == result) expect_fatal = expect_lost = true;
    }
    for (size_t i = 0; i < sizeof(also_lost) / sizeof(also_lost[0]); ++i) {
      if (also_lost[i] == result) expect_lost = true;
    }
    if (hrt_cuda_result_is_fatal(result) != expect_fatal) {
      printf("  is_fatal(%d) is %d\n", result, !expect_fatal);
      CHECK(false);
    }
    if (hrt_cuda_result_loses_device(result) != expect_lost) {
      printf("  loses_device(%d) is %d\n", result, !expect_lost);
      CHECK(false);
    }
    fatal_count += hrt_cuda_result_is_fatal(result);
    lost_count += hrt_cuda_result_loses_device(result);
  }
  CHECK_EQ_INT(fatal_count, 12);
  CHECK_EQ_INT(lost_count, 17);
}

// Status codes of the results that decide whether CUDA is usable at all:
// 36 is the driver's "needs a newer driver"; 35 is no driver API code.
static void driver_results_map_to_status_codes(void) {
  hrt_cuda_symbols_t none;
  memset(&none, 0, sizeof(none));  // no cuGetErrorName / cuGetErrorString
  static const struct {
    int result;
    hrt_status_code_t code;
  } cases[] = {
      {HRT_CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER, HRT_STATUS_UNAVAILABLE},
      {35, HRT_STATUS_INTERNAL},
      {HRT_CUDA_ERROR_STUB_LIBRARY, HRT_STATUS_UNAVAILABLE},
      {HRT_CUDA_ERROR_MPS_CLIENT_TERMINATED, HRT_STATUS_DEVICE_LOST},
      {HRT_CUDA_ERROR_EXTERNAL_DEVICE, HRT_STATUS_DEVICE_LOST},
      {HRT_CUDA_ERROR_ASSERT, HRT_STATUS_DEVICE_LOST},
      {HRT_CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, HRT_STATUS_RESOURCE_EXHAUSTED},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
    hrt_status_t status = hrt_cuda_result_status(&none, cases[i].result, "cuX");
    CHECK(status != HRT_OK);
    if (status == HRT_OK) continue;
    if (hrt_status_code(status) != cases[i].code) {
      printf("  %d: %s\n", cases[i].result, hrt_status_message(status));
    }
    CHECK_EQ_INT(hrt_status_code(status), cases[i].code);
    hrt_status_free(status);
  }
}

// Without cuGetErrorName / cuGetErrorString halrt still names the codes
// that explain an unusable driver and the sticky ones.
static void results_are_named_without_the_driver(void) {
  hrt_cuda_symbols_t none;
  memset(&none, 0, sizeof(none));
  static const struct {
    int result;
    const char* message;
  } cases[] = {
      {34, "cuInit failed: CUDA_ERROR_STUB_LIBRARY (the CUDA toolkit's stub "
           "library was loaded, not the NVIDIA driver)"},
      {36, "cuInit failed: CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER (the "
           "installed NVIDIA driver is too old for this call)"},
      {100, "cuInit failed: CUDA_ERROR_NO_DEVICE (the driver found no "
            "CUDA-capable GPU)"},
      {803, "cuInit failed: CUDA_ERROR_SYSTEM_DRIVER_MISMATCH (the NVIDIA "
            "kernel driver and libcuda are from different driver releases)"},
      {804, "cuInit failed: CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE (the "
            "CUDA forward-compatibility driver does not support this GPU)"},
      {999, "cuInit failed: CUDA_ERROR_UNKNOWN (the driver failed for a "
            "reason it does not report)"},
      {700, "cuInit failed: CUDA_ERROR_ILLEGAL_ADDRESS (no description)"},
      {810, "cuInit failed: CUDA_ERROR_MPS_CLIENT_TERMINATED (no description)"},
      {35, "cuInit failed: CUresult 35 (no description)"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
    hrt_status_t status =
        hrt_cuda_result_status(&none, cases[i].result, "cuInit");
    CHECK(status != HRT_OK);
    if (status == HRT_OK) continue;
    if (strcmp(hrt_status_message(status), cases[i].message) != 0) {
      printf("  got: %s\n", hrt_status_message(status));
      CHECK(false);
    }
    hrt_status_free(status);
  }
}

//===----------------------------------------------------------------------===//
// Device, memory and commands
//===----------------------------------------------------------------------===//

static void device_info_describes_the_gpu(void) {
  CUDA_SETUP();
  CHECK_OK(hrt_cuda_driver.probe());
  hrt_hal_device_t* device = NULL;
  CHECK_OK(make_device("auto", &device));
  const hrt_hal_device_info_t* info = hrt_hal_device_info(device);
  printf("  %s: %s, %.1f GiB, compute %u.%u, %u SMs, driver %d\n", info->uri,
         info->name, (double)info->total_memory / (1 << 30),
         info->compute_capability[0], info->compute_capability[1],
         info->multiprocessor_count, info->driver_version);
  CHECK(strcmp(info->driver, "cuda") == 0);
  CHECK(strcmp(info->kind, "cuda") == 0);
  CHECK(strcmp(info->uri, "cuda://0") == 0);
  CHECK(info->name[0] != 0);
  CHECK(info->total_memory > 0);
  CHECK(info->compute_capability[0] >= 7);
  CHECK(info->multiprocessor_count > 0);
  CHECK(info->driver_version >= 11000);
  if (g_cuda.fake) {
    CHECK(strcmp(info->name, "fakecuda device 0") == 0);
    CHECK_EQ_INT(info->total_memory, 1 << 30);
    CHECK_EQ_INT(info->compute_capability[0], 9);
    CHECK_EQ_INT(info->multiprocessor_count, 4);
    CHECK_EQ_INT(info->driver_version, 13000);
    hrt_hal_device_t* second = NULL;
    CHECK_OK(make_device("cuda://1", &second));
    CHECK(strcmp(hrt_hal_device_info(second)->uri, "cuda://1") == 0);
    CHECK(strcmp(hrt_hal_device_info(second)->name, "fakecuda device 1") == 0);
    hrt_hal_device_release(second);
    CHECK_STATUS(make_device("cuda://2", &second), HRT_STATUS_INVALID_ARGUMENT,
                 "there are 2 CUDA devices (ordinals 0 to 1)");
  }
  CHECK_STATUS(make_device("cuda://64", &device), HRT_STATUS_INVALID_ARGUMENT,
               "'cuda://64'");
  CHECK_STATUS(make_device("cuda?streams=2", &device),
               HRT_STATUS_INVALID_ARGUMENT, "no parameter 'streams'");
  hrt_hal_device_release(device);
}

static void completions_run_off_the_submitting_thread(void) {
  CUDA_SETUP();
  hrt_hal_device_t* device = NULL;
  CHECK_OK(make_device("cuda", &device));
  hrt_hal_buffer_t* buffer = NULL;
  CHECK_OK(hrt_hal_device_allocate_buffer(device, 16, NULL, &buffer));
  CHECK(buffer->host_ptr == NULL);
  hrt_hal_command_buffer_t* cb = NULL;
  CHECK_OK(hrt_hal_command_buffer_create(device, &cb));
  uint8_t out[16] = {0};
  CHECK_OK(hrt_hal_command_buffer_fill(cb, whole(buffer), 0xAB, 1));
  CHECK_OK(hrt_hal_command_buffer_read(cb, whole(buffer), out));
  hrt_hal_command_buffer_finalize(cb);
  completion_t completion;
  CHECK_OK(submit(device, cb, NULL, 0, &completion));
  CHECK_OK(completion_wait(&completion));
  CHECK(!pthread_equal(completion.thread, pthread_self()));
  CHECK_EQ_INT(out[0], 0xAB);
  CHECK_EQ_INT(out[15], 0xAB);
  hrt_hal_command_buffer_release(cb);
  hrt_hal_buffer_release(buffer);
  hrt_hal_device_release(device);
}

// Every command on ranges at awkward offsets, against a host model of the
// same bytes.
static void commands_round_trip_bytes(void) {
  CUDA_SETUP();
  enum { SIZE = 256 };
  hrt_hal_device_t* device = NULL;
  CHECK_OK(make_device("cuda", &device));
  uint8_t initial[SIZE], model[SIZE], out[SIZE], zeros[SIZE];
  for (int i = 0; i < SIZE; ++i) initial[i] = (uint8_t)(i * 7 + 1);
  memcpy(model, initial, SIZE);
  hrt_hal_buffer_t* buffer = NULL;
  hrt_hal_buffer_t* zeroed = NULL;
  hrt_hal_buffer_t* empty = NULL;
  CHECK_OK(hrt_hal_device_allocate_buffer(device, SIZE, initial, &buffer));
  CHECK_OK(hrt_hal_device_allocate_buffer(device, SIZE, NULL, &zeroed));
  CHECK_OK(hrt_hal_device_allocate_buffer(device, 0, NULL, &empty));
  hrt_hal_command_buffer_t* cb = NULL;
  CHECK_OK(hrt_hal_command_buffer_create(device, &cb));
  // Fills: every pattern length, aligned and not.
  static const struct {
    uint32_t offset, length, pattern_length;
    uint64_t pattern;
  } fills[] = {
      {0, 16, 1, 0x5A},
      {17, 10, 2, 0xBEEF},
      {32, 12, 2, 0x1234},
      {46, 12, 4, 0x01020304},
      {64, 16, 4, 0xA1B2C3D4},
      {82, 24, 8, 0x1122334455667788ull},
      {112, 32, 8, 0x0102030405060708ull},
      {148, 16, 8, 0x7777777777777777ull},
      {170, 8, 4, 0x99999999},
  };
  for (size_t f = 0; f < sizeof(fills) / sizeof(fills[0]); ++f) {
    CHECK_OK(hrt_hal_command_buffer_fill(
        cb, range(buffer, fills[f].offset, fills[f].length), fills[f].pattern,
        fills[f].pattern_length));
    for (uint32_t i = 0; i < fills[f].length; ++i) {
      model[fills[f].offset + i] =
          (uint8_t)(fills[f].pattern >> (8 * (i % fills[f].pattern_length)));
    }
  }
  const uint8_t patch[5] = {200, 201, 202, 203, 204};
  CHECK_OK(hrt_hal_command_buffer_update(cb, patch, 5, range(buffer, 181, 5)));
  memcpy(model + 181, patch, 5);
  CHECK_OK(hrt_hal_command_buffer_barrier(cb));
  // Copies: disjoint, then overlapping both ways (memmove semantics).
  CHECK_OK(hrt_hal_command_buffer_copy(cb, range(buffer, 0, 40),
                                       range(buffer, 200, 40)));
  memmove(model + 200, model, 40);
  CHECK_OK(hrt_hal_command_buffer_copy(cb, range(buffer, 10, 60),
                                       range(buffer, 13, 60)));
  memmove(model + 13, model + 10, 60);
  CHECK_OK(hrt_hal_command_buffer_copy(cb, range(buffer, 100, 50),
                                       range(buffer, 91, 50)));
  memmove(model + 91, model + 100, 50);
  CHECK_OK(
      hrt_hal_command_buffer_copy(cb, range(buffer, 0, 0), range(empty, 0, 0)));
  CHECK_OK(hrt_hal_command_buffer_read(cb, whole(buffer), out));
  CHECK_OK(hrt_hal_command_buffer_read(cb, whole(zeroed), zeros));
  CHECK_OK(hrt_hal_command_buffer_read(cb, whole(empty), out));
  hrt_hal_command_buffer_finalize(cb);
  memset(zeros, 0xEE, SIZE);
  CHECK_OK(run(device, cb, NULL, 0));
  int wrong = 0, not_zero = 0;
  for (int i = 0; i < SIZE; ++i) {
    if (out[i] != model[i]) {
      if (wrong < 5) {
        fprintf(stderr, "byte %d: %u, expected %u\n", i, out[i], model[i]);
      }
      ++wrong;
    }
    not_zero += zeros[i] != 0;
  }
  CHECK_EQ_INT(wrong, 0);
  CHECK_EQ_INT(not_zero, 0);
  hrt_hal_command_buffer_release(cb);
  hrt_hal_buffer_release(buffer);
  hrt_hal_buffer_release(zeroed);
  hrt_hal_buffer_release(empty);
  hrt_hal_device_release(device);
}

// Big fills go through the 2-D memsets too (GPU-sized row counts).
static void large_fills_write_every_element(void) {
  CUDA_SETUP();
  enum { COUNT = 4 << 20 };  // 8-byte elements: 32 MiB
  hrt_hal_device_t* device = NULL;
  CHECK_OK(make_device("cuda", &device));
  hrt_hal_buffer_t* buffer = NULL;
  CHECK_OK(
      hrt_hal_device_allocate_buffer(device, COUNT * 8ull + 8, NULL, &buffer));
  uint64_t* out = malloc(COUNT * 8ull + 8);
  CHECK(out != NULL);
  const uint64_t pattern = 0x0123456789ABCDEFull;
  const uint32_t offsets[2] = {0, 4};  // 8-byte aligned, then 4-byte aligned
  for (int k = 0; k < 2; ++k) {
    hrt_hal_command_buffer_t* cb = NULL;
    CHECK_OK(hrt_hal_command_buffer_create(device, &cb));
    CHECK_OK(hrt_hal_command_buffer_fill(cb, whole(buffer), 0, 1));
    CHECK_OK(hrt_hal_command_buffer_fill(
        cb, range(buffer, offsets[k], COUNT * 8ull), pattern, 8));
    CHECK_OK(hrt_hal_command_buffer_read(cb, whole(buffer), out));
    hrt_hal_command_buffer_finalize(cb);
    CHECK_OK(run(device, cb, NULL, 0));
    hrt_hal_command_buffer_release(cb);
    int wrong = 0;
    for (uint32_t i = 0; i < COUNT; ++i) {
      uint64_t value = 0;
      memcpy(&value, (char*)out + offsets[k] + i * 8ull, 8);
      wrong += value != pattern;
    }
    CHECK_EQ_INT(wrong, 0);
  }
  free(out);
  hrt_hal_buffer_release(buffer);
  hrt_hal_device_release(device);
}

//===----------------------------------------------------------------------===//
// Built-in kernels against the CPU device
//===----------------------------------------------------------------------===//

typedef struct {
  const char* name;
  uint32_t constants[3];
  uint32_t grid[3];
} builtin_case_t;

static const builtin_case_t kBuiltinCases[] = {
    {"fill_u32", {1000, 0xDEADBEEF}, {3, 1, 1}},
    {"copy_u8", {1001}, {5, 1, 1}},
    {"add_f32", {4099}, {7, 2, 1}},
    {"sub_f32", {4099}, {1, 1, 1}},
    {"mul_f32", {4099}, {64, 1, 1}},
    {"div_f32", {4099}, {7, 1, 3}},
    {"max_f32", {4099}, {7, 1, 1}},
    {"add_i32", {3001}, {7, 1, 1}},
    {"sub_i32", {3001}, {2, 2, 2}},
    {"mul_i32", {3001}, {9, 1, 1}},
    {"div_i32", {3001}, {9, 1, 1}},
    {"max_i32", {3001}, {9, 1, 1}},
    {"axpy_f32", {3000, 0x3FC00000 /* 1.5 */}, {4, 1, 1}},
    {"relu_f32", {2500}, {1, 1, 1}},
    {"matmul_f32", {37, 70, 45}, {3, 2, 1}},
    {"matmul_f32", {64, 300, 33}, {1, 1, 1}},
    {"matmul_f32", {3, 0, 5}, {2, 2, 1}},
    {"softmax_rows_f32", {13, 100}, {4, 1, 1}},
    {"softmax_rows_f32", {3, 1000}, {8, 1, 1}},
    {"reduce_sum_f32", {9, 1000}, {2, 1, 1}},
    {"reduce_sum_f32", {4, 0}, {1, 1, 1}},
    {"add_f32", {0}, {1, 1, 1}},
};

// Inputs: random values of the binding's type, with edge cases mixed in
// (NaN and infinity only when `specials`: a reduction over them is all NaN);
// outputs: 0xFF bytes (NaN / -1), so untouched elements show.
static void fill_binding(const hrt_builtin_binding_t* binding, bool specials,
                         uint8_t* data, uint64_t bytes) {
  if (binding->written) {
    memset(data, 0xFF, bytes);
    return;
  }
  for (uint64_t i = 0; i + 4 <= bytes; i += 4) {
    uint32_t r = random_u32();
    uint32_t value = r;
    if (!binding->any_type &&
        binding->element_type == HRT_HAL_ELEMENT_TYPE_F32) {
      float f = ((float)(r % 20001) - 10000.0f) / 1000.0f;
      if (r % 97 == 0) f = 0.0f;
      if (r % 101 == 0) f = -0.0f;
      if (specials && r % 211 == 0) f = NAN;
      if (specials && r % 223 == 0) f = INFINITY;
      memcpy(&value, &f, 4);
    } else if (!binding->any_type) {
      static const uint32_t kEdges[] = {0, 1, 0xFFFFFFFF, 0x80000000,
                                        0x7FFFFFFF};
      if (r % 13 == 0) value = kEdges[(r >> 8) % 5];
    }
    memcpy(data + i, &value, 4);
  }
  for (uint64_t i = bytes & ~(uint64_t)3; i < bytes; ++i) {
    data[i] = (uint8_t)random_u32();
  }
}

// Runs built-in `test->name` on `device` over bindings initialised from
// `data` (one array per binding, `sizes` bytes) and reads them all back.
static hrt_status_t run_builtin(hrt_hal_device_t* device,
                                hrt_hal_executable_t* executable,
                                const builtin_case_t* test,
                                const hrt_builtin_signature_t* signature,
                                uint8_t** data, const uint64_t* sizes) {
  uint32_t ordinal = 0;
  HRT_RETURN_IF_ERROR(
      hrt_hal_executable_lookup(executable, test->name, &ordinal));
  hrt_hal_buffer_t* buffers[HRT_BUILTIN_MAX_BINDINGS] = {NULL};
  hrt_hal_buffer_ref_t refs[HRT_BUILTIN_MAX_BINDINGS];
  hrt_status_t status = HRT_OK;
  for (uint32_t i = 0; i < signature->binding_count && status == HRT_OK; ++i) {
    status =
        hrt_hal_device_allocate_buffer(device, sizes[i], data[i], &buffers[i]);
    if (status == HRT_OK) refs[i] = whole(buffers[i]);
  }
  hrt_hal_command_buffer_t* cb = NULL;
  if (status == HRT_OK) status = hrt_hal_command_buffer_create(device, &cb);
  if (status == HRT_OK) {
    hrt_hal_dispatch_t dispatch = {
        executable,
        ordinal,
        {test->grid[0], test->grid[1], test->grid[2]},
        {64, 1, 1},
        signature->constant_count,
        test->constants,
        signature->binding_count,
        refs,
        0};
    status = hrt_hal_command_buffer_dispatch(cb, &dispatch);
  }
  for (uint32_t i = 0; i < signature->binding_count && status == HRT_OK; ++i) {
    status = hrt_hal_command_buffer_read(cb, refs[i], data[i]);
  }
  if (status == HRT_OK) {
    hrt_hal_command_buffer_finalize(cb);
    status = run(device, cb, NULL, 0);
  }
  hrt_hal_command_buffer_release(cb);
  for (uint32_t i = 0; i < signature->binding_count; ++i) {
    hrt_hal_buffer_release(buffers[i]);
  }
  return status;
}

// |a - b| within `tolerance`, or the same bits, or both NaN.
static bool close_f32(float a, float b, double tolerance) {
  if (a != a || b != b) return a != a && b != b;
  if (memcmp(&a, &b, 4) == 0 || a == b) return true;
  return fabs((double)a - (double)b) <= tolerance;
}

// Whether the case's kernel is elementwise (not matmul, softmax, reduce).
static bool is_elementwise(const char* name) {
  return strncmp(name, "matmul", 6) != 0 && strncmp(name, "softmax", 7) != 0 &&
         strncmp(name, "reduce", 6) != 0;
}

// How far the device may be from the CPU's `expected` output `element`
// (docs/kernels.md: matmul, softmax and reduce agree to rounding; the
// others exactly).
static double tolerance_for(const builtin_case_t* test, uint8_t* const* data,
                            uint64_t element, float expected) {
  const double eps = 1.0 / (1 << 23);
  if (strcmp(test->name, "matmul_f32") == 0) {
    const uint32_t K = test->constants[1], N = test->constants[2];
    const float* a = (const float*)data[0];
    const float* b = (const float*)data[1];
    double magnitude = 0;
    for (uint32_t k = 0; k < K; ++k) {
      magnitude += fabs((double)a[(element / N) * K + k] *
                        (double)b[k * N + element % N]);
    }
    return 2.0 * K * eps * magnitude;
  }
  if (strcmp(test->name, "reduce_sum_f32") == 0) {
    const uint32_t cols = test->constants[1];
    const float* x = (const float*)data[0];
    double magnitude = 0;
    for (uint32_t j = 0; j < cols; ++j)
      magnitude += fabs(x[element * cols + j]);
    return 2.0 * cols * eps * magnitude;
  }
  if (strcmp(test->name, "softmax_rows_f32") == 0) {
    return (2.0 * test->constants[1] + 8) * eps * fabs(expected);
  }
  return 0;
}

static void builtin_kernels_match_the_cpu_device(void) {
  CUDA_SETUP();
  hrt_hal_device_t* devices[2] = {NULL, NULL};
  hrt_hal_executable_t* executables[2] = {NULL, NULL};
  CHECK_OK(make_device("local-sync", &devices[0]));
  CHECK_OK(make_device("cuda", &devices[1]));
  hrt_hal_executable_params_t params = {.format =
                                            HRT_HAL_EXECUTABLE_FORMAT_BUILTIN};
  for (int d = 0; d < 2; ++d) {
    CHECK_OK(
        hrt_hal_device_create_executable(devices[d], &params, &executables[d]));
  }
  CHECK_EQ_INT(executables[1]->entry_count, executables[0]->entry_count);
  for (uint32_t i = 0; i < executables[1]->entry_count; ++i) {
    const hrt_hal_executable_entry_t* entry = &executables[1]->entries[i];
    const hrt_builtin_signature_t* signature =
        hrt_builtin_signature_find(entry->name);
    CHECK(signature != NULL);
    CHECK_EQ_INT(entry->binding_count, signature->binding_count);
    CHECK_EQ_INT(entry->constant_count, signature->constant_count);
  }
  int failures = 0;
  for (size_t c = 0; c < sizeof(kBuiltinCases) / sizeof(kBuiltinCases[0]);
       ++c) {
    const builtin_case_t* test = &kBuiltinCases[c];
    const hrt_builtin_signature_t* signature =
        hrt_builtin_signature_find(test->name);
    CHECK(signature != NULL);
    uint8_t* data[2][HRT_BUILTIN_MAX_BINDINGS] = {{NULL}};
    uint8_t* inputs[HRT_BUILTIN_MAX_BINDINGS] = {NULL};
    uint64_t sizes[HRT_BUILTIN_MAX_BINDINGS] = {0};
    for (uint32_t b = 0; b < signature->binding_count; ++b) {
      sizes[b] = hrt_builtin_binding_min_bytes(signature, b, test->constants);
      for (int d = 0; d < 2; ++d) data[d][b] = malloc(sizes[b] + 1);
      inputs[b] = malloc(sizes[b] + 1);
      fill_binding(&signature->bindings[b], is_elementwise(test->name),
                   data[0][b], sizes[b]);
      memcpy(data[1][b], data[0][b], sizes[b]);
      memcpy(inputs[b], data[0][b], sizes[b]);
    }
    hrt_status_t statuses[2];
    for (int d = 0; d < 2; ++d) {
      statuses[d] = run_builtin(devices[d], executables[d], test, signature,
                                data[d], sizes);
    }
    int wrong = 0;
    if (statuses[0] != HRT_OK || statuses[1] != HRT_OK) {
      fprintf(stderr, "%s: cpu %s, cuda %s\n", test->name,
              hrt_status_message(statuses[0]), hrt_status_message(statuses[1]));
      ++wrong;
    }
    hrt_status_free(statuses[0]);
    hrt_status_free(statuses[1]);
    for (uint32_t b = 0; b < signature->binding_count && !wrong; ++b) {
      const hrt_builtin_binding_t* binding = &signature->bindings[b];
      const bool floats = !binding->any_type &&
                          binding->element_type == HRT_HAL_ELEMENT_TYPE_F32;
      for (uint64_t e = 0; floats && e < sizes[b] / 4; ++e) {
        float x, y;
        memcpy(&x, data[0][b] + e * 4, 4);
        memcpy(&y, data[1][b] + e * 4, 4);
        double tolerance =
            binding->written ? tolerance_for(test, inputs, e, x) : 0;
        if (!close_f32(x, y, tolerance)) {
          if (wrong < 3) {
            fprintf(stderr, "%s binding %u element %llu: cpu %.9g cuda %.9g\n",
                    test->name, b, (unsigned long long)e, x, y);
          }
          ++wrong;
        }
      }
      if (!floats && memcmp(data[0][b], data[1][b], sizes[b]) != 0) {
        fprintf(stderr, "%s binding %u differs\n", test->name, b);
        ++wrong;
      }
    }
    if (wrong) {
      fprintf(stderr, "case %zu (%s) differs\n", c, test->name);
      ++failures;
    }
    for (uint32_t b = 0; b < signature->binding_count; ++b) {
      free(data[0][b]);
      free(data[1][b]);
      free(inputs[b]);
    }
  }
  for (int d = 0; d < 2; ++d) {
    hrt_hal_executable_release(executables[d]);
    hrt_hal_device_release(devices[d]);
  }
  CHECK_EQ_INT(failures, 0);
}

static void builtin_dispatches_are_checked_before_launch(void) {
  CUDA_SETUP();
  hrt_hal_device_t* device = NULL;
  CHECK_OK(make_device("cuda", &device));
  hrt_hal_executable_params_t params = {.format =
                                            HRT_HAL_EXECUTABLE_FORMAT_BUILTIN};
  hrt_hal_executable_t* executable = NULL;
  CHECK_OK(hrt_hal_device_create_executable(device, &params, &executable));
  hrt_hal_buffer_t* small = NULL;
  CHECK_OK(hrt_hal_device_allocate_buffer(device, 64, NULL, &small));
  hrt_hal_buffer_ref_t refs[3] = {whole(small), whole(small), whole(small)};
  uint32_t add = 0, matmul = 0;
  CHECK_OK(hrt_hal_executable_lookup(executable, "add_f32", &add));
  CHECK_OK(hrt_hal_executable_lookup(executable, "matmul_f32", &matmul));
  const uint32_t too_many[1] = {17};
  const uint32_t shape[3] = {2, 2, 2};
  hrt_hal_dispatch_t dispatches[2] = {
      {executable, add, {1, 1, 1}, {1, 1, 1}, 1, too_many, 3, refs, 0},
      {executable, matmul, {1, 1, 2}, {1, 1, 1}, 3, shape, 3, refs, 0},
  };
  const char* expected[2] = {
      "command 0 (dispatch): kernel 'add_f32' of executable 'builtin': "
      "binding 0 has 64 bytes but the constants need 68",
      "command 0 (dispatch): kernel 'matmul_f32' of executable 'builtin' "
      "needs workgroup count[2] == 1, not 2"};
  for (int i = 0; i < 2; ++i) {
    CHECK_STATUS(run_dispatch(device, &dispatches[i]),
                 HRT_STATUS_INVALID_ARGUMENT, expected[i]);
  }
  // The device still works.
  uint32_t out[16];
  CHECK_OK(read_back(device, small, out));
  CHECK_EQ_INT(out[0], 0);
  hrt_hal_buffer_release(small);
  hrt_hal_executable_release(executable);
  hrt_hal_device_release(device);
}

//===----------------------------------------------------------------------===//
// User kernels
//===----------------------------------------------------------------------===//

static void dispatch_spans_many_workgroups(void) {
  CUDA_SETUP();
  enum { N = 100003 };
  hrt_hal_device_t* device = NULL;
  CHECK_OK(make_device("cuda", &device));
  hrt_hal_executable_t* executable = NULL;
  CHECK_OK(load_test_kernels(device, &executable));
  CHECK_EQ_INT(executable->entry_count, 4);
  uint32_t write_index = 0, vector_add = 0;
  CHECK_OK(
      hrt_hal_executable_lookup(executable, "write_index_u32", &write_index));
  CHECK_OK(
      hrt_hal_executable_lookup(executable, "vector_add_f32", &vector_add));
  CHECK_EQ_INT(executable->entries[vector_add].binding_count, 3);
  CHECK_EQ_INT(executable->entries[vector_add].constant_count, 1);
  CHECK_EQ_INT(executable->entries[write_index].binding_count, 1);
  CHECK_EQ_INT(executable->entries[write_index].constant_count, 1);
  // write_index_u32 over a 3-D grid of 3-D blocks writes every element.
  hrt_hal_buffer_t* indices = NULL;
  CHECK_OK(hrt_hal_device_allocate_buffer(device, N * 4, NULL, &indices));
  hrt_hal_buffer_ref_t binding = whole(indices);
  uint32_t n = N;
  hrt_hal_dispatch_t dispatch = {executable, write_index, {7, 3, 2}, {32, 2, 2},
                                 1,          &n,          1,         &binding, 0};
  CHECK_OK(run_dispatch(device, &dispatch));
  uint32_t* out = malloc(N * 4);
  CHECK(out != NULL);
  CHECK_OK(read_back(device, indices, out));
  int wrong = 0;
  for (uint32_t i = 0; i < N; ++i) wrong += out[i] != i;
  CHECK_EQ_INT(wrong, 0);
  // vector_add_f32 covers grid x block threads: one short grid leaves the
  // tail alone (the dispatch means the same as on the GPU).
  float* a = malloc(N * 4);
  float* b = malloc(N * 4);
  CHECK(a && b);
  for (uint32_t i = 0; i < N; ++i) {
    a[i] = (float)i;
    b[i] = 0.5f * (float)i;
  }
  hrt_hal_buffer_t *ba = NULL, *bb = NULL, *bo = NULL;
  CHECK_OK(hrt_hal_device_allocate_buffer(device, N * 4, a, &ba));
  CHECK_OK(hrt_hal_device_allocate_buffer(device, N * 4, b, &bb));
  CHECK_OK(hrt_hal_device_allocate_buffer(device, N * 4, NULL, &bo));
  hrt_hal_buffer_ref_t refs[3] = {whole(ba), whole(bb), whole(bo)};
  const uint32_t blocks = N / 128;  // covers blocks * 128 < N elements
  hrt_hal_dispatch_t add = {
      executable, vector_add, {blocks, 1, 1}, {128, 1, 1}, 1, &n, 3, refs, 0};
  CHECK_OK(run_dispatch(device, &add));
  float* sum = (float*)out;
  CHECK_OK(read_back(device, bo, sum));
  wrong = 0;
  for (uint32_t i = 0; i < N; ++i) {
    float expected = i < blocks * 128 ? a[i] + b[i] : 0.0f;
    wrong += sum[i] != expected;
  }
  CHECK_EQ_INT(wrong, 0);
  free(a);
  free(b);
  free(out);
  hrt_hal_buffer_release(ba);
  hrt_hal_buffer_release(bb);
  hrt_hal_buffer_release(bo);
  hrt_hal_buffer_release(indices);
  hrt_hal_executable_release(executable);
  hrt_hal_device_release(device);
}

static void reused_command_buffer_runs_on_new_bindings(void) {
  CUDA_SETUP();
  enum { N = 10007, SETS = 3 };
  hrt_hal_device_t* device = NULL;
  CHECK_OK(make_device("cuda", &device));
  hrt_hal_executable_params_t params = {.format =
                                            HRT_HAL_EXECUTABLE_FORMAT_BUILTIN};
  hrt_hal_executable_t* executable = NULL;
  CHECK_OK(hrt_hal_device_create_executable(device, &params, &executable));
  hrt_hal_command_buffer_t* cb = NULL;
  CHECK_OK(record_add(device, executable, N, 37, &cb));
  hrt_hal_buffer_t* buffers[SETS][3];
  completion_t completions[SETS];
  float* a = malloc(N * sizeof(float));
  float* b = malloc(N * sizeof(float));
  float* out = malloc(N * sizeof(float));
  CHECK(a && b && out);
  // Submitted back to back without waiting: each output must hold its own
  // inputs' sums, and completions arrive in submission order.
  for (int s = 0; s < SETS; ++s) {
    for (int i = 0; i < N; ++i) {
      a[i] = (float)(i * (s + 1));
      b[i] = (float)(s - i) * 0.5f;
    }
    CHECK_OK(hrt_hal_device_allocate_buffer(device, N * 4, a, &buffers[s][0]));
    CHECK_OK(hrt_hal_device_allocate_buffer(device, N * 4, b, &buffers[s][1]));
    CHECK_OK(
        hrt_hal_device_allocate_buffer(device, N * 4, NULL, &buffers[s][2]));
    hrt_hal_buffer_ref_t table[3] = {whole(buffers[s][0]), whole(buffers[s][1]),
                                     whole(buffers[s][2])};
    CHECK_OK(submit(device, cb, table, 3, &completions[s]));
  }
  int wrong = 0;
  for (int s = 0; s < SETS; ++s) {
    CHECK_OK(completion_wait(&completions[s]));
    CHECK_EQ_INT(completions[s].order, completions[0].order + s);
  }
  for (int s = 0; s < SETS; ++s) {
    CHECK_OK(read_back(device, buffers[s][2], out));
    for (int i = 0; i < N; ++i) {
      float expected = (float)(i * (s + 1)) + (float)(s - i) * 0.5f;
      wrong += out[i] != expected;
    }
    for (int k = 0; k < 3; ++k) hrt_hal_buffer_release(buffers[s][k]);
  }
  CHECK_EQ_INT(wrong, 0);
  free(a);
  free(b);
  free(out);
  hrt_hal_command_buffer_release(cb);
  hrt_hal_executable_release(executable);
  hrt_hal_device_release(device);
}

//===----------------------------------------------------------------------===//
// Traces
//===----------------------------------------------------------------------===//

typedef struct {
  int calls;
  uint32_t values[2][4];  // per call: the first word of up to 4 sources
  uint64_t lengths[2][4];
  uint32_t count[2];
  int null_data;  // a range came without an address
  void* context_seen;
  pthread_t thread;
  int fail;
} trace_record_t;

static hrt_status_t record_trace(void* user_data, void* submission_context,
                                 uint32_t count, const void* const* data,
                                 const uint64_t* lengths) {
  trace_record_t* record = user_data;
  int call = record->calls++;
  record->context_seen = submission_context;
  record->thread = pthread_self();
  if (call < 2) {
    record->count[call] = count;
    for (uint32_t i = 0; i < count && i < 4; ++i) {
      if (!data[i]) record->null_data = 1;
      if (lengths[i] >= 4) memcpy(&record->values[call][i], data[i], 4);
      record->lengths[call][i] = lengths[i];
    }
  }
  if (record->fail) {
    return hrt_status_make(HRT_STATUS_ABORTED, "trace callback refused");
  }
  return HRT_OK;
}

static void traces_deliver_staged_data_after_preceding_work(void) {
  CUDA_SETUP();
  for (int fail = 0; fail < 2; ++fail) {
    hrt_hal_device_t* device = NULL;
    CHECK_OK(make_device("cuda", &device));
    hrt_hal_executable_params_t params = {
        .format = HRT_HAL_EXECUTABLE_FORMAT_BUILTIN};
    hrt_hal_executable_t* executable = NULL;
    CHECK_OK(hrt_hal_device_create_executable(device, &params, &executable));
    uint32_t fill_ordinal = 0;
    CHECK_OK(hrt_hal_executable_lookup(executable, "fill_u32", &fill_ordinal));
    hrt_hal_buffer_t* buffer = NULL;
    hrt_hal_buffer_t* other = NULL;
    const uint32_t initial[2] = {111, 222};
    CHECK_OK(hrt_hal_device_allocate_buffer(device, 16, NULL, &buffer));
    CHECK_OK(hrt_hal_device_allocate_buffer(device, 8, initial, &other));
    hrt_hal_command_buffer_t* cb = NULL;
    CHECK_OK(hrt_hal_command_buffer_create(device, &cb));
    trace_record_t record = {.fail = fail};
    hrt_hal_buffer_ref_t slot = {NULL, 0, 0, HRT_HAL_WHOLE_BUFFER};
    hrt_hal_buffer_ref_t sources[4] = {slot, range(buffer, 8, 8),
                                       range(other, 4, 4), range(other, 8, 0)};
    // A kernel writes the buffer, then the trace must see its result.
    const uint32_t fill_constants[2] = {4, 0x01020304};
    hrt_hal_dispatch_t fill = {executable, fill_ordinal,   {2, 1, 1}, {1, 1, 1},
                               2,          fill_constants, 1,         &slot, 0};
    CHECK_OK(hrt_hal_command_buffer_dispatch(cb, &fill));
    CHECK_OK(
        hrt_hal_command_buffer_trace(cb, sources, 4, record_trace, &record));
    CHECK_OK(hrt_hal_command_buffer_fill(cb, slot, 0x0A0B0C0D, 4));
    CHECK_OK(
        hrt_hal_command_buffer_trace(cb, sources, 1, record_trace, &record));
    uint32_t after[4] = {0, 0, 0, 0};
    CHECK_OK(hrt_hal_command_buffer_read(cb, slot, after));
    hrt_hal_command_buffer_finalize(cb);
    completion_t completion;
    completion_init(&completion);
    hrt_hal_buffer_ref_t table[1] = {whole(buffer)};
    int context = 42;
    hrt_hal_submission_t submission = {
        .command_buffer = cb,
        .bindings = table,
        .binding_count = 1,
        .completion = {on_complete, &completion},
        .host_context = &context,
    };
    CHECK_OK(hrt_hal_device_queue_submit(device, &submission));
    hrt_status_t status = completion_wait(&completion);
    hrt_hal_command_buffer_release(cb);
    hrt_hal_buffer_release(buffer);
    hrt_hal_buffer_release(other);
    hrt_hal_executable_release(executable);
    hrt_hal_device_release(device);
    CHECK(record.context_seen == &context);
    CHECK(!pthread_equal(record.thread, pthread_self()));
    CHECK(pthread_equal(record.thread, completion.thread));
    CHECK_EQ_INT(record.count[0], 4);
    CHECK_EQ_INT(record.null_data, 0);
    CHECK_EQ_INT(record.lengths[0][3], 0);
    CHECK_EQ_INT(record.values[0][0], 0x01020304);
    CHECK_EQ_INT(record.values[0][1], 0x01020304);
    CHECK_EQ_INT(record.values[0][2], 222);
    CHECK_EQ_INT(record.lengths[0][0], 16);
    CHECK_EQ_INT(record.lengths[0][1], 8);
    CHECK_EQ_INT(record.lengths[0][2], 4);
    if (fail) {
      // Later traces and reads do not reach the host.
      CHECK_STATUS(status, HRT_STATUS_ABORTED, "trace callback refused");
      CHECK_EQ_INT(record.calls, 1);
      CHECK_EQ_INT(after[0], 0);
    } else {
      CHECK_OK(status);
      CHECK_EQ_INT(record.calls, 2);
      CHECK_EQ_INT(record.values[1][0], 0x0A0B0C0D);
      CHECK_EQ_INT(after[3], 0x0A0B0C0D);
    }
  }
}

//===----------------------------------------------------------------------===//
// Executables
//===----------------------------------------------------------------------===//

static const char kBadPtx[] =
    ".version 7.0\n"
    ".target sm_75\n"
    ".address_size 64\n"
    ".visible .entry broken(\n"
    "  .param .u64 broken_param_0\n"
    ")\n"
    "{\n"
    "  bogus.instruction %r1;\n"
    "  ret;\n"
    "}\n";

static hrt_status_t load_ptx(hrt_hal_device_t* device, const char* text,
                             hrt_hal_executable_t** out) {
  hrt_hal_executable_params_t params = {.format = HRT_HAL_EXECUTABLE_FORMAT_PTX,
                                        .data = text,
                                        .data_length = strlen(text)};
  return hrt_hal_device_create_executable(device, &params, out);
}

static void bad_executables_are_rejected_with_the_reason(void) {
  CUDA_SETUP();
  hrt_hal_device_t* device = NULL;
  CHECK_OK(make_device("cuda", &device));
  hrt_hal_executable_t* executable = NULL;
  hrt_status_t status = load_ptx(device, kBadPtx, &executable);
  printf("  bad PTX: %s\n", hrt_status_message(status));
  CHECK_STATUS(status, HRT_STATUS_INVALID_ARGUMENT,
               "loading PTX: cuModuleLoadDataEx failed: "
               "CUDA_ERROR_INVALID_PTX");
  CHECK_STATUS(load_ptx(device, kBadPtx, &executable),
               HRT_STATUS_INVALID_ARGUMENT, "JIT log: ptxas");
  CHECK_STATUS(load_ptx(device, kBadPtx, &executable),
               HRT_STATUS_INVALID_ARGUMENT, "line 8");
  // Valid PTX whose parameters halrt cannot pass.
  static const char* const kUnpassable[][2] = {
      {".version 7.0\n.target sm_75\n.address_size 64\n"
       ".visible .entry takes_double(.param .u64 p, .param .f64 x)\n{\n "
       "ret;\n}\n",
       "PTX entry 'takes_double' (line 4): parameter 1 has type .f64"},
      {".version 7.0\n.target sm_75\n.address_size 64\n"
       ".visible .entry late_pointer(.param .u32 n, .param .u64 p)\n{\n "
       "ret;\n}\n",
       "pointer parameter 1 follows a 32-bit parameter"},
      {".version 7.0\n.target sm_75\n.address_size 64\n"
       ".visible .entry by_value(.param .align 8 .b8 s[16])\n{\n ret;\n}\n",
       "parameter 0 is an array or struct passed by value"},
      {".version 7.0\n.target sm_75\n.address_size 64\n"
       ".visible .func helper()\n{\n ret;\n}\n",
       "PTX declares no kernel"},
  };
  for (size_t i = 0; i < sizeof(kUnpassable) / sizeof(kUnpassable[0]); ++i) {
    CHECK_STATUS(load_ptx(device, kUnpassable[i][0], &executable),
                 HRT_STATUS_INVALID_ARGUMENT, kUnpassable[i][1]);
  }
  // A declaration past the dispatch limits (33 buffers), even one that
  // matches the PTX.
  char wide[2048] =
      ".version 7.0\n.target sm_75\n.address_size 64\n"
      ".visible .entry write_index_u32(.param .u64 p0";
  hrt_hal_param_type_t buffers[33];
  for (int i = 0; i < 33; ++i) buffers[i] = HRT_HAL_PARAM_BUFFER;
  for (int i = 1; i < 33; ++i) {
    snprintf(wide + strlen(wide), sizeof(wide) - strlen(wide),
             ", .param .u64 p%d", i);
  }
  strcat(wide, ")\n{\n ret;\n}\n");
  const hrt_hal_entry_decl_t decl = {"write_index_u32", NULL, true, 33,
                                     buffers};
  hrt_hal_executable_params_t declared = {
      .format = HRT_HAL_EXECUTABLE_FORMAT_PTX,
      .data = wide,
      .data_length = strlen(wide),
      .entry_decl_count = 1,
      .entry_decls = &decl};
  CHECK_STATUS(hrt_hal_device_create_executable(device, &declared, &executable),
               HRT_STATUS_INVALID_ARGUMENT,
               "kernel 'write_index_u32' is declared with 33 buffers and 0 "
               "constant words; at most 32 and 64");
  hrt_hal_executable_params_t params = {
      .format = HRT_HAL_EXECUTABLE_FORMAT_CPU_LIBRARY, .path = "kernels.so"};
  CHECK_STATUS(hrt_hal_device_create_executable(device, &params, &executable),
               HRT_STATUS_INVALID_ARGUMENT, "not CPU kernel libraries");
  params =
      (hrt_hal_executable_params_t){.format = HRT_HAL_EXECUTABLE_FORMAT_PTX};
  CHECK_STATUS(hrt_hal_device_create_executable(device, &params, &executable),
               HRT_STATUS_INVALID_ARGUMENT, "needs PTX text");
  params.format = HRT_HAL_EXECUTABLE_FORMAT_CUBIN;
  CHECK_STATUS(hrt_hal_device_create_executable(device, &params, &executable),
               HRT_STATUS_INVALID_ARGUMENT, "needs an image");
  CHECK_EQ_INT(hrt_live_count(HRT_LIVE_EXECUTABLE), 0);
  hrt_hal_device_release(device);
}

static void ptx_entries_count_bindings_then_constants(void) {
  static const char kPtx[] =
      "// Generated by NVIDIA NVVM Compiler\n"
      ".version 7.0\n.target sm_75\n.address_size 64\n"
      "/* .visible .entry commented_out(.param .f64 x) */\n"
      ".func (.param .b32 r) helper(.param .b64 p)\n{\n ret;\n}\n"
      ".visible .entry axpy(\n"
      "\t.param .u64 .ptr .global .align 4 axpy_param_0, // x\n"
      "\t.param .b64 axpy_param_1,\n"
      "\t.param .u32 axpy_param_2,\n"
      "\t.param .f32 axpy_param_3,\n"
      "\t.param .s32 axpy_param_4,\n"
      "\t.param .b32 axpy_param_5\n"
      ")\n"
      ".maxntid 256, 1, 1\n"
      "{\n  .reg .b32 %r<2>;\n  ret;\n}\n"
      ".entry no_params()\n{\n ret;\n}\n"
      ".weak .entry bare\n{\n ret;\n}\n";
  uint32_t count = 0;
  hrt_cuda_ptx_entry_t* entries = NULL;
  CHECK_OK(hrt_cuda_ptx_parse_entries(kPtx, &count, &entries));
  CHECK_EQ_INT(count, 3);
  CHECK(strcmp(entries[0].name, "axpy") == 0);
  CHECK_EQ_INT(entries[0].param_count, 6);
  static const char* const kTypes[6] = {".u64", ".b64", ".u32",
                                        ".f32", ".s32", ".b32"};
  for (int i = 0; i < 6; ++i) {
    CHECK(strcmp(entries[0].params[i].type, kTypes[i]) == 0);
    CHECK(!entries[0].params[i].array);
    CHECK_EQ_INT(entries[0].params[i].line, 11 + i);
  }
  uint32_t bindings = 0, constants = 0;
  CHECK_OK(hrt_cuda_ptx_infer(&entries[0], &bindings, &constants));
  CHECK_EQ_INT(bindings, 2);
  CHECK_EQ_INT(constants, 4);
  CHECK(strcmp(entries[1].name, "no_params") == 0);
  CHECK_EQ_INT(entries[1].param_count, 0);
  CHECK_OK(hrt_cuda_ptx_infer(&entries[1], &bindings, &constants));
  CHECK_EQ_INT(bindings + constants, 0);
  CHECK(strcmp(entries[2].name, "bare") == 0);
  free(entries);
  CHECK_STATUS(hrt_cuda_ptx_parse_entries(
                   ".entry twice()\n{ ret; }\n.entry twice()\n{ ret; }\n",
                   &count, &entries),
               HRT_STATUS_INVALID_ARGUMENT, "declares entry 'twice' twice");
  CHECK_STATUS(hrt_cuda_ptx_parse_entries(".entry open(.param .u64 p\n", &count,
                                          &entries),
               HRT_STATUS_INVALID_ARGUMENT, "not closed by ')'");
  CHECK_STATUS(hrt_cuda_ptx_parse_entries(".entry odd(.reg .u32 h)\n{}\n",
                                          &count, &entries),
               HRT_STATUS_INVALID_ARGUMENT, "not a '.param .<type> name'");
  CHECK_STATUS(hrt_cuda_ptx_parse_entries("", &count, &entries),
               HRT_STATUS_INVALID_ARGUMENT, "no '.entry'");
  // Parsing reports any parameter; the inferred rule refuses what it cannot
  // pass.
  static const struct {
    const char* ptx;
    const char* message;
  } kUninferable[] = {
      {".entry small(.param .u16 h)\n{}\n",
       "PTX entry 'small' (line 1): parameter 0 has type .u16"},
      {".entry wide(.param .u64 p,\n.param .s64 n)\n{}\n",
       "PTX entry 'wide' (line 2): parameter 1 has type .s64"},
      {".entry dbl(.param .f64 a)\n{}\n", "parameter 0 has type .f64"},
      {".entry late(.param .u32 n, .param .u64 p)\n{}\n",
       "pointer parameter 1 follows a 32-bit parameter"},
      {".entry by_value(.param .align 8 .b8 s[16])\n{}\n",
       "parameter 0 is an array or struct passed by value"},
  };
  for (size_t k = 0; k < sizeof(kUninferable) / sizeof(kUninferable[0]); ++k) {
    CHECK_OK(hrt_cuda_ptx_parse_entries(kUninferable[k].ptx, &count, &entries));
    CHECK_EQ_INT(count, 1);
    CHECK_STATUS(hrt_cuda_ptx_infer(&entries[0], &bindings, &constants),
                 HRT_STATUS_INVALID_ARGUMENT, kUninferable[k].message);
    free(entries);
  }
  CHECK_OK(hrt_cuda_ptx_parse_entries(
      ".entry by_value(.param .align 8 .b8 s[16])\n{}\n", &count, &entries));
  CHECK(strcmp(entries[0].params[0].type, ".b8") == 0);
  CHECK(entries[0].params[0].array);
  free(entries);
  // The built-in PTX follows the rule.
  hrt_hal_device_t* device = NULL;
  CUDA_SETUP();
  CHECK_OK(make_device("cuda", &device));
  hrt_hal_executable_params_t params = {.format =
                                            HRT_HAL_EXECUTABLE_FORMAT_BUILTIN};
  hrt_hal_executable_t* executable = NULL;
  CHECK_OK(hrt_hal_device_create_executable(device, &params, &executable));
  CHECK(strcmp(executable->name, "builtin") == 0);
  CHECK_EQ_INT(executable->entry_count, 17);
  hrt_hal_executable_release(executable);
  hrt_hal_device_release(device);
}

// nvcc declares a kernel whose address is taken before its definition with a
// prototype (`.entry name (...) ;`), and one of another module with
// `.extern .entry`: neither is an entry of the module, and the definition
// that follows a prototype is not a second declaration.
static void ptx_entry_prototypes_are_not_entries(void) {
  static const char kPtx[] =
      ".version 7.0\n.target sm_75\n.address_size 64\n"
      ".visible .entry _Z5childPi\n(\n\t.param .u64 _Z5childPi_param_0\n)\n;\n"
      ".extern .entry _Z5otherPi\n(\n\t.param .u64 _Z5otherPi_param_0\n)\n;\n"
      ".visible .entry bare_prototype;\n"
      ".visible .entry _Z6parentPy(\n\t.param .u64 _Z6parentPy_param_0\n)\n"
      ".maxntid 32, 1, 1\n{\n ret;\n}\n"
      ".visible .entry _Z5childPi(\n\t.param .u64 _Z5childPi_param_0,\n"
      "\t.param .u32 n\n)\n{\n ret;\n}\n";
  uint32_t count = 0;
  hrt_cuda_ptx_entry_t* entries = NULL;
  CHECK_OK(hrt_cuda_ptx_parse_entries(kPtx, &count, &entries));
  CHECK_EQ_INT(count, 2);
  CHECK(strcmp(entries[0].name, "_Z6parentPy") == 0);
  CHECK_EQ_INT(entries[0].param_count, 1);
  CHECK(strcmp(entries[1].name, "_Z5childPi") == 0);
  CHECK_EQ_INT(entries[1].line, 22);
  CHECK_EQ_INT(entries[1].param_count, 2);
  CHECK(strcmp(entries[1].params[1].type, ".u32") == 0);
  free(entries);
  CHECK_STATUS(hrt_cuda_ptx_parse_entries(
                   ".extern .entry only(.param .u64 p);\n", &count, &entries),
               HRT_STATUS_INVALID_ARGUMENT, "no '.entry'");
  // Two definitions are still two.
  CHECK_STATUS(hrt_cuda_ptx_parse_entries(
                   ".entry k(.param .u64 p);\n.entry k(.param .u64 p)\n{}\n"
                   ".entry k(.param .u64 p)\n{}\n",
                   &count, &entries),
               HRT_STATUS_INVALID_ARGUMENT,
               "PTX declares entry 'k' twice (line 4)");
}

// A kernel parameter of an opaque type (.texref, .samplerref, .surfref) is
// valid PTX: it fails only the entry that has it (when inferred or
// declared), not the parsing of the module, whose other kernels stay
// usable.
static void ptx_opaque_parameters_fail_only_their_entry(void) {
  static const char kPtx[] =
      ".version 7.0\n.target sm_75\n.address_size 64\n"
      ".entry tex(.param .u64 out, .param .texref t)\n{\n ret;\n}\n"
      ".entry plain(.param .u64 out)\n{\n ret;\n}\n";
  uint32_t count = 0;
  hrt_cuda_ptx_entry_t* entries = NULL;
  CHECK_OK(hrt_cuda_ptx_parse_entries(kPtx, &count, &entries));
  CHECK_EQ_INT(count, 2);
  CHECK(strcmp(entries[0].params[1].type, ".texref") == 0);
  uint32_t bindings = 0, constants = 0;
  CHECK_STATUS(hrt_cuda_ptx_infer(&entries[0], &bindings, &constants),
               HRT_STATUS_INVALID_ARGUMENT,
               "PTX entry 'tex' (line 4): parameter 1 has type .texref");
  const hrt_hal_param_type_t types[2] = {HRT_HAL_PARAM_BUFFER,
                                         HRT_HAL_PARAM_U64};
  CHECK_STATUS(hrt_cuda_ptx_check(&entries[0], 2, types),
               HRT_STATUS_INVALID_ARGUMENT,
               "parameter 1 is declared 'u64' but is .texref in the PTX");
  CHECK_OK(hrt_cuda_ptx_infer(&entries[1], &bindings, &constants));
  CHECK_EQ_INT(bindings, 1);
  free(entries);
  // Without any type it is still malformed.
  CHECK_STATUS(
      hrt_cuda_ptx_parse_entries(".entry k(.param t)\n{}\n", &count, &entries),
      HRT_STATUS_INVALID_ARGUMENT, "not a '.param .<type> name'");
}

// Each declared type against each PTX parameter type (docs/cuda.md): the
// pairs that match, and the message naming entry, parameter and both types.
static void ptx_declarations_are_checked_against_param_types(void) {
  static const char* const kPtxTypes[] = {
      ".u64", ".b64", ".s64", ".f64", ".u32", ".b32",
      ".s32", ".f32", ".u16", ".s8",  ".f16", ".align 8 .b8"};
  // For each declared type, the PTX types it accepts.
  static const struct {
    hrt_hal_param_type_t type;
    const char* accepts;
  } kRules[] = {
      {HRT_HAL_PARAM_BUFFER, ".u64 .b64"},
      {HRT_HAL_PARAM_U64, ".u64 .b64 .s64"},
      {HRT_HAL_PARAM_I64, ".u64 .b64 .s64"},
      {HRT_HAL_PARAM_F64, ".f64 .b64"},
      {HRT_HAL_PARAM_U32, ".u32 .b32 .s32"},
      {HRT_HAL_PARAM_I32, ".u32 .b32 .s32"},
      {HRT_HAL_PARAM_F32, ".f32 .b32"},
  };
  for (size_t t = 0; t < sizeof(kPtxTypes) / sizeof(kPtxTypes[0]); ++t) {
    const bool array = strstr(kPtxTypes[t], ".b8") != NULL;
    char ptx[160];
    snprintf(ptx, sizeof(ptx),
             ".entry k(.param .u64 out,\n.param %s v%s)\n{}\n", kPtxTypes[t],
             array ? "[8]" : "");
    uint32_t count = 0;
    hrt_cuda_ptx_entry_t* entries = NULL;
    CHECK_OK(hrt_cuda_ptx_parse_entries(ptx, &count, &entries));
    for (size_t r = 0; r < sizeof(kRules) / sizeof(kRules[0]); ++r) {
      const hrt_hal_param_type_t types[2] = {HRT_HAL_PARAM_BUFFER,
                                             kRules[r].type};
      const bool match = !array && strstr(kRules[r].accepts, kPtxTypes[t]);
      hrt_status_t status = hrt_cuda_ptx_check(&entries[0], 2, types);
      if (match) {
        CHECK_OK(status);
        continue;
      }
      char expected[160];
      snprintf(expected, sizeof(expected),
               "PTX entry 'k' (line 2): parameter 1 is declared '%s' but is "
               "%s%s in the PTX",
               hrt_hal_param_type_name(kRules[r].type),
               array ? ".b8" : kPtxTypes[t],
               array ? " [...] (an array or struct passed by value)" : "");
      CHECK_STATUS(status, HRT_STATUS_INVALID_ARGUMENT, expected);
    }
    // The parameter count must be the PTX's.
    const hrt_hal_param_type_t three[3] = {
        HRT_HAL_PARAM_BUFFER, HRT_HAL_PARAM_U32, HRT_HAL_PARAM_U32};
    CHECK_STATUS(hrt_cuda_ptx_check(&entries[0], 3, three),
                 HRT_STATUS_INVALID_ARGUMENT,
                 "PTX entry 'k' (line 1): the module declares 3 parameters "
                 "but the PTX has 2");
    CHECK_STATUS(hrt_cuda_ptx_check(&entries[0], 1, three),
                 HRT_STATUS_INVALID_ARGUMENT,
                 "the module declares 1 parameters but the PTX has 2");
    free(entries);
  }
}

// cuModuleLoadDataEx takes no length, so halrt checks that a cubin's ELF
// header and a fatbin's header describe no more bytes than it was given.
static void cubin_and_fatbin_headers_are_checked_before_loading(void) {
  size_t cubin_length = 0;
  size_t fatbin_length = 0;
  unsigned char* cubin =
      (unsigned char*)read_file("test/gpu/kernels_sm90.cubin", &cubin_length);
  unsigned char* fatbin =
      (unsigned char*)read_file("test/gpu/kernels_sm90.fatbin", &fatbin_length);
  CHECK(cubin != NULL && fatbin != NULL);
  CHECK_EQ_INT(cubin_length, 13936);
  CHECK_EQ_INT(fatbin_length, 15520);
  CHECK_OK(hrt_cuda_image_check_cubin(cubin, cubin_length));
  CHECK_OK(hrt_cuda_image_check_fatbin(fatbin, fatbin_length));

  // Truncated cubins: the header itself, then each header table (the
  // section headers are at 12056..13656, the program headers at
  // 13656..13936).
  CHECK_STATUS(hrt_cuda_image_check_cubin(cubin, 40),
               HRT_STATUS_INVALID_ARGUMENT,
               "cubin image is 40 bytes, too short for an ELF header");
  CHECK_STATUS(hrt_cuda_image_check_cubin(cubin, 12500),
               HRT_STATUS_INVALID_ARGUMENT,
               "cubin image of 12500 bytes: its section header table (25 "
               "entries of 64 bytes at offset 12056) does not fit in it");
  CHECK_STATUS(hrt_cuda_image_check_cubin(cubin, 13935),
               HRT_STATUS_INVALID_ARGUMENT,
               "cubin image of 13935 bytes: its program header table (5 "
               "entries of 56 bytes at offset 13656) does not fit in it");
  // Corrupted copies.
  unsigned char* copy = malloc(cubin_length);
  CHECK(copy != NULL);
  memcpy(copy, cubin, cubin_length);
  copy[4] = 1;  // ELFCLASS32
  CHECK_STATUS(hrt_cuda_image_check_cubin(copy, cubin_length),
               HRT_STATUS_INVALID_ARGUMENT,
               "cubin image is ELF class 1, data encoding 1; a cubin is "
               "64-bit (2) little-endian (1)");
  memcpy(copy, cubin, cubin_length);
  copy[12056 + 64 + 0x20 + 5] = 1;  // section 1's size += 2^40
  CHECK_STATUS(hrt_cuda_image_check_cubin(copy, cubin_length),
               HRT_STATUS_INVALID_ARGUMENT,
               "cubin image of 13936 bytes: section 1 (");
  CHECK_STATUS(hrt_cuda_image_check_cubin(fatbin, fatbin_length),
               HRT_STATUS_INVALID_ARGUMENT,
               "cubin image does not start with the ELF magic");
  free(copy);

  CHECK_STATUS(hrt_cuda_image_check_fatbin(fatbin, 10),
               HRT_STATUS_INVALID_ARGUMENT,
               "fatbin image is 10 bytes, too short for a fat binary header");
  CHECK_STATUS(hrt_cuda_image_check_fatbin(fatbin, fatbin_length - 1),
               HRT_STATUS_INVALID_ARGUMENT,
               "fatbin image of 15519 bytes: its header (16 bytes) and "
               "contents (15504 bytes) do not fit in it");
  CHECK_STATUS(hrt_cuda_image_check_fatbin(cubin, cubin_length),
               HRT_STATUS_INVALID_ARGUMENT,
               "fatbin image starts with 0x464C457F, not the fat binary "
               "magic 0xBA55ED50");
  copy = malloc(fatbin_length);
  CHECK(copy != NULL);
  memcpy(copy, fatbin, fatbin_length);
  copy[6] = 8;  // a header smaller than the header's own fields
  CHECK_STATUS(hrt_cuda_image_check_fatbin(copy, fatbin_length),
               HRT_STATUS_INVALID_ARGUMENT, "its header (8 bytes)");
  free(copy);

  // Through the device: rejected before the driver is called.
  CUDA_SETUP();
  hrt_hal_device_t* device = NULL;
  CHECK_OK(make_device("cuda", &device));
  hrt_hal_executable_t* executable = NULL;
  hrt_hal_executable_params_t params = {
      .format = HRT_HAL_EXECUTABLE_FORMAT_FATBIN,
      .data = fatbin,
      .data_length = 100};
  CHECK_STATUS(hrt_hal_device_create_executable(device, &params, &executable),
               HRT_STATUS_INVALID_ARGUMENT,
               "fatbin image of 100 bytes: its header (16 bytes) and "
               "contents (15504 bytes) do not fit in it");
  CHECK_EQ_INT(hrt_live_count(HRT_LIVE_EXECUTABLE), 0);
  hrt_hal_device_release(device);
  free(cubin);
  free(fatbin);
}

// cubin/fatbin kernels are listed by the driver (CUDA 12.4+): the committed
// sm_90 cubin and fatbin, which the fake (compute capability 9.0) parses as
// the driver does, and which a GPU of compute capability 9.x runs.
static void cubin_and_fatbin_kernels_come_from_the_driver(void) {
  CUDA_SETUP();
  hrt_hal_device_t* device = NULL;
  CHECK_OK(make_device("cuda", &device));
  const hrt_hal_device_info_t* info = hrt_hal_device_info(device);
  static const char* const kImages[2] = {"test/gpu/kernels_sm90.cubin",
                                         "test/gpu/kernels_sm90.fatbin"};
  static const hrt_hal_executable_format_t kFormats[2] = {
      HRT_HAL_EXECUTABLE_FORMAT_CUBIN, HRT_HAL_EXECUTABLE_FORMAT_FATBIN};
  if (!g_cuda.fake && info->compute_capability[0] != 9) {
    printf("  (skipped: the committed images are for sm_90)\n");
    hrt_hal_device_release(device);
    return;
  }
  for (int f = 0; f < 2; ++f) {
    size_t length = 0;
    char* image = read_file(kImages[f], &length);
    CHECK(image != NULL);
    hrt_hal_executable_params_t params = {
        .format = kFormats[f], .data = image, .data_length = length};
    hrt_hal_executable_t* executable = NULL;
    hrt_status_t status =
        hrt_hal_device_create_executable(device, &params, &executable);
    free(image);
    if (hrt_status_code(status) == HRT_STATUS_UNIMPLEMENTED) {
      printf("  (skipped: %s)\n", hrt_status_message(status));
      hrt_status_free(status);
      break;
    }
    CHECK_OK(status);
    CHECK_EQ_INT(executable->entry_count, 4);
    uint32_t ordinal = 0;
    // Inferred by size alone: the int64 and the double are "bindings".
    CHECK_OK(
        hrt_hal_executable_lookup(executable, "scale_offset_f64", &ordinal));
    CHECK_EQ_INT(executable->entries[ordinal].binding_count, 4);
    CHECK_EQ_INT(executable->entries[ordinal].constant_count, 0);
    CHECK(executable->entries[ordinal].params == NULL);
    CHECK_OK(hrt_hal_executable_lookup(executable, "vector_add_f32", &ordinal));
    CHECK_EQ_INT(executable->entries[ordinal].binding_count, 3);
    CHECK_EQ_INT(executable->entries[ordinal].constant_count, 1);
    CHECK_OK(
        hrt_hal_executable_lookup(executable, "write_index_u32", &ordinal));
    CHECK_EQ_INT(executable->entries[ordinal].binding_count, 1);
    CHECK_EQ_INT(executable->entries[ordinal].constant_count, 1);
    // And it runs.
    hrt_hal_buffer_t* buffer = NULL;
    CHECK_OK(hrt_hal_device_allocate_buffer(device, 4000, NULL, &buffer));
    hrt_hal_buffer_ref_t binding = whole(buffer);
    uint32_t n = 1000;
    hrt_hal_dispatch_t dispatch = {executable, ordinal, {2, 1, 1}, {64, 1, 1},
                                   1,          &n,      1,         &binding, 0};
    CHECK_OK(run_dispatch(device, &dispatch));
    uint32_t out[1000];
    CHECK_OK(read_back(device, buffer, out));
    CHECK_EQ_INT(out[999], 999);
    hrt_hal_buffer_release(buffer);
    hrt_hal_executable_release(executable);
  }
  hrt_hal_device_release(device);
}

// Runs scale_offset_f64 of `executable` (declared ["buffer", "i64", "f64",
// "buffer"]) on n doubles and checks y[i] = a * x[i] + i.
static void check_scale_offset_f64(hrt_hal_device_t* device,
                                   hrt_hal_executable_t* executable) {
  enum { N = 1000 };
  uint32_t ordinal = 0;
  CHECK_OK(hrt_hal_executable_lookup(executable, "scale_offset_f64", &ordinal));
  const hrt_hal_executable_entry_t* entry = &executable->entries[ordinal];
  CHECK_EQ_INT(entry->binding_count, 2);
  CHECK_EQ_INT(entry->constant_count, 4);
  CHECK_EQ_INT(entry->param_count, 4);
  CHECK(entry->params && entry->params[1] == HRT_HAL_PARAM_I64 &&
        entry->params[2] == HRT_HAL_PARAM_F64);
  static double x[N], y[N];
  for (int i = 0; i < N; ++i) x[i] = 0.25 * i - 7;
  hrt_hal_buffer_t* buffers[2] = {NULL, NULL};
  CHECK_OK(hrt_hal_device_allocate_buffer(device, sizeof(x), x, &buffers[0]));
  CHECK_OK(
      hrt_hal_device_allocate_buffer(device, sizeof(y), NULL, &buffers[1]));
  hrt_hal_buffer_ref_t bindings[2] = {whole(buffers[0]), whole(buffers[1])};
  // n (i64) then a (f64), each as two words, low first.
  const int64_t n = N;
  const double a = -1.5;
  uint64_t a_bits = 0;
  memcpy(&a_bits, &a, sizeof(a_bits));
  const uint32_t constants[4] = {(uint32_t)n, (uint32_t)((uint64_t)n >> 32),
                                 (uint32_t)a_bits, (uint32_t)(a_bits >> 32)};
  hrt_hal_dispatch_t dispatch = {executable, ordinal,   {3, 1, 1}, {128, 1, 1},
                                 4,          constants, 2,         bindings, 0};
  CHECK_OK(run_dispatch(device, &dispatch));
  CHECK_OK(read_back(device, buffers[1], y));
  for (int i = 0; i < N; ++i) CHECK(y[i] == a * x[i] + i);
  hrt_hal_buffer_release(buffers[0]);
  hrt_hal_buffer_release(buffers[1]);
}

// Declared entries of a cubin or fatbin: exactly those are exposed, each
// checked against the parameter sizes the driver reports, and launched
// with the declared layout (64-bit scalars from two constant words).
static void cubin_declarations_are_checked_by_size(void) {
  CUDA_SETUP();
  hrt_hal_device_t* device = NULL;
  CHECK_OK(make_device("cuda", &device));
  if (!g_cuda.fake && hrt_hal_device_info(device)->compute_capability[0] != 9) {
    printf("  (skipped: the committed images are for sm_90)\n");
    hrt_hal_device_release(device);
    return;
  }
  static const char* const kImages[2] = {"test/gpu/kernels_sm90.cubin",
                                         "test/gpu/kernels_sm90.fatbin"};
  static const hrt_hal_executable_format_t kFormats[2] = {
      HRT_HAL_EXECUTABLE_FORMAT_CUBIN, HRT_HAL_EXECUTABLE_FORMAT_FATBIN};
  static const char* const kWhat[2] = {"cubin", "fatbin"};
  for (int f = 0; f < 2; ++f) {
    size_t length = 0;
    char* image = read_file(kImages[f], &length);
    CHECK(image != NULL);
    hrt_hal_executable_params_t params = {
        .format = kFormats[f],
        .data = image,
        .data_length = length,
        .entry_decl_count = 2,
        .entry_decls = &kTestKernelDecls[1],  // write_index, scale_offset
    };
    hrt_hal_executable_t* executable = NULL;
    hrt_status_t status =
        hrt_hal_device_create_executable(device, &params, &executable);
    if (hrt_status_code(status) == HRT_STATUS_UNIMPLEMENTED) {
      printf("  (skipped: %s)\n", hrt_status_message(status));
      hrt_status_free(status);
      free(image);
      break;
    }
    CHECK_OK(status);
    CHECK_EQ_INT(executable->entry_count, 2);
    CHECK(strcmp(executable->entries[0].name, "write_index_u32") == 0);
    check_scale_offset_f64(device, executable);
    hrt_hal_executable_release(executable);
    // Mismatches name the kernel, the parameter and both sizes.
    static const hrt_hal_param_type_t kWrongType[4] = {
        HRT_HAL_PARAM_BUFFER, HRT_HAL_PARAM_U32, HRT_HAL_PARAM_F64,
        HRT_HAL_PARAM_BUFFER};
    static const hrt_hal_param_type_t kFive[5] = {
        HRT_HAL_PARAM_BUFFER, HRT_HAL_PARAM_I64, HRT_HAL_PARAM_F64,
        HRT_HAL_PARAM_BUFFER, HRT_HAL_PARAM_F32};
    const struct {
      hrt_hal_entry_decl_t decl;
      hrt_status_code_t code;
      const char* message;
    } kBad[] = {
        {{"scale_offset_f64", NULL, true, 4, kWrongType},
         HRT_STATUS_INVALID_ARGUMENT,
         "kernel 'scale_offset_f64': parameter 1 is declared 'u32' (4 bytes) "
         "but is 8 bytes in the"},
        {{"scale_offset_f64", NULL, true, 3, kFive},
         HRT_STATUS_INVALID_ARGUMENT,
         "kernel 'scale_offset_f64': the module declares 3 parameters but "
         "the"},
        {{"scale_offset_f64", NULL, true, 5, kFive},
         HRT_STATUS_INVALID_ARGUMENT,
         "declares 5 parameters but the"},
        {{"no_such_kernel", NULL, true, 0, NULL},
         HRT_STATUS_NOT_FOUND,
         "kernel 'no_such_kernel': cuModuleGetFunction failed: "
         "CUDA_ERROR_NOT_FOUND"},
    };
    for (size_t b = 0; b < sizeof(kBad) / sizeof(kBad[0]); ++b) {
      params.entry_decl_count = 1;
      params.entry_decls = &kBad[b].decl;
      status = hrt_hal_device_create_executable(device, &params, &executable);
      CHECK(strstr(hrt_status_message(status), kWhat[f]) != NULL);
      CHECK_STATUS(status, kBad[b].code, kBad[b].message);
    }
    free(image);
  }
  CHECK_EQ_INT(hrt_live_count(HRT_LIVE_EXECUTABLE), 0);
  hrt_hal_device_release(device);
}

// Two declarations of one entry name would leave the second unreachable
// (dispatches find entries by name): INVALID_ARGUMENT naming it, for every
// CUDA format that takes declarations.
static void declared_entry_names_are_unique(void) {
  CUDA_SETUP();
  hrt_hal_device_t* device = NULL;
  CHECK_OK(make_device("cuda", &device));
  const hrt_hal_entry_decl_t decls[3] = {
      kTestKernelDecls[1],
      kTestKernelDecls[2],
      {"write_index_u32", NULL, false, 0, NULL},
  };
  size_t length = 0;
  char* ptx = read_file("test/gpu/kernels.ptx", &length);
  CHECK(ptx != NULL);
  const hrt_hal_executable_format_t formats[2] = {
      HRT_HAL_EXECUTABLE_FORMAT_PTX, HRT_HAL_EXECUTABLE_FORMAT_CUBIN};
  for (int f = 0; f < 2; ++f) {
    hrt_hal_executable_params_t params = {
        .format = formats[f],
        .data = ptx,
        .data_length = length,
        .entry_decl_count = 3,
        .entry_decls = decls,
    };
    hrt_hal_executable_t* executable = NULL;
    CHECK_STATUS(hrt_hal_device_create_executable(device, &params, &executable),
                 HRT_STATUS_INVALID_ARGUMENT,
                 "declared entries 0 and 2 are both named 'write_index_u32'");
  }
  free(ptx);
  CHECK_EQ_INT(hrt_live_count(HRT_LIVE_EXECUTABLE), 0);
  hrt_hal_device_release(device);
}

// The committed builtin_ptx.c matches kernels/builtin.cu: its recorded
// source hash always, its bytes too when nvcc is here.
static void builtin_ptx_is_current(void) {
  CUDA_SETUP();
  size_t length = 0;
  char* source = read_file("src/hal/cuda/kernels/builtin.cu", &length);
  char* generated = read_file("src/hal/cuda/builtin_ptx.c", NULL);
  CHECK(source && generated);
  uint64_t hash = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < length; ++i) {
    hash ^= (uint8_t)source[i];
    hash *= 0x100000001b3ull;
  }
  char expected[64];
  snprintf(expected, sizeof(expected), "// source fnv1a64: %016llx\n",
           (unsigned long long)hash);
  const bool current = strstr(generated, expected) != NULL;
  free(source);
  free(generated);
  if (!current) {
    fprintf(stderr,
            "src/hal/cuda/builtin_ptx.c is stale: run node "
            "scripts/build-cuda-ptx.js\n");
  }
  CHECK(current);
  const char* nvcc =
      getenv("NVCC") ? getenv("NVCC") : "/usr/local/cuda/bin/nvcc";
  if (access(nvcc, X_OK) != 0 || system("node --version > /dev/null 2>&1")) {
    printf("  (nvcc or node not found: PTX bytes not compared)\n");
    return;
  }
  char command[1200];
  snprintf(command, sizeof(command),
           "node '%s/scripts/build-cuda-ptx.js' --check", g_cuda.root);
  CHECK_EQ_INT(system(command), 0);
}

//===----------------------------------------------------------------------===//
// Semaphores, failures, lifetime
//===----------------------------------------------------------------------===//

static void submissions_wait_for_semaphores(void) {
  CUDA_SETUP();
  check_submissions_wait_for_semaphores("cuda", /*foreign_device_loss=*/true,
                                        /*host_visible=*/false);
}

static void out_of_memory_is_recoverable(void) {
  CUDA_SETUP();
  hrt_hal_device_t* device = NULL;
  CHECK_OK(make_device("cuda", &device));
  hrt_hal_buffer_t* huge = NULL;
  const uint64_t too_much = hrt_hal_device_info(device)->total_memory * 2;
  CHECK_STATUS(hrt_hal_device_allocate_buffer(device, too_much, NULL, &huge),
               HRT_STATUS_RESOURCE_EXHAUSTED, "CUDA_ERROR_OUT_OF_MEMORY");
  hrt_hal_buffer_t* buffer = NULL;
  CHECK_OK(hrt_hal_device_allocate_buffer(device, 8, NULL, &buffer));
  CHECK_OK(run_fill(device, whole(buffer), 0x11223344, 4));
  uint32_t out[2] = {0, 0};
  CHECK_OK(read_back(device, buffer, out));
  CHECK_EQ_INT(out[1], 0x11223344);
  hrt_hal_buffer_release(buffer);
  hrt_hal_device_release(device);
}

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

static hrt_status_t write_index_open(write_index_t* w) {
  memset(w, 0, sizeof(*w));
  HRT_RETURN_IF_ERROR(make_device("cuda", &w->device));
  HRT_RETURN_IF_ERROR(load_test_kernels(w->device, &w->executable));
  uint32_t ordinal = 0;
  HRT_RETURN_IF_ERROR(
      hrt_hal_executable_lookup(w->executable, "write_index_u32", &ordinal));
  HRT_RETURN_IF_ERROR(
      hrt_hal_device_allocate_buffer(w->device, 64, NULL, &w->buffer));
  w->binding = whole(w->buffer);
  w->n = 16;
  w->dispatch = (hrt_hal_dispatch_t){w->executable, ordinal, {1, 1, 1},
                                     {16, 1, 1},    1,       &w->n,
                                     1,             &w->binding, 0};
  return HRT_OK;
}

// Records the dispatch alone in a new command buffer (replacing the last).
static hrt_status_t write_index_record(write_index_t* w) {
  if (w->cb) hrt_hal_command_buffer_release(w->cb);
  w->cb = NULL;
  HRT_RETURN_IF_ERROR(hrt_hal_command_buffer_create(w->device, &w->cb));
  HRT_RETURN_IF_ERROR(hrt_hal_command_buffer_dispatch(w->cb, &w->dispatch));
  hrt_hal_command_buffer_finalize(w->cb);
  return HRT_OK;
}

// Runs the recorded command buffer and checks that it wrote 0..15.
static hrt_status_t write_index_run(write_index_t* w) {
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

static void write_index_close(write_index_t* w) {
  if (w->cb) hrt_hal_command_buffer_release(w->cb);
  if (w->buffer) hrt_hal_buffer_release(w->buffer);
  if (w->executable) hrt_hal_executable_release(w->executable);
  if (w->device) hrt_hal_device_release(w->device);
}

static void failed_launch_fails_only_its_submission(void) {
  FAKE_ONLY();
  write_index_t w;
  CHECK_OK(write_index_open(&w));
  CHECK_OK(write_index_record(&w));
  g_cuda.fail_next_launch(701);  // CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES
  hrt_status_t status = run(w.device, w.cb, NULL, 0);
  printf("  %s\n", hrt_status_message(status));
  CHECK_STATUS(status, HRT_STATUS_RESOURCE_EXHAUSTED,
               "command 0 (dispatch): kernel 'write_index_u32' of executable "
               "'ptx' (grid 1x1x1, block 16x1x1): cuLaunchKernel failed: "
               "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES");
  CHECK_OK(write_index_run(&w));
  write_index_close(&w);
}

static void device_released_on_its_completion_thread_is_destroyed(void) {
  CUDA_SETUP();
  check_device_released_by_its_completion_is_destroyed("cuda");
}

// Records the fault kernel or, for `fault` == false, a harmless fill.
static hrt_status_t record_work(hrt_hal_device_t* device,
                                hrt_hal_executable_t* executable,
                                hrt_hal_buffer_t* buffer, bool fault,
                                hrt_hal_command_buffer_t** out_cb) {
  hrt_hal_command_buffer_t* cb = NULL;
  HRT_RETURN_IF_ERROR(hrt_hal_command_buffer_create(device, &cb));
  hrt_status_t status = HRT_OK;
  if (fault) {
    uint32_t ordinal = 0;
    status = hrt_hal_executable_lookup(executable, "fault_illegal_address",
                                       &ordinal);
    hrt_hal_buffer_ref_t binding = whole(buffer);
    uint32_t value = 1;
    hrt_hal_dispatch_t dispatch = {executable, ordinal, {1, 1, 1}, {1, 1, 1},
                                   1,          &value,  1,         &binding, 0};
    if (status == HRT_OK) {
      status = hrt_hal_command_buffer_dispatch(cb, &dispatch);
    }
  } else {
    status = hrt_hal_command_buffer_fill(cb, whole(buffer), 3, 4);
  }
  hrt_hal_command_buffer_finalize(cb);
  if (status != HRT_OK) {
    hrt_hal_command_buffer_release(cb);
    return status;
  }
  *out_cb = cb;
  return HRT_OK;
}

static void wait_for_no_devices(void) {
  int64_t deadline = hrt_time_now_ns() + 10000000000LL;
  while (hrt_live_count(HRT_LIVE_DEVICE) != 0 && hrt_time_now_ns() < deadline) {
    struct timespec pause = {0, 1000000};
    nanosleep(&pause, NULL);
  }
}

// Waits until the fake's streams hold `count` operations (the issue thread
// has enqueued everything submitted so far).
static void wait_for_queued(int count) {
  int64_t deadline = hrt_time_now_ns() + 10000000000LL;
  while (g_cuda.queued_operations() < count && hrt_time_now_ns() < deadline) {
    struct timespec pause = {0, 1000000};
    nanosleep(&pause, NULL);
  }
}

// A faulting kernel: that submission and the ones queued behind it complete
// with DEVICE_LOST naming the fault; later work fails at once.
static void illegal_address_loses_the_device(void) {
  CUDA_SETUP();
  hrt_hal_device_t* device = NULL;
  CHECK_OK(make_device("cuda", &device));
  hrt_hal_executable_t* executable = NULL;
  CHECK_OK(load_test_kernels(device, &executable));
  hrt_hal_buffer_t* buffer = NULL;
  CHECK_OK(hrt_hal_device_allocate_buffer(device, 64, NULL, &buffer));
  hrt_hal_command_buffer_t* faulty = NULL;
  hrt_hal_command_buffer_t* harmless = NULL;
  CHECK_OK(record_work(device, executable, buffer, true, &faulty));
  CHECK_OK(record_work(device, executable, buffer, false, &harmless));
  hrt_hal_semaphore_t* signal = NULL;
  CHECK_OK(hrt_hal_semaphore_create(0, &signal));
  hrt_hal_semaphore_point_t point = {signal, 1};
  uint32_t settle[16];
  CHECK_OK(read_back(device, buffer, settle));  // nothing else in flight
  if (g_cuda.fake) g_cuda.hold_streams(1);
  completion_t completions[3];
  completion_init(&completions[0]);
  hrt_hal_submission_t submission = {
      .command_buffer = faulty,
      .signals = &point,
      .signal_count = 1,
      .completion = {on_complete, &completions[0]},
  };
  CHECK_OK(hrt_hal_device_queue_submit(device, &submission));
  CHECK_OK(submit(device, harmless, NULL, 0, &completions[1]));
  CHECK_OK(submit(device, harmless, NULL, 0, &completions[2]));
  if (g_cuda.fake) {
    // launch + event, then fill + event twice: all three are in flight.
    wait_for_queued(6);
    const int queued = g_cuda.queued_operations();
    g_cuda.hold_streams(0);  // before any check: a failed one must not leave them held
    CHECK_EQ_INT(queued, 6);
  }
  int unexpected = 0;
  for (int i = 0; i < 3; ++i) {
    hrt_status_t status = completion_wait(&completions[i]);
    if (i == 0) printf("  %s\n", hrt_status_message(status));
    const char* message = hrt_status_message(status);
    unexpected += hrt_status_code(status) != HRT_STATUS_DEVICE_LOST ||
                  !strstr(message, "CUDA device cuda://0 is lost: ") ||
                  !strstr(message, "CUDA_ERROR_ILLEGAL_ADDRESS");
    hrt_status_free(status);
  }
  CHECK_EQ_INT(unexpected, 0);
  uint64_t value = 0;
  CHECK_STATUS(hrt_hal_semaphore_query(signal, &value), HRT_STATUS_DEVICE_LOST,
               "CUDA_ERROR_ILLEGAL_ADDRESS");
  completion_t later;
  CHECK_STATUS(submit(device, harmless, NULL, 0, &later),
               HRT_STATUS_DEVICE_LOST, "CUDA_ERROR_ILLEGAL_ADDRESS");
  hrt_hal_buffer_t* more = NULL;
  CHECK_STATUS(hrt_hal_device_allocate_buffer(device, 4, NULL, &more),
               HRT_STATUS_DEVICE_LOST, "is lost");
  hrt_hal_executable_t* another = NULL;
  CHECK_STATUS(load_test_kernels(device, &another), HRT_STATUS_DEVICE_LOST,
               "is lost");
  // Everything is still released normally.
  hrt_hal_semaphore_release(signal);
  hrt_hal_command_buffer_release(faulty);
  hrt_hal_command_buffer_release(harmless);
  hrt_hal_buffer_release(buffer);
  hrt_hal_executable_release(executable);
  hrt_hal_device_release(device);
  // Once the lost device is gone (its completion thread may still hold the
  // last reference for a moment), a new device gets a new primary context.
  // The fake then works again; cuda.h says a process that saw a sticky
  // error must be relaunched, so on a GPU a failure is allowed (reported).
  wait_for_no_devices();
  hrt_status_t status = make_device("cuda", &device);
  if (status == HRT_OK) {
    status = hrt_hal_device_allocate_buffer(device, 8, NULL, &buffer);
    if (status == HRT_OK) {
      uint32_t out[2] = {1, 1};
      status = read_back(device, buffer, out);
      if (status == HRT_OK) CHECK_EQ_INT(out[0], 0);
      hrt_hal_buffer_release(buffer);
    }
    hrt_hal_device_release(device);
  }
  if (g_cuda.fake) {
    CHECK_OK(status);
  } else {
    printf("  a new device after the fault: %s\n",
           status == HRT_OK ? "works" : hrt_status_message(status));
    hrt_status_free(status);
  }
}

static void destroyed_context_loses_work_in_flight(void) {
  FAKE_ONLY();
  hrt_hal_device_t* device = NULL;
  CHECK_OK(make_device("cuda", &device));
  hrt_hal_buffer_t* buffer = NULL;
  CHECK_OK(hrt_hal_device_allocate_buffer(device, 64, NULL, &buffer));
  hrt_hal_command_buffer_t* cb = NULL;
  CHECK_OK(record_work(device, NULL, buffer, false, &cb));
  uint32_t settle[16];
  CHECK_OK(read_back(device, buffer, settle));  // nothing else in flight
  g_cuda.hold_streams(1);
  completion_t completions[2];
  CHECK_OK(submit(device, cb, NULL, 0, &completions[0]));
  CHECK_OK(submit(device, cb, NULL, 0, &completions[1]));
  wait_for_queued(4);
  g_cuda.destroy_contexts();
  g_cuda.hold_streams(0);
  for (int i = 0; i < 2; ++i) {
    CHECK_STATUS(completion_wait(&completions[i]), HRT_STATUS_DEVICE_LOST,
                 "CUDA_ERROR_CONTEXT_IS_DESTROYED");
  }
  hrt_hal_command_buffer_release(cb);
  hrt_hal_buffer_release(buffer);
  hrt_hal_device_release(device);
  wait_for_no_devices();  // the next case needs a healthy context
}

//===----------------------------------------------------------------------===//
// Trace copies on the trace stream
//===----------------------------------------------------------------------===//

// What the traces of one test saw, in the order their callbacks ran.
typedef struct {
  int calls;
  uint32_t first_words[8];    // each call's first word of its first range
  int completions_before[8];  // completions of the binary when it ran
} trace_log_t;

static hrt_status_t log_trace(void* user_data, void* submission_context,
                              uint32_t count, const void* const* data,
                              const uint64_t* lengths) {
  (void)submission_context;
  trace_log_t* log = user_data;
  if (log->calls < 8) {
    uint32_t word = 0;
    if (count && lengths[0] >= 4) memcpy(&word, data[0], 4);
    log->first_words[log->calls] = word;
    log->completions_before[log->calls] = atomic_load(&completion_counter);
  }
  ++log->calls;
  return HRT_OK;
}

// Makes a CUDA device and returns the fake's number of its main stream; its
// trace stream is the next (fakecuda.h). 0 when the device made another
// number of streams than those two.
static int make_traced_device(hrt_hal_device_t** out_device) {
  const int before = g_cuda.streams_created();
  hrt_status_t status = make_device("cuda", out_device);
  if (status != HRT_OK) {
    hrt_status_free(status);
    *out_device = NULL;
    return 0;
  }
  return g_cuda.streams_created() == before + 2 ? before + 1 : 0;
}

static fakecuda_stream_state_t stream_state(int serial) {
  fakecuda_stream_state_t state;
  g_cuda.stream_state(serial, &state);
  return state;
}

// Waits (10 s at most) until stream `serial` holds at least `count`
// operations: the issue thread has enqueued them.
static void wait_for_stream_operations(int serial, int count) {
  int64_t deadline = hrt_time_now_ns() + 10000000000LL;
  while (stream_state(serial).unfinished < count &&
         hrt_time_now_ns() < deadline) {
    struct timespec pause = {0, 1000000};
    nanosleep(&pause, NULL);
  }
}

// Waits (10 s at most) until stream `serial` can run nothing more: it has
// run everything, or its next operation waits for an event.
static fakecuda_stream_state_t wait_until_stream_stops(int serial) {
  int64_t deadline = hrt_time_now_ns() + 10000000000LL;
  fakecuda_stream_state_t state = stream_state(serial);
  while (state.unfinished != 0 && !state.waiting &&
         hrt_time_now_ns() < deadline) {
    struct timespec pause = {0, 1000000};
    nanosleep(&pause, NULL);
    state = stream_state(serial);
  }
  return state;
}

// A fill of a traced buffer enqueued after the trace waits for the trace's
// copy, so the trace shows the values from before the fill; the fill and
// a later trace still happen.
static void later_writers_wait_for_trace_copies(void) {
  FAKE_ONLY();
  hrt_hal_device_t* device = NULL;
  const int main_stream = make_traced_device(&device);
  CHECK(device != NULL);
  if (main_stream == 0) hrt_hal_device_release(device);
  CHECK(main_stream != 0);
  const int trace_stream = main_stream + 1;
  const uint32_t initial[4] = {1, 2, 3, 4};
  hrt_hal_buffer_t* buffer = NULL;
  CHECK_OK(hrt_hal_device_allocate_buffer(device, 16, initial, &buffer));
  uint32_t settle[4];
  CHECK_OK(read_back(device, buffer, settle));
  hrt_hal_command_buffer_t* cb = NULL;
  CHECK_OK(hrt_hal_command_buffer_create(device, &cb));
  trace_log_t log = {0};
  hrt_hal_buffer_ref_t traced = whole(buffer);
  uint32_t after[4] = {0, 0, 0, 0};
  CHECK_OK(hrt_hal_command_buffer_trace(cb, &traced, 1, log_trace, &log));
  CHECK_OK(hrt_hal_command_buffer_fill(cb, range(buffer, 4, 8), 9, 4));
  CHECK_OK(hrt_hal_command_buffer_trace(cb, &traced, 1, log_trace, &log));
  CHECK_OK(hrt_hal_command_buffer_read(cb, traced, after));
  hrt_hal_command_buffer_finalize(cb);
  g_cuda.hold_stream(trace_stream, 1);
  completion_t completion;
  hrt_status_t submitted = submit(device, cb, NULL, 0, &completion);
  fakecuda_stream_state_t held = {0};
  if (submitted == HRT_OK) {
    // Each trace: wait for the stream, copy, record.
    wait_for_stream_operations(trace_stream, 6);
    held = wait_until_stream_stops(main_stream);
  }
  g_cuda.hold_stream(trace_stream, 0);
  CHECK_OK(submitted);
  CHECK_OK(completion_wait(&completion));
  hrt_hal_command_buffer_release(cb);
  hrt_hal_buffer_release(buffer);
  hrt_hal_device_release(device);
  // The stream stopped at the fill, waiting for the held copy.
  CHECK_EQ_INT(held.waiting, 1);
  CHECK(held.unfinished > 0);
  CHECK_EQ_INT(log.calls, 2);
  CHECK_EQ_INT(log.first_words[0], 1);
  CHECK_EQ_INT(log.first_words[1], 1);
  CHECK_EQ_INT(after[1], 9);
  CHECK_EQ_INT(after[2], 9);
  CHECK_EQ_INT(after[3], 4);
}

// Commands that only read a traced buffer (a copy from it, a built-in
// dispatch whose read_only_bindings mark it, a read of it) run while the
// trace's copy is still held; the trace still reaches its callback before
// the submission completes.
static void later_readers_do_not_wait_for_trace_copies(void) {
  FAKE_ONLY();
  hrt_hal_device_t* device = NULL;
  const int main_stream = make_traced_device(&device);
  CHECK(device != NULL);
  if (main_stream == 0) hrt_hal_device_release(device);
  CHECK(main_stream != 0);
  const int trace_stream = main_stream + 1;
  hrt_hal_executable_params_t params = {.format =
                                            HRT_HAL_EXECUTABLE_FORMAT_BUILTIN};
  hrt_hal_executable_t* executable = NULL;
  CHECK_OK(hrt_hal_device_create_executable(device, &params, &executable));
  uint32_t add = 0;
  CHECK_OK(hrt_hal_executable_lookup(executable, "add_f32", &add));
  const float initial[4] = {5, 6, 7, 8};
  hrt_hal_buffer_t* buffer = NULL;
  hrt_hal_buffer_t* copy = NULL;
  hrt_hal_buffer_t* sum = NULL;
  CHECK_OK(hrt_hal_device_allocate_buffer(device, 16, initial, &buffer));
  CHECK_OK(hrt_hal_device_allocate_buffer(device, 16, NULL, &copy));
  CHECK_OK(hrt_hal_device_allocate_buffer(device, 16, NULL, &sum));
  float settle[4];
  CHECK_OK(read_back(device, sum, settle));
  hrt_hal_command_buffer_t* cb = NULL;
  CHECK_OK(hrt_hal_command_buffer_create(device, &cb));
  trace_log_t log = {0};
  hrt_hal_buffer_ref_t traced = whole(buffer);
  float read[4] = {0, 0, 0, 0};
  const uint32_t n = 4;
  hrt_hal_buffer_ref_t add_bindings[3] = {traced, traced, whole(sum)};
  // a and b read-only, as the program module marks a built-in's inputs.
  hrt_hal_dispatch_t twice = {executable, add, {1, 1, 1},    {64, 1, 1}, 1,
                              &n,         3,   add_bindings, 3};
  CHECK_OK(hrt_hal_command_buffer_trace(cb, &traced, 1, log_trace, &log));
  CHECK_OK(hrt_hal_command_buffer_copy(cb, traced, whole(copy)));
  CHECK_OK(hrt_hal_command_buffer_dispatch(cb, &twice));
  CHECK_OK(hrt_hal_command_buffer_read(cb, traced, read));
  hrt_hal_command_buffer_finalize(cb);
  g_cuda.hold_stream(trace_stream, 1);
  const int enqueued = stream_state(main_stream).enqueued;
  completion_t completion;
  hrt_status_t submitted = submit(device, cb, NULL, 0, &completion);
  fakecuda_stream_state_t ran = {0};
  int traced_while_held = 0;
  bool completed_while_held = false;
  if (submitted == HRT_OK) {
    // The stream: the trace's fork event, the copy, the launch, the read
    // and the final event; the trace stream: wait, copy, record.
    wait_for_stream_operations(trace_stream, 3);
    int64_t deadline = hrt_time_now_ns() + 10000000000LL;
    while (stream_state(main_stream).enqueued < enqueued + 5 &&
           hrt_time_now_ns() < deadline) {
      struct timespec pause = {0, 1000000};
      nanosleep(&pause, NULL);
    }
    ran = wait_until_stream_stops(main_stream);
    traced_while_held = log.calls;
    completed_while_held = hrt_notification_is_set(&completion.done);
  }
  g_cuda.hold_stream(trace_stream, 0);
  CHECK_OK(submitted);
  CHECK_OK(completion_wait(&completion));
  float copied[4] = {0, 0, 0, 0};
  float sums[4] = {0, 0, 0, 0};
  CHECK_OK(read_back(device, copy, copied));
  CHECK_OK(read_back(device, sum, sums));
  hrt_hal_command_buffer_release(cb);
  hrt_hal_buffer_release(buffer);
  hrt_hal_buffer_release(copy);
  hrt_hal_buffer_release(sum);
  hrt_hal_executable_release(executable);
  hrt_hal_device_release(device);
  // Everything on the stream ran with the trace copy held.
  CHECK_EQ_INT(ran.unfinished, 0);
  CHECK_EQ_INT(traced_while_held, 0);
  CHECK(!completed_while_held);
  CHECK_EQ_INT(log.calls, 1);
  float traced_first = 0;
  memcpy(&traced_first, &log.first_words[0], 4);
  CHECK(traced_first == 5);
  CHECK(log.completions_before[0] <= completion.order);
  CHECK(read[3] == 8);
  CHECK(copied[0] == 5 && copied[3] == 8);
  CHECK(sums[0] == 10 && sums[3] == 16);
}

// A summary trace is computed on the trace stream: with that held, a copy
// from the summarized buffer after it runs, a fill of it waits, and the
// summary is of the values before the fill.
static void summary_traces_make_later_writers_wait_not_readers(void) {
  FAKE_ONLY();
  hrt_hal_device_t* device = NULL;
  const int main_stream = make_traced_device(&device);
  CHECK(device != NULL);
  if (main_stream == 0) hrt_hal_device_release(device);
  CHECK(main_stream != 0);
  const int trace_stream = main_stream + 1;
  const float initial[4] = {1, 2, 3, 4};
  hrt_hal_buffer_t* buffer = NULL;
  hrt_hal_buffer_t* copy = NULL;
  CHECK_OK(hrt_hal_device_allocate_buffer(device, 16, initial, &buffer));
  CHECK_OK(hrt_hal_device_allocate_buffer(device, 16, NULL, &copy));
  float settle[4];
  CHECK_OK(read_back(device, copy, settle));
  hrt_hal_command_buffer_t* cb = NULL;
  CHECK_OK(hrt_hal_command_buffer_create(device, &cb));
  summary_log_t log;
  memset(&log, 0, sizeof(log));
  hrt_hal_buffer_ref_t traced = whole(buffer);
  const hrt_hal_element_type_t f32 = HRT_HAL_ELEMENT_TYPE_F32;
  float after[4] = {0, 0, 0, 0};
  CHECK_OK(hrt_hal_command_buffer_trace_mode(cb, HRT_HAL_TRACE_SUMMARY, &traced,
                                             &f32, 1, summary_log_trace, &log));
  CHECK_OK(hrt_hal_command_buffer_copy(cb, traced, whole(copy)));
  CHECK_OK(hrt_hal_command_buffer_fill(cb, traced, 0x41100000, 4));  // 9.0f
  CHECK_OK(hrt_hal_command_buffer_read(cb, traced, after));
  hrt_hal_command_buffer_finalize(cb);
  g_cuda.hold_stream(trace_stream, 1);
  const int enqueued = stream_state(main_stream).enqueued;
  completion_t completion;
  hrt_status_t submitted = submit(device, cb, NULL, 0, &completion);
  fakecuda_stream_state_t held = {0};
  if (submitted == HRT_OK) {
    wait_for_stream_operations(trace_stream, 3);
    // The stream reads as waiting once its next operation waits, which may
    // be while the copy before it still runs: wait for the copy too.
    int64_t deadline = hrt_time_now_ns() + 10000000000LL;
    held = wait_until_stream_stops(main_stream);
    while (held.enqueued - enqueued - held.unfinished < 2 &&
           hrt_time_now_ns() < deadline) {
      struct timespec pause = {0, 1000000};
      nanosleep(&pause, NULL);
      held = wait_until_stream_stops(main_stream);
    }
  }
  g_cuda.hold_stream(trace_stream, 0);
  CHECK_OK(submitted);
  CHECK_OK(completion_wait(&completion));
  float copied[4] = {0, 0, 0, 0};
  CHECK_OK(read_back(device, copy, copied));
  hrt_hal_command_buffer_release(cb);
  hrt_hal_buffer_release(buffer);
  hrt_hal_buffer_release(copy);
  hrt_hal_device_release(device);
  // The stream ran the trace's fork and the copy, then stopped at the fill.
  CHECK_EQ_INT(held.waiting, 1);
  CHECK(held.enqueued - enqueued - held.unfinished >= 2);
  CHECK(copied[0] == 1 && copied[3] == 4);
  CHECK_EQ_INT(log.calls, 1);
  CHECK_EQ_INT(log.lengths[0], sizeof(hrt_hal_tensor_summary_t));
  CHECK(log.summaries[0].min == 1 && log.summaries[0].max == 4);
  CHECK(log.summaries[0].sum == 10 && log.summaries[0].sum_squares == 30);
  CHECK(after[0] == 9 && after[3] == 9);
}

// Traces of two submissions, with writes of the traced buffer between
// them, reach their callbacks in program order, each before its own
// submission completes, and each shows the values of its point in the
// program: a writer in the second submission waits for the first one's
// trace too.
static void traces_keep_program_order_across_submissions(void) {
  FAKE_ONLY();
  hrt_hal_device_t* device = NULL;
  const int main_stream = make_traced_device(&device);
  CHECK(device != NULL);
  if (main_stream == 0) hrt_hal_device_release(device);
  CHECK(main_stream != 0);
  const int trace_stream = main_stream + 1;
  hrt_hal_buffer_t* buffer = NULL;
  CHECK_OK(hrt_hal_device_allocate_buffer(device, 64, NULL, &buffer));
  uint32_t settle[16];
  CHECK_OK(read_back(device, buffer, settle));
  trace_log_t log = {0};
  hrt_hal_buffer_ref_t traced = whole(buffer);
  hrt_hal_command_buffer_t* cbs[2] = {NULL, NULL};
  for (uint32_t i = 0; i < 2; ++i) {
    CHECK_OK(hrt_hal_command_buffer_create(device, &cbs[i]));
    // First: trace 0, fill 1, trace 1. Second: fill 2, trace 2, fill 3,
    // trace 3.
    if (i == 0) {
      CHECK_OK(
          hrt_hal_command_buffer_trace(cbs[i], &traced, 1, log_trace, &log));
    }
    for (uint32_t k = 0; k < 1 + i; ++k) {
      CHECK_OK(hrt_hal_command_buffer_fill(cbs[i], traced, i + k + 1, 4));
      CHECK_OK(
          hrt_hal_command_buffer_trace(cbs[i], &traced, 1, log_trace, &log));
    }
    hrt_hal_command_buffer_finalize(cbs[i]);
  }
  g_cuda.hold_stream(trace_stream, 1);
  completion_t completions[2];
  hrt_status_t submitted = submit(device, cbs[0], NULL, 0, &completions[0]);
  if (submitted == HRT_OK) {
    submitted = submit(device, cbs[1], NULL, 0, &completions[1]);
  }
  if (submitted == HRT_OK) {
    wait_for_stream_operations(trace_stream, 12);
    (void)wait_until_stream_stops(main_stream);
  }
  g_cuda.hold_stream(trace_stream, 0);
  CHECK_OK(submitted);
  CHECK_OK(completion_wait(&completions[0]));
  CHECK_OK(completion_wait(&completions[1]));
  hrt_hal_command_buffer_release(cbs[0]);
  hrt_hal_command_buffer_release(cbs[1]);
  hrt_hal_buffer_release(buffer);
  hrt_hal_device_release(device);
  CHECK_EQ_INT(log.calls, 4);
  for (int k = 0; k < 4; ++k) CHECK_EQ_INT(log.first_words[k], k);
  CHECK(completions[0].order < completions[1].order);
  CHECK(log.completions_before[1] <= completions[0].order);
  CHECK(log.completions_before[2] > completions[0].order);
  CHECK(log.completions_before[3] <= completions[1].order);
}

// A device released, or its context destroyed, while a trace's copy is
// held: the submission still completes (DEVICE_LOST without the trace when
// the context went), and the device is freed.
static void pending_trace_copies_survive_release_and_loss(void) {
  FAKE_ONLY();
  for (int lose = 0; lose < 2; ++lose) {
    hrt_hal_device_t* device = NULL;
    const int main_stream = make_traced_device(&device);
    CHECK(device != NULL);
    if (main_stream == 0) hrt_hal_device_release(device);
    CHECK(main_stream != 0);
    const int trace_stream = main_stream + 1;
    const uint32_t initial[2] = {42, 43};
    hrt_hal_buffer_t* buffer = NULL;
    hrt_hal_buffer_t* other = NULL;
    CHECK_OK(hrt_hal_device_allocate_buffer(device, 8, initial, &buffer));
    CHECK_OK(hrt_hal_device_allocate_buffer(device, 8, NULL, &other));
    uint32_t settle[2];
    CHECK_OK(read_back(device, other, settle));
    hrt_hal_command_buffer_t* cb = NULL;
    CHECK_OK(hrt_hal_command_buffer_create(device, &cb));
    trace_log_t log = {0};
    hrt_hal_buffer_ref_t traced = whole(buffer);
    CHECK_OK(hrt_hal_command_buffer_trace(cb, &traced, 1, log_trace, &log));
    CHECK_OK(hrt_hal_command_buffer_fill(cb, whole(other), 7, 4));
    hrt_hal_command_buffer_finalize(cb);
    g_cuda.hold_stream(trace_stream, 1);
    completion_t completion;
    hrt_status_t submitted = submit(device, cb, NULL, 0, &completion);
    // Only the submission holds the device and its buffers now.
    hrt_hal_command_buffer_release(cb);
    hrt_hal_buffer_release(buffer);
    hrt_hal_buffer_release(other);
    hrt_hal_device_release(device);
    if (submitted == HRT_OK) {
      wait_for_stream_operations(trace_stream, 3);
      (void)wait_until_stream_stops(main_stream);
      if (lose) g_cuda.destroy_contexts();
    }
    g_cuda.hold_stream(trace_stream, 0);
    CHECK_OK(submitted);
    hrt_status_t status = completion_wait(&completion);
    wait_for_no_devices();
    CHECK_EQ_INT(hrt_live_count(HRT_LIVE_DEVICE), 0);
    if (lose) {
      CHECK_STATUS(status, HRT_STATUS_DEVICE_LOST,
                   "CUDA_ERROR_CONTEXT_IS_DESTROYED");
      CHECK_EQ_INT(log.calls, 0);
    } else {
      CHECK_OK(status);
      CHECK_EQ_INT(log.calls, 1);
      CHECK_EQ_INT(log.first_words[0], 42);
    }
  }
}

// Figures for the GPU check (nothing is asserted about speed).
static void report_throughput(void) {
  CUDA_SETUP();
  if (g_cuda.fake) {
    printf("  (GPU only)\n");
    return;
  }
  enum { N = 64 << 20 };  // floats: 256 MiB per buffer
  hrt_hal_device_t* device = NULL;
  CHECK_OK(make_device("cuda", &device));
  hrt_hal_executable_params_t params = {.format =
                                            HRT_HAL_EXECUTABLE_FORMAT_BUILTIN};
  hrt_hal_executable_t* executable = NULL;
  CHECK_OK(hrt_hal_device_create_executable(device, &params, &executable));
  hrt_hal_buffer_t *a = NULL, *b = NULL, *c = NULL;
  CHECK_OK(hrt_hal_device_allocate_buffer(device, N * 4ull, NULL, &a));
  CHECK_OK(hrt_hal_device_allocate_buffer(device, N * 4ull, NULL, &b));
  CHECK_OK(hrt_hal_device_allocate_buffer(device, N * 4ull, NULL, &c));
  uint32_t add = 0, matmul = 0;
  CHECK_OK(hrt_hal_executable_lookup(executable, "add_f32", &add));
  CHECK_OK(hrt_hal_executable_lookup(executable, "matmul_f32", &matmul));
  const uint32_t n = N;
  const uint32_t shape[3] = {2048, 2048, 2048};
  hrt_hal_buffer_ref_t refs[3] = {whole(a), whole(b), whole(c)};
  const uint32_t sm = hrt_hal_device_info(device)->multiprocessor_count;
  hrt_hal_dispatch_t dispatches[2] = {
      {executable, add, {sm * 8, 1, 1}, {1, 1, 1}, 1, &n, 3, refs, 0},
      {executable, matmul, {128, 128, 1}, {1, 1, 1}, 3, shape, 3, refs, 0},
  };
  const char* labels[2] = {"add_f32 (GB/s)", "matmul_f32 2048^3 (GFLOP/s)"};
  const double work[2] = {3.0 * 4 * N / 1e9, 2.0 * 2048 * 2048 * 2048 / 1e9};
  for (int k = 0; k < 2; ++k) {
    hrt_hal_command_buffer_t* cb = NULL;
    CHECK_OK(hrt_hal_command_buffer_create(device, &cb));
    for (int r = 0; r < 10; ++r) {
      CHECK_OK(hrt_hal_command_buffer_dispatch(cb, &dispatches[k]));
    }
    hrt_hal_command_buffer_finalize(cb);
    CHECK_OK(run(device, cb, NULL, 0));  // warm up
    int64_t start = hrt_time_now_ns();
    CHECK_OK(run(device, cb, NULL, 0));
    double seconds = (double)(hrt_time_now_ns() - start) / 1e9;
    printf("  %-30s %10.1f\n", labels[k], 10 * work[k] / seconds);
    hrt_hal_command_buffer_release(cb);
  }
  hrt_hal_buffer_release(a);
  hrt_hal_buffer_release(b);
  hrt_hal_buffer_release(c);
  hrt_hal_executable_release(executable);
  hrt_hal_device_release(device);
}

//===----------------------------------------------------------------------===//
// The rules of the real driver that the fake enforces (docs/cuda.md). Each
// case makes the offending call itself, through the fake's entry points,
// where halrt never makes it; passing halrt's own cases under these rules
// is the other half of the check.
//===----------------------------------------------------------------------===//

// A context of the fake's device 1 (halrt's cases use device 0) with a
// stream, a recorded timing event, device and pinned memory, and the test
// kernels; the context stays current on the thread that opened it.
typedef struct {
  hrt_cu_context_t context;
  hrt_cu_stream_t stream;
  hrt_cu_event_t event;
  hrt_cu_deviceptr_t memory;  // 64 bytes
  void* host;                 // 64 pinned bytes
  char* ptx;
  hrt_cu_module_t module;
  hrt_cu_function_t function;  // write_index_u32(out, n)
} fixture_t;

enum { FIXTURE_DEVICE = 1, FIXTURE_BYTES = 64 };

static hrt_cu_result_t fixture_open(fixture_t* f) {
  memset(f, 0, sizeof(*f));
  f->ptx = read_file("test/gpu/kernels.ptx", NULL);
  if (!f->ptx) return HRT_CUDA_ERROR_NOT_FOUND;
  hrt_cu_result_t r = g_cu.cuInit(0);
  if (!r) r = g_cu.cuDevicePrimaryCtxRetain(&f->context, FIXTURE_DEVICE);
  if (!r) r = g_cu.cuCtxPushCurrent_v2(f->context);
  if (!r) r = g_cu.cuStreamCreate(&f->stream, HRT_CU_STREAM_NON_BLOCKING);
  if (!r) r = g_cu.cuEventCreate(&f->event, 0);
  if (!r) r = g_cu.cuEventRecord(f->event, f->stream);
  if (!r) r = g_cu.cuEventSynchronize(f->event);
  if (!r) r = g_cu.cuMemAlloc_v2(&f->memory, FIXTURE_BYTES);
  if (!r) r = g_cu.cuMemAllocHost_v2(&f->host, FIXTURE_BYTES);
  if (!r) r = g_cu.cuModuleLoadDataEx(&f->module, f->ptx, 0, NULL, NULL);
  if (!r) r = g_cu.cuModuleGetFunction(&f->function, f->module,
                                       "write_index_u32");
  return r;
}

// Launches write_index_u32 over the fixture's memory.
static hrt_cu_result_t fixture_launch(fixture_t* f, const unsigned grid[3],
                                      const unsigned block[3]) {
  uint32_t count = FIXTURE_BYTES / 4;
  void* params[2] = {&f->memory, &count};
  return g_cu.cuLaunchKernel(f->function, grid[0], grid[1], grid[2], block[0],
                             block[1], block[2], 0, f->stream, params, NULL);
}

// Destroys what fixture_open made, with its context current; returns the
// first error.
static hrt_cu_result_t fixture_close(fixture_t* f) {
  hrt_cu_result_t results[7] = {
      g_cu.cuModuleUnload(f->module),    g_cu.cuMemFreeHost(f->host),
      g_cu.cuMemFree_v2(f->memory),      g_cu.cuEventDestroy_v2(f->event),
      g_cu.cuStreamDestroy_v2(f->stream), HRT_CUDA_SUCCESS,
      HRT_CUDA_SUCCESS};
  hrt_cu_context_t popped = NULL;
  results[5] = g_cu.cuCtxPopCurrent_v2(&popped);
  results[6] = g_cu.cuDevicePrimaryCtxRelease_v2(FIXTURE_DEVICE);
  free(f->ptx);
  for (int i = 0; i < 7; ++i) {
    if (results[i]) return results[i];
  }
  return HRT_CUDA_SUCCESS;
}

// Every call that works in a context, made on a thread with none current;
// destroying calls last, so that a double that wrongly obeys them breaks
// nothing the others use.
enum { CONTEXT_CALLS = 24 };
static const char* const kContextCalls[CONTEXT_CALLS] = {
    "cuMemAlloc_v2",        "cuMemAllocHost_v2",
    "cuMemcpyHtoDAsync_v2", "cuMemcpyDtoHAsync_v2",
    "cuMemsetD8Async",      "cuStreamCreate",
    "cuStreamSynchronize",  "cuEventCreate",
    "cuEventRecord",        "cuEventSynchronize",
    "cuEventElapsedTime",   "cuModuleLoadDataEx",
    "cuModuleGetFunction",  "cuModuleGetFunctionCount",
    "cuFuncGetName",        "cuFuncGetParamInfo",
    "cuLaunchKernel",       "cuStreamWaitEvent",
    "cuMemAllocAsync",      "cuMemFree_v2",
    "cuMemFreeAsync",       "cuMemFreeHost",
    "cuEventDestroy_v2",    "cuModuleUnload"};

typedef struct {
  fixture_t* fixture;
  hrt_cu_result_t results[CONTEXT_CALLS];
  hrt_cu_result_t stream_destroy;
} context_calls_t;

static void* make_calls_without_context(void* arg) {
  context_calls_t* calls = arg;
  fixture_t* f = calls->fixture;
  hrt_cu_result_t* r = calls->results;
  hrt_cu_deviceptr_t memory = 0;
  void* host = NULL;
  hrt_cu_stream_t stream = NULL;
  hrt_cu_event_t event = NULL;
  hrt_cu_module_t module = NULL;
  hrt_cu_function_t function = NULL;
  unsigned int count = 0;
  const char* name = NULL;
  size_t offset = 0, size = 0;
  float milliseconds = 0;
  const unsigned one[3] = {1, 1, 1};
  r[0] = g_cu.cuMemAlloc_v2(&memory, 16);
  r[1] = g_cu.cuMemAllocHost_v2(&host, 16);
  r[2] = g_cu.cuMemcpyHtoDAsync_v2(f->memory, f->host, 4, f->stream);
  r[3] = g_cu.cuMemcpyDtoHAsync_v2(f->host, f->memory, 4, f->stream);
  r[4] = g_cu.cuMemsetD8Async(f->memory, 0, 4, f->stream);
  r[5] = g_cu.cuStreamCreate(&stream, 0);
  r[6] = g_cu.cuStreamSynchronize(f->stream);
  r[7] = g_cu.cuEventCreate(&event, 0);
  r[8] = g_cu.cuEventRecord(f->event, f->stream);
  r[9] = g_cu.cuEventSynchronize(f->event);
  r[10] = g_cu.cuEventElapsedTime(&milliseconds, f->event, f->event);
  r[11] = g_cu.cuModuleLoadDataEx(&module, f->ptx, 0, NULL, NULL);
  r[12] = g_cu.cuModuleGetFunction(&function, f->module, "write_index_u32");
  r[13] = g_cu.cuModuleGetFunctionCount(&count, f->module);
  r[14] = g_cu.cuFuncGetName(&name, f->function);
  r[15] = g_cu.cuFuncGetParamInfo(f->function, 0, &offset, &size);
  r[16] = fixture_launch(f, one, one);
  r[17] = g_cu.cuStreamWaitEvent(f->stream, f->event, 0);
  r[18] = g_cu.cuMemAllocAsync(&memory, 16, f->stream);
  r[19] = g_cu.cuMemFree_v2(f->memory);
  r[20] = g_cu.cuMemFreeAsync(f->memory, f->stream);
  r[21] = g_cu.cuMemFreeHost(f->host);
  r[22] = g_cu.cuEventDestroy_v2(f->event);
  r[23] = g_cu.cuModuleUnload(f->module);
  calls->stream_destroy = g_cu.cuStreamDestroy_v2(f->stream);
  return NULL;
}

static void fake_refuses_calls_without_a_current_context(void) {
  FAKE_ONLY();
  fixture_t f;
  CHECK_EQ_INT(fixture_open(&f), HRT_CUDA_SUCCESS);
  context_calls_t calls = {.fixture = &f};
  pthread_t thread;
  CHECK(pthread_create(&thread, NULL, make_calls_without_context, &calls) ==
        0);
  pthread_join(thread, NULL);
  int wrong = 0;
  for (int i = 0; i < CONTEXT_CALLS; ++i) {
    if (calls.results[i] != HRT_CUDA_ERROR_INVALID_CONTEXT) {
      fprintf(stderr, "  %s without a context returned %d\n",
              kContextCalls[i], calls.results[i]);
      ++wrong;
    }
  }
  CHECK_EQ_INT(wrong, 0);
  CHECK_EQ_INT(calls.stream_destroy, HRT_CUDA_ERROR_INVALID_CONTEXT);
  // Refused calls changed nothing: everything is still there to destroy.
  CHECK_EQ_INT(fixture_close(&f), HRT_CUDA_SUCCESS);
}

// Every error cuda.h calls unrecoverable ("any further CUDA work will return
// the same error", "must be terminated and relaunched"), ASSERT and the
// fake's CONTEXT_IS_DESTROYED: once a launch fails with it, every later call
// in the context returns it, destroying calls included; a new primary
// context (after the last release) is healthy.
static void sticky_errors_stay_with_the_context(void) {
  FAKE_ONLY();
  static const hrt_cu_result_t kSticky[] = {226, 700, 702, 709, 710, 714,
                                            715, 716, 717, 718, 719, 721,
                                            810, 911};
  const unsigned one[3] = {1, 1, 1};
  for (size_t k = 0; k < sizeof(kSticky) / sizeof(kSticky[0]); ++k) {
    const hrt_cu_result_t code = kSticky[k];
    fixture_t f;
    CHECK_EQ_INT(fixture_open(&f), HRT_CUDA_SUCCESS);
    g_cuda.fail_next_launch(code);
    CHECK_EQ_INT(fixture_launch(&f, one, one), code);
    hrt_cu_deviceptr_t memory = 0;
    hrt_cu_function_t function = NULL;
    unsigned int count = 0;
    size_t offset = 0, size = 0;
    float milliseconds = 0;
    const hrt_cu_result_t later[] = {
        g_cu.cuMemAlloc_v2(&memory, 16),
        g_cu.cuMemsetD8Async(f.memory, 0, 4, f.stream),
        g_cu.cuEventRecord(f.event, f.stream),
        g_cu.cuEventSynchronize(f.event),
        g_cu.cuEventElapsedTime(&milliseconds, f.event, f.event),
        g_cu.cuStreamSynchronize(f.stream),
        g_cu.cuModuleGetFunction(&function, f.module, "write_index_u32"),
        g_cu.cuModuleGetFunctionCount(&count, f.module),
        g_cu.cuFuncGetParamInfo(f.function, 0, &offset, &size),
        fixture_launch(&f, one, one),
    };
    for (size_t i = 0; i < sizeof(later) / sizeof(later[0]); ++i) {
      if (later[i] != code) {
        fprintf(stderr, "  after %d, call %zu returned %d\n", code, i,
                later[i]);
      }
      CHECK_EQ_INT(later[i], code);
    }
    // The destroying calls destroy and still answer with the error.
    CHECK_EQ_INT(fixture_close(&f), code);
  }
  fixture_t fresh;
  CHECK_EQ_INT(fixture_open(&fresh), HRT_CUDA_SUCCESS);
  CHECK_EQ_INT(fixture_launch(&fresh, one, one), HRT_CUDA_SUCCESS);
  CHECK_EQ_INT(g_cu.cuStreamSynchronize(fresh.stream), HRT_CUDA_SUCCESS);
  CHECK_EQ_INT(fixture_close(&fresh), HRT_CUDA_SUCCESS);
}

// cuda.h: cuEventElapsedTime on an event created with
// CU_EVENT_DISABLE_TIMING is CUDA_ERROR_INVALID_HANDLE, even once both were
// reached; two timing events give a time.
static void elapsed_time_needs_timing_events(void) {
  FAKE_ONLY();
  fixture_t f;
  CHECK_EQ_INT(fixture_open(&f), HRT_CUDA_SUCCESS);
  hrt_cu_event_t untimed = NULL, timed = NULL;
  CHECK_EQ_INT(g_cu.cuEventCreate(&untimed, HRT_CU_EVENT_BLOCKING_SYNC |
                                                HRT_CU_EVENT_DISABLE_TIMING),
               HRT_CUDA_SUCCESS);
  CHECK_EQ_INT(g_cu.cuEventCreate(&timed, HRT_CU_EVENT_BLOCKING_SYNC),
               HRT_CUDA_SUCCESS);
  CHECK_EQ_INT(g_cu.cuEventRecord(untimed, f.stream), HRT_CUDA_SUCCESS);
  CHECK_EQ_INT(g_cu.cuEventRecord(timed, f.stream), HRT_CUDA_SUCCESS);
  CHECK_EQ_INT(g_cu.cuEventSynchronize(timed), HRT_CUDA_SUCCESS);
  CHECK_EQ_INT(g_cu.cuEventSynchronize(untimed), HRT_CUDA_SUCCESS);
  float milliseconds = -1;
  CHECK_EQ_INT(g_cu.cuEventElapsedTime(&milliseconds, untimed, timed),
               HRT_CUDA_ERROR_INVALID_HANDLE);
  CHECK_EQ_INT(g_cu.cuEventElapsedTime(&milliseconds, f.event, untimed),
               HRT_CUDA_ERROR_INVALID_HANDLE);
  CHECK(milliseconds == -1);  // untouched
  CHECK_EQ_INT(g_cu.cuEventElapsedTime(&milliseconds, f.event, timed),
               HRT_CUDA_SUCCESS);
  CHECK(milliseconds >= 0);
  CHECK_EQ_INT(g_cu.cuEventDestroy_v2(untimed), HRT_CUDA_SUCCESS);
  CHECK_EQ_INT(g_cu.cuEventDestroy_v2(timed), HRT_CUDA_SUCCESS);
  CHECK_EQ_INT(fixture_close(&f), HRT_CUDA_SUCCESS);
}

// cuLaunchKernel's limits: grid x <= 2^31-1, y and z <= 65535; block x and
// y <= 1024, z <= 64, and at most 1024 threads; anything past them is
// CUDA_ERROR_INVALID_VALUE, and the limits themselves launch.
static void launches_past_the_grid_and_block_limits_are_invalid(void) {
  FAKE_ONLY();
  fixture_t f;
  CHECK_EQ_INT(fixture_open(&f), HRT_CUDA_SUCCESS);
  static const struct {
    unsigned grid[3], block[3];
    hrt_cu_result_t result;
  } kLaunches[] = {
      {{2147483647u, 1, 1}, {1, 1, 1}, HRT_CUDA_SUCCESS},
      {{1, 65535, 65535}, {1, 1, 1}, HRT_CUDA_SUCCESS},
      {{1, 1, 1}, {1024, 1, 1}, HRT_CUDA_SUCCESS},
      {{1, 1, 1}, {1, 1024, 1}, HRT_CUDA_SUCCESS},
      {{1, 1, 1}, {16, 1, 64}, HRT_CUDA_SUCCESS},
      {{2147483648u, 1, 1}, {1, 1, 1}, HRT_CUDA_ERROR_INVALID_VALUE},
      {{1, 65536, 1}, {1, 1, 1}, HRT_CUDA_ERROR_INVALID_VALUE},
      {{1, 70000, 1}, {16, 1, 1}, HRT_CUDA_ERROR_INVALID_VALUE},
      {{1, 1, 65536}, {1, 1, 1}, HRT_CUDA_ERROR_INVALID_VALUE},
      {{1, 1, 1}, {1025, 1, 1}, HRT_CUDA_ERROR_INVALID_VALUE},
      {{1, 1, 1}, {1, 1025, 1}, HRT_CUDA_ERROR_INVALID_VALUE},
      {{1, 1, 1}, {1, 1, 65}, HRT_CUDA_ERROR_INVALID_VALUE},
      {{1, 1, 1}, {32, 32, 2}, HRT_CUDA_ERROR_INVALID_VALUE},
      {{1, 0, 1}, {1, 1, 1}, HRT_CUDA_ERROR_INVALID_VALUE},
  };
  for (size_t i = 0; i < sizeof(kLaunches) / sizeof(kLaunches[0]); ++i) {
    hrt_cu_result_t result =
        fixture_launch(&f, kLaunches[i].grid, kLaunches[i].block);
    if (result != kLaunches[i].result) {
      fprintf(stderr, "  grid %ux%ux%u block %ux%ux%u: %d\n",
              kLaunches[i].grid[0], kLaunches[i].grid[1],
              kLaunches[i].grid[2], kLaunches[i].block[0],
              kLaunches[i].block[1], kLaunches[i].block[2], result);
    }
    CHECK_EQ_INT(result, kLaunches[i].result);
  }
  // A rejected launch is not sticky.
  CHECK_EQ_INT(g_cu.cuStreamSynchronize(f.stream), HRT_CUDA_SUCCESS);
  CHECK_EQ_INT(fixture_close(&f), HRT_CUDA_SUCCESS);
}

// Through halrt (and on a GPU too): a workgroup count past CUDA's grid
// limit is refused when recorded; a workgroup size past the block limits
// that halrt does not check itself (z <= 64, for every device) fails its
// submission with the driver's reason, naming the kernel, grid and block;
// the device keeps working either way.
static void dispatch_past_the_launch_limits_fails_cleanly(void) {
  CUDA_SETUP();
  write_index_t w;
  CHECK_OK(write_index_open(&w));
  w.dispatch.workgroup_count[1] = 70000;
  CHECK_STATUS(write_index_record(&w), HRT_STATUS_INVALID_ARGUMENT,
               "kernel 'write_index_u32': workgroup count[1] = 70000 must be "
               "in [1, 65535]");
  w.dispatch.workgroup_count[1] = 1;
  w.dispatch.workgroup_size[0] = 1;
  w.dispatch.workgroup_size[2] = 65;
  CHECK_OK(write_index_record(&w));
  hrt_status_t status = run(w.device, w.cb, NULL, 0);
  printf("  %s\n", hrt_status_message(status));
  CHECK_STATUS(status, HRT_STATUS_INVALID_ARGUMENT,
               "command 0 (dispatch): kernel 'write_index_u32' of executable "
               "'ptx' (grid 1x1x1, block 1x1x65): cuLaunchKernel failed: "
               "CUDA_ERROR_INVALID_VALUE");
  w.dispatch.workgroup_size[0] = 16;
  w.dispatch.workgroup_size[2] = 1;
  CHECK_OK(write_index_record(&w));
  CHECK_OK(write_index_run(&w));
  write_index_close(&w);
}

// The driver tells images apart by their first bytes and reads a cubin (an
// ELF file) and a fatbin (magic 0xBA55ED50) by their headers, not as PTX:
// the committed images load, with each kernel's parameters from the image;
// a corrupt header, or one whose sizes cut the image short, is
// CUDA_ERROR_INVALID_IMAGE; a fatbin without code for the GPU is
// CUDA_ERROR_NO_BINARY_FOR_GPU.
static void images_are_read_by_their_headers(void) {
  FAKE_ONLY();
  fixture_t f;
  CHECK_EQ_INT(fixture_open(&f), HRT_CUDA_SUCCESS);
  size_t lengths[2] = {0, 0};
  char* images[2] = {read_file("test/gpu/kernels_sm90.cubin", &lengths[0]),
                     read_file("test/gpu/kernels_sm90.fatbin", &lengths[1])};
  CHECK(images[0] && images[1]);
  for (int i = 0; i < 2; ++i) {
    hrt_cu_module_t module = NULL;
    hrt_cu_function_t function = NULL;
    unsigned int count = 0;
    size_t offset = 0, size = 0;
    CHECK_EQ_INT(g_cu.cuModuleLoadDataEx(&module, images[i], 0, NULL, NULL),
                 HRT_CUDA_SUCCESS);
    CHECK_EQ_INT(g_cu.cuModuleGetFunctionCount(&count, module),
                 HRT_CUDA_SUCCESS);
    CHECK_EQ_INT(count, 4);
    CHECK_EQ_INT(
        g_cu.cuModuleGetFunction(&function, module, "write_index_u32"),
        HRT_CUDA_SUCCESS);
    CHECK_EQ_INT(g_cu.cuFuncGetParamInfo(function, 0, &offset, &size),
                 HRT_CUDA_SUCCESS);
    CHECK(offset == 0 && size == 8);
    CHECK_EQ_INT(g_cu.cuFuncGetParamInfo(function, 1, &offset, &size),
                 HRT_CUDA_SUCCESS);
    CHECK(offset == 8 && size == 4);
    CHECK_EQ_INT(g_cu.cuFuncGetParamInfo(function, 2, &offset, &size),
                 HRT_CUDA_ERROR_INVALID_VALUE);
    CHECK_EQ_INT(g_cu.cuModuleUnload(module), HRT_CUDA_SUCCESS);
  }
  // Offsets: the cubin's ELF header; the fatbin's header (16 bytes), then
  // its first entry, the sm_90 cubin (kind, version, header size, payload
  // size, ..., SM at byte 28).
  static const struct {
    const char* what;
    int image;  // 0 cubin, 1 fatbin
    size_t offset, bytes;
    uint64_t value;
    hrt_cu_result_t result;
  } kDamage[] = {
      {"32-bit ELF", 0, 4, 1, 1, HRT_CUDA_ERROR_INVALID_IMAGE},
      {"big-endian ELF", 0, 5, 1, 2, HRT_CUDA_ERROR_INVALID_IMAGE},
      {"x86-64 ELF", 0, 18, 2, 62, HRT_CUDA_ERROR_INVALID_IMAGE},
      {"ELF section header size 40", 0, 58, 2, 40,
       HRT_CUDA_ERROR_INVALID_IMAGE},
      {"ELF section names out of range", 0, 62, 2, 200,
       HRT_CUDA_ERROR_INVALID_IMAGE},
      {"fatbin version 2", 1, 4, 2, 2, HRT_CUDA_ERROR_INVALID_IMAGE},
      {"fatbin header size 8", 1, 6, 2, 8, HRT_CUDA_ERROR_INVALID_IMAGE},
      {"fatbin cut inside its cubin", 1, 8, 8, 1000,
       HRT_CUDA_ERROR_INVALID_IMAGE},
      {"cubin entry cut before its section table", 1, 24, 8, 4000,
       HRT_CUDA_ERROR_INVALID_IMAGE},
      {"fatbin for sm_80 only", 1, 44, 4, 80,
       HRT_CUDA_ERROR_NO_BINARY_FOR_GPU},
  };
  for (size_t k = 0; k < sizeof(kDamage) / sizeof(kDamage[0]); ++k) {
    const int i = kDamage[k].image;
    char* copy = malloc(lengths[i]);
    CHECK(copy != NULL);
    memcpy(copy, images[i], lengths[i]);
    memcpy(copy + kDamage[k].offset, &kDamage[k].value, kDamage[k].bytes);
    hrt_cu_module_t module = NULL;
    hrt_cu_result_t result =
        g_cu.cuModuleLoadDataEx(&module, copy, 0, NULL, NULL);
    free(copy);
    if (result != kDamage[k].result) {
      fprintf(stderr, "  %s: %d\n", kDamage[k].what, result);
      if (!result) (void)g_cu.cuModuleUnload(module);
    }
    CHECK_EQ_INT(result, kDamage[k].result);
  }
  free(images[0]);
  free(images[1]);
  CHECK_EQ_INT(fixture_close(&f), HRT_CUDA_SUCCESS);
}

// Parameter sizes come from the image, as the driver reports them through
// cuFuncGetParamInfo: a cubin whose write_index_u32 takes its count as a
// 12-byte struct by value (its EIATTR_KPARAM_INFO edited) is reported so,
// and halrt, which passes only 8-byte pointers and 4-byte constants,
// refuses the executable naming the parameter instead of launching it.
static void by_value_params_are_sized_as_the_image_says(void) {
  FAKE_ONLY();
  size_t length = 0;
  char* cubin = read_file("test/gpu/kernels_sm90.cubin", &length);
  CHECK(cubin != NULL);
  // write_index_u32's parameter 1 (.nv.info.write_index_u32 at 0xd24):
  // attribute 0x17, 12 bytes: index 0, ordinal 1, offset 8, size 4 << 18.
  static const uint8_t kParam1[16] = {0x04, 0x17, 0x0c, 0x00, 0, 0, 0, 0,
                                      0x01, 0x00, 0x08, 0x00, 0x00, 0xf0,
                                      0x11, 0x00};
  const size_t at = 0xd2c;
  CHECK(length > at + 16 && memcmp(cubin + at, kParam1, 16) == 0);
  const uint32_t twelve = (12u << 18) | 0xf000u;
  memcpy(cubin + at + 12, &twelve, 4);
  fixture_t f;
  CHECK_EQ_INT(fixture_open(&f), HRT_CUDA_SUCCESS);
  hrt_cu_module_t module = NULL;
  hrt_cu_function_t function = NULL;
  size_t offset = 0, size = 0;
  CHECK_EQ_INT(g_cu.cuModuleLoadDataEx(&module, cubin, 0, NULL, NULL),
               HRT_CUDA_SUCCESS);
  CHECK_EQ_INT(g_cu.cuModuleGetFunction(&function, module, "write_index_u32"),
               HRT_CUDA_SUCCESS);
  CHECK_EQ_INT(g_cu.cuFuncGetParamInfo(function, 1, &offset, &size),
               HRT_CUDA_SUCCESS);
  CHECK(offset == 8 && size == 12);
  CHECK_EQ_INT(g_cu.cuModuleUnload(module), HRT_CUDA_SUCCESS);
  // PTX parameters are sized by their types, arrays by their length.
  static const char kPtx[] =
      ".version 7.0\n.target sm_90\n.address_size 64\n"
      ".visible .entry write_index_u32(.param .u64 .ptr .align 8 out,\n"
      "  .param .align 4 .b8 s[12], .param .f64 a, .param .u16 h)\n{ ret; }\n";
  CHECK_EQ_INT(g_cu.cuModuleLoadDataEx(&module, kPtx, 0, NULL, NULL),
               HRT_CUDA_SUCCESS);
  CHECK_EQ_INT(g_cu.cuModuleGetFunction(&function, module, "write_index_u32"),
               HRT_CUDA_SUCCESS);
  static const size_t kSizes[4] = {8, 12, 8, 2};
  for (size_t i = 0, at = 0; i < 4; at += kSizes[i++]) {
    CHECK_EQ_INT(g_cu.cuFuncGetParamInfo(function, i, &offset, &size),
                 HRT_CUDA_SUCCESS);
    CHECK(offset == at && size == kSizes[i]);
  }
  CHECK_EQ_INT(g_cu.cuModuleUnload(module), HRT_CUDA_SUCCESS);
  CHECK_EQ_INT(fixture_close(&f), HRT_CUDA_SUCCESS);
  hrt_hal_device_t* device = NULL;
  CHECK_OK(make_device("cuda", &device));
  hrt_hal_executable_params_t params = {
      .format = HRT_HAL_EXECUTABLE_FORMAT_CUBIN,
      .data = cubin,
      .data_length = length};
  hrt_hal_executable_t* executable = NULL;
  hrt_status_t status =
      hrt_hal_device_create_executable(device, &params, &executable);
  printf("  %s\n", hrt_status_message(status));
  CHECK_STATUS(status, HRT_STATUS_INVALID_ARGUMENT,
               "kernel 'write_index_u32': parameter 1 is 12 bytes");
  // Declared, the struct mismatches its 'u32'.
  params.entry_decl_count = 1;
  params.entry_decls = &kTestKernelDecls[1];  // write_index_u32
  CHECK_STATUS(hrt_hal_device_create_executable(device, &params, &executable),
               HRT_STATUS_INVALID_ARGUMENT,
               "cubin: kernel 'write_index_u32': parameter 1 is declared "
               "'u32' (4 bytes) but is 12 bytes in the cubin");
  // A driver without cuFuncGetParamInfo (before CUDA 12.4) cannot check:
  // the declaration is trusted, and an undeclared layout is UNIMPLEMENTED.
  const hrt_cuda_symbols_t* loaded = NULL;
  CHECK_OK(hrt_cuda_symbols_load(&loaded));
  hrt_cuda_symbols_t old = *loaded;
  old.cuFuncGetParamInfo = NULL;
  CHECK_EQ_INT(fixture_open(&f), HRT_CUDA_SUCCESS);
  CHECK_OK(hrt_cuda_executable_create(device, &old, &params,
                                      &executable));
  CHECK_EQ_INT(executable->entries[0].binding_count, 1);
  CHECK_EQ_INT(executable->entries[0].constant_count, 1);
  hrt_hal_executable_release(executable);
  const hrt_hal_entry_decl_t untyped = {"write_index_u32", NULL, false, 0,
                                        NULL};
  params.entry_decls = &untyped;
  CHECK_STATUS(
      hrt_cuda_executable_create(device, &old, &params, &executable),
      HRT_STATUS_UNIMPLEMENTED,
      "kernel 'write_index_u32': the module does not declare its "
      "parameters, and this driver cannot list them");
  CHECK_EQ_INT(fixture_close(&f), HRT_CUDA_SUCCESS);
  free(cubin);
  hrt_hal_device_release(device);
}

//===----------------------------------------------------------------------===//
// Device memory (cuda_allocator.h), on the fake: its counts show which
// calls were made, and on which side of the work
//===----------------------------------------------------------------------===//

static fakecuda_memory_t fake_memory(void) {
  fakecuda_memory_t memory;
  g_cuda.memory(&memory);
  return memory;
}

// A context made current on this thread and a stream in it, for the cases
// that drive an allocator directly.
typedef struct {
  const hrt_cuda_symbols_t* cu;
  hrt_cu_device_t device;
  hrt_cu_context_t context;
  hrt_cu_stream_t stream;
} raw_stream_t;

static hrt_status_t raw_open(raw_stream_t* raw) {
  memset(raw, 0, sizeof(*raw));
  HRT_RETURN_IF_ERROR(hrt_cuda_symbols_load(&raw->cu));
  const hrt_cuda_symbols_t* cu = raw->cu;
  HRT_RETURN_IF_ERROR(HRT_CUDA_CALL(cu, cuDeviceGet, (&raw->device, 0)));
  HRT_RETURN_IF_ERROR(HRT_CUDA_CALL(cu, cuDevicePrimaryCtxRetain,
                                    (&raw->context, raw->device)));
  HRT_RETURN_IF_ERROR(HRT_CUDA_CALL(cu, cuCtxPushCurrent_v2, (raw->context)));
  return HRT_CUDA_CALL(cu, cuStreamCreate,
                       (&raw->stream, HRT_CU_STREAM_NON_BLOCKING));
}

static void raw_close(raw_stream_t* raw) {
  hrt_cu_context_t popped = NULL;
  (void)raw->cu->cuStreamDestroy_v2(raw->stream);
  (void)raw->cu->cuCtxPopCurrent_v2(&popped);
  (void)raw->cu->cuDevicePrimaryCtxRelease_v2(raw->device);
}

// Initialises `allocator` as a driver with (`pools`) or without memory
// pools would have it (FAKECUDA_NO_MEMORY_POOLS).
static void allocator_open(const raw_stream_t* raw, bool pools,
                           hrt_cuda_allocator_t* allocator) {
  if (!pools) setenv("FAKECUDA_NO_MEMORY_POOLS", "1", 1);
  hrt_cuda_allocator_initialize(raw->cu, raw->device, raw->stream, allocator);
  unsetenv("FAKECUDA_NO_MEMORY_POOLS");
}

// A CUDA device as a driver with or without memory pools makes it.
static hrt_status_t make_device_with_pools(bool pools, hrt_hal_device_t** out) {
  if (!pools) setenv("FAKECUDA_NO_MEMORY_POOLS", "1", 1);
  hrt_status_t status = make_device("cuda", out);
  unsetenv("FAKECUDA_NO_MEMORY_POOLS");
  return status;
}

// Waits up to 5 s for the fake to hold `count` live device allocations;
// returns how many it holds.
static long long wait_for_allocations(long long count) {
  int64_t deadline = hrt_time_now_ns() + 5000000000LL;
  while (fake_memory().allocations != count && hrt_time_now_ns() < deadline) {
    struct timespec pause = {0, 1000000};
    nanosleep(&pause, NULL);
  }
  return fake_memory().allocations;
}

// Without pools: freed blocks are kept for requests they fit (at least the
// request rounded to the granule, at most twice it), within the count and
// byte bounds; the rest waits for release_pending; trim frees the cache;
// nothing but those two calls cuMemFree.
static void allocator_cache_reuses_blocks_within_its_bounds(void) {
  FAKE_ONLY();
  wait_for_no_devices();  // a device of an earlier case trims the fake's pool as it ends
  raw_stream_t raw;
  CHECK_OK(raw_open(&raw));
  hrt_cuda_allocator_t allocator;
  allocator_open(&raw, false, &allocator);
  CHECK(!hrt_cuda_allocator_uses_pool(&allocator));
  const fakecuda_memory_t before = fake_memory();
  hrt_cuda_block_t* block = NULL;
  CHECK_OK(hrt_cuda_allocator_allocate(&allocator, 3000, &block));
  CHECK_EQ_INT(block->size, 3072);
  const hrt_cu_deviceptr_t first = block->pointer;
  CHECK(!hrt_cuda_allocator_free(&allocator, block));
  CHECK_OK(hrt_cuda_allocator_allocate(&allocator, 2000, &block));
  CHECK(block->pointer == first);  // 3072 serves 2048: the same block
  CHECK(!hrt_cuda_allocator_free(&allocator, block));
  CHECK_OK(hrt_cuda_allocator_allocate(&allocator, 1000, &block));
  CHECK(block->pointer != first);  // 3072 is more than twice 1024
  CHECK_EQ_INT(block->size, 1024);
  const hrt_cu_deviceptr_t small = block->pointer;
  CHECK(!hrt_cuda_allocator_free(&allocator, block));
  CHECK_OK(hrt_cuda_allocator_allocate(&allocator, 0, &block));
  CHECK(block->pointer == small);  // zero bytes: one granule, in 1024
  CHECK(!hrt_cuda_allocator_free(&allocator, block));
  fakecuda_memory_t now = fake_memory();
  CHECK_EQ_INT(now.mem_alloc_calls - before.mem_alloc_calls, 2);
  CHECK_EQ_INT(now.mem_free_calls, before.mem_free_calls);
  hrt_cuda_allocator_trim(&allocator);
  CHECK_EQ_INT(fake_memory().mem_free_calls - before.mem_free_calls, 2);
  CHECK_EQ_INT(fake_memory().allocations, before.allocations);

  // The count bound: the block after HRT_CUDA_ALLOCATOR_MAX_CACHED waits.
  hrt_cuda_block_t* blocks[HRT_CUDA_ALLOCATOR_MAX_CACHED + 1];
  for (int i = 0; i <= HRT_CUDA_ALLOCATOR_MAX_CACHED; ++i) {
    CHECK_OK(hrt_cuda_allocator_allocate(&allocator, 512, &blocks[i]));
  }
  for (int i = 0; i < HRT_CUDA_ALLOCATOR_MAX_CACHED; ++i) {
    CHECK(!hrt_cuda_allocator_free(&allocator, blocks[i]));
  }
  CHECK(hrt_cuda_allocator_free(&allocator,
                                blocks[HRT_CUDA_ALLOCATOR_MAX_CACHED]));
  now = fake_memory();
  CHECK_EQ_INT(now.mem_free_calls - before.mem_free_calls, 2);
  hrt_cuda_allocator_release_pending(&allocator);
  CHECK_EQ_INT(fake_memory().mem_free_calls - now.mem_free_calls, 1);
  hrt_cuda_allocator_trim(&allocator);
  CHECK_EQ_INT(fake_memory().mem_free_calls - now.mem_free_calls,
               1 + HRT_CUDA_ALLOCATOR_MAX_CACHED);

  // The byte bound.
  hrt_cuda_block_t* big = NULL;
  hrt_cuda_block_t* more = NULL;
  CHECK_OK(hrt_cuda_allocator_allocate(&allocator, 200 << 20, &big));
  CHECK_OK(hrt_cuda_allocator_allocate(&allocator, 100 << 20, &more));
  CHECK(!hrt_cuda_allocator_free(&allocator, big));
  CHECK(hrt_cuda_allocator_free(&allocator, more));  // 300 MiB > 256 MiB
  hrt_cuda_allocator_release_pending(&allocator);

  // Out of memory: the cache is handed to release_pending, so that a
  // retry can have the memory.
  CHECK_STATUS(hrt_cuda_allocator_allocate(&allocator, (size_t)2 << 30, &big),
               HRT_STATUS_RESOURCE_EXHAUSTED, "CUDA_ERROR_OUT_OF_MEMORY");
  now = fake_memory();
  CHECK_EQ_INT(now.allocations, before.allocations + 1);  // the 200 MiB
  hrt_cuda_allocator_release_pending(&allocator);
  CHECK_EQ_INT(fake_memory().allocations, before.allocations);
  hrt_cuda_allocator_deinitialize(&allocator);
  raw_close(&raw);
}

// With pools: blocks come from the default pool with cuMemAllocAsync and go
// back with cuMemFreeAsync; the release threshold keeps freed memory in the
// pool across synchronisations (for reuse) until trim.
static void allocator_pool_keeps_freed_memory_until_trimmed(void) {
  FAKE_ONLY();
  wait_for_no_devices();  // a device of an earlier case trims the fake's pool as it ends
  raw_stream_t raw;
  CHECK_OK(raw_open(&raw));
  hrt_cuda_allocator_t allocator;
  allocator_open(&raw, true, &allocator);
  CHECK(hrt_cuda_allocator_uses_pool(&allocator));
  const fakecuda_memory_t before = fake_memory();
  CHECK(before.release_threshold == UINT64_MAX);
  hrt_cuda_block_t* block = NULL;
  CHECK_OK(hrt_cuda_allocator_allocate(&allocator, 1 << 20, &block));
  const hrt_cu_deviceptr_t first = block->pointer;
  CHECK(!hrt_cuda_allocator_free(&allocator, block));
  CHECK_OK(HRT_CUDA_CALL(raw.cu, cuStreamSynchronize, (raw.stream)));
  fakecuda_memory_t now = fake_memory();
  CHECK_EQ_INT(now.alloc_async_calls - before.alloc_async_calls, 1);
  CHECK_EQ_INT(now.free_async_calls - before.free_async_calls, 1);
  CHECK_EQ_INT(now.allocations, before.allocations);
  CHECK_EQ_INT(now.pool_reserved_bytes - before.pool_reserved_bytes, 1 << 20);
  CHECK_OK(hrt_cuda_allocator_allocate(&allocator, 1 << 20, &block));
  CHECK(block->pointer == first);  // reused from the pool
  CHECK(!hrt_cuda_allocator_free(&allocator, block));
  CHECK_OK(HRT_CUDA_CALL(raw.cu, cuStreamSynchronize, (raw.stream)));
  CHECK_EQ_INT(fake_memory().pool_reserved_bytes - before.pool_reserved_bytes,
               1 << 20);
  CHECK_EQ_INT(fake_memory().mem_alloc_calls, before.mem_alloc_calls);
  hrt_cuda_allocator_trim(&allocator);
  now = fake_memory();
  CHECK_EQ_INT(now.trims - before.trims, 1);
  CHECK_EQ_INT(now.pool_reserved_bytes, before.pool_reserved_bytes);
  CHECK_EQ_INT(now.mem_free_calls, before.mem_free_calls);
  hrt_cuda_allocator_deinitialize(&allocator);
  raw_close(&raw);
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
    g_cuda.hold_streams(1);
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
    g_cuda.hold_streams(0);
    CHECK_EQ_INT(now.mem_free_calls, before.mem_free_calls);
    CHECK_EQ_INT(now.allocations, before.allocations + 2);  // still valid
    CHECK_OK(completion_wait(&completion));
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
    hrt_hal_device_release(device);
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
    hrt_hal_device_release(device);
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
  CHECK_OK(hrt_hal_device_allocate_buffer(device, 4096, NULL, &buffer));
  hrt_hal_command_buffer_t* cb = NULL;
  CHECK_OK(hrt_hal_command_buffer_create(device, &cb));
  CHECK_OK(hrt_hal_command_buffer_fill(cb, whole(buffer), 7, 4));
  hrt_hal_command_buffer_finalize(cb);
  g_cuda.hold_streams(1);
  completion_t completion;
  CHECK_OK(submit(device, cb, NULL, 0, &completion));
  // The GPU is busy for 800 ms.
  struct timespec busy = {0, 800000000};
  nanosleep(&busy, NULL);
  const long long trims = fake_memory().trims;
  // The work ends after this (however late the completion reaches this
  // thread), so the trim is at least 500 ms after it.
  const int64_t done = hrt_time_now_ns();
  g_cuda.hold_streams(0);
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
  hrt_hal_command_buffer_release(cb);
  hrt_hal_buffer_release(buffer);
  hrt_hal_device_release(device);
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
  g_cuda.hold_streams(1);
  hrt_hal_buffer_t* buffer = NULL;
  CHECK_OK(hrt_hal_device_allocate_buffer(device, 4 << 20, NULL, &buffer));
  hrt_hal_buffer_release(buffer);  // its free waits in the stream
  struct timespec held = {0, 800000000};
  nanosleep(&held, NULL);
  const long long trims_while_held = fake_memory().trims;
  g_cuda.hold_streams(0);
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
  hrt_hal_device_release(device);
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
  CHECK_OK(make_device_with_pools(true, &device));
  const fakecuda_memory_t before = fake_memory();
  g_cuda.hold_streams(1);
  hrt_hal_buffer_t* buffer = NULL;
  CHECK_OK(hrt_hal_device_allocate_buffer(device, 4 << 20, NULL, &buffer));
  hrt_hal_buffer_release(buffer);  // its free waits in the stream
  hrt_hal_device_release(device);
  struct timespec pause = {0, 100000000};
  nanosleep(&pause, NULL);
  g_cuda.hold_streams(0);
  const int64_t deadline = hrt_time_now_ns() + 5000000000LL;
  while (hrt_live_count(HRT_LIVE_DEVICE) != 1 && hrt_time_now_ns() < deadline) {
    nanosleep(&(struct timespec){0, 1000000}, NULL);
  }
  CHECK_EQ_INT(hrt_live_count(HRT_LIVE_DEVICE), 1);
  const fakecuda_memory_t now = fake_memory();
  CHECK_EQ_INT(now.free_async_calls - before.free_async_calls, 1);
  CHECK_EQ_INT(now.pool_reserved_bytes, before.pool_reserved_bytes);
  hrt_hal_device_release(keeper);
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
    CHECK_OK(hrt_hal_device_allocate_buffer(device, sizeof(data), data, &kept));
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
    hrt_hal_buffer_release(kept);
    hrt_hal_device_release(device);
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
    CHECK_OK(make_device("cuda", &device));
    hrt_hal_buffer_t* buffer = NULL;
    const uint32_t data[4] = {1, 2, 3, 4};
    CHECK_OK(
        hrt_hal_device_allocate_buffer(device, sizeof(data), data, &buffer));
    g_cuda.destroy_contexts();
    hrt_hal_buffer_t* more = NULL;
    CHECK_STATUS(hrt_hal_device_allocate_buffer(device, 16, data, &more),
                 HRT_STATUS_DEVICE_LOST, "CUDA_ERROR_CONTEXT_IS_DESTROYED");
    hrt_hal_buffer_release(buffer);
    // The last reference: no submission holds one.
    hrt_hal_device_release(device);
    CHECK_OK(make_device("cuda", &device));
    CHECK_OK(
        hrt_hal_device_allocate_buffer(device, sizeof(data), data, &buffer));
    uint32_t out[4] = {0, 0, 0, 0};
    CHECK_OK(read_back(device, buffer, out));
    CHECK_EQ_INT(out[3], 4);
    hrt_hal_buffer_release(buffer);
    hrt_hal_device_release(device);
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
    CHECK_OK(hrt_hal_device_allocate_buffer(device, 0, NULL, &buffers[0]));
    CHECK_OK(hrt_hal_device_allocate_buffer(device, 0, data, &buffers[1]));
    for (int i = 0; i < 2; ++i) {
      CHECK_EQ_INT(buffers[i]->byte_length, 0);
      CHECK_OK(run_fill(device, whole(buffers[i]), 0x55, 1));
      char out[1] = {9};
      CHECK_OK(read_back(device, buffers[i], out));
      CHECK_EQ_INT(out[0], 9);  // nothing read
    }
    CHECK_EQ_INT(fake_memory().allocations, live + 2);
    hrt_hal_buffer_release(buffers[0]);
    hrt_hal_buffer_release(buffers[1]);
    hrt_hal_device_release(device);
    wait_for_no_devices();
    CHECK_EQ_INT(wait_for_allocations(live), live);
  }
}

// The names halrt loads are those cuda.h maps each API to (`#define cuX
// cuX_v2`, per-stream variants unwrapped: halrt uses the legacy default
// stream), read from the installed header at test time: an entry loaded
// under an older name than the header's would get the old ABI from a new
// driver. An older name may stay only beside the new one, as a fallback.
// The name `#define api TARGET` in `header` maps `api` to (TARGET with
// __CUDA_API_PTSZ/PTDS unwrapped), copied to `out`; or `api` itself.
static void header_name(const char* header, const char* api, char* out,
                        size_t size) {
  snprintf(out, size, "%s", api);
  const size_t length = strlen(api);
  for (const char* line = header; line; line = strchr(line, '\n')) {
    line += *line == '\n';
    const char* c = line + strspn(line, " \t");
    if (strncmp(c, "#define", 7) != 0) continue;
    c += 7;
    c += strspn(c, " \t");
    if (strncmp(c, api, length) != 0 || (c[length] != ' ' && c[length] != '\t')) {
      continue;
    }
    c += length;
    c += strspn(c, " \t");
    if (strncmp(c, "__CUDA_API_PTSZ(", 16) == 0 ||
        strncmp(c, "__CUDA_API_PTDS(", 16) == 0) {
      c += 16;
    }
    size_t n = strcspn(c, " \t\r\n)");
    if (n >= size) n = size - 1;
    memcpy(out, c, n);
    out[n] = 0;
    return;
  }
}

static void symbol_names_match_cuda_h(void) {
  const char* path = getenv("HRT_TEST_CUDA_HEADER");
  if (!path) path = "/usr/local/cuda/include/cuda.h";
  FILE* file = fopen(path, "rb");
  if (!file) {
    printf("  (skipped: no CUDA header at %s; set HRT_TEST_CUDA_HEADER)\n",
           path);
    return;
  }
  fseek(file, 0, SEEK_END);
  long length = ftell(file);
  fseek(file, 0, SEEK_SET);
  char* header = malloc((size_t)length + 1);
  size_t got = header ? fread(header, 1, (size_t)length, file) : 0;
  fclose(file);
  CHECK(header != NULL);
  header[got] = 0;
  static const char* const kTable[] = {
#define TABLE_NAME(name, params) #name,
#define TABLE_EITHER(field, newer, older, params) #newer, #older,
      HRT_CUDA_SYMBOLS(TABLE_NAME, TABLE_NAME, TABLE_EITHER)
#undef TABLE_EITHER
#undef TABLE_NAME
  };
  const size_t count = sizeof(kTable) / sizeof(kTable[0]);
  int wrong = 0;
  for (size_t i = 0; i < count; ++i) {
    // The API: the entry's name without a _vN suffix.
    char api[128];
    snprintf(api, sizeof(api), "%s", kTable[i]);
    char* suffix = strstr(api, "_v");
    if (suffix && suffix[2] >= '0' && suffix[2] <= '9' &&
        strspn(suffix + 2, "0123456789") == strlen(suffix + 2)) {
      *suffix = 0;
    }
    char declared[160];
    snprintf(declared, sizeof(declared), "CUDAAPI %s(", api);
    if (!strstr(header, declared)) {
      fprintf(stderr, "  %s: cuda.h declares no %s\n", kTable[i], api);
      ++wrong;
      continue;
    }
    char expected[128];
    header_name(header, api, expected, sizeof(expected));
    if (strcmp(kTable[i], expected) == 0) continue;
    bool fallback = false;
    for (size_t j = 0; j < count; ++j) {
      fallback = fallback || strcmp(kTable[j], expected) == 0;
    }
    if (fallback && strcmp(kTable[i], api) == 0) continue;
    fprintf(stderr, "  halrt loads %s; cuda.h maps %s to %s\n", kTable[i],
            api, expected);
    ++wrong;
  }
  printf("  %zu entries checked against %s\n", count, path);
  free(header);
  CHECK_EQ_INT(wrong, 0);
}

// Runs one trace of `buffer` in `mode` (f32) on `device`.
static hrt_status_t run_trace_f32(hrt_hal_device_t* device,
                                  hrt_hal_buffer_t* buffer,
                                  hrt_hal_trace_mode_t mode,
                                  summary_log_t* log) {
  hrt_hal_command_buffer_t* cb = NULL;
  HRT_RETURN_IF_ERROR(hrt_hal_command_buffer_create(device, &cb));
  hrt_hal_buffer_ref_t source = whole(buffer);
  const hrt_hal_element_type_t f32 = HRT_HAL_ELEMENT_TYPE_F32;
  return run_recorded(device, cb,
                      hrt_hal_command_buffer_trace_mode(
                          cb, mode, &source, &f32, 1, summary_log_trace, log));
}

// The summary scratch is one cuMemAlloc, made at the device's first summary
// trace (not for a full trace), reused by later ones, and freed with the
// device.
static void summary_scratch_is_made_once_and_freed_with_the_device(void) {
  FAKE_ONLY();
  // Devices of earlier cases may still be freeing theirs.
  const long long live_before = wait_for_allocations(0);
  hrt_hal_device_t* device = NULL;
  CHECK_OK(make_device_with_pools(true, &device));
  const float values[4] = {1, -2, 3, NAN};
  hrt_hal_buffer_t* buffer = NULL;
  CHECK_OK(hrt_hal_device_allocate_buffer(device, 16, values, &buffer));
  summary_log_t full, summary, health;
  memset(&full, 0, sizeof(full));
  memset(&summary, 0, sizeof(summary));
  memset(&health, 0, sizeof(health));
  const long long calls_before = fake_memory().mem_alloc_calls;
  CHECK_OK(run_trace_f32(device, buffer, HRT_HAL_TRACE_FULL, &full));
  const long long calls_after_full = fake_memory().mem_alloc_calls;
  CHECK_OK(run_trace_f32(device, buffer, HRT_HAL_TRACE_SUMMARY, &summary));
  CHECK_OK(run_trace_f32(device, buffer, HRT_HAL_TRACE_HEALTH, &health));
  const long long calls_after = fake_memory().mem_alloc_calls;
  hrt_hal_buffer_release(buffer);
  hrt_hal_device_release(device);
  CHECK_EQ_INT(calls_after_full, calls_before);
  CHECK_EQ_INT(calls_after, calls_before + 1);
  CHECK_EQ_INT(wait_for_allocations(live_before), live_before);
  CHECK_EQ_INT(full.lengths[0], 16);
  CHECK(summary.summaries[0].sum == 2 && summary.summaries[0].nan_count == 1);
  CHECK(health.summaries[0].nan_count == 1 && isnan(health.summaries[0].sum));
}

// Summary and health traces of every dtype, with every special value, a
// sub-range, an empty range, all NaNs and 3 MiB, computed on the device,
// equal the host's element-by-element fold.
static void traces_summarize_every_dtype(void) {
  CUDA_SETUP();
  hrt_hal_device_t* device = NULL;
  CHECK_OK(make_device("cuda", &device));
  check_trace_summaries(device);
  hrt_hal_device_release(device);
}

TEST_MAIN(TEST_CASE(cuda_is_unavailable_with_the_reason),
          TEST_CASE(elapsed_time_prefers_the_v2_name_and_falls_back),
          TEST_CASE(sticky_results_match_cuda_h),
          TEST_CASE(driver_results_map_to_status_codes),
          TEST_CASE(results_are_named_without_the_driver),
          TEST_CASE(device_info_describes_the_gpu),
          TEST_CASE(completions_run_off_the_submitting_thread),
          TEST_CASE(commands_round_trip_bytes),
          TEST_CASE(large_fills_write_every_element),
          TEST_CASE(builtin_kernels_match_the_cpu_device),
          TEST_CASE(builtin_dispatches_are_checked_before_launch),
          TEST_CASE(dispatch_spans_many_workgroups),
          TEST_CASE(reused_command_buffer_runs_on_new_bindings),
          TEST_CASE(traces_deliver_staged_data_after_preceding_work),
          TEST_CASE(bad_executables_are_rejected_with_the_reason),
          TEST_CASE(ptx_entries_count_bindings_then_constants),
          TEST_CASE(ptx_entry_prototypes_are_not_entries),
          TEST_CASE(ptx_opaque_parameters_fail_only_their_entry),
          TEST_CASE(declared_entry_names_are_unique),
          TEST_CASE(ptx_declarations_are_checked_against_param_types),
          TEST_CASE(cubin_and_fatbin_headers_are_checked_before_loading),
          TEST_CASE(cubin_and_fatbin_kernels_come_from_the_driver),
          TEST_CASE(cubin_declarations_are_checked_by_size),
          TEST_CASE(builtin_ptx_is_current),
          TEST_CASE(submissions_wait_for_semaphores),
          TEST_CASE(out_of_memory_is_recoverable),
          TEST_CASE(failed_launch_fails_only_its_submission),
          TEST_CASE(device_released_on_its_completion_thread_is_destroyed),
          TEST_CASE(report_throughput),
          TEST_CASE(illegal_address_loses_the_device),
          TEST_CASE(destroyed_context_loses_work_in_flight),
          TEST_CASE(later_writers_wait_for_trace_copies),
          TEST_CASE(later_readers_do_not_wait_for_trace_copies),
          TEST_CASE(traces_keep_program_order_across_submissions),
          TEST_CASE(pending_trace_copies_survive_release_and_loss),
          TEST_CASE(fake_refuses_calls_without_a_current_context),
          TEST_CASE(sticky_errors_stay_with_the_context),
          TEST_CASE(elapsed_time_needs_timing_events),
          TEST_CASE(launches_past_the_grid_and_block_limits_are_invalid),
          TEST_CASE(dispatch_past_the_launch_limits_fails_cleanly),
          TEST_CASE(images_are_read_by_their_headers),
          TEST_CASE(by_value_params_are_sized_as_the_image_says),
          TEST_CASE(symbol_names_match_cuda_h),
          TEST_CASE(allocator_cache_reuses_blocks_within_its_bounds),
          TEST_CASE(allocator_pool_keeps_freed_memory_until_trimmed),
          TEST_CASE(memory_is_freed_after_its_last_use),
          TEST_CASE(idle_devices_give_memory_back),
          TEST_CASE(idle_time_counts_from_the_end_of_work),
          TEST_CASE(idle_trim_waits_for_queued_frees),
          TEST_CASE(destroyed_device_trims_after_its_queued_frees),
          TEST_CASE(memory_of_a_lost_device_is_released),
          TEST_CASE(device_made_after_a_lost_one_is_healthy),
          TEST_CASE(zero_byte_buffers_have_an_address),
          TEST_CASE(traces_summarize_every_dtype),
          TEST_CASE(summary_traces_make_later_writers_wait_not_readers),
          TEST_CASE(summary_scratch_is_made_once_and_freed_with_the_device),
          TEST_CASE(every_object_is_destroyed))
