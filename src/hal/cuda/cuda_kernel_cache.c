#include "hal/cuda/cuda_kernel_cache.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/alloc.h"

// The largest entry a read accepts: larger files are not ours.
#define HRT_KERNEL_CACHE_MAX_ENTRY_BYTES (UINT64_C(1) << 30)

static const char hrt_kernel_cache_magic[8] = {'H', 'A', 'L', 'R',
                                               'T', 'K', 'C', '1'};

typedef struct hrt_kernel_cache_header_s {
  char magic[8];
  uint64_t key_length;
  uint64_t image_length;
  uint64_t names_length;
  uint32_t cubin;
  uint32_t lowered_count;
} hrt_kernel_cache_header_t;

static uint64_t hrt_fnv1a(uint64_t hash, const void* data, size_t length) {
  const unsigned char* bytes = data;
  for (size_t i = 0; i < length; ++i) {
    hash = (hash ^ bytes[i]) * UINT64_C(0x100000001b3);
  }
  return hash;
}
#define HRT_FNV1A_SEED UINT64_C(0xcbf29ce484222325)

// A growing byte buffer for the key material.
typedef struct hrt_bytes_s {
  char* data;
  size_t length;
  size_t capacity;
} hrt_bytes_t;

static hrt_status_t hrt_bytes_append(hrt_bytes_t* bytes, const void* data,
                                     size_t length) {
  if (bytes->capacity - bytes->length < length) {
    size_t capacity = bytes->capacity ? bytes->capacity : 256;
    while (capacity - bytes->length < length) capacity *= 2;
    char* grown = realloc(bytes->data, capacity);
    if (!grown) {
      return hrt_status_make(HRT_STATUS_RESOURCE_EXHAUSTED,
                             "out of host memory for a kernel cache key");
    }
    bytes->data = grown;
    bytes->capacity = capacity;
  }
  memcpy(bytes->data + bytes->length, data, length);
  bytes->length += length;
  return HRT_OK;
}

// "<label> <length>\n<bytes>\n": lengths make the material unambiguous.
static hrt_status_t hrt_bytes_append_field(hrt_bytes_t* bytes,
                                           const char* label, const char* data,
                                           size_t length) {
  char prefix[64];
  int n = snprintf(prefix, sizeof(prefix), "%s %zu\n", label, length);
  HRT_RETURN_IF_ERROR(hrt_bytes_append(bytes, prefix, (size_t)n));
  HRT_RETURN_IF_ERROR(hrt_bytes_append(bytes, data, length));
  return hrt_bytes_append(bytes, "\n", 1);
}

hrt_status_t hrt_cuda_kernel_cache_key_initialize(
    const char* source_name, const char* source, size_t source_length,
    uint32_t option_count, const char* const* options,
    uint32_t expression_count, const char* const* expressions,
    const char* compiler, const char* target_option,
    const hrt_cuda_includes_t* includes,
    hrt_cuda_kernel_cache_key_t* out_key) {
  hrt_bytes_t bytes = {NULL, 0, 0};
  static const char header[] = "halrt kernel cache key 3\n";
  hrt_status_t status = hrt_bytes_append(&bytes, header, sizeof(header) - 1);
  if (status == HRT_OK) {
    status =
        hrt_bytes_append_field(&bytes, "compiler", compiler, strlen(compiler));
  }
  if (status == HRT_OK) {
    status = hrt_bytes_append_field(&bytes, "target", target_option,
                                    strlen(target_option));
  }
  for (uint32_t i = 0; i < option_count && status == HRT_OK; ++i) {
    status = hrt_bytes_append_field(&bytes, "option", options[i],
                                    strlen(options[i]));
  }
  for (uint32_t i = 0; i < expression_count && status == HRT_OK; ++i) {
    status = hrt_bytes_append_field(&bytes, "expression", expressions[i],
                                    strlen(expressions[i]));
  }
  if (status == HRT_OK) {
    status = hrt_bytes_append_field(&bytes, "name", source_name,
                                    strlen(source_name));
  }
  if (status == HRT_OK) {
    status = hrt_bytes_append_field(&bytes, "source", source, source_length);
  }
  for (uint32_t i = 0; i < includes->count && status == HRT_OK; ++i) {
    const hrt_cuda_include_t* file = &includes->files[i];
    status = hrt_bytes_append_field(&bytes, "header", file->path,
                                    strlen(file->path));
    if (status == HRT_OK) {
      status = hrt_bytes_append_field(&bytes, "header text", file->text,
                                      file->length);
    }
  }
  if (status != HRT_OK) {
    free(bytes.data);
    return status;
  }
  *out_key = (hrt_cuda_kernel_cache_key_t){
      bytes.data, bytes.length,
      hrt_fnv1a(HRT_FNV1A_SEED, bytes.data, bytes.length)};
  return HRT_OK;
}

void hrt_cuda_kernel_cache_key_deinitialize(hrt_cuda_kernel_cache_key_t* key) {
  free(key->material);
  key->material = NULL;
}

// mkdir -p with mode 0700 for the folders it creates.
static hrt_status_t hrt_make_directories(char* path) {
  for (char* p = path + 1;; ++p) {
    if (*p != '/' && *p != 0) continue;
    const char saved = *p;
    *p = 0;
    int failed = mkdir(path, 0700) != 0 && errno != EEXIST;
    int error = errno;
    *p = saved;
    if (failed) {
      return hrt_status_make(HRT_STATUS_UNAVAILABLE,
                             "cannot create kernel cache folder '%s': %s", path,
                             strerror(error));
    }
    if (saved == 0) return HRT_OK;
  }
}

hrt_status_t hrt_cuda_kernel_cache_directory(char** out_directory) {
  const char* base = getenv("HALRT_CACHE_DIR");
  const char* suffix = "";
  if (!base || !base[0]) {
    base = getenv("XDG_CACHE_HOME");
    suffix = "/halrt/kernels";
    if (!base || !base[0]) {
      base = getenv("HOME");
      suffix = "/.cache/halrt/kernels";
    }
  }
  if (!base || !base[0]) {
    return hrt_status_make(HRT_STATUS_UNAVAILABLE,
                           "no kernel cache folder: HALRT_CACHE_DIR, "
                           "XDG_CACHE_HOME and HOME are unset");
  }
  const size_t length = strlen(base) + strlen(suffix) + 1;
  char* directory = NULL;
  HRT_RETURN_IF_ERROR(
      hrt_allocate(length, "kernel cache folder", (void**)&directory));
  snprintf(directory, length, "%s%s", base, suffix);
  hrt_status_t status = hrt_make_directories(directory);
  if (status != HRT_OK) {
    free(directory);
    return status;
  }
  *out_directory = directory;
  return HRT_OK;
}

hrt_status_t hrt_cuda_kernel_cache_entry_path(
    const char* directory, const hrt_cuda_kernel_cache_key_t* key,
    char** out_path) {
  const size_t length = strlen(directory) + 32;
  char* path = NULL;
  HRT_RETURN_IF_ERROR(
      hrt_allocate(length, "kernel cache entry path", (void**)&path));
  snprintf(path, length, "%s/%016llx.kernel", directory,
           (unsigned long long)key->hash);
  *out_path = path;
  return HRT_OK;
}

// Checks `data[0..length)` as an entry for `key` and builds the output.
static bool hrt_kernel_cache_parse(const char* data, size_t length,
                                   const hrt_cuda_kernel_cache_key_t* key,
                                   hrt_nvrtc_output_t** out_output) {
  hrt_kernel_cache_header_t header;
  if (length < sizeof(header) + sizeof(uint64_t)) return false;
  memcpy(&header, data, sizeof(header));
  const size_t body = length - sizeof(header) - sizeof(uint64_t);
  if (memcmp(header.magic, hrt_kernel_cache_magic, 8) != 0 ||
      header.key_length != key->length || header.key_length > body ||
      header.image_length > body - header.key_length ||
      header.names_length != body - header.key_length - header.image_length) {
    return false;
  }
  uint64_t checksum = 0;
  memcpy(&checksum, data + length - sizeof(checksum), sizeof(checksum));
  if (checksum != hrt_fnv1a(HRT_FNV1A_SEED, data, length - sizeof(checksum))) {
    return false;
  }
  const char* material = data + sizeof(header);
  const char* image = material + header.key_length;
  const char* names = image + header.image_length;
  if (memcmp(material, key->material, key->length) != 0) return false;
  // Exactly lowered_count NUL-terminated names fill the names field.
  if (header.lowered_count > header.names_length) return false;
  const char** lowered = calloc(header.lowered_count + 1, sizeof(char*));
  if (!lowered) return false;
  size_t offset = 0;
  for (uint32_t i = 0; i < header.lowered_count; ++i) {
    const char* end =
        memchr(names + offset, 0, (size_t)header.names_length - offset);
    if (!end) {
      free(lowered);
      return false;
    }
    lowered[i] = names + offset;
    offset = (size_t)(end - names) + 1;
  }
  hrt_nvrtc_output_t* output = NULL;
  hrt_status_t status = HRT_OK;
  if (offset == header.names_length) {
    status = hrt_nvrtc_output_allocate(header.cubin != 0,
                                       (size_t)header.image_length,
                                       header.lowered_count, lowered, &output);
  }
  free(lowered);
  if (offset != header.names_length || status != HRT_OK) {
    hrt_status_free(status);
    return false;
  }
  memcpy((char*)output->image, image, (size_t)header.image_length);
  *out_output = output;
  return true;
}

// Reads `count` bytes of `fd` into `data`; false on an error or an early
// end.
static bool hrt_read_exactly(int fd, char* data, size_t count) {
  while (count > 0) {
    const ssize_t got = read(fd, data, count);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    data += got;
    count -= (size_t)got;
  }
  return true;
}

// Reads the entry at `path` whole when it can be ours and for `key`: not a
// symbolic link, a regular file owned by this user and writable by no one
// else (anyone else could plant code for a key: keys are predictable), and
// exactly as long as its header says with `key`'s material length. The
// header is read first, so a large file that is not an entry costs little.
static bool hrt_kernel_cache_read(const char* path,
                                  const hrt_cuda_kernel_cache_key_t* key,
                                  char** out_data, size_t* out_length) {
  // O_NONBLOCK: a FIFO put in the entry's place does not wait for a writer.
  const int fd =
      open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st;
  hrt_kernel_cache_header_t header;
  char* data = NULL;
  bool ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
            st.st_uid == geteuid() && (st.st_mode & (S_IWGRP | S_IWOTH)) == 0 &&
            (uint64_t)st.st_size <= HRT_KERNEL_CACHE_MAX_ENTRY_BYTES &&
            hrt_read_exactly(fd, (char*)&header, sizeof(header)) &&
            memcmp(header.magic, hrt_kernel_cache_magic, 8) == 0 &&
            header.key_length == key->length &&
            header.image_length <= HRT_KERNEL_CACHE_MAX_ENTRY_BYTES &&
            header.names_length <= HRT_KERNEL_CACHE_MAX_ENTRY_BYTES &&
            sizeof(header) + header.key_length + header.image_length +
                    header.names_length + sizeof(uint64_t) ==
                (uint64_t)st.st_size &&
            (data = malloc((size_t)st.st_size + 1)) != NULL;
  if (ok) {
    memcpy(data, &header, sizeof(header));
    ok = hrt_read_exactly(fd, data + sizeof(header),
                          (size_t)st.st_size - sizeof(header));
  }
  close(fd);
  if (!ok) {
    free(data);
    return false;
  }
  *out_data = data;
  *out_length = (size_t)st.st_size;
  return true;
}

bool hrt_cuda_kernel_cache_load(const char* directory,
                                const hrt_cuda_kernel_cache_key_t* key,
                                hrt_nvrtc_output_t** out_output) {
  char* path = NULL;
  char* data = NULL;
  size_t length = 0;
  hrt_status_t status = hrt_cuda_kernel_cache_entry_path(directory, key, &path);
  const bool hit = status == HRT_OK &&
                   hrt_kernel_cache_read(path, key, &data, &length) &&
                   hrt_kernel_cache_parse(data, length, key, out_output);
  hrt_status_free(status);
  free(data);
  free(path);
  return hit;
}

static bool hrt_write_all(FILE* file, const void* data, size_t length,
                          uint64_t* checksum) {
  *checksum = hrt_fnv1a(*checksum, data, length);
  return fwrite(data, 1, length, file) == length;
}

hrt_status_t hrt_cuda_kernel_cache_store(const char* directory,
                                         const hrt_cuda_kernel_cache_key_t* key,
                                         const hrt_nvrtc_output_t* output) {
  char* path = NULL;
  HRT_RETURN_IF_ERROR(hrt_cuda_kernel_cache_entry_path(directory, key, &path));
  const size_t temp_length = strlen(path) + 16;
  char* temp = malloc(temp_length);
  if (!temp) {
    free(path);
    return hrt_status_make(HRT_STATUS_RESOURCE_EXHAUSTED,
                           "out of host memory for a kernel cache entry");
  }
  snprintf(temp, temp_length, "%s.XXXXXX", path);
  const int fd = mkstemp(temp);
  FILE* file = fd >= 0 ? fdopen(fd, "wb") : NULL;
  if (!file) {
    const int error = errno;
    if (fd >= 0) {
      close(fd);
      unlink(temp);
    }
    hrt_status_t status = hrt_status_make(
        HRT_STATUS_UNAVAILABLE, "cannot write kernel cache entry in '%s': %s",
        directory, strerror(error));
    free(temp);
    free(path);
    return status;
  }
  size_t names_length = 0;
  for (uint32_t i = 0; i < output->lowered_count; ++i) {
    names_length += strlen(output->lowered_names[i]) + 1;
  }
  hrt_kernel_cache_header_t header;
  memset(&header, 0, sizeof(header));
  memcpy(header.magic, hrt_kernel_cache_magic, 8);
  header.key_length = key->length;
  header.image_length = output->image_length;
  header.names_length = names_length;
  header.cubin = output->cubin;
  header.lowered_count = output->lowered_count;
  uint64_t checksum = HRT_FNV1A_SEED;
  bool ok = hrt_write_all(file, &header, sizeof(header), &checksum) &&
            hrt_write_all(file, key->material, key->length, &checksum) &&
            hrt_write_all(file, output->image, output->image_length, &checksum);
  for (uint32_t i = 0; i < output->lowered_count && ok; ++i) {
    ok = hrt_write_all(file, output->lowered_names[i],
                       strlen(output->lowered_names[i]) + 1, &checksum);
  }
  ok = ok && fwrite(&checksum, 1, sizeof(checksum), file) == sizeof(checksum);
  int error = ok ? 0 : errno;
  if (fclose(file) != 0 && ok) {
    ok = false;
    error = errno;
  }
  if (ok && rename(temp, path) != 0) {
    ok = false;
    error = errno;
  }
  hrt_status_t status = HRT_OK;
  if (!ok) {
    status = hrt_status_make(HRT_STATUS_UNAVAILABLE,
                             "cannot write kernel cache entry '%s': %s", path,
                             strerror(error));
    unlink(temp);
  }
  free(temp);
  free(path);
  return status;
}
