#include "modules/program/program_parse.h"

#include <stdio.h>
#include <string.h>

#include "modules/program/program_executables.h"
#include "modules/program/program_fields.h"
#include "modules/program/program_ops.h"
#include "modules/program/program_values.h"

#define HRT_PROGRAM_FORMAT "halrt.module/1"
#define HRT_PROGRAM_MAX_OPS 65536

static hrt_status_t hrt_parse_function(hrt_program_parser_t* parser,
                                       const char* module_name,
                                       const char* name, const hrt_json_t* json,
                                       hrt_function_t* function,
                                       hrt_vm_function_def_t* def) {
  static const char* const known[] = {"inputs", "outputs", "locals", "body"};
  char path[HRT_PATH_MAX];
  hrt_program_path_format(path, "functions.%s", name);
  if (!hrt_program_is_identifier(name)) {
    return hrt_program_field_error(HRT_STATUS_INVALID_ARGUMENT, path,
                                   "'%s' is not a name", name);
  }
  HRT_RETURN_IF_ERROR(hrt_program_expect(json, HRT_JSON_OBJECT, path));
  HRT_RETURN_IF_ERROR(hrt_program_check_keys(json, known, 4, path));
  size_t qualified_length = strlen(module_name) + strlen(name) + 2;
  char* qualified = NULL;
  HRT_RETURN_IF_ERROR(
      hrt_program_alloc(parser, qualified_length, (void**)&qualified));
  snprintf(qualified, qualified_length, "%s.%s", module_name, name);
  function->qualified_name = qualified;
  uint32_t input_count = 0, output_count = 0;
  HRT_RETURN_IF_ERROR(hrt_program_parse_values(parser, json, path, function,
                                               &input_count, &output_count));
  *def = (hrt_vm_function_def_t){
      .name = name,
      .input_count = input_count,
      .output_count = output_count,
      .inputs = function->types,
      .outputs = function->types + input_count,
  };
  char body_path[HRT_PATH_MAX];
  hrt_program_path_format(body_path, "%s.body", path);
  const hrt_json_t* body = hrt_json_get(json, "body");
  HRT_RETURN_IF_ERROR(hrt_program_expect(body, HRT_JSON_ARRAY, body_path));
  if (body->length > HRT_PROGRAM_MAX_OPS) {
    return hrt_program_field_error(HRT_STATUS_INVALID_ARGUMENT, body_path,
                                   "has %zu ops (at most %d)", body->length,
                                   HRT_PROGRAM_MAX_OPS);
  }
  function->op_count = (uint32_t)body->length;
  HRT_RETURN_IF_ERROR(hrt_program_alloc(parser, body->length * sizeof(hrt_op_t),
                                        (void**)&function->ops));
  for (size_t i = 0; i < body->length; ++i) {
    char op_path[HRT_PATH_MAX];
    hrt_program_path_format(op_path, "%s[%zu]", body_path, i);
    hrt_op_t* op = &function->ops[i];
    HRT_RETURN_IF_ERROR(
        hrt_program_parse_op(parser, function, &body->items[i], op_path, op));
    if (op->kind != HRT_OP_DISPATCH) continue;
    size_t length = strlen(name) + strlen(op->entry) + 16;
    char* key = NULL;
    HRT_RETURN_IF_ERROR(hrt_program_alloc(parser, length, (void**)&key));
    snprintf(key, length, "%s:%zu:%s", name, i, op->entry);
    op->key = key;
    parser->module->dispatch_count += 1;
  }
  return hrt_program_mark_overwritten(parser, function, input_count,
                                      input_count + output_count);
}

hrt_status_t hrt_program_parse_module(hrt_program_parser_t* parser,
                                      const hrt_json_t* root) {
  static const char* const known[] = {"format", "name", "executables",
                                      "constants", "functions"};
  HRT_RETURN_IF_ERROR(hrt_program_expect(root, HRT_JSON_OBJECT, "module"));
  HRT_RETURN_IF_ERROR(hrt_program_check_keys(root, known, 5, "module"));
  const hrt_json_t* format = hrt_json_get(root, "format");
  HRT_RETURN_IF_ERROR(hrt_program_expect(format, HRT_JSON_STRING, "format"));
  if (strcmp(format->string, HRT_PROGRAM_FORMAT) != 0) {
    return hrt_program_field_error(HRT_STATUS_INVALID_ARGUMENT, "format",
                                   "'%s' is not supported (expected '%s')",
                                   format->string, HRT_PROGRAM_FORMAT);
  }
  const hrt_json_t* name = hrt_json_get(root, "name");
  HRT_RETURN_IF_ERROR(hrt_program_expect_identifier(name, "name"));
  if (strcmp(name->string, "hal") == 0) {
    return hrt_program_field_error(HRT_STATUS_INVALID_ARGUMENT, "name",
                                   "'hal' is reserved for the HAL module");
  }
  parser->module->base.name = name->string;  // call ops compare with it
  const hrt_json_t* executables = hrt_json_get(root, "executables");
  if (executables) {
    HRT_RETURN_IF_ERROR(hrt_program_parse_executables(parser, executables));
  }
  const hrt_json_t* constants = hrt_json_get(root, "constants");
  if (constants) {
    HRT_RETURN_IF_ERROR(hrt_program_parse_constants(parser, constants));
  }
  const hrt_json_t* functions = hrt_json_get(root, "functions");
  HRT_RETURN_IF_ERROR(
      hrt_program_expect(functions, HRT_JSON_OBJECT, "functions"));
  hrt_program_module_t* module = parser->module;
  HRT_RETURN_IF_ERROR(
      hrt_program_alloc(parser, functions->length * sizeof(hrt_function_t),
                        (void**)&module->functions));
  HRT_RETURN_IF_ERROR(hrt_program_alloc(
      parser, functions->length * sizeof(hrt_vm_function_def_t),
      (void**)&module->defs));
  for (size_t i = 0; i < functions->length; ++i) {
    HRT_RETURN_IF_ERROR(hrt_parse_function(
        parser, name->string, functions->keys[i], &functions->items[i],
        &module->functions[i], &module->defs[i]));
  }
  HRT_RETURN_IF_ERROR(
      hrt_program_alloc(parser, module->dispatch_count * sizeof(const char*),
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
  module->base.function_count = (uint32_t)functions->length;
  return HRT_OK;
}
