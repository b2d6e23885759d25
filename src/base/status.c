#include "base/status.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct hrt_status_s {
  hrt_status_code_t code;
  char message[];
};

// Returned when a status itself cannot be allocated; never freed.
static struct {
  hrt_status_code_t code;
  char message[32];
} hrt_oom_status = {HRT_STATUS_RESOURCE_EXHAUSTED, "out of host memory"};

static hrt_status_t hrt_status_oom(void) {
  return (hrt_status_t)(void*)&hrt_oom_status;
}

static const char* const hrt_status_code_names[HRT_STATUS_CODE_COUNT_] = {
    "OK",
    "CANCELLED",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "FAILED_PRECONDITION",
    "RESOURCE_EXHAUSTED",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "DEVICE_LOST",
};

const char* hrt_status_code_name(hrt_status_code_t code) {
  if ((unsigned)code >= HRT_STATUS_CODE_COUNT_) return "UNKNOWN";
  return hrt_status_code_names[code];
}

static hrt_status_t hrt_status_from_text(hrt_status_code_t code,
                                         const char* text, size_t length) {
  if (code == HRT_STATUS_OK) code = HRT_STATUS_INTERNAL;
  struct hrt_status_s* status = malloc(sizeof(*status) + length + 1);
  if (!status) return hrt_status_oom();
  status->code = code;
  memcpy(status->message, text, length);
  status->message[length] = 0;
  return status;
}

hrt_status_t hrt_status_makev(hrt_status_code_t code, const char* format,
                              va_list args) {
  if (code == HRT_STATUS_OK) code = HRT_STATUS_INTERNAL;
  va_list measure;
  va_copy(measure, args);
  int needed = vsnprintf(NULL, 0, format, measure);
  va_end(measure);
  size_t length = needed < 0 ? 0 : (size_t)needed;
  if (length > HRT_STATUS_MAX_MESSAGE) length = HRT_STATUS_MAX_MESSAGE;
  struct hrt_status_s* status = malloc(sizeof(*status) + length + 1);
  if (!status) return hrt_status_oom();
  status->code = code;
  status->message[0] = 0;
  if (needed > 0) vsnprintf(status->message, length + 1, format, args);
  return status;
}

hrt_status_t hrt_status_make(hrt_status_code_t code, const char* format, ...) {
  va_list args;
  va_start(args, format);
  hrt_status_t status = hrt_status_makev(code, format, args);
  va_end(args);
  return status;
}

hrt_status_t hrt_status_annotate(hrt_status_t status, const char* format, ...) {
  if (status == HRT_OK) return HRT_OK;
  va_list args;
  va_start(args, format);
  hrt_status_t prefix = hrt_status_makev(status->code, format, args);
  va_end(args);
  hrt_status_t result =
      hrt_status_make(status->code, "%s: %s", prefix->message, status->message);
  hrt_status_free(prefix);
  hrt_status_free(status);
  return result;
}

hrt_status_t hrt_status_clone(hrt_status_t status) {
  if (status == HRT_OK) return HRT_OK;
  if (status == hrt_status_oom()) return status;
  return hrt_status_from_text(status->code, status->message,
                              strlen(status->message));
}

hrt_status_code_t hrt_status_code(hrt_status_t status) {
  return status ? status->code : HRT_STATUS_OK;
}

const char* hrt_status_message(hrt_status_t status) {
  return status ? status->message : "";
}

void hrt_status_free(hrt_status_t status) {
  if (status && status != hrt_status_oom()) free(status);
}
