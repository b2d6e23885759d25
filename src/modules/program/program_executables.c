#include "modules/program/program_executables.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/file.h"
#include "modules/program/program_fields.h"

// The largest kernel file (PTX, cubin, fatbin, CPU library) an executable may
// name, 1 GiB: far above any real kernel image, far below what reading a
// device file "whole" would try (docs/module-format.md).
#define HRT_PROGRAM_MAX_KERNEL_FILE_BYTES (UINT64_C(1) << 30)

static hrt_status_t hrt_resolve_path(hrt_program_parser_t* parser,
                                     const char* file, const char* path,
                                     const char** out) {
  if (file[0] == '/') {
    *out = file;
    return HRT_OK;
  }
  if (!parser->base_dir) {
    return hrt_program_field_error(
        HRT_STATUS_INVALID_ARGUMENT, path,
        "relative path '%s' needs a module file (load the "
        "module from a path, or give an absolute path)",
        file);
  }
  size_t length = strlen(parser->base_dir) + strlen(file) + 2;
  char* joined = NULL;
  HRT_RETURN_IF_ERROR(hrt_program_alloc(parser, length, (void**)&joined));
  snprintf(joined, length, "%s/%s", parser->base_dir, file);
  *out = joined;
  return HRT_OK;
}

// The most entries a CUDA executable may declare, and compiler options a
// CUDA source may give.
#define HRT_PROGRAM_MAX_ENTRY_DECLS 4096
#define HRT_PROGRAM_MAX_OPTIONS 256

// "entries": {"name": ["buffer", "u32", ...] or {"expression": "...",
// "params": [...]}, ...}. `source`: whether name expressions are allowed.
static hrt_status_t hrt_parse_entry_decls(hrt_program_parser_t* parser,
                                          const hrt_json_t* json, bool source,
                                          const char* path,
                                          hrt_kind_spec_t* out) {
  HRT_RETURN_IF_ERROR(hrt_program_expect(json, HRT_JSON_OBJECT, path));
  if (json->length == 0 || json->length > HRT_PROGRAM_MAX_ENTRY_DECLS) {
    return hrt_program_field_error(HRT_STATUS_INVALID_ARGUMENT, path,
                                   "must declare 1 to %d entries",
                                   HRT_PROGRAM_MAX_ENTRY_DECLS);
  }
  out->entry_decl_count = (uint32_t)json->length;
  HRT_RETURN_IF_ERROR(
      hrt_program_alloc(parser, json->length * sizeof(*out->entry_decls),
                        (void**)&out->entry_decls));
  for (size_t i = 0; i < json->length; ++i) {
    hrt_hal_entry_decl_t* decl = &out->entry_decls[i];
    *decl = (hrt_hal_entry_decl_t){.name = json->keys[i]};
    char entry_path[HRT_PATH_MAX];
    hrt_program_path_format(entry_path, "%s.%s", path, json->keys[i]);
    if (!json->keys[i][0]) {
      return hrt_program_field_error(HRT_STATUS_INVALID_ARGUMENT, path,
                                     "an entry name must not be empty");
    }
    const hrt_json_t* value = &json->items[i];
    const hrt_json_t* params = value;
    char params_path[HRT_PATH_MAX];
    hrt_program_path_format(params_path, "%s", entry_path);
    if (value->type == HRT_JSON_OBJECT) {
      static const char* const known[] = {"params", "expression"};
      HRT_RETURN_IF_ERROR(hrt_program_check_keys(value, known, 2, entry_path));
      const hrt_json_t* expression = hrt_json_get(value, "expression");
      if (expression) {
        char expression_path[HRT_PATH_MAX];
        hrt_program_path_format(expression_path, "%s.expression", entry_path);
        if (!source) {
          return hrt_program_field_error(
              HRT_STATUS_INVALID_ARGUMENT, expression_path,
              "a name expression applies to 'source' "
              "only");
        }
        HRT_RETURN_IF_ERROR(
            hrt_program_expect(expression, HRT_JSON_STRING, expression_path));
        if (!expression->length) {
          return hrt_program_field_error(HRT_STATUS_INVALID_ARGUMENT,
                                         expression_path,
                                         "must be a C++ name expression");
        }
        decl->expression = expression->string;
      }
      params = hrt_json_get(value, "params");
      hrt_program_path_format(params_path, "%s.params", entry_path);
      if (!params) continue;
    }
    if (params->type != HRT_JSON_ARRAY) {
      return hrt_program_field_error(
          HRT_STATUS_INVALID_ARGUMENT, params_path,
          "must be an array of parameter types ('buffer', "
          "'u32', 'i32', 'f32', 'u64', 'i64', 'f64')%s",
          value == params ? " or an object" : "");
    }
    hrt_hal_param_type_t* types = NULL;
    HRT_RETURN_IF_ERROR(hrt_program_alloc(
        parser, (params->length + 1) * sizeof(*types), (void**)&types));
    uint32_t buffers = 0, words = 0;
    for (size_t p = 0; p < params->length; ++p) {
      char item_path[HRT_PATH_MAX];
      hrt_program_path_format(item_path, "%s[%zu]", params_path, p);
      const hrt_json_t* item = &params->items[p];
      if (item->type != HRT_JSON_STRING ||
          !hrt_hal_param_type_parse(item->string, &types[p])) {
        return hrt_program_field_error(HRT_STATUS_INVALID_ARGUMENT, item_path,
                                       "must be one of 'buffer', 'u32', 'i32', "
                                       "'f32', 'u64', 'i64', 'f64'");
      }
      const uint32_t type_words = hrt_hal_param_type_words(types[p]);
      buffers += type_words == 0;
      words += type_words;
      if (buffers > HRT_HAL_MAX_DISPATCH_BINDINGS ||
          words > HRT_HAL_MAX_DISPATCH_CONSTANTS) {
        return hrt_program_field_error(
            HRT_STATUS_INVALID_ARGUMENT, item_path,
            "too many parameters: at most %d buffers and "
            "%d constant words (64-bit scalars take two)",
            HRT_HAL_MAX_DISPATCH_BINDINGS, HRT_HAL_MAX_DISPATCH_CONSTANTS);
      }
    }
    decl->typed = true;
    decl->param_count = (uint32_t)params->length;
    decl->params = types;
  }
  return HRT_OK;
}

// "options": ["--use_fast_math", "-DN=4", ...].
static hrt_status_t hrt_parse_options(hrt_program_parser_t* parser,
                                      const hrt_json_t* json, const char* path,
                                      hrt_kind_spec_t* out) {
  HRT_RETURN_IF_ERROR(hrt_program_expect(json, HRT_JSON_ARRAY, path));
  if (json->length > HRT_PROGRAM_MAX_OPTIONS) {
    return hrt_program_field_error(HRT_STATUS_INVALID_ARGUMENT, path,
                                   "at most %d options",
                                   HRT_PROGRAM_MAX_OPTIONS);
  }
  out->option_count = (uint32_t)json->length;
  HRT_RETURN_IF_ERROR(hrt_program_alloc(
      parser, (json->length + 1) * sizeof(char*), (void**)&out->options));
  for (size_t i = 0; i < json->length; ++i) {
    char item_path[HRT_PATH_MAX];
    hrt_program_path_format(item_path, "%s[%zu]", path, i);
    HRT_RETURN_IF_ERROR(
        hrt_program_expect(&json->items[i], HRT_JSON_STRING, item_path));
    if (!json->items[i].length) {
      return hrt_program_field_error(HRT_STATUS_INVALID_ARGUMENT, item_path,
                                     "must not be empty");
    }
    out->options[i] = json->items[i].string;
  }
  return HRT_OK;
}

// {"builtin": true} or {"<field>": "path"} (or, for PTX and CUDA source,
// {"<field>": {"text": "..."}}). With `cuda`, "entries" may accompany any
// field but builtin, and "options" may accompany "source".
static hrt_status_t hrt_parse_kind(hrt_program_parser_t* parser,
                                   const hrt_json_t* spec,
                                   const char* const* fields,
                                   const hrt_hal_executable_format_t* formats,
                                   int field_count, bool cuda,
                                   const char* executable_name,
                                   const char* path, hrt_kind_spec_t* out) {
  HRT_RETURN_IF_ERROR(hrt_program_expect(spec, HRT_JSON_OBJECT, path));
  const hrt_json_t* entries = cuda ? hrt_json_get(spec, "entries") : NULL;
  const hrt_json_t* options = cuda ? hrt_json_get(spec, "options") : NULL;
  if (spec->length !=
      1 + (size_t)(entries != NULL) + (size_t)(options != NULL)) {
    return hrt_program_field_error(
        HRT_STATUS_INVALID_ARGUMENT, path,
        "must have exactly one of 'builtin'%s%s%s%s%s%s%s",
        field_count > 0 ? ", '" : "", field_count > 0 ? fields[0] : "",
        field_count > 0 ? "'" : "", field_count > 1 ? ", '" : "",
        field_count > 1 ? fields[1] : "", field_count > 1 ? "', ..." : "",
        cuda ? " (with 'entries', and 'options' for 'source')" : "");
  }
  size_t index = 0;
  while (spec->items + index == entries || spec->items + index == options) {
    ++index;
  }
  char field_path[HRT_PATH_MAX];
  hrt_program_path_format(field_path, "%s.%s", path, spec->keys[index]);
  const hrt_json_t* value = &spec->items[index];
  out->present = true;
  if (strcmp(spec->keys[index], "builtin") == 0) {
    if (value->type != HRT_JSON_BOOL || !value->boolean) {
      return hrt_program_field_error(HRT_STATUS_INVALID_ARGUMENT, field_path,
                                     "must be true");
    }
    out->format = HRT_HAL_EXECUTABLE_FORMAT_BUILTIN;
    if (entries || options) {
      return hrt_program_field_error(HRT_STATUS_INVALID_ARGUMENT, path,
                                     "'%s' does not apply to built-in kernels",
                                     entries ? "entries" : "options");
    }
    return HRT_OK;
  }
  int field = 0;
  while (field < field_count && strcmp(spec->keys[index], fields[field]) != 0) {
    ++field;
  }
  if (field == field_count) {
    return hrt_program_field_error(HRT_STATUS_INVALID_ARGUMENT, path,
                                   "unknown executable field '%s'",
                                   spec->keys[index]);
  }
  out->format = formats[field];
  const bool source = out->format == HRT_HAL_EXECUTABLE_FORMAT_CUDA_SOURCE;
  char member_path[HRT_PATH_MAX];
  if (options) {
    hrt_program_path_format(member_path, "%s.options", path);
    if (!source) {
      return hrt_program_field_error(HRT_STATUS_INVALID_ARGUMENT, member_path,
                                     "compiler options apply to 'source' only");
    }
    HRT_RETURN_IF_ERROR(hrt_parse_options(parser, options, member_path, out));
  }
  if (entries) {
    hrt_program_path_format(member_path, "%s.entries", path);
    HRT_RETURN_IF_ERROR(
        hrt_parse_entry_decls(parser, entries, source, member_path, out));
  }
  if (value->type == HRT_JSON_OBJECT &&
      (out->format == HRT_HAL_EXECUTABLE_FORMAT_PTX || source)) {
    static const char* const known[] = {"text"};
    HRT_RETURN_IF_ERROR(hrt_program_check_keys(value, known, 1, field_path));
    char text_path[HRT_PATH_MAX];
    hrt_program_path_format(text_path, "%s.text", field_path);
    const hrt_json_t* text = hrt_json_get(value, "text");
    HRT_RETURN_IF_ERROR(hrt_program_expect(text, HRT_JSON_STRING, text_path));
    out->data = text->string;
    if (source) {
      const size_t length = strlen(executable_name) + 4;
      char* name = NULL;
      HRT_RETURN_IF_ERROR(hrt_program_alloc(parser, length, (void**)&name));
      snprintf(name, length, "%s.cu", executable_name);
      out->source_name = name;
    }
    return HRT_OK;
  }
  HRT_RETURN_IF_ERROR(hrt_program_expect(value, HRT_JSON_STRING, field_path));
  if (!value->length) {
    return hrt_program_field_error(HRT_STATUS_INVALID_ARGUMENT, field_path,
                                   "must be a file path");
  }
  HRT_RETURN_IF_ERROR(
      hrt_resolve_path(parser, value->string, field_path, &out->path));
  // Its path names it to NVRTC: includes then resolve next to it.
  if (source) out->source_name = out->path;
  return HRT_OK;
}

hrt_status_t hrt_program_parse_executables(hrt_program_parser_t* parser,
                                           const hrt_json_t* executables) {
  HRT_RETURN_IF_ERROR(
      hrt_program_expect(executables, HRT_JSON_OBJECT, "executables"));
  hrt_program_module_t* module = parser->module;
  module->executable_count = (uint32_t)executables->length;
  HRT_RETURN_IF_ERROR(hrt_program_alloc(
      parser, executables->length * sizeof(hrt_executable_spec_t),
      (void**)&module->executables));
  static const char* const local_fields[] = {"library"};
  static const hrt_hal_executable_format_t local_formats[] = {
      HRT_HAL_EXECUTABLE_FORMAT_CPU_LIBRARY};
  static const char* const cuda_fields[] = {"ptx", "cubin", "fatbin", "source"};
  static const hrt_hal_executable_format_t cuda_formats[] = {
      HRT_HAL_EXECUTABLE_FORMAT_PTX, HRT_HAL_EXECUTABLE_FORMAT_CUBIN,
      HRT_HAL_EXECUTABLE_FORMAT_FATBIN, HRT_HAL_EXECUTABLE_FORMAT_CUDA_SOURCE};
  static const char* const kinds[] = {"local", "cuda"};
  for (size_t i = 0; i < executables->length; ++i) {
    hrt_executable_spec_t* spec = &module->executables[i];
    const hrt_json_t* entry = &executables->items[i];
    char path[HRT_PATH_MAX];
    hrt_program_path_format(path, "executables.%s", executables->keys[i]);
    if (!hrt_program_is_identifier(executables->keys[i])) {
      return hrt_program_field_error(HRT_STATUS_INVALID_ARGUMENT, path,
                                     "'%s' is not a name",
                                     executables->keys[i]);
    }
    spec->name = executables->keys[i];
    HRT_RETURN_IF_ERROR(hrt_program_expect(entry, HRT_JSON_OBJECT, path));
    HRT_RETURN_IF_ERROR(hrt_program_check_keys(entry, kinds, 2, path));
    if (entry->length == 0) {
      return hrt_program_field_error(
          HRT_STATUS_INVALID_ARGUMENT, path,
          "gives no device kind (expected 'local' and/or "
          "'cuda')");
    }
    char kind_path[HRT_PATH_MAX];
    const hrt_json_t* local = hrt_json_get(entry, "local");
    if (local) {
      hrt_program_path_format(kind_path, "%s.local", path);
      HRT_RETURN_IF_ERROR(hrt_parse_kind(parser, local, local_fields,
                                         local_formats, 1, false, spec->name,
                                         kind_path, &spec->local));
    }
    const hrt_json_t* cuda = hrt_json_get(entry, "cuda");
    if (cuda) {
      hrt_program_path_format(kind_path, "%s.cuda", path);
      HRT_RETURN_IF_ERROR(hrt_parse_kind(parser, cuda, cuda_fields,
                                         cuda_formats, 4, true, spec->name,
                                         kind_path, &spec->cuda));
    }
    spec->builtin = (spec->local.present &&
                     spec->local.format == HRT_HAL_EXECUTABLE_FORMAT_BUILTIN) ||
                    (spec->cuda.present &&
                     spec->cuda.format == HRT_HAL_EXECUTABLE_FORMAT_BUILTIN);
    // Built-in signatures type a built-in's dispatches; declarations could
    // contradict them.
    if (spec->builtin && spec->cuda.entry_decl_count) {
      return hrt_program_field_error(
          HRT_STATUS_INVALID_ARGUMENT, kind_path,
          "'entries' cannot be declared for an executable "
          "whose other kind is built-in kernels");
    }
  }
  return HRT_OK;
}

hrt_status_t hrt_program_find_entry_decl(const hrt_executable_spec_t* spec,
                                         const char* entry, const char* path,
                                         const hrt_hal_entry_decl_t** out) {
  *out = NULL;
  if (spec->cuda.entry_decl_count == 0) return HRT_OK;
  for (uint32_t i = 0; i < spec->cuda.entry_decl_count; ++i) {
    if (strcmp(spec->cuda.entry_decls[i].name, entry) == 0) {
      *out = &spec->cuda.entry_decls[i];
      return HRT_OK;
    }
  }
  return hrt_program_field_error(HRT_STATUS_NOT_FOUND, path,
                                 "executable '%s' declares no entry '%s' "
                                 "(executables.%s.cuda.entries)",
                                 spec->name, entry, spec->name);
}

hrt_status_t hrt_program_load_executable(hrt_hal_device_t* device,
                                         const hrt_executable_spec_t* spec,
                                         hrt_hal_executable_t** out) {
  const char* kind = hrt_hal_device_info(device)->kind;
  const hrt_kind_spec_t* kind_spec = strcmp(kind, "cuda") == 0    ? &spec->cuda
                                     : strcmp(kind, "local") == 0 ? &spec->local
                                                                  : NULL;
  if (!kind_spec || !kind_spec->present) {
    return hrt_status_make(HRT_STATUS_NOT_FOUND,
                           "executables.%s: no executable for device kind "
                           "'%s' (device %s)",
                           spec->name, kind, hrt_hal_device_info(device)->uri);
  }
  hrt_hal_executable_params_t params = {
      .format = kind_spec->format,
      .source_name = kind_spec->source_name,
      .option_count = kind_spec->option_count,
      .options = kind_spec->options,
      .entry_decl_count = kind_spec->entry_decl_count,
      .entry_decls = kind_spec->entry_decls,
  };
  char* file_data = NULL;
  hrt_status_t status = HRT_OK;
  if (kind_spec->format == HRT_HAL_EXECUTABLE_FORMAT_CPU_LIBRARY) {
    // dlopen would block on a FIFO: the library gets the same check as the
    // images read below, by path since the loader opens it itself.
    params.path = kind_spec->path;
    status = hrt_file_check(kind_spec->path, HRT_PROGRAM_MAX_KERNEL_FILE_BYTES,
                            "a kernel file");
  } else if (kind_spec->data) {
    params.data = kind_spec->data;
    params.data_length = strlen(kind_spec->data) + 1;
  } else if (kind_spec->path) {
    size_t length = 0;
    status = hrt_file_read(kind_spec->path, HRT_PROGRAM_MAX_KERNEL_FILE_BYTES,
                           "a kernel file", &file_data, &length);
    params.data = file_data;
    // Text formats get the NUL hrt_file_read puts after the data.
    params.data_length =
        length + (kind_spec->format == HRT_HAL_EXECUTABLE_FORMAT_PTX ||
                  kind_spec->format == HRT_HAL_EXECUTABLE_FORMAT_CUDA_SOURCE);
  }
  if (status == HRT_OK) {
    status = hrt_hal_device_create_executable(device, &params, out);
  }
  free(file_data);
  return hrt_status_annotate(status, "executables.%s", spec->name);
}
