// Fuzz target: the trace batch encoder (src/napi/js_trace_batch.h), driven
// the way the JS sink (src/napi/js_sink.c) drives it.
//
// The input is a program of operations on two batches sharing one block
// pool: the batch being appended to and its empty spare. Operations append
// a trace (up to 40 tensors of any dtype, rank and size, with stats, data or
// both, names from a small shared set or from the input), append a timing,
// take external blocks and give them back later (what JavaScript does with
// them), hand the batch over (decode all of it, reset it, swap it with the
// spare) or reset it. An append may be made to fail at its n-th allocation.
//
// Checked after every operation:
// - a failed append leaves the batch exactly as it was;
// - an append writes exactly the record its arguments describe: every slot,
//   string indices that resolve to the strings given, stats equal to
//   hrt_tensor_stats_compute's, inline bytes padded with zeros, external
//   blocks holding copies; its credit bounds the bytes it added;
// - the batch's strings are distinct (as many as the distinct strings
//   appended since the last reset), its invocation list is the run-length
//   list of its records' invocations, and the pool's outstanding blocks are
//   the externals not yet given back;
// - a batch handed over decodes, as lib/trace_batch.js reads it, to exactly
//   its size, with its externals in record order and its dtype mask exact,
//   and is empty after its reset.
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "base/block_pool.h"
#include "base/live.h"
#include "fuzz.h"
#include "hal/buffer_view.h"
#include "modules/sinks/tensor_stats.h"
#include "napi/js_trace_batch.h"

//===----------------------------------------------------------------------===//
// Allocation failure
//===----------------------------------------------------------------------===//

// The Makefile links this target with malloc, calloc, realloc and
// aligned_alloc wrapped. While g_fail_countdown is not negative, it counts
// allocations down and the one that reaches zero returns NULL.
void* __real_malloc(size_t size);
void* __real_calloc(size_t count, size_t size);
void* __real_realloc(void* pointer, size_t size);
void* __real_aligned_alloc(size_t alignment, size_t size);

static long g_fail_countdown = -1;

static bool fail_now(void) {
  return g_fail_countdown >= 0 && g_fail_countdown-- == 0;
}

void* __wrap_malloc(size_t size) {
  return fail_now() ? NULL : __real_malloc(size);
}
void* __wrap_calloc(size_t count, size_t size) {
  return fail_now() ? NULL : __real_calloc(count, size);
}
void* __wrap_realloc(void* pointer, size_t size) {
  return fail_now() ? NULL : __real_realloc(pointer, size);
}
void* __wrap_aligned_alloc(size_t alignment, size_t size) {
  return fail_now() ? NULL : __real_aligned_alloc(alignment, size);
}

//===----------------------------------------------------------------------===//
// Reading the input
//===----------------------------------------------------------------------===//

typedef struct {
  const uint8_t* data;
  size_t size;
  size_t at;
} input_t;

// 0 once the input is used up.
static uint8_t take_u8(input_t* input) {
  return input->at < input->size ? input->data[input->at++] : 0;
}

static uint32_t take_u16(input_t* input) {
  uint32_t low = take_u8(input);
  return low | (uint32_t)take_u8(input) << 8;
}

//===----------------------------------------------------------------------===//
// Model: what the checks expect of a batch
//===----------------------------------------------------------------------===//

#define FUZZ_MAX_TENSORS 40
#define FUZZ_MAX_TAKEN 4096
// Tensor bytes one input may ask for (larger requests get one element),
// which keeps a run in the milliseconds.
#define FUZZ_MAX_DATA_BYTES ((uint64_t)512 << 10)

typedef struct {
  hrt_js_trace_batch_t batch;
  // The distinct strings appended since the last reset (owned copies).
  char** strings;
  size_t string_count;
  // The contents of each trace record, in order (a timing is {false,
  // false} and is told apart by its record type).
  hrt_js_trace_contents_t* records;
  size_t record_count;
} model_t;

typedef struct {
  hrt_block_pool_t* pool;
  model_t batches[2];           // [0] is appended to, [1] is the spare
  void* taken[FUZZ_MAX_TAKEN];  // external blocks taken, not given back
  size_t taken_count;
  uint64_t data_bytes;  // tensor bytes made so far
} state_t;

static void* checked_alloc(size_t size) {
  void* pointer = __real_malloc(size ? size : 1);
  FUZZ_CHECK(pointer != NULL);
  return pointer;
}

static void model_note_string(model_t* model, const char* text) {
  for (size_t i = 0; i < model->string_count; ++i) {
    if (strcmp(model->strings[i], text) == 0) return;
  }
  char** grown = __real_realloc(
      model->strings, (model->string_count + 1) * sizeof(*model->strings));
  FUZZ_CHECK(grown != NULL);
  model->strings = grown;
  size_t length = strlen(text) + 1;
  model->strings[model->string_count] = checked_alloc(length);
  memcpy(model->strings[model->string_count++], text, length);
}

static void model_note_record(model_t* model,
                              hrt_js_trace_contents_t contents) {
  hrt_js_trace_contents_t* grown = __real_realloc(
      model->records, (model->record_count + 1) * sizeof(*model->records));
  FUZZ_CHECK(grown != NULL);
  model->records = grown;
  model->records[model->record_count++] = contents;
}

static void model_clear(model_t* model) {
  for (size_t i = 0; i < model->string_count; ++i) free(model->strings[i]);
  free(model->strings);
  free(model->records);
  model->strings = NULL;
  model->string_count = 0;
  model->records = NULL;
  model->record_count = 0;
}

//===----------------------------------------------------------------------===//
// Decoding records, as lib/trace_batch.js reads them
//===----------------------------------------------------------------------===//

// One tensor of a trace record. String and dtype fields are checked to be
// valid indices when decoded.
typedef struct {
  size_t name;
  size_t dtype;
  size_t rank;
  double dims[HRT_HAL_MAX_RANK];
  double stats[6];     // with stats: count, min, max, mean, NaNs, infinities
  double byte_length;  // with data
  double where;        // -1: inline, from slot `inline_slot`; else external
  size_t inline_slot;
} decoded_tensor_t;

typedef struct {
  double type;
  double invocation;
  double sequence;
  size_t function;
  double op;
  double time;     // TRACE: time; TIMING: start
  double dropped;  // TRACE: dropped; TIMING: duration
  size_t key;      // TRACE
  size_t count;
  decoded_tensor_t tensors[FUZZ_MAX_TENSORS];
  size_t kernel;  // TIMING
  size_t device;
} decoded_record_t;

typedef struct {
  const hrt_js_trace_batch_t* batch;
  size_t at;  // in slots
} cursor_t;

static double next_slot(cursor_t* cursor) {
  FUZZ_CHECK(cursor->at < cursor->batch->size / 8);
  double value;
  memcpy(&value, cursor->batch->records + cursor->at++ * 8, sizeof(value));
  return value;
}

static size_t next_index(cursor_t* cursor, size_t limit) {
  double value = next_slot(cursor);
  FUZZ_CHECK(value >= 0 && value < (double)limit && value == floor(value));
  return (size_t)value;
}

static size_t next_string(cursor_t* cursor) {
  return next_index(cursor, cursor->batch->string_count);
}

// Decodes the record at the cursor; `contents` is what its targets asked
// for (the JS side knows it; the record does not say).
static void decode_record(cursor_t* cursor, hrt_js_trace_contents_t contents,
                          decoded_record_t* out) {
  const hrt_js_trace_batch_t* batch = cursor->batch;
  out->type = next_slot(cursor);
  FUZZ_CHECK(out->type == HRT_JS_TRACE_RECORD ||
             out->type == HRT_JS_TIMING_RECORD);
  out->invocation = next_slot(cursor);
  out->sequence = next_slot(cursor);
  out->function = next_string(cursor);
  out->op = next_slot(cursor);
  if (out->type == HRT_JS_TIMING_RECORD) {
    out->kernel = next_string(cursor);
    out->device = next_string(cursor);
    out->time = next_slot(cursor);
    out->dropped = next_slot(cursor);
    out->count = 0;
    return;
  }
  out->time = next_slot(cursor);
  out->dropped = next_slot(cursor);
  FUZZ_CHECK(next_slot(cursor) == 0);  // recorded: never, here
  out->key = next_string(cursor);
  out->count = next_index(cursor, FUZZ_MAX_TENSORS + 1);
  FUZZ_CHECK(next_slot(cursor) == HRT_HAL_TRACE_FULL);  // only full traces
  for (size_t i = 0; i < out->count; ++i) {
    decoded_tensor_t* tensor = &out->tensors[i];
    tensor->name = next_string(cursor);
    tensor->dtype = next_index(cursor, HRT_HAL_ELEMENT_TYPE_COUNT_);
    tensor->rank = next_index(cursor, HRT_HAL_MAX_RANK + 1);
    for (size_t d = 0; d < tensor->rank; ++d) {
      tensor->dims[d] = next_slot(cursor);
    }
    for (int s = 0; contents.stats && s < 6; ++s) {
      tensor->stats[s] = next_slot(cursor);
    }
    if (!contents.data) continue;
    tensor->byte_length = next_slot(cursor);
    tensor->where = next_slot(cursor);
    if (tensor->where != -1) {
      FUZZ_CHECK(tensor->where >= 0 &&
                 tensor->where < (double)batch->external_count);
      continue;
    }
    FUZZ_CHECK(tensor->byte_length >= 0 &&
               tensor->byte_length < HRT_JS_EXTERNAL_MIN_BYTES);
    tensor->inline_slot = cursor->at;
    cursor->at += (size_t)(tensor->byte_length + 7) / 8;
    FUZZ_CHECK(cursor->at <= batch->size / 8);
  }
}

// Decodes a whole batch knowing only each record's contents: it must end
// exactly at the batch's size, with externals in record order, the
// invocation list made of the records' invocations and the exact dtype
// mask.
static void check_decodes(const model_t* model) {
  const hrt_js_trace_batch_t* batch = &model->batch;
  cursor_t cursor = {batch, 0};
  size_t externals = 0, invocations = 0, records = 0;
  uint32_t dtype_mask = 0;
  decoded_record_t record;
  while (cursor.at < batch->size / 8) {
    FUZZ_CHECK(records < model->record_count);
    hrt_js_trace_contents_t contents = model->records[records++];
    decode_record(&cursor, contents, &record);
    if (invocations == 0 ||
        (double)batch->invocations[invocations - 1] != record.invocation) {
      FUZZ_CHECK(invocations < batch->invocation_count);
      FUZZ_CHECK((double)batch->invocations[invocations++] ==
                 record.invocation);
    }
    for (size_t i = 0; contents.data && i < record.count; ++i) {
      const decoded_tensor_t* tensor = &record.tensors[i];
      if (tensor->where == -1) {
        dtype_mask |= 1u << tensor->dtype;
        continue;
      }
      FUZZ_CHECK(tensor->where == (double)externals++);
      FUZZ_CHECK((double)batch->externals[(size_t)tensor->where].byte_length ==
                 tensor->byte_length);
    }
  }
  FUZZ_CHECK(records == model->record_count);
  FUZZ_CHECK(externals == batch->external_count);
  FUZZ_CHECK(invocations == batch->invocation_count);
  FUZZ_CHECK(dtype_mask == batch->dtype_mask);
}

//===----------------------------------------------------------------------===//
// What one append must have written
//===----------------------------------------------------------------------===//

static void expect_number(double got, double want) {
  FUZZ_CHECK(got == want || (isnan(got) && isnan(want)));
}

static void expect_text(const hrt_js_trace_batch_t* batch, size_t index,
                        const char* text) {
  FUZZ_CHECK(strcmp(hrt_js_trace_batch_string(batch, index), text) == 0);
}

static void expect_tensor(const hrt_js_trace_batch_t* batch,
                          const decoded_tensor_t* got,
                          const hrt_trace_tensor_t* want,
                          hrt_js_trace_contents_t contents,
                          size_t* next_external) {
  expect_text(batch, got->name, want->name);
  FUZZ_CHECK(got->dtype == (size_t)want->element_type);
  FUZZ_CHECK(got->rank == want->rank);
  for (size_t d = 0; d < got->rank; ++d) {
    expect_number(got->dims[d], (double)want->shape[d]);
  }
  if (contents.stats) {
    hrt_tensor_stats_t stats;
    hrt_tensor_stats_compute(want, &stats);
    const double expected[6] = {(double)stats.count,
                                stats.min,
                                stats.max,
                                stats.mean,
                                (double)stats.nan_count,
                                (double)stats.inf_count};
    for (int s = 0; s < 6; ++s) expect_number(got->stats[s], expected[s]);
  }
  if (!contents.data) return;
  expect_number(got->byte_length, (double)want->byte_length);
  if (want->byte_length < HRT_JS_EXTERNAL_MIN_BYTES) {
    // Inline: the bytes, then zeros to a whole slot.
    FUZZ_CHECK(got->where == -1);
    const uint8_t* bytes = batch->records + got->inline_slot * 8;
    size_t length = (size_t)want->byte_length;
    FUZZ_CHECK(length == 0 || memcmp(bytes, want->data, length) == 0);
    for (size_t i = length; i % 8 != 0; ++i) FUZZ_CHECK(bytes[i] == 0);
    FUZZ_CHECK(batch->dtype_mask & (1u << want->element_type));
    return;
  }
  // External: the next block, holding a copy.
  FUZZ_CHECK(got->where == (double)(*next_external)++);
  const hrt_js_trace_external_t* external =
      &batch->externals[(size_t)got->where];
  FUZZ_CHECK(external->data != NULL && external->data != want->data);
  FUZZ_CHECK(external->byte_length == want->byte_length);
  FUZZ_CHECK(external->element_type == want->element_type);
  FUZZ_CHECK(hrt_block_pool_block_capacity(external->data) >=
             want->byte_length);
  FUZZ_CHECK(memcmp(external->data, want->data, want->byte_length) == 0);
}

// The record appended at slot `first_slot` is the trace given, and the last.
static void expect_trace(const hrt_js_trace_batch_t* batch, size_t first_slot,
                         size_t first_external, const char* key,
                         const hrt_trace_info_t* info, uint64_t dropped,
                         uint32_t count, const hrt_trace_tensor_t* tensors,
                         hrt_js_trace_contents_t contents) {
  cursor_t cursor = {batch, first_slot};
  decoded_record_t record;
  decode_record(&cursor, contents, &record);
  FUZZ_CHECK(cursor.at == batch->size / 8);
  FUZZ_CHECK(record.type == HRT_JS_TRACE_RECORD);
  expect_number(record.invocation, (double)info->invocation);
  expect_number(record.sequence, (double)info->sequence);
  expect_text(batch, record.function, info->function);
  expect_number(record.op, info->op_index);
  expect_number(record.time, (double)info->time_ns);
  expect_number(record.dropped, (double)dropped);
  expect_text(batch, record.key, key);
  FUZZ_CHECK(record.count == count);
  size_t next_external = first_external;
  for (uint32_t i = 0; i < count; ++i) {
    expect_tensor(batch, &record.tensors[i], &tensors[i], contents,
                  &next_external);
  }
  FUZZ_CHECK(next_external == batch->external_count);
}

static void expect_timing(const hrt_js_trace_batch_t* batch, size_t first_slot,
                          const hrt_dispatch_timing_t* event) {
  cursor_t cursor = {batch, first_slot};
  decoded_record_t record;
  decode_record(&cursor, (hrt_js_trace_contents_t){0}, &record);
  FUZZ_CHECK(cursor.at == batch->size / 8);
  FUZZ_CHECK(record.type == HRT_JS_TIMING_RECORD);
  expect_number(record.invocation, (double)event->invocation);
  expect_number(record.sequence, (double)event->sequence);
  expect_text(batch, record.function, event->function);
  expect_number(record.op, event->op_index);
  expect_text(batch, record.kernel, event->kernel);
  expect_text(batch, record.device, event->device);
  expect_number(record.time, (double)event->start_ns);
  expect_number(record.dropped, (double)event->duration_ns);
}

// What an append may change, to check that a failed one did not (the
// bytes only when the append may fail: copying them is not cheap), and
// what a successful one appends to.
typedef struct {
  hrt_js_trace_batch_t fields;  // its pointers may dangle after the append
  bool has_invocation;
  uint64_t last_invocation;
  uint8_t* records;  // NULL unless taken with bytes
  char* text;
} snapshot_t;

static void snapshot_take(const hrt_js_trace_batch_t* batch, bool with_bytes,
                          snapshot_t* out) {
  memset(out, 0, sizeof(*out));
  out->fields = *batch;
  out->has_invocation = batch->invocation_count > 0;
  if (out->has_invocation) {
    out->last_invocation = batch->invocations[batch->invocation_count - 1];
  }
  if (!with_bytes) return;
  out->records = checked_alloc(batch->size);
  if (batch->size) memcpy(out->records, batch->records, batch->size);
  out->text = checked_alloc(batch->text_size);
  if (batch->text_size) memcpy(out->text, batch->text, batch->text_size);
}

static void snapshot_free(snapshot_t* snapshot) {
  free(snapshot->records);
  free(snapshot->text);
}

// Only after an append that may fail (a snapshot with bytes).
static void expect_unchanged(const snapshot_t* snapshot,
                             const hrt_js_trace_batch_t* batch) {
  const hrt_js_trace_batch_t* old = &snapshot->fields;
  FUZZ_CHECK(snapshot->records != NULL);
  FUZZ_CHECK(batch->size == old->size);
  FUZZ_CHECK(old->size == 0 ||
             memcmp(batch->records, snapshot->records, old->size) == 0);
  FUZZ_CHECK(batch->string_count == old->string_count);
  FUZZ_CHECK(batch->text_size == old->text_size);
  FUZZ_CHECK(old->text_size == 0 ||
             memcmp(batch->text, snapshot->text, old->text_size) == 0);
  FUZZ_CHECK(batch->external_count == old->external_count);
  FUZZ_CHECK(batch->invocation_count == old->invocation_count);
  FUZZ_CHECK(batch->dtype_mask == old->dtype_mask);
  FUZZ_CHECK(batch->credit == old->credit);
}

static size_t untaken_externals(const hrt_js_trace_batch_t* batch) {
  size_t count = 0;
  for (size_t i = 0; i < batch->external_count; ++i) {
    count += batch->externals[i].data != NULL;
  }
  return count;
}

static void check_state(const state_t* state) {
  hrt_block_pool_stats_t stats;
  hrt_block_pool_stats(state->pool, &stats);
  FUZZ_CHECK(stats.outstanding_count ==
             state->taken_count + untaken_externals(&state->batches[0].batch) +
                 untaken_externals(&state->batches[1].batch));
  for (int b = 0; b < 2; ++b) {
    const model_t* model = &state->batches[b];
    FUZZ_CHECK(model->batch.string_count == model->string_count);
    FUZZ_CHECK(hrt_js_trace_batch_empty(&model->batch) ==
               (model->record_count == 0));
  }
}

//===----------------------------------------------------------------------===//
// Operations
//===----------------------------------------------------------------------===//

// Strings shared between records (so that interning finds them again) or
// made from the input.
static const char* const kNames[] = {
    "x",          "w",      "h",        "y",
    "logits",     "main.f", "mlp.main", "k.matmul_f32",
    "local-sync", "layer1", "",
};
#define FUZZ_NAME_COUNT (sizeof(kNames) / sizeof(kNames[0]))

// A string for the next record: shared, or a fresh heap copy the caller
// frees (so that a batch keeping the pointer would read freed memory).
static char* take_string(input_t* input, const char** out) {
  uint8_t pick = take_u8(input);
  if (pick < 0xC0) {
    *out = kNames[pick % FUZZ_NAME_COUNT];
    return NULL;
  }
  size_t length = pick & 0x3F;
  char* text = checked_alloc(length + 1);
  for (size_t i = 0; i < length; ++i) {
    char c = (char)take_u8(input);
    text[i] = c ? c : 'a';
  }
  text[length] = 0;
  *out = text;
  return text;
}

typedef struct {
  hrt_trace_tensor_t tensor;
  int64_t shape[HRT_HAL_MAX_RANK];
  char* owned_name;
} tensor_t;

static uint64_t take_element_count(state_t* state, input_t* input,
                                   size_t element_size) {
  uint8_t size_class = take_u8(input);
  uint64_t count = 0;
  switch (size_class % 4) {
    case 0:
      count = size_class >> 2 & 7;
      break;
    case 1:
      count = take_u16(input) % 512;
      break;
    case 2:  // around the inline/external threshold
      count =
          (HRT_JS_EXTERNAL_MIN_BYTES - 16 + take_u8(input) % 32) / element_size;
      break;
    default:  // up to 256 KiB: external
      count = (uint64_t)(take_u16(input) % 4096 + 1) * 8;
      break;
  }
  if (state->data_bytes + count * element_size > FUZZ_MAX_DATA_BYTES) {
    count = 1;
  }
  state->data_bytes += count * element_size;
  return count;
}

static void take_tensor(state_t* state, input_t* input, tensor_t* out) {
  memset(out, 0, sizeof(*out));
  hrt_trace_tensor_t* tensor = &out->tensor;
  out->owned_name = take_string(input, &tensor->name);
  tensor->element_type = take_u8(input) % HRT_HAL_ELEMENT_TYPE_COUNT_;
  tensor->rank = take_u8(input) % (HRT_HAL_MAX_RANK + 1);
  size_t element_size = hrt_hal_element_type_size(tensor->element_type);
  uint64_t count = take_element_count(state, input, element_size);
  if (tensor->rank == 0) count = 1;
  // Row-major dims of `count` elements: all 1 but one.
  for (uint32_t d = 0; d < tensor->rank; ++d) out->shape[d] = 1;
  if (tensor->rank) out->shape[take_u8(input) % tensor->rank] = (int64_t)count;
  tensor->shape = out->shape;
  tensor->byte_length = count * element_size;
  // The bytes: a pattern of up to 16 input bytes, repeated (NaN, Inf and
  // denormal patterns included). Exactly sized, so over-reads are caught.
  uint8_t pattern[16];
  size_t pattern_length = take_u8(input) % 16 + 1;
  for (size_t i = 0; i < pattern_length; ++i) pattern[i] = take_u8(input);
  size_t length = (size_t)tensor->byte_length;
  uint8_t* data = checked_alloc(length);
  size_t filled = length < pattern_length ? length : pattern_length;
  memcpy(data, pattern, filled);
  while (filled < length) {  // doubling keeps the period
    size_t more = filled < length - filled ? filled : length - filled;
    memcpy(data + filled, data, more);
    filled += more;
  }
  tensor->data = data;
}

static void free_tensor(tensor_t* tensor) {
  free(tensor->owned_name);
  free((void*)tensor->tensor.data);
}

// Arms allocation failure for the next append when the input asks (one
// byte in eight), at one of its first 32 allocations; whether it did.
static bool arm_failure(input_t* input) {
  uint8_t arm = take_u8(input);
  g_fail_countdown = arm >= 0xE0 ? arm - 0xE0 : -1;
  return g_fail_countdown >= 0;
}

static void check_append(model_t* model, const snapshot_t* before,
                         uint64_t invocation, uint64_t credit) {
  hrt_js_trace_batch_t* batch = &model->batch;
  const hrt_js_trace_batch_t* old = &before->fields;
  bool new_run =
      !before->has_invocation || before->last_invocation != invocation;
  FUZZ_CHECK(batch->invocation_count == old->invocation_count + new_run);
  FUZZ_CHECK(batch->invocations[batch->invocation_count - 1] == invocation);
  FUZZ_CHECK(batch->credit == old->credit + credit);
  // The credit bounds what the append added (slots, strings, externals).
  uint64_t added = (batch->size - old->size) +
                   (batch->text_size - old->text_size) +
                   (batch->external_count - old->external_count) *
                       sizeof(hrt_js_trace_external_t);
  for (size_t i = old->external_count; i < batch->external_count; ++i) {
    added += batch->externals[i].byte_length;
  }
  FUZZ_CHECK(added <= credit);
  FUZZ_CHECK((batch->dtype_mask & old->dtype_mask) == old->dtype_mask);
}

static void op_add_trace(state_t* state, input_t* input) {
  model_t* model = &state->batches[0];
  uint8_t flags = take_u8(input);
  hrt_js_trace_contents_t contents = {(flags & 1) != 0, (flags & 2) != 0,
                                      false};
  uint32_t count = take_u8(input) % (FUZZ_MAX_TENSORS + 1);
  const char* key = NULL;
  char* owned_key = take_string(input, &key);
  const char* function = NULL;
  char* owned_function = take_string(input, &function);
  hrt_trace_info_t info = {take_u16(input),    function,
                           take_u16(input),    (int64_t)take_u16(input) << 24,
                           take_u8(input) % 4, HRT_HAL_TRACE_FULL, false,
                           NULL, false};
  uint64_t dropped = take_u8(input);
  tensor_t tensors[FUZZ_MAX_TENSORS];
  hrt_trace_tensor_t views[FUZZ_MAX_TENSORS];
  for (uint32_t i = 0; i < count; ++i) {
    take_tensor(state, input, &tensors[i]);
    views[i] = tensors[i].tensor;
  }
  uint64_t credit = hrt_js_trace_bytes(key, &info, count, views, contents);
  bool may_fail = arm_failure(input);
  snapshot_t before;
  snapshot_take(&model->batch, may_fail, &before);
  hrt_js_trace_extras_t* extras = NULL;
  bool added =
      hrt_js_trace_extras_make(state->pool, (count & 1) != 0, &info, count,
                               views, contents, &extras) &&
      hrt_js_trace_batch_add_trace(&model->batch, key, &info, dropped, count,
                                   views, contents, extras, credit);
  g_fail_countdown = -1;
  if (added) {
    check_append(model, &before, info.invocation, credit);
    model_note_string(model, key);
    model_note_string(model, function);
    for (uint32_t i = 0; i < count; ++i) {
      model_note_string(model, views[i].name);
    }
    model_note_record(model, contents);
    expect_trace(&model->batch, before.fields.size / 8,
                 before.fields.external_count, key, &info, dropped, count,
                 views, contents);
  } else {
    expect_unchanged(&before, &model->batch);
  }
  snapshot_free(&before);
  for (uint32_t i = 0; i < count; ++i) free_tensor(&tensors[i]);
  free(owned_key);
  free(owned_function);
}

static void op_add_timing(state_t* state, input_t* input) {
  model_t* model = &state->batches[0];
  const char* strings[3];
  char* owned[3];
  for (int i = 0; i < 3; ++i) owned[i] = take_string(input, &strings[i]);
  hrt_dispatch_timing_t event = {
      .sequence = take_u16(input),
      .invocation = take_u8(input) % 4,
      .function = strings[0],
      .op_index = take_u16(input),
      .kernel = strings[1],
      .device = strings[2],
      .start_ns = (int64_t)take_u16(input) << 20,
      .duration_ns = take_u16(input),
  };
  uint64_t credit = hrt_js_timing_bytes(&event);
  bool may_fail = arm_failure(input);
  snapshot_t before;
  snapshot_take(&model->batch, may_fail, &before);
  bool added = hrt_js_trace_batch_add_timing(&model->batch, &event, credit);
  g_fail_countdown = -1;
  if (added) {
    check_append(model, &before, event.invocation, credit);
    for (int i = 0; i < 3; ++i) model_note_string(model, strings[i]);
    model_note_record(model, (hrt_js_trace_contents_t){0});
    expect_timing(&model->batch, before.fields.size / 8, &event);
  } else {
    expect_unchanged(&before, &model->batch);
  }
  snapshot_free(&before);
  for (int i = 0; i < 3; ++i) free(owned[i]);
}

// JavaScript takes an external block (the batch no longer owns it).
static void op_take_external(state_t* state, input_t* input) {
  hrt_js_trace_batch_t* batch = &state->batches[0].batch;
  uint8_t pick = take_u8(input);
  if (batch->external_count == 0 || state->taken_count == FUZZ_MAX_TAKEN) {
    return;
  }
  size_t index = pick % batch->external_count;
  bool present = batch->externals[index].data != NULL;
  void* block = hrt_js_trace_batch_take_external(batch, index);
  FUZZ_CHECK((block != NULL) == present);
  FUZZ_CHECK(batch->externals[index].data == NULL);
  if (block) state->taken[state->taken_count++] = block;
}

// JavaScript's garbage collector frees the latest blocks taken.
static void op_give_back(state_t* state, input_t* input) {
  size_t count = take_u8(input) % 8;
  while (count-- > 0 && state->taken_count > 0) {
    hrt_block_pool_give_back(state->taken[--state->taken_count]);
  }
}

static void reset_batch(model_t* model) {
  hrt_js_trace_batch_reset(&model->batch);
  model_clear(model);
  const hrt_js_trace_batch_t* batch = &model->batch;
  FUZZ_CHECK(hrt_js_trace_batch_empty(batch));
  FUZZ_CHECK(batch->string_count == 0 && batch->text_size == 0);
  FUZZ_CHECK(batch->external_count == 0 && batch->invocation_count == 0);
  FUZZ_CHECK(batch->dtype_mask == 0 && batch->credit == 0);
}

static void op_reset(state_t* state, input_t* input) {
  (void)input;
  reset_batch(&state->batches[0]);
}

// The JS thread takes the batch: the producer goes on with the (empty)
// spare; the batch is delivered, reset and becomes the spare.
static void op_hand_over(state_t* state, input_t* input) {
  (void)input;
  model_t taken = state->batches[0];
  state->batches[0] = state->batches[1];
  check_decodes(&taken);
  reset_batch(&taken);
  state->batches[1] = taken;
}

// An input's op byte picks one (appending traces most often).
static void (*const kOps[])(state_t*, input_t*) = {
    op_add_trace,     op_add_trace, op_add_trace, op_add_timing,
    op_take_external, op_give_back, op_hand_over, op_reset,
};
#define FUZZ_OP_COUNT (sizeof(kOps) / sizeof(kOps[0]))

//===----------------------------------------------------------------------===//
// One input
//===----------------------------------------------------------------------===//

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  input_t input = {data, size, 0};
  static const size_t kCacheBytes[] = {0, 64 << 10, 1 << 20, 8 << 20};
  state_t state;
  memset(&state, 0, sizeof(state));
  int64_t pools_before = hrt_live_count(HRT_LIVE_BLOCK_POOL);
  FUZZ_CHECK_OK(
      hrt_block_pool_create(kCacheBytes[take_u8(&input) % 4], &state.pool));
  while (input.at < input.size) {
    kOps[take_u8(&input) % FUZZ_OP_COUNT](&state, &input);
    check_state(&state);
  }
  for (int b = 0; b < 2; ++b) {
    check_decodes(&state.batches[b]);
    hrt_js_trace_batch_deinit(&state.batches[b].batch);
    model_clear(&state.batches[b]);
  }
  while (state.taken_count > 0) {
    hrt_block_pool_give_back(state.taken[--state.taken_count]);
  }
  hrt_block_pool_stats_t stats;
  hrt_block_pool_stats(state.pool, &stats);
  FUZZ_CHECK(stats.outstanding_count == 0);
  hrt_block_pool_release(state.pool);
  FUZZ_CHECK(hrt_live_count(HRT_LIVE_BLOCK_POOL) == pools_before);
  return 0;
}
