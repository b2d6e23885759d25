'use strict';
// Delivers a batch of debug-sink events to the JavaScript sink targets.
//
// The binding calls the function made here on the JS thread (src/napi/
// js_sink.c) with a batch: everything the device's completion thread traced
// or timed since the last batch, encoded as numbers by src/napi/
// js_trace_batch.h (that header is the format's reference). Making the
// objects here rather than through N-API property by property is what keeps
// small traces cheap. A batch is delivered in time slices: each call
// delivers records from `from` until `budgetMs` has passed (at least one
// record), and the binding calls again with the same arguments and the
// returned position in a later turn of the event loop (src/napi/
// js_channel.h).
//
// Arguments:
//   targets    the sink's targets in order (null where one was collected)
//   statsMask  bit i: targets[i] takes statistics instead of tensors
//   slots      Float64Array over the records
//   strings    the batch's strings, indexed by the records
//   views      views[dtype]: a TypedArray of that dtype over the same bytes
//              as `slots` (only dtypes with inline data)
//   externals  externals(k): the typed array of large data k (numbered by
//              the records, in record order), called once, just before its
//              record's callbacks; made then, so that nothing but the
//              callbacks holds owned data (V8 may collect it young); with
//              borrowed data it is lent (a device may lend the bytes where
//              they lie, and its writers of them wait from then until
//              takeBack)
//   takeBack   with borrowed data: takeBack(to) detaches the externals
//              before `to`, called as soon as the callbacks of the record
//              that lent them have returned; undefined otherwise
//   from       the slot of the first record to deliver
//   budgetMs   the milliseconds this call may take (Infinity: no limit)
// Returns [next, invocation, thrown, ...]: the slot of the first record not
// delivered (slots.length when done), then for each callback that threw the
// record's invocation id and what it threw; the binding fails those
// invocations.

const { performance } = require('perf_hooks');

const TRACE = 1;
const TIMING = 2;
// hrt_hal_trace_mode_t, by value.
const TRACE_MODES = ['full', 'summary', 'health'];

// The clock is read after every `stride` records: 1 at first, doubling up to
// MAX_STRIDE while records take under FAST_MS each, back to 1 after a slow
// one. Reading it costs about as much as delivering a small trace.
const MAX_STRIDE = 16;
const FAST_MS = 0.002;

// A fresh Array of the `rank` dimensions at slots[first...].
function shapeAt(slots, first, rank) {
  const shape = [];
  for (let d = 0; d < rank; ++d) shape.push(slots[first + d]);
  return shape;
}

// A tensor's summary from its 9 slots at slots[p...] (src/napi/
// js_trace_batch.h): the counts in both modes, the figures in 'summary' mode.
function summaryAt(slots, p, mode) {
  const summary = {
    mode, count: slots[p], nanCount: slots[p + 1], posInfCount: slots[p + 2], negInfCount: slots[p + 3],
  };
  if (mode === 'summary') {
    summary.zeroCount = slots[p + 4];
    summary.min = slots[p + 5];
    summary.max = slots[p + 6];
    summary.mean = slots[p + 7];
    summary.l2 = slots[p + 8];
  }
  return summary;
}

function makeTraceDecoder(dtypeNames) {
  return function deliverBatch(targets, statsMask, slots, strings, views, externals, takeBack, from, budgetMs) {
    const wantsStats = statsMask !== 0;
    const wantsData = statsMask !== 2 ** targets.length - 1;
    const result = [from];
    let lentEnd = 0; // externals before this one are taken back
    const end = slots.length;
    const timed = budgetMs !== Infinity;
    let checked = timed ? performance.now() : 0;
    const stop = checked + budgetMs;
    let stride = 1;
    let due = 1; // records until the clock is read
    let p = from;
    while (p < end) {
      if (timed && p !== from && --due === 0) {
        const now = performance.now();
        if (now >= stop) break;
        stride = now - checked < FAST_MS * stride ? Math.min(2 * stride, MAX_STRIDE) : 1;
        due = stride;
        checked = now;
      }
      const kind = slots[p];
      const invocation = slots[p + 1];
      const sequence = slots[p + 2];
      const fn = strings[slots[p + 3]];
      const op = slots[p + 4];
      if (kind === TIMING) {
        const event = {
          sequence,
          function: fn,
          op,
          kernel: strings[slots[p + 5]],
          device: strings[slots[p + 6]],
          startNs: slots[p + 7],
          durationNs: slots[p + 8],
        };
        p += 9;
        for (const target of targets) {
          if (typeof target !== 'object' || target === null) continue;
          try {
            const method = target.timing;
            if (typeof method === 'function') method.call(target, event);
          } catch (error) {
            result.push(invocation, error);
          }
        }
        continue;
      }
      if (kind !== TRACE) throw new Error(`halrt: unknown debug-sink record kind ${kind}`);
      const mode = TRACE_MODES[slots[p + 10]];
      const info = { sequence, function: fn, op, timeNs: slots[p + 5], dropped: slots[p + 6], recorded: slots[p + 7] === 1, mode };
      const key = strings[slots[p + 8]];
      const count = slots[p + 9];
      p += 11;
      const tensors = [];
      const stats = [];
      let externalEnd = lentEnd;
      for (let i = 0; i < count; ++i) {
        const name = strings[slots[p]];
        const dtypeIndex = slots[p + 1];
        const dtype = dtypeNames[dtypeIndex];
        const rank = slots[p + 2];
        p += 3;
        const first = p;
        p += rank;
        if (mode !== 'full') {
          const summary = summaryAt(slots, p, mode);
          p += 9;
          if (wantsStats) {
            const shape = shapeAt(slots, first, rank);
            stats.push({
              name,
              dtype,
              shape,
              count: summary.count,
              min: mode === 'summary' ? summary.min : NaN,
              max: mode === 'summary' ? summary.max : NaN,
              mean: mode === 'summary' ? summary.mean : NaN,
              nanCount: summary.nanCount,
              infCount: summary.posInfCount + summary.negInfCount,
            });
          }
          if (wantsData) tensors.push({ name, dtype, shape: shapeAt(slots, first, rank), summary });
          continue;
        }
        if (wantsStats) {
          stats.push({
            name,
            dtype,
            shape: shapeAt(slots, first, rank),
            count: slots[p],
            min: slots[p + 1],
            max: slots[p + 2],
            mean: slots[p + 3],
            nanCount: slots[p + 4],
            infCount: slots[p + 5],
          });
          p += 6;
        }
        if (wantsData) {
          const byteLength = slots[p];
          const where = slots[p + 1];
          p += 2;
          let data;
          if (where < 0) {
            const view = views[dtypeIndex];
            const start = (p * 8) / view.BYTES_PER_ELEMENT;
            data = view.slice(start, start + byteLength / view.BYTES_PER_ELEMENT);
            p += Math.ceil(byteLength / 8);
          } else {
            data = externals(where);
            externalEnd = where + 1;
          }
          tensors.push({ name, dtype, shape: shapeAt(slots, first, rank), data });
        }
      }
      for (let i = 0; i < targets.length; ++i) {
        const target = targets[i];
        if (target === null) continue;
        const list = (statsMask >>> i) & 1 ? stats : tensors;
        try {
          if (typeof target === 'function') {
            target(key, list, info);
          } else {
            const method = target.trace;
            if (typeof method === 'function') method.call(target, key, list, info);
          }
        } catch (error) {
          result.push(invocation, error);
        }
      }
      if (takeBack !== undefined && externalEnd > lentEnd) {
        takeBack(externalEnd);
        lentEnd = externalEnd;
      }
    }
    result[0] = p;
    return result;
  };
}

module.exports = { makeTraceDecoder, TRACE_MODES };
