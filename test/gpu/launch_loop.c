// The floor under halrt's per-dispatch cost: the same tiny kernel that
// test/gpu/checks.js dispatches through halrt (write_index_u32 of
// test/gpu/kernels.ptx, one block of 32 threads writing 32 words), launched
// with cuLaunchKernel in a plain loop on one stream.
//
//   launch_loop KERNELS_PTX [LAUNCHES] [ROUNDS]
//
// Each round launches the kernel LAUNCHES times (default 1000) and then
// synchronizes the stream once, and launches it once and synchronizes; the
// medians over ROUNDS rounds (default 20, after one warm-up round) are
// printed as one line of JSON:
//   {"launches":N,"rounds":R,"loopUs":..,"singleUs":..,"usPerLaunch":..,
//    "marginalUs":..,"check":"ok"}
// usPerLaunch = loop time / N; marginalUs = (loop - single) / (N - 1), the
// cost of one more launch, comparable to checks.js's marginal figure.
// "check" says whether the output holds 0..31 afterwards.
//
// The driver library is the one halrt would load: HALRT_CUDA_LIBRARY when
// set (the test double in test/gpu/run.sh's dry run), else libcuda.so.1,
// then libcuda.so. Types and entry names come from halrt's own table
// (src/hal/cuda/cuda_api.h), so no CUDA toolkit is needed to build this:
//   cc -std=c11 -O2 -D_GNU_SOURCE -Isrc test/gpu/launch_loop.c -ldl -o ...
// (test/gpu/run.sh builds it into build/gpu/ when missing).
// Exit status 0 on success; 1 with a message on stderr naming the failed
// call otherwise.
#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hal/cuda/cuda_api.h"

static struct {
#define LOOP_ENTRY(name, params) hrt_cu_result_t(*name) params;
#define LOOP_ENTRY_EITHER(field, newer, older, params) LOOP_ENTRY(field, params)
  HRT_CUDA_SYMBOLS(LOOP_ENTRY, LOOP_ENTRY, LOOP_ENTRY_EITHER)
#undef LOOP_ENTRY_EITHER
#undef LOOP_ENTRY
} cu;

// Resolves every entry of the table that exists; the caller checks the ones
// it uses.
static void resolve(void* handle) {
#define LOOP_RESOLVE_AS(field, name)              \
  {                                               \
    void* address = dlsym(handle, #name);         \
    if (address && !cu.field) {                   \
      memcpy(&cu.field, &address, sizeof(void*)); \
    }                                             \
  }
#define LOOP_RESOLVE(name, params) LOOP_RESOLVE_AS(name, name)
#define LOOP_RESOLVE_EITHER(field, newer, older, params) \
  LOOP_RESOLVE_AS(field, newer) LOOP_RESOLVE_AS(field, older)
  HRT_CUDA_SYMBOLS(LOOP_RESOLVE, LOOP_RESOLVE, LOOP_RESOLVE_EITHER)
#undef LOOP_RESOLVE_EITHER
#undef LOOP_RESOLVE
#undef LOOP_RESOLVE_AS
}

static int fail(const char* what, hrt_cu_result_t result) {
  const char* name = NULL;
  if (!cu.cuGetErrorName || cu.cuGetErrorName(result, &name) != 0) name = NULL;
  fprintf(stderr, "launch_loop: %s failed: %s (CUresult %d)\n", what,
          name ? name : "unnamed", result);
  return 1;
}

#define CALL(call)                                                \
  do {                                                            \
    hrt_cu_result_t result_ = (call);                             \
    if (result_ != HRT_CUDA_SUCCESS) return fail(#call, result_); \
  } while (0)

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static int compare_doubles(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

static double median(double* values, int count) {
  qsort(values, (size_t)count, sizeof(double), compare_doubles);
  return values[count / 2];
}

static char* read_text(const char* path) {
  FILE* file = fopen(path, "rb");
  if (!file) return NULL;
  char* text = NULL;
  if (fseek(file, 0, SEEK_END) == 0) {
    long length = ftell(file);
    if (length >= 0 && fseek(file, 0, SEEK_SET) == 0) {
      text = malloc((size_t)length + 1);
      if (text && fread(text, 1, (size_t)length, file) == (size_t)length) {
        text[length] = 0;
      } else {
        free(text);
        text = NULL;
      }
    }
  }
  fclose(file);
  return text;
}

enum { WORDS = 32 };

// Launches write_index_u32 `count` times on `stream`, then waits for them.
static int launch_and_wait(hrt_cu_function_t function, hrt_cu_stream_t stream,
                           hrt_cu_deviceptr_t* out, int count) {
  uint32_t words = WORDS;
  void* params[2] = {out, &words};
  for (int i = 0; i < count; ++i) {
    CALL(cu.cuLaunchKernel(function, 1, 1, 1, WORDS, 1, 1, 0, stream, params,
                           NULL));
  }
  CALL(cu.cuStreamSynchronize(stream));
  return 0;
}

// Everything after loading the library, with the context current; frees
// what it made on every path.
static int measure(const char* ptx, int launches, int rounds) {
  hrt_cu_device_t device = 0;
  hrt_cu_context_t context = NULL;
  CALL(cu.cuInit(0));
  CALL(cu.cuDeviceGet(&device, 0));
  CALL(cu.cuDevicePrimaryCtxRetain(&context, device));
  int status = 1;
  hrt_cu_stream_t stream = NULL;
  hrt_cu_module_t module = NULL;
  hrt_cu_deviceptr_t out = 0;
  hrt_cu_function_t function = NULL;
  double* loop = calloc((size_t)rounds, sizeof(double));
  double* single = calloc((size_t)rounds, sizeof(double));
  const char* what = "cuCtxSetCurrent";
  hrt_cu_result_t r = cu.cuCtxSetCurrent(context);
  if (!r) {
    what = "cuStreamCreate";
    r = cu.cuStreamCreate(&stream, HRT_CU_STREAM_NON_BLOCKING);
  }
  if (!r) {
    what = "cuModuleLoadDataEx";
    r = cu.cuModuleLoadDataEx(&module, ptx, 0, NULL, NULL);
  }
  if (!r) {
    what = "cuModuleGetFunction(write_index_u32)";
    r = cu.cuModuleGetFunction(&function, module, "write_index_u32");
  }
  if (!r) {
    what = "cuMemAlloc_v2";
    r = cu.cuMemAlloc_v2(&out, WORDS * sizeof(uint32_t));
  }
  if (r) {
    fail(what, r);
  } else if (!loop || !single) {
    fprintf(stderr, "launch_loop: out of memory\n");
  } else if (launch_and_wait(function, stream, &out, launches) == 0) {
    int round = 0;
    for (; round < rounds; ++round) {
      double start = now_us();
      if (launch_and_wait(function, stream, &out, launches)) break;
      double middle = now_us();
      if (launch_and_wait(function, stream, &out, 1)) break;
      loop[round] = middle - start;
      single[round] = now_us() - middle;
    }
    uint32_t words[WORDS] = {0};
    void* host = NULL;
    hrt_cu_result_t copied = HRT_CUDA_SUCCESS;
    if (round == rounds) {
      copied = cu.cuMemAllocHost_v2(&host, sizeof(words));
      if (!copied) {
        copied = cu.cuMemcpyDtoHAsync_v2(host, out, sizeof(words), stream);
      }
      if (!copied) copied = cu.cuStreamSynchronize(stream);
      if (!copied) memcpy(words, host, sizeof(words));
      if (host) cu.cuMemFreeHost(host);
      if (copied) fail("reading the output back", copied);
    }
    if (round == rounds && !copied) {
      bool ok = true;
      for (uint32_t i = 0; i < WORDS; ++i) ok = ok && words[i] == i;
      double loop_us = median(loop, rounds);
      double single_us = median(single, rounds);
      printf(
          "{\"launches\":%d,\"rounds\":%d,\"loopUs\":%.3f,\"singleUs\":%.3f,"
          "\"usPerLaunch\":%.4f,\"marginalUs\":%.4f,\"check\":\"%s\"}\n",
          launches, rounds, loop_us, single_us, loop_us / launches,
          (loop_us - single_us) / (launches - 1), ok ? "ok" : "wrong output");
      status = ok ? 0 : 1;
    }
  }
  free(loop);
  free(single);
  if (out) cu.cuMemFree_v2(out);
  if (module) cu.cuModuleUnload(module);
  if (stream) cu.cuStreamDestroy_v2(stream);
  cu.cuDevicePrimaryCtxRelease_v2(device);
  return status;
}

int main(int argc, char** argv) {
  if (argc < 2 || argc > 4) {
    fprintf(stderr, "usage: launch_loop KERNELS_PTX [LAUNCHES] [ROUNDS]\n");
    return 2;
  }
  const int launches = argc > 2 ? atoi(argv[2]) : 1000;
  const int rounds = argc > 3 ? atoi(argv[3]) : 20;
  if (launches < 2 || launches > 1000000 || rounds < 1 || rounds > 10000) {
    fprintf(stderr,
            "launch_loop: LAUNCHES must be in [2, 1000000] and ROUNDS in "
            "[1, 10000]\n");
    return 2;
  }
  const char* override = getenv("HALRT_CUDA_LIBRARY");
  void* handle = NULL;
  if (override) {
    handle = dlopen(override, RTLD_NOW | RTLD_LOCAL);
  } else {
    handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!handle) handle = dlopen("libcuda.so", RTLD_NOW | RTLD_LOCAL);
  }
  if (!handle) {
    fprintf(stderr, "launch_loop: cannot load the CUDA driver: %s\n",
            dlerror());
    return 1;
  }
  resolve(handle);
  if (!cu.cuInit || !cu.cuDeviceGet || !cu.cuDevicePrimaryCtxRetain ||
      !cu.cuDevicePrimaryCtxRelease_v2 || !cu.cuCtxSetCurrent ||
      !cu.cuStreamCreate || !cu.cuStreamDestroy_v2 || !cu.cuStreamSynchronize ||
      !cu.cuModuleLoadDataEx || !cu.cuModuleUnload || !cu.cuModuleGetFunction ||
      !cu.cuMemAlloc_v2 || !cu.cuMemFree_v2 || !cu.cuMemAllocHost_v2 ||
      !cu.cuMemFreeHost || !cu.cuMemcpyDtoHAsync_v2 || !cu.cuLaunchKernel) {
    fprintf(stderr, "launch_loop: the driver library lacks an entry point\n");
    return 1;
  }
  char* ptx = read_text(argv[1]);
  if (!ptx) {
    fprintf(stderr, "launch_loop: cannot read %s\n", argv[1]);
    return 1;
  }
  int status = measure(ptx, launches, rounds);
  free(ptx);
  return status;
}
