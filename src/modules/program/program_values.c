#include "modules/program/program_values.h"

#include <stdio.h>
#include <string.h>

#include "modules/program/program_fields.h"

#define HRT_PROGRAM_MAX_VALUES 1024
#define HRT_PROGRAM_MAX_CONSTANTS 4096

// A value's or constant's "dtype" and "shape".
static hrt_status_t hrt_parse_type(const hrt_json_t* json, const char* path,
                                   hrt_vm_tensor_type_t* out_type,
                                   uint64_t* out_byte_length) {
  char field[HRT_PATH_MAX];
  hrt_program_path_format(field, "%s.dtype", path);
  const hrt_json_t* dtype = hrt_json_get(json, "dtype");
  HRT_RETURN_IF_ERROR(hrt_program_expect(dtype, HRT_JSON_STRING, field));
  HRT_RETURN_IF_ERROR(hrt_status_annotate(
      hrt_hal_element_type_parse(dtype->string, &out_type->element_type), "%s",
      field));
  hrt_program_path_format(field, "%s.shape", path);
  const hrt_json_t* shape = hrt_json_get(json, "shape");
  HRT_RETURN_IF_ERROR(hrt_program_expect(shape, HRT_JSON_ARRAY, field));
  if (shape->length > HRT_HAL_MAX_RANK) {
    return hrt_program_field_error(HRT_STATUS_INVALID_ARGUMENT, field,
                                   "rank %zu exceeds the maximum of %d",
                                   shape->length, HRT_HAL_MAX_RANK);
  }
  out_type->rank = (uint32_t)shape->length;
  for (size_t d = 0; d < shape->length; ++d) {
    char dim_path[HRT_PATH_MAX];
    hrt_program_path_format(dim_path, "%s[%zu]", field, d);
    HRT_RETURN_IF_ERROR(hrt_program_expect_integer(
        &shape->items[d], 0, INT32_MAX, dim_path, &out_type->shape[d]));
  }
  HRT_RETURN_IF_ERROR(hrt_status_annotate(
      hrt_hal_shape_byte_length(out_type->element_type, out_type->rank,
                                out_type->shape, out_byte_length),
      "%s", field));
  return HRT_OK;
}

static hrt_status_t hrt_parse_value(const hrt_json_t* json, const char* path,
                                    hrt_vm_tensor_type_t* out_type,
                                    uint64_t* out_byte_length) {
  static const char* const known[] = {"name", "dtype", "shape"};
  HRT_RETURN_IF_ERROR(hrt_program_expect(json, HRT_JSON_OBJECT, path));
  HRT_RETURN_IF_ERROR(hrt_program_check_keys(json, known, 3, path));
  char field[HRT_PATH_MAX];
  hrt_program_path_format(field, "%s.name", path);
  const hrt_json_t* name = hrt_json_get(json, "name");
  HRT_RETURN_IF_ERROR(hrt_program_expect_value_name(name, field));
  out_type->name = name->string;
  return hrt_parse_type(json, path, out_type, out_byte_length);
}

hrt_status_t hrt_program_parse_constants(hrt_program_parser_t* parser,
                                         const hrt_json_t* constants) {
  // "data", "file" and "offset" say where the bytes come from; the creator
  // reads them (lib/constants.js) and passes the bytes.
  static const char* const known[] = {"dtype", "shape", "data", "file",
                                      "offset"};
  HRT_RETURN_IF_ERROR(
      hrt_program_expect(constants, HRT_JSON_OBJECT, "constants"));
  if (constants->length > HRT_PROGRAM_MAX_CONSTANTS) {
    return hrt_program_field_error(HRT_STATUS_INVALID_ARGUMENT, "constants",
                                   "has %zu constants (at most %d)",
                                   constants->length,
                                   HRT_PROGRAM_MAX_CONSTANTS);
  }
  hrt_program_module_t* module = parser->module;
  HRT_RETURN_IF_ERROR(hrt_program_alloc(
      parser, constants->length * sizeof(hrt_module_constant_t),
      (void**)&module->constants));
  for (size_t i = 0; i < constants->length; ++i) {
    char path[HRT_PATH_MAX];
    hrt_program_path_format(path, "constants.%s", constants->keys[i]);
    hrt_module_constant_t* constant = &module->constants[i];
    const hrt_json_t* json = &constants->items[i];
    if (!hrt_program_is_value_name(constants->keys[i])) {
      return hrt_program_field_error(
          HRT_STATUS_INVALID_ARGUMENT, path,
          "'%s' is not a value name (1 to %d bytes, no control characters)",
          constants->keys[i], HRT_PROGRAM_MAX_VALUE_NAME);
    }
    HRT_RETURN_IF_ERROR(hrt_program_expect(json, HRT_JSON_OBJECT, path));
    HRT_RETURN_IF_ERROR(hrt_program_check_keys(json, known, 5, path));
    constant->type.name = constants->keys[i];
    HRT_RETURN_IF_ERROR(
        hrt_parse_type(json, path, &constant->type, &constant->byte_length));
    module->constant_count = (uint32_t)i + 1;
  }
  return HRT_OK;
}

hrt_status_t hrt_program_parse_values(hrt_program_parser_t* parser,
                                      const hrt_json_t* function,
                                      const char* path, hrt_function_t* out,
                                      uint32_t* out_input_count,
                                      uint32_t* out_output_count) {
  static const char* const groups[] = {"inputs", "outputs", "locals"};
  const hrt_json_t* lists[3];
  size_t total = 0;
  for (int g = 0; g < 3; ++g) {
    char group_path[HRT_PATH_MAX];
    hrt_program_path_format(group_path, "%s.%s", path, groups[g]);
    lists[g] = hrt_json_get(function, groups[g]);
    if (!lists[g] && g == 2) continue;  // locals are optional
    HRT_RETURN_IF_ERROR(
        hrt_program_expect(lists[g], HRT_JSON_ARRAY, group_path));
    total += lists[g]->length;
  }
  if (total > HRT_PROGRAM_MAX_VALUES) {
    return hrt_program_field_error(HRT_STATUS_INVALID_ARGUMENT, path,
                                   "has %zu values (at most %d)", total,
                                   HRT_PROGRAM_MAX_VALUES);
  }
  const hrt_program_module_t* module = parser->module;
  out->constant_base = (uint32_t)total;
  out->value_count = (uint32_t)total + module->constant_count;
  HRT_RETURN_IF_ERROR(
      hrt_program_alloc(parser, out->value_count * sizeof(hrt_vm_tensor_type_t),
                        (void**)&out->types));
  HRT_RETURN_IF_ERROR(hrt_program_alloc(
      parser, out->value_count * sizeof(uint64_t), (void**)&out->byte_lengths));
  uint32_t index = 0;
  for (int g = 0; g < 3; ++g) {
    if (!lists[g]) continue;
    for (size_t i = 0; i < lists[g]->length; ++i, ++index) {
      char value_path[HRT_PATH_MAX];
      hrt_program_path_format(value_path, "%s.%s[%zu]", path, groups[g], i);
      HRT_RETURN_IF_ERROR(hrt_parse_value(&lists[g]->items[i], value_path,
                                          &out->types[index],
                                          &out->byte_lengths[index]));
      for (uint32_t j = 0; j < index; ++j) {
        if (strcmp(out->types[j].name, out->types[index].name) == 0) {
          return hrt_program_field_error(
              HRT_STATUS_INVALID_ARGUMENT, value_path,
              "value '%s' is declared twice", out->types[index].name);
        }
      }
      for (uint32_t c = 0; c < module->constant_count; ++c) {
        if (strcmp(module->constants[c].type.name, out->types[index].name) ==
            0) {
          return hrt_program_field_error(
              HRT_STATUS_INVALID_ARGUMENT, value_path,
              "value '%s' has the name of a module constant",
              out->types[index].name);
        }
      }
    }
  }
  for (uint32_t c = 0; c < module->constant_count; ++c) {
    out->types[index + c] = module->constants[c].type;
    out->byte_lengths[index + c] = module->constants[c].byte_length;
  }
  *out_input_count = (uint32_t)lists[0]->length;
  *out_output_count = (uint32_t)lists[1]->length;
  return HRT_OK;
}

hrt_status_t hrt_program_find_value(const hrt_function_t* function,
                                    const hrt_json_t* name, const char* path,
                                    uint32_t* out_index) {
  HRT_RETURN_IF_ERROR(hrt_program_expect(name, HRT_JSON_STRING, path));
  for (uint32_t i = 0; i < function->value_count; ++i) {
    if (strcmp(function->types[i].name, name->string) == 0) {
      *out_index = i;
      return HRT_OK;
    }
  }
  return hrt_program_field_error(HRT_STATUS_NOT_FOUND, path,
                                 "unknown value '%s'", name->string);
}

hrt_status_t hrt_program_parse_value_list(hrt_program_parser_t* parser,
                                          const hrt_function_t* function,
                                          const hrt_json_t* list, uint32_t max,
                                          const char* path, hrt_op_t* op) {
  HRT_RETURN_IF_ERROR(hrt_program_expect(list, HRT_JSON_ARRAY, path));
  if (list->length < 1 || list->length > max) {
    return hrt_program_field_error(HRT_STATUS_INVALID_ARGUMENT, path,
                                   "must name 1 to %u values (got %zu)", max,
                                   list->length);
  }
  op->operand_count = (uint32_t)list->length;
  HRT_RETURN_IF_ERROR(hrt_program_alloc(parser, list->length * sizeof(uint32_t),
                                        (void**)&op->operands));
  for (size_t i = 0; i < list->length; ++i) {
    char item_path[HRT_PATH_MAX];
    hrt_program_path_format(item_path, "%s[%zu]", path, i);
    HRT_RETURN_IF_ERROR(hrt_program_find_value(function, &list->items[i],
                                               item_path, &op->operands[i]));
  }
  return HRT_OK;
}
