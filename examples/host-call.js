'use strict';
// A program that calls JavaScript: the MLP's probabilities go to a host
// function that picks each row's best class, between the program's ops,
// and a trace shows what came back. The same program could call a function
// of another program module ({"op": "call", "callee": "lib.f"}).
//   node examples/host-call.js

const path = require('path');
const halrt = require('halrt');

async function main() {
  const instance = new halrt.Instance();
  const host = new halrt.HostModule(instance, 'host', {
    // probs: f32[4, 3] (4 rows of 3 class probabilities) -> best: i32[4]
    argmax: {
      inputs: [{ name: 'probs', dtype: 'f32', shape: [4, 3] }],
      outputs: [{ name: 'best', dtype: 'i32', shape: [4] }],
      impl: async (probs) => {
        const best = [];
        for (let row = 0; row < 4; ++row) {
          const p = Array.from(probs.data.subarray(3 * row, 3 * row + 3));
          best.push(p.indexOf(Math.max(...p)));
        }
        return [best];
      },
    },
  });
  // mlp.main then host.argmax, as one program.
  const classify = new halrt.ModuleBuilder('classify')
    .function('main', (f) => f
      .input('x', 'f32', [4, 8]).input('w1', 'f32', [8, 16]).input('w2', 'f32', [16, 3])
      .output('best', 'i32', [4]).local('probs', 'f32', [4, 3])
      .call('mlp.main', ['x', 'w1', 'w2'], ['probs'])
      .call('host.argmax', ['probs'], ['best'])
      .trace('best', ['best']))
    .build(instance);
  const m = await halrt.load(path.join(__dirname, 'mlp.halrt.json'), {
    imports: [host],
    debugSink: (key, tensors) => console.log(`${key}: ${halrt.format(tensors[0].data, { dtype: tensors[0].dtype, shape: tensors[0].shape })}`),
  });
  // The loaded context holds mlp; a second context links it with the rest.
  const context = new halrt.Context(instance, [m.halModule, host, m.module, classify]);
  const x = Float32Array.from({ length: 32 }, (_, i) => Math.sin(i));
  const w1 = Float32Array.from({ length: 128 }, (_, i) => Math.cos(i) / 4);
  const w2 = Float32Array.from({ length: 48 }, (_, i) => (i % 5) - 2);
  const [best] = await context.lookupFunction('classify.main').invoke([x, w1, w2], { read: true });
  console.log('best class of each row:', Array.from(best));
  context.close();
  classify.close();
  m.close();
  host.close();
  instance.close();
}

main().catch((error) => {
  console.error(error);
  process.exitCode = 1;
});
