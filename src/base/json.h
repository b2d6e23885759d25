// A small JSON reader (RFC 8259) producing an immutable tree.
//
// Used for module descriptions. Numbers are kept as doubles; a number
// written as an integer (no fraction, no exponent) is also kept exactly as an
// int64 when it fits. Numbers are read independently of the C locale.
// Strings are UTF-8 with escapes decoded (\u0000 is rejected so strings stay
// C strings). An object naming a member twice is an error. Nesting is limited
// to HRT_JSON_MAX_DEPTH. Errors are INVALID_ARGUMENT naming line and column.
// The tree is owned by the document and freed with it; any thread may read it.
#ifndef HRT_BASE_JSON_H_
#define HRT_BASE_JSON_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

#define HRT_JSON_MAX_DEPTH 64

typedef enum hrt_json_type_e {
  HRT_JSON_NULL = 0,
  HRT_JSON_BOOL,
  HRT_JSON_NUMBER,
  HRT_JSON_STRING,
  HRT_JSON_ARRAY,
  HRT_JSON_OBJECT,
} hrt_json_type_t;

typedef struct hrt_json_s hrt_json_t;
struct hrt_json_s {
  hrt_json_type_t type;
  bool boolean;
  bool is_integer;  // number written as an integer
  bool fits_int64;  // is_integer and `integer` holds it exactly
  int64_t integer;
  double number;
  const char* string;  // STRING: value; NUL-terminated
  size_t length;       // STRING: bytes; ARRAY/OBJECT: item count
  hrt_json_t* items;   // ARRAY/OBJECT: [length]
  const char** keys;   // OBJECT: [length] member names, in text order
};

typedef struct hrt_json_document_s hrt_json_document_t;

hrt_status_t hrt_json_parse(const char* text, size_t length,
                            hrt_json_document_t** out_document) HRT_MUST_USE;
const hrt_json_t* hrt_json_root(const hrt_json_document_t* document);
void hrt_json_document_free(hrt_json_document_t* document);

// The member `key` of an object, or NULL (also for non-objects).
const hrt_json_t* hrt_json_get(const hrt_json_t* object, const char* key);
const char* hrt_json_type_name(hrt_json_type_t type);

#endif  // HRT_BASE_JSON_H_
