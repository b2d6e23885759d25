#include "modules/sinks/npy_sink.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/alloc.h"
#include "hal/buffer_view.h"

const char* hrt_npy_descr(hrt_hal_element_type_t type) {
  static const char* const descrs[HRT_HAL_ELEMENT_TYPE_COUNT_] = {
      [HRT_HAL_ELEMENT_TYPE_F16] = "<f2",  [HRT_HAL_ELEMENT_TYPE_BF16] = "<u2",
      [HRT_HAL_ELEMENT_TYPE_F32] = "<f4",  [HRT_HAL_ELEMENT_TYPE_F64] = "<f8",
      [HRT_HAL_ELEMENT_TYPE_I8] = "|i1",   [HRT_HAL_ELEMENT_TYPE_U8] = "|u1",
      [HRT_HAL_ELEMENT_TYPE_I16] = "<i2",  [HRT_HAL_ELEMENT_TYPE_U16] = "<u2",
      [HRT_HAL_ELEMENT_TYPE_I32] = "<i4",  [HRT_HAL_ELEMENT_TYPE_U32] = "<u4",
      [HRT_HAL_ELEMENT_TYPE_I64] = "<i8",  [HRT_HAL_ELEMENT_TYPE_U64] = "<u8",
      [HRT_HAL_ELEMENT_TYPE_BOOL] = "|b1",
  };
  return (unsigned)type < HRT_HAL_ELEMENT_TYPE_COUNT_ ? descrs[type] : "|V1";
}

// The .npy preamble: magic, version 1.0, header length, and the header dict
// padded with spaces so that the data starts at a multiple of 64 bytes.
static size_t hrt_npy_header(const hrt_trace_tensor_t* tensor, char* out,
                             size_t capacity) {
  char dict[512];
  int used = snprintf(dict, sizeof(dict),
                      "{'descr': '%s', 'fortran_order': False, 'shape': (",
                      hrt_npy_descr(tensor->element_type));
  for (uint32_t d = 0; d < tensor->rank; ++d) {
    used +=
        snprintf(dict + used, sizeof(dict) - (size_t)used, "%lld,%s",
                 (long long)tensor->shape[d], d + 1 < tensor->rank ? " " : "");
  }
  if (tensor->rank > 1) --used;  // "(2, 3)" not "(2, 3,)"; "(4,)" keeps it
  used += snprintf(dict + used, sizeof(dict) - (size_t)used, "), }");
  size_t total = 10 + (size_t)used + 1;
  size_t padded = (total + 63) / 64 * 64;
  if (padded > capacity) return 0;
  memcpy(out, "\x93NUMPY\x01\x00", 8);
  uint16_t header_length = (uint16_t)(padded - 10);
  out[8] = (char)(header_length & 0xFF);
  out[9] = (char)(header_length >> 8);
  memcpy(out + 10, dict, (size_t)used);
  memset(out + 10 + used, ' ', padded - total);
  out[padded - 1] = '\n';
  return padded;
}

typedef struct hrt_npy_sink_s {
  int directory_fd;  // the folder, opened once (O_DIRECTORY)
  int index_fd;      // index.jsonl in it (O_APPEND)
  // Numbers temporary names, so that concurrent calls rarely try the same.
  atomic_uint next_temporary;
  char directory[];  // the path as given, for messages only
} hrt_npy_sink_t;

// Buffer sizes: "<sequence>_<prefix>-<hash>_<index>" (no extension) takes at
// most 20+1+64+1+8+1+10 bytes, a final name 9 more (".9999.npy"), a
// temporary name ".halrt-<pid>-<n>.tmp" under 40.
#define HRT_NPY_BASE_CAPACITY 112
#define HRT_NPY_NAME_CAPACITY 128
#define HRT_NPY_TEMPORARY_CAPACITY 64
static void hrt_npy_base_name(const char* key, uint64_t sequence,
                              uint32_t index, char out[HRT_NPY_BASE_CAPACITY]) {
  char prefix[HRT_NPY_KEY_PREFIX + 1];
  size_t length = 0;
  uint32_t hash = 2166136261u;  // FNV-1a offset basis
  for (const unsigned char* c = (const unsigned char*)key; *c; ++c) {
    hash = (hash ^ *c) * 16777619u;  // FNV-1a prime
    if (length == HRT_NPY_KEY_PREFIX) continue;
    bool keep = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
                (*c >= '0' && *c <= '9') || *c == '_' || *c == '.' || *c == '-';
    prefix[length++] = keep ? (char)*c : '_';
  }
  prefix[length] = 0;
  snprintf(out, HRT_NPY_BASE_CAPACITY, "%llu_%s-%08x_%u",
           (unsigned long long)sequence, prefix, hash, index);
}

// Writes all of `data`, retrying short writes; returns 0 or an errno value.
static int hrt_npy_write_all(int fd, const void* data, uint64_t length) {
  const char* cursor = data;
  while (length > 0) {
    size_t chunk = length > (1u << 30) ? (1u << 30) : (size_t)length;
    ssize_t written = write(fd, cursor, chunk);
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) return written < 0 ? errno : EIO;
    cursor += written;
    length -= (uint64_t)written;
  }
  return 0;
}

// Creates a new temporary file in the folder, never opening an existing
// name (a leftover, another writer's, or a planted symlink): on EEXIST the
// next number is tried. Returns 0 or an errno value.
static int hrt_npy_create_temporary(hrt_npy_sink_t* sink,
                                    char out_name[HRT_NPY_TEMPORARY_CAPACITY],
                                    int* out_fd) {
  for (int attempt = 0; attempt < 100; ++attempt) {
    snprintf(out_name, HRT_NPY_TEMPORARY_CAPACITY, ".halrt-%ld-%u.tmp",
             (long)getpid(), atomic_fetch_add(&sink->next_temporary, 1));
    int fd = openat(sink->directory_fd, out_name,
                    O_CREAT | O_EXCL | O_NOFOLLOW | O_WRONLY | O_CLOEXEC, 0666);
    if (fd >= 0) {
      *out_fd = fd;
      return 0;
    }
    if (errno != EEXIST) return errno;
  }
  return EEXIST;
}

// Gives the written temporary file the first free name of "<base>.npy",
// "<base>.1.npy", ... linkat() fails with EEXIST on any existing entry (a
// symlink included) instead of replacing it. Returns 0 or an errno value;
// `out_name` holds the name last tried.
static int hrt_npy_link_free_name(hrt_npy_sink_t* sink, const char* temporary,
                                  const char* base,
                                  char out_name[HRT_NPY_NAME_CAPACITY]) {
  for (unsigned n = 0; n <= HRT_NPY_MAX_RENAMES; ++n) {
    if (n == 0) {
      snprintf(out_name, HRT_NPY_NAME_CAPACITY, "%s.npy", base);
    } else {
      snprintf(out_name, HRT_NPY_NAME_CAPACITY, "%s.%u.npy", base, n);
    }
    if (linkat(sink->directory_fd, temporary, sink->directory_fd, out_name,
               0) == 0) {
      return 0;
    }
    if (errno != EEXIST) return errno;
  }
  return EEXIST;
}

// The length of the valid UTF-8 sequence at `c` (1 to 4), or 0 where the
// bytes there are not one (overlong forms, surrogates and code points past
// U+10FFFF included). `c` is NUL-terminated, so reading stops at the NUL.
static size_t hrt_npy_utf8_length(const unsigned char* c) {
  if (c[0] < 0x80) return 1;
  // The range of the second byte depends on the first; the rest are 80..BF.
  unsigned char low = 0x80, high = 0xBF;
  size_t length = 0;
  if (c[0] >= 0xC2 && c[0] <= 0xDF) {
    length = 2;
  } else if (c[0] >= 0xE0 && c[0] <= 0xEF) {
    length = 3;
    if (c[0] == 0xE0) low = 0xA0;
    if (c[0] == 0xED) high = 0x9F;
  } else if (c[0] >= 0xF0 && c[0] <= 0xF4) {
    length = 4;
    if (c[0] == 0xF0) low = 0x90;
    if (c[0] == 0xF4) high = 0x8F;
  } else {
    return 0;
  }
  if (c[1] < low || c[1] > high) return 0;
  for (size_t i = 2; i < length; ++i) {
    if (c[i] < 0x80 || c[i] > 0xBF) return 0;
  }
  return length;
}

// Appends `text` as a JSON string: '"' and '\' escaped, control characters
// as \u00XX, valid UTF-8 kept, and every other byte as \udcXX.
static void hrt_npy_json_string(FILE* stream, const char* text) {
  const unsigned char* c = (const unsigned char*)text;
  fputc('"', stream);
  while (*c) {
    size_t length = hrt_npy_utf8_length(c);
    if (length > 1) {
      fwrite(c, 1, length, stream);
    } else if (length == 0) {
      fprintf(stream, "\\udc%02x", *c);
      length = 1;
    } else if (*c == '"' || *c == '\\') {
      fprintf(stream, "\\%c", *c);
    } else if (*c < 0x20) {
      fprintf(stream, "\\u%04x", *c);
    } else {
      fputc(*c, stream);
    }
    c += length;
  }
  fputc('"', stream);
}

// One index.jsonl line for the file `name`, appended with one write().
static hrt_status_t hrt_npy_index_append(hrt_npy_sink_t* sink, const char* name,
                                         const char* key,
                                         const hrt_trace_info_t* info,
                                         uint32_t index,
                                         const hrt_trace_tensor_t* tensor) {
  char* line = NULL;
  size_t length = 0;
  FILE* stream = open_memstream(&line, &length);
  if (stream == NULL) {
    return hrt_status_make(HRT_STATUS_RESOURCE_EXHAUSTED,
                           "npy sink: no memory for an index line");
  }
  fputs("{\"file\":", stream);
  hrt_npy_json_string(stream, name);
  fputs(",\"key\":", stream);
  hrt_npy_json_string(stream, key);
  fprintf(stream, ",\"sequence\":%llu,\"function\":",
          (unsigned long long)info->sequence);
  hrt_npy_json_string(stream, info->function);
  fprintf(stream, ",\"op\":%u,\"tensor\":%u,\"name\":", info->op_index, index);
  hrt_npy_json_string(stream, tensor->name);
  fprintf(stream, ",\"dtype\":\"%s\",\"shape\":[",
          hrt_hal_element_type_name(tensor->element_type));
  for (uint32_t d = 0; d < tensor->rank; ++d) {
    fprintf(stream, "%s%lld", d ? "," : "", (long long)tensor->shape[d]);
  }
  fputs("]}\n", stream);
  bool ok = !ferror(stream);
  ok = fclose(stream) == 0 && ok && line != NULL;
  int error = ok ? hrt_npy_write_all(sink->index_fd, line, length) : 0;
  free(line);
  if (!ok) {
    return hrt_status_make(HRT_STATUS_RESOURCE_EXHAUSTED,
                           "npy sink: no memory for an index line");
  }
  if (error) {
    return hrt_status_make(HRT_STATUS_DATA_LOSS,
                           "cannot append to '%s/index.jsonl': %s",
                           sink->directory, strerror(error));
  }
  return HRT_OK;
}

static hrt_status_t hrt_npy_write_tensor(hrt_npy_sink_t* sink, const char* key,
                                         const hrt_trace_info_t* info,
                                         uint32_t index,
                                         const hrt_trace_tensor_t* tensor) {
  char header[640];
  size_t header_length = hrt_npy_header(tensor, header, sizeof(header));
  char base[HRT_NPY_BASE_CAPACITY];
  hrt_npy_base_name(key, info->sequence, index, base);
  char temporary[HRT_NPY_TEMPORARY_CAPACITY];
  char name[HRT_NPY_NAME_CAPACITY];
  const char* failed = temporary;  // the name an error is about
  int fd = -1;
  int error = hrt_npy_create_temporary(sink, temporary, &fd);
  if (!error) {
    error = header_length == 0 ? EOVERFLOW
                               : hrt_npy_write_all(fd, header, header_length);
    if (!error) {
      error = hrt_npy_write_all(fd, tensor->data, tensor->byte_length);
    }
    if (close(fd) != 0 && !error) error = errno;
    if (!error) {
      failed = name;
      error = hrt_npy_link_free_name(sink, temporary, base, name);
    }
    unlinkat(sink->directory_fd, temporary, 0);
  }
  if (error) {
    return hrt_status_make(HRT_STATUS_DATA_LOSS,
                           "trace '%s': cannot write tensor %u to '%s/%s': %s",
                           key, index, sink->directory, failed,
                           strerror(error));
  }
  return hrt_npy_index_append(sink, name, key, info, index, tensor);
}

static hrt_status_t hrt_npy_sink_trace(void* user_data, const char* key,
                                       const hrt_trace_info_t* info,
                                       uint32_t count,
                                       const hrt_trace_tensor_t* tensors) {
  hrt_npy_sink_t* sink = user_data;
  if (info->mode != HRT_HAL_TRACE_FULL) return HRT_OK;  // no tensor to write
  for (uint32_t i = 0; i < count; ++i) {
    if (tensors[i].rank > HRT_HAL_MAX_RANK) {
      return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                             "trace '%s': tensor %u has rank %u (at most %d)",
                             key, i, tensors[i].rank, HRT_HAL_MAX_RANK);
    }
    HRT_RETURN_IF_ERROR(hrt_npy_write_tensor(sink, key, info, i, &tensors[i]));
  }
  return HRT_OK;
}

static void hrt_npy_sink_release(void* user_data) {
  hrt_npy_sink_t* sink = user_data;
  close(sink->index_fd);
  close(sink->directory_fd);
  free(sink);
}

// mkdir -p
static hrt_status_t hrt_make_directories(const char* directory) {
  char path[4096];
  size_t length = strlen(directory);
  if (length == 0 || length >= sizeof(path)) {
    return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                           "npy sink directory must be a path of 1 to %zu "
                           "characters",
                           sizeof(path) - 1);
  }
  memcpy(path, directory, length + 1);
  for (size_t i = 1; i <= length; ++i) {
    if (path[i] != '/' && path[i] != 0) continue;
    char saved = path[i];
    path[i] = 0;
    if (mkdir(path, 0777) != 0 && errno != EEXIST) {
      return hrt_status_make(HRT_STATUS_UNAVAILABLE,
                             "cannot create directory '%s': %s", path,
                             strerror(errno));
    }
    path[i] = saved;
  }
  return HRT_OK;
}

// Opens the folder and its index.jsonl into `sink`.
static hrt_status_t hrt_npy_sink_open(const char* directory,
                                      hrt_npy_sink_t* sink) {
  sink->directory_fd = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (sink->directory_fd < 0) {
    int error = errno;
    if (error == ENOTDIR) {
      return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                             "'%s' is not a directory", directory);
    }
    return hrt_status_make(HRT_STATUS_UNAVAILABLE,
                           "cannot open directory '%s': %s", directory,
                           strerror(error));
  }
  // O_NONBLOCK: a FIFO planted as index.jsonl fails instead of blocking.
  sink->index_fd = openat(
      sink->directory_fd, "index.jsonl",
      O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC,
      0666);
  struct stat info;
  if (sink->index_fd < 0 || fstat(sink->index_fd, &info) != 0 ||
      !S_ISREG(info.st_mode)) {
    int error = sink->index_fd < 0 ? errno : EINVAL;
    if (sink->index_fd >= 0) close(sink->index_fd);
    close(sink->directory_fd);
    return hrt_status_make(HRT_STATUS_UNAVAILABLE,
                           "cannot open '%s/index.jsonl' as a regular file: %s",
                           directory, strerror(error));
  }
  return HRT_OK;
}

hrt_status_t hrt_npy_sink_create(const char* directory,
                                 hrt_debug_sink_t* out_sink) {
  HRT_RETURN_IF_ERROR(hrt_make_directories(directory));
  size_t length = strlen(directory) + 1;
  hrt_npy_sink_t* sink = NULL;
  HRT_RETURN_IF_ERROR(
      hrt_allocate(sizeof(*sink) + length, "npy sink", (void**)&sink));
  memcpy(sink->directory, directory, length);
  atomic_init(&sink->next_temporary, 0);
  hrt_status_t status = hrt_npy_sink_open(directory, sink);
  if (status != HRT_OK) {
    free(sink);
    return status;
  }
  *out_sink = (hrt_debug_sink_t){
      .buffer_view_trace = {hrt_npy_sink_trace, sink},
      .release = {hrt_npy_sink_release, sink},
  };
  return HRT_OK;
}
