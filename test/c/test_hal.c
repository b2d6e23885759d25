// src/hal: element types, buffer views, URIs, command buffer recording and
// validation, and timeline semaphores across threads.
#include <stdatomic.h>

#include "base/alloc.h"
#include "base/live.h"
#include "base/threads.h"
#include "hal/buffer_view.h"
#include "hal/driver.h"
#include "hal/pending_submission.h"
#include "test.h"

static void element_types_parse_and_size(void) {
  static const struct {
    const char* name;
    size_t size;
  } expected[] = {{"f16", 2}, {"bf16", 2}, {"f32", 4}, {"f64", 8},
                  {"i8", 1},  {"u8", 1},   {"i16", 2}, {"u16", 2},
                  {"i32", 4}, {"u32", 4},  {"i64", 8}, {"u64", 8},
                  {"bool", 1}};
  for (size_t i = 0; i < sizeof(expected) / sizeof(expected[0]); ++i) {
    hrt_hal_element_type_t type;
    CHECK_OK(hrt_hal_element_type_parse(expected[i].name, &type));
    CHECK_EQ_INT(hrt_hal_element_type_size(type), expected[i].size);
    CHECK(strcmp(hrt_hal_element_type_name(type), expected[i].name) == 0);
  }
  hrt_hal_element_type_t type;
  CHECK_STATUS(hrt_hal_element_type_parse("f33", &type),
               HRT_STATUS_INVALID_ARGUMENT, "unknown dtype 'f33'");
}

static hrt_hal_device_t* make_device(const char* uri) {
  uint32_t count = 0;
  const hrt_hal_driver_t* const* drivers = hrt_hal_builtin_drivers(&count);
  hrt_hal_device_t* device = NULL;
  hrt_status_t status = hrt_hal_create_device(drivers, count, uri, &device);
  if (status != HRT_OK) {
    fprintf(stderr, "creating %s: %s\n", uri, hrt_status_message(status));
    hrt_status_free(status);
    return NULL;
  }
  return device;
}

static void buffer_views_check_shape_and_bounds(void) {
  hrt_hal_device_t* device = make_device("local-sync");
  CHECK(device);
  hrt_hal_buffer_t* buffer = NULL;
  CHECK_OK(hrt_hal_device_allocate_buffer(device, 64, NULL, &buffer));
  hrt_hal_buffer_view_t* view = NULL;
  int64_t shape[2] = {3, 4};
  hrt_status_t status = hrt_hal_buffer_view_create(
      buffer, 16, HRT_HAL_ELEMENT_TYPE_F32, 2, shape, &view);
  int created = status == HRT_OK;
  hrt_status_free(status);
  if (created) {
    CHECK_EQ_INT(hrt_hal_buffer_view_element_count(view), 12);
    CHECK_EQ_INT(hrt_hal_buffer_view_byte_length(view), 48);
    CHECK_EQ_INT(hrt_hal_buffer_view_shape(view)[1], 4);
    hrt_hal_buffer_ref_t ref = hrt_hal_buffer_view_ref(view);
    CHECK_EQ_INT(ref.offset, 16);
    hrt_hal_buffer_view_release(view);
  }
  int64_t too_big[1] = {13};
  CHECK_STATUS(hrt_hal_buffer_view_create(buffer, 16, HRT_HAL_ELEMENT_TYPE_F32,
                                          1, too_big, &view),
               HRT_STATUS_OUT_OF_RANGE, "does not fit");
  int64_t negative[2] = {2, -1};
  CHECK_STATUS(hrt_hal_buffer_view_create(buffer, 0, HRT_HAL_ELEMENT_TYPE_F32,
                                          2, negative, &view),
               HRT_STATUS_INVALID_ARGUMENT, "shape[1] is negative");
  CHECK_STATUS(hrt_hal_buffer_view_create(buffer, 2, HRT_HAL_ELEMENT_TYPE_F32,
                                          1, shape, &view),
               HRT_STATUS_INVALID_ARGUMENT, "not a multiple");
  int64_t huge[3] = {INT64_MAX, INT64_MAX, 2};
  CHECK_STATUS(hrt_hal_buffer_view_create(buffer, 0, HRT_HAL_ELEMENT_TYPE_F32,
                                          3, huge, &view),
               HRT_STATUS_INVALID_ARGUMENT, "overflows");
  int64_t rank9[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  CHECK_STATUS(hrt_hal_buffer_view_create(buffer, 0, HRT_HAL_ELEMENT_TYPE_U8,
                                          9, rank9, &view),
               HRT_STATUS_INVALID_ARGUMENT, "rank 9");
  hrt_hal_buffer_view_t* scalar = NULL;
  CHECK_OK(hrt_hal_buffer_view_create(buffer, 0, HRT_HAL_ELEMENT_TYPE_F64, 0,
                                      NULL, &scalar));
  CHECK_EQ_INT(hrt_hal_buffer_view_element_count(scalar), 1);
  hrt_hal_buffer_view_release(scalar);
  hrt_hal_buffer_release(buffer);
  hrt_hal_device_release(device);
  CHECK(created);
}

static void uris_parse_driver_ordinal_and_params(void) {
  hrt_hal_device_uri_t uri;
  CHECK_OK(hrt_hal_device_uri_parse("cuda://1", &uri));
  CHECK(strcmp(uri.driver, "cuda") == 0 && uri.has_ordinal && uri.ordinal == 1);
  CHECK_OK(hrt_hal_device_uri_parse("local-task?workers=4&x=y", &uri));
  CHECK(strcmp(uri.driver, "local-task") == 0 && !uri.has_ordinal);
  CHECK(strcmp(hrt_hal_device_uri_param(&uri, "workers"), "4") == 0);
  CHECK(strcmp(hrt_hal_device_uri_param(&uri, "x"), "y") == 0);
  CHECK(hrt_hal_device_uri_param(&uri, "z") == NULL);
  CHECK_STATUS(hrt_hal_device_uri_parse("", &uri), HRT_STATUS_INVALID_ARGUMENT,
               "no driver name");
  CHECK_STATUS(hrt_hal_device_uri_parse("cuda://x", &uri),
               HRT_STATUS_INVALID_ARGUMENT, "ordinal");
  CHECK_STATUS(hrt_hal_device_uri_parse("cuda://", &uri),
               HRT_STATUS_INVALID_ARGUMENT, "ordinal");
  CHECK_STATUS(hrt_hal_device_uri_parse("local-task?workers", &uri),
               HRT_STATUS_INVALID_ARGUMENT, "key=value");
  CHECK_STATUS(hrt_hal_device_uri_parse("Local Task", &uri),
               HRT_STATUS_INVALID_ARGUMENT, "lowercase");
}

static void device_uris_are_checked_by_drivers(void) {
  uint32_t count = 0;
  const hrt_hal_driver_t* const* drivers = hrt_hal_builtin_drivers(&count);
  hrt_hal_device_t* device = NULL;
  CHECK_STATUS(hrt_hal_create_device(drivers, count, "vulkan", &device),
               HRT_STATUS_NOT_FOUND, "unknown driver 'vulkan'");
  CHECK_STATUS(hrt_hal_create_device(drivers, count, "local-task?workers=0",
                                     &device),
               HRT_STATUS_INVALID_ARGUMENT, "workers='0'");
  CHECK_STATUS(hrt_hal_create_device(drivers, count, "local-task?threads=2",
                                     &device),
               HRT_STATUS_INVALID_ARGUMENT, "no parameter 'threads'");
  CHECK_STATUS(hrt_hal_create_device(drivers, count, "local-sync://1", &device),
               HRT_STATUS_INVALID_ARGUMENT, "single device");
  CHECK_STATUS(hrt_hal_create_device(drivers, count, "auto?x=1", &device),
               HRT_STATUS_INVALID_ARGUMENT, "'auto' takes no");
  CHECK(device == NULL);
  CHECK_OK(hrt_hal_create_device(drivers, count, "local-task?workers=3",
                                 &device));
  CHECK_EQ_INT(hrt_hal_device_info(device)->worker_count, 3);
  CHECK(strcmp(hrt_hal_device_info(device)->uri, "local-task?workers=3") == 0);
  hrt_hal_device_release(device);
  // auto takes cuda when its probe succeeds, local-task otherwise.
  const char* expected = "local-task";
  for (uint32_t i = 0; i < count; ++i) {
    if (strcmp(drivers[i]->name, "cuda") != 0) continue;
    hrt_status_t probe = drivers[i]->probe();
    if (probe == HRT_OK) expected = "cuda";
    hrt_status_free(probe);
  }
  CHECK_OK(hrt_hal_create_device(drivers, count, "auto", &device));
  CHECK(strcmp(hrt_hal_device_info(device)->driver, expected) == 0);
  hrt_hal_device_release(device);
}

static void command_buffers_validate_while_recording(void) {
  hrt_hal_device_t* device = make_device("local-sync");
  hrt_hal_device_t* other = make_device("local-sync");
  CHECK(device && other);
  hrt_hal_buffer_t* buffer = NULL;
  hrt_hal_buffer_t* foreign = NULL;
  CHECK_OK(hrt_hal_device_allocate_buffer(device, 16, NULL, &buffer));
  CHECK_OK(hrt_hal_device_allocate_buffer(other, 16, NULL, &foreign));
  hrt_hal_command_buffer_t* cb = NULL;
  CHECK_OK(hrt_hal_command_buffer_create(device, &cb));
  hrt_hal_buffer_ref_t whole = {buffer, 0, 0, HRT_HAL_WHOLE_BUFFER};
  hrt_hal_buffer_ref_t past = {buffer, 0, 8, 16};
  hrt_hal_buffer_ref_t alien = {foreign, 0, 0, HRT_HAL_WHOLE_BUFFER};
  hrt_hal_buffer_ref_t half = {buffer, 0, 0, 8};
  CHECK_STATUS(hrt_hal_command_buffer_fill(cb, past, 0, 4),
               HRT_STATUS_OUT_OF_RANGE, "fill target");
  CHECK_STATUS(hrt_hal_command_buffer_fill(cb, whole, 0, 3),
               HRT_STATUS_INVALID_ARGUMENT, "pattern length");
  CHECK_STATUS(hrt_hal_command_buffer_copy(cb, alien, whole),
               HRT_STATUS_INVALID_ARGUMENT, "another device");
  CHECK_STATUS(hrt_hal_command_buffer_copy(cb, half, whole),
               HRT_STATUS_INVALID_ARGUMENT, "8 bytes but target has 16");
  CHECK_OK(hrt_hal_command_buffer_fill(cb, whole, 7, 4));
  hrt_hal_buffer_ref_t slot3 = {NULL, 3, 0, HRT_HAL_WHOLE_BUFFER};
  CHECK_OK(hrt_hal_command_buffer_copy(cb, whole, slot3));
  CHECK_EQ_INT(hrt_hal_command_buffer_slot_count(cb), 4);
  hrt_hal_command_buffer_finalize(cb);
  CHECK_STATUS(hrt_hal_command_buffer_barrier(cb),
               HRT_STATUS_FAILED_PRECONDITION, "finalized");
  // Binding validation at submit: too few entries, foreign buffers, sizes.
  hrt_hal_buffer_ref_t table[4] = {whole, whole, whole, half};
  CHECK_STATUS(hrt_hal_command_buffer_validate_bindings(cb, table, 2),
               HRT_STATUS_INVALID_ARGUMENT, "uses 4 binding slots");
  CHECK_STATUS(hrt_hal_command_buffer_validate_bindings(cb, table, 4),
               HRT_STATUS_INVALID_ARGUMENT, "16 bytes but target has 8");
  table[3] = alien;
  CHECK_STATUS(hrt_hal_command_buffer_validate_bindings(cb, table, 4),
               HRT_STATUS_INVALID_ARGUMENT, "binding 3 belongs to another");
  table[3] = whole;
  CHECK_OK(hrt_hal_command_buffer_validate_bindings(cb, table, 4));
  hrt_hal_command_buffer_release(cb);
  hrt_hal_buffer_release(buffer);
  hrt_hal_buffer_release(foreign);
  hrt_hal_device_release(device);
  hrt_hal_device_release(other);
}

static void dispatch_arguments_are_checked_at_record(void) {
  hrt_hal_device_t* device = make_device("local-sync");
  CHECK(device);
  hrt_hal_executable_params_t params = {
      .format = HRT_HAL_EXECUTABLE_FORMAT_BUILTIN};
  hrt_hal_executable_t* executable = NULL;
  CHECK_OK(hrt_hal_device_create_executable(device, &params, &executable));
  uint32_t ordinal = 0;
  CHECK_STATUS(hrt_hal_executable_lookup(executable, "nope_f32", &ordinal),
               HRT_STATUS_NOT_FOUND, "kernel 'nope_f32'");
  CHECK_OK(hrt_hal_executable_lookup(executable, "add_f32", &ordinal));
  hrt_hal_command_buffer_t* cb = NULL;
  CHECK_OK(hrt_hal_command_buffer_create(device, &cb));
  hrt_hal_buffer_ref_t slots[3] = {{NULL, 0, 0, HRT_HAL_WHOLE_BUFFER},
                                   {NULL, 1, 0, HRT_HAL_WHOLE_BUFFER},
                                   {NULL, 2, 0, HRT_HAL_WHOLE_BUFFER}};
  uint32_t n = 4;
  hrt_hal_dispatch_t dispatch = {executable, ordinal, {1, 1, 1}, {1, 1, 1},
                                 1, &n, 3, slots, 0};
  dispatch.workgroup_count[1] = 0;
  CHECK_STATUS(hrt_hal_command_buffer_dispatch(cb, &dispatch),
               HRT_STATUS_INVALID_ARGUMENT, "workgroup count[1] = 0");
  dispatch.workgroup_count[1] = 70000;
  CHECK_STATUS(hrt_hal_command_buffer_dispatch(cb, &dispatch),
               HRT_STATUS_INVALID_ARGUMENT, "workgroup count[1] = 70000");
  dispatch.workgroup_count[1] = 1;
  dispatch.workgroup_size[0] = 2048;
  CHECK_STATUS(hrt_hal_command_buffer_dispatch(cb, &dispatch),
               HRT_STATUS_INVALID_ARGUMENT, "exceeds 1024");
  dispatch.workgroup_size[0] = 1;
  dispatch.binding_count = 2;
  CHECK_STATUS(hrt_hal_command_buffer_dispatch(cb, &dispatch),
               HRT_STATUS_INVALID_ARGUMENT, "takes 3 bindings and 1 constants");
  dispatch.binding_count = 3;
  CHECK_OK(hrt_hal_command_buffer_dispatch(cb, &dispatch));
  hrt_hal_command_buffer_release(cb);
  hrt_hal_executable_release(executable);
  params.format = HRT_HAL_EXECUTABLE_FORMAT_PTX;
  CHECK_STATUS(hrt_hal_device_create_executable(device, &params, &executable),
               HRT_STATUS_INVALID_ARGUMENT, "not PTX");
  hrt_hal_device_release(device);
}

// What each command may write, as devices order later writes after a
// trace: targets, and a dispatch's bindings but its read-only ones.
static void written_ranges_follow_commands_and_read_only_bindings(void) {
  hrt_hal_device_t* device = make_device("local-sync");
  CHECK(device);
  hrt_hal_executable_params_t params = {.format =
                                            HRT_HAL_EXECUTABLE_FORMAT_BUILTIN};
  hrt_hal_executable_t* executable = NULL;
  CHECK_OK(hrt_hal_device_create_executable(device, &params, &executable));
  uint32_t ordinal = 0;
  CHECK_OK(hrt_hal_executable_lookup(executable, "add_f32", &ordinal));
  hrt_hal_buffer_t* buffer = NULL;
  CHECK_OK(hrt_hal_device_allocate_buffer(device, 64, NULL, &buffer));
  hrt_hal_command_buffer_t* cb = NULL;
  CHECK_OK(hrt_hal_command_buffer_create(device, &cb));
  hrt_hal_buffer_ref_t a = {buffer, 0, 0, 16}, b = {buffer, 0, 16, 16},
                       c = {buffer, 0, 32, 16}, slot = {NULL, 0, 8, 8};
  hrt_hal_buffer_ref_t bindings[3] = {a, b, c};
  uint32_t n = 4;
  hrt_hal_dispatch_t dispatch = {executable, ordinal, {1, 1, 1}, {1, 1, 1},
                                 1,          &n,      3,         bindings, 0};
  dispatch.read_only_bindings = 8;  // binding 3 of 3
  CHECK_STATUS(hrt_hal_command_buffer_dispatch(cb, &dispatch),
               HRT_STATUS_INVALID_ARGUMENT, "marks bindings past its 3");
  dispatch.read_only_bindings = 3;  // a and b read, c written
  CHECK_OK(hrt_hal_command_buffer_dispatch(cb, &dispatch));
  dispatch.read_only_bindings = 0;  // a user kernel: all may be written
  CHECK_OK(hrt_hal_command_buffer_dispatch(cb, &dispatch));
  CHECK_OK(hrt_hal_command_buffer_fill(cb, slot, 0, 1));
  CHECK_OK(hrt_hal_command_buffer_copy(cb, a, b));
  static char host[16];
  CHECK_OK(hrt_hal_command_buffer_read(cb, a, host));
  CHECK_OK(hrt_hal_command_buffer_barrier(cb));
  hrt_hal_command_buffer_finalize(cb);
  hrt_hal_buffer_ref_t table[1] = {{buffer, 0, 0, HRT_HAL_WHOLE_BUFFER}};
  hrt_hal_submission_t submission = {
      .command_buffer = cb, .binding_count = 1, .bindings = table};
  void* owner = NULL;
  CHECK_OK(hrt_allocate_recycled(
      hrt_hal_pending_submission_storage_size(&submission) +
          sizeof(hrt_hal_pending_submission_t),
      "submission", &owner));
  if (!owner) return;
  hrt_hal_pending_submission_t* pending = owner;
  hrt_hal_pending_submission_init(pending, &submission, pending + 1);
  hrt_hal_buffer_ref_t out[HRT_HAL_MAX_DISPATCH_BINDINGS];
  uint32_t counts[6];
  hrt_hal_buffer_ref_t first[6];
  for (uint32_t i = 0; i < 6; ++i) {
    counts[i] = hrt_hal_pending_submission_written(
        pending, hrt_hal_command_buffer_at(cb, i), out);
    first[i] = out[0];
  }
  hrt_hal_device_retain(device);  // the submission's, released by finish
  hrt_hal_pending_submission_finish(pending, HRT_OK, owner, device);
  CHECK_EQ_INT(counts[0], 1);  // c only
  CHECK_EQ_INT(first[0].offset, 32);
  CHECK_EQ_INT(counts[1], 3);
  CHECK_EQ_INT(counts[2], 1);  // the fill's slot range, resolved
  CHECK(first[2].buffer == buffer && first[2].offset == 8 &&
        first[2].length == 8);
  CHECK_EQ_INT(counts[3], 1);  // the copy's target
  CHECK_EQ_INT(first[3].offset, 16);
  CHECK_EQ_INT(counts[4], 0);  // read
  CHECK_EQ_INT(counts[5], 0);  // barrier
  CHECK(hrt_hal_buffer_ranges_overlap(&a, &table[0]) &&
        !hrt_hal_buffer_ranges_overlap(&a, &b) &&
        hrt_hal_buffer_ranges_overlap(&first[2], &a) &&
        !hrt_hal_buffer_ranges_overlap(&(hrt_hal_buffer_ref_t){buffer, 0, 4, 0},
                                       &a));
  hrt_hal_command_buffer_release(cb);
  hrt_hal_buffer_release(buffer);
  hrt_hal_executable_release(executable);
  hrt_hal_device_release(device);
}

typedef struct {
  hrt_hal_semaphore_t* semaphore;
  uint64_t value;
  hrt_status_t result;
} sem_waiter_t;

static void* wait_semaphore(void* arg) {
  sem_waiter_t* waiter = arg;
  waiter->result = hrt_hal_semaphore_wait(waiter->semaphore, waiter->value,
                                          HRT_TIME_INFINITE_FUTURE);
  return NULL;
}

static void semaphores_wake_waiters_across_threads(void) {
  hrt_hal_semaphore_t* semaphore = NULL;
  CHECK_OK(hrt_hal_semaphore_create(0, &semaphore));
  sem_waiter_t waiters[3] = {{semaphore, 1, HRT_OK},
                             {semaphore, 2, HRT_OK},
                             {semaphore, 5, HRT_OK}};
  hrt_thread_t threads[3];
  for (int i = 0; i < 3; ++i) {
    CHECK_OK(hrt_thread_create("sem", wait_semaphore, &waiters[i],
                               &threads[i]));
  }
  CHECK_OK(hrt_hal_semaphore_signal(semaphore, 2));
  hrt_thread_join(&threads[0]);
  hrt_thread_join(&threads[1]);
  CHECK(waiters[0].result == HRT_OK && waiters[1].result == HRT_OK);
  CHECK_STATUS(hrt_hal_semaphore_signal(semaphore, 2),
               HRT_STATUS_INVALID_ARGUMENT, "not above");
  CHECK_STATUS(hrt_hal_semaphore_wait(semaphore, 3, hrt_time_now_ns() + 1000000),
               HRT_STATUS_DEADLINE_EXCEEDED, "did not reach 3");
  hrt_hal_semaphore_fail(semaphore, hrt_status_make(HRT_STATUS_DEVICE_LOST,
                                                    "gpu fell off"));
  hrt_hal_semaphore_fail(semaphore,
                         hrt_status_make(HRT_STATUS_INTERNAL, "second"));
  hrt_thread_join(&threads[2]);
  CHECK_STATUS(waiters[2].result, HRT_STATUS_DEVICE_LOST, "gpu fell off");
  uint64_t value = 0;
  CHECK_STATUS(hrt_hal_semaphore_query(semaphore, &value),
               HRT_STATUS_DEVICE_LOST, "gpu fell off");
  CHECK_STATUS(hrt_hal_semaphore_wait(semaphore, 1, HRT_TIME_INFINITE_FUTURE),
               HRT_STATUS_DEVICE_LOST, "gpu fell off");
  CHECK_STATUS(hrt_hal_semaphore_signal(semaphore, 9), HRT_STATUS_DEVICE_LOST,
               "gpu fell off");
  hrt_hal_semaphore_release(semaphore);
}

TEST_MAIN(TEST_CASE(element_types_parse_and_size),
          TEST_CASE(buffer_views_check_shape_and_bounds),
          TEST_CASE(uris_parse_driver_ordinal_and_params),
          TEST_CASE(device_uris_are_checked_by_drivers),
          TEST_CASE(command_buffers_validate_while_recording),
          TEST_CASE(dispatch_arguments_are_checked_at_record),
          TEST_CASE(written_ranges_follow_commands_and_read_only_bindings),
          TEST_CASE(semaphores_wake_waiters_across_threads),
          TEST_CASE(every_object_is_destroyed))
