#include "hal/cuda/cuda_includes.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/file.h"

// The largest header read; a larger one makes the source uncacheable.
#define HRT_CUDA_MAX_INCLUDE_BYTES (64ull << 20)
// The most -I folders followed.
#define HRT_CUDA_MAX_INCLUDE_DIRS 64

typedef struct hrt_include_scan_s {
  hrt_cuda_includes_t* includes;
  const char* dirs[HRT_CUDA_MAX_INCLUDE_DIRS];  // the -I folders, in order
  uint32_t dir_count;
  bool includer_dirs;  // quoted includes look next to the including file
} hrt_include_scan_t;

// The -I folders of `options` ("-Idir", "-I dir", "--include-path=dir",
// "--include-path dir"); false when the scan cannot follow the options.
static bool hrt_include_dirs(hrt_include_scan_t* scan, uint32_t option_count,
                             const char* const* options) {
  for (uint32_t i = 0; i < option_count; ++i) {
    const char* option = options[i];
    const char* dir = NULL;
    if (strncmp(option, "-include", 8) == 0 ||
        strncmp(option, "--pre-include", 13) == 0) {
      return false;
    }
    if (strcmp(option, "-I") == 0 || strcmp(option, "--include-path") == 0) {
      if (i + 1 == option_count) break;  // nothing follows: no folder
      dir = options[++i];
    } else if (strncmp(option, "--include-path=", 15) == 0) {
      dir = option + 15;
    } else if (strncmp(option, "-I", 2) == 0) {
      dir = option + 2;
    } else {
      continue;
    }
    if (scan->dir_count == HRT_CUDA_MAX_INCLUDE_DIRS) return false;
    scan->dirs[scan->dir_count++] = dir;
  }
  return true;
}

static bool hrt_include_known(const hrt_cuda_includes_t* includes,
                              const char* path) {
  for (uint32_t i = 0; i < includes->count; ++i) {
    if (strcmp(includes->files[i].path, path) == 0) return true;
  }
  return false;
}

static hrt_status_t hrt_include_scan_text(hrt_include_scan_t* scan,
                                          const char* text, const char* folder);

// The folder of file `path`, as a new heap string ("/" for a file in the
// root, "." for a bare name).
static hrt_status_t hrt_include_folder(const char* path, char** out_folder) {
  const char* slash = strrchr(path, '/');
  const size_t length = slash ? (size_t)(slash - path) : 0;
  char* folder = NULL;
  HRT_RETURN_IF_ERROR(
      hrt_allocate(length + 2, "an include folder", (void**)&folder));
  if (!slash) {
    strcpy(folder, ".");
  } else if (length == 0) {
    strcpy(folder, "/");
  } else {
    memcpy(folder, path, length);
    folder[length] = 0;
  }
  *out_folder = folder;
  return HRT_OK;
}

// `folder`/`name` (or `name` alone when it is absolute), read and scanned
// when it is a file not seen yet. Sets *found when the file exists.
static hrt_status_t hrt_include_try(hrt_include_scan_t* scan,
                                    const char* folder, const char* name,
                                    size_t name_length, bool* found) {
  *found = false;
  hrt_cuda_includes_t* includes = scan->includes;
  char* path = NULL;
  const size_t length = strlen(folder) + name_length + 2;
  HRT_RETURN_IF_ERROR(hrt_allocate(length, "an include path", (void**)&path));
  if (name[0] == '/') {
    snprintf(path, length, "%.*s", (int)name_length, name);
  } else {
    snprintf(path, length, "%s/%.*s", folder, (int)name_length, name);
  }
  char* text = NULL;
  size_t text_length = 0;
  hrt_status_t status = HRT_OK;
  if (hrt_include_known(includes, path)) {
    *found = true;
  } else if ((status = hrt_file_check(path, UINT64_MAX, "a header")) !=
             HRT_OK) {
    // Not there (or not a file): NVRTC looks further, as this scan does.
    *found = hrt_status_code(status) != HRT_STATUS_NOT_FOUND;
    if (*found) includes->cacheable = false;
    hrt_status_free(status);
    status = HRT_OK;
  } else if (includes->count == HRT_CUDA_MAX_INCLUDES) {
    *found = true;
    includes->cacheable = false;
  } else {
    *found = true;
    status = hrt_file_read(path, HRT_CUDA_MAX_INCLUDE_BYTES, "a header", &text,
                           &text_length);
    if (status != HRT_OK) {
      // Too large to hash, or unreadable (the compile says why): compiled
      // every time.
      hrt_status_free(status);
      status = HRT_OK;
      includes->cacheable = false;
    }
  }
  if (text != NULL) {
    hrt_cuda_include_t* file = &includes->files[includes->count++];
    *file = (hrt_cuda_include_t){path, text, text_length};
    path = NULL;
    // Its own includes look next to it.
    char* folder = NULL;
    status = hrt_include_folder(file->path, &folder);
    if (status == HRT_OK) status = hrt_include_scan_text(scan, text, folder);
    free(folder);
  }
  free(path);
  return status;
}

// Follows one `#include` whose rest of line starts at `p`, from a file in
// `folder` (NULL: an inline source).
static hrt_status_t hrt_include_follow(hrt_include_scan_t* scan, const char* p,
                                       const char* folder) {
  while (*p == ' ' || *p == '\t') ++p;
  const char close = *p == '"' ? '"' : *p == '<' ? '>' : 0;
  const char* end = close ? strchr(p + 1, close) : NULL;
  const char* line_end = strchr(p, '\n');
  if (!close || !end || (line_end && end > line_end) || end == p + 1) {
    scan->includes->cacheable = false;  // a macro, or malformed
    return HRT_OK;
  }
  const char* name = p + 1;
  const size_t length = (size_t)(end - name);
  bool found = false;
  if (name[0] == '/') return hrt_include_try(scan, "", name, length, &found);
  if (close == '"' && folder && scan->includer_dirs) {
    HRT_RETURN_IF_ERROR(hrt_include_try(scan, folder, name, length, &found));
  }
  for (uint32_t i = 0; i < scan->dir_count && !found; ++i) {
    HRT_RETURN_IF_ERROR(
        hrt_include_try(scan, scan->dirs[i], name, length, &found));
  }
  return HRT_OK;
}

// Every `#include` line of `text` (a preprocessor line: '#' first on the
// line, spaces aside), followed from `folder`.
static hrt_status_t hrt_include_scan_text(hrt_include_scan_t* scan,
                                          const char* text,
                                          const char* folder) {
  for (const char* line = text; line != NULL && *line;) {
    const char* p = line;
    while (*p == ' ' || *p == '\t') ++p;
    if (*p == '#') {
      ++p;
      while (*p == ' ' || *p == '\t') ++p;
      if (strncmp(p, "include_next", 12) == 0) {
        scan->includes->cacheable = false;
      } else if (strncmp(p, "include", 7) == 0 &&
                 !isalnum((unsigned char)p[7]) && p[7] != '_') {
        HRT_RETURN_IF_ERROR(hrt_include_follow(scan, p + 7, folder));
      }
    }
    line = strchr(line, '\n');
    if (line) ++line;
  }
  return HRT_OK;
}

hrt_status_t hrt_cuda_includes_find(const char* source, const char* source_path,
                                    uint32_t option_count,
                                    const char* const* options,
                                    hrt_cuda_includes_t** out_includes) {
  hrt_cuda_includes_t* includes = NULL;
  HRT_RETURN_IF_ERROR(hrt_allocate_zeroed(sizeof(*includes), "include list",
                                          (void**)&includes));
  includes->cacheable = true;
  hrt_include_scan_t scan = {.includes = includes,
                             .includer_dirs = source_path != NULL};
  if (!hrt_include_dirs(&scan, option_count, options)) {
    includes->cacheable = false;
    *out_includes = includes;
    return HRT_OK;
  }
  char* folder = NULL;
  hrt_status_t status =
      source_path ? hrt_include_folder(source_path, &folder) : HRT_OK;
  if (status == HRT_OK) status = hrt_include_scan_text(&scan, source, folder);
  free(folder);
  if (status != HRT_OK) {
    hrt_cuda_includes_free(includes);
    return status;
  }
  *out_includes = includes;
  return HRT_OK;
}

void hrt_cuda_includes_free(hrt_cuda_includes_t* includes) {
  if (!includes) return;
  for (uint32_t i = 0; i < includes->count; ++i) {
    free(includes->files[i].path);
    free(includes->files[i].text);
  }
  free(includes);
}
