// halrt CPU kernel ABI, version 1.
//
// A CPU kernel library is a shared object exporting one C symbol:
//
//   const halrt_kernel_library_t* halrt_kernel_library_query(
//       uint32_t max_abi_version);
//
// halrt calls it once when the library is loaded, passing the newest ABI
// version it understands; the library returns a table describing its kernels
// (with `abi_version` <= max_abi_version), or NULL if it cannot serve that
// version. The table and the strings in it must stay valid until the library
// is unloaded. The built-in kernels compiled into halrt use this same ABI.
//
// A dispatch means the same thing on every device: a grid of workgroups
// (CUDA: grid), each of `workgroup_size` invocations (CUDA: block), bindings
// (device pointers on CUDA, host pointers here) then 32-bit constants (CUDA:
// kernel parameters in that order). On the CPU, halrt calls the kernel once
// per workgroup, possibly concurrently from several worker threads and in any
// order; a kernel loops over its workgroup's invocations itself.
//
// Failure: a kernel reports a bad call by returning a code (below), which
// fails only that submission. A kernel runs in the calling process, with no
// isolation: a crash in it (a segfault, an abort, a stack overflow) ends the
// whole process, Node included, and a stray write corrupts it. Unlike a CUDA
// fault, it cannot be caught and turned into DEVICE_LOST. A kernel must stay
// within `binding_lengths` and never trap.
//
// Layout choices: only fixed-width fields and pointers, naturally aligned, no
// bitfields and no enums in structs, so that the layout is the same for every
// C compiler on one platform; sizes are asserted below for 64-bit targets.
// New fields are only ever added at the end with a new ABI version.
#ifndef HALRT_CPU_KERNEL_H_
#define HALRT_CPU_KERNEL_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HALRT_KERNEL_ABI_VERSION 1u
#define HALRT_KERNEL_LIBRARY_QUERY_SYMBOL "halrt_kernel_library_query"

// Kernel return codes. Anything else is a kernel-defined failure code; halrt
// fails the submission with ABORTED and a message naming the kernel and code.
#define HALRT_KERNEL_OK 0
// The bindings or constants do not describe a valid call (for example a
// binding shorter than the constants imply). Reported as INVALID_ARGUMENT.
#define HALRT_KERNEL_INVALID_ARGUMENT 1

// Read-only for the kernel; the same object for every workgroup of one
// dispatch.
typedef struct halrt_dispatch_state_t {
  uint32_t workgroup_count[3];  // grid size, each >= 1
  uint32_t workgroup_size[3];   // invocations per workgroup, each >= 1
  uint32_t constant_count;
  uint32_t binding_count;
  const uint32_t* constants;      // [constant_count]
  void* const* bindings;          // [binding_count], host pointers
  const size_t* binding_lengths;  // [binding_count], in bytes
} halrt_dispatch_state_t;

typedef struct halrt_workgroup_state_t {
  uint32_t workgroup_id[3];  // 0 <= id[i] < workgroup_count[i]
  uint32_t worker_id;        // 0 <= worker_id < number of worker threads
} halrt_workgroup_state_t;

typedef int (*halrt_kernel_fn_t)(const halrt_dispatch_state_t* dispatch,
                                 const halrt_workgroup_state_t* workgroup);

typedef struct halrt_kernel_entry_t {
  const char* name;  // unique within the library, e.g. "add_f32"
  halrt_kernel_fn_t fn;
  uint32_t binding_count;   // exact number of bindings the kernel takes
  uint32_t constant_count;  // exact number of 32-bit constants
} halrt_kernel_entry_t;

typedef struct halrt_kernel_library_t {
  uint32_t abi_version;  // HALRT_KERNEL_ABI_VERSION the table follows
  uint32_t kernel_count;
  const char* name;                     // for messages
  const halrt_kernel_entry_t* kernels;  // [kernel_count]
} halrt_kernel_library_t;

typedef const halrt_kernel_library_t* (*halrt_kernel_library_query_fn_t)(
    uint32_t max_abi_version);

#if defined(__x86_64__) || defined(__aarch64__)
_Static_assert(sizeof(halrt_dispatch_state_t) == 56,
               "halrt_dispatch_state_t layout changed");
_Static_assert(sizeof(halrt_workgroup_state_t) == 16,
               "halrt_workgroup_state_t layout changed");
_Static_assert(sizeof(halrt_kernel_entry_t) == 24,
               "halrt_kernel_entry_t layout changed");
_Static_assert(sizeof(halrt_kernel_library_t) == 24,
               "halrt_kernel_library_t layout changed");
#endif

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // HALRT_CPU_KERNEL_H_
