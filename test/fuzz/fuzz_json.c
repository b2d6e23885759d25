// Fuzz target: the JSON reader (src/base/json.h).
//
// Any input must either fail cleanly (INVALID_ARGUMENT naming a line and
// column) or yield a tree that keeps the reader's promises: strings are C
// strings of their stated length, integers agree with their doubles, object
// members are unique and found by hrt_json_get. The tree is then written
// back as JSON and read again; both trees must be the same (values,
// member order, number bits), which checks escapes, numbers and nesting
// against the reader itself.
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "base/json.h"
#include "fuzz.h"

// Members checked one by one against hrt_json_get (quadratic, so bounded).
#define FUZZ_JSON_GET_CHECKS 64

typedef struct {
  char* data;
  size_t size;
  size_t capacity;
} text_t;

static void text_reserve(text_t* text, size_t more) {
  if (text->size + more <= text->capacity) return;
  size_t capacity = text->capacity ? text->capacity : 256;
  while (capacity < text->size + more) capacity *= 2;
  text->data = realloc(text->data, capacity);
  FUZZ_CHECK(text->data != NULL);
  text->capacity = capacity;
}

static void text_append(text_t* text, const char* bytes, size_t length) {
  text_reserve(text, length);
  memcpy(text->data + text->size, bytes, length);
  text->size += length;
}

static void text_append_string(text_t* text, const char* bytes, size_t length) {
  text_append(text, "\"", 1);
  for (size_t i = 0; i < length; ++i) {
    unsigned char c = (unsigned char)bytes[i];
    char escaped[8];
    if (c == '"' || c == '\\') {
      escaped[0] = '\\';
      escaped[1] = (char)c;
      text_append(text, escaped, 2);
    } else if (c < 0x20) {
      snprintf(escaped, sizeof(escaped), "\\u%04x", c);
      text_append(text, escaped, 6);
    } else {
      text_append(text, (const char*)&c, 1);
    }
  }
  text_append(text, "\"", 1);
}

// Whether the number is written so that the reader keeps it as an int64;
// only then does the round trip preserve is_integer (a large integer is
// written with an exponent, a fraction with a '.' or an exponent).
static bool exact_integer(const hrt_json_t* value) {
  return value->is_integer && value->fits_int64;
}

static void text_append_number(text_t* text, const hrt_json_t* value) {
  char buffer[48];
  if (exact_integer(value)) {
    bool negative_zero = value->integer == 0 && signbit(value->number);
    snprintf(buffer, sizeof(buffer), "%s%lld", negative_zero ? "-" : "",
             (long long)value->integer);
  } else if (isinf(value->number)) {
    snprintf(buffer, sizeof(buffer), "%s1e999", value->number < 0 ? "-" : "");
  } else {
    snprintf(buffer, sizeof(buffer), "%.17g", value->number);
    if (!strpbrk(buffer, ".e")) strcat(buffer, ".0");
  }
  text_append(text, buffer, strlen(buffer));
}

static void write_value(text_t* text, const hrt_json_t* value) {
  switch (value->type) {
    case HRT_JSON_NULL:
      text_append(text, "null", 4);
      return;
    case HRT_JSON_BOOL:
      if (value->boolean) {
        text_append(text, "true", 4);
      } else {
        text_append(text, "false", 5);
      }
      return;
    case HRT_JSON_NUMBER:
      text_append_number(text, value);
      return;
    case HRT_JSON_STRING:
      text_append_string(text, value->string, value->length);
      return;
    case HRT_JSON_ARRAY:
    case HRT_JSON_OBJECT: {
      bool object = value->type == HRT_JSON_OBJECT;
      text_append(text, object ? "{" : "[", 1);
      for (size_t i = 0; i < value->length; ++i) {
        if (i) text_append(text, ",", 1);
        if (object) {
          text_append_string(text, value->keys[i], strlen(value->keys[i]));
          text_append(text, ":", 1);
        }
        write_value(text, &value->items[i]);
      }
      text_append(text, object ? "}" : "]", 1);
      return;
    }
  }
  FUZZ_CHECK(!"unknown JSON type");
}

// The reader's promises about one node and everything below it.
static void check_value(const hrt_json_t* value, int depth) {
  FUZZ_CHECK(depth <= HRT_JSON_MAX_DEPTH);
  FUZZ_CHECK(strcmp(hrt_json_type_name(value->type), "unknown") != 0);
  switch (value->type) {
    case HRT_JSON_NUMBER:
      FUZZ_CHECK(!isnan(value->number));
      FUZZ_CHECK(!value->fits_int64 || value->is_integer);
      // Both conversions round the same decimal to nearest.
      FUZZ_CHECK(!exact_integer(value) ||
                 (double)value->integer == value->number);
      return;
    case HRT_JSON_STRING:
      FUZZ_CHECK(value->string != NULL);
      FUZZ_CHECK(strlen(value->string) == value->length);
      return;
    case HRT_JSON_ARRAY:
    case HRT_JSON_OBJECT:
      FUZZ_CHECK(value->length == 0 || value->items != NULL);
      for (size_t i = 0; i < value->length; ++i) {
        check_value(&value->items[i], depth + 1);
      }
      if (value->type == HRT_JSON_ARRAY) {
        FUZZ_CHECK(hrt_json_get(value, "") == NULL);
        return;
      }
      for (size_t i = 0; i < value->length && i < FUZZ_JSON_GET_CHECKS; ++i) {
        FUZZ_CHECK(hrt_json_get(value, value->keys[i]) == &value->items[i]);
      }
      return;
    default:
      return;
  }
}

static bool same_value(const hrt_json_t* a, const hrt_json_t* b) {
  if (a->type != b->type) return false;
  switch (a->type) {
    case HRT_JSON_NULL:
      return true;
    case HRT_JSON_BOOL:
      return a->boolean == b->boolean;
    case HRT_JSON_NUMBER:
      if (exact_integer(a) && (!exact_integer(b) || a->integer != b->integer)) {
        return false;
      }
      return memcmp(&a->number, &b->number, sizeof(a->number)) == 0;
    case HRT_JSON_STRING:
      return a->length == b->length &&
             memcmp(a->string, b->string, a->length) == 0;
    case HRT_JSON_ARRAY:
    case HRT_JSON_OBJECT:
      if (a->length != b->length) return false;
      for (size_t i = 0; i < a->length; ++i) {
        if (a->type == HRT_JSON_OBJECT && strcmp(a->keys[i], b->keys[i]) != 0) {
          return false;
        }
        if (!same_value(&a->items[i], &b->items[i])) return false;
      }
      return true;
  }
  return false;
}

static void check_error(hrt_status_t status) {
  hrt_status_code_t code = hrt_status_code(status);
  const char* message = hrt_status_message(status);
  FUZZ_CHECK(code == HRT_STATUS_INVALID_ARGUMENT ||
             code == HRT_STATUS_RESOURCE_EXHAUSTED);
  FUZZ_CHECK(code != HRT_STATUS_INVALID_ARGUMENT ||
             strncmp(message, "invalid JSON at line ", 21) == 0);
  hrt_status_free(status);
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  hrt_json_document_t* document = NULL;
  hrt_status_t status = hrt_json_parse((const char*)data, size, &document);
  if (status != HRT_OK) {
    check_error(status);
    return 0;
  }
  const hrt_json_t* root = hrt_json_root(document);
  check_value(root, 0);
  text_t text = {0};
  write_value(&text, root);
  hrt_json_document_t* again = NULL;
  FUZZ_CHECK_OK(hrt_json_parse(text.data, text.size, &again));
  FUZZ_CHECK(same_value(root, hrt_json_root(again)));
  hrt_json_document_free(again);
  hrt_json_document_free(document);
  free(text.data);
  return 0;
}
