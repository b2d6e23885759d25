// docs/cuda.md, "Finding CUDA": a missing or unusable driver library (in
// child processes: the library is chosen once per process, so these cases
// run before any other loads it), the entry points resolved from it, and
// the names and status codes of the driver's results.
#include <dlfcn.h>
#include <stdbool.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cuda_fixture.h"
#include "hal/cuda/cuda_driver.h"

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

TEST_SUITE(cuda_finding,
           TEST_CASE(cuda_is_unavailable_with_the_reason),
           TEST_CASE(elapsed_time_prefers_the_v2_name_and_falls_back),
           TEST_CASE(sticky_results_match_cuda_h),
           TEST_CASE(driver_results_map_to_status_codes),
           TEST_CASE(results_are_named_without_the_driver));
