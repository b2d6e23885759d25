'use strict';
// The command line (bin/halrt.js, lib/cli.js), run as a child process:
// `halrt devices` and `halrt run` with JSON and .npy inputs, --output,
// --trace, --profile and --repeat, `halrt diff`, and the exit codes: 0 ok,
// 2 bad arguments or files (one line on stderr), 1 a run that failed or
// devices that diverge.
const assert = require('assert');
const fs = require('fs');
const os = require('os');
const path = require('path');
const { spawnSync } = require('child_process');
const halrt = require('..');
const npy = require('../lib/npy');
const { toF16Bits: f16Bits, toBF16Bits: bf16Bits } = require('../lib/half');
const {
  DEVICE_URIS, FAKE_CUDA, assertClose, buildNativeFixtures, npyFileName, plantedModule, randomFloats, readNpyIndex,
  reference,
} = require('./helpers');

const ROOT = path.join(__dirname, '..');
const BIN = path.join(ROOT, 'bin', 'halrt.js');
const EXAMPLE = path.join(ROOT, 'examples', 'mlp.halrt.json');

function halrtCli(args, options = {}) {
  const result = spawnSync(process.execPath, [BIN, ...args], {
    encoding: 'utf8', timeout: 30000, cwd: options.cwd ?? ROOT, env: { ...process.env, ...options.env },
  });
  assert.strictEqual(result.error, undefined, String(result.error));
  assert.strictEqual(result.signal, null, `halrt ${args.join(' ')} was killed: ${result.stderr}`);
  return result;
}

/** Asserts exit code 2 and exactly one line on stderr that includes every part. */
function assertUsageError(result, ...parts) {
  assert.strictEqual(result.status, 2, `exit code (stderr: ${result.stderr})`);
  assert.strictEqual(result.stdout, '');
  const lines = result.stderr.split('\n');
  assert.strictEqual(lines.length, 2, `one line on stderr: ${JSON.stringify(result.stderr)}`);
  assert.strictEqual(lines[1], '');
  for (const part of parts) assert.ok(lines[0].includes(part), `${JSON.stringify(lines[0])} lacks ${JSON.stringify(part)}`);
}

/** probs = softmax_rows(relu(x·w1)·w2), as examples/mlp.halrt.json computes it. */
function mlpReference(x, w1, w2) {
  const hidden = reference.relu(reference.matmul(x, w1, 4, 8, 16));
  const logits = reference.matmul(hidden, w2, 4, 16, 3);
  return { hidden, logits, probs: reference.softmaxRows(logits, 4, 3) };
}

/**
 * "name: 4x3xf32=[[a b c] ...]" -> {name, dtype, shape, values}, the nesting
 * checked against the shape (finite values only: the text is read as JSON).
 */
function parseOutputLine(line) {
  const match = /^(\w+): ((?:\d+x)*)(\w+)=(.*)$/.exec(line);
  assert.ok(match, `output line ${JSON.stringify(line)}`);
  const shape = match[2].split('x').filter(Boolean).map(Number);
  const nested = JSON.parse(match[4].replace(/ /g, ','));
  const inferred = [];
  for (let level = nested; Array.isArray(level); level = level[0]) inferred.push(level.length);
  assert.deepStrictEqual(inferred, shape, `the nesting of ${JSON.stringify(line)}`);
  return { name: match[1], dtype: match[3], shape, values: nested.flat(Infinity) };
}

/** A module `name` whose main copies each input [name, dtype, shape] to output <name>_out. */
function copyModule(name, specs) {
  return {
    format: 'halrt.module/1',
    name,
    functions: {
      main: {
        inputs: specs.map(([input, dtype, shape]) => ({ name: input, dtype, shape })),
        outputs: specs.map(([input, dtype, shape]) => ({ name: `${input}_out`, dtype, shape })),
        body: specs.map(([input]) => ({ op: 'copy', source: input, target: `${input}_out` })),
      },
    },
  };
}

describe('halrt CLI', function () {
  this.timeout(60000);
  let dir;
  let files;
  let x;
  let w1;
  let w2;
  let expected;
  let module; // examples/mlp.halrt.json with CUDA built-ins too, for every device URI

  before(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'halrt-cli-'));
    x = randomFloats(32, 101, 2);
    w1 = randomFloats(128, 102, 1);
    w2 = randomFloats(48, 103, 1);
    expected = mlpReference(x, w1, w2);
    files = {};
    for (const [name, data, shape] of [['x', x, [4, 8]], ['w1', w1, [8, 16]], ['w2', w2, [16, 3]]]) {
      files[name] = path.join(dir, `${name}.npy`);
      fs.writeFileSync(files[name], npy.serialize({ dtype: 'f32', shape, data }));
    }
    const description = JSON.parse(fs.readFileSync(EXAMPLE, 'utf8'));
    for (const kinds of Object.values(description.executables)) kinds.cuda ??= { builtin: true };
    module = path.join(dir, 'mlp.halrt.json');
    fs.writeFileSync(module, JSON.stringify(description));
  });
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  const inputs = () => [`--input=x=@${files.x}`, `--input=w1=@${files.w1}`, `--input=w2=@${files.w2}`];

  it('`devices` exits 0 and lists every driver with its availability, and the CPU devices\' properties', () => {
    const result = halrtCli(['devices']);
    assert.strictEqual(result.status, 0, result.stderr);
    assert.strictEqual(result.stderr, '');
    const lines = result.stdout.trimEnd().split('\n');
    for (const { name, available } of halrt.drivers()) {
      const index = lines.findIndex((line) => line.startsWith(`${name}: `));
      assert.ok(index >= 0, `${name} is listed: ${result.stdout}`);
      assert.strictEqual(lines[index].startsWith(`${name}: ${available ? 'available' : 'unavailable ('}`), true, lines[index]);
      // A driver's lines: its own, then indented ones (cuda's "  nvrtc: ..." first).
      const end = lines.findIndex((line, i) => i > index && !line.startsWith('  '));
      const own = lines.slice(index + 1, end < 0 ? lines.length : end);
      if (name === 'cuda') assert.match(own[0], /^ {2}nvrtc: (available \(\d+\.\d+\)|unavailable \(.+\))$/);
      if (available) assert.ok(own.some((line) => new RegExp(`^  driver=${name} kind=\\w+ name=.+ uri=${name}`).test(line)), own.join('\n'));
    }
    assert.match(result.stdout, /^local-sync: available\n  driver=local-sync kind=local name=.* uri=local-sync workerCount=1 totalMemory=[1-9]\d*$/m);
    assert.match(result.stdout, /^local-task: available\n  driver=local-task kind=local name=.* uri=local-task\?workers=\d+ workerCount=\d+ totalMemory=[1-9]\d*$/m);
  });

  it('`run examples/mlp.halrt.json` with JSON and @npy inputs prints the output, equal to the JavaScript reference', () => {
    const json = (data, rows, cols) => JSON.stringify(Array.from({ length: rows }, (_, r) => Array.from(data.subarray(r * cols, (r + 1) * cols))));
    const result = halrtCli(['run', EXAMPLE, '--function', 'main', '--device', 'local-sync',
      '--input', `x=${json(x, 4, 8)}`, '--input', `w1=@${files.w1}`, '-i', `w2=${json(w2, 16, 3)}`]);
    assert.strictEqual(result.status, 0, result.stderr);
    assert.strictEqual(result.stderr, '');
    const lines = result.stdout.trimEnd().split('\n');
    assert.strictEqual(lines.length, 1, result.stdout);
    const output = parseOutputLine(lines[0]);
    assert.deepStrictEqual([output.name, output.dtype, output.shape], ['probs', 'f32', [4, 3]]);
    // Printed as the shortest decimals that read back as the f32 values.
    assertClose(output.values, expected.probs, { rtol: 1e-5, atol: 1e-6, what: 'probs' });
  });

  for (const uri of DEVICE_URIS) {
    it(`--output DIR writes <name>.npy files that parse back to the outputs (${uri})`, () => {
      const out = path.join(dir, `out-${uri.replace(/\W/g, '_')}`);
      const result = halrtCli(['run', module, '--device', uri, ...inputs(), '--output', out]);
      assert.strictEqual(result.status, 0, result.stderr);
      assert.strictEqual(result.stdout, `wrote ${path.join(out, 'probs.npy')}\n`);
      assert.deepStrictEqual(fs.readdirSync(out), ['probs.npy']);
      const probs = npy.parse(fs.readFileSync(path.join(out, 'probs.npy')));
      assert.deepStrictEqual([probs.dtype, probs.shape], ['f32', [4, 3]]);
      assertClose(probs.data, expected.probs, { rtol: 1e-5, atol: 1e-7, what: 'probs.npy' });
    });

    it(`--trace npy:DIR with --repeat 3 writes every traced tensor of every invocation (${uri})`, () => {
      const traces = path.join(dir, `traces-${uri.replace(/\W/g, '_')}`);
      const result = halrtCli(['run', module, '--device', uri, ...inputs(), '--trace', `npy:${traces}`, '--repeat', '3']);
      assert.strictEqual(result.status, 0, result.stderr);
      assert.match(result.stdout, /^probs: 4x3xf32=\[\[/);
      const names = fs.readdirSync(traces).sort();
      assert.strictEqual(names.length, 10, names.join(' '));
      const sequences = [...new Set(readNpyIndex(traces).map(({ sequence }) => sequence))].sort((a, b) => a - b);
      assert.strictEqual(sequences.length, 3);
      const keys = ['layer1', 'logits', 'probs'];
      assert.deepStrictEqual(names, [...sequences.flatMap((s) => keys.map((key) => npyFileName(s, key, 0))), 'index.jsonl'].sort());
      for (const s of sequences) {
        const read = (key) => npy.parse(fs.readFileSync(path.join(traces, npyFileName(s, key, 0))));
        assertClose(read('layer1').data, expected.hidden, { rtol: 1e-5, atol: 1e-5, what: 'layer1' });
        assertClose(read('logits').data, expected.logits, { rtol: 1e-5, atol: 1e-5, what: 'logits' });
        assert.deepStrictEqual(read('probs').shape, [4, 3]);
      }
    });

    it(`--profile FILE writes a valid Chrome trace of every dispatch and invocation (${uri})`, () => {
      const file = path.join(dir, `profile-${uri.replace(/\W/g, '_')}.json`);
      const result = halrtCli(['run', module, '--device', uri, ...inputs(), '--profile', file, '--repeat', '3', '--trace', 'stats']);
      assert.strictEqual(result.status, 0, result.stderr);
      const lines = result.stdout.trimEnd().split('\n');
      assert.strictEqual(lines.length, 3 * 3 + 1, result.stdout);
      assert.match(lines[0], /^layer1 hidden: min=0 max=[\d.e+-]+ mean=[\d.e+-]+ nan=0 inf=0$/);
      // min and max as the f32 elements they are (the shortest text that reads back as them).
      assert.strictEqual(Math.fround(Number(/max=(\S+)/.exec(lines[0])[1])), Math.fround(Math.max(...expected.hidden)));
      const events = JSON.parse(fs.readFileSync(file, 'utf8'));
      for (const event of events) {
        for (const field of ['name', 'ph', 'pid', 'tid']) assert.ok(field in event, JSON.stringify(event));
        if (event.ph === 'X') assert.ok(typeof event.ts === 'number' && typeof event.dur === 'number');
      }
      const dispatches = events.filter((e) => e.cat === 'dispatch').map((e) => e.name);
      assert.deepStrictEqual(dispatches, [0, 1, 2].flatMap(() => ['k.matmul_f32', 'k.relu_f32', 'k.matmul_f32', 'k.softmax_rows_f32']));
      assert.strictEqual(events.filter((e) => e.cat === 'invocation' && e.args.ok === true).length, 3);
      assert.strictEqual(events.filter((e) => e.cat === 'trace').length, 9);
    });
  }

  it('--trace stdio prints each trace before the outputs', () => {
    const result = halrtCli(['run', EXAMPLE, '--device', 'local-sync', ...inputs(), '--trace', 'stdio']);
    assert.strictEqual(result.status, 0, result.stderr);
    const lines = result.stdout.trimEnd().split('\n');
    assert.deepStrictEqual(lines.filter((line) => line.startsWith('===')), [
      '=== layer1 (mlp.main op 2, invocation 1) ===',
      '=== logits (mlp.main op 4, invocation 1) ===',
      '=== probs (mlp.main op 6, invocation 1) ===',
    ]);
    // 64 elements: beyond the default 16, so each row shows its first and last 3.
    assert.match(lines[1], /^hidden: 4x16xf32=\[\[\S+ \S+ \S+ \.\.\. \S+ \S+ \S+\]( \[\S+ \S+ \S+ \.\.\. \S+ \S+ \S+\]){3}\]$/);
    assert.match(lines[6], /^probs: 4x3xf32=\[\[/);
  });

  it("`--version` prints package.json's version and exits 0", () => {
    const result = halrtCli(['--version']);
    assert.strictEqual(result.status, 0, result.stderr);
    assert.strictEqual(result.stderr, '');
    assert.strictEqual(result.stdout, `${JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')).version}\n`);
  });

  it('`--help`, `-h` and `help` print the commands on stdout and exit 0; no command prints them on stderr and exits 2', () => {
    const texts = [['--help'], ['-h'], ['help']].map((args) => {
      const result = halrtCli(args);
      assert.strictEqual(result.status, 0, result.stderr);
      assert.strictEqual(result.stderr, '');
      return result.stdout;
    });
    assert.strictEqual(texts[1], texts[0]);
    assert.strictEqual(texts[2], texts[0]);
    assert.match(texts[0], /^Usage: halrt \[options\] \[command\]\n/);
    assert.match(texts[0], /^ {2}--version +print the version$/m);
    for (const command of ['devices \\[options\\]', 'run \\[options\\] <module>', 'diff \\[options\\] <module>', 'help \\[command\\]']) {
      assert.match(texts[0], new RegExp(`^  ${command}  +\\w`, 'm'));
    }
    const bare = halrtCli([]);
    assert.strictEqual(bare.status, 2);
    assert.strictEqual(bare.stdout, '');
    assert.strictEqual(bare.stderr, texts[0]);
  });

  it('`run --help` and `help run` list every option of run and exit 0', () => {
    const help = halrtCli(['run', '--help']);
    assert.strictEqual(help.status, 0, help.stderr);
    assert.strictEqual(halrtCli(['help', 'run']).stdout, help.stdout);
    assert.match(help.stdout, /^Usage: halrt run \[options\] <module>\n/);
    for (const flags of ['-f, --function <name>', '-i, --input <name=value>', '-d, --device <uri>', '-t, --trace <sink>',
      '-p, --profile <file>', '-r, --repeat <n>', '-o, --output <dir>', '-h, --help']) {
      assert.ok(help.stdout.includes(`\n  ${flags}  `), `${flags} in ${help.stdout}`);
    }
  });

  it('options go before or after the module, short ones with the value attached, long ones with =', () => {
    const out = path.join(dir, 'out-forms');
    const result = halrtCli(['run', '-dlocal-sync', `--input=x=@${files.x}`, '-i', `w1=@${files.w1}`, '--repeat=2',
      module, `-iw2=@${files.w2}`, '-fmain', '--output', out]);
    assert.strictEqual(result.status, 0, result.stderr);
    assert.strictEqual(result.stdout, `wrote ${path.join(out, 'probs.npy')}\n`);
    assertClose(npy.parse(fs.readFileSync(path.join(out, 'probs.npy'))).data, expected.probs, { rtol: 1e-5, atol: 1e-7, what: 'probs.npy' });
  });

  it('JSON numbers for f16 and bf16 inputs become the nearest value (ties to even), not raw bits', () => {
    const file = path.join(dir, 'halves-run.halrt.json');
    fs.writeFileSync(file, JSON.stringify(copyModule('halves', [['h', 'f16', [2, 4]], ['g', 'bf16', [4]]])));
    const out = path.join(dir, 'out-halves');
    const h = [[1, -2, 0.1, 65504], [65520, 1 + 2 ** -11, 1 + 3 * 2 ** -11, 3 * 2 ** -25]];
    const g = [1.5, 1 + 2 ** -8, 1 + 3 * 2 ** -8, -3.4e39];
    const result = halrtCli(['run', file, '--device', 'local-sync', '--input', `h=${JSON.stringify(h)}`,
      '--input', `g=${JSON.stringify(g)}`, '--output', out]);
    assert.strictEqual(result.status, 0, result.stderr);
    const read = (name) => Array.from(npy.parse(fs.readFileSync(path.join(out, `${name}.npy`))).data);
    // 65520 is halfway to 65536 and rounds to infinity; 1+2^-11 ties down to 1, 1+3·2^-11 up.
    assert.deepStrictEqual(read('h_out'), [0x3c00, 0xc000, 0x2e66, 0x7bff, 0x7c00, 0x3c00, 0x3c02, 0x0002]);
    assert.deepStrictEqual(read('g_out'), [0x3fc0, 0x3f80, 0x3f82, 0xff80]);
  });

  it('JSON numbers for float inputs round once, from the literal: past a midpoint is past it', () => {
    const file = path.join(dir, 'floats-run.halrt.json');
    fs.writeFileSync(file, JSON.stringify(copyModule('floats', [['a', 'f32', [3]], ['h', 'f16', [1]]])));
    const out = path.join(dir, 'out-floats');
    // 1 + 2^-24 (the f32 midpoint above 1) plus 10^-29: JSON.parse's double is the midpoint itself.
    const result = halrtCli(['run', file, '--device', 'local-sync', '--input', 'a=[1.00000005960464477539062500001,1.000000059604644775390625,16777217.0000000000000000001]',
      '--input', 'h=[1.00048828125000000000001]', '--output', out]);
    assert.strictEqual(result.status, 0, result.stderr);
    const read = (name) => Array.from(npy.parse(fs.readFileSync(path.join(out, `${name}.npy`))).data);
    assert.deepStrictEqual(read('a_out'), [1 + 2 ** -23, 1, 16777218]);
    assert.deepStrictEqual(read('h_out'), [0x3c01]); // 1 + 2^-11 + a little: up, not to even
    assert.strictEqual(result.stderr, '');
    // Beyond the dtype's range: Infinity, with a warning naming the element.
    const over = halrtCli(['run', file, '--device', 'local-sync', '--input', 'a=[1e300,-3.5e38,3.4e38]', '--input', 'h=[70000]', '--output', out]);
    assert.strictEqual(over.status, 0, over.stderr);
    assert.strictEqual(over.stderr, 'halrt: warning: a[0] = 1e300 is beyond the range of f32 and becomes Infinity\n' +
      'halrt: warning: a[1] = -3.5e38 is beyond the range of f32 and becomes -Infinity\n' +
      'halrt: warning: h[0] = 70000 is beyond the range of f16 and becomes Infinity\n');
    assert.deepStrictEqual(read('a_out'), [Infinity, -Infinity, Math.fround(3.4e38)]);
  });

  it('JSON integers for i64 and u64 inputs are exact over their whole range', () => {
    const file = path.join(dir, 'wide-run.halrt.json');
    fs.writeFileSync(file, JSON.stringify(copyModule('wide', [['a', 'i64', [2]], ['b', 'u64', [2]]])));
    const result = halrtCli(['run', file, '--device', 'local-sync', '--input', 'a=[9223372036854775807,-9223372036854775808]',
      '--input', 'b=[18446744073709551615,9007199254740993]']);
    assert.strictEqual(result.status, 0, result.stderr);
    assert.strictEqual(result.stdout, 'a_out: 2xi64=[9223372036854775807 -9223372036854775808]\n' +
      'b_out: 2xu64=[18446744073709551615 9007199254740993]\n');
  });

  it('outputs print as halrt.format writes them: f16 and bf16 as their values, not their bits', () => {
    const file = path.join(dir, 'halves-run.halrt.json');
    fs.writeFileSync(file, JSON.stringify(copyModule('halves', [['h', 'f16', [2]], ['g', 'bf16', [1, 2]], ['s', 'f32', []]])));
    const result = halrtCli(['run', file, '--device', 'local-sync', '--input', 'h=[0.1,256.25]', '--input', 'g=[[0.1,-2.5]]', '--input', 's=1e-7']);
    assert.strictEqual(result.status, 0, result.stderr);
    assert.strictEqual(result.stdout, 'h_out: 2xf16=[0.1 256.3]\ng_out: 1x2xbf16=[[0.1 -2.5]]\ns_out: f32=1e-7\n');
  });

  it('--repeat N prints one line of per-call timings on stderr when it is not a terminal', () => {
    const result = halrtCli(['run', EXAMPLE, '--device', 'local-sync', ...inputs(), '--repeat', '5']);
    assert.strictEqual(result.status, 0, result.stderr);
    assert.match(result.stdout, /^probs: 4x3xf32=\[\[/);
    const match = /^main: 5 calls, min (\d+\.\d{3}) ms, median (\d+\.\d{3}) ms, max (\d+\.\d{3}) ms\n$/.exec(result.stderr);
    assert.ok(match, JSON.stringify(result.stderr));
    const [min, median, max] = match.slice(1).map(Number);
    assert.ok(min <= median && median <= max, result.stderr);
    assert.strictEqual(halrtCli(['run', EXAMPLE, '--device', 'local-sync', ...inputs()]).stderr, '');
  });

  it('--repeat N on a terminal counts the calls up, then prints the timings line', function () {
    // script(1) runs halrt on a pseudo-terminal (stdout and stderr together).
    if (spawnSync('script', ['--version']).error) this.skip();
    const command = [process.execPath, BIN, 'run', EXAMPLE, '--device', 'local-sync', ...inputs(), '--repeat', '3']
      .map((arg) => `'${arg.replace(/'/g, "'\\''")}'`).join(' ');
    const result = spawnSync('script', ['-qec', command, '/dev/null'], { encoding: 'utf8', timeout: 30000, cwd: ROOT });
    assert.strictEqual(result.status, 0, result.stdout);
    assert.match(result.stdout, /^\rmain: 1\/3\rmain: 2\/3\rmain: 3\/3\r\nmain: 3 calls, min \d+\.\d{3} ms, median \d+\.\d{3} ms, max \d+\.\d{3} ms\r\nprobs: 4x3xf32=\[\[/);
  });

  for (const [what, args] of [['devices', () => ['devices']], ['run', () => ['run', EXAMPLE, '--device', 'local-sync', ...inputs()]]]) {
    it(`\`${what}\` whose stdout reader has gone (EPIPE) ends quietly with exit code 0`, () => {
      // The reader `true` exits at once, well before halrt starts writing.
      const result = spawnSync('bash', ['-c', '(sleep 0.3; exec "$0" "$@") | true; exit "${PIPESTATUS[0]}"', process.execPath, BIN, ...args()],
        { encoding: 'utf8', timeout: 30000, cwd: ROOT });
      assert.strictEqual(result.stderr, '');
      assert.strictEqual(result.status, 0);
    });
  }

  it('output that cannot be written (a full disk) fails the run with one line and exit code 1', function () {
    if (!fs.existsSync('/dev/full')) this.skip();
    const result = spawnSync('bash', ['-c', 'exec "$0" "$@" > /dev/full', process.execPath, BIN, 'devices'],
      { encoding: 'utf8', timeout: 30000, cwd: ROOT });
    assert.strictEqual(result.status, 1, result.stderr);
    assert.match(result.stderr, /^halrt: cannot write the output: ENOSPC[^\n]*\n$/);
  });

  describe('bad arguments and files exit 2 with one line on stderr', () => {
    // A module with integer inputs: i64 a, u8 b, copied to the outputs.
    const integers = () => {
      const file = path.join(dir, 'integers.halrt.json');
      fs.writeFileSync(file, JSON.stringify({
        format: 'halrt.module/1',
        name: 'ints',
        functions: {
          main: {
            inputs: [{ name: 'a', dtype: 'i64', shape: [2] }, { name: 'b', dtype: 'u8', shape: [2] }],
            outputs: [{ name: 'c', dtype: 'i64', shape: [2] }, { name: 'd', dtype: 'u8', shape: [2] }],
            body: [{ op: 'copy', source: 'a', target: 'c' }, { op: 'copy', source: 'b', target: 'd' }],
          },
        },
      }));
      return file;
    };
    // A module of one function copying each input (dtype, shape) to an output.
    const copies = (name, ...specs) => {
      const file = path.join(dir, `${name}.halrt.json`);
      fs.writeFileSync(file, JSON.stringify(copyModule(name, specs)));
      return file;
    };
    const bools = () => copies('bools', ['p', 'bool', [2]]);
    const int32s = () => copies('int32s', ['n', 'i32', [2, 1]]);
    const halves = () => copies('halves', ['h', 'f16', [8]], ['g', 'bf16', [2]]);
    const npyFile = (name, dtype, shape, values) => {
      const file = path.join(dir, name);
      const data = new npy.ARRAYS[dtype](shape.reduce((a, b) => a * b, 1));
      if (values) data.set(values);
      fs.writeFileSync(file, npy.serialize({ dtype, shape, data }));
      return file;
    };
    const cases = [
      ['an unknown option', () => ['run', EXAMPLE, '--bogus'], ["unknown option '--bogus'"]],
      ['an unknown command', () => ['frobnicate'], ["unknown command 'frobnicate'"]],
      ['a missing module file', () => ['run', path.join(dir, 'missing.halrt.json')], ['missing.halrt.json', 'cannot read']],
      ['a module that is not valid', () => {
        const bad = path.join(dir, 'bad.halrt.json');
        fs.writeFileSync(bad, '{"format": "halrt.module/1"');
        return ['run', bad];
      }, ['bad.halrt.json', 'invalid JSON']],
      ['a missing input file', () => ['run', EXAMPLE, `--input=x=@${path.join(dir, 'nope.npy')}`], ["--input 'x': cannot read", 'nope.npy']],
      ['an input file that is not .npy', () => ['run', EXAMPLE, `--input=x=@${EXAMPLE}`], ["--input 'x'", 'not a .npy file']],
      ['a module file that is a device', () => ['run', '/dev/zero'],
        ["halrt: /dev/zero: Module.load: '/dev/zero' is a character device, not a regular file"]],
      ['an input file that is a FIFO', () => {
        const fifo = path.join(dir, 'fifo.npy');
        if (!fs.existsSync(fifo)) assert.strictEqual(spawnSync('mkfifo', [fifo]).status, 0);
        return ['run', EXAMPLE, `--input=x=@${fifo}`];
      }, ["halrt: --input 'x': '", "fifo.npy' is a FIFO, not a regular file"]],
      ['an input file over 4 GiB', () => {
        const big = path.join(dir, 'big.npy');
        fs.writeFileSync(big, '');
        fs.truncateSync(big, 2 ** 32 + 1);  // sparse: no disk used
        return ['run', EXAMPLE, `--input=x=@${big}`];
      }, ["big.npy' is 4294967297 bytes, over the limit of 4294967296 bytes for an .npy input"]],
      ['a symlink planted at an --output file (the file it points to is left alone)', () => {
        const out = path.join(dir, 'out-planted');
        const victim = path.join(dir, 'victim.txt');
        fs.mkdirSync(out, { recursive: true });
        fs.writeFileSync(victim, 'keep');
        if (!fs.existsSync(path.join(out, 'probs.npy'))) fs.symlinkSync(victim, path.join(out, 'probs.npy'));
        // Reported before the run: before the bad --device is tried.
        return ['run', EXAMPLE, ...inputs(), '--device', 'nope', '--output', out];
      }, ["--output: '", "probs.npy' exists and is a symbolic link, not a regular file"]],
      ['an --output that is an existing file, before the run', () => ['run', EXAMPLE, ...inputs(), '--device', 'nope', '--output', files.x],
        ["--output: cannot write into '", "x.npy': it is a regular file, not a directory"]],
      ['an --output in a directory that cannot be made, before the run', () => ['run', EXAMPLE, ...inputs(), '--device', 'nope',
        '--output', path.join(files.x, 'out')], ['--output: cannot write into ', "ENOTDIR"]],
      ['a --profile file that cannot be opened, before the run', () => ['run', EXAMPLE, ...inputs(), '--device', 'nope',
        '--profile', path.join(dir, 'no', 'such', 'dir', 'trace.json')], ["--profile '", "trace.json': ", 'ENOENT']],
      ['a --profile that is a directory, before the run', () => ['run', EXAMPLE, ...inputs(), '--device', 'nope', '--profile', dir],
        ["--profile '", 'it exists and is a directory, not a regular file']],
      ['a --trace npy:DIR that is a file, before the run', () => ['run', EXAMPLE, ...inputs(), '--device', 'nope', '--trace', `npy:${files.x}`],
        ["--trace 'npy:", "x.npy': it is a regular file, not a directory"]],
      ['a --trace npy:DIR that cannot be made, before the run', () => ['run', EXAMPLE, ...inputs(), '--device', 'nope',
        '--trace', 'npy:/proc/halrt/traces'], ["--trace 'npy:/proc/halrt/traces': cannot write into '/proc/halrt/traces': ", 'ENOENT']],
      ['a bad input, before any device is made', () => ['run', EXAMPLE, ...inputs().slice(1), '--device', 'nope', '--input', 'x=[1]'],
        ["--input 'x': x is an array of 1; expected an array of 4 (shape [4,8])"]],
      ['an unknown input name', () => ['run', EXAMPLE, '--input', 'q=[1]'], ["--input 'q': function 'main' has no input 'q' (inputs: x, w1, w2)"]],
      ['JSON of the wrong length', () => ['run', EXAMPLE, ...inputs().slice(0, 2), '--input', 'w2=[1,2,3]'],
        ["--input 'w2': w2 is an array of 3; expected an array of 16 (shape [16,3])"]],
      ['flat JSON for a 2-d input', () => ['run', EXAMPLE, ...inputs().slice(0, 2), '--input', `w2=${JSON.stringify(Array(48).fill(1))}`],
        ["--input 'w2': w2 is an array of 48; expected an array of 16 (shape [16,3])"]],
      ['JSON of the transposed shape', () => ['run', EXAMPLE, ...inputs().slice(1), '--input', `x=${JSON.stringify(Array(8).fill(Array(4).fill(1)))}`],
        ["--input 'x': x is an array of 8; expected an array of 4 (shape [4,8])"]],
      ['JSON with one ragged row', () => {
        const rows = Array.from({ length: 4 }, (_, r) => Array(r === 2 ? 7 : 8).fill(1));
        return ['run', EXAMPLE, ...inputs().slice(1), '--input', `x=${JSON.stringify(rows)}`];
      }, ["--input 'x': x[2] is an array of 7; expected an array of 8 (shape [4,8])"]],
      ['JSON nested deeper than the shape', () => ['run', EXAMPLE, ...inputs().slice(1), '--input',
        `x=${JSON.stringify(Array(4).fill([...Array(7).fill(1), [1]]))}`], ["--input 'x': x[0][7] is [1]; expected a number (shape [4,8])"]],
      ['an .npy input of the transposed shape', () => ['run', EXAMPLE, ...inputs().slice(1), `--input=x=@${npyFile('x84.npy', 'f32', [8, 4])}`],
        ["--input 'x': ", "x84.npy: expected shape [4,8], got [8,4]"]],
      ['an .npy input of the right size but rank 1', () => ['run', EXAMPLE, ...inputs().slice(1), `--input=x=@${npyFile('x32.npy', 'f32', [32])}`],
        ["--input 'x': ", "x32.npy: expected shape [4,8], got [32]"]],
      ['an .npy input with fewer elements', () => ['run', EXAMPLE, ...inputs().slice(1), `--input=x=@${npyFile('x4.npy', 'f32', [4])}`],
        ["--input 'x': ", "x4.npy: expected shape [4,8], got [4]"]],
      ['an input given twice', () => ['run', EXAMPLE, ...inputs(), `--input=x=@${files.x}`], ["--input 'x' is given twice"]],
      ['a bool input of 2 in JSON', () => ['run', bools(), '--input', 'p=[true,2]'], ["--input 'p': p[1] = 2: bool takes true, false, 0 or 1"]],
      ['a bool input of 7 in an .npy file', () => ['run', bools(), `--input=p=@${npyFile('p.npy', 'bool', [2], [1, 7])}`],
        ["--input 'p': ", 'p.npy: element 1 is 7; bool takes 0 or 1']],
      ['an input of the wrong dtype', () => {
        const ints = path.join(dir, 'ints.npy');
        fs.writeFileSync(ints, npy.serialize({ dtype: 'i32', shape: [4, 8], data: new Int32Array(32) }));
        return ['run', EXAMPLE, `--input=x=@${ints}`];
      }, ["--input 'x': ", "ints.npy: expected f32, got i32"]],
      ['bad JSON', () => ['run', EXAMPLE, '--input', 'x=[1,2'], ["--input 'x': '[1,2' is neither @FILE.npy nor JSON"]],
      ['JSON that is not numbers', () => ['run', bools(), '--input', 'p=["a",true]'], ['--input \'p\': p[0] is "a"; expected a number (shape [2])']],
      ['JSON null', () => ['run', bools(), '--input', 'p=[true,null]'], ["--input 'p': p[1] is null; expected a number (shape [2])"]],
      ['an i64 input that is not an integer', () => ['run', integers(), '--input', 'a=[1.5,2]', '--input', 'b=[1,2]'],
        ["--input 'a': a[0] = 1.5: i64 takes integers from -9223372036854775808 to 9223372036854775807"]],
      ['an i64 input of 2^64', () => ['run', integers(), '--input', 'a=[1,18446744073709551616]', '--input', 'b=[1,2]'],
        ["--input 'a': a[1] = 18446744073709551616: i64 takes integers from"]],
      ['an i64 input of 2^63', () => ['run', integers(), '--input', 'a=[9223372036854775808,1]', '--input', 'b=[1,2]'],
        ["--input 'a': a[0] = 9223372036854775808: i64 takes integers from"]],
      ['an i32 input of 1.7', () => ['run', int32s(), '--input', 'n=[[1],[1.7]]'], ["--input 'n': n[1][0] = 1.7: i32 takes integers from -2147483648 to 2147483647"]],
      ['a number for an f16 input given as true', () => ['run', halves(), '--input', 'h=[1,true,1,1,1,1,1,1]', '--input', 'g=[1,1]'],
        ["--input 'h': h[1] = true: f16 takes numbers"]],
      ['an i64 input beyond what JSON holds exactly', () => ['run', integers(), '--input', 'a=[1,1e999]', '--input', 'b=[1,2]'],
        ["--input 'a': a[1] = 1e999: i64 takes integers"]],
      ['a u8 input out of range', () => ['run', integers(), '--input', 'a=[1,2]', '--input', 'b=[1,300]'],
        ["--input 'b': b[1] = 300: u8 takes integers from 0 to 255"]],
      ['a missing input', () => ['run', EXAMPLE, ...inputs().slice(0, 1)], ['missing --input for w1, w2']],
      ['an unknown --trace', () => ['run', EXAMPLE, ...inputs(), '--device', 'local-sync', '--trace', 'bogus'],
        ["--trace 'bogus': expected stdio, stats or npy:DIR"]],
      ['a bad --device', () => ['run', EXAMPLE, ...inputs(), '--device', 'nope'], ["--device 'nope'", "unknown driver 'nope'"]],
      ['an unknown --function', () => ['run', EXAMPLE, '--function', 'nope'], ["--function 'nope': module 'mlp' has no function 'nope'; it has main"]],
      ['a --repeat that is not a positive integer', () => ['run', EXAMPLE, '--repeat', '0'], ['--repeat', "argument '0' is invalid"]],
      ['a --repeat that is negative', () => ['run', EXAMPLE, '--repeat', '-1'],
        ["option '-r, --repeat <n>' argument '-1' is invalid: must be a positive integer"]],
      ['an option without its value', () => ['run', EXAMPLE, '--function'], ["option '-f, --function <name>' argument missing"]],
      ['a flag given a value', () => ['--help=yes'], ["option '--help' takes no value"]],
      ['an unknown short option', () => ['run', EXAMPLE, '-x'], ["unknown option '-x'"]],
      ['an option of another command', () => ['devices', '--device', 'local-sync'], ["unknown option '--device'"]],
      ['no module', () => ['run', '--device', 'local-sync'], ["missing required argument 'module'"]],
      ['two modules', () => ['run', EXAMPLE, EXAMPLE], ["too many arguments for 'run': expected 1 argument, got 2"]],
      ['an argument to devices', () => ['devices', 'cuda'], ["too many arguments for 'devices': expected 0 arguments, got 1"]],
      ['help for an unknown command', () => ['help', 'frobnicate'], ["unknown command 'frobnicate'"]],
    ];
    for (const [what, args, parts] of cases) {
      it(what, () => assertUsageError(halrtCli(args()), ...parts));
    }

    it('a bad --device (found after the paths) removes what the run made and keeps an existing profile', () => {
      const made = path.join(dir, 'made-then-removed');
      const args = (profile) => ['run', EXAMPLE, ...inputs(), '--device', 'nope', '--output', path.join(made, 'out', 'a'),
        '--trace', `npy:${path.join(made, 'traces')}`, '--profile', profile];
      assertUsageError(halrtCli(args(path.join(dir, 'new-profile.json'))), "--device 'nope'");
      assert.strictEqual(fs.existsSync(made), false);
      assert.strictEqual(fs.existsSync(path.join(dir, 'new-profile.json')), false);
      const kept = path.join(dir, 'kept-profile.json');
      fs.writeFileSync(kept, '[1]');
      assertUsageError(halrtCli(args(kept)), "--device 'nope'");
      assert.strictEqual(fs.readFileSync(kept, 'utf8'), '[1]');
      assert.strictEqual(fs.existsSync(made), false);
    });

    it('--output refuses, before the run, output names that are not a file of their own in DIR, and makes nothing', () => {
      // A module whose main copies x to each output named.
      const named = (file, ...names) => {
        fs.writeFileSync(file, JSON.stringify({
          format: 'halrt.module/1',
          name: 'named',
          functions: {
            main: {
              inputs: [{ name: 'x', dtype: 'f32', shape: [2] }],
              outputs: names.map((name) => ({ name, dtype: 'f32', shape: [2] })),
              body: names.map((name) => ({ op: 'copy', source: 'x', target: name })),
            },
          },
        }));
        return file;
      };
      const base = path.join(dir, 'named-outputs');
      const out = path.join(base, 'out');
      fs.mkdirSync(base);
      for (const [names, parts] of [
        [['../escaped'], [`--output: output '../escaped' cannot be written as a file in '${out}': its name has a '/'`]],
        [['sub/deep'], [`--output: output 'sub/deep' cannot be written as a file in '${out}': its name has a '/'`]],
        [['y', './y'], ["--output: output './y' cannot be written as a file in '", "its name has a '/'"]],
        [['..'], ["--output: output '..' cannot be written as a file in '", "its name is '..'"]],
        [['.'], ["--output: output '.' cannot be written as a file in '", "its name is '.'"]],
      ]) {
        const file = named(path.join(base, 'named.halrt.json'), ...names);
        assertUsageError(halrtCli(['run', file, '--device', 'local-sync', '--input', 'x=[1,2]', '--output', out]), ...parts);
        assert.deepStrictEqual(fs.readdirSync(base), ['named.halrt.json'], `what ${names} left`);
      }
      // Names that are plain file names still write.
      const file = named(path.join(base, 'named.halrt.json'), 'onnx::Flatten_0', 'a..b', 'Y', 'y');
      const result = halrtCli(['run', file, '--device', 'local-sync', '--input', 'x=[1,2]', '--output', out]);
      assert.strictEqual(result.status, 0, result.stderr);
      assert.deepStrictEqual(fs.readdirSync(out).sort(), ['Y.npy', 'a..b.npy', 'onnx::Flatten_0.npy', 'y.npy']);
    });

    it('a --profile that is a symlink (even dangling) or a FIFO is refused before anything is opened or made', () => {
      const target = path.join(dir, 'profile-target.json');
      const dangling = path.join(dir, 'profile-dangling.json');
      fs.symlinkSync(target, dangling);
      assertUsageError(halrtCli(['run', EXAMPLE, ...inputs(), '--device', 'nope', '--profile', dangling]),
        `--profile '${dangling}': cannot open '${dangling}': it exists and is a symbolic link, not a regular file`);
      assert.strictEqual(fs.existsSync(target), false);
      fs.writeFileSync(target, 'keep');
      assertUsageError(halrtCli(['run', EXAMPLE, ...inputs(), '--device', 'local-sync', '--profile', dangling]),
        'it exists and is a symbolic link, not a regular file');
      assert.strictEqual(fs.readFileSync(target, 'utf8'), 'keep');
      // A FIFO without a reader: refused at once, not a blocked open.
      const fifo = path.join(dir, 'profile.fifo');
      assert.strictEqual(spawnSync('mkfifo', [fifo]).status, 0);
      assertUsageError(halrtCli(['run', EXAMPLE, ...inputs(), '--device', 'local-sync', '--profile', fifo]),
        `--profile '${fifo}': cannot open '${fifo}': it exists and is a FIFO, not a regular file`);
    });

    it('JSON integers are read exactly from their digits: a fraction anywhere is refused, an exact integer in any form is taken', () => {
      const file = copies('literals', ['a', 'i32', [3]], ['b', 'i64', [3]], ['c', 'u8', [1]]);
      const run = (a, b, c) => halrtCli(['run', file, '--device', 'local-sync', '--input', `a=${a}`, '--input', `b=${b}`, '--input', `c=${c}`]);
      for (const [a, b, c, part] of [
        ['[1.0000000000000001,1,1]', '[1,1,1]', '[1]', 'a[0] = 1.0000000000000001: i32 takes integers from'],
        ['[1,2147483647.0000000001,1]', '[1,1,1]', '[1]', 'a[1] = 2147483647.0000000001: i32 takes integers from'],
        ['[1,1,1e-400]', '[1,1,1]', '[1]', 'a[2] = 1e-400: i32 takes integers from'],
        ['[1,1,1]', '[1,1,1]', '[-1e-400]', 'c[0] = -1e-400: u8 takes integers from 0 to 255'],
        ['[1,1,1]', '[1,1,9223372036854775807.5]', '[1]', 'b[2] = 9223372036854775807.5: i64 takes integers from'],
        ['[1,1,1]', '[1,1,9.223372036854775808e18]', '[1]', 'b[2] = 9.223372036854775808e18: i64 takes integers from'],
      ]) {
        assertUsageError(run(a, b, c), part);
      }
      const result = run('[2147483647.000,250e-1,-0.0]', '[1e18,9223372036854775807.0,-92233720368547758.08e2]', '[2.55e2]');
      assert.strictEqual(result.status, 0, result.stderr);
      assert.strictEqual(result.stdout, 'a_out: 3xi32=[2147483647 25 0]\n' +
        'b_out: 3xi64=[1000000000000000000 9223372036854775807 -9223372036854775808]\nc_out: 1xu8=[255]\n');
      // bool: 0 and 1 as exactly as the integers.
      const flags = copies('flags', ['f', 'bool', [3]]);
      assertUsageError(halrtCli(['run', flags, '--device', 'local-sync', '--input', 'f=[true,1.0000000000000001,0]']),
        'f[1] = 1.0000000000000001: bool takes true, false, 0 or 1');
      const exact = halrtCli(['run', flags, '--device', 'local-sync', '--input', 'f=[1e0,0.0,true]']);
      assert.strictEqual(exact.stdout, 'f_out: 3xbool=[true false true]\n', exact.stderr);
    });

    after(() => assert.strictEqual(fs.readFileSync(path.join(dir, 'victim.txt'), 'utf8'), 'keep'));
  });

  it('a run that fails on the device exits 1 with the status code and message on one line', () => {
    // matmul_f32 checks count[2] == 1 when it runs, not when the module is made.
    const description = JSON.parse(fs.readFileSync(EXAMPLE, 'utf8'));
    description.functions.main.body[0].workgroups = [1, 1, 2];
    const file = path.join(dir, 'fails.halrt.json');
    fs.writeFileSync(file, JSON.stringify(description));
    const result = halrtCli(['run', file, '--device', 'local-sync', ...inputs()]);
    assert.strictEqual(result.status, 1, result.stderr);
    assert.strictEqual(result.stdout, '');
    assert.match(result.stderr, /^halrt: INVALID_ARGUMENT: mlp\.main: .*matmul_f32.*\n$/);
    // A module that cannot be linked for the device fails the same way.
    const cudaOnly = JSON.parse(fs.readFileSync(EXAMPLE, 'utf8'));
    cudaOnly.executables.k = { cuda: { builtin: true } };
    fs.writeFileSync(file, JSON.stringify(cudaOnly));
    const linked = halrtCli(['run', file, '--device', 'local-sync', ...inputs()]);
    assert.strictEqual(linked.status, 1, linked.stderr);
    assert.match(linked.stderr, /^halrt: NOT_FOUND: new Context: linking module 'mlp': executables\.k: no executable for device kind 'local'[^\n]*\n$/);
  });

  describe('diff', () => {
    it('`diff` on two CPU devices that agree prints the table of every key and exits 0', () => {
      const result = halrtCli(['diff', EXAMPLE, ...inputs()]);
      assert.strictEqual(result.status, 0, result.stderr);
      assert.strictEqual(result.stderr, '');
      const lines = result.stdout.split('\n');
      assert.deepStrictEqual(lines.slice(0, 5), ['devices: local-sync, local-task', 'function: mlp.main', 'devices agree', '',
        'key                      device      elements  mismatches  max abs  max rel  max ulps']);
      assert.deepStrictEqual(lines.slice(5, -1).map((line) => line.split(/ +/)), [
        'main:0:matmul_f32', 'main:1:relu_f32', 'layer1', 'main:3:matmul_f32', 'logits', 'main:5:softmax_rows_f32', 'probs', 'outputs',
      ].map((key) => [key, 'local-task', /^main:[01]|layer1/.test(key) ? '64' : '12', '0', '0', '0', '0']));
      assert.strictEqual(lines.at(-1), '');
    });

    it('`diff` finds the divergence planted at op 1 on the CUDA test double and exits 1; --ulps 1 accepts it', () => {
      buildNativeFixtures();
      const file = path.join(dir, 'planted.halrt.json');
      fs.writeFileSync(file, JSON.stringify(plantedModule()));
      const args = ['diff', file, '--devices', 'cuda,local-sync', '-i', 'a=[[1,2,3],[4,5,6]]', '-i', 'b=[[0.5,0.5,0.5],[0.5,0.5,0.5]]',
        '--rtol', '0', '--atol=0'];
      const env = { HALRT_CUDA_LIBRARY: FAKE_CUDA };
      const result = halrtCli(args, { env });
      assert.strictEqual(result.status, 1, result.stderr);
      assert.strictEqual(result.stderr, '');
      const lines = result.stdout.split('\n');
      assert.deepStrictEqual(lines.slice(0, 4), [
        'devices: cuda, local-sync',
        'function: planted.main',
        'first divergence: local-sync vs cuda at key main:1:add_f32, op 1, kernel add_f32',
        '  t[1][2]: cuda 7, local-sync 7.0000005; abs 4.76837158203125e-7, rel 6.811959402901785e-8, ulps 1',
      ]);
      assert.deepStrictEqual(lines.slice(6, -1).map((line) => line.split(/ +/).slice(0, 4)), [
        ['main:0:add_f32', 'local-sync', '6', '0'], ['main:1:add_f32', 'local-sync', '6', '1'], ['sum', 'local-sync', '6', '1'],
        ['main:3:mul_f32', 'local-sync', '6', '1'], ['outputs', 'local-sync', '6', '1'],
      ]);
      const accepted = halrtCli([...args, '--ulps', '1'], { env });
      assert.strictEqual(accepted.status, 0, accepted.stderr);
      assert.match(accepted.stdout, /^devices agree$/m);
    });

    it('`diff --help` lists its options', () => {
      const help = halrtCli(['diff', '--help']);
      assert.strictEqual(help.status, 0, help.stderr);
      assert.match(help.stdout, /^Usage: halrt diff \[options\] <module>\n/);
      for (const flags of ['-f, --function <name>', '-i, --input <name=value>', '-d, --devices <uris>', '--rtol <r>', '--atol <a>',
        '--ulps <n>', '-h, --help']) {
        assert.ok(help.stdout.includes(`\n  ${flags}  `), `${flags} in ${help.stdout}`);
      }
    });

    const usage = [
      ['one device', () => ['--devices', 'local-sync'], ["option '-d, --devices <uris>' argument 'local-sync' is invalid: must be at least two"]],
      ['an empty device', () => ['--devices', 'local-sync,'], ['must be at least two comma-separated device URIs']],
      ['a device that cannot be made', () => ['--devices', 'local-sync,nope'], ["--devices 'nope': unknown driver 'nope'"]],
      ['a negative --rtol', () => ['--rtol', '-1'], ["option '--rtol <r>' argument '-1' is invalid: must be a non-negative finite number"]],
      ['an --atol that is not a number', () => ['--atol', 'x'], ["argument 'x' is invalid"]],
      ['an --ulps that is not an integer', () => ['--ulps', '1.5'], ["option '--ulps <n>' argument '1.5' is invalid: must be a non-negative integer"]],
      ['an unknown --function', () => ['--function', 'nope'], ["--function 'nope': module 'mlp' has no function 'nope'; it has main"]],
      ['a missing input', () => ['--input', 'x=@/nonesuch.npy'], ["--input 'x'"]],
    ];
    for (const [what, args, parts] of usage) {
      it(`${what} exits 2 with one line on stderr`, () => {
        const given = args();
        const withInputs = given.includes('--input') ? given : [...given, ...inputs()];
        assertUsageError(halrtCli(['diff', EXAMPLE, ...withInputs]), ...parts);
      });
    }
  });
});

describe('lib/half: numbers to f16 and bf16 bits', () => {
  it('rounds to nearest, ties to even, through subnormals, overflow, signed zero and NaN', () => {
    const f16 = [[0, 0], [-0, 0x8000], [1, 0x3c00], [0.1, 0x2e66], [65504, 0x7bff], [65519.99, 0x7bff], [65520, 0x7c00],
      [-Infinity, 0xfc00], [NaN, 0x7e00], [2 ** -14, 0x0400], [2 ** -24, 0x0001], [2 ** -25, 0x0000],
      [3 * 2 ** -25, 0x0002], [1023.5 * 2 ** -24, 0x0400], [1 + 2 ** -11, 0x3c00], [1 + 3 * 2 ** -11, 0x3c02], [2047.5, 0x6800]];
    assert.deepStrictEqual(f16.map(([value]) => f16Bits(value)), f16.map(([, bits]) => bits));
    const bf16 = [[1, 0x3f80], [-2, 0xc000], [1 + 2 ** -8, 0x3f80], [1 + 3 * 2 ** -8, 0x3f82], [3.4e38, 0x7f80],
      [3.3895e38, 0x7f7f], [3.38e38, 0x7f7e], [NaN, 0x7fc0], [2 ** -133, 0x0001], [2 ** -134, 0x0000], [-0, 0x8000]];
    assert.deepStrictEqual(bf16.map(([value]) => bf16Bits(value)), bf16.map(([, bits]) => bits));
  });

  it('bf16 of an f32 value equals rounding its f32 bits to nearest even', () => {
    const f32 = new Float32Array(1);
    const word = new Uint32Array(f32.buffer);
    for (let i = 0; i < 10000; ++i) {
      word[0] = (Math.imul(i, 2654435761) >>> 0) & 0x7f7fffff | (i & 1) << 31;  // finite, both signs
      const expected = (word[0] + 0x7fff + ((word[0] >>> 16) & 1)) >>> 16;
      assert.strictEqual(bf16Bits(f32[0]), expected, `bits 0x${word[0].toString(16)}`);
    }
  });
});
