'use strict';
// The debugging toolkit: halrt.sinks (npy, stdio, stats, tee, chromeTrace),
// lib/npy.js, and the HalModule options nonFinite and profile (timing and
// invocation events, trace times).
const assert = require('assert');
const fs = require('fs');
const os = require('os');
const path = require('path');
const { spawnSync } = require('child_process');
const halrt = require('..');
const npy = require('../lib/npy');
const {
  DEVICE_URIS, assertThrowsHalrt, assertRejectsHalrt, closeAll, makeProgram, npyFileName, randomFloats, readNpyIndex, sampleData,
} = require('./helpers');

const LIB = JSON.stringify(path.join(__dirname, '..'));

function tempDir(prefix) {
  return fs.mkdtempSync(path.join(os.tmpdir(), `halrt-${prefix}-`));
}

const NUMPY_DESCR = {
  f16: '<f2', bf16: '<u2', f32: '<f4', f64: '<f8', i8: '|i1', u8: '|u1', i16: '<i2', u16: '<u2',
  i32: '<i4', u32: '<u4', i64: '<i8', u64: '<u8', bool: '|b1',
};

/**
 * Reads a .npy file byte by byte as NumPy's format 1.0 specifies it,
 * independently of lib/npy.js: {version, descr, fortranOrder, shape, headerLength, data (a Buffer)}.
 */
function readNpyFile(file) {
  const bytes = fs.readFileSync(file);
  assert.deepStrictEqual([...bytes.subarray(0, 6)], [0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59], `${file}: magic`);
  const version = [bytes[6], bytes[7]];
  const headerLength = bytes.readUInt16LE(8);
  const header = bytes.subarray(10, 10 + headerLength).toString('latin1');
  assert.strictEqual((10 + headerLength) % 64, 0, `${file}: the data starts at a multiple of 64 bytes`);
  assert.ok(header.endsWith('\n'), `${file}: the header ends with a newline`);
  const match = /^\{'descr': '([^']+)', 'fortran_order': (True|False), 'shape': \(([^)]*)\), \} *\n$/.exec(header);
  assert.ok(match, `${file}: header ${JSON.stringify(header)}`);
  const shapeText = match[3];
  const shape = shapeText === '' ? [] : shapeText.split(',').map((s) => s.trim()).filter(Boolean).map(Number);
  if (shape.length === 1) assert.ok(shapeText.endsWith(','), `a 1-tuple is written '(n,)': ${shapeText}`);
  return {
    version, descr: match[1], fortranOrder: match[2] === 'True', shape, headerLength, data: bytes.subarray(10 + headerLength),
  };
}

/** The bytes of a TypedArray. */
const bytesOf = (array) => Buffer.from(array.buffer, array.byteOffset, array.byteLength);

/** min, max, mean over finite elements, NaN and Inf counts, as the stats sink defines them. */
function jsStats(data) {
  let count = 0;
  let finite = 0;
  let sum = 0;
  let min = Infinity;
  let max = -Infinity;
  let nanCount = 0;
  let infCount = 0;
  for (const raw of data) {
    const v = Number(raw);
    count += 1;
    if (Number.isNaN(v)) nanCount += 1;
    else if (!Number.isFinite(v)) infCount += 1;
    else {
      finite += 1;
      sum += v;
      min = Math.min(min, v);
      max = Math.max(max, v);
    }
  }
  return finite === 0
    ? { count, min: NaN, max: NaN, mean: NaN, nanCount, infCount }
    : { count, min, max, mean: sum / finite, nanCount, infCount };
}

for (const uri of DEVICE_URIS) {
  describe(`halrt.sinks.npy (${uri})`, () => {
    const DTYPES = ['f32', 'f64', 'f16', 'bf16', 'i8', 'u8', 'i16', 'u16', 'i32', 'u32', 'i64', 'u64', 'bool'];
    let dir;
    beforeEach(() => {
      dir = path.join(tempDir('npy'), 'nested', 'out');
    });
    afterEach(() => fs.rmSync(path.dirname(path.dirname(dir)), { recursive: true, force: true }));

    it('writes <sequence>_<key prefix>-<key hash>_<index>.npy per traced tensor (format 1.0) whose header and data are the tensor, for every dtype, listed in index.jsonl', async () => {
      const shapes = { f32: [2, 3], f64: [4], f16: [7], bf16: [3, 2], i8: [5], u8: [1, 1, 5], i16: [], u16: [5], i32: [0, 2], u32: [5], i64: [5], u64: [2, 5], bool: [5] };
      const p = makeProgram(uri, (b) => b.function('f', (f) => {
        DTYPES.forEach((dtype) => f.input(dtype, dtype, shapes[dtype]));
        f.output('done', 'u8', [1]).fill('done', 1)
          .trace('floats', ['f32', 'f64', 'f16', 'bf16'])
          .trace('ints and/or bools!', DTYPES.slice(4));
      }), { hal: { debugSink: halrt.sinks.npy(dir) } });
      const fn = p.lookup('f');
      const data = Object.fromEntries(DTYPES.map((dtype, i) => [dtype, sampleData(dtype, shapes[dtype].reduce((a, c) => a * c, 1), i)]));
      const inputs = DTYPES.map((dtype) => p.device.tensor(data[dtype], shapes[dtype], dtype));
      try {
        const [done] = await fn.invoke(inputs);
        done.close();
        const names = fs.readdirSync(dir).sort();
        const sequence = Number(names[0].split('_')[0]);
        const expected = [
          ...['f32', 'f64', 'f16', 'bf16'].map((dtype, i) => [npyFileName(sequence, 'floats', i), dtype, 'floats', i]),
          ...DTYPES.slice(4).map((dtype, i) => [npyFileName(sequence, 'ints and/or bools!', i), dtype, 'ints and/or bools!', i]),
        ];
        assert.strictEqual(expected[4][0], `${sequence}_ints_and_or_bools_-9dc354f6_0.npy`, 'characters outside [A-Za-z0-9_.-] become _');
        assert.deepStrictEqual(names, [...expected.map(([name]) => name), 'index.jsonl'].sort());
        assert.deepStrictEqual(readNpyIndex(dir), expected.map(([file, dtype, key, tensor]) => ({
          file, key, sequence, function: 'm.f', op: key === 'floats' ? 1 : 2, tensor, name: dtype, dtype, shape: shapes[dtype],
        })), 'index.jsonl: one line per file, in order');
        for (const [name, dtype] of expected) {
          const file = readNpyFile(path.join(dir, name));
          assert.deepStrictEqual(file.version, [1, 0], name);
          assert.strictEqual(file.descr, NUMPY_DESCR[dtype], `${name}: descr of ${dtype}`);
          assert.strictEqual(file.fortranOrder, false);
          assert.deepStrictEqual(file.shape, shapes[dtype], `${name}: shape`);
          assert.ok(file.data.equals(bytesOf(data[dtype])), `${name}: data bytes of ${dtype}`);
          // lib/npy.js reads the native files back as the tensor (bf16 as its raw u16 bits).
          const parsed = npy.parse(fs.readFileSync(path.join(dir, name)));
          assert.strictEqual(parsed.dtype, dtype === 'bf16' ? 'u16' : dtype);
          assert.deepStrictEqual(parsed.shape, shapes[dtype]);
          assert.deepStrictEqual(parsed.data, data[dtype]);
        }
      } finally {
        closeAll(inputs, fn);
        p.close();
      }
    });

    it('numbers files by invocation sequence and leaves no .tmp files; a directory it cannot write to is UNAVAILABLE', async () => {
      const p = makeProgram(uri, (b) => b.function('f', (f) => f
        .input('x', 'i32', [3]).output('y', 'i32', [3])
        .dispatch('k.add_i32', { workgroups: [1], bindings: ['x', 'x', 'y'], constants: [3] })
        .trace('y', ['y'])), { hal: { debugSink: halrt.sinks.npy(dir) } });
      const fn = p.lookup('f');
      const xs = [1, 2, 3].map((i) => p.device.tensor(Int32Array.of(i, -i, 100 * i), [3]));
      try {
        const sequences = [];
        for (const x of xs) {
          closeAll(await fn.invoke([x]));
          const fresh = fs.readdirSync(dir).filter((name) => name.endsWith('.npy'))
            .map((name) => Number(name.split('_')[0])).filter((s) => !sequences.includes(s));
          assert.strictEqual(fresh.length, 1);
          sequences.push(fresh[0]);
        }
        assert.deepStrictEqual(sequences, [sequences[0], sequences[0] + 1, sequences[0] + 2]);
        assert.deepStrictEqual(fs.readdirSync(dir).sort(), [...sequences.map((s) => npyFileName(s, 'y', 0)), 'index.jsonl'].sort());
        sequences.forEach((s, i) => {
          assert.deepStrictEqual(npy.parse(fs.readFileSync(path.join(dir, npyFileName(s, 'y', 0)))).data, Int32Array.of(2 * (i + 1), -2 * (i + 1), 200 * (i + 1)));
        });
        const file = path.join(dir, 'a-file');
        fs.writeFileSync(file, '');
        assertThrowsHalrt(() => new halrt.HalModule(p.instance, p.device, { debugSink: halrt.sinks.npy(path.join(file, 'sub')) }),
          'UNAVAILABLE', 'new HalModule: options.debugSink: cannot create directory', path.join(file, 'sub'));
      } finally {
        closeAll(xs, fn);
        p.close();
      }
    });

    it('writes into the folder it opened: once that is removed, invocations reject with DATA_LOSS naming the path, and a folder put in its place gets nothing', async () => {
      const p = makeProgram(uri, (b) => b.function('f', (f) => f
        .output('y', 'f32', [2]).fill('y', 1).trace('y', ['y'])), { hal: { debugSink: halrt.sinks.npy(dir) } });
      const fn = p.lookup('f');
      try {
        fs.rmSync(dir, { recursive: true });
        await assertRejectsHalrt(fn.invoke([]), 'DATA_LOSS', 'm.f', "trace 'y': cannot write tensor 0 to", dir);
        fs.mkdirSync(dir);
        await assertRejectsHalrt(fn.invoke([]), 'DATA_LOSS', 'm.f', dir);
        assert.deepStrictEqual(fs.readdirSync(dir), []);
      } finally {
        fn.close();
        p.close();
      }
    });

    it('gives every traced tensor its own file: keys that differ only in replaced characters, the same key twice, a 250-character key; index.jsonl maps files back to keys', async () => {
      const keys = ['a/b', 'a_b', 'a?b', '\u00e9', '\u00fc', 'a/b', 'k'.repeat(250)];
      const p = makeProgram(uri, (b) => b.function('f', (f) => {
        f.output('y', 'f32', [1]);
        keys.forEach((key, i) => f.fill('y', i).trace(key, ['y']));
      }), { hal: { debugSink: halrt.sinks.npy(dir) } });
      const fn = p.lookup('f');
      try {
        const [y] = await fn.invoke([]);
        y.close();
        const index = readNpyIndex(dir);
        const sequence = index[0].sequence;
        const files = keys.map((key) => npyFileName(sequence, key, 0));
        files[5] = files[0].replace(/\.npy$/, '.1.npy');  // the second 'a/b' finds its name taken
        assert.deepStrictEqual(index.map(({ file, key }) => [file, key]), files.map((file, i) => [file, keys[i]]));
        assert.deepStrictEqual(fs.readdirSync(dir).sort(), [...files, 'index.jsonl'].sort());
        files.forEach((file, i) => {
          assert.deepStrictEqual(npy.parse(fs.readFileSync(path.join(dir, file)), file).data, Float32Array.of(i), file);
        });
        assert.ok(files.every((file) => Buffer.byteLength(file) <= 120), 'names are capped');
      } finally {
        fn.close();
        p.close();
      }
    });

    it('never follows a symlink planted in the folder (at <file>.npy.tmp or the file name) nor replaces what is there', async () => {
      const p = makeProgram(uri, (b) => b.function('f', (f) => f
        .output('y', 'f32', [2]).fill('y', 3).trace('y', ['y'])), { hal: { debugSink: halrt.sinks.npy(dir) } });
      const fn = p.lookup('f');
      const outside = path.join(path.dirname(dir), 'outside.txt');
      try {
        closeAll(await fn.invoke([]));
        const next = readNpyIndex(dir)[0].sequence + 1;
        fs.writeFileSync(outside, 'precious');
        const planted = [`${next}_y_0.npy.tmp`, `${next}_y_0.npy`, npyFileName(next, 'y', 0)];
        for (const name of planted) fs.symlinkSync(outside, path.join(dir, name));
        closeAll(await fn.invoke([]));
        assert.strictEqual(fs.readFileSync(outside, 'utf8'), 'precious');
        for (const name of planted) assert.ok(fs.lstatSync(path.join(dir, name)).isSymbolicLink(), name);
        const written = npyFileName(next, 'y', 0).replace(/\.npy$/, '.1.npy');
        assert.deepStrictEqual(readNpyIndex(dir).map(({ file }) => file), [npyFileName(next - 1, 'y', 0), written]);
        assert.deepStrictEqual(npy.parse(fs.readFileSync(path.join(dir, written))).data, Float32Array.of(3, 3));
      } finally {
        fn.close();
        p.close();
      }
    });
  });
}

describe('halrt.npy', () => {
  it('write() then read() round-trips every dtype; dtype and shape come from the data unless given', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'halrt-npy-api-'));
    try {
      const file = path.join(dir, 'x.npy');
      halrt.npy.write(file, [[1, 2, 3], [4, 5, 6]]);
      assert.deepStrictEqual(halrt.npy.read(file), { dtype: 'f32', shape: [2, 3], data: Float32Array.of(1, 2, 3, 4, 5, 6) });
      halrt.npy.write(file, Uint16Array.of(7, 8));
      assert.deepStrictEqual(halrt.npy.read(file), { dtype: 'u16', shape: [2], data: Uint16Array.of(7, 8) });
      halrt.npy.write(file, [1, 2, 3, 4], { dtype: 'i64', shape: [2, 2] });
      assert.deepStrictEqual(halrt.npy.read(fs.readFileSync(file)), { dtype: 'i64', shape: [2, 2], data: BigInt64Array.of(1n, 2n, 3n, 4n) });
      halrt.npy.write(file, [true, false], { dtype: 'bool' });
      assert.deepStrictEqual(halrt.npy.read(new Uint8Array(fs.readFileSync(file))).data, Uint8Array.of(1, 0));
      halrt.npy.write(file, 2.5, { dtype: 'f64' });
      assert.deepStrictEqual(halrt.npy.read(file), { dtype: 'f64', shape: [], data: Float64Array.of(2.5) });
      // What the CLI reads as an input: a file halrt.npy.write made.
      halrt.npy.write(file, [0.5, 1.5], { dtype: 'f16' });
      assert.deepStrictEqual(halrt.npy.read(file), { dtype: 'f16', shape: [2], data: halrt.toF16Bits([0.5, 1.5]) });
      const bad = [
        [() => halrt.npy.write(file, [1, 2, 3], { shape: [2, 2] }), 'INVALID_ARGUMENT', 'halrt.npy.write: data has 3 elements but shape [2,2] needs 4'],
        [() => halrt.npy.write(file, [1], { dtype: 'f33' }), 'INVALID_ARGUMENT', "halrt.npy.write: options.dtype: unknown dtype 'f33'"],
        [() => halrt.npy.write('', [1]), 'INVALID_ARGUMENT', "halrt.npy.write: file must be a path (got '')"],
        [() => halrt.npy.write(file, [1], 5), 'INVALID_ARGUMENT', 'halrt.npy.write: options must be an object'],
        [() => halrt.npy.write(file, [1, 'a']), 'INVALID_ARGUMENT', "halrt.npy.write: data[1] must be a number, BigInt or boolean (got 'a')"],
        [() => halrt.npy.write(path.join(dir, 'no', 'x.npy'), [1]), 'UNAVAILABLE', 'halrt.npy.write: cannot write'],
        [() => halrt.npy.read(5), 'INVALID_ARGUMENT', 'halrt.npy.read: source must be a file path'],
        [() => halrt.npy.read(path.join(dir, 'missing.npy')), 'NOT_FOUND', 'halrt.npy.read: cannot read'],
        [() => halrt.npy.read(Buffer.from('abc')), 'INVALID_ARGUMENT', 'halrt.npy.read: not a .npy file'],
        [() => halrt.npy.read(dir), 'INVALID_ARGUMENT', 'halrt.npy.read', 'directory'],
      ];
      for (const [call, code, ...parts] of bad) assertThrowsHalrt(call, code, ...parts);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('lib/npy.js', () => {
  const SHAPES = [[], [0], [5], [2, 3, 4], [1, 0, 2]];

  it('serialize then parse gives back dtype, shape and data for every dtype and shape (bf16 comes back as u16)', () => {
    for (const dtype of halrt.dtypes) {
      for (const [i, shape] of SHAPES.entries()) {
        const data = sampleData(dtype, shape.reduce((a, b) => a * b, 1), i);
        const bytes = npy.serialize({ dtype, shape, data });
        assert.ok(Buffer.isBuffer(bytes));
        const parsed = npy.parse(bytes, 'round trip');
        assert.deepStrictEqual(parsed, { dtype: dtype === 'bf16' ? 'u16' : dtype, shape, data }, `${dtype} [${shape}]`);
      }
    }
  });

  it('serialize writes version 1.0 with NumPy\'s header: descr, fortran_order False, tuple shape, data at a multiple of 64', () => {
    const dir = tempDir('npyjs');
    try {
      for (const [dtype, shape] of [['f32', [3]], ['bool', []], ['i64', [2, 2]], ['bf16', [1]]]) {
        const data = sampleData(dtype, shape.reduce((a, b) => a * b, 1));
        const file = path.join(dir, `${dtype}.npy`);
        fs.writeFileSync(file, npy.serialize({ dtype, shape, data }));
        const read = readNpyFile(file);
        assert.deepStrictEqual([read.version, read.descr, read.fortranOrder, read.shape], [[1, 0], NUMPY_DESCR[dtype], false, shape]);
        assert.ok(read.data.equals(bytesOf(data)));
      }
      assert.strictEqual(npy.serialize({ dtype: 'f32', shape: [3], data: new Float32Array(3) }).subarray(10, 74).toString('latin1').trimEnd(),
        "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }");
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('parse reads version 2.0 and 3.0 headers and a TypedArray that views part of a buffer', () => {
    const header = "{'descr': '<i2', 'fortran_order': False, 'shape': (2,), }          \n";
    for (const major of [2, 3]) {
      const preamble = Buffer.alloc(12);
      Buffer.from([0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59, major, 0]).copy(preamble);
      preamble.writeUInt32LE(header.length, 8);
      const bytes = Buffer.concat([preamble, Buffer.from(header, 'latin1'), bytesOf(Int16Array.of(-2, 300))]);
      assert.deepStrictEqual(npy.parse(bytes), { dtype: 'i16', shape: [2], data: Int16Array.of(-2, 300) });
    }
    const whole = npy.serialize({ dtype: 'u8', shape: [2], data: Uint8Array.of(7, 9) });
    const padded = new Uint8Array(whole.length + 8);
    padded.set(whole, 4);
    assert.deepStrictEqual(npy.parse(padded.subarray(4, 4 + whole.length)).data, Uint8Array.of(7, 9));
  });

  it('parse errors are INVALID_ARGUMENT naming the source: magic, version, header, order, dtype, shape, size', () => {
    const good = npy.serialize({ dtype: 'f32', shape: [2], data: Float32Array.of(1, 2) });
    const withHeader = (text) => {
      const bytes = Buffer.from(good);
      const original = bytes.subarray(10, 10 + bytes.readUInt16LE(8)).toString('latin1');
      const replaced = text.padEnd(original.length - 1) + '\n';
      assert.strictEqual(replaced.length, original.length);
      bytes.write(replaced, 10, 'latin1');
      return bytes;
    };
    const versioned = Buffer.from(good);
    versioned[6] = 4;
    const cases = [
      [Buffer.from('not numpy at all'), 'x.npy: not a .npy file'],
      [good.subarray(0, 7), 'x.npy: not a .npy file'],
      [good.subarray(0, 8), 'x.npy: truncated header: 8 bytes, the preamble needs 10'],
      [versioned, 'x.npy: unsupported .npy version 4'],
      [good.subarray(0, 20), 'x.npy: truncated header'],
      [withHeader("{'descr': '<f4', 'shape': (2,), }"), 'x.npy: .npy header has keys [descr, shape]; it must have exactly descr, fortran_order and shape'],
      [withHeader("{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }"), 'x.npy: Fortran-ordered arrays are not supported'],
      [withHeader("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }"), "x.npy: unsupported dtype '>f4'"],
      [withHeader("{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }"), "x.npy: unsupported dtype '<c8'"],
      [withHeader("{'descr': '<f4', 'fortran_order': False, 'shape': (2.5,), }"), 'x.npy: bad shape (2.5,)'],
      [withHeader("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }"), 'x.npy: holds 8 data bytes but shape [3] of f32 needs 12'],
      [Buffer.concat([good, Buffer.alloc(1)]), 'x.npy: holds 9 data bytes but shape [2] of f32 needs 8'],
    ];
    for (const [bytes, message] of cases) {
      assertThrowsHalrt(() => npy.parse(bytes, 'x.npy'), 'INVALID_ARGUMENT', message);
    }
    assertThrowsHalrt(() => npy.parse(Buffer.from('nope')), 'INVALID_ARGUMENT', '.npy data: not a .npy file');
    assertThrowsHalrt(() => npy.serialize({ dtype: 'c64', shape: [1], data: new Float32Array(2) }), 'INVALID_ARGUMENT',
      "npy: unknown dtype 'c64'");
  });

  /** A .npy file of version major.minor whose header is `header` (encoded as that version says) followed by `data`. */
  function npyBytes(header, { major = 1, minor = 0, data = Buffer.alloc(0), headerBytes } = {}) {
    const text = headerBytes ?? Buffer.from(header, major === 3 ? 'utf8' : 'latin1');
    const preamble = Buffer.alloc(major === 1 ? 10 : 12);
    Buffer.from([0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59, major, minor]).copy(preamble);
    if (major === 1) preamble.writeUInt16LE(text.length, 8);
    else preamble.writeUInt32LE(text.length, 8);
    return Buffer.concat([preamble, text, data]);
  }

  it('truncated version 2.0 and 3.0 files are INVALID_ARGUMENT, never a RangeError', () => {
    for (const major of [2, 3]) {
      const whole = npyBytes("{'descr': '<i2', 'fortran_order': False, 'shape': (2,), }\n", { major, data: bytesOf(Int16Array.of(1, 2)) });
      for (const length of [11, 10, 9, 8]) {
        assertThrowsHalrt(() => npy.parse(whole.subarray(0, length), `v${major}.npy`), 'INVALID_ARGUMENT',
          `v${major}.npy: truncated header: ${length} bytes, the preamble needs 12`);
      }
      assertThrowsHalrt(() => npy.parse(whole.subarray(0, 40), `v${major}.npy`), 'INVALID_ARGUMENT', `v${major}.npy: truncated header: 40 bytes, the header ends at byte 70`);
      assertThrowsHalrt(() => npy.parse(whole.subarray(0, whole.length - 1), `v${major}.npy`), 'INVALID_ARGUMENT',
        `v${major}.npy: holds 3 data bytes but shape [2] of i16 needs 4`);
      assert.deepStrictEqual(npy.parse(whole), { dtype: 'i16', shape: [2], data: Int16Array.of(1, 2) });
    }
  });

  it('parse reads the header as the Python dict literal NumPy reads: either quotes, any spacing, line breaks, 1_0, a repeated key keeps its last value', () => {
    const accepted = [
      ['{"descr": "<i2", "fortran_order": False, "shape": (2,)}', 'i16', [2]],
      ["{'shape':(1_0,),'fortran_order':False,'descr':'|u1'}", 'u8', [10]],
      ["{'descr': '<f4',\n 'fortran_order': False,\n 'shape': ( 2 , 00 ) }\t\f\r\n  ", 'f32', [2, 0]],
      ["  {'descr': '<f4', 'descr': '<i4', 'fortran_order': False, 'shape': (3,)}", 'i32', [3]],
      ["{'shape': 'not yet', 'descr': [('x', '<f4')], 'fortran_order': None, 'shape': (), 'descr': '|b1', 'fortran_order': False}", 'bool', []],
    ];
    for (const [header, dtype, shape] of accepted) {
      const count = shape.reduce((a, b) => a * b, 1);
      const data = sampleData(dtype, count, 3);
      for (const major of [1, 2, 3]) {
        assert.deepStrictEqual(npy.parse(npyBytes(header, { major, data: bytesOf(data) })), { dtype, shape, data }, `${JSON.stringify(header)} (version ${major}.0)`);
      }
    }
  });

  it('parse rejects every header NumPy rejects, with INVALID_ARGUMENT naming the file and the field', () => {
    const withShape = (shape) => `{'descr': '<f4', 'fortran_order': False, 'shape': ${shape}, }`;
    const cases = [
      [withShape('(1e1,)'), 'x.npy: bad shape (1e1,)'],
      [withShape('(2.0,)'), 'x.npy: bad shape (2.0,)'],
      [withShape('(-1,)'), 'x.npy: bad shape (-1,)'],
      [withShape('(True,)'), 'x.npy: bad shape (True,)'],
      [withShape("('2',)"), "x.npy: bad shape ('2',)"],
      [withShape('(2)'), 'x.npy: bad shape (2)'],
      [withShape('[2]'), 'x.npy: bad shape [2]'],
      [withShape('((2,),)'), 'x.npy: bad shape ((2,),)'],
      [withShape('(02,)'), 'x.npy: malformed .npy header: expected a string, number'],
      [withShape('(0x10,)'), 'x.npy: malformed .npy header: expected a string, number'],
      [withShape('(2L,)'), 'x.npy: malformed .npy header: expected a string, number'],
      [withShape('(,)'), 'x.npy: malformed .npy header'],
      [withShape('(2,),'), 'x.npy: malformed .npy header'],
      [withShape('(2 3)'), "x.npy: malformed .npy header: expected ',' or ')'"],
      [`${withShape('(2,)')} x`, 'x.npy: malformed .npy header: expected the end of the header'],
      [`${withShape('(2,)')}\x00`, 'x.npy: malformed .npy header: expected the end of the header'],
      [`${withShape('(2,)')} # comment`, 'x.npy: malformed .npy header'],
      [`(${withShape('(2,)')})`, "x.npy: malformed .npy header: expected '{'"],
      ["{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'shape': 'x'}", "x.npy: bad shape 'x'"],
      ["{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'extra': 1}",
        'x.npy: .npy header has keys [descr, extra, fortran_order, shape]; it must have exactly descr, fortran_order and shape'],
      ["{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 1: 1}", "x.npy: .npy header key 1 is not one of 'descr', 'fortran_order', 'shape'"],
      ["{'descr': '<f4', 'fortran_order': 0, 'shape': (2,)}", "x.npy: .npy header field 'fortran_order' must be True or False, not 0"],
      ["{'descr': '<f4', 'fortran_order': false, 'shape': (2,)}", 'x.npy: malformed .npy header'],
      ["{'descr': b'<f4', 'fortran_order': False, 'shape': (2,)}", 'x.npy: malformed .npy header'],
      ["{'descr': '<f\\x34', 'fortran_order': False, 'shape': (2,)}", 'x.npy: malformed .npy header: expected a string without escapes'],
      ["{'descr': ['<f4'], 'fortran_order': False, 'shape': (2,)}", "x.npy: unsupported dtype ['<f4'] in .npy header field 'descr'"],
      [withShape(`${'('.repeat(40)}2,${')'.repeat(40)}`), 'x.npy: .npy header nests brackets more than 32 deep'],
      [withShape('(2,)') + ' '.repeat(10000), "x.npy: .npy header of 10057 characters is longer than NumPy's limit of 10000"],
      [withShape('(2,)') + ' '.repeat(40000), "x.npy: .npy header of 40057 bytes is longer than NumPy's limit of 10000 characters"],
    ];
    const data = bytesOf(Float32Array.of(1, 2));
    for (const [header, message] of cases) {
      for (const major of [1, 2, 3]) {
        if (major === 1 && header.length > 65535) continue;
        assertThrowsHalrt(() => npy.parse(npyBytes(header, { major, data }), 'x.npy'), 'INVALID_ARGUMENT', message);
      }
    }
    const good = withShape('(2,)');
    assertThrowsHalrt(() => npy.parse(npyBytes(good, { minor: 1, data }), 'x.npy'), 'INVALID_ARGUMENT',
      'x.npy: unsupported .npy version 1.1 (NumPy reads 1.0, 2.0 and 3.0)');
    assertThrowsHalrt(() => npy.parse(npyBytes(good, { major: 3, data, headerBytes: Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(good)]) }), 'x.npy'),
      'INVALID_ARGUMENT', "x.npy: malformed .npy header: expected '{' at character 0");
    assertThrowsHalrt(() => npy.parse(npyBytes(good, { major: 3, data, headerBytes: Buffer.from(good.replace('<f4', '<f\xff'), 'latin1') }), 'x.npy'),
      'INVALID_ARGUMENT', 'x.npy: .npy version 3.0 header is not valid UTF-8');
  });
});

describe('halrt.sinks.stdio', function () {
  this.timeout(30000);

  /** Runs a traced program with a stdio sink in a child process; returns its stdout. */
  function runStdio(uri, sinkSource) {
    const source = `
      const halrt = require(${LIB});
      (async () => {
        const instance = new halrt.Instance();
        const device = instance.createDevice(${JSON.stringify(uri)});
        const hal = new halrt.HalModule(instance, device, { debugSink: ${sinkSource} });
        const module = new halrt.ModuleBuilder('m').executable('k', { local: { builtin: true }, cuda: { builtin: true } })
          .function('f', (f) => f
            .input('x', 'f32', [2, 3]).input('n', 'i64', [10]).output('y', 'f32', [2, 3])
            .local('s', 'f32', []).local('b', 'bf16', [2]).local('h', 'f16', [3]).local('q', 'bool', [1, 2])
            .local('e', 'i32', [0, 3]).local('u', 'u8', [17])
            .dispatch('k.add_f32', { workgroups: [1], bindings: ['x', 'x', 'y'], constants: [6] })
            .trace('doubled', ['y'])
            .fill('s', 2.5).fill('b', -0.1).fill('h', 1e6).fill('q', true).fill('u', 200)
            .trace('many kinds', ['n', 's', 'b', 'h', 'q', 'e', 'u']))
          .build(instance);
        const context = new halrt.Context(instance, [hal, module]);
        const fn = context.lookupFunction('m.f');
        const x = device.tensor(Float32Array.from([0.5, -1.25, 3, 1e-7, 123456789, -0]), [2, 3]);
        const n = device.tensor(BigInt64Array.from({ length: 10 }, (_, i) => BigInt(i) * -1000000000000n), [10]);
        for (let i = 0; i < 2; ++i) {
          const [y] = await fn.invoke([x, n]);
          process.stdout.write('resolved ' + i + '\\n');
          y.close();
        }
      })();
    `;
    const result = spawnSync(process.execPath, ['-e', source], { encoding: 'utf8', timeout: 20000 });
    assert.strictEqual(result.error, undefined, String(result.error));
    assert.strictEqual(result.status, 0, result.stderr);
    assert.strictEqual(result.stderr, '');
    return result.stdout;
  }

  for (const uri of DEVICE_URIS) {
    it(`prints "=== key (function op N, invocation S) ===" then "name: shape x dtype=tensor" per tensor, as halrt.format writes it, before invoke() resolves (${uri})`, () => {
      const out = runStdio(uri, 'halrt.sinks.stdio()');
      const block = (sequence) => [
        `=== doubled (m.f op 1, invocation ${sequence}) ===`,
        'y: 2x3xf32=[[1 -2.5 6] [2e-7 246913580 -0]]',
        `=== many kinds (m.f op 7, invocation ${sequence}) ===`,
        'n: 10xi64=[0 -1000000000000 -2000000000000 -3000000000000 -4000000000000 -5000000000000 -6000000000000 -7000000000000 -8000000000000 -9000000000000]',
        's: f32=2.5',
        'b: 2xbf16=[-0.1 -0.1]',
        'h: 3xf16=[Infinity Infinity Infinity]',
        'q: 1x2xbool=[[true true]]',
        'e: 0x3xi32=[]',
        'u: 17xu8=[200 200 200 ... 200 200 200]',
      ];
      assert.strictEqual(out, [...block(1), 'resolved 0', ...block(2), 'resolved 1', ''].join('\n'));
    });
  }

  it('beyond maxElements elements, each dimension longer than 6 shows its first and last 3 entries', () => {
    const out = runStdio(DEVICE_URIS[0], 'halrt.sinks.stdio({ maxElements: 5 })').split('\n');
    assert.deepStrictEqual(out.slice(0, 4), [
      '=== doubled (m.f op 1, invocation 1) ===',
      'y: 2x3xf32=[[1 -2.5 6] [2e-7 246913580 -0]]',
      '=== many kinds (m.f op 7, invocation 1) ===',
      'n: 10xi64=[0 -1000000000000 -2000000000000 ... -7000000000000 -8000000000000 -9000000000000]',
    ]);
    assert.strictEqual(out[4], 's: f32=2.5');
    assert.strictEqual(out[9], 'u: 17xu8=[200 200 200 ... 200 200 200]');
    const exact = runStdio(DEVICE_URIS[0], 'halrt.sinks.stdio({ maxElements: 10 })').split('\n');
    assert.strictEqual(exact[3], 'n: 10xi64=[0 -1000000000000 -2000000000000 -3000000000000 -4000000000000 -5000000000000 ' +
      '-6000000000000 -7000000000000 -8000000000000 -9000000000000]', 'a tensor of exactly maxElements is printed whole');
  });

  it('a maxElements below 2 or not an integer is INVALID_ARGUMENT when the HalModule is made', () => {
    const instance = new halrt.Instance();
    const device = instance.createDevice('local-sync');
    try {
      for (const [maxElements, got] of [[1, '1'], [1.5, '1.5'], [-4, '-4'], ['8', "'8'"]]) {
        assertThrowsHalrt(() => new halrt.HalModule(instance, device, { debugSink: halrt.sinks.stdio({ maxElements }) }),
          'INVALID_ARGUMENT', 'new HalModule: options.debugSink.maxElements must be an integer in [2, 1073741824]', `(got ${got})`);
      }
      assert.deepStrictEqual({ ...halrt.sinks.stdio() }, { halrtSinkKind: 'stdio', maxElements: 16 });
      assertThrowsHalrt(() => halrt.sinks.stdio({ maxElement: 4 }), 'INVALID_ARGUMENT', "halrt.sinks.stdio: unknown option 'maxElement' (known: maxElements)");
      assertThrowsHalrt(() => halrt.sinks.stdio(4), 'INVALID_ARGUMENT', 'halrt.sinks.stdio: options must be an object (got 4)');
      assert.ok(Object.isFrozen(halrt.sinks.stdio({ maxElements: 4 })));
    } finally {
      closeAll(device, instance);
    }
  });
});

for (const uri of DEVICE_URIS) {
  describe(`halrt.sinks.stats (${uri})`, () => {
    it('figures equal those computed in JavaScript, NaN and Inf counted and left out of min, max and mean', async () => {
      const calls = [];
      const n = 64;
      const p = makeProgram(uri, (b) => b.function('f', (f) => f
        .input('a', 'f32', [8, 8]).input('b', 'f32', [8, 8]).input('i', 'i32', [5]).input('d', 'f64', [3])
        .output('q', 'f32', [8, 8]).local('h', 'f16', [4]).local('z', 'bf16', [2]).local('flags', 'bool', [3])
        .local('all', 'f32', [2]).local('none', 'u8', [0])
        .dispatch('k.div_f32', { workgroups: [3], bindings: ['a', 'b', 'q'], constants: [n] })
        .fill('h', 1e6).fill('z', -3.5).fill('flags', 1)
        .dispatch('k.div_f32', { workgroups: [1], bindings: ['all', 'all', 'all'], constants: [2] })
        .trace('quotients', ['q', 'i', 'd'])
        .trace('fills', ['h', 'z', 'flags', 'all', 'none'])), {
        hal: { debugSink: halrt.sinks.stats((key, stats, info) => calls.push({ key, stats, info })) },
      });
      const fn = p.lookup('f');
      const a = randomFloats(n, 7, 10);
      const b = randomFloats(n, 8, 2);
      // 0/0 is NaN, x/0 is ±Inf: four of each.
      for (const [i, num, den] of [[0, 0, 0], [9, 0, 0], [20, 0, 0], [63, 0, 0], [1, 3, 0], [2, -5, 0], [30, 1, 0], [40, -1, 0]]) {
        a[i] = num;
        b[i] = den;
      }
      const ints = Int32Array.of(-7, 2147483647, 0, -2147483648, 12);
      const doubles = Float64Array.of(Math.PI, -1e300, 1 / 3);
      const inputs = [p.device.tensor(a, [8, 8]), p.device.tensor(b, [8, 8]), p.device.tensor(ints, [5]), p.device.tensor(doubles, [3])];
      try {
        const [q] = await fn.invoke(inputs);
        const quotients = await q.read();
        q.close();
        assert.deepStrictEqual(calls.map((c) => c.key), ['quotients', 'fills']);
        const expected = [
          [{ name: 'q', dtype: 'f32', shape: [8, 8] }, quotients],
          [{ name: 'i', dtype: 'i32', shape: [5] }, ints],
          [{ name: 'd', dtype: 'f64', shape: [3] }, doubles],
          // f16 and bf16 figures are those of the decoded values: 1e6 is +Inf in f16.
          [{ name: 'h', dtype: 'f16', shape: [4] }, new Array(4).fill(Infinity)],
          [{ name: 'z', dtype: 'bf16', shape: [2] }, [-3.5, -3.5]],
          [{ name: 'flags', dtype: 'bool', shape: [3] }, [1, 1, 1]],
          [{ name: 'all', dtype: 'f32', shape: [2] }, [NaN, NaN]],
          [{ name: 'none', dtype: 'u8', shape: [0] }, []],
        ];
        const got = [...calls[0].stats, ...calls[1].stats];
        assert.strictEqual(got.length, expected.length);
        got.forEach((stats, i) => {
          const [head, values] = expected[i];
          assert.deepStrictEqual(Object.keys(stats).sort(), ['count', 'dtype', 'infCount', 'max', 'mean', 'min', 'name', 'nanCount', 'shape']);
          const want = { ...head, ...jsStats(values) };
          for (const field of ['name', 'dtype', 'shape', 'count', 'nanCount', 'infCount', 'min', 'max']) {
            assert.deepStrictEqual(stats[field], want[field], `${head.name}.${field}`);
          }
          if (Number.isNaN(want.mean)) assert.ok(Number.isNaN(stats.mean), `${head.name}.mean`);
          else assert.ok(Math.abs(stats.mean - want.mean) <= 1e-12 * Math.max(1, Math.abs(want.mean)), `${head.name}.mean ${stats.mean} vs ${want.mean}`);
        });
        assert.deepStrictEqual([got[0].nanCount, got[0].infCount, got[0].count], [4, 4, 64]);
        for (const { info } of calls) {
          assert.deepStrictEqual(Object.keys(info).sort(), ['dropped', 'function', 'mode', 'op', 'recorded', 'sequence', 'timeNs']);
          assert.strictEqual(info.function, 'm.f');
        }
        assert.deepStrictEqual(calls.map((c) => c.info.op), [5, 6]);
      } finally {
        closeAll(inputs, fn);
        p.close();
      }
    });

    it('a stats callback that throws rejects the invocation with ABORTED and the error as cause; stats() needs a function', async () => {
      const thrown = new RangeError('too big');
      const p = makeProgram(uri, (b) => b.function('f', (f) => f.input('x', 'f32', [2]).trace('x', ['x']).output('y', 'u8', [1])), {
        hal: { debugSink: halrt.sinks.stats((key, stats) => { if (stats[0].max > 10) throw thrown; }) },
      });
      const fn = p.lookup('f');
      const small = p.device.tensor(Float32Array.of(1, 2), [2]);
      const big = p.device.tensor(Float32Array.of(1, 20), [2]);
      try {
        await assert.rejects(fn.invoke([big]), (error) => error.code === 'ABORTED' && error.cause === thrown);
        closeAll(await fn.invoke([small]));
        for (const value of [undefined, 5, {}]) {
          assertThrowsHalrt(() => halrt.sinks.stats(value), 'INVALID_ARGUMENT', 'halrt.sinks.stats: callback must be a function');
        }
      } finally {
        closeAll(small, big, fn);
        p.close();
      }
    });
  });

  describe(`nonFinite (${uri})`, () => {
    function divProgram(sink, nonFinite) {
      return makeProgram(uri, (b) => b.function('f', (f) => f
        .input('a', 'f32', [2, 3]).input('b', 'f32', [2, 3]).output('y', 'f32', [2, 3]).local('n', 'i32', [2])
        .fill('n', 5)
        .trace('before', ['n', 'a'])
        .dispatch('k.div_f32', { workgroups: [1], bindings: ['a', 'b', 'y'], constants: [6] })
        .trace('quotient', ['n', 'y'])
        .trace('after', ['n'])), { hal: { debugSink: sink, nonFinite } });
    }

    it("'reject' rejects with ABORTED at the first traced NaN or Inf, naming key, tensor and index; the sink never sees that trace", async () => {
      const seen = [];
      const p = divProgram((key, tensors) => seen.push([key, tensors.map((t) => Array.from(t.data))]), 'reject');
      const fn = p.lookup('f');
      const a = p.device.tensor(Float32Array.of(1, 2, 3, 4, 0, 6), [2, 3]);
      const finite = p.device.tensor(Float32Array.of(1, 2, 4, 8, 16, 32), [2, 3]);
      const inf = p.device.tensor(Float32Array.of(1, 2, 4, 0, 16, 32), [2, 3]);
      const nan = p.device.tensor(Float32Array.of(1, 2, 4, 8, 0, 32), [2, 3]);
      try {
        const [y] = await fn.invoke([a, finite]);
        assert.deepStrictEqual(await y.read(), Float32Array.of(1, 1, 0.75, 0.5, 0, 0.1875));
        y.close();
        assert.deepStrictEqual(seen.map(([key]) => key), ['before', 'quotient', 'after'], 'finite runs resolve with every trace');
        seen.length = 0;
        await assertRejectsHalrt(fn.invoke([a, inf]), 'ABORTED', "m.f: trace 'quotient': tensor 'y' holds a non-finite value at index 3");
        assert.deepStrictEqual(seen, [['before', [[5, 5], [1, 2, 3, 4, 0, 6]]]], 'the trace holding Inf and everything after it never reached the sink');
        seen.length = 0;
        await assertRejectsHalrt(fn.invoke([a, nan]), 'ABORTED', "m.f: trace 'quotient': tensor 'y' holds a non-finite value at index 4");
        assert.deepStrictEqual(seen.map(([key]) => key), ['before']);
        seen.length = 0;
        // And the function still works.
        closeAll(await fn.invoke([a, finite]));
        assert.deepStrictEqual(seen.map(([key]) => key), ['before', 'quotient', 'after']);
      } finally {
        closeAll(a, finite, inf, nan, fn);
        p.close();
      }
    });

    it("'reject' checks f16/bf16 traces and traceDispatches keys, and stops a native sink writing the bad trace", async () => {
      const dir = tempDir('nonfinite');
      const p = makeProgram(uri, (b) => b.function('f', (f) => f
        .input('a', 'f32', [2]).output('y', 'f32', [2]).local('h', 'f16', [3]).local('z', 'bf16', [2])
        .fill('h', 1).trace('half', ['h'])
        .fill('z', 1e39).trace('bfloat', ['z'])
        .dispatch('k.div_f32', { workgroups: [1], bindings: ['a', 'a', 'y'], constants: [2] })), {
        hal: { debugSink: halrt.sinks.npy(dir), nonFinite: 'reject', traceDispatches: true },
      });
      const fn = p.lookup('f');
      const a = p.device.tensor(Float32Array.of(1, 0), [2]);
      try {
        await assertRejectsHalrt(fn.invoke([a]), 'ABORTED', "m.f: trace 'bfloat': tensor 'z' holds a non-finite value at index 0");
        const [{ sequence }] = readNpyIndex(dir);
        assert.deepStrictEqual(fs.readdirSync(dir).sort(), [npyFileName(sequence, 'half', 0), 'index.jsonl']);
        const hp = makeProgram(uri, (b) => b.function('g', (f) => f
          .input('a', 'f32', [2]).output('y', 'f32', [2])
          .dispatch('k.div_f32', { workgroups: [1], bindings: ['a', 'a', 'y'], constants: [2] })), { hal: { nonFinite: 'reject', traceDispatches: true, debugSink: () => {} } });
        const g = hp.lookup('g');
        const a2 = hp.device.tensor(Float32Array.of(1, 0), [2]);
        await assertRejectsHalrt(g.invoke([a2]), 'ABORTED', "m.g: trace 'g:0:div_f32': tensor 'y' holds a non-finite value at index 1");
        closeAll(a2, g);
        hp.close();
      } finally {
        closeAll(a, fn);
        p.close();
        fs.rmSync(dir, { recursive: true, force: true });
      }
    });

    it("'ignore' (the default) delivers NaN and Inf to the sink and resolves", async () => {
      for (const nonFinite of [undefined, 'ignore']) {
        const seen = [];
        const p = divProgram((key, tensors) => seen.push([key, tensors.map((t) => Array.from(t.data))]), nonFinite);
        const fn = p.lookup('f');
        const a = p.device.tensor(Float32Array.of(0, 2, 3, 4, 0, 6), [2, 3]);
        const b = p.device.tensor(Float32Array.of(0, 2, 0, 4, 1, -0), [2, 3]);
        try {
          const [y] = await fn.invoke([a, b]);
          // As numbers: 0/0 may be a NaN with another sign or payload than JavaScript's.
          assert.deepStrictEqual(Array.from(await y.read()), [NaN, 1, Infinity, 1, 0, -Infinity]);
          y.close();
          assert.deepStrictEqual(seen[1], ['quotient', [[5, 5], [NaN, 1, Infinity, 1, 0, -Infinity]]]);
          assert.strictEqual(seen.length, 3);
        } finally {
          closeAll(a, b, fn);
          p.close();
        }
      }
    });
  });

  describe(`profile (${uri})`, () => {
    function profiled(events, options = {}) {
      return makeProgram(uri, (b) => b.function('f', (f) => f
        .input('x', 'f32', [48, 48]).output('y', 'f32', [48, 48]).local('t', 'f32', [48, 48])
        .dispatch('k.matmul_f32', { workgroups: [2, 2, 1], bindings: ['x', 'x', 't'], constants: [48, 48, 48] })
        .trace('t', ['t'])
        .fill('y', 0)
        .dispatch('k.relu_f32', { workgroups: [3], bindings: ['t', 'y'], constants: [48 * 48] })
        .dispatch('k.axpy_f32', { workgroups: [2], bindings: ['y', 'y', 'y'], constants: [48 * 48, 0.5] })
        .trace('y', ['y'])), {
        hal: {
          profile: true,
          debugSink: {
            trace: (key, tensors, info) => events.push({ type: 'trace', key, info }),
            timing: (event) => events.push({ type: 'timing', event }),
            invocation: (event) => events.push({ type: 'invocation', event }),
          },
          ...options,
        },
      });
    }

    it('reports one timing per dispatch (sequence, function, op, kernel, device) within the invoke, before its trace and its settling', async () => {
      const events = [];
      const p = profiled(events);
      const fn = p.lookup('f');
      const x = p.device.tensor(randomFloats(48 * 48, 5), [48, 48]);
      try {
        assert.strictEqual(p.hal.profile, true);
        const before = Number(process.hrtime.bigint());
        const [y] = await fn.invoke([x]);
        const after = Number(process.hrtime.bigint());
        y.close();
        assert.deepStrictEqual(events.map((e) => (e.type === 'timing' ? `timing ${e.event.op}` : `${e.type} ${e.key ?? ''}`.trim())),
          ['timing 0', 'trace t', 'timing 3', 'timing 4', 'trace y', 'invocation'], 'order of events');
        const timings = events.filter((e) => e.type === 'timing').map((e) => e.event);
        const sequence = events[1].info.sequence;
        assert.deepStrictEqual(timings.map(({ startNs, durationNs, ...rest }) => rest), [
          { sequence, function: 'm.f', op: 0, kernel: 'k.matmul_f32', device: p.device.info.uri },
          { sequence, function: 'm.f', op: 3, kernel: 'k.relu_f32', device: p.device.info.uri },
          { sequence, function: 'm.f', op: 4, kernel: 'k.axpy_f32', device: p.device.info.uri },
        ]);
        for (const t of timings) {
          assert.deepStrictEqual(Object.keys(t).sort(), ['device', 'durationNs', 'function', 'kernel', 'op', 'sequence', 'startNs']);
          assert.ok(Number.isSafeInteger(t.startNs) && Number.isSafeInteger(t.durationNs) && t.durationNs >= 0, JSON.stringify(t));
          assert.ok(t.startNs >= before && t.startNs + t.durationNs <= after,
            `dispatch ${t.op} [${t.startNs}, +${t.durationNs}] lies within invoke() [${before}, ${after}] (process.hrtime timeline)`);
        }
        for (let i = 1; i < timings.length; ++i) {
          assert.ok(timings[i].startNs >= timings[i - 1].startNs + timings[i - 1].durationNs, `dispatch ${timings[i].op} starts after ${timings[i - 1].op} ends`);
        }
        // Trace times: taken after the dispatch before them ended, in order, within the invoke.
        const traces = events.filter((e) => e.type === 'trace').map((e) => e.info.timeNs);
        assert.ok(traces[0] >= timings[0].startNs + timings[0].durationNs, 'trace t after matmul');
        assert.ok(traces[1] >= timings[2].startNs + timings[2].durationNs, 'trace y after axpy');
        assert.ok(traces[1] >= traces[0] && traces[1] <= after);
        // The invocation span covers its dispatches and lies within the invoke.
        const invocation = events[5].event;
        assert.deepStrictEqual(Object.keys(invocation).sort(), ['durationNs', 'function', 'ok', 'sequence', 'startNs']);
        assert.deepStrictEqual([invocation.sequence, invocation.function, invocation.ok], [sequence, 'm.f', true]);
        assert.ok(invocation.startNs >= before && invocation.startNs <= timings[0].startNs, 'the invocation starts before its first dispatch');
        const last = timings[2];
        assert.ok(invocation.startNs + invocation.durationNs >= last.startNs + last.durationNs, 'and ends after its last');
        assert.ok(invocation.startNs + invocation.durationNs <= after);
      } finally {
        closeAll(x, fn);
        p.close();
      }
    });

    it('dispatches of concurrent invocations on one device never overlap; each invocation\'s events precede its settling', async () => {
      const events = [];
      const p = profiled(events);
      const fn = p.lookup('f');
      const x = p.device.tensor(randomFloats(48 * 48, 6), [48, 48]);
      try {
        const seenAtSettle = [];
        await Promise.all(Array.from({ length: 6 }, () => fn.invoke([x]).then((outputs) => {
          closeAll(outputs);
          seenAtSettle.push(events.filter((e) => e.type === 'invocation').map((e) => e.event.sequence));
        })));
        const timings = events.filter((e) => e.type === 'timing').map((e) => e.event);
        assert.strictEqual(timings.length, 18);
        const bySequence = new Map();
        for (const t of timings) bySequence.set(t.sequence, [...(bySequence.get(t.sequence) ?? []), t.op]);
        assert.strictEqual(bySequence.size, 6);
        for (const ops of bySequence.values()) assert.deepStrictEqual(ops, [0, 3, 4]);
        const sorted = [...timings].sort((a, b) => a.startNs - b.startNs);
        for (let i = 1; i < sorted.length; ++i) {
          assert.ok(sorted[i].startNs >= sorted[i - 1].startNs + sorted[i - 1].durationNs, 'one queue runs one dispatch at a time');
        }
        // One queue completes invocations in order, so the i-th to settle is
        // the i-th started: its event and those before it were in by then.
        seenAtSettle.forEach((sequences, i) => assert.ok(sequences.length >= i + 1, `settle ${i} saw ${sequences}`));
      } finally {
        closeAll(x, fn);
        p.close();
      }
    });

    it('profile: false sends no timings; a failed invocation reports ok: false; a function sink with profile still gets its traces', async () => {
      const events = [];
      const p = profiled(events, { profile: false });
      const fn = p.lookup('f');
      const x = p.device.tensor(randomFloats(48 * 48, 6), [48, 48]);
      try {
        assert.strictEqual(p.hal.profile, false);
        closeAll(await fn.invoke([x]));
        assert.deepStrictEqual(events.map((e) => e.type), ['trace', 'trace', 'invocation']);
      } finally {
        closeAll(x, fn);
        p.close();
      }
      // A throwing trace callback fails the invocation: its event says ok: false.
      const failing = [];
      const q = makeProgram(uri, (b) => b.function('g', (f) => f.output('y', 'i32', [1]).fill('y', 1).trace('y', ['y'])), {
        hal: {
          profile: true,
          debugSink: {
            trace: () => { throw new Error('no'); },
            invocation: (event) => failing.push(event),
          },
        },
      });
      const g = q.lookup('g');
      try {
        await assertRejectsHalrt(g.invoke([]), 'ABORTED', 'm.g: the debug sink threw');
        assert.strictEqual(failing.length, 1);
        assert.strictEqual(failing[0].ok, false);
      } finally {
        g.close();
        q.close();
      }
      const keys = [];
      const r = makeProgram(uri, (b) => b.function('h', (f) => f.input('x', 'f32', [4]).output('y', 'f32', [4])
        .dispatch('k.relu_f32', { workgroups: [1], bindings: ['x', 'y'], constants: [4] }).trace('y', ['y'])), {
        hal: { profile: true, debugSink: (key) => keys.push(key) },
      });
      const h = r.lookup('h');
      const x4 = r.device.tensor(Float32Array.of(-1, 1, -2, 2), [4]);
      try {
        const [y] = await h.invoke([x4]);
        assert.deepStrictEqual(await y.read(), Float32Array.of(0, 1, 0, 2));
        y.close();
        assert.deepStrictEqual(keys, ['y']);
      } finally {
        closeAll(x4, h);
        r.close();
      }
    });
  });

  describe(`halrt.sinks.tee (${uri})`, () => {
    it('native and JavaScript sinks together: npy files, stats and a function all see every trace', async () => {
      const dir = tempDir('tee');
      const keys = [];
      const stats = [];
      const p = makeProgram(uri, (b) => b.function('f', (f) => f
        .input('x', 'f32', [3]).output('y', 'f32', [3])
        .dispatch('k.add_f32', { workgroups: [1], bindings: ['x', 'x', 'y'], constants: [3] })
        .trace('in', ['x']).trace('out', ['y'])), {
        hal: {
          debugSink: halrt.sinks.tee(
            halrt.sinks.npy(dir),
            (key, tensors) => keys.push([key, Array.from(tensors[0].data)]),
            halrt.sinks.stats((key, s) => stats.push([key, s[0].max])),
          ),
        },
      });
      const fn = p.lookup('f');
      const x = p.device.tensor(Float32Array.of(1, -2, 3), [3]);
      try {
        closeAll(await fn.invoke([x]));
        assert.deepStrictEqual(keys, [['in', [1, -2, 3]], ['out', [2, -4, 6]]]);
        assert.deepStrictEqual(stats, [['in', 3], ['out', 6]]);
        const index = readNpyIndex(dir);
        const files = ['in', 'out'].map((key) => npyFileName(index[0].sequence, key, 0));
        assert.deepStrictEqual(index.map(({ file }) => file), files);
        assert.deepStrictEqual(npy.parse(fs.readFileSync(path.join(dir, files[1]))).data, Float32Array.of(2, -4, 6));
      } finally {
        closeAll(x, fn);
        p.close();
        fs.rmSync(dir, { recursive: true, force: true });
      }
    });

    it('two JavaScript sinks are served in order; a throw from one rejects the invocation but the other still sees the trace', async () => {
      const log = [];
      const objectSink = {
        trace(key) { log.push(`object trace ${key}`); },
        timing(event) { log.push(`object timing ${event.op}`); },
        invocation(event) { log.push(`object invocation ${event.ok}`); },
      };
      let fail = false;
      const fnSink = (key) => {
        log.push(`function trace ${key}`);
        if (fail) throw new Error('function sink failed');
      };
      const p = makeProgram(uri, (b) => b.function('f', (f) => f
        .input('x', 'f32', [2]).output('y', 'f32', [2])
        .dispatch('k.relu_f32', { workgroups: [1], bindings: ['x', 'y'], constants: [2] }).trace('y', ['y'])), {
        hal: { profile: true, debugSink: halrt.sinks.tee(fnSink, halrt.sinks.tee(objectSink)) },
      });
      const fn = p.lookup('f');
      const x = p.device.tensor(Float32Array.of(1, -1), [2]);
      try {
        closeAll(await fn.invoke([x]));
        assert.deepStrictEqual(log, ['object timing 0', 'function trace y', 'object trace y', 'object invocation true']);
        log.length = 0;
        fail = true;
        await assert.rejects(fn.invoke([x]), (error) => error.code === 'ABORTED' && error.cause.message === 'function sink failed');
        assert.deepStrictEqual(log, ['object timing 0', 'function trace y', 'object trace y', 'object invocation false']);
      } finally {
        closeAll(x, fn);
        p.close();
      }
    });

    it('tee of one sink is that sink; bad sinks are INVALID_ARGUMENT; sinks are not combined by an Array', () => {
      const one = () => {};
      assert.strictEqual(halrt.sinks.tee(one), one);
      const instance = new halrt.Instance();
      const device = instance.createDevice(uri);
      const make = (debugSink) => () => new halrt.HalModule(instance, device, { debugSink });
      try {
        assertThrowsHalrt(() => halrt.sinks.tee(), 'INVALID_ARGUMENT', 'halrt.sinks.tee: give at least one sink');
        assertThrowsHalrt(() => halrt.sinks.tee(one, 5), 'INVALID_ARGUMENT', 'halrt.sinks.tee: sink 1 must be a function, an object sink or a halrt.sinks sink');
        assertThrowsHalrt(() => halrt.sinks.tee(null), 'INVALID_ARGUMENT', 'halrt.sinks.tee: sink 0 must be');
        // A second JavaScript sink given directly, not through tee.
        assertThrowsHalrt(make([one, () => {}]), 'INVALID_ARGUMENT',
          'new HalModule: options.debugSink is an Array; combine sinks with halrt.sinks.tee(...sinks)');
        assertThrowsHalrt(make(halrt.sinks.tee(one, [one, one])), 'INVALID_ARGUMENT', 'options.debugSink.sinks[1] is an Array');
        assertThrowsHalrt(make({ trace: 'x' }), 'INVALID_ARGUMENT', "new HalModule: options.debugSink.trace must be a function (got 'x')");
        assertThrowsHalrt(make({ traces() {} }), 'INVALID_ARGUMENT', 'options.debugSink has none of the sink methods trace, timing and invocation');
        assertThrowsHalrt(make(halrt.sinks.tee(...Array.from({ length: 17 }, () => () => {}))), 'INVALID_ARGUMENT',
          'options.debugSink.sinks[16] is JavaScript sink number 17; at most 16 may be combined');
        let nested = one;
        for (let i = 0; i < 10; ++i) nested = { halrtSinkKind: 'tee', sinks: [nested] };
        assertThrowsHalrt(make(nested), 'INVALID_ARGUMENT', 'nests tees more than 8 deep');
        assertThrowsHalrt(make({ halrtSinkKind: 'tee', sinks: [] }), 'INVALID_ARGUMENT', 'options.debugSink.sinks must hold at least one sink');
      } finally {
        closeAll(device, instance);
      }
    });
  });

  describe(`halrt.sinks.chromeTrace (${uri})`, function () {
    this.timeout(30000);
    let dir;
    beforeEach(() => {
      dir = tempDir('chrome');
    });
    afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

    function traced(sink, instance) {
      return makeProgram(uri, (b) => b.function('f', (f) => f
        .input('x', 'f32', [32, 32]).output('y', 'f32', [32, 32])
        .dispatch('k.matmul_f32', { workgroups: [2, 2, 1], bindings: ['x', 'x', 'y'], constants: [32, 32, 32] })
        .trace('mm', ['y'])
        .dispatch('k.relu_f32', { workgroups: [2], bindings: ['y', 'y'], constants: [32 * 32] })), {
        instance, hal: { profile: true, debugSink: sink },
      });
    }

    it('writes Trace Event Format JSON: metadata, dispatches on a per-device track, traces as instants, invocations as spans', async () => {
      const file = path.join(dir, 'trace.json');
      const sink = halrt.sinks.chromeTrace(file);
      assert.ok(sink instanceof Object && typeof sink.close === 'function');
      assert.strictEqual(sink.path, file);
      const instance = new halrt.Instance();
      const otherUri = uri === 'local-sync' ? 'local-task?workers=1' : 'local-sync';
      const programs = [traced(sink, instance), makeProgram(otherUri, (b) => b.function('g', (f) => f
        .input('x', 'f32', [4]).output('y', 'f32', [4])
        .dispatch('k.relu_f32', { workgroups: [1], bindings: ['x', 'y'], constants: [4] })), { instance, hal: { profile: true, debugSink: sink } })];
      const fns = [programs[0].lookup('f'), programs[1].lookup('g')];
      const xs = [programs[0].device.tensor(randomFloats(32 * 32, 1), [32, 32]), programs[1].device.tensor(Float32Array.of(1, -1, 2, -2), [4])];
      try {
        const before = Number(process.hrtime.bigint()) / 1000;
        for (let i = 0; i < 3; ++i) closeAll(await fns[0].invoke([xs[0]]));
        closeAll(await fns[1].invoke([xs[1]]));
        const after = Number(process.hrtime.bigint()) / 1000;
        const events = JSON.parse(fs.readFileSync(file, 'utf8'));
        assert.ok(Array.isArray(events));
        for (const event of events) {
          for (const field of ['name', 'ph', 'pid', 'tid']) assert.ok(field in event, `${field} in ${JSON.stringify(event)}`);
          assert.strictEqual(event.pid, process.pid);
          if (event.ph !== 'M') assert.strictEqual(typeof event.ts, 'number', JSON.stringify(event));
          if (event.ph === 'X') assert.ok(typeof event.dur === 'number' && event.dur >= 0, JSON.stringify(event));
          if (event.ph !== 'M') assert.ok(event.ts >= before && event.ts <= after, `ts ${event.ts} within the run`);
        }
        const meta = events.filter((e) => e.ph === 'M');
        assert.deepStrictEqual(meta.find((e) => e.name === 'process_name').args, { name: 'halrt' });
        const threads = new Map(meta.filter((e) => e.name === 'thread_name').map((e) => [e.args.name, e.tid]));
        const tracks = [`queue ${programs[0].device.info.uri}`, `queue ${programs[1].device.info.uri}`];
        assert.deepStrictEqual([...threads.keys()].sort(), ['invocations', ...tracks].sort());
        const dispatches = events.filter((e) => e.cat === 'dispatch');
        assert.deepStrictEqual(dispatches.map((e) => [e.name, e.ph, e.tid]), [
          ...[0, 1, 2].flatMap(() => [['k.matmul_f32', 'X', threads.get(tracks[0])], ['k.relu_f32', 'X', threads.get(tracks[0])]]),
          ['k.relu_f32', 'X', threads.get(tracks[1])],
        ]);
        assert.deepStrictEqual(dispatches[0].args, { function: 'm.f', op: 0, sequence: dispatches[0].args.sequence });
        const onFirst = dispatches.filter((e) => e.tid === threads.get(tracks[0]));
        for (let i = 1; i < onFirst.length; ++i) {
          assert.ok(onFirst[i].ts >= onFirst[i - 1].ts, 'timestamps never decrease on a device track');
        }
        const instants = events.filter((e) => e.cat === 'trace');
        assert.strictEqual(instants.length, 3);
        for (const e of instants) {
          assert.deepStrictEqual([e.name, e.ph, e.s, e.tid], ['mm', 'i', 't', threads.get('invocations')]);
          assert.deepStrictEqual(e.args.tensors, [{ name: 'y', dtype: 'f32', shape: [32, 32] }]);
          assert.deepStrictEqual([e.args.function, e.args.op, e.args.dropped], ['m.f', 1, 0]);
        }
        const spans = events.filter((e) => e.cat === 'invocation');
        assert.deepStrictEqual(spans.map((e) => [e.name, e.ph, e.tid, e.args.ok]), [
          ['m.f', 'X', 1, true], ['m.f', 'X', 1, true], ['m.f', 'X', 1, true], ['m.g', 'X', 1, true],
        ]);
        // Each span holds its dispatches (sequences count per context: m.g's
        // invocation 1 is another context's).
        for (const span of spans.slice(0, 3)) {
          const mine = dispatches.filter((d) => d.args.function === span.name && d.args.sequence === span.args.sequence);
          assert.strictEqual(mine.length, 2);
          for (const d of mine) assert.ok(d.ts >= span.ts && d.ts + d.dur <= span.ts + span.dur + 1e-3, 'dispatch within its invocation');
        }
      } finally {
        sink.close();
        closeAll(xs, fns);
        for (const p of programs) p.close();
        instance.close();
      }
    });

    it('the file is valid JSON after close() mid-run, and later events are not written; close() is idempotent', async () => {
      const file = path.join(dir, 'closed.json');
      const sink = halrt.sinks.chromeTrace(file);
      let closedAfter = -1;
      let count = 0;
      // JavaScript sinks of a tee are called in order: the closer runs right
      // after the chrome trace has written the third trace.
      const closer = () => {
        count += 1;
        if (count === 3) {
          sink.close();
          closedAfter = JSON.parse(fs.readFileSync(file, 'utf8')).length;
        }
      };
      const p = traced(halrt.sinks.tee(sink, closer));
      const fn = p.lookup('f');
      const x = p.device.tensor(randomFloats(32 * 32, 2), [32, 32]);
      try {
        const results = await Promise.all(Array.from({ length: 8 }, () => fn.invoke([x])));
        closeAll(...results);
        sink.close();
        const events = JSON.parse(fs.readFileSync(file, 'utf8'));
        assert.strictEqual(events.length, closedAfter, 'nothing was written after close()');
        assert.strictEqual(events.filter((e) => e.cat === 'trace').length, 3);
      } finally {
        sink.close();
        closeAll(x, fn);
        p.close();
      }
    });

    it('the file is valid JSON when a child process calls process.exit() in the middle of a run', () => {
      const file = path.join(dir, 'exit.json');
      const result = spawnSync(process.execPath, ['-e', `
        const halrt = require(${LIB});
        const instance = new halrt.Instance();
        const device = instance.createDevice(${JSON.stringify(uri)});
        const sink = halrt.sinks.chromeTrace(${JSON.stringify(file)});
        let traces = 0;
        const exitAtSeventh = () => { if (++traces === 7) process.exit(0); };
        const hal = new halrt.HalModule(instance, device, { profile: true, traceDispatches: true, debugSink: halrt.sinks.tee(sink, exitAtSeventh) });
        const module = new halrt.ModuleBuilder('c').executable('k', { local: { builtin: true }, cuda: { builtin: true } })
          .function('f', (f) => f.input('x', 'f32', [4096]).output('y', 'f32', [4096])
            .dispatch('k.relu_f32', { workgroups: [4], bindings: ['x', 'y'], constants: [4096] }).trace('y', ['y']))
          .build(instance);
        const fn = new halrt.Context(instance, [hal, module]).lookupFunction('c.f');
        const x = device.tensor(new Float32Array(4096).fill(-1), [4096]);
        for (let i = 0; i < 50; ++i) fn.invoke([x]);
      `], { encoding: 'utf8', timeout: 20000 });
      assert.strictEqual(result.status, 0, result.stderr);
      const events = JSON.parse(fs.readFileSync(file, 'utf8'));
      assert.strictEqual(events.filter((e) => e.cat === 'trace').length, 7);
      assert.ok(events.filter((e) => e.cat === 'dispatch').length >= 4);
      assert.ok(events.every((e) => 'name' in e && 'ph' in e && 'pid' in e && 'tid' in e));
    });

    it('a bad path is INVALID_ARGUMENT, an unopenable one UNAVAILABLE', () => {
      for (const value of ['', 5, undefined]) {
        assertThrowsHalrt(() => halrt.sinks.chromeTrace(value), 'INVALID_ARGUMENT', 'halrt.sinks.chromeTrace: path must be a non-empty string');
      }
      const missing = path.join(dir, 'no', 'such', 'dir', 't.json');
      assertThrowsHalrt(() => halrt.sinks.chromeTrace(missing), 'UNAVAILABLE', `halrt.sinks.chromeTrace: cannot open '${missing}'`);
    });
  });
}
