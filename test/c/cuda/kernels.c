// docs/cuda.md, "Memory and commands" (dispatch) and docs/kernels.md: the
// built-in kernels against the CPU device, user kernels over many
// workgroups and bindings, and the throughput figures of the GPU check.
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>

#include "cuda_fixture.h"
#include "hal/builtin_signatures.h"

//===----------------------------------------------------------------------===//
// Built-in kernels against the CPU device
//===----------------------------------------------------------------------===//

typedef struct {
  const char* name;
  uint32_t constants[31];
  uint32_t grid[3];
} builtin_case_t;

// binary_f32's constants: op, dims, a strides, b strides (6 each).
#define BINARY_CASE(op, d0, d1, d2, d3, d4, d5, a0, a1, a2, a3, a4, a5, b0,   \
                    b1, b2, b3, b4, b5, g0)                                    \
  {"binary_f32",                                                               \
   {op, d0, d1, d2, d3, d4, d5, a0, a1, a2, a3, a4, a5, b0, b1, b2, b3, b4, b5}, \
   {g0, 1, 1}}

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
    // a [2,3,4,5] against b [4,1] and against a scalar, every op
    BINARY_CASE(0, 1, 1, 2, 3, 4, 5, 0, 0, 60, 20, 5, 1, 0, 0, 0, 0, 1, 0, 3),
    BINARY_CASE(1, 1, 1, 2, 3, 4, 5, 0, 0, 60, 20, 5, 1, 0, 0, 0, 0, 0, 0, 1),
    BINARY_CASE(2, 2, 1, 3, 1, 7, 9, 0, 0, 0, 0, 9, 1, 189, 0, 63, 0, 9, 1, 5),
    BINARY_CASE(3, 1, 1, 1, 1, 33, 33, 0, 0, 0, 0, 1, 33, 0, 0, 0, 0, 33, 1, 4),
    BINARY_CASE(4, 1, 1, 1, 1, 10, 100, 0, 0, 0, 0, 100, 1, 0, 0, 0, 0, 1, 0, 2),
    BINARY_CASE(5, 1, 1, 1, 2, 50, 3, 0, 0, 0, 150, 3, 1, 0, 0, 0, 0, 0, 1, 7),
    BINARY_CASE(6, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 1),
    BINARY_CASE(8, 1, 1, 1, 2, 50, 3, 0, 0, 0, 150, 3, 1, 0, 0, 0, 3, 0, 1, 3),
    BINARY_CASE(9, 1, 1, 1, 1, 40, 40, 0, 0, 0, 0, 40, 1, 0, 0, 0, 0, 1, 40, 2),
    {"unary_f32", {1000, 0, 0, 0}, {3, 1, 1}},
    {"unary_f32", {1000, 1, 0, 0}, {1, 1, 1}},
    {"unary_f32", {1000, 2, 0, 0}, {2, 2, 1}},
    {"unary_f32", {1000, 3, 0, 0}, {1, 1, 1}},
    {"unary_f32", {1000, 4, 0, 0}, {5, 1, 1}},
    {"unary_f32", {1000, 5, 0, 0}, {1, 1, 1}},
    {"unary_f32", {1000, 6, 0, 0}, {1, 1, 1}},
    {"unary_f32", {1000, 7, 0, 0}, {1, 1, 1}},
    {"unary_f32", {1000, 8, 0, 0}, {1, 1, 1}},
    {"unary_f32", {1000, 9, 0x3DCCCCCD /* 0.1 */, 0}, {1, 1, 1}},
    {"unary_f32", {1000, 10, 0x3E4CCCCD /* 0.2 */, 0x3F000000}, {1, 1, 1}},
    {"unary_f32", {1000, 11, 0, 0}, {1, 1, 1}},
    {"unary_f32", {1000, 12, 0xC0000000 /* -2 */, 0x40C00000 /* 6 */}, {1, 1, 1}},
    {"unary_f32", {1000, 13, 0, 0}, {9, 1, 1}},
    {"unary_f32", {0, 13, 0, 0}, {1, 1, 1}},
    // N C H W M Cg KH KW OH OW SH SW PT PL DH DW: 2 groups; depthwise
    {"conv2d_f32", {1, 4, 9, 11, 6, 2, 3, 3, 5, 6, 2, 2, 1, 1, 1, 1}, {3, 1, 1}},
    {"conv2d_f32", {2, 3, 7, 7, 3, 1, 3, 3, 4, 4, 2, 2, 1, 1, 1, 1}, {5, 1, 1}},
    {"conv2d_f32", {1, 8, 5, 6, 16, 8, 1, 1, 5, 6, 1, 1, 0, 0, 1, 1}, {1, 1, 1}},
    // N C H W OH OW KH KW SH SW PT PL op
    {"pool2d_f32", {1, 3, 7, 9, 4, 5, 3, 3, 2, 2, 1, 1, 0}, {2, 1, 1}},
    {"pool2d_f32", {2, 2, 7, 9, 4, 5, 3, 3, 2, 2, 1, 1, 1}, {1, 1, 1}},
    {"pool2d_f32", {1, 3, 6, 6, 2, 3, 3, 2, 3, 2, 0, 0, 2}, {4, 1, 1}},
    {"pool2d_f32", {2, 3, 9, 8, 5, 4, 3, 3, 2, 2, 1, 1, 3}, {3, 1, 1}},
    // batch M K N | a strides | b strides: dense; transposed b; broadcast a
    {"bmm_f32", {3, 37, 70, 45, 2590, 70, 1, 3150, 45, 1}, {3, 2, 2}},
    {"bmm_f32", {2, 17, 40, 21, 680, 40, 1, 840, 1, 40}, {1, 1, 1}},
    {"bmm_f32", {4, 9, 33, 16, 0, 33, 1, 528, 16, 1}, {2, 2, 3}},
    // a transpose of [3, 4, 5] at offset 2 into dst offset 1
    {"strided_copy_f32",
     {2, 1, 1, 1, 1, 5, 3, 4, 0, 0, 0, 1, 20, 5, 0, 0, 0, 12, 4, 1},
     {3, 1, 1}},
    // x [2, 3, 4, 5], y [3, 1, 1]: ((x * clip(x + 3, 0, 6)) / 6) * y, then
    // y - that
    {"chain_f32",
     {6, 1, 1, 2, 3, 4, 5, 0, 0, 0, 1, 0, 0,
      16 | 2 << 8, 0x40400000 /* 3 */, 0,
      12, 0, 0x40C00000 /* 6 */,
      18, 0, 0,
      19 | 2 << 8, 0x40C00000, 0,
      18 | 1 << 8, 0, 0,
      33 | 1 << 8, 0, 0},
     {3, 1, 1}},
    // P H W OH OW 3 (tables written by resize_tables)
    {"resize2d_f32", {4, 9, 13, 17, 6, 3}, {3, 1, 1}},
    // out [2, 3, 4, 5]: cond [3, 1, 5], a [4, 1], b dense
    {"where_f32",
     {1, 1, 2, 3, 4, 5, 0, 0, 0, 5, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 60, 20, 5, 1},
     {4, 1, 1}},
    BINARY_CASE(7, 1, 1, 1, 1, 10, 100, 0, 0, 0, 0, 100, 1, 0, 0, 0, 0, 1, 0, 2),
};

// The output size of a window sweep: floor((size + 2 pad - span) / stride)
// + 1, or 0 when the window does not fit.
static uint32_t sweep(uint32_t size, uint32_t pad, uint32_t span,
                      uint32_t stride) {
  const int64_t room = (int64_t)size + 2 * pad - span;
  return room < 0 ? 0 : (uint32_t)(room / stride + 1);
}

static uint32_t g_random = 12345;

static uint32_t random_u32(void) {
  g_random = g_random * 1664525u + 1013904223u;
  return g_random ^ (g_random >> 16);
}

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
         strncmp(name, "reduce", 6) != 0 && strcmp(name, "bmm_f32") != 0;
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
  if (strcmp(test->name, "bmm_f32") == 0) {
    const uint32_t* k = test->constants;
    const uint64_t M = k[1], K = k[2], N = k[3];
    const uint64_t z = element / (M * N), i = element / N % M, j = element % N;
    const float* a = (const float*)data[0];
    const float* b = (const float*)data[1];
    double magnitude = 0;
    for (uint64_t q = 0; q < K; ++q) {
      magnitude += fabs((double)a[z * k[4] + i * k[5] + q * k[6]] *
                        (double)b[z * k[7] + q * k[8] + j * k[9]]);
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
  // Library functions (docs/kernels.md: powf, and unary_f32's sigmoid,
  // tanh, exp, log, erf, gelu) agree to a few units in the last place.
  const uint32_t op = test->constants[strcmp(test->name, "binary_f32") == 0 ? 0 : 1];
  const bool library =
      strcmp(test->name, "binary_f32") == 0
          ? op == 4
          : strcmp(test->name, "unary_f32") == 0 &&
                (op <= 3 || op == 8 || op == 13);
  if (library) return 8 * eps * fabs(expected) + 1e-37;
  return 0;
}

// resize2d_f32's row and column tables (bindings 1 and 2): mostly valid
// (index, index, weight) entries, some nearest (weight 0), some with an
// index outside the input.
static void resize_tables(const uint32_t* k, uint8_t* const* data) {
  for (int t = 0; t < 2; ++t) {
    const uint32_t count = k[3 + t], size = k[1 + t];
    float* table = (float*)data[1 + t];
    for (uint32_t o = 0; o < count; ++o) {
      const uint32_t r = random_u32();
      table[3 * o] = size ? (float)(r % size) : 0.0f;
      table[3 * o + 1] = size ? (float)((r >> 8) % size) : 0.0f;
      table[3 * o + 2] = r % 3 == 0 ? 0.0f : (float)((r >> 16) % 1000) / 1000.0f;
      if (r % 29 == 0) table[3 * o + 1] = (float)size;
      if (r % 31 == 0) table[3 * o] = 0.5f;
    }
  }
}

// Runs `test` on both devices (CPU first) over the same random inputs;
// returns whether they agree as docs/kernels.md says, describing any
// difference on stderr.
static bool case_matches(hrt_hal_device_t* const* devices,
                         hrt_hal_executable_t* const* executables,
                         const builtin_case_t* test) {
  const hrt_builtin_signature_t* signature =
      hrt_builtin_signature_find(test->name);
  uint8_t* data[2][HRT_BUILTIN_MAX_BINDINGS] = {{NULL}};
  uint8_t* inputs[HRT_BUILTIN_MAX_BINDINGS] = {NULL};
  uint64_t sizes[HRT_BUILTIN_MAX_BINDINGS] = {0};
  for (uint32_t b = 0; b < signature->binding_count; ++b) {
    sizes[b] = hrt_builtin_binding_min_bytes(signature, b, test->constants,
                                             test->grid);
    for (int d = 0; d < 2; ++d) data[d][b] = malloc(sizes[b] + 1);
    inputs[b] = malloc(sizes[b] + 1);
    fill_binding(&signature->bindings[b], is_elementwise(test->name),
                 data[0][b], sizes[b]);
  }
  if (strcmp(test->name, "resize2d_f32") == 0) {
    resize_tables(test->constants, data[0]);
  }
  for (uint32_t b = 0; b < signature->binding_count; ++b) {
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
    // Per-workgroup words: which workgroup counts which element is the
    // device's; their sums over the workgroups are the kernel's result.
    if (binding->per_workgroup) {
      uint64_t sums[2][256] = {{0}};
      for (uint64_t w = 0; w < sizes[b] / 4; ++w) {
        for (int d = 0; d < 2; ++d) {
          uint32_t word;
          memcpy(&word, data[d][b] + w * 4, 4);
          sums[d][w % binding->per_workgroup] += word;
        }
      }
      if (memcmp(sums[0], sums[1], sizeof(sums[0])) != 0) {
        fprintf(stderr, "%s binding %u: sums differ\n", test->name, b);
        ++wrong;
      }
      continue;
    }
    if (!floats && memcmp(data[0][b], data[1][b], sizes[b]) != 0) {
      fprintf(stderr, "%s binding %u differs\n", test->name, b);
      ++wrong;
    }
  }
  for (uint32_t b = 0; b < signature->binding_count; ++b) {
    free(data[0][b]);
    free(data[1][b]);
    free(inputs[b]);
  }
  return wrong == 0;
}

// Both devices with the built-in executable; released when the case ends.
static void open_cpu_and_cuda(hrt_hal_device_t** devices,
                              hrt_hal_executable_t** executables) {
  CHECK_OK(case_device("local-sync", &devices[0]));
  CHECK_OK(case_device("cuda", &devices[1]));
  for (int d = 0; d < 2; ++d) {
    CHECK_OK(case_builtins(devices[d], &executables[d]));
  }
}

static void builtin_kernels_match_the_cpu_device(void) {
  CUDA_SETUP();
  hrt_hal_device_t* devices[2] = {NULL, NULL};
  hrt_hal_executable_t* executables[2] = {NULL, NULL};
  open_cpu_and_cuda(devices, executables);
  CHECK(executables[1] != NULL);
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
    if (!case_matches(devices, executables, &kBuiltinCases[c])) {
      fprintf(stderr, "case %zu (%s) differs\n", c, kBuiltinCases[c].name);
      ++failures;
    }
  }
  CHECK_EQ_INT(failures, 0);
}

// Random sizes (zero included) and grids for every built-in, seeded
// (HRT_TEST_SEED, default 1): the same agreement as above.
static void builtin_kernels_match_the_cpu_device_on_random_cases(void) {
  CUDA_SETUP();
  hrt_hal_device_t* devices[2] = {NULL, NULL};
  hrt_hal_executable_t* executables[2] = {NULL, NULL};
  open_cpu_and_cuda(devices, executables);
  CHECK(executables[1] != NULL);
  const char* seed = getenv("HRT_TEST_SEED");
  g_random = seed ? (uint32_t)strtoul(seed, NULL, 10) : 1;
  printf("  seed %u (HRT_TEST_SEED)\n", g_random);
  const uint32_t entries = executables[0]->entry_count;
  int failures = 0;
  for (int c = 0; c < 120; ++c) {
    builtin_case_t test = {
        .name = executables[0]->entries[c % entries].name,
        .grid = {1 + random_u32() % 9, 1 + random_u32() % 3,
                 1 + random_u32() % 2},
    };
    if (strcmp(test.name, "matmul_f32") == 0) {
      test.grid[2] = 1;
      for (int i = 0; i < 3; ++i) test.constants[i] = random_u32() % 80;
    } else if (strcmp(test.name, "binary_f32") == 0) {
      // Random dims (a 0 now and then); each input dense or broadcast
      // (stride 0) per dimension, or transposed.
      test.constants[0] = random_u32() % 10;
      for (int d = 0; d < 6; ++d) {
        test.constants[1 + d] = random_u32() % 41 == 0 ? 0 : 1 + random_u32() % 4;
      }
      for (int input = 0; input < 2; ++input) {
        uint32_t stride = 1;
        const bool reverse = random_u32() % 3 == 0;
        for (int k = 0; k < 6; ++k) {
          const int d = reverse ? k : 5 - k;
          const bool broadcast = random_u32() % 3 == 0;
          test.constants[7 + 6 * input + d] = broadcast ? 0 : stride;
          if (!broadcast) stride *= test.constants[1 + d] ? test.constants[1 + d] : 1;
        }
      }
    } else if (strcmp(test.name, "conv2d_f32") == 0) {
      uint32_t* k = test.constants;
      const uint32_t groups = 1 + random_u32() % 3;
      k[0] = 1 + random_u32() % 2;
      k[5] = 1 + random_u32() % 3;
      k[1] = groups * k[5];
      k[4] = groups * (1 + random_u32() % 3);
      k[2] = 1 + random_u32() % 9;
      k[3] = 1 + random_u32() % 9;
      k[6] = 1 + random_u32() % 3;
      k[7] = 1 + random_u32() % 3;
      k[10] = 1 + random_u32() % 2;
      k[11] = 1 + random_u32() % 2;
      k[12] = random_u32() % 2;
      k[13] = random_u32() % 2;
      k[14] = 1 + random_u32() % 2;
      k[15] = 1 + random_u32() % 2;
      k[8] = sweep(k[2], k[12], k[14] * (k[6] - 1) + 1, k[10]);
      k[9] = sweep(k[3], k[13], k[15] * (k[7] - 1) + 1, k[11]);
    } else if (strcmp(test.name, "strided_copy_f32") == 0) {
      // A random permutation (dense dst) of random dims, at random offsets.
      uint32_t* k = test.constants;
      uint32_t dims[6], perm[6] = {0, 1, 2, 3, 4, 5}, dense[6];
      for (int d = 0; d < 6; ++d) dims[d] = 1 + random_u32() % 3;
      for (int d = 5; d > 0; --d) {
        const uint32_t j = random_u32() % (d + 1), t = perm[d];
        perm[d] = perm[j];
        perm[j] = t;
      }
      uint32_t stride = 1;
      for (int d = 5; d >= 0; --d) {
        dense[d] = stride;
        stride *= dims[d];
      }
      k[0] = random_u32() % 5;
      k[1] = random_u32() % 5;
      for (int d = 0; d < 6; ++d) {
        k[2 + d] = dims[perm[d]];
        k[8 + d] = dense[perm[d]];
      }
      stride = 1;
      for (int d = 5; d >= 0; --d) {
        k[14 + d] = stride;
        stride *= k[2 + d];
      }
    } else if (strcmp(test.name, "bmm_f32") == 0) {
      // Dense, transposed or broadcast operands of random sizes.
      uint32_t* k = test.constants;
      k[0] = 1 + random_u32() % 4;
      k[1] = random_u32() % 40;
      k[2] = random_u32() % 50;
      k[3] = random_u32() % 40;
      const bool ta = random_u32() % 2, tb = random_u32() % 2;
      k[4] = random_u32() % 3 == 0 ? 0 : k[1] * k[2];
      k[5] = ta ? 1 : k[2];
      k[6] = ta ? k[1] : 1;
      k[7] = random_u32() % 3 == 0 ? 0 : k[2] * k[3];
      k[8] = tb ? 1 : k[3];
      k[9] = tb ? k[2] : 1;
    } else if (strcmp(test.name, "pool2d_f32") == 0) {
      uint32_t* k = test.constants;
      k[0] = 1 + random_u32() % 2;
      k[1] = 1 + random_u32() % 4;
      k[2] = 1 + random_u32() % 9;
      k[3] = 1 + random_u32() % 9;
      k[6] = 1 + random_u32() % 3;
      k[7] = 1 + random_u32() % 3;
      k[8] = 1 + random_u32() % 3;
      k[9] = 1 + random_u32() % 3;
      k[10] = random_u32() % k[6];
      k[11] = random_u32() % k[7];
      k[12] = random_u32() % 4;
      k[4] = sweep(k[2], k[10], k[6], k[8]);
      k[5] = sweep(k[3], k[11], k[7], k[9]);
    } else if (strncmp(test.name, "chain_", 6) == 0) {
      // Random dims, y dense or broadcast per dimension, 1 to 6 steps of
      // the ops whose results are exact (docs/kernels.md), so the bits agree;
      // y also read at random offsets.
      static const uint32_t kExactUnary[] = {4, 5, 6, 7, 9, 10, 11, 12};
      static const uint32_t kExactBinary[] = {0, 1, 2, 3, 5, 6, 7, 8, 9};
      uint32_t* k = test.constants;
      k[0] = 1 + random_u32() % 6;
      uint32_t stride = 1;
      for (int d = 5; d >= 0; --d) {
        k[1 + d] = random_u32() % 41 == 0 ? 0 : 1 + random_u32() % 5;
        const bool broadcast = random_u32() % 3 == 0;
        k[7 + d] = broadcast ? 0 : stride;
        if (!broadcast) stride *= k[1 + d] ? k[1 + d] : 1;
      }
      for (uint32_t j = 0; j < k[0]; ++j) {
        uint32_t* step = k + 13 + 3 * j;
        float alpha = ((float)(random_u32() % 2001) - 1000.0f) / 250.0f;
        float beta = alpha + (float)(random_u32() % 1000) / 250.0f;
        if (random_u32() % 3 == 0) {
          step[0] = kExactUnary[random_u32() % 8];
        } else {
          step[0] = (random_u32() % 2 ? 16 : 32) + kExactBinary[random_u32() % 9];
          step[0] |= (random_u32() % 4) << 8;
        }
        memcpy(&step[1], &alpha, 4);
        memcpy(&step[2], &beta, 4);
        if (step[0] >> 8 == 3) {  // y's offset, a whole number
          const float offset = (float)(random_u32() % 9);
          memcpy(&step[1], &offset, 4);
        }
      }
    } else if (strcmp(test.name, "where_f32") == 0) {
      // Random dims; each operand dense or broadcast per dimension.
      for (int d = 0; d < 6; ++d) {
        test.constants[d] = random_u32() % 41 == 0 ? 0 : 1 + random_u32() % 4;
      }
      for (int input = 0; input < 3; ++input) {
        uint32_t stride = 1;
        for (int d = 5; d >= 0; --d) {
          const bool broadcast = random_u32() % 3 == 0;
          test.constants[6 + 6 * input + d] = broadcast ? 0 : stride;
          if (!broadcast) stride *= test.constants[d] ? test.constants[d] : 1;
        }
      }
    } else if (strcmp(test.name, "resize2d_f32") == 0) {
      uint32_t* k = test.constants;
      for (int i = 0; i < 5; ++i) k[i] = random_u32() % 23 == 0 ? 0 : 1 + random_u32() % 12;
      k[5] = 3;
    } else if (strcmp(test.name, "unary_f32") == 0) {
      test.constants[0] = random_u32() % 3000;
      test.constants[1] = random_u32() % 14;
      float alpha = ((float)(random_u32() % 2001) - 1000.0f) / 500.0f;
      // Now and then a clip's low bound above its high one.
      float beta = alpha + ((float)(random_u32() % 1000) - (random_u32() % 5 ? 0.0f : 1000.0f)) / 250.0f;
      memcpy(&test.constants[2], &alpha, 4);
      memcpy(&test.constants[3], &beta, 4);
    } else if (!is_elementwise(test.name)) {
      test.constants[0] = random_u32() % 40;
      test.constants[1] = random_u32() % 1200;
    } else {
      test.constants[0] = random_u32() % 6000;
      // fill's value; axpy's alpha as the bits of a float in [-8, 8)
      float alpha = ((float)(random_u32() % 16001) - 8000.0f) / 1000.0f;
      memcpy(&test.constants[1], &alpha, 4);
      if (strcmp(test.name, "fill_u32") == 0) test.constants[1] = random_u32();
    }
    if (!case_matches(devices, executables, &test)) {
      fprintf(stderr,
              "random case %d (%s, constants %u %u %u, grid %u %u %u) "
              "differs\n",
              c, test.name, test.constants[0], test.constants[1],
              test.constants[2], test.grid[0], test.grid[1], test.grid[2]);
      ++failures;
    }
  }
  CHECK_EQ_INT(failures, 0);
}

static void builtin_dispatches_are_checked_before_launch(void) {
  CUDA_SETUP();
  hrt_hal_device_t* device = NULL;
  CHECK_OK(case_device("cuda", &device));
  hrt_hal_executable_t* executable = NULL;
  CHECK_OK(case_builtins(device, &executable));
  hrt_hal_buffer_t* small = NULL;
  CHECK_OK(case_buffer(device, 64, NULL, &small));
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
}

//===----------------------------------------------------------------------===//
// User kernels
//===----------------------------------------------------------------------===//

static void dispatch_spans_many_workgroups(void) {
  CUDA_SETUP();
  enum { N = 100003 };
  hrt_hal_device_t* device = NULL;
  CHECK_OK(case_device("cuda", &device));
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
  CHECK_OK(case_buffer(device, N * 4, NULL, &indices));
  hrt_hal_buffer_ref_t binding = whole(indices);
  uint32_t n = N;
  hrt_hal_dispatch_t dispatch = {executable, write_index, {7, 3, 2}, {32, 2, 2},
                                 1,          &n,          1,         &binding, 0};
  CHECK_OK(run_dispatch(device, &dispatch));
  uint32_t* out = malloc(N * 4);
  CHECK(out != NULL);
  TEST_DEFER(free, out);
  CHECK_OK(read_back(device, indices, out));
  int wrong = 0;
  for (uint32_t i = 0; i < N; ++i) wrong += out[i] != i;
  CHECK_EQ_INT(wrong, 0);
  // vector_add_f32 covers grid x block threads: one short grid leaves the
  // tail alone (the dispatch means the same as on the GPU).
  float* a = malloc(N * 4);
  TEST_DEFER(free, a);
  float* b = malloc(N * 4);
  TEST_DEFER(free, b);
  CHECK(a && b);
  for (uint32_t i = 0; i < N; ++i) {
    a[i] = (float)i;
    b[i] = 0.5f * (float)i;
  }
  hrt_hal_buffer_t *ba = NULL, *bb = NULL, *bo = NULL;
  CHECK_OK(case_buffer(device, N * 4, a, &ba));
  CHECK_OK(case_buffer(device, N * 4, b, &bb));
  CHECK_OK(case_buffer(device, N * 4, NULL, &bo));
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
}

static void reused_command_buffer_runs_on_new_bindings(void) {
  CUDA_SETUP();
  enum { N = 10007, SETS = 3 };
  hrt_hal_device_t* device = NULL;
  CHECK_OK(case_device("cuda", &device));
  hrt_hal_executable_t* executable = NULL;
  CHECK_OK(case_builtins(device, &executable));
  hrt_hal_command_buffer_t* cb = NULL;
  CHECK_OK(record_add(device, executable, N, 37, &cb));
  TEST_DEFER(release_command_buffer_, cb);
  hrt_hal_buffer_t* buffers[SETS][3];
  completion_t completions[SETS];
  float* a = malloc(N * sizeof(float));
  TEST_DEFER(free, a);
  float* b = malloc(N * sizeof(float));
  TEST_DEFER(free, b);
  float* out = malloc(N * sizeof(float));
  TEST_DEFER(free, out);
  CHECK(a && b && out);
  // Submitted back to back without waiting: each output must hold its own
  // inputs' sums, and completions arrive in submission order.
  for (int s = 0; s < SETS; ++s) {
    for (int i = 0; i < N; ++i) {
      a[i] = (float)(i * (s + 1));
      b[i] = (float)(s - i) * 0.5f;
    }
    CHECK_OK(case_buffer(device, N * 4, a, &buffers[s][0]));
    CHECK_OK(case_buffer(device, N * 4, b, &buffers[s][1]));
    CHECK_OK(case_buffer(device, N * 4, NULL, &buffers[s][2]));
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
  }
  CHECK_EQ_INT(wrong, 0);
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
  CHECK_OK(case_device("cuda", &device));
  hrt_hal_executable_t* executable = NULL;
  CHECK_OK(case_builtins(device, &executable));
  hrt_hal_buffer_t *a = NULL, *b = NULL, *c = NULL;
  CHECK_OK(case_buffer(device, N * 4ull, NULL, &a));
  CHECK_OK(case_buffer(device, N * 4ull, NULL, &b));
  CHECK_OK(case_buffer(device, N * 4ull, NULL, &c));
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
    CHECK_OK(case_command_buffer(device, &cb));
    for (int r = 0; r < 10; ++r) {
      CHECK_OK(hrt_hal_command_buffer_dispatch(cb, &dispatches[k]));
    }
    hrt_hal_command_buffer_finalize(cb);
    CHECK_OK(run(device, cb, NULL, 0));  // warm up
    int64_t start = hrt_time_now_ns();
    CHECK_OK(run(device, cb, NULL, 0));
    double seconds = (double)(hrt_time_now_ns() - start) / 1e9;
    printf("  %-30s %10.1f\n", labels[k], 10 * work[k] / seconds);
  }
}

TEST_SUITE(cuda_kernels,
           TEST_CASE(builtin_kernels_match_the_cpu_device),
           TEST_CASE(builtin_kernels_match_the_cpu_device_on_random_cases),
           TEST_CASE(builtin_dispatches_are_checked_before_launch),
           TEST_CASE(dispatch_spans_many_workgroups),
           TEST_CASE(reused_command_buffer_runs_on_new_bindings),
           TEST_CASE(report_throughput));
