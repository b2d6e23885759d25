'use strict';
// The consumer test's CommonJS check (test/consumer/run.sh): require the
// installed package, make a tensor on local-sync and read it back, and check
// which addon file the process mapped (HALRT_CONSUMER_ADDON: the path it must
// be, relative to this project).
const assert = require('assert');
const fs = require('fs');
const path = require('path');
const halrt = require('halrt');

async function main() {
  const instance = new halrt.Instance();
  const device = instance.createDevice('local-sync');
  const x = device.tensor([[1, 2, 3], [4, 5, 6]]);
  assert.deepStrictEqual([x.dtype, x.shape], ['f32', [2, 3]]);
  assert.deepStrictEqual(await x.read(), new Float32Array([1, 2, 3, 4, 5, 6]));
  x.close();
  device.close();
  instance.close();

  const mapped = new Set(fs.readFileSync('/proc/self/maps', 'utf8').split('\n')
    .map((line) => line.split(/\s+/)[5]).filter((file) => file && file.endsWith('.node')));
  const expected = path.resolve(process.env.HALRT_CONSUMER_ADDON);
  assert.deepStrictEqual([...mapped], [expected], 'the addon file the process loaded');
  console.log(`consumer.cjs: ok (${path.relative(process.cwd(), expected)})`);
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
