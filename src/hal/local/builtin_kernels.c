// The built-in kernel library. Semantics are specified in docs/kernels.md;
// this file is one implementation of them for the CPU kernel ABI.
//
// Every kernel validates its dispatch before touching memory, so a rejected
// dispatch writes nothing. A workgroup reads and writes only the part of the
// outputs that docs/kernels.md assigns to it; nothing is shared between
// calls, so workgroups may run concurrently on any threads.
#include "hal/local/builtin_kernels.h"

#include "hal/builtin_signatures.h"
#include "hal/tensor_summary.h"

#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <string.h>

// x86 micro-kernels for matmul_f32, compiled with target attributes and
// chosen at run time; other compilers and architectures get portable C.
#if (defined(__x86_64__) || defined(__i386__)) && \
    (defined(__GNUC__) || defined(__clang__))
#define HRT_MATMUL_X86 1
#include <immintrin.h>
#else
#define HRT_MATMUL_X86 0
#endif

// Elementwise binary kernels: X(name, element type, result of x op y).
// The i32 add/sub/mul use uint32_t so that they wrap modulo 2^32 on the
// two's complement bit patterns instead of overflowing a signed type.
#define HRT_BINARY_KERNELS(X)            \
  X(add_f32, float, x + y)               \
  X(sub_f32, float, x - y)               \
  X(mul_f32, float, x* y)                \
  X(div_f32, float, x / y)               \
  X(max_f32, float, hrt_fmaxf(x, y))     \
  X(add_i32, uint32_t, x + y)            \
  X(sub_i32, uint32_t, x - y)            \
  X(mul_i32, uint32_t, x* y)             \
  X(div_i32, int32_t, hrt_div_i32(x, y)) \
  X(max_i32, int32_t, x > y ? x : y)

// The other kernels: X(name, binding count, constant count).
#define HRT_OTHER_KERNELS(X) \
  X(fill_u32, 1, 2)          \
  X(copy_u8, 2, 1)           \
  X(axpy_f32, 3, 2)          \
  X(relu_f32, 2, 1)          \
  X(matmul_f32, 3, 3)        \
  X(softmax_rows_f32, 2, 2)  \
  X(reduce_sum_f32, 2, 2)    \
  X(binary_f32, 3, 19)       \
  X(unary_f32, 2, 4)         \
  X(conv2d_f32, 4, 16)       \
  X(pool2d_f32, 2, 13)       \
  X(bmm_f32, 3, 10)          \
  X(strided_copy_f32, 2, 20) \
  X(chain_f32, 3, 31)        \
  X(chain_health_f32, 4, 31) \
  X(resize2d_f32, 4, 6)      \
  X(where_f32, 4, 24)

#define HRT_BINARY_INDEX(name, type, expr) HRT_KERNEL_INDEX_##name,
#define HRT_OTHER_INDEX(name, bindings, constants) HRT_KERNEL_INDEX_##name,
enum {
  HRT_OTHER_KERNELS(HRT_OTHER_INDEX) HRT_BINARY_KERNELS(HRT_BINARY_INDEX)
      HRT_KERNEL_INDEX_COUNT_
};

#define HRT_BINARY_DECLARE(name, type, expr)                  \
  static int hrt_kernel_##name(const halrt_dispatch_state_t*, \
                               const halrt_workgroup_state_t*);
#define HRT_OTHER_DECLARE(name, bindings, constants) \
  HRT_BINARY_DECLARE(name, , )
HRT_OTHER_KERNELS(HRT_OTHER_DECLARE)
HRT_BINARY_KERNELS(HRT_BINARY_DECLARE)

// The single source of every kernel's arity: kernels validate against their
// own entry, so the table and the checks cannot disagree.
#define HRT_BINARY_ENTRY(name, type, expr) {#name, hrt_kernel_##name, 3, 1},
#define HRT_OTHER_ENTRY(name, bindings, constants) \
  {#name, hrt_kernel_##name, bindings, constants},
static const halrt_kernel_entry_t hrt_builtin_kernel_entries[] = {
    HRT_OTHER_KERNELS(HRT_OTHER_ENTRY) HRT_BINARY_KERNELS(HRT_BINARY_ENTRY)};
_Static_assert(sizeof(hrt_builtin_kernel_entries) /
                       sizeof(hrt_builtin_kernel_entries[0]) ==
                   HRT_KERNEL_INDEX_COUNT_,
               "kernel table and index enum disagree");

static const halrt_kernel_library_t hrt_builtin_kernel_library = {
    HALRT_KERNEL_ABI_VERSION,
    HRT_KERNEL_INDEX_COUNT_,
    "builtin",
    hrt_builtin_kernel_entries,
};

const halrt_kernel_library_t* hrt_local_builtin_kernel_library(void) {
  return &hrt_builtin_kernel_library;
}

//===----------------------------------------------------------------------===//
// Validation and partitioning
//===----------------------------------------------------------------------===//

typedef struct hrt_range_t {
  size_t begin;
  size_t end;
} hrt_range_t;

// a * b, saturated at UINT64_MAX. For grid sizes and ids any value >= 2^32
// already means "past every item", so saturation changes no chunk; for byte
// counts it marks an overflow.
static uint64_t hrt_mul_saturate(uint64_t a, uint64_t b) {
  if (a != 0 && b > UINT64_MAX / a) return UINT64_MAX;
  return a * b;
}

static bool hrt_dispatch_matches(const halrt_dispatch_state_t* dispatch,
                                 int kernel_index) {
  const halrt_kernel_entry_t* entry = &hrt_builtin_kernel_entries[kernel_index];
  return dispatch->binding_count == entry->binding_count &&
         dispatch->constant_count == entry->constant_count &&
         dispatch->workgroup_count[0] != 0 &&
         dispatch->workgroup_count[1] != 0 && dispatch->workgroup_count[2] != 0;
}

// Whether binding `index` holds rows * cols elements of `element_size`
// bytes. A saturated product stands for one that overflows 64 bits, which
// no binding can hold, whatever its length claims.
static bool hrt_binding_holds(const halrt_dispatch_state_t* dispatch,
                              uint32_t index, uint64_t rows, uint64_t cols,
                              uint64_t element_size) {
  const uint64_t bytes =
      hrt_mul_saturate(hrt_mul_saturate(rows, cols), element_size);
  return bytes != UINT64_MAX &&
         bytes <= (uint64_t)dispatch->binding_lengths[index];
}

// The part of [0, n) that part `index` of `parts` owns: contiguous chunks
// of ceil(n / parts), in order; empty for parts past the end. n < 2^32.
static hrt_range_t hrt_chunk(uint64_t n, uint64_t parts, uint64_t index) {
  hrt_range_t range = {0, 0};
  if (index >= n) return range;
  const uint64_t width = n / parts + (n % parts != 0);
  const uint64_t begin = index * width;  // index < n, width <= n: no overflow
  if (begin >= n) return range;
  range.begin = (size_t)begin;
  range.end = (size_t)(width < n - begin ? begin + width : n);
  return range;
}

// The grid's workgroup count, saturated.
static uint64_t hrt_grid_parts(const halrt_dispatch_state_t* dispatch) {
  const uint32_t* count = dispatch->workgroup_count;
  return hrt_mul_saturate(hrt_mul_saturate(count[0], count[1]), count[2]);
}

// This workgroup's linear index in the grid (x fastest), saturated.
static uint64_t hrt_linear_index(const halrt_dispatch_state_t* dispatch,
                                 const halrt_workgroup_state_t* workgroup) {
  const uint32_t* count = dispatch->workgroup_count;
  const uint32_t* id = workgroup->workgroup_id;
  // id[1] + count[1] * id[2] < 2^64 always; only the outer product saturates.
  const uint64_t linear =
      hrt_mul_saturate(count[0], (uint64_t)id[1] + (uint64_t)count[1] * id[2]);
  return linear > UINT64_MAX - id[0] ? UINT64_MAX : linear + id[0];
}

// This workgroup's chunk of [0, n) when the whole grid is split linearly.
static hrt_range_t hrt_linear_chunk(const halrt_dispatch_state_t* dispatch,
                                    const halrt_workgroup_state_t* workgroup,
                                    uint64_t n) {
  return hrt_chunk(n, hrt_grid_parts(dispatch),
                   hrt_linear_index(dispatch, workgroup));
}

//===----------------------------------------------------------------------===//
// Elementwise kernels: constants[0] is n, every binding holds n elements
//===----------------------------------------------------------------------===//

typedef void (*hrt_range_body_t)(const halrt_dispatch_state_t* dispatch,
                                 hrt_range_t range);

// Defines hrt_kernel_<name>, which validates the dispatch and runs
// hrt_<name>_body on the workgroup's linear chunk of the n elements.
#define HRT_ELEMENTWISE_KERNEL(name, element_size)                           \
  static int hrt_kernel_##name(const halrt_dispatch_state_t* dispatch,       \
                               const halrt_workgroup_state_t* workgroup) {   \
    return hrt_run_elementwise(dispatch, workgroup, HRT_KERNEL_INDEX_##name, \
                               element_size, hrt_##name##_body);             \
  }

static int hrt_run_elementwise(const halrt_dispatch_state_t* dispatch,
                               const halrt_workgroup_state_t* workgroup,
                               int kernel_index, uint64_t element_size,
                               hrt_range_body_t body) {
  if (!hrt_dispatch_matches(dispatch, kernel_index)) {
    return HALRT_KERNEL_INVALID_ARGUMENT;
  }
  const uint64_t n = dispatch->constants[0];
  for (uint32_t i = 0; i < dispatch->binding_count; ++i) {
    if (!hrt_binding_holds(dispatch, i, n, 1, element_size)) {
      return HALRT_KERNEL_INVALID_ARGUMENT;
    }
  }
  const hrt_range_t range = hrt_linear_chunk(dispatch, workgroup, n);
  if (range.begin < range.end) body(dispatch, range);
  return HALRT_KERNEL_OK;
}

static float hrt_f32_from_bits(uint32_t bits) {
  float value;
  memcpy(&value, &bits, sizeof(value));
  return value;
}

// C fmaxf without the library call (compilers call it unless told math is
// finite): a NaN operand is ignored, two NaNs give NaN. Comparing -0 with +0
// returns y, a choice fmaxf leaves open.
static float hrt_fmaxf(float x, float y) { return (x > y || y != y) ? x : y; }

// Truncating division, total over int32: x / 0 == 0 and INT32_MIN / -1 ==
// INT32_MIN (the wrapped quotient), so no input traps.
static int32_t hrt_div_i32(int32_t x, int32_t y) {
  if (y == 0) return 0;
  if (y == -1) return x == INT32_MIN ? INT32_MIN : -x;
  return x / y;
}

// The result is read into locals before the store, so `out` may be the
// same buffer as an input.
#define HRT_BINARY_DEFINE(name, type, expr)                             \
  static void hrt_##name##_body(const halrt_dispatch_state_t* dispatch, \
                                hrt_range_t range) {                    \
    const type* a = dispatch->bindings[0];                              \
    const type* b = dispatch->bindings[1];                              \
    type* out = dispatch->bindings[2];                                  \
    for (size_t i = range.begin; i < range.end; ++i) {                  \
      const type x = a[i], y = b[i];                                    \
      out[i] = (type)(expr);                                            \
    }                                                                   \
  }                                                                     \
  HRT_ELEMENTWISE_KERNEL(name, sizeof(type))
HRT_BINARY_KERNELS(HRT_BINARY_DEFINE)

static void hrt_fill_u32_body(const halrt_dispatch_state_t* dispatch,
                              hrt_range_t range) {
  uint32_t* out = dispatch->bindings[0];
  const uint32_t value = dispatch->constants[1];
  for (size_t i = range.begin; i < range.end; ++i) out[i] = value;
}

HRT_ELEMENTWISE_KERNEL(fill_u32, sizeof(uint32_t))

// memmove so that binding the same buffer as src and dst is well defined.
static void hrt_copy_u8_body(const halrt_dispatch_state_t* dispatch,
                             hrt_range_t range) {
  const uint8_t* src = dispatch->bindings[0];
  uint8_t* dst = dispatch->bindings[1];
  memmove(dst + range.begin, src + range.begin, range.end - range.begin);
}

HRT_ELEMENTWISE_KERNEL(copy_u8, 1)

static void hrt_axpy_f32_body(const halrt_dispatch_state_t* dispatch,
                              hrt_range_t range) {
  const float* x = dispatch->bindings[0];
  const float* y = dispatch->bindings[1];
  float* out = dispatch->bindings[2];
  const float alpha = hrt_f32_from_bits(dispatch->constants[1]);
  for (size_t i = range.begin; i < range.end; ++i) {
    // Two statements: C allows fusing into a multiply-add only within one
    // expression, so the product is rounded before the sum.
    const float product = alpha * x[i];
    out[i] = product + y[i];
  }
}

HRT_ELEMENTWISE_KERNEL(axpy_f32, sizeof(float))

static void hrt_relu_f32_body(const halrt_dispatch_state_t* dispatch,
                              hrt_range_t range) {
  const float* x = dispatch->bindings[0];
  float* out = dispatch->bindings[1];
  for (size_t i = range.begin; i < range.end; ++i) {
    const float v = x[i];
    out[i] = v > 0.0f ? v : 0.0f;
  }
}

HRT_ELEMENTWISE_KERNEL(relu_f32, sizeof(float))

//===----------------------------------------------------------------------===//
// Broadcasting and parameterised elementwise kernels
//===----------------------------------------------------------------------===//

// binary_f32: constants [op, dims[6], a strides[6], b strides[6]]; out is
// the dense dims, a and b are read at their strides (0: broadcast).
enum { HRT_ND = 6, HRT_BINARY_OP_COUNT = 10, HRT_UNARY_OP_COUNT = 14 };

// C fminf as hrt_fmaxf spells fmaxf.
static float hrt_fminf(float x, float y) { return (x < y || y != y) ? x : y; }

// max and min with NaN kept (x's when both are), as ONNX Runtime's Max and
// Min: y unless x is NaN or beyond it, so max(-0, +0) is +0 and
// max(+0, -0) is -0.
static float hrt_max_nan(float x, float y) { return x != x || x > y ? x : y; }
static float hrt_min_nan(float x, float y) { return x != x || x < y ? x : y; }

// min(max(x, lo), hi): hi when lo > hi; NaN stays NaN.
static float hrt_clip(float x, float lo, float hi) {
  const float t = x < lo ? lo : x;
  return t > hi ? hi : t;
}

// The elements a binding read at `strides` over `dims` spans: 1 + the
// offset of the last element, or 0 when there is no element; saturated.
static uint64_t hrt_strided_extent(const uint32_t* dims,
                                   const uint32_t* strides) {
  uint64_t last = 0;
  for (int d = 0; d < HRT_ND; ++d) {
    if (dims[d] == 0) return 0;
    const uint64_t step = hrt_mul_saturate(dims[d] - 1, strides[d]);
    last = step > UINT64_MAX - last ? UINT64_MAX : last + step;
  }
  return last == UINT64_MAX ? UINT64_MAX : last + 1;
}

static uint64_t hrt_dims_count(const uint32_t* dims) {
  uint64_t n = 1;
  for (int d = 0; d < HRT_ND; ++d) n = hrt_mul_saturate(n, dims[d]);
  return n;
}

// A walk over the elements of `dims` in order, from a given index, with the
// offsets it reaches in up to three operands read at element strides
// (hrt_no_strides for one it does not need); it steps in runs along the
// last dimension.
enum { HRT_WALK_OPERANDS = 3 };
static const uint32_t hrt_no_strides[HRT_ND] = {0};

typedef struct hrt_walk_t {
  const uint32_t* dims;
  const uint32_t* strides[HRT_WALK_OPERANDS];
  uint64_t at[HRT_ND];
  uint64_t offset[HRT_WALK_OPERANDS];
} hrt_walk_t;

static hrt_walk_t hrt_walk_start(const uint32_t* dims,
                                 const uint32_t* const* strides,
                                 const uint64_t* bases, uint64_t index) {
  hrt_walk_t w = {dims, {strides[0], strides[1], strides[2]}, {0},
                  {bases[0], bases[1], bases[2]}};
  for (int d = HRT_ND - 1; d >= 0; --d) {
    w.at[d] = index % dims[d];
    index /= dims[d];
    for (int o = 0; o < HRT_WALK_OPERANDS; ++o) {
      w.offset[o] += w.at[d] * strides[o][d];
    }
  }
  return w;
}

// The elements left in the current run, at most `limit`.
static uint64_t hrt_walk_run(const hrt_walk_t* w, uint64_t limit) {
  const uint64_t left = w->dims[HRT_ND - 1] - w->at[HRT_ND - 1];
  return left < limit ? left : limit;
}

// Moves `run` elements on (at most hrt_walk_run's), carrying into the
// outer coordinates.
static void hrt_walk_advance(hrt_walk_t* w, uint64_t run) {
  const int last = HRT_ND - 1;
  w->at[last] += run;
  for (int o = 0; o < HRT_WALK_OPERANDS; ++o) {
    w->offset[o] += run * w->strides[o][last];
  }
  for (int d = last; d > 0 && w->at[d] == w->dims[d]; --d) {
    for (int o = 0; o < HRT_WALK_OPERANDS; ++o) {
      w->offset[o] += w->strides[o][d - 1] - w->at[d] * w->strides[o][d];
    }
    w->at[d] = 0;
    ++w->at[d - 1];
  }
}

// One run of `count` outputs along the last dimension; the common stride
// pairs (dense, or one side broadcast) get loops of their own, which the
// compiler vectorises.
#define HRT_BINARY_ROW(name, expr)                                          \
  static void hrt_binary_row_##name(const float* a, uint64_t sa,           \
                                    const float* b, uint64_t sb, float* out, \
                                    size_t count) {                         \
    if (sa == 1 && sb == 1) {                                               \
      for (size_t i = 0; i < count; ++i) {                                  \
        const float x = a[i], y = b[i];                                     \
        out[i] = (expr);                                                    \
      }                                                                     \
    } else if (sa == 1 && sb == 0) {                                        \
      const float y = b[0];                                                 \
      for (size_t i = 0; i < count; ++i) {                                  \
        const float x = a[i];                                               \
        out[i] = (expr);                                                    \
      }                                                                     \
    } else if (sa == 0 && sb == 1) {                                        \
      const float x = a[0];                                                 \
      for (size_t i = 0; i < count; ++i) {                                  \
        const float y = b[i];                                               \
        out[i] = (expr);                                                    \
      }                                                                     \
    } else {                                                                \
      for (size_t i = 0; i < count; ++i) {                                  \
        const float x = a[i * sa], y = b[i * sb];                           \
        out[i] = (expr);                                                    \
      }                                                                     \
    }                                                                       \
  }
HRT_BINARY_ROW(add, x + y)
HRT_BINARY_ROW(sub, x - y)
HRT_BINARY_ROW(mul, x* y)
HRT_BINARY_ROW(div, x / y)
HRT_BINARY_ROW(pow, powf(x, y))
HRT_BINARY_ROW(max, hrt_fmaxf(x, y))
HRT_BINARY_ROW(min, hrt_fminf(x, y))
HRT_BINARY_ROW(eq, x == y ? 1.0f : 0.0f)
HRT_BINARY_ROW(max_nan, hrt_max_nan(x, y))
HRT_BINARY_ROW(min_nan, hrt_min_nan(x, y))

typedef void (*hrt_binary_row_t)(const float*, uint64_t, const float*,
                                 uint64_t, float*, size_t);
static const hrt_binary_row_t hrt_binary_rows[HRT_BINARY_OP_COUNT] = {
    hrt_binary_row_add, hrt_binary_row_sub, hrt_binary_row_mul,
    hrt_binary_row_div, hrt_binary_row_pow, hrt_binary_row_max,
    hrt_binary_row_min, hrt_binary_row_eq,  hrt_binary_row_max_nan,
    hrt_binary_row_min_nan};

static void hrt_binary_f32_body(const halrt_dispatch_state_t* dispatch,
                                hrt_range_t range) {
  const uint32_t* dims = dispatch->constants + 1;
  const hrt_binary_row_t row = hrt_binary_rows[dispatch->constants[0]];
  const float* a = dispatch->bindings[0];
  const float* b = dispatch->bindings[1];
  float* out = dispatch->bindings[2];
  const uint32_t* const strides[] = {dims + HRT_ND, dims + 2 * HRT_ND,
                                     hrt_no_strides};
  const uint64_t bases[] = {0, 0, 0};
  hrt_walk_t w = hrt_walk_start(dims, strides, bases, range.begin);
  for (size_t i = range.begin; i < range.end;) {
    const size_t count = (size_t)hrt_walk_run(&w, range.end - i);
    row(a + w.offset[0], dims[2 * HRT_ND - 1], b + w.offset[1],
        dims[3 * HRT_ND - 1], out + i, count);
    i += count;
    hrt_walk_advance(&w, count);
  }
}

static int hrt_kernel_binary_f32(const halrt_dispatch_state_t* dispatch,
                                 const halrt_workgroup_state_t* workgroup) {
  if (!hrt_dispatch_matches(dispatch, HRT_KERNEL_INDEX_binary_f32) ||
      dispatch->constants[0] >= HRT_BINARY_OP_COUNT) {
    return HALRT_KERNEL_INVALID_ARGUMENT;
  }
  const uint32_t* dims = dispatch->constants + 1;
  const uint64_t n = hrt_dims_count(dims);
  if (n > UINT32_MAX ||
      !hrt_binding_holds(dispatch, 0,
                         hrt_strided_extent(dims, dims + HRT_ND), 1, 4) ||
      !hrt_binding_holds(dispatch, 1,
                         hrt_strided_extent(dims, dims + 2 * HRT_ND), 1, 4) ||
      !hrt_binding_holds(dispatch, 2, n, 1, 4)) {
    return HALRT_KERNEL_INVALID_ARGUMENT;
  }
  const hrt_range_t range = hrt_linear_chunk(dispatch, workgroup, n);
  if (range.begin < range.end) hrt_binary_f32_body(dispatch, range);
  return HALRT_KERNEL_OK;
}

// strided_copy_f32: constants [src offset, dst offset, dims[6], src
// strides[6], dst strides[6]]; elements copied as bits (NaN payloads, -0),
// a run of the last dimension at a time.
static void hrt_strided_copy_f32_body(const halrt_dispatch_state_t* dispatch,
                                     hrt_range_t range) {
  const uint32_t* k = dispatch->constants;
  const uint32_t* dims = k + 2;
  const uint64_t s = dims[2 * HRT_ND - 1], t = dims[3 * HRT_ND - 1];
  const uint32_t* src = dispatch->bindings[0];
  uint32_t* dst = dispatch->bindings[1];
  const uint32_t* const strides[] = {dims + HRT_ND, dims + 2 * HRT_ND,
                                     hrt_no_strides};
  const uint64_t bases[] = {k[0], k[1], 0};
  hrt_walk_t w = hrt_walk_start(dims, strides, bases, range.begin);
  for (uint64_t i = range.begin; i < range.end;) {
    const uint64_t run = hrt_walk_run(&w, range.end - i);
    const uint32_t* from = src + w.offset[0];
    uint32_t* to = dst + w.offset[1];
    if (s == 1 && t == 1) {
      memcpy(to, from, run * sizeof(uint32_t));
    } else {
      for (uint64_t j = 0; j < run; ++j) to[j * t] = from[j * s];
    }
    i += run;
    hrt_walk_advance(&w, run);
  }
}

static int hrt_kernel_strided_copy_f32(
    const halrt_dispatch_state_t* dispatch,
    const halrt_workgroup_state_t* workgroup) {
  if (!hrt_dispatch_matches(dispatch, HRT_KERNEL_INDEX_strided_copy_f32)) {
    return HALRT_KERNEL_INVALID_ARGUMENT;
  }
  const uint32_t* k = dispatch->constants;
  const uint32_t* dims = k + 2;
  const uint64_t n = hrt_dims_count(dims);
  const uint64_t src = hrt_strided_extent(dims, dims + HRT_ND);
  const uint64_t dst = hrt_strided_extent(dims, dims + 2 * HRT_ND);
  // An offset counts only when there is an element to read or write.
  if (n > UINT32_MAX ||
      !hrt_binding_holds(dispatch, 0, src == 0 ? 0 : src + k[0], 1, 4) ||
      !hrt_binding_holds(dispatch, 1, dst == 0 ? 0 : dst + k[1], 1, 4)) {
    return HALRT_KERNEL_INVALID_ARGUMENT;
  }
  const hrt_range_t range = hrt_linear_chunk(dispatch, workgroup, n);
  if (range.begin < range.end) hrt_strided_copy_f32_body(dispatch, range);
  return HALRT_KERNEL_OK;
}

// where_f32: constants [dims[6], cond strides[6], a strides[6], b
// strides[6]]; out (dense) = cond != 0 ? a : b, bits copied.
static void hrt_where_f32_body(const halrt_dispatch_state_t* dispatch,
                               hrt_range_t range) {
  const uint32_t* dims = dispatch->constants;
  const float* cond = dispatch->bindings[0];
  const uint32_t* a = dispatch->bindings[1];
  const uint32_t* b = dispatch->bindings[2];
  uint32_t* out = dispatch->bindings[3];
  const uint32_t* const strides[] = {dims + HRT_ND, dims + 2 * HRT_ND,
                                     dims + 3 * HRT_ND};
  const uint64_t bases[] = {0, 0, 0};
  const uint64_t sc = dims[2 * HRT_ND - 1], sa = dims[3 * HRT_ND - 1];
  const uint64_t sb = dims[4 * HRT_ND - 1];
  hrt_walk_t w = hrt_walk_start(dims, strides, bases, range.begin);
  for (uint64_t i = range.begin; i < range.end;) {
    const uint64_t run = hrt_walk_run(&w, range.end - i);
    const float* c = cond + w.offset[0];
    const uint32_t* x = a + w.offset[1];
    const uint32_t* y = b + w.offset[2];
    for (uint64_t j = 0; j < run; ++j) {
      out[i + j] = c[j * sc] != 0.0f ? x[j * sa] : y[j * sb];
    }
    i += run;
    hrt_walk_advance(&w, run);
  }
}

static int hrt_kernel_where_f32(const halrt_dispatch_state_t* dispatch,
                                const halrt_workgroup_state_t* workgroup) {
  if (!hrt_dispatch_matches(dispatch, HRT_KERNEL_INDEX_where_f32)) {
    return HALRT_KERNEL_INVALID_ARGUMENT;
  }
  const uint32_t* dims = dispatch->constants;
  const uint64_t n = hrt_dims_count(dims);
  for (uint32_t i = 0; i < 3; ++i) {
    if (!hrt_binding_holds(dispatch, i,
                           hrt_strided_extent(dims, dims + (i + 1) * HRT_ND),
                           1, 4)) {
      return HALRT_KERNEL_INVALID_ARGUMENT;
    }
  }
  if (n > UINT32_MAX || !hrt_binding_holds(dispatch, 3, n, 1, 4)) {
    return HALRT_KERNEL_INVALID_ARGUMENT;
  }
  const hrt_range_t range = hrt_linear_chunk(dispatch, workgroup, n);
  if (range.begin < range.end) hrt_where_f32_body(dispatch, range);
  return HALRT_KERNEL_OK;
}

// max(0, min(1, y)), NaN kept.
static float hrt_unit_clamp(float y) {
  return y != y ? y : y < 0.0f ? 0.0f : y > 1.0f ? 1.0f : y;
}

// out[i] = unary op `op` of in[i] (in may be out) for i < count, a loop per
// op (which the compiler vectorises where it can).
#define HRT_UNARY_CASE(code, expr)             \
  case code:                                   \
    for (size_t i = 0; i < count; ++i) {       \
      const float x = in[i];                   \
      out[i] = (expr);                         \
    }                                          \
    return;
static void hrt_unary_row(uint32_t op, const float* in, float* out,
                          size_t count, float alpha, float beta) {
  switch (op) {
    HRT_UNARY_CASE(0, 1.0f / (1.0f + expf(-x)))  // sigmoid
    HRT_UNARY_CASE(1, tanhf(x))
    HRT_UNARY_CASE(2, expf(x))
    HRT_UNARY_CASE(3, logf(x))
    HRT_UNARY_CASE(4, sqrtf(x))
    HRT_UNARY_CASE(5, -x)
    HRT_UNARY_CASE(6, fabsf(x))
    HRT_UNARY_CASE(7, 1.0f / x)
    HRT_UNARY_CASE(8, erff(x))
    HRT_UNARY_CASE(9, x < 0.0f ? alpha * x : x)  // leaky relu
    HRT_UNARY_CASE(10, hrt_unit_clamp(alpha * x + beta))  // hard sigmoid
    // hard swish: x * hard sigmoid(x) with 1/6, 1/2
    HRT_UNARY_CASE(11, x * hrt_unit_clamp(x / 6.0f + 0.5f))
    HRT_UNARY_CASE(12, hrt_clip(x, alpha, beta))
    // gelu, exact: x/2 (1 + erf(x / sqrt 2))
    HRT_UNARY_CASE(13, (0.5f * x) * (1.0f + erff(x * 0.70710678118654752f)))
    default:
      return;
  }
}

// unary_f32: constants [n, op, alpha bits, beta bits].
static void hrt_unary_f32_body(const halrt_dispatch_state_t* dispatch,
                               hrt_range_t range) {
  const float* x = dispatch->bindings[0];
  float* out = dispatch->bindings[1];
  hrt_unary_row(dispatch->constants[1], x + range.begin, out + range.begin,
                range.end - range.begin,
                hrt_f32_from_bits(dispatch->constants[2]),
                hrt_f32_from_bits(dispatch->constants[3]));
}

static int hrt_kernel_unary_f32(const halrt_dispatch_state_t* dispatch,
                                const halrt_workgroup_state_t* workgroup) {
  if (dispatch->constant_count == 4 &&
      dispatch->constants[1] >= HRT_UNARY_OP_COUNT) {
    return HALRT_KERNEL_INVALID_ARGUMENT;
  }
  return hrt_run_elementwise(dispatch, workgroup, HRT_KERNEL_INDEX_unary_f32,
                             sizeof(float), hrt_unary_f32_body);
}

// chain_f32: constants [steps, dims[6], y strides[6], then per step: op |
// operand << 8, alpha bits, beta bits] (docs/kernels.md). t = x, then each
// step on t, a block of elements at a time: the same roundings, so the
// same bits, as the unfused kernels. chain_health_f32 also counts, after
// each step, the NaN, +Inf and -Inf in t into its workgroup's slot of
// `counts` (HRT_BUILTIN_CHAIN_COUNTS words: [step][nan, +inf, -inf]).
enum { HRT_CHAIN_BLOCK = 1024, HRT_CHAIN_FIRST_STEP = 13 };

// Adds the NaN, +Inf and -Inf among t[0, count) to c[0], c[1], c[2],
// looking at each element only when a quick scan found one; whether it
// found one.
static bool hrt_count_nonfinite(const float* t, size_t count, uint32_t* c) {
  if (!hrt_hal_tensor_any_nonfinite(HRT_HAL_ELEMENT_TYPE_F32, t, count)) {
    return false;
  }
  for (size_t e = 0; e < count; ++e) {
    c[0] += t[e] != t[e];
    c[1] += t[e] == INFINITY;
    c[2] += t[e] == -INFINITY;
  }
  return true;
}

// Whether chain step `step` (op word, alpha, beta) gives a finite result
// for every finite t, whatever x and y hold: then a block that was finite
// before it needs no count after it.
static bool hrt_chain_step_keeps_finite(const uint32_t* step) {
  const uint32_t op = step[0] & 0xffu, operand = step[0] >> 8;
  const float alpha = hrt_f32_from_bits(step[1]);
  const float beta = hrt_f32_from_bits(step[2]);
  const bool finite = alpha - alpha == 0.0f && beta - beta == 0.0f;
  switch (op) {
    case 0:   // sigmoid
    case 1:   // tanh
    case 5:   // neg
    case 6:   // abs
    case 8:   // erf
    case 11:  // hard swish
    case 13:  // gelu
      return true;
    case 9:  // leaky relu
      return fabsf(alpha) <= 1.0f;
    case 10:  // hard sigmoid
      return finite;
    case 12:  // clip: x, alpha or beta
      return alpha < INFINITY && beta > -INFINITY;
    default:
      break;
  }
  if (op < 16 || operand != 2) return false;  // v may be anything
  const uint32_t binary = op & 15u;
  const bool alpha_finite = alpha - alpha == 0.0f;
  switch (binary) {
    case 2:  // mul
      return fabsf(alpha) <= 1.0f;
    case 3:  // div: t / alpha
      return op < 32 && fabsf(alpha) >= 1.0f;
    case 5:  // max, min (either NaN rule): t or alpha
    case 6:
    case 8:
    case 9:
      return alpha_finite;
    case 7:  // eq: 0 or 1
      return true;
    default:
      return false;
  }
}

// v[0, count) = the elements of y at the chain's y strides from walk
// position `at` on.
static void hrt_chain_gather(const uint32_t* dims, hrt_walk_t at,
                             const float* y, float* v, size_t count) {
  const uint64_t y_step = dims[2 * HRT_ND - 1];
  for (size_t done = 0; done < count;) {
    const uint64_t run = hrt_walk_run(&at, count - done);
    const float* from = y + at.offset[0];
    if (y_step == 1) {
      memcpy(v + done, from, run * sizeof(float));
    } else if (y_step == 0) {
      for (uint64_t e = 0; e < run; ++e) v[done + e] = from[0];
    } else {
      for (uint64_t e = 0; e < run; ++e) v[done + e] = from[e * y_step];
    }
    done += run;
    hrt_walk_advance(&at, run);
  }
}

// `counts`: NULL, or the [step][3] counts to add to.
static void hrt_chain_f32_body(const halrt_dispatch_state_t* dispatch,
                               hrt_range_t range, uint32_t* counts) {
  const uint32_t* k = dispatch->constants;
  const uint32_t* dims = k + 1;
  const float* x = dispatch->bindings[0];
  const float* y = dispatch->bindings[1];
  float* out = dispatch->bindings[2];
  bool reads_y = false;
  for (uint32_t j = 0; j < k[0]; ++j) {
    const uint32_t word = k[HRT_CHAIN_FIRST_STEP + 3 * j];
    reads_y |= (word & 0xffu) >= 16 && (word >> 8 == 1 || word >> 8 == 3);
  }
  const uint32_t* const strides[] = {dims + HRT_ND, hrt_no_strides,
                                     hrt_no_strides};
  const uint64_t bases[] = {0, 0, 0};
  hrt_walk_t w = hrt_walk_start(dims, strides, bases, range.begin);
  float t[HRT_CHAIN_BLOCK], v[HRT_CHAIN_BLOCK];
  for (size_t i = range.begin; i < range.end;) {
    const size_t count =
        range.end - i < HRT_CHAIN_BLOCK ? range.end - i : HRT_CHAIN_BLOCK;
    const hrt_walk_t block = w;
    for (size_t done = 0; reads_y && done < count;) {
      const uint64_t run = hrt_walk_run(&w, count - done);
      hrt_walk_advance(&w, run);
      done += run;
    }
    // The first step reads x, the last writes out, the others t: element
    // e of a step reads only element e, so out may be x. `finite`: t is
    // known to hold no NaN or infinity.
    bool finite = false;
    for (uint32_t j = 0; j < k[0]; ++j) {
      const uint32_t* step = k + HRT_CHAIN_FIRST_STEP + 3 * j;
      const uint32_t op = step[0] & 0xffu, operand = step[0] >> 8;
      const float alpha = hrt_f32_from_bits(step[1]);
      const float* in = j == 0 ? x + i : t;
      float* to = j + 1 == k[0] ? out + i : t;
      if (op < 16) {
        hrt_unary_row(op, in, to, count, alpha, hrt_f32_from_bits(step[2]));
      } else {
        // y (operand 1) and y at an offset (3) gathered into v.
        if (operand == 1 || operand == 3) {
          const uint32_t offset = operand == 3 ? (uint32_t)alpha : 0;
          hrt_chain_gather(dims, block, y + offset, v, count);
        }
        const float* other = operand == 0 ? x + i : operand == 2 ? &alpha : v;
        const uint64_t stride = operand == 2 ? 0 : 1;
        const hrt_binary_row_t row = hrt_binary_rows[op & 15u];
        if (op < 32) {
          row(in, 1, other, stride, to, count);
        } else {
          row(other, stride, in, 1, to, count);
        }
      }
      if (counts && !(finite && hrt_chain_step_keeps_finite(step))) {
        finite = !hrt_count_nonfinite(to, count, counts + 3 * j);
      }
    }
    i += count;
  }
}

// Both chain kernels; `counted`: chain_health_f32, whose binding 3 holds a
// slot per workgroup.
static int hrt_chain_kernel(const halrt_dispatch_state_t* dispatch,
                            const halrt_workgroup_state_t* workgroup,
                            int kernel_index, bool counted) {
  if (!hrt_dispatch_matches(dispatch, kernel_index) ||
      !hrt_builtin_chain_valid(dispatch->constants)) {
    return HALRT_KERNEL_INVALID_ARGUMENT;
  }
  const uint32_t* dims = dispatch->constants + 1;
  const uint64_t n = hrt_dims_count(dims);
  const uint64_t y_extent = hrt_strided_extent(dims, dims + HRT_ND);
  if (n > UINT32_MAX || !hrt_binding_holds(dispatch, 0, n, 1, 4) ||
      !hrt_binding_holds(
          dispatch, 1,
          y_extent + (y_extent ? hrt_builtin_chain_y_offset(dispatch->constants)
                               : 0),
          1, 4) ||
      !hrt_binding_holds(dispatch, 2, n, 1, 4) ||
      (counted && !hrt_binding_holds(dispatch, 3, hrt_grid_parts(dispatch),
                                     HRT_BUILTIN_CHAIN_COUNTS, 4))) {
    return HALRT_KERNEL_INVALID_ARGUMENT;
  }
  const hrt_range_t range = hrt_linear_chunk(dispatch, workgroup, n);
  uint32_t counts[HRT_BUILTIN_CHAIN_COUNTS] = {0};
  if (range.begin < range.end) {
    hrt_chain_f32_body(dispatch, range, counted ? counts : NULL);
  }
  if (counted) {
    uint32_t* slots = dispatch->bindings[3];
    memcpy(slots + hrt_linear_index(dispatch, workgroup) *
                       HRT_BUILTIN_CHAIN_COUNTS,
           counts, sizeof(counts));
  }
  return HALRT_KERNEL_OK;
}

static int hrt_kernel_chain_f32(const halrt_dispatch_state_t* dispatch,
                                const halrt_workgroup_state_t* workgroup) {
  return hrt_chain_kernel(dispatch, workgroup, HRT_KERNEL_INDEX_chain_f32,
                          false);
}

static int hrt_kernel_chain_health_f32(
    const halrt_dispatch_state_t* dispatch,
    const halrt_workgroup_state_t* workgroup) {
  return hrt_chain_kernel(dispatch, workgroup,
                          HRT_KERNEL_INDEX_chain_health_f32, true);
}

//===----------------------------------------------------------------------===//
// conv2d_f32 and pool2d_f32: NCHW images, output rows split linearly
//===----------------------------------------------------------------------===//

// The valid kernel taps [*first, *end) of an output coordinate whose window
// starts at `start` (may be negative) with `dilation`, over an input of
// `size`: the taps that land inside it.
static void hrt_taps(int64_t start, uint32_t taps, uint32_t dilation,
                     uint32_t size, uint32_t* first, uint32_t* end) {
  uint32_t k = 0;
  while (k < taps && start + (int64_t)k * dilation < 0) ++k;
  uint32_t e = k;
  while (e < taps && start + (int64_t)e * dilation < (int64_t)size) ++e;
  *first = k;
  *end = e;
}

// conv2d_f32 constants: N, C, H, W, M, Cg, KH, KW, OH, OW, SH, SW, PT, PL,
// DH, DW (groups = C / Cg).
enum {
  HRT_CONV_N, HRT_CONV_C, HRT_CONV_H, HRT_CONV_W, HRT_CONV_M, HRT_CONV_CG,
  HRT_CONV_KH, HRT_CONV_KW, HRT_CONV_OH, HRT_CONV_OW, HRT_CONV_SH,
  HRT_CONV_SW, HRT_CONV_PT, HRT_CONV_PL, HRT_CONV_DH, HRT_CONV_DW,
};

// The outputs [*lo, *hi) of a row of `out` outputs whose windows (`taps`
// taps `dilation` apart, from `stride` * o - `pad`) lie inside `size`.
static void hrt_interior(uint64_t out, uint64_t taps, uint64_t stride,
                         uint64_t pad, uint64_t dilation, uint64_t size,
                         uint64_t* lo, uint64_t* hi) {
  const uint64_t reach = (taps - 1) * dilation;
  *lo = (pad + stride - 1) / stride;
  *hi = reach + 1 > size + pad ? 0 : (size + pad - reach - 1) / stride + 1;
  if (*hi > out) *hi = out;
  if (*lo > *hi) *lo = *hi;
}

// Each output element adds its products (each rounded, never fused) in
// channel, then row, then column order from +0, then the bias. Outputs
// whose windows lie inside the row are summed together, a tap at a time
// over the row (the same order per element, so the same bits), which the
// compiler vectorises; the others one by one.
static void hrt_conv2d_f32_body(const halrt_dispatch_state_t* dispatch,
                                hrt_range_t range) {
  const uint32_t* k = dispatch->constants;
  const float* x = dispatch->bindings[0];
  const float* w = dispatch->bindings[1];
  const float* bias = dispatch->bindings[2];
  float* out = dispatch->bindings[3];
  const uint64_t C = k[HRT_CONV_C], H = k[HRT_CONV_H], W = k[HRT_CONV_W];
  const uint64_t M = k[HRT_CONV_M], Cg = k[HRT_CONV_CG];
  const uint64_t KH = k[HRT_CONV_KH], KW = k[HRT_CONV_KW];
  const uint64_t OH = k[HRT_CONV_OH], OW = k[HRT_CONV_OW];
  const uint64_t SW = k[HRT_CONV_SW], DW = k[HRT_CONV_DW];
  const uint64_t per_group = M / (C / Cg);
  uint64_t lo, hi;
  hrt_interior(OW, KW, SW, k[HRT_CONV_PL], DW, W, &lo, &hi);
  for (size_t r = range.begin; r < range.end; ++r) {
    const uint64_t oh = r % OH, m = r / OH % M, n = r / OH / M;
    const uint64_t c0 = m / per_group * Cg;
    const int64_t ih0 = (int64_t)(oh * k[HRT_CONV_SH]) - k[HRT_CONV_PT];
    uint32_t kh0, kh1;
    hrt_taps(ih0, (uint32_t)KH, k[HRT_CONV_DH], (uint32_t)H, &kh0, &kh1);
    float* row = out + r * OW;
    for (uint64_t ow = 0; ow < OW; ++ow) {
      if (ow == lo) ow = hi;
      if (ow == OW) break;
      const int64_t iw0 = (int64_t)(ow * SW) - k[HRT_CONV_PL];
      uint32_t kw0, kw1;
      hrt_taps(iw0, (uint32_t)KW, (uint32_t)DW, (uint32_t)W, &kw0, &kw1);
      float sum = 0.0f;
      for (uint64_t c = 0; c < Cg; ++c) {
        const float* plane = x + ((n * C + c0 + c) * H) * W;
        const float* taps = w + ((m * Cg + c) * KH) * KW;
        for (uint32_t i = kh0; i < kh1; ++i) {
          const float* line =
              plane + (uint64_t)(ih0 + (int64_t)i * k[HRT_CONV_DH]) * W;
          for (uint32_t j = kw0; j < kw1; ++j) {
            const float product = taps[i * KW + j] * line[iw0 + (int64_t)(j * DW)];
            sum += product;
          }
        }
      }
      row[ow] = sum + bias[m];
    }
    if (lo == hi) continue;
    float* acc = row + lo;
    const uint64_t count = hi - lo;
    for (uint64_t o = 0; o < count; ++o) acc[o] = 0.0f;
    for (uint64_t c = 0; c < Cg; ++c) {
      const float* plane = x + ((n * C + c0 + c) * H) * W;
      const float* taps = w + ((m * Cg + c) * KH) * KW;
      for (uint32_t i = kh0; i < kh1; ++i) {
        const float* line = plane +
                            (uint64_t)(ih0 + (int64_t)i * k[HRT_CONV_DH]) * W +
                            lo * SW - k[HRT_CONV_PL];
        for (uint64_t j = 0; j < KW; ++j) {
          const float tap = taps[i * KW + j];
          const float* in = line + j * DW;
          if (SW == 1) {
            for (uint64_t o = 0; o < count; ++o) {
              const float product = tap * in[o];
              acc[o] += product;
            }
          } else {
            for (uint64_t o = 0; o < count; ++o) {
              const float product = tap * in[o * SW];
              acc[o] += product;
            }
          }
        }
      }
    }
    for (uint64_t o = 0; o < count; ++o) acc[o] = acc[o] + bias[m];
  }
}

static int hrt_kernel_conv2d_f32(const halrt_dispatch_state_t* dispatch,
                                 const halrt_workgroup_state_t* workgroup) {
  if (!hrt_dispatch_matches(dispatch, HRT_KERNEL_INDEX_conv2d_f32) ||
      !hrt_builtin_conv2d_valid(dispatch->constants)) {
    return HALRT_KERNEL_INVALID_ARGUMENT;
  }
  const uint32_t* k = dispatch->constants;
  const uint64_t rows =
      hrt_mul_saturate(hrt_mul_saturate(k[HRT_CONV_N], k[HRT_CONV_M]),
                       k[HRT_CONV_OH]);
  if (!hrt_binding_holds(dispatch, 0,
                         hrt_mul_saturate(k[HRT_CONV_N], k[HRT_CONV_C]),
                         hrt_mul_saturate(k[HRT_CONV_H], k[HRT_CONV_W]), 4) ||
      !hrt_binding_holds(dispatch, 1,
                         hrt_mul_saturate(k[HRT_CONV_M], k[HRT_CONV_CG]),
                         hrt_mul_saturate(k[HRT_CONV_KH], k[HRT_CONV_KW]), 4) ||
      !hrt_binding_holds(dispatch, 2, k[HRT_CONV_M], 1, 4) ||
      !hrt_binding_holds(dispatch, 3, rows, k[HRT_CONV_OW], 4) ||
      rows > UINT32_MAX) {
    return HALRT_KERNEL_INVALID_ARGUMENT;
  }
  if (k[HRT_CONV_OW] == 0) return HALRT_KERNEL_OK;
  const hrt_range_t range = hrt_linear_chunk(dispatch, workgroup, rows);
  if (range.begin < range.end) hrt_conv2d_f32_body(dispatch, range);
  return HALRT_KERNEL_OK;
}

// resize2d_f32 constants: P, H, W, OH, OW, 3 (a table entry's width).
// Each output row (p, oh) reads rows[oh] and every cols[ow]: (index,
// index, weight) as floats; an index that is not an integer in the input
// makes that output NaN.
static float hrt_lerp(float u, float v, float t) {
  if (t == 0.0f) return u;
  const float a = u * (1.0f - t);
  const float b = v * t;
  return a + b;
}

static bool hrt_resize_index(float value, uint64_t size, uint64_t* index) {
  if (!(value >= 0.0f && value < (float)size) || value != floorf(value)) {
    return false;
  }
  *index = (uint64_t)value;
  return true;
}

static void hrt_resize2d_f32_body(const halrt_dispatch_state_t* dispatch,
                                  hrt_range_t range) {
  const uint32_t* k = dispatch->constants;
  const float* x = dispatch->bindings[0];
  const float* rows = dispatch->bindings[1];
  const float* cols = dispatch->bindings[2];
  float* out = dispatch->bindings[3];
  const uint64_t H = k[1], W = k[2], OH = k[3], OW = k[4];
  for (size_t r = range.begin; r < range.end; ++r) {
    const uint64_t oh = r % OH;
    const float* plane = x + r / OH * H * W;
    const float* rt = rows + 3 * oh;
    uint64_t i0 = 0, i1 = 0;
    const bool row_ok = hrt_resize_index(rt[0], H, &i0) &&
                        hrt_resize_index(rt[1], H, &i1);
    for (uint64_t ow = 0; ow < OW; ++ow) {
      const float* ct = cols + 3 * ow;
      uint64_t j0 = 0, j1 = 0;
      if (!row_ok || !hrt_resize_index(ct[0], W, &j0) ||
          !hrt_resize_index(ct[1], W, &j1)) {
        out[r * OW + ow] = NAN;
        continue;
      }
      const float top = hrt_lerp(plane[i0 * W + j0], plane[i0 * W + j1], ct[2]);
      const float bottom =
          rt[2] == 0.0f ? top
                        : hrt_lerp(plane[i1 * W + j0], plane[i1 * W + j1], ct[2]);
      out[r * OW + ow] = hrt_lerp(top, bottom, rt[2]);
    }
  }
}

static int hrt_kernel_resize2d_f32(const halrt_dispatch_state_t* dispatch,
                                   const halrt_workgroup_state_t* workgroup) {
  if (!hrt_dispatch_matches(dispatch, HRT_KERNEL_INDEX_resize2d_f32) ||
      dispatch->constants[5] != 3) {
    return HALRT_KERNEL_INVALID_ARGUMENT;
  }
  const uint32_t* k = dispatch->constants;
  const uint64_t rows = hrt_mul_saturate(k[0], k[3]);
  if (!hrt_binding_holds(dispatch, 0, k[0], hrt_mul_saturate(k[1], k[2]), 4) ||
      !hrt_binding_holds(dispatch, 1, k[3], 3, 4) ||
      !hrt_binding_holds(dispatch, 2, k[4], 3, 4) ||
      !hrt_binding_holds(dispatch, 3, rows, k[4], 4) || rows > UINT32_MAX) {
    return HALRT_KERNEL_INVALID_ARGUMENT;
  }
  if (k[4] == 0) return HALRT_KERNEL_OK;
  const hrt_range_t range = hrt_linear_chunk(dispatch, workgroup, rows);
  if (range.begin < range.end) hrt_resize2d_f32_body(dispatch, range);
  return HALRT_KERNEL_OK;
}

// pool2d_f32 constants: N, C, H, W, OH, OW, KH, KW, SH, SW, PT, PL, op
// (0 max, 1 average over the taps inside the input, 2 average over all
// KH*KW taps).
enum {
  HRT_POOL_N, HRT_POOL_C, HRT_POOL_H, HRT_POOL_W, HRT_POOL_OH, HRT_POOL_OW,
  HRT_POOL_KH, HRT_POOL_KW, HRT_POOL_SH, HRT_POOL_SW, HRT_POOL_PT,
  HRT_POOL_PL, HRT_POOL_OP,
};

static void hrt_pool2d_f32_body(const halrt_dispatch_state_t* dispatch,
                                hrt_range_t range) {
  const uint32_t* k = dispatch->constants;
  const float* x = dispatch->bindings[0];
  float* out = dispatch->bindings[1];
  const uint64_t H = k[HRT_POOL_H], W = k[HRT_POOL_W], OH = k[HRT_POOL_OH];
  const uint64_t OW = k[HRT_POOL_OW];
  const uint32_t op = k[HRT_POOL_OP];
  for (size_t r = range.begin; r < range.end; ++r) {
    const uint64_t oh = r % OH, plane_index = r / OH;
    const float* plane = x + plane_index * H * W;
    const int64_t ih0 = (int64_t)(oh * k[HRT_POOL_SH]) - k[HRT_POOL_PT];
    uint32_t kh0, kh1;
    hrt_taps(ih0, k[HRT_POOL_KH], 1, (uint32_t)H, &kh0, &kh1);
    for (uint64_t ow = 0; ow < OW; ++ow) {
      const int64_t iw0 = (int64_t)(ow * k[HRT_POOL_SW]) - k[HRT_POOL_PL];
      uint32_t kw0, kw1;
      hrt_taps(iw0, k[HRT_POOL_KW], 1, (uint32_t)W, &kw0, &kw1);
      const bool max = op == 0 || op == 3;
      float acc = max ? -INFINITY : 0.0f;
      for (uint32_t i = kh0; i < kh1; ++i) {
        const float* line = plane + (uint64_t)(ih0 + i) * W + iw0;
        for (uint32_t j = kw0; j < kw1; ++j) {
          const float v = line[j];
          // op 3: the first NaN stays, else the first of equal maxima.
          acc = op == 0   ? hrt_fmaxf(acc, v)
                : op == 3 ? (v > acc || (v != v && acc == acc) ? v : acc)
                          : acc + v;
        }
      }
      const uint64_t taps = op == 2 ? (uint64_t)k[HRT_POOL_KH] * k[HRT_POOL_KW]
                                    : (uint64_t)(kh1 - kh0) * (kw1 - kw0);
      out[r * OW + ow] = max ? acc : acc / (float)taps;
    }
  }
}

static int hrt_kernel_pool2d_f32(const halrt_dispatch_state_t* dispatch,
                                 const halrt_workgroup_state_t* workgroup) {
  if (!hrt_dispatch_matches(dispatch, HRT_KERNEL_INDEX_pool2d_f32)) {
    return HALRT_KERNEL_INVALID_ARGUMENT;
  }
  const uint32_t* k = dispatch->constants;
  const uint64_t planes = hrt_mul_saturate(k[HRT_POOL_N], k[HRT_POOL_C]);
  const uint64_t rows = hrt_mul_saturate(planes, k[HRT_POOL_OH]);
  if (k[HRT_POOL_OP] > 3 || !k[HRT_POOL_SH] || !k[HRT_POOL_SW] ||
      !hrt_binding_holds(dispatch, 0, planes,
                         hrt_mul_saturate(k[HRT_POOL_H], k[HRT_POOL_W]), 4) ||
      !hrt_binding_holds(dispatch, 1, rows, k[HRT_POOL_OW], 4) ||
      rows > UINT32_MAX) {
    return HALRT_KERNEL_INVALID_ARGUMENT;
  }
  if (k[HRT_POOL_OW] == 0) return HALRT_KERNEL_OK;
  const hrt_range_t range = hrt_linear_chunk(dispatch, workgroup, rows);
  if (range.begin < range.end) hrt_pool2d_f32_body(dispatch, range);
  return HALRT_KERNEL_OK;
}

//===----------------------------------------------------------------------===//
// Row kernels: constants [rows, cols], x is rows×cols, rows split linearly
//===----------------------------------------------------------------------===//

// Defines hrt_kernel_<name>, which validates the dispatch and runs
// hrt_<name>_body on the workgroup's linear chunk of the rows. The output
// is rows×cols when `out_is_matrix`, else one value per row.
#define HRT_ROWS_KERNEL(name, out_is_matrix)                               \
  static int hrt_kernel_##name(const halrt_dispatch_state_t* dispatch,     \
                               const halrt_workgroup_state_t* workgroup) { \
    return hrt_run_rows(dispatch, workgroup, HRT_KERNEL_INDEX_##name,      \
                        out_is_matrix, hrt_##name##_body);                 \
  }

static int hrt_run_rows(const halrt_dispatch_state_t* dispatch,
                        const halrt_workgroup_state_t* workgroup,
                        int kernel_index, bool out_is_matrix,
                        hrt_range_body_t body) {
  if (!hrt_dispatch_matches(dispatch, kernel_index)) {
    return HALRT_KERNEL_INVALID_ARGUMENT;
  }
  const uint64_t rows = dispatch->constants[0];
  const uint64_t cols = dispatch->constants[1];
  const uint64_t out_cols = out_is_matrix ? cols : 1;
  if (!hrt_binding_holds(dispatch, 0, rows, cols, sizeof(float)) ||
      !hrt_binding_holds(dispatch, 1, rows, out_cols, sizeof(float))) {
    return HALRT_KERNEL_INVALID_ARGUMENT;
  }
  // No output elements (softmax with no columns): nothing to walk, however
  // many rows there are.
  if (hrt_mul_saturate(rows, out_cols) == 0) return HALRT_KERNEL_OK;
  const hrt_range_t range = hrt_linear_chunk(dispatch, workgroup, rows);
  if (range.begin < range.end) body(dispatch, range);
  return HALRT_KERNEL_OK;
}

enum {
  HRT_SUM_LANES = 8,    // independent partial sums, a multiple of 4
  HRT_SUM_BLOCK = 256,  // elements summed by lanes; larger runs are halved
};

// Pairwise over halves down to blocks summed in HRT_SUM_LANES interleaved
// partial sums: error grows with log2(n) rather than n, and the lanes are
// independent chains the compiler can keep in vector registers.
static float hrt_sum_f32(const float* x, size_t n) {
  if (n > HRT_SUM_BLOCK) {
    const size_t half =
        (n / 2 + HRT_SUM_LANES - 1) / HRT_SUM_LANES * HRT_SUM_LANES;
    return hrt_sum_f32(x, half) + hrt_sum_f32(x + half, n - half);
  }
  float lanes[HRT_SUM_LANES] = {0};
  size_t i = 0;
  for (; i + HRT_SUM_LANES <= n; i += HRT_SUM_LANES) {
    for (size_t j = 0; j < HRT_SUM_LANES; ++j) lanes[j] += x[i + j];
  }
  for (size_t j = 0; i < n; ++i, ++j) lanes[j] += x[i];
  for (size_t width = HRT_SUM_LANES / 2; width > 0; width /= 2) {
    for (size_t j = 0; j < width; ++j) lanes[j] += lanes[j + width];
  }
  return lanes[0];
}

// Row softmax, max-subtracted. Each element is read before its output is
// written, so `out` may be the same buffer as `x`.
static void hrt_softmax_rows_f32_body(const halrt_dispatch_state_t* dispatch,
                                      hrt_range_t range) {
  const size_t cols = dispatch->constants[1];
  for (size_t r = range.begin; r < range.end; ++r) {
    const float* x = (const float*)dispatch->bindings[0] + r * cols;
    float* out = (float*)dispatch->bindings[1] + r * cols;
    float max = -INFINITY;
    for (size_t j = 0; j < cols; ++j) max = hrt_fmaxf(max, x[j]);
    for (size_t j = 0; j < cols; ++j) out[j] = expf(x[j] - max);
    const float scale = 1.0f / hrt_sum_f32(out, cols);
    for (size_t j = 0; j < cols; ++j) out[j] *= scale;
  }
}

HRT_ROWS_KERNEL(softmax_rows_f32, true)

static void hrt_reduce_sum_f32_body(const halrt_dispatch_state_t* dispatch,
                                    hrt_range_t range) {
  const size_t cols = dispatch->constants[1];
  const float* x = dispatch->bindings[0];
  float* out = dispatch->bindings[1];
  for (size_t r = range.begin; r < range.end; ++r) {
    out[r] = hrt_sum_f32(x + r * cols, cols);
  }
}

HRT_ROWS_KERNEL(reduce_sum_f32, false)

//===----------------------------------------------------------------------===//
// matmul_f32
//===----------------------------------------------------------------------===//
//
// Blocked as in the classic packed GEMM, one driver for every micro-kernel.
// For each NC-column panel of b and each KC-deep slice of K, the panel's
// slice is packed once into NR-column strips (k-major, zero-padded); then,
// for each MR-row strip of a, an MR×NR micro-kernel keeps its tile of c in
// registers over the whole slice, once per strip of the panel. The x86
// micro-kernels read a in place, the portable one gets each strip packed
// k-major. Buffers live on the stack (about 37 KiB: worker threads have the
// default pthread stack) so that a kernel call allocates nothing.
//
// The micro-kernel, and with it MR×NR, is chosen once per process: on x86
// 8×32 with AVX-512F, else 6×16 with AVX2, both written with intrinsics;
// else 4×8 in portable C. The library is built for the baseline instruction
// set, so only the x86 micro-kernels are compiled for more (target
// attributes), and they run only where __builtin_cpu_supports says that the
// CPU and the OS allow.
//
// Each element of c adds up its K products in the same order whatever the
// grid and whichever micro-kernel runs (k order within a slice starting from
// +0, slices in order, each added as out + acc), and every product is
// rounded before it is added: no fused multiply-add (docs/kernels.md). So
// the result depends neither on the workgroup count nor on the micro-kernel.

enum {
  HRT_MATMUL_KC = 128,  // depth of one packed slice, the same for every tile
  HRT_MATMUL_NC = 64,   // columns of one packed panel of b, a multiple of NR
  // The register tiles, MR rows × NR columns, of the micro-kernels.
  HRT_MATMUL_PORTABLE_MR = 4,
  HRT_MATMUL_PORTABLE_NR = 8,
  HRT_MATMUL_AVX2_MR = 6,
  HRT_MATMUL_AVX2_NR = 16,
  HRT_MATMUL_AVX512_MR = 8,
  HRT_MATMUL_AVX512_NR = 32,
  HRT_MATMUL_MAX_MR = 8,
  HRT_MATMUL_MAX_NR = 32,
};

// Every NR divides NC and is a multiple of 8 (hrt_matmul_pack_b copies in
// pieces of 8), and no tile exceeds the scratch and edge buffers.
#define HRT_MATMUL_CHECK_TILE(mr, nr)                                      \
  _Static_assert((mr) <= HRT_MATMUL_MAX_MR && (nr) <= HRT_MATMUL_MAX_NR && \
                     HRT_MATMUL_NC % (nr) == 0 && (nr) % 8 == 0,           \
                 "matmul tile does not fit the blocking")
HRT_MATMUL_CHECK_TILE(HRT_MATMUL_PORTABLE_MR, HRT_MATMUL_PORTABLE_NR);
HRT_MATMUL_CHECK_TILE(HRT_MATMUL_AVX2_MR, HRT_MATMUL_AVX2_NR);
HRT_MATMUL_CHECK_TILE(HRT_MATMUL_AVX512_MR, HRT_MATMUL_AVX512_NR);

// out[MR×NR] (row stride ldo) = or += a[MR×kc] · packed_b over kc steps,
// packed_b being kc groups of NR. Row i of a holds a[i * lda + k], or
// a[k * MR + i] for a tile that packs a (lda is then unused).
typedef void (*hrt_matmul_micro_kernel_t)(const float* a, size_t lda,
                                          const float* packed_b, size_t kc,
                                          float* out, size_t ldo,
                                          bool accumulate);

// A micro-kernel and the shape of the register tile it computes.
typedef struct hrt_matmul_tile_t {
  size_t mr;  // rows
  size_t nr;  // columns
  // Whether each MR-row strip of a is packed k-major for the micro-kernel,
  // or read in place. In place saves the packing; packed suits the portable
  // kernel, which gcc -O3 otherwise vectorises along k with shuffles.
  bool packs_a;
  hrt_matmul_micro_kernel_t micro_kernel;
} hrt_matmul_tile_t;

// One row of the register tile: acc[i][g..g+4) += a[i] * b[g..g+4). The
// product and the sum are separate statements because C allows fusing them
// into a multiply-add only within one expression (C11 6.5p8), and clang,
// which fuses by default, turns the fused form at -O3 into a loop that
// spills its accumulators.
#define HRT_MATMUL_UPDATE_ROW(i)           \
  for (size_t j = 0; j < 4; ++j) {         \
    const float product = a[i] * b[g + j]; \
    acc[i][g + j] += product;              \
  }

// The portable micro-kernel. Rows are spelled out and columns go in 4-wide
// groups of fixed trip count, so that every accumulator index is a
// constant: the shape that both gcc (-O2 does not unroll a row loop) and
// clang keep in vector registers.
static void hrt_matmul_micro_kernel_portable(const float* packed_a, size_t lda,
                                             const float* packed_b, size_t kc,
                                             float* out, size_t ldo,
                                             bool accumulate) {
  (void)lda;
  enum { MR = HRT_MATMUL_PORTABLE_MR, NR = HRT_MATMUL_PORTABLE_NR };
  _Static_assert(MR == 4 && NR % 4 == 0, "one HRT_MATMUL_UPDATE_ROW per row");
  float acc[MR][NR] = {{0}};
  for (size_t k = 0; k < kc; ++k) {
    const float* a = packed_a + k * MR;
    const float* b = packed_b + k * NR;
    for (size_t g = 0; g < NR; g += 4) {
      HRT_MATMUL_UPDATE_ROW(0)
      HRT_MATMUL_UPDATE_ROW(1)
      HRT_MATMUL_UPDATE_ROW(2)
      HRT_MATMUL_UPDATE_ROW(3)
    }
  }
  for (size_t i = 0; i < MR; ++i) {
    for (size_t j = 0; j < NR; ++j) {
      out[i * ldo + j] = accumulate ? out[i * ldo + j] + acc[i][j] : acc[i][j];
    }
  }
}

static const hrt_matmul_tile_t hrt_matmul_tile_portable = {
    HRT_MATMUL_PORTABLE_MR, HRT_MATMUL_PORTABLE_NR, true,
    hrt_matmul_micro_kernel_portable};

#if HRT_MATMUL_X86

// Defines hrt_matmul_micro_kernel_<isa>, an mr×(vectors·lanes) micro-kernel
// reading a in place, and its tile hrt_matmul_tile_<isa>, from the
// intrinsics named <prefix>_*_ps on `vec` (lanes floats), compiled for the
// target `features` alone. Per k it loads the row of packed_b as `vectors`
// vectors and broadcasts each a[i][k]; the mr·vectors accumulators stay in
// registers once the pragmas have unrolled the loops of fixed trip count.
//
// The empty asm makes each product opaque, so no compiler can fuse it with
// the add that follows: AVX-512 implies FMA, and gcc in its GNU modes
// (-ffp-contract=fast) would otherwise contract the intrinsics, which are
// plain vector arithmetic, into vfmadd. It emits no instruction.
#define HRT_MATMUL_X86_MICRO_KERNEL(isa, features, prefix, vec, lanes, mr,     \
                                    vectors)                                   \
  __attribute__((target(features))) static void hrt_matmul_micro_kernel_##isa( \
      const float* a, size_t lda, const float* packed_b, size_t kc,            \
      float* out, size_t ldo, bool accumulate) {                               \
    vec acc[mr][vectors];                                                      \
    _Pragma("GCC unroll 8") for (size_t i = 0; i < (mr); ++i) {                \
      _Pragma("GCC unroll 2") for (size_t v = 0; v < (vectors); ++v) {         \
        acc[i][v] = prefix##_setzero_ps();                                     \
      }                                                                        \
    }                                                                          \
    for (size_t k = 0; k < kc; ++k) {                                          \
      vec b[vectors];                                                          \
      _Pragma("GCC unroll 2") for (size_t v = 0; v < (vectors); ++v) {         \
        b[v] = prefix##_loadu_ps(packed_b + (k * (vectors) + v) * (lanes));    \
      }                                                                        \
      _Pragma("GCC unroll 8") for (size_t i = 0; i < (mr); ++i) {              \
        const vec a_ik = prefix##_set1_ps(a[i * lda + k]);                     \
        _Pragma("GCC unroll 2") for (size_t v = 0; v < (vectors); ++v) {       \
          vec product = prefix##_mul_ps(a_ik, b[v]);                           \
          __asm__("" : "+v"(product));                                         \
          acc[i][v] = prefix##_add_ps(acc[i][v], product);                     \
        }                                                                      \
      }                                                                        \
    }                                                                          \
    _Pragma("GCC unroll 8") for (size_t i = 0; i < (mr); ++i) {                \
      _Pragma("GCC unroll 2") for (size_t v = 0; v < (vectors); ++v) {         \
        float* o = out + i * ldo + v * (lanes);                                \
        prefix##_storeu_ps(                                                    \
            o, accumulate ? prefix##_add_ps(prefix##_loadu_ps(o), acc[i][v])   \
                          : acc[i][v]);                                        \
      }                                                                        \
    }                                                                          \
  }                                                                            \
  static const hrt_matmul_tile_t hrt_matmul_tile_##isa = {                     \
      (mr), (vectors) * (lanes), false, hrt_matmul_micro_kernel_##isa};

HRT_MATMUL_X86_MICRO_KERNEL(avx2, "avx2", _mm256, __m256, 8, HRT_MATMUL_AVX2_MR,
                            HRT_MATMUL_AVX2_NR / 8)
HRT_MATMUL_X86_MICRO_KERNEL(avx512, "avx512f", _mm512, __m512, 16,
                            HRT_MATMUL_AVX512_MR, HRT_MATMUL_AVX512_NR / 16)
#endif  // HRT_MATMUL_X86

// Packs rows [0, m) × columns [0, kc) of `a` (row stride lda), m <= mr,
// k-major with mr values per k; rows past m are zero.
static void hrt_matmul_pack_a(const float* a, size_t lda, size_t m, size_t kc,
                              size_t mr, float* packed) {
  for (size_t i = 0; i < mr; ++i) {
    if (i < m) {
      for (size_t k = 0; k < kc; ++k) packed[k * mr + i] = a[i * lda + k];
    } else {
      for (size_t k = 0; k < kc; ++k) packed[k * mr + i] = 0.0f;
    }
  }
}

// Packs rows [0, kc) × columns [0, n) of `b` (row stride ldb) into nr-column
// strips, each k-major; columns past n in the last strip are zero. Full
// strips are copied in fixed 8-float pieces (every NR is a multiple of 8),
// which compilers turn into plain vector moves; a copy of runtime length
// would become a memcpy call per row.
static void hrt_matmul_pack_b(const float* b, size_t ldb, size_t kc, size_t n,
                              size_t nr, float* packed) {
  for (size_t strip = 0; strip < n; strip += nr) {
    float* dst = packed + strip * kc;
    const float* src = b + strip;
    if (n - strip >= nr) {
      for (size_t k = 0; k < kc; ++k) {
        for (size_t j = 0; j < nr; j += 8) {
          memcpy(dst + k * nr + j, src + k * ldb + j, 8 * sizeof(float));
        }
      }
      continue;
    }
    const size_t cols = n - strip;
    for (size_t k = 0; k < kc; ++k) {
      for (size_t j = 0; j < nr; ++j) {
        dst[k * nr + j] = j < cols ? src[k * ldb + j] : 0.0f;
      }
    }
  }
}

// c[rows × cols] (row stride ldc) = or += a[rows × kc] (row stride lda) ·
// packed_b. Each MR-row strip of a is packed for the micro-kernel or read in
// place, as the tile asks; a last strip with fewer than MR rows read in
// place is first copied above zero rows, so that the micro-kernel never
// reads past a. Tiles cut by an edge go through a scratch tile.
static void hrt_matmul_slice(const hrt_matmul_tile_t* tile, const float* a,
                             size_t lda, const float* packed_b, size_t kc,
                             size_t rows, size_t cols, float* c, size_t ldc,
                             bool accumulate) {
  const size_t mr = tile->mr, nr = tile->nr;
  for (size_t i = 0; i < rows; i += mr) {
    const size_t height = rows - i < mr ? rows - i : mr;
    const float* strip = a + i * lda;
    size_t ld_strip = lda;
    float copy[HRT_MATMUL_MAX_MR * HRT_MATMUL_KC];
    if (tile->packs_a) {
      hrt_matmul_pack_a(strip, lda, height, kc, mr, copy);
      strip = copy;
    } else if (height < mr) {
      memset(copy, 0, mr * kc * sizeof(float));
      for (size_t r = 0; r < height; ++r) {
        memcpy(copy + r * kc, strip + r * lda, kc * sizeof(float));
      }
      strip = copy;
      ld_strip = kc;
    }
    for (size_t j = 0; j < cols; j += nr) {
      const float* panel = packed_b + j * kc;
      const size_t width = cols - j < nr ? cols - j : nr;
      float* out = c + i * ldc + j;
      if (height == mr && width == nr) {
        tile->micro_kernel(strip, ld_strip, panel, kc, out, ldc, accumulate);
        continue;
      }
      float scratch[HRT_MATMUL_MAX_MR * HRT_MATMUL_MAX_NR];
      tile->micro_kernel(strip, ld_strip, panel, kc, scratch, nr, false);
      for (size_t r = 0; r < height; ++r) {
        for (size_t s = 0; s < width; ++s) {
          const float sum = scratch[r * nr + s];
          out[r * ldc + s] = accumulate ? out[r * ldc + s] + sum : sum;
        }
      }
    }
  }
}

// matmul_f32 with the micro-kernel of `tile`.
static int hrt_matmul_run(const halrt_dispatch_state_t* dispatch,
                          const halrt_workgroup_state_t* workgroup,
                          const hrt_matmul_tile_t* tile) {
  if (!hrt_dispatch_matches(dispatch, HRT_KERNEL_INDEX_matmul_f32) ||
      dispatch->workgroup_count[2] != 1) {
    return HALRT_KERNEL_INVALID_ARGUMENT;
  }
  const uint64_t m64 = dispatch->constants[0];
  const uint64_t k64 = dispatch->constants[1];
  const uint64_t n64 = dispatch->constants[2];
  if (!hrt_binding_holds(dispatch, 0, m64, k64, sizeof(float)) ||
      !hrt_binding_holds(dispatch, 1, k64, n64, sizeof(float)) ||
      !hrt_binding_holds(dispatch, 2, m64, n64, sizeof(float))) {
    return HALRT_KERNEL_INVALID_ARGUMENT;
  }
  const hrt_range_t cols =
      hrt_chunk(n64, dispatch->workgroup_count[0], workgroup->workgroup_id[0]);
  const hrt_range_t rows =
      hrt_chunk(m64, dispatch->workgroup_count[1], workgroup->workgroup_id[1]);
  if (cols.begin == cols.end || rows.begin == rows.end) return HALRT_KERNEL_OK;

  const size_t K = (size_t)k64, N = (size_t)n64;
  const float* a = (const float*)dispatch->bindings[0] + rows.begin * K;
  const float* b = (const float*)dispatch->bindings[1] + cols.begin;
  float* c = (float*)dispatch->bindings[2] + rows.begin * N + cols.begin;
  const size_t m = rows.end - rows.begin, n = cols.end - cols.begin;
  if (K == 0) {
    for (size_t i = 0; i < m; ++i) memset(c + i * N, 0, n * sizeof(float));
    return HALRT_KERNEL_OK;
  }

  float packed_b[HRT_MATMUL_KC * HRT_MATMUL_NC];
  for (size_t j = 0; j < n; j += HRT_MATMUL_NC) {
    const size_t nc = n - j < HRT_MATMUL_NC ? n - j : HRT_MATMUL_NC;
    for (size_t p = 0; p < K; p += HRT_MATMUL_KC) {
      const size_t kc = K - p < HRT_MATMUL_KC ? K - p : HRT_MATMUL_KC;
      hrt_matmul_pack_b(b + p * N + j, N, kc, nc, tile->nr, packed_b);
      hrt_matmul_slice(tile, a + p, K, packed_b, kc, m, nc, c + j, N, p > 0);
    }
  }
  return HALRT_KERNEL_OK;
}

// One kernel function per micro-kernel, so that tests can run each.
#define HRT_MATMUL_ISA_KERNEL(isa)                                      \
  static int hrt_kernel_matmul_f32_##isa(                               \
      const halrt_dispatch_state_t* dispatch,                           \
      const halrt_workgroup_state_t* workgroup) {                       \
    return hrt_matmul_run(dispatch, workgroup, &hrt_matmul_tile_##isa); \
  }
HRT_MATMUL_ISA_KERNEL(portable)
#if HRT_MATMUL_X86
HRT_MATMUL_ISA_KERNEL(avx2)
HRT_MATMUL_ISA_KERNEL(avx512)
#endif

halrt_kernel_fn_t hrt_local_builtin_matmul_f32_for_isa(hrt_builtin_isa_t isa) {
  switch (isa) {
    case HRT_BUILTIN_ISA_PORTABLE:
      return hrt_kernel_matmul_f32_portable;
#if HRT_MATMUL_X86
    // __builtin_cpu_supports checks that the OS saves the wider registers
    // too, not only that the CPU has the instructions. The compiler's
    // runtime fills in what it reads from a constructor, before any call.
    case HRT_BUILTIN_ISA_AVX2:
      return __builtin_cpu_supports("avx2") ? hrt_kernel_matmul_f32_avx2 : NULL;
    case HRT_BUILTIN_ISA_AVX512:
      return __builtin_cpu_supports("avx512f") ? hrt_kernel_matmul_f32_avx512
                                               : NULL;
#endif
    default:
      return NULL;
  }
}

static pthread_once_t hrt_matmul_once = PTHREAD_ONCE_INIT;
static halrt_kernel_fn_t hrt_matmul_best;

// The widest instruction set the CPU runs; the portable kernel always runs.
static void hrt_matmul_choose(void) {
  hrt_matmul_best =
      hrt_local_builtin_matmul_f32_for_isa(HRT_BUILTIN_ISA_AVX512);
  if (hrt_matmul_best == NULL) {
    hrt_matmul_best =
        hrt_local_builtin_matmul_f32_for_isa(HRT_BUILTIN_ISA_AVX2);
  }
  if (hrt_matmul_best == NULL) {
    hrt_matmul_best = hrt_kernel_matmul_f32_portable;
  }
}

static int hrt_kernel_matmul_f32(const halrt_dispatch_state_t* dispatch,
                                 const halrt_workgroup_state_t* workgroup) {
  pthread_once(&hrt_matmul_once, hrt_matmul_choose);
  return hrt_matmul_best(dispatch, workgroup);
}

//===----------------------------------------------------------------------===//
// bmm_f32: batched, strided matmul
//===----------------------------------------------------------------------===//

// Constants: batch, M, K, N, a strides (batch, row, k), b strides (batch,
// k, column); c is dense [batch, M, N]. Columns split over x, rows over y,
// batches over z. Each element is summed as matmul_f32 sums it (products
// rounded, k order within slices of HRT_MATMUL_KC from +0, slices added in
// order), so dense operands give matmul_f32's bits.
static int hrt_kernel_bmm_f32(const halrt_dispatch_state_t* dispatch,
                              const halrt_workgroup_state_t* workgroup) {
  if (!hrt_dispatch_matches(dispatch, HRT_KERNEL_INDEX_bmm_f32)) {
    return HALRT_KERNEL_INVALID_ARGUMENT;
  }
  const uint32_t* k = dispatch->constants;
  const uint32_t batch_a[3] = {k[0], k[1], k[2]};  // batch, M, K
  const uint32_t batch_b[3] = {k[0], k[2], k[3]};  // batch, K, N
  uint32_t dims_a[HRT_ND] = {1, 1, 1, batch_a[0], batch_a[1], batch_a[2]};
  uint32_t dims_b[HRT_ND] = {1, 1, 1, batch_b[0], batch_b[1], batch_b[2]};
  uint32_t strides_a[HRT_ND] = {0, 0, 0, k[4], k[5], k[6]};
  uint32_t strides_b[HRT_ND] = {0, 0, 0, k[7], k[8], k[9]};
  const uint64_t batch = k[0], M = k[1], K = k[2], N = k[3];
  const uint64_t c_rows = hrt_mul_saturate(batch, M);
  if (!hrt_binding_holds(dispatch, 0, hrt_strided_extent(dims_a, strides_a), 1,
                         4) ||
      !hrt_binding_holds(dispatch, 1, hrt_strided_extent(dims_b, strides_b), 1,
                         4) ||
      !hrt_binding_holds(dispatch, 2, c_rows, N, 4)) {
    return HALRT_KERNEL_INVALID_ARGUMENT;
  }
  const float* a = dispatch->bindings[0];
  const float* b = dispatch->bindings[1];
  float* c = dispatch->bindings[2];
  const hrt_range_t cols =
      hrt_chunk(N, dispatch->workgroup_count[0], workgroup->workgroup_id[0]);
  const hrt_range_t rows =
      hrt_chunk(M, dispatch->workgroup_count[1], workgroup->workgroup_id[1]);
  const hrt_range_t batches =
      hrt_chunk(batch, dispatch->workgroup_count[2], workgroup->workgroup_id[2]);
  for (size_t z = batches.begin; z < batches.end; ++z) {
    for (size_t i = rows.begin; i < rows.end; ++i) {
      const float* a_row = a + z * k[4] + i * k[5];
      for (size_t j = cols.begin; j < cols.end; ++j) {
        const float* b_col = b + z * k[7] + j * k[9];
        float total = 0.0f;
        for (size_t p = 0; p < K; p += HRT_MATMUL_KC) {
          const size_t end = K - p < HRT_MATMUL_KC ? K : p + HRT_MATMUL_KC;
          float acc = 0.0f;
          for (size_t q = p; q < end; ++q) {
            const float product = a_row[q * k[6]] * b_col[q * k[8]];
            acc += product;
          }
          total = p == 0 ? acc : total + acc;
        }
        c[(z * M + i) * N + j] = total;
      }
    }
  }
  return HALRT_KERNEL_OK;
}
