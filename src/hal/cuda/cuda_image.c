#include "hal/cuda/cuda_image.h"

#include <stdbool.h>
#include <stdint.h>

// Little-endian fields, read byte by byte: the image need not be aligned
// and the host's byte order does not matter.
static uint64_t hrt_cuda_image_read(const uint8_t* bytes, size_t size) {
  uint64_t value = 0;
  for (size_t i = size; i > 0; --i) value = (value << 8) | bytes[i - 1];
  return value;
}

// Whether `count` items of `size` bytes from `offset` end within `length`
// (no overflow: count and size are 16-bit, or count is 1).
static bool hrt_cuda_image_fits(uint64_t offset, uint64_t count, uint64_t size,
                                size_t length) {
  return offset <= length && count * size <= length - offset;
}

// ELF64 header fields (System V ABI) that locate the rest of the file.
enum {
  HRT_ELF_HEADER_SIZE = 64,
  HRT_ELF_CLASS = 4,  // 2: 64-bit
  HRT_ELF_DATA = 5,   // 1: little-endian
  HRT_ELF_PHOFF = 0x20,
  HRT_ELF_SHOFF = 0x28,
  HRT_ELF_PHENTSIZE = 0x36,
  HRT_ELF_PHNUM = 0x38,
  HRT_ELF_SHENTSIZE = 0x3A,
  HRT_ELF_SHNUM = 0x3C,
  HRT_ELF_PROGRAM_HEADER_SIZE = 56,
  HRT_ELF_SECTION_HEADER_SIZE = 64,
  HRT_ELF_SECTION_TYPE = 4,
  HRT_ELF_SECTION_OFFSET = 0x18,
  HRT_ELF_SECTION_SIZE = 0x20,
  HRT_ELF_SECTION_NOBITS = 8,  // occupies no bytes of the file (.bss)
};

// A header table of `count` entries of `entry_size` (at least
// `minimum_size`) bytes at `offset` must lie inside the image.
static hrt_status_t hrt_cuda_image_check_table(const char* kind,
                                               uint64_t offset, uint64_t count,
                                               uint64_t entry_size,
                                               uint64_t minimum_size,
                                               size_t length) {
  if (count == 0 || (entry_size >= minimum_size &&
                     hrt_cuda_image_fits(offset, count, entry_size, length))) {
    return HRT_OK;
  }
  return hrt_status_make(
      HRT_STATUS_INVALID_ARGUMENT,
      "cubin image of %zu bytes: its %s header table (%llu entries of %llu "
      "bytes at offset %llu) does not fit in it",
      length, kind, (unsigned long long)count, (unsigned long long)entry_size,
      (unsigned long long)offset);
}

hrt_status_t hrt_cuda_image_check_cubin(const void* data, size_t length) {
  const uint8_t* bytes = data;
  if (length < HRT_ELF_HEADER_SIZE) {
    return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                           "cubin image is %zu bytes, too short for an ELF "
                           "header (64 bytes)",
                           length);
  }
  if (bytes[0] != 0x7f || bytes[1] != 'E' || bytes[2] != 'L' ||
      bytes[3] != 'F') {
    return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                           "cubin image does not start with the ELF magic "
                           "(7f 45 4c 46)");
  }
  if (bytes[HRT_ELF_CLASS] != 2 || bytes[HRT_ELF_DATA] != 1) {
    return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                           "cubin image is ELF class %u, data encoding %u; a "
                           "cubin is 64-bit (2) little-endian (1)",
                           bytes[HRT_ELF_CLASS], bytes[HRT_ELF_DATA]);
  }
  const uint64_t shoff = hrt_cuda_image_read(bytes + HRT_ELF_SHOFF, 8);
  const uint64_t shentsize = hrt_cuda_image_read(bytes + HRT_ELF_SHENTSIZE, 2);
  const uint64_t shnum = hrt_cuda_image_read(bytes + HRT_ELF_SHNUM, 2);
  HRT_RETURN_IF_ERROR(hrt_cuda_image_check_table(
      "section", shoff, shnum, shentsize, HRT_ELF_SECTION_HEADER_SIZE, length));
  HRT_RETURN_IF_ERROR(hrt_cuda_image_check_table(
      "program", hrt_cuda_image_read(bytes + HRT_ELF_PHOFF, 8),
      hrt_cuda_image_read(bytes + HRT_ELF_PHNUM, 2),
      hrt_cuda_image_read(bytes + HRT_ELF_PHENTSIZE, 2),
      HRT_ELF_PROGRAM_HEADER_SIZE, length));
  for (uint64_t i = 0; i < shnum; ++i) {
    const uint8_t* section = bytes + shoff + i * shentsize;
    if (hrt_cuda_image_read(section + HRT_ELF_SECTION_TYPE, 4) ==
        HRT_ELF_SECTION_NOBITS) {
      continue;
    }
    const uint64_t offset =
        hrt_cuda_image_read(section + HRT_ELF_SECTION_OFFSET, 8);
    const uint64_t size =
        hrt_cuda_image_read(section + HRT_ELF_SECTION_SIZE, 8);
    if (!hrt_cuda_image_fits(offset, 1, size, length)) {
      return hrt_status_make(
          HRT_STATUS_INVALID_ARGUMENT,
          "cubin image of %zu bytes: section %llu (%llu bytes at offset %llu) "
          "does not fit in it",
          length, (unsigned long long)i, (unsigned long long)size,
          (unsigned long long)offset);
    }
  }
  return HRT_OK;
}

// Fat binary header: u32 magic, u16 version, u16 header size, u64 fat size
// (the bytes of entries that follow the header).
enum {
  HRT_FATBIN_MAGIC = 0xBA55ED50u,
  HRT_FATBIN_HEADER_SIZE = 16,
};

hrt_status_t hrt_cuda_image_check_fatbin(const void* data, size_t length) {
  const uint8_t* bytes = data;
  if (length < HRT_FATBIN_HEADER_SIZE) {
    return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                           "fatbin image is %zu bytes, too short for a fat "
                           "binary header (16 bytes)",
                           length);
  }
  const uint64_t magic = hrt_cuda_image_read(bytes, 4);
  if (magic != HRT_FATBIN_MAGIC) {
    return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                           "fatbin image starts with 0x%08llX, not the fat "
                           "binary magic 0xBA55ED50",
                           (unsigned long long)magic);
  }
  const uint64_t header_size = hrt_cuda_image_read(bytes + 6, 2);
  const uint64_t fat_size = hrt_cuda_image_read(bytes + 8, 8);
  if (header_size < HRT_FATBIN_HEADER_SIZE ||
      !hrt_cuda_image_fits(header_size, 1, fat_size, length)) {
    return hrt_status_make(
        HRT_STATUS_INVALID_ARGUMENT,
        "fatbin image of %zu bytes: its header (%llu bytes) and contents "
        "(%llu bytes) do not fit in it",
        length, (unsigned long long)header_size, (unsigned long long)fat_size);
  }
  return HRT_OK;
}
