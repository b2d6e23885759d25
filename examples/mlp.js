'use strict';
// The main job: run a two-layer MLP (examples/mlp.halrt.json, built-in
// kernels) on the default device with a debug sink, print every traced tensor
// as it arrives, and write a Chrome trace (dispatch timings, traces and the
// invocation; open it in https://ui.perfetto.dev or chrome://tracing).
// Run with `npm start`.
//   node examples/mlp.js [--device URI] [--out FILE]

const path = require('path');
const { parseArgs } = require('util');
const halrt = require('halrt');

const { values: args } = parseArgs({
  options: {
    device: { type: 'string', default: 'auto' },
    out: { type: 'string', default: 'mlp-trace.json' },
  },
});

// Deterministic "weights" so runs are comparable.
function pattern(length, scale, offset) {
  return Float32Array.from({ length }, (_, i) => (((i * 37 + offset) % 17) - 8) * scale);
}

// `probs: 4x3xf32=[[...] ...]`, as halrt.sinks.stdio() and `halrt run` print tensors.
function formatTensor({ name, dtype, shape, data }) {
  return `  ${name}: ${[...shape, dtype].join('x')}=${halrt.format(data, { dtype, shape })}`;
}

async function main() {
  const instance = new halrt.Instance();
  const device = instance.createDevice(args.device);
  console.log(`device: ${device.info.name} (${device.info.uri})\n`);

  let traces = 0;
  const chromeTrace = halrt.sinks.chromeTrace(args.out);
  const hal = new halrt.HalModule(instance, device, {
    debugSink: halrt.sinks.tee(
      // Runs on the JS thread, in program order, before invoke() resolves.
      (key, tensors, info) => {
        console.log(`=== ${key} (invocation ${info.sequence}, ${info.function} op ${info.op}) ===`);
        for (const tensor of tensors) console.log(formatTensor(tensor));
        traces += 1;
      },
      chromeTrace,
    ),
    profile: true,  // dispatch timings for the Chrome trace
  });
  const mlp = halrt.Module.load(instance, path.join(__dirname, 'mlp.halrt.json'));
  const context = new halrt.Context(instance, [hal, mlp]);
  const main = context.lookupFunction('mlp.main');

  const x = device.tensor(pattern(32, 0.25, 1), [4, 8]);
  const w1 = device.tensor(pattern(128, 0.1, 5), [8, 16]);
  const w2 = device.tensor(pattern(48, 0.1, 11), [16, 3]);
  const [probs] = await main.invoke([x, w1, w2]);
  const result = await probs.read();
  console.log('\nresult (rows sum to 1):');
  console.log(formatTensor({ name: 'probs', dtype: probs.dtype, shape: probs.shape, data: result }));

  chromeTrace.close();
  console.log(`\n${traces} traces; wrote the Chrome trace ${args.out}`);
  for (const object of [probs, x, w1, w2, main, context, mlp, hal, device, instance]) object.close();
}

main().catch((error) => {
  console.error(error);
  process.exitCode = 1;
});
