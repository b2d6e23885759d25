// Run-time loading of shared libraries (dlopen).
//
// A library that cannot be opened is UNAVAILABLE (libcuda missing means "no
// CUDA", not a bug); a missing symbol is NOT_FOUND. Both name the path or
// symbol and carry the loader's own message.
#ifndef HRT_BASE_DYNLIB_H_
#define HRT_BASE_DYNLIB_H_

#include "base/status.h"

typedef struct hrt_dynlib_s hrt_dynlib_t;

// Opens the first of `paths[0..count)` that loads (RTLD_NOW | RTLD_LOCAL).
// A path with a '/' that exists but is not a regular file (a FIFO, on which
// dlopen would wait forever, a folder, a device) is not opened and fails
// with the reason. The error lists every path tried.
hrt_status_t hrt_dynlib_open(const char* const* paths, int count,
                             hrt_dynlib_t** out_library) HRT_MUST_USE;
hrt_status_t hrt_dynlib_symbol(hrt_dynlib_t* library, const char* name,
                               void** out_symbol) HRT_MUST_USE;
// The address of `name` in `library`, or NULL when it has none (for tables
// of optional entry points; hrt_dynlib_symbol says why).
void* hrt_dynlib_find(hrt_dynlib_t* library, const char* name);
// The path that was opened. Borrowed.
const char* hrt_dynlib_path(const hrt_dynlib_t* library);
void hrt_dynlib_close(hrt_dynlib_t* library);

// Keeps the shared object that contains `address` mapped until the process
// exits, whatever dlclose calls follow (RTLD_NODELETE). Threads of a library
// may outlive the last user that would otherwise unload it (Node unloads an
// addon with its last environment); pinned, their code stays mapped. Any
// thread; idempotent. INTERNAL when the object cannot be found or pinned.
hrt_status_t hrt_dynlib_pin_containing(const void* address) HRT_MUST_USE;

#endif  // HRT_BASE_DYNLIB_H_
