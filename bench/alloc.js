'use strict';
// Per-call allocations: a function whose outputs and locals (9 MiB) are
// allocated on every call, against the same function with every value bound
// to an input, so that a call allocates nothing. The allocating function also
// runs on a device without the buffer cache (HALRT_LOCAL_CACHE_BYTES=0), for
// the figure before the cache.

const { halrt, median, inFlight, roundRobin, builtinModule, value, fillPattern, seconds, row } = require('./common');

const GROUP = 'alloc';
const ELEMENTS = 1 << 18; // f32: 1 MiB per value
const VALUES = 9; // dispatches, each writing one value

// h0 = relu(x); h[i] = h[i-1] + x. `bound`: every h is an input; otherwise
// h0..h7 are locals and h8 the output.
function chain(bound) {
  const inputs = [value('x', [ELEMENTS])];
  const locals = [];
  const body = [];
  let previous = 'x';
  for (let i = 0; i < VALUES; ++i) {
    const target = `h${i}`;
    if (bound) inputs.push(value(target, [ELEMENTS]));
    else if (i < VALUES - 1) locals.push(value(target, [ELEMENTS]));
    body.push(
      i === 0
        ? { op: 'dispatch', kernel: 'k.relu_f32', workgroups: [4], bindings: [previous, target], constants: [ELEMENTS] }
        : {
            op: 'dispatch',
            kernel: 'k.add_f32',
            workgroups: [4],
            bindings: [previous, 'x', target],
            constants: [ELEMENTS],
          },
    );
    previous = target;
  }
  const outputs = bound ? [] : [value(`h${VALUES - 1}`, [ELEMENTS])];
  return { inputs, outputs, locals, body };
}

// A call of `bound` or allocating chain on `device`: returns async () => void
// that invokes once and closes the outputs.
function chainCall(instance, device, bound) {
  const hal = new halrt.HalModule(instance, device, {});
  const description = chain(bound);
  const module = builtinModule(instance, 'a', { chain: description });
  const fn = new halrt.Context(instance, [hal, module]).lookupFunction('a.chain');
  const views = description.inputs.map((_, i) => device.tensor(fillPattern(ELEMENTS, i + 1), [ELEMENTS]));
  return async () => {
    const outputs = await fn.invoke(views);
    for (const output of outputs) output.close();
  };
}

// A device made with the cache turned off (the environment variable is read
// when a device is created).
function uncachedDevice(instance, uri) {
  const saved = process.env.HALRT_LOCAL_CACHE_BYTES;
  process.env.HALRT_LOCAL_CACHE_BYTES = '0';
  try {
    return instance.createDevice(uri);
  } finally {
    if (saved === undefined) delete process.env.HALRT_LOCAL_CACHE_BYTES;
    else process.env.HALRT_LOCAL_CACHE_BYTES = saved;
  }
}

async function allocatingCall({ quick, instance, device, uri }) {
  const calls = quick ? 4 : 16;
  const uncachedCalls = quick ? 2 : 4;
  const rounds = quick ? 3 : 15;
  const uncached = uncachedDevice(instance, uri);
  try {
    const allocating = chainCall(instance, device, false);
    const bound = chainCall(instance, device, true);
    const before = chainCall(instance, uncached, false);
    for (const call of [allocating, bound, before]) await inFlight(call, 2, 1); // warm-up
    const perCall = (call, count) => async () => (await inFlight(call, count, 1)) / count;
    const results = await roundRobin(rounds, {
      allocating: perCall(allocating, calls),
      bound: perCall(bound, calls),
      uncached: perCall(before, uncachedCalls),
    });
    const tAlloc = median(results.allocating);
    const tBound = median(results.bound);
    const tUncached = median(results.uncached);
    const mib = (VALUES * ELEMENTS * 4) / 2 ** 20;
    return [
      row({
        group: GROUP,
        name: `function allocating ${mib} MiB per call vs bound (${device.info.driver})`,
        halrt: `${seconds(tAlloc)}/call`,
        baseline: `${seconds(tBound)}/call bound`,
        ratio: tAlloc / tBound,
        target: { op: '<=', value: 1.1 },
        note:
          `per-call time of a function of ${VALUES} dispatches (relu, then add_f32, 4 workgroups each) each ` +
          `writing f32[${ELEMENTS}], with ${VALUES - 1} locals and 1 output (${mib} MiB allocated per call, ` +
          `not zero-filled: each value's first op writes all of it; the output closed), one invocation in ` +
          `flight, medians of ${rounds} rounds of ` +
          `${calls} calls; baseline: the same dispatches with every value bound to an input (nothing allocated); ` +
          `without the buffer cache (a device made with HALRT_LOCAL_CACHE_BYTES=0) the allocating function ` +
          `takes ${seconds(tUncached)}/call, ${(tUncached / tBound).toFixed(1)}× the bound one`,
      }),
    ];
  } finally {
    uncached.close();
  }
}

module.exports = { allocatingCall };
