// A batch of debug-sink events (traces and dispatch timings) encoded for
// lib/trace_batch.js, which turns them into the objects JS sinks receive.
//
// Batching is what makes small traces cheap: the producer appends records
// to the batch, and the JS thread is woken once for everything appended
// since it last looked, instead of once per trace; the objects are then made
// by JavaScript from plain numbers, not property by property through N-API.
//
// Encoding. `records` is a sequence of 8-byte slots, each a double, read in
// JavaScript through one Float64Array. Strings are numbers: indices into the
// batch's string list (each distinct string once per batch). Dtypes are
// hrt_hal_element_type_t values (binding.dtypes[dtype] is the name).
//
//   TRACE   1, invocation, sequence, function, op, timeNs, dropped,
//           recorded (1 or 0), key, count, mode (hrt_hal_trace_mode_t),
//           then per tensor: name, dtype, rank, dims[rank],
//             with SUMMARY (summary and health traces, whatever the
//             targets want): count, nanCount, posInfCount, negInfCount,
//                       zeroCount, min, max, mean, l2
//                       (hal/tensor_summary.h; mean and l2 as
//                       hrt_hal_tensor_summary_mean/_l2)
//             with STATS: count, min, max, mean, nanCount, infCount
//             with DATA:  byteLength, where
//                         where = -1: the bytes follow inline, from the next
//                         slot, padded to a whole slot
//                         where = k >= 0: the bytes are external k (large
//                         data, not copied again; see externals)
//   TIMING  2, invocation, sequence, function, op, kernel, device, startNs,
//           durationNs
// (invocation: the invocation's id, sequence: its number in its context;
// see hrt_trace_info_t)
//
// Threads and ownership: a batch is plain memory with no locking of its own;
// the debug sink (js_sink.c) guards it with its mutex while the producer
// appends, and owns it. External data blocks are owned by the batch until
// taken with hrt_js_trace_batch_take_external (they then belong to the
// taker, who gives them back with hrt_block_pool_give_back()).
#ifndef HRT_NAPI_JS_TRACE_BATCH_H_
#define HRT_NAPI_JS_TRACE_BATCH_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/block_pool.h"
#include "hal/device.h"
#include "modules/debug_sink.h"

enum {
  HRT_JS_TRACE_RECORD = 1,
  HRT_JS_TIMING_RECORD = 2,
};

// Host data of at least this many bytes goes to JavaScript as an external
// ArrayBuffer, without a copy (trace data: a block the producer copies
// outside the sink's lock, see hrt_js_trace_extras_t); smaller data is
// cheaper to copy into a V8-owned ArrayBuffer (trace data: inline in the
// batch). js_submit.c follows the same rule for reads.
#define HRT_JS_EXTERNAL_MIN_BYTES (64u * 1024u)

// What a trace record asks for: statistics, data, or both; or (a summary or
// health trace) the tensors' summaries alone.
typedef struct hrt_js_trace_contents_s {
  bool stats;
  bool data;
  bool summary;  // then stats and data are false
} hrt_js_trace_contents_t;

typedef struct hrt_js_trace_external_s {
  void* data;  // a block of the sink's pool; NULL once taken
  uint64_t byte_length;
  hrt_hal_element_type_t element_type;
  // Borrowed data a device lends (hal/device.h: hrt_hal_device_lend), with
  // `data` its spare; NULL when the bytes were copied into `data`, and once
  // the loan has ended.
  hrt_hal_loan_t* loan;
} hrt_js_trace_external_t;

typedef struct hrt_js_trace_batch_s {
  uint8_t* records;
  size_t size;
  size_t capacity;
  // Distinct strings: NUL-terminated, back to back in `text`, found by a
  // hash table of (index + 1) in `slots` (0 = empty).
  char* text;
  size_t text_size;
  size_t text_capacity;
  size_t* offsets;
  size_t string_count;
  size_t string_capacity;
  size_t* slots;
  size_t slot_count;  // a power of two, or 0
  hrt_js_trace_external_t* externals;
  size_t external_count;
  size_t external_capacity;
  // The invocation ids of the records, a run of equal ones listed once (so
  // that an undeliverable batch can fail exactly those invocations; an id
  // may appear more than once).
  uint64_t* invocations;
  size_t invocation_count;
  size_t invocation_capacity;
  uint32_t dtype_mask;  // bit t: some inline data of element type t
  uint64_t credit;      // bytes counted against the sink's bound
} hrt_js_trace_batch_t;

// Bytes a trace counts against the sink's bound: an upper bound of what it
// adds to a batch, external data included.
uint64_t hrt_js_trace_bytes(const char* key, const hrt_trace_info_t* info,
                            uint32_t count, const hrt_trace_tensor_t* tensors,
                            hrt_js_trace_contents_t contents);
uint64_t hrt_js_timing_bytes(const hrt_dispatch_timing_t* event);

// What a trace needs computed before the sink's lock is taken: copies of the
// data that travels externally, and statistics. Made and freed on the
// producer's thread, without the lock (freeing may also happen under it:
// the blocks go back to their pool, which has its own lock).
typedef struct hrt_js_trace_extras_s hrt_js_trace_extras_t;

// Whether a trace needs extras.
bool hrt_js_trace_needs_extras(uint32_t count,
                               const hrt_trace_tensor_t* tensors,
                               hrt_js_trace_contents_t contents);

// Makes the extras of a trace; *out_extras is NULL when it needs none. False
// when out of memory (nothing left allocated).
// The copies are blocks of `pool` (kept warm for the next trace: a fresh
// allocation per large trace would fault in every page anew). Given away
// (not `borrowed`) a block comes back only after a garbage collection, long
// out of the caches: the copy streams past them (hrt_trace_copy).
// `borrowed` data is lent by the device where it can (the block is then the
// loan's spare, written only if a later command writes the bytes first),
// else copied.
bool hrt_js_trace_extras_make(hrt_block_pool_t* pool, bool borrowed,
                              const hrt_trace_info_t* info, uint32_t count,
                              const hrt_trace_tensor_t* tensors,
                              hrt_js_trace_contents_t contents,
                              hrt_js_trace_extras_t** out_extras);
void hrt_js_trace_extras_free(hrt_js_trace_extras_t* extras);

// Appends a trace record; takes `extras` (from hrt_js_trace_extras_make for
// the same tensors and contents) whatever the result. Returns false when out
// of memory: the batch is unchanged then.
bool hrt_js_trace_batch_add_trace(hrt_js_trace_batch_t* batch, const char* key,
                                  const hrt_trace_info_t* info,
                                  uint64_t dropped, uint32_t count,
                                  const hrt_trace_tensor_t* tensors,
                                  hrt_js_trace_contents_t contents,
                                  hrt_js_trace_extras_t* extras,
                                  uint64_t credit);
bool hrt_js_trace_batch_add_timing(hrt_js_trace_batch_t* batch,
                                   const hrt_dispatch_timing_t* event,
                                   uint64_t credit);

static inline bool hrt_js_trace_batch_empty(const hrt_js_trace_batch_t* batch) {
  return batch->size == 0;
}

// String `index` of the batch.
const char* hrt_js_trace_batch_string(const hrt_js_trace_batch_t* batch,
                                      size_t index);

// Takes external block `index` (its data now belongs to the caller, for
// good: a loan of it is abandoned, see hrt_hal_loan_close).
void* hrt_js_trace_batch_take_external(hrt_js_trace_batch_t* batch,
                                       size_t index);
// The bytes of external `index`, opening its loan (the bytes stay as they
// were until hrt_js_trace_batch_end_loan or the batch's reset).
const void* hrt_js_trace_batch_external_bytes(hrt_js_trace_batch_t* batch,
                                              size_t index);
// Ends the loan of external `index`, if any: JavaScript reads it no more.
void hrt_js_trace_batch_end_loan(hrt_js_trace_batch_t* batch, size_t index);

// Empties the batch (ending loans and freeing external blocks not taken),
// keeping its buffers unless they have grown large.
void hrt_js_trace_batch_reset(hrt_js_trace_batch_t* batch);
// Frees everything.
void hrt_js_trace_batch_deinit(hrt_js_trace_batch_t* batch);

#endif  // HRT_NAPI_JS_TRACE_BATCH_H_
