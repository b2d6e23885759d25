#include "modules/program_module.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/arena.h"
#include "base/file.h"
#include "base/half.h"
#include "base/json.h"
#include "base/threads.h"
#include "hal/builtin_signatures.h"
#include "modules/hal_module.h"
#include "vm/context.h"

#define HRT_PROGRAM_FORMAT "halrt.module/1"
#define HRT_PROGRAM_MAX_VALUES 1024
#define HRT_PROGRAM_MAX_OPS 65536
// The largest kernel file (PTX, cubin, fatbin, CPU library) an executable may
// name, 1 GiB: far above any real kernel image, far below what reading a
// device file "whole" would try (docs/module-format.md).
#define HRT_PROGRAM_MAX_KERNEL_FILE_BYTES (UINT64_C(1) << 30)

//===----------------------------------------------------------------------===//
// The parsed module
//===----------------------------------------------------------------------===//

// How one device kind gets an executable.
typedef struct hrt_kind_spec_s {
  bool present;
  hrt_hal_executable_format_t format;
  const char* path;  // resolved against the module's directory, or NULL
  const char* data;  // inline PTX or CUDA source text, or NULL
  // CUDA source: the program's name for compile logs, compiler options.
  const char* source_name;
  uint32_t option_count;
  const char** options;
  // CUDA formats: declared entries (0: all, inferred).
  uint32_t entry_decl_count;
  hrt_hal_entry_decl_t* entry_decls;
} hrt_kind_spec_t;

typedef struct hrt_executable_spec_s {
  const char* name;
  hrt_kind_spec_t local;
  hrt_kind_spec_t cuda;
  bool builtin;  // builtin on some kind: entries are built-in kernels
} hrt_executable_spec_t;

typedef enum hrt_op_kind_e {
  HRT_OP_DISPATCH,
  HRT_OP_FILL,
  HRT_OP_COPY,
  HRT_OP_TRACE,
  HRT_OP_BARRIER,
} hrt_op_kind_t;

typedef struct hrt_op_s {
  hrt_op_kind_t kind;
  // dispatch
  uint32_t executable;
  const char* entry;
  const char* kernel;                        // "executable.entry"
  const hrt_builtin_signature_t* signature;  // built-in kernels only
  uint32_t workgroup_count[3];
  uint32_t workgroup_size[3];
  uint32_t constant_count;
  uint32_t* constants;
  // dispatch bindings, trace values, or [target] / [source, target]
  uint32_t operand_count;
  uint32_t* operands;  // value indices
  // fill
  uint64_t pattern;
  uint32_t pattern_length;
  // trace: its key; dispatch: the key of its traceDispatches trace,
  // "function:op:entry"
  const char* key;
} hrt_op_t;

typedef struct hrt_function_s {
  const char* qualified_name;  // "module.function"
  uint32_t value_count;        // inputs, then outputs, then locals
  hrt_vm_tensor_type_t* types;
  uint64_t* byte_lengths;
  // What one call allocates: the outputs' and locals' bytes (saturating).
  uint64_t call_bytes;
  uint32_t op_count;
  hrt_op_t* ops;
} hrt_function_t;

typedef struct hrt_program_module_s {
  hrt_vm_module_t base;
  hrt_json_document_t* document;  // names point into it
  hrt_arena_t arena;              // everything else parsed
  uint32_t executable_count;
  hrt_executable_spec_t* executables;
  hrt_function_t* functions;    // [base.function_count]
  hrt_vm_function_def_t* defs;  // [base.function_count]
  uint32_t dispatch_count;
  const char** dispatch_keys;  // [dispatch_count]: every dispatch's op->key
} hrt_program_module_t;

//===----------------------------------------------------------------------===//
// Parsing helpers: every error names the field's path.
//===----------------------------------------------------------------------===//

// Field paths in messages ("functions.main.body[2].bindings[1]").
#define HRT_PATH_MAX 512
static void hrt_path_format(char* out, const char* format, ...)
    HRT_PRINTF(2, 3);
static void hrt_path_format(char* out, const char* format, ...) {
  va_list args;
  va_start(args, format);
  vsnprintf(out, HRT_PATH_MAX, format, args);
  va_end(args);
}

typedef struct hrt_parser_s {
  hrt_program_module_t* module;
  const char* base_dir;
} hrt_parser_t;

static hrt_status_t hrt_field_error(hrt_status_code_t code, const char* path,
                                    const char* format, ...) HRT_PRINTF(3, 4);
static hrt_status_t hrt_field_error(hrt_status_code_t code, const char* path,
                                    const char* format, ...) {
  char message[512];
  va_list args;
  va_start(args, format);
  vsnprintf(message, sizeof(message), format, args);
  va_end(args);
  return hrt_status_make(code, "%s: %s", path, message);
}

static hrt_status_t hrt_expect(const hrt_json_t* value, hrt_json_type_t type,
                               const char* path) {
  if (!value || value->type != type) {
    return hrt_field_error(
        HRT_STATUS_INVALID_ARGUMENT, path, "must be %s %s%s%s",
        type == HRT_JSON_ARRAY || type == HRT_JSON_OBJECT ? "an" : "a",
        hrt_json_type_name(type), value ? ", got " : "",
        value ? hrt_json_type_name(value->type) : " (missing)");
  }
  return HRT_OK;
}

// Rejects members not in `known`, so typos do not pass silently.
static hrt_status_t hrt_check_keys(const hrt_json_t* object,
                                   const char* const* known, int count,
                                   const char* path) {
  for (size_t i = 0; i < object->length; ++i) {
    bool found = false;
    for (int k = 0; k < count && !found; ++k) {
      found = strcmp(object->keys[i], known[k]) == 0;
    }
    if (!found) {
      return hrt_field_error(HRT_STATUS_INVALID_ARGUMENT, path,
                             "unknown field '%s'", object->keys[i]);
    }
  }
  return HRT_OK;
}

static bool hrt_is_identifier(const char* text) {
  if (!text[0] || (text[0] >= '0' && text[0] <= '9')) return false;
  for (const char* c = text; *c; ++c) {
    if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
          (*c >= '0' && *c <= '9') || *c == '_')) {
      return false;
    }
  }
  return true;
}

static hrt_status_t hrt_expect_identifier(const hrt_json_t* value,
                                          const char* path) {
  HRT_RETURN_IF_ERROR(hrt_expect(value, HRT_JSON_STRING, path));
  if (!hrt_is_identifier(value->string)) {
    return hrt_field_error(HRT_STATUS_INVALID_ARGUMENT, path,
                           "'%s' is not a name (letters, digits, '_'; not "
                           "starting with a digit)",
                           value->string);
  }
  return HRT_OK;
}

// An integer in [min, max].
static hrt_status_t hrt_expect_integer(const hrt_json_t* value, int64_t min,
                                       int64_t max, const char* path,
                                       int64_t* out) {
  if (!value || value->type != HRT_JSON_NUMBER || !value->fits_int64 ||
      value->integer < min || value->integer > max) {
    return hrt_field_error(HRT_STATUS_INVALID_ARGUMENT, path,
                           "must be an integer in [%lld, %lld]", (long long)min,
                           (long long)max);
  }
  *out = value->integer;
  return HRT_OK;
}

static hrt_status_t hrt_alloc(hrt_parser_t* parser, size_t size, void** out) {
  return hrt_arena_allocate(&parser->module->arena, size, "module", out);
}

//===----------------------------------------------------------------------===//
// Executables
//===----------------------------------------------------------------------===//

static hrt_status_t hrt_resolve_path(hrt_parser_t* parser, const char* file,
                                     const char* path, const char** out) {
  if (file[0] == '/') {
    *out = file;
    return HRT_OK;
  }
  if (!parser->base_dir) {
    return hrt_field_error(HRT_STATUS_INVALID_ARGUMENT, path,
                           "relative path '%s' needs a module file (load the "
                           "module from a path, or give an absolute path)",
                           file);
  }
  size_t length = strlen(parser->base_dir) + strlen(file) + 2;
  char* joined = NULL;
  HRT_RETURN_IF_ERROR(hrt_alloc(parser, length, (void**)&joined));
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
static hrt_status_t hrt_parse_entry_decls(hrt_parser_t* parser,
                                          const hrt_json_t* json, bool source,
                                          const char* path,
                                          hrt_kind_spec_t* out) {
  HRT_RETURN_IF_ERROR(hrt_expect(json, HRT_JSON_OBJECT, path));
  if (json->length == 0 || json->length > HRT_PROGRAM_MAX_ENTRY_DECLS) {
    return hrt_field_error(HRT_STATUS_INVALID_ARGUMENT, path,
                           "must declare 1 to %d entries",
                           HRT_PROGRAM_MAX_ENTRY_DECLS);
  }
  out->entry_decl_count = (uint32_t)json->length;
  HRT_RETURN_IF_ERROR(hrt_alloc(parser,
                                json->length * sizeof(*out->entry_decls),
                                (void**)&out->entry_decls));
  for (size_t i = 0; i < json->length; ++i) {
    hrt_hal_entry_decl_t* decl = &out->entry_decls[i];
    *decl = (hrt_hal_entry_decl_t){.name = json->keys[i]};
    char entry_path[HRT_PATH_MAX];
    hrt_path_format(entry_path, "%s.%s", path, json->keys[i]);
    if (!json->keys[i][0]) {
      return hrt_field_error(HRT_STATUS_INVALID_ARGUMENT, path,
                             "an entry name must not be empty");
    }
    const hrt_json_t* value = &json->items[i];
    const hrt_json_t* params = value;
    char params_path[HRT_PATH_MAX];
    hrt_path_format(params_path, "%s", entry_path);
    if (value->type == HRT_JSON_OBJECT) {
      static const char* const known[] = {"params", "expression"};
      HRT_RETURN_IF_ERROR(hrt_check_keys(value, known, 2, entry_path));
      const hrt_json_t* expression = hrt_json_get(value, "expression");
      if (expression) {
        char expression_path[HRT_PATH_MAX];
        hrt_path_format(expression_path, "%s.expression", entry_path);
        if (!source) {
          return hrt_field_error(HRT_STATUS_INVALID_ARGUMENT, expression_path,
                                 "a name expression applies to 'source' "
                                 "only");
        }
        HRT_RETURN_IF_ERROR(
            hrt_expect(expression, HRT_JSON_STRING, expression_path));
        if (!expression->length) {
          return hrt_field_error(HRT_STATUS_INVALID_ARGUMENT, expression_path,
                                 "must be a C++ name expression");
        }
        decl->expression = expression->string;
      }
      params = hrt_json_get(value, "params");
      hrt_path_format(params_path, "%s.params", entry_path);
      if (!params) continue;
    }
    if (params->type != HRT_JSON_ARRAY) {
      return hrt_field_error(HRT_STATUS_INVALID_ARGUMENT, params_path,
                             "must be an array of parameter types ('buffer', "
                             "'u32', 'i32', 'f32', 'u64', 'i64', 'f64')%s",
                             value == params ? " or an object" : "");
    }
    hrt_hal_param_type_t* types = NULL;
    HRT_RETURN_IF_ERROR(hrt_alloc(parser, (params->length + 1) * sizeof(*types),
                                  (void**)&types));
    uint32_t buffers = 0, words = 0;
    for (size_t p = 0; p < params->length; ++p) {
      char item_path[HRT_PATH_MAX];
      hrt_path_format(item_path, "%s[%zu]", params_path, p);
      const hrt_json_t* item = &params->items[p];
      if (item->type != HRT_JSON_STRING ||
          !hrt_hal_param_type_parse(item->string, &types[p])) {
        return hrt_field_error(HRT_STATUS_INVALID_ARGUMENT, item_path,
                               "must be one of 'buffer', 'u32', 'i32', "
                               "'f32', 'u64', 'i64', 'f64'");
      }
      const uint32_t type_words = hrt_hal_param_type_words(types[p]);
      buffers += type_words == 0;
      words += type_words;
      if (buffers > HRT_HAL_MAX_DISPATCH_BINDINGS ||
          words > HRT_HAL_MAX_DISPATCH_CONSTANTS) {
        return hrt_field_error(HRT_STATUS_INVALID_ARGUMENT, item_path,
                               "too many parameters: at most %d buffers and "
                               "%d constant words (64-bit scalars take two)",
                               HRT_HAL_MAX_DISPATCH_BINDINGS,
                               HRT_HAL_MAX_DISPATCH_CONSTANTS);
      }
    }
    decl->typed = true;
    decl->param_count = (uint32_t)params->length;
    decl->params = types;
  }
  return HRT_OK;
}

// "options": ["--use_fast_math", "-DN=4", ...].
static hrt_status_t hrt_parse_options(hrt_parser_t* parser,
                                      const hrt_json_t* json, const char* path,
                                      hrt_kind_spec_t* out) {
  HRT_RETURN_IF_ERROR(hrt_expect(json, HRT_JSON_ARRAY, path));
  if (json->length > HRT_PROGRAM_MAX_OPTIONS) {
    return hrt_field_error(HRT_STATUS_INVALID_ARGUMENT, path,
                           "at most %d options", HRT_PROGRAM_MAX_OPTIONS);
  }
  out->option_count = (uint32_t)json->length;
  HRT_RETURN_IF_ERROR(hrt_alloc(parser, (json->length + 1) * sizeof(char*),
                                (void**)&out->options));
  for (size_t i = 0; i < json->length; ++i) {
    char item_path[HRT_PATH_MAX];
    hrt_path_format(item_path, "%s[%zu]", path, i);
    HRT_RETURN_IF_ERROR(
        hrt_expect(&json->items[i], HRT_JSON_STRING, item_path));
    if (!json->items[i].length) {
      return hrt_field_error(HRT_STATUS_INVALID_ARGUMENT, item_path,
                             "must not be empty");
    }
    out->options[i] = json->items[i].string;
  }
  return HRT_OK;
}

// The file name at the end of `path`.
static const char* hrt_base_name(const char* path) {
  const char* slash = strrchr(path, '/');
  return slash ? slash + 1 : path;
}

// {"builtin": true} or {"<field>": "path"} (or, for PTX and CUDA source,
// {"<field>": {"text": "..."}}). With `cuda`, "entries" may accompany any
// field but builtin, and "options" may accompany "source".
static hrt_status_t hrt_parse_kind(hrt_parser_t* parser, const hrt_json_t* spec,
                                   const char* const* fields,
                                   const hrt_hal_executable_format_t* formats,
                                   int field_count, bool cuda,
                                   const char* executable_name,
                                   const char* path, hrt_kind_spec_t* out) {
  HRT_RETURN_IF_ERROR(hrt_expect(spec, HRT_JSON_OBJECT, path));
  const hrt_json_t* entries = cuda ? hrt_json_get(spec, "entries") : NULL;
  const hrt_json_t* options = cuda ? hrt_json_get(spec, "options") : NULL;
  if (spec->length !=
      1 + (size_t)(entries != NULL) + (size_t)(options != NULL)) {
    return hrt_field_error(
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
  hrt_path_format(field_path, "%s.%s", path, spec->keys[index]);
  const hrt_json_t* value = &spec->items[index];
  out->present = true;
  if (strcmp(spec->keys[index], "builtin") == 0) {
    if (value->type != HRT_JSON_BOOL || !value->boolean) {
      return hrt_field_error(HRT_STATUS_INVALID_ARGUMENT, field_path,
                             "must be true");
    }
    out->format = HRT_HAL_EXECUTABLE_FORMAT_BUILTIN;
    if (entries || options) {
      return hrt_field_error(HRT_STATUS_INVALID_ARGUMENT, path,
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
    return hrt_field_error(HRT_STATUS_INVALID_ARGUMENT, path,
                           "unknown executable field '%s'", spec->keys[index]);
  }
  out->format = formats[field];
  const bool source = out->format == HRT_HAL_EXECUTABLE_FORMAT_CUDA_SOURCE;
  char member_path[HRT_PATH_MAX];
  if (options) {
    hrt_path_format(member_path, "%s.options", path);
    if (!source) {
      return hrt_field_error(HRT_STATUS_INVALID_ARGUMENT, member_path,
                             "compiler options apply to 'source' only");
    }
    HRT_RETURN_IF_ERROR(hrt_parse_options(parser, options, member_path, out));
  }
  if (entries) {
    hrt_path_format(member_path, "%s.entries", path);
    HRT_RETURN_IF_ERROR(
        hrt_parse_entry_decls(parser, entries, source, member_path, out));
  }
  if (value->type == HRT_JSON_OBJECT &&
      (out->format == HRT_HAL_EXECUTABLE_FORMAT_PTX || source)) {
    static const char* const known[] = {"text"};
    HRT_RETURN_IF_ERROR(hrt_check_keys(value, known, 1, field_path));
    char text_path[HRT_PATH_MAX];
    hrt_path_format(text_path, "%s.text", field_path);
    const hrt_json_t* text = hrt_json_get(value, "text");
    HRT_RETURN_IF_ERROR(hrt_expect(text, HRT_JSON_STRING, text_path));
    out->data = text->string;
    if (source) {
      const size_t length = strlen(executable_name) + 4;
      char* name = NULL;
      HRT_RETURN_IF_ERROR(hrt_alloc(parser, length, (void**)&name));
      snprintf(name, length, "%s.cu", executable_name);
      out->source_name = name;
    }
    return HRT_OK;
  }
  HRT_RETURN_IF_ERROR(hrt_expect(value, HRT_JSON_STRING, field_path));
  if (!value->length) {
    return hrt_field_error(HRT_STATUS_INVALID_ARGUMENT, field_path,
                           "must be a file path");
  }
  HRT_RETURN_IF_ERROR(
      hrt_resolve_path(parser, value->string, field_path, &out->path));
  if (source) out->source_name = hrt_base_name(out->path);
  return HRT_OK;
}

static hrt_status_t hrt_parse_executables(hrt_parser_t* parser,
                                          const hrt_json_t* executables) {
  HRT_RETURN_IF_ERROR(hrt_expect(executables, HRT_JSON_OBJECT, "executables"));
  hrt_program_module_t* module = parser->module;
  module->executable_count = (uint32_t)executables->length;
  HRT_RETURN_IF_ERROR(
      hrt_alloc(parser, executables->length * sizeof(hrt_executable_spec_t),
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
    hrt_path_format(path, "executables.%s", executables->keys[i]);
    if (!hrt_is_identifier(executables->keys[i])) {
      return hrt_field_error(HRT_STATUS_INVALID_ARGUMENT, path,
                             "'%s' is not a name", executables->keys[i]);
    }
    spec->name = executables->keys[i];
    HRT_RETURN_IF_ERROR(hrt_expect(entry, HRT_JSON_OBJECT, path));
    HRT_RETURN_IF_ERROR(hrt_check_keys(entry, kinds, 2, path));
    if (entry->length == 0) {
      return hrt_field_error(HRT_STATUS_INVALID_ARGUMENT, path,
                             "gives no device kind (expected 'local' and/or "
                             "'cuda')");
    }
    char kind_path[HRT_PATH_MAX];
    const hrt_json_t* local = hrt_json_get(entry, "local");
    if (local) {
      hrt_path_format(kind_path, "%s.local", path);
      HRT_RETURN_IF_ERROR(hrt_parse_kind(parser, local, local_fields,
                                         local_formats, 1, false, spec->name,
                                         kind_path, &spec->local));
    }
    const hrt_json_t* cuda = hrt_json_get(entry, "cuda");
    if (cuda) {
      hrt_path_format(kind_path, "%s.cuda", path);
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
      return hrt_field_error(HRT_STATUS_INVALID_ARGUMENT, kind_path,
                             "'entries' cannot be declared for an executable "
                             "whose other kind is built-in kernels");
    }
  }
  return HRT_OK;
}

//===----------------------------------------------------------------------===//
// Values (inputs, outputs, locals)
//===----------------------------------------------------------------------===//

static hrt_status_t hrt_parse_value(const hrt_json_t* json, const char* path,
                                    hrt_vm_tensor_type_t* out_type,
                                    uint64_t* out_byte_length) {
  static const char* const known[] = {"name", "dtype", "shape"};
  HRT_RETURN_IF_ERROR(hrt_expect(json, HRT_JSON_OBJECT, path));
  HRT_RETURN_IF_ERROR(hrt_check_keys(json, known, 3, path));
  char field[HRT_PATH_MAX];
  hrt_path_format(field, "%s.name", path);
  const hrt_json_t* name = hrt_json_get(json, "name");
  HRT_RETURN_IF_ERROR(hrt_expect_identifier(name, field));
  out_type->name = name->string;
  hrt_path_format(field, "%s.dtype", path);
  const hrt_json_t* dtype = hrt_json_get(json, "dtype");
  HRT_RETURN_IF_ERROR(hrt_expect(dtype, HRT_JSON_STRING, field));
  HRT_RETURN_IF_ERROR(hrt_status_annotate(
      hrt_hal_element_type_parse(dtype->string, &out_type->element_type), "%s",
      field));
  hrt_path_format(field, "%s.shape", path);
  const hrt_json_t* shape = hrt_json_get(json, "shape");
  HRT_RETURN_IF_ERROR(hrt_expect(shape, HRT_JSON_ARRAY, field));
  if (shape->length > HRT_HAL_MAX_RANK) {
    return hrt_field_error(HRT_STATUS_INVALID_ARGUMENT, field,
                           "rank %zu exceeds the maximum of %d", shape->length,
                           HRT_HAL_MAX_RANK);
  }
  out_type->rank = (uint32_t)shape->length;
  for (size_t d = 0; d < shape->length; ++d) {
    char dim_path[HRT_PATH_MAX];
    hrt_path_format(dim_path, "%s[%zu]", field, d);
    HRT_RETURN_IF_ERROR(hrt_expect_integer(&shape->items[d], 0, INT32_MAX,
                                           dim_path, &out_type->shape[d]));
  }
  HRT_RETURN_IF_ERROR(hrt_status_annotate(
      hrt_hal_shape_byte_length(out_type->element_type, out_type->rank,
                                out_type->shape, out_byte_length),
      "%s", field));
  return HRT_OK;
}

// Parses inputs, outputs and locals into one array, names unique.
static hrt_status_t hrt_parse_values(hrt_parser_t* parser,
                                     const hrt_json_t* function,
                                     const char* path, hrt_function_t* out,
                                     uint32_t* out_input_count,
                                     uint32_t* out_output_count) {
  static const char* const groups[] = {"inputs", "outputs", "locals"};
  const hrt_json_t* lists[3];
  size_t total = 0;
  for (int g = 0; g < 3; ++g) {
    char group_path[HRT_PATH_MAX];
    hrt_path_format(group_path, "%s.%s", path, groups[g]);
    lists[g] = hrt_json_get(function, groups[g]);
    if (!lists[g] && g == 2) continue;  // locals are optional
    HRT_RETURN_IF_ERROR(hrt_expect(lists[g], HRT_JSON_ARRAY, group_path));
    total += lists[g]->length;
  }
  if (total > HRT_PROGRAM_MAX_VALUES) {
    return hrt_field_error(HRT_STATUS_INVALID_ARGUMENT, path,
                           "has %zu values (at most %d)", total,
                           HRT_PROGRAM_MAX_VALUES);
  }
  out->value_count = (uint32_t)total;
  HRT_RETURN_IF_ERROR(hrt_alloc(parser, total * sizeof(hrt_vm_tensor_type_t),
                                (void**)&out->types));
  HRT_RETURN_IF_ERROR(
      hrt_alloc(parser, total * sizeof(uint64_t), (void**)&out->byte_lengths));
  uint32_t index = 0;
  for (int g = 0; g < 3; ++g) {
    if (!lists[g]) continue;
    for (size_t i = 0; i < lists[g]->length; ++i, ++index) {
      char value_path[HRT_PATH_MAX];
      hrt_path_format(value_path, "%s.%s[%zu]", path, groups[g], i);
      HRT_RETURN_IF_ERROR(hrt_parse_value(&lists[g]->items[i], value_path,
                                          &out->types[index],
                                          &out->byte_lengths[index]));
      if (g > 0) {
        uint64_t bytes = out->byte_lengths[index];
        out->call_bytes = bytes > UINT64_MAX - out->call_bytes
                              ? UINT64_MAX
                              : out->call_bytes + bytes;
      }
      for (uint32_t j = 0; j < index; ++j) {
        if (strcmp(out->types[j].name, out->types[index].name) == 0) {
          return hrt_field_error(HRT_STATUS_INVALID_ARGUMENT, value_path,
                                 "value '%s' is declared twice",
                                 out->types[index].name);
        }
      }
    }
  }
  *out_input_count = (uint32_t)lists[0]->length;
  *out_output_count = (uint32_t)lists[1]->length;
  return HRT_OK;
}

static hrt_status_t hrt_find_value(const hrt_function_t* function,
                                   const hrt_json_t* name, const char* path,
                                   uint32_t* out_index) {
  HRT_RETURN_IF_ERROR(hrt_expect(name, HRT_JSON_STRING, path));
  for (uint32_t i = 0; i < function->value_count; ++i) {
    if (strcmp(function->types[i].name, name->string) == 0) {
      *out_index = i;
      return HRT_OK;
    }
  }
  return hrt_field_error(HRT_STATUS_NOT_FOUND, path, "unknown value '%s'",
                         name->string);
}

// An array of value names (1 to `max`).
static hrt_status_t hrt_parse_value_list(hrt_parser_t* parser,
                                         const hrt_function_t* function,
                                         const hrt_json_t* list, uint32_t max,
                                         const char* path, hrt_op_t* op) {
  HRT_RETURN_IF_ERROR(hrt_expect(list, HRT_JSON_ARRAY, path));
  if (list->length < 1 || list->length > max) {
    return hrt_field_error(HRT_STATUS_INVALID_ARGUMENT, path,
                           "must name 1 to %u values (got %zu)", max,
                           list->length);
  }
  op->operand_count = (uint32_t)list->length;
  HRT_RETURN_IF_ERROR(hrt_alloc(parser, list->length * sizeof(uint32_t),
                                (void**)&op->operands));
  for (size_t i = 0; i < list->length; ++i) {
    char item_path[HRT_PATH_MAX];
    hrt_path_format(item_path, "%s[%zu]", path, i);
    HRT_RETURN_IF_ERROR(
        hrt_find_value(function, &list->items[i], item_path, &op->operands[i]));
  }
  return HRT_OK;
}

//===----------------------------------------------------------------------===//
// Ops
//===----------------------------------------------------------------------===//

static uint32_t hrt_f32_bits(float value) {
  uint32_t bits;
  memcpy(&bits, &value, sizeof(bits));
  return bits;
}

// The fill pattern of `value` stored as `type`.
static hrt_status_t hrt_fill_pattern(const hrt_json_t* value,
                                     hrt_hal_element_type_t type,
                                     const char* path, uint64_t* out_pattern) {
  double number = 0;
  if (value && value->type == HRT_JSON_BOOL &&
      type == HRT_HAL_ELEMENT_TYPE_BOOL) {
    number = value->boolean;
  } else if (value && value->type == HRT_JSON_NUMBER) {
    number = value->number;
  } else {
    return hrt_field_error(HRT_STATUS_INVALID_ARGUMENT, path,
                           "must be a number");
  }
  static const struct {
    double min, max;
  } int_ranges[HRT_HAL_ELEMENT_TYPE_COUNT_] = {
      [HRT_HAL_ELEMENT_TYPE_I8] = {-128, 127},
      [HRT_HAL_ELEMENT_TYPE_U8] = {0, 255},
      [HRT_HAL_ELEMENT_TYPE_I16] = {-32768, 32767},
      [HRT_HAL_ELEMENT_TYPE_U16] = {0, 65535},
      [HRT_HAL_ELEMENT_TYPE_I32] = {-2147483648.0, 2147483647.0},
      [HRT_HAL_ELEMENT_TYPE_U32] = {0, 4294967295.0},
      [HRT_HAL_ELEMENT_TYPE_I64] = {-9007199254740991.0, 9007199254740991.0},
      [HRT_HAL_ELEMENT_TYPE_U64] = {0, 9007199254740991.0},
      [HRT_HAL_ELEMENT_TYPE_BOOL] = {0, 1},
  };
  switch (type) {
    case HRT_HAL_ELEMENT_TYPE_F16:
      *out_pattern = hrt_f64_to_f16(number);
      return HRT_OK;
    case HRT_HAL_ELEMENT_TYPE_BF16:
      *out_pattern = hrt_f64_to_bf16(number);
      return HRT_OK;
    case HRT_HAL_ELEMENT_TYPE_F32:
      *out_pattern = hrt_f32_bits((float)number);
      return HRT_OK;
    case HRT_HAL_ELEMENT_TYPE_F64:
      memcpy(out_pattern, &number, sizeof(number));
      return HRT_OK;
    default:
      break;
  }
  if (number != floor(number) || number < int_ranges[type].min ||
      number > int_ranges[type].max) {
    return hrt_field_error(HRT_STATUS_INVALID_ARGUMENT, path,
                           "%g is not a %s value", number,
                           hrt_hal_element_type_name(type));
  }
  *out_pattern = (uint64_t)(int64_t)number;
  return HRT_OK;
}

// How a constant's number becomes 32 bits.
typedef enum hrt_constant_kind_e {
  HRT_CONSTANT_ANY,      // user kernel: integer text as u32/i32, else f32
  HRT_CONSTANT_INTEGER,  // built-in integer constant: u32 or i32
  HRT_CONSTANT_F32,      // built-in f32 constant: any number, as f32 bits
} hrt_constant_kind_t;

// A constant: a number, or {"f32": number} for an explicit f32. Integers are
// stored as u32 (negative ones as two's complement i32), f32 as its bits.
static hrt_status_t hrt_parse_constant(const hrt_json_t* value,
                                       hrt_constant_kind_t kind,
                                       const char* kernel, const char* path,
                                       uint32_t* out) {
  const hrt_json_t* number = value;
  bool explicit_f32 = value && value->type == HRT_JSON_OBJECT;
  if (explicit_f32) {
    static const char* const known[] = {"f32"};
    HRT_RETURN_IF_ERROR(hrt_check_keys(value, known, 1, path));
    number = hrt_json_get(value, "f32");
  }
  if (!number || number->type != HRT_JSON_NUMBER) {
    return hrt_field_error(HRT_STATUS_INVALID_ARGUMENT, path,
                           "must be a number or {\"f32\": number}");
  }
  bool as_f32 = explicit_f32 || kind == HRT_CONSTANT_F32 ||
                (kind == HRT_CONSTANT_ANY && !number->is_integer);
  if (as_f32) {
    if (kind == HRT_CONSTANT_INTEGER) {
      return hrt_field_error(HRT_STATUS_INVALID_ARGUMENT, path,
                             "kernel '%s' takes an integer here", kernel);
    }
    *out = hrt_f32_bits((float)number->number);
    return HRT_OK;
  }
  if (!number->is_integer) {
    return hrt_field_error(HRT_STATUS_INVALID_ARGUMENT, path,
                           "kernel '%s' takes an integer here (got %g)", kernel,
                           number->number);
  }
  if (!number->fits_int64 || number->integer < INT32_MIN ||
      number->integer > UINT32_MAX) {
    return hrt_field_error(HRT_STATUS_INVALID_ARGUMENT, path,
                           "%.0f does not fit in 32 bits", number->number);
  }
  *out = (uint32_t)number->integer;
  return HRT_OK;
}

// The largest integer a JSON number gives exactly in JavaScript, 2^53 - 1.
#define HRT_PROGRAM_MAX_SAFE_INTEGER INT64_C(9007199254740991)

// A decimal integer string ("-12", "18446744073709551615") in the range of
// i64 (`is_signed`, stored as two's complement) or u64; false otherwise.
static bool hrt_parse_decimal(const char* text, bool is_signed, uint64_t* out) {
  const bool negative = is_signed && text[0] == '-';
  const char* c = text + negative;
  if (!*c) return false;
  // Magnitude limits: 2^63 (negative), 2^63 - 1, 2^64 - 1.
  const uint64_t limit = !is_signed ? UINT64_MAX
                         : negative ? (uint64_t)INT64_MAX + 1
                                    : (uint64_t)INT64_MAX;
  uint64_t value = 0;
  for (; *c; ++c) {
    if (*c < '0' || *c > '9') return false;
    const uint64_t digit = (uint64_t)(*c - '0');
    if (value > (limit - digit) / 10) return false;
    value = value * 10 + digit;
  }
  *out = negative ? (uint64_t)0 - value : value;
  return true;
}

// A constant for a declared scalar parameter of type `type`, stored as its
// 1 or 2 words (low word first): u32/i32 integers in range; f32 a number or
// {"f32": number}; f64 a number; u64/i64 an integer within +-(2^53 - 1) or
// a decimal string over the type's whole range.
static hrt_status_t hrt_parse_typed_constant(const hrt_json_t* value,
                                             hrt_hal_param_type_t type,
                                             const char* kernel,
                                             const char* path, uint32_t* out) {
  const char* name = hrt_hal_param_type_name(type);
  const char* article = name[0] == 'u' ? "a" : "an";
  if (type == HRT_HAL_PARAM_F32) {
    return hrt_parse_constant(value, HRT_CONSTANT_F32, kernel, path, out);
  }
  const bool wide = hrt_hal_param_type_words(type) == 2;
  if (wide && type != HRT_HAL_PARAM_F64 && value->type == HRT_JSON_STRING) {
    uint64_t bits = 0;
    if (!hrt_parse_decimal(value->string, type == HRT_HAL_PARAM_I64, &bits)) {
      return hrt_field_error(HRT_STATUS_INVALID_ARGUMENT, path,
                             "kernel '%s' takes %s %s here: '%s' is not a "
                             "decimal %s integer",
                             kernel, article, name, value->string, name);
    }
    out[0] = (uint32_t)bits;
    out[1] = (uint32_t)(bits >> 32);
    return HRT_OK;
  }
  if (value->type != HRT_JSON_NUMBER) {
    return hrt_field_error(
        HRT_STATUS_INVALID_ARGUMENT, path,
        "kernel '%s' takes %s %s here: must be a number%s", kernel, article,
        name, wide && type != HRT_HAL_PARAM_F64 ? " or a decimal string" : "");
  }
  if (type == HRT_HAL_PARAM_F64) {
    uint64_t bits = 0;
    memcpy(&bits, &value->number, sizeof(bits));
    out[0] = (uint32_t)bits;
    out[1] = (uint32_t)(bits >> 32);
    return HRT_OK;
  }
  int64_t min = 0, max = 0;
  switch (type) {
    case HRT_HAL_PARAM_U32:
      max = UINT32_MAX;
      break;
    case HRT_HAL_PARAM_I32:
      min = INT32_MIN;
      max = INT32_MAX;
      break;
    case HRT_HAL_PARAM_U64:
      max = HRT_PROGRAM_MAX_SAFE_INTEGER;
      break;
    default:  // I64
      min = -HRT_PROGRAM_MAX_SAFE_INTEGER;
      max = HRT_PROGRAM_MAX_SAFE_INTEGER;
      break;
  }
  if (!value->is_integer || !value->fits_int64 || value->integer < min ||
      value->integer > max) {
    // An integer as written (a double would round 2^53 + 1).
    char text[32];
    if (value->fits_int64) {
      snprintf(text, sizeof(text), "%lld", (long long)value->integer);
    } else {
      snprintf(text, sizeof(text), "%.17g", value->number);
    }
    return hrt_field_error(
        HRT_STATUS_INVALID_ARGUMENT, path,
        "kernel '%s' takes %s %s here: %s is not an integer in [%lld, %lld]%s",
        kernel, article, name, text, (long long)min, (long long)max,
        wide ? " (a decimal string takes the whole 64-bit range)" : "");
  }
  const uint64_t bits = (uint64_t)value->integer;
  out[0] = (uint32_t)bits;
  if (wide) out[1] = (uint32_t)(bits >> 32);
  return HRT_OK;
}

// The constants of a dispatch of a declared entry: one per scalar parameter,
// in order, typed by it.
static hrt_status_t hrt_parse_typed_constants(hrt_parser_t* parser,
                                              const hrt_hal_entry_decl_t* decl,
                                              const hrt_json_t* constants,
                                              const char* path, hrt_op_t* op) {
  uint32_t scalars = 0, words = 0;
  for (uint32_t p = 0; p < decl->param_count; ++p) {
    const uint32_t n = hrt_hal_param_type_words(decl->params[p]);
    scalars += n != 0;
    words += n;
  }
  if (constants) {
    HRT_RETURN_IF_ERROR(hrt_expect(constants, HRT_JSON_ARRAY, path));
  }
  const size_t given = constants ? constants->length : 0;
  if (given != scalars) {
    return hrt_field_error(HRT_STATUS_INVALID_ARGUMENT, path,
                           "kernel '%s' declares %u scalar parameters, so "
                           "its dispatches take %u constants (got %zu)",
                           decl->name, scalars, scalars, given);
  }
  op->constant_count = words;
  HRT_RETURN_IF_ERROR(
      hrt_alloc(parser, ((size_t)words + 1) * 4, (void**)&op->constants));
  uint32_t c = 0, w = 0;
  for (uint32_t p = 0; p < decl->param_count; ++p) {
    if (decl->params[p] == HRT_HAL_PARAM_BUFFER) continue;
    char item_path[HRT_PATH_MAX];
    hrt_path_format(item_path, "%s[%u]", path, c);
    HRT_RETURN_IF_ERROR(hrt_parse_typed_constant(&constants->items[c],
                                                 decl->params[p], decl->name,
                                                 item_path, &op->constants[w]));
    w += hrt_hal_param_type_words(decl->params[p]);
    ++c;
  }
  return HRT_OK;
}

// The entry `entry` of `spec` as its CUDA kind declares it: NULL when it
// declares none; NOT_FOUND (at `path`) when it declares others only.
static hrt_status_t hrt_find_entry_decl(const hrt_executable_spec_t* spec,
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
  return hrt_field_error(HRT_STATUS_NOT_FOUND, path,
                         "executable '%s' declares no entry '%s' "
                         "(executables.%s.cuda.entries)",
                         spec->name, entry, spec->name);
}

// A 1- to 3-element list of positive integers, each at most max[i].
static hrt_status_t hrt_parse_grid(const hrt_json_t* value, const uint32_t* max,
                                   const char* path, uint32_t out[3]) {
  HRT_RETURN_IF_ERROR(hrt_expect(value, HRT_JSON_ARRAY, path));
  if (value->length < 1 || value->length > 3) {
    return hrt_field_error(HRT_STATUS_INVALID_ARGUMENT, path,
                           "must have 1 to 3 entries (got %zu)", value->length);
  }
  out[0] = out[1] = out[2] = 1;
  for (size_t i = 0; i < value->length; ++i) {
    char item_path[HRT_PATH_MAX];
    hrt_path_format(item_path, "%s[%zu]", path, i);
    int64_t n = 0;
    HRT_RETURN_IF_ERROR(
        hrt_expect_integer(&value->items[i], 1, max[i], item_path, &n));
    out[i] = (uint32_t)n;
  }
  return HRT_OK;
}

static hrt_status_t hrt_parse_dispatch(hrt_parser_t* parser,
                                       const hrt_function_t* function,
                                       const hrt_json_t* json, const char* path,
                                       hrt_op_t* op) {
  static const char* const known[] = {"op",       "kernel",    "workgroups",
                                      "bindings", "constants", "workgroupSize"};
  HRT_RETURN_IF_ERROR(hrt_check_keys(json, known, 6, path));
  char field[HRT_PATH_MAX];
  hrt_path_format(field, "%s.kernel", path);
  const hrt_json_t* kernel = hrt_json_get(json, "kernel");
  HRT_RETURN_IF_ERROR(hrt_expect(kernel, HRT_JSON_STRING, field));
  const char* dot = strchr(kernel->string, '.');
  if (!dot || dot == kernel->string || !dot[1]) {
    return hrt_field_error(HRT_STATUS_INVALID_ARGUMENT, field,
                           "'%s' must be 'executable.entry'", kernel->string);
  }
  op->kernel = kernel->string;
  op->entry = dot + 1;
  const hrt_program_module_t* module = parser->module;
  size_t name_length = (size_t)(dot - kernel->string);
  op->executable = UINT32_MAX;
  for (uint32_t i = 0; i < module->executable_count; ++i) {
    if (strlen(module->executables[i].name) == name_length &&
        strncmp(module->executables[i].name, kernel->string, name_length) ==
            0) {
      op->executable = i;
    }
  }
  if (op->executable == UINT32_MAX) {
    return hrt_field_error(HRT_STATUS_NOT_FOUND, field,
                           "unknown executable '%.*s'", (int)name_length,
                           kernel->string);
  }
  if (module->executables[op->executable].builtin) {
    op->signature = hrt_builtin_signature_find(op->entry);
    if (!op->signature) {
      return hrt_field_error(HRT_STATUS_NOT_FOUND, field,
                             "unknown built-in kernel '%s' (see "
                             "docs/kernels.md)",
                             op->entry);
    }
  }
  const hrt_hal_entry_decl_t* decl = NULL;
  HRT_RETURN_IF_ERROR(hrt_find_entry_decl(&module->executables[op->executable],
                                          op->entry, field, &decl));
  if (decl && !decl->typed) decl = NULL;  // inferred: untyped constants
  static const uint32_t count_max[3] = {0x7FFFFFFFu, 65535u, 65535u};
  static const uint32_t size_max[3] = {1024u, 1024u, 64u};
  hrt_path_format(field, "%s.workgroups", path);
  HRT_RETURN_IF_ERROR(hrt_parse_grid(hrt_json_get(json, "workgroups"),
                                     count_max, field, op->workgroup_count));
  uint64_t workgroups = (uint64_t)op->workgroup_count[0] *
                        op->workgroup_count[1] * op->workgroup_count[2];
  if (workgroups > HRT_HAL_MAX_DISPATCH_WORKGROUPS) {
    return hrt_field_error(HRT_STATUS_INVALID_ARGUMENT, field,
                           "%llu workgroups exceed the limit of %llu",
                           (unsigned long long)workgroups,
                           (unsigned long long)HRT_HAL_MAX_DISPATCH_WORKGROUPS);
  }
  op->workgroup_size[0] = op->workgroup_size[1] = op->workgroup_size[2] = 1;
  const hrt_json_t* size = hrt_json_get(json, "workgroupSize");
  if (size) {
    hrt_path_format(field, "%s.workgroupSize", path);
    HRT_RETURN_IF_ERROR(
        hrt_parse_grid(size, size_max, field, op->workgroup_size));
    if ((uint64_t)op->workgroup_size[0] * op->workgroup_size[1] *
            op->workgroup_size[2] >
        1024) {
      return hrt_field_error(HRT_STATUS_INVALID_ARGUMENT, field,
                             "more than 1024 invocations per workgroup");
    }
  }
  hrt_path_format(field, "%s.constants", path);
  const hrt_json_t* constants = hrt_json_get(json, "constants");
  if (decl) {
    HRT_RETURN_IF_ERROR(
        hrt_parse_typed_constants(parser, decl, constants, field, op));
  } else if (constants) {
    HRT_RETURN_IF_ERROR(hrt_expect(constants, HRT_JSON_ARRAY, field));
    if (constants->length > HRT_HAL_MAX_DISPATCH_CONSTANTS) {
      return hrt_field_error(HRT_STATUS_INVALID_ARGUMENT, field,
                             "at most %d constants",
                             HRT_HAL_MAX_DISPATCH_CONSTANTS);
    }
    op->constant_count = (uint32_t)constants->length;
    HRT_RETURN_IF_ERROR(
        hrt_alloc(parser, (constants->length + 1) * 4, (void**)&op->constants));
    for (size_t i = 0; i < constants->length; ++i) {
      char item_path[HRT_PATH_MAX];
      hrt_path_format(item_path, "%s[%zu]", field, i);
      hrt_constant_kind_t kind =
          !op->signature ? HRT_CONSTANT_ANY
          : i < 32 && (op->signature->float_constants >> i) & 1u
              ? HRT_CONSTANT_F32
              : HRT_CONSTANT_INTEGER;
      HRT_RETURN_IF_ERROR(hrt_parse_constant(
          &constants->items[i], kind, op->entry, item_path, &op->constants[i]));
    }
  }
  hrt_path_format(field, "%s.bindings", path);
  HRT_RETURN_IF_ERROR(
      hrt_parse_value_list(parser, function, hrt_json_get(json, "bindings"),
                           HRT_HAL_MAX_DISPATCH_BINDINGS, field, op));
  if (decl) {
    uint32_t buffers = 0;
    for (uint32_t p = 0; p < decl->param_count; ++p) {
      buffers += decl->params[p] == HRT_HAL_PARAM_BUFFER;
    }
    if (buffers == 0) {
      return hrt_field_error(HRT_STATUS_INVALID_ARGUMENT, field,
                             "kernel '%s' declares no buffer parameter, and a "
                             "dispatch takes 1 to %d bindings: it cannot be "
                             "dispatched",
                             decl->name, HRT_HAL_MAX_DISPATCH_BINDINGS);
    }
    if (op->operand_count != buffers) {
      return hrt_field_error(HRT_STATUS_INVALID_ARGUMENT, field,
                             "kernel '%s' declares %u buffer parameters, so "
                             "its dispatches take %u bindings (got %u)",
                             decl->name, buffers, buffers, op->operand_count);
    }
  }
  const hrt_builtin_signature_t* signature = op->signature;
  if (!signature) return HRT_OK;
  if (op->operand_count != signature->binding_count ||
      op->constant_count != signature->constant_count) {
    return hrt_field_error(HRT_STATUS_INVALID_ARGUMENT, path,
                           "kernel '%s' takes %u bindings and %u constants "
                           "(got %u and %u)",
                           op->entry, signature->binding_count,
                           signature->constant_count, op->operand_count,
                           op->constant_count);
  }
  for (uint32_t i = 0; i < op->operand_count; ++i) {
    const hrt_builtin_binding_t* rule = &signature->bindings[i];
    const hrt_vm_tensor_type_t* type = &function->types[op->operands[i]];
    char item_path[HRT_PATH_MAX];
    hrt_path_format(item_path, "%s[%u]", field, i);
    if (!rule->any_type && type->element_type != rule->element_type) {
      return hrt_field_error(
          HRT_STATUS_INVALID_ARGUMENT, item_path,
          "kernel '%s' needs %s here but '%s' is %s", op->entry,
          hrt_hal_element_type_name(rule->element_type), type->name,
          hrt_hal_element_type_name(type->element_type));
    }
    uint64_t needed =
        hrt_builtin_binding_min_bytes(signature, i, op->constants);
    uint64_t have = function->byte_lengths[op->operands[i]];
    if (have < needed) {
      return hrt_field_error(HRT_STATUS_INVALID_ARGUMENT, item_path,
                             "kernel '%s' needs %llu bytes here for its "
                             "constants but '%s' has %llu",
                             op->entry, (unsigned long long)needed, type->name,
                             (unsigned long long)have);
    }
  }
  return HRT_OK;
}

static hrt_status_t hrt_parse_op(hrt_parser_t* parser,
                                 const hrt_function_t* function,
                                 const hrt_json_t* json, const char* path,
                                 hrt_op_t* op) {
  HRT_RETURN_IF_ERROR(hrt_expect(json, HRT_JSON_OBJECT, path));
  char field[HRT_PATH_MAX];
  hrt_path_format(field, "%s.op", path);
  const hrt_json_t* kind = hrt_json_get(json, "op");
  HRT_RETURN_IF_ERROR(hrt_expect(kind, HRT_JSON_STRING, field));
  const char* name = kind->string;
  if (strcmp(name, "dispatch") == 0) {
    op->kind = HRT_OP_DISPATCH;
    return hrt_parse_dispatch(parser, function, json, path, op);
  }
  if (strcmp(name, "barrier") == 0) {
    static const char* const known[] = {"op"};
    op->kind = HRT_OP_BARRIER;
    return hrt_check_keys(json, known, 1, path);
  }
  if (strcmp(name, "trace") == 0) {
    static const char* const known[] = {"op", "key", "values"};
    op->kind = HRT_OP_TRACE;
    HRT_RETURN_IF_ERROR(hrt_check_keys(json, known, 3, path));
    hrt_path_format(field, "%s.key", path);
    const hrt_json_t* key = hrt_json_get(json, "key");
    HRT_RETURN_IF_ERROR(hrt_expect(key, HRT_JSON_STRING, field));
    if (!key->length) {
      return hrt_field_error(HRT_STATUS_INVALID_ARGUMENT, field,
                             "must not be empty");
    }
    op->key = key->string;
    hrt_path_format(field, "%s.values", path);
    return hrt_parse_value_list(parser, function, hrt_json_get(json, "values"),
                                HRT_HAL_MAX_TRACE_SOURCES, field, op);
  }
  if (strcmp(name, "fill") == 0) {
    static const char* const known[] = {"op", "target", "value"};
    op->kind = HRT_OP_FILL;
    HRT_RETURN_IF_ERROR(hrt_check_keys(json, known, 3, path));
    op->operand_count = 1;
    HRT_RETURN_IF_ERROR(hrt_alloc(parser, 4, (void**)&op->operands));
    hrt_path_format(field, "%s.target", path);
    HRT_RETURN_IF_ERROR(hrt_find_value(function, hrt_json_get(json, "target"),
                                       field, &op->operands[0]));
    hrt_hal_element_type_t type = function->types[op->operands[0]].element_type;
    op->pattern_length = (uint32_t)hrt_hal_element_type_size(type);
    hrt_path_format(field, "%s.value", path);
    return hrt_fill_pattern(hrt_json_get(json, "value"), type, field,
                            &op->pattern);
  }
  if (strcmp(name, "copy") == 0) {
    static const char* const known[] = {"op", "source", "target"};
    op->kind = HRT_OP_COPY;
    HRT_RETURN_IF_ERROR(hrt_check_keys(json, known, 3, path));
    op->operand_count = 2;
    HRT_RETURN_IF_ERROR(hrt_alloc(parser, 8, (void**)&op->operands));
    hrt_path_format(field, "%s.source", path);
    HRT_RETURN_IF_ERROR(hrt_find_value(function, hrt_json_get(json, "source"),
                                       field, &op->operands[0]));
    hrt_path_format(field, "%s.target", path);
    HRT_RETURN_IF_ERROR(hrt_find_value(function, hrt_json_get(json, "target"),
                                       field, &op->operands[1]));
    uint64_t source = function->byte_lengths[op->operands[0]];
    uint64_t target = function->byte_lengths[op->operands[1]];
    if (source != target) {
      return hrt_field_error(
          HRT_STATUS_INVALID_ARGUMENT, path,
          "copy source '%s' has %llu bytes but target '%s' "
          "has %llu",
          function->types[op->operands[0]].name, (unsigned long long)source,
          function->types[op->operands[1]].name, (unsigned long long)target);
    }
    return HRT_OK;
  }
  return hrt_field_error(HRT_STATUS_INVALID_ARGUMENT, field,
                         "unknown op '%s' (expected dispatch, fill, copy, "
                         "trace or barrier)",
                         name);
}

static hrt_status_t hrt_parse_function(hrt_parser_t* parser,
                                       const char* module_name,
                                       const char* name, const hrt_json_t* json,
                                       hrt_function_t* function,
                                       hrt_vm_function_def_t* def) {
  static const char* const known[] = {"inputs", "outputs", "locals", "body"};
  char path[HRT_PATH_MAX];
  hrt_path_format(path, "functions.%s", name);
  if (!hrt_is_identifier(name)) {
    return hrt_field_error(HRT_STATUS_INVALID_ARGUMENT, path,
                           "'%s' is not a name", name);
  }
  HRT_RETURN_IF_ERROR(hrt_expect(json, HRT_JSON_OBJECT, path));
  HRT_RETURN_IF_ERROR(hrt_check_keys(json, known, 4, path));
  size_t qualified_length = strlen(module_name) + strlen(name) + 2;
  char* qualified = NULL;
  HRT_RETURN_IF_ERROR(hrt_alloc(parser, qualified_length, (void**)&qualified));
  snprintf(qualified, qualified_length, "%s.%s", module_name, name);
  function->qualified_name = qualified;
  uint32_t input_count = 0, output_count = 0;
  HRT_RETURN_IF_ERROR(hrt_parse_values(parser, json, path, function,
                                       &input_count, &output_count));
  *def = (hrt_vm_function_def_t){
      .name = name,
      .input_count = input_count,
      .output_count = output_count,
      .inputs = function->types,
      .outputs = function->types + input_count,
  };
  char body_path[HRT_PATH_MAX];
  hrt_path_format(body_path, "%s.body", path);
  const hrt_json_t* body = hrt_json_get(json, "body");
  HRT_RETURN_IF_ERROR(hrt_expect(body, HRT_JSON_ARRAY, body_path));
  if (body->length > HRT_PROGRAM_MAX_OPS) {
    return hrt_field_error(HRT_STATUS_INVALID_ARGUMENT, body_path,
                           "has %zu ops (at most %d)", body->length,
                           HRT_PROGRAM_MAX_OPS);
  }
  function->op_count = (uint32_t)body->length;
  HRT_RETURN_IF_ERROR(hrt_alloc(parser, body->length * sizeof(hrt_op_t),
                                (void**)&function->ops));
  for (size_t i = 0; i < body->length; ++i) {
    char op_path[HRT_PATH_MAX];
    hrt_path_format(op_path, "%s[%zu]", body_path, i);
    hrt_op_t* op = &function->ops[i];
    HRT_RETURN_IF_ERROR(
        hrt_parse_op(parser, function, &body->items[i], op_path, op));
    if (op->kind != HRT_OP_DISPATCH) continue;
    size_t length = strlen(name) + strlen(op->entry) + 16;
    char* key = NULL;
    HRT_RETURN_IF_ERROR(hrt_alloc(parser, length, (void**)&key));
    snprintf(key, length, "%s:%zu:%s", name, i, op->entry);
    op->key = key;
    parser->module->dispatch_count += 1;
  }
  return HRT_OK;
}

static hrt_status_t hrt_parse_module(hrt_parser_t* parser,
                                     const hrt_json_t* root) {
  static const char* const known[] = {"format", "name", "executables",
                                      "functions"};
  HRT_RETURN_IF_ERROR(hrt_expect(root, HRT_JSON_OBJECT, "module"));
  HRT_RETURN_IF_ERROR(hrt_check_keys(root, known, 4, "module"));
  const hrt_json_t* format = hrt_json_get(root, "format");
  HRT_RETURN_IF_ERROR(hrt_expect(format, HRT_JSON_STRING, "format"));
  if (strcmp(format->string, HRT_PROGRAM_FORMAT) != 0) {
    return hrt_field_error(HRT_STATUS_INVALID_ARGUMENT, "format",
                           "'%s' is not supported (expected '%s')",
                           format->string, HRT_PROGRAM_FORMAT);
  }
  const hrt_json_t* name = hrt_json_get(root, "name");
  HRT_RETURN_IF_ERROR(hrt_expect_identifier(name, "name"));
  if (strcmp(name->string, "hal") == 0) {
    return hrt_field_error(HRT_STATUS_INVALID_ARGUMENT, "name",
                           "'hal' is reserved for the HAL module");
  }
  const hrt_json_t* executables = hrt_json_get(root, "executables");
  if (executables) {
    HRT_RETURN_IF_ERROR(hrt_parse_executables(parser, executables));
  }
  const hrt_json_t* functions = hrt_json_get(root, "functions");
  HRT_RETURN_IF_ERROR(hrt_expect(functions, HRT_JSON_OBJECT, "functions"));
  hrt_program_module_t* module = parser->module;
  HRT_RETURN_IF_ERROR(hrt_alloc(parser,
                                functions->length * sizeof(hrt_function_t),
                                (void**)&module->functions));
  HRT_RETURN_IF_ERROR(
      hrt_alloc(parser, functions->length * sizeof(hrt_vm_function_def_t),
                (void**)&module->defs));
  for (size_t i = 0; i < functions->length; ++i) {
    HRT_RETURN_IF_ERROR(hrt_parse_function(
        parser, name->string, functions->keys[i], &functions->items[i],
        &module->functions[i], &module->defs[i]));
  }
  HRT_RETURN_IF_ERROR(hrt_alloc(parser,
                                module->dispatch_count * sizeof(const char*),
                                (void**)&module->dispatch_keys));
  uint32_t dispatch = 0;
  for (size_t i = 0; i < functions->length; ++i) {
    const hrt_function_t* function = &module->functions[i];
    for (uint32_t j = 0; j < function->op_count; ++j) {
      if (function->ops[j].kind == HRT_OP_DISPATCH) {
        module->dispatch_keys[dispatch++] = function->ops[j].key;
      }
    }
  }
  module->base.name = name->string;
  module->base.function_count = (uint32_t)functions->length;
  return HRT_OK;
}

//===----------------------------------------------------------------------===//
// Per-context state: executables and one recorded command buffer per function
//===----------------------------------------------------------------------===//

typedef struct hrt_program_state_s hrt_program_state_t;

// What one trace command reports; its address is the trace's user_data.
typedef struct hrt_trace_site_s {
  const hrt_program_state_t* state;
  const hrt_function_t* function;
  uint32_t op_index;
  const char* key;
  const uint32_t* values;  // [count] value indices
  uint32_t every;          // trace only invocations whose sequence % every == 0
} hrt_trace_site_t;

struct hrt_program_state_s {
  hrt_vm_module_t* hal;      // borrowed: linked before us, freed after us
  hrt_hal_device_t* device;  // the HAL module's
  hrt_hal_executable_t** executables;          // [executable_count]
  hrt_hal_command_buffer_t** command_buffers;  // [function_count]
  uint32_t** command_ops;  // [function_count][commands]: op of each command
  hrt_arena_t arena;       // trace sites and their values, command_ops
};

// One call in flight: the host context of its submission.
typedef struct hrt_program_call_s {
  hrt_vm_invocation_done_t done;
  const hrt_program_state_t* state;
  const hrt_function_t* function;
  uint32_t function_ordinal;
  uint64_t sequence;
  uint64_t invocation;
  uint32_t output_count;
  uint32_t local_count;
  hrt_hal_buffer_view_t** outputs;  // [output_count], owned until done
  hrt_hal_buffer_t** locals;        // [local_count], owned
  hrt_hal_buffer_ref_t* bindings;   // [value_count]
} hrt_program_call_t;

static hrt_status_t hrt_program_trace(void* user_data, void* submission_context,
                                      uint32_t count, const void* const* data,
                                      const uint64_t* lengths) {
  const hrt_trace_site_t* site = user_data;
  const hrt_program_call_t* call = submission_context;
  if (site->every > 1 && call->sequence % site->every != 0) return HRT_OK;
  hrt_trace_tensor_t tensors[HRT_HAL_MAX_TRACE_SOURCES];
  for (uint32_t i = 0; i < count; ++i) {
    const hrt_vm_tensor_type_t* type = &site->function->types[site->values[i]];
    tensors[i] = (hrt_trace_tensor_t){type->name, type->element_type,
                                      type->rank, type->shape,
                                      data[i],    lengths[i]};
  }
  hrt_trace_info_t info = {call->sequence, site->function->qualified_name,
                           site->op_index, hrt_time_now_ns(), call->invocation};
  return hrt_hal_module_trace(site->state->hal, site->key, &info, count,
                              tensors);
}

static hrt_status_t hrt_load_executable(hrt_hal_device_t* device,
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

static hrt_hal_buffer_ref_t hrt_slot(uint32_t value) {
  return (hrt_hal_buffer_ref_t){NULL, value, 0, HRT_HAL_WHOLE_BUFFER};
}

static hrt_status_t hrt_add_trace(hrt_program_state_t* state,
                                  hrt_hal_command_buffer_t* command_buffer,
                                  const hrt_function_t* function,
                                  uint32_t op_index, const char* key,
                                  uint32_t count, const uint32_t* values,
                                  uint32_t every) {
  hrt_trace_site_t* site = NULL;
  HRT_RETURN_IF_ERROR(
      hrt_arena_allocate(&state->arena, sizeof(*site), "trace", (void**)&site));
  *site = (hrt_trace_site_t){state, function, op_index, key, values, every};
  hrt_hal_buffer_ref_t sources[HRT_HAL_MAX_TRACE_SOURCES];
  for (uint32_t i = 0; i < count; ++i) sources[i] = hrt_slot(values[i]);
  return hrt_hal_command_buffer_trace(command_buffer, sources, count,
                                      hrt_program_trace, site);
}

// A dispatch's written bindings become one trace's sources.
_Static_assert(HRT_HAL_MAX_DISPATCH_BINDINGS <= HRT_HAL_MAX_TRACE_SOURCES,
               "every binding a dispatch writes fits in one trace");

// Traces what a dispatch writes: the bindings its signature marks written,
// or (user kernels) every binding that is not a function input; only when
// the HAL module's dispatch-trace filters cover the dispatch.
static hrt_status_t hrt_add_dispatch_trace(
    hrt_program_state_t* state, hrt_hal_command_buffer_t* command_buffer,
    const hrt_function_t* function, const hrt_vm_function_def_t* def,
    uint32_t op_index) {
  const hrt_op_t* op = &function->ops[op_index];
  uint32_t* written = NULL;
  HRT_RETURN_IF_ERROR(hrt_arena_allocate(&state->arena,
                                         op->operand_count * sizeof(uint32_t),
                                         "trace", (void**)&written));
  uint32_t count = 0;
  for (uint32_t i = 0; i < op->operand_count; ++i) {
    bool writes = op->signature ? op->signature->bindings[i].written
                                : op->operands[i] >= def->input_count;
    if (writes) written[count++] = op->operands[i];
  }
  if (count == 0) return HRT_OK;
  const char* function_name = strchr(function->qualified_name, '.') + 1;
  if (!hrt_hal_module_traces_dispatch(state->hal, function_name, op->key)) {
    return HRT_OK;
  }
  return hrt_add_trace(state, command_buffer, function, op_index, op->key,
                       count, written,
                       hrt_hal_module_options(state->hal)->trace_every);
}

static hrt_status_t hrt_record_op(hrt_program_state_t* state,
                                  hrt_hal_command_buffer_t* command_buffer,
                                  const hrt_function_t* function,
                                  uint32_t op_index) {
  const hrt_op_t* op = &function->ops[op_index];
  switch (op->kind) {
    case HRT_OP_DISPATCH: {
      hrt_hal_executable_t* executable = state->executables[op->executable];
      uint32_t ordinal = 0;
      HRT_RETURN_IF_ERROR(
          hrt_hal_executable_lookup(executable, op->entry, &ordinal));
      hrt_hal_buffer_ref_t bindings[HRT_HAL_MAX_DISPATCH_BINDINGS];
      uint32_t read_only = 0;
      for (uint32_t i = 0; i < op->operand_count; ++i) {
        bindings[i] = hrt_slot(op->operands[i]);
        if (op->signature && !op->signature->bindings[i].written) {
          read_only |= 1u << i;
        }
      }
      hrt_hal_dispatch_t dispatch = {
          .executable = executable,
          .entry_ordinal = ordinal,
          .workgroup_count = {op->workgroup_count[0], op->workgroup_count[1],
                              op->workgroup_count[2]},
          .workgroup_size = {op->workgroup_size[0], op->workgroup_size[1],
                             op->workgroup_size[2]},
          .constant_count = op->constant_count,
          .constants = op->constants,
          .binding_count = op->operand_count,
          .bindings = bindings,
          .read_only_bindings = read_only,
      };
      return hrt_hal_command_buffer_dispatch(command_buffer, &dispatch);
    }
    case HRT_OP_FILL:
      return hrt_hal_command_buffer_fill(command_buffer,
                                         hrt_slot(op->operands[0]), op->pattern,
                                         op->pattern_length);
    case HRT_OP_COPY:
      return hrt_hal_command_buffer_copy(
          command_buffer, hrt_slot(op->operands[0]), hrt_slot(op->operands[1]));
    case HRT_OP_TRACE:
      return hrt_add_trace(state, command_buffer, function, op_index, op->key,
                           op->operand_count, op->operands, 1);
    case HRT_OP_BARRIER:
      return hrt_hal_command_buffer_barrier(command_buffer);
  }
  return HRT_OK;
}

static hrt_status_t hrt_record_function(hrt_program_state_t* state,
                                        const hrt_program_module_t* module,
                                        uint32_t index) {
  const hrt_function_t* function = &module->functions[index];
  const hrt_vm_function_def_t* def = &module->defs[index];
  bool trace_dispatches = hrt_hal_module_options(state->hal)->trace_dispatches;
  hrt_hal_command_buffer_t* command_buffer = NULL;
  HRT_RETURN_IF_ERROR(
      hrt_hal_command_buffer_create(state->device, &command_buffer));
  state->command_buffers[index] = command_buffer;
  // At most two commands per op (a dispatch and its trace).
  uint32_t* command_ops = NULL;
  HRT_RETURN_IF_ERROR(hrt_arena_allocate(
      &state->arena, (2 * (size_t)function->op_count + 1) * sizeof(uint32_t),
      "command map", (void**)&command_ops));
  state->command_ops[index] = command_ops;
  for (uint32_t i = 0; i < function->op_count; ++i) {
    uint32_t first = hrt_hal_command_buffer_count(command_buffer);
    hrt_status_t status = hrt_record_op(state, command_buffer, function, i);
    if (status == HRT_OK && trace_dispatches &&
        function->ops[i].kind == HRT_OP_DISPATCH) {
      status = hrt_add_dispatch_trace(state, command_buffer, function, def, i);
    }
    if (status != HRT_OK) {
      return hrt_status_annotate(status, "functions.%s.body[%u]", def->name, i);
    }
    uint32_t end = hrt_hal_command_buffer_count(command_buffer);
    for (uint32_t c = first; c < end; ++c) command_ops[c] = i;
  }
  hrt_hal_command_buffer_finalize(command_buffer);
  return HRT_OK;
}

static void hrt_program_free_state(hrt_vm_module_t* base, void* opaque) {
  hrt_program_module_t* module = (hrt_program_module_t*)base;
  hrt_program_state_t* state = opaque;
  if (!state) return;
  for (uint32_t i = 0; i < base->function_count; ++i) {
    hrt_hal_command_buffer_release(state->command_buffers[i]);
  }
  for (uint32_t i = 0; i < module->executable_count; ++i) {
    hrt_hal_executable_release(state->executables[i]);
  }
  hrt_arena_deinit(&state->arena);
  free(state);
}

static hrt_status_t hrt_program_create_state(hrt_vm_module_t* base,
                                             hrt_vm_context_t* context,
                                             void** out_state) {
  hrt_program_module_t* module = (hrt_program_module_t*)base;
  hrt_vm_module_t* hal = NULL;
  void* hal_state = NULL;
  HRT_RETURN_IF_ERROR(hrt_status_annotate(
      hrt_vm_context_find_module(context, "hal", &hal, &hal_state),
      "module '%s' imports 'hal'", base->name));
  if (!hrt_hal_module_isa(hal)) {
    return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                           "module '%s' imports 'hal', but the module named "
                           "'hal' is not a HAL module",
                           base->name);
  }
  hrt_program_state_t* state = NULL;
  size_t size = sizeof(*state) +
                module->executable_count * sizeof(hrt_hal_executable_t*) +
                base->function_count *
                    (sizeof(hrt_hal_command_buffer_t*) + sizeof(uint32_t*));
  HRT_RETURN_IF_ERROR(
      hrt_allocate_zeroed(size, "program state", (void**)&state));
  state->hal = hal;
  state->device = hrt_hal_module_device(hal);
  state->executables = (hrt_hal_executable_t**)(state + 1);
  state->command_buffers =
      (hrt_hal_command_buffer_t**)(state->executables +
                                   module->executable_count);
  state->command_ops =
      (uint32_t**)(state->command_buffers + base->function_count);
  hrt_status_t status = HRT_OK;
  for (uint32_t i = 0; i < module->executable_count && status == HRT_OK; ++i) {
    status = hrt_load_executable(state->device, &module->executables[i],
                                 &state->executables[i]);
  }
  for (uint32_t i = 0; i < base->function_count && status == HRT_OK; ++i) {
    status = hrt_record_function(state, module, i);
  }
  if (status != HRT_OK) {
    hrt_program_free_state(base, state);
    return status;
  }
  *out_state = state;
  return HRT_OK;
}

//===----------------------------------------------------------------------===//
// Calls
//===----------------------------------------------------------------------===//

static void hrt_program_dispatch_timing(void* host_context,
                                        uint32_t command_index,
                                        int64_t start_ns, int64_t duration_ns) {
  const hrt_program_call_t* call = host_context;
  const hrt_program_state_t* state = call->state;
  uint32_t op_index = state->command_ops[call->function_ordinal][command_index];
  hrt_dispatch_timing_t event = {
      .sequence = call->sequence,
      .invocation = call->invocation,
      .function = call->function->qualified_name,
      .op_index = op_index,
      .kernel = call->function->ops[op_index].kernel,
      .device = hrt_hal_device_info(state->device)->uri,
      .start_ns = start_ns,
      .duration_ns = duration_ns,
  };
  hrt_hal_module_dispatch_timing(state->hal, &event, 1);
}

static void hrt_program_call_release_locals(hrt_program_call_t* call) {
  for (uint32_t i = 0; i < call->local_count; ++i) {
    hrt_hal_buffer_release(call->locals[i]);
  }
  call->local_count = 0;
}

static void hrt_program_call_free(hrt_program_call_t* call,
                                  bool release_outputs) {
  hrt_program_call_release_locals(call);
  for (uint32_t i = 0; release_outputs && i < call->output_count; ++i) {
    hrt_hal_buffer_view_release(call->outputs[i]);
  }
  free(call);
}

static void hrt_program_call_complete(void* user_data, hrt_status_t status) {
  hrt_program_call_t* call = user_data;
  hrt_vm_invocation_done_t done = call->done;
  // Locals go back to the device before the caller hears of the completion,
  // so that the caller's next call can reuse their memory.
  hrt_program_call_release_locals(call);
  if (status == HRT_OK) {
    done.fn(done.user_data, HRT_OK, call->outputs, call->output_count);
    hrt_program_call_free(call, false);
  } else {
    hrt_program_call_free(call, true);
    done.fn(done.user_data, status, NULL, 0);
  }
}

// Allocates the call's outputs and locals and fills its binding table.
static hrt_status_t hrt_prepare_call(hrt_hal_device_t* device,
                                     const hrt_function_t* function,
                                     const hrt_vm_function_def_t* def,
                                     const hrt_vm_call_t* vm_call,
                                     hrt_program_call_t* call) {
  for (uint32_t i = 0; i < def->input_count; ++i) {
    hrt_hal_buffer_t* buffer = hrt_hal_buffer_view_buffer(vm_call->inputs[i]);
    if (buffer->device != device) {
      return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                             "input %u ('%s') is on another device than the "
                             "context's HAL module (%s)",
                             i, def->inputs[i].name,
                             hrt_hal_device_info(device)->uri);
    }
    call->bindings[i] = hrt_hal_buffer_view_ref(vm_call->inputs[i]);
  }
  // Each buffer is checked alone by the device; together they must fit too,
  // or zeroing them would exhaust the host (the process killed, not an
  // error).
  uint64_t memory = hrt_hal_device_info(device)->total_memory;
  if (memory != 0 && function->call_bytes > memory) {
    return hrt_status_make(
        HRT_STATUS_RESOURCE_EXHAUSTED,
        "%s: one call allocates %llu bytes of outputs and "
        "locals, more than the %llu bytes of %s",
        function->qualified_name, (unsigned long long)function->call_bytes,
        (unsigned long long)memory, hrt_hal_device_info(device)->uri);
  }
  for (uint32_t v = def->input_count; v < function->value_count; ++v) {
    const hrt_vm_tensor_type_t* type = &function->types[v];
    hrt_hal_buffer_t* buffer = NULL;
    HRT_RETURN_IF_ERROR(hrt_hal_device_allocate_buffer(
        device, function->byte_lengths[v], NULL, &buffer));
    uint32_t output = v - def->input_count;
    if (output < def->output_count) {
      hrt_status_t status =
          hrt_hal_buffer_view_create(buffer, 0, type->element_type, type->rank,
                                     type->shape, &call->outputs[output]);
      hrt_hal_buffer_release(buffer);  // the view holds it
      HRT_RETURN_IF_ERROR(status);
      call->output_count = output + 1;
    } else {
      call->locals[call->local_count++] = buffer;
    }
    call->bindings[v] =
        (hrt_hal_buffer_ref_t){buffer, 0, 0, HRT_HAL_WHOLE_BUFFER};
  }
  return HRT_OK;
}

static hrt_status_t hrt_program_begin_call(hrt_vm_module_t* base, void* opaque,
                                           const hrt_vm_call_t* vm_call) {
  hrt_program_module_t* module = (hrt_program_module_t*)base;
  hrt_program_state_t* state = opaque;
  const hrt_function_t* function =
      &module->functions[vm_call->function_ordinal];
  const hrt_vm_function_def_t* def = &module->defs[vm_call->function_ordinal];
  uint32_t values = function->value_count;
  hrt_program_call_t* call = NULL;
  HRT_RETURN_IF_ERROR(hrt_allocate_zeroed(
      sizeof(*call) +
          values * (sizeof(hrt_hal_buffer_ref_t) + 2 * sizeof(void*)),
      "call", (void**)&call));
  call->bindings = (hrt_hal_buffer_ref_t*)(call + 1);
  call->outputs = (hrt_hal_buffer_view_t**)(call->bindings + values);
  call->locals = (hrt_hal_buffer_t**)(call->outputs + values);
  call->done = vm_call->done;
  call->state = state;
  call->function = function;
  call->function_ordinal = vm_call->function_ordinal;
  call->sequence = vm_call->sequence;
  call->invocation = vm_call->invocation;
  hrt_status_t status =
      hrt_prepare_call(state->device, function, def, vm_call, call);
  if (status == HRT_OK) {
    hrt_hal_submission_t submission = {
        .command_buffer = state->command_buffers[vm_call->function_ordinal],
        .bindings = call->bindings,
        .binding_count = values,
        .completion = {hrt_program_call_complete, call},
        .host_context = call,
        .dispatch_timing = hrt_hal_module_options(state->hal)->profile
                               ? hrt_program_dispatch_timing
                               : NULL,
    };
    status = hrt_hal_device_queue_submit(state->device, &submission);
  }
  if (status != HRT_OK) hrt_program_call_free(call, true);
  return status;
}

//===----------------------------------------------------------------------===//
// Module
//===----------------------------------------------------------------------===//

static void hrt_program_module_destroy(hrt_vm_module_t* base) {
  hrt_program_module_t* module = (hrt_program_module_t*)base;
  hrt_vm_module_deinitialize(base);
  hrt_arena_deinit(&module->arena);
  hrt_json_document_free(module->document);
  free(module);
}

static const hrt_vm_module_vtable_t hrt_program_module_vtable = {
    .destroy = hrt_program_module_destroy,
    .create_state = hrt_program_create_state,
    .free_state = hrt_program_free_state,
    .begin_call = hrt_program_begin_call,
};

bool hrt_program_module_isa(const hrt_vm_module_t* module) {
  return module->vtable == &hrt_program_module_vtable;
}

const char* const* hrt_program_module_dispatch_keys(
    const hrt_vm_module_t* module, uint32_t* out_count) {
  const hrt_program_module_t* program = (const hrt_program_module_t*)module;
  *out_count = program->dispatch_count;
  return program->dispatch_keys;
}

hrt_status_t hrt_program_module_create(const char* json, size_t length,
                                       const char* base_dir,
                                       hrt_vm_module_t** out_module) {
  hrt_program_module_t* module = NULL;
  HRT_RETURN_IF_ERROR(
      hrt_allocate_zeroed(sizeof(*module), "module", (void**)&module));
  hrt_status_t status = hrt_json_parse(json, length, &module->document);
  if (status == HRT_OK) {
    hrt_parser_t parser = {module, base_dir};
    status = hrt_parse_module(&parser, hrt_json_root(module->document));
  }
  if (status != HRT_OK) {
    hrt_arena_deinit(&module->arena);
    hrt_json_document_free(module->document);
    free(module);
    return status;
  }
  hrt_vm_module_initialize(&hrt_program_module_vtable, module->base.name,
                           module->base.function_count, module->defs,
                           &module->base);
  *out_module = &module->base;
  return HRT_OK;
}
