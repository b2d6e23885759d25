// Tests of the built-in kernel library (docs/kernels.md), driven through the
// CPU kernel ABI exactly as the runtime drives it.

// test.h uses POSIX nanosleep; this keeps the file buildable with plain
// -std=c11 as well as with the Makefile's -D_GNU_SOURCE.
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "hal/local/builtin_kernels.h"
#include "halrt/cpu_kernel.h"
#include "test.h"

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

typedef struct rng_t {
  uint64_t state;
} rng_t;

// xorshift64*: fixed seeds make every run see the same inputs.
static uint32_t rng_u32(rng_t* rng) {
  rng->state ^= rng->state >> 12;
  rng->state ^= rng->state << 25;
  rng->state ^= rng->state >> 27;
  return (uint32_t)((rng->state * 0x2545F4914F6CDD1Dull) >> 32);
}

// Uniform in [lo, hi).
static float rng_f32(rng_t* rng, float lo, float hi) {
  return lo + (hi - lo) * (float)(rng_u32(rng) >> 8) * (1.0f / 16777216.0f);
}

// n floats uniform in [lo, hi), owned by the caller; NULL if out of memory.
static float* rng_floats(rng_t* rng, size_t n, float lo, float hi) {
  float* values = malloc(n * sizeof(float) + sizeof(float));
  for (size_t i = 0; values != NULL && i < n; ++i) {
    values[i] = rng_f32(rng, lo, hi);
  }
  return values;
}

static uint32_t f32_bits(float value) {
  uint32_t bits;
  memcpy(&bits, &value, sizeof(bits));
  return bits;
}

static int32_t wrap_i32(int64_t value) {
  const uint32_t bits = (uint32_t)value;
  return bits <= INT32_MAX ? (int32_t)bits
                           : (int32_t)(bits - 0x80000000u) + INT32_MIN;
}

// Either sign, magnitudes spread over every bit width, so that division
// sees non-trivial quotients as well as wrapping products.
static int32_t rng_i32(rng_t* rng) {
  int64_t parts[2];
  for (int i = 0; i < 2; ++i) {
    const uint32_t shift = rng_u32(rng) % 32;
    parts[i] = rng_u32(rng) >> shift;
  }
  return wrap_i32(parts[0] - parts[1]);
}

static const halrt_kernel_entry_t* find_kernel(const char* name) {
  const halrt_kernel_library_t* library = hrt_local_builtin_kernel_library();
  for (uint32_t i = 0; i < library->kernel_count; ++i) {
    if (strcmp(library->kernels[i].name, name) == 0) {
      return &library->kernels[i];
    }
  }
  return NULL;
}

static uint64_t gcd_u64(uint64_t a, uint64_t b) {
  while (b != 0) {
    const uint64_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

// Runs kernel function `fn` over the whole grid as the runtime does: one
// call per workgroup with a shared dispatch state. Workgroups are visited
// from the last one backwards in strides coprime with the grid size (so not
// in order), with varying worker ids. Returns the first non-zero code.
static int run_kernel_fn(halrt_kernel_fn_t fn, const uint32_t grid[3],
                         void* const* bindings, const size_t* lengths,
                         uint32_t binding_count, const uint32_t* constants,
                         uint32_t constant_count) {
  const halrt_dispatch_state_t dispatch = {
      {grid[0], grid[1], grid[2]}, {1, 1, 1}, constant_count, binding_count,
      constants, bindings, lengths};
  const uint64_t total = (uint64_t)grid[0] * grid[1] * grid[2];
  uint64_t stride = 7919;
  while (gcd_u64(stride, total) != 1) stride += 2;
  int result = 0;
  for (uint64_t step = 0; step < total; ++step) {
    const uint64_t linear = total - 1 - (step * stride) % total;
    const halrt_workgroup_state_t workgroup = {
        {(uint32_t)(linear % grid[0]),
         (uint32_t)(linear / grid[0] % grid[1]),
         (uint32_t)(linear / grid[0] / grid[1])},
        (uint32_t)(step % 3)};
    const int code = fn(&dispatch, &workgroup);
    if (code != 0 && result == 0) result = code;
  }
  return result;
}

// run_kernel_fn with the library's kernel `name`; -1 if there is none.
static int run_kernel(const char* name, const uint32_t grid[3],
                      void* const* bindings, const size_t* lengths,
                      uint32_t binding_count, const uint32_t* constants,
                      uint32_t constant_count) {
  const halrt_kernel_entry_t* entry = find_kernel(name);
  if (entry == NULL) return -1;
  return run_kernel_fn(entry->fn, grid, bindings, lengths, binding_count,
                       constants, constant_count);
}

// Bytes of slack after every output buffer; they must stay poisoned.
enum { SLACK = 16 };
#define POISON 0xFF

static void* alloc_poisoned(size_t bytes) {
  void* buffer = malloc(bytes + SLACK);
  if (buffer != NULL) memset(buffer, POISON, bytes + SLACK);
  return buffer;
}

static bool is_poisoned(const void* buffer, size_t bytes) {
  const uint8_t* p = buffer;
  for (size_t i = 0; i < bytes; ++i) {
    if (p[i] != POISON) return false;
  }
  return true;
}

static bool near_f32(float got, double want, double tolerance) {
  if (isnan(want)) return isnan(got);
  if (isinf(want)) return (double)got == want;
  return fabs((double)got - want) <= tolerance;
}

static const size_t kSizes[] = {0, 1, 7, 1000, 4097};
static const uint32_t kGrids[][3] = {
    {1, 1, 1}, {3, 1, 1}, {64, 1, 1}, {4099, 1, 1}, {2, 3, 1}, {2, 2, 3},
};
#define COUNT_OF(array) (sizeof(array) / sizeof((array)[0]))

//===----------------------------------------------------------------------===//
// The table
//===----------------------------------------------------------------------===//

static const struct {
  const char* name;
  uint32_t binding_count;
  uint32_t constant_count;
} kExpected[] = {
    {"fill_u32", 1, 2},         {"copy_u8", 2, 1},
    {"add_f32", 3, 1},          {"sub_f32", 3, 1},
    {"mul_f32", 3, 1},          {"div_f32", 3, 1},
    {"max_f32", 3, 1},          {"add_i32", 3, 1},
    {"sub_i32", 3, 1},          {"mul_i32", 3, 1},
    {"div_i32", 3, 1},          {"max_i32", 3, 1},
    {"axpy_f32", 3, 2},         {"relu_f32", 2, 1},
    {"matmul_f32", 3, 3},       {"softmax_rows_f32", 2, 2},
    {"reduce_sum_f32", 2, 2},   {"binary_f32", 3, 19},
    {"unary_f32", 2, 4},        {"conv2d_f32", 4, 16},
    {"pool2d_f32", 2, 13},      {"bmm_f32", 3, 10},
    {"strided_copy_f32", 2, 20}, {"chain_f32", 3, 31},
    {"chain_health_f32", 4, 31}, {"resize2d_f32", 4, 6},
    {"where_f32", 4, 24},
};

static void test_library_lists_every_documented_kernel(void) {
  const halrt_kernel_library_t* library = hrt_local_builtin_kernel_library();
  CHECK(library != NULL);
  CHECK(library == hrt_local_builtin_kernel_library());
  CHECK_EQ_INT(library->abi_version, HALRT_KERNEL_ABI_VERSION);
  CHECK(strcmp(library->name, "builtin") == 0);
  CHECK_EQ_INT(library->kernel_count, COUNT_OF(kExpected));
  for (size_t i = 0; i < COUNT_OF(kExpected); ++i) {
    const halrt_kernel_entry_t* entry = find_kernel(kExpected[i].name);
    if (entry == NULL) fprintf(stderr, "missing %s\n", kExpected[i].name);
    CHECK(entry != NULL);
    CHECK(entry->fn != NULL);
    CHECK_EQ_INT(entry->binding_count, kExpected[i].binding_count);
    CHECK_EQ_INT(entry->constant_count, kExpected[i].constant_count);
  }
  for (uint32_t i = 0; i < library->kernel_count; ++i) {
    for (uint32_t j = i + 1; j < library->kernel_count; ++j) {
      CHECK(strcmp(library->kernels[i].name, library->kernels[j].name) != 0);
    }
  }
}

//===----------------------------------------------------------------------===//
// Elementwise kernels
//===----------------------------------------------------------------------===//

static void test_fill_and_copy_cover_every_element_for_any_grid(void) {
  rng_t rng = {0x1234};
  for (size_t s = 0; s < COUNT_OF(kSizes); ++s) {
    const size_t n = kSizes[s];
    uint8_t* src = malloc(n + 1);
    CHECK(src != NULL);
    for (size_t i = 0; i < n; ++i) src[i] = (uint8_t)(rng_u32(&rng) % 255);
    for (size_t g = 0; g < COUNT_OF(kGrids); ++g) {
      uint32_t* fill = alloc_poisoned(n * 4);
      uint8_t* copy = alloc_poisoned(n);
      CHECK(fill != NULL && copy != NULL);
      const uint32_t fill_constants[2] = {(uint32_t)n, 0xA5A5F00Du};
      const size_t fill_length = n * 4;
      void* fill_bindings[1] = {fill};
      const int fill_code = run_kernel("fill_u32", kGrids[g], fill_bindings,
                                       &fill_length, 1, fill_constants, 2);
      const uint32_t copy_constants[1] = {(uint32_t)n};
      const size_t copy_lengths[2] = {n, n};
      void* copy_bindings[2] = {src, copy};
      const int copy_code = run_kernel("copy_u8", kGrids[g], copy_bindings,
                                       copy_lengths, 2, copy_constants, 1);
      bool ok = fill_code == 0 && copy_code == 0 &&
                is_poisoned(fill + n, SLACK) && is_poisoned(copy + n, SLACK);
      for (size_t i = 0; i < n; ++i) {
        ok = ok && fill[i] == 0xA5A5F00Du && copy[i] == src[i];
      }
      if (!ok) fprintf(stderr, "n=%zu grid #%zu\n", n, g);
      free(fill);
      free(copy);
      if (!ok) free(src);
      CHECK(ok);
    }
    free(src);
  }
}

static float ref_add_f32(float x, float y) { return x + y; }
static float ref_sub_f32(float x, float y) { return x - y; }
static float ref_mul_f32(float x, float y) { return x * y; }
static float ref_div_f32(float x, float y) { return x / y; }
static int32_t ref_add_i32(int32_t x, int32_t y) {
  return wrap_i32((int64_t)x + y);
}
static int32_t ref_sub_i32(int32_t x, int32_t y) {
  return wrap_i32((int64_t)x - y);
}
static int32_t ref_mul_i32(int32_t x, int32_t y) {
  return wrap_i32((int64_t)x * y);
}
static int32_t ref_div_i32(int32_t x, int32_t y) {
  if (y == 0) return 0;
  return wrap_i32((int64_t)x / y);
}
static int32_t ref_max_i32(int32_t x, int32_t y) { return x > y ? x : y; }

static const struct {
  const char* name;
  float (*f32)(float, float);      // NULL for i32 kernels
  int32_t (*i32)(int32_t, int32_t);
} kBinary[] = {
    {"add_f32", ref_add_f32, NULL}, {"sub_f32", ref_sub_f32, NULL},
    {"mul_f32", ref_mul_f32, NULL}, {"div_f32", ref_div_f32, NULL},
    {"max_f32", fmaxf, NULL},       {"add_i32", NULL, ref_add_i32},
    {"sub_i32", NULL, ref_sub_i32}, {"mul_i32", NULL, ref_mul_i32},
    {"div_i32", NULL, ref_div_i32}, {"max_i32", NULL, ref_max_i32},
};

// Runs binary kernel `k` on a and b (n elements) over `grid` and compares
// every element with the reference; max and integer results exactly.
static bool check_binary(size_t k, const void* a, const void* b, size_t n,
                         const uint32_t grid[3]) {
  void* out = alloc_poisoned(n * 4);
  if (out == NULL) return false;
  void* bindings[3] = {(void*)a, (void*)b, out};
  const size_t lengths[3] = {n * 4, n * 4, n * 4};
  const uint32_t constants[1] = {(uint32_t)n};
  const int code = run_kernel(kBinary[k].name, grid, bindings, lengths, 3,
                              constants, 1);
  bool ok = code == 0 && is_poisoned((uint8_t*)out + n * 4, SLACK);
  for (size_t i = 0; ok && i < n; ++i) {
    bool same;
    if (kBinary[k].i32 != NULL) {
      same = ((const int32_t*)out)[i] ==
             kBinary[k].i32(((const int32_t*)a)[i], ((const int32_t*)b)[i]);
    } else {
      const float got = ((const float*)out)[i];
      const float want =
          kBinary[k].f32(((const float*)a)[i], ((const float*)b)[i]);
      same = kBinary[k].f32 == fmaxf
                 ? f32_bits(got) == f32_bits(want)
                 : near_f32(got, want, 1e-6 * fabs((double)want));
    }
    if (!same) {
      fprintf(stderr, "%s n=%zu grid=%ux%ux%u: element %zu differs\n",
              kBinary[k].name, n, grid[0], grid[1], grid[2], i);
      ok = false;
    }
  }
  if (code != 0) fprintf(stderr, "%s returned %d\n", kBinary[k].name, code);
  free(out);
  return ok;
}

static void test_binary_kernels_match_reference_for_any_grid(void) {
  rng_t rng = {0xBEEF};
  for (size_t s = 0; s < COUNT_OF(kSizes); ++s) {
    const size_t n = kSizes[s];
    float* fa = malloc(n * 4 + 4);
    float* fb = malloc(n * 4 + 4);
    int32_t* ia = malloc(n * 4 + 4);
    int32_t* ib = malloc(n * 4 + 4);
    bool ok = fa != NULL && fb != NULL && ia != NULL && ib != NULL;
    for (size_t i = 0; ok && i < n; ++i) {
      fa[i] = rng_f32(&rng, -4.0f, 4.0f);
      fb[i] = rng_f32(&rng, -4.0f, 4.0f);
      ia[i] = rng_i32(&rng);
      ib[i] = rng_i32(&rng);
    }
    for (size_t k = 0; ok && k < COUNT_OF(kBinary); ++k) {
      const bool is_int = kBinary[k].i32 != NULL;
      for (size_t g = 0; ok && g < COUNT_OF(kGrids); ++g) {
        ok = check_binary(k, is_int ? (void*)ia : (void*)fa,
                          is_int ? (void*)ib : (void*)fb, n, kGrids[g]);
      }
    }
    free(fa);
    free(fb);
    free(ia);
    free(ib);
    CHECK(ok);
  }
}

static void test_i32_kernels_wrap_and_never_trap(void) {
  enum { N = 8 };
  const int32_t a[N] = {INT32_MAX, INT32_MIN, INT32_MIN, 7,
                        -7,        5,         0,         INT32_MIN};
  const int32_t b[N] = {1, -1, 0, -2, 2, 0, 0, INT32_MIN};
  const int32_t want[][N] = {
      // add_i32, sub_i32, mul_i32, div_i32, max_i32
      {INT32_MIN, INT32_MAX, INT32_MIN, 5, -5, 5, 0, 0},
      {INT32_MAX - 1, INT32_MIN + 1, INT32_MIN, 9, -9, 5, 0, 0},
      {INT32_MAX, INT32_MIN, 0, -14, -14, 0, 0, 0},
      {INT32_MAX, INT32_MIN, 0, -3, -3, 0, 0, 1},
      {INT32_MAX, -1, 0, 7, 2, 5, 0, INT32_MIN},
  };
  const char* names[] = {"add_i32", "sub_i32", "mul_i32", "div_i32",
                         "max_i32"};
  const uint32_t grid[3] = {3, 1, 1};
  for (size_t k = 0; k < COUNT_OF(names); ++k) {
    int32_t out[N];
    memset(out, POISON, sizeof(out));
    void* bindings[3] = {(void*)a, (void*)b, out};
    const size_t lengths[3] = {sizeof(a), sizeof(b), sizeof(out)};
    const uint32_t constants[1] = {N};
    CHECK_EQ_INT(run_kernel(names[k], grid, bindings, lengths, 3, constants,
                            1),
                 HALRT_KERNEL_OK);
    for (size_t i = 0; i < N; ++i) {
      if (out[i] != want[k][i]) {
        fprintf(stderr, "%s element %zu\n", names[k], i);
      }
      CHECK_EQ_INT(out[i], want[k][i]);
    }
  }
}

static void test_float_edge_cases_follow_fmaxf_and_relu_rules(void) {
  const float nan = NAN;
  const float a[4] = {nan, 1.0f, nan, -0.0f};
  const float b[4] = {1.0f, nan, nan, -3.0f};
  float out[4];
  void* bindings[3] = {(void*)a, (void*)b, out};
  const size_t lengths[3] = {sizeof(a), sizeof(b), sizeof(out)};
  const uint32_t constants[1] = {4};
  const uint32_t grid[3] = {2, 1, 1};
  CHECK_EQ_INT(run_kernel("max_f32", grid, bindings, lengths, 3, constants, 1),
               HALRT_KERNEL_OK);
  CHECK(out[0] == 1.0f && out[1] == 1.0f && isnan(out[2]));
  CHECK(out[3] == -0.0f);

  // relu: NaN, -0 and negatives all become +0.
  const float x[4] = {nan, -0.0f, -2.5f, 2.5f};
  void* relu_bindings[2] = {(void*)x, out};
  CHECK_EQ_INT(run_kernel("relu_f32", grid, relu_bindings, lengths, 2,
                          constants, 1),
               HALRT_KERNEL_OK);
  CHECK(f32_bits(out[0]) == 0 && f32_bits(out[1]) == 0);
  CHECK(f32_bits(out[2]) == 0 && out[3] == 2.5f);

  const float zero[4] = {0.0f, 0.0f, -0.0f, 0.0f};
  const float num[4] = {1.0f, -1.0f, 1.0f, 0.0f};
  void* div_bindings[3] = {(void*)num, (void*)zero, out};
  CHECK_EQ_INT(run_kernel("div_f32", grid, div_bindings, lengths, 3,
                          constants, 1),
               HALRT_KERNEL_OK);
  CHECK(out[0] == INFINITY && out[1] == -INFINITY && out[2] == -INFINITY);
  CHECK(isnan(out[3]));
}

static void test_axpy_and_relu_match_reference_for_any_grid(void) {
  rng_t rng = {0xA11CE};
  const float alpha = -1.75f;
  for (size_t s = 0; s < COUNT_OF(kSizes); ++s) {
    const size_t n = kSizes[s];
    float* x = rng_floats(&rng, n, -8, 8);
    float* y = rng_floats(&rng, n, -8, 8);
    if (x == NULL || y == NULL) {
      free(x);
      free(y);
      CHECK(false);
    }
    bool ok = true;
    for (size_t g = 0; ok && g < COUNT_OF(kGrids); ++g) {
      float* axpy = alloc_poisoned(n * 4);
      float* relu = alloc_poisoned(n * 4);
      const size_t lengths[3] = {n * 4, n * 4, n * 4};
      const uint32_t axpy_constants[2] = {(uint32_t)n, f32_bits(alpha)};
      void* axpy_bindings[3] = {x, y, axpy};
      void* relu_bindings[2] = {x, relu};
      ok = axpy != NULL && relu != NULL &&
           run_kernel("axpy_f32", kGrids[g], axpy_bindings, lengths, 3,
                      axpy_constants, 2) == 0 &&
           run_kernel("relu_f32", kGrids[g], relu_bindings, lengths, 2,
                      axpy_constants, 1) == 0 &&
           is_poisoned(axpy + n, SLACK) && is_poisoned(relu + n, SLACK);
      for (size_t i = 0; ok && i < n; ++i) {
        const double want = (double)alpha * x[i] + y[i];
        const double scale = fabs((double)alpha * x[i]) + fabs((double)y[i]);
        ok = near_f32(axpy[i], want, 2.0 * FLT_EPSILON * scale) &&
             relu[i] == (x[i] > 0.0f ? x[i] : 0.0f);
        if (!ok) fprintf(stderr, "n=%zu grid #%zu element %zu\n", n, g, i);
      }
      free(axpy);
      free(relu);
    }
    free(x);
    free(y);
    CHECK(ok);
  }
}

static void test_elementwise_outputs_may_alias_inputs(void) {
  enum { N = 1001 };
  rng_t rng = {0xA1A5};
  float* x = rng_floats(&rng, N, -2, 2);
  float* y = rng_floats(&rng, N, -2, 2);
  float* want = malloc(N * sizeof(float));
  bool ok = x != NULL && y != NULL && want != NULL;
  for (size_t i = 0; ok && i < N; ++i) want[i] = x[i] * y[i];
  const size_t lengths[3] = {N * 4, N * 4, N * 4};
  const uint32_t constants[1] = {N};
  const uint32_t grid[3] = {7, 1, 1};
  void* mul_bindings[3] = {x, y, x};  // x *= y
  void* copy_bindings[2] = {x, x};
  ok = ok &&
       run_kernel("mul_f32", grid, mul_bindings, lengths, 3, constants, 1) ==
           0 &&
       run_kernel("copy_u8", grid, copy_bindings, lengths, 2, constants, 1) ==
           0 &&
       memcmp(x, want, N * sizeof(float)) == 0;
  free(x);
  free(y);
  free(want);
  CHECK(ok);
}

static void test_zero_elements_is_valid_and_touches_nothing(void) {
  const uint32_t grid[3] = {4, 1, 1};
  // Sizes 0; conv2d's and pool2d's strides, dilations and groups 1.
  const uint32_t zeros[31] = {0};
  const uint32_t conv[16] = {0, 1, 0, 0, 0, 1, 1, 1, 0, 0, 1, 1, 0, 0, 1, 1};
  const uint32_t pool[13] = {0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0};
  const uint32_t chain[31] = {1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5};
  const uint32_t resize[6] = {0, 0, 0, 0, 0, 3};
  const size_t lengths[4] = {0, 0, 0, 0};
  void* bindings[4] = {NULL, NULL, NULL, NULL};
  for (size_t i = 0; i < COUNT_OF(kExpected); ++i) {
    const char* name = kExpected[i].name;
    // It writes its counts, zeros here (test_chain_health_f32_counts...).
    if (strcmp(name, "chain_health_f32") == 0) continue;
    const uint32_t* constants = strcmp(name, "conv2d_f32") == 0    ? conv
                                : strcmp(name, "pool2d_f32") == 0  ? pool
                                : strcmp(name, "chain_f32") == 0   ? chain
                                : strcmp(name, "resize2d_f32") == 0 ? resize
                                                                   : zeros;
    CHECK_EQ_INT(run_kernel(name, grid, bindings, lengths,
                            kExpected[i].binding_count, constants,
                            kExpected[i].constant_count),
                 HALRT_KERNEL_OK);
  }
}

static double thread_cpu_seconds(void) {
  struct timespec now;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return (double)now.tv_sec + (double)now.tv_nsec * 1e-9;
}

// A size of 0 means no output, whatever the other sizes say: the kernel must
// not walk ~2^32 empty rows (softmax_rows_f32 with cols == 0 used to, about
// 40 s at -O2 and minutes under ASan). No memory is read or written, so the
// only evidence is time: the bound is generous both ways, as the whole table
// now takes microseconds.
static void test_empty_work_returns_without_walking_other_sizes(void) {
  static const struct {
    const char* name;
    uint32_t binding_count;
    uint32_t constants[20];
  } kCases[] = {
      {"binary_f32",
       3,
       {0, 0xFFFFu, 0xFFFFu, 0xFFFFu, 0, 0xFFFFu, 0xFFFFu, 1, 1, 1, 1, 1, 1,
        1, 1, 1, 1, 1, 1}},
      {"softmax_rows_f32", 2, {0xFFFFFFF0u, 0}},
      {"reduce_sum_f32", 2, {0, 0xFFFFFFF0u}},
      {"matmul_f32", 3, {0xFFFFFFF0u, 0, 0}},
      {"matmul_f32", 3, {0, 0, 0xFFFFFFF0u}},
      {"matmul_f32", 3, {0, 0xFFFFFFF0u, 0}},
  };
  const uint32_t grid[3] = {1, 1, 1};
  const size_t lengths[3] = {0, 0, 0};
  void* bindings[3] = {NULL, NULL, NULL};
  const double start = thread_cpu_seconds();
  for (size_t i = 0; i < COUNT_OF(kCases); ++i) {
    CHECK_EQ_INT(run_kernel(kCases[i].name, grid, bindings, lengths,
                            kCases[i].binding_count, kCases[i].constants,
                            find_kernel(kCases[i].name)->constant_count),
                 HALRT_KERNEL_OK);
  }
  const double seconds = thread_cpu_seconds() - start;
  if (seconds >= 1.0) fprintf(stderr, "empty kernels took %.1f s\n", seconds);
  CHECK(seconds < 1.0);
}

// Grids whose linear size overflows 64 bits still split n items into
// chunks of one: workgroup x = i owns item i, all others own nothing.
static void test_huge_grids_partition_without_overflow(void) {
  const halrt_kernel_entry_t* fill = find_kernel("fill_u32");
  CHECK(fill != NULL);
  uint32_t out[4];
  memset(out, POISON, sizeof(out));
  const uint32_t constants[2] = {3, 42};
  void* bindings[1] = {out};
  const size_t length = 12;
  const halrt_dispatch_state_t dispatch = {
      {UINT32_MAX, UINT32_MAX, UINT32_MAX}, {1, 1, 1}, 2, 1, constants,
      bindings, &length};
  const uint32_t ids[][3] = {
      {1, 0, 0}, {0, 1, 0}, {0, 0, 1}, {UINT32_MAX - 1, UINT32_MAX - 1,
                                        UINT32_MAX - 1}};
  for (size_t i = 0; i < COUNT_OF(ids); ++i) {
    const halrt_workgroup_state_t workgroup = {
        {ids[i][0], ids[i][1], ids[i][2]}, 0};
    CHECK_EQ_INT(fill->fn(&dispatch, &workgroup), HALRT_KERNEL_OK);
  }
  CHECK(out[0] == 0xFFFFFFFFu && out[1] == 42 && out[2] == 0xFFFFFFFFu);
  CHECK(out[3] == 0xFFFFFFFFu);
}

//===----------------------------------------------------------------------===//
// matmul_f32
//===----------------------------------------------------------------------===//

static const uint32_t kMatmulShapes[][3] = {
    // M, K, N
    {1, 1, 1},    {5, 7, 3},      {33, 65, 17}, {128, 128, 128},
    {4, 8, 8},    {70, 300, 9},   {130, 129, 37}, {3, 0, 5},
    {0, 4, 4},    {4, 4, 0},
};
static const uint32_t kMatmulGrids[][3] = {
    {1, 1, 1}, {3, 2, 1}, {16, 16, 1}, {2, 5, 1}, {40, 1, 1},
};

// The matmul_f32 code paths this build and CPU run: the library's entry,
// then each instruction-set variant (hal/local/builtin_kernels.h).
typedef struct matmul_path_t {
  const char* name;
  halrt_kernel_fn_t fn;
} matmul_path_t;
enum { MATMUL_PATH_MAX = 4 };

static size_t matmul_paths(matmul_path_t paths[MATMUL_PATH_MAX]) {
  static const struct {
    const char* name;
    hrt_builtin_isa_t isa;
  } kIsas[] = {{"portable", HRT_BUILTIN_ISA_PORTABLE},
               {"avx2", HRT_BUILTIN_ISA_AVX2},
               {"avx512", HRT_BUILTIN_ISA_AVX512}};
  size_t count = 0;
  paths[count++] = (matmul_path_t){"entry", find_kernel("matmul_f32")->fn};
  for (size_t i = 0; i < COUNT_OF(kIsas); ++i) {
    const halrt_kernel_fn_t fn =
        hrt_local_builtin_matmul_f32_for_isa(kIsas[i].isa);
    if (fn != NULL) paths[count++] = (matmul_path_t){kIsas[i].name, fn};
  }
  return count;
}

static void test_matmul_matches_reference_and_is_grid_independent(void) {
  matmul_path_t paths[MATMUL_PATH_MAX];
  const size_t path_count = matmul_paths(paths);
  rng_t rng = {0xC0FFEE};
  for (size_t s = 0; s < COUNT_OF(kMatmulShapes); ++s) {
    const size_t M = kMatmulShapes[s][0], K = kMatmulShapes[s][1],
                 N = kMatmulShapes[s][2];
    float* a = rng_floats(&rng, M * K, -1, 1);
    float* b = rng_floats(&rng, K * N, -1, 1);
    double* want = malloc(M * N * 8 + 8);
    double* bound = malloc(M * N * 8 + 8);
    float* first = malloc(M * N * 4 + 4);
    bool ok = a != NULL && b != NULL && want != NULL && bound != NULL &&
              first != NULL;
    for (size_t i = 0; ok && i < M; ++i) {
      for (size_t j = 0; j < N; ++j) {
        double sum = 0.0, sum_abs = 0.0;
        for (size_t k = 0; k < K; ++k) {
          sum += (double)a[i * K + k] * b[k * N + j];
          sum_abs += fabs((double)a[i * K + k] * b[k * N + j]);
        }
        want[i * N + j] = sum;
        // Worst-case float summation error for K products.
        bound[i * N + j] = (double)(K + 2) * FLT_EPSILON * sum_abs;
      }
    }
    for (size_t p = 0; ok && p < path_count; ++p) {
      for (size_t g = 0; ok && g < COUNT_OF(kMatmulGrids); ++g) {
        float* c = alloc_poisoned(M * N * 4);
        void* bindings[3] = {a, b, c};
        const size_t lengths[3] = {M * K * 4, K * N * 4, M * N * 4};
        const uint32_t constants[3] = {(uint32_t)M, (uint32_t)K, (uint32_t)N};
        ok = c != NULL &&
             run_kernel_fn(paths[p].fn, kMatmulGrids[g], bindings, lengths, 3,
                           constants, 3) == 0 &&
             is_poisoned(c + M * N, SLACK);
        for (size_t i = 0; ok && i < M * N; ++i) {
          ok = near_f32(c[i], want[i], bound[i]);
        }
        if (ok && p == 0 && g == 0) memcpy(first, c, M * N * 4);
        // Each element sums in the same order whatever the grid and
        // whichever instruction set runs.
        ok = ok && memcmp(first, c, M * N * 4) == 0;
        if (!ok) {
          fprintf(stderr, "matmul %zux%zux%zu grid %ux%u path %s\n", M, K, N,
                  kMatmulGrids[g][0], kMatmulGrids[g][1], paths[p].name);
        }
        free(c);
      }
    }
    free(a);
    free(b);
    free(want);
    free(bound);
    free(first);
    CHECK(ok);
  }
}

// Every instruction-set variant against the portable kernel, on shapes
// around every tile (4×8, 6×16, 8×32) and panel (64 columns, 128 deep) edge
// and on several grids, with inputs spread over many binades so that any
// change in how products are rounded or summed changes the bits. Under
// SANITIZE=1 this also checks that no variant reads past a or b.
static void test_matmul_instruction_sets_give_identical_bits(void) {
  static const uint32_t kShapes[][3] = {
      // M, K, N
      {1, 1, 1},     {1, 1, 40},    {9, 1, 33},     {2, 3, 1},
      {6, 16, 16},   {8, 32, 32},   {7, 17, 15},    {13, 129, 45},
      {73, 128, 65}, {25, 300, 70}, {97, 257, 129}, {145, 385, 200},
      {3, 1000, 2},
  };
  static const uint32_t kGrids[][3] = {
      {1, 1, 1}, {3, 2, 1}, {7, 5, 1}, {1, 16, 1}, {40, 3, 1},
  };
  matmul_path_t paths[MATMUL_PATH_MAX];
  const size_t path_count = matmul_paths(paths);
  printf("info: matmul_f32 paths compared:");
  for (size_t p = 0; p < path_count; ++p) printf(" %s", paths[p].name);
  printf("\n");
  rng_t rng = {0xB17B17};
  for (size_t s = 0; s < COUNT_OF(kShapes); ++s) {
    const size_t M = kShapes[s][0], K = kShapes[s][1], N = kShapes[s][2];
    float* a = malloc(M * K * 4);
    float* b = malloc(K * N * 4);
    float* want = malloc(M * N * 4);
    float* c = malloc(M * N * 4);
    bool ok = a != NULL && b != NULL && want != NULL && c != NULL;
    for (size_t i = 0; ok && i < M * K; ++i) {
      a[i] = ldexpf(rng_f32(&rng, -1, 1), (int)(rng_u32(&rng) % 41) - 20);
    }
    for (size_t i = 0; ok && i < K * N; ++i) {
      b[i] = ldexpf(rng_f32(&rng, -1, 1), (int)(rng_u32(&rng) % 41) - 20);
    }
    void* bindings[3] = {a, b, c};
    const size_t lengths[3] = {M * K * 4, K * N * 4, M * N * 4};
    const uint32_t constants[3] = {(uint32_t)M, (uint32_t)K, (uint32_t)N};
    const uint32_t whole[3] = {1, 1, 1};
    bindings[2] = want;
    ok = ok && run_kernel_fn(hrt_local_builtin_matmul_f32_for_isa(
                                 HRT_BUILTIN_ISA_PORTABLE),
                             whole, bindings, lengths, 3, constants, 3) == 0;
    bindings[2] = c;
    for (size_t p = 0; ok && p < path_count; ++p) {
      for (size_t g = 0; ok && g < COUNT_OF(kGrids); ++g) {
        memset(c, POISON, M * N * 4);
        ok = run_kernel_fn(paths[p].fn, kGrids[g], bindings, lengths, 3,
                           constants, 3) == 0 &&
             memcmp(want, c, M * N * 4) == 0;
        if (!ok) {
          fprintf(stderr, "matmul %zux%zux%zu grid %ux%u path %s\n", M, K, N,
                  kGrids[g][0], kGrids[g][1], paths[p].name);
        }
      }
    }
    free(a);
    free(b);
    free(want);
    free(c);
    CHECK(ok);
  }
}

static void test_matmul_prints_single_thread_gflops(void) {
  enum { SIZE = 256, REPEATS = 5 };
  const size_t elements = (size_t)SIZE * SIZE;
  rng_t rng = {7};
  float* a = rng_floats(&rng, elements, -1, 1);
  float* b = rng_floats(&rng, elements, -1, 1);
  float* c = malloc(elements * 4);
  if (a == NULL || b == NULL || c == NULL) {
    free(a);
    free(b);
    free(c);
    CHECK(false);
  }
  void* bindings[3] = {a, b, c};
  const size_t lengths[3] = {elements * 4, elements * 4, elements * 4};
  const uint32_t constants[3] = {SIZE, SIZE, SIZE};
  const uint32_t grid[3] = {1, 1, 1};
  matmul_path_t paths[MATMUL_PATH_MAX];
  const size_t path_count = matmul_paths(paths);
  int code = 0;
  printf("info: matmul_f32 %dx%dx%d single thread, GFLOP/s:", SIZE, SIZE, SIZE);
  for (size_t p = 0; p < path_count; ++p) {
    double best = 1e30;
    for (int r = 0; r < REPEATS; ++r) {
      struct timespec start, end;
      timespec_get(&start, TIME_UTC);
      code |=
          run_kernel_fn(paths[p].fn, grid, bindings, lengths, 3, constants, 3);
      timespec_get(&end, TIME_UTC);
      const double seconds = (double)(end.tv_sec - start.tv_sec) +
                             (double)(end.tv_nsec - start.tv_nsec) * 1e-9;
      if (seconds < best) best = seconds;
    }
    printf(" %s %.1f", paths[p].name, 2.0 * SIZE * SIZE * SIZE / best * 1e-9);
  }
  printf("\n");
  free(a);
  free(b);
  free(c);
  CHECK_EQ_INT(code, HALRT_KERNEL_OK);
}

//===----------------------------------------------------------------------===//
// Row kernels
//===----------------------------------------------------------------------===//

static const uint32_t kRowShapes[][2] = {
    // rows, cols
    {1, 1}, {3, 7}, {17, 1000}, {2, 4097}, {0, 5}, {5, 0}, {65, 3},
};
static const uint32_t kRowGrids[][3] = {
    {1, 1, 1}, {3, 1, 1}, {64, 1, 1}, {2, 3, 1}, {100, 1, 1},
};

// Runs `name` on x (rows×cols) into a poisoned output of `out_elements`
// over every row grid. Each row is computed whole by one workgroup, so all
// grids must agree bit for bit; returns that output (owned), or NULL.
static float* run_rows_everywhere(const char* name, const float* x,
                                  size_t rows, size_t cols,
                                  size_t out_elements) {
  float* first = NULL;
  for (size_t g = 0; g < COUNT_OF(kRowGrids); ++g) {
    float* out = alloc_poisoned(out_elements * 4);
    bool ok = out != NULL;
    if (ok) {
      void* bindings[2] = {(void*)x, out};
      const size_t lengths[2] = {rows * cols * 4, out_elements * 4};
      const uint32_t constants[2] = {(uint32_t)rows, (uint32_t)cols};
      ok = run_kernel(name, kRowGrids[g], bindings, lengths, 2, constants,
                      2) == 0 &&
           is_poisoned(out + out_elements, SLACK) &&
           (first == NULL || memcmp(first, out, out_elements * 4) == 0);
    }
    if (!ok) {
      fprintf(stderr, "%s %zux%zu grid #%zu failed\n", name, rows, cols, g);
      free(out);
      free(first);
      return NULL;
    }
    if (first == NULL) {
      first = out;
    } else {
      free(out);
    }
  }
  return first;
}

static void test_softmax_rows_is_stable_and_matches_reference(void) {
  rng_t rng = {0x50F7};
  for (size_t s = 0; s < COUNT_OF(kRowShapes); ++s) {
    const size_t rows = kRowShapes[s][0], cols = kRowShapes[s][1];
    float* x = rng_floats(&rng, rows * cols, -10, 10);
    CHECK(x != NULL);
    // Large values overflow expf unless the row max is subtracted.
    if (rows > 1) {
      for (size_t j = 0; j < cols; ++j) x[cols + j] += 1000.0f;
    }
    float* out = run_rows_everywhere("softmax_rows_f32", x, rows, cols,
                                     rows * cols);
    bool ok = out != NULL;
    for (size_t r = 0; ok && r < rows; ++r) {
      double max = -INFINITY, sum = 0.0;
      for (size_t j = 0; j < cols; ++j) max = fmax(max, x[r * cols + j]);
      for (size_t j = 0; j < cols; ++j) sum += exp(x[r * cols + j] - max);
      for (size_t j = 0; ok && j < cols; ++j) {
        const double want = exp(x[r * cols + j] - max) / sum;
        ok = near_f32(out[r * cols + j], want, 1e-5 * want + 1e-9);
        if (!ok) fprintf(stderr, "%zux%zu at %zu,%zu\n", rows, cols, r, j);
      }
    }
    free(x);
    free(out);
    CHECK(ok);
  }
}

static void test_softmax_rows_handles_infinities_and_aliasing(void) {
  enum { ROWS = 3, COLS = 4 };
  float x[ROWS * COLS] = {
      -INFINITY, 0.0f,      0.0f,      -INFINITY,  // masked entries give 0
      -INFINITY, -INFINITY, -INFINITY, -INFINITY,  // no finite max: NaN
      1.0f,      2.0f,      3.0f,      4.0f,
  };
  void* bindings[2] = {x, x};  // in place
  const size_t lengths[2] = {sizeof(x), sizeof(x)};
  const uint32_t constants[2] = {ROWS, COLS};
  const uint32_t grid[3] = {2, 1, 1};
  CHECK_EQ_INT(run_kernel("softmax_rows_f32", grid, bindings, lengths, 2,
                          constants, 2),
               HALRT_KERNEL_OK);
  CHECK(x[0] == 0.0f && x[1] == 0.5f && x[2] == 0.5f && x[3] == 0.0f);
  for (int j = 0; j < COLS; ++j) CHECK(isnan(x[COLS + j]));
  const double sum = exp(-3.0) + exp(-2.0) + exp(-1.0) + 1.0;
  for (int j = 0; j < COLS; ++j) {
    const double want = exp((double)j - 3.0) / sum;
    CHECK(near_f32(x[2 * COLS + j], want, 1e-6 * want));
  }
}

static void test_reduce_sum_matches_reference(void) {
  rng_t rng = {0x5EED};
  for (size_t s = 0; s < COUNT_OF(kRowShapes); ++s) {
    const size_t rows = kRowShapes[s][0], cols = kRowShapes[s][1];
    float* x = rng_floats(&rng, rows * cols, -1, 1);
    CHECK(x != NULL);
    float* out = run_rows_everywhere("reduce_sum_f32", x, rows, cols, rows);
    bool ok = out != NULL;
    for (size_t r = 0; ok && r < rows; ++r) {
      double sum = 0.0, sum_abs = 0.0;
      for (size_t j = 0; j < cols; ++j) {
        sum += x[r * cols + j];
        sum_abs += fabs((double)x[r * cols + j]);
      }
      ok = near_f32(out[r], sum, 4e-6 * sum_abs);
      if (!ok) fprintf(stderr, "%zux%zu row %zu\n", rows, cols, r);
    }
    free(x);
    free(out);
    CHECK(ok);
  }
}

// A sequential float sum of 2^22 copies of 0.1f is off by several percent;
// pairwise summation stays within a few parts per million.
static void test_reduce_sum_is_accurate_for_long_rows(void) {
  const size_t cols = (size_t)1 << 22;
  float* x = malloc(cols * 4);
  CHECK(x != NULL);
  for (size_t i = 0; i < cols; ++i) x[i] = 0.1f;
  float out[1] = {0};
  void* bindings[2] = {x, out};
  const size_t lengths[2] = {cols * 4, sizeof(out)};
  const uint32_t constants[2] = {1, (uint32_t)cols};
  const uint32_t grid[3] = {1, 1, 1};
  const int code = run_kernel("reduce_sum_f32", grid, bindings, lengths, 2,
                              constants, 2);
  free(x);
  CHECK_EQ_INT(code, HALRT_KERNEL_OK);
  const double want = (double)cols * 0.1f;
  CHECK(fabs(out[0] - want) <= 1e-5 * want);
}

//===----------------------------------------------------------------------===//
// Validation
//===----------------------------------------------------------------------===//

// A small valid call of every kernel: constants, and each binding's byte
// length and element size.
static const struct {
  const char* name;
  uint32_t constants[31];
  size_t lengths[4];
  size_t element_size;
} kValidCalls[] = {
#define BINARY_CALL(name) {name, {5}, {20, 20, 20}, 4}
    {"fill_u32", {5, 9}, {20}, 4},
    {"copy_u8", {5}, {5, 5}, 1},
    BINARY_CALL("add_f32"), BINARY_CALL("sub_f32"), BINARY_CALL("mul_f32"),
    BINARY_CALL("div_f32"), BINARY_CALL("max_f32"), BINARY_CALL("add_i32"),
    BINARY_CALL("sub_i32"), BINARY_CALL("mul_i32"), BINARY_CALL("div_i32"),
    BINARY_CALL("max_i32"),
#undef BINARY_CALL
    {"axpy_f32", {5, 0x3F800000u}, {20, 20, 20}, 4},
    {"relu_f32", {5}, {20, 20}, 4},
    {"matmul_f32", {2, 3, 4}, {24, 48, 32}, 4},
    {"softmax_rows_f32", {2, 3}, {24, 24}, 4},
    {"reduce_sum_f32", {2, 3}, {24, 8}, 4},
    {"binary_f32",
     {0, 1, 1, 1, 1, 1, 5, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1},
     {20, 20, 20},
     4},
    {"unary_f32", {5, 0, 0, 0}, {20, 20}, 4},
    // x 1x1x2x2, w 1x1x1x2, bias 1, out 1x1x2x1
    {"conv2d_f32",
     {1, 1, 2, 2, 1, 1, 1, 2, 2, 1, 1, 1, 0, 0, 1, 1},
     {16, 8, 4, 8},
     4},
    // x 1x1x2x2 -> out 1x1x1x1
    {"pool2d_f32", {1, 1, 2, 2, 1, 1, 2, 2, 1, 1, 0, 0, 1}, {16, 4}, 4},
    // 1 batch of [1x2]·[2x2]
    {"bmm_f32", {1, 1, 2, 2, 2, 2, 1, 4, 2, 1}, {8, 16, 8}, 4},
    // 5 elements from src[1..5] to dst[0..4]
    {"strided_copy_f32",
     {1, 0, 1, 1, 1, 1, 1, 5, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1},
     {24, 20},
     4},
    // out = y - (-x) over 5 elements, y dense
    {"chain_f32",
     {2, 1, 1, 1, 1, 1, 5, 0, 0, 0, 0, 0, 1, 5, 0, 0, 33 | 1 << 8, 0, 0},
     {20, 20, 20},
     4},
    // the same, with 18 counts for each of the 2 workgroups
    {"chain_health_f32",
     {2, 1, 1, 1, 1, 1, 5, 0, 0, 0, 0, 0, 1, 5, 0, 0, 33 | 1 << 8, 0, 0},
     {20, 20, 20, 144},
     4},
    // x 1x2x2 -> out 1x1x1
    {"resize2d_f32", {1, 2, 2, 1, 1, 3}, {16, 12, 12, 4}, 4},
    // 5 elements, cond dense, a and b broadcast scalars
    {"where_f32",
     {1, 1, 1, 1, 1, 5, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
     {20, 4, 4, 20},
     4},
};

enum { BUFFER_BYTES = 144 };

// Runs call `c` with `lengths`, the given arity and grid on poisoned
// buffers; returns the code, or -2 if any buffer was written. The binding,
// length and constant arrays are heap copies of exactly the given counts,
// so the sanitizer build catches a kernel that reads past them before it
// checks the arity.
static int run_on_poison(size_t c, const size_t* lengths,
                         uint32_t binding_count, uint32_t constant_count,
                         const uint32_t grid[3]) {
  uint8_t buffers[3][BUFFER_BYTES];
  memset(buffers, POISON, sizeof(buffers));
  // One byte for an empty array: still a distinct, unreadable allocation.
  void** bindings = malloc(binding_count * sizeof(void*) + !binding_count);
  size_t* exact_lengths =
      malloc(binding_count * sizeof(size_t) + !binding_count);
  uint32_t* constants =
      malloc(constant_count * sizeof(uint32_t) + !constant_count);
  int code = -3;
  if (bindings != NULL && exact_lengths != NULL && constants != NULL) {
    for (uint32_t i = 0; i < binding_count; ++i) {
      bindings[i] = buffers[i % 3];
      exact_lengths[i] = i < 4 ? lengths[i] : BUFFER_BYTES;
    }
    for (uint32_t i = 0; i < constant_count; ++i) {
      constants[i] = i < 31 ? kValidCalls[c].constants[i] : 0;
    }
    code = run_kernel(kValidCalls[c].name, grid, bindings, exact_lengths,
                      binding_count, constants, constant_count);
  }
  free(bindings);
  free(exact_lengths);
  free(constants);
  return is_poisoned(buffers, sizeof(buffers)) ? code : -2;
}

static void test_short_bindings_are_rejected_before_any_write(void) {
  const uint32_t grid[3] = {2, 1, 1};
  CHECK_EQ_INT(COUNT_OF(kValidCalls), COUNT_OF(kExpected));
  for (size_t c = 0; c < COUNT_OF(kValidCalls); ++c) {
    const halrt_kernel_entry_t* entry = find_kernel(kValidCalls[c].name);
    CHECK(entry != NULL);
    for (uint32_t shorten = 0; shorten < entry->binding_count; ++shorten) {
      size_t lengths[4];
      memcpy(lengths, kValidCalls[c].lengths, sizeof(lengths));
      lengths[shorten] -= kValidCalls[c].element_size;
      const int code = run_on_poison(c, lengths, entry->binding_count,
                                     entry->constant_count, grid);
      if (code != HALRT_KERNEL_INVALID_ARGUMENT) {
        fprintf(stderr, "%s binding %u\n", entry->name, shorten);
      }
      CHECK_EQ_INT(code, HALRT_KERNEL_INVALID_ARGUMENT);
    }
    // The unshortened call is valid, so the rejections above are the
    // lengths' doing.
    uint8_t buffers[4][BUFFER_BYTES];
    void* bindings[4] = {buffers[0], buffers[1], buffers[2], buffers[3]};
    memset(buffers, 0, sizeof(buffers));
    CHECK_EQ_INT(run_kernel(entry->name, grid, bindings,
                            kValidCalls[c].lengths, entry->binding_count,
                            kValidCalls[c].constants, entry->constant_count),
                 HALRT_KERNEL_OK);
  }
}

static void test_wrong_arity_or_grid_is_rejected(void) {
  const uint32_t grid[3] = {1, 1, 1};
  for (size_t c = 0; c < COUNT_OF(kValidCalls); ++c) {
    const halrt_kernel_entry_t* entry = find_kernel(kValidCalls[c].name);
    CHECK(entry != NULL);
    const size_t* lengths = kValidCalls[c].lengths;
    const uint32_t bindings = entry->binding_count;
    const uint32_t constants = entry->constant_count;
    CHECK_EQ_INT(run_on_poison(c, lengths, bindings, constants - 1, grid),
                 HALRT_KERNEL_INVALID_ARGUMENT);
    CHECK_EQ_INT(run_on_poison(c, lengths, bindings, constants + 1, grid),
                 HALRT_KERNEL_INVALID_ARGUMENT);
    CHECK_EQ_INT(run_on_poison(c, lengths, bindings - 1, constants, grid),
                 HALRT_KERNEL_INVALID_ARGUMENT);
    CHECK_EQ_INT(run_on_poison(c, lengths, bindings + 1, constants, grid),
                 HALRT_KERNEL_INVALID_ARGUMENT);
  }
  size_t matmul = 0;
  while (strcmp(kValidCalls[matmul].name, "matmul_f32") != 0) ++matmul;
  const uint32_t deep_grid[3] = {1, 1, 2};
  CHECK_EQ_INT(run_on_poison(matmul, kValidCalls[matmul].lengths, 3, 3,
                             deep_grid),
               HALRT_KERNEL_INVALID_ARGUMENT);
}

// Constants whose byte sizes overflow 64 bits must be rejected even when
// the bindings claim to be as large as memory can be: a wrapped product
// would otherwise pass the length check.
static void test_overflowing_sizes_are_rejected(void) {
  const uint32_t grid[3] = {1, 1, 1};
  const size_t huge[3] = {SIZE_MAX, SIZE_MAX, SIZE_MAX};
  uint8_t buffers[3][BUFFER_BYTES];
  memset(buffers, POISON, sizeof(buffers));
  void* bindings[3] = {buffers[0], buffers[1], buffers[2]};
  const uint32_t matmul_cases[][3] = {
      {0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu},
      {0x80000000u, 0x80000000u, 0x80000000u},  // 2^62 * 4 wraps to 0
      {1, 0x80000000u, 0x80000000u},
  };
  for (size_t i = 0; i < COUNT_OF(matmul_cases); ++i) {
    CHECK_EQ_INT(run_kernel("matmul_f32", grid, bindings, huge, 3,
                            matmul_cases[i], 3),
                 HALRT_KERNEL_INVALID_ARGUMENT);
  }
  const uint32_t row_constants[2] = {0x80000000u, 0x80000000u};
  CHECK_EQ_INT(run_kernel("softmax_rows_f32", grid, bindings, huge, 2,
                          row_constants, 2),
               HALRT_KERNEL_INVALID_ARGUMENT);
  CHECK_EQ_INT(run_kernel("reduce_sum_f32", grid, bindings, huge, 2,
                          row_constants, 2),
               HALRT_KERNEL_INVALID_ARGUMENT);
  CHECK(is_poisoned(buffers, sizeof(buffers)));

  // Real but wrong-sized bindings with the largest constants.
  const size_t small[3] = {BUFFER_BYTES, BUFFER_BYTES, BUFFER_BYTES};
  CHECK_EQ_INT(run_kernel("matmul_f32", grid, bindings, small, 3,
                          matmul_cases[0], 3),
               HALRT_KERNEL_INVALID_ARGUMENT);
  const uint32_t max_n[1] = {0xFFFFFFFFu};
  CHECK_EQ_INT(run_kernel("add_f32", grid, bindings, small, 3, max_n, 1),
               HALRT_KERNEL_INVALID_ARGUMENT);
  CHECK(is_poisoned(buffers, sizeof(buffers)));
}

//===----------------------------------------------------------------------===//
// binary_f32 and unary_f32
//===----------------------------------------------------------------------===//

static float ref_binary(uint32_t op, float x, float y) {
  switch (op) {
    case 0: return x + y;
    case 1: return x - y;
    case 2: return x * y;
    case 3: return x / y;
    case 4: return powf(x, y);
    // fmaxf and fminf, which leave -0 against +0 open: y then.
    case 5: return x > y || isnan(y) ? x : y;
    case 6: return x < y || isnan(y) ? x : y;
    case 7: return x == y ? 1.0f : 0.0f;
    // NaN kept (x's first), else y unless x is beyond it.
    case 8: return isnan(x) ? x : isnan(y) ? y : x > y ? x : y;
    default: return isnan(x) ? x : isnan(y) ? y : x < y ? x : y;
  }
}

// Broadcasting as NumPy does, the reference computing each operand's offset
// from the output's coordinates directly.
static void test_binary_f32_broadcasts_every_op_for_any_grid(void) {
  rng_t rng = {0xB0B};
  // out [2,3,4,5]; a [3,1,5] (broadcast over dims 0 and 2); b transposed
  // [5,4] as strides.
  const uint32_t dims[6] = {1, 1, 2, 3, 4, 5};
  const uint32_t sa[6] = {0, 0, 0, 5, 0, 1};
  const uint32_t sb[6] = {0, 0, 0, 0, 1, 4};
  enum { N = 120 };
  float a[15], b[20];
  for (int i = 0; i < 15; ++i) a[i] = rng_f32(&rng, -3.0f, 3.0f);
  for (int i = 0; i < 20; ++i) b[i] = rng_f32(&rng, 0.25f, 2.0f);
  a[3] = NAN;
  b[6] = NAN;
  a[5] = b[3];  // an equal pair for op 7
  a[10] = -0.0f;  // -0 against +0 for the max and min ops, both ways
  b[1] = 0.0f;
  a[11] = 0.0f;
  b[5] = -0.0f;
  for (uint32_t op = 0; op < 10; ++op) {
    uint32_t constants[19] = {op};
    memcpy(constants + 1, dims, sizeof(dims));
    memcpy(constants + 7, sa, sizeof(sa));
    memcpy(constants + 13, sb, sizeof(sb));
    for (size_t g = 0; g < COUNT_OF(kGrids); ++g) {
      float* out = alloc_poisoned(N * 4);
      void* bindings[3] = {a, b, out};
      const size_t lengths[3] = {sizeof(a), sizeof(b), N * 4};
      CHECK_EQ_INT(run_kernel("binary_f32", kGrids[g], bindings, lengths, 3,
                              constants, 19),
                   0);
      int wrong = 0;
      for (uint32_t i0 = 0; i0 < 2; ++i0)
        for (uint32_t i1 = 0; i1 < 3; ++i1)
          for (uint32_t i2 = 0; i2 < 4; ++i2)
            for (uint32_t i3 = 0; i3 < 5; ++i3) {
              const float want =
                  ref_binary(op, a[i1 * 5 + i3], b[i3 * 4 + i2]);
              const float got = out[((i0 * 3 + i1) * 4 + i2) * 5 + i3];
              wrong += !(memcmp(&want, &got, 4) == 0 ||
                         (want != want && got != got));
            }
      CHECK_EQ_INT(wrong, 0);
      CHECK(is_poisoned(out + N, SLACK));
      free(out);
    }
  }
  // An operation past the last, and a binding shorter than its strides
  // reach, are refused before any write.
  uint32_t constants[19] = {10, 1, 1, 1, 1, 1, 4, 0, 0, 0, 0, 0, 1,
                            0, 0, 0, 0, 0, 1};
  float small[4] = {0}, out[4];
  memset(out, POISON, sizeof(out));
  void* bindings[3] = {small, small, out};
  const size_t lengths[3] = {16, 16, 16};
  const uint32_t one[3] = {1, 1, 1};
  CHECK_EQ_INT(run_kernel("binary_f32", one, bindings, lengths, 3, constants,
                          19),
               HALRT_KERNEL_INVALID_ARGUMENT);
  constants[0] = 0;
  constants[12] = 2;  // a's last stride 2: 7 elements needed, 4 given
  CHECK_EQ_INT(run_kernel("binary_f32", one, bindings, lengths, 3, constants,
                          19),
               HALRT_KERNEL_INVALID_ARGUMENT);
  CHECK(is_poisoned(out, sizeof(out)));
}

static double ref_unary(uint32_t op, double x, double alpha, double beta) {
  switch (op) {
    case 0: return 1.0 / (1.0 + exp(-x));
    case 1: return tanh(x);
    case 2: return exp(x);
    case 3: return log(x);
    case 4: return sqrt(x);
    case 5: return -x;
    case 6: return fabs(x);
    case 7: return 1.0 / x;
    case 8: return erf(x);
    case 9: return x < 0 ? alpha * x : x;
    case 10: return fmax(0.0, fmin(1.0, alpha * x + beta));
    case 11: return x * fmax(0.0, fmin(1.0, x / 6.0 + 0.5));
    case 12: return fmin(beta, fmax(alpha, x));
    default: return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
  }
}

// Each op against a double-precision reference, within a few float ULPs.
static void test_unary_f32_matches_reference(void) {
  rng_t rng = {0xACE};
  enum { N = 1000 };
  float x[N];
  for (int i = 0; i < N; ++i) x[i] = rng_f32(&rng, -9.0f, 9.0f);
  x[0] = 0.0f;
  const float alpha = 0.2f, beta = 0.5f;
  for (uint32_t op = 0; op < 14; ++op) {
    uint32_t constants[4] = {N, op, 0, 0};
    const float clip_low = -2.0f, clip_high = 3.0f;
    memcpy(&constants[2], op == 12 ? &clip_low : &alpha, 4);
    memcpy(&constants[3], op == 12 ? &clip_high : &beta, 4);
    float* out = alloc_poisoned(N * 4);
    void* bindings[2] = {x, out};
    const size_t lengths[2] = {sizeof(x), N * 4};
    CHECK_EQ_INT(run_kernel("unary_f32", kGrids[op % COUNT_OF(kGrids)],
                            bindings, lengths, 2, constants, 4),
                 0);
    int wrong = 0;
    for (int i = 0; i < N; ++i) {
      const double a = op == 12 ? clip_low : alpha;
      const double b = op == 12 ? clip_high : beta;
      const double want = ref_unary(op, x[i], a, b);
      const double tolerance = 4.0 * fabs(want) / (1 << 23) + 1e-7;
      if (!near_f32(out[i], want, tolerance)) {
        if (wrong++ < 3) {
          fprintf(stderr, "op %u x %.9g: got %.9g want %.9g\n", op, x[i],
                  out[i], want);
        }
      }
    }
    CHECK_EQ_INT(wrong, 0);
    CHECK(is_poisoned(out + N, SLACK));
    free(out);
  }
  // Clip with its low bound above its high one gives the high one, as
  // min(max(x, low), high); NaN stays NaN.
  {
    const float low = 1.0f, high = -1.0f;
    const float probe[3] = {0.0f, 5.0f, NAN};
    float clipped[3];
    uint32_t k[4] = {3, 12, 0, 0};
    memcpy(&k[2], &low, 4);
    memcpy(&k[3], &high, 4);
    void* probe_bindings[2] = {(void*)probe, clipped};
    const size_t probe_lengths[2] = {sizeof(probe), sizeof(clipped)};
    CHECK_EQ_INT(run_kernel("unary_f32", kGrids[0], probe_bindings,
                            probe_lengths, 2, k, 4),
                 0);
    CHECK(clipped[0] == -1.0f && clipped[1] == -1.0f && isnan(clipped[2]));
  }
  uint32_t constants[4] = {N, 14, 0, 0};
  float out[N];
  void* bindings[2] = {x, out};
  const size_t lengths[2] = {sizeof(x), sizeof(out)};
  const uint32_t one[3] = {1, 1, 1};
  CHECK_EQ_INT(run_kernel("unary_f32", one, bindings, lengths, 2, constants, 4),
               HALRT_KERNEL_INVALID_ARGUMENT);
}

// chain_f32 against its steps run one kernel at a time (unary_f32, then
// binary_f32 with x, a broadcast y, y at an offset or the scalar, in either
// order): the same bits, for every unary op and every binary op, operand
// and order. A y too short for an offset is rejected.
static void test_chain_f32_gives_the_bits_of_its_steps(void) {
  rng_t rng = {0xC4A1};
  enum { N = 6 * 7 * 9, C = 7, OFFSET = 5 };
  float x[N], y[C + OFFSET], scalar[1];
  for (int i = 0; i < N; ++i) x[i] = rng_f32(&rng, -9.0f, 9.0f);
  for (int i = 0; i < C + OFFSET; ++i) y[i] = rng_f32(&rng, -3.0f, 3.0f);
  x[0] = 0.0f;
  x[1] = -0.0f;
  x[2] = NAN;
  x[3] = INFINITY;
  const uint32_t dims[6] = {1, 1, 1, 6, C, 9};
  const uint32_t y_strides[6] = {0, 0, 0, 0, 1, 0};
  const uint32_t dense[6] = {0, 0, 0, C * 9, 9, 1};
  const uint32_t none[6] = {0};
  const size_t bytes = sizeof(x);
  int wrong = 0;
  for (uint32_t u = 0; u < 14; ++u) {
    for (uint32_t b = 0; b < 10 * 4 * 2; ++b) {
      const uint32_t op = b % 10, operand = b / 10 % 4, reversed = b / 40;
      const float alpha = u == 12 ? -2.0f : 0.25f, beta = 3.0f;
      scalar[0] = 1.5f;
      uint32_t k[31] = {2};
      memcpy(k + 1, dims, sizeof(dims));
      memcpy(k + 7, y_strides, sizeof(y_strides));
      k[13] = u;
      memcpy(&k[14], &alpha, 4);
      memcpy(&k[15], &beta, 4);
      k[16] = (reversed ? 32 : 16) + op + (operand << 8);
      memcpy(&k[17], scalar, 4);
      if (operand == 3) k[17] = 0x40A00000;  // y at offset 5.0f
      float* fused = alloc_poisoned(bytes);
      void* chain_bindings[3] = {x, y, fused};
      const size_t chain_lengths[3] = {bytes, sizeof(y), bytes};
      CHECK_EQ_INT(run_kernel("chain_f32", kGrids[b % COUNT_OF(kGrids)],
                              chain_bindings, chain_lengths, 3, k, 31),
                   0);
      // The same two steps, one kernel each.
      float t[N], out[N];
      uint32_t unary[4] = {N, u, k[14], k[15]};
      void* unary_bindings[2] = {x, t};
      const size_t unary_lengths[2] = {bytes, bytes};
      CHECK_EQ_INT(run_kernel("unary_f32", kGrids[0], unary_bindings,
                              unary_lengths, 2, unary, 4),
                   0);
      const float* other = operand == 0   ? x
                           : operand == 1 ? y
                           : operand == 3 ? y + OFFSET
                                          : scalar;
      const uint32_t* other_strides =
          operand == 0 ? dense : operand == 2 ? none : y_strides;
      uint32_t binary[19] = {op};
      memcpy(binary + 1, dims, sizeof(dims));
      memcpy(binary + (reversed ? 13 : 7), dense, sizeof(dense));
      memcpy(binary + (reversed ? 7 : 13), other_strides, sizeof(dense));
      void* binary_bindings[3] = {reversed ? (void*)other : t,
                                  reversed ? t : (void*)other, out};
      const size_t other_bytes = operand == 0   ? bytes
                                 : operand == 2 ? sizeof(scalar)
                                 : operand == 1 ? sizeof(y)
                                                : C * sizeof(float);
      const size_t binary_lengths[3] = {reversed ? other_bytes : bytes,
                                        reversed ? bytes : other_bytes, bytes};
      CHECK_EQ_INT(run_kernel("binary_f32", kGrids[1], binary_bindings,
                              binary_lengths, 3, binary, 19),
                   0);
      if (memcmp(fused, out, bytes) != 0 && wrong++ < 3) {
        fprintf(stderr, "unary %u, binary %u operand %u reversed %u differ\n",
                u, op, operand, reversed);
      }
      CHECK(is_poisoned((uint8_t*)fused + bytes, SLACK));
      free(fused);
    }
  }
  CHECK_EQ_INT(wrong, 0);
  // Bad programs: no steps, 7 steps, an unknown op, an operand past 3, a
  // unary op with an operand.
  const uint32_t bad[][5] = {
      {0, 5, 0}, {7, 5, 0}, {1, 14, 0}, {1, 26, 0}, {1, 16 | 4 << 8, 0},
      {1, 5 | 1 << 8, 0}};
  for (size_t i = 0; i < COUNT_OF(bad); ++i) {
    uint32_t k[31] = {bad[i][0], 1, 1, 1, 1, 1, 1};
    for (int j = 0; j < 6; ++j) k[13 + 3 * j] = bad[i][1];
    float out[1];
    void* bindings[3] = {x, y, out};
    const size_t lengths[3] = {4, 4, 4};
    CHECK_EQ_INT(run_kernel("chain_f32", kGrids[0], bindings, lengths, 3, k,
                            31),
                 HALRT_KERNEL_INVALID_ARGUMENT);
  }
  uint32_t k[31] = {1, 1, 1, 1, 1, 1, 2, 0, 0, 0, 0, 0, 1, 16 | 3 << 8,
                    0x40400000 /* 3.0f */};
  float out[2];
  void* bindings[3] = {x, y, out};
  size_t lengths[3] = {8, 20, 8};  // y[1 + 3] is its last element
  CHECK_EQ_INT(run_kernel("chain_f32", kGrids[0], bindings, lengths, 3, k, 31),
               HALRT_KERNEL_OK);
  CHECK(out[1] == x[1] + y[4]);
  lengths[1] = 16;
  CHECK_EQ_INT(run_kernel("chain_f32", kGrids[0], bindings, lengths, 3, k, 31),
               HALRT_KERNEL_INVALID_ARGUMENT);
  // An offset that is not a whole number in [0, 2^24).
  lengths[1] = sizeof(y);
  const uint32_t bad_offsets[] = {0x40200000 /* 2.5 */, 0xBF800000 /* -1 */,
                                  0x4B800000 /* 2^24 */, 0x7FC00000};
  for (size_t i = 0; i < COUNT_OF(bad_offsets); ++i) {
    k[14] = bad_offsets[i];
    CHECK_EQ_INT(
        run_kernel("chain_f32", kGrids[0], bindings, lengths, 3, k, 31),
        HALRT_KERNEL_INVALID_ARGUMENT);
  }
}

// chain_health_f32 writes chain_f32's bits, and in each workgroup's slot
// the NaN, +Inf and -Inf after each step: summed over the slots, what a
// scan of the chain cut after that step finds. Every slot is written, even
// a workgroup's with no elements. NaN and infinities sit in some blocks of
// the CPU library's and not in others, and the second program has steps
// that keep finite values finite next to steps that do not.
static void test_chain_health_f32_counts_each_step(void) {
  rng_t rng = {0x4EA1};
  enum { N = 6 * 1024 + 77 };
  static float x[N], y[N];
  for (int i = 0; i < N; ++i) {
    x[i] = rng_f32(&rng, -40.0f, 40.0f);
    y[i] = rng_f32(&rng, -2.0f, 2.0f);
  }
  for (int i = 0; i < 2048; i += 37) x[i] = NAN;
  for (int i = 5; i < 2048; i += 53) x[i] = i % 2 ? INFINITY : -INFINITY;
  for (int i = 4000; i < N; i += 611) x[i] = 0.0f;
  for (int i = 9; i < N; i += 61) y[i] = 0.0f;
  const float minus_inf = -INFINITY, thirty = 30.0f, half = 0.5f, zero = 0.0f;
  uint32_t programs[2][31] = {{4, 1, 1, 1, 1, 1, N, 0, 0, 0, 0, 0, 1},
                              {6, 1, 1, 1, 1, 1, N, 0, 0, 0, 0, 0, 1}};
  // exp(t) (overflows to +Inf), t * y (Inf * 0 is NaN), -t, t / y (x / 0
  // is +-Inf).
  uint32_t* k = programs[0];
  k[13] = 2;
  k[16] = 18 | 1 << 8;
  k[19] = 5;
  k[22] = 19 | 1 << 8;
  // clip to [-inf, 30], t * 0.5, 1 / t, tanh, t / y, max(t, 0).
  k = programs[1];
  k[13] = 12;
  memcpy(&k[14], &minus_inf, 4);
  memcpy(&k[15], &thirty, 4);
  k[16] = 18 | 2 << 8;
  memcpy(&k[17], &half, 4);
  k[19] = 7;
  k[22] = 1;
  k[25] = 19 | 1 << 8;
  k[28] = 21 | 2 << 8;
  memcpy(&k[29], &zero, 4);
  const size_t bytes = sizeof(x);
  int wrong = 0;
  for (size_t p = 0; p < 2; ++p) {
    k = programs[p];
    for (size_t g = 0; g < COUNT_OF(kGrids); ++g) {
      const uint32_t* grid = kGrids[g];
      const size_t slots = (size_t)grid[0] * grid[1] * grid[2];
      const size_t count_bytes = slots * 18 * 4;
      float* out = alloc_poisoned(bytes);
      uint32_t* counts = alloc_poisoned(count_bytes);
      void* bindings[4] = {x, y, out, counts};
      const size_t lengths[4] = {bytes, bytes, bytes, count_bytes};
      CHECK_EQ_INT(
          run_kernel("chain_health_f32", grid, bindings, lengths, 4, k, 31),
          0);
      CHECK(is_poisoned((uint8_t*)counts + count_bytes, SLACK));
      uint64_t sums[18] = {0};
      for (size_t s = 0; s < slots * 18; ++s) sums[s % 18] += counts[s];
      uint64_t nonfinite = 0;
      for (uint32_t j = 0; j < 6; ++j) {
        // The chain cut after step j, scanned.
        uint64_t want[3] = {0, 0, 0};
        if (j < k[0]) {
          uint32_t cut[31];
          memcpy(cut, k, sizeof(cut));
          cut[0] = j + 1;
          static float t[N];
          void* chain_bindings[3] = {x, y, t};
          CHECK_EQ_INT(run_kernel("chain_f32", grid, chain_bindings, lengths,
                                  3, cut, 31),
                       0);
          for (int i = 0; i < N; ++i) {
            want[0] += isnan(t[i]);
            want[1] += t[i] == INFINITY;
            want[2] += t[i] == -INFINITY;
          }
          if (j + 1 == k[0] && memcmp(t, out, bytes) != 0) ++wrong;
        }
        for (int c = 0; c < 3; ++c) {
          nonfinite += want[c];
          if (sums[3 * j + c] != want[c] && wrong++ < 3) {
            fprintf(stderr,
                    "program %zu grid %zu step %u count %d: %llu, want %llu\n",
                    p, g, j, c, (unsigned long long)sums[3 * j + c],
                    (unsigned long long)want[c]);
          }
        }
      }
      CHECK(nonfinite > 0);
      free(out);
      free(counts);
    }
  }
  CHECK_EQ_INT(wrong, 0);
  // No elements: zeros in every slot. Too few slots: rejected.
  const uint32_t grid[3] = {3, 1, 1};
  uint32_t empty[31];
  memcpy(empty, programs[0], sizeof(empty));
  empty[6] = 0;
  uint32_t counts[3 * 18];
  memset(counts, POISON, sizeof(counts));
  void* bindings[4] = {x, y, x, counts};
  size_t lengths[4] = {0, 0, 0, sizeof(counts)};
  CHECK_EQ_INT(
      run_kernel("chain_health_f32", grid, bindings, lengths, 4, empty, 31), 0);
  for (int s = 0; s < 3 * 18; ++s) CHECK_EQ_INT(counts[s], 0);
  lengths[3] -= 4;
  memset(counts, POISON, sizeof(counts));
  CHECK_EQ_INT(
      run_kernel("chain_health_f32", grid, bindings, lengths, 4, empty, 31),
      HALRT_KERNEL_INVALID_ARGUMENT);
  CHECK(is_poisoned(counts, sizeof(counts)));
}

// resize2d_f32 against the same lerps in C: (index, index, weight) rows
// and columns, nearest ones (weight 0) copying infinities and NaN as they
// are, and an index that is not one of the input's giving NaN.
static void test_resize2d_f32_interpolates_by_its_tables(void) {
  rng_t rng = {0x5E5};
  enum { P = 3, H = 5, W = 7, OH = 9, OW = 11 };
  float x[P * H * W], rows[OH * 3], cols[OW * 3];
  for (int i = 0; i < P * H * W; ++i) x[i] = rng_f32(&rng, -4.0f, 4.0f);
  x[3] = INFINITY;
  x[40] = NAN;
  for (int o = 0; o < OH; ++o) {
    rows[3 * o] = (float)(o * H / OH);
    rows[3 * o + 1] = (float)((o * H / OH + 1) % H);
    rows[3 * o + 2] = o % 3 == 0 ? 0.0f : rng_f32(&rng, 0.0f, 1.0f);
  }
  for (int o = 0; o < OW; ++o) {
    cols[3 * o] = (float)(o * W / OW);
    cols[3 * o + 1] = (float)((o * W / OW + 2) % W);
    cols[3 * o + 2] = o % 4 == 0 ? 0.0f : rng_f32(&rng, 0.0f, 1.0f);
  }
  cols[3 * 5] = 2.5f;       // not an integer
  rows[3 * 7 + 1] = 5.0f;   // past the input
  const uint32_t k[6] = {P, H, W, OH, OW, 3};
  for (size_t g = 0; g < COUNT_OF(kGrids); ++g) {
    float* out = alloc_poisoned(sizeof(float) * P * OH * OW);
    void* bindings[4] = {x, rows, cols, out};
    const size_t lengths[4] = {sizeof(x), sizeof(rows), sizeof(cols),
                               sizeof(float) * P * OH * OW};
    CHECK_EQ_INT(run_kernel("resize2d_f32", kGrids[g], bindings, lengths, 4, k,
                            6),
                 0);
    int wrong = 0;
    for (int p = 0; p < P; ++p) {
      for (int oh = 0; oh < OH; ++oh) {
        for (int ow = 0; ow < OW; ++ow) {
          const float* rt = rows + 3 * oh;
          const float* ct = cols + 3 * ow;
          float want = NAN;
          const bool ok = rt[1] < H && ct[0] == floorf(ct[0]);
          if (ok) {
            const float* plane = x + p * H * W;
            const int i0 = (int)rt[0], i1 = (int)rt[1];
            const int j0 = (int)ct[0], j1 = (int)ct[1];
#define LERP(u, v, t) ((t) == 0.0f ? (u) : (float)((u) * (1.0f - (t))) + (float)((v) * (t)))
            const float top = LERP(plane[i0 * W + j0], plane[i0 * W + j1], ct[2]);
            const float bottom = rt[2] == 0.0f ? top : LERP(plane[i1 * W + j0], plane[i1 * W + j1], ct[2]);
            want = LERP(top, bottom, rt[2]);
#undef LERP
          }
          const float got = out[(p * OH + oh) * OW + ow];
          if (memcmp(&got, &want, 4) != 0 && !(got != got && want != want) &&
              wrong++ < 3) {
            fprintf(stderr, "p %d oh %d ow %d: got %.9g want %.9g\n", p, oh, ow,
                    got, want);
          }
        }
      }
    }
    CHECK_EQ_INT(wrong, 0);
    CHECK(is_poisoned(out + P * OH * OW, SLACK));
    free(out);
  }
  // A table entry width other than 3 is refused.
  const uint32_t bad[6] = {P, H, W, OH, OW, 2};
  float out[P * OH * OW];
  void* bindings[4] = {x, rows, cols, out};
  const size_t lengths[4] = {sizeof(x), sizeof(rows), sizeof(cols), sizeof(out)};
  CHECK_EQ_INT(run_kernel("resize2d_f32", kGrids[0], bindings, lengths, 4, bad, 6),
               HALRT_KERNEL_INVALID_ARGUMENT);
}

// where_f32 against a reference reading each operand's offset from the
// output's coordinates: cond [3, 1] (0, -0, NaN, 2), a [4], b transposed.
static void test_where_f32_selects_bits_for_any_grid(void) {
  const uint32_t k[24] = {1, 1, 1, 1, 3, 4,  // dims
                          0, 0, 0, 0, 1, 0,  // cond [3, 1]
                          0, 0, 0, 0, 0, 1,  // a [4]
                          0, 0, 0, 0, 1, 3};  // b [4, 3] read transposed
  const float cond[3] = {0.0f, -0.0f, NAN};
  uint32_t a[4] = {0x7fc00001u, 0x80000000u, 0x3f800000u, 0xff800000u};
  uint32_t b[12];
  for (int i = 0; i < 12; ++i) b[i] = 0x40000000u + (uint32_t)i;
  for (size_t g = 0; g < COUNT_OF(kGrids); ++g) {
    uint32_t* out = alloc_poisoned(12 * 4);
    void* bindings[4] = {(void*)cond, a, b, out};
    const size_t lengths[4] = {sizeof(cond), sizeof(a), sizeof(b), 48};
    CHECK_EQ_INT(run_kernel("where_f32", kGrids[g], bindings, lengths, 4, k, 24),
                 0);
    for (int r = 0; r < 3; ++r) {
      for (int c = 0; c < 4; ++c) {
        const uint32_t want = cond[r] != 0.0f ? a[c] : b[c * 3 + r];
        CHECK_EQ_INT(out[r * 4 + c], want);
      }
    }
    CHECK(is_poisoned(out + 12, SLACK));
    free(out);
  }
}

//===----------------------------------------------------------------------===//
// conv2d_f32 and pool2d_f32
//===----------------------------------------------------------------------===//

// A naive NCHW convolution in double: the reference.
static double ref_conv(const float* x, const float* w, const float* bias,
                       const uint32_t* k, uint32_t n, uint32_t m, uint32_t oh,
                       uint32_t ow) {
  const uint32_t C = k[1], H = k[2], W = k[3], M = k[4], Cg = k[5];
  const uint32_t KH = k[6], KW = k[7];
  const uint32_t group = m / (M / (C / Cg));
  double sum = bias[m];
  for (uint32_t c = 0; c < Cg; ++c) {
    for (uint32_t i = 0; i < KH; ++i) {
      for (uint32_t j = 0; j < KW; ++j) {
        const int64_t ih = (int64_t)oh * k[10] - k[12] + (int64_t)i * k[14];
        const int64_t iw = (int64_t)ow * k[11] - k[13] + (int64_t)j * k[15];
        if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
        sum += (double)w[((m * Cg + c) * KH + i) * KW + j] *
               x[((n * C + group * Cg + c) * H + ih) * W + iw];
      }
    }
  }
  return sum;
}

// Convolutions with groups (depthwise too), strides, pads and dilations
// against the reference, for several grids.
static void test_conv2d_matches_reference(void) {
  // N C H W M Cg KH KW OH OW SH SW PT PL DH DW
  static const uint32_t cases[][16] = {
      {1, 3, 9, 11, 4, 3, 3, 3, 5, 6, 2, 2, 1, 1, 1, 1},
      {2, 4, 7, 7, 4, 1, 3, 3, 7, 7, 1, 1, 1, 1, 1, 1},      // depthwise
      {1, 6, 8, 5, 4, 3, 2, 3, 3, 5, 2, 1, 0, 1, 2, 1},      // 2 groups, dilated
      {1, 2, 4, 6, 3, 2, 1, 1, 4, 6, 1, 1, 0, 0, 1, 1},      // pointwise
      {1, 1, 2, 2, 1, 1, 5, 5, 2, 2, 1, 1, 2, 2, 1, 1},      // kernel > input
  };
  rng_t rng = {0xC0};
  for (size_t t = 0; t < COUNT_OF(cases); ++t) {
    const uint32_t* k = cases[t];
    const size_t xs = (size_t)k[0] * k[1] * k[2] * k[3];
    const size_t ws = (size_t)k[4] * k[5] * k[6] * k[7];
    const size_t os = (size_t)k[0] * k[4] * k[8] * k[9];
    float* x = malloc(xs * 4);
    float* w = malloc(ws * 4);
    float* bias = malloc(k[4] * 4);
    for (size_t i = 0; i < xs; ++i) x[i] = rng_f32(&rng, -2.0f, 2.0f);
    for (size_t i = 0; i < ws; ++i) w[i] = rng_f32(&rng, -1.0f, 1.0f);
    for (size_t i = 0; i < k[4]; ++i) bias[i] = rng_f32(&rng, -1.0f, 1.0f);
    for (size_t g = 0; g < COUNT_OF(kGrids); ++g) {
      float* out = alloc_poisoned(os * 4);
      void* bindings[4] = {x, w, bias, out};
      const size_t lengths[4] = {xs * 4, ws * 4, k[4] * 4, os * 4};
      CHECK_EQ_INT(run_kernel("conv2d_f32", kGrids[g], bindings, lengths, 4, k,
                              16),
                   0);
      int wrong = 0;
      for (uint32_t n = 0; n < k[0]; ++n)
        for (uint32_t m = 0; m < k[4]; ++m)
          for (uint32_t oh = 0; oh < k[8]; ++oh)
            for (uint32_t ow = 0; ow < k[9]; ++ow) {
              const double want = ref_conv(x, w, bias, k, n, m, oh, ow);
              const float got = out[((n * k[4] + m) * k[8] + oh) * k[9] + ow];
              wrong += !near_f32(got, want, 1e-5 * (1 + fabs(want)));
            }
      CHECK_EQ_INT(wrong, 0);
      CHECK(is_poisoned(out + os, SLACK));
      free(out);
    }
    free(x);
    free(w);
    free(bias);
  }
  // Groups that do not divide the channels, and a zero stride, are refused.
  float buffer[64] = {0};
  void* bindings[4] = {buffer, buffer, buffer, buffer};
  const size_t lengths[4] = {sizeof(buffer), sizeof(buffer), sizeof(buffer),
                             sizeof(buffer)};
  const uint32_t one[3] = {1, 1, 1};
  uint32_t bad[16] = {1, 4, 2, 2, 4, 3, 1, 1, 2, 2, 1, 1, 0, 0, 1, 1};
  CHECK_EQ_INT(run_kernel("conv2d_f32", one, bindings, lengths, 4, bad, 16),
               HALRT_KERNEL_INVALID_ARGUMENT);
  bad[5] = 2;
  bad[10] = 0;
  CHECK_EQ_INT(run_kernel("conv2d_f32", one, bindings, lengths, 4, bad, 16),
               HALRT_KERNEL_INVALID_ARGUMENT);
}

// Max and both averages over padded windows against a direct reference.
static void test_pool2d_matches_reference(void) {
  // N C H W OH OW KH KW SH SW PT PL op
  enum { N = 2, C = 3, H = 7, W = 9, OH = 4, OW = 5 };
  rng_t rng = {0x9001};
  float x[N * C * H * W];
  for (size_t i = 0; i < COUNT_OF(x); ++i) x[i] = rng_f32(&rng, -5.0f, 5.0f);
  // NaN in some windows: op 0 skips it, op 3 keeps it, the averages sum it.
  x[10] = NAN;
  x[70] = NAN;
  for (uint32_t op = 0; op < 4; ++op) {
    const uint32_t k[13] = {N, C, H, W, OH, OW, 3, 3, 2, 2, 1, 1, op};
    float* out = alloc_poisoned(N * C * OH * OW * 4);
    void* bindings[2] = {x, out};
    const size_t lengths[2] = {sizeof(x), N * C * OH * OW * 4};
    CHECK_EQ_INT(run_kernel("pool2d_f32", kGrids[op % COUNT_OF(kGrids)],
                            bindings, lengths, 2, k, 13),
                 0);
    int wrong = 0;
    for (int p = 0; p < N * C; ++p)
      for (int oh = 0; oh < OH; ++oh)
        for (int ow = 0; ow < OW; ++ow) {
          double acc = op == 0 || op == 3 ? -INFINITY : 0;
          int taps = 0;
          for (int i = 0; i < 3; ++i)
            for (int j = 0; j < 3; ++j) {
              const int ih = oh * 2 - 1 + i, iw = ow * 2 - 1 + j;
              if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
              const float v = x[(p * H + ih) * W + iw];
              acc = op == 0   ? fmax(acc, v)
                    : op == 3 ? (isnan(acc) || v <= acc ? acc : v)
                              : acc + v;
              ++taps;
            }
          const double want =
              op == 0 || op == 3 ? acc : acc / (op == 1 ? taps : 9);
          const float got = out[(p * OH + oh) * OW + ow];
          wrong += isnan(want) ? !isnan(got) : !near_f32(got, want, 1e-5);
        }
    CHECK_EQ_INT(wrong, 0);
    CHECK(is_poisoned(out + N * C * OH * OW, SLACK));
    free(out);
  }
  const uint32_t bad[13] = {1, 1, 2, 2, 1, 1, 2, 2, 1, 1, 0, 0, 4};
  float buffer[4] = {0}, out[4];
  void* bindings[2] = {buffer, out};
  const size_t lengths[2] = {sizeof(buffer), sizeof(out)};
  const uint32_t one[3] = {1, 1, 1};
  CHECK_EQ_INT(run_kernel("pool2d_f32", one, bindings, lengths, 2, bad, 13),
               HALRT_KERNEL_INVALID_ARGUMENT);
}

// Batched products with dense, transposed and broadcast (stride 0)
// operands against a reference; dense ones give matmul_f32's bits.
static void test_bmm_matches_reference_and_matmul(void) {
  enum { B = 3, M = 5, K = 300, N = 7 };
  rng_t rng = {0xB33};
  float* a = malloc(B * M * K * 4);
  float* b = malloc(B * K * N * 4);
  for (int i = 0; i < B * M * K; ++i) a[i] = rng_f32(&rng, -1.0f, 1.0f);
  for (int i = 0; i < B * K * N; ++i) b[i] = rng_f32(&rng, -1.0f, 1.0f);
  // batch M K N | a: batch row k | b: batch k col
  const uint32_t cases[][10] = {
      {B, M, K, N, M * K, K, 1, K * N, N, 1},  // dense
      {B, M, K, N, M * K, 1, M, K * N, 1, K},  // a and b transposed
      {B, M, K, N, 0, K, 1, K * N, N, 1},      // a broadcast over the batch
      {B, M, K, N, M * K, K, 1, 0, N, 1},      // b broadcast
  };
  for (size_t t = 0; t < COUNT_OF(cases); ++t) {
    const uint32_t* k = cases[t];
    float* c = alloc_poisoned(B * M * N * 4);
    void* bindings[3] = {a, b, c};
    const size_t lengths[3] = {B * M * K * 4, B * K * N * 4, B * M * N * 4};
    const uint32_t grid[3] = {2, 3, 2};
    CHECK_EQ_INT(run_kernel("bmm_f32", grid, bindings, lengths, 3, k, 10), 0);
    int wrong = 0;
    for (uint32_t z = 0; z < B; ++z)
      for (uint32_t i = 0; i < M; ++i)
        for (uint32_t j = 0; j < N; ++j) {
          double want = 0, magnitude = 0;
          for (uint32_t q = 0; q < K; ++q) {
            const double product = (double)a[z * k[4] + i * k[5] + q * k[6]] *
                                   b[z * k[7] + q * k[8] + j * k[9]];
            want += product;
            magnitude += fabs(product);
          }
          wrong += !near_f32(c[(z * M + i) * N + j], want,
                             2.0 * K * magnitude / (1 << 23));
        }
    CHECK_EQ_INT(wrong, 0);
    CHECK(is_poisoned(c + B * M * N, SLACK));
    if (t == 0) {
      // Batch 1 of the dense case is matmul_f32 of that batch, bit for bit.
      float* d = malloc(M * N * 4);
      void* mm[3] = {a + M * K, b + K * N, d};
      const size_t mm_lengths[3] = {M * K * 4, K * N * 4, M * N * 4};
      const uint32_t mkn[3] = {M, K, N};
      const uint32_t one[3] = {1, 1, 1};
      CHECK_EQ_INT(run_kernel("matmul_f32", one, mm, mm_lengths, 3, mkn, 3), 0);
      CHECK(memcmp(d, c + M * N, M * N * 4) == 0);
      free(d);
    }
    free(c);
  }
  // A stride that reaches past a is refused.
  uint32_t bad[10] = {B, M, K, N, M * K + 1, K, 1, K * N, N, 1};
  float c[B * M * N];
  void* bindings[3] = {a, b, c};
  const size_t lengths[3] = {B * M * K * 4, B * K * N * 4, sizeof(c)};
  const uint32_t one[3] = {1, 1, 1};
  CHECK_EQ_INT(run_kernel("bmm_f32", one, bindings, lengths, 3, bad, 10),
               HALRT_KERNEL_INVALID_ARGUMENT);
  free(a);
  free(b);
}

// A transpose, a stepped slice, a broadcast and a write into part of a
// larger value, against direct index arithmetic; bits kept.
static void test_strided_copy_moves_bits(void) {
  enum { A = 3, B = 4, C = 5 };
  uint32_t src[A * B * C];
  for (uint32_t i = 0; i < A * B * C; ++i) src[i] = 0x7fc00000u + i;  // NaNs
  src[7] = 0x80000000u;                                             // -0
  // dst [C, A, B] = src transposed (2, 0, 1)
  const uint32_t transpose[20] = {0, 0, 1, 1, 1, C, A, B,     0, 0, 0, 1, B * C,
                                  C, 0, 0, 0, A * B, B, 1};
  uint32_t dst[A * B * C + 4];
  memset(dst, POISON, sizeof(dst));
  void* bindings[2] = {src, dst};
  const size_t lengths[2] = {sizeof(src), A * B * C * 4};
  CHECK_EQ_INT(run_kernel("strided_copy_f32", kGrids[2], bindings, lengths, 2,
                          transpose, 20),
               0);
  int wrong = 0;
  for (uint32_t c = 0; c < C; ++c)
    for (uint32_t a = 0; a < A; ++a)
      for (uint32_t b = 0; b < B; ++b)
        wrong += dst[(c * A + a) * B + b] != src[(a * B + b) * C + c];
  CHECK_EQ_INT(wrong, 0);
  CHECK(is_poisoned(dst + A * B * C, 16));
  // Rows 0 and 2 of src as [2, B, C], written at offset 3 of a larger dst
  // with a gap between rows: the other elements keep their bytes.
  const uint32_t slice[20] = {0, 3, 1, 1, 1, 2, B, C, 0, 0, 0, 2 * B * C,
                              C, 1, 0, 0, 0, B * C + 1, C, 1};
  uint32_t big[2 * (B * C + 1) + 3];
  memset(big, POISON, sizeof(big));
  void* slice_bindings[2] = {src, big};
  const size_t slice_lengths[2] = {sizeof(src), sizeof(big)};
  CHECK_EQ_INT(run_kernel("strided_copy_f32", kGrids[1], slice_bindings,
                          slice_lengths, 2, slice, 20),
               0);
  for (uint32_t r = 0; r < 2; ++r)
    for (uint32_t i = 0; i < B * C; ++i)
      CHECK(big[3 + r * (B * C + 1) + i] == src[2 * r * B * C + i]);
  CHECK(big[3 + B * C] == 0xFFFFFFFFu && big[0] == 0xFFFFFFFFu);
  // A dst offset past its binding is refused before any write.
  uint32_t past[20];
  memcpy(past, slice, sizeof(past));
  past[1] = 5;
  memset(big, POISON, sizeof(big));
  CHECK_EQ_INT(run_kernel("strided_copy_f32", kGrids[0], slice_bindings,
                          slice_lengths, 2, past, 20),
               HALRT_KERNEL_INVALID_ARGUMENT);
  CHECK(is_poisoned(big, sizeof(big)));
}

TEST_MAIN(TEST_CASE(test_library_lists_every_documented_kernel),
          TEST_CASE(test_fill_and_copy_cover_every_element_for_any_grid),
          TEST_CASE(test_binary_kernels_match_reference_for_any_grid),
          TEST_CASE(test_i32_kernels_wrap_and_never_trap),
          TEST_CASE(test_float_edge_cases_follow_fmaxf_and_relu_rules),
          TEST_CASE(test_axpy_and_relu_match_reference_for_any_grid),
          TEST_CASE(test_elementwise_outputs_may_alias_inputs),
          TEST_CASE(test_zero_elements_is_valid_and_touches_nothing),
          TEST_CASE(test_empty_work_returns_without_walking_other_sizes),
          TEST_CASE(test_huge_grids_partition_without_overflow),
          TEST_CASE(test_matmul_matches_reference_and_is_grid_independent),
          TEST_CASE(test_matmul_instruction_sets_give_identical_bits),
          TEST_CASE(test_matmul_prints_single_thread_gflops),
          TEST_CASE(test_softmax_rows_is_stable_and_matches_reference),
          TEST_CASE(test_softmax_rows_handles_infinities_and_aliasing),
          TEST_CASE(test_reduce_sum_matches_reference),
          TEST_CASE(test_reduce_sum_is_accurate_for_long_rows),
          TEST_CASE(test_short_bindings_are_rejected_before_any_write),
          TEST_CASE(test_wrong_arity_or_grid_is_rejected),
          TEST_CASE(test_overflowing_sizes_are_rejected),
          TEST_CASE(test_binary_f32_broadcasts_every_op_for_any_grid),
          TEST_CASE(test_unary_f32_matches_reference),
          TEST_CASE(test_conv2d_matches_reference),
          TEST_CASE(test_pool2d_matches_reference),
          TEST_CASE(test_bmm_matches_reference_and_matmul),
          TEST_CASE(test_strided_copy_moves_bits),
          TEST_CASE(test_chain_f32_gives_the_bits_of_its_steps),
          TEST_CASE(test_chain_health_f32_counts_each_step),
          TEST_CASE(test_resize2d_f32_interpolates_by_its_tables),
          TEST_CASE(test_where_f32_selects_bits_for_any_grid))
