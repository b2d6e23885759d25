'use strict';
// Profile repeated invocations: per-dispatch timings in a Chrome trace
// (Perfetto / chrome://tracing), natively computed statistics of each traced
// tensor, and a guard that rejects an invocation whose traces hold NaN or
// Inf.
//   node examples/profile.js [TRACE.json]

const path = require('path');
const halrt = require('halrt');

async function main() {
  const file = process.argv[2] ?? 'profile-trace.json';
  const instance = new halrt.Instance();
  const device = instance.createDevice('auto');
  const chromeTrace = halrt.sinks.chromeTrace(file);
  const hal = new halrt.HalModule(instance, device, {
    debugSink: halrt.sinks.tee(
      halrt.sinks.stats((key, stats, info) => {
        if (info.sequence !== 1) return;  // print the first invocation only
        for (const s of stats) {
          // min and max are elements of the (f32) tensor; the mean is a double.
          const { formatNumber } = halrt;
          console.log(`${key} ${s.name}: min ${formatNumber(s.min, s.dtype)} max ${formatNumber(s.max, s.dtype)} mean ${formatNumber(s.mean, 'f64')}`);
        }
      }),
      chromeTrace,
    ),
    profile: true,
    nonFinite: 'reject',
  });
  const mlp = halrt.Module.load(instance, path.join(__dirname, 'mlp.halrt.json'));
  const context = new halrt.Context(instance, [hal, mlp]);
  const main = context.lookupFunction('mlp.main');
  const ones = (length) => new Float32Array(length).fill(0.25);
  const inputs = [device.tensor(ones(32), [4, 8]), device.tensor(ones(128), [8, 16]), device.tensor(ones(48), [16, 3])];
  for (let i = 0; i < 20; ++i) {
    for (const output of await main.invoke(inputs)) output.close();
  }
  const bad = device.tensor(new Float32Array(32).fill(Number.POSITIVE_INFINITY), [4, 8]);
  try {
    await main.invoke([bad, inputs[1], inputs[2]]);
  } catch (error) {
    console.log(`\nguarded: ${error.code}: ${error.message}`);
  }
  chromeTrace.close();
  console.log(`wrote ${file}`);
  for (const object of [bad, ...inputs, main, context, mlp, hal, device, instance]) object.close();
}

main().catch((error) => {
  console.error(error);
  process.exitCode = 1;
});
