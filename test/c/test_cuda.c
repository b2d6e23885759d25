// The CUDA device end to end, against the fake driver library or, with
// HRT_TEST_REAL_CUDA=1, the real libcuda on a GPU (test/gpu/run.sh). The
// cases live in test/c/cuda/, a file per part of docs/cuda.md, and share
// cuda/cuda_fixture.h; this file runs them in this order.
#include "test.h"

extern const hrt_test_suite_t cuda_finding;      // finding_cuda.c
extern const hrt_test_suite_t cuda_devices;      // devices.c
extern const hrt_test_suite_t cuda_kernels;      // kernels.c
extern const hrt_test_suite_t cuda_traces;       // traces.c
extern const hrt_test_suite_t cuda_executables;  // executables.c
extern const hrt_test_suite_t cuda_failures;     // failures.c
extern const hrt_test_suite_t cuda_fake_driver;  // fake_driver.c
extern const hrt_test_suite_t cuda_memory;       // memory.c

// Last: nothing any section made is left.
TEST_SUITE(cuda_end, TEST_CASE(every_object_is_destroyed));

TEST_MAIN_SUITES(&cuda_finding, &cuda_devices, &cuda_kernels, &cuda_traces,
                 &cuda_executables, &cuda_failures, &cuda_fake_driver,
                 &cuda_memory, &cuda_end)
