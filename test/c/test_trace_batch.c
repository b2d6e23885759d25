// src/napi/js_trace_batch: the record encoding slot by slot, string
// interning, large data as external pool blocks, the invocation list, credit,
// reset and deinit, and allocation failure at every point of an append.
#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/block_pool.h"
#include "modules/sinks/tensor_stats.h"
#include "napi/js_trace_batch.h"
#include "test.h"

#define MIB ((size_t)1 << 20)

//===----------------------------------------------------------------------===//
// Allocation failure injection
//===----------------------------------------------------------------------===//

// The Makefile links this binary with malloc, calloc, realloc and
// aligned_alloc wrapped (-Wl,--wrap=...), so every allocation the encoder and
// the block pool make comes through here. While armed, allocation number
// `fail_at` (counted from 0 since arming) returns NULL; the others go to the
// real allocator (the sanitizer's, in a SANITIZE=1 build).
void* __real_malloc(size_t size);
void* __real_calloc(size_t count, size_t size);
void* __real_realloc(void* pointer, size_t size);
void* __real_aligned_alloc(size_t alignment, size_t size);

typedef enum {
  ALLOC_MALLOC,
  ALLOC_CALLOC,
  ALLOC_REALLOC,
  ALLOC_ALIGNED,
  ALLOC_KIND_COUNT,
} alloc_kind_t;

static struct {
  bool armed;
  long count;    // allocations since arming
  long fail_at;  // the one that fails
  bool injected;
  long injected_by_kind[ALLOC_KIND_COUNT];
} faults;

static bool fail_this_allocation(alloc_kind_t kind) {
  if (!faults.armed || faults.count++ != faults.fail_at) return false;
  faults.injected = true;
  ++faults.injected_by_kind[kind];
  return true;
}

void* __wrap_malloc(size_t size) {
  return fail_this_allocation(ALLOC_MALLOC) ? NULL : __real_malloc(size);
}
void* __wrap_calloc(size_t count, size_t size) {
  return fail_this_allocation(ALLOC_CALLOC) ? NULL : __real_calloc(count, size);
}
void* __wrap_realloc(void* pointer, size_t size) {
  return fail_this_allocation(ALLOC_REALLOC) ? NULL
                                             : __real_realloc(pointer, size);
}
void* __wrap_aligned_alloc(size_t alignment, size_t size) {
  return fail_this_allocation(ALLOC_ALIGNED)
             ? NULL
             : __real_aligned_alloc(alignment, size);
}

static void arm_failure_at(long fail_at) {
  faults.armed = true;
  faults.count = 0;
  faults.fail_at = fail_at;
  faults.injected = false;
}

static void disarm(void) { faults.armed = false; }

//===----------------------------------------------------------------------===//
// Reading records
//===----------------------------------------------------------------------===//

static double slot_at(const hrt_js_trace_batch_t* batch, size_t index) {
  double value;
  memcpy(&value, batch->records + index * 8, sizeof(value));
  return value;
}

static size_t slot_count_of(const hrt_js_trace_batch_t* batch) {
  return batch->size / 8;
}

// A position in a batch's records, in slots.
typedef struct {
  const hrt_js_trace_batch_t* batch;
  size_t at;
} cursor_t;

// The EXPECT_* macros check the slot(s) at the cursor and step past them;
// like CHECK, they record a failure and return from the calling function.
#define EXPECT_SLOT(cursor, expected)                                       \
  do {                                                                      \
    double want_ = (double)(expected);                                      \
    if ((cursor)->at >= slot_count_of((cursor)->batch)) {                   \
      fprintf(stderr, "%s:%d: slot %zu (%s) is past the end (%zu slots)\n", \
              __FILE__, __LINE__, (cursor)->at, #expected,                  \
              slot_count_of((cursor)->batch));                              \
      hrt_test_failed_ = 1;                                                 \
      return;                                                               \
    }                                                                       \
    double got_ = slot_at((cursor)->batch, (cursor)->at);                   \
    if (!(got_ == want_ || (isnan(got_) && isnan(want_)))) {                \
      fprintf(stderr, "%s:%d: slot %zu (%s): %.17g, expected %.17g\n",      \
              __FILE__, __LINE__, (cursor)->at, #expected, got_, want_);    \
      hrt_test_failed_ = 1;                                                 \
      return;                                                               \
    }                                                                       \
    ++(cursor)->at;                                                         \
  } while (0)

// A string slot: an index into the batch's strings that resolves to `text`.
#define EXPECT_STRING_SLOT(cursor, text)                                       \
  do {                                                                         \
    const char* want_ = (text);                                                \
    CHECK((cursor)->at < slot_count_of((cursor)->batch));                      \
    double got_ = slot_at((cursor)->batch, (cursor)->at);                      \
    int ok_ = got_ >= 0 && got_ == floor(got_) &&                              \
              got_ < (double)(cursor)->batch->string_count &&                  \
              strcmp(hrt_js_trace_batch_string((cursor)->batch, (size_t)got_), \
                     want_) == 0;                                              \
    if (!ok_) {                                                                \
      fprintf(stderr, "%s:%d: slot %zu: %.17g does not resolve to '%s'\n",     \
              __FILE__, __LINE__, (cursor)->at, got_, want_);                  \
      hrt_test_failed_ = 1;                                                    \
      return;                                                                  \
    }                                                                          \
    ++(cursor)->at;                                                            \
  } while (0)

// Inline bytes: `length` bytes equal to `data`, then zeros to a whole slot.
#define EXPECT_INLINE_BYTES(cursor, data, length)                            \
  do {                                                                       \
    size_t length_ = (size_t)(length);                                       \
    size_t slots_ = (length_ + 7) / 8;                                       \
    CHECK((cursor)->at + slots_ <= slot_count_of((cursor)->batch));          \
    const uint8_t* bytes_ = (cursor)->batch->records + (cursor)->at * 8;     \
    CHECK(length_ == 0 || memcmp(bytes_, (data), length_) == 0);             \
    for (size_t i_ = length_; i_ < slots_ * 8; ++i_) CHECK(bytes_[i_] == 0); \
    (cursor)->at += slots_;                                                  \
  } while (0)

static bool travels_inline(const hrt_trace_tensor_t* tensor) {
  return tensor->byte_length < HRT_JS_EXTERNAL_MIN_BYTES;
}

// Checks the trace record at the cursor, every slot, against the append that
// made it: string slots resolve to the strings given, stats equal
// hrt_tensor_stats_compute's, inline data is copied and padded with zeros,
// and large data is the next external (the first being `*next_external`),
// holding a copy of the tensor's bytes.
static void expect_trace(cursor_t* cursor, const char* key,
                         const hrt_trace_info_t* info, uint64_t dropped,
                         uint32_t count, const hrt_trace_tensor_t* tensors,
                         hrt_js_trace_contents_t contents,
                         size_t* next_external) {
  const hrt_js_trace_batch_t* batch = cursor->batch;
  EXPECT_SLOT(cursor, HRT_JS_TRACE_RECORD);
  EXPECT_SLOT(cursor, info->invocation);
  EXPECT_SLOT(cursor, info->sequence);
  EXPECT_STRING_SLOT(cursor, info->function);
  EXPECT_SLOT(cursor, info->op_index);
  EXPECT_SLOT(cursor, info->time_ns);
  EXPECT_SLOT(cursor, dropped);
  EXPECT_SLOT(cursor, info->recorded ? 1 : 0);
  EXPECT_STRING_SLOT(cursor, key);
  EXPECT_SLOT(cursor, count);
  EXPECT_SLOT(cursor, info->mode);
  for (uint32_t i = 0; i < count; ++i) {
    const hrt_trace_tensor_t* tensor = &tensors[i];
    EXPECT_STRING_SLOT(cursor, tensor->name);
    EXPECT_SLOT(cursor, tensor->element_type);
    EXPECT_SLOT(cursor, tensor->rank);
    for (uint32_t d = 0; d < tensor->rank; ++d) {
      EXPECT_SLOT(cursor, tensor->shape[d]);
    }
    if (contents.summary) {
      const hrt_hal_tensor_summary_t* summary = tensor->summary;
      EXPECT_SLOT(cursor, summary->count);
      EXPECT_SLOT(cursor, summary->nan_count);
      EXPECT_SLOT(cursor, summary->pos_inf_count);
      EXPECT_SLOT(cursor, summary->neg_inf_count);
      EXPECT_SLOT(cursor, summary->zero_count);
      EXPECT_SLOT(cursor, summary->min);
      EXPECT_SLOT(cursor, summary->max);
      EXPECT_SLOT(cursor, hrt_hal_tensor_summary_mean(summary));
      EXPECT_SLOT(cursor, hrt_hal_tensor_summary_l2(summary));
    }
    if (contents.stats) {
      hrt_tensor_stats_t stats;
      hrt_tensor_stats_compute(tensor, &stats);
      EXPECT_SLOT(cursor, stats.count);
      EXPECT_SLOT(cursor, stats.min);
      EXPECT_SLOT(cursor, stats.max);
      EXPECT_SLOT(cursor, stats.mean);
      EXPECT_SLOT(cursor, stats.nan_count);
      EXPECT_SLOT(cursor, stats.inf_count);
    }
    if (!contents.data) continue;
    EXPECT_SLOT(cursor, tensor->byte_length);
    if (travels_inline(tensor)) {
      EXPECT_SLOT(cursor, -1);
      EXPECT_INLINE_BYTES(cursor, tensor->data, tensor->byte_length);
      CHECK(batch->dtype_mask & (1u << tensor->element_type));
      continue;
    }
    size_t index = (*next_external)++;
    EXPECT_SLOT(cursor, index);
    CHECK(index < batch->external_count);
    const hrt_js_trace_external_t* external = &batch->externals[index];
    CHECK(external->data != NULL && external->data != tensor->data);
    CHECK_EQ_INT(external->byte_length, tensor->byte_length);
    CHECK_EQ_INT(external->element_type, tensor->element_type);
    CHECK(memcmp(external->data, tensor->data, tensor->byte_length) == 0);
    CHECK(hrt_block_pool_block_capacity(external->data) >= tensor->byte_length);
  }
}

static void expect_timing(cursor_t* cursor,
                          const hrt_dispatch_timing_t* event) {
  EXPECT_SLOT(cursor, HRT_JS_TIMING_RECORD);
  EXPECT_SLOT(cursor, event->invocation);
  EXPECT_SLOT(cursor, event->sequence);
  EXPECT_STRING_SLOT(cursor, event->function);
  EXPECT_SLOT(cursor, event->op_index);
  EXPECT_STRING_SLOT(cursor, event->kernel);
  EXPECT_STRING_SLOT(cursor, event->device);
  EXPECT_SLOT(cursor, event->start_ns);
  EXPECT_SLOT(cursor, event->duration_ns);
}

// Makes the extras and appends the trace, as the sink does.
static bool add_trace(hrt_js_trace_batch_t* batch, hrt_block_pool_t* pool,
                      const char* key, const hrt_trace_info_t* info,
                      uint64_t dropped, uint32_t count,
                      const hrt_trace_tensor_t* tensors,
                      hrt_js_trace_contents_t contents) {
  uint64_t credit = hrt_js_trace_bytes(key, info, count, tensors, contents);
  hrt_js_trace_extras_t* extras = NULL;
  if (!hrt_js_trace_extras_make(pool, true, info, count, tensors, contents,
                                &extras)) {
    return false;
  }
  return hrt_js_trace_batch_add_trace(batch, key, info, dropped, count, tensors,
                                      contents, extras, credit);
}

static size_t outstanding_blocks(hrt_block_pool_t* pool) {
  hrt_block_pool_stats_t stats;
  hrt_block_pool_stats(pool, &stats);
  return stats.outstanding_count;
}

static const hrt_js_trace_contents_t kData = {.stats = false, .data = true};
static const hrt_js_trace_contents_t kStats = {.stats = true, .data = false};
static const hrt_js_trace_contents_t kBoth = {.stats = true, .data = true};

//===----------------------------------------------------------------------===//
// Encoding
//===----------------------------------------------------------------------===//

// The record inline_trace_encodes_every_slot appends, slot by slot.
static void expect_inline_record(const hrt_js_trace_batch_t* batch,
                                 const float* logits, const int64_t* step,
                                 uint64_t credit) {
  cursor_t cursor = {batch, 0};
  // 11 header slots; logits: 3 + 2 dims + 2 + 3 for 20 bytes; step: 3 + 2 +
  // 1.
  CHECK_EQ_INT(batch->size, 27 * 8);
  EXPECT_SLOT(&cursor, 1);   // TRACE
  EXPECT_SLOT(&cursor, 70);  // invocation
  EXPECT_SLOT(&cursor, 7);   // sequence
  EXPECT_STRING_SLOT(&cursor, "model.predict");
  EXPECT_SLOT(&cursor, 3);
  EXPECT_SLOT(&cursor, 123456789);
  EXPECT_SLOT(&cursor, 2);  // dropped
  EXPECT_SLOT(&cursor, 0);  // recorded
  EXPECT_STRING_SLOT(&cursor, "probe");
  EXPECT_SLOT(&cursor, 2);  // tensors
  EXPECT_SLOT(&cursor, HRT_HAL_TRACE_FULL);
  EXPECT_STRING_SLOT(&cursor, "logits");
  EXPECT_SLOT(&cursor, HRT_HAL_ELEMENT_TYPE_F32);
  EXPECT_SLOT(&cursor, 2);  // rank
  EXPECT_SLOT(&cursor, 1);
  EXPECT_SLOT(&cursor, 5);
  EXPECT_SLOT(&cursor, 20);  // byteLength
  EXPECT_SLOT(&cursor, -1);  // inline
  EXPECT_INLINE_BYTES(&cursor, logits, 20);
  EXPECT_STRING_SLOT(&cursor, "step");
  EXPECT_SLOT(&cursor, HRT_HAL_ELEMENT_TYPE_I64);
  EXPECT_SLOT(&cursor, 0);  // rank 0: no dims
  EXPECT_SLOT(&cursor, 8);
  EXPECT_SLOT(&cursor, -1);
  EXPECT_INLINE_BYTES(&cursor, step, 8);
  CHECK_EQ_INT(cursor.at, 27);
  // The four strings, each once, in the order first used.
  CHECK_EQ_INT(batch->string_count, 4);
  CHECK(strcmp(hrt_js_trace_batch_string(batch, 0), "probe") == 0);
  CHECK(strcmp(hrt_js_trace_batch_string(batch, 1), "model.predict") == 0);
  CHECK(strcmp(hrt_js_trace_batch_string(batch, 2), "logits") == 0);
  CHECK(strcmp(hrt_js_trace_batch_string(batch, 3), "step") == 0);
  CHECK_EQ_INT(batch->text_size, sizeof("probe") + sizeof("model.predict") +
                                     sizeof("logits") + sizeof("step"));
  CHECK_EQ_INT(batch->dtype_mask, (1u << HRT_HAL_ELEMENT_TYPE_F32) |
                                      (1u << HRT_HAL_ELEMENT_TYPE_I64));
  CHECK_EQ_INT(batch->invocation_count, 1);
  CHECK_EQ_INT(batch->invocations[0], 70);
  CHECK_EQ_INT(batch->external_count, 0);
  CHECK_EQ_INT(batch->credit, credit);
  // The credit bounds what the trace added.
  CHECK(batch->size + batch->text_size <= credit);
  CHECK(!hrt_js_trace_batch_empty(batch));
}

static void inline_trace_encodes_every_slot(void) {
  hrt_block_pool_t* pool = NULL;
  CHECK_OK(hrt_block_pool_create(1 * MIB, &pool));
  const float logits[5] = {0.5f, -1.25f, 3.0f, 1e-3f, -7.0f};  // 20 bytes
  const int64_t logits_shape[2] = {1, 5};
  const int64_t step = -42;
  hrt_trace_tensor_t tensors[2] = {
      {"logits", HRT_HAL_ELEMENT_TYPE_F32, 2, logits_shape, logits,
       sizeof(logits), NULL, NULL},
      {"step", HRT_HAL_ELEMENT_TYPE_I64, 0, NULL, &step, sizeof(step), NULL,
       NULL},
  };
  const hrt_trace_info_t info = {7,  "model.predict",   3, 123456789,
                                 70, HRT_HAL_TRACE_FULL, false, NULL, false};
  uint64_t credit = hrt_js_trace_bytes("probe", &info, 2, tensors, kData);
  hrt_js_trace_extras_t* extras = (hrt_js_trace_extras_t*)&extras;
  bool needs_extras = hrt_js_trace_needs_extras(2, tensors, kData);
  bool made =
      hrt_js_trace_extras_make(pool, false, &info, 2, tensors, kData, &extras);
  hrt_js_trace_batch_t batch = {0};
  bool added = hrt_js_trace_batch_add_trace(&batch, "probe", &info, 2, 2,
                                            tensors, kData, extras, credit);
  if (made && added) expect_inline_record(&batch, logits, &step, credit);
  hrt_block_pool_stats_t stats;
  hrt_block_pool_stats(pool, &stats);
  hrt_js_trace_batch_deinit(&batch);
  hrt_block_pool_release(pool);
  CHECK(!needs_extras);  // small data only: nothing to make before the lock
  CHECK(made && extras == NULL);
  CHECK(added);
  CHECK_EQ_INT(stats.allocated_count + stats.reused_count, 0);
}

// The two records stats_slots_match_tensor_stats appends: `both` with
// {stats, data} for the first three tensors, `stats_only` with {stats} for
// all four.
static void expect_stats_records(const hrt_js_trace_batch_t* both,
                                 const hrt_js_trace_batch_t* stats_only,
                                 const hrt_trace_info_t* info,
                                 const hrt_trace_tensor_t* tensors) {
  size_t no_external = 0;
  cursor_t cursor = {both, 0};
  expect_trace(&cursor, "both", info, 0, 3, tensors, kBoth, &no_external);
  if (hrt_test_failed_) return;
  CHECK_EQ_INT(cursor.at, slot_count_of(both));
  // The stats slots of "activations" by value: NaN and +-Inf counted and
  // left out of min, max and mean.
  cursor_t stats = {both, 11 + 3 + 2};
  EXPECT_SLOT(&stats, 6);
  EXPECT_SLOT(&stats, -2.5);
  EXPECT_SLOT(&stats, 4.0);
  EXPECT_SLOT(&stats, 1.0);
  EXPECT_SLOT(&stats, 1);
  EXPECT_SLOT(&stats, 2);
  // "empty": no elements, so NaN min, max and mean.
  cursor_t empty = {both,
                    11 + (3 + 2 + 6 + 2 + 3) + (3 + 1 + 6 + 2 + 2) + (3 + 2)};
  EXPECT_SLOT(&empty, 0);
  EXPECT_SLOT(&empty, NAN);
  EXPECT_SLOT(&empty, NAN);
  EXPECT_SLOT(&empty, NAN);
  cursor = (cursor_t){stats_only, 0};
  expect_trace(&cursor, "stats", info, 0, 4, tensors, kStats, &no_external);
  if (hrt_test_failed_) return;
  // Name, dtype, rank, dims and six stats per tensor; no data slots.
  CHECK_EQ_INT(cursor.at, slot_count_of(stats_only));
  CHECK_EQ_INT(slot_count_of(stats_only),
               11 + (3 + 2 + 6) + (3 + 1 + 6) + (3 + 2 + 6) + (3 + 1 + 6));
}

static void stats_slots_match_tensor_stats(void) {
  hrt_block_pool_t* pool = NULL;
  CHECK_OK(hrt_block_pool_create(1 * MIB, &pool));
  const float activations[6] = {1.5f, NAN, -2.5f, INFINITY, 4.0f, -INFINITY};
  const int64_t activations_shape[2] = {2, 3};
  const int32_t counts[4] = {3, -7, 12, 0};
  const int64_t counts_shape[1] = {4};
  const int64_t empty_shape[2] = {0, 3};
  // 256 KiB: stats only, so the data travels nowhere.
  static float ramp[64 * 1024];
  for (size_t i = 0; i < 64 * 1024; ++i) ramp[i] = (float)i - 1000.0f;
  const int64_t ramp_shape[1] = {64 * 1024};
  hrt_trace_tensor_t tensors[4] = {
      {"activations", HRT_HAL_ELEMENT_TYPE_F32, 2, activations_shape,
       activations, sizeof(activations), NULL, NULL},
      {"counts", HRT_HAL_ELEMENT_TYPE_I32, 1, counts_shape, counts,
       sizeof(counts), NULL, NULL},
      {"empty", HRT_HAL_ELEMENT_TYPE_F32, 2, empty_shape, NULL, 0, NULL, NULL},
      {"ramp", HRT_HAL_ELEMENT_TYPE_F32, 1, ramp_shape, ramp, sizeof(ramp),
       NULL, NULL},
  };
  const hrt_trace_info_t info = {21,  "model.stats", 9,
                                 555, 210,           HRT_HAL_TRACE_FULL, false, NULL, false};
  hrt_js_trace_batch_t both = {0};
  hrt_js_trace_batch_t stats_only = {0};
  // {stats, data}: the first three tensors (the fourth would go external).
  bool added_both = add_trace(&both, pool, "both", &info, 0, 3, tensors, kBoth);
  // {stats}: all four, the large one included.
  bool needs_extras = hrt_js_trace_needs_extras(4, tensors, kStats);
  bool added_stats =
      add_trace(&stats_only, pool, "stats", &info, 0, 4, tensors, kStats);
  hrt_block_pool_stats_t pool_stats;
  hrt_block_pool_stats(pool, &pool_stats);
  if (added_both && added_stats) {
    expect_stats_records(&both, &stats_only, &info, tensors);
  }
  uint32_t both_mask = both.dtype_mask, stats_mask = stats_only.dtype_mask;
  size_t both_externals = both.external_count;
  size_t stats_externals = stats_only.external_count;
  hrt_js_trace_batch_deinit(&both);
  hrt_js_trace_batch_deinit(&stats_only);
  hrt_block_pool_release(pool);
  CHECK(added_both && added_stats);
  CHECK(needs_extras);
  CHECK_EQ_INT(both_mask, (1u << HRT_HAL_ELEMENT_TYPE_F32) |
                              (1u << HRT_HAL_ELEMENT_TYPE_I32));
  CHECK_EQ_INT(stats_mask, 0);  // no inline data
  CHECK_EQ_INT(both_externals, 0);
  CHECK_EQ_INT(stats_externals, 0);
  // Stats of large data need no copy of it.
  CHECK_EQ_INT(pool_stats.allocated_count + pool_stats.reused_count, 0);
}

// A summary trace's record carries each tensor's summary (mean and l2
// derived), no data and no stats, and needs no extras whatever its size.
static void summary_slots_carry_the_summaries(void) {
  hrt_block_pool_t* pool = NULL;
  CHECK_OK(hrt_block_pool_create(1 * MIB, &pool));
  const int64_t big_shape[1] = {1 << 20};
  const hrt_hal_tensor_summary_t summaries[2] = {
      {.count = 1 << 20,
       .nan_count = 2,
       .pos_inf_count = 3,
       .neg_inf_count = 4,
       .zero_count = 5,
       .min = -2.5,
       .max = 7,
       .sum = 12,
       .sum_squares = 81},
      {.count = 6,
       .nan_count = 6,
       .min = NAN,
       .max = NAN,
       .sum = NAN,
       .sum_squares = NAN},
  };
  const hrt_trace_tensor_t tensors[2] = {
      {.name = "big",
       .element_type = HRT_HAL_ELEMENT_TYPE_F32,
       .rank = 1,
       .shape = big_shape,
       .byte_length = 4u << 20,
       .summary = &summaries[0]},
      {.name = "nans",
       .element_type = HRT_HAL_ELEMENT_TYPE_F16,
       .rank = 0,
       .byte_length = 12,
       .summary = &summaries[1]},
  };
  const hrt_trace_info_t info = {5,  "model.health",       2, 77,
                                 50, HRT_HAL_TRACE_SUMMARY, false, NULL, false};
  const hrt_js_trace_contents_t contents = {.summary = true};
  bool needs_extras = hrt_js_trace_needs_extras(2, tensors, contents);
  uint64_t credit = hrt_js_trace_bytes("h", &info, 2, tensors, contents);
  hrt_js_trace_batch_t batch = {0};
  bool added = add_trace(&batch, pool, "h", &info, 0, 2, tensors, contents);
  cursor_t cursor = {&batch, 0};
  size_t next_external = 0;
  if (added) {
    expect_trace(&cursor, "h", &info, 0, 2, tensors, contents, &next_external);
  }
  size_t slots = cursor.at, total = slot_count_of(&batch);
  size_t externals = batch.external_count;
  double mean = slot_at(&batch, 11 + 4 + 7);
  hrt_js_trace_batch_deinit(&batch);
  hrt_block_pool_release(pool);
  CHECK(added);
  CHECK(!needs_extras);
  // 11 header slots, big: 3 + 1 dim + 9, nans: 3 + 9.
  CHECK_EQ_INT(slots, 36);
  CHECK_EQ_INT(total, 36);
  CHECK_EQ_INT(externals, 0);
  CHECK(mean == 12.0 / (double)((1 << 20) - 9));
  CHECK(total * 8 <= credit);
}

// The two records large_data_travels_as_a_pool_block appends: "wide" with
// all three tensors, then "again" with the first one.
static void expect_large_records(const hrt_js_trace_batch_t* batch,
                                 const hrt_trace_info_t* info,
                                 const hrt_trace_tensor_t* tensors,
                                 uint64_t credit) {
  cursor_t cursor = {batch, 0};
  EXPECT_SLOT(&cursor, 1);
  EXPECT_SLOT(&cursor, 110);
  EXPECT_SLOT(&cursor, 11);
  EXPECT_STRING_SLOT(&cursor, "model.load");
  EXPECT_SLOT(&cursor, 0);
  EXPECT_SLOT(&cursor, 5);
  EXPECT_SLOT(&cursor, 0);
  EXPECT_SLOT(&cursor, 0);  // recorded
  EXPECT_STRING_SLOT(&cursor, "wide");
  EXPECT_SLOT(&cursor, 3);
  EXPECT_SLOT(&cursor, HRT_HAL_TRACE_FULL);
  EXPECT_STRING_SLOT(&cursor, "at_limit");
  EXPECT_SLOT(&cursor, HRT_HAL_ELEMENT_TYPE_F32);
  EXPECT_SLOT(&cursor, 1);
  EXPECT_SLOT(&cursor, 16 * 1024);
  EXPECT_SLOT(&cursor, 64 * 1024);
  EXPECT_SLOT(&cursor, 0);  // external 0
  EXPECT_STRING_SLOT(&cursor, "under_limit");
  EXPECT_SLOT(&cursor, HRT_HAL_ELEMENT_TYPE_U8);
  EXPECT_SLOT(&cursor, 1);
  EXPECT_SLOT(&cursor, 64 * 1024 - 1);
  EXPECT_SLOT(&cursor, 64 * 1024 - 1);
  EXPECT_SLOT(&cursor, -1);  // one byte short of the limit: inline
  EXPECT_INLINE_BYTES(&cursor, tensors[1].data, tensors[1].byte_length);
  EXPECT_STRING_SLOT(&cursor, "larger");
  EXPECT_SLOT(&cursor, HRT_HAL_ELEMENT_TYPE_I16);
  EXPECT_SLOT(&cursor, 2);
  EXPECT_SLOT(&cursor, 250);
  EXPECT_SLOT(&cursor, 200);
  EXPECT_SLOT(&cursor, 100000);
  EXPECT_SLOT(&cursor, 1);  // external 1
  size_t first_record_end = cursor.at;
  size_t next_external = 2;
  expect_trace(&cursor, "again", info, 0, 1, tensors, kData, &next_external);
  if (hrt_test_failed_) return;
  CHECK_EQ_INT(slot_at(batch, cursor.at - 1), 2);
  CHECK_EQ_INT(cursor.at, slot_count_of(batch));
  // The first record's externals, by value.
  CHECK_EQ_INT(batch->external_count, 3);
  for (size_t i = 0; i < 3; ++i) {
    const hrt_trace_tensor_t* source = &tensors[i == 1 ? 2 : 0];
    const hrt_js_trace_external_t* external = &batch->externals[i];
    CHECK(external->data != NULL && external->data != source->data);
    CHECK_EQ_INT(external->byte_length, source->byte_length);
    CHECK_EQ_INT(external->element_type, source->element_type);
    CHECK(memcmp(external->data, source->data, source->byte_length) == 0);
    CHECK(hrt_block_pool_block_capacity(external->data) >= source->byte_length);
  }
  CHECK(batch->externals[0].data != batch->externals[2].data);
  // Only inline data counts in the mask.
  CHECK_EQ_INT(batch->dtype_mask, 1u << HRT_HAL_ELEMENT_TYPE_U8);
  CHECK_EQ_INT(batch->invocation_count, 1);
  CHECK_EQ_INT(batch->invocations[0], 110);
  // The first trace's credit bounds its records, strings and externals.
  CHECK(first_record_end * 8 + sizeof("wide") + sizeof("model.load") +
            sizeof("at_limit") + sizeof("under_limit") + sizeof("larger") +
            tensors[0].byte_length + tensors[2].byte_length +
            2 * sizeof(hrt_js_trace_external_t) <=
        credit);
}

static void large_data_travels_as_a_pool_block(void) {
  hrt_block_pool_t* pool = NULL;
  CHECK_OK(hrt_block_pool_create(4 * MIB, &pool));
  static float at_limit[16 * 1024];  // exactly 64 KiB: external
  static uint8_t under_limit[64 * 1024 - 1];
  static int16_t larger[50000];
  for (size_t i = 0; i < 16 * 1024; ++i) at_limit[i] = (float)i * 0.5f;
  for (size_t i = 0; i < sizeof(under_limit); ++i) {
    under_limit[i] = (uint8_t)(i * 7);
  }
  for (size_t i = 0; i < 50000; ++i) larger[i] = (int16_t)(i * 3 - 60000);
  const int64_t at_limit_shape[1] = {16 * 1024};
  const int64_t under_limit_shape[1] = {sizeof(under_limit)};
  const int64_t larger_shape[2] = {250, 200};
  hrt_trace_tensor_t tensors[3] = {
      {"at_limit", HRT_HAL_ELEMENT_TYPE_F32, 1, at_limit_shape, at_limit,
       sizeof(at_limit), NULL, NULL},
      {"under_limit", HRT_HAL_ELEMENT_TYPE_U8, 1, under_limit_shape,
       under_limit, sizeof(under_limit), NULL, NULL},
      {"larger", HRT_HAL_ELEMENT_TYPE_I16, 2, larger_shape, larger,
       sizeof(larger), NULL, NULL},
  };
  const hrt_trace_info_t info = {11, "model.load", 0,
                                 5,  110,          HRT_HAL_TRACE_FULL, false, NULL, false};
  hrt_js_trace_batch_t batch = {0};
  uint64_t credit = hrt_js_trace_bytes("wide", &info, 3, tensors, kData);
  hrt_js_trace_extras_t* extras = NULL;
  bool needs_extras = hrt_js_trace_needs_extras(3, tensors, kData);
  bool made =
      hrt_js_trace_extras_make(pool, true, &info, 3, tensors, kData, &extras);
  size_t outstanding_after_make = outstanding_blocks(pool);
  bool added =
      made && hrt_js_trace_batch_add_trace(&batch, "wide", &info, 0, 3, tensors,
                                           kData, extras, credit);
  // A second trace of the same invocation: its external is number 2.
  bool added_again =
      added && add_trace(&batch, pool, "again", &info, 0, 1, tensors, kData);
  size_t outstanding_after_add = outstanding_blocks(pool);
  void* taken = NULL;
  void* entry_before_take = NULL;
  if (added_again) {
    expect_large_records(&batch, &info, tensors, credit);
    entry_before_take = batch.externals[1].data;
    taken = hrt_js_trace_batch_take_external(&batch, 1);
  }
  void* entry_after_take = batch.externals ? batch.externals[1].data : NULL;
  size_t outstanding_after_take = outstanding_blocks(pool);
  hrt_js_trace_batch_reset(&batch);
  // What the batch held went back on reset; the taken block is the taker's.
  size_t outstanding_after_reset = outstanding_blocks(pool);
  bool taken_intact = taken && memcmp(taken, larger, sizeof(larger)) == 0;
  hrt_block_pool_give_back(taken);
  size_t outstanding_after_give_back = outstanding_blocks(pool);
  hrt_js_trace_batch_deinit(&batch);
  hrt_block_pool_release(pool);
  CHECK(needs_extras);
  CHECK(made && extras != NULL);
  CHECK(added && added_again);
  CHECK_EQ_INT(outstanding_after_make, 2);
  CHECK_EQ_INT(outstanding_after_add, 3);
  CHECK(taken != NULL && taken == entry_before_take);
  CHECK(entry_after_take == NULL);
  CHECK_EQ_INT(outstanding_after_take, 3);
  CHECK_EQ_INT(outstanding_after_reset, 1);
  CHECK(taken_intact);
  CHECK_EQ_INT(outstanding_after_give_back, 0);
  CHECK_EQ_INT(hrt_live_count(HRT_LIVE_BLOCK_POOL), 0);
}

//===----------------------------------------------------------------------===//
// Strings and invocations
//===----------------------------------------------------------------------===//

// The records timings_and_traces_share_strings appends: a trace, then a
// timing record, twelve times.
static void expect_interleaved_records(const hrt_js_trace_batch_t* batch,
                                       const hrt_trace_info_t* infos,
                                       const hrt_trace_tensor_t* tensors,
                                       const hrt_dispatch_timing_t* events) {
  cursor_t cursor = {batch, 0};
  size_t no_external = 0;
  for (uint32_t i = 0; i < 12; ++i) {
    expect_trace(&cursor, "probe", &infos[i], i, 1, &tensors[i], kData,
                 &no_external);
    if (hrt_test_failed_) return;
    size_t timing_start = cursor.at;
    expect_timing(&cursor, &events[i]);
    if (hrt_test_failed_) return;
    // The literal layout of one timing record.
    CHECK_EQ_INT(slot_at(batch, timing_start), 2);
    CHECK_EQ_INT(slot_at(batch, timing_start + 1), (100 + i / 3) * 10);
    CHECK_EQ_INT(slot_at(batch, timing_start + 2), 100 + i / 3);
    CHECK_EQ_INT(slot_at(batch, timing_start + 4), i);
    CHECK_EQ_INT(slot_at(batch, timing_start + 7), 5000 + i);
    CHECK_EQ_INT(slot_at(batch, timing_start + 8), 10 + i);
  }
  CHECK_EQ_INT(cursor.at, slot_count_of(batch));
}

static void timings_and_traces_share_strings(void) {
  hrt_block_pool_t* pool = NULL;
  CHECK_OK(hrt_block_pool_create(1 * MIB, &pool));
  hrt_js_trace_batch_t batch = {0};
  int32_t values[12][2];
  const int64_t shape[1] = {2};
  hrt_trace_tensor_t tensors[12];
  hrt_trace_info_t infos[12];
  hrt_dispatch_timing_t events[12];
  uint64_t credit = 0;
  bool added = true;
  for (uint32_t i = 0; added && i < 12; ++i) {
    uint64_t sequence = 100 + i / 3;  // three traces per invocation
    values[i][0] = (int32_t)i;
    values[i][1] = -(int32_t)i;
    tensors[i] =
        (hrt_trace_tensor_t){"x",       HRT_HAL_ELEMENT_TYPE_I32, 1,    shape,
                             values[i], sizeof(values[i]),        NULL, NULL};
    infos[i] = (hrt_trace_info_t){sequence, "model.step",  i,
                                  1000 + i, sequence * 10, HRT_HAL_TRACE_FULL, false, NULL, false};
    events[i] = (hrt_dispatch_timing_t){sequence,     "model.step", i,
                                        "exe.matmul", "local-task", 5000 + i,
                                        10 + i,       sequence * 10, false};
    credit += hrt_js_trace_bytes("probe", &infos[i], 1, &tensors[i], kData) +
              hrt_js_timing_bytes(&events[i]);
    added =
        add_trace(&batch, pool, "probe", &infos[i], i, 1, &tensors[i], kData) &&
        hrt_js_trace_batch_add_timing(&batch, &events[i],
                                      hrt_js_timing_bytes(&events[i]));
  }
  if (added) expect_interleaved_records(&batch, infos, tensors, events);
  // Five distinct strings, whatever the number of records.
  size_t string_count = batch.string_count;
  size_t text_size = batch.text_size;
  size_t invocation_count = batch.invocation_count;
  uint64_t invocations[4] = {0};
  for (size_t i = 0; i < 4 && i < batch.invocation_count; ++i) {
    invocations[i] = batch.invocations[i];
  }
  uint64_t batch_credit = batch.credit;
  hrt_js_trace_batch_deinit(&batch);
  hrt_block_pool_release(pool);
  CHECK(added);
  CHECK_EQ_INT(string_count, 5);
  CHECK_EQ_INT(text_size, sizeof("probe") + sizeof("model.step") + sizeof("x") +
                              sizeof("exe.matmul") + sizeof("local-task"));
  // One entry per invocation, in order, however many records each has.
  CHECK_EQ_INT(invocation_count, 4);
  for (size_t i = 0; i < 4; ++i) CHECK_EQ_INT(invocations[i], (100 + i) * 10);
  CHECK_EQ_INT(batch_credit, credit);
}

// Trace i of hundreds_of_strings_all_resolve: key "key-<i>", one of four
// functions, and one-byte tensors "in-<i>" and "out-<i>"; three strings of
// its own each.
enum { kManyTraces = 300 };

static const char* many_trace(int i, hrt_trace_info_t* out_info,
                              hrt_trace_tensor_t out_tensors[2]) {
  static char keys[kManyTraces][16], inputs[kManyTraces][16],
      outputs[kManyTraces][16];
  static const char* functions[4] = {"model.a", "model.b", "model.c",
                                     "model.d"};
  static const uint8_t byte = 0xAB;
  static const int64_t shape[1] = {1};
  snprintf(keys[i], sizeof(keys[i]), "key-%d", i);
  snprintf(inputs[i], sizeof(inputs[i]), "in-%d", i);
  snprintf(outputs[i], sizeof(outputs[i]), "out-%d", i);
  *out_info = (hrt_trace_info_t){(uint64_t)i, functions[i % 4],  0, 0,
                                 (uint64_t)i, HRT_HAL_TRACE_FULL, false, NULL, false};
  out_tensors[0] = (hrt_trace_tensor_t){
      inputs[i], HRT_HAL_ELEMENT_TYPE_U8, 1, shape, &byte, 1, NULL, NULL};
  out_tensors[1] = (hrt_trace_tensor_t){
      outputs[i], HRT_HAL_ELEMENT_TYPE_U8, 1, shape, &byte, 1, NULL, NULL};
  return keys[i];
}

// Every string slot of the two passes resolves to its own string.
static void expect_many_records(const hrt_js_trace_batch_t* batch) {
  cursor_t cursor = {batch, 0};
  size_t no_external = 0;
  for (int pass = 0; pass < 2; ++pass) {
    for (int i = 0; i < kManyTraces; ++i) {
      hrt_trace_info_t info;
      hrt_trace_tensor_t tensors[2];
      const char* key = many_trace(i, &info, tensors);
      expect_trace(&cursor, key, &info, 0, 2, tensors, kData, &no_external);
      if (hrt_test_failed_) return;
    }
  }
  CHECK_EQ_INT(cursor.at, slot_count_of(batch));
}

static void hundreds_of_strings_all_resolve(void) {
  hrt_block_pool_t* pool = NULL;
  CHECK_OK(hrt_block_pool_create(1 * MIB, &pool));
  hrt_js_trace_batch_t batch = {0};
  bool added = true;
  size_t count_after_first_pass = 0;
  // Two passes over the same strings: the second adds none.
  for (int pass = 0; pass < 2; ++pass) {
    for (int i = 0; added && i < kManyTraces; ++i) {
      hrt_trace_info_t info;
      hrt_trace_tensor_t tensors[2];
      const char* key = many_trace(i, &info, tensors);
      added = add_trace(&batch, pool, key, &info, 0, 2, tensors, kData);
    }
    if (pass == 0) count_after_first_pass = batch.string_count;
  }
  if (added) expect_many_records(&batch);
  // Every string once.
  bool distinct = true;
  for (size_t i = 0; i < batch.string_count; ++i) {
    for (size_t j = i + 1; j < batch.string_count; ++j) {
      if (strcmp(hrt_js_trace_batch_string(&batch, i),
                 hrt_js_trace_batch_string(&batch, j)) == 0) {
        distinct = false;
      }
    }
  }
  size_t string_count = batch.string_count;
  size_t slot_count = batch.slot_count;
  size_t invocation_count = batch.invocation_count;
  hrt_js_trace_batch_deinit(&batch);
  hrt_block_pool_release(pool);
  CHECK(added);
  CHECK_EQ_INT(count_after_first_pass, 3 * kManyTraces + 4);
  CHECK_EQ_INT(string_count, 3 * kManyTraces + 4);
  CHECK(distinct);
  // The string table grew well past its first size to hold them.
  CHECK(slot_count >= 2 * string_count);
  // Invocations 0..299 twice: each run of an invocation is one entry.
  CHECK_EQ_INT(invocation_count, 2 * kManyTraces);
}

//===----------------------------------------------------------------------===//
// Allocation failure
//===----------------------------------------------------------------------===//

static void* copy_of(const void* data, size_t length) {
  if (length == 0) return NULL;
  void* copy = malloc(length);
  if (copy) memcpy(copy, data, length);
  return copy;
}

// Makes `out` a copy of `batch` with buffers of its own, of the same
// capacities, sharing its external blocks. False when out of memory.
static bool batch_clone(const hrt_js_trace_batch_t* batch,
                        hrt_js_trace_batch_t* out) {
  *out = *batch;
  out->records = copy_of(batch->records, batch->capacity);
  out->text = copy_of(batch->text, batch->text_capacity);
  out->offsets =
      copy_of(batch->offsets, batch->string_capacity * sizeof(size_t));
  out->slots = copy_of(batch->slots, batch->slot_count * sizeof(size_t));
  out->externals = copy_of(
      batch->externals, batch->external_capacity * sizeof(*batch->externals));
  out->invocations = copy_of(batch->invocations,
                             batch->invocation_capacity * sizeof(uint64_t));
  return (out->records || !batch->capacity) &&
         (out->text || !batch->text_capacity) &&
         (out->offsets || !batch->string_capacity) &&
         (out->slots || !batch->slot_count) &&
         (out->externals || !batch->external_capacity) &&
         (out->invocations || !batch->invocation_capacity);
}

// Frees a clone. Its externals before `first_own` are the original's; those
// from `first_own` on were appended to the clone and go back to the pool.
static void batch_clone_free(hrt_js_trace_batch_t* clone, size_t first_own) {
  for (size_t i = first_own; i < clone->external_count; ++i) {
    hrt_block_pool_give_back(hrt_js_trace_batch_take_external(clone, i));
  }
  clone->external_count = 0;
  hrt_js_trace_batch_deinit(clone);
}

static bool same_bytes(const void* a, const void* b, size_t length) {
  return length == 0 || memcmp(a, b, length) == 0;
}

// Checks that `batch` holds exactly what `before` does (capacities aside).
static void expect_same_contents(const hrt_js_trace_batch_t* batch,
                                 const hrt_js_trace_batch_t* before) {
  CHECK_EQ_INT(batch->size, before->size);
  CHECK_EQ_INT(batch->string_count, before->string_count);
  CHECK_EQ_INT(batch->text_size, before->text_size);
  CHECK_EQ_INT(batch->external_count, before->external_count);
  CHECK_EQ_INT(batch->invocation_count, before->invocation_count);
  CHECK_EQ_INT(batch->dtype_mask, before->dtype_mask);
  CHECK_EQ_INT(batch->credit, before->credit);
  CHECK(same_bytes(batch->records, before->records, batch->size));
  CHECK(same_bytes(batch->text, before->text, batch->text_size));
  CHECK(same_bytes(batch->offsets, before->offsets,
                   batch->string_count * sizeof(size_t)));
  CHECK(same_bytes(batch->externals, before->externals,
                   batch->external_count * sizeof(*batch->externals)));
  CHECK(same_bytes(batch->invocations, before->invocations,
                   batch->invocation_count * sizeof(uint64_t)));
}

// Checks that the batch finds each of its strings at its own index: a clone
// interns every string again (as the three strings of a timing record) and
// must neither add one nor resolve it elsewhere.
static void expect_every_string_found(const hrt_js_trace_batch_t* batch) {
  hrt_js_trace_batch_t probe;
  bool cloned = batch_clone(batch, &probe);
  size_t missing = SIZE_MAX;
  for (size_t i = 0; cloned && i < batch->string_count; ++i) {
    const char* text = hrt_js_trace_batch_string(batch, i);
    hrt_dispatch_timing_t event = {0, text, 0, text, text, 0, 0, 0, false};
    size_t at = slot_count_of(&probe);
    if (!hrt_js_trace_batch_add_timing(&probe, &event, 0) ||
        probe.string_count != batch->string_count ||
        slot_at(&probe, at + 3) != (double)i ||
        slot_at(&probe, at + 5) != (double)i ||
        slot_at(&probe, at + 6) != (double)i) {
      missing = i;
      break;
    }
  }
  batch_clone_free(&probe, batch->external_count);
  CHECK(cloned);
  if (missing != SIZE_MAX) {
    fprintf(stderr, "string %zu ('%s') is not found at its index\n", missing,
            hrt_js_trace_batch_string(batch, missing));
  }
  CHECK(missing == SIZE_MAX);
}

// One append of the failure scenario: a trace or a timing record.
typedef struct {
  bool timing;
  char key[32];
  char function[32];
  char kernel[32];
  hrt_trace_info_t info;
  hrt_dispatch_timing_t event;
  uint64_t dropped;
  uint32_t count;
  hrt_trace_tensor_t tensors[96];
  char names[96][32];
  int64_t shapes[96];
  hrt_js_trace_contents_t contents;
} append_t;

enum { kFailureAppends = 36, kFailureResetAt = 24 };

// Appends vary so that, across the scenario, each allocation point is
// reached: the first append to an empty (or freshly reset) batch, growth of
// the records, strings, offsets and string table (rehash), the list of
// names made on the heap (more than 16 tensors), extras for stats and for
// large data, and pool blocks for large data.
static void append_make(int i, append_t* append) {
  static uint8_t large[70000];
  static const uint8_t small[16] = {1, 2,  3,  4,  5,  6,  7,  8,
                                    9, 10, 11, 12, 13, 14, 15, 16};
  static const uint32_t counts[7] = {2, 17, 0, 40, 5, 1, 96};
  static const hrt_js_trace_contents_t contents[3] = {
      {.stats = false, .data = true},
      {.stats = true, .data = true},
      {.stats = true, .data = false},
  };
  for (size_t b = 0; b < sizeof(large); ++b) large[b] = (uint8_t)(b * 13 + 5);
  memset(append, 0, sizeof(*append));
  uint64_t sequence = 1000 + (uint64_t)i / 2;
  snprintf(append->function, sizeof(append->function), "model.fn%d", i % 3);
  if (i % 4 == 3) {
    append->timing = true;
    snprintf(append->kernel, sizeof(append->kernel), "exe.k%d", i % 5);
    append->event = (hrt_dispatch_timing_t){
        sequence,     append->function, (uint32_t)i, append->kernel,
        "local-task", i * 100,          7,           sequence + 1, false};
    return;
  }
  snprintf(append->key, sizeof(append->key), "key-%d", i % 6);
  append->info =
      (hrt_trace_info_t){sequence,        append->function, (uint32_t)i,
                         (int64_t)i * 10, sequence + 1,     HRT_HAL_TRACE_FULL, false, NULL, false};
  append->dropped = (uint64_t)(i % 3);
  append->count = counts[i % 7];
  append->contents = contents[i % 3];
  for (uint32_t j = 0; j < append->count; ++j) {
    // A few names repeat across appends; the rest are new.
    if (j < 3) {
      snprintf(append->names[j], sizeof(append->names[j]), "shared.%u", j);
    } else {
      snprintf(append->names[j], sizeof(append->names[j]), "n%d.%u", i, j);
    }
    bool is_large = j == 1 && i % 2 == 0;
    uint64_t length = is_large ? sizeof(large) : (uint64_t)((i + j) % 16);
    append->shapes[j] = (int64_t)length;
    append->tensors[j] =
        (hrt_trace_tensor_t){append->names[j],
                             HRT_HAL_ELEMENT_TYPE_U8,
                             1,
                             &append->shapes[j],
                             is_large ? (const void*)large : (const void*)small,
                             length,
                             NULL,
                             NULL};
  }
}

static bool append_run(const append_t* append, hrt_js_trace_batch_t* batch,
                       hrt_block_pool_t* pool) {
  if (append->timing) {
    return hrt_js_trace_batch_add_timing(batch, &append->event,
                                         hrt_js_timing_bytes(&append->event));
  }
  return add_trace(batch, pool, append->key, &append->info, append->dropped,
                   append->count, append->tensors, append->contents);
}

// Checks the record a successful append added to `before`'s contents.
static void expect_appended(const hrt_js_trace_batch_t* batch,
                            const append_t* append,
                            const hrt_js_trace_batch_t* before) {
  cursor_t cursor = {batch, slot_count_of(before)};
  size_t next_external = before->external_count;
  uint64_t invocation;
  if (append->timing) {
    expect_timing(&cursor, &append->event);
    invocation = append->event.invocation;
  } else {
    expect_trace(&cursor, append->key, &append->info, append->dropped,
                 append->count, append->tensors, append->contents,
                 &next_external);
    invocation = append->info.invocation;
  }
  if (hrt_test_failed_) return;
  CHECK_EQ_INT(cursor.at, slot_count_of(batch));
  CHECK_EQ_INT(batch->external_count, next_external);
  // What was there before is untouched.
  CHECK(same_bytes(batch->records, before->records, before->size));
  CHECK(same_bytes(batch->externals, before->externals,
                   before->external_count * sizeof(*batch->externals)));
  bool same_invocation =
      before->invocation_count > 0 &&
      before->invocations[before->invocation_count - 1] == invocation;
  CHECK_EQ_INT(batch->invocation_count,
               before->invocation_count + (same_invocation ? 0 : 1));
  CHECK_EQ_INT(batch->invocations[batch->invocation_count - 1], invocation);
  uint64_t credit =
      append->timing
          ? hrt_js_timing_bytes(&append->event)
          : hrt_js_trace_bytes(append->key, &append->info, append->count,
                               append->tensors, append->contents);
  CHECK_EQ_INT(batch->credit, before->credit + credit);
}

// Checks a batch after a failed append: exactly as `before` (of which it is
// a clone), the copies made for the append back in the pool, every string
// still found, and the same append going through when retried.
static void expect_failure_harmless(hrt_js_trace_batch_t* batch,
                                    const hrt_js_trace_batch_t* before,
                                    const append_t* append,
                                    hrt_block_pool_t* pool,
                                    size_t outstanding) {
  expect_same_contents(batch, before);
  if (hrt_test_failed_) return;
  CHECK_EQ_INT(outstanding_blocks(pool), outstanding);
  expect_every_string_found(batch);
  if (hrt_test_failed_) return;
  CHECK(append_run(append, batch, pool));
  expect_appended(batch, append, before);
}

static void failed_appends_leave_the_batch_as_it_was(void) {
  hrt_block_pool_t* pool = NULL;
  // No cache: every large trace allocates its copy, a point that can fail.
  CHECK_OK(hrt_block_pool_create(0, &pool));
  hrt_js_trace_batch_t batch = {0};
  static append_t append;
  long injected = 0;
  memset(faults.injected_by_kind, 0, sizeof(faults.injected_by_kind));
  for (int i = 0; i < kFailureAppends; ++i) {
    if (i == kFailureResetAt) hrt_js_trace_batch_reset(&batch);
    append_make(i, &append);
    // Each attempt starts from a clone of the batch as it is, so that the
    // allocations of every attempt are the same ones: allocation 0, 1, 2, ...
    // fails in turn, until an attempt makes fewer and sees no failure.
    size_t outstanding = outstanding_blocks(pool);
    for (long fail_at = 0;; ++fail_at) {
      hrt_js_trace_batch_t trial;
      CHECK(batch_clone(&batch, &trial));
      arm_failure_at(fail_at);
      bool added = append_run(&append, &trial, pool);
      disarm();
      if (faults.injected && !added) {
        expect_failure_harmless(&trial, &batch, &append, pool, outstanding);
      }
      batch_clone_free(&trial, batch.external_count);
      if (hrt_test_failed_) return;
      if (!faults.injected) {
        if (!added) fprintf(stderr, "append %d failed by itself\n", i);
        CHECK(added);
        break;
      }
      // Every allocation of an append is needed: none may fail unnoticed.
      if (added) fprintf(stderr, "append %d ignored failure %ld\n", i, fail_at);
      CHECK(!added);
      ++injected;
    }
    CHECK_EQ_INT(outstanding_blocks(pool), outstanding);
    // Now for real, with nothing failing.
    hrt_js_trace_batch_t before;
    CHECK(batch_clone(&batch, &before));
    size_t externals_before = batch.external_count;
    bool added = append_run(&append, &batch, pool);
    if (added) expect_appended(&batch, &append, &before);
    batch_clone_free(&before, externals_before);
    CHECK(added);
    if (hrt_test_failed_) return;
    CHECK_EQ_INT(outstanding_blocks(pool),
                 outstanding + (batch.external_count - externals_before));
  }
  expect_every_string_found(&batch);
  hrt_js_trace_batch_deinit(&batch);
  size_t outstanding_after_deinit = outstanding_blocks(pool);
  hrt_block_pool_release(pool);
  CHECK_EQ_INT(outstanding_after_deinit, 0);
  CHECK(injected > 0);
  // Each kind of allocation was made to fail somewhere: the names list
  // (malloc), extras and the string table (calloc), buffer growth (realloc)
  // and pool blocks (aligned_alloc).
  for (int kind = 0; kind < ALLOC_KIND_COUNT; ++kind) {
    if (faults.injected_by_kind[kind] == 0) {
      fprintf(stderr, "no failure injected into allocation kind %d\n", kind);
    }
    CHECK(faults.injected_by_kind[kind] > 0);
  }
}

//===----------------------------------------------------------------------===//
// Reset and deinit
//===----------------------------------------------------------------------===//

// The one record in a batch after reset_keeps_buffers_and_empties_the_batch
// reuses it: nothing of what the batch held before shows.
static void expect_new_record(const hrt_js_trace_batch_t* batch,
                              const hrt_trace_info_t* info,
                              const hrt_trace_tensor_t* tensor) {
  cursor_t cursor = {batch, 0};
  size_t no_external = 0;
  expect_trace(&cursor, "new-key", info, 3, 1, tensor, kData, &no_external);
  if (hrt_test_failed_) return;
  CHECK_EQ_INT(cursor.at, slot_count_of(batch));
  CHECK_EQ_INT(batch->string_count, 3);
  CHECK(strcmp(hrt_js_trace_batch_string(batch, 0), "new-key") == 0);
  CHECK(strcmp(hrt_js_trace_batch_string(batch, 1), "new.fn") == 0);
  CHECK(strcmp(hrt_js_trace_batch_string(batch, 2), "new") == 0);
  CHECK_EQ_INT(batch->invocation_count, 1);
  CHECK_EQ_INT(batch->invocations[0], 90);
  CHECK_EQ_INT(batch->dtype_mask, 1u << HRT_HAL_ELEMENT_TYPE_U8);
  CHECK_EQ_INT(batch->external_count, 0);
  CHECK_EQ_INT(batch->credit,
               hrt_js_trace_bytes("new-key", info, 1, tensor, kData));
}

static void reset_keeps_buffers_and_empties_the_batch(void) {
  hrt_block_pool_t* pool = NULL;
  CHECK_OK(hrt_block_pool_create(4 * MIB, &pool));
  hrt_js_trace_batch_t batch = {0};
  // Resetting or freeing an untouched batch does nothing.
  hrt_js_trace_batch_reset(&batch);
  hrt_js_trace_batch_deinit(&batch);
  const hrt_js_trace_batch_t zero = {0};
  bool untouched = memcmp(&batch, &zero, sizeof(batch)) == 0 &&
                   hrt_js_trace_batch_empty(&batch);

  // 0xFF bytes where the reused batch's padding will go.
  uint8_t ones[24];
  memset(ones, 0xFF, sizeof(ones));
  static uint8_t large[100000];
  memset(large, 0x3C, sizeof(large));
  const int64_t ones_shape[1] = {24};
  const int64_t large_shape[1] = {sizeof(large)};
  hrt_trace_tensor_t old_tensors[3] = {
      {"old", HRT_HAL_ELEMENT_TYPE_U8, 1, ones_shape, ones, sizeof(ones), NULL,
       NULL},
      {"kept", HRT_HAL_ELEMENT_TYPE_U8, 1, large_shape, large, sizeof(large),
       NULL, NULL},
      {"taken", HRT_HAL_ELEMENT_TYPE_U8, 1, large_shape, large, sizeof(large),
       NULL, NULL},
  };
  const hrt_trace_info_t old_info = {5, "old.fn", 1, 2, 50, HRT_HAL_TRACE_FULL, false, NULL, false};
  const hrt_dispatch_timing_t old_event = {6,        "old.fn", 0, "old.kernel",
                                           "device", 1,        2, 60, false};
  bool added_old =
      add_trace(&batch, pool, "old-key", &old_info, 0, 3, old_tensors, kData) &&
      hrt_js_trace_batch_add_timing(&batch, &old_event, 64);
  void* taken = added_old ? hrt_js_trace_batch_take_external(&batch, 1) : NULL;
  size_t outstanding_before_reset = outstanding_blocks(pool);
  const hrt_js_trace_batch_t before = batch;
  hrt_js_trace_batch_reset(&batch);
  const hrt_js_trace_batch_t after = batch;
  size_t outstanding_after_reset = outstanding_blocks(pool);
  hrt_block_pool_give_back(taken);

  // Reused: the same layout, 17 bytes of data, so 7 bytes of padding where
  // the 0xFF bytes were.
  uint8_t seventeen[17];
  for (int i = 0; i < 17; ++i) seventeen[i] = (uint8_t)(i + 1);
  const int64_t seventeen_shape[1] = {17};
  hrt_trace_tensor_t new_tensor = {
      "new", HRT_HAL_ELEMENT_TYPE_U8, 1, seventeen_shape, seventeen, 17, NULL,
      NULL};
  const hrt_trace_info_t new_info = {9, "new.fn", 4, 8, 90, HRT_HAL_TRACE_FULL, false, NULL, false};
  bool added_new =
      add_trace(&batch, pool, "new-key", &new_info, 3, 1, &new_tensor, kData);
  if (added_new) expect_new_record(&batch, &new_info, &new_tensor);
  // The buffers are the same ones, unchanged in size.
  bool reused_buffers =
      batch.records == before.records && batch.capacity == before.capacity;
  hrt_js_trace_batch_deinit(&batch);
  bool zero_after_deinit = memcmp(&batch, &zero, sizeof(batch)) == 0;

  // A batch that grew past 1 MiB gives its buffers back on reset.
  static uint8_t chunk[60 * 1024];
  memset(chunk, 0x11, sizeof(chunk));
  const int64_t chunk_shape[1] = {sizeof(chunk)};
  hrt_trace_tensor_t chunk_tensor = {
      "chunk", HRT_HAL_ELEMENT_TYPE_U8, 1,    chunk_shape,
      chunk,   sizeof(chunk),           NULL, NULL};
  bool added_chunks = true;
  for (int i = 0; added_chunks && i < 20; ++i) {
    added_chunks = add_trace(&batch, pool, "chunk-key", &new_info, 0, 1,
                             &chunk_tensor, kData);
  }
  size_t grown_capacity = batch.capacity;
  hrt_js_trace_batch_reset(&batch);
  bool freed = memcmp(&batch, &zero, sizeof(batch)) == 0;
  // And is usable again.
  bool added_after_shrink =
      add_trace(&batch, pool, "new-key", &new_info, 3, 1, &new_tensor, kData);
  if (added_after_shrink) expect_new_record(&batch, &new_info, &new_tensor);
  hrt_js_trace_batch_deinit(&batch);
  size_t outstanding_at_end = outstanding_blocks(pool);
  hrt_block_pool_release(pool);

  CHECK(untouched);
  CHECK(added_old);
  CHECK(taken != NULL);
  CHECK_EQ_INT(before.external_count, 2);
  CHECK_EQ_INT(outstanding_before_reset, 2);
  // Empty, with every buffer kept.
  CHECK(hrt_js_trace_batch_empty(&after));
  CHECK_EQ_INT(after.size, 0);
  CHECK_EQ_INT(after.string_count, 0);
  CHECK_EQ_INT(after.text_size, 0);
  CHECK_EQ_INT(after.external_count, 0);
  CHECK_EQ_INT(after.invocation_count, 0);
  CHECK_EQ_INT(after.dtype_mask, 0);
  CHECK_EQ_INT(after.credit, 0);
  CHECK(after.records == before.records && after.capacity == before.capacity);
  CHECK(after.text == before.text &&
        after.text_capacity == before.text_capacity);
  CHECK(after.offsets == before.offsets &&
        after.string_capacity == before.string_capacity);
  CHECK(after.slots == before.slots && after.slot_count == before.slot_count);
  CHECK(after.externals == before.externals &&
        after.external_capacity == before.external_capacity);
  CHECK(after.invocations == before.invocations &&
        after.invocation_capacity == before.invocation_capacity);
  // The block left in the batch went back; the taken one was the taker's.
  CHECK_EQ_INT(outstanding_after_reset, 1);
  CHECK(added_new);
  CHECK(reused_buffers);
  CHECK(zero_after_deinit);
  CHECK(added_chunks);
  CHECK(grown_capacity > 1 * MIB);
  CHECK(freed);
  CHECK(added_after_shrink);
  CHECK_EQ_INT(outstanding_at_end, 0);
  CHECK_EQ_INT(hrt_live_count(HRT_LIVE_BLOCK_POOL), 0);
}

TEST_MAIN(TEST_CASE(inline_trace_encodes_every_slot),
          TEST_CASE(stats_slots_match_tensor_stats),
          TEST_CASE(summary_slots_carry_the_summaries),
          TEST_CASE(large_data_travels_as_a_pool_block),
          TEST_CASE(timings_and_traces_share_strings),
          TEST_CASE(hundreds_of_strings_all_resolve),
          TEST_CASE(failed_appends_leave_the_batch_as_it_was),
          TEST_CASE(reset_keeps_buffers_and_empties_the_batch),
          TEST_CASE(every_object_is_destroyed))
