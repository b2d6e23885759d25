// The CPU drivers.
//
// `local-sync`: the device's queue thread runs every workgroup itself.
// `local-task`: the queue thread spreads a dispatch's workgroups over a pool
//   of worker threads (`local-task?workers=N`, 1 <= N <= 256; default: the
//   number of online CPUs).
// Both complete asynchronously relative to the submitter: the queue thread is
// the device's completion thread.
#ifndef HRT_HAL_LOCAL_LOCAL_DRIVER_H_
#define HRT_HAL_LOCAL_LOCAL_DRIVER_H_

#include "hal/driver.h"

extern const hrt_hal_driver_t hrt_local_sync_driver;
extern const hrt_hal_driver_t hrt_local_task_driver;

#endif  // HRT_HAL_LOCAL_LOCAL_DRIVER_H_
