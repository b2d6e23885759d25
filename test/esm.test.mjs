// The package entry points, as a user reaches them by name: `import` gets
// lib/index.mjs and `require` lib/index.js (package.json "exports"), and both
// give the same objects. The named imports below fail to link if the ES
// module misses one of them.
import assert from 'node:assert';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import halrtDefault, * as esm from 'halrt';
import { drivers, dtypes, liveObjects, Instance, sinks } from 'halrt';

const require = createRequire(import.meta.url);
const ROOT = path.join(path.dirname(fileURLToPath(import.meta.url)), '..');

describe('ES module and CommonJS entry points', () => {
  it('`import` resolves to lib/index.mjs and `require` to lib/index.js', () => {
    assert.strictEqual(fileURLToPath(import.meta.resolve('halrt')), path.join(ROOT, 'lib', 'index.mjs'));
    assert.strictEqual(require.resolve('halrt'), path.join(ROOT, 'lib', 'index.js'));
  });

  it("the ES module's named exports are exactly require('halrt')'s keys, the same objects", () => {
    const cjs = require('halrt');
    const named = Object.keys(esm).filter((name) => name !== 'default');
    assert.deepStrictEqual(named.sort(), Object.keys(cjs).sort());
    for (const name of named) assert.strictEqual(esm[name], cjs[name], name);
  });

  it("the default export is require('halrt') itself", () => {
    assert.strictEqual(halrtDefault, require('halrt'));
    assert.strictEqual(esm.default, halrtDefault);
  });

  it('the imported API works: drivers, dtypes, liveObjects, sinks and an Instance', () => {
    assert.ok(drivers().some(({ name, available }) => name === 'local-sync' && available));
    assert.ok(dtypes.includes('f32'));
    assert.strictEqual(typeof sinks.stdio, 'function');
    assert.strictEqual(typeof liveObjects().instance, 'number');
    const instance = new Instance();
    const device = instance.createDevice('local-sync');
    assert.strictEqual(device.info.driver, 'local-sync');
    device.close();
    instance.close();
  });
});
