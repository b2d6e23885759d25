// Drivers and device URIs.
//
// A URI names a driver and options: `local-sync`, `local-task`,
// `local-task?workers=4`, `cuda`, `cuda://1`, and `auto` (the first usable of
// cuda, local-task). Form: driver [ "://" ordinal ] [ "?" key=value { "&"
// key=value } ]. Drivers are stateless tables; any thread may use them.
#ifndef HRT_HAL_DRIVER_H_
#define HRT_HAL_DRIVER_H_

#include <stdbool.h>
#include <stdint.h>

#include "base/status.h"
#include "hal/device.h"

#define HRT_HAL_URI_MAX_PARAMS 8

typedef struct hrt_hal_device_uri_s {
  char driver[32];
  bool has_ordinal;
  uint32_t ordinal;
  uint32_t param_count;
  struct {
    char key[32];
    char value[64];
  } params[HRT_HAL_URI_MAX_PARAMS];
} hrt_hal_device_uri_t;

// INVALID_ARGUMENT quoting the URI and saying what is malformed.
hrt_status_t hrt_hal_device_uri_parse(
    const char* uri, hrt_hal_device_uri_t* out_uri) HRT_MUST_USE;
// The value of `key`, or NULL.
const char* hrt_hal_device_uri_param(const hrt_hal_device_uri_t* uri,
                                     const char* key);
// INVALID_ARGUMENT naming the first parameter not in `known[0..count)`, or
// one given twice.
hrt_status_t hrt_hal_device_uri_check_params(const hrt_hal_device_uri_t* uri,
                                             const char* const* known,
                                             int count) HRT_MUST_USE;

// A driver's run-time compiler of source kernels (CUDA: NVRTC).
typedef struct hrt_hal_compiler_info_s {
  const char* name;   // "nvrtc"; static
  int version_major;  // set when usable
  int version_minor;
} hrt_hal_compiler_info_t;

typedef struct hrt_hal_driver_s {
  const char* name;
  // HRT_OK when the driver can create devices here; otherwise a status
  // whose message is the reason (UNAVAILABLE for a missing library or GPU).
  hrt_status_t (*probe)(void);
  // NULL for drivers without a compiler. Fills `out_info->name` always, the
  // version when the compiler is usable, and returns HRT_OK then, or the
  // reason it is not (independent of `probe`: NVRTC needs no GPU).
  hrt_status_t (*probe_compiler)(hrt_hal_compiler_info_t* out_info);
  hrt_status_t (*create_device)(const hrt_hal_device_uri_t* uri,
                                hrt_hal_device_t** out_device);
} hrt_hal_driver_t;

// The drivers compiled in, in `auto` preference order. Static.
const hrt_hal_driver_t* const* hrt_hal_builtin_drivers(uint32_t* out_count);

// Parses `uri` and creates the device with the driver it names from
// `drivers[0..count)`; `auto` picks the first driver whose probe succeeds
// among those `auto` may use (cuda, then local-task). NOT_FOUND names an
// unknown driver and lists the known ones; a driver whose probe fails
// returns that probe status (UNAVAILABLE with the reason).
hrt_status_t hrt_hal_create_device(const hrt_hal_driver_t* const* drivers,
                                   uint32_t count, const char* uri,
                                   hrt_hal_device_t** out_device) HRT_MUST_USE;

#endif  // HRT_HAL_DRIVER_H_
