'use strict';
// hal.flightRecorder: null when the HalModule has no flight recorder, else
// a FlightRecorder over the native methods that src/napi/js_recorder.h
// defines (taken off the HalModule prototype here).

class FlightRecorder {
  #hal;
  #state;
  #dump;
  #setting;

  constructor(hal, state, dump, setting) {
    this.#hal = hal;
    this.#state = state;
    this.#dump = dump;
    this.#setting = setting;
  }

  // The setting: how many traces, or how many bytes of copies, it keeps
  // (the other is undefined).
  get traces() {
    return this.#setting.traces;
  }

  get bytes() {
    return this.#setting.bytes;
  }

  // What it holds now, and how many traces were too large to keep.
  get heldTraces() {
    return this.#state.call(this.#hal).heldTraces;
  }

  get heldBytes() {
    return this.#state.call(this.#hal).heldBytes;
  }

  get skipped() {
    return this.#state.call(this.#hal).skipped;
  }

  // Delivers the held traces to the sink (info.recorded: true) and resolves
  // with how many, once the sink has them.
  dump() {
    return this.#dump.call(this.#hal);
  }
}

function installFlightRecorder(HalModule) {
  const state = HalModule.prototype.flightRecorderState;
  const dump = HalModule.prototype.flightRecorderDump;
  delete HalModule.prototype.flightRecorderState;
  delete HalModule.prototype.flightRecorderDump;
  const recorders = new WeakMap();
  Object.defineProperty(HalModule.prototype, 'flightRecorder', {
    get() {
      if (recorders.has(this)) return recorders.get(this);
      const now = state.call(this);
      const recorder = now === null
        ? null
        : new FlightRecorder(this, state, dump, now.traces !== undefined ? { traces: now.traces } : { bytes: now.bytes });
      recorders.set(this, recorder);
      return recorder;
    },
    enumerable: false,
    configurable: true,
  });
}

module.exports = { installFlightRecorder, FlightRecorder };
