#include "hal/local/local_driver.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "hal/local/local_device.h"

#define HRT_LOCAL_MAX_WORKERS 256

static hrt_status_t hrt_local_probe(void) { return HRT_OK; }

static hrt_status_t hrt_check_no_ordinal(const hrt_hal_device_uri_t* uri) {
  if (uri->has_ordinal && uri->ordinal != 0) {
    return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                           "driver '%s' has a single device (ordinal 0), not "
                           "%u",
                           uri->driver, uri->ordinal);
  }
  return HRT_OK;
}

static hrt_status_t hrt_local_sync_create(const hrt_hal_device_uri_t* uri,
                                          hrt_hal_device_t** out_device) {
  HRT_RETURN_IF_ERROR(hrt_check_no_ordinal(uri));
  HRT_RETURN_IF_ERROR(hrt_hal_device_uri_check_params(uri, NULL, 0));
  return hrt_local_device_create("local-sync", 0, "local-sync", out_device);
}

static uint32_t hrt_default_worker_count(void) {
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  if (online < 1) return 1;
  return online > HRT_LOCAL_MAX_WORKERS ? HRT_LOCAL_MAX_WORKERS
                                        : (uint32_t)online;
}

static hrt_status_t hrt_local_task_create(const hrt_hal_device_uri_t* uri,
                                          hrt_hal_device_t** out_device) {
  static const char* const known[] = {"workers"};
  HRT_RETURN_IF_ERROR(hrt_check_no_ordinal(uri));
  HRT_RETURN_IF_ERROR(hrt_hal_device_uri_check_params(uri, known, 1));
  uint32_t workers = hrt_default_worker_count();
  const char* text = hrt_hal_device_uri_param(uri, "workers");
  if (text) {
    char* end = NULL;
    errno = 0;
    long value = strtol(text, &end, 10);
    if (*text < '0' || *text > '9' || *end || errno || value < 1 ||
        value > HRT_LOCAL_MAX_WORKERS) {
      return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                             "local-task parameter workers='%s' must be an "
                             "integer in [1, %d]",
                             text, HRT_LOCAL_MAX_WORKERS);
    }
    workers = (uint32_t)value;
  }
  char canonical[64];
  snprintf(canonical, sizeof(canonical), "local-task?workers=%u", workers);
  return hrt_local_device_create("local-task", workers, canonical, out_device);
}

const hrt_hal_driver_t hrt_local_sync_driver = {
    .name = "local-sync",
    .probe = hrt_local_probe,
    .create_device = hrt_local_sync_create,
};

const hrt_hal_driver_t hrt_local_task_driver = {
    .name = "local-task",
    .probe = hrt_local_probe,
    .create_device = hrt_local_task_create,
};
