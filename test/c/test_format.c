// The text of elements and tensors (hal/element_format.h) and the rounding
// of doubles to f16 and bf16 (base/half.h), checked against the table that
// test/format.test.js checks lib/format.js and lib/half.js against.
#include <stdlib.h>

#include "base/file.h"
#include "base/half.h"
#include "base/json.h"
#include "hal/element_format.h"
#include "test.h"

// test/fixtures/number-format.json, parsed; NULL (and a failed check) when
// it cannot be read. HRT_TEST_ROOT is the repository (make run sets it).
static hrt_json_document_t* load_fixture(void) {
  const char* root = getenv("HRT_TEST_ROOT");
  char path[1024];
  snprintf(path, sizeof(path), "%s/test/fixtures/number-format.json",
           root ? root : "../..");
  char* text = NULL;
  size_t length = 0;
  hrt_status_t status =
      hrt_file_read(path, 1 << 20, "the fixture", &text, &length);
  hrt_json_document_t* document = NULL;
  if (status == HRT_OK) status = hrt_json_parse(text, length, &document);
  free(text);
  if (status != HRT_OK) {
    fprintf(stderr, "%s: %s\n", path, hrt_status_message(status));
    hrt_status_free(status);
    hrt_test_failed_ = 1;
  }
  return document;
}

static uint64_t hex_field(const hrt_json_t* row, const char* key) {
  return strtoull(hrt_json_get(row, key)->string, NULL, 16);
}

static void elements_print_as_the_shared_table_says(void) {
  hrt_json_document_t* document = load_fixture();
  if (!document) return;
  const hrt_json_t* rows = hrt_json_get(hrt_json_root(document), "elements");
  int mismatches = 0;
  for (size_t i = 0; i < rows->length; ++i) {
    const hrt_json_t* row = &rows->items[i];
    hrt_hal_element_type_t type;
    hrt_status_t status =
        hrt_hal_element_type_parse(hrt_json_get(row, "dtype")->string, &type);
    if (status != HRT_OK) {
      hrt_status_free(status);
      ++mismatches;
      continue;
    }
    // The bit pattern as the element's little-endian bytes.
    uint64_t bits = hex_field(row, "bits");
    uint8_t bytes[8];
    for (int b = 0; b < 8; ++b) bytes[b] = (uint8_t)(bits >> (8 * b));
    char text[HRT_HAL_ELEMENT_TEXT_CAPACITY];
    hrt_hal_element_format(type, bytes, 0, text);
    const char* expected = hrt_json_get(row, "text")->string;
    if (strcmp(text, expected) != 0) {
      fprintf(stderr, "%s %s: got '%s', expected '%s'\n",
              hrt_hal_element_type_name(type),
              hrt_json_get(row, "bits")->string, text, expected);
      ++mismatches;
    }
  }
  CHECK(rows->length > 90);
  hrt_json_document_free(document);
  CHECK_EQ_INT(mismatches, 0);
}

static void doubles_round_to_half_floats_as_the_shared_table_says(void) {
  hrt_json_document_t* document = load_fixture();
  if (!document) return;
  const hrt_json_t* rows =
      hrt_json_get(hrt_json_root(document), "halfFromDouble");
  int mismatches = 0;
  for (size_t i = 0; i < rows->length; ++i) {
    const hrt_json_t* row = &rows->items[i];
    uint64_t bits = hex_field(row, "double");
    double value;
    memcpy(&value, &bits, sizeof(value));
    uint16_t f16 = hrt_f64_to_f16(value);
    uint16_t bf16 = hrt_f64_to_bf16(value);
    if (f16 != hex_field(row, "f16") || bf16 != hex_field(row, "bf16")) {
      fprintf(stderr, "%s: got f16 0x%04x, bf16 0x%04x\n",
              hrt_json_get(row, "double")->string, f16, bf16);
      ++mismatches;
    }
  }
  CHECK(rows->length > 20);
  hrt_json_document_free(document);
  CHECK_EQ_INT(mismatches, 0);
}

// The text hrt_hal_tensor_format writes for `data` of `type`.
static char* tensor_text(hrt_hal_element_type_t type, uint32_t rank,
                         const int64_t* shape, const void* data,
                         uint64_t max_elements) {
  char* text = NULL;
  size_t length = 0;
  FILE* stream = open_memstream(&text, &length);
  if (!stream) return NULL;
  hrt_hal_tensor_format(type, rank, shape, data, max_elements, stream);
  fclose(stream);
  return text;
}

#define CHECK_TENSOR_TEXT(type, shape, data, max_elements, expected)         \
  do {                                                                       \
    char* text_ = tensor_text(type, sizeof(shape) / sizeof(shape[0]), shape, \
                              data, max_elements);                           \
    int same_ = text_ && strcmp(text_, expected) == 0;                       \
    if (!same_) fprintf(stderr, "got '%s'\n", text_ ? text_ : "(null)");     \
    free(text_);                                                             \
    CHECK(same_);                                                            \
  } while (0)

static void tensors_nest_and_summarise_each_long_dimension(void) {
  float values[100];
  for (int i = 0; i < 100; ++i) values[i] = (float)(i + 1);
  const hrt_hal_element_type_t f32 = HRT_HAL_ELEMENT_TYPE_F32;
  int64_t matrix[2] = {2, 3};
  CHECK_TENSOR_TEXT(f32, matrix, values, 16, "[[1 2 3] [4 5 6]]");
  int64_t vector[1] = {100};
  CHECK_TENSOR_TEXT(f32, vector, values, 16, "[1 2 3 ... 98 99 100]");
  CHECK_TENSOR_TEXT(f32, vector, values, 100,
                    "[1 2 3 4 5 6 7 8 9 10 11 12 "
                    "13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 "
                    "32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 "
                    "51 52 53 54 55 56 57 58 59 60 61 62 63 64 65 66 67 68 69 "
                    "70 71 72 73 74 75 76 77 78 79 80 81 82 83 84 85 86 87 88 "
                    "89 90 91 92 93 94 95 96 97 98 99 100]");
  // Summarised, a dimension of 2 * 3 or fewer entries is still whole.
  int64_t seven[1] = {7};
  CHECK_TENSOR_TEXT(f32, seven, values, 6, "[1 2 3 ... 5 6 7]");
  int64_t six[1] = {6};
  CHECK_TENSOR_TEXT(f32, six, values, 2, "[1 2 3 4 5 6]");
  int64_t rows[2] = {10, 2};
  CHECK_TENSOR_TEXT(f32, rows, values, 16,
                    "[[1 2] [3 4] [5 6] ... [15 16] [17 18] [19 20]]");
  int64_t square[2] = {10, 10};
  CHECK_TENSOR_TEXT(f32, square, values, 16,
                    "[[1 2 3 ... 8 9 10] [11 12 13 ... 18 19 20] "
                    "[21 22 23 ... 28 29 30] ... [71 72 73 ... 78 79 80] "
                    "[81 82 83 ... 88 89 90] [91 92 93 ... 98 99 100]]");
  int64_t empty_rows[2] = {3, 0};
  CHECK_TENSOR_TEXT(f32, empty_rows, values, 16, "[[] [] []]");
  int64_t no_rows[2] = {0, 3};
  CHECK_TENSOR_TEXT(f32, no_rows, values, 16, "[]");
  char* scalar = tensor_text(f32, 0, NULL, values, 16);
  CHECK(scalar && strcmp(scalar, "1") == 0);
  free(scalar);
  int64_t pair[1] = {2};
  uint8_t flags[2] = {1, 0};
  CHECK_TENSOR_TEXT(HRT_HAL_ELEMENT_TYPE_BOOL, pair, flags, 16, "[true false]");
}

// An empty tensor writes `[]` for each index before its first 0 dimension:
// more of those than max_elements are summarised like elements, so a
// [2^31-1, 0] tensor is a short text, not billions of `[]`.
static void empty_tensors_summarise_their_innermost_brackets(void) {
  const hrt_hal_element_type_t f32 = HRT_HAL_ELEMENT_TYPE_F32;
  int64_t seven_empty[2] = {7, 0};
  CHECK_TENSOR_TEXT(f32, seven_empty, NULL, 7, "[[] [] [] [] [] [] []]");
  CHECK_TENSOR_TEXT(f32, seven_empty, NULL, 6, "[[] [] [] ... [] [] []]");
  // Without the rule, the cases below would not end.
  if (hrt_test_failed_) return;
  const char* nested =
      "[[[] [] [] ... [] [] []] [[] [] [] ... [] [] []] "
      "[[] [] [] ... [] [] []] ... [[] [] [] ... [] [] []] "
      "[[] [] [] ... [] [] []] [[] [] [] ... [] [] []]]";
  int64_t huge_empty[3] = {INT32_MAX, INT32_MAX, 0};
  CHECK_TENSOR_TEXT(f32, huge_empty, NULL, 16, nested);
  // 2^32 * 2^32 entries: summarised, not wrapped around to 0.
  int64_t wrapping[3] = {INT64_C(1) << 32, INT64_C(1) << 32, 0};
  CHECK_TENSOR_TEXT(f32, wrapping, NULL, UINT64_C(1) << 63, nested);
  int64_t zero_first[2] = {0, INT64_MAX};
  CHECK_TENSOR_TEXT(f32, zero_first, NULL, 2, "[]");
}

// A stream whose every write fails, counting the attempts.
static ssize_t failing_write(void* cookie, const char* buffer, size_t size) {
  (void)buffer;
  (void)size;
  ++*(uint64_t*)cookie;
  return -1;
}

// After the first failed write the text ends: a memory stream out of memory
// is not asked again for each of a million elements.
static void a_failed_write_ends_the_text(void) {
  enum { kCount = 1 << 20 };
  uint8_t* data = calloc(kCount, 1);
  uint64_t writes = 0;
  FILE* stream = fopencookie(&writes, "w",
                             (cookie_io_functions_t){
                                 .write = failing_write,
                             });
  CHECK(data && stream);
  if (!data || !stream) {
    free(data);
    if (stream) fclose(stream);
    return;
  }
  setvbuf(stream, NULL, _IONBF, 0);
  int64_t shape[1] = {kCount};
  hrt_hal_tensor_format(HRT_HAL_ELEMENT_TYPE_U8, 1, shape, data, kCount,
                        stream);
  CHECK(ferror(stream));
  fclose(stream);
  free(data);
  if (writes > 4) fprintf(stderr, "%llu writes\n", (unsigned long long)writes);
  CHECK(writes <= 4);
}

TEST_MAIN(TEST_CASE(elements_print_as_the_shared_table_says),
          TEST_CASE(doubles_round_to_half_floats_as_the_shared_table_says),
          TEST_CASE(tensors_nest_and_summarise_each_long_dimension),
          TEST_CASE(empty_tensors_summarise_their_innermost_brackets),
          TEST_CASE(a_failed_write_ends_the_text))
