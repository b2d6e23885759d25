#include "base/dynlib.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/file.h"

struct hrt_dynlib_s {
  void* handle;
  char path[];
};

// Appends "; `reason`" (no separator first) to `errors` of `size` bytes,
// `*used` of them used.
static void hrt_dynlib_note(char* errors, size_t size, size_t* used,
                            const char* reason) {
  if (*used >= size) return;
  int n =
      snprintf(errors + *used, size - *used, "%s%s", *used ? "; " : "", reason);
  if (n > 0) *used += (size_t)n;
}

hrt_status_t hrt_dynlib_open(const char* const* paths, int count,
                             hrt_dynlib_t** out_library) {
  char errors[900] = "";
  size_t used = 0;
  for (int i = 0; i < count; ++i) {
    // A path (not a name the loader searches for) that exists must be a
    // regular file: dlopen of a FIFO waits for a writer forever. (A missing
    // path is left to dlopen, whose message says so.)
    struct stat st;
    if (strchr(paths[i], '/') && stat(paths[i], &st) == 0 &&
        !S_ISREG(st.st_mode)) {
      hrt_status_t status =
          hrt_file_check(paths[i], UINT64_MAX, "a shared library");
      hrt_dynlib_note(errors, sizeof(errors), &used,
                      hrt_status_message(status));
      hrt_status_free(status);
      continue;
    }
    void* handle = dlopen(paths[i], RTLD_NOW | RTLD_LOCAL);
    if (handle) {
      size_t length = strlen(paths[i]);
      hrt_dynlib_t* library = malloc(sizeof(*library) + length + 1);
      if (!library) {
        dlclose(handle);
        return hrt_status_make(HRT_STATUS_RESOURCE_EXHAUSTED,
                               "out of host memory opening '%s'", paths[i]);
      }
      library->handle = handle;
      memcpy(library->path, paths[i], length + 1);
      *out_library = library;
      return HRT_OK;
    }
    const char* reason = dlerror();
    hrt_dynlib_note(errors, sizeof(errors), &used, reason ? reason : paths[i]);
  }
  return hrt_status_make(HRT_STATUS_UNAVAILABLE, "cannot load %s: %s",
                         count ? paths[0] : "(no path)", errors);
}

hrt_status_t hrt_dynlib_symbol(hrt_dynlib_t* library, const char* name,
                               void** out_symbol) {
  dlerror();
  void* symbol = dlsym(library->handle, name);
  if (!symbol) {
    return hrt_status_make(HRT_STATUS_NOT_FOUND,
                           "symbol '%s' not found in '%s'", name,
                           library->path);
  }
  *out_symbol = symbol;
  return HRT_OK;
}

void* hrt_dynlib_find(hrt_dynlib_t* library, const char* name) {
  void* symbol = NULL;
  hrt_status_t missing = hrt_dynlib_symbol(library, name, &symbol);
  hrt_status_free(missing);
  return missing == HRT_OK ? symbol : NULL;
}

const char* hrt_dynlib_path(const hrt_dynlib_t* library) {
  return library->path;
}

void hrt_dynlib_close(hrt_dynlib_t* library) {
  if (!library) return;
  dlclose(library->handle);
  free(library);
}

hrt_status_t hrt_dynlib_pin_containing(const void* address) {
  Dl_info info;
  if (dladdr(address, &info) == 0 || info.dli_fname == NULL) {
    return hrt_status_make(HRT_STATUS_INTERNAL,
                           "cannot find the shared object containing %p",
                           address);
  }
  // RTLD_NOLOAD: only flags the object already loaded; the reference this
  // takes is never dropped, which is the point.
  if (dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE) == NULL) {
    const char* reason = dlerror();
    return hrt_status_make(HRT_STATUS_INTERNAL, "cannot pin '%s': %s",
                           info.dli_fname, reason ? reason : "dlopen failed");
  }
  return HRT_OK;
}
