#include "base/dynlib.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct hrt_dynlib_s {
  void* handle;
  char path[];
};

hrt_status_t hrt_dynlib_open(const char* const* paths, int count,
                             hrt_dynlib_t** out_library) {
  char errors[900] = "";
  size_t used = 0;
  for (int i = 0; i < count; ++i) {
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
    if (used < sizeof(errors)) {
      int n = snprintf(errors + used, sizeof(errors) - used, "%s%s",
                       used ? "; " : "", reason ? reason : paths[i]);
      if (n > 0) used += (size_t)n;
    }
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
