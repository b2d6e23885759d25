// The "cuda" driver: devices `cuda` (ordinal 0) and `cuda://N`.
//
// Its probe loads the CUDA driver library (cuda_symbols.h) and returns that
// cached outcome: HRT_OK, or UNAVAILABLE with the reason (library missing,
// driver too old, stub library, no device). `auto` therefore falls back to
// local-task wherever CUDA is not usable. The URI takes no parameters; an
// ordinal past the last device is INVALID_ARGUMENT.
#ifndef HRT_HAL_CUDA_CUDA_DRIVER_H_
#define HRT_HAL_CUDA_CUDA_DRIVER_H_

#include "hal/driver.h"

extern const hrt_hal_driver_t hrt_cuda_driver;

#endif  // HRT_HAL_CUDA_CUDA_DRIVER_H_
