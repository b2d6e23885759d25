// Whole files that a user names, read by the runtime itself (kernel images a
// module refers to) or checked before another component opens them (kernel
// libraries handed to dlopen).
//
// The rule, the same as lib/files.js applies in JavaScript: only a regular
// file, of at most a size cap the caller states. A character device such as
// /dev/zero never ends, a FIFO blocks whoever opens it until a writer comes,
// and a directory has no bytes: reading any of them "whole" hangs the caller
// or exhausts memory, so they are refused by name before anything is read.
//
// Errors name the path: NOT_FOUND when it cannot be stat'ed or opened (with
// the system's reason), INVALID_ARGUMENT when it is not a regular file (with
// what it is), RESOURCE_EXHAUSTED when it is larger than the cap (with its
// size and the cap), DATA_LOSS when reading fails or the file shrinks while
// being read. No shared state: callable from any thread.
#ifndef HRT_BASE_FILE_H_
#define HRT_BASE_FILE_H_

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

// Checks that `path` is a regular file of at most `max_bytes` without opening
// it. `what` names the file's role in the size message ("a kernel image").
// Only as good as the moment it runs: use hrt_file_read to read.
hrt_status_t hrt_file_check(const char* path, uint64_t max_bytes,
                            const char* what) HRT_MUST_USE;

// Reads regular file `path` of at most `max_bytes` (< SIZE_MAX) into a new
// malloc'ed buffer followed by one NUL byte (text can be used as a C
// string), which the caller frees. The path is checked first so that a device
// or FIFO is never opened; the file is then opened non-blocking and checked
// again through fstat on the descriptor, and exactly the size fstat gave is
// read, so a path swapped between the two checks cannot slip past.
hrt_status_t hrt_file_read(const char* path, uint64_t max_bytes,
                           const char* what, char** out_data,
                           size_t* out_length) HRT_MUST_USE;

#endif  // HRT_BASE_FILE_H_
