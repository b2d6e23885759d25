// The consumer test's ES module check (test/consumer/run.sh): named imports
// from the installed package, and halrt.load() of the example module it
// ships, run on local-sync.
import assert from 'node:assert';
import { drivers, dtypes, liveObjects, Instance, sinks, load } from 'halrt';
import halrt from 'halrt';

assert.strictEqual(typeof drivers, 'function');
assert.ok(drivers().some((driver) => driver.name === 'local-sync' && driver.available));
assert.ok(dtypes.includes('f32'), 'dtypes lists f32');
assert.strictEqual(typeof liveObjects, 'function');
assert.strictEqual(typeof sinks.stdio, 'function');
assert.strictEqual(Instance, halrt.Instance);
assert.strictEqual(load, halrt.load);

const m = await load('node_modules/halrt/examples/mlp.halrt.json', { device: 'local-sync' });
const [probs] = await m.main(new Float32Array(32).fill(1), new Float32Array(128).fill(0.1),
  Float32Array.from({ length: 48 }, (_, i) => i % 3));
const values = await probs.read();
// x is ones, w1 all 0.1, so every hidden value is 0.8 and the logits of
// each row are 12.8 * [0, 1, 2] (w2[j][k] = k).
const logits = [0, 12.8, 25.6];
const total = logits.reduce((sum, v) => sum + Math.exp(v), 0);
const expected = Array.from({ length: 12 }, (_, i) => Math.exp(logits[i % 3]) / total);
assert.strictEqual(values.length, 12);
values.forEach((value, i) => assert.ok(Math.abs(value - expected[i]) < 1e-6, `probs[${i}] = ${value}, expected ${expected[i]}`));
m.close();
console.log('consumer.mjs: ok');
