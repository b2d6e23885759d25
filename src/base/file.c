#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L  // O_CLOEXEC, fstat, ssize_t read
#endif
#include "base/file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/alloc.h"

// What a non-regular file is, for the message.
static const char* hrt_file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  return "a special file";
}

// The rule itself, on what stat or fstat reported for `path`.
static hrt_status_t hrt_file_check_stat(const char* path, const struct stat* st,
                                        uint64_t max_bytes, const char* what) {
  if (!S_ISREG(st->st_mode)) {
    return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                           "'%s' is %s, not a regular file", path,
                           hrt_file_kind(st->st_mode));
  }
  if ((uint64_t)st->st_size > max_bytes) {
    return hrt_status_make(HRT_STATUS_RESOURCE_EXHAUSTED,
                           "'%s' is %llu bytes, over the limit of %llu bytes "
                           "for %s",
                           path, (unsigned long long)st->st_size,
                           (unsigned long long)max_bytes, what);
  }
  return HRT_OK;
}

hrt_status_t hrt_file_check(const char* path, uint64_t max_bytes,
                            const char* what) {
  struct stat st;
  if (stat(path, &st) != 0) {
    return hrt_status_make(HRT_STATUS_NOT_FOUND, "cannot open '%s': %s", path,
                           strerror(errno));
  }
  return hrt_file_check_stat(path, &st, max_bytes, what);
}

// Reads exactly `length` bytes of `fd` into `data`.
static hrt_status_t hrt_file_read_exactly(int fd, const char* path, char* data,
                                          size_t length) {
  size_t done = 0;
  while (done < length) {
    const ssize_t count = read(fd, data + done, length - done);
    if (count < 0 && errno == EINTR) continue;
    if (count < 0) {
      return hrt_status_make(HRT_STATUS_DATA_LOSS, "cannot read '%s': %s", path,
                             strerror(errno));
    }
    if (count == 0) {
      return hrt_status_make(HRT_STATUS_DATA_LOSS,
                             "'%s' ended after %zu of %zu bytes (it shrank "
                             "while being read)",
                             path, done, length);
    }
    done += (size_t)count;
  }
  return HRT_OK;
}

hrt_status_t hrt_file_read(const char* path, uint64_t max_bytes,
                           const char* what, char** out_data,
                           size_t* out_length) {
  HRT_RETURN_IF_ERROR(hrt_file_check(path, max_bytes, what));
  // O_NONBLOCK: should the path have become a FIFO since the check, the open
  // returns instead of waiting for a writer. O_NOCTTY: a terminal never
  // becomes our controlling terminal.
  const int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) {
    return hrt_status_make(HRT_STATUS_NOT_FOUND, "cannot open '%s': %s", path,
                           strerror(errno));
  }
  struct stat st;
  hrt_status_t status = HRT_OK;
  if (fstat(fd, &st) != 0) {
    status = hrt_status_make(HRT_STATUS_DATA_LOSS, "cannot stat '%s': %s", path,
                             strerror(errno));
  }
  if (status == HRT_OK) {
    status = hrt_file_check_stat(path, &st, max_bytes, what);
  }
  char* data = NULL;
  const size_t length = status == HRT_OK ? (size_t)st.st_size : 0;
  if (status == HRT_OK) {
    status = hrt_allocate(length + 1, path, (void**)&data);
  }
  if (status == HRT_OK) {
    status = hrt_file_read_exactly(fd, path, data, length);
  }
  close(fd);
  if (status != HRT_OK) {
    free(data);
    return status;
  }
  data[length] = 0;
  *out_data = data;
  *out_length = length;
  return HRT_OK;
}
