#include "hal/cuda/cuda_ptx.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "hal/command_buffer.h"

// A token of PTX text: a punctuation character, a quoted string, or a run
// of anything else (directives, names, numbers).
typedef struct hrt_ptx_token_s {
  const char* text;
  size_t length;
  uint32_t line;
} hrt_ptx_token_t;

typedef struct hrt_ptx_lexer_s {
  const char* cursor;
  uint32_t line;
} hrt_ptx_lexer_t;

static bool hrt_ptx_is_punctuation(char c) {
  return c == '(' || c == ')' || c == '{' || c == '}' || c == '[' || c == ']' ||
         c == ',' || c == ';';
}

static bool hrt_ptx_is_space(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' ||
         c == '\f';
}

static bool hrt_ptx_starts_comment(const char* c) {
  return c[0] == '/' && (c[1] == '/' || c[1] == '*');
}

// Skips spaces and comments; false at the end of the text.
static bool hrt_ptx_skip(hrt_ptx_lexer_t* lexer) {
  const char* c = lexer->cursor;
  for (;;) {
    if (*c == '\n') ++lexer->line;
    if (hrt_ptx_is_space(*c)) {
      ++c;
    } else if (c[0] == '/' && c[1] == '/') {
      while (*c && *c != '\n') ++c;
    } else if (c[0] == '/' && c[1] == '*') {
      c += 2;
      while (*c && !(c[0] == '*' && c[1] == '/')) {
        if (*c == '\n') ++lexer->line;
        ++c;
      }
      if (*c) c += 2;
    } else {
      break;
    }
  }
  lexer->cursor = c;
  return *c != 0;
}

static bool hrt_ptx_next(hrt_ptx_lexer_t* lexer, hrt_ptx_token_t* token) {
  if (!hrt_ptx_skip(lexer)) return false;
  const char* begin = lexer->cursor;
  const char* c = begin;
  if (hrt_ptx_is_punctuation(*c)) {
    ++c;
  } else if (*c == '"') {
    ++c;
    while (*c && *c != '"' && *c != '\n') ++c;
    if (*c == '"') ++c;
  } else {
    while (*c && !hrt_ptx_is_space(*c) && !hrt_ptx_is_punctuation(*c) &&
           *c != '"' && !hrt_ptx_starts_comment(c)) {
      ++c;
    }
  }
  *token = (hrt_ptx_token_t){begin, (size_t)(c - begin), lexer->line};
  lexer->cursor = c;
  return true;
}

static bool hrt_ptx_is(const hrt_ptx_token_t* token, const char* text) {
  return token->length == strlen(text) &&
         memcmp(token->text, text, token->length) == 0;
}

// Whether `token` is a PTX fundamental type: .b8 .u32 .f16x2 .pred ...
static bool hrt_ptx_is_type(const hrt_ptx_token_t* token) {
  if (hrt_ptx_is(token, ".pred")) return true;
  if (token->length < 3 || token->text[0] != '.') return false;
  char kind = token->text[1];
  if (kind != 'b' && kind != 'u' && kind != 's' && kind != 'f') return false;
  return token->text[2] >= '0' && token->text[2] <= '9';
}

typedef struct hrt_ptx_entry_span_s {
  const char* name;
  size_t name_length;
  uint32_t line;
  uint32_t first_param;  // index into the parser's params
  uint32_t param_count;
} hrt_ptx_entry_span_t;

typedef struct hrt_ptx_parser_s {
  hrt_ptx_lexer_t lexer;
  hrt_ptx_entry_span_t* entries;
  uint32_t count;
  uint32_t capacity;
  hrt_cuda_ptx_param_t* params;  // of all entries, in order
  uint32_t param_count;
  uint32_t param_capacity;
} hrt_ptx_parser_t;

// Makes room for one more item in `*items` (of `*capacity`, `count` used).
static hrt_status_t hrt_ptx_grow(void** items, uint32_t count,
                                 uint32_t* capacity, size_t item_size) {
  if (count < *capacity) return HRT_OK;
  if (*capacity > UINT32_MAX / 2) {
    return hrt_status_make(HRT_STATUS_RESOURCE_EXHAUSTED,
                           "PTX declares too many entries or parameters");
  }
  const uint32_t grown = *capacity ? *capacity * 2 : 16;
  void* resized = realloc(*items, grown * item_size);
  if (!resized) {
    return hrt_status_make(HRT_STATUS_RESOURCE_EXHAUSTED,
                           "out of host memory parsing PTX");
  }
  *items = resized;
  *capacity = grown;
  return HRT_OK;
}

static hrt_status_t hrt_ptx_malformed(const hrt_ptx_entry_span_t* entry,
                                      uint32_t line, const char* what) {
  return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                         "PTX entry '%.*s' (line %u): %s",
                         (int)entry->name_length, entry->name, line, what);
}

// Records a parameter of `entry` from its tokens (up to the ',' or ')').
static hrt_status_t hrt_ptx_add_param(hrt_ptx_parser_t* parser,
                                      hrt_ptx_entry_span_t* entry,
                                      const hrt_ptx_token_t* tokens,
                                      uint32_t token_count, bool is_array) {
  const hrt_ptx_token_t* type = NULL;
  for (uint32_t i = 0; i < token_count && !type; ++i) {
    if (hrt_ptx_is_type(&tokens[i])) type = &tokens[i];
  }
  // Else an opaque type (.texref, .samplerref, .surfref): the directive
  // before the name. Only the entry that has it fails (infer, check).
  if (!type && token_count >= 3 && tokens[token_count - 2].text[0] == '.') {
    type = &tokens[token_count - 2];
  }
  const uint32_t line = token_count ? tokens[0].line : 0;
  if (token_count == 0 || !hrt_ptx_is(&tokens[0], ".param") || !type) {
    return hrt_ptx_malformed(entry, line,
                             "a parameter is not a '.param .<type> name' "
                             "declaration");
  }
  HRT_RETURN_IF_ERROR(hrt_ptx_grow((void**)&parser->params, parser->param_count,
                                   &parser->param_capacity,
                                   sizeof(*parser->params)));
  hrt_cuda_ptx_param_t* param = &parser->params[parser->param_count++];
  *param = (hrt_cuda_ptx_param_t){.array = is_array, .line = line};
  snprintf(param->type, sizeof(param->type), "%.*s", (int)type->length,
           type->text);
  ++entry->param_count;
  return HRT_OK;
}

// Parses the parameter list after `.entry name (`, through the ')'.
static hrt_status_t hrt_ptx_parse_params(hrt_ptx_parser_t* parser,
                                         hrt_ptx_entry_span_t* entry) {
  // A declaration is a handful of tokens: .param [.align N] [.ptr ...] type
  // name; 16 leaves room for every qualifier PTX defines.
  hrt_ptx_token_t tokens[16];
  uint32_t token_count = 0;
  uint32_t index = 0;
  bool is_array = false;
  hrt_ptx_token_t token;
  while (hrt_ptx_next(&parser->lexer, &token)) {
    const bool close = hrt_ptx_is(&token, ")");
    if (close || hrt_ptx_is(&token, ",")) {
      if (close && token_count == 0 && index == 0) return HRT_OK;  // "()"
      HRT_RETURN_IF_ERROR(
          hrt_ptx_add_param(parser, entry, tokens, token_count, is_array));
      if (close) return HRT_OK;
      token_count = 0;
      is_array = false;
      ++index;
    } else if (hrt_ptx_is(&token, "[")) {
      is_array = true;
    } else if (hrt_ptx_is(&token, "{") || hrt_ptx_is(&token, "}") ||
               hrt_ptx_is(&token, ";")) {
      break;
    } else if (!is_array) {
      if (token_count == sizeof(tokens) / sizeof(tokens[0])) break;
      tokens[token_count++] = token;
    }
  }
  return hrt_ptx_malformed(entry, parser->lexer.line,
                           "its parameter list is not closed by ')'");
}

static hrt_status_t hrt_ptx_parse_entry(hrt_ptx_parser_t* parser, int* depth) {
  hrt_ptx_token_t name;
  if (!hrt_ptx_next(&parser->lexer, &name) || name.text[0] == '"' ||
      hrt_ptx_is_punctuation(name.text[0])) {
    return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                           "PTX line %u: '.entry' is not followed by a name",
                           parser->lexer.line);
  }
  HRT_RETURN_IF_ERROR(hrt_ptx_grow((void**)&parser->entries, parser->count,
                                   &parser->capacity,
                                   sizeof(*parser->entries)));
  hrt_ptx_entry_span_t* entry = &parser->entries[parser->count];
  *entry = (hrt_ptx_entry_span_t){name.text, name.length, name.line,
                                  parser->param_count, 0};
  hrt_ptx_token_t token;
  bool more = hrt_ptx_next(&parser->lexer, &token);
  if (more && hrt_ptx_is(&token, "(")) {
    HRT_RETURN_IF_ERROR(hrt_ptx_parse_params(parser, entry));
    more = hrt_ptx_next(&parser->lexer, &token);
  }
  // Performance directives (.maxntid 256, 1, 1) may come before the body.
  while (more && !hrt_ptx_is(&token, "{") && !hrt_ptx_is(&token, ";")) {
    more = hrt_ptx_next(&parser->lexer, &token);
  }
  if (more && hrt_ptx_is(&token, ";")) {
    // A prototype (nvcc's for a kernel used before its definition, or an
    // `.extern .entry`): no entry of this module.
    parser->param_count = entry->first_param;
    return HRT_OK;
  }
  if (more) ++*depth;  // the body starts here
  for (uint32_t i = 0; i < parser->count; ++i) {
    if (parser->entries[i].name_length == name.length &&
        memcmp(parser->entries[i].name, name.text, name.length) == 0) {
      return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                             "PTX declares entry '%.*s' twice (line %u)",
                             (int)name.length, name.text, name.line);
    }
  }
  ++parser->count;
  return HRT_OK;
}

// Copies the spans into one block: the entries, their parameters, then
// their names.
static hrt_status_t hrt_ptx_pack(const hrt_ptx_parser_t* parser,
                                 hrt_cuda_ptx_entry_t** out_entries) {
  size_t size = parser->count * sizeof(hrt_cuda_ptx_entry_t) +
                parser->param_count * sizeof(hrt_cuda_ptx_param_t);
  for (uint32_t i = 0; i < parser->count; ++i) {
    size += parser->entries[i].name_length + 1;
  }
  hrt_cuda_ptx_entry_t* entries = NULL;
  HRT_RETURN_IF_ERROR(hrt_allocate(size, "PTX entries", (void**)&entries));
  hrt_cuda_ptx_param_t* params =
      (hrt_cuda_ptx_param_t*)(entries + parser->count);
  if (parser->param_count) {
    memcpy(params, parser->params, parser->param_count * sizeof(*params));
  }
  char* names = (char*)(params + parser->param_count);
  for (uint32_t i = 0; i < parser->count; ++i) {
    const hrt_ptx_entry_span_t* span = &parser->entries[i];
    memcpy(names, span->name, span->name_length);
    names[span->name_length] = 0;
    entries[i] = (hrt_cuda_ptx_entry_t){names, span->line, span->param_count,
                                        params + span->first_param};
    names += span->name_length + 1;
  }
  *out_entries = entries;
  return HRT_OK;
}

hrt_status_t hrt_cuda_ptx_parse_entries(const char* text, uint32_t* out_count,
                                        hrt_cuda_ptx_entry_t** out_entries) {
  hrt_ptx_parser_t parser = {.lexer = {text, 1}};
  hrt_status_t status = HRT_OK;
  int depth = 0;  // braces: entries are declared outside every body
  hrt_ptx_token_t token;
  while (status == HRT_OK && hrt_ptx_next(&parser.lexer, &token)) {
    if (hrt_ptx_is(&token, "{")) {
      ++depth;
    } else if (hrt_ptx_is(&token, "}")) {
      --depth;
    } else if (depth == 0 && hrt_ptx_is(&token, ".entry")) {
      status = hrt_ptx_parse_entry(&parser, &depth);
    }
  }
  if (status == HRT_OK && parser.count == 0) {
    status = hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                             "PTX declares no kernel (no '.entry')");
  }
  hrt_cuda_ptx_entry_t* entries = NULL;
  if (status == HRT_OK) status = hrt_ptx_pack(&parser, &entries);
  uint32_t count = parser.count;
  free(parser.entries);
  free(parser.params);
  if (status != HRT_OK) return status;
  *out_count = count;
  *out_entries = entries;
  return HRT_OK;
}

// Whether `param` is a scalar of one of the space-separated `types`.
static bool hrt_ptx_type_in(const hrt_cuda_ptx_param_t* param,
                            const char* types) {
  if (param->array) return false;
  const size_t length = strlen(param->type);
  for (const char* at = strstr(types, param->type); at;
       at = strstr(at + 1, param->type)) {
    if ((at == types || at[-1] == ' ') &&
        (at[length] == ' ' || at[length] == 0)) {
      return true;
    }
  }
  return false;
}

static hrt_status_t hrt_ptx_entry_error(const hrt_cuda_ptx_entry_t* entry,
                                        uint32_t line, const char* what) {
  return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                         "PTX entry '%s' (line %u): %s", entry->name, line,
                         what);
}

hrt_status_t hrt_cuda_ptx_infer(const hrt_cuda_ptx_entry_t* entry,
                                uint32_t* out_binding_count,
                                uint32_t* out_constant_count) {
  static const char* const kRule =
      "halrt passes bindings as 64-bit device pointers (.u64/.b64), then "
      "constants as 32-bit values (.u32/.b32/.s32/.f32), unless the module "
      "declares the entry's parameters";
  uint32_t bindings = 0, constants = 0;
  char message[384];
  for (uint32_t i = 0; i < entry->param_count; ++i) {
    const hrt_cuda_ptx_param_t* param = &entry->params[i];
    const bool pointer = hrt_ptx_type_in(param, ".u64 .b64");
    if (param->array) {
      snprintf(message, sizeof(message),
               "parameter %u is an array or struct passed by value; %s", i,
               kRule);
    } else if (!pointer && !hrt_ptx_type_in(param, ".u32 .b32 .s32 .f32")) {
      snprintf(message, sizeof(message), "parameter %u has type %s; %s", i,
               param->type, kRule);
    } else if (pointer && constants > 0) {
      snprintf(message, sizeof(message),
               "pointer parameter %u follows a 32-bit parameter; %s", i, kRule);
    } else if (pointer && ++bindings > HRT_HAL_MAX_DISPATCH_BINDINGS) {
      snprintf(message, sizeof(message), "more than %d pointer parameters",
               HRT_HAL_MAX_DISPATCH_BINDINGS);
    } else if (!pointer && ++constants > HRT_HAL_MAX_DISPATCH_CONSTANTS) {
      snprintf(message, sizeof(message), "more than %d 32-bit parameters",
               HRT_HAL_MAX_DISPATCH_CONSTANTS);
    } else {
      continue;
    }
    return hrt_ptx_entry_error(entry, param->line, message);
  }
  *out_binding_count = bindings;
  *out_constant_count = constants;
  return HRT_OK;
}

// Whether a parameter of PTX type `param` can take a declared `type`.
static bool hrt_ptx_matches(const hrt_cuda_ptx_param_t* param,
                            hrt_hal_param_type_t type) {
  switch (type) {
    case HRT_HAL_PARAM_BUFFER:
      return hrt_ptx_type_in(param, ".u64 .b64");
    case HRT_HAL_PARAM_U64:
    case HRT_HAL_PARAM_I64:
      return hrt_ptx_type_in(param, ".u64 .b64 .s64");
    case HRT_HAL_PARAM_F64:
      return hrt_ptx_type_in(param, ".f64 .b64");
    case HRT_HAL_PARAM_U32:
    case HRT_HAL_PARAM_I32:
      return hrt_ptx_type_in(param, ".u32 .b32 .s32");
    case HRT_HAL_PARAM_F32:
      return hrt_ptx_type_in(param, ".f32 .b32");
  }
  return false;
}

hrt_status_t hrt_cuda_ptx_check(const hrt_cuda_ptx_entry_t* entry,
                                uint32_t count,
                                const hrt_hal_param_type_t* types) {
  char message[256];
  if (count != entry->param_count) {
    snprintf(message, sizeof(message),
             "the module declares %u parameters but the PTX has %u", count,
             entry->param_count);
    return hrt_ptx_entry_error(entry, entry->line, message);
  }
  for (uint32_t i = 0; i < count; ++i) {
    const hrt_cuda_ptx_param_t* param = &entry->params[i];
    if (hrt_ptx_matches(param, types[i])) continue;
    snprintf(message, sizeof(message),
             "parameter %u is declared '%s' but is %s%s in the PTX", i,
             hrt_hal_param_type_name(types[i]), param->type,
             param->array ? " [...] (an array or struct passed by value)" : "");
    return hrt_ptx_entry_error(entry, param->line, message);
  }
  return HRT_OK;
}
