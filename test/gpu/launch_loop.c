// The floors under halrt's CUDA costs, measured with the driver alone (the
// CUDA rows of bench/run.js and test/gpu/checks.js's launch check).
//
//   launch_loop KERNELS_PTX [LAUNCHES] [ROUNDS]
//
// The floor under halrt's per-dispatch cost: the same tiny kernel that
// bench/cuda.js dispatches through halrt (write_index_u32 of
// test/gpu/kernels.ptx, one block of 32 threads writing 32 words), launched
// with cuLaunchKernel in a plain loop on one stream. Each round launches the
// kernel LAUNCHES times (default 1000) and then synchronizes the stream
// once, and launches it once and synchronizes; the medians over ROUNDS
// rounds (default 20, after one warm-up round) are printed as one line of
// JSON:
//   {"launches":N,"rounds":R,"loopUs":..,"singleUs":..,"usPerLaunch":..,
//    "marginalUs":..,"check":"ok"}
// usPerLaunch = loop time / N; marginalUs = (loop - single) / (N - 1), the
// cost of one more launch, comparable to bench/cuda.js's marginal figure.
// "check" says whether the output holds 0..31 afterwards.
//
//   launch_loop --d2h BYTES [COPIES] [ROUNDS]
//
// The floor under a traced tensor's copy to the host: each round copies a
// device buffer of BYTES into pinned host memory (cuMemAllocHost) COPIES
// times (default 8) with cuMemcpyDtoHAsync on one stream, then synchronizes
// the stream; the median round over ROUNDS rounds (default 9, after one
// warm-up round) is printed as one line of JSON:
//   {"bytes":B,"copies":C,"rounds":R,"roundUs":..,"bytesPerSecond":..,
//    "check":"ok"}
// "check" says whether the host memory holds the byte the device buffer
// was set to (cuMemsetD8Async) beforehand.
//
// The driver library is the one halrt would load: HALRT_CUDA_LIBRARY when
// set (the test double in test/gpu/run.sh's dry run), else libcuda.so.1,
// then libcuda.so. Types and entry names come from halrt's own table
// (src/hal/cuda/cuda_api.h), so no CUDA toolkit is needed to build this:
//   cc -std=c11 -O2 -D_GNU_SOURCE -Isrc test/gpu/launch_loop.c -ldl -o ...
// (test/gpu/prepare.sh and test/gpu/run.sh build it into build/gpu/).
// Exit status 0 on success; 1 with a message on stderr naming the failed
// call otherwise; 2 on bad arguments.
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

// The launch loop, on `stream` of the current context; frees what it made
// on every path.
static int measure_launches(hrt_cu_stream_t stream, const char* ptx,
                            int launches, int rounds) {
  int status = 1;
  hrt_cu_module_t module = NULL;
  hrt_cu_deviceptr_t out = 0;
  hrt_cu_function_t function = NULL;
  double* loop = calloc((size_t)rounds, sizeof(double));
  double* single = calloc((size_t)rounds, sizeof(double));
  const char* what = "cuModuleLoadDataEx";
  hrt_cu_result_t r = cu.cuModuleLoadDataEx(&module, ptx, 0, NULL, NULL);
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
  return status;
}

enum { D2H_FILL = 0x5a };

// `copies` copies of `bytes` from `source` into the pinned `host` on
// `stream`, then waits for them.
static int copy_and_wait(void* host, hrt_cu_deviceptr_t source, size_t bytes,
                         int copies, hrt_cu_stream_t stream) {
  for (int i = 0; i < copies; ++i) {
    CALL(cu.cuMemcpyDtoHAsync_v2(host, source, bytes, stream));
  }
  CALL(cu.cuStreamSynchronize(stream));
  return 0;
}

// The pinned-copy loop, on `stream` of the current context; frees what it
// made on every path.
static int measure_d2h(hrt_cu_stream_t stream, size_t bytes, int copies,
                       int rounds) {
  int status = 1;
  hrt_cu_deviceptr_t source = 0;
  void* host = NULL;
  double* times = calloc((size_t)rounds, sizeof(double));
  const char* what = "cuMemAlloc_v2";
  hrt_cu_result_t r = cu.cuMemAlloc_v2(&source, bytes);
  if (!r) {
    what = "cuMemAllocHost_v2";
    r = cu.cuMemAllocHost_v2(&host, bytes);
  }
  if (!r) {
    what = "cuMemsetD8Async";
    r = cu.cuMemsetD8Async(source, D2H_FILL, bytes, stream);
  }
  if (r) {
    fail(what, r);
  } else if (!times) {
    fprintf(stderr, "launch_loop: out of memory\n");
  } else if (copy_and_wait(host, source, bytes, 1, stream) == 0) {
    int round = 0;
    for (; round < rounds; ++round) {
      double start = now_us();
      if (copy_and_wait(host, source, bytes, copies, stream)) break;
      times[round] = now_us() - start;
    }
    if (round == rounds) {
      const unsigned char* data = host;
      bool ok = true;
      for (size_t i = 0; i < bytes && ok; ++i) ok = data[i] == D2H_FILL;
      double round_us = median(times, rounds);
      printf(
          "{\"bytes\":%zu,\"copies\":%d,\"rounds\":%d,\"roundUs\":%.3f,"
          "\"bytesPerSecond\":%.0f,\"check\":\"%s\"}\n",
          bytes, copies, rounds, round_us,
          (double)bytes * copies / (round_us / 1e6), ok ? "ok" : "wrong bytes");
      status = ok ? 0 : 1;
    }
  }
  free(times);
  if (host) cu.cuMemFreeHost(host);
  if (source) cu.cuMemFree_v2(source);
  return status;
}

// What the command line asks for.
typedef struct {
  const char* ptx_path;  // launch mode; NULL in --d2h mode
  size_t bytes;          // --d2h mode
  int count;             // launches, or copies per round
  int rounds;
} options_t;

static int usage(void) {
  fprintf(stderr,
          "usage: launch_loop KERNELS_PTX [LAUNCHES] [ROUNDS]\n"
          "       launch_loop --d2h BYTES [COPIES] [ROUNDS]\n");
  return 2;
}

// Parses argv into `options`; 0, or 2 with a message on stderr.
static int parse(int argc, char** argv, options_t* options) {
  const bool d2h = argc > 1 && strcmp(argv[1], "--d2h") == 0;
  const int first = d2h ? 3 : 2;  // index of the count
  if (argc < first || argc > first + 2) return usage();
  options->ptx_path = d2h ? NULL : argv[1];
  options->bytes = 0;
  options->count = argc > first ? atoi(argv[first]) : (d2h ? 8 : 1000);
  options->rounds = argc > first + 1 ? atoi(argv[first + 1]) : (d2h ? 9 : 20);
  if (options->rounds < 1 || options->rounds > 10000) {
    fprintf(stderr, "launch_loop: ROUNDS must be in [1, 10000]\n");
    return 2;
  }
  if (!d2h) {
    if (options->count < 2 || options->count > 1000000) {
      fprintf(stderr, "launch_loop: LAUNCHES must be in [2, 1000000]\n");
      return 2;
    }
    return 0;
  }
  char* end = NULL;
  unsigned long long bytes = strtoull(argv[2], &end, 10);
  if (argv[2][0] < '0' || argv[2][0] > '9' || *end || bytes < 1 ||
      bytes > (1ull << 34)) {
    fprintf(stderr, "launch_loop: BYTES must be in [1, 2^34], not '%s'\n",
            argv[2]);
    return 2;
  }
  options->bytes = (size_t)bytes;
  if (options->count < 1 || options->count > 10000) {
    fprintf(stderr, "launch_loop: COPIES must be in [1, 10000]\n");
    return 2;
  }
  return 0;
}

// Everything after loading the library: the primary context, one stream
// and the measurement; frees what it made on every path.
static int measure(const options_t* options, const char* ptx) {
  hrt_cu_device_t device = 0;
  hrt_cu_context_t context = NULL;
  CALL(cu.cuInit(0));
  CALL(cu.cuDeviceGet(&device, 0));
  CALL(cu.cuDevicePrimaryCtxRetain(&context, device));
  int status = 1;
  hrt_cu_stream_t stream = NULL;
  const char* what = "cuCtxSetCurrent";
  hrt_cu_result_t r = cu.cuCtxSetCurrent(context);
  if (!r) {
    what = "cuStreamCreate";
    r = cu.cuStreamCreate(&stream, HRT_CU_STREAM_NON_BLOCKING);
  }
  if (r) {
    fail(what, r);
  } else if (ptx) {
    status = measure_launches(stream, ptx, options->count, options->rounds);
  } else {
    status =
        measure_d2h(stream, options->bytes, options->count, options->rounds);
  }
  if (stream) cu.cuStreamDestroy_v2(stream);
  cu.cuDevicePrimaryCtxRelease_v2(device);
  return status;
}

int main(int argc, char** argv) {
  options_t options;
  int parsed = parse(argc, argv, &options);
  if (parsed) return parsed;
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
      !cu.cuMemFreeHost || !cu.cuMemcpyDtoHAsync_v2 || !cu.cuMemsetD8Async ||
      !cu.cuLaunchKernel) {
    fprintf(stderr, "launch_loop: the driver library lacks an entry point\n");
    return 1;
  }
  char* ptx = NULL;
  if (options.ptx_path) {
    ptx = read_text(options.ptx_path);
    if (!ptx) {
      fprintf(stderr, "launch_loop: cannot read %s\n", options.ptx_path);
      return 1;
    }
  }
  int status = measure(&options, ptx);
  free(ptx);
  return status;
}
