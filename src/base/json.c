#include "base/json.h"

#include <errno.h>
#include <locale.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"

struct hrt_json_document_s {
  hrt_arena_t arena;  // every node, key array and string
  hrt_json_t root;
};

// The "C" locale for strtod_l, made once: numbers never depend on the
// process's LC_NUMERIC.
static locale_t hrt_json_locale;
static pthread_once_t hrt_json_locale_once = PTHREAD_ONCE_INIT;

static void hrt_json_make_locale(void) {
  hrt_json_locale = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
}

static locale_t hrt_json_c_locale(void) {
  pthread_once(&hrt_json_locale_once, hrt_json_make_locale);
  return hrt_json_locale;
}

typedef struct hrt_json_parser_s {
  hrt_json_document_t* document;
  const char* begin;
  const char* cursor;
  const char* end;
  hrt_status_t error;  // first error; parsing stops
} hrt_json_parser_t;

static void* hrt_json_alloc(hrt_json_parser_t* parser, size_t size) {
  return hrt_arena_alloc(&parser->document->arena, size);
}

static void hrt_json_fail(hrt_json_parser_t* parser, const char* what) {
  if (parser->error != HRT_OK) return;
  int line = 1, column = 1;
  for (const char* c = parser->begin; c < parser->cursor; ++c) {
    if (*c == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  parser->error = hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                                  "invalid JSON at line %d column %d: %s", line,
                                  column, what);
}

static void hrt_json_fail_oom(hrt_json_parser_t* parser) {
  if (parser->error == HRT_OK) {
    parser->error = hrt_status_make(HRT_STATUS_RESOURCE_EXHAUSTED,
                                    "out of host memory parsing JSON");
  }
}

static void hrt_json_skip_space(hrt_json_parser_t* parser) {
  while (parser->cursor < parser->end &&
         (*parser->cursor == ' ' || *parser->cursor == '\t' ||
          *parser->cursor == '\n' || *parser->cursor == '\r')) {
    ++parser->cursor;
  }
}

static bool hrt_json_literal(hrt_json_parser_t* parser, const char* word) {
  size_t length = strlen(word);
  if ((size_t)(parser->end - parser->cursor) < length ||
      memcmp(parser->cursor, word, length) != 0) {
    return false;
  }
  parser->cursor += length;
  return true;
}

static int hrt_json_hex4(const char* text) {
  int value = 0;
  for (int i = 0; i < 4; ++i) {
    char c = text[i];
    int digit = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
    if (digit < 0) return -1;
    value = value * 16 + digit;
  }
  return value;
}

static size_t hrt_json_utf8(uint32_t code, char* out) {
  if (code < 0x80) {
    out[0] = (char)code;
    return 1;
  }
  if (code < 0x800) {
    out[0] = (char)(0xC0 | (code >> 6));
    out[1] = (char)(0x80 | (code & 0x3F));
    return 2;
  }
  if (code < 0x10000) {
    out[0] = (char)(0xE0 | (code >> 12));
    out[1] = (char)(0x80 | ((code >> 6) & 0x3F));
    out[2] = (char)(0x80 | (code & 0x3F));
    return 3;
  }
  out[0] = (char)(0xF0 | (code >> 18));
  out[1] = (char)(0x80 | ((code >> 12) & 0x3F));
  out[2] = (char)(0x80 | ((code >> 6) & 0x3F));
  out[3] = (char)(0x80 | (code & 0x3F));
  return 4;
}

// Decodes the \u escape at cursor (after the 'u'), including a surrogate
// pair. Returns the code point or -1.
static long hrt_json_unicode_escape(hrt_json_parser_t* parser) {
  if (parser->end - parser->cursor < 4) return -1;
  long code = hrt_json_hex4(parser->cursor);
  if (code < 0) return -1;
  parser->cursor += 4;
  if (code >= 0xD800 && code <= 0xDBFF) {
    if (parser->end - parser->cursor < 6 || parser->cursor[0] != '\\' ||
        parser->cursor[1] != 'u') {
      return -1;
    }
    long low = hrt_json_hex4(parser->cursor + 2);
    if (low < 0xDC00 || low > 0xDFFF) return -1;
    parser->cursor += 6;
    code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
  } else if (code >= 0xDC00 && code <= 0xDFFF) {
    return -1;
  }
  return code;
}

// Parses a string at cursor (on the opening quote) into the arena.
static const char* hrt_json_string(hrt_json_parser_t* parser,
                                   size_t* out_length) {
  ++parser->cursor;
  const char* start = parser->cursor;
  // Decoded text is never longer than the source text.
  const char* close = start;
  while (close < parser->end && *close != '"') {
    if (*close == '\\' && parser->end - close < 2) {
      close = parser->end;  // a backslash that ends the input
    } else {
      close += *close == '\\' ? 2 : 1;
    }
  }
  if (close >= parser->end) {
    hrt_json_fail(parser, "unterminated string");
    return NULL;
  }
  char* out = hrt_json_alloc(parser, (size_t)(close - start) + 1);
  if (!out) {
    hrt_json_fail_oom(parser);
    return NULL;
  }
  size_t length = 0;
  while (*parser->cursor != '"') {
    unsigned char c = (unsigned char)*parser->cursor;
    if (c < 0x20) {
      hrt_json_fail(parser, "control character in string");
      return NULL;
    }
    if (c != '\\') {
      out[length++] = (char)c;
      ++parser->cursor;
      continue;
    }
    ++parser->cursor;
    char escape = *parser->cursor++;
    switch (escape) {
      case '"':
        out[length++] = '"';
        break;
      case '\\':
        out[length++] = '\\';
        break;
      case '/':
        out[length++] = '/';
        break;
      case 'b':
        out[length++] = '\b';
        break;
      case 'f':
        out[length++] = '\f';
        break;
      case 'n':
        out[length++] = '\n';
        break;
      case 'r':
        out[length++] = '\r';
        break;
      case 't':
        out[length++] = '\t';
        break;
      case 'u': {
        long code = hrt_json_unicode_escape(parser);
        if (code <= 0) {
          hrt_json_fail(parser, "invalid or NUL \\u escape");
          return NULL;
        }
        length += hrt_json_utf8((uint32_t)code, out + length);
        break;
      }
      default:
        hrt_json_fail(parser, "invalid escape in string");
        return NULL;
    }
  }
  ++parser->cursor;
  out[length] = 0;
  *out_length = length;
  return out;
}

static void hrt_json_number(hrt_json_parser_t* parser, hrt_json_t* out) {
  const char* start = parser->cursor;
  const char* c = start;
  bool integer = true;
  if (c < parser->end && *c == '-') ++c;
  if (c < parser->end && *c == '0') {
    ++c;
  } else if (c < parser->end && *c >= '1' && *c <= '9') {
    while (c < parser->end && *c >= '0' && *c <= '9') ++c;
  } else {
    hrt_json_fail(parser, "invalid number");
    return;
  }
  if (c < parser->end && *c == '.') {
    integer = false;
    ++c;
    if (c >= parser->end || *c < '0' || *c > '9') {
      hrt_json_fail(parser, "invalid number");
      return;
    }
    while (c < parser->end && *c >= '0' && *c <= '9') ++c;
  }
  if (c < parser->end && (*c == 'e' || *c == 'E')) {
    integer = false;
    ++c;
    if (c < parser->end && (*c == '+' || *c == '-')) ++c;
    if (c >= parser->end || *c < '0' || *c > '9') {
      hrt_json_fail(parser, "invalid number");
      return;
    }
    while (c < parser->end && *c >= '0' && *c <= '9') ++c;
  }
  char buffer[64];
  size_t length = (size_t)(c - start);
  if (length >= sizeof(buffer)) {
    hrt_json_fail(parser, "number too long");
    return;
  }
  memcpy(buffer, start, length);
  buffer[length] = 0;
  out->type = HRT_JSON_NUMBER;
  locale_t c_locale = hrt_json_c_locale();
  out->number =
      c_locale ? strtod_l(buffer, NULL, c_locale) : strtod(buffer, NULL);
  out->is_integer = integer;
  if (integer) {
    errno = 0;
    long long value = strtoll(buffer, NULL, 10);
    out->fits_int64 = errno == 0;
    out->integer = out->fits_int64 ? value : 0;
  }
  parser->cursor = c;
}

static void hrt_json_value(hrt_json_parser_t* parser, hrt_json_t* out,
                           int depth);

static int hrt_json_compare_keys(const void* a, const void* b) {
  return strcmp(*(const char* const*)a, *(const char* const*)b);
}

// Fails when an object names a member twice (sorting a copy: n log n).
static void hrt_json_check_unique(hrt_json_parser_t* parser, const char** keys,
                                  size_t count) {
  if (count < 2) return;
  const char** sorted = malloc(count * sizeof(*sorted));
  if (!sorted) {
    hrt_json_fail_oom(parser);
    return;
  }
  memcpy(sorted, keys, count * sizeof(*sorted));
  qsort(sorted, count, sizeof(*sorted), hrt_json_compare_keys);
  for (size_t i = 1; i < count; ++i) {
    if (strcmp(sorted[i - 1], sorted[i]) == 0) {
      char message[160];
      snprintf(message, sizeof(message), "member '%.120s' appears twice",
               sorted[i]);
      hrt_json_fail(parser, message);
      break;
    }
  }
  free(sorted);
}

// Parses the items of an array or object into a temporary vector, then
// moves them into the arena.
static void hrt_json_container(hrt_json_parser_t* parser, hrt_json_t* out,
                               int depth, bool is_object) {
  char close = is_object ? '}' : ']';
  ++parser->cursor;
  hrt_json_t* items = NULL;
  const char** keys = NULL;
  size_t count = 0, capacity = 0;
  hrt_json_skip_space(parser);
  if (parser->cursor < parser->end && *parser->cursor == close) {
    ++parser->cursor;
  } else {
    for (;;) {
      if (count == capacity) {
        capacity = capacity ? capacity * 2 : 8;
        hrt_json_t* grown_items = realloc(items, capacity * sizeof(*items));
        if (grown_items) items = grown_items;
        const char** grown_keys =
            is_object ? realloc(keys, capacity * sizeof(*keys)) : NULL;
        if (grown_keys) keys = grown_keys;
        if (!grown_items || (is_object && !grown_keys)) {
          hrt_json_fail_oom(parser);
          break;
        }
      }
      hrt_json_skip_space(parser);
      if (is_object) {
        if (parser->cursor >= parser->end || *parser->cursor != '"') {
          hrt_json_fail(parser, "expected a member name");
          break;
        }
        size_t key_length = 0;
        keys[count] = hrt_json_string(parser, &key_length);
        if (!keys[count]) break;
        hrt_json_skip_space(parser);
        if (parser->cursor >= parser->end || *parser->cursor != ':') {
          hrt_json_fail(parser, "expected ':'");
          break;
        }
        ++parser->cursor;
      }
      hrt_json_value(parser, &items[count], depth + 1);
      if (parser->error != HRT_OK) break;
      ++count;
      hrt_json_skip_space(parser);
      if (parser->cursor < parser->end && *parser->cursor == ',') {
        ++parser->cursor;
        continue;
      }
      if (parser->cursor < parser->end && *parser->cursor == close) {
        ++parser->cursor;
        break;
      }
      hrt_json_fail(parser,
                    is_object ? "expected ',' or '}'" : "expected ',' or ']'");
      break;
    }
  }
  if (parser->error == HRT_OK && is_object) {
    hrt_json_check_unique(parser, keys, count);
  }
  if (parser->error == HRT_OK) {
    out->type = is_object ? HRT_JSON_OBJECT : HRT_JSON_ARRAY;
    out->length = count;
    if (count) {
      out->items = hrt_json_alloc(parser, count * sizeof(*items));
      out->keys =
          is_object ? hrt_json_alloc(parser, count * sizeof(*keys)) : NULL;
      if (!out->items || (is_object && !out->keys)) {
        hrt_json_fail_oom(parser);
      } else {
        memcpy(out->items, items, count * sizeof(*items));
        if (is_object) memcpy(out->keys, keys, count * sizeof(*keys));
      }
    }
  }
  free(items);
  free(keys);
}

static void hrt_json_value(hrt_json_parser_t* parser, hrt_json_t* out,
                           int depth) {
  memset(out, 0, sizeof(*out));
  if (depth > HRT_JSON_MAX_DEPTH) {
    hrt_json_fail(parser, "nested too deeply");
    return;
  }
  hrt_json_skip_space(parser);
  if (parser->cursor >= parser->end) {
    hrt_json_fail(parser, "unexpected end of input");
    return;
  }
  switch (*parser->cursor) {
    case '{':
      hrt_json_container(parser, out, depth, true);
      return;
    case '[':
      hrt_json_container(parser, out, depth, false);
      return;
    case '"':
      out->type = HRT_JSON_STRING;
      out->string = hrt_json_string(parser, &out->length);
      return;
    case 't':
    case 'f':
      out->type = HRT_JSON_BOOL;
      out->boolean = *parser->cursor == 't';
      if (!hrt_json_literal(parser, out->boolean ? "true" : "false")) {
        hrt_json_fail(parser, "invalid literal");
      }
      return;
    case 'n':
      if (!hrt_json_literal(parser, "null")) {
        hrt_json_fail(parser, "invalid literal");
      }
      return;
    default:
      hrt_json_number(parser, out);
      return;
  }
}

hrt_status_t hrt_json_parse(const char* text, size_t length,
                            hrt_json_document_t** out_document) {
  hrt_json_document_t* document = calloc(1, sizeof(*document));
  if (!document) {
    return hrt_status_make(HRT_STATUS_RESOURCE_EXHAUSTED,
                           "out of host memory parsing JSON");
  }
  hrt_json_parser_t parser = {document, text, text, text + length, HRT_OK};
  hrt_json_value(&parser, &document->root, 0);
  if (parser.error == HRT_OK) {
    hrt_json_skip_space(&parser);
    if (parser.cursor != parser.end) {
      hrt_json_fail(&parser, "unexpected text after the value");
    }
  }
  if (parser.error != HRT_OK) {
    hrt_json_document_free(document);
    return parser.error;
  }
  *out_document = document;
  return HRT_OK;
}

const hrt_json_t* hrt_json_root(const hrt_json_document_t* document) {
  return &document->root;
}

void hrt_json_document_free(hrt_json_document_t* document) {
  if (!document) return;
  hrt_arena_deinit(&document->arena);
  free(document);
}

const hrt_json_t* hrt_json_get(const hrt_json_t* object, const char* key) {
  if (!object || object->type != HRT_JSON_OBJECT) return NULL;
  for (size_t i = 0; i < object->length; ++i) {
    if (strcmp(object->keys[i], key) == 0) return &object->items[i];
  }
  return NULL;
}

const char* hrt_json_type_name(hrt_json_type_t type) {
  static const char* const names[] = {"null",   "boolean", "number",
                                      "string", "array",   "object"};
  return (unsigned)type <= HRT_JSON_OBJECT ? names[type] : "unknown";
}
