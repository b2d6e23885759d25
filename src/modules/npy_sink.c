#include "modules/npy_sink.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

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

static hrt_status_t hrt_npy_write(const char* path,
                                  const hrt_trace_tensor_t* tensor) {
  char header[640];
  size_t header_length = hrt_npy_header(tensor, header, sizeof(header));
  char temporary[4200];
  snprintf(temporary, sizeof(temporary), "%s.tmp", path);
  FILE* file = fopen(temporary, "wb");
  bool ok = file != NULL && header_length > 0;
  ok = ok && fwrite(header, 1, header_length, file) == header_length;
  ok = ok && fwrite(tensor->data, 1, (size_t)tensor->byte_length, file) ==
                 (size_t)tensor->byte_length;
  int error = errno;
  if (file != NULL && fclose(file) != 0) ok = false;
  if (ok && rename(temporary, path) != 0) ok = false;
  if (!ok) {
    if (file != NULL) remove(temporary);
    return hrt_status_make(HRT_STATUS_DATA_LOSS, "cannot write '%s': %s", path,
                           strerror(error ? error : EIO));
  }
  return HRT_OK;
}

static hrt_status_t hrt_npy_sink_trace(void* user_data, const char* key,
                                       const hrt_trace_info_t* info,
                                       uint32_t count,
                                       const hrt_trace_tensor_t* tensors) {
  const char* directory = user_data;
  char safe_key[256];
  size_t length = 0;
  for (; key[length] && length + 1 < sizeof(safe_key); ++length) {
    char c = key[length];
    bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-';
    safe_key[length] = keep ? c : '_';
  }
  safe_key[length] = 0;
  for (uint32_t i = 0; i < count; ++i) {
    if (tensors[i].rank > HRT_HAL_MAX_RANK) {
      return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                             "trace '%s': tensor %u has rank %u (at most %d)",
                             key, i, tensors[i].rank, HRT_HAL_MAX_RANK);
    }
    char path[4096];
    int length = snprintf(path, sizeof(path), "%s/%llu_%s_%u.npy", directory,
                          (unsigned long long)info->sequence, safe_key, i);
    if (length < 0 || (size_t)length >= sizeof(path) - 4) {
      return hrt_status_make(HRT_STATUS_DATA_LOSS,
                             "trace '%s': the .npy path in '%s' is too long",
                             key, directory);
    }
    HRT_RETURN_IF_ERROR(hrt_npy_write(path, &tensors[i]));
  }
  return HRT_OK;
}

static void hrt_npy_sink_release(void* user_data) { free(user_data); }

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
  struct stat info;
  if (stat(directory, &info) != 0 || !S_ISDIR(info.st_mode)) {
    return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                           "'%s' is not a directory", directory);
  }
  return HRT_OK;
}

hrt_status_t hrt_npy_sink_create(const char* directory,
                                 hrt_debug_sink_t* out_sink) {
  HRT_RETURN_IF_ERROR(hrt_make_directories(directory));
  size_t length = strlen(directory) + 1;
  char* copy = NULL;
  HRT_RETURN_IF_ERROR(hrt_allocate(length, "npy sink", (void**)&copy));
  memcpy(copy, directory, length);
  *out_sink = (hrt_debug_sink_t){
      .buffer_view_trace = {hrt_npy_sink_trace, copy},
      .release = {hrt_npy_sink_release, copy},
  };
  return HRT_OK;
}
