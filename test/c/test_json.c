// src/base/json: values, escapes, numbers, and errors with positions.
#include "base/json.h"
#include "test.h"

static hrt_status_t parse(const char* text, hrt_json_document_t** out) {
  return hrt_json_parse(text, strlen(text), out);
}

static void parses_nested_values_in_order(void) {
  hrt_json_document_t* document = NULL;
  CHECK_OK(parse(" {\"a\": [1, -2.5e1, true, null], \"b\": {\"c\": \"x\"}, "
                 "\"d\": []} ",
                 &document));
  const hrt_json_t* root = hrt_json_root(document);
  int ok = root->type == HRT_JSON_OBJECT && root->length == 3 &&
           strcmp(root->keys[0], "a") == 0 && strcmp(root->keys[2], "d") == 0;
  const hrt_json_t* a = hrt_json_get(root, "a");
  ok = ok && a && a->type == HRT_JSON_ARRAY && a->length == 4 &&
       a->items[0].is_integer && a->items[0].integer == 1 &&
       a->items[1].number == -25.0 && !a->items[1].is_integer &&
       a->items[2].type == HRT_JSON_BOOL && a->items[2].boolean &&
       a->items[3].type == HRT_JSON_NULL;
  const hrt_json_t* c = hrt_json_get(hrt_json_get(root, "b"), "c");
  ok = ok && c && strcmp(c->string, "x") == 0;
  ok = ok && hrt_json_get(root, "d")->length == 0 && !hrt_json_get(root, "z");
  hrt_json_document_free(document);
  CHECK(ok);
}

static void decodes_escapes_and_unicode(void) {
  hrt_json_document_t* document = NULL;
  CHECK_OK(parse("\"a\\n\\t\\\"\\\\\\/\\u00e9\\ud83d\\ude00\"", &document));
  const hrt_json_t* root = hrt_json_root(document);
  int ok = root->type == HRT_JSON_STRING &&
           strcmp(root->string, "a\n\t\"\\/\xc3\xa9\xf0\x9f\x98\x80") == 0 &&
           root->length == 12;
  hrt_json_document_free(document);
  CHECK(ok);
}

static void numbers_keep_exact_integers(void) {
  hrt_json_document_t* document = NULL;
  CHECK_OK(parse("[9007199254740993, 0.5, 1e400, -0, 2.0, 18446744073709551616]",
                 &document));
  const hrt_json_t* root = hrt_json_root(document);
  int ok = root->items[0].is_integer && root->items[0].fits_int64 &&
           root->items[0].integer == 9007199254740993LL &&
           !root->items[1].is_integer && !root->items[2].is_integer &&
           root->items[3].is_integer && root->items[3].integer == 0 &&
           !root->items[4].is_integer && root->items[4].number == 2.0 &&
           root->items[5].is_integer && !root->items[5].fits_int64;
  hrt_json_document_free(document);
  CHECK(ok);
}

static void errors_name_line_and_column(void) {
  hrt_json_document_t* document = NULL;
  CHECK_STATUS(parse("{\n  \"a\": tru\n}", &document),
               HRT_STATUS_INVALID_ARGUMENT, "line 2 column 8");
  CHECK_STATUS(parse("[1, 2", &document), HRT_STATUS_INVALID_ARGUMENT,
               "expected ',' or ']'");
  CHECK_STATUS(parse("{\"a\" 1}", &document), HRT_STATUS_INVALID_ARGUMENT,
               "expected ':'");
  CHECK_STATUS(parse("\"abc", &document), HRT_STATUS_INVALID_ARGUMENT,
               "unterminated string");
  CHECK_STATUS(parse("\"\\u0000\"", &document), HRT_STATUS_INVALID_ARGUMENT,
               "NUL");
  CHECK_STATUS(parse("01", &document), HRT_STATUS_INVALID_ARGUMENT,
               "after the value");
  CHECK_STATUS(parse("[1,]", &document), HRT_STATUS_INVALID_ARGUMENT,
               "invalid number");
  CHECK_STATUS(parse("", &document), HRT_STATUS_INVALID_ARGUMENT,
               "unexpected end");
  CHECK_STATUS(parse("\"a\x01\"", &document), HRT_STATUS_INVALID_ARGUMENT,
               "control character");
  CHECK_STATUS(parse("{\"a\": 1, \"b\": 2, \"a\": 3}", &document),
               HRT_STATUS_INVALID_ARGUMENT, "member 'a' appears twice");
  CHECK_STATUS(parse("\"abc\\", &document), HRT_STATUS_INVALID_ARGUMENT,
               "unterminated string");
  char deep[200];
  memset(deep, '[', sizeof(deep) - 1);
  deep[sizeof(deep) - 1] = 0;
  CHECK_STATUS(parse(deep, &document), HRT_STATUS_INVALID_ARGUMENT,
               "nested too deeply");
  CHECK(document == NULL);
}

static void large_documents_span_arena_chunks(void) {
  enum { N = 20000 };
  char* text = malloc(N * 12 + 16);
  CHECK(text);
  size_t used = 0;
  text[used++] = '[';
  for (int i = 0; i < N; ++i) {
    used += (size_t)sprintf(text + used, "%s\"s%d\"", i ? "," : "", i);
  }
  text[used++] = ']';
  hrt_json_document_t* document = NULL;
  hrt_status_t status = hrt_json_parse(text, used, &document);
  free(text);
  CHECK_OK(status);
  const hrt_json_t* root = hrt_json_root(document);
  int ok = root->length == N && strcmp(root->items[N - 1].string, "s19999") == 0;
  hrt_json_document_free(document);
  CHECK(ok);
}

TEST_MAIN(TEST_CASE(parses_nested_values_in_order),
          TEST_CASE(decodes_escapes_and_unicode),
          TEST_CASE(numbers_keep_exact_integers),
          TEST_CASE(errors_name_line_and_column),
          TEST_CASE(large_documents_span_arena_chunks))
