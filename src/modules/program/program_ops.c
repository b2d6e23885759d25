#include "modules/program/program_ops.h"

#include <string.h>

#include "modules/program/program_constants.h"
#include "modules/program/program_executables.h"
#include "modules/program/program_fields.h"
#include "modules/program/program_values.h"

// INVALID_ARGUMENT when value `v` is a module constant (read-only): `use`
// says what the op would do with it.
static hrt_status_t hrt_expect_writable(const hrt_function_t* function,
                                        uint32_t v, const char* path,
                                        const char* use) {
  if (v < function->constant_base) return HRT_OK;
  return hrt_program_field_error(
      HRT_STATUS_INVALID_ARGUMENT, path,
      "'%s' is a module constant, which is read-only: it cannot be %s",
      function->types[v].name, use);
}

// The constants of a dispatch of a declared entry: one per scalar parameter,
// in order, typed by it.
static hrt_status_t hrt_parse_typed_constants(hrt_program_parser_t* parser,
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
    HRT_RETURN_IF_ERROR(hrt_program_expect(constants, HRT_JSON_ARRAY, path));
  }
  const size_t given = constants ? constants->length : 0;
  if (given != scalars) {
    return hrt_program_field_error(
        HRT_STATUS_INVALID_ARGUMENT, path,
        "kernel '%s' declares %u scalar parameters, so "
        "its dispatches take %u constants (got %zu)",
        decl->name, scalars, scalars, given);
  }
  op->constant_count = words;
  HRT_RETURN_IF_ERROR(hrt_program_alloc(parser, ((size_t)words + 1) * 4,
                                        (void**)&op->constants));
  uint32_t c = 0, w = 0;
  for (uint32_t p = 0; p < decl->param_count; ++p) {
    if (decl->params[p] == HRT_HAL_PARAM_BUFFER) continue;
    char item_path[HRT_PATH_MAX];
    hrt_program_path_format(item_path, "%s[%u]", path, c);
    HRT_RETURN_IF_ERROR(hrt_program_parse_typed_constant(
        &constants->items[c], decl->params[p], decl->name, item_path,
        &op->constants[w]));
    w += hrt_hal_param_type_words(decl->params[p]);
    ++c;
  }
  return HRT_OK;
}

// A 1- to 3-element list of positive integers, each at most max[i].
static hrt_status_t hrt_parse_grid(const hrt_json_t* value, const uint32_t* max,
                                   const char* path, uint32_t out[3]) {
  HRT_RETURN_IF_ERROR(hrt_program_expect(value, HRT_JSON_ARRAY, path));
  if (value->length < 1 || value->length > 3) {
    return hrt_program_field_error(HRT_STATUS_INVALID_ARGUMENT, path,
                                   "must have 1 to 3 entries (got %zu)",
                                   value->length);
  }
  out[0] = out[1] = out[2] = 1;
  for (size_t i = 0; i < value->length; ++i) {
    char item_path[HRT_PATH_MAX];
    hrt_program_path_format(item_path, "%s[%zu]", path, i);
    int64_t n = 0;
    HRT_RETURN_IF_ERROR(
        hrt_program_expect_integer(&value->items[i], 1, max[i], item_path, &n));
    out[i] = (uint32_t)n;
  }
  return HRT_OK;
}

static hrt_status_t hrt_parse_dispatch(hrt_program_parser_t* parser,
                                       const hrt_function_t* function,
                                       const hrt_json_t* json, const char* path,
                                       hrt_op_t* op) {
  static const char* const known[] = {"op",       "kernel",    "workgroups",
                                      "bindings", "constants", "workgroupSize"};
  HRT_RETURN_IF_ERROR(hrt_program_check_keys(json, known, 6, path));
  char field[HRT_PATH_MAX];
  const hrt_json_t* kernel = NULL;
  HRT_RETURN_IF_ERROR(
      hrt_program_string_field(json, path, "kernel", field, &kernel));
  const char* dot = strchr(kernel->string, '.');
  if (!dot || dot == kernel->string || !dot[1]) {
    return hrt_program_field_error(HRT_STATUS_INVALID_ARGUMENT, field,
                                   "'%s' must be 'executable.entry'",
                                   kernel->string);
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
    return hrt_program_field_error(HRT_STATUS_NOT_FOUND, field,
                                   "unknown executable '%.*s'",
                                   (int)name_length, kernel->string);
  }
  if (module->executables[op->executable].builtin) {
    op->signature = hrt_builtin_signature_find(op->entry);
    if (!op->signature) {
      return hrt_program_field_error(HRT_STATUS_NOT_FOUND, field,
                                     "unknown built-in kernel '%s' (see "
                                     "docs/kernels.md)",
                                     op->entry);
    }
  }
  const hrt_hal_entry_decl_t* decl = NULL;
  HRT_RETURN_IF_ERROR(hrt_program_find_entry_decl(
      &module->executables[op->executable], op->entry, field, &decl));
  if (decl && !decl->typed) decl = NULL;  // inferred: untyped constants
  static const uint32_t count_max[3] = {0x7FFFFFFFu, 65535u, 65535u};
  static const uint32_t size_max[3] = {1024u, 1024u, 64u};
  hrt_program_path_format(field, "%s.workgroups", path);
  HRT_RETURN_IF_ERROR(hrt_parse_grid(hrt_json_get(json, "workgroups"),
                                     count_max, field, op->workgroup_count));
  uint64_t workgroups = (uint64_t)op->workgroup_count[0] *
                        op->workgroup_count[1] * op->workgroup_count[2];
  if (workgroups > HRT_HAL_MAX_DISPATCH_WORKGROUPS) {
    return hrt_program_field_error(
        HRT_STATUS_INVALID_ARGUMENT, field,
        "%llu workgroups exceed the limit of %llu",
        (unsigned long long)workgroups,
        (unsigned long long)HRT_HAL_MAX_DISPATCH_WORKGROUPS);
  }
  op->workgroup_size[0] = op->workgroup_size[1] = op->workgroup_size[2] = 1;
  const hrt_json_t* size = hrt_json_get(json, "workgroupSize");
  if (size) {
    hrt_program_path_format(field, "%s.workgroupSize", path);
    HRT_RETURN_IF_ERROR(
        hrt_parse_grid(size, size_max, field, op->workgroup_size));
    if ((uint64_t)op->workgroup_size[0] * op->workgroup_size[1] *
            op->workgroup_size[2] >
        1024) {
      return hrt_program_field_error(
          HRT_STATUS_INVALID_ARGUMENT, field,
          "more than 1024 invocations per workgroup");
    }
  }
  hrt_program_path_format(field, "%s.constants", path);
  const hrt_json_t* constants = hrt_json_get(json, "constants");
  if (decl) {
    HRT_RETURN_IF_ERROR(
        hrt_parse_typed_constants(parser, decl, constants, field, op));
  } else if (constants) {
    HRT_RETURN_IF_ERROR(hrt_program_expect(constants, HRT_JSON_ARRAY, field));
    if (constants->length > HRT_HAL_MAX_DISPATCH_CONSTANTS) {
      return hrt_program_field_error(HRT_STATUS_INVALID_ARGUMENT, field,
                                     "at most %d constants",
                                     HRT_HAL_MAX_DISPATCH_CONSTANTS);
    }
    op->constant_count = (uint32_t)constants->length;
    HRT_RETURN_IF_ERROR(hrt_program_alloc(parser, (constants->length + 1) * 4,
                                          (void**)&op->constants));
    for (size_t i = 0; i < constants->length; ++i) {
      char item_path[HRT_PATH_MAX];
      hrt_program_path_format(item_path, "%s[%zu]", field, i);
      hrt_constant_kind_t kind =
          !op->signature ? HRT_CONSTANT_ANY
          : i < 32 && (op->signature->float_constants >> i) & 1u
              ? HRT_CONSTANT_F32
              : HRT_CONSTANT_INTEGER;
      HRT_RETURN_IF_ERROR(hrt_program_parse_constant(
          &constants->items[i], kind, op->entry, item_path, &op->constants[i]));
    }
  }
  hrt_program_path_format(field, "%s.bindings", path);
  HRT_RETURN_IF_ERROR(hrt_program_parse_value_list(
      parser, function, hrt_json_get(json, "bindings"),
      HRT_HAL_MAX_DISPATCH_BINDINGS, field, op));
  if (decl) {
    uint32_t buffers = 0;
    for (uint32_t p = 0; p < decl->param_count; ++p) {
      buffers += decl->params[p] == HRT_HAL_PARAM_BUFFER;
    }
    if (buffers == 0) {
      return hrt_program_field_error(
          HRT_STATUS_INVALID_ARGUMENT, field,
          "kernel '%s' declares no buffer parameter, and a "
          "dispatch takes 1 to %d bindings: it cannot be "
          "dispatched",
          decl->name, HRT_HAL_MAX_DISPATCH_BINDINGS);
    }
    if (op->operand_count != buffers) {
      return hrt_program_field_error(
          HRT_STATUS_INVALID_ARGUMENT, field,
          "kernel '%s' declares %u buffer parameters, so "
          "its dispatches take %u bindings (got %u)",
          decl->name, buffers, buffers, op->operand_count);
    }
  }
  const hrt_builtin_signature_t* signature = op->signature;
  if (!signature) return HRT_OK;
  if (op->operand_count != signature->binding_count ||
      op->constant_count != signature->constant_count) {
    return hrt_program_field_error(
        HRT_STATUS_INVALID_ARGUMENT, path,
        "kernel '%s' takes %u bindings and %u constants "
        "(got %u and %u)",
        op->entry, signature->binding_count, signature->constant_count,
        op->operand_count, op->constant_count);
  }
  if (!hrt_builtin_op_valid(signature, op->constants)) {
    char item_path[HRT_PATH_MAX];
    hrt_program_path_format(item_path, "%s.constants[%u]", path,
                            signature->op_constant);
    return hrt_program_field_error(
        HRT_STATUS_INVALID_ARGUMENT, item_path,
        "kernel '%s' has operations 0 to %u (got %u; see docs/kernels.md)",
        op->entry, signature->op_limit - 1u,
        op->constants[signature->op_constant]);
  }
  if (signature->check && !signature->check(op->constants)) {
    char item_path[HRT_PATH_MAX];
    hrt_program_path_format(item_path, "%s.constants", path);
    return hrt_program_field_error(
        HRT_STATUS_INVALID_ARGUMENT, item_path,
        "do not describe a '%s' dispatch (docs/kernels.md, \"Validation\")",
        op->entry);
  }
  for (uint32_t i = 0; i < op->operand_count; ++i) {
    const hrt_builtin_binding_t* rule = &signature->bindings[i];
    const hrt_vm_tensor_type_t* type = &function->types[op->operands[i]];
    char item_path[HRT_PATH_MAX];
    hrt_program_path_format(item_path, "%s[%u]", field, i);
    if (rule->written) {
      char use[HRT_PATH_MAX];
      hrt_program_path_format(use, "written by kernel '%s'", op->entry);
      HRT_RETURN_IF_ERROR(
          hrt_expect_writable(function, op->operands[i], item_path, use));
    }
    if (!rule->any_type && type->element_type != rule->element_type) {
      return hrt_program_field_error(
          HRT_STATUS_INVALID_ARGUMENT, item_path,
          "kernel '%s' needs %s here but '%s' is %s", op->entry,
          hrt_hal_element_type_name(rule->element_type), type->name,
          hrt_hal_element_type_name(type->element_type));
    }
    uint64_t needed =
        hrt_builtin_binding_min_bytes(signature, i, op->constants,
                                      op->workgroup_count);
    uint64_t have = function->byte_lengths[op->operands[i]];
    if (have < needed) {
      return hrt_program_field_error(
          HRT_STATUS_INVALID_ARGUMENT, item_path,
          "kernel '%s' needs %llu bytes here for its "
          "constants but '%s' has %llu",
          op->entry, (unsigned long long)needed, type->name,
          (unsigned long long)have);
    }
  }
  return HRT_OK;
}

// {"op": "call", "callee": "module.function", "args": [...], "results":
// [...]}: the callee is resolved when a context links the module.
static hrt_status_t hrt_parse_call(hrt_program_parser_t* parser,
                                   const hrt_function_t* function,
                                   const hrt_json_t* json, const char* path,
                                   hrt_op_t* op) {
  static const char* const known[] = {"op", "callee", "args", "results"};
  HRT_RETURN_IF_ERROR(hrt_program_check_keys(json, known, 4, path));
  char field[HRT_PATH_MAX];
  const hrt_json_t* callee = NULL;
  HRT_RETURN_IF_ERROR(
      hrt_program_string_field(json, path, "callee", field, &callee));
  const char* dot = strchr(callee->string, '.');
  const size_t module_length = dot ? (size_t)(dot - callee->string) : 0;
  char module_name[HRT_PATH_MAX] = "";
  if (dot && module_length < sizeof(module_name)) {
    memcpy(module_name, callee->string, module_length);
    module_name[module_length] = 0;
  }
  if (!dot || !hrt_program_is_identifier(module_name) ||
      !hrt_program_is_identifier(dot + 1)) {
    return hrt_program_field_error(HRT_STATUS_INVALID_ARGUMENT, field,
                                   "'%s' must be 'module.function'",
                                   callee->string);
  }
  if (strcmp(module_name, parser->module->base.name) == 0) {
    return hrt_program_field_error(
        HRT_STATUS_INVALID_ARGUMENT, field,
        "'%s' is a function of this module; a call goes to a module linked "
        "before it",
        callee->string);
  }
  op->callee = callee->string;
  const char* const lists[2] = {"args", "results"};
  const hrt_json_t* items[2];
  for (int l = 0; l < 2; ++l) {
    hrt_program_path_format(field, "%s.%s", path, lists[l]);
    items[l] = hrt_json_get(json, lists[l]);
    HRT_RETURN_IF_ERROR(hrt_program_expect(items[l], HRT_JSON_ARRAY, field));
  }
  op->arg_count = (uint32_t)items[0]->length;
  op->operand_count = (uint32_t)(items[0]->length + items[1]->length);
  HRT_RETURN_IF_ERROR(hrt_program_alloc(
      parser, ((size_t)op->operand_count + 1) * sizeof(uint32_t),
      (void**)&op->operands));
  for (uint32_t i = 0; i < op->operand_count; ++i) {
    const bool arg = i < op->arg_count;
    const uint32_t item = arg ? i : i - op->arg_count;
    hrt_program_path_format(field, "%s.%s[%u]", path, lists[!arg], item);
    HRT_RETURN_IF_ERROR(hrt_program_find_value(
        function, &items[!arg]->items[item], field, &op->operands[i]));
    HRT_RETURN_IF_ERROR(hrt_expect_writable(
        function, op->operands[i], field,
        arg ? "an argument of a call (copy it into a local first)"
            : "a result of a call"));
    for (uint32_t j = op->arg_count; !arg && j < i; ++j) {
      if (op->operands[j] == op->operands[i]) {
        return hrt_program_field_error(
            HRT_STATUS_INVALID_ARGUMENT, field,
            "'%s' receives two results of the call",
            function->types[op->operands[i]].name);
      }
    }
  }
  return HRT_OK;
}

// A trace's "counts": [{"value": c, "step": s}, ...], one per reported
// value, each an f32 value whose health chain_health_f32 counted after step
// s into c, a u32 [W, 6, 3] value (docs/module-format.md, "trace").
static hrt_status_t hrt_parse_trace_counts(hrt_program_parser_t* parser,
                                           const hrt_function_t* function,
                                           const hrt_json_t* list,
                                           const char* path, hrt_op_t* op) {
  char field[HRT_PATH_MAX];
  hrt_program_path_format(field, "%s.counts", path);
  HRT_RETURN_IF_ERROR(hrt_program_expect(list, HRT_JSON_ARRAY, field));
  if (!op->has_trace_mode || op->trace_mode != HRT_HAL_TRACE_HEALTH) {
    return hrt_program_field_error(
        HRT_STATUS_INVALID_ARGUMENT, field,
        "counts report health only: the trace needs \"mode\": \"health\"");
  }
  if (list->length != op->operand_count) {
    return hrt_program_field_error(
        HRT_STATUS_INVALID_ARGUMENT, field,
        "must have one entry per value (%u), not %zu", op->operand_count,
        list->length);
  }
  HRT_RETURN_IF_ERROR(hrt_program_alloc(
      parser, list->length * sizeof(uint32_t), (void**)&op->counts));
  HRT_RETURN_IF_ERROR(
      hrt_program_alloc(parser, list->length, (void**)&op->steps));
  for (uint32_t i = 0; i < op->operand_count; ++i) {
    static const char* const known[] = {"value", "step"};
    char item[HRT_PATH_MAX], member[HRT_PATH_MAX];
    hrt_program_path_format(item, "%s[%u]", field, i);
    const hrt_json_t* entry = &list->items[i];
    HRT_RETURN_IF_ERROR(hrt_program_expect(entry, HRT_JSON_OBJECT, item));
    HRT_RETURN_IF_ERROR(hrt_program_check_keys(entry, known, 2, item));
    hrt_program_path_format(member, "%s.value", item);
    HRT_RETURN_IF_ERROR(hrt_program_find_value(
        function, hrt_json_get(entry, "value"), member, &op->counts[i]));
    const hrt_vm_tensor_type_t* type = &function->types[op->counts[i]];
    if (type->element_type != HRT_HAL_ELEMENT_TYPE_U32 || type->rank != 3 ||
        type->shape[0] < 1 || type->shape[1] != 6 || type->shape[2] != 3) {
      return hrt_program_field_error(
          HRT_STATUS_INVALID_ARGUMENT, member,
          "'%s' must be u32 of shape [W, 6, 3] with W >= 1 (chain_health_f32's "
          "counts)",
          type->name);
    }
    hrt_program_path_format(member, "%s.step", item);
    int64_t step = 0;
    HRT_RETURN_IF_ERROR(hrt_program_expect_integer(hrt_json_get(entry, "step"),
                                                   0, 5, member, &step));
    op->steps[i] = (uint8_t)step;
    const hrt_vm_tensor_type_t* reported = &function->types[op->operands[i]];
    if (reported->element_type != HRT_HAL_ELEMENT_TYPE_F32) {
      return hrt_program_field_error(
          HRT_STATUS_INVALID_ARGUMENT, item,
          "reports '%s', which is %s: counts are of f32 chain steps",
          reported->name,
          hrt_hal_element_type_name(reported->element_type));
    }
  }
  return HRT_OK;
}

hrt_status_t hrt_program_parse_op(hrt_program_parser_t* parser,
                                  const hrt_function_t* function,
                                  const hrt_json_t* json, const char* path,
                                  hrt_op_t* op) {
  HRT_RETURN_IF_ERROR(hrt_program_expect(json, HRT_JSON_OBJECT, path));
  char field[HRT_PATH_MAX];
  const hrt_json_t* kind = NULL;
  HRT_RETURN_IF_ERROR(hrt_program_string_field(json, path, "op", field, &kind));
  const char* name = kind->string;
  if (strcmp(name, "dispatch") == 0) {
    op->kind = HRT_OP_DISPATCH;
    return hrt_parse_dispatch(parser, function, json, path, op);
  }
  if (strcmp(name, "call") == 0) {
    op->kind = HRT_OP_CALL;
    return hrt_parse_call(parser, function, json, path, op);
  }
  if (strcmp(name, "barrier") == 0) {
    static const char* const known[] = {"op"};
    op->kind = HRT_OP_BARRIER;
    return hrt_program_check_keys(json, known, 1, path);
  }
  if (strcmp(name, "trace") == 0) {
    static const char* const known[] = {"op", "key", "values", "mode",
                                        "counts"};
    op->kind = HRT_OP_TRACE;
    HRT_RETURN_IF_ERROR(hrt_program_check_keys(json, known, 5, path));
    const hrt_json_t* mode = hrt_json_get(json, "mode");
    if (mode) {
      hrt_program_path_format(field, "%s.mode", path);
      HRT_RETURN_IF_ERROR(hrt_program_expect(mode, HRT_JSON_STRING, field));
      HRT_RETURN_IF_ERROR(hrt_status_annotate(
          hrt_hal_trace_mode_parse(mode->string, &op->trace_mode), "%s",
          field));
      op->has_trace_mode = true;
    }
    const hrt_json_t* key = NULL;
    HRT_RETURN_IF_ERROR(hrt_program_string_field(json, path, "key", field, &key));
    if (!key->length) {
      return hrt_program_field_error(HRT_STATUS_INVALID_ARGUMENT, field,
                                     "must not be empty");
    }
    op->key = key->string;
    hrt_program_path_format(field, "%s.values", path);
    HRT_RETURN_IF_ERROR(hrt_program_parse_value_list(
        parser, function, hrt_json_get(json, "values"),
        HRT_HAL_MAX_TRACE_SOURCES, field, op));
    const hrt_json_t* counts = hrt_json_get(json, "counts");
    return counts ? hrt_parse_trace_counts(parser, function, counts, path, op)
                  : HRT_OK;
  }
  if (strcmp(name, "fill") == 0) {
    static const char* const known[] = {"op", "target", "value"};
    op->kind = HRT_OP_FILL;
    HRT_RETURN_IF_ERROR(hrt_program_check_keys(json, known, 3, path));
    op->operand_count = 1;
    HRT_RETURN_IF_ERROR(hrt_program_alloc(parser, 4, (void**)&op->operands));
    hrt_program_path_format(field, "%s.target", path);
    HRT_RETURN_IF_ERROR(hrt_program_find_value(
        function, hrt_json_get(json, "target"), field, &op->operands[0]));
    HRT_RETURN_IF_ERROR(hrt_expect_writable(function, op->operands[0], field,
                                            "the target of a fill"));
    hrt_hal_element_type_t type = function->types[op->operands[0]].element_type;
    op->pattern_length = (uint32_t)hrt_hal_element_type_size(type);
    hrt_program_path_format(field, "%s.value", path);
    return hrt_program_fill_pattern(hrt_json_get(json, "value"), type, field,
                                    &op->pattern);
  }
  if (strcmp(name, "copy") == 0) {
    static const char* const known[] = {"op", "source", "target"};
    op->kind = HRT_OP_COPY;
    HRT_RETURN_IF_ERROR(hrt_program_check_keys(json, known, 3, path));
    op->operand_count = 2;
    HRT_RETURN_IF_ERROR(hrt_program_alloc(parser, 8, (void**)&op->operands));
    hrt_program_path_format(field, "%s.source", path);
    HRT_RETURN_IF_ERROR(hrt_program_find_value(
        function, hrt_json_get(json, "source"), field, &op->operands[0]));
    hrt_program_path_format(field, "%s.target", path);
    HRT_RETURN_IF_ERROR(hrt_program_find_value(
        function, hrt_json_get(json, "target"), field, &op->operands[1]));
    HRT_RETURN_IF_ERROR(hrt_expect_writable(function, op->operands[1], field,
                                            "the target of a copy"));
    uint64_t source = function->byte_lengths[op->operands[0]];
    uint64_t target = function->byte_lengths[op->operands[1]];
    if (source != target) {
      return hrt_program_field_error(
          HRT_STATUS_INVALID_ARGUMENT, path,
          "copy source '%s' has %llu bytes but target '%s' "
          "has %llu",
          function->types[op->operands[0]].name, (unsigned long long)source,
          function->types[op->operands[1]].name, (unsigned long long)target);
    }
    return HRT_OK;
  }
  return hrt_program_field_error(
      HRT_STATUS_INVALID_ARGUMENT, field,
      "unknown op '%s' (expected dispatch, fill, copy, "
      "trace, barrier or call)",
      name);
}

// Whether `op`, which uses value `v`, writes every byte of it and reads
// none (hrt_program_mark_overwritten).
static bool hrt_op_overwrites(const hrt_function_t* function,
                              const hrt_op_t* op, uint32_t v) {
  switch (op->kind) {
    case HRT_OP_FILL:
      return true;
    case HRT_OP_COPY:
      return op->operands[0] != v;  // copies are of equal byte sizes
    case HRT_OP_DISPATCH:
      if (!op->signature) return false;  // a user kernel may read it
      for (uint32_t b = 0; b < op->operand_count; ++b) {
        if (op->operands[b] != v) continue;
        // A strided binding may skip elements, whatever bytes it spans.
        if (!op->signature->bindings[b].written ||
            op->signature->bindings[b].stride_base != 0 ||
            hrt_builtin_binding_min_bytes(op->signature, b, op->constants,
                                          op->workgroup_count) !=
                function->byte_lengths[v]) {
          return false;
        }
      }
      return true;
    default:
      return false;
  }
}

hrt_status_t hrt_program_mark_overwritten(hrt_program_parser_t* parser,
                                          hrt_function_t* function,
                                          uint32_t first_value,
                                          uint32_t first_local) {
  // One pass over the ops: a value is decided at its first use (`seen`).
  bool* seen = NULL;
  HRT_RETURN_IF_ERROR(hrt_program_alloc(parser,
                                        function->value_count * sizeof(bool),
                                        (void**)&function->overwritten));
  HRT_RETURN_IF_ERROR(hrt_program_alloc(
      parser, function->value_count * sizeof(bool), (void**)&function->unused));
  HRT_RETURN_IF_ERROR(hrt_program_alloc(
      parser, function->value_count * sizeof(bool), (void**)&seen));
  for (uint32_t i = 0; i < function->op_count; ++i) {
    const hrt_op_t* op = &function->ops[i];
    // A trace from counts reads the counts, not the values it reports.
    const uint32_t* used = op->counts ? op->counts : op->operands;
    for (uint32_t k = 0; k < op->operand_count; ++k) {
      const uint32_t v = used[k];
      if (v < first_value || v >= function->constant_base || seen[v]) {
        continue;
      }
      seen[v] = true;
      function->overwritten[v] = hrt_op_overwrites(function, op, v);
    }
  }
  // What a call allocates: its outputs and the locals some op uses.
  function->call_bytes = 0;
  for (uint32_t v = first_value; v < function->constant_base; ++v) {
    function->unused[v] = v >= first_local && !seen[v];
    const uint64_t bytes = function->unused[v] ? 0 : function->byte_lengths[v];
    function->call_bytes = bytes > UINT64_MAX - function->call_bytes
                               ? UINT64_MAX
                               : function->call_bytes + bytes;
  }
  return HRT_OK;
}
