// docs/cuda.md, "Devices" and "Memory and commands": what a CUDA device
// says about its GPU, and every command on device memory.
#include <pthread.h>
#include <stdlib.h>

#include "cuda_fixture.h"
#include "hal/cuda/cuda_driver.h"

static void device_info_describes_the_gpu(void) {
  CUDA_SETUP();
  CHECK_OK(hrt_cuda_driver.probe());
  hrt_hal_device_t* device = NULL;
  CHECK_OK(case_device("auto", &device));
  const hrt_hal_device_info_t* info = hrt_hal_device_info(device);
  printf("  %s: %s, %.1f GiB, compute %u.%u, %u SMs, driver %d\n", info->uri,
         info->name, (double)info->total_memory / (1 << 30),
         info->compute_capability[0], info->compute_capability[1],
         info->multiprocessor_count, info->driver_version);
  CHECK(strcmp(info->driver, "cuda") == 0);
  CHECK(strcmp(info->kind, "cuda") == 0);
  CHECK(strcmp(info->uri, "cuda://0") == 0);
  CHECK(info->name[0] != 0);
  CHECK(info->total_memory > 0);
  CHECK(info->compute_capability[0] >= 7);
  CHECK(info->multiprocessor_count > 0);
  CHECK(info->driver_version >= 11000);
  if (g_cuda.fake) {
    CHECK(strcmp(info->name, "fakecuda device 0") == 0);
    CHECK_EQ_INT(info->total_memory, 1 << 30);
    CHECK_EQ_INT(info->compute_capability[0], 9);
    CHECK_EQ_INT(info->multiprocessor_count, 4);
    CHECK_EQ_INT(info->driver_version, 13000);
    hrt_hal_device_t* second = NULL;
    CHECK_OK(case_device("cuda://1", &second));
    CHECK(strcmp(hrt_hal_device_info(second)->uri, "cuda://1") == 0);
    CHECK(strcmp(hrt_hal_device_info(second)->name, "fakecuda device 1") == 0);
    CHECK_STATUS(make_device("cuda://2", &second), HRT_STATUS_INVALID_ARGUMENT,
                 "there are 2 CUDA devices (ordinals 0 to 1)");
  }
  CHECK_STATUS(make_device("cuda://64", &device), HRT_STATUS_INVALID_ARGUMENT,
               "'cuda://64'");
  CHECK_STATUS(make_device("cuda?streams=2", &device),
               HRT_STATUS_INVALID_ARGUMENT, "no parameter 'streams'");
}

static void completions_run_off_the_submitting_thread(void) {
  CUDA_SETUP();
  hrt_hal_device_t* device = NULL;
  CHECK_OK(case_device("cuda", &device));
  hrt_hal_buffer_t* buffer = NULL;
  CHECK_OK(case_buffer(device, 16, NULL, &buffer));
  CHECK(buffer->host_ptr == NULL);
  hrt_hal_command_buffer_t* cb = NULL;
  CHECK_OK(case_command_buffer(device, &cb));
  uint8_t out[16] = {0};
  CHECK_OK(hrt_hal_command_buffer_fill(cb, whole(buffer), 0xAB, 1));
  CHECK_OK(hrt_hal_command_buffer_read(cb, whole(buffer), out));
  hrt_hal_command_buffer_finalize(cb);
  completion_t completion;
  CHECK_OK(submit(device, cb, NULL, 0, &completion));
  CHECK_OK(completion_wait(&completion));
  CHECK(!pthread_equal(completion.thread, pthread_self()));
  CHECK_EQ_INT(out[0], 0xAB);
  CHECK_EQ_INT(out[15], 0xAB);
}

// Every command on ranges at awkward offsets, against a host model of the
// same bytes.
static void commands_round_trip_bytes(void) {
  CUDA_SETUP();
  enum { SIZE = 256 };
  hrt_hal_device_t* device = NULL;
  CHECK_OK(case_device("cuda", &device));
  uint8_t initial[SIZE], model[SIZE], out[SIZE], zeros[SIZE];
  for (int i = 0; i < SIZE; ++i) initial[i] = (uint8_t)(i * 7 + 1);
  memcpy(model, initial, SIZE);
  hrt_hal_buffer_t* buffer = NULL;
  hrt_hal_buffer_t* zeroed = NULL;
  hrt_hal_buffer_t* empty = NULL;
  CHECK_OK(case_buffer(device, SIZE, initial, &buffer));
  CHECK_OK(case_buffer(device, SIZE, NULL, &zeroed));
  CHECK_OK(case_buffer(device, 0, NULL, &empty));
  hrt_hal_command_buffer_t* cb = NULL;
  CHECK_OK(case_command_buffer(device, &cb));
  // Fills: every pattern length, aligned and not.
  static const struct {
    uint32_t offset, length, pattern_length;
    uint64_t pattern;
  } fills[] = {
      {0, 16, 1, 0x5A},
      {17, 10, 2, 0xBEEF},
      {32, 12, 2, 0x1234},
      {46, 12, 4, 0x01020304},
      {64, 16, 4, 0xA1B2C3D4},
      {82, 24, 8, 0x1122334455667788ull},
      {112, 32, 8, 0x0102030405060708ull},
      {148, 16, 8, 0x7777777777777777ull},
      {170, 8, 4, 0x99999999},
  };
  for (size_t f = 0; f < sizeof(fills) / sizeof(fills[0]); ++f) {
    CHECK_OK(hrt_hal_command_buffer_fill(
        cb, range(buffer, fills[f].offset, fills[f].length), fills[f].pattern,
        fills[f].pattern_length));
    for (uint32_t i = 0; i < fills[f].length; ++i) {
      model[fills[f].offset + i] =
          (uint8_t)(fills[f].pattern >> (8 * (i % fills[f].pattern_length)));
    }
  }
  const uint8_t patch[5] = {200, 201, 202, 203, 204};
  CHECK_OK(hrt_hal_command_buffer_update(cb, patch, 5, range(buffer, 181, 5)));
  memcpy(model + 181, patch, 5);
  CHECK_OK(hrt_hal_command_buffer_barrier(cb));
  // Copies: disjoint, then overlapping both ways (memmove semantics).
  CHECK_OK(hrt_hal_command_buffer_copy(cb, range(buffer, 0, 40),
                                       range(buffer, 200, 40)));
  memmove(model + 200, model, 40);
  CHECK_OK(hrt_hal_command_buffer_copy(cb, range(buffer, 10, 60),
                                       range(buffer, 13, 60)));
  memmove(model + 13, model + 10, 60);
  CHECK_OK(hrt_hal_command_buffer_copy(cb, range(buffer, 100, 50),
                                       range(buffer, 91, 50)));
  memmove(model + 91, model + 100, 50);
  CHECK_OK(
      hrt_hal_command_buffer_copy(cb, range(buffer, 0, 0), range(empty, 0, 0)));
  CHECK_OK(hrt_hal_command_buffer_read(cb, whole(buffer), out));
  CHECK_OK(hrt_hal_command_buffer_read(cb, whole(zeroed), zeros));
  CHECK_OK(hrt_hal_command_buffer_read(cb, whole(empty), out));
  hrt_hal_command_buffer_finalize(cb);
  memset(zeros, 0xEE, SIZE);
  CHECK_OK(run(device, cb, NULL, 0));
  int wrong = 0, not_zero = 0;
  for (int i = 0; i < SIZE; ++i) {
    if (out[i] != model[i]) {
      if (wrong < 5) {
        fprintf(stderr, "byte %d: %u, expected %u\n", i, out[i], model[i]);
      }
      ++wrong;
    }
    not_zero += zeros[i] != 0;
  }
  CHECK_EQ_INT(wrong, 0);
  CHECK_EQ_INT(not_zero, 0);
}

// Big fills go through the 2-D memsets too (GPU-sized row counts).
static void large_fills_write_every_element(void) {
  CUDA_SETUP();
  enum { COUNT = 4 << 20 };  // 8-byte elements: 32 MiB
  hrt_hal_device_t* device = NULL;
  CHECK_OK(case_device("cuda", &device));
  hrt_hal_buffer_t* buffer = NULL;
  CHECK_OK(case_buffer(device, COUNT * 8ull + 8, NULL, &buffer));
  uint64_t* out = malloc(COUNT * 8ull + 8);
  CHECK(out != NULL);
  TEST_DEFER(free, out);
  const uint64_t pattern = 0x0123456789ABCDEFull;
  const uint32_t offsets[2] = {0, 4};  // 8-byte aligned, then 4-byte aligned
  for (int k = 0; k < 2; ++k) {
    hrt_hal_command_buffer_t* cb = NULL;
    CHECK_OK(case_command_buffer(device, &cb));
    CHECK_OK(hrt_hal_command_buffer_fill(cb, whole(buffer), 0, 1));
    CHECK_OK(hrt_hal_command_buffer_fill(
        cb, range(buffer, offsets[k], COUNT * 8ull), pattern, 8));
    CHECK_OK(hrt_hal_command_buffer_read(cb, whole(buffer), out));
    hrt_hal_command_buffer_finalize(cb);
    CHECK_OK(run(device, cb, NULL, 0));
    int wrong = 0;
    for (uint32_t i = 0; i < COUNT; ++i) {
      uint64_t value = 0;
      memcpy(&value, (char*)out + offsets[k] + i * 8ull, 8);
      wrong += value != pattern;
    }
    CHECK_EQ_INT(wrong, 0);
  }
}

TEST_SUITE(cuda_devices,
           TEST_CASE(device_info_describes_the_gpu),
           TEST_CASE(completions_run_off_the_submitting_thread),
           TEST_CASE(commands_round_trip_bytes),
           TEST_CASE(large_fills_write_every_element));
