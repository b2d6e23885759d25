// The reference addon of halrt's benchmarks (bench/run.js): the baselines
// that halrt is measured against in the same process run.
//
//   tsfnRun(callback, count, itemBytes, mode) -> Promise<void>
//     A native thread copies `itemBytes` bytes per item into a fresh
//     allocation and queues it with napi_call_threadsafe_function, one call
//     per item; call_js calls `callback` on the JS thread with
//       mode 0: no arguments (the item is freed);
//       mode 1: a Float32Array over the item (an external ArrayBuffer that
//               frees it in its finalizer);
//       mode 2: a Float32Array over a copy in a V8-owned ArrayBuffer.
//     Resolves once every item has been delivered and the thread joined.
//   memcpyTimes(bytes, reps, mode[, ring]) -> Float64Array of seconds per copy
//     memcpy of `bytes` from a touched source
//       mode 0: into a destination touched beforehand (warm memory);
//       mode 1: into a malloc per copy, freed after (glibc may reuse it);
//       mode 2: into an mmap per copy, unmapped after (fresh pages: every
//               page faults in);
//       mode 3: the same into a mapping 2 MiB-aligned and advised
//               MADV_HUGEPAGE, as halrt's block pool maps blocks of 2 MiB
//               and more (fresh huge pages fault in);
//       mode 4: into `ring` (the fourth argument, 1 to 64) destinations
//               touched beforehand, taken in turn (what keeping the last
//               `ring` copies costs: once the ring outgrows the caches,
//               memory takes every copy).
//   pingOpen(), ping() -> Promise<void>, pingClose()
//     The bare shape of an asynchronous call: ping() hands a deferred to a
//     native thread (mutex + condition variable), which queues it back with
//     napi_call_threadsafe_function; call_js resolves it.
//   threadCpuTime() -> number: seconds of CPU time the calling thread (the
//     JS thread) has used, clock_gettime(CLOCK_THREAD_CPUTIME_ID): read before
//     and after a run, it gives the JS thread's own work, not the process's.
//   addTimes(n, reps) -> Float64Array: c[i] = a[i] + b[i] over n floats.
//   readTimes(n, reps) -> Float64Array: one read of n floats from a warm
//     buffer, counting NaN, +Inf and -Inf (what a 'health' summary computes
//     per element): the floor under checking traced bytes.
//   matmulTimes(n, reps) -> Float64Array: naive i-j-k loop, c = a·b, n×n.
//
// Every timed loop runs on the calling thread with CLOCK_MONOTONIC; the
// buffers are allocated and touched before the first rep.

#include <math.h>
#include <node_api.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

// Throws an error naming `call` and returns NULL when it fails; the
// _CLEANUP form runs the statement `cleanup` first.
#define REF_CALL_CLEANUP(env, call, cleanup)              \
  do {                                                    \
    if ((call) != napi_ok) {                              \
      cleanup;                                            \
      napi_throw_error((env), NULL, "ref addon: " #call); \
      return NULL;                                        \
    }                                                     \
  } while (0)
#define REF_CALL(env, call) REF_CALL_CLEANUP(env, call, (void)0)

static double ref_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

// Keeps the optimiser from dropping a loop whose result is otherwise unused.
static volatile float ref_sink;

//===----------------------------------------------------------------------===//
// Thread-safe function round trip
//===----------------------------------------------------------------------===//

typedef struct ref_tsfn_run_s {
  napi_threadsafe_function tsfn;
  napi_deferred deferred;
  pthread_t thread;
  bool started;
  uint64_t count;
  size_t item_bytes;
  int32_t mode;
  unsigned char source[];
} ref_tsfn_run_t;

static void* ref_tsfn_producer(void* arg) {
  ref_tsfn_run_t* run = arg;
  for (uint64_t i = 0; i < run->count; ++i) {
    void* item = malloc(run->item_bytes ? run->item_bytes : 1);
    if (item == NULL) break;
    memcpy(item, run->source, run->item_bytes);
    if (napi_call_threadsafe_function(run->tsfn, item, napi_tsfn_blocking) !=
        napi_ok) {
      free(item);
      break;
    }
  }
  napi_release_threadsafe_function(run->tsfn, napi_tsfn_release);
  return NULL;
}

static void ref_free_external(napi_env env, void* data, void* hint) {
  (void)env;
  (void)hint;
  free(data);
}

static void ref_tsfn_call_js(napi_env env, napi_value callback, void* context,
                             void* data) {
  ref_tsfn_run_t* run = context;
  if (env == NULL) {
    free(data);
    return;
  }
  napi_value undefined = NULL, result = NULL, buffer = NULL, argv[1];
  size_t argc = 0;
  napi_get_undefined(env, &undefined);
  if (run->mode == 1) {
    if (napi_create_external_arraybuffer(env, data, run->item_bytes,
                                         ref_free_external, NULL,
                                         &buffer) != napi_ok) {
      free(data);
      return;
    }
  } else if (run->mode == 2) {
    void* copy = NULL;
    napi_status status =
        napi_create_arraybuffer(env, run->item_bytes, &copy, &buffer);
    if (status == napi_ok) memcpy(copy, data, run->item_bytes);
    free(data);
    if (status != napi_ok) return;
  } else {
    free(data);
  }
  if (buffer != NULL) {
    if (napi_create_typedarray(env, napi_float32_array, run->item_bytes / 4,
                               buffer, 0, &argv[0]) != napi_ok) {
      return;
    }
    argc = 1;
  }
  napi_call_function(env, undefined, callback, argc, argv, &result);
}

static void ref_tsfn_finalize(napi_env env, void* data, void* hint) {
  (void)hint;
  ref_tsfn_run_t* run = data;
  if (run->started) pthread_join(run->thread, NULL);
  napi_value undefined = NULL;
  napi_get_undefined(env, &undefined);
  napi_resolve_deferred(env, run->deferred, undefined);
  free(run);
}

// Frees a run that no thread-safe function owns yet, settling its promise
// (if made) so that the deferred is released too.
static void ref_tsfn_run_abandon(napi_env env, ref_tsfn_run_t* run) {
  if (run->deferred != NULL) {
    napi_value undefined = NULL;
    napi_get_undefined(env, &undefined);
    napi_resolve_deferred(env, run->deferred, undefined);
  }
  free(run);
}

static napi_value ref_tsfn_run(napi_env env, napi_callback_info info) {
  size_t argc = 4;
  napi_value argv[4], name = NULL, promise = NULL;
  REF_CALL(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  int64_t count = 0, item_bytes = 0;
  int32_t mode = 0;
  REF_CALL(env, napi_get_value_int64(env, argv[1], &count));
  REF_CALL(env, napi_get_value_int64(env, argv[2], &item_bytes));
  REF_CALL(env, napi_get_value_int32(env, argv[3], &mode));
  if (count < 0 || item_bytes < 0 || mode < 0 || mode > 2 ||
      (mode != 0 && item_bytes % 4 != 0)) {
    napi_throw_range_error(env, NULL, "tsfnRun: bad count or itemBytes");
    return NULL;
  }
  ref_tsfn_run_t* run = calloc(1, sizeof(*run) + (size_t)item_bytes);
  if (run == NULL) {
    napi_throw_error(env, NULL, "tsfnRun: out of memory");
    return NULL;
  }
  for (int64_t i = 0; i < item_bytes; ++i) run->source[i] = (unsigned char)i;
  run->count = (uint64_t)count;
  run->item_bytes = (size_t)item_bytes;
  run->mode = mode;
  // Until the thread-safe function exists, `run` is this function's to free.
  REF_CALL_CLEANUP(env, napi_create_promise(env, &run->deferred, &promise),
                   ref_tsfn_run_abandon(env, run));
  REF_CALL_CLEANUP(env,
                   napi_create_string_utf8(env, "halrt.bench.tsfnRun",
                                           NAPI_AUTO_LENGTH, &name),
                   ref_tsfn_run_abandon(env, run));
  REF_CALL_CLEANUP(env,
                   napi_create_threadsafe_function(
                       env, argv[0], NULL, name, /*max_queue_size=*/0,
                       /*initial_thread_count=*/1, run, ref_tsfn_finalize, run,
                       ref_tsfn_call_js, &run->tsfn),
                   ref_tsfn_run_abandon(env, run));
  if (pthread_create(&run->thread, NULL, ref_tsfn_producer, run) != 0) {
    // The finalizer still runs (and resolves the promise); no thread to join.
    napi_release_threadsafe_function(run->tsfn, napi_tsfn_abort);
    napi_throw_error(env, NULL, "tsfnRun: pthread_create failed");
    return NULL;
  }
  run->started = true;
  return promise;
}

//===----------------------------------------------------------------------===//
// Timed native loops
//===----------------------------------------------------------------------===//

// Reads (size, reps) from argv[0..1] and makes the result array.
static bool ref_sizes(napi_env env, napi_callback_info info, size_t want,
                      napi_value* argv, int64_t* size, int64_t* reps,
                      double** out_times, napi_value* out_array) {
  size_t argc = want;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok ||
      napi_get_value_int64(env, argv[0], size) != napi_ok ||
      napi_get_value_int64(env, argv[1], reps) != napi_ok || *size <= 0 ||
      *reps <= 0) {
    napi_throw_range_error(env, NULL, "ref addon: expected (size, reps) > 0");
    return false;
  }
  napi_value buffer = NULL;
  void* data = NULL;
  if (napi_create_arraybuffer(env, (size_t)*reps * sizeof(double), &data,
                              &buffer) != napi_ok ||
      napi_create_typedarray(env, napi_float64_array, (size_t)*reps, buffer, 0,
                             out_array) != napi_ok) {
    napi_throw_error(env, NULL, "ref addon: cannot make the result array");
    return false;
  }
  *out_times = data;
  return true;
}

#define REF_HUGE ((uintptr_t)2 << 20)

static napi_value ref_memcpy_times(napi_env env, napi_callback_info info) {
  napi_value argv[4], result = NULL;
  int64_t bytes = 0, reps = 0;
  int32_t mode = 0, ring = 1;
  double* times = NULL;
  if (!ref_sizes(env, info, 4, argv, &bytes, &reps, &times, &result)) {
    return NULL;
  }
  REF_CALL(env, napi_get_value_int32(env, argv[2], &mode));
  if (mode == 4) REF_CALL(env, napi_get_value_int32(env, argv[3], &ring));
  if (mode < 0 || mode > 4 || ring < 1 || ring > 64) {
    napi_throw_range_error(env, NULL,
                           "memcpyTimes: mode must be 0 to 4, ring 1 to 64");
    return NULL;
  }
  size_t size = (size_t)bytes;
  // Modes 0 and 4 copy into warm destinations, `warm` of them in turn.
  size_t warm = mode == 0 ? 1 : mode == 4 ? (size_t)ring : 0;
  char* src = malloc(size);
  char* dst = warm ? malloc(size * warm) : NULL;
  if (src == NULL || (warm && dst == NULL)) {
    free(src);
    free(dst);
    napi_throw_error(env, NULL, "memcpyTimes: out of memory");
    return NULL;
  }
  memset(src, 1, size);
  if (dst) memset(dst, 2, size * warm);
  // Mode 3 maps 2 MiB more, to align the destination.
  size_t mapped_size = mode == 3 ? size + REF_HUGE : size;
  for (int64_t r = 0; r < reps; ++r) {
    double start = ref_now();
    char* target = warm ? dst + (size_t)r % warm * size : NULL;
    void* mapped = NULL;
    if (mode == 1) {
      target = malloc(size);
    } else if (mode == 2 || mode == 3) {
      mapped = mmap(NULL, mapped_size, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      target = mapped == MAP_FAILED ? NULL : mapped;
      if (target != NULL && mode == 3) {
        target = (char*)(((uintptr_t)mapped + REF_HUGE - 1) & ~(REF_HUGE - 1));
#ifdef MADV_HUGEPAGE
        madvise(target, size, MADV_HUGEPAGE);
#endif
      }
    }
    if (target == NULL) break;
    memcpy(target, src, size);
    ref_sink = (float)target[(size_t)r % size];
    if (mode == 1) free(target);
    if (mapped) munmap(mapped, mapped_size);
    times[r] = ref_now() - start;
  }
  free(src);
  free(dst);
  return result;
}

//===----------------------------------------------------------------------===//
// Asynchronous round trip
//===----------------------------------------------------------------------===//

#define REF_PING_SLOTS 4096

// One per process: the benchmarks use it from the main thread only.
static struct {
  bool open;
  pthread_t thread;
  pthread_mutex_t mutex;
  pthread_cond_t cond;
  napi_threadsafe_function tsfn;
  // Guarded by mutex: a ring of deferreds waiting for the thread.
  napi_deferred ring[REF_PING_SLOTS];
  uint32_t head, count;
  bool shutdown;
} ref_ping_state;

static void* ref_ping_main(void* arg) {
  (void)arg;
  pthread_mutex_lock(&ref_ping_state.mutex);
  for (;;) {
    while (ref_ping_state.count == 0 && !ref_ping_state.shutdown) {
      pthread_cond_wait(&ref_ping_state.cond, &ref_ping_state.mutex);
    }
    if (ref_ping_state.count == 0) break;
    napi_deferred deferred = ref_ping_state.ring[ref_ping_state.head];
    ref_ping_state.head = (ref_ping_state.head + 1) % REF_PING_SLOTS;
    --ref_ping_state.count;
    pthread_mutex_unlock(&ref_ping_state.mutex);
    napi_call_threadsafe_function(ref_ping_state.tsfn, deferred, napi_tsfn_blocking);
    pthread_mutex_lock(&ref_ping_state.mutex);
  }
  pthread_mutex_unlock(&ref_ping_state.mutex);
  return NULL;
}

static void ref_ping_call_js(napi_env env, napi_value callback, void* context,
                             void* data) {
  (void)callback;
  (void)context;
  if (env == NULL) return;
  napi_value undefined = NULL;
  napi_get_undefined(env, &undefined);
  napi_resolve_deferred(env, (napi_deferred)data, undefined);
}

static napi_value ref_ping_open(napi_env env, napi_callback_info info) {
  (void)info;
  if (ref_ping_state.open) return NULL;
  napi_value name = NULL;
  REF_CALL(env, napi_create_string_utf8(env, "halrt.bench.ping",
                                        NAPI_AUTO_LENGTH, &name));
  REF_CALL(env, napi_create_threadsafe_function(
                    env, NULL, NULL, name, 0, 1, NULL, NULL, NULL,
                    ref_ping_call_js, &ref_ping_state.tsfn));
  pthread_mutex_init(&ref_ping_state.mutex, NULL);
  pthread_cond_init(&ref_ping_state.cond, NULL);
  ref_ping_state.head = ref_ping_state.count = 0;
  ref_ping_state.shutdown = false;
  if (pthread_create(&ref_ping_state.thread, NULL, ref_ping_main, NULL) != 0) {
    napi_release_threadsafe_function(ref_ping_state.tsfn, napi_tsfn_abort);
    napi_throw_error(env, NULL, "pingOpen: pthread_create failed");
    return NULL;
  }
  ref_ping_state.open = true;
  return NULL;
}

static napi_value ref_ping(napi_env env, napi_callback_info info) {
  (void)info;
  napi_value promise = NULL;
  napi_deferred deferred = NULL;
  if (!ref_ping_state.open) {
    napi_throw_error(env, NULL, "ping: call pingOpen first");
    return NULL;
  }
  REF_CALL(env, napi_create_promise(env, &deferred, &promise));
  pthread_mutex_lock(&ref_ping_state.mutex);
  bool queued = ref_ping_state.count < REF_PING_SLOTS;
  if (queued) {
    ref_ping_state.ring[(ref_ping_state.head + ref_ping_state.count) % REF_PING_SLOTS] = deferred;
    ++ref_ping_state.count;
    pthread_cond_signal(&ref_ping_state.cond);
  }
  pthread_mutex_unlock(&ref_ping_state.mutex);
  if (!queued) {
    napi_value error = NULL, message = NULL;
    napi_create_string_utf8(env, "ping: too many in flight", NAPI_AUTO_LENGTH,
                            &message);
    napi_create_error(env, NULL, message, &error);
    napi_reject_deferred(env, deferred, error);
  }
  return promise;
}

static napi_value ref_ping_close(napi_env env, napi_callback_info info) {
  (void)env;
  (void)info;
  if (!ref_ping_state.open) return NULL;
  pthread_mutex_lock(&ref_ping_state.mutex);
  ref_ping_state.shutdown = true;
  pthread_cond_signal(&ref_ping_state.cond);
  pthread_mutex_unlock(&ref_ping_state.mutex);
  pthread_join(ref_ping_state.thread, NULL);
  napi_release_threadsafe_function(ref_ping_state.tsfn, napi_tsfn_release);
  pthread_cond_destroy(&ref_ping_state.cond);
  pthread_mutex_destroy(&ref_ping_state.mutex);
  ref_ping_state.open = false;
  return NULL;
}

static napi_value ref_thread_cpu_time(napi_env env, napi_callback_info info) {
  (void)info;
  struct timespec ts;
  napi_value result = NULL;
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) {
    napi_throw_error(env, NULL, "threadCpuTime: clock_gettime failed");
    return NULL;
  }
  REF_CALL(env, napi_create_double(
                    env, (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9, &result));
  return result;
}

static napi_value ref_add_times(napi_env env, napi_callback_info info) {
  napi_value argv[2], result = NULL;
  int64_t n = 0, reps = 0;
  double* times = NULL;
  if (!ref_sizes(env, info, 2, argv, &n, &reps, &times, &result)) return NULL;
  float* a = malloc((size_t)n * sizeof(float));
  float* b = malloc((size_t)n * sizeof(float));
  float* c = malloc((size_t)n * sizeof(float));
  if (!a || !b || !c) {
    free(a);
    free(b);
    free(c);
    napi_throw_error(env, NULL, "addTimes: out of memory");
    return NULL;
  }
  for (int64_t i = 0; i < n; ++i) {
    a[i] = (float)(i & 1023);
    b[i] = 1.0f;
    c[i] = 0.0f;
  }
  for (int64_t r = 0; r < reps; ++r) {
    double start = ref_now();
    for (int64_t i = 0; i < n; ++i) c[i] = a[i] + b[i];
    ref_sink = c[(size_t)r % (size_t)n];
    times[r] = ref_now() - start;
  }
  free(a);
  free(b);
  free(c);
  return result;
}

static napi_value ref_read_times(napi_env env, napi_callback_info info) {
  napi_value argv[2], result = NULL;
  int64_t n = 0, reps = 0;
  double* times = NULL;
  if (!ref_sizes(env, info, 2, argv, &n, &reps, &times, &result)) return NULL;
  float* x = malloc((size_t)n * sizeof(float));
  if (!x) {
    napi_throw_error(env, NULL, "readTimes: out of memory");
    return NULL;
  }
  for (int64_t i = 0; i < n; ++i) x[i] = (float)(i & 1023);
  for (int64_t r = 0; r < reps; ++r) {
    double start = ref_now();
    uint32_t nan = 0, pos = 0, neg = 0;
    for (int64_t i = 0; i < n; ++i) {
      nan += x[i] != x[i];
      pos += x[i] == INFINITY;
      neg += x[i] == -INFINITY;
    }
    ref_sink = (float)(nan + pos + neg);
    times[r] = ref_now() - start;
  }
  free(x);
  return result;
}

static napi_value ref_matmul_times(napi_env env, napi_callback_info info) {
  napi_value argv[2], result = NULL;
  int64_t n = 0, reps = 0;
  double* times = NULL;
  if (!ref_sizes(env, info, 2, argv, &n, &reps, &times, &result)) return NULL;
  size_t count = (size_t)n * (size_t)n;
  float* a = malloc(count * sizeof(float));
  float* b = malloc(count * sizeof(float));
  float* c = malloc(count * sizeof(float));
  if (!a || !b || !c) {
    free(a);
    free(b);
    free(c);
    napi_throw_error(env, NULL, "matmulTimes: out of memory");
    return NULL;
  }
  for (size_t i = 0; i < count; ++i) {
    a[i] = (float)(i % 7) * 0.25f;
    b[i] = (float)(i % 5) * 0.5f;
    c[i] = 0.0f;
  }
  for (int64_t r = 0; r < reps; ++r) {
    double start = ref_now();
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        float sum = 0.0f;
        for (int64_t k = 0; k < n; ++k) sum += a[i * n + k] * b[k * n + j];
        c[i * n + j] = sum;
      }
    }
    ref_sink = c[(size_t)r % count];
    times[r] = ref_now() - start;
  }
  free(a);
  free(b);
  free(c);
  return result;
}

NAPI_MODULE_INIT() {
  const napi_property_descriptor properties[] = {
      {"tsfnRun", NULL, ref_tsfn_run, NULL, NULL, NULL, napi_default, NULL},
      {"memcpyTimes", NULL, ref_memcpy_times, NULL, NULL, NULL, napi_default,
       NULL},
      {"addTimes", NULL, ref_add_times, NULL, NULL, NULL, napi_default, NULL},
      {"readTimes", NULL, ref_read_times, NULL, NULL, NULL, napi_default,
       NULL},
      {"matmulTimes", NULL, ref_matmul_times, NULL, NULL, NULL, napi_default,
       NULL},
      {"pingOpen", NULL, ref_ping_open, NULL, NULL, NULL, napi_default, NULL},
      {"ping", NULL, ref_ping, NULL, NULL, NULL, napi_default, NULL},
      {"pingClose", NULL, ref_ping_close, NULL, NULL, NULL, napi_default,
       NULL},
      {"threadCpuTime", NULL, ref_thread_cpu_time, NULL, NULL, NULL,
       napi_default, NULL},
  };
  if (napi_define_properties(env, exports,
                             sizeof(properties) / sizeof(properties[0]),
                             properties) != napi_ok) {
    return NULL;
  }
  return exports;
}
