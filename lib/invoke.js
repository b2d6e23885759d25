'use strict';
// fn.invoke(inputs, {signal}): the native invoke plus AbortSignal support.
// Device work cannot be interrupted; an abort settles the promise at once
// with CANCELLED and the outputs, when they arrive, are closed unseen.

const { HalrtError } = require('./errors');

function cancelled(name, signal) {
  return new HalrtError(`${name}: the invocation was aborted`, 'CANCELLED', { cause: signal.reason });
}

function installInvoke(NativeFunction) {
  const nativeInvoke = NativeFunction.prototype.invoke;
  Object.defineProperty(NativeFunction.prototype, 'invoke', {
    value: function invoke(inputs, options = {}) {
      if (options === null || typeof options !== 'object') {
        return Promise.reject(new HalrtError('function.invoke: options must be an object', 'INVALID_ARGUMENT'));
      }
      const { signal } = options;
      if (signal !== undefined && !(signal instanceof AbortSignal)) {
        return Promise.reject(new HalrtError('function.invoke: options.signal must be an AbortSignal', 'INVALID_ARGUMENT'));
      }
      if (signal?.aborted) return Promise.reject(cancelled(this.name, signal));
      // The native invoke reports its failures (a wrong receiver included) as
      // rejections; only failing to make the promise itself throws, and that
      // too must be a rejection.
      let result;
      try {
        result = nativeInvoke.call(this, inputs);
      } catch (error) {
        return Promise.reject(error);
      }
      if (signal === undefined) return result;
      return new Promise((resolve, reject) => {
        const onAbort = () => reject(cancelled(this.name, signal));
        signal.addEventListener('abort', onAbort, { once: true });
        result.then(
          (outputs) => {
            signal.removeEventListener('abort', onAbort);
            if (signal.aborted) {
              for (const output of outputs) output.close();
            } else {
              resolve(outputs);
            }
          },
          (error) => {
            signal.removeEventListener('abort', onAbort);
            reject(error);
          },
        );
      });
    },
    writable: true,
    enumerable: false,
    configurable: true,
  });
}

module.exports = { installInvoke };
