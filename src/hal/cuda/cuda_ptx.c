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
  uint32_t binding_count;
  uint32_t constant_count;
} hrt_ptx_entry_span_t;

typedef struct hrt_ptx_parser_s {
  hrt_ptx_lexer_t lexer;
  hrt_ptx_entry_span_t* entries;
  uint32_t count;
  uint32_t capacity;
} hrt_ptx_parser_t;

static hrt_status_t hrt_ptx_malformed(const hrt_ptx_entry_span_t* entry,
                                      uint32_t line, const char* what) {
  return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                         "PTX entry '%.*s' (line %u): %s",
                         (int)entry->name_length, entry->name, line, what);
}

// Classifies parameter `index` (its tokens, up to the ',' or ')') and adds
// it to `entry`.
static hrt_status_t hrt_ptx_add_param(hrt_ptx_entry_span_t* entry,
                                      const hrt_ptx_token_t* tokens,
                                      uint32_t token_count, uint32_t index,
                                      bool is_array) {
  const hrt_ptx_token_t* type = NULL;
  for (uint32_t i = 0; i < token_count && !type; ++i) {
    if (hrt_ptx_is_type(&tokens[i])) type = &tokens[i];
  }
  const uint32_t line = token_count ? tokens[0].line : 0;
  if (token_count == 0 || !hrt_ptx_is(&tokens[0], ".param") || !type) {
    return hrt_ptx_malformed(entry, line,
                             "a parameter is not a '.param .<type> name' "
                             "declaration");
  }
  static const char* const kRule =
      "halrt passes bindings as 64-bit device pointers (.u64/.b64), then "
      "constants as 32-bit values (.u32/.b32/.s32/.f32)";
  char message[320];
  if (is_array) {
    snprintf(message, sizeof(message),
             "parameter %u is an array or struct passed by value; %s", index,
             kRule);
    return hrt_ptx_malformed(entry, line, message);
  }
  const bool pointer = hrt_ptx_is(type, ".u64") || hrt_ptx_is(type, ".b64");
  const bool constant = hrt_ptx_is(type, ".u32") || hrt_ptx_is(type, ".b32") ||
                        hrt_ptx_is(type, ".s32") || hrt_ptx_is(type, ".f32");
  if (!pointer && !constant) {
    snprintf(message, sizeof(message), "parameter %u has type %.*s; %s", index,
             (int)type->length, type->text, kRule);
    return hrt_ptx_malformed(entry, line, message);
  }
  if (pointer && entry->constant_count > 0) {
    snprintf(message, sizeof(message),
             "pointer parameter %u follows a 32-bit parameter; %s", index,
             kRule);
    return hrt_ptx_malformed(entry, line, message);
  }
  if (pointer) {
    if (++entry->binding_count > HRT_HAL_MAX_DISPATCH_BINDINGS) {
      snprintf(message, sizeof(message), "more than %d pointer parameters",
               HRT_HAL_MAX_DISPATCH_BINDINGS);
      return hrt_ptx_malformed(entry, line, message);
    }
  } else if (++entry->constant_count > HRT_HAL_MAX_DISPATCH_CONSTANTS) {
    snprintf(message, sizeof(message), "more than %d 32-bit parameters",
             HRT_HAL_MAX_DISPATCH_CONSTANTS);
    return hrt_ptx_malformed(entry, line, message);
  }
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
          hrt_ptx_add_param(entry, tokens, token_count, index, is_array));
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
  for (uint32_t i = 0; i < parser->count; ++i) {
    if (parser->entries[i].name_length == name.length &&
        memcmp(parser->entries[i].name, name.text, name.length) == 0) {
      return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                             "PTX declares entry '%.*s' twice (line %u)",
                             (int)name.length, name.text, name.line);
    }
  }
  if (parser->count == parser->capacity) {
    uint32_t capacity = parser->capacity ? parser->capacity * 2 : 16;
    hrt_ptx_entry_span_t* entries =
        realloc(parser->entries, capacity * sizeof(*entries));
    if (!entries) {
      return hrt_status_make(HRT_STATUS_RESOURCE_EXHAUSTED,
                             "out of host memory parsing PTX");
    }
    parser->entries = entries;
    parser->capacity = capacity;
  }
  hrt_ptx_entry_span_t* entry = &parser->entries[parser->count];
  *entry = (hrt_ptx_entry_span_t){name.text, name.length, 0, 0};
  hrt_ptx_token_t token;
  if (hrt_ptx_next(&parser->lexer, &token)) {
    if (hrt_ptx_is(&token, "(")) {
      HRT_RETURN_IF_ERROR(hrt_ptx_parse_params(parser, entry));
    } else if (hrt_ptx_is(&token, "{")) {
      ++*depth;  // no parameter list: the body starts here
    }
  }
  ++parser->count;
  return HRT_OK;
}

// Copies the spans into one block: the entries, then their names.
static hrt_status_t hrt_ptx_pack(const hrt_ptx_parser_t* parser,
                                 hrt_cuda_ptx_entry_t** out_entries) {
  size_t size = parser->count * sizeof(hrt_cuda_ptx_entry_t);
  for (uint32_t i = 0; i < parser->count; ++i) {
    size += parser->entries[i].name_length + 1;
  }
  hrt_cuda_ptx_entry_t* entries = NULL;
  HRT_RETURN_IF_ERROR(hrt_allocate(size, "PTX entries", (void**)&entries));
  char* names = (char*)(entries + parser->count);
  for (uint32_t i = 0; i < parser->count; ++i) {
    const hrt_ptx_entry_span_t* span = &parser->entries[i];
    memcpy(names, span->name, span->name_length);
    names[span->name_length] = 0;
    entries[i] = (hrt_cuda_ptx_entry_t){names, span->binding_count,
                                        span->constant_count};
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
  if (status != HRT_OK) return status;
  *out_count = count;
  *out_entries = entries;
  return HRT_OK;
}
