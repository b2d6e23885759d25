// Status values: HRT_OK (NULL) or an owned heap object carrying a canonical
// code and a formatted message.
//
// Ownership: a non-OK status is owned by whoever holds it and must be consumed
// exactly once, by hrt_status_free() or by handing it to a function that
// documents that it takes ownership. Statuses may move between threads.
// When the message cannot be allocated, a static out-of-memory status is
// returned instead; hrt_status_free() ignores it, so callers never care.
#ifndef HRT_BASE_STATUS_H_
#define HRT_BASE_STATUS_H_

#include <stdarg.h>

typedef enum hrt_status_code_e {
  HRT_STATUS_OK = 0,
  HRT_STATUS_CANCELLED,
  HRT_STATUS_INVALID_ARGUMENT,
  HRT_STATUS_DEADLINE_EXCEEDED,
  HRT_STATUS_NOT_FOUND,
  HRT_STATUS_FAILED_PRECONDITION,
  HRT_STATUS_RESOURCE_EXHAUSTED,
  HRT_STATUS_ABORTED,
  HRT_STATUS_OUT_OF_RANGE,
  HRT_STATUS_UNIMPLEMENTED,
  HRT_STATUS_INTERNAL,
  HRT_STATUS_UNAVAILABLE,
  HRT_STATUS_DATA_LOSS,
  HRT_STATUS_DEVICE_LOST,
  HRT_STATUS_CODE_COUNT_,
} hrt_status_code_t;

typedef struct hrt_status_s* hrt_status_t;
#define HRT_OK ((hrt_status_t)0)

#if defined(__GNUC__)
#define HRT_PRINTF(fmt_index, args_index) \
  __attribute__((format(printf, fmt_index, args_index)))
#define HRT_MUST_USE __attribute__((warn_unused_result))
#else
#define HRT_PRINTF(fmt_index, args_index)
#define HRT_MUST_USE
#endif

// The longest message a status holds; the rest of a longer one is cut.
#define HRT_STATUS_MAX_MESSAGE (64 * 1024)

// Creates a status with `code` (not OK) and a printf-style message.
hrt_status_t hrt_status_make(hrt_status_code_t code, const char* format, ...)
    HRT_PRINTF(2, 3) HRT_MUST_USE;
hrt_status_t hrt_status_makev(hrt_status_code_t code, const char* format,
                              va_list args) HRT_MUST_USE;

// Returns a new status with the same code whose message is `prefix: message`.
// Consumes `status`. Returns HRT_OK for HRT_OK.
hrt_status_t hrt_status_annotate(hrt_status_t status, const char* format, ...)
    HRT_PRINTF(2, 3) HRT_MUST_USE;

// Returns an independent copy (for example one per waiter of a failed
// semaphore). Does not consume `status`.
hrt_status_t hrt_status_clone(hrt_status_t status) HRT_MUST_USE;

hrt_status_code_t hrt_status_code(hrt_status_t status);
// Borrowed; valid until the status is freed. "" for HRT_OK.
const char* hrt_status_message(hrt_status_t status);
// "OK", "INVALID_ARGUMENT", ... (the names JavaScript sees as error.code).
const char* hrt_status_code_name(hrt_status_code_t code);

void hrt_status_free(hrt_status_t status);

// Returns from the calling function when `expr` yields a non-OK status.
#define HRT_RETURN_IF_ERROR(expr)                          \
  do {                                                     \
    hrt_status_t hrt_status_tmp_ = (expr);                 \
    if (hrt_status_tmp_ != HRT_OK) return hrt_status_tmp_; \
  } while (0)

#endif  // HRT_BASE_STATUS_H_
