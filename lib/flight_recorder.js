'use strict';
// hal.flightRecorder: null when the HalModule has no flight recorder, else
// a FlightRecorder over the native methods that src/napi/js_recorder.h
// defines (taken off the HalModule prototype here).

const binding = require('./binding');
const { HalrtError } = require('./errors');

// Only the hal.flightRecorder getter below makes FlightRecorders.
const MAKE = Symbol('FlightRecorder');

class FlightRecorder {
  #hal;
  #state;
  #dump;
  #setting;

  constructor(token, hal, state, dump, setting) {
    if (token !== MAKE) {
      throw new HalrtError('new FlightRecorder: read hal.flightRecorder instead', 'INVALID_ARGUMENT');
    }
    this.#hal = hal;
    this.#state = state;
    this.#dump = dump;
    this.#setting = setting;
  }

  // `self`'s private fields, when it is a FlightRecorder; else the
  // HalrtError the native classes give a wrong receiver.
  static #of(self, member) {
    if (!(self instanceof Object) || !(#hal in self)) {
      throw new HalrtError(`flightRecorder.${member}: \`this\` is not a FlightRecorder`, 'INVALID_ARGUMENT');
    }
    return self;
  }

  // The setting: how many traces, or how many bytes of copies, it keeps
  // (the other is undefined).
  get traces() {
    return FlightRecorder.#of(this, 'traces').#setting.traces;
  }

  get bytes() {
    return FlightRecorder.#of(this, 'bytes').#setting.bytes;
  }

  // What it holds now, and how many traces were too large to keep.
  get heldTraces() {
    const self = FlightRecorder.#of(this, 'heldTraces');
    return self.#state.call(self.#hal).heldTraces;
  }

  get heldBytes() {
    const self = FlightRecorder.#of(this, 'heldBytes');
    return self.#state.call(self.#hal).heldBytes;
  }

  get skipped() {
    const self = FlightRecorder.#of(this, 'skipped');
    return self.#state.call(self.#hal).skipped;
  }

  // Delivers the held traces to the sink (info.recorded: true) and resolves
  // with how many, once the sink has them. A wrong receiver rejects.
  dump() {
    try {
      const self = FlightRecorder.#of(this, 'dump');
      return self.#dump.call(self.#hal);
    } catch (error) {
      return Promise.reject(error);
    }
  }
}

// hal.flightRecorder: made on first read from the binding's two methods,
// which leave the prototype.
const { HalModule } = binding;
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
      : new FlightRecorder(MAKE, this, state, dump, now.traces !== undefined ? { traces: now.traces } : { bytes: now.bytes });
    recorders.set(this, recorder);
    return recorder;
  },
  enumerable: false,
  configurable: true,
});

module.exports = { FlightRecorder };
