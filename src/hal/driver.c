#include "hal/driver.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hal/cuda/cuda_driver.h"
#include "hal/local/local_driver.h"

static const hrt_hal_driver_t* const hrt_builtin_drivers[] = {
    &hrt_cuda_driver,
    &hrt_local_sync_driver,
    &hrt_local_task_driver,
};

// The drivers `auto` may pick, in preference order.
static const char* const hrt_auto_preference[] = {"cuda", "local-task"};

const hrt_hal_driver_t* const* hrt_hal_builtin_drivers(uint32_t* out_count) {
  *out_count = sizeof(hrt_builtin_drivers) / sizeof(hrt_builtin_drivers[0]);
  return hrt_builtin_drivers;
}

// Copies [begin, end) into `out` (size `capacity`); false if it does not fit.
static bool hrt_copy_token(const char* begin, const char* end, char* out,
                           size_t capacity) {
  size_t length = (size_t)(end - begin);
  if (length >= capacity) return false;
  memcpy(out, begin, length);
  out[length] = 0;
  return true;
}

static hrt_status_t hrt_uri_error(const char* uri, const char* what) {
  return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                         "malformed device URI '%s': %s", uri, what);
}

static hrt_status_t hrt_parse_params(const char* uri, const char* query,
                                     hrt_hal_device_uri_t* out_uri) {
  while (*query) {
    const char* end = strchr(query, '&');
    if (!end) end = query + strlen(query);
    const char* equals = memchr(query, '=', (size_t)(end - query));
    if (!equals || equals == query) {
      return hrt_uri_error(uri, "parameters must be key=value");
    }
    if (out_uri->param_count == HRT_HAL_URI_MAX_PARAMS) {
      return hrt_uri_error(uri, "too many parameters");
    }
    uint32_t index = out_uri->param_count++;
    if (!hrt_copy_token(query, equals, out_uri->params[index].key,
                        sizeof(out_uri->params[index].key)) ||
        !hrt_copy_token(equals + 1, end, out_uri->params[index].value,
                        sizeof(out_uri->params[index].value))) {
      return hrt_uri_error(uri, "parameter too long");
    }
    query = *end ? end + 1 : end;
  }
  return HRT_OK;
}

hrt_status_t hrt_hal_device_uri_parse(const char* uri,
                                      hrt_hal_device_uri_t* out_uri) {
  hrt_hal_device_uri_t parsed;
  memset(&parsed, 0, sizeof(parsed));
  const char* query = strchr(uri, '?');
  const char* head_end = query ? query : uri + strlen(uri);
  const char* separator = strstr(uri, "://");
  if (separator && separator > head_end) separator = NULL;
  const char* name_end = separator ? separator : head_end;
  if (name_end == uri) return hrt_uri_error(uri, "no driver name");
  for (const char* c = uri; c < name_end; ++c) {
    if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '-')) {
      // "cuda:0" is a common slip for "cuda://0".
      if (*c == ':' && c > uri && c[1] >= '0' && c[1] <= '9' &&
          strspn(c + 1, "0123456789") == strlen(c + 1)) {
        return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                               "malformed device URI '%s': did you mean "
                               "'%.*s://%s'?",
                               uri, (int)(c - uri), uri, c + 1);
      }
      return hrt_uri_error(
          uri, "driver names use lowercase letters, digits and '-'");
    }
  }
  if (!hrt_copy_token(uri, name_end, parsed.driver, sizeof(parsed.driver))) {
    return hrt_uri_error(uri, "driver name too long");
  }
  if (separator) {
    const char* digits = separator + 3;
    char* end = NULL;
    errno = 0;
    unsigned long ordinal = strtoul(digits, &end, 10);
    if (digits == head_end || end != head_end || *digits < '0' ||
        *digits > '9' || errno || ordinal > 1024) {
      return hrt_uri_error(uri, "the device ordinal after '://' must be an "
                                "integer in [0, 1024]");
    }
    parsed.has_ordinal = true;
    parsed.ordinal = (uint32_t)ordinal;
  }
  if (query) HRT_RETURN_IF_ERROR(hrt_parse_params(uri, query + 1, &parsed));
  *out_uri = parsed;
  return HRT_OK;
}

const char* hrt_hal_device_uri_param(const hrt_hal_device_uri_t* uri,
                                     const char* key) {
  for (uint32_t i = 0; i < uri->param_count; ++i) {
    if (strcmp(uri->params[i].key, key) == 0) return uri->params[i].value;
  }
  return NULL;
}

hrt_status_t hrt_hal_device_uri_check_params(const hrt_hal_device_uri_t* uri,
                                             const char* const* known,
                                             int count) {
  for (uint32_t i = 0; i < uri->param_count; ++i) {
    bool found = false;
    for (int k = 0; k < count && !found; ++k) {
      found = strcmp(uri->params[i].key, known[k]) == 0;
    }
    if (!found) {
      return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                             "driver '%s' has no parameter '%s'", uri->driver,
                             uri->params[i].key);
    }
    for (uint32_t j = 0; j < i; ++j) {
      if (strcmp(uri->params[j].key, uri->params[i].key) == 0) {
        return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                               "driver '%s' parameter '%s' is given twice",
                               uri->driver, uri->params[i].key);
      }
    }
  }
  return HRT_OK;
}

static const hrt_hal_driver_t* hrt_find_driver(
    const hrt_hal_driver_t* const* drivers, uint32_t count, const char* name) {
  for (uint32_t i = 0; i < count; ++i) {
    if (strcmp(drivers[i]->name, name) == 0) return drivers[i];
  }
  return NULL;
}

static hrt_status_t hrt_unknown_driver(const hrt_hal_driver_t* const* drivers,
                                       uint32_t count, const char* name,
                                       const char* uri) {
  char known[256] = "";
  size_t used = 0;
  for (uint32_t i = 0; i < count && used < sizeof(known); ++i) {
    int n = snprintf(known + used, sizeof(known) - used, "%s%s",
                     i ? ", " : "", drivers[i]->name);
    if (n > 0) used += (size_t)n;
  }
  return hrt_status_make(HRT_STATUS_NOT_FOUND,
                         "unknown driver '%s' in device URI '%s'; known "
                         "drivers: %s, auto",
                         name, uri, known);
}

hrt_status_t hrt_hal_create_device(const hrt_hal_driver_t* const* drivers,
                                   uint32_t count, const char* uri,
                                   hrt_hal_device_t** out_device) {
  hrt_hal_device_uri_t parsed;
  HRT_RETURN_IF_ERROR(hrt_hal_device_uri_parse(uri, &parsed));
  const hrt_hal_driver_t* driver = NULL;
  if (strcmp(parsed.driver, "auto") == 0) {
    if (parsed.has_ordinal || parsed.param_count) {
      return hrt_uri_error(uri, "'auto' takes no ordinal or parameters");
    }
    size_t choices = sizeof(hrt_auto_preference) / sizeof(char*);
    for (size_t i = 0; i < choices && !driver; ++i) {
      const hrt_hal_driver_t* candidate =
          hrt_find_driver(drivers, count, hrt_auto_preference[i]);
      if (!candidate) continue;
      hrt_status_t probe = candidate->probe();
      if (probe == HRT_OK) driver = candidate;
      hrt_status_free(probe);
    }
    if (!driver) {
      return hrt_status_make(HRT_STATUS_UNAVAILABLE,
                             "no driver is usable for device URI 'auto'");
    }
    snprintf(parsed.driver, sizeof(parsed.driver), "%s", driver->name);
  } else {
    driver = hrt_find_driver(drivers, count, parsed.driver);
    if (!driver) return hrt_unknown_driver(drivers, count, parsed.driver, uri);
    HRT_RETURN_IF_ERROR(driver->probe());
  }
  return driver->create_device(&parsed, out_device);
}
