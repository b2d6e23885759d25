// Checks of a cubin or fatbin image's header before the driver sees it.
//
// cuModuleLoadDataEx takes no length: the driver trusts the image's own
// headers to say how far to read. A truncated file or one of another kind
// would be read past its end, so halrt checks that the headers describe an
// image of at most the bytes it was given:
//   cubin   an ELF header (64 bytes, "\x7f" "ELF", 64-bit, little-endian)
//           whose section and program header tables, and every section
//           with file contents, lie inside the image;
//   fatbin  a fat binary header (magic 0xBA55ED50, header size >= 16) whose
//           header size plus its fat size (the bytes after the header)
//           lie inside the image.
// Anything else is INVALID_ARGUMENT naming the format and what is wrong.
// The contents (machine code, the fatbin's entries) are the driver's to
// check.
//
// Pure functions of the bytes; any thread.
#ifndef HRT_HAL_CUDA_CUDA_IMAGE_H_
#define HRT_HAL_CUDA_CUDA_IMAGE_H_

#include <stddef.h>

#include "base/status.h"

hrt_status_t hrt_cuda_image_check_cubin(const void* data, size_t length)
    HRT_MUST_USE;
hrt_status_t hrt_cuda_image_check_fatbin(const void* data, size_t length)
    HRT_MUST_USE;

#endif  // HRT_HAL_CUDA_CUDA_IMAGE_H_
