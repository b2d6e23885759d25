// A user kernel library for the loader tests, built once per VARIANT_* macro:
// GOOD follows the ABI; each other variant breaks one rule of it.
#include <math.h>
#include <stdint.h>

#include "halrt/cpu_kernel.h"

// out[i] = in[i] * constants[1] for n = constants[0] elements (u32), split
// over the workgroups along x.
static int scale_u32(const halrt_dispatch_state_t* dispatch,
                     const halrt_workgroup_state_t* workgroup) {
  uint32_t n = dispatch->constants[0];
  if (dispatch->binding_lengths[0] < n * 4ull ||
      dispatch->binding_lengths[1] < n * 4ull) {
    return HALRT_KERNEL_INVALID_ARGUMENT;
  }
  const uint32_t* in = dispatch->bindings[0];
  uint32_t* out = dispatch->bindings[1];
  uint32_t groups = dispatch->workgroup_count[0];
  uint32_t chunk = (n + groups - 1) / groups;
  uint32_t begin = workgroup->workgroup_id[0] * chunk;
  for (uint32_t i = begin; i < n && i < begin + chunk; ++i) {
    out[i] = in[i] * dispatch->constants[1];
  }
  return HALRT_KERNEL_OK;
}

// Fails with the code in constants[0] on workgroup constants[1].
static int fail_on(const halrt_dispatch_state_t* dispatch,
                   const halrt_workgroup_state_t* workgroup) {
  return workgroup->workgroup_id[0] == dispatch->constants[1]
             ? (int)dispatch->constants[0]
             : HALRT_KERNEL_OK;
}

// out[g] = worker_id + 1 for the linear workgroup id g, after spinning for
// about a millisecond so that every worker gets a share.
static int worker_ids(const halrt_dispatch_state_t* dispatch,
                      const halrt_workgroup_state_t* workgroup) {
  const uint32_t* count = dispatch->workgroup_count;
  const uint32_t* id = workgroup->workgroup_id;
  uint64_t g =
      id[0] + (uint64_t)count[0] * (id[1] + (uint64_t)count[1] * id[2]);
  if (dispatch->binding_lengths[0] < (g + 1) * 4) {
    return HALRT_KERNEL_INVALID_ARGUMENT;
  }
  for (volatile uint32_t spin = 0; spin < 1000000; ++spin) {
  }
  ((uint32_t*)dispatch->bindings[0])[g] = workgroup->worker_id + 1;
  return HALRT_KERNEL_OK;
}

// binding[0] word 0 = constants[0], stored with release order: a test thread
// that loads it with acquire order sees every command before the dispatch.
static int store_release_u32(const halrt_dispatch_state_t* dispatch,
                             const halrt_workgroup_state_t* workgroup) {
  (void)workgroup;
  if (dispatch->binding_lengths[0] < 4) return HALRT_KERNEL_INVALID_ARGUMENT;
  __atomic_store_n((uint32_t*)dispatch->bindings[0], dispatch->constants[0],
                   __ATOMIC_RELEASE);
  return HALRT_KERNEL_OK;
}

// The built-in add_f32 (a, b, out; n), except that element n - 1 comes out
// one ULP above a + b: a planted divergence for halrt.compare's tests
// (test/compare.test.js).
static int add_f32(const halrt_dispatch_state_t* dispatch,
                   const halrt_workgroup_state_t* workgroup) {
  uint32_t n = dispatch->constants[0];
  for (uint32_t b = 0; b < 3; ++b) {
    if (dispatch->binding_lengths[b] < n * 4ull) {
      return HALRT_KERNEL_INVALID_ARGUMENT;
    }
  }
  const float* x = dispatch->bindings[0];
  const float* y = dispatch->bindings[1];
  float* out = dispatch->bindings[2];
  uint32_t groups = dispatch->workgroup_count[0];
  uint32_t chunk = (n + groups - 1) / groups;
  uint32_t begin = workgroup->workgroup_id[0] * chunk;
  for (uint32_t i = begin; i < n && i < begin + chunk; ++i) {
    out[i] = x[i] + y[i];
    if (i == n - 1) out[i] = nextafterf(out[i], INFINITY);
  }
  return HALRT_KERNEL_OK;
}

static const halrt_kernel_entry_t kernels[] = {
    {"worker_ids", worker_ids, 1, 0},
    {"store_release_u32", store_release_u32, 1, 1},
    {"scale_u32", scale_u32, 2, 2},
    {"add_f32", add_f32, 3, 1},
#if defined(VARIANT_DUPLICATE_NAMES)
    {"scale_u32", fail_on, 0, 2},
#else
    {"fail_on", fail_on, 0, 2},
#endif
};

static const halrt_kernel_library_t library = {
#if defined(VARIANT_BAD_ABI)
    .abi_version = HALRT_KERNEL_ABI_VERSION + 1,
#else
    .abi_version = HALRT_KERNEL_ABI_VERSION,
#endif
    .kernel_count = sizeof(kernels) / sizeof(kernels[0]),
    .name = "test-kernels",
    .kernels = kernels,
};

#if !defined(VARIANT_NO_QUERY)
__attribute__((visibility("default"))) const halrt_kernel_library_t*
halrt_kernel_library_query(uint32_t max_abi_version) {
#if defined(VARIANT_NULL_TABLE)
  (void)max_abi_version;
  (void)&library;
  return 0;
#else
  return max_abi_version >= 1 ? &library : 0;
#endif
}
#else
// Exports something else so the library still loads.
__attribute__((visibility("default"))) const halrt_kernel_library_t*
halrt_other_symbol(void) {
  return &library;
}
#endif
