'use strict';
// Which addon file lib/index.js loads (HALRT_ADDON, else node-gyp-build:
// build/Release/, then prebuilds/<platform>-<arch>/) and the HalrtError when
// none loads. Each case runs in a child process, most on a copy of the
// package's lib/ in a temporary node_modules/halrt with the build files the
// case needs.
const assert = require('assert');
const fs = require('fs');
const os = require('os');
const path = require('path');
const { spawnSync } = require('child_process');
const nodeGypBuild = require('node-gyp-build');

const ROOT = path.join(__dirname, '..');
const BUILT = path.join(ROOT, 'build', 'Release', 'halrt.node');
const TUPLE = `${process.platform}-${process.arch}`;

// Runs `source` in a child whose working directory is `cwd`; it prints what
// it found as JSON. HALRT_ADDON is only what `env` says (the sanitizer runs
// set it for the whole suite).
function child(source, { cwd = ROOT, env = {} } = {}) {
  const childEnv = { ...process.env, ...env };
  if (!('HALRT_ADDON' in env)) delete childEnv.HALRT_ADDON;
  const result = spawnSync(process.execPath, ['-e', source], { cwd, env: childEnv, encoding: 'utf8', timeout: 30000 });
  assert.strictEqual(result.status, 0, result.stderr);
  return JSON.parse(result.stdout);
}

// require('halrt') and report the error, or the .node files the process
// mapped and a tensor read back.
const PROBE = `
  const fs = require('fs');
  let halrt;
  try {
    halrt = require('halrt');
  } catch (error) {
    console.log(JSON.stringify({ name: error.name, code: error.code, message: error.message }));
    process.exit(0);
  }
  const device = new halrt.Instance().createDevice('local-sync');
  device.tensor([1, 2, 3]).read().then((values) => {
    const mapped = fs.readFileSync('/proc/self/maps', 'utf8').split('\\n')
      .map((line) => line.split(/\\s+/)[5]).filter((file) => file && file.endsWith('.node'));
    console.log(JSON.stringify({ mapped: [...new Set(mapped)], values: Array.from(values) }));
  });
`;

describe('loading the addon', function () {
  this.timeout(60000);
  let dir; // a project whose node_modules/halrt has lib/ and package.json, no build files
  let pkg; // dir/node_modules/halrt

  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'halrt-addon-load-'));
    pkg = path.join(dir, 'node_modules', 'halrt');
    fs.mkdirSync(pkg, { recursive: true });
    fs.cpSync(path.join(ROOT, 'lib'), path.join(pkg, 'lib'), { recursive: true });
    fs.copyFileSync(path.join(ROOT, 'package.json'), path.join(pkg, 'package.json'));
    fs.symlinkSync(path.join(ROOT, 'node_modules', 'node-gyp-build'), path.join(dir, 'node_modules', 'node-gyp-build'));
  });

  afterEach(() => {
    fs.rmSync(dir, { recursive: true, force: true });
  });

  function place(relative, from = BUILT) {
    fs.mkdirSync(path.dirname(path.join(pkg, relative)), { recursive: true });
    fs.copyFileSync(from, path.join(pkg, relative));
    return path.join(pkg, relative);
  }

  it('loads the prebuilt binary for this platform when there is no source build', () => {
    const prebuild = place(`prebuilds/${TUPLE}/halrt.glibc.node`);
    assert.deepStrictEqual(child(PROBE, { cwd: dir }), { mapped: [prebuild], values: [1, 2, 3] });
  });

  it('prefers a source build in build/Release over a prebuilt binary', () => {
    const built = place('build/Release/halrt.node');
    fs.mkdirSync(path.join(pkg, 'prebuilds', TUPLE), { recursive: true });
    fs.writeFileSync(path.join(pkg, 'prebuilds', TUPLE, 'halrt.glibc.node'), 'not an addon');
    assert.deepStrictEqual(child(PROBE, { cwd: dir }), { mapped: [built], values: [1, 2, 3] });
  });

  it('without a source build or a prebuilt binary for this platform: NOT_FOUND saying how to build', () => {
    place(`prebuilds/${process.platform}-${process.arch === 'arm64' ? 'x64' : 'arm64'}/halrt.glibc.node`);
    const error = child(PROBE, { cwd: dir });
    assert.strictEqual(error.name, 'HalrtError');
    assert.strictEqual(error.code, 'NOT_FOUND');
    assert.ok(error.message.startsWith(`halrt: no native addon for ${TUPLE} in ${pkg}: `), error.message);
    assert.match(error.message, new RegExp(`prebuilds/${TUPLE}/`));
    assert.match(error.message, /npm rebuild halrt --build-from-source/);
  });

  it('a prebuilt binary that does not load (another architecture): FAILED_PRECONDITION naming it', () => {
    // The ELF header's machine field (offset 18) of a copy set to aarch64 or x86-64.
    const prebuild = place(`prebuilds/${TUPLE}/halrt.glibc.node`);
    const bytes = fs.readFileSync(prebuild);
    bytes.writeUInt16LE(bytes.readUInt16LE(18) === 0xb7 ? 0x3e : 0xb7, 18);
    fs.writeFileSync(prebuild, bytes);
    const error = child(PROBE, { cwd: dir });
    assert.deepStrictEqual([error.name, error.code], ['HalrtError', 'FAILED_PRECONDITION']);
    assert.ok(error.message.startsWith(`halrt: cannot load the native addon ${prebuild}: `), error.message);
  });

  it('HALRT_ADDON naming a missing file: NOT_FOUND naming the file and the variable', () => {
    const missing = path.join(dir, 'nowhere', 'halrt.node');
    place('build/Release/halrt.node');
    const error = child(PROBE, { cwd: dir, env: { HALRT_ADDON: missing } });
    assert.deepStrictEqual(error, {
      name: 'HalrtError',
      code: 'NOT_FOUND',
      message: `halrt: the native addon ${missing} (named by HALRT_ADDON) does not exist`,
    });
  });

  it('HALRT_ADDON naming a file that is not an addon: FAILED_PRECONDITION', () => {
    const junk = path.join(dir, 'junk.node');
    fs.writeFileSync(junk, 'not an addon');
    const error = child(PROBE, { cwd: dir, env: { HALRT_ADDON: junk } });
    assert.deepStrictEqual([error.name, error.code], ['HalrtError', 'FAILED_PRECONDITION']);
    assert.ok(error.message.startsWith(`halrt: cannot load the native addon ${junk} (named by HALRT_ADDON): `), error.message);
  });

  it('HALRT_ADDON, relative to the working directory, replaces the search', () => {
    place('build/Release/halrt.node');
    const other = path.join(dir, 'other.node');
    fs.copyFileSync(BUILT, other);
    assert.deepStrictEqual(child(PROBE, { cwd: dir, env: { HALRT_ADDON: 'other.node' } }), { mapped: [other], values: [1, 2, 3] });
  });

  it("in this checkout, halrt.node is the first .node file of build/Release (the benchmarks' addon sorts after it)", () => {
    assert.ok(fs.existsSync(path.join(ROOT, 'build', 'Release', 'halrt_bench_ref.node')));
    assert.strictEqual(nodeGypBuild.resolve(ROOT), BUILT);
  });
});
