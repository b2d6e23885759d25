// The on-disk kernel cache: what NVRTC made from a CUDA source, kept so that
// loading the same source again (in this process or another) compiles
// nothing.
//
// Key. Everything that decides NVRTC's output, written out as "key
// material": the source name and text, the user's options in order, the
// name expressions in order, the compiler (hrt_nvrtc_t.identity: NVRTC's
// version and the loaded file's path, size and modification time) and the
// target option (--gpu-architecture=sm_90 or compute_90), and the path and
// text of every header the source includes from disk (cuda_includes.h; a
// source whose includes cannot all be followed is never cached). The
// entry's file name is a 64-bit FNV-1a hash of the material in hex
// (<hash>.kernel).
//
// Folder: $HALRT_CACHE_DIR, else $XDG_CACHE_HOME/halrt/kernels, else
// $HOME/.cache/halrt/kernels (an empty variable counts as unset); missing
// folders are created with mode 0700.
//
// Entry file: a header (magic, lengths, PTX or cubin, lowered-name count),
// the full key material, the image, the lowered names, and a checksum
// (FNV-1a 64) of everything before it. A read compares the material byte
// for byte and checks sizes and checksum, so a hash collision, a truncated
// or corrupt entry, or one from another version is a miss, never wrong
// code. Only an entry that this user could have written is read: one that
// is a symbolic link, not a regular file, owned by another user or writable
// by group or others is a miss (keys are predictable, so anyone able to
// place a file under the entry's name could otherwise choose the code).
// Entries are written (mode 0600) to a temporary file in the same folder and
// renamed over the entry, so readers see a whole entry or none; a write that
// fails removes its temporary file.
//
// No shared state: any thread. Failures to read or write are misses, not
// errors: a cache that cannot be used never stops a compile.
#ifndef HRT_HAL_CUDA_CUDA_KERNEL_CACHE_H_
#define HRT_HAL_CUDA_CUDA_KERNEL_CACHE_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "hal/cuda/cuda_includes.h"
#include "hal/cuda/cuda_nvrtc.h"

typedef struct hrt_cuda_kernel_cache_key_s {
  char* material;  // heap; [length]
  size_t length;
  uint64_t hash;
} hrt_cuda_kernel_cache_key_t;

// Builds the key for one compile. Release with
// hrt_cuda_kernel_cache_key_deinitialize.
hrt_status_t hrt_cuda_kernel_cache_key_initialize(
    const char* source_name, const char* source, size_t source_length,
    uint32_t option_count, const char* const* options,
    uint32_t expression_count, const char* const* expressions,
    const char* compiler, const char* target_option,
    const hrt_cuda_includes_t* includes,
    hrt_cuda_kernel_cache_key_t* out_key) HRT_MUST_USE;
void hrt_cuda_kernel_cache_key_deinitialize(hrt_cuda_kernel_cache_key_t* key);

// The cache folder (see above), created where missing, as a new heap
// string. UNAVAILABLE when no variable names one or it cannot be created.
hrt_status_t hrt_cuda_kernel_cache_directory(char** out_directory) HRT_MUST_USE;

// The entry's path in `directory`, as a new heap string.
hrt_status_t hrt_cuda_kernel_cache_entry_path(
    const char* directory, const hrt_cuda_kernel_cache_key_t* key,
    char** out_path) HRT_MUST_USE;

// The cached output for `key` (free() it), or false on a miss (no entry, an
// unreadable or untrusted one, or one that does not match `key` in every
// byte).
bool hrt_cuda_kernel_cache_load(const char* directory,
                                const hrt_cuda_kernel_cache_key_t* key,
                                hrt_nvrtc_output_t** out_output);

// Writes `output` as the entry for `key`, atomically. The status says why
// it could not be written (callers may ignore it).
hrt_status_t hrt_cuda_kernel_cache_store(
    const char* directory, const hrt_cuda_kernel_cache_key_t* key,
    const hrt_nvrtc_output_t* output) HRT_MUST_USE;

#endif  // HRT_HAL_CUDA_CUDA_KERNEL_CACHE_H_
