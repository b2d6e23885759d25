'use strict';
// halrt.sinks: ready-made debug sinks for HalModule's `debugSink` option.
//
// stdio, npy and stats are native: they never enter JavaScript per trace
// (stats computes its figures natively and calls back with small objects).
// chromeTrace is a JavaScript sink object that writes Trace Event Format
// JSON. tee combines sinks of every kind.

const fs = require('fs');
const util = require('util');
const { HalrtError, invalid } = require('./errors');
const { DEFAULT_MAX_ELEMENTS } = require('./format');
const { checkOptions } = require('./args');

// Native sinks are plain frozen descriptions, recognised by the binding.
function describe(kind, fields) {
  return Object.freeze({ halrtSinkKind: kind, ...fields });
}

// Human-readable lines on stdout: `=== key (...) ===` then
// `name: 2x3xf32=[[1 2 3] [4 5 6]]`, the tensor as halrt.format writes it
// (summarised beyond maxElements elements).
// (maxElements is checked with the rest of the sink, by new HalModule.)
function stdio(options) {
  const { maxElements = DEFAULT_MAX_ELEMENTS } = checkOptions(options, 'halrt.sinks.stdio', ['maxElements'], 'options');
  return describe('stdio', { maxElements });
}

// One NumPy .npy file per traced tensor in `directory`, named
// <sequence>_<key prefix>-<key hash>_<index>.npy, never overwritten, and a
// line per file in <directory>/index.jsonl mapping it back to its key
// (src/modules/sinks/npy_sink.h has the rules). bf16 is written as '<u2' raw bits.
function npy(directory) {
  if (typeof directory !== 'string' || directory.length === 0) {
    throw invalid('halrt.sinks.npy: directory must be a non-empty string');
  }
  return describe('npy', { directory });
}

// callback(key, stats, info) with stats = [{name, dtype, shape, count, min,
// max, mean, nanCount, infCount}] computed natively per traced tensor (from
// the device's summary in a summary or health trace: min, max and mean are
// NaN in a health trace).
function stats(callback) {
  if (typeof callback !== 'function') {
    throw invalid('halrt.sinks.stats: callback must be a function');
  }
  return describe('stats', { callback });
}

// Every sink given sees every trace. Native sinks stay native; the
// JavaScript ones (functions, object sinks such as chromeTrace, stats
// callbacks) are all served through one channel, so their traces still
// arrive before each invocation settles.
function tee(...sinks) {
  if (sinks.length === 0) throw invalid('halrt.sinks.tee: give at least one sink');
  sinks.forEach((sink, i) => {
    if (sink === null || (typeof sink !== 'function' && typeof sink !== 'object')) {
      throw invalid(`halrt.sinks.tee: sink ${i} must be a function, an object sink or a halrt.sinks sink`);
    }
  });
  return sinks.length === 1 ? sinks[0] : describe('tee', { sinks: Object.freeze([...sinks]) });
}

// A Trace Event Format file (Perfetto, chrome://tracing): dispatches as
// complete events on one track per device queue, traces as instant events
// (the tensors of summary and health traces also as counter events, so that
// their figures plot over time) and invocations as spans on an
// "invocations" track. Use with
// `profile: true` for dispatch timings. The file is valid JSON after every
// event (it always ends with "]"), so it stays readable if the process ends
// early or the sink is closed mid-run. close() stops writing.
class ChromeTrace {
  constructor(path) {
    if (typeof path !== 'string' || path.length === 0) {
      throw invalid('halrt.sinks.chromeTrace: path must be a non-empty string');
    }
    try {
      this._fd = fs.openSync(path, 'w');
    } catch (error) {
      throw new HalrtError(`halrt.sinks.chromeTrace: cannot open '${path}': ${error.message}`, 'UNAVAILABLE', { cause: error });
    }
    this.path = path;
    this._offset = 1;  // bytes before the closing "\n]"
    this._events = 0;
    this._tracks = new Map();
    fs.writeSync(this._fd, '[\n]', 0);
    this._write({ name: 'process_name', ph: 'M', pid: process.pid, tid: 0, args: { name: 'halrt' } });
    this._write({ name: 'thread_name', ph: 'M', pid: process.pid, tid: 1, args: { name: 'invocations' } });
  }

  _write(event) {
    if (this._fd === undefined) return;
    const text = `${this._events ? ',' : ''}\n${JSON.stringify(event)}`;
    const bytes = Buffer.from(`${text}\n]`);
    fs.writeSync(this._fd, bytes, 0, bytes.length, this._offset);
    this._offset += bytes.length - 2;
    this._events += 1;
  }

  _track(device) {
    let tid = this._tracks.get(device);
    if (tid === undefined) {
      tid = this._tracks.size + 2;
      this._tracks.set(device, tid);
      this._write({ name: 'thread_name', ph: 'M', pid: process.pid, tid, args: { name: `queue ${device}` } });
    }
    return tid;
  }

  trace(key, tensors, info) {
    const ts = info.timeNs / 1000;
    this._write({
      name: key, cat: 'trace', ph: 'i', s: 't', ts, pid: process.pid, tid: 1,
      args: {
        function: info.function, op: info.op, sequence: info.sequence, dropped: info.dropped,
        tensors: tensors.map(({ name, dtype, shape }) => ({ name, dtype, shape })),
      },
    });
    // A summary or health trace also plots: one counter per tensor, named
    // "key/name", its series the summary's figures (NaN and infinite ones
    // left out: JSON has neither).
    for (const { name, summary } of tensors) {
      if (summary === undefined) continue;
      const args = {};
      for (const [series, value] of Object.entries(summary)) {
        if (series !== 'mode' && Number.isFinite(value)) args[series] = value;
      }
      this._write({ name: `${key}/${name}`, cat: 'summary', ph: 'C', ts, pid: process.pid, tid: 1, args });
    }
  }

  timing(event) {
    this._write({
      name: event.kernel, cat: 'dispatch', ph: 'X', ts: event.startNs / 1000, dur: event.durationNs / 1000,
      pid: process.pid, tid: this._track(event.device),
      args: { function: event.function, op: event.op, sequence: event.sequence },
    });
  }

  invocation(event) {
    this._write({
      name: event.function, cat: 'invocation', ph: 'X', ts: event.startNs / 1000, dur: event.durationNs / 1000,
      pid: process.pid, tid: 1, args: { sequence: event.sequence, ok: event.ok },
    });
  }

  close() {
    if (this._fd === undefined) return;
    fs.closeSync(this._fd);
    this._fd = undefined;
  }

  toString() {
    return `ChromeTrace(${this.path})`;
  }

  [util.inspect.custom](depth, options, inspect = util.inspect) {
    const fields = { path: this.path, events: this._events, closed: this._fd === undefined };
    return `ChromeTrace ${inspect(fields, options)}`;
  }
}

function chromeTrace(path) {
  return new ChromeTrace(path);
}

module.exports = { stdio, npy, stats, tee, chromeTrace, ChromeTrace };
