#include "hal/cuda/cuda_nvrtc.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/alloc.h"

// The most bytes of a compile log that an error message shows: enough for
// the first errors, short enough to read in a terminal.
#define HRT_NVRTC_LOG_SHOWN 640

// Written once under hrt_nvrtc_once, read-only afterwards.
static pthread_once_t hrt_nvrtc_once = PTHREAD_ONCE_INIT;
static hrt_nvrtc_t hrt_nvrtc;
static hrt_status_t hrt_nvrtc_load_status;
static atomic_uint_least64_t hrt_nvrtc_compiles;

static hrt_status_t hrt_nvrtc_resolve(hrt_dynlib_t* library,
                                      hrt_nvrtc_t* nvrtc) {
  void* address = NULL;
#define HRT_NVRTC_RESOLVE_REQUIRED(type, name, params)                 \
  if (!(address = hrt_dynlib_find(library, #name))) {                  \
    return hrt_status_make(HRT_STATUS_UNAVAILABLE,                     \
                           "library '%s' lacks %s (not NVRTC, or one " \
                           "older than CUDA 11)",                      \
                           hrt_dynlib_path(library), #name);           \
  }                                                                    \
  memcpy(&nvrtc->name, &address, sizeof(address));
#define HRT_NVRTC_RESOLVE_OPTIONAL(type, name, params) \
  address = hrt_dynlib_find(library, #name);           \
  memcpy(&nvrtc->name, &address, sizeof(address));
  HRT_NVRTC_SYMBOLS(HRT_NVRTC_RESOLVE_REQUIRED, HRT_NVRTC_RESOLVE_OPTIONAL)
#undef HRT_NVRTC_RESOLVE_REQUIRED
#undef HRT_NVRTC_RESOLVE_OPTIONAL
  return HRT_OK;
}

// "<call> failed: <NVRTC's name for the result>".
static hrt_status_t hrt_nvrtc_status(const hrt_nvrtc_t* nvrtc,
                                     hrt_nvrtc_result_t result,
                                     const char* call) {
  if (result == HRT_NVRTC_SUCCESS) return HRT_OK;
  const char* text = nvrtc->nvrtcGetErrorString(result);
  hrt_status_code_t code = HRT_STATUS_INTERNAL;
  switch (result) {
    case HRT_NVRTC_ERROR_OUT_OF_MEMORY:
      code = HRT_STATUS_RESOURCE_EXHAUSTED;
      break;
    case HRT_NVRTC_ERROR_INVALID_OPTION:
    case HRT_NVRTC_ERROR_COMPILATION:
    case HRT_NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID:
      code = HRT_STATUS_INVALID_ARGUMENT;
      break;
  }
  return hrt_status_make(code, "%s failed: %s", call,
                         text ? text : "unknown nvrtcResult");
}

#define HRT_NVRTC_CALL(nvrtc, name, args) \
  hrt_nvrtc_status((nvrtc), (nvrtc)->name args, #name)

static int hrt_nvrtc_compare_ints(const void* a, const void* b) {
  const int x = *(const int*)a, y = *(const int*)b;
  return (x > y) - (x < y);
}

static hrt_status_t hrt_nvrtc_query(hrt_nvrtc_t* nvrtc) {
  HRT_RETURN_IF_ERROR(HRT_NVRTC_CALL(
      nvrtc, nvrtcVersion, (&nvrtc->version_major, &nvrtc->version_minor)));
  if (!nvrtc->nvrtcGetNumSupportedArchs || !nvrtc->nvrtcGetSupportedArchs) {
    return HRT_OK;
  }
  int count = 0;
  HRT_RETURN_IF_ERROR(
      HRT_NVRTC_CALL(nvrtc, nvrtcGetNumSupportedArchs, (&count)));
  if (count <= 0) return HRT_OK;
  int* archs = NULL;
  HRT_RETURN_IF_ERROR(hrt_allocate((size_t)count * sizeof(*archs),
                                   "NVRTC architectures", (void**)&archs));
  hrt_status_t status = HRT_NVRTC_CALL(nvrtc, nvrtcGetSupportedArchs, (archs));
  if (status != HRT_OK) {
    free(archs);
    return status;
  }
  qsort(archs, (size_t)count, sizeof(*archs), hrt_nvrtc_compare_ints);
  nvrtc->arch_count = count;
  nvrtc->archs = archs;
  return HRT_OK;
}

// "NVRTC <major>.<minor> <file> <size> <mtime>" for the file the loader
// opened: patch releases keep the version (and often the file name).
static hrt_status_t hrt_nvrtc_identify(hrt_dynlib_t* library,
                                       hrt_nvrtc_t* nvrtc) {
  void* address = NULL;
  Dl_info info;
  char real[PATH_MAX];
  struct stat st;
  const char* file = hrt_dynlib_path(library);
  memset(&st, 0, sizeof(st));
  if ((address = hrt_dynlib_find(library, "nvrtcVersion")) &&
      dladdr(address, &info) != 0 && info.dli_fname &&
      realpath(info.dli_fname, real) && stat(real, &st) == 0) {
    file = real;
  }
  const char* format = "NVRTC %d.%d %s %lld bytes, modified %lld.%09ld";
  const int length = snprintf(NULL, 0, format, nvrtc->version_major,
                              nvrtc->version_minor, file, (long long)st.st_size,
                              (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
  char* identity = NULL;
  HRT_RETURN_IF_ERROR(
      hrt_allocate((size_t)length + 1, "NVRTC identity", (void**)&identity));
  snprintf(identity, (size_t)length + 1, format, nvrtc->version_major,
           nvrtc->version_minor, file, (long long)st.st_size,
           (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
  nvrtc->identity = identity;
  return HRT_OK;
}

// `status` (not OK) as UNAVAILABLE, keeping its message: whatever stops
// NVRTC from loading means "no NVRTC".
static hrt_status_t hrt_nvrtc_unavailable(hrt_status_t status) {
  if (hrt_status_code(status) == HRT_STATUS_UNAVAILABLE) return status;
  hrt_status_t unavailable =
      hrt_status_make(HRT_STATUS_UNAVAILABLE, "%s", hrt_status_message(status));
  hrt_status_free(status);
  return unavailable;
}

static hrt_status_t hrt_nvrtc_initialize(hrt_nvrtc_t* nvrtc) {
  const char* override = getenv("HALRT_NVRTC_LIBRARY");
  static const char* const defaults[] = {"libnvrtc.so.13",   "libnvrtc.so.12",
                                         "libnvrtc.so.11.2", "libnvrtc.so.11.1",
                                         "libnvrtc.so.11.0", "libnvrtc.so"};
  const char* const* paths = defaults;
  int path_count = (int)(sizeof(defaults) / sizeof(defaults[0]));
  if (override && override[0]) {
    paths = &override;
    path_count = 1;
  }
  hrt_dynlib_t* library = NULL;
  hrt_status_t status = hrt_dynlib_open(paths, path_count, &library);
  if (status != HRT_OK) {
    return hrt_status_annotate(
        hrt_nvrtc_unavailable(status), "NVRTC is not usable (tried %s%s)",
        path_count == 1 ? "HALRT_NVRTC_LIBRARY="
                        : "libnvrtc.so.13, .12, .11.2, .11.1, "
                          ".11.0 and libnvrtc.so",
        path_count == 1 ? override : "");
  }
  status = hrt_nvrtc_resolve(library, nvrtc);
  if (status == HRT_OK) status = hrt_nvrtc_query(nvrtc);
  if (status == HRT_OK) status = hrt_nvrtc_identify(library, nvrtc);
  if (status != HRT_OK) {
    free(nvrtc->archs);
    nvrtc->archs = NULL;
    nvrtc->arch_count = 0;
    hrt_dynlib_close(library);
    return hrt_status_annotate(hrt_nvrtc_unavailable(status),
                               "NVRTC is not usable");
  }
  nvrtc->library = library;
  return HRT_OK;
}

static void hrt_nvrtc_load_once(void) {
  hrt_nvrtc_load_status = hrt_nvrtc_initialize(&hrt_nvrtc);
}

hrt_status_t hrt_nvrtc_load(const hrt_nvrtc_t** out_nvrtc) {
  pthread_once(&hrt_nvrtc_once, hrt_nvrtc_load_once);
  if (hrt_nvrtc_load_status != HRT_OK) {
    return hrt_status_clone(hrt_nvrtc_load_status);
  }
  *out_nvrtc = &hrt_nvrtc;
  return HRT_OK;
}

hrt_status_t hrt_nvrtc_pick_target(const hrt_nvrtc_t* nvrtc,
                                   uint32_t capability_major,
                                   uint32_t capability_minor,
                                   hrt_nvrtc_target_t* out_target) {
  const uint32_t device_arch = capability_major * 10 + capability_minor;
  uint32_t arch = device_arch;
  bool listed = false;
  if (nvrtc->arch_count > 0) {
    int best = -1;
    for (int i = 0; i < nvrtc->arch_count; ++i) {
      if ((uint32_t)nvrtc->archs[i] <= device_arch) best = nvrtc->archs[i];
    }
    if (best < 0) {
      return hrt_status_make(
          HRT_STATUS_FAILED_PRECONDITION,
          "NVRTC %d.%d cannot compile for compute capability %u.%u (its "
          "oldest architecture is sm_%d); use an older CUDA toolkit's NVRTC "
          "(HALRT_NVRTC_LIBRARY)",
          nvrtc->version_major, nvrtc->version_minor, capability_major,
          capability_minor, nvrtc->archs[0]);
    }
    arch = (uint32_t)best;
    listed = arch == device_arch;
  }
  out_target->cubin =
      listed && nvrtc->nvrtcGetCUBINSize && nvrtc->nvrtcGetCUBIN;
  snprintf(out_target->option, sizeof(out_target->option),
           "--gpu-architecture=%s_%u", out_target->cubin ? "sm" : "compute",
           arch);
  return HRT_OK;
}

int hrt_nvrtc_arch_option(uint32_t option_count,
                          const char* const* options) {
  static const char* const arch_options[] = {"--gpu-architecture", "-arch"};
  for (uint32_t i = 0; i < option_count; ++i) {
    for (size_t k = 0; k < 2; ++k) {
      const size_t length = strlen(arch_options[k]);
      if (strncmp(options[i], arch_options[k], length) == 0 &&
          (options[i][length] == 0 || options[i][length] == '=' ||
           options[i][length] == ' ')) {
        return (int)i;
      }
    }
  }
  return -1;
}

hrt_status_t hrt_nvrtc_check_options(uint32_t option_count,
                                     const char* const* options) {
  const int i = hrt_nvrtc_arch_option(option_count, options);
  if (i < 0) return HRT_OK;
  return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                         "options[%d] '%s': halrt compiles for the device's "
                         "own architecture; remove the option",
                         i, options[i]);
}

hrt_status_t hrt_nvrtc_parse_arch(const hrt_nvrtc_t* nvrtc, const char* arch,
                                  hrt_nvrtc_target_t* out_target) {
  char listed[400] = "";
  for (int i = 0, used = 0; i < nvrtc->arch_count && used < 360; ++i) {
    used += snprintf(listed + used, sizeof(listed) - (size_t)used, "%ssm_%d",
                     i ? ", " : "", nvrtc->archs[i]);
  }
  if (arch == NULL) {
    if (nvrtc->arch_count == 0) {
      return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                             "NVRTC %d.%d does not list its architectures; "
                             "name one (e.g. 'sm_80')",
                             nvrtc->version_major, nvrtc->version_minor);
    }
    out_target->cubin = false;
    snprintf(out_target->option, sizeof(out_target->option),
             "--gpu-architecture=sm_%d", nvrtc->archs[nvrtc->arch_count - 1]);
    return HRT_OK;
  }
  const char* digits = strncmp(arch, "sm_", 3) == 0        ? arch + 3
                       : strncmp(arch, "compute_", 8) == 0 ? arch + 8
                                                           : NULL;
  const char* end = digits;
  while (end && *end >= '0' && *end <= '9' && end - digits < 4) ++end;
  const bool suffix = end && (*end == 'a' || *end == 'f') && end[1] == 0;
  if (!digits || end == digits || (*end != 0 && !suffix)) {
    return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                           "'%s' is not an architecture: give sm_XY or "
                           "compute_XY (e.g. 'sm_80')",
                           arch);
  }
  const int number = atoi(digits);
  bool known = nvrtc->arch_count == 0;
  for (int i = 0; i < nvrtc->arch_count; ++i) known |= nvrtc->archs[i] == number;
  if (!known) {
    return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                           "NVRTC %d.%d cannot compile for '%s'; it compiles "
                           "for %s",
                           nvrtc->version_major, nvrtc->version_minor, arch,
                           listed);
  }
  out_target->cubin = false;
  snprintf(out_target->option, sizeof(out_target->option),
           "--gpu-architecture=%s", arch);
  return HRT_OK;
}

// How much of `log[0..length)` an error message shows: all of it when it
// fits, else up to the last line end (or, in a single long line, a UTF-8
// character boundary) within HRT_NVRTC_LOG_SHOWN bytes.
static size_t hrt_nvrtc_log_shown(const char* log, size_t length) {
  if (length <= HRT_NVRTC_LOG_SHOWN) return length;
  size_t shown = HRT_NVRTC_LOG_SHOWN;
  while (shown > 0 && log[shown - 1] != '\n') --shown;
  if (shown > 0) return shown;
  shown = HRT_NVRTC_LOG_SHOWN;
  while (shown > 0 && ((unsigned char)log[shown] & 0xC0) == 0x80) --shown;
  return shown;
}

// The program's whole log, malloc'd and NUL-terminated; NULL when it is
// empty or cannot be read.
static char* hrt_nvrtc_read_log(const hrt_nvrtc_t* nvrtc,
                                hrt_nvrtc_program_t program) {
  size_t size = 0;
  char* log = NULL;
  if (nvrtc->nvrtcGetProgramLogSize(program, &size) != HRT_NVRTC_SUCCESS ||
      size <= 1 || (log = malloc(size)) == NULL) {
    return NULL;
  }
  if (nvrtc->nvrtcGetProgramLog(program, log) != HRT_NVRTC_SUCCESS) {
    free(log);
    return NULL;
  }
  log[size - 1] = 0;
  return log;
}

// INVALID_ARGUMENT with the compile `log` (its start, when it is long; may
// be NULL), for a failed compile.
static hrt_status_t hrt_nvrtc_compile_error(const hrt_nvrtc_t* nvrtc,
                                            const char* log,
                                            hrt_status_t status,
                                            const char* source_name) {
  const size_t length = log ? strlen(log) : 0;
  const size_t shown = hrt_nvrtc_log_shown(log, length);
  char cut[80] = "";
  if (shown < length) {
    snprintf(cut, sizeof(cut), "\n[log cut: the first %zu of %zu bytes]", shown,
             length);
  }
  hrt_status_t annotated = hrt_status_make(
      HRT_STATUS_INVALID_ARGUMENT, "compiling %s with NVRTC %d.%d: %s%s%.*s%s",
      source_name, nvrtc->version_major, nvrtc->version_minor,
      hrt_status_message(status), log ? "; log:\n" : "", (int)shown,
      log ? log : "", cut);
  hrt_status_free(status);
  return annotated;
}

hrt_status_t hrt_nvrtc_output_allocate(bool cubin, size_t image_length,
                                       uint32_t lowered_count,
                                       const char* const* lowered_names,
                                       hrt_nvrtc_output_t** out_output) {
  size_t names_size = 0;
  for (uint32_t i = 0; i < lowered_count; ++i) {
    names_size += strlen(lowered_names[i]) + 1;
  }
  // The image comes first, 16-byte aligned for the driver's ELF reader.
  hrt_nvrtc_output_t* output = NULL;
  const size_t image_offset =
      (sizeof(*output) + lowered_count * sizeof(char*) + 15) & ~(size_t)15;
  if (image_length > SIZE_MAX - image_offset - names_size - 1) {
    return hrt_status_make(HRT_STATUS_RESOURCE_EXHAUSTED,
                           "a %zu-byte kernel image is too large",
                           image_length);
  }
  HRT_RETURN_IF_ERROR(hrt_allocate(image_offset + image_length + 1 + names_size,
                                   "NVRTC output", (void**)&output));
  output->cubin = cubin;
  output->image_length = image_length;
  output->lowered_count = lowered_count;
  output->lowered_names = (const char**)(output + 1);
  char* image = (char*)output + image_offset;
  image[image_length] = 0;
  output->image = image;
  char* names = image + image_length + 1;
  for (uint32_t i = 0; i < lowered_count; ++i) {
    const size_t length = strlen(lowered_names[i]) + 1;
    memcpy(names, lowered_names[i], length);
    output->lowered_names[i] = names;
    names += length;
  }
  *out_output = output;
  return HRT_OK;
}

// Copies what a compiled `program` produced into one heap block.
static hrt_status_t hrt_nvrtc_collect(const hrt_nvrtc_t* nvrtc,
                                      hrt_nvrtc_program_t program, bool cubin,
                                      uint32_t expression_count,
                                      const char* const* expressions,
                                      hrt_nvrtc_output_t** out_output) {
  size_t image_length = 0;
  HRT_RETURN_IF_ERROR(
      cubin ? HRT_NVRTC_CALL(nvrtc, nvrtcGetCUBINSize, (program, &image_length))
            : HRT_NVRTC_CALL(nvrtc, nvrtcGetPTXSize, (program, &image_length)));
  // The PTX size counts its NUL.
  if (image_length <= (cubin ? 0u : 1u)) {
    return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                           "NVRTC made no %s (an option such as -dlto asks it "
                           "for other output)",
                           cubin ? "cubin" : "PTX");
  }
  // The lowered names belong to the program, which the caller destroys.
  const char** lowered = NULL;
  HRT_RETURN_IF_ERROR(hrt_allocate((expression_count + 1) * sizeof(char*),
                                   "lowered names", (void**)&lowered));
  hrt_status_t status = HRT_OK;
  for (uint32_t i = 0; i < expression_count && status == HRT_OK; ++i) {
    status = hrt_status_annotate(
        HRT_NVRTC_CALL(nvrtc, nvrtcGetLoweredName,
                       (program, expressions[i], &lowered[i])),
        "name expression '%s'", expressions[i]);
  }
  hrt_nvrtc_output_t* output = NULL;
  if (status == HRT_OK) {
    status = hrt_nvrtc_output_allocate(cubin, image_length, expression_count,
                                       lowered, &output);
  }
  free(lowered);
  if (status != HRT_OK) return status;
  char* image = (char*)output->image;
  status = cubin ? HRT_NVRTC_CALL(nvrtc, nvrtcGetCUBIN, (program, image))
                 : HRT_NVRTC_CALL(nvrtc, nvrtcGetPTX, (program, image));
  if (status != HRT_OK) {
    free(output);
    return status;
  }
  *out_output = output;
  return HRT_OK;
}

// Creates *out_program (the caller destroys it; NULL when creation failed)
// and compiles it, as hrt_nvrtc_compile says. A compile failure is
// NVRTC's status: the caller reads the log.
static hrt_status_t hrt_nvrtc_build(const hrt_nvrtc_t* nvrtc,
                                    const char* source,
                                    const char* source_name,
                                    uint32_t option_count,
                                    const char* const* options,
                                    uint32_t expression_count,
                                    const char* const* expressions,
                                    const char* target_option,
                                    hrt_nvrtc_program_t* out_program) {
  atomic_fetch_add(&hrt_nvrtc_compiles, 1);
  *out_program = NULL;
  const char** all_options = NULL;
  HRT_RETURN_IF_ERROR(hrt_allocate((option_count + 2) * sizeof(char*),
                                   "compiler options", (void**)&all_options));
  // The target first: a user option that takes the next argument as its
  // value ("-I", "--include-path") cannot swallow it. NVRTC looks for a
  // quoted include in the folder of the program's name: for a name that is
  // no absolute path that folder is the current directory, which must never
  // be searched unless the user asks (-I.).
  uint32_t count = 0;
  all_options[count++] = target_option;
  if (source_name[0] != '/') all_options[count++] = "--no-source-include";
  for (uint32_t i = 0; i < option_count; ++i) all_options[count++] = options[i];
  hrt_status_t status =
      HRT_NVRTC_CALL(nvrtc, nvrtcCreateProgram,
                     (out_program, source, source_name, 0, NULL, NULL));
  for (uint32_t i = 0; i < expression_count && status == HRT_OK; ++i) {
    status = hrt_status_annotate(HRT_NVRTC_CALL(nvrtc, nvrtcAddNameExpression,
                                                (*out_program, expressions[i])),
                                 "name expression '%s'", expressions[i]);
  }
  if (status == HRT_OK) {
    status = HRT_NVRTC_CALL(nvrtc, nvrtcCompileProgram,
                            (*out_program, (int)count, all_options));
  }
  free(all_options);
  return status;
}

hrt_status_t hrt_nvrtc_compile(const hrt_nvrtc_t* nvrtc, const char* source,
                               const char* source_name, uint32_t option_count,
                               const char* const* options,
                               uint32_t expression_count,
                               const char* const* expressions,
                               const hrt_nvrtc_target_t* target,
                               hrt_nvrtc_output_t** out_output) {
  hrt_nvrtc_program_t program = NULL;
  hrt_status_t status =
      hrt_nvrtc_build(nvrtc, source, source_name, option_count, options,
                      expression_count, expressions, target->option, &program);
  if (status != HRT_OK && program) {
    char* log = hrt_nvrtc_read_log(nvrtc, program);
    status = hrt_nvrtc_compile_error(nvrtc, log, status, source_name);
    free(log);
  } else if (status == HRT_OK) {
    status = hrt_nvrtc_collect(nvrtc, program, target->cubin, expression_count,
                               expressions, out_output);
  }
  if (program) (void)nvrtc->nvrtcDestroyProgram(&program);
  return status;
}

hrt_status_t hrt_nvrtc_compile_check(const hrt_nvrtc_t* nvrtc,
                                     const char* source,
                                     const char* source_name,
                                     uint32_t option_count,
                                     const char* const* options,
                                     const hrt_nvrtc_target_t* target,
                                     hrt_nvrtc_output_t** out_output,
                                     char** out_log) {
  hrt_nvrtc_program_t program = NULL;
  hrt_status_t status =
      hrt_nvrtc_build(nvrtc, source, source_name, option_count, options, 0,
                      NULL, target->option, &program);
  char* log = program ? hrt_nvrtc_read_log(nvrtc, program) : NULL;
  if (program && log == NULL) log = calloc(1, 1);  // an empty log
  if (status != HRT_OK && program) {
    status = hrt_nvrtc_compile_error(nvrtc, log, status, source_name);
  } else if (status == HRT_OK) {
    status = hrt_nvrtc_collect(nvrtc, program, false, 0, NULL, out_output);
  }
  if (program) (void)nvrtc->nvrtcDestroyProgram(&program);
  *out_log = log;
  return status;
}

uint64_t hrt_nvrtc_compile_count(void) {
  return atomic_load(&hrt_nvrtc_compiles);
}
