// Module constants (program modules' "constants"): given at creation,
// uploaded once per context, read by every call, by calls inlined from
// another module and by traces; never written by an op.
#include <string.h>

#include "base/threads.h"
#include "modules/hal_module.h"
#include "modules/program/program_module.h"
#include "test.h"
#include "test_submit.h"
#include "vm/context.h"

// lib.scale(a) -> b = a * c, with lib's constant c.
static const char kLib[] =
    "{\"format\": \"halrt.module/1\", \"name\": \"lib\","
    " \"executables\": {\"k\": {\"local\": {\"builtin\": true}}},"
    " \"constants\": {\"c\": {\"dtype\": \"f32\", \"shape\": [4]}},"
    " \"functions\": {\"scale\": {"
    "   \"inputs\": [{\"name\": \"a\", \"dtype\": \"f32\", \"shape\": [4]}],"
    "   \"outputs\": [{\"name\": \"b\", \"dtype\": \"f32\", \"shape\": [4]}],"
    "   \"body\": [{\"op\": \"dispatch\", \"kernel\": \"k.mul_f32\","
    "     \"workgroups\": [1], \"bindings\": [\"a\", \"c\", \"b\"],"
    "     \"constants\": [4]}]}}}";

// app.main(x) -> (y = lib.scale(x) + d, w = copy of d), with app's
// constants d and an empty e; traces d.
static const char kApp[] =
    "{\"format\": \"halrt.module/1\", \"name\": \"app\","
    " \"executables\": {\"k\": {\"local\": {\"builtin\": true}}},"
    " \"constants\": {\"d\": {\"dtype\": \"f32\", \"shape\": [4]},"
    "                 \"e\": {\"dtype\": \"i32\", \"shape\": [0, 3]}},"
    " \"functions\": {\"main\": {"
    "   \"inputs\": [{\"name\": \"x\", \"dtype\": \"f32\", \"shape\": [4]}],"
    "   \"outputs\": [{\"name\": \"y\", \"dtype\": \"f32\", \"shape\": [4]},"
    "                 {\"name\": \"w\", \"dtype\": \"f32\", \"shape\": [4]}],"
    "   \"locals\": [{\"name\": \"h\", \"dtype\": \"f32\", \"shape\": [4]}],"
    "   \"body\": ["
    "    {\"op\": \"call\", \"callee\": \"lib.scale\", \"args\": [\"x\"],"
    "     \"results\": [\"h\"]},"
    "    {\"op\": \"dispatch\", \"kernel\": \"k.add_f32\", \"workgroups\": [1],"
    "     \"bindings\": [\"h\", \"d\", \"y\"], \"constants\": [4]},"
    "    {\"op\": \"copy\", \"source\": \"d\", \"target\": \"w\"},"
    "    {\"op\": \"trace\", \"key\": \"weights\", \"values\": [\"d\", \"e\"]}]}}}";

// The sink: the first float of trace "weights"' first tensor, per trace.
typedef struct {
  hrt_mutex_t mutex;
  int count;
  float first[8];
  uint64_t bytes[8];
} sink_state_t;

static hrt_status_t on_trace(void* user_data, const char* key,
                             const hrt_trace_info_t* info, uint32_t count,
                             const hrt_trace_tensor_t* tensors) {
  (void)info;
  sink_state_t* state = user_data;
  if (strcmp(key, "weights") != 0 || count != 2) {
    return hrt_status_make(HRT_STATUS_INTERNAL, "unexpected trace '%s'", key);
  }
  hrt_mutex_lock(&state->mutex);
  if (state->count < 8) {
    memcpy(&state->first[state->count], tensors[0].data, 4);
    state->bytes[state->count] = tensors[1].byte_length;
    state->count++;
  }
  hrt_mutex_unlock(&state->mutex);
  return HRT_OK;
}

static void on_release(void* user_data) { (void)user_data; }

typedef struct {
  hrt_notification_t done;
  hrt_status_t status;
  hrt_hal_buffer_view_t* outputs[2];
} result_t;

static void on_done(void* user_data, hrt_status_t status,
                    hrt_hal_buffer_view_t* const* outputs, uint32_t count) {
  result_t* result = user_data;
  result->status = status;
  for (uint32_t i = 0; i < count && i < 2; ++i) result->outputs[i] = outputs[i];
  hrt_notification_set(&result->done);
}

static void release_context(void* context) { hrt_vm_context_release(context); }
static void release_module(void* module) { hrt_vm_module_release(module); }
static void release_instance(void* instance) {
  hrt_vm_instance_release(instance);
}

static const float kC[4] = {2, 3, 4, 5};
static const float kD[4] = {0.5f, -1, 10, 100};

// Makes lib and app (with their constants' data) on `device`'s HAL module
// and links a context.
static void link_context(hrt_vm_instance_t* instance, hrt_hal_device_t* device,
                 sink_state_t* sink_state, hrt_vm_context_t** out) {
  hrt_vm_module_t *hal = NULL, *lib = NULL, *app = NULL;
  hrt_debug_sink_t sink = {.buffer_view_trace = {on_trace, sink_state},
                           .release = {on_release, NULL}};
  CHECK_OK(hrt_hal_module_create(device, &sink, NULL, &hal));
  TEST_DEFER(release_module, hal);
  const hrt_program_constant_data_t lib_data[1] = {{kC, sizeof(kC)}};
  CHECK_OK(hrt_program_module_create_with_constants(
      kLib, strlen(kLib), NULL, lib_data, 1, &lib));
  TEST_DEFER(release_module, lib);
  // The caller's copy is not the module's: overwrite it after creation.
  float d[4];
  memcpy(d, kD, sizeof(d));
  const hrt_program_constant_data_t app_data[2] = {{d, sizeof(d)},
                                                   {NULL, 0}};
  CHECK_OK(hrt_program_module_create_with_constants(
      kApp, strlen(kApp), NULL, app_data, 2, &app));
  TEST_DEFER(release_module, app);
  memset(d, 0, sizeof(d));
  hrt_vm_module_t* modules[3] = {hal, lib, app};
  CHECK_OK(hrt_vm_context_create(instance, modules, 3, out));
  TEST_DEFER(release_context, *out);
}

// Runs app.main on x once and checks y and w.
static void run_once(hrt_vm_context_t* context, hrt_hal_device_t* device,
                     const float* x) {
  hrt_vm_function_t main_fn;
  CHECK_OK(hrt_vm_context_lookup_function(context, "app.main", &main_fn));
  hrt_hal_buffer_t* buffer = NULL;
  CHECK_OK(case_buffer(device, 16, x, &buffer));
  hrt_hal_buffer_view_t* input = NULL;
  const int64_t shape[1] = {4};
  CHECK_OK(hrt_hal_buffer_view_create(buffer, 0, HRT_HAL_ELEMENT_TYPE_F32, 1,
                                      shape, &input));
  result_t result = {0};
  hrt_notification_init(&result.done);
  hrt_status_t started =
      hrt_vm_invoke_async(context, &main_fn, &input, 1, NULL,
                          (hrt_vm_invocation_done_t){on_done, &result}, NULL);
  hrt_hal_buffer_view_release(input);
  if (started != HRT_OK) hrt_notification_set(&result.done);
  CHECK_OK(started);
  WAIT_OR_EXIT(&result.done, "the invocation's completion");
  hrt_notification_deinit(&result.done);
  CHECK_OK(result.status);
  float y[4] = {0}, w[4] = {0};
  hrt_status_t read =
      read_back(device, hrt_hal_buffer_view_buffer(result.outputs[0]), y);
  if (read == HRT_OK) {
    read = read_back(device, hrt_hal_buffer_view_buffer(result.outputs[1]), w);
  }
  hrt_hal_buffer_view_release(result.outputs[0]);
  hrt_hal_buffer_view_release(result.outputs[1]);
  CHECK_OK(read);
  for (int i = 0; i < 4; ++i) {
    CHECK(y[i] == x[i] * kC[i] + kD[i]);
    CHECK(w[i] == kD[i]);
  }
}

static void constants_are_read_by_every_call_and_by_inlined_callees(void) {
  static const char* const uris[] = {"local-sync", "local-task?workers=2"};
  for (int u = 0; u < 2; ++u) {
    hrt_vm_instance_t* instance = NULL;
    CHECK_OK(hrt_vm_instance_create(&instance));
    TEST_DEFER(release_instance, instance);
    hrt_hal_device_t* device = NULL;
    CHECK_OK(hrt_vm_instance_create_device(instance, uris[u], &device));
    TEST_DEFER(release_device_, device);
    sink_state_t sink_state = {0};
    hrt_mutex_init(&sink_state.mutex);
    // Two contexts over the same modules' data: each has its own upload.
    hrt_vm_context_t *first = NULL, *second = NULL;
    link_context(instance, device, &sink_state, &first);
    link_context(instance, device, &sink_state, &second);
    const float xs[3][4] = {{1, 2, 3, 4}, {-1, 0, 0.25f, 8}, {0, 0, 0, 0}};
    for (int r = 0; r < 3 && !hrt_test_failed_; ++r) {
      run_once(r % 2 ? second : first, device, xs[r]);
    }
    test_run_deferred();
    CHECK_EQ_INT(sink_state.count, 3);
    for (int i = 0; i < sink_state.count; ++i) {
      CHECK(sink_state.first[i] == kD[0]);
      CHECK(sink_state.bytes[i] == 0);
    }
    hrt_mutex_deinit(&sink_state.mutex);
    if (hrt_test_failed_) return;
  }
}

// A module with one constant "c" (f32[2]) and function f(a: f32[2]) ->
// (b: f32[2]) whose body is `body`.
static hrt_status_t make_with_body(const char* body,
                                   hrt_vm_module_t** out) {
  char json[2048];
  snprintf(json, sizeof(json),
           "{\"format\": \"halrt.module/1\", \"name\": \"m\","
           " \"executables\": {\"k\": {\"local\": {\"builtin\": true}}},"
           " \"constants\": {\"c\": {\"dtype\": \"f32\", \"shape\": [2]}},"
           " \"functions\": {\"f\": {"
           "  \"inputs\": [{\"name\": \"a\", \"dtype\": \"f32\", \"shape\": [2]}],"
           "  \"outputs\": [{\"name\": \"b\", \"dtype\": \"f32\", \"shape\": [2]}],"
           "  \"body\": [%s]}}}",
           body);
  const float c[2] = {1, 2};
  const hrt_program_constant_data_t data[1] = {{c, sizeof(c)}};
  return hrt_program_module_create_with_constants(json, strlen(json), NULL,
                                                  data, 1, out);
}

static void constants_are_read_only_and_checked(void) {
  hrt_vm_module_t* module = NULL;
  CHECK_OK(make_with_body(
      "{\"op\": \"dispatch\", \"kernel\": \"k.add_f32\", \"workgroups\": [1],"
      " \"bindings\": [\"a\", \"c\", \"b\"], \"constants\": [2]}",
      &module));
  hrt_vm_module_release(module);
  static const struct {
    const char* body;
    const char* message;
  } writes[] = {
      {"{\"op\": \"fill\", \"target\": \"c\", \"value\": 0}",
       "functions.f.body[0].target: 'c' is a module constant, which is "
       "read-only: it cannot be the target of a fill"},
      {"{\"op\": \"copy\", \"source\": \"a\", \"target\": \"c\"}",
       "functions.f.body[0].target: 'c' is a module constant, which is "
       "read-only: it cannot be the target of a copy"},
      {"{\"op\": \"dispatch\", \"kernel\": \"k.add_f32\", \"workgroups\": [1],"
       " \"bindings\": [\"a\", \"a\", \"c\"], \"constants\": [2]}",
       "functions.f.body[0].bindings[2]: 'c' is a module constant, which is "
       "read-only: it cannot be written by kernel 'add_f32'"},
      {"{\"op\": \"call\", \"callee\": \"lib.g\", \"args\": [\"c\"],"
       " \"results\": [\"b\"]}",
       "functions.f.body[0].args[0]: 'c' is a module constant, which is "
       "read-only: it cannot be an argument of a call (copy it into a local "
       "first)"},
      {"{\"op\": \"call\", \"callee\": \"lib.g\", \"args\": [\"a\"],"
       " \"results\": [\"c\"]}",
       "functions.f.body[0].results[0]: 'c' is a module constant, which is "
       "read-only: it cannot be a result of a call"},
  };
  for (size_t i = 0; i < sizeof(writes) / sizeof(writes[0]); ++i) {
    CHECK_STATUS(make_with_body(writes[i].body, &module),
                 HRT_STATUS_INVALID_ARGUMENT, writes[i].message);
  }
  // Declarations.
  static const struct {
    const char* constants;
    hrt_status_code_t code;
    const char* message;
  } declarations[] = {
      {"[]", HRT_STATUS_INVALID_ARGUMENT, "constants: must be an object"},
      {"{\"c\\u0001\": {\"dtype\": \"f32\", \"shape\": [1]}}",
       HRT_STATUS_INVALID_ARGUMENT, "constants.c\x01: 'c\x01' is not a value name"},
      {"{\"c\": {\"dtype\": \"f33\", \"shape\": [1]}}",
       HRT_STATUS_INVALID_ARGUMENT, "constants.c.dtype"},
      {"{\"c\": {\"dtype\": \"f32\", \"shape\": [-1]}}",
       HRT_STATUS_INVALID_ARGUMENT, "constants.c.shape[0]"},
      {"{\"c\": {\"dtype\": \"f32\", \"shape\": [1], \"bytes\": [1]}}",
       HRT_STATUS_INVALID_ARGUMENT, "constants.c: unknown field 'bytes'"},
      {"{\"a\": {\"dtype\": \"f32\", \"shape\": [1]}}",
       HRT_STATUS_INVALID_ARGUMENT,
       "functions.f.inputs[0]: value 'a' has the name of a module constant"},
  };
  for (size_t i = 0; i < sizeof(declarations) / sizeof(declarations[0]);
       ++i) {
    char json[1024];
    snprintf(json, sizeof(json),
             "{\"format\": \"halrt.module/1\", \"name\": \"m\","
             " \"constants\": %s, \"functions\": {\"f\": {"
             "  \"inputs\": [{\"name\": \"a\", \"dtype\": \"f32\", \"shape\": [1]}],"
             "  \"outputs\": [], \"body\": []}}}",
             declarations[i].constants);
    const float one = 1;
    const hrt_program_constant_data_t data[1] = {{&one, 4}};
    CHECK_STATUS(hrt_program_module_create_with_constants(
                     json, strlen(json), NULL, data, 1, &module),
                 declarations[i].code, declarations[i].message);
  }
  // Data: one entry per constant, each exactly its size.
  const char* json =
      "{\"format\": \"halrt.module/1\", \"name\": \"m\","
      " \"constants\": {\"c\": {\"dtype\": \"f32\", \"shape\": [2, 3]}},"
      " \"functions\": {}}";
  CHECK_STATUS(hrt_program_module_create(json, strlen(json), NULL, &module),
               HRT_STATUS_INVALID_ARGUMENT,
               "constants: the description declares 1 constant but data was "
               "given for 0");
  const float six[6] = {0};
  const hrt_program_constant_data_t short_data[1] = {{six, 20}};
  CHECK_STATUS(hrt_program_module_create_with_constants(
                   json, strlen(json), NULL, short_data, 1, &module),
               HRT_STATUS_INVALID_ARGUMENT,
               "constants.c: its data has 20 bytes, but a f32[2,3] constant "
               "has 24");
  const hrt_program_constant_data_t two[2] = {{six, 24}, {six, 24}};
  CHECK_STATUS(hrt_program_module_create_with_constants(
                   json, strlen(json), NULL, two, 2, &module),
               HRT_STATUS_INVALID_ARGUMENT, "data was given for 2");
  CHECK_OK(hrt_program_module_create_with_constants(json, strlen(json), NULL,
                                                    two, 1, &module));
  hrt_vm_module_release(module);
}

TEST_MAIN(TEST_CASE(constants_are_read_by_every_call_and_by_inlined_callees),
          TEST_CASE(constants_are_read_only_and_checked))
