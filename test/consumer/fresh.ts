// A TypeScript app in a project that installed only halrt (no @types/node):
// `tsc --strict --noEmit fresh.ts` with no other option must pass
// (test/consumer/run.sh). It is compiled, never run.
import * as halrt from 'halrt';

async function main(): Promise<void> {
  const instance = new halrt.Instance();
  const device = instance.createDevice('auto');
  const x = device.tensor([[1, 2], [3, 4]]);
  const big = device.tensor([BigInt(1), BigInt(2)]);
  const values: halrt.NestedArray<number> = await x.toArray();
  const wide: BigInt64Array = await big.read();
  const controller = new AbortController();
  const m = await halrt.load('mlp.halrt.json');
  const outputs = await m.main({ x }, { read: true, named: true, signal: controller.signal });
  console.log(values, wide, outputs);
  halrt.npy.write('x.npy', [1, 2, 3]);
  x[Symbol.dispose]();
  const disposable: Disposable = big;
  disposable[Symbol.dispose]();
  m.close();
  device.close();
  instance.close();
}
void main();
