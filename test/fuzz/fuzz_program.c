// Fuzz target: program modules (src/modules/program/program_module.h) created from
// the input as module JSON text, linked on the local-sync device and
// invoked.
//
// Creation must succeed or fail cleanly (a status naming the field). A
// created module is linked into a context after a HAL module whose options
// come from the input's length (bit 0: trace every dispatch, 1: profile,
// 2: reject non-finite values, 3: trace every second invocation), so that
// one text reaches each combination with a little whitespace. Each function
// is then invoked once on zero-filled inputs and must complete, with
// outputs that match its signature or with a clean error. The sink checks
// every trace it receives and refuses those whose key starts with "fail"
// (the invocation must then fail). A fixed program module "lib" (LIB_JSON,
// with a constant its scale2 reads) and a callback module "cb" (its echo
// copies its f32[4] input to its output on the completion thread) are
// linked between the two, so that
// call ops ("callee": "lib.scale2", "cb.echo") are resolved, inlined or
// split at, and run. After each input every runtime object
// made for it must be gone.
//
// Bounds: a module that would need more than FUZZ_MAX_BYTES of tensors, more
// than FUZZ_MAX_WORK bytes touched by its ops (matmul counts its
// multiply-adds) or more than FUZZ_MAX_WORKGROUPS workgroups in all is
// linked but not invoked: the runtime accepts valid modules far larger
// than one fuzz run can afford. A module whose executables name a CPU
// library is not linked at all: a path the fuzzer makes up could load any
// shared library of the system.
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>

#include "base/json.h"
#include "base/live.h"
#include "base/threads.h"
#include "fuzz.h"
#include "hal/driver.h"
#include "modules/callback_module.h"
#include "modules/hal_module.h"
#include "modules/program/program_module.h"
#include "modules/sinks/tensor_stats.h"
#include "vm/context.h"

#define FUZZ_MAX_BYTES ((uint64_t)16 << 20)
#define FUZZ_MAX_WORK ((uint64_t)64 << 20)
#define FUZZ_MAX_WORKGROUPS ((uint64_t)1 << 16)
// An invocation that has not completed by then is reported as a hang.
#define FUZZ_DEADLINE_NS (20 * 1000000000LL)

// The module call ops of the input may call: f32, i32 and bool functions,
// one with a local, one whose trace the sink refuses.
static const char LIB_JSON[] =
    "{\"format\":\"halrt.module/1\",\"name\":\"lib\",\"executables\":"
    "{\"k\":{\"local\":{\"builtin\":true}}},"
    "\"constants\":{\"zero\":{\"dtype\":\"f32\",\"shape\":[4]}},"
    "\"functions\":{"
    "\"scale2\":{\"inputs\":[{\"name\":\"a\",\"dtype\":\"f32\",\"shape\":[4]}],"
    "\"outputs\":[{\"name\":\"b\",\"dtype\":\"f32\",\"shape\":[4]}],"
    "\"locals\":[{\"name\":\"t\",\"dtype\":\"f32\",\"shape\":[4]}],\"body\":["
    "{\"op\":\"dispatch\",\"kernel\":\"k.add_f32\",\"workgroups\":[1],"
    "\"bindings\":[\"a\",\"a\",\"t\"],\"constants\":[4]},"
    "{\"op\":\"dispatch\",\"kernel\":\"k.add_f32\",\"workgroups\":[1],"
    "\"bindings\":[\"t\",\"zero\",\"t\"],\"constants\":[4]},"
    "{\"op\":\"trace\",\"key\":\"in_lib\",\"values\":[\"t\"]},"
    "{\"op\":\"copy\",\"source\":\"t\",\"target\":\"b\"}]},"
    "\"add_i32\":{\"inputs\":[{\"name\":\"a\",\"dtype\":\"i32\",\"shape\":[2,2]},"
    "{\"name\":\"c\",\"dtype\":\"i32\",\"shape\":[2,2]}],"
    "\"outputs\":[{\"name\":\"b\",\"dtype\":\"i32\",\"shape\":[2,2]}],\"body\":["
    "{\"op\":\"dispatch\",\"kernel\":\"k.add_i32\",\"workgroups\":[1],"
    "\"bindings\":[\"a\",\"c\",\"b\"],\"constants\":[4]}]},"
    "\"refused\":{\"inputs\":[{\"name\":\"a\",\"dtype\":\"bool\",\"shape\":[]}],"
    "\"outputs\":[],\"body\":[{\"op\":\"trace\",\"key\":\"fail_in_lib\","
    "\"values\":[\"a\"]}]}}}";

static hrt_vm_instance_t* g_instance;
static hrt_hal_device_t* g_device;
static hrt_vm_module_t* g_lib;
static hrt_vm_module_t* g_cb;

// cb.echo: finishes each call at once with its input as its output.
static void echo_call(void* user_data, hrt_host_call_t* call,
                      const hrt_host_call_info_t* info, uint32_t count,
                      const hrt_trace_tensor_t* inputs) {
  (void)user_data;
  (void)info;
  FUZZ_CHECK(count == 1 && inputs[0].byte_length == 16);
  const void* outputs[1] = {inputs[0].data};
  hrt_host_call_finish(call, HRT_OK, outputs);
}

static void echo_release(void* user_data) { (void)user_data; }
// Live object counts with only the instance and device made.
static int64_t g_live_baseline[HRT_LIVE_KIND_COUNT_];

int LLVMFuzzerInitialize(int* argc, char*** argv) {
  (void)argc;
  (void)argv;
  FUZZ_CHECK_OK(hrt_vm_instance_create(&g_instance));
  FUZZ_CHECK_OK(
      hrt_vm_instance_create_device(g_instance, "local-sync", &g_device));
  static const float zero[4] = {0};
  const hrt_program_constant_data_t lib_constants[1] = {{zero, sizeof(zero)}};
  FUZZ_CHECK_OK(hrt_program_module_create_with_constants(
      LIB_JSON, sizeof(LIB_JSON) - 1, NULL, lib_constants, 1, &g_lib));
  static const hrt_vm_tensor_type_t f32x4 = {"v", HRT_HAL_ELEMENT_TYPE_F32, 1,
                                             {4}};
  static const hrt_vm_function_def_t echo = {"echo", 1, 1, &f32x4, &f32x4};
  hrt_callback_module_callbacks_t callbacks = {
      .call = {echo_call, NULL}, .release = {echo_release, NULL}};
  FUZZ_CHECK_OK(hrt_callback_module_create("cb", 1, &echo, callbacks, &g_cb));
  for (int kind = 0; kind < HRT_LIVE_KIND_COUNT_; ++kind) {
    g_live_baseline[kind] = hrt_live_count((hrt_live_kind_t)kind);
  }
  return 0;
}

//===----------------------------------------------------------------------===//
// Run budget, from the module's JSON (already validated by creation)
//===----------------------------------------------------------------------===//

static uint64_t add_saturate(uint64_t a, uint64_t b) {
  return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static uint64_t mul_saturate(uint64_t a, uint64_t b) {
  return a != 0 && b > UINT64_MAX / a ? UINT64_MAX : a * b;
}

typedef struct {
  uint64_t bytes;       // tensors allocated for the calls
  uint64_t work;        // bytes touched by ops, multiply-adds of matmuls
  uint64_t workgroups;  // dispatched
  bool loads_library;
} budget_t;

static uint64_t value_bytes(const hrt_json_t* value) {
  hrt_hal_element_type_t type;
  const hrt_json_t* dtype = hrt_json_get(value, "dtype");
  const hrt_json_t* shape = hrt_json_get(value, "shape");
  if (!dtype || !shape || shape->length > HRT_HAL_MAX_RANK) return UINT64_MAX;
  hrt_status_t status = hrt_hal_element_type_parse(dtype->string, &type);
  if (status != HRT_OK) {
    hrt_status_free(status);
    return UINT64_MAX;
  }
  int64_t dims[HRT_HAL_MAX_RANK];
  for (size_t d = 0; d < shape->length; ++d) {
    dims[d] = shape->items[d].integer;
  }
  uint64_t bytes = 0;
  status =
      hrt_hal_shape_byte_length(type, (uint32_t)shape->length, dims, &bytes);
  if (status != HRT_OK) {
    hrt_status_free(status);
    return UINT64_MAX;
  }
  return bytes;
}

// The bytes of the value named `name` (a JSON string) in `function`.
static uint64_t named_bytes(const hrt_json_t* function,
                            const hrt_json_t* name) {
  static const char* const groups[] = {"inputs", "outputs", "locals"};
  for (int g = 0; name && name->type == HRT_JSON_STRING && g < 3; ++g) {
    const hrt_json_t* list = hrt_json_get(function, groups[g]);
    for (size_t i = 0; list && i < list->length; ++i) {
      const hrt_json_t* other = hrt_json_get(&list->items[i], "name");
      if (other && strcmp(other->string, name->string) == 0) {
        return value_bytes(&list->items[i]);
      }
    }
  }
  return 0;
}

static uint64_t listed_bytes(const hrt_json_t* function,
                             const hrt_json_t* names) {
  uint64_t bytes = 0;
  for (size_t i = 0; names && i < names->length; ++i) {
    bytes = add_saturate(bytes, named_bytes(function, &names->items[i]));
  }
  return bytes;
}

static uint64_t grid_product(const hrt_json_t* grid) {
  uint64_t product = 1;
  for (size_t i = 0; grid && i < grid->length; ++i) {
    product = mul_saturate(product, (uint64_t)grid->items[i].integer);
  }
  return product;
}

static void add_op(budget_t* budget, const hrt_json_t* function,
                   const hrt_json_t* op) {
  const hrt_json_t* kind = hrt_json_get(op, "op");
  if (!kind) return;
  uint64_t work = 0;
  if (strcmp(kind->string, "dispatch") == 0) {
    budget->workgroups = add_saturate(
        budget->workgroups, grid_product(hrt_json_get(op, "workgroups")));
    work = listed_bytes(function, hrt_json_get(op, "bindings"));
    const hrt_json_t* kernel = hrt_json_get(op, "kernel");
    const char* entry = strchr(kernel->string, '.');
    const hrt_json_t* constants = hrt_json_get(op, "constants");
    if (entry && strcmp(entry, ".matmul_f32") == 0 && constants) {
      uint64_t madds = 1;
      for (size_t i = 0; i < constants->length; ++i) {
        madds = mul_saturate(madds, (uint64_t)constants->items[i].integer);
      }
      work = add_saturate(work, madds);
    }
  } else if (strcmp(kind->string, "fill") == 0) {
    work = named_bytes(function, hrt_json_get(op, "target"));
  } else if (strcmp(kind->string, "copy") == 0) {
    work = named_bytes(function, hrt_json_get(op, "target"));
  } else if (strcmp(kind->string, "trace") == 0) {
    work = listed_bytes(function, hrt_json_get(op, "values"));
  }
  budget->work = add_saturate(budget->work, work);
}

static void measure_module(const hrt_json_t* root, budget_t* budget) {
  memset(budget, 0, sizeof(*budget));
  const hrt_json_t* executables = hrt_json_get(root, "executables");
  for (size_t i = 0; executables && i < executables->length; ++i) {
    const hrt_json_t* local = hrt_json_get(&executables->items[i], "local");
    if (hrt_json_get(local, "library")) budget->loads_library = true;
  }
  static const char* const groups[] = {"inputs", "outputs", "locals"};
  const hrt_json_t* functions = hrt_json_get(root, "functions");
  for (size_t f = 0; functions && f < functions->length; ++f) {
    const hrt_json_t* function = &functions->items[f];
    for (int g = 0; g < 3; ++g) {
      const hrt_json_t* list = hrt_json_get(function, groups[g]);
      for (size_t i = 0; list && i < list->length; ++i) {
        budget->bytes =
            add_saturate(budget->bytes, value_bytes(&list->items[i]));
      }
    }
    const hrt_json_t* body = hrt_json_get(function, "body");
    for (size_t i = 0; body && i < body->length; ++i) {
      add_op(budget, function, &body->items[i]);
    }
  }
}

//===----------------------------------------------------------------------===//
// The sink: checks what it receives
//===----------------------------------------------------------------------===//

typedef struct {
  atomic_bool released;
  atomic_bool refused;  // a trace of the current invocation was refused
} sink_state_t;

static void check_tensor(const hrt_trace_tensor_t* tensor) {
  FUZZ_CHECK(tensor->name != NULL && tensor->name[0] != 0);
  FUZZ_CHECK((unsigned)tensor->element_type < HRT_HAL_ELEMENT_TYPE_COUNT_);
  FUZZ_CHECK(tensor->rank <= HRT_HAL_MAX_RANK);
  uint64_t bytes = 0;
  FUZZ_CHECK_OK(hrt_hal_shape_byte_length(tensor->element_type, tensor->rank,
                                          tensor->shape, &bytes));
  FUZZ_CHECK(tensor->byte_length == bytes);
  FUZZ_CHECK(bytes == 0 || tensor->data != NULL);
  // Reads every element (the sanitizers see a short snapshot).
  hrt_tensor_stats_t stats;
  hrt_tensor_stats_compute(tensor, &stats);
  FUZZ_CHECK(stats.count ==
             bytes / hrt_hal_element_type_size(tensor->element_type));
  FUZZ_CHECK(stats.nan_count + stats.inf_count <= stats.count);
}

static hrt_status_t sink_trace(void* user_data, const char* key,
                               const hrt_trace_info_t* info, uint32_t count,
                               const hrt_trace_tensor_t* tensors) {
  sink_state_t* state = user_data;
  FUZZ_CHECK(key != NULL && key[0] != 0);
  FUZZ_CHECK(info->function != NULL && strchr(info->function, '.') != NULL);
  FUZZ_CHECK(count >= 1 && count <= HRT_HAL_MAX_TRACE_SOURCES);
  for (uint32_t i = 0; i < count; ++i) check_tensor(&tensors[i]);
  if (strncmp(key, "fail", 4) == 0) {
    atomic_store(&state->refused, true);
    return hrt_status_make(HRT_STATUS_ABORTED, "sink refused '%s'", key);
  }
  return HRT_OK;
}

static void sink_timing(void* user_data, const hrt_dispatch_timing_t* events,
                        uint32_t count) {
  (void)user_data;
  FUZZ_CHECK(count >= 1);
  for (uint32_t i = 0; i < count; ++i) {
    FUZZ_CHECK(events[i].function != NULL && events[i].kernel != NULL);
    FUZZ_CHECK(strchr(events[i].kernel, '.') != NULL);
    FUZZ_CHECK(strcmp(events[i].device, "local-sync") == 0);
    FUZZ_CHECK(events[i].duration_ns >= 0);
  }
}

static void sink_release(void* user_data) {
  sink_state_t* state = user_data;
  FUZZ_CHECK(!atomic_exchange(&state->released, true));
}

//===----------------------------------------------------------------------===//
// Invocation
//===----------------------------------------------------------------------===//

// A status the runtime may return for a module, a link or a call: a code
// that blames the input or the resources, with a message. Printed when
// HALRT_FUZZ_VERBOSE is set (to see how far the seeds get).
static void check_clean_error(hrt_status_t status) {
  hrt_status_code_t code = hrt_status_code(status);
  if (getenv("HALRT_FUZZ_VERBOSE")) {
    fprintf(stderr, "status: %s: %s\n", hrt_status_code_name(code),
            hrt_status_message(status));
  }
  if (code != HRT_STATUS_INVALID_ARGUMENT && code != HRT_STATUS_NOT_FOUND &&
      code != HRT_STATUS_OUT_OF_RANGE && code != HRT_STATUS_ABORTED &&
      code != HRT_STATUS_RESOURCE_EXHAUSTED) {
    fuzz_fail(__FILE__, __LINE__, "a clean error", status);
  }
  FUZZ_CHECK(hrt_status_message(status)[0] != 0);
  hrt_status_free(status);
}

static void check_outputs(const hrt_vm_function_def_t* def,
                          hrt_hal_buffer_view_t* const* outputs,
                          uint32_t output_count) {
  FUZZ_CHECK(output_count == def->output_count);
  for (uint32_t i = 0; i < output_count; ++i) {
    const hrt_vm_tensor_type_t* type = &def->outputs[i];
    const hrt_hal_buffer_view_t* view = outputs[i];
    FUZZ_CHECK(hrt_hal_buffer_view_element_type(view) == type->element_type);
    FUZZ_CHECK(hrt_hal_buffer_view_rank(view) == type->rank);
    FUZZ_CHECK(memcmp(hrt_hal_buffer_view_shape(view), type->shape,
                      type->rank * sizeof(int64_t)) == 0);
    uint64_t bytes = 0;
    FUZZ_CHECK_OK(hrt_hal_shape_byte_length(type->element_type, type->rank,
                                            type->shape, &bytes));
    FUZZ_CHECK(hrt_hal_buffer_view_byte_length(view) == bytes);
  }
}

// One invocation: what its completion checks, and the signal it gives.
typedef struct {
  const hrt_vm_function_def_t* def;
  const sink_state_t* sink;
  hrt_notification_t done;
} call_t;

// On the completion thread: the outputs match the signature (and are
// released), or the call failed cleanly; a refused trace fails the call.
static void on_done(void* user_data, hrt_status_t status,
                    hrt_hal_buffer_view_t* const* outputs,
                    uint32_t output_count) {
  call_t* call = user_data;
  if (status == HRT_OK) {
    FUZZ_CHECK(!atomic_load(&call->sink->refused));
    check_outputs(call->def, outputs, output_count);
  } else {
    FUZZ_CHECK(output_count == 0);
    check_clean_error(status);
  }
  for (uint32_t i = 0; i < output_count; ++i) {
    hrt_hal_buffer_view_release(outputs[i]);
  }
  hrt_notification_set(&call->done);
}

static void make_inputs(const hrt_vm_function_def_t* def,
                        hrt_hal_buffer_view_t** inputs) {
  for (uint32_t i = 0; i < def->input_count; ++i) {
    const hrt_vm_tensor_type_t* type = &def->inputs[i];
    uint64_t bytes = 0;
    FUZZ_CHECK_OK(hrt_hal_shape_byte_length(type->element_type, type->rank,
                                            type->shape, &bytes));
    hrt_hal_buffer_t* buffer = NULL;
    FUZZ_CHECK_OK(
        hrt_hal_device_allocate_buffer(g_device, bytes, NULL, &buffer));
    FUZZ_CHECK_OK(hrt_hal_buffer_view_create(
        buffer, 0, type->element_type, type->rank, type->shape, &inputs[i]));
    hrt_hal_buffer_release(buffer);
  }
}

static void invoke(hrt_vm_context_t* context, const hrt_vm_module_t* program,
                   uint32_t ordinal, sink_state_t* sink) {
  const hrt_vm_function_def_t* def = &program->functions[ordinal];
  size_t length = strlen(program->name) + strlen(def->name) + 2;
  char* name = malloc(length);
  FUZZ_CHECK(name != NULL);
  snprintf(name, length, "%s.%s", program->name, def->name);
  hrt_vm_function_t function;
  FUZZ_CHECK_OK(hrt_vm_context_lookup_function(context, name, &function));
  FUZZ_CHECK(function.ordinal == ordinal);
  free(name);
  hrt_hal_buffer_view_t** inputs =
      calloc(def->input_count + 1, sizeof(*inputs));
  FUZZ_CHECK(inputs != NULL);
  make_inputs(def, inputs);
  call_t call = {def, sink, {0}};
  hrt_notification_init(&call.done);
  atomic_store(&sink->refused, false);
  hrt_status_t status =
      hrt_vm_invoke_async(context, &function, inputs, def->input_count, NULL,
                          (hrt_vm_invocation_done_t){on_done, &call}, NULL);
  if (status == HRT_OK) {
    FUZZ_CHECK(hrt_notification_wait_until(
        &call.done, hrt_time_now_ns() + FUZZ_DEADLINE_NS));
  } else {
    check_clean_error(status);
  }
  hrt_notification_deinit(&call.done);
  for (uint32_t i = 0; i < def->input_count; ++i) {
    hrt_hal_buffer_view_release(inputs[i]);
  }
  free(inputs);
}

//===----------------------------------------------------------------------===//
// One input
//===----------------------------------------------------------------------===//

// Waits (a few seconds at most) for the last references, which completion
// threads may drop just after an invocation's `done`.
static void check_all_released(sink_state_t* sink) {
  for (int i = 0; i < 5000 && !atomic_load(&sink->released); ++i) {
    struct timespec pause = {0, 1000000};
    nanosleep(&pause, NULL);
  }
  FUZZ_CHECK(atomic_load(&sink->released));
  for (int kind = 0; kind < HRT_LIVE_KIND_COUNT_; ++kind) {
    for (int i = 0; i < 5000 && hrt_live_count((hrt_live_kind_t)kind) !=
                                    g_live_baseline[kind];
         ++i) {
      struct timespec pause = {0, 1000000};
      nanosleep(&pause, NULL);
    }
    if (hrt_live_count((hrt_live_kind_t)kind) != g_live_baseline[kind]) {
      fprintf(stderr, "live %s: %lld, expected %lld\n",
              hrt_live_kind_name((hrt_live_kind_t)kind),
              (long long)hrt_live_count((hrt_live_kind_t)kind),
              (long long)g_live_baseline[kind]);
      FUZZ_CHECK(!"every object made for the input is destroyed");
    }
  }
}

static void link_and_run(hrt_vm_module_t* program, size_t size,
                         const budget_t* budget) {
  sink_state_t sink = {0};
  hrt_debug_sink_t debug_sink = {
      .buffer_view_trace = {sink_trace, &sink},
      .dispatch_timing = {sink_timing, &sink},
      .release = {sink_release, &sink},
  };
  hrt_hal_module_options_t options = {
      .trace_dispatches = (size & 1) != 0,
      .profile = (size & 2) != 0,
      .reject_nonfinite = (size & 4) != 0,
      .trace_every = (size & 8) ? 2 : 0,
  };
  hrt_vm_module_t* hal = NULL;
  FUZZ_CHECK_OK(hrt_hal_module_create(g_device, &debug_sink, &options, &hal));
  hrt_vm_module_t* modules[4] = {hal, g_lib, g_cb, program};
  hrt_vm_context_t* context = NULL;
  hrt_status_t status = hrt_vm_context_create(g_instance, modules, 4, &context);
  if (status == HRT_OK) {
    bool affordable = budget->bytes <= FUZZ_MAX_BYTES &&
                      budget->work <= FUZZ_MAX_WORK &&
                      budget->workgroups <= FUZZ_MAX_WORKGROUPS;
    for (uint32_t f = 0; affordable && f < program->function_count; ++f) {
      invoke(context, program, f, &sink);
    }
    hrt_vm_context_release(context);
  } else {
    check_clean_error(status);
  }
  hrt_vm_module_release(hal);
  hrt_vm_module_release(program);
  check_all_released(&sink);
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const char* text = (const char*)data;
  hrt_vm_module_t* program = NULL;
  hrt_status_t status = hrt_program_module_create(text, size, NULL, &program);
  if (status != HRT_OK) {
    check_clean_error(status);
    return 0;
  }
  // A module was made of it, so it is JSON.
  hrt_json_document_t* document = NULL;
  FUZZ_CHECK_OK(hrt_json_parse(text, size, &document));
  budget_t budget;
  measure_module(hrt_json_root(document), &budget);
  hrt_json_document_free(document);
  if (budget.loads_library) {
    hrt_vm_module_release(program);
    return 0;
  }
  link_and_run(program, size, &budget);
  return 0;
}
