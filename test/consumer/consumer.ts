// The consumer test's strict TypeScript check (test/consumer/run.sh):
// compiled by tsc against the installed package's index.d.ts (tsconfig.json
// beside it: strict, module nodenext), then run.
import { load, Instance, HalrtError } from 'halrt';

const m = await load('node_modules/halrt/examples/mlp.halrt.json', { device: 'local-sync' });
try {
  const [probs] = await m.main(new Float32Array(32).fill(1), new Float32Array(128).fill(0.1),
    Float32Array.from({ length: 48 }, (_, i) => i % 3));
  if (probs === undefined) throw new Error('main gave no output');
  const values = await probs.read();
  if (values.length !== 12) throw new Error(`probs has ${values.length} values`);
} finally {
  m.close();
}

const instance = new Instance();
const device = instance.createDevice('local-sync');
const x = device.tensor([[1, 2], [3, 4]]);
const data: Float32Array = await x.read();
const first: number = data[0];
if (first !== 1 || data.length !== 4) throw new Error(`read() gave ${data.join(', ')}`);
try {
  device.tensor([[1, 2], [3]]);
  throw new Error('a ragged array was accepted');
} catch (error) {
  if (!(error instanceof HalrtError) || error.code !== 'INVALID_ARGUMENT') throw error;
}
x.close();
device.close();
instance.close();
console.log('consumer.ts: ok');
