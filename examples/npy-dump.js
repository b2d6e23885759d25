'use strict';
// Dump every dispatch's output of the MLP to NumPy .npy files, without
// changing the module (traceDispatches) and without entering JavaScript per
// trace (the native npy sink). Load them in Python with numpy.load.
//   node examples/npy-dump.js [DIR]

const fs = require('fs');
const os = require('os');
const path = require('path');
const halrt = require('halrt');

async function main() {
  const dir = process.argv[2] ?? fs.mkdtempSync(path.join(os.tmpdir(), 'halrt-npy-'));
  const instance = new halrt.Instance();
  const device = instance.createDevice('auto');
  const hal = new halrt.HalModule(instance, device, {
    debugSink: halrt.sinks.npy(dir),
    traceDispatches: true,  // keys "main:<op>:<kernel>"
  });
  const mlp = halrt.Module.load(instance, path.join(__dirname, 'mlp.halrt.json'));
  const context = new halrt.Context(instance, [hal, mlp]);
  const main = context.lookupFunction('mlp.main');
  const fill = (length, scale) => Float32Array.from({ length }, (_, i) => Math.sin(i) * scale);
  const inputs = [
    device.tensor(fill(32, 1), [4, 8]),
    device.tensor(fill(128, 0.5), [8, 16]),
    device.tensor(fill(48, 0.5), [16, 3]),
  ];
  const [probs] = await main.invoke(inputs);
  // index.jsonl maps each file back to its trace key (one JSON line per file).
  const index = fs.readFileSync(path.join(dir, 'index.jsonl'), 'utf8').split('\n').filter(Boolean).map((line) => JSON.parse(line));
  for (const { file, key } of index) {
    const { dtype, shape } = halrt.npy.read(path.join(dir, file));
    console.log(`${path.join(dir, file)}: ${key} ${dtype} [${shape}]`);
  }
  for (const object of [probs, ...inputs, main, context, mlp, hal, device, instance]) object.close();
}

main().catch((error) => {
  console.error(error);
  process.exitCode = 1;
});
