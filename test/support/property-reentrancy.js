#!/usr/bin/env node
'use strict';
// The re-entrancy property, run by test/property.test.js in a child process
// (a crash must fail that test, not end the mocha run): getters, Proxies
// and toJSON methods that close objects (or transfer buffers) while a
// method reads its arguments. Each call either succeeds or fails with a
// HalrtError; the process never crashes and nothing leaks.
//
//   node --expose-gc test/support/property-reentrancy.js
//
// Seeded like the suite (HALRT_PROPERTY_SEED, HALRT_PROPERTY_RUNS). Every
// case is written to stderr before it runs: after a crash, the last line
// names the culprit. Exit status 0 when the property holds, 1 when not.

const fs = require('fs');
const fc = require('fast-check');
const halrt = require('../..');
const { checkProperty, assertHalrtError, attempt, assertNoLeak } = require('./property');

const SCENARIOS = [
  'tensor.shape', 'empty.shape', 'tensor.detach', 'tensor.resize', 'invoke.inputs', 'invoke.inputsProxy',
  'invoke.options', 'context.modules', 'halModule.debugSink', 'halModule.traceDispatches', 'fromObject.toJSON',
  'sink.trace',
];
const VICTIM_WEIGHTS = { device: 3, fn: 3, context: 2, view0: 2, view1: 2, hal: 2, instance: 2, module: 1, none: 1 };
const VICTIMS = Object.keys(VICTIM_WEIGHTS);

function logCase(value) {
  fs.writeSync(2, `[property reentrancy] ${fc.stringify(value)}\n`);
}

const description = new halrt.ModuleBuilder('r')
  .executable('k', { local: { builtin: true }, cuda: { builtin: true } })
  .function('add', (f) => f.input('a', 'f32', [4]).input('b', 'f32', [4]).output('c', 'f32', [4])
    .dispatch('k.add_f32', { workgroups: [2], bindings: ['a', 'b', 'c'], constants: [4] })
    .trace('sum', ['c']))
  .toObject();

async function main() {
  const baseline = halrt.liveObjects();
  const property = fc.asyncProperty(
    fc.record({
      uri: fc.constantFrom('local-sync', 'local-task?workers=2'),
      scenario: fc.constantFrom(...SCENARIOS),
      victim: fc.oneof(...VICTIMS.map((victim) => ({ weight: VICTIM_WEIGHTS[victim], arbitrary: fc.constant(victim) }))),
      // tensor() and empty() on a device nothing else holds (no views, no HAL module)
      bare: fc.oneof({ weight: 2, arbitrary: fc.constant(true) }, { weight: 1, arbitrary: fc.constant(false) }),
      gc: fc.oneof({ weight: 1, arbitrary: fc.constant(true) }, { weight: 2, arbitrary: fc.constant(false) }),
    }),
    async (spec) => {
      logCase(spec);
      const made = [];
      const instance = new halrt.Instance();
      made.push(instance);
      try {
        const device = instance.createDevice(spec.uri);
        const bare = instance.createDevice(spec.uri);
        made.push(device, bare);
        const receiver = spec.bare ? bare : device;
        const objects = { instance, device: receiver };
        const sinkCalls = [];
        const close = () => {
          if (spec.victim !== 'none') objects[spec.victim].close();
          if (spec.gc) global.gc();
        };
        const hal = new halrt.HalModule(instance, device, {
          debugSink(key) {
            sinkCalls.push(key);
            if (spec.scenario === 'sink.trace') close();
          },
        });
        const module = halrt.Module.fromObject(instance, description);
        const context = new halrt.Context(instance, [hal, module]);
        const fn = context.lookupFunction('r.add');
        const view0 = device.tensor(Float32Array.of(1, 2, 3, 4), [4]);
        const view1 = device.tensor(Float32Array.of(-1, -2, -3, -4), [4]);
        made.push(hal, module, context, fn, view0, view1);
        Object.assign(objects, { hal, module, context, fn, view0, view1 });

        const gettered = (value) => {
          const array = [value[0]];
          Object.defineProperty(array, 1, { get: () => (close(), value[1]), enumerable: true });
          return array;
        };
        let call;
        switch (spec.scenario) {
          case 'tensor.shape': {
            const shape = [];
            Object.defineProperty(shape, 0, { get: () => (close(), 4), enumerable: true });
            call = () => receiver.tensor(new Float32Array(4), shape);
            break;
          }
          case 'empty.shape': {
            const shape = [];
            Object.defineProperty(shape, 0, { get: () => (close(), 4), enumerable: true });
            call = () => receiver.empty(shape, 'f32');
            break;
          }
          case 'tensor.detach': {
            const data = new Float32Array(4);
            const shape = [];
            Object.defineProperty(shape, 0, {
              get: () => (close(), structuredClone(data.buffer, { transfer: [data.buffer] }), 4), enumerable: true,
            });
            call = () => receiver.tensor(data, shape);
            break;
          }
          case 'tensor.resize': {
            const buffer = new ArrayBuffer(16, { maxByteLength: 64 });
            const data = new Float32Array(buffer);
            const shape = [];
            Object.defineProperty(shape, 0, { get: () => (close(), buffer.resize(0), 4), enumerable: true });
            call = () => receiver.tensor(data, shape);
            break;
          }
          case 'invoke.inputs':
            call = () => fn.invoke(gettered([view0, view1]));
            break;
          case 'invoke.inputsProxy':
            call = () => fn.invoke(new Proxy([view0, view1], { get: (t, k) => (k === '1' && close(), t[k]) }));
            break;
          case 'invoke.options':
            call = () => fn.invoke([view0, view1], { get signal() { close(); return undefined; } });
            break;
          case 'context.modules':
            call = () => new halrt.Context(instance, gettered([hal, module]));
            break;
          case 'halModule.debugSink':
            call = () => new halrt.HalModule(instance, receiver, { get debugSink() { close(); return () => {}; } });
            break;
          case 'halModule.traceDispatches':
            call = () => new halrt.HalModule(instance, receiver, { get traceDispatches() { close(); return true; } });
            break;
          case 'fromObject.toJSON':
            call = () => halrt.Module.fromObject(instance, { toJSON: () => (close(), description) });
            break;
          default: // sink.trace: the debug sink closes the victim while the invocation is in flight
            call = () => fn.invoke([view0, view1]);
        }
        const result = attempt(call);
        let value = result.value;
        let error = result.ok ? undefined : result.error;
        if (result.ok && value instanceof Promise) {
          try {
            value = await value;
          } catch (rejection) {
            error = rejection;
            value = undefined;
          }
        }
        if (error !== undefined) assertHalrtError(error);
        for (const made_ of [value].flat()) if (made_ && typeof made_.close === 'function') made.push(made_);
        // The runtime still works: the views read, a second invocation settles.
        for (const view of [view0, view1]) {
          const read = attempt(() => view.read());
          if (!read.ok) assertHalrtError(read.error);
          else await read.value.catch((rejection) => assertHalrtError(rejection));
        }
        const again = await fn.invoke([view0, view1]).then((outputs) => outputs, (rejection) => assertHalrtError(rejection));
        if (Array.isArray(again)) made.push(...again);
      } finally {
        for (const object of made.reverse()) object.close();
        await assertNoLeak(baseline);
      }
    },
  );
  await checkProperty(property, 100, { command: 'node --expose-gc test/support/property-reentrancy.js' });
}

main().then(
  () => process.exit(0),
  (error) => {
    process.stderr.write(`${error && error.message}\n`);
    process.exit(1);
  },
);
