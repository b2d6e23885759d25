'use strict';
// A tour of the foundation API: drivers, a device, tensors, copy and read.
// Run with `npm start`.

const halrt = require('halrt');

async function main() {
  console.log('drivers:');
  for (const { name, available, reason } of halrt.drivers()) {
    console.log(`  ${name.padEnd(12)} ${available ? 'available' : `unavailable: ${reason}`}`);
  }

  const instance = new halrt.Instance();
  const device = instance.createDevice('auto');
  console.log(`\ndevice: ${device.info.name} [${device.info.uri}]`);

  const x = device.tensor(Float32Array.from([1, 2, 3, 4, 5, 6]), [2, 3]);
  const y = device.empty([2, 3], 'f32');
  const ids = device.tensor(new BigInt64Array([1n, -2n, 2n ** 62n]), [3]);
  const half = device.tensor(new Uint16Array([0x3c00, 0xc000]), [2], 'f16');  // 1.0, -2.0 as raw bits
  console.log(`x: ${x.dtype} [${x.shape}] (${x.byteLength} bytes)`);

  await device.copy(x, y);
  const [yData, idsData, halfBits] = await Promise.all([y.read(), ids.read(), half.read()]);
  console.log('y after copy(x, y):', Array.from(yData));
  console.log('ids:', Array.from(idsData, String));
  console.log('f16 bits:', Array.from(halfBits, (b) => `0x${b.toString(16)}`));

  try {
    device.tensor(new Float32Array(5), [2, 3]);
  } catch (error) {
    console.log(`\n${error.name} ${error.code}: ${error.message}`);
  }

  for (const object of [x, y, ids, half, device, instance]) object.close();
  console.log('\nlive objects after close:', halrt.liveObjects());
}

main().catch((error) => {
  console.error(error);
  process.exitCode = 1;
});
