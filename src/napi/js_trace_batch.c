#include "napi/js_trace_batch.h"

#include <stdlib.h>
#include <string.h>

#include "modules/sinks/tensor_stats.h"

// Slots of a trace record's header and of a tensor's fixed part (name,
// dtype, rank, then per contents), and of a timing record.
enum {
  HRT_JS_TRACE_HEADER_SLOTS = 11,
  HRT_JS_TENSOR_SLOTS = 3,
  HRT_JS_SUMMARY_SLOTS = 9,
  HRT_JS_STATS_SLOTS = 6,
  HRT_JS_DATA_SLOTS = 2,
  HRT_JS_TIMING_SLOTS = 9,
};

// Buffers above this size are given back when a batch is reset, so that one
// burst does not pin its high-water mark for the sink's lifetime.
#define HRT_JS_BATCH_KEEP_BYTES (1u << 20)

struct hrt_js_trace_extras_s {
  uint32_t count;
  void** copies;              // [count], NULL where data stays inline
  hrt_hal_loan_t** loans;     // [count], NULL where copied
  hrt_tensor_stats_t* stats;  // [count] or NULL
};

// Ends `loan` (if any) and gives back `block`.
static void hrt_js_external_free(void* block, hrt_hal_loan_t* loan) {
  if (loan != NULL) hrt_hal_loan_close(loan, false);
  hrt_block_pool_give_back(block);
}

static uint64_t hrt_js_slots_for(uint64_t bytes) { return (bytes + 7) / 8; }

static bool hrt_js_travels_inline(const hrt_trace_tensor_t* tensor) {
  return tensor->byte_length < HRT_JS_EXTERNAL_MIN_BYTES;
}

// The shape of a trace record: its slots, its external blocks and their
// bytes. The one place that walks a record's layout, for both its bound and
// its append.
typedef struct hrt_js_trace_layout_s {
  size_t slots;
  size_t externals;
  uint64_t external_bytes;
} hrt_js_trace_layout_t;

static hrt_js_trace_layout_t hrt_js_trace_layout(
    uint32_t count, const hrt_trace_tensor_t* tensors,
    hrt_js_trace_contents_t contents) {
  hrt_js_trace_layout_t layout = {HRT_JS_TRACE_HEADER_SLOTS, 0, 0};
  for (uint32_t i = 0; i < count; ++i) {
    layout.slots += HRT_JS_TENSOR_SLOTS + tensors[i].rank;
    if (contents.summary) layout.slots += HRT_JS_SUMMARY_SLOTS;
    if (contents.stats) layout.slots += HRT_JS_STATS_SLOTS;
    if (!contents.data) continue;
    layout.slots += HRT_JS_DATA_SLOTS;
    if (hrt_js_travels_inline(&tensors[i])) {
      layout.slots += (size_t)hrt_js_slots_for(tensors[i].byte_length);
    } else {
      ++layout.externals;
      layout.external_bytes += tensors[i].byte_length;
    }
  }
  return layout;
}

uint64_t hrt_js_trace_bytes(const char* key, const hrt_trace_info_t* info,
                            uint32_t count, const hrt_trace_tensor_t* tensors,
                            hrt_js_trace_contents_t contents) {
  hrt_js_trace_layout_t layout = hrt_js_trace_layout(count, tensors, contents);
  uint64_t bytes = layout.slots * 8 + layout.external_bytes +
                   layout.externals * sizeof(hrt_js_trace_external_t) +
                   strlen(key) + strlen(info->function) + 2;
  for (uint32_t i = 0; i < count; ++i) bytes += strlen(tensors[i].name) + 1;
  return bytes;
}

uint64_t hrt_js_timing_bytes(const hrt_dispatch_timing_t* event) {
  return HRT_JS_TIMING_SLOTS * 8 + strlen(event->function) +
         strlen(event->kernel) + strlen(event->device) + 3;
}

//===----------------------------------------------------------------------===//
// Extras: made before the lock
//===----------------------------------------------------------------------===//

bool hrt_js_trace_needs_extras(uint32_t count,
                               const hrt_trace_tensor_t* tensors,
                               hrt_js_trace_contents_t contents) {
  if (contents.stats) return true;
  for (uint32_t i = 0; contents.data && i < count; ++i) {
    if (!hrt_js_travels_inline(&tensors[i])) return true;
  }
  return false;
}

void hrt_js_trace_extras_free(hrt_js_trace_extras_t* extras) {
  if (extras == NULL) return;
  for (uint32_t i = 0; i < extras->count; ++i) {
    hrt_js_external_free(extras->copies[i], extras->loans[i]);
  }
  free(extras);
}

bool hrt_js_trace_extras_make(hrt_block_pool_t* pool, bool borrowed,
                              const hrt_trace_info_t* info, uint32_t count,
                              const hrt_trace_tensor_t* tensors,
                              hrt_js_trace_contents_t contents,
                              hrt_js_trace_extras_t** out_extras) {
  *out_extras = NULL;
  if (!hrt_js_trace_needs_extras(count, tensors, contents)) return true;
  hrt_js_trace_extras_t* extras =
      calloc(1, sizeof(*extras) +
                    count * (2 * sizeof(void*) + sizeof(hrt_tensor_stats_t)));
  if (extras == NULL) return false;
  // Stats first: doubles and 64-bit counts want the struct's alignment.
  extras->stats = contents.stats ? (hrt_tensor_stats_t*)(extras + 1) : NULL;
  extras->copies =
      (void**)((char*)(extras + 1) + count * sizeof(hrt_tensor_stats_t));
  extras->loans = (hrt_hal_loan_t**)(extras->copies + count);
  extras->count = count;
  for (uint32_t i = 0; i < count; ++i) {
    if (contents.stats)
      hrt_tensor_stats_compute(&tensors[i], &extras->stats[i]);
    if (!contents.data || hrt_js_travels_inline(&tensors[i])) continue;
    extras->copies[i] = hrt_block_pool_acquire(pool, tensors[i].byte_length);
    if (extras->copies[i] == NULL) {
      hrt_js_trace_extras_free(extras);
      return false;
    }
    if (borrowed) {
      extras->loans[i] =
          hrt_hal_device_lend(info->device, tensors[i].buffer, tensors[i].data,
                              tensors[i].byte_length, extras->copies[i]);
      if (extras->loans[i] != NULL) continue;
    }
    hrt_trace_copy(info, extras->copies[i], tensors[i].data,
                   tensors[i].byte_length, !borrowed);
  }
  *out_extras = extras;
  return true;
}

//===----------------------------------------------------------------------===//
// Appending
//===----------------------------------------------------------------------===//

// Grows `*buffer` (of `*capacity` elements of `size` bytes) to hold `needed`.
static bool hrt_js_reserve(void** buffer, size_t size, size_t* capacity,
                           size_t needed) {
  if (needed <= *capacity) return true;
  size_t grown = *capacity ? *capacity : 64;
  while (grown < needed) grown *= 2;
  void* resized = realloc(*buffer, grown * size);
  if (resized == NULL) return false;
  *buffer = resized;
  *capacity = grown;
  return true;
}

static void hrt_js_put(hrt_js_trace_batch_t* batch, double value) {
  memcpy(batch->records + batch->size, &value, sizeof(value));
  batch->size += sizeof(value);
}

static void hrt_js_put_bytes(hrt_js_trace_batch_t* batch, const void* data,
                             uint64_t byte_length) {
  size_t padded = (size_t)hrt_js_slots_for(byte_length) * 8;
  if (byte_length) memcpy(batch->records + batch->size, data, byte_length);
  memset(batch->records + batch->size + byte_length, 0,
         padded - (size_t)byte_length);
  batch->size += padded;
}

static size_t hrt_js_hash(const char* text) {
  uint32_t hash = 2166136261u;  // FNV-1a
  for (; *text; ++text) hash = (hash ^ (uint8_t)*text) * 16777619u;
  return hash;
}

const char* hrt_js_trace_batch_string(const hrt_js_trace_batch_t* batch,
                                      size_t index) {
  return batch->text + batch->offsets[index];
}

// The slot holding `text`, or the empty slot where it would go.
static size_t hrt_js_find_slot(const hrt_js_trace_batch_t* batch,
                               const char* text) {
  size_t mask = batch->slot_count - 1;
  size_t slot = hrt_js_hash(text) & mask;
  while (batch->slots[slot] != 0 &&
         strcmp(hrt_js_trace_batch_string(batch, batch->slots[slot] - 1),
                text) != 0) {
    slot = (slot + 1) & mask;
  }
  return slot;
}

// Rebuilds the hash table (linear probing, at most half full) with
// `slot_count` slots, inserting the strings in index order.
static bool hrt_js_rehash(hrt_js_trace_batch_t* batch, size_t slot_count) {
  size_t* slots = calloc(slot_count, sizeof(*slots));
  if (slots == NULL) return false;
  free(batch->slots);
  batch->slots = slots;
  batch->slot_count = slot_count;
  for (size_t i = 0; i < batch->string_count; ++i) {
    slots[hrt_js_find_slot(batch, hrt_js_trace_batch_string(batch, i))] = i + 1;
  }
  return true;
}

// The index of `text` among the batch's strings, added when new.
static bool hrt_js_intern(hrt_js_trace_batch_t* batch, const char* text,
                          size_t* out_index) {
  if (batch->slot_count == 0 && !hrt_js_rehash(batch, 64)) return false;
  size_t slot = hrt_js_find_slot(batch, text);
  if (batch->slots[slot] != 0) {
    *out_index = batch->slots[slot] - 1;
    return true;
  }
  if ((batch->string_count + 1) * 2 > batch->slot_count) {
    if (!hrt_js_rehash(batch, batch->slot_count * 2)) return false;
    slot = hrt_js_find_slot(batch, text);
  }
  size_t length = strlen(text);
  if (!hrt_js_reserve((void**)&batch->text, 1, &batch->text_capacity,
                      batch->text_size + length + 1) ||
      !hrt_js_reserve((void**)&batch->offsets, sizeof(size_t),
                      &batch->string_capacity, batch->string_count + 1)) {
    return false;
  }
  memcpy(batch->text + batch->text_size, text, length + 1);
  batch->offsets[batch->string_count] = batch->text_size;
  batch->text_size += length + 1;
  batch->slots[slot] = ++batch->string_count;
  *out_index = batch->string_count - 1;
  return true;
}

// Strings added after `string_count` are dropped. Linear probing places a
// string on its first free slot at insertion and later strings never move
// earlier ones, so clearing the later ones' slots keeps every probe chain.
static void hrt_js_drop_strings(hrt_js_trace_batch_t* batch,
                                size_t string_count, size_t text_size) {
  for (size_t i = 0; i < batch->slot_count; ++i) {
    if (batch->slots[i] > string_count) batch->slots[i] = 0;
  }
  batch->string_count = string_count;
  batch->text_size = text_size;
}

// Interns every string a record refers to (`indices[i]` receives the index
// of `strings[i]`), and reserves `slots` record slots, `externals` external
// entries and the record's invocation id. On failure the batch is as it was.
static bool hrt_js_prepare(hrt_js_trace_batch_t* batch, uint64_t invocation,
                           const char* const* strings, size_t string_count,
                           size_t slots, size_t externals, size_t* indices) {
  const size_t old_strings = batch->string_count;
  const size_t old_text = batch->text_size;
  bool ok =
      hrt_js_reserve((void**)&batch->records, 1, &batch->capacity,
                     batch->size + slots * 8) &&
      hrt_js_reserve((void**)&batch->externals, sizeof(*batch->externals),
                     &batch->external_capacity,
                     batch->external_count + externals) &&
      hrt_js_reserve((void**)&batch->invocations, sizeof(uint64_t),
                     &batch->invocation_capacity, batch->invocation_count + 1);
  for (size_t i = 0; ok && i < string_count; ++i) {
    ok = hrt_js_intern(batch, strings[i], &indices[i]);
  }
  if (!ok) {
    hrt_js_drop_strings(batch, old_strings, old_text);
    return false;
  }
  if (batch->invocation_count == 0 ||
      batch->invocations[batch->invocation_count - 1] != invocation) {
    batch->invocations[batch->invocation_count++] = invocation;
  }
  return true;
}

bool hrt_js_trace_batch_add_trace(hrt_js_trace_batch_t* batch, const char* key,
                                  const hrt_trace_info_t* info,
                                  uint64_t dropped, uint32_t count,
                                  const hrt_trace_tensor_t* tensors,
                                  hrt_js_trace_contents_t contents,
                                  hrt_js_trace_extras_t* extras,
                                  uint64_t credit) {
  // The strings (key, function, then the names) and their indices; on the
  // stack for up to 16 tensors.
  enum { HRT_JS_STRINGS_ON_STACK = 16 + 2 };
  const char* strings_on_stack[HRT_JS_STRINGS_ON_STACK];
  size_t indices_on_stack[HRT_JS_STRINGS_ON_STACK];
  const char** strings = strings_on_stack;
  size_t* indices = indices_on_stack;
  const size_t string_count = count + 2u;
  if (string_count > HRT_JS_STRINGS_ON_STACK) {
    strings = malloc(string_count * (sizeof(*strings) + sizeof(*indices)));
    if (strings == NULL) {
      hrt_js_trace_extras_free(extras);
      return false;
    }
    indices = (size_t*)(strings + string_count);
  }
  strings[0] = key;
  strings[1] = info->function;
  for (uint32_t i = 0; i < count; ++i) strings[i + 2] = tensors[i].name;
  const hrt_js_trace_layout_t layout =
      hrt_js_trace_layout(count, tensors, contents);
  bool ok = hrt_js_prepare(batch, info->invocation, strings, string_count,
                           layout.slots, layout.externals, indices);
  if (ok) {
    hrt_js_put(batch, HRT_JS_TRACE_RECORD);
    hrt_js_put(batch, (double)info->invocation);
    hrt_js_put(batch, (double)info->sequence);
    hrt_js_put(batch, (double)indices[1]);
    hrt_js_put(batch, info->op_index);
    hrt_js_put(batch, (double)info->time_ns);
    hrt_js_put(batch, (double)dropped);
    hrt_js_put(batch, info->recorded ? 1 : 0);
    hrt_js_put(batch, (double)indices[0]);
    hrt_js_put(batch, count);
    hrt_js_put(batch, info->mode);
  }
  for (uint32_t i = 0; ok && i < count; ++i) {
    const hrt_trace_tensor_t* tensor = &tensors[i];
    hrt_js_put(batch, (double)indices[i + 2]);
    hrt_js_put(batch, tensor->element_type);
    hrt_js_put(batch, tensor->rank);
    for (uint32_t d = 0; d < tensor->rank; ++d) {
      hrt_js_put(batch, (double)tensor->shape[d]);
    }
    if (contents.summary) {
      const hrt_hal_tensor_summary_t* summary = tensor->summary;
      hrt_js_put(batch, (double)summary->count);
      hrt_js_put(batch, (double)summary->nan_count);
      hrt_js_put(batch, (double)summary->pos_inf_count);
      hrt_js_put(batch, (double)summary->neg_inf_count);
      hrt_js_put(batch, (double)summary->zero_count);
      hrt_js_put(batch, summary->min);
      hrt_js_put(batch, summary->max);
      hrt_js_put(batch, hrt_hal_tensor_summary_mean(summary));
      hrt_js_put(batch, hrt_hal_tensor_summary_l2(summary));
    }
    if (contents.stats) {
      const hrt_tensor_stats_t* stats = &extras->stats[i];
      hrt_js_put(batch, (double)stats->count);
      hrt_js_put(batch, stats->min);
      hrt_js_put(batch, stats->max);
      hrt_js_put(batch, stats->mean);
      hrt_js_put(batch, (double)stats->nan_count);
      hrt_js_put(batch, (double)stats->inf_count);
    }
    if (!contents.data) continue;
    hrt_js_put(batch, (double)tensor->byte_length);
    if (hrt_js_travels_inline(tensor)) {
      hrt_js_put(batch, -1);
      hrt_js_put_bytes(batch, tensor->data, tensor->byte_length);
      batch->dtype_mask |= 1u << tensor->element_type;
    } else {
      hrt_js_put(batch, (double)batch->external_count);
      batch->externals[batch->external_count++] =
          (hrt_js_trace_external_t){extras->copies[i], tensor->byte_length,
                                    tensor->element_type, extras->loans[i]};
      extras->copies[i] = NULL;
      extras->loans[i] = NULL;
    }
  }
  if (strings != strings_on_stack) free(strings);
  if (ok) batch->credit += credit;
  hrt_js_trace_extras_free(extras);
  return ok;
}

bool hrt_js_trace_batch_add_timing(hrt_js_trace_batch_t* batch,
                                   const hrt_dispatch_timing_t* event,
                                   uint64_t credit) {
  const char* strings[] = {event->function, event->kernel, event->device};
  size_t indices[3];
  if (!hrt_js_prepare(batch, event->invocation, strings, 3, HRT_JS_TIMING_SLOTS,
                      0, indices)) {
    return false;
  }
  hrt_js_put(batch, HRT_JS_TIMING_RECORD);
  hrt_js_put(batch, (double)event->invocation);
  hrt_js_put(batch, (double)event->sequence);
  hrt_js_put(batch, (double)indices[0]);
  hrt_js_put(batch, event->op_index);
  hrt_js_put(batch, (double)indices[1]);
  hrt_js_put(batch, (double)indices[2]);
  hrt_js_put(batch, (double)event->start_ns);
  hrt_js_put(batch, (double)event->duration_ns);
  batch->credit += credit;
  return true;
}

//===----------------------------------------------------------------------===//
// Consuming
//===----------------------------------------------------------------------===//

void* hrt_js_trace_batch_take_external(hrt_js_trace_batch_t* batch,
                                       size_t index) {
  hrt_js_trace_external_t* external = &batch->externals[index];
  if (external->loan != NULL) hrt_hal_loan_close(external->loan, true);
  external->loan = NULL;
  void* data = external->data;
  external->data = NULL;
  return data;
}

const void* hrt_js_trace_batch_external_bytes(hrt_js_trace_batch_t* batch,
                                              size_t index) {
  const hrt_js_trace_external_t* external = &batch->externals[index];
  return external->loan ? hrt_hal_loan_open(external->loan) : external->data;
}

void hrt_js_trace_batch_end_loan(hrt_js_trace_batch_t* batch, size_t index) {
  hrt_js_trace_external_t* external = &batch->externals[index];
  if (external->loan != NULL) hrt_hal_loan_close(external->loan, false);
  external->loan = NULL;
}

void hrt_js_trace_batch_deinit(hrt_js_trace_batch_t* batch) {
  for (size_t i = 0; i < batch->external_count; ++i) {
    hrt_js_external_free(batch->externals[i].data, batch->externals[i].loan);
  }
  free(batch->records);
  free(batch->text);
  free(batch->offsets);
  free(batch->slots);
  free(batch->externals);
  free(batch->invocations);
  memset(batch, 0, sizeof(*batch));
}

void hrt_js_trace_batch_reset(hrt_js_trace_batch_t* batch) {
  if (batch->capacity > HRT_JS_BATCH_KEEP_BYTES ||
      batch->text_capacity > HRT_JS_BATCH_KEEP_BYTES) {
    hrt_js_trace_batch_deinit(batch);
    return;
  }
  for (size_t i = 0; i < batch->external_count; ++i) {
    hrt_js_external_free(batch->externals[i].data, batch->externals[i].loan);
  }
  if (batch->string_count) {
    memset(batch->slots, 0, batch->slot_count * sizeof(*batch->slots));
  }
  batch->size = 0;
  batch->text_size = 0;
  batch->string_count = 0;
  batch->external_count = 0;
  batch->invocation_count = 0;
  batch->dtype_mask = 0;
  batch->credit = 0;
}
